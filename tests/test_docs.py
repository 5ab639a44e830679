"""The README and docs/ stay true to the tree: the module map names every module, and links resolve.

(a) Every module and package under ``toktok/`` (``_kernels.py`` too) has a bullet in the
README's module map (``- **`toktok/count/read.py`**``), and every path the map names exists, so the
map cannot go stale when a module is added, moved or removed. (b) Every relative link in README.md
and docs/*.md points to a file that exists, and a ``#fragment`` to a heading of that file (GitHub's
anchors). (c) Every page of docs/ is linked from the README, so none is out of reach.
Example: ``pytest tests/test_docs.py``.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

MAP_ITEM = re.compile(r"^- \*\*`([^`]+)`\*\*", re.M)
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.M | re.S)


def _module_map() -> str:
    text = (ROOT / "README.md").read_text()
    start = text.index("\n## Module map\n")
    end = text.find("\n## ", start + 1)
    return text[start:end if end >= 0 else None]


def _modules() -> set[str]:
    """``toktok/x.py`` for every module, ``toktok/pkg/`` for every package below toktok/."""
    found = set()
    for p in (ROOT / "toktok").rglob("*.py"):
        rel = p.relative_to(ROOT)
        if "__pycache__" in rel.parts:
            continue
        if p.name == "__init__.py":
            if p.parent != ROOT / "toktok":
                found.add(rel.parent.as_posix() + "/")
        else:
            found.add(rel.as_posix())
    return found


def test_the_module_map_names_every_module_and_only_modules_that_exist():
    named = MAP_ITEM.findall(_module_map())
    assert len(named) == len(set(named)), f"named twice in the module map: {sorted({n for n in named if named.count(n) > 1})}"
    modules = _modules()
    assert modules, "no module found under toktok/"
    missing = sorted(modules - set(named))
    stale = sorted(set(named) - modules)
    assert not missing, f"README.md's module map does not name {missing}: add a bullet `- **`PATH`** (names) — what it owns`"
    assert not stale, f"README.md's module map names {stale}, which are not modules under toktok/"


def _anchors(page: Path) -> set[str]:
    """GitHub's anchors for the headings of ``page``: lower case, punctuation dropped, spaces as ``-``."""
    text = FENCE.sub("", page.read_text())
    heads = re.findall(r"^#{1,6} +(.+?) *$", text, re.M)
    return {re.sub(r"[^\w\- ]", "", h.lower()).replace(" ", "-") for h in heads}


def _links(page: Path) -> list[str]:
    return [t for t in LINK.findall(FENCE.sub("", page.read_text())) if not re.match(r"[a-z]+:", t)]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_relative_link_points_to_a_file_and_heading_that_exist(page):
    bad = []
    for target in _links(page):
        path, _, fragment = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if not dest.exists():
            bad.append(f"{target}: no such file")
        elif fragment and dest.suffix == ".md" and fragment not in _anchors(dest):
            bad.append(f"{target}: no heading #{fragment} in {dest.relative_to(ROOT)}")
    assert not bad, f"{page.relative_to(ROOT)}: broken links: {bad}"


def test_every_docs_page_is_linked_from_the_readme():
    linked = {(ROOT / t.partition("#")[0]).resolve() for t in _links(ROOT / "README.md")}
    orphans = [p.name for p in PAGES[1:] if p.resolve() not in linked]
    assert not orphans, f"docs/ pages the README does not link to: {orphans}"


def test_the_checks_see_what_they_check():
    # a map entry, a link and a heading as the tests above parse them, so that a change of format
    # that makes them find nothing fails here instead of passing silently
    assert "toktok/pipeline.py" in MAP_ITEM.findall(_module_map())
    assert "docs/errors.md" in _links(ROOT / "README.md")
    assert "why-the-merge-loop-is-not-sql" in _anchors(ROOT / "docs" / "design.md")


# --- (d) the bench's tables: what bench/report.py prints from bench/history.jsonl ----------------

def _report():
    """``bench/report.py`` as a module (bench/ is scripts, not a package)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("bench_report", ROOT / "bench" / "report.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("page", ["docs/performance.md", "README.md", "docs/patterns.md"])
def test_the_bench_tables_are_what_bench_report_prints(page):
    report = _report()
    text = (ROOT / page).read_text(encoding="utf-8")
    sections = [m.group(2) for m in report.MARK.finditer(text)]
    assert sections, f"{page} quotes no table of bench/report.py"
    if page == "docs/performance.md":
        assert sorted(sections) == sorted(report.SECTIONS), "docs/performance.md quotes every table once"
    stale = [name for m, name in zip(report.MARK.finditer(text), sections)
             if m.group(3) != report.section(name)]
    assert not stale, f"{page}: the tables {stale} differ from bench/report.py's; run `python bench/report.py --write`"


def test_the_performance_page_and_the_bench_folder_stay_small():
    lines = len((ROOT / "docs" / "performance.md").read_text(encoding="utf-8").splitlines())
    assert lines <= 200, f"docs/performance.md has {lines} lines (at most 200): dated runs go to bench/history.jsonl"
    top = sorted(p.name for p in (ROOT / "bench").iterdir() if p.is_file())
    assert len(top) <= 12, f"bench/ holds {len(top)} files at its top level (at most 12): {top}"
    assert not [n for n in top if n.startswith("results-")], "a run's figures go to bench/history.jsonl"


def test_every_run_in_the_bench_history_says_when_where_and_what():
    import json

    lines = (ROOT / "bench" / "history.jsonl").read_text(encoding="utf-8").splitlines()
    runs = [json.loads(line) for line in lines]
    keys = {"date", "commit", "load", "machine", "bench", "args", "label", "figures"}
    assert all(keys <= set(r) for r in runs), "a line lacks one of " + ", ".join(sorted(keys))
    measured = [r for r in runs if r["bench"] != "notes"]
    assert {"run", "fixed_costs", "scale"} <= {r["bench"] for r in measured}
    assert all(r["figures"] and r["date"] for r in measured)
    # (the runs appended by the scripts name the commit they measured)
    assert all(r["commit"] or r.get("recorded_in") for r in measured)
