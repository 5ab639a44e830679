"""Safe cuts: where a long document may be cut so that a pattern's pieces of the parts are the
pieces of the whole (``findall(p, t[:i]) + findall(p, t[i:]) == findall(p, t)``).

The reader cuts big ``.txt`` files (:mod:`toktok.count.read`) and the sampler cuts long documents
into ~1 KiB pieces (:mod:`toktok.count.sample`) only at such points. For a named pattern they are
found by a rule of its structure (:data:`RULES`, proven in the comments below and held by
``tests/test_cuts.py``):

- ``"\\n"`` followed by non-whitespace (``nl``): for cl100k and qwen2 no alternative matches
  ``"\\n"`` followed by non-space (the alternatives ending in newlines end at the newline run), and
  the one look-ahead, ``\\s+(?!\\S)``, never competes, because ``\\s*[\\r\\n]+`` is tried first.
  o200k's punctuation alternative ends in ``[\\r\\n/]*``, so there the next char must not be
  ``/`` either (``nl-no-slash``). DeepSeek-V3's as cl100k's: its only alternatives that hold a
  newline are whitespace runs and the punctuation run's ``[\\r\\n]*`` tail, all ending at the
  newline run, and the newline alternative comes before its look-ahead. GPT-2 has no newline alternative: a whitespace run before
  non-space gives its last char to the next piece, so a run ending in ``"\\n"`` splits before the
  ``"\\n"`` unless the run is that ``"\\n"`` alone (``nl-alone``: non-whitespace on both sides).
- Before a space that follows non-whitespace (the sampler's second rule, for every named
  pattern): no alternative continues from non-whitespace into a space, and the part before ends
  in non-whitespace, so the look-ahead sees the same text on both sides.

"Whitespace" is the ``regex`` package's ``\\s`` (Unicode White_Space), as in the patterns; the
reader's rules also treat ``\\x1c``-``\\x1f`` as whitespace (Python's ``str.isspace`` does), which
only leaves out cuts. A custom regex has no rule: the sampler does not cut its documents, and the
reader cuts only at the end of a match of the regex itself, found by matching it from the
previous cut (:func:`regex_split_point`).
Example: ``split_point("a\\n b\\nc", NAMED["cl100k"]) == 5``.
"""
from __future__ import annotations

import functools
from typing import TYPE_CHECKING

import numpy as np

from ..patterns import Pattern

if TYPE_CHECKING:
    import regex

# UTF-8 of a whitespace char (the ASCII ones and \x1c-\x1f, then U+0085 U+00A0 U+1680
# U+2000-200A U+2028 U+2029 U+202F U+205F U+3000; tests check this list against the regex
# module), and of one complete char (a sequence cut by the end of a buffer is never taken for
# non-whitespace).
_WS_BYTES = (rb"[\t\n\x0b\x0c\r\x1c-\x1f ]|\xc2[\x85\xa0]|\xe1\x9a\x80|\xe2\x80[\x80-\x8a\xa8\xa9\xaf]"
             rb"|\xe2\x81\x9f|\xe3\x80\x80")
_CHAR_BYTES = rb"(?=[\x00-\x7f]|[\xc2-\xdf][\x80-\xbf]|[\xe0-\xef][\x80-\xbf]{2}|[\xf0-\xf4][\x80-\xbf]{3})"


class Rule:
    """A named pattern's newline cut: ``text`` and ``data`` (``(?r)``: search backwards, the
    last cut wins) find it in a str and in UTF-8 bytes; ``sample`` is the sampler's ``_CUT``
    (newline cut or a space after non-whitespace, searched forwards); ``kind`` numbers the rule
    for the compiled sampler (``sample._next_cut``). Each is compiled when first used (a run
    that cuts nothing, one from word counts, imports no ``regex``)."""

    def __init__(self, kind: int, text: str, data: bytes, sample: str):
        self.kind = kind
        self._sources = {"text": text, "data": data, "sample": sample}

    @functools.cached_property
    def text(self) -> regex.Pattern:
        return matcher(self._sources["text"])

    @functools.cached_property
    def data(self) -> regex.Pattern:
        return matcher(self._sources["data"])

    @functools.cached_property
    def sample(self) -> regex.Pattern:
        return matcher(self._sources["sample"])


_NL = Rule(0, r"(?r)\n(?=[^\s\x1c-\x1f])", rb"(?r)\n(?!" + _WS_BYTES + rb")" + _CHAR_BYTES,
           r"\n(?=\S)|(?<=\S)(?= )")
_NL_NO_SLASH = Rule(1, r"(?r)\n(?=[^\s\x1c-\x1f/])", rb"(?r)\n(?!" + _WS_BYTES + rb"|/)" + _CHAR_BYTES,
                    r"\n(?=[^\s/])|(?<=\S)(?= )")
