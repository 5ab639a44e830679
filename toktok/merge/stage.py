"""The merge stage's entry (``run``): a phase's counted words in, its merges on top of the vocabulary out.

Per phase ``run`` learns the phase's new tokens (:func:`budget` of them) with
:func:`.learn.learn_merges`, stores them as they come and logs them as toktoktok does, then makes
the phase's summary and its "merged" checkpoint. Before the run counts, ``warm_up`` has the
kernels built ahead on the first run after an install (:mod:`toktok.ahead`).
Example: ``merge.run(run, phase, counted, fp, replay=False)`` (the pipeline's step 4).
"""
from __future__ import annotations

import dataclasses
import time
from typing import TYPE_CHECKING

from .. import ahead, resume
from .._kernels import release_llvm_pages
from ..options import at
from ..store import merges_table
from ..summary import PhaseSummary
from ..vocab import Vocab
from .learn import learn_merges
from .small import python_first

if TYPE_CHECKING:
    from ..count.common import Counted
    from ..spec import PhaseConfig

__all__ = ["budget", "most_merges", "run", "warm_up"]


def budget(run, phase: PhaseConfig) -> int:
    """The new tokens ``phase`` learns: its ``merges``, or what takes the vocabulary so far (every
    special token of the run included) to its ``vocab_size``; an earlier phase's shortfall is
    made up here. Example: vocab_size 2048, 1,417 tokens and 2 specials: 629."""
    if phase.vocab_size is None:
        return phase.merges
    return max(0, phase.vocab_size - len(run.vocab.tokens) - len(run.vocab.specials))


def most_merges(words) -> int:
    """At least as many merges as ``words`` (a list of bytes or an Arrow binary array) can ever
    allow: each merge joins two symbols of a word into one, so there are no more than their bytes
    less one per word (an array's buffers hold every byte of every word, and more).
    Example: ``most_merges([b"abc", b"d"]) == 2``."""
    held = sum(map(len, words)) if isinstance(words, list) else words.nbytes
    return max(0, held - len(words))


def warm_up(run) -> None:
    """On the first run after an install, every kernel the run calls built ahead in second
    processes, one after the other, before the run goes on (:func:`toktok.ahead.compile_first`;
    under a memory budget the pipeline calls this before it opens the run file), said once.
    Nothing when they are built (or in Numba's cache). Example: ``warm_up(run)``."""
    if run.compiled_first or ahead.cached(run.pattern):
        return
    # the budget's plan counts one process: a second one compiling beside the run held 150-300 MB
    # more, and compiling in the run's own process kept ~90 MiB to its end (a peak of 1.10x the
    # budget); ahead, each unit's process holds what it compiles beside a run holding its libraries
    run.compiled_first = True
    if run.cfg.verbose is not False:
        budget = ": inside the memory budget" if run.plan is not None else ""
        run.log(f"toktok: compiling the kernels, once after an install (about 40 s more, before the run "
                f"starts{budget}); later runs load them without compiling")
    ahead.compile_first(run.pattern)


def _literal(token: bytes) -> str:
    """A token for a log line: its text, with control characters (escape sequences too) and bytes
    that are not UTF-8 written as Python escapes."""
    text = token.decode("utf-8", "backslashreplace")
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


class _MergeLog:
    """The merge loop's checkpoint (``learn_merges(checkpoint=...)``): appends each batch of merges
    to the run file and logs the phase's new tokens as toktoktok does (the first 10 and every
    100th: the pair, the new token, its id and count) to the run's verbose log."""

    def __init__(self, run, phase: PhaseConfig) -> None:
        self.run, self.phase = run, phase.name
        self.toks = list(run.vocab.tokens)
        self.at = run.merge_index  # the number of the next merge
        self.learned = 0  # new tokens of this phase so far
        self.prefix = f"[{phase.name}] " if run.tag(phase) else ""
        self.held: pa.Table | None = None  # the last merges, for the "merged" checkpoint (``last``)

    def __call__(self, left, right, token, count, reused) -> None:
        resume.store_due(self.run)  # the "counted" checkpoint comes first
        self.run.store.add_merges(self.phase, self._table(left, right, token, count, reused))
        self.run.marks.done()

    def last(self, left, right, token, count, reused) -> None:
        """The loop's last merges: stored as a checkpoint of the loop's, or, while the phase's
        "counted" checkpoint is due (``resume.counted``), kept (``held``) for the "merged" one,
        which stores both."""
        if self.run.due is None:
            self(left, right, token, count, reused)
        else:
            self.held = self._table(left, right, token, count, reused)

    def _table(self, left, right, token, count, reused) -> pa.Table:
        """The merges as rows of the run file (``merges_table``), logged as they come."""
        toks, say, rows, k = self.toks, self.run.say, [], self.learned
        new, row = toks.append, rows.append  # (locals: the last call takes every merge of a short run)
        for lt, rt, t, c, r in zip(left.tolist(), right.tolist(), token.tolist(), count.tolist(), reused.tolist()):
            if not r:
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


