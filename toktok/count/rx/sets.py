"""The character sets of a compiled pattern, asked of the ``regex`` package, and their table.

Each set of a pattern (a class, ``\\p{..}``, ``\\s``, a literal under ``(?i)``, ...) is matched by
``regex`` against a string of every code point (surrogates left out; the one the pattern checks
match their atoms against, :mod:`toktok.pattern_checks`), a few ms per set, so a set means
exactly what it means to ``regex``, the reference. The sets of a pattern become one bit each of
a two-level table: per code point a uint64 of the bits of the sets holding it, stored as blocks
of 256 code points (identical blocks shared: ~100 blocks for a pattern of \\p{L}, \\p{N}, \\s)
and, for bytes < 0x80, a 256-entry byte table (bytes >= 0x80: 0, decoded and looked up in the
blocks).
Example: ``members(r"\\p{N}")[ord("7")]``.
"""
from __future__ import annotations

import functools

import numpy as np
import regex

from ...pattern_checks import _code_points  # the string of every code point, the checks' own


@functools.lru_cache(maxsize=64)  # 1.1 MB each: a pattern has a few dozen sets
def members(text: str) -> np.ndarray:
    """Whether each code point (0..0x10FFFF) is one char matched by the ``regex`` fragment
    ``text`` (read-only bool array)."""
    found = np.zeros(0x110000 - 0x800, bool)  # by index in the string of every code point
    for m in regex.finditer(f"(?:{text})+", _code_points()):
        found[m.start():m.end()] = True
    out = np.zeros(0x110000, bool)
    out[:0xD800] = found[:0xD800]
    out[0xE000:] = found[0xD800:]
    out.flags.writeable = False
    return out


def table(columns: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The two-level table of ``columns`` (one bool array per bit, at most 64): (the byte table,
    uint64[256]; the block of each 256 code points, int32[0x1100]; the blocks, uint64[n, 256])."""
    if len(columns) > 64:
        raise ValueError("at most 64 sets")
    masks = np.zeros(0x110000, np.uint64)
    for bit, col in enumerate(columns):
        masks[col] |= np.uint64(1) << np.uint64(bit)
    blocks, idx = np.unique(masks.reshape(-1, 256), axis=0, return_inverse=True)
    amask = np.zeros(256, np.uint64)
    amask[:128] = masks[:128]
    return amask, idx.astype(np.int32).reshape(-1), np.ascontiguousarray(blocks)
