"""Vocabularies for the tests that need many tokens: built like BPE's (a token, then a short one
after it), so that many tokens have splits into later tokens too. Used only by tests."""
from __future__ import annotations

import random


def grown(n: int, alphabet: bytes, *, longest: int, seed: int = 1) -> list[bytes]:
    """The 256 bytes, then ``n`` tokens of at most ``longest`` bytes, each an earlier token of
    ``alphabet``'s letters followed by a short one (at most 3 bytes), seeded.
    Example: ``len(grown(10, b"ab", longest=8)) == 266``."""
    rng = random.Random(seed)
    tokens = [bytes([b]) for b in range(256)]
    seen, pool = set(tokens), [bytes([c]) for c in alphabet]
    short = list(pool)
    while len(tokens) < 256 + n:
        t = rng.choice(pool) + rng.choice(short)
        if len(t) <= longest and t not in seen:
            seen.add(t)
            tokens.append(t)
            pool.append(t)
            if len(t) <= 3:
                short.append(t)
    return tokens
