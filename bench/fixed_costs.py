#!/usr/bin/env python
"""Benchmark: the fixed costs of a run, the part that does not grow with the corpus.

    python bench/fixed_costs.py [--repeat 5] [--only help,train_help] [--json OUT]

Rows (each a fresh process through the console entry point, its process tree's RSS sampled every
50 ms, the median of ``--repeat`` runs shown with every run beside it; the children run with
bytecode allowed, PYTHONDONTWRITEBYTECODE taken out of their environment, as users have .pyc files):

- ``toktok --help`` and ``toktok train --help``;
- a one-document corpus (one line), 10 merges: ``toktok train ONE --merges 10``, and HF
  tokenizers' ``BpeTrainer`` on the same line in a process of its own (import included);
- the README demo (``make demo``'s training) with the kernels built, and HF on the same files;
- the demo's first run after an install: an empty kernel cache (``NUMBA_CACHE_DIR`` a new folder
  each run); whether it said it compiles, and how many kernel versions it left in the cache (a run
  this small merges in Python while the loop is not cached: none).

The warm rows' cache holds every unit ``toktok.ahead`` builds, as an earlier, larger run leaves it.

The goals of issue 29 are printed beside the figures. See bench/README.md.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import history  # noqa: E402
from run import REPO, run_measured  # noqa: E402

DEMO_DATA = REPO / "data_fixtures" / "corpus"
ONE_LINE = "The quick brown fox jumps over the lazy dog, and the dog sleeps under the old tree.\n"
NOTICE = "compiling the kernels, once after an install"
GOALS = {"help": (0.2, None), "train_help": (0.2, None), "one": (0.5, 150), "demo_warm": (1.0, None), "demo_cold": (5.0, None)}

HF_CODE = """
import sys, glob
from tokenizers import Regex, Tokenizer, models, pre_tokenizers, trainers
from toktok.vocab import PATTERN
files, vocab = sys.argv[1:-1], int(sys.argv[-1])
def texts():
    import pyarrow.parquet as pq, json
    for f in files:
        if f.endswith(".parquet"):
            yield from (t for t in pq.read_table(f, columns=["text"]).column(0).to_pylist() if t)
        elif f.endswith(".jsonl"):
            yield from (json.loads(l)["text"] for l in open(f, encoding="utf-8") if l.strip())
        else:
            yield open(f, encoding="utf-8").read()
tok = Tokenizer(models.BPE())
tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(PATTERN), "isolated"),
                                             pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
trainer = trainers.BpeTrainer(vocab_size=vocab, show_progress=False,
                              initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), special_tokens=[])
