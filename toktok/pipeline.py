"""The pipeline: read → pre-tokenize + count → merge (per phase) → export → insight → verify, one run end to end.

Reads the sources of a run description (``RunSpec``, :mod:`toktok.spec`); writes into the
output folder the tokenizer files (the ``.tiktoken`` file, ``tokenizer.json``,
``tokenizer_config.json``, ``special_tokens_map.json``) and the run file (or, for an ``output:``
into a folder toktok does not own, exactly that ``.tiktoken`` and the rest in ``NAME.toktok/``
beside it: :mod:`toktok.rundir`).
Phases run in order and share one merge history: phase k counts its own sources, segments those
words with the vocabulary after phase k-1 and learns its own number of merges. The starting
vocabulary is the bytes (+ hardcoded tokens) or a warm-start base whose ids are all kept.
Everything is built in a staging folder beside the output folder and renamed into place only
after the parity check passed, so a failed run never leaves a half-written tokenizer.

``train`` reads as its numbered steps, each one call of a stage's or a room's entry:
1. ``_plan`` (options, budget, inputs, the starting vocabulary ``start.vocabulary``: every check
before any work), 2. ``resume.open_run`` (the staging folder and the run file, as a
``resume.Journal``; an interrupted run's identity on ``--resume``), per phase 3. ``count.run`` (or,
on ``--resume``, what the interrupted run counted or merged: ``resume.restore``) and 4.
``merge.run``, then the reserved special tokens (``start.reserve``: ``--vocab-size``,
``--pad-to-multiple-of``), 5. ``export.write``, 6. ``_vocabulary``, 7. ``insight.record`` (the run
file's views, compression curve and word gains: a stage the pipeline runs on purpose, so that
every run file can be inspected as it is), 8. ``verify.check`` and 9. ``_publish``.
Each stage's entry takes what it reads as arguments (the ``RunSpec``, the phase, its sources, the
word table, the vocabulary so far, ...) and returns what it produced (``count.Counted``,
``merge.Merged``, ``export.Exported``, ``verify.VerifyReport``, ``start.Reserved``,
``resume.Restored``); what several steps share is passed in as a named service: the run file and
its checkpoints (``resume.Journal``), the kernels built ahead (``merge.Kernels``), HF's half of the
check (``verify.HFSide``) and the progress callable. The state between the steps is this
module's private ``_Run``: no stage sees it (docs/design.md lists the entries).
Two cores are kept busy where a step leaves one idle: the "counted" and "merged" checkpoints are
stored on a second connection while the words are laid out for the merge loop (waited for before
the loop's tables are allocated: DuckDB's write never adds to them; a short count's "counted" one
is stored with the "merged" one instead: ``Journal.counted``), and while the export runs
(``resume.Pending``, waited for by ``Journal.settle``; in line under a memory budget); a large
tokenizer.json loads into HF tokenizers in a second process started beside the last merge loop
(``verify.start``; in this process under a memory budget) once the merge stage ends, built from
the tokens the loop learns as it learns them (``export.ahead``, handed to step 5), while the insight
step and tiktoken's half of the verification run, and a smaller one, loaded in this process,
encodes the check's texts in a thread meanwhile (``verify.begin``); the compression curve's
documents are cut into pieces, the last phase's most frequent words found and the run file's
views added beside the last merge loop once it reports merges (``insight.ahead``, handed to step
7); steps 6 and 7 run in a thread on the run file's connection while this one exports and checks
the files (5 and 8, the export's meta on a second connection), step 7 beside the last "merged"
checkpoint (``insight.known``: what it would read of it, from memory), then write the
run file's WAL into it (so that closing it writes only step 9's rows; ``_Beside``; under a
memory budget 6 and 7 in line after the export, the WAL beside 8); on the first run after an
install the kernels compile in second processes before the run goes on (``merge.Kernels``; under
a memory budget before the run file is opened: ``toktok.ahead``); the first file's first batch is
read (a word-count table's checks, its file read since the command's start: ``count.early``,
then its words laid out for the merge loop: ``merge.laying_out``) while the run file is opened
(``count.start``).

Layering: imports point down this list, never up (and make no cycle):
(1) the edge, ``cli`` and ``api``: parse, call the library, map typed errors (no DuckDB, no run
store: a DuckDB error that escapes the run store's own calls is translated here, in ``train``);
(2) ``pipeline``, the one module that runs several stages, in order, from the finished
``RunSpec`` (it never calls back into ``config``); (3) the stages, ``count/``, ``merge/``,
``formats/``, ``verify``, ``warmstart``, ``insight/`` (the CLI's other commands call some of them
directly), the starting vocabulary ``start``, and the run's own rooms, ``resume``, ``store``,
``budget``, ``alloc``; (4) the ground, ``config`` (which builds the ``RunSpec``), ``spec``,
``summary``, ``options``, ``rundir``, ``vocab``, ``errors``. Inside
(3) a module may use another's public functions (``resume`` and ``insight`` store through
``store``, ``warmstart`` uses ``formats``); none imports ``config``: they take plain values or the
``RunSpec``. The ground imports no stage (except ``options``, which redacts URLs with
``count.remote.redact``).
Example: ``train(TrainConfig(["data_fixtures/corpus/"], "out/demo", merges=500).describe())``.
"""
from __future__ import annotations

