"""Scale check: train on a corpus at least 10x larger than the memory budget, inside the budget.

    python bench/scale.py [--budget 512MB] [--factor 10] [--merges 8000] [--keep DIR] [--cold]
                          [--hf [--hf-timeout 1200]] [--json OUT]
    python bench/scale.py --sampling 'GLOB' [--repeat 3]     # the sampling pass alone

Builds the corpus by repeating ../shared/corpus/*.parquet with shuffled rows (each copy a new
file, so documents have new identities) until it holds ``factor`` x budget bytes of text, then runs
``toktok train --budget`` in a subprocess while sampling the RSS of the whole process tree every
50 ms. Prints corpus bytes, budget, peak RSS, the sampled fraction, each source's share of the
corpus and of the sample, wall time, the sampling and counting throughput and what bounds a 1 TB
run. ``--cold`` then runs it again as the first run after an install (``NUMBA_CACHE_DIR`` an empty
folder: the kernels are built first) under the same watch, and checks that it writes the same tokenizer. ``--hf`` also runs HF tokenizers' BpeTrainer on the same corpus under the same watch, killed
after ``--hf-timeout`` seconds. ``--sampling`` times toktok's sampling pass in this process over
existing Parquet files, next to pyarrow decoding the same text column alone (the floor).
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

import history  # noqa: E402  (bench/, the script's folder)

#: Counting throughput of bench/run.py on ../shared/corpus (docs/performance.md), MB/s of text.
COUNT_MB_S_REFERENCE = {"1 thread": 86, "2 threads": 115}
TB = 10**12


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


def watch(cmd: list[str], env: dict | None = None, timeout: float | None = None) -> dict:
    """Run ``cmd``; return its exit code (None if killed after ``timeout`` seconds), wall seconds,
    the peak RSS of its process tree (sampled every 50 ms) and the tail of its output."""
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    root = psutil.Process(p.pid)
    peak = 0
    timeline: list[tuple[float, int]] = []
    stop = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not stop.is_set():
            try:
                procs = [root] + root.children(recursive=True)
                rss = sum(q.memory_info().rss for q in procs if q.is_running())
                peak = max(peak, rss)
                timeline.append((round(time.perf_counter() - t0, 2), rss))
            except psutil.Error:
                pass
            stop.wait(0.05)

    th = threading.Thread(target=sample, daemon=True)
    th.start()
    timed_out = False
    try:
        out, _ = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        try:
            tree = root.children(recursive=True) + [root]
        except psutil.Error:
            tree = [root]
        for q in tree:  # the processes this command started, by pid
            try:
                q.kill()
            except psutil.Error:
                pass
        out, _ = p.communicate()
    stop.set()
    th.join()
    return {"exit": None if timed_out else p.returncode, "timed_out": timed_out,
            "wall_s": time.perf_counter() - t0, "peak_rss": peak, "tail": (out or "")[-2000:],
            "timeline": timeline}


def run_hf(corpus_dir: Path, vocab: int, timeout: float, scratch: Path) -> dict:
    """HF tokenizers' BpeTrainer on the corpus, as ``bench/run.py`` trains it (its worker process
    alone, so that the RSS watched is the trainer's), stopped after ``timeout`` seconds."""
    files = sorted(str(p) for p in corpus_dir.glob("*.parquet"))
    cmd = [sys.executable, str(ROOT / "bench" / "run.py"), "--worker", "hf", "--result", str(scratch / "hf.json"),
           "--scratch", str(scratch), "--vocab", str(vocab), "--threads", "0", "--data", *files]
    return watch(cmd, timeout=timeout)


