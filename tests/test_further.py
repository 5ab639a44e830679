"""Rank-BPE taken up from a prefix's ids (``merge.further``) equals segmenting again, and tiktoken."""
from __future__ import annotations

import numpy as np
import polars as pl
from conftest import FIXTURES
from hypothesis import example, given
from hypothesis import strategies as st

from toktok.count.scan import count_words
from toktok.merge import Segmenter, learn_merges
from toktok.merge.further import segment_further
from toktok.merge.tokens import _token_arrays
from toktok.vocab import Vocab


def _tiktoken_pieces(vocab: Vocab, n: int):
    import tiktoken

    from toktok.vocab import PATTERN

    ranks = {t: i for i, t in enumerate(vocab.tokens[:n])}
    return tiktoken.Encoding("t", pat_str=PATTERN, mergeable_ranks=ranks, special_tokens={})._encode_single_piece


def _both(words, vocab: Vocab, n0: int, n: int):
    sg = Segmenter(*_token_arrays(vocab, 0))
    before = sg(words, n0)
    return segment_further(words, *before, sg.tables, n), sg(words, n)


@given(
    words=st.lists(st.lists(st.sampled_from([b"a", b"b", b" ", b"c", b"\n", b"\xc3\xa9", b"ab c"]), max_size=60).map(
        b"".join), min_size=1, max_size=10),
    first=st.lists(st.lists(st.sampled_from(b"ab c\n\xc3\xa9"), min_size=2, max_size=5).map(bytes), max_size=12,
                   unique=True),
    later=st.lists(st.lists(st.sampled_from(b"ab c\n\xc3\xa9"), min_size=2, max_size=9).map(bytes), max_size=12,
                   unique=True),
)
@example(words=[b"aaaa", b"abab", b"ab c ab c"], first=[b"aa", b"ab"], later=[b"aaa", b"aaaa", b"b c", b"ab c ab c"])
@example(words=[b"abc", b"abcabc"], first=[b"bc"], later=[b"abc", b"ab"])  # "abc" whole, not by (a, bc)
def test_fuzz_taken_up_from_a_prefix_equals_segmenting_again_and_tiktoken(words, first, later):
    # tokens in any order (a later token need not be reachable by BPE: found whole only), the
    # prefix cut after the first group; a word that is one token of the prefix stays it
    vocab = Vocab.base(False)
    vocab.tokens += first
    n0 = len(vocab.tokens)
    vocab.tokens += [t for t in later if t not in set(vocab.tokens)]
    (got, goff), (want, woff) = _both(words, vocab, n0, len(vocab.tokens))
    assert got.tolist() == want.tolist() and goff.tolist() == woff.tolist()
    encode = _tiktoken_pieces(vocab, len(vocab.tokens))
    for i, w in enumerate(words):
        assert got[goff[i]:goff[i + 1]].tolist() == (encode(w) if w else [])


def test_superword_pieces_taken_up_from_the_subword_vocabulary():
    # SuperBPE's case: paragraphs (thousands of bytes) whose ids under the first phase's
    # vocabulary are taken up with the superword merges learned on them
    from toktok.patterns import SUPERWORD

    texts = pl.read_parquet(FIXTURES / "sample.parquet")["text"].head(60)
    sub = count_words(texts.head(30))
    vocab = learn_merges(sub["word"].to_arrow(), sub["count"].to_numpy(), Vocab.base(False), 300).vocab
    n0 = len(vocab.tokens)
    sup = count_words(texts.head(30), pattern=SUPERWORD["superbpe"])
    vocab = learn_merges(sup["word"].to_arrow(), sup["count"].to_numpy(), vocab, 300).vocab
    words = count_words(texts, pattern=SUPERWORD["superbpe"])["word"].to_arrow()
    assert len(vocab.tokens) > n0 > 256 and max(map(len, words.to_pylist())) > 2000
    (got, goff), (want, woff) = _both(words, vocab, n0, len(vocab.tokens))
    assert np.array_equal(got, want) and np.array_equal(goff, woff)
    assert (np.diff(goff) < np.diff(_both(words, vocab, n0, n0)[1][1])).any()  # superwords were used
    encode = _tiktoken_pieces(vocab, len(vocab.tokens))
    for i in range(0, len(words), 7):
        assert got[goff[i]:goff[i + 1]].tolist() == encode(words[i].as_py())