tok.train_from_iterator(texts(), trainer=trainer)
"""


def _toktok(*args: str) -> list[str]:
    return [sys.executable, "-c", "from toktok.cli import main; main()", *args]


def _demo_files() -> list[str]:
    return sorted(str(p) for p in DEMO_DATA.iterdir() if p.suffix in (".parquet", ".jsonl", ".txt"))


def _rows(scratch: Path) -> dict[str, tuple[list[str], dict, str]]:
    """name -> (command, environment, what it is)."""
    one = scratch / "one.txt"
    one.write_text(ONE_LINE)
    warm_cache = scratch / "numba-warm"
    warm = {"NUMBA_CACHE_DIR": str(warm_cache)}
    demo = ["train", str(DEMO_DATA), "--merges", "2000", "--special-token", "<|endoftext|>", "--force", "-q"]
    return {
        "help": (_toktok("--help"), {}, "toktok --help"),
        "train_help": (_toktok("train", "--help"), {}, "toktok train --help"),
        "one": (_toktok("train", str(one), "--merges", "10", "--out", str(scratch / "one"), "--force", "-q"), warm,
                "one document (one line), 10 merges"),
        "one_hf": ([sys.executable, "-c", HF_CODE, str(one), "266"], {}, "HF BpeTrainer, the same line, 10 merges"),
        "demo_warm": (_toktok(*demo, "--out", str(scratch / "demo")), warm, "README demo, kernel cache warm"),
        "demo_hf": ([sys.executable, "-c", HF_CODE, *_demo_files(), "2256"], {}, "HF BpeTrainer, the demo's files"),
        "demo_cold": (_toktok(*demo[:-1], "--out", str(scratch / "demo-cold")), {},
                      "README demo, first run after an install (empty kernel cache)"),
    }


def measure(repeat: int, only: list[str] | None = None) -> dict:
    # a user's toktok, Typer and Rich load from .pyc files: without them each start compiles toktok's modules again
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    scratch = Path(tempfile.mkdtemp(prefix="toktok-fixed-"))
    rows = _rows(scratch)
    if only:
        unknown = [name for name in only if name not in rows]
        if unknown:
            raise SystemExit(f"--only {','.join(unknown)}: no such row; rows are {', '.join(rows)}")
        rows = {name: rows[name] for name in only}
    # the warm rows' cache: every kernel built ahead (as an earlier, larger run leaves it: the
    # demo's first run compiles none), then the demo and the one-line run once
    warm_env = {**os.environ, "NUMBA_CACHE_DIR": str(scratch / "numba-warm")}
    subprocess.run([sys.executable, "-m", "toktok.ahead", "all"], env=warm_env, check=True)
    for name in [n for n in ("demo_warm", "one") if n in rows]:
        cmd, env, _ = rows[name]
        run_measured(cmd, scratch / "fill.log", env)
    out: dict = {"load_start": os.getloadavg()[0], "machine": platform.platform(), "cpus": os.cpu_count(), "rows": {}}
    runs: dict[str, list[dict]] = {name: [] for name in rows}
    for k in range(repeat):  # interleaved, so that a busy minute touches every row alike
        for name, (cmd, env, _) in rows.items():
            env = dict(env)
            if name == "demo_cold":
                env["NUMBA_CACHE_DIR"] = str(scratch / f"numba-cold-{k}")
            log = scratch / f"{name}-{k}.log"
            r = run_measured(cmd, log, env)
            if name == "demo_cold":
                r["said_compiling"] = NOTICE in log.read_text(errors="replace")
                r["kernels_compiled"] = len(list((scratch / f"numba-cold-{k}").rglob("*.nbc")))
            if r["exit_code"] != 0:
                r["error"] = log.read_text(errors="replace")[-2000:]
            runs[name].append(r)
    for name, rs in runs.items():
        ok = [r for r in rs if r["exit_code"] == 0]
        walls = [r["wall_s"] for r in rs]
        out["rows"][name] = {
            "what": rows[name][2], "ok": len(ok) == len(rs), "wall_s": statistics.median(walls), "runs_wall_s": walls,
            "peak_rss_mb": statistics.median(r["peak_rss"] for r in rs) / 2**20,
            "runs_peak_rss_mb": [r["peak_rss"] / 2**20 for r in rs],
            **({"said_compiling": [r.get("said_compiling") for r in rs],
                "kernels_compiled": [r.get("kernels_compiled") for r in rs]} if name == "demo_cold" else {}),
            **({"error": next(r["error"] for r in rs if "error" in r)} if len(ok) != len(rs) else {}),
        }
    out["load_end"] = os.getloadavg()[0]
    return out


def report(res: dict) -> None:
    print(f"\nFixed costs (load average {res['load_start']:.2f} at the start, {res['load_end']:.2f} at the end)\n")
    print(f"| work | wall s | runs | peak RSS MB | goal |")
    print("|---|---:|---|---:|---|")
    for name, r in res["rows"].items():
        goal = GOALS.get(name)
        met = ""
        if goal:
            wall_ok = r["wall_s"] <= goal[0]
            rss_ok = goal[1] is None or r["peak_rss_mb"] <= goal[1]
            met = f"<= {goal[0]} s" + (f", <= {goal[1]} MB" if goal[1] else "") + (": met" if wall_ok and rss_ok else ": NOT met")
        runs = ", ".join(f"{w:.2f}" for w in r["runs_wall_s"])
        flag = "" if r["ok"] else " (FAILED)"
        print(f"| {r['what']}{flag} | {r['wall_s']:.2f} | {runs} | {r['peak_rss_mb']:.0f} | {met} |")
    cold = res["rows"].get("demo_cold")
    if cold:
        print(f"\nfirst run: said it compiles {cold['said_compiling']}, kernels it compiled (cached versions) "
              f"{cold['kernels_compiled']}")


def main() -> None:
    ap = argparse.ArgumentParser(description="The fixed costs of a toktok run: --help, one document, the demo warm and cold.")
    ap.add_argument("--repeat", type=int, default=5, help="runs of each row, interleaved (the median is shown)")
    ap.add_argument("--only", metavar="ROWS", help="these rows only, comma-separated (help, train_help, one, "
                    "one_hf, demo_warm, demo_hf, demo_cold)")
    ap.add_argument("--json", metavar="OUT", help="also write the figures to this JSON file")
    history.options(ap)
    a = ap.parse_args()
    res = measure(a.repeat, a.only.split(",") if a.only else None)
    report(res)
    history.record(a, "fixed_costs", res, load=res["load_start"])
    if a.json:
        Path(a.json).write_text(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
