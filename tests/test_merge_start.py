"""The merge loop's starting state made in two threads (``learn._LoopRun._start``: each half of the
positions counted and written to the lists in a thread of its own) is exactly the state one thread
makes (``loop._setup``): the same pair table, lists, heap and scalars."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toktok.merge import Tuning, learn_merges
from toktok.merge import learn as learn_mod
from toktok.merge.loop import NO_LIMIT
from toktok.vocab import Vocab


def _states(words, counts, vocab: Vocab, n: int, tracked_from: int | None):
    """``_start``'s state in one thread and in two, for a loop of ``n`` merges."""
    run = learn_mod._LoopRun(list(words), np.asarray(counts, np.int64), vocab, n, Tuning())
    expect = min(learn_mod.expected_pairs(run.n_merges, 4), run.P.shape[0])
    theta = -int(NO_LIMIT) if tracked_from is None else tracked_from
    one = run._start(expect, theta, 2 * run.n_merges, threads=1)
    two = run._start(expect, theta, 2 * run.n_merges, threads=2)
    return run, one, two


def _same(one, two) -> None:
    """The states are equal where they are written (the pool up to its end, the heap up to its rows)."""
    st1, st2 = one[6], two[6]
    assert st1.tolist() == st2.tolist()
    end, hn = int(st1[1]), int(st1[3])
    for k, (a, b) in enumerate(zip(one, two)):
        assert a.dtype == b.dtype and a.shape == b.shape, k
        if k == 4:
            a, b = a[:end], b[:end]
        elif k == 5:
            a, b = a[:hn], b[:hn]
        assert np.array_equal(a, b), k


def _ascending_lists(state) -> bool:
    _, _, T, L, pool, _, st = state
    rows = np.flatnonzero(L[:, 1] > 1)
    return all(bool(np.all(np.diff(pool[L[r, 0]: L[r, 0] + L[r, 1]]) > 0)) for r in rows)


@pytest.mark.parametrize("hardcoded", [False, True])
@pytest.mark.parametrize("tracked_from", [None, 1, 40])
def test_two_threads_make_the_state_one_thread_makes(hardcoded, tracked_from):
    # random words over a few bytes (their pairs in both halves, and in one only) with counts
    # from 1 to past a row's count bits (looked up in the side table) and past 2**32
    rng = np.random.default_rng(7)
    words = sorted({bytes(rng.integers(97, 104, size=rng.integers(1, 12)).tolist()) for _ in range(6000)})
    words += [b"zq" * 3, b"0123456789"]  # pairs of the second half only
    counts = rng.integers(1, 60, size=len(words))
    counts[::97] = (1 << 40) + 3
    counts[5::89] = rng.integers(1 << 19, 1 << 24, size=counts[5::89].shape[0])
    vocab = Vocab.base(hardcoded)
    run, one, two = _states(words, counts, vocab, 500, tracked_from)
    assert run.ek.shape[0] > 0 and np.count_nonzero(run.ek >= 0) > 0  # counts in the side table
    _same(one, two)
    assert _ascending_lists(two)
    if tracked_from == 40:  # some pairs not tracked: fewer rows than with every pair tracked
        assert int(one[6][22]) == 40 and int(one[6][0]) < int(_states(words, counts, vocab, 500, 1)[1][6][0])


@settings(max_examples=40, deadline=None)
@given(st.dictionaries(st.lists(st.sampled_from(b"aab c."), min_size=1, max_size=10).map(bytes),
                       st.integers(1, 60) | st.sampled_from([2**23 - 1, 2**23, 2**33 + 5]), min_size=1, max_size=30),
       st.integers(1, 40), st.sampled_from([None, 1, 3]))
def test_fuzz_two_threads_make_the_state_one_thread_makes(word_counts, n, tracked_from):
    # tiny inputs: halves with no pair, pairs of one half only, every row in one half
    _, one, two = _states(word_counts, list(word_counts.values()), Vocab.base(False), n, tracked_from)
    _same(one, two)


def test_a_run_started_in_two_threads_learns_what_one_thread_learns(monkeypatch):
    rng = np.random.default_rng(11)
    words = [bytes(rng.integers(97, 106, size=rng.integers(2, 14)).tolist()) for _ in range(3000)]
    counts = rng.integers(1, 1000, size=len(words))
    counts[::50] = 1 << 30

    def learned():
        res = learn_merges(words, counts, Vocab.base(), 400)
        return res.left.tolist(), res.right.tolist(), res.count.tolist(), res.vocab.tokens, res.stats

    monkeypatch.setattr(learn_mod._LoopRun, "SPLIT_SETUP", 1 << 62)
    one = learned()
    monkeypatch.setattr(learn_mod._LoopRun, "SPLIT_SETUP", 2)
    monkeypatch.setattr(learn_mod, "_cores", lambda: 2)
    parts = _counted_parts(monkeypatch)
    assert learned() == one
    assert _cover(parts)


