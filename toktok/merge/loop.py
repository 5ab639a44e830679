"""Learn merges: a word table and a starting vocabulary in, merges out (the merge stage).

Owns the BPE training definition. Reads unique words with 64-bit counts and a ``Vocab``; returns
the merges in order and the grown vocabulary. The words are first segmented under the starting
vocabulary with tiktoken's rank-BPE (whole-piece lookup included), then the loop repeats:

* the pair with the highest total count wins (count = word count x adjacent positions, overlaps
  included); ties go to the smallest (left bytes, right bytes);
* it is replaced left to right without overlap in every word that holds it;
* if the merged bytes are already a token, that token is reused and no budget is spent.

The loop is incremental and compiled with Numba (see ``_loop``): an 8-byte row per token
position (token and word count packed, one link; ``_TC``), a list of positions per pair in one
pool, pair counts in a hash table updated by deltas, and a lazy max-heap that holds only the
pairs with large counts (``_refill``). A round reads only the chosen pair's positions, with the
rows of the next ones prefetched, and writes the new pairs' lists as whole blocks after it.
Where the time and memory go, and what was tried: ``bench/merge_only.py`` and README's
performance section.
"""
from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
from numba import njit

from .._kernels import _EMPTY, _empty_huge, _grow, _hash_range, _mix, _prefetch, inlined, internal
from ..vocab import Vocab


@dataclass
class MergeResult:
    """What one call of ``learn_merges`` learned.

    ``left``/``right``/``token``/``count``/``reused`` are parallel arrays, one entry per merge in
    the order the merges were applied; ``reused`` marks merges whose bytes already were a token
    (no new id). ``vocab`` is the starting vocabulary plus the new tokens.
    """

    vocab: Vocab
    left: np.ndarray
    right: np.ndarray
    token: np.ndarray
    count: np.ndarray
    reused: np.ndarray
    requested: int
    word_tokens: np.ndarray  # tokens per input word after the merges, in input order

    @property
    def new_tokens(self) -> int:
        return int((~self.reused).sum())


# --- hash tables -----------------------------------------------------------------------------


@inlined
def _pkey(a, b):
    return (np.int64(a) << 32) | np.int64(b)


@internal
def _bytes_hash(tdata, tstart, tlen, a, b):
    """Hash of bytes(a) + bytes(b) (FNV-1a, kept positive so that -1 can mean empty)."""
    h = np.uint64(0xCBF29CE484222325)
    for t in (a, b):
        s = tstart[t]
        for i in range(tlen[t]):
            h ^= np.uint64(tdata[s + i])
            h *= np.uint64(0x100000001B3)
    return np.int64(h >> np.uint64(1))


@internal
def _find_token(bkeys, bids, tdata, tstart, tlen, a, b, h):
    """Id of the token whose bytes are bytes(a) + bytes(b), or -1."""
    mask = np.uint64(bkeys.shape[0] - 1)
    i = _mix(h) & mask
    la = tlen[a]
    n = la + tlen[b]
    while bkeys[i] != _EMPTY:
        if bkeys[i] == h:
            t = bids[i]
            if tlen[t] == n:
                same = True
                st = tstart[t]
                for k in range(n):
                    src = tdata[tstart[a] + k] if k < la else tdata[tstart[b] + k - la]
                    if tdata[st + k] != src:
                        same = False
                        break
                if same:
                    return t
        i = (i + np.uint64(1)) & mask
    return -1


@internal
def _put_token(bkeys, bids, h, t):
    mask = np.uint64(bkeys.shape[0] - 1)
    i = _mix(h) & mask
    while bkeys[i] != _EMPTY:
        i = (i + np.uint64(1)) & mask
    bkeys[i] = h
    bids[i] = t


# --- heap ordered by (count desc, left bytes asc, right bytes asc) ----------------------------


# Heap rows are (count, pair key). The sifts move a hole instead of swapping and compare bytes
# only on equal counts, written out in place: in Numba every call with array arguments, and
# every helper inlined at Numba's level, costs atomic reference-count updates (they once took a
# fifth of the loop's time).


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
                kr = H[right, 1]
                kl = H[left, 1]
                # kr before kl on equal counts: smaller (left bytes, right bytes)
                x = np.int64(kr >> 32)
                y = np.int64(kl >> 32)
                if x == y:
                    x = np.int64(kr & 0xFFFFFFFF)
                    y = np.int64(kl & 0xFFFFFFFF)
                rl = False
                if x != y:
                    sx = tstart[x]
                    sy = tstart[y]
                    lx = np.int64(tlen[x])
                    ly = np.int64(tlen[y])
                    rl = lx < ly
                    for j in range(min(lx, ly)):
                        if tdata[sx + j] != tdata[sy + j]:
                            rl = tdata[sx + j] < tdata[sy + j]
                            break
                if rl:
                    best = right
        bc = H[best, 0]
        up = bc > c
        if bc == c:
            kb = H[best, 1]
            # kb before k on equal counts: smaller (left bytes, right bytes)
            x = np.int64(kb >> 32)
            y = np.int64(k >> 32)
            if x == y:
                x = np.int64(kb & 0xFFFFFFFF)
                y = np.int64(k & 0xFFFFFFFF)
            up = False
            if x != y:
                sx = tstart[x]
                sy = tstart[y]
                lx = np.int64(tlen[x])
                ly = np.int64(tlen[y])
                up = lx < ly
                for j in range(min(lx, ly)):
                    if tdata[sx + j] != tdata[sy + j]:
                        up = tdata[sx + j] < tdata[sy + j]
                        break
        if up:
            H[i, 0] = bc
            H[i, 1] = H[best, 1]
            i = best
        else:
            break
    H[i, 0] = c
    H[i, 1] = k


@internal
def _refill(T, H, target, tdata, tstart, tlen):
    """A heap of every pair whose count is at least ``floor``, the largest power of two that
    ``target`` or more pairs reach (1 if fewer pairs have a count). Returns (heap, size, floor).

    The heap is kept to pairs with a count of at least ``floor`` (bucket of the rest: the table):
    the pair with the largest count is in it while it is not empty, so a pop is exact; pairs that
    fall below the floor are dropped from it, and when it runs empty it is refilled with a lower
    floor. Most new pairs have small counts and are never pushed."""
    hist = np.zeros(64, np.int64)
    for i in range(T.shape[0]):
        c = T[i, _CNT]
        if T[i, _KEY] != _EMPTY and c > 0:
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
    floor = np.int64(1) << bit
    n = np.int64(0)
    for b in range(bit, 64):
        n += hist[b]
    H = _heap_room(H, n)
    hn = np.int64(0)
    for i in range(T.shape[0]):
        if T[i, _KEY] != _EMPTY and T[i, _CNT] >= floor:
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
    N = _empty_huge((cap, 2), np.int64)
    for i in range(H.shape[0]):  # loops, not slices, in this module: they compile much faster
        N[i, 0] = H[i, 0]
        N[i, 1] = H[i, 1]
    return N


