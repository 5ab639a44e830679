"""The kernel that counts a regex's pieces with PCRE2's JIT: for each document, a check that it
holds no routed code point (:func:`toktok.count.pcre.plan`), then ``pcre2_jit_match_8`` called
from compiled code (by its symbol, resolved in the library loaded with ctypes) from where the
last piece ended, each piece's bytes counted in the thread's word table as the other scanners
count them (:mod:`toktok.count.scan.table`). After an empty piece the next search starts there
with ``PCRE2_NOTEMPTY_ATSTART``: the next piece is not empty there, as ``regex``'s ``findall``
goes on. A document whose pieces were found by ``regex`` instead (routed, or PCRE2 failed on it:
its match limit or JIT stack) comes back as spans and is counted from them."""
from __future__ import annotations

import numpy as np

from ..._kernels import _address, _peek, inlined, intrinsic, njit
from ..scan.swar import _HIGHS, _ld8
from ..scan.table import _bump_short, _home, _probe, _short_hash
from ..scan.table import _count_piece as _count_probed

_NOTEMPTY_ATSTART = np.int64(0x8)
_NOMATCH = -1
GROW, FALLBACK = 1, 3  # the kernel's returns besides 0 (done)


@intrinsic
def _jit_match(typingctx, code, subject, length, start, options, match_data, context):
    """``pcre2_jit_match_8(code, subject, length, start, options, match_data, context)``, each
    pointer an int64 address; its int32 return as int64."""
    from llvmlite import ir
    from numba.core import cgutils, types

    args = (code, subject, length, start, options, match_data, context)
    if not all(isinstance(a, types.Integer) for a in args):
        return None

    def codegen(context_, builder, signature, llargs):
        i8p, i64, i32 = ir.IntType(8).as_pointer(), ir.IntType(64), ir.IntType(32)
        fnty = ir.FunctionType(i32, [i8p, i8p, i64, i64, i32, i8p, i8p])
        fn = cgutils.get_or_insert_function(builder.module, fnty, "pcre2_jit_match_8")
        a = [context_.cast(builder, v, t, types.int64) for v, t in zip(llargs, signature.args)]
        rc = builder.call(fn, [builder.inttoptr(a[0], i8p), builder.inttoptr(a[1], i8p), a[2], a[3],
                               builder.trunc(a[4], i32), builder.inttoptr(a[5], i8p), builder.inttoptr(a[6], i8p)])
        return builder.sext(rc, i64)

    return types.int64(*args), codegen


@inlined
def _count_piece(T, arena, st, cbits, d64, data, base, a, n):
    """Count the piece data[a:a+n] in T once, as every scanner counts (an empty one too, as
    ``findall`` gives it); False when T or the arena must grow first."""
    if n == 0:
        key = np.int64(0)
        return _bump_short(T, st, cbits, _home(_short_hash(key), T.shape[0] >> cbits, cbits), key, n)
    key, h, s, t = _probe(T, d64, data, base, a, n, T.shape[0] >> cbits, cbits)
    return _count_probed(T, arena, st, cbits, d64, data, base, a, n, key, h, s, t)


@inlined
def _next(code, at0, d0, e, i, opts, md, mctx, ovec):
    """PCRE2's next piece in the document data[d0:e] from byte i: (its return code, the piece's
    start and end; i, i when the code is negative: no match or a failure)."""
    rc = _jit_match(code, at0 + d0, e - d0, i - d0, opts, md, mctx)
    if rc < 0:
        return rc, i, i
    return rc, d0 + np.int64(_peek(ovec, np.int64(0), np.uint64)), d0 + np.int64(_peek(ovec, np.int64(1), np.uint64))


@inlined
def _routed_in(data, d64, base, p, e, routed):
    """Whether data[p:e] holds a code point set in the bitmap ``routed`` (8 ASCII bytes at a time)."""
    while p < e:
        if p + 8 <= e and _ld8(d64, data, base, p) & _HIGHS == 0:
            p += 8
            continue
        b0 = np.int64(data[p])
        if b0 < 0x80:
            p += 1
            continue
        if b0 < 0xE0:
            c = ((b0 & 0x1F) << 6) | (np.int64(data[p + 1]) & 0x3F)
            p += 2
        elif b0 < 0xF0:
            c = ((b0 & 0x0F) << 12) | ((np.int64(data[p + 1]) & 0x3F) << 6) | (np.int64(data[p + 2]) & 0x3F)
            p += 3
        else:
            c = (((b0 & 0x07) << 18) | ((np.int64(data[p + 1]) & 0x3F) << 12)
                 | ((np.int64(data[p + 2]) & 0x3F) << 6) | (np.int64(data[p + 3]) & 0x3F))
            p += 4
        if (routed[c >> 3] >> (c & 7)) & 1:
            return True
    return False


