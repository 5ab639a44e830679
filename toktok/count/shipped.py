"""Data in memory sent to a Ray cluster: how the Ray engine (:mod:`toktok.count.ray`) reads an
in-memory source (:mod:`toktok.count.memory`) on its workers, with the local engine's result.

Owns the shipping. A table (pyarrow ``Table``/``RecordBatch``/``Array``/``ChunkedArray``, Polars
``DataFrame``/``Series``, pandas ``DataFrame``/``Series``) is put in the cluster's object store once,
its text column only, by reference (``ray.put``), and each work unit reads a range of its rows there
(several units only when the column has no nulls and ``bad_utf8`` is not ``skip``, so that a
document's place among the texts read is its row, as for Parquet row-group ranges). Anything else
(a list or generator of ``str``, a ``LazyFrame``, a ``datasets`` object, a record-batch reader) is
read on the driver once, in batches of about ``batch_bytes`` checked as the local engine checks
them, and each batch is put in the object store; a unit is a run of batches. Either way the driver
reads the data once more for its fingerprint (``MemoryFile.fingerprint``), so that the run file
records the source as a local run does. Reads nothing from disk; writes only to the object store.
Example: ``payloads = ship(ray, f, corpus, unit_bytes=64 << 20, batch_bytes=32 << 20)``.
"""
from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa

from .memory import KIND, MemoryFile, _Data, _module
from .read import Batch, Corpus, SourceFile, pack

#: The kinds of data put in the object store as they are (their text column), by reference.
BY_REFERENCE = {("pyarrow", "Table"), ("pyarrow", "RecordBatch"), ("pyarrow", "Array"), ("pyarrow", "ChunkedArray"),
                ("polars", "DataFrame"), ("polars", "Series"), ("pandas", "DataFrame"), ("pandas", "Series")}


def _column(obj: Any, column: str) -> Any:
    """The object restricted to its text column (a frame stays a frame of one column)."""
    mod, cls = _module(obj), type(obj).__name__
    if cls in ("Table", "RecordBatch"):
        return obj.select([column])
    if mod == "polars" and cls == "DataFrame":
        return obj.select(column)
    if mod == "pandas" and cls == "DataFrame":
        return obj[[column]]
    return obj


def _slice(obj: Any, lo: int, hi: int) -> Any:
    if _module(obj) == "pandas":
        return obj.iloc[lo:hi]
    return obj.slice(lo, hi - lo)


def _nulls(obj: Any, column: str) -> int:
    mod, cls = _module(obj), type(obj).__name__
    if mod == "pyarrow":
        col = obj.column(column) if cls in ("Table", "RecordBatch") else obj
        return col.null_count
    if mod == "polars":
        return (obj.get_column(column) if cls == "DataFrame" else obj).null_count()
    return int((obj[column] if cls == "DataFrame" else obj).isna().sum())


def ship(ray, f: MemoryFile, corpus: Corpus, unit_bytes: int, batch_bytes: int) -> list[tuple[int, float, tuple]]:
    """An in-memory source as work units: (first text index, share of the source, payload) each;
    ``open_payload`` turns a payload back into a one-file Corpus on a worker. Computes the source's
    fingerprint on the way (the driver's read)."""
    data, column = f.data, f.data.column
    key = (_module(data.obj), type(data.obj).__name__)
    if key in BY_REFERENCE:
        obj = _column(data.obj, column)
        rows = data.rows or 0
        ref = ray.put(obj)
        f.fingerprint(now=True)
        per = max(1, rows * unit_bytes // max(1, data.nbytes)) if data.nbytes else rows or 1
        if corpus.bad_utf8 == "skip" or rows <= per or _nulls(data.obj, column):
            cuts = [(0, rows)]
        else:
            cuts = [(lo, min(rows, lo + per)) for lo in range(0, rows, per)]
        return [(lo, (hi - lo) / max(1, rows), ("table", ref, data.what, lo, hi)) for lo, hi in cuts]
    # read here once, in checked batches; each batch to the object store
    units, refs, size, first, kept, skipped = [], [], 0, 0, 0, 0
    st = {"docs": 0, "bytes": 0, "skipped": 0}
    total = max(1, f.size)
    for row, text, rows in f.texts(batch_bytes, st, corpus):
        refs.append(ray.put((row, text, rows)))
        size += text.nbytes
        kept += len(text)
        if size >= unit_bytes:
            units.append((first, size / total, ("batches", refs, st["skipped"] - skipped)))
            refs, size, first, skipped = [], 0, kept, st["skipped"]
    if refs or not units:
        units.append((first, size / total, ("batches", refs, st["skipped"] - skipped)))
    return units


class ShippedFile(SourceFile):
    """A run of checked batches of an in-memory source, read from the object store on a worker:
    ``(first row, texts, kept rows)`` each, as ``MemoryFile.texts`` yielded them on the driver."""

    def __init__(self, name: str, parts: list[tuple[int, pa.Array, np.ndarray | None]], skipped: int):
        super().__init__(name, KIND, int(sum(t.nbytes for _, t, _ in parts)))
        self.parts, self.skipped = parts, skipped

    def read_batches(self, corpus: Corpus, batch_bytes: int, st: dict, *, pattern=None) -> Iterator[tuple[Batch, int]]:
        st["skipped"] += self.skipped
        return pack(self.path, self.parts, batch_bytes)

    def arrow_texts(self, corpus: Corpus, batch_bytes: int, *, pattern=None) -> Iterator[pa.Array]:
        for _row, text, _rows in self.parts:
            yield text


def open_payload(ray, name: str, payload: tuple, text_column: str, bad_utf8: str) -> Corpus:
    """The one-file Corpus of a unit's payload (:func:`ship`), on a worker."""
    if payload[0] == "table":
        _, ref, _what, lo, hi = payload
        f = MemoryFile(_Data(_slice(ray.get(ref), lo, hi), name, text_column))
        f.first_row = lo
    else:
        _, refs, skipped = payload
        f = ShippedFile(name, list(ray.get(refs)) if refs else [], skipped)
    return Corpus([f], text_column, bad_utf8)


__all__ = ["ship", "open_payload", "ShippedFile", "BY_REFERENCE"]