# --- pair table --------------------------------------------------------------------------------

# The pair table is open addressing with linear probing over two parallel arrays: ``T`` rows
# (pair key, count), 16 bytes, which the merge rounds probe and update, and ``L`` rows (head,
# length) of the pair's list of positions in the pool, int32, read once per round.
_KEY, _CNT = 0, 1
_HEAD, _LEN = 0, 1

# The position array ``P`` (uint32) has an 8-byte row per position: (word count << tb | token),
# link. Each word with two or more tokens owns consecutive rows with a wall row before and
# after. A token spans the rows from its start up to the next token's start; the rows after its
# start are dead. Link of a token's start row: the next token's start row (or the wall after the
# word). Link of a span's last dead row: the span's start, so that the token left of position p
# is found from row p-1 (a wall, a one-row token, or the last row of a longer span).
# The low ``tb`` bits hold the token: an id, or all ones (dead) or all ones but the last (wall);
# ``tb`` is the fewest bits for every id of the run plus these two. The 32 - tb high bits hold
# the word's count; all ones there means "look it up": the rows of words that frequent are keys
# of a side hash table (``ek``, ``ev``) to their 64-bit count.
# (Both are written out where they are read: in Numba a helper taking arrays costs atomic
# reference-count updates per call, whether inlined by Numba or called.)
_TC, _LNK = 0, 1


def _token_bits(max_tokens: int) -> int:
    """Bits for token ids below ``max_tokens`` plus the dead and wall marks."""
    tb = max(int(max_tokens + 1).bit_length(), 2)
    if tb > 30:
        raise ValueError("toktok: too many tokens for the merge loop (2**30)")
    return tb


@internal
def _escaped(ek, ev, p):
    """The count of row p of a word too frequent for its row's count bits."""
    mask = np.uint64(ek.shape[0] - 1)
    i = _mix(p) & mask
    while ek[i] != p:
        i = (i + np.uint64(1)) & mask
    return ev[i]


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
    T = _empty_huge((cap, 2), np.int64)
    L = _empty_huge((cap, 2), np.int32)
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


@internal
def _new_pool(n):
    if n >= 2**31:
        raise ValueError("toktok: too many pair positions for the merge loop (2**31)")
    return _empty_huge(n, np.int32)


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
        keys = np.empty(n, np.int64)
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
    b = np.empty(n, np.int64)
    cnt = np.empty(1 << 16, np.int64)
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
    """Pair table and pool for the starting positions, each list ascending. Small vocabularies
    (bytes, hardcoded) count in a dense n×n array first, so the hash table sees each distinct
    pair once. The table has room for ``expect`` more pairs, so that it rarely needs rebuilding
    in the loop. The pool has room for ``spare``/16 of the entries plus ``slack`` more. Returns
    (T, L, rows in use, pool, pool end)."""
    n_rows = P.shape[0]
    tmask = (np.int64(1) << tb) - 1
    cmax = (np.int64(1) << (32 - tb)) - 1
    n_used = 0
    if n_tokens <= 2048:
        nn = n_tokens * n_tokens
        dcnt = np.zeros(nn, np.int64)
        dlen = np.zeros(nn, np.int64)
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
    T, L = _new_table(np.int64(1024))
    for p in range(n_rows - 1):
        v = np.int64(P[p, _TC])
        ta = v & tmask
        tn = np.int64(P[p + 1, _TC]) & tmask
        if ta < tmask - 1 and tn < tmask - 1:
            if 2 * (n_used + 1) > T.shape[0]:
                T, L, n_used, _ = _rebuild(T, L, T.shape[0])
            key = _pkey(ta, tn)
            s = _tslot(T, key)
            if T[s, _KEY] == _EMPTY:
                T[s, _KEY] = key
                n_used += 1
            wc = v >> tb
            if wc == cmax:
                wc = _escaped(ek, ev, p)
            T[s, _CNT] += wc
            L[s, _LEN] += 1
    if 2 * (n_used + expect) > T.shape[0]:
        T, L, n_used, _ = _rebuild(T, L, expect)
    acc = 0
    for i in range(T.shape[0]):
        if T[i, _KEY] != _EMPTY:
            L[i, _HEAD] = acc
            acc += L[i, _LEN]
            L[i, _LEN] = 0
    pool = _new_pool(acc + ((acc * spare) >> 4) + slack)
    for p in range(n_rows - 1):
        ta = np.int64(P[p, _TC]) & tmask
        tn = np.int64(P[p + 1, _TC]) & tmask
        if ta < tmask - 1 and tn < tmask - 1:
            s = _tslot(T, _pkey(ta, tn))
            pool[L[s, _HEAD] + L[s, _LEN]] = p
            L[s, _LEN] += 1
    return T, L, n_used, pool, acc


# --- the loop ----------------------------------------------------------------------------------


@njit(cache=True, nogil=True)
def _setup(P, ek, ev, tb, tdata, tstart, tlen, n_tokens, expect, spare, slack, heap_target, reverse):
    """The loop's starting state: token bytes lookup, pair table with each pair's positions,
    heap. Returns (bkeys, bids, T, L, pool, H, st) with the scalars in ``st`` (see ``_loop``).
    ``reverse`` (tests) reverses every list of positions."""
    max_tokens = tstart.shape[0]

    # 1. token bytes lookup, to reuse a token whose bytes a merge produces again
    bkeys, bids = _token_table(tdata, tstart, tlen, n_tokens, max_tokens)

    # 2. pair counts and each pair's positions, ascending (counting sort by pair)
    T, L, n_used, pool, pool_end = _initial_pairs(P, ek, ev, tb, n_tokens, expect, spare, slack)
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

    # 3. the heap holds the pairs with the largest counts (see ``_refill``)
    H, hn, floor = _refill(T, np.empty((1024, 2), np.int64), heap_target, tdata, tstart, tlen)

    st = np.zeros(9, np.int64)
    st[8] = floor
    st[0] = n_used
    st[1] = pool_end
    st[2] = pool_end  # pool_live: entries in lists (live or stale); the rest is garbage
    st[3] = hn
    st[4] = tstart[n_tokens - 1] + tlen[n_tokens - 1] if n_tokens > 0 else 0
    st[5] = n_tokens
    return bkeys, bids, T, L, pool, H, st


