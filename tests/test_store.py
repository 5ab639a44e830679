"""The run file's store: what the pipeline relies on beyond what the other tests exercise."""
from __future__ import annotations

import duckdb
import polars as pl
import pytest

from toktok.rundir import RUN_FILE
from toktok.store import RunStore


def test_release_memory_keeps_the_data_and_the_limit(tmp_path):
    store = RunStore.create(tmp_path / RUN_FILE, memory_limit=300 * 10**6, threads=1)
    n = 200_000
    words = pl.DataFrame({"word": [f"w{i:07d}".encode() for i in range(n)], "count": list(range(n)),
                          "tokens": pl.Series([None] * n, dtype=pl.Int32)})
    store.put_words("main", words)
    limit = store.con.execute("SELECT current_setting('memory_limit')").fetchone()[0]
    store.release_memory()
    assert store.con.execute("SELECT current_setting('memory_limit')").fetchone()[0] == limit
    back = pl.from_arrow(store.words_of("main")).sort("word")
    assert back.height == n and back["count"].sum() == n * (n - 1) // 2
    assert back["word"][n - 1] == b"w0199999"
    store.close()


def _merges(lo: int, hi: int):
    import numpy as np
    import pyarrow as pa

    k = hi - lo
    return pa.table({
        "merge_index": pa.array(np.arange(lo, hi, dtype=np.int32)),
        "left_id": pa.array(np.arange(lo, hi, dtype=np.int32) % 997), "right_id": pa.array(np.full(k, 7, np.int32)),
        "token_id": pa.array(np.arange(lo, hi, dtype=np.int32) + 256),
        "token": pa.array([b"t%06d" % i for i in range(lo, hi)], pa.binary()),
        "count": pa.array(np.arange(hi, lo, -1, dtype=np.int64)), "reused": pa.array(np.zeros(k, bool)),
    })


def test_merges_and_words_come_back_in_order_with_threads(tmp_path):
    """Many rows written in checkpoint-sized pieces and read back with 2 threads, in the same
    session and after reopening (as --resume does): merge_index order, words in the order stored
    (which set_tokens relies on), every time.
    (With preserve_insertion_order off, DuckDB returned blocks of ~2,048 rows in any order.)"""
    import numpy as np

    path = tmp_path / RUN_FILE
    n = 60_000
    store = RunStore.create(path, memory_limit=256 * 10**6, threads=2)
    cuts = [0, 1, 500, 2047, 2049, 9000, 30_000, n]
    for lo, hi in zip(cuts, cuts[1:]):
        store.add_merges("main", _merges(lo, hi))
    store.add_merges("other", _merges(n, n + 5000))  # another phase's rows in between
    rng = np.random.default_rng(5)
    words = [b"w%07d" % i for i in rng.permutation(n)]
    store.put_words("main", pl.DataFrame({"word": words, "count": list(range(n)),
                                          "tokens": pl.Series([None] * n, dtype=pl.Int32)}))

    def check(s: RunStore) -> None:
        for _ in range(5):
            m = s.merges_of("main")
            assert m["merge_index"].to_pylist() == list(range(n))
            assert m["token"].to_pylist() == [b"t%06d" % i for i in range(n)]
            assert s.merges_of("other")["merge_index"].to_pylist() == list(range(n, n + 5000))
            w = s.words_of("main")["word"].to_pylist()
            assert w == words

    check(store)
    store.close()
    store = RunStore.create(path, memory_limit=256 * 10**6, threads=2)  # how --resume opens it
    check(store)
    store.close()
    check(RunStore.open(path))


def _row_ids(store: RunStore, phase: str) -> list:
    """The row ids of a phase's words in its table (a delete and insert gives them new ones)."""
    name = store.words_table(phase)
    return [r for (r,) in store.con.execute(f"SELECT rowid FROM {name} ORDER BY rowid").fetchall()]


def _tokens_by_word(store: RunStore, phase: str) -> dict:
    return dict(store.con.execute("SELECT word, tokens FROM words WHERE phase = $p", {"p": phase}).fetchall())


