"""Looking inside: the run file's views and insight tables (``runfile``), comparing tokenizers on
text (``evaluate``) and rendering both for the terminal (``report``).

The names below load ``runfile`` (DuckDB, NumPy, Arrow) on first use, so that the CLI's renderers
(``report``) import without them.
Example: ``from toktok.insight import compression_curve, word_gains``.
"""
from __future__ import annotations

__all__ = ["add_views", "compression_curve", "describe", "query", "word_gains"]


def __getattr__(name: str):
    if name in __all__:
        from . import runfile

        return getattr(runfile, name)
    raise AttributeError(f"module 'toktok.insight' has no attribute {name!r}")
