"""The long parts of the tokenizer files spelled by a compiled kernel: ``tokenizer.json``'s vocab
and merge lines (``lines``), one line per token or merge, each a few constants and slices of a
pool of names. At 131,072 tokens that is ~10 MB of text in ~0.07 s; a gather with NumPy took
0.4-0.8 s of a run there, most of it faulting in the pages of its ~200 MB of index arrays. And
the ``.tiktoken``'s ``base64 rank`` lines (``ranked_lines``).
Example: ``lines(b"ab", [0, 1], [1, 1], [[0], [1]], [b"<", 0, b">"], b",") == b"<a>,<b>"``.
"""
from __future__ import annotations

import binascii

import numpy as np

from .._kernels import njit, ready


@njit(cache=True, no_cfunc_wrapper=True)
def _lines(pool, at, length, rows, kinds, consts, cat, clen, sep_at, sep_len):
    """``lines`` with its fields as arrays: field j is ``consts[cat[j]:cat[j] + clen[j]]`` where
    ``kinds[j] < 0``, else the pool slice of row ``rows[i, kinds[j]]``; the separator is
    ``consts[sep_at:sep_at + sep_len]``."""
    n, f = rows.shape[0], kinds.shape[0]
    total = 0
    for i in range(n):
        for j in range(f):
            k = kinds[j]
            total += clen[j] if k < 0 else length[rows[i, k]]
    if n > 0:
        total += (n - 1) * sep_len
    out = np.empty(total, np.uint8)
    o = 0
    for i in range(n):
        if i > 0:
            for b in range(sep_len):
                out[o + b] = consts[sep_at + b]
            o += sep_len
        for j in range(f):
            k = kinds[j]
            if k < 0:
                s, m = cat[j], clen[j]
                for b in range(m):
                    out[o + b] = consts[s + b]
            else:
                r = rows[i, k]
                s, m = at[r], length[r]
                for b in range(m):
                    out[o + b] = pool[s + b]
            o += m
    return out


