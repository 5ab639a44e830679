"""toktoktok users switch without edits (issue 14, items 1 and 4): its three example configs run
unchanged from its layout (a folder holding examples/ and test_data/), ``output: ./NAME.tiktoken``
writes exactly that file with toktok's other outputs in ``NAME.toktok/`` beside it, ``toktok -c``,
``threads`` <= 0, ``working_set_mb`` as toktoktok sizes it, the verbose merge log, and the
special-token roles that transformers loads."""
from __future__ import annotations

import base64
import hashlib
import json
import os
import random
import shutil
import string
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pytest
from conftest import one_error_line
import tiktoken
from typer.testing import CliRunner

import faults
import toktok
from toktok.cli import app
from toktok.config import TrainConfig, load_config
from toktok.errors import ConfigError
from toktok.formats.hf import load_hf
from toktok.pipeline import train
from toktok.rundir import RUN_FILE, OutputLayout, publish
from toktok.vocab import PATTERN

runner = CliRunner()
TOKTOK = Path(sys.executable).parent / "toktok"
LAYOUT = Path(__file__).parent / "data" / "toktoktok_layout"
SPECIALS = (LAYOUT / "examples" / "special_tokens.txt").read_text().split()
TEXT = "hello world, hello there. the cat sat on the mat; 12 cats, 345 mats.\n" * 40


def _snapshot(folder: Path) -> dict[str, tuple[str, int]]:
    """Every file under ``folder``: (sha256, mtime in ns)."""
    return {str(p.relative_to(folder)): (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_mtime_ns)
            for p in sorted(folder.rglob("*")) if p.is_file()}


def _toktoktok_encoding(tiktoken_file: Path, specials: list[str]) -> tiktoken.Encoding:
    """A loader that knows only toktoktok's convention (its README): ranks from the file, special
    ids = number of ranks + index in the list."""
    ranks = {}
    for line in tiktoken_file.read_text().splitlines():
        if line.strip():
            b64, rank = line.split()
            ranks[base64.b64decode(b64)] = int(rank)
    return tiktoken.Encoding(name="custom_bpe", pat_str=PATTERN, mergeable_ranks=ranks,
                             special_tokens={t: len(ranks) + i for i, t in enumerate(specials)})


def _run(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(TOKTOK), *args], capture_output=True, text=True, cwd=cwd)


def _merge_lines(stderr: str) -> list[str]:
    return [ln for ln in stderr.splitlines() if "Merge " in ln]


