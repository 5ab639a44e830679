"""Tests for toktok.count.read: sources, formats, errors, the bad_utf8 policy, txt chunking, stats."""
from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import regex
import zstandard
from conftest import FUZZ
from hypothesis import given, settings
from hypothesis import strategies as st

from toktok.errors import ConfigError, InputError
from toktok.count.read import Batch, SourceFile, _split_point, read_corpus
from toktok.count.sources import resolve_sources
from toktok.vocab import PATTERN

FIXTURES = Path(__file__).resolve().parent.parent / "data_fixtures" / "corpus"
PAT = regex.compile(PATTERN)


# ---- helpers ---------------------------------------------------------------------------------

def texts(corpus, batch_bytes=32 << 20) -> list[str]:
    return [t for b in corpus.batches(batch_bytes) for t in b.texts.to_pylist()]


def write_parquet(path: Path, **cols) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table(cols), path)
    return path


def write_jsonl(path: Path, rows: list, raw: bool = False) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = rows if raw else [json.dumps(r, ensure_ascii=False) for r in rows]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def invalid_utf8_strings(values: list[bytes | None]) -> pa.Array:
    """A ``large_string`` array holding invalid UTF-8, as a careless writer can produce."""
    b = pa.array(values, pa.large_binary())
    return pa.Array.from_buffers(pa.large_string(), len(b), b.buffers(), b.null_count)


def one_line_error(excinfo, *needles: str) -> str:
    msg = str(excinfo.value)
    assert "\n" not in msg
    for n in needles:
        assert n in msg, (n, msg)
    return msg


# ---- fixtures (the committed data_fixtures/) -------------------------------------------------

def test_fixtures_read_in_sorted_order_with_stats():
    corpus = read_corpus([str(FIXTURES)])
    names = [os.path.basename(f.path) for f in corpus.files]
    assert names == ["extra.jsonl", "notes.txt", "sample.parquet"]
    assert [f.kind for f in corpus.files] == ["jsonl", "txt", "parquet"]
    batches = list(corpus.batches())
    assert [b.path for b in batches] == [f.path for f in corpus.files]
    assert all(isinstance(b.texts, (pa.Array, pa.ChunkedArray)) and b.texts.type == pa.large_string() for b in batches)

    sample = pl.read_parquet(FIXTURES / "sample.parquet")
    extra = [json.loads(line)["text"] for line in open(FIXTURES / "extra.jsonl", encoding="utf-8")]
    notes = (FIXTURES / "notes.txt").read_text(encoding="utf-8")
    assert batches[0].texts.to_pylist() == extra
    assert batches[1].texts.to_pylist() == [notes]
    assert batches[2].texts.to_pylist() == sample["text"].to_list()
    for f, docs in zip(corpus.files, (extra, [notes], sample["text"].to_list())):
        assert corpus.stats[f.path] == {
            "docs": len(docs), "bytes": sum(len(t.encode()) for t in docs), "skipped": 0}


def test_fixture_composition():
    df = pl.read_parquet(FIXTURES / "sample.parquet")
    assert df.columns == ["text", "source", "lang"]
    share = df.group_by("source").agg(pl.col("text").str.len_bytes().sum()).to_dict(as_series=False)
    total = sum(share["text"])
    by = dict(zip(share["source"], share["text"]))
    assert 450_000 < total < 800_000
    assert abs(by["en"] / total - 0.4) < 0.05 and abs(by["code"] / total - 0.3) < 0.05
    assert 200 <= len(df) <= 1000 and df["text"].str.len_bytes().max() <= 8192
    joined = "".join(df["text"].to_list())
    scripts = ["Latin", "Cyrillic", "Greek", "Arabic", "Hebrew", "Devanagari", "Thai", "Han",
               "Hangul", "Hiragana", "Georgian", "Tamil", "Ethiopic", "Tibetan", "Khmer"]
    assert [s for s in scripts if not regex.search(rf"\p{{Script={s}}}", joined)] == []
    extra = (FIXTURES / "extra.jsonl").read_text(encoding="utf-8")
    docs = [json.loads(line)["text"] for line in extra.splitlines()]
    assert any("\r\n" in d for d in docs) and any("\t" in d for d in docs)


# ---- resolving sources -----------------------------------------------------------------------

@pytest.fixture
def tree(tmp_path: Path) -> Path:
    write_parquet(tmp_path / "data/b/deep/z.parquet", text=["z"])
    write_parquet(tmp_path / "data/a.parquet", text=["a"])
    write_jsonl(tmp_path / "data/b/m.jsonl", [{"text": "m"}])
    (tmp_path / "data/b/n.txt").write_text("n")
    (tmp_path / "data/b/skip.csv").write_text("x,y\n")
    (tmp_path / "data/.hidden").mkdir()
    (tmp_path / "data/.hidden/h.txt").write_text("hidden")
    return tmp_path


