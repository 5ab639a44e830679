"""The bad-input catalogue, round 4 (issue #47): ways to lose a user's files, secrets in URLs,
non-regular files given as options, and refusals that came after the work instead of before it.

Each case: exit code 2 (or a ``ToktokError`` from Python), one line of at most 300 characters
naming the culprit, no traceback, nothing published and nothing existing replaced. Cases that
could hang or fill memory on a broken toktok (a FIFO, ``/dev/zero``) run the CLI in a subprocess
with a timeout and a memory limit.
"""
from __future__ import annotations

import hashlib
import json
import os
import resource
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest
from typer.testing import CliRunner

import toktok
from toktok.cli import app
from toktok.errors import ToktokError

runner = CliRunner()
ROOT = Path(__file__).resolve().parent.parent
GOOD_TEXT = "hello world, hello there. the cat sat on the mat; 12 cats, 345 mats.\n" * 40


def _snapshot(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def _one_line(r, *needles: str) -> str:
    assert r.exit_code == 2, r.output
    assert r.exception is None or isinstance(r.exception, SystemExit), repr(r.exception)
    assert "Traceback" not in r.output
    lines = [ln for ln in r.output.splitlines() if ln.strip()]
    assert len(lines) == 1, r.output
    for n in needles:
        assert n in lines[0], f"{n!r} not in {lines[0]!r}"
    return lines[0]


def _cli(*args: str, timeout: float = 90, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """``python -m toktok.cli ARGS`` in a subprocess, under a 3 GB address-space limit and a
    timeout (a toktok that reads /dev/zero or blocks on a FIFO fails here instead of hanging)."""
    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))

    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "toktok.cli", *args], capture_output=True, text=True,
                          timeout=timeout, preexec_fn=limit, env=env, cwd=cwd)


def _one_line_rc(p: subprocess.CompletedProcess, *needles: str) -> str:
    assert p.returncode == 2, (p.returncode, p.stdout, p.stderr)
    assert "Traceback" not in p.stderr
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, p.stderr
    for n in needles:
        assert n in lines[0], f"{n!r} not in {lines[0]!r}"
    return lines[0]


@pytest.fixture
def notes(tmp_path) -> Path:
    p = tmp_path / "notes.txt"
    p.write_text(GOOD_TEXT)
    return p


# --- 1. --force replaces only a folder whose run file is toktok's ----------------------------------


def _project(tmp_path: Path, run_file: str) -> Path:
    """A user's project folder holding their notes, data and a ``run.duckdb`` of their own."""
    proj = tmp_path / "proj"
    (proj / "data").mkdir(parents=True)
    (proj / "analysis.md").write_text("# my analysis\n")
    (proj / "data" / "x.csv").write_text("a,b\n1,2\n")
    if run_file == "text":
        (proj / "run.duckdb").write_text("not a database, just a file of that name\n")
    else:
        con = duckdb.connect(str(proj / "run.duckdb"))
        con.execute("create table sales as select 1 as id, 'x' as name")
        if run_file == "duckdb+meta":  # even a table named meta, but not toktok's
            con.execute("create table meta (k varchar, v varchar)")
        con.close()
    return proj


@pytest.mark.parametrize("run_file", ["text", "duckdb", "duckdb+meta"])
def test_force_keeps_a_folder_whose_run_file_is_not_toktoks(tmp_path, notes, run_file):
    proj = _project(tmp_path, run_file)
    before = _snapshot(proj)
    r = runner.invoke(app, ["train", str(notes), "--out", str(proj), "--merges", "10", "--force", "-q"])
    _one_line(r, str(proj), "run.duckdb", "not a toktok")
    assert _snapshot(proj) == before
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []
    with pytest.raises(ToktokError) as e:
        toktok.train([str(notes)], out=proj, merges=10, force=True, verbose=False)
    assert "\n" not in str(e.value) and str(proj) in str(e.value)
    assert _snapshot(proj) == before


def test_force_still_replaces_a_toktok_output(tmp_path, notes):
    out = tmp_path / "tok"
    assert runner.invoke(app, ["train", str(notes), "--out", str(out), "--merges", "10", "-q"]).exit_code == 0
    r = runner.invoke(app, ["train", str(notes), "--out", str(out), "--merges", "12", "--force", "-q"])
    assert r.exit_code == 0, r.output


