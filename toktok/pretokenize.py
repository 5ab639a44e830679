"""Pre-tokenize and count: documents in, a word-count table out (the pre-tokenize stage).

Owns the GPT-4 (cl100k) split. Reads batches of documents (``pl.Series`` of str), writes a
``pl.DataFrame`` with columns ``word`` (Binary, UTF-8 bytes of one pre-token) and ``count``
(Int64). The pattern's ``\\s+(?!\\S)`` needs look-ahead, which Polars' (Rust) regex engine lacks,
so counting runs an exact look-around-free emulation (see ``COMPOUND_PATTERN``) inside Polars, on
all cores, and the ``regex`` package stays the reference (``count_words_reference``).
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence

import threading

import numpy as np
import polars as pl
import pyarrow as pa
import regex
from numba import njit

from ._kernels import _EMPTY, _grow, _hash_range, _mix
from .vocab import PATTERN

_CONTRACTION = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)"
_LETTERS = r"[^\r\n\p{L}\p{N}]?\p{L}+"
_DIGITS = r"\p{N}{1,3}"
_PUNCT = r" ?[^\s\p{L}\p{N}]+[\r\n]*"
_NEWLINES = r"\s*[\r\n]+"
_HSPACE = r"[^\S\r\n]"  # whitespace other than \r and \n

# Why this equals PATTERN. The first five alternatives are PATTERN's own. What is left at a
# position is a whitespace run without \r/\n (a run holding a newline is taken by ``\s*[\r\n]+``
# first). Followed by a non-space x, PATTERN takes the run minus its last char c (``\s+(?!\S)``)
# and then matches afresh at c: c joins letters after it, a space c joins punctuation, otherwise
# c stands alone and the next piece starts at x. Each "compound" alternative below takes the whole
# run plus that next piece, so every compound ends exactly where PATTERN's pieces end; splitting
# a compound with PATTERN itself is then exact, and only the unique compounds need splitting.
# A run at the end of the text is one piece in PATTERN (``\s+(?!\S)``) and here (``\s+``).
COMPOUND_PATTERN = "|".join(
    [
        _CONTRACTION,
        _LETTERS,
        _DIGITS,
        _PUNCT,
        _NEWLINES,
        _HSPACE + r"+\p{L}+",  # ...c + letters
        _HSPACE + r"* [^\s\p{L}\p{N}]+[\r\n]*",  # ...' ' + punctuation
        _HSPACE + "+(?:" + "|".join([_CONTRACTION, _LETTERS, _DIGITS, _PUNCT]) + ")",  # c alone
        r"\s+",
    ]
)

# A match is a compound when it holds non-space and either starts with two whitespace chars,
# or one whitespace char that does not join what follows (a digit; punctuation after a
# non-space whitespace char). Pieces like " word" and " !" are PATTERN's own and stay whole.
_IS_COMPOUND = r"^(?:\s\s|\s\p{N}|[^\S ][^\s\p{L}\p{N}])"

_REF = regex.compile(PATTERN)


def split_words(text: str) -> list[str]:
    """PATTERN's pieces of ``text`` by the ``regex`` package, e.g. ``split_words("a  b") == ["a", " ", " b"]``."""
    return _REF.findall(text)


def _cut_specials(texts: pl.Series, specials: Sequence[str]) -> pl.Series:
    """Cut special tokens out: each document becomes the segments between them (never counted)."""
    if not specials:
        return texts
    # Longest first so that a special containing another is cut whole, as tiktoken's
    # leftmost-longest-listed alternation would.
    pat = regex.compile("|".join(regex.escape(s) for s in sorted(set(specials), key=lambda s: (-len(s), s))))
    mask = texts.str.contains_any(list(specials))
    if not mask.any():
        return texts
    parts: list[str] = []
    for doc in texts.filter(mask).to_list():
        parts.extend(p for p in pat.split(doc) if p)
    return pl.concat([texts.filter(~mask), pl.Series(texts.name, parts, dtype=pl.String)])


def _match_counts(texts: pl.Series) -> pl.DataFrame:
    """Unique matches of COMPOUND_PATTERN with their counts (``word`` str, ``count`` Int64)."""
    return (
        texts.rename("word")
        .to_frame()
        .lazy()
        .select(pl.col("word").str.extract_all(COMPOUND_PATTERN))
        .explode("word")
        .drop_nulls()
        .group_by("word")
        .agg(pl.len().cast(pl.Int64).alias("count"))
        .collect()
    )


