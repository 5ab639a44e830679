"""The backtracking machine that runs a compiled pattern (:mod:`.program`) over UTF-8 bytes, and
the kernels around it: piece ends of documents (for tests and cuts) and counting into the per-thread
word tables the named scanners count into.

Leftmost-first, as ``regex`` matches: at each position the top-level alternatives are tried in
order (only those whose first set holds the char there), each one depth-first with an explicit
stack of entries ``[kind | pc << 4, pos, aux]``: a choice to come back to (``BT``), a greedy run
that gives back one char each time it is popped (``GIVE``: aux is where its minimum ends), a lazy
run that takes one more (``MORE``: aux counts its chars), the barrier of an atomic group or a
look-ahead (``BAR``), and where a round of a loop that can match nothing started (``ROUND``,
dropped when popped). Ending such a group cuts the stack back to its barrier; popping a barrier
means the group failed. A position where no alternative matches is skipped (its char is in no
piece), as ``findall`` skips it. The stack is a per-thread array; when it is full the kernel
returns and is called again with a bigger one, from the piece it was at.

Sets are looked up as :mod:`.sets` lays them out: an ASCII byte in a 256-entry table, other chars
decoded and looked up in blocks of 256 code points.
"""
from __future__ import annotations

import numpy as np

from ..._kernels import inlined, njit
from .program import (ASSERT, ATOMIC, BEGIN, BYTES, CHECK, END, GIVE, JMP, LAZY, LOOK, MARK, MATCH, NOT_LOOK, PEEK,
                      PEEKBACK, RUN, SET, SPLIT, TRIM)
from .shared import (_HIGHS, _count_piece, _ctz, _ld8, _letter_bits, _lower_bits, _other_bits, _probe,
                     _upper_bits)

BT, GIVEN, MORE, BAR, ROUND = 0, 1, 2, 3, 4
FULL = -2  # the stack is full


@inlined
def _mask(data, p, amask, idx, blocks):
    """(set bits, byte length) of the char at byte p (valid UTF-8)."""
    b0 = np.int64(data[p])
    if b0 < 0x80:
        return amask[b0], np.int64(1)
    if b0 < 0xE0:
        c = ((b0 & 0x1F) << 6) | (np.int64(data[p + 1]) & 0x3F)
        n = np.int64(2)
    elif b0 < 0xF0:
        c = ((b0 & 0x0F) << 12) | ((np.int64(data[p + 1]) & 0x3F) << 6) | (np.int64(data[p + 2]) & 0x3F)
        n = np.int64(3)
    else:
        c = (((b0 & 0x07) << 18) | ((np.int64(data[p + 1]) & 0x3F) << 12)
             | ((np.int64(data[p + 2]) & 0x3F) << 6) | (np.int64(data[p + 3]) & 0x3F))
        n = np.int64(4)
    return blocks[idx[c >> 8], c & 0xFF], n


@inlined
def _has(m, bit):
    return (m >> np.uint64(bit)) & np.uint64(1) != np.uint64(0)


@inlined
def _back(data, p):
    """The start of the char before byte p."""
    p -= 1
    while data[p] & 0xC0 == 0x80:
        p -= 1
    return p


@inlined
def _word_at(data, p, d0, e, amask, idx, blocks, wbit):
    """Whether the char at p is \\w (False outside d0..e)."""
    if p < d0 or p >= e:
        return False
    m, _ = _mask(data, p, amask, idx, blocks)
    return _has(m, wbit)


@inlined
def _assert(kind, data, pos, d0, e, amask, idx, blocks, wbit):
    if kind == 0:
        return pos == d0
    if kind == 1:
        return pos == e
    if kind == 2:
        return pos == e or (pos == e - 1 and data[pos] == 10)
    before = pos > d0 and _word_at(data, _back(data, pos), d0, e, amask, idx, blocks, wbit)
    after = _word_at(data, pos, d0, e, amask, idx, blocks, wbit)
    return (before != after) == (kind == 3)


@inlined
def _run_end(data, d64, base, p, e, bit, limit, amask, idx, blocks, sw):
    """(end, chars) of the run of up to ``limit`` (-1: any) chars of set ``bit`` from p; ``sw``:
    the set's ASCII chars are exactly the letters (1), the other chars (2, not letter, digit or
    whitespace), the capitals (3) or the small letters (4), skipped 8 bytes at a time (only when
    there is no limit)."""
    cnt = np.int64(0)
    while cnt != limit and p < e:
        if sw != 0:
            while True:
                w = _ld8(d64, data, base, p)
                if sw == 1:
                    b = _letter_bits(w)
                elif sw == 2:
                    b = _other_bits(w)
                elif sw == 3:
                    b = _upper_bits(w)
                else:
                    b = _lower_bits(w)
                t = np.int64(_ctz(~b & _HIGHS)) >> 3
                p += t
                cnt += t
                if t < 8 or p >= e:
                    break
            if p >= e:
                return e, cnt
        b0 = data[p]
        if b0 < 0x80:
            if not _has(amask[b0], bit):
                break
            p += 1
        else:
            m, n = _mask(data, p, amask, idx, blocks)
            if not _has(m, bit):
                break
            p += n
        cnt += 1
    return p, cnt


