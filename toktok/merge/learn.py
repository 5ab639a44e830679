"""``learn_merges``: the merge stage's entry point, and what it returns (``MergeResult``).

Segments the words under the starting vocabulary (``segment``), lays their positions out
(``layout``), runs the compiled loop (``loop``) in a thread so that progress and checkpoints
can be reported, and collects the merges, the grown vocabulary and the loop's statistics.
"""
from __future__ import annotations

import math
import os
import platform
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np

from ..vocab import Vocab
from .layout import _fill, _layout, _token_bits, _tokens_per_word
from .loop import NO_LIMIT, _loop, _rounds_beside, _setup, _setup_counted
from .result import MergeResult
from .segment import Segmenter, _segment_ids, runs
from .small import learn_small, small_enough
from .table import SMALL_PAIRS, count_more, count_pairs, make_room, pair_lists, place_pairs, rebuild_table, recount
from .tokens import _flatten, _token_arrays


STATS = ("records", "table_rows", "pool_entries", "heap_rows", "heap_pops", "new_tokens", "list_entries_read",
         "merges_made", "pool_compactions", "pool_growths", "table_rebuilds", "heap_refills", "lists_sorted",
         "min_frequency_stop", "recounts", "tracked_from", "rounds_split")
"""Names of the loop's statistics (``MergeResult.stats``), in the order ``_loop`` counts them
(``min_frequency_stop``: the count of the best pair when ``min_frequency`` ended the loop, else 0;
``recounts``: the pairs counted again, tracking more of them, ``table.recount``; ``tracked_from``:
the smallest count whose pairs were tracked at the start, see ``Tuning.tracked_from``; ``rounds_split``:
the rounds shared with a second thread, ``Tuning.split_from``)."""


@dataclass(frozen=True)
class Tuning:
    """How much room the loop starts with; any values learn the same merges (tests hold it to
    that with no room at all). Example: ``learn_merges(w, c, v, 9, tuning=Tuning(heap_target=2))``.
    """

    pairs_per_merge: int = 4  # the pair table's room for new pairs per merge (see expected_pairs)
    heap_target: int = 1 << 13  # pairs the heap is (re)filled with, at least (see heap._refill)
    pool_spare: int = 6  # free pool entries at the start: this many 16ths of the lists ...
    pool_slack: int = 1 << 16  # ... plus this many
    records: int | None = None  # record rows at the start (None: the merges + 1024; grown when full)
    tracked_from: int | None = None  # the pairs tracked at the start: counted at least this often (None:
    # chosen from the counts, table._initial_pairs; untracked pairs cost no memory and are counted again
    # only if the loop gets down to them)
    descending_lists: bool = False  # start from descending lists of positions (see loop._setup)
    split_from: int = 4096  # rounds of this many positions or more are shared with a second thread, while
    # they come (loop._rounds_beside; 0: none): the first merges' rounds, waiting on memory, on two cores


