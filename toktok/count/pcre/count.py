"""A regex PCRE2 counts (:func:`toktok.count.pcre.plan`) as the counter's scanner: called as a named
pattern's kernel is, it runs :func:`.kernel._count_pcre` with the calling thread's own PCRE2 match
state, and splits with ``regex`` the documents the kernel hands back (routed, or where PCRE2
failed), counting those pieces in the same table. Example: ``scanner(r"(a)\\1|.|\\n") is not None``
on a system with PCRE2's JIT."""
from __future__ import annotations

import functools
import threading

import numpy as np

from . import lib, matcher, plan
from .kernel import FALLBACK, GROW, _count_pcre

_NO_SPANS = np.zeros((0, 2), np.int64)
_symbols = threading.Lock()
_linked = False


def _link() -> None:
    """Make PCRE2's symbols known to the code Numba loads (once per process)."""
    global _linked
    with _symbols:
        if not _linked:
            from llvmlite import binding

            try:
                binding.load_library_permanently(lib.path())
            except RuntimeError:  # (ctypes loaded it RTLD_GLOBAL: its symbols are found all the same)
                pass
            _linked = True


class _Thread:
    """A thread's PCRE2 match state and where its last count stopped."""

    def __init__(self, code: lib.Code) -> None:
        self.state = lib.MatchState(code)
        self.H = np.array([code.address, self.state.match_data, self.state.context, self.state.ovector_address],
                          np.int64)
        self.pending: tuple | None = None  # (offsets, d, i, options, spans, first span row) to resume


class Scanner:
    """The scanner of one regex PCRE2 counts; ``kernel`` is the Numba kernel it calls."""

    def __init__(self, regex_text: str) -> None:
        self.plan = plan(regex_text)
        self.kernel = _count_pcre
        self._mine = threading.local()

    def _thread(self) -> _Thread:
        t = getattr(self._mine, "t", None)
        if t is None:
            _link()
            t = self._mine.t = _Thread(self.plan.code)
        return t

    def __call__(self, data, d64, base, offsets, d, i, hi, ac, flags, fold, swar, T, arena, st, cbits) -> int:
        """Count documents d..hi-1 (document d from byte i on) into T as the named kernels do:
        0 when done, 1 when T or its arena must grow (resume at st[0, 3], st[0, 4])."""
        from . import kernel

        t = self._thread()
        opts, spans, sd, sk = 0, _NO_SPANS, -1, 0
        p = t.pending
        if p is not None and p[0] is offsets and p[1] == d and p[2] == i:
            opts, spans, sk = p[3], p[4], p[5]
            sd = d if spans is not _NO_SPANS else -1
        t.pending = None
        while True:
            r = kernel._count_pcre(t.H, data, d64, base, offsets, d, i, opts, hi, T, arena, st, cbits,
                                   self.plan.routed, spans, sd, sk)
            d, i, opts = int(st[0, 3]), int(st[0, 4]), int(st[0, 6])
            if r == FALLBACK:
                spans, sd, sk = self._regex_spans(data, offsets, d, i, opts), d, 0
                continue
            if r == GROW:
                t.pending = (offsets, d, i, opts, spans if d == sd else _NO_SPANS, int(st[0, 7]) if d == sd else 0)
            return r

    def _regex_spans(self, data, offsets, d: int, i: int, opts: int) -> np.ndarray:
        """Byte spans of ``regex``'s pieces of document d from byte i on (``opts``: an empty piece
        right at i was counted already)."""
        d0, e = int(offsets[d]), int(offsets[d + 1])
        b = data[d0:e].tobytes()
        s = b.decode("utf-8")
        pos = len(b[: i - d0].decode("utf-8"))
        found = [m.span() for m in matcher(self.plan.regex).finditer(s, pos)]
        if opts and found and found[0] == (pos, pos):
            found = found[1:]
        cps = np.frombuffer(s.encode("utf-32-le"), np.uint32)
        at = np.zeros(len(cps) + 1, np.int64)
        np.cumsum(1 + (cps >= 0x80) + (cps >= 0x800) + (cps >= 0x10000), out=at[1:])
        return d0 + at[np.array(found, np.int64).reshape(-1, 2)]


    def spans(self, data: np.ndarray, offsets: np.ndarray, at: int | None = None) -> np.ndarray | None:
        """(start, end) byte pairs of the pieces of documents ``data[offsets[d]:offsets[d+1]]``
        (the first one searched from byte ``at`` on, its start still the document's), as
        ``toktok.count.rx.Compiled.spans`` gives them; None when a document holds a routed code
        point or PCRE2 fails on it (split it with ``regex``)."""
        from ..scan.table import _words64
        from . import kernel

        t = self._thread()
        out = np.empty((min(max(16, data.shape[0] // 2 + 1), 1 << 16), 2), np.int64)
        offsets = offsets.astype(np.int64)
        got, d, opts = [], 0, 0
        i = at if at is not None else (int(offsets[0]) if len(offsets) else 0)
        while 0 <= d < len(offsets) - 1:
            w, d, i, opts = kernel._spans_pcre(t.H, data, *_words64(data), offsets, d, i, opts, self.plan.routed, out)
            got.append(out[:w].copy())
        if d < 0:
            return None
        return np.concatenate(got) if got else np.zeros((0, 2), np.int64)


@functools.lru_cache(maxsize=16)
def scanner(regex_text: str) -> Scanner | None:
    """The PCRE2 scanner of ``regex_text``, or None when PCRE2 may not count it (see
    :func:`toktok.count.pcre.why_not`)."""
    return Scanner(regex_text) if not plan(regex_text).why else None
