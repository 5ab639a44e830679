"""SuperBPE at scale (issue 50): a 1 GB corpus with ``--budget 4GB`` trained to 131,072 with
``--superbpe`` at 80% (104,857) inside the budget, timed against the plain run of the same size.

The corpus is five copies of the bench corpus's documents (``--data``, the ``text`` column),
their rows shuffled with a fixed seed (``--seed``), written to ``--corpus`` (default
``/tmp/toktok-superbpe-1gb/``, made once and reused). Each row is ``toktok train`` as the command
runs it (a subprocess: interpreter start, imports, count, merge, export, parity check, insight),
its wall and the peak RSS of its process tree (sampled every 50 ms, ``bench/run.py``'s
``run_measured``) beside the kernel's peak of its largest process; ``inside`` says whether the
sampled peak stayed under the budget, and each phase's row of the run file says what it learned
and what it counted (the sample under the budget). Rows: ``superbpe`` then ``plain`` (``--rows``), each run
``--repeat`` times (default once: a row takes many minutes), interleaved. The run is appended to
``bench/history.jsonl`` (``--label``, ``--no-history``: ``bench/history.py``).

``--slice-mb MB`` measures the issue's 100 MB goal instead: the first MB megabytes of ``--data``
(``bench/run.py``'s slice, the same mix), after one untimed ``superbpe`` run (kernels built), every
toktok row from the 256 bytes (``--no-hardcoded``, as the peers), and the row ``rustbpe``, its
plain BPE of the same size on the same data (``bench/run.py``'s worker); ``superbpe_vs_rustbpe``
is the ratio of the median walls (goal: at most 0.6); then, untimed, toktok's plain vocabulary of the
same size, and ``held_out``: the tokens of both on the last 5% of each ``--data`` file (text the
slice did not take), per file and in all (goal: at least 5% fewer). ``--budget none`` runs toktok without one.
Example: ``python bench/superbpe.py --data ../shared/corpus/*.parquet``;
``python bench/superbpe.py --slice-mb 100 --vocab-size 32768 --budget 2GB --rows superbpe,rustbpe --repeat 3``.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
import history  # noqa: E402
from run import corpus_files, run_measured, run_worker, slice_corpus  # noqa: E402

GB = 1 << 30


def make_corpus(files: list[str], folder: Path, *, copies: int, seed: int, parts: int = 16) -> dict:
    """``copies`` copies of the documents of ``files`` (their ``text`` column), rows shuffled with
    ``seed``, written as ``parts`` Parquet files in ``folder``; kept when ``folder/done.json`` says
    it was made from the same inputs. Returns what it holds (documents, bytes)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    want = {"files": [str(Path(f).resolve()) for f in files], "copies": copies, "seed": seed, "parts": parts}
    done = folder / "done.json"
    if done.is_file() and json.loads(done.read_text()).get("made_from") == want:
        return json.loads(done.read_text())
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    texts = pa.chunked_array([c for f in files for c in pq.read_table(f, columns=["text"])["text"].cast(pa.large_string()).chunks])
    rows = len(texts)
    order = np.random.default_rng(seed).permutation(rows * copies) % rows
    nbytes = 0
    for k, part in enumerate(np.array_split(order, parts)):
        col = pc.take(texts, pa.array(part))
        nbytes += int(pc.sum(pc.binary_length(col)).as_py() or 0)
        pq.write_table(pa.table({"text": col}), folder / f"part-{k:03d}.parquet", row_group_size=2048)
    info = {"made_from": want, "documents": int(rows * copies), "bytes": nbytes}
    done.write_text(json.dumps(info))
    return info


def phases(out: Path) -> list[dict]:
    """What each phase of the run in ``out`` learned and read (its run file's ``phases`` view):
    merges asked for and learned, its last id, the documents and text bytes it counted (the
    sample, under the budget), its distinct words, its budget and its merge seconds, and
    ``merge_budget``: the run's warning when the merge loop's share left some of its words out."""
    import duckdb

    con = duckdb.connect(str(out / "run.duckdb"), read_only=True)
    try:
        cur = con.execute("select phase, merges_requested, merges, last_id, docs, text_bytes, words, budget, seconds "
                          "from phases order by first_merge")
        names = [d[0] for d in cur.description]
        rows = [dict(zip(names, row)) for row in cur.fetchall()]
        # what the merge budget left out of a phase's words is in the run's warnings
        said = con.execute("select value from meta where key = 'warnings'").fetchone()
        for w in json.loads(said[0]) if said else []:
            for r in rows:
                if w.startswith(f"phase '{r['phase']}': the budget holds"):
                    r["merge_budget"] = w
        return rows
    finally:
        con.close()


