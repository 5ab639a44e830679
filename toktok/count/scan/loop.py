"""The loop every named pattern's scanner runs: each piece's end from the pattern's ``piece_end``
(inlined), the piece counted in the thread's table (:mod:`.table`). A scanner is this loop with
its pattern's ``piece_end``, compiled as one kernel (``kernel``): one kernel taking the pattern as
a runtime parameter measured 1-3% more CPU time per pass. A piece is counted through
``table._probe`` and ``table._count_piece``, as the compiled patterns' loop (``rx.vm``) counts.

The kernels are compiled with Numba's reference counting off (``_nrt=False``): they allocate
nothing, and the atomic increments and decrements of the arrays' reference counts that Numba
otherwise emits around inlined helpers cost more than the scanning itself (and contend between
threads that share the text)."""
from __future__ import annotations

import numpy as np

from ..._kernels import njit
from .table import _count_piece, _probe

# The loop is inlined into each pattern's kernel, reference counting off as the kernel's.
_loop = njit(cache=True, forceinline=True, no_cpython_wrapper=True, no_cfunc_wrapper=True, _nrt=False)


@_loop
def _scan_loop(piece_end, data, d64, base, offsets, d, i, hi, ac, flags, fold, swar, T, arena, st, cbits):
    """Count the pieces of documents d..hi-1 (document d from byte i on) into table T, each piece
    ending where ``piece_end`` (a pattern's, inlined: one kernel per pattern) says. Returns 0
    when done, 1 when T or the arena must grow (resume at document st[0, 3], byte st[0, 4]).

    Software-pipelined by one piece: a piece's first table row is loaded as soon as its hash is
    known, and the piece is counted after the next one has been scanned, so a cache miss on a
    rare word overlaps with scanning instead of stalling it."""
    parts = T.shape[0] >> cbits
    while d < hi:
        e = offsets[d + 1]
        # the pending piece: length (0: none), start, key (short words), hash, home row, its key
        pn = np.int64(0)
        pi = np.int64(0)
        pk = np.int64(0)
        ph = np.uint64(0)
        ps = np.int64(0)
        pt = np.int64(0)
        while True:
            n = np.int64(0)
            j = i
            key = np.int64(0)
            h = np.uint64(0)
            s = np.int64(0)
            t = np.int64(0)
            if i < e:
                j = piece_end(data, d64, base, i, e, ac, flags, fold, swar)
                n = j - i
                key, h, s, t = _probe(T, d64, data, base, i, n, parts, cbits)
            if pn:
                ok = _count_piece(T, arena, st, cbits, d64, data, base, pi, pn, pk, ph, ps, pt)
                if not ok:
                    st[0, 3] = d
                    st[0, 4] = pi
                    return 1
            if n == 0:
                break
            pn, pi, pk, ph, ps, pt = n, i, key, h, s, t
            i = j
        d += 1
        if d < hi:
            i = offsets[d]
    return 0


#: Decorator of a named pattern's kernel: the same loop with the pattern's piece_end inlined.
kernel = njit(cache=True, no_cfunc_wrapper=True, nogil=True, _nrt=False)
