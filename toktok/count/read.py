"""The read stage: turns corpus sources into batches of documents.

Owns the supported formats (``.parquet``, ``.jsonl``, ``.jsonl.zst``, ``.txt``), UTF-8 validation
and the ``bad_utf8`` policy, and cutting big ``.txt`` files at pre-tokenizer-safe points. The
sources are resolved into files by :mod:`toktok.count.sources`; URL sources (``s3://``, ``gs://``,
``az://``, ``hf://``, ``https://``) are found and opened by :mod:`toktok.count.remote` and read by
the same readers. Reads: the source files, streamed: memory is a few times ``batch_bytes`` (or the
largest document), not the file size. Writes: nothing; it yields :class:`Batch` objects whose
``texts`` is an Arrow ``large_string`` array (no nulls), and records per-file counts in
``Corpus.stats``.

Example::

    corpus = read_corpus(["data/**/*.parquet", "notes.txt"])
    for batch in corpus.batches():
        ...  # batch.texts is an Arrow array of str
    corpus.stats["notes.txt"]  # {"docs": 1, "bytes": 40960, "skipped": 0}

Errors are :class:`~toktok.errors.InputError` (bad or missing input) and
:class:`~toktok.errors.ConfigError` (bad option), each one line naming the file and the
row/line/byte offset.
"""
from __future__ import annotations

import json
import os
import re
import stat
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterable, Iterator

import numpy as np
import pyarrow as pa

from . import remote
from .files import SourceFile, kind_of
from ..errors import ConfigError, InputError, one_line
from ..patterns import DEFAULT, Pattern
from .cuts import REGEX_MARGIN, rule, split_point
from .sample import widened
from .sources import resolve_sources

if TYPE_CHECKING:
    import pyarrow.parquet as pq

BAD_UTF8_POLICIES = ("error", "replace", "skip")
_UTF8_HINT = "fix the file or pass --bad-utf8 replace (or skip)"

# Big .txt files are cut where the pattern's pieces of the parts are those of the whole
# (toktok.count.cuts: a named pattern's rule, or a custom regex's own match ends).
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


@dataclass
class Batch:
    """Documents of one file, in file order: ``Batch("a.jsonl", 0, pa.array(["hi", "yo"], pa.large_string()))``.

    ``first_row`` is the 0-based position of the batch's first record in its file: the Parquet
    row, the JSONL line (line number - 1), or 0 for ``.txt`` (every chunk belongs to the file's
    single document). Skipped records (nulls, ``bad_utf8="skip"``) leave no entry in ``texts``,
    so ``texts[i]`` is record ``first_row + i`` only when nothing was skipped.
    """

    path: str
    first_row: int
    texts: pa.Array | pa.ChunkedArray  # large_string, no nulls
    #: With ``Corpus(label_column=NAME)``: each document's value of that column or field (None
    #: where a record has none); None for a file without such a column (text files, Parquet).
    labels: list | None = None
    #: Whether ``texts[0]`` continues the document the file's previous batch ended with (a long
    #: str in memory read in parts, :mod:`toktok.count.memory`): its parts are one document.
    continued: bool = False


def _split_point(text: str | bytes | bytearray, start: int = 0, pattern: Pattern = DEFAULT) -> int:
    """Index into ``text`` of the last safe cut at or after ``start`` (0 if none), where
    ``findall(p, t[:i]) + findall(p, t[i:]) == findall(p, t)`` for ``pattern`` p
    (:func:`toktok.count.cuts.split_point`; for GPT-4's, right after a ``"\\n"`` followed by a
    non-whitespace character). UTF-8 bytes give the same cut as a byte index.
    Example: ``_split_point("a\\n b\\nc") == 5``.
    """
    return split_point(text, pattern, start)


def _utf8_complete(data: bytes) -> int:
    """Length of the longest prefix of ``data`` that does not end inside a UTF-8 sequence."""
    for back in range(1, min(4, len(data)) + 1):
        b = data[-back]
        if b < 0x80:
            return len(data)
        if b >= 0xC0:  # lead byte: is its sequence complete?
            need = 2 if b < 0xE0 else 3 if b < 0xF0 else 4
            return len(data) if back >= need else len(data) - back
    return len(data)


