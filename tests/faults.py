"""Fault injection for the resume tests: run toktok in this process with the checkpoints a test asks for.

    python tests/faults.py [--every SECONDS] [--step K] [--kill-at N] [--counted-within SECONDS] -- ARGS...

runs ``toktok ARGS...`` (its command line: ``train ...``, ``-c run.yaml ...``) or, when the first
argument is a Python script, that script with the other arguments as its own. Every run of
``toktok.pipeline.train`` in the process checkpoints every ``--every`` seconds (0: the merge loop
after every ``--step`` new tokens, deterministically) and, with ``--kill-at N``, kills its own
process with SIGKILL (as kill -9) right after its N-th checkpoint: a real kill at a known point.
Tests build the command with :func:`command`: ``command(every=0, kill_at=2) + ["train", ...]``.
"""
from __future__ import annotations

import argparse
import os
import runpy
import signal
import sys
from pathlib import Path


def command(*, every: float | None = None, step: int = 1, kill_at: int | None = None,
            counted_within: float | None = None) -> list[str]:
    """The start of a command line that runs toktok under these checkpoints."""
    cmd = [sys.executable, str(Path(__file__).resolve()), "--step", str(step)]
    if every is not None:
        cmd += ["--every", str(every)]
    if counted_within is not None:
        cmd += ["--counted-within", str(counted_within)]
    if kill_at is not None:
        cmd += ["--kill-at", str(kill_at)]
    return cmd + ["--"]


def kill_after(n: int):
    """``on_checkpoint`` that kills this process with SIGKILL right after the n-th checkpoint."""
    def on_checkpoint(k: int) -> None:
        if k >= n:
            os.kill(os.getpid(), signal.SIGKILL)
    return on_checkpoint


def _install(every: float | None, step: int, kill_at: int | None, counted_within: float | None = None) -> None:
    """Give every ``toktok.pipeline.train`` call of this process its own such checkpoints."""
    import toktok.pipeline
    from toktok.resume import CHECKPOINT_SECONDS, Checkpoints

    train = toktok.pipeline.train

    def with_checkpoints(cfg, progress=None, log=None):
        marks = Checkpoints(every=CHECKPOINT_SECONDS if every is None else every, step=step,
                            on_checkpoint=kill_after(kill_at) if kill_at is not None else None,
                            counted_within=counted_within)
        return train(cfg, progress, log, checkpoints=marks)

    toktok.pipeline.train = with_checkpoints


def main() -> None:
    cut = sys.argv.index("--")
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--every", type=float, default=None)
    ap.add_argument("--step", type=int, default=1)
    ap.add_argument("--kill-at", type=int, default=None)
    ap.add_argument("--counted-within", type=float, default=None)
    a, args = ap.parse_args(sys.argv[1:cut]), sys.argv[cut + 1:]
    _install(a.every, a.step, a.kill_at, a.counted_within)
    if args and args[0].endswith(".py"):
        sys.argv = args
        runpy.run_path(args[0], run_name="__main__")
        return
    from toktok.cli import app

    app(args=args, prog_name="toktok")


if __name__ == "__main__":
    main()