@inlined
def _stop(st, d, at, opts, code):
    st[0, 3] = d
    st[0, 4] = at
    st[0, 6] = opts
    return code


@njit(cache=True, no_cfunc_wrapper=True, nogil=True, _nrt=False)
def _count_pcre(H, data, d64, base, offsets, d, i, opts, hi, T, arena, st, cbits, routed, spans, sd, sk):
    """Count the pieces of documents d..hi-1 (document d from byte i on, searched with match
    options ``opts``) into table T. ``H``: PCRE2's compiled code, match data, match context and
    the match data's ovector (addresses). Document ``sd`` is counted from rows sk.. of ``spans``
    (byte spans found by ``regex``). Returns 0 when done; ``GROW`` when T or the arena must grow,
    ``FALLBACK`` when document st[0, 3] must be split by ``regex`` from byte st[0, 4] on (match
    options st[0, 6]: a piece found there must not be empty); st[0, 7] the spans row to resume
    at."""
    code, md, mctx, ovec = H[0], H[1], H[2], H[3]
    at0 = _address(data)
    while d < hi:
        d0 = offsets[d]
        e = offsets[d + 1]
        if d == sd:
            for k in range(sk, spans.shape[0]):
                if not _count_piece(T, arena, st, cbits, d64, data, base, spans[k, 0], spans[k, 1] - spans[k, 0]):
                    st[0, 7] = k
                    return _stop(st, d, i, opts, GROW)
        else:
            if i == d0 and routed.shape[0] > 0 and _routed_in(data, d64, base, d0, e, routed):
                return _stop(st, d, d0, 0, FALLBACK)
            while i <= e:
                rc, a, z = _next(code, at0, d0, e, i, opts, md, mctx, ovec)
                if rc == _NOMATCH:
                    break
                if rc < 0:
                    return _stop(st, d, i, opts, FALLBACK)
                if not _count_piece(T, arena, st, cbits, d64, data, base, a, z - a):
                    return _stop(st, d, i, opts, GROW)
                i = z
                opts = _NOTEMPTY_ATSTART if z == a else np.int64(0)
        d += 1
        opts = np.int64(0)
        if d < hi:
            i = offsets[d]
    return 0


@njit(cache=True, no_cfunc_wrapper=True, nogil=True, _nrt=False)
def _spans_pcre(H, data, d64, base, offsets, d, i, opts, routed, out):
    """Piece (start, end) pairs of documents d.. (document d from byte i on, match options
    ``opts``) into ``out`` (rows) until it is full; returns (rows written, document, byte, match
    options to resume with; document = len: done), or document -1 when a document holds a routed
    code point or PCRE2 fails on it (the caller splits with ``regex`` instead)."""
    code, md, mctx, ovec = H[0], H[1], H[2], H[3]
    at0 = _address(data)
    w = np.int64(0)
    nd = offsets.shape[0] - 1
    while d < nd:
        d0 = offsets[d]
        e = offsets[d + 1]
        if i == d0 and routed.shape[0] > 0 and _routed_in(data, d64, base, d0, e, routed):
            return w, np.int64(-1), i, opts
        while i <= e:
            if w == out.shape[0]:
                return w, d, i, opts
            rc, a, z = _next(code, at0, d0, e, i, opts, md, mctx, ovec)
            if rc == _NOMATCH:
                break
            if rc < 0:
                return w, np.int64(-1), i, opts
            out[w, 0] = a
            out[w, 1] = z
            w += 1
            i = z
            opts = _NOTEMPTY_ATSTART if z == a else np.int64(0)
        d += 1
        opts = np.int64(0)
        if d < nd:
            i = offsets[d]
    return w, d, i, opts
