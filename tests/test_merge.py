"""The fast merge loop must equal the obviously-correct reference, merge for merge."""
from __future__ import annotations

import dataclasses

import numpy as np
import polars as pl
import pytest
from conftest import FIXTURES
from hypothesis import example, given
from hypothesis import strategies as st
from oracles.reference_bpe import rank_bpe, train

from toktok.merge import Tuning, learn_merges, segment
from toktok.merge.small import learn_small
from toktok.merge.segment import WHOLE
from toktok.count.scan import count_words
from toktok.vocab import Vocab, hardcoded_tokens


def _fast(words, counts, vocab, n, tuning=Tuning(), **limits):
    res = learn_merges(list(words), np.array(list(counts), dtype=np.int64), vocab, n, tuning=tuning, **limits)
    merges = list(zip(res.left.tolist(), res.right.tolist(), res.token.tolist(), res.count.tolist(), res.reused.tolist()))
    return res, merges


def _check(word_counts: dict[bytes, int], vocab: Vocab, n: int, tuning=Tuning(), **limits):
    res, merges = _fast(word_counts.keys(), word_counts.values(), vocab, n, tuning, **limits)
    ref_tokens, ref_merges = train(word_counts, vocab.tokens, n, **limits)
    assert merges == ref_merges
    assert res.vocab.tokens == ref_tokens
    return res


def test_hardcoded_list():
    toks = hardcoded_tokens()
    assert len(toks) == 1161
    assert toks[0] == b"00" and toks[99] == b"99" and toks[100] == b"000" and toks[1099] == b"999"
    assert toks[1100] == b"  " and toks[1130] == b" " * 32 and toks[1131] == b"\n\n" and toks[1137] == b"\n" * 8
    assert toks[1138] == b"\r\n" and toks[1139] == b"==" and toks[1158] == b">>" and toks[-2:] == [b"..", b"..."]
    assert Vocab.base().size == 1417


def test_tie_break_and_overlaps():
    # "aaaa" has 3 overlapping (a,a); replacement left to right gives aa aa.
    res, merges = _fast([b"aaaa"], [1], Vocab.base(False), 2)
    assert res.vocab.tokens[256:] == [b"aa", b"aaaa"]
    assert merges[0][3] == 3
    # equal counts: smallest (left bytes, right bytes) wins: (b"a", b"c") < (b"b", b"a")
    res, _ = _fast([b"ac", b"ba"], [5, 5], Vocab.base(False), 1)
    assert res.vocab.tokens[256] == b"ac"


def test_reuse_spends_no_budget():
    # "baa" is in the base but rank-BPE cannot reach it from b, a, a; after "aa" is learned,
    # merging (b, aa) gives bytes that already are a token: reused, no budget spent.
    base = Vocab.base(False)
    base.tokens += [b"baa"]
    res = _check({b"cbaa": 4}, base, 2)
    assert res.reused.tolist() == [False, True, False]
    assert res.token.tolist() == [257, 256, 258]
    assert res.vocab.tokens[256:] == [b"baa", b"aa", b"cbaa"]


def test_segmentation_is_tiktokens():
    v = Vocab.base()
    words = [b"00123", b"    ", b"x == y", b"\r\n\r\n", b"...."]
    flat, off = segment(words, v)
    ranks = v.ranks()
    for i, w in enumerate(words):
        assert flat[off[i]:off[i + 1]].tolist() == rank_bpe(w, ranks)


def test_counts_past_2_to_the_31():
    big = 3_000_000_000
    res, merges = _fast([b"ab", b"cd"], [big, big + 1], Vocab.base(False), 2)
    assert merges[0][:2] == (ord("c"), ord("d")) and merges[0][3] == big + 1
    assert merges[1][3] == big


def test_stops_when_no_pairs_left():
    res, _ = _fast([b"ab"], [1], Vocab.base(False), 5)
    assert res.new_tokens == 1


def test_zero_merges():
    res, merges = _fast([b"abc"], [1], Vocab.base(), 0)
    assert merges == [] and len(res.vocab.tokens) == 1417


small_words = st.dictionaries(
    st.lists(st.sampled_from(b"abc ."), min_size=1, max_size=10).map(bytes),
    st.integers(1, 50),
    min_size=1,
    max_size=20,
)


extra_tokens = st.lists(st.lists(st.sampled_from(b"abc ."), min_size=2, max_size=4).map(bytes), max_size=5, unique=True)


@given(small_words, st.integers(0, 40), extra_tokens)
def test_fuzz_equals_reference(word_counts, n, extra):
    # extra base tokens that rank-BPE may not reach, so that merges can produce existing bytes
    base = Vocab.base(False)
    base.tokens += extra
    _check(word_counts, base, n)


@given(small_words, st.integers(0, 40), extra_tokens, st.sampled_from([1, 2, 3, 8, 40]), st.booleans(),
       st.sampled_from([None, 3, 20]))
def test_fuzz_untracked_pairs_equal_reference(word_counts, n, extra, tracked_from, tight, min_freq):
    # only the pairs counted at least ``tracked_from`` times are tracked at the start: when the
    # loop gets down to the others, or a merge reuses a token, every pair is counted again
    base = Vocab.base(False)
    base.tokens += extra
    tuning = Tuning(pairs_per_merge=0, pool_spare=0, pool_slack=0, heap_target=2) if tight else Tuning()
    _check(word_counts, base, n, dataclasses.replace(tuning, tracked_from=tracked_from), min_frequency=min_freq)


