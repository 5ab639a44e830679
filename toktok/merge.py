"""Learn merges: a word table and a starting vocabulary in, merges out (the merge stage).

Owns the BPE training definition. Reads unique words with 64-bit counts and a ``Vocab``; returns
the merges in order and the grown vocabulary. The words are first segmented under the starting
vocabulary with tiktoken's rank-BPE (whole-piece lookup included), then the loop repeats:

* the pair with the highest total count wins (count = word count x adjacent positions, overlaps
  included); ties go to the smallest (left bytes, right bytes);
* it is replaced left to right without overlap in every word that holds it;
* if the merged bytes are already a token, that token is reused and no budget is spent.

The loop is incremental and compiled with Numba: one flat array of token positions with
next/prev links, an occurrence list per token, pair counts in a hash table updated by deltas,
and a lazy max-heap. A round touches only the positions of the chosen pair.
"""
from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
from numba import njit

from ._kernels import _EMPTY, _grow, _hash_range, _mix
from .vocab import Vocab



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


@njit(cache=True)
def _slot(keys, key):
    """Slot of ``key`` in an open-addressing table, or of the empty slot where it would go."""
    mask = np.uint64(keys.shape[0] - 1)
    i = _mix(key) & mask
    while True:
        k = keys[i]
        if k == key or k == _EMPTY:
            return np.int64(i)
        i = (i + np.uint64(1)) & mask


@njit(cache=True)
def _rehash(keys, vals, cap):
    nk = np.full(cap, _EMPTY, np.int64)
    nv = np.zeros(cap, vals.dtype)
    for i in range(keys.shape[0]):
        if keys[i] != _EMPTY:
            s = _slot(nk, keys[i])
            nk[s] = keys[i]
            nv[s] = vals[i]
    return nk, nv


@njit(cache=True, inline="always")
def _pkey(a, b):
    return (np.int64(a) << 32) | np.int64(b)


@njit(cache=True)
def _bytes_hash(tdata, tstart, tlen, a, b):
    """Hash of bytes(a) + bytes(b) (FNV-1a, kept positive so that -1 can mean empty)."""
    h = np.uint64(0xCBF29CE484222325)
    for t in (a, b):
        s = tstart[t]
        for i in range(tlen[t]):
            h ^= np.uint64(tdata[s + i])
            h *= np.uint64(0x100000001B3)
    return np.int64(h >> np.uint64(1))


@njit(cache=True)
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


@njit(cache=True)
def _put_token(bkeys, bids, h, t):
    mask = np.uint64(bkeys.shape[0] - 1)
    i = _mix(h) & mask
    while bkeys[i] != _EMPTY:
        i = (i + np.uint64(1)) & mask
    bkeys[i] = h
    bids[i] = t


# --- heap ordered by (count desc, left bytes asc, right bytes asc) ----------------------------


@njit(cache=True)
def _bytes_less(x, y, tdata, tstart, tlen):
    if x == y:
        return False
    sx = tstart[x]
    sy = tstart[y]
    lx = tlen[x]
    ly = tlen[y]
    for i in range(min(lx, ly)):
        cx = tdata[sx + i]
        cy = tdata[sy + i]
        if cx != cy:
            return cx < cy
    return lx < ly


@njit(cache=True, inline="always")
def _before(H, i, j, tdata, tstart, tlen):
    """True when heap entry i must be popped before entry j. Rows are (count, pair key): one
    cache line per comparison."""
    if H[i, 0] != H[j, 0]:
        return H[i, 0] > H[j, 0]
    ai = np.int32(H[i, 1] >> 32)
    aj = np.int32(H[j, 1] >> 32)
    if ai != aj:
        return _bytes_less(ai, aj, tdata, tstart, tlen)
    return _bytes_less(np.int32(H[i, 1] & 0xFFFFFFFF), np.int32(H[j, 1] & 0xFFFFFFFF), tdata, tstart, tlen)