@inlined
def _push(stack, sp, kind, pc, pos, aux):
    stack[sp, 0] = kind | (pc << 4)
    stack[sp, 1] = pos
    stack[sp, 2] = aux
    return sp + 1


@inlined
def _run(ops, pc, pos, sp, amask, idx, blocks, swk, data, d64, base, e, stack):
    """The RUN op at ``pc``: (whether it matched, the position after it, the stack's top)."""
    bit = ops[pc, 1]
    lo = ops[pc, 2]
    mode = ops[pc, 4]
    limit = lo if mode == LAZY else ops[pc, 3]
    p0, cnt = _run_end(data, d64, base, pos, e, bit, limit, amask, idx, blocks, swk[bit] if limit < 0 else 0)
    if cnt < lo:
        return False, pos, sp
    if mode == TRIM:  # the char after the run is outside its set: one char back, unless at the end
        if p0 == e:
            return True, p0, sp
        return cnt > lo, _back(data, p0), sp
    if mode == GIVE and cnt > lo:
        mn = pos
        for _ in range(lo):
            _, n = _mask(data, mn, amask, idx, blocks)
            mn += n
        # one char to give back, which what follows cannot start with: nothing to come back to
        fb = ops[pc, 5]
        if not (cnt == lo + 1 and fb >= 0 and not _in_set(data, mn, e, amask, idx, blocks, fb)[0]):
            sp = _push(stack, sp, GIVEN, pc, p0, mn)
    elif mode == LAZY and cnt != ops[pc, 3]:
        sp = _push(stack, sp, MORE, pc, p0, cnt)
    return True, p0, sp


@inlined
def _literal(data, pos, e, lits, a, n):
    """Whether the literal ``lits[a:a+n]`` is at ``pos``."""
    if pos + n > e:
        return False
    for x in range(n):
        if data[pos + x] != lits[a + x]:
            return False
    return True


@inlined
def _in_set(data, pos, e, amask, idx, blocks, bit):
    """(whether the char at ``pos`` is in set ``bit``, its length); False at the end."""
    if pos >= e:
        return False, np.int64(0)
    m, n = _mask(data, pos, amask, idx, blocks)
    return _has(m, bit), n


@inlined
def _split(ops, pc, pos, sp, data, e, amask, idx, blocks, stack):
    """The SPLIT op at ``pc``: (the op to go on at, the stack's top): a way the next char cannot
    start is skipped, the second way is pushed only when both may match."""
    ga = ops[pc, 3]
    gb = ops[pc, 4]
    m = np.uint64(0)
    if (ga >= 0 or gb >= 0) and pos < e:
        m, _ = _mask(data, pos, amask, idx, blocks)
    if ga >= 0 and not _has(m, ga):
        return ops[pc, 2], sp
    if gb >= 0 and not _has(m, gb):
        return ops[pc, 1], sp
    return ops[pc, 1], _push(stack, sp, BT, ops[pc, 2], pos, 0)


@inlined
def _end_group(ops, pc, pos, sp, stack):
    """The END op at ``pc``: the stack cut back to its group's barrier; (whether the match goes
    on, where, the stack's top)."""
    t = sp - 1
    while stack[t, 0] & 15 != BAR:
        t -= 1
    kind = ops[pc, 1]
    if kind == ATOMIC:
        return True, pos, t
    if kind == LOOK:
        return True, stack[t, 1], t
    return False, pos, t


@inlined
def _give_back(fb, data, p, mn, e, amask, idx, blocks):
    """Where a greedy run that ends at p (its minimum at mn) ends once it gives chars back: one
    char back, or (``fb`` >= 0: the set what follows must start with) back to the last char of that
    set; (position, False) when no such char is left."""
    p = _back(data, p)
    if fb >= 0:
        while not _in_set(data, p, e, amask, idx, blocks, fb)[0]:
            if p <= mn:
                return p, False
            p = _back(data, p)
    return p, True


