"""The merge stage: a word table and a starting vocabulary in, the merges in order out.

Owns the BPE training definition: the pair with the highest total count wins (overlaps
counted), ties go to the smallest (left bytes, right bytes) (``heap._before``), it is replaced
left to right in every word, and merged bytes that already are a token reuse it. Modules, from
the entry point down: ``learn`` (``learn_merges``, ``MergeResult``, ``Tuning``), ``segment``
(tiktoken's rank-BPE: ``segment``, ``Segmenter``, ``token_splits``, ``splits_ready``), ``small``
(a small run's loop in Python: ``small_enough``), ``loop`` (the compiled
loop), ``heap`` (the lazy max-heap and the tie-break), ``table`` (pair table and position
lists), ``layout`` (the position array), ``tokens`` (token bytes and their hash table). Where
the time and memory go, and what was tried: ``bench/probes/merge_only.py`` and the performance docs.

Example: ``from toktok.merge import learn_merges``.
"""
from .learn import STATS, MergeResult, Tuning, learn_merges
from .segment import Segmenter, segment, splits_ready, token_splits
from .small import small_enough

__all__ = ["STATS", "MergeResult", "Segmenter", "Tuning", "learn_merges", "segment", "small_enough", "splits_ready",
           "token_splits"]