# --- the compiled scanner: PATTERN matched by hand on UTF-8 bytes ------------------------------
#
# The pattern is simple enough to match without a regex engine: a character class table (letter,
# number, whitespace, as Polars' Rust regex classifies them) and one branch per alternative, in
# the pattern's order. Pieces are counted in a hash table keyed by their bytes. It is held equal to
# the `regex` package by the same tests as the Polars path.

_L, _N, _W = 1, 2, 4


@njit(cache=True)
def _utf8_encode_all(cps):
    out = np.empty(cps.shape[0] * 4, np.uint8)
    off = np.zeros(cps.shape[0] + 1, np.int32)
    o = 0
    for i in range(cps.shape[0]):
        c = cps[i]
        if c < 0x80:
            out[o] = c
            o += 1
        elif c < 0x800:
            out[o] = 0xC0 | (c >> 6)
            out[o + 1] = 0x80 | (c & 0x3F)
            o += 2
        elif c < 0x10000:
            out[o] = 0xE0 | (c >> 12)
            out[o + 1] = 0x80 | ((c >> 6) & 0x3F)
            out[o + 2] = 0x80 | (c & 0x3F)
            o += 3
        else:
            out[o] = 0xF0 | (c >> 18)
            out[o + 1] = 0x80 | ((c >> 12) & 0x3F)
            out[o + 2] = 0x80 | ((c >> 6) & 0x3F)
            out[o + 3] = 0x80 | (c & 0x3F)
            o += 4
        off[i + 1] = o
    return out[:o], off


_TABLES: tuple[np.ndarray, np.ndarray] | None = None


def _class_tables() -> tuple[np.ndarray, np.ndarray]:
    """Per code point: class flags (letter, number, whitespace) and, for the letters of the
    contractions, the ASCII letter they fold to under (?i). Asked of Polars' own regex engine so
    that both paths classify every character the same way."""
    global _TABLES
    if _TABLES is None:
        cps = np.concatenate([np.arange(0, 0xD800), np.arange(0xE000, 0x110000)]).astype(np.int64)
        data, off = _utf8_encode_all(cps)
        arr = pa.StringArray.from_buffers(len(cps), pa.py_buffer(off), pa.py_buffer(data))
        s = pl.Series("c", arr)
        flags = np.zeros(0x110000, np.uint8)
        for bit, pat in ((_L, r"^\p{L}$"), (_N, r"^\p{N}$"), (_W, r"^\s$")):
            flags[cps[s.str.contains(pat).to_numpy()]] |= bit
        fold = np.zeros(0x110000, np.uint8)
        for ch in "strevmld":
            fold[cps[s.str.contains(f"(?i)^{ch}$").to_numpy()]] = ord(ch)
        _TABLES = (flags, fold)
    return _TABLES


@njit(cache=True, inline="always")
def _decode(data, i, e):
    """Code point at byte i and its length (input is valid UTF-8)."""
    b0 = np.int64(data[i])
    if b0 < 0x80:
        return b0, 1
    if b0 < 0xE0:
        return ((b0 & 0x1F) << 6) | (np.int64(data[i + 1]) & 0x3F), 2
    if b0 < 0xF0:
        return ((b0 & 0x0F) << 12) | ((np.int64(data[i + 1]) & 0x3F) << 6) | (np.int64(data[i + 2]) & 0x3F), 3
    return (((b0 & 0x07) << 18) | ((np.int64(data[i + 1]) & 0x3F) << 12)
            | ((np.int64(data[i + 2]) & 0x3F) << 6) | (np.int64(data[i + 3]) & 0x3F)), 4


@njit(cache=True, inline="always")
def _other(f):
    return f & (_L | _N | _W) == 0


