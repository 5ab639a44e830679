"""Pre-tokenizer patterns: the named ones, how a name or a regex becomes a :class:`Pattern`, and
the check that tiktoken and HF tokenizers read a regex the same way.

A pattern splits text into pieces (words) before BPE; merges never cross a piece's edge. Each
:class:`Pattern` carries its regex as tiktoken's engine (fancy-regex) and the ``regex`` package,
toktok's reference, read it, and the form written to ``tokenizer.json``, which HF's Oniguruma
reads the same way. Oniguruma differs from the other two on a few constructs, which the HF form
rewrites (:func:`rewrite`): a possessive interval ``X{1,3}+`` is a repetition there, so it is
written as the atomic group ``(?>X{1,3})``; ``X{3}?`` is an optional ``X{3}`` there, so it is
written ``X{3}``; ``^`` and ``$`` are line anchors there, so both forms get ``\\A`` and ``\\z``
(what tiktoken reads ``^`` and ``$`` as). Constructs with no such rewrite are refused with one line
naming them (a look-behind, ``\\G``, ``\\K``, inline flags other than ``i``, POSIX classes, set
operations in classes, a backreference, ...), and a regex that passes is split by all three
engines on a probe set of edge strings; any difference refuses it too (:func:`check`). Each run
then proves id parity on its own text before publishing.

The named patterns count through the compiled scanner; any other regex counts through ``regex``.
The hardcoded tokens a pattern can produce as one piece: :func:`hardcoded`.
Example: ``check("o200k").name == "o200k"``; ``check(r"\\p{L}+|\\p{N}{1,3}+|\\s+|[^\\s\\p{L}\\p{N}]+").hf``
ends with ``(?>\\p{N}{1,3})|\\s+|[^\\s\\p{L}\\p{N}]+``.
"""
from __future__ import annotations

import functools
import random
import re
from dataclasses import dataclass

from .errors import ConfigError

#: GPT-4's split (cl100k_base), exactly as tiktoken's original cl100k_base (no possessive quantifiers).
CL100K = (
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"""
    r""" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
)
#: GPT-4o's split (o200k_base): camelCase apart, contractions kept on the word, ``/`` after punctuation.
O200K = "|".join([
    r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
    r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
    r"""\p{N}{1,3}""",
    r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
    r"""\s*[\r\n]+""",
    r"""\s+(?!\S)""",
    r"""\s+""",
])
#: GPT-2's split (r50k_base), as in the original GPT-2 release: spaces stay on numbers, case-sensitive contractions.
GPT2 = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
#: Qwen2's split: cl100k's with single digits.
QWEN2 = (
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|"""
    r""" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
)
#: SuperBPE's stage-2 split (Liu et al. 2025, arXiv 2503.13423; the reference code's
#: ``Digits(individual_digits=False)`` then ``Split("(?=(\d{3})+(?!\d))", isolated)``, as one
#: regex): no whitespace split; each run of numbers (``\p{N}``) apart, cut into groups of three
#: decimal digits (``\d``) from the right. Linear in a run's length: a run's digits are counted
#: once, where the run (or a run of decimal digits in it) starts; a group after a digit is three
#: more (the look-behind ``(?<=\d)``). See docs/superbpe.md.
_PARTIAL = r"\d{1,2}(?=(?:\d{3})*(?!\d))"  # the digits before a run's first group of three
_OTHER = r"(?:(?!\d)\p{N})+"  # numbers that are not decimal digits (², Ⅻ, ½)
_TAIL = rf"(?:{_OTHER}(?:{_PARTIAL})?)*"
SUPERBPE = rf"[^\p{{N}}]+|(?<=\d)\d{{3}}{_TAIL}|(?:{_OTHER}(?:{_PARTIAL})?|{_PARTIAL}|\d{{3}}){_TAIL}"

