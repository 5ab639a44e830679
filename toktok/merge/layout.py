"""The position array: one 8-byte row per token position of every word that can still change.

``_layout`` and ``_fill`` write it from the segmented words (packing each row's token id and
word count, with a side table for counts too large for a row), ``_tokens_per_word`` reads each
word's final number of tokens back after the loop. The row format (``_TC``, ``_LNK``) is described below; the
loop reads it written out, for speed.
"""
from __future__ import annotations

import numpy as np

from .._kernels import _EMPTY, _empty_array, _full_array, _mix, _zero_array, internal, njit


# The position array ``P`` (uint32) has an 8-byte row per position: (word count << tb | token),
# link. Each word with two or more tokens owns consecutive rows with a wall row before and
# after. A token spans the rows from its start up to the next token's start; the rows after its
# start are dead. Link of a token's start row: the next token's start row (or the wall after the
# word). Link of a span's last dead row: the span's start, so that the token left of position p
# is found from row p-1 (a wall, a one-row token, or the last row of a longer span).
# The low ``tb`` bits hold the token: an id, or all ones (dead) or all ones but the last (wall);
# ``tb`` is the fewest bits for every id of the run plus these two. The 32 - tb high bits hold
# the word's count; all ones there means "look it up": the rows of words that frequent are keys
# of a side hash table (``ek``, ``ev``) to their 64-bit count.
# (Both are written out where they are read: in Numba a helper taking arrays costs atomic
# reference-count updates per call, whether inlined by Numba or called.)
_TC, _LNK = 0, 1


def _token_bits(max_tokens: int) -> int:
    """Bits for token ids below ``max_tokens`` plus the dead and wall marks."""
    tb = max(int(max_tokens + 1).bit_length(), 2)
    if tb > 30:
        raise ValueError("toktok: too many tokens for the merge loop (2**30)")
    return tb


@internal
def _escaped(ek, ev, p):
    """The count of row p of a word too frequent for its row's count bits."""
    mask = np.uint64(ek.shape[0] - 1)
    i = _mix(p) & mask
    while ek[i] != p:
        i = (i + np.uint64(1)) & mask
    return ev[i]


@njit(cache=True, no_cfunc_wrapper=True, nogil=True)
def _layout(lens, counts, tb, cut):
    """The position array (see ``_TC``) of every word with two or more tokens (one-token words
    never change), in word order, with its first wall row only, and the side table of counts
    too large for their rows, filled; ``_fill`` writes each word's rows. ``cut``: words at which
    ``_fill``'s calls start (ascending); returns each one's first row too (without the GIL: a
    word-count table's words are laid out in their reading thread beside the run file's
    opening, :func:`toktok.merge.stage.laying_out`)."""
    tmask = (np.int64(1) << tb) - 1
    cmax = (np.int64(1) << (32 - tb)) - 1
    rows = _empty_array(cut.shape[0], np.int64)
    n_rows = np.int64(1)
    n_esc = np.int64(0)
    j = 0
    for w in range(lens.shape[0]):
        while j < cut.shape[0] and cut[j] == w:
            rows[j] = n_rows
            j += 1
        if lens[w] >= 2:
            n_rows += lens[w] + 1
            if counts[w] >= cmax:
                n_esc += lens[w]
    while j < cut.shape[0]:
        rows[j] = n_rows
        j += 1
    if n_rows >= 2**31:
        raise ValueError("toktok: too many token positions for the merge loop (2**31)")
    P = _empty_array((n_rows, 2), np.uint32)
    cap = 16
    while cap < 2 * n_esc:
        cap *= 2
    ek = _full_array(cap, _EMPTY, np.int64)
    ev = _zero_array(cap, np.int64)
    P[0, _TC] = np.uint32(tmask - 1)
    P[0, _LNK] = 0
    if n_esc > 0:  # (in word order: the table is the same however many calls fill the rows)
        o = 1
        for w in range(lens.shape[0]):
            n = lens[w]
            if n >= 2:
                if counts[w] >= cmax:
                    for k in range(n):
                        i = _mix(o + k) & np.uint64(cap - 1)
                        while ek[i] != _EMPTY:
                            i = (i + np.uint64(1)) & np.uint64(cap - 1)
                        ek[i] = o + k
                        ev[i] = counts[w]
                o += n + 1
    return P, ek, ev, rows


@njit(cache=True, no_cfunc_wrapper=True, nogil=True)
def _fill(flat, lens, counts, tb, P, w0, w1, o, src):
    """The rows of words ``w0`` up to ``w1`` of ``_layout``'s position array, from row ``o``
    (``_layout``'s for word ``w0``) and their first id at ``flat[src]``: independent of every
    other word's, so that two threads fill two runs of words at once (without the GIL)."""
    tmask = (np.int64(1) << tb) - 1
    cmax = (np.int64(1) << (32 - tb)) - 1
    for w in range(w0, w1):
        n = lens[w]
        if n >= 2:
            c = min(counts[w], cmax)
            for k in range(n):
                P[o + k, _TC] = np.uint32((c << tb) | np.int64(flat[src + k]))
                P[o + k, _LNK] = np.uint32(o + k + 1)
            o += n
            P[o, _TC] = np.uint32(tmask - 1)
            P[o, _LNK] = 0
            o += 1
        src += n


@njit(cache=True, no_cfunc_wrapper=True, nogil=True)
def _tokens_per_word(P, lens, tb):
    """Each word's number of tokens after the loop: its live rows (see ``_layout``); without the
    GIL: the "merged" checkpoint's thread reads them while the run's goes on to the export."""
    tmask = (np.int64(1) << tb) - 1
    out = lens.copy()
    o = 1
    for w in range(lens.shape[0]):
        n = lens[w]
        if n >= 2:
            k = 0
            for p in range(o, o + n):
                if np.int64(P[p, _TC]) & tmask != tmask:
                    k += 1
            out[w] = k
            o += n + 1
    return out
