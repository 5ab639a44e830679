"""The count stage's entry (``run``): a phase's sources in, its word table out (``Counted``).

Before any work the pipeline checks the in-memory sources and picks the engine (``engine``) and
resolves each phase's sources (``resolve``: a bad path fails there); per phase ``run`` reads,
samples, pre-tokenizes and counts them with the engine (:func:`.local.count_phase`, or Ray's),
checkpointing on the way, and cuts the word table to the budget.
Example: ``counted = count.run(spec, phase, count.resolve(spec, phase), fp, journal=j, pattern=DEFAULT,
specials=[], merges=500)``.
"""
from __future__ import annotations

import time
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING

import pyarrow as pa

from .. import resume
from ..budget import BudgetPlan, fit_words
from ..errors import ConfigError, InputError
from .common import BATCH_BYTES, Counted, Progress
from .local import ParitySample, Source, Started, count_phase, start_reading
from .memory import check_sources, corpus_of
from .scan import REFERENCE_BYTES, SMALL_BYTES, count_path  # noqa: F401  (the run says how it counted)
from .read import Corpus, read_corpus
from .sources import read_once, resolve_sources
from .tables import COUNT_COLUMN, WORD_COLUMN, TableAhead, with_tables
from .remote import redact, set_readahead

if TYPE_CHECKING:
    from ..patterns import Pattern
    from ..resume import Journal
    from ..spec import PhaseConfig, RunSpec

#: What the pipeline reads besides the entries: the small and tiny runs' sizes, the parity
#: sample and resolved source types, and how a source's URL is shown.
__all__ = ["Counted", "ParitySample", "REFERENCE_BYTES", "SMALL_BYTES", "Source", "Started", "engine", "redact",
           "resolve", "run", "start"]


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
    """Resolve every source of ``phase``, each file read once in it (:func:`.sources.read_once`);
    fails on a bad path before any work. Example: ``resolve(spec, spec.phases[0])[0].corpus.files``."""
    out = [Source(corpus_of(src, cfg.text_column, cfg.bad_utf8, resume=cfg.resume) if src.kind == "memory" else
                  tables_of(src.path) if src.kind == "counts" else
                  read_corpus([src.path], text_column=src.text_column or cfg.text_column, bad_utf8=cfg.bad_utf8,
                              storage_options=cfg.source_options(src)),
                  src.weight) for src in phase.sources]
    read_once(out, phase.sources, cfg.where(phase))
    return out


def tables_of(path: str) -> Corpus:
    """The files of a word-count table source (``kind`` "counts"), resolved, read later
    (:func:`toktok.count.tables.read_counts`). Example: ``tables_of("counts/*.parquet").files``."""
    skipped: list[str] = []
    corpus = Corpus(resolve_sources([path], skipped=skipped))
    corpus.warnings = skipped
    return corpus


def start(cfg: RunSpec, phase: PhaseConfig, sources: list[Source], plan: BudgetPlan | None,
          pattern: Pattern, specials: list[str] = ()) -> Started | TableAhead | None:
    """The first file of ``phase`` (the run's first, ``sources`` resolved) read from now on
    (:func:`.local.start_reading`) when that phase reads every document with the local engine on
    a fresh run; or, when its first source is a word-count table of one file with the usual
    columns, on a fresh run without a memory budget, that table (:class:`.tables.TableAhead`,
    ``specials``: the run's); else None. The pipeline calls it before it opens the run file, so
    the first batch is decoded (the table read) meanwhile, and hands it to :func:`run` (``started``).
    Example: ``count.start(spec, spec.phases[0], sources, None, DEFAULT).path``."""
    first = phase.sources[0]
    if first.kind == "counts":
        files = sources[0].corpus.files
        columns = (first.word_column or cfg.word_column, first.count_column or cfg.count_column)
        if not cfg.resume and plan is None and len(files) == 1 and columns == (WORD_COLUMN, COUNT_COLUMN):
            return TableAhead(files[0].path, pattern, specials)
        return None
    if cfg.engine != "ray" and not cfg.resume and _phase_capacity(cfg, phase, plan) is None:
        return start_reading(sources, BATCH_BYTES, pattern)
    return None


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