@given(st.dictionaries(st.lists(st.sampled_from(b"abcde ."), min_size=1, max_size=12).map(bytes), st.integers(1, 9),
                       min_size=1, max_size=25), st.integers(0, 40), st.sampled_from([2, 4, 16]))
def test_fuzz_untracked_pairs_past_2048_ids_equal_reference(word_counts, n, tracked_from):
    _check(word_counts, _wide_base(), n, Tuning(tracked_from=tracked_from))


def test_untracked_pairs_are_counted_again_when_the_loop_gets_down_to_them():
    df = pl.read_parquet(FIXTURES / "sample.parquet")
    wc = count_words(df["text"].head(120))
    words = dict(zip(wc["word"].to_list(), wc["count"].to_list()))
    res = _check(words, Vocab.base(), 1500, Tuning(tracked_from=64))
    assert res.stats["tracked_from"] == 64 and res.stats["recounts"] >= 1
    assert res.count.min() < 64



@given(st.dictionaries(st.lists(st.sampled_from(b"abcd"), min_size=2, max_size=9).map(bytes), st.integers(1, 9),
                       min_size=1, max_size=40), st.integers(0, 30), st.sampled_from([2, 3, 6]))
def test_fuzz_reused_tokens_with_untracked_pairs_equal_reference(word_counts, n, tracked_from):
    # every 3-byte string of the alphabet in the base, no 2-byte one: rank-BPE reaches none of
    # them, and the merges that make them reuse them; a reused token's pairs may have untracked
    # positions already, so the loop counts every pair again, tracking all, before such a merge
    base = Vocab.base(False)
    alpha = b"abcd"
    base.tokens += [bytes([x, y, z]) for x in alpha for y in alpha for z in alpha]
    res = _check(word_counts, base, n, Tuning(tracked_from=tracked_from))
    assert res.stats["recounts"] >= (1 if res.reused.any() else 0)


# counts around the largest a position row holds (2**23 - 1 when the run has at most 510 token
# ids), which are looked up in a side table, and past 2**32
big_counts = st.sampled_from([1, 2, 2**23 - 2, 2**23 - 1, 2**23, 2**33 + 5])


@given(st.dictionaries(st.lists(st.sampled_from(b"abc ."), min_size=1, max_size=10).map(bytes), big_counts,
                       min_size=1, max_size=20), st.integers(0, 40), extra_tokens)
def test_fuzz_large_counts_equal_reference(word_counts, n, extra):
    base = Vocab.base(False)
    base.tokens += extra
    _check(word_counts, base, n)


def _wide_base() -> Vocab:
    """The bytes and 2,000 more tokens (2 to 4 of ``abcde .``, rank-BPE may not reach them): a
    vocabulary past the 2,048 ids whose pairs the pair table counts in a dense array, so that the
    table is built by sorting the positions by pair (``table._pairs_by_left``), as in SuperBPE's
    second phase."""
    import itertools

    base = Vocab.base(False)
    base.tokens += [bytes(t) for n in (2, 3, 4) for t in itertools.product(b"abcde .", repeat=n)][:2000]
    return base


# around the largest count a position row holds with 2,256 + 40 ids (12 bits): 2**20 - 1
wide_counts = st.sampled_from([1, 2, 3, 2**20 - 2, 2**20 - 1, 2**20, 2**33 + 5])


@given(st.dictionaries(st.lists(st.sampled_from(b"abcdef ."), min_size=1, max_size=12).map(bytes), wide_counts,
                       min_size=1, max_size=25), st.integers(0, 40))
def test_fuzz_a_vocabulary_past_2048_ids_equals_reference(word_counts, n):
    _check(word_counts, _wide_base(), n)


@given(small_words, st.integers(0, 40), extra_tokens)
def test_fuzz_tight_tables_equal_reference(word_counts, n, extra):
    # as above, with no spare room: the pool is grown and compacted often, and the heap holds
    # only the few pairs with the largest counts, refilled whenever it runs empty
    base = Vocab.base(False)
    base.tokens += extra
    _check(word_counts, base, n, Tuning(pairs_per_merge=0, pool_spare=0, pool_slack=0, heap_target=2))


@given(small_words, st.integers(0, 40), extra_tokens)
def test_fuzz_list_order_changes_nothing(word_counts, n, extra):
    # the positions of a pair are merged in list order; the result must not depend on it (the
    # loop sorts the lists of (a, a) pairs, whose overlapping runs go left to right)
    base = Vocab.base(False)
    base.tokens += extra
    _check(word_counts, base, n, Tuning(descending_lists=True))


@given(small_words, st.integers(0, 40), extra_tokens, st.integers(1, 6), st.sampled_from([None, 1, 2, 5, 30]))
def test_fuzz_token_length_and_frequency_equal_reference(word_counts, n, extra, max_len, min_freq):
    # --max-token-length passes over the pairs too long to merge; --min-frequency stops the loop
    base = Vocab.base(False)
    base.tokens += extra
    res = _check(word_counts, base, n, max_token_length=max_len, min_frequency=min_freq)
    assert all(len(res.vocab.tokens[t]) <= max_len for t in res.token.tolist())


