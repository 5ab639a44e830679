"""Rank-BPE continued: words' ids under a vocabulary, from their ids under a prefix of it.

tiktoken's rank-BPE merges the lowest-rank adjacent pair first, and every token of a prefix of a
vocabulary (the first n ids) ranks below every later one. So under the whole vocabulary a word
goes through the very merges it goes through under the prefix, in the same order, while any
pair of the prefix is left; from there on the later tokens merge. A word's ids under the whole
vocabulary are therefore its whole-piece lookup, else its rank-BPE taken up from its ids under
the prefix (``segment_further``, held equal to segmenting it again by the tests). Starting from
a later phase's "before" ids, this is a few lookups per token instead of a word's rank-BPE from
its bytes, which a superword phase's long words make costly (the run file's word gains).
Example: ``segment_further(words, *Segmenter(*tables)(words, n0), tables, n)``.
"""
from __future__ import annotations

import numpy as np

from .._kernels import _address, _empty_array, njit
from .rankbpe import _heap_parts
from .tokens import _flatten, _lookup, _token_table


@njit(cache=True, no_cfunc_wrapper=True, nogil=True)
def _segment_further(data, offsets, ids, id_offsets, tdata, tstart, tlen, n_tokens, bkeys, bids, out, lens):
    """Each word's rank-BPE under the first ``n_tokens`` tokens, taken up from its ids under a
    prefix of them (``ids[id_offsets[w]:id_offsets[w + 1]]``, whose bytes are the word's): the
    whole word looked up first, then its parts merged by ``rankbpe._heap_parts``. Writes the ids
    at ``out`` (room for as many as ``ids``) and each word's count at ``lens``; returns the
    number of ids."""
    max_len = np.int64(0)
    for t in range(n_tokens):
        max_len = max(max_len, np.int64(tlen[t]))
    n_words = offsets.shape[0] - 1
    room = np.int64(2)
    for w in range(n_words):
        room = max(room, id_offsets[w + 1] - id_offsets[w] + 1)
    big = np.int64(1) << 31
    pos = _empty_array(room + 1, np.int64)  # each part's first byte in the word; pos[m] = its length
    nxt = _empty_array(room, np.int64)  # the next part (m after the last)
    prv = _empty_array(room, np.int64)  # the previous part (-1 before the first)
    rank = _empty_array(room, np.int64)  # rank of (this part, next part); big: none; -1: not a part
    tid = _empty_array(room, np.int64)
    heap = _empty_array(3 * room, np.int64)  # (rank << 32) | part; stale entries stay until popped
    keys_at, ids_at, tdata_at = _address(bkeys), _address(bids), _address(tdata)
    tstart_at, tlen_at, data_at = _address(tstart), _address(tlen), _address(data)
    mask = np.uint64(bkeys.shape[0] - 1)
    o = np.int64(0)
    for w in range(n_words):
        s = offsets[w]
        n = offsets[w + 1] - s
        a = id_offsets[w]
        m = id_offsets[w + 1] - a
        if m <= 1:  # (a word of one token is that token under any larger vocabulary)
            for i in range(m):
                out[o + i] = ids[a + i]
            o += m
            lens[w] = m
            continue
        t = _lookup(keys_at, ids_at, tdata_at, tstart_at, tlen_at, mask, data_at, s, n, n_tokens) if n <= max_len \
            else np.int64(-1)
        if t >= 0:
            out[o] = t
            o += 1
            lens[w] = 1
            continue
        p = np.int64(0)
        for i in range(m):
            pos[i] = p
            tid[i] = ids[a + i]
            p += tlen[ids[a + i]]
            nxt[i] = i + 1
            prv[i] = i - 1
        pos[m] = n
        for i in range(m):
            r = np.int64(-1)
            if i + 1 < m:
                ln = pos[i + 2] - pos[i]
                if ln <= max_len:
                    r = _lookup(keys_at, ids_at, tdata_at, tstart_at, tlen_at, mask, data_at, s + pos[i], ln, n_tokens)
            rank[i] = r if r >= 0 else big
        _heap_parts(pos, tid, rank, nxt, prv, heap, m, s, max_len, keys_at, ids_at, tdata_at, tstart_at, tlen_at, mask,
                    data_at, n_tokens)
        c = np.int64(0)
        i = 0
        while i < m:
            out[o + c] = tid[i]
            c += 1
            i = nxt[i]
        o += c
        lens[w] = c
    return o


def segment_further(words, ids: np.ndarray, id_offsets: np.ndarray, tables: tuple,
                    n: int) -> tuple[np.ndarray, np.ndarray]:
    """The ids (int32, flat) and offsets of ``words`` (Arrow binary or a list of bytes) under the
    first ``n`` tokens of ``tables`` (``tdata``, ``tstart``, ``tlen``, as ``Segmenter`` takes
    them), given their ids under a prefix of those ``n`` (``ids``, ``id_offsets``: as
    ``Segmenter`` gives them): the same as segmenting them again."""
    tdata, tstart, tlen = tables[0], tables[1].astype(np.int64, copy=False), tables[2].astype(np.int32, copy=False)
    lookup = _token_table(tdata, tstart, tlen, np.int64(n), np.int64(n))
    data, off = _flatten(words)
    if off.shape[0] > 1 and off[0] != 0:
        data, off = data[off[0] : off[-1]], off - off[0]
    out = np.empty(max(int(id_offsets[-1] - id_offsets[0]), 1), np.int32)
    lens = np.empty(off.shape[0] - 1, np.int64)
    got = _segment_further(data, off, np.ascontiguousarray(ids, np.int32),
                           np.ascontiguousarray(id_offsets - id_offsets[0], np.int64), tdata, tstart, tlen, np.int64(n), *lookup,
                           out, lens)
    offsets = np.zeros(lens.shape[0] + 1, np.int64)
    np.cumsum(lens, out=offsets[1:])
    return out[:got], offsets


__all__ = ["segment_further"]