@internal
def _merge_round(P, ek, ev, tb, T, pool, head, ln, s0, a, b, t, stamp, l_stamp, r_stamp, l_sum, r_sum,
                 l_seen, r_seen, l_tix, r_tix, tkey, tinc, tcnt, trow, e_pos, e_tix):
    """Merge pair (a, b) into t at every live position of ``pool[head:head+ln]``, in that order.

    The pair table is not touched while the positions are: per neighbour token (first seen:
    ``*_stamp`` = ``stamp``) the round sums the count its old pair (x's token, a) or (b, y's
    token) loses (``l_sum``/``r_sum``, tokens listed in ``l_seen``/``r_seen``), and numbers its new
    pair (x's token, t) or (t, y's token) with a "touched" index (``tkey``: key, ``tinc``: count,
    ``tcnt``: occurrences); each new occurrence goes to ``e_pos``/``e_tix`` (position, touched
    index), to be appended to the lists after the round. Then the table takes the deltas, each
    batch of rows prefetched before it is probed: new pairs first (their rows in ``trow``), then
    the losses (a losing pair may be new, e.g. (t, a)). No array is (re)allocated here. Returns
    (touched rows, new entries, rows created, merges made)."""
    tmask = (np.int64(1) << tb) - 1
    dead = tmask
    wall = tmask - 1
    cmax = (np.int64(1) << (32 - tb)) - 1
    n_touched = 0
    n_ent = 0
    n_new_rows = 0
    n_l = 0
    n_r = 0
    live = 0
    lost = np.int64(0)
    D = 16
    for k in range(ln):
        if k + D < ln:
            # the rows of a future position and of its neighbours (usually p-1 .. p+2)
            f = pool[head + k + D]
            _prefetch(P, f - 1)
            _prefetch(P, f + 2)
        p = np.int64(pool[head + k])
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
        if tx != wall:
            if l_stamp[tx] != stamp:
                l_stamp[tx] = stamp
                l_sum[tx] = 0
                l_seen[n_l] = tx
                n_l += 1
                if tx == t and r_stamp[t] == stamp:
                    l_tix[tx] = r_tix[t]  # (t, t) was first seen on the right
                else:
                    l_tix[tx] = n_touched
                    tkey[n_touched] = _pkey(tx, t)
                    tinc[n_touched] = 0
                    tcnt[n_touched] = 0
                    n_touched += 1
            l_sum[tx] += wc
            i = l_tix[tx]
            tinc[i] += wc
            tcnt[i] += 1
            e_pos[n_ent] = x
            e_tix[n_ent] = i
            n_ent += 1
        if ty != wall:
            if r_stamp[ty] != stamp:
                r_stamp[ty] = stamp
                r_sum[ty] = 0
                r_seen[n_r] = ty
                n_r += 1
                if ty == t and l_stamp[t] == stamp:
                    r_tix[ty] = l_tix[t]  # (t, t) was first seen on the left
                else:
                    r_tix[ty] = n_touched
                    tkey[n_touched] = _pkey(t, ty)
                    tinc[n_touched] = 0
                    tcnt[n_touched] = 0
                    n_touched += 1
            r_sum[ty] += wc
            i = r_tix[ty]
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

    mask = np.uint64(T.shape[0] - 1)
    for i in range(n_touched):
        _prefetch(T, _mix(tkey[i]) & mask)
    for i in range(n_touched):
        key = tkey[i]
        s = _tslot(T, key)
        if T[s, _KEY] == _EMPTY:
            T[s, _KEY] = key
            n_new_rows += 1
        T[s, _CNT] += tinc[i]
        trow[i] = s
    for j in range(n_l):
        _prefetch(T, _mix(_pkey(l_seen[j], a)) & mask)
    for j in range(n_r):
        _prefetch(T, _mix(_pkey(b, r_seen[j])) & mask)
    for j in range(n_l):
        tx = l_seen[j]
        T[_tslot(T, _pkey(tx, a)), _CNT] -= l_sum[tx]
    for j in range(n_r):
        ty = r_seen[j]
        T[_tslot(T, _pkey(b, ty)), _CNT] -= r_sum[ty]
    T[s0, _CNT] -= lost
    return n_touched, n_ent, n_new_rows, live


@internal
def _push_rows(H, hn, T, rows, n, floor, tdata, tstart, tlen):
    """Push the pairs of table rows ``rows[:n]`` whose count is at least ``floor`` (>= 1);
    returns the heap size (the heap has room)."""
    for r in range(n):
        s = rows[r]
        c = T[s, _CNT]
        if c < floor:
            continue
        k = T[s, _KEY]
        i = hn
        hn += 1
        while i > 0:
            parent = (i - 1) >> 1
            pc = H[parent, 0]
            up = c > pc
            if c == pc:
                kp = H[parent, 1]
                # k before kp on equal counts: smaller (left bytes, right bytes)
                x = np.int64(k >> 32)
                y = np.int64(kp >> 32)
                if x == y:
                    x = np.int64(k & 0xFFFFFFFF)
                    y = np.int64(kp & 0xFFFFFFFF)
                up = False
                if x != y:
                    sx = tstart[x]
                    sy = tstart[y]
                    lx = np.int64(tlen[x])
                    ly = np.int64(tlen[y])
                    up = lx < ly
                    for j in range(min(lx, ly)):
                        if tdata[sx + j] != tdata[sy + j]:
                            up = tdata[sx + j] < tdata[sy + j]
                            break
            if up:
                H[i, 0] = pc
                H[i, 1] = H[parent, 1]
                i = parent
            else:
                break
        H[i, 0] = c
        H[i, 1] = k
    return hn