@pytest.fixture(scope="module")
def layout(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("toktoktok") / "toktoktok"
    shutil.copytree(LAYOUT, d)
    return d


# --- the three example configs, unchanged, from toktoktok's layout -------------------------------


def test_toktoktok_examples_run_unchanged(layout):
    d = layout
    own = {"examples", "test_data", "make_test_data.py"}
    # 1. from scratch: exactly ./tokenizer.tiktoken, the rest in ./tokenizer.toktok/
    r = _run(d, "-c", "examples/from_scratch.yaml")
    assert r.returncode == 0, r.stderr
    made = set(os.listdir(d)) - own
    assert made - {"tokenizer.special_tokens.json"} == {"tokenizer.tiktoken", "tokenizer.toktok"}, made
    comp = d / "tokenizer.toktok"
    assert {"tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "run.duckdb"} <= set(os.listdir(comp))
    assert "tokenizer.toktok/" in r.stdout  # the summary says where the other files went
    enc = toktok.load_encoding(comp)
    assert enc.n_vocab == 256 + 1161 + 2000 + 10 == 3427 == load_hf(comp).get_vocab_size()
    assert len((d / "tokenizer.tiktoken").read_text().splitlines()) == 3417
    # toktoktok's loader (ranks + special_tokens.txt) gives toktok's ids
    text = "<|im_start|>user\nHello, world!<|im_end|><think>12345</think><|endoftext|>"
    ids = enc.encode(text, allowed_special="all")
    assert _toktoktok_encoding(d / "tokenizer.tiktoken", SPECIALS).encode(text, allowed_special="all") == ids
    assert load_hf(comp).encode(text, add_special_tokens=False).ids == ids
    # verbose: true logs merges 1-10 and every 100th, as toktoktok does
    lines = _merge_lines(r.stderr)
    assert [int(ln.split("Merge ")[1].split(":")[0]) for ln in lines] == [*range(1, 11), *range(100, 2001, 100)]
    assert all(" -> " in ln and "(id " in ln and "count: " in ln for ln in lines)
    first = (d / "tokenizer.tiktoken").read_bytes()
    scratch = _snapshot(comp) | {"tokenizer.tiktoken": _snapshot(d)["tokenizer.tiktoken"]}

    # 2. warm start from ./tokenizer.tiktoken: a second name, the first run's files untouched
    r = _run(d, "-c", "examples/warm_start.yaml")
    assert r.returncode == 0, r.stderr
    assert {"extended_tokenizer.tiktoken", "extended_tokenizer.toktok"} <= set(os.listdir(d))
    assert _snapshot(comp) | {"tokenizer.tiktoken": _snapshot(d)["tokenizer.tiktoken"]} == scratch
    ext = (d / "extended_tokenizer.tiktoken").read_text().splitlines()
    assert ext[:3417] == first.decode().splitlines()  # every base id kept
    assert toktok.load_encoding(d / "extended_tokenizer.toktok").n_vocab == len(ext) + 10

    # 3. multi-phase writes ./tokenizer.tiktoken again: replaces toktok's own outputs of that name
    # (no --force: as toktoktok does), nothing else
    extended = _snapshot(d / "extended_tokenizer.toktok")
    r = _run(d, "-c", "examples/multi_phase.yaml")
    assert r.returncode == 0, r.stderr
    assert _snapshot(d / "extended_tokenizer.toktok") == extended
    con = duckdb.connect(str(comp / RUN_FILE), read_only=True)
    learned = dict(con.execute("select phase, count(*) from merges where not reused group by phase").fetchall())
    con.close()
    assert learned == {"English": 1000, "Code": 500, "Multilingual": 200}
    assert toktok.load_encoding(d / "tokenizer.tiktoken").n_vocab == 256 + 1161 + 1700 + 10
    assert any(ln.startswith("[Code] Merge 1: ") for ln in _merge_lines(r.stderr))  # phases named
    assert not [p for p in os.listdir(d) if p.startswith(".")]  # no staging or old folder left

    # 4. the from-scratch config again: the same bytes as its first run
    r = _run(d, "-c", "examples/from_scratch.yaml", "-q")
    assert r.returncode == 0, r.stderr
    assert (d / "tokenizer.tiktoken").read_bytes() == first and not _merge_lines(r.stderr)


@pytest.mark.parametrize("target", ["tokenizer.toktok", "tokenizer.tiktoken"])
def test_commands_take_the_new_layout(layout, target):
    """verify, sql, show, eval and load_encoding take the NAME.toktok folder or the .tiktoken."""
    d = layout
    if not (d / "tokenizer.toktok").is_dir():
        assert _run(d, "-c", "examples/from_scratch.yaml", "-q").returncode == 0
    t = str(d / target)
    for args in (["verify", t], ["sql", t, "select count(*) as n from merges", "--csv"], ["show", t, "--json"],
                 ["eval", t, "--data", str(d / "test_data" / "german")]):
        r = runner.invoke(app, args)
        assert r.exit_code == 0, (args, r.output)
    r = runner.invoke(app, ["sql", t, "select count(*) as n from vocab", "--csv"])
    enc = toktok.load_encoding(t)
    assert r.output.split() == ["n", str(enc.n_vocab)]
    assert enc.encode("<|pad|>", allowed_special="all") == [enc.n_vocab - 10]


# --- output: ./NAME.tiktoken ---------------------------------------------------------------------


def _config(d: Path, output: str, extra: str = "", source: str | None = None, name: str = "run.yaml") -> Path:
    src = source or str(d / "data.txt")
    if source is None and not (d / "data.txt").exists():
        (d / "data.txt").write_text(TEXT)
    p = d / name
    p.write_text(f"output: {output}\n{extra}phases:\n  - name: a\n    merges: 20\n    sources:\n      - path: {src}\n")
    return p


def test_output_into_a_folder_with_other_files(tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    (shared / "notes.md").write_text("mine")
    (shared / "tokenizer").mkdir()  # a folder named like the .tiktoken's stem is not touched either
    cfg = _config(tmp_path, str(shared / "tok.tiktoken"))
    r = runner.invoke(app, ["-c", str(cfg), "-q"])
    assert r.exit_code == 0, r.output
    assert sorted(os.listdir(shared)) == ["notes.md", "tok.tiktoken", "tok.toktok", "tokenizer"]
    assert (shared / "tok.toktok" / RUN_FILE).is_file()
    # a second name in the same folder: its own folder, the first run's files untouched
    before = _snapshot(shared)
    cfg2 = _config(tmp_path, str(shared / "other.tiktoken"), name="two.yaml")
    assert runner.invoke(app, ["-c", str(cfg2), "-q"]).exit_code == 0
    after = _snapshot(shared)
    assert {k: v for k, v in after.items() if not k.startswith("other.")} == before
    # a rerun replaces toktok's own files of that name and nothing else
    assert runner.invoke(app, ["--config", str(cfg), "-q", "--seed", "1"]).exit_code == 0
    again = _snapshot(shared)
    assert {k: v for k, v in again.items() if not k.startswith("tok.")} == {
        k: v for k, v in after.items() if not k.startswith("tok.")}
    assert again["tok.tiktoken"][1] != after["tok.tiktoken"][1]
    assert sorted(os.listdir(shared)) == ["notes.md", "other.tiktoken", "other.toktok", "tok.tiktoken", "tok.toktok", "tokenizer"]
    # the library takes toktoktok's output too
    s = train(TrainConfig([str(tmp_path / "data.txt")], output=str(shared / "lib.tiktoken"), merges=5))
    assert s.shared and s.tiktoken == shared / "lib.tiktoken" and s.out == shared / "lib.toktok"
    assert (shared / "lib.toktok" / "tokenizer.json").is_file() and (shared / "lib.tiktoken").is_file()


def test_output_into_an_own_folder_keeps_todays_layout(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cfg = _config(tmp_path, "out/tok/tok.tiktoken")
    assert runner.invoke(app, ["-c", str(cfg), "-q"]).exit_code == 0
    assert sorted(os.listdir(tmp_path / "out" / "tok")) == [
        "run.duckdb", "special_tokens_map.json", "tok.tiktoken", "tokenizer.json", "tokenizer_config.json"]
    # an existing empty folder is toktok's own too; a rerun needs --force, as for --out
    (tmp_path / "empty").mkdir()
    cfg2 = _config(tmp_path, "empty/e.tiktoken", name="two.yaml")
    assert runner.invoke(app, ["-c", str(cfg2), "-q"]).exit_code == 0
    assert (tmp_path / "empty" / "tokenizer.json").is_file()
    r = runner.invoke(app, ["-c", str(cfg), "-q"])
    assert r.exit_code == 2 and "pass --force" in r.output
    assert runner.invoke(app, ["-c", str(cfg), "-q", "--force"]).exit_code == 0


@pytest.mark.parametrize("force", [False, True])
def test_output_never_replaces_files_toktok_did_not_write(tmp_path, monkeypatch, force):
    monkeypatch.chdir(tmp_path)
    cfg = _config(tmp_path, "./tokenizer.tiktoken")
    more = ["--force"] if force else []
    # a .tiktoken of the user's (no tokenizer.toktok/run.duckdb beside it)
    (tmp_path / "tokenizer.tiktoken").write_text("mine")
    before = _snapshot(tmp_path)
    one_error_line(runner.invoke(app, ["-c", str(cfg), "-q", *more]), "tokenizer.tiktoken", "toktok did not write it",
              "name another output")
    assert _snapshot(tmp_path) == before
    # ... or its special-token list
    (tmp_path / "tokenizer.tiktoken").unlink()
    (tmp_path / "tokenizer.special_tokens.json").write_text("{}")
    before = _snapshot(tmp_path)
    one_error_line(runner.invoke(app, ["-c", str(cfg), "-q", *more]), "tokenizer.special_tokens.json", "toktok did not write it")
    assert _snapshot(tmp_path) == before
    (tmp_path / "tokenizer.special_tokens.json").unlink()
    # a folder named NAME.toktok that is not toktok's; a file of that name
    (tmp_path / "tokenizer.toktok").mkdir()
    (tmp_path / "tokenizer.toktok" / "x.txt").write_text("mine")
    before = _snapshot(tmp_path)
    one_error_line(runner.invoke(app, ["-c", str(cfg), "-q", *more]), "tokenizer.toktok", "not a toktok output folder")
    assert _snapshot(tmp_path) == before
    shutil.rmtree(tmp_path / "tokenizer.toktok")
    (tmp_path / "tokenizer.toktok").write_text("mine")
    one_error_line(runner.invoke(app, ["-c", str(cfg), "-q", *more]), "tokenizer.toktok", "not a folder")
    assert not [p for p in os.listdir(tmp_path) if p.startswith(".")]


def test_failed_run_leaves_a_shared_folder_as_it_was(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cfg = _config(tmp_path, "./tokenizer.tiktoken")
    assert runner.invoke(app, ["-c", str(cfg), "-q"]).exit_code == 0
    before = _snapshot(tmp_path)
    (tmp_path / "empty.txt").write_text("")
    bad = _config(tmp_path, "./tokenizer.tiktoken", source=str(tmp_path / "empty.txt"), name="bad.yaml")
    before = _snapshot(tmp_path)
    one_error_line(runner.invoke(app, ["-c", str(bad), "-q"]), "empty")
    assert _snapshot(tmp_path) == before


def test_killed_shared_run_resumes_and_publishes_whole_files(tmp_path, monkeypatch):
    """kill -9 at a checkpoint: the folder keeps the earlier run's files, whole; --resume publishes
    the same bytes as an uninterrupted run."""
    d = tmp_path / "w"
    d.mkdir()
    rng = random.Random(3)
    (d / "data.txt").write_text(" ".join("".join(rng.choices(string.ascii_lowercase[:8], k=rng.randint(3, 9)))
                                         for _ in range(40_000)))
    cfg = d / "run.yaml"
    cfg.write_text("output: ./tokenizer.tiktoken\nthreads: -1\nphases:\n  - name: a\n    merges: 3000\n"
                   "    sources:\n      - path: ./data.txt\n")
    assert _run(d, "-c", "run.yaml", "-q").returncode == 0
    reference = (d / "tokenizer.tiktoken").read_bytes()
    (d / "tokenizer.tiktoken").write_bytes(b"")  # stands for an earlier run's file: must stay whole
    before = _snapshot(d)
    # (checkpoints every 500 merges, in the run's thread: killed inside the loop however loaded the
    # machine is; every=0.01 took none there when the loop ended before the first 10 ms poll)
    r = subprocess.run(faults.command(every=0, step=500, kill_at=2) + ["-c", "run.yaml", "-q"], cwd=d,
                       capture_output=True, text=True)
    assert r.returncode == -9, r.stderr
    assert {k: v for k, v in _snapshot(d).items() if not k.startswith(".")} == before
    assert (d / ".tokenizer.toktok.partial" / RUN_FILE).is_file()
    r = _run(d, "-c", "run.yaml", "-q", "--resume")
    assert r.returncode == 0, r.stderr
    assert (d / "tokenizer.tiktoken").read_bytes() == reference
    assert not [p for p in os.listdir(d) if p.startswith(".")]


def test_publish_carries_the_special_tokens_list_with_the_tiktoken(tmp_path):
    """NAME.special_tokens.json written into the staging folder goes beside NAME.tiktoken; a stale
    one of toktok's earlier run goes when the new run has none."""
    d = tmp_path / "here"
    d.mkdir()

    def staging(with_list: bool) -> Path:
        s = d / ".tok.toktok.partial"
        s.mkdir()
        for f in ("tok.tiktoken", "tokenizer.json", "run.duckdb"):
            (s / f).write_text(f"new {f}")
        if with_list:
            (s / "tok.special_tokens.json").write_text('{"<|x|>": 300}')
        return s

    lay = OutputLayout(d / "tok.toktok", d / "tok.tiktoken", True)
    publish(staging(True), lay)
    assert sorted(os.listdir(d)) == ["tok.special_tokens.json", "tok.tiktoken", "tok.toktok"]
    assert sorted(os.listdir(d / "tok.toktok")) == ["run.duckdb", "tokenizer.json"]
    assert json.loads((d / "tok.special_tokens.json").read_text()) == {"<|x|>": 300}
    publish(staging(False), lay)
    assert sorted(os.listdir(d)) == ["tok.tiktoken", "tok.toktok"]
    own = OutputLayout(d / "own", d / "own" / "tok.tiktoken", False)
    publish(staging(True), own)
    assert sorted(os.listdir(d / "own")) == ["run.duckdb", "tok.special_tokens.json", "tok.tiktoken", "tokenizer.json"]


# --- toktok -c, threads, working_set_mb ---------------------------------------------------------


def test_dash_c_is_train_config(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cfg = _config(tmp_path, "out/a/a.tiktoken")
    for args in (["-c", str(cfg)], ["--config", str(cfg)], [f"--config={cfg}"], ["-c", str(cfg), "--merges", "7"]):
        shutil.rmtree(tmp_path / "out", ignore_errors=True)
        r = runner.invoke(app, [*args, "-q"])
        assert r.exit_code == 0, (args, r.output)
        assert (tmp_path / "out" / "a" / "a.tiktoken").is_file()
    assert len((tmp_path / "out" / "a" / "a.tiktoken").read_text().splitlines()) == 256 + 1161 + 7
    assert "-c" in runner.invoke(app, ["--help"]).output
    r = runner.invoke(app, ["-c", str(tmp_path / "nope.yaml")])
    one_error_line(r, "nope.yaml: no such config file")


def _threads_of(pid: int) -> int:
    try:
        return len(os.listdir(f"/proc/{pid}/task"))
    except OSError:
        return 0


@pytest.mark.parametrize("how", ["cli", "yaml"])
def test_threads_beyond_the_cores_are_capped(tmp_path, how):
    """--threads 100000 once spawned tens of thousands of threads (DuckDB); now capped at the
    cores with a warning that names the option as given. Watched from outside: the process's
    thread count never comes near it."""
    (tmp_path / "data.txt").write_text(TEXT)
    if how == "cli":
        args, name = ["train", "data.txt", "--out", "out", "--merges", "20", "--threads", "100000", "-q"], "--threads 100000"
    else:
        _config(tmp_path, "out/t.tiktoken", "threads: 100000\n", source="data.txt")
        args, name = ["-c", "run.yaml", "-q"], "run.yaml: threads: 100000"
    p = subprocess.Popen([str(TOKTOK), *args], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    peak = 0
    while p.poll() is None:
        peak = max(peak, _threads_of(p.pid))
        time.sleep(0.005)
    out, err = p.communicate()
    assert p.returncode == 0, err
    assert peak < 200, peak
    cores = len(os.sched_getaffinity(0))
    assert f"toktok: warning: {name} is more than the {cores} cores this process may use; using {cores}" in " ".join(err.split())


@pytest.mark.parametrize("threads", ["-1", "0", "-64", "1"])
def test_threads_zero_or_less_means_all_cores(tmp_path, threads):
    (tmp_path / "data.txt").write_text(TEXT)
    r = runner.invoke(app, ["train", str(tmp_path / "data.txt"), "--out", str(tmp_path / "o"), "--merges", "10",
                            "--threads", threads, "-q"])
    assert r.exit_code == 0, r.output
    assert "Traceback" not in r.output and "warning" not in r.output
    # in a config and in the library
    cfg = _config(tmp_path, str(tmp_path / "y" / "y.tiktoken"), f"threads: {threads}\n")
    assert runner.invoke(app, ["-c", str(cfg), "-q"]).exit_code == 0
    s = train(TrainConfig([str(tmp_path / "data.txt")], str(tmp_path / "lib"), merges=10, threads=int(threads)))
    assert s.merges_learned == 10 and not s.warnings
    with pytest.raises(ConfigError, match="--threads 'x' is not a whole number"):
        TrainConfig(["a"], "o", threads="x").validate()


def _words_file(path: Path, n_bytes: int, seed: int = 0) -> Path:
    rng = random.Random(seed)
    lines, size = [], 0
    while size < n_bytes:
        line = " ".join("".join(rng.choices(string.ascii_lowercase, k=rng.randint(2, 9))) for _ in range(12)) + "\n"
        lines.append(line)
        size += len(line)
    path.write_text("".join(lines))
    return path


def _text_read(run: Path) -> int:
    con = duckdb.connect(str(run / RUN_FILE), read_only=True)
    try:
        return con.execute("select sum(text_bytes) from inputs").fetchone()[0]
    finally:
        con.close()


def test_working_set_mb_holds_what_toktoktok_holds(tmp_path):
    """working_set_mb: 1 holds about 2^20 / 4 characters of text (toktoktok's README: working_set_mb / 4
    million characters), within 25%; budget (the whole process) keeps its meaning beside it. Run as a
    user runs it (its own process, so that the budget is planned from toktok's own footprint)."""
    big = _words_file(tmp_path / "big.txt", 1_200_000)  # ASCII: a character is a byte
    expect = 2**20 / 4
    for k, extra in enumerate(("working_set_mb: 1\n", "working_set_mb: 1\nbudget: 3GB\n", "budget: 3GB\n")):
        _config(tmp_path, f"./o{k}/o.tiktoken", extra, source=str(big))
        r = _run(tmp_path, "-c", "run.yaml", "-q")
        assert r.returncode == 0, r.stderr
        got = _text_read(tmp_path / f"o{k}")
        if "working_set_mb" in extra:
            assert abs(got - expect) <= 0.25 * expect, (extra, got)
        else:  # the budget alone samples by its own share: here everything
            assert got == big.stat().st_size


def test_budget_errors_name_the_key_written(tmp_path):
    (tmp_path / "data.txt").write_text(TEXT)
    cfg = _config(tmp_path, str(tmp_path / "o" / "o.tiktoken"), "budget: 300MiB\n")
    one_error_line(runner.invoke(app, ["-c", str(cfg), "-q"]), f"{cfg}: budget: 300.0 MB is too small",
              "the smallest budget that works")
    one_error_line(runner.invoke(app, ["-c", str(cfg), "-q", "--budget", "200MiB"]), "--budget 200.0 MB is too small")
    ws = _config(tmp_path, str(tmp_path / "o" / "o.tiktoken"), "working_set_mb: -5\n", name="ws.yaml")
    one_error_line(runner.invoke(app, ["-c", str(ws), "-q"]), f"{ws}: working_set_mb: expected a number > 0")
    assert not (tmp_path / "o").exists()


# --- the verbose merge log ----------------------------------------------------------------------


def test_verbose_logs_merges_literally(tmp_path):
    """Tokens that look like Rich markup or hold terminal escapes are printed as they are (escapes
    written out), to stderr."""
    words = _words_file(tmp_path / "words.txt", 20_000).read_text()
    (tmp_path / "data.txt").write_text("[/INST] [b]bold[/b] " * 300 + "\x1b[31mred\x1b[0m " * 150 + words)
    r = runner.invoke(app, ["train", str(tmp_path / "data.txt"), "--out", str(tmp_path / "o"), "--merges", "120",
                            "--no-hardcoded", "--verbose"])
    assert r.exit_code == 0, r.output
    lines = _merge_lines(r.output)
    assert len(lines) == 11  # 1-10 and 100
    assert '"[" + "/" -> "[/" (id 91 + 47 -> ' in r.output
    assert '"\\x1b" + "[" -> "\\x1b["' in r.output and "\x1b" not in r.output
    assert lines[0].startswith('Merge 1: "') and lines[-1].startswith("Merge 100: ")
    # -q is quiet: no merge log; the library logs to the callback given (else stderr)
    r = runner.invoke(app, ["train", str(tmp_path / "data.txt"), "--out", str(tmp_path / "q"), "--merges", "20", "-q", "--verbose"])
    assert r.exit_code == 0 and not _merge_lines(r.output)
    got: list[str] = []
    train(TrainConfig([str(tmp_path / "data.txt")], str(tmp_path / "lib"), merges=20, verbose=True), log=got.append)
    assert [ln.split(":")[0] for ln in got] == [f"Merge {k}" for k in range(1, 11)]


def test_verbose_false_logs_nothing(tmp_path, capfd):
    (tmp_path / "data.txt").write_text(TEXT)
    train(TrainConfig([str(tmp_path / "data.txt")], str(tmp_path / "o"), merges=20))
    train(TrainConfig([str(tmp_path / "data.txt")], str(tmp_path / "v"), merges=20, verbose=True))
    err = capfd.readouterr().err
    assert len(_merge_lines(err)) == 10


# --- roles: bos, eos, pad, unk for transformers --------------------------------------------------


def _tf(folder: Path):
    from transformers import AutoTokenizer, PreTrainedTokenizerFast

    tf = AutoTokenizer.from_pretrained(str(folder))
    assert isinstance(tf, PreTrainedTokenizerFast)
    return tf


def test_roles_load_in_transformers_with_the_right_ids(tmp_path):
    (tmp_path / "data.txt").write_text(TEXT)
    out = tmp_path / "o"
    specials = ["<|endoftext|>", "<|startoftext|>", "<|pad|>", "<|unk|>", "<|im_end|>"]
    args = ["train", str(tmp_path / "data.txt"), "--out", str(out), "--merges", "30", "-q"]
    for s in specials:
        args += ["-s", s]
    r = runner.invoke(app, [*args, "--bos-token", "<|startoftext|>", "--eos-token", "<|im_end|>",
                            "--pad-token", "<|pad|>", "--unk-token", "<|unk|>"])
    assert r.exit_code == 0, r.output
    enc = toktok.load_encoding(out)
    want = {"bos_token": "<|startoftext|>", "eos_token": "<|im_end|>", "pad_token": "<|pad|>", "unk_token": "<|unk|>"}
    config = json.loads((out / "tokenizer_config.json").read_text())
    smap = json.loads((out / "special_tokens_map.json").read_text())
    assert {k: config[k] for k in want} == want and {k: smap[k] for k in want} == want
    tf = _tf(out)
    for role, tok in want.items():
        assert getattr(tf, role) == tok
        assert getattr(tf, role + "_id") == enc.encode(tok, allowed_special="all")[0] == load_hf(out).token_to_id(tok)
    # padding uses the pad id
    batch = tf(["hello", "hello world there"], padding=True)["input_ids"]
    assert batch[0][-1] == tf.pad_token_id == enc.encode("<|pad|>", allowed_special="all")[0]

    # the default stays: eos = <|endoftext|> when it is special, nothing else
    out2 = tmp_path / "d"
    assert runner.invoke(app, [*args[:3], str(out2), *args[4:]]).exit_code == 0
    tf = _tf(out2)
    assert tf.eos_token == "<|endoftext|>" and tf.eos_token_id == enc.encode("<|endoftext|>", allowed_special="all")[0]
    assert tf.bos_token is None and tf.pad_token is None and tf.unk_token is None


def test_roles_from_a_config_and_a_warm_start_base(tmp_path):
    (tmp_path / "data.txt").write_text(TEXT)
    base = tmp_path / "base"
    r = runner.invoke(app, ["train", str(tmp_path / "data.txt"), "--out", str(base), "--merges", "10", "-q",
                            "-s", "<|endoftext|>", "-s", "<|pad|>"])
    assert r.exit_code == 0, r.output
    # roles: in YAML, naming a special of the warm-start base
    cfg = _config(tmp_path, str(tmp_path / "w" / "w.tiktoken"),
                  f"warm_start: {{file: {base}}}\nroles:\n  pad_token: <|pad|>\n  bos_token: <|endoftext|>\n")
    r = runner.invoke(app, ["-c", str(cfg), "-q"])
    assert r.exit_code == 0, r.output
    tf = _tf(tmp_path / "w")
    enc = toktok.load_encoding(tmp_path / "w")
    assert tf.pad_token == "<|pad|>" and tf.pad_token_id == enc.encode("<|pad|>", allowed_special="all")[0]
    assert tf.bos_token_id == tf.eos_token_id == enc.encode("<|endoftext|>", allowed_special="all")[0]


@pytest.mark.parametrize("how", ["cli", "yaml"])
def test_a_role_must_be_a_special_token(tmp_path, how):
    (tmp_path / "data.txt").write_text(TEXT)
    out = tmp_path / "o"
    if how == "cli":
        args = ["train", str(tmp_path / "data.txt"), "--out", str(out), "-s", "<|endoftext|>", "--pad-token", "[pad]"]
        needle = "--pad-token '[pad]' is not one of the special tokens (<|endoftext|>)"
    else:
        cfg = _config(tmp_path, str(out / "o.tiktoken"), "special_tokens: ['<|endoftext|>']\nroles: {unk_token: '<unk>'}\n")
        args, needle = ["-c", str(cfg)], f"{cfg}: roles.unk_token: '<unk>' is not one of the special tokens"
    one_error_line(runner.invoke(app, [*args, "-q"]), needle, "add it with --special-token")
    assert not out.exists() and sorted(os.listdir(tmp_path)) in (["data.txt"], ["data.txt", "run.yaml"])
