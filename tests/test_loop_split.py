"""The merge loop's rounds shared with a second thread (``Tuning.split_from``) learn exactly the
merges one thread learns, and the reference's."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from oracles.reference_bpe import train

from toktok.merge import Tuning, learn_merges
from toktok.merge import learn as learn_mod
from toktok.vocab import Vocab

# words that share their pairs (so that rounds have several positions, in several words) and
# repeat bytes (overlapping runs: a a a), with counts from 1 to past a row's count bits
words = st.dictionaries(st.lists(st.sampled_from(b"aab c."), min_size=1, max_size=14).map(bytes),
                        st.integers(1, 60) | st.integers(1, 1 << 40), min_size=1, max_size=40)
extra = st.lists(st.lists(st.sampled_from(b"abc"), min_size=2, max_size=4).map(bytes), max_size=4, unique=True)


def _merges(word_counts, vocab, n, tuning):
    res = learn_merges(list(word_counts), np.array(list(word_counts.values()), np.int64), vocab, n, tuning=tuning)
    return res, list(zip(res.left.tolist(), res.right.tolist(), res.token.tolist(), res.count.tolist(),
                         res.reused.tolist()))


def _two_cores() -> bool:
    return learn_mod._cores() >= 2 and learn_mod._FUTEX.get(__import__("platform").machine()) is not None


@settings(max_examples=60, deadline=None)
@given(words, st.integers(0, 60), extra, st.sampled_from([None, 1, 4]), st.booleans(), st.booleans())
def test_fuzz_rounds_split_in_two_equal_one_thread_and_the_reference(word_counts, n, extra, tracked_from, desc,
                                                                      wait):
    # every round of 2 positions or more is cut where a word ends, its second part merged by the
    # second thread (``wait``: always; else when it takes it before the loop is done with the first)
    learn_mod._Beside.wait = wait
    try:
        _fuzz(word_counts, n, extra, tracked_from, desc)
    finally:
        learn_mod._Beside.wait = False


def _fuzz(word_counts, n, extra, tracked_from, desc):
    vocab = Vocab.base(False)
    vocab.tokens += extra  # merges that reuse a token: lists that are not ascending are not cut
    one, m1 = _merges(word_counts, vocab, n, Tuning(split_from=0, tracked_from=tracked_from, descending_lists=desc))
    two, m2 = _merges(word_counts, vocab, n, Tuning(split_from=2, tracked_from=tracked_from, descending_lists=desc))
    assert m2 == m1 and two.vocab.tokens == one.vocab.tokens
    assert two.word_tokens.tolist() == one.word_tokens.tolist()
    ref_tokens, ref_merges = train(word_counts, vocab.tokens, n)
    assert m2 == ref_merges and two.vocab.tokens == ref_tokens
    assert one.stats["rounds_split"] == 0


@pytest.mark.parametrize("thread, wait", [(True, True), (True, False), (False, False)])
def test_large_rounds_are_shared_and_learn_the_same_merges(monkeypatch, thread, wait):
    # many words with the same pairs: rounds of thousands of positions. Without the thread the
    # loop takes every part back itself (what a machine too busy to run it leaves); waiting for
    # it, the thread merges every second part; else each part goes to whichever comes first
    monkeypatch.setattr(learn_mod._Beside, "thread", thread)
    monkeypatch.setattr(learn_mod._Beside, "wait", wait)
    rng = np.random.default_rng(5)
    wc = {bytes(rng.choice(list(b"abcde fg"), size=rng.integers(2, 12)).tolist()): int(rng.integers(1, 1000))
          for _ in range(6000)}
    one, m1 = _merges(wc, Vocab.base(False), 300, Tuning(split_from=0))
    two, m2 = _merges(wc, Vocab.base(False), 300, Tuning(split_from=512))
    assert m2 == m1 and two.vocab.tokens == one.vocab.tokens
    assert two.word_tokens.tolist() == one.word_tokens.tolist()
    if wait and _two_cores():
        assert two.stats["rounds_split"] > 0
    elif not thread:
        assert two.stats["rounds_split"] == 0  # (every part taken back)


def test_a_run_shares_its_rounds_only_with_a_core_left_beside_its_own_work(monkeypatch):
    # on two cores the run's work beside the loop has the second core: its rounds are not shared
    monkeypatch.setattr(learn_mod, "_cores", lambda: 2)
    assert learn_mod.in_a_run() == Tuning(split_from=0)
    monkeypatch.setattr(learn_mod, "_cores", lambda: learn_mod.SHARE_FROM_CORES)
    assert learn_mod.in_a_run() == Tuning() and Tuning().split_from > 0
