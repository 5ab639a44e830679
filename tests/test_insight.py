"""The run file's insight views and tables, the ready queries in sql/, `toktok sql` and `toktok show`.

The fixture run (conftest.insight_run) is made like the pipeline makes one, with its views, the
compression curve on a held-out half of the fixtures (by lang) and the word gains.
"""
from __future__ import annotations

import csv
import io
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import duckdb
import polars as pl
import pyarrow.parquet as pq
import pytest
import tiktoken
from conftest import ROOT, one_error_line
from typer.testing import CliRunner

import toktok
from toktok.cli import app
from toktok.errors import ConfigError, QueryError, ToktokError
from toktok.insight.runfile import TABLES, VIEWS, add_views, compression_curve, describe, query, word_gains
from toktok.vocab import PATTERN

READY = sorted((ROOT / "toktok" / "sql" / "ready").glob("*.sql"))
runner = CliRunner()


def _con(run: Path) -> duckdb.DuckDBPyConnection:
    return duckdb.connect(str(run / "run.duckdb"), read_only=True)


def _rows(con, q, params=None) -> list[tuple]:
    return con.execute(q, params or {}).fetchall()


def test_ready_queries_exist():
    names = {p.stem for p in READY}
    assert {"top_merges", "count_decay", "longest_tokens", "tokens_by_script", "tokens_by_language",
            "phase_gains", "undertrained_tokens", "compression_by_language"} <= names
    # one copy: they ship in the package, and sql/ at the top of the checkout points at it
    assert (ROOT / "sql").is_symlink() and (ROOT / "sql").resolve() == (ROOT / "toktok" / "sql" / "ready").resolve()
    assert sorted(p.name for p in (ROOT / "sql").glob("*.sql")) == [p.name for p in READY]


@pytest.mark.parametrize("path", READY, ids=[p.stem for p in READY])
def test_every_ready_query_runs_on_a_fixture_run(insight_run, path):
    con = _con(insight_run)
    rows = con.execute(path.read_text()).fetchall()
    assert rows, f"{path.name} returned no rows on the fixture run"
    # and through the CLI, by name and by file
    for arg in (path.stem, str(path)):
        r = runner.invoke(app, ["sql", str(insight_run), arg, "--csv"])
        assert r.exit_code == 0, r.output
        assert len(r.output.splitlines()) >= 2


def test_ready_queries_run_by_name_from_any_folder(insight_run, tmp_path, monkeypatch):
    """The names resolve to the package's copies, not to a sql/ folder of the current directory;
    a sql/NAME.sql of one's own there comes first."""
    monkeypatch.chdir(tmp_path)
    r = runner.invoke(app, ["sql", str(insight_run), "top_merges", "--csv"])
    assert r.exit_code == 0, r.output
    assert r.output.splitlines()[0].startswith("phase,merge_index,rank")
    (tmp_path / "sql").mkdir()
    (tmp_path / "sql" / "top_merges.sql").write_text("select 42 as mine")
    r = runner.invoke(app, ["sql", str(insight_run), "top_merges", "--csv"])
    assert r.exit_code == 0 and r.output.splitlines() == ["mine", "42"], r.output


def test_sql_list_names_every_ready_query_and_what_it_shows(tmp_path, monkeypatch):
    """``toktok sql --list`` needs no run: one line per ready query, its name then its header's
    first phrase; a sql/NAME.sql of one's own in the current folder is listed with its path."""
    from toktok.insight.runfile import ready_about

    monkeypatch.chdir(tmp_path)
    r = runner.invoke(app, ["sql", "--list"])
    assert r.exit_code == 0, r.output
    lines = r.output.splitlines()
    assert [ln.split()[0] for ln in lines] == [p.stem for p in READY]
    assert re.search(r"^count_decay +Count decay over the ranks$", r.output, re.M), r.output
    assert all(ready_about(p) and ready_about(p) in r.output for p in READY)
    (tmp_path / "sql").mkdir()
    (tmp_path / "sql" / "mine.sql").write_text("-- My own query: one row.\nselect 1\n")
    r = runner.invoke(app, ["sql", "--list"])
    assert r.exit_code == 0 and "My own query  [sql/mine.sql]" in r.output, r.output
    assert len(r.output.splitlines()) == len(READY) + 1


def test_a_checkout_path_to_a_ready_query_names_the_query_elsewhere(insight_run, tmp_path, monkeypatch):
    """Outside a checkout there is no sql/ folder: sql/NAME.sql of a ready query says to give NAME."""
    monkeypatch.chdir(tmp_path)
    r = runner.invoke(app, ["sql", str(insight_run), "sql/undertrained_tokens.sql"])
    line = one_error_line(r, "sql/undertrained_tokens.sql: no such query file", "give its name, undertrained_tokens")
    assert "toktok sql --list" in line
    one_error_line(runner.invoke(app, ["sql", str(insight_run), "sql/nope.sql"]), "sql/nope.sql: no such query file")


