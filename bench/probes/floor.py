#!/usr/bin/env python
"""Benchmark: the floor of a small run without Polars: a process that does a one-document run's
library work with every library a run uses but Polars, and its peak RSS and wall time.

    python bench/probes/floor.py [--repeat 3]

Each run is a fresh process: it imports Typer, Rich, NumPy, DuckDB, Arrow (through toktok's run
store), ``regex``, tiktoken and tokenizers, creates a DuckDB run file with toktok's schema, writes
one document's words into it and checkpoints it, then has tokenizers and tiktoken encode the text.
What a toktok run adds to this is its own work and, today, Polars (issue 29: a one-document run
≤ 0.5 s and ≤ 150 MB). See docs/performance.md.
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: the history
import history  # noqa: E402

CHILD = r"""
import os, sys, time
t0 = time.perf_counter()
import typer, rich.console, rich.table
import numpy, duckdb, regex, tiktoken, tokenizers
from pathlib import Path
from toktok.store import RunStore
from toktok.vocab import PATTERN
text = "The quick brown fox jumps over the lazy dog, and the dog sleeps under the old tree.\n"
store = RunStore.create(Path(sys.argv[1]) / "run.duckdb", memory_limit=1 << 30)
rx = regex.compile(PATTERN)
words = {}
for piece in rx.findall(text):
    words[piece.encode()] = words.get(piece.encode(), 0) + 1
with store.transaction():
    store.con.executemany("INSERT INTO words VALUES (?, ?, 'main', NULL)", list(words.items()))
store.close()
tok = tokenizers.Tokenizer(tokenizers.models.BPE())
tok.encode(text)
enc = tiktoken.Encoding("floor", pat_str=PATTERN, mergeable_ranks={bytes([i]): i for i in range(256)},
                        special_tokens={})
enc.encode(text)
hwm = int(open("/proc/self/status").read().split("VmHWM:")[1].split()[0]) << 10
print(json.dumps({"wall_s": time.perf_counter() - t0, "peak_rss": hwm, "polars": "polars" in sys.modules}))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    history.options(ap)
    a = ap.parse_args()
    runs = []
    for _ in range(a.repeat):
        with tempfile.TemporaryDirectory() as d:
            out = subprocess.run([sys.executable, "-c", "import json\n" + CHILD, d], capture_output=True,
                                 text=True, check=True)
            runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
    assert not any(r["polars"] for r in runs), "Polars was imported: the floor is not Polars-free"
    wall = statistics.median(r["wall_s"] for r in runs)
    peak = statistics.median(r["peak_rss"] for r in runs)
    print(f"floor without Polars: {wall:.2f} s in process (after interpreter start), "
          f"peak RSS {peak / 2**20:.0f} MiB (median of {len(runs)}; each: "
          + ", ".join(f"{r['wall_s']:.2f} s/{r['peak_rss'] / 2**20:.0f} MiB" for r in runs) + ")")
    history.record(a, "floor", {"wall_s": wall, "peak_rss": peak, "runs": runs})


if __name__ == "__main__":
    main()