def test_glob_double_star_is_expanded_by_toktok(tree, monkeypatch):
    monkeypatch.chdir(tree)
    files = resolve_sources(["data/**/*.parquet"])  # as if quoted: no shell expansion
    assert [f.path for f in files] == ["data/a.parquet", "data/b/deep/z.parquet"]
    assert all(f.kind == "parquet" and f.size == os.path.getsize(f.path) for f in files)


def test_directory_is_recursive_sorted_and_ignores_other_files(tree):
    files = resolve_sources([str(tree / "data")])
    rel = [os.path.relpath(f.path, tree) for f in files]
    assert rel == ["data/a.parquet", "data/b/deep/z.parquet", "data/b/m.jsonl", "data/b/n.txt"]


def test_sources_are_deduplicated_and_sorted(tree):
    d = tree / "data"
    files = resolve_sources([str(d / "b/n.txt"), str(d), str(d / "**/*.jsonl"),
                             str(d / "b/../a.parquet")])
    paths = [f.path for f in files]
    assert paths == sorted(paths) and len(paths) == len(set(paths)) == 4
    corpus = read_corpus([str(d / "b"), str(d / "a.parquet")])
    assert [b.path for b in corpus.batches()] == sorted(f.path for f in corpus.files)
    assert texts(corpus) == ["a", "z", "m", "n"]


def test_missing_path_unsupported_file_empty_dir_and_empty_glob(tmp_path):
    with pytest.raises(InputError) as e:
        read_corpus([str(tmp_path / "nope.parquet")])
    one_line_error(e, "nope.parquet", "no such file")
    (tmp_path / "t.csv").write_text("a\n")
    with pytest.raises(InputError) as e:
        read_corpus([str(tmp_path / "t.csv")])
    one_line_error(e, "t.csv", "unsupported")
    with pytest.raises(InputError) as e:
        read_corpus([str(tmp_path)])  # only a .csv inside
    one_line_error(e, str(tmp_path), "no .parquet")
    with pytest.raises(InputError) as e:
        read_corpus([str(tmp_path / "**/*.jsonl")])
    one_line_error(e, "**/*.jsonl", "matches no")
    with pytest.raises(ConfigError):
        read_corpus([])


# ---- symlinks, loops, FIFOs and what is skipped (issue 13 items 7, 8, 10) ---------------------

def _resolve_in_subprocess(cwd: Path, sources: list[str], timeout: float = 60) -> dict:
    """resolve_sources + reading every file in a child process, so that a hang (a glob that
    never ends, an open() blocked on a FIFO) fails the test instead of stalling the suite."""
    import subprocess
    import sys

    code = (
        "import json, sys\n"
        "from toktok.count.read import read_corpus\n"
        "c = read_corpus(json.loads(sys.argv[1]))\n"
        "texts = [t for b in c.batches() for t in b.texts.to_pylist()]\n"
        "print(json.dumps({'files': [f.path for f in c.files], 'texts': texts, 'warnings': c.warnings}))\n"
    )
    r = subprocess.run([sys.executable, "-c", code, json.dumps(sources)], cwd=cwd, capture_output=True,
                       text=True, timeout=timeout)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


@pytest.fixture
def loops(tmp_path: Path) -> Path:
    """d/ with a.txt, sub/b.txt, sub/deeper/c.jsonl; two links to "." and one to the parent
    (sub/up -> ..) and a two-folder cycle (x/y -> ../z, z/x -> ../x)."""
    d = tmp_path / "d"
    (d / "sub" / "deeper").mkdir(parents=True)
    (d / "a.txt").write_text("alpha")
    (d / "sub" / "b.txt").write_text("beta")
    write_jsonl(d / "sub" / "deeper" / "c.jsonl", [{"text": "gamma"}])
    (d / "l1").symlink_to(".")
    (d / "l2").symlink_to(".")
    (d / "sub" / "up").symlink_to("..")
    (d / "x").mkdir()
    (d / "z").mkdir()
    (d / "x" / "y").symlink_to("../z")
    (d / "z" / "x").symlink_to("../x")
    (d / "z" / "zeta.txt").write_text("zeta")
    return tmp_path


@pytest.mark.parametrize("source", ["d/**/*.txt", "d/**", "d", "d/", "**/*.txt", "d/*", "d/**/deeper/*"])
def test_symlink_loops_end_and_each_real_file_is_read_once(loops, source):
    """Two links to "." under a ** glob were 2^40 paths; now each real folder is listed once."""
    got = _resolve_in_subprocess(loops, [source], timeout=60)
    real = {os.path.realpath(loops / p) for p in got["files"]}
    assert len(real) == len(got["files"])  # each real file once
    want = {"alpha", "beta", "zeta"} | ({"gamma"} if not source.endswith(".txt") else set())
    if source == "d/**/deeper/*":
        want = {"gamma"}
    assert sorted(got["texts"]) == sorted(want)
    # paths are shown under the real folders' names where a real path exists
    assert all("/l1/" not in p and "/l2/" not in p and "/up/" not in p for p in got["files"]), got["files"]
    if source != "d/**/deeper/*":
        loop_lines = [w for w in got["warnings"] if "symlinked folder" in w]
        assert len(loop_lines) == 1 and loop_lines[0].startswith(f"{source}: ")
        assert "d/l1 -> ." in loop_lines[0] and "not read again" in loop_lines[0]


