"""A pre-tokenizer regex read into a tree, as the ``regex`` package (version 0 behaviour) reads it.

The tree's nodes are tuples: ``("lit", cp)`` one code point, case-sensitive; ``("set", text)`` one
char of the set that the ``regex`` fragment ``text`` matches (a class, an escape such as ``\\p{L}``,
``.``, a literal under ``(?i)``: its members are asked of ``regex`` itself, :mod:`.sets`);
``("cat", [..])``, ``("alt", [..])``; ``("rep", node, min, max, mode)`` (max -1: unbounded;
mode ``"g"`` greedy, ``"l"`` lazy, ``"p"`` possessive); ``("look", node, positive)`` a look-ahead;
``("atomic", node)``; ``("behind", node, positive)`` a look-behind (of one char, once compiled);
``("assert", kind)`` with kind ``A`` (text start), ``z`` (text end), ``$``
(end, or before a final newline), ``b``/``B`` (a word boundary or not). Capturing groups are read as
plain groups: a piece is a whole match.

Anything else raises :class:`Unsupported` with the construct and why (the counter then takes the
general path): look-behinds of more than one char, backreferences, flags other than ``i``, nested classes and set
operations, multi-char escapes (``\\X``, ``\\R``), ``\\G``, ``\\K``, conditionals, ....
Example: ``parse(r"a|\\s+")[0] == "alt"``.
"""
from __future__ import annotations

import re

import regex


class Unsupported(Exception):
    """A construct outside the compiled subset: ``construct`` (as written) and ``why``."""

    def __init__(self, construct: str, why: str) -> None:
        super().__init__(f"{construct}: {why}")
        self.construct, self.why = construct, why


_SET_ESCAPES = set("dDsSwW")
_LITERAL_ESCAPES = {"a": 7, "f": 12, "n": 10, "r": 13, "t": 9, "v": 11}
_INTERVAL = re.compile(r"\{(\d*)(?:(,)(\d*))?\}")
_FLAGS = re.compile(r"\(\?([a-zA-Z]*)(?:-([a-zA-Z]*))?([:)])")
_HEX = {"x": 2, "u": 4, "U": 8}


