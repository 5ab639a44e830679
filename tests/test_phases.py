"""Multi-phase training: phases run in order over one merge history; each phase's merges equal the
reference trainer run on that phase's words with the vocabulary left by the phases before."""
from __future__ import annotations

import json
from pathlib import Path

import duckdb
import numpy as np
import polars as pl
import pytest
from conftest import FIXTURES
from oracles.reference_bpe import train as reference_train
from typer.testing import CliRunner

import toktok
from toktok.cli import app
from toktok.config import PhaseConfig, SourceConfig, TrainConfig
from toktok.formats.hf import load_hf
from toktok.formats.tiktoken import read_tiktoken
from toktok.pipeline import train
from toktok.count.scan import count_words
from toktok.count.read import read_corpus
from toktok.vocab import Vocab

runner = CliRunner()
SPECIALS = ["<|endoftext|>"]
PHASES = [  # (name, merges, sources): small, so that the reference stays quick
    ("english", 120, [str(FIXTURES / "notes.txt")]),
    ("documents", 90, [str(FIXTURES / "extra.jsonl")]),
    ("multilingual", 60, [str(FIXTURES / "sample.parquet")]),
]


def _texts(sources: list[str]) -> list[str]:
    out: list[str] = []
    for src in sources:
        for batch in read_corpus([src]).batches():
            out += batch.texts.to_pylist()
    return out


def _word_counts(sources: list[str], specials=SPECIALS) -> dict[bytes, int]:
    table = count_words(_texts(sources), specials=specials).sort("word")
    return dict(zip(table["word"].to_list(), table["count"].to_list()))