#: DeepSeek-V3's split as one regex. Its tokenizer.json has a Sequence of three Splits (Isolated):
#: ``\p{N}{1,3}``, CJK runs ``[一-龥぀-ゟ゠-ヿ]+``, then a cl100k-like main pattern applied to every
#: piece so far, its unmatched gaps kept as pieces. Here: digit chunks; the main pattern's
#: alternatives kept to CJK chars (a CJK run's split) and to other chars (the rest), each with
#: a last alternative for its gaps; the look-ahead ``(?!\S)`` sees a digit or CJK char as the end.
_CJK = "一-龥぀-ゟ゠-ヿ"
DEEPSEEK_V3 = "|".join([
    r"""\p{N}{1,3}""",
    rf"""(?:(?=[{_CJK}])[^\p{{L}}\p{{P}}\p{{S}}])?(?:(?=[{_CJK}])[\p{{L}}\p{{M}}])+""",
    rf"""(?:(?=[{_CJK}])[\p{{P}}\p{{S}}])+""",
    rf"""(?:(?=[{_CJK}])[^\p{{L}}\p{{M}}\p{{P}}\p{{S}}](?!(?=[{_CJK}])[\p{{L}}\p{{M}}]))+""",
    r"""[!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+""",
    rf"""[^\r\n\p{{L}}\p{{P}}\p{{S}}\p{{N}}{_CJK}]?(?:(?![{_CJK}])[\p{{L}}\p{{M}}])+""",
    rf""" ?(?:(?![{_CJK}])[\p{{P}}\p{{S}}])+[\r\n]*""",
    r"""\s*[\r\n]+""",
    rf"""\s+(?![^\s\p{{N}}{_CJK}])""",
    r"""\s+""",
    rf"""(?:[^\s\p{{L}}\p{{M}}\p{{P}}\p{{S}}\p{{N}}{_CJK}](?!(?![{_CJK}])[\p{{L}}\p{{M}}]))+""",
])


@dataclass(frozen=True)
class Pattern:
    """A pre-tokenizer pattern: ``name`` (``cl100k``, ``o200k``, ``gpt2``, ``qwen2``, ``deepseek_v3``, or ``custom``
    for a user's regex), ``regex`` (as tiktoken and the ``regex`` package read it) and ``hf`` (as
    written to ``tokenizer.json``). Example: ``Pattern("cl100k", CL100K, CL100K).named``."""

    name: str
    regex: str
    hf: str

    @property
    def named(self) -> bool:
        """Whether this is one of the named patterns (counted by the compiled scanner)."""
        return self.name in NAMED

    @property
    def known(self) -> bool:
        """Whether this pattern has a name toktok knows (:data:`NAMED` or :data:`SUPERWORD`)."""
        return self.name in BY_NAME

    def label(self, limit: int = 60) -> str:
        """The pattern in messages and summaries: its name, or ``custom`` and the regex (cut to
        ``limit`` characters). Example: ``NAMED["o200k"].label() == "o200k"``."""
        return self.name if self.known else f"custom {_shown(self.regex, limit)}"

    def to_dict(self) -> dict:
        """The pattern as the run file records it (``meta('pattern')``, with ``given``)."""
        return {"name": self.name, "regex": self.regex, "hf": self.hf}

    @classmethod
    def from_dict(cls, d: dict) -> "Pattern":
        """The pattern a run file recorded (:meth:`to_dict`); a named one by its name."""
        if d.get("name") in BY_NAME:
            return BY_NAME[d["name"]]
        return cls("custom", d["regex"], d.get("hf") or d["regex"])

    @classmethod
    def from_meta(cls, value: str | None) -> "Pattern":
        """The pattern of a run file's ``meta('pattern')``: a JSON object (:meth:`to_dict`), or the
        regex itself (run files before patterns had names: cl100k); cl100k when there is none."""
        if not value:
            return DEFAULT
        import json

        try:
            d = json.loads(value)
        except ValueError:
            return resolve(value)
        return cls.from_dict(d) if isinstance(d, dict) else resolve(value)

    def findall(self, text: str) -> list[str]:
        """The pieces of ``text``, as the ``regex`` package splits it (tiktoken's split): whole
        matches, as tiktoken and HF take them (``findall`` would give a regex's groups).
        Example: ``Pattern("custom", r"(a)b|[^a]", "").findall("abc") == ["ab", "c"]``."""
        rx = _compiled(self.regex)
        return rx.findall(text) if rx.groups == 0 else [m.group() for m in rx.finditer(text)]

    def one_piece(self, text: str) -> bool:
        """Whether ``text`` is one piece of this pattern. Example: ``not NAMED["qwen2"].one_piece("12")``."""
        return _compiled(self.regex).fullmatch(text) is not None and self.findall(text) == [text]


