"""superbpe's scanner (SuperBPE's stage 2, :data:`toktok.patterns.SUPERBPE`) matched by hand on
UTF-8 bytes: a run of non-numbers is one piece; a number splits off, a run of decimal digits
(``\\d``: any script's) in groups of three from the right, the first group the one or two digits
left over (the pattern's ``_PARTIAL``), a number that is not a decimal digit (², ½, Ⅻ) joined
with the digits after it up to the run's first full group (``_TAIL``).

The look-behind ``(?<=\\d)\\d{3}`` only ever meets the rest of a digit run that is a multiple of
three long (every piece that ends inside a run leaves such a rest), where ``\\d{3}`` would match the
same three digits: so a run's length is counted once, at its first piece, and the later groups
are three digits each (linear in a run's length). The document's start (``offsets``, passed in
the place of the folds, which this pattern does not use) tells a digit at a document's start
from one that follows a digit."""
from __future__ import annotations

import numpy as np

from ..._kernels import inlined
from .classes import _DG, _N
from .loop import _scan_loop, kernel
from .swar import _cls, _ctz, _decode, _ld8

_HIGHS = np.uint64(0x8080808080808080)
_ADD_LO = np.uint64(0x5050505050505050)  # + 0x50: high bit set from '0' (0x30) on
_ADD_HI = np.uint64(0x4646464646464646)  # + 0x46: high bit set from ':' (0x3A) on


@inlined
def _skip_non_numbers(data, d64, base, j, e, ac, flags, swar):
    """End of the run of non-numbers ``[^\\p{N}]+`` going on at byte j; eight bytes at a time
    while none is an ASCII digit or a byte of a non-ASCII char (``swar``: the ASCII numbers are
    [0-9])."""
    while j < e:
        if swar and j + 8 <= e:
            w = _ld8(d64, data, base, j)
            # the lowest flagged byte is right: a carry only reaches bytes after a high byte
            m = (((w + _ADD_LO) & ~(w + _ADD_HI)) | w) & _HIGHS
            if m == 0:
                j += 8
                continue
            j += np.int64(_ctz(m) >> np.uint64(3))
        f, n = _cls(data, j, e, ac, flags)
        if f & _N:
            return j
        j += n
    return j


@inlined
def _digit_run(data, j, e, ac, flags):
    """(number of decimal digits, byte end) of the digit run from byte j."""
    m = np.int64(0)
    while j < e:
        f, n = _cls(data, j, e, ac, flags)
        if f & _DG == 0:
            break
        j += n
        m += 1
    return m, j


@inlined
def _skip_chars(data, j, e, ac, flags, count):
    """Byte j moved on by ``count`` chars."""
    for _ in range(count):
        f, n = _cls(data, j, e, ac, flags)
        j += n
    return j


@inlined
def _tail(data, j, e, ac, flags):
    """End of ``_TAIL`` from byte j: ``(?:_OTHER(?:_PARTIAL)?)*``, numbers that are not decimal
    digits, each run followed by the one or two digits a digit run has beyond its groups of three."""
    while j < e:
        f, n = _cls(data, j, e, ac, flags)
        if f & _N == 0 or f & _DG:
            return j
        j += n
        while j < e:  # the rest of _OTHER's run
            f, n = _cls(data, j, e, ac, flags)
            if f & _N == 0 or f & _DG:
                break
            j += n
        if j >= e or f & _DG == 0:
            return j
        m, k = _digit_run(data, j, e, ac, flags)
        r = m % 3
        if r == 0:
            return j  # no _PARTIAL: the run is groups of three
        if r == m:
            j = k  # the whole run; the loop goes on
            continue
        return _skip_chars(data, j, e, ac, flags, r)
    return j


@inlined
def _after_digit(data, i, ac, flags, offsets):
    """Whether the char before byte i is a decimal digit of the same document."""
    if i == 0:
        return False
    b = np.int64(data[i - 1])
    if b < 0x80:
        if ac[b] & _DG == 0:
            return False
    else:
        k = i - 1
        while k > 0 and i - k < 4 and data[k] & 0xC0 == 0x80:
            k -= 1
        c, n = _decode(data, k, i)
        if k + n != i or flags[c] & _DG == 0:
            return False
    # and i is no document's start
    lo = np.int64(0)
    hi = np.int64(offsets.shape[0] - 1)
    while lo < hi:
        mid = (lo + hi) >> 1
        if offsets[mid] < i:
            lo = mid + 1
        else:
            hi = mid
    return offsets[lo] != i


@inlined
def _piece_end_superbpe(data, d64, base, i, e, ac, flags, offsets, swar):
    """End (exclusive) of superbpe's match starting at byte i of a document ending at e."""
    f, n = _cls(data, i, e, ac, flags)
    j = i + n
    if f & _N == 0:  # [^\p{N}]+
        return _skip_non_numbers(data, d64, base, j, e, ac, flags, swar)
    if f & _DG == 0:  # _OTHER(?:_PARTIAL)? then _TAIL: _TAIL from i
        return _tail(data, i, e, ac, flags)
    if _after_digit(data, i, ac, flags, offsets):
        # (?<=\d)\d{3}_TAIL: a later group of a run
        k = np.int64(1)
        while k < 3 and j < e:
            f2, n2 = _cls(data, j, e, ac, flags)
            if f2 & _DG == 0:
                break
            j += n2
            k += 1
        if k == 3:
            return _tail(data, j, e, ac, flags)
    # a run's first piece: _PARTIAL (its length mod 3 digits) or \d{3}, then _TAIL
    m, end = _digit_run(data, i, e, ac, flags)
    r = m % 3
    if r == 0:
        r = 3
    if r == m:
        return _tail(data, end, e, ac, flags)
    return _skip_chars(data, i, e, ac, flags, r)


@kernel
def _scan_superbpe(data, d64, base, offsets, d, i, hi, ac, flags, fold, swar, T, arena, st, cbits):
    """superbpe's pieces of documents d..hi-1 into T (``_scan_loop``; the document offsets in the
    folds' place, see the module's note)."""
    return _scan_loop(_piece_end_superbpe, data, d64, base, offsets, d, i, hi, ac, flags, offsets, swar, T, arena, st,
                      cbits)
