"""Which compiled scanner counts a named pattern (:mod:`toktok.patterns`), and the class tables it
reads; a pattern without one counts through ``regex`` (:mod:`.reference`). A new scanner is one
module beside these, its kernel added to ``_SCANNERS`` and listed in ``toktok/kernels.json``.
Example: ``scanner_name(patterns.DEFAULT) == "_scan_into"``."""
from __future__ import annotations

from ...patterns import Pattern
from .cl100k import _scan_into
from .classes import _byte_classes, _class_tables, _o200k_swar_ok, _o200k_tables, _swar_ok
from .gpt2 import _scan_gpt2
from .o200k import _scan_o200k
from .qwen2 import _scan_qwen2

#: Each named pattern's kernel.
_SCANNERS = {"cl100k": _scan_into, "o200k": _scan_o200k, "gpt2": _scan_gpt2, "qwen2": _scan_qwen2}


def _scanner(pattern: Pattern):
    """The compiled scanner of ``pattern``, or None when it counts through ``regex``."""
    return _SCANNERS.get(pattern.name) if pattern.named else None


def scanner_name(pattern: Pattern) -> str | None:
    """The name of ``pattern``'s compiled scanner (None: it counts through ``regex``), as
    ``toktok.ahead`` lists it. Example: ``scanner_name(patterns.DEFAULT) == "_scan_into"``."""
    scanner = _scanner(pattern)
    return None if scanner is None else scanner.py_func.__name__


def has_scanner(pattern: Pattern) -> bool:
    """Whether ``pattern`` counts through a compiled scanner (else through ``regex``).
    Example: ``has_scanner(patterns.DEFAULT)``."""
    return _scanner(pattern) is not None


def _scan_tables(pattern: Pattern) -> tuple:
    """(kernel, per-byte classes, per-code-point classes, folds, whether 8 bytes at a time may be
    read) of a named pattern's scanner."""
    flags, fold = _class_tables()
    if pattern.name == "o200k":
        ac, flags16 = _o200k_tables()
        return _scan_o200k, ac, flags16, fold, _o200k_swar_ok()
    return _SCANNERS[pattern.name], _byte_classes(), flags, fold, _swar_ok()
