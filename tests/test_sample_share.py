"""Phases that share a sample (``toktok.count.stage.shares``): a later phase over the same sources,
seed and capacity takes the sample an earlier phase kept in the run file instead of sampling
again, when it is exactly the one it would take: the same cuts, or (SuperBPE's second phase, whose
pattern cuts no document) every document whole, joined from the pieces of a sample that took them
all (``whole_documents``). A sample that left documents out is not shared across cut rules.
A phase whose documents all fit as the files' sizes say counts them as it reads them, with the
result of its sample (``toktok.count.local._streamed``), and hands the texts it read to a later
phase that takes its sample (``Kept``); the sample pass and its sharing are tested here on a
``.jsonl.zst`` file, whose text is not known before it is read."""
from __future__ import annotations

import json
import signal
import subprocess

import duckdb
import pytest

import faults
import toktok
from conftest import FIXTURES
from toktok.count.common import Source, finish_sample, took_every_document, whole_documents
from toktok.count.local import Kept, count_phase, sample_pass
from toktok.count.read import read_corpus
from toktok.patterns import NAMED, SUPERWORD
from toktok.rundir import RUN_FILE

SOURCES = [str(FIXTURES / "sample.parquet"), str(FIXTURES / "extra.jsonl")]  # long documents, no .txt


@pytest.fixture
def zst_sources(tmp_path) -> list[str]:
    """SOURCES with the JSONL file compressed (``extra.jsonl.zst``): its text is not known before
    it is read, so a budgeted phase takes its sample in a pass of its own."""
    import zstandard

    d = tmp_path / "zst"
    d.mkdir()
    (d / "extra.jsonl.zst").write_bytes(zstandard.ZstdCompressor().compress((FIXTURES / "extra.jsonl").read_bytes()))
    return [SOURCES[0], str(d / "extra.jsonl.zst")]


def _sample(pattern, capacity: int):
    srcs = [Source(read_corpus(SOURCES))]
    return finish_sample(sample_pass(srcs, capacity, 0, 1 << 20, lambda *a: None, "", pattern), srcs)


def test_the_pieces_of_a_sample_that_took_every_document_join_into_the_uncut_sample():
    cut, whole = _sample(NAMED["cl100k"], 1 << 30), _sample(SUPERWORD["superbpe"], 1 << 30)
    assert cut.sample.height > whole.sample.height  # cl100k's sample cut the long documents
    assert took_every_document(cut.used) and took_every_document(whole.used)
    assert whole_documents(cut.sample).equals(whole.sample.sort("source", "row"))
    assert cut.used == whole.used and cut.held_out.equals(whole.held_out)
    assert not took_every_document(_sample(NAMED["cl100k"], 200_000).used)


def _train(tmp_path, name: str, **kw) -> tuple[toktok.TrainResult, set[str]]:
    stages: set[str] = set()
    r = toktok.train(out=tmp_path / name, verbose=False, progress=lambda stage, done, total: stages.add(stage), **kw)
    return r, stages


def _words(out, phase: str) -> dict:
    con = duckdb.connect(str(out / RUN_FILE), read_only=True)
    try:
        return dict(con.execute("select word, count from words where phase = $p", {"p": phase}).fetchall())
    finally:
        con.close()


def test_superbpe_takes_the_first_phase_sample_whole_with_no_second_pass(tmp_path, zst_sources):
    r, stages = _train(tmp_path, "o", sources=zst_sources, vocab_size=1900, superbpe=1700, budget="4GB")
    assert [p.name for p in r.phases] == ["subwords", "superwords"]
    assert "sample subwords" in stages and "sample superwords" not in stages  # one sample pass
    # the words the second phase's own sample (every document, whole) gives
    srcs = [Source(read_corpus(zst_sources))]
    own = count_phase(srcs, capacity=1 << 30, pattern=SUPERWORD["superbpe"]).words.to_pylist()
    assert _words(r.out, "superwords") == {w["word"]: w["count"] for w in own}
    assert not list(r.out.glob("sample-*")) and not list(r.out.parent.glob(".o.partial"))


