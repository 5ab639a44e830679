"""Progress a machine can read: ``--progress json`` parsed from a real run of the command line,
the reporters' rate limit and lines, and the counting stage's figures behind them."""
from __future__ import annotations

import io
import json
import subprocess
import sys
import time
from pathlib import Path

import polars as pl
import pytest
from conftest import FIXTURES
from typer.testing import CliRunner

import toktok
from toktok import progress as progress_mod
from toktok.cli import app
from toktok.errors import ConfigError

STAGE_KEYS = {"event", "stage", "phase", "unit", "done", "total", "rate", "eta", "elapsed"}
runner = CliRunner()
SUMMARY_KEYS = {"out", "tiktoken", "files", "vocab_size", "merges_learned", "merges_requested", "reused_merges",
                "words", "docs", "text_bytes", "seconds", "parity_strings", "warnings", "phases", "specials"}


def _cli(*args: str, timeout: int = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "toktok.cli", *args], capture_output=True, text=True,
                          timeout=timeout)


def _json_lines(stderr: str) -> list[dict]:
    return [json.loads(ln) for ln in stderr.splitlines() if ln.startswith("{")]


def _check_stream(lines: list[dict]) -> dict[str, list[dict]]:
    """The contract of a JSON progress stream; returns its progress lines by stage."""
    by_stage: dict[str, list[dict]] = {}
    for ln in lines[:-1]:
        assert ln["event"] == "progress" and set(ln) == STAGE_KEYS, ln
        assert isinstance(ln["done"], int) and ln["done"] >= 0
        assert ln["total"] is None or (isinstance(ln["total"], int) and ln["done"] <= ln["total"]), ln
        assert ln["unit"] == progress_mod.unit_of(ln["stage"]) and ln["elapsed"] >= 0
        assert ln["rate"] is None or ln["rate"] > 0
        assert ln["eta"] is None or ln["eta"] >= 0
        if ln["rate"] is not None and ln["total"] is not None:
            assert ln["eta"] is not None, ln  # known rate and total: an ETA
        by_stage.setdefault(ln["stage"] + (f" {ln['phase']}" if ln["phase"] else ""), []).append(ln)
    for stage, seen in by_stage.items():
        done = [ln["done"] for ln in seen]
        elapsed = [ln["elapsed"] for ln in seen]
        assert done == sorted(done) and elapsed == sorted(elapsed), (stage, seen)
        # at most one line a second, but for the first and the last
        for prev, cur in zip(seen[:-2], seen[1:-1]):
            assert cur["elapsed"] - prev["elapsed"] >= progress_mod.JSON_SECONDS - 0.01, (stage, prev, cur)
        last = seen[-1]
        assert last["total"] is not None and last["done"] == last["total"] and last["eta"] == 0, (stage, last)
    return by_stage


def test_json_progress_of_a_real_run(tmp_path):
    out = tmp_path / "o"
    # --working-set-mb 1 makes the phase sample its 0.7 MB: the sample stage reports too
    r = _cli("train", str(FIXTURES / "sample.parquet"), str(FIXTURES / "notes.txt"), "--out", str(out), "--merges",
             "800", "-s", "<|endoftext|>", "--working-set-mb", "1", "--progress", "json")
    assert r.returncode == 0, r.stderr
    lines = _json_lines(r.stderr)
    assert not [ln for ln in r.stderr.splitlines() if "\x1b" in ln]
    by_stage = _check_stream(lines)
    assert {"sample", "count", "merge", "export", "insight", "verify"} <= set(by_stage), set(by_stage)
    assert by_stage["merge"][-1]["total"] == 800 and by_stage["export"][-1]["unit"] == "steps"
    summary = lines[-1]
    assert summary["event"] == "summary" and SUMMARY_KEYS <= set(summary)
    enc = toktok.load_encoding(out)
    assert summary["vocab_size"] == enc.n_vocab == 256 + 1161 + summary["merges_learned"] + 1
    assert summary["merges_learned"] == summary["merges_requested"] == 800
    assert summary["out"] == str(out) and summary["tiktoken"] == str(out / "tokenizer.tiktoken")
    assert set(summary["files"]) == {"tokenizer.tiktoken", "tokenizer.json", "tokenizer_config.json",
                                     "special_tokens_map.json", "run.duckdb"}
    assert all(Path(p).is_file() for p in summary["files"].values())
    assert {"count", "merge", "export", "insight", "verify"} <= set(summary["seconds"])
    assert summary["parity_strings"] > 0 and summary["specials"]["ids"] == {"<|endoftext|>": enc.n_vocab - 1}
    # the same figures as the summary printed on stdout
    assert f"{summary['vocab_size']:,} tokens" in r.stdout and f"{summary['parity_strings']:,} strings" in r.stdout
    assert summary["phases"][0]["name"] == "main" and summary["docs"] == summary["phases"][0]["docs"]


