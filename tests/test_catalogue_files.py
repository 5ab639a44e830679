"""The bad-input catalogue, round 3 (issue #32): files. Config files (alias bombs, unknown keys in
every position, empty phases, duplicate phase names, negative weights), warm-start bases
(truncated, duplicate or missing ranks, a zero-length token, another model type), the run file of
an interrupted run (truncated, another program's, held open by another process) under
``--resume``, and ``convert`` / ``verify`` / ``eval`` / ``sql`` / ``show`` given the same path
twice, an empty folder, a JSON array for a tokenizer.json, or paths that start with ``-`` or hold
spaces and non-ASCII. Each: exit 2 and one line of at most 300 characters naming the culprit,
nothing published."""
from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from toktok.cli import app
from toktok.formats.tiktoken import write_tiktoken
from toktok.vocab import Vocab

runner = CliRunner()
GOOD_TEXT = "hello world, hello there. the cat sat on the mat; 12 cats, 345 mats.\n" * 40
FAULTS = Path(__file__).parent / "faults.py"


def _one_line(r, *needles: str) -> str:
    assert r.exit_code == 2, r.output
    assert r.exception is None or isinstance(r.exception, SystemExit), repr(r.exception)
    lines = [ln for ln in r.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("toktok: error: "), r.output
    assert len(lines[0]) <= len("toktok: error: ") + 300, lines[0]
    for n in needles:
        assert n in lines[0], f"{n!r} not in {lines[0]!r}"
    return lines[0]


@pytest.fixture
def d(tmp_path, monkeypatch) -> Path:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "good.txt").write_text(GOOD_TEXT)
    return tmp_path


def _config(d: Path, body: str) -> Path:
    p = d / "run.yaml"
    p.write_text(f"output: {d / 'o' / 'tok.tiktoken'}\n" + body.format(good=d / "good.txt"))
    return p


PHASE = "phases:\n  - name: a\n    merges: 5\n    sources:\n      - path: {good}\n"
BOMB = "".join(f"k{i}: &a{i} [{', '.join([f'*a{i - 1}' if i else 'x'] * 9)}]\n" for i in range(8))


@pytest.mark.parametrize("body, needles", [
    (BOMB + PHASE, ["unknown key 'k0'"]),
    ("storage_options:\n  " + BOMB.replace("\n", "\n  ").rstrip() + "\n" + PHASE, ["storage_options"]),
    ("mergez: 5\n" + PHASE, ["unknown key 'mergez'"]),
    (PHASE + "    mergez: 5\n", ["phases[0]: unknown key 'mergez'"]),
    (PHASE + "        wieght: 2\n", ["phases[0].sources[0]: unknown key 'wieght'"]),
    ("special_tokens: [{{content: '<|a|>', strip: true}}]\n" + PHASE, ["special_tokens[0]: unknown key 'strip'"]),
    ("phases: []\n", ["phases: needs at least one phase"]),
    ("phases:\n  -\n", ["phases[0]: expected a mapping"]),
    ("phases:\n  - name: a\n    merges: 5\n    sources: []\n", ["phases[0]: needs sources"]),
    (PHASE + PHASE.replace("phases:\n", ""), ["phases[1].name: phase 'a' is also phases[0]"]),
    (PHASE + "        weight: -1\n", ["phases[0].sources[0].weight", "-1"]),
    (PHASE + "        weight: .nan\n", ["phases[0].sources[0].weight", "nan"]),
    ("seed: |\n  first\n  second\n" + PHASE, ["seed:", "'first\\nsecond\\n'"]),
], ids=["alias-bomb", "alias-bomb-in-a-mapping-toktok-passes-on", "unknown-top-key", "unknown-phase-key",
        "unknown-source-key", "unknown-special-token-key", "empty-phases", "empty-phase", "phase-without-sources",
        "duplicate-phase-names", "negative-weight", "nan-weight", "multi-line-value"])
def test_config_files(d, body, needles):
    """An alias bomb (9^8 strings if expanded) fails fast at its key; in a mapping toktok passes on
    unread (``storage_options``) it is never expanded: the error is the key's, not the bomb's."""
    p = _config(d, body)
    t0 = time.monotonic()
    r = runner.invoke(app, ["train", "--config", str(p), "-q"])
    if "storage_options" in needles:  # a mapping of anything: the run goes on, and the bomb is never walked
        assert r.exit_code == 0, r.output
        assert time.monotonic() - t0 < 120
        return
    _one_line(r, str(p), *needles)
    assert not (d / "o").exists()


def _base(d: Path, edit, name: str = "base") -> Path:
    v = Vocab.base(hardcoded=False)
    v.tokens += [b"he", b"hel"]
    p = d / f"{name}.tiktoken"
    write_tiktoken(v, p)
    p.write_bytes(b"".join(edit(p.read_bytes().splitlines(keepends=True))))
    return p


def _line(token: bytes, rank: int) -> bytes:
    return base64.b64encode(token) + b" %d\n" % rank


