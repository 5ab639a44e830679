"""Count once, train many (issue 51): a ladder of sizes from one run vs one run at the largest, and
training from word counts vs training on the text, on the bench corpus.

Each row is ``toktok`` as the command runs it (a subprocess: interpreter start, imports, count,
merge, export, parity check, insight), the kernels built ahead, interleaved ``--repeat`` times;
the median wall is shown with the range. Rows: ``one`` (``--vocab-size TOP``), ``ladder``
(``--ladder`` of the sizes, up to TOP: every rung written and checked), ``count`` (``toktok count``
of the corpus, once per repeat), ``counts`` (``train --word-counts`` of that table at TOP). The
goals: ladder ≤ 1.25× one, counts ≤ 0.5× one. Every run is checked: the ladder's largest and the
counts run write the one run's files byte for byte.
The run is appended to ``bench/history.jsonl`` (``--label``, ``--no-history``: ``bench/history.py``).
Example: ``python bench/ladder.py --data ../shared/corpus/*.parquet --repeat 3``.
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
import history  # noqa: E402
FILES = ("tokenizer.json", "tokenizer.tiktoken")


def _toktok(args: list[str], env: dict) -> float:
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "toktok.cli", *args], env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if r.returncode != 0:
        raise SystemExit(f"toktok {' '.join(args)} failed:\n{r.stdout}\n{r.stderr}")
    return wall


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", nargs="+", default=sorted(glob.glob(str(ROOT.parent.parent / "shared/corpus/*.parquet"))
                                                       or glob.glob(str(ROOT.parent / "shared/corpus/*.parquet"))))
    ap.add_argument("--sizes", default="8192,16384,32768,65536")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", default=None, help="also write the figures to this file")
    history.options(ap)
    a = ap.parse_args()
    top = a.sizes.split(",")[-1]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    scratch = Path(tempfile.mkdtemp(prefix="toktok-ladder-"))
    common = ["--no-hardcoded", "--force", "-q"]
    walls: dict[str, list[float]] = {"one": [], "ladder": [], "count": [], "counts": []}
    load = os.getloadavg()
    try:
        _toktok(["train", str(ROOT / "data_fixtures" / "corpus" / "sample.parquet"), "--out", str(scratch / "warm"), "--merges", "50", *common], env)
        for _ in range(a.repeat):
            walls["one"].append(_toktok(["train", *a.data, "--out", str(scratch / "one"), "--vocab-size", top, *common], env))
            walls["ladder"].append(_toktok(["train", *a.data, "--out", str(scratch / "ladder"), "--ladder", a.sizes,
                                            *common], env))
            counts = scratch / "counts.parquet"
            walls["count"].append(_toktok(["count", *a.data, "--out", str(counts), "--force"], env))
            walls["counts"].append(_toktok(["train", "--word-counts", str(counts), "--out", str(scratch / "counts"),
                                            "--vocab-size", top, *common], env))
        for f in FILES:
            one = (scratch / "one" / f).read_bytes()
            assert (scratch / "ladder" / f).read_bytes() == one and (scratch / "counts" / f).read_bytes() == one, f
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    med = {k: statistics.median(v) for k, v in walls.items()}
    out = {"date": time.strftime("%Y-%m-%d"), "data": a.data, "sizes": a.sizes, "repeat": a.repeat,
           "load_at_start": load, "load_at_end": os.getloadavg(), "walls": walls, "median": med,
           "ladder_vs_one": med["ladder"] / med["one"], "counts_vs_one": med["counts"] / med["one"],
           "same_files": True}
    print(f"load {load[0]:.2f} at start, {out['load_at_end'][0]:.2f} at end; median of {a.repeat}, wall s:")
    for k, v in walls.items():
        print(f"  {k:7s} {med[k]:7.2f}  ({min(v):.2f}-{max(v):.2f})")
    print(f"  ladder / one = {out['ladder_vs_one']:.2f}x (goal <= 1.25), counts / one = {out['counts_vs_one']:.2f}x "
          "(goal <= 0.5); the ladder's largest and the counts run: the one run's files, byte for byte")
    if a.json:
        Path(a.json).write_text(json.dumps(out, indent=1) + "\n")
    history.record(a, "ladder", out, load=load[0])


if __name__ == "__main__":
    main()
