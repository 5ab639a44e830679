"""The bad-input catalogue, round 3 (issue #32): the machine under a run. Two runs into one
``--out`` at once, ``--resume`` while a run is live, a source appended to during a run, and the
disk failing while the tokenizer files are written. Each: one line (exit 2), nothing
half-published, an existing output left as it was.

A live run is a real ``toktok train`` process held just before it counts (a fault point passed in
by the test: ``toktok.count.stage.count_phase`` waits for a file), so the other process meets it
with its staging folder locked; the disk fails through a fault point too (the write of the
.tiktoken raises ENOSPC / EROFS after writing half of it), as no test may mount a full disk.
"""
from __future__ import annotations

import errno
import hashlib
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from toktok.cli import app

runner = CliRunner()
GOOD_TEXT = "hello world, hello there. the cat sat on the mat; 12 cats, 345 mats.\n" * 40

_HELD = """
import sys, time
from pathlib import Path
import toktok.count.stage
ready, go = Path(sys.argv[1]), Path(sys.argv[2])
real = toktok.count.stage.count_phase
def held(*a, **k):
    ready.touch()
    while not go.exists():
        time.sleep(0.05)
    return real(*a, **k)
toktok.count.stage.count_phase = held
from toktok.cli import app
sys.argv = ["toktok", *sys.argv[3:]]
app()
"""


def _snapshot(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def _one_line(r, *needles: str) -> str:
    assert r.exit_code == 2, r.output
    lines = [ln for ln in r.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("toktok: error: ") and len(lines[0]) <= 315, r.output
    for n in needles:
        assert n in lines[0], f"{n!r} not in {lines[0]!r}"
    return lines[0]


class _Live:
    """A ``toktok train`` process held before it counts until :meth:`go`."""

    def __init__(self, d: Path, *args: str) -> None:
        self.ready, self.go_file = d / "ready", d / "go"
        self.p = subprocess.Popen([sys.executable, "-c", _HELD, str(self.ready), str(self.go_file), "train", *args,
                                   "-q"], cwd=d, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 120
        while not self.ready.exists():
            assert self.p.poll() is None, self.p.communicate()
            assert time.monotonic() < deadline, "the held run never started counting"
            time.sleep(0.05)

    def go(self) -> tuple[int, str]:
        self.go_file.touch()
        _, err = self.p.communicate(timeout=300)
        return self.p.returncode, err


@pytest.fixture
def data(tmp_path, monkeypatch) -> Path:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "good.txt").write_text(GOOD_TEXT)
    return tmp_path


def test_two_runs_into_one_out_and_a_resume_while_live(data):
    """One run wins; the other is refused in one line (plain, --force and --resume alike) and
    touches nothing of the live run; the published folder verifies."""
    live = _Live(data, "good.txt", "--out", "tok", "--merges", "5")
    try:
        staged = _snapshot(data / ".tok.partial")
        for extra in ([], ["--force"], ["--resume"]):
            r = runner.invoke(app, ["train", "good.txt", "--out", "tok", "--merges", "5", "-q", *extra])
            _one_line(r, "another toktok run is writing this output", "wait for it or pick another --out")
        assert _snapshot(data / ".tok.partial") == staged and not (data / "tok").exists()
    finally:
        code, err = live.go()
    assert code == 0, err
    r = runner.invoke(app, ["verify", "tok"])
    assert r.exit_code == 0 and "parity ok" in r.output, r.output
    assert sorted(os.listdir(data)) == ["go", "good.txt", "ready", "tok"]


def test_a_source_appended_during_a_run_is_refused(data):
    """The run once trained on text written while it read and recorded the size listed before:
    now the file's size and modification time are checked after the phase read it."""
    live = _Live(data, "good.txt", "--out", "tok", "--merges", "5")
    with open(data / "good.txt", "a") as f:
        f.write("more text, appended while the run reads\n")
    code, err = live.go()
    assert code == 2, err
    lines = err.splitlines()
    assert len(lines) == 1 and "good.txt: changed while the run read it" in lines[0], err
    assert "2,760 bytes when listed" in lines[0] and "rerun once it is complete" in lines[0]
    assert sorted(os.listdir(data)) == ["go", "good.txt", "ready"]  # nothing published, no staging left


@pytest.mark.parametrize("code, needles", [
    (errno.ENOSPC, ["No space left on device", "free space on that disk"]),
    (errno.EROFS, ["Read-only file system", "pass a writable --out"]),
])
def test_the_disk_failing_mid_export(data, monkeypatch, code, needles):
    """The .tiktoken's write fails halfway: one line naming the output folder and the bytes the
    files need; the old output is intact and no half-written folder is published or left."""
    import toktok.formats.export
    from toktok.formats.tiktoken import write_tiktoken

    r = runner.invoke(app, ["train", "good.txt", "--out", "tok", "--merges", "5", "-q"])
    assert r.exit_code == 0, r.output
    before = _snapshot(data / "tok")

    def failing(vocab, path, **kw):
        write_tiktoken(vocab, path, **kw)
        Path(path).write_bytes(Path(path).read_bytes()[:100])
        raise OSError(code, os.strerror(code), str(path))

    monkeypatch.setattr(toktok.formats.export, "write_tiktoken", failing)
    r = runner.invoke(app, ["train", "good.txt", "--out", "tok", "--merges", "7", "-q", "--force"])
    line = _one_line(r, "tok: cannot write the tokenizer files", "bytes there", *needles)
    need = int(line.split("need about ")[1].split(" bytes")[0].replace(",", ""))
    assert need > sum((data / "tok" / f).stat().st_size for f in ("tokenizer.json", "tokenizer.tiktoken"))
    assert _snapshot(data / "tok") == before
    if (data / ".tok.partial").exists():  # the counted phase was checkpointed: kept for --resume, and said
        assert "rerun with --resume" in line, line
        r = runner.invoke(app, ["train", "good.txt", "--out", "tok", "--merges", "7", "-q", "--resume", "--force"])
        monkeypatch.undo()
        assert r.exit_code == 2  # the fault point is still in place
        monkeypatch.chdir(data)
        r = runner.invoke(app, ["train", "good.txt", "--out", "tok", "--merges", "7", "-q", "--resume", "--force"])
        assert r.exit_code == 0, r.output  # the space freed: the run goes on where it was
    assert sorted(os.listdir(data)) == ["good.txt", "tok"]