def test_merge_progress_total_is_what_the_words_allow_at_most(tmp_path):
    """Asked for far more merges than a corpus allows, the merge stage's total is no more than its
    words' bytes allow (so its ETA means something); it ends at the merges learned."""
    r = _cli("train", str(FIXTURES / "notes.txt"), "--out", str(tmp_path / "o"), "--merges", str(10**15),
             "--progress", "json")
    assert r.returncode == 0, r.stderr
    merge = [ln for ln in _json_lines(r.stderr) if ln.get("stage") == "merge"]
    text = (FIXTURES / "notes.txt").read_bytes()
    assert merge[0]["done"] == 0 and 0 < merge[0]["total"] < len(text) < 10**15
    assert all(ln["eta"] is None or ln["eta"] < 3600 for ln in merge)
    learned = _json_lines(r.stderr)[-1]["merges_learned"]
    assert merge[-1]["done"] == merge[-1]["total"] == learned < merge[0]["total"]


def test_json_progress_ends_with_the_error(tmp_path):
    for args in (["--chat-template", "chatml"],  # found by the run's plan: the reporter says it
                 ["--threads", "many"]):  # found reading the command line: the command says it
        r = runner.invoke(app, ["train", str(FIXTURES / "notes.txt"), "--out", str(tmp_path / "o"), *args,
                                "--progress", "json"])
        assert r.exit_code == 2
        lines = _json_lines(r.output)
        assert len(lines) == 1 and lines[0]["event"] == "error" and lines[0]["error"] == "ConfigError"
        assert lines[0]["exit_code"] == 2 and args[0] in lines[0]["message"]
        assert r.output.splitlines()[-1] == f"toktok: error: {lines[0]['message']}"
        assert not (tmp_path / "o").exists()


def test_json_progress_of_toktok_count(tmp_path):
    """``toktok count --progress json``: the count stage's lines (and the sample's, sampled), then
    its figures as the summary, or the error as the stream's last line; the default, not a
    terminal, prints no bar."""
    out = tmp_path / "c.parquet"
    r = _cli("count", str(FIXTURES / "sample.parquet"), str(FIXTURES / "notes.txt"), "--out", str(out),
             "--working-set-mb", "1", "--progress", "json")
    assert r.returncode == 0, r.stderr
    lines = _json_lines(r.stderr)
    by_stage = _check_stream(lines)
    assert {"sample", "count"} <= set(by_stage), set(by_stage)
    size = sum((FIXTURES / n).stat().st_size for n in ("sample.parquet", "notes.txt"))
    assert by_stage["sample"][-1]["unit"] == "bytes" and 0 < by_stage["sample"][-1]["total"] <= size
    summary = lines[-1]
    import pyarrow.parquet as pq

    t = pq.read_table(out)
    assert summary["event"] == "summary" and summary["out"] == str(out) and summary["words"] == t.num_rows > 1000
    assert summary["total"] == sum(t.column("count").to_pylist()) and summary["docs"] > 0
    assert isinstance(summary["seconds"], float) and summary["warnings"] == []
    assert f"{summary['words']:,} words" in " ".join(r.stdout.split())
    r = _cli("count", str(FIXTURES / "notes.txt"), "--out", str(out), "--progress", "json")  # exists
    lines = _json_lines(r.stderr)
    assert r.returncode == 2 and len(lines) == 1 and lines[0]["event"] == "error"
    assert lines[0]["error"] == "OutputError" and "pass --force" in lines[0]["message"]
    r = _cli("count", str(FIXTURES / "notes.txt"), "--out", str(out), "--progress", "bars")
    lines = _json_lines(r.stderr)
    assert r.returncode == 2 and "--progress 'bars': use rich, plain, json or none" in r.stderr and not lines
    r = _cli("count", str(FIXTURES / "notes.txt"), "--out", str(out), "--progress", "json", "--seed", "x")
    lines = _json_lines(r.stderr)
    assert r.returncode == 2 and len(lines) == 1 and lines[0]["error"] == "ConfigError" and "--seed" in lines[0]["message"]
    r = _cli("count", str(FIXTURES / "notes.txt"), "--out", str(tmp_path / "d.parquet"))
    assert r.returncode == 0 and "\x1b" not in r.stderr and not _json_lines(r.stderr)
    seen = []
    toktok.word_counts([FIXTURES / "notes.txt"], out=tmp_path / "e.parquet",
                       progress=lambda stage, done, total: seen.append((stage, done, total)))
    assert seen and seen[-1][0] == "count" and seen[-1][1] == seen[-1][2] == (FIXTURES / "notes.txt").stat().st_size