def _config_yaml(out: Path) -> str:
    lines = [f"output: {out / 'three.tiktoken'}", f"special_tokens: {json.dumps(SPECIALS)}", "phases:"]
    for name, n, sources in PHASES:
        lines += [f"  - name: {name}", f"    merges: {n}", "    sources:"]
        lines += [f"      - file: {s}" for s in sources]
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def three(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("phases")
    cfg = tmp / "three.yaml"
    cfg.write_text(_config_yaml(tmp / "out"))
    r = runner.invoke(app, ["train", "--config", str(cfg), "-q"])
    assert r.exit_code == 0, r.output
    return tmp / "out"


def _merges(out: Path, phase: str):
    con = duckdb.connect(str(out / "run.duckdb"), read_only=True)
    return con.execute(
        "select left_id, right_id, token_id, count, reused from merges where phase = $p order by merge_index",
        {"p": phase},
    ).fetchall()


def test_exact_merge_count_per_phase(three):
    con = duckdb.connect(str(three / "run.duckdb"), read_only=True)
    got = dict(con.execute("select phase, count(*) from merges where not reused group by phase").fetchall())
    assert got == {name: n for name, n, _ in PHASES}
    # merge_index runs across phases; a phase's new ids follow the previous phase's
    rows = con.execute("select phase, min(merge_index), max(merge_index), min(token_id) from merges "
                       "where not reused group by phase order by 2").fetchall()
    assert [r[0] for r in rows] == [p[0] for p in PHASES]
    first = 256 + 1161
    for (name, lo, hi, tid), (_, n, _) in zip(rows, PHASES):
        assert tid == first
        first += n
    enc = toktok.load_encoding(three)
    assert enc.n_vocab == 256 + 1161 + sum(p[1] for p in PHASES) + len(SPECIALS)


def test_each_phase_equals_the_reference_on_its_words(three):
    tokens = read_tiktoken(three / "three.tiktoken")
    before = Vocab.base().tokens
    for name, n, sources in PHASES:
        wc = _word_counts(sources)
        ref_tokens, ref_merges = reference_train(wc, before, n)
        assert _merges(three, name) == [tuple(m) for m in ref_merges], name
        assert tokens[: len(ref_tokens)] == ref_tokens, name
        before = ref_tokens
    assert tokens == before


def test_run_file_records_the_phase_everywhere(three):
    con = duckdb.connect(str(three / "run.duckdb"), read_only=True)
    words = dict(con.execute("select phase, count(*) from words group by phase").fetchall())
    assert words == {name: len(_word_counts(src)) for name, _, src in PHASES}
    inputs = con.execute("select phase, path from inputs order by phase").fetchall()
    assert sorted(inputs) == sorted((name, s) for name, _, src in PHASES for s in src)
    vocab = dict(con.execute("select phase, count(*) from vocab where kind = 'merge' group by phase").fetchall())
    assert vocab == {name: n for name, n, _ in PHASES}
    assert con.execute("select count(*) from vocab where phase is null").fetchone()[0] == 256 + 1161 + 1
    phases = json.loads(con.execute("select value from meta where key = 'phases'").fetchone()[0])
    assert [(p["name"], p["merges_requested"], p["merges_learned"]) for p in phases] == [(a, n, n) for a, n, _ in PHASES]
    assert phases[1]["first_id"] == 256 + 1161 + PHASES[0][1]


def test_parity_in_tiktoken_hf_and_transformers(three):
    from transformers import PreTrainedTokenizerFast

    enc = toktok.load_encoding(three)
    hf = load_hf(three)
    tf = PreTrainedTokenizerFast.from_pretrained(str(three))
    texts = _texts([str(FIXTURES / "extra.jsonl")])[:20] + ["x<|endoftext|>y  \r\n 123456 DON'T"]
    for t in texts:
        ids = enc.encode(t, allowed_special="all")
        assert hf.encode(t, add_special_tokens=False).ids == ids
        assert tf(t, add_special_tokens=False)["input_ids"] == ids


def test_one_phase_command_line_run_is_main(tmp_path):
    r = runner.invoke(app, ["train", str(FIXTURES / "notes.txt"), "--out", str(tmp_path / "o"), "--merges", "20", "-q"])
    assert r.exit_code == 0, r.output
    con = duckdb.connect(str(tmp_path / "o" / "run.duckdb"), read_only=True)
    for table in ("merges", "words", "inputs"):
        assert con.execute(f"select distinct phase from {table}").fetchall() == [("main",)]


def test_phase_with_no_merges_and_the_same_source_twice(tmp_path):
    notes = str(FIXTURES / "notes.txt")
    cfg = TrainConfig(out=str(tmp_path / "o"), special_tokens=[], hardcoded=False, verify_slices=10, phases=[
        PhaseConfig("a", 40, [SourceConfig(notes)]),
        PhaseConfig("b", 0, [SourceConfig(notes)]),
        PhaseConfig("c", 30, [SourceConfig(notes)]),
    ])
    s = train(cfg)
    assert [(p.name, p.merges_learned, p.first_id) for p in s.phases] == [("a", 40, 256), ("b", 0, 296), ("c", 30, 296)]
    # the same words again: phases a and c together are one 70-merge run
    wc = _word_counts([notes], [])
    ref_tokens, _ = reference_train(wc, Vocab.base(False).tokens, 70)
    assert read_tiktoken(tmp_path / "o" / "tokenizer.tiktoken") == ref_tokens


def test_empty_phase_names_the_phase(tmp_path):
    empty = tmp_path / "empty.jsonl"
    empty.write_text('{"text": ""}\n')
    cfg = tmp_path / "c.yaml"
    cfg.write_text(f"output: {tmp_path / 'o' / 'x.tiktoken'}\nphases:\n"
                   f"  - {{name: first, merges: 5, sources: [{{file: {FIXTURES / 'notes.txt'}}}]}}\n"
                   f"  - {{name: second, merges: 5, sources: [{{file: {empty}}}]}}\n")
    r = runner.invoke(app, ["train", "--config", str(cfg), "-q"])
    assert r.exit_code == 2, r.output
    assert "phase 'second'" in r.output and "empty" in r.output
    assert not (tmp_path / "o").exists()


def test_a_bad_source_in_a_later_phase_fails_before_any_work(tmp_path):
    cfg = tmp_path / "c.yaml"
    cfg.write_text(f"output: {tmp_path / 'o' / 'x.tiktoken'}\nphases:\n"
                   f"  - {{name: first, merges: 5, sources: [{{file: {FIXTURES / 'notes.txt'}}}]}}\n"
                   f"  - {{name: second, merges: 5, sources: [{{path: {tmp_path / 'missing'}}}]}}\n")
    r = runner.invoke(app, ["train", "--config", str(cfg), "-q"])
    assert r.exit_code == 2 and "missing" in r.output
    assert not (tmp_path / "o").exists()


def test_budget_is_shared_by_weights(tmp_path):
    """A phase's text budget is a seeded reservoir sample, shared by the sources' weights."""
    from toktok.count.sample import Reservoir

    sample, extra = str(FIXTURES / "sample.parquet"), str(FIXTURES / "extra.jsonl")
    cfg = TrainConfig(out=str(tmp_path / "o"), verify_slices=10, seed=4, phases=[
        PhaseConfig("mix", 50, [SourceConfig(sample, weight=2), SourceConfig(extra, weight=1)], budget="60KB"),
        PhaseConfig("notes", 20, [SourceConfig(str(FIXTURES / "notes.txt"))], budget="10KB"),
    ])
    s = train(cfg)
    con = duckdb.connect(str(tmp_path / "o" / "run.duckdb"), read_only=True)
    taken = {p: (ph, b, seen) for p, ph, b, seen in
             con.execute("select path, phase, text_bytes, bytes_seen from inputs").fetchall()}
    max_doc = 8192  # the fixtures' longest document: the reservoir stops before one that does not fit
    assert 40_000 - max_doc <= taken[sample][1] <= 40_000 < taken[sample][2]
    assert 20_000 - max_doc <= taken[extra][1] <= 20_000 < taken[extra][2]
    assert 0 < taken[str(FIXTURES / "notes.txt")][1] <= 10_000
    # the words of a phase are exactly the text it took: pieces partition the text
    per_phase = dict(con.execute("select phase, sum(octet_length(word) * count) from words group by phase").fetchall())
    assert per_phase["mix"] == taken[sample][1] + taken[extra][1]
    assert [p.merges_learned for p in s.phases] == [50, 20]
    # the documents taken are the reservoir's: the same sample as one taken directly
    docs = pl.read_parquet(sample)["text"]
    r = Reservoir(40_000, seed=4)
    r.offer(sample, 0, docs, key="sample.parquet")  # a document's identity: (the file's key, row)
    assert int(r.finish()["bytes"].sum()) == taken[sample][1]

def test_sampled_runs_are_byte_identical_for_a_seed(tmp_path):
    """The same seed gives the same sample, so the same tokenizer files; another seed may not."""
    def run(out, seed):
        cfg = TrainConfig(out=str(tmp_path / out), verify_slices=5, seed=seed, phases=[
            PhaseConfig("mix", 60, [SourceConfig(str(FIXTURES / "sample.parquet")),
                                    SourceConfig(str(FIXTURES / "extra.jsonl"))], budget="50KB")])
        train(cfg)
        return (tmp_path / out / "tokenizer.tiktoken").read_bytes(), (tmp_path / out / "tokenizer.json").read_bytes()

    a = run("a", 11)
    assert run("b", 11) == a
    assert run("c", 12) != a