#: The named patterns, by name; ``cl100k`` is the default.
NAMED: dict[str, Pattern] = {
    "cl100k": Pattern("cl100k", CL100K, CL100K),
    "o200k": Pattern("o200k", O200K, O200K),
    "gpt2": Pattern("gpt2", GPT2, GPT2),
    "qwen2": Pattern("qwen2", QWEN2, QWEN2),
    "deepseek_v3": Pattern("deepseek_v3", DEEPSEEK_V3, DEEPSEEK_V3),
}
#: Patterns of a later phase that splits more coarsely (counted by the scanner compiled from the regex):
#: ``superbpe``, SuperBPE's stage 2 (superwords across whitespace).
SUPERWORD: dict[str, Pattern] = {
    "superbpe": Pattern("superbpe", SUPERBPE, SUPERBPE),
}
#: Every pattern toktok knows by name.
BY_NAME: dict[str, Pattern] = {**NAMED, **SUPERWORD}
#: Other names of named patterns: Llama 3 splits as cl100k does.
ALIASES = {"llama3": "cl100k"}
DEFAULT = NAMED["cl100k"]


@functools.lru_cache(maxsize=64)
def _compiled(regex_text: str):
    import regex

    return regex.compile(regex_text)


def _shown(text: str, limit: int = 60) -> str:
    """``text`` in quotes as typed (backslashes single; control characters escaped, so that it stays
    on one line), cut to about ``limit`` characters."""
    def spell(t: str) -> str:
        return "".join(c if c.isprintable() else repr(c)[1:-1] for c in t)

    r = spell(text)
    return f"'{r}'" if len(r) <= limit - 2 else f"'{spell(text[: max(1, limit - 8)])[: limit - 6]}...'"


def resolve(text: str) -> Pattern:
    """The pattern a ``--pattern`` value names: a named pattern (or an alias), else a regex as
    given (``custom``: its forms from :func:`rewrite` when it has them, else the text), or the
    named pattern whose regex it is. Nothing is checked here (:func:`check` does).
    Example: ``resolve("llama3") is NAMED["cl100k"]``."""
    key = ALIASES.get(text, text)
    if key in BY_NAME:
        return BY_NAME[key]
    for p in BY_NAME.values():
        if text == p.regex:
            return p
    try:
        regex_form, hf_form = rewrite(text)
    except _Refused:
        return Pattern("custom", text, text)
    return Pattern("custom", regex_form, hf_form)


# ---------------------------------------------------------------------------------------------
# The static check and the rewrite: a small reader of regex syntax
# ---------------------------------------------------------------------------------------------


class _Refused(Exception):
    """A construct the engines read differently: ``construct`` (as written) and ``why``."""

    def __init__(self, construct: str, why: str) -> None:
        super().__init__(construct, why)
        self.construct, self.why = construct, why


#: Escapes read alike by the three engines (plus any escaped non-alphanumeric character).
_ESCAPES = set("sSdDwWbBAzntrfvxupP")
_ESCAPES_IN_CLASS = set("sSdDwWntrfvxupP")
_ESCAPE_WHY = {
    "G": "where the last match ended: tiktoken's engine has no \\G; drop it",
    "K": "a match reset: the engines would cut the text around it differently; drop it",
    "Z": "the end or before a final newline in Oniguruma and regex, unknown to tiktoken's engine; use \\z",
    "h": "hex digits in Oniguruma, unknown to the others; write [0-9a-fA-F]",
    "R": "a line break in Oniguruma and regex only; write the line ends as a class",
    "X": "a grapheme cluster in Oniguruma and regex only; write \\P{M}\\p{M}*",
    "Q": "a quoted run in Oniguruma only; escape the characters one by one",
    "k": "a backreference, which the engines keep differently; drop it",
    "g": "a subroutine or backreference, not in tiktoken's engine; drop it",
}
_FLAG = re.compile(r"([a-zA-Z]*)(?:-([a-zA-Z]*))?([:)])")
_INTERVAL = re.compile(r"\{(\d*)(,?)(\d*)\}")


