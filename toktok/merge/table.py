"""The pair table and the pool of position lists the merge loop reads and updates.

The table maps a pair (left id, right id), packed by ``_pkey``, to its total count and to the
block of the pool that lists the positions where the pair was created; ``_initial_pairs`` builds
both from the position array (``layout``), ``_rebuild`` regrows the table and ``_make_room``
compacts or grows the pool (from Python, ``rebuild_table`` and ``make_room``, when the loop
stops for them). Kernels only; ``loop`` drives them.
"""
from __future__ import annotations

import numpy as np

from .._kernels import _EMPTY, _empty_array, _mix, _prefetch, _zero_array, inlined, internal, njit
from .layout import _TC, _big_array, _escaped


@inlined
def _pkey(a, b):
    return (np.int64(a) << 32) | np.int64(b)


# The pair table is open addressing with linear probing over two parallel arrays: ``T`` rows
# (pair key, count), 16 bytes, which the merge rounds probe and update, and ``L`` rows (head,
# length) of the pair's list of positions in the pool, int32, read once per round.
_KEY, _CNT = 0, 1
_HEAD, _LEN = 0, 1


@inlined
def _tslot(T, key):
    """Row of ``key`` in the pair table, or the empty row where it would go."""
    mask = np.uint64(T.shape[0] - 1)
    i = _mix(key) & mask
    while True:
        k = T[i, _KEY]
        if k == key or k == _EMPTY:
            return np.int64(i)
        i = (i + np.uint64(1)) & mask


@internal
def _new_table(cap):
    T = _big_array((cap, 2), np.int64)
    L = _big_array((cap, 2), np.int32)
    for i in range(cap):
        T[i, _KEY] = _EMPTY
        T[i, _CNT] = 0
        L[i, _HEAD] = 0
        L[i, _LEN] = 0
    return T, L


@internal
def _rebuild(T, L, need):
    """A table with room for ``need`` more pairs, at most half full. Pairs with no count are
    dropped: a zero count means no live occurrence, so their lists hold only stale positions.
    Returns the table, the rows in use, and how many list entries were dropped."""
    live = 0
    dropped = 0
    for i in range(T.shape[0]):
        if T[i, _KEY] != _EMPTY:
            if T[i, _CNT] != 0:
                live += 1
            else:
                dropped += L[i, _LEN]
    cap = np.int64(1024)
    while cap < 2 * (live + need):
        cap *= 2
    NT, NL = _new_table(cap)
    for i in range(T.shape[0]):
        if T[i, _KEY] != _EMPTY and T[i, _CNT] != 0:
            s = _tslot(NT, T[i, _KEY])
            NT[s, _KEY] = T[i, _KEY]
            NT[s, _CNT] = T[i, _CNT]
            NL[s, _HEAD] = L[i, _HEAD]
            NL[s, _LEN] = L[i, _LEN]
    return NT, NL, live, dropped


@njit(cache=True, no_cfunc_wrapper=True, nogil=True)
def rebuild_table(T, L, need):
    """``_rebuild``, for the merge loop's caller (``_loop`` stops when its table needs it):
    compiled only by a run that gets there, e.g. ``T, L, live, dropped = rebuild_table(T, L, 64)``."""
    return _rebuild(T, L, need)


@njit(cache=True, no_cfunc_wrapper=True, nogil=True)
def make_room(T, L, pool, pool_end, live, need):
    """``_make_room``, for the merge loop's caller (``_loop`` stops when a round needs it):
    compiled only by a run that gets there, e.g. ``pool, end, live, how = make_room(T, L, pool, end, live, 64)``."""
    return _make_room(T, L, pool, pool_end, live, need)


@internal
def _new_pool(n):
    if n >= 2**31:
        raise ValueError("toktok: too many pair positions for the merge loop (2**31)")
    return _big_array(n, np.int32)