def test_a_sample_that_left_documents_out_is_not_taken_by_a_phase_that_cuts_otherwise(tmp_path):
    # a 200 KB text budget of ~650 KB: cl100k's pieces are not superbpe's documents
    r, stages = _train(tmp_path, "o", superbpe=1700, budget="4GB", phases=[
        toktok.Phase("web", vocab_size=1900, sources=SOURCES, budget="200KB")])
    assert {"sample web", "sample superwords"} <= stages
    srcs = [Source(read_corpus(SOURCES))]
    own = count_phase(srcs, capacity=200_000, pattern=SUPERWORD["superbpe"]).words.to_pylist()
    assert _words(r.out, "superwords") == {w["word"]: w["count"] for w in own}


def test_a_phase_with_the_same_sources_and_pattern_takes_the_sample_as_it_is(tmp_path):
    r, stages = _train(tmp_path, "o", budget="4GB", phases=[
        toktok.Phase("a", merges=300, sources=SOURCES, budget="200KB"),
        toktok.Phase("b", merges=200, sources=SOURCES, budget="200KB")])
    assert "sample a" in stages and "sample b" not in stages
    assert _words(r.out, "a") == _words(r.out, "b")
    con = duckdb.connect(str(r.out / RUN_FILE), read_only=True)
    rows = con.execute("select phase, path, docs, text_bytes from inputs order by phase, path").fetchall()
    assert [x[1:] for x in rows if x[0] == "a"] == [x[1:] for x in rows if x[0] == "b"]
    assert con.execute("select count(*) from meta where key like 'sample:%'").fetchone()[0] == 0
    con.close()


def _cli(args: list[str], kill_at: int | None = None) -> subprocess.CompletedProcess:
    cmd = faults.command(every=0, step=10_000, kill_at=kill_at) + ["train", *args, "-q"]  # no checkpoint in a loop
    return subprocess.run(cmd, capture_output=True, text=True, timeout=600)


@pytest.mark.parametrize("kill_at", [1, 2, 6])
def test_a_resumed_run_finds_the_shared_sample(tmp_path, kill_at, zst_sources):
    """Killed after the first phase's sample was stored (1), after it was counted (2: its sample
    kept in the run file for the second phase) and after the second phase was counted (6): the
    resumed run ends with the files of an uninterrupted one, and no sample is left behind."""
    args = [*zst_sources, "--vocab-size", "1900", "--superbpe", "1700", "--budget", "4GB"]
    ref, out = tmp_path / "ref", tmp_path / "o"
    assert _cli(args + ["--out", str(ref)]).returncode == 0
    r = _cli(args + ["--out", str(out)], kill_at=kill_at)
    assert r.returncode == -signal.SIGKILL, r.stderr
    partial = tmp_path / ".o.partial"
    con = duckdb.connect(str(partial / RUN_FILE), read_only=True)
    shared = con.execute("select value from meta where key like 'sample:%'").fetchall()
    own = con.execute("select count(*) from meta where key like 'count_state:%'").fetchone()[0]
    counted = {p for (p,) in con.execute("select distinct phase from words").fetchall()}
    con.close()
    samples = list(partial.glob("sample-*.parquet"))
    assert counted == [set(), {"subwords"}, {"subwords", "superwords"}][[1, 2, 6].index(kill_at)]
    if kill_at == 1:  # the first phase's counting checkpoint: its sample
        assert len(samples) == 1 and own == 1 and not shared
    if kill_at == 2:  # the first phase's sample, kept for the second
        assert len(samples) == 1 and own == 0 and len(shared) == 1
        assert json.loads(shared[0][0])["phase"] == "subwords"
    if kill_at == 6:  # the second phase took it and was counted: it went
        assert not samples and not shared and own == 0
    r = _cli(args + ["--out", str(out), "--resume"])
    assert r.returncode == 0, r.stderr
    for name in ("tokenizer.tiktoken", "tokenizer.json"):
        assert (out / name).read_bytes() == (ref / name).read_bytes(), name
    assert not list(out.glob("sample-*"))


