"""The count stage's entry (``run``): a phase's sources in, its word table out (``Counted``).

Before any work the pipeline checks the in-memory sources and picks the engine (``engine``) and
resolves each phase's sources (``resolve``: a bad path fails there); per phase ``run`` reads,
samples, pre-tokenizes and counts them with the engine (:func:`.local.count_phase`, or Ray's),
checkpointing on the way, and cuts the word table to the budget.
Example: ``counted = count.run(spec, phase, count.resolve(spec, phase), fp, journal=j, pattern=DEFAULT,
specials=[], merges=500)``.
"""
from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, NamedTuple

import pyarrow as pa

from .. import resume
from ..budget import BudgetPlan, fit_words
from ..errors import ConfigError, InputError
from ..store import arrow_of
from .common import (BATCH_BYTES, Counted, CountState, Progress, capacity_split, doc_keys, phase_files,
                     took_every_document, whole_documents)
from .cuts import rule
from .local import Kept, ParitySample, Source, Started, count_phase, start_reading, start_streaming
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
__all__ = ["Counted", "Kept", "ParitySample", "REFERENCE_BYTES", "SMALL_BYTES", "SampleKey", "Share", "Source", "Started",
           "engine", "redact", "resolve", "run", "sample_key", "shares", "start"]


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
          pattern: Pattern, specials: list[str] = (), prepare: Callable | None = None) -> Started | TableAhead | None:
    """The first file of ``phase`` (the run's first, ``sources`` resolved) read from now on
    (:func:`.local.start_reading`) when that phase reads every document with the local engine on
    a fresh run, or samples them all and counts them as read (:func:`.local.start_streaming`); or,
    when its first source is a word-count table of one file with the usual
    columns, on a fresh run without a memory budget, that table (:class:`.tables.TableAhead`,
    ``specials``: the run's; ``prepare(words, counts)``: what the merge stage makes of its words
    first, made (and run, a job) in a thread of the reading and handed on as ``Counted.segmented`` when the phase
    merges exactly that table: :func:`toktok.merge.stage.laying_out`); else None. The pipeline calls it before it opens the run file, so
    the first batch is decoded (the table read) meanwhile, and hands it to :func:`run` (``started``).
    Example: ``count.start(spec, spec.phases[0], sources, None, DEFAULT).path``."""
    first = phase.sources[0]
    if first.kind == "counts":
        files = sources[0].corpus.files
        columns = (first.word_column or cfg.word_column, first.count_column or cfg.count_column)
        if not cfg.resume and plan is None and len(files) == 1 and columns == (WORD_COLUMN, COUNT_COLUMN):
            return TableAhead(files[0].path, pattern, specials, prepare)
        return None
    if cfg.engine == "ray" or cfg.resume:
        return None
    capacity = _phase_capacity(cfg, phase, plan)
    if capacity is None:
        return start_reading(sources, BATCH_BYTES, pattern)
    text = [s for s, c in zip(sources, phase.sources) if c.kind != "counts"]
    if len(text) == len(sources):  # (a phase that counts its sample as read: count_phase)
        return start_streaming(sources, capacity, plan.batch_bytes if plan is not None else BATCH_BYTES, pattern)
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


class SampleKey(NamedTuple):
    """What a sampled phase's sample depends on (:func:`sample_key`): ``base``, a digest of its text
    sources (each file's key, kind and fingerprint, their text column and weights), the seed, the
    reservoirs' capacities (:func:`~.common.capacity_split`) and the batch size (the steps a
    ``.txt`` file is sampled in); ``cut``, where its pattern cuts long documents (a named
    pattern's cut rule, else none; with its regex when a file is read in parts cut by it); and
    ``whole``: no file is read in pattern-cut parts (``.txt``), so the pieces of a sample that
    took every document join into the documents (:func:`~.common.whole_documents`)."""

    base: str
    cut: str
    whole: bool


class Share(NamedTuple):
    """A phase's sample as the run's phases share it (:func:`shares`): its ``key`` and the keys of
    the later phases that may take it instead of sampling again (``later``)."""

    key: SampleKey
    later: tuple[SampleKey, ...] = ()


