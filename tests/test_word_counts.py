"""Word counts out and in (issue 51): ``toktok count`` writes the word table a run merges,
``toktok train --word-counts`` (a ``counts:`` source, ``word_counts=``) trains from such tables with
the same tokenizer, byte for byte, as training on the text; counts of disjoint parts summed with
DuckDB train the whole's tokenizer; every bad table is refused in one line naming the file and row."""
from __future__ import annotations

import json
from pathlib import Path

import duckdb
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import FIXTURES, cli_ok as _ok
from typer.testing import CliRunner

import toktok
from toktok.cli import app
from toktok.count.scan import count_words
from toktok.count.tables import read_counts, word_documents
from toktok.errors import InputError
from toktok.patterns import NAMED

runner = CliRunner()
SPECIALS = ["-s", "<|endoftext|>", "-s", "<|pad|>"]
FILES = ("tokenizer.json", "tokenizer.tiktoken", "tokenizer_config.json", "special_tokens_map.json")
SOURCES = [FIXTURES / "sample.parquet", FIXTURES / "notes.txt", FIXTURES / "extra.jsonl"]


def _same_files(a: Path, b: Path) -> None:
    for f in FILES:
        assert (a / f).read_bytes() == (b / f).read_bytes(), f


@pytest.fixture(scope="module")
def text_run(tmp_path_factory) -> Path:
    """The reference: trained on the fixtures' text at 1,800 ids with two specials."""
    out = tmp_path_factory.mktemp("text") / "tok"
    _ok("train", *SOURCES, "--out", out, "--vocab-size", "1800", *SPECIALS, "-q")
    return out


def test_count_writes_the_word_table_a_run_merges(tmp_path, text_run):
    """``toktok count`` = the run's own word table (run.duckdb ``words``), sorted by word, with the
    pattern, specials, files read and version in the Parquet metadata."""
    out = tmp_path / "c.parquet"
    _ok("count", *SOURCES, "--out", out, *SPECIALS)
    t = pq.read_table(out)
    assert t.schema.field("word").type == pa.binary() and t.schema.field("count").type == pa.int64()
    words = t.column("word").to_pylist()
    assert words == sorted(words)
    con = duckdb.connect(str(text_run / "run.duckdb"), read_only=True)
    run = dict(con.execute("select word, count from words").fetchall())
    assert dict(zip(words, t.column("count").to_pylist())) == run
    meta = json.loads(t.schema.metadata[b"toktok"])
    assert meta["pattern"]["name"] == "cl100k" and meta["special_tokens"] == ["<|endoftext|>", "<|pad|>"]
    assert [r["path"] for r in meta["read"]] == [str(p) for p in SOURCES] and meta["toktok_version"] == toktok.__version__
    assert sum(r["docs"] for r in meta["read"]) > 0
    again = runner.invoke(app, ["count", str(SOURCES[1]), "--out", str(out)])
    assert again.exit_code == 2 and f"{out}: exists; pass --force to replace it" in again.output
    assert pq.read_table(out).num_rows == t.num_rows


def test_count_takes_quiet_as_train_does(tmp_path):
    """``toktok count -q``, as ``train -q``: no progress on stderr (unless --progress is given),
    the one line it wrote on stdout."""
    out = tmp_path / "c.parquet"
    r = runner.invoke(app, ["count", str(SOURCES[1]), "--out", str(out), "-q"])
    assert r.exit_code == 0, r.output
    assert r.stderr == "" and " ".join(r.stdout.split()).startswith(f"toktok: wrote {out}: ")  # (wrapped at 80)
    given = runner.invoke(app, ["count", str(SOURCES[1]), "--out", str(out), "--force", "-q", "--progress", "json"])
    assert given.exit_code == 0 and '"event": "progress"' in given.stderr


def test_count_then_train_is_training_on_the_text(tmp_path, text_run):
    """The round trip: count → train --word-counts gives the text run's files byte for byte."""
    counts = tmp_path / "c.parquet"
    _ok("count", *SOURCES, "--out", counts, *SPECIALS)
    out = tmp_path / "fromcounts"
    said = _ok("train", "--word-counts", counts, "--out", out, "--vocab-size", "1800", *SPECIALS, "-q")
    assert "word-count tables, 0.7 MB" in said  # the summary's corpus row: no documents, the text the counts stand for
    _same_files(out, text_run)
    con = duckdb.connect(str(out / "run.duckdb"), read_only=True)
    assert con.execute("select kind from inputs").fetchall() == [("parquet",)]
    assert con.execute("select count(*) from parity where source = 'word-counts'").fetchone()[0] == 64