class _Reader:
    """Reads a regex once: its two forms (tiktoken's and HF's, rewritten where Oniguruma differs),
    the ``\\p{...}`` names it uses and its literal characters (probes are built from them); raises
    ``_Refused`` at the first construct that no rewrite keeps."""

    def __init__(self, text: str) -> None:
        self.s, self.i = text, 0
        self.parts: list[list[str]] = []  # [tiktoken's text, HF's text] per atom or operator
        self.groups: list[int] = []  # index in parts of each open group
        self.atom: int | None = None  # index in parts where the last atom starts
        self.names: list[str] = []
        self.literals: set[str] = set()
        self.atoms: list[str] = []  # each one-character atom as written: literals, escapes, classes
        self.forms: tuple[str, str] = ("", "")  # what read() returns

    def read(self) -> tuple[str, str]:
        s = self.s
        while self.i < len(s):
            c = s[self.i]
            if c == "\\":
                self._escape(in_class=False)
            elif c == "[":
                self._class()
            elif c == "(":
                self._open()
            elif c == ")":
                self._emit(")", ")", atom=False)
                self.atom = self.groups.pop() if self.groups else None
                self.i += 1
            elif c in "*+?{":
                self._quantifier()
            elif c == "|":
                self._emit("|", "|", atom=False)
                self.atom = None
                self.i += 1
            elif c in "^$":  # line anchors in Oniguruma, text anchors in tiktoken's engine
                anchor = "\\A" if c == "^" else "\\z"
                self._emit(anchor, anchor)
                self.i += 1
            else:
                self.literals.add(c)
                self.atoms.append(c)
                self._emit(c, c)
                self.i += 1
        return "".join(p[0] for p in self.parts), "".join(p[1] for p in self.parts)

    def _emit(self, tt: str, hf: str, atom: bool = True) -> None:
        if atom:
            self.atom = len(self.parts)
        self.parts.append([tt, hf])

    def _escape(self, in_class: bool) -> str:
        """Reads the escape at ``i``, returns its text (emitted unless ``in_class``)."""
        s, i = self.s, self.i
        if i + 1 >= len(s):
            raise _Refused("\\", "a regex cannot end in a lone backslash")
        e = s[i + 1]
        end = i + 2
        if e.isdigit():
            raise _Refused(s[i:end], "a backreference or octal escape, which the engines read differently; "
                                     "drop it, or write the character as \\xHH")
        if e.isalpha():
            ok = _ESCAPES_IN_CLASS if in_class else _ESCAPES
            if e not in ok:
                why = _ESCAPE_WHY.get(e, "an escape the three engines do not read alike; escape only punctuation, "
                                         "or use \\p{...}, \\s, \\d, \\w, \\xHH")
                if in_class and e in "bBAz":
                    why = "not a character inside a class (\\b is a backspace in some engines); write \\x08"
                raise _Refused(s[i:end], why)
            if e in "pP":
                end = self._property(i)
            elif e in "xu":
                m = re.compile(r"[0-9a-fA-F]{2}" if e == "x" else r"[0-9a-fA-F]{4}").match(s, end)
                if not m:
                    raise _Refused(s[i:end + 2], f"write \\{e} with exactly {2 if e == 'x' else 4} hex digits "
                                                 "(the engines read the other forms differently)")
                end = m.end()
                self.literals.add(chr(int(m.group(), 16)))
        else:
            self.literals.add(e)
        self.i = end
        if not in_class:
            self._emit(s[i:end], s[i:end])
            if e not in "bBAz":
                self.atoms.append(s[i:end])
        return s[i:end]

    def _property(self, i: int) -> int:
        s = self.s
        if i + 2 >= len(s) or s[i + 2] != "{":
            raise _Refused(s[i:i + 3], f"write \\{s[i + 1]}{{{s[i + 2:i + 3] or 'L'}}}: HF's Oniguruma reads "
                                       "the short form as plain letters")
        close = s.find("}", i + 3)
        if close < 0:
            raise _Refused(s[i:i + 3], "an unclosed property name; close it with }")
        self.names.append(s[i:close + 1])
        return close + 1

    def _class(self) -> None:
        s, start = self.s, self.i
        j = start + 1
        if j < len(s) and s[j] == "^":
            j += 1
        if j < len(s) and s[j] == "]":  # a leading ] is a character
            self.literals.add("]")
            j += 1
        while j < len(s):
            c = s[j]
            if c == "\\":
                self.i = j
                self._escape(in_class=True)
                j = self.i
            elif c == "[":
                raise _Refused(s[j:j + 9] if s.startswith("[:", j) else "[", "a nested class or a POSIX class "
                               "([[:alpha:]] is ASCII in tiktoken's engine and Unicode in Oniguruma); "
                               "use \\p{...}, and write a literal [ as \\[")
            elif s.startswith(("&&", "--", "~~"), j):
                raise _Refused(s[j:j + 2], "a set operation inside a class, read as an operator by some "
                                           "engines and as characters by others; escape it or list the characters")
            elif c == "]":
                self.i = j + 1
                self._emit(s[start:j + 1], s[start:j + 1])
                self.atoms.append(s[start:j + 1])
                return
            else:
                self.literals.add(c)
                j += 1
        raise _Refused(s[start:start + 10], "an unclosed class; close it with ]")

    def _open(self) -> None:
        s, i = self.s, self.i
        if not s.startswith("(?", i):
            return self._push("(", "(", 1)
        rest = s[i + 2:]
        if rest.startswith(("<=", "<!")):
            raise _Refused(s[i:i + 4], "a look-behind: the engines accept different look-behinds, and "
                                       "toktok cuts text where one would look across the cut; use a look-ahead")
        if rest.startswith((":", "=", "!", ">")):  # non-capturing, look-ahead, atomic
            return self._push(s[i:i + 3], s[i:i + 3], 3)
        if rest.startswith(("P<", "<")):
            close = s.find(">", i)
            if close < 0:
                raise _Refused(s[i:i + 4], "an unclosed group name; close it with >")
            raw = s[i:close + 1]  # HF's Oniguruma lacks (?P<name>: it gets (?<name>
            return self._push(raw, "(?<" + raw[raw.index("<") + 1:], len(raw))
        m = _FLAG.match(rest)
        if not m or (not m.group(1) and m.group(2) is None):
            raise _Refused("(?" + rest[:1], "a group construct the three engines do not share (comments, "
                                            "conditionals, recursion, ...); use (?:, (?=, (?! or (?>")
        text = "(?" + m.group(0)
        odd = sorted(set(m.group(1) + (m.group(2) or "")) - {"i"})
        if odd:
            raise _Refused(text, f"inline flag {odd[0]}: only i reads alike in the three engines "
                                 "(HF's Oniguruma lacks s, reads m as dot-all, ...); drop it")
        if m.group(3) == ")":  # a flag for the rest of the pattern
            if i != 0 or m.group(2) is not None:
                raise _Refused(text, "a flag group after the start: regex applies it to the whole pattern, "
                                     "the others from there on; write (?i:...)")
            self._emit(text, text, atom=False)
            self.i += len(text)
            return None
        return self._push(text, text, len(text))

    def _push(self, tt: str, hf: str, width: int) -> None:
        """A group opens: ``tt``/``hf`` are its opening in each form, ``width`` its length as written."""
        self.groups.append(len(self.parts))
        self.parts.append([tt, hf])
        self.i += width
        self.atom = None

    def _quantifier(self) -> None:
        s, i = self.s, self.i
        if s[i] == "{":
            m = _INTERVAL.match(s, i)
            if not m or not (m.group(1) or m.group(3)):
                self.literals.add("{")
                raise _Refused(s[i:i + 6], "a { that is not a repetition: escape it as \\{")
            if not m.group(1):
                raise _Refused(m.group(0), "write {0,n}: tiktoken's engine does not read {,n}")
            q = m.group(0)
        else:
            q = s[i]
        j = i + len(q)
        mode = s[j] if j < len(s) and s[j] in "+?" else ""
        if self.atom is None:
            raise _Refused(s[i:j + 1], "a repetition of nothing (or of a repetition); escape it, or wrap "
                                       "what it repeats in (?:...)")
        atom = self.parts[self.atom:]
        tt_atom, hf_atom = "".join(p[0] for p in atom), "".join(p[1] for p in atom)
        tt = tt_atom + q + mode
        if mode == "+" and q[0] == "{":  # Oniguruma: X{1,3}+ is (X{1,3})+
            hf = f"(?>{hf_atom}{q})"
        elif mode == "?" and q[0] == "{" and "," not in q:  # Oniguruma: X{3}? is (X{3})?
            hf = hf_atom + q
        else:
            hf = hf_atom + q + mode
        del self.parts[self.atom:]
        self.parts.append([tt, hf])
        self.atom = None  # a repetition of a repetition is refused
        self.i = j + len(mode)


