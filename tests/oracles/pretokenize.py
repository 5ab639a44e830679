"""The GPT-4 pre-tokenizer's definition (the ``regex`` package) and an exact look-around-free
emulation of it inside Polars: two oracles the compiled scanner (toktok.count.pretokenize) is
held equal to. The pattern's ``\\s+(?!\\S)`` needs look-ahead, which Polars' (Rust) regex engine
lacks: ``COMPOUND_PATTERN`` matches without it, and the few compound matches are split by the
reference.
Example: ``count_words_polars(["a a"]).sort("word").rows() == [(b" a", 1), (b"a", 1)]``.
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence

import polars as pl
import regex

from toktok.count.scan import WordCounter
from toktok.vocab import PATTERN

_CONTRACTION = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)"
_LETTERS = r"[^\r\n\p{L}\p{N}]?\p{L}+"
_DIGITS = r"\p{N}{1,3}"
_PUNCT = r" ?[^\s\p{L}\p{N}]+[\r\n]*"
_NEWLINES = r"\s*[\r\n]+"
_HSPACE = r"[^\S\r\n]"  # whitespace other than \r and \n

# Why this equals PATTERN. The first five alternatives are PATTERN's own. What is left at a
# position is a whitespace run without \r/\n (a run holding a newline is taken by ``\s*[\r\n]+``
# first). Followed by a non-space x, PATTERN takes the run minus its last char c (``\s+(?!\S)``)
# and then matches afresh at c: c joins letters after it, a space c joins punctuation, otherwise
# c stands alone and the next piece starts at x. Each "compound" alternative below takes the whole
# run plus that next piece, so every compound ends exactly where PATTERN's pieces end; splitting
# a compound with PATTERN itself is then exact, and only the unique compounds need splitting.
# A run at the end of the text is one piece in PATTERN (``\s+(?!\S)``) and here (``\s+``).
COMPOUND_PATTERN = "|".join(
    [
        _CONTRACTION,
        _LETTERS,
        _DIGITS,
        _PUNCT,
        _NEWLINES,
        _HSPACE + r"+\p{L}+",  # ...c + letters
        _HSPACE + r"* [^\s\p{L}\p{N}]+[\r\n]*",  # ...' ' + punctuation
        _HSPACE + "+(?:" + "|".join([_CONTRACTION, _LETTERS, _DIGITS, _PUNCT]) + ")",  # c alone
        r"\s+",
    ]
)

# A match is a compound when it holds non-space and either starts with two whitespace chars,
# or one whitespace char that does not join what follows (a digit; punctuation after a
# non-space whitespace char). Pieces like " word" and " !" are PATTERN's own and stay whole.
_IS_COMPOUND = r"^(?:\s\s|\s\p{N}|[^\S ][^\s\p{L}\p{N}])"

_REF = regex.compile(PATTERN)
_EMPTY_COUNTS = {"word": pl.Binary, "count": pl.Int64}


def split_words(text: str) -> list[str]:
    """PATTERN's pieces of ``text`` by the ``regex`` package, e.g. ``split_words("a  b") == ["a", " ", " b"]``."""
    return _REF.findall(text)


def count_words_reference(texts: Iterable[str], specials: Sequence[str] = ()) -> Counter[bytes]:
    """The slow reference: ``regex.findall(PATTERN)`` per document after cutting specials."""
    pat = (
        regex.compile("|".join(regex.escape(s) for s in sorted(set(specials), key=lambda s: (-len(s), s))))
        if specials
        else None
    )
    out: Counter[bytes] = Counter()
    for doc in texts:
        if doc is None:
            continue
        for seg in pat.split(doc) if pat else [doc]:
            out.update(p.encode() for p in _REF.findall(seg))
    return out


def _match_counts(texts: pl.Series) -> pl.DataFrame:
    """Unique matches of COMPOUND_PATTERN with their counts (``word`` str, ``count`` Int64)."""
    return (
        texts.rename("word")
        .to_frame()
        .lazy()
        .select(pl.col("word").str.extract_all(COMPOUND_PATTERN))
        .explode("word")
        .drop_nulls()
        .group_by("word")
        .agg(pl.len().cast(pl.Int64).alias("count"))
        .collect()
    )


def _count_polars(texts: pl.Series, n: int) -> pl.DataFrame:
    """COMPOUND_PATTERN in Polars, then the unique compounds split by the reference."""
    # 1. match and count in Polars; slices run in parallel because one string column is
    #    matched on one thread
    if n > 1 and texts.len() >= 2 * n:
        step = -(-texts.len() // n)
        frames = [texts.slice(i, step).rename("word").to_frame().lazy() for i in range(0, texts.len(), step)]
        queries = [
            f.select(pl.col("word").str.extract_all(COMPOUND_PATTERN)).explode("word").drop_nulls()
            .group_by("word").agg(pl.len().cast(pl.Int64).alias("count"))
            for f in frames
        ]
        counts = pl.concat(pl.collect_all(queries)).group_by("word").agg(pl.col("count").sum())
    else:
        counts = _match_counts(texts)

    # 2. split the unique compounds with the reference pattern and fold them back in
    is_compound = counts["word"].str.contains(_IS_COMPOUND)
    compounds = counts.filter(is_compound)
    if compounds.height:
        words, cnts = [], []
        for w, c in compounds.iter_rows():
            for piece in _REF.findall(w):
                words.append(piece)
                cnts.append(c)
        split = pl.DataFrame({"word": words, "count": cnts}, schema={"word": pl.String, "count": pl.Int64})
        counts = pl.concat([counts.filter(~is_compound), split]).group_by("word").agg(pl.col("count").sum())

    # 3. words as bytes, as the package's counts are
    return counts.select(pl.col("word").cast(pl.Binary), pl.col("count"))


class PolarsWordCounter(WordCounter):
    """``WordCounter`` counting by the Polars emulation instead of the compiled scanner (the same
    special-token cutting before it)."""

    def __init__(self, specials: Sequence[str] = (), threads: int = 0):
        super().__init__(specials, threads)
        self._frames: list[pl.DataFrame] = []

    def memory_bytes(self) -> int:
        return sum(int(f.estimated_size()) for f in self._frames)

    def _scan(self, texts) -> None:  # (the counter hands its scanner Arrow arrays)
        self._frames.append(_count_polars(pl.Series("text", texts), self.threads))
        if len(self._frames) > 8:  # keep the partial tables few
            self._frames = [pl.concat(self._frames).group_by("word").agg(pl.col("count").sum())]

    def result(self) -> pl.DataFrame:
        if not self._frames:
            return pl.DataFrame({"word": [], "count": []}, schema=_EMPTY_COUNTS)
        return pl.concat(self._frames).group_by("word").agg(pl.col("count").sum())


def count_words_polars(texts: pl.Series | Iterable[str], specials: Sequence[str] = (), threads: int = 0) -> pl.DataFrame:
    """``toktok.count.pretokenize.count_words`` by the Polars emulation."""
    counter = PolarsWordCounter(specials, threads)
    counter.add(texts)
    return counter.result()