def test_four_parts_summed_with_duckdb_train_the_whole(tmp_path, text_run):
    """Counts of four disjoint parts (two halves of sample.parquet, notes.txt, extra.jsonl),
    summed by word with one DuckDB GROUP BY, train the whole's tokenizer byte for byte; the parts'
    tables given as a glob (summed by toktok, each repeated word said once) do too."""
    df = pl.read_parquet(FIXTURES / "sample.parquet")
    half = df.height // 2
    parts = [tmp_path / "a.parquet", tmp_path / "b.parquet"]
    df.head(half).write_parquet(parts[0])
    df.tail(df.height - half).write_parquet(parts[1])
    tables = []
    for k, src in enumerate([*parts, FIXTURES / "notes.txt", FIXTURES / "extra.jsonl"]):
        tables.append(tmp_path / "counts" / f"part{k}.parquet")
        tables[-1].parent.mkdir(exist_ok=True)
        _ok("count", src, "--out", tables[-1], *SPECIALS)
    summed = tmp_path / "summed.parquet"
    duckdb.execute(f"copy (select word, sum(count)::bigint as count from read_parquet('{tmp_path}/counts/*.parquet') "
                   f"group by word) to '{summed}' (format parquet)")
    out = tmp_path / "summed"
    _ok("train", "--word-counts", summed, "--out", out, "--vocab-size", "1800", *SPECIALS, "-q")
    _same_files(out, text_run)
    out2 = tmp_path / "glob"
    r = runner.invoke(app, ["train", "--word-counts", f"{tmp_path}/counts/*.parquet", "--out", str(out2),
                            "--vocab-size", "1800", *SPECIALS, "-q"])
    assert r.exit_code == 0, r.output
    assert "words are given more than once" in r.output and "their counts are summed" in r.output
    _same_files(out2, text_run)


def test_python_keyword_and_a_counts_source_in_a_phase(tmp_path, text_run):
    """``word_counts=`` and a YAML phase's ``counts:`` source (a text column named otherwise,
    ``word_column:``) give the same tokenizer; a table beside text is summed with its words."""
    counts = tmp_path / "c.parquet"
    toktok.word_counts(SOURCES, out=counts, special_tokens=["<|endoftext|>", "<|pad|>"])
    r = toktok.train(word_counts=str(counts), out=tmp_path / "kw", vocab_size=1800,
                     special_tokens=["<|endoftext|>", "<|pad|>"])
    _same_files(tmp_path / "kw", text_run)
    assert r.vocab_size == 1800
    # the words as text, under other column names
    t = pq.read_table(counts)
    named = tmp_path / "named.parquet"
    pq.write_table(pa.table({"piece": t.column("word").cast(pa.string()), "n": t.column("count")}), named)
    cfg = tmp_path / "run.yaml"
    cfg.write_text(f"output: {tmp_path}/yaml/tokenizer.tiktoken\nspecial_tokens: ['<|endoftext|>', '<|pad|>']\n"
                   f"phases:\n  - {{name: main, vocab_size: 1800, sources: [{{counts: {named}, word_column: piece, "
                   f"count_column: n}}]}}\n")
    _ok("train", "--config", cfg, "-q")
    _same_files(tmp_path / "yaml", text_run)
    # half of it as text, the other half as counts: the same sum
    df = pl.read_parquet(FIXTURES / "sample.parquet")
    df.head(200).write_parquet(tmp_path / "h1.parquet")
    df.tail(df.height - 200).write_parquet(tmp_path / "h2.parquet")
    toktok.word_counts([tmp_path / "h2.parquet", *SOURCES[1:]], out=tmp_path / "h2c.parquet",
                 special_tokens=["<|endoftext|>", "<|pad|>"])
    _ok("train", tmp_path / "h1.parquet", "--word-counts", tmp_path / "h2c.parquet", "--out", tmp_path / "mixed",
        "--vocab-size", "1800", *SPECIALS, "-q")
    _same_files(tmp_path / "mixed", text_run)


@pytest.mark.parametrize("pattern", ["cl100k", "o200k", "gpt2", "qwen2"])
def test_every_counted_word_is_one_piece_of_its_pattern(pattern):
    """What the count stage counts passes the check a table's words get: each word, cut with the
    same pattern on its own, is itself (every named pattern, on the fixtures)."""
    texts = pl.read_parquet(FIXTURES / "sample.parquet")["text"].to_list()
    words = count_words(texts, specials=["<|endoftext|>"], pattern=NAMED[pattern])
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "w.parquet"
        words.write_parquet(p)
        got = read_counts([str(p)], pattern=NAMED[pattern], specials=["<|endoftext|>"])
    assert got.words.num_rows == words.height and not got.warnings