@given(small_words, st.integers(0, 40), st.integers(2, 4), st.sampled_from([None, 3, 20]))
def test_fuzz_limits_with_tight_tables_equal_reference(word_counts, n, max_len, min_freq):
    _check(word_counts, Vocab.base(False), n, Tuning(pairs_per_merge=0, pool_spare=0, pool_slack=0, heap_target=2),
           max_token_length=max_len, min_frequency=min_freq)


def test_max_token_length_still_learns_the_merges_asked_for():
    df = pl.read_parquet(FIXTURES / "sample.parquet")
    wc = count_words(df["text"].head(120))
    words = dict(zip(wc["word"].to_list(), wc["count"].to_list()))
    res = _check(words, Vocab.base(False), 600, max_token_length=4)
    assert res.new_tokens == 600
    assert max(len(t) for t in res.vocab.tokens) == 4
    free = learn_merges(list(words), np.array(list(words.values())), Vocab.base(False), 600)
    assert max(len(t) for t in free.vocab.tokens) > 4  # the limit changed something


def test_min_frequency_stops_where_the_reference_stops():
    df = pl.read_parquet(FIXTURES / "sample.parquet")
    wc = count_words(df["text"].head(120))
    words = dict(zip(wc["word"].to_list(), wc["count"].to_list()))
    res = _check(words, Vocab.base(), 5000, min_frequency=9)
    assert 0 < res.new_tokens < 5000
    assert res.count.min() >= 9 and 0 < res.stopped_at < 9
    # no limit: the same first merges, then more
    more = learn_merges(list(words), np.array(list(words.values())), Vocab.base(), 5000)
    assert more.token[: len(res.token)].tolist() == res.token.tolist() and more.stopped_at == 0


def test_reversed_lists_equal_reference():
    df = pl.read_parquet(FIXTURES / "sample.parquet")
    wc = count_words(df["text"].head(60))
    res = _check(dict(zip(wc["word"].to_list(), wc["count"].to_list())), Vocab.base(), 600,
                 Tuning(descending_lists=True))
    assert res.stats["lists_sorted"] > 0  # lists sorted before merging overlapping runs


def test_fixture_equals_reference():
    df = pl.read_parquet(FIXTURES / "sample.parquet")
    wc = count_words(df["text"].head(120))
    words = dict(zip(wc["word"].to_list(), wc["count"].to_list()))
    res = _check(words, Vocab.base(), 1200)
    assert res.new_tokens == 1200


def _same_as_the_loop(words: list[bytes], counts: list[int], vocab: Vocab, n: int, **limits):
    """The Python loop of a small run (``learn_small``) and the compiled loop give the same result."""
    got = learn_small(words, counts, vocab, n, **limits)
    fast = learn_merges(words, np.array(counts, np.int64), vocab, n, **limits)
    assert got.stopped_at == fast.stopped_at
    for k in ("left", "right", "token", "count", "reused", "word_tokens"):
        a, b = getattr(got, k), getattr(fast, k)
        assert a.dtype == b.dtype and a.tolist() == b.tolist(), k
    assert got.vocab.tokens == fast.vocab.tokens and got.vocab.specials == fast.vocab.specials
    assert got.new_tokens == fast.new_tokens
    return got


@given(small_words, st.integers(0, 40), extra_tokens)
def test_fuzz_small_run_loop_equals_the_compiled_loop(word_counts, n, extra):
    base = Vocab.base(False)
    base.tokens += extra
    _same_as_the_loop(list(word_counts), list(word_counts.values()), base, n)


@given(small_words, st.integers(0, 40), extra_tokens, st.none() | st.integers(1, 6), st.none() | st.integers(0, 80))
def test_fuzz_small_run_loop_with_limits_equals_the_compiled_loop(word_counts, n, extra, longest, least):
    # --max-token-length and --min-frequency: pairs too long passed over, the loop stopped early
    base = Vocab.base(False)
    base.tokens += extra
    _same_as_the_loop(list(word_counts), list(word_counts.values()), base, n, max_token_length=longest,
                      min_frequency=least)


@given(st.lists(st.text(max_size=30), min_size=1, max_size=12), st.integers(0, 60))
def test_fuzz_small_run_loop_on_text_equals_the_compiled_loop(texts, n):
    # any text, counted as a run counts it, on the bytes and hardcoded tokens
    wc = count_words(pl.Series(texts, dtype=pl.String))
    if wc.height:
        _same_as_the_loop(wc["word"].to_list(), wc["count"].to_list(), Vocab.base(), n)


