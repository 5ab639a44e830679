"""Special ids are never ambiguous, and ``toktok convert`` round-trips every layout toktok writes.

toktoktok's loaders know one rule: special id = number of ranks + index in ``special_tokens.txt``.
A toktok output either follows that rule (specials after the last rank, in list order) or declares
every special id in ``NAME.special_tokens.json`` beside the ``.tiktoken`` (a warm-start base that
kept its specials inside its id range), and the summary and ``meta('specials')`` say which. Here:
the three toktoktok-style flows (from scratch with 10 special tokens, warm start from that
``.tiktoken`` with the same list, a Hugging Face base with specials at 0..k-1), each checked with a
loader that knows only toktoktok's rule against toktok's ``tokenizer.json`` (tokenizers and
transformers) and ``load_encoding``; then ``convert`` both ways on every layout.
"""
from __future__ import annotations

import base64
import json
import shutil
from pathlib import Path

import duckdb
import polars as pl
import pytest
import tiktoken
from conftest import FIXTURES, one_error_line
from typer.testing import CliRunner

import toktok
from toktok.cli import app
from toktok.formats.hf import load_hf
from toktok.formats.specials import read_special_tokens_txt
from toktok.formats.tiktoken import read_tiktoken_ranks
from toktok.formats.hf import read_hf_specials, read_split
from toktok.patterns import NAMED
from toktok.vocab import PATTERN
from toktok.warmstart import convert, load_base

runner = CliRunner()
# the ten tokens of toktoktok's examples/special_tokens.txt
TEN = ["<|pad|>", "<|startoftext|>", "<|endoftext|>", "<|im_start|>", "<|im_end|>",
       "<|fim_pre|>", "<|fim_mid|>", "<|fim_suf|>", "<think>", "</think>"]
MERGES = 300
SAMPLE = pl.read_parquet(FIXTURES / "sample.parquet")["text"].to_list()
NOTES = FIXTURES / "notes.txt"
EXTRA = FIXTURES / "extra.jsonl"


def _texts(specials: list[str]) -> list[str]:
    mixed = ["".join(f"{s} word{k} " for k, s in enumerate(specials)),
             f"<|im_start|>user\nHello, world!{specials[-1] if specials else ''}\n" if specials else "plain",
             "  def f(x):\n\treturn x ** 2  # 123 4567\r\n", "Привет 😀 中文 naïve"]
    return SAMPLE[:25] + mixed


def toktoktok_encoding(tt: Path, special_txt: Path | None, pat_str: str = PATTERN) -> tiktoken.Encoding:
    """A loader that knows only toktoktok's convention (as its scripts load a .tiktoken): ranks as
    written, special id = number of ranks + line index of special_tokens.txt; ``pat_str``: the
    pattern the run split text with."""
    ranks = {}
    for line in tt.read_text().splitlines():
        if line.strip():
            b64, rank = line.split()
            ranks[base64.b64decode(b64)] = int(rank)
    specials = {}
    if special_txt is not None:
        for i, line in enumerate(special_txt.read_text().splitlines()):
            if line.strip():
                specials[line.strip()] = len(ranks) + i
    return tiktoken.Encoding("toktoktok", pat_str=pat_str, mergeable_ranks=ranks, special_tokens=specials)


def _same_ids(out: Path, loaders: list[tiktoken.Encoding], texts: list[str]) -> None:
    """Every loader, toktok's tokenizer.json (tokenizers and transformers) and load_encoding give
    the same ids on every text, and decode them back."""
    from transformers import PreTrainedTokenizerFast

    enc = toktok.load_encoding(out)
    hf = load_hf(out)
    tf = PreTrainedTokenizerFast.from_pretrained(str(out))
    for t in texts:
        ids = enc.encode(t, allowed_special="all")
        assert hf.encode(t, add_special_tokens=False).ids == ids, t
        assert tf(t, add_special_tokens=False)["input_ids"] == ids, t
        for other in loaders:
            assert other.encode(t, allowed_special="all") == ids, t
        assert enc.decode(ids) == t and tf.decode(ids) == t


