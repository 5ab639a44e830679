"""The merges of a Hugging Face ``tokenizer.json`` from a vocabulary: every split of every token
into two tokens, ordered by (token, left, right) rank, so that HF's BPE gives tiktoken's ids.
Short tokens are split by a compiled kernel (``merge.token_splits``; in Python for a small
vocabulary), long ones (runs of one
character grow to megabytes) through an index of fingerprints instead of at every split point.
Example: ``all_split_merges([b"a", b"b", b"ab"]) == [(0, 1)]``.
"""
from __future__ import annotations

#: Tokens up to this many bytes have every split point tried (compiled: ``merge.token_splits``);
#: longer ones too while that is cheap (``LONG_PLAIN_BUDGET``; in Python for a vocabulary split
#: in Python), else only those where a token of each length could fit (``_FingerprintIndex.splits``).
SPLIT_ALL_UP_TO = 64
#: Bytes of slicing (the sum of the squared lengths of the long tokens) up to which every split
#: point of a long token is tried as for short ones (by the kernel with them: a Python dict of
#: every token took 14 ms of a 65,536 vocabulary's 35): indexing every token costs more than that.
LONG_PLAIN_BUDGET = 1 << 24
#: Vocabularies up to this many tokens are split in Python (~10 ms for 4,096): quicker than
#: loading the kernel from Numba's cache, and a small run loads none.
SMALL_TOKENS = 1 << 13
#: Where the kernels do not load cheaply (``merge.splits_ready``: a small run, e.g. warm-started
#: from a large base), vocabularies up to this many tokens are split in Python too (0.44 s for
#: 100,000): about what importing Numba and loading them take, and no compiling on a first run.
UNLOADED_TOKENS = 1 << 18


def all_split_merges(tokens: list[bytes], skip: "set[int] | dict[int, str] | None" = None, *,
                     up_to: int = SPLIT_ALL_UP_TO, plain_budget: int = LONG_PLAIN_BUDGET) -> list[tuple[int, int]]:
    """Every (left id, right id) whose concatenation is a token, ordered by (token, left, right) rank.

    Ids in ``skip`` (pinned special tokens' placeholders) are neither split nor parts.
    A short token costs one pair of lookups per split point (compiled). A long token (a run of
    one character grows to 2^k bytes) costs a few lookups per length of the tokens that begin
    with its first byte plus one comparison of its bytes per split found, so a 1 MB token is not
    sliced at each of its million split points; while the long tokens are few and short enough
    (``plain_budget``), they are sliced at every split point instead of indexing them all.
    ``up_to``: the length up to which a token is short (``SPLIT_ALL_UP_TO``); any values give
    the same merges.
    Example: ``all_split_merges([b"a", b"b", b"ab"]) == [(0, 1)]``.
    """
    rows = _split_merges(tokens, skip, up_to, plain_budget)
    return list(zip(rows[:, 0].tolist(), rows[:, 1].tolist()))


def _split_merges(tokens: list[bytes], skip=None, up_to: int = SPLIT_ALL_UP_TO, plain_budget: int = LONG_PLAIN_BUDGET,
                  arrays=None):
    """``all_split_merges`` as an array of rows (left, right); ``arrays``: the tokens' bytes
    (uint8, one after the other) and lengths (int32), made already (as they came)."""
    import numpy as np

    skip = skip or ()
    lengths = arrays[1].astype(np.int64) if arrays is not None else np.fromiter(map(len, tokens), np.int64, len(tokens))
    python = _in_python(len(tokens))
    if not python and len(tokens) and int((lengths[lengths > up_to] ** 2).sum()) <= plain_budget:
        up_to = max(up_to, int(lengths.max()))  # every split point of the long tokens too, compiled: the same rows
    rows = [_short_splits(tokens, skip, up_to) if python else _compiled_splits(tokens, skip, up_to, arrays)]
    long = [(i, tokens[i]) for i in np.flatnonzero(lengths > up_to).tolist() if i not in skip]
    if long:
        ids = {t: i for i, t in enumerate(tokens) if i not in skip}
        if sum(len(t) ** 2 for _, t in long) <= plain_budget:
            get = ids.get
            found = [(n_id, left, right) for n_id, tok in long for k in range(1, len(tok))
                     if (left := get(tok[:k])) is not None and (right := get(tok[k:])) is not None]
            found.sort()
        else:
            index = _FingerprintIndex(tokens, ids)
            found = sorted((n_id, left, right) for n_id, tok in long for left, right in index.splits(tok))
        rows.append(np.array(found, np.int64).reshape(-1, 3))
        # id order = rank order of the merged token; distinct split points give distinct left
        # parts, so (token, left) orders them totally (each part is in that order already)
        out = np.concatenate(rows)
        out = out[np.argsort(out[:, 0], kind="stable")]
    else:
        out = rows[0]
    return out[:, 1:]


