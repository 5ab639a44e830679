"""The merge stage's entry (``run``): a phase's counted words in, its merges on top of the vocabulary out.

Per phase ``run`` learns the phase's new tokens (:func:`budget` of them) with
:func:`.learn.learn_merges`, stores them through the run's journal as they come and logs them as
toktoktok does, then makes the phase's summary and its "merged" checkpoint, and returns them
(:class:`Merged`). ``Kernels`` is the service that has the kernels built ahead on the first run
after an install (:mod:`toktok.ahead`), once per run, before the run counts or when a small run
needs them after all.
Example: ``merge.run(phase, counted, vocab, cfg=spec, fp=fp, journal=j)`` (the pipeline's step 4).
"""
from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from .. import ahead, later, resume
from .._kernels import release_llvm_pages
from ..options import at
from ..store import merges_table
from ..summary import PhaseSummary
from ..vocab import Vocab
from .learn import Laying, in_a_run, learn_merges
from .segment import REFERENCE_WORDS, Segmenter
from .small import python_first
from .tokens import _token_arrays

if TYPE_CHECKING:
    import pyarrow as pa

    from ..count.common import Counted, Progress
    from ..patterns import Pattern
    from ..resume import Journal
    from ..spec import PhaseConfig, RunSpec

__all__ = ["Kernels", "Merged", "budget", "laying_out", "most_merges", "run", "segmenter", "warm_up"]


def budget(phase: PhaseConfig, vocab: Vocab) -> int:
    """The new tokens ``phase`` learns on top of ``vocab`` (the vocabulary so far): its
    ``merges``, or what takes the vocabulary (every special token of the run included) to its
    ``vocab_size``; an earlier phase's shortfall is made up here.
    Example: vocab_size 2048, 1,417 tokens and 2 specials: 629."""
    if phase.vocab_size is None:
        return phase.merges
    return max(0, phase.vocab_size - len(vocab.tokens) - len(vocab.specials))


def most_merges(words) -> int:
    """At least as many merges as ``words`` (a list of bytes or an Arrow binary array) can ever
    allow: each merge joins two symbols of a word into one, so there are no more than their bytes
    less one per word (an array's buffers hold every byte of every word, and more).
    Example: ``most_merges([b"abc", b"d"]) == 2``."""
    held = sum(map(len, words)) if isinstance(words, list) else words.nbytes
    return max(0, held - len(words))


def segmenter(vocab: Vocab, *, reference: bool = False,
              kernels: Kernels | None = None) -> Callable | None:
    """How the merge loop segments a phase's words on top of ``vocab`` (the vocabulary so far),
    as one function ``words -> (ids, offsets)`` (an Arrow binary array in, int32 ids and int64
    offsets out, as :func:`toktok.merge.learn.learn_merges` lays them out): what the memory
    budget's cut counts a word's positions with (:func:`toktok.budget.fit_words`). None when
    ``vocab`` is the 256 bytes in byte order (a word's tokens are its bytes). ``reference``: a
    small run's (:class:`.segment.Segmenter`); ``kernels``: a tiny run's, built before it
    segments more words than tiktoken does for it.
    Example: ``segmenter(Vocab.base())(pa.array([b"00a"]))[0].tolist() == [256, 97]``."""
    n = len(vocab.tokens)
    if vocab.tokens == [bytes([b]) for b in range(256)]:
        return None
    made: list[Segmenter] = []  # (its tables built on the first call: most phases fit by their bytes)

    def segment(words):
        if kernels is not None and len(words) > REFERENCE_WORDS:
            kernels.warm_up()
        if not made:
            made.append(Segmenter(*_token_arrays(Vocab(vocab.tokens, [], vocab.pinned), 0), reference=reference))
        return made[0](words, n)

    return segment


def laying_out(phase: PhaseConfig, vocab: Vocab, kernels: Kernels) -> Callable:
    """What the merge loop makes of ``phase``'s words before it starts, as one function
    ``(words, counts) -> job`` (an Arrow binary array and int64 counts in): a
    :class:`toktok.merge.learn.Laying` that segments them on top of ``vocab`` (the vocabulary so
    far) and lays them out for :func:`budget` merges when run, once the run has its ``kernels``
    (``Kernels.warm_up``, in the run's thread: None when they could not be had). The count stage
    has it made as it reads a word-count table (``count.start``) and runs it in its reading
    thread, beside the run file's opening; :func:`run` starts from it (``Counted.segmented``)
    when it is for the words it merges, and takes part in what is left of it once it waits.
    Example: ``laying_out(phase, Vocab.base(), Kernels(DEFAULT))(words, counts).run()``."""
    n, start = budget(phase, vocab), Vocab(vocab.tokens, [], vocab.pinned)

    def lay(words, counts):
        if not kernels.ready():
            return None
        # (run in the reading thread, while the run's own opens the run file and makes the parity
        # sample; shared with the run's once it waits for it, in _LoopRun)
        return Laying(words, counts, start, n)

    return lay


