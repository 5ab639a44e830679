"""Pre-tokenize and count: documents in, a word-count table out (the pre-tokenize stage).

Owns how each pre-tokenizer pattern (:mod:`toktok.patterns`) splits text. Reads batches of
documents (Arrow arrays or Polars Series of str), writes a table with columns ``word`` (Binary,
UTF-8 bytes of one pre-token) and ``count`` (Int64): a Polars frame (``result``), or an Arrow
table sorted by word (``table``, as a phase's count hands it on). A batch small enough for the
reference is counted as Python strings and never loads Polars. A named pattern (cl100k, o200k, gpt2, qwen2) is
counted by a compiled matcher of it on UTF-8 bytes with per-thread hash tables; any other regex by
the ``regex`` package on the counting threads. The ``regex`` package is the reference the
matchers are tested equal to (``tests/oracles``, with an exact look-around-free emulation of
cl100k inside Polars that the tests hold to the same reference).
"""
from __future__ import annotations

import hashlib
import itertools
import mmap
import os
import sys
import tempfile
import threading
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import regex
from .._kernels import _EMPTY, _empty_array, _zero_array, compiled, inlined, intrinsic, njit, ready
from ..patterns import DEFAULT, Pattern
from .cuts import pieces
from .sample import _buffers, as_large_string

if TYPE_CHECKING:
    import polars as pl


def _cut_specials(texts: pa.Array, specials: Sequence[str]) -> pa.Array:
    """Cut special tokens out: each document becomes the segments between them (never counted)."""
    if not specials or not len(texts):
        return texts
    import pyarrow.compute as pc  # (a run with special tokens and a batch past the reference's)

    mask = None
    for special in sorted(set(specials)):
        found = pc.match_substring(texts, special)
        mask = found if mask is None else pc.or_(mask, found)
    if not pc.any(mask).as_py():
        return texts
    parts = _cut_specials_py(texts.filter(mask).to_pylist(), specials)
    return pa.concat_arrays([texts.filter(pc.invert(mask)), pa.array(parts, pa.large_string())])


# --- the compiled scanners: each named pattern matched by hand on UTF-8 bytes -------------------
#
# The patterns are simple enough to match without a regex engine: a character class table (letter,
# number, whitespace, as Polars' Rust regex classifies them; o200k's letter classes too) and one
# branch per alternative, in the pattern's order. One kernel per pattern (the same loop, the
# pattern's ``piece_end`` inlined): one kernel taking the pattern as a runtime parameter measured
# 1-3% more CPU time per pass, and compiles every pattern's code on cl100k's first large run. ASCII chars are classified by a 256-entry byte table, runs of ASCII letters
# and punctuation are skipped 8 bytes at a time, and only bytes >= 0x80 are decoded. Pieces are
# counted in a hash table keyed by their bytes. It is held equal to the `regex` package by the
# same tests as the Polars path.
#
# The kernels are compiled with Numba's reference counting off (``_nrt=False``): they allocate
# nothing, and the atomic increments and decrements of the arrays' reference counts that Numba
# otherwise emits around inlined helpers cost more than the scanning itself (and contend between
# threads that share the text).

_L, _N, _W = 1, 2, 4  # letter, number, whitespace: per code point, from Polars
_HI, _NL, _SP, _AP = 8, 16, 32, 64  # per byte only: lead of a non-ASCII char, \r or \n, ' ', '
# o200k's tables only (uint16): in [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}], in [\p{Ll}\p{Lm}\p{Lo}\p{M}]; per byte: '/'
_UP, _LO, _SL = 256, 512, 1024


@njit(cache=True, no_cfunc_wrapper=True)
def _utf8_encode_all(cps):
    out = _empty_array(cps.shape[0] * 4, np.uint8)
    off = _zero_array(cps.shape[0] + 1, np.int32)
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
_BYTE_CLASSES: np.ndarray | None = None
_SWAR_OK: bool | None = None

# What the class tables are made of; the cache file's name carries a digest of it and the Polars
# version, so a change to either computes the tables afresh.
_CLASS_PATTERNS = ((_L, r"^\p{L}$"), (_N, r"^\p{N}$"), (_W, r"^\s$"))
_FOLDS = "strevmld"
_CLASS_CHUNK = 1 << 16


def _class_chunks() -> Iterator[tuple[np.ndarray, pl.Series]]:
    """Every code point (surrogates left out) as (code points, a String Series of their chars),
    64K at a time (a Series of all 1.1M code points at once costs ~84 MB of transient memory)."""
    import polars as pl

    for lo in range(0, 0x110000, _CLASS_CHUNK):
        cps = np.arange(lo, min(lo + _CLASS_CHUNK, 0x110000), dtype=np.int64)
        cps = cps[(cps < 0xD800) | (cps > 0xDFFF)]  # surrogates are not characters
        data, off = _utf8_encode_all(cps)
        yield cps, pl.Series("c", pa.StringArray.from_buffers(len(cps), pa.py_buffer(off), pa.py_buffer(data)))


def _compute_class_tables() -> tuple[np.ndarray, np.ndarray]:
    """The tables asked of Polars' regex engine."""
    import polars as pl

    flags = np.zeros(0x110000, np.uint8)
    fold = np.zeros(0x110000, np.uint8)
    for cps, s in _class_chunks():
        for bit, pat in _CLASS_PATTERNS:
            flags[cps[s.str.contains(pat).to_numpy()]] |= bit
        # the folds of the contraction letters are few: find them all, then which letter each is
        foldable = s.str.contains(f"(?i)^[{_FOLDS}]$").to_numpy()
        if foldable.any():
            sub, sub_cps = s.filter(pl.Series(foldable)), cps[foldable]
            for ch in _FOLDS:
                fold[sub_cps[sub.str.contains(f"(?i)^{ch}$").to_numpy()]] = ord(ch)
    return flags, fold


def _class_cache_path() -> Path:
    from .common import polars_version  # (not Polars itself: a run reading its cache never loads it)

    digest = hashlib.sha1(repr((_CLASS_PATTERNS, _FOLDS, 0x110000)).encode()).hexdigest()[:12]
    root = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return root / "toktok" / f"classes-polars{polars_version()}-{digest}.npz"


def _tables_look_right(flags: np.ndarray, fold: np.ndarray) -> bool:
    return (
        flags.shape == fold.shape == (0x110000,) and flags.dtype == fold.dtype == np.uint8
        and flags[ord("a")] == _L and flags[ord("7")] == _N and flags[ord(" ")] == _W
        and flags[ord("!")] == 0 and flags[0x4E2D] == _L and fold[ord("S")] == ord("s")
        and fold[0x17F] == ord("s") and fold[ord("x")] == 0 and int(flags.max()) <= 7
    )


def _class_tables() -> tuple[np.ndarray, np.ndarray]:
    """Per code point: class flags (letter, number, whitespace) and, for the letters of the
    contractions, the ASCII letter they fold to under (?i). Asked of Polars' own regex engine so
    that both paths classify every character the same way; kept in a small cache file
    (``~/.cache/toktok/``, keyed by the Polars version) because asking takes about a second,
    and in memory once read."""
    global _TABLES
    if _TABLES is None:
        _TABLES = _cached_class_tables(_class_cache_path())
    return _TABLES


