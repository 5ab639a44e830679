#!/usr/bin/env python
"""Today's bench tables, from the newest runs in the history (``bench/history.jsonl``), as Markdown.

    python bench/report.py [SECTION...]      # print them (default: every section)
    python bench/report.py --write           # put them into docs/performance.md and README.md

The sections: ``full`` (the trainers on the whole bench corpus), ``slice`` (on its first 100 MB),
``fixed`` (the fixed costs), ``counting`` (counting throughput per pattern and per thread),
``scale`` (a run ten times its memory budget); and ``custom`` (the first 100 MB with a custom regex,
``run.py --train-pattern``) and ``compiled`` (counting with the scanners compiled from regexes, the
named patterns' own regexes too), which docs/patterns.md quotes. Each is the newest run that has it, named by its
label, date, commit and load. docs/performance.md, the README and docs/patterns.md hold them between
``<!-- bench/report.py SECTION -->`` and ``<!-- end bench/report.py -->``; a test
(tests/test_docs.py) fails when what they hold differs from what this prints.
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from history import PATH, REPO, runs  # noqa: E402

SECTIONS = ("full", "slice", "fixed", "counting", "scale")
#: Sections quoted by other pages than docs/performance.md (docs/patterns.md: ``custom``).
ELSEWHERE = ("custom", "compiled")
#: The trainers' rows in order, with the name a table gives them.
TRAINERS = {"toktok": "toktok", "rustbpe": "rustbpe", "bpeasy": "bpeasy", "ffbpe": "ffbpe", "hf": "HF tokenizers"}
#: The fixed-cost rows: (toktok's row, HF's row or None).
FIXED = {"`toktok --help`": ("help", None), "`toktok train --help`": ("train_help", None),
         "one document (one line), 10 merges": ("one", "one_hf"),
         "README demo, kernels built": ("demo_warm", "demo_hf"),
         "README demo, first run after an install": ("demo_cold", None)}
MARK = re.compile(r"(<!-- bench/report\.py (\w+) -->\n)(.*?)(<!-- end bench/report\.py -->)", re.S)
PAGES = (REPO / "docs" / "performance.md", REPO / "README.md", REPO / "docs" / "patterns.md")


def _source(run: dict) -> str:
    """How a table names the run it comes from."""
    commit = f", {run['commit']}" if run.get("commit") else ""
    load = f", load {run['load']:.2f}" if run.get("load") is not None else ""
    return f"`{run['label']}`, {run['date']}{commit}{load}"


def _trainers(run: dict) -> list[str]:
    """The trainers a run has figures for, in the tables' order."""
    have = {n for per in run["figures"]["by_vocab"].values() for n in per["results"]}
    return [n for n in TRAINERS if n in have]


def _train_table(run: dict, title: str) -> list[str]:
    fig = run["figures"]
    vocabs = sorted(fig["by_vocab"], key=int)
    head = [title] + [f"{h}, {int(v):,}" for v in vocabs for h in ("wall s", "peak RSS MB")]
    lines = ["| " + " | ".join(head) + " |", "|---|" + "---:|" * (len(head) - 1)]
    for name in _trainers(run):
        cells = []
        for v in vocabs:
            r = fig["by_vocab"][v]["results"].get(name, {})
            if r.get("status") != "ok":
                cells += [r.get("status", "—"), "—"]
                continue
            wall, peak = f"{r['wall_s']:.1f}", f"{r['peak_rss'] / 1e6:,.0f}"
            cells += [f"**{wall}**", f"**{peak}**"] if name == "toktok" else [wall, peak]
        version = next((r["version"] for per in fig["by_vocab"].values()
                        if (r := per["results"].get(name, {})).get("version")), "")
        lines.append("| " + " | ".join([f"{TRAINERS[name]} {version}".strip()] + cells) + " |")
    ratios = []
    for peer in ("rustbpe", "bpeasy", "ffbpe", "hf"):
        got = [(int(v), fig["by_vocab"][v]["ratios"][peer]) for v in vocabs if peer in fig["by_vocab"][v]["ratios"]]
        if got:
            ratios.append(f"{TRAINERS[peer]} " + ", ".join(f"{r['wall']:.2f}× wall and {r['peak_rss']:.2f}× peak "
                                                           f"at {v:,}" for v, r in got))
    if ratios:
        lines += ["", "toktok against " + "; ".join(ratios) + "."]
    return lines


