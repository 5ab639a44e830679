"""Time training on long runs of one character (issue 13: a 1 MB line of 'a' took minutes).

    python bench/probes/long_runs.py [--mb 1] [--merges 3000] [--only a,dash,equals,spaces,base64,mix]

Each corpus is ``data_fixtures/corpus/notes.txt`` plus one line of ``--mb`` MB (``mix``: all five lines
between pieces of notes.txt, with 300 shorter rules of random lengths). Each run is a fresh
``toktok train`` process (after one untimed run that fills Numba's cache); prints wall seconds,
toktok's stage seconds (count, merge, export, verify, insight) and the process's peak RSS.
"""
from __future__ import annotations

import argparse
import base64
import json
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: the history
import history  # noqa: E402
NOTES = ROOT / "data_fixtures" / "corpus" / "notes.txt"


def lines(n: int) -> dict[str, str]:
    blob = base64.b64encode(random.Random(1).randbytes(n * 3 // 4 + 3)).decode()[:n]
    return {"a": "a" * n, "dash": "-" * n, "equals": "=" * n, "spaces": "x" + " " * n + "y", "base64": blob}


def corpus(kind: str, n: int) -> str:
    notes = NOTES.read_text()
    ls = lines(n)
    if kind != "mix":
        return notes + "\n" + ls[kind] + "\n"
    rng = random.Random(5)
    extra = [rng.choice("=-*#~ ") * rng.randint(1, 5000) for _ in range(300)]
    body = []
    for i, ln in enumerate(list(ls.values()) + extra):
        body += [notes[(i * 2000) % len(notes):][:2000], ln]
    return "\n".join(body) + "\n"


def run(src: Path, out: Path, merges: int) -> tuple[float, dict, int]:
    code = ("import resource, subprocess, sys; r = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL); "
            "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss); sys.exit(r.returncode)")
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, "-c", code, sys.executable, "-m", "toktok.cli", "train", str(src),
                        "--out", str(out), "--merges", str(merges), "--force", "-q"], capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if p.returncode != 0:
        raise SystemExit(f"long_runs: {src.name} failed:\n{p.stderr}")
    import duckdb

    con = duckdb.connect(str(out / "run.duckdb"), read_only=True)
    stages = dict(con.execute("SELECT stage, seconds FROM stages").fetchall())
    con.close()
    return wall, stages, int(p.stdout.split()[-1]) >> 10


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mb", type=float, default=1.0, help="length of each long line, in MB (2^20 chars)")
    ap.add_argument("--merges", type=int, default=3000)
    ap.add_argument("--only", default="a,dash,equals,spaces,base64,mix")
    ap.add_argument("--json", help="write the figures here")
    history.options(ap)
    a = ap.parse_args()
    n = int(a.mb * (1 << 20))
    rows = {}
    with tempfile.TemporaryDirectory() as d:
        d = Path(d)
        (d / "warm.txt").write_text(NOTES.read_text()[:5000])
        run(d / "warm.txt", d / "warm", 50)  # Numba's cache
        print(f"{'corpus':8} {'MB':>5} {'wall s':>7} {'count':>6} {'merge':>6} {'export':>6} {'verify':>6} "
              f"{'insight':>7} {'RSS MB':>7}")
        for kind in a.only.split(","):
            src = d / f"{kind}.txt"
            src.write_text(corpus(kind, n))
            wall, st, rss = run(src, d / f"out-{kind}", a.merges)
            rows[kind] = {"wall": wall, "stages": st, "peak_rss_mb": rss, "bytes": src.stat().st_size}
            print(f"{kind:8} {src.stat().st_size / 1e6:5.1f} {wall:7.2f} " + " ".join(
                f"{st.get(k, 0):{w}.2f}" for k, w in (("count", 6), ("merge", 6), ("export", 6), ("verify", 6),
                                                       ("insight", 7))) + f" {rss:7d}")
    history.record(a, "long_runs", rows)
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
