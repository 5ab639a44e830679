"""The pair table and the pool of position lists the merge loop reads and updates.

The table maps a pair (left id, right id), packed by ``_pkey``, to its total count and to the
block of the pool that lists the positions where the pair was created; ``_initial_pairs`` builds
both from the position array (``layout``), ``_rebuild`` regrows the table and ``_make_room``
compacts or grows the pool (from Python, ``rebuild_table`` and ``make_room``, when the loop
stops for them). Kernels only; ``loop`` drives them.
"""
from __future__ import annotations

import numpy as np

from .._kernels import _EMPTY, _empty_array, _full_array, _mix, _prefetch, _zero_array, inlined, internal, njit
from .layout import _LNK, _TC, _escaped


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
    T = _empty_array((cap, 2), np.int64)
    L = _empty_array((cap, 2), np.int32)
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


@njit(cache=True, no_cfunc_wrapper=True, nogil=True)
def recount(P, ek, ev, tb, n_tokens, expect, spare, slack, theta, want):
    """``_initial_pairs`` of the part-merged positions, for the merge loop's caller (``_loop``
    stops when no tracked pair is left that it may merge, or before a merge reuses a token while
    some pairs are not tracked): a new table and pool, e.g.
    ``T, L, used, pool, end, theta = recount(P, ek, ev, tb, n_tokens, 64, 4, 1024, 0, 10)``."""
    return _initial_pairs(P, ek, ev, tb, n_tokens, expect, spare, slack, theta, want)


@internal
def _new_pool(n):
    if n >= 2**31:
        raise ValueError("toktok: too many pair positions for the merge loop (2**31)")
    return _empty_array(n, np.int32)


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
def _floor_for(hist, want, most):
    """The smallest count a pair's positions are tracked from (see ``_initial_pairs``), from the
    histogram of the pairs' counts by power of two (``hist[b]``: counts in [2**b, 2**(b+1))): half
    the largest power of two that ``want`` pairs reach, at most the largest power of two up to
    ``most``; 0 (every pair) below 2."""
    theta = np.int64(0)
    above = 0
    for b in range(63, -1, -1):
        above += hist[b]
        if above >= want:
            theta = (np.int64(1) << b) >> 1
            break
    cap = np.int64(1)
    while cap <= most >> 1:
        cap <<= 1
    theta = min(theta, cap)
    return theta if theta >= 2 else np.int64(0)