def _data(fig: dict) -> str:
    d = fig["data"]
    return f"{d['text_bytes'] / 1e6:.1f} MB of text, {d['rows']:,} documents"


def full(every: list[dict]) -> list[str]:
    run = _newest(every, lambda r: r["bench"] == "run" and _trained(r) and not r["figures"]["data"].get("slice_mb"))
    fig = run["figures"]
    return [f"The whole bench corpus ({_data(fig)}), the median of {fig['repeat']} interleaved runs per trainer "
            f"({_source(run)}):", "", *_train_table(run, "trainer")]


def slice(every: list[dict]) -> list[str]:  # noqa: A001 (the section's name)
    run = _newest(every, lambda r: r["bench"] == "run" and _trained(r) and r["figures"]["data"].get("slice_mb")
                  and _cl100k(r))
    fig = run["figures"]
    return [f"Its first {fig['data']['slice_mb']} MB, each file's share in proportion ({_data(fig)}), the median of "
            f"{fig['repeat']} ({_source(run)}):", "", *_train_table(run, "trainer")]


def custom(every: list[dict]) -> list[str]:
    run = _newest(every, lambda r: r["bench"] == "run" and _trained(r) and not _cl100k(r))
    fig = run["figures"]
    return [f"The same slice ({_data(fig)}) with a custom regex for every trainer, `{fig['train_pattern']}` of "
            f"bench/run.py (toktok counts it with the scanner it compiles from it), the median of {fig['repeat']} "
            f"({_source(run)}):", "", *_train_table(run, "trainer")]


def _cl100k(run: dict) -> bool:
    """Whether the trainers of ``run`` split with cl100k (every run before ``--train-pattern``)."""
    return run["figures"].get("train_pattern", "cl100k") == "cl100k"


def fixed(every: list[dict]) -> list[str]:
    run = _newest(every, lambda r: r["bench"] == "fixed_costs")
    rows = run["figures"]["rows"]
    n = len(next(iter(rows.values())).get("runs_wall_s", [0]))
    lines = [f"Fixed costs, the median of {n} ({_source(run)}):", "",
             "| fixed cost | toktok | HF `BpeTrainer` |", "|---|---:|---:|"]

    def cell(key):
        r = rows.get(key) if key else None
        return f"{r['wall_s']:.2f} s, {r['peak_rss_mb']:.0f} MB" if r and r.get("ok") else "—"

    for what, (mine, theirs) in FIXED.items():
        if mine in rows:
            lines.append(f"| {what} | {cell(mine)} | {cell(theirs)} |")
    return lines


def counting(every: list[dict]) -> list[str]:
    run = _newest(every, lambda r: r["bench"] == "run" and r["figures"].get("counting_patterns"))
    fig = run["figures"]
    per = fig["counting_patterns"]
    threads = next((r["threads"] for r in per.values() if r.get("status") == "ok"), "?")
    lines = [f"Counting on {threads} threads, reading and loading the kernels excluded, the median "
             f"({_source(run)}):", "", *_pattern_rows(per, lambda name, r: "-rx" not in name and name != "camel")]
    c = fig.get("counting", {})
    one, many = c.get("threads_1", {}), [v for k, v in c.items() if k != "threads_1"]
    if one.get("status") == "ok" and many and many[0].get("status") == "ok":
        lines += ["", f"cl100k on 1 thread {one['mb_per_s']:.1f} MB/s, on {many[0]['threads']} "
                      f"{many[0]['mb_per_s']:.1f} MB/s ({many[0]['mb_per_s'] / one['mb_per_s']:.2f}×)."]
    return lines


