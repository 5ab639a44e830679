"""Count once, train many (issue 51): a ladder of sizes from one run vs one run at the largest, and
training from word counts vs training on the text, on the bench corpus.

Each row is ``toktok`` as the command runs it (a subprocess, ``python -m toktok``, or ``-m
toktok.cli`` in a checkout without ``toktok/__main__.py``: interpreter start, imports, count,
merge, export, parity check, insight, the process's end), the kernels built ahead, interleaved ``--repeat`` times;
the median wall is shown with the range. Rows: ``one`` (``--vocab-size TOP``), ``ladder``
(``--ladder`` of the sizes, up to TOP: every rung written and checked), ``count`` (``toktok count``
of the corpus, once per repeat), ``counts`` (``train --word-counts`` of that table at TOP). The
goals: ladder ≤ 1.25× one, counts ≤ 0.5× one. Every run is checked: the ladder's largest and the
counts run write the one run's files byte for byte. ``--rows one,counts`` measures only those
(``count`` runs once, untimed, when its row is left out: ``counts`` needs its table);
``--against DIR`` runs each chosen row a second time, interleaved, with the toktok of another
checkout (``ROW@DIR``'s name; e.g. ``git archive main | tar -x -C /tmp/main``: before and after).
Per run it keeps the load average (1 min) at its start, its CPU seconds (user + system, its
child processes included: less moved by other tenants than the wall) and the stage times its run file records
(``stages``: count, merge, export, insight, verify, ...; ``rest`` = the wall less their sum: the
interpreter's start, imports, planning, opening the run file, publishing, the process's end, less
the insight step's time beside the export and the check, which the sum counts twice), and
prints the median of each. The children run with bytecode allowed (PYTHONDONTWRITEBYTECODE taken
out of their environment), as users have .pyc files.
The run is appended to ``bench/history.jsonl`` (``--label``, ``--no-history``: ``bench/history.py``).
Example: ``python bench/ladder.py --data ../shared/corpus/*.parquet --repeat 3``.
"""
from __future__ import annotations

import argparse
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
from run import corpus_files  # noqa: E402
FILES = ("tokenizer.json", "tokenizer.tiktoken")


ROWS = ("one", "ladder", "count", "counts")


def _toktok(args: list[str], env: dict, cpu: list[float] | None = None, cwd: Path | None = None) -> float:
    """The wall seconds of ``toktok ARGS``; its CPU seconds (user + system, its child processes
    included) appended to ``cpu``: less moved by the other tenants' load than the wall. Run in
    ``cwd`` (the scratch folder): ``python -m`` imports from the current folder first, so a run
    from inside a checkout would take that checkout's toktok whatever ``PYTHONPATH`` says."""
    import resource

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    entry = "toktok" if (Path(env["PYTHONPATH"]) / "toktok" / "__main__.py").is_file() else "toktok.cli"
    r = subprocess.run([sys.executable, "-m", entry, *args], env=env, capture_output=True, text=True, cwd=cwd)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if r.returncode != 0:
        raise SystemExit(f"toktok {' '.join(args)} failed:\n{r.stdout}\n{r.stderr}")
    if cpu is not None:
        cpu.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
    return wall


