"""The measurements on text shared by the run file's insight and ``toktok eval``: subsets, sums, ratios.

Documents fall into subsets: 'all' (every document, index 0) and, with group labels, one subset per
label (sorted, index 1..). Sums per subset, the pattern's pieces per subset and the ratios built on
them (bytes per token, tokens per word) are computed here once, for the compression curve
(:mod:`toktok.insight.runfile`) and the comparison of tokenizers (:mod:`toktok.insight.evaluate`).
Example::

    names, index = subsets(["en", "fr", "en"], 3)        # ['all', 'en', 'fr'], [1, 2, 1]
    ratio(int(sums(utf8_bytes(docs), index, 3)[0]), tokens)   # bytes per token of all documents
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa

from ..patterns import DEFAULT, Pattern

#: The subset of every document.
ALL = "all"


def subsets(groups: list[str] | None, n: int) -> tuple[list[str], np.ndarray]:
    """Subset names ('all' first, then the groups sorted) and each of the ``n`` documents' subset
    index (0 for all of them without groups)."""
    if groups is None:
        return [ALL], np.zeros(n, dtype=np.int64)
    names = sorted(set(groups))
    index = {g: i + 1 for i, g in enumerate(names)}
    return [ALL] + names, np.array([index[g] for g in groups], dtype=np.int64)


def sums(values: np.ndarray, index: np.ndarray, n_subsets: int) -> np.ndarray:
    """Per subset, the integer sum of ``values`` ([all, group 1, group 2, ...]); ``index`` is each
    value's subset as :func:`subsets` gives it."""
    out = np.zeros(n_subsets, dtype=np.int64)
    out[0] = int(np.asarray(values).sum())
    if n_subsets > 1:
        out[1:] = np.bincount(index - 1, weights=values, minlength=n_subsets - 1)[: n_subsets - 1].astype(np.int64)
    return out


def utf8_bytes(docs: list[str]) -> np.ndarray:
    """Each document's length in UTF-8 bytes (int64)."""
    if not docs:
        return np.zeros(0, np.int64)
    arr = pa.array(docs, pa.large_string())  # its offsets are the lengths' running sum
    return np.diff(np.frombuffer(arr.buffers()[1], np.int64, count=len(arr) + 1)).astype(np.int64)


def ratio(amount: int, per: int) -> float | None:
    """``amount / per`` (bytes per token, tokens per word, ...); None when ``per`` is 0."""
    return amount / per if per else None


#: Documents up to this many bytes are cut into pieces on one thread (``pieces``).
ONE_THREAD_BYTES = 8 << 20


def pieces(docs: list[str], index: np.ndarray, n_subsets: int, threads: int, *,
           pattern: Pattern | None = None) -> tuple[pa.Array, np.ndarray, np.ndarray]:
    """The distinct pieces of ``pattern`` (the words toktok counts; default GPT-4's) in each
    subset's documents: (pieces, their counts, their subset index); without groups (one subset)
    the pieces of all documents, subset 0. Pieces of disjoint groups add up, so ``sums(counts,
    of, n)`` gives the words of every subset, 'all' included."""
    from ..count.scan import WordCounter, reference_allowance

    pattern = pattern or DEFAULT
    # a few MB of documents: counted without compiling the scanner where it is not compiled yet
    # (and, within the reference's allowance, as Python strings, without Polars)
    sizes = utf8_bytes(docs)
    reference = reference_allowance(int(sizes.sum()), pattern)
    tables, of = [], []
    for s in range(1, n_subsets) if n_subsets > 1 else [0]:
        part = docs if n_subsets == 1 else [d for d, g in zip(docs, index.tolist()) if g == s]
        # a part of a few MB (a run's parity sample: ~1 MB a file) on one thread: starting the
        # counter's threads, several times a part, took longer than counting it (0.03 s of 0.05)
        part_bytes = int(sizes.sum() if n_subsets == 1 else sizes[index == s].sum())
        counter = WordCounter(threads=threads if part_bytes > ONE_THREAD_BYTES else 1, reference_bytes=reference,
                              pattern=pattern)
        try:
            counter.add(part)
            tables.append(counter.table())
        finally:
            counter.close()
        of.append(np.full(tables[-1].num_rows, s, np.int64))
    words = pa.concat_tables(tables)
    return (words.column("word").combine_chunks(), words.column("count").to_numpy().astype(np.int64),
            np.concatenate(of) if of else np.zeros(0, np.int64))


__all__ = ["ALL", "subsets", "sums", "utf8_bytes", "ratio", "pieces"]


def _complete(token: bytes) -> str:
    """The complete UTF-8 characters of ``token``: a leading run of continuation bytes and a
    trailing cut character left aside (what is left of an invalid middle is replaced)."""
    a, b = 0, len(token)
    while a < b and token[a] & 0xC0 == 0x80:
        a += 1
    for k in range(1, min(4, b - a) + 1):  # a lead byte whose character the token cuts
        c = token[b - k]
        if c & 0xC0 == 0xC0:
            need = 2 if c < 0xE0 else 3 if c < 0xF0 else 4
            if need > k:
                b -= k
            break
        if c & 0x80 == 0:
            break
    return token[a:b].decode("utf-8", "replace")


def is_superword(token: bytes, pattern: Pattern) -> bool:
    """Whether ``pattern`` cuts ``token``: its complete characters (:func:`_complete`) are more
    than one piece of it. Example: ``is_superword(b" of the", DEFAULT) and not is_superword(b" the", DEFAULT)``."""
    text = _complete(token)
    return len(text) > 1 and len(pattern.findall(text)) > 1

