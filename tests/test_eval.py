"""`toktok eval` and its API: numbers checked by hand, formats agree, the per-language direction a
user expects from different phase budgets, and one clear line for bad input."""
from __future__ import annotations

import json

import polars as pl
import pytest
from conftest import FIXTURES
from typer.testing import CliRunner

import toktok
from toktok.cli import app
from toktok.errors import InputError, VocabError
from toktok.evaluate import WORD_UNIT, evaluate
from toktok.pretokenize import split_words

runner = CliRunner()


def _by(rows, key="bytes_per_token"):
    out: dict[str, dict[str, float]] = {}
    for r in rows:
        out.setdefault(r["subset"], {})[r["tokenizer"]] = r[key]
    return out


def test_phase_budgets_show_up_per_language(phase_pair, insight_data):
    """Spending half of the merges on a multilingual phase compresses the other languages better
    and English and code a little worse, on held-out text."""
    rows = evaluate([phase_pair["general"], phase_pair["multi"]], [insight_data["heldout"]], by="source")
    bpt = _by(rows)
    assert bpt["en"]["general"] > bpt["en"]["multi"]
    assert bpt["code"]["general"] > bpt["code"]["multi"]
    assert bpt["multi"]["multi"] > bpt["multi"]["general"] * 1.1
    tpw = _by(rows, "tokens_per_word")
    assert tpw["multi"]["multi"] < tpw["multi"]["general"] and tpw["en"]["multi"] > tpw["en"]["general"]
    by_lang = _by(evaluate([phase_pair["general"], phase_pair["multi"]], [insight_data["heldout"]], by="lang"))
    for lang in ("ru", "uk", "el", "hi", "ka", "ar-MA", "ko", "ja", "th"):
        assert by_lang[lang]["multi"] > by_lang[lang]["general"], lang
    assert by_lang["en"]["general"] > by_lang["en"]["multi"]


def test_numbers_by_hand(insight_run, insight_data):
    df = pl.read_parquet(insight_data["heldout"])
    rows = evaluate([str(insight_run)], [str(insight_data["heldout"])], by="lang")
    enc = toktok.load_encoding(insight_run)
    assert [r["subset"] for r in rows] == ["all"] + sorted(df["lang"].unique().to_list())
    for r in rows:
        texts = df["text"].to_list() if r["subset"] == "all" else df.filter(pl.col("lang") == r["subset"])["text"].to_list()
        ids = [enc.encode(t, allowed_special="all") for t in texts]
        n = sum(map(len, ids))
        assert r["docs"] == len(texts) and r["tokens"] == n
        assert r["bytes"] == sum(len(t.encode()) for t in texts) and r["chars"] == sum(map(len, texts))
        assert r["words"] == sum(len(split_words(t)) for t in texts)
        assert r["bytes_per_token"] == pytest.approx(r["bytes"] / n)
        assert r["tokens_per_word"] == pytest.approx(n / r["words"])
        used = {i for x in ids for i in x}
        assert r["vocab_used"] == len(used) and r["vocab_size"] == enc.n_vocab
        assert r["vocab_utilization"] == pytest.approx(len(used) / enc.n_vocab)
        assert r["tokenizer"] == "run" and r["kind"] == "tiktoken" and r["by"] == "lang"


def test_folder_tiktoken_and_tokenizer_json_agree(insight_run):
    specs = [str(insight_run), str(insight_run / "tokenizer.tiktoken"), str(insight_run / "tokenizer.json")]
    rows = evaluate(specs, [str(FIXTURES / "extra.jsonl"), str(FIXTURES / "notes.txt")], by="file")
    assert [r["kind"] for r in rows[:3]] == ["tiktoken", "tiktoken", "hf"]
    assert len({r["tokenizer"] for r in rows}) == 3  # names made unique
    for subset in {r["subset"] for r in rows}:
        got = [(r["tokens"], r["vocab_used"], r["vocab_size"]) for r in rows if r["subset"] == subset]
        assert got[0] == got[1] == got[2], subset
    assert {r["subset"] for r in rows} == {"all", str(FIXTURES / "extra.jsonl"), str(FIXTURES / "notes.txt")}


def test_eval_command_table_and_json(phase_pair, insight_data):
    a, b = str(phase_pair["general"]), str(phase_pair["multi"])
    r = runner.invoke(app, ["eval", a, b, "--data", str(insight_data["heldout"]), str(FIXTURES / "notes.txt"), "--by", "file"])
    assert r.exit_code == 0, r.output
    for needle in ("bytes/tok", "tok/word", "general", "multi", "notes.txt", "heldout", "pre-tokenizer pieces"):
        assert needle in r.output, needle
    r = runner.invoke(app, ["eval", a, "--json", "--data", str(insight_data["heldout"]), "--by", "source", "-d",
                            str(FIXTURES / "sample.parquet")])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.output)
    assert doc["words"] == WORD_UNIT and doc["by"] == "source" and len(doc["data"]) == 2
    assert [x["subset"] for x in doc["rows"]] == ["all", "code", "en", "multi"]
    assert doc["rows"][0]["docs"] == 265 + 531


def _one_error_line(r, *needles):
    assert r.exit_code == 2, r.output
    lines = [ln for ln in r.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("toktok: error:"), r.output
    for n in needles:
        assert n in lines[0], lines[0]


def test_eval_bad_input(insight_run, tmp_path):
    run, data = str(insight_run), str(FIXTURES / "sample.parquet")
    _one_error_line(runner.invoke(app, ["eval", run, str(tmp_path / "nope"), "--data", data]), "nope", "no such tokenizer")
    _one_error_line(runner.invoke(app, ["eval", run, "--data", str(tmp_path / "missing.parquet")]), "missing.parquet")
    _one_error_line(runner.invoke(app, ["eval", run, "--data", data, "--by", "genre"]), "sample.parquet", "genre", "--by file")
    _one_error_line(runner.invoke(app, ["eval", run, "--data", str(FIXTURES / "notes.txt"), "--by", "lang"]), "notes.txt", "lang")
    _one_error_line(runner.invoke(app, ["eval", run]), "no data")
    _one_error_line(runner.invoke(app, ["eval", run, "--dta", data]), "--dta")
    _one_error_line(runner.invoke(app, ["eval", str(tmp_path), "--data", data]), "neither")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "ok"}\nnot json\n')
    _one_error_line(runner.invoke(app, ["eval", run, "--data", str(bad)]), "bad.jsonl:2")
    with pytest.raises(InputError, match="text_col"):
        evaluate([run], [data], text_column="text_col")
    with pytest.raises(VocabError):
        evaluate([str(FIXTURES / "notes.txt")], [data])
