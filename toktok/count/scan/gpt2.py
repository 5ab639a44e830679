"""GPT-2's (r50k's) scanner, matched by hand on UTF-8 bytes."""
from __future__ import annotations

import numpy as np

from ..._kernels import inlined
from .classes import _AP, _L, _N, _SP, _W
from .loop import _scan_loop, kernel
from .swar import _cls, _skip_letters, _skip_other, _space_end


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


@kernel
def _scan_gpt2(data, d64, base, offsets, d, i, hi, ac, flags, fold, swar, T, arena, st, cbits):
    """GPT-2's pieces of documents d..hi-1 into T (``_scan_loop``)."""
    return _scan_loop(_piece_end_gpt2, data, d64, base, offsets, d, i, hi, ac, flags, fold, swar, T, arena, st,
                      cbits)
