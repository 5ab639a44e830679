"""The counting core: the rules a phase's count follows, written once for both engines.

Owns what makes a phase's word table, file statistics and parity sample the same whichever
engine counts it (:mod:`toktok.count.local` with threads, :mod:`toktok.count.ray` with Ray tasks):
a document's identity (the file's key from :func:`doc_keys`, its row; ``row << 20`` for a whole
document, ``row << 20 | piece`` for a piece of a long one, as :class:`~toktok.count.sample.Reservoir`
numbers them), how the capacity is shared by the sources' reservoirs (:func:`capacity_split`), the
pieces a ``.txt`` file is sampled in (:func:`sample_step`), how a file is offered to a reservoir
(:func:`offer_file`) or read whole (:func:`full_batches`), the per-file statistics
(:func:`full_read_used`, :func:`sampled_used`), the finished sample with its held-out pieces
(:func:`finish_sample`, :func:`left_out_of`), how a batch is counted (:func:`count_batch`,
:func:`count_part`), the parity sample (:class:`ParitySample`) and the counting checkpoint
(:class:`CountState`, :func:`snapshot`). Nothing here depends on batch boundaries, reading order,
threads or where the files are. The engines keep what is theirs: spreading the work, and folding
partial results back together.
Example: ``capacity_split([Source(c, 2.0), Source(d, 1.0)], 300) == ([200, 100], [0, 1])``.
"""
from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from . import sample
from .read import Batch, Corpus, SourceFile
from .scan.classes import dist_version, polars_version  # noqa: F401  (here for the run's identity, there for
# the class cache)
from .sample import Reservoir, doc_hashes

if TYPE_CHECKING:
    import polars as pl

#: How a stage reports progress: ``progress(stage, done, total)``; total may be None.
Progress = Callable[[str, int, "int | None"], None]

#: Text read and counted at a time by a run without a memory budget (whose plan says its own):
#: the counting threads start sooner on a file's first batch, and the two batches in flight (one
#: counted, one read) hold less. The 100 MB bench at 32,768: peak 389 MB against 406 with 32 MB
#: batches, the same time.
BATCH_BYTES = 8 << 20
#: Documents kept for the parity check and the compression curve (the smallest seeded hashes).
PARITY_DOCS = 64
#: Characters of each parity document kept.
PARITY_CHARS = 4000