def test_folder_and_glob_follow_the_same_symlinks(tmp_path):
    """The same data gives the same corpus as a folder or as a ** glob: symlinked folders (and
    files) are followed by both, a folder linked twice is read once."""
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "far.txt").write_text("far away")
    d = tmp_path / "data"
    (d / "real").mkdir(parents=True)
    (d / "real" / "r.txt").write_text("real")
    (d / "latest").symlink_to("real")  # a second name for real/
    (d / "ext").symlink_to(tmp_path / "outside")  # data kept elsewhere
    (d / "one.txt").symlink_to(tmp_path / "outside" / "far.txt")  # a file link to the same file
    results = [_resolve_in_subprocess(tmp_path, [src]) for src in ("data", "data/**/*.txt", "data/**")]
    for got in results:
        assert sorted(got["texts"]) == ["far away", "real"]
    assert results[0]["files"] == ["data/ext/far.txt", "data/real/r.txt"]  # one path per file: the first by name
    assert results[0]["files"] == results[1]["files"] == results[2]["files"]
    for src, got in zip(("data", "data/**/*.txt", "data/**"), results):
        assert got["warnings"] == [f"{src}: 1 symlinked folder leads to a folder read already (a loop, or a "
                                   "second link), not read again: data/latest -> real"]


def test_fifo_in_a_folder_or_matched_by_a_glob_is_skipped_never_opened(tmp_path):
    d = tmp_path / "d"
    (d / "sub").mkdir(parents=True)
    (d / "ok.txt").write_text("fine")
    os.mkfifo(d / "pipe.txt")
    os.mkfifo(d / "sub" / "data.jsonl")
    (d / "link.txt").symlink_to("pipe.txt")  # a link to a FIFO is no regular file either
    for src in ("d", "d/*.txt", "d/**", "d/**/*.jsonl"):
        if src == "d/**/*.jsonl":
            with pytest.raises(AssertionError, match="matches no"):
                _resolve_in_subprocess(tmp_path, [src])
            continue
        got = _resolve_in_subprocess(tmp_path, [src])
        assert got["texts"] == ["fine"]
        (w,) = got["warnings"]
        assert w.startswith(f"{src}: skipped ") and "FIFO" in w and "(not regular files: " in w
        # link.txt and pipe.txt are one FIFO, named once
        assert ("d/pipe.txt" in w) != ("d/link.txt" in w) and "only regular files are read" in w
        listed = w.split("(not regular files: ")[1]
        assert listed.count("d/") == (2 if src != "d/*.txt" else 1) and "toktok reads" not in w
    # given directly: one line, without opening it
    for p in (d / "pipe.txt", d / "link.txt"):
        with pytest.raises(InputError) as e:
            resolve_sources([str(p)])
        one_line_error(e, str(p), "not a regular file")
    from toktok.count.read import open_regular

    with pytest.raises(InputError) as e:
        open_regular(str(d / "pipe.txt"))  # would block for ever in open() without O_NONBLOCK
    one_line_error(e, "pipe.txt", "not a regular file")


def test_dangling_links_and_other_files_are_reported(tmp_path):
    import gzip

    d = tmp_path / "d"
    (d / "more").mkdir(parents=True)
    (d / "ok.jsonl").write_text('{"text": "fine"}\n')
    (d / "gone.txt").symlink_to("missing.txt")
    (d / "more" / "self.txt").symlink_to("self.txt")  # a link loop on itself: told apart (test_bad_input_6.py)
    for name in ("a.jsonl.gz", "b.jsonl.gz", "more/c.jsonl.gz"):
        (d / name).write_bytes(gzip.compress(b'{"text": "zipped"}\n'))
    (d / "README.md").write_text("# notes")
    (d / "Makefile").write_text("all:")
    (d / ".hidden.md").write_text("hidden files are skipped without a word")
    skipped: list[str] = []
    files = resolve_sources([str(d)], skipped=skipped)
    assert [os.path.basename(f.path) for f in files] == ["ok.jsonl"]
    (w,) = skipped
    assert w.startswith(f"{d}: skipped 5 files of other types (3 .jsonl.gz, 1 .md, 1 without suffix: ")
    assert "1 dangling symlink (the target is missing: " in w and f"{d}/gone.txt" in w
    assert "1 symlink loop (following them never reaches a file: " in w and f"{d}/more/self.txt" in w
    assert "decompress .gz files, or recompress them with zstd" in w and "fix or remove the dangling and looping links" in w
    assert ".hidden" not in w and "\n" not in w
    # the same through a glob
    skipped = []
    assert [f.path for f in resolve_sources([str(d / "**")], skipped=skipped)] == [f.path for f in files]
    assert skipped[0].startswith(f"{d}/**: skipped 5 files of other types")
    # given directly: one line each
    with pytest.raises(InputError) as e:
        resolve_sources([str(d / "a.jsonl.gz")])
    one_line_error(e, "a.jsonl.gz", "gzip-compressed files are not read", "recompress it with zstd")
    with pytest.raises(InputError) as e:
        resolve_sources([str(d / "gone.txt")])
    one_line_error(e, "gone.txt", "dangling symlink", "missing.txt", "fix the link")
    # a folder of only such files: the error says what it has
    with pytest.raises(InputError) as e:
        resolve_sources([str(d / "more")])
    one_line_error(e, "more", "no .parquet", "1 .jsonl.gz", "1 symlink loop", "point at the data files")