import dataclasses
import os
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from . import resume, start, verify
from .alloc import lean
from .budget import BudgetPlan, plan_budget
from .count import stage as count
from .formats import export
from .insight import stage as insight
from .merge import stage as merge
from .spec import PhaseConfig, RunSpec
from .store import translating
from .summary import PhaseSummary, Totals, TrainSummary

#: How a run reports progress: ``progress(stage, done, total)``; total may be None.
Progress = Callable[[str, int, "int | None"], None]
#: Where a verbose run's log lines go (``train(..., log=...)``; default: stderr).
Log = Callable[[str], None]


@dataclass
class _Run:
    """One run's state between the steps of ``train`` (private: no stage sees it; each takes what
    it reads as arguments and returns what it produced): what step 1 planned, then what the later
    steps add (the staging folder, the journal, the vocabulary so far, each phase's parity sample
    and summary, the timings and warnings)."""

    cfg: RunSpec
    phases: list[PhaseConfig]
    plans: list[list[count.Source]]  # each phase's sources, resolved
    plan: BudgetPlan | None  # the split of the memory budget (None: no budget)
    ray_count: Callable | None  # the Ray engine's count_phase when the run asks for it
    threads: int
    report: Progress
    log: Log  # where the run's notices go (train's log; default: stderr)
    say: Log | None  # the verbose merge log
    marks: resume.Checkpoints
    vocab: start.Vocab
    kinds: list[str]  # each id's kind: byte, hardcoded, base, special, merge
    phase_of: list[str | None]  # the phase that learned each id
    base: start.Base | None
    specials: list[str]  # every special token of the run: listed, and the base's
    inputs: list[tuple[str, str]]  # what publishing must not replace: (path, what it is)
    warnings: list[str]
    pattern: start.Pattern  # the tokenizer's pre-tokenizer: the last phase's (--pattern, a warm start's own, or cl100k)
    patterns: dict[str, start.Pattern]  # each phase's, by name: its own, else the run's
    kernels: merge.Kernels  # the kernels, built ahead on a first run after an install
    times: dict[str, float] = field(default_factory=lambda: {"count": 0.0, "merge": 0.0})
    staging: resume.Staging | None = None
    journal: resume.Journal | None = None  # the run file and its checkpoints (step 2 on)
    fingerprints: list[list[list]] = field(default_factory=list)
    started: Any = None  # the first phase's first file, being read since step 1 (count.start)
    hf: verify.HFSide | None = None  # HF tokenizers' half of the verification, loading since the export
    ahead: export.Ahead | None = None  # tokenizer.json built beside the last merge loop, for the export
    curve_ahead: insight.Ahead | None = None  # the insight step's curve pieces, cut beside the last merge loop
    flushing: _Beside | None = None  # steps 6-7 and the run file's WAL written into it, beside 5 and 8
    kept: count.Kept | None = None  # the texts a phase read, kept for a later one that takes its sample
    tiktoken_written: tuple | None = None  # (.tiktoken text, vocabulary) the export wrote, for the verification
    synced: Callable[[], None] | None = None  # the export's files forced to disk (Exported.synced), before publishing
    ray_tuning: dict = field(default_factory=dict)  # more keywords of the Ray engine's count_phase
    parity: count.ParitySample = field(default_factory=count.ParitySample)
    regex_mb_s: list[float] = field(default_factory=list)  # per phase counted through regex: MB/s

    # per phase, for the compression curve: its parity sample and the pieces its sample did not take
    phase_parity: dict[str, pa.Table] = field(default_factory=dict)
    phase_held_out: dict[str, pa.Table | None] = field(default_factory=dict)
    summaries: list[PhaseSummary] = field(default_factory=list)
    merge_index: int = 0  # merges learned by the phases so far: the number of the next one
    special_ids: dict = field(default_factory=dict)  # how the special ids were placed (export._specials_rule)
    verified: verify.VerifyReport | None = None  # what the parity check compared (step 8)
    chat_template: str | None = None  # the Jinja text for tokenizer_config.json
    reserved: int = 0  # reserved special tokens added after the run's own (start.reserve)
    rungs: list[dict] = field(default_factory=list)  # --ladder's smaller tokenizers (export.write_ladder)

    def by_phase(self) -> dict[str, start.Pattern] | None:
        """Each phase's pattern when some phase splits with another than the tokenizer's, else None."""
        return self.patterns if any(p is not self.pattern for p in self.patterns.values()) else None

    @property
    def layout(self):
        """Where the run's files go: the ``RunSpec``'s :class:`~toktok.rundir.OutputLayout`."""
        return self.cfg.layout

    @property
    def small(self) -> bool:
        """A run over a few MB (``REFERENCE_BYTES``): before the scanner and the segmentation are
        compiled, it counts and segments with their references instead (see ``reference_allowance``)."""
        return sum(src.size for srcs in self.plans for src in srcs) <= count.REFERENCE_BYTES

    @property
    def tiny(self) -> bool:
        """A run over at most ``SMALL_BYTES`` (1 MB): it counts, segments, merges (up to
        ``merge.small.SMALL_WORDS`` words) and exports without a compiled kernel, so a first run
        after an install compiles none beside it."""
        return sum(src.size for srcs in self.plans for src in srcs) <= count.SMALL_BYTES

    def take_parity(self, phase: str, parity: pa.Table, held_out: pa.Table | None) -> None:
        """A phase's parity sample joins the run's; it and the pieces its sample did not take are
        kept for the compression curve."""
        self.parity.merge_frame(parity)
        self.phase_parity[phase], self.phase_held_out[phase] = parity, held_out

    def add_merged(self, phase: str, new: list[bytes], merges: int) -> None:
        """A phase's new tokens after the vocabulary so far (ids in order), learned by ``merges``
        merges (those that reused a token included): by the merge stage or, on ``--resume``,
        restored from the run file."""
        self.vocab = start.Vocab(list(self.vocab.tokens) + new, self.vocab.specials, self.vocab.pinned)
        self.kinds += ["merge"] * len(new)
        self.phase_of += [phase] * len(new)
        self.merge_index += merges