def learn_merges(
    words,
    counts: np.ndarray,
    vocab: Vocab,
    n_merges: int,
    progress: Callable[[int], None] | None = None,
    checkpoint: Callable[[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray], None] | None = None,
    every: float = 2.0,
    step: int = 1,
    *,
    tuning: Tuning = Tuning(),
    ready: Callable[[], None] | None = None,
    reference: bool = False,
    python: bool | None = None,
    max_token_length: int | None = None,
    min_frequency: int | None = None,
    last: Callable[[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray], None] | None = None,
    segmented: list | None = None,
    learned: Callable[[np.ndarray, np.ndarray, np.ndarray, np.ndarray, bool], None] | None = None,
) -> MergeResult:
    """Learn up to ``n_merges`` new tokens on ``words`` (with 64-bit ``counts``) on top of ``vocab``.

    ``words`` is a list of bytes or an Arrow binary array. Stops early when no adjacent pair is
    left (fewer new tokens than requested). Deterministic: the result depends only on the multiset
    of (word, count) and the vocabulary. ``progress(n)`` is called with the new tokens so far.
    ``checkpoint(left, right, token, count, reused)`` is called from the calling thread with copies
    of the merges recorded since its previous call, at most every ``every`` seconds while the loop
    runs and once at the end with the rest (maybe empty; ``last`` instead, when given): its calls
    concatenate to the result's arrays. With ``every <= 0`` it is called after every ``step`` new tokens (and the merges reused
    on the way), deterministically: the loop then runs in the calling thread. ``tuning``: the
    loop's starting room (``Tuning``). ``ready()`` is called once the words are segmented and laid
    out, before the loop's tables are allocated (the pipeline stores the "counted" checkpoint
    meanwhile: ``Journal.before_loop``).
    ``reference``: a small run's (see ``Segmenter``); a small word table then takes the Python loop
    (:func:`toktok.merge.small.learn_small`, the same result) and loads no kernel; ``python``
    says whether it does, where the caller asked (:func:`toktok.merge.small.python_first`).
    ``max_token_length``: no merge whose token would be longer (bytes; such pairs are passed over
    and the merges come from the others); ``min_frequency``: stop when the best pair's count is
    below it (``stopped_at``). ``segmented``: ``[(ids, offsets)]``, the words' segmentation under
    ``vocab`` made already (the memory budget's cut, :func:`toktok.budget.fit_words`), or
    ``[LaidOut]`` (:func:`lay_out` as they were read, or its ``Future``: used when made for this
    vocabulary and number of merges), taken out of the list so that it is freed once laid out.
    ``learned(left, right, token, reused, last)``: the merges as the loop publishes them. Example: ``learn_merges([b"abab"], np.array([3]), Vocab.base(False), 1).vocab.tokens[256] == b"ab"``.
    """
    if n_merges < 0:
        raise ValueError("n_merges must be >= 0")
    if max_token_length is not None and max_token_length < 1 or min_frequency is not None and min_frequency < 0:
        raise ValueError("max_token_length must be >= 1 and min_frequency >= 0")
    counts = np.asarray(counts, dtype=np.int64)
    vocab.check()
    if reference and (small_enough(words) if python is None else python):  # no kernel to load
        res = learn_small(words, counts, vocab, n_merges, last or checkpoint, max_token_length=max_token_length,
                          min_frequency=min_frequency, progress=progress)
        if res is not None:
            if progress is not None:
                progress(res.new_tokens)
            return res
    t0 = time.perf_counter()

    # 1. segment under the starting vocabulary, lay the positions out, size the token tables
    run = _LoopRun(words, counts, vocab, n_merges, tuning, ready, reference, segmented)
    run.limits = (max_token_length, min_frequency)

    # 2. the loop, in a thread (it releases the GIL) so that progress and checkpoints can be
    #    reported, or in this thread, ``step`` new tokens at a time, with a checkpoint after each
    if checkpoint is not None and every <= 0:
        # deterministic, for tests of what an interrupted run leaves
        def after_step() -> None:
            if progress is not None:
                progress(int(run.stats[5]))
            run.emit(checkpoint)

        run.loop(after_step, max(1, int(step)))
    else:
        _in_thread(run, progress, checkpoint, every, learned)
    if run.err is not None:
        raise run.err

    return _result(run, vocab, n_merges, last or checkpoint, t0)


def _result(run: "_LoopRun", vocab: Vocab, n_merges: int, checkpoint, t0: float) -> MergeResult:
    """Steps 3 and 4 of ``learn_merges``: the finished run's merges (the rest checkpointed), its
    new tokens' bytes and each word's final number of tokens (read from the final positions when
    first asked for: ``MergeResult.word_tokens``)."""
    # 3. the merges, the rest of them checkpointed
    tbytes, n_tokens, n_rec = run.out
    left, right, token, count, reused = (r[:n_rec].copy() for r in run.rec)
    reused = reused.astype(bool)
    if checkpoint is not None:
        last = run.last
        checkpoint(left[last:].copy(), right[last:].copy(), token[last:].copy(), count[last:].copy(),
                   reused[last:].copy())

    # 4. new tokens' bytes and each word's final number of tokens
    # sliced from one bytes copy, with plain ints: indexing numpy per token cost 0.1 s at 131,072
    starts = run.tstart[run.n0:n_tokens]
    ends = starts + run.tlen[run.n0:n_tokens]
    blob = tbytes[: int(ends.max())].tobytes() if len(ends) else b""
    new_tokens = [blob[s:e] for s, e in zip(starts.tolist(), ends.tolist())]
    out = Vocab(list(vocab.tokens) + new_tokens, list(vocab.specials))
    P, lens, tb = run.P, run.lens, run.tb  # (read when asked for: the positions live until then)
    run.times["total"] = time.perf_counter() - t0
    stats = dict(zip(STATS, run.stats.tolist()))
    return MergeResult(out, left, right, token, count, reused, requested=n_merges,
                       tokens_per_word=lambda: _tokens_per_word(P, lens, tb), stats=stats, times=run.times)


#: The cores a run's loop needs before it shares its large rounds with a second thread: on two, the
#: run's own work beside the loop (the insight step, the checkpoints, HF's process) has the second
#: core, and the shared rounds waited for it (word counts at 65,536 on 2 cores: the run 0.03 s
#: slower with them, on the text too). Alone on two cores they gained nothing on the bench
#: corpus's words and 7% of the loop on a table of four times as many.
SHARE_FROM_CORES = 3