def test_docs_table_of_ready_queries_is_the_list_that_ships():
    """docs/runfile.md's table names each ready query once, and only those."""
    text = (ROOT / "docs" / "runfile.md").read_text()
    start = text.index("| name | what |")
    rows = text[start:text.index("\n\n", start)].splitlines()[2:]
    assert sorted(r.split("`")[1] for r in rows) == [p.stem for p in READY]


def test_stock_duckdb_reads_everything_without_toktok(insight_run):
    """A fresh interpreter with only duckdb imported reads every view, table and ready query."""
    script = f"""
import json, sys, duckdb
con = duckdb.connect({str(insight_run / "run.duckdb")!r}, read_only=True)
out = {{}}
for name in {list(VIEWS + TABLES)!r}:
    out[name] = con.execute(f"select count(*) from {{name}}").fetchall()[0][0]
for path in {[str(p) for p in READY]!r}:
    out[path] = len(con.execute(open(path).read()).fetchall())
assert not [m for m in sys.modules if m.split(".")[0] == "toktok"]
print(json.dumps(out))
"""
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd="/")
    assert r.returncode == 0, r.stderr
    counts = json.loads(r.stdout)
    # superwords: none in a run whose phases split alike (tests/test_superbpe.py reads a full one)
    assert counts.pop("superwords") == 0
    assert all(v > 0 for v in counts.values()), counts


def test_views_agree_with_the_tables(insight_run):
    con = _con(insight_run)
    enc = toktok.load_encoding(insight_run)
    n_merges = _rows(con, "select count(*) from merges")[0][0]
    assert n_merges == 300
    # merges_text: one row per merge, rank = token id, text and length of the token
    rows = _rows(con, "select merge_index, rank, token, text, bytes, chars, left_id, right_id, left_text, right_text "
                      "from merges_text order by merge_index")
    assert len(rows) == n_merges
    for mi, rank, token, text, nbytes, chars, left, right, ltext, rtext in rows:
        assert enc.decode_single_token_bytes(rank) == bytes(token)
        assert nbytes == len(token)
        assert bytes(token) == enc.decode_single_token_bytes(left) + enc.decode_single_token_bytes(right)
        try:
            assert text == bytes(token).decode() and chars == len(text)
        except UnicodeDecodeError:
            assert text is None and chars is None
    # words_text: text where valid UTF-8, bytes, bytes/token
    w = _rows(con, "select word, text, bytes, tokens, bytes_per_token from words_text order by count desc limit 200")
    for word, text, nbytes, tokens, bpt in w:
        assert text == bytes(word).decode() and nbytes == len(word) and bpt == pytest.approx(nbytes / tokens)
    # vocab_text: parts add up to the vocabulary
    parts = dict(_rows(con, "select part, count(*) from vocab_text group by part"))
    assert parts == {"byte": 256, "hardcoded": 1161, "main": 300, "special": 1}
    # runs: one row that matches the run
    (run,) = con.execute("select * from runs").fetchall()
    cols = [d[0] for d in con.description]
    r = dict(zip(cols, run))
    assert r["merges_requested"] == 300 and r["merges_learned"] == 300 and r["merges_reused"] == 0
    assert r["vocab_size"] == enc.n_vocab and r["specials"] == 1 and r["parity_ok"] is True
    assert r["files"] == 3 and r["words"] == _rows(con, "select count(*) from words")[0][0]
    # phases and sources
    (ph,) = con.execute("select phase, merges, first_id, last_id, files, vocab_share from phases").fetchall()
    assert ph[:5] == ("main", 300, 1417, 1716, 3)
    assert ph[5] == pytest.approx(300 / (enc.n_vocab - 1))
    shares = _rows(con, "select sum(share_of_run), sum(text_bytes) from sources")[0]
    assert shares[0] == pytest.approx(1.0)
    assert shares[1] == _rows(con, "select sum(text_bytes) from inputs")[0][0]


def test_compression_curve_is_exact(insight_run, insight_data):
    """Each point equals encoding the held-out texts with the tokenizer cut after k merges."""
    con = _con(insight_run)
    held = pl.read_parquet(insight_data["heldout"])
    texts = held["text"].to_list()
    curve = con.execute("select merges, vocab_size, subset, docs, bytes, tokens, bytes_per_token from compression "
                        "order by merges, subset").fetchall()
    assert sorted({r[0] for r in curve}) == list(range(0, 301, 25))
    ranks = toktok.load_encoding(insight_run)._mergeable_ranks
    by_rank = sorted(ranks, key=ranks.get)
    for k in (0, 100, 300):
        enc = tiktoken.Encoding(f"k{k}", pat_str=PATTERN, mergeable_ranks={t: i for i, t in enumerate(by_rank[:1417 + k])},
                                special_tokens={})
        want = sum(len(enc.encode_ordinary(t)) for t in texts)
        (row,) = [r for r in curve if r[0] == k and r[2] == "all"]
        assert row[1] == 1417 + k and row[3] == len(texts) and row[5] == want
        assert row[4] == sum(len(t.encode()) for t in texts) and row[6] == pytest.approx(row[4] / want)
        # the languages partition the sample
        per = [r for r in curve if r[0] == k and r[2] != "all"]
        assert {r[2] for r in per} == set(held["lang"].unique())
        assert sum(r[5] for r in per) == want and sum(r[3] for r in per) == len(texts)
    # merges compress: the last point beats the first, overall and for English
    first, last = {r[2]: r[6] for r in curve if r[0] == 0}, {r[2]: r[6] for r in curve if r[0] == 300}
    assert last["all"] > first["all"] * 1.2 and last["en"] > first["en"] * 1.3
    # token usage of the final tokenizer adds up to its tokens, per subset too
    uses = dict(_rows(con, "select subset, sum(uses) from token_usage group by subset"))
    tokens = {r[2]: r[5] for r in curve if r[0] == 300}
    assert uses == tokens
    meta = json.loads(_rows(con, "select value from meta where key = 'compression'")[0][0])
    assert meta["docs"] == len(texts) and meta["by"] == "lang" and meta["points"] == 13
    assert meta["text"] == "held_out"  # what the texts are, as the caller said