def train(cfg: RunSpec | Any, progress: Progress | None = None, log: Log | None = None, *,
          checkpoints: resume.Checkpoints | None = None, ray_tuning: dict | None = None) -> TrainSummary:
    """Train a tokenizer as ``cfg`` says and publish it (``cfg.layout``); raises ToktokError on bad input.

    ``cfg`` is the finished run (``RunSpec``); a ``TrainConfig`` is finished first (``describe``:
    its checks), the one call into the config: the steps read only the ``RunSpec``.

    With ``cfg.verbose`` the merges are logged as toktoktok does (the first 10 of each phase and
    every 100th: the pair, the new token, its id and count), one line each to ``log`` (default:
    stderr). ``checkpoints`` says when the run checkpoints for ``--resume`` (default: the merge
    loop every 2 s) and what happens after each one. ``ray_tuning``: keywords for the Ray engine's
    ``count_phase`` (``unit_bytes``, ``merge_min_bytes``; tests cut small files into many units).
    The allocators are tuned for the run and put back after it (:func:`toktok.alloc.lean`). A
    DuckDB error from outside the run store's own calls that means a full disk or too little
    memory is a ResourceError too (:func:`toktok.store.translating`); any other is a bug and passes
    unchanged.

    Example: ``train(TrainConfig(["data_fixtures/corpus/"], "out/demo", merges=500)).vocab_size == 256 + 1161 + 500``
    (when the corpus allows 500 merges).
    """
    if not isinstance(cfg, RunSpec):
        cfg = cfg.describe()
    with translating(cfg.layout.run_file, memory_limit=cfg.text_of("memory_limit")), lean():
        return _train(cfg, progress, log, checkpoints or resume.Checkpoints(), ray_tuning or {})


