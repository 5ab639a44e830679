"""A hostile new user's pass over the commands of issues 49-51 (``toktok cut``, ``toktok count``,
``train --word-counts``, ``--superbpe``, ``toktok report``): each case is bad input that once gave a
traceback, replaced a file it was not asked to, or was taken in silently. Every one now gets one
line naming the file (and row) and what to do, exit code 2, and leaves what exists as it was."""
from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import FIXTURES, ROOT, one_error_line, cli as _cli, cli_ok as _ok

import toktok
from toktok.count.tables import META_KEY, read_counts
from toktok.errors import ConfigError, InputError
from toktok.patterns import DEFAULT

NOTES = FIXTURES / "notes.txt"
FILES = ("tokenizer.json", "tokenizer.tiktoken", "tokenizer_config.json", "special_tokens_map.json")


def _bytes(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    """A finished run with a ladder: 1,500 and 1,800 beside the largest, 2,000."""
    out = tmp_path_factory.mktemp("run") / "tok"
    _ok("train", NOTES, FIXTURES / "extra.jsonl", "--out", out, "--ladder", "1500,1800,2000", "-q")
    return out


@pytest.fixture(scope="module")
def counts(tmp_path_factory) -> Path:
    """toktok's own word table of the fixtures' text."""
    out = tmp_path_factory.mktemp("counts") / "counts.parquet"
    _ok("count", NOTES, FIXTURES / "extra.jsonl", "--out", out)
    return out


# --- toktok cut ---------------------------------------------------------------------------------------


def test_cut_of_what_is_not_a_run_file_is_one_line(tmp_path):
    """A text file, a folder whose run.duckdb is a folder (a link loop), another program's DuckDB
    database: one line naming it (DuckDB's IOException / CatalogException escaped before)."""
    loop = tmp_path / "loop"
    loop.mkdir()
    (loop / "run.duckdb").symlink_to(loop)
    other = tmp_path / "other" / "run.duckdb"
    other.parent.mkdir()
    con = duckdb.connect(str(other))
    con.execute("create table t (a int)")
    con.close()
    for bad in (NOTES, loop, other.parent, other):
        one_error_line(_cli("cut", bad, "--vocab-size", "1500", "--out", tmp_path / "cut"), "run")
        assert not (tmp_path / "cut").exists() and not (tmp_path / ".cut.partial").exists()


@pytest.mark.parametrize("text, needle", [("not json", "not valid JSON"), ("[1]", "not a JSON object")])
def test_cut_of_a_run_whose_tokenizer_config_is_broken(run, tmp_path, text, needle):
    """The run's tokenizer_config.json (its chat template goes into the cut) edited into something
    else: JSONDecodeError / AttributeError before."""
    broken = tmp_path / "run"
    shutil.copytree(run, broken)
    (broken / "tokenizer_config.json").write_text(text)
    one_error_line(_cli("cut", broken, "--vocab-size", "1500", "--out", tmp_path / "c"), "tokenizer_config.json",
                   needle)
    assert not (tmp_path / "c").exists()


def test_cut_never_writes_inside_the_runs_folder(run):
    """``--out RUN/ladder/1500 --force`` replaced the run's own rung with another size's files."""
    before = _bytes(run)
    for out in (run / "ladder" / "1500", run / "ladder" / "1450", run / "cuts" / "x"):
        one_error_line(_cli("cut", run, "--vocab-size", "1450", "--out", out, "--force"), str(out), "run's own folder")
    assert _bytes(run) == before


def test_cut_never_replaces_the_current_folder(run, tmp_path, monkeypatch):
    """``cut RUN --out .`` in an empty folder (or one of tokenizer files, with --force) replaced the
    folder the user stood in: their shell was left in a deleted folder."""
    here = tmp_path / "here"
    here.mkdir()
    monkeypatch.chdir(here)
    inode = here.stat().st_ino
    for out in (".", str(here), str(tmp_path)):
        one_error_line(_cli("cut", run, "--vocab-size", "1500", "--out", out, "--force"), out, "current folder")
    assert here.stat().st_ino == inode and list(here.iterdir()) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["here"]


def test_cut_of_a_ladder_rung_names_its_run(run, tmp_path):
    """A rung (``RUN/ladder/1500``) has no run file: say which run to cut from."""
    one_error_line(_cli("cut", run / "ladder" / "1500", "--vocab-size", "1450", "--out", tmp_path / "c"),
                   "a rung of the run", f"toktok cut {run} --vocab-size 1450")
    assert not (tmp_path / "c").exists()


def test_cut_never_deletes_an_interrupted_runs_progress(run, tmp_path):
    """``train --out X`` interrupted keeps its progress in ``.X.partial`` for --resume: a cut into
    ``X`` removed it as if it were its own leftover staging folder."""
    _ok("train", NOTES, "--vocab-size", "1500", "--out", tmp_path / "x", "-q")
    staging = tmp_path / ".y.partial"
    shutil.copytree(tmp_path / "x", staging)  # (a run file there: what an interrupted run leaves)
    before = _bytes(staging)
    one_error_line(_cli("cut", run, "--vocab-size", "1500", "--out", tmp_path / "y"), str(tmp_path / "y"),
                   "keeps its progress")
    assert _bytes(staging) == before and not (tmp_path / "y").exists()
    leftover = tmp_path / ".z.partial"  # a cut's own leftover (killed while writing) is no run's
    leftover.mkdir()
    (leftover / "tokenizer.json").write_text("{")
    _ok("cut", run, "--vocab-size", "1500", "--out", tmp_path / "z")
    assert not leftover.exists()


def _read_only(folder: Path):
    """``folder`` made unwritable, even for root (``chattr +i`` where chmod does not hold); the undo."""
    folder.chmod(0o555)
    if os.access(folder, os.W_OK):
        if shutil.which("chattr") is None or subprocess.run(["chattr", "+i", str(folder)]).returncode != 0:
            folder.chmod(0o755)
            pytest.skip("cannot make a folder read-only here")
        return lambda: (subprocess.run(["chattr", "-i", str(folder)]), folder.chmod(0o755))
    return lambda: folder.chmod(0o755)


def test_cut_count_into_a_read_only_folder_name_the_out(run, tmp_path):
    """cut raised PermissionError making its staging folder; count named its hidden ``.NAME.run``."""
    ro = tmp_path / "ro"
    ro.mkdir()
    undo = _read_only(ro)
    try:
        one_error_line(_cli("cut", run, "--vocab-size", "1500", "--out", ro / "cut"), str(ro / "cut"), "writable")
        line = one_error_line(_cli("count", NOTES, "--out", ro / "c.parquet"), str(ro / "c.parquet"), "writable")
        assert ".run" not in line
    finally:
        undo()
    assert list(ro.iterdir()) == []


# --- toktok report ------------------------------------------------------------------------------------


def test_report_replaces_only_a_report_unless_forced(run, tmp_path):
    """``report -o notes.txt`` overwrote any file; now only an earlier report, or with --force."""
    mine = tmp_path / "notes.txt"
    mine.write_bytes(NOTES.read_bytes())
    one_error_line(_cli("report", run, "-o", mine), str(mine), "--force")
    assert mine.read_bytes() == NOTES.read_bytes()
    page = tmp_path / "r.html"
    _ok("report", run, "-o", page)
    _ok("report", run, "-o", page)  # an earlier report is replaced without asking
    _ok("report", run, "-o", mine, "--force")
    assert b"toktok report" in mine.read_bytes()[:2000]


def test_report_never_overwrites_a_file_of_a_runs_ladder(run):
    before = _bytes(run)
    target = run / "ladder" / "1500" / "tokenizer.json"
    one_error_line(_cli("report", run, "-o", target, "--force"), str(target), "a file of the run")
    assert _bytes(run) == before


def test_report_never_overwrites_the_tiktoken_beside_a_companion_run(tmp_path, monkeypatch):
    """``output: ./NAME.tiktoken`` puts the run in ``NAME.toktok`` and the .tiktoken beside it:
    ``report NAME.tiktoken -o NAME.tiktoken --force`` replaced the tokenizer with the page."""
    cfg = tmp_path / "c.yaml"
    cfg.write_text(f"output: ./mytok.tiktoken\nphases:\n  - vocab_size: 1500\n    sources: [{{path: '{NOTES}'}}]\n")
    work = tmp_path / "w"
    work.mkdir()
    monkeypatch.chdir(work)
    _ok("train", "--config", cfg, "-q")
    tt = work / "mytok.tiktoken"
    before = tt.read_bytes()
    for run in (tt, work / "mytok.toktok"):
        one_error_line(_cli("report", run, "-o", tt, "--force"), "mytok.tiktoken", "a file of the run")
    assert tt.read_bytes() == before


def test_report_through_a_link_loop_is_one_line(run, tmp_path):
    """``-o loop/r.html`` where ``loop`` links to itself: RuntimeError (Path.resolve) before."""
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    for cmd in (["report", run, "-o", loop / "r.html"], ["count", NOTES, "--out", loop / "c.parquet"]):
        one_error_line(_cli(*cmd), str(loop), "a link that leads to no folder")
    assert loop.is_symlink() and sorted(p.name for p in tmp_path.iterdir()) == ["loop"]


def _toktok(args: list, cwd: Path, fsize: int) -> subprocess.CompletedProcess:
    """The CLI in a process whose files may grow to ``fsize`` bytes (RLIMIT_FSIZE: a full disk)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "toktok.cli", *map(str, args)], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300,
                          preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize)))


def test_a_report_on_a_full_disk_leaves_no_temporary_file(run, tmp_path):
    out = tmp_path / "full"
    one_error_line(_toktok(["report", run, "-o", out / "r.html"], tmp_path, 20_000), "r.html", "File too large")
    assert list(out.iterdir()) == []


# --- toktok count -------------------------------------------------------------------------------------


def test_count_never_replaces_its_own_input(tmp_path):
    """``count data.parquet --out data.parquet --force`` replaced the corpus with its word table."""
    data = tmp_path / "data.parquet"
    shutil.copy(FIXTURES / "sample.parquet", data)
    (tmp_path / "link.parquet").symlink_to(data)
    for src in (data, tmp_path / "link.parquet", tmp_path / "*.parquet"):
        one_error_line(_cli("count", src, "--out", data, "--force"), "input of this count")
    assert data.read_bytes() == (FIXTURES / "sample.parquet").read_bytes()
    _ok("count", data, "--out", tmp_path / "link.parquet", "--force")  # the link is replaced, not its target
    assert data.read_bytes() == (FIXTURES / "sample.parquet").read_bytes()
    assert not (tmp_path / "link.parquet").is_symlink()


def test_count_does_not_replace_a_dangling_link_unasked(tmp_path):
    link = tmp_path / "c.parquet"
    link.symlink_to(tmp_path / "nowhere")
    one_error_line(_cli("count", NOTES, "--out", link), str(link), "--force")
    assert link.is_symlink() and os.readlink(link) == str(tmp_path / "nowhere")


def test_count_names_its_options_as_spelled(tmp_path):
    """``count -s ''`` named ``--special-tokens``, an option no command has."""
    line = one_error_line(_cli("count", NOTES, "--out", tmp_path / "c.parquet", "-s", ""), "--special-token ")
    assert "--special-tokens" not in line


# --- train --word-counts ------------------------------------------------------------------------------


def _table(path: Path, words, counts, meta: bytes | None = None, wtype=pa.binary()) -> Path:
    t = pa.table({"word": pa.array(words, wtype), "count": pa.array(counts, pa.int64())})
    if meta is not None:
        t = t.replace_schema_metadata({META_KEY: meta})
    pq.write_table(t, path)
    return path


@pytest.mark.parametrize("meta, needle", [
    (b"not json{", "not JSON"),
    (b"[1, 2]", "not a JSON object"),
    (b'{"pattern": 5}', "'pattern'"),
    (b'{"pattern": "cl100k"}', "'pattern'"),
    (b'{"pattern": {"regex": 5}}', "'pattern'"),
    (b'{"special_tokens": "<|endoftext|>"}', "'special_tokens'"),
])
def test_a_table_whose_toktok_metadata_is_not_toktoks(tmp_path, meta, needle):
    """A foreign or broken ``toktok`` metadata key: JSONDecodeError / AttributeError / TypeError before."""
    f = _table(tmp_path / "m.parquet", [b"a", b"b"], [3, 5], meta)
    one_error_line(_cli("train", "--word-counts", f, "--merges", "3", "--out", tmp_path / "o"), "m.parquet",
                   "metadata key 'toktok'", needle)
    assert not (tmp_path / "o").exists() and not (tmp_path / ".o.partial").exists()


def test_a_table_with_a_corrupt_row_group_names_it(tmp_path):
    """A table whose footer reads but whose data does not: OSError (corrupt snappy data) before."""
    f = tmp_path / "c.parquet"
    words = [f"w{i}".encode() for i in range(3000)]
    pq.write_table(pa.table({"word": words, "count": list(range(1, 3001))}), f, row_group_size=1000)
    col = pq.ParquetFile(f).metadata.row_group(1).column(0)
    data = bytearray(f.read_bytes())
    start = col.dictionary_page_offset or col.data_page_offset
    data[start + 8 : start + col.total_compressed_size] = b"A" * (col.total_compressed_size - 8)
    f.write_bytes(bytes(data))
    one_error_line(_cli("train", "--word-counts", f, "--merges", "3", "--out", tmp_path / "o"), "c.parquet",
                   "row group 1 (rows 1,000-1,999)", "corrupt")


@pytest.mark.parametrize("names, col", [(["word", "word", "count"], "word"), (["word", "count", "count"], "count")])
def test_a_table_with_two_columns_of_one_name(tmp_path, names, col):
    """KeyError ('Field "word" exists 2 times in schema') before."""
    f = tmp_path / "d.parquet"
    cols = [pa.array([b"a", b"b"]) if n == "word" else pa.array([1, 2]) for n in names]
    pq.write_table(pa.Table.from_arrays(cols, names=names), f)
    one_error_line(_cli("train", "--word-counts", f, "--merges", "3", "--out", tmp_path / "o"), "d.parquet",
                   f"2 columns are named {col!r}")


def test_an_empty_table_is_no_words(tmp_path):
    """An empty table raised TypeError (the max of no counts is None)."""
    f = _table(tmp_path / "e.parquet", [], [])
    one_error_line(_cli("train", "--word-counts", f, "--merges", "3", "--out", tmp_path / "o"), "e.parquet", "no words")
    with pytest.raises(InputError, match="no words"):
        read_counts([str(f)])
    full = _table(tmp_path / "f.parquet", [b"ab"], [4])  # an empty part beside a full one is no error
    assert read_counts([str(f), str(full)]).words.num_rows == 1


@pytest.mark.parametrize("words, counts, row", [
    ([b"b", b"b"], [2**62, 2**62], 0),                    # a word twice: the sum wraps (ValueError before)
    ([b"ab", b"xaby"], [2**63 - 1, 5], 0),                # the pair (a, b) overflows (OverflowError before)
    ([b"ab", b"cab"], [2**62, 2**62], 0),
    ([b"a", b"b"], [5, 2**63 - 1], 1),                    # the pieces' total
])
def test_counts_beyond_64_bits_are_refused_at_the_row(tmp_path, words, counts, row):
    f = _table(tmp_path / "h.parquet", words, counts)
    one_error_line(_cli("train", "--word-counts", f, "--vocab-size", "260", "--no-hardcoded", "--out", tmp_path / "o"),
                   f"h.parquet: row {row}:", "2^63", "check the count column")
    assert not (tmp_path / "o").exists()


def test_counts_beyond_64_bits_over_several_tables(tmp_path):
    a = _table(tmp_path / "a.parquet", [b"ab"], [2**61])
    b = _table(tmp_path / "b.parquet", [b"cd"], [2**61 + 2**60])
    with pytest.raises(InputError, match=r"b\.parquet: row 0: .*of the tables up to it"):
        read_counts([str(a), str(b)])


def test_toktoks_table_edited_with_its_metadata_kept_is_checked(tmp_path, counts, monkeypatch):
    """pyarrow keeps a table's metadata through ``concat_tables`` and ``sort_by``: a row added to
    toktok's own table (kept sorted) was trusted as one of its pattern's pieces, and the run
    learned ``'hello world'``."""
    t = pq.read_table(counts)
    assert "seal" in json.loads(t.schema.metadata[META_KEY])
    extra = pa.table({"word": pa.array([b"hello world"]), "count": pa.array([10**6])}).cast(t.schema)
    edited = tmp_path / "edited.parquet"
    both = pa.concat_tables([t, extra]).sort_by("word")
    pq.write_table(both, edited)
    assert META_KEY in pq.read_schema(edited).metadata
    row = both.column("word").to_pylist().index(b"hello world")
    one_error_line(_cli("train", "--word-counts", edited, "--vocab-size", "1500", "--out", tmp_path / "o"),
                   f"edited.parquet: row {row}:", "'hello world'", "not one piece")
    from toktok.count import tables

    got = read_counts([str(counts)], pattern=DEFAULT)
    rev = tmp_path / "rev.parquet"  # rows moved: checked, the same table
    pq.write_table(t.take(list(range(t.num_rows))[::-1]), rev)
    checked = []
    check = tables._check_pieces
    monkeypatch.setattr(tables, "_check_pieces", lambda *a: (checked.append(a), check(*a)))
    assert read_counts([str(counts)], pattern=DEFAULT).words.equals(got.words)
    assert not checked  # toktok's own table as written: its seal holds, its words are not cut again
    assert read_counts([str(rev)], pattern=DEFAULT).words.equals(got.words) and len(checked) == 1
    with pytest.raises(InputError, match="hello world"):
        read_counts([str(edited)], pattern=DEFAULT)
    assert len(checked) == 2


# --- --ladder -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("value, needle", [("[1.5, 2000]", "1.5 is not a whole number"), ("[true, 2000]", "True"),
                                           ("[]", "got an empty list")])
def test_a_config_ladder_of_the_wrong_kind_names_the_ladder(tmp_path, value, needle):
    """``ladder: [1.5, 2000]`` was told to pass ``--vocab-size 32768``; ``ladder: []`` was "got a list"."""
    cfg = tmp_path / "c.yaml"
    cfg.write_text(f"ladder: {value}\nphases:\n  - vocab_size: 2000\n    sources: [{{path: '{NOTES}'}}]\n")
    line = one_error_line(_cli("train", "--config", cfg, "--out", tmp_path / "o"), "c.yaml", "ladder", needle,
                          "--ladder 8192,16384,32768")
    assert "--vocab-size" not in line


def test_a_rung_below_the_superword_transition_says_what_it_is_below(tmp_path):
    """``--superbpe 1600 --ladder 1500,2000`` said "1500 is less than the 1,417 ids the run starts
    with" (it is not) and offered --no-hardcoded "then at least 439" (1600 still holds)."""
    line = one_error_line(_cli("train", NOTES, "--vocab-size", "2000", "--superbpe", "1600", "--ladder", "1500,2000",
                               "--out", tmp_path / "o"),
                          "--ladder 1500 is less than the 1,600 ids the phases before it reach", "pass at least 1600")
    assert "--no-hardcoded" not in line and "1,417 ids the run starts with" not in line
    assert list(tmp_path.iterdir()) == []


# --- --superbpe ---------------------------------------------------------------------------------------


def test_superbpe_from_word_counts_is_refused_before_any_work(tmp_path, counts):
    """The superwords phase re-read the table, counted with the run's pattern, as the superbpe
    pattern's words: it failed after the first phase with advice that could not work
    (``pass --pattern cl100k``), leaving a partial run."""
    one_error_line(_cli("train", "--word-counts", counts, "--vocab-size", "2000", "--superbpe", "1600", "--out",
                        tmp_path / "o"), "--superbpe", "--word-counts", "superbpe pattern")
    cfg = tmp_path / "c.yaml"
    cfg.write_text(f"superbpe: 1600\nphases:\n  - vocab_size: 2000\n    sources: [{{counts: '{counts}'}}]\n")
    one_error_line(_cli("train", "--config", cfg, "--out", tmp_path / "o"), "c.yaml", "superbpe", "--pattern superbpe")
    with pytest.raises(ConfigError, match="superbpe pattern"):
        toktok.train(word_counts=[str(counts)], vocab_size=2000, superbpe=1600, out=tmp_path / "o")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.yaml"]


def test_superbpe_from_two_phases_of_counts_is_superbpe_from_text(tmp_path, counts):
    """What the refusal advises: two phases, the second's counts counted with the superbpe pattern."""
    sb = tmp_path / "sb.parquet"
    _ok("count", NOTES, FIXTURES / "extra.jsonl", "--pattern", "superbpe", "--out", sb)
    cfg = tmp_path / "c.yaml"
    cfg.write_text(f"phases:\n  - vocab_size: 1600\n    sources: [{{counts: '{counts}'}}]\n"
                   f"  - vocab_size: 2000\n    pattern: superbpe\n    sources: [{{counts: '{sb}'}}]\n")
    _ok("train", "--config", cfg, "--out", tmp_path / "a", "-q")
    _ok("train", NOTES, FIXTURES / "extra.jsonl", "--vocab-size", "2000", "--superbpe", "1600", "--out",
        tmp_path / "b", "-q")
    for f in FILES:
        assert (tmp_path / "a" / f).read_bytes() == (tmp_path / "b" / f).read_bytes(), f


# --- the Python API of the same commands --------------------------------------------------------------


def test_word_counts_and_cut_from_python_take_paths_and_refuse_the_rest(run, tmp_path):
    """``toktok.word_counts("notes.txt", ...)`` read the str as a list of one-letter paths (``n: no
    such file``); ``out=5`` / ``out=None`` / ``cut(5, ...)`` raised TypeError."""
    r = toktok.word_counts(str(NOTES), out=tmp_path / "a.parquet")
    assert r.docs == 1 and toktok.word_counts(NOTES, out=tmp_path / "b.parquet").words == r.words
    for call in (lambda: toktok.word_counts([str(NOTES)], out=5),
                 lambda: toktok.cut(5, vocab_size=1500, out=tmp_path / "c"),
                 lambda: toktok.cut(run, vocab_size=1500, out=None)):
        with pytest.raises(ConfigError, match="expected a non-empty string"):
            call()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.parquet", "b.parquet"]


def test_eval_says_how_to_write_a_path_that_starts_with_a_dash(run):
    one_error_line(_cli("eval", run, "--data", "-x.txt"), "-x.txt", "./-NAME")


def test_report_and_count_never_put_a_file_in_place_of_a_fifo(run, tmp_path):
    """``-o`` a FIFO (or, as root, ``/dev/null``) with --force: os.replace put the page there."""
    for name, cmd in (("f.html", ["report", run, "-o"]), ("f.parquet", ["count", NOTES, "--out"])):
        fifo = tmp_path / name
        os.mkfifo(fifo)
        one_error_line(_cli(*cmd, fifo, "--force"), name, "is a FIFO, not a file")
        assert fifo.is_fifo()


def test_a_table_of_a_custom_pattern_names_the_option_to_paste(tmp_path):
    """The hint was ``pass --pattern custom '...'``: pasted, ``custom`` became a source."""
    import shlex

    rx = r"\p{L}+|\p{N}+|\s+|[^\s\p{L}\p{N}]+"
    f = tmp_path / "c.parquet"
    _ok("count", NOTES, "--pattern", rx, "--out", f)
    line = one_error_line(_cli("train", "--word-counts", f, "--vocab-size", "1500", "--out", tmp_path / "o"),
                          "c.parquet", "not the run's cl100k")
    hint = shlex.split(line.split("; pass ", 1)[1].split(" or count", 1)[0])
    assert hint == ["--pattern", rx]
    _ok("train", "--word-counts", f, *hint, "--vocab-size", "1500", "--out", tmp_path / "o", "-q")


def test_an_output_name_too_long_for_the_file_system_is_one_line(run, tmp_path):
    """A 300-byte --out name: OSError (File name too long) from the first is_dir/exists."""
    long = tmp_path / ("a" * 300)
    for cmd in (["count", NOTES, "--out", f"{long}.parquet"], ["report", run, "-o", f"{long}.html"],
                ["cut", run, "--vocab-size", "1500", "--out", long], ["train", NOTES, "--out", long / "x"]):
        one_error_line(_cli(*cmd), "bytes, more than the", "pass a shorter --out")
    assert list(tmp_path.iterdir()) == []
