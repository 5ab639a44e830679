"""A simple, obviously-correct BPE trainer: the definition the fast loop is held to.

Words are tuples of token ids. Each round counts nothing anew: pair counts are kept exactly by
removing a touched word's pairs and adding them back after the rewrite. The winner is the pair with
the highest count; ties go to the smallest (left bytes, right bytes).
"""
from __future__ import annotations

from collections import Counter, defaultdict


def rank_bpe(piece: bytes, ranks: dict[bytes, int]) -> list[int]:
    """tiktoken's encoding of one piece: whole-piece lookup, then merge the lowest-rank pair, leftmost first."""
    if piece in ranks:
        return [ranks[piece]]
    parts = [bytes([b]) for b in piece]
    while True:
        best = None
        for i in range(len(parts) - 1):
            r = ranks.get(parts[i] + parts[i + 1])
            if r is not None and (best is None or r < best[0]):
                best = (r, i)
        if best is None:
            break
        i = best[1]
        parts[i : i + 2] = [parts[i] + parts[i + 1]]
    return [ranks[p] for p in parts]


def _pairs(word):
    return [(word[i], word[i + 1]) for i in range(len(word) - 1)]


def _merge_word(word, a, b, t):
    out, i = [], 0
    while i < len(word):
        if i + 1 < len(word) and word[i] == a and word[i + 1] == b:
            out.append(t)
            i += 2
        else:
            out.append(word[i])
            i += 1
    return tuple(out)


def train(word_counts: dict[bytes, int], tokens: list[bytes], n_merges: int, return_words: bool = False,
          max_token_length: int | None = None, min_frequency: int | None = None):
    """Returns (tokens after training, list of (left, right, token, count, reused)) and, with
    ``return_words``, each word's final token ids. ``max_token_length``: pairs whose merged bytes
    are longer are never merged; ``min_frequency``: stop when the best pair's count is below it."""
    tokens = list(tokens)
    ranks = {t: i for i, t in enumerate(tokens)}
    words = [rank_bpe(w, ranks) for w in word_counts]
    words = [tuple(w) for w in words]
    counts = list(word_counts.values())
    pair_count: Counter = Counter()
    where = defaultdict(set)
    for wi, w in enumerate(words):
        for p in _pairs(w):
            pair_count[p] += counts[wi]
            where[p].add(wi)
    merges = []
    new = 0
    while new < n_merges:
        pair_count = Counter({p: c for p, c in pair_count.items() if c > 0})
        allowed = {p: c for p, c in pair_count.items()
                   if max_token_length is None or len(tokens[p[0]]) + len(tokens[p[1]]) <= max_token_length}
        if not allowed:
            break
        top = max(allowed.values())
        if min_frequency is not None and top < min_frequency:
            break
        a, b = min((p for p, c in allowed.items() if c == top), key=lambda p: (tokens[p[0]], tokens[p[1]]))
        merged = tokens[a] + tokens[b]
        reused = merged in ranks
        if reused:
            t = ranks[merged]
        else:
            t = len(tokens)
            tokens.append(merged)
            ranks[merged] = t
            new += 1
        for wi in sorted(where[(a, b)]):
            w = words[wi]
            for p in _pairs(w):
                pair_count[p] -= counts[wi]
            w2 = _merge_word(w, a, b, t)
            words[wi] = w2
            for p in _pairs(w2):
                pair_count[p] += counts[wi]
                where[p].add(wi)
        merges.append((a, b, t, top, reused))
    if return_words:
        return tokens, merges, words
    return tokens, merges