#: The columns of a parity sample (and of a phase's held-out pieces), as the count stage hands them on.
PARITY_SCHEMA = pa.schema([("hash", pa.uint64()), ("source", pa.large_string()), ("row", pa.int64()),
                           ("text", pa.large_string())])


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

    Arrow tables, whichever engine counted: ``words``: (word binary, count int64), sorted by
    word. ``used[path]``: docs/bytes counted and docs_seen/bytes_seen read, per file. ``parity``:
    the ``PARITY_DOCS`` documents with the smallest seeded hashes among those counted (hash,
    source, row, text: :data:`PARITY_SCHEMA`), in hash order. ``held_out`` (sampled phases only):
    up to ``sample.LEFT_OUT`` pieces the sample did not take, the same columns (``left_out``);
    None when every document was read.
    """

    words: pa.Table
    used: dict[str, dict[str, int]]
    parity: pa.Table
    seconds: dict[str, float] = field(default_factory=dict)
    held_out: pa.Table | None = None
    #: MB (10**6 bytes) of text counted per second of the count stage, when a pattern without a
    #: compiled scanner (a custom regex) was counted through ``regex``; None otherwise.
    regex_mb_s: float | None = None
    #: What the merge stage made of ``words`` as a word-count table was read (``count.start``'s
    #: ``prepare``), for ``Counted.segmented``; None otherwise.
    prepared: object = None


def regex_rate(nbytes: int, seconds: float) -> float | None:
    """``PhaseCount.regex_mb_s`` of ``nbytes`` counted through regex in ``seconds``; None when
    nothing was. Example: ``regex_rate(8_000_000, 2.0) == 4.0``."""
    return nbytes / 1e6 / seconds if nbytes and seconds > 0 else None


@dataclass
class CountState:
    """How far counting a phase got, for ``--resume``. Full read: the counts of the first
    ``files_done`` files (in phase order), saved at file boundaries. Sampled: the finished
    ``sample`` (hash, source, row, bytes, text), saved once after the pass over the corpus. The
    words and the sample are Polars frames (the engines' own); the parity sample and the held-out
    pieces Arrow tables (:data:`PARITY_SCHEMA`), as a phase's count hands them on."""

    files_done: int = 0
    words: pl.DataFrame | None = None
    used: dict[str, dict[str, int]] = field(default_factory=dict)
    parity: pa.Table | None = None
    sample: pl.DataFrame | None = None
    held_out: pa.Table | None = None  # with the sample: pieces it did not take (left_out)


@dataclass
class Counted:
    """A phase's words and their counts (the word table's columns, as the merge loop reads them)
    with what counting it cost and found: what the count stage hands the merge stage, or what
    ``--resume`` restores of a counted phase. ``of_table`` makes one from a word table. The count
    stage adds the phase's parity sample and the pieces its sample did not take (``held_out``,
    :data:`PARITY_SCHEMA`), the regex scanner's speed (MB/s, None when it scanned none) and the
    seconds its sampling took, and the words' segmentation under the vocabulary so far when the
    memory budget's cut made it (``segmented``: ids and offsets, :func:`toktok.budget.fit_words`),
    or the words laid out for the loop as their table was read (``count.start``'s ``prepare``),
    for the merge loop."""

    words: pa.Array | None
    counts: np.ndarray | None
    warnings: list[str]
    seconds: float
    docs: int
    text_bytes: int
    parity: pa.Table | None = None
    held_out: pa.Table | None = None
    regex_mb_s: float | None = None
    sample_seconds: float = 0.0
    segmented: tuple[np.ndarray, np.ndarray] | object | None = None
    kept: dict | None = None  # the texts a streamed phase read, for a later one (toktok.count.local.Kept)

    @classmethod
    def of_table(cls, table: pa.Table, warnings: list[str], seconds: float, docs: int, text_bytes: int) -> "Counted":
        """The columns of the Arrow word table ``table`` (``word``, ``count``), each in one piece.
        Example: ``Counted.of_table(phase_count.words, [], 1.0, 10, 100).words``."""
        word = table.column("word")
        word = word.chunk(0) if word.num_chunks == 1 else word.combine_chunks()  # (which copies even one)
        return cls(word, table.column("count").to_numpy(), warnings, seconds, docs, text_bytes)


# ---------------------------------------------------------------------------------------------
# Identities and shares
# ---------------------------------------------------------------------------------------------


def phase_files(sources: list[Source]) -> list[tuple[Source, SourceFile]]:
    """Every file of a phase with its source, in phase order (source, then file order): the
    order of ``CountState.files_done``."""
    return [(src, f) for src in sources for f in src.corpus.files]


def doc_keys(sources: list[Source]) -> dict[str, str]:
    """Each file's part of its documents' identities, by path: its ``SourceFile.key`` (the path
    below the source that named it, so the same files give the same keys in any folder or
    bucket); a key that an earlier file of the phase (in source, then file order) already has
    gets ``#2``, ``#3``, ... so that no two files of a phase share one.
    Example: ``doc_keys([Source(read_corpus(["a/x.txt"])), Source(read_corpus(["b/x.txt"]))])
    == {"a/x.txt": "x.txt", "b/x.txt": "x.txt#2"}``."""
    out: dict[str, str] = {}
    seen: dict[str, int] = {}
    for _src, f in phase_files(sources):
        k = f.key or f.path
        n = seen[k] = seen.get(k, 0) + 1
        out.setdefault(f.path, k if n == 1 else f"{k}#{n}")
    return out


def capacity_split(sources: list[Source], capacity: int) -> tuple[list[int], list[int]]:
    """(the capacity of each reservoir, each source's reservoir): one reservoir per source sharing
    ``capacity`` by weight when any source has a weight (a missing weight counts 1), else one
    reservoir for all. Example: ``capacity_split([Source(c), Source(d)], 300) == ([300], [0, 0])``."""
    if any(s.weight is not None for s in sources):
        wsum = sum(s.weight or 1.0 for s in sources)
        return [int(capacity * (s.weight or 1.0) / wsum) for s in sources], list(range(len(sources)))
    return [capacity], [0] * len(sources)


def sample_step(kind: str, capacity: int, batch_bytes: int, default: int) -> int:
    """Bytes per read when a file of ``kind`` is offered to a reservoir of ``capacity``: a text file
    is one document, sampled in pieces (cut where the pre-tokenizer cuts) small enough that the
    sample can take some of them. The pieces are part of their identities, so this depends on the
    capacity and ``batch_bytes`` only, never on the engine or its threads; other kinds are read
    ``default`` bytes at a time (that changes nothing). Example: ``sample_step("txt", 1 << 20, 1 << 25, 0) == 16384``."""
    return min(batch_bytes, max(1 << 12, capacity // 64)) if kind == "txt" else default


def offer_file(res: Reservoir, corpus: Corpus, f: SourceFile, key: str, step: int,
               first_row: int = 0) -> Iterator[pa.Array]:
    """Offer the documents of ``f`` (read ``step`` bytes at a time, :func:`sample_step`, a text
    file cut where ``res.pattern`` cuts) to ``res``, each identified by (``key``, its index among
    the file's texts, counted from ``first_row``: where a part of a file starts); yields each
    read once offered, so that the caller can stop or tidy between reads."""
    row = first_row
    for texts in corpus.arrow_texts(f, step, pattern=res.pattern):
        res.offer(f.path, row, texts, key=key)
        row += len(texts)
        yield texts


def full_ids(key: str, batch: Batch, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(seeded hashes, ids) of the whole documents of a batch read by ``Corpus.batches``, as the
    sample numbers them (``row << 20``)."""
    n = len(batch.texts)
    rows = np.arange(batch.first_row, batch.first_row + n, dtype=np.int64) << 20
    return doc_hashes(key, batch.first_row, n, seed), rows


# ---------------------------------------------------------------------------------------------
# Statistics, the sample, counting
# ---------------------------------------------------------------------------------------------


def empty_used() -> dict[str, int]:
    """The statistics of a file nothing was read from."""
    return dict.fromkeys(("docs", "bytes", "docs_seen", "bytes_seen"), 0)


def full_read_used(st: dict[str, int]) -> dict[str, int]:
    """A fully read file's statistics from its ``Corpus.stats`` entry: every document seen was counted."""
    docs, nbytes = st.get("docs", 0), st.get("bytes", 0)
    return {"docs": docs, "bytes": nbytes, "docs_seen": docs, "bytes_seen": nbytes}


def with_every_file(used: dict[str, dict[str, int]], sources: list[Source]) -> dict[str, dict[str, int]]:
    """``used`` with an entry for every file of the phase (zeros for files nothing came from)."""
    for _src, f in phase_files(sources):
        used.setdefault(f.path, empty_used())
    return used


def left_out_of(parts: list[pl.DataFrame]) -> pa.Table:
    """The pieces a phase's reservoirs did not take (their ``left_out()``), at most
    ``sample.LEFT_OUT``: those with the largest hashes over all of them (each reservoir's are its
    own largest, so this is exact whatever the split into reservoirs); :data:`PARITY_SCHEMA`."""
    import polars as pl

    out = (pl.concat(parts).sort(["hash", "source", "row"], descending=[True, False, False])
           .head(sample.LEFT_OUT))
    return out.select(pl.col("hash"), pl.col("source").cast(pl.String), "row", "text").to_arrow().cast(PARITY_SCHEMA)


def finish_sample(pools: list[Reservoir], sources: list[Source] | None = None) -> CountState:
    """A sampled phase's finished sample (each reservoir once, in order; the reservoirs give
    theirs up) as the checkpoint it is saved as: the sample (hash, source, row, bytes, text; source
    a String), the per-file statistics (documents, not the pieces they were sampled in: a text
    file of ``sources`` is one document) and the pieces the sample left out."""
    import polars as pl

    frames, outs, used = [], [], {}
    txt = {f.path for _src, f in phase_files(sources or []) if f.kind == "txt"}
    for res in {id(r): r for r in pools}.values():
        frame, out = res.hand_over()
        frames.append(frame.with_columns(pl.col("source").cast(pl.String)))
        outs.append(out)
        for path, st in res.stats.items():
            docs, seen = st.docs_kept, st.docs_seen
            if path in txt:  # read in steps, each a "row" of the sample
                docs, seen = min(docs, 1), min(seen, 1)
            used[path] = {"docs": docs, "bytes": st.bytes_kept, "docs_seen": seen, "bytes_seen": st.bytes_seen}
    smp = pl.concat(frames, how="vertical_relaxed")
    return CountState(sample=smp, used=used, held_out=left_out_of(outs))


def took_every_document(used: dict[str, dict[str, int]]) -> bool:
    """Whether a sampled phase's sample (its per-file statistics ``used``) holds every document of
    its files whole: every document and every byte seen was kept (no piece was left out)."""
    return all(u["docs"] == u["docs_seen"] and u["bytes"] == u["bytes_seen"] for u in used.values())


def whole_documents(smp: pl.DataFrame) -> pl.DataFrame:
    """A sample of pieces (:func:`finish_sample`; long documents cut in pieces where a pattern
    cuts) as the sample of whole documents that a reservoir which does not cut them takes, when
    the sample holds every piece of every document it touches (:func:`took_every_document`): each
    document's pieces joined in order (a piece is a byte range of its document, the next starting
    where it ends: in (source, row) order their texts are the documents' back to back, so only
    the offsets change), its identity ``row << 20`` and its hash that of piece 0, the document's
    own (:func:`~toktok.count.sample.doc_hashes`). In (source, row) order, as it is counted
    (:func:`sample_parts`). Example: ``whole_documents(state.sample)["bytes"].sum() == state.sample["bytes"].sum()``."""
    import polars as pl

    smp = smp.sort("source", "row")
    row = smp["row"].to_numpy()
    starts = np.flatnonzero(row % (1 << 20) == 0)  # each document's piece 0
    if len(starts) == smp.height:  # no document was cut
        return smp
    text = sample.as_large_string(smp["text"])  # the pieces' text back to back, in this order
    offs, _ = sample._buffers(text)
    joined = pa.Array.from_buffers(pa.large_string(), len(starts),
                                   [None, pa.py_buffer(np.append(offs[starts], offs[-1])), text.buffers()[2]])
    first = pl.Series(starts)
    return pl.DataFrame({"hash": smp["hash"].gather(first), "source": smp["source"].gather(first),
                         "row": row[starts], "bytes": np.add.reduceat(smp["bytes"].to_numpy(), starts),
                         "text": pl.Series("text", joined)})


def sample_parts(smp: pl.DataFrame, piece_bytes: int) -> Iterator[pl.DataFrame]:
    """The sample in the order it is counted (by source, then row) as slices of about
    ``piece_bytes`` of text (at least one piece each): the word counts and the parity sample do
    not depend on the order or the slicing."""
    smp = smp.sort("source", "row")
    cum = smp["bytes"].cum_sum().to_numpy() if smp.height else np.zeros(0, np.int64)
    start = 0
    while start < smp.height:
        base = int(cum[start - 1]) if start else 0
        end = max(start + 1, int(np.searchsorted(cum, base + piece_bytes, side="right")))
        yield smp.slice(start, end - start)
        start = end


def count_batch(counter, parity: ParitySample, path: str, texts: pa.Array | pa.ChunkedArray, hashes: np.ndarray,
                rows: np.ndarray) -> None:
    """Count documents of one file (``counter``: a ``WordCounter``) and offer them to the parity sample."""
    counter.add(texts)
    parity.offer(hashes, path, rows, texts)


def count_part(counter, parity: ParitySample, part: pl.DataFrame) -> None:
    """Count a slice of the sample (:func:`sample_parts`), source by source."""
    for p in part.partition_by("source", maintain_order=True):
        count_batch(counter, parity, str(p["source"][0]), sample.as_large_string(p["text"]), p["hash"].to_numpy(),
                    p["row"].to_numpy())


def sum_words(parts: list[pl.DataFrame | None]) -> pl.DataFrame:
    """Word tables (word, count) added up, in no particular order; None parts are left out."""
    import polars as pl

    parts = [p.select("word", "count") for p in parts if p is not None]
    if len(parts) == 1:
        return parts[0]
    return pl.concat(parts).group_by("word").agg(pl.col("count").sum())


def snapshot(state: CountState, words: pl.DataFrame, files_done: int, used: dict[str, dict[str, int]],
             parity: ParitySample) -> CountState:
    """The full-read checkpoint after ``files_done`` files: ``words`` (counted since ``state``)
    added to ``state``'s, with copies of the statistics and the parity sample so far."""
    return CountState(files_done, sum_words([state.words, words]), {p: dict(v) for p, v in used.items()}, parity.df)


class ParitySample:
    """The ``k`` documents with the smallest seeded hashes offered so far; mergeable. At most
    ``k`` rows, kept as Python values: ``df`` gives them as an Arrow table (hash, source, row,
    text), in (hash, source, row) order, and ``texts()`` their texts.
    Example: ``p = ParitySample(); p.offer(np.array([7], np.uint64), "a.txt", np.array([0]), texts); p.texts()``."""

    def __init__(self, k: int = PARITY_DOCS):
        self.k = k
        self._rows: list[tuple[int, str, int, str]] = []

    @property
    def df(self) -> pa.Table:
        cols = list(zip(*self._rows)) if self._rows else [[]] * len(PARITY_SCHEMA)
        return pa.table([pa.array(c, f.type) for c, f in zip(cols, PARITY_SCHEMA)], schema=PARITY_SCHEMA)

    def texts(self) -> list[str]:
        """The documents' texts, in hash order."""
        return [r[3] for r in self._rows]

    def offer(self, hashes: np.ndarray, source: str, rows: np.ndarray, texts: pa.Array | pa.ChunkedArray) -> None:
        if len(hashes) == 0:
            return
        if len(self._rows) >= self.k:
            cut = np.uint64(self._rows[self.k - 1][0])
            pick = np.flatnonzero(hashes < cut)
        else:
            pick = np.argsort(hashes, kind="stable")[: self.k]
        if len(pick) == 0:
            return
        # fresh Python strings: a slice of a string column shares its buffers, so keeping it would
        # keep every batch that gave a parity document alive (~190 MB on the bench corpus)
        take = pick.tolist()
        got = [(texts[i].as_py() or "")[:PARITY_CHARS] for i in take]
        self._merge(zip(hashes[pick].tolist(), [source] * len(take), rows[pick].tolist(), got))

    def merge_frame(self, part: pa.Table) -> None:
        """Another parity sample (``df`` of one, or the run file's) joins this one."""
        self._merge(zip(*(part.column(c).to_pylist() for c in PARITY_SCHEMA.names)))

    def _merge(self, new: Iterable[tuple]) -> None:
        seen: set[tuple[str, int]] = set()
        rows = []
        for r in itertools.chain(self._rows, new):  # a document offered twice: the first one stays
            if (r[1], r[2]) not in seen:
                seen.add((r[1], r[2]))
                rows.append(tuple(r))
        rows.sort(key=lambda r: (r[0], r[1], r[2]))
        self._rows = rows[: self.k]


__all__ = ["Source", "PhaseCount", "CountState", "Counted", "ParitySample", "Progress", "PARITY_DOCS", "phase_files",
           "doc_keys", "capacity_split", "sample_step", "offer_file", "full_ids", "empty_used", "full_read_used",
           "with_every_file", "left_out_of", "finish_sample", "took_every_document", "whole_documents", "sample_parts",
           "count_batch", "count_part", "sum_words", "snapshot", "regex_rate", "polars_version", "BATCH_BYTES",
           "PARITY_SCHEMA", "dist_version"]