def _train(cfg: RunSpec, progress: Progress | None, log: Log | None, marks: resume.Checkpoints,
           ray_tuning: dict) -> TrainSummary:
    """The steps of a run, in order (see the module docstring); on failure the staging folder is
    kept for ``--resume`` when it holds a checkpoint (:func:`toktok.resume.abandon`)."""
    run = _plan(cfg, progress, log, marks)  # 1.
    run.ray_tuning = ray_tuning
    # (the first file's first batch decoded, or its word-count table read, while step 2 opens the run file)
    first = run.patterns[run.phases[0].name]
    run.started = count.start(cfg, run.phases[0], run.plans[0], run.plan, first, run.specials,
                              prepare=None if run.small else merge.laying_out(run.phases[0], run.vocab, run.kernels))
    if not run.tiny:  # a first run compiles before its run file exists: a kill -9 meanwhile leaves nothing
        run.kernels.warm_up()  # to --resume (and under a budget, while this process holds least)
    run.staging, run.journal, run.fingerprints = resume.open_run(  # 2.
        cfg, run.plans, marks, inputs=run.inputs, plan=run.plan, threads=run.threads, pattern=run.pattern,
        base=run.base, hardcoded=run.kinds.count("hardcoded"), by_phase=run.by_phase())
    journal = run.journal
    try:
        if not run.tiny:  # (a tiny run compiles only if its words are too many for merge.small)
            run.kernels.warm_up()
        # which phases take an earlier one's sample (the same sources, seed and capacity)
        shares = count.shares([count.sample_key(cfg, ph, srcs, run.plan, run.patterns[ph.name])
                               for ph, srcs in zip(run.phases, run.plans)])
        for phase, sources, fp, share in zip(run.phases, run.plans, run.fingerprints, shares):
            _phase(run, phase, sources, fp, share)  # 3-4.
        _reserve(run)
        # 6., 7. and the run file's WAL written into it (closing it then writes only publishing's
        # few rows), in a thread on the run file's connection, beside 5. and 8. in this one
        run.flushing = _Beside(run)
        _export(run)  # 5.
        run.flushing.exported()
        verify.begin(run.hf, run.vocab, run.parity.texts(), slices=cfg.verify_slices, seed=cfg.seed)  # (HF's half of 8)
        _verify(run)  # 8.
        _ladder(run)  # (--ladder: the smaller sizes, each checked too)
        _publish(run)  # 9.
    except BaseException as e:
        if run.hf is not None:
            run.hf.close()
        try:
            _flushed(run)
            journal.settle()
            journal.store_due()  # a count kept for the merge stage's first checkpoint is kept now
        except BaseException:  # the first error is the one to report
            pass
        resume.abandon(e, run.staging, journal.kept)
        raise
    return _summary(run)


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _plan(cfg: RunSpec, progress: Progress | None, log: Log | None, marks: resume.Checkpoints) -> _Run:
    """1. Every check before any work (the options were checked by ``describe``: sizes are ints),
    the engine, the plan of the memory budget (made once, here), each phase's sources (a bad path
    fails here), the starting vocabulary (:func:`toktok.start.vocabulary`: the bytes and hardcoded
    tokens, or a warm-start base; the special tokens and roles), the chat template, the inputs
    that publishing must not replace, and the output folder (:func:`toktok.resume.check_out`:
    a ``--resume`` with nothing to continue fails here, not after a budget's kernels compiled).
    Reads the config, the sources' listings and the base; writes nothing."""
    ray_count = count.engine(cfg, phases := list(cfg.phases))  # in-memory sources checked first
    warnings: list[str] = []
    threads, too_many = cfg.threads, cfg.threads_warning
    if too_many:
        warnings.append(too_many)
    plan = plan_budget(cfg.budget, name=cfg.name_of("budget")) if cfg.budget is not None else None
    plans = [count.resolve(cfg, ph) for ph in phases]
    said: list[list] = []  # phases reading one list of sources (SuperBPE's two) say its warnings once
    for ph, srcs in zip(phases, plans):
        if not any(ph.sources is s for s in said):
            said.append(ph.sources)
            warnings += [w for src in srcs for w in src.corpus.warnings if w not in warnings]
    st = start.vocabulary(cfg, phases)
    warnings += st.warnings
    chat = None
    if cfg.chat_template is not None:  # read and parsed now; a named one's specials must be the run's
        chat = export.chat_text(cfg.chat_template, st.specials, cfg.name_of("chat_template"), warnings)
    inputs = [(f.path, "a source") for srcs in plans for src in srcs for f in src.corpus.files if f.kind != "memory"]
    inputs += [(src.path, "a source") for ph in phases for src in ph.sources
               if src.kind != "memory" and os.path.isdir(os.path.expanduser(src.path))]
    if cfg.warm_start is not None:
        inputs.append((cfg.warm_start, "the warm-start base"))
    # before the first work: a budget's first run compiles its kernels (~40 s) before step 2
    resume.check_out(cfg, inputs)
    log = log or _stderr
    return _Run(cfg=cfg, phases=phases, plans=plans, plan=plan, ray_count=ray_count, threads=threads,
                report=progress or (lambda stage, done, total: None), log=log, say=log if cfg.verbose else None,
                marks=marks, vocab=st.vocab, kinds=st.kinds, phase_of=[None] * len(st.vocab.tokens), base=st.base,
                specials=st.specials, inputs=inputs, warnings=warnings, chat_template=chat,
                pattern=phases[-1].split(st.pattern), patterns={ph.name: ph.split(st.pattern) for ph in phases},
                kernels=merge.Kernels([ph.split(st.pattern) for ph in phases],
                                      log if cfg.verbose is not False else None, budgeted=plan is not None))