def sample_key(cfg: RunSpec, phase: PhaseConfig, sources: list[Source], plan: BudgetPlan | None,
               pattern: Pattern) -> SampleKey | None:
    """The identity of the sample ``phase`` takes of its text ``sources`` (resolved, spelled as
    the run reads them) with ``pattern`` (:class:`SampleKey`); None when it reads every document,
    or reads data in memory.
    Example: ``sample_key(spec, spec.phases[0], sources, plan, DEFAULT).base``."""
    capacity = _phase_capacity(cfg, phase, plan)
    text = [s for s, c in zip(sources, phase.sources) if c.kind != "counts"]
    if capacity is None or not text or any(f.kind == "memory" for _src, f in phase_files(text)):
        return None  # (data in memory has no identity before it is read: its phases sample it each)
    keys = doc_keys(text)
    files = [[keys[f.path], f.kind, fp] for (_src, f), fp in zip(phase_files(text), resume.fingerprint(text))]
    parted = any(f.kind == "txt" for _src, f in phase_files(text))
    r = rule(pattern)
    cut = f"rule {r.kind}" if r is not None else "none" + (f" {pattern.regex}" if parted else "")
    ident = {"files": files, "sources": [[s.weight, s.corpus.text_column, s.corpus.bad_utf8, len(s.corpus.files)]
                                         for s in text],
             "seed": cfg.seed, "capacities": capacity_split(text, capacity)[0],
             "batch": plan.batch_bytes if plan is not None else BATCH_BYTES}
    base = hashlib.sha256(json.dumps(ident, sort_keys=True, default=str).encode()).hexdigest()[:32]
    return SampleKey(base, cut, not parted)


def shares(keys: list[SampleKey | None]) -> list[Share | None]:
    """Each phase's :class:`Share` from every phase's :func:`sample_key` (in phase order): the later
    phases with the same ``base``. Example: ``shares([k1, k2])[0].later == (k2,)`` when they match."""
    return [None if k is None else Share(k, tuple(j for j in keys[i + 1:] if j is not None and j.base == k.base))
            for i, k in enumerate(keys)]


def _serves(have: SampleKey, took_all: bool, want: SampleKey) -> bool:
    """Whether a sample taken as ``have`` says (``took_all``: it holds every document) is exactly
    the one a phase keyed ``want`` would take: the same documents cut the same way, or every
    document whole for a pattern that cuts none (its pieces joined: :func:`~.common.whole_documents`)."""
    return have.base == want.base and (have.cut == want.cut or
                                       (took_all and have.whole and want.cut == "none"))


def _kept_for_later(share: Share | None, used: dict) -> bool:
    """Whether a later phase can take this phase's sample (per-file statistics ``used``)."""
    return share is not None and any(_serves(share.key, took_every_document(used), k) for k in share.later)


def _earlier_sample(store, share: Share | None) -> tuple[CountState, SampleKey] | None:
    """The sample an earlier phase left in the run file for this one (``share``: its key), as the
    counting state to start from, when it is exactly the one this phase would take; with the key
    it was taken as. None otherwise."""
    if share is None:
        return None
    got = resume.shared_sample(store, share.key.base)
    if got is None:
        return None
    key, state = SampleKey(*got[0]), got[1]
    if not _serves(key, took_every_document(state.used), share.key):
        return None
    if key.cut != share.key.cut:  # the earlier phase cut long documents; this one takes them whole
        state.sample = whole_documents(state.sample)
    return state, key