# --- the pipeline's own curve: on text the run did not train on, or labelled training text ------


def _letters(i: int) -> str:
    out = ""
    for _ in range(4):
        out, i = out + "bcdfghjklmnpqrstvwxz"[i % 20], i // 20
    return out


@pytest.fixture(scope="module")
def marked(tmp_path_factory) -> Path:
    """1,200 short documents, each with a word of its own (" zq" + letters): which documents a run
    counted shows in its word table."""
    d = tmp_path_factory.mktemp("marked")
    base = SAMPLE_TEXTS = pl.read_parquet(ROOT / "data_fixtures" / "corpus" / "sample.parquet")["text"].to_list()
    texts = [f"Doc zq{_letters(i)}zq says: {SAMPLE_TEXTS[i % len(base)][:150]}" for i in range(1200)]
    pl.DataFrame({"text": texts}).write_parquet(d / "a.parquet")
    pl.DataFrame({"text": texts[:300]}).write_parquet(d / "b.parquet")
    return d


def _marks(texts) -> set[bytes]:
    import re

    return {m.encode() for t in texts for m in re.findall(r" zq[a-z]{4}zq", t)}


def _train_cfg(tmp_path: Path, phases: str, name: str = "out") -> Path:
    cfg = tmp_path / f"{name}.yaml"
    cfg.write_text(f"output: {tmp_path / name / 'tokenizer.tiktoken'}\nphases:\n{phases}")
    r = runner.invoke(app, ["train", "--config", str(cfg), "-q"])
    assert r.exit_code == 0, r.output
    return tmp_path / name


def _curve_meta(out: Path) -> dict:
    con = _con(out)
    try:
        meta = dict(con.execute("select key, value from meta").fetchall())
        meta["_curve"] = con.execute("select docs, bytes from compression where subset = 'all' and merges = 0").fetchone()
        meta["_words"] = {bytes(w) for (w,) in con.execute("select word from words").fetchall()}
        meta["_parity"] = [t for (t,) in con.execute("select text from parity").fetchall()]
        return meta
    finally:
        con.close()


def test_sampled_run_measures_the_curve_on_text_it_did_not_train_on(marked, tmp_path):
    out = _train_cfg(tmp_path, f"  - {{name: a, merges: 150, budget: 60KB, sources: [{{path: {marked / 'a.parquet'}}}]}}\n")
    m = _curve_meta(out)
    info = json.loads(m["compression"])
    assert info["text"] == "held_out" and info["text_by_phase"] == {"a": "held_out"}
    held = json.loads(m["held_out:a"])
    assert len(held) == 64 == info["docs"] == m["_curve"][0]
    assert m["_curve"][1] == sum(len(h["text"].encode()) for h in held)
    # none of them was counted; the parity sample (training text) was
    assert _marks(h["text"] for h in held) and not _marks(h["text"] for h in held) & m["_words"]
    assert _marks(m["_parity"]) <= m["_words"]
    r = runner.invoke(app, ["show", str(out)])
    assert "held out (text the run did not train on): 64 docs" in r.output
    assert json.loads(runner.invoke(app, ["show", str(out), "--json"]).output)["sample"]["text"] == "held_out"


def test_full_read_labels_the_curve_training_text(marked, tmp_path):
    """Every document read: no held-out text, the curve is on the parity sample and says so; a
    run with a sampled and a full-read phase says which phase gave what."""
    out = _train_cfg(tmp_path, f"  - {{name: a, merges: 150, sources: [{{path: {marked / 'b.parquet'}}}]}}\n", "full")
    m = _curve_meta(out)
    info = json.loads(m["compression"])
    assert info["text"] == "training" and "held_out:a" in m and json.loads(m["held_out:a"]) is None
    assert _marks(m["_parity"]) <= m["_words"] and info["docs"] == len(m["_parity"]) == 64
    assert "training text (the run read every document" in runner.invoke(app, ["show", str(out)]).output
    out = _train_cfg(tmp_path, f"  - {{name: a, merges: 100, budget: 60KB, sources: [{{path: {marked / 'a.parquet'}}}]}}\n"
                               f"  - {{name: b, merges: 50, sources: [{{path: {marked / 'b.parquet'}}}]}}\n", "mixed")
    info = json.loads(_curve_meta(out)["compression"])
    assert info["text"] == "mixed" and info["text_by_phase"] == {"a": "held_out", "b": "training"}
    assert info["docs"] == 64 + 64
    assert "held out where a phase was sampled" in runner.invoke(app, ["show", str(out)]).output