def _phase(run: _Run, phase: PhaseConfig, sources: list[count.Source], fp: list,
           share: count.Share | None = None) -> None:
    """3-4. One phase: its words counted (3, ``count.run``; ``share``: its sample as the phases
    share it, ``count.shares``) and its merges learned (4, ``merge.run``); on ``--resume``, a
    phase the interrupted run finished is taken from the run file as it is, and one it counted is
    merged again from its word table (``resume.restore``, which checks the inputs still have the
    fingerprint ``fp``)."""
    cfg, journal = run.cfg, run.journal
    journal.settle()
    got = resume.restore(journal, phase, fp, cfg.where(phase))
    if got is not None:
        run.take_parity(phase.name, got.parity, got.held_out)
    if got is not None and got.stage == "merged":
        run.add_merged(phase.name, got.new_tokens, got.merges)
        run.summaries.append(got.summary)
        run.warnings += got.warnings
        for k in ("count", "merge"):
            run.times[k] += got.summary.seconds[k]
        return
    if got is not None:
        counted, run.kept = got.counted, None
    else:
        reads, run.kept = run.kept, None  # (the texts an earlier phase read, if it kept them for this one)
        started, run.started = run.started, None
        counted = count.run(cfg, phase, sources, fp, journal=journal, pattern=run.patterns[phase.name],
                            specials=run.specials,
                            merges=merge.budget(phase, run.vocab), plan=run.plan, threads=run.threads,
                            report=run.report, started=started, ray_count=run.ray_count, ray_tuning=run.ray_tuning,
                            segment=None if run.plan is None else merge.segmenter(
                                run.vocab, reference=run.small, kernels=run.kernels if run.tiny else None),
                            share=share, reads=reads)
        del reads
        run.kept, counted.kept = counted.kept, None  # (for a later phase: held through this one's merges)
        if counted.regex_mb_s is not None:
            run.regex_mb_s.append(counted.regex_mb_s)
        run.times["sample"] = run.times.get("sample", 0.0) + counted.sample_seconds
        run.take_parity(phase.name, counted.parity, counted.held_out)
    run.warnings += counted.warnings
    report = run.report
    if phase is run.phases[-1] and run.hf is None:  # HF's half of step 8 starts its process beside the merge loop
        tokens = len(run.vocab.tokens) + min(merge.budget(phase, run.vocab), merge.most_merges(counted.words))
        run.hf = verify.start(run.staging.path, tokens, budgeted=run.plan is not None)
        points = (run.patterns[phase.name], len(run.vocab.tokens) - run.merge_index,
                  run.merge_index + tokens - len(run.vocab.tokens), run.small)  # (the curve's, planned)
        report = _cutting_ahead(run, (phase.name, counted.words, counted.counts), points) \
            if run.plan is None else report
        if run.hf is not None:  # (and so no budget) tokenizer.json built beside the loop, loading after it
            run.ahead = export.ahead(run.vocab, run.staging.path, cfg=cfg, hf=run.hf, pattern=run.pattern,
                                     final=lambda v: start.reserve(v, cfg).vocab)
    merged = merge.run(phase, counted, run.vocab, cfg=cfg, fp=fp, journal=journal, first_merge=run.merge_index,
                       replay=got is not None, small=run.small, tiny=run.tiny, kernels=run.kernels,
                       report=report, say=run.say, learned=run.ahead and _learned(run))
    run.warnings += merged.warnings
    run.add_merged(phase.name, merged.new_tokens, merged.merges)
    run.times["count"] += merged.summary.seconds["count"]
    run.times["merge"] += merged.summary.seconds["merge"]
    run.summaries.append(merged.summary)