def warm_up(pattern: Pattern, log: Callable[[str], None] | None = None, budgeted: bool = False) -> bool:
    """On the first run after an install, every kernel a run with ``pattern`` calls built ahead in
    second processes, one after the other, before the run goes on
    (:func:`toktok.ahead.compile_first`; under a memory budget, ``budgeted``, the pipeline has
    this done before it opens the run file), said to ``log`` (None: not said). False when they
    are built (or in Numba's cache) and nothing was done. Example: ``warm_up(DEFAULT)``."""
    if ahead.cached(pattern):
        return False
    # the budget's plan counts one process: a second one compiling beside the run held 150-300 MB
    # more, and compiling in the run's own process kept ~90 MiB to its end (a peak of 1.10x the
    # budget); ahead, each unit's process holds what it compiles beside a run holding its libraries
    if log is not None:
        said = ": inside the memory budget" if budgeted else ""
        log(f"toktok: compiling the kernels, once after an install (about 40 s more, before the run "
            f"starts{said}); later runs load them without compiling")
    ahead.compile_first(pattern)
    return True


class Kernels:
    """The run's compiled kernels as a service: :meth:`warm_up` builds them ahead
    (:func:`warm_up`) the first time it is called and is nothing after that: for ``pattern``, or
    for each of the patterns its phases count with (a list: SuperBPE's second phase has its own
    scanner, which otherwise ran through Numba on every run).
    Example: ``Kernels(DEFAULT).warm_up()``."""

    def __init__(self, pattern: Pattern | list[Pattern], log: Callable[[str], None] | None = None,
                 budgeted: bool = False) -> None:
        self.patterns = [p for i, p in enumerate(pattern) if p not in pattern[:i]] \
            if isinstance(pattern, list) else [pattern]
        self.log, self.budgeted = log, budgeted
        self.built = False  # built ahead for this run (said once)
        self._done = False
        self._tried = threading.Event()  # (set once warm_up ended, done or failed: ready)

    def warm_up(self) -> None:
        """The kernels built ahead, once per run (:func:`warm_up`), said once."""
        if self._done:
            return
        try:
            for p in self.patterns:
                self.built = warm_up(p, None if self.built else self.log, self.budgeted) or self.built
            self._done = True
        finally:
            self._tried.set()

    def ready(self) -> bool:
        """Whether the kernels are there, once :meth:`warm_up` (which the run calls in its own
        thread) has ended: for another thread that calls them (``laying_out``)."""
        self._tried.wait()
        return self._done


def _literal(token: bytes) -> str:
    """A token for a log line: its text, with control characters (escape sequences too) and bytes
    that are not UTF-8 written as Python escapes."""
    text = token.decode("utf-8", "backslashreplace")
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


class _MergeLog:
    """The merge loop's checkpoint (``learn_merges(checkpoint=...)``): appends each batch of merges
    to the run file (``journal``) and logs the phase's new tokens as toktoktok does (the first 10
    and every 100th: the pair, the new token, its id and count) to ``say``, the verbose log.
    ``tokens``: the vocabulary so far; ``at``: the number of the phase's first merge."""

    def __init__(self, journal: Journal, phase: str, tokens: list[bytes], at: int, prefix: str,
                 say: Callable[[str], None] | None) -> None:
        self.journal, self.phase, self.say = journal, phase, say
        self.toks = list(tokens)
        self.at = at  # the number of the next merge
        self.learned = 0  # new tokens of this phase so far
        self.prefix = prefix
        self.held: pa.Table | None = None  # the last merges, for the "merged" checkpoint (``last``)

    def __call__(self, left, right, token, count, reused) -> None:
        self.journal.store_due()  # the "counted" checkpoint comes first
        self.journal.store.add_merges(self.phase, self._table(left, right, token, count, reused))
        self.journal.marks.done()

    def last(self, left, right, token, count, reused) -> None:
        """The loop's last merges: stored as a checkpoint of the loop's, or, while the phase's
        "counted" checkpoint is due (``Journal.counted``), kept (``held``) for the "merged" one,
        which stores both."""
        if self.journal.due is None:
            self(left, right, token, count, reused)
        else:
            self.held = self._table(left, right, token, count, reused)

    def _table(self, left, right, token, count, reused) -> pa.Table:
        """The merges as rows of the run file (``merges_table``), logged as they come."""
        toks, say, rows, k = self.toks, self.say, [], self.learned
        if say is None and (not len(token) or int(token.max()) < len(toks)):  # each token made already
            self.learned = k + len(reused) - int(np.count_nonzero(np.asarray(reused)))
            table = merges_table(self.at, left, right, token, list(map(toks.__getitem__, token.tolist())), count, reused)
            self.at += len(left)
            return table
        new, row = toks.append, rows.append  # (locals: the last call takes every merge of a short run)
        for lt, rt, t, c, r in zip(left.tolist(), right.tolist(), token.tolist(), count.tolist(), reused.tolist()):
            if not r:
                if t == len(toks):  # (else made already: ``_Learned`` shares ``toks``)
                    new(toks[lt] + toks[rt])
                k += 1
                if say is not None and (k <= 10 or k % 100 == 0):
                    say(f"{self.prefix}Merge {k}: \"{_literal(toks[lt])}\" + \"{_literal(toks[rt])}\" -> "
                        f"\"{_literal(toks[t])}\" (id {lt} + {rt} -> {t}, count: {c})")
            row(toks[t])
        self.learned = k
        table = merges_table(self.at, left, right, token, rows, count, reused)
        self.at += len(left)
        return table


