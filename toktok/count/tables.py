"""Word-count tables: a phase's word table written out as Parquet, and tables of words counted
elsewhere read in as one (``write_counts``, ``read_counts``).

A run's merges depend on its text only through its word counts, so a table of (word, count) is as
good as the text: ``toktok count`` writes the table a run would merge (``word`` binary, ``count``
int64, sorted by word; the Parquet metadata key ``toktok`` records the pattern, the special tokens
cut out, what was read and toktok's version), and ``toktok train --word-counts`` trains from
such tables, or from any with a word column (text or bytes) and an integer count column, counted
with Spark, DuckDB, Polars... Counts of disjoint parts of a corpus add up: the sum by word of
their tables is the whole's.

toktok's own table (its metadata records the run's pattern and specials) is read straight into
Arrow and NumPy when every row is as ``toktok count`` writes it (``_read_own``); any other, and
one of toktok's that breaks a rule, is read through Polars.
Reading checks every row and refuses in one line naming the file and row: a word that is not
one piece of the run's pattern (or holds a special token), an empty or null word, a count that is
not a whole number > 0, counts that stand for more than 2^63 bytes of text (they would overflow
the 64-bit counts), a table whose recorded pattern is not the run's, or whose toktok metadata is
not toktok's. (toktok's own tables, whose metadata records the run's pattern and at least its
special tokens, and the seal of their words as written, hold the pattern's pieces by
construction: their words are not cut again. A table edited since, its metadata kept, is
checked as anyone's.) A word given more than
once (in one file or several) is summed, said once as a warning. With no text, the parity check
and the compression curve read documents made of the table's words (:func:`word_documents`).
Example: ``read_counts(["counts.parquet"], pattern=DEFAULT).words.num_rows``.
"""
from __future__ import annotations

import json
import os
import shlex
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa

from ..errors import InputError
from ..patterns import BY_NAME, DEFAULT, Pattern, same
from ..store import arrow_of
from .common import PARITY_CHARS, PARITY_DOCS, PARITY_SCHEMA
from .early import digest, facts, peek, take

#: The Parquet metadata key of toktok's own tables (a JSON object).
META_KEY = b"toktok"
#: The columns a table's words and counts are read from, unless named otherwise.
WORD_COLUMN, COUNT_COLUMN = "word", "count"
#: What ``toktok count`` writes: the word table's own columns.
COUNTS_SCHEMA = pa.schema([("word", pa.binary()), ("count", pa.int64())])
#: How the parity sample's documents made of words name their source.
WORDS_SOURCE = "word-counts"

__all__ = ["COUNTS_SCHEMA", "CountsRead", "META_KEY", "TableAhead", "read_counts", "seal", "word_documents",
           "write_counts"]


def write_counts(words: pa.Table, path: str | os.PathLike, meta: dict) -> Path:
    """The word table ``words`` (word, count; sorted by word, as the count stage gives it) as a
    Parquet file at ``path`` with ``meta`` and the words' :func:`seal` under the key ``toktok`` of
    its metadata; written beside it and renamed, whole.
    Example: ``write_counts(pa.table({"word": [b"a"], "count": [3]}), "c.parquet", {"pattern": ...})``."""
    import pyarrow.parquet as pq

    path = Path(path)
    table = words.select(["word", "count"]).cast(COUNTS_SCHEMA)
    meta = {**meta, "seal": seal(table.column("word"))}
    table = table.replace_schema_metadata({META_KEY: json.dumps(meta, sort_keys=True).encode()})
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        # the words stored as they are, the counts dictionary-encoded: the words' Snappy pages took
        # half the read of a table (1.1 M words: ~45 -> ~19 ms of CPU; 9.8 -> 18 MB on disk), and
        # training from the table reads it before anything else can start
        pq.write_table(table, tmp, compression="none", use_dictionary=["count"])
        os.replace(tmp, path)
    except OSError as e:
        tmp.unlink(missing_ok=True)
        from ..errors import OutputError

        raise OutputError(f"{path}: cannot write ({e.strerror or e}); check the folder exists and is writable") from None
    return path


