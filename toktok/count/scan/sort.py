"""The counted words in byte order (``WordCounter.table``), sorted by compiled kernels."""
from __future__ import annotations

from ..._kernels import inlined, njit

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
