"""The per-thread word hash table the scanners count into: its rows and arena, growing, folding
the threads' tables into one count per word, and writing the words out (offsets or Arrow binary
views). Example: ``tb = _Table(2); tb.words == 0``."""
from __future__ import annotations

import mmap
import sys
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from ..._kernels import _EMPTY, inlined, njit
from .swar import _ld8

# --- counting tables ---------------------------------------------------------------------------
#
# One open-addressing table per thread, rows of two int64: key and count (16 bytes; linear
# probing). A word of up to 7 bytes is its own key: its bytes, little-endian, and its length in
# bits 56-58, so it is compared exactly without touching anything else. A longer word lives in
# the table's arena (a 1-byte length, or 255 and an 8-byte length, then the bytes); its key is
# bit 62, the top 26 bits of its hash (in bits 36-61) and its arena offset (bits 0-35): a table
# that grows or merges finds a word's row from its key, without reading its bytes, and a probe
# compares bytes only when those hash bits agree (words whose first row is the same share the
# bits that chose it, and differ in the rest: 6 bits in a part of 2**20 rows, 1 in 64 alike).
# Kernels never allocate: when a table or an arena is full they return, Python grows it
# (``_pages``) and calls again from where they stopped.
#
# A thread's table is cut into one part per thread by bits 8-23 of the words' hash. Each part is
# a table of its own: 2**cbits rows, at most 70% full, its rows picked by the hash's top bits,
# its probes wrapping inside it. So merging the threads' tables is one part per thread, and it
# inserts nothing: thread p takes part p of the tables in turn, and moves the count of each of
# their words into the first table before it that holds the word, leaving 0. Each word is then
# counted in one row, of the first table that holds it, which the export reads where it is: no
# table grows at the merge (growing touches new memory, which cost more than the merge itself),
# and each thread reads only its share of the tables. A row left at 0 stays a row of its table:
# counting on adds to it, and the next merge moves that count again (the tables' order stays, so
# the first table holding a word has never been moved from: its row is never at 0).
# st (per table, int64): row 0: 1 arena bytes used, 3/4 resume document and byte, 5 arena bytes
# needed; row 1 + p, for part p: 0 words, 1 arena bytes of its words, 2 bytes of short words,
# 6 bytes of long words, 7 bytes of words longer than 12 (those that an Arrow binary view does
# not hold inline).

_LONG = np.int64(1) << 62
_OFF_BITS = 36
_OFF_MASK = (np.int64(1) << _OFF_BITS) - 1
_HEAD_MASK = ~_OFF_MASK
_TAG_BITS = 26
_TAG_MASK = (np.int64(1) << _TAG_BITS) - 1
_MAX_LOAD = (7, 10)  # a part's words <= its rows * 7 // 10
_MIN_BITS = 10  # a part has at least 2**10 rows
_ST = 8


@inlined
def _low(n):
    """Mask of the low n bytes, n in 0..7."""
    return (np.uint64(1) << np.uint64(8 * n)) - np.uint64(1)


@inlined
def _short_hash(key):
    x = np.uint64(key)
    x ^= x >> np.uint64(29)
    x *= np.uint64(0x9E3779B97F4A7C15)
    x ^= x >> np.uint64(32)
    return x


@inlined
def _long_hash(d64, data, base, i, n):
    h = np.uint64(n) * np.uint64(0x9E3779B97F4A7C15)
    p = i
    end = i + n
    while p + 8 <= end:
        h = (h ^ _ld8(d64, data, base, p)) * np.uint64(0xFF51AFD7ED558CCD)
        h ^= h >> np.uint64(32)
        p += 8
    if p < end:
        h = (h ^ (_ld8(d64, data, base, p) & _low(end - p))) * np.uint64(0xFF51AFD7ED558CCD)
        h ^= h >> np.uint64(32)
    h *= np.uint64(0xC4CEB9FE1A85EC53)
    h ^= h >> np.uint64(29)
    return h


