"""In-memory sources: documents held in Python, read as a phase's source like a file.

A source may be an iterable of ``str`` (a list, a generator), a pyarrow ``Table``,
``RecordBatchReader``, ``Array``/``ChunkedArray`` or dataset, a Polars ``DataFrame``, ``LazyFrame``
(streamed with ``collect_batches``, never collected whole) or ``Series``, a pandas ``DataFrame`` or
``Series``, or a Hugging Face ``datasets.Dataset`` / ``IterableDataset`` (read as Arrow batches).
Each becomes one :class:`MemoryFile` (a :class:`~toktok.read.SourceFile` of kind ``memory`` whose
``path`` is the source's name, ``source-1`` ... unless given) in a :class:`~toktok.read.Corpus`,
so the engine reads, samples and counts it as it does a file: the text column read in Arrow
chunks, with the same null, UTF-8 and ``bad_utf8`` rules as Parquet (``Corpus.texts_of``).

A document's identity (for sampling and the parity sample) is (name, row): the name stands where a
file's path does (``MemoryFile.path``), the row is its index in the data.
Re-iterable sources (lists, tables, frames, datasets) are fingerprinted for ``resume`` by their
kind, rows and a digest of the texts read (CRC-32 of their bytes, of their lengths and of the rows
kept), computed during the pass; one-shot iterators (generators, record-batch readers) cannot be
read twice, so a run on them does not resume. Ray workers cannot see this process's memory: the
Ray engine puts the data in the cluster's object store (:mod:`toktok.count.shipped`).

A ``str`` longer than a batch (in an iterable of str) is never converted whole: it is read in
parts of about a batch, cut where the run's pattern cuts anyway (:mod:`toktok.count.cuts`, as a
big ``.txt`` file is), so its words are counted as the whole's and the memory a run holds for it
is a batch's, not the document's (the caller's own ``str`` is the caller's memory). Its parts are
one document (one row) for the statistics, the fingerprint and a full read's document ids; the
sample pass numbers them as a ``.txt`` file's parts (one row each).
Example: ``corpus_of(SourceConfig("notes", kind="memory", data=["hi", "yo"]), "text", "error")``.
"""
from __future__ import annotations

import collections.abc
import re
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import pyarrow as pa

from ..errors import ConfigError, InputError, one_line
from ..patterns import Pattern
from .cuts import REGEX_MARGIN, rule, split_point
from .read import Batch, Corpus, SourceFile, _Packer, _text_bytes

#: Rows per chunk when the size of a document is not known up front.
CHUNK_ROWS = 8192
#: Kind of the ``SourceFile`` of an in-memory source.
KIND = "memory"
#: ``MemoryFile.texts``' kept rows of a part of a long str (:class:`_Long`): its one text, row offset 0.
PART = np.zeros(1, np.int64)


def default_name(k: int) -> str:
    """The name of the k-th (1-based) unnamed in-memory source of a run: ``source-1``."""
    return f"source-{k}"


def is_memory(obj: Any) -> bool:
    """Whether ``obj`` is data in memory rather than a path (a str or ``os.PathLike``)."""
    import os

    return not isinstance(obj, (str, bytes, os.PathLike))


def _module(obj: Any) -> str:
    return type(obj).__module__.split(".")[0]


def _what(obj: Any) -> str:
    return f"{_module(obj)}.{type(obj).__name__}" if _module(obj) != "builtins" else type(obj).__name__


