"""The compiled merge loop: pop the best pair, merge it at every live position, update the counts.

The loop is incremental: an 8-byte row per token position (token and word count packed, one
link; ``layout``), a list of positions per pair in one pool, pair counts in a hash table updated
by deltas (``table``), and a lazy max-heap that holds only the pairs with large counts
(``heap``). ``_setup`` builds that state (``_setup_counted`` from pairs counted in two threads);
``_loop`` runs merge rounds (``_rounds``) until it has made the merges asked for, no pair is left,
its record arrays are full, or the pair table or the pool is full (the caller rebuilds or grows
it: ``table.rebuild_table``, ``table.make_room``; rarely needed). A round reads only the chosen
pair's positions, with the rows of the next ones prefetched, and writes the new pairs' lists as
whole blocks after it. ``learn`` drives it from Python.
"""
from __future__ import annotations

import numpy as np

from .._kernels import _EMPTY, _alive, _atomic_get, _atomic_set, _atomic_swap, _empty_array, _futex, _grow, _mix, _prefetch, _zero_array, internal, njit
from .heap import _heap_room, _push_rows, _refill, _sift_down
from .layout import _LNK, _TC, _escaped
from .table import _CNT, _HEAD, _KEY, _LEN, _initial_pairs, _pair_table, _pkey, _radix_sort, _raised, _tslot
from .tokens import _bytes_hash, _find_token, _put_token, _token_table

#: No limit on a merged token's length (``st[20]``'s default).
NO_LIMIT = np.int64(1) << 62
#: Merges without a round large enough to share after which the loop's second thread stops.
SPLIT_IDLE = 512