def _learned(run: _Run) -> Callable[[list[bytes], bool], None]:
    """The merge stage's ``learned``: the new tokens to the export built ahead (``run.ahead``),
    then its vocabulary so far to the insight step's curve cut ahead (``Ahead.learned``); once
    that has cut its documents (its import and HF's second process's are done too then, and the
    loop's largest rounds, which share both cores), a "counted" checkpoint still due is stored
    beside the loop (``Journal.store_due_beside``), on the core it leaves idle."""
    add, ahead, hf, journal = run.ahead.add, run.ahead, run.hf, run.journal

    def learned(tokens: list[bytes], last: bool) -> None:
        if hf is not None:
            hf.spawn()  # (once: the loop has begun, on a core it leaves idle)
        add(tokens, last)
        if not last and run.curve_ahead is not None:
            run.curve_ahead.learned(ahead.tokens)
            if not run.curve_ahead.busy:
                journal.store_due_beside()
    return learned


def _cutting_ahead(run: _Run, words: tuple, points: tuple | None = None) -> Progress:
    """``run.report``, which also has the compression curve's documents cut into pieces
    (``insight.ahead``: of the parity samples, not the merges), the last phase's most frequent
    words found (``words``: its name, words and counts) and the run file's views added once the
    last merge loop reports its first merges: on the core the loop leaves idle, not beside the
    merge stage's own work in this thread (its layout, setup and result); ``points``: the curve's
    points planned (``insight.ahead``), segmented as the loop passes them (``_learned``). A loop too
    short to report any: step 7 does it all."""

    def report(stage: str, done: int, total: int | None) -> None:
        nonlocal words
        if run.curve_ahead is None and stage.startswith("merge") and 0 < done < (total or 0):
            run.curve_ahead = insight.ahead(run.parity.df, run.phase_parity, run.phase_held_out,
                                            run.patterns.values(), threads=run.threads, words=words,
                                            store=run.journal.store, points=points)
            words = None
        run.report(stage, done, total)
    return report


def _reserve(run: _Run) -> None:
    """The reserved special tokens after the run's own (``start.reserve``)."""
    got = start.reserve(run.vocab, run.cfg)
    run.vocab = got.vocab
    run.specials += got.names
    run.reserved = len(got.names)
    if got.warning:
        run.warnings.append(got.warning)


