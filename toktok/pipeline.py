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

``train`` reads as its numbered steps, each a function that says what it reads and writes:
1. ``_plan`` (options, budget, inputs, base: every check before any work), 2. ``_open`` (the
staging folder and the run file; an interrupted run's identity on ``--resume``), per phase
3. ``count.run`` (or what the interrupted run counted) and 4. ``_merge``, then the reserved special
tokens (``_reserve``: ``--vocab-size``, ``--pad-to-multiple-of``), 5. ``export.write``,
6. ``_vocabulary``, 7. ``insight.record`` (the run file's views, compression curve and word gains:
a stage the pipeline runs on purpose, so that every run file can be inspected as it is),
8. ``verify.check`` and 9. ``_publish``. The state they share is a ``_Run``; a stage's step is
that stage's one entry (``count.stage``, ``formats.export``, ``insight.stage``, ``verify``).
Two cores are kept busy where a step leaves one idle: the "counted" and "merged" checkpoints are
stored on a second connection while the merge loop, and the export, run (``resume.Pending``,
waited for by ``_settle``; in line under a memory budget); a large tokenizer.json loads into HF
tokenizers in a second process from the export on, while the insight step and tiktoken's half of
the verification run (``verify.open_hf``; in this process under a memory budget); on the first
run after an install the merge loop's kernels compile in a second process while the words are
counted (``merge.warm``).

Layering: imports point down this list, never up (and make no cycle):
(1) the edge, ``cli`` and ``api``: parse, call the library, map typed errors (no DuckDB, no run
store: a DuckDB error that escapes the run store's own calls is translated here, in ``train``);
(2) ``pipeline``, the one module that runs several stages, in order, from the finished
``RunSpec`` (it never calls back into ``config``); (3) the stages, ``count/``, ``merge/``,
``formats/``, ``verify``, ``warmstart``, ``insight/`` (the CLI's other commands call some of them
directly), and the run's own rooms, ``resume``, ``store``, ``budget``; (4) the ground, ``config``
(which builds the ``RunSpec``), ``spec``, ``options``, ``rundir``, ``vocab``, ``errors``. Inside
(3) a module may use another's public functions (``resume`` and ``insight`` store through
``store``, ``warmstart`` uses ``formats``); none imports ``config``: they take plain values or the
``RunSpec``. The ground imports no stage (except ``options``, which redacts URLs with
``count.remote.redact``).
Example: ``train(TrainConfig(["data_fixtures/"], "out/demo", merges=500).describe())``.
"""
from __future__ import annotations

import dataclasses
import os
import platform
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from . import resume
from . import __version__
from .errors import ConfigError, ToktokError
from .formats import export
from .insight import stage as insight
from .merge import learn_merges, small_enough, warm
from ._kernels import compiled, release_llvm_pages
from .budget import BudgetPlan, plan_budget
from .count import stage as count
from .count.stage import REFERENCE_BYTES, SMALL_BYTES, ParitySample, Source
from .resume import Checkpoints
from .spec import PhaseConfig, RunSpec
from .rundir import RUN_FILE, OutputLayout, Staging, open_staging
from .store import RunStore, merges_table, resource_error
from . import verify
from .verify import HFSide
from .options import at
from .patterns import Pattern
from .vocab import Vocab
from .warmstart import Base, start_vocab

#: How a run reports progress: ``progress(stage, done, total)``; total may be None.
Progress = Callable[[str, int, "int | None"], None]
#: Where a verbose run's log lines go (``train(..., log=...)``; default: stderr).
Log = Callable[[str], None]


@dataclass
class Totals:
    """What a phase, or a whole run (the sum of its phases), read and learned."""

    merges_requested: int
    merges_learned: int
    reused_merges: int
    words: int
    docs: int
    text_bytes: int


@dataclass
class PhaseSummary(Totals):
    """What one phase read and learned."""

    name: str
    first_id: int  # id of the phase's first new token
    seconds: dict[str, float] = field(default_factory=dict)
    stopped_at: int = 0  # --min-frequency ended the merges: the best pair left occurs this often (else 0)


@dataclass
class TrainSummary(Totals):
    """What a run produced, for the CLI's closing summary."""

    out: Path
    vocab_size: int
    seconds: dict[str, float] = field(default_factory=dict)
    parity_strings: int = 0
    warnings: list[str] = field(default_factory=list)
    phases: list[PhaseSummary] = field(default_factory=list)
    warm_start: dict | None = None
    tiktoken: Path | None = None
    shared: bool = False  # the .tiktoken went into a folder toktok does not own; ``out`` is beside it
    specials: dict = field(default_factory=dict)
    pattern: str = "cl100k"  # the pre-tokenizer, as Pattern.label() says it
    hardcoded: int = 0  # hardcoded tokens added (of the 1,161: those the pattern forms as one piece)
    regex_mb_s: list[float] = field(default_factory=list)  # counting through regex (no scanner), per phase
    reserved: int = 0  # reserved special tokens that fill the ids (--vocab-size, --pad-to-multiple-of)
    min_frequency: int | None = None  # --min-frequency, for the summary's merges row
    max_token_length: int | None = None  # --max-token-length, for the summary's pattern row


def _versions() -> dict[str, str]:
    from importlib.metadata import version  # Numba is imported only when a kernel runs

    import duckdb
    import polars
    import tiktoken
    import tokenizers

    return {
        "toktok": __version__, "python": sys.version.split()[0], "platform": platform.platform(),
        "polars": polars.__version__, "duckdb": duckdb.__version__, "numba": version("numba"),
        "numpy": np.__version__, "tiktoken": tiktoken.__version__, "tokenizers": tokenizers.__version__,
    }


def _literal(token: bytes) -> str:
    """A token for a log line: its text, with control characters (escape sequences too) and bytes
    that are not UTF-8 written as Python escapes."""
    text = token.decode("utf-8", "backslashreplace")
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


#: How reserved special tokens are spelled (Llama 3's), ``i`` from 0, skipping names the run has.
RESERVED = "<|reserved_special_token_{}|>"


def _check_sizes(cfg: RunSpec, phases: list[PhaseConfig], vocab: Vocab) -> None:
    """Each phase's ``vocab_size`` leaves room for at least no merge: the ids the run starts with
    (tokens, pinned specials and the specials after the last rank) plus the most the phases before
    it can add (their merges, or their own vocab_size). Checked before any work."""
    start = len(vocab.tokens) + len(vocab.specials)
    most = start
    for k, ph in enumerate(phases):
        if ph.vocab_size is None:
            most += ph.merges
            continue
        if ph.vocab_size < most:
            where = cfg.name_of("vocab_size") if not cfg.phases_given else f"phases[{k}].vocab_size:"
            before = (f"; the phases before it reach up to {most:,}" if most > start else "")
            raise ConfigError(f"{at(where, str(ph.vocab_size))} is less than the {start:,} ids the run starts with "
                              f"({len(vocab.tokens):,} tokens + {len(vocab.specials)} special){before}; pass at "
                              f"least {most}")
        most = ph.vocab_size


def _merge_budget(run: "_Run", phase: PhaseConfig) -> int:
    """The new tokens ``phase`` learns: its ``merges``, or what takes the vocabulary so far (every
    special token of the run included) to its ``vocab_size``; an earlier phase's shortfall is
    made up here. Example: vocab_size 2048, 1,417 tokens and 2 specials: 629."""
    if phase.vocab_size is None:
        return phase.merges
    return max(0, phase.vocab_size - len(run.vocab.tokens) - len(run.vocab.specials))


def _reserve(run: "_Run") -> None:
    """Reserved special tokens (:data:`RESERVED`) after the run's own: as many as the last phase's
    ``vocab_size`` lacks (merges that the corpus or ``--min-frequency`` did not give), then up to
    a multiple of ``--pad-to-multiple-of``. Ids stay exactly 0..N-1; a shortfall is a warning."""
    cfg, vocab = run.cfg, run.vocab
    short = max(0, (run.phases[-1].vocab_size or 0) - vocab.size)
    pad = (-(vocab.size + short)) % cfg.pad_to_multiple_of if cfg.pad_to_multiple_of else 0
    if not short + pad:
        return
    have, names, i = set(vocab.all_specials()), [], 0
    while len(names) < short + pad:
        if (name := RESERVED.format(i)) not in have:
            names.append(name)
        i += 1
    run.vocab = Vocab(vocab.tokens, vocab.specials + names, vocab.pinned)
    run.specials += names
    run.reserved = len(names)
    if short:
        where = cfg.name_of("vocab_size") if not cfg.phases_given else f"phases[{len(run.phases) - 1}].vocab_size:"
        run.warnings.append(f"{at(where, str(run.phases[-1].vocab_size))}: the merges stopped "
                            f"{short:,} short; {short:,} reserved special tokens fill ids {vocab.size:,}.."
                            f"{vocab.size + short - 1:,}")


def _run_specials(listed: list[str], vocab: Vocab, base: Base | None) -> tuple[list[str], list[str]]:
    """The run's special tokens after the last rank, in id order, and those of the base that the
    config does not list. Specials the base keeps at their ids (``pinned``) stay there. A base
    whose specials follow toktoktok's convention counts as bare: as toktoktok does, the listed
    specials come after the last new rank in list order; the base's unlisted ones follow them."""
    pinned = set(vocab.pinned.values())
    out = [s for s in listed if s not in pinned]
    unlisted = [s for s in (base.vocab.specials if base is not None and base.bare else []) if s not in out]
    return out + unlisted, unlisted


@dataclass
class _Run:
    """One run's state as it goes through the steps of ``train``: what step 1 planned, then what
    the later steps add (the staging folder, the run file, the vocabulary so far, each phase's
    parity sample and summary, the timings and warnings)."""

    cfg: RunSpec
    layout: OutputLayout
    phases: list[PhaseConfig]
    plans: list[list[Source]]  # each phase's sources, resolved
    plan: BudgetPlan | None  # the split of the memory budget (None: no budget)
    ray_count: Callable | None  # the Ray engine's count_phase when the run asks for it
    threads: int
    report: Progress
    say: Log | None  # the verbose merge log
    marks: Checkpoints
    vocab: Vocab
    kinds: list[str]  # each id's kind: byte, hardcoded, base, special, merge
    phase_of: list[str | None]  # the phase that learned each id
    base: Base | None
    specials: list[str]  # every special token of the run: listed, and the base's
    inputs: list[tuple[str, str]]  # what publishing must not replace: (path, what it is)
    warnings: list[str]
    pattern: Pattern  # the pre-tokenizer: --pattern, a warm start's own, or cl100k
    times: dict[str, float] = field(default_factory=lambda: {"count": 0.0, "merge": 0.0})
    staging: Staging | None = None
    store: RunStore | None = None
    fingerprints: list[list[list]] = field(default_factory=list)
    kept: bool = False  # whether a failure leaves the staging folder for --resume
    pending: resume.Pending | None = None  # the checkpoint being stored meanwhile (see _settle)
    compiler: warm.Compiler | None = None  # the process compiling the merge kernels on a cold run
    hf: HFSide | None = None  # HF tokenizers' half of the verification, loading since the export
    ray_tuning: dict = field(default_factory=dict)  # more keywords of the Ray engine's count_phase
    parity: ParitySample = field(default_factory=ParitySample)
    regex_mb_s: list[float] = field(default_factory=list)  # per phase counted through regex: MB/s

    # per phase, for the compression curve: its parity sample and the pieces its sample did not take
    phase_parity: dict[str, pl.DataFrame] = field(default_factory=dict)
    phase_held_out: dict[str, pl.DataFrame | None] = field(default_factory=dict)
    summaries: list[PhaseSummary] = field(default_factory=list)
    merge_index: int = 0  # merges learned by the phases so far: the number of the next one
    special_ids: dict = field(default_factory=dict)  # how the special ids were placed (_specials_rule)
    parity_strings: int = 0  # strings and tokens the parity check compared
    parity_tokens: int = 0
    parity_hf: str = ""  # where HF tokenizers loaded tokenizer.json for the check (HFSide.where)
    chat_template: str | None = None  # the Jinja text for tokenizer_config.json
    log: Log | None = None  # where the run's notices go (train's log; default: stderr)
    reserved: int = 0  # reserved special tokens added after the run's own (_reserve)

    @property
    def small(self) -> bool:
        """A run over a few MB (``REFERENCE_BYTES``): before the scanner and the segmentation are
        compiled, it counts and segments with their references instead (see ``reference_allowance``)."""
        return sum(src.size for srcs in self.plans for src in srcs) <= REFERENCE_BYTES

    @property
    def tiny(self) -> bool:
        """A run over at most ``SMALL_BYTES`` (1 MB): it counts, segments, merges (up to
        ``merge.small.SMALL_WORDS`` words) and exports without a compiled kernel, so a first run
        after an install compiles none beside it."""
        return sum(src.size for srcs in self.plans for src in srcs) <= SMALL_BYTES

    def settle(self) -> None:
        """The checkpoint being stored in the background, stored (:func:`_settle`)."""
        _settle(self)

    def checkpoint(self, save: Callable[[RunStore], None]) -> None:
        """A phase's large checkpoint stored, beside the next steps or at once (:func:`_checkpoint`)."""
        _checkpoint(self, save)

    def take_parity(self, phase: str, parity: pl.DataFrame, held_out: pl.DataFrame | None) -> None:
        """A phase's parity sample joins the run's (:func:`_take_parity`)."""
        _take_parity(self, phase, parity, held_out)

    def merge_budget(self, phase: PhaseConfig) -> int:
        """The new tokens ``phase`` learns (:func:`_merge_budget`)."""
        return _merge_budget(self, phase)

    def tag(self, phase: PhaseConfig) -> str:
        """The phase in progress stage names (`` english``); nothing for a one-phase run."""
        return f" {phase.name}" if len(self.phases) > 1 else ""

    def where(self, phase: PhaseConfig) -> str:
        """The phase in messages (``phase 'english': ``); nothing for a one-phase run."""
        return f"phase {phase.name!r}: " if len(self.phases) > 1 else ""


def train(cfg: RunSpec | Any, progress: Progress | None = None, log: Log | None = None, *,
          checkpoints: Checkpoints | None = None, ray_tuning: dict | None = None) -> TrainSummary:
    """Train a tokenizer as ``cfg`` says and publish it (``cfg.layout``); raises ToktokError on bad input.

    ``cfg`` is the finished run (``RunSpec``); a ``TrainConfig`` is finished first (``describe``:
    its checks), the one call into the config: the steps read only the ``RunSpec``.

    With ``cfg.verbose`` the merges are logged as toktoktok does (the first 10 of each phase and
    every 100th: the pair, the new token, its id and count), one line each to ``log`` (default:
    stderr). ``checkpoints`` says when the run checkpoints for ``--resume`` (default: the merge
    loop every 2 s) and what happens after each one. ``ray_tuning``: keywords for the Ray engine's
    ``count_phase`` (``unit_bytes``, ``merge_min_bytes``; tests cut small files into many units). The allocators are tuned for the run and put
    back after it (:func:`toktok.alloc.lean`). A DuckDB error from outside the run store's own
    calls that means a full disk or too little memory is a ResourceError too; any other is a bug
    and passes unchanged.

    Example: ``train(TrainConfig(["data_fixtures/"], "out/demo", merges=500)).vocab_size == 256 + 1161 + 500``
    (when the corpus allows 500 merges).
    """
    from .alloc import lean

    if not isinstance(cfg, RunSpec):
        cfg = cfg.describe()
    try:
        with lean():
            return _train(cfg, progress, log, checkpoints or Checkpoints(), ray_tuning or {})
    except ToktokError:
        raise
    except Exception as e:
        te = resource_error(e, cfg.layout.folder / RUN_FILE, None, cfg.text_of("memory_limit"))
        if te is None:
            raise
        raise te from e


def _train(cfg: RunSpec, progress: Progress | None, log: Log | None, marks: Checkpoints,
           ray_tuning: dict) -> TrainSummary:
    """The steps of a run, in order (see the module docstring); on failure the staging folder is
    kept for ``--resume`` when it holds a checkpoint (:func:`toktok.resume.abandon`)."""
    run = _plan(cfg, progress, log, marks)
    run.ray_tuning = ray_tuning
    run.staging = open_staging(run.layout, cfg.force, cfg.resume, run.inputs)
    run.kept = run.staging.resuming
    try:
        _open(run)
        run.log = log
        if not run.tiny:  # (a tiny run compiles only if its words are too many for merge.small)
            _compile_beside(run)
        for phase, sources, fp in zip(run.phases, run.plans, run.fingerprints):
            _phase(run, phase, sources, fp)
        _reserve(run)
        export.write(run)
        _vocabulary(run)
        insight.record(run)
        verify.check(run)
        _publish(run)
        if run.compiler is not None:  # a resumed run that learned no merge did not need it
            run.compiler.stop()
    except BaseException as e:
        if run.compiler is not None:
            run.compiler.stop()
        if run.hf is not None:
            run.hf.close()
        try:
            _settle(run)
        except BaseException:  # the first error is the one to report
            pass
        resume.abandon(e, run.staging, run.kept)
        raise
    return _summary(run)


def _compile_beside(run: _Run) -> None:
    """On the first run after an install, the merge loop's and the export's kernels compiled in a
    second process (``merge.warm``; in this one under a memory budget), said once; nothing when
    they are in Numba's cache."""
    if run.compiler is not None or compiled():
        return
    # under a memory budget, whose plan counts one process, the kernels compile in this one as
    # they are first called (a no-op Compiler marks that it was said): a second process held
    # 150-300 MB more on a first run (peak 1.25-1.54x the budget against 0.96x warm)
    run.compiler = warm.start(also=export.compile_kernels) if run.plan is None else warm.Compiler(None)
    if run.cfg.verbose is not False:
        (run.log or _stderr)("toktok: compiling the kernels, once after an install (about 10 s more"
                             + ("" if run.plan is None else ", in this process: inside the memory budget")
                             + "); later runs load them from Numba's cache")


def _checkpoint(run: _Run, save: Callable[[RunStore], None]) -> None:
    """Store a phase's large checkpoint (``save(store)``): beside the steps that follow
    (:class:`toktok.resume.Pending`, waited for by ``_settle``) when the run has no memory budget;
    waited for at once under a budget, whose plan does not provide for DuckDB's write (and the
    word table it keeps alive) beside the next step's allocations."""
    run.pending = resume.Pending(save, run.store)
    if run.plan is not None:
        _settle(run)


def _settle(run: _Run) -> None:
    """The checkpoint being stored in the background (:class:`toktok.resume.Pending`), if any,
    stored: counted as a checkpoint from here on, and DuckDB's blocks cached by the write given
    back. Called before anything that reads it or writes after it (the first merge checkpoint,
    the next phase, the insight step, publishing) and when the run fails."""
    pending, run.pending = run.pending, None
    if pending is not None:
        pending.wait()
        run.kept = True
        run.store.release_memory()
        run.marks.done()


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _plan(cfg: RunSpec, progress: Progress | None, log: Log | None, marks: Checkpoints) -> _Run:
    """1. Every check before any work (the options were checked by ``describe``: sizes are ints),
    the engine, the plan of the memory budget (made once, here), each phase's sources (a bad path
    fails here), the starting vocabulary (the bytes and hardcoded tokens, or a warm-start base),
    the special tokens and roles, and the inputs that publishing must not replace. Reads the
    config, the sources' listings and the base; writes nothing."""
    ray_count = count.engine(cfg, phases := list(cfg.phases))  # in-memory sources checked first
    warnings: list[str] = []
    threads, too_many = cfg.threads, cfg.threads_warning
    if too_many:
        warnings.append(too_many)
    release_llvm_pages()  # see there: ~100 MB of RSS that the run never uses
    plan = plan_budget(cfg.budget, name=cfg.name_of("budget")) if cfg.budget is not None else None
    plans = [count.resolve(cfg, ph) for ph in phases]
    warnings += dict.fromkeys(w for srcs in plans for src in srcs for w in src.corpus.warnings)
    vocab, kinds, base, pattern = start_vocab(cfg)
    if base is not None:
        warnings += base.warnings
    listed = [str(t) for t in cfg.special_tokens]  # their added-token flags: for the export (formats.export)
    vocab.specials, unlisted = _run_specials(listed, vocab, base)
    if unlisted and cfg.special_tokens:
        warnings.append(f"the base's special tokens {', '.join(map(repr, unlisted))} are not in special_tokens; "
                        "they follow the listed ones (list every special token, as toktoktok needs, to choose the order)")
    vocab.check()
    _check_sizes(cfg, phases, vocab)
    specials = vocab.all_specials()
    cfg.check_roles(specials)
    chat = None
    if cfg.chat_template is not None:  # read and parsed now; a named one's specials must be the run's
        chat = export.chat_text(cfg.chat_template, specials, cfg.name_of("chat_template"))
    inputs = [(f.path, "a source") for srcs in plans for src in srcs for f in src.corpus.files if f.kind != "memory"]
    inputs += [(src.path, "a source") for ph in phases for src in ph.sources
               if src.kind != "memory" and os.path.isdir(os.path.expanduser(src.path))]
    if cfg.warm_start is not None:
        inputs.append((cfg.warm_start, "the warm-start base"))
    say = (log or _stderr) if cfg.verbose else None
    return _Run(cfg=cfg, layout=cfg.layout, phases=phases, plans=plans, plan=plan, ray_count=ray_count,
                threads=threads, report=progress or (lambda stage, done, total: None), say=say, marks=marks,
                vocab=vocab, kinds=kinds, phase_of=[None] * len(vocab.tokens), base=base, specials=specials,
                inputs=inputs, warnings=warnings, chat_template=chat,
                pattern=pattern)


def _open(run: _Run) -> None:
    """2. The run file in the staging folder, DuckDB limited to the budget's share (else to
    ``memory_limit``), and what it records before any phase: on ``--resume`` the check that this
    is the interrupted run (:func:`toktok.resume.begin`); the inputs' fingerprints, the budget's
    plan, the config, versions, seed, pattern, start time and warm-start base."""
    cfg, plan, resuming = run.cfg, run.plan, run.staging.resuming
    if plan is not None:
        limit, shown = plan.duckdb_bytes, f"{plan.duckdb_bytes >> 20}MiB"
    else:
        limit, shown = cfg.memory_limit, cfg.text_of("memory_limit")
    store = run.store = RunStore.create(run.staging.path / RUN_FILE, memory_limit=limit, threads=run.threads,
                                        limit_shown=shown)
    store.begin()  # what the run file records before any phase, in one commit
    run.fingerprints = resume.begin(store, cfg, run.plans, resuming)
    if plan is not None:
        store.put_meta("budget", plan.to_dict())
    store.put_meta("config", cfg.to_dict())
    store.put_meta("versions", _versions())
    store.put_meta("seed", str(cfg.seed))
    store.put_meta("pattern", {**run.pattern.to_dict(), "given": cfg.written.get("pattern"),
                               "from": "warm start" if run.base is not None and run.base.pattern is not None else
                               "option" if cfg.pattern is not None else "default"})
    store.put_meta("resumed" if resuming else "started", time.strftime("%Y-%m-%dT%H:%M:%S%z"))
    if run.base is not None:
        store.put_meta("warm_start", {**run.base.summary(), "hardcoded_added": run.kinds.count("hardcoded")})
    store.commit()


def _phase(run: _Run, phase: PhaseConfig, sources: list[Source], fp: list) -> None:
    """3-4. One phase: its words counted (3, or as the interrupted run counted them) and its merges
    learned (4); a phase the interrupted run finished is taken from the run file as it is. Reads
    the phase's sources and (on ``--resume``) its checkpoint, which must have the inputs' ``fp``."""
    _settle(run)
    cp = resume.phase_checkpoint(run.store, phase.name, fp, run.where(phase)) if run.staging.resuming else None
    if cp is not None and cp["stage"] == "merged":
        _restore_merged(run, phase, cp)
        return
    if cp is not None and cp["stage"] == "counted":
        counted = _restore_counted(run, phase, cp)
    else:
        counted = count.run(run, phase, sources, fp)
    run.warnings += counted.warnings
    _merge(run, phase, counted, fp, cp)


def _take_parity(run: _Run, phase: str, parity: pl.DataFrame, held_out: pl.DataFrame | None) -> None:
    """A phase's parity sample joins the run's; it and the pieces its sample did not take are kept
    for the compression curve."""
    run.parity.merge_frame(parity)
    run.phase_parity[phase], run.phase_held_out[phase] = parity, held_out


def _restore_merged(run: _Run, phase: PhaseConfig, cp: dict) -> None:
    """3-4'. A phase the interrupted run finished: its new tokens, parity sample, summary, warnings
    and timings, from the run file."""
    store = run.store
    m = store.merges_of(phase.name)
    new = [t for t, r in zip(m["token"].to_pylist(), m["reused"].to_pylist()) if not r]
    run.vocab = Vocab(list(run.vocab.tokens) + new, run.vocab.specials, run.vocab.pinned)
    run.kinds += ["merge"] * len(new)
    run.phase_of += [phase.name] * len(new)
    run.merge_index += m.num_rows
    _take_parity(run, phase.name, pl.from_arrow(store.parity_of(phase.name)), resume.held_out_of(store, phase.name))
    sm = cp["summary"]
    run.summaries.append(PhaseSummary(**sm))
    run.warnings += cp["warnings"]
    for k in ("count", "merge"):
        run.times[k] += sm["seconds"][k]


def _restore_counted(run: _Run, phase: PhaseConfig, cp: dict) -> count.Counted:
    """3'. A phase the interrupted run counted: its word table, parity sample, warnings and counting
    statistics, from the run file."""
    store = run.store
    table = pl.from_arrow(store.words_of(phase.name))
    _take_parity(run, phase.name, pl.from_arrow(store.parity_of(phase.name)), resume.held_out_of(store, phase.name))
    return count.Counted(table, cp["warnings"], cp["seconds_count"], cp["docs"], cp["text_bytes"])


class _MergeLog:
    """The merge loop's checkpoint (``learn_merges(checkpoint=...)``): appends each batch of merges
    to the run file and logs the phase's new tokens as toktoktok does (the first 10 and every
    100th: the pair, the new token, its id and count) to the run's verbose log."""

    def __init__(self, run: _Run, phase: PhaseConfig) -> None:
        self.run, self.phase = run, phase.name
        self.toks = list(run.vocab.tokens)
        self.at = run.merge_index  # the number of the next merge
        self.learned = 0  # new tokens of this phase so far
        self.prefix = f"[{phase.name}] " if run.tag(phase) else ""

    def __call__(self, left, right, token, count, reused) -> None:
        _settle(self.run)  # the "counted" checkpoint comes first
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


def _merge(run: _Run, phase: PhaseConfig, counted: count.Counted, fp: list, cp: dict | None) -> None:
    """4. The phase's merges on top of the vocabulary so far. Reads the counted word table (one
    copy of it during the merges, the run's peak of memory); writes the merges as they come
    (checkpoints every few seconds, :class:`_MergeLog`), then each word's tokens and the phase's
    summary: the "merged" checkpoint, stored while the tokenizer is exported and verified when the run
    has no budget (``_checkpoint``). On ``--resume`` the loop runs again from the word table and
    must agree with the merges the interrupted run checkpointed (``cp``)."""
    store, where, tag = run.store, run.where(phase), run.tag(phase)
    words = counted.table["word"].to_arrow()  # a copy of the words: the table goes
    counts = counted.table["count"].to_numpy()
    counted.table = None
    if run.pending is None:  # else once the "counted" checkpoint is stored (_settle)
        store.release_memory()
    release_llvm_pages()
    t0 = time.perf_counter()
    n = _merge_budget(run, phase)
    run.report("merge" + tag, 0, n)
    first_id = len(run.vocab.tokens)
    prior = store.merges_of(phase.name) if cp is not None else None
    store.drop_merges(phase.name)
    start = Vocab(run.vocab.tokens, [], run.vocab.pinned)
    if run.tiny and not small_enough(words, n):  # the loop's kernels after all
        _compile_beside(run)
    res = learn_merges(words, counts, start, n, progress=lambda k: run.report("merge" + tag, k, n),
                       checkpoint=_MergeLog(run, phase), every=run.marks.every, step=run.marks.step,
                       ready=partial(_compiled, run) if run.compiler is not None else None, reference=run.small,
                       max_token_length=run.cfg.max_token_length, min_frequency=run.cfg.min_frequency)
    run.report("merge" + tag, res.new_tokens, n)
    if prior is not None and prior.num_rows:
        resume.check_replay(prior, res, where)
    t_merge = time.perf_counter() - t0
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
    summary = PhaseSummary(merges_requested=n, merges_learned=res.new_tokens, reused_merges=int(res.reused.sum()),
                           words=len(words), docs=counted.docs, text_bytes=counted.text_bytes, name=phase.name,
                           first_id=first_id, seconds={"count": counted.seconds, "merge": t_merge},
                           stopped_at=res.stopped_at)
    state = {"fingerprint": fp, "warnings": counted.warnings, "summary": dataclasses.asdict(summary)}
    _checkpoint(run, lambda st: resume.save_merged(st, phase.name, words, counts, res.word_tokens, state))
    run.merge_index += len(res.left)
    run.vocab = Vocab(res.vocab.tokens, run.vocab.specials, run.vocab.pinned)
    run.kinds += ["merge"] * (len(run.vocab.tokens) - first_id)
    run.phase_of += [phase.name] * (len(run.vocab.tokens) - first_id)
    run.times["count"] += counted.seconds
    run.times["merge"] += t_merge
    run.summaries.append(summary)


def _compiled(run: _Run) -> None:
    """The merge loop's kernels, compiled by the cold run's second process (``merge.warm``) and
    this one: waited for, as the stage ``compile`` inside the merge's (its ETA is not known)."""
    run.report("compile", 0, 1)
    run.compiler.wait()
    run.report("compile", 1, 1)


def _vocabulary(run: _Run) -> None:
    """6. The vocabulary after the last phase (checked by the export) in the run file, with each
    phase's summary (meta "phases")."""
    vocab, cfg = run.vocab, run.cfg
    run.store.add_vocab(vocab.tokens, vocab.specials, run.kinds, run.phase_of)
    run.store.put_meta("phases", [
        {"name": s.name, "merges_requested": s.merges_requested, "merges_learned": s.merges_learned,
         "reused_merges": s.reused_merges, "words": s.words, "docs": s.docs, "text_bytes": s.text_bytes,
         "first_id": s.first_id, "budget": cfg.phase_budget(ph), "seconds": sum(s.seconds.values()),
         "seconds_count": s.seconds["count"], "seconds_merge": s.seconds["merge"],
         "sources": [{"path": count.redact(src.path), "weight": src.weight} for src in ph.sources]}
        for s, ph in zip(run.summaries, run.phases)
    ])


def _publish(run: _Run) -> None:
    """9. The run file finished (stage timings, parity, warnings, end time) and closed, then the
    staging folder published: renamed into place, whole (:meth:`toktok.rundir.Staging.publish`)."""
    store = run.store
    _settle(run)
    store.begin()  # the run file's last records in one commit
    for k, v in run.times.items():
        store.add_stage(k, v)
    store.put_meta("parity", {"ok": True, "strings": run.parity_strings, "tokens": run.parity_tokens,
                              "hf_tokenizers": run.parity_hf})
    store.put_meta("warnings", run.warnings)
    store.put_meta("finished", time.strftime("%Y-%m-%dT%H:%M:%S%z"))
    store.commit()
    store.close()
    run.staging.publish(run.layout)


def _summary(run: _Run) -> TrainSummary:
    """What the run produced, for the CLI's closing summary and ``toktok.train``'s result."""
    s = run.summaries
    return TrainSummary(
        **{f.name: sum(getattr(p, f.name) for p in s) for f in dataclasses.fields(Totals)},
        out=run.layout.folder, vocab_size=run.vocab.size,
        seconds=run.times, parity_strings=run.parity_strings, warnings=run.warnings, phases=s,
        warm_start=run.base.summary() if run.base is not None else None, tiktoken=run.layout.tiktoken,
        shared=run.layout.shared, specials=run.special_ids, pattern=run.pattern.label(),
        hardcoded=run.kinds.count("hardcoded"), regex_mb_s=run.regex_mb_s, reserved=run.reserved,
        min_frequency=run.cfg.min_frequency, max_token_length=run.cfg.max_token_length,
    )


__all__ = ["train", "TrainSummary", "PhaseSummary", "RunSpec"]
