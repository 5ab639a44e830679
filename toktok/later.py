"""Modules a run needs only after its merge loop, imported while the loop runs.

Imported with the command, such a module (Rich's console and table, for the CLI's closing
summary) holds the one core a run has before its loop (the other idles, or reads a word-count
table); imported where it is first used, after the loop, it lies on the run's longest path.
Whoever defers such an import names the module (:func:`soon`); the merge stage calls
:func:`load` once its loop has learned half its merges (the loop holds no GIL, on a core of its
own; its first rounds, the largest, share the other), in the thread that polls the loop, which
imports them between two polls: the thread that uses them later, so no other thread imports
them meanwhile. A module that fails to import is left to its first use,
which says what is wrong. Standard library only.
Example: ``soon("toktok.printed")``, then, beside the loop, ``load()``.
"""
from __future__ import annotations

import importlib
import threading

_NAMES: list[str] = []  # the modules named, not imported yet
_LOCK = threading.Lock()


def soon(*names: str) -> None:
    """Import the modules ``names`` beside the next merge loop (:func:`load`)."""
    with _LOCK:
        _NAMES.extend(n for n in names if n not in _NAMES)


def load() -> None:
    """Import the modules named (:func:`soon`), once each; one that fails is left to its first use."""
    if not _NAMES:
        return
    with _LOCK:
        names = _NAMES[:]
        _NAMES.clear()
    for name in names:
        try:
            importlib.import_module(name)
        except Exception:  # (its first use raises it, where it is wanted)
            pass


__all__ = ["load", "soon"]