_NL_ALONE = Rule(2, r"(?r)(?<![\s\x1c-\x1f])\n(?=[^\s\x1c-\x1f])",
                 rb"(?r)(?<!" + _WS_BYTES + rb")\n(?!" + _WS_BYTES + rb")" + _CHAR_BYTES,
                 r"(?<=\S)\n(?=\S)|(?<=\S)(?= )")
#: The cut rule of each named pattern.
RULES = {"cl100k": _NL, "qwen2": _NL, "o200k": _NL_NO_SLASH, "gpt2": _NL_ALONE, "deepseek_v3": _NL}

#: A custom regex's cut is at least this many characters before the end of the text read so far:
#: its matches up to there are taken to be the whole document's, which holds unless one attempt
#: to match reads this far ahead of where its match ends.
REGEX_MARGIN = 1 << 16
#: ... and the matches of this many characters before the cut are checked to be the same when
#: the text ends at the cut.
REGEX_CHECK = 1 << 14


def rule(pattern: Pattern) -> Rule | None:
    """The cut rule of a named pattern; None for a custom regex."""
    return RULES.get(pattern.name)


def split_point(text: str | bytes | bytearray, pattern: Pattern, start: int = 0) -> int:
    """Index into ``text`` (a str, or UTF-8 bytes that start at a cut or at the document's start)
    of the last safe cut at or after ``start``; 0 if none. A named pattern's rule gives the same
    cut for a str and its bytes; a custom regex's cut is where one of its matches ends
    (:func:`regex_split_point`). Example: ``split_point(b"a\\nb", NAMED["gpt2"]) == 2``."""
    r = rule(pattern)
    if r is None:
        return regex_split_point(text, pattern.regex, start)
    m = (r.text if isinstance(text, str) else r.data).search(text, start)
    return m.end() if m else 0


@functools.cache
def matcher(rx: str | bytes) -> regex.Pattern:
    """``rx`` compiled once by the ``regex`` package."""
    import regex

    return regex.compile(rx)


def pieces(rx: str, text: str, pos: int = 0, endpos: int | None = None, *, concurrent: bool = False) -> list[str]:
    """The matches of ``rx`` in ``text[pos:endpos]``, whole (as tiktoken and HF take them; a
    regex with groups is not read as ``findall`` reads it), e.g. ``pieces(r"(a)b", "abab") == ["ab", "ab"]``."""
    m = matcher(rx)
    end = len(text) if endpos is None else endpos
    if m.groups == 0:
        return m.findall(text, pos, end, concurrent=concurrent)
    return [x.group() for x in m.finditer(text, pos, end, concurrent=concurrent)]


def regex_split_point(text: str | bytes | bytearray, rx: str, start: int = 0) -> int:
    """The last end of a non-empty match of ``rx`` at least ``REGEX_MARGIN`` characters before the
    end of ``text`` (a str, or UTF-8 bytes) and at or after ``start``, matching from ``text``'s
    start (which must be the document's start or such a cut), as an index into ``text``; 0 if
    none.

    The cut is kept only where it changes nothing: the matches of the ``REGEX_CHECK`` characters
    before it are the same when the text ends there (a look-ahead or a backtracking alternative
    may see the end), and the chars on both sides are valid UTF-8 (so each side decodes as the
    whole would). Costs one pass of the regex over ``text``."""
    fast = _compiled_split_point(text, rx, start)
    if fast is not None:
        return fast
    if isinstance(text, str):
        s = text
    else:
        s = bytes(text).decode("utf-8", "surrogateescape")  # one char per invalid byte, exactly reversible
    limit = len(s) - REGEX_MARGIN
    if limit <= 0:
        return 0
    found = pieces(rx, s, concurrent=True)
    lens = np.fromiter(map(len, found), np.int64, len(found))
    ends = np.cumsum(lens)
    if not found or ends[-1] != len(s):
        return _sparse_split_point(s, rx, limit, start, text)
    # the matches cover the text end to end (as a pre-tokenizer's do): their ends are the sums
    k = int(np.searchsorted(ends, limit, side="right")) - 1
    while k >= 0:
        c = int(ends[k])
        if lens[k] == 0 or not _valid_around(s, c):
            k -= 1
            continue
        a = int(np.searchsorted(ends, c - REGEX_CHECK, side="left"))  # the first match ending >= c - CHECK
        lo = int(ends[a - 1]) if a > 0 else 0
        if pieces(rx, s, lo, c) == found[a : k + 1]:
            return _index(text, s, c, start)
        k = a - 1  # a cut before the window that failed
    return 0


