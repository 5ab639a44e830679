"""The bad-input catalogue, round 3 (issue #32): what a run reports as documents, and the Python
API (``toktok.train``) given wrong types and failing inputs. Each case: a ``ToktokError`` whose
message is one line of at most 300 characters naming the keyword or source, nothing published
(no output folder, no staging folder beside it)."""
from __future__ import annotations

import os
from pathlib import Path

import polars as pl
import pytest
from typer.testing import CliRunner

import toktok
from toktok.cli import app
from toktok.errors import ConfigError, InputError, ToktokError, shown

runner = CliRunner()
GOOD_TEXT = "hello world, hello there. the cat sat on the mat; 12 cats, 345 mats.\n" * 40


def _long_docs(n: int) -> list[str]:
    """``n`` documents of about 3 KB each: longer than the sample's piece (1 KiB), so a sampled
    phase cuts each in several pieces."""
    return [" ".join(f"w{(i * 7 + k) % 97}x{k % 13}" for k in range(400)) for i in range(n)]


def _refused(e: pytest.ExceptionInfo, *needles: str) -> str:
    msg = str(e.value)
    assert "\n" not in msg and len(msg) <= 300, msg
    for n in needles:
        assert n in msg, f"{n!r} not in {msg!r}"
    return msg


def _nothing_published(outs: Path) -> None:
    assert not outs.exists() or os.listdir(outs) == []


# --- documents are documents, not the pieces a sample cuts them in --------------------------------


@pytest.mark.parametrize("how", ["budget", "working_set_mb", "none"])
def test_documents_under_a_budget_are_documents(tmp_path, how):
    """A 30-row Parquet file of 3 KB documents once reported 150 "documents" under --budget (the
    pieces the sample cut them in); a text file (one document) reported one per read. The summary,
    ``toktok show`` and the run file's inputs count documents, whatever the budget."""
    src = tmp_path / "long.parquet"
    pl.DataFrame({"text": _long_docs(30)}).write_parquet(src)
    txt = tmp_path / "notes.txt"
    txt.write_text(" ".join(_long_docs(8)))
    out = tmp_path / "tok"
    extra = {"budget": ["--budget", "2GB"], "working_set_mb": ["--working-set-mb", "64"], "none": []}[how]
    r = runner.invoke(app, ["train", str(src), str(txt), "--out", str(out), "--merges", "20", "-q", *extra])
    assert r.exit_code == 0, r.output
    assert "31 documents" in r.output, r.output
    r = runner.invoke(app, ["show", str(out)])
    assert r.exit_code == 0 and "31 documents" in r.output, r.output
    with _connect(out) as con:
        rows = con.execute("select path, docs, docs_seen from inputs order by path").fetchall()
    assert rows == [(str(src), 30, 30), (str(txt), 1, 1)], rows


def _connect(out: Path):
    import duckdb

    return duckdb.connect(str(out / "run.duckdb"), read_only=True)


# --- a bare list of documents -----------------------------------------------------------------------


def test_a_bare_list_of_documents_is_one_short_line(tmp_path):
    """What HF's train_from_iterator users type first: the message was the whole first document
    (3,412 characters over many lines); now what was given and the fix."""
    docs = ["first document\n" + GOOD_TEXT * 2, "second document", "third\nwith lines"]
    out = tmp_path / "outs" / "tok"
    with pytest.raises(InputError) as e:
        toktok.train(docs, out=out, merges=5)
    _refused(e, "a list of 3 str that are not paths", "pass [texts] or toktok.Source(texts)")
    _nothing_published(out.parent)
    r = toktok.train([docs], out=out, merges=5)  # the fix works as the line says
    assert r.merges_learned == 5


def test_a_list_of_paths_with_one_missing_still_names_it(tmp_path):
    good = tmp_path / "good.txt"
    good.write_text(GOOD_TEXT)
    with pytest.raises(InputError) as e:
        toktok.train([str(good), str(tmp_path / "nope.txt")], out=tmp_path / "o", merges=5)
    _refused(e, str(tmp_path / "nope.txt"))


def test_a_list_of_paths_under_the_home_folder_is_a_list_of_paths(tmp_path, monkeypatch):
    """``~/...`` is a path, as the sources are read (expanded), not a document."""
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / "a.txt").write_text(GOOD_TEXT)
    r = toktok.train(["~/a.txt"], out=tmp_path / "o", merges=5)
    assert r.merges_learned == 5