def run(run, phase: PhaseConfig, counted: Counted, fp: list, replay: bool) -> None:
    """The merge stage's entry (the pipeline's step 4, ``run`` its ``_Run``): the phase's merges on
    top of the vocabulary so far. Reads the counted word table (one copy of it during the merges,
    the run's peak of memory; the "counted" checkpoint, stored beside the segmentation and layout,
    is waited for before the loop's tables are allocated); writes the merges as they come
    (checkpoints every few seconds, :class:`_MergeLog`), then each word's tokens and the phase's
    summary: the "merged" checkpoint, stored while the tokenizer is exported and verified when the
    run has no budget (``resume.checkpoint``), with the "counted" one when that is still due
    (``resume.counted``). With ``replay`` (``--resume`` from the phase's "counted" checkpoint) the
    loop runs again from the word table and must agree with the merges the interrupted run stored.
    Example: ``run(run_state, phase, counted, fingerprint, replay=False)``."""
    store, where, tag = run.store, run.where(phase), run.tag(phase)
    words, counts = counted.words, counted.counts
    counted.words = counted.counts = None
    if run.pending is None:  # else once the "counted" checkpoint is stored (_Run.settle)
        store.release_memory()
    release_llvm_pages()
    t0 = time.perf_counter()
    n = budget(run, phase)
    shown = min(n, most_merges(words))  # the progress total (10^20 merges asked showed centuries left)
    run.report("merge" + tag, 0, shown)
    first_id = len(run.vocab.tokens)
    prior = store.merges_of(phase.name) if replay else None
    store.drop_merges(phase.name)
    start = Vocab(run.vocab.tokens, [], run.vocab.pinned)
    python = python_first(words) if run.tiny else None  # (else: learn_merges asks small_enough)
    if run.tiny and not python:  # the loop's kernels after all
        run.warm_up()
    log = _MergeLog(run, phase)
    res = learn_merges(words, counts, start, n, progress=lambda k: run.report("merge" + tag, k, shown),
                       checkpoint=log, last=log.last, every=run.marks.every, step=run.marks.step,
                       reference=run.small, ready=run.settle,
                       python=python, max_token_length=run.cfg.max_token_length, min_frequency=run.cfg.min_frequency)
    # a corpus that allows fewer merges than asked ends the stage here (else its line waited for
    # the run's end, its time counting the stages after it)
    run.report("merge" + tag, res.new_tokens, res.new_tokens)
    if prior is not None and prior.num_rows:
        resume.check_replay(prior, res, where)
    t_merge = time.perf_counter() - t0
    _short_warning(run, phase, counted, res, n)
    summary = PhaseSummary(merges_requested=n, merges_learned=res.new_tokens, reused_merges=int(res.reused.sum()),
                           words=len(words), docs=counted.docs, text_bytes=counted.text_bytes, name=phase.name,
                           first_id=first_id, seconds={"count": counted.seconds, "merge": t_merge},
                           stopped_at=res.stopped_at)
    state = {"fingerprint": fp, "warnings": counted.warnings, "summary": dataclasses.asdict(summary)}
    due = run.due  # stored with it, or by the run if storing it fails
    resume.checkpoint(run, lambda st: resume.save_merged(st, phase.name, words, counts, res.word_tokens, state,
                                                         due=due, merges=log.held), due)
    run.add_merged(phase.name, res.vocab.tokens[first_id:], len(res.left))
    run.times["count"] += counted.seconds
    run.times["merge"] += t_merge
    run.summaries.append(summary)


def _short_warning(run, phase: PhaseConfig, counted: Counted, res, n: int) -> None:
    """A warning (the phase's and the run's) when the loop learned fewer than the ``n`` merges
    asked for: ``--min-frequency`` stopped it, or the corpus has no pair left."""
    where = run.where(phase)
    if res.new_tokens < n and res.stopped_at:
        counted.warnings.append(f"{where}{at(run.cfg.name_of('min_frequency'), str(run.cfg.min_frequency))} stopped the "
                                f"merges at {res.new_tokens:,} of {n:,}: the best pair left occurs {res.stopped_at:,} "
                                "times")
        run.warnings.append(counted.warnings[-1])
    elif res.new_tokens < n:
        left = "no adjacent pair left" if not run.cfg.max_token_length else \
            f"no adjacent pair left of at most {run.cfg.max_token_length} bytes"
        counted.warnings.append(f"{where}the corpus allows only {res.new_tokens} merges of the {n} asked for "
                                f"({left}); the vocabulary is smaller")
        run.warnings.append(counted.warnings[-1])