def _compiled_split_point(text: str | bytes | bytearray, rx: str, start: int) -> int | None:
    """``regex_split_point`` with the scanner compiled from ``rx`` (:mod:`toktok.count.rx`), or
    outside its subset with PCRE2's (:mod:`toktok.count.pcre`), on the UTF-8 bytes, the same cut at
    compiled speed; None when neither takes ``rx`` (or PCRE2 hands the text back) or the text holds
    invalid UTF-8 (but for a char cut by the end, which is left out: it is within the
    margin). A match's end and the window before it are counted in chars, as there."""
    from .pcre.count import scanner as pcre_scanner
    from .rx import compile as compile_rx, why_not

    c_rx = compile_rx(rx) if why_not(rx) is None else pcre_scanner(rx)  # (PCRE2's: outside the subset)
    if c_rx is None:
        return None
    b = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else bytes(text)
    try:
        b.decode("utf-8")
        cut_chars = 0
    except UnicodeDecodeError as e:
        if e.end != len(b) or e.reason != "unexpected end of data":
            return None
        cut_chars, b = len(b) - e.start, b[: e.start]
    data = np.frombuffer(b, np.uint8) if b else np.zeros(1, np.uint8)
    chars = np.zeros(len(b) + 1, np.int64)  # the char index of each byte offset
    np.cumsum((data[: len(b)] & 0xC0) != 0x80, out=chars[1:])
    limit = int(chars[-1]) + cut_chars - REGEX_MARGIN
    if limit <= 0:
        return 0
    spans = c_rx.spans(data, np.array([0, len(b)], np.int64))
    if spans is None:  # (PCRE2 hands a document back: regex splits it)
        return None
    k = int(np.searchsorted(chars[spans[:, 1]], limit, side="right")) - 1 if len(spans) else -1
    while k >= 0:
        lo_b, c = int(spans[k, 0]), int(spans[k, 1])
        if c == lo_b:
            k -= 1
            continue
        a = int(np.searchsorted(chars[spans[:, 1]], chars[c] - REGEX_CHECK, side="left"))
        lo = int(spans[a - 1, 1]) if a > 0 else 0  # where the search that found match a started
        again = c_rx.spans(data, np.array([0, c], np.int64), at=lo)
        if again is None:
            return None
        if np.array_equal(again, spans[a : k + 1]):
            i = int(chars[c]) if isinstance(text, str) else c
            return i if i >= start and i > 0 else 0
        k = a - 1
    return 0


def compiled_spans(rx: str, data: np.ndarray, *, compile: bool = True) -> np.ndarray | None:
    """The (start, end) byte offsets of the pieces of ``rx`` in the UTF-8 text ``data`` (uint8),
    found by the scanner compiled from ``rx`` (:mod:`toktok.count.rx`), or outside its subset by
    PCRE2's (:mod:`toktok.count.pcre`), the same pieces as :func:`pieces` at compiled speed; None
    when neither takes ``rx`` (or PCRE2 hands the text back), or (``compile`` False) when the
    kernel is not in Numba's cache yet (a first use after an install compiles it: tens of seconds).
    Example: ``compiled_spans(r"\\w+|\\W+", np.frombuffer(b"a b", np.uint8)).tolist() == [[0, 1], [1, 2], [2, 3]]``."""
    from .._kernels import compiled
    from .pcre.count import scanner as pcre_scanner
    from .rx import compile as compile_rx, why_not

    if why_not(rx) is None:
        from .rx.vm import _ends_kernel as kernel

        scanner = compile_rx(rx)
    else:
        from .pcre.kernel import _spans_pcre as kernel

        scanner = pcre_scanner(rx)
    if scanner is None or (not compile and not compiled((kernel,))):
        return None
    n = int(data.shape[0])
    buf = data if n else np.zeros(1, np.uint8)
    return scanner.spans(buf, np.array([0, n], np.int64))


def _sparse_split_point(s: str, rx: str, limit: int, start: int, text) -> int:
    """``regex_split_point`` for a regex whose matches leave gaps: from ``finditer``'s spans."""
    spans = [m.span() for m in matcher(rx).finditer(s, concurrent=True)]
    k = len(spans) - 1
    while k >= 0:
        b, c = spans[k]
        if c > limit or c == b or not _valid_around(s, c):
            k -= 1
            continue
        a = k
        while a > 0 and spans[a - 1][1] >= c - REGEX_CHECK:
            a -= 1
        lo = spans[a - 1][1] if a > 0 else 0  # where the search that found match a started
        if [m.span() for m in matcher(rx).finditer(s, lo, c)] == spans[a : k + 1]:
            return _index(text, s, c, start)
        k = a - 1
    return 0


def _valid_around(s: str, c: int) -> bool:
    """Whether the chars on both sides of ``c`` are not escaped invalid bytes (U+DC80-DCFF)."""
    return all(not ("\udc80" <= s[i] <= "\udcff") for i in (c - 1, c) if 0 <= i < len(s))


def _index(text, s: str, c: int, start: int) -> int:
    """Char index ``c`` of ``s`` as an index into ``text`` (bytes: its UTF-8 offset); 0 before ``start``."""
    i = c if isinstance(text, str) else len(s[:c].encode("utf-8", "surrogateescape"))
    return i if i >= start and i > 0 else 0


__all__ = ["RULES", "Rule", "rule", "split_point", "regex_split_point", "pieces", "compiled_spans", "matcher",
           "REGEX_MARGIN", "REGEX_CHECK"]