def _compiled_splits(tokens: list[bytes], skip, up_to: int, arrays=None):
    """``merge.token_splits``, from the tokens' ``arrays`` (bytes, lengths) when given."""
    if arrays is None:
        from ..merge import token_splits

        return token_splits(tokens, skip, up_to)
    import numpy as np

    from ..merge.segment import _splits
    from ..merge.tokens import _token_table

    tdata, tlen = arrays
    n = len(tlen)
    tstart = np.zeros(n, np.int64)
    np.cumsum(tlen[:-1], out=tstart[1:])
    mask = np.zeros(n, np.bool_)
    if skip:
        mask[list(skip)] = True
    bkeys, bids = _token_table(tdata, tstart, tlen, n, n)
    return _splits(tdata, tstart, tlen, bkeys, bids, mask, up_to)


def _in_python(n: int) -> bool:
    """Whether ``n`` tokens are split in Python (``SMALL_TOKENS``, ``UNLOADED_TOKENS``)."""
    from ..merge import splits_ready

    return n <= SMALL_TOKENS or (n <= UNLOADED_TOKENS and not splits_ready())


def _short_splits(tokens: list[bytes], skip, up_to: int):
    """``merge.token_splits`` in Python, for a vocabulary of at most ``SMALL_TOKENS``: rows
    (token, left, right) of every split of every token of at most ``up_to`` bytes into two tokens
    (ids in ``skip`` neither split nor parts), in token order, then left id order."""
    import numpy as np

    ids = {t: i for i, t in enumerate(tokens) if i not in skip}
    get = ids.get
    found = [(t, left, right) for t, tok in enumerate(tokens) if t not in skip and len(tok) <= up_to
             for k in range(1, len(tok)) if (left := get(tok[:k])) is not None and (right := get(tok[k:])) is not None]
    found.sort()
    return np.array(found, np.int32).reshape(-1, 3)


def _fingerprint(t: bytes) -> tuple[int, bytes, bytes]:
    return len(t), t[:8], t[-8:]


class _FingerprintIndex:
    """The tokens by (length, first 8 bytes, last 8 bytes), and the lengths of the tokens that
    begin / end with each byte."""

    def __init__(self, tokens: list[bytes], ids: dict[bytes, int]):
        self.tokens = tokens
        self.by_print: dict[tuple[int, bytes, bytes], list[int]] = {}
        first: dict[int, set[int]] = {}
        self.last: dict[int, set[int]] = {}
        for t, i in ids.items():
            self.by_print.setdefault(_fingerprint(t), []).append(i)
            if t:
                first.setdefault(t[0], set()).add(len(t))
                self.last.setdefault(t[-1], set()).add(len(t))
        self.first = {b: sorted(ls) for b, ls in first.items()}

    def splits(self, tok: bytes) -> list[tuple[int, int]]:
        """Every (left id, right id) that spells ``tok``. Only split points k where a token of
        length k begins like ``tok`` and one of length len - k ends like it are tried; a
        fingerprint of 16 bytes of ``tok`` finds the candidates, ``startswith``/``endswith``
        confirm them without copying. Cost: O(tokens beginning with tok's first byte), plus
        O(len) per split found (the split's line in tokenizer.json is that long anyway)."""
        n = len(tok)
        ends = self.last.get(tok[-1], ())
        out = []
        for k in self.first.get(tok[0], ()):
            if k >= n:
                break
            if n - k not in ends:
                continue
            lefts = self.by_print.get((k, tok[:min(k, 8)], tok[max(0, k - 8):k]))
            if lefts is None:
                continue
            rights = self.by_print.get((n - k, tok[k:k + 8], tok[max(k, n - 8):]))
            if rights is None:
                continue
            left = next((i for i in lefts if tok.startswith(self.tokens[i])), None)
            right = next((i for i in rights if tok.endswith(self.tokens[i])), None)
            if left is not None and right is not None:
                out.append((left, right))
        return out