def test_small_run_loop_on_the_fixture_equals_the_compiled_loop():
    df = pl.read_parquet(FIXTURES / "sample.parquet")
    wc = count_words(df["text"].head(120))
    res = _same_as_the_loop(wc["word"].to_list(), wc["count"].to_list(), Vocab.base(), 1200)
    assert res.new_tokens == 1200
    # what learn_merges of a small run takes for a few words: the Python loop, same merges, with a
    # checkpoint; more words take the compiled loop
    wc = count_words(df["text"].head(5))
    want = learn_merges(wc["word"].to_arrow(), wc["count"].to_numpy(), Vocab.base(), 300)
    seen = []
    got = learn_merges(wc["word"].to_arrow(), wc["count"].to_numpy(), Vocab.base(), 300, reference=True,
                       checkpoint=lambda *r: seen.append(r))
    assert "layout" in want.times and "layout" not in got.times and got.token.tolist() == want.token.tolist()
    assert np.concatenate([r[2] for r in seen]).tolist() == want.token.tolist()
    assert got.word_tokens.tolist() == want.word_tokens.tolist()


def _tiktoken_pieces(vocab: Vocab):
    import tiktoken

    from toktok.vocab import PATTERN

    enc = tiktoken.Encoding("t", pat_str=PATTERN, mergeable_ranks=vocab.ranks(), special_tokens={})
    return enc._encode_single_piece


@pytest.mark.parametrize("long_from", [64, 1], ids=["plain", "heap"])
@given(
    words=st.lists(st.lists(st.sampled_from(b"ab c0"), min_size=0, max_size=12).map(bytes), min_size=1, max_size=10),
    extra=st.lists(st.lists(st.sampled_from(b"ab c0"), min_size=2, max_size=5).map(bytes), max_size=12, unique=True),
)
def test_fuzz_segmentation_equals_tiktoken(long_from, words, extra):
    # extra tokens in arbitrary order, with holes: exactly the layouts warm starts bring; every
    # word through the plain loop, then through the heap that long words take
    base = Vocab.base(False)
    base.tokens += extra
    flat, off = segment(words, base, long_from=long_from)
    encode = _tiktoken_pieces(base)
    for i, w in enumerate(words):
        assert flat[off[i]:off[i + 1]].tolist() == (encode(w) if w else [])


@pytest.mark.parametrize("long_from", [2, 64], ids=["heap", "plain"])
@given(
    words=st.lists(st.lists(st.sampled_from([b"a", b"b", b" ", b"c", b"\n", b"\xc3\xa9", b"ab c"]), max_size=90).map(
        b"".join), min_size=1, max_size=8),
    extra=st.lists(st.lists(st.sampled_from(b"ab c\n\xc3\xa9"), min_size=2, max_size=6).map(bytes), max_size=16,
                   unique=True),
)
@example(words=[b"abc abc\nabc " * 8], extra=[b"abc", b"c "])  # "abc": a token, not its own BPE
@example(words=[b"ab ab c\n" * 12], extra=[b" c", b"ab", b"b "])
def test_fuzz_long_words_by_parts_equal_whole_word_and_tiktoken(long_from, words, extra):
    # a word (of PARTED_FROM bytes or more) is segmented by its parts (cut between two bytes
    # adjacent in no token), each distinct part once (the second copy of the words: every part
    # from the cache), and a part that is a token whose own BPE is not itself (tokens in any
    # order) is not taken whole: the ids equal the whole word's plain loop (WHOLE) and tiktoken's
    base = Vocab.base(False)
    base.tokens += extra
    words = words + words
    parted, off = segment(words, base, long_from=long_from)
    whole, woff = segment(words, base, long_from=WHOLE)
    assert parted.tolist() == whole.tolist() and off.tolist() == woff.tolist()
    encode = _tiktoken_pieces(base)
    for i, w in enumerate(words):
        assert parted[off[i]:off[i + 1]].tolist() == (encode(w) if w else [])


@given(
    words=st.lists(st.lists(st.sampled_from(["a", "b", " ", "c", "0", "é", "😀"]), min_size=1, max_size=70).map(
        lambda cs: "".join(cs).encode()), min_size=1, max_size=10),
    extra=st.lists(st.lists(st.sampled_from(b"ab c0"), min_size=2, max_size=5).map(bytes), max_size=12, unique=True),
)
def test_fuzz_tiktoken_segmenter_equals_compiled(words, extra):
    # a run's Segmenter takes tiktoken itself while _segment is not compiled (the first run after
    # an install); here both ways, on every prefix of the vocabulary
    from toktok.merge import Segmenter
    from toktok.merge.tokens import _token_arrays, _flatten

    base = Vocab.base()
    base.tokens += [t for t in extra if t not in set(base.tokens)]
    sg = Segmenter(*_token_arrays(base, 0))
    data, off = _flatten(words)
    for n in (257, 1417, len(base.tokens)):
        flat, offsets = sg.ids(words, n)
        got = sg._by_tiktoken(data, off, n)
        assert got is not None and got[0].tolist() == flat.tolist() and got[1].tolist() == offsets.tolist()


def test_tiktoken_segmenter_takes_any_bytes_and_arrow_slices_and_declines_duplicates():
    import pyarrow as pa

    from toktok.merge import Segmenter
    from toktok.merge.tokens import _token_arrays, _flatten

    v = Vocab.base()
    sg = Segmenter(*_token_arrays(v, 0))
    words = pa.array([b"skipped", b"ok", b"\xff\xfe 000", b"  \n\n"], pa.large_binary()).slice(1)
    flat, offsets = sg._by_tiktoken(*_flatten(words), len(v.tokens))
    want_flat, want_off = sg.ids(words, len(v.tokens))
    assert flat.tolist() == want_flat.tolist() and offsets.tolist() == want_off.tolist()
    v.tokens.append(b"00")  # the same bytes as id 256
    assert Segmenter(*_token_arrays(v, 0))._by_tiktoken(*_flatten([b"ok"]), len(v.tokens)) is None