def _hf(d: Path, edit) -> Path:
    from toktok.formats.hf import write_hf

    v = Vocab.base(hardcoded=False)
    v.tokens += [b"he", b"hel"]
    write_hf(v, d / "hf")
    p = d / "hf" / "tokenizer.json"
    j = json.loads(p.read_text())
    edit(j)
    p.write_text(json.dumps(j))
    return p


def _unigram(d: Path) -> Path:
    from tokenizers import Tokenizer, models

    (d / "uni").mkdir()
    p = d / "uni" / "tokenizer.json"
    Tokenizer(models.Unigram([("<unk>", 0.0), ("a", -1.0), ("b", -2.0)], unk_id=0)).save(str(p))
    return p


def _json_array(d: Path) -> Path:
    (d / "arr").mkdir(exist_ok=True)
    p = d / "arr" / "tokenizer.json"
    p.write_text("[1, 2]")
    return p


@pytest.mark.parametrize("make, needles", [
    (lambda d: _base(d, lambda ls: ls[:100] + [ls[100][:5]]), [":101:", "expected 'base64 rank'"]),
    (lambda d: _base(d, lambda ls: ls[:100]), ["156 single-byte tokens are missing"]),
    (lambda d: _base(d, lambda ls: ls + [_line(b"xy", 257)]), [":259:", "rank 257 already given"]),
    (lambda d: _base(d, lambda ls: ls[:257] + [_line(b"hel", 300)]), ["id 257"]),
    (lambda d: _base(d, lambda ls: ls + [b" 258\n"]), [":259:", "expected 'base64 rank'"]),
    (lambda d: _base(d, lambda ls: []), ["no tokens"]),
    (lambda d: _hf(d, lambda j: j["model"]["vocab"].update({"": 258})), ["token id 258 is empty"]),
    (lambda d: _hf(d, lambda j: j["model"]["vocab"].update({"zz": 257})), ["id 257 is given to two tokens"]),
    (_unigram, ["Unigram, not BPE"]),
    (_json_array, ["no model; expected a Hugging Face tokenizer.json"]),
], ids=["truncated", "truncated-at-a-line", "duplicate-rank", "missing-ranks", "zero-length-token", "empty",
        "hf-zero-length-token", "hf-duplicate-id", "unigram", "json-array"])
def test_warm_start_bases(d, make, needles):
    p = make(d)
    r = runner.invoke(app, ["train", "good.txt", "--out", "o", "--warm-start", str(p), "--merges", "5", "-q"])
    _one_line(r, str(p), *needles)
    assert not (d / "o").exists() and not (d / ".o.partial").exists()


# --- the run file of an interrupted run, then --resume --------------------------------------------


@pytest.fixture(scope="module")
def interrupted(tmp_path_factory) -> Path:
    """A run killed (SIGKILL) right after its first checkpoint: its staging folder."""
    d = tmp_path_factory.mktemp("killed")
    (d / "good.txt").write_text(GOOD_TEXT)
    p = subprocess.run([sys.executable, str(FAULTS), "--every", "0", "--kill-at", "1", "--", "train", "good.txt",
                        "--out", "tok", "--merges", "50", "-q"], cwd=d, capture_output=True, text=True, timeout=300)
    assert p.returncode == -9, p.stderr
    assert (d / ".tok.partial" / "run.duckdb").is_file()
    return d / ".tok.partial"


