"""`toktok eval` and its API: numbers checked by hand, formats agree, the per-language direction a
user expects from different phase budgets, and one clear line for bad input."""
from __future__ import annotations

import json

import polars as pl
import pytest
from conftest import FIXTURES, one_error_line
from typer.testing import CliRunner

import toktok
from toktok.cli import app
from toktok.errors import InputError, VocabError
from toktok.insight.evaluate import WORD_UNIT, evaluate
from oracles.pretokenize import split_words

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


def test_eval_bad_input(insight_run, tmp_path):
    run, data = str(insight_run), str(FIXTURES / "sample.parquet")
    one_error_line(runner.invoke(app, ["eval", run, str(tmp_path / "nope"), "--data", data]), "nope", "no such tokenizer")
    one_error_line(runner.invoke(app, ["eval", run, "--data", str(tmp_path / "missing.parquet")]), "missing.parquet")
    one_error_line(runner.invoke(app, ["eval", run, "--data", data, "--by", "genre"]), "sample.parquet", "genre", "--by file")
    one_error_line(runner.invoke(app, ["eval", run, "--data", str(FIXTURES / "notes.txt"), "--by", "lang"]), "notes.txt", "lang")
    one_error_line(runner.invoke(app, ["eval", run]), "no data")
    one_error_line(runner.invoke(app, ["eval", run, "--dta", data]), "--dta")
    one_error_line(runner.invoke(app, ["eval", str(tmp_path), "--data", data]), "neither")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "ok"}\nnot json\n')
    one_error_line(runner.invoke(app, ["eval", run, "--data", str(bad)]), "bad.jsonl:2")
    with pytest.raises(InputError, match="text_col"):
        evaluate([run], [data], text_column="text_col")
    with pytest.raises(VocabError):
        evaluate([str(FIXTURES / "notes.txt")], [data])


# --- lossy tokenizers and empty files (issue 13) -------------------------------------------------


def _wordpiece(path, lowercase: bool = False):
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers

    t = Tokenizer(models.WordPiece({"[UNK]": 0, "hello": 1, "world": 2, "the": 3}, unk_token="[UNK]"))
    t.pre_tokenizer = pre_tokenizers.Whitespace()
    t.decoder = decoders.WordPiece()
    if lowercase:
        t.normalizer = normalizers.Lowercase()
    t.save(str(path))
    return str(path)


def _bpe_without_unk(path):
    """A BPE with no unknown token and no byte fallback: it drops what it does not know."""
    from tokenizers import Tokenizer, models

    Tokenizer(models.BPE(vocab={"a": 0, "b": 1, "ab": 2, " ": 3}, merges=[("a", "b")])).save(str(path))
    return str(path)


def _trained_unigram(path):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    t = Tokenizer(models.Unigram())
    t.pre_tokenizer = pre_tokenizers.Metaspace()
    t.decoder = decoders.Metaspace()
    t.train_from_iterator(["hello world, the cat sat on the mat"] * 20,
                          trainers.UnigramTrainer(vocab_size=60, special_tokens=["<unk>"], unk_token="<unk>"))
    t.save(str(path))
    return str(path)


def test_lossy_tokenizers_are_detected_with_the_share_of_text(insight_run, tmp_path):
    from toktok.errors import ToktokWarning

    data = tmp_path / "d.jsonl"
    data.write_text("\n".join(json.dumps({"text": t}) for t in ["hello world", "hello wörld", "the 日本"]) + "\n")
    (tmp_path / "wp").mkdir()
    wp = _wordpiece(tmp_path / "wp" / "tokenizer.json")
    with pytest.warns(ToktokWarning) as caught:
        rows = evaluate([str(insight_run), wp], [str(data)])
    ours, theirs = rows
    # byte-level: nothing lost, no warning about it
    assert (ours["lossy_docs"], ours["lost_chars"], ours["unk_tokens"]) == (0, 0, 0)
    # by hand: "wörld" and "日本" become [UNK]: 7 of 28 characters, 2 of 3 documents
    assert (theirs["lossy_docs"], theirs["lost_chars"], theirs["unk_tokens"]) == (2, 7, 2)
    assert theirs["chars"] == 28 and theirs["tokens"] == 6
    (w,) = [str(x.message) for x in caught]
    assert w.startswith("wp: lossy tokenizer: 25.00% of the characters have no token of their own "
                        "(2 unknown tokens stand for them), and 2 of 3 documents (") and "looks better" in w