@njit(cache=True)
def _piece_end(data, i, e, flags, fold):
    """End (exclusive) of PATTERN's match starting at byte i of a document ending at e."""
    c, n = _decode(data, i, e)
    f = flags[c]
    j = i + n
    # 1. (?i:'s|'t|'re|'ve|'m|'ll|'d)
    if c == 39 and j < e:
        c2, n2 = _decode(data, j, e)
        l2 = fold[c2]
        if l2 == 115 or l2 == 116 or l2 == 109 or l2 == 100:  # s t m d
            return j + n2
        if j + n2 < e and (l2 == 114 or l2 == 118 or l2 == 108):  # re ve ll
            c3, n3 = _decode(data, j + n2, e)
            l3 = fold[c3]
            if (l2 == 108 and l3 == 108) or (l2 != 108 and l3 == 101):
                return j + n2 + n3
    # 2. [^\r\n\p{L}\p{N}]?\p{L}+
    k = -1
    if f & _L:
        k = j
    elif f & _N == 0 and c != 10 and c != 13 and j < e:
        c2, n2 = _decode(data, j, e)
        if flags[c2] & _L:
            k = j + n2
    if k >= 0:
        while k < e:
            c2, n2 = _decode(data, k, e)
            if flags[c2] & _L == 0:
                break
            k += n2
        return k
    # 3. \p{N}{1,3}
    if f & _N:
        k = j
        for _ in range(2):
            if k >= e:
                break
            c2, n2 = _decode(data, k, e)
            if flags[c2] & _N == 0:
                break
            k += n2
        return k
    # 4.  ?[^\s\p{L}\p{N}]+[\r\n]*
    k = -1
    if _other(f):
        k = j
    elif c == 32 and j < e:
        c2, n2 = _decode(data, j, e)
        if _other(flags[c2]):
            k = j + n2
    if k >= 0:
        while k < e:
            c2, n2 = _decode(data, k, e)
            if not _other(flags[c2]):
                break
            k += n2
        while k < e and (data[k] == 10 or data[k] == 13):
            k += 1
        return k
    # 5. \s*[\r\n]+ : c is whitespace; the match ends after the run's last newline, if any
    k = i
    last_nl = -1
    last_start = i
    chars = 0
    while k < e:
        c2, n2 = _decode(data, k, e)
        if flags[c2] & _W == 0:
            break
        if c2 == 10 or c2 == 13:
            last_nl = k + 1
        last_start = k
        chars += 1
        k += n2
    if last_nl >= 0:
        return last_nl
    # 6. \s+(?!\S) and 7. \s+ : a run at the end is whole; before non-space it leaves its last
    #    char to the next piece, unless it is one char long
    if k >= e or chars == 1:
        return k
    return last_start


@njit(cache=True)
def _wtable(cap):
    # one row per word: key, count, arena offset, length (a probe touches one cache line)
    T = np.zeros((cap, 4), np.int64)
    T[:, 0] = _EMPTY
    return T


_LONG = np.int64(1) << 61


@njit(cache=True, inline="always")
def _word_key(data, i, n):
    """Words of up to 7 bytes are their own key (bytes + length, exact); longer ones a hash
    with bit 61 set, so the two kinds never collide and only long words need a byte compare."""
    if n <= 7:
        k = np.int64(n) << 56
        for x in range(n):
            k |= np.int64(data[i + x]) << (8 * x)
        return k
    return (_hash_range(data, i, n) >> 2) | _LONG


@njit(cache=True, inline="always")
def _insert(T, arena, st, key, data, i, n, add):
    """Add ``add`` to the count of word data[i:i+n] (key from ``_word_key``). ``st`` holds
    [rows used, arena bytes used, bytes of short words]. Returns the (maybe grown) table and arena."""
    cap = T.shape[0]
    mask = np.uint64(cap - 1)
    s = _mix(key) & mask
    while True:
        k = T[s, 0]
        if k == key:
            if n <= 7:
                break
            o = T[s, 2]
            same = T[s, 3] == n
            if same:
                for x in range(n):
                    if arena[o + x] != data[i + x]:
                        same = False
                        break
            if same:
                break
        elif k == _EMPTY:
            T[s, 0] = key
            T[s, 3] = n
            if n > 7:
                arena = _grow(arena, st[1] + n)
                arena[st[1] : st[1] + n] = data[i : i + n]
                T[s, 2] = st[1]
                st[1] += n
            else:
                st[2] += n
            st[0] += 1
            break
        s = (s + np.uint64(1)) & mask
    T[s, 1] += add
    if 2 * st[0] > cap:
        T = _regrow(T)
    return T, arena


@njit(cache=True)
def _regrow(T):
    cap = T.shape[0] * 2
    N = _wtable(cap)
    m2 = np.uint64(cap - 1)
    for x in range(T.shape[0]):
        if T[x, 0] != _EMPTY:
            t = _mix(T[x, 0]) & m2
            while N[t, 0] != _EMPTY:
                t = (t + np.uint64(1)) & m2
            for c in range(4):
                N[t, c] = T[x, c]
    return N


@njit(cache=True, inline="always")
def _find(T, arena, key, data, i, n):
    """Row of word data[i:i+n] in T, or -(empty row + 1) where it would go."""
    mask = np.uint64(T.shape[0] - 1)
    s = _mix(key) & mask
    while True:
        k = T[s, 0]
        if k == key:
            if n <= 7:
                return np.int64(s)
            if T[s, 3] == n:
                o = T[s, 2]
                same = True
                for x in range(n):
                    if arena[o + x] != data[i + x]:
                        same = False
                        break
                if same:
                    return np.int64(s)
        elif k == _EMPTY:
            return -np.int64(s) - 1
        s = (s + np.uint64(1)) & mask