def test_hidden_folders_and_links_are_skipped_by_folders_and_globs(tmp_path):
    d = tmp_path / "d"
    (d / ".git").mkdir(parents=True)
    (d / ".git" / "x.txt").write_text("hidden")
    (d / ".mirror").symlink_to(".git")
    (d / "v.txt").write_text("visible")
    for src in (str(d), str(d / "**" / "*.txt"), str(d / "*")):
        skipped: list[str] = []
        assert [f.path for f in resolve_sources([src], skipped=skipped)] == [str(d / "v.txt")]
        assert skipped == []
    # asked for by name, a hidden folder is read
    assert [f.path for f in resolve_sources([str(d / ".git")])] == [str(d / ".git" / "x.txt")]
    assert [f.path for f in resolve_sources([str(d / ".*" / "*.txt")])] == [str(d / ".git" / "x.txt")]


def test_parquet_text_column_given_twice(tmp_path):
    p = tmp_path / "dup.parquet"
    pq.write_table(pa.Table.from_arrays([pa.array(["a"]), pa.array(["b"]), pa.array([1])],
                                        names=["text", "text", "id"]), p)
    with pytest.raises(InputError) as e:
        read_corpus([str(p)])
    one_line_error(e, str(p), "2 columns are named 'text'", "rename the others")
    # another column given twice does not matter when the text column is unique
    q = tmp_path / "other.parquet"
    pq.write_table(pa.Table.from_arrays([pa.array(["a", "b"]), pa.array([1, 2]), pa.array([3, 4])],
                                        names=["text", "id", "id"]), q)
    assert texts(read_corpus([str(q)])) == ["a", "b"]
    with pytest.raises(InputError) as e:
        read_corpus([str(q)], text_column="id")
    one_line_error(e, "2 columns are named 'id'")


def test_options_are_validated(tmp_path):
    p = write_jsonl(tmp_path / "a.jsonl", [{"text": "x"}])
    with pytest.raises(ConfigError, match="bad_utf8"):
        read_corpus([str(p)], bad_utf8="ignore")
    with pytest.raises(ConfigError, match="batch_bytes"):
        next(read_corpus([str(p)]).batches(0))


# ---- Parquet ---------------------------------------------------------------------------------

def test_parquet_text_column_option_and_missing_column(tmp_path):
    p = write_parquet(tmp_path / "a.parquet", id=[1, 2], body=["one", "two"])
    assert texts(read_corpus([str(p)], text_column="body")) == ["one", "two"]
    with pytest.raises(InputError) as e:
        read_corpus([str(p)])  # fails at open, before any batch
    one_line_error(e, str(p), "no column 'text'", "columns: id, body", "--text-column")


def test_parquet_non_string_column_names_dtype(tmp_path):
    p = write_parquet(tmp_path / "a.parquet", text=[1, 2])
    with pytest.raises(InputError) as e:
        read_corpus([str(p)])
    one_line_error(e, str(p), "int64")


def test_parquet_binary_and_dictionary_columns(tmp_path):
    p = write_parquet(tmp_path / "bin.parquet", text=pa.array([b"caf\xc3\xa9", None, b"x"]))
    assert texts(read_corpus([str(p)])) == ["café", "x"]
    bad = write_parquet(tmp_path / "bad.parquet", text=pa.array([b"ok", b"ab\xffc"]))
    with pytest.raises(InputError) as e:
        texts(read_corpus([str(bad)]))
    one_line_error(e, str(bad), "row 1", "byte 2", "--bad-utf8")
    assert texts(read_corpus([str(bad)], bad_utf8="replace")) == ["ok", "ab\ufffdc"]
    d = write_parquet(tmp_path / "dict.parquet", text=pa.array(["u", "v", "u"]).dictionary_encode())
    assert texts(read_corpus([str(d)])) == ["u", "v", "u"]


