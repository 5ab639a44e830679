"""Segmentation: tiktoken's rank-BPE of words under a vocabulary (or under each of its prefixes).

``segment`` and ``Segmenter`` give each word's token ids (whole-piece lookup first, then the
lowest-rank pair, leftmost on ties); long words go through a heap (``_segment_long``).
``token_splits`` lists every split of a token into two tokens, for export's merges.
"""
from __future__ import annotations

import itertools
import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from .. import _kernels
from .._kernels import _address, _empty_array, _full_array, _grow, _mix, _zero_array, inlined, internal, njit
from ..vocab import Vocab
from .tokens import _flatten, _lookup, _token_arrays, _token_table

SEGMENT_LONG = 64  # words this long or longer are segmented with a heap (_segment_long)
#: A small run's Segmenter (``reference=True``) segments this many words or fewer with tiktoken
#: itself, compiled or not: tiktoken's BPE is the definition, so the ids are the same, and a
#: small run spends neither ~3 s compiling ``_segment`` nor the time to load it from the cache.
REFERENCE_WORDS = 200_000
#: Words of at least this many bytes in all are segmented by a thread per core, each taking a
#: run of them of about equal bytes (``_segment`` releases the GIL; each word's ids depend on
#: the word alone, so the ids are the same).
THREAD_BYTES = 4 << 20
#: A long word's parts (``_parted``) of at most this many bytes are segmented once per call and
#: their ids kept, in a cache of at most ``PART_ENTRIES`` parts (about 50 bytes each).
PART_CACHED = 128
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
def _segment_long(data, s, n, bkeys, bids, tdata, tstart, tlen, pair2, byte_id, max_len, out, o, n_tokens):
    """``_segment``'s rank-BPE of one long word ``data[s:s+n]`` (no whole-word match) in
    O(n log n): the parts are a linked list and the candidate pairs a min-heap of (rank, start),
    so the lowest rank, leftmost on ties, comes first, as in the plain loop. An entry is stale
    when the part's pair no longer has that rank: a pair only ever grows, so it never gets the
    same rank (the same bytes) back. A pair longer than the longest token is not looked up,
    which bounds each lookup. Writes the ids at ``out[o:]``; returns the number of parts.
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
        out[o + m] = tid[i]
        m += 1
        i = nxt[i]
    return m


@inlined
def _plain(data, s, n, pair2, byte_id, bounds, rk, out, o, keys_at, ids_at, tdata_at, tstart_at, tlen_at, mask,
           data_at, n_tokens):
    """Rank-BPE of ``data[s:s+n]`` (no whole-word lookup; ``bounds``/``rk`` hold ``n + 1``) by
    the plain loop, which rescans the word after each merge: the ids at ``out[o:]``; returns
    their number. (Inlined; the tables by address, as ``_lookup`` takes them.)"""
    big = np.int64(1) << 62
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
        return n
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
            r = _lookup(keys_at, ids_at, tdata_at, tstart_at, tlen_at, mask, data_at, bounds[bi], bounds[bi + 2] - bounds[bi], n_tokens)
            rk[bi] = r if r >= 0 else big
        if bi > 0:
            r = _lookup(keys_at, ids_at, tdata_at, tstart_at, tlen_at, mask, data_at, bounds[bi - 1], bounds[bi + 1] - bounds[bi - 1], n_tokens)
            rk[bi - 1] = r if r >= 0 else big
    for i in range(nb - 1):
        out[o + i] = _lookup(keys_at, ids_at, tdata_at, tstart_at, tlen_at, mask, data_at, bounds[i], bounds[i + 1] - bounds[i], n_tokens)
    return nb - 1


@internal
def _parted(data, s, n, inner, long_from, bkeys, bids, tdata, tstart, tlen, pair2, byte_id, max_len, bounds, rk,
            out, o, n_tokens, whole, slots, store, used):
    """Rank-BPE of one long word ``data[s:s+n]`` (no whole-word match) by its parts: the word is
    cut between two bytes that are adjacent in no token below ``n_tokens`` (``inner``: which
    byte pairs are), so no merge of the word's can ever join bytes across a cut, and its
    rank-BPE is that of each part, one after the other (the parts' merges interleave, each
    part's in its own order). A part of ``PART_CACHED`` bytes or fewer is segmented once per
    call: its bytes and ids are kept in ``store`` (at ``a``: its length, its number of ids, its
    bytes, its ids), found by its hash in ``slots`` (open addressing, half full at most: the
    hash's high bits above ``a + 1``; ``used``: parts, store), and copied after that. Longer
    parts take ``_plain`` or ``_segment_long`` as whole words do. Writes the ids at ``out[o:]``;
    returns their number and the cache's arrays (grown, or as they were)."""
    keys_at, ids_at, tdata_at = _address(bkeys), _address(bids), _address(tdata)
    tstart_at, tlen_at, data_at = _address(tstart), _address(tlen), _address(data)
    mask = np.uint64(bkeys.shape[0] - 1)
    low = (np.int64(1) << 32) - 1
    m = np.int64(0)
    p = s
    e = s + n
    while p < e:
        q = p + 1
        while q < e and inner[np.int64(data[q - 1]) * 256 + data[q]]:
            q += 1
        ln = q - p
        if q == e and p == s:  # one part: the whole word
            if n >= long_from or n >= bounds.shape[0]:
                return _segment_long(data, s, n, bkeys, bids, tdata, tstart, tlen, pair2, byte_id, max_len, out, o,
                                     n_tokens), slots, store
            return _plain(data, s, n, pair2, byte_id, bounds, rk, out, o, keys_at, ids_at, tdata_at, tstart_at,
                          tlen_at, mask, data_at, n_tokens), slots, store
        if ln == 1:
            out[o + m] = byte_id[data[p]]
            m += 1
            p = q
            continue
        if ln > PART_CACHED:
            if ln >= long_from or ln >= bounds.shape[0]:
                m += _segment_long(data, p, ln, bkeys, bids, tdata, tstart, tlen, pair2, byte_id, max_len, out, o + m,
                                   n_tokens)
            else:
                m += _plain(data, p, ln, pair2, byte_id, bounds, rk, out, o + m, keys_at, ids_at, tdata_at,
                            tstart_at, tlen_at, mask, data_at, n_tokens)
            p = q
            continue
        # a part that is a token is most often that token (its own rank-BPE: ``whole``)
        t = _lookup(keys_at, ids_at, tdata_at, tstart_at, tlen_at, mask, data_at, p, ln, n_tokens)
        if t >= 0:
            if whole[t] == 0:
                k = _plain(data, p, ln, pair2, byte_id, bounds, rk, out, o + m, keys_at, ids_at, tdata_at,
                           tstart_at, tlen_at, mask, data_at, n_tokens) if ln < long_from else \
                    _segment_long(data, p, ln, bkeys, bids, tdata, tstart, tlen, pair2, byte_id, max_len, out, o + m,
                                  n_tokens)
                whole[t] = 1 if k == 1 else 2
                if k != 1:
                    m += k
                    p = q
                    continue
            if whole[t] == 1:
                out[o + m] = t
                m += 1
                p = q
                continue
        h = np.uint64(0xCBF29CE484222325)
        for k in range(ln):
            h ^= np.uint64(data[p + k])
            h *= np.uint64(0x100000001B3)
        tag = np.int64(h >> np.uint64(33))  # 31 bits
        smask = np.uint64(slots.shape[0] - 1)
        i = _mix(np.int64(h >> np.uint64(1))) & smask
        hit = np.int64(-1)
        while slots[i] != 0:
            x = slots[i]
            if (x >> 32) == tag:
                a = (x & low) - 1
                if store[a] == ln:
                    same = True
                    for k in range(ln):
                        if store[a + 2 + k] != data[p + k]:
                            same = False
                            break
                    if same:
                        hit = a
                        break
            i = (i + np.uint64(1)) & smask
        if hit >= 0:
            k = store[hit + 1]
            c = hit + 2 + ln
            for j in range(k):
                out[o + m + j] = store[c + j]
            m += k
            p = q
            continue
        if ln >= long_from:
            k = _segment_long(data, p, ln, bkeys, bids, tdata, tstart, tlen, pair2, byte_id, max_len, out, o + m,
                              n_tokens)
        else:
            k = _plain(data, p, ln, pair2, byte_id, bounds, rk, out, o + m, keys_at, ids_at, tdata_at,
                       tstart_at, tlen_at, mask, data_at, n_tokens)
        if used[0] < PART_ENTRIES:
            if 2 * (used[0] + 1) > slots.shape[0]:  # twice the slots, rehashed
                old = slots
                slots = _zero_array(2 * old.shape[0], np.int64)
                smask = np.uint64(slots.shape[0] - 1)
                for r in range(old.shape[0]):
                    if old[r] != 0:
                        a = (old[r] & low) - 1
                        g = np.uint64(0xCBF29CE484222325)
                        for j in range(store[a]):
                            g ^= np.uint64(store[a + 2 + j])
                            g *= np.uint64(0x100000001B3)
                        j = _mix(np.int64(g >> np.uint64(1))) & smask
                        while slots[j] != 0:
                            j = (j + np.uint64(1)) & smask
                        slots[j] = old[r]
                i = _mix(np.int64(h >> np.uint64(1))) & smask
                while slots[i] != 0:
                    i = (i + np.uint64(1)) & smask
            a = used[1]
            if a + 2 + ln + k > store.shape[0]:
                store = _grow(store, a + 2 + ln + k)
            store[a] = ln
            store[a + 1] = k
            for j in range(ln):
                store[a + 2 + j] = data[p + j]
            for j in range(k):
                store[a + 2 + ln + j] = out[o + m + j]
            slots[i] = (tag << 32) | (a + 1)
            used[0] += 1
            used[1] = a + 2 + ln + k
        m += k
        p = q
    return m, slots, store


@njit(cache=True, no_cfunc_wrapper=True, nogil=True)
def _segment(data, offsets, tdata, tstart, tlen, n_tokens, long_from, bkeys, bids):
    """tiktoken's rank-BPE of every word: whole-word lookup, else merge the lowest-rank adjacent
    pair (leftmost on ties) until no adjacent pair is a token. Returns flat ids and lengths.
    Words of ``PARTED_FROM`` bytes or more go by their parts (``_parted``: cut where no merge can
    join, each part's ids found once per call), and a word or part of ``long_from`` bytes or more
    through ``_segment_long`` (the same result in O(n log n); the plain loop, ``_plain``, rescans
    the word after each merge).
    Only the first ``n_tokens`` tokens are used; ``bkeys``/``bids`` (``_token_table``) may hold
    more, so that one table serves every prefix of a vocabulary."""
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
    # the tables by address, for _lookup (no reference counts per lookup)
    keys_at, ids_at, tdata_at = _address(bkeys), _address(bids), _address(tdata)
    tstart_at, tlen_at = _address(tstart), _address(tlen)
    mask = np.uint64(bkeys.shape[0] - 1)
    data_at = _address(data)
    n_words = offsets.shape[0] - 1
    out = _empty_array(data.shape[0], np.int32)
    lens = _zero_array(n_words, np.int64)
    room = np.int64(PART_CACHED) + 2  # (_parted's parts of fewer bytes take _plain)
    bounds = _empty_array(room, np.int64)
    rk = _empty_array(room, np.int64)
    # the parts' cache (_parted), grown as it fills; its slots sized ahead for a distinct part per
    # 64 bytes (the bench's stage-2 words have one per ~115), as each rehash reads every part's
    # bytes again (the bench's 90.8 MB of stage-2 words: 0.21 of 2.8 G cycles, 0.08 sized ahead)
    cap = np.int64(1024)
    while cap < 2 * min(np.int64(PART_ENTRIES), data.shape[0] // 64):
        cap *= 2
    slots = _zero_array(cap, np.int64)
    whole = _zero_array(n_tokens, np.int8)  # a token's rank-BPE is itself: 1, is not: 2, not known yet: 0
    store = _empty_array(4096, np.int32)
    used = _zero_array(2, np.int64)
    o = np.int64(0)
    for w in range(n_words):
        s = offsets[w]
        e = offsets[w + 1]
        n = e - s
        if n == 0:
            continue
        t = _lookup(keys_at, ids_at, tdata_at, tstart_at, tlen_at, mask, data_at, s, n, n_tokens) if n <= max_len \
            else np.int64(-1)
        if t >= 0:
            out[o] = t
            o += 1
            lens[w] = 1
            continue
        if n >= PARTED_FROM and long_from < WHOLE:
            k, slots, store = _parted(data, s, n, inner, long_from, bkeys, bids, tdata, tstart, tlen, pair2, byte_id,
                                      max_len, bounds, rk, out, o, n_tokens, whole, slots, store, used)
            o += k
            lens[w] = k
            continue
        if bounds.shape[0] < n + 1:
            bounds = _empty_array(2 * (n + 1), np.int64)
            rk = _empty_array(2 * (n + 1), np.int64)
        k = _plain(data, s, n, pair2, byte_id, bounds, rk, out, o, keys_at, ids_at, tdata_at, tstart_at, tlen_at,
                   mask, data_at, n_tokens)
        o += k
        lens[w] = k
    return out[:o].copy(), lens


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


def _segment_ids(words, vocab: Vocab, *, long_from: int = SEGMENT_LONG, reference: bool = False
                 ) -> tuple[np.ndarray, np.ndarray]:
    """``segment``, except that under the 256 single bytes the ids are the words' bytes
    themselves (uint8, no copy); ``reference``: see ``Segmenter``."""
    return Segmenter(*_token_arrays(vocab, 0), long_from=long_from, reference=reference).ids(words, len(vocab.tokens))


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


class Segmenter:
    """``segment`` under the first n tokens of a vocabulary given as token bytes (``tdata``,
    ``tstart``, ``tlen``), for many n (the vocabulary as it was after each number of merges).
    ``reference``: a small run's (the pipeline's ``small``), which segments up to
    ``REFERENCE_WORDS`` words with tiktoken: a small run never compiles ``_segment``, and loads it
    only where Numba is loaded already and the cache holds it (``_kernels.ready``).
    Example: ``Segmenter(*_token_arrays(v, 0))([b"00a"], 256)[0].tolist() == [48, 48, 97]``."""

    def __init__(self, tdata: np.ndarray, tstart: np.ndarray, tlen: np.ndarray, *, long_from: int = SEGMENT_LONG,
                 reference: bool = False):
        self.long_from = long_from
        self.reference = reference
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
        if self._lookup is None:
            n_all = self.tables[1].shape[0]
            self._lookup = _token_table(*self.tables, n_all, n_all)
        flat, lens = self._in_threads(data, off, n)
        offsets = np.zeros(lens.shape[0] + 1, np.int64)
        np.cumsum(lens, out=offsets[1:])
        return flat, offsets

    def _in_threads(self, data: np.ndarray, off: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
        """``_segment`` of the words, cut into runs of about equal bytes (at least
        ``THREAD_BYTES`` each), one thread each; the flat ids and lengths in word order."""
        parts = min(_cores(), int(off[-1] - off[0]) // THREAD_BYTES, off.shape[0] - 1)
        if parts <= 1:
            return _segment(data, off, *self.tables, n, self.long_from, *self._lookup)
        cuts = np.searchsorted(off, np.linspace(off[0], off[-1], parts + 1)[1:-1]).tolist()
        cuts = sorted(set([0, *cuts, off.shape[0] - 1]))
        if len(cuts) <= 2:
            return _segment(data, off, *self.tables, n, self.long_from, *self._lookup)

        def run(p: int) -> tuple[np.ndarray, np.ndarray]:
            a, b = cuts[p], cuts[p + 1]
            lo, hi = int(off[a]), int(off[b])
            return _segment(data[lo:hi], off[a : b + 1] - lo, *self.tables, n, self.long_from, *self._lookup)

        with ThreadPoolExecutor(len(cuts) - 2) as ex:
            futs = [ex.submit(run, p) for p in range(1, len(cuts) - 1)]
            got = [run(0)] + [f.result() for f in futs]
        return np.concatenate([g[0] for g in got]), np.concatenate([g[1] for g in got])

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

