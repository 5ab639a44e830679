"""One word's rank-BPE for the compiled segmentation (``segment._segment``): the plain loop, which
rescans the word after each merge (``_plain``), and a heap of candidate pairs for long words
(``_segment_long``, O(n log n)); the same ids, tiktoken's (whole-word lookup is the caller's).
"""
from __future__ import annotations

import numpy as np

from .._kernels import _address, _empty_array, _peek, _poke, inlined, internal
from .tokens import _lookup


@internal
def _segment_long(data, s, n, bkeys, bids, tdata, tstart, tlen, pair2, byte_id, max_len, out, o, n_tokens):
    """``_segment``'s rank-BPE of one long word ``data[s:s+n]`` (no whole-word match) in
    O(n log n): the parts are a linked list and the candidate pairs a min-heap of (rank, start),
    so the lowest rank, leftmost on ties, comes first, as in the plain loop. An entry is stale
    when the part's pair no longer has that rank: a pair only ever grows, so it never gets the
    same rank (the same bytes) back. A pair longer than the longest token is not looked up,
    which bounds each lookup. Writes the ids at ``out[o:]`` (``out``: the int32 ids' address, as
    ``_segment`` has them); returns the number of parts.
    (Its heap is written out here: a sift helper taking the arrays would pay reference counts on
    every call, see ``heap._before``; lookups go through ``_lookup`` on the tables' addresses.)"""
    big = np.int64(1) << 31
    nxt = _empty_array(n, np.int64)  # start of the next part (n after the last)
    prv = _empty_array(n, np.int64)  # start of the previous part (-1 before the first)
    rank = _empty_array(n, np.int64)  # rank of (this part, next part); big: none; -1: not a part
    tid = _empty_array(n, np.int64)  # the part's token id
    # (rank << 32) | start; stale entries stay until popped: at most n - 1 at the start plus
    # two per merge, and there are at most n - 1 merges
    heap = _empty_array(3 * n, np.int64)
    hn = 0
    for i in range(n):
        nxt[i] = i + 1
        prv[i] = i - 1
        tid[i] = byte_id[data[s + i]]
        r = pair2[np.int64(data[s + i]) * 256 + data[s + i + 1]] if i + 1 < n else -1
        rank[i] = r if r >= 0 else big
        if r >= 0:
            heap[hn] = (r << 32) | i
            hn += 1
    # heapify: sift each parent down
    for j in range(hn // 2 - 1, -1, -1):
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
    # the tables by address, for _lookup (no reference counts per lookup)
    keys_at, ids_at, tdata_at = _address(bkeys), _address(bids), _address(tdata)
    tstart_at, tlen_at, data_at = _address(tstart), _address(tlen), _address(data)
    mask = np.uint64(bkeys.shape[0] - 1)
    while hn > 0:
        top = heap[0]
        # pop: the last key sifts down from the root
        hn -= 1
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
        # merge part i with the next one
        j = nxt[i]
        k = nxt[j]
        nxt[i] = k
        if k < n:
            prv[k] = i
        rank[j] = -1
        tid[i] = r
        # the two pairs that changed: (i, next) and (previous, i)
        for side in range(2):
            if side == 0:
                lo = i
                hi = nxt[k] if k < n else -1
            else:
                lo = prv[i]
                hi = k if lo >= 0 else -1
            if hi < 0:
                if side == 0:
                    rank[i] = big
                continue
            t = np.int64(-1)
            ln = hi - lo
            if ln <= max_len:
                t = _lookup(keys_at, ids_at, tdata_at, tstart_at, tlen_at, mask, data_at, s + lo, ln, n_tokens)
            if t < 0:
                rank[lo] = big
                continue
            rank[lo] = t
            # push
            key = (t << 32) | lo
            q = hn
            while q > 0:
                parent = (q - 1) >> 1
                if heap[parent] <= key:
                    break
                heap[q] = heap[parent]
                q = parent
            heap[q] = key
            hn += 1
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