def test_resumed_sampled_run_keeps_its_held_out_text(marked, tmp_path):
    """Killed after the sample was checkpointed, or after the phase was counted: --resume ends
    with the same held-out pieces and curve as an uninterrupted run."""
    import faults

    cfg = tmp_path / "run.yaml"
    body = f"phases:\n  - {{name: a, merges: 150, budget: 60KB, sources: [{{path: {marked / 'a.parquet'}}}]}}\n"
    want = None
    for fault in (None, 1, 2):
        out = tmp_path / f"o{fault}"
        cfg.write_text(f"output: {out / 'tokenizer.tiktoken'}\n" + body)
        if fault is not None:
            r = subprocess.run(faults.command(every=0, kill_at=fault) + ["train", "--config", str(cfg), "-q"],
                               capture_output=True, text=True, timeout=600)
            assert r.returncode == -9, r.stderr
        r = subprocess.run(faults.command(every=0) + ["train", "--config", str(cfg), "-q",
                                                      *(["--resume"] if fault else [])],
                           capture_output=True, text=True, timeout=600)
        assert r.returncode == 0, r.stderr
        con = _con(out)
        got = (con.execute("select value from meta where key = 'held_out:a'").fetchone(),
               con.execute("select * from compression order by merges, subset").fetchall())
        con.close()
        assert json.loads(got[0][0])
        if want is None:
            want = got
        assert got == want, fault


def test_compression_curve_inputs(insight_run, insight_data):
    held = pl.read_parquet(insight_data["heldout"]).head(30)
    # a list with labels == a table with a column; write=False leaves the file alone
    a = compression_curve(insight_run, held, by="source", checkpoints=4, write=False)
    b = compression_curve(insight_run, held["text"].to_list(), by=held["source"].to_list(), checkpoints=4, write=False)
    assert a.equals(b)
    assert sorted(a["merges"].unique().to_list()) == [0, 75, 150, 225, 300]
    plain = compression_curve(insight_run, held["text"], every=300, write=False)
    assert plain["subset"].to_list() == ["all", "all"]
    empty = compression_curve(insight_run, [], every=100, write=False)
    assert empty["tokens"].to_list() == [0, 0, 0, 0]
    with pytest.raises(ConfigError, match="nope"):
        compression_curve(insight_run, held, by="nope", write=False)
    with pytest.raises(ConfigError, match="one label per text"):
        compression_curve(insight_run, ["a", "b"], by=["x"], write=False)
    with pytest.raises(ConfigError, match="names a column"):
        compression_curve(insight_run, ["a"], by="lang", write=False)
    # the stored table was not touched
    assert _rows(_con(insight_run), "select count(distinct merges) from compression")[0][0] == 13


def test_the_curve_of_pieces_cut_ahead_is_the_curve(insight_run, insight_data, tmp_path):
    """The pipeline cuts the curve's documents beside the merge loop (``insight.stage.ahead``):
    the curve and token usage recorded from them are those ``record`` makes cutting them itself,
    and pieces cut from other documents are not used."""
    import pyarrow as pa

    from toktok.insight.runfile import curve_pieces, curve_table
    from toktok.insight.stage import ahead
    from toktok.patterns import DEFAULT

    held = pl.read_parquet(insight_data["heldout"]).head(40)
    texts, by = held["text"].to_list(), held["source"].to_list()
    plain = curve_table(insight_run, texts, by=by, checkpoints=4, write=False)
    cut = curve_table(insight_run, texts, by=by, checkpoints=4, write=False,
                      pieces=curve_pieces(texts, by, patterns=[DEFAULT]))
    assert cut.equals(plain) and plain.num_rows > 4
    parity = pa.table({"text": texts, "source": by})
    tables = {}
    for name, early in (("itself", None), ("ahead", ahead(parity, {"main": parity}, {"main": None}, [DEFAULT])),
                        ("other", ahead(parity.slice(0, 5), {"main": parity}, {"main": None}, [DEFAULT]))):
        tables[name] = _curve_recorded(insight_run, tmp_path / name, parity, early)
    assert tables["ahead"] == tables["itself"] == tables["other"] and tables["itself"][1]


