"""The run file's store: what the pipeline relies on beyond what the other tests exercise."""
from __future__ import annotations

import polars as pl

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
    session and after reopening (as --resume does): merge_index order, words sorted, every time.
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
            assert w == sorted(words)

    check(store)
    store.close()
    store = RunStore.create(path, memory_limit=256 * 10**6, threads=2)  # how --resume opens it
    check(store)
    store.close()
    check(RunStore.open(path))