@dataclass
class CountsRead:
    """What ``read_counts`` read: the word table (``words``: word binary, count int64, sorted by
    word, one row per word), the files, per file the rows, words and the bytes of text its counts
    stand for (``used``: the run file's inputs), and the warnings."""

    words: pa.Table
    files: list[str]
    used: dict[str, dict[str, int]]
    warnings: list[str] = field(default_factory=list)
    prepared: object = None  # what :class:`TableAhead`'s ``prepare`` makes of the words (a Future), if anything

    @property
    def text_bytes(self) -> int:
        """Bytes of text the counts stand for (each word's bytes times its count)."""
        return sum(u["bytes"] for u in self.used.values())


class TableAhead:
    """A word-count table being read (:func:`_read_own`) in a thread of its own from now on: the
    pipeline starts it before it opens the run file (``count.start``), and :func:`read_counts`
    takes what it read (``ahead=``) when it reads that one file with those columns. ``prepare``:
    what the merge stage makes of the words (``prepare(words, counts)``, a job that its thread
    then runs, ``run()``, when it has one), which the reading does not wait for:
    ``CountsRead.prepared`` is its future (its result None when it fails: the merge stage makes
    it again and says what is wrong). It starts on the file read since the command's
    start as soon as that is read, in a thread of its own while its rows are checked
    (``count.early.peek``), and is dropped if the checks fail; else once the table is read.
    Example: ``read_counts([path], ahead=TableAhead(path, DEFAULT, []))``."""

    def __init__(self, path: str, pattern: Pattern, specials, prepare=None) -> None:
        import threading

        self.path, self.pattern, self.specials, self.prepare = path, pattern, list(specials), prepare
        self._got: CountsRead | None = None
        self._error: BaseException | None = None
        self._read_done = threading.Event()
        self._thread = threading.Thread(target=self._read, name="toktok-read-counts", daemon=True)
        self._thread.start()

    def _read(self) -> None:
        import threading
        from concurrent.futures import Future

        laying, words = None, None
        if self.prepare is not None:
            read = peek(self.path)  # (the file read since the command's start, its rows being checked)
            if read is not None and _own(self.path, read[0], self.pattern, self.specials) is not None:
                laying, words = Future(), read[1].column(0).chunk(0)
                threading.Thread(target=self._lay, args=(read[1], laying), name="toktok-lay-out", daemon=True).start()
        try:
            got = _read_own(self.path, self.pattern, self.specials)
            if got is not None and self.prepare is not None:
                if laying is None or not _same(got.words.column(0).chunk(0), words):
                    laying = Future()  # (laid out here, once read)
                else:
                    got.prepared, laying = laying, None
            self._got = got
        except BaseException as e:  # raised by result(), in the run's thread
            self._error = e
            return
        finally:
            self._read_done.set()
        if got is not None and laying is not None:
            got.prepared = laying
            self._lay(got.words, laying)

    def _lay(self, table: pa.Table, laying) -> None:
        """``prepare`` of the table's words and counts, its result (None when it fails) to
        ``laying``; then, when the result is a job (it has ``run``), run in this thread: the
        merge stage takes part in what is left of it once it waits for it."""
        made = None
        try:
            word, count = (c.chunk(0) for c in table.columns[:2])  # (each in one piece)
            made = self.prepare(word, np.frombuffer(count.buffers()[1], np.int64, len(count), count.offset * 8))
        except Exception:  # (made again by the merge stage, which says what is wrong)
            pass
        finally:
            laying.set_result(made)
        if hasattr(made, "run"):
            made.run()

    def result(self) -> CountsRead | None:
        """What ``_read_own`` gave (None: the general reading reads the table)."""
        self._read_done.wait()
        if self._error is not None:
            raise self._error
        return self._got


