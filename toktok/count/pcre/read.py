"""A regex as the ``regex`` package (toktok's reference, version 0 behaviour) reads it, written for
PCRE2, and the one-character atoms whose members the two engines must agree on.

Most of the syntax means the same in both; where it is spelled differently it is rewritten
(``\\Z``, the text's end in ``regex``, as ``\\z``; ``\\uHHHH`` and ``\\UHHHHHHHH`` as ``\\x{...}``;
``\\v``, a vertical tab in ``regex`` and a class in PCRE2, as ``\\x{0b}``; ``{,n}`` as ``{0,n}``), and
what either reads otherwise, or what this reader does not know to be read alike, is refused with
the construct and why (:class:`Unreadable`): escapes other than the classes, anchors, hex and
control characters, backreferences ``\\1``-``\\9`` beyond the groups or under ``(?i)`` (their case
folding is not compared), ``\\g``, ``\\k``, ``\\N``, ``\\X``, ``\\R``, ``\\K``, ``\\G``; flags other than
``i``, ``s``, ``m`` (and a flag group after the start); conditionals, recursion, branch resets,
comments; set operations inside a class; a ``{`` that is not a repetition.
Example: ``read(r"\\p{L}+\\Z").pcre == r"\\p{L}+\\z"``."""
from __future__ import annotations

import re
from dataclasses import dataclass, field

_INTERVAL = re.compile(r"\{(\d*)(,?)(\d*)\}")
_FLAGS = re.compile(r"\(\?([a-zA-Z]*)(?:-([a-zA-Z]*))?([:)])")
_CLASS_ESCAPES = set("dDsSwW")
_CONTROL = set("tnrfa")
_HEX = {"x": 2, "u": 4, "U": 8}
#: ``regex``'s ``\\w`` as PCRE2 properties (PCRE2's own ``\\w`` under UCP is letters, numbers and
#: ``_``: it holds ``²``, which ``regex``'s does not; ``\\b`` and ``\\B`` are rewritten with it too).
_WORD = r"\p{Alphabetic}\p{M}\p{Nd}\p{Pc}\p{Join_Control}"
_BOUNDARY = {"b": f"(?:(?<=[{_WORD}])(?![{_WORD}])|(?<![{_WORD}])(?=[{_WORD}]))",
             "B": f"(?:(?<=[{_WORD}])(?=[{_WORD}])|(?<![{_WORD}])(?![{_WORD}]))"}


class Unreadable(Exception):
    """A construct this reader does not know both engines to read alike: ``construct``, ``why``."""

    def __init__(self, construct: str, why: str) -> None:
        super().__init__(f"{construct}: {why}")
        self.construct, self.why = construct, why


@dataclass
class Read:
    """The regex for PCRE2 (``pcre``) and its one-character atoms, each as ``(regex's text,
    PCRE2's text)`` with the flags in force written around both."""

    pcre: str
    atoms: list[tuple[str, str]] = field(default_factory=list)
    literals: set[str] = field(default_factory=set)