@pytest.mark.parametrize("make, text, lost, unk, why", [
    (_bpe_without_unk, "ab abc", 1, 0, "they are dropped"),  # "c" is silently dropped
    (lambda p: _wordpiece(p, lowercase=True), "Hello World the", 0, 0, "normalizer or decoder changes the text"),
    (_trained_unigram, "Hello abc 日本", None, None, "unknown tokens stand for them"),
])
def test_every_kind_of_lossy_tokenizer_is_flagged(tmp_path, make, text, lost, unk, why):
    from toktok.errors import ToktokWarning

    data = tmp_path / "d.txt"
    data.write_text(text)
    tok = make(tmp_path / "tok.json")
    with pytest.warns(ToktokWarning, match=why):
        (row,) = evaluate([tok], [str(data)])
    assert row["lossy_docs"] == 1
    if lost is not None:
        assert (row["lost_chars"], row["unk_tokens"]) == (lost, unk)
    else:
        assert row["lost_chars"] >= 3 and row["unk_tokens"] >= 1  # at least H, 日, 本 are unknown


def test_eval_command_warns_about_lossy_tokenizers(insight_run, tmp_path):
    data = tmp_path / "d.txt"
    data.write_text("hello wörld")
    wp = _wordpiece(tmp_path / "wp.json")
    r = runner.invoke(app, ["eval", str(insight_run), wp, "--data", str(data)], env={"COLUMNS": "200"})
    assert r.exit_code == 0, r.output
    assert "toktok: warning: wp: lossy tokenizer: 45.45% of the characters" in r.output
    assert "wp (lossy)" in r.output and "lossy = its tokens do not decode back" in r.output
    assert "run (lossy)" not in r.output
    r = runner.invoke(app, ["eval", str(insight_run), wp, "--data", str(data), "--json"])
    doc = json.loads(r.stdout)
    assert [x["lossy_docs"] for x in doc["rows"]] == [0, 1] and len(doc["warnings"]) == 1


def test_empty_txt_is_no_document_like_an_empty_jsonl(insight_run, tmp_path):
    empty_txt, bom_txt, empty_jsonl = tmp_path / "e.txt", tmp_path / "bom.txt", tmp_path / "e.jsonl"
    empty_txt.write_bytes(b"")
    bom_txt.write_bytes(b"\xef\xbb\xbf")
    empty_jsonl.write_bytes(b"")
    for p in (empty_txt, bom_txt, empty_jsonl):
        one_error_line(runner.invoke(app, ["eval", str(insight_run), "--data", str(p)]), str(p), "no documents")
    notes = FIXTURES / "notes.txt"
    rows = evaluate([str(insight_run)], [str(notes), str(empty_txt), str(bom_txt), str(empty_jsonl)], by="file")
    assert rows[0]["docs"] == 1 and [r["subset"] for r in rows] == ["all", str(notes)]
    # a BOM is not text, as in training
    with_bom = tmp_path / "b.txt"
    with_bom.write_bytes(b"\xef\xbb\xbf" + notes.read_bytes())
    assert evaluate([str(insight_run)], [str(with_bom)])[0]["bytes"] == rows[0]["bytes"]


def test_eval_parquet_column_given_twice(insight_run, tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    p = tmp_path / "dup.parquet"
    pq.write_table(pa.Table.from_arrays([pa.array(["a"]), pa.array(["b"]), pa.array(["en"]), pa.array(["fr"])],
                                        names=["text", "text", "lang", "lang"]), p)
    one_error_line(runner.invoke(app, ["eval", str(insight_run), "--data", str(p)]), str(p), "2 columns are named 'text'")
    q = tmp_path / "dup_by.parquet"
    pq.write_table(pa.Table.from_arrays([pa.array(["a"]), pa.array(["en"]), pa.array(["fr"])],
                                        names=["text", "lang", "lang"]), q)
    one_error_line(runner.invoke(app, ["eval", str(insight_run), "--data", str(q), "--by", "lang"]), "2 columns are named 'lang'")


# --- data read as training reads it (issue 15) ---------------------------------------------------


def test_eval_reads_data_as_training_does_with_bad_utf8(insight_run, tmp_path):
    """evaluate reads through count.read: bad UTF-8 is an error naming the file and line, or
    dropped / replaced by --bad-utf8 as in training; a JSONL field named "file" does not change
    --by file."""
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(b'{"text": "good text", "file": "x"}\n{"text": "bad \xff text", "file": "y"}\n')
    run = str(insight_run)
    one_error_line(runner.invoke(app, ["eval", run, "--data", str(bad)]), "bad.jsonl", "--bad-utf8")
    one_error_line(runner.invoke(app, ["eval", run, "--data", str(bad), "--bad-utf8", "drop"]), "--bad-utf8")
    skip = evaluate([run], [str(bad)], bad_utf8="skip", by="file")
    assert [(r["subset"], r["docs"], r["bytes"]) for r in skip] == [("all", 1, 9), (str(bad), 1, 9)]
    r = runner.invoke(app, ["eval", run, "--data", str(bad), "--bad-utf8", "replace", "--json"])
    assert r.exit_code == 0, r.output
    row = json.loads(r.stdout)["rows"][0]
    assert (row["docs"], row["bytes"]) == (2, 9 + len("bad \ufffd text".encode()))