def test_word_documents_are_seeded_and_weighted():
    """With no text, the parity check reads documents made of the words, drawn by count, seeded."""
    words, counts = pa.array([b"a", b" b", b"c"]), [1000, 1, 1]
    one, two = word_documents(words, counts, 0), word_documents(words, counts, 0)
    assert one.equals(two) and one.num_rows == 64
    text = "".join(one.column("text").to_pylist())
    assert text.count("a") > 20 * text.count("c")
    assert not word_documents(words, counts, 1).equals(one)


# --- bad tables: one line naming the file and row, nothing written --------------------------------


def _table(path: Path, words, counts, meta: dict | None = None, word_type=pa.binary()) -> Path:
    t = pa.table({"word": pa.array(words, word_type), "count": counts})
    if meta is not None:
        t = t.replace_schema_metadata({b"toktok": json.dumps(meta).encode()})
    pq.write_table(t, path)
    return path


BAD = [
    # (words, counts, needles)
    ([b"hello", b" world", b"hello world"], pa.array([3, 2, 1]), ["row 2", "'hello world'", "not one piece",
                                                                 "splits it into ['hello', ' world']"]),
    ([b"a", b"b"], pa.array([3, 0]), ["row 1", "count 0 is not more than 0"]),
    ([b"a", b"b"], pa.array([-4, 2]), ["row 0", "count -4 is not more than 0"]),
    ([b"a", b"b"], pa.array([1.0, 2.5]), ["row 1", "count 2.5 is not a whole number"]),
    ([b"a", b"b"], pa.array([1, None], pa.int64()), ["row 1", "the count is null"]),
    ([b"a", b"\xff\xfe"], pa.array([1, 2]), ["row 1", "is not UTF-8 text"]),
    ([b"a", b""], pa.array([1, 2]), ["row 1", "the word is empty or null"]),
    ([b"x<|pad|>"], pa.array([1]), ["row 0", "holds the special token '<|pad|>'"]),
    ([b"a"], pa.array(["1"]), ["column 'count' is", "not integers"]),
]


