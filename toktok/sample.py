"""Sample: a seeded, mergeable, byte-bounded sample of documents (the sample stage).

Owns which documents are trained on when the corpus is larger than the budget allows. Reads
batches of documents with their identity (source path, row); keeps those whose seeded hash of the
identity is smallest, as many as fit in ``capacity`` bytes of text ("bottom-k by bytes"). The
sample depends only on the seed and the set of documents, not on batch boundaries or order, so
samples taken by parallel workers merge (``Reservoir.merge``) into exactly the one-process sample.
A document above the current threshold is dropped before its text is copied or pre-tokenized.
Example: ``r = Reservoir(1 << 20, seed=0); r.offer("a.txt", 0, pl.Series(["hi"])); r.bytes == 2``.
"""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np
import polars as pl
import pyarrow as pa
import regex

# A safe cut: right after "\n" when non-whitespace follows, always a pre-tokenizer boundary.
_CUT = regex.compile(r"\n(?=\S)")

_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_MAX = np.uint64(0xFFFFFFFFFFFFFFFF)


def _splitmix(x: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore", invalid="ignore"):
        x = x + np.uint64(0x9E3779B97F4A7C15)
        x = (x ^ (x >> np.uint64(30))) * _M1
        x = (x ^ (x >> np.uint64(27))) * _M2
        return x ^ (x >> np.uint64(31))


def _source_salt(source: str, seed: int) -> np.uint64:
    """A 64-bit salt from the source's name and the seed (FNV-1a, stable across runs and machines)."""
    h = 0xCBF29CE484222325 ^ (seed & 0xFFFFFFFFFFFFFFFF)
    for b in source.encode():
        h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return np.uint64(h)


def doc_hashes(source: str, first_row: int, n: int, seed: int) -> np.ndarray:
    """The seeded hash of (whole) documents ``first_row .. first_row+n-1`` of ``source`` (uint64)."""
    ids = np.arange(first_row, first_row + n, dtype=np.int64) << 20
    with np.errstate(over="ignore"):
        return _splitmix(ids.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15) ^ _source_salt(source, seed))


def _compact(texts: pl.Series) -> pa.Array:
    """The texts in new, tight buffers (Polars' string views share the buffers they came from)."""
    arr = texts.to_arrow()
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    return arr.cast(pa.large_string())


def _cut(text: str, unit: int) -> list[str]:
    """``text`` in pieces of about ``unit`` characters or more, cut only at safe points."""
    out, start = [], 0
    while len(text) - start > unit:
        m = _CUT.search(text, start + unit)
        if not m:
            break
        out.append(text[start : m.end()])
        start = m.end()
    out.append(text[start:])
    return out


@dataclass
class SourceStats:
    docs_seen: int = 0
    bytes_seen: int = 0
    docs_kept: int = 0
    bytes_kept: int = 0


