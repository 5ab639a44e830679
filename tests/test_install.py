"""An installed toktok does everything the README shows: a wheel built from this checkout,
installed into a fresh venv in a temporary folder, runs train, ``sql RUN top_merges`` (the ready
queries ship in the package), show, report (its page's assets ship in the package too: the page is
opened in headless Chromium), eval, verify and convert both ways from a folder outside the
checkout, importing only the installed package.

The wheel and its venv are built once per session (conftest.wheel_venv; tests/test_doc_commands.py
runs the docs' commands on the same install). Marked ``wheel``: ``make test`` runs it (about a
minute, mostly Numba compiling the kernels of the fresh install).
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import FIXTURES, ROOT, run_ok
from test_report import assert_quiet, browser, open_report  # noqa: F401 (browser: a fixture)

pytestmark = pytest.mark.wheel
_run = run_ok


@pytest.fixture(scope="module")
def installed(wheel_venv, tmp_path_factory) -> dict:
    """The session's wheel install (conftest.wheel_venv) and a folder outside the checkout that
    holds the fixtures."""
    work = tmp_path_factory.mktemp("install_work")
    for name in ("notes.txt", "sample.parquet", "extra.jsonl"):
        shutil.copy(FIXTURES / name, work / name)
    return {**wheel_venv, "work": work}


def test_the_installed_package_is_the_one_that_runs(installed):
    r = _run([str(installed["py"]), "-c", "import toktok, toktok.insight.runfile as i; print(toktok.__file__); "
              "print(sorted(i.ready_queries()))"], installed["work"], installed["env"])
    file, names = r.stdout.splitlines()
    assert Path(file).is_relative_to(installed["site"]), file
    assert Path(file).resolve().parents[1] != ROOT.resolve()
    assert {"top_merges", "count_decay", "undertrained_tokens", "compression_by_language"} <= set(eval(names))


def test_readme_commands_run_from_a_wheel_install(installed):
    tk, work, env = str(installed["toktok"]), installed["work"], installed["env"]
    assert not (work / "sql").exists()
    _run([tk, "train", "sample.parquet", "notes.txt", "--out", "out", "--merges", "300",
          "--special-token", "<|endoftext|>", "--special-token", "<|pad|>", "-q"], work, env)
    assert (work / "out" / "tokenizer.tiktoken").is_file() and (work / "out" / "run.duckdb").is_file()
    # the ready queries by name, from the package
    r = _run([tk, "sql", "out", "top_merges", "--csv"], work, env)
    lines = r.stdout.splitlines()
    assert lines[0].startswith("phase,merge_index,rank") and len(lines) == 16
    r = _run([tk, "sql", "out", "undertrained_tokens", "--csv"], work, env)
    assert len(r.stdout.splitlines()) >= 2
    r = _run([tk, "show", "out", "--json"], work, env)
    d = json.loads(r.stdout)
    assert d["vocab_size"] == 256 + 1161 + 300 + 2 and d["parity"]["ok"] is True
    r = _run([tk, "show", "out"], work, env)
    assert "parity" in r.stdout
    r = _run([tk, "eval", "out", "--data", "extra.jsonl", "--json"], work, env)
    rows = json.loads(r.stdout)["rows"]
    assert rows and rows[0]["bytes_per_token"] > 1
    r = _run([tk, "verify", "out", "notes.txt"], work, env)
    assert "parity ok" in r.stdout
    # convert both ways: .tiktoken -> tokenizer.json -> .tiktoken, byte for byte, same specials
    _run([tk, "convert", "out/tokenizer.tiktoken", "hf"], work, env)
    _run([tk, "convert", "hf/tokenizer.json", "back/tok.tiktoken"], work, env)
    assert (work / "back" / "tok.tiktoken").read_bytes() == (work / "out" / "tokenizer.tiktoken").read_bytes()
    n = 256 + 1161 + 300
    assert json.loads((work / "back" / "tok.special_tokens.json").read_text()) == {"<|endoftext|>": n, "<|pad|>": n + 1}
    r = _run([str(installed["py"]), "-c", "import toktok; e = toktok.load_encoding('back/tok.tiktoken'); "
              "print(e.encode('hi<|pad|>', allowed_special='all')[-1])"], work, env)
    assert int(r.stdout) == n + 1


def test_report_from_a_wheel_install(installed, browser):  # noqa: F811
    """``toktok report`` of one run and of two, written by the installed package and opened in
    headless Chromium: plots drawn, nothing fetched, no console error."""
    tk, work, env = str(installed["toktok"]), installed["work"], installed["env"]
    for name, merges in (("small", "100"), ("big", "400")):
        _run([tk, "train", "sample.parquet", "--out", name, "--merges", merges, "-q"], work, env)
    r = _run([tk, "report", "small", "-o", "one.html"], work, env)
    assert "toktok: wrote one.html" in r.stderr
    _run([tk, "report", "small", "big", "-o", "two.html"], work, env)
    for name, runs in (("one.html", 1), ("two.html", 2)):
        page, seen = open_report(browser, work / name)
        assert page.locator("#runs section.run").count() == runs
        assert page.locator("#runs figure .mark").count() > 3
        assert page.locator("#compare").is_visible() == (runs == 2)
        assert_quiet(seen, work / name)
        page.close()