@pytest.mark.parametrize("words,counts,needles", BAD, ids=[b[2][1][:30] for b in BAD])
def test_a_bad_table_is_one_line_naming_the_file_and_row(tmp_path, words, counts, needles):
    bad = _table(tmp_path / "bad.parquet", words, counts)
    out = tmp_path / "out"
    r = runner.invoke(app, ["train", "--word-counts", str(bad), "--out", str(out), "--merges", "5", *SPECIALS, "-q"])
    assert r.exit_code == 2, r.output
    lines = [ln for ln in r.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith(f"toktok: error: {bad}: "), r.output
    for n in needles:
        assert n in lines[0], (n, lines[0])
    assert not out.exists() and not list(tmp_path.glob(".out*"))


def test_a_table_counted_with_another_pattern_or_missing_its_column_is_refused(tmp_path):
    counts = tmp_path / "o.parquet"
    toktok.word_counts([FIXTURES / "notes.txt"], out=counts, pattern="o200k")
    r = runner.invoke(app, ["train", "--word-counts", str(counts), "--out", str(tmp_path / "x"), "-q", "--merges", "5"])
    assert r.exit_code == 2 and f"{counts}: counted with the pattern o200k, not the run's cl100k" in r.output
    assert "--pattern o200k" in r.output
    _ok("train", "--word-counts", counts, "--out", tmp_path / "y", "-q", "--merges", "5", "--pattern", "o200k")
    r = runner.invoke(app, ["train", "--word-counts", str(counts), "--word-column", "piece", "--out",
                            str(tmp_path / "z"), "-q", "--merges", "5", "--pattern", "o200k"])
    assert r.exit_code == 2 and "no column 'piece' for the words" in r.output and "--word-column" in r.output


def test_a_word_given_twice_is_summed_and_said_once(tmp_path):
    a = _table(tmp_path / "a.parquet", [b"hello", b" world", b"hello"], pa.array([3, 2, 4]))
    got = read_counts([str(a)])
    assert dict(zip(got.words.column("word").to_pylist(), got.words.column("count").to_pylist())) == \
        {b"hello": 7, b" world": 2}
    assert len(got.warnings) == 1 and "1 words are given more than once" in got.warnings[0]
    assert "'hello' at row 0" in got.warnings[0] and "row 2" in got.warnings[0]
    with pytest.raises(InputError, match="row 0: the word 'a b'"):
        read_counts([str(_table(tmp_path / "b.parquet", [b"a b"], pa.array([1])))])


def test_own_tables_are_read_straight_as_the_general_reading_reads_them(tmp_path, monkeypatch):
    """toktok's own table is read straight into Arrow (``_read_own``): the same words, counts and
    figures as the general reading; one with toktok's metadata that breaks a rule (unsorted, a
    word twice, a count of 0, no specials recorded) goes the general way, with its message."""
    from toktok.count import tables

    counts = tmp_path / "c.parquet"
    toktok.word_counts(SOURCES, out=counts, special_tokens=["<|endoftext|>", "<|pad|>"])
    specials = ["<|endoftext|>"]
    assert tables._read_own(str(counts), NAMED["cl100k"], specials) is not None
    fast = read_counts([str(counts)], specials=specials)
    with monkeypatch.context() as m:
        m.setattr(tables, "_read_own", lambda *a: None)
        slow = read_counts([str(counts)], specials=specials)
    assert fast.words.equals(slow.words) and fast.used == slow.used and fast.files == slow.files
    assert fast.words.schema == tables.COUNTS_SCHEMA and not fast.warnings
    # read ahead (count.start, while the run file opens): taken for its own file, pattern and specials only
    from toktok.config import TrainConfig
    from toktok.count import stage

    spec = TrainConfig(word_counts=[str(counts)], out=str(tmp_path / "o"), merges=5,
                       special_tokens=specials).describe()
    phase = spec.phases[0]
    ahead = stage.start(spec, phase, stage.resolve(spec, phase), None, NAMED["cl100k"], specials)
    assert isinstance(ahead, tables.TableAhead) and ahead.path == str(counts)
    assert read_counts([str(counts)], specials=specials, ahead=ahead).words.equals(fast.words)
    other = tables.TableAhead(str(counts), NAMED["o200k"], specials)
    with pytest.raises(InputError, match="counted with the pattern cl100k"):
        read_counts([str(counts)], pattern=NAMED["o200k"], specials=specials, ahead=ahead)
    assert other.result() is None  # (its pattern is not the table's: the general reading says why)
    meta = json.loads(pq.read_schema(counts).metadata[b"toktok"])
    unsorted = _table(tmp_path / "u.parquet", [b"b", b"a"], pa.array([1, 2]), meta)
    assert tables._read_own(str(unsorted), NAMED["cl100k"], []) is None
    assert read_counts([str(unsorted)]).words.column("word").to_pylist() == [b"a", b"b"]
    twice = read_counts([str(_table(tmp_path / "t.parquet", [b"a", b"a"], pa.array([1, 2]), meta))])
    assert twice.words.column("count").to_pylist() == [3] and "given more than once" in twice.warnings[0]
    with pytest.raises(InputError, match="row 1: count 0 is not more than 0"):
        read_counts([str(_table(tmp_path / "z.parquet", [b"a", b"b"], pa.array([1, 0]), meta))])
    assert tables._read_own(str(counts), NAMED["cl100k"], ["<|other|>"]) is None  # not cut out: checked
    with pytest.raises(InputError, match="is not one piece of the run's pattern"):
        read_counts([str(_table(tmp_path / "s.parquet", [b"a", b"x<|other|>"], pa.array([1, 2]), meta))],
                    specials=["<|other|>"])


def test_a_table_read_from_the_start_is_taken_as_read_and_never_when_changed(tmp_path):
    """``count.early``: the file read while the pipeline is imported is what ``_read_own`` reads
    itself (the same table, checked the same way); taken once; a file changed since, or not one
    of toktok's own layout, is read as ever; ``api.read_soon`` reads only a run's one table."""
    import os

    from toktok.api import read_soon
    from toktok.config import TrainConfig
    from toktok.count import early, tables

    counts = tmp_path / "c.parquet"
    toktok.word_counts(SOURCES, out=counts, special_tokens=["<|endoftext|>"])
    own = tables._read_own(str(counts), NAMED["cl100k"], [])
    early.read_soon(str(counts))
    got = early.take(str(counts))
    assert got is not None and got[1].column("word").equals(own.words.column("word"))
    assert early.take(str(counts)) is None  # (once)
    early.read_soon(str(counts))
    assert tables._read_own(str(counts), NAMED["cl100k"], []).words.equals(own.words)
    early.read_soon(str(counts))
    st = os.stat(counts)
    os.utime(counts, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))  # changed since: read again
    assert early.take(str(counts)) is None
    other = _table(tmp_path / "s.parquet", ["a", "b"], pa.array([1, 2]), word_type=pa.string())
    early.read_soon(str(other))
    assert early.take(str(other)) is None  # (not toktok's layout: the general reading reads it)
    early.read_soon(str(tmp_path / "none.parquet"))
    assert early.take(str(tmp_path / "none.parquet")) is None
    read_soon(TrainConfig(word_counts=[str(counts)], out=str(tmp_path / "o"), merges=5))
    assert early.take(str(counts)) is not None
    for cfg in (TrainConfig(word_counts=[str(counts)], out=str(tmp_path / "o"), merges=5, budget="1GB"),
                TrainConfig(word_counts=[str(counts)], out=str(tmp_path / "o"), merges=5, count_column="n"),
                TrainConfig(sources=[str(SOURCES[0])], out=str(tmp_path / "o"), merges=5)):
        read_soon(cfg)
        assert early.take(str(counts)) is None