def _read(text: str) -> _Reader:
    r = _Reader(text)
    r.forms = r.read()
    return r


def rewrite(text: str) -> tuple[str, str]:
    """A user's regex as (tiktoken's form, HF's form): ``^``/``$`` as ``\\A``/``\\z`` in both, and in
    HF's a possessive interval as an atomic group and ``X{n}?`` as ``X{n}``. Raises ``_Refused`` at
    a construct no rewrite keeps. Example: ``rewrite(r"\\d{1,3}+|x$") == (r"\\d{1,3}+|x\\z", r"(?>\\d{1,3})|x\\z")``."""
    return _read(text).forms


# ---------------------------------------------------------------------------------------------
# The empirical check: the three engines split probes alike
# ---------------------------------------------------------------------------------------------

#: Strings that exercise the named patterns' differences and the engines' edges: camelCase,
#: contractions, digit runs, spaces before numbers, "/" after punctuation, whitespace runs and
#: line ends, marks, case folding, scripts. Also in the parity check's built-in set.
EDGE_TEXTS: list[str] = [
    "camelCase HTTPServer getHTTPResponse iPhone",
    "XMLHttpRequest ǅemal ǅEMAL ǄĄ ʰhello Ⅻth",
    "don't DON'T it's IT'S we'll We'Ll I'm",
    "they've she'd 's 'S 'x o'clock rock'n'roll",
    "don’t ’s 'tis ''s x's X'S 1's é's",
    "1 12 123 1234 12345 1234567 0.5 3.14159",
    "1,000,000 2024-01-31 ١٢٣٤ ４５６ ²³ ⅫⅣ x1y22z333",
    "a 1 b  22 c   333 x 4444 $ 55 ( 666 )",
    "a.b/c ./run ../up http://x.y/z?q=1 </div>",
    "//comment /* c */ ...// !/ ?/\n/ ,/x",
    "a\nb a \nb a\n\nb a \n b x  \n\n  y",
    "\r\n\r\nz end\n end \n trailing   ",
    "  lead\t\ttab \t \n \r \r\r\n\n\r",
    "e\u0301 n\u0303o \u0301x ñ क्षत्रिय a\u0308\u0301",
    "a\u00a0b\u2009c\u3000d\x0be\x0cf\x85g\u2028h",
    "i\u200bj\x1ck\x1fl \u200d\ufeff\u2060 \x00\x07\x7f",
    "ſs Ks ẞß ß ss İi ıI ﬃ ǅǆǄ Σσς",
    "👍🏽 👩‍👩‍👧 🇫🇷 1️⃣ 😀x",
    "x+=1;y->z; a&&b||c; i++ --j <<= >>= ... ..",
    "你好，世界！日本語のテキスト 안녕하세요",
    "Привет, мир! Γειά σου. مرحبا ١٢٣",
    "\"quoted\" (paren) [brack] {brace} <angle>",
    "!#$%&*+,-.:;<=>?@\\^_`|~ !! ?? -- __",
    " ", "  ", "\n", "\n\n", " \n", "\t", "a", "A", "1", "'", "/", ".",
]

