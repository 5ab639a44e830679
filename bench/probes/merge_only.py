"""Time the merge stage alone on a saved word table (the merge loop's own benchmark).

    python bench/probes/merge_only.py --build              # count ../shared/corpus/*.parquet once
    python bench/probes/merge_only.py [--reps 3] [--merges 32512] [--words /tmp/merge_words.parquet]

``--build`` counts the corpus with toktok's ``WordCounter`` and saves (word, count) to the words
file (built on first use otherwise). A timed run calls
``learn_merges(words, counts, Vocab.base(hardcoded=False), merges)`` -- what ``bench/run.py``'s
toktok run does with vocab 32,768 -- and prints, per repetition: wall seconds and merges/s,
process CPU seconds (on a shared machine the steadier figure), the stage seconds
(``MergeResult.times``: segment, layout, setup = initial pair counts + heap, loop, and
their CPU time), the loop statistics (``MergeResult.stats``) and the peak RSS during the
call above the RSS before it (sampled every 5 ms). A small untimed run first fills Numba's cache.
Repetitions run in one process; for A/B comparisons run processes alternately.
"""
from __future__ import annotations

import argparse
import glob
import json
import sys
import threading
import time
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: the history
import history  # noqa: E402


def build(path: str, data: str) -> None:
    from toktok.count.scan import WordCounter

    t0 = time.perf_counter()
    wc = WordCounter()
    files = sorted(glob.glob(data))
    if not files:
        raise SystemExit(f"merge_only: no files match {data}")
    for f in files:
        for b in pq.ParquetFile(f).iter_batches(batch_size=2048, columns=["text"]):
            wc.add(pl.from_arrow(b.column(0)))
    df = wc.result()
    df.write_parquet(path)
    print(f"{df.height:,} words, {df['count'].sum():,} occurrences, {time.perf_counter() - t0:.1f} s -> {path}")


def _rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096 / 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--words", default="/tmp/merge_words.parquet", help="the saved word table")
    ap.add_argument("--data", default=str(ROOT.parent / "shared" / "corpus" / "*.parquet"),
                    help="Parquet files to count for --build")
    ap.add_argument("--build", action="store_true", help="count --data into --words and stop")
    ap.add_argument("--merges", type=int, default=32768 - 256)
    ap.add_argument("--reps", type=int, default=1)
    ap.add_argument("--json", default=None, help="write every figure here")
    history.options(ap)
    a = ap.parse_args()
    if a.build or not Path(a.words).exists():
        build(a.words, a.data)
        if a.build:
            return

    from toktok.merge import learn_merges
    from toktok.vocab import Vocab

    df = pl.read_parquet(a.words)
    words = df["word"].to_arrow()
    counts = df["count"].to_numpy()
    print(f"{df.height:,} words; {a.merges:,} merges from the 256 bytes")
    learn_merges([b"hello world", b"abc"], np.array([3, 2]), Vocab.base(hardcoded=False), 5)  # JIT cache
    runs = []
    for _ in range(a.reps):
        before = _rss_mb()
        peak = [before]
        done = threading.Event()

        def sample() -> None:
            while not done.wait(0.005):
                peak[0] = max(peak[0], _rss_mb())

        th = threading.Thread(target=sample, daemon=True)
        th.start()
        t0, c0 = time.perf_counter(), time.process_time()
        res = learn_merges(words, counts, Vocab.base(hardcoded=False), a.merges)
        dt, dc = time.perf_counter() - t0, time.process_time() - c0
        done.set()
        th.join()
        stats = {k.replace("_", " "): v for k, v in res.stats.items()}
        times = {k: round(v, 3) for k, v in res.times.items()}
        run = {"seconds": dt, "cpu_seconds": dc, "merges": res.new_tokens, "merges_per_s": res.new_tokens / dt,
               "peak_rss_above_mb": peak[0] - before, "stages_s": times, "stats": stats}
        runs.append(run)
        print(f"{res.new_tokens:,} merges in {dt:.2f} s = {res.new_tokens / dt:,.0f} merges/s "
              f"(CPU {dc:.2f} s = {res.new_tokens / dc:,.0f}/s); peak RSS +{peak[0] - before:,.0f} MB", flush=True)
        print("  stages s:", times)
        print("  loop:", ", ".join(f"{k} {v:,}" for k, v in stats.items()))
    if len(runs) > 1:
        best = min(runs, key=lambda r: r["seconds"])
        print(f"best of {len(runs)}: {best['seconds']:.2f} s = {best['merges_per_s']:,.0f} merges/s")
    history.record(a, "merge_only", {"words": df.height, "runs": runs})
    if a.json:
        Path(a.json).write_text(json.dumps({"words": df.height, "runs": runs}, indent=1) + "\n")


if __name__ == "__main__":
    main()
