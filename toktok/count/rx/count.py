"""A compiled pattern as the counter's scanner: called as a named pattern's kernel is (the text,
its 64-bit words, the documents' offsets, the thread's table), it counts with ``vm._count_kernel``
and a backtracking stack of the calling thread's own, grown (and the count resumed) when a match
outgrows it. Example: ``scanner(r"\\p{L}+|\\s+|[^\\s\\p{L}]+") is not None``."""
from __future__ import annotations

import functools
import threading

import numpy as np

from . import Compiled, Unsupported, compile

_STACK = 256  # entries a thread's stack starts with


class Scanner:
    """The scanner of one compiled pattern (``compiled``); ``kernel`` is the Numba kernel it
    calls (for asking whether it is compiled)."""

    def __init__(self, compiled: Compiled) -> None:
        from .vm import _count_kernel

        self.compiled = compiled
        self.kernel = _count_kernel
        self._mine = threading.local()

    def __call__(self, data, d64, base, offsets, d, i, hi, ac, flags, fold, swar, T, arena, st, cbits) -> int:
        """Count documents d..hi-1 (document d from byte i on) into T as the named kernels do:
        0 when done, 1 when T or its arena must grow (resume at st[0, 3], st[0, 4])."""
        stack = getattr(self._mine, "stack", None)
        if stack is None:
            stack = self._mine.stack = np.empty((_STACK, 3), np.int64)
        while True:
            r = self.kernel(*self.compiled.P, data, d64, base, offsets, d, i, hi, T, arena, st, cbits, stack)
            if r != 2:
                return r
            stack = self._mine.stack = np.empty((2 * stack.shape[0], 3), np.int64)
            d, i = int(st[0, 3]), int(st[0, 4])


@functools.lru_cache(maxsize=16)
def scanner(regex_text: str) -> Scanner | None:
    """The compiled scanner of ``regex_text``, or None when it is outside the subset (see
    :func:`toktok.count.rx.why_not`)."""
    try:
        return Scanner(compile(regex_text))
    except Unsupported:
        return None