def held_out_files(files: list[str], scratch: Path, share: float = 0.05) -> list[str]:
    """The last rows of each file holding ``share`` of its text (a slice takes the first rows:
    the two do not meet while the slice is under 1 - ``share`` of the corpus), as Parquet files in
    ``scratch``, with the file's ``lang`` column when it has one."""
    import numpy as np
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    out = []
    for f in files:
        t = pq.read_table(f)
        t = t.select([c for c in ("text", "lang") if c in t.column_names])
        lengths = pc.binary_length(t.column("text")).to_numpy(zero_copy_only=False)
        k = int(np.searchsorted(np.cumsum(lengths[::-1]), share * lengths.sum())) + 1
        dest = scratch / f"held-out-{Path(f).stem}.parquet"
        pq.write_table(t.slice(max(t.num_rows - k, 0)), dest)
        out.append(str(dest))
    return out


def held_out_tokens(super_out: Path, plain_out: Path, files: list[str], env: dict) -> dict:
    """Tokens of the held-out ``files`` under the SuperBPE tokenizer and toktok's plain one of the
    same size (``toktok eval --by file --json``): per subset, both counts and ``fewer``, the
    share of tokens SuperBPE saves (the issue's goal: at least 5%)."""
    import subprocess

    cmd = [sys.executable, "-m", "toktok", "eval", str(plain_out), str(super_out), "--data", *files,
           "--by", "file", "--json"]
    got = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True, env={**os.environ, **env}).stdout)
    out: dict = {}
    for r in got["rows"]:
        row = out.setdefault(Path(r["subset"]).name, {})
        row["superbpe" if Path(r["path"]) == super_out else "plain"] = r["tokens"]
    for row in out.values():
        row["fewer"] = 1 - row["superbpe"] / row["plain"]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", nargs="+", default=corpus_files())
    ap.add_argument("--corpus", default="/tmp/toktok-superbpe-1gb", help="where the shuffled copies are written")
    ap.add_argument("--copies", type=int, default=5)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--vocab-size", type=int, default=131_072)
    ap.add_argument("--share", type=float, default=0.8, help="the transition T as a share of the vocabulary")
    ap.add_argument("--budget", default="4GB", help="the runs' --budget; none: no budget (the command's default)")
    ap.add_argument("--rows", default="superbpe,plain")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--json", default=None, help="also write the figures to this file")
    ap.add_argument("--slice-mb", type=int, default=0, help="the first MB megabytes of --data instead of the 1 GB corpus; "
                    "rows from the 256 bytes, and rustbpe")
    history.options(ap)
    a = ap.parse_args()
    from toktok.options import parse_size

    budget = None if a.budget == "none" else parse_size(a.budget)
    limit = [] if budget is None else ["--budget", a.budget]
    t = int(a.vocab_size * a.share)
    env = {"PYTHONPATH": str(ROOT)}
    scratch = Path(tempfile.mkdtemp(prefix="toktok-superbpe-"))
    if a.slice_mb:
        files = slice_corpus(a.data, a.slice_mb, str(scratch))
        corpus = {"slice_mb": a.slice_mb, "files": files}
        print(f"corpus: the first {a.slice_mb} MB of {len(a.data)} file(s)", flush=True)
    else:
        corpus = make_corpus(a.data, Path(a.corpus), copies=a.copies, seed=a.seed)
        print(f"corpus: {corpus['documents']:,} documents, {corpus['bytes'] / GB:.2f} GiB in {a.corpus}", flush=True)
        files = sorted(str(p) for p in Path(a.corpus).glob("part-*.parquet"))
    rows: dict[str, list[dict]] = {r: [] for r in a.rows.split(",")}
    args = {"superbpe": ["--superbpe", str(t)], "plain": []}
    own = ["--no-hardcoded"] if a.slice_mb else []
    load = os.getloadavg()
    try:
        if a.slice_mb and "superbpe" in rows:  # untimed: the kernels built (once after a change) and the files cached
            run_measured([sys.executable, "-m", "toktok", "train", *files, "--out", str(scratch / "warm"),
                          "--vocab-size", str(a.vocab_size), *limit, *args["superbpe"], *own, "--force",
                          "-q"], scratch / "warm.log", env)
        for _ in range(a.repeat):
            for row in rows:
                out = scratch / row
                if row == "rustbpe":
                    r = run_worker("rustbpe", files, a.vocab_size, 0, str(scratch), env)
                    r.pop("tokens", None)
                    r["load_at_end"] = os.getloadavg()[0]
                    r["inside"] = None if budget is None else r["peak_rss"] <= budget
                    rows[row].append(r)
                    print(f"  {row:8s} wall {r['wall_s']:8.1f} s  peak {r['peak_rss'] / GB:5.2f} GiB  "
                          f"status {r['status']}  load {r['load_at_end']:.2f}", flush=True)
                    continue
                cmd = [sys.executable, "-m", "toktok", "train", *files, "--out", str(out), "--vocab-size",
                       str(a.vocab_size), *limit, *args[row], *own, "--force", "-q"]
                r = run_measured(cmd, scratch / f"{row}.log", env)
                r["load_at_end"] = os.getloadavg()[0]
                r["inside"] = None if budget is None else r["peak_rss"] <= budget
                if r["exit_code"] != 0:
                    r["error"] = "\n".join((scratch / f"{row}.log").read_text(errors="replace").splitlines()[-30:])
                else:
                    r["phases"] = phases(out)
                rows[row].append(r)
                print(f"  {row:8s} wall {r['wall_s']:8.1f} s  peak {r['peak_rss'] / GB:5.2f} GiB (tree, sampled), "
                      f"{r['maxrss'] / GB:5.2f} GiB (largest process)  inside {a.budget}: {r['inside']}  "
                      f"exit {r['exit_code']}  load {r['load_at_end']:.2f}", flush=True)
        held = None
        if a.slice_mb and rows.get("superbpe") and rows["superbpe"][-1]["exit_code"] == 0:
            # untimed: toktok's plain tokenizer of the same size, and both on held-out text of the same mix
            run_measured([sys.executable, "-m", "toktok", "train", *files, "--out", str(scratch / "plain-toktok"),
                          "--vocab-size", str(a.vocab_size), *limit, *own, "--force", "-q"], scratch / "plain.log", env)
            held = held_out_tokens(scratch / "superbpe", scratch / "plain-toktok",
                                   held_out_files(a.data, scratch), env)
            print("held-out tokens, SuperBPE vs toktok's plain vocabulary: " + ", ".join(
                f"{k} {v['fewer']:.1%} fewer" for k, v in held.items()), flush=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    fig = {"corpus": corpus, "vocab_size": a.vocab_size, "superbpe": t, "budget": a.budget, "rows": rows,
           "load_at_start": load, "load_at_end": os.getloadavg()}
    if held is not None:
        fig["held_out"] = held
    walls = {k: statistics.median(r["wall_s"] for r in v) for k, v in rows.items()
             if v and all(r["exit_code"] == 0 for r in v)}
    fig["median_wall_s"] = walls
    if {"superbpe", "rustbpe"} <= set(walls):
        fig["superbpe_vs_rustbpe"] = walls["superbpe"] / walls["rustbpe"]
        print(f"superbpe / rustbpe wall = {fig['superbpe_vs_rustbpe']:.2f}x (medians)")
    if {"superbpe", "plain"} <= set(walls):
        fig["superbpe_vs_plain"] = walls["superbpe"] / walls["plain"]
        print(f"superbpe / plain wall = {fig['superbpe_vs_plain']:.2f}x; load {load[0]:.2f} at start, "
              f"{fig['load_at_end'][0]:.2f} at end")
    if a.json:
        Path(a.json).write_text(json.dumps(fig, indent=1) + "\n")
    history.record(a, "superbpe", fig, load=load[0])


if __name__ == "__main__":
    main()