def _run_vocab(unit: bytes, n: int) -> Vocab:
    """Bytes + hardcoded tokens + the powers-of-two runs of ``unit`` and a few odd lengths, in a
    mixed order (as a phase trained on a long run of it leaves them)."""
    v = Vocab.base()
    have = set(v.tokens)
    for k in (2, 4, 3, 8, 16, 6, 32, 64, 5, 128, 256, 100, 512, 1024, 2048, 4096, 3000):
        if k <= n and unit * k not in have:
            v.tokens.append(unit * k)
            have.add(unit * k)
    return v


@pytest.mark.parametrize("unit", [b"a", b"-", b" ", b"=", b"ab", b"x-"])
def test_long_runs_segment_as_tiktoken(unit):
    """Words of thousands of bytes (the heap path) against tiktoken, including lengths just off
    the tokens' and runs broken by another byte."""
    v = _run_vocab(unit, 5000)
    words = [unit * k for k in (63, 64, 65, 1000, 1023, 1025, 4095, 4097, 5000)]
    words += [unit * 700 + b"Q" + unit * 900, b"Z" + unit * 3001, unit * 2500 + b"yz"]
    flat, off = segment(words, v)
    encode = _tiktoken_pieces(v)
    for i, w in enumerate(words):
        assert flat[off[i]:off[i + 1]].tolist() == encode(w), len(w)


def test_arrow_words_equal_list_words():
    import pyarrow as pa

    words = [b"hello", b" world", b"00123", b"x"]
    counts = np.array([5, 4, 3, 2])
    a = learn_merges(words, counts, Vocab.base(), 6)
    b = learn_merges(pa.array(words, pa.binary()).slice(0), counts, Vocab.base(), 6)
    assert a.vocab.tokens == b.vocab.tokens and a.word_tokens.tolist() == b.word_tokens.tolist()
    # each word's final number of tokens is the reference's
    _, _, ref_words = train(dict(zip(words, counts.tolist())), Vocab.base().tokens, 6, return_words=True)
    assert a.word_tokens.tolist() == [len(w) for w in ref_words]


@pytest.mark.parametrize("every", [0, 0.001])
def test_checkpoints_concatenate_to_the_result(every):
    df = pl.read_parquet(FIXTURES / "sample.parquet")
    wc = count_words(df["text"].head(120))
    words, counts = wc["word"].to_list(), np.array(wc["count"].to_list(), dtype=np.int64)
    calls, seen = [], []
    res = learn_merges(words, counts, Vocab.base(), 400, progress=seen.append,
                       checkpoint=lambda *a: calls.append(a), every=every)
    for i, name in enumerate(("left", "right", "token", "count", "reused")):
        got = np.concatenate([c[i] for c in calls])
        want = getattr(res, name)
        assert got.dtype == want.dtype and got.tolist() == want.tolist(), name
    assert res.new_tokens == 400
    if every == 0:
        # deterministic: a checkpoint after every new token, then the (empty) rest
        assert all(len(c[0]) > 0 for c in calls[:-1]) and len(calls) - 1 >= 400 and len(calls[-1][0]) == 0
        assert seen == sorted(seen) and seen[-1] == 400
    # without a checkpoint the result is the same
    plain = learn_merges(words, counts, Vocab.base(), 400)
    assert plain.token.tolist() == res.token.tolist() and plain.vocab.tokens == res.vocab.tokens


def test_record_arrays_grow_when_reuses_fill_them():
    # many reused merges: the base holds every 3-byte string of the alphabet but no 2-byte one,
    # so rank-BPE reaches none of them and the merges that make them reuse them; with a tiny
    # record capacity the loop must be resumed with larger arrays

    base = Vocab.base(False)
    alpha = b"abcd"
    base.tokens += [bytes([x, y, z]) for x in alpha for y in alpha for z in alpha]
    rng = np.random.default_rng(7)
    words = {bytes(rng.choice(list(alpha), int(rng.integers(2, 9))).tolist()): int(rng.integers(1, 50)) for _ in range(80)}
    want = _check(words, base, 30)
    assert want.reused.sum() > 4
    calls = []
    got = learn_merges(list(words), np.array(list(words.values())), base, 30, checkpoint=lambda *a: calls.append(a),
                       every=0, tuning=Tuning(records=2))
    assert got.token.tolist() == want.token.tolist() and got.reused.tolist() == want.reused.tolist()
    assert np.concatenate([c[2] for c in calls]).tolist() == want.token.tolist()


