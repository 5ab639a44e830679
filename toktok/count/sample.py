"""Sample: a seeded, mergeable, byte-bounded sample of documents (the sample stage).

Owns which documents are trained on when the corpus is larger than the budget allows. Reads
batches of documents with their identity (the file's key, row): the key is the part of the file's
path that its source did not spell out (``SourceFile.key``: ``a.parquet`` for ``data/a.parquet``
named by ``data/``, ``/mnt/data/*.parquet`` or ``s3://b/data/``), so the sample does not depend
on where the corpus lives. Keeps the documents whose seeded hash of the identity is smallest, as many as fit in ``capacity`` bytes of text ("bottom-k by bytes"). The
sample depends only on the seed and the set of documents, not on batch boundaries or order, so
samples taken by parallel workers merge (``Reservoir.merge``) into exactly the one-process sample.
A document above the current threshold is dropped before its text is copied or pre-tokenized.
Documents longer than ``unit`` (1 KiB) are sampled in pieces cut only where the pre-tokenizer cuts
anyway (``_cut`` is the definition, by the pattern's rule in :mod:`toktok.count.cuts`; ``_pieces``
does the same, compiled, on the UTF-8 bytes of an Arrow batch), so that long documents do not
make the sample lumpy; a custom regex has no rule, and its documents are sampled whole. The pass
costs little more than decoding the input: the text is read once to find the cuts, hashes are
vectorized, only the kept pieces are copied out of the batch, and a trim compacts the kept ones in
place (``_Store``).
Example: ``r = Reservoir(1 << 20, seed=0); r.offer("a.txt", 0, pl.Series(["hi"])); r.bytes == 2``.
"""
from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, NamedTuple

import numpy as np
import pyarrow as pa

from .._kernels import inlined, njit
from ..alloc import glibc
from ..patterns import DEFAULT, Pattern
from .cuts import rule

if TYPE_CHECKING:
    import polars as pl

# Safe cuts, where the GPT-4 pre-tokenizer cuts anyway (findall of the two sides = findall of the
# whole): right after "\n" when non-whitespace follows (no alternative of cl100k matches "\n" +
# non-space), and right before a space that follows non-whitespace (no token continues from
# non-whitespace into a space, and the prefix does not end in whitespace, so the one lookahead,
# \s+(?!\S), sees the same text on both sides). \s and \S are the regex module's. Other
# patterns' rules: toktok.count.cuts.
def __getattr__(name: str):
    if name == "_CUT":  # (compiled when asked for: a run that cuts nothing imports no ``regex``)
        return rule(DEFAULT).sample
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


#: Bytes of text per read in the sample pass (count.local.sample_pass; does not change the sample).
READ_BYTES = 1 << 20
#: Pieces a reservoir keeps aside from those it samples: the ones with the largest hashes, the
#: last the sample would take. Those the sample did not take are text the run never trains on,
#: on which the run file's compression curve is measured (``Reservoir.left_out``).
LEFT_OUT = 64
#: Characters kept of each left-out piece.
LEFT_OUT_CHARS = 4000

_LEFT_OUT_COLUMNS = ("hash", "source", "row", "text")


def _left_out_schema() -> dict:
    """The Polars schema of the pieces a reservoir keeps aside (``_LEFT_OUT_COLUMNS``)."""
    import polars as pl

    return {"hash": pl.UInt64, "source": pl.String, "row": pl.Int64, "text": pl.String}

_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_MAX = np.uint64(0xFFFFFFFFFFFFFFFF)


def _splitmix(x: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore", invalid="ignore"):
        x = x + np.uint64(0x9E3779B97F4A7C15)
        x = (x ^ (x >> np.uint64(30))) * _M1
        x = (x ^ (x >> np.uint64(27))) * _M2
        return x ^ (x >> np.uint64(31))


def _source_salt(key: str, seed: int) -> np.uint64:
    """A 64-bit salt from a file's key and the seed (FNV-1a, stable across runs and machines)."""
    h = 0xCBF29CE484222325 ^ (seed & 0xFFFFFFFFFFFFFFFF)
    for b in key.encode():
        h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return np.uint64(h)


def doc_hashes(key: str, first_row: int, n: int, seed: int) -> np.ndarray:
    """The seeded hash of (whole) documents ``first_row .. first_row+n-1`` of the file whose key
    is ``key`` (uint64)."""
    ids = np.arange(first_row, first_row + n, dtype=np.int64) << 20
    with np.errstate(over="ignore"):
        return _splitmix(ids.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15) ^ _source_salt(key, seed))


