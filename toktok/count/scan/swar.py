"""The byte helpers every scanner inlines: a char's code point and classes from UTF-8 bytes,
eight bytes at a time (SWAR) where the ASCII classes allow, and the runs and matches the named
patterns share (letters, other chars, whitespace, the contractions)."""
from __future__ import annotations

import numpy as np

from ..._kernels import inlined, intrinsic
from .classes import _HI, _L, _N, _NL, _W

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