@njit(cache=True, inline="always")
def _swap(H, i, j):
    c = H[i, 0]
    k = H[i, 1]
    H[i, 0] = H[j, 0]
    H[i, 1] = H[j, 1]
    H[j, 0] = c
    H[j, 1] = k


@njit(cache=True)
def _sift_up(H, i, tdata, tstart, tlen):
    while i > 0:
        parent = (i - 1) >> 1
        if _before(H, i, parent, tdata, tstart, tlen):
            _swap(H, i, parent)
            i = parent
        else:
            break


@njit(cache=True)
def _sift_down(H, n, i, tdata, tstart, tlen):
    while True:
        left = 2 * i + 1
        if left >= n:
            break
        best = left
        right = left + 1
        if right < n and _before(H, right, left, tdata, tstart, tlen):
            best = right
        if _before(H, best, i, tdata, tstart, tlen):
            _swap(H, i, best)
            i = best
        else:
            break


@njit(cache=True)
def _push(H, hn, count, key, tdata, tstart, tlen):
    """Push (count, key); returns the (maybe grown) heap."""
    if hn >= H.shape[0]:
        N = np.empty((2 * H.shape[0], 2), np.int64)
        N[:hn] = H[:hn]
        H = N
    H[hn, 0] = count
    H[hn, 1] = key
    _sift_up(H, hn, tdata, tstart, tlen)
    return H


# --- pair table: one row per pair, so a probe touches one cache line ---------------------------

_KEY, _CNT, _HEAD, _LEN, _CAP = 0, 1, 2, 3, 4
_NCOL = 5

# columns of the position array: token id, next and previous position in the word (-1 at the
# ends), word index; one row per position keeps a merge's neighbours in one or two cache lines
_TOK, _NXT, _PRV, _WID = 0, 1, 2, 3


@njit(cache=True)
def _tslot(T, key):
    """Row of ``key`` in the pair table, or the empty row where it would go."""
    mask = np.uint64(T.shape[0] - 1)
    i = _mix(key) & mask
    while True:
        k = T[i, _KEY]
        if k == key or k == _EMPTY:
            return np.int64(i)
        i = (i + np.uint64(1)) & mask


@njit(cache=True)
def _new_table(cap):
    T = np.zeros((cap, _NCOL), np.int64)
    T[:, _KEY] = _EMPTY
    return T


@njit(cache=True)
def _rebuild(T, need):
    """A table with room for ``need`` more pairs. Pairs with no count are dropped: a zero count
    means no live occurrence, so their lists hold only stale positions. Returns the table, the
    rows in use, and how many list entries were dropped."""
    live = 0
    dropped = 0
    for i in range(T.shape[0]):
        if T[i, _KEY] != _EMPTY:
            if T[i, _CNT] != 0:
                live += 1
            else:
                dropped += T[i, _LEN]
    cap = 1024
    while cap < 2 * (live + need):
        cap *= 2
    N = _new_table(cap)
    for i in range(T.shape[0]):
        if T[i, _KEY] != _EMPTY and T[i, _CNT] != 0:
            s = _tslot(N, T[i, _KEY])
            for c in range(_NCOL):
                N[s, c] = T[i, c]
    return N, live, dropped


@njit(cache=True)
def _append(T, s, p, pool, pool_end, pool_live):
    """Append position p to the list of row s when it is full: the list moves to a block twice
    its size at the end of the pool (the old block becomes garbage)."""
    n = T[s, _LEN]
    if n == T[s, _CAP]:
        cap = max(4, 2 * n)
        if pool_end + cap > pool.shape[0]:
            pool, pool_end = _make_room(T, pool, pool_end, pool_live, cap)
        h = T[s, _HEAD]
        for i in range(n):
            pool[pool_end + i] = pool[h + i]
        T[s, _HEAD] = pool_end
        T[s, _CAP] = cap
        pool_end += cap
    pool[T[s, _HEAD] + n] = p
    T[s, _LEN] = n + 1
    return pool, pool_end