@internal
def _make_room(T, L, pool, pool_end, live, need):
    """Room for ``need`` more entries after ``pool_end``. When at least an eighth of the pool is
    garbage, the lists are compacted in place (in order of their blocks, so each moves down) and
    the lists of pairs with no count (only stale positions) are dropped; if that is not enough
    room, the pool grows by a quarter. Returns the pool, its new end, its entries in lists, and
    1 (compacted) or 2 (grown)."""
    if 8 * (pool_end - live) >= pool_end:
        # rows with a list, ordered by block start: radix sort on (head << 32 | row)
        n = 0
        for i in range(T.shape[0]):
            if T[i, _KEY] != _EMPTY and L[i, _LEN] > 0:
                if T[i, _CNT] == 0:
                    L[i, _LEN] = 0
                else:
                    n += 1
        keys = _empty_array(n, np.int64)
        n = 0
        for i in range(T.shape[0]):
            if T[i, _KEY] != _EMPTY and L[i, _LEN] > 0:
                keys[n] = (np.int64(L[i, _HEAD]) << 32) | i
                n += 1
        keys = _radix_sort(keys, np.int64(32))  # heads are distinct: their bits suffice
        o = 0
        for j in range(n):
            i = keys[j] & 0xFFFFFFFF
            h = L[i, _HEAD]
            ln = L[i, _LEN]
            if h != o:
                for k in range(ln):
                    pool[o + k] = pool[h + k]
                L[i, _HEAD] = o
            o += ln
        live = o
        pool_end = o
        if pool.shape[0] - o >= need:
            return pool, o, live, 1
    out = _new_pool(max(pool.shape[0] + (pool.shape[0] >> 2), pool_end + need + (need >> 1)))
    for i in range(pool_end):
        out[i] = pool[i]
    return out, pool_end, live, 2


@internal
def _radix_sort(a, lo):
    """``a`` (non-negative int64) sorted by its bits from ``lo`` up (bits below ``lo`` keep
    their input order): LSD radix sort, 16 bits a pass, none above the largest value."""
    n = a.shape[0]
    hi = 0
    for i in range(n):
        hi = max(hi, a[i])
    b = _empty_array(n, np.int64)
    cnt = _empty_array(1 << 16, np.int64)
    shift = lo
    while shift < 64 and (hi >> shift) > 0:
        for d in range(1 << 16):
            cnt[d] = 0
        for i in range(n):
            cnt[(a[i] >> shift) & 0xFFFF] += 1
        acc = 0
        for d in range(1 << 16):
            c = cnt[d]
            cnt[d] = acc
            acc += c
        for i in range(n):
            d = (a[i] >> shift) & 0xFFFF
            b[cnt[d]] = a[i]
            cnt[d] += 1
        a, b = b, a
        shift += 16
    return a


