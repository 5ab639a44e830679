"""SuperBPE (docs/superbpe.md): the ``superbpe`` pattern splits as the reference's stage-2
pre-tokenizer does (HF ``Digits`` + ``Split("(?=(\\d{3})+(?!\\d))")``) and as tiktoken and HF read
its one regex; a phase may have its own pattern; ``--superbpe T`` is two phases whose merges equal
the slow reference (stage 2 = plain BPE over the stage-2 pieces from stage 1's vocabulary)."""
from __future__ import annotations

import random

import pytest
import regex

from toktok.patterns import SUPERBPE, SUPERWORD, _tiktoken_pieces, check, probe_texts, resolve

#: Characters that exercise the digit rules: ASCII digits, other decimal digits (Arabic-Indic,
#: fullwidth), other numbers (superscripts, Roman numerals), letters, spaces, newlines, punctuation.
_ALPHABET = "0123456789" * 3 + "٣٤５²Ⅻ½" + "ab Z" * 2 + "\n\t.,!'é中😀\u00a0"


def _reference_split():
    """The reference code's stage-2 pre-tokenizer (before ByteLevel), as HF tokenizers runs it."""
    from tokenizers import Regex
    from tokenizers import pre_tokenizers as pt

    return pt.Sequence([pt.Digits(individual_digits=False), pt.Split(Regex(r"(?=(\d{3})+(?!\d))"), "isolated")])