@njit(cache=True, nogil=True)
def _loop(P, ek, ev, tb, tdata, tstart, tlen, bkeys, bids, T, L, pool, H, st, scratch, n_merges,
          heap_target, r_left, r_right, r_tok, r_cnt, r_reused, stats):
    """Greedy BPE over the position array ``P`` (see ``_TC``), from the state of ``_setup``.

    ``P`` is rewritten in place. Each pair keeps the list of positions where it was created (a
    block of the pool), so a round reads only the chosen pair's positions; the new pairs'
    positions are gathered during the round and written as new blocks after it. Merge k is
    written to row k of the ``r_*`` arrays before ``stats[0] = k + 1`` is published. Runs until
    ``n_merges`` new tokens, no pair left, or the record arrays are full (then it can be called
    again with larger ones). ``st`` holds the scalars [pairs in use, pool end, pool entries in
    lists, heap size, token bytes end, tokens, new tokens, records, heap floor] and is updated.
    ``stats`` reports to another thread: [records, largest pair table, largest pool, largest
    heap, heap pops, new tokens, list entries read, merges made, pool compactions, pool growths,
    table rebuilds, heap refills, lists sorted]. ``scratch`` holds 8 rows of per-token state
    kept from call to call (the first two all -1 at the start). Returns the (maybe reallocated)
    tdata, T, L, pool, H.
    """
    n_used = st[0]
    pool_end = st[1]
    pool_live = st[2]
    hn = st[3]
    tdata_end = st[4]
    n_tokens = st[5]
    n_new = st[6]
    n_rec = st[7]
    floor = st[8]
    rec_cap = r_left.shape[0]
    # per token: round it was last seen left / right of the merged pair (rounds are numbered by
    # record, so these stay valid across calls), its summed loss, the tokens seen, touched index
    l_stamp = scratch[0]
    r_stamp = scratch[1]
    l_sum = scratch[2]
    r_sum = scratch[3]
    l_seen = scratch[4]
    r_seen = scratch[5]
    l_tix = scratch[6]
    r_tix = scratch[7]
    trow = np.empty(1024, np.int64)
    tcnt = np.empty(1024, np.int64)
    tkey = np.empty(1024, np.int64)
    tinc = np.empty(1024, np.int64)
    e_pos = np.empty(1024, np.int32)
    e_tix = np.empty(1024, np.int32)
    one = np.empty(1, np.int64)

    while n_new < n_merges and n_rec < rec_cap:
        if hn == 0:
            if floor == 1:
                break  # no pair left
            H, hn, floor = _refill(T, H, heap_target, tdata, tstart, tlen)
            stats[11] += 1
            continue
        # 1. pop the best pair; stale entries (count moved since the push) are skipped or re-pushed
        stats[4] += 1
        c = H[0, 0]
        a = np.int32(H[0, 1] >> 32)
        b = np.int32(H[0, 1] & 0xFFFFFFFF)
        hn -= 1
        if hn > 0:
            H[0, 0] = H[hn, 0]
            H[0, 1] = H[hn, 1]
            _sift_down(H, hn, np.int64(0), tdata, tstart, tlen)
        s0 = _tslot(T, _pkey(a, b))
        cur = T[s0, _CNT] if T[s0, _KEY] != _EMPTY else 0
        if cur != c:
            if floor <= cur < c:
                H = _heap_room(H, hn + 1)
                one[0] = s0
                hn = _push_rows(H, hn, T, one, np.int64(1), floor, tdata, tstart, tlen)
            continue

        # 2. the merged token: an existing one with the same bytes, or a new id
        h = _bytes_hash(tdata, tstart, tlen, a, b)
        t = _find_token(bkeys, bids, tdata, tstart, tlen, a, b, h)
        reused = t >= 0
        if not reused:
            t = n_tokens
            n_tokens += 1
            n_new += 1
            la = tlen[a]
            lb = tlen[b]
            tdata = _grow(tdata, tdata_end + la + lb)
            for i in range(la):
                tdata[tdata_end + i] = tdata[tstart[a] + i]
            for i in range(lb):
                tdata[tdata_end + la + i] = tdata[tstart[b] + i]
            tstart[t] = tdata_end
            tlen[t] = la + lb
            tdata_end += la + lb
            _put_token(bkeys, bids, h, t)

        # 3. room for the round: table rows (so that they stay put), touched rows and entries
        ln = np.int64(L[s0, _LEN])
        new_rows = min(2 * ln, 2 * n_tokens)  # (x's token, t) and (t, y's token)
        if 4 * (n_used + new_rows) > 3 * T.shape[0]:
            # linear probing stays short up to 3/4 full; rebuilt to at most half full
            T, L, n_used, dropped = _rebuild(T, L, new_rows)
            pool_live -= dropped
            stats[10] += 1
            s0 = _tslot(T, _pkey(a, b))
        head = np.int64(L[s0, _HEAD])
        if a == b:
            # overlapping runs (a a a) must be merged left to right; lists are created in
            # ascending order, except a reused token's old list followed by its new entries
            for k in range(head + 1, head + ln):
                if pool[k] < pool[k - 1]:
                    part = np.empty(ln, np.int64)
                    for i in range(ln):
                        part[i] = pool[head + i]
                    part = _radix_sort(part, np.int64(0))
                    for i in range(ln):
                        pool[head + i] = part[i]
                    stats[12] += 1
                    break
        if trow.shape[0] < new_rows:
            trow = np.empty(new_rows + 1024, np.int64)
            tcnt = np.empty(new_rows + 1024, np.int64)
            tkey = np.empty(new_rows + 1024, np.int64)
            tinc = np.empty(new_rows + 1024, np.int64)
        if e_pos.shape[0] < 2 * ln:
            e_pos = np.empty(2 * ln + 1024, np.int32)
            e_tix = np.empty(2 * ln + 1024, np.int32)

        # 4. merge at every live position
        n_touched, n_ent, n_new_rows, n_live = _merge_round(
            P, ek, ev, tb, T, pool, head, ln, s0, a, b, t, n_rec, l_stamp, r_stamp, l_sum, r_sum,
            l_seen, r_seen, l_tix, r_tix, tkey, tinc, tcnt, trow, e_pos, e_tix)
        n_used += n_new_rows
        stats[6] += ln
        stats[7] += n_live
        # the merged pair is gone everywhere; its list is garbage now
        pool_live -= ln
        L[s0, _LEN] = 0

        # 5. append the new occurrences: each touched pair gets a new block (its old list, when
        #    a reused token's pair already had one, then the new positions in merge order),
        #    first in the merged pair's freed block while they fit, then at the pool's end
        need = n_ent
        for i in range(n_touched):
            need += L[trow[i], _LEN]
        free = head
        free_end = head + ln
        if pool_end + need > pool.shape[0]:
            pool, pool_end, pool_live, how = _make_room(T, L, pool, pool_end, pool_live, need)
            stats[7 + how] += 1
            free_end = free  # the freed block may have been compacted away
        for i in range(n_touched):
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
        for k in range(n_ent):
            i = e_tix[k]
            pool[tcnt[i]] = e_pos[k]
            tcnt[i] += 1
        pool_live += n_ent

        # 6. push the pairs whose counts grew (decreases stay lazy in the heap)
        H = _heap_room(H, hn + n_touched)
        hn = _push_rows(H, hn, T, trow, n_touched, floor, tdata, tstart, tlen)

        r_left[n_rec] = a
        r_right[n_rec] = b
        r_tok[n_rec] = t
        r_cnt[n_rec] = c
        r_reused[n_rec] = reused
        n_rec += 1
        stats[0] = n_rec
        stats[5] = n_new
        stats[1] = max(stats[1], T.shape[0])
        stats[2] = max(stats[2], pool.shape[0])
        stats[3] = max(stats[3], H.shape[0])

    st[0] = n_used
    st[1] = pool_end
    st[2] = pool_live
    st[3] = hn
    st[4] = tdata_end
    st[5] = n_tokens
    st[6] = n_new
    st[7] = n_rec
    st[8] = floor
    return tdata, T, L, pool, H