class _Beside:
    """Steps 6 and 7 (``_vocabulary``, ``_insight``) and the run file's WAL written into it, in a
    thread of their own, while this one exports (5) and checks (8) the files: they read the
    vocabulary, the run file and the parity sample, which steps 5 and 8 do not change, and only
    they use the run file meanwhile (the export's record, meta "specials", is written as the run
    publishes). The insight step runs beside the merge
    stage's checkpoint (``insight.known``; the WAL is written once that is stored too) and is
    mostly DuckDB's work and the kernels' (without the GIL), the export
    and the check mostly Python's. ``wait`` (``_flushed``) joins it, reports the insight step's
    progress then, in this thread (the reporters show one stage at a time: it is said once done),
    and raises what it raised. Under a memory budget, whose plan counts one step at a time, steps
    6 and 7 run in line once the export is done, as before, and only the WAL is written beside 8."""

    def __init__(self, run: _Run) -> None:
        self._run = run
        self._error: BaseException | None = None
        self._heard: list[tuple] = []  # the insight step's progress, reported by wait
        run.times.setdefault("export", 0.0)  # (the stages recorded in the order they start)
        run.times.setdefault("insight", 0.0)
        self._thread: threading.Thread | None = None
        if run.plan is None:
            heard = self._heard.append
            self._start(self._steps, lambda *a: heard(a))

    def _start(self, target: Callable, *args) -> None:
        def run() -> None:
            try:
                target(*args)
            except BaseException as e:  # raised by wait(), in the run's thread
                self._error = e

        self._thread = threading.Thread(target=run, name="toktok-insight", daemon=True)
        self._thread.start()

    def _steps(self, report: Progress) -> None:
        vocab = _vocabulary(self._run)  # 6.
        _insight(self._run, report, vocab)  # 7.
        self._flush()

    def _flush(self) -> None:
        # (the "merged" checkpoint, if step 7 ran beside it: another writer; DuckDB's cached blocks
        # are kept without a budget, the file written out and closed next: 7-23 ms less)
        self._run.journal.settle(release=self._run.plan is not None)
        self._run.journal.store.run("checkpoint")

    def exported(self) -> None:
        """The export is done: under a memory budget, steps 6 and 7 now, in line, then the WAL
        written in a thread (without one they run beside it already)."""
        if self._thread is None:
            _vocabulary(self._run)  # 6.
            _insight(self._run, self._run.report)  # 7.
            self._start(self._flush)

    def wait(self) -> None:
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        heard, self._heard = self._heard, []
        for event in heard:
            self._run.report(*event)
        error, self._error = self._error, None
        if error is not None:
            raise error


def _export(run: _Run) -> None:
    """5. The tokenizer files in the staging folder (``export.write``); HF's half of the check
    loads the new tokenizer.json from here on. How it placed the special ids is recorded as the
    run publishes (the run file is ``_Beside``'s meanwhile)."""
    t0 = time.perf_counter()
    out = export.write(run.vocab, run.staging.path, cfg=run.cfg, pattern=run.pattern, base=run.base,
                       chat_template=run.chat_template, hf=run.hf, budgeted=run.plan is not None,
                       report=run.report, ahead=run.ahead)
    run.hf, run.tiktoken_written, run.special_ids, run.ahead = out.hf, out.tiktoken, out.specials, None
    run.synced = out.synced
    run.times["export"] = time.perf_counter() - t0


def _insight(run: _Run, report: Progress, vocab: pa.Table | None = None) -> None:
    """7. The run file's views, compression curve and word gains (``insight.record``), its
    progress to ``report``; ``vocab``: the vocabulary step 6 stored, which with the phases'
    summaries spares it reading the merges (``insight.known``: it runs beside the last "merged"
    checkpoint); under a memory budget DuckDB may use half the merge loops' share meanwhile
    (``BudgetPlan.after_loops``: the most frequent words of a SuperBPE phase are long)."""
    t0 = time.perf_counter()
    ahead, run.curve_ahead = run.curve_ahead, None
    known = insight.known(vocab, [(s.name, s.merges_learned + s.reused_merges, s.reused_merges) for s in run.summaries])
    with run.journal.store.roomier(run.plan and run.plan.after_loops()):
        insight.record(run.journal, run.parity.df, run.phase_parity, run.phase_held_out, threads=run.threads,
                       small=run.small, report=report, ahead=ahead, known=known)
    run.times["insight"] = time.perf_counter() - t0


def _verify(run: _Run) -> None:
    """8. tiktoken and HF tokenizers agree on the staging folder's files (``verify.check``)."""
    t0 = time.perf_counter()
    hf, run.hf = run.hf, None
    cfg = run.cfg
    run.verified = verify.check(run.staging.path, run.vocab, run.parity.texts(), hf=hf, pattern=run.pattern,
                                slices=cfg.verify_slices, seed=cfg.seed, written=run.tiktoken_written,
                                report=run.report)
    run.tiktoken_written = None
    run.times["verify"] = time.perf_counter() - t0


def _ladder(run: _Run) -> None:
    """``--ladder``: each smaller size as a complete tokenizer in ``ladder/N/`` of the staging
    folder, cut from the run's vocabulary and checked (``export.write_ladder``), recorded in meta
    "ladder"."""
    cfg = run.cfg
    if not cfg.ladder or len(cfg.ladder) < 2:
        return
    t0 = time.perf_counter()
    last = run.summaries[-1]
    ladder = export.Ladder.of_vocab(run.vocab, reserved=run.reserved, start=last.first_id, cfg=cfg,
                                    stopped=last.merges_learned < last.merges_requested, pattern=run.pattern,
                                    chat_template=run.chat_template)
    run.rungs = export.write_ladder(ladder, cfg.ladder[:-1], run.staging.path, run.parity.texts(),
                                    slices=cfg.verify_slices, seed=cfg.seed, report=run.report)
    run.times["ladder"] = time.perf_counter() - t0