@njit(cache=True, no_cfunc_wrapper=True, nogil=True)
def _setup(P, ek, ev, tb, tdata, tstart, tlen, n_tokens, expect, spare, slack, heap_target, reverse, theta, want):
    """The loop's starting state: token bytes lookup, pair table with each pair's positions
    (of the pairs counted at least ``theta`` times, -1: chosen for ``want``, see
    ``table._initial_pairs``), heap. Returns (bkeys, bids, T, L, pool, H, st) with the scalars
    in ``st`` (see ``_loop``). ``reverse`` (tests) reverses every list of positions."""
    max_tokens = tstart.shape[0]

    # 1. token bytes lookup, to reuse a token whose bytes a merge produces again
    bkeys, bids = _token_table(tdata, tstart, tlen, n_tokens, max_tokens)

    # 2. pair counts and each pair's positions, ascending (counting sort by pair)
    T, L, n_used, pool, pool_end, theta = _initial_pairs(P, ek, ev, tb, n_tokens, expect, spare, slack, theta, want)
    if reverse:
        # tests only: lists in descending order. Merging does not depend on the order, except
        # that overlapping runs (a a a) go left to right, so the loop must sort those lists
        for s in range(T.shape[0]):
            h = L[s, _HEAD]
            n = L[s, _LEN]
            for k in range(n // 2):
                x = pool[h + k]
                pool[h + k] = pool[h + n - 1 - k]
                pool[h + n - 1 - k] = x

    H, st = _started(T, tdata, tstart, tlen, n_tokens, heap_target, n_used, pool_end, theta)
    return bkeys, bids, T, L, pool, H, st


@njit(cache=True, no_cfunc_wrapper=True, nogil=True)
def _setup_counted(tdata, tstart, tlen, n_tokens, expect, heap_target, R, pool_end, theta):
    """``_setup`` (no ``reverse``) for a small vocabulary from its tracked pairs, counted in threads
    (``R``, ``pool_end`` and ``theta`` of ``table.pair_lists``): the same state but the pool, whose
    lists ``table.place_pairs`` writes meanwhile (``learn._LoopRun._start``). Returns (bkeys, bids,
    T, L, H, st)."""
    bkeys, bids = _token_table(tdata, tstart, tlen, n_tokens, tstart.shape[0])
    T, L = _pair_table(R, n_tokens, expect)
    H, st = _started(T, tdata, tstart, tlen, n_tokens, heap_target, R.shape[0], pool_end, theta)
    return bkeys, bids, T, L, H, st


@internal
def _started(T, tdata, tstart, tlen, n_tokens, heap_target, n_used, pool_end, theta):
    """The heap and the scalars of ``_setup``."""
    # 3. the heap holds the pairs with the largest counts (see ``_refill``)
    H, hn, floor = _refill(T, _empty_array((1024, 2), np.int64), heap_target, tdata, tstart, tlen, NO_LIMIT, theta)

    st = _zero_array(32, np.int64)
    st[8] = floor
    st[0] = n_used
    st[1] = pool_end
    st[2] = pool_end  # pool_live: entries in lists (live or stale); the rest is garbage
    st[3] = hn
    st[4] = tstart[n_tokens - 1] + tlen[n_tokens - 1] if n_tokens > 0 else 0
    st[5] = n_tokens
    st[20] = NO_LIMIT  # the longest merged token, bytes (the caller sets --max-token-length)
    st[21] = 0  # the smallest count a merged pair may have (the caller sets --min-frequency)
    st[22] = theta
    st[24] = NO_LIMIT  # the merges the run makes in all (the caller sets it: see ``table._raised``)
    return H, st


# Columns of the per-token state a merge round keeps (``scratch`` of ``_loop``, a row of 8 per token: one
# cache line, so that a neighbour token's state costs one miss, not six): the round (record number) the
# token was last seen left / right of the merged pair (rounds are numbered by record, so these stay
# valid across calls), its summed loss on either side, its touched index on either side; the last two
# columns are not per token: they list the tokens seen left and right in this round.
_LSTAMP, _RSTAMP, _LSUM, _RSUM, _LTIX, _RTIX, _LSEEN, _RSEEN = 0, 1, 2, 3, 4, 5, 6, 7


@internal
def _positions(P, ek, ev, tb, pool, lo, hi, a, b, t, stamp, S, tkey, tinc, tcnt, e_pos, e_tix, n_touched, n_ent, n_l,
               n_r):
    """The position part of a merge round (``_rounds``, step 5) over ``pool[lo:hi]``: merges (a, b)
    into t at each live position, in that order; the pair table is not touched. Per neighbour token
    (first seen: its stamp = ``stamp``) it sums the count its old pair (x's token, a) or (b, y's
    token) loses in ``S`` (tokens listed in its seen columns) and numbers its new pair (x's token,
    t) or (t, y's token) with a "touched" index (``tkey``: key, ``tinc``: count, ``tcnt``:
    occurrences); each new occurrence goes to ``e_pos``/``e_tix`` (position, touched index), to be
    appended to the lists after the round; going on from the counts given (touched, entries, left
    and right tokens seen). Touches only the rows of the words of those positions. Returns those
    counts, the merges made and the count lost."""
    tmask = (np.int64(1) << tb) - 1
    dead = tmask
    wall = tmask - 1
    cmax = (np.int64(1) << (32 - tb)) - 1
    live = 0
    lost = np.int64(0)
    D = 16
    # the rows of the first positions, all asked for at once (the loop below asks D ahead): most
    # rounds are short (half of 65,536 merges' read at most 14 positions) and would wait for
    # each in turn
    for k in range(lo, min(lo + D, hi)):
        f = pool[k]
        _prefetch(P, f - 1)
        _prefetch(P, f + 2)
    for k in range(lo, hi):
        if k + D < hi:
            # the rows of a future position and of its neighbours (usually p-1 .. p+2)
            f = pool[k + D]
            _prefetch(P, f - 1)
            _prefetch(P, f + 2)
        p = np.int64(pool[k])
        vp = np.int64(P[p, _TC])
        if vp & tmask != a:
            continue
        q = np.int64(P[p, _LNK])
        vq = np.int64(P[q, _TC])
        if vq & tmask != b:
            continue
        live += 1
        wc = vp >> tb
        if wc == cmax:
            wc = _escaped(ek, ev, p)
        # left neighbour: from row p-1 (a wall, a one-row token, or a longer span's last row)
        x = p - 1
        tx = np.int64(P[x, _TC]) & tmask
        if tx == dead:
            x = np.int64(P[x, _LNK])
            tx = np.int64(P[x, _TC]) & tmask
        y = np.int64(P[q, _LNK])
        ty = np.int64(P[y, _TC]) & tmask
        # The left and right blocks mirror each other and stay written out twice: one helper for
        # both (as `internal`, or LLVM-inlined as `inlined`) made the loop 2.5-4x slower in CPU
        # (bench/probes/merge_only.py, 32,512 merges, runs alternated: 0.8-1.5 s vs 3.4-4.5 s).
        if tx != wall:
            if S[tx, _LSTAMP] != stamp:
                S[tx, _LSTAMP] = stamp
                S[tx, _LSUM] = 0
                S[n_l, _LSEEN] = tx
                n_l += 1
                if tx == t and S[t, _RSTAMP] == stamp:
                    S[tx, _LTIX] = S[t, _RTIX]  # (t, t) was first seen on the right
                else:
                    S[tx, _LTIX] = n_touched
                    tkey[n_touched] = _pkey(tx, t)
                    tinc[n_touched] = 0
                    tcnt[n_touched] = 0
                    n_touched += 1
            S[tx, _LSUM] += wc
            i = S[tx, _LTIX]
            tinc[i] += wc
            tcnt[i] += 1
            e_pos[n_ent] = x
            e_tix[n_ent] = i
            n_ent += 1
        if ty != wall:
            if S[ty, _RSTAMP] != stamp:
                S[ty, _RSTAMP] = stamp
                S[ty, _RSUM] = 0
                S[n_r, _RSEEN] = ty
                n_r += 1
                if ty == t and S[t, _LSTAMP] == stamp:
                    S[ty, _RTIX] = S[t, _LTIX]  # (t, t) was first seen on the left
                else:
                    S[ty, _RTIX] = n_touched
                    tkey[n_touched] = _pkey(t, ty)
                    tinc[n_touched] = 0
                    tcnt[n_touched] = 0
                    n_touched += 1
            S[ty, _RSUM] += wc
            i = S[ty, _RTIX]
            tinc[i] += wc
            tcnt[i] += 1
            e_pos[n_ent] = p
            e_tix[n_ent] = i
            n_ent += 1
        lost += wc
        # t spans p .. y-1: q's row dies and the span's last row points back to p
        P[p, _TC] = np.uint32((vp & ~tmask) | t)
        P[q, _TC] = np.uint32(vq | dead)
        P[p, _LNK] = np.uint32(y)
        P[y - 1, _LNK] = np.uint32(p)

    return n_touched, n_ent, n_l, n_r, live, lost


@internal
def _split_at(P, tb, pool, head, ln, most):
    """Where a round over ``pool[head:head+ln]`` can be cut for two threads: the index m of the
    first position the second thread takes (at most ``most`` of them, about half), such that the
    positions before m all lie in words before those of the positions from m on (ascending list,
    m's position in a later word than m-1's: a wall row between them); 0 when there is none."""
    for k in range(head + 1, head + ln):
        if pool[k] < pool[k - 1]:
            return np.int64(0)  # (a reused token's list: not ascending)
    wall = (np.int64(1) << tb) - 2
    tmask = (np.int64(1) << tb) - 1
    for m in range(ln - min(ln // 2, most), ln):
        p0 = np.int64(pool[head + m - 1])
        p1 = np.int64(pool[head + m])
        for r in range(p0 + 1, p1):
            if np.int64(P[r, _TC]) & tmask == wall:
                return np.int64(m)
    return np.int64(0)


@internal
def _take_half(S, n_touched, n_ent, n_l, n_r, t, stamp, tkey, tinc, tcnt, e_pos, e_tix, S2, w64, w32, job):
    """The second thread's part of a round (``_rounds_beside``: its results in ``job``, ``S2``,
    ``w64`` and ``w32``) added to this thread's: its losses to the neighbours' sums, its new pairs
    numbered on after these (the same pair, the same index), its occurrences after these (so each
    pair's new positions stay ascending). Returns (touched, entries, left seen, right seen)."""
    n_t2 = job[7]
    n_e2 = job[8]
    for j in range(job[9]):
        tx = S2[j, _LSEEN]
        if S[tx, _LSTAMP] != stamp:
            S[tx, _LSTAMP] = stamp
            S[tx, _LSUM] = 0
            S[tx, _LTIX] = -1  # (its pair's index: below)
            S[n_l, _LSEEN] = tx
            n_l += 1
        S[tx, _LSUM] += S2[tx, _LSUM]
    for j in range(job[10]):
        ty = S2[j, _RSEEN]
        if S[ty, _RSTAMP] != stamp:
            S[ty, _RSTAMP] = stamp
            S[ty, _RSUM] = 0
            S[ty, _RTIX] = -1
            S[n_r, _RSEEN] = ty
            n_r += 1
        S[ty, _RSUM] += S2[ty, _RSUM]
    tmap = w64[3]
    for j in range(n_t2):
        key = w64[0, j]
        u = key >> 32
        v = key & 0xFFFFFFFF
        if u == t and v == t:  # (t, t): seen on either side, one index
            i = -1
            if S[t, _LSTAMP] == stamp and S[t, _LTIX] >= 0:
                i = S[t, _LTIX]
            elif S[t, _RSTAMP] == stamp and S[t, _RTIX] >= 0:
                i = S[t, _RTIX]
        elif v == t:
            i = S[u, _LTIX]
        else:
            i = S[v, _RTIX]
        if i < 0:
            i = n_touched
            tkey[i] = key
            tinc[i] = 0
            tcnt[i] = 0
            n_touched += 1
            if u == t and v == t:
                if S[t, _LSTAMP] == stamp:
                    S[t, _LTIX] = i
                if S[t, _RSTAMP] == stamp:
                    S[t, _RTIX] = i
            elif v == t:
                S[u, _LTIX] = i
            else:
                S[v, _RTIX] = i
        tinc[i] += w64[1, j]
        tcnt[i] += w64[2, j]
        tmap[j] = i
    for k in range(n_e2):
        e_pos[n_ent] = w32[0, k]
        e_tix[n_ent] = tmap[w32[1, k]]
        n_ent += 1
    return n_touched, n_ent, n_l, n_r


#: ``_futex``'s operations, and the spins of the loop's second thread before it sleeps.
_WAIT, _WAKE = 128, 129
_SPINS = 4096


@njit(cache=True, no_cfunc_wrapper=True, nogil=True)
def _rounds_beside(job, P, ek, ev, tb, pool, S2, w64, w32):
    """The second thread of a merge loop: waits for a part of a round (``job[0]`` = 1: the
    positions ``pool[job[1]:job[2]]`` of pair (job[3], job[4]) into job[5], round job[6]; see
    ``_rounds``, step 5), does it (``_positions``, with its own per-token state ``S2`` and work rows
    ``w64``: key, count, occurrences; ``w32``: position, index), publishes its results in
    ``job[7:13]`` and sets ``job[0]`` = 2 (it takes a part by setting 1 to 4: a part it has not
    taken when the loop is done with its own, the loop does itself, so a busy machine that
    leaves this thread waiting does not hold the loop); returns when ``job[0]`` = 3. Between
    parts it spins a little, then sleeps (``_futex``, system call ``job[16]``, at most ``job[17]``
    ns: the loop wakes it when it posts a part)."""
    zero = np.int64(0)
    ts = _zero_array(2, np.int64)
    ts[1] = job[17]
    spins = 0
    while True:
        state = _atomic_get(job, 0)
        if state == 3:
            break
        if state != 1 or not _atomic_swap(job, 0, 1, 4):  # (4: taken; else the loop took it back)
            spins += 1
            if spins >= _SPINS:
                _futex(job, 0, _WAIT, state, ts, job[16])
                spins = 0
            continue
        spins = 0
        n_t, n_e, n_l, n_r, live, lost = _positions(P, ek, ev, tb, pool, job[1], job[2], np.int32(job[3]),
                                                    np.int32(job[4]), job[5], job[6], S2, w64[0], w64[1], w64[2],
                                                    w32[0], w32[1], zero, zero, zero, zero)
        job[7] = n_t
        job[8] = n_e
        job[9] = n_l
        job[10] = n_r
        job[11] = live
        job[12] = lost
        _atomic_set(job, 0, 2)
        _futex(job, 0, _WAKE, 1, ts, job[16])  # (the loop, if it sleeps waiting for it)


@internal
def _deltas(T, L, S, tkey, tinc, tcnt, trow, e_pos, e_tix, n_touched, n_ent, n_l, n_r, a, b, s0, lost, theta):
    """The pair table's part of a merge round (see ``_rounds``, step 5), once its positions are
    done (``_positions``): the table takes the deltas, each batch of rows prefetched before it is
    probed: new pairs first (their rows in ``trow``), then the losses (a losing pair may be new,
    e.g. (t, a)). A new pair counted fewer than ``theta`` times is not tracked (t is a new token:
    no merge made it before, so its count is whole; see ``table._initial_pairs``): neither its
    row nor its entries are kept, and an untracked pair's loss is dropped. Returns (touched rows,
    new entries, rows created): the touched rows and entries of the tracked pairs, renumbered."""
    n_new_rows = 0
    mask = np.uint64(T.shape[0] - 1)
    for i in range(n_touched):
        _prefetch(T, _mix(tkey[i]) & mask)
    kept = 0
    for i in range(n_touched):
        key = tkey[i]
        s = _tslot(T, key)
        if T[s, _KEY] == _EMPTY:
            if tinc[i] < theta:
                tinc[i] = -1  # not tracked
                continue
            T[s, _KEY] = key
            n_new_rows += 1
        T[s, _CNT] += tinc[i]
        _prefetch(L, s)  # (its list row is read and written after the round)
        trow[kept] = s
        tcnt[kept] = tcnt[i]
        tinc[i] = kept  # from here on: the touched index after renumbering
        kept += 1
    if kept < n_touched:
        m = 0
        for k in range(n_ent):
            i = tinc[e_tix[k]]
            if i >= 0:
                e_pos[m] = e_pos[k]
                e_tix[m] = i
                m += 1
        n_ent = m
    n_touched = kept
    for j in range(n_l):
        _prefetch(T, _mix(_pkey(S[j, _LSEEN], a)) & mask)
    for j in range(n_r):
        _prefetch(T, _mix(_pkey(b, S[j, _RSEEN])) & mask)
    for j in range(n_l):
        tx = S[j, _LSEEN]
        s = _tslot(T, _pkey(tx, a))
        if T[s, _KEY] != _EMPTY:
            T[s, _CNT] -= S[tx, _LSUM]
    for j in range(n_r):
        ty = S[j, _RSEEN]
        s = _tslot(T, _pkey(b, ty))
        if T[s, _KEY] != _EMPTY:
            T[s, _CNT] -= S[ty, _RSUM]
    T[s0, _CNT] -= lost
    _alive(T, L, S, tkey, tinc, tcnt, trow, e_pos, e_tix)
    return n_touched, n_ent, n_new_rows


@njit(cache=True, no_cfunc_wrapper=True, nogil=True)
def _loop(P, ek, ev, tb, tdata, tstart, tlen, bkeys, bids, T, L, pool, H, st, scratch, trow, tcnt, tkey, tinc,
          e_pos, e_tix, n_merges, heap_target, r_left, r_right, r_tok, r_cnt, r_reused, stats, job, S2, w64, w32):
    """Greedy BPE over the position array ``P`` (see ``_TC``), from the state of ``_setup``.

    ``P`` is rewritten in place. Each pair keeps the list of positions where it was created (a
    block of the pool), so a round reads only the chosen pair's positions; the new pairs'
    positions are gathered during the round and written as new blocks after it. Merge k is
    written to row k of the ``r_*`` arrays before ``stats[0] = k + 1`` is published. Runs until
    ``n_merges`` new tokens, no pair left (none whose merged token is at most ``st[20]`` bytes),
    the best pair's count below ``st[21]`` (then ``stats[13]`` = that count), the record arrays are full (then it can be called
    again with larger ones), the pair table needs rebuilding (``st[9]`` > 0: the rows the next
    round needs; the caller rebuilds it with ``rebuild_table`` and calls again) or a round's new
    lists need room in the pool (``st[10]`` = 1, ``st[11]`` entries; the caller makes room with
    ``make_room`` and calls again: the round, kept in ``st[12:20]`` and the work arrays, goes
    on). ``st`` holds the scalars [pairs in use, pool end, pool entries in lists, heap size,
    token bytes end, tokens, new tokens, records, heap floor, rows asked for, (the waiting
    round), longest merged token, smallest count merged] and is updated.
    ``stats`` reports to another thread: [records, largest pair table, largest pool, largest
    heap, heap pops, new tokens, list entries read, merges made, pool compactions, pool growths,
    table rebuilds, heap refills, lists sorted, count of the pair --min-frequency stopped at]. ``job``, ``S2``, ``w64``, ``w32``: the second
    thread's (``_rounds_beside``) state and work rows; ``job[13]`` > 0: rounds of that many
    positions or more are shared with it (it must be running), ``job[15]`` counts them; with
    ``job[20]`` = 1 (tests) a part is never taken back: the loop waits for that thread.
    ``scratch`` holds a row of per-token state per
    token, kept from call to call (see ``_LSTAMP``; its first two columns all -1 at the start); ``trow``, ``tcnt``, ``tkey``,
    ``tinc`` (int64) and ``e_pos``, ``e_tix`` (int32) are a round's work arrays (see
    ``_positions``), grown as needed. Returns the (maybe reallocated) tdata, T, L, pool, H and
    work arrays.

    The rounds run in ``_rounds``, which never reassigns an array: a loop that does takes and
    drops Numba's atomic reference counts of each such array on every pass (with those of the 17
    array arguments of a round's function, written out in ``_rounds`` now: 0.035 s of the loop
    thread's 0.44 s at 65,280 merges); it returns for what has to be (re)allocated, and this loop
    does that and calls it again.
    """
    one = _empty_array(1, np.int64)
    while True:
        why, need = _rounds(P, ek, ev, tb, tdata, tstart, tlen, bkeys, bids, T, L, pool, H, st, scratch, trow, tcnt,
                            tkey, tinc, e_pos, e_tix, n_merges, r_left, r_right, r_tok, r_cnt, r_reused, stats, job, S2,
                            w64, w32, one)
        if why == _REFILL:
            H, st[3], st[8] = _refill(T, H, heap_target, tdata, tstart, tlen, st[20], st[22])
            stats[11] += 1
        elif why == _HEAP:
            H = _heap_room(H, need)
        elif why == _BYTES:
            tdata = _grow(tdata, need)
        elif why == _ROWS:
            trow = _empty_array(need + 1024, np.int64)
            tcnt = _empty_array(need + 1024, np.int64)
            tkey = _empty_array(need + 1024, np.int64)
            tinc = _empty_array(need + 1024, np.int64)
        elif why == _ENTRIES:
            e_pos = _empty_array(need + 1024, np.int32)
            e_tix = _empty_array(need + 1024, np.int32)
        else:
            break
    if job[13] > 0:
        _atomic_set(job, 0, 3)  # (the caller starts it again for the next call)
        _futex(job, 0, _WAKE, 1, job[18:20], job[16])
    return tdata, T, L, pool, H, trow, tcnt, tkey, tinc, e_pos, e_tix


#: Why ``_rounds`` returned: the loop is done (for any reason of ``_loop``'s), the heap is empty and
#: is refilled, or an array needs room first (the heap for a round's pushes, the token bytes, a
#: round's touched rows or its entries: how many in all).
_DONE, _REFILL, _HEAP, _BYTES, _ROWS, _ENTRIES = 0, 1, 2, 3, 4, 5


@internal
def _rounds(P, ek, ev, tb, tdata, tstart, tlen, bkeys, bids, T, L, pool, H, st, scratch, trow, tcnt, tkey, tinc,
            e_pos, e_tix, n_merges, r_left, r_right, r_tok, r_cnt, r_reused, stats, job, S2, w64, w32, one):
    """The rounds of ``_loop`` (see there) with the arrays it is given, none reassigned; returns
    (why, how many): ``_DONE`` where ``_loop`` returns, else what it needs before it can go on
    (``_REFILL``, ``_HEAP``, ``_BYTES``, ``_ROWS``, ``_ENTRIES``). A round that needs token bytes or
    work rows puts its pair back on the heap first (popped again next call: the pops' order
    depends only on the heap's entries); one whose pushes need heap room waits in ``st[12:20]``
    (``st[10]`` = 2) and goes on from there. ``one``: an int64 array of one element."""
    n_used = st[0]
    pool_end = st[1]
    pool_live = st[2]
    hn = st[3]
    tdata_end = st[4]
    n_tokens = st[5]
    n_new = st[6]
    n_rec = st[7]
    floor = st[8]
    maxlen = st[20]
    min_count = st[21]
    theta = st[22]
    rec_cap = r_left.shape[0]
    why = _DONE
    more = 0
    zero = np.int64(0)
    # a round whose new lists waited for room in the pool (see step 6), or whose pushes waited for
    # room in the heap (step 7), goes on first
    resume = st[10]
    pause = 0  # (set as a round stops to wait for room: saved after the loop, see there)

    while resume != 0 or (n_new < n_merges and n_rec < rec_cap):
        if resume != 0:
            st[10] = 0
            n_touched = st[12]
            n_ent = st[13]
            head = st[14]
            a = np.int32(st[15])
            b = np.int32(st[16])
            t = st[17]
            c = st[18]
            reused = st[19] != 0
            free = head
            free_end = free  # the freed block may have been compacted away
        else:
            if hn == 0:
                if floor <= max(theta, 1):
                    # the heap held every pair it may hold: no pair is left, or none that is tracked
                    # (the caller counts the pairs again, tracking more: ``table.recount``)
                    if theta > 1:
                        st[23] = 1
                    break
                why = _REFILL
                break
            # 1. pop the best pair; stale entries (count moved since the push) are dropped or, when
            #    the count fell but not below the floor, go back down with it from the top: the same
            #    entries as a pop and a push (``_push_rows``' test), and the pops' order depends only
            #    on the entries, not on their places
            stats[4] += 1
            c = H[0, 0]
            a = np.int32(H[0, 1] >> 32)
            b = np.int32(H[0, 1] & 0xFFFFFFFF)
            s0 = _tslot(T, _pkey(a, b))
            cur = T[s0, _CNT] if T[s0, _KEY] != _EMPTY else 0
            if floor <= cur < c and np.int64(tlen[a]) + np.int64(tlen[b]) <= maxlen:
                H[0, 0] = cur
                _sift_down(H, hn, np.int64(0), tdata, tstart, tlen)
            else:
                if cur == c:
                    # the first positions of its list, loaded while the heap is sifted
                    _prefetch(pool, np.int64(L[s0, _HEAD]))
                hn -= 1
                if hn > 0:
                    H[0, 0] = H[hn, 0]
                    H[0, 1] = H[hn, 1]
                    _sift_down(H, hn, np.int64(0), tdata, tstart, tlen)
            if hn > 0:
                # the next pop's rows (usually the first probed), loaded while this one is handled
                nxt = np.int64(_mix(H[0, 1]) & np.uint64(T.shape[0] - 1))
                _prefetch(T, nxt)
                _prefetch(L, nxt)
            if cur != c:
                continue
            if c < theta:
                # (theta was raised since the heap was filled) no tracked pair is left that may be merged
                st[23] = 1
                break
            if np.int64(tlen[a]) + np.int64(tlen[b]) > maxlen:
                continue  # too long (--max-token-length): from _setup's heap, never pushed again
            if c < min_count:
                # --min-frequency: the best pair is rarer than allowed; it goes back and the loop ends
                one[0] = s0  # (the heap has room: the pair was just popped)
                hn = _push_rows(H, hn, T, one, np.int64(1), floor, tdata, tstart, tlen, maxlen)
                stats[13] = c
                break

            # 2. room in the pair table for the round's new rows, (x's token, t) and (t, y's token):
            #    linear probing stays short up to 3/4 full. Else the pair goes back on the heap and
            #    the caller rebuilds the table (rare: it starts with room for the pairs expected; and
            #    the loop, compiled once after an install, compiles faster without the rebuild)
            h = _bytes_hash(tdata, tstart, tlen, a, b)
            t = _find_token(bkeys, bids, tdata, tstart, tlen, a, b, h)
            reused = t >= 0
            if reused and theta > 0:
                # a reused token's pairs may have untracked positions already: the caller counts
                # every pair again, tracking all (rare: none in the bench's runs)
                st[23] = 2
                break
            ln = np.int64(L[s0, _LEN])
            new_rows = min(2 * ln, 2 * (n_tokens if reused else n_tokens + 1))
            if 4 * (n_used + new_rows) > 3 * T.shape[0]:
                one[0] = s0
                hn = _push_rows(H, hn, T, one, np.int64(1), floor, tdata, tstart, tlen, maxlen)
                st[9] = new_rows
                break
            # room for the merged token's bytes and the round's work (else the caller makes it, and
            # the pair goes back on the heap: popped again, not counted twice)
            if not reused and tdata_end + tlen[a] + tlen[b] > tdata.shape[0]:
                why = _BYTES
                more = tdata_end + tlen[a] + tlen[b]
            elif trow.shape[0] < new_rows:
                why = _ROWS
                more = new_rows
            elif e_pos.shape[0] < 2 * ln:
                why = _ENTRIES
                more = 2 * ln
            if why != _DONE:
                one[0] = s0
                hn = _push_rows(H, hn, T, one, np.int64(1), floor, tdata, tstart, tlen, maxlen)
                stats[4] -= 1
                break

            # 3. the merged token: an existing one with the same bytes, or a new id
            if not reused:
                t = n_tokens
                n_tokens += 1
                n_new += 1
                la = tlen[a]
                lb = tlen[b]
                for i in range(la):
                    tdata[tdata_end + i] = tdata[tstart[a] + i]
                for i in range(lb):
                    tdata[tdata_end + la + i] = tdata[tstart[b] + i]
                tstart[t] = tdata_end
                tlen[t] = la + lb
                tdata_end += la + lb
                _put_token(bkeys, bids, h, t)

            # 4. a list of overlapping runs, in order
            head = np.int64(L[s0, _HEAD])
            if a == b:
                # overlapping runs (a a a) must be merged left to right; lists are created in
                # ascending order, except a reused token's old list followed by its new entries
                for k in range(head + 1, head + ln):
                    if pool[k] < pool[k - 1]:
                        part = _empty_array(ln, np.int64)
                        for i in range(ln):
                            part[i] = pool[head + i]
                        part = _radix_sort(part, np.int64(0))
                        for i in range(ln):
                            pool[head + i] = part[i]
                        stats[12] += 1
                        break

            # 5. merge (a, b) into t at every live position of pool[head:head+ln], in that order
            #    (``_positions``; the pair table is not touched meanwhile), half of a large round in
            #    a second thread (``_rounds_beside``); then the table takes the round's deltas
            #    (``_deltas``). Written out here: a compiled function that calls another takes
            #    atomic references to its array arguments on every call (Numba's)
            m = ln
            if job[13] > 0 and ln >= job[13] and _atomic_get(job, 0) == 0:
                m = _split_at(P, tb, pool, head, ln, w32.shape[1] // 2)
                if m > 0:
                    job[1] = head + m
                    job[2] = head + ln
                    job[3] = a
                    job[4] = b
                    job[5] = t
                    job[6] = n_rec
                    _atomic_set(job, 0, 1)  # the second thread takes pool[head+m:head+ln]
                    _futex(job, 0, _WAKE, 1, job[18:20], job[16])
                    job[15] += 1
                else:
                    m = ln
            n_touched, n_ent, n_l, n_r, n_live, lost = _positions(P, ek, ev, tb, pool, head, head + m, a, b, t,
                                                                  n_rec, scratch, tkey, tinc, tcnt, e_pos, e_tix,
                                                                  zero, zero, zero, zero)
            if m < ln:
                if job[20] == 0 and _atomic_swap(job, 0, 1, 0):
                    # not taken yet (the second thread is not running: a busy machine): this thread goes on
                    n_touched, n_ent, n_l, n_r, live2, lost2 = _positions(P, ek, ev, tb, pool, head + m, head + ln, a,
                                                                          b, t, n_rec, scratch, tkey, tinc, tcnt,
                                                                          e_pos, e_tix, n_touched, n_ent, n_l, n_r)
                    job[15] -= 1
                else:
                    # taken: wait for it (spinning, then asleep until it is done: a busy machine may stop
                    # that thread halfway, and this one would spin for its time slice)
                    spins = 0
                    while True:
                        state = _atomic_get(job, 0)
                        if state == 2:
                            break
                        spins += 1
                        if spins >= _SPINS:
                            _futex(job, 0, _WAIT, state, job[18:20], job[16])
                            spins = 0
                    n_touched, n_ent, n_l, n_r = _take_half(scratch, n_touched, n_ent, n_l, n_r, t, n_rec, tkey, tinc,
                                                            tcnt, e_pos, e_tix, S2, w64, w32, job)
                    live2 = job[11]
                    lost2 = job[12]
                    _atomic_set(job, 0, 0)
                n_live += live2
                lost += lost2
            n_touched, n_ent, n_new_rows = _deltas(T, L, scratch, tkey, tinc, tcnt, trow, e_pos, e_tix, n_touched,
                                                   n_ent, n_l, n_r, a, b, s0, lost, theta)
            if job[13] > 0:
                # a second thread takes half of each round of job[13] positions or more; it stops
                # (it spins while it waits) once no such round came for SPLIT_IDLE merges
                if ln >= job[13]:
                    job[14] = n_rec
                elif n_rec - job[14] > SPLIT_IDLE:
                    _atomic_set(job, 0, 3)
                    _futex(job, 0, _WAKE, 1, job[18:20], job[16])
                    job[13] = 0
            n_used += n_new_rows
            stats[6] += ln
            stats[7] += n_live
            # the merged pair is gone everywhere; its list is garbage now
            pool_live -= ln
            L[s0, _LEN] = 0

            # 6. append the new occurrences: each touched pair gets a new block (its old list,
            #    when a reused token's pair already had one, then the new positions in merge
            #    order), first in the merged pair's freed block while they fit, then at the
            #    pool's end. Without room there, the caller compacts or grows the pool (rare;
            #    and the loop, compiled once after an install, compiles faster without it)
            need = n_ent
            for i in range(n_touched):
                need += L[trow[i], _LEN]
            free = head
            free_end = head + ln
            if pool_end + need > pool.shape[0]:
                st[11] = need
                pause = 1
                break
        for i in range(n_touched if resume != 2 else 0):
            s = trow[i]
            old = L[s, _LEN]
            h0 = L[s, _HEAD]
            size = old + tcnt[i]
            if free + size <= free_end:
                at = free
                free += size
            else:
                at = pool_end
                pool_end += size
            for k in range(old):
                pool[at + k] = pool[h0 + k]
            L[s, _HEAD] = at
            L[s, _LEN] = size
            tcnt[i] = at + old  # from here on: where the next entry of row i goes
        for k in range(n_ent if resume != 2 else 0):
            i = e_tix[k]
            pool[tcnt[i]] = e_pos[k]
            tcnt[i] += 1
        if resume != 2:
            pool_live += n_ent
        resume = 0

        # 7. push the pairs whose counts grew (decreases stay lazy in the heap)
        if hn + n_touched > H.shape[0]:
            pause = 2
            why = _HEAP
            more = hn + n_touched
            break
        hn = _push_rows(H, hn, T, trow, n_touched, floor, tdata, tstart, tlen, maxlen)
        if hn > 0:
            # the next pop's rows and the slot of its merged token's bytes, loaded meanwhile
            k1 = H[0, 1]
            nxt = np.int64(_mix(k1) & np.uint64(T.shape[0] - 1))
            _prefetch(T, nxt)
            _prefetch(L, nxt)
            h1 = _bytes_hash(tdata, tstart, tlen, np.int32(k1 >> 32), np.int32(k1 & 0xFFFFFFFF))
            _prefetch(bkeys, np.int64(_mix(h1) & np.uint64(bkeys.shape[0] - 1)))

        r_left[n_rec] = a
        r_right[n_rec] = b
        r_tok[n_rec] = t
        r_cnt[n_rec] = c
        r_reused[n_rec] = reused
        n_rec += 1
        if n_rec >= 512 and n_rec & (n_rec - 1) == 0 and st[25] == 0:
            theta = _raised(theta, r_cnt, n_rec, st[24])
            st[22] = theta
        stats[0] = n_rec
        stats[5] = n_new
        stats[1] = max(stats[1], T.shape[0])
        stats[2] = max(stats[2], pool.shape[0])
        stats[3] = max(stats[3], H.shape[0])

    if pause != 0:  # the round waits in st[12:20] for room in the pool (1: step 6) or the heap (2: step 7)
        st[10] = pause
        st[12] = n_touched
        st[13] = n_ent
        st[14] = head
        st[15] = a
        st[16] = b
        st[17] = t
        st[18] = c
        st[19] = reused
    st[0] = n_used
    st[1] = pool_end
    st[2] = pool_live
    st[3] = hn
    st[4] = tdata_end
    st[5] = n_tokens
    st[6] = n_new
    st[7] = n_rec
    st[8] = floor
    return why, more
