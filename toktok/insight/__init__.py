"""Looking inside: the run file's views and insight tables (``runfile``), comparing tokenizers on
text (``evaluate``) and rendering both for the terminal (``report``).

Example: ``from toktok.insight import compression_curve, word_gains``.
"""
from .runfile import add_views, compression_curve, describe, query, word_gains

__all__ = ["add_views", "compression_curve", "describe", "query", "word_gains"]
