"""Pre-tokenize and count: documents in, a word-count table out (the pre-tokenize stage).

Owns the GPT-4 (cl100k) split. Reads batches of documents (``pl.Series`` of str), writes a
``pl.DataFrame`` with columns ``word`` (Binary, UTF-8 bytes of one pre-token) and ``count``
(Int64). The pattern's ``\\s+(?!\\S)`` needs look-ahead, which Polars' (Rust) regex engine lacks,
so counting runs an exact look-around-free emulation (see ``COMPOUND_PATTERN``) inside Polars, on
all cores, and the ``regex`` package stays the reference (``count_words_reference``).
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence

import polars as pl
import regex

from .vocab import PATTERN

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


def split_words(text: str) -> list[str]:
    """PATTERN's pieces of ``text`` by the ``regex`` package, e.g. ``split_words("a  b") == ["a", " ", " b"]``."""
    return _REF.findall(text)


def _cut_specials(texts: pl.Series, specials: Sequence[str]) -> pl.Series:
    """Cut special tokens out: each document becomes the segments between them (never counted)."""
    if not specials:
        return texts
    # Longest first so that a special containing another is cut whole, as tiktoken's
    # leftmost-longest-listed alternation would.
    pat = regex.compile("|".join(regex.escape(s) for s in sorted(set(specials), key=lambda s: (-len(s), s))))
    mask = texts.str.contains_any(list(specials))
    if not mask.any():
        return texts
    parts: list[str] = []
    for doc in texts.filter(mask).to_list():
        parts.extend(p for p in pat.split(doc) if p)
    return pl.concat([texts.filter(~mask), pl.Series(texts.name, parts, dtype=pl.String)])


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


def count_words(texts: pl.Series | Iterable[str], specials: Sequence[str] = (), threads: int = 0) -> pl.DataFrame:
    """Word counts of PATTERN's pieces over documents, identical to ``regex.findall`` + Counter.

    Returns columns ``word`` (Binary) and ``count`` (Int64), one row per distinct word, in no
    particular order. Special tokens are cut out first and never counted.
    Example: ``count_words(["a a"]).sort("word").rows() == [(b" a", 1), (b"a", 1)]``.
    """
    # 1. documents as one Series, special tokens cut out
    if not isinstance(texts, pl.Series):
        texts = pl.Series("text", list(texts), dtype=pl.String)
    texts = _cut_specials(texts.drop_nulls(), specials)
    if texts.len() == 0:
        return pl.DataFrame({"word": [], "count": []}, schema={"word": pl.Binary, "count": pl.Int64})

    # 2. match and count in Polars; slices run in parallel because one string column is
    #    matched on one thread
    n = threads or pl.thread_pool_size()
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

    # 3. split the unique compounds with the reference pattern and fold them back in
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

    # 4. words as bytes: the merge loop and the DuckDB table work on bytes
    return counts.select(pl.col("word").cast(pl.Binary), pl.col("count"))


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
