"""Local engine vs --engine ray on the same corpus: byte-identical outputs, wall and stage times.

    python bench/probes/ray_compare.py [--data GLOB...] [--merges 8000] [--sample 60MB] [--cpus N]
                                [--address ADDR] [--repeat N] [--json OUT]

Runs ``toktok train`` four times in subprocesses, one after the other: (a) the full corpus and
(b) a phase text budget of ``--sample`` (a seeded sample: every file is read, only the sample is
counted), each with the local engine and with ``--engine ray``. The Ray runs join one cluster
started here first (a private, loopback-only one with ``--cpus`` CPUs, default all cores; its
start-up time is printed on its own), or ``--address`` to use an existing one. Checks that each
Ray run's word table, inputs and tokenizer files equal the local run's, and prints wall time and
the run files' stage times (count includes joining the cluster and its workers' start-up);
``--repeat N`` runs each N times, alternating engines, and keeps the fastest run of each.
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
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: the history
import history  # noqa: E402
sys.path.insert(0, str(ROOT))

OUTPUTS = ("tokenizer.tiktoken", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")


def run(cmd: list[str], env: dict) -> float:
    t0 = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT)
    if r.returncode != 0:
        sys.exit(f"ray_compare: {' '.join(cmd)} failed ({r.returncode}):\n{(r.stdout + r.stderr)[-3000:]}")
    return time.perf_counter() - t0


def facts(out: Path) -> dict:
    import duckdb

    con = duckdb.connect(str(out / "run.duckdb"), read_only=True)
    try:
        return {
            "words": con.sql("select phase, word, count, tokens from words order by phase, word").arrow().read_all(),
            "inputs": con.sql("select path, phase, docs, text_bytes, docs_seen, bytes_seen from inputs order by all").fetchall(),
            "stages": dict(con.sql("select stage, seconds from stages").fetchall()),
            "files": {n: (out / n).read_bytes() for n in OUTPUTS},
        }
    finally:
        con.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", nargs="+", default=[str(ROOT.parent / "shared" / "corpus" / "*.parquet")])
    ap.add_argument("--merges", type=int, default=8000)
    ap.add_argument("--sample", default="60MB", help="the phase text budget of run (b)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--cpus", type=int, default=0, help="CPUs of the private cluster (0 = all cores)")
    ap.add_argument("--address", help="join this Ray cluster instead of starting one")
    ap.add_argument("--repeat", type=int, default=1, help="runs of each; the fastest is kept")
    ap.add_argument("--json", help="write the figures here")
    history.options(ap)
    args = ap.parse_args()

    files = sorted({f for pat in args.data for f in glob.glob(pat)})
    if not files:
        sys.exit(f"ray_compare: no files match {args.data}")
    tmp = Path(tempfile.mkdtemp(prefix="toktok-raycmp-"))
    exe = [sys.executable, "-m", "toktok.cli", "train"]
    env = dict(os.environ)
    ray = None
    try:
        # fill Numba's cache first: a fresh checkout would otherwise pay the JIT compile in run 1
        run(exe + [str(ROOT / "data_fixtures" / "corpus" / "notes.txt"), "--out", str(tmp / "warm"), "--merges", "50", "-q"], env)
        address = args.address
        startup = None
        if address is None:
            import ray as ray_mod

            from toktok.count.ray import start_local

            t0 = time.perf_counter()
            ctx = start_local(args.cpus or None)
            startup = time.perf_counter() - t0
            ray = ray_mod
            address = ctx.address_info["address"]
            env.setdefault("RAY_AUTH_MODE", os.environ.get("RAY_AUTH_MODE", "token"))
            print(f"ray_compare: private cluster of {int(ray.cluster_resources()['CPU'])} CPUs at {address}, "
                  f"started in {startup:.1f}s")
        cfg = tmp / "sample.yaml"
        cfg.write_text(json.dumps({  # YAML is a superset of JSON
            "output": str(tmp / "PLACEHOLDER" / "tokenizer.tiktoken"), "seed": args.seed,
            "phases": [{"name": "main", "merges": args.merges, "budget": args.sample,
                        "sources": [{"file": f} for f in files]}],
        }))
        modes = {
            "full": files + ["--merges", str(args.merges), "--seed", str(args.seed)],
            "sampled": ["--config", str(cfg)],
        }
        figures: dict = {"files": files, "merges": args.merges, "sample": args.sample, "ray_startup_s": startup,
                         "address": args.address, "runs": {}}
        text_bytes = {}
        for mode, opts in modes.items():
            res: dict = {}
            for _ in range(args.repeat):
                for engine in ("local", "ray"):
                    out = tmp / f"{mode}-{engine}"
                    extra = ["--engine", "ray", "--ray-address", address] if engine == "ray" else []
                    wall = run(exe + opts + ["--out", str(out), "-q", "--force"] + extra, env)
                    got = {**facts(out), "wall": wall}
                    print(f"ray_compare: {mode:<8} {engine:<5} wall {wall:6.1f}s  " + ", ".join(
                        f"{k} {v:.1f}s" for k, v in got["stages"].items()), flush=True)
                    if engine in res and not res[engine]["words"].equals(got["words"]):
                        sys.exit(f"ray_compare: {mode} {engine}: a rerun gave another word table")
                    if engine not in res or wall < res[engine]["wall"]:
                        res[engine] = got
            a, b = res["local"], res["ray"]
            same = {"words": a["words"].equals(b["words"]), "inputs": a["inputs"] == b["inputs"],
                    **{n: a["files"][n] == b["files"][n] for n in OUTPUTS}}
            if not all(same.values()):
                sys.exit(f"ray_compare: {mode}: outputs differ: {same}")
            text_bytes[mode] = (sum(r[3] for r in a["inputs"]), sum(r[5] for r in a["inputs"]))
            figures["runs"][mode] = {e: {"wall_s": r["wall"], "stages_s": r["stages"]} for e, r in res.items()}
            figures["runs"][mode]["identical"] = True
            figures["runs"][mode]["words"] = a["words"].num_rows
            figures["runs"][mode]["text_bytes_counted"], figures["runs"][mode]["text_bytes_read"] = text_bytes[mode]

        print()
        print("| run | engine | wall s | sample s | count s | merge s | counted MB | count MB/s |")
        print("|---|---|---:|---:|---:|---:|---:|---:|")
        for mode, r in figures["runs"].items():
            counted = r["text_bytes_counted"]
            for engine in ("local", "ray"):
                st = r[engine]["stages_s"]
                smp = f"{st['sample']:.1f}" if st.get("sample") else "—"
                print(f"| {mode} | {engine} | {r[engine]['wall_s']:.1f} | {smp} | {st['count']:.1f} | "
                      f"{st['merge']:.1f} | {counted / 1e6:,.1f} | {counted / st['count'] / 1e6:,.0f} |")
        print("\nidentical word tables, inputs and tokenizer files: yes (both runs)")
        history.record(args, "ray_compare", figures)
        if args.json:
            Path(args.json).write_text(json.dumps(figures, indent=1))
    finally:
        if ray is not None:
            ray.shutdown()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
