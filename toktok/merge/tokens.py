"""Token bytes for the compiled kernels: the tokens as one byte buffer with starts and lengths, and
a hash table from bytes to token id.

``_token_arrays`` lays a ``Vocab`` out (with room for the tokens a merge run adds), ``_flatten``
does the same for the words; ``_token_table`` indexes the tokens by an FNV-1a hash of their bytes,
so that ``_lookup`` finds the id of a byte range (segmentation, export's splits) and
``_find_token`` the id of two tokens' concatenated bytes (a merge reusing an existing token).
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa

from .._kernels import _EMPTY, _full_array, _hash_range, _mix, _peek, _zero_array, inlined, internal, njit
from ..vocab import Vocab


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


@njit(cache=True, no_cfunc_wrapper=True)
def _token_table(tdata, tstart, tlen, n_tokens, max_tokens):
    cap = 16
    while cap < 2 * max_tokens:
        cap *= 2
    bkeys = _full_array(cap, _EMPTY, np.int64)
    bids = _zero_array(cap, np.int32)
    for t in range(n_tokens):
        _put_token(bkeys, bids, _hash_range(tdata, tstart[t], np.int64(tlen[t])), t)
    return bkeys, bids


@inlined
def _probe(bkeys, bids, tdata, tstart, tlen, mask, data, s, n, n_tokens, hk):
    """``_lookup`` of data[s:s+n] whose hash (``_hash_range``) ``hk`` the caller has already."""
    i = _mix(hk) & mask
    while True:
        key = _peek(bkeys, i, np.int64)
        if key == _EMPTY:
            return np.int64(-1)
        if key == hk:
            t = np.int64(_peek(bids, i, np.int32))
            if _peek(tlen, t, np.int32) == n:
                st = _peek(tstart, t, np.int64)
                same = True
                for k in range(n):
                    if _peek(tdata, st + k, np.uint8) != _peek(data, s + k, np.uint8):
                        same = False
                        break
                if same:
                    return t if t < n_tokens else np.int64(-1)
        i = (i + np.uint64(1)) & mask


@inlined
def _lookup(bkeys, bids, tdata, tstart, tlen, mask, data, s, n, n_tokens):
    """Id of the token with bytes data[s:s+n] if it is below ``n_tokens``, or -1. Every table
    and ``data`` are given by their addresses (``_address``) and ``mask`` is the table's size
    less one: called once or twice per word or split point, a helper taking the arrays would
    cost more in reference counts than the lookup itself (see ``_kernels._address``)."""
    h = np.uint64(0xCBF29CE484222325)  # _hash_range, on an address
    for k in range(n):
        h ^= np.uint64(_peek(data, s + k, np.uint8))
        h *= np.uint64(0x100000001B3)
    return _probe(bkeys, bids, tdata, tstart, tlen, mask, data, s, n, n_tokens, np.int64(h >> np.uint64(1)))


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