def test_set_tokens_leaves_the_stored_words_in_place(tmp_path):
    """The merged checkpoint's tokens land on the right words, with another phase's words stored
    before and after, under a budget's smallest DuckDB limit; the words stay where they were
    stored (their tokens are a table of their own), and setting them again replaces them."""
    import numpy as np
    import pyarrow as pa

    store = RunStore.create(tmp_path / RUN_FILE, memory_limit=32 << 20, threads=2)
    rng = np.random.default_rng(3)
    n = 2_500
    mine = [b"m%06d" % i for i in rng.permutation(n)]  # stored unsorted: order is what counts
    store.put_words("a", pl.DataFrame({"word": [b"a1", b"a2"], "count": [1, 2]}))
    store.put_words("main", pl.DataFrame({"word": mine, "count": list(range(n))}))
    store.put_words("z", pl.DataFrame({"word": [b"z1"], "count": [5]}))
    store.con.execute("CHECKPOINT")
    rows = _row_ids(store, "main")
    back = store.words_of("main")
    assert back["word"].to_pylist() == mine
    tokens = [len(w) + i % 7 for i, w in enumerate(mine)]
    store.set_tokens("main", back["word"], back["count"].to_numpy(), tokens)
    store.con.execute("CHECKPOINT")
    assert _tokens_by_word(store, "main") == dict(zip(mine, tokens))
    assert _tokens_by_word(store, "a") == {b"a1": None, b"a2": None}
    assert _tokens_by_word(store, "z") == {b"z1": None}
    z_rows = _row_ids(store, "z")
    store.set_tokens("z", pa.array([b"z1"]), np.array([5]), [9])  # one word: its first is its last
    assert _tokens_by_word(store, "z") == {b"z1": 9} and _row_ids(store, "z") == z_rows
    assert store.words_of("main")["word"].to_pylist() == mine
    assert _row_ids(store, "main") == rows  # updated in place, not deleted and inserted again
    store.set_tokens("main", back["word"], back["count"].to_numpy(), [1] * n)
    assert set(_tokens_by_word(store, "main").values()) == {1} and _row_ids(store, "main") == rows
    assert store.con.execute(f"SELECT count(*) FROM {store.words_table('main')}_tokens").fetchall() == [(n,)]
    store.close()


def test_each_phase_keeps_its_words_in_a_table_of_its_own(tmp_path):
    """A phase's words are a table of their own (no phase on each row: a third of the write),
    and the view ``words`` shows every phase's with its phase; a phase dropped (``--resume`` of
    an interrupted one) takes its table with it, and its name is given again."""
    import pyarrow as pa

    store = RunStore.create(tmp_path / RUN_FILE, memory_limit=64 << 20, threads=1)
    assert store.con.execute("SELECT * FROM words").fetchall() == []
    store.put_words("sub", pl.DataFrame({"word": [b"a", b"b"], "count": [2, 1]}))
    store.put_words("it's super", pl.DataFrame({"word": [b"a b"], "count": [7]}))
    store.put_words("sub", pl.DataFrame({"word": [b"c"], "count": [3]}))  # after the phase's own
    assert store.words_table("sub") == "words_0" and store.words_table("it's super") == "words_1"
    assert store.words_table("none") is None and store.words_of("none").num_rows == 0
    columns = [c[0] for c in store.con.execute("DESCRIBE words").fetchall()]
    assert columns == ["word", "count", "phase", "tokens"]
    assert "phase" not in [c[0] for c in store.con.execute("DESCRIBE words_0").fetchall()]
    rows = store.con.execute("SELECT phase, word, count, tokens FROM words ORDER BY count").fetchall()
    assert rows == [("sub", b"b", 1, None), ("sub", b"a", 2, None), ("sub", b"c", 3, None),
                    ("it's super", b"a b", 7, None)]
    assert store.words_of("sub")["word"].to_pylist() == [b"a", b"b", b"c"]
    store.drop_phase("sub")
    assert store.words_table("sub") is None and "words_0" not in store.table_names()
    assert store.con.execute("SELECT phase, count(*) FROM words GROUP BY phase").fetchall() == [("it's super", 1)]
    store.put_words("sub", pl.DataFrame({"word": [b"d"], "count": [4]}))
    assert store.words_table("sub") == "words_0"
    # tokens row for row: words stored with tokens after words without give those nulls, and back
    store.put_words("sub", pa.table({"word": [b"e"], "count": [5], "tokens": pa.array([2], pa.int32())}))
    store.put_words("sub", pl.DataFrame({"word": [b"f"], "count": [6]}))
    assert store.con.execute("SELECT word, tokens FROM words WHERE phase = 'sub' ORDER BY count").fetchall() == [
        (b"d", None), (b"e", 2), (b"f", None)]
    store.drop_words("it's super")
    store.drop_words("sub")
    assert store.con.execute("SELECT count(*) FROM words").fetchall() == [(0,)]
    store.close()


