"""The counter that drives the scanners: ``WordCounter`` takes batches of documents, cuts them
into chunks the counting threads take in turn, counts each chunk with its pattern's scanner (or
the reference) into the thread's table, and hands back one table of words and counts;
``count_words`` is one batch of it.
Example: ``count_words(["a a"]).sort("word").rows() == [(b" a", 1), (b"a", 1)]``."""
from __future__ import annotations

import itertools
import threading
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from ...patterns import DEFAULT, Pattern
from ..cuts import pieces
from ..sample import _buffers, as_large_string
from .cl100k import _scan_into
from .named import _scan_tables, _scanner
from .reference import (_REFERENCE_ENTRY_BYTES, _counter_frame, _cut_specials, _cut_specials_py, _empty_counts,
                        _findall_into)
from .sort import _gather_words, _sort_keys, _sort_ties
from .table import _Table, _export, _export_views, _fold_tables, _in_threads, _pages, _words64

if TYPE_CHECKING:
    import polars as pl

_SLICE_BYTES = 8 << 20  # text queued for the threads at a time
_SLICES_QUEUED = 1  # slices queued for the threads while the next one is cut
_VIEW_BYTES_MAX = (1 << 31) - 1  # a binary view's offset is an int32


def _scan_chunk(tb: _Table, scan: tuple, d: int, hi: int, kernel=None) -> None:
    """Count documents d..hi-1 of ``scan`` (text, its 64-bit words and their base, offsets, the
    class tables, swar) into table ``tb`` with a pattern's ``kernel`` (default cl100k's),
    growing the table as the kernel asks."""
    kernel = kernel or _scan_into
    data, d64, base, off, ac, flags, fold, swar = scan
    i = int(off[d])
    while d < hi and kernel(data, d64, base, off, d, i, hi, ac, flags, fold, swar, tb.T, tb.arena, tb.st, tb.cbits):
        d, i = int(tb.st[0, 3]), int(tb.st[0, 4])
        tb.grow()