def _same(a: pa.Array, b: pa.Array) -> bool:
    """Whether two Arrow binary arrays are the same words in the same memory (a view of one buffer)."""
    return len(a) == len(b) and a.offset == b.offset and \
        all(x is None and y is None or x is not None and y is not None and x.address == y.address and x.size == y.size
            for x, y in zip(a.buffers(), b.buffers()))


def read_counts(paths: list[str], *, pattern: Pattern = DEFAULT, specials: list[str] | tuple = (),
                word_column: str | None = None, count_column: str | None = None,
                where: str = "--word-counts", ahead: TableAhead | None = None) -> CountsRead:
    """The word tables of ``paths`` (Parquet files, folders or globs, sorted by path) summed into
    one, every row checked (see the module docstring; InputError naming the file and row, 0-based).
    ``word_column`` / ``count_column`` name the columns (default ``word`` and ``count``).
    ``pattern`` and ``specials`` are the run's: each word must be one piece of it, with no special
    token in it. ``ahead``: the one file, being read already with them (:class:`TableAhead`).
    Example: ``read_counts(["parts/*.parquet"], pattern=NAMED["o200k"])``."""
    from .sources import resolve_sources

    files = [f.path for f in resolve_sources(list(paths))]
    for f in files:
        if not f.endswith(".parquet"):
            raise InputError(f"{f}: a word-count table must be a Parquet file ({where}); write it with "
                             "DataFrame.write_parquet or COPY ... TO 'counts.parquet'")
    if len(files) == 1 and (word_column or WORD_COLUMN, count_column or COUNT_COLUMN) == (WORD_COLUMN, COUNT_COLUMN):
        same_ahead = ahead is not None and ahead.path == files[0] and ahead.pattern is pattern and \
            ahead.specials == list(specials)
        got = ahead.result() if same_ahead else _read_own(files[0], pattern, specials)
        if got is not None:
            return got
    import polars as pl

    parts, used, trusted, total = [], {}, True, 0
    for i, f in enumerate(files):
        part, own = _read_one(f, word_column or WORD_COLUMN, count_column or COUNT_COLUMN, pattern)
        nbytes = _text_bytes(part, f, total)
        total += nbytes
        used[f] = {"rows": part.height, "words": part.height, "bytes": nbytes}
        parts.append(part.with_columns(pl.lit(i, pl.Int32).alias("file")))
        # toktok's own table, counted with the run's pattern (checked) and at least its specials cut
        # out: its words are the pattern's pieces by construction
        trusted = trusted and own is not None and set(specials) <= set(own.get("special_tokens") or [])
    table = pl.concat(parts) if len(parts) > 1 else parts[0]
    if table.height == 0:
        raise InputError(f"{', '.join(files)}: no words in the word-count table(s); {where} needs rows of "
                         "(word, count)")
    warnings = []
    once = table["word"].n_unique() == table.height
    if once:  # (the common case: toktok's own table, or one summed elsewhere)
        summed = table
    else:
        summed = table.group_by("word").agg(pl.col("count").sum(), pl.len().alias("n"), pl.col("file").first(),
                                            pl.col("row").first(), pl.col("file").slice(1, 1).first().alias("file2"),
                                            pl.col("row").slice(1, 1).first().alias("row2"))
        twice = summed.filter(pl.col("n") > 1)
        d = twice.sort("file", "row").row(0, named=True)
        warnings.append(f"{files[d['file']]}: {twice.height:,} words are given more than once (the first: "
                        f"{_shown(d['word'])} at row {d['row']} and {files[d['file2']]} row {d['row2']}); "
                        "their counts are summed")
    if not trusted:
        _check_pieces(summed, files, pattern, specials)
    # (toktok's own table, sorted by word, was read by _read_own: one that comes here may not be)
    words = summed.select("word", "count").sort("word").to_arrow().cast(COUNTS_SCHEMA)
    return CountsRead(words, files, used, warnings)


