"""End to end through the CLI: files written, ids identical in tiktoken, HF and transformers,
byte-identical reruns, and one clear line with exit code 2 for every bad input."""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import duckdb
import polars as pl
import pyarrow as pa
import pytest
import tiktoken
from conftest import FIXTURES
from typer.testing import CliRunner

import toktok
from toktok.cli import app
from toktok.formats.hf import load_hf

FILES = ["tokenizer.tiktoken", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"]
SPECIALS = ["<|endoftext|>", "<|pad|>"]
runner = CliRunner()


def _train(out: Path, *extra: str, sources=(str(FIXTURES),), merges="300"):
    args = ["train", *sources, "--out", str(out), "--merges", merges, "-q", *extra]
    for s in SPECIALS:
        args += ["--special-token", s]
    return runner.invoke(app, args)


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("run") / "tok"
    r = _train(out)
    assert r.exit_code == 0, r.output
    return out


def test_files_and_vocab_size(trained):
    for f in FILES + ["run.duckdb"]:
        assert (trained / f).is_file(), f
    enc = toktok.load_encoding(trained)
    assert isinstance(enc, tiktoken.Encoding)
    assert enc.n_vocab == 256 + 1161 + 300 + len(SPECIALS)
    assert enc.encode("<|endoftext|>", allowed_special="all") == [256 + 1161 + 300]
    assert load_hf(trained).get_vocab_size() == enc.n_vocab


def test_ids_identical_in_tiktoken_hf_and_transformers(trained):
    from transformers import PreTrainedTokenizerFast

    enc = toktok.load_encoding(trained)
    hf = load_hf(trained)
    tf = PreTrainedTokenizerFast.from_pretrained(str(trained))
    texts = pl.read_parquet(FIXTURES / "sample.parquet")["text"].head(60).to_list()
    texts += ["Hello<|endoftext|>world<|pad|>", "ΑΒΓ  мир\r\n\r\n  中文 12345 DON'T 😀👍🏽", "\t\tif (x >= 10) { return; }"]
    for t in texts:
        ids = enc.encode(t, allowed_special="all")
        assert hf.encode(t, add_special_tokens=False).ids == ids
        assert tf(t, add_special_tokens=False)["input_ids"] == ids
        assert enc.decode(ids) == t and tf.decode(ids) == t


def test_run_file_has_words_merges_and_provenance(trained):
    con = duckdb.connect(str(trained / "run.duckdb"), read_only=True)
    assert con.execute("select count(*) from merges where not reused").fetchone()[0] == 300
    assert con.execute("select min(count) > 0, count(*) from words").fetchone()[0] is True
    cfg = json.loads(con.execute("select value from meta where key = 'config'").fetchone()[0])
    assert cfg["merges"] == 300 and cfg["special_tokens"] == SPECIALS
    assert "duckdb" in json.loads(con.execute("select value from meta where key = 'versions'").fetchone()[0])
    kinds = dict(con.execute("select kind, count(*) from vocab group by kind").fetchall())
    assert kinds == {"byte": 256, "hardcoded": 1161, "merge": 300, "special": 2}
    # merges are recorded with non-increasing counts only where no reuse/new pair intervenes;
    # the first merge is the most frequent pair of the corpus
    first = con.execute("select count from merges order by merge_index limit 1").fetchone()[0]
    assert first == con.execute("select max(count) from merges").fetchone()[0]


def test_rerun_is_byte_identical(trained, tmp_path):
    r = _train(tmp_path / "again")
    assert r.exit_code == 0, r.output
    for f in FILES:
        assert (tmp_path / "again" / f).read_bytes() == (trained / f).read_bytes(), f


def test_zero_merges(tmp_path):
    r = _train(tmp_path / "zero", merges="0")
    assert r.exit_code == 0, r.output
    assert toktok.load_encoding(tmp_path / "zero").n_vocab == 256 + 1161 + 2


def test_more_merges_than_the_corpus_allows(tmp_path):
    src = tmp_path / "tiny.txt"
    src.write_text("abc abc")
    r = _train(tmp_path / "o", sources=(str(src),), merges="50")
    assert r.exit_code == 0, r.output
    assert "allows only" in r.output
    assert toktok.load_encoding(tmp_path / "o").n_vocab < 256 + 1161 + 50 + 2


def test_verify_command(trained):
    r = runner.invoke(app, ["verify", str(trained), str(FIXTURES / "notes.txt")])
    assert r.exit_code == 0, r.output
    assert "parity ok" in r.output


GOLDEN = Path(__file__).parent / "golden" / "sample_1000.json"


def test_golden_run(tmp_path):
    """A fixed fixture run: its .tiktoken must not change unless the training definition does."""
    out = tmp_path / "g"
    r = runner.invoke(app, ["train", str(FIXTURES / "sample.parquet"), "--out", str(out), "--merges", "1000", "-q"])
    assert r.exit_code == 0, r.output
    data = (out / "tokenizer.tiktoken").read_bytes()
    enc = toktok.load_encoding(out)
    got = {
        "sha256": hashlib.sha256(data).hexdigest(),
        "first_merges": [enc.decode_single_token_bytes(i).decode("utf-8", "replace") for i in range(1417, 1437)],
        "n_vocab": enc.n_vocab,
    }
    if os.environ.get("TOKTOK_WRITE_GOLDEN"):  # pragma: no cover - only when the definition changes on purpose
        GOLDEN.parent.mkdir(exist_ok=True)
        GOLDEN.write_text(json.dumps(got, indent=1, ensure_ascii=False) + "\n")
    assert got == json.loads(GOLDEN.read_text())


# --- bad input: one line, exit 2, nothing written ---------------------------------------------


def _bad(tmp_path, args, needle, out=None):
    out = out or tmp_path / "out"
    r = runner.invoke(app, ["train", *args, "--out", str(out), "-q"])
    assert r.exit_code == 2, r.output
    lines = [ln for ln in r.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("toktok: error:"), r.output
    assert needle in lines[0], lines[0]
    assert "Traceback" not in r.output
    assert not out.exists()
    assert not [p for p in out.parent.iterdir() if p.name.startswith(f".{out.name}.partial")]
    return lines[0]


def test_missing_file(tmp_path):
    _bad(tmp_path, [str(tmp_path / "nope.parquet")], "nope.parquet")


def test_no_text_column(tmp_path):
    p = tmp_path / "t.parquet"
    pl.DataFrame({"body": ["hello"]}).write_parquet(p)
    line = _bad(tmp_path, [str(p)], "t.parquet")
    assert "body" in line and "--text-column" in line


def test_undecodable_bytes(tmp_path):
    p = tmp_path / "bad.txt"
    p.write_bytes(b"hello \xff world")
    line = _bad(tmp_path, [str(p)], "bad.txt")
    assert "6" in line  # the byte offset


def test_empty_corpus(tmp_path):
    p = tmp_path / "empty.parquet"
    pl.DataFrame({"text": ["", ""]}).write_parquet(p)
    _bad(tmp_path, [str(p)], "empty")


@pytest.mark.parametrize("n", ["-5", "ten"])
def test_bad_merges(tmp_path, n):
    _bad(tmp_path, [str(FIXTURES / "notes.txt"), "--merges", n], "--merges")


def test_special_token_twice(tmp_path):
    _bad(tmp_path, [str(FIXTURES / "notes.txt"), "-s", "<|x|>", "-s", "<|x|>"], "<|x|>")


def test_existing_output_is_kept_without_force(tmp_path, trained):
    import shutil

    out = tmp_path / "keep"
    shutil.copytree(trained, out)
    before = {f: (out / f).read_bytes() for f in FILES}
    r = runner.invoke(app, ["train", str(FIXTURES / "notes.txt"), "--out", str(out), "-q"])
    assert r.exit_code == 2 and "--force" in r.output
    assert {f: (out / f).read_bytes() for f in FILES} == before
    # a failing run with --force leaves the old tokenizer in place too
    r = runner.invoke(app, ["train", str(tmp_path / "missing.txt"), "--out", str(out), "--force", "-q"])
    assert r.exit_code == 2
    assert {f: (out / f).read_bytes() for f in FILES} == before


def test_cli_process_prints_one_line(tmp_path):
    # the installed console script, as a user runs it: no traceback, exit code 2
    exe = Path(sys.executable).parent / "toktok"
    r = subprocess.run([str(exe), "train", str(tmp_path / "missing"), "--out", str(tmp_path / "o")],
                       capture_output=True, text=True)
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1 and "missing" in r.stderr and "Traceback" not in r.stderr


# --- where --out goes: `~`, symlinks ------------------------------------------------------------


def test_tilde_in_out_and_output_is_the_home_folder(tmp_path, monkeypatch):
    """`~` in --out and output: is expanded as in sources (a literal ./~ folder once appeared)."""
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(work)
    src = str(FIXTURES / "notes.txt")
    r = runner.invoke(app, ["train", src, "--out", "~/tok", "--merges", "5", "-q"])
    assert r.exit_code == 0, r.output
    assert (home / "tok" / "tokenizer.tiktoken").is_file()
    cfg = work / "run.yaml"
    cfg.write_text(f"output: ~/cfg/c.tiktoken\nphases: [{{name: a, merges: 5, sources: [{src}]}}]\n")
    assert runner.invoke(app, ["-c", str(cfg), "-q"]).exit_code == 0
    assert (home / "cfg" / "c.tiktoken").is_file() and (home / "cfg" / "run.duckdb").is_file()
    # home holds other files: the .tiktoken alone there, the rest in NAME.toktok beside it
    cfg.write_text(f"output: ~/h.tiktoken\nphases: [{{name: a, merges: 5, sources: [{src}]}}]\n")
    assert runner.invoke(app, ["-c", str(cfg), "-q"]).exit_code == 0
    assert sorted(os.listdir(home)) == ["cfg", "h.tiktoken", "h.toktok", "tok"]
    assert sorted(os.listdir(work)) == ["run.yaml"]  # no literal ~ here


def test_out_through_a_symlink_replaces_the_target_and_keeps_the_link(tmp_path):
    """--force over a symlinked --out once left a `.NAME.old-PID` link behind: the link's target
    folder is replaced, the link stays, nothing is left beside either."""
    real_parent, link_parent = tmp_path / "disk", tmp_path / "here"
    real_parent.mkdir()
    link_parent.mkdir()
    real, link = real_parent / "tok", link_parent / "tok"
    assert _train(real, merges="20").exit_code == 0
    link.symlink_to(real, target_is_directory=True)
    r = _train(link, "--force", merges="30")
    assert r.exit_code == 0, r.output
    assert link.is_symlink() and os.readlink(link) == str(real)
    assert toktok.load_encoding(link).n_vocab == toktok.load_encoding(real).n_vocab == 256 + 1161 + 30 + 2
    assert os.listdir(link_parent) == ["tok"] and os.listdir(real_parent) == ["tok"]
    # a link to a folder not there yet: made, and the link now leads to it
    dangling = link_parent / "later"
    dangling.symlink_to(real_parent / "later", target_is_directory=True)
    assert _train(dangling, merges="10").exit_code == 0
    assert dangling.is_symlink() and (real_parent / "later" / "tokenizer.tiktoken").is_file()
    assert sorted(os.listdir(real_parent)) == ["later", "tok"]


# --- data is printed as it is: never Rich markup, control characters escaped (issue 13 item 6) ---

TRICKY = ["[INST]", "[/INST]", "[bold]x[/bold]", "\x1b[31m", ":fire:", "[/]"]
WIDE = {"COLUMNS": "400"}  # long tmp paths are not folded across lines


@pytest.fixture(scope="module")
def tricky_run(tmp_path_factory) -> dict:
    """A run whose specials, words, paths and warnings look like Rich markup or hold escapes."""
    d = tmp_path_factory.mktemp("tricky")
    folder = d / "[red]data[" / "red]"  # .../[red]data[/red]
    folder.mkdir(parents=True)
    src = folder / "we[b]ird\x1b[2J.txt"  # a file name holding an ANSI "clear screen"
    src.write_text("[INST] hello [/INST] [bold]x[/bold] \x1b[31mred\x1b[0m :fire: [/] [link=x]y[/link] \u202eevil\n" * 30)
    (folder / "notes[i]\x1b[5m.md").write_text("not data")  # skipped: named in a warning
    (d / "[b]out[").mkdir()
    out = d / "[b]out[" / "b]"  # .../[b]out[/b]
    args = ["train", str(folder), "--out", str(out), "--merges", "40", "-q"]
    for t in TRICKY:
        args += ["-s", t]
    r = runner.invoke(app, args)
    return {"out": out, "src": src, "folder": folder, "train": r}


def _literal(r, *needles: str) -> str:
    assert r.exit_code == 0, r.output
    assert "Traceback" not in r.output
    assert "\x1b" not in r.output and "\u202e" not in r.output  # escapes are shown, never sent raw
    for n in needles:
        assert n in r.output, (n, r.output)
    return r.output


def test_train_summary_and_warnings_print_data_literally(tricky_run):
    out, folder = tricky_run["out"], tricky_run["folder"]
    text = _literal(tricky_run["train"], f"toktok: wrote {out}", "toktok: warning: ", "notes[i]\\x1b[5m.md")
    assert f"{folder}: skipped 1 file of other types (1 .md: " in " ".join(text.split())


def test_show_prints_data_literally(tricky_run):
    r = runner.invoke(app, ["show", str(tricky_run["out"])], env=WIDE)
    text = " ".join(_literal(r).split())
    assert "specials [INST] [/INST] [bold]x[/bold] \\x1b[31m :fire: [/]" in text
    assert "we[b]ird\\x1b[2J.txt" in text and "notes[i]\\x1b[5m.md" in text
    assert f"toktok run {tricky_run['out']}" in text


def test_sql_prints_data_literally(tricky_run):
    out = str(tricky_run["out"])
    r = runner.invoke(app, ["sql", out, "select shown from vocab_text where kind = 'special' order by id"], env=WIDE)
    text = _literal(r)
    for t in TRICKY:
        assert (t if t != "\x1b[31m" else "\\x1b[31m") in text, t
    r = runner.invoke(app, ["sql", out, "select shown, count from words_text order by count desc, shown"], env=WIDE)
    _literal(r, "│ [/  ", "│ ]y  ", "=x", "\\u202e")  # words: pre-tokenizer pieces of "[link=x]y[/link]"
    # names and values of the query's own, a one-row wide table, and repeated column names
    r = runner.invoke(app, ["sql", out, "select '[/]' as \"[bold]\", '\x1b[2J' as e, 1 as a, 2 as a"], env=WIDE)
    _literal(r, "[bold]", "[/]", "\\x1b[2J")
    r = runner.invoke(app, ["sql", out, "select 1 a, 2 b, 3 c, 4 d, 5 e, 6 f, '[/x]' as \"[i]g\", 8 h"], env=WIDE)
    assert "[i]g" in _literal(r, "[/x]") and "│ h " in r.output


def test_eval_prints_data_literally(tricky_run):
    out, src = str(tricky_run["out"]), str(tricky_run["src"])
    r = runner.invoke(app, ["eval", out, "--data", src, "--by", "file"], env=WIDE)
    _literal(r, "b]", "we[b]ird\\x1b[2J.txt")


def test_renderers_are_literal_on_a_console_that_reads_markup():
    """A notebook's Console reads markup and emoji codes by default: the renderables hold Text."""
    from rich.console import Console

    from toktok.insight.report import arrow_table, eval_table, printable, run_summary

    con = Console(record=True, width=300, force_terminal=True)
    con.print(arrow_table(pa.table({"[b]": ["[/INST]", ":fire:", "a\x1b[31mb"]})))
    con.print(eval_table([{"subset": "[/x]", "by": None, "tokenizer": "[bold]t[/bold]", "docs": 1, "bytes": 3,
                           "bytes_per_token": 1.5, "tokens_per_word": 1.0, "vocab_utilization": 0.5}], "w"))
    con.print(run_summary({"run": "[/r]", "config": {"special_tokens": ["[/INST]"], "sources": ["[i]s"]},
                           "warnings": ["[/w] :fire:"], "inputs": [{"path": "[/p]", "kind": "txt", "phase": "[/ph]",
                                                                   "docs": 1, "text_bytes": 2}]}))
    text = con.export_text()
    for n in ("[b]", "[/INST]", ":fire:", "a\\x1b[31mb", "[/x]", "[bold]t[/bold]", "[/r]", "[i]s", "[/w] :fire:",
              "[/p]", "[/ph]"):
        assert n in text, n
    assert "🔥" not in text
    assert printable("a\x00\x1b\x7f\x9b\u202e\u2066\ud800\n\t\\é中") == "a\\x00\\x1b\\x7f\\x9b\\u202e\\u2066\\ud800\\n\\t\\é中"


def test_help_texts_are_shown_as_written():
    """Typer reads help texts as Rich markup: "[ray]" in "toktok[ray]" vanished. Every help text of
    every command renders to itself ("\\[" is an escaped "[")."""
    import typer
    from rich.text import Text

    def texts(cmd, path):
        yield path, cmd.help or ""
        for p in cmd.params:
            yield f"{path} {p.name}", getattr(p, "help", None) or ""
        for name, sub in getattr(cmd, "commands", {}).items():
            yield from texts(sub, f"{path} {name}")

    for where, h in texts(typer.main.get_command(app), "toktok"):
        assert Text.from_markup(h).plain == h.replace("\\[", "["), where
    r = runner.invoke(app, ["train", "--help"], env={"COLUMNS": "250"})
    assert r.exit_code == 0 and "pip install 'toktok[ray]'" in r.output


def test_help_texts_are_escaped_as_rich_escapes_them():
    """The CLI escapes help texts without Rich's markup parser (``cli._escape``, kept off every
    command's start): as ``rich.markup.escape`` does, on every option's help and on markup-like text."""
    from rich.markup import escape

    from toktok.cli import _escape
    from toktok.options import OPTIONS

    texts = [o.help for o in OPTIONS] + [h for o in OPTIONS for _, h in o.key_flags.values()]
    texts += ["toktok[ray]", "[/INST] and [bold]x[/bold]", "a \\[b] c", "ends in \\", "ends in \\\\", "[#fff] [@x] [a=1]", ""]
    for t in texts:
        assert _escape(t) == escape(t), t


def test_help_shows_whole_numbers_and_sizes_as_such():
    """Options read as text (for toktok's own messages) still say what they take in --help."""
    import re

    r = runner.invoke(app, ["train", "--help"], env={"COLUMNS": "250"})
    assert r.exit_code == 0
    metavar = {m.group(1): m.group(2) for m in re.finditer(r"(--[a-z-]+)\s+(?:-\w\s+)?(INTEGER|SIZE|<str>|TEXT)\b", r.output)}
    for flag in ("--merges", "--vocab-size", "--threads", "--seed", "--pad-to-multiple-of", "--min-frequency"):
        assert metavar.get(flag) == "INTEGER", (flag, metavar)
    assert metavar.get("--budget") == metavar.get("--memory-limit") == "SIZE"


def test_the_summary_gives_the_vocabulary_s_parts(tmp_path):
    r = runner.invoke(app, ["train", str(FIXTURES / "notes.txt"), "--out", str(tmp_path / "o"), "--merges", "120",
                            "-s", "<|endoftext|>", "--force"], env={"COLUMNS": "200"})
    assert r.exit_code == 0, r.output
    line = next(ln for ln in r.output.splitlines() if "vocabulary" in ln)
    assert f"{256 + 1161 + 120 + 1:,} tokens = 256 bytes + 1,161 hardcoded + 120 merges + 1 special" in line, line


HEAVY = ("numba", "llvmlite", "duckdb", "pyarrow", "polars", "numpy", "tokenizers", "tiktoken")


def test_help_loads_no_stage_library():
    """``toktok --help`` and ``toktok train --help`` (the CLI's import and its option table) load
    none of the libraries a stage needs (Numba, DuckDB, Arrow, Polars, NumPy, the tokenizers):
    each is imported by the stage that uses it. Checked in a fresh interpreter."""
    code = ("import sys\n"
            "from toktok.cli import app\n"
            "for args in (['--help'], ['train', '--help']):\n"
            "    try:\n"
            "        app(args)\n"
            "    except SystemExit:\n"
            "        pass\n"
            f"print(','.join(m for m in {HEAVY!r} if m in sys.modules), file=sys.stderr)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "--merges" in r.stdout
    assert r.stderr.strip().splitlines()[-1:] in ([], [""]), r.stderr


def _help_and_refusal(code: str) -> tuple[subprocess.CompletedProcess, subprocess.CompletedProcess]:
    """Python ``code`` (which runs the command on its arguments) with ``--help``, then with a
    ``train`` the command refuses (no sources)."""
    return tuple(subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=120)
                 for args in (["--help"], ["train", "--merges", "3"]))


def test_the_command_ends_without_pythons_last_collection():
    """``toktok`` (``cli.main``) freezes what the command made once it is done, so that Python's
    exit does not collect it (0.1-0.3 s of a run), and keeps the command's exit code."""
    code = ("import atexit, gc, sys\n"
            "atexit.register(lambda: print('frozen', gc.get_freeze_count() > 0))\n"
            "from toktok.cli import main\n"
            "sys.argv = ['toktok', *sys.argv[1:]]\n"
            "main()\n")
    ok, bad = _help_and_refusal(code)
    assert (ok.returncode, bad.returncode) == (0, 2), bad.stderr
    assert ok.stdout.splitlines()[-1] == bad.stdout.splitlines()[-1] == "frozen True"


def test_the_command_ends_at_once_with_its_code_output_and_exit_functions(tmp_path):
    """``toktok`` (the console script) and ``python -m toktok`` (``toktok.__main__.command``) end
    with ``os._exit`` once the threads are joined, the ``atexit`` functions run and the output
    flushed: the same exit codes, the whole output, the functions run, the run's files published."""
    code = ("import atexit, runpy, sys\n"
            "atexit.register(lambda: print('exit functions ran', flush=True))\n"
            "sys.argv = ['toktok', *sys.argv[1:]]\n"
            "runpy.run_module('toktok', run_name='__main__')\n"
            "print('not reached')\n")
    ok, bad = _help_and_refusal(code)
    assert (ok.returncode, bad.returncode) == (0, 2), bad.stderr
    assert "Commands" in ok.stdout and ok.stdout.splitlines()[-1] == bad.stdout.splitlines()[-1] == "exit functions ran"
    assert "not reached" not in ok.stdout + bad.stdout
    assert bad.stderr.strip().splitlines() == ["toktok: error: no sources given; pass files, folders or globs to train on"]
    run = subprocess.run([sys.executable, "-m", "toktok", "train", str(FIXTURES / "notes.txt"), "--merges", "20",
                          "--out", str(tmp_path / "a")], capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr
    assert "parity" in run.stdout and (tmp_path / "a" / "tokenizer.json").is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a"]  # no staging folder left
    assert not list((tmp_path / "a").glob("*.tmp"))


def test_python_m_toktok_names_itself_toktok_in_hints():
    """Under ``python -m toktok`` a usage error's hint and the usage line name the command
    ``toktok`` (Click would say ``python -m toktok``, and the hint showed ``toktok -m toktok``)."""
    bad = subprocess.run([sys.executable, "-m", "toktok", "count", "-q"], capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2
    assert "see toktok count --help" in bad.stderr and "-m toktok" not in bad.stderr, bad.stderr
    ok = subprocess.run([sys.executable, "-m", "toktok", "count", "--help"], capture_output=True, text=True, timeout=120)
    assert ok.returncode == 0 and "Usage: toktok count" in " ".join(ok.stdout.split()), ok.stdout[:300]


def test_help_and_parsing_load_no_pydantic_markdown_or_pygments(tmp_path):
    """The CLI's fixed cost: help is rendered without Markdown or Pygments (Typer's renderer
    imports them for features toktok does not use) and ``toktok train``'s options are read
    without pydantic (Typer's per-parameter adapters), while a later import still gets the real
    modules. Checked in a fresh interpreter."""
    code = ("import sys\n"
            "from toktok.cli import app\n"
            f"for args in (['--help'], ['train', '--help'], ['train', {str(tmp_path / 'nosuch.txt')!r}, '-o',\n"
            f"             {str(tmp_path / 'o')!r}, '-n', '10', '-s', '<a>', '--no-hardcoded', '-q']):\n"
            "    try:\n"
            "        app(args)\n"
            "    except SystemExit as e:\n"
            "        print('exit', e.code, file=sys.stderr)\n"
            "print(','.join(m for m in ('pydantic', 'markdown_it', 'pygments') if m in sys.modules), file=sys.stderr)\n"
            "import rich.markdown, typer.rich_utils\n"
            "print(type(typer.rich_utils.Markdown('x')) is rich.markdown.Markdown, file=sys.stderr)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    lines = r.stderr.strip().splitlines()
    assert lines[:2] == ["exit 0", "exit 0"] and "nosuch.txt" in lines[2] and lines[3] == "exit 2", r.stderr
    assert lines[4:] == ["", "True"], r.stderr
    assert "--merges" in r.stdout and "Commands" in r.stdout


def test_a_one_document_run_never_imports_numba(tmp_path):
    """A run small enough for the reference paths (one line, 10 merges) calls no kernel, so it
    never imports Numba or LLVM (``_kernels.njit`` hands a kernel to Numba on its first call),
    and records Numba's version all the same. Checked in a fresh interpreter."""
    (tmp_path / "one.txt").write_text("The quick brown fox jumps over the lazy dog.\n")
    code = ("import sys\n"
            "from toktok.cli import app\n"
            "try:\n"
            f"    app(['train', {str(tmp_path / 'one.txt')!r}, '--merges', '10', '-o', {str(tmp_path / 'out')!r}])\n"
            "except SystemExit as e:\n"
            "    assert not e.code, e.code\n"
            "print(','.join(m for m in ('numba', 'llvmlite', 'pandas') if m in sys.modules), file=sys.stderr)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert r.stderr.strip().splitlines()[-1:] in ([], [""]), r.stderr
    assert " 1 document, " in r.stdout, r.stdout  # one, not "1 documents"
    import duckdb

    with duckdb.connect(str(tmp_path / "out" / "run.duckdb"), read_only=True) as con:
        meta = dict(con.execute("select key, value from meta").fetchall())
    assert '"numba"' in meta["versions"]


def test_a_small_run_from_a_large_base_never_imports_numba_and_writes_what_the_kernels_write(tmp_path):
    """Warm-started from a base of 12,000 tokens (past the export's 8,192 for Python), a one-line
    run still loads no kernel (``formats.spell.UNLOADED_LINES``, ``formats.splits.UNLOADED_TOKENS``:
    no compiling on a first run); this process, whose Numba is loaded, spells and splits the same
    vocabulary with the kernels: the same files. Checked in a fresh interpreter."""
    import base64
    import random

    from toktok import _kernels

    rng, tokens = random.Random(0), [bytes([i]) for i in range(256)]
    seen = set(tokens)
    while len(tokens) < 12_000:  # each token two earlier ones: every token has a split
        t = rng.choice(tokens) + rng.choice(tokens[:3000])
        if len(t) <= 12 and t not in seen:
            seen.add(t)
            tokens.append(t)
    base = tmp_path / "base.tiktoken"
    base.write_text("".join(f"{base64.b64encode(t).decode()} {i}\n" for i, t in enumerate(tokens)))
    (tmp_path / "one.txt").write_text("The quick brown fox jumps over the lazy dog.\n")
    code = ("import sys, toktok\n"
            f"toktok.train([{str(tmp_path / 'one.txt')!r}], out={str(tmp_path / 'fresh')!r}, merges=10, "
            f"warm_start={str(base)!r}, verbose=False)\n"
            "print(','.join(m for m in ('numba', 'llvmlite') if m in sys.modules))\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.strip() == "", r.stdout
    _kernels.load()
    toktok.train([str(tmp_path / "one.txt")], out=str(tmp_path / "here"), merges=10, warm_start=str(base),
                 verbose=False)
    for name in ("tokenizer.json", "tokenizer.tiktoken"):
        assert (tmp_path / "fresh" / name).read_bytes() == (tmp_path / "here" / name).read_bytes(), name


def test_a_library_first_imported_during_train_finds_pandas_missing_not_broken():
    """``toktok train`` keeps pandas unimportable while it runs (``_without_pandas``); a library
    first imported then (Polars asks for pandas' spec as it loads) takes pandas as not installed
    instead of failing. Checked in a fresh interpreter."""
    code = ("import sys, types\n"
            "from toktok.cli import _without_pandas\n"
            "with _without_pandas(types.SimpleNamespace(engine='local')):\n"
            "    import polars\n"
            "    assert polars.Series(['a']).to_list() == ['a']\n"
            "print('pandas' in sys.modules)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.strip() == "False"


def test_a_fifo_in_the_sources_never_blocks_train_or_eval(tmp_path, trained):
    """Through the console script, with a timeout: a FIFO in a folder (or matched by a glob) is
    skipped with a warning, never opened."""
    d = tmp_path / "d"
    d.mkdir()
    (d / "a.txt").write_text("hello world, hello there\n" * 20)
    os.mkfifo(d / "b.txt")
    (d / "c.jsonl").symlink_to(d / "nowhere.jsonl")
    exe = Path(sys.executable).parent / "toktok"
    for src in (str(d), str(d / "*.txt")):
        out = tmp_path / f"o{len(src)}"
        r = subprocess.run([str(exe), "train", src, "--out", str(out), "--merges", "5", "-q"],
                           capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr
        assert f"toktok: warning: {src}: skipped" in r.stderr and "b.txt" in r.stderr
        assert ("dangling symlink" in r.stderr) == (src == str(d))
    r = subprocess.run([str(exe), "eval", str(trained), "--data", str(d)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "toktok: warning: " in r.stderr and "b.txt" in r.stderr and "c.jsonl" in r.stderr


def test_a_one_document_run_never_loads_polars_or_numba(tmp_path):
    # Polars is the count engine's own where it samples, sums checkpoints or counts a custom
    # regex; a run whose text the reference counts whole never needs it: ~40 MB and ~0.07 s
    # of a one-document run (bench/probes/floor.py), the kernels built ahead or not
    one = tmp_path / "one.txt"
    one.write_text("The quick brown fox jumps over the lazy dog, and the dog sleeps.\n")
    code = f"""if True:
        import sys
        sys.argv = ["toktok", "train", {str(one)!r}, "--merges", "10", "--out", {str(tmp_path / "out")!r}, "-q"]
        from toktok.cli import main
        try:
            main()
        except SystemExit as e:
            assert not e.code, e.code
        assert "polars" not in sys.modules and "numba" not in sys.modules, [m for m in ("polars", "numba") if m in sys.modules]
    """
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "out" / "tokenizer.json").is_file() and (tmp_path / "out" / "run.duckdb").is_file()


def test_a_run_the_scanner_counts_never_loads_polars_either(tmp_path):
    # past the reference's allowance a named pattern's words are counted by the compiled scanner
    # and sorted by the counter itself; the character classes' cache is named by Polars' version
    # read from its metadata: no Polars (~20 MB and ~0.1 s) unless that cache is to be made
    from toktok.count.scan import REFERENCE_BYTES

    corpus = tmp_path / "corpus.txt"
    line = "The quick brown fox jumps over the lazy dog {}, and the dog sleeps; año 1999 日本語.\n"
    with open(corpus, "w", encoding="utf-8") as fh:
        fh.writelines(line.format(i) for i in range(REFERENCE_BYTES // 60))
    assert corpus.stat().st_size > REFERENCE_BYTES
    code = f"""if True:
        import sys
        sys.argv = ["toktok", "train", {str(corpus)!r}, "--merges", "10", "--out", sys.argv[1], "-q"]
        from toktok.cli import main
        try:
            main()
        except SystemExit as e:
            assert not e.code, e.code
        print("polars loaded:", "polars" in sys.modules, file=sys.stderr)
    """
    for out in ("first", "second"):  # the first builds what a first run builds (kernels, caches)
        r = subprocess.run([sys.executable, "-c", code, str(tmp_path / out)], capture_output=True, text=True,
                           timeout=600)
        assert r.returncode == 0, r.stderr
    assert "polars loaded: False" in r.stderr.splitlines(), r.stderr[-2000:]
    assert (tmp_path / "second" / "tokenizer.json").is_file()


def test_the_train_command_imports_the_pipeline_with_no_collection_and_collects_after():
    # the libraries' objects live as long as the process: their import set off ~170 collections
    # (30-60 ms of a one-document run); frozen, no later collection walks them either
    code = """if True:
        import gc, sys
        from toktok.cli import _import_pipeline
        starts = []
        gc.callbacks.append(lambda phase, info: phase == "start" and starts.append(info["generation"]))
        _import_pipeline()
        assert "toktok.pipeline" in sys.modules and "_duckdb" in sys.modules  # (DuckDB's engine)
        assert starts == [], starts
        assert gc.isenabled() and gc.get_freeze_count() > 50_000, gc.get_freeze_count()
        for _ in range(2000):
            a = []; a.append(a)  # cycles the run makes are collected as before
        assert starts, "no collection after the import"
    """
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