def test_tight_tables_change_nothing():
    # no spare room at the start: the loop must rebuild its pair table, compact its pool of
    # position lists and grow it, refill its heap many times, and still learn exactly what it
    # learns with room to spare (which test_fixture_equals_reference holds to the reference)

    df = pl.read_parquet(FIXTURES / "sample.parquet")
    wc = count_words(df["text"].head(400))
    words, counts = wc["word"].to_list(), np.array(wc["count"].to_list(), dtype=np.int64)
    roomy = learn_merges(words, counts, Vocab.base(False), 6000)
    tight = learn_merges(words, counts, Vocab.base(False), 6000,
                         tuning=Tuning(pairs_per_merge=0, pool_spare=0, pool_slack=0, heap_target=16))
    for name in ("pool_compactions", "pool_growths", "table_rebuilds", "heap_refills"):
        assert tight.stats[name] > 0, tight.stats
    for name in ("left", "right", "token", "count", "reused", "word_tokens"):
        assert getattr(tight, name).tolist() == getattr(roomy, name).tolist(), name


def test_llvm_pages_given_back_change_nothing():
    # release_llvm_pages drops LLVM's code pages from the process; kernels loaded before and
    # after it must still run and agree with the reference.
    import sys

    from toktok._kernels import load, release_llvm_pages
    from toktok.vocab import Vocab

    load()  # Numba and LLVM mapped whatever ran before (calls of modules built ahead map neither)
    words, counts = [b"hello", b" world", b" hello", b"abab"], np.array([5, 3, 2, 7])
    before = learn_merges(words, counts, Vocab.base(hardcoded=False), 6)
    n = release_llvm_pages()
    if sys.platform.startswith("linux"):
        assert n >= 1  # the library's read-only and code mappings
    after = learn_merges(words, counts, Vocab.base(hardcoded=False), 6)
    assert after.vocab.tokens == before.vocab.tokens
    ref, _ = train(dict(zip(words, counts.tolist())), [bytes([i]) for i in range(256)], 6)
    assert after.vocab.tokens == ref
    c = count_words(["hello world hello"])
    assert dict(c.iter_rows()) == {b"hello": 1, b" world": 1, b" hello": 1}


def test_array_intrinsics_make_what_numpy_makes():
    """The kernels' array constructors (_kernels._empty_array, _zero_array, _full_array, which
    compile nothing of their own) give NumPy's shapes, dtypes, layout and values, empty included."""
    from numba import njit

    from toktok._kernels import _empty_array, _full_array, _zero_array

    @njit
    def make(n):
        e = _empty_array((n, 2), np.uint32)
        e[:] = 5
        like = _empty_array(n, e.dtype)
        return e, like, _zero_array((n, 3), np.int64), _zero_array(n, np.bool_), _full_array(n, -1, np.int32), \
            _full_array((n, 2), 7, np.uint8)

    for n in (0, 1, 7, 4099):
        e, like, z, zb, f, f2 = make(n)
        want = (np.full((n, 2), 5, np.uint32), np.empty(n, np.uint32), np.zeros((n, 3), np.int64),
                np.zeros(n, np.bool_), np.full(n, -1, np.int32), np.full((n, 2), 7, np.uint8))
        for got, w in zip((e, like, z, zb, f, f2), want):
            assert got.shape == w.shape and got.dtype == w.dtype and got.flags.c_contiguous
        for got, w in zip((e, z, zb, f, f2), (want[0], *want[2:])):
            assert np.array_equal(got, w)


def test_small_enough_counts_the_words_bytes_not_the_arrays():
    # 8,192 words of 8 bytes are 64 KiB of words: small; as an Arrow array (8-byte offsets each)
    # they take twice that, which must not count
    import pyarrow as pa

    from toktok.merge.small import SMALL_POSITIONS, SMALL_WORDS, small_enough

    words = [b"%08d" % i for i in range(SMALL_WORDS)]
    assert sum(map(len, words)) == SMALL_POSITIONS
    for w in (words, pa.array(words, pa.large_binary()), pa.array(words, pa.binary()),
              pa.array([b"x"] + words, pa.large_binary()).slice(1)):
        assert small_enough(w)
    assert not small_enough(words + [b"a"])
    assert not small_enough(pa.array(words[:-1] + [b"%09d" % 0], pa.large_binary()))


def test_the_pair_table_makes_room_for_fewer_new_pairs_per_doubling_of_the_merges():
    # linear up to the knee, then as many again per doubling: 131,072 merges on 100 MB of the bench
    # corpus made 1.34 M pairs, in a table of 8.4 M rows when the room was 16 per merge
    from toktok.merge.learn import KNEE, expected_pairs

    assert [expected_pairs(n, 16) for n in (0, 1, KNEE)] == [0, 16, 16 * KNEE]
    assert expected_pairs(2 * KNEE, 16) == 2 * 16 * KNEE
    assert expected_pairs(4 * KNEE, 16) == 3 * 16 * KNEE < 16 * 4 * KNEE
    sizes = [expected_pairs(n, 16) for n in range(0, 20 * KNEE, 997)]
    assert sizes == sorted(sizes)


def test_a_table_sized_for_fewer_pairs_than_the_merges_make_learns_the_same_merges():
    # the room per merge is a guess: a table that fills is rebuilt, with the same merges
    rng = np.random.default_rng(7)
    words = {bytes(rng.integers(97, 105, size=rng.integers(2, 12)).tolist()): int(rng.integers(1, 50))
             for _ in range(3000)}
    base = Vocab.base(False)
    n = 1500
    res = _check(words, base, n, Tuning(pairs_per_merge=1))
    assert res.stats["table_rebuilds"] > 0