#: The alphabet of the random probes: ASCII of every kind, Unicode letters of each case class,
#: marks, numbers of each kind, whitespace and look-alikes, symbols.
_ALPHABET = ("aAzZsSkKiI019 '\".,/-_!?()$+<=>^`|~#%&*:;@[\\]{}\t\n\r\x0b\x0c\x85\xa0\u2028\u3000\u2009"
             "éÉßẞſKǅʰ中あ한ıİσς\u0301\u0903٣２²Ⅻ\u200b\u200d\x1c\x00€😀")


def probe_texts(literals: set[str] | frozenset = frozenset(), *, count: int = 600, seed: int = 0) -> list[str]:
    """The probe set: :data:`EDGE_TEXTS`, each literal character of a regex in a few contexts,
    and ``count`` seeded random strings (1..16 characters) over an alphabet of edge characters
    and the literals. Example: ``len(probe_texts(count=10)) > len(EDGE_TEXTS)``."""
    out = list(EDGE_TEXTS)
    lits = sorted(c for c in literals if not 0xD800 <= ord(c) <= 0xDFFF)
    for c in lits:
        variants = {c, c.upper(), c.lower(), c.casefold()}
        out += [f"{v}" for v in sorted(variants)] + [f"x{c}y", f" {c}{c}{c} ", f"{c}\n{c}", f"A{c}1"]
    alphabet = sorted(set(_ALPHABET) | set(lits))
    rng = random.Random(seed)
    out += ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 16))) for _ in range(count)]
    return out


def _hf_pieces(hf_regex: str, texts: list[str]) -> list[list[str]]:
    from tokenizers import Regex, pre_tokenizers

    split = pre_tokenizers.Split(Regex(hf_regex), "isolated")
    return [[p for p, _ in split.pre_tokenize_str(t)] for t in texts]


