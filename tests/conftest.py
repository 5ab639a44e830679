from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
from hypothesis import settings

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "data_fixtures" / "corpus"  # the corpus files only (a folder source of them)
sys.path.insert(0, str(Path(__file__).parent))

# Fuzz budget: TOKTOK_FUZZ multiplies every hypothesis test's examples (slow mode uses 10).
FUZZ = int(os.environ.get("TOKTOK_FUZZ", "1"))
settings.register_profile("toktok", deadline=None, max_examples=100 * FUZZ, derandomize=os.environ.get("CI") == "true")
settings.load_profile("toktok")


@pytest.fixture(scope="session")
def fixtures() -> Path:
    return FIXTURES


# --- runs for the insight, eval and notebook tests (tests/test_insight.py, test_eval.py, test_notebooks.py)


@pytest.fixture(scope="session")
def insight_data(tmp_path_factory) -> dict:
    """sample.parquet split by row: even rows to train on (all, general = en + code, multi), odd
    rows held out (columns text, source, lang)."""
    import polars as pl

    d = tmp_path_factory.mktemp("insight_data")
    df = pl.read_parquet(FIXTURES / "sample.parquet").with_row_index("i")
    train = df.filter(pl.col("i") % 2 == 0).drop("i")
    train.write_parquet(d / "train.parquet")
    train.filter(pl.col("source") != "multi").write_parquet(d / "general.parquet")
    train.filter(pl.col("source") == "multi").write_parquet(d / "multi.parquet")
    df.filter(pl.col("i") % 2 == 1).drop("i").write_parquet(d / "heldout.parquet")
    return {k: d / f"{k}.parquet" for k in ("train", "general", "multi", "heldout")}


@pytest.fixture(scope="session")
def insight_run(tmp_path_factory, insight_data) -> Path:
    """A 300-merge run on the training half of the fixtures (+ notes.txt, extra.jsonl) with its
    insight tables filled as the pipeline does: views, compression curve by lang on the held-out
    half, word gains."""
    import duckdb
    import polars as pl
    from typer.testing import CliRunner

    from toktok.cli import app
    from toktok.insight.runfile import add_views, compression_curve, word_gains

    out = tmp_path_factory.mktemp("insight") / "run"
    r = CliRunner().invoke(app, ["train", str(insight_data["train"]), str(FIXTURES / "notes.txt"),
                                 str(FIXTURES / "extra.jsonl"), "--out", str(out), "--merges", "300", "-q",
                                 "--special-token", "<|endoftext|>"])
    assert r.exit_code == 0, r.output
    con = duckdb.connect(str(out / "run.duckdb"))
    try:
        add_views(con)
        compression_curve(con, pl.read_parquet(insight_data["heldout"]), by="lang", every=25, text="held_out")
        word_gains(con)
    finally:
        con.close()
    return out


@pytest.fixture(scope="session")
def phase_pair(tmp_path_factory, insight_data) -> dict[str, Path]:
    """Two tokenizers with the same total budget spent differently: "general" puts all 300 merges on
    English + code, "multi" splits them 150 general + 150 on the multilingual half. Trained as two
    phases; falls back to one phase per data mix where phases are not available."""
    from toktok import config as cfgmod
    from toktok.pipeline import train

    d = tmp_path_factory.mktemp("phases")
    budgets = {"general": (300, 0), "multi": (150, 150)}
    out = {}
    for name, (g, m) in budgets.items():
        if hasattr(cfgmod, "PhaseConfig"):
            P, S = cfgmod.PhaseConfig, cfgmod.SourceConfig
            cfg = cfgmod.TrainConfig(out=str(d / name), special_tokens=["<|endoftext|>"], phases=[
                P("general", g, [S(str(insight_data["general"]))]), P("multi", m, [S(str(insight_data["multi"]))])])
        else:  # pragma: no cover - before multi-phase training
            src = [insight_data["general"]] if m == 0 else [insight_data["multi"]]
            cfg = cfgmod.TrainConfig([str(s) for s in src], str(d / name), merges=300, special_tokens=["<|endoftext|>"])
        train(cfg)
        out[name] = d / name
    return out


def cli(*args):
    """``toktok ARGS`` in this process (Typer's test runner), each argument as a string."""
    from typer.testing import CliRunner

    from toktok.cli import app

    return CliRunner().invoke(app, [*map(str, args)])


def cli_ok(*args) -> str:
    """``cli(*args)``, which must exit 0; its output."""
    r = cli(*args)
    assert r.exit_code == 0, r.output
    return r.output


def one_error_line(r, *needles: str) -> str:
    """The bad-input contract on a CLI result (typer's ``CliRunner`` result or a finished
    subprocess): exit code 2, no traceback, one line ``toktok: error: ...`` naming every needle.
    Example: ``one_error_line(runner.invoke(app, ["train", "missing.txt"]), "missing.txt")``."""
    code = r.returncode if hasattr(r, "returncode") else r.exit_code
    output = r.stdout + r.stderr if hasattr(r, "returncode") else r.output
    assert code == 2, output
    assert "Traceback" not in output
    lines = [ln for ln in output.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("toktok: error: "), lines
    for n in needles:
        assert n in lines[0], (n, lines[0])
    return lines[0]


# --- an installed toktok (tests/test_install.py, tests/test_doc_commands.py) ---------------------


def run_ok(cmd: list, cwd: Path, env: dict, timeout: int = 600) -> subprocess.CompletedProcess:
    """Run ``cmd`` and assert it exits 0 (the message shows the command and its output)."""
    r = subprocess.run([str(c) for c in cmd], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert r.returncode == 0, f"{' '.join(map(str, cmd))}\n{r.stdout}\n{r.stderr}"
    return r


@pytest.fixture(scope="session")
def wheel_venv(tmp_path_factory) -> dict:
    """A venv holding toktok from a wheel of this checkout, built once per session: its ``venv``,
    ``py``, ``site`` (site-packages), ``toktok`` and ``env`` (PATH leads to the venv's bin/).

    The venv reuses the dependencies of the running interpreter's environment (a ``.pth`` line adds
    its site-packages after the venv's own), so pip resolves every dependency without downloading
    anything; the wheel is built without build isolation, from a copy of what it is made of, so
    that the build leaves nothing in the checkout."""
    tmp = tmp_path_factory.mktemp("install")
    src = tmp / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    shutil.copytree(ROOT / "toktok", src / "toktok", ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "*.nbi", "*.nbc"))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV", "TOKTOK_"))}
    env["PIP_NO_INPUT"] = "1"
    wheels = tmp / "wheels"
    run_ok([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", wheels, src],
           cwd=tmp, env=env)
    (wheel,) = wheels.glob("toktok-*.whl")
    venv = tmp / "venv"
    run_ok([sys.executable, "-m", "venv", "--without-pip", venv], cwd=tmp, env=env)
    py = venv / "bin" / "python"
    site = Path(run_ok([py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], tmp, env).stdout.strip())
    # the running environment's packages, after the venv's own: dependencies without downloads
    (site / "_toktok_test_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    run_ok([sys.executable, "-m", "pip", "--python", py, "install", "-q", wheel], cwd=tmp, env=env)
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    return {"venv": venv, "py": py, "site": site, "env": env, "toktok": venv / "bin" / "toktok"}