def run(cfg: RunSpec, phase: PhaseConfig, sources: list[Source], fp: list, *, journal: Journal,
        pattern: Pattern, specials: list[str], merges: int, plan: BudgetPlan | None = None, threads: int = 1,
        report: Progress | None = None, started: Started | TableAhead | None = None,
        ray_count: Callable | None = None,
        ray_tuning: dict | None = None, segment: Callable | None = None, share: Share | None = None,
        reads: Kept | None = None) -> Counted:
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
    merge stage's first checkpoint when counting was short. A sampled phase's ``share``
    (:func:`shares`): it takes an earlier phase's sample from the run file when that is exactly
    the one it would take (no sample pass), and keeps its own there for a later phase that can
    take it (until that one is counted). The finished sample is stored in the background while
    counting goes on (:meth:`toktok.resume.Journal.save_behind`). A sampled phase whose documents
    all fit is counted as read, no sample stored (:func:`_engine`, ``reads``).
    Example: ``counted = run(spec, phase, sources, fp, journal=j, pattern=DEFAULT, specials=[], merges=500)``."""
    marks, where = journal.marks, cfg.where(phase)
    report = report or _silent
    restored, earlier, t_taken = _start_from(journal, phase.name, fp, where, share)
    checkpoints = dict(restored=restored, save=partial(_save, journal, phase.name, fp),
                       every=marks.every * resume.COUNT_EVERY)
    tables = [(s, c) for s, c in zip(sources, phase.sources) if c.kind == "counts"]  # word-count tables
    text = [s for s, c in zip(sources, phase.sources) if c.kind != "counts"]
    ahead = started if isinstance(started, TableAhead) else None  # (the first table, being read: start)
    started = None if ahead is not None else started
    count, keep = _engine(cfg, ray_count, ray_tuning, checkpoints, started, share, reads)
    set_readahead(plan.readahead_bytes if plan is not None else None)  # blocks of objects read ahead
    pc = count(text, seed=cfg.seed, capacity=_phase_capacity(cfg, phase, plan),
               batch_bytes=plan.batch_bytes if plan is not None else BATCH_BYTES, specials=specials,
               threads=threads, report=report, tag=cfg.tag(phase), pattern=pattern) if text else None
    del checkpoints, count, restored, reads  # (a sample taken from an earlier phase goes now)
    earlier = None if earlier is None else earlier[1]
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
    counted.regex_mb_s, counted.sample_seconds = pc.regex_mb_s, pc.seconds.get("sample", 0.0) + t_taken
    counted.segmented = ids if ids is not None else pc.prepared  # (by the cut, or as the table was read)
    del table, pc, ids
    words = pa.table({"word": counted.words, "count": arrow_of(counted.counts)})
    counted.kept, keep = _handed_on(keep, share, used), None
    kept = _kept_samples(share, earlier, used)
    journal.counted(lambda st, tokens=None, merged=None: resume.save_counted(
        st, phase.name, words, parity, held_out, sources, used, state, tokens, merged=merged, **kept), t_count)
    return counted


def _engine(cfg: RunSpec, ray_count: Callable | None, ray_tuning: dict | None, checkpoints: dict,
            started: Started | None, share: Share | None, reads: Kept | None) -> tuple[Callable, Kept | None]:
    """The engine's ``count_phase`` with its keywords (``checkpoints``: ``restored``, ``save``,
    ``every``), and the :class:`~.local.Kept` that takes the texts the local engine reads when it
    counts a sampled phase whose documents all fit as it reads them (no sample is stored) and a
    later phase takes its sample (None otherwise): handed on (``Counted.kept``), that phase counts
    them (``reads``, fresh runs only) instead of reading the files again. ``started``: the first
    phase's first file, being read already (:func:`start`)."""
    if ray_count is not None:  # the same PhaseCount and checkpoints, counted on a Ray cluster
        return partial(ray_count, address=cfg.ray_address, **checkpoints, **(ray_tuning or {})), None
    # (a .txt file's reads depend on the pattern)
    fresh = checkpoints["restored"] is None and share is not None and share.key.whole
    keep = Kept(share.key) if fresh and share.later else None
    if reads is not None and not (fresh and reads.complete and reads.key.base == share.key.base):
        reads.clear()  # (not this phase's documents: they go now)
        reads = None
    return partial(count_phase, **checkpoints, started=started, keep=keep, reads=reads), keep


def _handed_on(keep: Kept | None, share: Share | None, used: dict) -> Kept | None:
    """The texts a phase read (``keep``, complete) when a later phase takes its sample; else they go."""
    if keep is not None and keep.complete and _kept_for_later(share, used):
        return keep
    if keep is not None:
        keep.clear()
    return None


def _start_from(journal: Journal, phase: str, fp: list, where: str,
                share: Share | None) -> tuple[CountState | None, tuple | None, float]:
    """Where counting ``phase`` starts: (the interrupted run's counting checkpoint on ``--resume``,
    else an earlier phase's sample when it is this one's: :func:`_earlier_sample`, or None; that
    earlier sample's (state, key) or None; the seconds taking it took, this phase's sampling)."""
    store, restored = journal.store, None
    if journal.resuming:
        restored = resume.count_state(store, phase, fp, where)
        store.drop_phase(phase)
    t0 = time.perf_counter()
    earlier = _earlier_sample(store, share) if restored is None else None
    store.let_go_samples()  # (this phase took its own, if any: no other stays in memory)
    return (restored if earlier is None else earlier[0]), earlier, time.perf_counter() - t0


def _save(journal: Journal, phase: str, fp: list, state: CountState) -> None:
    """A counting checkpoint of ``phase``: the finished sample stored while counting goes on
    (:meth:`~toktok.resume.Journal.save_behind`), the counts so far of a full read at once."""
    if state.sample is not None:
        journal.save_behind(lambda st: resume.save_count_state(st, phase, state, fp))
    else:
        journal.save(lambda st: resume.save_count_state(st, phase, state, fp))


def _kept_samples(share: Share | None, earlier: SampleKey | None, used: dict) -> dict:
    """What the "counted" checkpoint does with the samples (:func:`toktok.resume.save_counted`'s
    ``keep_sample`` and ``shared_done``): a phase's own sample stays in the run file when a later
    phase takes it; an earlier phase's that it took (``earlier``: its key) goes once no later
    phase takes it."""
    if earlier is None:
        return {"keep_sample": share.key if _kept_for_later(share, used) else None, "shared_done": None}
    later = _kept_for_later(Share(earlier, share.later), used)
    return {"keep_sample": None, "shared_done": None if later else share.key.base}


def _silent(stage: str, done: int, total: int | None) -> None:
    """No progress shown."""
