"""cl100k's scanner (GPT-4's pattern) matched by hand on UTF-8 bytes, one branch per alternative
in the pattern's order:
``(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|``
``\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+``; qwen2's is the same with numbers one by one (``digits``)."""
from __future__ import annotations

import numpy as np

from ..._kernels import inlined
from .classes import _AP, _L, _N, _NL, _SP, _W
from .loop import _scan_loop, kernel
from .swar import _cls, _contraction_end, _skip_letters, _skip_other, _space_end


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


@kernel
def _scan_into(data, d64, base, offsets, d, i, hi, ac, flags, fold, swar, T, arena, st, cbits):
    """cl100k's pieces of documents d..hi-1 into T (``_scan_loop``)."""
    return _scan_loop(_piece_end, data, d64, base, offsets, d, i, hi, ac, flags, fold, swar, T, arena, st, cbits)