# --- segmentation and layout -------------------------------------------------------------------


@njit(cache=True)
def _token_table(tdata, tstart, tlen, n_tokens, max_tokens):
    cap = 16
    while cap < 2 * max_tokens:
        cap *= 2
    bkeys = np.full(cap, _EMPTY, np.int64)
    bids = np.zeros(cap, np.int32)
    for t in range(n_tokens):
        _put_token(bkeys, bids, _hash_range(tdata, tstart[t], np.int64(tlen[t])), t)
    return bkeys, bids


@internal
def _lookup(bkeys, bids, tdata, tstart, tlen, data, s, n, n_tokens):
    """Id of the token with bytes data[s:s+n] if it is below ``n_tokens``, or -1."""
    h = _hash_range(data, s, n)
    mask = np.uint64(bkeys.shape[0] - 1)
    i = _mix(h) & mask
    while bkeys[i] != _EMPTY:
        if bkeys[i] == h:
            t = bids[i]
            if tlen[t] == n:
                st = tstart[t]
                same = True
                for k in range(n):
                    if tdata[st + k] != data[s + k]:
                        same = False
                        break
                if same:
                    return t if t < n_tokens else -1
        i = (i + np.uint64(1)) & mask
    return -1


@internal
def _segment_long(data, s, n, bkeys, bids, tdata, tstart, tlen, pair2, byte_id, max_len, out, o, n_tokens):
    """``_segment``'s rank-BPE of one long word ``data[s:s+n]`` (no whole-word match) in
    O(n log n): the parts are a linked list and the candidate pairs a min-heap of (rank, start),
    so the lowest rank, leftmost on ties, comes first, as in the plain loop. An entry is stale
    when the part's pair no longer has that rank: a pair only ever grows, so it never gets the
    same rank (the same bytes) back. A pair longer than the longest token is not looked up,
    which bounds each lookup. Writes the ids at ``out[o:]``; returns the number of parts.
    (Heap and lookups are written out here: see the note on reference counts above ``_sift_down``.)"""
    big = np.int64(1) << 31
    nxt = np.empty(n, np.int64)  # start of the next part (n after the last)
    prv = np.empty(n, np.int64)  # start of the previous part (-1 before the first)
    rank = np.empty(n, np.int64)  # rank of (this part, next part); big: none; -1: not a part
    tid = np.empty(n, np.int64)  # the part's token id
    # (rank << 32) | start; stale entries stay until popped: at most n - 1 at the start plus
    # two per merge, and there are at most n - 1 merges
    heap = np.empty(3 * n, np.int64)
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
            t = -1
            ln = hi - lo
            if ln <= max_len:
                h = np.uint64(0xCBF29CE484222325)  # _hash_range, written out
                for q in range(s + lo, s + hi):
                    h ^= np.uint64(data[q])
                    h *= np.uint64(0x100000001B3)
                hk = np.int64(h >> np.uint64(1))
                x = _mix(hk) & mask
                while bkeys[x] != _EMPTY:
                    if bkeys[x] == hk:
                        u = bids[x]
                        if tlen[u] == ln:
                            same = True
                            su = tstart[u]
                            for q in range(ln):
                                if tdata[su + q] != data[s + lo + q]:
                                    same = False
                                    break
                            if same:
                                t = np.int64(u) if u < n_tokens else -1
                                break
                    x = (x + np.uint64(1)) & mask
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
        out[o + m] = tid[i]
        m += 1
        i = nxt[i]
    return m


@njit(cache=True)
def _segment(data, offsets, tdata, tstart, tlen, n_tokens, long_from, bkeys, bids):
    """tiktoken's rank-BPE of every word: whole-word lookup, else merge the lowest-rank adjacent
    pair (leftmost on ties) until no adjacent pair is a token. Returns flat ids and lengths.
    Words of ``long_from`` bytes or more go through ``_segment_long`` (the same result in
    O(n log n); the plain loop here rescans the word after each merge). Only the first
    ``n_tokens`` tokens are used; ``bkeys``/``bids`` (``_token_table``) may hold more, so that
    one table serves every prefix of a vocabulary."""
    max_len = np.int64(0)
    for t in range(n_tokens):
        max_len = max(max_len, np.int64(tlen[t]))
    # ranks of the two-byte tokens, so that the first round of every word needs no hashing
    # and most words (no adjacent byte pair is a token) finish at once
    byte_id = np.full(256, -1, np.int32)
    for t in range(n_tokens):  # (the tokens are distinct: Vocab.check)
        if tlen[t] == 1:
            byte_id[tdata[tstart[t]]] = t
    pair2 = np.full(65536, -1, np.int64)
    for t in range(n_tokens):
        if tlen[t] == 2:
            pair2[np.int64(tdata[tstart[t]]) * 256 + tdata[tstart[t] + 1]] = t
    n_words = offsets.shape[0] - 1
    out = np.empty(data.shape[0], np.int32)
    lens = np.zeros(n_words, np.int64)
    bounds = np.empty(16, np.int64)
    rk = np.empty(16, np.int64)
    big = np.int64(1) << 62
    o = np.int64(0)
    for w in range(n_words):
        s = offsets[w]
        e = offsets[w + 1]
        n = e - s
        if n == 0:
            continue
        t = _lookup(bkeys, bids, tdata, tstart, tlen, data, s, n, n_tokens)
        if t >= 0:
            out[o] = t
            o += 1
            lens[w] = 1
            continue
        if n >= long_from:
            k = _segment_long(data, s, n, bkeys, bids, tdata, tstart, tlen, pair2, byte_id, max_len, out, o, n_tokens)
            o += k
            lens[w] = k
            continue
        if bounds.shape[0] < n + 1:
            bounds = np.empty(2 * (n + 1), np.int64)
            rk = np.empty(2 * (n + 1), np.int64)
        nb = n + 1
        for i in range(nb):
            bounds[i] = s + i
        any_pair = False
        for i in range(nb - 2):
            r = pair2[np.int64(data[s + i]) * 256 + data[s + i + 1]]
            rk[i] = r if r >= 0 else big
            any_pair = any_pair or r >= 0
        if not any_pair:
            # single bytes: id = the byte's rank
            for i in range(n):
                out[o + i] = byte_id[data[s + i]]
            o += n
            lens[w] = n
            continue
        while nb > 2:
            best = big
            bi = -1
            for i in range(nb - 2):
                if rk[i] < best:
                    best = rk[i]
                    bi = i
            if bi < 0:
                break
            # drop the boundary between parts bi and bi+1
            for i in range(bi + 1, nb - 1):
                bounds[i] = bounds[i + 1]
            for i in range(bi + 1, nb - 3):
                rk[i] = rk[i + 1]
            nb -= 1
            if bi + 2 < nb:
                r = _lookup(bkeys, bids, tdata, tstart, tlen, data, bounds[bi], bounds[bi + 2] - bounds[bi], n_tokens)
                rk[bi] = r if r >= 0 else big
            if bi > 0:
                r = _lookup(bkeys, bids, tdata, tstart, tlen, data, bounds[bi - 1], bounds[bi + 1] - bounds[bi - 1], n_tokens)
                rk[bi - 1] = r if r >= 0 else big
        for i in range(nb - 1):
            out[o] = _lookup(bkeys, bids, tdata, tstart, tlen, data, bounds[i], bounds[i + 1] - bounds[i], n_tokens)
            o += 1
        lens[w] = nb - 1
    return out[:o].copy(), lens