def _texts(n: int = 1500, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    out = ["1234567", "12 345 6789", "١٢٣٤٥", "12²345", "Ⅻ1234", "x1y22z333w4444", "by the way, 1,000,000.",
           "a\n\nb  c\t\td", "", " ", "1", "12", "123", "1234"]
    out += ["".join(rng.choice(_ALPHABET) for _ in range(rng.randint(1, 24))) for _ in range(n)]
    return out + probe_texts(count=0)


def test_superbpe_is_the_reference_stage_2_split_in_every_engine():
    texts = _texts()
    ref = [[p for p, _ in _reference_split().pre_tokenize_str(t)] for t in texts]
    p = SUPERWORD["superbpe"]
    assert [regex.findall(p.regex, t) for t in texts] == ref
    from toktok.patterns import _hf_pieces

    assert _hf_pieces(p.hf, texts) == ref
    assert _tiktoken_pieces(p.regex, texts[:400]) == ref[:400]
    # the digits: groups of three from the right, a run of numbers apart; nothing else splits
    assert regex.findall(SUPERBPE, "by the way, it is 1234567 km.\n\nNext") == [
        "by the way, it is ", "1", "234", "567", " km.\n\nNext"]


def test_long_runs_of_digits_split_as_the_reference_and_cut_safely():
    # the reference's look-ahead reads a run's digits again at each digit; superbpe reads them once
    from toktok.count import cuts
    from toktok.patterns import _hf_pieces

    texts = ["1" * 3001 + "²" + "2" * 2000 + " x", "x" + "9" * 4000 + "Ⅻ" + "8" * 7, "½" * 50 + "3" * 1000]
    ref = [[p for p, _ in _reference_split().pre_tokenize_str(t)] for t in texts]
    assert [regex.findall(SUPERBPE, t) for t in texts] == ref == _hf_pieces(SUPERBPE, texts)
    # a cut inside a run of digits (at a match's end) changes no piece: after it the look-behind
    # sees nothing, and the run's count starts again where a group of three did
    text = "ab " + "7" * 100_001 + " end"
    at = cuts.split_point(text, SUPERWORD["superbpe"])
    assert 5 <= at < 100_004 and (at - 5) % 3 == 0  # after "77", the groups of three
    assert regex.findall(SUPERBPE, text[:at]) + regex.findall(SUPERBPE, text[at:]) == regex.findall(SUPERBPE, text)


def test_superbpe_by_name_and_by_regex():
    p = check("superbpe")
    assert p is SUPERWORD["superbpe"] and p.label() == "superbpe" and p.known and not p.named
    assert resolve(SUPERBPE) is p and check(SUPERBPE) is p
    assert type(p).from_dict(p.to_dict()) is p


# --- a SuperBPE run: exact, loadable everywhere with the same ids ---------------------------------

import json
from collections import Counter
from pathlib import Path

import duckdb
from conftest import FIXTURES
from oracles.reference_bpe import train as reference_train
from typer.testing import CliRunner

import toktok
from toktok.cli import app
from toktok.formats.hf import load_hf
from toktok.patterns import CL100K, EDGE_TEXTS, NAMED
from toktok.verify import random_slices
from toktok.vocab import Vocab

runner = CliRunner()
SOURCES = [str(FIXTURES / "notes.txt"), str(FIXTURES / "extra.jsonl")]
T, N = 1600, 1800  # total ids (one special token): 182 subword merges after the 1,417 bytes and hardcoded
# tokens, then 200 superword ones


def _docs() -> list[str]:
    return [(FIXTURES / "notes.txt").read_text()] + [
        json.loads(line)["text"] for line in (FIXTURES / "extra.jsonl").read_text().splitlines()]


def _words(rx: str, docs: list[str]) -> dict[bytes, int]:
    return dict(Counter(w.encode() for d in docs for w in regex.findall(rx, d)))


def _reference(docs: list[str], t: int = T, n: int = N, first: str = CL100K):
    """The slow reference: stage 1 as plain BPE over the first pattern's pieces from the bytes and
    hardcoded tokens, stage 2 as plain BPE over the superbpe pieces from stage 1's vocabulary."""
    start = Vocab.base().tokens
    tokens1, merges1 = reference_train(_words(first, docs), start, t - 1 - len(start))
    tokens2, merges2 = reference_train(_words(SUPERBPE, docs), tokens1, n - 1 - len(tokens1))
    return tokens2, [tuple(m) for m in merges1], [tuple(m) for m in merges2]


def _merges(out: Path, phase: str) -> list[tuple]:
    con = duckdb.connect(str(out / "run.duckdb"), read_only=True)
    return con.execute("select left_id, right_id, token_id, count, reused from merges where phase = $p "
                       "order by merge_index", {"p": phase}).fetchall()


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("superbpe") / "o"
    r = runner.invoke(app, ["train", *SOURCES, "--out", str(out), "--vocab-size", str(N), "--superbpe", str(T),
                            "-s", "<|endoftext|>", "-q"])
    assert r.exit_code == 0, r.output
    return out


def test_merges_equal_the_reference(run):
    tokens, ref1, ref2 = _reference(_docs())
    assert _merges(run, "subwords") == ref1 and len([m for m in ref1 if not m[4]]) == T - 1 - 1417
    assert _merges(run, "superwords") == ref2 and len([m for m in ref2 if not m[4]]) == N - T
    enc = toktok.load_encoding(run)
    assert enc.n_vocab == N and [enc.decode_single_token_bytes(i) for i in range(N - 1)] == tokens
    assert enc._pat_str == SUPERBPE  # the tokenizer splits with the last phase's pattern
    con = duckdb.connect(str(run / "run.duckdb"), read_only=True)
    phases = json.loads(con.execute("select value from meta where key = 'phases'").fetchone()[0])
    assert [(p["name"], p["pattern"]) for p in phases] == [("subwords", "cl100k"), ("superwords", "superbpe")]
    meta = json.loads(con.execute("select value from meta where key = 'pattern'").fetchone()[0])
    assert meta["name"] == "superbpe" and meta["by_phase"]["subwords"]["name"] == "cl100k"


def test_merges_equal_the_reference_on_held_out_text(tmp_path):
    # text the fixtures were not made of: the sample's documents, as a Python list
    import polars as pl

    docs = pl.read_parquet(FIXTURES / "sample.parquet")["text"].to_list()[:60]
    r = toktok.train([docs], out=tmp_path / "o", vocab_size=620, superbpe=500, hardcoded=False, verbose=False)
    start = Vocab.base(hardcoded=False).tokens
    tokens1, merges1 = reference_train(_words(CL100K, docs), start, 500 - 256)
    tokens2, merges2 = reference_train(_words(SUPERBPE, docs), tokens1, 620 - len(tokens1))
    assert _merges(r.out, "subwords") == [tuple(m) for m in merges1]
    assert _merges(r.out, "superwords") == [tuple(m) for m in merges2]


def test_output_is_byte_identical_from_run_to_run(run, tmp_path):
    out = tmp_path / "again"
    r = runner.invoke(app, ["train", *SOURCES, "--out", str(out), "--vocab-size", str(N), "--superbpe", str(T),
                            "-s", "<|endoftext|>", "-q"])
    assert r.exit_code == 0, r.output
    for name in ("tokenizer.tiktoken", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        assert (out / name).read_bytes() == (run / name).read_bytes(), name


def test_tiktoken_hf_and_transformers_give_the_same_ids(run):
    from transformers import AutoTokenizer

    docs = _docs()
    long_docs = ["\n\n".join(docs[:40]), " ".join(docs) * 3]  # one piece of ~100 KB, one of ~300 KB
    texts = [*EDGE_TEXTS, *docs, *long_docs, *(ln for d in docs for ln in d.splitlines()),
             *probe_texts(count=2500, seed=7), *random_slices(docs, 600, seed=3), "x<|endoftext|>y 1234567"]
    assert len(texts) >= 4000
    enc, hf = toktok.load_encoding(run), load_hf(run)
    tf = AutoTokenizer.from_pretrained(str(run))
    tt = enc.encode_batch(texts, allowed_special="all")
    got = hf.encode_batch(texts, add_special_tokens=False)
    got_tf = tf(texts, add_special_tokens=False)["input_ids"]
    for t, a, b, c in zip(texts, tt, got, got_tf):
        assert a == b.ids == c, t[:80]
        assert enc.decode(a) == t and tf.decode(c) == t
    assert any(len(enc.decode_single_token_bytes(i)) > 1 and b" " in enc.decode_single_token_bytes(i)[1:]
               for i in range(T - 1, N - 1))  # superwords were learned


def test_superwords_in_the_run_file_and_show(run):
    con = duckdb.connect(str(run / "run.duckdb"), read_only=True)
    rows = con.execute("select id, token, phase from superwords order by id").fetchall()
    assert rows and all(T - 1 <= i < N - 1 and ph == "superwords" for i, _, ph in rows)
    cl100k = NAMED["cl100k"]
    ids = {i for i, _, _ in rows}
    for i, tok, _ in con.execute("select id, token, phase from vocab where phase = 'superwords'").fetchall():
        text = bytes(tok).decode("utf-8", "ignore")
        assert (i in ids) == (len(cl100k.findall(text)) > 1 and len(text) > 1) or not bytes(tok).isascii(), tok
    r = runner.invoke(app, ["show", str(run)])
    assert r.exit_code == 0 and f"{len(rows):,} tokens that cl100k cuts" in r.output, r.output


# --- with the rest of toktok: warm start, phases from Python, budget, resume, eval ----------------


def test_a_phase_with_its_own_pattern_from_python_is_the_same_run(run, tmp_path):
    srcs = SOURCES
    r = toktok.train(out=tmp_path / "o", special_tokens=["<|endoftext|>"], verbose=False, phases=[
        toktok.Phase("subwords", vocab_size=T, sources=srcs),
        toktok.Phase("superwords", vocab_size=N, sources=srcs, pattern="superbpe")])
    for name in ("tokenizer.tiktoken", "tokenizer.json"):
        assert (r.out / name).read_bytes() == (run / name).read_bytes(), name
    assert r.pattern == "cl100k → superbpe"


def test_a_warm_start_moves_to_superbpe_only_when_asked_and_says_so_once(tmp_path):
    base = toktok.train(SOURCES[:1], out=tmp_path / "base", merges=100, pattern="qwen2", verbose=False).out
    # another --pattern: refused, naming how to move
    r = runner.invoke(app, ["train", SOURCES[1], "--out", str(tmp_path / "no"), "--merges", "20", "--warm-start",
                            str(base / "tokenizer.json"), "--pattern", "superbpe", "-q"])
    assert r.exit_code == 2 and "leave the pattern out" in r.output and "its own pattern" in r.output, r.output
    # --superbpe: the subwords keep the base's pattern, the superwords move, said once
    n = toktok.load_encoding(base).n_vocab  # the base's ids: bytes, qwen2's 61 hardcoded tokens, 100 merges
    got = toktok.train(SOURCES[1], out=tmp_path / "w", warm_start=base / "tokenizer.json", vocab_size=n + 150,
                       superbpe=n + 50, verbose=False)
    moved = [w for w in got.warnings if "every id and merge of the base is kept" in w]
    assert len(moved) == 1 and "qwen2" in moved[0] and "superbpe" in moved[0], got.warnings
    enc, base_enc = toktok.load_encoding(got.out), toktok.load_encoding(base)
    assert all(enc.decode_single_token_bytes(i) == base_enc.decode_single_token_bytes(i)
               for i in range(base_enc.n_vocab))  # every id kept
    assert enc._pat_str == SUPERBPE and got.pattern == "qwen2 → superbpe"
    docs = [json.loads(line)["text"] for line in Path(SOURCES[1]).read_text().splitlines()]
    tokens = [base_enc.decode_single_token_bytes(i) for i in range(base_enc.n_vocab)]
    _, merges1 = reference_train(_words(NAMED["qwen2"].regex, docs), tokens, 50)
    assert _merges(got.out, "subwords") == [tuple(m) for m in merges1]


def test_under_a_small_budget(tmp_path):
    # a memory budget, and the phase's text budget (200 KB of the ~560 KB): each of the two phases
    # samples its sources to fit, the run stays exact on what it counted
    r = toktok.train(out=tmp_path / "o", superbpe=1700, budget="4GB", verbose=False, phases=[
        toktok.Phase("web", vocab_size=1900, sources=[str(FIXTURES / "sample.parquet")], budget="200KB")])
    assert [p.name for p in r.phases] == ["web", "superwords"]
    con = duckdb.connect(str(r.out / "run.duckdb"), read_only=True)
    words = {ph: dict(con.execute("select word, count from words where phase = $p", {"p": ph}).fetchall())
             for ph in ("web", "superwords")}
    assert 150_000 < sum(len(w) * c for w, c in words["superwords"].items()) <= 200_000
    start = Vocab.base().tokens
    tokens1, merges1 = reference_train({bytes(w): c for w, c in words["web"].items()}, start, 1700 - len(start))
    _, merges2 = reference_train({bytes(w): c for w, c in words["superwords"].items()}, tokens1, 200)
    assert _merges(r.out, "web") == [tuple(m) for m in merges1]
    assert _merges(r.out, "superwords") == [tuple(m) for m in merges2]
    assert all(len(regex.findall(SUPERBPE, bytes(w).decode())) == 1 for w in words["superwords"])


def test_a_resumed_superbpe_run_is_identical(run, tmp_path):
    import signal
    import subprocess

    import faults

    args = [*SOURCES, "--vocab-size", str(N), "--superbpe", str(T), "-s", "<|endoftext|>", "--out",
            str(tmp_path / "o"), "-q"]
    for fault in (1, 3):  # after the subwords were counted, then inside the superwords' merges
        r = subprocess.run(faults.command(every=0, step=40, kill_at=fault) + ["train", *args, *(["--resume"] if fault > 1 else [])],
                           capture_output=True, text=True, timeout=600)
        assert r.returncode == -signal.SIGKILL, r.stderr
    r = subprocess.run(faults.command(every=0, step=40) + ["train", *args, "--resume"], capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stderr
    for name in ("tokenizer.tiktoken", "tokenizer.json"):
        assert (tmp_path / "o" / name).read_bytes() == (run / name).read_bytes(), name


def test_eval_compares_superbpe_with_a_plain_vocabulary(run, tmp_path):
    plain = toktok.train(SOURCES, out=tmp_path / "plain", vocab_size=N, special_tokens=["<|endoftext|>"],
                         verbose=False).out
    r = runner.invoke(app, ["eval", str(plain), str(run), "--data", str(FIXTURES / "sample.parquet"), "--by", "lang",
                            "--json"])
    assert r.exit_code == 0, r.output
    rows = json.loads(r.output)["rows"]
    by = {(x["subset"], x["tokenizer"]): x for x in rows}
    langs = {x["subset"] for x in rows} - {"all"}
    assert len(langs) > 3 and {t for _, t in by} == {"plain", "o"}
    # the same text, each tokenizer with its own pattern: same bytes, its own tokens
    for lang in langs | {"all"}:
        assert by[(lang, "plain")]["bytes"] == by[(lang, "o")]["bytes"]
    assert by[("all", "o")]["bytes_per_token"] > by[("all", "plain")]["bytes_per_token"]


def _long_docs() -> list[str]:
    docs = _docs()
    return ["\n\n".join(docs[:40]), " ".join(docs) * 3, "a" * 3000 + " 12345 " + "b c" * 2000,
            "x<|endoftext|>y " * 9000]


def test_eval_encodes_long_documents_as_tiktoken_does(run, monkeypatch):
    # a .tiktoken's long documents go through toktok's own segmenter, piece by piece: the same
    # ids as tiktoken's (a document holding a special token goes to tiktoken as it is)
    import pyarrow as pa
    import pyarrow.parquet as pq

    from toktok.insight import evaluate as ev
    from toktok.merge.segment import segment

    segment([b"ab"], Vocab.base())  # compiled (or loaded): eval takes the segmenter only then
    enc = toktok.load_encoding(run)
    texts = [*_docs(), *_long_docs(), *EDGE_TEXTS, ""]
    want = enc.encode_batch(texts, allowed_special="all")
    long = ev._LongDocs(enc)
    assert long.encode(texts, 1) == want and long._seg  # LONG_DOC: the two longest
    monkeypatch.setattr(ev, "LONG_DOC", 1)  # every document: every piece through the segmenter
    assert ev._LongDocs(enc).encode(texts, 1) == want
    monkeypatch.undo()
    data = run.parent / "long.parquet"
    pq.write_table(pa.table({"text": texts}), data)
    row = next(r for r in ev.evaluate([str(run)], [str(data)]) if r["subset"] == "all")
    assert row["tokens"] == sum(map(len, want)) and row["lossy_docs"] == 0
    assert row["vocab_used"] == len({i for ids in want for i in ids})


@pytest.mark.parametrize("pattern", ["superbpe", "cl100k", "o200k", "gpt2", r"\p{L}+|\p{N}|\s+|[^\s\p{L}\p{N}]+",
                                     r"(\p{L})\1|\p{L}+|\p{N}+|\s+|[^\s\p{L}\p{N}]+"])  # (PCRE2's: a backref)
def test_eval_splits_long_documents_with_the_compiled_scanner(run, pattern):
    # the long documents' pieces come from the scanner compiled from the encoding's pattern (no
    # Python str per piece), the same pieces as the regex package's, the same ids as tiktoken's
    import numpy as np
    import pyarrow as pa
    import tiktoken

    from toktok.count.cuts import compiled_spans, pieces
    from toktok.insight import evaluate as ev
    from toktok.merge.segment import segment

    from toktok.count import rx as compiled_rx
    from toktok.count.pcre import lib

    if compiled_rx.why_not(resolve(pattern).regex) is not None and lib.library() is None:
        pytest.skip(f"no PCRE2 JIT here: {lib.missing()}")
    segment([b"ab"], Vocab.base())
    base = toktok.load_encoding(run)
    rx = resolve(pattern).regex
    enc = tiktoken.Encoding("t", pat_str=rx, mergeable_ranks=base._mergeable_ranks, special_tokens={})
    compiled_spans(rx, np.frombuffer(b"a", np.uint8))  # the kernel compiled (or loaded): eval takes it only then
    long = ev._LongDocs(enc)
    assert long._ready()
    texts = [*_long_docs()[:3], *EDGE_TEXTS, "", "\u00e9t\u00e9 \U0001f600 \u0661\u0662\u0663\u0664 x"]
    for text in texts:
        words = long.words(text)
        assert words.type == pa.large_binary()  # the compiled path
        assert [w.decode("utf-8") for w in words.to_pylist()] == pieces(rx, text)
        assert long.ids(text) == enc.encode_ordinary(text)


def test_verify_compares_long_texts_in_parts_and_still_catches_a_broken_tokenizer(run, tmp_path):
    import shutil

    from toktok.errors import ParityError
    from toktok.formats.hf import token_to_bytelevel
    from toktok.verify import DEFAULT_TEXTS, PART, parts, special_texts, verify

    long = _long_docs()[1]
    cut = parts(long)
    assert len(long) > PART and "".join(cut) == long and all(0 < len(p) <= PART for p in cut)
    assert all(p.endswith("\n") or p[-1].isspace() for p in cut[:-1])
    rep = verify(run, [long, "short"])
    assert rep.cut == 1 and rep.strings == len(DEFAULT_TEXTS) + len(special_texts(["<|endoftext|>"])) + len(cut) + 1
    r = runner.invoke(app, ["verify", str(run), str(FIXTURES / "notes.txt"), "--slices", "0"])
    assert r.exit_code == 0 and "parity ok" in r.output, r.output

    # a superword HF can no longer make (its merges gone), used in the long text and in no built-in one
    enc = toktok.load_encoding(run)
    builtin = DEFAULT_TEXTS + special_texts(["<|endoftext|>"])
    used = {i for p in cut for i in enc.encode(p, allowed_special="all")}
    x = next(enc.decode_single_token_bytes(i) for i in sorted(used, reverse=True)
             if b" " in enc.decode_single_token_bytes(i)[1:]
             and not any(enc.decode_single_token_bytes(i) in t.encode() for t in builtin))
    bad = tmp_path / "bad"
    shutil.copytree(run, bad, ignore=shutil.ignore_patterns("*.duckdb*"))
    doc = json.loads((bad / "tokenizer.json").read_text())
    name = token_to_bytelevel(x)
    doc["model"]["merges"] = [m for m in doc["model"]["merges"]
                              if "".join(m if isinstance(m, list) else m.split(" ")) != name]
    (bad / "tokenizer.json").write_text(json.dumps(doc))
    assert verify(bad).ok  # the built-in texts do not hold it
    with pytest.raises(ParityError, match="ids differ"):
        verify(bad, [long])
