"""qwen2's scanner: cl100k's pattern with numbers one by one (``\\p{N}``, not ``\\p{N}{1,3}``)."""
from __future__ import annotations

import numpy as np

from ..._kernels import inlined
from .cl100k import _piece_end_gpt4
from .loop import _scan_loop, kernel


@inlined
def _piece_end_qwen2(data, d64, base, i, e, ac, flags, fold, swar):
    """End (exclusive) of qwen2's match (cl100k's, numbers one by one) at byte i."""
    return _piece_end_gpt4(data, d64, base, i, e, ac, flags, fold, swar, np.int64(1))


@kernel
def _scan_qwen2(data, d64, base, offsets, d, i, hi, ac, flags, fold, swar, T, arena, st, cbits):
    """qwen2's pieces of documents d..hi-1 into T (``_scan_loop``)."""
    return _scan_loop(_piece_end_qwen2, data, d64, base, offsets, d, i, hi, ac, flags, fold, swar, T, arena, st,
                      cbits)