def test_long_superword_pieces_segment_as_tiktoken():
    # SuperBPE's stage-2 pieces are paragraphs (thousands of bytes): the heap's segmentation of
    # them under a learned vocabulary equals tiktoken's own BPE, piece for piece, and the plain loop's
    from toktok.patterns import SUPERWORD

    texts = pl.read_parquet(FIXTURES / "sample.parquet")["text"].head(60)
    wc = count_words(texts.head(30), pattern=SUPERWORD["superbpe"])  # tokens across spaces
    vocab = learn_merges(wc["word"].to_arrow(), wc["count"].to_numpy(), Vocab.base(False), 600).vocab
    words = [w for w in count_words(texts, pattern=SUPERWORD["superbpe"])["word"].to_list() if len(w) >= 64]
    assert len(vocab.tokens) > 256 and len(words) > 10 and max(map(len, words)) > 2000
    encode = _tiktoken_pieces(vocab)
    heap, hoff = segment(words, vocab)
    plain, poff = segment(words, vocab, long_from=WHOLE)
    assert heap.tolist() == plain.tolist() and hoff.tolist() == poff.tolist()
    for i, w in enumerate(words):
        assert heap[hoff[i]:hoff[i + 1]].tolist() == encode(w)


def test_parts_that_overfill_the_caches_mid_word_segment_as_tiktoken():
    # tens of thousands of distinct parts (2 to 40 bytes: runs of letters that every pair of
    # which is a token, cut at spaces) in long words: the memos of short and medium parts and
    # the cache of longer ones fill and grow mid-word, the word going on where it stopped; their
    # entries hold ids inline or in mids. The ids equal the whole words' plain loop and tiktoken's.
    rng = np.random.default_rng(5)
    letters = b"abcdefgh"
    base = Vocab.base(False)
    base.tokens += [bytes([x, y]) for x in letters for y in letters]
    base.tokens += [bytes(rng.choice(list(letters), size=int(n)).tolist()) for n in rng.integers(3, 7, 300)]
    base.tokens = list(dict.fromkeys(base.tokens))
    words = [b" ".join(bytes(rng.choice(list(letters), size=int(n)).tolist())
                       for n in rng.integers(2, 41, size=int(rng.integers(20, 120)))) for _ in range(600)]
    parted, off = segment(words, base)
    whole, woff = segment(words, base, long_from=WHOLE)
    assert parted.tolist() == whole.tolist() and off.tolist() == woff.tolist()
    encode = _tiktoken_pieces(base)
    for i in range(0, len(words), 15):
        assert parted[off[i]:off[i + 1]].tolist() == encode(words[i])


def test_segmentation_in_threads_equals_one_thread_and_tiktoken(monkeypatch):
    # a large word table is cut into runs of words of about equal bytes, a thread each: the
    # ids, in word order, are one thread's and tiktoken's (each word's ids depend on it alone)
    import importlib

    seg = importlib.import_module("toktok.merge.segment")
    rng = np.random.default_rng(3)
    words = [bytes(rng.integers(97, 101, size=rng.integers(1, 90)).tolist()) for _ in range(4000)]
    vocab = learn_merges(words, np.ones(len(words), np.int64), Vocab.base(False), 300).vocab
    one, ooff = segment(words, vocab)
    monkeypatch.setattr(seg, "THREAD_BYTES", 1000)
    monkeypatch.setattr(seg, "_cores", lambda: 3)
    many, moff = segment(words, vocab)
    assert many.tolist() == one.tolist() and moff.tolist() == ooff.tolist()
    encode = _tiktoken_pieces(vocab)
    assert [many[moff[i]:moff[i + 1]].tolist() for i in range(len(words))] == [encode(w) for w in words]


def test_position_array_filled_in_threads_equals_one_threads_and_the_rows_described(monkeypatch):
    # the rows of runs of words of about equal positions are filled by a thread each, each run
    # from the row its first word starts at: the array and the side table of counts too large for
    # a row (filled in word order) are one thread's, and the rows are those layout._TC describes
    import importlib

    learn = importlib.import_module("toktok.merge.learn")
    rng = np.random.default_rng(7)
    lens = rng.integers(0, 6, size=3000).astype(np.int64)
    offsets = np.zeros(lens.shape[0] + 1, np.int64)
    np.cumsum(lens, out=offsets[1:])
    flat = rng.integers(0, 300, size=int(offsets[-1])).astype(np.int32)
    tb = 9  # (counts of 2 ** 23 - 1 or more take the side table)
    counts = np.where(rng.random(lens.shape[0]) < 0.05, rng.integers(1 << 23, 1 << 40, size=lens.shape[0]),
                      rng.integers(1, 1 << 23, size=lens.shape[0])).astype(np.int64)
    monkeypatch.setattr(learn, "FILL_POSITIONS", 100)
    got = [learn._fill_in_threads(flat, offsets, lens, counts, tb, k) for k in (1, 2, 3, 7)]
    for P, ek, ev in got[1:]:
        assert np.array_equal(P, got[0][0]) and np.array_equal(ek, got[0][1]) and np.array_equal(ev, got[0][2])
    P, ek, ev = got[0]
    cmax, wall = (1 << (32 - tb)) - 1, (1 << tb) - 2
    rows, big, o = [(wall, 0)], {}, 1
    for w in range(lens.shape[0]):
        n, s = int(lens[w]), int(offsets[w])
        if n >= 2:
            c = int(counts[w])
            for k in range(n):
                rows.append((min(c, cmax) << tb | int(flat[s + k]), o + k + 1))
                if c >= cmax:
                    big[o + k] = c
            rows.append((wall, 0))
            o += n + 1
    assert P.tolist() == [list(r) for r in rows] and len(big) > 100
    mask, m64 = ek.shape[0] - 1, (1 << 64) - 1

    def mix(x: int) -> int:  # (_kernels._mix)
        for f in (0xFF51AFD7ED558CCD, 0xC4CEB9FE1A85EC53, 1):
            x = ((x ^ x >> 33) * f) & m64
        return x

    for p, c in big.items():  # (found where the loop looks: layout._escaped)
        i = mix(p) & mask
        while ek[i] != p:
            i = (i + 1) & mask
        assert ev[i] == c
    assert int((ek >= 0).sum()) == len(big)