def _read_own(path: str, pattern: Pattern, specials) -> CountsRead | None:
    """``read_counts`` of one table as ``toktok count`` writes it, straight into Arrow and NumPy
    (no copy through a data frame): its metadata records the run's pattern and at least its
    special tokens and the :func:`seal` of its words (its words are the pattern's pieces by
    construction, in the order written: by word, each once), its columns are ``word`` binary and
    ``count`` int64, and every row passes: a word of at least one byte, a count > 0, their bytes
    times counts far below what 64 bits hold. None when any of that does not hold (the seal too:
    a row edited, added, removed or moved): the general reading then checks it row by row and
    names what is wrong."""
    early = take(path)  # (read, and its rows checked, from the process's start: count.early)
    if early is None:
        import pyarrow.parquet as pq

        try:
            pf = pq.ParquetFile(path)
        except (OSError, pa.ArrowException):
            return None  # (said by the general reading)
        schema = pf.schema_arrow
    else:
        schema = early[0]
    own = _own(path, schema, pattern, specials)
    if own is None:
        return None
    if early is None:
        try:
            t, found = facts(pf.read(columns=[WORD_COLUMN, COUNT_COLUMN]))
        except (OSError, pa.ArrowException):
            return None
    else:
        t, found = early[1], early[2]
    if found is None:
        return None  # (a row breaks a rule: facts)
    if own.get("seal") != found["seal"]:
        return None  # (edited since toktok wrote it, its metadata kept: its words are checked)
    used = {path: {"rows": t.num_rows, "words": t.num_rows, "bytes": found["bytes"]}}
    return CountsRead(pa.table(t.columns, schema=COUNTS_SCHEMA), [path], used)


def _own(path: str, schema: pa.Schema, pattern: Pattern, specials) -> dict | None:
    """The toktok metadata of a table whose ``schema`` is as ``toktok count`` writes it, with the
    run's ``pattern`` and at least its ``specials`` recorded; else None (the general reading)."""
    meta = (schema.metadata or {}).get(META_KEY)
    if meta is None or schema.names[:2] != [WORD_COLUMN, COUNT_COLUMN] or schema.field(0).type != pa.binary() \
            or schema.field(1).type != pa.int64():
        return None
    try:
        own = _recorded(path, meta)
    except InputError:
        return None  # (said by the general reading)
    recorded = own.get("pattern")
    if recorded is None or not same(Pattern.from_dict(recorded), pattern) or \
            not set(specials) <= set(own.get("special_tokens") or []):
        return None
    return own


def _shown(word: bytes) -> str:
    """A word in a message: its text (or bytes), cut to 40 characters."""
    try:
        r = repr(word.decode("utf-8"))
    except UnicodeDecodeError:
        r = repr(word)
    return r if len(r) <= 42 else r[:39] + "..."


