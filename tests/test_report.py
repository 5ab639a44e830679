"""``toktok report`` looked at in a real browser: Debian's ``chromium``, headless, driven by
Playwright (no browser download; ``make test`` installs chromium when it is missing).

What a person sees: the plots have drawn marks, the summary and tables are there, the search
finds a token by text and by id, tokens read as text (escapes for what prints as nothing, hex on
demand, never GPT-2's byte-level spelling), nothing is fetched (every request is recorded; any
that is not the page's own file fails the test) and the console has no error. Two runs side by
side; a 262,144-token page still loads, searches and scrolls to its last id. The counts the page
shows are checked against tiktoken itself.
"""
from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import duckdb
import pytest
from typer.testing import CliRunner

from conftest import FIXTURES, one_error_line
from toktok.cli import app
from toktok.insight.html import render, report, run_data

runner = CliRunner()
CHROMIUM = os.environ.get("TOKTOK_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    """One headless Chromium (a new empty profile) for the module's pages."""
    from playwright.sync_api import sync_playwright

    assert Path(CHROMIUM).is_file(), f"{CHROMIUM}: no chromium; make test installs it (apt-get install chromium)"
    with sync_playwright() as p:
        ctx = p.chromium.launch_persistent_context(str(tmp_path_factory.mktemp("chromium-profile")),
                                                   executable_path=CHROMIUM, args=FLAGS, headless=True,
                                                   viewport={"width": 1300, "height": 1000})
        yield ctx
        ctx.close()


def open_report(ctx, path: Path):
    """The page of ``path``, loaded and drawn, with what it asked for and said: ``seen`` holds
    ``requests`` (URLs), ``console`` (errors and warnings) and ``errors`` (uncaught exceptions)."""
    page = ctx.new_page()
    seen: dict[str, list] = {"requests": [], "console": [], "errors": []}
    page.on("request", lambda r: seen["requests"].append(r.url))
    page.on("console", lambda m: seen["console"].append(f"{m.type}: {m.text}") if m.type in ("error", "warning") else None)
    page.on("pageerror", lambda e: seen["errors"].append(str(e)))
    page.route(lambda url: not url.startswith("file:"), lambda route: route.abort())  # (recorded above first)
    page.goto(path.resolve().as_uri())
    page.wait_for_selector("body[data-ready='1']", timeout=120_000)
    return page, seen


def assert_quiet(seen: dict, path: Path) -> None:
    """Nothing fetched but the page itself, no console error or warning, no uncaught exception."""
    assert seen["requests"] == [path.resolve().as_uri()], seen["requests"]
    assert not seen["console"] and not seen["errors"], seen


def search(page, query: str) -> list[int]:
    """Type ``query`` into the search and return the ids of the rows the list shows."""
    page.fill("#vsearch", query)
    page.press("#vsearch", "Enter")
    return [int(x) for x in page.eval_on_selector_all("#vrows .vrow", "rs => rs.map(r => r.dataset.id)")]


def _vocab(run: Path) -> list[tuple[int, bytes, str]]:
    con = duckdb.connect(str(run / "run.duckdb"), read_only=True)
    try:
        return [(i, bytes(t), k) for i, t, k in con.sql("select id, token, kind from vocab order by id").fetchall()]
    finally:
        con.close()


def test_a_run_report_draws_its_plots_and_fetches_nothing(insight_run, browser, tmp_path):
    out = tmp_path / "r.html"
    r = runner.invoke(app, ["report", str(insight_run), "-o", str(out)])
    assert r.exit_code == 0, r.output
    assert "toktok: wrote" in r.output and out.is_file()
    page, seen = open_report(browser, out)
    figures = page.locator("#runs figure")
    assert figures.count() == 3  # the curve, the decay, the lengths
    for i in range(3):
        assert figures.nth(i).locator(".mark").count() > 0, figures.nth(i).inner_text()
    # the curve: 'all' and each language, one line each, a point every 25 merges (0..300)
    curve = figures.nth(0)
    paths = curve.locator("path.mark")
    assert paths.count() >= 2
    assert all(p.count("L") == 12 for p in paths.evaluate_all("ps => ps.map(p => p.getAttribute('d'))"))
    assert "Measured on held-out text" in curve.inner_text()
    # the decay: one point a merge (300), on a log scale of counts
    d = figures.nth(1).locator("path.mark").first.get_attribute("d")
    assert d.count("L") == 299
    assert figures.nth(2).locator("rect.mark").count() >= 3  # lengths 1, 2, 3 at least
    text = page.inner_text("#runs")
    assert "toktok run" in text and "parity" in text and "notes.txt" in text
    assert page.locator("#runs table").first.locator("tbody tr").count() == 3  # its three sources
    assert "Ġ" not in page.inner_text("body") and "Ċ" not in page.inner_text("body")  # no byte-level spelling
    assert_quiet(seen, out)
    page.screenshot(path=str(tmp_path / "report.png"), full_page=True)  # (for a person to look at when it fails)


def test_search_finds_tokens_by_text_and_by_id(insight_run, browser, tmp_path):
    out = report([insight_run], tmp_path / "r.html")
    page, seen = open_report(browser, out)
    vocab = _vocab(insight_run)
    merges = [(i, t.decode()) for i, t, k in vocab if k == "merge" and t.isascii() and t.strip()]
    # by text: the exact token comes first, shown as its text
    i, text = merges[len(merges) // 2]
    ids = search(page, text)
    assert ids and ids[0] == i, (text, ids[:5])
    assert page.locator("#vrows .vrow").first.locator(".tok").first.inner_text() == text
    assert all(text.lower() in vocab[j][1].decode("utf-8", "replace").lower() for j in ids)
    # by id: the token, and its details: bytes in hex, parents that are links
    i, text = merges[-1]
    assert search(page, f"#{i}") == [i]
    detail = page.inner_text("#vdetail")
    assert f"#{i}" in detail and " ".join(f"{b:02x}" for b in text.encode()) in detail and "parents" in detail
    page.locator("#vdetail a.tid").first.click()  # a parent: the search jumps to it
    assert page.input_value("#vsearch").startswith("#")
    # what prints as nothing is escaped: the newline byte (id 10) reads \n, and can be searched for
    assert 10 in search(page, "\\n")
    row = page.locator("#vrows .vrow[data-id='10']")
    assert row.locator(".esc").inner_text() == "\\n"
    # hex on demand
    search(page, f"#{merges[0][0]}")
    page.check("#vhex")
    assert page.locator("#vrows .vrow").first.locator(".hex").inner_text() == " ".join(f"{b:02x}" for b in merges[0][1].encode())
    page.uncheck("#vhex")
    # nothing found says so
    assert search(page, "no such token anywhere 🦆") == []
    assert page.inner_text("#vcount").startswith("0 of")
    assert_quiet(seen, out)


def test_the_counts_shown_are_tiktoken_s(insight_run):
    """Each token's count in the training words: every word encoded by tiktoken as one piece,
    times its count."""
    import numpy as np

    from toktok.formats.tiktoken import load_encoding

    d = run_data(insight_run, "run")
    enc = load_encoding(insight_run)
    con = duckdb.connect(str(insight_run / "run.duckdb"), read_only=True)
    want = np.zeros(d["vocab"]["n"], np.int64)
    for word, count in con.sql("select word, count from words").fetchall():
        for t in enc._encode_single_piece(bytes(word)):
            want[t] += count
    con.close()
    assert d["vocab"]["c"] == want.tolist()
    # and the parents of each learned token make it
    t, left, right = d["vocab"]["t"], d["vocab"]["l"], d["vocab"]["r"]
    runs = d["vocab"]["k"]
    kinds = [d["vocab"]["kinds"][k] for k, n in zip(runs[::2], runs[1::2]) for _ in range(n)]
    assert len(kinds) == d["vocab"]["n"]
    for i in range(d["vocab"]["n"]):
        if kinds[i] == "merge":
            assert t[left[i]] + t[right[i]] == t[i] or (t[left[i]] + t[right[i]]).encode("utf-8", "surrogateescape") == \
                t[i].encode("utf-8", "surrogateescape")
        else:
            assert left[i] == -1


def test_two_runs_side_by_side(phase_pair, browser, tmp_path):
    out = tmp_path / "two.html"
    r = runner.invoke(app, ["report", str(phase_pair["general"]), str(phase_pair["multi"]), "-o", str(out)])
    assert r.exit_code == 0, r.output
    page, seen = open_report(browser, out)
    compare = page.locator("#compare")
    assert compare.is_visible()
    assert compare.locator("figure").first.locator("path.mark").count() == 2  # one curve a run
    header = compare.locator("table th").all_inner_texts()
    assert header == ["subset", "general", "multi"]
    assert page.locator("#runs section.run").count() == 2
    # the browser switches runs
    page.select_option("#vrun", "1")
    n = len(_vocab(phase_pair["multi"]))
    assert page.inner_text("#vcount") == f"{n:,} tokens"
    assert_quiet(seen, out)


def test_the_api_writes_the_same_page(tmp_path):
    import toktok

    res = toktok.train([str(FIXTURES / "notes.txt")], out=str(tmp_path / "o"), merges=40, verbose=False)
    path = res.report(tmp_path / "api.html")
    assert path == tmp_path / "api.html"
    html = path.read_text(encoding="utf-8")
    assert html.startswith("<!DOCTYPE html>") and "{{" not in html.split('<script type="application/json"')[0]
    assert 'src="http' not in html and "href=\"http" not in html and "@import" not in html


def test_report_refusals(insight_run, tmp_path):
    one_error_line(runner.invoke(app, ["report", str(insight_run), "-o", str(tmp_path)]), str(tmp_path), "is a folder")
    one_error_line(runner.invoke(app, ["report", str(insight_run), "-o", str(insight_run / "run.duckdb")]),
                   "would overwrite a file of the run")
    (tmp_path / "notes.txt").write_text("not a run")
    one_error_line(runner.invoke(app, ["report", str(tmp_path / "notes.txt"), "-o", str(tmp_path / "x.html")]),
                   "notes.txt", "not a DuckDB file")
    assert not (tmp_path / "x.html").exists()


def _big(run: Path, n: int) -> dict:
    """``run``'s page data with its vocabulary grown to ``n`` ids (synthetic learned tokens
    ``" w000123"``, each made of the one before and a digit), as a run of that size would carry."""
    d = run_data(run, "big")
    v = d["vocab"]
    start = v["n"]
    merge = v["kinds"].index("merge")
    v["k"] += [merge, n - start]
    v["p"] += [0, n - start]
    for i in range(start, n):
        v["t"].append(f" w{i:06d}")
        v["l"].append(i - 1)
        v["r"].append(48 + i % 10)
        v["q"].append(n - i)
        v["c"].append(n - i)
    v["n"] = n
    return d


def test_a_262144_token_page_stays_responsive(insight_run, browser, tmp_path):
    """Loads, finds a token by text and by id, and scrolls to its last id; the times are printed
    (measured in bench, never asserted here)."""
    n = 262_144
    out = tmp_path / "big.html"
    out.write_bytes(render([_big(insight_run, n)]))
    t0 = time.perf_counter()
    page, seen = open_report(browser, out)
    loaded = time.perf_counter() - t0
    t0 = time.perf_counter()
    assert search(page, " w262000")[0] == 262_000
    found = time.perf_counter() - t0
    assert search(page, "#200001") == [200_001]
    search(page, "")
    assert page.inner_text("#vcount") == f"{n:,} tokens"
    page.eval_on_selector("#vlist", "e => { e.scrollTop = e.scrollHeight; }")
    page.wait_for_function("() => [...document.querySelectorAll('#vrows .vrow')].some(r => r.dataset.id === '262143')")
    assert page.locator("#vrows .vrow").count() < 60  # only the rows in view are in the page
    print(f"262,144 tokens: {out.stat().st_size / 1e6:.1f} MB, loaded in {loaded:.2f} s, text search {found:.2f} s")
    assert_quiet(seen, out)
