"""A word-count table's file read from the process's start (``read_soon``), before the pipeline
is imported: that import holds one core for most of a quarter second (NumPy, Arrow, DuckDB,
the stages), and Parquet reads its columns without the GIL on the other meanwhile, then what
:func:`toktok.count.tables._read_own` checks of its rows is found there too (:func:`facts`,
mostly without the GIL: NumPy's loops, BLAKE2b). The count stage takes what was read
(``take``) where it would read the file itself, and reads it itself when nothing was read or the
file is no longer the one read (its size, modification time or inode changed). Whether the
table is the run's (its metadata) is asked by the reading that takes it, as ever. Standard
library only at the top (it runs before the rest is imported).
Example: ``read_soon("counts.parquet")`` then ``take("counts.parquet")``.
"""
from __future__ import annotations

import os
import threading

#: The columns of a table as ``toktok count`` writes it (``toktok.count.tables``): the only ones read.
COLUMNS = ("word", "count")

_READING: dict[str, "_Read"] = {}
_LOCK = threading.Lock()


def _key(path: str) -> str:
    return os.path.abspath(os.path.expanduser(path))


def _identity(path: str) -> tuple | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns


class _Read:
    """One file's columns ``COLUMNS`` read in a thread of their own, with its Arrow schema."""

    def __init__(self, path: str) -> None:
        self.path, self.got, self.read = path, None, None
        self.before = _identity(path)
        self._read_done = threading.Event()  # (the table read, its rows not yet checked: peek)
        self._thread = threading.Thread(target=self._read, name="toktok-read-early", daemon=True)
        self._thread.start()

    def _read(self) -> None:
        try:
            import pyarrow as pa

            reader = _reader(self.path)
            schema = reader.schema_arrow
            if schema.names[:2] != list(COLUMNS) or schema.field(0).type != pa.binary() or \
                    schema.field(1).type != pa.int64():
                return  # (not one of toktok's own: the general reading reads it)
            # (two flat columns first: their leaves are columns 0 and 1), each in one piece
            table = _whole(reader.read_all(column_indices=[0, 1], use_threads=True))
            self.read = schema, table
            self._read_done.set()
            self.got = schema, *facts(table)
        except Exception:  # (the reading that takes it says what is wrong, if anything)
            self.got = None
        finally:
            self._read_done.set()

    def result(self):
        self._thread.join()
        return self.got


def _reader(path: str):
    """Arrow's Parquet reader of ``path`` (what ``pyarrow.parquet.ParquetFile`` wraps), without
    importing ``pyarrow.parquet``: it loads ``pyarrow.fs`` and ``ssl`` (~20 ms holding the GIL
    beside the pipeline's import), which a local file does not need."""
    try:
        from pyarrow._parquet import ParquetReader
    except ImportError:  # (another layout of pyarrow: its public module)
        import pyarrow.parquet as pq

        return pq.ParquetFile(path).reader
    reader = ParquetReader()
    reader.open(path)
    return reader


