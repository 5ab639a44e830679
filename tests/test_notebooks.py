"""The notebooks in notebooks/ run top to bottom, headless, on runs made from data_fixtures/, draw
their plots, and are stored without outputs."""
from __future__ import annotations

import nbformat
from conftest import ROOT
from nbclient import NotebookClient

NOTEBOOKS = ROOT / "notebooks"


def _execute(name: str, env: dict[str, str], monkeypatch) -> nbformat.NotebookNode:
    for k, v in env.items():
        monkeypatch.setenv(k, v)  # the kernel inherits the environment
    monkeypatch.setenv("MPLBACKEND", "module://matplotlib_inline.backend_inline")
    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    NotebookClient(nb, timeout=180, kernel_name="python3",
                   resources={"metadata": {"path": str(NOTEBOOKS)}}).execute()
    return nb


def _images(nb) -> int:
    return sum("image/png" in o.get("data", {}) for c in nb.cells if c.cell_type == "code" for o in c.outputs)


def _text(nb) -> str:
    return "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.outputs)


def test_notebooks_are_stored_without_outputs():
    found = sorted(NOTEBOOKS.glob("*.ipynb"))
    assert {p.name for p in found} >= {"run_insight.ipynb", "compare_tokenizers.ipynb", "compare_patterns.ipynb"}
    for p in found:
        nb = nbformat.read(p, as_version=4)
        nbformat.validate(nb)
        for c in nb.cells:
            if c.cell_type == "code":
                assert c.outputs == [] and c.execution_count is None, f"{p.name}: strip the outputs before committing"


def test_run_insight_notebook(insight_run, monkeypatch):
    nb = _execute("run_insight.ipynb", {"TOKTOK_RUN": str(insight_run), "TOKTOK_SQL": str(ROOT / "sql")}, monkeypatch)
    # count decay, compression curve + per-language bars, token lengths, vocabulary share
    assert _images(nb) >= 5
    text = _text(nb)
    assert str(insight_run) in text and "merges_learned  300" in text
    assert "no compression table" not in text  # drawn from the run's own held-out curve


def test_run_insight_notebook_without_views(insight_run, tmp_path, monkeypatch):
    """An older run (no views, no compression table) still plots: views for the session only,
    the curve computed on the fixture sample."""
    import shutil

    import duckdb

    from toktok.insight.runfile import TABLES, VIEWS

    run = tmp_path / "old"
    shutil.copytree(insight_run, run)
    con = duckdb.connect(str(run / "run.duckdb"))
    for v in VIEWS:
        con.execute(f"drop view {v}")
    for t in TABLES:
        con.execute(f"drop table {t}")
    con.close()
    nb = _execute("run_insight.ipynb", {"TOKTOK_RUN": str(run), "TOKTOK_SQL": str(ROOT / "sql"),
                                        "TOKTOK_DATA": str(ROOT / "data_fixtures" / "corpus" / "sample.parquet")}, monkeypatch)
    assert _images(nb) >= 5
    assert "no compression table" in _text(nb)


def test_compare_tokenizers_notebook(phase_pair, insight_data, monkeypatch):
    nb = _execute("compare_tokenizers.ipynb", {
        "TOKTOK_TOKENIZERS": f"{phase_pair['general']} {phase_pair['multi']}",
        "TOKTOK_DATA": str(insight_data["heldout"]), "TOKTOK_BY": "lang"}, monkeypatch)
    assert _images(nb) >= 3
    assert "2 tokenizers on 265 documents" in _text(nb)


def test_train_from_python_notebook(tmp_path, monkeypatch):
    """Trains from a Polars DataFrame and from a datasets.Dataset: the same .tiktoken."""
    nb = _execute("train_from_python.ipynb", {"TOKTOK_DATA": str(ROOT / "data_fixtures" / "corpus" / "sample.parquet"),
                                              "TOKTOK_OUT": str(tmp_path), "HF_DATASETS_OFFLINE": "1"}, monkeypatch)
    text = _text(nb)
    assert "same .tiktoken: True" in text and "sample" in text and "memory" in text
    assert (tmp_path / "from_dataframe" / "tokenizer.tiktoken").is_file()


def test_compare_patterns_notebook(insight_data, tmp_path, monkeypatch):
    """Trains cl100k, o200k and qwen2 vocabularies of one size on the same data and compares them
    with toktok eval on the held-out half, by language."""
    nb = _execute("compare_patterns.ipynb", {
        "TOKTOK_DATA": str(insight_data["train"]), "TOKTOK_HELD_OUT": str(insight_data["heldout"]),
        "TOKTOK_OUT": str(tmp_path), "TOKTOK_VOCAB": "2000", "TOKTOK_BY": "lang"}, monkeypatch)
    assert _images(nb) >= 2
    text = _text(nb)
    assert "3 patterns on 265 held-out documents" in text
    assert "qwen2   2,000 tokens: 256 bytes + 61 hardcoded" in text and "cl100k  2,000 tokens" in text
    assert "o200k   He's |  got" in text  # the splits, one line per pattern
    for name in ("cl100k", "o200k", "qwen2"):
        assert (tmp_path / name / "tokenizer.json").is_file()