class _Learned:
    """``learn_merges``' ``learned``: the loop's records as new tokens' bytes, to ``tell``; the
    tokens list (``toks``) is the merge log's (``_MergeLog.toks``): a token is made once, by
    whichever reads its record first (here, beside the loop, mostly)."""

    def __init__(self, toks: list[bytes], tell: Callable[[list[bytes], bool], None]) -> None:
        self.toks, self.tell = toks, tell
        self.told = len(toks)  # the tokens told so far
        self.ended = False  # the loop said its last merges (``run`` says they were the last)

    def __call__(self, left, right, token, reused, last: bool) -> None:
        toks = self.toks
        new = toks.append
        for lt, rt, t, r in zip(left.tolist(), right.tolist(), token.tolist(), reused.tolist()):
            if not r and t == len(toks):
                new(toks[lt] + toks[rt])
        n, self.told = self.told, len(toks)
        self.ended = last
        self.tell(toks[n:], False)


class Merged(NamedTuple):
    """What the merge stage learned of a phase: its new tokens (ids in order after the vocabulary
    it started from), the merges that learned them (``merges``, those that reused a token
    included), its summary and the warnings it adds (the phase's, from counting, come first in
    ``summary``'s checkpoint; these are the merge stage's own: fewer merges than asked)."""

    new_tokens: list[bytes]
    merges: int
    summary: PhaseSummary
    warnings: list[str]