def _read_one(path: str, word_column: str, count_column: str, pattern: Pattern):
    """One table's (word binary, count int64, row) as a Polars frame: its recorded pattern (if
    any) the run's, the columns there and of the right types, every count a whole number > 0,
    no null or empty word; and its toktok metadata when it is toktok's own table with its own
    columns (sorted by word), else None."""
    import polars as pl
    import pyarrow.parquet as pq

    try:
        pf = pq.ParquetFile(path)
    except (OSError, pa.ArrowException) as e:
        raise InputError(f"{path}: not a readable Parquet file ({' '.join(str(e).split())[:100]})") from None
    meta = _recorded(path, (pf.schema_arrow.metadata or {}).get(META_KEY))
    if meta is not None:
        recorded = meta.get("pattern")
        if recorded is not None and not same(rec := Pattern.from_dict(recorded), pattern):
            given = rec.name if rec.known else shlex.quote(rec.regex)  # (as a shell takes it)
            raise InputError(f"{path}: counted with the pattern {rec.label()}, not the run's {pattern.label()}; pass "
                             f"--pattern {given} or count the text again with the run's")
    names = pf.schema_arrow.names
    for col, what, flag in ((word_column, "word", "--word-column"), (count_column, "count", "--count-column")):
        if col not in names:
            raise InputError(f"{path}: no column {col!r} for the {what}s (columns: {', '.join(names[:8])}); "
                             f"name it with {flag}")
        if names.count(col) > 1:
            raise InputError(f"{path}: {names.count(col)} columns are named {col!r}; rename the others, or pick "
                             f"another column for the {what}s with {flag}")
    try:
        t = pf.read(columns=[word_column, count_column])
    except (OSError, pa.ArrowException) as e:
        raise _unreadable(pf, path, [word_column, count_column], e) from None
    word, count = t.column(word_column), t.column(count_column)
    if pa.types.is_string(word.type) or pa.types.is_large_string(word.type):
        word = word.cast(pa.large_string()).cast(pa.large_binary())
    elif not (pa.types.is_binary(word.type) or pa.types.is_large_binary(word.type)):
        raise InputError(f"{path}: column {word_column!r} is {word.type}, not text or bytes; give the words as "
                         "strings or binary")
    df = pl.from_arrow(pa.table({"word": word.cast(pa.large_binary()), "count": count})).with_row_index("row")
    bad = df.filter(pl.col("word").is_null() | (pl.col("word").bin.size() == 0))
    if bad.height:
        raise InputError(f"{path}: row {bad['row'][0]}: the word is empty or null; every row needs a word")
    df = df.with_columns(_whole_counts(df, path, count_column))
    # toktok's own table as written (its words' seal holds: not edited since) with its own columns
    own = meta if meta is not None and (word_column, count_column) == (WORD_COLUMN, COUNT_COLUMN) and \
        meta.get("seal") == seal(df["word"]) else None
    return df.select(pl.col("word").cast(pl.Binary), "count", pl.col("row").cast(pl.Int64)), own


def _unreadable(pf, path: str, columns: list[str], e: Exception) -> InputError:
    """The error for a table whose footer reads but whose data does not: the first row group that
    fails, with its rows."""
    first = 0
    for g in range(pf.metadata.num_row_groups):
        rows = pf.metadata.row_group(g).num_rows
        try:
            pf.read_row_group(g, columns=columns)
        except (OSError, pa.ArrowException) as ge:
            e = ge
            where = f"row group {g} (rows {first:,}-{first + rows - 1:,})"
            break
        first += rows
    else:
        where = "its data"
    return InputError(f"{path}: {where} cannot be read ({' '.join(str(e).split())[:100]}); the file is corrupt: "
                      "write it again")


def _whole_counts(df, path: str, column: str):
    """The count column as int64, refusing (file and row) a null, a count that is not a whole
    number, one ≤ 0 or one beyond int64."""
    import polars as pl

    c = df["count"]
    row = df["row"]
    if c.null_count():
        raise InputError(f"{path}: row {row.filter(c.is_null())[0]}: the count is null; every word needs a count > 0")
    if c.dtype.is_float():
        odd = ~c.is_finite() | (c != c.floor())
        if odd.any():
            i = odd.arg_max()
            raise InputError(f"{path}: row {row[i]}: count {c[i]} is not a whole number; counts are integers > 0")
    elif not c.dtype.is_integer():
        raise InputError(f"{path}: column {column!r} is {c.dtype}, not integers; counts are whole numbers > 0")
    low = c <= 0
    if low.any():
        i = low.arg_max()
        raise InputError(f"{path}: row {row[i]}: count {c[i]} is not more than 0; drop the row or count again")
    if c.len() and c.max() > np.iinfo(np.int64).max:  # (an empty table has no max)
        i = c.arg_max()
        raise InputError(f"{path}: row {row[i]}: count {c[i]} is beyond a 64-bit count")
    return c.cast(pl.Int64).alias("count")


#: The most bytes of text a table's counts may stand for (each word's bytes times its count, summed
#: over every table of a phase): what a 64-bit count holds. It bounds every count the merge loop
#: adds up (a word's, a pair's: at most its word's bytes less one per occurrence).
MOST_BYTES = int(np.iinfo(np.int64).max)


