"""The merge stage's entry (``run``): a phase's counted words in, its merges on top of the vocabulary out.

Per phase ``run`` learns the phase's new tokens (:func:`budget` of them) with
:func:`.learn.learn_merges`, stores them as they come and logs them as toktoktok does, then makes
the phase's summary and its "merged" checkpoint. Before the first phase ``warm_up`` starts
compiling the loop's kernels in a second process on the first run after an install
(:mod:`.warm`), while the words are counted.
Example: ``merge.run(run, phase, counted, fp, replay=False)`` (the pipeline's step 4).
"""
from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING

from .. import ahead, resume
from .._kernels import compiled, release_llvm_pages
from ..options import at
from ..store import merges_table
from ..summary import PhaseSummary
from ..vocab import Vocab
from . import warm
from .learn import learn_merges
from .loop import _loop
from .small import python_first
from .warm import Compiler

if TYPE_CHECKING:
    from ..count.common import Counted
    from ..spec import PhaseConfig

#: What the pipeline reads besides the entries: the type of its ``_Run.compiler``.
__all__ = ["Compiler", "budget", "run", "warm_up"]


def budget(run, phase: PhaseConfig) -> int:
    """The new tokens ``phase`` learns: its ``merges``, or what takes the vocabulary so far (every
    special token of the run included) to its ``vocab_size``; an earlier phase's shortfall is
    made up here. Example: vocab_size 2048, 1,417 tokens and 2 specials: 629."""
    if phase.vocab_size is None:
        return phase.merges
    return max(0, phase.vocab_size - len(run.vocab.tokens) - len(run.vocab.specials))


def warm_up(run, also: Callable[[], None] | None = None) -> None:
    """On the first run after an install, the merge loop's kernels (and ``also``'s: the export's)
    compiled in a second process beside the run (:mod:`.warm`), said once; under a memory budget
    every kernel, compiled before the run holds anything (:func:`toktok.ahead.compile_first`,
    the pipeline calls this before it opens the run file). Nothing when they are in Numba's
    cache. Example: ``warm_up(run, also=export.compile_kernels)``."""
    if run.compiler is not None:
        return
    if run.plan is not None:
        if ahead.cached(run.pattern):
            return
        # the budget's plan counts one process: a second one compiling beside the run held
        # 150-300 MB more, and compiling in the run's own process kept ~90 MiB to its end (a
        # peak of 1.10x the budget); ahead, each group's process holds 240-280 MiB beside ~175
        run.compiler = warm.Compiler(None)  # marks that it was said
        _say_compiling(run, "about 30 s more, before the run starts: inside the memory budget")
        ahead.compile_first(run.pattern)
        return
    if compiled((_loop,)):  # (a small run counts without the scanner: not asked)
        return
    run.compiler = warm.start(also=also)
    _say_compiling(run, "about 10 s more")


def _say_compiling(run, how: str) -> None:
    if run.cfg.verbose is not False:
        run.log(f"toktok: compiling the kernels, once after an install ({how}); later runs "
                "load them from Numba's cache")


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

    def __call__(self, left, right, token, count, reused) -> None:
        self.run.settle()  # the "counted" checkpoint comes first
        toks, say, rows = self.toks, self.run.say, []
        for lt, rt, t, c, r in zip(left.tolist(), right.tolist(), token.tolist(), count.tolist(), reused.tolist()):
            if not r:
                toks.append(toks[lt] + toks[rt])
                self.learned += 1
                k = self.learned
                if say is not None and (k <= 10 or k % 100 == 0):
                    say(f"{self.prefix}Merge {k}: \"{_literal(toks[lt])}\" + \"{_literal(toks[rt])}\" -> "
                        f"\"{_literal(toks[t])}\" (id {lt} + {rt} -> {t}, count: {c})")
            rows.append(toks[t])
        self.run.store.add_merges(self.phase, merges_table(self.at, left, right, token, rows, count, reused))
        self.at += len(left)
        self.run.marks.done()


def run(run, phase: PhaseConfig, counted: Counted, fp: list, replay: bool) -> None:
    """The merge stage's entry (the pipeline's step 4, ``run`` its ``_Run``): the phase's merges on
    top of the vocabulary so far. Reads the counted word table (one copy of it during the merges,
    the run's peak of memory); writes the merges as they come (checkpoints every few seconds,
    :class:`_MergeLog`), then each word's tokens and the phase's summary: the "merged" checkpoint,
    stored while the tokenizer is exported and verified when the run has no budget
    (``_Run.checkpoint``). With ``replay`` (``--resume`` from the phase's "counted" checkpoint) the
    loop runs again from the word table and must agree with the merges the interrupted run stored.
    Example: ``run(run_state, phase, counted, fingerprint, replay=False)``."""
    store, where, tag = run.store, run.where(phase), run.tag(phase)
    words = counted.table["word"].to_arrow()  # a copy of the words: the table goes
    counts = counted.table["count"].to_numpy()
    counted.table = None
    if run.pending is None:  # else once the "counted" checkpoint is stored (_Run.settle)
        store.release_memory()
    release_llvm_pages()
    t0 = time.perf_counter()
    n = budget(run, phase)
    run.report("merge" + tag, 0, n)
    first_id = len(run.vocab.tokens)
    prior = store.merges_of(phase.name) if replay else None
    store.drop_merges(phase.name)
    start = Vocab(run.vocab.tokens, [], run.vocab.pinned)
    python = python_first(words) if run.tiny else None  # (else: learn_merges asks small_enough)
    if run.tiny and not python:  # the loop's kernels after all
        run.warm_up()
    res = learn_merges(words, counts, start, n, progress=lambda k: run.report("merge" + tag, k, n),
                       checkpoint=_MergeLog(run, phase), every=run.marks.every, step=run.marks.step,
                       ready=partial(_compiled, run) if run.compiler is not None else None, reference=run.small,
                       python=python, max_token_length=run.cfg.max_token_length, min_frequency=run.cfg.min_frequency)
    run.report("merge" + tag, res.new_tokens, n)
    if prior is not None and prior.num_rows:
        resume.check_replay(prior, res, where)
    t_merge = time.perf_counter() - t0
    _short_warning(run, phase, counted, res, n)
    summary = PhaseSummary(merges_requested=n, merges_learned=res.new_tokens, reused_merges=int(res.reused.sum()),
                           words=len(words), docs=counted.docs, text_bytes=counted.text_bytes, name=phase.name,
                           first_id=first_id, seconds={"count": counted.seconds, "merge": t_merge},
                           stopped_at=res.stopped_at)
    state = {"fingerprint": fp, "warnings": counted.warnings, "summary": dataclasses.asdict(summary)}
    run.checkpoint(lambda st: resume.save_merged(st, phase.name, words, counts, res.word_tokens, state))
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


def _compiled(run) -> None:
    """The merge loop's kernels, compiled by the cold run's second process (:mod:`.warm`) and
    this one: waited for, as the stage ``compile`` inside the merge's (its ETA is not known)."""
    run.report("compile", 0, 1)
    run.compiler.wait()
    run.report("compile", 1, 1)