@inlined
def _home(h, parts, cbits):
    """The row where the word of hash h is looked for first in a table of ``parts`` parts of
    2**cbits rows: its part, from bits 8-23 of h (a multiply, not a division), then a row of the
    part from the top bits of h (independent of the part, so a part is a table of its own)."""
    p = np.int64((((h >> np.uint64(8)) & np.uint64(0xFFFF)) * np.uint64(parts)) >> np.uint64(16))
    return (p << cbits) | np.int64(h >> np.uint64(64 - cbits))


@inlined
def _limit(cbits):
    return (np.int64(1) << cbits) * _MAX_LOAD[0] // _MAX_LOAD[1]


@inlined
def _arena_word(arena, o):
    """(start, length) of the word stored at arena offset o."""
    n = np.int64(arena[o])
    if n < 255:
        return o + 1, n
    n = 0
    for t in range(8):
        n |= np.int64(arena[o + 1 + t]) << (8 * t)
    return o + 9, n


@inlined
def _holds(arena, k, data, i, n):
    """Whether long-word key k's word in ``arena`` is data[i:i+n]."""
    w, m = _arena_word(arena, k & _OFF_MASK)
    if m != n:
        return False
    for x in range(n):
        if arena[w + x] != data[i + x]:
            return False
    return True


@inlined
def _head(h):
    """A long word's key without its arena offset: the flag and the top bits of its hash h."""
    return _LONG | (np.int64(h >> np.uint64(64 - _TAG_BITS)) << _OFF_BITS)


@inlined
def _bump_short(T, st, cbits, s, key, n):
    """Count short word ``key`` whose home row is s once; False (nothing done) when its part
    must grow first."""
    cmask = (np.int64(1) << cbits) - 1
    q = 1 + (s >> cbits)
    while True:
        k = T[s, 0]
        if k == key:
            T[s, 1] += 1
            return True
        if k == _EMPTY:
            if st[q, 0] >= _limit(cbits):
                return False
            T[s, 0] = key
            T[s, 1] = 1
            st[q, 0] += 1
            st[q, 2] += n
            return True
        s = (s & ~cmask) | ((s + 1) & cmask)


@inlined
def _bump_long(T, arena, st, cbits, s, d64, data, base, i, n, head):
    """Count long word data[i:i+n] of key head ``head`` (``_head``) and home row s once; False
    (nothing done) when its part or the arena (``st[0, 5]`` bytes needed) must grow first."""
    cmask = (np.int64(1) << cbits) - 1
    q = 1 + (s >> cbits)
    while True:
        k = T[s, 0]
        if k == _EMPTY:
            o = st[0, 1]
            w = o + 1 if n < 255 else o + 9
            if st[q, 0] >= _limit(cbits) or w + n > arena.shape[0]:
                st[0, 5] = w + n
                return False
            if n < 255:
                arena[o] = n
            else:
                arena[o] = 255
                for t in range(8):
                    arena[o + 1 + t] = (n >> (8 * t)) & 0xFF
            for x in range(n):
                arena[w + x] = data[i + x]
            st[0, 1] = w + n
            st[q, 1] += w + n - o
            st[q, 6] += n
            if n > 12:
                st[q, 7] += n
            T[s, 0] = head | o
            T[s, 1] = 1
            st[q, 0] += 1
            return True
        if k & _HEAD_MASK == head and _holds(arena, k, data, i, n):
            T[s, 1] += 1
            return True
        s = (s & ~cmask) | ((s + 1) & cmask)


@inlined
def _probe(T, d64, data, base, i, n, parts, cbits):
    """(key, hash, home row, that row's key now) of piece data[i:i+n], n >= 1: a short piece's
    key is its bytes (``_bump_short``), a long one's row is found from the hash of its bytes. The
    row's key is loaded here, a piece ahead of :func:`_count_piece`, so a cache miss on a rare
    word overlaps with scanning the next piece instead of stalling it."""
    key = np.int64(0)
    if n <= 7:
        key = np.int64(_ld8(d64, data, base, i) & _low(n)) | (n << 56)
        h = _short_hash(key)
    else:
        h = _long_hash(d64, data, base, i, n)
    s = _home(h, parts, cbits)
    return key, h, s, T[s, 0]