def test_shown_cuts_and_escapes():
    s = shown("line one\nline two " * 50, 40)
    assert len(s) == 40 and "\n" not in s and s.startswith("'line one\\nline two") and s.endswith("...")
    assert shown(5) == "5"


def test_every_message_is_one_short_line():
    """The net under every message: a long, multi-line echo is cut in the middle (the culprit's
    head and the fix's tail stay) and its line breaks escaped."""
    e = ConfigError("x: " + "a\nb" * 500 + "; pass the fix")
    assert "\n" not in str(e) and len(str(e)) <= 300
    assert str(e).startswith("x: a\\nb") and str(e).endswith("; pass the fix")


# --- the Python API: wrong types and failing inputs -----------------------------------------------


def _raises_midway():
    yield GOOD_TEXT
    raise RuntimeError("the network went away")


CASES = {
    # name: (train's arguments, the error type, needles)
    "generator-raises-midway": (dict(sources=[_raises_midway]), InputError, ["source-1", "the network went away"]),
    "dataframe-int-column": (dict(sources=pl.DataFrame({"text": [1, 2, 3]})), InputError, ["source-1", "int64"]),
    "dataframe-only-nulls": (dict(sources=pl.DataFrame({"text": [None, None]}, schema={"text": pl.String})),
                             InputError, ["source-1", "empty"]),
    "lone-surrogate": (dict(sources=[[GOOD_TEXT + "\ud800!"]]), InputError, ["source-1", "row 0", "bad_utf8"]),
    "special-token-empty": (dict(special_tokens=[""]), ConfigError, ["special_tokens"]),
    "special-token-twice": (dict(special_tokens=["<|a|>", "<|a|>"]), ConfigError, ["special_tokens", "twice"]),
    "merges-not-a-number": (dict(merges="lots"), ConfigError, ["merges 'lots'"]),
    "merges-bool": (dict(merges=True), ConfigError, ["merges True"]),
    "budget-negative": (dict(budget=-1), ConfigError, ["budget"]),
    "budget-absurd": (dict(budget=10**30), ConfigError, ["budget", "at most"]),
    "memory-limit-absurd": (dict(memory_limit=10**30), ConfigError, ["memory", "machine"]),
    "out-not-a-path": (dict(out=5), ConfigError, ["out", "int"]),
    "out-an-existing-file": ("file", ToktokError, ["exists and is not a folder"]),
}


@pytest.mark.parametrize("case", list(CASES))
def test_python_api_refuses_in_one_line(tmp_path, case):
    args, kind, needles = CASES[case]
    outs = tmp_path / "outs"
    out = outs / "tok"
    if args == "file":
        outs.mkdir()
        out.write_text("mine")
        args = {}
    args = {"sources": [[GOOD_TEXT]], "out": out, "merges": 5, **args}
    if isinstance(args["sources"], list) and args["sources"] and callable(args["sources"][0]):
        args["sources"] = [args["sources"][0]()]
    with pytest.raises(kind) as e:
        toktok.train(**args)
    _refused(e, *needles)
    if case == "out-an-existing-file":
        assert os.listdir(outs) == ["tok"] and out.read_text() == "mine"
    else:
        _nothing_published(outs)


# --- round 4 (issue #47) ----------------------------------------------------------------------------


def test_a_long_list_of_documents_is_told_from_its_first_strings(tmp_path):
    """A list of 10^6 documents took 7.8 s to be refused: every str was asked about as a path (and
    a glob). Only the first 64 are asked now: documents there, and a path further on changes
    nothing (a list of paths names one among its first)."""
    real = tmp_path / "real.txt"
    real.write_text(GOOD_TEXT)
    docs = [f"document number {i} with some words" for i in range(100_000)] + [str(real)]
    with pytest.raises(InputError) as e:
        toktok.train(docs, out=tmp_path / "tok", merges=5, verbose=False)
    _refused(e, "a list of 100001 str", "first 64 are not paths", "[texts]")
    _nothing_published(tmp_path / "tok")


@pytest.mark.parametrize("what", ["missing", "not parquet"])
def test_a_lazyframe_that_cannot_be_read_names_it(tmp_path, what):
    p = tmp_path / "data.parquet"
    if what == "not parquet":
        p.write_text("just text, not Parquet\n")
    lf = pl.scan_parquet(p)
    with pytest.raises(InputError) as e:
        toktok.train(lf, out=tmp_path / "tok", merges=5, verbose=False)
    _refused(e, "source-1", "LazyFrame", str(p) if what == "missing" else "")
    _nothing_published(tmp_path / "tok")
