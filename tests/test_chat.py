"""Chat templates and added-token flags: transformers' ``apply_chat_template`` on toktok's output
gives tiktoken's ids on the rendered text.

Two real runs: one with plain special tokens and ``chat_template="chatml"`` (and a copy of it
carrying a custom Jinja template), one from a YAML config with ``llama3`` and per-token flags
(``rstrip``, ``lstrip``, ``single_word``, ``special: false``). For the second, HF strips the
whitespace beside the flagged tokens, so its ids are ``toktok.added.encode_like_hf``'s (tiktoken on
the text cut as HF cuts it), which is what the per-run verification compares; a hypothesis test
holds ``encode_like_hf`` to HF tokenizers on random texts with every flag.
"""
from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import duckdb
import pytest
import tiktoken
from conftest import FIXTURES, one_error_line
from hypothesis import given, strategies as st
from typer.testing import CliRunner

import toktok
from toktok.added import FLAGS, SpecialToken, encode_like_hf, read_added, split_like_hf, text_like_hf
from toktok.cli import app
from toktok.errors import ConfigError
from toktok.formats.chat import CHATML, LLAMA3, NAMED, check_jinja, resolve

runner = CliRunner()
MERGES = 300
CHATML_SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
LLAMA3_SPECIALS = ["<|begin_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"]

# A custom template (Mistral-like [INST] blocks around the user's turns, system text folded into
# the first one), written as a user would write a file.
CUSTOM = """{{- bos_token }}
{%- for message in messages %}
  {%- if message['role'] == 'user' %}
{{- '[INST] ' + message['content'] | trim + ' [/INST]' }}
  {%- elif message['role'] == 'assistant' %}
{{- ' ' + message['content'] + eos_token }}
  {%- else %}
{{- '<<SYS>>\\n' + message['content'] + '\\n<</SYS>>\\n\\n' }}
  {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}{{ ' ' }}{% endif %}
"""

CONVERSATIONS = [
    [{"role": "user", "content": "Hello!"}],
    [{"role": "system", "content": "You are a terse assistant. Answer in one line."},
     {"role": "user", "content": "What is 12 * 34?  Show   the work.\n"},
     {"role": "assistant", "content": "12 * 34 = 408 (10*34 + 2*34 = 340 + 68)."},
     {"role": "user", "content": "And in French? Réponds en français, s'il te plaît."}],
    [{"role": "user", "content": "  leading and trailing whitespace\t\n\n"},
     {"role": "assistant", "content": "\n\nCode:\n```python\ndef f(x):\n    return x ** 2\n```\n"},
     {"role": "user", "content": "中文 😀 Привет <think> and a literal <|im_end|>-looking text"}],
]


def _texts() -> list[str]:
    import polars as pl

    return pl.read_parquet(FIXTURES / "sample.parquet")["text"].head(80).to_list() + [
        m["content"] for conv in CONVERSATIONS for m in conv]


def _ids(out) -> list:
    return out["input_ids"] if hasattr(out, "keys") else out


