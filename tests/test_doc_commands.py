"""Every command the README and docs/ show runs where users run it: from a wheel install, in a
folder that is not the checkout.

The commands are the lines of the fenced ``bash`` blocks of README.md and docs/*.md (a trailing
``\\`` joins the next line, ``# ...`` comments are dropped). Each ``toktok ...`` command runs, as
written, with the session's wheel install (conftest.wheel_venv) in a prepared folder that holds
what the docs assume is there: ``data/``, ``notes.txt``, ``some_text.txt``, ``held_out.parquet``,
``examples/`` with ``data_fixtures/``, ``hf/`` and ``gpt2/`` tokenizer.json files, and the runs
``out/demo``, ``out/small`` and ``out/big``, all small fixtures. It must exit 0 with no
traceback and no error line. The ``s3://``, ``gs://``, ``az://`` and ``hf://`` commands run as
written against servers on 127.0.0.1 (tests/stores.py) holding fixtures under the keys their URLs
name (:data:`STORE_RUNS`), and read exactly the objects their globs match. A command that is not
run is in :data:`NOT_RUN` with the reason; every entry of both lists must still be a documented
command, so they cannot go stale. Marked ``wheel`` like tests/test_install.py (the same install;
``make test`` runs both).
Example: ``pytest tests/test_doc_commands.py``.
"""
from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import duckdb
import pytest
from conftest import FIXTURES, ROOT, run_ok

pytestmark = pytest.mark.wheel

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BASH = re.compile(r"^```bash\n(.*?)^```", re.M | re.S)
ENV = re.compile(r"[A-Za-z_]\w*=")

#: Documented commands that are not run here (as :func:`documented` writes them), with the reason.
NOT_RUN = {
    "make demo": "runs in the checkout by design (it makes .venv there); the runs below are its train",
    "make test": "runs in the checkout by design: it is the test suite itself",
    "pip install .": "installs from the checkout; conftest.wheel_venv builds and installs its wheel",
    "pip install 'toktok[ray]'": "an extra from PyPI; the dev environment holds Ray",
    "pip install 'toktok[s3]'": "an extra from PyPI; the dev environment holds every store's client",
    "duckdb out/demo/run.duckdb 'select merge_index, shown, count from merges_text order by merge_index limit 20'":
        "the duckdb CLI is not a dependency; tests/test_insight.py reads every view from a bare duckdb",
    "toktok train 'data/**/*.parquet' --out out/tok --merges 30000 --engine ray":
        "starts a private Ray cluster (about 35 s on 2 cores); tests/test_ray.py trains on one with --engine ray",
    "toktok train /shared/data/ --out out/tok --merges 30000 --engine ray --ray-address HEAD:6379":
        "needs a Ray cluster at HEAD:6379",
    "AWS_ENDPOINT_URL=http://127.0.0.1:9000 toktok train 's3://bucket/perf/*.parquet' --out out/tok":
        "names a server on port 9000, which a test cannot count on; the s3:// command runs with AWS_ENDPOINT_URL",
    "toktok train https://example.org/corpus/wiki.parquet https://example.org/notes.txt --out out/tok":
        "example.org serves no corpus; tests/test_stores.py runs https:// against a local TLS server",
}

#: Documented store commands run against a server on 127.0.0.1 (tests/stores.py) holding small
#: fixtures under the keys their URL names: (scheme, {key: data_fixtures file}, the key the URL
#: does not match, which the run must not read).
STORE_RUNS = {
    "toktok train 's3://bucket/fineweb/**/*.parquet' --out out/tok --merges 30000":
        ("s3", {"fineweb/CC-MAIN-2024-10/000.parquet": "sample.parquet", "fineweb/notes.txt": "notes.txt"},
         "fineweb/notes.txt"),
    "toktok train 'gs://bucket/dclm/shard-*.jsonl.zst' --out out/tok --merges 30000":
        ("gs", {"dclm/shard-000.jsonl.zst": "extra.jsonl", "dclm/notes.txt": "notes.txt"}, "dclm/notes.txt"),
    "toktok train 'az://container/stack/*.parquet' --out out/tok":
        ("az", {"stack/000.parquet": "sample.parquet", "stack/notes.txt": "notes.txt"}, "stack/notes.txt"),
    "toktok train 'hf://datasets/HuggingFaceFW/fineweb-edu/sample/10BT/*.parquet' --out out/tok --budget 8GB":
        ("hf", {"sample/10BT/000_00000.parquet": "sample.parquet", "sample/100BT/000_00000.parquet": "sample.parquet"},
         "sample/100BT/000_00000.parquet"),
}