class _Reader:
    def __init__(self, text: str) -> None:
        self.s, self.i = text, 0
        self.out: list[str] = []
        self.atoms: dict[tuple[str, str], None] = {}
        self.literals: set[str] = set()
        self.flags: list[str] = [""]  # the flags in force, per open group
        self.groups = 0
        self.backrefs: list[tuple[int, str]] = []  # (group, flags in force)
        self.boundary = False

    def atom(self, rx: str, pc: str) -> None:
        f = self.flags[-1]
        self.atoms[(f"(?{f}:{rx})", f"(?{f}:{pc})") if f else (rx, pc)] = None
        self.out.append(pc)

    def read(self) -> Read:
        s = self.s
        m = _FLAGS.match(s)
        if m and m.group(3) == ")" and not m.group(2):
            self.flags[0] = self.check_flags(m.group(0), m.group(1))
            self.out.append(m.group(0))
            self.i = m.end()
        while self.i < len(s):
            c = s[self.i]
            if c == "\\":
                self.escape()
            elif c == "[":
                self.klass()
            elif c == "(":
                self.group()
            elif c == ")":
                if len(self.flags) == 1:
                    raise Unreadable(")", "an unbalanced )")
                self.flags.pop()
                self.out.append(c)
                self.i += 1
            elif c == "{":
                self.interval()
            elif c in "*+?|^$":
                self.out.append(c)
                self.i += 1
            elif c == ".":
                self.atom(".", ".")
                self.i += 1
            else:
                self.literal(c)
                self.i += 1
        for group, flags in self.backrefs:
            if group > self.groups:
                raise Unreadable(f"\\{group}", "a backreference to a group that does not exist")
            if "i" in flags:
                raise Unreadable(f"\\{group}", "a backreference under (?i): the engines' case folding of it is not "
                                               "compared")
        if self.boundary:
            self.atoms[(r"\w", f"[{_WORD}]")] = None
        return Read("".join(self.out), list(self.atoms), self.literals)

    def literal(self, c: str) -> None:
        self.literals.add(c)
        if "i" in self.flags[-1]:
            self.atom(re.escape(c), _pcre_literal(c))
        else:
            self.out.append(_pcre_literal(c))

    def check_flags(self, text: str, on: str, off: str = "") -> str:
        odd = sorted(set(on + off) - set("ism"))
        if odd:
            raise Unreadable(text, f"flag {odd[0]}: only i, s and m are read alike by both engines")
        return "".join(sorted(set(on)))

    def group(self) -> None:
        s, i = self.s, self.i
        if s.startswith("(*", i):
            raise Unreadable(s[i:i + 6], "a backtracking verb or start option the engines read differently")
        if not s.startswith("(?", i):
            self.groups += 1
            self.open("(", 1)
            return
        rest = s[i + 2:i + 4]
        if rest.startswith(("<=", "<!")):
            return self.open(s[i:i + 4], 4)
        if rest[:1] in (":", "=", "!", ">"):
            return self.open(s[i:i + 3], 3)
        if rest.startswith("P="):
            raise Unreadable(s[i:i + 4], "a named backreference: write the group's number")
        if rest.startswith(("P<", "<")):
            close = s.find(">", i)
            name = s[i + 2 + (rest[0] == "P") + 1:close]
            if close < 0 or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
                raise Unreadable(s[i:i + 5], "a group name PCRE2 may not read alike")
            self.groups += 1
            return self.open(s[i:close + 1], close + 1 - i)
        m = _FLAGS.match(s, i)
        if not m or m.group(3) == ")":
            raise Unreadable(s[i:i + 3], "a group construct the two engines may read differently")
        on = self.check_flags(m.group(0), m.group(1), m.group(2) or "")
        off = set(m.group(2) or "")
        self.flags.append("".join(sorted((set(self.flags[-1]) - off) | set(on))))
        self.out.append(m.group(0))
        self.i = m.end()

    def open(self, text: str, width: int) -> None:
        self.flags.append(self.flags[-1])
        self.out.append(text)
        self.i += width

    def interval(self) -> None:
        m = _INTERVAL.match(self.s, self.i)
        if not m or not (m.group(1) or m.group(3)):
            raise Unreadable(self.s[self.i:self.i + 6], "a { that is not a repetition; escape it as \\{")
        self.out.append("{" + (m.group(1) or "0") + m.group(2) + m.group(3) + "}")
        self.i = m.end()

    def escape(self) -> None:
        s, i = self.s, self.i
        e = s[i + 1] if i + 1 < len(s) else ""
        if e in ("b", "B"):
            self.boundary = True
            self.out.append(_BOUNDARY[e])
            self.i += 2
            return
        if e in ("A", "z", "Z"):
            self.out.append("\\z" if e == "Z" else s[i:i + 2])
            self.i += 2
            return
        if e.isdigit():
            if e == "0" or (i + 2 < len(s) and s[i + 2].isdigit()):
                raise Unreadable(s[i:i + 3], "an octal escape or a backreference past \\9: write \\xHH")
            self.backrefs.append((int(e), self.flags[-1]))
            self.out.append(s[i:i + 2])
            self.i += 2
            return
        rx, pc = self.escape_text(i)
        self.i += len(rx)
        if e in _CLASS_ESCAPES or e in "pP":
            self.atom(rx, pc)
        elif "i" in self.flags[-1]:
            self.atom(rx, pc)
        else:
            self.out.append(pc)
            if not e.isalnum():
                self.literals.add(e)

    def escape_text(self, i: int, in_class: bool = False) -> tuple[str, str]:
        """The escape at ``i`` (in a class or not): as written, and for PCRE2."""
        s = self.s
        e = s[i + 1] if i + 1 < len(s) else ""
        if not e:
            raise Unreadable("\\", "a lone backslash at the end")
        if e in "pP":
            if i + 2 < len(s) and s[i + 2] == "{":
                close = s.find("}", i + 3)
                if close < 0:
                    raise Unreadable(s[i:i + 4], "an unclosed property name")
                t = s[i:close + 1]
            else:
                t = s[i:i + 3]
            return t, t
        if e in _HEX:
            m = re.compile("[0-9a-fA-F]{%d}" % _HEX[e]).match(s, i + 2)
            if not m:
                raise Unreadable(s[i:i + 4], "a hex escape of another length: write \\xHH, \\uHHHH or \\UHHHHHHHH")
            t = s[i:m.end()]
            return t, "\\x{%x}" % int(m.group(0), 16)
        if e == "v":
            return s[i:i + 2], "\\x{0b}"
        if e in "wW":
            if in_class and e == "W":
                raise Unreadable(s[i:i + 2], "\\W inside a class: write the class's complement with \\w")
            return s[i:i + 2], _WORD if in_class else f"[{'^' if e == 'W' else ''}{_WORD}]"
        if e in _CLASS_ESCAPES or e in _CONTROL or not e.isalnum():
            return s[i:i + 2], s[i:i + 2]
        raise Unreadable(s[i:i + 2], "an escape the two engines may read differently")

    def klass(self) -> None:
        s, start = self.s, self.i
        j = start + 1
        out = ["["]
        if j < len(s) and s[j] == "^":
            out.append("^")
            j += 1
        if j < len(s) and s[j] == "]":
            out.append("\\]")
            j += 1
        while j < len(s):
            c = s[j]
            if c == "\\":
                if j + 1 < len(s) and s[j + 1] in "bBAzZ" or (j + 1 < len(s) and s[j + 1].isdigit()):
                    raise Unreadable(s[j:j + 2], "an escape inside a class the engines may read differently")
                rx, pc = self.escape_text(j, in_class=True)
                out.append(pc)
                j += len(rx)
            elif s.startswith(("&&", "--", "||", "~~"), j):
                raise Unreadable(s[j:j + 2], "a set operator inside a class; escape it")
            elif c == "[":
                if not re.match(r"\[:\^?[a-z]+:\]", s[j:]):
                    raise Unreadable(s[j:j + 8], "a [ inside a class: escape it")
                close = s.index(":]", j) + 2
                out.append(s[j:close])
                j = close
            elif c == "]":
                self.i = j + 1
                self.atom(s[start:j + 1], "".join(out) + "]")
                return
            else:
                out.append(c)  # (a range's - and a later ^ are read alike)
                j += 1
        raise Unreadable(s[start:start + 10], "an unclosed class")


def _pcre_literal(c: str) -> str:
    """A literal char for PCRE2: escaped when PCRE2 might read it as syntax."""
    return "\\" + c if c in "\\^$.|?*+()[]{}-#" else c


def read(text: str) -> Read:
    """``text`` for PCRE2 and its atoms (see the module); raises :class:`Unreadable`."""
    return _Reader(text).read()