class Corpus:
    """Resolved sources plus the read options; iterate with :meth:`batches`.

    ``stats`` maps each path to ``{"docs", "bytes", "skipped"}`` (documents yielded, their UTF-8
    bytes, documents dropped by ``bad_utf8="skip"``); it is filled during iteration and complete
    after it. ``label_column``: batches also carry each document's value of that Parquet column or
    JSONL field (``Batch.labels``), e.g. a language to group by.
    Example: ``sum(s["bytes"] for s in corpus.stats.values())``.
    """

    def __init__(self, files: list[SourceFile], text_column: str = "text",
                 bad_utf8: str = "error", label_column: str | None = None):
        self.files = files
        self.text_column = text_column
        self.bad_utf8 = bad_utf8
        self.label_column = label_column
        self.stats: dict[str, dict[str, int]] = {}
        #: What resolving the sources left out (files of other types, dangling links, FIFOs, folders
        #: reached twice): warning lines for the run's summary.
        self.warnings: list[str] = []

    def batches(self, batch_bytes: int = 32 << 20, *, pattern: Pattern = DEFAULT) -> Iterator[Batch]:
        """Yield the documents of every file, file by file, in batches of about ``batch_bytes``.

        A batch never mixes files; a single document bigger than ``batch_bytes`` is a batch of its
        own, except ``.txt`` files and a long str in memory, which are cut where the pre-tokenizer
        ``pattern`` cuts anyway (:mod:`toktok.count.cuts`). Example: ``next(read_corpus(["a.txt"]).batches()).texts[0]``.
        """
        if not isinstance(batch_bytes, int) or batch_bytes < 1:
            raise ConfigError(f"batch_bytes={batch_bytes!r}: must be a positive integer")
        self.stats = {}
        for f in self.files:
            st = self.stats[f.path] = {"docs": 0, "bytes": 0, "skipped": 0}
            reader = {"parquet": self._parquet, "jsonl": self._jsonl, "jsonl.zst": self._jsonl,
                      "txt": self._txt, "memory": self._memory}[f.kind]
            # Readers yield (batch, UTF-8 bytes): they know the size cheaply, and Polars'
            # str.len_bytes() on a multi-MB string costs several times its size in memory.
            for batch, nbytes in (reader(f, batch_bytes, st, pattern) if f.kind in ("txt", "memory")
                                  else reader(f, batch_bytes, st)):
                # A .txt file is one document however many chunks it is cut into.
                st["docs"] = 1 if f.kind == "txt" else st["docs"] + len(batch.texts) - batch.continued
                st["bytes"] += nbytes
                yield batch

    def _memory(self, f: SourceFile, batch_bytes: int, st: dict,
                pattern: Pattern = DEFAULT) -> Iterator[tuple[Batch, int]]:
        """Data in memory (a ``toktok.memory.MemoryFile``) reads itself, under this corpus's rules
        (a long str cut where ``pattern`` cuts)."""
        return f.read_batches(self, batch_bytes, st, pattern=pattern)

    # ---- Parquet ----------------------------------------------------------------------------

    def arrow_texts(self, f: SourceFile, batch_bytes: int = 32 << 20, *,
                    pattern: Pattern = DEFAULT) -> Iterator[pa.Array]:
        """The documents of file ``f`` as Arrow ``large_string`` arrays of valid UTF-8 without
        nulls (``bad_utf8`` applied, same errors), in file order: what :meth:`batches` yields for
        it, without the Polars conversion (Parquet: one array per read of about ``batch_bytes``;
        other kinds: per batch; ``.txt`` cut for ``pattern``). ``stats`` is not touched. The
        sample pass reads this way.
        Example: ``sum(len(a) for a in corpus.arrow_texts(corpus.files[0]))``."""
        if f.kind == "memory":  # data in memory (toktok.memory) reads itself
            yield from f.arrow_texts(self, batch_bytes, pattern=pattern)
            return
        if f.kind != "parquet":
            for batch in Corpus([f], self.text_column, self.bad_utf8).batches(batch_bytes, pattern=pattern):
                t = batch.texts
                yield t.combine_chunks() if isinstance(t, pa.ChunkedArray) else t
            return
        pf = open_parquet(f.path, self.text_column, f.footer)
        st = {"docs": 0, "bytes": 0, "skipped": 0}
        for _row, text, _rows, _labels in self._parquet_reads(pf, f, self._per_read(pf, batch_bytes), st):
            yield text

    def text_bound(self, f: SourceFile) -> int | None:
        """About the most bytes of text file ``f`` holds, known before reading it: a plain file's
        size (JSON escapes only shrink as they decode), a Parquet file's text column as its footer
        says it is uncompressed (each value's bytes and length; a dictionary-encoded column can
        hold more text than that); None when unknown (compressed JSONL, data in memory, a Parquet
        file without the column). Example: ``corpus.text_bound(corpus.files[0])``."""
        if f.kind in ("txt", "jsonl"):
            return f.size
        if f.kind != "parquet":
            return None
        md = open_parquet(f.path, self.text_column, f.footer).metadata
        leaves = [md.schema.column(j).path for j in range(md.num_columns)]
        if self.text_column not in leaves:
            return None
        ci = leaves.index(self.text_column)
        groups = range(md.num_row_groups) if f.row_groups is None else f.row_groups
        return sum(md.row_group(g).column(ci).total_uncompressed_size for g in groups)

    def _per_read(self, pf: pq.ParquetFile, batch_bytes: int) -> int:
        """Rows per read from the footer's uncompressed column size, so a read is ~batch_bytes
        whatever the document length."""
        col, md = self.text_column, pf.metadata
        leaves = [md.schema.column(j).path for j in range(md.num_columns)]
        if col in leaves:
            ci = leaves.index(col)
            raw = sum(md.row_group(g).column(ci).total_uncompressed_size
                      for g in range(md.num_row_groups))
            avg = max(1, raw // max(1, md.num_rows))
        else:
            avg = 1024
        return max(1, min(1 << 20, batch_bytes // avg))

    def _parquet(self, f: SourceFile, batch_bytes: int, st: dict) -> Iterator[tuple[Batch, int]]:
        pf = open_parquet(f.path, self.text_column, f.footer)
        label = None
        if self.label_column is not None and self.label_column in pf.schema_arrow.names:
            label = _one_column(f.path, pf.schema_arrow.names, self.label_column, "to read")
        # pack merges or splits reads into batches of ~batch_bytes
        yield from pack(f.path, self._parquet_reads(pf, f, self._per_read(pf, batch_bytes), st, label), batch_bytes)

    def _parquet_reads(self, pf: pq.ParquetFile, f: SourceFile, per_read: int, st: dict,
                       label: str | None = None) -> Iterator[tuple[int, pa.Array, np.ndarray | None, pa.Array | None]]:
        """(first row, texts, kept rows, labels) of each read of ``per_read`` rows of ``f`` (of its
        ``row_groups`` only, when it has them), as :meth:`texts_of` returns them, with the kept
        rows' values of column ``label`` (None without one); no Polars conversion (the sample pass
        takes these directly)."""
        col, md, path = self.text_column, pf.metadata, f.path
        first = np.cumsum([0] + [md.row_group(g).num_rows for g in range(md.num_row_groups)]).tolist()
        columns = list(dict.fromkeys([col] + ([label] if label else [])))
        groups = range(md.num_row_groups) if f.row_groups is None else f.row_groups
        if len(columns) == 1:  # an object in a store: the next block is fetched while one is read
            remote.plan_parquet(pf, groups, col)
        # Row group by row group, so that a corrupt page is reported with the rows it holds.
        for g in groups:
            row, end = first[g], first[g + 1]
            try:
                for rb in pf.iter_batches(batch_size=per_read, row_groups=[g], columns=columns,
                                          use_threads=False):
                    arr = rb.column(col)
                    text, rows = self.texts_of(arr, path, row, st)
                    labels = None if label is None else rb.column(label)
                    yield row, text, rows, labels if labels is None or rows is None else labels.take(pa.array(rows))
                    row += len(arr)
            except (pa.ArrowException, OSError) as e:
                raise InputError(f"{path}: cannot read Parquet row group {g} (rows {first[g]}-"
                                 f"{end - 1}) ({one_line(e)}); the file is corrupt or truncated, "
                                 "re-export it") from None

    def texts_of(self, arr: pa.Array, path: str, first_row: int,
                 st: dict) -> tuple[pa.Array, np.ndarray | None]:
        """Texts of one Arrow chunk read from ``path`` (row ``first_row`` on) as valid UTF-8
        ``large_string`` without nulls (nulls dropped, ``bad_utf8`` applied: skipped documents
        counted in ``st["skipped"]``, errors name the row), and the row offset of each kept text
        within the chunk (None: all kept). How every Arrow reader (Parquet, data in memory) sees
        text. Example: ``corpus.texts_of(pa.array(["a", None]), "x", 0, st)[1].tolist() == [0]``."""
        t = arr.type
        if pa.types.is_dictionary(t):
            arr, t = arr.dictionary_decode(), t.value_type
        out = None
        try:
            if pa.types.is_string(t) or pa.types.is_large_string(t) or _is_view(t, "string"):
                out = widened(arr)
                out = out if out.type == pa.large_string() else out.cast(pa.large_string())
                # Parquet readers do not validate UTF-8, and Polars would panic on it later.
                out.validate(full=True)
            else:  # binary: open_parquet rejected every other type
                out = arr.cast(pa.large_binary()).cast(pa.large_string())  # validates UTF-8
        except pa.ArrowInvalid:
            out = None
        if out is not None:
            if not out.null_count:
                return out, None
            keep = out.is_valid()
            return out.filter(keep), np.flatnonzero(keep.to_numpy(zero_copy_only=False))
        # Slow path, only for chunks holding invalid UTF-8: find and treat the bad rows.
        texts, rows = [], []
        for i, v in enumerate(arr.cast(pa.large_binary()).to_pylist()):
            if v is None:
                continue
            try:
                texts.append(v.decode("utf-8"))
            except UnicodeDecodeError as e:
                if self.bad_utf8 == "error":
                    if _surrogate_at(v, e.start) and any(f.path == path and f.kind == "memory" for f in self.files):
                        raise InputError(f"{path}: row {first_row + i}: a lone surrogate (such as '\\ud800') at "
                                         f"character {len(v[:e.start].decode())}, not Unicode; fix the text or "
                                         "pass bad_utf8='replace' (or 'skip')") from None
                    raise InputError(f"{path}: row {first_row + i}: invalid UTF-8 at byte "
                                     f"{e.start} of column '{self.text_column}'; "
                                     f"{_UTF8_HINT}") from None
                if self.bad_utf8 == "skip":
                    st["skipped"] += 1
                    continue
                texts.append(v.decode("utf-8", "replace"))
            rows.append(i)
        return pa.array(texts, pa.large_string()), np.array(rows, dtype=np.int64)

    # ---- JSONL ------------------------------------------------------------------------------

    def _jsonl(self, f: SourceFile, batch_bytes: int, st: dict) -> Iterator[tuple[Batch, int]]:
        col, policy, path = self.text_column, self.bad_utf8, f.path
        texts: list[str] = []
        label = self.label_column
        labels: list | None = [] if label is not None else None
        first = pending = 0
        lineno = 0
        for lineno, offset, line in _lines(path, f.kind == "jsonl.zst"):
            if lineno == 1 and line.startswith(b"\xef\xbb\xbf"):
                line, offset = line[3:], offset + 3  # a UTF-8 BOM is not part of the JSON
            if not line.strip():
                continue
            try:
                s = line.decode("utf-8")
            except UnicodeDecodeError as e:
                if policy == "error":
                    raise InputError(f"{path}:{lineno}: invalid UTF-8 at byte {offset + e.start} "
                                     f"(column {e.start + 1}); {_UTF8_HINT}") from None
                if policy == "skip":
                    st["skipped"] += 1
                    continue
                s = line.decode("utf-8", "replace")
            try:
                obj = json.loads(s)
            except ValueError as e:  # JSONDecodeError, or e.g. an integer over 4300 digits
                if isinstance(e, json.JSONDecodeError):
                    # json's messages may end in "at" ("Unterminated string starting at")
                    why = f"{e.msg.removesuffix(' at')} at column {e.colno}"
                else:
                    why = one_line(e)
                # the last line of a plain file, cut before its newline: the file was truncated
                cut = (f.kind == "jsonl" and offset + len(line) >= f.size
                       and not line.endswith((b"\r", b"}", b"]")))
                todo = ("the last line is cut off, so the file looks truncated; re-export or "
                        "re-download it, or delete that line") if cut else \
                    "each line must be one JSON object"
                raise InputError(f"{path}:{lineno}: invalid JSON ({why}); {todo}") from None
            except RecursionError:
                raise InputError(f"{path}:{lineno}: invalid JSON (nested too deeply); each line "
                                 "must be one JSON object") from None
            if not isinstance(obj, dict):
                raise InputError(f"{path}:{lineno}: expected a JSON object, got "
                                 f"{type(obj).__name__}; each line must be one JSON object")
            try:
                text = obj[col]
            except KeyError:
                keys = ", ".join(map(str, list(obj)[:10])) or "none"
                raise InputError(f"{path}:{lineno}: no field '{col}' (fields: {keys}); pass "
                                 "--text-column NAME") from None
            if text is None:  # null texts are skipped, as in Parquet
                continue
            if not isinstance(text, str):
                raise InputError(f"{path}:{lineno}: field '{col}' is {type(text).__name__}, not "
                                 "a string; pass --text-column NAME for the text field")
            # JSON may escape lone surrogates (\ud800), which are not encodable as UTF-8; only
            # lines holding such an escape pay for the check.
            if "\\u" in s and _LONE_SURROGATE.search(text):
                if policy == "error":
                    raise InputError(f"{path}:{lineno}: field '{col}' has a lone surrogate escape "
                                     f"such as \\ud800 (not valid Unicode); {_UTF8_HINT}")
                if policy == "skip":
                    st["skipped"] += 1
                    continue
                text = _LONE_SURROGATE.sub("\ufffd", text)
            if not texts:
                first = lineno - 1
            texts.append(text)
            if labels is not None:
                labels.append(obj.get(label))
            pending += len(line)  # raw line length: a cheap stand-in for the text's bytes
            if pending >= batch_bytes:
                yield _batch_of(path, first, texts, labels)
                texts, pending = [], 0
                labels = [] if labels is not None else None
        if texts:
            yield _batch_of(path, first, texts, labels)

    # ---- txt --------------------------------------------------------------------------------

    def _txt(self, f: SourceFile, batch_bytes: int, st: dict,
             pattern: Pattern = DEFAULT) -> Iterator[tuple[Batch, int]]:
        path = f.path
        if f.size <= batch_bytes:  # the common case: one read, one document, one batch
            data, off = _read_all(path), 0
            if data.startswith(b"\xef\xbb\xbf"):
                data, off = data[3:], 3  # a UTF-8 BOM is not text
            if not data:  # an empty file is no document (as an empty .jsonl has none)
                return
            piece = self._txt_piece(data, path, off, st)
            if piece is not None:
                yield Batch(path, 0, piece[0]), piece[1]
            return
        if self.bad_utf8 == "skip" and _first_bad_utf8(path) is not None:
            # Chunks are yielded as they are read, so "skip" (drop the whole document) has to
            # know up front whether the file is clean.
            st["skipped"] += 1
            return
        # Cut the raw bytes, then decode each piece: a "\n" byte always ends any UTF-8 sequence
        # (valid or not), so pieces decode exactly as the whole file would (a custom regex's cut
        # is between valid chars: cuts.regex_split_point).
        custom = rule(pattern) is None
        if custom:  # its cut is matched from the piece's start, REGEX_MARGIN before the end
            batch_bytes = max(batch_bytes, 2 * REGEX_MARGIN)
        buf = bytearray()
        base = 0  # file offset of buf[0]
        scan_from = 0  # buf[:scan_from] holds no split point
        fh = open_regular(path)
        with fh:
            while True:
                n = len(buf)
                # No name keeps the read chunk alive while a batch is out: memory ~ 3 batches.
                buf += fh.read(batch_bytes)
                if len(buf) == n:
                    break
                if base == 0 and buf[:3] == b"\xef\xbb\xbf":
                    del buf[:3]  # a UTF-8 BOM is not text
                    base = 3
                # -4: a "\n" near the old end may have been waiting for its next character.
                cut = _split_point(buf, 0 if custom else max(0, scan_from - 4), pattern)
                if not cut:  # one giant line so far: keep reading, and don't rescan this part
                    scan_from = len(buf)
                    continue
                with memoryview(buf) as mv:
                    piece = bytes(mv[:cut])  # the view must be released before the resize
                del buf[:cut]
                out = self._txt_piece(piece, path, base, st)
                del piece  # the Series shares its buffer
                if out is None:  # "skip" found bad bytes the up-front check did not see
                    raise InputError(f"{path}: file changed while being read; rerun")
                yield Batch(path, 0, out[0]), out[1]
                base += cut
                scan_from = 0
        if buf:  # (a file of only a BOM is no document, as an empty one)
            out = self._txt_piece(bytes(buf), path, base, st)
            if out is None:
                raise InputError(f"{path}: file changed while being read; rerun")
            yield Batch(path, 0, out[0]), out[1]

    def _txt_piece(self, data: bytes, path: str, base: int,
                   st: dict) -> tuple[pa.Array, int] | None:
        """One txt piece as (1-row large_string array, UTF-8 bytes), or None under "skip" if invalid.

        UTF-8 is validated by Arrow over the bytes, zero-copy: a Python str would cost up to 4
        bytes per character, and the array shares ``data``'s buffer. (A full validation checks
        UTF-8 as a cast to string does, as fast, without loading Arrow's compute module.)
        """
        offsets = pa.py_buffer(np.array([0, len(data)], dtype=np.int64))
        text = pa.Array.from_buffers(pa.large_string(), 1, [None, offsets, pa.py_buffer(data)])
        try:
            text.validate(full=True)
            return text, len(data)
        except pa.ArrowInvalid:
            pass
        text = self._decode_txt(data, path, base, st)
        if text is None:
            return None
        return pa.array([text], pa.large_string()), len(text.encode())

    def _decode_txt(self, data: bytes, path: str, base: int, st: dict) -> str | None:
        """Decode under the bad_utf8 policy; None means "skip this document"."""
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError as e:
            if self.bad_utf8 == "error":
                raise InputError(f"{path}: invalid UTF-8 at byte {base + e.start}; "
                                 f"{_UTF8_HINT}") from None
            if self.bad_utf8 == "skip":  # only small files can get here (see _txt)
                st["skipped"] += 1
                return None
            return data.decode("utf-8", "replace")


def _surrogate_at(data: bytes, at: int) -> bool:
    """Whether ``data`` holds a lone surrogate at byte ``at``, as a Python str's encoding with
    ``surrogatepass`` writes it (in-memory data). Example: ``_surrogate_at(b"a\\xed\\xa0\\x80", 1)``."""
    try:
        return len(data[at:at + 3].decode("utf-8", "surrogatepass")) == 1
    except UnicodeDecodeError:
        return False


def pack(path: str, reads: Iterable[tuple], batch_bytes: int) -> Iterator[tuple[Batch, int]]:
    """Arrow reads of one file, ``(first row, texts, kept rows[, labels])`` as
    :meth:`Corpus.texts_of` gives them, regrouped into batches of about ``batch_bytes`` (zero-copy
    slices) with their UTF-8 bytes: how Parquet files and data in memory become
    :meth:`Corpus.batches`. Example: ``pack("m", [(0, pa.array(["a"], pa.large_string()), None)], 99)``."""
    packer = _Packer(path, batch_bytes)
    for read in reads:
        yield from packer.add(*read)
    yield from packer.flush()


class _Packer:
    """Regroups Arrow text arrays (and their labels) into batches of about ``batch_bytes``."""

    def __init__(self, path: str, batch_bytes: int):
        self.path, self.limit = path, batch_bytes
        self.parts: list[pa.Array] = []
        self.labels: list[pa.Array] | None = None
        self.size = 0
        self.first = 0

    def add(self, row: int, arr: pa.Array, rows: np.ndarray | None,
            labels: pa.Array | None = None) -> Iterator[tuple[Batch, int]]:
        """Take texts read from file row ``row`` on; ``rows[i]`` is text i's offset from it."""
        if not len(arr):
            return
        nbytes = _text_bytes(arr)
        if self.size + nbytes <= self.limit:
            self._push(row + (int(rows[0]) if rows is not None else 0), arr, nbytes, labels)
            if self.size >= self.limit:
                yield from self.flush()
            return
        # Too big to append whole: cut at document boundaries by cumulative byte length (read
        # from the offsets: a pyarrow.compute call imports pandas, 0.17 s of a run's start)
        off = _offsets(arr)
        cum = off[1:] - off[0]
        start = 0
        while start < len(arr):
            room = self.limit - self.size
            base = cum[start - 1] if start else 0
            end = int(np.searchsorted(cum, base + room, side="right"))
            if end <= start:
                if self.parts:  # flush what we hold and retry with an empty batch
                    yield from self.flush()
                    continue
                end = start + 1  # one document bigger than the limit: a batch of its own
            piece = arr.slice(start, end - start)
            first = row + (int(rows[start]) if rows is not None else start)
            self._push(first, piece, int(cum[end - 1] - base),
                       None if labels is None else labels.slice(start, end - start))
            if self.size >= self.limit or end < len(arr):
                yield from self.flush()
            start = end

    def _push(self, row: int, arr: pa.Array, nbytes: int, labels: pa.Array | None) -> None:
        if not self.parts:
            self.first = row
            self.labels = None if labels is None else []
        self.parts.append(arr)
        if self.labels is not None:
            self.labels.append(labels)
        self.size += nbytes

    def flush(self) -> Iterator[tuple[Batch, int]]:
        if self.parts:
            # one array, joined here in the reading thread (the counter reads it in one piece)
            texts = self.parts[0] if len(self.parts) == 1 else pa.concat_arrays(self.parts)
            labels = None if self.labels is None else [v for a in self.labels for v in a.to_pylist()]
            yield Batch(self.path, self.first, texts, labels), self.size
        self.parts, self.size = [], 0


def _batch_of(path: str, first: int, texts: list[str], labels: list | None = None) -> tuple[Batch, int]:
    arr = pa.array(texts, pa.large_string())
    return Batch(path, first, arr, labels), _text_bytes(arr)


def _offsets(arr: pa.Array) -> np.ndarray:
    """The value offsets of a non-empty large_string array (a view of its buffer)."""
    return np.frombuffer(arr.buffers()[1], dtype=np.int64, count=len(arr) + 1, offset=arr.offset * 8)


def _text_bytes(arr: pa.Array) -> int:
    """UTF-8 bytes of a large_string array without nulls: its value buffer span."""
    if not len(arr):
        return 0
    offsets = _offsets(arr)
    return int(offsets[-1] - offsets[0])


def _is_view(t: pa.DataType, what: str) -> bool:
    f = getattr(pa.types, f"is_{what}_view", None)
    return bool(f and f(t))


def _one_column(path: str, names: list[str], col: str, what: str, fix: str = "") -> str:
    """``col``, if only one column of a file has that name; else InputError naming the file."""
    if (n := names.count(col)) > 1:
        raise InputError(f"{path}: {n} columns are named '{col}', so which one {what} is ambiguous; "
                         f"rename the others when writing the file{fix}")
    return col


def open_parquet(path: str, col: str, metadata: Any = None) -> pq.ParquetFile:
    """Open a Parquet file (a URL on its store) and check its text column ``col``; InputError
    names the file and the fix. Reading its footer costs one request for a URL, none when its
    ``metadata`` (``SourceFile.footer``) is given.
    Example: ``open_parquet("data/a.parquet", "text").metadata.num_row_groups``."""
    import pyarrow.parquet as pq  # here: a run over text files never loads Parquet's reader (~15 ms, 9 MB)

    try:
        # buffer_size streams pages instead of loading a whole column chunk (a row group can be
        # the whole file), so memory stays ~batch_bytes.
        pf = remote.parquet_file(path, metadata=metadata) if remote.is_url(path) else \
            pq.ParquetFile(path, buffer_size=1 << 20, metadata=metadata)
        schema = pf.schema_arrow
    except (pa.ArrowException, OSError) as e:
        raise InputError(f"{path}: not a readable Parquet file ({one_line(e)}); the file is "
                         "corrupt or truncated, re-export it") from None
    if col not in schema.names:
        cols = ", ".join(schema.names[:20]) + (", ..." if len(schema.names) > 20 else "")
        raise InputError(f"{path}: no column '{col}' (columns: {cols}); pass --text-column NAME")
    _one_column(path, schema.names, col, "holds the text",
                ", or pass --text-column NAME for a column of another name")
    t = schema.field(col).type
    vt = t.value_type if pa.types.is_dictionary(t) else t
    ok = any(f(vt) for f in (pa.types.is_string, pa.types.is_large_string, pa.types.is_binary,
                             pa.types.is_large_binary)) or _is_view(vt, "string") \
        or _is_view(vt, "binary")
    if not ok:
        raise InputError(f"{path}: column '{col}' has type {t}, not string; pass --text-column "
                         "NAME for a text column")
    return pf


def _lines(path: str, zst: bool) -> Iterator[tuple[int, int, bytes]]:
    """``(line number, byte offset, line without "\\n")`` of a (zstd) file, streamed.

    Offsets are into the decompressed stream for ``.zst``. A truncated or corrupt zstd stream is
    an InputError rather than silently shorter data.
    """
    lineno, offset = 0, 0
    rest: list[bytes] = []
    for chunk in _chunks(path, zst):
        if b"\n" not in chunk:
            rest.append(chunk)
            continue
        parts = chunk.split(b"\n")
        if rest:
            parts[0] = b"".join(rest) + parts[0]
        rest = [parts.pop()]
        for line in parts:
            lineno += 1
            yield lineno, offset, line
            offset += len(line) + 1
    tail = b"".join(rest)
    if tail:
        yield lineno + 1, offset, tail


def _chunks(path: str, zst: bool, size: int = 1 << 20) -> Iterator[bytes]:
    fh = open_regular(path)
    with fh:
        if not zst:
            while chunk := fh.read(size):
                yield chunk
            return
        import zstandard

        # A decompressobj per frame (not stream_reader) so a truncated last frame is detected.
        dobj = zstandard.ZstdDecompressor().decompressobj()
        fed = False  # has the current frame received input?
        while True:
            data = fh.read(size)
            if not data:
                break
            while data:
                try:
                    out = dobj.decompress(data)
                except zstandard.ZstdError as e:
                    raise InputError(f"{path}: corrupt zstd data ({one_line(e)}); re-compress "
                                     "the file") from None
                fed = True
                if out:
                    yield out
                if dobj.eof:  # frame done; the next one starts in unused_data
                    data = dobj.unused_data
                    dobj = zstandard.ZstdDecompressor().decompressobj()
                    fed = False
                else:
                    data = b""
        if fed and not dobj.eof:
            raise InputError(f"{path}: zstd stream is truncated (last frame incomplete); "
                             "re-compress or re-download the file")


def open_regular(path: str):
    """``open(path, "rb")`` for a regular file only; InputError for anything else.

    A FIFO opened for reading blocks until a writer comes (for ever), and a device may do
    anything: the open is non-blocking and the opened file is checked before it is used.
    Example: ``with open_regular("a.txt") as fh: fh.read()``; a URL opens the object on its
    store (``toktok.remote``), streamed.
    """
    if remote.is_url(path):
        try:
            return remote.open_file(path)
        except OSError as e:
            raise InputError(f"{path}: cannot open ({e.strerror or e}); check the URL and credentials") from None
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as e:
        raise InputError(f"{path}: cannot open ({e.strerror}); check permissions") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise InputError(f"{path}: not a regular file (a FIFO, socket or device); pass a data file")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def _read_all(path: str) -> bytes:
    with open_regular(path) as fh:
        try:
            return fh.read()
        except OSError as e:
            raise InputError(f"{path}: cannot read ({e.strerror}); check permissions") from None


def _first_bad_utf8(path: str, size: int = 1 << 24) -> int | None:
    """Byte offset of the first invalid UTF-8 sequence in a file, or None if it is clean."""
    base, carry = 0, b""
    fh = open_regular(path)
    with fh:
        while True:
            chunk = fh.read(size)
            data = carry + chunk
            n = len(data) if not chunk else _utf8_complete(data)
            try:
                data[:n].decode("utf-8")
            except UnicodeDecodeError as e:
                return base + e.start
            base += n
            carry = data[n:]
            if not chunk:
                return None


def read_corpus(sources: list[str], text_column: str = "text", bad_utf8: str = "error", *,
                storage_options: dict | None = None, label_column: str | None = None) -> Corpus:
    """Resolve ``sources`` and return a :class:`Corpus` to iterate; nothing is read yet except
    Parquet footers, so a missing column fails before any work.

    ``text_column`` names the Parquet column / JSONL field; ``bad_utf8`` is "error" (InputError
    naming file and byte offset), "replace" (U+FFFD) or "skip" (drop the document, counted in
    ``stats[path]["skipped"]``); ``corpus.warnings`` says what the folders and globs left out;
    ``storage_options`` go to the client of URL sources (``toktok.remote``); with
    ``label_column`` the batches also carry each document's value of that column or field
    (``Batch.labels``).
    Example: ``read_corpus(["data/"], text_column="content")``.
    """
    if bad_utf8 not in BAD_UTF8_POLICIES:
        raise ConfigError(f"bad_utf8={bad_utf8!r}: use one of {', '.join(BAD_UTF8_POLICIES)}")
    if not isinstance(text_column, str) or not text_column:
        raise ConfigError(f"text_column={text_column!r}: must be a non-empty column name")
    skipped: list[str] = []
    files = resolve_sources(sources, skipped=skipped, storage_options=storage_options)
    for f in files:
        if f.kind == "parquet":
            pf = open_parquet(f.path, text_column, f.footer)
            if remote.is_url(f.path):  # kept: the footer of an object in a store is fetched once
                f.footer = pf.metadata
    corpus = Corpus(files, text_column, bad_utf8, label_column)
    corpus.warnings = skipped
    return corpus


__all__ = ["SourceFile", "Batch", "Corpus", "read_corpus", "kind_of", "open_regular",
           "open_parquet", "pack"]

