"""A word-count table's file read from the process's start (``read_soon``), before the pipeline
is imported: that import holds one core for most of a quarter second (NumPy, Arrow, DuckDB,
the stages), and Parquet reads its columns without the GIL on the other meanwhile. The count
stage takes what was read (``take``) where it would read the file itself
(:func:`toktok.count.tables._read_own`), and reads it itself when nothing was read or the file is
no longer the one read (its size, modification time or inode changed). Nothing here checks the
table: the reading that takes it checks it as ever. Standard library only at the top (it runs
before the rest is imported).
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
        self.path, self.got = path, None
        self.before = _identity(path)
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
            # (two flat columns first: their leaves are columns 0 and 1)
            self.got = schema, reader.read_all(column_indices=[0, 1], use_threads=True)
        except Exception:  # (the reading that takes it says what is wrong, if anything)
            self.got = None

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


def read_soon(path: str) -> None:
    """Start reading the columns ``word`` and ``count`` of the Parquet file ``path`` (with its
    schema) in a thread; a regular file only (a glob, a folder or a URL is read as ever)."""
    if not path.endswith(".parquet") or not os.path.isfile(path):
        return
    with _LOCK:
        reading = _READING.get(_key(path))
        if reading is None or reading.before != _identity(path):  # (once: the API asks again after the CLI)
            _READING[_key(path)] = _Read(path)


def take(path: str):
    """``(schema, table)`` of ``path`` as :func:`read_soon` read it, once; None when it was not
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


__all__ = ["read_soon", "take"]