def test_a_run_file_of_the_schema_before_is_read_but_not_resumed(tmp_path):
    """A run file whose words are one table with a phase on each row (schema "1") still opens
    for reading, the words as they were; resuming it is refused, marked to start over."""
    from toktok.errors import OutputError

    path = tmp_path / RUN_FILE
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE meta (key VARCHAR PRIMARY KEY, value VARCHAR)")
    con.execute("INSERT INTO meta VALUES ('schema_version', '1')")
    con.execute("CREATE TABLE words (word BLOB, count BIGINT, phase VARCHAR, tokens INTEGER)")
    con.execute("INSERT INTO words VALUES ('a'::BLOB, 3, 'main', 1)")
    con.close()
    store = RunStore.open(path)
    assert store.con.execute("SELECT word, count, phase FROM words").fetchall() == [(b"a", 3, "main")]
    store.con.close()
    sandbox = RunStore.sandbox(path)
    assert sandbox.con.execute("SELECT count(*) FROM words").fetchall() == [(1,)]
    sandbox.con.close()
    with pytest.raises(OutputError, match="another toktok .*schema version '1'") as e:
        RunStore.create(path, memory_limit=64 << 20)
    assert e.value.start_over


def test_set_tokens_rewrites_words_given_in_another_order(tmp_path):
    """Words that are not the stored rows in their order are stored again, each with its tokens."""
    import pyarrow as pa

    store = RunStore.create(tmp_path / RUN_FILE, memory_limit=64 << 20, threads=1)
    store.put_words("main", pl.DataFrame({"word": [b"b", b"a", b"c"], "count": [2, 1, 3]}))
    store.set_tokens("main", pa.array([b"a", b"b", b"c"]), [1, 2, 3], [10, 20, 30])
    assert _tokens_by_word(store, "main") == {b"a": 10, b"b": 20, b"c": 30}
    assert dict(store.con.execute("SELECT word, count FROM words").fetchall()) == {b"a": 1, b"b": 2, b"c": 3}
    store.set_tokens("main", pa.array([b"a", b"c"]), [1, 3], [11, 31])  # fewer words: rewritten too
    assert _tokens_by_word(store, "main") == {b"a": 11, b"c": 31}
    store.close()


def test_put_metas_replaces_keys_and_joins_the_open_transaction(tmp_path):
    """Meta keys set again get the new value; on their own they are committed at once (another
    connection sees them), inside a transaction they are part of it (a failure takes them back)."""
    import pytest

    store = RunStore.create(tmp_path / RUN_FILE, memory_limit=64 << 20, threads=1)
    store.put_metas({"a": "1", "b": {"x": [1, 2]}})
    store.put_metas({"a": "2", "c": "3"})
    other = store.cursor()
    assert {k: other.get_meta(k) for k in "abc"} == {"a": "2", "b": '{"x": [1, 2]}', "c": "3"}
    with pytest.raises(RuntimeError), store.transaction():
        store.put_metas({"a": "4", "d": "5"})
        store.put_meta("e", "6")
        raise RuntimeError("after the metas, inside the transaction")
    assert {k: store.get_meta(k) for k in "ade"} == {"a": "2", "d": None, "e": None}
    with store.transaction():
        store.put_metas({"a": "7"})
    assert other.get_meta("a") == "7"
    other.con.close()
    store.close()


def test_a_stored_sample_is_handed_to_a_later_phase_once_then_read_from_its_file(tmp_path):
    """The frame a phase stored goes to the phase that takes it as it is (no read), once; after
    that, or once a phase let go of the samples held, the file is read: the same rows, written
    in counting order (source, then row)."""
    frame = pl.DataFrame({"hash": pl.Series([3, 1, 2], dtype=pl.UInt64), "source": ["b", "a", "a"],
                          "row": [0, 1, 0], "bytes": [30, 20, 20],
                          "text": ["z" * 30, "y" * 20, "x" * 20]})
    store = RunStore.create(tmp_path / RUN_FILE, memory_limit=64 << 20, threads=1)
    store.cursor().put_count_state("p1", 1, {"state": {}}, sample=frame)  # (as saved behind, on a cursor)
    store.keep_sample("p1", "K", {"phase": "p1", "key": ["K"], "used": {}})
    meta, got = store.get_shared_sample("K")
    assert got is frame and meta["phase"] == "p1"
    meta, again = store.get_shared_sample("K")
    assert again is not frame and again.to_dicts() == frame.sort("source", "row").to_dicts()
    store.put_count_state("p1", 1, {"state": {}}, sample=frame)
    store.let_go_samples()
    assert store.get_shared_sample("K")[1] is not frame
    store.drop_shared_sample("K")
    assert store.get_shared_sample("K") is None
    store.close()