@njit(cache=True)
def _make_room(T, pool, pool_end, live, need):
    """Room for ``need`` more entries: compact the lists into a new pool when at least a third
    of the pool is garbage, else grow it by half. Keeps the pool within ~2x its live entries."""
    if 3 * (pool_end - live) >= pool_end:
        out = np.empty(live + (live >> 1) + need + (1 << 16), np.int32)
        o = 0
        for i in range(T.shape[0]):
            if T[i, _KEY] != _EMPTY and T[i, _LEN] > 0:
                h = T[i, _HEAD]
                for k in range(T[i, _LEN]):
                    out[o + k] = pool[h + k]
                T[i, _HEAD] = o
                T[i, _CAP] = T[i, _LEN]
                o += T[i, _LEN]
            elif T[i, _KEY] != _EMPTY:
                T[i, _CAP] = 0
        return out, o
    out = np.empty(max(pool.shape[0] + (pool.shape[0] >> 1), pool_end + need + (1 << 16)), np.int32)
    out[:pool_end] = pool[:pool_end]
    return out, pool_end


@njit(cache=True)
def _initial_pairs(P, wcount, n_tokens):
    """Pair table and pool for the starting positions. Small vocabularies (bytes, hardcoded)
    count in a dense n×n array first, so the hash table sees each distinct pair once."""
    n_pos = P.shape[0]
    T = _new_table(1024)
    n_used = 0
    if n_tokens <= 2048:
        nn = n_tokens * n_tokens
        dcnt = np.zeros(nn, np.int64)
        dlen = np.zeros(nn, np.int64)
        for p in range(n_pos):
            q = P[p, _NXT]
            if q >= 0:
                d = P[p, _TOK] * n_tokens + P[q, _TOK]
                dcnt[d] += wcount[P[p, _WID]]
                dlen[d] += 1
        acc = 0
        for d in range(nn):
            if dlen[d] > 0:
                if 2 * (n_used + 1) > T.shape[0]:
                    T, n_used, _ = _rebuild(T, T.shape[0])
                key = _pkey(d // n_tokens, d % n_tokens)
                s = _tslot(T, key)
                T[s, _KEY] = key
                T[s, _CNT] = dcnt[d]
                T[s, _HEAD] = acc
                T[s, _CAP] = dlen[d]
                T[s, _LEN] = dlen[d]
                n_used += 1
                ln = dlen[d]
                dlen[d] = acc  # from here on: where the next position of pair d goes
                acc += ln
        pool = np.empty(acc + (acc >> 2) + (1 << 16), np.int32)
        for p in range(n_pos):
            q = P[p, _NXT]
            if q >= 0:
                d = P[p, _TOK] * n_tokens + P[q, _TOK]
                pool[dlen[d]] = p
                dlen[d] += 1
        return T, n_used, pool, acc
    for p in range(n_pos):
        q = P[p, _NXT]
        if q >= 0:
            if 2 * (n_used + 1) > T.shape[0]:
                T, n_used, _ = _rebuild(T, T.shape[0])
            key = _pkey(P[p, _TOK], P[q, _TOK])
            s = _tslot(T, key)
            if T[s, _KEY] == _EMPTY:
                T[s, _KEY] = key
                n_used += 1
            T[s, _CNT] += wcount[P[p, _WID]]
            T[s, _LEN] += 1
    acc = 0
    for i in range(T.shape[0]):
        if T[i, _KEY] != _EMPTY:
            T[i, _HEAD] = acc
            T[i, _CAP] = T[i, _LEN]
            acc += T[i, _LEN]
            T[i, _LEN] = 0
    pool = np.empty(acc + (acc >> 2) + (1 << 16), np.int32)
    for p in range(n_pos):
        q = P[p, _NXT]
        if q >= 0:
            s = _tslot(T, _pkey(P[p, _TOK], P[q, _TOK]))
            pool[T[s, _HEAD] + T[s, _LEN]] = p
            T[s, _LEN] += 1
    return T, n_used, pool, acc


# --- the loop ----------------------------------------------------------------------------------


@njit(cache=True, nogil=True)
def _learn(P, wcount, tdata, tstart, tlen, n_tokens, n_merges, stats):
    """Greedy BPE over flat positions. Returns merges and the grown token tables.

    ``P`` has one row per position (token id, next and previous position in the same word or -1,
    word index into ``wcount``); it is rewritten in place. Each pair keeps the
    list of positions where it was created, so a round reads only the chosen pair's positions.
    ``stats`` reports progress to another thread: [new tokens, largest pair table, largest pool,
    largest heap, heap pops].
    """
    max_tokens = tstart.shape[0]

    # 1. token bytes lookup, to reuse a token whose bytes a merge produces again
    bkeys, bids = _token_table(tdata, tstart, tlen, n_tokens, max_tokens)

    # 2. pair counts and each pair's positions, ascending (counting sort by pair)
    T, n_used, pool, pool_end = _initial_pairs(P, wcount, n_tokens)
    pool_live = pool_end  # entries in lists (live or stale); the rest of the pool is garbage

    # 3. the heap holds every pair with a positive count
    H = np.empty((max(n_used * 2, 16), 2), np.int64)
    hn = 0
    for s in range(T.shape[0]):
        if T[s, _KEY] != _EMPTY and T[s, _CNT] > 0:
            H[hn, 0] = T[s, _CNT]
            H[hn, 1] = T[s, _KEY]
            hn += 1
    for i in range(hn // 2 - 1, -1, -1):
        _sift_down(H, hn, i, tdata, tstart, tlen)

    rec_cap = max(n_merges * 2, 16)
    r_left = np.empty(rec_cap, np.int32)
    r_right = np.empty(rec_cap, np.int32)
    r_tok = np.empty(rec_cap, np.int32)
    r_cnt = np.empty(rec_cap, np.int64)
    r_reused = np.empty(rec_cap, np.bool_)
    n_rec = 0
    n_new = 0
    tdata_end = tstart[n_tokens - 1] + tlen[n_tokens - 1] if n_tokens > 0 else 0
    touched = np.empty(16, np.int64)
    l_stamp = np.full(max_tokens, -1, np.int64)
    r_stamp = np.full(max_tokens, -1, np.int64)
    l_dec = np.zeros(max_tokens, np.int64)
    l_inc = np.zeros(max_tokens, np.int64)
    r_dec = np.zeros(max_tokens, np.int64)
    r_inc = np.zeros(max_tokens, np.int64)

    while n_new < n_merges and hn > 0:
        # 4. pop the best pair; stale entries (count moved since the push) are skipped or re-pushed
        stats[4] += 1
        c = H[0, 0]
        a = np.int32(H[0, 1] >> 32)
        b = np.int32(H[0, 1] & 0xFFFFFFFF)
        hn -= 1
        if hn > 0:
            H[0, 0] = H[hn, 0]
            H[0, 1] = H[hn, 1]
            _sift_down(H, hn, 0, tdata, tstart, tlen)
        s0 = _tslot(T, _pkey(a, b))
        cur = T[s0, _CNT] if T[s0, _KEY] != _EMPTY else 0
        if cur != c:
            if 0 < cur < c:
                H = _push(H, hn, cur, _pkey(a, b), tdata, tstart, tlen)
                hn += 1
            continue

        # 5. the merged token: an existing one with the same bytes, or a new id
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
            tdata[tdata_end : tdata_end + la] = tdata[tstart[a] : tstart[a] + la]
            tdata[tdata_end + la : tdata_end + la + lb] = tdata[tstart[b] : tstart[b] + lb]
            tstart[t] = tdata_end
            tlen[t] = la + lb
            tdata_end += la + lb
            _put_token(bkeys, bids, h, t)

        # 6. room for the new pairs first, so that rows stay put during the round
        ln = T[s0, _LEN]
        if 2 * (n_used + 2 * ln) > T.shape[0]:
            T, n_used, dropped = _rebuild(T, 2 * ln)
            pool_live -= dropped
            s0 = _tslot(T, _pkey(a, b))
        head = T[s0, _HEAD]
        if a == b:
            # overlapping runs (a a a) must be merged left to right
            pool[head : head + ln].sort()
        touched = _grow(touched, 2 * ln)
        n_touched = 0

        # 7. merge at every live position of the pair; update pair counts by deltas. Within a
        #    round the pairs touched depend only on the neighbour's token, so their rows are
        #    looked up once per neighbour token (rows do not move during a round); the first
        #    sighting of a neighbour token is also when its new pair joins the push list.
        for k in range(ln):
            p = pool[T[s0, _HEAD] + k]  # re-read: a compaction may move the list
            if P[p, _TOK] != a:
                continue
            q = P[p, _NXT]
            if q < 0 or P[q, _TOK] != b:
                continue
            wc = wcount[P[p, _WID]]
            x = P[p, _PRV]
            y = P[q, _NXT]
            if x >= 0:
                tx = P[x, _TOK]
                if l_stamp[tx] != n_rec:
                    l_stamp[tx] = n_rec
                    l_dec[tx] = _tslot(T, _pkey(tx, a))
                    key = _pkey(tx, t)
                    s = _tslot(T, key)
                    if T[s, _KEY] == _EMPTY:
                        T[s, _KEY] = key
                        n_used += 1
                    l_inc[tx] = s
                    touched[n_touched] = s
                    n_touched += 1
                T[l_dec[tx], _CNT] -= wc
                s = l_inc[tx]
                T[s, _CNT] += wc
                if T[s, _LEN] < T[s, _CAP]:
                    pool[T[s, _HEAD] + T[s, _LEN]] = x
                    T[s, _LEN] += 1
                else:
                    pool, pool_end = _append(T, s, x, pool, pool_end, pool_live)
                pool_live += 1
            if y >= 0:
                ty = P[y, _TOK]
                if r_stamp[ty] != n_rec:
                    r_stamp[ty] = n_rec
                    r_dec[ty] = _tslot(T, _pkey(b, ty))
                    key = _pkey(t, ty)
                    s = _tslot(T, key)
                    if T[s, _KEY] == _EMPTY:
                        T[s, _KEY] = key
                        n_used += 1
                    r_inc[ty] = s
                    touched[n_touched] = s
                    n_touched += 1
                T[r_dec[ty], _CNT] -= wc
                s = r_inc[ty]
                T[s, _CNT] += wc
                if T[s, _LEN] < T[s, _CAP]:
                    pool[T[s, _HEAD] + T[s, _LEN]] = p
                    T[s, _LEN] += 1
                else:
                    pool, pool_end = _append(T, s, p, pool, pool_end, pool_live)
                pool_live += 1
            T[s0, _CNT] -= wc
            P[p, _TOK] = t
            P[q, _TOK] = -1
            P[p, _NXT] = y
            if y >= 0:
                P[y, _PRV] = p
        # the merged pair is gone everywhere; its list is garbage now
        pool_live -= T[s0, _LEN]
        T[s0, _LEN] = 0
        T[s0, _CAP] = 0

        # 8. push the pairs whose counts grew (decreases stay lazy in the heap)
        for i in range(n_touched):
            s = touched[i]
            if T[s, _CNT] > 0:
                H = _push(H, hn, T[s, _CNT], T[s, _KEY], tdata, tstart, tlen)
                hn += 1

        r_left = _grow(r_left, n_rec + 1)
        r_right = _grow(r_right, n_rec + 1)
        r_tok = _grow(r_tok, n_rec + 1)
        r_cnt = _grow(r_cnt, n_rec + 1)
        r_reused = _grow(r_reused, n_rec + 1)
        r_left[n_rec] = a
        r_right[n_rec] = b
        r_tok[n_rec] = t
        r_cnt[n_rec] = c
        r_reused[n_rec] = reused
        n_rec += 1
        stats[0] = n_new
        stats[1] = max(stats[1], T.shape[0])
        stats[2] = max(stats[2], pool.shape[0])
        stats[3] = max(stats[3], H.shape[0])

    return (
        r_left[:n_rec].copy(), r_right[:n_rec].copy(), r_tok[:n_rec].copy(), r_cnt[:n_rec].copy(),
        r_reused[:n_rec].copy(), tdata[:tdata_end].copy(), n_tokens,
    )


# --- segmentation and layout -------------------------------------------------------------------


@njit(cache=True)
def _token_table(tdata, tstart, tlen, n_tokens, max_tokens):
    cap = 16
    while cap < 2 * max_tokens:
        cap *= 2
    bkeys = np.full(cap, _EMPTY, np.int64)
    bids = np.zeros(cap, np.int32)
    for t in range(n_tokens):
        _put_token(bkeys, bids, _hash_range(tdata, tstart[t], tlen[t]), t)
    return bkeys, bids


@njit(cache=True)
def _lookup(bkeys, bids, tdata, tstart, tlen, data, s, n):
    """Id of the token with bytes data[s:s+n], or -1."""
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
                    return t
        i = (i + np.uint64(1)) & mask
    return -1


@njit(cache=True)
def _segment(data, offsets, tdata, tstart, tlen, n_tokens):
    """tiktoken's rank-BPE of every word: whole-word lookup, else merge the lowest-rank adjacent
    pair (leftmost on ties) until no adjacent pair is a token. Returns flat ids and lengths."""
    bkeys, bids = _token_table(tdata, tstart, tlen, n_tokens, n_tokens)
    # ranks of the two-byte tokens, so that the first round of every word needs no hashing
    # and most words (no adjacent byte pair is a token) finish at once
    byte_id = np.empty(256, np.int32)
    for b in range(256):
        byte_id[b] = _lookup(bkeys, bids, tdata, tstart, tlen, np.array([b], np.uint8), 0, 1)
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
    o = 0
    for w in range(n_words):
        s = offsets[w]
        e = offsets[w + 1]
        n = e - s
        if n == 0:
            continue
        t = _lookup(bkeys, bids, tdata, tstart, tlen, data, s, n)
        if t >= 0:
            out[o] = t
            o += 1
            lens[w] = 1
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
                r = _lookup(bkeys, bids, tdata, tstart, tlen, data, bounds[bi], bounds[bi + 2] - bounds[bi])
                rk[bi] = r if r >= 0 else big
            if bi > 0:
                r = _lookup(bkeys, bids, tdata, tstart, tlen, data, bounds[bi - 1], bounds[bi + 1] - bounds[bi - 1])
                rk[bi - 1] = r if r >= 0 else big
        for i in range(nb - 1):
            out[o] = _lookup(bkeys, bids, tdata, tstart, tlen, data, bounds[i], bounds[i + 1] - bounds[i])
            o += 1
        lens[w] = nb - 1
    return out[:o].copy(), lens


@njit(cache=True)
def _layout(flat, lens):
    """Positions of every word with two or more tokens (one-token words never change), linked
    within their word; returns the position array and each position's word index."""
    n_pos = 0
    for w in range(lens.shape[0]):
        if lens[w] >= 2:
            n_pos += lens[w]
    P = np.empty((n_pos, 4), np.int32)
    o = 0
    src = 0
    for w in range(lens.shape[0]):
        n = lens[w]
        if n >= 2:
            for k in range(n):
                P[o + k, _TOK] = flat[src + k]
                P[o + k, _NXT] = o + k + 1 if k + 1 < n else -1
                P[o + k, _PRV] = o + k - 1 if k > 0 else -1
                P[o + k, _WID] = w
            o += n
        src += n
    return P


@njit(cache=True)
def _tokens_per_word(P, lens):
    """Each word's number of tokens after the loop (dead positions hold token -1)."""
    out = lens.copy()
    for w in range(lens.shape[0]):
        if lens[w] >= 2:
            out[w] = 0
    for p in range(P.shape[0]):
        if P[p, _TOK] >= 0:
            out[P[p, _WID]] += 1
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


def _is_bytes_only(vocab: Vocab) -> bool:
    return len(vocab.tokens) == 256 and all(t == bytes([i]) for i, t in enumerate(vocab.tokens))


def segment(words, vocab: Vocab) -> tuple[np.ndarray, np.ndarray]:
    """Token ids of every word under ``vocab`` (tiktoken's rank-BPE) as one flat int32 array
    plus offsets (len+1). Example: ``segment([b"00a"], Vocab.base())[0].tolist() == [256, 97]``.
    """
    data, off = _flatten(words)
    if _is_bytes_only(vocab):
        flat = data[off[0] : off[-1]].astype(np.int32)
        return flat, off - off[0]
    tdata, tstart, tlen = _token_arrays(vocab, 0)
    flat, lens = _segment(data, off, tdata, tstart, tlen, len(vocab.tokens))
    offsets = np.zeros(lens.shape[0] + 1, np.int64)
    np.cumsum(lens, out=offsets[1:])
    return flat, offsets


_last_stats = np.zeros(8, np.int64)  # the last run's loop statistics, for benchmarks


def learn_merges(
    words,
    counts: np.ndarray,
    vocab: Vocab,
    n_merges: int,
    progress: Callable[[int], None] | None = None,
) -> MergeResult:
    """Learn up to ``n_merges`` new tokens on ``words`` (with 64-bit ``counts``) on top of ``vocab``.

    ``words`` is a list of bytes or an Arrow binary array. Stops early when no adjacent pair is
    left (fewer new tokens than requested). Deterministic: the result depends only on the multiset
    of (word, count) and the vocabulary. ``progress(n)`` is called with the new tokens so far.
    Example: ``learn_merges([b"abab"], np.array([3]), Vocab.base(False), 1).vocab.tokens[256] == b"ab"``.
    """
    if n_merges < 0:
        raise ValueError("n_merges must be >= 0")
    counts = np.asarray(counts, dtype=np.int64)
    vocab.check()

    # 1. segment under the starting vocabulary, then lay the positions out
    flat, offsets = segment(words, vocab)
    lens = np.diff(offsets)
    P = _layout(flat, lens)
    del flat, offsets

    # 2. token byte tables sized for the final vocabulary
    n0 = len(vocab.tokens)
    tdata, tstart, tlen = _token_arrays(vocab, n_merges)

    # 3. the loop, in a thread (it releases the GIL) so that progress can be reported
    stats = np.zeros(8, np.int64)
    box: dict = {}

    def run():
        try:
            box["out"] = _learn(P, counts, tdata, tstart, tlen, n0, n_merges, stats)
        except BaseException as e:  # pragma: no cover - re-raised below
            box["err"] = e

    th = threading.Thread(target=run, name="toktok-merge", daemon=True)
    th.start()
    while th.is_alive():
        th.join(0.1)
        if progress is not None:
            progress(int(stats[0]))
    if "err" in box:
        raise box["err"]
    left, right, token, count, reused, tbytes, n_tokens = box["out"]
    _last_stats[:] = stats

    # 4. results: new tokens' bytes and each word's final number of tokens
    new_tokens = [bytes(tbytes[tstart[i] : tstart[i] + tlen[i]]) for i in range(n0, n_tokens)]
    out = Vocab(list(vocab.tokens) + new_tokens, list(vocab.specials))
    word_tokens = _tokens_per_word(P, lens)
    return MergeResult(out, left, right, token, count, reused.astype(bool), n_merges, word_tokens)
