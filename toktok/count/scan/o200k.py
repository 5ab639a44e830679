"""o200k's scanner (GPT-4o's pattern), matched by hand on UTF-8 bytes with its own letter classes
(:func:`.classes._o200k_tables`)."""
from __future__ import annotations

import numpy as np

from ..._kernels import inlined
from .classes import _HI, _L, _LO, _N, _NL, _SL, _SP, _UP, _W
from .loop import _scan_loop, kernel
from .swar import _HIGHS, _LOW7, _between, _cls, _contraction_end, _ctz, _decode, _ld8, _skip_other, _space_end


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


@kernel
def _scan_o200k(data, d64, base, offsets, d, i, hi, ac, flags, fold, swar, T, arena, st, cbits):
    """o200k's pieces of documents d..hi-1 into T (``_scan_loop``)."""
    return _scan_loop(_piece_end_o200k, data, d64, base, offsets, d, i, hi, ac, flags, fold, swar, T, arena, st,
                      cbits)
