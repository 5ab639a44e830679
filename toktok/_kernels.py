"""Compiled primitives shared by the counting and merge stages: hashing and growable arrays."""
from __future__ import annotations

import numpy as np
from numba import njit

_EMPTY = -1


@njit(cache=True, inline="always")
def _mix(key):
    x = np.uint64(key)
    x ^= x >> np.uint64(33)
    x *= np.uint64(0xFF51AFD7ED558CCD)
    x ^= x >> np.uint64(33)
    x *= np.uint64(0xC4CEB9FE1A85EC53)
    x ^= x >> np.uint64(33)
    return x


@njit(cache=True)
def _hash_range(data, s, n):
    """FNV-1a of data[s:s+n]; equals ``_bytes_hash`` of two tokens whose bytes concatenate to it."""
    h = np.uint64(0xCBF29CE484222325)
    for i in range(n):
        h ^= np.uint64(data[s + i])
        h *= np.uint64(0x100000001B3)
    return np.int64(h >> np.uint64(1))


@njit(cache=True)
def _grow(arr, need):
    if need <= arr.shape[0]:
        return arr
    cap = arr.shape[0] * 2
    while cap < need:
        cap *= 2
    out = np.empty(cap, arr.dtype)
    out[: arr.shape[0]] = arr
    return out