def run(phase: PhaseConfig, counted: Counted, vocab: Vocab, *, cfg: RunSpec, fp: list, journal: Journal,
        first_merge: int = 0, replay: bool = False, small: bool = False, tiny: bool = False,
        kernels: Kernels | None = None, report: Progress | None = None,
        say: Callable[[str], None] | None = None,
        learned: Callable[[list[bytes], bool], None] | None = None) -> Merged:
    """The merge stage's entry (the pipeline's step 4): ``phase``'s merges on top of ``vocab``, the
    vocabulary so far (its specials are not merged; ``first_merge``: the number its first merge
    gets, the merges of the phases before it), with ``cfg``'s ``max_token_length`` and
    ``min_frequency``. Reads the ``counted`` word table (and takes it: one copy of it during the
    merges, the run's peak of memory; the "counted" checkpoint, stored beside the segmentation
    and layout, is waited for before the loop's tables are allocated); writes through ``journal``
    the merges as they come (checkpoints every few seconds, :class:`_MergeLog`), then each word's
    tokens and the phase's summary: the "merged" checkpoint (``fp``: the phase's fingerprint),
    stored while the tokenizer is exported and verified when the run has no budget
    (:meth:`~toktok.resume.Journal.checkpoint`), with the "counted" one when that is still due.
    With ``replay`` (``--resume`` from the phase's "counted" checkpoint) the loop runs again from
    the word table and must agree with the merges the interrupted run stored. ``small``/``tiny``:
    the run counts and segments with the references / merges without a compiled kernel when it
    can (``kernels`` builds them when it cannot). ``learned(tokens, last)``: the new tokens' bytes
    as the loop learns them (ids in order after ``vocab``'s), for the export built ahead
    (:class:`toktok.formats.ahead.Ahead`), then ``([], True)`` once the "merged" checkpoint is
    being stored (the run's longest path goes on from there first); a loop that does not say
    them as it goes (a small run's) says none. Returns what it learned (:class:`Merged`).
    Example: ``merged = run(phase, counted, vocab, cfg=spec, fp=fp, journal=j, tiny=True)``."""
    store, where, tag = journal.store, cfg.where(phase), cfg.tag(phase)
    report = report or (lambda stage, done, total: None)
    words, counts = counted.words, counted.counts
    counted.words = counted.counts = None
    if not journal.busy:  # else once the "counted" checkpoint is stored (Journal.settle)
        store.release_memory()
    release_llvm_pages()
    t0 = time.perf_counter()
    n = budget(phase, vocab)
    shown = min(n, most_merges(words))  # the progress total (10^20 merges asked showed centuries left)
    report("merge" + tag, 0, shown)
    first_id = len(vocab.tokens)
    prior = store.merges_of(phase.name) if replay else None
    store.drop_merges(phase.name)
    start = Vocab(vocab.tokens, [], vocab.pinned)
    python = python_first(words) if tiny else None  # (else: learn_merges asks small_enough)
    if tiny and not python and kernels is not None:  # the loop's kernels after all
        kernels.warm_up()
    log = _MergeLog(journal, phase.name, vocab.tokens, first_merge, f"[{phase.name}] " if tag else "", say)
    marks = journal.marks
    # the words' ids when the budget's cut segmented them (taken by the loop: freed once laid out)
    segmented = [counted.segmented] if counted.segmented is not None else None
    counted.segmented = None
    learner = None if learned is None else _Learned(log.toks, learned)
    res = learn_merges(words, counts, start, n, progress=_progress(report, "merge" + tag, shown),
                       checkpoint=log, last=log.last, every=marks.every, step=marks.step,
                       reference=small, ready=journal.before_loop, segmented=segmented,
                       python=python, max_token_length=cfg.max_token_length, min_frequency=cfg.min_frequency,
                       learned=learner, tuning=in_a_run())
    # a corpus that allows fewer merges than asked ends the stage here (else its line waited for
    # the run's end, its time counting the stages after it)
    report("merge" + tag, res.new_tokens, res.new_tokens)
    if prior is not None and prior.num_rows:
        resume.check_replay(prior, res, where)
    t_merge = time.perf_counter() - t0
    short = _short_warning(cfg, phase, res, n)
    counted.warnings += short
    summary = PhaseSummary(merges_requested=n, merges_learned=res.new_tokens, reused_merges=int(res.reused.sum()),
                           words=len(words), docs=counted.docs, text_bytes=counted.text_bytes, name=phase.name,
                           first_id=first_id, seconds={"count": counted.seconds, "merge": t_merge},
                           stopped_at=res.stopped_at)
    state = {"fingerprint": fp, "warnings": counted.warnings, "summary": dataclasses.asdict(summary)}
    due = journal.take_due()  # stored with it, or by the run if storing it fails
    if journal.inline:  # (under a budget the loop's positions go now: read from them here)
        res.read_tokens()
    # beside what follows under a budget too: the loop's arrays are gone, and the next phase
    # waits for it before it counts (only the export and the check run beside the last one's);
    # without one, each word's tokens are read from the loop's positions in its thread
    journal.checkpoint(lambda st: resume.save_merged(st, phase.name, words, counts, res.word_tokens, state,
                                                     due=due, merges=log.held), due, beside=True)
    if learner is not None and learner.ended:  # (after the checkpoint's start: it is on the run's longest path)
        learned([], True)
    return Merged(res.vocab.tokens[first_id:], len(res.left), summary, short)


def _progress(report: Progress, stage: str, shown: int) -> Callable[[int], None]:
    """The loop's progress (merges so far) to ``report`` as ``stage``'s, of ``shown``; once it has
    learned half of them, what the run imports after it is imported beside it
    (:func:`toktok.later.load`): its first rounds, the largest, share both cores. NumPy's masked
    arrays among them: pyarrow imports them at its first ``pa.array`` of a NumPy array, the
    merges' table after the loop (~15 ms on the run's longest path)."""
    later.soon("numpy.ma")

    def progress(k: int) -> None:
        report(stage, k, shown)
        if k and 2 * k >= shown:
            later.load()
    return progress


def _short_warning(cfg: RunSpec, phase: PhaseConfig, res, n: int) -> list[str]:
    """A warning when the loop learned fewer than the ``n`` merges asked for: ``--min-frequency``
    stopped it, or the corpus has no pair left (none when it learned them all)."""
    where = cfg.where(phase)
    if res.new_tokens < n and res.stopped_at:
        return [f"{where}{at(cfg.name_of('min_frequency'), str(cfg.min_frequency))} stopped the "
                f"merges at {res.new_tokens:,} of {n:,}: the best pair left occurs {res.stopped_at:,} times"]
    if res.new_tokens < n:
        left = "no adjacent pair left" if not cfg.max_token_length else \
            f"no adjacent pair left of at most {cfg.max_token_length} bytes"
        return [f"{where}the corpus allows only {res.new_tokens} merges of the {n} asked for "
                f"({left}); the vocabulary is smaller"]
    return []