def _truncate(run: Path) -> None:
    data = run.read_bytes()
    run.write_bytes(data[:len(data) // 3])


def _foreign(run: Path) -> None:
    import duckdb

    run.unlink()
    for p in run.parent.glob("run.duckdb.wal"):
        p.unlink()
    con = duckdb.connect(str(run))
    con.execute("create table sales (a int)")
    con.close()


@pytest.mark.parametrize("spoil, needles", [
    (_truncate, ["run file cannot be read (truncated)", "cannot continue past this: start over with --force"]),
    (lambda run: run.write_text("not a database\n"),
     ["run file cannot be read (not a DuckDB file)", "start over with --force"]),
    (_foreign, ["a DuckDB file of another program", "'sales'", "start over with --force"]),
], ids=["truncated", "not-duckdb", "another-programs"])
def test_resume_over_a_spoilt_run_file(d, interrupted, spoil, needles):
    """Once: "cannot create the run file (...); check that the folder is writable ... rerun with
    --resume" (a loop), or a foreign DuckDB file resumed and published with its tables."""
    shutil.copytree(interrupted, d / ".tok.partial")
    spoil(d / ".tok.partial" / "run.duckdb")
    r = runner.invoke(app, ["train", "good.txt", "--out", "tok", "--merges", "50", "-q", "--resume"])
    _one_line(r, "tok/run.duckdb", *needles)
    assert not (d / "tok").exists()


def test_resume_while_another_process_holds_the_run_file(interrupted, monkeypatch):
    """(In the killed run's folder, where its sources are: a copy of its staging folder for --out held.)"""
    monkeypatch.chdir(interrupted.parent)
    shutil.copytree(interrupted, interrupted.parent / ".held.partial")
    run = interrupted.parent / ".held.partial" / "run.duckdb"
    holder = subprocess.Popen([sys.executable, "-c", "import duckdb, sys, time; c = duckdb.connect(sys.argv[1]); "
                               "print('open', flush=True); time.sleep(120)", str(run)], stdout=subprocess.PIPE, text=True)
    args = ["train", "good.txt", "--out", "held", "--merges", "50", "-q", "--resume"]
    try:
        assert holder.stdout.readline().strip() == "open"
        r = runner.invoke(app, args)
        _one_line(r, "held/run.duckdb", f"another process (PID {holder.pid}) holds the run file open",
                  "rerun with --resume")
    finally:
        holder.kill()
        holder.wait()
    r = runner.invoke(app, args)
    assert r.exit_code == 0, r.output  # the progress was kept: it continues once the file is free


# --- convert / verify / eval / sql / show -----------------------------------------------------------


@pytest.fixture(scope="module")
def tok(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("tok")
    (d / "good.txt").write_text(GOOD_TEXT)
    r = runner.invoke(app, ["train", str(d / "good.txt"), "--out", str(d / "tok"), "--merges", "5", "-q"])
    assert r.exit_code == 0, r.output
    return d / "tok"


def _empty(d: Path) -> str:
    (d / "empty").mkdir(exist_ok=True)
    return str(d / "empty")


@pytest.mark.parametrize("args, needles", [
    (lambda d, t: ["convert", f"{t}/tokenizer.tiktoken", f"{t}/tokenizer.tiktoken"], ["tokenizer.tiktoken"]),
    (lambda d, t: ["convert", _empty(d), "x.tiktoken"], ["empty", "no .tiktoken file here"]),
    (lambda d, t: ["convert", str(_json_array(d)), "x.tiktoken"], ["tokenizer.json", "no model"]),
    (lambda d, t: ["verify", _empty(d), "good.txt"], ["empty", "no .tiktoken file here"]),
    (lambda d, t: ["verify", str(_json_array(d)), "good.txt"], ["a JSON list, not a Hugging Face tokenizer.json"]),
    (lambda d, t: ["verify", str(t), f"{t}/tokenizer.tiktoken"], ["tokenizer.tiktoken", "unsupported file type"]),
    (lambda d, t: ["eval", _empty(d), "--data", "good.txt"], ["empty", "neither a .tiktoken file nor tokenizer.json"]),
    (lambda d, t: ["eval", str(_json_array(d)), "--data", "good.txt"], ["tokenizer.json", "cannot load it"]),
    (lambda d, t: ["eval", str(t), "--data", _empty(d)], ["empty", "no .parquet"]),
    (lambda d, t: ["sql", _empty(d), "select 1"], ["no run file here"]),
    (lambda d, t: ["sql", str(_json_array(d)), "select 1"], ["not a DuckDB file, so not a run file"]),
    (lambda d, t: ["sql", "good.txt", "select 1"], ["not a DuckDB file, so not a run file"]),
    (lambda d, t: ["sql", str(t), "select 1", "--parquet", f"{t}/run.duckdb"], ["would overwrite a file of the run"]),
    (lambda d, t: ["show", _empty(d)], ["no run file here"]),
    (lambda d, t: ["train", "-good.txt", "--out", "o"], ["No such option: -g", "written ./-NAME"]),
    (lambda d, t: ["train", "good.txt", "--merges"], ["'--merges' requires an argument", "--help"]),
    (lambda d, t: ["nosuch"], ["No such command 'nosuch'", "see toktok --help"]),
], ids=["convert-same-path", "convert-empty-folder", "convert-json-array", "verify-empty-folder",
        "verify-json-array", "verify-a-tokenizer-as-text", "eval-empty-folder", "eval-json-array",
        "eval-empty-data-folder", "sql-empty-folder", "sql-json-array", "sql-a-text-file",
        "sql-parquet-over-the-run-file", "show-empty-folder", "path-starting-with-dash", "option-without-value",
        "unknown-command"])
def test_commands_on_odd_paths(d, tok, args, needles):
    before = sorted(p.name for p in tok.iterdir())
    shutil.copy(d / "good.txt", d / "-good.txt")
    r = runner.invoke(app, args(d, tok))
    _one_line(r, *needles)
    assert sorted(p.name for p in tok.iterdir()) == before


def test_paths_with_dashes_spaces_and_non_ascii(d):
    """Such paths work as they are (``./-x.txt``, spaces, non-ASCII) in and out, through every command."""
    src = d / "my fïlé ü.txt"
    src.write_text(GOOD_TEXT)
    shutil.copy(src, d / "-dash.txt")
    out = d / "tök ü" / "-o"
    r = runner.invoke(app, ["train", str(src), "./-dash.txt", "--out", str(out), "--merges", "5", "-q"])
    assert r.exit_code == 0, r.output
    for args in (["verify", str(out), str(src)], ["eval", str(out), "--data", "./-dash.txt"],
                 ["sql", str(out), "select count(*) from inputs"], ["show", str(out)],
                 ["convert", f"{out}/tokenizer.tiktoken", str(d / "-hf ü")]):
        r = runner.invoke(app, args)
        assert r.exit_code == 0, (args, r.output)
    assert (d / "-hf ü" / "tokenizer.json").is_file()