def test_a_published_run_file_says_it_is_toktoks_until_it_changes(tmp_path, notes, monkeypatch):
    """The run file toktok publishes records its size and time (an extended attribute), so a later
    --force finds the folder toktok's without opening it; once the file changes, it is opened and
    judged by what it holds; another program's DuckDB file is never taken for toktok's."""
    import os

    from toktok import rundir

    out = tmp_path / "tok"
    assert runner.invoke(app, ["train", str(notes), "--out", str(out), "--merges", "10", "-q"]).exit_code == 0
    run_file = out / "run.duckdb"
    st = os.stat(run_file)
    assert os.getxattr(run_file, rundir.MARK) == f"{st.st_size}:{st.st_mtime_ns}".encode()
    opened = []
    real_check = rundir._records_schema_version
    monkeypatch.setattr(rundir, "_records_schema_version", lambda p: opened.append(p) or real_check(p))
    rundir._TOKTOK_FILES.clear()
    assert rundir.is_toktok_folder(out) and opened == []
    con = duckdb.connect(str(run_file))  # written since: opened, and still toktok's by its meta
    con.execute("create table mine as select 1 as x")
    con.close()
    assert rundir.is_toktok_folder(out) and opened == [run_file]
    proj = _project(tmp_path, "duckdb+meta")  # another program's, even with toktok's stamp copied on it
    other = proj / "run.duckdb"
    os.setxattr(other, rundir.MARK, b"0:0")
    assert not rundir.is_toktok_folder(proj)


def test_output_beside_a_foreign_run_file_is_not_toktoks(tmp_path, notes):
    """``output: proj/tok.tiktoken`` into a folder holding a foreign ``run.duckdb`` writes the
    .tiktoken beside it and the rest into ``tok.toktok/``: the folder is not toktok's to replace."""
    proj = _project(tmp_path, "duckdb")
    before = _snapshot(proj)
    cfg = tmp_path / "c.yaml"
    cfg.write_text(f"output: {proj}/tok.tiktoken\nphases:\n  - {{name: a, merges: 10, sources: [{{path: {notes}}}]}}\n")
    r = runner.invoke(app, ["train", "-c", str(cfg), "--force", "-q"])
    assert r.exit_code == 0, r.output
    after = _snapshot(proj)
    assert {k: v for k, v in after.items() if k in before} == before
    assert (proj / "tok.tiktoken").is_file() and (proj / "tok.toktok" / "run.duckdb").is_file()


# --- 2. toktok sql --parquet FILE refuses an existing file without --force ------------------------


