"""A parsed pattern (:mod:`.parse`) as a program for the backtracking machine of :mod:`.vm`.

Ops (rows of int64 ``[op, a, b, c, d, f]``, the next op is the next row unless said):

- ``MATCH``: the attempt succeeds where it is.
- ``BYTES a b``: the literal ``lits[a:a+b]`` (UTF-8) is next.
- ``SET a``: one char of set bit ``a``.
- ``RUN a b c d``: ``b`` to ``c`` (-1: no limit) chars of set bit ``a`` at once; ``d``: ``GIVE``
  greedy, giving back one char at a time on backtracking (one stack entry for the whole run; ``f``:
  the bit of the set of chars what follows must start with, to give back straight to such a char);
  ``KEEP`` greedy, giving back nothing (possessive, or when what follows can never match after a
  char of the set: see :func:`_keeps`); ``LAZY`` as few as possible, one more on backtracking;
  ``TRIM`` greedy and then one char given back unless the text ends there, the next op (a ``PEEK``
  that the char after is not in the set, then ``MATCH``) done with it: ``\\s+(?!\\S)`` (see
  :func:`_trims`).
- ``SPLIT a b c d``: try ``a``, on failure ``b``; ``c``, ``d``: the bits of the sets of chars
  each way must start with (-1: unknown), to skip a way the next char cannot start. ``JMP a``.
- ``ASSERT a``: a zero-width test (:data:`ASSERTS`). ``PEEK a b``: the next char is in set bit
  ``a`` (``b`` = 1: is not, or the text ends): a look-ahead of one char; ``PEEKBACK a b`` the same
  of the char before (a look-behind of one char).
- ``BEGIN a b`` ... ``END a``: an atomic group (``a`` = 0), a look-ahead (1) or a negative one (2);
  ``b`` is the op after ``END``.
- ``MARK`` ... ``CHECK a b c``: a round of a loop whose body can match nothing: ``MARK`` notes
  where the round starts, ``CHECK`` goes on at ``a`` when it consumed something, else at ``b``
  (the loop ends, as ``regex`` ends it on an empty round); ``c`` is its ``MARK``.

A pattern's top-level alternatives are separate programs (``alts``: first op, and the bit of the
set of chars the alternative can start with, -1 when it is not known), tried in order at each
position, only those whose first set holds the char there.
Example: ``compile_program(r"\\p{L}+|\\s").ops[0][0] == RUN``.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from . import sets as _sets
from .parse import Unsupported, parse

MATCH, BYTES, SET, RUN, SPLIT, JMP, ASSERT, PEEK, BEGIN, END, MARK, CHECK, PEEKBACK = range(13)
GIVE, KEEP, LAZY, TRIM = 0, 1, 2, 3
ATOMIC, LOOK, NOT_LOOK = 0, 1, 2
#: ASSERT's kinds: \A, \z, $ (the end or before a final newline), \b, \B.
ASSERTS = {"A": 0, "z": 1, "$": 2, "b": 3, "B": 4}
MAX_OPS = 4096
_WORD = r"\w"


@dataclass
class Program:
    """A compiled pattern: ``ops`` (rows of 5 ints), ``lits`` (UTF-8 of the literals), ``sets``
    (the ``regex`` text of each set bit), ``alts`` (first op, dispatch bit, and its shape, per
    top-level alternative: see :func:`_shape`), ``cols`` (the members of each bit, dispatch bits included)."""

    ops: list[list[int]] = field(default_factory=list)
    lits: bytearray = field(default_factory=bytearray)
    sets: list[str] = field(default_factory=list)
    cols: list[np.ndarray] = field(default_factory=list)
    alts: list[list[int]] = field(default_factory=list)
    wbit: int = 0  # the bit of \w, for \b and \B

    def bit(self, text: str) -> int:
        """The bit of set ``text`` (sets with the same members share one)."""
        if text in self.sets:
            return self.sets.index(text)
        col = _sets.members(text)
        for b, c in enumerate(self.cols):
            if np.array_equal(c, col):
                return b
        if len(self.cols) >= 64:
            raise Unsupported("the regex", "more than 64 distinct character sets")
        self.sets.append(text)
        self.cols.append(col)
        return len(self.cols) - 1

    def emit(self, op: int, a: int = 0, b: int = 0, c: int = 0, d: int = 0) -> int:
        if len(self.ops) >= MAX_OPS:
            raise Unsupported("the regex", f"more than {MAX_OPS} ops once its repetitions are unrolled")
        self.ops.append([op, a, b, c, d, -1])
        return len(self.ops) - 1

    def arrays(self) -> tuple:
        """What :mod:`.vm` reads: (ops int64[n, 6], lits uint8, byte table, block index,
        blocks, alts int64[k, 3])."""
        amask, idx, blocks = _sets.table(self.cols)
        return (np.array(self.ops, np.int64).reshape(-1, 6), np.frombuffer(bytes(self.lits) or b"\0", np.uint8).copy(),
                amask, idx, blocks, np.array(self.alts, np.int64).reshape(-1, 3))


def _set_text(node) -> str | None:
    """The ``regex`` text of a one-char node (a set, or a literal), else None."""
    if node[0] == "set":
        return node[1]
    if node[0] == "lit":
        import regex

        return regex.escape(chr(node[1]))
    return None


def _single(node) -> bool:
    return node[0] in ("lit", "set")


def simplify(node):
    """``node`` with one-char constructs as one set, asked of ``regex`` as a whole: an alternation
    of single chars (``(?:a|\\p{L})``), a single char after a one-char look-ahead
    (``(?:(?![a-z])\\p{L})``, camelCase patterns' idiom); and a set of one member as a literal."""
    k = node[0]
    if k == "set":
        col = _sets.members(node[1])
        if int(col.sum()) == 1:
            return ("lit", int(np.flatnonzero(col)[0]))
        return node
    if k in ("cat", "alt"):
        items = [simplify(n) for n in node[1]]
        if k == "alt":
            if all(_single(n) for n in items):
                return simplify(("set", "(?:" + "|".join(_set_text(n) for n in items) + ")"))
            factored = _factor(items)
            return simplify(factored) if factored is not None else ("alt", items)
        out: list = []
        for n in items:
            if _single(n) and out and out[-1][0] == "look" and _single(out[-1][1]):
                look = out.pop()
                sign = "=" if look[2] else "!"
                n = simplify(("set", f"(?:(?{sign}{_set_text(look[1])}){_set_text(n)})"))
            out.append(n)
        return out[0] if len(out) == 1 else ("cat", out)
    if k == "rep":
        return ("rep", simplify(node[1]), *node[2:])
    if k in ("look", "atomic", "behind"):
        return (k, simplify(node[1]), *node[2:])
    return node


def _factor(items: list):
    """``ab|ac|d`` as ``a(?:b|c)|d``: neighbouring alternatives that start with the same char share
    it (leftmost-first order kept: one char matches one way), or None when none do."""
    def parts(n):
        return list(n[1]) if n[0] == "cat" else [n]

    out, changed, k = [], False, 0
    while k < len(items):
        head = parts(items[k])[0] if parts(items[k]) else None
        if head is not None and not _single(head):  # a head with more than one way would reorder them
            head = None
        j = k + 1
        while head is not None and j < len(items) and parts(items[j])[:1] == [head]:
            j += 1
        if j - k > 1:
            rests = [parts(n)[1:] for n in items[k:j]]
            rest = [r[0] if len(r) == 1 else ("cat", r) for r in rests]
            out.append(("cat", [head, ("alt", rest)]))
            changed = True
        else:
            out.append(items[k])
        k = j
    if not changed:
        return None
    return out[0] if len(out) == 1 else ("alt", out)


def nullable(node) -> bool:
    """Whether ``node`` may match without consuming a char (assertions count as such)."""
    k = node[0]
    if k in ("lit", "set"):
        return False
    if k == "cat":
        return all(nullable(n) for n in node[1])
    if k == "alt":
        return any(nullable(n) for n in node[1])
    if k == "rep":
        return node[2] == 0 or nullable(node[1])
    if k == "atomic":
        return nullable(node[1])
    return True  # look, assert


def _emit(p: Program, node) -> None:
    k = node[0]
    if k == "lit":
        _emit_bytes(p, [node[1]])
    elif k == "set":
        p.emit(SET, p.bit(node[1]))
    elif k == "cat":
        run: list[int] = []
        for n in node[1]:
            if n[0] == "lit":
                run.append(n[1])
                continue
            if run:
                _emit_bytes(p, run)
                run = []
            _emit(p, n)
        if run:
            _emit_bytes(p, run)
    elif k == "alt":
        _emit_alt(p, node[1])
    elif k == "rep":
        _emit_rep(p, *node[1:])
    elif k == "look":
        text = _set_text(node[1])
        if text is not None:
            p.emit(PEEK, p.bit(text), 0 if node[2] else 1)
        else:
            _emit_group(p, LOOK if node[2] else NOT_LOOK, node[1])
    elif k == "atomic":
        _emit_group(p, ATOMIC, node[1])
    elif k == "behind":
        text = _set_text(node[1])
        if text is None:
            raise Unsupported("(?<=" if node[2] else "(?<!", "a look-behind of more than one char")
        p.emit(PEEKBACK, p.bit(text), 0 if node[2] else 1)
    elif k == "assert":
        if node[1] in "bB":
            p.wbit = p.bit(_WORD)
        p.emit(ASSERT, ASSERTS[node[1]])
    else:
        raise Unsupported("the regex", f"an unknown node {k}")


def _emit_bytes(p: Program, cps: list[int]) -> None:
    data = "".join(map(chr, cps)).encode("utf-8")
    p.emit(BYTES, len(p.lits), len(data))
    p.lits += data


def _emit_alt(p: Program, alts: list) -> None:
    jumps = []
    for n, alt in enumerate(alts):
        if n + 1 < len(alts):
            split = p.emit(SPLIT)
            p.ops[split][1] = split + 1
            _emit(p, alt)
            jumps.append(p.emit(JMP))
            p.ops[split][2] = len(p.ops)
        else:
            _emit(p, alt)
    for j in jumps:
        p.ops[j][1] = len(p.ops)


def _emit_group(p: Program, kind: int, body) -> None:
    begin = p.emit(BEGIN, kind)
    _emit(p, body)
    p.emit(END, kind)
    p.ops[begin][2] = len(p.ops)


def _emit_rep(p: Program, body, lo: int, hi: int, mode: str) -> None:
    text = _set_text(body)
    if text is not None:
        p.emit(RUN, p.bit(text), lo, hi, {"g": GIVE, "p": KEEP, "l": LAZY}[mode])
        return
    if mode == "p":
        _emit_group(p, ATOMIC, ("rep", body, lo, hi, "g"))
        return
    for _ in range(lo):
        _emit(p, body)
    empty = nullable(body)
    if hi < 0:  # L: SPLIT body, out; body; JMP L (a body that can match nothing: MARK body CHECK)
        top = p.emit(SPLIT)
        mark = p.emit(MARK) if empty else -1
        _emit(p, body)
        back = p.emit(CHECK, top, 0, mark) if empty else p.emit(JMP, top)
        out = len(p.ops)
        p.ops[top][1:3] = [top + 1, out] if mode == "g" else [out, top + 1]
        if empty:
            p.ops[back][2] = out
        return
    splits, checks = [], []
    for _ in range(hi - lo):
        s = p.emit(SPLIT)
        splits.append(s)
        mark = p.emit(MARK) if empty else -1
        _emit(p, body)
        if empty:
            checks.append(p.emit(CHECK, len(p.ops) + 1, 0, mark))
    out = len(p.ops)
    for s in splits:
        p.ops[s][1:3] = [s + 1, out] if mode == "g" else [out, s + 1]
    for c in checks:
        p.ops[c][2] = out


def _follow(p: Program, start: int) -> tuple[list, bool, bool]:
    """What may come from op ``start`` on: the first chars it may consume (a list of set bits
    and code points), whether it may reach a success consuming nothing and testing nothing, and
    whether it may reach one consuming nothing after a test (assertion, look-ahead)."""
    firsts: list = []
    free = tested = False
    seen: set[tuple[int, bool]] = set()
    todo = [(start, False)]
    while todo:
        pc, cond = todo.pop()
        if (pc, cond) in seen:
            continue
        seen.add((pc, cond))
        op, a, b, c, d, _ = p.ops[pc]
        if op in (MATCH, END) and not (op == END and a == ATOMIC):
            if cond:
                tested = True
            else:
                free = True
        elif op == END:
            todo.append((pc + 1, cond))
        elif op == BYTES:
            firsts.append(("cp", p.lits[a:a + b].decode("utf-8")[0]))
        elif op == SET:
            firsts.append(("bit", a))
        elif op == RUN:
            firsts.append(("bit", a))
            if b == 0:
                todo.append((pc + 1, cond))
        elif op == SPLIT:
            todo += [(a, cond), (b, cond)]
        elif op == JMP:
            todo.append((a, cond))
        elif op == MARK:
            todo.append((pc + 1, cond))
        elif op == CHECK:
            todo += [(a, cond), (b, cond)]
        elif op in (ASSERT, PEEK, PEEKBACK):
            todo.append((pc + 1, True))
        elif op == BEGIN:
            todo.append((pc + 1, cond) if a == ATOMIC else (b, True))
    return firsts, free, tested


def _first_members(p: Program, firsts: list) -> np.ndarray:
    out = np.zeros(0x110000, bool)
    for kind, x in firsts:
        if kind == "bit":
            out |= p.cols[x]
        else:
            out[ord(x)] = True
    return out


def _keeps(p: Program, pc: int) -> bool:
    """Whether the greedy run at ``pc`` never needs to give a char back: what follows it either
    always succeeds, or must start with a char outside the run's set (a char given back is one
    of the set, so it could not)."""
    firsts, free, tested = _follow(p, pc + 1)
    if free:
        return True
    if tested:
        return False
    return not bool((_first_members(p, firsts) & p.cols[p.ops[pc][1]]).any())


def _trims(p: Program, pc: int) -> bool:
    """Whether op ``pc`` is a greedy run of a set with no upper limit followed by a negative
    look-ahead of one char of the set's complement, then the match's end (``\\s+(?!\\S)``): the
    run (of all it can take) either ends the text and stands, or gives back exactly one char (the
    char after it is outside the set, so the look-ahead fails there; after one char less it is a
    char of the set, so it holds), or fails when it has no char to spare."""
    row = p.ops[pc]
    if row[0] != RUN or row[4] != GIVE or row[3] != -1 or pc + 2 >= len(p.ops):
        return False
    peek, end = p.ops[pc + 1], p.ops[pc + 2]
    if not (peek[0] == PEEK and peek[2] == 1 and end[0] == MATCH):
        return False
    seen, run = p.cols[peek[1]], p.cols[row[1]]  # the complement among the chars (no surrogates)
    return bool(np.array_equal(seen[:0xD800], ~run[:0xD800]) and np.array_equal(seen[0xE000:], ~run[0xE000:]))


def _shape(p: Program, pc: int) -> int:
    """How the machine may match the alternative from op ``pc`` without its stack: 1 when it is
    one run of a set that keeps its chars (or trims) and the end, 2 when it is an optional char
    of a set, then such a run, and the end (`` ?\\p{L}+``, ``[A-Z]?[a-z]+``), 3 when it is one
    char of a set and the end, 4 when it is a greedy run of a set, then a look-ahead of single
    chars and literals, and the end (``[A-Z]+(?=[A-Z][a-z])``: the run gives back one char at a
    time until the look-ahead holds), else 0."""
    def run(at: int) -> bool:
        row = p.ops[at]
        return row[0] == RUN and (row[4] == TRIM or (row[4] == KEEP and p.ops[at + 1][0] == MATCH))

    if run(pc):
        return 1
    row = p.ops[pc]
    if row[0] == SET and p.ops[pc + 1][0] == MATCH:
        return 3
    if row[0] == RUN and row[4] == KEEP and row[2:4] == [0, 1] and run(pc + 1):
        return 2
    if row[0] == RUN and row[4] == GIVE and row[3] == -1 and p.ops[pc + 1][:2] == [BEGIN, LOOK]:
        end = p.ops[pc + 1][2]  # the op after the look-ahead's END
        body = p.ops[pc + 2:end - 1]
        if p.ops[end][0] == MATCH and body and all(op[0] in (SET, BYTES) for op in body):
            return 4
    return 0


def compile_program(text: str) -> Program:
    """``text`` (a regex) compiled; raises :class:`Unsupported` when it is outside the subset."""
    tree = simplify(parse(text))
    alts = []  # the top-level alternatives, an alternation among them spliced in: (?:a|b)|c is a|b|c
    for alt in tree[1] if tree[0] == "alt" else [tree]:
        alts += alt[1] if alt[0] == "alt" else [alt]
    p = Program()
    for alt in alts:
        if nullable(alt):
            raise Unsupported("the regex", "an alternative can match the empty string")
        start = len(p.ops)
        _emit(p, alt)
        p.emit(MATCH)
        p.alts.append([start, -1, 0])
    for pc, row in enumerate(p.ops):
        if row[0] == RUN and row[4] == GIVE and (row[2] == row[3] or _keeps(p, pc)):
            row[4] = KEEP
        if row[0] == JMP and p.ops[row[1]][0] == MATCH:  # a jump to the end is the end
            row[0] = MATCH
    for pc, row in enumerate(p.ops):
        if _trims(p, pc):
            row[4] = TRIM
    for alt in p.alts:
        alt[2] = _shape(p, alt[0])
    _dispatch(p)
    return p


def _first_bit(p: Program, pc: int, known: dict) -> int:
    """The bit of the set of chars that what runs from op ``pc`` must start with (-1: it may
    consume nothing, or no bit is left); sets with the same members share a bit."""
    firsts, free, tested = _follow(p, pc)
    if free or tested:
        return -1
    col = _first_members(p, firsts)
    key = np.packbits(col).tobytes()
    if key not in known:
        if len(p.cols) >= 64:
            return -1
        known[key] = len(p.cols)
        p.cols.append(col)
    return known[key]


def _dispatch(p: Program) -> None:
    """A bit per top-level alternative: the chars it may start with; then per SPLIT, the first
    chars of each way (columns 3 and 4; the machine skips a way the next char cannot start), and
    per giving run those of what follows it (column 5), while bits are left."""
    known = {np.packbits(c).tobytes(): b for b, c in enumerate(p.cols)}
    for alt in p.alts:
        alt[1] = _first_bit(p, alt[0], known)
    for pc, row in enumerate(p.ops):
        if row[0] == SPLIT:
            row[3] = _first_bit(p, row[1], known)
            row[4] = _first_bit(p, row[2], known)
        elif row[0] == RUN and row[4] == GIVE:
            row[5] = _first_bit(p, pc + 1, known)
