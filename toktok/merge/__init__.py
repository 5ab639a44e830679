"""The merge stage: a word table and a starting vocabulary in, the merges in order out.

Example: ``from toktok.merge import learn_merges``.
"""
from .loop import MergeResult, Segmenter, learn_merges

__all__ = ["MergeResult", "Segmenter", "learn_merges"]
