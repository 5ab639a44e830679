"""The sample read back in batches: what a reservoir's ``finish()`` frame holds, as text batches
of about a given size (the tests' view of a sample; the engines count it with
``toktok.count.common.sample_parts``).
Example: ``sum(s.len() for s in sample_batches(r, 20_000)) == r.finish().height``.
"""
from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import polars as pl

from toktok.count.sample import Reservoir


def sample_batches(res: Reservoir, batch_bytes: int = 32 << 20) -> Iterator[pl.Series]:
    """The sampled texts of ``res`` in batches of about ``batch_bytes``."""
    df = res.finish()
    start = 0
    cum = df["bytes"].cum_sum().to_numpy() if df.height else np.zeros(0, np.int64)
    while start < df.height:
        base = cum[start - 1] if start else 0
        end = max(int(np.searchsorted(cum, base + batch_bytes, side="right")), start + 1)
        yield df["text"].slice(start, end - start)
        start = end
