"""The merge stage of a small run in plain Python: the same training definition as the compiled
loop, for a word table small enough that loading the loop's kernels (seconds) costs more than
learning its merges here.

``learn_small`` segments the words with tiktoken's own rank BPE (the segmentation's definition)
and learns the merges with a pair-count dictionary and a lazy max-heap ordered by (count, then
the smaller (left bytes, right bytes)): the winner, the left-to-right replacement, overlaps
counted, reused tokens, each word's final number of tokens, all as ``learn_merges`` returns
them (tests/test_merge.py holds the two equal). NumPy is used only for the result's arrays.
Example: ``learn_small([b"abab"], [3], Vocab.base(False), 1).vocab.tokens[256] == b"ab"``.
"""
from __future__ import annotations

import heapq
import time

import numpy as np

from ..vocab import Vocab
from .result import MergeResult
from .segment import tiktoken_bpe

#: Word tables up to this many words (and ``SMALL_POSITIONS`` bytes of words) take the Python
#: loop when the run is small (``learn_merges(reference=True)``). In a run that has loaded no
#: kernel before its merge stage, the stage took (load 8, merge stage of the run file):
#: 40 documents 0.53-0.55 s in Python against 2.1-2.4 s compiled (200 merges), 0.9-1.3 s against
#: 0.8-2.0 s (2,000); 120 documents (7,880 words, 60 KB) 0.7-0.9 against 1.2-3.3 s (200),
#: 1.8-2.0 against 1.5-2.4 s (2,000). The loop's time grows with the words: the demo's 26,547
#: took 1.2 s in Python (quiet machine) against ~0.8 s compiled, Numba's start and loading included.
SMALL_WORDS = 1 << 13
SMALL_POSITIONS = 1 << 16
#: While the loop is not in Numba's cache (a first run: compiling it takes ~7 s of a core), a
#: small run's word tables up to this many words (and ``COLD_POSITIONS`` bytes) take the Python
#: loop too: 2,000 merges took 0.9 s on 20,358 words, 1.2 s on the demo's 26,547 and 3.0 s on
#: 62,745 (8,000 merges: 1.0, -, 3.4 s), and a run this small compiles nothing.
COLD_WORDS = 1 << 16
COLD_POSITIONS = 1 << 19


def small_enough(words, most_words: int = SMALL_WORDS, most_bytes: int = SMALL_POSITIONS) -> bool:
    """Whether ``learn_small`` is the quicker way for this word table (a list of bytes or an Arrow
    binary array): at most ``most_words`` words of at most ``most_bytes`` bytes in all.
    Example: ``small_enough([b"the", b" cat"])``."""
    n = len(words)
    if n > most_words:
        return False
    if isinstance(words, list):
        total = sum(map(len, words))
    else:  # the words' bytes, not the array's ``nbytes`` (its offsets too: 8 bytes a word)
        total = sum(map(len, words.to_pylist()))
    return total <= most_bytes


def python_first(words) -> bool:
    """Whether a small run's word table takes ``learn_small``: up to ``SMALL_WORDS`` words always,
    up to ``COLD_WORDS`` while the loop does not load cheaply (``_kernels.ready``: not built ahead,
    nor in the cache of a Numba this process loaded already; asking Numba's cache would import
    Numba, ~0.3 s and ~70 MB of a first run after an install, to save ~0.2 s of merging at most).
    Example: ``python_first([b"the", b" cat"])``."""
    if small_enough(words):
        return True
    if not small_enough(words, COLD_WORDS, COLD_POSITIONS):
        return False
    from .._kernels import ready
    from .loop import _loop

    return not ready((_loop,))


def _pairs(w: list[int]):
    return zip(w, w[1:])


def _replace(w: list[int], a: int, b: int, t: int) -> list[int]:
    """``w`` with every (a, b) replaced by ``t``, left to right."""
    out, i, n = [], 0, len(w)
    while i < n:
        if i + 1 < n and w[i] == a and w[i + 1] == b:
            out.append(t)
            i += 2
        else:
            out.append(w[i])
            i += 1
    return out


def _pair_counts(ws: list[list[int]], cs: list[int]):
    """Each adjacent pair's count over the words, and the words it occurs in."""
    pc: dict[tuple[int, int], int] = {}
    where: dict[tuple[int, int], set[int]] = {}
    for i, w in enumerate(ws):
        c = cs[i]
        for p in _pairs(w):
            pc[p] = pc.get(p, 0) + c
            where.setdefault(p, set()).add(i)
    return pc, where


