"""Engine: the read → sample → pre-tokenize + count stages of one phase, on this machine.

Owns how a phase's sources become its word table: every document is read once (in a background
thread, one batch ahead); with a ``capacity`` the pass fills a seeded reservoir and only the sample
is counted. Reads the phase's :class:`~toktok.read.Corpus` objects; writes nothing itself: it returns
a :class:`PhaseCount` (word table, per-file bytes seen and counted, the parity sample) that the
pipeline stores. Another engine (``toktok.engine_ray``) must return the same ``PhaseCount`` for the
same sources, seed and capacity: everything here depends only on the set of documents, their
identities (key, row: :func:`doc_keys`) and the seed, never on batch boundaries, reading order or
where the files are.
Example: ``count_phase([Source(read_corpus(["data_fixtures/"]))], seed=0).words.height > 0``.
"""
from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field

import numpy as np
import polars as pl

from .pretokenize import WordCounter
from .read import Corpus
from . import sample
from .sample import Reservoir, SourceStats, doc_hashes, roomy_heap

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
    seeded hashes among those counted (hash, source, row, text), in hash order. ``held_out``
    (sampled phases only): up to ``sample.LEFT_OUT`` pieces the sample did not take, the same
    columns (``left_out``); None when every document was read.
    """

    words: pl.DataFrame
    used: dict[str, dict[str, int]]
    parity: pl.DataFrame
    seconds: dict[str, float] = field(default_factory=dict)
    held_out: pl.DataFrame | None = None


def doc_keys(sources: list[Source]) -> dict[str, str]:
    """Each file's part of its documents' identities, by path: its ``SourceFile.key`` (the path
    below the source that named it, so the same files give the same keys in any folder or
    bucket); a key that an earlier file of the phase (in source, then file order) already has
    gets ``#2``, ``#3``, ... so that no two files of a phase share one.
    Example: ``doc_keys([Source(read_corpus(["a/x.txt"])), Source(read_corpus(["b/x.txt"]))])
    == {"a/x.txt": "x.txt", "b/x.txt": "x.txt#2"}``."""
    out: dict[str, str] = {}
    seen: dict[str, int] = {}
    for src in sources:
        for f in src.corpus.files:
            k = f.key or f.path
            n = seen[k] = seen.get(k, 0) + 1
            out.setdefault(f.path, k if n == 1 else f"{k}#{n}")
    return out


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
            # a fresh copy: a slice of a string column shares its buffers, so keeping it would
            # keep every batch that gave a parity document alive (~190 MB on the bench corpus)
            "text": pl.Series(texts.gather(idx).fill_null("").str.slice(0, PARITY_CHARS).to_list(), dtype=pl.String),
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
    # Files are read in parallel (Parquet decoding and UTF-8 checks release the GIL), each by one
    # thread in file order, straight from Arrow: only the kept pieces are copied (sample.py). The
    # sample does not depend on the order in which files finish.
    keys = doc_keys(sources)
    jobs = [(src.corpus, f, res) for src, res in zip(sources, pools) for f in src.corpus.files]
    for _, f, res in jobs:  # per-file statistics in file order, whichever file finishes first
        res.stats.setdefault(f.path, SourceStats())
    workers = max(1, min(pl.thread_pool_size(), len(jobs)))
    # small reads (sample.READ_BYTES): decoded text is cut and hashed while still in cache, and
    # the workers together hold less than one batch
    per_worker = max(1 << 16, min(sample.READ_BYTES, batch_bytes // workers))
    first_error = [len(jobs)]  # index of the first file (in order) that failed
    errors: dict[int, BaseException] = {}
    lock = threading.Lock()
    abort = threading.Event()

    def run(i: int) -> None:
        corpus, f, res = jobs[i]
        # a text file is one document: sample it in pieces (cut where the pre-tokenizer cuts)
        # small enough that the sample can take some of them; the chunk size is part of the
        # pieces' identities, so it does not depend on the number of threads
        step = min(batch_bytes, max(1 << 12, capacity // 64)) if f.kind == "txt" else per_worker
        row = 0  # documents are identified by (key, index in the file), whatever the batching
        if abort.is_set() or first_error[0] < i:
            return
        try:
            for texts in corpus.arrow_texts(f, step):
                if abort.is_set() or first_error[0] < i:  # the error of an earlier file wins
                    return
                res.offer(f.path, row, texts, key=keys[f.path])
                row += len(texts)
                read[0] += texts.nbytes
                if read[0] >= tidy_every:  # give the free heap back now and then (roomy_heap)
                    read[0] = 0
                    tidy()
        except BaseException as e:
            with lock:
                errors[i] = e
                first_error[0] = min(first_error[0], i)

    read = [0]  # bytes read since the heap was last tidied: about two batches, the reads' share
    tidy_every = 2 * batch_bytes
    with roomy_heap() as tidy:  # decoding Parquet pages without faulting fresh memory in for each
        pool = ThreadPoolExecutor(workers, thread_name_prefix="toktok-sample")
        try:
            futures = {pool.submit(run, i): i for i in range(len(jobs))}
            for fut in as_completed(futures):
                fut.result()
                done += jobs[futures[fut]][1].size
                report("sample" + tag, done, total)
        finally:
            abort.set()
            pool.shutdown(wait=True, cancel_futures=True)
    if errors:  # the same error as reading the files one after the other
        raise errors[min(errors)]
    return pools


@dataclass
class CountState:
    """How far counting a phase got, for ``--resume``. Full read: the counts of the first
    ``files_done`` files (in phase order), saved at file boundaries. Sampled: the finished
    ``sample`` (hash, source, row, bytes, text), saved once after the pass over the corpus."""

    files_done: int = 0
    words: pl.DataFrame | None = None
    used: dict[str, dict[str, int]] = field(default_factory=dict)
    parity: pl.DataFrame | None = None
    sample: pl.DataFrame | None = None
    held_out: pl.DataFrame | None = None  # with the sample: pieces it did not take (left_out)


_FILE_DONE = "file done"


def _batches(
    sources: list[Source], capacity: int | None, seed: int, batch_bytes: int, report: Progress, tag: str,
    times: dict[str, float], state: CountState, save: Callable[[CountState], None] | None,
) -> Iterator[tuple]:
    """The documents a phase counts, batch by batch: (texts, hashes, rows, bytes done before the
    batch, source path), and after each file of a full read (_FILE_DONE, file index, its stats).
    Without a ``capacity`` every document is read (from file ``state.files_done`` on); with one,
    only the reservoirs' sample (``state.sample`` when a resumed run has it)."""
    if capacity is None:
        keys = doc_keys(sources)
        done = 0
        k = 0
        for src in sources:
            for f in src.corpus.files:
                if k < state.files_done:  # counted before the interruption
                    done += f.size
                    k += 1
                    continue
                c = Corpus([f], src.corpus.text_column, src.corpus.bad_utf8)
                for batch in c.batches(batch_bytes):
                    n = batch.texts.len()
                    rows = np.arange(batch.first_row, batch.first_row + n, dtype=np.int64) << 20
                    yield batch.texts, doc_hashes(keys[f.path], batch.first_row, n, seed), rows, done, batch.path
                st = c.stats.get(f.path, {})
                u = {"docs": st.get("docs", 0), "bytes": st.get("bytes", 0)}
                yield _FILE_DONE, k, f.path, {**u, "docs_seen": u["docs"], "bytes_seen": u["bytes"]}
                done += f.size
                k += 1
        return

    sample = state.sample
    if sample is None:
        t0 = time.perf_counter()
        pools = sample_pass(sources, capacity, seed, batch_bytes, report, tag)
        times["sample"] = times.get("sample", 0.0) + time.perf_counter() - t0
        frames, outs = [], []
        for res in {id(r): r for r in pools}.values():  # each reservoir once, in source order
            frames.append(res.finish())
            outs.append(res.left_out())
            for path, st in res.stats.items():
                state.used[path] = {"docs": st.docs_kept, "bytes": st.bytes_kept,
                                    "docs_seen": st.docs_seen, "bytes_seen": st.bytes_seen}
        sample = pl.concat(frames, how="vertical_relaxed").with_columns(pl.col("source").cast(pl.String))
        state.held_out = left_out_of(outs)
        del frames, pools
        state.sample = sample
        if save is not None:
            save(state)
    counted = 0
    # counts and the parity sample do not depend on the order: by source, then row
    for part in sample.sort("source", "row").partition_by("source", maintain_order=True):
        path = str(part["source"][0])
        step = max(1, int(part.height * batch_bytes / max(int(part["bytes"].sum()), 1)))
        for i in range(0, part.height, step):
            chunk = part.slice(i, step)
            yield chunk["text"], chunk["hash"].to_numpy(), chunk["row"].to_numpy(), counted, path
            counted += int(chunk["bytes"].sum())