#: Runs the docs' commands read, made first with the installed toktok (``make demo``'s run, smaller).
PREPARE = [
    ["train", "data_fixtures/corpus/", "--out", "out/demo", "--merges", "300", "--special-token", "<|endoftext|>", "-q"],
    ["train", "data/", "--out", "out/small", "--merges", "100", "-q"],
]


def documented() -> list[tuple[str, str]]:
    """(page, command) of every command of the pages' ``bash`` blocks, in order; the command is
    its words joined back with shell quoting. Example: ``("docs/runfile.md", "toktok sql --list")``."""
    found = []
    for page in PAGES:
        for block in BASH.findall(page.read_text()):
            for line in block.replace("\\\n", " ").splitlines():
                words = shlex.split(line, comments=True)
                if words:
                    found.append((page.relative_to(ROOT).as_posix(), shlex.join(words)))
    return found


def _program(command: str) -> str:
    """The program a command runs: its first word after ``NAME=value`` assignments."""
    return next(w for w in shlex.split(command) if not ENV.match(w))


def to_run() -> list[tuple[str, str]]:
    """The documented commands run in the prepared folder (neither in NOT_RUN nor in STORE_RUNS)."""
    return [(page, c) for page, c in documented() if c not in NOT_RUN and c not in STORE_RUNS]


def test_the_extraction_sees_the_commands():
    # a continued line joined, a comment dropped, quoting kept: a format change that finds nothing fails here
    found = [c for _, c in documented()]
    assert ("toktok train 'data/**/*.parquet' notes.txt --out out/mytok --merges 30000 "
            "--special-token '<|endoftext|>' --special-token '<|pad|>'") in found
    assert "toktok sql out/demo top_merges" in found
    assert len(found) >= 20 and len(to_run()) >= 10


def test_every_command_is_run_or_listed_with_a_reason():
    """Every documented command that is not a toktok command is in NOT_RUN, and every entry of
    NOT_RUN is still documented (a changed or removed command takes its entry with it)."""
    found = {c for _, c in documented()}
    stale = sorted((set(NOT_RUN) | set(STORE_RUNS)) - found)
    assert not stale, f"NOT_RUN or STORE_RUNS names commands no page shows any more: {stale}"
    assert not set(NOT_RUN) & set(STORE_RUNS)
    unlisted = sorted({c for _, c in to_run() if _program(c) != "toktok"})
    assert not unlisted, f"documented commands that are neither toktok commands nor in NOT_RUN: {unlisted}"
    assert all(len(why) > 20 for why in NOT_RUN.values())


@pytest.fixture(scope="module")
def prepared(wheel_venv, tmp_path_factory) -> Path:
    """A folder outside the checkout holding the inputs and runs the docs' commands assume."""
    work = tmp_path_factory.mktemp("doc_commands")
    assert not work.resolve().is_relative_to(ROOT.resolve())
    (work / "data").mkdir()
    shutil.copy(FIXTURES / "sample.parquet", work / "data" / "sample.parquet")
    shutil.copy(FIXTURES / "sample.parquet", work / "held_out.parquet")  # has the lang column --by lang reads
    shutil.copy(FIXTURES / "notes.txt", work / "notes.txt")
    shutil.copy(FIXTURES / "notes.txt", work / "some_text.txt")
    # examples/*.yaml read data_fixtures/ ("run from the repository root")
    shutil.copytree(ROOT / "examples", work / "examples")
    shutil.copytree(FIXTURES.parent, work / "data_fixtures", ignore=shutil.ignore_patterns("*.py"))
    # a tokenizer.json made by HF's BpeTrainer stands in for hf/ and GPT-2's (which is a download)
    for name in ("hf", "gpt2"):
        (work / name).mkdir()
        shutil.copy(FIXTURES.parent / "base" / "hf_bpe" / "tokenizer.json", work / name / "tokenizer.json")
    for args in PREPARE:
        run_ok([wheel_venv["toktok"], *args], work, wheel_venv["env"])
    shutil.copytree(work / "out" / "demo", work / "out" / "big")  # 300 merges to out/small's 100
    return work


