"""Special tokens with Hugging Face's added-token flags, and HF's matching of them as tiktoken sees it.

A special token is its text, or a :class:`SpecialToken`: the text with the flags HF tokenizers keeps
for an added token (``lstrip``, ``rstrip``, ``single_word``, ``normalized``, ``special``), written
to ``tokenizer.json``'s ``added_tokens`` and ``tokenizer_config.json``'s ``added_tokens_decoder``.
``SpecialToken`` is a ``str`` (equal to, and hashed as, its text), so lists of specials hold both.

HF honours the flags when it encodes: ``lstrip``/``rstrip`` take the whitespace beside the token
into it (that whitespace gets no id), ``single_word`` matches the token only where no word
character touches it (elsewhere its text is ordinary text), ``normalized`` tokens are matched in a
second pass, in the pieces the others left. tiktoken has none of this: with
``allowed_special="all"`` every occurrence is the special token and whitespace is text.
:func:`split_like_hf` cuts a text as HF does (a port of tokenizers' ``AddedVocabulary``), and
:func:`encode_like_hf` gives HF's ids with tiktoken: each special piece its id, each ordinary piece
``encode_ordinary``. A tokenizer whose specials all have the default flags (the usual case) gives
the same ids as ``enc.encode(text, allowed_special="all")``; ``verify`` compares HF with
:func:`encode_like_hf` either way.
Example: ``split_like_hf("a <e> b", {"<e>": {"lstrip": True}}) == [("a", None), (" <e>", "<e>"), (" b", None)]``.
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Iterable, Mapping

from .errors import ConfigError, VocabError, shown

#: The flags of an added token and their defaults for a special token (HF's ``AddedToken(special=True)``).
FLAGS: dict[str, bool] = {"single_word": False, "lstrip": False, "rstrip": False, "normalized": False,
                          "special": True}
#: The flags that change how HF cuts a text (``normalized`` changes it only where specials overlap).
MATCHING = ("lstrip", "rstrip", "single_word")


class SpecialToken(str):
    """A special token's text with HF's added-token flags: ``SpecialToken("<|eot|>", rstrip=True)``.

    It is a ``str`` equal to its text, so it stands wherever a special token's text does; ``flags``
    holds all five flags (defaults: :data:`FLAGS`). ``config()`` is how a config records it: the
    text alone when every flag is the default, else ``{"content": text, <flags that differ>}``.
    """

    lstrip: bool
    rstrip: bool
    single_word: bool
    normalized: bool
    special: bool

    def __new__(cls, content: str, *, lstrip: bool = False, rstrip: bool = False, single_word: bool = False,
                normalized: bool = False, special: bool = True) -> SpecialToken:
        self = super().__new__(cls, content)
        self.lstrip, self.rstrip, self.single_word = lstrip, rstrip, single_word
        self.normalized, self.special = normalized, special
        return self

    @property
    def content(self) -> str:
        return str(self)

    @property
    def flags(self) -> dict[str, bool]:
        return {k: getattr(self, k) for k in FLAGS}

    def config(self) -> str | dict:
        changed = {k: v for k, v in self.flags.items() if v != FLAGS[k]}
        return {"content": str(self), **changed} if changed else str(self)

    def __repr__(self) -> str:
        changed = "".join(f", {k}={v}" for k, v in self.flags.items() if v != FLAGS[k])
        return f"SpecialToken({str(self)!r}{changed})"

    def __reduce__(self):
        return _rebuild, (str(self), self.flags)

    __hash__ = str.__hash__


def _rebuild(content: str, flags: dict) -> SpecialToken:
    return SpecialToken(content, **flags)


def flags_of(token: str) -> dict[str, bool]:
    """The five flags of a special token (the defaults for a plain ``str``)."""
    return token.flags if isinstance(token, SpecialToken) else dict(FLAGS)


def special_token(value: Any, where: str) -> str:
    """One entry of ``special_tokens`` as given: a text, a :class:`SpecialToken`, or a mapping
    ``{content: TEXT, rstrip: true, ...}`` (YAML, Python). Returns the text (a plain ``str``) or a
    ``SpecialToken`` when a flag differs from its default; ConfigError naming ``where`` (the entry)."""
    if isinstance(value, SpecialToken):
        return value if value.config() != str(value) else str(value)
    if isinstance(value, str):
        if not value:
            raise ConfigError(f"{where}: is empty; give the token's text")
        return value
    if not isinstance(value, Mapping):
        raise ConfigError(f"{where}: expected the token's text or a mapping {{content: TEXT, rstrip: true, ...}}, "
                          f"got {type(value).__name__}")
    unknown = [k for k in value if k != "content" and k not in FLAGS]
    if unknown:
        raise ConfigError(f"{where}: unknown key {shown(unknown[0])}; use content and {', '.join(FLAGS)}")
    content = value.get("content")
    if not isinstance(content, str) or not content:
        raise ConfigError(f"{where}: needs content: the token's text, e.g. {{content: '<|eot|>', rstrip: true}}")
    flags = {}
    for k in FLAGS:
        if k in value:
            if not isinstance(value[k], bool):
                raise ConfigError(f"{where}.{k}: expected true or false, got {shown(value[k])}")
            flags[k] = value[k]
    tok = SpecialToken(content, **flags)
    return tok if tok.config() != content else content


def added_flags(tokens: Iterable[str]) -> dict[str, dict[str, bool]]:
    """``{text: flags}`` of the tokens with a flag that differs from its default."""
    return {str(t): t.flags for t in tokens if isinstance(t, SpecialToken) and t.config() != str(t)}


def read_added(tokenizer_json: str | os.PathLike) -> dict[str, dict[str, bool]]:
    """``{content: flags}`` of every added token of a ``tokenizer.json`` (or a folder holding one);
    {} without the file. Example: ``read_added("out/chat")["<|eot|>"]["rstrip"]``."""
    p = Path(tokenizer_json)
    if p.is_dir():
        p = p / "tokenizer.json"
    if not p.is_file():
        return {}
    try:
        doc = json.loads(p.read_bytes())
        return {a["content"]: {k: bool(a.get(k, FLAGS[k])) for k in FLAGS} for a in doc.get("added_tokens") or []}
    except (OSError, ValueError, TypeError, KeyError, AttributeError) as e:
        raise VocabError(f"{p}: cannot read added_tokens ({e})") from None


def _classes():
    import regex

    # Rust's regex (HF tokenizers): \s is White_Space, \w is Alphabetic, M, Nd, Pc and Join_Control.
    return (regex.compile(r"\p{White_Space}"), regex.compile(r"\p{White_Space}*"),
            regex.compile(r"[\p{Alphabetic}\p{M}\p{Nd}\p{Pc}\p{Join_Control}]"))


_RE: tuple | None = None


def _find_matches(sentence: str, tokens: dict[str, dict]) -> list[tuple[str, str | None]]:
    """tokenizers' ``AddedVocabulary::find_matches`` on one piece: the leftmost-longest
    non-overlapping matches of ``tokens``, a ``single_word`` token skipped where a word character
    touches it, ``lstrip``/``rstrip`` taking the whitespace beside a match (never what an earlier
    match took); the pieces between, unmatched. Offsets are on characters, which changes nothing:
    every bound falls between characters in both."""
    global _RE
    if not sentence or not tokens:
        return [(sentence, None)]
    import regex

    if _RE is None:
        _RE = _classes()
    space, spaces, word = _RE
    alts = "|".join(regex.escape(t) for t in sorted(tokens, key=len, reverse=True))
    out: list[tuple[str, str | None]] = []
    at = 0  # the end of the last match, with what it stripped
    for m in regex.finditer(alts, sentence):
        start, stop = m.start(), m.end()
        fl = tokens[m.group()]
        if fl.get("single_word"):
            if (start > 0 and word.match(sentence, start - 1)) or (stop < len(sentence) and word.match(sentence, stop)):
                continue
        if fl.get("lstrip"):  # back over the whitespace before it, not into an earlier match's
            while start > at and space.match(sentence, start - 1):
                start -= 1
            start = max(start, at)
        if fl.get("rstrip"):
            stop = spaces.match(sentence, stop).end()
        if at < start:
            out.append((sentence[at:start], None))
        out.append((sentence[start:stop], m.group()))
        at = stop
    if at != len(sentence):
        out.append((sentence[at:], None))
    return out


def split_like_hf(text: str, tokens: Mapping[str, Mapping[str, bool]]) -> list[tuple[str, str | None]]:
    """``text`` cut as HF tokenizers cuts it on its added tokens ``{content: flags}`` (no
    normalizer, as toktok writes): ``(piece, token)`` for each added token matched (the piece holds
    the whitespace it stripped), ``(piece, None)`` for the ordinary text between. Tokens not
    ``normalized`` are matched first, on the whole text; ``normalized`` ones then in each unmatched
    piece. Example: ``split_like_hf("x<e> y", {"<e>": {"rstrip": True}})[1] == ("<e> ", "<e>")``."""
    first = {t: dict(f) for t, f in tokens.items() if not f.get("normalized")}
    second = {t: dict(f) for t, f in tokens.items() if f.get("normalized")}
    pieces = _find_matches(text, first)
    if second:
        pieces = [q for p, tok in pieces for q in ([(p, tok)] if tok is not None else _find_matches(p, second))]
    return [(p, tok) for p, tok in pieces if p or tok is not None] or [("", None)]


def needs_split(tokens: Mapping[str, Mapping[str, bool]]) -> bool:
    """Whether HF cuts text on these tokens otherwise than tiktoken's ``allowed_special="all"``
    could: a matching flag set, or some tokens ``normalized`` and others not (two passes)."""
    kinds = {bool(f.get("normalized")) for f in tokens.values()}
    return len(kinds) > 1 or any(f.get(k) for f in tokens.values() for k in MATCHING)


def encode_like_hf(enc, text: str, added: Mapping[str, Mapping[str, bool]] | str | os.PathLike) -> list[int]:
    """HF's ids for ``text`` from a ``tiktoken.Encoding``: the text cut as HF cuts it
    (:func:`split_like_hf`), each added token its id, each ordinary piece ``enc.encode_ordinary``.
    ``added``: ``{content: flags}``, or the tokenizer folder / tokenizer.json to read them from.
    Example: ``encode_like_hf(toktok.load_encoding("out/chat"), "hi <|eot|>\\n", "out/chat")``."""
    if not isinstance(added, Mapping):
        added = read_added(added)
    added = {t: f for t, f in added.items() if t in enc.special_tokens_set}
    if not needs_split(added):
        return enc.encode(text, allowed_special="all")
    out: list[int] = []
    for piece, tok in split_like_hf(text, added):
        if tok is not None:
            out.append(enc.encode_single_token(tok))
        elif piece:
            out += enc.encode_ordinary(piece)
    return out


def text_like_hf(text: str, added: Mapping[str, Mapping[str, bool]]) -> str:
    """What HF decodes its ids of ``text`` back to: the text without the whitespace that
    ``lstrip``/``rstrip`` tokens took. Example: ``text_like_hf("a <e> b", {"<e>": {"lstrip": True}}) == "a<e> b"``."""
    if not needs_split(added):
        return text
    return "".join(tok if tok is not None else piece for piece, tok in split_like_hf(text, added))


__all__ = ["SpecialToken", "FLAGS", "special_token", "added_flags", "flags_of", "read_added", "split_like_hf",
           "encode_like_hf", "text_like_hf", "needs_split"]