def decode_floor(files: list[str], threads: int) -> float:
    """Seconds pyarrow alone takes to decode the text column of ``files`` (``threads`` files at a
    time, row group by row group as toktok reads them): the floor of any pass over the text."""
    from concurrent.futures import ThreadPoolExecutor

    def one(path: str) -> None:
        pf = pq.ParquetFile(path, buffer_size=1 << 20)
        for g in range(pf.metadata.num_row_groups):
            for _ in pf.iter_batches(batch_size=1 << 16, row_groups=[g], columns=["text"], use_threads=False):
                pass

    from toktok.count.sample import roomy_heap

    t0 = time.perf_counter()
    with roomy_heap(), ThreadPoolExecutor(threads) as ex:  # the heap settings of the sample pass
        list(ex.map(one, files))
    return time.perf_counter() - t0


def sampling_bench(pattern: str, repeat: int, capacity: int) -> dict:
    """The sampling pass alone over ``pattern``, in this process: best of ``repeat`` runs, as MB/s of
    text and of Parquet on disk, next to pyarrow's decoding alone (interleaved, as the machine is noisy)."""
    import polars as pl

    from toktok.count.local import Source, sample_pass
    from toktok.count.read import read_corpus
    from toktok.count.sample import Reservoir

    files = sorted(glob.glob(pattern))
    if not files:
        sys.exit(f"scale: {pattern}: no files")
    disk = sum(os.path.getsize(f) for f in files)
    Reservoir(10, 0).offer("warm", 0, pl.Series(["a" * 40000 + "\nb"]))  # Numba's cache, untimed
    threads = pl.thread_pool_size()
    best = {"sample": 1e9, "sample_cpu": 1e9, "decode": 1e9}
    text = 0
    for _ in range(repeat):
        srcs = [Source(read_corpus(files))]
        c0, t0 = time.process_time(), time.perf_counter()
        res = sample_pass(srcs, capacity, 0, 32 << 20, lambda *a: None)[0]
        best["sample"] = min(best["sample"], time.perf_counter() - t0)
        best["sample_cpu"] = min(best["sample_cpu"], time.process_time() - c0)
        text = sum(s.bytes_seen for s in res.stats.values())
        if all(f.endswith(".parquet") for f in files):
            best["decode"] = min(best["decode"], decode_floor(files, threads))
    fig = {"files": len(files), "text_bytes": text, "disk_bytes": disk, "threads": threads,
           "sample_s": best["sample"], "sample_cpu_s": best["sample_cpu"], "decode_s": best["decode"],
           "sample_mb_s": text / best["sample"] / 1e6, "sample_disk_mb_s": disk / best["sample"] / 1e6,
           "sample_mb_per_cpu_s": text / best["sample_cpu"] / 1e6, "decode_mb_s": text / best["decode"] / 1e6}
    print(f"sampling   {len(files)} files, {text / 1e6:,.0f} MB of text ({disk / 1e6:,.0f} MB on disk), "
          f"{threads} threads, best of {repeat}")
    print(f"  pass     {best['sample']:.2f}s: {fig['sample_mb_s']:,.0f} MB/s of text, "
          f"{fig['sample_disk_mb_s']:,.0f} MB/s of files on disk; {fig['sample_mb_per_cpu_s']:,.0f} MB of text per CPU second")
    if best["decode"] < 1e9:
        print(f"  decode   pyarrow alone {best['decode']:.2f}s: {fig['decode_mb_s']:,.0f} MB/s of text "
              f"(the pass is {best['sample'] / best['decode']:.2f}x the decoding floor)")
    return fig


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--budget", default="512MB")
    ap.add_argument("--factor", type=float, default=10.0)
    ap.add_argument("--merges", type=int, default=8000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--cold", action="store_true",
                    help="also run as the first run after an install (empty kernel cache), same corpus")
    ap.add_argument("--keep", help="build the corpus here and keep it (default: a temp folder)")
    ap.add_argument("--hf", action="store_true", help="also run HF tokenizers' BpeTrainer on it")
    ap.add_argument("--hf-timeout", type=float, default=1200.0, help="seconds before HF is stopped (default 1200)")
    ap.add_argument("--sampling", metavar="GLOB", help="only time the sampling pass over these Parquet files")
    ap.add_argument("--repeat", type=int, default=3, help="--sampling: runs (the best is kept)")
    ap.add_argument("--json", help="write the figures here")
    history.options(ap)
    args = ap.parse_args()
    budget = parse_size(args.budget)

    if args.sampling:
        fig = sampling_bench(args.sampling, args.repeat, capacity=int(budget * 0.05))
        history.record(args, "scale_sampling", fig)
        if args.json:
            Path(args.json).write_text(json.dumps(fig, indent=1))
        return

    tmp = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="toktok-scale-"))
    try:
        corpus_dir = tmp / "corpus"
        shutil.rmtree(corpus_dir, ignore_errors=True)
        t0 = time.perf_counter()
        total, per_source = build_corpus(corpus_dir, int(budget * args.factor), args.seed)
        disk = sum(p.stat().st_size for p in corpus_dir.glob("*.parquet"))
        print(f"scale: built {total / 1e9:.2f} GB of text ({disk / 1e9:.2f} GB of Parquet) in "
              f"{time.perf_counter() - t0:.0f}s at {corpus_dir}", flush=True)

        out = tmp / "out"
        exe = str(Path(sys.executable).parent / "toktok")
        # build the kernels first (as an earlier run leaves them): building takes memory and time a
        # later run does not spend
        subprocess.run([sys.executable, "-m", "toktok.ahead", "all"], check=True, capture_output=True, cwd=ROOT)
        subprocess.run([sys.executable, "-c", "import polars as pl; from toktok.count.sample import Reservoir; "
                        "Reservoir(10, 0).offer('w', 0, pl.Series(['a' * 40000 + '\\nb']))"],
                       check=True, capture_output=True, cwd=ROOT)
        cmd = [exe, "train", str(corpus_dir), "--out", str(out), "--merges", str(args.merges),
               "--budget", args.budget, "--seed", str(args.seed), "--force", "-q"]
        run = watch(cmd)
        if run["exit"] != 0:
            sys.exit(f"scale: toktok failed ({run['exit']}):\n{run['tail']}")
        wall, peak = run["wall_s"], run["peak_rss"]
        import duckdb

        con = duckdb.connect(str(out / "run.duckdb"), read_only=True)
        rows = con.execute(
            "select regexp_extract(path, '([a-z]+)-[0-9]+\\.parquet$', 1) as src, sum(bytes_seen), sum(text_bytes) "
            "from inputs group by all order by 1"
        ).fetchall()
        seen = sum(r[1] for r in rows)
        kept = sum(r[2] for r in rows)
        stages = dict(con.execute("select stage, seconds from stages").fetchall())
        con.close()
        t_peak = next(t for t, rss in run["timeline"] if rss == peak) if run["timeline"] else None
        figures = {
            "peak_at_s": t_peak, "rss_timeline": run["timeline"][::10],
            "corpus_bytes": total, "disk_bytes": disk, "budget": budget, "peak_rss": peak,
            "peak_over_budget": peak / budget, "sampled_fraction": kept / seen if seen else None,
            "sample_bytes": kept, "wall_s": wall, "read_mb_s": total / wall / 1e6, "stages_s": stages,
            "shares": {r[0]: {"corpus": r[1] / seen, "sample": r[2] / kept if kept else None} for r in rows},
        }
        print(f"corpus     {total / 1e9:.2f} GB of text ({total / budget:.1f}x the budget), {disk / 1e9:.2f} GB on disk")
        print(f"budget     {budget / 2**20:,.0f} MiB; peak RSS of the process tree {peak / 2**20:,.0f} MiB "
              f"({peak / budget:.2f}x the budget), reached {t_peak:.1f}s into the run")
        print(f"sample     {kept / 1e6:,.0f} MB of {seen / 1e6:,.0f} MB ({figures['sampled_fraction']:.3%})")
        for src, s in figures["shares"].items():
            print(f"  {src:<8} corpus {s['corpus']:.2%}   sample {s['sample']:.2%}   "
                  f"diff {abs(s['corpus'] - s['sample']) * 100:.2f} pt")
        print(f"wall       {wall:.1f}s; stages " + ", ".join(f"{k} {v:.1f}s" for k, v in stages.items()))
        if stages.get("sample"):
            t_sample, t_count = stages["sample"], max(stages.get("count", 0.0), 1e-9)
            sample_mb_s, count_mb_s = total / t_sample / 1e6, kept / t_count / 1e6
            figures.update(sample_mb_s=sample_mb_s, sample_disk_mb_s=disk / t_sample / 1e6, count_mb_s=count_mb_s)
            ref = COUNT_MB_S_REFERENCE["2 threads"]
            print(f"throughput sampling {sample_mb_s:,.0f} MB/s of corpus text ({disk / t_sample / 1e6:,.0f} MB/s of "
                  f"Parquet); counting {count_mb_s:,.0f} MB/s of sample text here, {ref} MB/s on the benchmark "
                  f"corpus: sampling is {sample_mb_s / ref:.1f}x faster per byte than counting")
            # A 1 TB corpus: the sampling pass reads all of it; counting and merging only see the
            # sample, whose size is set by the budget, not by the corpus.
            rest = sum(v for k, v in stages.items() if k != "sample")
            t_tb = TB / (sample_mb_s * 1e6)
            figures["one_tb"] = {"sample_s": t_tb, "rest_s": rest, "count_all_s": TB / (ref * 1e6)}
            print(f"1 TB       sampling {t_tb / 3600:.1f} h at this rate, then the rest of the run as here "
                  f"({rest:.0f}s: the sample does not grow with the corpus): the sampling pass bounds a "
                  f"1 TB run; counting all of it instead would take {TB / (ref * 1e6) / 3600:.1f} h")
        if args.cold:
            env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp / "numba-cold")}
            shutil.rmtree(tmp / "numba-cold", ignore_errors=True)
            cold = watch([*cmd[:cmd.index("--out") + 1], str(tmp / "out-cold"), *cmd[cmd.index("--out") + 2:]], env=env)
            if cold["exit"] != 0:
                sys.exit(f"scale: toktok failed on a first run ({cold['exit']}):\n{cold['tail']}")
            same = all((out / f).read_bytes() == (tmp / "out-cold" / f).read_bytes()
                       for f in ("tokenizer.tiktoken", "tokenizer.json"))
            figures["cold"] = {"wall_s": cold["wall_s"], "peak_rss": cold["peak_rss"],
                               "peak_over_budget": cold["peak_rss"] / budget, "same_tokenizer": same}
            print(f"first run  empty kernel cache: peak RSS {cold['peak_rss'] / 2**20:,.0f} MiB "
                  f"({cold['peak_rss'] / budget:.2f}x the budget), wall {cold['wall_s']:.1f}s; "
                  f"tokenizer {'the same' if same else 'DIFFERENT'} as the warm run's")
        if args.hf:
            print(f"HF         running BpeTrainer (vocab {256 + args.merges}), stopped after {args.hf_timeout:.0f}s ...",
                  flush=True)
            hf = run_hf(corpus_dir, 256 + args.merges, args.hf_timeout, tmp)
            figures["hf"] = {k: hf[k] for k in ("exit", "timed_out", "wall_s", "peak_rss")}
            state = (f"did not finish in {args.hf_timeout:.0f}s (stopped)" if hf["timed_out"]
                     else f"exit {hf['exit']} after {hf['wall_s']:.0f}s")
            print(f"HF         {state}; peak RSS of its process tree {hf['peak_rss'] / 2**20:,.0f} MiB "
                  f"({hf['peak_rss'] / budget:.2f}x the budget)")
            if not hf["timed_out"] and hf["exit"] != 0:
                print(hf["tail"])
        history.record(args, "scale", figures)
        if args.json:
            Path(args.json).write_text(json.dumps(figures, indent=1))
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