def test_quiet_and_plain_lines_have_no_ansi(tmp_path):
    # not a terminal: plain lines by default (none here: no stage runs long), nothing with -q
    r = runner.invoke(app, ["train", str(FIXTURES / "notes.txt"), "--out", str(tmp_path / "a"), "--merges", "50", "-q"])
    assert r.exit_code == 0, r.output
    assert not [ln for ln in r.output.splitlines() if ln.startswith(("{", "toktok: count", "toktok: merge"))]
    assert "\x1b" not in r.output


# --- the reporters -----------------------------------------------------------------------------


def test_json_lines_keep_the_rate_limit_and_say_the_first_and_last(monkeypatch):
    monkeypatch.setattr(progress_mod, "JSON_SECONDS", 0.1)
    buf = io.StringIO()
    rep = progress_mod.reporter("json", stream=buf)
    t0 = time.monotonic()
    n = 0
    while time.monotonic() - t0 < 0.55:
        rep("merge", n, 10**9)  # a total no loop of 0.55 s reaches
        rep("merge", max(0, n - 5), 10**9)  # never goes back in the stream
        n += 1
    rep("export", 0, 3)  # the merge stage stopped short of its total: its last figures are said now
    rep("export", 1, 3)
    rep("export", 3, 3)
    rep.close()
    lines = [json.loads(ln) for ln in buf.getvalue().splitlines()]
    merge = [ln for ln in lines if ln["stage"] == "merge"]
    assert 4 <= len(merge) <= 9, len(merge)  # ~0.55 s at one line per 0.1 s, plus the first and last
    assert merge[0]["done"] == 0 and merge[0]["rate"] is None and merge[-1]["done"] == n - 1
    for prev, cur in zip(merge[:-2], merge[1:-1]):
        assert cur["elapsed"] - prev["elapsed"] >= 0.1 - 0.005
    assert [ln["done"] for ln in merge] == sorted(ln["done"] for ln in merge)
    assert all(ln["eta"] is not None for ln in merge[1:])
    assert [ln["done"] for ln in lines if ln["stage"] == "export"] == [0, 3]
    assert lines.index(merge[-1]) < lines.index(next(ln for ln in lines if ln["stage"] == "export"))


def test_plain_lines(monkeypatch):
    monkeypatch.setattr(progress_mod, "PLAIN_FIRST", 0.05)
    monkeypatch.setattr(progress_mod, "PLAIN_SECONDS", 0.1)
    buf = io.StringIO()
    with progress_mod.reporter("plain", stream=buf) as rep:
        rep("count", 0, 50_000_000)
        time.sleep(0.06)
        rep("count", 20_000_000, 50_000_000)
        rep("count", 21_000_000, 50_000_000)  # within PLAIN_SECONDS of the last line: not said
        rep("count", 50_000_000, 50_000_000)
        rep("export", 0, 3)  # too short to be said
        rep("export", 3, 3)
    lines = buf.getvalue().splitlines()
    assert len(lines) == 2 and "\x1b" not in buf.getvalue()
    assert lines[0].startswith("toktok: count 20.0 MB of 50.0 MB (40%), ") and lines[0].endswith(" left")
    assert lines[1].startswith("toktok: count done: 50.0 MB in ")


