"""One word's rank-BPE for the compiled segmentation (``segment._segment``): the plain loop, which
rescans the word after each merge (``_plain``), and a heap of candidate pairs for long words
(``_segment_long``, O(n log n): ``_heap_parts``, which ``further`` takes up from a word's ids too); the same ids, tiktoken's (whole-word lookup is the caller's).
"""
from __future__ import annotations

import numpy as np

from .._kernels import _address, _empty_array, _peek, _poke, inlined, internal
from .tokens import _lookup


@internal
def _heap_parts(pos, tid, rank, nxt, prv, heap, m, s, max_len, keys_at, ids_at, tdata_at, tstart_at, tlen_at, mask,
                data_at, n_tokens):
    """Rank-BPE of a word at ``data[s:]`` given as parts: part ``i`` (of ``m``) starts at byte
    ``pos[i]`` of the word (``pos[m]``: its length), is token ``tid[i]`` and is linked by ``nxt``
    (``m`` after the last) and ``prv`` (-1 before the first); ``rank[i]`` is the rank of (part i,
    its next), ``1 << 31`` for none. The candidate pairs go in a min-heap of (rank, part) in
    ``heap`` (room for ``3 * m``), so the lowest rank, leftmost on ties, comes first, as in the
    plain loop. An entry is stale when the part's pair no longer has that rank: a pair only ever
    grows, so it never gets the same rank (the same bytes) back. A pair longer than the longest
    token (``max_len``) is not looked up, which bounds each lookup. The merged parts are left in
    ``tid``, linked from part 0 by ``nxt``. (The heap is written out here: a sift helper taking the
    arrays would pay reference counts on every call, see ``heap._before``; lookups go through
    ``_lookup`` on the tables' addresses.)"""
    big = np.int64(1) << 31
    hn = 0
    for i in range(m):
        if rank[i] < big:
            heap[hn] = (rank[i] << 32) | i
            hn += 1
    for j in range(hn // 2 - 1, -1, -1):  # heapify: sift each parent down
        key = heap[j]
        i = j
        while True:
            c = 2 * i + 1
            if c >= hn:
                break
            if c + 1 < hn and heap[c + 1] < heap[c]:
                c += 1
            if heap[c] >= key:
                break
            heap[i] = heap[c]
            i = c
        heap[i] = key
    while hn > 0:
        top = heap[0]
        hn -= 1  # pop: the last key sifts down from the root
        key = heap[hn]
        i = 0
        while True:
            c = 2 * i + 1
            if c >= hn:
                break
            if c + 1 < hn and heap[c + 1] < heap[c]:
                c += 1
            if heap[c] >= key:
                break
            heap[i] = heap[c]
            i = c
        if hn > 0:
            heap[i] = key
        r = top >> 32
        i = top & 0xFFFFFFFF
        if rank[i] != r:
            continue  # stale
        j = nxt[i]  # part i takes in the next one
        k = nxt[j]
        nxt[i] = k
        if k < m:
            prv[k] = i
        rank[j] = -1
        tid[i] = r
        for side in range(2):  # the two pairs that changed: (i, next) and (previous, i)
            if side == 0:
                lo = i
                if k >= m:
                    rank[i] = big
                    continue
                end = pos[nxt[k]]
            else:
                lo = prv[i]
                if lo < 0:
                    continue
                end = pos[k]
            ln = end - pos[lo]
            t = np.int64(-1)
            if ln <= max_len:
                t = _lookup(keys_at, ids_at, tdata_at, tstart_at, tlen_at, mask, data_at, s + pos[lo], ln, n_tokens)
            if t < 0:
                rank[lo] = big
                continue
            rank[lo] = t
            key = (t << 32) | lo  # push
            q = hn
            while q > 0:
                parent = (q - 1) >> 1
                if heap[parent] <= key:
                    break
                heap[q] = heap[parent]
                q = parent
            heap[q] = key
            hn += 1


@internal
def _segment_long(data, s, n, bkeys, bids, tdata, tstart, tlen, pair2, byte_id, max_len, out, o, n_tokens):
    """``_segment``'s rank-BPE of one long word ``data[s:s+n]`` (no whole-word match) in
    O(n log n): its bytes as parts, merged by :func:`_heap_parts`. Writes the ids at ``out[o:]``
    (``out``: the int32 ids' address, as ``_segment`` has them); returns the number of parts."""
    big = np.int64(1) << 31
    pos = _empty_array(n + 1, np.int64)  # part i starts at byte i
    nxt = _empty_array(n, np.int64)
    prv = _empty_array(n, np.int64)
    rank = _empty_array(n, np.int64)
    tid = _empty_array(n, np.int64)
    # stale entries stay until popped: at most n - 1 at the start plus two per merge, and there
    # are at most n - 1 merges
    heap = _empty_array(3 * n, np.int64)
    for i in range(n):
        pos[i] = i
        nxt[i] = i + 1
        prv[i] = i - 1
        tid[i] = byte_id[data[s + i]]
        r = pair2[np.int64(data[s + i]) * 256 + data[s + i + 1]] if i + 1 < n else -1
        rank[i] = r if r >= 0 else big
    pos[n] = n
    # the tables by address, for _lookup (no reference counts per lookup)
    keys_at, ids_at, tdata_at = _address(bkeys), _address(bids), _address(tdata)
    tstart_at, tlen_at, data_at = _address(tstart), _address(tlen), _address(data)
    _heap_parts(pos, tid, rank, nxt, prv, heap, n, s, max_len, keys_at, ids_at, tdata_at, tstart_at, tlen_at,
                np.uint64(bkeys.shape[0] - 1), data_at, n_tokens)
    m = 0
    i = 0
    while i < n:
        _poke(out, o + m, tid[i], np.int32)
        m += 1
        i = nxt[i]
    return m


@inlined
def _plain(data, s, n, pair2, byte_id, bounds, rk, out, o, keys_at, ids_at, tdata_at, tstart_at, tlen_at, mask,
           n_tokens):
    """Rank-BPE of ``data[s:s+n]`` (no whole-word lookup; ``bounds``/``rk`` hold ``n + 1``) by
    the plain loop, which rescans the word after each merge: the ids at ``out[o:]``; returns
    their number. Every array by its address (``_address``: data uint8, pair2 int64, byte_id
    int32, bounds and rk int64, out int32) and the tables as ``_lookup`` takes them: inlined, a
    helper taking arrays would still pay their reference counts at every call."""
    big = np.int64(1) << 62
    nb = n + 1
    for i in range(nb):
        _poke(bounds, i, s + i, np.int64)
    any_pair = False
    for i in range(nb - 2):
        r = _peek(pair2, np.int64(_peek(data, s + i, np.uint8)) * 256 + _peek(data, s + i + 1, np.uint8), np.int64)
        _poke(rk, i, r if r >= 0 else big, np.int64)
        any_pair = any_pair or r >= 0
    if not any_pair:
        # single bytes: id = the byte's rank
        for i in range(n):
            _poke(out, o + i, _peek(byte_id, np.int64(_peek(data, s + i, np.uint8)), np.int32), np.int32)
        return n
    while nb > 2:
        best = big
        bi = -1
        for i in range(nb - 2):
            r = _peek(rk, i, np.int64)
            if r < best:
                best = r
                bi = i
        if bi < 0:
            break
        # drop the boundary between parts bi and bi+1
        for i in range(bi + 1, nb - 1):
            _poke(bounds, i, _peek(bounds, i + 1, np.int64), np.int64)
        for i in range(bi + 1, nb - 3):
            _poke(rk, i, _peek(rk, i + 1, np.int64), np.int64)
        nb -= 1
        if bi + 2 < nb:
            a = _peek(bounds, bi, np.int64)
            r = _lookup(keys_at, ids_at, tdata_at, tstart_at, tlen_at, mask, data, a, _peek(bounds, bi + 2, np.int64) - a,
                        n_tokens)
            _poke(rk, bi, r if r >= 0 else big, np.int64)
        if bi > 0:
            a = _peek(bounds, bi - 1, np.int64)
            r = _lookup(keys_at, ids_at, tdata_at, tstart_at, tlen_at, mask, data, a, _peek(bounds, bi + 1, np.int64) - a,
                        n_tokens)
            _poke(rk, bi - 1, r if r >= 0 else big, np.int64)
    for i in range(nb - 1):
        a = _peek(bounds, i, np.int64)
        ln = _peek(bounds, i + 1, np.int64) - a
        r = np.int64(_peek(byte_id, np.int64(_peek(data, a, np.uint8)), np.int32)) if ln == 1 else \
            _lookup(keys_at, ids_at, tdata_at, tstart_at, tlen_at, mask, data, a, ln, n_tokens)
        _poke(out, o + i, r, np.int32)
    return nb - 1
