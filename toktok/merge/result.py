"""What one call of ``learn_merges`` returns, below both of its paths (the compiled loop in
``learn`` and the Python loop in ``small``): ``learn_merges(...).vocab``."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..vocab import Vocab


@dataclass
class MergeResult:
    """What one call of ``learn_merges`` learned.

    ``left``/``right``/``token``/``count``/``reused`` are parallel arrays, one entry per merge in
    the order the merges were applied; ``reused`` marks merges whose bytes already were a token
    (no new id). ``vocab`` is the starting vocabulary plus the new tokens. ``stats`` counts what
    the loop did (``STATS``: the largest table, pool and heap, heap pops, list entries read, pool
    compactions and growths, table rebuilds, heap refills, lists sorted, ...) and ``times`` its
    stages' seconds (segment, layout, setup, loop, their CPU seconds, total), for benchmarks.
    """

    vocab: Vocab
    left: np.ndarray
    right: np.ndarray
    token: np.ndarray
    count: np.ndarray
    reused: np.ndarray
    requested: int
    word_tokens: np.ndarray  # tokens per input word after the merges, in input order
    stats: dict[str, int] = field(default_factory=dict)
    times: dict[str, float] = field(default_factory=dict)

    @property
    def new_tokens(self) -> int:
        return int((~self.reused).sum())

    @property
    def stopped_at(self) -> int:
        """The count of the best pair left when ``min_frequency`` ended the loop early, else 0."""
        return int(self.stats.get("min_frequency_stop", 0))