def _tiktoken_pieces(regex_text: str, texts: list[str]) -> list[list[str]]:
    """tiktoken's pieces of each text: an Encoding whose ranks hold every substring of the texts
    (and the empty string), so that tiktoken finds each of its pieces whole and gives one token
    per piece."""
    import tiktoken

    subs = {b""} | {bytes([b]) for b in range(256)}
    for t in texts:
        for a in range(len(t)):
            subs.update(t[a:b].encode("utf-8", "surrogatepass") for b in range(a + 1, len(t) + 1))
    enc = tiktoken.Encoding("toktok-probe", pat_str=regex_text, mergeable_ranks={s: i for i, s in enumerate(subs)},
                            special_tokens={})
    out = []
    for ids in enc.encode_ordinary_batch(texts, num_threads=1):
        out.append([enc.decode_single_token_bytes(x).decode("utf-8") for x in ids])
    return out


def _difference(texts: list[str], want: list[list[str]], got: list[list[str]]) -> str | None:
    """Where two splits of the probes first differ: the text near the first differing piece and
    the pieces from there in each split, or None."""
    for t, a, b in zip(texts, want, got):
        if a == b:
            continue
        k = next((k for k, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
        at = sum(map(len, a[:k]))
        near = t[max(0, at - 6): at + 12]
        return f"{_shown(near, 26)} as {_pieces_shown(b[k:k + 3])}, regex as {_pieces_shown(a[k:k + 3])}"
    return None


def _pieces_shown(pieces: list[str], limit: int = 34) -> str:
    r = repr(pieces)
    return r if len(r) <= limit else r[: limit - 4] + "...]"


def _probe(p: Pattern, literals: set[str]) -> _Refused | None:
    """The first way the engines disagree on the probes, or None."""
    texts = probe_texts(literals)
    ref = [p.findall(t) for t in texts]
    for t, pieces in zip(texts, ref):
        if "" in pieces:
            return _Refused("an empty match", f"it matches the empty string (in {_shown(t, 30)}), which "
                                              "tiktoken's engine and HF's split differently; make every "
                                              "alternative match at least one character")
        if "".join(pieces) != t:
            gap = next((c for c in t if c not in "".join(pieces)), t[:1])
            return _Refused("text left unmatched", f"{_shown(gap, 12)} in {_shown(t, 30)} is in no piece: "
                                                   "tiktoken drops such text and HF keeps it; end the "
                                                   "pattern with a catch-all such as |\\s+|[^\\s]+")
    for engine, split in (("HF tokenizers' Oniguruma", lambda: _hf_pieces(p.hf, texts)),
                          ("tiktoken's engine", lambda: _tiktoken_pieces(p.regex, texts))):
        diff = _difference(texts, ref, split())
        if diff is not None:
            return _Refused("read differently", f"{engine} splits {diff}; change that part of the regex")
    return None


# ---------------------------------------------------------------------------------------------
# check: what --pattern takes
# ---------------------------------------------------------------------------------------------


def _compile_error(p: Pattern, names: list[str]) -> _Refused | None:
    """The first engine that cannot compile the pattern (naming the ``\\p{...}`` it lacks when
    that is why), or None."""
    import regex
    import tiktoken
    from tokenizers import Regex

    def tt(text):  # compiled when the Encoding is made (encoding here could panic on an empty match)
        tiktoken.Encoding("toktok-probe", pat_str=text, mergeable_ranks={b"a": 0}, special_tokens={})

    for engine, compile_, form in (("the regex package", regex.compile, p.regex), ("HF tokenizers' Oniguruma", Regex, p.hf),
                                   ("tiktoken's engine", tt, p.regex)):
        try:
            compile_(form)
        except BaseException as e:  # each engine raises its own kind (tiktoken: ValueError or a panic)
            if isinstance(e, (KeyboardInterrupt, SystemExit)):
                raise
            for name in names:
                try:
                    compile_(name)
                except BaseException:
                    return _Refused(name, f"a property {engine} does not know; use a general category "
                                          "(\\p{L}, \\p{Nd}, ...) or a script (\\p{Han}, ...)")
            msg = " ".join(str(e).split())[:80] or type(e).__name__
            return _Refused("the regex", f"{engine} cannot compile it ({msg}); fix the regex")
    return None


def _limits(p: Pattern, atoms: list[str]) -> _Refused | None:
    """What the probe strings cannot show (:mod:`toktok.pattern_checks`): an empty match or a
    code point left in no piece, decided over every code point; an engine that backtracks
    without end (or fails) on a long run of one kind of character."""
    from . import pattern_checks

    found = pattern_checks.classes(atoms, fold="(?i" in p.regex, word=bool(re.search(r"\\[bB]", p.regex)))
    gap = pattern_checks.uncovered(p.regex, found)
    if gap is not None and gap.startswith("empty "):
        return _Refused("an empty match", f"it matches the empty string ({gap[6:]}), which tiktoken's engine and "
                                          "HF's split differently; make every alternative match at least one character")
    if gap is not None:
        return _Refused("text left unmatched", f"{gap}: tiktoken drops such text and HF keeps it; end the pattern "
                                               "with a catch-all such as |\\s+|[^\\s]+")
    slow = pattern_checks.too_slow(p.regex, p.hf, found)
    if slow is not None:
        return _Refused("a long run", f"{slow}; avoid a repetition inside a repetition such as (a+)+ or (\\w+\\s?)+, "
                                      "or make it atomic: (?>...)")
    return None


#: Custom patterns that passed the check, by their HF form: a tokenizer.json written with one is
#: read back as that very pattern (its tiktoken form included).
_BY_HF: dict[str, Pattern] = {}


@functools.lru_cache(maxsize=32)
def _checked(text: str, keep: bool) -> Pattern | _Refused:
    key = ALIASES.get(text, text)
    if key in BY_NAME:
        return BY_NAME[key]
    for p in SUPERWORD.values():  # written by toktok (superbpe's look-behind is one no user regex may use)
        if text in (p.regex, p.hf):
            return p
    if keep and text in _BY_HF:
        return _BY_HF[text]
    if not text:
        return _Refused("the regex", "it is empty")
    try:
        reader = _read(text)
    except _Refused as e:
        return e
    regex_form, hf_form = reader.forms
    if keep and (regex_form, hf_form) != (text, text):
        return _Refused("the regex", "HF's Oniguruma and tiktoken's engine need it written differently "
                                     "(^, $, X{n,m}+ or X{n}?), so one regex cannot serve both; rewrite it")
    for p in BY_NAME.values():
        if regex_form == p.regex:
            return p
    p = Pattern("custom", regex_form, hf_form)
    refused = _compile_error(p, reader.names) or _limits(p, reader.atoms) or _probe(p, reader.literals)
    if refused is None:
        _BY_HF.setdefault(p.hf, p)
    return refused or p


def check(value: str | Pattern, where: str = "--pattern", *, keep: bool = False) -> Pattern:
    """The pattern ``value`` names, checked: a named pattern (or alias) as it is; a regex read once
    (:func:`rewrite`), compiled by the three engines and split by them alike on the probes
    (:func:`probe_texts`). ``keep``: the regex is HF's as written (a tokenizer.json's Split), so
    nothing may need rewriting. ConfigError naming ``where`` and the construct otherwise.
    Example: ``check("(?<=a)b|.")`` raises ``ConfigError("--pattern '(?<=a)b|.': (?<=: a look-behind ...")``."""
    if isinstance(value, Pattern):
        value = value.name if value.known else value.regex
    if not isinstance(value, str):
        raise ConfigError(f"{where} expected a pattern name ({', '.join([*BY_NAME, *ALIASES])}) or a regex, got "
                          f"{type(value).__name__}")
    got = _checked(value, keep)
    if isinstance(got, Pattern):
        return got
    shown = _shown(value, 50)
    head = f"{where}{shown}" if where.endswith("=") else f"{where} {shown}"
    msg = f"{head}: {got.construct}: {got.why}"
    if len(msg) > 296:
        msg = msg[:293] + "..."
    raise ConfigError(msg)


def same(a: Pattern, b: Pattern) -> bool:
    """Whether two checked patterns split text alike by definition: the same regex for tiktoken,
    or the same for HF (each checked pattern's two forms read alike)."""
    return a.regex == b.regex or a.hf == b.hf


def hardcoded(pattern: Pattern, tokens: list[bytes]) -> list[bytes]:
    """The ``tokens`` (in order) that ``pattern`` can produce as one piece: all 1,161 hardcoded
    tokens under cl100k; under qwen2's single digits none of ``00``-``999``.
    Example: ``len(hardcoded(NAMED["qwen2"], vocab.hardcoded_tokens())) == 61``."""
    if pattern is DEFAULT:
        return list(tokens)
    return [t for t in tokens if pattern.one_piece(t.decode("utf-8"))]


__all__ = ["Pattern", "NAMED", "SUPERWORD", "BY_NAME", "ALIASES", "DEFAULT", "resolve", "check", "rewrite", "same",
           "hardcoded", "probe_texts", "EDGE_TEXTS", "CL100K", "O200K", "GPT2", "QWEN2", "SUPERBPE", "DEEPSEEK_V3"]
