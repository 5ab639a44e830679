"""A pre-tokenizer regex compiled to a scanner of UTF-8 bytes: any pattern within the subset counts
at compiled speed into the per-thread word tables the named scanners count into.

``parse`` reads the regex as the ``regex`` package does (the subset: see docs/patterns.md), ``sets``
asks ``regex`` for the members of each character set and lays them out as a two-level table of
bitmasks, ``program`` compiles the tree to ops for a backtracking machine (greedy single-set
runs consumed at once, giving chars back only where what follows could use them; a first-char
dispatch per top-level alternative), ``vm`` runs them (the machine, and the kernels that find piece
ends and count pieces). Outside the subset :func:`compile` raises :class:`Unsupported` with the
reason. Example: ``compile(r"\\p{L}+|\\s+|[^\\s\\p{L}]+").findall("ab, c") == ["ab", ",", " ", "c"]``.
"""
from __future__ import annotations

import functools

import numpy as np

from .parse import Unsupported
from .program import Program, compile_program


class Compiled:
    """A compiled pattern: ``regex`` (its text), ``program`` and ``P`` (the arrays and the \\w bit
    the kernels read, passed one by one). :meth:`spans` and :meth:`findall` run it over documents."""

    def __init__(self, text: str, program: Program) -> None:
        self.regex = text
        self.program = program
        ops, lits, amask, idx, blocks, alts = program.arrays()
        self.P = (ops, lits, amask, idx, blocks, alts, np.int64(program.wbit), _swar_kinds(program),
                  _ascii_alts(program))

    def spans(self, data: np.ndarray, offsets: np.ndarray, at: int | None = None) -> np.ndarray:
        """(start, end) byte pairs of the pieces of documents ``data[offsets[d]:offsets[d+1]]``
        (the first one searched from byte ``at`` on, its start still where ``\\A`` holds)."""
        from .shared import _words64
        from .vm import _ends_kernel

        out = np.empty((min(max(16, data.shape[0] // 2 + 1), 1 << 16), 2), np.int64)
        stack = np.empty((1024, 3), np.int64)
        got, d = [], 0
        i = at if at is not None else (int(offsets[0]) if len(offsets) else 0)
        offsets = offsets.astype(np.int64)
        while d < len(offsets) - 1:
            w, d, i = _ends_kernel(*self.P, data, *_words64(data), offsets, d, i, out, stack)
            got.append(out[:w].copy())
            if i < 0:
                i = -1 - i
                stack = np.empty((2 * stack.shape[0], 3), np.int64)
        return np.concatenate(got) if got else np.zeros((0, 2), np.int64)

    def findall(self, text: str) -> list[str]:
        """The pieces of ``text`` (as ``regex``'s whole matches)."""
        b = text.encode("utf-8")
        data = np.frombuffer(b, np.uint8) if b else np.zeros(1, np.uint8)
        spans = self.spans(data, np.array([0, len(b)], np.int64))
        return [b[a:z].decode("utf-8") for a, z in spans.tolist()]


_LETTERS = np.array([chr(c).isascii() and chr(c).isalpha() for c in range(128)])
_OTHER = np.array([not (chr(c).isalnum() or c in (9, 10, 11, 12, 13, 32)) for c in range(128)])
_UPPER = np.array([65 <= c <= 90 for c in range(128)])
_LOWER = np.array([97 <= c <= 122 for c in range(128)])


def _ascii_alts(program: Program) -> np.ndarray:
    """Per ASCII byte, the top-level alternatives that may start with it, in order, then -1 (the
    machine tries only those at such a byte, without testing each one's first set)."""
    k = len(program.alts)
    out = np.full((128, k + 1), -1, np.int64)
    for b in range(128):
        ways = [a for a, (_, bit, _) in enumerate(program.alts) if bit < 0 or program.cols[bit][b]]
        out[b, : len(ways)] = ways
    return out


def _swar_kinds(program: Program) -> np.ndarray:
    """Per set bit: 1 when its ASCII members are [A-Za-z], 2 when they are the chars neither
    letter, digit nor whitespace ([\t-\r ]), 3 [A-Z], 4 [a-z], else 0 (see ``vm._run_end``)."""
    out = np.zeros(64, np.int64)
    for bit, col in enumerate(program.cols):
        if np.array_equal(col[:128], _LETTERS):
            out[bit] = 1
        elif np.array_equal(col[:128], _OTHER):
            out[bit] = 2
        elif np.array_equal(col[:128], _UPPER):
            out[bit] = 3
        elif np.array_equal(col[:128], _LOWER):
            out[bit] = 4
    return out


@functools.lru_cache(maxsize=32)
def _compiled(text: str) -> Compiled | Unsupported:
    try:
        return Compiled(text, compile_program(text))
    except Unsupported as e:
        return e


def compile(text: str) -> Compiled:
    """``text`` compiled (cached per process); raises :class:`Unsupported` outside the subset."""
    got = _compiled(text)
    if isinstance(got, Unsupported):
        raise got
    return got


def why_not(text: str) -> str | None:
    """Why ``text`` is outside the subset (None: it compiles)."""
    got = _compiled(text)
    return str(got) if isinstance(got, Unsupported) else None


__all__ = ["Compiled", "Unsupported", "compile", "why_not"]