def in_a_run() -> Tuning:
    """The loop's tuning in a run (``merge.stage.run``): ``Tuning()``, its rounds shared with a
    second thread only where the machine has ``SHARE_FROM_CORES`` cores or more.
    Example: ``in_a_run().split_from in (0, Tuning().split_from)``."""
    return Tuning() if _cores() >= SHARE_FROM_CORES else Tuning(split_from=0)


#: Seconds between the calls of ``learn_merges``' ``learned`` while the loop runs.
LEARNED_EVERY = 0.01


def _in_thread(run: "_LoopRun", progress, checkpoint, every: float, learned=None) -> None:
    """``run.loop`` in a thread, reporting progress, checkpoints and the merges learned
    (``learned``) from this one meanwhile."""
    th = threading.Thread(target=run.loop, name="toktok-merge", daemon=True)
    th.start()
    t_last = time.monotonic()
    poll = 0.1 if learned is None else LEARNED_EVERY
    while th.is_alive():
        th.join(poll if checkpoint is None else min(poll, every))
        if progress is not None:
            progress(int(run.stats[5]))
        if learned is not None and th.is_alive():
            run.tell(learned)
        if checkpoint is not None and th.is_alive() and time.monotonic() - t_last >= every:
            run.emit(checkpoint)
            t_last = time.monotonic()
    if learned is not None and run.err is None:
        run.tell(learned, last=True)


@dataclass
class LaidOut:
    """Words segmented under a vocabulary and laid out for the loop (:func:`lay_out`): what the
    loop starts from, for ``n_merges`` merges asked on top of the vocabulary's ``tokens``
    (``n_words`` words); ``merges``: those the words allow, at most ``n_merges``; ``times``: the
    seconds segmenting and laying out took."""

    tokens: list[bytes]
    n_merges: int
    n_words: int
    merges: int
    tb: int
    lens: np.ndarray
    P: np.ndarray
    ek: np.ndarray
    ev: np.ndarray
    times: dict

    def fits(self, vocab: Vocab, n_merges: int, n_words: int) -> bool:
        """Whether it was made for these: the same vocabulary, merges asked and number of words."""
        return (self.n_merges, self.n_words) == (n_merges, n_words) and \
            (self.tokens is vocab.tokens or self.tokens == vocab.tokens)


def lay_out(words, counts: np.ndarray, vocab: Vocab, n_merges: int, *, reference: bool = False,
            segmented: list | None = None, threads: int | None = None) -> LaidOut:
    """Step 1 of ``learn_merges``: ``words`` (with their 64-bit ``counts``) segmented under
    ``vocab`` (``segmented``: ``[(ids, offsets)]`` made already, taken out of the list so that
    they are freed once laid out) and laid out for a loop of
    up to ``n_merges`` merges, segmenting in up to ``threads`` threads (None: one per core), the
    position array's rows filled in a thread per core (no memory more: ``_fill_in_threads``).
    Its kernels must be loaded (``Kernels.warm_up``). A word-count table's words are laid out
    as it is read by :class:`Laying` instead (the same arrays, made in parts that two threads share).
    Example: ``lay_out([b"abab"], np.array([3]), Vocab.base(False), 1).merges == 1``."""
    counts = np.asarray(counts, dtype=np.int64)
    t0 = time.perf_counter()
    flat, offsets = segmented.pop() if segmented else _segment_ids(words, vocab, reference=reference,
                                                                   threads=threads)
    lens = np.diff(offsets)
    t_segment = time.perf_counter() - t0
    _check_counts(counts, lens.shape[0])
    # every merge (new token or reused) takes one token out of a word, so a word of k tokens
    # allows at most k - 1: the arrays are sized by what the words allow, not by the request
    # (--merges 1000000000 on a small corpus asked for gigabytes)
    merges = min(n_merges, int(np.maximum(lens - 1, 0).sum()))
    tb = _token_bits(len(vocab.tokens) + merges)
    P, ek, ev = _fill_in_threads(flat, offsets, lens, counts, tb, None)
    del flat, offsets
    return LaidOut(vocab.tokens, n_merges, int(lens.shape[0]), merges, tb, lens, P, ek, ev,
                   {"segment": t_segment, "layout": time.perf_counter() - t0 - t_segment})


def _check_counts(counts: np.ndarray, n_words: int) -> None:
    """ValueError unless ``counts`` (int64) has one count, >= 0, per word of the ``n_words``."""
    if counts.shape[0] != n_words:
        raise ValueError(f"{n_words} words but {counts.shape[0]} counts")
    if counts.shape[0] and counts.min() < 0:
        raise ValueError("counts must be >= 0")