@dataclass
class Reservoir:
    """Documents with the smallest hashes whose texts fit in ``capacity`` bytes.

    ``offer`` takes a batch; ``merge`` folds in another reservoir with the same seed and
    capacity; ``batches()`` yields the sample; ``stats`` has bytes seen and kept per source
    (kept counts are final only after the last offer).
    """

    capacity: int
    seed: int = 0
    unit: int = 16384  # documents longer than this are sampled in pieces of about this size
    threshold: np.uint64 = _MAX  # documents hashing at or above it can never be in the sample
    bytes: int = 0
    stats: dict[str, SourceStats] = field(default_factory=dict)
    _parts: list[pl.DataFrame] = field(default_factory=list)

    @property
    def full(self) -> bool:
        """True once some document had to be left out (the sample is a strict subset)."""
        return self.threshold != _MAX

    def offer(self, source: str, first_row: int, texts: pl.Series) -> None:
        """Consider documents ``first_row ..`` of ``source``; nulls count as empty. A document
        longer than ``unit`` is offered as pieces cut where the pre-tokenizer cuts anyway, so that
        a few huge documents do not decide a source's share of the sample."""
        n = texts.len()
        st = self.stats.setdefault(source, SourceStats())
        lens = texts.str.len_bytes().fill_null(0).to_numpy().astype(np.int64)
        st.docs_seen += n
        st.bytes_seen += int(lens.sum())
        # identity of a piece: (row, piece index) packed in 64 bits
        ids = (np.arange(first_row, first_row + n, dtype=np.int64) << 20)
        long = np.flatnonzero(lens > self.unit)
        if len(long):
            short = np.flatnonzero(lens <= self.unit)
            p_text, p_id = [], []
            for i in long.tolist():
                for k, piece in enumerate(_cut(texts[i], self.unit)):
                    p_text.append(piece)
                    p_id.append(int(ids[i]) + k)
            texts = pl.concat([texts.gather(short), pl.Series(texts.name, p_text, dtype=pl.String)])
            ids = np.concatenate([ids[short], np.array(p_id, np.int64)])
            lens = texts.str.len_bytes().fill_null(0).to_numpy().astype(np.int64)
        h = _splitmix(ids.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15) ^ _source_salt(source, self.seed))
        keep = h < self.threshold
        if not keep.any():
            return
        # copy the kept texts out: a filtered string view would keep the whole batch alive
        kept = _compact(texts.filter(pl.Series(keep)))
        part = pl.DataFrame({
            "hash": h[keep], "source": pl.Series([source] * int(keep.sum()), dtype=pl.Categorical),
            "row": ids[keep], "bytes": lens[keep], "text": pl.Series("text", kept),
        })
        self._parts.append(part)
        self.bytes += int(lens[keep].sum())
        # trim only when well over, so that the sort is amortised over many batches
        if self.bytes > self.capacity + max(self.capacity // 4, 1 << 20):
            self._trim()

    def merge(self, other: "Reservoir") -> None:
        """Fold in a reservoir taken with the same seed and capacity over other documents."""
        if (other.seed, other.capacity) != (self.seed, self.capacity):
            raise ValueError("reservoirs with different seeds or capacities do not merge")
        for name, s in other.stats.items():
            mine = self.stats.setdefault(name, SourceStats())
            mine.docs_seen += s.docs_seen
            mine.bytes_seen += s.bytes_seen
        self._parts.extend(other._parts)
        self.bytes += other.bytes
        self.threshold = min(self.threshold, other.threshold)
        self._trim()

    def _trim(self) -> None:
        """Keep the longest prefix, in hash order, that fits; everything after it is out for good."""
        if not self._parts:
            return
        df = pl.concat(self._parts, how="vertical_relaxed").filter(pl.col("hash") < self.threshold)
        df = df.sort("hash", "source", "row")
        cum = df["bytes"].cum_sum()
        fits = int((cum <= self.capacity).sum())
        if fits < df.height:
            self.threshold = min(self.threshold, np.uint64(df["hash"][fits]))
            df = df.head(fits)
        # copy the texts into fresh buffers: string views would keep every dropped text alive
        df = df.with_columns(pl.Series("text", _compact(df["text"])))
        self._parts = [df]
        self.bytes = int(df["bytes"].sum())

    def finish(self) -> pl.DataFrame:
        """The sample as one frame (hash, source, row, bytes, text), in hash order; fills ``stats``."""
        self._trim()
        df = self._parts[0] if self._parts else pl.DataFrame(
            {"hash": [], "source": [], "row": [], "bytes": [], "text": []},
            schema={"hash": pl.UInt64, "source": pl.Categorical, "row": pl.Int64, "bytes": pl.Int64, "text": pl.String},
        )
        for s in self.stats.values():
            s.docs_kept = s.bytes_kept = 0
        if df.height:
            per = df.group_by(pl.col("source").cast(pl.String)).agg(pl.len(), pl.col("bytes").sum())
            for source, docs, nbytes in per.iter_rows():
                self.stats[source].docs_kept = int(docs)
                self.stats[source].bytes_kept = int(nbytes)
        return df

    def batches(self, batch_bytes: int = 32 << 20) -> Iterator[pl.Series]:
        """The sampled texts in batches of about ``batch_bytes``."""
        df = self.finish()
        start = 0
        cum = df["bytes"].cum_sum().to_numpy() if df.height else np.zeros(0, np.int64)
        while start < df.height:
            base = cum[start - 1] if start else 0
            end = int(np.searchsorted(cum, base + batch_bytes, side="right"))
            end = max(end, start + 1)
            yield df["text"].slice(start, end - start)
            start = end