@inlined
def _backtrack(ops, sp, data, e, amask, idx, blocks, stack):
    """The newest stack entry that gives another way on: (op, position, the stack's top); op -1
    when there is none."""
    while sp > 0:
        sp -= 1
        kind = stack[sp, 0] & 15
        tpc = stack[sp, 0] >> 4
        tpos = stack[sp, 1]
        if kind == BT:
            return tpc, tpos, sp
        if kind == GIVEN:
            p, ok = _give_back(ops[tpc, 5], data, tpos, stack[sp, 2], e, amask, idx, blocks)
            if not ok:
                continue
            if p > stack[sp, 2]:
                stack[sp, 1] = p
                sp += 1
            return tpc + 1, p, sp
        if kind == MORE:
            inside, n = _in_set(data, tpos, e, amask, idx, blocks, ops[tpc, 1])
            if inside:
                cnt = stack[sp, 2] + 1
                if cnt != ops[tpc, 3]:
                    stack[sp, 1] = tpos + n
                    stack[sp, 2] = cnt
                    sp += 1
                return tpc + 1, tpos + n, sp
        elif kind == BAR and ops[tpc, 1] == NOT_LOOK:  # a barrier popped: its group failed
            return ops[tpc, 2], tpos, sp
    return np.int64(-1), np.int64(0), sp


@inlined
def _attempt(ops, lits, amask, idx, blocks, wbit, swk, data, d64, base, d0, e, pc, pos, stack):
    """The end of the match of the program from op ``pc`` at byte ``pos`` (document d0..e), -1
    when there is none, ``FULL`` when the stack is full (an op pushes at most one entry)."""
    sp = np.int64(0)
    cap = stack.shape[0]
    while True:
        if sp == cap:
            return FULL
        op = ops[pc, 0]
        ok = True
        if op == RUN:
            ok, pos, sp = _run(ops, pc, pos, sp, amask, idx, blocks, swk, data, d64, base, e, stack)
            if ops[pc, 4] == TRIM:
                if ok:
                    return pos
            pc += 1
            if ok and ops[pc, 0] == MATCH:
                return pos
        elif op == BYTES:
            ok = _literal(data, pos, e, lits, ops[pc, 1], ops[pc, 2])
            pos += ops[pc, 2]
            pc += 1
        elif op == SET:
            ok, n = _in_set(data, pos, e, amask, idx, blocks, ops[pc, 1])
            pos += n
            pc += 1
        elif op == SPLIT:
            pc, sp = _split(ops, pc, pos, sp, data, e, amask, idx, blocks, stack)
        elif op == JMP:
            pc = ops[pc, 1]
        elif op == MATCH:
            return pos
        elif op == PEEK:
            inside, _ = _in_set(data, pos, e, amask, idx, blocks, ops[pc, 1])
            ok = inside == (ops[pc, 2] == 0)
            pc += 1
        elif op == PEEKBACK:
            inside = False
            if pos > d0:
                inside, _ = _in_set(data, _back(data, pos), e, amask, idx, blocks, ops[pc, 1])
            ok = inside == (ops[pc, 2] == 0)
            pc += 1
        elif op == ASSERT:
            ok = _assert(ops[pc, 1], data, pos, d0, e, amask, idx, blocks, wbit)
            pc += 1
        elif op == BEGIN:
            sp = _push(stack, sp, BAR, pc, pos, 0)
            pc += 1
        elif op == END:
            ok, pos, sp = _end_group(ops, pc, pos, sp, stack)
            pc += 1
        elif op == MARK:
            sp = _push(stack, sp, ROUND, pc, pos, 0)
            pc += 1
        else:  # CHECK: the newest round of this loop
            t = sp - 1
            while stack[t, 0] != ROUND | (ops[pc, 3] << 4):
                t -= 1
            pc = ops[pc, 1] if pos != stack[t, 1] else ops[pc, 2]
        if not ok:
            pc, pos, sp = _backtrack(ops, sp, data, e, amask, idx, blocks, stack)
            if pc < 0:
                return np.int64(-1)


@inlined
def _chars_at(ops, lits, pc, stop, data, pos, e, amask, idx, blocks):
    """Whether ops pc..stop-1 (single chars and literals) match at ``pos``."""
    while pc < stop:
        if ops[pc, 0] == SET:
            inside, n = _in_set(data, pos, e, amask, idx, blocks, ops[pc, 1])
            if not inside:
                return False
            pos += n
        else:
            if not _literal(data, pos, e, lits, ops[pc, 1], ops[pc, 2]):
                return False
            pos += ops[pc, 2]
        pc += 1
    return True