#: Positions that the position array's rows are filled in a thread per core from, each taking a
#: run of words of about equal positions (``_fill``: each word's rows start at a known row).
FILL_POSITIONS = 1 << 20


def _fill_in_threads(flat, offsets, lens, counts, tb: int, threads: int | None):
    """``_layout``'s position array and side table, its rows filled by ``_fill`` in up to
    ``threads`` threads (None: one per core): the same array however many."""
    total = int(offsets[-1])
    parts = max(1, min(threads or _cores(), total // FILL_POSITIONS))
    # (a handful of cuts: sorted in Python, as np.unique would import numpy.ma, ~15 ms holding the
    # GIL on the way to the loop)
    cut = np.zeros(1, np.int64) if parts == 1 else np.array(
        sorted(set(np.searchsorted(offsets, np.linspace(0, total, parts + 1)[:-1]).tolist())), np.int64)
    cut[0] = 0
    P, ek, ev, rows = _layout(lens, counts, tb, cut)
    ends = [*cut[1:].tolist(), lens.shape[0]]
    args = [(int(cut[i]), ends[i], int(rows[i]), int(offsets[cut[i]])) for i in range(cut.shape[0])]
    if len(args) == 1:
        _fill(flat, lens, counts, tb, P, *args[0])
        return P, ek, ev
    with ThreadPoolExecutor(len(args) - 1) as ex:
        futs = [ex.submit(_fill, flat, lens, counts, tb, P, *a) for a in args[1:]]
        _fill(flat, lens, counts, tb, P, *args[0])
        for f in futs:
            f.result()
    return P, ek, ev


#: Bytes of words per part of a layout made in parts (``Laying``): 25 MB of words (1.1 M) in 12.
PART_BYTES = 2 << 20


class Laying:
    """:func:`lay_out` of ``words`` (with their 64-bit ``counts``) under ``vocab`` for a loop of up
    to ``n_merges`` merges as a job in parts that threads share: the thread that made it does it
    (:meth:`run`), and a thread that waits for it (:meth:`result`) takes parts too meanwhile.
    The words are cut into runs of about ``PART_BYTES`` each; each run is segmented to its own
    buffer, then, once every word's number of tokens is known, the position array is sized
    (``_layout``) and each run's rows filled (``_fill``): the same arrays as ``lay_out``'s
    however the parts were shared. The merge stage has it made as a word-count table is read,
    beside the run file's opening (:func:`toktok.merge.stage.laying_out`), and shares what is
    left when the loop waits for it. Its kernels must be loaded (``Kernels.warm_up``).
    Example: ``j = Laying(words, counts, vocab, 9); j.run(); j.result().merges``."""

    def __init__(self, words, counts: np.ndarray, vocab: Vocab, n_merges: int) -> None:
        self.words, self.counts, self.vocab, self.n_merges = words, np.asarray(counts, dtype=np.int64), vocab, n_merges
        self._cv = threading.Condition()
        self._k = 0  # parts: each run of words segmented (0 .. k-1), then its rows filled (k .. 2k-1)
        self._next = 0  # the next part to take
        self._segs = self._fills = 0  # runs not segmented yet, runs whose rows are not filled yet
        self._sized = False  # the position array made (the fills may start)
        self._out: LaidOut | None = None
        self._end = False  # done (``_out``) or failed
        self._started = False
        self._err: BaseException | None = None
        self.shared = 0  # parts the waiting thread did

    def run(self) -> None:
        """The job in this thread, parts shared with a thread that waits for it meanwhile; never
        raises (its :meth:`result` is None then, and the merge stage lays the words out again,
        saying what is wrong)."""
        try:
            self._start()
        except Exception as e:
            self._fail(e)
            return
        self._share(False)

    def result(self) -> LaidOut | None:
        """The words laid out (None: the job failed), parts of what is left taken in this thread
        meanwhile (an interrupt while it takes one is raised, and ends the job)."""
        with self._cv:
            while not self._started and not self._end:
                self._cv.wait()
        self._share(True)
        with self._cv:
            while not self._end:
                self._cv.wait()
            return self._out

    def _start(self) -> None:
        t0 = time.perf_counter()
        vocab, counts = self.vocab, self.counts
        seg = Segmenter(*_token_arrays(vocab, 0))
        n = len(vocab.tokens)
        data, off = _flatten(self.words)
        _check_counts(counts, off.shape[0] - 1)
        if not seg.kernels_segment(n) or counts.shape[0] == 0:  # (nothing to share)
            out = lay_out(self.words, counts, vocab, self.n_merges)
            with self._cv:
                self._out, self._end = out, True
                self._cv.notify_all()
            return
        self._data, self._off, self._args = data, off, seg.kernel_args(n)
        self._cuts = runs(off, max(1, min(64, int(off[-1] - off[0]) // PART_BYTES)))
        k = len(self._cuts) - 1
        self._bufs: list = [None] * k
        self._lens = np.empty(off.shape[0] - 1, np.int64)
        self._t0 = t0
        with self._cv:
            self._k, self._segs, self._fills = k, k, k
            self._started = True
            self._cv.notify_all()

    def _share(self, waiting: bool) -> None:
        """Parts taken one at a time, in order (a run's rows once the array is made), until none
        is left to take."""
        while True:
            with self._cv:
                while True:
                    if self._err is not None or self._next >= 2 * self._k:
                        return
                    i = self._next
                    if i < self._k or self._sized:
                        break
                    self._cv.wait()
                self._next += 1
                self.shared += waiting
            try:
                self._part(i)
            except BaseException as e:
                self._fail(e)
                if not isinstance(e, Exception):  # (an interrupt goes on: the waiting thread's is the run's)
                    raise
                return

    def _part(self, i: int) -> None:
        k, cuts = self._k, self._cuts
        if i < k:  # run i segmented
            a, b = cuts[i], cuts[i + 1]
            buf = np.empty(int(self._off[b] - self._off[a]), np.int32)
            Segmenter.run(self._data, self._off, self._args, a, b, buf, self._lens)
            self._bufs[i] = buf
            with self._cv:
                self._segs -= 1
                last = self._segs == 0
            if last:
                self._size()
            return
        p = i - k  # run p's rows filled
        _fill(self._bufs[p], self._lens, self.counts, self._tb, self._P, cuts[p], cuts[p + 1], int(self._rows[p]), 0)
        self._bufs[p] = None
        with self._cv:
            self._fills -= 1
            if self._fills == 0:
                self._done()

    def _size(self) -> None:
        """The position array made, once every run is segmented (see ``lay_out``)."""
        t1 = time.perf_counter()
        lens = self._lens
        merges = min(self.n_merges, int(np.maximum(lens - 1, 0).sum()))
        tb = _token_bits(len(self.vocab.tokens) + merges)
        P, ek, ev, rows = _layout(lens, self.counts, tb, np.array(self._cuts[:-1], np.int64))
        with self._cv:
            self._merges, self._tb, self._P, self._ek, self._ev, self._rows, self._t1 = merges, tb, P, ek, ev, rows, t1
            self._sized = True
            self._cv.notify_all()

    def _done(self) -> None:
        """(under the lock) The result, once every run's rows are filled."""
        self._out = LaidOut(self.vocab.tokens, self.n_merges, int(self._lens.shape[0]), self._merges, self._tb,
                            self._lens, self._P, self._ek, self._ev,
                            {"segment": self._t1 - self._t0, "layout": time.perf_counter() - self._t1})
        self._data = self._off = self._P = self._ek = self._ev = self.words = None
        self._end = True
        self._cv.notify_all()

    def _fail(self, e: BaseException) -> None:
        with self._cv:
            self._err, self._end, self._out = e, True, None
            self._cv.notify_all()


class _LoopRun:
    """One merge run's inputs laid out for the loop, its record arrays and its results.

    The loop writes the merge records into arrays owned here and publishes their number in
    ``stats[0]`` after each row is written, so that another thread can read them (``emit``)."""

    def __init__(self, words, counts: np.ndarray, vocab: Vocab, n_merges: int, tuning: Tuning,
                 ready: Callable[[], None] | None = None, reference: bool = False, segmented: list | None = None):
        got = segmented.pop() if segmented else None
        if isinstance(got, Future):  # (being laid out as its table was read)
            got = got.result()
        if isinstance(got, Laying):  # (parts of what is left laid out in this thread)
            got = got.result()
        if not isinstance(got, LaidOut) or not got.fits(vocab, n_merges, counts.shape[0]):
            ids = [got] if got is not None and not isinstance(got, LaidOut) else None
            got = None  # (a layout made for other merges goes before this one is made)
            got = lay_out(words, counts, vocab, n_merges, reference=reference, segmented=ids)
        self.times: dict[str, float] = dict(got.times)
        self.lens, self.P, self.ek, self.ev, self.tb = got.lens, got.P, got.ek, got.ev, got.tb
        self.n0, self.n_merges = len(vocab.tokens), got.merges
        del got
        if ready is not None:
            ready()
        # token byte tables sized for the final vocabulary
        self.tdata, self.tstart, self.tlen = _token_arrays(vocab, self.n_merges)
        self.tuning = tuning
        self.stats = np.zeros(len(STATS), np.int64)  # (see STATS)
        # reused merges spend no budget: the arrays are grown (and the loop resumed) if needed
        self.rec = _records(tuning.records if tuning.records is not None else self.n_merges + 1024)
        self.last = 0  # records checkpointed so far
        self.told = 0  # records told to ``learned`` so far (``tell``)
        self.limits: tuple[int | None, int | None] = (None, None)  # max_token_length, min_frequency
        self.out: tuple | None = None
        self.err: BaseException | None = None

    def emit(self, checkpoint) -> None:
        """Checkpoint the records written since the last call (in the calling thread)."""
        k = int(self.stats[0])  # rows below k are written; read k before the arrays
        if k > self.last:
            checkpoint(*(r[self.last : k].copy() for r in self.rec))
            self.last = k

    def tell(self, learned, last: bool = False) -> None:
        """``learned(left, right, token, reused, last)`` with the records written since its last call
        (views, in the calling thread)."""
        k = int(self.stats[0])  # rows below k are written; read k before the arrays
        if k > self.told or last:
            rec = self.rec
            learned(*(r[self.told:k] for r in (rec[0], rec[1], rec[2], rec[4])), last)
            self.told = k

    def loop(self, after_step: Callable[[], None] | None = None, step: int | None = None) -> None:
        """The loop, ``step`` new tokens per call of ``_loop`` (``after_step`` after each); sets
        ``out`` (token bytes, tokens, records) or ``err``."""
        try:
            self._loop(after_step, self.n_merges if step is None else step)
        except BaseException as e:  # pragma: no cover - re-raised by learn_merges
            self.err = e

    #: Positions from which the loop's starting state is made in two threads (where a second core is there),
    #: and the parts they are cut into for counting their pairs (``_start``).
    SPLIT_SETUP = 1 << 20
    SETUP_PARTS = 16

    def _start(self, expect: int, theta: int, want: int, threads: int | None = None) -> tuple:
        """``loop._setup``'s state, made in ``threads`` threads (None: two where the vocabulary is small,
        the positions are ``SPLIT_SETUP`` or more and a second core is there; else one), the state one
        thread makes. For two, the pairs of the positions are counted (``table.count_pairs``, then
        ``count_more``), part after part (``SETUP_PARTS``), by this thread from the first part on and by
        the other from the last part back, until they meet (a second core too busy to start the other
        costs the count no wait); the lists are given their blocks in the pool (``table.pair_lists``),
        then each thread's positions written to them (``table.place_pairs``; the first's first) while
        the table and the heap are made (``loop._setup_counted``), each by the first thread to take it
        (``_shared``: the other's positions wait for it only if it has begun them)."""
        u, P, n0 = self.tuning, self.P, self.n0
        n = P.shape[0]
        if threads is None:
            threads = 2 if n >= self.SPLIT_SETUP and _cores() >= 2 else 1
        if threads < 2 or n0 > SMALL_PAIRS or u.descending_lists or n < 2:
            return _setup(P, self.ek, self.ev, self.tb, self.tdata, self.tstart, self.tlen, n0, expect, u.pool_spare,
                          u.pool_slack, u.heap_target, u.descending_lists, theta, want)
        ek, ev, tb = self.ek, self.ev, self.tb
        k = min(self.SETUP_PARTS, n)
        cuts = [n * i // k for i in range(k + 1)]
        ends = [0, k]  # the parts not taken yet: ends[0] up to ends[1]
        lock = threading.Lock()

        def count(front: bool) -> list | None:
            got = None
            while True:
                with lock:
                    if ends[0] >= ends[1]:
                        return got
                    if front:
                        i = ends[0]
                        ends[0] += 1
                    else:
                        ends[1] -= 1
                        i = ends[1]
                if got is None:
                    got = list(count_pairs(P, ek, ev, tb, n0, cuts[i], cuts[i + 1]))
                else:
                    got[4] = count_more(P, ek, ev, tb, n0, cuts[i], cuts[i + 1], *got[:5])

        first, second = _shared(lambda: count(True), lambda: count(False))
        cut = cuts[ends[0]]
        if first is None or second is None:  # one thread counted them all
            first, second, cut = first or second, None, n
        pid, pc, pl, dl, seen = first
        if second is None:
            none = np.empty(0, np.int64)
            R, pool, end, theta = pair_lists(n0, u.pool_spare, u.pool_slack, theta, want, pid, pc, pl, seen, none, none,
                                             dl, 0)
            bkeys, bids, T, L, H, st = _setup_counted(self.tdata, self.tstart, self.tlen, n0, expect, u.heap_target, R,
                                                      end, theta)
            place_pairs(P, tb, n0, 0, n, pid, pl, pool)
            return bkeys, bids, T, L, pool, H, st
        pid2, pc2, pl2, dl2, seen2 = second
        R, pool, end, theta = pair_lists(n0, u.pool_spare, u.pool_slack, theta, want, pid, pc, pl, seen, pc2, pl2, dl2,
                                         seen2)

        def made() -> tuple:  # the table and the heap, and the first part's positions
            out = _setup_counted(self.tdata, self.tstart, self.tlen, n0, expect, u.heap_target, R, end, theta)
            place_pairs(P, tb, n0, 0, cut, pid, pl, pool)
            return out

        (bkeys, bids, T, L, H, st), _ = _shared(made, lambda: place_pairs(P, tb, n0, cut, n, pid2, pl2, pool))
        return bkeys, bids, T, L, pool, H, st

    def _loop(self, after_step, step: int) -> None:
        u, times, n_merges, tstart, tlen = self.tuning, self.times, self.n_merges, self.tstart, self.tlen
        t1 = time.perf_counter()
        c1 = time.thread_time()
        expect = min(expected_pairs(n_merges, u.pairs_per_merge), self.P.shape[0])
        theta = -int(NO_LIMIT) if u.tracked_from is None else u.tracked_from
        bkeys, bids, T, L, pool, H, st = self._start(expect, theta, 2 * n_merges)
        self.stats[15] = st[22]
        maxlen, min_count = self.limits
        st[24] = n_merges
        st[25] = u.tracked_from is not None  # (a forced floor is not raised)
        st[20] = NO_LIMIT if maxlen is None else maxlen
        st[21] = min_count or 0
        times["setup"] = time.perf_counter() - t1
        c2 = time.thread_time()
        scratch = np.zeros((tstart.shape[0], 8), np.int64)  # (see loop._LSTAMP)
        scratch[:, :2] = -1
        work = _work_arrays()
        beside = _Beside(u.split_from, self.P.shape[0], tstart.shape[0])
        td = self.tdata
        while True:
            rec = self.rec
            target = min(n_merges, int(st[6]) + step)
            with beside.running(self.P, self.ek, self.ev, self.tb, pool):
                td, T, L, pool, H, *work = _loop(self.P, self.ek, self.ev, self.tb, td, tstart, tlen, bkeys, bids, T,
                                                 L, pool, H, st, scratch, *work, target, u.heap_target, *rec,
                                                 self.stats, *beside.arrays)
            self.stats[16] = beside.job[15]
            if st[23]:  # no tracked pair left to merge, or a merge reuses a token: every pair counted again
                left = n_merges - int(st[6])
                # tracking more pairs (chosen again for the merges left, fewer counts than before), or all
                theta = 0 if st[23] == 2 else -(int(st[22]) // 2)
                T, L, st[0], pool, st[1], st[22] = recount(self.P, self.ek, self.ev, self.tb, int(st[5]),
                                                           expected_pairs(left, u.pairs_per_merge), u.pool_spare,
                                                           u.pool_slack, theta, 2 * left)
                st[2] = st[1]
                st[3] = 0  # the heap refilled from the new table
                st[8] = NO_LIMIT
                st[25] = 1  # not raised again: a floor too high could be recounted at every doubling
                st[23] = 0
                self.stats[14] += 1
                continue
            if st[9]:  # the pair table is full: rebuilt to at most half full, then the loop goes on
                T, L, st[0], dropped = rebuild_table(T, L, st[9])
                st[2] -= dropped
                st[9] = 0
                self.stats[10] += 1
                continue
            if st[10]:  # a round's new lists need room in the pool: compacted or grown, the round goes on
                pool, st[1], st[2], how = make_room(T, L, pool, st[1], st[2], st[11])
                self.stats[7 + how] += 1
                continue
            if st[7] >= rec[0].shape[0]:
                more = _records(2 * rec[0].shape[0])
                for old, new in zip(rec, more):
                    new[: old.shape[0]] = old
                self.rec = more  # before the loop publishes any row beyond the old arrays
                continue
            if after_step is not None:
                after_step()
            if st[6] < target or st[6] >= n_merges:  # no pair left, or done
                break
        self.out = (td, int(st[5]), int(st[7]))
        times["loop"] = time.perf_counter() - t1 - times["setup"]
        times["setup_cpu"] = c2 - c1
        times["loop_cpu"] = time.thread_time() - c2


#: Merges up to which the pair table has room for ``Tuning.pairs_per_merge`` new pairs each.
KNEE = 1 << 15


def expected_pairs(n_merges: int, per_merge: int = 16) -> int:
    """New pairs the pair table makes room for: ``per_merge`` per merge up to ``KNEE`` merges, then
    ``per_merge * KNEE`` more per doubling of the merges. On natural text each doubling adds about
    as many pairs as the one before (100 MB of the bench corpus: ~225,000 per doubling from 8,192 to
    200,000 merges; code alone ~40,000), so a table sized linearly was 84% empty at 131,072 merges
    (8.4 M rows, 192 MB, for 1.34 M pairs); since only the pairs that may still be merged are
    tracked, 65,536 merges on the bench corpus's words made 3.8 a merge (``Tuning`` gives 4). A
    table that fills anyway is rebuilt larger. The memory budget still plans 16 per merge
    (:func:`toktok.budget.merge_bytes`).
    Example: ``expected_pairs(4 * KNEE, 16) == 3 * 16 * KNEE``."""
    if n_merges <= KNEE:
        return per_merge * n_merges
    return int(per_merge * KNEE * (1 + math.log2(n_merges / KNEE)))


class _Beside:
    """The merge loop's second thread (``loop._rounds_beside``) and what it shares with ``_loop``:
    used where rounds of ``split_from`` positions or more can come and a second core is there."""

    #: Most positions of a round the second thread takes (its work rows: 5 MiB).
    MOST = 1 << 16
    #: Whether the thread is started (tests: not, so that the loop takes every part back itself), and
    #: whether the loop waits for it to take each part (tests: never takes one back).
    thread = True
    wait = False

    def __init__(self, split_from: int, n_rows: int, n_tokens: int):
        nr = _FUTEX.get(platform.machine()) if sys.platform == "linux" else None
        on = split_from > 0 and n_rows >= 2 * split_from and nr is not None and _cores() >= 2
        self.job = np.zeros(21, np.int64)  # (see loop._rounds_beside)
        self.job[20] = self.wait and self.thread
        self.job[13] = max(split_from, 2) if on else 0
        self.job[16] = nr or 0
        self.job[17] = 2_000_000  # ns: the second thread sleeps at most this long at a time, and
        self.job[18:20] = (0, 2_000_000)  # the loop, waiting for it (s, ns)
        cap = 2 * self.MOST if on else 2
        S2 = np.zeros((n_tokens if on else 1, 8), np.int64)
        S2[:, :2] = -1
        self.arrays = (self.job, S2, np.empty((4, cap), np.int64), np.empty((2, cap), np.int32))

    @contextmanager
    def running(self, P, ek, ev, tb, pool):
        """The second thread, over ``pool``, while ``_loop`` runs (while it may share rounds)."""
        if self.job[13] <= 0:
            yield
            return
        self.job[0] = 0
        if not self.thread:
            yield
            return
        th = threading.Thread(target=_rounds_beside, args=(self.job, P, ek, ev, tb, pool, *self.arrays[1:]),
                              name="toktok-merge-2", daemon=True)
        th.start()
        try:
            yield
        finally:
            self.job[0] = 3  # (``_loop`` has set it already, unless it failed)
            th.join()


#: The futex system call's number (Linux) by machine: the second thread sleeps on it.
_FUTEX = {"x86_64": 202, "AMD64": 202, "aarch64": 98, "arm64": 98}


def _cores() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def _shared(*tasks: Callable) -> list:
    """The results of ``tasks``, run by this thread and one more, each task by the first to take it,
    in their order (kernels that release the GIL): the second thread takes only what this one has
    not begun, so that a second core too busy to start it soon costs no wait."""
    got: list = [None] * len(tasks)
    failed: list = []
    taken = [0]
    lock = threading.Lock()

    def work() -> None:
        while not failed:
            with lock:
                i = taken[0]
                taken[0] = i + 1
            if i >= len(tasks):
                return
            try:
                got[i] = tasks[i]()
            except BaseException as e:  # pragma: no cover - a kernel's failure, raised below
                failed.append(e)

    th = threading.Thread(target=work, name="toktok-setup", daemon=True)
    th.start()
    work()
    th.join()
    if failed:  # pragma: no cover - a kernel's failure
        raise failed[0]
    return got


def _work_arrays() -> list[np.ndarray]:
    """A merge round's work arrays for ``_loop`` (touched rows: row, count, key, increment; new
    entries: position, touched index), grown by the loop as rounds need."""
    return [np.empty(1024, np.int64) for _ in range(4)] + [np.empty(1024, np.int32) for _ in range(2)]


def _records(cap: int) -> tuple[np.ndarray, ...]:
    """Record arrays for ``cap`` merges: left, right, token, count, reused."""
    return (np.empty(cap, np.int32), np.empty(cap, np.int32), np.empty(cap, np.int32),
            np.empty(cap, np.int64), np.empty(cap, np.bool_))
