"""Scale check: train on a corpus at least 10x larger than the memory budget, inside the budget.

    python bench/scale.py [--budget 512MB] [--factor 10] [--merges 8000] [--keep DIR] [--hf]

Builds the corpus by repeating ../shared/corpus/*.parquet with shuffled rows (each copy a new
file, so documents have new identities) until it holds ``factor`` x budget bytes of text, then runs
``toktok train --budget`` in a subprocess while sampling the RSS of the whole process tree every
50 ms. Prints corpus bytes, budget, peak RSS, the sampled fraction, each source's share of the
corpus and of the sample, wall time and read throughput; ``--hf`` also tries HF tokenizers'
BpeTrainer on the same corpus under the same watch.
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil
import pyarrow as pa
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from toktok.config import parse_size  # noqa: E402


def build_corpus(out: Path, target_bytes: int, seed: int) -> tuple[int, dict[str, int]]:
    """Copies of the shared corpus, rows shuffled per copy, until ``target_bytes`` of text."""
    import numpy as np

    files = sorted(glob.glob(str(ROOT.parent / "shared" / "corpus" / "*.parquet")))
    if not files:
        sys.exit("scale: ../shared/corpus/*.parquet not found")
    tables = {Path(f).stem: pq.read_table(f, columns=["text"]) for f in files}
    sizes = {k: int(pa.compute.sum(pa.compute.binary_length(t["text"])).as_py()) for k, t in tables.items()}
    rng = np.random.default_rng(seed)
    total, per_source, copy = 0, {k: 0 for k in tables}, 0
    out.mkdir(parents=True, exist_ok=True)
    while total < target_bytes:
        for name, t in tables.items():
            perm = rng.permutation(t.num_rows)
            pq.write_table(t.take(perm), out / f"{name}-{copy:03d}.parquet", compression="zstd", row_group_size=256)
            total += sizes[name]
            per_source[name] += sizes[name]
        copy += 1
    return total, per_source


def watch(cmd: list[str], env: dict | None = None) -> tuple[int, float, int, str]:
    """Run ``cmd``; return (exit code, wall seconds, peak RSS of the process tree, stderr tail)."""
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    peak = 0
    stop = threading.Event()

    def sample() -> None:
        nonlocal peak
        root = psutil.Process(p.pid)
        while not stop.is_set():
            try:
                procs = [root] + root.children(recursive=True)
                peak = max(peak, sum(q.memory_info().rss for q in procs if q.is_running()))
            except psutil.Error:
                pass
            stop.wait(0.05)

    th = threading.Thread(target=sample, daemon=True)
    th.start()
    out, err = p.communicate()
    stop.set()
    th.join()
    return p.returncode, time.perf_counter() - t0, peak, (out + err)[-2000:]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--budget", default="512MB")
    ap.add_argument("--factor", type=float, default=10.0)
    ap.add_argument("--merges", type=int, default=8000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--keep", help="build the corpus here and keep it (default: a temp folder)")
    ap.add_argument("--hf", action="store_true", help="also run HF tokenizers' BpeTrainer on it")
    ap.add_argument("--json", help="write the figures here")
    args = ap.parse_args()
    budget = parse_size(args.budget)

    tmp = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="toktok-scale-"))
    try:
        corpus_dir = tmp / "corpus"
        shutil.rmtree(corpus_dir, ignore_errors=True)
        t0 = time.perf_counter()
        total, per_source = build_corpus(corpus_dir, int(budget * args.factor), args.seed)
        print(f"scale: built {total / 1e9:.2f} GB of text in {time.perf_counter() - t0:.0f}s at {corpus_dir}")

        out = tmp / "out"
        exe = str(Path(sys.executable).parent / "toktok")
        # fill Numba's cache first: compiling takes memory and time a normal run does not spend
        subprocess.run([exe, "train", str(ROOT / "data_fixtures" / "notes.txt"), "--out", str(tmp / "warm"),
                        "--merges", "50", "--force", "-q"], check=True, capture_output=True)
        cmd = [exe, "train", str(corpus_dir), "--out", str(out), "--merges", str(args.merges),
               "--budget", args.budget, "--seed", str(args.seed), "--force", "-q"]
        code, wall, peak, tail = watch(cmd)
        if code != 0:
            sys.exit(f"scale: toktok failed ({code}):\n{tail}")
        import duckdb

        con = duckdb.connect(str(out / "run.duckdb"), read_only=True)
        rows = con.execute(
            "select regexp_extract(path, '([a-z]+)-[0-9]+\\.parquet$', 1) as src, sum(bytes_seen), sum(text_bytes) "
            "from inputs group by all order by 1"
        ).fetchall()
        seen = sum(r[1] for r in rows)
        kept = sum(r[2] for r in rows)
        figures = {
            "corpus_bytes": total, "budget": budget, "peak_rss": peak, "peak_over_budget": peak / budget,
            "sampled_fraction": kept / seen if seen else None, "wall_s": wall, "read_mb_s": total / wall / 1e6,
            "shares": {r[0]: {"corpus": r[1] / seen, "sample": r[2] / kept if kept else None} for r in rows},
        }
        stages = dict(con.execute("select stage, seconds from stages").fetchall())
        figures["stages_s"] = stages
        print(f"corpus     {total / 1e9:.2f} GB of text ({total / budget:.1f}x the budget)")
        print(f"budget     {budget / 2**20:,.0f} MiB; peak RSS of the process tree {peak / 2**20:,.0f} MiB "
              f"({peak / budget:.2f}x the budget)")
        print(f"sample     {kept / 1e6:,.0f} MB of {seen / 1e6:,.0f} MB ({figures['sampled_fraction']:.3%})")
        for src, s in figures["shares"].items():
            print(f"  {src:<8} corpus {s['corpus']:.2%}   sample {s['sample']:.2%}   "
                  f"diff {abs(s['corpus'] - s['sample']) * 100:.2f} pt")
        print(f"wall       {wall:.1f}s; stages " + ", ".join(f"{k} {v:.1f}s" for k, v in stages.items()))
        if "sample" in stages:
            print(f"throughput sampling {total / stages['sample'] / 1e6:,.0f} MB/s of corpus; "
                  f"counting {kept / max(stages.get('count', 1e-9), 1e-9) / 1e6:,.0f} MB/s of sample")
        if args.hf:
            hf_cmd = [sys.executable, str(ROOT / "bench" / "run.py"), "--data", str(corpus_dir / "*.parquet"),
                      "--only", "hf", "--vocab", str(256 + args.merges)]
            code, hf_wall, hf_peak, hf_tail = watch(hf_cmd)
            figures["hf"] = {"exit": code, "wall_s": hf_wall, "peak_rss_tree": hf_peak}
            print(f"HF         exit {code}, {hf_wall:.0f}s, peak RSS {hf_peak / 2**20:,.0f} MiB")
        if args.json:
            Path(args.json).write_text(json.dumps(figures, indent=1))
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