def _text_bytes(part, path: str, before: int) -> int:
    """The bytes of text the counts of ``part`` (a table read by ``_read_one``) stand for; InputError
    naming the file and row where they and ``before`` (the tables read before it) pass
    :data:`MOST_BYTES`: the counts would overflow as the merge loop adds them up."""
    import polars as pl

    sizes = part["word"].bin.size().cast(pl.Int64)
    if before + float((sizes.cast(pl.Float64) * part["count"].cast(pl.Float64)).sum()) < 2.0 ** 62:
        return int((sizes * part["count"]).sum())  # (exact: far from the limit)
    total = before + sum(a * b for a, b in zip(sizes.to_list(), part["count"].to_list()))
    if total > MOST_BYTES:
        i = part["count"].arg_max()
        raise InputError(f"{path}: row {part['row'][i]}: count {part['count'][i]:,}, its largest: the counts "
                         f"{'of the tables up to it ' if before else ''}stand for more than 2^63 bytes of text "
                         "(each word's bytes times its count), beyond toktok's 64-bit counts; check the count column")
    return total


def seal(words) -> str:
    """A check of a word table's words in their order (an Arrow array of binary or text words, or
    a Polars Series), recorded by ``toktok count`` (meta key ``seal``): a table edited since (a row
    added, removed, changed or moved) is read as anyone's, its words checked. A BLAKE2b digest of
    the words' lengths and bytes, without a data frame (``_read_own`` runs in a thread of its own).
    Example: ``seal(pa.array([b"a", b"bc"])) != seal(pa.array([b"ab", b"c"]))``."""
    if hasattr(words, "to_arrow"):  # (a Polars Series)
        words = words.to_arrow()
    if isinstance(words, pa.ChunkedArray):
        words = words.combine_chunks()
    # (read as they are: a cast loads pyarrow.compute, ~40 ms)
    if words.type not in (pa.binary(), pa.string(), pa.large_binary(), pa.large_string()):
        words = words.cast(pa.large_binary())
    return digest(words)


def _recorded(path: str, meta: bytes | None) -> dict | None:
    """The toktok metadata of a table (a JSON object, its ``pattern`` one :meth:`Pattern.to_dict`
    wrote, its ``special_tokens`` a list of strings); None without any; InputError naming the file
    when it holds something else."""
    if meta is None:
        return None
    try:
        d = json.loads(meta)
        why = None if isinstance(d, dict) else "not a JSON object"
    except ValueError as e:
        d, why = None, f"not JSON: {e}"
    if why is None:
        p, specials = d.get("pattern"), d.get("special_tokens")
        if p is not None and not (isinstance(p, dict) and (p.get("name") in BY_NAME or isinstance(p.get("regex"), str))
                                  and isinstance(p.get("hf", ""), str)):
            why = "its 'pattern' is not a pattern toktok recorded"
        elif specials is not None and not (isinstance(specials, list) and all(isinstance(t, str) for t in specials)):
            why = "its 'special_tokens' is not a list of strings"
    if why is not None:
        raise InputError(f"{path}: its Parquet metadata key 'toktok' is not what toktok count writes ({why}); "
                         "write the table again without that key, or count the text with toktok count")
    return d


