"""What one call of ``learn_merges`` returns, below both of its paths (the compiled loop in
``learn`` and the Python loop in ``small``): ``learn_merges(...).vocab``."""
from __future__ import annotations

import threading
from collections.abc import Callable
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
    #: tokens per input word after the merges, in input order (``word_tokens``), or the function
    #: that reads them from the loop's final positions the first time they are asked for: in the
    #: "merged" checkpoint's thread, not on the run's longest path (``merge.stage.run``)
    tokens_per_word: np.ndarray | Callable[[], np.ndarray]
    stats: dict[str, int] = field(default_factory=dict)
    times: dict[str, float] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    @property
    def word_tokens(self) -> np.ndarray:
        """Tokens per input word after the merges, in input order."""
        with self._lock:
            if callable(self.tokens_per_word):
                self.tokens_per_word = self.tokens_per_word()
            return self.tokens_per_word

    def read_tokens(self) -> None:
        """``word_tokens`` read now, and the loop's positions it is read from let go."""
        self.word_tokens

    @property
    def new_tokens(self) -> int:
        return int((~self.reused).sum())

    @property
    def stopped_at(self) -> int:
        """The count of the best pair left when ``min_frequency`` ended the loop early, else 0."""
        return int(self.stats.get("min_frequency_stop", 0))