def test_a_plain_stage_short_of_its_total_is_timed_to_its_last_report(monkeypatch):
    # a stage that never reaches its total (sizes estimated, or a loop that stopped early) is said
    # done when the run ends, with the time it took, not the time of the stages after it
    monkeypatch.setattr(progress_mod, "PLAIN_FIRST", 0.05)
    buf = io.StringIO()
    with progress_mod.reporter("plain", stream=buf) as rep:
        rep("merge", 0, 10**9)
        time.sleep(0.06)
        rep("merge", 500, 10**9)
        rep("export", 0, 3)
        time.sleep(0.5)
        rep("export", 3, 3)
    done = [ln for ln in buf.getvalue().splitlines() if ln.startswith("toktok: merge done: ")]
    assert len(done) == 1 and float(done[0].split(" in ")[1].split()[0]) < 0.3, buf.getvalue()


def test_python_progress_takes_a_mode_or_a_callback(tmp_path, capsys):
    seen = []
    r = toktok.train(str(FIXTURES / "notes.txt"), out=tmp_path / "a", merges=30, verbose=False,
                     progress=lambda stage, done, total: seen.append((stage, done, total)))
    assert {s for s, _, _ in seen} >= {"count", "merge", "export", "insight", "verify"} and seen[-1][1] == seen[-1][2]
    capsys.readouterr()
    toktok.train(str(FIXTURES / "notes.txt"), out=tmp_path / "b", merges=30, progress="json")
    lines = _json_lines(capsys.readouterr().err)
    _check_stream(lines)
    assert lines[-1]["event"] == "summary" and lines[-1]["vocab_size"] == r.vocab_size
    with pytest.raises(ConfigError, match="progress 'bars': use rich, plain, json or none, or a callable"):
        toktok.train(str(FIXTURES / "notes.txt"), out=tmp_path / "c", merges=30, progress="bars")
    assert not (tmp_path / "c").exists()


# --- what counting reports ---------------------------------------------------------------------


def test_counting_one_file_reports_how_far_into_it(tmp_path):
    """One Parquet file read in small batches: the counting stage moves inside the file (it used
    to stand at 0 until the file's end), never back, and ends at the file's size."""
    from toktok.count.local import count_phase
    from toktok.count.read import read_corpus
    from toktok.count.local import Source

    p = tmp_path / "one.parquet"
    pl.read_parquet(FIXTURES / "sample.parquet").write_parquet(p, row_group_size=50)
    seen = []
    count_phase([Source(read_corpus([str(p)]))], batch_bytes=16 << 10,
                report=lambda stage, done, total: seen.append((stage, done, total)))
    size = p.stat().st_size
    done = [d for s, d, t in seen if s == "count"]
    assert {t for s, d, t in seen} == {size} and done == sorted(done) and done[-1] == size
    assert len({d for d in done if 0 < d < size}) >= 3, done


def test_a_sampled_phase_counts_its_sample(tmp_path):
    from toktok.count.local import count_phase
    from toktok.count.read import read_corpus
    from toktok.count.local import Source

    seen = []
    pc = count_phase([Source(read_corpus([str(FIXTURES / "sample.parquet")]))], capacity=100_000,
                     report=lambda stage, done, total: seen.append((stage, done, total)))
    sample = sum(u["bytes"] for u in pc.used.values())
    counts = [(d, t) for s, d, t in seen if s == "count"]
    assert {t for _, t in counts} == {sample} and counts[-1] == (sample, sample)
    assert [d for s, d, t in seen if s == "sample"][-1] == (FIXTURES / "sample.parquet").stat().st_size
