"""Chat templates: the Jinja text transformers' ``apply_chat_template`` renders, written to
``tokenizer_config.json``'s ``chat_template``.

``--chat-template`` names a template toktok ships (:data:`NAMED`: ``chatml``, ``llama3``), whose
special tokens the run must define, or a Jinja file, read and parsed before any work (with
``jinja2`` when it is installed: transformers needs it to render a template anyway). A name wins
over a file of the same name; write ``./chatml`` for the file.
Example: ``resolve("chatml", "--chat-template").specials == ("<|im_start|>", "<|im_end|>")``.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from ..errors import ConfigError, not_regular
from ..options import at

# ChatML (OpenAI's chat markup, as Qwen and many others use it): each message is
# <|im_start|>ROLE\nCONTENT<|im_end|>\n; the generation prompt opens an assistant message.
CHATML = (
    "{%- for message in messages -%}"
    "{{- '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' -}}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\n' -}}{%- endif -%}"
)

# Llama 3 Instruct: <|begin_of_text|> once, then per message a header
# <|start_header_id|>ROLE<|end_header_id|>\n\n, the content trimmed, and <|eot_id|>. Meta's own
# template writes the first token as bos_token; this one spells it, so that it renders the same
# whatever roles the run gives.
LLAMA3 = (
    "{{- '<|begin_of_text|>' -}}"
    "{%- for message in messages -%}"
    "{{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n' + message['content'] | trim"
    " + '<|eot_id|>' -}}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|start_header_id|>assistant<|end_header_id|>\n\n' -}}{%- endif -%}"
)


@dataclass(frozen=True)
class ChatTemplate:
    """A chat template: its ``name`` (a named one's, else the file's path), Jinja ``text`` and the
    special tokens it writes (``specials``: a named one's; a file's are not known)."""

    name: str
    text: str
    specials: tuple[str, ...] = ()


#: The templates toktok ships, by name.
NAMED: dict[str, ChatTemplate] = {
    "chatml": ChatTemplate("chatml", CHATML, ("<|im_start|>", "<|im_end|>")),
    "llama3": ChatTemplate("llama3", LLAMA3, ("<|begin_of_text|>", "<|start_header_id|>", "<|end_header_id|>",
                                              "<|eot_id|>")),
}


def resolve(value: str | os.PathLike, where: str) -> ChatTemplate:
    """The template ``value`` names: one of :data:`NAMED`, else a Jinja file, read and parsed.
    ConfigError naming ``where`` (``--chat-template``, ``run.yaml: chat_template:``) and the fix."""
    text = os.fspath(value)
    if text in NAMED:
        return NAMED[text]
    p = Path(text).expanduser()
    names = ", ".join(NAMED)
    kind = not_regular(p)
    if kind is not None:
        raise ConfigError(f"{at(where, text)}: not a regular file ({kind}); give a Jinja file or one of {names}")
    try:
        body = p.read_bytes()
    except FileNotFoundError:
        raise ConfigError(f"{at(where, text)}: no such file and no template of that name; give a Jinja file or "
                          f"one of {names}") from None
    except IsADirectoryError:
        raise ConfigError(f"{at(where, text)}: is a folder; give a Jinja file or one of {names}") from None
    except OSError as e:
        raise ConfigError(f"{at(where, text)}: cannot read ({e.strerror or e}); give a readable Jinja file") from None
    try:
        source = body.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise ConfigError(f"{at(where, text)}: not UTF-8 (byte {e.start}); save the template as UTF-8") from None
    if not source.strip():
        raise ConfigError(f"{at(where, text)}: the file is empty; give a Jinja chat template")
    check_jinja(source, at(where, text))
    return ChatTemplate(str(p), source)


def check_jinja(source: str, where: str) -> None:
    """Parse ``source`` as transformers does (its ``generation`` block and loop controls known);
    ConfigError naming the line on a syntax error. Nothing is checked without ``jinja2``."""
    try:
        import jinja2
        from jinja2 import nodes
        from jinja2.ext import Extension
    except ImportError:  # transformers cannot render it either; it is checked where it is used
        return

    class Generation(Extension):
        """transformers' ``{% generation %}...{% endgeneration %}`` (it marks the assistant's text)."""

        tags = {"generation"}

        def parse(self, parser):
            lineno = next(parser.stream).lineno
            body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
            return nodes.Scope(body, lineno=lineno)

    env = jinja2.Environment(trim_blocks=True, lstrip_blocks=True,
                             extensions=[Generation, "jinja2.ext.loopcontrols"])
    try:
        env.parse(source)
    except jinja2.TemplateSyntaxError as e:
        msg = " ".join(str(e.message or e).split())[:120]
        raise ConfigError(f"{where}:{e.lineno}: not a valid Jinja template ({msg}); fix the template there") from None


def check_specials(tpl: ChatTemplate, specials: list[str], where: str) -> None:
    """Every special token a named template writes is one of the run's ``specials``; else one
    ConfigError naming the missing ones and how to add them."""
    missing = [s for s in tpl.specials if s not in specials]
    if missing:
        many = len(missing) > 1
        raise ConfigError(f"{at(where, tpl.name)}: needs the special token{'s' if many else ''} "
                          f"{', '.join(repr(s) for s in missing)}, which the run does not define; add "
                          f"{'each' if many else 'it'} with --special-token (special_tokens: in a config)")


#: What a chat template writes that reads as a special token: ``<|im_start|>``, ``<|eot_id|>``.
_TOKEN_LIKE = re.compile(r"<\|[^\s|<>'\"]{1,64}\|>")


def unknown_specials(tpl: ChatTemplate, specials: list[str], where: str) -> str | None:
    """The warning for a template file that writes tokens spelled as special tokens
    (``<|name|>``) the run does not define: the tokenizer would encode them as plain text, not as
    the one id a model learns. A warning, not a refusal (a named template's are refused:
    :func:`check_specials`), since a file may spell such text on purpose. None when there is none."""
    if tpl.specials:
        return None
    unknown = list(dict.fromkeys(t for t in _TOKEN_LIKE.findall(tpl.text) if t not in specials))
    if not unknown:
        return None
    many = len(unknown) > 1
    listed = ", ".join(repr(t) for t in unknown[:4]) + (f" and {len(unknown) - 4} more" if len(unknown) > 4 else "")
    return (f"{at(where, tpl.name)}: writes {listed}, which {'are' if many else 'is'} not a special token of the run "
            f"(encoded as plain text); add {'each' if many else 'it'} with --special-token if the model is to "
            "see one id")


__all__ = ["ChatTemplate", "NAMED", "CHATML", "LLAMA3", "resolve", "check_jinja", "check_specials",
           "unknown_specials"]
