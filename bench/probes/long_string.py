"""Peak memory of one long str in memory under a budget (issue 47: one 200 MB string under
``budget="512MB"`` peaked at 1.6x the budget).

    python bench/probes/long_string.py [--mb 200] [--budget 512MB] [--merges 2000]

The str is ``--mb`` MB of the shared corpus' text (its documents joined by newlines, repeated as
needed). A fresh process builds it, then runs ``toktok.train([doc], budget=...)``, and prints its
peak RSS (``VmHWM``, reset once the str is built) beside the RSS it held before the run (the caller's str and the
interpreter), both against the budget. (The budget covers what the run holds, not the caller's
own str: docs/scale.md.)
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: the history
import history  # noqa: E402

CORPUS = next((p / "shared" / "corpus" for p in ROOT.parents if (p / "shared" / "corpus").is_dir()),
              ROOT.parent / "shared" / "corpus")  # ../shared/corpus beside the repo (or a worktree's)

CHILD = r"""
import json, sys
mb, budget, merges, out, base = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5]
text = open(base, encoding="utf-8").read().encode("ascii", "ignore").decode()  # one byte a char, as the issue's str
n = mb * 1000 * 1000
doc = (text * (n // len(text) + 1))[:n]
del text
def status(key):
    return next(int(ln.split()[1]) * 1024 for ln in open("/proc/self/status") if ln.startswith(key + ":"))
open("/proc/self/clear_refs", "w").write("5")  # the peak so far (building the str) is not the run's
before = status("VmRSS")
import toktok
toktok.train([[doc]], out=out, merges=merges, budget=budget, progress=None)
print(json.dumps({"doc_mb": len(doc) / 1e6, "before_mb": before / 1e6, "peak_mb": status("VmHWM") / 1e6}))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mb", type=int, default=200, help="length of the str, in MB (ASCII-heavy text: ~1 byte a char)")
    ap.add_argument("--budget", default="512MB")
    ap.add_argument("--merges", type=int, default=2000)
    ap.add_argument("--data", default=str(CORPUS), help="a folder of Parquet files with a text column")
    history.options(ap)
    a = ap.parse_args()
    from toktok.options import parse_size

    budget = parse_size(a.budget)
    import pyarrow.parquet as pq

    files = sorted(Path(a.data).glob("**/*.parquet"), key=lambda f: f.name != "en.parquet")
    texts, size = [], 0
    for b in pq.ParquetFile(files[0]).iter_batches(batch_size=256, columns=["text"]):
        texts += b.column(0).to_pylist()
        size += b.column(0).nbytes
        if size > 20 << 20:
            break
    with tempfile.TemporaryDirectory() as d:
        base = Path(d) / "base.txt"  # the child reads ~20 MB of text and repeats it: it holds little else
        base.write_text("\n".join(texts), encoding="utf-8")
        p = subprocess.run([sys.executable, "-c", CHILD, str(a.mb), a.budget, str(a.merges), str(Path(d) / "out"),
                            str(base)], capture_output=True, text=True, cwd=d)  # (not a toktok/ where this runs)
    if p.returncode != 0:
        raise SystemExit(f"long_string: the run failed:\n{p.stderr[-3000:]}")
    row = json.loads(p.stdout.strip().splitlines()[-1])
    row["budget_mb"] = budget / 1e6
    row["peak_x_budget"] = row["peak_mb"] * 1e6 / budget
    row["run_x_budget"] = (row["peak_mb"] - row["doc_mb"]) * 1e6 / budget
    print(f"str {row['doc_mb']:.0f} MB, budget {a.budget}: held before the run {row['before_mb']:.0f} MB, "
          f"peak {row['peak_mb']:.0f} MB = {row['peak_x_budget']:.2f}x the budget "
          f"({row['run_x_budget']:.2f}x without the caller's str)")
    history.record(a, "long_string", row)


if __name__ == "__main__":
    main()