@internal
def _initial_pairs(P, ek, ev, tb, n_tokens, expect, spare, slack):
    """Pair table and pool for the starting positions, each list ascending. The hash table sees
    each distinct pair once: small vocabularies (bytes, hardcoded) count in a dense n×n array
    first, larger ones sort the positions by pair (``_pairs_by_left``). The table has room for ``expect`` more pairs, so that it rarely needs rebuilding
    in the loop. The pool has room for ``spare``/16 of the entries plus ``slack`` more. Returns
    (T, L, rows in use, pool, pool end)."""
    n_rows = P.shape[0]
    tmask = (np.int64(1) << tb) - 1
    cmax = (np.int64(1) << (32 - tb)) - 1
    n_used = 0
    if n_tokens <= 2048:
        nn = n_tokens * n_tokens
        dcnt = _zero_array(nn, np.int64)
        dlen = _zero_array(nn, np.int64)
        for p in range(n_rows - 1):
            v = np.int64(P[p, _TC])
            ta = v & tmask
            tn = np.int64(P[p + 1, _TC]) & tmask
            if ta < tmask - 1 and tn < tmask - 1:
                d = ta * n_tokens + tn
                wc = v >> tb
                if wc == cmax:
                    wc = _escaped(ek, ev, p)
                dcnt[d] += wc
                dlen[d] += 1
        acc = 0
        n_pairs = 0
        for d in range(nn):
            if dlen[d] > 0:
                n_pairs += 1
        cap = np.int64(1024)
        while cap < 2 * (n_pairs + expect):
            cap *= 2
        T, L = _new_table(cap)
        for d in range(nn):
            if dlen[d] > 0:
                key = _pkey(d // n_tokens, d % n_tokens)
                s = _tslot(T, key)
                T[s, _KEY] = key
                T[s, _CNT] = dcnt[d]
                L[s, _HEAD] = acc
                L[s, _LEN] = dlen[d]
                n_used += 1
                ln = dlen[d]
                dlen[d] = acc  # from here on: where the next position of pair d goes
                acc += ln
        pool = _new_pool(acc + ((acc * spare) >> 4) + slack)
        for p in range(n_rows - 1):
            ta = np.int64(P[p, _TC]) & tmask
            tn = np.int64(P[p + 1, _TC]) & tmask
            if ta < tmask - 1 and tn < tmask - 1:
                d = ta * n_tokens + tn
                pool[dlen[d]] = p
                dlen[d] += 1
        return T, L, n_used, pool, acc
    # a larger vocabulary (SuperBPE's second phase, a warm start: millions of distinct pairs in a
    # table far larger than the caches): a counting sort by left token, then by right token
    # within each left token's block, touches the table once per distinct pair, not twice per
    # position (2.5x less CPU than hashing each position on the bench's 25.9 M positions)
    return _pairs_by_left(P, ek, ev, tb, n_tokens, expect, spare, slack)


@internal
def _pairs_by_left(P, ek, ev, tb, n_tokens, expect, spare, slack):
    """``_initial_pairs`` for a large vocabulary, in three passes over the positions:
    1. how many positions each left token has; 2. each position, ascending, into its left token's
    block of the pool, with its right token and its count's bits beside it (``R``, 4 bytes a
    position while this runs); 3. per left token, its right tokens' counts and lengths in dense
    arrays (the distinct pairs counted first, so that the table is made once at its size), each
    pair's row filled (rows prefetched a few pairs ahead), and the block reordered by right token
    in place, stably: each pair's positions stay ascending."""
    n_rows = P.shape[0]
    tmask = (np.int64(1) << tb) - 1
    cmax = (np.int64(1) << (32 - tb)) - 1
    start = _zero_array(n_tokens + 1, np.int64)
    for p in range(n_rows - 1):
        ta = np.int64(P[p, _TC]) & tmask
        tn = np.int64(P[p + 1, _TC]) & tmask
        if ta < tmask - 1 and tn < tmask - 1:
            start[ta + 1] += 1
    for a in range(n_tokens):
        start[a + 1] += start[a]
    acc = start[n_tokens]
    pool = _new_pool(acc + ((acc * spare) >> 4) + slack)
    R = _big_array(acc, np.uint32)
    nxt = start.copy()
    for p in range(n_rows - 1):
        v = np.int64(P[p, _TC])
        ta = v & tmask
        tn = np.int64(P[p + 1, _TC]) & tmask
        if ta < tmask - 1 and tn < tmask - 1:
            i = nxt[ta]
            nxt[ta] = i + 1
            pool[i] = p
            R[i] = np.uint32((v & ~tmask) | tn)
    # the distinct pairs: right tokens first seen in each left token's block
    mark = _zero_array(n_tokens, np.int64)
    n_pairs = 0
    most = 0
    for a in range(n_tokens):
        most = max(most, start[a + 1] - start[a])
        for i in range(start[a], start[a + 1]):
            b = np.int64(R[i]) & tmask
            if mark[b] != a + 1:
                mark[b] = a + 1
                n_pairs += 1
    cap = np.int64(1024)
    while cap < 2 * (n_pairs + expect):
        cap *= 2
    T, L = _new_table(cap)
    mask = np.uint64(cap - 1)
    cnt = _zero_array(n_tokens, np.int64)
    ln = _zero_array(n_tokens, np.int64)
    seen = _empty_array(n_tokens, np.int64)
    tmp = _empty_array(most, np.int32)
    D = 8
    for a in range(n_tokens):
        s = start[a]
        e = start[a + 1]
        ns = 0
        for i in range(s, e):
            r = np.int64(R[i])
            b = r & tmask
            wc = r >> tb
            if wc == cmax:
                wc = _escaped(ek, ev, pool[i])
            if ln[b] == 0:
                seen[ns] = b
                ns += 1
            cnt[b] += wc
            ln[b] += 1
        o = s
        for j in range(ns):
            if j + D < ns:
                f = np.int64(_mix(_pkey(a, seen[j + D])) & mask)
                _prefetch(T, f)
                _prefetch(L, f)
            b = seen[j]
            key = _pkey(a, b)
            sl = _tslot(T, key)
            T[sl, _KEY] = key
            T[sl, _CNT] = cnt[b]
            L[sl, _HEAD] = o
            L[sl, _LEN] = ln[b]
            cnt[b] = o  # from here on: where b's next position goes
            o += ln[b]
        for i in range(s, e):
            tmp[i - s] = pool[i]
        for i in range(s, e):
            b = np.int64(R[i]) & tmask
            pool[cnt[b]] = tmp[i - s]
            cnt[b] += 1
        for j in range(ns):
            cnt[seen[j]] = 0
            ln[seen[j]] = 0
    return T, L, n_pairs, pool, acc