@pytest.fixture(scope="module")
def small_run(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("sqlrun")
    (d / "a.txt").write_text(GOOD_TEXT)
    out = d / "tok"
    r = runner.invoke(app, ["train", str(d / "a.txt"), "--out", str(out), "--merges", "20", "-q"])
    assert r.exit_code == 0, r.output
    return out


def test_sql_parquet_refuses_an_existing_file(tmp_path, small_run):
    target = tmp_path / "training.txt"
    target.write_text(GOOD_TEXT)
    r = runner.invoke(app, ["sql", str(small_run), "merges", "--parquet", str(target)])
    _one_line(r, str(target), "--force")
    assert target.read_text() == GOOD_TEXT
    r = runner.invoke(app, ["sql", str(small_run), "merges", "--parquet", str(target), "--force"])
    assert r.exit_code == 0, r.output
    import pyarrow.parquet as pq

    assert pq.read_table(target).num_rows == 20


def test_sql_streams_its_result(tmp_path, small_run):
    """``--csv`` and ``--parquet`` write the result batch by batch (``toktok.insight.runfile.
    query_batches``), never as one table; the rows are those of the whole query."""
    from toktok.insight.runfile import query_batches

    with query_batches(small_run, "select * from range(100000) t(i)", batch_rows=1000) as batches:
        sizes = [b.num_rows for b in batches]
    assert sum(sizes) == 100000 and max(sizes) <= 1000 * 2, sizes[:5]
    p = tmp_path / "r.parquet"
    r = runner.invoke(app, ["sql", str(small_run), "select * from range(100000) t(i)", "--parquet", str(p)])
    assert r.exit_code == 0, r.output
    import pyarrow.parquet as pq

    assert pq.read_table(p).column("i").to_pylist() == list(range(100000))
    r = runner.invoke(app, ["sql", str(small_run), "select * from range(5000) t(i)", "--csv"])
    assert r.exit_code == 0 and r.output.splitlines()[1:] == [str(i) for i in range(5000)]


# --- 4. a URL with credentials in it ---------------------------------------------------------------


@pytest.mark.parametrize("url", ["s3://AKIAKEY:SECRETSECRET@bucket/x.txt", "gs://AKIAKEY:SECRETSECRET@bucket/x.txt",
                                 "hf://AKIAKEY:SECRETSECRET@datasets/x/y.txt"])
@pytest.mark.parametrize("progress", ["none", "json"])
def test_url_with_credentials_is_one_line_without_the_secret(tmp_path, url, progress):
    out = tmp_path / "tok"
    p = _cli("train", url, "--out", str(out), "--merges", "5", "--progress", progress, cwd=tmp_path)
    assert p.returncode == 2, (p.returncode, p.stderr[-2000:])
    assert "SECRETSECRET" not in p.stdout + p.stderr
    assert "Traceback" not in p.stderr
    if progress == "json":
        events = [json.loads(ln) for ln in p.stderr.splitlines() if ln.startswith("{")]
        assert events and events[-1].get("event") == "error", p.stderr
        assert "credentials" in events[-1]["message"] and "SECRETSECRET" not in json.dumps(events)
    else:
        _one_line_rc(p, "credentials", "storage_options")
    assert not out.exists() and not (tmp_path / ".tok.partial").exists()


def test_display_redacts_user_info_of_every_scheme():
    from toktok.count.remote import display, redact

    assert "SECRET" not in display("s3://KEY:SECRET@bucket/x.txt")
    assert "SECRET" not in display("gs://KEY:SECRET@bucket/x.txt")
    assert "SECRET" not in str(redact({"path": "s3://KEY:SECRET@bucket/x.txt"}))
    assert "SECRET" not in str(redact(["az://KEY:SECRET@container/x.txt"]))
    # abfs's container@account form holds no secret and stays as written
    assert display("abfs://data@acct.dfs.core.windows.net/x.txt") == "abfs://data@acct.dfs.core.windows.net/x.txt"


# --- 9. non-regular files as --chat-template, --config, --warm-start ------------------------------


@pytest.fixture
def fifo(tmp_path) -> Path:
    p = tmp_path / "pipe"
    os.mkfifo(p)
    return p


@pytest.mark.parametrize("special", ["/dev/zero", "fifo"])
@pytest.mark.parametrize("flag", ["--chat-template", "--config", "--warm-start"])
def test_non_regular_file_as_an_option_is_refused(tmp_path, notes, fifo, flag, special):
    path = str(fifo) if special == "fifo" else special
    out = tmp_path / "tok"
    args = ["train", flag, path] + ([] if flag == "--config" else [str(notes), "--out", str(out), "--merges", "5"])
    if flag == "--chat-template":
        args += ["-s", "<|im_start|>", "-s", "<|im_end|>"]
    p = _cli(*args, "-q", timeout=60)
    _one_line_rc(p, path, "not a regular file")
    assert not out.exists()


# --- 11. a config's output: without the .tiktoken suffix --------------------------------------------


@pytest.mark.parametrize("name", ["mytok.txt", "mytok"])
def test_output_without_tiktoken_suffix_is_refused_in_the_plan(tmp_path, notes, name):
    cfg = tmp_path / "c.yaml"
    cfg.write_text(f"output: {tmp_path}/outx/{name}\nphases:\n  - {{name: a, merges: 5, sources: [{{path: {notes}}}]}}\n")
    r = runner.invoke(app, ["train", "-c", str(cfg), "-q"])
    _one_line(r, name, ".tiktoken")
    assert not (tmp_path / "outx").exists() and not (tmp_path / ".outx.partial").exists()
    with pytest.raises(ToktokError) as e:
        toktok.train([str(notes)], output=str(tmp_path / "outx" / name), merges=5, verbose=False)
    assert ".tiktoken" in str(e.value)
    assert not (tmp_path / "outx").exists() and not (tmp_path / ".outx.partial").exists()


# --- the small ones -------------------------------------------------------------------------------


def test_empty_pattern_says_empty(tmp_path, notes):
    r = runner.invoke(app, ["train", str(notes), "--out", str(tmp_path / "tok"), "--pattern", "", "-q"])
    _one_line(r, "--pattern", "empty")
    assert "got str" not in r.output and not (tmp_path / "tok").exists()


def _json_lines(stderr: str) -> list[dict]:
    out = []
    for ln in stderr.splitlines():
        if ln.strip():
            assert ln.startswith("{"), f"not a JSON line in the stream: {ln!r}"
            out.append(json.loads(ln))
    return out


def test_progress_json_nothing_follows_the_summary(tmp_path, notes):
    """A warning (too many merges asked for) is in the summary event, not a line after it."""
    p = _cli("train", str(notes), "--out", str(tmp_path / "tok"), "--merges", "5000", "--progress", "json")
    assert p.returncode == 0, p.stderr
    events = _json_lines(p.stderr)
    assert events[-1]["event"] == "summary" and any("allows only" in w for w in events[-1]["warnings"])


@pytest.mark.parametrize("args", [["--bogus"], ["--out"]])
def test_progress_json_usage_error_is_a_json_event(tmp_path, notes, args):
    p = _cli("train", str(notes), "--progress", "json", *args)
    assert p.returncode == 2, p.stderr
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert lines[0].startswith("toktok: error: ") and len(lines) == 2, p.stderr
    event = json.loads(lines[-1])
    assert event["event"] == "error" and event["exit_code"] == 2 and event["message"] in lines[0]


def test_resume_after_a_counted_input_changed_refuses(tmp_path):
    """Killed right after the first counting checkpoint (the counts of the first file), then a
    counted file changes (its modification time): --resume refuses, naming it, as docs/errors.md
    says, instead of counting every file again in silence; the interrupted run stays."""
    sys.path.insert(0, str(Path(__file__).parent))
    import faults

    fixtures = ROOT / "data_fixtures" / "corpus"
    names = ("sample.parquet", "notes.txt", "extra.jsonl")
    for n in names:
        (tmp_path / n).write_bytes((fixtures / n).read_bytes())
    args = [str(tmp_path / n) for n in names] + ["--merges", "500", "--out", str(tmp_path / "tok"), "-q"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    r = subprocess.run(faults.command(every=0, kill_at=1) + ["train", *args], capture_output=True, text=True,
                       timeout=600, env=env)
    assert r.returncode == -9, r.stderr
    staging = tmp_path / ".tok.partial"
    con = duckdb.connect(str(staging / "run.duckdb"), read_only=True)
    assert con.execute("SELECT count(*) FROM count_parts").fetchone()[0] > 0  # a counting checkpoint
    con.close()
    for n in names:
        os.utime(tmp_path / n, ns=(1, 1))
    r = subprocess.run([sys.executable, "-m", "toktok.cli", "train", *args, "--resume"], capture_output=True,
                       text=True, timeout=600, env=env)
    assert r.returncode == 2, r.stderr
    line = r.stderr.strip()
    assert "\n" not in line and "changed since the interrupted run" in line and str(tmp_path) in line, line
    assert staging.is_dir() and not (tmp_path / "tok").exists()


def test_chat_template_file_naming_tokens_that_are_not_special_is_said(tmp_path, notes):
    """A template file writing ``<|im_start|>`` without the run defining it: one warning line
    naming the token (a named template's are refused: tests/test_chat.py)."""
    tpl = tmp_path / "chat.jinja"
    tpl.write_text("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}")
    out = tmp_path / "tok"
    r = runner.invoke(app, ["train", str(notes), "--out", str(out), "--merges", "5", "--chat-template", str(tpl),
                            "-s", "<|im_end|>", "-q"])
    assert r.exit_code == 0, r.output
    warned = [ln for ln in r.output.splitlines() if ln.startswith("toktok: warning:")]
    assert len(warned) == 1 and "'<|im_start|>'" in warned[0] and "<|im_end|>'" not in warned[0], r.output
    assert "--special-token" in warned[0]
    r = runner.invoke(app, ["train", str(notes), "--out", str(tmp_path / "tok2"), "--merges", "5", "--chat-template",
                            str(tpl), "-s", "<|im_end|>", "-s", "<|im_start|>", "-q"])
    assert r.exit_code == 0 and "warning" not in r.output, r.output
