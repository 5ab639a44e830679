"""Every pattern end to end: for cl100k, o200k, gpt2, qwen2 and two custom regexes a fixture run's
merges equal the slow reference trained on ``regex.findall``'s words, and tiktoken (given the
pattern) and HF (tokenizer.json) give identical ids on more than 4,000 strings; a regex the engines
read differently is refused before any work (toktok.patterns.check: the construct, or the first
probe they split differently); the hardcoded tokens follow the pattern; the pattern is recorded and
used by load_encoding, verify, convert, eval and a warm start."""
from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path

import duckdb
import polars as pl
import pytest
import regex
from conftest import FIXTURES, FUZZ
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from oracles.reference_bpe import train as reference_train
from typer.testing import CliRunner

import toktok
from toktok.cli import app
from toktok.errors import ConfigError, ToktokError
from toktok.formats.hf import load_hf, read_split
from toktok.patterns import CL100K, DEFAULT, EDGE_TEXTS, NAMED, check, hardcoded, probe_texts, resolve, rewrite
from toktok.verify import random_slices
from toktok.vocab import Vocab, hardcoded_tokens

runner = CliRunner()

#: Two custom regexes: a possessive interval (HF gets an atomic group), and tiktoken's current
#: cl100k_base as tiktoken ships it (possessive quantifiers and a $, which both forms get as \z).
CUSTOM = {
    "letters": r"\p{L}+|\p{N}{1,2}+|\s+|[^\s\p{L}\p{N}]+",
    "tiktoken_cl100k": r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+"""
                       r"""|\s++$|\s*[\r\n]|\s+(?!\S)|\s""",
}
PATTERNS = {**{n: n for n in NAMED}, **CUSTOM}
MERGES = 150


def _docs() -> list[str]:
    return [(FIXTURES / "notes.txt").read_text()] + [
        json.loads(line)["text"] for line in (FIXTURES / "extra.jsonl").read_text().splitlines()]


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    """One run per pattern on notes.txt + extra.jsonl."""
    d = tmp_path_factory.mktemp("patterns")
    out = {}
    for name, given_ in PATTERNS.items():
        r = toktok.train([str(FIXTURES / "notes.txt"), str(FIXTURES / "extra.jsonl")], out=d / name, merges=MERGES,
                         pattern=given_, verbose=False)
        out[name] = r.out
    return out


# --- merges equal the reference --------------------------------------------------------------


@pytest.mark.parametrize("name", list(PATTERNS))
def test_merges_equal_the_reference(runs, name):
    p = check(PATTERNS[name])
    words = Counter(w.encode() for doc in _docs() for w in regex.findall(p.regex, doc))
    start = Vocab.base(pattern=p).tokens
    _, ref_merges = reference_train(dict(words), start, MERGES)
    con = duckdb.connect(str(runs[name] / "run.duckdb"), read_only=True)
    got = con.execute("select left_id, right_id, token_id, count, reused from merges order by merge_index").fetchall()
    assert got == [tuple(m) for m in ref_merges]
    meta = json.loads(con.execute("select value from meta where key = 'pattern'").fetchone()[0])
    config = json.loads(con.execute("select value from meta where key = 'config'").fetchone()[0])
    assert (meta["name"], meta["regex"], meta["hf"], meta["given"]) == (p.name, p.regex, p.hf, PATTERNS[name])
    assert config["pattern"] == PATTERNS[name]  # as the user gave it


# --- tiktoken == HF on more than 4,000 strings per pattern ---------------------------------------


def _check_ids(out: Path, texts: list[str]) -> int:
    enc, hf = toktok.load_encoding(out), load_hf(out)
    tt = enc.encode_batch(texts, allowed_special="all")
    got = hf.encode_batch(texts, add_special_tokens=False)
    for t, a, b in zip(texts, tt, got):
        assert a == b.ids, t
        assert enc.decode(a) == t
    return len(texts)


@pytest.mark.parametrize("name", list(PATTERNS))
def test_tiktoken_and_hf_agree_on_4000_strings(runs, name):
    docs = _docs()
    texts = [*EDGE_TEXTS, *docs, *(ln for d in docs for ln in d.splitlines()), *probe_texts(count=2500, seed=7),
             *random_slices(docs, 600, seed=3)]
    assert _check_ids(runs[name], texts) >= 4000
    assert toktok.load_encoding(runs[name])._pat_str == check(PATTERNS[name]).regex


_ODD = list(" \t\n\r\x0b\x0c\x85\xa0\u2028\u3000\u200b\u200d\ufeff'sStTdDmMlLvVrReE0123456789/.,;:!?-_$%()"
            "\u0301\u0308\u0130\u0131\u017f\u212a\u1e9e\u00dfǅ")
TEXTS = st.lists(st.lists(st.one_of(st.characters(exclude_categories=("Cs",)), st.sampled_from(_ODD),
                                    st.sampled_from(["camelCase", "HTTPServer", " 123", "1234567", "'s", "'LL",
                                                     "./", "\r\n", "  \n"])),
                          max_size=30).map("".join), min_size=1, max_size=40)


@pytest.mark.parametrize("name", list(PATTERNS))
@settings(max_examples=10 * FUZZ, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                       HealthCheck.too_slow])
@given(texts=TEXTS)
def test_fuzz_tiktoken_and_hf_agree(runs, name, texts):
    _check_ids(runs[name], texts)


@pytest.mark.slow
@pytest.mark.parametrize("name", list(PATTERNS))
def test_parity_on_a_larger_vocabulary(tmp_path, name):
    """2,000 merges on sample.parquet, 20,000 strings."""
    r = toktok.train(str(FIXTURES / "sample.parquet"), out=tmp_path / "o", merges=2000, pattern=PATTERNS[name],
                     special_tokens=["<|endoftext|>"], verbose=False)
    docs = pl.read_parquet(FIXTURES / "sample.parquet")["text"].to_list()
    texts = [*docs, *probe_texts(count=8000, seed=11), *random_slices(docs, 12000, seed=5)]
    assert _check_ids(r.out, texts) >= 20000


# --- the check: rewrites, refusals, probes -------------------------------------------------------


def test_rewrite_for_oniguruma():
    assert rewrite(r"\p{N}{1,3}+|x") == (r"\p{N}{1,3}+|x", r"(?>\p{N}{1,3})|x")
    assert rewrite(r"(?:ab){2}+c") == (r"(?:ab){2}+c", r"(?>(?:ab){2})c")
    assert rewrite(r"a{3}?|b{1,3}?") == (r"a{3}?|b{1,3}?", r"a{3}|b{1,3}?")  # {n}? is an optional {n} there
    assert rewrite(r"^a|\s+$|[$^]") == (r"\Aa|\s+\z|[$^]", r"\Aa|\s+\z|[$^]")  # anchors, not in classes
    assert rewrite(r"(?P<w>a)++") == (r"(?P<w>a)++", r"(?<w>a)++")
    assert rewrite(r"(?i)[a-z]+|\[x\]") == (r"(?i)[a-z]+|\[x\]",) * 2
    p = check(CUSTOM["tiktoken_cl100k"])
    assert p.name == "custom" and r"\s++\z" in p.regex and r"(?>\p{N}{1,3})" in p.hf


@pytest.mark.parametrize("regex_text, needles", [
    (r"(?<=a)b|[\s\S]", ["(?<=", "look-behind"]),
    (r"(?<!a)b|[\s\S]", ["(?<!", "look-behind"]),
    (r"\Ga|[\s\S]", [r"\G"]),
    (r"\Ka|[\s\S]", [r"\K"]),
    (r"(a)\1|[\s\S]", [r"\1", "backreference"]),
    (r"[[:alpha:]]+|[\s\S]", ["[:alpha:]", "POSIX"]),
    (r"[a-z&&[^aeiou]]+|[\s\S]", ["["]),
    (r"[a&&b]|[\s\S]", ["&&", "set operation"]),
    (r"(?s).|\n", ["(?s)", "inline flag s"]),
    (r"(?m)a$|[\s\S]", ["(?m)", "inline flag m"]),
    (r"(?x)a b|[\s\S]", ["(?x)", "inline flag x"]),
    (r"a(?i)b|[\s\S]", ["(?i)", "after the start"]),
    (r"\pL+|[\s\S]", [r"\pL", r"\p{L}"]),
    (r"\p{Foo}+|[\s\S]", [r"\p{Foo}", "does not know"]),
    (r"\Z|[\s\S]", [r"\Z"]),
    (r"(?#c)a|[\s\S]", ["(?#"]),
    (r"\s*|.", ["empty"]),
    (r"\p{L}+", ["unmatched", "catch-all"]),
    (r"\w+|\s+|[^\w\s]+", ["read differently", "splits"]),  # Oniguruma's \w holds U+200D, regex's does not
    (r"(?i:ss)+|[\s\S]", ["read differently"]),  # Oniguruma folds ß to ss
    (r"(?i)[a-z]+|[\s\S]", ["read differently"]),  # and İ to i
    (r"(", ["cannot compile"]),
])
def test_a_regex_the_engines_read_differently_is_refused(regex_text, needles):
    with pytest.raises(ConfigError) as e:
        check(regex_text, "--pattern")
    msg = str(e.value)
    assert msg.startswith("--pattern '") and "\n" not in msg and len(msg) <= 300, msg
    for n in needles:
        assert n in msg, (n, msg)


@pytest.mark.parametrize("regex_text", [r"\p{L}+|\p{N}|\s+|[^\s\p{L}\p{N}]+", r"(?>a|ab)c|[\s\S]", r"a?+a|[\s\S]",
                                        r"(?:\p{L}\p{M}*)++|[\s\S]", r"\p{Han}+|\p{Greek}+|[\s\S]", r"\d+|\D"])
def test_a_regex_the_engines_read_alike_passes(regex_text):
    assert check(regex_text).name == "custom"


def test_names_and_aliases():
    assert check("llama3") is NAMED["cl100k"] and check(CL100K) is NAMED["cl100k"] and resolve("o200k") is NAMED["o200k"]
    assert all(check(n) is p for n, p in NAMED.items())


@pytest.mark.parametrize("name", list(NAMED))
def test_the_probes_see_what_each_engine_splits(name):
    """tiktoken's pieces read through an Encoding of every substring equal regex's and HF's for the
    named patterns, and a pattern HF reads differently (the possessive interval as written) is caught."""
    from toktok.patterns import _hf_pieces, _probe, _read, _tiktoken_pieces

    p = NAMED[name]
    texts = probe_texts(count=200)
    want = [p.findall(t) for t in texts]
    assert _tiktoken_pieces(p.regex, texts) == want == _hf_pieces(p.hf, texts)
    assert _probe(p, _read(p.regex).literals) is None
    raw = toktok.patterns.Pattern("custom", r"\p{N}{1,2}+\p{N}|[\s\S]", r"\p{N}{1,2}+\p{N}|[\s\S]")
    assert "HF tokenizers' Oniguruma splits" in _probe(raw, set("0123")).why


# --- hardcoded tokens per pattern ---------------------------------------------------------------


def test_hardcoded_tokens_per_pattern():
    every = hardcoded_tokens()
    assert hardcoded_tokens(NAMED["cl100k"]) == every and len(every) == 1161
    assert Vocab.base(pattern=DEFAULT).tokens == Vocab.base().tokens  # ids 256..1416 unchanged
    qwen = hardcoded(NAMED["qwen2"], every)
    assert len(qwen) == 61 and b"12" not in qwen and b"123" not in qwen and b"  " in qwen
    assert qwen == [t for t in every if t in set(qwen)]  # the same relative order
    letters = check(CUSTOM["letters"])
    kept = hardcoded(letters, every)
    assert b"12" in kept and b"123" not in kept and b"==" in kept and b"\r\n" in kept
    for p in (*NAMED.values(), letters):
        kept = set(hardcoded(p, every))
        assert all((regex.findall(p.regex, t.decode()) == [t.decode()]) == (t in kept) for t in every)


def test_the_summary_says_how_many_hardcoded_tokens(tmp_path):
    r = runner.invoke(app, ["train", str(FIXTURES / "notes.txt"), "--out", str(tmp_path / "q"), "--merges", "5",
                            "--pattern", "qwen2", "-q"])
    assert r.exit_code == 0, r.output
    assert "qwen2; hardcoded 61 of 1,161" in " ".join(r.output.split())
    assert toktok.load_encoding(tmp_path / "q").n_vocab == 256 + 61 + 5


# --- refused before any work: CLI, YAML, keyword ------------------------------------------------


def _one_line(r) -> str:
    assert r.exit_code == 2, r.output
    lines = [ln for ln in r.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("toktok: error: ") and "Traceback" not in r.output, r.output
    return lines[0]


def test_refused_in_yaml_and_as_a_keyword(tmp_path):
    cfg = tmp_path / "run.yaml"
    cfg.write_text(f"output: {tmp_path / 'o' / 'tok.tiktoken'}\npattern: '(?<=x)y|[\\s\\S]'\n"
                   f"phases: [{{name: a, merges: 5, sources: [{{path: {FIXTURES / 'notes.txt'}}}]}}]\n")
    line = _one_line(runner.invoke(app, ["train", "--config", str(cfg), "-q"]))
    assert f"{cfg}: pattern: '(?<=x)y|[\\s\\S]': (?<=: a look-behind" in line
    with pytest.raises(ConfigError, match=r"^pattern '\\Ga': \\G"):
        toktok.train(str(FIXTURES / "notes.txt"), out=tmp_path / "k", pattern=r"\Ga")
    with pytest.raises(ConfigError, match="expected a pattern name"):
        toktok.train(str(FIXTURES / "notes.txt"), out=tmp_path / "k", pattern=5)
    assert not (tmp_path / "o").exists() and not (tmp_path / "k").exists()


# --- the recorded pattern: load_encoding, verify, convert, eval, warm start ----------------------


def test_load_encoding_uses_the_recorded_pattern(runs, tmp_path):
    q = runs["qwen2"]
    assert toktok.load_encoding(q)._pat_str == NAMED["qwen2"].regex  # from tokenizer.json
    only_run = tmp_path / "run_only"
    shutil.copytree(q, only_run)
    (only_run / "tokenizer.json").unlink()
    assert toktok.load_encoding(only_run)._pat_str == NAMED["qwen2"].regex  # from run.duckdb
    bare = tmp_path / "bare"
    bare.mkdir()
    shutil.copy(q / "tokenizer.tiktoken", bare / "q.tiktoken")
    assert toktok.load_encoding(bare / "q.tiktoken")._pat_str == CL100K  # nothing beside it: cl100k
    assert toktok.load_encoding(bare / "q.tiktoken", pattern="qwen2")._pat_str == NAMED["qwen2"].regex
    with pytest.raises(ConfigError, match="records the pattern qwen2; leave pattern out"):
        toktok.load_encoding(q, pattern="o200k")
    assert toktok.load_encoding(q, pattern="qwen2").encode("12345") == toktok.load_encoding(q).encode("12345")
    assert read_split(q / "tokenizer.json")[0] is NAMED["qwen2"]
    custom = runs["tiktoken_cl100k"]
    assert toktok.load_encoding(custom)._pat_str == check(CUSTOM["tiktoken_cl100k"]).regex  # the run's own form


def test_convert_writes_the_recorded_or_given_pattern(runs, tmp_path):
    bare = tmp_path / "q.tiktoken"
    shutil.copy(runs["qwen2"] / "tokenizer.tiktoken", bare)
    r = runner.invoke(app, ["convert", str(bare), str(tmp_path / "hf_default")])
    assert r.exit_code == 0, r.output
    assert read_split(tmp_path / "hf_default" / "tokenizer.json")[0] is DEFAULT
    r = runner.invoke(app, ["convert", str(bare), str(tmp_path / "hf_qwen"), "--pattern", "qwen2"])
    assert r.exit_code == 0, r.output
    assert read_split(tmp_path / "hf_qwen" / "tokenizer.json")[0] is NAMED["qwen2"]
    r = runner.invoke(app, ["convert", str(runs["o200k"] / "tokenizer.tiktoken"), str(tmp_path / "hf_o")])
    assert r.exit_code == 0, r.output  # recorded beside it
    assert read_split(tmp_path / "hf_o" / "tokenizer.json")[0] is NAMED["o200k"]
    r = runner.invoke(app, ["convert", str(runs["o200k"] / "tokenizer.json"), str(tmp_path / "back" / "o.tiktoken")])
    assert r.exit_code == 0, r.output
    assert "warning" in r.output and "o200k" in r.output  # a .tiktoken alone does not record it
    assert (tmp_path / "back" / "o.tiktoken").read_bytes() == (runs["o200k"] / "tokenizer.tiktoken").read_bytes()


def test_eval_takes_a_pattern_for_bare_tiktoken_files(runs, tmp_path):
    from toktok.insight.evaluate import evaluate

    bare = tmp_path / "g.tiktoken"
    shutil.copy(runs["gpt2"] / "tokenizer.tiktoken", bare)
    data = [str(FIXTURES / "notes.txt")]
    recorded = evaluate([str(runs["gpt2"])], data)[0]["tokens"]
    assert evaluate([str(bare)], data, pattern="gpt2")[0]["tokens"] == recorded
    assert evaluate([str(bare)], data)[0]["tokens"] != recorded  # cl100k never gives " 1" a piece
    r = runner.invoke(app, ["eval", str(bare), "--pattern", "gpt2", "--data", *data, "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["rows"][0]["tokens"] == recorded


def test_a_warm_start_keeps_its_bases_pattern_and_refuses_another(runs, tmp_path):
    base = runs["qwen2"]
    notes = str(FIXTURES / "extra.jsonl")
    r = runner.invoke(app, ["train", notes, "--out", str(tmp_path / "w"), "--merges", "20", "--warm-start",
                            str(base), "-q"])
    assert r.exit_code == 0, r.output
    assert toktok.load_encoding(tmp_path / "w")._pat_str == NAMED["qwen2"].regex
    r = runner.invoke(app, ["train", notes, "--out", str(tmp_path / "w2"), "--merges", "20", "--warm-start",
                            str(base), "--pattern", "qwen2", "-q"])
    assert r.exit_code == 0, r.output  # the same pattern again is fine
    line = _one_line(runner.invoke(app, ["train", notes, "--out", str(tmp_path / "w3"), "--merges", "20",
                                         "--warm-start", str(base), "--pattern", "o200k", "-q"]))
    assert "--pattern o200k: the warm-start base" in line and "qwen2" in line and "leave the pattern out" in line
    assert not (tmp_path / "w3").exists()


def test_toktok_verify_uses_the_recorded_pattern(runs):
    r = runner.invoke(app, ["verify", str(runs["gpt2"]), str(FIXTURES / "notes.txt")])
    assert r.exit_code == 0, r.output


def test_an_unreadable_split_beside_a_tiktoken_is_said(runs, tmp_path):
    d = tmp_path / "odd"
    shutil.copytree(runs["gpt2"], d)
    doc = json.loads((d / "tokenizer.json").read_text())
    doc["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = r"(?<=a)b|[\s\S]"
    (d / "tokenizer.json").write_text(json.dumps(doc))
    with pytest.raises(ToktokError, match="tiktoken cannot split text as this tokenizer.json does"):
        toktok.load_encoding(d)
    assert toktok.load_encoding(d, pattern="gpt2")._pat_str == NAMED["gpt2"].regex


def test_the_pattern_is_part_of_a_runs_identity():
    """--resume must be given the same pattern: it is one of the options a resume repeats."""
    from toktok.config import TrainConfig
    from toktok.resume import IDENTITY, identity

    cfg = TrainConfig([str(FIXTURES / "notes.txt")], "out/x", pattern="llama3")
    cfg.validate()
    assert "pattern" in IDENTITY and cfg.pattern is NAMED["cl100k"]
    assert identity(cfg)["pattern"] == "llama3"  # as given
    assert TrainConfig([str(FIXTURES / "notes.txt")], "out/x").to_dict()["pattern"] is None