class WordCounter:
    """Counts a pattern's pieces over many batches of documents; ``result()`` gives the table.

    A named pattern is counted by its compiled scanner. It keeps one hash table per thread
    across batches and merges them only in ``result()``. A batch is converted to Arrow ~8 MB at
    a time and each slice is cut into chunks of about equal bytes that the threads take from a
    queue as they finish their last (the scanner releases the GIL), so ``add()`` returns while
    the last slice is counted and ``result()`` waits for it. The merge is parallel and inserts
    nothing: each table is cut into one part per thread by the words' hash, and thread p moves
    each count of part p into the first table that holds the word. Memory grows with the number
    of distinct words (about 16 bytes / 0.7 per word and thread, plus the bytes of words longer
    than 7), not with the corpus; ``memory_bytes()`` tells it. A custom regex counts the same way
    through the scanner compiled from it (:mod:`toktok.count.rx`) or PCRE2's (:mod:`toktok.count.pcre`);
    any other pattern is counted by the ``regex`` package on the same threads (``findall``
    releases the GIL while it matches), into one ``Counter`` per thread; ``regex_counted`` tells how many bytes.
    Example: ``c = WordCounter(); c.add(["a a"]); dict(c.result().iter_rows())[b" a"] == 1``.
    """

    def __init__(self, specials: Sequence[str] = (), threads: int = 0, *, swar: bool = True,
                 reference_bytes: int = 0, pattern: Pattern = DEFAULT):
        self.specials = list(specials)
        self._threads = threads  # 0: Polars' thread pool size, asked when the threads start
        self.swar = swar  # scan 8 bytes at a time where the ASCII classes allow (False: byte table only)
        self.pattern = pattern
        self._kernel = _scanner(pattern)  # None: the pattern counts through regex
        # text the reference may still count (see reference_allowance), and what it counted
        self.reference_bytes = reference_bytes if self._kernel is not None else 0
        self.reference_counted = 0
        self._reference: Counter[str] = Counter()
        self.regex_counted = 0  # bytes counted through regex on the threads (no compiled scanner)
        self._counters: list[Counter[str]] = []  # with regex on the threads: one per thread
        self._tables: list[_Table] = []  # one per thread, of one part per thread
        self._folded = False  # result() has ordered the tables (see there)
        self._pool: ThreadPoolExecutor | None = None  # the counting threads, while they count
        self._queued: list[list] = []  # per slice queued, its chunks' futures
        self._mine: threading.local | None = None  # with the threads: each one's table
        self._ids: Iterator[int] | None = None  # with the threads: the next table one takes

    @property
    def threads(self) -> int:
        """The counting threads (every core by default: Polars' thread pool size)."""
        if not self._threads:
            import polars as pl

            self._threads = pl.thread_pool_size()
        return self._threads

    def memory_bytes(self) -> int:
        """Bytes held by the counting tables and their arenas once what is queued is counted
        (and an estimate for the words the reference or regex counted). Grows with the distinct
        words seen, not with the text."""
        self._settle()
        held = sum(t.T.nbytes + t.arena.nbytes + t.st.nbytes for t in self._tables)
        words = len(self._reference) + sum(len(c) for c in self._counters)
        return held + _REFERENCE_ENTRY_BYTES * words

    def add(self, texts: pa.Array | pa.ChunkedArray | pl.Series | Iterable[str]) -> None:
        """Count documents: an Arrow string array (a ``Batch``'s texts), a Polars Series or any
        iterable of str; nulls are skipped. A batch the reference may count whole (within
        ``reference_bytes``) is counted as Python strings; the scanner reads Arrow's buffers as
        they are (no copy, no Polars)."""
        if not isinstance(texts, (pa.Array, pa.ChunkedArray)) and not hasattr(texts, "to_arrow"):
            texts = pa.array(list(texts), pa.large_string())
        texts = as_large_string(texts)  # (a null counts as an empty document: nothing)
        ends = _ends(texts)
        if self.reference_bytes > 0 and (int(ends[-1]) if len(ends) else 0) <= self.reference_bytes:
            self._count_docs(texts.to_pylist())
            return
        texts = _cut_specials(texts, self.specials)
        if self.reference_bytes > 0 and len(texts) > 0:
            texts = self._count_reference(texts)
        if len(texts) == 0:
            return
        if self._kernel is None:
            self._count_regex(texts)
        else:
            self._scan(texts)

    def _count_docs(self, docs: list[str]) -> None:
        """Count documents with the reference, as Python strings (``_count_reference`` of a
        whole batch, special tokens cut out alike)."""
        rx, n = self.pattern.regex, 0
        for doc in _cut_specials_py(docs, self.specials):
            self._reference.update(pieces(rx, doc))
            n += len(doc.encode())
        self.reference_bytes -= n
        self.reference_counted += n

    def _count_reference(self, texts: pa.Array) -> pa.Array:
        """Count the leading documents that fit in ``reference_bytes`` with the reference
        (``regex``); returns the rest, for the scanner (which takes every later batch too)."""
        ends = _ends(texts)
        k = int(np.searchsorted(ends, self.reference_bytes, side="right"))
        if k:
            rx = self.pattern.regex
            for doc in texts.slice(0, k).to_pylist():
                self._reference.update(pieces(rx, doc))
            self.reference_bytes -= int(ends[k - 1])
            self.reference_counted += int(ends[k - 1])
        if k < len(ends):
            self.reference_bytes = 0
        return texts.slice(k)

    def _count_regex(self, texts: pa.Array) -> None:
        """Count documents with the pattern's regex: in line with one thread, else in chunks of
        about equal bytes queued for the counter's threads, as the scanner's are."""
        if not self._counters:
            self._counters = [Counter() for _ in range(self.threads)]
        ends = _ends(texts)
        self.regex_counted += int(ends[-1])
        if self.threads == 1:
            _findall_into(self._counters[0], self.pattern.regex, texts, False)
            return
        lo = 0
        while lo < len(ends):
            start = int(ends[lo - 1]) if lo else 0
            hi = max(lo + 1, int(np.searchsorted(ends, start + _SLICE_BYTES, side="right")))
            n = hi - lo
            m = min(n, 4 * self.threads)
            cuts = np.searchsorted(ends[lo:hi], np.linspace(start, ends[hi - 1], m + 1), side="right").tolist()
            cuts[0], cuts[-1] = 0, n
            chunks = [texts.slice(lo + cuts[c], cuts[c + 1] - cuts[c]) for c in range(m) if cuts[c + 1] > cuts[c]]
            self._enqueue([(self._findall, (chunk,)) for chunk in chunks])
            lo = hi

    def _findall(self, texts: pa.Array) -> None:
        """Documents ``texts`` into this thread's Counter (a pool thread takes the next one the
        first time it runs)."""
        c = getattr(self._mine, "counter", None)
        if c is None:
            c = self._mine.counter = self._counters[next(self._ids)]
        _findall_into(c, self.pattern.regex, texts, True)

    def _enqueue(self, jobs: list[tuple]) -> None:
        """Queue ``jobs`` (function, arguments) for the counting threads, started on first use;
        waits while more than ``_SLICES_QUEUED`` slices are queued."""
        first = self._pool is None
        if first:
            self._pool = ThreadPoolExecutor(self.threads, thread_name_prefix="toktok-count")
            self._mine, self._ids = threading.local(), itertools.count()
        self._queued.append([self._pool.submit(fn, *args) for fn, args in jobs])
        if first:  # the kernels are loaded once add() returns, as when counting in line
            self._wait(self._queued[0][:1])
        while len(self._queued) > _SLICES_QUEUED:  # the text the queue holds
            self._wait(self._queued.pop(0))

    def _scan(self, texts: pa.Array) -> None:
        # Slices of about _SLICE_BYTES of the batch's own buffers (no copy), queued a few chunks
        # each for the threads: the queue holds a bounded part of the text
        off, data = _buffers(texts)
        ends = off[1:] - off[0]
        lo = 0
        while lo < len(ends):
            start = int(ends[lo - 1]) if lo else 0
            hi = max(lo + 1, int(np.searchsorted(ends, start + _SLICE_BYTES, side="right")))
            self._scan_arrays(data, off[lo : hi + 1])
            lo = hi

    def _scan_arrays(self, data: np.ndarray, off: np.ndarray) -> None:
        """Count the documents ``data[off[d]:off[d+1]]`` (valid UTF-8): in line with one thread,
        else queued for the counter's threads (``result()`` waits for them)."""
        n = off.shape[0] - 1
        if not self._tables:  # every thread's table at once (the merge's order is fixed by then)
            self._tables = [_Table(self.threads) for _ in range(self.threads)]
        kernel, ac, flags, fold, swar = _scan_tables(self.pattern)
        scan = (data, *_words64(data), off, ac, flags, fold, swar and self.swar)
        if self.threads == 1:
            _scan_chunk(self._tables[0], scan, 0, n, kernel)
            return
        # A few chunks of about equal bytes per thread, taken in turn as each thread finishes its
        # last, across slices and batches: a thread that is slowed down (by other work on the
        # machine, or harder text) does not hold up the rest, and none waits at a slice's end
        # while the next one is converted.
        m = min(n, 4 * self.threads)
        cuts = np.searchsorted(off, np.linspace(off[0], off[-1], m + 1)).tolist()
        cuts[0], cuts[-1] = 0, n
        self._enqueue([(self._count, (scan, cuts[c], cuts[c + 1], kernel)) for c in range(m)])

    def _count(self, scan: tuple, d: int, hi: int, kernel) -> None:
        """Documents d..hi-1 of ``scan`` into this thread's table (a pool thread takes the next
        table the first time it runs)."""
        tb = getattr(self._mine, "table", None)
        if tb is None:
            tb = self._mine.table = self._tables[next(self._ids)]
        _scan_chunk(tb, scan, d, hi, kernel)

    @staticmethod
    def _wait(futures: list) -> None:
        for f in futures:
            f.result()

    def _settle(self) -> None:
        """Wait for everything queued."""
        while self._queued:
            self._wait(self._queued.pop(0))

    def _drain(self) -> None:
        """Wait for everything queued; the threads end (a later ``add`` starts new ones)."""
        try:
            self._settle()
        finally:
            self.close()

    def close(self) -> None:
        """End the counting threads now, dropping what is queued and not yet counted (after an
        error; ``result()`` ends them too, once all is counted)."""
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None
        self._queued = []

    def result(self, *, views: bool = True) -> pl.DataFrame:
        """One row per distinct word: ``word`` (Binary), ``count`` (Int64). The words are handed
        to Polars as Arrow binary views (no copy) when their bytes fit one view buffer and
        ``views`` is true, else as offsets (Polars copies them); the table is the same."""
        self._drain()
        counted = [c for c in (self._reference, *self._counters) if c]
        if not counted:
            return self._scanned(views)
        frames = [_counter_frame(c) for c in counted]
        if self._tables:
            frames.insert(0, self._scanned(views))
        from ..common import sum_words

        return sum_words(frames)

    def table(self) -> pa.Table:
        """``result()`` as an Arrow table sorted by word (``word`` large_binary, ``count``
        int64): what a phase's count hands on. Built from Python values, without Polars, when
        the reference counted every word. Example: ``c.table().column("word")``."""
        self._drain()
        if not self._tables and not any(self._counters):
            items = sorted((w.encode(), n) for w, n in self._reference.items())
            return pa.table({"word": pa.array([w for w, _ in items], pa.large_binary()),
                             "count": pa.array([n for _, n in items], pa.int64())})
        if self._reference or any(self._counters):
            return self.result().sort("word").to_arrow()
        # the scanner's words alone, sorted here: 0.16 s for the bench corpus's 706k, Polars 0.27
        off, data, cnt = self._exported()
        n = len(cnt)
        keys = np.empty(n, np.int64)
        _sort_keys(off, data, keys)
        order = np.argsort(keys)
        # two halves on two threads, cut between runs of equal keys
        h = n // 2
        while 0 < h < n and keys[order[h - 1]] == keys[order[h]]:
            h -= 1
        cuts = [0, h, n] if h else [0, n]
        scratch = np.empty_like(order)
        _in_threads(lambda p: _sort_ties(off, data, keys, order, scratch, cuts[p], cuts[p + 1]), len(cuts) - 1)
        del keys, scratch
        starts = [0, int(np.diff(off)[order[:h]].sum())] if h else [0]  # each half's first byte
        out_off, out_data, out_cnt = _pages(n + 1, np.int64), _pages(max(1, len(data)), np.uint8), _pages(n, np.int64)
        out_off[0] = 0
        _in_threads(lambda p: _gather_words(off, data, cnt, order, cuts[p], cuts[p + 1], starts[p], out_off, out_data,
                                            out_cnt), len(cuts) - 1)
        del off, data, cnt, order
        word = pa.LargeBinaryArray.from_buffers(pa.large_binary(), n, [None, pa.py_buffer(out_off), pa.py_buffer(out_data)])
        count = pa.Array.from_buffers(pa.int64(), len(out_cnt), [None, pa.py_buffer(out_cnt)])
        return pa.table({"word": word, "count": count})

    def _scanned(self, views: bool) -> pl.DataFrame:
        """The scanner's words (``result``)."""
        import polars as pl

        if not self._tables:
            return pl.DataFrame({"word": [], "count": []}, schema=_empty_counts())
        kept = self._fold()
        w0 = np.cumsum([0] + kept[:, :, 0].sum(axis=1).tolist()).tolist()
        o0 = np.cumsum([0] + kept[:, :, 2].sum(axis=1).tolist()).tolist()
        if not views or o0[-1] > _VIEW_BYTES_MAX:
            # more long-word bytes than one view buffer can address: offsets, then Polars' copy
            out_off, out_data, out_cnt = self._exported(kept)
            col = pa.LargeBinaryArray.from_buffers(
                pa.large_binary(), len(out_cnt), [None, pa.py_buffer(out_off), pa.py_buffer(out_data)]
            )
            return pl.DataFrame({"word": pl.Series("word", col).cast(pl.Binary), "count": out_cnt})
        # Arrow binary views, which Polars takes as they are (no copy)
        out_cnt = _pages(w0[-1], np.int64)
        views = _pages(16 * w0[-1], np.uint8)
        vdata = _pages(max(8, o0[-1]), np.uint8)
        self._export_parts(kept, w0, o0, _export_views, views, vdata, out_cnt)
        col = pa.Array.from_buffers(pa.binary_view(), w0[-1], [None, pa.py_buffer(views), pa.py_buffer(vdata)])
        return pl.DataFrame({"word": pl.Series("word", col), "count": out_cnt})

    def _fold(self) -> np.ndarray:
        """The threads' tables folded (``_fold_tables``: per part and table, the words, bytes and
        bytes of words > 12 it keeps)."""
        if not self._folded:
            # the roomiest table first, for good: it takes the most counts, and as no count is
            # ever moved out of it, it keeps no row at 0 (its st tells what it holds)
            self._tables.sort(key=lambda t: (t.cbits, t.words), reverse=True)
            self._folded = True
        return _fold_tables(self._tables)

    def _exported(self, kept: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The scanner's words as offsets (int64), bytes and counts, in no particular order
        (``kept``: what ``_fold`` returned, if it just ran)."""
        kept = self._fold() if kept is None else kept
        w0 = np.cumsum([0] + kept[:, :, 0].sum(axis=1).tolist()).tolist()
        o0 = np.cumsum([0] + kept[:, :, 1].sum(axis=1).tolist()).tolist()
        out_off, out_data, out_cnt = _pages(w0[-1] + 1, np.int64), _pages(max(1, o0[-1]), np.uint8), _pages(w0[-1], np.int64)
        out_off[0] = 0
        self._export_parts(kept, w0, o0, _export, out_data, out_off, out_cnt)
        return out_off, out_data, out_cnt

    def _export_parts(self, kept: np.ndarray, w0: list[int], o0: list[int], write, *out) -> None:
        """``write`` (``_export`` or ``_export_views``) of each part of every table into ``out``,
        a thread a part; part p starts at row ``w0[p]`` and byte ``o0[p]``."""
        def export(p: int) -> None:
            w, o = w0[p], o0[p]
            for t in self._tables:
                w, o = write(t.rows(p), t.arena_view(), *out, w, o)
            if (w, o) != (w0[p + 1], o0[p + 1]):
                raise RuntimeError("toktok: counting tables out of step (a bug: please report it)")

        _in_threads(export, len(kept))


def _ends(arr: pa.Array) -> np.ndarray:
    """Each document's end in bytes from the first's start (the running sum of their lengths)."""
    if not len(arr):
        return np.zeros(0, np.int64)
    off = _buffers(arr)[0]
    return off[1:] - off[0]


def count_words(texts: pa.Array | pl.Series | Iterable[str], specials: Sequence[str] = (), threads: int = 0, *,
                reference_bytes: int = 0, pattern: Pattern = DEFAULT) -> pl.DataFrame:
    """Word counts of ``pattern``'s pieces over documents, identical to ``regex.findall`` + Counter.

    Returns columns ``word`` (Binary) and ``count`` (Int64), one row per distinct word, in no
    particular order. Special tokens are cut out first and never counted; ``threads=0`` uses
    every core; the first ``reference_bytes`` of text are counted by the reference (``regex``,
    see ``reference_allowance``). Example: ``count_words(["a a"]).sort("word").rows() == [(b" a", 1), (b"a", 1)]``.
    """
    counter = WordCounter(specials, threads, reference_bytes=reference_bytes, pattern=pattern)
    counter.add(texts)
    return counter.result()