def test_a_kill_while_the_sample_is_written_resumes_as_if_it_never_was(tmp_path, zst_sources):
    """The finished sample is written while counting goes on, its file before the meta row that
    makes it count: a kill in the middle leaves a partial file and no row (made here from a run
    killed right after the write: the row dropped, the file cut short under its temporary name),
    and the resumed run samples again and ends with the files of an uninterrupted one."""
    args = [*zst_sources, "--vocab-size", "1900", "--superbpe", "1700", "--budget", "4GB"]
    ref, out = tmp_path / "ref", tmp_path / "o"
    assert _cli(args + ["--out", str(ref)]).returncode == 0
    assert _cli(args + ["--out", str(out)], kill_at=1).returncode == -signal.SIGKILL
    partial = tmp_path / ".o.partial"
    (sample,) = partial.glob("sample-*.parquet")
    sample.with_suffix(".tmp").write_bytes(sample.read_bytes()[: sample.stat().st_size // 2])
    sample.unlink()
    con = duckdb.connect(str(partial / RUN_FILE))
    con.execute("delete from meta where key like 'count_state:%'")
    con.close()
    r = _cli(args + ["--out", str(out), "--resume"])
    assert r.returncode == 0, r.stderr
    for name in ("tokenizer.tiktoken", "tokenizer.json"):
        assert (out / name).read_bytes() == (ref / name).read_bytes(), name
    assert not list(out.glob("sample-*"))


# ---- a phase whose documents all fit: counted as read, no sample pass ---------------------------


def _as_sampled(srcs, capacity: int, pattern):
    """What ``count_phase`` gives counting the sample pass's sample (the way a phase counts when
    its documents may not all fit), to compare with the count as read."""
    state = finish_sample(sample_pass(srcs, capacity, 0, 1 << 20, lambda *a: None, "", pattern), srcs)
    return count_phase(srcs, capacity=capacity, batch_bytes=1 << 20, pattern=pattern, restored=state)


def _same_count(a, b) -> None:
    assert a.words.equals(b.words)
    assert a.used == b.used and a.parity.equals(b.parity)
    assert a.held_out.num_rows == b.held_out.num_rows == 0 and a.held_out.schema == b.held_out.schema


@pytest.mark.parametrize("pattern", [NAMED["cl100k"], SUPERWORD["superbpe"]])
def test_a_phase_whose_documents_all_fit_counts_them_as_its_sample_would(pattern):
    """Counted as read (no sample pass), in the sample's pieces: the same words, per-file
    statistics, parity sample (pieces and all) and (empty) held-out pieces; with a .txt file,
    read in the sample's steps."""
    paths = [*SOURCES, str(FIXTURES / "notes.txt")]
    srcs = [Source(read_corpus(paths))]
    stages: set[str] = set()
    got = count_phase(srcs, capacity=1 << 30, batch_bytes=1 << 20, pattern=pattern,
                      report=lambda stage, done, total: stages.add(stage))
    assert "sample" not in stages and not got.seconds.get("sample")
    _same_count(got, _as_sampled(srcs, 1 << 30, pattern))
    weighted = [Source(read_corpus(paths[:2]), 2.0), Source(read_corpus(paths[2:]), 1.0)]  # a reservoir each
    _same_count(count_phase(weighted, capacity=1 << 30, batch_bytes=1 << 20, pattern=pattern),
                _as_sampled(weighted, 1 << 30, pattern))


def test_a_phase_counted_as_read_resumes_from_its_checkpoint():
    """It checkpoints at file boundaries as a full read does (the counts so far, no sample), and a
    count resumed from such a checkpoint ends as the uninterrupted one."""
    srcs = [Source(read_corpus([*SOURCES, str(FIXTURES / "notes.txt")]))]
    saved = []
    whole = count_phase(srcs, capacity=1 << 30, pattern=NAMED["cl100k"], save=saved.append, every=0)
    assert [st.files_done for st in saved] == [1, 2] and all(st.sample is None for st in saved)
    for st in saved:
        _same_count(count_phase(srcs, capacity=1 << 30, pattern=NAMED["cl100k"], restored=st), whole)


def test_texts_kept_by_a_phase_count_as_the_files_would(tmp_path):
    """The texts a phase read (``keep``) counted by another with its own pattern (``reads``) give
    what reading the files gives, and go as they are counted."""
    srcs = [Source(read_corpus(SOURCES))]
    kept = Kept("key")
    first = count_phase(srcs, capacity=1 << 30, pattern=NAMED["cl100k"], keep=kept)
    assert kept.complete and set(kept) == {f.path for f in srcs[0].corpus.files}
    _same_count(first, count_phase(srcs, capacity=1 << 30, pattern=NAMED["cl100k"]))
    second = count_phase(srcs, capacity=1 << 30, pattern=SUPERWORD["superbpe"], reads=kept)
    assert not kept
    _same_count(second, count_phase(srcs, capacity=1 << 30, pattern=SUPERWORD["superbpe"]))


def test_documents_that_outgrow_the_sizes_are_sampled_after_all(tmp_path):
    """A dictionary-encoded Parquet column of repeated documents holds more text than its size
    says: the count as read stops at the capacity and the phase samples, as if it never began."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    texts = [f"doc {i % 7} " + "repeated words here. " * 200 for i in range(300)]
    path = tmp_path / "rep.parquet"
    pq.write_table(pa.table({"text": texts}), path, use_dictionary=True)
    srcs = [Source(read_corpus([str(path)]))]
    total = sum(len(t.encode()) for t in texts)
    bound = srcs[0].corpus.text_bound(srcs[0].corpus.files[0])
    assert bound < total // 2  # (the dictionary holds each text once)
    capacity = total // 2
    stages: set[str] = set()
    got = count_phase(srcs, capacity=capacity, batch_bytes=1 << 16, pattern=NAMED["cl100k"],
                      report=lambda stage, done, total: stages.add(stage))
    assert "sample" in stages
    want = _as_sampled(srcs, capacity, NAMED["cl100k"])
    assert got.words.equals(want.words) and got.used == want.used and got.parity.equals(want.parity)
    assert got.held_out.equals(want.held_out) and got.held_out.num_rows > 0


def test_superbpe_whose_documents_all_fit_reads_them_once(tmp_path):
    """No sample pass and no sample file: the second phase counts the texts the first one read,
    with the words its own count of the files gives."""
    r, stages = _train(tmp_path, "o", sources=SOURCES, vocab_size=1900, superbpe=1700, budget="4GB")
    assert not any(s.startswith("sample") for s in stages)
    srcs = [Source(read_corpus(SOURCES))]
    own = count_phase(srcs, capacity=1 << 30, pattern=SUPERWORD["superbpe"]).words.to_pylist()
    assert _words(r.out, "superwords") == {w["word"]: w["count"] for w in own}
    assert not list(r.out.glob("sample-*")) and not list(r.out.parent.glob(".o.partial"))


@pytest.mark.parametrize("kill_at", [1, 2, 3])
def test_a_resumed_run_whose_documents_all_fit_ends_as_an_uninterrupted_one(tmp_path, kill_at):
    """Killed at its first checkpoints (no sample is stored: the phases count as they read), the
    resumed run reads what it needs again and ends with the files of an uninterrupted one."""
    args = [*SOURCES, "--vocab-size", "1900", "--superbpe", "1700", "--budget", "4GB"]
    ref, out = tmp_path / "ref", tmp_path / "o"
    assert _cli(args + ["--out", str(ref)]).returncode == 0
    r = _cli(args + ["--out", str(out)], kill_at=kill_at)
    assert r.returncode == -signal.SIGKILL, r.stderr
    assert not list((tmp_path / ".o.partial").glob("sample-*"))
    r = _cli(args + ["--out", str(out), "--resume"])
    assert r.returncode == 0, r.stderr
    for name in ("tokenizer.tiktoken", "tokenizer.json"):
        assert (out / name).read_bytes() == (ref / name).read_bytes(), name