class _Parser:
    def __init__(self, text: str) -> None:
        self.s, self.i = text, 0
        self.fold = False  # case-insensitive here

    def error(self, construct: str, why: str) -> Unsupported:
        return Unsupported(construct, why)

    def parse(self):
        m = _FLAGS.match(self.s)
        if m and m.group(3) == ")" and m.group(2) is None and set(m.group(1)) == {"i"}:
            self.fold = True  # (?i) at the start: the whole pattern
            self.i = m.end()
        node = self.alternation()
        if self.i < len(self.s):
            raise self.error(self.s[self.i], "an unbalanced )")
        return node

    def alternation(self):
        alts = [self.sequence()]
        while self.i < len(self.s) and self.s[self.i] == "|":
            self.i += 1
            alts.append(self.sequence())
        return alts[0] if len(alts) == 1 else ("alt", alts)

    def sequence(self):
        items = []
        while self.i < len(self.s) and self.s[self.i] not in "|)":
            atom = self.atom()
            items.append(self.quantified(atom))
        return items[0] if len(items) == 1 else ("cat", items)

    def quantified(self, atom):
        s = self.s
        if self.i >= len(s) or s[self.i] not in "*+?{":
            return atom
        start = self.i
        c = s[self.i]
        if c == "{":
            m = _INTERVAL.match(s, self.i)
            if not m or (not m.group(1) and not m.group(3)):
                return atom  # a literal {, read by the next atom
            lo = int(m.group(1) or 0)
            hi = lo if m.group(2) is None else (int(m.group(3)) if m.group(3) else -1)
            if 0 <= hi < lo:
                raise self.error(m.group(0), "a repetition whose maximum is below its minimum")
            self.i = m.end()
        else:
            lo, hi = {"*": (0, -1), "+": (1, -1), "?": (0, 1)}[c]
            self.i += 1
        mode = "g"
        if self.i < len(s) and s[self.i] in "?+":
            mode = "l" if s[self.i] == "?" else "p"
            self.i += 1
        if atom[0] in ("assert", "look"):
            raise self.error(s[start:self.i], "a repetition of an assertion")
        if self.i < len(s) and (s[self.i] in "*+?" or _INTERVAL.match(s, self.i)):
            raise self.error(s[start:self.i + 1], "a repetition of a repetition; wrap it in (?:...)")
        return ("rep", atom, lo, hi, mode)

    def atom(self):
        s, i = self.s, self.i
        c = s[i]
        if c == "(":
            return self.group()
        if c == "[":
            return self.klass()
        if c == "\\":
            return self.escape()
        if c in "*+?":
            raise self.error(c, "a repetition of nothing")
        self.i += 1
        if c == ".":
            return ("set", "(?i:.)" if self.fold else ".")
        if c == "^":
            return ("assert", "A")
        if c == "$":
            return ("assert", "$")
        return self.literal(ord(c))

    def literal(self, cp: int):
        if self.fold:
            return ("set", f"(?i:{regex.escape(chr(cp))})")
        return ("lit", cp)

    def group(self):
        s, i = self.s, self.i
        if s.startswith("(?", i):
            rest = s[i + 2:i + 4]
            if rest.startswith(("<=", "<!")):  # a look-behind: of one char only (checked when compiled)
                self.i = i + 4
                return ("behind", self.body(), rest[1] == "=")
            if rest[:1] in (":", "=", "!", ">"):
                kind = rest[:1]
                self.i = i + 3
                body = self.body()
                if kind == ":":
                    return body
                if kind == ">":
                    return ("atomic", body)
                return ("look", body, kind == "=")
            if rest.startswith(("P<", "<")) and not rest.startswith(("<=", "<!")):
                close = s.find(">", i)
                if close < 0:
                    raise self.error(s[i:i + 4], "an unclosed group name")
                self.i = close + 1
                return self.body()
            m = _FLAGS.match(s, i)
            if not m:
                raise self.error(s[i:i + 3], "a group construct outside the subset (comments, conditionals, "
                                             "recursion, ...)")
            on, off = set(m.group(1)), set(m.group(2) or "")
            if (on | off) - {"i"} or m.group(3) == ")":
                raise self.error(m.group(0), "a flag other than a scoped (?i:...) or a leading (?i)")
            self.i = m.end()
            saved = self.fold
            self.fold = "i" in on or (saved and "i" not in off)
            body = self.body()
            self.fold = saved
            return body
        self.i = i + 1
        return self.body()

    def body(self):
        node = self.alternation()
        if self.i >= len(self.s) or self.s[self.i] != ")":
            raise self.error(self.s[-10:], "an unclosed group")
        self.i += 1
        return node

    def escape(self):
        s, i = self.s, self.i
        if i + 1 >= len(s):
            raise self.error("\\", "a lone backslash at the end")
        e = s[i + 1]
        if e in "AzbB":
            self.i = i + 2
            return ("assert", e)
        if e == "Z":
            self.i = i + 2
            return ("assert", "z")  # the regex package's \Z is the text's end
        text = self.escape_text(i, in_class=False)
        self.i = i + len(text)
        if e in _SET_ESCAPES or e in "pP":
            return ("set", f"(?i:{text})" if self.fold else text)
        return self.literal(self.escape_cp(text))

    def escape_text(self, i: int, in_class: bool) -> str:
        """The escape at ``i`` as written (checked to be one the subset reads)."""
        s = self.s
        e = s[i + 1] if i + 1 < len(s) else ""
        if not e:
            raise self.error("\\", "a lone backslash at the end")
        if e in "pP":
            if i + 2 < len(s) and s[i + 2] == "{":
                close = s.find("}", i + 3)
                if close < 0:
                    raise self.error(s[i:i + 4], "an unclosed property name")
                return s[i:close + 1]
            return s[i:i + 3]
        if e in _HEX:
            m = re.compile("[0-9a-fA-F]{%d}" % _HEX[e]).match(s, i + 2)
            if not m:
                raise self.error(s[i:i + 4], "a hex escape of another length")
            return s[i:m.end()]
        if e in _SET_ESCAPES or e in _LITERAL_ESCAPES or not e.isalnum():
            return s[i:i + 2]
        raise self.error(s[i:i + 2], "an escape outside the subset (backreferences, \\X, \\R, \\G, \\K, "
                                     "named characters, octal, ...)")

    @staticmethod
    def escape_cp(text: str) -> int:
        e = text[1]
        if e in _HEX:
            return int(text[2:], 16)
        if e in _LITERAL_ESCAPES:
            return _LITERAL_ESCAPES[e]
        return ord(e)

    def klass(self):
        s, start = self.s, self.i
        j = start + 1
        if j < len(s) and s[j] == "^":
            j += 1
        if j < len(s) and s[j] == "]":
            j += 1
        while j < len(s):
            c = s[j]
            if c == "\\":
                j += len(self.escape_text(j, in_class=True))
            elif c == "[" and s.startswith(("[:", "[=", "[."), j):
                raise self.error(s[j:j + 8], "a POSIX class, outside the subset; use \\p{...}")
            elif s.startswith(("&&", "--", "||", "~~"), j):
                raise self.error(s[j:j + 2], "a set operator inside a class; escape it")
            elif c == "]":
                self.i = j + 1
                text = s[start:j + 1]
                return ("set", f"(?i:{text})" if self.fold else text)
            else:
                j += 1
        raise self.error(s[start:start + 10], "an unclosed class")


def parse(text: str):
    """The tree of ``text`` (see the module's docstring); raises :class:`Unsupported`."""
    try:
        regex.compile(text)
    except regex.error as e:
        raise Unsupported("the regex", f"the regex package cannot compile it ({e})") from None
    return _Parser(text).parse()
