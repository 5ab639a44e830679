"""The lazy max-heap of pairs the merge loop pops the best pair from, and the tie-break.

Rows are (count, pair key), ordered by count, then by the smaller (left bytes, right bytes):
``_before`` is that tie-break, the one place it is written (the reference trainer in
tests/oracles holds it too). The heap holds only pairs whose count reaches a floor
(``_refill``); pairs that fall below it stay in the table until the heap runs empty. Pairs
whose merged token would be longer than ``maxlen`` bytes (``--max-token-length``) are never
pushed: they can never be merged.
"""
from __future__ import annotations

import numpy as np

from .._kernels import _EMPTY, _address, _empty_array, _peek, _zero_array, inlined, internal
from .table import _CNT, _KEY


# Heap rows are (count, pair key). The sifts move a hole instead of swapping.


@inlined
def _before(k, j, tdata, tstart, tlen):
    """Whether pair key ``k`` goes before pair key ``j`` when their counts are equal: the smaller
    (left bytes, right bytes) first. The training definition's tie-break, written only here.
    ``tdata``/``tstart``/``tlen`` are the addresses (``_address``) of the token tables of
    ``tokens._token_arrays`` (uint8, int64, int32, as ``_peek`` reads them): with arrays
    as arguments every call would cost atomic reference-count updates (they once took a fifth
    of the loop's time); inlined by LLVM, the heap's sifts compile as if it were written out.
    Example: with token 0 = b"a" and 1 = b"b", ``_before(_pkey(0, 1), _pkey(1, 0), ...)`` is True."""
    x = np.int64(k >> 32)
    y = np.int64(j >> 32)
    if x == y:
        x = np.int64(k & 0xFFFFFFFF)
        y = np.int64(j & 0xFFFFFFFF)
    first = False
    if x != y:
        sx = _peek(tstart, x, np.int64)
        sy = _peek(tstart, y, np.int64)
        lx = np.int64(_peek(tlen, x, np.int32))
        ly = np.int64(_peek(tlen, y, np.int32))
        first = lx < ly
        for i in range(min(lx, ly)):
            bx = _peek(tdata, sx + i, np.uint8)
            by = _peek(tdata, sy + i, np.uint8)
            if bx != by:
                first = bx < by
                break
    return first


@inlined
def _fits(k, tlen, maxlen):
    """Whether pair key ``k``'s merged token is at most ``maxlen`` bytes (``--max-token-length``);
    ``tlen`` is the address of the token lengths (int32), as in ``_before``."""
    a = np.int64(_peek(tlen, np.int64(k >> 32), np.int32))
    b = np.int64(_peek(tlen, np.int64(k & 0xFFFFFFFF), np.int32))
    return a + b <= maxlen


@internal
def _sift_down(H, n, i, tdata, tstart, tlen):
    c = H[i, 0]
    k = H[i, 1]
    while True:
        left = 2 * i + 1
        if left >= n:
            break
        best = left
        right = left + 1
        if right < n:
            rc = H[right, 0]
            lc = H[left, 0]
            if rc > lc:
                best = right
            elif rc == lc:
                if _before(H[right, 1], H[left, 1], _address(tdata), _address(tstart), _address(tlen)):
                    best = right
        bc = H[best, 0]
        up = bc > c
        if bc == c:
            up = _before(H[best, 1], k, _address(tdata), _address(tstart), _address(tlen))
        if up:
            H[i, 0] = bc
            H[i, 1] = H[best, 1]
            i = best
        else:
            break
    H[i, 0] = c
    H[i, 1] = k


@internal
def _refill(T, H, target, tdata, tstart, tlen, maxlen, theta):
    """A heap of every pair whose count is at least ``floor``, the largest power of two that
    ``target`` or more pairs reach (1 if fewer pairs have a count) but at least ``theta`` (the
    smallest count whose pairs are all in the table: see ``table._initial_pairs``), and whose
    merged token is at most ``maxlen`` bytes. Returns (heap, size, floor).

    The heap is kept to pairs with a count of at least ``floor`` (bucket of the rest: the table):
    the pair with the largest count is in it while it is not empty, so a pop is exact; pairs that
    fall below the floor are dropped from it, and when it runs empty it is refilled with a lower
    floor. Most new pairs have small counts and are never pushed."""
    hist = _zero_array(64, np.int64)
    for i in range(T.shape[0]):
        c = T[i, _CNT]
        if T[i, _KEY] != _EMPTY and c > 0 and _fits(T[i, _KEY], _address(tlen), maxlen):
            b = 0
            while (c >> (b + 1)) > 0:
                b += 1
            hist[b] += 1
    above = 0
    bit = 0
    for b in range(63, -1, -1):
        above += hist[b]
        if above >= target:
            bit = b
            break
    floor = max(np.int64(1) << bit, theta)
    n = np.int64(0)
    for b in range(bit, 64):
        n += hist[b]
    H = _heap_room(H, n)
    hn = np.int64(0)
    for i in range(T.shape[0]):
        if T[i, _KEY] != _EMPTY and T[i, _CNT] >= floor and _fits(T[i, _KEY], _address(tlen), maxlen):
            H[hn, 0] = T[i, _CNT]
            H[hn, 1] = T[i, _KEY]
            hn += 1
    for i in range(hn // 2 - 1, -1, -1):
        _sift_down(H, hn, i, tdata, tstart, tlen)
    return H, hn, floor


@internal
def _heap_room(H, need):
    """The heap with room for ``need`` rows (grown by half)."""
    if need <= H.shape[0]:
        return H
    cap = max(need, H.shape[0] + (H.shape[0] >> 1))
    N = _empty_array((cap, 2), np.int64)
    for i in range(H.shape[0]):  # loops, not slices, in this module: they compile much faster
        N[i, 0] = H[i, 0]
        N[i, 1] = H[i, 1]
    return N


@internal
def _push_rows(H, hn, T, rows, n, floor, tdata, tstart, tlen, maxlen):
    """Push the pairs of table rows ``rows[:n]`` whose count is at least ``floor`` (>= 1) and
    whose merged token is at most ``maxlen`` bytes; returns the heap size (the heap has room)."""
    for r in range(n):
        s = rows[r]
        c = T[s, _CNT]
        if c < floor:
            continue
        k = T[s, _KEY]
        if not _fits(k, _address(tlen), maxlen):
            continue
        i = hn
        hn += 1
        while i > 0:
            parent = (i - 1) >> 1
            pc = H[parent, 0]
            up = c > pc
            if c == pc:
                up = _before(k, H[parent, 1], _address(tdata), _address(tstart), _address(tlen))
            if up:
                H[i, 0] = pc
                H[i, 1] = H[parent, 1]
                i = parent
            else:
                break
        H[i, 0] = c
        H[i, 1] = k
    return hn
