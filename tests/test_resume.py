"""Resume: a run killed with SIGKILL (kill -9) at a checkpoint, in the merge loop or between
phases, continues with ``--resume`` and ends with the files of an uninterrupted run.

The kills are real SIGKILLs of a real ``toktok train`` process: ``TOKTOK_FAULT=checkpoint:N`` makes
the process kill itself right after its N-th checkpoint (deterministic points), and a slow test
kills it from outside at arbitrary moments.
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

from conftest import FIXTURES

TOKTOK = [sys.executable, "-m", "toktok.cli"]
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


def _train(args: list[str], fault: int | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "TOKTOK_CHECKPOINT_SECONDS": "0"}
    env.pop("TOKTOK_FAULT", None)
    if fault is not None:
        env["TOKTOK_FAULT"] = f"checkpoint:{fault}"
    return subprocess.run(TOKTOK + ["train", *args, "-q"], capture_output=True, text=True, env=env, cwd=cwd, timeout=600)


def _tables(run: Path) -> dict:
    con = duckdb.connect(str(run), read_only=True)
    try:
        return {k: con.execute(q).fetchall() for k, q in TABLES.items()}
    finally:
        con.close()


def _same_run(a: Path, b: Path) -> None:
    for f in FILES:
        assert (a / f).read_bytes() == (b / f).read_bytes(), f
    ta, tb = _tables(a / "run.duckdb"), _tables(b / "run.duckdb")
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
    con = duckdb.connect(str(staging / "run.duckdb"), read_only=True)
    done = con.execute("SELECT count(*) FROM merges").fetchone()[0]
    con.close()
    assert 0 < done < 1500  # killed inside the merge loop, with merges checkpointed

    r = _train(args + ["--out", str(out), "--resume"])
    assert r.returncode == 0, r.stderr
    assert not staging.exists()
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
    con = duckdb.connect(str(tmp_path / ".tok.partial" / "run.duckdb"), read_only=True)
    parts = con.execute("SELECT count(*) FROM count_parts").fetchone()[0]
    sample = len(list((tmp_path / ".tok.partial").glob("sample-*.parquet")))
    words = con.execute("SELECT count(*) FROM words").fetchone()[0]
    con.close()
    assert words == 0  # killed before the phase's word table was written
    assert (sample > 0 and parts == 0) if sampled else (parts > 0 and sample == 0)
    r = _train(args + ["--out", str(out), "--resume"])
    assert r.returncode == 0, r.stderr
    _same_run(ref, out)
    con = duckdb.connect(str(out / "run.duckdb"), read_only=True)
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
        env = {**os.environ, "TOKTOK_CHECKPOINT_SECONDS": "0"}
        extra: list[str] = []
        for attempt in range(20):
            p = subprocess.Popen(TOKTOK + ["train", *args, "--out", str(out), "-q", *extra], env=env,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            time.sleep(rng.uniform(0.5, 4.0) + attempt)  # later attempts get further
            if p.poll() is None:
                p.send_signal(signal.SIGKILL)
            p.wait()
            if p.returncode == 0:
                break
            if (tmp_path / f".tok{trial}.partial" / "run.duckdb").exists():
                extra = ["--resume"]
        else:
            pytest.fail("never finished")
        _same_run(ref, out)