def _stages(out: Path) -> dict[str, float]:
    """The stage times the run file in ``out`` records (its ``stages`` table)."""
    import duckdb

    con = duckdb.connect(str(out / "run.duckdb"), read_only=True)
    try:
        return {k: v for k, v in con.execute("select stage, seconds from stages").fetchall()}
    finally:
        con.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", nargs="+", default=corpus_files())
    ap.add_argument("--sizes", default="8192,16384,32768,65536")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--rows", default=",".join(ROWS), help=f"the rows to measure, of {','.join(ROWS)}")
    ap.add_argument("--against", default=None, metavar="DIR", help="also run the rows with the toktok of this "
                    "checkout, interleaved (its rows named ROW@against)")
    ap.add_argument("--json", default=None, help="also write the figures to this file")
    history.options(ap)
    a = ap.parse_args()
    rows = [r for r in ROWS if r in a.rows.split(",")]
    top = a.sizes.split(",")[-1]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # a user's toktok loads from .pyc files
    scratch = Path(tempfile.mkdtemp(prefix="toktok-ladder-"))
    a.data = [str(Path(d).resolve()) for d in a.data]  # (the runs' folder is the scratch one)
    common = ["--no-hardcoded", "--force", "-q"]
    counts = scratch / "counts.parquet"
    commands = {
        "one": (["train", *a.data, "--out", str(scratch / "one"), "--vocab-size", top, *common], scratch / "one"),
        "ladder": (["train", *a.data, "--out", str(scratch / "ladder"), "--ladder", a.sizes, *common],
                   scratch / "ladder"),
        "count": (["count", *a.data, "--out", str(counts), "--force"], None),
        "counts": (["train", "--word-counts", str(counts), "--out", str(scratch / "counts"), "--vocab-size", top,
                    *common], scratch / "counts"),
    }
    runs = [(k, k, env) for k in rows]
    if a.against:
        other = {**env, "PYTHONPATH": str(Path(a.against).resolve())}
        runs += [(f"{k}@against", k, other) for k in rows if k != "count"]
    walls: dict[str, list[float]] = {name: [] for name, _, _ in runs}
    stages: dict[str, list[dict]] = {name: [] for name, _, _ in runs}
    loads: dict[str, list[float]] = {name: [] for name, _, _ in runs}
    cpus: dict[str, list[float]] = {name: [] for name, _, _ in runs}
    load = os.getloadavg()
    try:
        _toktok(["train", str(ROOT / "data_fixtures" / "corpus" / "sample.parquet"), "--out", str(scratch / "warm"),
                 "--merges", "50", *common], env, cwd=scratch)
        if "counts" in rows and "count" not in rows:
            _toktok(commands["count"][0], env, cwd=scratch)
        for _ in range(a.repeat):  # interleaved, so that a busy minute touches every row alike
            for name, k, run_env in runs:
                args, out = commands[k]
                loads[name].append(os.getloadavg()[0])
                wall = _toktok(args, run_env, cpus[name], cwd=scratch)
                walls[name].append(wall)
                if out is not None:
                    st = _stages(out)
                    stages[name].append({**st, "rest": wall - sum(st.values())})
        for f in FILES:
            if "one" in rows:
                one = (scratch / "one" / f).read_bytes()
                for k in ("ladder", "counts"):
                    if k in rows:
                        assert (scratch / k / f).read_bytes() == one, (k, f)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    med = {k: statistics.median(v) for k, v in walls.items()}
    med_stages = {k: {s: statistics.median(r.get(s, 0.0) for r in v) for s in v[0]} for k, v in stages.items() if v}
    out = {"date": time.strftime("%Y-%m-%d"), "data": a.data, "sizes": a.sizes, "repeat": a.repeat, "rows": rows,
           "load_at_start": load, "load_at_end": os.getloadavg(), "walls": walls, "median": med,
           "loads": loads, "cpu": cpus, "median_cpu": {k: statistics.median(v) for k, v in cpus.items()},
           "stages": stages, "median_stages": med_stages, "same_files": "one" in rows}
    if "one" in rows and "ladder" in rows:
        out["ladder_vs_one"] = med["ladder"] / med["one"]
    if "one" in rows and "counts" in rows:
        out["counts_vs_one"] = med["counts"] / med["one"]
        if a.against:
            out["against"] = a.against
            out["against_counts_vs_one"] = med["counts@against"] / med["one@against"]
    print(f"load {load[0]:.2f} at start, {out['load_at_end'][0]:.2f} at end; median of {a.repeat}, wall s:")
    for k, v in walls.items():
        st = med_stages.get(k)
        shown = ", ".join(f"{s} {x:.2f}" for s, x in st.items() if x >= 0.005) if st else ""
        print(f"  {k:15s} {med[k]:7.2f}  ({min(v):.2f}-{max(v):.2f}; load {min(loads[k]):.1f}-{max(loads[k]):.1f}; "
              f"CPU {out['median_cpu'][k]:.2f} s)"
              + (f"  stages: {shown}" if shown else ""))
    if "ladder_vs_one" in out:
        print(f"  ladder / one = {out['ladder_vs_one']:.2f}x (goal <= 1.25)")
    if "counts_vs_one" in out:
        print(f"  counts / one = {out['counts_vs_one']:.2f}x (goal <= 0.5; CPU "
              f"{out['median_cpu']['counts'] / out['median_cpu']['one']:.2f}x)"
              + (f"; with {a.against}: {out['against_counts_vs_one']:.2f}x" if a.against else ""))
    if out["same_files"]:
        print("  the ladder's largest and the counts run: the one run's files, byte for byte")
    if a.json:
        Path(a.json).write_text(json.dumps(out, indent=1) + "\n")
    history.record(a, "ladder", out, load=load[0])


if __name__ == "__main__":
    main()