@inlined
def _count_piece(T, arena, st, cbits, d64, data, base, i, n, key, h, s, t):
    """Count piece data[i:i+n] once (``key``, ``h``, ``s``, ``t``: what :func:`_probe` gave for
    it); False (nothing done) when T or the arena must grow first. The loop of every scanner, the
    named ones' (:mod:`.loop`) and the compiled patterns' (``rx.vm``), counts through it."""
    if n <= 7:
        if t == key:  # the home row held the word when probed (rows never change word)
            T[s, 1] += 1
            return True
        return _bump_short(T, st, cbits, s, key, n)
    return _bump_long(T, arena, st, cbits, s, d64, data, base, i, n, _head(h))


@inlined
def _top(k, arena, a64, cbits):
    """The top cbits bits of the hash of the word of key k: for a long word, from its key when
    they are there, else from its bytes in the arena."""
    if k & _LONG:
        if cbits <= _TAG_BITS:
            return ((k >> _OFF_BITS) & _TAG_MASK) >> (_TAG_BITS - cbits)
        w, n = _arena_word(arena, k & _OFF_MASK)
        return np.int64(_long_hash(a64, arena, np.int64(0), w, n) >> np.uint64(64 - cbits))
    return np.int64(_short_hash(k) >> np.uint64(64 - cbits))