def test_the_curve_points_segmented_beside_the_loop_are_the_curve(insight_run, insight_data, tmp_path):
    """The pipeline has the curve's points the merge loop passes segmented as it learns
    (``Ahead.learned``, with the loop's tokens so far): the curve and token usage recorded from
    them are those ``record`` makes segmenting them itself; points segmented with tokens that are
    not the run's first are not used."""
    import pyarrow as pa

    from toktok.insight.stage import ahead
    from toktok.patterns import DEFAULT
    from toktok.store import RunStore

    held = pl.read_parquet(insight_data["heldout"]).head(40)
    parity = pa.table({"text": held["text"].to_list(), "source": held["source"].to_list()})
    con = _con(insight_run)
    tokens = [bytes(t) for t, in con.execute("select token from vocab where kind != 'special' order by id").fetchall()]
    merges = con.execute("select count(*) from vocab where kind = 'merge'").fetchone()[0]
    con.close()
    first = len(tokens) - merges
    wrong = tokens[:first + 10] + [b"\x00\x01"] + tokens[first + 11:]
    tables, used = {}, {}
    for name, given in (("itself", None), ("ahead", tokens), ("wrong", wrong)):
        early = ahead(parity, {"main": parity}, {"main": None}, [DEFAULT], points=(DEFAULT, first, merges, False))
        early.result()
        if given is not None:
            for upto in (first, first + merges // 3, first + merges - 1, len(given)):  # as the loop learns them
                early.learned(given[:upto])
        from toktok.insight.runfile import _Prefixes

        store = RunStore.open(insight_run / "run.duckdb")
        used[name] = len(early.lengths(_Prefixes(store)._tables))
        store.close()
        tables[name] = _curve_recorded(insight_run, tmp_path / name, parity, early)
    assert used == {"itself": 0, "ahead": 8, "wrong": 0}  # (the points but the last: 0, 38, ..., 266)
    assert tables["ahead"] == tables["itself"] == tables["wrong"] and tables["itself"][1]


def test_the_word_gains_found_beside_the_curve_are_the_word_gains(insight_run, insight_data, tmp_path):
    # record has the word gains found on a second connection in a thread while it draws the
    # curve (a small run's references: in line): the same rows either way, and word_gains' own
    import pyarrow as pa

    from toktok.insight.stage import record
    from toktok.resume import Checkpoints, Journal
    from toktok.store import RunStore

    held = pl.read_parquet(insight_data["heldout"]).head(40)
    parity = pa.table({"text": held["text"].to_list(), "source": held["source"].to_list()})
    got = {}
    for small in (False, True):
        run = tmp_path / str(small) / "run.duckdb"
        run.parent.mkdir()
        shutil.copy(insight_run / "run.duckdb", run)
        store = RunStore.open(run, read_only=False)
        record(Journal(store, Checkpoints()), parity, {"main": parity}, {"main": None}, small=small)
        store.close()
        got[small] = [_rows(_con(run.parent), f"select * from {t} order by all")
                      for t in ("word_gains", "compression", "token_usage")]
    assert got[False] == got[True] and all(got[False])
    assert got[False][0] == sorted(word_gains(insight_run, write=False).rows())


def test_word_gains(insight_run):
    con = _con(insight_run)
    rows = _rows(con, "select word, count, tokens_before, tokens_after from word_gains")
    assert len(rows) == _rows(con, "select count(*) from words")[0][0]  # fewer than the default top
    assert all(after <= before for _, _, before, after in rows)
    best = _rows(con, (ROOT / "sql" / "phase_gains.sql").read_text())
    assert best[0][1] == " the"  # the word that saved the most tokens in an English-heavy corpus
    small = word_gains(insight_run, top=10, write=False)
    assert small.height == 10 and small["count"].is_sorted(descending=True)


def test_word_gains_leave_out_a_word_that_is_not_utf8_on_its_own(insight_run, tmp_path):
    # the top words are checked for UTF-8 all at once, and word by word only when one is not
    run = tmp_path / "run"
    shutil.copytree(insight_run, run)
    con = duckdb.connect(str(run / "run.duckdb"))
    table = con.execute("select name from word_tables limit 1").fetchone()[0]  # (the phase's words)
    con.execute(f"insert into {table} values ($w, 1000000000)", {"w": b"\xe4\xb8"})  # half of a character
    con.close()
    got = word_gains(run, top=20, write=False)
    assert b"\xe4\xb8" not in got["word"].to_list() and got.height == 19
    assert got.equals(word_gains(insight_run, top=19, write=False))


def test_phases_in_a_multi_phase_run(phase_pair, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(phase_pair["multi"], run)
    add_views(run)
    word_gains(run, top=500)
    con = _con(run)
    phases = _rows(con, "select phase, merges, first_merge, last_merge from phases order by first_merge")
    if len(phases) == 2:  # multi-phase training available
        assert phases == [("general", 150, 0, 149), ("multi", 150, 150, 299)]
        assert dict(_rows(con, "select part, count(*) from vocab_text where kind = 'merge' group by part")) == {
            "general": 150, "multi": 150}
        gains = _rows(con, "select phase, count(*) from word_gains group by phase order by phase")
        assert gains == [("general", 500), ("multi", 500)]
    assert _rows(con, (ROOT / "sql" / "top_merges.sql").read_text())


def test_a_later_phases_word_gains_taken_up_from_its_start_equal_segmenting_again(phase_pair, monkeypatch):
    # a phase after merges: its words' ids after it are taken up from their ids before it
    # (merge.further), not segmented again from their bytes: the same rows
    from toktok.insight.runfile import _Prefixes

    got = word_gains(phase_pair["multi"], top=500, write=False)
    assert got.filter(got["phase"] == "multi").height == 500
    assert (got["tokens_after"] < got["tokens_before"]).any()
    monkeypatch.setattr(_Prefixes, "further", lambda self, k, pieces, before: self.segment(k, pieces))
    assert got.equals(word_gains(phase_pair["multi"], top=500, write=False))


def test_views_are_added_on_the_fly_for_older_runs(insight_run, tmp_path):
    """A run file without the views (made before them) is still queryable; the file is not changed."""
    run = tmp_path / "old"
    shutil.copytree(insight_run, run)
    con = duckdb.connect(str(run / "run.duckdb"))
    for v in VIEWS:
        con.execute(f"drop view {v}")
    for t in TABLES:
        con.execute(f"drop table {t}")
    con.close()
    t = query(run, "select count(*) as n from merges_text")
    assert t.to_pylist() == [{"n": 300}]
    assert describe(run)["sample"] is None
    con = _con(run)
    assert not {v for (v,) in _rows(con, "select table_name from information_schema.tables")} & set(VIEWS + TABLES)
    # add_views persists them; twice is fine
    con.close()
    add_views(run)
    add_views(run)
    assert _rows(_con(run), "select count(*) from merges_text")[0][0] == 300


def test_query_resolution(insight_run, tmp_path):
    assert query(insight_run, "merges").num_rows == 300  # a table name
    assert query(insight_run, "top_merges").num_rows == 15  # a ready query by name
    f = tmp_path / "q.sql"
    f.write_text("-- a comment\nselect 1 as one;\n")
    assert query(insight_run, str(f)).to_pylist() == [{"one": 1}]
    with pytest.raises(QueryError, match=r"q2\.sql: .*nope"):
        bad = tmp_path / "q2.sql"
        bad.write_text("select * from nope")
        query(insight_run, str(bad))
    with pytest.raises(QueryError, match="missing.sql: no such query file"):
        query(insight_run, "missing.sql")
    with pytest.raises(ToktokError, match="no run file"):
        query(tmp_path / "nowhere", "merges")


# --- the CLI: toktok sql, toktok show ------------------------------------------------------------


def test_sql_command(insight_run, tmp_path):
    r = runner.invoke(app, ["sql", str(insight_run), "select merge_index, shown from merges_text order by 1 limit 3"])
    assert r.exit_code == 0, r.output
    assert "merge_index" in r.output and "3 rows" in r.output
    r = runner.invoke(app, ["sql", str(insight_run / "run.duckdb"), "longest_tokens", "--limit", "5"])
    assert r.exit_code == 0 and "30 rows (5 shown" in r.output
    r = runner.invoke(app, ["sql", str(insight_run), "runs"])  # one wide row: shown as column / value
    assert r.exit_code == 0 and "merges_learned" in r.output and "parity_ok" in r.output
    r = runner.invoke(app, ["sql", str(insight_run), "select rank, shown, count from merges_text order by rank", "--csv"])
    assert r.exit_code == 0
    rows = list(csv.reader(io.StringIO(r.output)))
    assert rows[0] == ["rank", "shown", "count"] and len(rows) == 301
    assert rows[1] == ["1417", query(insight_run, "select shown from merges_text where rank = 1417").to_pylist()[0]["shown"],
                       str(query(insight_run, "select count from merges where token_id = 1417").to_pylist()[0]["count"])]
    out = tmp_path / "t.parquet"
    r = runner.invoke(app, ["sql", str(insight_run), "tokens_by_script", "--parquet", str(out)])
    assert r.exit_code == 0, r.output
    assert pq.read_table(out).num_rows == query(insight_run, "tokens_by_script").num_rows


def test_sql_command_errors(insight_run, tmp_path):
    bad = tmp_path / "broken.sql"
    bad.write_text("select nope from merges")
    one_error_line(runner.invoke(app, ["sql", str(insight_run), str(bad)]), "broken.sql:", "nope")
    one_error_line(runner.invoke(app, ["sql", str(insight_run), "selec 1"]), "query:", "syntax error")
    one_error_line(runner.invoke(app, ["sql", str(insight_run), "delete from merges"]), "query:")
    one_error_line(runner.invoke(app, ["sql", str(tmp_path / "none"), "merges"]), "none", "no run file")
    garbage = tmp_path / "g" / "run.duckdb"
    garbage.parent.mkdir()
    garbage.write_bytes(b"not a database")
    one_error_line(runner.invoke(app, ["sql", str(garbage), "merges"]), "run.duckdb")
    other = tmp_path / "other.duckdb"  # a DuckDB file, but not a run's
    duckdb.connect(str(other)).close()
    one_error_line(runner.invoke(app, ["sql", str(other), "select 1"]), "other.duckdb", "not a toktok run file")


def test_show_command(insight_run, tmp_path):
    r = runner.invoke(app, ["show", str(insight_run)])
    assert r.exit_code == 0, r.output
    for needle in ("config", "merges 300", "inputs", "train.parquet", "sample", "held out (text the run did not train on): 265 docs", "by lang",
                   "phases", "main: 300 merges", "vocab", "1,161 hardcoded", "parity", "ok: tiktoken == HF",
                   "time", "merge"):
        assert needle in r.output, needle
    assert len(r.output.splitlines()) <= 30  # one screen
    r = runner.invoke(app, ["show", str(insight_run), "--json"])
    d = json.loads(r.output)
    assert d["vocab"] == {"byte": 256, "hardcoded": 1161, "merge": 300, "special": 1}
    assert d["parity"]["ok"] is True and d["sample"]["docs"] == 265 and d["phases"][0]["merges"] == 300
    one_error_line(runner.invoke(app, ["show", str(tmp_path)]), "no run file")


def _files(folder: Path) -> dict[str, tuple[bytes, int]]:
    return {str(p.relative_to(folder)): (p.read_bytes(), p.stat().st_mtime_ns) for p in sorted(folder.rglob("*")) if p.is_file()}


def test_sql_is_read_only_for_the_file_system(insight_run, tmp_path):
    """`toktok sql` could COPY over the run's own files: now no query reads or writes any file but
    the run file, and the lock cannot be lifted from inside the query."""
    run = tmp_path / "run"
    shutil.copytree(insight_run, run)
    before = _files(run)
    secret = tmp_path / "secret.csv"
    secret.write_text("a,b\n1,2\n")
    attempts = [
        f"COPY (SELECT 1 AS x) TO '{run}/tokenizer.json'",
        f"COPY merges TO '{run}/run.duckdb' (FORMAT parquet)",
        f"COPY (SELECT 1) TO '{tmp_path}/new.csv'",
        f"EXPORT DATABASE '{tmp_path}/dump'",
        f"ATTACH '{tmp_path}/other.duckdb' AS o",
        f"SELECT * FROM read_csv('{secret}')",
        f"SELECT * FROM read_text('{secret}')",
        f"SELECT * FROM glob('{tmp_path}/*')",
        "SET enable_external_access = true",
        "RESET lock_configuration",
        "SET lock_configuration = false",
        "INSTALL httpfs",
        "DETACH run",
        "DROP TABLE merges",
        "INSERT INTO meta VALUES ('k', 'v')",
    ]
    for q in attempts:
        r = runner.invoke(app, ["sql", str(run), q])
        one_error_line(r, "query:")
        if ("COPY" in q or "read_" in q or "glob" in q or "ATTACH" in q or "EXPORT" in q) and "run.duckdb" not in q:
            assert "toktok sql only reads the run file" in r.output and "--parquet FILE" in r.output, r.output
        with pytest.raises(QueryError):
            query(run, q)
    assert _files(run) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run", "secret.csv"]
    # reading the run still works, temp views included, and --parquet (written by toktok) too
    r = runner.invoke(app, ["sql", str(run), "select count(*) as n from merges_text"])
    assert r.exit_code == 0 and "300" in r.output
    out = tmp_path / "m.parquet"
    r = runner.invoke(app, ["sql", str(run), "select * from merges", "--parquet", str(out)])
    assert r.exit_code == 0 and pq.read_table(out).num_rows == 300
    # ... but not over a file of the run
    for target in (run / "tokenizer.json", run / "run.duckdb"):
        one_error_line(runner.invoke(app, ["sql", str(run), "merges", "--parquet", str(target)]),
                        f"--parquet {target}", "pass a path outside the run's folder")
    assert _files(run) == before


def test_sql_sandbox_leaves_other_connections_alone(insight_run, tmp_path):
    """The lock lives in a private DuckDB: a connection of the caller's to the same file (DuckDB
    shares one instance per file in a process) keeps its file access."""
    csv_file = tmp_path / "x.csv"
    csv_file.write_text("a\n1\n2\n")
    mine = _con(insight_run)
    try:
        assert query(insight_run, "select count(*) as n from words").to_pylist()[0]["n"] > 0
        assert mine.execute(f"select count(*) from read_csv('{csv_file}')").fetchone()[0] == 2
        assert query(insight_run, "select count(*) as n from vocab").to_pylist()[0]["n"] == 256 + 1161 + 300 + 1
        # an open connection given to query() is used as it is (the pipeline's own)
        assert query(mine, f"select count(*) as n from read_csv('{csv_file}')").to_pylist()[0]["n"] == 2
    finally:
        mine.close()


def test_the_top_words_found_in_memory_are_the_top_words_query(tmp_path):
    """``runfile.top_rows`` (the word gains' most frequent words, found beside the merge loop)
    returns the rows of ``top_words.sql``: most frequent first, ties by their bytes (unsigned, a
    prefix first), for a top smaller than, equal to and larger than the table."""
    import random

    import numpy as np
    import pyarrow as pa

    from toktok.insight.runfile import top_rows
    from toktok.store import RunStore

    rng = random.Random(7)
    words = list({bytes(rng.choice([0x61, 0x62, 0xC3, 0xA9, 0xFF, 0x20]) for _ in range(rng.randint(1, 4)))
                  for _ in range(3000)} | {b"a", b"ab", b"\xff", b"\xff\x00"})
    counts = np.array([rng.choice([1, 2, 3, 5, 8, 1000]) for _ in words], np.int64)
    store = RunStore.create(tmp_path / "run.duckdb", memory_limit=256 << 20)
    store.put_words("main", pa.table({"word": pa.array(words, pa.binary()), "count": pa.array(counts)}))
    for n in (1, 7, 100, len(words) - 1, len(words), len(words) + 5):
        sql = store.arrow("top_words", {"phase": "main", "n": n})
        got = top_rows(pa.array(words, pa.binary()), counts, n)
        assert got["word"].to_pylist() == sql["word"].to_pylist() and got["count"].to_pylist() == sql["count"].to_pylist()
    store.close()


def _known_of(run: Path):
    """What the pipeline hands the insight step from memory, read back from a finished run file."""
    from toktok.insight.stage import known

    con = _con(run)
    vocab = con.sql("select id, token, kind, phase from vocab order by id").to_arrow_table()
    phases = _rows(con, "select phase, count(*), sum(reused::int) from merges group by phase order by min(merge_index)")
    words = {p: con.sql("select word, count from words where phase = $p", params={"p": p}).to_arrow_table()
             for p, _, _ in phases}
    con.close()
    return known(vocab, phases), phases, words


def test_the_insight_step_runs_beside_the_last_checkpoint(phase_pair, insight_data, tmp_path):
    """With the vocabulary and the merges known in memory (``insight.stage.known``) and the last
    phase's most frequent words found ahead, ``record`` does not wait for the checkpoint being
    stored (the last "merged" one) and records what it records after it; without those words
    it waits. A merge that reused a token: nothing is known."""
    import threading

    import pyarrow as pa

    from toktok.insight.stage import ahead, known, record
    from toktok.patterns import DEFAULT
    from toktok.resume import Checkpoints, Journal
    from toktok.store import RunStore

    assert known(pa.table({"id": [0]}), [("a", 5, 0), ("b", 3, 1)]) is None
    assert known(None, [("a", 5, 0)]) is None
    held = pl.read_parquet(insight_data["heldout"]).head(40)
    parity = pa.table({"text": held["text"].to_list(), "source": held["source"].to_list()})
    src = phase_pair["multi"]
    got = {}
    for how in ("after", "beside", "waits"):
        run = tmp_path / how / "run.duckdb"
        run.parent.mkdir()
        shutil.copy(src / "run.duckdb", run)
        mem, phases, words = _known_of(run.parent)
        assert mem is not None and [p for p, _ in mem.phases] == [p for p, _, _ in phases]
        last = phases[-1][0]
        store = RunStore.open(run, read_only=False)
        journal = Journal(store, Checkpoints())
        stored = threading.Event()
        if how != "after":  # a checkpoint being stored until the test lets it
            journal.checkpoint(lambda st: stored.wait(300))
        early = ahead(parity, {"main": parity}, {"main": None}, [DEFAULT],
                      words=(last, words[last]["word"].combine_chunks(), words[last]["count"].to_numpy())
                      if how != "waits" else None)
        step = threading.Thread(target=record, args=(journal, parity, {"main": parity}, {"main": None}),
                                kwargs={"ahead": early, "known": mem if how != "after" else None})
        step.start()
        step.join(0.5 if how == "waits" else 30)
        assert step.is_alive() == (how == "waits")  # beside the checkpoint: done before it is stored
        stored.set()
        step.join(60)
        journal.settle()
        store.close()
        got[how] = [_rows(_con(run.parent), f"select * from {t} order by all")
                    for t in ("word_gains", "compression", "token_usage")]
    assert got["beside"] == got["after"] == got["waits"] and all(got["after"])
    assert {r[0] for r in got["after"][0]} == {p for p, _, _ in phases}


def _curve_recorded(insight_run, folder, parity, early):
    """The compression curve's and token usage's rows ``record`` writes into a copy of
    ``insight_run``'s run file in ``folder``, with ``early`` (an ``Ahead`` or None)."""
    from toktok.insight.stage import record
    from toktok.resume import Checkpoints, Journal
    from toktok.store import RunStore

    run = folder / "run.duckdb"
    run.parent.mkdir()
    shutil.copy(insight_run / "run.duckdb", run)
    store = RunStore.open(run, read_only=False)
    record(Journal(store, Checkpoints()), parity, {"main": parity}, {"main": None}, ahead=early)
    store.close()
    return [_rows(_con(run.parent), f"select * from {t} order by all") for t in ("compression", "token_usage")]