def _cut(text: str, unit: int, pattern: Pattern = DEFAULT) -> list[str]:
    """``text`` in pieces of ``unit`` characters or a few more, cut only at safe points of
    ``pattern`` (its rule's ``sample``; ``_CUT`` for GPT-4's): each piece ends at the first safe
    cut at least ``unit`` characters after its start. A custom regex's text is one piece."""
    r = rule(pattern)
    if r is None:
        return [text]
    out, start = [], 0
    while len(text) - start > unit:
        m = r.sample.search(text, start + unit)
        if not m:
            break
        out.append(text[start : m.end()])
        start = m.end()
    out.append(text[start:])
    return out


@njit(cache=True, no_cfunc_wrapper=True, forceinline=True)
def _space_at(data, q):
    """Whether the character at byte ``q`` of valid UTF-8 is whitespace for the regex module's
    ``\\s`` (Unicode White_Space: \\t-\\r, space, U+0085 U+00A0 U+1680 U+2000-200A U+2028 U+2029
    U+202F U+205F U+3000; tests check this against ``_CUT``)."""
    b = data[q]
    if b < 0x80:
        return b == 0x20 or (b >= 0x09 and b <= 0x0D)
    if b == 0xC2:
        return data[q + 1] == 0x85 or data[q + 1] == 0xA0
    if b == 0xE1:
        return data[q + 1] == 0x9A and data[q + 2] == 0x80
    if b == 0xE2:
        b1, b2 = data[q + 1], data[q + 2]
        if b1 == 0x80:
            return b2 <= 0x8A or b2 == 0xA8 or b2 == 0xA9 or b2 == 0xAF
        return b1 == 0x81 and b2 == 0x9F
    if b == 0xE3:
        return data[q + 1] == 0x80 and data[q + 2] == 0x80
    return False


@inlined
def _lead_bytes(v):
    """Characters starting in the UTF-8 bytes ``v``: bytes that are not 0x80-0xBF (-128..-65 as
    int8). A slice and an int8 view so that LLVM vectorizes it (no index wraparound checks)."""
    w = v.view(np.int8)
    cnt = 0
    for t in range(w.shape[0]):
        cnt += w[t] > -65
    return cnt


@inlined
def _space_before(data, q, start):
    """Whether the character that ends right before byte ``q`` (> ``start``, a character start)
    is whitespace, as ``_space_at``."""
    t = q - 1
    while t > start and (data[t] & 0xC0) == 0x80:
        t -= 1
    return _space_at(data, t)


@njit(cache=True, no_cfunc_wrapper=True, nogil=True)
def _pieces(offs, data, unit, p_doc, p_k, p_start, p_end, kind):
    """``_cut`` on UTF-8 bytes for every document ``data[offs[i]:offs[i+1]]`` longer than ``unit``
    bytes (the others are one piece), by cut rule ``kind`` (``cuts.Rule.kind``; -1: no cuts):
    writes each piece's document, index and byte range, in
    document order, and returns how many. Never touches the text of a short document; reads a
    long one about once (``unit`` characters are skipped by counting lead bytes over runs as long
    as the characters still to skip, then the next safe cut is searched). Room needed:
    ``n + sum(len // unit)`` (every piece but the last holds at least ``unit`` characters)."""
    n = offs.shape[0] - 1
    room = p_doc.shape[0]
    m = 0
    for i in range(n):
        e = offs[i + 1]
        b = offs[i]
        long = e - b > unit and kind >= 0
        k = 0
        while True:
            cut = _next_cut(data, b, e, unit, kind) if long else e
            if m >= room:  # cannot happen with the room above; never write past it
                return -1
            p_doc[m] = i
            p_k[m] = k
            p_start[m] = b
            p_end[m] = cut
            m += 1
            k += 1
            if cut == e:  # the last piece (a cut is always before the end)
                break
            b = cut
    return m