@inlined
def _match_at(P, data, d64, base, i, d0, e, stack):
    """The end of the leftmost-first match at byte i, -1 if none, ``FULL``. An alternative of a
    simple shape (``alts[k, 2]``, ``program._shape``: one char, one run of a set, an optional char
    then a run, a run before a look-ahead of single chars) is matched without the machine, and a
    run from i is scanned once for the alternatives that start with a run of the same set
    (``\\s+(?!\\S)|\\s+``)."""
    ops, lits, amask, idx, blocks, alts, wbit, swk, first = P
    b0 = data[i]
    ascii = b0 < 0x80
    m0 = np.uint64(0)
    if not ascii:
        m0, _ = _mask(data, i, amask, idx, blocks)
    mb = np.int64(-1)  # the set of the last unlimited run scanned from i, its end and chars
    mp = np.int64(0)
    mc = np.int64(0)
    for k in range(alts.shape[0]):
        if ascii:  # the alternatives that may start with this byte
            a = first[b0, k]
            if a < 0:
                break
        else:
            a = k
            b = alts[a, 1]
            if b >= 0 and not _has(m0, b):
                continue
        pc = alts[a, 0]
        shape = alts[a, 2]
        if shape == 0:
            r = _attempt(ops, lits, amask, idx, blocks, wbit, swk, data, d64, base, d0, e, pc, i, stack)
            if r != -1:
                return r
            continue
        if shape == 3:  # one char of a set
            inside, n = _in_set(data, i, e, amask, idx, blocks, ops[pc, 1])
            if inside:
                return i + n
            continue
        p = i
        if shape == 2:  # an optional char first, kept
            inside, n = _in_set(data, i, e, amask, idx, blocks, ops[pc, 1])
            if inside:
                p += n
            pc += 1
        bit = ops[pc, 1]
        lim = ops[pc, 3]
        if p == i and lim < 0 and bit == mb:
            p0, cnt = mp, mc
        else:
            p0, cnt = _run_end(data, d64, base, p, e, bit, lim, amask, idx, blocks, swk[bit] if lim < 0 else 0)
            if p == i and lim < 0:
                mb, mp, mc = bit, p0, cnt
        lo = ops[pc, 2]
        if cnt < lo:
            continue
        if shape == 4:  # a run giving back chars until a look-ahead of single chars holds after it
            stop = ops[pc + 1, 2] - 1  # the look-ahead's END
            while True:
                if _chars_at(ops, lits, pc + 2, stop, data, p0, e, amask, idx, blocks):
                    return p0
                if cnt == lo:
                    break
                p0 = _back(data, p0)
                cnt -= 1
            continue
        if ops[pc, 4] != TRIM or p0 == e:
            return p0
        if cnt > lo:
            return _back(data, p0)
    return np.int64(-1)


@njit(cache=True, no_cfunc_wrapper=True, nogil=True, _nrt=False)
def _ends_kernel(ops, lits, amask, idx, blocks, alts, wbit, swk, first, data, d64, base, offsets, d, i, out, stack):
    """Piece (start, end) pairs of documents d.. from byte i on into ``out`` (rows), until it is
    full; returns (rows written, document, byte to resume at; document = len: done, -1 in the
    byte: the stack is full). The pattern's arrays come one by one (``Compiled.P``), as a kernel
    built ahead takes them."""
    P = (ops, lits, amask, idx, blocks, alts, wbit, swk, first)
    w = np.int64(0)
    nd = offsets.shape[0] - 1
    while d < nd:
        d0 = offsets[d]
        e = offsets[d + 1]
        while i < e:
            if w == out.shape[0]:
                return w, d, i
            j = _match_at(P, data, d64, base, i, d0, e, stack)
            if j == FULL:
                return w, d, np.int64(-1 - i)
            if j < 0:
                _, n = _mask(data, i, amask, idx, blocks)
                i += n
                continue
            out[w, 0] = i
            out[w, 1] = j
            w += 1
            i = j
        d += 1
        if d < nd:
            i = offsets[d]
    return w, d, i


@njit(cache=True, no_cfunc_wrapper=True, nogil=True, _nrt=False)
def _count_kernel(ops, lits, amask, idx, blocks, alts, wbit, swk, first, data, d64, base, offsets, d, i, hi, T, arena,
                  st, cbits, stack):
    """Count the pieces of documents d..hi-1 (document d from byte i on) into table T. Returns 0
    when done, 1 when T or the arena must grow, 2 when the stack must (resume at document
    st[0, 3], byte st[0, 4]). Pipelined by one piece as the named scanners' loop is."""
    P = (ops, lits, amask, idx, blocks, alts, wbit, swk, first)
    parts = T.shape[0] >> cbits
    while d < hi:
        d0 = offsets[d]
        e = offsets[d + 1]
        pn = np.int64(0)
        pi = np.int64(0)
        pk = np.int64(0)
        ph = np.uint64(0)
        ps = np.int64(0)
        pt = np.int64(0)
        while True:
            n = np.int64(0)
            key = np.int64(0)
            h = np.uint64(0)
            s = np.int64(0)
            t = np.int64(0)
            j = np.int64(-1)
            while i < e:
                j = _match_at(P, data, d64, base, i, d0, e, stack)
                if j >= 0:
                    break
                if j == FULL:
                    st[0, 3] = d
                    st[0, 4] = pi if pn else i
                    return 2
                _, c = _mask(data, i, amask, idx, blocks)
                i += c
            if i < e:
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