def compiled(every: list[dict]) -> list[str]:
    run = _newest(every, lambda r: r["bench"] == "run" and any(
        p.get("engine") == "compiled" for p in r["figures"].get("counting_patterns", {}).values()))
    per = run["figures"]["counting_patterns"]
    threads = next((r["threads"] for r in per.values() if r.get("status") == "ok"), "?")
    pcre = [n for n, r in per.items() if r.get("engine") == "pcre"]
    beside = f" and {', '.join(pcre)}, outside the subset, by PCRE2's JIT" if pcre else ""
    return [f"Counting on {threads} threads, the patterns toktok compiles (`NAME-rx`: a named pattern's own regex "
            f"counted by the compiled scanner){beside}, beside cl100k's own scanner, the median ({_source(run)}):", "",
            *_pattern_rows(per, lambda name, r: name == "cl100k" or r.get("engine") in ("compiled", "pcre"))]


def _pattern_rows(per: dict, keep) -> list[str]:
    """A table of the patterns of ``per`` that ``keep(name, figures)`` keeps, with their share of cl100k's."""
    base = per.get("cl100k", {}).get("mb_per_s")
    lines = ["| pattern | engine | MB/s | of cl100k |", "|---|---|---:|---:|"]
    for name, r in per.items():
        if not keep(name, r):
            continue
        if r.get("status") != "ok":
            lines.append(f"| {name} | {r.get('status', '?')} | — | — |")
            continue
        share = f"{r['mb_per_s'] / base:.0%}" if base else "—"
        engine = r.get("engine") or ("regex" if name == "custom" else "scanner")
        lines.append(f"| {name} | {engine} | {r['mb_per_s']:.1f} | {share} |")
    return lines


def scale(every: list[dict]) -> list[str]:
    run = _newest(every, lambda r: r["bench"] == "scale" and "cold" in r["figures"])
    f = run["figures"]
    cold = f["cold"]
    return [f"A corpus {f['corpus_bytes'] / f['budget']:.1f}× its memory budget (`bench/scale.py`, {_source(run)}):", "",
            "| corpus | budget | peak, warm | peak, first run | wall, warm | wall, first run | sample |",
            "|---:|---:|---:|---:|---:|---:|---:|",
            f"| {f['corpus_bytes'] / 1e9:.2f} GB | {f['budget'] / 1e6:.0f} MB | "
            f"{f['peak_rss'] / 2**20:,.0f} MiB ({f['peak_over_budget']:.2f}×) | "
            f"{cold['peak_rss'] / 2**20:,.0f} MiB ({cold['peak_over_budget']:.2f}×) | {f['wall_s']:.1f} s | "
            f"{cold['wall_s']:.1f} s | {f['sample_bytes'] / 1e6:.0f} MB ({f['sampled_fraction']:.2%}) |"]


def _trained(run: dict) -> bool:
    return any(per["results"].get("toktok", {}).get("status") == "ok"
               for per in run["figures"].get("by_vocab", {}).values())


def _newest(every: list[dict], has) -> dict:
    found = [r for r in every if has(r)]
    if not found:
        raise SystemExit(f"bench/report.py: no run in {PATH.name} has this table")
    return found[-1]


def section(name: str, every: list[dict] | None = None) -> str:
    """Section ``name``'s Markdown (ending in a newline). Example: ``section("fixed")``."""
    return "\n".join(globals()[name](runs() if every is None else every)) + "\n"


def filled(text: str, every: list[dict] | None = None) -> str:
    """``text`` with each marked section replaced by what :func:`section` prints now."""
    every = runs() if every is None else every
    return MARK.sub(lambda m: m.group(1) + section(m.group(2), every) + m.group(4), text)


def main(argv: list[str]) -> None:
    if argv and argv[0] in ("-h", "--help"):
        print(__doc__)
        return
    if argv == ["--write"]:
        for page in PAGES:
            page.write_text(filled(page.read_text(encoding="utf-8")), encoding="utf-8")
        return
    if bad := [a for a in argv if a not in SECTIONS + ELSEWHERE]:
        raise SystemExit(f"bench/report.py: unknown section {', '.join(bad)}; choose from "
                         f"{', '.join(SECTIONS + ELSEWHERE)}")
    every = runs()
    print("\n".join(section(name, every) for name in argv or SECTIONS), end="")


if __name__ == "__main__":
    main(sys.argv[1:])
