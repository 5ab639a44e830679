"""Look inside a run: SQL views over ``run.duckdb``, the compression curve, token usage, phase gains.

Reads a run's stored tables (``meta``, ``inputs``, ``words``, ``merges``, ``vocab``, ``stages``);
writes only derived things into the same file: the views of ``toktok/sql/insight_views.sql``
(``vocab_text``, ``merges_text``, ``words_text``, ``sources``, ``phases``, ``runs``,
``vocab_usage``) and the tables ``compression``, ``token_usage`` and ``word_gains``. Views are
stored in the file, so the stock ``duckdb`` package sees them without importing toktok.

A run is given as an output folder, its ``run.duckdb``, an open DuckDB connection or the
pipeline's :class:`~toktok.store.RunStore` (before it closes the file); every statement goes
through ``RunStore`` (``toktok/sql/``), and the measures shared with ``toktok eval`` are in
:mod:`toktok.insight.measure`. Example::

    add_views("out/demo")                                   # views in the file
    compression_curve("out/demo", texts, by=langs)          # bytes/token after every k merges
    word_gains("out/demo")                                  # words that gained from each phase
    query("out/demo", "select * from phases")               # a pyarrow Table
"""
from __future__ import annotations

import json
import os
import re
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, NamedTuple, Union

import numpy as np
import pyarrow as pa

from ..errors import ConfigError, QueryError, ToktokError
from ..rundir import RUN_FILE, companion_name
from ..statements import sql
from ..store import INSIGHT_TABLES, RunStore, arrow_of, duckdb, python_layer
from . import measure
from .measure import ALL

RunLike = Union[str, os.PathLike, duckdb.DuckDBPyConnection, RunStore]

#: The views ``add_views`` creates and the tables it creates empty when missing.
VIEWS = ("vocab_text", "superwords", "merges_text", "words_text", "sources", "phases", "runs", "vocab_usage")
TABLES = INSIGHT_TABLES
#: Where the ready queries ship: package data (``sql/`` at the top of a source checkout points here).
READY_DIR = Path(__file__).resolve().parent.parent / "sql" / "ready"
#: Folders searched for ready queries by name (``toktok sql RUN top_merges``): ./sql (queries of
#: one's own), then the ones toktok ships.
READY_DIRS = (Path("sql"), READY_DIR)


# ---------------------------------------------------------------------------------------------
# Opening a run
# ---------------------------------------------------------------------------------------------


def run_path(run: str | os.PathLike) -> Path:
    """The ``run.duckdb`` of an output folder (or the file itself, or of a ``.tiktoken`` whose run
    is in the ``NAME.toktok`` folder beside it); ToktokError if there is none."""
    p = Path(run)
    if p.is_file() and p.suffix == ".tiktoken":
        comp = p.parent / companion_name(p.name)
        p = comp if comp.is_dir() else p.parent
    if p.is_dir():
        p = p / RUN_FILE
    if not p.is_file():
        raise ToktokError(f"{p}: no run file here; pass a toktok output folder or its run.duckdb")
    with open(p, "rb") as f:
        head = f.read(12)
    if head[8:12] != b"DUCK":  # DuckDB's magic: anything else is not a run file (DuckDB's error would not say so)
        raise ToktokError(f"{p}: not a DuckDB file, so not a run file; pass a toktok output folder or its run.duckdb")
    return p


@contextmanager
def _connect(run: RunLike, read_only: bool) -> Iterator[RunStore]:
    if isinstance(run, RunStore):
        yield run
        return
    if isinstance(run, duckdb.DuckDBPyConnection):
        yield RunStore.over(run)
        return
    p = run_path(run)
    try:
        store = RunStore.open(p, read_only=read_only)
    except duckdb.Error as e:
        raise ToktokError(f"{p}: cannot open the run file ({_first_line(e)})") from None
    try:
        yield store
    finally:
        store.con.close()


@contextmanager
def _sandbox(run: str | os.PathLike) -> Iterator[RunStore]:
    """The run file in :meth:`RunStore.sandbox`: read-only, no other file readable or writable."""
    store = RunStore.sandbox(run_path(run))
    try:
        yield store
    finally:
        store.con.close()


def _first_line(e: BaseException) -> str:
    return (str(e).strip().splitlines() or [type(e).__name__])[0]


#: The columns of the compression curve's rows and of the word gains (as Polars' frames of them).
_CURVE_SCHEMA = pa.schema([("merges", pa.int32()), ("vocab_size", pa.int32()), ("subset", pa.large_string()),
                           ("docs", pa.int64()), ("bytes", pa.int64()), ("tokens", pa.int64()),
                           ("bytes_per_token", pa.float64())])
_GAINS_SCHEMA = pa.schema([("phase", pa.large_string()), ("word", pa.large_binary()), ("count", pa.int64()),
                           ("tokens_before", pa.int32()), ("tokens_after", pa.int32())])