def _check_pieces(summed, files: list[str], pattern: Pattern, specials) -> None:
    """Each word is one piece of ``pattern`` (as the count stage cuts text, special tokens cut out
    first): the words pre-tokenized as documents give back exactly themselves. The first word
    (by file and row) that does not is refused with the pieces the pattern makes of it."""
    import polars as pl

    from .scan import count_words, reference_allowance

    words = summed["word"]
    utf8 = words.cast(pl.Binary).to_arrow().cast(pa.large_binary())
    try:
        texts = utf8.cast(pa.large_string())
    except pa.ArrowInvalid:
        bad = summed.filter(~pl.col("word").map_elements(_is_utf8, return_dtype=pl.Boolean)).sort("file", "row")
        d = bad.row(0, named=True)
        raise InputError(f"{files[d['file']]}: row {d['row']}: the word {_shown(d['word'])} is not UTF-8 text; a "
                         "run's words are pieces of its text") from None
    nbytes = int(words.bin.size().sum())
    pieces = count_words(texts, specials=list(specials), reference_bytes=reference_allowance(nbytes, pattern),
                         pattern=pattern)
    if pieces.height == summed.height and int(pieces["count"].sum()) == summed.height and \
            _hash_sum(words) == _hash_sum(pieces["word"]):
        return  # as many pieces as words, each once, and the same set (its hash): each word is one piece
    found = pl.DataFrame({"word": pieces["word"]})
    bad = summed.join(found, on="word", how="anti").sort("file", "row")
    if not bad.height:  # (each word a piece; some word made more pieces, among them a word of the table)
        bad = summed.sort("file", "row")
        bad = bad.filter(pl.col("word").map_elements(lambda w: not _one_piece(w, pattern, specials),
                                                     return_dtype=pl.Boolean))
    d = bad.row(0, named=True)
    text = d["word"].decode("utf-8")
    inside = [s for s in specials if s in text]
    why = (f"it holds the special token {inside[0]!r}, which the run cuts out of the text" if inside else
           f"{pattern.label()} splits it into {[p for p in pattern.findall(text)][:6]}")
    raise InputError(f"{files[d['file']]}: row {d['row']}: the word {_shown(d['word'])} is not one piece of the run's "
                     f"pattern ({why}); count the words with the run's pattern (toktok count --pattern)")


def _hash_sum(words) -> int:
    """A hash of a set of distinct words (a Polars Series): the wrapping sum of their hashes."""
    import numpy as np

    return int(np.sum(words.hash(seed=51).to_numpy(), dtype=np.uint64))


def _is_utf8(word: bytes) -> bool:
    try:
        word.decode("utf-8")
        return True
    except UnicodeDecodeError:
        return False


def _one_piece(word: bytes, pattern: Pattern, specials) -> bool:
    text = word.decode("utf-8")
    return not any(s in text for s in specials) and pattern.one_piece(text)


#: Characters of each document made of words (:func:`word_documents`): half a text document's
#: most (``PARITY_CHARS``), about what a text run's sample holds on average (the bench corpus's 64
#: documents: 119,086 characters), so that a word-count run checks and measures as much text.
WORD_DOC_CHARS = PARITY_CHARS // 2


def word_documents(words: pa.Array, counts: np.ndarray, seed: int, docs: int = PARITY_DOCS,
                   chars: int = WORD_DOC_CHARS) -> pa.Table:
    """What the parity check and the compression curve read when a phase has no text, only word
    counts: ``docs`` documents of up to ``chars`` characters, each the table's words drawn with
    replacement in proportion to their counts (seeded) and joined as they come (PARITY_SCHEMA:
    hash = the document's number, source ``word-counts``, row = the number).
    Example: ``word_documents(pa.array([b"a", b" b"]), np.array([3, 1]), 0).num_rows == 64``."""
    n = len(words)
    if n == 0:
        return PARITY_SCHEMA.empty_table()
    rng = np.random.default_rng(seed)
    # each word drawn by count: a uniform point on the counts laid end to end (their running sum,
    # exact integers, one pass: Generator.choice with probabilities makes ~6 over 1.1 M words)
    counts = np.asarray(counts, np.int64)
    upto = np.cumsum(counts)
    total = int(upto[-1])
    if words.type != pa.binary():
        words = words.cast(pa.binary())
    offsets = np.frombuffer(words.buffers()[1], np.int32, n + 1, words.offset * 4)
    # (the bytes the counts stand for: below 2^63, as reading the table checks)
    mean = max(1.0, int(np.dot(np.diff(offsets).astype(np.int64), counts)) / total)
    per_doc = int(chars / mean) + 8
    points = rng.integers(0, total, docs * per_doc)
    order = np.argsort(points)  # (found in order, ~3x quicker than as drawn: memory in order)
    picks = np.empty_like(order)
    picks[order] = np.searchsorted(upto, points[order], side="right")
    # the drawn words' bytes back to back, gathered from the array's buffers (Arrow's take would
    # load pyarrow.compute: ~40 ms of the run's start), cut after each document's last word
    starts, sizes = offsets[picks].astype(np.int64), (offsets[picks + 1] - offsets[picks]).astype(np.int64)
    ends = np.cumsum(sizes)
    data = np.frombuffer(words.buffers()[2], np.uint8) if int(ends[-1]) else np.zeros(0, np.uint8)
    drawn = data[np.repeat(starts - (ends - sizes), sizes) + np.arange(int(ends[-1]))].tobytes()
    cut = [0, *ends[per_doc - 1::per_doc].tolist()]
    out = [drawn[cut[k]:cut[k + 1]].decode("utf-8", "replace")[:chars] for k in range(docs)]
    return pa.table([arrow_of(np.arange(docs, dtype=np.uint64)), pa.array([WORDS_SOURCE] * docs, pa.large_string()),
                     arrow_of(np.arange(docs, dtype=np.int64)), pa.array(out, pa.large_string())], schema=PARITY_SCHEMA)