@njit(cache=True, nogil=True)
def _scan_into(data, offsets, lo, hi, flags, fold, T, arena, st):
    """Count PATTERN's pieces of documents lo..hi-1 into the table T."""
    for d in range(lo, hi):
        i = offsets[d]
        e = offsets[d + 1]
        while i < e:
            j = _piece_end(data, i, e, flags, fold)
            n = j - i
            key = _word_key(data, i, n)
            s = _find(T, arena, key, data, i, n)
            if s >= 0:
                T[s, 1] += 1
            else:
                # a new word: the only place where the table or the arena may grow
                T, arena = _insert(T, arena, st, key, data, i, n, 1)
            i = j
    return T, arena


@njit(cache=True)
def _merge_into(T, arena, st, T2, arena2):
    """Add every word of table T2 into T."""
    for s in range(T2.shape[0]):
        if T2[s, 0] != _EMPTY:
            n = T2[s, 3]
            if n <= 7:
                T, arena = _insert(T, arena, st, T2[s, 0], arena2, 0, n, T2[s, 1])
            else:
                T, arena = _insert(T, arena, st, T2[s, 0], arena2, T2[s, 2], n, T2[s, 1])
    return T, arena


@njit(cache=True)
def _export(T, arena, st):
    used = st[0]
    out_off = np.zeros(used + 1, np.int64)
    out_cnt = np.empty(used, np.int64)
    out_data = np.empty(st[1] + st[2], np.uint8)
    o = 0
    w = 0
    for s in range(T.shape[0]):
        key = T[s, 0]
        if key != _EMPTY:
            n = T[s, 3]
            if n <= 7:
                for x in range(n):
                    out_data[o + x] = (key >> (8 * x)) & 0xFF
            else:
                a = T[s, 2]
                out_data[o : o + n] = arena[a : a + n]
            o += n
            out_cnt[w] = T[s, 1]
            w += 1
            out_off[w] = o
    return out_data, out_off, out_cnt


_EMPTY_COUNTS = {"word": pl.Binary, "count": pl.Int64}


class WordCounter:
    """Counts PATTERN's pieces over many batches of documents; ``result()`` gives the table.

    The compiled engine ("scan") keeps one hash table per thread across batches (each batch is cut
    into slices of about equal bytes, one per thread; the scanner releases the GIL) and merges
    them once at the end, so memory grows with the number of distinct words, not with the corpus.
    The "polars" engine runs the look-around-free emulation inside Polars. Both are exact.
    Example: ``c = WordCounter(); c.add(["a a"]); dict(c.result().iter_rows())[b" a"] == 1``.
    """

    def __init__(self, specials: Sequence[str] = (), threads: int = 0, engine: str = "scan"):
        if engine not in ("scan", "polars"):
            raise ValueError(f"unknown engine {engine!r}")
        self.specials = list(specials)
        self.threads = threads or pl.thread_pool_size()
        self.engine = engine
        self._frames: list[pl.DataFrame] = []
        self._tables: list[list] = []

    def add(self, texts: pl.Series | Iterable[str]) -> None:
        if not isinstance(texts, pl.Series):
            texts = pl.Series("text", list(texts), dtype=pl.String)
        texts = _cut_specials(texts.drop_nulls(), self.specials)
        if texts.len() == 0:
            return
        if self.engine == "polars":
            self._frames.append(_count_polars(texts, self.threads))
            if len(self._frames) > 8:  # keep the partial tables few
                self._frames = [pl.concat(self._frames).group_by("word").agg(pl.col("count").sum())]
            return
        self._scan(texts)

    def _scan(self, texts: pl.Series) -> None:
        flags, fold = _class_tables()
        arr = texts.to_arrow()
        arr = arr.combine_chunks() if isinstance(arr, pa.ChunkedArray) else arr
        if not pa.types.is_large_string(arr.type):
            arr = arr.cast(pa.large_string())
        off = np.frombuffer(arr.buffers()[1], np.int64)[arr.offset : arr.offset + len(arr) + 1]
        buf = arr.buffers()[2]
        data = np.frombuffer(buf, np.uint8) if buf is not None else np.zeros(1, np.uint8)
        k = max(1, min(self.threads, len(arr)))
        while len(self._tables) < k:
            self._tables.append([_wtable(1 << 16), np.empty(1 << 16, np.uint8), np.zeros(3, np.int64)])
        cuts = np.searchsorted(off, np.linspace(off[0], off[-1], k + 1)).tolist()
        cuts[0], cuts[-1] = 0, len(arr)

        def work(i: int) -> None:
            tb = self._tables[i]
            tb[0], tb[1] = _scan_into(data, off, cuts[i], cuts[i + 1], flags, fold, tb[0], tb[1], tb[2])

        workers = [threading.Thread(target=work, args=(i,)) for i in range(1, k)]
        for w in workers:
            w.start()
        work(0)
        for w in workers:
            w.join()

    def result(self) -> pl.DataFrame:
        """One row per distinct word: ``word`` (Binary), ``count`` (Int64)."""
        if self.engine == "polars":
            if not self._frames:
                return pl.DataFrame({"word": [], "count": []}, schema=_EMPTY_COUNTS)
            return pl.concat(self._frames).group_by("word").agg(pl.col("count").sum())
        if not self._tables:
            return pl.DataFrame({"word": [], "count": []}, schema=_EMPTY_COUNTS)
        T, arena, st = self._tables[0]
        for T2, arena2, _ in self._tables[1:]:
            T, arena = _merge_into(T, arena, st, T2, arena2)
        self._tables = [[T, arena, st]]
        words, woff, cnt = _export(T, arena, st)
        col = pa.LargeBinaryArray.from_buffers(pa.large_binary(), cnt.shape[0], [None, pa.py_buffer(woff), pa.py_buffer(words)])
        return pl.DataFrame({"word": pl.Series("word", col).cast(pl.Binary), "count": cnt})


