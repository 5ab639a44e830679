"""Segmentation: tiktoken's rank-BPE of words under a vocabulary (or under each of its prefixes).

``segment`` and ``Segmenter`` give each word's token ids (whole-piece lookup first, then the
lowest-rank pair, leftmost on ties; a word or part by ``rankbpe``); a long word by its parts, each
distinct part's ids found once per call and kept (``_segment``).
``token_splits`` lists every split of a token into two tokens, for export's merges.
"""
from __future__ import annotations

import itertools
import os
import sys
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from .. import _kernels
from .._kernels import (_address, _empty_array, _full_array, _grow, _load8, _mix, _peek, _poke, _zero_array, internal,
                        njit)
from ..vocab import Vocab
from .rankbpe import _plain, _segment_long
from .tokens import _flatten, _lookup, _probe, _token_arrays, _token_table

SEGMENT_LONG = 64  # words this long or longer are segmented with a heap (_segment_long)
#: A small run's Segmenter (``reference=True``) segments this many words or fewer with tiktoken
#: itself, compiled or not: tiktoken's BPE is the definition, so the ids are the same, and a
#: small run spends neither ~3 s compiling ``_segment`` nor the time to load it from the cache.
REFERENCE_WORDS = 200_000
#: Words of at least this many bytes in all are segmented by a thread per core, each taking a
#: run of them of about equal bytes (``_segment`` releases the GIL; each word's ids depend on
#: the word alone, so the ids are the same).
THREAD_BYTES = 4 << 20
#: A long word's parts (``_segment``) of at most this many bytes are segmented once per call and
#: their ids kept: those of at most ``SHORT`` (``MEDIUM``) bytes in a memo of at most
#: ``MEMO_ENTRIES`` parts (16 (32) bytes a slot, half full at most) keyed by their bytes, longer
#: ones in a cache of at most ``PART_ENTRIES`` parts (about 50 bytes each) keyed by their hash.
PART_CACHED = 128
SHORT = 8
MEDIUM = 16
ID_BITS = (1 << 26) - 1  # a memo's entry holds ids below 2 ** 26 itself, else in ``mids``
HOT_BITS = 15
MEMO_ENTRIES = 1 << 20
#: A short part's bytes are read as one int64 at once where the machine is little-endian.
LITTLE = sys.byteorder == "little"
#: Words of this many bytes or more (that are not a token) are segmented by their parts, unless
#: ``long_from`` is ``WHOLE``: then every word goes whole through the plain loop (tests' reference).
PARTED_FROM = 16
WHOLE = 1 << 40
PART_ENTRIES = 1 << 21


def _cores() -> int:
    """The cores this process may run on (its CPU affinity), at least 1."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        return os.cpu_count() or 1


@internal
def _memo_grown(memo):
    """The short parts' memo (``_segment``) with twice the slots, every entry placed again."""
    cap = memo.shape[0] >> 1
    grown = _zero_array(4 * cap, np.int64)
    gmask = np.uint64(2 * cap - 1)
    for j in range(cap):
        v = memo[2 * j + 1]
        if v != 0:
            key = memo[2 * j]
            i = np.int64(_mix(key ^ (v & 31)) & gmask)
            while grown[2 * i + 1] != 0:
                i = (i + 1) & np.int64(gmask)
            grown[2 * i] = key
            grown[2 * i + 1] = v
    return grown


@internal
def _memo2_grown(memo2):
    """The medium parts' memo (``_segment``) with twice the slots, every entry placed again."""
    cap = memo2.shape[0] >> 2
    grown = _zero_array(8 * cap, np.int64)
    gmask = np.int64(2 * cap - 1)
    for j in range(cap):
        v = memo2[4 * j + 2]
        if v != 0:
            key, key1 = memo2[4 * j], memo2[4 * j + 1]
            i = np.int64(_mix(key ^ np.int64(_mix(key1 ^ (v & 31))))) & gmask
            while grown[4 * i + 2] != 0:
                i = (i + 1) & gmask
            grown[4 * i] = key
            grown[4 * i + 1] = key1
            grown[4 * i + 2] = v
            grown[4 * i + 3] = memo2[4 * j + 3]
    return grown