def add_views(con: RunLike, temp: bool = False) -> None:
    """Create the insight views (and the empty ``compression``/``token_usage``/``word_gains``
    tables when missing) in a run file. Idempotent.

    ``temp=True`` makes them temporary (this connection only), which works on a read-only
    connection: ``toktok sql`` and ``toktok show`` use it for runs made before the views existed.
    Example: ``add_views(store)`` before ``store.close()``.
    """
    with _connect(con, read_only=temp) as store:
        store.add_insight(temp=temp)


def _add_missing_views(store: RunStore) -> None:
    """``add_views`` unless the file has them all (the pipeline adds them once, then writes the
    curve and the gains)."""
    if not store.insight_added and not set(VIEWS + TABLES) <= store.table_names():
        store.add_insight()


def _ensure_views(store: RunStore) -> None:
    if not set(VIEWS + TABLES) <= store.table_names():
        store.add_insight(temp=True)


# ---------------------------------------------------------------------------------------------
# The vocabulary as it was after k merges: rank prefixes
# ---------------------------------------------------------------------------------------------


class Known(NamedTuple):
    """What the pipeline's insight step knows in memory of a run whose last checkpoint is still
    being stored (``toktok.resume.Pending``), so that it reads neither the merges nor the words
    that checkpoint writes: the vocabulary as the run file stores it (``vocab``: the table of
    :meth:`~toktok.store.RunStore.add_vocab`, columns id, token, kind), each phase that learned
    merges, in order, with their number (``phases``; none of them reused a token: merge k then
    adds id ``base + k``), and the most frequent words of the phases whose words may not be
    stored yet (``top``: phase -> :func:`top_rows`).
    Example: ``Known(store.add_vocab(tokens, [], kinds, phases), [("main", 500)], {})``."""

    vocab: pa.Table
    phases: list[tuple[str, int]]
    top: dict[str, pa.Table] = {}


def top_rows(words: pa.Array, counts, n: int) -> pa.Table:
    """The rows (word, count) that ``toktok/sql/top_words.sql`` returns for a phase whose word
    table is ``words`` (binary) with ``counts`` (distinct words), found in memory: the ``n`` most
    frequent, most frequent first, ties by their bytes. Only the words at or above the n-th
    largest count are sorted with their bytes (as the query does), taken out with NumPy, given to
    Arrow as buffers (its compute functions, and numpy.ma that pa.array imports, take ~65 ms).
    Example: ``top_rows(pa.array([b"b", b"a"]), np.array([1, 1]), 1)["word"].to_pylist() == [b"a"]``."""
    counts = np.asarray(counts, dtype=np.int64)
    keep = _at_least(counts, n)
    wide = np.int64 if pa.types.is_large_binary(words.type) else np.int32
    offsets = np.frombuffer(words.buffers()[1], wide)[words.offset : words.offset + len(words) + 1].astype(np.int64)
    data = words.buffers()[2]
    data = np.frombuffer(data, np.uint8) if data is not None and data.size else np.zeros(0, np.uint8)
    starts, lens = offsets[keep], offsets[keep + 1] - offsets[keep]
    ends = np.cumsum(lens)
    chosen = data[np.repeat(starts - (ends - lens), lens) + np.arange(int(ends[-1]) if len(ends) else 0)]
    picked = pa.Array.from_buffers(pa.large_binary(), len(keep), [None, pa.py_buffer(np.concatenate([[0], ends])),
                                                                   pa.py_buffer(chosen.tobytes())])
    texts, kept = picked.to_pylist(), counts[keep]
    by_bytes = np.array(sorted(range(len(texts)), key=texts.__getitem__), dtype=np.int64)
    order = by_bytes[np.argsort(-kept[by_bytes], kind="stable")][:max(n, 0)]  # (by bytes within a count)
    return pa.table({"word": pa.array([texts[i] for i in order], pa.large_binary()),
                     "count": arrow_of(kept[order])})