def _cached_class_tables(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """The class tables from the cache file ``path``; computed and written there when it is
    absent, unreadable or damaged. A cache that cannot be written is skipped.
    Example: ``_cached_class_tables(_class_cache_path())[0][ord("a")] == _L``."""
    got = _cached(path, lambda: dict(zip(("flags", "fold"), _compute_class_tables())),
                  lambda z: _tables_look_right(z["flags"], z["fold"]))
    return got["flags"], got["fold"]


def _cached(path: Path, compute, looks_right) -> dict[str, np.ndarray]:
    """Arrays by name from the cache file ``path`` when it is there and ``looks_right`` of them,
    else ``compute()`` (written to ``path``, atomically; skipped if it cannot be written)."""
    try:
        with np.load(path) as z:
            got = {k: z[k] for k in z.files}
        if not looks_right(got):
            raise ValueError("bad class cache")
        return got
    except Exception:  # absent, unreadable or damaged: compute (and try to keep) them
        got = compute()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as fh:
                np.savez_compressed(fh, **got)
            os.replace(tmp, path)  # atomic: a reader never sees half a file
        except BaseException:
            os.unlink(tmp)
            raise
    except OSError:
        pass
    return got


# o200k's letter classes, asked of Polars as cl100k's are, in a cache file of their own (cl100k's
# stays as it is).
_O200K_CLASSES = ((_UP, r"^[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]$"), (_LO, r"^[\p{Ll}\p{Lm}\p{Lo}\p{M}]$"))
_O200K_TABLES: tuple[np.ndarray, np.ndarray] | None = None


def _o200k_cache_path() -> Path:
    import polars as pl

    digest = hashlib.sha1(repr((_O200K_CLASSES, 0x110000)).encode()).hexdigest()[:12]
    return _class_cache_path().with_name(f"classes-o200k-polars{pl.__version__}-{digest}.npz")


def _compute_o200k_classes() -> np.ndarray:
    """Per code point, o200k's bits _UP and _LO (uint16), from Polars' regex engine."""
    out = np.zeros(0x110000, np.uint16)
    for cps, s in _class_chunks():
        for bit, pat in _O200K_CLASSES:
            out[cps[s.str.contains(pat).to_numpy()]] |= bit
    return out


def _o200k_looks_right(z: dict) -> bool:
    u = z.get("classes")
    return (u is not None and u.shape == (0x110000,) and u.dtype == np.uint16
            and u[ord("A")] == _UP and u[ord("a")] == _LO and u[0x4E2D] == _UP | _LO
            and u[0x0301] == _UP | _LO and u[0x01C5] == _UP and u[ord("!")] == 0 and int(u.max()) <= _UP | _LO)


def _o200k_tables() -> tuple[np.ndarray, np.ndarray]:
    """o200k's (per byte, per code point) class tables: cl100k's as uint16, with _UP and _LO
    (and _SL for "/")."""
    global _O200K_TABLES
    if _O200K_TABLES is None:
        extra = _cached(_o200k_cache_path(), lambda: {"classes": _compute_o200k_classes()}, _o200k_looks_right)
        flags = _class_tables()[0].astype(np.uint16) | extra["classes"]
        ac = np.full(256, _HI, np.uint16)
        ac[:128] = flags[:128] | _byte_classes()[:128]
        ac[47] |= _SL
        _O200K_TABLES = ac, flags
    return _O200K_TABLES


def _byte_classes() -> np.ndarray:
    """Per byte: the flags of an ASCII char (from ``_class_tables``) plus \\r\\n, space and
    apostrophe bits; bytes >= 0x80 are marked for a full decode."""
    global _BYTE_CLASSES
    if _BYTE_CLASSES is None:
        flags, _ = _class_tables()
        ac = np.full(256, _HI, np.uint8)
        ac[:128] = flags[:128]
        ac[10] |= _NL
        ac[13] |= _NL
        ac[32] |= _SP
        ac[39] |= _AP
        _BYTE_CLASSES = ac
    return _BYTE_CLASSES


def _swar_ok() -> bool:
    """Whether Polars' classes of the ASCII chars are the ones the 8-byte scanning assumes."""
    global _SWAR_OK
    if _SWAR_OK is None:
        flags, _ = _class_tables()
        want = np.zeros(128, np.uint8)
        for lo, hi, bit in ((65, 90, _L), (97, 122, _L), (48, 57, _N), (9, 13, _W), (32, 32, _W)):
            want[lo : hi + 1] = bit
        _SWAR_OK = bool((flags[:128] == want).all())
    return _SWAR_OK


def _o200k_swar_ok() -> bool:
    """``_swar_ok``, and o200k's ASCII capitals [A-Z] and small letters [a-z] as it assumes."""
    flags = _o200k_tables()[1][:128]
    want = np.zeros(128, np.uint16)
    want[65:91], want[97:123] = _UP, _LO
    return _swar_ok() and bool((flags & (_UP | _LO) == want).all())


def _scan_tables(pattern: Pattern) -> tuple:
    """(kernel, per-byte classes, per-code-point classes, folds, whether 8 bytes at a time may be
    read) of a named pattern's scanner."""
    flags, fold = _class_tables()
    if pattern.name == "o200k":
        ac, flags16 = _o200k_tables()
        return _scan_o200k, ac, flags16, fold, _o200k_swar_ok()
    return _SCANNERS[pattern.name], _byte_classes(), flags, fold, _swar_ok()


@inlined
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


@inlined
def _cls(data, k, e, ac, flags):
    """Class bits of the char at byte k and its length; an ASCII char is one table look-up."""
    a = np.int64(ac[data[k]])
    if a & _HI:
        c, n = _decode(data, k, e)
        return np.int64(flags[c]), n
    return a, 1


@intrinsic
def _ctz(typingctx, x):
    """Trailing zero bits of an unsigned integer (its width for 0)."""
    from llvmlite import ir
    from numba.core import types

    if not isinstance(x, types.Integer):
        return None

    def codegen(context, builder, signature, args):
        return builder.cttz(args[0], ir.Constant(ir.IntType(1), 0))

    return x(x), codegen


@inlined
def _ld8(d64, data, base, p):
    """The 8 bytes at data[p:] as a little-endian uint64 (zeros past the end). ``d64`` is the
    same buffer as uint64 words from byte ``base`` on (empty: read bytes one by one)."""
    q = p - base
    if q >= 0:
        w = q >> 3
        if w + 1 < d64.shape[0]:
            r = np.uint64((q & 7) * 8)
            return (d64[w] >> r) | ((d64[w + 1] << np.uint64(1)) << (np.uint64(63) - r))
    x = np.uint64(0)
    for t in range(min(8, data.shape[0] - p)):
        x |= np.uint64(data[p + t]) << np.uint64(8 * t)
    return x


# Eight bytes at a time (SWAR): the high bit of each byte that is an ASCII letter [A-Za-z], an
# ASCII "other" char (not letter, digit [0-9] or whitespace [\t\n\v\f\r ]). These sets are
# checked against Polars' classes (``_swar_ok``); were they to differ, the byte table is used.
_HIGHS = np.uint64(0x8080808080808080)
_LOW7 = np.uint64(0x7F7F7F7F7F7F7F7F)


@inlined
def _between(y, lo, hi):
    """High bit of each byte of y (bytes < 0x80) with lo <= byte <= hi."""
    ones = np.uint64(0x0101010101010101)
    return (y + ones * np.uint64(0x80 - lo)) & ~(y + ones * np.uint64(0x7F - hi)) & _HIGHS


@inlined
def _byte_is(y, b):
    """High bit of each byte of y (bytes < 0x80) equal to b."""
    z = y ^ (np.uint64(0x0101010101010101) * np.uint64(b))
    return ~(((z & _LOW7) + _LOW7) | z) & _HIGHS


@inlined
def _letter_bits(w):
    return _between((w | np.uint64(0x2020202020202020)) & _LOW7, np.int64(0x61), np.int64(0x7A)) & ~w


@inlined
def _other_bits(w):
    y = w & _LOW7
    space = _byte_is(y, 0x20)
    taken = (_between((w | np.uint64(0x2020202020202020)) & _LOW7, np.int64(0x61), np.int64(0x7A))
             | _between(y, np.int64(0x30), np.int64(0x39)))
    return ~(taken | _between(y, np.int64(0x09), np.int64(0x0D)) | space | w) & _HIGHS


@inlined
def _skip_letters(data, d64, base, k, e, ac, flags, swar):
    """End of the run of letters from byte k (\\p{L}*)."""
    while k < e:
        if swar:
            while True:
                t = np.int64(_ctz(~_letter_bits(_ld8(d64, data, base, k)) & _HIGHS)) >> 3
                k += t
                if t < 8 or k >= e:
                    break
            if k >= e:
                return e
        a = ac[data[k]]
        if a & _L:
            k += 1
        elif a & _HI:
            c, n = _decode(data, k, e)
            if flags[c] & _L == 0:
                break
            k += n
        else:
            break
    return k


@inlined
def _skip_other(data, d64, base, k, e, ac, flags, swar, tail):
    """End of ``[^\\s\\p{L}\\p{N}]*`` from byte k, then of the run of bytes of class ``tail``
    after it (``_NL``: ``[\\r\\n]*``; 0: none)."""
    while k < e:
        if swar:
            while True:
                t = np.int64(_ctz(~_other_bits(_ld8(d64, data, base, k)) & _HIGHS)) >> 3
                k += t
                if t < 8 or k >= e:
                    break
            if k >= e:
                k = e
                break
        a = ac[data[k]]
        if a & (_L | _N | _W | _HI) == 0:
            k += 1
        elif a & _HI:
            c, n = _decode(data, k, e)
            if flags[c] & (_L | _N | _W):
                break
            k += n
        else:
            break
    while k < e and ac[data[k]] & tail:
        k += 1
    return k


@inlined
def _space_end(data, i, e, ac, flags, newlines):
    """The match at a whitespace char i that joins nothing after it: cl100k's alternatives 5-7
    (``\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+``), or without the first (``newlines`` false: GPT-2's).
    Char by char: runs are mostly one or two chars, too short for 8 bytes at a time to pay."""
    k = i
    last_nl = -1
    last_start = i
    chars = 0
    while k < e:
        f, n = _cls(data, k, e, ac, flags)
        if f & _W == 0:
            break
        if f & _NL:
            last_nl = k + 1
        last_start = k
        chars += 1
        k += n
    # 5. \s*[\r\n]+ : the match ends after the run's last newline, if any
    if newlines and last_nl >= 0:
        return last_nl
    # 6. \s+(?!\S) and 7. \s+ : a run at the end is whole; before non-space it leaves its last
    #    char to the next piece, unless it is one char long
    if k >= e or chars == 1:
        return k
    return last_start


@inlined
def _contraction_end(data, j, e, fold):
    """End of (?i:'s|'t|'re|'ve|'m|'ll|'d) whose apostrophe ends at byte j, or -1."""
    if j >= e:
        return -1
    c2, n2 = _decode(data, j, e)
    l2 = fold[c2]
    if l2 == 115 or l2 == 116 or l2 == 109 or l2 == 100:  # s t m d
        return j + n2
    if j + n2 < e and (l2 == 114 or l2 == 118 or l2 == 108):  # re ve ll
        c3, n3 = _decode(data, j + n2, e)
        l3 = fold[c3]
        if (l2 == 108 and l3 == 108) or (l2 != 108 and l3 == 101):
            return j + n2 + n3
    return -1


@inlined
def _piece_end_gpt4(data, d64, base, i, e, ac, flags, fold, swar, digits):
    """End (exclusive) of cl100k's match starting at byte i of a document ending at e, numbers
    ``\\p{N}{1,digits}`` (3: cl100k, 1: qwen2)."""
    f, n = _cls(data, i, e, ac, flags)
    j = i + n
    # 2. [^\r\n\p{L}\p{N}]?\p{L}+ with nothing before the letters (1. needs an apostrophe)
    if f & _L:
        return _skip_letters(data, d64, base, j, e, ac, flags, swar)
    # 3. \p{N}{1,3}
    if f & _N:
        for _ in range(digits - 1):
            if j >= e:
                break
            f2, n2 = _cls(data, j, e, ac, flags)
            if f2 & _N == 0:
                break
            j += n2
        return j
    # 1. (?i:'s|'t|'re|'ve|'m|'ll|'d)
    if f & _AP:
        k = _contraction_end(data, j, e, fold)
        if k >= 0:
            return k
    if j >= e:  # one char left: it is the piece whichever alternative takes it
        return j
    f1, n1 = _cls(data, j, e, ac, flags)
    # 2. [^\r\n\p{L}\p{N}]?\p{L}+ with one char before the letters
    if f1 & _L and f & _NL == 0:
        return _skip_letters(data, d64, base, j + n1, e, ac, flags, swar)
    # 4.  ?[^\s\p{L}\p{N}]+[\r\n]*
    if f & _W == 0:
        return _skip_other(data, d64, base, j, e, ac, flags, swar, np.int64(_NL))
    if f & _SP and f1 & (_L | _N | _W) == 0:
        return _skip_other(data, d64, base, j + n1, e, ac, flags, swar, np.int64(_NL))
    return _space_end(data, i, e, ac, flags, True)


@inlined
def _piece_end(data, d64, base, i, e, ac, flags, fold, swar):
    """End (exclusive) of cl100k's match starting at byte i of a document ending at e."""
    return _piece_end_gpt4(data, d64, base, i, e, ac, flags, fold, swar, np.int64(3))


@inlined
def _piece_end_qwen2(data, d64, base, i, e, ac, flags, fold, swar):
    """End (exclusive) of qwen2's match (cl100k's, numbers one by one) at byte i."""
    return _piece_end_gpt4(data, d64, base, i, e, ac, flags, fold, swar, np.int64(1))


# --- GPT-2 (r50k): 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+ ------
# Contractions case-sensitive and before anything else, only a space (U+0020) joins what follows
# it, numbers unbounded, no newline alternative: cl100k's classes and tables suffice.


@inlined
def _skip_digits(data, k, e, ac, flags):
    """End of the run of numbers from byte k (\\p{N}*)."""
    while k < e:
        f, n = _cls(data, k, e, ac, flags)
        if f & _N == 0:
            break
        k += n
    return k


@inlined
def _contraction_cs(data, j, e):
    """End of 's|'t|'re|'ve|'m|'ll|'d (case-sensitive) whose apostrophe ends at byte j, or -1."""
    if j >= e:
        return -1
    b = data[j]
    if b == 115 or b == 116 or b == 109 or b == 100:  # s t m d
        return j + 1
    if j + 1 < e:
        b2 = data[j + 1]
        if (b == 108 and b2 == 108) or ((b == 114 or b == 118) and b2 == 101):  # ll re ve
            return j + 2
    return -1


@inlined
def _piece_end_gpt2(data, d64, base, i, e, ac, flags, fold, swar):
    """End (exclusive) of GPT-2's match starting at byte i of a document ending at e."""
    f, n = _cls(data, i, e, ac, flags)
    j = i + n
    if f & _L:
        return _skip_letters(data, d64, base, j, e, ac, flags, swar)
    if f & _N:
        return _skip_digits(data, j, e, ac, flags)
    if f & _AP:
        k = _contraction_cs(data, j, e)
        if k >= 0:
            return k
    if j >= e:
        return j
    if f & _SP:  # " ?" before letters, numbers or other chars
        f1, n1 = _cls(data, j, e, ac, flags)
        if f1 & _L:
            return _skip_letters(data, d64, base, j + n1, e, ac, flags, swar)
        if f1 & _N:
            return _skip_digits(data, j + n1, e, ac, flags)
        if f1 & (_L | _N | _W) == 0:
            return _skip_other(data, d64, base, j + n1, e, ac, flags, swar, np.int64(0))
    elif f & _W == 0:
        return _skip_other(data, d64, base, j, e, ac, flags, swar, np.int64(0))
    return _space_end(data, i, e, ac, flags, False)


# --- o200k ---------------------------------------------------------------------------------------
# [^\r\n\p{L}\p{N}]?[U]*[W]+C?|[^\r\n\p{L}\p{N}]?[U]+[W]*C?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|
# \s*[\r\n]+|\s+(?!\S)|\s+, with U = [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}], W = [\p{Ll}\p{Lm}\p{Lo}\p{M}] and
# C = (?i:'s|'t|'re|'ve|'m|'ll|'d). Lm, Lo and marks are in both U and W, and marks are not \p{L}
# (so a mark may also be the optional first char). The first two alternatives, matched as the
# regex backtracks, leftmost-first: U* takes the longest run of U chars (R); when the char after R
# is in W, W+ takes the run of W chars from there; otherwise U* gives back chars until the one
# after it is in W, so the match ends after the last char of R that is in W (which W+ takes alone:
# the chars after it in R are not in W); when R holds none, alternative 1 fails with that start.
# Alternative 2 is tried only when alternative 1 failed both with and without the first char: R
# is then all Lu/Lt with no W char after it, and U+W* ends where R ends. C, optional and greedy,
# is tried once where the letters end. These tables are cl100k's classes as uint16 with the bits
# _UP (in U), _LO (in W) and, per byte only, _SL ("/").

@inlined
def _upper_bits(w):
    return _between(w & _LOW7, np.int64(0x41), np.int64(0x5A)) & ~w


@inlined
def _lower_bits(w):
    return _between(w & _LOW7, np.int64(0x61), np.int64(0x7A)) & ~w


@inlined
def _skip_upper(data, d64, base, k, e, ac, flags, swar):
    """End of [U]* from byte k, and the end of the last char of that run which is also in W
    (-1: none; ASCII capitals are not)."""
    last = np.int64(-1)
    while k < e:
        if swar:
            while True:
                t = np.int64(_ctz(~_upper_bits(_ld8(d64, data, base, k)) & _HIGHS)) >> 3
                k += t
                if t < 8 or k >= e:
                    break
            if k >= e:
                return e, last
        a = ac[data[k]]
        if a & _UP:
            k += 1
        elif a & _HI:
            c, n = _decode(data, k, e)
            g = flags[c]
            if g & _UP == 0:
                break
            k += n
            if g & _LO:
                last = k
        else:
            break
    return k, last


@inlined
def _skip_lower(data, d64, base, k, e, ac, flags, swar):
    """End of [W]* from byte k."""
    while k < e:
        if swar:
            while True:
                t = np.int64(_ctz(~_lower_bits(_ld8(d64, data, base, k)) & _HIGHS)) >> 3
                k += t
                if t < 8 or k >= e:
                    break
            if k >= e:
                return e
        a = ac[data[k]]
        if a & _LO:
            k += 1
        elif a & _HI:
            c, n = _decode(data, k, e)
            if flags[c] & _LO == 0:
                break
            k += n
        else:
            break
    return k


@inlined
def _upper_lower(data, d64, base, p, e, ac, flags, swar):
    """End of [U]*[W]+ matched from byte p as the regex backtracks (see above), or -1."""
    r, last = _skip_upper(data, d64, base, p, e, ac, flags, swar)
    if r < e:
        f, n = _cls(data, r, e, ac, flags)
        if f & _LO:
            return _skip_lower(data, d64, base, r + n, e, ac, flags, swar)
    return last


@inlined
def _contraction_after(data, k, e, fold):
    """End of the optional (?i:'s|'t|'re|'ve|'m|'ll|'d) at byte k."""
    if k < e and data[k] == 39:
        c = _contraction_end(data, k + 1, e, fold)
        if c >= 0:
            return c
    return k


@inlined
def _piece_end_o200k(data, d64, base, i, e, ac, flags, fold, swar):
    """End (exclusive) of o200k's match starting at byte i of a document ending at e."""
    f, n = _cls(data, i, e, ac, flags)
    j = i + n
    # 1./2. from a letter (only Lu/Lt fail 1., and 2. takes their run)
    if f & _L:
        k = _upper_lower(data, d64, base, i, e, ac, flags, swar)
        if k < 0:
            k, _ = _skip_upper(data, d64, base, i, e, ac, flags, swar)
        return _contraction_after(data, k, e, fold)
    # 3. \p{N}{1,3}
    if f & _N:
        for _ in range(2):
            if j >= e:
                break
            f2, n2 = _cls(data, j, e, ac, flags)
            if f2 & _N == 0:
                break
            j += n2
        return j
    if f & _NL == 0:  # i may be the optional first char of 1./2.
        if j < e:
            k = _upper_lower(data, d64, base, j, e, ac, flags, swar)
            if k >= 0:
                return _contraction_after(data, k, e, fold)
        if f & _UP:  # a mark: 1. without the first char takes it alone
            return _contraction_after(data, j, e, fold)
        if j < e:
            k, _ = _skip_upper(data, d64, base, j, e, ac, flags, swar)
            if k > j:
                return _contraction_after(data, k, e, fold)
    if j >= e:  # one char left: it is the piece whichever alternative takes it
        return j
    # 4.  ?[^\s\p{L}\p{N}]+[\r\n/]*
    if f & _W == 0:
        return _skip_other(data, d64, base, j, e, ac, flags, swar, np.int64(_NL | _SL))
    f1, n1 = _cls(data, j, e, ac, flags)
    if f & _SP and f1 & (_L | _N | _W) == 0:
        return _skip_other(data, d64, base, j + n1, e, ac, flags, swar, np.int64(_NL | _SL))
    return _space_end(data, i, e, ac, flags, True)


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


# The loop is inlined into each pattern's kernel, reference counting off as the kernel's.
_loop = njit(cache=True, forceinline=True, no_cpython_wrapper=True, no_cfunc_wrapper=True, _nrt=False)


@_loop
def _scan_loop(piece_end, data, d64, base, offsets, d, i, hi, ac, flags, fold, swar, T, arena, st, cbits):
    """Count the pieces of documents d..hi-1 (document d from byte i on) into table T, each piece
    ending where ``piece_end`` (a pattern's, inlined: one kernel per pattern) says. Returns 0
    when done, 1 when T or the arena must grow (resume at document st[0, 3], byte st[0, 4]).

    Software-pipelined by one piece: a piece's first table row is loaded as soon as its hash is
    known, and the piece is counted after the next one has been scanned, so a cache miss on a
    rare word overlaps with scanning instead of stalling it."""
    parts = T.shape[0] >> cbits
    while d < hi:
        e = offsets[d + 1]
        # the pending piece: length (0: none), start, key (short words), hash, home row, its key
        pn = np.int64(0)
        pi = np.int64(0)
        pk = np.int64(0)
        ph = np.uint64(0)
        ps = np.int64(0)
        pt = np.int64(0)
        while True:
            n = np.int64(0)
            j = i
            key = np.int64(0)
            h = np.uint64(0)
            s = np.int64(0)
            t = np.int64(0)
            if i < e:
                j = piece_end(data, d64, base, i, e, ac, flags, fold, swar)
                n = j - i
                if n <= 7:
                    key = np.int64(_ld8(d64, data, base, i) & _low(n)) | (n << 56)
                    h = _short_hash(key)
                else:
                    h = _long_hash(d64, data, base, i, n)
                s = _home(h, parts, cbits)
                t = T[s, 0]  # the early load: brings the row's line in
            if pn:
                if pn <= 7:
                    if pt == pk:
                        T[ps, 1] += 1
                        ok = True
                    else:
                        ok = _bump_short(T, st, cbits, ps, pk, pn)
                else:
                    ok = _bump_long(T, arena, st, cbits, ps, d64, data, base, pi, pn, _head(ph))
                if not ok:
                    st[0, 3] = d
                    st[0, 4] = pi
                    return 1
            if n == 0:
                break
            pn, pi, pk, ph, ps, pt = n, i, key, h, s, t
            i = j
        d += 1
        if d < hi:
            i = offsets[d]
    return 0

# The kernels, one per named pattern: the same loop with the pattern's piece_end inlined.
_kernel = njit(cache=True, no_cfunc_wrapper=True, nogil=True, _nrt=False)


@_kernel
def _scan_into(data, d64, base, offsets, d, i, hi, ac, flags, fold, swar, T, arena, st, cbits):
    """cl100k's pieces of documents d..hi-1 into T (``_scan_loop``)."""
    return _scan_loop(_piece_end, data, d64, base, offsets, d, i, hi, ac, flags, fold, swar, T, arena, st, cbits)


@_kernel
def _scan_o200k(data, d64, base, offsets, d, i, hi, ac, flags, fold, swar, T, arena, st, cbits):
    """o200k's pieces of documents d..hi-1 into T (``_scan_loop``)."""
    return _scan_loop(_piece_end_o200k, data, d64, base, offsets, d, i, hi, ac, flags, fold, swar, T, arena, st,
                      cbits)


@_kernel
def _scan_gpt2(data, d64, base, offsets, d, i, hi, ac, flags, fold, swar, T, arena, st, cbits):
    """GPT-2's pieces of documents d..hi-1 into T (``_scan_loop``)."""
    return _scan_loop(_piece_end_gpt2, data, d64, base, offsets, d, i, hi, ac, flags, fold, swar, T, arena, st,
                      cbits)


@_kernel
def _scan_qwen2(data, d64, base, offsets, d, i, hi, ac, flags, fold, swar, T, arena, st, cbits):
    """qwen2's pieces of documents d..hi-1 into T (``_scan_loop``)."""
    return _scan_loop(_piece_end_qwen2, data, d64, base, offsets, d, i, hi, ac, flags, fold, swar, T, arena, st,
                      cbits)


#: Each named pattern's kernel.
_SCANNERS = {"cl100k": _scan_into, "o200k": _scan_o200k, "gpt2": _scan_gpt2, "qwen2": _scan_qwen2}


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


# --- the words in byte order (WordCounter.table) ------------------------------------------------
# A word's sort key: its first 7 bytes big-endian (zero-padded) above 4 bits saying how many of
# them it has (8: more follow). Distinct words with equal keys both go on past their 7th byte, so
# NumPy's sort of the keys leaves only those runs to order, by their bytes from the 8th on.


@njit(cache=True, no_cfunc_wrapper=True, nogil=True, _nrt=False)
def _sort_keys(off, data, keys):
    """Each word's sort key (see above) into ``keys``; the words are ``data[off[i]:off[i+1]]``."""
    for i in range(keys.shape[0]):
        a = off[i]
        n = off[i + 1] - a
        k = 0
        for x in range(7):
            k <<= 8
            if x < n:
                k |= data[a + x]
        keys[i] = (k << 4) | min(n, 8)


@inlined
def _after_7(off, data, p, q):
    """Whether word p's bytes from the 8th on sort before word q's."""
    a, b = off[p] + 7, off[q] + 7
    na, nb = off[p + 1] - a, off[q + 1] - b
    for x in range(min(na, nb)):
        if data[a + x] != data[b + x]:
            return data[a + x] < data[b + x]
    return na < nb


@njit(cache=True, no_cfunc_wrapper=True, nogil=True, _nrt=False)
def _sort_ties(off, data, keys, order, scratch, lo, hi):
    """``order[lo:hi]`` (rows of ``keys``, sorted by key; no run of equal keys crosses ``lo`` or
    ``hi``) with each run of equal keys sorted by its words' bytes from the 8th on (a merge
    sort, ``scratch`` as long as ``order``): the words in byte order."""
    i = lo
    while i < hi:
        j = i + 1
        while j < hi and keys[order[j]] == keys[order[i]]:
            j += 1
        if j - i > 1:
            src, dst = order, scratch
            moved = False  # the run is in scratch
            width = 1
            while width < j - i:
                for a in range(i, j, 2 * width):
                    mid, b = min(a + width, j), min(a + 2 * width, j)
                    p, q = a, mid
                    for t in range(a, b):
                        if q >= b or (p < mid and not _after_7(off, data, src[q], src[p])):
                            dst[t] = src[p]
                            p += 1
                        else:
                            dst[t] = src[q]
                            q += 1
                src, dst = dst, src
                moved = not moved
                width *= 2
            if moved:
                for t in range(i, j):
                    order[t] = scratch[t]
        i = j


@njit(cache=True, no_cfunc_wrapper=True, nogil=True, _nrt=False)
def _gather_words(off, data, cnt, order, lo, hi, o, out_off, out_data, out_cnt):
    """Words and counts of ``order[lo:hi]`` into the ``out_`` arrays from row ``lo`` and byte
    ``o`` on (the ends of the words: ``out_off[lo + 1:hi + 1]``)."""
    for t in range(lo, hi):
        i = order[t]
        a, n = off[i], off[i + 1] - off[i]
        for x in range(n):
            out_data[o + x] = data[a + x]
        o += n
        out_off[t + 1] = o
        out_cnt[t] = cnt[i]


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
            a = _pages(size, np.uint8)
            a[: self.st[0, 1]] = self.arena[: self.st[0, 1]]
            self.arena = a


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
    0.37 s on two; a fresh 1.1M-word export 0.1 s against 0.2 s. Example: ``_pages(4, np.int64)``."""
    return np.frombuffer(mmap.mmap(-1, max(1, n * np.dtype(dtype).itemsize)), dtype, count=n)


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


_SLICE_BYTES = 8 << 20  # text queued for the threads at a time
_SLICES_QUEUED = 1  # slices queued for the threads while the next one is cut
_VIEW_BYTES_MAX = (1 << 31) - 1  # a binary view's offset is an int32

# --- the reference, for small runs before the scanner is compiled -------------------------------
# Compiling the scanner takes ~5 s of a core, once after an install; the reference (the regex
# package, which the scanner is tested equal to) counts 6-9 MB/s. A run whose sources are small
# counts with the reference while the scanner is not compiled, so it compiles nothing for
# counting (see reference_allowance); the counts are the same.

#: Text a run may count with the reference while the scanner is not compiled (~1.3 s of it).
REFERENCE_BYTES = 8 << 20
#: Sources up to this size are counted with the reference even when the scanner is compiled:
#: at 6-9 MB/s that is quicker than loading the scanner from Numba's cache (0.3-0.5 s, and
#: Numba's own start the first time a run loads a kernel), and a run this small loads none.
SMALL_BYTES = 1 << 20
#: Sources up to this size are counted with the reference even when the scanner is built ahead:
#: a process's first scan costs ~20 ms (the scanner loaded, its tables and threads started),
#: more than the reference takes for 64 KiB (the bench's one-line run: 84 bytes).
TINY_BYTES = 64 << 10
_REFERENCE_ENTRY_BYTES = 200  # a word in the reference's Counter: str, int and table slot (CPython)


def reference_allowance(source_bytes: int, pattern: Pattern = DEFAULT) -> int:
    """The text a run over ``source_bytes`` of sources counts with the reference instead of the
    compiled scanner of ``pattern`` (``WordCounter(reference_bytes=...)``): ``REFERENCE_BYTES``
    when that scanner is not in Numba's cache yet and the sources are no larger, or when they
    are at most ``SMALL_BYTES`` and it is not built ahead, or at most ``TINY_BYTES``; else 0 (and
    0 for a pattern without a scanner, which counts through the reference anyway).
    Example: ``reference_allowance(1 << 40) == 0``."""
    scanner = _scanner(pattern)
    if scanner is None or source_bytes > REFERENCE_BYTES:
        return 0
    if source_bytes <= TINY_BYTES:
        return REFERENCE_BYTES
    if ready((scanner,)) or (source_bytes > SMALL_BYTES and compiled((scanner,))):
        return 0
    return REFERENCE_BYTES


def _scanner(pattern: Pattern):
    """The compiled scanner of ``pattern``, or None when it counts through ``regex``."""
    return _SCANNERS.get(pattern.name) if pattern.named else None


def scanner_name(pattern: Pattern) -> str | None:
    """The name of ``pattern``'s compiled scanner (None: it counts through ``regex``), as
    ``toktok.ahead`` lists it. Example: ``scanner_name(patterns.DEFAULT) == "_scan_into"``."""
    scanner = _scanner(pattern)
    return None if scanner is None else scanner.py_func.__name__


def has_scanner(pattern: Pattern) -> bool:
    """Whether ``pattern`` counts through a compiled scanner (else through ``regex``).
    Example: ``has_scanner(patterns.DEFAULT)``."""
    return _scanner(pattern) is not None


def _empty_counts() -> dict:
    """The word table's Polars schema."""
    import polars as pl

    return {"word": pl.Binary, "count": pl.Int64}


def _scan_chunk(tb: _Table, scan: tuple, d: int, hi: int, kernel=None) -> None:
    """Count documents d..hi-1 of ``scan`` (text, its 64-bit words and their base, offsets, the
    class tables, swar) into table ``tb`` with a pattern's ``kernel`` (default cl100k's),
    growing the table as the kernel asks."""
    kernel = kernel or _scan_into
    data, d64, base, off, ac, flags, fold, swar = scan
    i = int(off[d])
    while d < hi and kernel(data, d64, base, off, d, i, hi, ac, flags, fold, swar, tb.T, tb.arena, tb.st, tb.cbits):
        d, i = int(tb.st[0, 3]), int(tb.st[0, 4])
        tb.grow()


class WordCounter:
    """Counts a pattern's pieces over many batches of documents; ``result()`` gives the table.

    A named pattern is counted by its compiled scanner. It keeps one hash table per thread
    across batches and merges them only in ``result()``. A batch is converted to Arrow ~8 MB at
    a time and each slice is cut into chunks of about equal bytes that the threads take from a
    queue as they finish their last (the scanner releases the GIL), so ``add()`` returns while
    the last slice is counted and ``result()`` waits for it. The merge is parallel and inserts
    nothing: each table is cut into one part per thread by the words' hash, and thread p moves
    each count of part p into the first table that holds the word. Memory grows with the number
    of distinct words (about 16 bytes / 0.7 per word and thread, plus the bytes of words longer
    than 7), not with the corpus; ``memory_bytes()`` tells it. Any other pattern is counted by
    the ``regex`` package on the same threads (``findall`` releases the GIL while it matches),
    into one ``Counter`` per thread; ``regex_counted`` tells how many bytes.
    Example: ``c = WordCounter(); c.add(["a a"]); dict(c.result().iter_rows())[b" a"] == 1``.
    """

    def __init__(self, specials: Sequence[str] = (), threads: int = 0, *, swar: bool = True,
                 reference_bytes: int = 0, pattern: Pattern = DEFAULT):
        self.specials = list(specials)
        self._threads = threads  # 0: Polars' thread pool size, asked when the threads start
        self.swar = swar  # scan 8 bytes at a time where the ASCII classes allow (False: byte table only)
        self.pattern = pattern
        self._kernel = _scanner(pattern)  # None: the pattern counts through regex
        # text the reference may still count (see reference_allowance), and what it counted
        self.reference_bytes = reference_bytes if self._kernel is not None else 0
        self.reference_counted = 0
        self._reference: Counter[str] = Counter()
        self.regex_counted = 0  # bytes counted through regex on the threads (no compiled scanner)
        self._counters: list[Counter[str]] = []  # with regex on the threads: one per thread
        self._tables: list[_Table] = []  # one per thread, of one part per thread
        self._folded = False  # result() has ordered the tables (see there)
        self._pool: ThreadPoolExecutor | None = None  # the counting threads, while they count
        self._queued: list[list] = []  # per slice queued, its chunks' futures
        self._mine: threading.local | None = None  # with the threads: each one's table
        self._ids: Iterator[int] | None = None  # with the threads: the next table one takes

    @property
    def threads(self) -> int:
        """The counting threads (every core by default: Polars' thread pool size)."""
        if not self._threads:
            import polars as pl

            self._threads = pl.thread_pool_size()
        return self._threads

    def memory_bytes(self) -> int:
        """Bytes held by the counting tables and their arenas once what is queued is counted
        (and an estimate for the words the reference or regex counted). Grows with the distinct
        words seen, not with the text."""
        self._settle()
        held = sum(t.T.nbytes + t.arena.nbytes + t.st.nbytes for t in self._tables)
        words = len(self._reference) + sum(len(c) for c in self._counters)
        return held + _REFERENCE_ENTRY_BYTES * words

    def add(self, texts: pa.Array | pa.ChunkedArray | pl.Series | Iterable[str]) -> None:
        """Count documents: an Arrow string array (a ``Batch``'s texts), a Polars Series or any
        iterable of str; nulls are skipped. A batch the reference may count whole (within
        ``reference_bytes``) is counted as Python strings; the scanner reads Arrow's buffers as
        they are (no copy, no Polars)."""
        if not isinstance(texts, (pa.Array, pa.ChunkedArray)) and not hasattr(texts, "to_arrow"):
            texts = pa.array(list(texts), pa.large_string())
        texts = as_large_string(texts)  # (a null counts as an empty document: nothing)
        ends = _ends(texts)
        if self.reference_bytes > 0 and (int(ends[-1]) if len(ends) else 0) <= self.reference_bytes:
            self._count_docs(texts.to_pylist())
            return
        texts = _cut_specials(texts, self.specials)
        if self.reference_bytes > 0 and len(texts) > 0:
            texts = self._count_reference(texts)
        if len(texts) == 0:
            return
        if self._kernel is None:
            self._count_regex(texts)
        else:
            self._scan(texts)

    def _count_docs(self, docs: list[str]) -> None:
        """Count documents with the reference, as Python strings (``_count_reference`` of a
        whole batch, special tokens cut out alike)."""
        rx, n = self.pattern.regex, 0
        for doc in _cut_specials_py(docs, self.specials):
            self._reference.update(pieces(rx, doc))
            n += len(doc.encode())
        self.reference_bytes -= n
        self.reference_counted += n

    def _count_reference(self, texts: pa.Array) -> pa.Array:
        """Count the leading documents that fit in ``reference_bytes`` with the reference
        (``regex``); returns the rest, for the scanner (which takes every later batch too)."""
        ends = _ends(texts)
        k = int(np.searchsorted(ends, self.reference_bytes, side="right"))
        if k:
            rx = self.pattern.regex
            for doc in texts.slice(0, k).to_pylist():
                self._reference.update(pieces(rx, doc))
            self.reference_bytes -= int(ends[k - 1])
            self.reference_counted += int(ends[k - 1])
        if k < len(ends):
            self.reference_bytes = 0
        return texts.slice(k)

    def _count_regex(self, texts: pa.Array) -> None:
        """Count documents with the pattern's regex: in line with one thread, else in chunks of
        about equal bytes queued for the counter's threads, as the scanner's are."""
        if not self._counters:
            self._counters = [Counter() for _ in range(self.threads)]
        ends = _ends(texts)
        self.regex_counted += int(ends[-1])
        if self.threads == 1:
            _findall_into(self._counters[0], self.pattern.regex, texts, False)
            return
        lo = 0
        while lo < len(ends):
            start = int(ends[lo - 1]) if lo else 0
            hi = max(lo + 1, int(np.searchsorted(ends, start + _SLICE_BYTES, side="right")))
            n = hi - lo
            m = min(n, 4 * self.threads)
            cuts = np.searchsorted(ends[lo:hi], np.linspace(start, ends[hi - 1], m + 1), side="right").tolist()
            cuts[0], cuts[-1] = 0, n
            chunks = [texts.slice(lo + cuts[c], cuts[c + 1] - cuts[c]) for c in range(m) if cuts[c + 1] > cuts[c]]
            self._enqueue([(self._findall, (chunk,)) for chunk in chunks])
            lo = hi

    def _findall(self, texts: pa.Array) -> None:
        """Documents ``texts`` into this thread's Counter (a pool thread takes the next one the
        first time it runs)."""
        c = getattr(self._mine, "counter", None)
        if c is None:
            c = self._mine.counter = self._counters[next(self._ids)]
        _findall_into(c, self.pattern.regex, texts, True)

    def _enqueue(self, jobs: list[tuple]) -> None:
        """Queue ``jobs`` (function, arguments) for the counting threads, started on first use;
        waits while more than ``_SLICES_QUEUED`` slices are queued."""
        first = self._pool is None
        if first:
            self._pool = ThreadPoolExecutor(self.threads, thread_name_prefix="toktok-count")
            self._mine, self._ids = threading.local(), itertools.count()
        self._queued.append([self._pool.submit(fn, *args) for fn, args in jobs])
        if first:  # the kernels are loaded once add() returns, as when counting in line
            self._wait(self._queued[0][:1])
        while len(self._queued) > _SLICES_QUEUED:  # the text the queue holds
            self._wait(self._queued.pop(0))

    def _scan(self, texts: pa.Array) -> None:
        # Slices of about _SLICE_BYTES of the batch's own buffers (no copy), queued a few chunks
        # each for the threads: the queue holds a bounded part of the text
        off, data = _buffers(texts)
        ends = off[1:] - off[0]
        lo = 0
        while lo < len(ends):
            start = int(ends[lo - 1]) if lo else 0
            hi = max(lo + 1, int(np.searchsorted(ends, start + _SLICE_BYTES, side="right")))
            self._scan_arrays(data, off[lo : hi + 1])
            lo = hi

    def _scan_arrays(self, data: np.ndarray, off: np.ndarray) -> None:
        """Count the documents ``data[off[d]:off[d+1]]`` (valid UTF-8): in line with one thread,
        else queued for the counter's threads (``result()`` waits for them)."""
        n = off.shape[0] - 1
        if not self._tables:  # every thread's table at once (the merge's order is fixed by then)
            self._tables = [_Table(self.threads) for _ in range(self.threads)]
        kernel, ac, flags, fold, swar = _scan_tables(self.pattern)
        scan = (data, *_words64(data), off, ac, flags, fold, swar and self.swar)
        if self.threads == 1:
            _scan_chunk(self._tables[0], scan, 0, n, kernel)
            return
        # A few chunks of about equal bytes per thread, taken in turn as each thread finishes its
        # last, across slices and batches: a thread that is slowed down (by other work on the
        # machine, or harder text) does not hold up the rest, and none waits at a slice's end
        # while the next one is converted.
        m = min(n, 4 * self.threads)
        cuts = np.searchsorted(off, np.linspace(off[0], off[-1], m + 1)).tolist()
        cuts[0], cuts[-1] = 0, n
        self._enqueue([(self._count, (scan, cuts[c], cuts[c + 1], kernel)) for c in range(m)])

    def _count(self, scan: tuple, d: int, hi: int, kernel) -> None:
        """Documents d..hi-1 of ``scan`` into this thread's table (a pool thread takes the next
        table the first time it runs)."""
        tb = getattr(self._mine, "table", None)
        if tb is None:
            tb = self._mine.table = self._tables[next(self._ids)]
        _scan_chunk(tb, scan, d, hi, kernel)

    @staticmethod
    def _wait(futures: list) -> None:
        for f in futures:
            f.result()

    def _settle(self) -> None:
        """Wait for everything queued."""
        while self._queued:
            self._wait(self._queued.pop(0))

    def _drain(self) -> None:
        """Wait for everything queued; the threads end (a later ``add`` starts new ones)."""
        try:
            self._settle()
        finally:
            self.close()

    def close(self) -> None:
        """End the counting threads now, dropping what is queued and not yet counted (after an
        error; ``result()`` ends them too, once all is counted)."""
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None
        self._queued = []

    def result(self, *, views: bool = True) -> pl.DataFrame:
        """One row per distinct word: ``word`` (Binary), ``count`` (Int64). The words are handed
        to Polars as Arrow binary views (no copy) when their bytes fit one view buffer and
        ``views`` is true, else as offsets (Polars copies them); the table is the same."""
        self._drain()
        counted = [c for c in (self._reference, *self._counters) if c]
        if not counted:
            return self._scanned(views)
        frames = [_counter_frame(c) for c in counted]
        if self._tables:
            frames.insert(0, self._scanned(views))
        from .common import sum_words

        return sum_words(frames)

    def table(self) -> pa.Table:
        """``result()`` as an Arrow table sorted by word (``word`` large_binary, ``count``
        int64): what a phase's count hands on. Built from Python values, without Polars, when
        the reference counted every word. Example: ``c.table().column("word")``."""
        self._drain()
        if not self._tables and not any(self._counters):
            items = sorted((w.encode(), n) for w, n in self._reference.items())
            return pa.table({"word": pa.array([w for w, _ in items], pa.large_binary()),
                             "count": pa.array([n for _, n in items], pa.int64())})
        if self._reference or any(self._counters):
            return self.result().sort("word").to_arrow()
        # the scanner's words alone, sorted here: 0.16 s for the bench corpus's 706k, Polars 0.27
        off, data, cnt = self._exported()
        n = len(cnt)
        keys = np.empty(n, np.int64)
        _sort_keys(off, data, keys)
        order = np.argsort(keys)
        # two halves on two threads, cut between runs of equal keys
        h = n // 2
        while 0 < h < n and keys[order[h - 1]] == keys[order[h]]:
            h -= 1
        cuts = [0, h, n] if h else [0, n]
        scratch = np.empty_like(order)
        _in_threads(lambda p: _sort_ties(off, data, keys, order, scratch, cuts[p], cuts[p + 1]), len(cuts) - 1)
        del keys, scratch
        starts = [0, int(np.diff(off)[order[:h]].sum())] if h else [0]  # each half's first byte
        out_off, out_data, out_cnt = _pages(n + 1, np.int64), _pages(max(1, len(data)), np.uint8), _pages(n, np.int64)
        out_off[0] = 0
        _in_threads(lambda p: _gather_words(off, data, cnt, order, cuts[p], cuts[p + 1], starts[p], out_off, out_data,
                                            out_cnt), len(cuts) - 1)
        del off, data, cnt, order
        word = pa.LargeBinaryArray.from_buffers(pa.large_binary(), n, [None, pa.py_buffer(out_off), pa.py_buffer(out_data)])
        count = pa.Array.from_buffers(pa.int64(), len(out_cnt), [None, pa.py_buffer(out_cnt)])
        return pa.table({"word": word, "count": count})

    def _scanned(self, views: bool) -> pl.DataFrame:
        """The scanner's words (``result``)."""
        import polars as pl

        if not self._tables:
            return pl.DataFrame({"word": [], "count": []}, schema=_empty_counts())
        kept = self._fold()
        w0 = np.cumsum([0] + kept[:, :, 0].sum(axis=1).tolist()).tolist()
        o0 = np.cumsum([0] + kept[:, :, 2].sum(axis=1).tolist()).tolist()
        if not views or o0[-1] > _VIEW_BYTES_MAX:
            # more long-word bytes than one view buffer can address: offsets, then Polars' copy
            out_off, out_data, out_cnt = self._exported(kept)
            col = pa.LargeBinaryArray.from_buffers(
                pa.large_binary(), len(out_cnt), [None, pa.py_buffer(out_off), pa.py_buffer(out_data)]
            )
            return pl.DataFrame({"word": pl.Series("word", col).cast(pl.Binary), "count": out_cnt})
        # Arrow binary views, which Polars takes as they are (no copy)
        out_cnt = _pages(w0[-1], np.int64)
        views = _pages(16 * w0[-1], np.uint8)
        vdata = _pages(max(8, o0[-1]), np.uint8)
        self._export_parts(kept, w0, o0, _export_views, views, vdata, out_cnt)
        col = pa.Array.from_buffers(pa.binary_view(), w0[-1], [None, pa.py_buffer(views), pa.py_buffer(vdata)])
        return pl.DataFrame({"word": pl.Series("word", col), "count": out_cnt})

    def _fold(self) -> np.ndarray:
        """The threads' tables folded (``_fold_tables``: per part and table, the words, bytes and
        bytes of words > 12 it keeps)."""
        if not self._folded:
            # the roomiest table first, for good: it takes the most counts, and as no count is
            # ever moved out of it, it keeps no row at 0 (its st tells what it holds)
            self._tables.sort(key=lambda t: (t.cbits, t.words), reverse=True)
            self._folded = True
        return _fold_tables(self._tables)

    def _exported(self, kept: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The scanner's words as offsets (int64), bytes and counts, in no particular order
        (``kept``: what ``_fold`` returned, if it just ran)."""
        kept = self._fold() if kept is None else kept
        w0 = np.cumsum([0] + kept[:, :, 0].sum(axis=1).tolist()).tolist()
        o0 = np.cumsum([0] + kept[:, :, 1].sum(axis=1).tolist()).tolist()
        out_off, out_data, out_cnt = _pages(w0[-1] + 1, np.int64), _pages(max(1, o0[-1]), np.uint8), _pages(w0[-1], np.int64)
        out_off[0] = 0
        self._export_parts(kept, w0, o0, _export, out_data, out_off, out_cnt)
        return out_off, out_data, out_cnt

    def _export_parts(self, kept: np.ndarray, w0: list[int], o0: list[int], write, *out) -> None:
        """``write`` (``_export`` or ``_export_views``) of each part of every table into ``out``,
        a thread a part; part p starts at row ``w0[p]`` and byte ``o0[p]``."""
        def export(p: int) -> None:
            w, o = w0[p], o0[p]
            for t in self._tables:
                w, o = write(t.rows(p), t.arena_view(), *out, w, o)
            if (w, o) != (w0[p + 1], o0[p + 1]):
                raise RuntimeError("toktok: counting tables out of step (a bug: please report it)")

        _in_threads(export, len(kept))


def _findall_into(counter: Counter, rx: str, texts: pa.Array, concurrent: bool) -> None:
    """Count the pieces of regex ``rx`` in each of ``texts`` into ``counter`` (``concurrent``:
    release the GIL while matching, for counting threads)."""
    for doc in texts.to_pylist():
        counter.update(pieces(rx, doc, concurrent=concurrent))


def _counter_frame(counter: Counter) -> pl.DataFrame:
    """A Counter of str pieces as a word table (word Binary, count Int64)."""
    import polars as pl

    return pl.DataFrame({"word": [w.encode() for w in counter], "count": list(counter.values())},
                        schema=_empty_counts())


def _ends(arr: pa.Array) -> np.ndarray:
    """Each document's end in bytes from the first's start (the running sum of their lengths)."""
    if not len(arr):
        return np.zeros(0, np.int64)
    off = _buffers(arr)[0]
    return off[1:] - off[0]


def _cut_specials_py(docs: list[str], specials: Sequence[str]) -> list[str]:
    """``_cut_specials`` of Python strings: the same segments (in another order, which counting
    does not see)."""
    if not specials:
        return docs
    pat = regex.compile("|".join(regex.escape(s) for s in sorted(set(specials), key=lambda s: (-len(s), s))))
    out: list[str] = []
    for doc in docs:
        if any(s in doc for s in specials):
            out.extend(p for p in pat.split(doc) if p)
        else:
            out.append(doc)
    return out


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


def count_words(texts: pa.Array | pl.Series | Iterable[str], specials: Sequence[str] = (), threads: int = 0, *,
                reference_bytes: int = 0, pattern: Pattern = DEFAULT) -> pl.DataFrame:
    """Word counts of ``pattern``'s pieces over documents, identical to ``regex.findall`` + Counter.

    Returns columns ``word`` (Binary) and ``count`` (Int64), one row per distinct word, in no
    particular order. Special tokens are cut out first and never counted; ``threads=0`` uses
    every core; the first ``reference_bytes`` of text are counted by the reference (``regex``,
    see ``reference_allowance``). Example: ``count_words(["a a"]).sort("word").rows() == [(b" a", 1), (b"a", 1)]``.
    """
    counter = WordCounter(specials, threads, reference_bytes=reference_bytes, pattern=pattern)
    counter.add(texts)
    return counter.result()