_BASE64 = np.frombuffer(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/", np.uint8)


@njit(cache=True, no_cfunc_wrapper=True)
def _ranked(data, start, length, keep, alphabet):
    """``ranked_lines`` with the tokens as one array: line i (where ``keep[i]``) is the standard
    base64 of ``data[start[i]:start[i] + length[i]]``, a space, i in decimal and a newline."""
    n = start.shape[0]
    total = 0
    for i in range(n):
        if keep[i]:
            d, x = 1, i
            while x >= 10:
                x //= 10
                d += 1
            total += (length[i] + 2) // 3 * 4 + d + 2
    out = np.empty(total, np.uint8)
    o = 0
    for i in range(n):
        if not keep[i]:
            continue
        s, m = start[i], length[i]
        j = 0
        while j < m:
            left = m - j
            v = np.int64(data[s + j]) << 16
            if left > 1:
                v |= np.int64(data[s + j + 1]) << 8
            if left > 2:
                v |= np.int64(data[s + j + 2])
            out[o] = alphabet[(v >> 18) & 63]
            out[o + 1] = alphabet[(v >> 12) & 63]
            out[o + 2] = alphabet[(v >> 6) & 63] if left > 1 else 61  # "="
            out[o + 3] = alphabet[v & 63] if left > 2 else 61
            o += 4
            j += 3
        out[o] = 32
        d, x = 1, i
        while x >= 10:
            x //= 10
            d += 1
        x = i
        for k in range(d, 0, -1):
            out[o + k] = 48 + x % 10
            x //= 10
        out[o + d + 1] = 10
        o += d + 2
    return out


def spelled_ready() -> bool:
    """Whether the kernels of ``lines`` and ``ranked_lines`` load cheaply (``_kernels.ready``)."""
    return ready((_lines, _ranked))


def ranked_lines(tokens: list[bytes], skip) -> bytes:
    """``base64(token) rank`` lines, one per token (its id the rank) except the ids in ``skip``:
    the ``.tiktoken`` text. Spelled by a kernel for a large vocabulary (0.01 s for 131,072 tokens
    against 0.075 s of a Python line each), as ``lines`` decides.
    Example: ``ranked_lines([b"A", b"hi"], ()) == b"QQ== 0\naGk= 1\n"``."""
    n = len(tokens)
    if n <= SMALL_LINES or (n <= UNLOADED_LINES and not ready((_ranked,))):
        b64 = binascii.b2a_base64
        return b"".join(b64(t, newline=False) + b" %d\n" % i for i, t in enumerate(tokens) if i not in skip)
    return _ranked_spelled(tokens, skip)


def _ranked_spelled(tokens: list[bytes], skip) -> bytes:
    """``ranked_lines`` by the kernel, whatever the number of tokens."""
    n = len(tokens)
    length = np.fromiter(map(len, tokens), np.int64, n)
    start = np.cumsum(length) - length
    keep = np.ones(n, np.bool_)
    keep[list(skip)] = False
    data = np.frombuffer(b"".join(tokens) or b"\0", np.uint8)  # (an empty buffer has no address to pass)
    return _ranked(data, start, length, keep, _BASE64).tobytes()


def lines(pool: bytes, at, length, rows, fields: list, sep: bytes) -> bytes:
    """Lines joined by ``sep``: line i is the concatenation of ``fields``, each a constant (bytes)
    or a column k of ``rows`` (int): the slice ``pool[at[r]:at[r] + length[r]]`` of ``r = rows[i][k]``.
    ``rows``: two dimensions, one row a line. Empty slices and constants are allowed; no rows
    give b"".
    Example: ``lines(b"ab", [0, 1], [1, 1], [[0], [1]], [b"<", 0, b">"], b",") == b"<a>,<b>"``."""
    if len(rows) <= SMALL_LINES or (len(rows) <= UNLOADED_LINES and not ready((_lines,))):  # no kernel to load
        return _joined(pool, at, length, rows, fields, sep)
    return _spelled(pool, at, length, rows, fields, sep)


def _spelled(pool: bytes, at, length, rows, fields: list, sep: bytes) -> bytes:
    """``lines`` by the kernel, whatever the number of lines."""
    consts, kinds, cat, clen = b"", [], [], []
    for f in fields:
        if isinstance(f, bytes):
            kinds.append(-1)
            cat.append(len(consts))
            clen.append(len(f))
            consts += f
        else:
            kinds.append(f)
            cat.append(0)
            clen.append(0)
    sep_at = len(consts)
    consts += sep
    # one type for every argument, whatever the caller passes: one compiled version
    i64 = lambda x: np.ascontiguousarray(x, np.int64)  # noqa: E731
    out = _lines(np.frombuffer(pool, np.uint8), i64(at), i64(length), np.ascontiguousarray(rows, np.int32),
                 i64(kinds), np.frombuffer(consts, np.uint8), i64(cat), i64(clen), sep_at, len(sep))
    return out.tobytes()


#: Up to this many lines ``lines`` joins them in Python (~10 ms for 8,192 lines of tokenizer.json):
#: quicker than loading the kernel from Numba's cache, and a small run loads none.
SMALL_LINES = 1 << 13
#: Where the kernel does not load cheaply (``_kernels.ready``: a small run, e.g. warm-started from
#: a large base), up to this many lines are joined in Python too (0.18 s for 100,000): quicker
#: than importing Numba and loading the kernel, and no compiling on a first run.
UNLOADED_LINES = 1 << 18


def _joined(pool: bytes, at, length, rows, fields: list, sep: bytes) -> bytes:
    """``lines`` in Python, for a few lines."""
    at, length = np.asarray(at).tolist(), np.asarray(length).tolist()
    parts = []
    for row in np.asarray(rows).tolist():
        parts.append(b"".join(f if isinstance(f, bytes) else pool[at[row[f]] : at[row[f]] + length[row[f]]]
                              for f in fields))
    return sep.join(parts)


__all__ = ["lines", "ranked_lines"]