def run(cfg: RunSpec, phase: PhaseConfig, sources: list[Source], fp: list, *, journal: Journal,
        pattern: Pattern, specials: list[str], merges: int, plan: BudgetPlan | None = None, threads: int = 1,
        report: Progress | None = None, started: Started | TableAhead | None = None,
        ray_count: Callable | None = None,
        ray_tuning: dict | None = None, segment: Callable | None = None) -> Counted:
    """The count stage's entry (the pipeline's step 3): read, sample (when the budget says so),
    pre-tokenize with ``pattern`` (``specials`` split off) and count one phase's ``sources``
    (resolved, with their fingerprint ``fp``: :func:`toktok.resume.fingerprint`) with the local
    engine or Ray's (``ray_count``, :func:`engine`, and its ``ray_tuning``), then cut the word
    table to the budget's ``plan`` (:func:`toktok.budget.fit_words`; ``merges``: the new tokens
    the phase will learn; ``segment``: the segmentation of the vocabulary it starts from, None
    from the 256 bytes: :func:`toktok.merge.stage.segmenter`). Returns the merge stage's input:
    the phase's words and counts with its parity sample, held-out pieces and what counting found
    (:class:`~.common.Counted`: with the ids of the words kept when the cut segmented them).
    Reads the sources (``started``: the first file, read since :func:`start`), from the
    interrupted run's counting checkpoint on ``--resume``; writes through ``journal`` counting
    checkpoints on the way (either engine: at file boundaries every ``COUNT_EVERY`` x the merge
    loop's interval, a snapshot of the counts so far; and the finished sample), then the phase's
    words, inputs and parity sample: the "counted" checkpoint (:meth:`toktok.resume.Journal.counted`),
    stored while the merge stage lays the words out when the run has no budget, or kept for the
    merge stage's first checkpoint when counting was short.
    Example: ``counted = run(spec, phase, sources, fp, journal=j, pattern=DEFAULT, specials=[], merges=500)``."""
    store, marks, where = journal.store, journal.marks, cfg.where(phase)
    report = report or _silent
    restored = None
    if journal.resuming:
        restored = resume.count_state(store, phase.name, fp, where)
        store.drop_phase(phase.name)

    def save(state) -> None:
        journal.save(lambda st: resume.save_count_state(st, phase.name, state, fp))

    checkpoints = dict(restored=restored, save=save, every=marks.every * resume.COUNT_EVERY)
    tables = [(s, c) for s, c in zip(sources, phase.sources) if c.kind == "counts"]  # word-count tables
    text = [s for s, c in zip(sources, phase.sources) if c.kind != "counts"]
    ahead = started if isinstance(started, TableAhead) else None  # (the first table, being read: start)
    started = None if ahead is not None else started
    if ray_count is not None:  # the same PhaseCount and checkpoints, counted on a Ray cluster
        count = partial(ray_count, address=cfg.ray_address, **checkpoints, **(ray_tuning or {}))
    else:  # (the first phase's first file may be being read already: start)
        count = partial(count_phase, **checkpoints, started=started)
    set_readahead(plan.readahead_bytes if plan is not None else None)  # blocks of objects read ahead
    pc = count(text, seed=cfg.seed, capacity=_phase_capacity(cfg, phase, plan),
               batch_bytes=plan.batch_bytes if plan is not None else BATCH_BYTES, specials=specials,
               threads=threads, report=report, tag=cfg.tag(phase), pattern=pattern) if text else None
    said: list[str] = []
    if tables:  # summed with the text's words (toktok.count.tables)
        pc, said = with_tables(pc, *zip(*tables), pattern=pattern, specials=specials, seed=cfg.seed,
                               word_column=cfg.word_column, count_column=cfg.count_column, ahead=ahead)
    resume.check_unchanged(sources, fp, where)
    table, used, warnings, ids = pc.words, pc.used, said, None
    t_cut = time.perf_counter()
    if plan is not None:  # the merge loop's arrays must fit the budget: drop the rarest words if not
        try:
            table, cut, ids = fit_words(table, plan, merges, where=where, segment=segment,
                                        budget=f"{cfg.name_of('budget')} {cfg.text_of('budget')}")
        except ConfigError as e:
            raise resume.start_over(e) from None
        warnings += [cut] if cut else []
    t_count = pc.seconds["count"] + time.perf_counter() - t_cut  # (with the cut's segmentation, if any)
    docs = sum(u["docs"] for u in used.values())
    text_bytes = sum(u["bytes"] for u in used.values())
    if table.num_rows == 0:
        paths = ", ".join(redact(s.path) for s in phase.sources)
        n_files = sum(len(s.corpus.files) for s in sources)
        raise resume.start_over(InputError(
            f"{where}{paths}: the corpus is empty (no text in {n_files} file(s)); "
            "check the sources and --text-column"))
    state = {"fingerprint": fp, "warnings": warnings, "seconds_count": t_count, "docs": docs, "text_bytes": text_bytes}
    # the words in one piece, for the merge loop and the checkpoint alike
    counted = Counted.of_table(table, warnings, t_count, docs, text_bytes)
    counted.parity, counted.held_out = parity, held_out = pc.parity, pc.held_out
    counted.regex_mb_s, counted.sample_seconds = pc.regex_mb_s, pc.seconds.get("sample", 0.0)
    counted.segmented = ids  # (the words kept, segmented by the cut: the merge loop's)
    del table, pc, ids
    words = pa.table({"word": counted.words, "count": counted.counts})
    journal.counted(lambda st, tokens=None: resume.save_counted(st, phase.name, words, parity, held_out, sources,
                                                               used, state, tokens), t_count)
    return counted


def _silent(stage: str, done: int, total: int | None) -> None:
    """No progress shown."""
