#!/usr/bin/env python
"""Probe: the merge stage's kernels compiled ahead into an extension module, against Numba's cache.

    python bench/aot_probe.py [--repeat 3] [--json OUT]

A run that takes the compiled merge loop pays Numba's import and its first call on every start
(0.4-0.5 s of the README demo's 1.6 s). This probe measures what compiling the kernels ahead
into an ordinary extension module (``numba.pycc``; a C compiler at build time) would give:

1. trains the README demo once (``data_fixtures/``, 2,000 merges) and keeps its word table;
2. learns the same 2,000 merges once in this process, and lists the kernels ``learn_merges``
   called from Python with their signatures (return types included);
3. builds one extension module holding them (``numba.pycc.CC``), timed;
4. in fresh processes, alternately: import toktok and learn the merges with the kernels from
   Numba's cache (``jit``), or with the extension's functions in their place (``aot``); each
   reports its wall from start, peak RSS and whether Numba was imported, and the two results are
   compared (tokens, merges, tokens per word).

It changes nothing in toktok: the extension lives in a scratch folder. See docs/performance.md.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
MERGES = 2000

CHILD = r"""
import sys, time, json
t0 = time.perf_counter()
mode, scratch = sys.argv[1], sys.argv[2]
import numpy as np, pyarrow.parquet as pq
words_table = pq.read_table(scratch + "/words.parquet")
words = words_table.column("word").combine_chunks()
counts = words_table.column("count").to_numpy()
counts.setflags(write=False)
from toktok.merge import learn_merges
from toktok.vocab import Vocab
if mode == "aot":
    import importlib
    sys.path.insert(0, scratch)
    ext = importlib.import_module("toktok_aot_probe")
    from toktok._kernels import Kernel
    names = json.load(open(scratch + "/exports.json"))  # "module.kernel" -> export name
    for name, m in list(sys.modules.items()):
        if name.startswith("toktok") and m is not None:
            for k, v in list(vars(m).items()):
                if isinstance(v, Kernel):
                    full = v.py_func.__module__ + "." + v.py_func.__qualname__
                    if full in names:
                        setattr(m, k, getattr(ext, names[full]))
r = learn_merges(words, counts, Vocab.base(), int(sys.argv[3]))
wall = time.perf_counter() - t0
np.savez(scratch + "/" + mode + ".npz", left=r.left, right=r.right, token=r.token, count=r.count,
         word_tokens=r.word_tokens, tokens=np.array([t.hex() for t in r.vocab.tokens]))
# VmHWM, not ru_maxrss: after fork and exec that holds the parent's peak too
hwm = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM:"))
print(json.dumps({"wall_s": wall, "peak_rss_mb": hwm / 1024, "numba_imported": "numba" in sys.modules}))
"""


def demo_words(scratch: Path) -> None:
    """The README demo's word table (``make demo``'s training) as ``scratch/words.parquet``."""
    import duckdb
    import pyarrow.parquet as pq

    out = scratch / "demo"
    subprocess.run([sys.executable, "-c", "from toktok.cli import main; main()", "train", str(REPO / "data_fixtures"),
                    "--out", str(out), "--merges", str(MERGES), "--special-token", "<|endoftext|>", "--force", "-q"],
                   check=True, capture_output=True)
    con = duckdb.connect(str(out / "run.duckdb"), read_only=True)
    pq.write_table(con.sql("SELECT word, count FROM words ORDER BY word").to_arrow_table(), scratch / "words.parquet")
    con.close()


def called_kernels(scratch: Path) -> list[tuple[str, object, object]]:
    """(``module.kernel``, dispatcher, signature) of every kernel ``learn_merges`` calls from Python."""
    import numpy as np
    import pyarrow.parquet as pq

    from toktok.merge import learn_merges
    from toktok.vocab import Vocab

    t = pq.read_table(scratch / "words.parquet")
    counts = t.column("count").to_numpy()
    counts.setflags(write=False)
    learn_merges(t.column("word").combine_chunks(), np.asarray(counts), Vocab.base(), MERGES)
    found = {}
    for name, m in list(sys.modules.items()):
        if not name.startswith("toktok") or m is None:
            continue
        for v in vars(m).values():
            hits = getattr(v, "_cache_hits", None)
            if hits is not None and (sum(hits.values()) or sum(v._cache_misses.values())):
                full = f"{v.py_func.__module__}.{v.py_func.__qualname__}"
                found[full] = v
    return [(full, d, cres.signature) for full, d in sorted(found.items()) for cres in d.overloads.values()]


def build(scratch: Path, kernels) -> tuple[float, dict[str, str]]:
    """The extension module ``toktok_aot_probe`` in ``scratch``; seconds, export names."""
    from numba.pycc import CC

    cc = CC("toktok_aot_probe")
    cc.output_dir = str(scratch)
    cc.target_cpu = "host"  # as the JIT compiles
    names = {}
    for i, (full, d, sig) in enumerate(kernels):
        names[full] = f"k{i}_{full.rsplit('.', 1)[1].lstrip('_')}"
        cc.export(names[full], sig)(d.py_func)
    t0 = time.perf_counter()
    cc.compile()
    (scratch / "exports.json").write_text(json.dumps(names))
    return time.perf_counter() - t0, names


def child(mode: str, scratch: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    r = subprocess.run([sys.executable, "-c", CHILD, mode, str(scratch), str(MERGES)], capture_output=True,
                       text=True, env=env, cwd=tempfile.gettempdir())
    if r.returncode:
        raise SystemExit(f"aot_probe: the {mode} process failed:\n{r.stderr[-2000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def same(scratch: Path) -> bool:
    import numpy as np

    a, b = np.load(scratch / "jit.npz"), np.load(scratch / "aot.npz")
    return all(a[k].tolist() == b[k].tolist() for k in a.files)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", metavar="OUT")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="toktok-aot-") as tmp:
        scratch = Path(tmp)
        demo_words(scratch)
        kernels = called_kernels(scratch)
        build_s, names = build(scratch, kernels)
        runs = {"jit": [], "aot": []}
        for _ in range(a.repeat):
            for mode in runs:
                runs[mode].append(child(mode, scratch))
        fig = {
            "date": time.strftime("%Y-%m-%d"), "load_start": os.getloadavg()[0], "merges": MERGES,
            "kernels": sorted(names), "build_s": build_s, "same_result": same(scratch),
            **{mode: {"wall_s": statistics.median(r["wall_s"] for r in rs),
                      "runs_wall_s": [r["wall_s"] for r in rs],
                      "peak_rss_mb": statistics.median(r["peak_rss_mb"] for r in rs),
                      "numba_imported": any(r["numba_imported"] for r in rs)} for mode, rs in runs.items()},
        }
    print(f"kernels {', '.join(fig['kernels'])}: built in {build_s:.1f} s; the same result: {fig['same_result']}")
    for mode in runs:
        f = fig[mode]
        print(f"{mode}: start to {MERGES:,} merges learned {f['wall_s']:.2f} s (runs "
              f"{', '.join(f'{x:.2f}' for x in f['runs_wall_s'])}), peak RSS {f['peak_rss_mb']:.0f} MB, "
              f"Numba imported: {f['numba_imported']}")
    if a.json:
        Path(a.json).write_text(json.dumps(fig, indent=2) + "\n")
        print(f"aot_probe: wrote {a.json}", file=sys.stderr)


if __name__ == "__main__":
    main()
