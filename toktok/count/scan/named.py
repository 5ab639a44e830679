"""Which compiled scanner counts a pattern (:mod:`toktok.patterns`), and the class tables it reads:
a named pattern's own, else the one compiled from its regex (:mod:`toktok.count.rx`); a regex
outside the compiled subset counts with PCRE2's JIT from compiled code (:mod:`toktok.count.pcre`),
or, where PCRE2 may not count it exactly as ``regex`` would, through ``regex`` (:mod:`.reference`). A new scanner is one
module beside these, its kernel added to ``_SCANNERS`` and listed in ``toktok/kernels.json``.
Example: ``scanner_name(patterns.DEFAULT) == "_scan_into"``."""
from __future__ import annotations

from ...patterns import Pattern
from .cl100k import _scan_into
from .classes import _byte_classes, _class_tables, _o200k_swar_ok, _o200k_tables, _superbpe_tables, _swar_ok
from .gpt2 import _scan_gpt2
from .o200k import _scan_o200k
from .qwen2 import _scan_qwen2
from .superbpe import _scan_superbpe

#: Each named pattern's kernel (and superbpe's, a pattern toktok names for a phase).
_SCANNERS = {"cl100k": _scan_into, "o200k": _scan_o200k, "gpt2": _scan_gpt2, "qwen2": _scan_qwen2,
             "superbpe": _scan_superbpe}


def _scanner(pattern: Pattern):
    """The compiled scanner of ``pattern``: a named pattern's own, else the one compiled from its
    regex (:mod:`toktok.count.rx`), else PCRE2's (:mod:`toktok.count.pcre`), or None when it
    counts through ``regex``."""
    if pattern.name in _SCANNERS:
        return _SCANNERS[pattern.name]
    from ..rx.count import scanner

    got = scanner(pattern.regex)
    if got is None:
        from ..pcre.count import scanner as pcre_scanner

        got = pcre_scanner(pattern.regex)
    return got


def _kernel_of(pattern: Pattern):
    """The Numba kernel ``pattern``'s scanner runs (to ask whether it is compiled; None: it has
    none), read without loading Numba."""
    if pattern.name in _SCANNERS:
        return _SCANNERS[pattern.name]
    scanner = _scanner(pattern)
    return None if scanner is None else scanner.kernel


def scanner_name(pattern: Pattern) -> str | None:
    """The unit ``toktok.ahead`` builds ``pattern``'s compiled scanner in: its own scanner's name,
    ``"rx"`` for the scanner compiled from its regex (None: it counts through PCRE2 or ``regex``,
    which are not built ahead). Example: ``scanner_name(patterns.DEFAULT) == "_scan_into"``."""
    scanner = _SCANNERS.get(pattern.name)
    if scanner is not None:
        return scanner.py_func.__name__
    from ..rx import why_not

    return "rx" if why_not(pattern.regex) is None else None


def has_scanner(pattern: Pattern) -> bool:
    """Whether ``pattern`` counts through a compiled scanner (else through ``regex``).
    Example: ``has_scanner(patterns.DEFAULT)``."""
    return _scanner(pattern) is not None


def count_path(pattern: Pattern) -> str:
    """How ``pattern``'s words are counted, said once per run: by its own scanner, by the
    scanner compiled from its regex, by PCRE2's JIT (outside the compiled subset, and why), or
    through ``regex`` and why.
    Example: ``count_path(patterns.DEFAULT) == "its own compiled scanner"``."""
    if pattern.name in _SCANNERS:
        return "its own compiled scanner"
    from ..pcre import describe, why_not as pcre_why_not
    from ..rx import why_not

    why = why_not(pattern.regex)
    if why is None:
        return "the scanner compiled from its regex"
    no = pcre_why_not(pattern.regex)
    if no is None:
        return describe(pattern.regex, why)
    return f"regex (outside the compiled subset: {why}; not PCRE2: {no})"


def _scan_tables(pattern: Pattern) -> tuple:
    """(kernel, per-byte classes, per-code-point classes, folds, whether 8 bytes at a time may be
    read) of a pattern's scanner (the one compiled from a regex reads none of the tables)."""
    if pattern.name not in _SCANNERS:
        return _scanner(pattern), None, None, None, False
    flags, fold = _class_tables()
    if pattern.name == "o200k":
        ac, flags16 = _o200k_tables()
        return _scan_o200k, ac, flags16, fold, _o200k_swar_ok()
    if pattern.name == "superbpe":
        ac, flags = _superbpe_tables()
        return _scan_superbpe, ac, flags, fold, _swar_ok()
    return _SCANNERS[pattern.name], _byte_classes(), flags, fold, _swar_ok()