def left_out_of(parts: list[pl.DataFrame]) -> pl.DataFrame:
    """The pieces a phase's reservoirs did not take (their ``left_out()``), at most
    ``sample.LEFT_OUT``: those with the largest hashes over all of them (each reservoir's are its
    own largest, so this is exact whatever the split into reservoirs)."""
    return (pl.concat(parts).sort(["hash", "source", "row"], descending=[True, False, False])
            .head(sample.LEFT_OUT))


def count_phase(
    sources: list[Source], *, seed: int = 0, capacity: int | None = None, batch_bytes: int = 32 << 20,
    specials: list[str] | None = None, threads: int | None = None, report: Progress | None = None,
    tag: str = "", restored: CountState | None = None, save: Callable[[CountState], None] | None = None,
    every: float = 30.0,
) -> PhaseCount:
    """Read (and, with a ``capacity`` in bytes of text, sample) a phase's sources and count their
    words with the GPT-4 pre-tokenizer, special tokens cut out.

    ``save(state)`` is called with a :class:`CountState` at file boundaries at most every
    ``every`` seconds (full read) or once after the sample pass (sampled); ``restored`` (a state
    saved by an interrupted run) continues from there, with the same result.
    Example: ``count_phase([Source(read_corpus(["notes.txt"]))]).words["count"].sum() > 0``.
    """
    report = report or (lambda stage, done, total: None)
    times: dict[str, float] = {}
    state = restored or CountState()
    used = {k: dict(v) for k, v in state.used.items()}
    total = sum(s.size for s in sources)
    t0 = time.perf_counter()
    counter = WordCounter(specials=specials or [], threads=threads)
    parity = ParitySample()
    if state.parity is not None:
        parity.merge_frame(state.parity)
    t_saved = time.monotonic()
    for item in prefetch(_batches(sources, capacity, seed, batch_bytes, report, tag, times, state, save)):
        if item[0] is _FILE_DONE:
            _, k, path, st = item
            used[path] = st
            if save is not None and time.monotonic() - t_saved >= every and k + 1 < sum(len(s.corpus.files) for s in sources):
                # 1. checkpoint: everything counted in the files so far (a snapshot, not a delta)
                words = counter.result()
                if state.words is not None:
                    words = _sum_counts(state.words, words)
                counter = WordCounter(specials=specials or [], threads=threads)
                state = CountState(k + 1, words, {p: dict(v) for p, v in used.items()}, parity.df)
                save(state)
                t_saved = time.monotonic()
            continue
        texts, hashes, rows, done, path = item
        report("count" + tag, done, total)
        counter.add(texts)
        parity.offer(hashes, path, rows, texts)
    words = counter.result()
    del counter
    if state.words is not None:
        words = _sum_counts(state.words, words)
    words = words.sort("word")
    if capacity is not None:
        used = {k: dict(v) for k, v in state.used.items()}
    report("count" + tag, total, total)
    times["count"] = time.perf_counter() - t0 - times.get("sample", 0.0)
    for src in sources:
        for f in src.corpus.files:
            used.setdefault(f.path, empty_used())
    return PhaseCount(words, used, parity.df, times, held_out=state.held_out if capacity is not None else None)


def _sum_counts(a: pl.DataFrame, b: pl.DataFrame) -> pl.DataFrame:
    """Two word tables added up (word, count)."""
    return pl.concat([a.select("word", "count"), b.select("word", "count")]).group_by("word").agg(pl.col("count").sum())


__all__ = ["count_phase", "CountState", "PhaseCount", "Source", "ParitySample", "sample_pass", "prefetch", "doc_keys",
           "PARITY_DOCS", "left_out_of"]