def _meta(out: Path, key: str):
    con = duckdb.connect(str(out / "run.duckdb"), read_only=True)
    try:
        return json.loads(con.execute("SELECT value FROM meta WHERE key = $k", {"k": key}).fetchone()[0])
    finally:
        con.close()


def _train(*args) -> str:
    r = runner.invoke(app, ["train", *map(str, args)])
    assert r.exit_code == 0, r.output
    return r.output


@pytest.fixture(scope="module")
def flows(tmp_path_factory) -> dict:
    """The three toktoktok-style flows, run once: their output folders and summaries."""
    d = tmp_path_factory.mktemp("flows")
    lst = d / "lists" / "special_tokens.txt"
    lst.parent.mkdir()
    lst.write_text("\n".join(TEN) + "\n")
    specials = [a for s in TEN for a in ("-s", s)]
    got: dict = {"list": lst, "dir": d}
    # 1. from scratch, 10 special tokens
    got["scratch_log"] = _train(NOTES, "--out", d / "scratch", "--merges", MERGES, *specials)
    got["scratch"] = d / "scratch"
    # 2. warm start from that .tiktoken (toktok's tokenizer.json beside it), the same list again
    got["warm_log"] = _train(EXTRA, "--out", d / "warm", "--merges", 200, "--warm-start",
                             d / "scratch" / "tokenizer.tiktoken", *specials)
    got["warm"] = d / "warm"
    # 3. a Hugging Face base (BpeTrainer: specials at 0..1), a special of its own and a new one
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(NOTES.read_text().splitlines(keepends=True), trainers.BpeTrainer(
        vocab_size=500, special_tokens=["<|endoftext|>", "<|pad|>"], show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    (d / "hf").mkdir()
    tok.save(str(d / "hf" / "tokenizer.json"))
    got["hf_base"] = d / "hf" / "tokenizer.json"
    got["hf_log"] = _train(EXTRA, "--out", d / "hfwarm", "--merges", 100, "--warm-start", got["hf_base"],
                           "-s", "<|endoftext|>", "-s", "<|new|>", "-q")
    got["hfwarm"] = d / "hfwarm"
    return got


def test_from_scratch_specials_follow_the_last_rank(flows):
    out, lst = flows["scratch"], flows["list"]
    tt = out / "tokenizer.tiktoken"
    n = len(read_tiktoken_ranks(tt)[0])
    assert n == 256 + 1161 + MERGES
    tk = toktoktok_encoding(tt, lst)
    assert tk.n_vocab == 256 + 1161 + MERGES + 10
    assert {s: tk.encode_single_token(s) for s in TEN} == {s: n + k for k, s in enumerate(TEN)}
    _same_ids(out, [tk], _texts(TEN))
    assert not list(out.glob("*.special_tokens.json"))  # nothing to declare
    sp = _meta(out, "specials")
    assert sp["rule"] == "after_last_rank" and sp["ids"] == {s: n + k for k, s in enumerate(TEN)}
    assert "special ids" in flows["scratch_log"] and "after the last rank" in flows["scratch_log"]


def test_warm_start_from_toktoks_own_output_counts_as_bare(flows, tmp_path):
    """The base's specials follow the convention: toktok's tokenizer.json beside it does not pin
    them, so they come after the new ranks, as toktoktok re-applies them; no id gaps."""
    out, lst = flows["warm"], flows["list"]
    base_ranks = read_tiktoken_ranks(flows["scratch"] / "tokenizer.tiktoken")[0]
    ranks = read_tiktoken_ranks(out / "tokenizer.tiktoken")[0]
    assert sorted(ranks) == list(range(len(ranks)))  # no gaps
    assert all(ranks[i] == t for i, t in base_ranks.items())  # every base rank keeps its id
    n = len(ranks)
    assert n == len(base_ranks) + 200
    tk = toktoktok_encoding(out / "tokenizer.tiktoken", lst)
    assert {s: tk.encode_single_token(s) for s in TEN} == {s: n + k for k, s in enumerate(TEN)}
    _same_ids(out, [tk], _texts(TEN))
    assert not list(out.glob("*.special_tokens.json"))
    sp = _meta(out, "specials")
    assert sp["rule"] == "after_last_rank"
    assert sp["moved"]["<|pad|>"] == [len(base_ranks), n]
    assert "after the last rank" in flows["warm_log"] and "the base had 10 of them" in flows["warm_log"]
    ws = _meta(out, "warm_start")
    assert ws["specials"] == {} and ws["specials_after"] == {s: len(base_ranks) + k for k, s in enumerate(TEN)}

    # the same base alone (a bare .tiktoken), from its folder, or as its tokenizer.json: one result
    bare = tmp_path / "bare"
    bare.mkdir()
    shutil.copy(flows["scratch"] / "tokenizer.tiktoken", bare / "tok.tiktoken")
    specials = [a for s in TEN for a in ("-s", s)]
    for k, base in enumerate([bare / "tok.tiktoken", flows["scratch"], flows["scratch"] / "tokenizer.json"]):
        _train(EXTRA, "--out", tmp_path / f"o{k}", "--merges", 200, "--warm-start", base, *specials, "-q")
        for f in ("tokenizer.tiktoken", "tokenizer.json", "tokenizer_config.json"):
            assert (tmp_path / f"o{k}" / f).read_bytes() == (out / f).read_bytes(), (base, f)


def test_base_specials_not_listed_follow_the_listed_ones(flows, tmp_path):
    """A config that lists only some of a bare base's specials: the listed ones first (list order),
    the others after them, with a warning; none listed: the base's, in its order, no warning."""
    r = runner.invoke(app, ["train", str(EXTRA), "--out", str(tmp_path / "some"), "--merges", "20", "-q",
                            "--warm-start", str(flows["scratch"]), "-s", "<|im_end|>", "-s", "<|new|>"])
    assert r.exit_code == 0, r.output
    assert "are not in special_tokens" in r.output and "'<|pad|>'" in r.output
    enc = toktok.load_encoding(tmp_path / "some")
    n = len(read_tiktoken_ranks(tmp_path / "some" / "tokenizer.tiktoken")[0])
    order = ["<|im_end|>", "<|new|>"] + [s for s in TEN if s != "<|im_end|>"]
    assert {s: enc.encode_single_token(s) for s in order} == {s: n + k for k, s in enumerate(order)}
    r = runner.invoke(app, ["train", str(EXTRA), "--out", str(tmp_path / "none"), "--merges", "20", "-q",
                            "--warm-start", str(flows["scratch"])])
    assert r.exit_code == 0 and "warning" not in r.output, r.output
    enc = toktok.load_encoding(tmp_path / "none")
    n = len(read_tiktoken_ranks(tmp_path / "none" / "tokenizer.tiktoken")[0])
    assert {s: enc.encode_single_token(s) for s in TEN} == {s: n + k for k, s in enumerate(TEN)}


def test_hf_layout_base_keeps_its_ids_and_declares_them(flows):
    """Specials inside the base's id range keep their ids; the .tiktoken then has gaps, every
    special id is declared beside it, and the summary says so. A loader that knows only
    toktoktok's rule still gives toktok's ids on all ordinary text; the declared list gives the
    specials."""
    out = flows["hfwarm"]
    tt = out / "tokenizer.tiktoken"
    ranks = read_tiktoken_ranks(tt)[0]
    assert sorted(ranks) == list(range(2, 600))  # ids 0 and 1 are the base's specials
    want = {"<|endoftext|>": 0, "<|pad|>": 1, "<|new|>": 600}
    assert json.loads((out / "tokenizer.special_tokens.json").read_text()) == want
    sp = _meta(out, "specials")
    assert sp["rule"] == "declared" and sp["gaps"] == [0, 1] and sp["declared_in"] == "tokenizer.special_tokens.json"
    assert sp["ids"] == want
    log = flows["hf_log"]
    assert "gaps at 0, 1" in log and "declared in tokenizer.special_tokens.json" in log
    plain = [t for t in _texts([]) if not any(s in t for s in want)]
    gpt2 = NAMED["gpt2"].regex  # BpeTrainer's base splits with ByteLevel's regex, GPT-2's: the warm start keeps it
    _same_ids(out, [toktoktok_encoding(tt, None, gpt2)], plain)
    declared = tiktoken.Encoding("declared", pat_str=gpt2, mergeable_ranks={t: i for i, t in ranks.items()},
                                 special_tokens=json.loads((out / "tokenizer.special_tokens.json").read_text()))
    _same_ids(out, [declared], _texts(list(want)))
    # the declared output as the next base: every id kept, again declared
    base = load_base(tt)
    assert base.vocab.pinned == {0: "<|endoftext|>", 1: "<|pad|>"} and base.vocab.specials == ["<|new|>"]
    assert base.kept_vocab().pinned == {0: "<|endoftext|>", 1: "<|pad|>", 600: "<|new|>"}


# --- convert: every layout, both ways, byte for byte -------------------------------------------


def _layout(name: str, flows: dict, d: Path) -> tuple[Path, dict | None, object]:
    """(a .tiktoken in that layout, the special ids it has, what to pass as --special-tokens)."""
    if name == "after":  # from scratch: specials after the last rank, tokenizer.json beside
        tt = flows["scratch"] / "tokenizer.tiktoken"
        n = len(read_tiktoken_ranks(tt)[0])
        return tt, {s: n + k for k, s in enumerate(TEN)}, None
    if name == "inside":  # a warm start that kept HF's specials at 0..1: .special_tokens.json beside
        return flows["hfwarm"] / "tokenizer.tiktoken", {"<|endoftext|>": 0, "<|pad|>": 1, "<|new|>": 600}, None
    tt = d / "t" / "tok.tiktoken"
    tt.parent.mkdir()
    shutil.copy(flows["scratch"] / "tokenizer.tiktoken", tt)
    n = len(read_tiktoken_ranks(tt)[0])
    ids = {s: n + k for k, s in enumerate(TEN)}
    if name == "none":
        return tt, {}, None
    if name == "json":  # the ids declared, though they follow the convention
        (d / "t" / "tok.special_tokens.json").write_text(json.dumps(ids))
        return tt, ids, None
    if name == "txt-beside":  # toktoktok's list in the same folder
        (d / "t" / "special_tokens.txt").write_text("\n".join(TEN) + "\n\n")
        return tt, ids, None
    assert name == "txt-given"  # toktoktok's list elsewhere, given explicitly
    return tt, ids, flows["list"]


def test_hf_specials_read_from_added_tokens_alone_as_parsed_whole(flows, tmp_path):
    """tiktoken's half of a check reads a tokenizer.json's specials from its ``added_tokens`` key
    alone (not waiting for HF's half to load it): the same as the whole file parsed, for toktok's
    and tokenizers' own layouts; a file laid out otherwise, or holding the key twice, is parsed
    whole (or, ``whole=False``, left to a caller that loads it anyway)."""
    for f in (flows["scratch"] / "tokenizer.json", flows["hf_base"], flows["hfwarm"] / "tokenizer.json"):
        doc = json.loads(f.read_bytes())
        want = {a["content"]: a["id"] for a in doc["added_tokens"] if a.get("special", True)}
        assert want and read_hf_specials(f) == want == read_hf_specials(f, whole=False)
        flat = tmp_path / f"{f.parent.name}-flat.json"
        flat.write_text(json.dumps(doc, separators=(",", ":")))
        assert read_hf_specials(flat) == want and read_hf_specials(flat, whole=False) is None
    twice = tmp_path / "twice.json"  # Python's json keeps the last value of a key given twice
    twice.write_text('{\n  "added_tokens": [{"id": 1, "content": "<a>", "special": true}],\n'
                     '  "added_tokens": [{"id": 2, "content": "<b>", "special": true}]\n}')
    assert read_hf_specials(twice) == {"<b>": 2} and read_hf_specials(twice, whole=False) is None
    assert read_hf_specials(tmp_path / "absent.json") == {}


@pytest.mark.parametrize("layout", ["after", "inside", "none", "json", "txt-beside", "txt-given"])
def test_convert_round_trips_every_layout(flows, tmp_path, layout):
    tt, ids, given = _layout(layout, flows, tmp_path)
    extra = ["--special-tokens", str(given)] if given else []
    r = runner.invoke(app, ["convert", str(tt), str(tmp_path / "hf"), *extra])
    assert r.exit_code == 0, r.output
    pattern = read_split(tmp_path / "hf" / "tokenizer.json")[0]  # recorded beside tt, else cl100k
    doc = json.loads((tmp_path / "hf" / "tokenizer.json").read_text())
    assert {a["content"]: a["id"] for a in doc["added_tokens"]} == ids
    # and back: the same bytes, the same special ids
    r = runner.invoke(app, ["convert", str(tmp_path / "hf" / "tokenizer.json"), str(tmp_path / "back" / "x.tiktoken")])
    assert r.exit_code == 0, r.output
    assert (tmp_path / "back" / "x.tiktoken").read_bytes() == tt.read_bytes()
    side = tmp_path / "back" / "x.special_tokens.json"
    assert (json.loads(side.read_text()) if side.exists() else {}) == ids
    enc = toktok.load_encoding(tmp_path / "back" / "x.tiktoken", pattern=pattern)  # a .tiktoken alone records none
    assert {s: enc.encode_single_token(s) for s in ids} == ids
    # tokenizer.json -> .tiktoken -> tokenizer.json gives the same bytes too (given the pattern)
    r = runner.invoke(app, ["convert", str(tmp_path / "back" / "x.tiktoken"), str(tmp_path / "hf2"), "--pattern",
                            pattern.name])
    assert r.exit_code == 0, r.output
    for f in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        assert (tmp_path / "hf2" / f).read_bytes() == (tmp_path / "hf" / f).read_bytes(), f
    hf = load_hf(tmp_path / "hf")
    for t in _texts(list(ids)):
        assert hf.encode(t, add_special_tokens=False).ids == enc.encode(t, allowed_special="all")
    # the acceptance's loader: toktoktok's rule with the list, where the ids follow it
    if layout in ("after", "txt-beside", "txt-given"):
        tk = toktoktok_encoding(tmp_path / "back" / "x.tiktoken", flows["list"])
        assert {s: tk.encode_single_token(s) for s in ids} == ids


def _snapshot(d: Path) -> dict:
    return {str(p.relative_to(d)): (p.read_bytes(), p.stat().st_mtime_ns) for p in sorted(d.rglob("*")) if p.is_file()}


def test_convert_never_replaces_a_file_silently(flows, tmp_path):
    """An existing destination is refused with one line naming it (nothing changes, nothing is
    left beside it); --force replaces it; a stale specials list goes with the file it described."""
    tt = flows["hfwarm"] / "tokenizer.tiktoken"
    dst = tmp_path / "hf"
    assert runner.invoke(app, ["convert", str(tt), str(dst)]).exit_code == 0
    # .tiktoken -> folder: each of the three files counts
    for k, name in enumerate(("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")):
        only = tmp_path / f"only{k}"
        only.mkdir()
        (only / name).write_text("mine")
        before = _snapshot(only)
        one_error_line(runner.invoke(app, ["convert", str(tt), str(only)]), str(only / name), "--force")
        assert _snapshot(only) == before
    before = _snapshot(dst)
    one_error_line(runner.invoke(app, ["convert", str(tt), str(dst)]), str(dst / "tokenizer.json"), "exists", "--force")
    assert _snapshot(dst) == before
    # tokenizer.json -> .tiktoken: the file and its specials list both count
    out = tmp_path / "t" / "x.tiktoken"
    assert runner.invoke(app, ["convert", str(dst / "tokenizer.json"), str(out)]).exit_code == 0
    (tmp_path / "t" / "x.tiktoken").unlink()
    before = _snapshot(tmp_path / "t")
    one_error_line(runner.invoke(app, ["convert", str(dst / "tokenizer.json"), str(out)]), "x.special_tokens.json", "--force")
    assert _snapshot(tmp_path / "t") == before
    # --force replaces; converting a tokenizer without specials over it drops the stale list
    plain = tmp_path / "plain"
    _train(NOTES, "--out", plain, "--merges", 30, "-q")
    r = runner.invoke(app, ["convert", str(plain / "tokenizer.json"), str(out), "--force"])
    assert r.exit_code == 0, r.output
    assert out.read_bytes() == (plain / "tokenizer.tiktoken").read_bytes()
    assert sorted(p.name for p in (tmp_path / "t").iterdir()) == ["x.tiktoken"]  # no list, no temp files
    r = runner.invoke(app, ["convert", str(tt), str(dst), "--force"])
    assert r.exit_code == 0, r.output
    assert sorted(p.name for p in dst.iterdir()) == ["special_tokens_map.json", "tokenizer.json", "tokenizer_config.json"]


def test_convert_and_readers_take_a_plain_list(flows, tmp_path):
    """load_encoding, verify and convert read toktoktok's special_tokens.txt (given, or beside
    the .tiktoken) with its id rule; a bad list is one line naming the file and line."""
    bare = tmp_path / "bare"
    bare.mkdir()
    tt = bare / "tokenizer.tiktoken"
    shutil.copy(flows["scratch"] / "tokenizer.tiktoken", tt)
    n = len(read_tiktoken_ranks(tt)[0])
    ids = {s: n + k for k, s in enumerate(TEN)}
    assert toktok.load_encoding(tt).special_tokens_set == set()  # nothing beside it: no specials
    for given in (flows["list"], str(flows["list"]), TEN, ids):
        enc = toktok.load_encoding(tt, special_tokens=given)
        assert {s: enc.encode_single_token(s) for s in TEN} == ids
    # verify: the .tiktoken's list given, tokenizer.json beside it
    shutil.copy(flows["scratch"] / "tokenizer.json", bare / "tokenizer.json")
    r = runner.invoke(app, ["verify", str(tt), "--special-tokens", str(flows["list"])])
    assert r.exit_code == 0 and "parity ok" in r.output, r.output
    # a list in another order than tokenizer.json's: the specials differ, and verify says so
    other = tmp_path / "other.txt"
    other.write_text("\n".join(reversed(TEN)) + "\n")
    r = runner.invoke(app, ["verify", str(tt), "--special-tokens", str(other)])
    assert r.exit_code != 0 and "special tokens differ" in r.output
    # CRLF, a byte-order mark, spaces around a token and blank lines at the end are fine
    crlf = tmp_path / "crlf.txt"
    crlf.write_bytes(b"\xef\xbb\xbf" + "\r\n".join(f" {s}\t" for s in TEN).encode() + b"\r\n\r\n\n")
    assert read_special_tokens_txt(crlf) == TEN
    # bad lists, through convert: one line naming the file (and line)
    bad = tmp_path / "bad.txt"
    bad.write_text("<|a|>\n\n<|b|>\n")
    one_error_line(runner.invoke(app, ["convert", str(tt), str(tmp_path / "x"), "--special-tokens", str(bad)]),
              f"{bad}:2:", "blank line", "remove it")
    assert not (tmp_path / "x").exists()
    one_error_line(runner.invoke(app, ["convert", str(tt), str(tmp_path / "x"), "--special-tokens", str(tmp_path / "nope.txt")]),
              "nope.txt", "no such special-token file")
    one_error_line(runner.invoke(app, ["convert", str(bare / "tokenizer.json"), str(tmp_path / "y.tiktoken"),
                                  "--special-tokens", str(flows["list"])]), "--special-tokens is for a .tiktoken")
    assert not (tmp_path / "x").exists() and not (tmp_path / "y.tiktoken").exists()