def _merge_everywhere(a: int, b: int, t: int, ws, cs, pc, where, heap, tokens, allowed) -> None:
    """(a, b) replaced by ``t`` in every word holding it; the pairs' counts, the words they occur
    in and the heap (the changed counts pushed, older entries left to be skipped) updated. Only
    pairs holding a, b or t change: the others are the same, as often, before and after, and a
    pair new to a word holds t (so only those are added to ``where``)."""
    delta: dict[tuple[int, int], int] = {}
    get, near = delta.get, {a, b, t}
    for i in where.pop((a, b)):
        w, c = ws[i], cs[i]
        w2 = _replace(w, a, b, t)
        if len(w2) == len(w):
            continue
        for p in zip(w, w[1:]):
            if p[0] in near or p[1] in near:
                delta[p] = get(p, 0) - c
        for p in zip(w2, w2[1:]):
            if p[0] == t or p[1] == t:
                delta[p] = get(p, 0) + c
                where.setdefault(p, set()).add(i)
            elif p[0] in near or p[1] in near:
                delta[p] = get(p, 0) + c
        ws[i] = w2
    for p, d in delta.items():
        if d:
            v = pc[p] = pc.get(p, 0) + d
            if v > 0 and allowed(*p):
                heapq.heappush(heap, (-v, tokens[p[0]], tokens[p[1]], p[0], p[1]))
    pc.pop((a, b), None)


def learn_small(words, counts, vocab: Vocab, n_merges: int, checkpoint=None, *, max_token_length: int | None = None,
                min_frequency: int | None = None, progress=None):
    """``learn_merges(words, counts, vocab, n_merges, max_token_length=..., min_frequency=...)``
    without a compiled kernel: the same ``MergeResult`` (merges, grown vocabulary, tokens per word,
    ``stopped_at``; ``stats`` holds only ``new_tokens``, ``merges_made`` and
    ``min_frequency_stop``), or None where tiktoken cannot segment under ``vocab``.
    ``checkpoint`` is called once, with all the merges; ``progress(n)`` every 100 new tokens."""

    t0 = time.perf_counter()
    tokens = list(vocab.tokens)
    bpe = tiktoken_bpe(tokens)
    if bpe is None:
        return None
    segment, ranks = bpe  # the ranks grow with the merges below
    raw = words.to_pylist() if hasattr(words, "to_pylist") else list(words)
    cs = [int(c) for c in np.asarray(counts, dtype=np.int64).tolist()]
    if len(cs) != len(raw):
        raise ValueError(f"{len(raw)} words but {len(cs)} counts")
    if cs and min(cs) < 0:
        raise ValueError("counts must be >= 0")
    ws = [segment(w) for w in raw]
    t_seg = time.perf_counter() - t0

    pc, where = _pair_counts(ws, cs)
    longest = max_token_length if max_token_length is not None else -1

    def allowed(a: int, b: int) -> bool:  # a pair whose token would be too long is never merged
        return longest < 0 or len(tokens[a]) + len(tokens[b]) <= longest

    heap = [(-c, tokens[a], tokens[b], a, b) for (a, b), c in pc.items() if c > 0 and allowed(a, b)]
    heapq.heapify(heap)
    left, right, made, count, reused = [], [], [], [], []
    new = stop = 0
    while new < n_merges and heap:
        nc, _, _, a, b = heap[0]
        if pc.get((a, b), 0) != -nc:  # an older count of this pair
            heapq.heappop(heap)
            continue
        if min_frequency is not None and -nc < min_frequency:  # the best pair left is too rare
            stop = -nc
            break
        heapq.heappop(heap)
        merged = tokens[a] + tokens[b]
        t = ranks.get(merged)
        reused.append(t is not None)
        if t is None:
            t = len(tokens)
            tokens.append(merged)
            ranks[merged] = t
            new += 1
            if progress is not None and new % 100 == 0:
                progress(new)
        left.append(a)
        right.append(b)
        made.append(t)
        count.append(-nc)
        _merge_everywhere(a, b, t, ws, cs, pc, where, heap, tokens, allowed)
    rec = (np.array(left, np.int32), np.array(right, np.int32), np.array(made, np.int32),
           np.array(count, np.int64), np.array(reused, np.bool_))
    if checkpoint is not None:
        checkpoint(*(r.copy() for r in rec))
    out = Vocab(tokens, list(vocab.specials))
    word_tokens = np.fromiter(map(len, ws), np.int64, len(ws))
    times = {"segment": t_seg, "total": time.perf_counter() - t0}
    stats = {"new_tokens": new, "merges_made": len(left), "min_frequency_stop": stop}
    return MergeResult(out, *rec, requested=n_merges, tokens_per_word=word_tokens, stats=stats, times=times)