def with_tables(counted, sources: list, configs: list, *, pattern: Pattern, specials, seed: int,
                word_column: str, count_column: str, ahead: TableAhead | None = None):
    """A phase's count (``counted``, the :class:`~toktok.count.common.PhaseCount` of its text
    sources, or None without any) with its word-count table sources (``sources`` resolved, their
    ``configs``: the columns of each) added: the words summed, each table's files in ``used``
    (no documents; the bytes its counts stand for), and, with no text, the parity sample made of
    the tables' words (:func:`word_documents`); and the warnings reading them gave (``ahead``: the first table's
file, being read already: :class:`TableAhead`). Example: ``with_tables(None, srcs, cfgs, pattern=p,
    specials=[], seed=0, word_column="word", count_column="count").words``."""
    import time

    from .common import PhaseCount

    t0 = time.perf_counter()
    parts, used, warnings, prepared = [], {}, [], None
    for src, cfg in zip(sources, configs):
        if not src.corpus.files:  # (each one a table an earlier source reads: sources.read_once)
            continue
        got = read_counts([f.path for f in src.corpus.files], pattern=pattern, specials=specials,
                          word_column=cfg.word_column or word_column, count_column=cfg.count_column or count_column,
                          ahead=ahead)
        parts.append(got.words)
        prepared = got.prepared
        used.update({f: {"docs": 0, "bytes": u["bytes"], "docs_seen": 0, "bytes_seen": u["bytes"]}
                     for f, u in got.used.items()})
        warnings += got.warnings
    if counted is not None:
        parts.append(counted.words)
    if len(parts) > 1:
        import polars as pl

        words = pl.concat([pl.from_arrow(p) for p in parts]).group_by("word").agg(pl.col("count").sum()) \
            .sort("word").to_arrow().cast(COUNTS_SCHEMA)
    else:  # (read_counts' order: by word; its schema as a rule: a cast loads pyarrow.compute, ~40 ms)
        words = parts[0] if parts[0].schema.equals(COUNTS_SCHEMA) else parts[0].cast(COUNTS_SCHEMA)
    if counted is not None:
        counted.words, counted.used = words, {**counted.used, **used}
        counted.seconds["count"] = counted.seconds.get("count", 0.0) + time.perf_counter() - t0
        return counted, warnings
    word, count = (c.chunk(0) if c.num_chunks == 1 else c.combine_chunks() for c in words.columns)
    parity = word_documents(word, np.frombuffer(count.buffers()[1], np.int64, len(count), count.offset * 8), seed)
    return PhaseCount(words, used, parity, {"count": time.perf_counter() - t0},
                      prepared=prepared if len(parts) == 1 else None), warnings