@pytest.fixture(scope="module")
def chatml_run(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("chat") / "chatml"
    toktok.train([_texts()], out=out, merges=MERGES, special_tokens=CHATML_SPECIALS, chat_template="chatml",
                 verbose=False)
    return out


@pytest.fixture(scope="module")
def llama3_run(tmp_path_factory) -> tuple[Path, Path]:
    """A YAML config with llama3 and flags, run by the command line; returns (folder, .tiktoken)."""
    d = tmp_path_factory.mktemp("chat")
    (d / "texts.txt").write_text("\n\n".join(_texts()), encoding="utf-8")
    (d / "run.yaml").write_text(f"""\
output: {d / "out" / "llama.tiktoken"}
special_tokens:
  - "<|begin_of_text|>"
  - {{content: "<|start_header_id|>"}}
  - {{content: "<|end_header_id|>", rstrip: true}}
  - {{content: "<|eot_id|>", lstrip: true, rstrip: true}}
  - {{content: "<think>", single_word: true, special: false}}
chat_template: llama3
roles: {{bos_token: "<|begin_of_text|>", eos_token: "<|eot_id|>"}}
phases: [{{name: main, merges: {MERGES}, sources: [{{path: {d / "texts.txt"}}}]}}]
""", encoding="utf-8")
    r = runner.invoke(app, ["-c", str(d / "run.yaml"), "-q"])
    assert r.exit_code == 0, r.output
    return d / "out", d / "out" / "llama.tiktoken"


def _hf(folder: Path):
    from transformers import PreTrainedTokenizerFast

    return PreTrainedTokenizerFast.from_pretrained(str(folder))


# --- the templates -----------------------------------------------------------------------------


def test_named_templates_parse_and_name_their_specials():
    assert set(NAMED) >= {"chatml", "llama3"}
    for name, tpl in NAMED.items():
        check_jinja(tpl.text, name)
        assert resolve(name, "--chat-template") is tpl and all(s in tpl.text for s in tpl.specials)
    assert NAMED["chatml"].specials == ("<|im_start|>", "<|im_end|>") and NAMED["chatml"].text == CHATML
    assert set(NAMED["llama3"].specials) == set(LLAMA3_SPECIALS) and NAMED["llama3"].text == LLAMA3


def test_a_template_file_is_read_and_checked(tmp_path):
    f = tmp_path / "t.jinja"
    f.write_text(CUSTOM, encoding="utf-8")
    assert resolve(str(f), "--chat-template").text == CUSTOM
    bad = tmp_path / "bad.jinja"
    bad.write_text("{% for m in messages %}\n{{ m['content'] }\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"^--chat-template .*bad\.jinja:2: not a valid Jinja template"):
        resolve(str(bad), "--chat-template")
    with pytest.raises(ConfigError, match="no such file and no template of that name; give a Jinja file or one of "
                                          "chatml, llama3"):
        resolve(str(tmp_path / "nope.jinja"), "chat_template=")
    (tmp_path / "empty.jinja").write_text("  \n")
    with pytest.raises(ConfigError, match="the file is empty"):
        resolve(str(tmp_path / "empty.jinja"), "--chat-template")


# --- apply_chat_template == tiktoken on the rendered text ---------------------------------------


@pytest.mark.parametrize("template", ["chatml", "custom"])
def test_apply_chat_template_gives_tiktokens_ids(chatml_run, tmp_path, template):
    folder = chatml_run
    if template == "custom":  # the same tokenizer with a template file, as --chat-template FILE writes it
        folder = tmp_path / "custom"
        shutil.copytree(chatml_run, folder)
        (tmp_path / "t.jinja").write_text(CUSTOM, encoding="utf-8")
        cfg = json.loads((folder / "tokenizer_config.json").read_text())
        cfg["chat_template"] = resolve(str(tmp_path / "t.jinja"), "--chat-template").text
        cfg["bos_token"] = cfg["eos_token"] = "<|endoftext|>"
        (folder / "tokenizer_config.json").write_text(json.dumps(cfg))
    cfg = json.loads((folder / "tokenizer_config.json").read_text())
    assert cfg["chat_template"] == (CHATML if template == "chatml" else CUSTOM)
    tok, enc = _hf(folder), toktok.load_encoding(folder)
    for conv in CONVERSATIONS:
        for gen in (False, True):
            text = tok.apply_chat_template(conv, tokenize=False, add_generation_prompt=gen)
            ids = _ids(tok.apply_chat_template(conv, tokenize=True, add_generation_prompt=gen))
            assert ids == enc.encode(text, allowed_special="all"), (template, gen, text)
            assert enc.decode(ids) == tok.decode(ids) == text
            assert (template == "chatml") <= (text.endswith("<|im_start|>assistant\n") == gen)


def test_llama3_with_flags_gives_hfs_cut_of_the_rendered_text(llama3_run):
    folder, tt = llama3_run
    tok, enc = _hf(folder), toktok.load_encoding(tt)
    assert tok.bos_token == "<|begin_of_text|>" and tok.eos_token == "<|eot_id|>"
    for conv in CONVERSATIONS:
        for gen in (False, True):
            text = tok.apply_chat_template(conv, tokenize=False, add_generation_prompt=gen)
            ids = _ids(tok.apply_chat_template(conv, tokenize=True, add_generation_prompt=gen))
            assert text.startswith("<|begin_of_text|><|start_header_id|>")
            assert text.endswith("<|start_header_id|>assistant<|end_header_id|>\n\n") == gen
            # HF takes the "\n\n" after <|end_header_id|> into it: tiktoken gets it as HF cuts the text
            assert ids == encode_like_hf(enc, text, folder) != enc.encode(text, allowed_special="all")
            assert ids == enc.encode(text_like_hf(text, read_added(folder)), allowed_special="all")
            assert tok.decode(ids) == enc.decode(ids) == text_like_hf(text, read_added(folder))


def test_flags_are_written_recorded_and_verified(llama3_run):
    folder, tt = llama3_run
    doc = json.loads((folder / "tokenizer.json").read_text())
    flags = {a["content"]: {k: a[k] for k in FLAGS} for a in doc["added_tokens"]}
    assert flags["<|end_header_id|>"] == {**FLAGS, "rstrip": True}
    assert flags["<|eot_id|>"] == {**FLAGS, "lstrip": True, "rstrip": True}
    assert flags["<think>"] == {**FLAGS, "single_word": True, "special": False}
    assert flags["<|begin_of_text|>"] == flags["<|start_header_id|>"] == FLAGS
    cfg = json.loads((folder / "tokenizer_config.json").read_text())
    assert {e["content"]: {k: e[k] for k in FLAGS} for e in cfg["added_tokens_decoder"].values()} == flags
    assert cfg["chat_template"] == LLAMA3
    # a token that is not special is an added token for transformers, not one of its specials
    assert "<think>" not in cfg["additional_special_tokens"] and "<think>" not in _hf(folder).all_special_tokens
    # ... and its id is declared beside the .tiktoken, where tokenizer.json's specials would not say it
    declared = json.loads(tt.with_name("llama.special_tokens.json").read_text())
    assert declared["<think>"] == toktok.load_encoding(tt).encode_single_token("<think>")
    with duckdb.connect(str(folder / "run.duckdb"), read_only=True) as con:
        recorded = json.loads(con.execute("select value from meta where key = 'config'").fetchone()[0])
    assert recorded["special_tokens"] == [
        "<|begin_of_text|>", "<|start_header_id|>", {"content": "<|end_header_id|>", "rstrip": True},
        {"content": "<|eot_id|>", "lstrip": True, "rstrip": True},
        {"content": "<think>", "single_word": True, "special": False}]
    r = runner.invoke(app, ["verify", str(tt), str(FIXTURES / "notes.txt")])
    assert r.exit_code == 0, r.output


def test_flags_from_python_are_the_same_as_from_yaml(llama3_run, tmp_path):
    folder, tt = llama3_run
    r = toktok.train(str(tt.parent.parent / "texts.txt"), output=tmp_path / "llama.tiktoken", merges=MERGES,
                     special_tokens=["<|begin_of_text|>", {"content": "<|start_header_id|>"},
                                     {"content": "<|end_header_id|>", "rstrip": True},
                                     SpecialToken("<|eot_id|>", lstrip=True, rstrip=True),
                                     {"content": "<think>", "single_word": True, "special": False}],
                     chat_template="llama3", roles={"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"},
                     verbose=False)
    for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        assert (r.out / name).read_bytes() == (folder / name).read_bytes(), name
    assert r.tiktoken.read_bytes() == tt.read_bytes()


# --- the cut HF makes, held to HF tokenizers ----------------------------------------------------

FLAGGED = {"<|a|>": {"lstrip": True}, "<|b|>": {"rstrip": True}, "<c>": {"lstrip": True, "rstrip": True},
           "[W]": {"single_word": True}, "<n>": {"normalized": True, "rstrip": True}, "<s>": {},
           "<w>": {"single_word": True, "lstrip": True, "special": False}}
PIECES = [*FLAGGED, " ", "  ", "\t", "\n", "\r\n", "\u3000", "\u00a0", "\u2028", "\x1c", "\u0085", "\u200b", "x",
          "é", "_", "7", "-", "\u0301", "\u200d", "ab", "Ω", "中", "<", "|>"]


@pytest.fixture(scope="module")
def flagged(tmp_path_factory):
    from toktok.formats.hf import load_hf, write_hf
    from toktok.formats.tiktoken import write_tiktoken
    from toktok.vocab import Vocab

    out = tmp_path_factory.mktemp("flagged")
    v = Vocab(Vocab.base().tokens, list(FLAGGED))
    added = {k: {**FLAGS, **f} for k, f in FLAGGED.items()}
    write_hf(v, out, added=added)
    write_tiktoken(v, out / "tokenizer.tiktoken")
    enc = toktok.load_encoding(out, special_tokens=list(FLAGGED))
    return enc, load_hf(out), out


@given(st.lists(st.sampled_from(PIECES), max_size=14))
def test_encode_like_hf_is_hf_tokenizers_on_any_text(flagged, pieces):
    enc, hf, out = flagged
    text = "".join(pieces)
    e = hf.encode(text, add_special_tokens=False)
    added = read_added(out)
    assert encode_like_hf(enc, text, added) == e.ids
    assert hf.decode(e.ids, skip_special_tokens=False) == text_like_hf(text, added)


def test_split_like_hf_examples():
    fl = {k: {**FLAGS, **f} for k, f in FLAGGED.items()}
    assert split_like_hf("a <|a|> b", fl) == [("a", None), (" <|a|>", "<|a|>"), (" b", None)]
    assert split_like_hf("x<|b|>\n\n y", fl) == [("x", None), ("<|b|>\n\n ", "<|b|>"), ("y", None)]
    # single_word: not where a word character touches it (then it is ordinary text)
    assert split_like_hf("a[W] [W]", fl) == [("a[W] ", None), ("[W]", "[W]")]
    # lstrip never takes what the token before took with rstrip
    assert split_like_hf("<|b|>  <|a|>", fl) == [("<|b|>  ", "<|b|>"), ("<|a|>", "<|a|>")]


# --- what goes wrong, said in one line before any work -----------------------------------------


def test_a_named_templates_missing_special_is_one_line_before_any_work(tmp_path):
    out = tmp_path / "o"
    r = runner.invoke(app, ["train", str(FIXTURES / "notes.txt"), "--out", str(out), "-s", "<|begin_of_text|>",
                            "-s", "<|eot_id|>", "--chat-template", "llama3", "-q"])
    line = one_error_line(r, "--chat-template llama3", "'<|start_header_id|>', '<|end_header_id|>'", "--special-token")
    assert "<|eot_id|>" not in line and len(line) <= 300 and not out.exists()
    with pytest.raises(ConfigError, match=r"^chat_template[ =]chatml: needs the special tokens '<\|im_start\|>', "):
        toktok.train(str(FIXTURES / "notes.txt"), out=out, chat_template="chatml", verbose=False)
    assert not out.exists()


@pytest.mark.parametrize("entry, needles", [
    ('{content: "<|eot|>", rstrp: true}', ["run.yaml: special_tokens[1]: unknown key 'rstrp'", "lstrip, rstrip"]),
    ('{content: "<|eot|>", rstrip: "yes"}', ["run.yaml: special_tokens[1].rstrip: expected true or false"]),
    ('{rstrip: true}', ["run.yaml: special_tokens[1]: needs content"]),
    ('{content: "<|x|>"}', ["run.yaml: special_tokens[1]: '<|x|>' is given twice"]),
])
def test_bad_flags_in_a_config_are_one_line(tmp_path, entry, needles):
    cfg = tmp_path / "run.yaml"
    cfg.write_text(f'output: {tmp_path / "o" / "t.tiktoken"}\nspecial_tokens: ["<|x|>", {entry}]\n'
                   f'phases: [{{name: a, merges: 5, sources: [{FIXTURES / "notes.txt"}]}}]\n')
    one_error_line(runner.invoke(app, ["-c", str(cfg), "-q"]), *needles)
    assert not (tmp_path / "o").exists()


def test_hf_needs_transformers_and_says_so(chatml_run, monkeypatch):
    from toktok.api import TrainResult

    r = TrainResult(out=chatml_run, vocab_size=0, merges_requested=0, merges_learned=0, reused_merges=0, words=0,
                    docs=0, text_bytes=0)
    monkeypatch.setitem(sys.modules, "transformers", None)  # as if it were not installed
    with pytest.raises(ConfigError) as e:
        r.hf()
    assert str(e.value) == ("TrainResult.hf() needs transformers: pip install 'toktok[transformers]' (or load "
                            "tokenizer.json with tokenizers.Tokenizer.from_file)")


def test_plain_special_tokens_are_unchanged(chatml_run):
    """Specials without flags are written as before: every flag false but special."""
    doc = json.loads((chatml_run / "tokenizer.json").read_text())
    assert [{k: a[k] for k in FLAGS} for a in doc["added_tokens"]] == [FLAGS] * 3
    assert not list(chatml_run.glob("*.special_tokens.json"))
    assert isinstance(toktok.load_encoding(chatml_run), tiktoken.Encoding)


def test_a_warm_start_from_flagged_specials_says_how_to_keep_them(llama3_run, tmp_path):
    folder, tt = llama3_run
    r = runner.invoke(app, ["train", str(FIXTURES / "notes.txt"), "--out", str(tmp_path / "o"), "--warm-start",
                            str(folder / "tokenizer.json"), "-q"])
    one_error_line(r, "tokenizer.json", "'<|end_header_id|>'", "rstrip set", "special_tokens:")