class _Data:
    """One in-memory object, read as Arrow chunks of its text column."""

    def __init__(self, obj: Any, name: str, column: str):
        self.obj, self.name, self.column = obj, name, column
        self.what = _what(obj)
        mod, cls = _module(obj), type(obj).__name__
        self.read = None
        self.rows: int | None = None
        self.nbytes = 0
        self.reiterable = True
        if mod == "pyarrow":
            self._arrow(obj)
        elif mod == "polars":
            self._polars(obj, cls)
        elif mod == "pandas":
            self._pandas(obj, cls)
        elif mod == "datasets":
            self._datasets(obj, cls)
        elif isinstance(obj, collections.abc.Mapping) or not isinstance(obj, collections.abc.Iterable):
            raise ConfigError(f"{name}: {self.what} is not a source; give a path, an iterable of str, or a "
                              "table (pyarrow, Polars, pandas, datasets) with a text column")
        else:
            self.reiterable = iter(obj) is not obj
            if isinstance(obj, collections.abc.Sized):
                self.rows = len(obj)
            self.read = self._strings

    # ---- the kinds of data ------------------------------------------------------------------

    def _column_of(self, names: list[str]) -> None:
        if self.column not in names:
            cols = ", ".join(map(str, names[:20])) + (", ..." if len(names) > 20 else "")
            raise InputError(f"{self.name}: no column '{self.column}' (columns: {cols}); pass text_column=NAME")

    def _arrow(self, obj: Any) -> None:
        if isinstance(obj, (pa.Array, pa.ChunkedArray)):
            arr = obj if isinstance(obj, pa.ChunkedArray) else pa.chunked_array([obj])
            self.rows, self.nbytes = len(arr), arr.nbytes
            self.read = lambda rows: _slices(arr.chunks, rows)
        elif isinstance(obj, (pa.Table, pa.RecordBatch)):
            self._column_of(obj.schema.names)
            col = obj.column(self.column)
            chunks = col.chunks if isinstance(col, pa.ChunkedArray) else [col]
            self.rows, self.nbytes = obj.num_rows, col.nbytes
            self.read = lambda rows: _slices(chunks, rows)
        elif isinstance(obj, pa.RecordBatchReader):
            self._column_of(obj.schema.names)
            self.reiterable = False
            self.read = lambda rows: (b.column(self.column) for b in obj)
        elif hasattr(obj, "to_batches") and hasattr(obj, "schema"):  # pyarrow.dataset.Dataset
            self._column_of(obj.schema.names)
            self.read = lambda rows: (b.column(0) for b in obj.to_batches(columns=[self.column], batch_size=rows))
        else:
            raise ConfigError(f"{self.name}: {self.what} is not a source; give a Table, RecordBatchReader, "
                              "dataset or Array")

    def _polars(self, obj: Any, cls: str) -> None:
        import polars as pl

        if cls == "Series":
            s = obj
            self.rows = s.len()
            self.read = lambda rows: (s.slice(i, rows).to_arrow() for i in range(0, s.len(), rows))
        elif cls == "DataFrame":
            self._column_of(obj.columns)
            s = obj.get_column(self.column)
            self.rows, self.nbytes = obj.height, int(s.estimated_size())
            # a slice at a time: the column is never converted whole
            self.read = lambda rows: (s.slice(i, rows).to_arrow() for i in range(0, s.len(), rows))
        elif cls == "LazyFrame":
            with self._lazy_reading():
                self._column_of(obj.collect_schema().names())
            if not hasattr(obj, "collect_batches"):
                raise ConfigError(f"{self.name}: reading a LazyFrame in batches needs a newer polars "
                                  "(LazyFrame.collect_batches); pip install -U polars, or collect it first")
            query = obj.select(pl.col(self.column))

            def read(rows):
                with self._lazy_reading():
                    for df in query.collect_batches(chunk_size=rows, maintain_order=True):
                        yield df.to_series(0).to_arrow()
            self.read = read
        else:
            raise ConfigError(f"{self.name}: {self.what} is not a source; give a DataFrame, LazyFrame or Series")

    @contextmanager
    def _lazy_reading(self):
        """A LazyFrame's query failing as it is read (a file it scans is missing, unreadable or
        not Parquet): InputError naming the source and Polars' cause (which names the file)."""
        import polars as pl

        try:
            yield
        except (OSError, pl.exceptions.PolarsError) as e:
            raise InputError(f"{self.name}: the LazyFrame cannot be read ({one_line(e, 200)}); check the files "
                             "it scans") from None

    def _pandas(self, obj: Any, cls: str) -> None:
        if cls == "DataFrame":
            self._column_of([str(c) for c in obj.columns])
            s = obj[self.column]
        elif cls == "Series":
            s = obj
        else:
            raise ConfigError(f"{self.name}: {self.what} is not a source; give a DataFrame or Series")
        self.rows = len(s)
        self.read = lambda rows: (_from_pandas(s.iloc[i:i + rows], self) for i in range(0, len(s), rows))

    def _datasets(self, obj: Any, cls: str) -> None:
        if cls not in ("Dataset", "IterableDataset"):
            raise ConfigError(f"{self.name}: {self.what} is not a source; give a Dataset or IterableDataset "
                              "(a DatasetDict holds several: pick a split, e.g. ds['train'])")
        names = obj.column_names
        if names is not None:
            self._column_of(list(names))
        if cls == "Dataset":
            self.rows = len(obj)
        # Arrow batches straight from the dataset's table (its indices mapping applied), no Python rows
        ds = obj.select_columns([self.column]).with_format("arrow")
        self.read = lambda rows: (t.column(0) for t in ds.iter(batch_size=rows))

    def _strings(self, rows: int, size: int = 0, pattern: Pattern | None = None) -> Iterator[pa.Array]:
        chunk: list = []
        at = held = 0
        for text in self.obj:
            if text is not None and not isinstance(text, str):
                raise InputError(f"{self.name}: row {at + len(chunk)}: expected a str, got {type(text).__name__}; "
                                 "give texts (or a table with a text column)")
            if pattern is not None and text is not None and len(text) > size and _cuttable(text):
                if chunk:
                    yield _from_strings(chunk)
                    at, chunk, held = at + len(chunk), [], 0
                yield _Long(text, size, pattern)
                at += 1
                continue
            chunk.append(text)
            held += len(text) if text is not None else 0
            if len(chunk) >= rows or (size and held >= size):  # a chunk of about a batch, whatever the lengths
                yield _from_strings(chunk)
                at, chunk, held = at + len(chunk), [], 0
        if chunk:
            yield _from_strings(chunk)

    def chunks(self, rows: int, size: int = 0, pattern: Pattern | None = None) -> Iterator[pa.Array]:
        """The text column in chunks of at most about ``rows`` rows, in row order. With a
        ``pattern``, an iterable of str is chunked by ``size`` characters too, and a str longer
        than ``size`` is a :class:`_Long`: its parts, cut where ``pattern`` cuts."""
        try:
            yield from (self._strings(rows, size, pattern) if self.read == self._strings and pattern is not None
                        else self.read(rows))
        except (InputError, ConfigError):
            raise
        except Exception as e:  # the data's own library (or the user's generator) failed: one line, cause kept
            why = " ".join(str(e).split())[:300] or type(e).__name__
            raise InputError(f"{self.name}: cannot read the {self.what} ({type(e).__name__}: {why}); check the "
                             "data (--debug shows the traceback)") from e