@inlined
def _next_cut(data, b, e, unit, kind):
    """Where the piece of a long document that starts at byte ``b`` ends: the first safe cut
    of rule ``kind`` (``_CUT``, kind 0: after "\n" + non-space, before a space that follows
    non-space; kind 1: nor "\n" + "/"; kind 2: nor whitespace + "\n") at or after the byte where
    character number ``unit`` starts; ``e`` when at most ``unit`` characters are left or no cut
    follows."""
    p = b
    need = unit
    while need > 0 and p < e:
        j = min(p + need, e)  # `need` characters take at least `need` bytes
        need -= _lead_bytes(data[p:j])
        p = j
        while p < e and (data[p] & 0xC0) == 0x80:
            p += 1
    if p >= e:
        return e
    v = data[p:e]
    for q in range(v.shape[0]):
        c = v[q]
        if c == 10:
            if p + q + 1 < e and not _space_at(data, p + q + 1):
                if (kind == 0 or (kind == 1 and data[p + q + 1] != 47)
                        or (kind == 2 and not _space_before(data, p + q, b))):
                    return p + q + 1
        elif c == 32 and not _space_before(data, p + q, b):
            return p + q
    return e


@njit(cache=True, no_cfunc_wrapper=True, nogil=True)
def _copy_ranges(data, starts, ends, out, pos):
    """Copy the byte ranges ``data[starts[i]:ends[i]]`` one after the other into ``out`` from
    ``pos`` on; returns where they end."""
    for i in range(starts.shape[0]):
        n = ends[i] - starts[i]
        out[pos:pos + n] = data[starts[i]:ends[i]]
        pos += n
    return pos


@njit(cache=True, no_cfunc_wrapper=True, nogil=True)
def _compact_ranges(buf, starts, ends):
    """Move the byte ranges ``buf[starts[i]:ends[i]]`` (increasing, disjoint) to the front of
    ``buf``, one after the other, in place; returns where they end."""
    pos = 0
    for i in range(starts.shape[0]):
        s = starts[i]
        n = ends[i] - s
        if s != pos:  # pos < s: a forward copy never overwrites bytes still to be read
            for j in range(n):
                buf[pos + j] = buf[s + j]
        pos += n
    return pos


