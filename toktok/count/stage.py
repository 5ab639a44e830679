"""The count stage's entry (``run``): a phase's sources in, its word table out (``Counted``).

Before any work the pipeline checks the in-memory sources and picks the engine (``engine``) and
resolves each phase's sources (``resolve``: a bad path fails there); per phase ``run`` reads,
samples, pre-tokenizes and counts them with the engine (:func:`.local.count_phase`, or Ray's),
checkpointing on the way, and cuts the word table to the budget.
Example: ``counted = count.run(run, phase, count.resolve(cfg, phase), fp)``.
"""
from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING

import pyarrow as pa

from .. import resume
from ..budget import BudgetPlan, fit_words
from ..errors import ConfigError, InputError
from .common import BATCH_BYTES, Counted
from .local import ParitySample, Source, count_phase, start_reading
from .memory import check_sources, corpus_of
from .scan import REFERENCE_BYTES, SMALL_BYTES
from .read import read_corpus
from .remote import redact, set_readahead

if TYPE_CHECKING:
    from ..spec import PhaseConfig, RunSpec

#: What the pipeline reads besides the entries: the small and tiny runs' sizes, the parity
#: sample and resolved source types, and how a source's URL is shown.
__all__ = ["Counted", "ParitySample", "REFERENCE_BYTES", "SMALL_BYTES", "Source", "engine", "redact", "resolve", "run",
           "start"]


def engine(cfg: RunSpec, phases: list[PhaseConfig]) -> Callable | None:
    """The in-memory sources of ``phases`` checked (:func:`.memory.check_sources`), then the Ray
    engine's ``count_phase`` when the run asks for it (a ConfigError naming the install command
    when Ray is missing), None for the local engine. Example: ``engine(spec, list(spec.phases)) is None``."""
    check_sources(phases, resume=cfg.resume, engine=cfg.engine)
    if cfg.engine != "ray":
        return None
    from .ray import count_phase as ray_count_phase, require_ray

    require_ray()
    return ray_count_phase


def resolve(cfg: RunSpec, phase: PhaseConfig) -> list[Source]:
    """Resolve every source of ``phase``; fails on a bad path before any work.
    Example: ``resolve(spec, spec.phases[0])[0].corpus.files``."""
    return [Source(corpus_of(src, cfg.text_column, cfg.bad_utf8, resume=cfg.resume) if src.kind == "memory" else
                   read_corpus([src.path], text_column=src.text_column or cfg.text_column, bad_utf8=cfg.bad_utf8,
                               storage_options=cfg.source_options(src)),
                   src.weight) for src in phase.sources]


def start(run) -> None:
    """The first phase's first file read from now on (``run.started``, :func:`.local.start_reading`)
    when that phase reads every document with the local engine on a fresh run: the pipeline calls
    it before it opens the run file, so the first batch is decoded meanwhile.
    Example: ``count.start(run_state)``."""
    phase = run.phases[0]
    if run.ray_count is None and not run.cfg.resume and _phase_capacity(run.cfg, phase, run.plan) is None:
        run.started = start_reading(run.plans[0], BATCH_BYTES, run.pattern)


def _phase_capacity(cfg: RunSpec, phase: PhaseConfig, plan: BudgetPlan | None) -> int | None:
    """Bytes of text a phase may sample: what the memory budget allows, at most what
    ``working_set_mb`` holds, and at most the phase's own ``budget`` (text bytes) when it has one;
    None = read everything."""
    caps = []
    if plan is not None:
        caps.append(plan.sample_bytes)
    if (ws := cfg.working_set_text) is not None:
        caps.append(ws)
    if phase.budget is not None:
        caps.append(phase.budget)
    return min(caps) if caps else None


def run(run, phase: PhaseConfig, sources: list[Source], fp: list) -> Counted:
    """The count stage's entry (the pipeline's step 3, ``run`` its ``_Run``): read, sample (when
    the budget says so), pre-tokenize and count one phase's sources with the run's engine, then
    cut the word table to the budget (:func:`toktok.budget.fit_words`); the merge stage's input.
    Reads the sources, from the interrupted run's counting checkpoint on ``--resume``; writes
    counting checkpoints on the way (either engine: at file boundaries every
    ``COUNT_EVERY`` x the merge loop's interval, a snapshot of the counts so far; and the finished
    sample), then the phase's words, inputs and parity sample: the "counted" checkpoint, stored
    while the merge stage lays the words out when the run has no budget, or kept for the merge
    stage's first checkpoint when counting was short (:func:`toktok.resume.counted`).
    Example: ``counted = run(run_state, phase, sources, fingerprint)``."""
    cfg, store, marks, plan = run.cfg, run.store, run.marks, run.plan
    restored = None
    if run.staging.resuming:
        restored = resume.count_state(store, phase.name, fp)
        store.drop_phase(phase.name)

    def save(state) -> None:
        run.kept = True
        resume.save_count_state(store, phase.name, state, fp)
        marks.done()

    checkpoints = dict(restored=restored, save=save, every=marks.every * resume.COUNT_EVERY)
    if run.ray_count is not None:  # the same PhaseCount and checkpoints, counted on a Ray cluster
        count = partial(run.ray_count, address=cfg.ray_address, **checkpoints, **run.ray_tuning)
    else:  # (the first phase's first file is being read already: start)
        count = partial(count_phase, **checkpoints, started=run.started)
    run.started = None
    set_readahead(plan.readahead_bytes if plan is not None else None)  # blocks of objects read ahead
    pc = count(sources, seed=cfg.seed, capacity=_phase_capacity(cfg, phase, plan),
               batch_bytes=plan.batch_bytes if plan is not None else BATCH_BYTES, specials=run.specials,
               threads=run.threads, report=run.report, tag=run.tag(phase), pattern=run.pattern)
    resume.check_unchanged(sources, fp, run.where(phase))
    if pc.regex_mb_s is not None:
        run.regex_mb_s.append(pc.regex_mb_s)
    table, used, warnings = pc.words, pc.used, []
    if plan is not None:  # the merge loop's arrays must fit the budget: drop the rarest words if not
        try:
            table, cut = fit_words(table, plan, run.merge_budget(phase), where=run.where(phase),
                                   budget=f"{cfg.name_of('budget')} {cfg.text_of('budget')}")
        except ConfigError as e:
            raise resume.start_over(e) from None
        warnings += [cut] if cut else []
    t_count = pc.seconds["count"]
    run.times["sample"] = run.times.get("sample", 0.0) + pc.seconds.get("sample", 0.0)
    docs = sum(u["docs"] for u in used.values())
    text_bytes = sum(u["bytes"] for u in used.values())
    if table.num_rows == 0:
        paths = ", ".join(redact(s.path) for s in phase.sources)
        n_files = sum(len(s.corpus.files) for s in sources)
        raise resume.start_over(InputError(
            f"{run.where(phase)}{paths}: the corpus is empty (no text in {n_files} file(s)); "
            "check the sources and --text-column"))
    state = {"fingerprint": fp, "warnings": warnings, "seconds_count": t_count, "docs": docs, "text_bytes": text_bytes}
    # the words in one piece, for the merge loop and the checkpoint alike
    counted = Counted.of_table(table, warnings, t_count, docs, text_bytes)
    parity, held_out = pc.parity, pc.held_out
    del table, pc
    words = pa.table({"word": counted.words, "count": counted.counts})
    resume.counted(run, lambda st, tokens=None: resume.save_counted(st, phase.name, words, parity, held_out, sources,
                                                                   used, state, tokens), t_count)
    run.take_parity(phase.name, parity, held_out)
    return counted
