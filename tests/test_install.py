"""An installed toktok does everything the README shows: a wheel built from this checkout,
installed into a fresh venv in a temporary folder, runs train, ``sql RUN top_merges`` (the ready
queries ship in the package), show, eval, verify and convert both ways from a folder outside the
checkout, importing only the installed package.

The venv reuses the dependencies of the running interpreter's environment (a ``.pth`` line adds
its site-packages after the venv's own), so pip resolves every dependency without downloading
anything; the wheel is built without build isolation for the same reason. Marked ``wheel``:
``make test`` runs it (about a minute, mostly Numba compiling the kernels of the fresh install).
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
from conftest import FIXTURES, ROOT

pytestmark = pytest.mark.wheel


def _run(cmd: list[str], cwd: Path, env: dict, timeout: int = 600) -> subprocess.CompletedProcess:
    r = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert r.returncode == 0, f"{' '.join(map(str, cmd))}\n{r.stdout}\n{r.stderr}"
    return r


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> dict:
    """A venv holding toktok from a wheel of this checkout; returns its paths and environment."""
    tmp = tmp_path_factory.mktemp("install")
    # build from a copy of what the wheel is made of, so that the build leaves nothing in the checkout
    src = tmp / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    shutil.copytree(ROOT / "toktok", src / "toktok", ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "*.nbi", "*.nbc"))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV", "TOKTOK_"))}
    env["PIP_NO_INPUT"] = "1"
    wheels = tmp / "wheels"
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(wheels), str(src)],
         cwd=tmp, env=env)
    (wheel,) = wheels.glob("toktok-*.whl")

    venv = tmp / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", str(venv)], cwd=tmp, env=env)
    py = venv / "bin" / "python"
    site = Path(_run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], tmp, env).stdout.strip())
    # the running environment's packages, after the venv's own: dependencies without downloads
    (site / "_toktok_test_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    _run([sys.executable, "-m", "pip", "--python", str(py), "install", "-q", str(wheel)], cwd=tmp, env=env)
    work = tmp / "work"
    work.mkdir()
    for name in ("notes.txt", "sample.parquet", "extra.jsonl"):
        shutil.copy(FIXTURES / name, work / name)
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    return {"venv": venv, "py": py, "site": site, "work": work, "env": env, "toktok": venv / "bin" / "toktok"}


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
