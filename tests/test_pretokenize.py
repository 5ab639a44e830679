"""The Polars pre-tokenizer must give exactly the `regex` package's word counts."""
from __future__ import annotations

import polars as pl
import pytest
from conftest import FIXTURES, FUZZ
from hypothesis import given, settings
from hypothesis import strategies as st

from toktok.pretokenize import count_words, count_words_reference, split_words

# Pieces chosen to hit every alternative of the pattern and every boundary between them.
ATOMS = [
    " ", "  ", "   ", "\t", "\n", "\r", "\r\n", "\n\n", "\u00a0", "\u3000", "\u2028", "\x0b", "\x0c", "\x85",
    "a", "Z", "é", "ж", "Ω", "中", "한", "ſ", "\u212a", "1", "٣", "²", "Ⅻ", "!", "(", ".", "-", "_", "'", "'s",
    "'S", "'ll", "'LL", "'Re", "'ve", "'m", "'D", "\u0301", "\u200d", "😀", "👩\u200d💻", "\x00", "\x1c",
]


def _same(texts, specials=()):
    ref = dict(count_words_reference(texts, specials=specials))
    for engine in ("scan", "polars"):
        fast = dict(count_words(texts, specials=specials, engine=engine).iter_rows())
        assert fast == ref, engine


@pytest.mark.parametrize(
    "text",
    [
        "", " ", "   ", "a", "hello  world", "x   123", "x \t!y", "x\t\t'sy", "  's", "\n\n  y  ",
        "foo   (bar)", "I'M DON'T we'll", "a\u3000\u3000b", "tab\t\tnumbers\t12", "end with spaces   ",
        "  \r\n  \r\n x", "1234567 3.14159", "emoji 😀😀 and  👩\u200d💻", "ſ's 'ſ 'S", "a \u0301b",
    ],
)
def test_examples(text):
    _same([text])


def test_known_split():
    # The whitespace run before a word gives its last char to the word.
    assert split_words("a   b") == ["a", "  ", " b"]
    assert dict(count_words(["a   b"]).iter_rows()) == {b"a": 1, b"  ": 1, b" b": 1}


@given(st.lists(st.sampled_from(ATOMS), max_size=30).map("".join))
def test_fuzz_atoms(text):
    _same([text])


@given(st.lists(st.text(st.characters(exclude_categories=["Cs", "Cn"]), max_size=40), max_size=6))
def test_fuzz_unicode(texts):
    _same(texts)


@given(st.lists(st.lists(st.sampled_from(ATOMS + ["<|endoftext|>", "<|x|>"]), max_size=20).map("".join), max_size=8))
def test_fuzz_specials(texts):
    _same(texts, specials=["<|endoftext|>", "<|x|>"])


def test_specials_never_counted():
    wc = dict(count_words(["a<|endoftext|>b  <|endoftext|>"], specials=["<|endoftext|>"]).iter_rows())
    assert wc == {b"a": 1, b"b": 1, b"  ": 1}


@pytest.mark.parametrize("engine", ["scan", "polars"])
def test_counts_are_int64_and_parallel_slices_agree(engine):
    texts = ["the cat  sat\n"] * 500 + ["другой  текст 123"] * 300 + ["x" * 5000, "y" * 7, "z" * 8]
    one = count_words(texts, threads=1, engine=engine).sort("word")
    many = count_words(texts, threads=4, engine=engine).sort("word")
    assert one.schema["count"] == pl.Int64 and one.schema["word"] == pl.Binary
    assert one.equals(many)
    got = dict(one.iter_rows())
    assert got[b" cat"] == 500 and got[b"x" * 5000] == 1 and got[b"y" * 7] == 1 and got[b"z" * 8] == 1


def test_fixture_equals_reference():
    df = pl.read_parquet(FIXTURES / "sample.parquet")
    _same(df["text"])


@pytest.mark.slow
def test_shared_corpus_equals_reference():
    import glob

    files = sorted(glob.glob(str(FIXTURES.parent.parent / "shared" / "corpus" / "*.parquet")))
    if not files:
        pytest.skip("../shared/corpus not present")
    for f in files:
        texts = pl.read_parquet(f, columns=["text"])["text"]
        _same(texts)


@pytest.mark.parametrize("engine", ["scan", "polars"])
def test_counter_across_batches_equals_one_pass(engine):
    from toktok.pretokenize import WordCounter

    df = pl.read_parquet(FIXTURES / "sample.parquet")["text"]
    c = WordCounter(specials=["<|endoftext|>"], threads=2, engine=engine)
    for i in range(0, df.len(), 37):  # uneven batches, some smaller than the thread count
        c.add(df.slice(i, 37))
    c.add(["tail<|endoftext|>  ", "x" * 100])
    got = dict(c.result().iter_rows())
    ref = count_words_reference(df.to_list() + ["tail<|endoftext|>  ", "x" * 100], specials=["<|endoftext|>"])
    assert got == dict(ref)