def facts(table):
    """``(table, found)``: a table of the columns ``COLUMNS`` (binary words, int64 counts) with
    each column in one piece, and ``found`` = ``{"bytes": ..., "seal": ...}`` (the bytes of text
    its counts stand for, and the :func:`digest` of its words) when every row is as ``toktok
    count`` writes it: a word of at least one byte, a count > 0, no null, their bytes times counts
    far below what 64 bits hold; else None (the general reading checks it row by row and names
    what is wrong). The words' order is not checked here: a table is taken as ``toktok count``
    wrote it only when its words' digest is the seal recorded in its metadata, which holds the
    words in the order they were written (by word, each once), so a table whose rows moved is
    read as anyone's (``tables._read_own``; checking the order too cost 5 ms and importing
    ``pyarrow._compute``, 4-9 ms holding the GIL, at the run's start).
    Example: ``facts(pa.table({"word": [b"a", b"b"], "count": [2, 1]}))[1]["bytes"] == 3``."""
    import numpy as np

    table = _whole(table)
    word, count = (c.chunk(0) for c in table.columns)
    if not len(word) or word.null_count or count.null_count:
        return table, None
    counts = np.frombuffer(count.buffers()[1], np.int64, len(count), count.offset * 8)  # (no copy, no pandas)
    offsets = np.frombuffer(word.buffers()[1], np.int32, len(word) + 1, word.offset * 4)
    lengths = np.diff(offsets)
    if counts.min() <= 0 or lengths.min() == 0:
        return table, None
    # (the longest word times all the counts bounds their bytes: in two passes without a copy,
    # the exact sum in floats only when that bound is not far below 2^62)
    if float(lengths.max()) * float(counts.sum(dtype=np.float64)) >= 2.0 ** 62 and \
            float(np.dot(lengths.astype(np.float64), counts.astype(np.float64))) >= 2.0 ** 62:
        return table, None  # (near what 64-bit counts hold: checked exactly, and said, by the general reading)
    return table, {"bytes": int(np.dot(lengths.astype(np.int64), counts)), "seal": digest(word)}


def _whole(table):
    """The table's first two columns (``COLUMNS``), each in one piece."""
    import pyarrow as pa

    if all(c.num_chunks == 1 for c in table.columns[:2]) and table.num_columns == 2:
        return table
    return pa.table([c.chunk(0) if c.num_chunks == 1 else c.combine_chunks() for c in table.columns[:2]],
                    names=list(COLUMNS))


def digest(words) -> str:
    """The BLAKE2b digest of an Arrow array's words (binary or text, narrow or large offsets)
    in their order: their lengths, then their bytes (:func:`toktok.count.tables.seal`).
    Example: ``digest(pa.array([b"a", b"bc"])) != digest(pa.array([b"ab", b"c"]))``."""
    import hashlib

    import numpy as np
    import pyarrow as pa

    narrow = words.type in (pa.binary(), pa.string())
    n = len(words)
    offsets = np.frombuffer(words.buffers()[1], np.int32 if narrow else np.int64, n + 1, words.offset * (4 if narrow else 8))
    data = words.buffers()[2]
    h = hashlib.blake2b(np.diff(offsets).astype("<i8"), digest_size=16)  # (its buffer: no copy to bytes)
    if data is not None and n:
        h.update(memoryview(data)[int(offsets[0]) : int(offsets[-1])])
    return h.hexdigest()


def read_soon(path: str) -> None:
    """Start reading the columns ``word`` and ``count`` of the Parquet file ``path`` (with its
    schema) in a thread; a regular file only (a glob, a folder or a URL is read as ever)."""
    if not path.endswith(".parquet") or not os.path.isfile(path):
        return
    with _LOCK:
        reading = _READING.get(_key(path))
        if reading is None or reading.before != _identity(path):  # (once: the API asks again after the CLI)
            _READING[_key(path)] = _Read(path)


def peek(path: str):
    """``(schema, table)`` of ``path`` as :func:`read_soon` reads it, as soon as it is read and
    before its rows are checked (:func:`take` still takes it, checked), for work that may start
    on it meanwhile and is dropped when the checks fail; None as for :func:`take`."""
    with _LOCK:
        reading = _READING.get(_key(path))
    if reading is None:
        return None
    reading._read_done.wait()
    if reading.read is None or reading.before is None or _identity(path) != reading.before:
        return None
    return reading.read


def take(path: str):
    """``(schema, table, found)`` of ``path`` as :func:`read_soon` read it (``found``: what
    :func:`facts` found of its rows), once; None when it was not
    read soon, could not be, is not laid out as ``toktok count`` writes it, or the file changed
    since (its identity: device, inode, size, modification time)."""
    with _LOCK:
        reading = _READING.pop(_key(path), None)
    if reading is None:
        return None
    got = reading.result()
    if got is None or reading.before is None or _identity(path) != reading.before:
        return None
    return got


__all__ = ["digest", "facts", "peek", "read_soon", "take"]