def _buffers(arr: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """(offsets, bytes) of a large_string array, zero-copy; offsets index into the bytes."""
    bufs = arr.buffers()
    offs = np.frombuffer(bufs[1], dtype=np.int64, count=len(arr) + 1, offset=arr.offset * 8)
    data = np.frombuffer(bufs[2], dtype=np.uint8) if bufs[2] is not None and bufs[2].size else np.zeros(1, np.uint8)
    return offs, data


def widened(arr: pa.Array) -> pa.Array:
    """A ``string`` or ``binary`` array as ``large_string`` or ``large_binary``, its buffers shared
    (the offsets widened); any other array as it is. What ``cast`` gives, without loading
    ``pyarrow.compute`` (~50 ms, on a run's first read). Example: ``widened(pa.array(["a"])).type``."""
    wide = {pa.string(): pa.large_string(), pa.binary(): pa.large_binary()}.get(arr.type)
    if wide is None:
        return arr
    if not len(arr):
        return pa.array([], wide)
    validity, offsets, data = arr.buffers()
    at = np.frombuffer(offsets, np.int32, count=arr.offset + len(arr) + 1).astype(np.int64)
    return pa.Array.from_buffers(wide, len(arr), [validity, pa.py_buffer(at), data], arr.null_count, arr.offset)


def as_large_string(texts: "pl.Series | pa.Array | pa.ChunkedArray") -> pa.Array:
    """One ``large_string`` Arrow array of ``texts``, nulls as empty strings (zero-copy when it
    already is one without nulls, or a Polars Series whose strings lie back to back in one of its
    buffers: :func:`_views_in_place`)."""
    if not isinstance(texts, (pa.Array, pa.ChunkedArray)):  # (a Polars Series)
        arr = _views_in_place(texts)
        if arr is not None:
            return arr
    arr = texts if isinstance(texts, (pa.Array, pa.ChunkedArray)) else texts.to_arrow()
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks() if arr.num_chunks != 1 else arr.chunk(0)
    arr = widened(arr)
    if arr.type != pa.large_string():
        arr = arr.cast(pa.large_string())
    if arr.null_count:
        import pyarrow.compute as pc  # only here: a run without nulls never loads it (~30 ms, 9 MB)

        arr = pc.fill_null(arr, "")
    return arr


def _views_in_place(texts: "pl.Series") -> pa.Array | None:
    """A Polars String Series without nulls as a ``large_string`` array over its own buffer, no
    text copied, when its strings lie back to back, in order, in one of its buffers: as a Series
    made from a ``large_string`` array (:meth:`Reservoir.finish`, :func:`~.common.whole_documents`)
    has them, and its slices and its rows in their order (:func:`~.common.sample_parts`) keep
    them. Polars' strings are views (16 bytes: the length, then up to 12 bytes inline, or a
    prefix, a buffer and an offset); the one copy ``to_arrow`` makes otherwise, a part at a time,
    was a tenth of a SuperBPE run's fresh pages. None when they do not lie so (the caller copies)."""
    import polars as pl

    n = len(texts)
    if not n or texts.dtype != pl.String or texts.null_count():
        return None
    arr = texts.to_arrow(compat_level=pl.CompatLevel.newest())  # the views themselves, no copy
    if isinstance(arr, pa.ChunkedArray):
        if arr.num_chunks != 1:
            return None
        arr = arr.chunk(0)
    if arr.type != pa.string_view() or arr.null_count:
        return None
    bufs = arr.buffers()
    raw = np.frombuffer(bufs[1], np.uint8, count=16 * (arr.offset + n))[16 * arr.offset:].reshape(n, 16)
    view = raw.view(np.uint32)  # (length, prefix, buffer, offset) per string; inline: (length, 12 bytes)
    lens = view[:, 0].astype(np.int64)
    offs = np.zeros(n + 1, np.int64)
    np.cumsum(lens, out=offs[1:])
    out = np.flatnonzero(lens > 12)  # the strings in a buffer
    if not len(out):
        return None
    which = int(view[out[0], 2])
    if 2 + which >= len(bufs) or bufs[2 + which] is None or (view[out, 2] != which).any():
        return None
    offs += int(view[out[0], 3]) - int(offs[out[0]])
    data = bufs[2 + which]
    if offs[0] < 0 or offs[-1] > data.size or (view[out, 3] != offs[out]).any():
        return None
    inline = np.flatnonzero((lens > 0) & (lens <= 12))  # in place too only if the buffer has them there
    if len(inline):
        at = np.arange(12)
        cols = offs[inline, None] + at
        held = at < lens[inline, None]
        got = np.frombuffer(data, np.uint8)[np.where(held, cols, offs[0])]
        if not (np.where(held, got, 0) == np.where(held, raw[inline, 4:], 0)).all():
            return None
    offs.flags.writeable = False  # (read-only as Arrow's own offsets: the kernels see the same types)
    return pa.Array.from_buffers(pa.large_string(), n, [None, pa.py_buffer(offs), data])


@contextmanager
def roomy_heap(mmap_below: int = 8 << 20, keep_top: int = 4 << 20) -> Iterator[Callable[[], None]]:
    """Inside: glibc serves allocations under ``mmap_below`` from its heap and keeps up to
    ``keep_top`` bytes of free heap top. toktok otherwise gives freed memory straight back to the
    system (``toktok.alloc.lean``: Arrow's system pool, M_TRIM_THRESHOLD 0, which pins the mmap
    threshold at 128 KiB), so every decoded Parquet page faults fresh pages in again: decoding is
    2-2.5x slower. Yields ``tidy()``, which gives the free heap back now (``malloc_trim``): the
    heap's free memory is RSS until then, so the caller calls it every so many bytes read. On exit
    the settings are restored and the free heap is given back, so RSS follows what is held again.
    A no-op without glibc."""
    libc = glibc()
    if libc is None:  # pragma: no cover - not glibc
        yield lambda: None
        return
    mallopt, trim = libc.mallopt, libc.malloc_trim
    mallopt(-3, mmap_below)  # M_MMAP_THRESHOLD
    mallopt(-1, keep_top)  # M_TRIM_THRESHOLD
    try:
        yield lambda: trim(0)
    finally:
        mallopt(-1, 0)
        mallopt(-3, 128 << 10)  # glibc's default, fixed as toktok.alloc.lean leaves it
        trim(0)


class _Store:
    """The reservoir's pieces: their text back to back in one buffer, their source, hash, id and
    length in arrays, all growing by doubling. A trim keeps some of them by moving them to the
    front in place (``keep``), so the sample costs no second copy of itself and the heap sees a
    few large allocations instead of many small long-lived ones (it does not fragment)."""

    def __init__(self) -> None:
        self.text = np.empty(0, np.uint8)
        self.code = np.empty(0, np.int32)  # index into names
        self.h = np.empty(0, np.uint64)
        self.ids = np.empty(0, np.int64)
        self.lens = np.empty(0, np.int64)
        self.names: list[str] = []
        self._code_of: dict[str, int] = {}
        self.n = self.pos = self.top = 0  # top: the most text bytes held (what a trim left behind)

    @staticmethod
    def _room(arr: np.ndarray, used: int, need: int, least: int) -> np.ndarray:
        if need <= len(arr):
            return arr
        out = np.empty(max(need, 2 * len(arr), least), arr.dtype)
        out[:used] = arr[:used]
        return out

    def add(self, sources, data: np.ndarray, starts: np.ndarray, ends: np.ndarray,
            h: np.ndarray, ids: np.ndarray) -> int:
        """Append pieces ``data[starts[i]:ends[i]]`` of ``sources`` (one name, or one per piece)
        with their hashes and ids; returns their bytes."""
        k, n = len(h), self.n
        lens = ends - starts
        nbytes = int(lens.sum())
        self.text = self._room(self.text, self.pos, self.pos + nbytes, 1 << 20)
        for name in ([sources] if isinstance(sources, str) else dict.fromkeys(sources)):
            if name not in self._code_of:
                self._code_of[name] = len(self.names)
                self.names.append(name)
        if isinstance(sources, str):
            codes = self._code_of[sources]
        else:
            codes = np.array([self._code_of[x] for x in sources], np.int32)
        for name in ("code", "h", "ids", "lens"):
            setattr(self, name, self._room(getattr(self, name), n, n + k, 1 << 12))
        self.pos = _copy_ranges(data, starts, ends, self.text, self.pos)
        self.top = max(self.top, self.pos)
        self.code[n:n + k], self.h[n:n + k], self.ids[n:n + k], self.lens[n:n + k] = codes, h, ids, lens
        self.n += k
        return nbytes

    def sources(self) -> np.ndarray:
        """Each piece's source name (object array)."""
        return np.array(self.names, dtype=object)[self.code[:self.n]] if self.names else np.empty(0, object)

    def keep(self, rows: np.ndarray) -> None:
        """Keep only pieces ``rows`` (increasing), moved to the front in place."""
        offs = np.zeros(self.n + 1, np.int64)
        np.cumsum(self.lens[:self.n], out=offs[1:])
        self.pos = _compact_ranges(self.text, offs[:-1][rows], offs[1:][rows])
        k = len(rows)
        for name in ("code", "h", "ids", "lens"):
            arr = getattr(self, name)
            arr[:k] = arr[rows]
        self.n = k

    def texts(self) -> pa.Array:
        """The pieces' text as a large_string array (a view of the buffer)."""
        offs = np.zeros(self.n + 1, np.int64)
        np.cumsum(self.lens[:self.n], out=offs[1:])
        return pa.Array.from_buffers(pa.large_string(), self.n,
                                     [None, pa.py_buffer(offs), pa.py_buffer(self.text[:self.pos])])


class Pieces(NamedTuple):
    """What the sample sees of a batch of documents (:func:`pieces_of`): the batch's ``offs`` and
    ``data`` (:func:`_buffers`), and its pieces, in document order: each one's identity (``ids``:
    ``row << 20 | piece``), byte range ``starts[i]:ends[i]`` of ``data`` and seeded hash ``h``."""

    offs: np.ndarray
    data: np.ndarray
    ids: np.ndarray
    starts: np.ndarray
    ends: np.ndarray
    h: np.ndarray

    def texts(self) -> pa.Array:
        """The pieces as a ``large_string`` array over the batch's own bytes (no copy): the pieces
        of the documents lie back to back, each starting where the one before ends."""
        offs = np.append(self.starts, self.ends[-1] if len(self.ends) else self.offs[-1])
        return pa.Array.from_buffers(pa.large_string(), len(self.starts),
                                     [None, pa.py_buffer(offs), pa.py_buffer(self.data)])


def pieces_of(arr: pa.Array, first_row: int, key: str, seed: int, unit: int = 1024, cut_kind: int = 0) -> Pieces:
    """The pieces a reservoir (``unit``, ``cut_kind``: :attr:`Reservoir.cut_kind`) cuts documents
    ``first_row ..`` of a ``large_string`` array ``arr`` into, with their identities (``key``: the
    file's) and seeded hashes (:class:`Pieces`): a document longer than ``unit`` bytes in pieces
    cut where the pattern cuts, any other one piece. Example: ``pieces_of(arr, 0, "a.txt", 0).h``."""
    offs, data = _buffers(arr)
    n = len(arr)
    lens = np.diff(offs)
    rows = np.arange(first_row, first_row + n, dtype=np.int64) << 20
    long = lens > unit
    if long.any():
        room = n + int((lens[long] // unit).sum())
        p_doc, p_k = np.empty(room, np.int64), np.empty(room, np.int64)
        starts, ends = np.empty(room, np.int64), np.empty(room, np.int64)
        m = _pieces(offs, data, unit, p_doc, p_k, starts, ends, cut_kind)
        if m < 0:  # pragma: no cover - the room is a proven bound
            raise AssertionError("sample: piece table overflow")
        ids = rows[p_doc[:m]] + p_k[:m]  # identity of a piece: (row, piece index) in 64 bits
        starts, ends = starts[:m], ends[:m]
    else:
        ids, starts, ends = rows, offs[:-1], offs[1:]
    h = _splitmix(ids.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15) ^ _source_salt(key, seed))
    return Pieces(offs, data, ids, starts, ends, h)


@dataclass
class SourceStats:
    docs_seen: int = 0
    bytes_seen: int = 0
    docs_kept: int = 0
    bytes_kept: int = 0


@dataclass
class Reservoir:
    """Documents with the smallest hashes whose texts fit in ``capacity`` bytes.

    ``offer`` takes a batch; ``merge`` folds in another reservoir with the same seed and
    capacity (``fold``: what one handed back); ``finish()`` gives the sample; ``stats`` has bytes
    seen and kept per source (kept counts are final only after ``finish``).
    """

    capacity: int
    seed: int = 0
    unit: int = 1024  # documents longer than this are sampled in pieces of about this size
    pattern: Pattern = DEFAULT  # the pre-tokenizer: the pieces are cut where it cuts (cuts.rule)
    threshold: np.uint64 = _MAX  # documents hashing at or above it can never be in the sample
    bytes: int = 0
    stats: dict[str, SourceStats] = field(default_factory=dict)
    _parts: list = field(default_factory=list)  # frames or arrays handed in, not yet in _store
    _store: _Store = field(default_factory=_Store, repr=False, compare=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)
    #: the LEFT_OUT pieces with the largest hashes offered so far, largest first: (hash, source, row, text)
    _aside: list = field(default_factory=list, repr=False, compare=False)

    @property
    def cut_kind(self) -> int:
        """The compiled sampler's number of the pattern's cut rule (-1: a custom regex, no cuts)."""
        r = rule(self.pattern)
        return -1 if r is None else r.kind

    @property
    def full(self) -> bool:
        """True once some document had to be left out (the sample is a strict subset)."""
        return self.threshold != _MAX

    def offer(self, source: str, first_row: int, texts: "pl.Series | pa.Array", *, key: str | None = None) -> None:
        """Consider documents ``first_row ..`` of ``source`` (its name in ``stats`` and the sample),
        whose identities are (``key``, row); ``key`` defaults to ``source``. Nulls count as empty. A document
        longer than ``unit`` is offered as pieces cut where the pre-tokenizer cuts anyway, so that
        a few huge documents do not decide a source's share of the sample. ``texts`` may be a
        Polars String Series or an Arrow string array (read that way, nothing is converted and
        only the kept pieces are copied). Safe to call from several threads at once."""
        p = pieces_of(as_large_string(texts), first_row, source if key is None else key, self.seed, self.unit,
                      self.cut_kind)
        offs, data, ids, starts, ends, h = p.offs, p.data, p.ids, p.starts, p.ends, p.h
        n = len(offs) - 1
        keep = np.flatnonzero(h < self.threshold)
        with self._lock:
            st = self.stats.setdefault(source, SourceStats())
            st.docs_seen += n
            st.bytes_seen += int(offs[-1] - offs[0])
            self._set_aside(source, data, starts, ends, h, ids)
            if not len(keep):
                return
            # copy only the kept pieces out of the batch: nothing else of it is kept alive
            self.bytes += self._store.add(source, data, starts[keep], ends[keep], h[keep], ids[keep])
            # trim only when well over, so that the sort is amortised over many batches
            if self.bytes > self.capacity + max(self.capacity // 4, 1 << 20):
                self._trim()

    def _set_aside(self, source: str, data: np.ndarray, starts: np.ndarray, ends: np.ndarray,
                   h: np.ndarray, ids: np.ndarray) -> None:
        """Keep the pieces among these whose hashes are among the LEFT_OUT largest so far (a copy
        of their text, cut to LEFT_OUT_CHARS characters). Costs one max over the hashes once
        LEFT_OUT pieces are held, as a later batch rarely holds a larger one."""
        if len(h) == 0:
            return
        full = len(self._aside) >= LEFT_OUT
        cut = np.uint64(self._aside[-1][0]) if full else None
        if full and h.max() <= cut:
            return
        pick = np.flatnonzero(h > cut) if full else np.arange(len(h))
        if len(pick) > LEFT_OUT:
            pick = pick[np.argsort(h[pick], kind="stable")[::-1][:LEFT_OUT]]
        self._add_aside([
            (int(h[i]), source, int(ids[i]),
             bytes(data[starts[i]:min(ends[i], starts[i] + 4 * LEFT_OUT_CHARS)]).decode("utf-8", "ignore")[:LEFT_OUT_CHARS])
            for i in pick.tolist()])

    def _add_aside(self, rows: list) -> None:
        seen = {(r[1], r[2]) for r in self._aside}
        rows = self._aside + [r for r in rows if (r[1], r[2]) not in seen]
        rows.sort(key=lambda r: (-r[0], r[1], r[2]))
        self._aside = rows[:LEFT_OUT]

    @property
    def aside(self) -> pl.DataFrame:
        """The LEFT_OUT pieces with the largest hashes offered so far, kept or not (hash, source,
        row, text), largest first."""
        import polars as pl

        return pl.DataFrame(self._aside, schema=_left_out_schema(), orient="row")

    def left_out(self) -> pl.DataFrame:
        """Up to LEFT_OUT pieces the sample did not take (hash, source, row, text), those with the
        largest hashes, largest first: a seeded, uniform choice of text the run never trains on
        (the hash does not depend on the text). Empty when nothing had to be left out. Call it
        after ``finish``."""
        import polars as pl

        if not self.full:
            return self.aside.clear()
        st = self._store
        tops = [int(st.h[:st.n].max())] if st.n else []
        tops += [int(p["hash"].max()) for p in self._parts if isinstance(p, pl.DataFrame) and p.height]
        if not tops:
            return self.aside
        return self.aside.filter(pl.col("hash") > pl.lit(max(tops), dtype=pl.UInt64))

    def merge_left_out(self, other: pl.DataFrame) -> None:
        """Fold in the pieces another reservoir (of other documents) set aside (its ``aside``), e.g. a Ray task's."""
        self._add_aside(list(other.select(list(_LEFT_OUT_COLUMNS)).iter_rows()))

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state.pop("_lock", None)
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def fold(self, frame: pl.DataFrame, threshold: int, seen: dict[str, tuple[int, int]],
             aside: pl.DataFrame) -> None:
        """Fold in what a reservoir of the same seed and capacity over other documents handed back:
        its ``finish()`` frame, threshold, (docs, bytes) seen per source and ``aside``, without
        trimming (``merge`` or ``finish`` trims once for all). How Ray tasks' samples come back:
        ``r.fold(*task_result); whole.merge(r)`` is the one-process sample."""
        import polars as pl

        self.merge_left_out(aside)
        if frame.height:
            self._parts.append(frame.with_columns(pl.col("source").cast(pl.Categorical)))
            self.bytes += int(frame["bytes"].sum())
        self.threshold = min(self.threshold, np.uint64(threshold))
        for name, (docs, nbytes) in seen.items():
            st = self.stats.setdefault(name, SourceStats())
            st.docs_seen += docs
            st.bytes_seen += nbytes

    def merge(self, other: "Reservoir") -> None:
        """Fold in a reservoir taken with the same seed, capacity and pattern over other documents."""
        if (other.seed, other.capacity, other.pattern) != (self.seed, self.capacity, self.pattern):
            raise ValueError("reservoirs with different seeds, capacities or patterns do not merge")
        for name, s in other.stats.items():
            mine = self.stats.setdefault(name, SourceStats())
            mine.docs_seen += s.docs_seen
            mine.bytes_seen += s.bytes_seen
        self._parts.extend(other._parts)
        if other._store.n:
            st = other._store
            self._parts.append((st.sources(), st.h[:st.n].copy(), st.ids[:st.n].copy(),
                                st.lens[:st.n].copy(), st.texts()))
        self.bytes += other.bytes
        self.threshold = min(self.threshold, other.threshold)
        self._add_aside(other._aside)
        self._trim()

    @staticmethod
    def _columns(part) -> tuple:
        """(sources, hashes, ids, bytes, texts) of a part handed in: arrays, or a frame (hash,
        source, row, bytes, text) such as ``finish`` returns (``fold``)."""
        if not isinstance(part, tuple):
            import polars as pl

            return (part["source"].cast(pl.String).to_numpy().astype(object), part["hash"].to_numpy(),
                    part["row"].to_numpy(), part["bytes"].to_numpy().astype(np.int64),
                    as_large_string(part["text"]))
        return part

    def _trim(self) -> None:
        """Keep the longest prefix, in hash order, that fits; everything after it is out for good.
        The kept pieces are moved to the front of the store in place (no copy of the sample)."""
        st = self._store
        for part in self._parts:
            src, h, ids, lens, texts = self._columns(part)
            offs, data = _buffers(texts)
            st.add(src, data, offs[:-1], offs[1:], h, ids)
        self._parts = []
        if not st.n:
            return
        rank = np.argsort(np.argsort(np.array(st.names, dtype=object)))  # names in lexical order
        n = st.n
        h, ids, lens, src = st.h[:n], st.ids[:n], st.lens[:n], rank[st.code[:n]]
        live = np.flatnonzero(h < self.threshold)
        order = live[np.lexsort((ids[live], src[live], h[live]))]  # hash, then source, then row
        fits = int(np.searchsorted(np.cumsum(lens[order]), self.capacity, side="right"))
        if fits < len(order):
            self.threshold = min(self.threshold, np.uint64(h[order[fits]]))
        st.keep(np.sort(order[:fits]))
        self.bytes = st.pos

    def finish(self) -> pl.DataFrame:
        """The sample as one frame (hash, source, row, bytes, text), in hash order; fills ``stats``.
        The frame then holds the sample (the store is emptied), so it is not held twice."""
        import polars as pl

        self._trim()
        for s in self.stats.values():
            s.docs_kept = s.bytes_kept = 0
        st = self._store
        if not st.n:
            return pl.DataFrame(
                {"hash": [], "source": [], "row": [], "bytes": [], "text": []},
                schema={"hash": pl.UInt64, "source": pl.Categorical, "row": pl.Int64, "bytes": pl.Int64, "text": pl.String},
            )
        n = st.n
        # a document is a row: its pieces (row << 20 | piece) count once
        whole = np.unique(st.code[:n].astype(np.int64) << 43 | st.ids[:n] >> 20) >> 43
        docs = np.bincount(whole, minlength=len(st.names))
        nbytes = np.bincount(st.code[:n], weights=st.lens[:n], minlength=len(st.names))
        for name, d, b in zip(st.names, docs.tolist(), nbytes.tolist()):
            if d:
                kept = self.stats.setdefault(name, SourceStats())
                kept.docs_kept, kept.bytes_kept = int(d), int(b)
        src = st.sources()
        rank = np.argsort(np.argsort(np.array(st.names, dtype=object)))
        order = np.lexsort((st.ids[:n], rank[st.code[:n]], st.h[:n]))
        # the frame's strings are views of one buffer that holds them in the order they are
        # counted (source, then row: sample_parts), so that counting reads them in place
        # (_views_in_place): the store's own buffer when it holds them so (one file a reservoir,
        # and a trim left little behind), else a copy in that order
        counted = np.lexsort((st.ids[:n], rank[st.code[:n]]))
        if st.top - st.pos <= st.pos // 8 and (counted == np.arange(n)).all():
            texts = pl.Series("text", st.texts()).gather(order)
        else:
            at = np.empty(n, np.int64)
            at[counted] = np.arange(n)
            texts = pl.Series("text", st.texts().take(pa.array(counted))).gather(at[order])
        df = pl.DataFrame({
            "hash": st.h[order], "source": pl.Series(src[order], dtype=pl.String).cast(pl.Categorical),
            "row": st.ids[order], "bytes": st.lens[order], "text": texts,
        })
        self._store, self._parts = _Store(), [df]
        return df

    def hand_over(self) -> tuple[pl.DataFrame, pl.DataFrame]:
        """(``finish()``, ``left_out()``), after which the reservoir holds no sample (its ``stats``
        stay): the caller holds the one copy. Example: ``frame, out = r.hand_over()``."""
        df = self.finish()
        out = self.left_out()
        self._parts = []
        return df, out