@internal
def _raised(theta, r_cnt, n_rec, total):
    """``theta`` (the smallest count of the pairs tracked, ``_initial_pairs``) raised to a
    quarter of the power of two below the count the last of ``total`` merges is expected to have,
    from the counts of the ``n_rec`` merges so far: they fall as a power of the merge's number
    (each doubling of the merges divided the count by 2.2-2.6 on the bench's runs, and the
    expected last count was within 0.6-1.7x of the real one from 512 merges on); untracked new
    pairs cost neither table rows nor list entries. If it is too high, the loop runs out of
    tracked pairs and they are counted again (``recount``), tracking more. ``loop._rounds`` asks
    at each power of two merges from 512 on."""
    c_half = r_cnt[n_rec // 2 - 1]
    c_now = r_cnt[n_rec - 1]
    if total <= n_rec or c_now <= 0 or c_half <= c_now:
        return theta
    alpha = np.log2(c_half / c_now)
    expect = c_now * (n_rec / total) ** alpha
    p = np.int64(1)
    while p * 2 <= expect:
        p *= 2
    return max(theta, p >> 2 if p >= 8 else np.int64(0))


@inlined
def _log2(c):
    b = 0
    while (c >> (b + 1)) > 0:
        b += 1
    return b


#: The most tokens for which ``_initial_pairs`` counts the pairs in a dense n×n array.
SMALL_PAIRS = 2048


@internal
def _initial_pairs(P, ek, ev, tb, n_tokens, expect, spare, slack, theta, want):
    """Pair table and pool for the positions of ``P`` (laid out, or part-merged: each live row's
    link is the next token's row), each list ascending. Only the pairs whose count is at least
    ``theta`` are tracked (in the table, with their list); the others are neither (``theta`` < 0:
    chosen from the counts, at most -``theta``: ``_floor_for`` with ``want``, about twice the
    merges to make; few pairs of the millions a long-word phase has reach it). The hash table sees each tracked pair
    once: small vocabularies (bytes, hardcoded) count in a dense n×n array of pair numbers first, larger ones
    sort the positions by pair (``_pairs_by_left``). The table has room for ``expect`` more
    pairs, so that it rarely needs rebuilding in the loop. The pool has room for ``spare``/16 of
    the entries plus ``slack`` more. Returns (T, L, rows in use, pool, pool end, theta)."""
    if n_tokens > SMALL_PAIRS:
        # a larger vocabulary (SuperBPE's second phase, a warm start: millions of distinct pairs):
        # a counting sort by left token, then by right token within each left token's block
        return _pairs_by_left(P, ek, ev, tb, n_tokens, expect, spare, slack, theta, want)
    n_rows = P.shape[0]
    pid, pc, pl, dl, n_seen = _count_pairs(P, ek, ev, tb, n_tokens, 0, n_rows)
    none = _empty_array(0, np.int64)
    R, pool, acc, theta = _pair_lists(n_tokens, spare, slack, theta, want, pid, pc, pl, n_seen, none, none, dl, 0)
    T, L = _pair_table(R, n_tokens, expect)
    _place_pairs(P, tb, n_tokens, 0, n_rows, pid, pl, pool)
    return T, L, R.shape[0], pool, acc, theta


@internal
def _count_pairs(P, ek, ev, tb, n_tokens, lo, hi):
    """The first pass of ``_initial_pairs`` for a small vocabulary (``n_tokens`` <= 2048), over the
    positions ``lo:hi`` of ``P`` (a thread's part: ``count_pairs``): per pair (left * n_tokens +
    right) its number ``pid``, in the order first seen (a quarter of the memory two int64 per pair
    took); per number its count ``pc``, its positions ``pl`` and its pair ``dl``. Their arrays have
    room for every pair of ``P`` (pages never written cost nothing: few of the n×n pairs occur).
    Returns (pid, pc, pl, dl, pairs numbered)."""
    nn = n_tokens * n_tokens
    pid = _full_array(nn, -1, np.int32)
    most = min(nn, P.shape[0])
    pc = _empty_array(most, np.int64)
    pl = _empty_array(most, np.int64)
    dl = _empty_array(most, np.int32)
    n_seen = _count_more(P, ek, ev, tb, n_tokens, lo, hi, pid, pc, pl, dl, 0)
    return pid, pc, pl, dl, n_seen


@internal
def _count_more(P, ek, ev, tb, n_tokens, lo, hi, pid, pc, pl, dl, n_seen):
    """``_count_pairs`` of the positions ``lo:hi`` added to those of ``n_seen`` pairs numbered
    already (another part's, counted by the same thread: ``count_more``). Returns the pairs
    numbered."""
    tmask = (np.int64(1) << tb) - 1
    cmax = (np.int64(1) << (32 - tb)) - 1
    for p in range(lo, hi):
        v = np.int64(P[p, _TC])
        ta = v & tmask
        if ta >= tmask - 1:
            continue  # a wall or a dead row
        tn = np.int64(P[np.int64(P[p, _LNK]), _TC]) & tmask
        if tn < tmask - 1:
            d = ta * n_tokens + tn
            j = np.int64(pid[d])
            if j < 0:
                j = n_seen
                pid[d] = j
                pc[j] = 0
                pl[j] = 0
                dl[j] = d
                n_seen += 1
            wc = v >> tb
            if wc == cmax:
                wc = _escaped(ek, ev, p)
            pc[j] += wc
            pl[j] += 1
    return n_seen


@internal
def _pair_lists(n_tokens, spare, slack, theta, want, pid, pc, pl, n_seen, pc2, pl2, dl2, n_seen2):
    """The tracked pairs of ``_initial_pairs`` for a small vocabulary and their lists' blocks in
    the pool (not written yet: ``_place_pairs``), from ``_count_pairs`` of the positions before a
    row (``pid`` ... ``n_seen``) and of those from it (``pc2``, ``pl2``, ``dl2``, ``n_seen2``;
    none: ``n_seen2`` 0): the second part's pairs numbered in the first's arrays (their room is
    every pair of P), its counts added; each tracked pair's block given in order of pair, and
    ``pl`` and ``pl2`` then hold where each part's next position of the pair goes (the first
    part's first: each list ascending), -1 for a pair not tracked. Returns (R: a row (pair,
    count, head, length) per tracked pair in order of pair, pool, pool end, theta)."""
    nn = n_tokens * n_tokens
    other = _empty_array(n_seen + n_seen2, np.int64)  # per number: the second part's, or -1
    for j in range(n_seen + n_seen2):
        other[j] = -1
    for k in range(n_seen2):
        d = np.int64(dl2[k])
        j = np.int64(pid[d])
        if j < 0:
            j = n_seen
            pid[d] = j
            pc[j] = 0
            pl[j] = 0
            n_seen += 1
        pc[j] += pc2[k]
        other[j] = k
    if theta < 0:
        hist = _zero_array(64, np.int64)
        for j in range(n_seen):
            if pc[j] > 0:
                hist[_log2(pc[j])] += 1
        theta = _floor_for(hist, want, -theta)
    n_pairs = 0
    for j in range(n_seen):
        if pc[j] >= theta:
            n_pairs += 1
    R = _empty_array((n_pairs, 4), np.int64)
    acc = 0
    r = 0
    for d in range(nn):
        j = np.int64(pid[d])
        if j >= 0:
            k = other[j]
            if pc[j] < theta:
                pl[j] = -1  # not tracked
                if k >= 0:
                    pl2[k] = -1
                continue
            ln = pl[j]
            ln2 = pl2[k] if k >= 0 else 0
            R[r, 0] = d
            R[r, 1] = pc[j]
            R[r, 2] = acc
            R[r, 3] = ln + ln2
            r += 1
            pl[j] = acc  # from here on: where the first part's next position of pair d goes
            if k >= 0:
                pl2[k] = acc + ln  # and the second part's, after them
            acc += ln + ln2
    pool = _new_pool(acc + ((acc * spare) >> 4) + slack)
    return R, pool, acc, theta


@internal
def _pair_table(R, n_tokens, expect):
    """The pair table of the tracked pairs ``R`` (``_pair_lists``), with room for ``expect`` more
    pairs, filled in their order. Returns (T, L)."""
    n_pairs = R.shape[0]
    cap = np.int64(1024)
    while cap < 2 * (n_pairs + expect):
        cap *= 2
    T, L = _new_table(cap)
    for r in range(n_pairs):
        d = R[r, 0]
        key = _pkey(d // n_tokens, d % n_tokens)
        s = _tslot(T, key)
        T[s, _KEY] = key
        T[s, _CNT] = R[r, 1]
        L[s, _HEAD] = R[r, 2]
        L[s, _LEN] = R[r, 3]
    return T, L


@internal
def _place_pairs(P, tb, n_tokens, lo, hi, pid, pl, pool):
    """The second pass of ``_initial_pairs`` for a small vocabulary, over the positions ``lo:hi``
    (a thread's part: ``place_pairs``): each position of a tracked pair written to its list in
    ``pool``, where ``pl`` says (``_pair_lists``), ascending."""
    tmask = (np.int64(1) << tb) - 1
    for p in range(lo, hi):
        ta = np.int64(P[p, _TC]) & tmask
        if ta >= tmask - 1:
            continue
        tn = np.int64(P[np.int64(P[p, _LNK]), _TC]) & tmask
        if tn < tmask - 1:
            j = pid[ta * n_tokens + tn]
            i = pl[j]
            if i >= 0:
                pool[i] = p
                pl[j] = i + 1


@njit(cache=True, no_cfunc_wrapper=True, nogil=True)
def count_pairs(P, ek, ev, tb, n_tokens, lo, hi):
    """``_count_pairs`` of the positions ``lo:hi``, for one of the threads that start the merge
    loop (``learn._LoopRun._start``), e.g. ``pid, pc, pl, dl, n = count_pairs(P, ek, ev, tb, 1417, 0, n_rows // 2)``."""
    return _count_pairs(P, ek, ev, tb, n_tokens, lo, hi)


@njit(cache=True, no_cfunc_wrapper=True, nogil=True)
def count_more(P, ek, ev, tb, n_tokens, lo, hi, pid, pc, pl, dl, n_seen):
    """``_count_more``: the positions ``lo:hi`` added to a thread's ``count_pairs`` of the part
    before, e.g. ``n = count_more(P, ek, ev, tb, 1417, hi, hi + 4096, pid, pc, pl, dl, n)``."""
    return _count_more(P, ek, ev, tb, n_tokens, lo, hi, pid, pc, pl, dl, n_seen)


@njit(cache=True, no_cfunc_wrapper=True, nogil=True)
def pair_lists(n_tokens, spare, slack, theta, want, pid, pc, pl, n_seen, pc2, pl2, dl2, n_seen2):
    """``_pair_lists`` of two parts' ``count_pairs``, for the threads that start the merge loop
    (``learn._LoopRun._start``), e.g.
    ``R, pool, end, theta = pair_lists(1417, 6, 1024, -1, 10, pid, pc, pl, n, pc2, pl2, dl2, n2)``."""
    return _pair_lists(n_tokens, spare, slack, theta, want, pid, pc, pl, n_seen, pc2, pl2, dl2, n_seen2)


@njit(cache=True, no_cfunc_wrapper=True, nogil=True)
def place_pairs(P, tb, n_tokens, lo, hi, pid, pl, pool):
    """``_place_pairs`` of the positions ``lo:hi``, for one of the threads that start the merge
    loop (``learn._LoopRun._start``), e.g. ``place_pairs(P, tb, 1417, 0, n_rows // 2, pid, pl, pool)``."""
    _place_pairs(P, tb, n_tokens, lo, hi, pid, pl, pool)


@inlined
def _right_counts(E, s, e, low, tmask, tb, cmax, ek, ev, seen, cnt, ln):
    """The pairs (a, b) of one left token a, from its entries ``E[s:e]`` (see ``_pairs_by_left``):
    each right token b's count added to ``cnt[b]`` and its positions to ``ln[b]`` (both zero
    before), the b's listed in ``seen`` in the order first met; returns how many."""
    ns = 0
    for i in range(s, e):
        r = E[i] & low
        b = r & tmask
        wc = r >> tb
        if wc == cmax:
            wc = _escaped(ek, ev, E[i] >> 32)
        if ln[b] == 0:
            seen[ns] = b
            ns += 1
        cnt[b] += wc
        ln[b] += 1
    return ns


@internal
def _pairs_by_left(P, ek, ev, tb, n_tokens, expect, spare, slack, theta, want):
    """``_initial_pairs`` for a large vocabulary, in passes over the positions:
    1. how many positions each left token has; 2. each position, ascending, into its left token's
    block of ``E``, with its right token and its count's bits (8 bytes a position while this
    runs: one stream of writes per left token); 3. per left token, its right tokens' counts in
    dense arrays: the tracked pairs and their positions counted (and, with ``theta`` < 0, the
    histogram of the counts: ``theta`` chosen from it), so that the table and the pool are made
    once at their size; 4. per left token again, each tracked pair's row filled (rows prefetched a
    few pairs ahead) and its positions written to its list in the pool, ascending (the untracked
    pairs' positions are dropped)."""
    n_rows = P.shape[0]
    tmask = (np.int64(1) << tb) - 1
    cmax = (np.int64(1) << (32 - tb)) - 1
    low = np.int64(0xFFFFFFFF)
    start = _zero_array(n_tokens + 1, np.int64)
    for p in range(n_rows):
        ta = np.int64(P[p, _TC]) & tmask
        if ta >= tmask - 1:
            continue  # a wall or a dead row
        tn = np.int64(P[np.int64(P[p, _LNK]), _TC]) & tmask
        if tn < tmask - 1:
            start[ta + 1] += 1
    for a in range(n_tokens):
        start[a + 1] += start[a]
    acc = start[n_tokens]
    E = _empty_array(acc, np.int64)  # position << 32 | count bits | right token
    nxt = start.copy()
    for p in range(n_rows):
        v = np.int64(P[p, _TC])
        ta = v & tmask
        if ta >= tmask - 1:
            continue
        tn = np.int64(P[np.int64(P[p, _LNK]), _TC]) & tmask
        if tn < tmask - 1:
            i = nxt[ta]
            nxt[ta] = i + 1
            E[i] = (np.int64(p) << 32) | (v & ~tmask & low) | tn
    # 3. the tracked pairs and their positions (and the histogram of the counts, to choose theta)
    cnt = _zero_array(n_tokens, np.int64)
    ln = _zero_array(n_tokens, np.int64)
    seen = _empty_array(n_tokens, np.int64)
    hist = _zero_array(64, np.int64)
    hist_pos = _zero_array(64, np.int64)  # their positions
    n_pairs = 0
    n_pos = 0
    n_all = 0
    for a in range(n_tokens):
        ns = _right_counts(E, start[a], start[a + 1], low, tmask, tb, cmax, ek, ev, seen, cnt, ln)
        for j in range(ns):
            b = seen[j]
            c = cnt[b]
            n_all += 1
            if c >= theta:
                n_pairs += 1
                n_pos += ln[b]
            if c > 0:
                hist[_log2(c)] += 1
                hist_pos[_log2(c)] += ln[b]
            cnt[b] = 0
            ln[b] = 0
    if theta < 0:
        theta = _floor_for(hist, want, -theta)
        if theta == 0:
            n_pairs = n_all
            n_pos = acc
        else:
            n_pairs = 0
            n_pos = 0
            for b in range(64):
                if (np.int64(1) << b) >= theta:
                    n_pairs += hist[b]
                    n_pos += hist_pos[b]
    cap = np.int64(1024)
    while cap < 2 * (n_pairs + expect):
        cap *= 2
    T, L = _new_table(cap)
    mask = np.uint64(cap - 1)
    # (room for new lists as before the untracked positions were dropped: pages never written cost nothing)
    pool = _new_pool(n_pos + ((acc * spare) >> 4) + slack)
    keep = _empty_array(n_tokens, np.int64)
    D = 8
    o = 0
    n_used = 0
    for a in range(n_tokens):
        s = start[a]
        e = start[a + 1]
        ns = _right_counts(E, s, e, low, tmask, tb, cmax, ek, ev, seen, cnt, ln)
        nk = 0
        for j in range(ns):
            b = seen[j]
            if cnt[b] >= theta:
                keep[nk] = b
                nk += 1
            else:
                ln[b] = -1  # not tracked: its positions are dropped
        for j in range(nk):
            if j + D < nk:
                f = np.int64(_mix(_pkey(a, keep[j + D])) & mask)
                _prefetch(T, f)
                _prefetch(L, f)
            b = keep[j]
            key = _pkey(a, b)
            sl = _tslot(T, key)
            T[sl, _KEY] = key
            T[sl, _CNT] = cnt[b]
            L[sl, _HEAD] = o
            L[sl, _LEN] = ln[b]
            n_used += 1
            cnt[b] = o  # from here on: where b's next position goes
            o += ln[b]
        if nk > 0:
            for i in range(s, e):
                x = E[i]
                b = x & tmask
                if ln[b] >= 0:
                    pool[cnt[b]] = np.int32(x >> 32)
                    cnt[b] += 1
        for j in range(ns):
            cnt[seen[j]] = 0
            ln[seen[j]] = 0
    return T, L, n_used, pool, o, theta
