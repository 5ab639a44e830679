"""The reservoir: byte-bounded, seeded, independent of batching, mergeable across workers."""
from __future__ import annotations

import numpy as np
import polars as pl
from conftest import FIXTURES
from hypothesis import given
from hypothesis import strategies as st

from toktok.sample import Reservoir, doc_hashes

DOCS = pl.read_parquet(FIXTURES / "sample.parquet")


def _take(r: Reservoir) -> list[tuple[str, int]]:
    df = r.finish()
    return sorted(zip(df["source"].cast(pl.String).to_list(), df["row"].to_list()))


def _offer_all(r: Reservoir, step: int, sources=("a", "b")) -> Reservoir:
    for src in sources:
        texts = DOCS["text"]
        for i in range(0, texts.len(), step):
            r.offer(src, i, texts.slice(i, step))
    return r


def test_capacity_and_prefix_property():
    r = _offer_all(Reservoir(100_000, seed=1), 50)
    df = r.finish()
    assert 0 < df["bytes"].sum() <= 100_000 and r.full
    # every kept document hashes below every dropped one
    kept = set(zip(df["source"].cast(pl.String), (df["row"] // (1 << 20)).to_list()))  # no document is cut
    for src in ("a", "b"):
        h = doc_hashes(src, 0, DOCS.height, 1)
        for row in range(DOCS.height):
            assert ((src, row) in kept) == (h[row] < r.threshold)


@given(st.integers(1, 300), st.integers(1, 300))
def test_independent_of_batching(step1, step2):
    a = _take(_offer_all(Reservoir(80_000, seed=3), step1))
    b = _take(_offer_all(Reservoir(80_000, seed=3), step2))
    assert a == b


def test_merge_equals_one_process():
    one = _take(_offer_all(Reservoir(120_000, seed=7), 64, ("a", "b", "c")))
    parts = [_offer_all(Reservoir(120_000, seed=7), 64, (s,)) for s in ("a", "b", "c")]
    parts[0].merge(parts[1])
    parts[0].merge(parts[2])
    assert _take(parts[0]) == one


def test_seed_changes_the_sample_and_small_corpus_is_kept_whole():
    assert _take(_offer_all(Reservoir(80_000, seed=1), 64)) != _take(_offer_all(Reservoir(80_000, seed=2), 64))
    r = _offer_all(Reservoir(10**9, seed=0), 64)
    assert not r.full and len(_take(r)) == 2 * DOCS.height


def test_source_shares_follow_the_corpus():
    # 3 sources of very different sizes, many small documents: shares within 1 point
    rng = np.random.default_rng(0)
    sizes = {"big": 30000, "mid": 9000, "small": 3000}
    r = Reservoir(2_000_000, seed=5)
    total = {}
    for src, n in sizes.items():
        lens = rng.integers(20, 400, n)
        texts = pl.Series(["x" * int(k) for k in lens])
        total[src] = int(lens.sum())
        for i in range(0, n, 1000):
            r.offer(src, i, texts.slice(i, 1000))
    r.finish()
    corpus = sum(total.values())
    kept = sum(s.bytes_kept for s in r.stats.values())
    for src in sizes:
        assert abs(r.stats[src].bytes_kept / kept - total[src] / corpus) < 0.01
        assert r.stats[src].bytes_seen == total[src]


def test_long_documents_are_sampled_in_safe_pieces():
    doc = "".join(f"line {i} of a long document\n" for i in range(4000))  # ~110 KB
    r = Reservoir(40_000, seed=1, unit=4096)
    r.offer("long.txt", 0, pl.Series([doc]))
    df = r.finish()
    assert 1 < df.height and df["bytes"].sum() <= 40_000
    # every piece starts where the pre-tokenizer cuts the whole document
    from toktok.pretokenize import split_words

    bounds, at = set(), 0
    for w in split_words(doc):
        bounds.add(at)
        at += len(w)
    for piece in df["text"].to_list():
        start = doc.find(piece)
        assert start in bounds and split_words(piece) == split_words(doc[start:start + len(piece)])


def test_batches_cover_the_sample():
    r = _offer_all(Reservoir(200_000, seed=0), 100)
    n = r.finish().height
    got = list(r.batches(batch_bytes=20_000))
    assert sum(s.len() for s in got) == n and len(got) > 3