def test_every_documented_command_runs_from_a_wheel_install(wheel_venv, prepared):
    """Each toktok command, in the pages' order, exits 0 with no traceback or error line."""
    failed = []
    for page, command in to_run():
        r = subprocess.run(command, shell=True, cwd=prepared, env=wheel_venv["env"], capture_output=True,
                           text=True, timeout=600)
        output = r.stdout + r.stderr
        if r.returncode != 0 or "Traceback" in output or "toktok: error" in output:
            failed.append(f"{page}: {command}\n  exit {r.returncode}: {output.strip()[-600:]}")
    assert not failed, "documented commands that fail from a wheel install:\n" + "\n".join(failed)
    # what the commands wrote, where the docs say they write it
    for out in ("out/mytok", "out/chat", "out/base.tiktoken", "out/examples/phases/phases.tiktoken", "rare.parquet"):
        assert (prepared / out).exists(), out
    assert not (prepared / "sql").exists()


@pytest.fixture(scope="module")
def servers(tmp_path_factory):
    """Start a store's server holding a tree of fixtures (key -> data_fixtures file), as
    ``start(scheme, tree)``; every server started is stopped at the end of the module."""
    import stores
    import zstandard

    # the names the docs use: a Hub dataset repo and an Azure container of their own
    kinds = {**stores.STORES, "hf": type("DocsHub", (stores.HubStore,), {"repo": "HuggingFaceFW/fineweb-edu"}),
             "az": type("DocsAzure", (stores.AzureStore,), {"bucket": "container"})}
    started = []

    def start(scheme: str, tree: dict[str, str]):
        if scheme == "az" and not stores.AZURITE.exists():
            if os.environ.get("CI"):
                raise AssertionError(f"{stores.AZURITE} is missing: `make test` installs Azurite")
            pytest.skip("Azurite is not installed (make test installs it with npm)")
        data = {key: (FIXTURES / name).read_bytes() for key, name in tree.items()}
        data = {k: zstandard.ZstdCompressor().compress(v) if k.endswith(".zst") else v for k, v in data.items()}
        started.append(kinds[scheme](tmp_path_factory.mktemp(f"docs-{scheme}"), data))
        return started[-1]

    yield start
    for s in started:
        s.stop()


@pytest.mark.parametrize("command", list(STORE_RUNS), ids=lambda c: STORE_RUNS[c][0])
def test_every_documented_store_command_runs_against_a_local_server(wheel_venv, servers, command, tmp_path):
    """The command as written, the server's address and credentials in the store's usual variables
    (AWS_*, STORAGE_EMULATOR_HOST, AZURE_STORAGE_CONNECTION_STRING, HF_ENDPOINT/HF_TOKEN): it reads
    the objects its URL matches and only those."""
    scheme, tree, unmatched = STORE_RUNS[command]
    store = servers(scheme, tree)
    (tmp_path / "home").mkdir()
    env = {k: v for k, v in store.env(tmp_path / "home").items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
    env["PATH"] = wheel_venv["env"]["PATH"]
    r = subprocess.run(command, shell=True, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    output = r.stdout + r.stderr
    assert r.returncode == 0 and "Traceback" not in output and "toktok: error" not in output, output
    assert not store.secret or store.secret not in output
    with duckdb.connect(str(tmp_path / "out" / "tok" / "run.duckdb"), read_only=True) as con:
        read = [p for (p,) in con.execute("select path from inputs").fetchall()]
    assert sorted(next(k for k in tree if p.endswith("/" + k)) for p in read) == sorted(set(tree) - {unmatched}), read
