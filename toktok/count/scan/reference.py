"""The reference: the ``regex`` package, which the scanners are tested equal to. It counts a
pattern without a compiled scanner, and a small run's text before the scanner is compiled
(:func:`reference_allowance`); and it cuts the special tokens out of documents.
Example: ``reference_allowance(1 << 40) == 0``."""
from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING

import pyarrow as pa

from ..._kernels import compiled, ready
from ...patterns import DEFAULT, Pattern
from ..cuts import pieces
from .named import _kernel_of

if TYPE_CHECKING:
    import polars as pl

# --- the reference, for small runs before the scanner is compiled -------------------------------
# Compiling the scanner takes ~5 s of a core, once after an install; the reference (the regex
# package, which the scanner is tested equal to) counts 6-9 MB/s. A run whose sources are small
# counts with the reference while the scanner is not compiled, so it compiles nothing for
# counting (see reference_allowance); the counts are the same.

#: Text a run may count with the reference while the scanner is not compiled (~1.3 s of it).
REFERENCE_BYTES = 8 << 20
#: Sources up to this size are counted with the reference even when the scanner is compiled:
#: at 6-9 MB/s that is quicker than loading the scanner from Numba's cache (0.3-0.5 s, and
#: Numba's own start the first time a run loads a kernel), and a run this small loads none.
SMALL_BYTES = 1 << 20
#: Sources up to this size are counted with the reference even when the scanner is built ahead:
#: a process's first scan costs ~20 ms (the scanner loaded, its tables and threads started),
#: more than the reference takes for 64 KiB (the bench's one-line run: 84 bytes).
TINY_BYTES = 64 << 10
_REFERENCE_ENTRY_BYTES = 200  # a word in the reference's Counter: str, int and table slot (CPython)


def reference_allowance(source_bytes: int, pattern: Pattern = DEFAULT) -> int:
    """The text a run over ``source_bytes`` of sources counts with the reference instead of the
    compiled scanner of ``pattern`` (``WordCounter(reference_bytes=...)``): ``REFERENCE_BYTES``
    when that scanner is not in Numba's cache yet and the sources are no larger, or when they
    are at most ``SMALL_BYTES`` and it is not built ahead, or at most ``TINY_BYTES``; else 0 (and
    0 for a pattern without a scanner, which counts through the reference anyway).
    Example: ``reference_allowance(1 << 40) == 0``."""
    scanner = _kernel_of(pattern)
    if scanner is None or source_bytes > REFERENCE_BYTES:
        return 0
    if source_bytes <= TINY_BYTES:
        return REFERENCE_BYTES
    if ready((scanner,)) or (source_bytes > SMALL_BYTES and compiled((scanner,))):
        return 0
    return REFERENCE_BYTES


def _empty_counts() -> dict:
    """The word table's Polars schema."""
    import polars as pl

    return {"word": pl.Binary, "count": pl.Int64}


def _cut_specials(texts: pa.Array, specials: Sequence[str]) -> pa.Array:
    """Cut special tokens out: each document becomes the segments between them (never counted)."""
    if not specials or not len(texts):
        return texts
    import pyarrow.compute as pc  # (a run with special tokens and a batch past the reference's)

    mask = None
    for special in sorted(set(specials)):
        found = pc.match_substring(texts, special)
        mask = found if mask is None else pc.or_(mask, found)
    if not pc.any(mask).as_py():
        return texts
    parts = _cut_specials_py(texts.filter(mask).to_pylist(), specials)
    return pa.concat_arrays([texts.filter(pc.invert(mask)), pa.array(parts, pa.large_string())])


def _cut_specials_py(docs: list[str], specials: Sequence[str]) -> list[str]:
    """``_cut_specials`` of Python strings: the same segments (in another order, which counting
    does not see)."""
    if not specials:
        return docs
    import regex  # (here: a run that counts no text imports none)

    pat = regex.compile("|".join(regex.escape(s) for s in sorted(set(specials), key=lambda s: (-len(s), s))))
    out: list[str] = []
    for doc in docs:
        if any(s in doc for s in specials):
            out.extend(p for p in pat.split(doc) if p)
        else:
            out.append(doc)
    return out


def _findall_into(counter: Counter, rx: str, texts: pa.Array, concurrent: bool) -> None:
    """Count the pieces of regex ``rx`` in each of ``texts`` into ``counter`` (``concurrent``:
    release the GIL while matching, for counting threads)."""
    for doc in texts.to_pylist():
        counter.update(pieces(rx, doc, concurrent=concurrent))


def _counter_frame(counter: Counter) -> pl.DataFrame:
    """A Counter of str pieces as a word table (word Binary, count Int64)."""
    import polars as pl

    return pl.DataFrame({"word": [w.encode() for w in counter], "count": list(counter.values())},
                        schema=_empty_counts())
