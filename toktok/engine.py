"""Engine: the read → sample → pre-tokenize + count stages of one phase, on this machine.

Owns how a phase's sources become its word table: every document is read once (in a background
thread, one batch ahead); with a ``capacity`` the pass fills a seeded reservoir and only the sample
is counted. Reads the phase's :class:`~toktok.read.Corpus` objects; writes nothing itself: it returns
a :class:`PhaseCount` (word table, per-file bytes seen and counted, the parity sample) that the
pipeline stores. Another engine (``toktok.engine_ray``) must return the same ``PhaseCount`` for the
same sources, seed and capacity: everything here depends only on the set of documents, their
identities (path, row) and the seed, never on batch boundaries or reading order.
Example: ``count_phase([Source(read_corpus(["data_fixtures/"]))], seed=0).words.height > 0``.
"""
from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import numpy as np
import polars as pl

from .pretokenize import WordCounter
from .read import Corpus
from .sample import Reservoir, doc_hashes

#: How a stage reports progress: ``progress(stage, done, total)``; total may be None.
Progress = Callable[[str, int, "int | None"], None]

#: Documents kept for the parity check and the compression curve (the smallest seeded hashes).
PARITY_DOCS = 64
#: Characters of each parity document kept.
PARITY_CHARS = 4000

_PARITY_SCHEMA = {"hash": pl.UInt64, "source": pl.String, "row": pl.Int64, "text": pl.String}


@dataclass
class Source:
    """One source of a phase: its files and its sampling weight (None = by size)."""

    corpus: Corpus
    weight: float | None = None

    @property
    def size(self) -> int:
        return sum(f.size for f in self.corpus.files)


@dataclass
class PhaseCount:
    """What counting a phase produced.

    ``words``: (word binary, count int64), sorted by word. ``used[path]``: docs/bytes counted and
    docs_seen/bytes_seen read, per file. ``parity``: the ``PARITY_DOCS`` documents with the smallest
    seeded hashes among those counted (hash, source, row, text), in hash order.
    """

    words: pl.DataFrame
    used: dict[str, dict[str, int]]
    parity: pl.DataFrame
    seconds: dict[str, float] = field(default_factory=dict)


def empty_used() -> dict[str, int]:
    return dict.fromkeys(("docs", "bytes", "docs_seen", "bytes_seen"), 0)


class ParitySample:
    """The ``k`` documents with the smallest seeded hashes offered so far; mergeable."""

    def __init__(self, k: int = PARITY_DOCS):
        self.k = k
        self.df = pl.DataFrame(schema=_PARITY_SCHEMA)

    def offer(self, hashes: np.ndarray, source: str, rows: np.ndarray, texts: pl.Series) -> None:
        if len(hashes) == 0:
            return
        if self.df.height >= self.k:
            cut = np.uint64(self.df["hash"][self.k - 1])
            pick = np.flatnonzero(hashes < cut)
        else:
            pick = np.argsort(hashes, kind="stable")[: self.k]
        if len(pick) == 0:
            return
        idx = pl.Series(pick.astype(np.int64))
        part = pl.DataFrame({
            "hash": hashes[pick], "source": pl.Series([source] * len(pick), dtype=pl.String),
            "row": rows[pick].astype(np.int64),
            "text": texts.gather(idx).fill_null("").str.slice(0, PARITY_CHARS),
        })
        self.merge_frame(part)

    def merge_frame(self, part: pl.DataFrame) -> None:
        self.df = pl.concat([self.df, part.select(list(_PARITY_SCHEMA))]).unique(
            ["source", "row"], keep="first").sort("hash", "source", "row").head(self.k)


def prefetch(items: Iterator, depth: int = 1) -> Iterator:
    """Iterate ``items`` in a background thread, ``depth`` items ahead (reading overlaps counting;
    pyarrow and the scanner release the GIL). Errors are raised here, in the caller's thread."""
    q: queue.Queue = queue.Queue(maxsize=depth)
    done = object()
    stop = threading.Event()

    def run() -> None:
        try:
            for item in items:
                if stop.is_set():
                    return
                q.put(item)
            q.put(done)
        except BaseException as e:  # handed to the consumer
            q.put(e)

    th = threading.Thread(target=run, name="toktok-read", daemon=True)
    th.start()
    try:
        while True:
            item = q.get()
            if item is done:
                return
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        stop.set()
        while th.is_alive():  # unblock a producer waiting on a full queue
            try:
                q.get_nowait()
            except queue.Empty:
                th.join(0.05)