def _counted_parts(monkeypatch) -> list:
    """The rows ``(lo, hi)`` each call of ``count_pairs`` and ``count_more`` counts, as they are called."""
    parts: list = []
    count_pairs, count_more = learn_mod.count_pairs, learn_mod.count_more
    monkeypatch.setattr(learn_mod, "count_pairs", lambda *a: parts.append(a[5:7]) or count_pairs(*a))
    monkeypatch.setattr(learn_mod, "count_more", lambda *a: parts.append(a[5:7]) or count_more(*a))
    return parts


def _cover(parts: list, n: int | None = None) -> bool:
    """Whether the parts are the rows of ``P`` (``n`` of them) once each: from 0, each starting where
    another ends."""
    got = sorted(parts)
    return got[0][0] == 0 and all(a[1] == b[0] for a, b in zip(got, got[1:])) and len(got) == len(set(got)) and \
        (n is None or got[-1][1] == n)


def test_parts_the_second_thread_has_not_begun_are_done_by_the_first(monkeypatch):
    # a second core too busy to start the thread: the loop's thread takes every part itself
    class Late:
        def __init__(self, target, **_):
            self.target = target

        def start(self):
            pass

        def join(self):
            self.target()  # (starts once the first is done: nothing left for it)

    words = [bytes([97 + i % 5, 98 + i % 7, 97 + i % 3]) * 3 for i in range(400)]
    counts = np.arange(1, 401) * 1000
    run, one, _ = _states(words, counts, Vocab.base(), 300, None)
    monkeypatch.setattr(learn_mod.threading, "Thread", Late)
    monkeypatch.setattr(learn_mod._LoopRun, "SETUP_PARTS", 4)
    parts = _counted_parts(monkeypatch)
    expect = min(learn_mod.expected_pairs(run.n_merges, 4), run.P.shape[0])
    late = run._start(expect, -int(NO_LIMIT), 2 * run.n_merges, threads=2)
    _same(one, late)
    n = run.P.shape[0]
    assert parts == [(0, n // 4), (n // 4, n // 2), (n // 2, 3 * n // 4), (3 * n // 4, n)]  # all, in this thread
    assert [learn_mod._shared(lambda: 1, lambda: 2, lambda: 3)] == [[1, 2, 3]]


def test_the_other_thread_counting_every_part_makes_the_same_state(monkeypatch):
    # the second thread's count (from the last part back) done first, in full: it counted them all
    rng = np.random.default_rng(9)
    words = [bytes(rng.integers(97, 104, size=rng.integers(2, 12)).tolist()) for _ in range(2000)]
    run, one, _ = _states(words, rng.integers(1, 1 << 30, size=len(words)), Vocab.base(), 300, None)
    monkeypatch.setattr(learn_mod, "_shared", lambda *tasks: [t() for t in tasks[::-1]][::-1])
    parts = _counted_parts(monkeypatch)
    expect = min(learn_mod.expected_pairs(run.n_merges, 4), run.P.shape[0])
    _same(one, run._start(expect, -int(NO_LIMIT), 2 * run.n_merges, threads=2))
    assert parts[0][1] == run.P.shape[0] and parts[-1][0] == 0 and _cover(parts, run.P.shape[0])


def test_two_threads_each_counting_parts_make_the_same_state(monkeypatch):
    # this thread waits to count its first part until the other has taken the last: each counts
    # parts (from either end until they meet), its positions written after this one's
    import threading

    rng = np.random.default_rng(13)
    words = [bytes(rng.integers(97, 105, size=rng.integers(2, 12)).tolist()) for _ in range(3000)]
    counts = rng.integers(1, 1 << 12, size=len(words))
    counts[::41] = 1 << 34
    run, one, _ = _states(words, counts, Vocab.base(), 400, None)
    monkeypatch.setattr(learn_mod._LoopRun, "SETUP_PARTS", 8)
    other = threading.Event()
    parts, first = [], []
    count_pairs = learn_mod.count_pairs

    def counting(*a):
        parts.append(a[5:7])
        if a[5] == 0:
            assert other.wait(30)
        else:
            other.set()
        first.append(a[5:7])
        return count_pairs(*a)

    count_more = learn_mod.count_more
    monkeypatch.setattr(learn_mod, "count_pairs", counting)
    monkeypatch.setattr(learn_mod, "count_more", lambda *a: parts.append(a[5:7]) or count_more(*a))
    expect = min(learn_mod.expected_pairs(run.n_merges, 4), run.P.shape[0])
    _same(one, run._start(expect, -int(NO_LIMIT), 2 * run.n_merges, threads=2))
    n = run.P.shape[0]
    assert len(first) == 2 and (7 * n // 8, n) in first and _cover(parts, n)