def test_parquet_invalid_utf8_in_string_column(tmp_path):
    # Parquet readers don't validate UTF-8 (and Polars would panic on it), so read.py must.
    p = write_parquet(tmp_path / "a.parquet",
                      text=invalid_utf8_strings([b"fine", None, b"xy\xc3(", b"ok"]))
    with pytest.raises(InputError) as e:
        texts(read_corpus([str(p)]))
    one_line_error(e, str(p), "row 2", "byte 2")
    assert texts(read_corpus([str(p)], bad_utf8="replace")) == ["fine", "xy\ufffd(", "ok"]
    corpus = read_corpus([str(p)], bad_utf8="skip")
    assert texts(corpus) == ["fine", "ok"]
    assert corpus.stats[str(p)] == {"docs": 2, "bytes": 6, "skipped": 1}


def test_parquet_corrupt_and_truncated(tmp_path):
    good = write_parquet(tmp_path / "good.parquet", text=["hello world"] * 100)
    trunc = tmp_path / "trunc.parquet"
    trunc.write_bytes(good.read_bytes()[: good.stat().st_size // 2])
    junk = tmp_path / "junk.parquet"
    junk.write_bytes(b"not parquet at all" * 10)
    for p in (trunc, junk):
        with pytest.raises(InputError) as e:
            read_corpus([str(p)])
        one_line_error(e, str(p), "corrupt or truncated")


def test_parquet_batches_are_bounded_ordered_and_skip_nulls(tmp_path):
    values = [None if i % 7 == 3 else f"doc {i} " + "x" * (i % 50) for i in range(500)]
    p = tmp_path / "a.parquet"
    pq.write_table(pa.table({"text": values}), p, row_group_size=64)
    corpus = read_corpus([str(p)])
    batches = list(corpus.batches(batch_bytes=300))
    kept = [v for v in values if v is not None]
    assert [t for b in batches for t in b.texts.to_pylist()] == kept
    assert len(batches) > 10
    for b in batches:
        size = sum(len(t.encode()) for t in b.texts.to_pylist())
        assert size <= 300 or len(b.texts) == 1
        assert b.texts[0].as_py() == values[b.first_row]  # first_row is the file row of texts[0]
    assert corpus.stats[str(p)]["docs"] == len(kept)
    # The default batch size gives one batch although the file has 8 row groups.
    assert len(list(corpus.batches())) == 1


def test_parquet_document_bigger_than_batch_is_its_own_batch(tmp_path):
    p = write_parquet(tmp_path / "a.parquet", text=["a", "b" * 1000, "c"])
    batches = list(read_corpus([str(p)]).batches(batch_bytes=10))
    assert [b.texts.to_pylist() for b in batches] == [["a"], ["b" * 1000], ["c"]]
    assert [b.first_row for b in batches] == [0, 1, 2]


def test_a_phases_next_file_is_read_ahead_with_the_same_counts_and_errors(tmp_path, monkeypatch):
    """A full read takes each next file's first batch in a thread while the file before it is
    counted (its footer and dictionary page must not stop counting): the counts and statistics
    are those of the files counted one by one, and a bad file's error is raised where the file
    is reached, after the files before it were counted."""
    import threading

    from toktok.count.local import Source, count_phase
    from toktok.count.read import Corpus

    paths = [str(write_parquet(tmp_path / f"{k}.parquet", text=[f"file {k} doc {i} " + "y" * (i % 9) for i in range(300)]))
             for k in "abc"]
    first_read_by = {}
    batches = Corpus.batches

    def watched(self, *a, **kw):
        for n, b in enumerate(batches(self, *a, **kw)):
            if n == 0:
                first_read_by[b.path] = threading.current_thread().name
            yield b

    monkeypatch.setattr(Corpus, "batches", watched)
    whole = count_phase([Source(read_corpus(paths))], batch_bytes=1 << 10)
    assert first_read_by[paths[1]] == first_read_by[paths[2]] == "toktok-read-ahead" != first_read_by[paths[0]]
    alone = [count_phase([Source(read_corpus([p]))], batch_bytes=1 << 10) for p in paths]
    expected: Counter = Counter()
    for pc in alone:
        expected.update(dict(zip(pc.words.column("word").to_pylist(), pc.words.column("count").to_pylist())))
    assert dict(zip(whole.words.column("word").to_pylist(), whole.words.column("count").to_pylist())) == expected
    assert whole.used == {k: v for pc in alone for k, v in pc.used.items()}
    bad = tmp_path / "b2.parquet"
    pq.write_table(pa.table({"text": invalid_utf8_strings([b"fine", b"bad \xff"])}), bad)
    seen = []
    with pytest.raises(InputError) as e:
        count_phase([Source(read_corpus([paths[0], str(bad), paths[2]]))], batch_bytes=1 << 10,
                    report=lambda stage, done, total: seen.append(done))
    one_line_error(e, f"{bad}: row 1: invalid UTF-8")
    assert len(seen) >= len(list(read_corpus([paths[0]]).batches(1 << 10)))  # file a's batches were counted


def test_a_run_reads_its_first_file_before_it_opens_the_run_file(tmp_path, monkeypatch):
    """The pipeline starts reading the first phase's first file after its checks, while it opens
    the run file (count.start); the run counts what it would have counted without that; a run
    whose budget holds every document (counted as read) starts it too, and one that samples
    starts nothing."""
    import toktok.count.stage
    import toktok.resume
    from toktok.config import TrainConfig
    from toktok.pipeline import train

    src = [str(FIXTURES / "sample.parquet"), str(FIXTURES / "notes.txt")]
    seen = []
    opening, starting = toktok.resume.open_run, toktok.count.stage.start
    monkeypatch.setattr(toktok.count.stage, "start",
                        lambda *a, **k: (got := starting(*a, **k), seen.append(got and got.path))[0])
    monkeypatch.setattr(toktok.resume, "open_run", lambda *a, **k: (seen.append("open"), opening(*a, **k))[1])
    train(TrainConfig(sources=src, out=str(tmp_path / "a"), merges=300, verbose=False))
    train(TrainConfig(sources=src, out=str(tmp_path / "b"), merges=300, budget="4GB", verbose=False))
    train(TrainConfig(sources=src, out=str(tmp_path / "s"), merges=300, budget="4GB", working_set_mb=1,
                      verbose=False))
    assert seen == [src[0], "open", src[0], "open", None, "open"]
    monkeypatch.setattr(toktok.count.stage, "start", lambda *a, **k: None)
    train(TrainConfig(sources=src, out=str(tmp_path / "c"), merges=300, verbose=False))
    train(TrainConfig(sources=src, out=str(tmp_path / "d"), merges=300, budget="4GB", verbose=False))
    for f in ("tokenizer.json", "tokenizer.tiktoken"):
        assert (tmp_path / "a" / f).read_bytes() == (tmp_path / "c" / f).read_bytes()
        assert (tmp_path / "b" / f).read_bytes() == (tmp_path / "d" / f).read_bytes()


# ---- JSONL and .jsonl.zst --------------------------------------------------------------------

def test_jsonl_text_field_blank_lines_nulls_and_first_row(tmp_path):
    p = write_jsonl(tmp_path / "a.jsonl", ['{"content": "a\\nb", "id": 1}', "", "   ",
                                           '{"content": null}', '{"content": "c"}'], raw=True)
    corpus = read_corpus([str(p)], text_column="content")
    batches = list(corpus.batches())
    assert batches[0].texts.to_pylist() == ["a\nb", "c"] and batches[0].first_row == 0
    later = list(corpus.batches(batch_bytes=1))
    assert [(b.first_row, b.texts.to_pylist()) for b in later] == [(0, ["a\nb"]), (4, ["c"])]


@pytest.mark.parametrize("line, needle", [
    ('{"text": "ok"', "invalid JSON"),
    ('{"body": "x"}', "no field 'text' (fields: body)"),
    ('{"text": 5}', "field 'text' is int"),
    ('["text"]', "expected a JSON object"),
])
def test_jsonl_bad_line_names_file_and_line(tmp_path, line, needle):
    p = write_jsonl(tmp_path / "a.jsonl", ['{"text": "fine"}', "", line], raw=True)
    with pytest.raises(InputError) as e:
        texts(read_corpus([str(p)]))
    one_line_error(e, f"{p}:3:", needle)


def test_jsonl_invalid_utf8_policies(tmp_path):
    p = tmp_path / "a.jsonl"
    body = b'{"text": "one"}\n{"text": "t\xe9o"}\n{"text": "three"}\n'
    p.write_bytes(body)
    with pytest.raises(InputError) as e:
        texts(read_corpus([str(p)]))
    at = body.index(b"\xe9")
    one_line_error(e, f"{p}:2:", f"byte {at}", "--bad-utf8")
    assert texts(read_corpus([str(p)], bad_utf8="replace")) == ["one", "t\ufffdo", "three"]
    corpus = read_corpus([str(p)], bad_utf8="skip")
    assert texts(corpus) == ["one", "three"]
    assert corpus.stats[str(p)] == {"docs": 2, "bytes": 8, "skipped": 1}


def test_jsonl_lone_surrogate_escape(tmp_path):
    p = write_jsonl(tmp_path / "a.jsonl",
                    ['{"text": "ok \\ud83d\\ude00"}', '{"text": "x\\ud800y"}'], raw=True)
    with pytest.raises(InputError) as e:
        texts(read_corpus([str(p)]))
    one_line_error(e, f"{p}:2:", "surrogate")
    assert texts(read_corpus([str(p)], bad_utf8="replace")) == ["ok \U0001F600", "x\ufffdy"]


def test_jsonl_bom_and_crlf(tmp_path):
    p = tmp_path / "a.jsonl"
    p.write_bytes(b'\xef\xbb\xbf{"text": "a\\r\\nb"}\r\n{"text": "c\\td"}\r\n')
    assert texts(read_corpus([str(p)])) == ["a\r\nb", "c\td"]


def test_jsonl_zst_multi_frame_and_errors(tmp_path):
    rows = [{"text": f"doc {i} é"} for i in range(300)]
    raw = ("\n".join(json.dumps(r) for r in rows) + "\n").encode()
    c = zstandard.ZstdCompressor()
    p = tmp_path / "a.jsonl.zst"
    p.write_bytes(c.compress(raw[:1000]) + c.compress(raw[1000:]))  # two frames
    corpus = read_corpus([str(p)])
    assert corpus.files[0].kind == "jsonl.zst"
    assert texts(corpus) == [r["text"] for r in rows]
    trunc = tmp_path / "t.jsonl.zst"
    trunc.write_bytes(c.compress(raw)[:-5])
    with pytest.raises(InputError) as e:
        texts(read_corpus([str(trunc)]))
    one_line_error(e, str(trunc), "truncated")
    junk = tmp_path / "j.jsonl.zst"
    junk.write_bytes(b"\x00garbage" * 20)
    with pytest.raises(InputError) as e:
        texts(read_corpus([str(junk)]))
    one_line_error(e, str(junk), "zstd")
    bad = tmp_path / "b.jsonl.zst"
    bad.write_bytes(c.compress(b'{"text": "a"}\n{"text": "b"\n'))
    with pytest.raises(InputError) as e:
        texts(read_corpus([str(bad)]))
    one_line_error(e, f"{bad}:2:", "invalid JSON")


# ---- txt ---------------------------------------------------------------------------------------

def test_txt_is_one_document_with_newlines_kept(tmp_path):
    p = tmp_path / "a.txt"
    text = "line one\r\nline two\n\tthree\n\n"
    p.write_bytes(b"\xef\xbb\xbf" + text.encode())  # the BOM is dropped
    corpus = read_corpus([str(p)])
    batches = list(corpus.batches())
    assert len(batches) == 1 and batches[0].texts.to_pylist() == [text]
    assert corpus.stats[str(p)] == {"docs": 1, "bytes": 27, "skipped": 0}
    chunks = texts(corpus, batch_bytes=2)  # the chunked path drops the BOM too
    assert chunks == ["line one\r\n", "line two\n\tthree\n\n"]
    assert corpus.stats[str(p)] == {"docs": 1, "bytes": 27, "skipped": 0}
    # an empty file (or one of only a BOM) is no document, as an empty .jsonl has none
    for name, data in (("empty.txt", b""), ("bom.txt", b"\xef\xbb\xbf")):
        empty = tmp_path / name
        empty.write_bytes(data)
        for bb in (1, 2, 1 << 20):
            corpus = read_corpus([str(empty)])
            assert texts(corpus, batch_bytes=bb) == []
            assert corpus.stats[str(empty)] == {"docs": 0, "bytes": 0, "skipped": 0}


def test_txt_invalid_utf8_policies(tmp_path):
    p = tmp_path / "a.txt"
    p.write_bytes(b"abc\ndef\xff\n")
    with pytest.raises(InputError) as e:
        texts(read_corpus([str(p)]))
    one_line_error(e, str(p), "byte 7")
    corpus = read_corpus([str(p)], bad_utf8="replace")
    assert texts(corpus) == ["abc\ndef\ufffd\n"]
    assert corpus.stats[str(p)]["bytes"] == len("abc\ndef\ufffd\n".encode())  # text, not file
    corpus = read_corpus([str(p)], bad_utf8="skip")
    assert texts(corpus) == [] and corpus.stats[str(p)]["skipped"] == 1


def test_txt_chunked_invalid_utf8_reports_file_offset(tmp_path):
    p = tmp_path / "a.txt"
    data = ("word\n" * 50).encode() + b"\x80" + b"tail\n"
    p.write_bytes(data)
    with pytest.raises(InputError) as e:
        texts(read_corpus([str(p)]), batch_bytes=16)
    one_line_error(e, str(p), "byte 250")
    corpus = read_corpus([str(p)], bad_utf8="skip")
    assert texts(corpus, batch_bytes=16) == []  # nothing yielded before the bad byte
    assert corpus.stats[str(p)] == {"docs": 0, "bytes": 0, "skipped": 1}
    assert "".join(texts(read_corpus([str(p)], bad_utf8="replace"), 16)) == \
        data.decode("utf-8", "replace")


def test_split_point_examples():
    assert _split_point("a\n b\nc") == 5
    assert _split_point("a\nb\n") == 2  # the final "\n" has no known successor yet
    assert _split_point("a\n\n") == 0
    assert _split_point("x\n \n\t\n\u3000y") == 0  # only whitespace follows each "\n"
    assert _split_point("x\n\x1cy") == 0  # str.isspace() whitespace: kept conservative
    assert _split_point("no newline") == 0
    assert _split_point("a\nb\nc", 3) == 4 and _split_point("a\nb\nc", 4) == 0  # start=
    # bytes: the same rule on UTF-8, never trusting a character cut by the buffer's end
    assert _split_point(b"a\n b\nc") == 5
    assert _split_point("a\n\u3000b\n\u3001".encode()) == len("a\n\u3000b\n".encode())
    assert _split_point(b"a\n\xe3\x80") == 0  # could still become U+3000
    assert _split_point(b"a\n\xff") == 0  # invalid: not known to be non-whitespace


def test_split_point_bytes_knows_every_whitespace_character():
    # The bytes pattern lists the non-ASCII whitespace by hand; check it against the regex
    # module (and str.isspace) over all of Unicode.
    everything = "".join(chr(c) for c in range(0x110000) if not 0xD800 <= c < 0xE000)
    ws = set(regex.findall(r"\s", everything)) | {ch for ch in everything if ch.isspace()}
    assert len(ws) > 20
    for ch in ws:
        assert _split_point(("x\n" + ch).encode()) == 0, hex(ord(ch))
    for c in (0x84, 0x86, 0xA1, 0x1681, 0x200B, 0x2027, 0x202A, 0x2030, 0x205E, 0x3001, 0x1F600):
        assert _split_point(("x\n" + chr(c)).encode()) == 2, hex(c)


# Whitespace of every kind, and characters sharing UTF-8 prefixes with the non-ASCII ones.
SPLIT_ALPHABET = ["a", "Z", "é", "中", "7", "42", " ", "  ", "\t", "\n", "\r\n", "\r", "'s", "!",
                  "...", "\u3000", "\u3001", "\u00a0", "\u00a1", "\x85", "\x0b", "\x0c",
                  "\x1c", "\x1f", "\u1680", "\u1681", "\u2003", "\u200b", "\u2028", "\u2029",
                  "\u202f", "\u205f", "\U0001F600", "//"]


@settings(max_examples=400 * FUZZ, deadline=None)
@given(st.lists(st.sampled_from(SPLIT_ALPHABET), max_size=40).map("".join))
def test_split_point_is_a_pretokenizer_boundary(text):
    i = _split_point(text)
    if i:
        assert text[i - 1] == "\n"
        assert PAT.findall(text[:i]) + PAT.findall(text[i:]) == PAT.findall(text)
    # and it is the last candidate
    later = [j for j in range(i + 1, len(text)) if text[j - 1] == "\n"
             and not regex.match(r"[\s\x1c-\x1f]", text[j])]
    assert later == []
    # the bytes version finds the same point
    assert _split_point(text.encode()) == len(text[:i].encode())


@pytest.mark.parametrize("batch_bytes", [7, 64, 1000])
def test_txt_chunks_keep_pretokenizer_words(tmp_path, batch_bytes):
    notes = (FIXTURES / "notes.txt").read_text(encoding="utf-8")
    tricky = ("  indented\n\n   \n\tx = 1\r\n中文字符\n\u3000全角\n"
              "émigré's\n...\n  \n" * 20)
    text = (tricky + notes[:20_000]) if batch_bytes < 64 else notes + tricky
    p = tmp_path / "a.txt"
    p.write_text(text, encoding="utf-8", newline="")
    corpus = read_corpus([str(p)])
    batches = list(corpus.batches(batch_bytes))
    chunks = [t for b in batches for t in b.texts.to_pylist()]
    assert len(chunks) > 5 and "".join(chunks) == text
    assert all(b.first_row == 0 and len(b.texts) == 1 for b in batches)
    words = Counter(w for c in chunks for w in PAT.findall(c))
    assert words == Counter(PAT.findall(text))
    assert corpus.stats[str(p)] == {"docs": 1, "bytes": len(text.encode()), "skipped": 0}


def test_txt_without_split_point_is_not_cut(tmp_path):
    p = tmp_path / "a.txt"
    text = "x" * 500 + "\n" + " y" * 200  # the only "\n" is followed by a space
    p.write_text(text)
    assert [b.texts.to_pylist() for b in read_corpus([str(p)]).batches(32)] == [[text]]


def test_dataclasses():
    assert SourceFile("a.txt", "txt", 3).size == 3
    b = Batch("a.txt", 0, pa.array(["x"], pa.large_string()))
    assert b.texts.to_pylist() == ["x"]
