"""The run file's store: what the pipeline relies on beyond what the other tests exercise."""
from __future__ import annotations

import polars as pl

from toktok.store import RunStore


def test_release_memory_keeps_the_data_and_the_limit(tmp_path):
    store = RunStore.create(tmp_path / "run.duckdb", memory_limit="300MB", threads=1)
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