def _cuttable(text: str) -> bool:
    """Whether a long ``text`` may be read in parts: no lone surrogate in it (``bad_utf8`` decides
    such a document whole: "skip" drops all of it, "error" names its character)."""
    return text.isascii() or _SURROGATE.search(text) is None


_SURROGATE = re.compile("[\ud800-\udfff]")


class _Long:
    """One str longer than a batch, as the 1-row ``large_string`` arrays of its parts: each about
    ``size`` UTF-8 bytes (a part grows to the next cut when none is nearer; a custom regex's,
    at least ``2 * REGEX_MARGIN`` characters, as a ``.txt`` file's), cut where
    ``pattern``'s pieces of the parts are those of the whole (:func:`toktok.count.cuts.split_point`),
    so only one part is converted at a time.
    Example: ``[a.to_pylist() for a in _Long("a b\\nc d\\ne", 4, NAMED["cl100k"])] == [["a b\\n"], ["c d\\ne"]]``."""

    def __init__(self, text: str, size: int, pattern: Pattern):
        self.text, self.size, self.pattern = text, size, pattern

    def __iter__(self) -> Iterator[pa.Array]:
        text, n, pos = self.text, len(self.text), 0
        chars = max(1, self.size if text.isascii() else self.size // 4)  # at most ~size UTF-8 bytes
        if rule(self.pattern) is None:  # a custom regex's cut is REGEX_MARGIN before the window's end
            chars = max(chars, 2 * REGEX_MARGIN)
        while n - pos > chars:
            w, cut = chars, 0
            while pos + w < n:
                window = text[pos:pos + w]
                cut = split_point(window, self.pattern)
                del window
                if cut:
                    break
                w *= 2  # no cut yet: one giant piece so far, look further
            if not cut:
                break
            yield _from_strings([text[pos:pos + cut]])
            pos += cut
        yield _from_strings([text[pos:]])


def _slices(chunks: list, rows: int) -> Iterator[pa.Array]:
    for c in chunks:
        for i in range(0, len(c), rows):
            yield c.slice(i, rows)


def _from_strings(texts: list) -> pa.Array:
    try:
        return pa.array(texts, pa.large_string())
    except UnicodeEncodeError:
        # lone surrogates ("\ud800") are not Unicode: kept as bytes, so that bad_utf8 decides
        return pa.array([None if t is None else t.encode("utf-8", "surrogatepass") for t in texts],
                        pa.large_binary())


def _from_pandas(s: Any, data: _Data) -> pa.Array:
    try:
        return pa.array(s, from_pandas=True)
    except (pa.ArrowException, TypeError, UnicodeEncodeError):
        return _from_strings([None if t is None or t != t else t for t in s.tolist()])


def _check_type(arr: pa.Array, data: _Data) -> None:
    t = arr.type
    vt = t.value_type if pa.types.is_dictionary(t) else t
    if not (pa.types.is_string(vt) or pa.types.is_large_string(vt) or pa.types.is_binary(vt)
            or pa.types.is_large_binary(vt) or pa.types.is_null(vt)
            or str(vt) in ("string_view", "binary_view")):
        raise InputError(f"{data.name}: column '{data.column}' has type {t}, not string; pass text_column=NAME "
                         "for a text column")


class MemoryFile(SourceFile):
    """An in-memory source as a file of a ``Corpus``: ``path`` is its name, ``size`` the bytes of
    its text column when known (else 0). ``fingerprint()`` is its entry in a phase's fingerprint
    for ``resume``; its digest is filled in when a pass over the data completes."""

    def __init__(self, data: _Data):
        super().__init__(data.name, KIND, int(data.nbytes))
        self.data = data
        self.first_row = 0  # the row of the data's first row in its source (a Ray unit's rows: toktok.count.shipped)
        self._fp: list = [data.name, KIND, data.what, data.rows, None]

    @property
    def reiterable(self) -> bool:
        return self.data.reiterable

    def fingerprint(self, now: bool = False) -> list:
        """``[name, "memory", type, rows, digest]``: the digest is that of the last complete pass
        (None before one); ``now`` reads the data once to compute it (``resume``)."""
        if now and self._fp[-1] is None:
            for _ in self.texts(32 << 20):
                pass
        return self._fp

    def texts(self, batch_bytes: int, st: dict | None = None, policy: Corpus | None = None,
              pattern: Pattern | None = None) -> Iterator[tuple[int, pa.Array, np.ndarray | None]]:
        """(first row, texts, kept rows) of each chunk, as ``read.pack`` takes them:
        ``large_string`` without nulls, ``bad_utf8`` applied (``policy``'s). With a ``pattern``, a
        str longer than ``batch_bytes`` comes as its parts (:class:`_Long`): each
        ``(row, 1-row texts, PART)``, all with the document's row."""
        st = st if st is not None else {"docs": 0, "bytes": 0, "skipped": 0}
        policy = policy or Corpus([self], self.data.column)
        rows = CHUNK_ROWS
        if self.data.rows and self.data.nbytes:
            rows = max(1, min(1 << 20, batch_bytes // max(1, self.data.nbytes // max(1, self.data.rows))))
        crc_data = crc_lens = crc_rows = 0
        row = self.first_row
        if not self.reiterable and getattr(self, "_read_once", False):
            raise InputError(f"{self.path}: a {self.data.what} can be read only once, and was; give a list, a "
                             "table or a DataFrame to read it again")
        self._read_once = True
        for arr in self.data.chunks(rows, batch_bytes, pattern):
            if isinstance(arr, _Long):
                total = 0
                for part in arr:
                    text, _ = policy.texts_of(part, self.path, row, st)  # (no surrogate: nothing to drop)
                    offs = np.frombuffer(text.buffers()[1], dtype=np.int64, count=2, offset=text.offset * 8)
                    crc_data = zlib.crc32(memoryview(text.buffers()[2])[offs[0]:offs[1]], crc_data)
                    total += int(offs[1] - offs[0])
                    yield row, text, PART
                    del part, text
                crc_lens = zlib.crc32(np.array([total], np.int64).tobytes(), crc_lens)  # as the whole's
                crc_rows = zlib.crc32(np.array([row], np.int64).tobytes(), crc_rows)
                row += 1
                continue
            if isinstance(arr, pa.ChunkedArray):
                arr = arr.combine_chunks() if arr.num_chunks != 1 else arr.chunk(0)
            _check_type(arr, self.data)
            n = len(arr)
            if pa.types.is_null(arr.type):
                arr = pa.nulls(n, pa.large_string())
            text, kept = policy.texts_of(arr, self.path, row, st)
            if len(text):
                offs = np.frombuffer(text.buffers()[1], dtype=np.int64, count=len(text) + 1, offset=text.offset * 8)
                data = text.buffers()[2]
                crc_data = zlib.crc32(memoryview(data)[offs[0]:offs[-1]] if data is not None else b"", crc_data)
                crc_lens = zlib.crc32(np.diff(offs).tobytes(), crc_lens)
                at = (np.arange(row, row + n, dtype=np.int64) if kept is None else kept.astype(np.int64) + row)
                crc_rows = zlib.crc32(at.tobytes(), crc_rows)
            yield row, text, kept
            row += n
        self._fp[3] = row
        self._fp[4] = f"{crc_data:08x}{crc_lens:08x}{crc_rows:08x}"

    def read_batches(self, corpus: Corpus, batch_bytes: int, st: dict, *,
                     pattern: Pattern | None = None) -> Iterator[tuple[Batch, int]]:
        """``Corpus.batches``' reader for this source: batches of about ``batch_bytes``; a long str
        cut for ``pattern`` is a batch per part (``Batch.continued`` after its first)."""
        packer = _Packer(self.path, batch_bytes)
        last = None
        for row, text, kept in self.texts(batch_bytes, st, corpus, pattern):
            if kept is PART:
                yield from packer.flush()
                yield Batch(self.path, row, text, continued=last == row), _text_bytes(text)
                last = row
            else:
                yield from packer.add(row, text, kept)
        yield from packer.flush()

    def arrow_texts(self, corpus: Corpus, batch_bytes: int, *, pattern: Pattern | None = None) -> Iterator[pa.Array]:
        """``Corpus.arrow_texts`` for this source (the sample pass): a long str cut for ``pattern``
        as its parts, each an array of its own (numbered as rows by the sample, as a ``.txt``'s)."""
        for _row, text, _kept in self.texts(batch_bytes, None, corpus, pattern):
            yield text


def corpus_of(src: Any, text_column: str, bad_utf8: str, *, resume: bool = False) -> Corpus:
    """The ``Corpus`` of one in-memory source (a ``SourceConfig`` of kind ``memory``): one
    :class:`MemoryFile`; ``resume`` computes its digest now (one read of the data) so that the
    interrupted run's fingerprint can be compared. Fails on a missing or non-text column at once."""
    f = MemoryFile(_Data(src.data, src.path, src.text_column or text_column))
    corpus = Corpus([f], src.text_column or text_column, bad_utf8)
    if resume:
        f.fingerprint(now=True)
    return corpus


def check_sources(phases: list, *, resume: bool, engine: str) -> None:
    """What a run with in-memory sources cannot do, refused before any work: ``resume`` on a
    one-shot iterator, and one one-shot iterator given twice (the second read would find it empty).
    (``engine`` is the run's: the Ray engine ships the data to its cluster, :mod:`toktok.count.shipped`.)"""
    seen: dict[int, str] = {}
    for ph in phases:
        for src in ph.sources:
            if getattr(src, "kind", None) != KIND:
                continue
            one_shot = _one_shot(src.data)
            if one_shot and resume:
                raise ConfigError(f"resume=True: {src.path} is a one-shot {_what(src.data)}, which cannot be read "
                                  "again; pass a list, a Table or a DataFrame to resume, or start over with force=True")
            if one_shot and id(src.data) in seen:
                raise ConfigError(f"{src.path}: the same one-shot {_what(src.data)} as {seen[id(src.data)]}; it can "
                                  "be read only once, so give it once (or a list, which can be read again)")
            seen[id(src.data)] = src.path


def _one_shot(obj: Any) -> bool:
    if isinstance(obj, pa.RecordBatchReader):
        return True
    if _module(obj) in ("pyarrow", "polars", "pandas", "datasets"):
        return False
    return isinstance(obj, collections.abc.Iterator)


__all__ = ["MemoryFile", "corpus_of", "check_sources", "default_name", "is_memory", "KIND"]