@njit(cache=True, no_cfunc_wrapper=True, nogil=True, _nrt=False)
def _rehash(T, N, arena, a64, cbits):
    """Move every row of T into the empty table N of as many parts, of 2**cbits rows each."""
    parts = N.shape[0] >> cbits
    old = T.shape[0] // parts  # rows of a part of T
    cmask = (np.int64(1) << cbits) - 1
    for r in range(T.shape[0]):
        k = T[r, 0]
        if k == _EMPTY:
            continue
        s = (r // old << cbits) | _top(k, arena, a64, cbits)
        while N[s, 0] != _EMPTY:
            s = (s & ~cmask) | ((s + 1) & cmask)
        N[s, 0] = k
        N[s, 1] = T[r, 1]


@njit(cache=True, no_cfunc_wrapper=True, nogil=True, _nrt=False)
def _fold(S, sarena, sa64, D, darena, dcbits):
    """Move the count of each word of S (rows of a part; rows at 0 skipped) into D (a part of
    2**dcbits rows) where D holds the word, leaving 0 in S. Returns what S still counts: its
    words, their bytes, and the bytes of those longer than 12."""
    cmask = (np.int64(1) << dcbits) - 1
    words = np.int64(0)
    nbytes = np.int64(0)
    long13 = np.int64(0)
    for r in range(S.shape[0]):
        k = S[r, 0]
        c = S[r, 1]
        if k == _EMPTY or c == 0:
            continue
        s = _top(k, sarena, sa64, dcbits)
        long = k & _LONG != 0
        if long:
            w, n = _arena_word(sarena, k & _OFF_MASK)
        else:
            w, n = np.int64(0), k >> 56
        head = k & _HEAD_MASK
        found = False
        while True:
            t = D[s, 0]
            if t == _EMPTY:
                break
            if (not long and t == k) or (long and t & _HEAD_MASK == head and _holds(darena, t, sarena, w, n)):
                found = True
                break
            s = (s & ~cmask) | ((s + 1) & cmask)
        if found:
            D[s, 1] += c
            S[r, 1] = 0
        else:
            words += 1
            nbytes += n
            if n > 12:
                long13 += n
    return words, nbytes, long13


@njit(cache=True, no_cfunc_wrapper=True, nogil=True, _nrt=False)
def _export(T, arena, out_data, out_off, out_cnt, w, o):
    """Write T's words (with a count) from row w / byte o of the output on (``out_off[w]``
    already set); returns the row and byte after them."""
    for s in range(T.shape[0]):
        k = T[s, 0]
        if k == _EMPTY or T[s, 1] == 0:
            continue
        if k & _LONG:
            a, n = _arena_word(arena, k & _OFF_MASK)
            for x in range(n):
                out_data[o + x] = arena[a + x]
        else:
            n = k >> 56
            for x in range(n):
                out_data[o + x] = (k >> (8 * x)) & 0xFF
        o += n
        out_cnt[w] = T[s, 1]
        w += 1
        out_off[w] = o
    return w, o


@njit(cache=True, no_cfunc_wrapper=True, nogil=True, _nrt=False)
def _export_views(T, arena, views, vdata, out_cnt, w, o):
    """Write T's words (with a count) as Arrow binary views (16 bytes each: length, then the word
    if it has at most 12 bytes, else its first 4 bytes, buffer 0 and its offset in ``vdata``)
    from row w and ``vdata`` byte o on; returns the row and byte after them."""
    for s in range(T.shape[0]):
        k = T[s, 0]
        if k == _EMPTY or T[s, 1] == 0:
            continue
        v = w * 16
        for x in range(16):
            views[v + x] = 0
        if k & _LONG:
            a, n = _arena_word(arena, k & _OFF_MASK)
        else:
            a = -1
            n = k >> 56
        for x in range(4):
            views[v + x] = (n >> (8 * x)) & 0xFF
        if a < 0:
            for x in range(n):
                views[v + 4 + x] = (k >> (8 * x)) & 0xFF
        elif n <= 12:
            for x in range(n):
                views[v + 4 + x] = arena[a + x]
        else:
            for x in range(4):
                views[v + 4 + x] = arena[a + x]
                views[v + 12 + x] = (o >> (8 * x)) & 0xFF
            for x in range(n):
                vdata[o + x] = arena[a + x]
            o += n
        out_cnt[w] = T[s, 1]
        w += 1
    return w, o


class _Table:
    """A counting table of ``parts`` parts, and its arena (see above); grows on the kernels'
    request. ``rows`` is what the parts start with, together."""

    __slots__ = ("T", "arena", "st", "cbits")

    def __init__(self, parts: int = 1, rows: int = 1 << 16, arena: int = 1 << 16):
        self.cbits = max(_MIN_BITS, (max(1, rows // parts) - 1).bit_length())
        self.T = _new_rows(parts << self.cbits)
        self.arena = _pages(arena, np.uint8)
        self.st = np.zeros((1 + parts, _ST), np.int64)

    @property
    def parts(self) -> int:
        return self.st.shape[0] - 1

    @property
    def words(self) -> int:
        return int(self.st[1:, 0].sum())

    def rows(self, p: int) -> np.ndarray:
        """The rows of part p (a view)."""
        return self.T[p << self.cbits : (p + 1) << self.cbits]

    # The kernels that only read a table's arena get read-only views of it, as the scanner gets
    # the text: one compiled version of each helper that reads words, not one per writability.
    def arena_view(self) -> np.ndarray:
        """The arena as a read-only view."""
        return _readonly(self.arena.view())

    def a64(self) -> np.ndarray:
        """The arena as read-only uint64 words (a part's arena may end inside the last one)."""
        if sys.byteorder != "little":
            return _NO_WORDS
        return _readonly(self.arena[: self.arena.shape[0] // 8 * 8].view(np.uint64))

    def grow(self, words: int = 0) -> None:
        """Make room for one more word (as the last kernel call asked), or for ``words`` more
        in a part."""
        want = int(self.st[1:, 0].max()) + max(1, words)
        cbits = self.cbits
        while (1 << cbits) * _MAX_LOAD[0] // _MAX_LOAD[1] < want:
            cbits += 1
        if cbits > self.cbits:
            N = _new_rows(self.parts << cbits)
            _rehash(self.T, N, self.arena_view(), self.a64(), cbits)
            self.T, self.cbits = N, cbits
        self.fit_arena(int(self.st[0, 5]))

    def fit_arena(self, need: int) -> None:
        """Make the arena hold at least ``need`` bytes."""
        if need > self.arena.shape[0]:
            if need >= 1 << _OFF_BITS:
                raise MemoryError("toktok: more than 64 GB of distinct long words")
            size = 2 * self.arena.shape[0]
            while size < need:
                size *= 2
            grown = _remapped(self, size)
            if grown is None:
                grown = _pages(size, np.uint8)
                grown[: self.st[0, 1]] = self.arena[: self.st[0, 1]]
            self.arena = grown


def _remapped(tb: _Table, size: int) -> np.ndarray | None:
    """``tb``'s arena grown to ``size`` bytes where its mapping is moved, not copied (``mremap``:
    the words it holds keep their pages, so a growth costs no fresh page for them, where a copy
    faulted them all in again); None where it cannot be (another view of it is alive, or the
    system has no ``mremap``): the caller copies it."""
    base = tb.arena.base
    m = base.obj if isinstance(base, memoryview) else None
    if not isinstance(m, mmap.mmap) or not _PRIVATE:
        return None
    del base
    tb.arena = None  # (its view is given back: a mapping with views resizes nothing)
    try:
        m.resize(size)
    except (BufferError, OSError, ValueError, SystemError):
        tb.arena = np.frombuffer(m, np.uint8)  # as it was
        return None
    return np.frombuffer(m, np.uint8, count=size)


def _new_rows(cap: int) -> np.ndarray:
    T = _pages(2 * cap, np.int64).reshape(cap, 2)
    T[:, 0] = _EMPTY
    return T


def _pages(n: int, dtype) -> np.ndarray:
    """A new array of n items, in memory mapped for it: without the huge pages NumPy asks for
    large arrays, for which Linux stops to compact memory when it is full of cached files (as
    when reading a corpus); a system that gives huge pages to all memory still gives them, where
    it has them free. Counting the bench corpus, 6-8 runs each: the tables' growth took 0.11-0.20
    s of CPU against 0.08-0.35 s on one thread (scanning within noise), 0.19-0.22 s against 0.23-
    0.37 s on two; a fresh 1.1M-word export 0.1 s against 0.2 s. Private memory (``MAP_PRIVATE``),
    not the shared memory an anonymous ``mmap`` is by default: the kernel hands out fresh private
    pages for about 40% less system time than shared ones (512 MB: 0.19 s against 0.31 s).
    Example: ``_pages(4, np.int64)``."""
    return np.frombuffer(mmap.mmap(-1, max(1, n * np.dtype(dtype).itemsize), **_PRIVATE), dtype, count=n)


#: ``_pages``' mapping flags (none where ``mmap`` has no ``MAP_PRIVATE``: Windows).
_PRIVATE = {"flags": mmap.MAP_PRIVATE} if hasattr(mmap, "MAP_PRIVATE") else {}


def _readonly(a: np.ndarray) -> np.ndarray:
    a.flags.writeable = False
    return a


# Read-only like the Arrow buffers they stand in for: one compiled scanner for both
_NO_WORDS = _readonly(np.zeros(0, np.uint64))


def _words64(data: np.ndarray) -> tuple[np.ndarray, int]:
    """``data`` as aligned little-endian uint64 words from byte ``base`` on, for ``_ld8``."""
    if sys.byteorder != "little" or data.shape[0] < 64:
        return _NO_WORDS, 0
    base = -data.ctypes.data % 8
    return data[base : base + (data.shape[0] - base) // 8 * 8].view(np.uint64), base


def _in_threads(fn, n: int) -> None:
    """fn(0..n-1), one thread each (the kernels release the GIL); errors are raised here."""
    if n == 1:
        fn(0)
        return
    with ThreadPoolExecutor(n - 1) as ex:
        futs = [ex.submit(fn, i) for i in range(1, n)]
        fn(0)
        for f in futs:
            f.result()


def _fold_tables(tables: list[_Table]) -> np.ndarray:
    """Sum the words of the threads' ``tables`` (of as many parts each) where they are: thread p
    takes part p of the tables in turn and moves the count of each word into the first table
    before it that holds the word (``_fold``), so each word ends up counted in one row. The
    tables must be in the order of any earlier fold. Returns, per part and table, what the
    table still counts there: words, their bytes, the bytes of those longer than 12 (for the
    first table, never moved from, what its st says)."""
    kept = np.zeros((tables[0].parts, len(tables), 3), np.int64)

    def work(p: int) -> None:
        st = tables[0].st[1 + p]
        kept[p, 0] = st[0], st[2] + st[6], st[7]
        for k in range(1, len(tables)):
            S, arena, a64 = tables[k].rows(p), tables[k].arena_view(), tables[k].a64()
            for d in tables[:k]:
                kept[p, k] = _fold(S, arena, a64, d.rows(p), d.arena_view(), d.cbits)

    _in_threads(work, len(kept))
    return kept