def test_a_counting_checkpoint_goes_whichever_connection_stored_it_and_on_resume(tmp_path):
    """``drop_count_state`` deletes a phase's counting checkpoint (its counts, parity rows and
    meta) stored on any connection to the file, and in a file an earlier run left (``--resume``);
    a fresh file's phase that stored none keeps the rows other checkpoints wrote (nothing to drop)."""
    import pyarrow as pa

    parts = pa.table({"word": pa.array([b"a", b"b"], pa.binary()), "count": pa.array([2, 1], pa.int64())})
    parity = pa.table({"hash": pa.array([1], pa.uint64()), "source": ["s"], "row": pa.array([0], pa.int64()),
                       "text": ["t"]})

    def left(st, phase):
        rows = [st.con.execute(f"SELECT count(*) FROM {t} WHERE phase = $p", {"p": phase}).fetchone()[0]
                for t in ("count_parts", "parity")]
        return rows, st.get_meta(f"count_state:{phase}") is not None

    store = RunStore.create(tmp_path / RUN_FILE, memory_limit=64 << 20, threads=1)
    store.cursor().put_count_state("p1", 1, {"state": {}}, words=parts, parity=parity)  # (saved behind)
    store.put_count_state("p2", 1, {"state": {}}, words=parts, parity=parity)
    store.put_parity("p3", parity)  # (a "counted" checkpoint's own parity rows)
    assert left(store, "p1") == left(store, "p2") == ([2, 1], True)
    cur = store.cursor()
    cur.drop_count_state("p1")
    cur.con.close()
    store.drop_count_state("p3")
    assert left(store, "p1") == ([0, 0], False) and left(store, "p3") == ([0, 1], False)
    store.close()
    resumed = RunStore.create(tmp_path / RUN_FILE, memory_limit=64 << 20, threads=1)
    assert left(resumed, "p2") == ([2, 1], True)
    resumed.drop_count_state("p2")
    assert left(resumed, "p2") == ([0, 0], False)
    resumed.close()


def test_a_roomier_limit_lets_the_top_words_of_long_words_through_then_goes_back(tmp_path):
    # a SuperBPE phase's words are long: under a budget's DuckDB share alone their top words ran
    # out of memory in the insight step; the step now runs with the merge loops' share too
    import numpy as np
    import pyarrow as pa
    import pytest

    from toktok.budget import plan_budget
    from toktok.errors import ResourceError

    rng = np.random.default_rng(0)
    words = [bytes(rng.integers(97, 123, 16384, dtype=np.uint8)) for _ in range(2500)]
    store = RunStore.create(tmp_path / RUN_FILE, memory_limit=16 << 20)
    with store.roomier(256 << 20):
        store.put_words("superwords", pa.table({"word": pa.array(words, pa.large_binary()),
                                                "count": pa.array(np.ones(len(words), np.int64))}))
    with pytest.raises(ResourceError, match="under its limit of 16MiB"):
        store.arrow("top_words", {"phase": "superwords", "n": 50_000})
    with store.roomier(256 << 20):
        top = store.arrow("top_words", {"phase": "superwords", "n": 50_000})
    assert top.num_rows == len(words) and top["word"][0].as_py() == min(words)
    assert store.con.execute("SELECT current_setting('memory_limit')").fetchone()[0] == "16.0 MiB"
    assert store.memory_limit == 16 << 20
    plan = plan_budget(1 << 30, baseline=320 << 20)
    assert plan.after_loops() == plan.duckdb_bytes + plan.work_bytes // 2 > 4 * plan.duckdb_bytes
    store.con.execute("SET memory_limit = '256MiB'")  # (closing writes the words into the file)
    store.close()