def test_a_layout_shared_by_a_waiting_thread_is_the_layout_of_one_thread(monkeypatch):
    # learn.Laying (a word-count table's layout, made as it is read): its runs of words segmented
    # and their rows filled by whichever thread takes them (the one running it, the one waiting
    # for it) give lay_out's arrays byte for byte; a job that fails gives None, never hangs
    import importlib
    import threading

    learn = importlib.import_module("toktok.merge.learn")
    rng = np.random.default_rng(11)
    words = sorted({bytes(rng.integers(97, 102, size=rng.integers(1, 40)).tolist()) for _ in range(3000)})
    vocab = learn_merges(words[::3], np.ones(len(words[::3]), np.int64), Vocab.base(False), 120).vocab
    counts = rng.integers(1, 1 << 40, size=len(words)).astype(np.int64)  # (many above a row's count bits)
    ref = learn.lay_out(words, counts, vocab, 400)

    def same(got):
        assert got is not None and (got.tokens, got.n_merges, got.n_words, got.merges, got.tb) == \
            (ref.tokens, ref.n_merges, ref.n_words, ref.merges, ref.tb)
        for a, b in ((got.P, ref.P), (got.ek, ref.ek), (got.ev, ref.ev), (got.lens, ref.lens)):
            assert a.dtype == b.dtype and a.tobytes() == b.tobytes()

    monkeypatch.setattr(learn, "PART_BYTES", 700)  # (about 40 runs of words)
    alone = learn.Laying(words, counts, vocab, 400)
    alone.run()
    same(alone.result())
    assert alone.shared == 0 and alone._k > 20
    waiter = learn.Laying(words, counts, vocab, 400)
    waiter._start()  # (started, no part taken: the waiting thread takes every one)
    same(waiter.result())
    assert waiter.shared == 2 * waiter._k
    for _ in range(5):  # both at once, parts taken as they come
        job = learn.Laying(words, counts, vocab, 400)
        th = threading.Thread(target=job.run)
        th.start()
        got = job.result()
        th.join()
        same(got)
    bad = learn.Laying(words, counts[:-1], vocab, 400)  # (one count short)
    th = threading.Thread(target=bad.run)
    th.start()
    assert bad.result() is None
    th.join()
    interrupted = learn.Laying(words, counts, vocab, 400)
    interrupted._start()

    def interrupt(*a):
        raise KeyboardInterrupt

    with monkeypatch.context() as m:  # (an interrupt while the run's thread takes a part is the run's)
        m.setattr(learn.Segmenter, "run", staticmethod(interrupt))
        with pytest.raises(KeyboardInterrupt):
            interrupted.result()
    assert interrupted.result() is None
    as_bytes = learn.Laying(words, counts, Vocab.base(False), 400)  # (ids are the bytes: lay_out's, whole)
    as_bytes.run()
    assert as_bytes.result().P.tobytes() == learn.lay_out(words, counts, Vocab.base(False), 400).P.tobytes()


def test_merge_log_rows_are_the_same_whoever_made_the_tokens():
    """The merge log's rows (``_MergeLog._table``) of tokens made beside the loop (``_Learned``,
    taken as they are) equal those it makes and logs itself, reused merges included."""
    from toktok.merge.stage import _Learned, _MergeLog

    base = [bytes([b]) for b in range(256)]
    left = np.array([97, 98, 256, 97, 257], np.int32)
    right = np.array([98, 99, 99, 98, 256], np.int32)
    token = np.array([256, 257, 258, 256, 259], np.int32)
    count = np.array([9, 8, 7, 6, 5], np.int64)
    reused = np.array([False, False, False, True, False])
    said: list[str] = []
    logged = _MergeLog(None, "p", base, 10, "", said.append)  # makes its tokens (and logs them)
    slow = logged._table(left, right, token, count, reused)
    shared = _MergeLog(None, "p", base, 10, "", None)
    _Learned(shared.toks, lambda toks, last: None)(left, right, token, reused, True)  # made beside the loop
    fast = shared._table(left, right, token, count, reused)
    assert fast.equals(slow) and fast.column("token").to_pylist()[2] == b"abc"
    assert shared.learned == logged.learned == 4 and shared.at == logged.at == 15 and len(said) == 4