@njit(cache=True)
def _layout(flat, lens, counts, tb):
    """The position array (see ``_TC``) of every word with two or more tokens (one-token words
    never change), in word order, and the side table of counts too large for their rows."""
    tmask = (np.int64(1) << tb) - 1
    cmax = (np.int64(1) << (32 - tb)) - 1
    n_rows = np.int64(1)
    n_esc = np.int64(0)
    for w in range(lens.shape[0]):
        if lens[w] >= 2:
            n_rows += lens[w] + 1
            if counts[w] >= cmax:
                n_esc += lens[w]
    if n_rows >= 2**31:
        raise ValueError("toktok: too many token positions for the merge loop (2**31)")
    P = _empty_huge((n_rows, 2), np.uint32)
    cap = 16
    while cap < 2 * n_esc:
        cap *= 2
    ek = np.full(cap, _EMPTY, np.int64)
    ev = np.zeros(cap, np.int64)
    P[0, _TC] = np.uint32(tmask - 1)
    P[0, _LNK] = 0
    o = 1
    src = 0
    for w in range(lens.shape[0]):
        n = lens[w]
        if n >= 2:
            c = counts[w]
            if c >= cmax:
                for k in range(n):
                    i = _mix(o + k) & np.uint64(cap - 1)
                    while ek[i] != _EMPTY:
                        i = (i + np.uint64(1)) & np.uint64(cap - 1)
                    ek[i] = o + k
                    ev[i] = c
                c = cmax
            for k in range(n):
                P[o + k, _TC] = np.uint32((c << tb) | np.int64(flat[src + k]))
                P[o + k, _LNK] = np.uint32(o + k + 1)
            o += n
            P[o, _TC] = np.uint32(tmask - 1)
            P[o, _LNK] = 0
            o += 1
        src += n
    return P, ek, ev


@njit(cache=True)
def _tokens_per_word(P, lens, tb):
    """Each word's number of tokens after the loop: its live rows (see ``_layout``)."""
    tmask = (np.int64(1) << tb) - 1
    out = lens.copy()
    o = 1
    for w in range(lens.shape[0]):
        n = lens[w]
        if n >= 2:
            k = 0
            for p in range(o, o + n):
                if np.int64(P[p, _TC]) & tmask != tmask:
                    k += 1
            out[w] = k
            o += n + 1
    return out


Words = "list[bytes] | pa.BinaryArray | pa.ChunkedArray"


def _flatten(words) -> tuple[np.ndarray, np.ndarray]:
    """Words as one uint8 buffer plus int64 offsets (len+1); zero-copy for Arrow input."""
    if isinstance(words, (pa.Array, pa.ChunkedArray)):
        arr = words.combine_chunks() if isinstance(words, pa.ChunkedArray) else words
        if arr.null_count:
            raise ValueError("words must not be null")
        if pa.types.is_binary(arr.type) or pa.types.is_string(arr.type):
            off = np.frombuffer(arr.buffers()[1], np.int32)[arr.offset : arr.offset + len(arr) + 1]
        elif pa.types.is_large_binary(arr.type) or pa.types.is_large_string(arr.type):
            off = np.frombuffer(arr.buffers()[1], np.int64)[arr.offset : arr.offset + len(arr) + 1]
        else:
            raise TypeError(f"words must be binary, not {arr.type}")
        buf = arr.buffers()[2]
        data = np.frombuffer(buf, np.uint8) if buf is not None else np.zeros(0, np.uint8)
        off = off.astype(np.int64)
        return data, off
    words = list(words)
    lens = np.fromiter((len(w) for w in words), np.int64, len(words))
    off = np.zeros(len(words) + 1, np.int64)
    np.cumsum(lens, out=off[1:])
    return np.frombuffer(b"".join(words), np.uint8), off


