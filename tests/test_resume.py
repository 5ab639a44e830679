"""Resume: a run killed with SIGKILL (kill -9) at a checkpoint, in the merge loop or between
phases, continues with ``--resume`` and ends with the files of an uninterrupted run.

The kills are real SIGKILLs of a real ``toktok train`` process: run through tests/faults.py with
``kill_at=N``, the process kills itself right after its N-th checkpoint (deterministic points), and
a slow test kills it from outside at arbitrary moments.
"""
from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pytest

import faults
from conftest import FIXTURES
from toktok.rundir import RUN_FILE

FILES = ("tokenizer.tiktoken", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")
TABLES = {
    "words": "SELECT word, count, phase, tokens FROM words ORDER BY phase, word",
    "merges": "SELECT * FROM merges ORDER BY merge_index",
    "vocab": "SELECT * FROM vocab ORDER BY id",
    "inputs": "SELECT * FROM inputs ORDER BY phase, path",
    "parity": "SELECT * FROM parity ORDER BY phase, hash",
}
PHASES = """\
phases:
  - name: english
    merges: 400
    sources: [{{path: {d}/sample.parquet}}]
  - name: notes
    merges: 300
    sources: [{{path: {d}/notes.txt}}, {{path: {d}/extra.jsonl}}]
special_tokens: ["<|endoftext|>"]
"""


def _train(args: list[str], fault: int | None = None, cwd: Path | None = None, step: int = 1) -> subprocess.CompletedProcess:
    """``toktok train ARGS -q`` checkpointing after every ``step`` merges; killed (SIGKILL) right
    after its ``fault``-th checkpoint when given."""
    cmd = faults.command(every=0, step=step, kill_at=fault)
    return subprocess.run(cmd + ["train", *args, "-q"], capture_output=True, text=True, cwd=cwd, timeout=600)


def _tables(run: Path) -> dict:
    con = duckdb.connect(str(run), read_only=True)
    try:
        return {k: con.execute(q).fetchall() for k, q in TABLES.items()}
    finally:
        con.close()


def _same_run(a: Path, b: Path) -> None:
    for f in FILES:
        assert (a / f).read_bytes() == (b / f).read_bytes(), f
    ta, tb = _tables(a / RUN_FILE), _tables(b / RUN_FILE)
    for k in TABLES:
        assert ta[k] == tb[k], k


@pytest.fixture(scope="module")
def one_phase(tmp_path_factory) -> tuple[list[str], Path]:
    """An uninterrupted one-phase run and its arguments (without --out)."""
    d = tmp_path_factory.mktemp("resume1")
    args = [str(FIXTURES / "sample.parquet"), "--merges", "1500", "--special-token", "<|endoftext|>"]
    r = _train(args + ["--out", str(d / "ref")])
    assert r.returncode == 0, r.stderr
    return args, d / "ref"


@pytest.fixture(scope="module")
def two_phases(tmp_path_factory) -> tuple[list[str], Path]:
    d = tmp_path_factory.mktemp("resume2")
    cfg = d / "run.yaml"
    cfg.write_text(PHASES.format(d=FIXTURES))
    args = ["--config", str(cfg)]
    r = _train(args + ["--out", str(d / "ref")])
    assert r.returncode == 0, r.stderr
    return args, d / "ref"


def test_kill9_in_merge_loop_then_resume_gives_identical_output(one_phase, tmp_path):
    args, ref = one_phase
    out = tmp_path / "tok"
    # checkpoint 1 = the word table; 2, 3 = merges written while the loop runs
    r = _train(args + ["--out", str(out)], fault=3)
    assert r.returncode == -signal.SIGKILL, r.stderr
    assert not out.exists()
    staging = tmp_path / ".tok.partial"
    con = duckdb.connect(str(staging / RUN_FILE), read_only=True)
    done = con.execute("SELECT count(*) FROM merges").fetchone()[0]
    con.close()
    assert 0 < done < 1500  # killed inside the merge loop, with merges checkpointed

    r = _train(args + ["--out", str(out), "--resume"])
    assert r.returncode == 0, r.stderr
    assert not staging.exists()
    _same_run(ref, out)


def _staged(staging: Path) -> tuple[str, int, int]:
    """(checkpoint stage, merges stored, words without tokens) of a killed run's staging folder."""
    con = duckdb.connect(str(staging / RUN_FILE), read_only=True)
    try:
        stage = con.execute("SELECT json_extract_string(value, '$.stage') FROM meta WHERE key = 'checkpoint:main'").fetchone()
        merges = con.execute("SELECT count(*) FROM merges").fetchone()[0]
        untokened = con.execute("SELECT count(*) FROM words WHERE tokens IS NULL").fetchone()[0]
    finally:
        con.close()
    return stage[0] if stage else None, merges, untokened


def test_a_short_count_is_stored_with_the_merges_or_at_the_loops_first_checkpoint(one_phase, tmp_path):
    """A phase counted faster than the counting checkpoints' interval keeps its "counted"
    checkpoint due: the "merged" checkpoint stores it, the words written once with their tokens,
    or, when the loop checkpoints first, that checkpoint stores it before its merges. Killed
    right after either, the run resumes to the files of an uninterrupted one."""
    args, ref = one_phase
    # every 2 s: the loop (1,500 merges, milliseconds) ends before its first checkpoint, so the
    # first checkpoint is the phase's "merged" one, which holds the words, tokens and merges
    out = tmp_path / "merged"
    r = subprocess.run(faults.command(every=2.0, kill_at=1) + ["train", *args, "--out", str(out), "-q"],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == -signal.SIGKILL, r.stderr
    assert _staged(tmp_path / ".merged.partial") == ("merged", 1500, 0)
    r = _train(args + ["--out", str(out), "--resume"])
    assert r.returncode == 0, r.stderr
    _same_run(ref, out)
    # the loop checkpointing every 500 merges stores the due "counted" checkpoint first (1), then
    # its merges (2)
    for fault, merges in ((1, 0), (2, 500)):
        out = tmp_path / f"loop{fault}"
        r = subprocess.run(faults.command(every=0, step=500, kill_at=fault, counted_within=1e9)
                           + ["train", *args, "--out", str(out), "-q"], capture_output=True, text=True, timeout=600)
        assert r.returncode == -signal.SIGKILL, r.stderr
        stage, stored, untokened = _staged(tmp_path / f".loop{fault}.partial")
        assert (stage, stored) == ("counted", merges) and untokened > 0
        r = _train(args + ["--out", str(out), "--resume"])
        assert r.returncode == 0, r.stderr
        _same_run(ref, out)


@pytest.mark.parametrize("fault", [1, 2, 5])
def test_kill9_at_checkpoints_of_a_two_phase_run(two_phases, tmp_path, fault):
    """Killed after phase 1 counted (1), inside phase 1's merges (2) or later (5): resumes to the
    same files; a resumed run killed again resumes again."""
    args, ref = two_phases
    out = tmp_path / "tok"
    r = _train(args + ["--out", str(out)], fault=fault)
    assert r.returncode == -signal.SIGKILL, r.stderr
    r = _train(args + ["--out", str(out), "--resume"], fault=2)  # killed again while resuming
    assert r.returncode == -signal.SIGKILL, r.stderr
    r = _train(args + ["--out", str(out), "--resume"])
    assert r.returncode == 0, r.stderr
    _same_run(ref, out)


def test_resume_refuses_other_options_and_keeps_the_interrupted_run(one_phase, tmp_path):
    args, _ = one_phase
    out = tmp_path / "tok"
    staging = tmp_path / ".tok.partial"
    assert _train(args + ["--out", str(out)], fault=2).returncode == -signal.SIGKILL
    other = [a if a != "1500" else "1400" for a in args]
    r = _train(other + ["--out", str(out), "--resume"])
    assert r.returncode == 2
    assert "merges" in r.stderr and "--resume" in r.stderr and "Traceback" not in r.stderr
    assert staging.is_dir()
    # a plain rerun does not silently throw the interrupted run away
    r = _train(args + ["--out", str(out)])
    assert r.returncode == 2 and "--resume" in r.stderr and staging.is_dir()
    # --force starts over
    r = _train(args + ["--out", str(out), "--force"])
    assert r.returncode == 0, r.stderr
    assert not staging.exists() and (out / "tokenizer.json").is_file()


def test_an_interrupted_rerun_beside_a_finished_output_says_resume_force(one_phase, tmp_path):
    """A --force rerun killed beside the finished output it would replace: a plain rerun and
    --resume alone each say, in one line, that --resume --force continues it; that finishes it."""
    args, ref = one_phase
    out = tmp_path / "tok"
    staging = tmp_path / ".tok.partial"
    assert _train(args + ["--out", str(out)]).returncode == 0
    before = {p.name: p.stat().st_mtime_ns for p in out.iterdir()}
    assert _train(args + ["--out", str(out), "--force"], fault=3).returncode == -signal.SIGKILL
    assert staging.is_dir()
    for extra in ([], ["--resume"]):
        r = _train(args + ["--out", str(out)] + extra)
        line = r.stderr.strip()
        assert r.returncode == 2 and "\n" not in line and str(out) in line, line
        assert "--resume --force" in line and "not empty" in line, line
    assert {p.name: p.stat().st_mtime_ns for p in out.iterdir()} == before and staging.is_dir()
    r = _train(args + ["--out", str(out), "--resume", "--force"])
    assert r.returncode == 0, r.stderr
    assert not staging.exists()
    _same_run(ref, out)


def test_resume_with_nothing_to_resume(tmp_path):
    r = _train([str(FIXTURES / "notes.txt"), "--out", str(tmp_path / "tok"), "--merges", "10", "--resume"])
    assert r.returncode == 2
    assert "no interrupted run" in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "tok").exists()


def test_resume_refuses_a_changed_input(tmp_path):
    src = tmp_path / "notes.txt"
    src.write_bytes((FIXTURES / "notes.txt").read_bytes())
    args = [str(src), "--merges", "200", "--out", str(tmp_path / "tok")]
    assert _train(args, fault=2).returncode == -signal.SIGKILL
    src.write_bytes(src.read_bytes() + b"\nmore text")
    r = _train(args + ["--resume"])
    assert r.returncode == 2
    assert str(src) in r.stderr and "changed" in r.stderr


SAMPLED = """\
budget: 1GB
phases:
  - name: mixed
    merges: 500
    budget: 150KB
    sources: [{{path: {d}/sample.parquet}}, {{path: {d}/notes.txt}}, {{path: {d}/extra.jsonl}}]
"""


@pytest.mark.parametrize("sampled", [False, True], ids=["full-read", "sampled"])
def test_kill9_while_counting_resumes_from_the_counting_checkpoint(tmp_path, sampled):
    """Killed right after the first counting checkpoint (the counts of the first file of a full
    read; the finished sample of a sampled phase): the resumed run starts from it, not from zero,
    and ends with the files of an uninterrupted run."""
    if sampled:
        cfg = tmp_path / "run.yaml"
        cfg.write_text(SAMPLED.format(d=FIXTURES))
        args = ["--config", str(cfg)]
    else:
        args = [str(FIXTURES / n) for n in ("sample.parquet", "notes.txt", "extra.jsonl")] + ["--merges", "500"]
    ref, out = tmp_path / "ref", tmp_path / "tok"
    assert _train(args + ["--out", str(ref)]).returncode == 0
    r = _train(args + ["--out", str(out)], fault=1)
    assert r.returncode == -signal.SIGKILL, r.stderr
    con = duckdb.connect(str(tmp_path / ".tok.partial" / RUN_FILE), read_only=True)
    parts = con.execute("SELECT count(*) FROM count_parts").fetchone()[0]
    sample = len(list((tmp_path / ".tok.partial").glob("sample-*.parquet")))
    words = con.execute("SELECT count(*) FROM words").fetchone()[0]
    con.close()
    assert words == 0  # killed before the phase's word table was written
    assert (sample > 0 and parts == 0) if sampled else (parts > 0 and sample == 0)
    r = _train(args + ["--out", str(out), "--resume"])
    assert r.returncode == 0, r.stderr
    _same_run(ref, out)
    con = duckdb.connect(str(out / RUN_FILE), read_only=True)
    assert con.execute("SELECT count(*) FROM count_parts").fetchone()[0] == 0  # emptied once counted
    assert not list(out.glob("sample-*.parquet"))
    con.close()


@pytest.mark.slow
def test_kill9_from_outside_at_random_moments(two_phases, tmp_path):
    """SIGKILL from another process at arbitrary moments (reading, counting, merging, exporting),
    repeatedly, then --resume until it finishes: the files of the uninterrupted run."""
    args, ref = two_phases
    rng = random.Random(7)
    for trial in range(4):
        out = tmp_path / f"tok{trial}"
        extra: list[str] = []
        for attempt in range(20):
            p = subprocess.Popen(faults.command(every=0) + ["train", *args, "--out", str(out), "-q", *extra],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            time.sleep(rng.uniform(0.5, 4.0) + attempt)  # later attempts get further
            if p.poll() is None:
                p.send_signal(signal.SIGKILL)
            err = p.communicate()[1]
            # a kill after the output folder was renamed into place leaves the finished run
            # (the next attempt would be told that the folder exists)
            if p.returncode == 0 or (out / RUN_FILE).exists():
                break
            if (tmp_path / f".tok{trial}.partial" / RUN_FILE).exists():
                extra = ["--resume"]
        else:
            pytest.fail(f"never finished; the last attempt ended {p.returncode}: {err[-2000:]}")
        _same_run(ref, out)


# --- many merges, 2 threads: the merges read back must keep their order -------------------------
#
# DuckDB returned the rows of an ORDER BY in blocks of ~2,048 in any order when the run file was
# opened with preserve_insertion_order off and 2+ threads: a resumed run then refused ("the
# merges learned again differ") or published the same tokens with shuffled ranks.

MANY = 6000  # merges: well over 2,048 rows in the run file
STEP = 1000  # merges per checkpoint of the merge loop


def random_words(path: Path, words: int = 200_000, seed: int = 13) -> Path:
    """~1.3 MB of random lowercase words (12,000 distinct, Zipf-like frequencies), 12 a line:
    enough distinct pairs for tens of thousands of merges, and past a small run's Python loop
    (more than 1 MB and 8,192 words: the compiled loop, which checkpoints as it goes)."""
    rng = random.Random(seed)
    letters = "abcdefghijklmnopqrstuvwxyz"
    vocab = ["".join(rng.choice(letters) for _ in range(rng.randint(2, 9))) for _ in range(12_000)]
    picked = rng.choices(vocab, weights=[1 / (i + 1) for i in range(len(vocab))], k=words)
    path.write_text("\n".join(" ".join(picked[i:i + 12]) for i in range(0, len(picked), 12)) + "\n")
    return path


def _stored(staging: Path) -> tuple[int, str | None]:
    """Merges in an interrupted run file, and the stage of its phase's checkpoint."""
    import json

    con = duckdb.connect(str(staging / RUN_FILE), read_only=True)
    try:
        n = con.execute("SELECT count(*) FROM merges").fetchone()[0]
        row = con.execute("SELECT value FROM meta WHERE key = 'checkpoint:main'").fetchone()
    finally:
        con.close()
    return n, json.loads(row[0])["stage"] if row else None


@pytest.fixture(scope="module")
def many_merges(tmp_path_factory) -> tuple[list[str], Path]:
    d = tmp_path_factory.mktemp("resume_many")
    args = [str(random_words(d / "words.txt")), "--merges", str(MANY), "--threads", "2"]
    r = _train(args + ["--out", str(d / "ref")], step=STEP)
    assert r.returncode == 0, r.stderr
    return args, d / "ref"


def test_kill9_with_thousands_of_merges_stored_resumes_byte_identical(many_merges, tmp_path):
    """Killed inside the merge loop with 3,000 merges stored, the resumed run killed again right
    after the phase's merges were all stored (stage "merged"), resumed again: every file equals
    the uninterrupted run's, byte for byte."""
    args, ref = many_merges
    out, staging = tmp_path / "tok", tmp_path / ".tok.partial"
    # checkpoints: 1 = the word table, 2.. = every 1,000 merges, then the rest (empty), then "merged"
    r = _train(args + ["--out", str(out)], fault=4, step=STEP)
    assert r.returncode == -signal.SIGKILL, r.stderr
    assert _stored(staging) == (3 * STEP, "counted")
    r = _train(args + ["--out", str(out), "--resume"], fault=MANY // STEP + 2, step=STEP)
    assert r.returncode == -signal.SIGKILL, r.stderr  # the replayed merges agreed with the 3,000
    assert _stored(staging) == (MANY, "merged")
    r = _train(args + ["--out", str(out), "--resume"], step=STEP)
    assert r.returncode == 0, r.stderr
    _same_run(ref, out)


@pytest.mark.slow
@pytest.mark.parametrize("fault", [1, 2, 3, 5, 6, 7, 8])
def test_kill9_with_many_merges_at_every_checkpoint(many_merges, tmp_path, fault):
    """Every checkpoint of a 6,000-merge run (2 threads) as the kill point, then --resume."""
    args, ref = many_merges
    out = tmp_path / "tok"
    r = _train(args + ["--out", str(out)], fault=fault, step=STEP)
    assert r.returncode == -signal.SIGKILL, r.stderr
    r = _train(args + ["--out", str(out), "--resume"], step=STEP)
    assert r.returncode == 0, r.stderr
    _same_run(ref, out)


MANY_PHASES = """\
phases:
  - name: first
    merges: 3000
    sources: [{{path: {words}}}]
  - name: second
    merges: 2500
    sources: [{{path: {d}/sample.parquet}}]
threads: 2
"""


@pytest.mark.slow
@pytest.mark.parametrize("fault", [5, 6, 7, 9])
def test_kill9_two_phases_with_thousands_of_merges(tmp_path, fault):
    """Phase 1 learns 3,000 merges (checkpoints 2-4, "merged" at 6), phase 2 2,500 more on top:
    killed after phase 1's merges were stored or inside phase 2, resumed: the same files."""
    cfg = tmp_path / "run.yaml"
    cfg.write_text(MANY_PHASES.format(words=random_words(tmp_path / "words.txt"), d=FIXTURES))
    args = ["--config", str(cfg)]
    assert _train(args + ["--out", str(tmp_path / "ref")], step=STEP).returncode == 0
    out = tmp_path / "tok"
    r = _train(args + ["--out", str(out)], fault=fault, step=STEP)
    assert r.returncode == -signal.SIGKILL, r.stderr
    r = _train(args + ["--out", str(out), "--resume"], step=STEP)
    assert r.returncode == 0, r.stderr
    _same_run(tmp_path / "ref", out)


# --- messages true to what is on disk -------------------------------------------------------------


def test_resume_after_a_finished_run_says_it_finished(tmp_path):
    out = tmp_path / "tok"
    args = [str(FIXTURES / "notes.txt"), "--merges", "20", "--out", str(out)]
    assert _train(args).returncode == 0
    before = {p.name: p.stat().st_mtime_ns for p in out.iterdir()}
    for extra in (["--resume"], ["--resume", "--force"]):
        r = _train(args + extra)
        assert r.returncode == 2 and "Traceback" not in r.stderr
        line = r.stderr.strip()
        assert "\n" not in line and str(out) in line and "this run finished" in line, line
        assert "nothing to do" in line and "--force instead of --resume" in line, line
    assert {p.name: p.stat().st_mtime_ns for p in out.iterdir()} == before
    assert sorted(os.listdir(tmp_path)) == ["tok"]


def _interrupt_at(monkeypatch, module, name: str) -> None:
    """A real SIGINT (Ctrl-C) delivered to this process when ``module.name`` is called."""
    real = getattr(module, name)

    def interrupted(*args, **kwargs):
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(1)  # the handler raises KeyboardInterrupt here
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, interrupted)


def test_ctrl_c_before_the_first_checkpoint_keeps_nothing_and_says_so(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    import toktok.count.stage
    from toktok.cli import app

    out = tmp_path / "tok"
    args = ["train", str(FIXTURES / "notes.txt"), "--merges", "20", "--out", str(out), "-q"]
    _interrupt_at(monkeypatch, toktok.count.stage, "count_phase")
    r = CliRunner().invoke(app, args)
    assert r.exit_code == 130
    assert "before the first checkpoint" in r.output and "nothing was kept" in r.output, r.output
    assert "--resume" not in r.output
    assert os.listdir(tmp_path) == []
    monkeypatch.undo()
    r = CliRunner().invoke(app, args + ["--resume"])  # and --resume agrees: there is nothing
    assert r.exit_code == 2 and "no interrupted run" in r.output


def test_ctrl_c_after_a_checkpoint_names_what_is_kept_and_resume_continues(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    import toktok.merge.stage
    from toktok.cli import app

    out = tmp_path / "tok"
    args = ["train", str(FIXTURES / "notes.txt"), "--merges", "20", "--out", str(out), "-q"]
    _interrupt_at(monkeypatch, toktok.merge.stage, "learn_merges")  # after the word table's checkpoint
    r = CliRunner().invoke(app, args)
    assert r.exit_code == 130
    staging = tmp_path / ".tok.partial"
    assert f"kept in {staging}" in r.output and "--resume" in r.output, r.output
    assert (staging / RUN_FILE).is_file() and not out.exists()
    monkeypatch.undo()
    r = CliRunner().invoke(app, args + ["--resume"])
    assert r.exit_code == 0, r.output
    assert (out / "tokenizer.json").is_file() and not staging.exists()


@pytest.fixture(scope="module")
def spelled(tmp_path_factory) -> Path:
    """A folder ``big`` (two files), a symlink ``link`` to it, and ``ref``: an uninterrupted run
    on ``big`` from that folder."""
    d = tmp_path_factory.mktemp("spelled")
    (d / "big").mkdir()
    for name in ("notes.txt", "extra.jsonl"):
        (d / "big" / name).write_bytes((FIXTURES / name).read_bytes())
    (d / "link").symlink_to(d / "big")
    assert _train(["big", *SPELLED_ARGS, "--out", "ref"], cwd=d).returncode == 0
    return d


SPELLED_ARGS = ["--merges", "200", "--special-token", "<|endoftext|>"]


@pytest.mark.parametrize("spelling", ["./big/", "{tmp}/link", pytest.param("big//", marks=pytest.mark.slow),
                                      pytest.param("{tmp}/big", marks=pytest.mark.slow)])
def test_resume_accepts_the_same_sources_however_spelled(spelled, spelling, tmp_path):
    """Interrupted with ``big``, resumed with ``./big/``, an absolute path or a symlink to it: the
    same files, so it continues, and ends with the files of an uninterrupted run (the inputs
    recorded as first spelled)."""
    out = tmp_path.name  # a folder of this test's own beside the shared ones
    r = _train(["big", *SPELLED_ARGS, "--out", out], fault=2, cwd=spelled)
    assert r.returncode == -signal.SIGKILL, r.stderr
    r = _train([spelling.format(tmp=spelled), *SPELLED_ARGS, "--out", out, "--resume"], cwd=spelled)
    assert r.returncode == 0, r.stderr
    _same_run(spelled / "ref", spelled / out)


def test_resume_still_refuses_other_sources(tmp_path):
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "notes.txt").write_bytes((FIXTURES / "notes.txt").read_bytes())
    args = ["--merges", "300", "--out", "tok"]
    assert _train(["a", *args], fault=2, cwd=tmp_path).returncode == -signal.SIGKILL
    r = _train(["b", *args, "--resume"], cwd=tmp_path)
    assert r.returncode == 2 and "sources" in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert (tmp_path / ".tok.partial" / RUN_FILE).is_file()


def _disk_full(store, *args, **kwargs):
    """A checkpoint's save (``resume.save_counted``, ``save_merged``) on a full disk: DuckDB's error
    inside the run store's own call, as a real one comes."""
    with store.translating():
        raise duckdb.IOException(f'IO Error: Could not write file "{store.path}.wal": No space left on device')


@pytest.mark.parametrize("corpus", ["notes", "many words"])
def test_a_checkpoint_stored_in_the_background_that_fails_fails_the_run(tmp_path, monkeypatch, corpus):
    # the "counted" checkpoint is written beside the merge stage (resume.Pending): its error is the
    # run's, one line, and nothing is published or kept (no earlier checkpoint to resume from),
    # whether a small run's Python loop waits for it at its first checkpoint or the compiled loop
    # before allocating its tables ("many words": over 1 MB and 8,192 words)
    from typer.testing import CliRunner

    import toktok.resume
    from toktok.cli import app

    data = tmp_path / "data"
    data.mkdir()
    src = FIXTURES / "notes.txt" if corpus == "notes" else _many_words(data / "words.txt")
    monkeypatch.setattr(toktok.resume, "save_counted", _disk_full)
    out = tmp_path / "tok"
    r = CliRunner().invoke(app, ["train", str(src), "--merges", "20", "--out", str(out), "-q"])
    assert r.exit_code == 2 and "disk full" in r.output and len(r.output.strip().splitlines()) == 1, r.output
    assert os.listdir(tmp_path) == ["data"]


def test_a_failed_merged_checkpoint_keeps_the_counted_one_and_resume_finishes(one_phase, tmp_path, monkeypatch):
    # the "merged" checkpoint is written beside export and verify: when it fails, the run fails
    # after them with its error, publishes nothing, and --resume goes on from the "counted" one
    from typer.testing import CliRunner

    import toktok.resume
    from toktok.cli import app

    args, ref = one_phase

    monkeypatch.setattr(toktok.resume, "save_merged", _disk_full)
    out = tmp_path / "tok"
    r = CliRunner().invoke(app, ["train", *args, "--out", str(out), "-q"])
    assert r.exit_code == 2 and "disk full" in r.output and "--resume" in r.output, r.output
    assert not out.exists() and (tmp_path / ".tok.partial" / RUN_FILE).is_file()
    monkeypatch.undo()
    r = CliRunner().invoke(app, ["train", *args, "--out", str(out), "-q", "--resume"])
    assert r.exit_code == 0, r.output
    _same_run(out, ref)


def _many_words(path: Path) -> Path:
    """~1.4 MB of 200,000 random words of 3-9 letters: over 1 MB and 8,192 distinct words, so
    that the compiled merge loop takes it (not a small run's Python loop)."""
    rng = random.Random(5)
    letters = "abcdefghijklmnop"
    path.write_text(" ".join("".join(rng.choice(letters) for _ in range(rng.randint(3, 9))) for _ in range(200_000)))
    assert path.stat().st_size > 1 << 20
    return path


def test_the_counted_checkpoint_is_stored_before_the_merge_loop_starts(tmp_path):
    # DuckDB's write of the word table and the loop's tables never add up (the run's peak): the
    # "counted" checkpoint, written beside the segmentation, is waited for before the loop merges.
    # A corpus over 1 MB with more than 8,192 words, so that the compiled loop takes it.
    from toktok.config import TrainConfig
    from toktok.pipeline import train
    from toktok.resume import Checkpoints

    text = _many_words(tmp_path / "words.txt")
    seen: list[tuple] = []
    marks = Checkpoints(every=0, step=100, on_checkpoint=lambda n: seen.append(("checkpoint", n)))  # in order
    s = train(TrainConfig([str(text)], str(tmp_path / "out"), merges=300),
              progress=lambda stage, done, total: seen.append((stage, done)), checkpoints=marks)
    assert s.words > 8192 and s.merges_learned == 300
    first_merge = next(i for i, (stage, done) in enumerate(seen) if stage == "merge" and done > 0)
    assert ("checkpoint", 1) in seen[:first_merge], seen


@pytest.mark.parametrize("resume", [True, False], ids=["resume-with-nothing", "interrupted-run-without-resume"])
def test_a_budget_run_refuses_its_output_before_its_kernels_compile(tmp_path, monkeypatch, resume):
    # under a budget a first run builds its kernels (~40 s) before it opens its run file: an
    # output it refuses is refused before that, not after (found with a kill -9 and a --resume)
    import toktok.merge.stage
    from toktok.config import TrainConfig
    from toktok.errors import OutputError
    from toktok.pipeline import train

    built = []
    monkeypatch.setattr(toktok.merge.stage, "warm_up", lambda *a, **k: built.append(a))
    src = _many_words(tmp_path / "words.txt")  # over 1 MB: a run that builds the kernels
    out = tmp_path / "tok"
    if not resume:  # an interrupted run, left by a kill -9
        (tmp_path / ".tok.partial").mkdir()
        (tmp_path / ".tok.partial" / RUN_FILE).write_bytes(b"")
    with pytest.raises(OutputError, match="no interrupted run to resume" if resume else "an interrupted run was found"):
        # (4GB: a budget is planned from this process's RSS, over 1 GB in a long test session)
        train(TrainConfig([str(src)], str(out), merges=10, budget="4GB", resume=resume))
    assert built == []
    assert sorted(os.listdir(tmp_path)) == (["words.txt"] if resume else [".tok.partial", "words.txt"])


def test_the_versions_a_run_file_records_are_the_installed_distributions():
    """The versions the run file records (``meta('versions')``) are read from the names of the
    packages' dist-info folders, without ``importlib.metadata``: the versions it finds."""
    from importlib.metadata import version

    from toktok.count.common import dist_version
    from toktok.resume import _versions

    got = _versions()
    for name in ("duckdb", "numba", "tokenizers", "polars", "tiktoken"):
        assert got[name] == version(name), name
    assert dist_version(["numpy"], "numpy") == version("numpy")
    assert dist_version(["no-such-dist"], "json") is None  # (no dist-info of that name beside it)
    assert dist_version(["no-such-dist"], "no_such_module_zz") is None