# --- --resume of a word-count run killed with SIGKILL --------------------------------------------

RUN_TABLES = {
    "words": "SELECT word, count, phase, tokens FROM words ORDER BY phase, word",
    "merges": "SELECT * FROM merges ORDER BY merge_index",
    "vocab": "SELECT * FROM vocab ORDER BY id",
    "inputs": "SELECT path, kind, phase, docs, text_bytes, docs_seen, bytes_seen FROM inputs ORDER BY phase, path",
    "parity": "SELECT * FROM parity ORDER BY phase, hash",
}


def _run_tables(run: Path) -> dict:
    con = duckdb.connect(str(run / "run.duckdb"), read_only=True)
    try:
        return {k: con.execute(q).fetchall() for k, q in RUN_TABLES.items()}
    finally:
        con.close()


@pytest.mark.parametrize("fault", [1, 3], ids=["counted", "in-the-loop"])
def test_kill9_of_a_word_count_run_resumes_to_the_uninterrupted_run(tmp_path, text_run, fault):
    """``train --word-counts`` killed (SIGKILL) right after its "counted" checkpoint (1) or inside
    the merge loop (3: merges checkpointed), then run again with ``--resume``: the files and run
    file of an uninterrupted run, which are the text run's files."""
    import signal
    import subprocess

    import faults

    counts = tmp_path / "c.parquet"
    _ok("count", *SOURCES, "--out", counts, *SPECIALS)
    args = ["train", "--word-counts", str(counts), "--vocab-size", "1800", *SPECIALS, "-q", "--out"]

    def run(out: Path, *more: str, kill: int | None = None) -> subprocess.CompletedProcess:
        return subprocess.run(faults.command(every=0, step=40, kill_at=kill) + args + [str(out), *more],
                              capture_output=True, text=True, timeout=600)

    r = run(tmp_path / "ref")
    assert r.returncode == 0, r.stderr
    out = tmp_path / "tok"
    r = run(out, kill=fault)
    assert r.returncode == -signal.SIGKILL, r.stderr
    staging = tmp_path / ".tok.partial"
    assert not out.exists() and staging.is_dir()
    con = duckdb.connect(str(staging / "run.duckdb"), read_only=True)
    stored = con.execute("SELECT count(*) FROM merges").fetchone()[0]
    words = con.execute("SELECT count(*) FROM words").fetchone()[0]
    con.close()
    assert words == pq.read_metadata(counts).num_rows and ((stored == 0) if fault == 1 else (0 < stored < 1800))
    if fault == 1:  # a table changed since: refused, naming it; put back as it was, it resumes
        import shutil

        shutil.copy2(counts, tmp_path / "kept.parquet")
        t = pq.read_table(counts)
        pq.write_table(t.set_column(1, "count", pa.array([c + 1 for c in t.column("count").to_pylist()])), counts)
        r = run(out, "--resume")
        assert r.returncode == 2 and str(counts) in r.stderr and "changed" in r.stderr, r.stderr
        assert staging.is_dir()
        shutil.copy2(tmp_path / "kept.parquet", counts)
    r = run(out, "--resume")
    assert r.returncode == 0, r.stderr
    assert not staging.exists()
    _same_files(out, tmp_path / "ref")
    _same_files(out, text_run)
    assert _run_tables(out) == _run_tables(tmp_path / "ref")