def _vocabulary(run: _Run) -> pa.Table:
    """6. The vocabulary after the last phase (checked by the export) in the run file, with each
    phase's summary (meta "phases"), in one commit (each costs a write to disk, ~5 ms); returns
    the rows stored (for step 7)."""
    vocab, cfg, store = run.vocab, run.cfg, run.journal.store
    phases = [
        {"name": s.name, "merges_requested": s.merges_requested, "merges_learned": s.merges_learned,
         "reused_merges": s.reused_merges, "words": s.words, "docs": s.docs, "text_bytes": s.text_bytes,
         "first_id": s.first_id, "budget": cfg.phase_budget(ph), "seconds": sum(s.seconds.values()),
         "seconds_count": s.seconds["count"], "seconds_merge": s.seconds["merge"],
         "sources": [{"path": count.redact(src.path), "weight": src.weight} for src in ph.sources],
         "pattern": run.patterns[ph.name].label()}
        for s, ph in zip(run.summaries, run.phases)
    ]
    sw = insight.superwords(vocab.tokens, run.phases, run.patterns, run.phase_of)
    with store.transaction():
        table = store.add_vocab(vocab.tokens, vocab.specials, run.kinds, run.phase_of)
        store.put_metas({"phases": phases, **({"superwords": sw} if sw is not None else {})})
    return table


def _publish(run: _Run) -> None:
    """9. The run file finished (stage timings, the export's special ids, parity, warnings, end
    time) and closed, then the staging folder published: renamed into place, whole
    (:meth:`toktok.rundir.Staging.publish`)."""
    store, rep = run.journal.store, run.verified
    _flushed(run)
    run.journal.settle()
    with store.transaction():  # the run file's last records in one commit
        store.add_stages(run.times)
        store.put_metas({"specials": run.special_ids,
                         "parity": {"ok": True, "strings": rep.strings, "tokens": rep.tokens,
                                    "hf_tokenizers": rep.hf_tokenizers}, "reserved": run.reserved,
                         **({"ladder": run.rungs} if run.rungs else {}),
                         "warnings": run.warnings, "finished": time.strftime("%Y-%m-%dT%H:%M:%S%z")})
    store.close()
    if run.synced is not None:
        run.synced()
    run.staging.publish(run.layout)


def _flushed(run: _Run) -> None:
    """Steps 6 and 7 and the run file's WAL written into it beside the export and the
    verification (``run.flushing``, a ``_Beside``), waited for."""
    flushing, run.flushing = run.flushing, None
    if flushing is not None:
        flushing.wait()


def _summary(run: _Run) -> TrainSummary:
    """What the run produced, for the CLI's closing summary and ``toktok.train``'s result."""
    s = run.summaries
    return TrainSummary(
        **{f.name: sum(getattr(p, f.name) for p in s) for f in dataclasses.fields(Totals)},
        out=run.layout.folder, vocab_size=run.vocab.size,
        seconds=run.times, parity_strings=run.verified.strings, warnings=run.warnings, phases=s,
        warm_start=run.base.summary() if run.base is not None else None, tiktoken=run.layout.tiktoken,
        shared=run.layout.shared, specials=run.special_ids,
        pattern=" → ".join(dict.fromkeys(run.patterns[ph.name].label() for ph in run.phases)),
        hardcoded=run.kinds.count("hardcoded"), regex_mb_s=run.regex_mb_s, reserved=run.reserved,
        min_frequency=run.cfg.min_frequency, max_token_length=run.cfg.max_token_length,
        counted_by=_counted_by(run), ladder=run.rungs,
    )


def _counted_by(run: _Run) -> str:
    """How the phases' custom patterns were counted (the summary's pattern row): through ``regex``
    and why when one was, else by the scanner compiled from them; "" when every pattern is named."""
    paths = [count.count_path(p) for p in dict.fromkeys(run.patterns.values()) if not p.named]
    return next((x for x in paths if x.startswith("regex")), paths[0] if paths else "")


__all__ = ["train", "TrainSummary", "PhaseSummary", "RunSpec"]