def sample_pass(
    sources: list[Source], capacity: int, seed: int, batch_bytes: int, report: Progress, tag: str = "",
) -> list[Reservoir]:
    """One pass over every file of the phase into seeded reservoir(s): one per source when sources
    have weights (sharing ``capacity`` by weight), else one shared by all. Returns the reservoirs
    in source order (a shared one repeated)."""
    total = sum(s.size for s in sources)
    done = 0
    if any(s.weight is not None for s in sources):
        wsum = sum(s.weight or 1.0 for s in sources)
        pools = [Reservoir(int(capacity * (s.weight or 1.0) / wsum), seed) for s in sources]
    else:
        shared = Reservoir(capacity, seed)
        pools = [shared] * len(sources)
    for src, res in zip(sources, pools):
        for f in src.corpus.files:
            row = 0  # documents are identified by (path, index in the file), whatever the batching
            # a text file is one document: sample it in pieces (cut where the pre-tokenizer cuts)
            # small enough that the sample can take some of them
            step = min(batch_bytes, max(1 << 12, capacity // 64)) if f.kind == "txt" else batch_bytes
            for batch in Corpus([f], src.corpus.text_column, src.corpus.bad_utf8).batches(step):
                res.offer(f.path, row, batch.texts)
                row += batch.texts.len()
            done += f.size
            report("sample" + tag, done, total)
    return pools


def _batches(
    sources: list[Source], used: dict[str, dict[str, int]], capacity: int | None, seed: int,
    batch_bytes: int, report: Progress, tag: str, times: dict[str, float],
) -> Iterator[tuple[pl.Series, np.ndarray, np.ndarray, int, str]]:
    """The documents a phase counts, batch by batch: (texts, hashes, rows, bytes done before the
    batch, source path). Without a ``capacity`` every document is read; with one, only the
    reservoirs' sample is yielded. ``used[path]`` gets the documents and bytes seen and counted."""
    if capacity is None:
        done = 0
        for src in sources:
            c = src.corpus
            for batch in c.batches(batch_bytes):
                n = batch.texts.len()
                rows = np.arange(batch.first_row, batch.first_row + n, dtype=np.int64) << 20
                before = done + sum(f.size for f in c.files if f.path < batch.path)
                yield batch.texts, doc_hashes(batch.path, batch.first_row, n, seed), rows, before, batch.path
            done += src.size
            for path, st in c.stats.items():
                u = used.setdefault(path, empty_used())
                u["docs"] += st.get("docs", 0)
                u["bytes"] += st.get("bytes", 0)
                u["docs_seen"] += st.get("docs", 0)
                u["bytes_seen"] += st.get("bytes", 0)
        return

    t0 = time.perf_counter()
    pools = sample_pass(sources, capacity, seed, batch_bytes, report, tag)
    times["sample"] = times.get("sample", 0.0) + time.perf_counter() - t0
    counted = 0
    for res in {id(r): r for r in pools}.values():  # each reservoir once, in source order
        df = res.finish()
        for path, st in res.stats.items():
            u = used.setdefault(path, empty_used())
            u["docs"], u["bytes"] = st.docs_kept, st.bytes_kept
            u["docs_seen"], u["bytes_seen"] = st.docs_seen, st.bytes_seen
        df = df.sort("source", "row")
        for part in df.partition_by("source", maintain_order=True):
            path = str(part["source"][0])
            step = max(1, int(part.height * batch_bytes / max(int(part["bytes"].sum()), 1)))
            for i in range(0, part.height, step):
                chunk = part.slice(i, step)
                yield chunk["text"], chunk["hash"].to_numpy(), chunk["row"].to_numpy(), counted, path
                counted += int(chunk["bytes"].sum())
        del df


def count_phase(
    sources: list[Source], *, seed: int = 0, capacity: int | None = None, batch_bytes: int = 32 << 20,
    specials: list[str] | None = None, threads: int | None = None, report: Progress | None = None,
    tag: str = "",
) -> PhaseCount:
    """Read (and, with a ``capacity`` in bytes of text, sample) a phase's sources and count their
    words with the GPT-4 pre-tokenizer, special tokens cut out.

    Example: ``count_phase([Source(read_corpus(["notes.txt"]))]).words["count"].sum() > 0``.
    """
    report = report or (lambda stage, done, total: None)
    times: dict[str, float] = {}
    used: dict[str, dict[str, int]] = {}
    total = sum(s.size for s in sources)
    t0 = time.perf_counter()
    counter = WordCounter(specials=specials or [], threads=threads)
    parity = ParitySample()
    for texts, hashes, rows, done, path in prefetch(_batches(sources, used, capacity, seed, batch_bytes, report, tag, times)):
        report("count" + tag, done, total)
        counter.add(texts)
        parity.offer(hashes, path, rows, texts)
    words = counter.result().sort("word")
    del counter
    report("count" + tag, total, total)
    times["count"] = time.perf_counter() - t0 - times.get("sample", 0.0)
    for src in sources:
        for f in src.corpus.files:
            used.setdefault(f.path, empty_used())
    return PhaseCount(words, used, parity.df, times)


__all__ = ["count_phase", "PhaseCount", "Source", "ParitySample", "sample_pass", "prefetch", "PARITY_DOCS"]