def test_a_merged_checkpoint_that_stores_the_due_counted_one_records_only_merged(tmp_path):
    """``save_merged`` with the phase's "counted" checkpoint due (``save_counted``): one
    transaction that stores the words with their tokens, the parity rows, the held-out pieces,
    the merges and the checkpoint "merged" (the "counted" state is never recorded on its own)."""
    import numpy as np
    import pyarrow as pa

    from toktok import resume
    from toktok.store import merges_table

    words = pa.table({"word": pa.array([b"ab", b"c"], pa.binary()), "count": pa.array([3, 1], pa.int64())})
    parity = pa.table({"hash": pa.array([1], pa.uint64()), "source": ["s"], "row": pa.array([0], pa.int64()),
                       "text": ["t"]})
    store = RunStore.create(tmp_path / RUN_FILE, memory_limit=64 << 20, threads=1)

    def due(st, **kw):
        resume.save_counted(st, "p", words, parity, parity, [], {}, {"fingerprint": [], "seconds_count": 0.1}, **kw)

    merges = merges_table(0, np.array([97]), np.array([98]), np.array([256]), [b"ab"], np.array([3]), np.array([False]))
    resume.save_merged(store, "p", words["word"], words["count"].to_numpy(), [1, 1],
                       {"fingerprint": [], "summary": {}}, due=due, merges=merges)
    assert store.get_checkpoint("p") == {"stage": "merged", "fingerprint": [], "summary": {}}
    assert store.con.execute("SELECT word, count, tokens FROM words").fetchall() == [
        (b"ab", 3, 1), (b"c", 1, 1)]
    assert resume.held_out_of(store, "p").to_pylist() == store.parity_of("p").to_pylist() != []
    assert store.merges_of("p")["token"].to_pylist() == [b"ab"]
    store.close()


def test_a_due_counted_checkpoint_stored_beside_the_loop_leaves_the_merged_one_the_tokens(tmp_path):
    """``Journal.store_due_beside``: the due "counted" checkpoint is written in the background
    (still due until stored: the merge stage waits for it), once; the "merged" checkpoint after
    it writes only the words' tokens, beside the words it stored (their rows stay)."""
    import threading

    import numpy as np
    import pyarrow as pa

    from toktok import resume

    words = pa.table({"word": pa.array([b"ab", b"c", b"d"], pa.binary()), "count": pa.array([3, 1, 2], pa.int64())})
    parity = pa.table({"hash": pa.array([1], pa.uint64()), "source": ["s"], "row": pa.array([0], pa.int64()),
                       "text": ["t"]})
    journal = resume.Journal(RunStore.create(tmp_path / RUN_FILE, memory_limit=64 << 20, threads=1),
                             resume.Checkpoints())
    saved, go = [], threading.Event()

    def due(st, **kw):
        go.wait(30)  # (held until the test has looked: stored beside, not in its caller)
        saved.append(threading.current_thread().name)
        resume.save_counted(st, "p", words, parity, None, [], {}, {"fingerprint": [], "seconds_count": 0.1}, **kw)

    journal.counted(due, 0.1)  # (a short count: kept due)
    assert journal.due is due and journal.pending is None and journal.take_due() is due  # (not stored yet)
    journal.store_due_beside()
    journal.store_due_beside()  # (once)
    assert journal.busy and journal.due is due and saved == []
    go.set()
    assert journal.take_due() is None  # (waited for: stored beside, due no longer)
    assert saved == ["toktok-checkpoint"] and journal.due is None and journal.kept
    store = journal.store
    table = store.words_table("p")
    rows = store.con.execute(f"SELECT rowid FROM {table} ORDER BY rowid").fetchall()
    assert store.get_checkpoint("p")["stage"] == "counted"
    assert store.con.execute(f"SELECT count(*) FROM {table}_tokens").fetchall() == [(0,)]
    resume.save_merged(store, "p", words["word"], words["count"].to_numpy(), [1, 1, 1],
                       {"fingerprint": [], "summary": {}}, due=journal.take_due())
    assert store.get_checkpoint("p") == {"stage": "merged", "fingerprint": [], "summary": {}}
    assert store.con.execute("SELECT word, tokens FROM words").fetchall() == [(b"ab", 1), (b"c", 1), (b"d", 1)]
    assert store.con.execute(f"SELECT rowid FROM {table} ORDER BY rowid").fetchall() == rows and saved == [
        "toktok-checkpoint"]
    store.close()


def test_the_pipeline_loads_duckdbs_engine_and_its_python_layer_once_used(tmp_path):
    """Importing the pipeline and creating a run file load DuckDB's engine alone (its Python
    layer costs ~40 ms of every run's start); reading a result as Arrow loads the layer then.
    Checked in a fresh interpreter."""
    import subprocess
    import sys

    code = ("import sys\n"
            "import toktok.pipeline\n"
            "from toktok.store import RunStore\n"
            f"s = RunStore.create({str(tmp_path / 'run.duckdb')!r}, memory_limit=1 << 28)\n"
            "s.put_meta('k', 'v')\n"
            "before = 'duckdb' in sys.modules\n"
            "t = s.arrow('get_meta', {'key': 'k'})\n"
            "print(before, 'duckdb' in sys.modules, t.column(0).to_pylist())\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["False", "True", "['v']"], r.stdout