def _at_least(counts: np.ndarray, n: int) -> np.ndarray:
    """The indices of the counts at least the ``n``-th largest, ascending, found without copying
    ``counts`` whole (it runs beside the merge loop, at its peak of memory): a threshold read off
    a strided sample first, lowered until ``n`` counts reach it, then the exact cut among those."""
    if n <= 0:
        return np.zeros(0, np.int64)
    if n >= len(counts):
        return np.arange(len(counts))
    step = max(1, len(counts) // 65536)
    sample = np.sort(counts[::step])
    at = len(sample) - 1 - min(len(sample) - 1, 2 * -(-n // step))
    while True:
        cand = np.flatnonzero(counts >= sample[at])
        if len(cand) >= n or at == 0:
            break
        at //= 2
    if len(cand) < n:  # (below the sample's smallest count: every word)
        cand = np.arange(len(counts))
    got = counts[cand]
    cut = np.partition(got, len(got) - n)[len(got) - n]
    return cand[got >= cut]


class _Prefixes:
    """The run's tokens by id and, per merge count k, the vocabulary size after k merges.

    Ranks are ids and merges add ids at the end, so the first ``size(k)`` tokens are a valid
    tiktoken vocabulary: the tokenizer as it was after k merges. ``segment`` encodes pieces of
    text with it as tiktoken does (whole-piece lookup, then rank-BPE: ``merge.segment``, held
    equal to tiktoken by the tests), without building a tiktoken encoding per k. ``ranges``:
    each phase's first and last merge (``prefixes.phase_ranges``). ``known``: the vocabulary and
    the merges from memory instead of the run file (:class:`Known`).
    """

    def __init__(self, store: RunStore, reference: bool = False, known: Known | None = None):
        self.reference = reference  # a small run's: see merge.Segmenter
        if known is not None:
            vocab = known.vocab
            special = vocab["kind"].to_numpy(zero_copy_only=False) == "special"
        else:
            vocab = store.arrow("prefixes.vocab")
            special = vocab["special"].to_numpy(zero_copy_only=False)
        ranked = np.flatnonzero(~special)
        if not len(ranked):
            raise ToktokError("the run file has no vocabulary (the run did not finish training)")
        n = int(vocab["id"][int(ranked[-1])].as_py()) + 1  # specials after the last rank are not ranks
        if not np.array_equal(vocab["id"].to_numpy()[:n], np.arange(n)):
            raise ToktokError("the run file's vocabulary ids are not 0..N-1; the run file is damaged")
        # the tokens' bytes as the merge stage lays them out (no Python object per token)
        col = vocab["token"].combine_chunks().slice(0, n)
        if not pa.types.is_binary(col.type):  # (DuckDB's BLOB is binary: no cast, which loads Arrow's compute)
            col = col.cast(pa.large_binary())
        wide = np.int64 if pa.types.is_large_binary(col.type) else np.int32
        offsets = np.frombuffer(col.buffers()[1], wide)[col.offset : col.offset + n + 1].astype(np.int64)
        data = col.buffers()[2]
        tdata = np.frombuffer(data, np.uint8).copy() if data is not None and data.size else np.zeros(1, np.uint8)
        tstart, tlen = offsets[:-1].copy(), np.diff(offsets)
        pinned = np.flatnonzero(special[:n])
        if len(pinned):
            # special tokens pinned inside the id range (from a warm start) hold no rank: their
            # ids get bytes that no UTF-8 text holds (0xFF ...), so that nothing encodes to them
            extra = b"".join(b"\xff" + int(i).to_bytes(4, "big") for i in pinned)
            tstart[pinned] = tdata.shape[0] + 5 * np.arange(len(pinned))
            tlen[pinned] = 5
            tdata = np.concatenate([tdata, np.frombuffer(extra, np.uint8)])
        self._tables = (tdata, tstart, tlen)
        if known is not None:  # (no merge reused a token: merge k added id base + k)
            new = sum(m for _, m in known.phases)
            ids = np.arange(n - new, n, dtype=np.int64)
            self.ranges, k = [], 0
            for phase, m in known.phases:
                self.ranges.append((phase, k, k + m - 1))
                k += m
        else:
            ids = store.run("prefixes.merge_tokens").fetchnumpy()["token_id"]
            ids = np.asarray(ids, dtype=np.int64)
            new = int(store.run("prefixes.new_merges").fetchall()[0][0])
            self.ranges = [tuple(r) for r in store.run("prefixes.phase_ranges").fetchall()]
        self.n_merges = len(ids)
        base = n - new
        # sizes[k] = id range after the first k merges (reused merges add no token)
        grown = np.maximum.accumulate(ids + 1) if len(ids) else ids
        self.sizes = np.concatenate([[base], np.maximum(base, grown)]).astype(np.int64)
        self._segmenter = None

    def size(self, k: int) -> int:
        return int(self.sizes[k])

    def segment(self, k: int, pieces) -> tuple[np.ndarray, np.ndarray]:
        """Token ids (flat) and offsets of each piece (Arrow binary or list of bytes) encoded with
        the vocabulary after k merges, e.g. ``lengths = np.diff(pre.segment(k, words)[1])``."""
        if self._segmenter is None:
            from ..merge import Segmenter

            self._segmenter = Segmenter(*self._tables, reference=self.reference)
        return self._segmenter(pieces, self.size(k))

    def further(self, k: int, pieces, before: tuple[np.ndarray, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        """``segment(k, pieces)`` from ``before``, their ids after fewer merges (``segment(j,
        pieces)``, j <= k): the same ids (:func:`toktok.merge.further.segment_further`), a few
        lookups per token rather than each piece's rank-BPE again (a superword phase's pieces are
        long). Example: ``pre.further(k1, words, pre.segment(k0, words))``."""
        if self.reference or self.size(k) == 256 or not len(before[1]) > 1:
            return self.segment(k, pieces)
        from ..merge.further import segment_further

        return segment_further(pieces, *before, self._tables, self.size(k))


def _texts_and_groups(texts, by, text_column: str) -> tuple[list[str], list[str] | None]:
    """Documents and their group labels from a list/Series of str, or a table and its columns.

    Null documents are dropped; a group named like the overall subset ('all') becomes 'all_'.
    """
    groups = None
    if isinstance(texts, pa.Table) or hasattr(texts, "columns"):
        import polars as pl

        df = (pl.from_arrow(texts) if isinstance(texts, pa.Table)
              else texts if isinstance(texts, pl.DataFrame) else pl.from_pandas(texts))
        for col, what in ((text_column, "text column"), (by if isinstance(by, str) else None, "by column")):
            if col is not None and col not in df.columns:
                raise ConfigError(f"the texts have no {what} {col!r} (columns: {', '.join(df.columns)})")
        docs = df[text_column].to_list()
        if isinstance(by, str):
            groups = df[by].to_list()
    else:
        docs = texts.to_list() if hasattr(texts, "to_list") else list(texts)
        if isinstance(by, str):
            raise ConfigError(f"by={by!r} names a column, but the texts are a plain list; "
                              "pass a table or one label per text")
    if by is not None and not isinstance(by, str):
        groups = by.to_list() if hasattr(by, "to_list") else list(by)
        if len(groups) != len(docs):
            raise ConfigError(f"by has {len(groups)} labels for {len(docs)} texts; give one label per text")
    keep = [i for i, d in enumerate(docs) if d is not None]
    if len(keep) < len(docs):
        docs = [docs[i] for i in keep]
        groups = None if groups is None else [groups[i] for i in keep]
    if groups is not None:
        groups = [(str(g) if g is not None else "null") for g in groups]
        groups = [g + "_" if g == ALL else g for g in groups]
    return docs, groups


def _checkpoints(n_merges: int, every: int | None, checkpoints: int) -> list[int]:
    if every is None:
        every = max(1, -(-n_merges // max(1, checkpoints)))
    if every <= 0:
        raise ConfigError(f"every={every}: the curve needs a positive number of merges between points")
    ks = list(range(0, n_merges, every)) + [n_merges]
    return sorted(set(ks))


def compression_curve(
    run: RunLike,
    texts,
    by=None,
    every: int | None = None,
    *,
    checkpoints: int = 20,
    text_column: str = "text",
    threads: int = 0,
    write: bool = True,
    text: str = "given",
    text_by_phase: dict | None = None,
    reference: bool = False,
):
    """Bytes per token of ``texts`` after every ``every`` merges, overall and per group.

    ``texts``: a list (or Series) of str, or a table (polars/pandas DataFrame, pyarrow Table) with
    ``text_column``. ``by``: None, one label per text (e.g. languages), or a column of the table.
    ``every``: merges between points (default: about ``checkpoints`` points); 0 merges and the
    last merge are always included. Each point encodes the texts with tiktoken and the vocabulary
    cut after k merges (ids are ranks, so a prefix of the ids is the tokenizer as it was then);
    special tokens in the texts are encoded as ordinary text.

    With ``write`` the rows replace the ``compression`` table (``merges``, ``vocab_size``,
    ``subset`` = 'all' or the group, ``docs``, ``bytes``, ``tokens``, ``bytes_per_token``), the
    final tokenizer's per-token counts replace ``token_usage`` (``id``, ``subset``, ``uses``), and
    meta('compression') records the sample, with ``text``: what the texts are, "given" (by the
    caller), "held_out" (text the run did not train on: pieces its sampled phases left out),
    "training" (documents the run trained on: its parity sample) or "mixed" (per phase in
    ``text_by_phase``). ``reference``: a small run's (see ``merge.Segmenter``). Returns the rows
    as a polars DataFrame.
    Example: ``compression_curve("out/demo", df, by="lang", every=100)``.
    """
    import polars as pl

    return pl.from_arrow(curve_table(run, texts, by, every, checkpoints=checkpoints, text_column=text_column,
                                     threads=threads, write=write, text=text, text_by_phase=text_by_phase,
                                     reference=reference))


def curve_pieces(texts, by=None, patterns=(), *, text_column: str = "text", threads: int = 0) -> dict:
    """What :func:`curve_table` cuts ``texts`` (grouped ``by``) into before it reads the run: the
    documents, their subsets and, per pattern of ``patterns`` (by its regex), their distinct pieces
    (:func:`.measure.pieces`). The pipeline has them cut beside the last merge loop, on the core it
    leaves idle (``insight.stage.ahead``): they depend on the parity sample, not on the merges.
    Example: ``curve_table(store, texts, pieces=curve_pieces(texts, patterns=[DEFAULT]))``."""
    docs, groups = _texts_and_groups(texts, by, text_column)
    threads = threads or os.cpu_count() or 1
    subsets, gidx = measure.subsets(groups, len(docs))
    cut: dict[str, tuple] = {}
    for p in patterns:
        if p.regex not in cut:
            cut[p.regex] = measure.pieces(docs, gidx, len(subsets), threads, pattern=p)
    return {"docs": docs, "subsets": subsets, "index": gidx, "cut": cut}


def curve_table(run: RunLike, texts, by=None, every: int | None = None, *, checkpoints: int = 20,
                text_column: str = "text", threads: int = 0, write: bool = True, text: str = "given",
                text_by_phase: dict | None = None, reference: bool = False,
                prefixes: "_Prefixes | None" = None, pieces: dict | None = None, lengths: dict | None = None) -> pa.Table:
    """:func:`compression_curve`'s rows as an Arrow table, written as it says: what the pipeline's
    insight step records (without Polars); ``prefixes``: the run file's, read already; ``pieces``:
    ``texts`` cut already (:func:`curve_pieces` of the same ``texts`` and ``by``: its patterns'
    pieces are not cut again), ``lengths``: and (regex, size) -> the tokens of each of their pieces
    under the first ``size`` tokens (``stage.Ahead.learned``). Example: ``curve_table(store, ["a"])``."""
    threads = threads or os.cpu_count() or 1
    if pieces is None:
        pieces, lengths = curve_pieces(texts, by, text_column=text_column, threads=threads), None
    docs, subsets, gidx = pieces["docs"], pieces["subsets"], pieces["index"]
    with _connect(run, read_only=not write) as store:
        pre = prefixes or _Prefixes(store, reference)
        ks = _checkpoints(pre.n_merges, every, checkpoints)
        ndocs = measure.sums(np.ones(len(docs), np.int64), gidx, len(subsets))
        sbytes = measure.sums(measure.utf8_bytes(docs), gidx, len(subsets))
        # each group's distinct pieces of the pattern once, with their counts: a document's
        # tokens are its pieces' tokens (tiktoken encodes piece by piece), so every point of the
        # curve encodes these pieces instead of the documents; after k merges the tokenizer splits
        # text with the pattern of the phase that learned the k-th (phases may differ)
        pattern_at = _pattern_at(store, pre.ranges)
        cut: dict[str, tuple] = dict(pieces["cut"])
        rows = []
        usage = None
        for k in ks:
            p = pattern_at(k)
            if p.regex not in cut:
                cut[p.regex] = measure.pieces(docs, gidx, len(subsets), threads, pattern=p)
            words, counts, of = cut[p.regex]
            got = (lengths or {}).get((p.regex, pre.size(k))) if k != ks[-1] else None
            flat, off = pre.segment(k, words) if got is None else (None, None)
            stoks = measure.sums(counts * (np.diff(off) if got is None else got), of, len(subsets))
            for s, name in enumerate(subsets):
                rows.append((k, pre.size(k), name, int(ndocs[s]), int(sbytes[s]), int(stoks[s]),
                             measure.ratio(int(sbytes[s]), int(stoks[s]))))
            if k == ks[-1]:
                usage = _usage(flat, off, counts, of, subsets, pre.size(k))
        cols = list(zip(*rows)) if rows else [[]] * len(_CURVE_SCHEMA)
        frame = pa.table([pa.array(c, f.type) for c, f in zip(cols, _CURVE_SCHEMA)], schema=_CURVE_SCHEMA)
        if write:
            _add_missing_views(store)
            info = {"docs": len(docs), "bytes": int(sbytes[0]), "subsets": len(subsets) - 1,
                    "by": by if isinstance(by, str) else (None if by is None else "labels"),
                    "points": len(ks), "every": ks[1] - ks[0] if len(ks) > 1 else 0, "text": text}
            if text_by_phase is not None:
                info["text_by_phase"] = text_by_phase
            store.replace_insight({"compression": frame, "token_usage": usage},
                                  meta={"compression": json.dumps(info, sort_keys=True)})
    return frame


def _run_pattern(store: RunStore):
    """The pre-tokenizer pattern the run trained with (its run file's ``pattern``; GPT-4's for
    a run file without one)."""
    from ..patterns import Pattern

    return Pattern.from_meta(store.get_meta("pattern"))


def _pattern_at(store: RunStore, phase_ranges: list[tuple] | None = None):
    """``k -> the pattern the tokenizer after k merges splits text with``: the run's pattern, or,
    when its phases split with patterns of their own (meta('pattern')'s ``by_phase``), the pattern
    of the phase that learned merge k (the first phase's for k = 0); ``phase_ranges``: each
    phase's first and last merge, known already (``_Prefixes.ranges``)."""
    from ..patterns import Pattern

    run_pattern = _run_pattern(store)
    try:
        by_phase = json.loads(store.get_meta("pattern") or "{}").get("by_phase")
    except (ValueError, AttributeError):
        by_phase = None
    if not by_phase:
        return lambda k: run_pattern
    if phase_ranges is None:
        phase_ranges = store.run("prefixes.phase_ranges").fetchall()
    ranges = [(Pattern.from_dict(by_phase[ph]), k0) for ph, k0, _ in phase_ranges if ph in by_phase]
    if not ranges:
        return lambda k: run_pattern

    def at(k: int):
        got = ranges[0][0]
        for p, k0 in ranges:
            if k - 1 >= k0:
                got = p
        return got
    return at


def _pattern_label(value: str | None) -> str:
    """The run's pattern as ``toktok show`` says it: its name, or ``custom`` and the regex; with
    patterns per phase, each in phase order (``cl100k → superbpe``)."""
    from ..patterns import Pattern

    final = Pattern.from_meta(value).label()
    try:
        by_phase = json.loads(value).get("by_phase") if value and value.startswith("{") else None
    except ValueError:
        by_phase = None
    if not by_phase:
        return final
    labels = list(dict.fromkeys(Pattern.from_dict(d).label() for d in by_phase.values()))
    return " → ".join(labels)


def _usage(flat: np.ndarray, off: np.ndarray, counts: np.ndarray, of: np.ndarray, subsets: list[str], n: int) -> pa.Table:
    """Per subset ('all' first, then the groups): how often each id is used, ids ascending."""
    lens = np.diff(off)
    weight = np.repeat(counts, lens)
    cols: dict[str, list] = {"id": [], "subset": [], "uses": []}
    parts = [(0, flat, weight)]
    if len(subsets) > 1:
        g = np.repeat(of, lens)
        parts += [(s, flat[g == s], weight[g == s]) for s in range(1, len(subsets))]
    for s, arr, w in parts:
        # integer sums (bincount with weights adds in float64: exact below 2**53 uses)
        c = np.bincount(arr, weights=w, minlength=n).astype(np.int64)
        used = np.nonzero(c)[0]
        cols["id"].append(used.astype(np.int32))
        cols["uses"].append(c[used].astype(np.int64))
        cols["subset"].append(np.full(len(used), subsets[s], dtype=object))
    return pa.table({
        "id": pa.array(np.concatenate(cols["id"]) if cols["id"] else [], pa.int32()),
        "subset": pa.array(np.concatenate(cols["subset"]).tolist() if cols["subset"] else [], pa.string()),
        "uses": pa.array(np.concatenate(cols["uses"]) if cols["uses"] else [], pa.int64()),
    })


def word_gains(run: RunLike, top: int = 50_000, *, write: bool = True, reference: bool = False):
    """For each phase, its ``top`` most frequent words in tokens before and after its merges.

    "Before" is the vocabulary the phase started from, "after" the one it ended with (both as
    tiktoken prefixes of the final ids). With ``write`` the rows replace the ``word_gains``
    table (``phase``, ``word``, ``count``, ``tokens_before``, ``tokens_after``); the ready query
    ``phase_gains`` ranks them by tokens saved (count x tokens gained). Words that are not valid
    UTF-8 on their own are left out, and so are the words after the first ``GAINS_BYTES`` of a
    phase's (most frequent first; one longer than a 32nd of that is left out alone): a superword
    phase's words are whole paragraphs (docs/superbpe.md), and segmenting them all again would
    take as long as its merges. ``reference``: a small run's (see ``merge.Segmenter``).
    Returns a polars DataFrame.
    Example: ``word_gains("out/demo", top=10_000)``.
    """
    import polars as pl

    return pl.from_arrow(gains_table(run, top, write=write, reference=reference))


def gains_table(run: RunLike, top: int = 50_000, *, write: bool = True, reference: bool = False,
                prefixes: "_Prefixes | None" = None, top_words: dict[str, pa.Table] | None = None) -> pa.Table:
    """:func:`word_gains`' rows as an Arrow table, written as it says: what the pipeline's insight
    step records (without Polars); ``prefixes``: the run file's, read already (``curve_table``'s);
    ``top_words``: a phase's most frequent words found already (:func:`top_rows`, the same
    ``top``), instead of reading them from its word table.
    Example: ``gains_table(store, top=100).num_rows``."""
    from ..count.sample import widened  # (DuckDB gives BLOBs as binary)

    frames = []
    top_words = top_words or {}
    with _connect(run, read_only=not write) as store:
        pre = prefixes or _Prefixes(store, reference)
        for phase, k0, k1 in pre.ranges:
            rows = top_words.get(phase)
            if rows is None:
                rows = store.arrow("top_words", {"phase": phase, "n": int(top)})
            words, counts = _utf8_words(widened(rows["word"].combine_chunks()), rows["count"].combine_chunks())
            words, counts = _first_bytes(words, counts, GAINS_BYTES)
            # A word is one piece of the pattern, so it is encoded as one (as tiktoken's
            # _encode_single_piece would: splitting it again gives itself)
            # (a phase after merges: its words' ids after them taken up from those before them)
            ids = pre.segment(k0, words) if len(words) else None
            before = np.diff(ids[1]) if len(words) else []
            after = np.diff((pre.further(k1 + 1, words, ids) if k0 else pre.segment(k1 + 1, words))[1]) \
                if len(words) else []
            frames.append(pa.table([pa.array([phase] * len(words), pa.large_string()), words, counts,
                                    pa.array(before, pa.int32()), pa.array(after, pa.int32())], schema=_GAINS_SCHEMA))
        frame = pa.concat_tables(frames) if frames else _GAINS_SCHEMA.empty_table()
        if write:
            _add_missing_views(store)
            store.replace_insight({"word_gains": frame}, meta={})
    return frame


#: The bytes of words (most frequent first) a phase's word gains segment at most.
GAINS_BYTES = 2 << 20


def _first_bytes(words: pa.Array, counts: pa.Array, limit: int) -> tuple[pa.Array, pa.Array]:
    """The first ``words`` (and their counts) whose bytes add up to at most ``limit``, leaving out
    any word longer than a 32nd of it (a long run of one character) rather than stopping there."""
    if len(words) == 0 or words.nbytes <= limit:
        return words, counts
    import pyarrow.compute as pc

    lens = pc.binary_length(words).to_numpy(zero_copy_only=False)
    keep = np.flatnonzero(lens <= limit // 32)
    ends = np.cumsum(lens[keep])
    keep = pa.array(keep[: int(np.searchsorted(ends, limit, side="right"))])
    return words.take(keep), counts.take(keep)


def _utf8_words(words: pa.Array, counts: pa.Array) -> tuple[pa.Array, pa.Array]:
    """The words (large_binary) that are valid UTF-8 on their own, with their counts: all of
    them at once when they are (the words of a pattern's pieces of UTF-8 text always are), else
    word by word."""
    try:
        pa.Array.from_buffers(pa.large_string(), len(words), words.buffers(), 0, words.offset).validate(full=True)
        return words, counts
    except pa.ArrowInvalid:
        pass
    keep = []
    for i, w in enumerate(words.to_pylist()):
        try:
            w.decode("utf-8")
        except UnicodeDecodeError:
            continue
        keep.append(i)
    return words.take(pa.array(keep, pa.int64())), counts.take(pa.array(keep, pa.int64()))


# ---------------------------------------------------------------------------------------------
# Queries and the one-screen summary
# ---------------------------------------------------------------------------------------------


def ready_queries() -> dict[str, Path]:
    """The ready queries by name: ``sql/*.sql`` in the current folder, then toktok's own
    (``toktok/sql/ready/``, installed with the package)."""
    found: dict[str, Path] = {}
    for d in READY_DIRS:
        if d.is_dir():
            for p in sorted(d.glob("*.sql")):
                found.setdefault(p.stem, p)
    return found


def ready_about(path: str | os.PathLike) -> str:
    """What a ready query shows: its header comment up to the first ``:`` or ``.`` outside
    parentheses. Example: ``ready_about(READY_DIR / "count_decay.sql") == "Count decay over the ranks"``."""
    head = []
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        if not line.startswith("--"):
            break
        head.append(line[2:].strip())
    text, depth = " ".join(head).strip(), 0
    for i, ch in enumerate(text):
        depth += (ch == "(") - (ch == ")")
        if depth == 0 and ch in ":." and text[i + 1:i + 2] in (" ", ""):
            return text[:i]
    return text


def resolve_query(query_or_file: str) -> tuple[str, str, dict]:
    """(label, SQL text, its parameters) of a query: a .sql file, a ready query's name, a
    table/view name (a parameter of ``toktok/sql/table_rows.sql``, never SQL text), or SQL."""
    q = query_or_file.strip()
    p = Path(os.path.expanduser(q))
    if q and "\n" not in q and len(q) < 4096 and p.is_file():
        try:
            return str(p), p.read_text(encoding="utf-8"), {}
        except (OSError, UnicodeDecodeError) as e:
            raise QueryError(f"{p}: cannot read the query file ({e})") from None
    if re.fullmatch(r"[\w.-]+\.sql", q) or (q.endswith(".sql") and " " not in q):
        if p.stem in ready_queries():
            # docs and scripts written in a checkout name sql/NAME.sql; an install has no sql/ folder
            raise QueryError(f"{q}: no such query file; {p.stem} is a ready query that ships with toktok: "
                             f"give its name, {p.stem} (toktok sql --list)")
        raise QueryError(f"{q}: no such query file (the ready queries: toktok sql --list)")
    if re.fullmatch(r"[A-Za-z_][\w-]*", q):
        ready = ready_queries()
        if q in ready:
            return str(ready[q]), ready[q].read_text(encoding="utf-8"), {}
        if re.fullmatch(r"[A-Za-z_]\w*", q):
            return q, sql("table_rows"), {"name": q}
    if not q:
        raise QueryError("the query is empty; give SQL, a .sql file, a ready query name or a table name")
    return "query", q, {}


def query(run: RunLike, query_or_file: str) -> pa.Table:
    """Run SQL on a run file (read-only) and return the result as a pyarrow Table.

    Read-only means the file system too: the query can neither write files (``COPY ... TO``) nor
    read or attach others (DuckDB's ``enable_external_access`` is off and the settings are locked,
    in a private in-memory DuckDB that attaches the run file). An open connection is used as it is.
    ``query_or_file``: SQL text, a ``.sql`` file, the name of a ready query (``toktok sql --list``,
    e.g. ``top_merges``) or a table/view name. The insight views are available even on runs made
    before they existed (as temporary views). A failing query raises QueryError naming the query
    (file) with DuckDB's message. Example: ``query("out/demo", "longest_tokens")``.
    """
    with query_batches(run, query_or_file) as batches:
        return pa.Table.from_batches(list(batches), schema=batches.schema)


#: Rows per batch of a streamed result (:func:`query_batches`).
BATCH_ROWS = 65_536


class _Batches:
    """The record batches of a query's result, read from DuckDB one at a time; DuckDB's errors
    while reading are QueryErrors naming the query. ``schema``: the result's columns."""

    def __init__(self, reader: pa.RecordBatchReader, label: str):
        self._reader, self._label, self.schema = reader, label, reader.schema

    def __iter__(self) -> Iterator[pa.RecordBatch]:
        while True:
            try:
                batch = self._reader.read_next_batch()
            except StopIteration:
                return
            except (duckdb.Error, pa.ArrowException) as e:
                raise QueryError(f"{self._label}: {_first_line(e)}") from None
            yield batch


@contextmanager
def query_batches(run: RunLike, query_or_file: str, batch_rows: int = BATCH_ROWS) -> Iterator[_Batches]:
    """:func:`query`'s result as record batches of about ``batch_rows`` rows, read as they are
    used (``toktok sql --csv`` and ``--parquet`` write a result larger than memory this way).
    Example: ``with query_batches("out/demo", "merges") as b: sum(x.num_rows for x in b)``."""
    label, text, params = resolve_query(query_or_file)
    opened = isinstance(run, (duckdb.DuckDBPyConnection, RunStore))
    with (_connect(run, read_only=True) if opened else _sandbox(run)) as store:
        _ensure_views(store)
        python_layer()  # (its relations: con.sql)
        try:
            rel = store.con.sql(text, params=params or None)
            if rel is None:
                raise QueryError(f"{label}: the query returns no rows (it is not a SELECT)")
            reader = _reader(rel, batch_rows)
        except duckdb.PermissionException as e:
            raise QueryError(f"{label}: {_first_line(e)}; toktok sql only reads the run file: export a result "
                             "with --csv or --parquet FILE") from None
        except duckdb.Error as e:
            raise QueryError(f"{label}: {_first_line(e)}") from None
        yield _Batches(reader, label)


def _reader(rel, batch_rows: int) -> pa.RecordBatchReader:
    """A DuckDB relation as a pyarrow RecordBatchReader (the method's name differs across DuckDB versions)."""
    for name in ("to_arrow_reader", "fetch_arrow_reader", "fetch_record_batch"):
        f = getattr(rel, name, None)
        if f is not None:
            return f(batch_rows)
    raise AttributeError("this duckdb has no Arrow export")  # pragma: no cover


def _superwords(store: RunStore, recorded) -> dict | None:
    """The superwords a run recorded: their count, the first phase's pattern and a few examples
    (the longest), or None for a run with none recorded."""
    if not isinstance(recorded, dict) or not recorded.get("ids"):
        return None
    rows = store.run("describe.superwords").fetchall()
    return {"count": len(recorded["ids"]), "pattern": recorded.get("pattern"), "examples": [r[0] for r in rows]}


def describe(run: RunLike) -> dict:
    """Everything ``toktok show`` prints, as plain data: config, inputs, the curve's sample (and
    what it is: ``sample.text``), special ids (``specials``),
    phases, vocabulary by kind, parity, stage timings, warnings and versions.

    Example: ``describe("out/demo")["vocab"]["merge"] == 2000``.
    """
    with _connect(run, read_only=True) as store:
        _ensure_views(store)
        meta = dict(store.run("describe.meta").fetchall())

        def js(key, default=None):
            try:
                return json.loads(meta[key]) if key in meta else default
            except ValueError:
                return meta[key]

        def rows(part: str) -> list[dict]:
            res = store.run(f"describe.{part}")
            cols = [d[0] for d in res.description]
            return [dict(zip(cols, r)) for r in res.fetchall()]

        curve = rows("curve")
        return {
            "run": None if isinstance(run, (duckdb.DuckDBPyConnection, RunStore)) else str(run),
            "config": js("config", {}),
            "versions": js("versions", {}),
            "started": meta.get("started"),
            "finished": meta.get("finished"),
            "inputs": rows("inputs"),
            "sample": {
                **(js("compression") or {}),
                "bytes_per_token_start": curve[0]["bytes_per_token"] if curve else None,
                "bytes_per_token_end": curve[-1]["bytes_per_token"] if curve else None,
                "subsets": rows("subsets"),
            } if curve else None,
            "phases": rows("phases"),
            "vocab": dict(store.run("describe.vocab").fetchall()),
            "vocab_size": store.run("describe.vocab_size").fetchall()[0][0],
            "words": rows("words")[0],
            "parity": js("parity"),
            "pattern": _pattern_label(meta.get("pattern")),
            "superwords": _superwords(store, js("superwords")),
            "specials": js("specials"),
            "stages": dict(store.run("describe.stages").fetchall()),
            "warnings": js("warnings", []),
        }


__all__ = ["add_views", "compression_curve", "word_gains", "query", "describe", "ready_queries", "ready_about",
           "resolve_query", "run_path", "VIEWS", "TABLES", "ALL", "READY_DIR"]
