"""The general path: a regex outside the compiled subset (:mod:`toktok.count.rx`) counted by the
system's PCRE2 and its JIT (:mod:`.lib`, through ctypes) from a Numba kernel (:mod:`.kernel`) on the
counting threads, into the same per-thread word tables: no Python object per piece.

:func:`plan` decides whether PCRE2 may count a regex, exactly as ``regex`` would, or why not:

- the regex is read and written for PCRE2 (:mod:`.read`: what the two engines spell differently is
  rewritten, what they may read differently is refused);
- each one-character atom (a class, ``\\p{..}``, ``\\s``, ``.``, a literal under ``(?i)``; ``\\w``
  for ``\\b``) is matched by both engines against every code point: the code points where any atom
  differs (PCRE2's Unicode tables are older than ``regex``'s: newly assigned letters, digits) are
  *routed*: a document holding one counts through ``regex`` instead (the kernel checks each
  document first). Where they differ on an ASCII char or on more than ``MOST_ROUTED`` code points
  PCRE2 already has as assigned, the regex stays with ``regex``;
- both engines split the probe set of the pattern check (edge strings, the regex's literals in
  context, seeded random strings) alike, or the regex stays with ``regex``.

Example: ``plan(r"(\\p{L})\\1|\\p{L}+|\\s+|.").why == ""`` on a system with PCRE2's JIT.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from . import lib
from .read import Unreadable, read

#: The most code points PCRE2 has as assigned that may be routed (classed differently by the two
#: engines) before a regex stays with ``regex`` (a change of a char's category between the two
#: engines' Unicode versions: a few; another reading of a property: thousands).
MOST_ROUTED = 256


@dataclass
class Plan:
    """How PCRE2 counts a regex: its ``code`` (:class:`lib.Code`), ``routed`` (a bitmap over the
    code points: a document holding one counts through ``regex``), how many are routed, and
    ``why`` not ("" when it may)."""

    regex: str
    why: str = ""
    code: lib.Code | None = None
    routed: np.ndarray | None = None
    n_routed: int = 0


def _all_code_points() -> tuple[str, np.ndarray]:
    from ...pattern_checks import _code_points

    text = _code_points()
    return text, np.frombuffer(text.encode("utf-32-le"), np.uint32)


@functools.lru_cache(maxsize=1)
def _all_utf8() -> tuple[bytes, np.ndarray]:
    """Every code point (no surrogates) as UTF-8, and each byte's char index."""
    text, _ = _all_code_points()
    b = text.encode("utf-8")
    lead = (np.frombuffer(b, np.uint8) & 0xC0) != 0x80
    idx = np.zeros(len(b) + 1, np.int64)
    np.cumsum(lead, out=idx[1:])
    return b, idx


def _pcre_members(atom: str) -> np.ndarray:
    """Which code points (of ``pattern_checks._code_points``) PCRE2 matches ``atom`` at."""
    b, idx = _all_utf8()
    mask = np.zeros(idx[-1], dtype=bool)
    for a, z in lib.Code(f"(?:{atom})++").finditer(b):
        mask[idx[a]:idx[z]] = True
    return mask


def _routed(atoms: list[tuple[str, str]]) -> tuple[np.ndarray, str]:
    """The code points where an atom's members differ between the engines, and why PCRE2 may not
    count at all ("" when it may)."""
    from ...pattern_checks import _members

    text, cps = _all_code_points()
    diff = np.zeros(len(text), dtype=bool)
    for rx, pc in atoms:
        d = _members(rx) != _pcre_members(pc)
        if d[:128].any():
            c = int(np.flatnonzero(d)[0])
            return diff, f"{rx} holds U+{c:04X} for one engine and not the other"
        diff |= d
    if diff.any():
        assigned = ~_pcre_members(r"\p{Cn}")
        old = np.flatnonzero(diff & assigned)
        if len(old) > MOST_ROUTED:
            return diff, (f"the engines class {len(old):,} code points PCRE2 knows differently (e.g. "
                          f"U+{int(cps[old[0]]):04X}); their Unicode tables disagree")
    return diff, ""


def _probe(code: lib.Code, regex_text: str, literals: set[str], routed: set[int]) -> str:
    """The first probe text the engines split differently, said; "" when none."""
    from ...patterns import probe_texts

    rx, state = matcher(regex_text), lib.MatchState(code)
    for t in probe_texts(literals):
        if any(ord(c) in routed for c in t):
            continue
        want = [m.span() for m in rx.finditer(t)]
        b = t.encode("utf-8")
        got = [(len(b[:a].decode()), len(b[:z].decode())) for a, z in code.finditer(b, state)]
        if got != want:
            return f"PCRE2 splits {t!r} differently"
    return ""


@functools.lru_cache(maxsize=16)
def matcher(regex_text: str):
    """``regex_text`` compiled by the ``regex`` package, once (``cuts.matcher``'s, kept apart: cuts
    asks this package for its spans)."""
    import regex

    return regex.compile(regex_text)


@functools.lru_cache(maxsize=16)
def plan(regex_text: str) -> Plan:
    """Whether and how PCRE2 counts ``regex_text`` (see the module); cached per process."""
    import regex

    if lib.library() is None:
        return Plan(regex_text, why=lib.missing())
    try:
        groups = regex.compile(regex_text).groups
    except regex.error as e:
        return Plan(regex_text, why=f"the regex package cannot compile it ({e})")
    try:
        r = read(regex_text)
        code = lib.Code(r.pcre)
    except Unreadable as e:
        return Plan(regex_text, why=str(e))
    except lib.CompileError as e:
        return Plan(regex_text, why=f"PCRE2 cannot compile it ({e})")
    if code.groups != groups:
        return Plan(regex_text, why="PCRE2 reads its groups otherwise")
    diff, why = _routed(r.atoms)
    if not why:
        _, cps = _all_code_points()
        why = _probe(code, regex_text, r.literals, set(cps[diff].tolist()))
    if why:
        return Plan(regex_text, why=why)
    routed = np.zeros(0, np.uint8)  # (empty: no document is checked)
    if diff.any():
        bits = np.zeros(0x110000, dtype=bool)
        bits[_all_code_points()[1][diff]] = True
        routed = np.packbits(bits, bitorder="little")
    return Plan(regex_text, code=code, routed=routed, n_routed=int(diff.sum()))


def why_not(regex_text: str) -> str | None:
    """Why PCRE2 does not count ``regex_text`` (None: it does)."""
    return plan(regex_text).why or None


def describe(regex_text: str, outside: str) -> str:
    """The path, in words, for the run's summary (``outside``: why the compiled subset does not
    take the regex)."""
    p = plan(regex_text)
    routed = (f"; a document holding one of the {p.n_routed:,} code points its Unicode {lib.unicode_version()} "
              "tables class otherwise: through regex" if p.n_routed else "")
    return f"PCRE2 {lib.version().split()[0]}'s JIT (outside the compiled subset: {outside}{routed})"


__all__ = ["MOST_ROUTED", "Plan", "describe", "matcher", "plan", "why_not"]