@internal
def _slots_grown(slots, store):
    """The long parts' cache slots (``_segment``) twice as many, every part placed again by the
    hash of its bytes in ``store``."""
    low = (np.int64(1) << 32) - 1
    grown = _zero_array(2 * slots.shape[0], np.int64)
    smask = np.uint64(grown.shape[0] - 1)
    for r in range(slots.shape[0]):
        if slots[r] != 0:
            a = (slots[r] & low) - 1
            g = np.uint64(0xCBF29CE484222325)
            for j in range(store[a]):
                g ^= np.uint64(store[a + 2 + j])
                g *= np.uint64(0x100000001B3)
            j = _mix(np.int64(g >> np.uint64(1))) & smask
            while grown[j] != 0:
                j = (j + np.uint64(1)) & smask
            grown[j] = slots[r]
    return grown


@njit(cache=True, no_cfunc_wrapper=True, nogil=True)
def _segment(data, offsets, tdata, tstart, tlen, n_tokens, long_from, bkeys, bids, out, lens):
    """tiktoken's rank-BPE of every word: whole-word lookup, else merge the lowest-rank adjacent
    pair (leftmost on ties) until no adjacent pair is a token. Writes the ids at ``out`` (room
    for one per byte) and each word's number of ids at ``lens``; returns the number of ids.
    Words of ``PARTED_FROM`` bytes or more go by their parts, and a word or part of
    ``long_from`` bytes or more through ``_segment_long`` (the same result in O(n log n); the
    plain loop, ``_plain``, rescans the word after each merge).

    Parts: a long word is cut between two bytes that are adjacent in no token below ``n_tokens``
    (``inner``: which byte pairs are), so no merge of the word's can ever join bytes across a
    cut, and its rank-BPE is that of each part, one after the other (the parts' merges
    interleave, each part's in its own order). A part's ids are found once per call and kept:
    a part of at most ``SHORT`` bytes in ``memo`` (open addressing, half full at most: its bytes
    packed in one int64, then ``v = len | k << 5 | 1024 | id0 << 11 | id1 << 37`` for ``k``
    ids, else ``len | k << 5 | (where mids has them) << 11``; ``hot`` in front of it), one of at
    most ``MEDIUM`` bytes in ``memo2`` (its bytes in two int64, ``v``, then ids 2 and 3), a part
    of at most ``PART_CACHED``
    bytes in ``store``
    (at ``a``: its length, its number of ids, its bytes, its ids) found by its hash in ``slots``
    (the hash's high bits above ``a + 1``). Longer parts, and a word that is one part, are not
    kept. A part that is a token is most often that token (``whole``: known to be, or not).
    Only the first ``n_tokens`` tokens are used; ``bkeys``/``bids`` (``_token_table``) may hold
    more, so that one table serves every prefix of a vocabulary. No helper the loop calls on
    every part takes an array (reference counts): they take addresses."""
    max_len = np.int64(0)
    for t in range(n_tokens):
        max_len = max(max_len, np.int64(tlen[t]))
    # ranks of the two-byte tokens, so that the first round of every word needs no hashing
    # and most words (no adjacent byte pair is a token) finish at once
    byte_id = _full_array(256, -1, np.int32)
    for t in range(n_tokens):  # (the tokens are distinct: Vocab.check)
        if tlen[t] == 1:
            byte_id[tdata[tstart[t]]] = t
    pair2 = _full_array(65536, -1, np.int64)
    # the byte pairs adjacent in some token: a long word is cut between any other two
    inner = _zero_array(65536, np.bool_)
    for t in range(n_tokens):
        if tlen[t] == 2:
            pair2[np.int64(tdata[tstart[t]]) * 256 + tdata[tstart[t] + 1]] = t
        for i in range(tstart[t], tstart[t] + tlen[t] - 1):
            inner[np.int64(tdata[i]) * 256 + tdata[i + 1]] = True
    # the tables by address, for _lookup and _plain (no reference counts per call)
    keys_at, ids_at, tdata_at = _address(bkeys), _address(bids), _address(tdata)
    tstart_at, tlen_at = _address(tstart), _address(tlen)
    mask = np.uint64(bkeys.shape[0] - 1)
    data_at, out_at, pair2_at, byte_at = _address(data), _address(out), _address(pair2), _address(byte_id)
    # (``out`` is read and written through its address here as in _plain and _segment_long; an
    # array whose address is taken stays alive only while the code names it: see ``rk`` below)
    n_data = data.shape[0]
    n_words = offsets.shape[0] - 1
    room = np.int64(PART_CACHED) + 2  # (parts of fewer bytes take _plain)
    bounds = _empty_array(room, np.int64)
    rk = _empty_array(room, np.int64)
    bounds_at, rk_at = _address(bounds), _address(rk)
    # the memos, grown as they fill, sized ahead for a distinct part of each size per 256 bytes
    # (the bench's 90.8 MB of stage-2 words: 390 K short ones, 380 K medium ones), as each
    # growth places every entry again and leaves the old table to the allocator
    cap = np.int64(4096)
    while cap < 2 * min(np.int64(MEMO_ENTRIES), n_data // 256):
        cap *= 2
    memo = _zero_array(2 * cap, np.int64)
    memo_n = np.int64(0)
    # in front of it, the parts seen last at each of 2 ** HOT_BITS places (in a core's cache)
    hot = _zero_array(2 << HOT_BITS, np.int64)
    memo2 = _zero_array(4 * cap, np.int64)  # the medium parts' (two int64 of bytes, v, ids 2 and 3)
    memo2_n = np.int64(0)
    mids = _empty_array(4096, np.int32)
    mids_n = np.int64(0)
    # the long parts' cache, grown as it fills; its slots sized ahead for a distinct part per
    # 2 KB (few parts are longer than MEDIUM bytes: 90% of the bench's are at most 8)
    cap = np.int64(1024)
    while cap < 2 * min(np.int64(PART_ENTRIES), n_data // 2048):
        cap *= 2
    slots = _zero_array(cap, np.int64)
    store = _empty_array(4096, np.int32)
    used = np.int64(0)  # parts in the cache
    stored = np.int64(0)  # store's length
    low = (np.int64(1) << 32) - 1
    whole = _zero_array(n_tokens, np.int8)  # a token's rank-BPE is itself: 1, is not: 2, not known yet: 0
    o = np.int64(0)
    w = np.int64(0)
    p = np.int64(-1)  # where word w's parts go on (-1: at its start)
    m = np.int64(0)  # word w's ids so far
    need = np.int64(0)  # bounds and rk hold too few for word w: hold this many
    while w < n_words:
        # Arrays are grown here only, between passes of the loop below over the words, which
        # rebinds none: an array rebound inside a loop costs reference counts on every turn.
        # A part that finds its cache full is not kept, and the loop stops after it.
        if need > 0:
            bounds = _empty_array(2 * need, np.int64)
            rk = _empty_array(2 * need, np.int64)
            bounds_at, rk_at = _address(bounds), _address(rk)
            need = 0
        if memo_n < MEMO_ENTRIES and 2 * (memo_n + 1) > (memo.shape[0] >> 1):
            memo = _memo_grown(memo)
        if memo2_n < MEMO_ENTRIES and 2 * (memo2_n + 1) > (memo2.shape[0] >> 2):
            memo2 = _memo2_grown(memo2)
        if mids_n + MEDIUM > mids.shape[0]:
            mids = _grow(mids, mids_n + MEDIUM)
        if used < PART_ENTRIES and 2 * (used + 1) > slots.shape[0]:
            slots = _slots_grown(slots, store)
        if stored + 2 + 2 * PART_CACHED > store.shape[0]:
            store = _grow(store, stored + 2 + 2 * PART_CACHED)
        full = False
        while w < n_words:
            s = offsets[w]
            e = offsets[w + 1]
            n = e - s
            if p < 0:  # word w's start (else its parts go on from p, its ids so far m)
                if n == 0:
                    lens[w] = 0
                    w += 1
                    continue
                t = _lookup(keys_at, ids_at, tdata_at, tstart_at, tlen_at, mask, data_at, s, n, n_tokens) if n <= max_len \
                    else np.int64(-1)
                if t >= 0:
                    _poke(out_at, o, t, np.int32)
                    o += 1
                    lens[w] = 1
                    w += 1
                    continue
                if n < PARTED_FROM or long_from >= WHOLE:
                    # (both arrays named in the loop: an array only its address is taken of would be freed)
                    if bounds.shape[0] < n + 1 or rk.shape[0] < n + 1:
                        need = n + 1
                        break
                    k = _plain(data_at, s, n, pair2_at, byte_at, bounds_at, rk_at, out_at, o, keys_at, ids_at, tdata_at,
                               tstart_at, tlen_at, mask, n_tokens)
                    o += k
                    lens[w] = k
                    w += 1
                    continue
                m = np.int64(0)
                p = s
            while p < e:
                q = p + 1
                x0 = np.uint64(_peek(data_at, p, np.uint8))
                while q < e:
                    x1 = np.uint64(_peek(data_at, q, np.uint8))
                    if not inner[(x0 << np.uint64(8)) | x1]:  # (unsigned: no wraparound)
                        break
                    x0 = x1
                    q += 1
                ln = q - p
                at = o + m
                if ln == 1:
                    _poke(out_at, at, byte_id[data[p]], np.int32)
                    m += 1
                    p = q
                    continue
                if ln > PART_CACHED or (q == e and p == s):  # not kept: too long, or the word itself
                    if ln >= long_from or ln >= bounds.shape[0]:
                        m += _segment_long(data, p, ln, bkeys, bids, tdata, tstart, tlen, pair2, byte_id, max_len, out_at,
                                           at, n_tokens)
                    else:
                        m += _plain(data_at, p, ln, pair2_at, byte_at, bounds_at, rk_at, out_at, at, keys_at, ids_at,
                                    tdata_at, tstart_at, tlen_at, mask, n_tokens)
                    p = q
                    continue
                key = np.int64(0)
                key1 = np.int64(0)
                v = np.int64(0)
                h = np.uint64(0)
                j = np.int64(0)
                hj = np.int64(0)
                if ln <= SHORT:
                    # the part's bytes as one int64 (the first byte lowest), looked up in the memo
                    if LITTLE and p + 8 <= n_data:
                        key = np.int64(_load8(data_at + p))
                        if ln < 8:
                            key &= (np.int64(1) << (8 * ln)) - 1
                    else:
                        for i in range(ln):
                            key |= np.int64(data[p + i]) << (8 * i)
                    hx = _mix(key ^ ln)
                    hj = np.int64(hx >> np.uint64(64 - HOT_BITS))
                    v = hot[2 * hj + 1]
                    if v == 0 or hot[2 * hj] != key or (v & 31) != ln:
                        mm = np.int64((memo.shape[0] >> 1) - 1)
                        j = np.int64(hx) & mm
                        v = memo[2 * j + 1]
                        while v != 0 and (memo[2 * j] != key or (v & 31) != ln):
                            j = (j + 1) & mm
                            v = memo[2 * j + 1]
                        if v != 0:
                            hot[2 * hj] = key
                            hot[2 * hj + 1] = v
                elif ln <= MEDIUM:
                    # the part's bytes as two int64, looked up in the medium parts' memo
                    if LITTLE and p + 16 <= n_data:
                        key = np.int64(_load8(data_at + p))
                        key1 = np.int64(_load8(data_at + p + 8))
                        if ln < 16:
                            key1 &= (np.int64(1) << (8 * (ln - 8))) - 1
                    else:
                        for i in range(8):
                            key |= np.int64(data[p + i]) << (8 * i)
                        for i in range(8, ln):
                            key1 |= np.int64(data[p + i]) << (8 * (i - 8))
                    mm = np.int64((memo2.shape[0] >> 2) - 1)
                    j = np.int64(_mix(key ^ np.int64(_mix(key1 ^ ln)))) & mm
                    v = memo2[4 * j + 2]
                    while v != 0 and (memo2[4 * j] != key or memo2[4 * j + 1] != key1 or (v & 31) != ln):
                        j = (j + 1) & mm
                        v = memo2[4 * j + 2]
                else:
                    # the part's hash, for both the cache and the token table
                    h = np.uint64(0xCBF29CE484222325)
                    for i in range(ln):
                        h ^= np.uint64(data[p + i])
                        h *= np.uint64(0x100000001B3)
                    tag = np.int64(h >> np.uint64(33))  # 31 bits
                    smask = np.uint64(slots.shape[0] - 1)
                    si = _mix(np.int64(h >> np.uint64(1))) & smask
                    hit = np.int64(-1)
                    while slots[si] != 0:
                        x = slots[si]
                        if (x >> 32) == tag:
                            a = (x & low) - 1
                            if store[a] == ln:
                                same = True
                                for b in range(ln):
                                    if store[a + 2 + b] != data[p + b]:
                                        same = False
                                        break
                                if same:
                                    hit = a
                                    break
                        si = (si + np.uint64(1)) & smask
                    if hit >= 0:  # (an int64 v for the memos' entries, as they are)
                        k = np.int64(store[hit + 1])
                        c = hit + 2 + ln
                        for b in range(k):
                            _poke(out_at, at + b, store[c + b], np.int32)
                        m += k
                        p = q
                        continue
                    j = np.int64(si)
                if ln <= MEDIUM and v != 0:  # a memo's (see _segment's docstring)
                    k = (v >> 5) & 31
                    if v & 1024:
                        _poke(out_at, at, (v >> 11) & ID_BITS, np.int32)
                        if k >= 2:
                            _poke(out_at, at + 1, (v >> 37) & ID_BITS, np.int32)
                        if k >= 3:
                            x = memo2[4 * j + 3]
                            _poke(out_at, at + 2, x & 0xFFFFFFFF, np.int32)
                            if k == 4:
                                _poke(out_at, at + 3, x >> 32, np.int32)
                    else:
                        c = v >> 11
                        for i in range(k):
                            _poke(out_at, at + i, mids[c + i], np.int32)
                    m += k
                    p = q
                    continue
                # not kept yet: a part that is a token is most often that token, else its rank-BPE
                t = np.int64(-1)
                if ln <= max_len:
                    if ln <= MEDIUM:
                        t = _lookup(keys_at, ids_at, tdata_at, tstart_at, tlen_at, mask, data_at, p, ln, n_tokens)
                    else:
                        t = _probe(keys_at, ids_at, tdata_at, tstart_at, tlen_at, mask, data_at, p, ln, n_tokens,
                                   np.int64(h >> np.uint64(1)))
                if t >= 0 and whole[t] == 1:
                    _poke(out_at, at, t, np.int32)
                    k = np.int64(1)
                else:
                    if ln >= long_from:
                        k = _segment_long(data, p, ln, bkeys, bids, tdata, tstart, tlen, pair2, byte_id, max_len, out_at, at,
                                          n_tokens)
                    else:
                        k = _plain(data_at, p, ln, pair2_at, byte_at, bounds_at, rk_at, out_at, at, keys_at, ids_at,
                                   tdata_at, tstart_at, tlen_at, mask, n_tokens)
                    if t >= 0:
                        whole[t] = 1 if k == 1 else 2
                if ln <= MEDIUM:
                    if (memo_n if ln <= SHORT else memo2_n) >= MEMO_ENTRIES:
                        pass
                    elif (2 * (memo_n + 1) > (memo.shape[0] >> 1) if ln <= SHORT else
                          2 * (memo2_n + 1) > (memo2.shape[0] >> 2)) or mids_n + k > mids.shape[0]:
                        full = True  # grown after this word
                    else:
                        inline = k <= (2 if ln <= SHORT else 4)
                        for i in range(k):
                            x = np.int64(_peek(out_at, at + i, np.int32))
                            inline = inline and 0 <= x <= ID_BITS
                        x = np.int64(0)
                        if inline:
                            v = ln | (k << 5) | 1024 | (np.int64(_peek(out_at, at, np.int32)) << 11)
                            if k >= 2:
                                v |= np.int64(_peek(out_at, at + 1, np.int32)) << 37
                            if k >= 3:
                                x = np.int64(_peek(out_at, at + 2, np.int32))
                            if k == 4:
                                x |= np.int64(_peek(out_at, at + 3, np.int32)) << 32
                        else:
                            for i in range(k):
                                mids[mids_n + i] = _peek(out_at, at + i, np.int32)
                            v = ln | (k << 5) | (mids_n << 11)
                            mids_n += k
                        if ln <= SHORT:
                            memo[2 * j] = key
                            memo[2 * j + 1] = v
                            memo_n += 1
                            hot[2 * hj] = key
                            hot[2 * hj + 1] = v
                        else:
                            memo2[4 * j] = key
                            memo2[4 * j + 1] = key1
                            memo2[4 * j + 2] = v
                            memo2[4 * j + 3] = x
                            memo2_n += 1
                elif used >= PART_ENTRIES:
                    pass
                elif 2 * (used + 1) > slots.shape[0] or stored + 2 + ln + k > store.shape[0]:
                    full = True  # grown after this word
                else:
                    a = stored
                    store[a] = ln
                    store[a + 1] = k
                    for b in range(ln):
                        store[a + 2 + b] = data[p + b]
                    for b in range(k):
                        store[a + 2 + ln + b] = _peek(out_at, at + b, np.int32)
                    slots[np.uint64(j)] = (np.int64(h >> np.uint64(33)) << 32) | (a + 1)
                    used += 1
                    stored = a + 2 + ln + k
                m += k
                p = q
                if full:
                    break
            if p < e:
                break  # a cache is full: the word goes on from p once it is grown
            o += m
            lens[w] = m
            w += 1
            p = np.int64(-1)
    return o


@njit(cache=True, no_cfunc_wrapper=True)
def _splits(tdata, tstart, tlen, bkeys, bids, skip, up_to):
    """(token, left, right) of every split point of every token of at most ``up_to`` bytes
    whose two halves are tokens, ids in ``skip`` neither split nor parts; in token order, then
    left id order."""
    n_tokens = tlen.shape[0]
    byte_id = _full_array(256, -1, np.int64)  # one-byte halves need no lookup
    for t in range(n_tokens):
        if tlen[t] == 1 and not skip[t]:
            byte_id[tdata[tstart[t]]] = t
    keys_at, ids_at, tdata_at = _address(bkeys), _address(bids), _address(tdata)
    tstart_at, tlen_at = _address(tstart), _address(tlen)
    mask = np.uint64(bkeys.shape[0] - 1)
    out = _empty_array((1024, 3), np.int32)
    m = 0
    for t in range(n_tokens):
        n = np.int64(tlen[t])
        if skip[t] or n > up_to:
            continue
        s = tstart[t]
        first = m
        for k in range(1, n):
            a = byte_id[tdata[s]] if k == 1 else _lookup(keys_at, ids_at, tdata_at, tstart_at, tlen_at, mask, tdata_at, s, np.int64(k), n_tokens)
            if a < 0 or skip[a]:
                continue
            b = byte_id[tdata[s + k]] if k == n - 1 else _lookup(keys_at, ids_at, tdata_at, tstart_at, tlen_at, mask, tdata_at, s + k, n - k, n_tokens)
            if b < 0 or skip[b]:
                continue
            if m == out.shape[0]:
                grown = _empty_array((2 * m, 3), np.int32)
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


def segment(words, vocab: Vocab, *, long_from: int = SEGMENT_LONG) -> tuple[np.ndarray, np.ndarray]:
    """Token ids of every word under ``vocab`` (tiktoken's rank-BPE) as one flat int32 array
    plus offsets (len+1); words of ``long_from`` bytes or more take the heap (same result).
    Example: ``segment([b"00a"], Vocab.base())[0].tolist() == [256, 97]``.
    """
    flat, offsets = _segment_ids(words, vocab, long_from=long_from)
    return flat.astype(np.int32, copy=False), offsets


def _segment_ids(words, vocab: Vocab, *, long_from: int = SEGMENT_LONG, reference: bool = False,
                 threads: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``segment``, except that under the 256 single bytes the ids are the words' bytes
    themselves (uint8, no copy); ``reference``, ``threads``: see ``Segmenter``."""
    return Segmenter(*_token_arrays(vocab, 0), long_from=long_from, reference=reference,
                     threads=threads).ids(words, len(vocab.tokens))


def tiktoken_bpe(tokens: list[bytes]):
    """tiktoken's rank BPE of one piece under ``tokens`` (id = rank), with its ranks:
    ``(segment, ranks)``, ``segment(word)`` the word's ids (a word that is a token: that token,
    tiktoken's first step, without the call); None where this tiktoken lacks it or two tokens are
    the same bytes (or one is empty). Example: ``tiktoken_bpe([b"a", b"b", b"ab"])[0](b"ab") == [2]``."""
    import tiktoken

    ranks = {t: i for i, t in enumerate(tokens)}
    if len(ranks) != len(tokens) or b"" in ranks:
        return None
    enc = tiktoken.Encoding("toktok-segment", pat_str=r"[\s\S]+", mergeable_ranks=ranks, special_tokens={})
    piece = getattr(enc, "_encode_single_piece", None)  # (tiktoken 0.4 to 0.14 at least)
    if piece is None:
        return None
    get = ranks.get

    def segment(w: bytes) -> list[int]:
        t = get(w)
        return [t] if t is not None else list(piece(w))

    return segment, ranks


def splits_ready() -> bool:
    """Whether ``token_splits`` loads its kernels without importing Numba or compiling them
    (:func:`toktok._kernels.ready`); else a small run finds the splits in Python."""
    return _kernels.ready((_splits, _token_table))


def runs(off: np.ndarray, parts: int) -> list[int]:
    """Where ``parts`` runs of words of about equal bytes start (``off``: their offsets, len+1),
    and the number of words last: ascending, without repeats, at least ``[0, words]``.
    Example: ``runs(np.array([0, 1, 2, 3, 4]), 2) == [0, 2, 4]``."""
    cuts = np.searchsorted(off, np.linspace(off[0], off[-1], parts + 1)[1:-1]).tolist() if parts > 1 else []
    return sorted(set([0, *cuts, off.shape[0] - 1]))


class Segmenter:
    """``segment`` under the first n tokens of a vocabulary given as token bytes (``tdata``,
    ``tstart``, ``tlen``), for many n (the vocabulary as it was after each number of merges).
    ``reference``: a small run's (the pipeline's ``small``), which segments up to
    ``REFERENCE_WORDS`` words with tiktoken: a small run never compiles ``_segment``, and loads it
    only where Numba is loaded already and the cache holds it (``_kernels.ready``).
    Example: ``Segmenter(*_token_arrays(v, 0))([b"00a"], 256)[0].tolist() == [48, 48, 97]``."""

    def __init__(self, tdata: np.ndarray, tstart: np.ndarray, tlen: np.ndarray, *, long_from: int = SEGMENT_LONG,
                 reference: bool = False, threads: int | None = None):
        self.long_from = long_from
        self.reference = reference
        self.threads = threads  # (at most; None: a thread per core)
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
        # with Numba up and _segment cached (a small run whose loop is compiled), the kernel is
        # quicker: tiktoken is a Python call a word (the demo's 26,547 words: 0.06 s, 7 times)
        if self.reference and off.shape[0] - 1 <= REFERENCE_WORDS and not _kernels.ready((_segment, _token_table)):
            got = self._by_tiktoken(data, off, n)
            if got is not None:
                return got
        flat, lens = self._in_threads(data, off, n)
        offsets = np.zeros(lens.shape[0] + 1, np.int64)
        np.cumsum(lens, out=offsets[1:])
        return flat, offsets

    def _in_threads(self, data: np.ndarray, off: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
        """``_segment`` of the words, cut into runs of about equal bytes (at least
        ``THREAD_BYTES`` each), one thread each; the flat ids and lengths in word order. The ids
        go to arrays of one slot per byte (a word has no more ids than bytes; only the pages
        written are touched): the first run's to the result, each other run's to one of its
        own, copied behind the run before and freed."""
        out = np.empty(int(off[-1] - off[0]), np.int32)
        lens = np.empty(off.shape[0] - 1, np.int64)
        parts = min(self.threads or _cores(), int(off[-1] - off[0]) // THREAD_BYTES, off.shape[0] - 1)
        cuts = runs(off, parts)
        args = self.kernel_args(n)
        if len(cuts) <= 2:
            return out[: _segment(data, off, *args, out, lens)], lens
        bufs = [out] + [np.empty(int(off[cuts[p + 1]] - off[cuts[p]]), np.int32) for p in range(1, len(cuts) - 1)]

        def run(p: int) -> int:
            return self.run(data, off, args, cuts[p], cuts[p + 1], bufs[p], lens)

        with ThreadPoolExecutor(len(cuts) - 2) as ex:
            futs = [ex.submit(run, p) for p in range(1, len(cuts) - 1)]
            got = [run(0)] + [f.result() for f in futs]
        o = got[0]
        for p in range(1, len(got)):
            out[o : o + got[p]] = bufs[p][: got[p]]
            bufs[p] = None
            o += got[p]
        return out[:o], lens

    def kernel_args(self, n: int) -> tuple:
        """What :meth:`run` segments with under the first ``n`` tokens (every token's hash table
        built on the first call)."""
        if self._lookup is None:
            n_all = self.tables[1].shape[0]
            self._lookup = _token_table(*self.tables, n_all, n_all)
        return (*self.tables, n, self.long_from, *self._lookup)

    def kernels_segment(self, n: int) -> bool:
        """Whether :meth:`ids` segments words under the first ``n`` tokens with the kernel
        (:meth:`run`) whatever the words: not as their bytes, and not a small run's (which may
        take tiktoken)."""
        return not (n == 256 and self._bytes) and not self.reference

    @staticmethod
    def run(data: np.ndarray, off: np.ndarray, args: tuple, a: int, b: int, out: np.ndarray, lens: np.ndarray) -> int:
        """Words ``a`` up to ``b`` of ``data`` and ``off`` (:func:`.tokens._flatten`'s) segmented
        with ``args`` (:meth:`kernel_args`): their ids to the start of ``out`` (room for one a
        byte), their numbers of ids to ``lens[a:b]``; returns how many ids (without the GIL:
        runs of words segment in threads at once, each word's ids its own)."""
        lo, hi = int(off[a]), int(off[b])
        return _segment(data[lo:hi], off[a : b + 1] - lo, *args, out[: hi - lo], lens[a:b])

    def _by_tiktoken(self, data: np.ndarray, off: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray] | None:
        """``ids`` by tiktoken's own BPE of a piece, a word at a time (None where this tiktoken
        lacks it, or if two of the tokens are the same bytes)."""
        tdata, tstart, tlen = self.tables
        tb = tdata.tobytes()
        bpe = tiktoken_bpe([tb[s : s + ln] for s, ln in zip(tstart[:n].tolist(), tlen[:n].tolist())])
        if bpe is None:
            return None
        segment = bpe[0]
        lo = int(off[0])
        buf = data[lo : int(off[-1])].tobytes()
        ends = (off - lo).tolist()
        ids = [segment(buf[ends[i] : ends[i + 1]]) for i in range(len(ends) - 1)]
        lens = np.fromiter(map(len, ids), np.int64, len(ids))
        offsets = np.zeros(len(ids) + 1, np.int64)
        np.cumsum(lens, out=offsets[1:])
        flat = np.fromiter(itertools.chain.from_iterable(ids), np.int32, int(offsets[-1]))
        return flat, offsets