def _token_arrays(vocab: Vocab, extra: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Token bytes as (data, start, length) with room for ``extra`` more tokens."""
    n0 = len(vocab.tokens)
    tstart = np.zeros(n0 + extra, np.int64)
    tlen = np.zeros(n0 + extra, np.int32)
    base_lens = np.fromiter((len(t) for t in vocab.tokens), np.int32, n0)
    tlen[:n0] = base_lens
    if n0:
        np.cumsum(base_lens[:-1], out=tstart[1:n0])
    tdata = np.frombuffer(b"".join(vocab.tokens), np.uint8)
    tdata = np.concatenate([tdata, np.zeros(max(1024, tdata.shape[0]), np.uint8)])
    return tdata, tstart, tlen


@njit(cache=True)
def _splits(tdata, tstart, tlen, bkeys, bids, skip, up_to):
    """(token, left, right) of every split point of every token of at most ``up_to`` bytes
    whose two halves are tokens, ids in ``skip`` neither split nor parts; in token order, then
    left id order."""
    n_tokens = tlen.shape[0]
    byte_id = np.full(256, -1, np.int64)  # one-byte halves need no lookup
    for t in range(n_tokens):
        if tlen[t] == 1 and not skip[t]:
            byte_id[tdata[tstart[t]]] = t
    out = np.empty((1024, 3), np.int32)
    m = 0
    for t in range(n_tokens):
        n = np.int64(tlen[t])
        if skip[t] or n > up_to:
            continue
        s = tstart[t]
        first = m
        for k in range(1, n):
            a = byte_id[tdata[s]] if k == 1 else _lookup(bkeys, bids, tdata, tstart, tlen, tdata, s, np.int64(k), n_tokens)
            if a < 0 or skip[a]:
                continue
            b = byte_id[tdata[s + k]] if k == n - 1 else _lookup(bkeys, bids, tdata, tstart, tlen, tdata, s + k, n - k, n_tokens)
            if b < 0 or skip[b]:
                continue
            if m == out.shape[0]:
                grown = np.empty((2 * m, 3), np.int32)
                for i in range(m):
                    for j in range(3):
                        grown[i, j] = out[i, j]
                out = grown
            # insert in left id order (a token has a few splits)
            i = m
            while i > first and out[i - 1, 1] > a:
                for j in range(3):
                    out[i, j] = out[i - 1, j]
                i -= 1
            out[i, 0] = t
            out[i, 1] = a
            out[i, 2] = b
            m += 1
    return out[:m].copy()


def token_splits(tokens: list[bytes], skip, up_to: int) -> np.ndarray:
    """Rows (token, left, right) of ``_splits`` for a list of distinct tokens (``skip``: ids,
    e.g. pinned specials); compiled, for export's every-split-point merges of short tokens.
    Example: ``token_splits([b"a", b"b", b"ab"], (), 64).tolist() == [[2, 0, 1]]``."""
    n = len(tokens)
    tlen = np.fromiter(map(len, tokens), np.int32, n)
    tstart = np.zeros(n, np.int64)
    if n:
        np.cumsum(tlen[:-1], out=tstart[1:])
    tdata = np.frombuffer(b"".join(tokens), np.uint8).copy() if n else np.zeros(1, np.uint8)
    mask = np.zeros(n, np.bool_)
    if skip:
        mask[list(skip)] = True
    bkeys, bids = _token_table(tdata, tstart, tlen, n, n)
    return _splits(tdata, tstart, tlen, bkeys, bids, mask, up_to)


def segment(words, vocab: Vocab) -> tuple[np.ndarray, np.ndarray]:
    """Token ids of every word under ``vocab`` (tiktoken's rank-BPE) as one flat int32 array
    plus offsets (len+1). Example: ``segment([b"00a"], Vocab.base())[0].tolist() == [256, 97]``.
    """
    flat, offsets = _segment_ids(words, vocab)
    return flat.astype(np.int32, copy=False), offsets


def _segment_ids(words, vocab: Vocab) -> tuple[np.ndarray, np.ndarray]:
    """``segment``, except that under the 256 single bytes the ids are the words' bytes
    themselves (uint8, no copy)."""
    return Segmenter(*_token_arrays(vocab, 0)).ids(words, len(vocab.tokens))


class Segmenter:
    """``segment`` under the first n tokens of a vocabulary given as token bytes (``tdata``,
    ``tstart``, ``tlen``), for many n (the vocabulary as it was after each number of merges).
    Example: ``Segmenter(*_token_arrays(v, 0))([b"00a"], 256)[0].tolist() == [48, 48, 97]``."""

    def __init__(self, tdata: np.ndarray, tstart: np.ndarray, tlen: np.ndarray):
        # (writable, as the merge loop's own tables: one compiled _segment and _token_table)
        self.tables = (tdata, tstart.astype(np.int64, copy=False), tlen.astype(np.int32, copy=False))
        self._lookup: tuple[np.ndarray, np.ndarray] | None = None  # every token's hash table, built once
        # under the 256 single bytes in byte order, a word's ids are its bytes
        self._bytes = tlen.shape[0] >= 256 and bool(
            (tlen[:256] == 1).all() and (tdata[tstart[:256]] == np.arange(256)).all())

    def __call__(self, words, n: int) -> tuple[np.ndarray, np.ndarray]:
        flat, offsets = self.ids(words, n)
        return flat.astype(np.int32, copy=False), offsets

    def ids(self, words, n: int) -> tuple[np.ndarray, np.ndarray]:
        data, off = _flatten(words)
        if n == 256 and self._bytes:
            return data[off[0] : off[-1]], off - off[0]
        if self._lookup is None:
            n_all = self.tables[1].shape[0]
            self._lookup = _token_table(*self.tables, n_all, n_all)
        flat, lens = _segment(data, off, *self.tables, n, _SEGMENT_LONG, *self._lookup)
        offsets = np.zeros(lens.shape[0] + 1, np.int64)
        np.cumsum(lens, out=offsets[1:])
        return flat, offsets


_SEGMENT_LONG = 64  # words this long or longer are segmented with a heap (_segment_long)
_PAIRS_PER_MERGE = 16  # the pair table starts with room for this many new pairs per merge
_REVERSE_LISTS = False  # tests: start from descending lists of positions (see _setup)
_HEAP_TARGET = 1 << 13  # pairs the heap is (re)filled with, at least (see _refill)
_POOL_SPARE = 4  # free pool entries at the start: this many 16ths of the lists ...
_POOL_SLACK = 1 << 16  # ... plus this many
_last_stats = np.zeros(16, np.int64)  # the last run's loop statistics, for benchmarks
_last_times: dict[str, float] = {}  # the last run's stage seconds, for benchmarks


def learn_merges(
    words,
    counts: np.ndarray,
    vocab: Vocab,
    n_merges: int,
    progress: Callable[[int], None] | None = None,
    checkpoint: Callable[[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray], None] | None = None,
    every: float = 2.0,
    step: int = 1,
) -> MergeResult:
    """Learn up to ``n_merges`` new tokens on ``words`` (with 64-bit ``counts``) on top of ``vocab``.

    ``words`` is a list of bytes or an Arrow binary array. Stops early when no adjacent pair is
    left (fewer new tokens than requested). Deterministic: the result depends only on the multiset
    of (word, count) and the vocabulary. ``progress(n)`` is called with the new tokens so far.
    ``checkpoint(left, right, token, count, reused)`` is called from the calling thread with copies
    of the merges recorded since its previous call, at most every ``every`` seconds while the loop
    runs and once at the end with the rest (maybe empty): its calls concatenate to the result's
    arrays. With ``every <= 0`` it is called after every ``step`` new tokens (and the merges reused
    on the way), deterministically: the loop then runs in the calling thread.
    Example: ``learn_merges([b"abab"], np.array([3]), Vocab.base(False), 1).vocab.tokens[256] == b"ab"``.
    """
    if n_merges < 0:
        raise ValueError("n_merges must be >= 0")
    counts = np.asarray(counts, dtype=np.int64)
    vocab.check()

    times = _last_times
    times.clear()
    t0 = time.perf_counter()

    # 1. segment under the starting vocabulary, then lay the positions out
    flat, offsets = _segment_ids(words, vocab)
    lens = np.diff(offsets)
    times["segment"] = time.perf_counter() - t0
    if counts.shape[0] != lens.shape[0]:
        raise ValueError(f"{lens.shape[0]} words but {counts.shape[0]} counts")
    if counts.shape[0] and counts.min() < 0:
        raise ValueError("counts must be >= 0")
    n0 = len(vocab.tokens)
    requested = n_merges
    # every merge (new token or reused) takes one token out of a word, so a word of k tokens
    # allows at most k - 1: the arrays are sized by what the words allow, not by the request
    # (--merges 1000000000 on a small corpus asked for gigabytes)
    n_merges = min(n_merges, int(np.maximum(lens - 1, 0).sum()))
    tb = _token_bits(n0 + n_merges)
    P, ek, ev = _layout(flat, lens, counts, tb)
    del flat, offsets
    times["layout"] = time.perf_counter() - t0 - times["segment"]

    # 2. token byte tables sized for the final vocabulary
    tdata, tstart, tlen = _token_arrays(vocab, n_merges)

    # 3. the loop, in a thread (it releases the GIL) so that progress and checkpoints can be
    #    reported; it writes the merge records into arrays owned here and publishes their number
    #    in stats[0] after each row is written
    stats = np.zeros(16, np.int64)
    cap = n_merges + 1024  # reused merges spend no budget: grown (and the loop resumed) if needed
    box: dict = {"rec": _records(cap), "last": 0}

    def emit() -> None:
        """Checkpoint the records written since the last call (in the calling thread)."""
        k = int(stats[0])  # rows below k are written; read k before the arrays
        last = box["last"]
        if k > last:
            checkpoint(*(r[last:k].copy() for r in box["rec"]))
            box["last"] = k

    def run(after_step: Callable[[], None] | None = None, step: int = n_merges) -> None:
        """The loop, ``step`` new tokens per call of ``_loop`` (``after_step`` after each)."""
        try:
            t1 = time.perf_counter()
            c1 = time.thread_time()
            # ~16 new pairs per merge on natural text; never more than the positions
            expect = min(_PAIRS_PER_MERGE * n_merges, P.shape[0])
            bkeys, bids, T, L, pool, H, st = _setup(P, ek, ev, tb, tdata, tstart, tlen, n0, expect,
                                                    _POOL_SPARE, _POOL_SLACK, _HEAP_TARGET, _REVERSE_LISTS)
            times["setup"] = time.perf_counter() - t1
            c2 = time.thread_time()
            scratch = np.zeros((8, tstart.shape[0]), np.int64)
            scratch[:2] = -1
            td = tdata
            while True:
                rec = box["rec"]
                target = min(n_merges, int(st[6]) + step)
                td, T, L, pool, H = _loop(P, ek, ev, tb, td, tstart, tlen, bkeys, bids, T, L, pool, H, st,
                                          scratch, target, _HEAP_TARGET, *rec, stats)
                if st[7] >= rec[0].shape[0]:
                    more = _records(2 * rec[0].shape[0])
                    for old, new in zip(rec, more):
                        new[: old.shape[0]] = old
                    box["rec"] = more  # before the loop publishes any row beyond the old arrays
                    continue
                if after_step is not None:
                    after_step()
                if st[6] < target or st[6] >= n_merges:  # no pair left, or done
                    break
            box["out"] = (td, int(st[5]), int(st[7]))
            times["loop"] = time.perf_counter() - t1 - times["setup"]
            times["setup_cpu"] = c2 - c1
            times["loop_cpu"] = time.thread_time() - c2
        except BaseException as e:  # pragma: no cover - re-raised below
            box["err"] = e

    if checkpoint is not None and every <= 0:
        # every <= 0: the loop runs in this thread, ``step`` new tokens at a time, with a
        # checkpoint after each; deterministic, for tests of what an interrupted run leaves
        def after_step() -> None:
            if progress is not None:
                progress(int(stats[5]))
            emit()

        run(after_step, max(1, int(step)))
    else:
        th = threading.Thread(target=run, name="toktok-merge", daemon=True)
        th.start()
        t_last = time.monotonic()
        while th.is_alive():
            th.join(0.1 if checkpoint is None else min(0.1, every))
            if progress is not None:
                progress(int(stats[5]))
            if checkpoint is not None and th.is_alive() and time.monotonic() - t_last >= every:
                emit()
                t_last = time.monotonic()
    if "err" in box:
        raise box["err"]
    tbytes, n_tokens, n_rec = box["out"]
    left, right, token, count, reused = (r[:n_rec].copy() for r in box["rec"])
    reused = reused.astype(bool)
    if checkpoint is not None:
        last = box["last"]
        checkpoint(left[last:].copy(), right[last:].copy(), token[last:].copy(), count[last:].copy(),
                   reused[last:].copy())
    _last_stats[:] = stats

    # 4. results: new tokens' bytes and each word's final number of tokens
    new_tokens = [bytes(tbytes[tstart[i] : tstart[i] + tlen[i]]) for i in range(n0, n_tokens)]
    out = Vocab(list(vocab.tokens) + new_tokens, list(vocab.specials))
    word_tokens = _tokens_per_word(P, lens, tb)
    times["total"] = time.perf_counter() - t0
    return MergeResult(out, left, right, token, count, reused, requested, word_tokens)


def _records(cap: int) -> tuple[np.ndarray, ...]:
    """Record arrays for ``cap`` merges: left, right, token, count, reused."""
    return (np.empty(cap, np.int32), np.empty(cap, np.int32), np.empty(cap, np.int32),
            np.empty(cap, np.int64), np.empty(cap, np.bool_))