def count_words(
    texts: pl.Series | Iterable[str], specials: Sequence[str] = (), threads: int = 0, engine: str = "scan"
) -> pl.DataFrame:
    """Word counts of PATTERN's pieces over documents, identical to ``regex.findall`` + Counter.

    Returns columns ``word`` (Binary) and ``count`` (Int64), one row per distinct word, in no
    particular order. Special tokens are cut out first and never counted. ``engine`` is "scan"
    (the compiled scanner) or "polars" (the emulation inside Polars); ``threads=0`` uses every core.
    Example: ``count_words(["a a"]).sort("word").rows() == [(b" a", 1), (b"a", 1)]``.
    """
    counter = WordCounter(specials, threads, engine)
    counter.add(texts)
    return counter.result()


def _count_polars(texts: pl.Series, n: int) -> pl.DataFrame:
    """COMPOUND_PATTERN in Polars, then the unique compounds split by the reference."""
    # 2. match and count in Polars; slices run in parallel because one string column is
    #    matched on one thread
    if n > 1 and texts.len() >= 2 * n:
        step = -(-texts.len() // n)
        frames = [texts.slice(i, step).rename("word").to_frame().lazy() for i in range(0, texts.len(), step)]
        queries = [
            f.select(pl.col("word").str.extract_all(COMPOUND_PATTERN)).explode("word").drop_nulls()
            .group_by("word").agg(pl.len().cast(pl.Int64).alias("count"))
            for f in frames
        ]
        counts = pl.concat(pl.collect_all(queries)).group_by("word").agg(pl.col("count").sum())
    else:
        counts = _match_counts(texts)

    # 3. split the unique compounds with the reference pattern and fold them back in
    is_compound = counts["word"].str.contains(_IS_COMPOUND)
    compounds = counts.filter(is_compound)
    if compounds.height:
        words, cnts = [], []
        for w, c in compounds.iter_rows():
            for piece in _REF.findall(w):
                words.append(piece)
                cnts.append(c)
        split = pl.DataFrame({"word": words, "count": cnts}, schema={"word": pl.String, "count": pl.Int64})
        counts = pl.concat([counts.filter(~is_compound), split]).group_by("word").agg(pl.col("count").sum())

    # 4. words as bytes: the merge loop and the DuckDB table work on bytes
    return counts.select(pl.col("word").cast(pl.Binary), pl.col("count"))


def count_words_reference(texts: Iterable[str], specials: Sequence[str] = ()) -> Counter[bytes]:
    """The slow reference: ``regex.findall(PATTERN)`` per document after cutting specials."""
    pat = (
        regex.compile("|".join(regex.escape(s) for s in sorted(set(specials), key=lambda s: (-len(s), s))))
        if specials
        else None
    )
    out: Counter[bytes] = Counter()
    for doc in texts:
        if doc is None:
            continue
        for seg in pat.split(doc) if pat else [doc]:
            out.update(p.encode() for p in _REF.findall(seg))
    return out
