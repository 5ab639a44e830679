"""Resume: what ``--resume`` needs to continue an interrupted run to the files of an uninterrupted one.

Owns the run's identity (the options a ``--resume`` must repeat, paths resolved however they are
spelled), the fingerprints of its inputs (a file by size and modification time, an object in a
store by size and ETag, data in memory by its digest), the re-spelling of the input files as the
interrupted run named them, the checkpoints (what is stored and when: the counting state at file
boundaries and the finished sample, each phase's word table once counted, the merges every few
seconds, each phase once merged) and the replay check of the merges learned again. It knows
nothing of the pipeline's state: ``open_run`` (step 2) opens the staging folder and the run file
and returns them with the :class:`Journal`, the service through which the stages write the run
file and its checkpoints (``checkpoint``, ``counted``, ``settle``: a large checkpoint stored
beside the next steps, then waited for); ``restore`` returns what the interrupted run counted or
merged of a phase; everything it stores lives in the run file (:mod:`toktok.store`).
The checkpoints' timing is an argument (:class:`Checkpoints`), and so is what happens after each
(``on_checkpoint``: fault-injection tests kill the process there).
Example: ``Checkpoints(every=0, step=10, on_checkpoint=print)``.
"""
from __future__ import annotations

import json
import os
import platform
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, NamedTuple

import numpy as np
import pyarrow as pa

from . import __version__
from .count.common import PARITY_SCHEMA, Counted, dist_version, polars_version
from .count.local import CountState, Source
from .errors import ConfigError, InputError, ParityError, ToktokError
from .rundir import RUN_FILE, Staging, check_output, open_staging
from .store import RunStore
from .summary import PhaseSummary

if TYPE_CHECKING:
    from .budget import BudgetPlan
    from .merge import MergeResult
    from .patterns import Pattern
    from .spec import PhaseConfig, RunSpec
    from .warmstart import Base

#: Seconds between checkpoints of the merge loop.
CHECKPOINT_SECONDS = 2.0
#: Counting checkpoints (local engine, full reads) come at file boundaries this many times less often.
COUNT_EVERY = 15
#: Identity of a run: a ``--resume`` must be given the same values.
IDENTITY = ("sources", "merges", "special_tokens", "text_column", "bad_utf8", "hardcoded", "seed",
            "phases", "warm_start", "tiktoken_name", "budget", "working_set_mb", "pattern", "vocab_size",
            "pad_to_multiple_of", "max_token_length", "min_frequency", "word_counts", "word_column", "count_column")


@dataclass
class Checkpoints:
    """When a run checkpoints, and what it does after each one.

    The merge loop checkpoints every ``every`` seconds; with ``every=0`` deterministically, after
    every ``step`` new tokens. Counting checkpoints come every ``every * COUNT_EVERY`` seconds at
    file boundaries (and once after a sample pass). ``on_checkpoint(n)`` is called right after the
    n-th checkpoint is stored (n = 1, 2, ...), e.g. by a test that kills the process there.
    ``counted_within``: see :func:`counted`.
    """

    every: float = CHECKPOINT_SECONDS
    step: int = 1
    on_checkpoint: Callable[[int], None] | None = None
    #: A phase counted in less than this many seconds keeps its "counted" checkpoint due
    #: (:func:`counted`); None: ``every * COUNT_EVERY``, the counting checkpoints' interval.
    counted_within: float | None = None
    n: int = field(default=0, init=False)

    def done(self) -> None:
        """One more checkpoint is stored."""
        self.n += 1
        if self.on_checkpoint is not None:
            self.on_checkpoint(self.n)


class Pending:
    """A checkpoint being stored by ``save(store)`` in a thread of its own, on a second connection
    to the run file, while the run goes on: the merge stage's segmentation and layout after the
    "counted" checkpoint (not the loop: its tables are allocated once it is stored), the export
    and verification after the "merged" one (DuckDB writes without the GIL, on the core
    those leave idle). The run file holds it, all or nothing, once ``wait`` returns; until then
    the run reads nothing it writes and counts it as no checkpoint.
    Example: ``Pending(lambda st: st.put_meta("k", 1), store).wait()``."""

    def __init__(self, save: Callable[[RunStore], None], store: RunStore, due: Callable[..., None] | None = None) -> None:
        self.due = due  # the due "counted" checkpoint this one stores too (counted), if any
        self._store = store.cursor()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._save, args=(save,), name="toktok-checkpoint", daemon=True)
        self._thread.start()

    def _save(self, save: Callable[[RunStore], None]) -> None:
        try:
            save(self._store)
        except BaseException as e:  # raised by wait(), in the run's thread
            self._error = e

    def wait(self) -> None:
        """Block until the checkpoint is stored; raise what storing it raised."""
        self._thread.join()
        self._store.con.close()
        if self._error is not None:
            raise self._error


def start_over(e: ToktokError) -> ToktokError:
    """Mark ``e`` as an error whose fix changes the options a ``--resume`` must repeat (or the
    inputs): what the run kept is of no use to a later run, so it is not kept."""
    e.start_over = True
    return e


def abandon(e: BaseException, staging: Staging, kept: bool) -> None:
    """After a failed run: keep what a later ``--resume`` can continue from (a phase counted, or
    the interrupted run being resumed) and say so in the error; a run that failed before its first
    checkpoint (``kept`` false) leaves nothing behind, nor does one whose fix changes the options
    that ``--resume`` must be given unchanged."""
    staging.release()
    over = getattr(e, "start_over", False)
    if not kept or (over and not staging.resuming):
        staging.discard()
    elif isinstance(e, ToktokError) and e.args:
        note = (f"the interrupted run in {staging.path} cannot continue past this: start over with --force" if over
                else f"the progress so far is kept in {staging.path}: fix this and rerun with --resume")
        e.args = (f"{e.args[0]} ({note})", *e.args[1:])


# --- the journal: the run file as the steps write to it -----------------------------------------


class Journal:
    """The run file as the stages write to it, with its checkpoints: the one service the count,
    merge and insight stages share (they take it as an argument; the pipeline opens it, step 2).

    ``store`` is the run file (:class:`~toktok.store.RunStore`), ``marks`` when the run
    checkpoints (:class:`Checkpoints`). A stage stores a large checkpoint with :meth:`checkpoint`
    (beside the next steps, :class:`Pending`, or at once when ``inline``, under a memory budget,
    unless what it writes is alive meanwhile anyway),
    a counted phase's with :meth:`counted` (kept due for the merge loop's first checkpoint when
    counting was short), stores a small one at once with :meth:`save`, and waits
    for the one being stored with :meth:`settle`. ``kept``: the run file holds a checkpoint, so a
    failed run leaves it for ``--resume`` (:func:`abandon`).
    Example: ``j = Journal(store, Checkpoints()); j.checkpoint(save); j.settle()``."""

    def __init__(self, store: RunStore, marks: Checkpoints, *, resuming: bool = False, inline: bool = False) -> None:
        self.store, self.marks, self.resuming, self.inline = store, marks, resuming, inline
        self.kept = resuming  # a resumed run's staging folder is kept whatever happens
        self.pending: Pending | None = None  # the checkpoint being stored meanwhile (settle)
        self.due: Callable[..., None] | None = None  # a "counted" checkpoint not stored yet (counted)

    @property
    def busy(self) -> bool:
        """A checkpoint is being stored in the background (:meth:`settle` waits for it)."""
        return self.pending is not None

    def save(self, save: Callable[[RunStore], None]) -> None:
        """A small checkpoint (a counting one) stored now by ``save(store)``, in this thread (after
        the one being stored in the background, if any)."""
        self.settle()
        self.kept = True
        save(self.store)
        self.marks.done()

    def save_behind(self, save: Callable[[RunStore], None]) -> None:
        """A counting checkpoint (a finished sample) stored by ``save(store)`` in the background
        (:class:`Pending`, after the one being stored, if any), under a memory budget too: the
        count goes on meanwhile, and :meth:`settle` waits for it before the next checkpoint (or the
        next phase). It counts as a checkpoint once stored; a kill before leaves the run as it was
        without it (it is written all or nothing: :meth:`toktok.store.RunStore.put_count_state`)."""
        self.settle()
        self.pending = Pending(save, self.store)

    def checkpoint(self, save: Callable[[RunStore], None], due: Callable[..., None] | None = None, *,
                   beside: bool = False) -> None:
        """Store a phase's large checkpoint (``save(store)``): beside the steps that follow
        (:class:`Pending`, waited for by :meth:`settle`) when the run has no memory budget, or when
        ``beside`` says that what it writes stays alive meanwhile anyway; else waited for at once
        under a budget (``inline``), whose plan does not provide for the word table a write keeps
        alive beside the next step's allocations (DuckDB's own memory is its share of the plan,
        its memory limit). ``due``: the due "counted" checkpoint (``self.due``) that ``save``
        stores too: no longer due once it is stored (if storing fails, the failed run stores it:
        :meth:`store_due`)."""
        self.settle()  # (a counting checkpoint stored in the background: before this one)
        self.pending = Pending(save, self.store, due)
        if self.inline and not beside:
            self.settle()

    def counted(self, save: Callable[..., None], seconds: float) -> None:
        """A phase's "counted" checkpoint (``save(store, tokens=None)``, :func:`save_counted`):
        stored beside the merge stage (:meth:`checkpoint`, ``beside``: under a budget too), or, when counting took less than the counting
        checkpoints' interval (``every * COUNT_EVERY`` seconds: a crash may cost that much
        counting anyway) and the run has no memory budget, kept due (``self.due``) for the merge
        stage: its first checkpoint stores it first (:meth:`store_due`), or, when the loop ends
        before one, the "merged" checkpoint stores it with the words' tokens (:func:`save_merged`),
        one write of the words instead of two (0.08 s less before the loop and 0.05 s less in
        DuckDB after it, for the 706k words of 100 MB of text); a run that fails or is interrupted
        before either stores it then (only a kill loses it); the run has it stored beside the loop
        once the loop's first work is done (:meth:`store_due_beside`). A resumed run, and
        ``every <= 0``, store it as before (``Checkpoints.counted_within`` sets the limit instead)."""
        marks = self.marks
        within = marks.every * COUNT_EVERY if marks.counted_within is None else marks.counted_within
        if not self.inline and not self.resuming and seconds < within:
            self.due = save
            return
        # under a budget too: the words it writes are the merge loop's, alive until it ends
        self.checkpoint(save, beside=True)

    def before_loop(self) -> None:
        """A merge loop is about to allocate its tables: without a memory budget the checkpoint
        being stored is waited for here (DuckDB's write then never adds to the loop's peak); under
        one it goes on beside the loop, inside DuckDB's share of the plan (its memory limit)."""
        if not self.inline:
            self.settle()

    def store_due_beside(self) -> None:
        """The "counted" checkpoint kept due (:meth:`counted`), if any, stored from now on beside
        the merge loop (:class:`Pending`, on the core the loop leaves idle once its first rounds,
        the largest, are done): the "merged" checkpoint then writes only the words' tokens
        (:meth:`~toktok.store.RunStore.set_tokens`), not the words, on the run's longest path
        after the loop. Still due until stored (:meth:`settle`): a run that fails meanwhile
        stores it then (:meth:`store_due`)."""
        if self.due is not None and self.pending is None:
            self.pending = Pending(self.due, self.store, self.due)

    def take_due(self) -> Callable[..., None] | None:
        """The "counted" checkpoint still due, for the next checkpoint to store with its own
        (:func:`save_merged`'s ``due``), or None; one being stored beside the loop
        (:meth:`store_due_beside`) is waited for first, and so is due no longer."""
        if self.due is not None and self.pending is not None and self.pending.due is self.due:
            self.settle(release=False)  # (the merged checkpoint, written next, writes out DuckDB's blocks)
        return self.due

    def store_due(self) -> None:
        """The "counted" checkpoint kept due (:meth:`counted`), if any, stored now, after the one
        being stored in the background."""
        self.settle()
        save, self.due = self.due, None
        if save is not None:
            save(self.store)
            self.kept = True
            self.store.release_memory()
            self.marks.done()

    def settle(self, *, release: bool = True) -> None:
        """The checkpoint being stored in the background (:class:`Pending`), if any, stored:
        counted as a checkpoint from here on, and DuckDB's blocks cached by the write given back
        (not with ``release=False``: the run file is written out and closed next, the run's peak
        long past). Called before anything that reads it or writes after it (the first merge
        checkpoint, the next phase, the insight step, publishing) and when the run fails."""
        pending, self.pending = self.pending, None
        if pending is not None:
            pending.wait()
            if pending.due is not None and self.due is pending.due:
                self.due = None
            self.kept = True
            if release:
                self.store.release_memory()
            self.marks.done()


# --- the run's start and what an interrupted run left ---------------------------------------------


def check_out(cfg, inputs: list[tuple[str, str]]) -> None:
    """The output folder checked before any work (:func:`toktok.rundir.check_output`; ``inputs``:
    what publishing must not replace): step 2 checks it again when it opens the staging folder.
    Example: ``check_out(spec, [])``."""
    check_output(cfg.layout, cfg.force, cfg.resume, inputs)


class Opened(NamedTuple):
    """What :func:`open_run` opened: the staging folder, the run file as a :class:`Journal`, and
    each phase's fingerprint (:func:`fingerprint`)."""

    staging: Staging
    journal: Journal
    fingerprints: list[list[list]]


def open_run(cfg: RunSpec, plans: list[list[Source]], marks: Checkpoints, *, inputs: list[tuple[str, str]],
             plan: BudgetPlan | None, threads: int, pattern: Pattern, base: Base | None = None,
             hardcoded: int = 0, by_phase: dict[str, Pattern] | None = None) -> Opened:
    """The pipeline's step 2: the staging folder (a new one, or the interrupted run's with
    ``--resume``: :func:`toktok.rundir.open_staging`; ``inputs``: what publishing must not
    replace) and the run file in it, DuckDB limited to the budget's share (``plan``) else to
    ``memory_limit``, and what it records before any phase: on ``--resume`` the check that this
    is the interrupted run (:func:`begin`; the files of ``plans`` take its spelling); the inputs'
    fingerprints, the budget's plan, the config, versions, seed, ``pattern`` (the tokenizer's; with
    ``by_phase``, each phase's too), start time and warm-start ``base`` (with the ``hardcoded``
    tokens added to it). On failure nothing is left
    behind, or the interrupted run stays as it was (:func:`abandon`).
    Example: ``open_run(spec, plans, Checkpoints(), inputs=[], plan=None, threads=1, pattern=DEFAULT)``."""
    staging = open_staging(cfg.layout, cfg.force, cfg.resume, inputs)
    try:
        if plan is not None:
            limit, shown = plan.duckdb_bytes, f"{plan.duckdb_bytes >> 20}MiB"
        else:
            limit, shown = cfg.memory_limit, cfg.text_of("memory_limit")
        store = RunStore.create(staging.path / RUN_FILE, memory_limit=limit, threads=threads, limit_shown=shown)
        with store.transaction():  # what the run file records before any phase, in one commit
            fingerprints = begin(store, cfg, plans, staging.resuming)
            store.put_metas(_opening_meta(cfg, plan, pattern, base, hardcoded, staging.resuming, by_phase))
    except BaseException as e:
        abandon(e, staging, staging.resuming)
        raise
    return Opened(staging, Journal(store, marks, resuming=staging.resuming, inline=plan is not None), fingerprints)


def _opening_meta(cfg: RunSpec, plan: BudgetPlan | None, pattern: Pattern, base: Base | None, hardcoded: int,
                  resuming: bool, by_phase: dict[str, Pattern] | None = None) -> dict:
    meta = {"budget": plan.to_dict()} if plan is not None else {}
    meta.update({
        "config": cfg.to_dict(), "versions": _versions(), "seed": str(cfg.seed),
        "pattern": {**pattern.to_dict(), "given": cfg.written.get("pattern"),
                    "from": "warm start" if base is not None and base.pattern is not None else
                    "option" if cfg.pattern is not None else "default",
                    **({"by_phase": {k: p.to_dict() for k, p in by_phase.items()}} if by_phase else {})},
        "resumed" if resuming else "started": time.strftime("%Y-%m-%dT%H:%M:%S%z")})
    if base is not None:
        meta["warm_start"] = {**base.summary(), "hardcoded_added": hardcoded}
    return meta


def _versions() -> dict[str, str]:
    # Numba is imported only when a kernel runs, Polars by large ones, tokenizers in HF's own process
    # for a large tokenizer.json (importing it here: ~20 ms of every run's start), tiktoken by the
    # check after the loop (here: ~7 ms of the run's start)
    def version(name: str) -> str:  # (from its dist-info folder's name: importlib.metadata costs ~25 ms)
        found = dist_version([name], name)
        if found is None:
            from importlib.metadata import version as found_by

            found = found_by(name)
        return found

    return {
        "toktok": __version__, "python": sys.version.split()[0], "platform": platform.platform(),
        "polars": polars_version(), "duckdb": version("duckdb"),
        "numba": version("numba"),
        "numpy": np.__version__, "tiktoken": version("tiktoken"), "tokenizers": version("tokenizers"),
    }


class Restored(NamedTuple):
    """What :func:`restore` took from the run file of how far the interrupted run got in a phase
    (``stage``: ``"counted"`` or ``"merged"``): its parity sample and held-out pieces; a counted
    phase's word table (``counted``); a merged phase's new tokens (ids in order after the
    vocabulary before it), the merges that learned them (``merges``, reused ones included), its
    summary and warnings."""

    stage: str
    parity: pa.Table
    held_out: pa.Table | None
    counted: Counted | None = None
    new_tokens: list[bytes] = []
    merges: int = 0
    summary: PhaseSummary | None = None
    warnings: list[str] = []


def restore(journal: Journal, phase: PhaseConfig, fp: list, where: str = "") -> Restored | None:
    """What the interrupted run did of ``phase`` (the pipeline's steps 3-4 on ``--resume``), read
    from the run file: a merged phase's new tokens, parity sample, summary and warnings, or a
    counted phase's word table and parity sample (to merge again); None when it got not that far,
    or the run is not resumed. ConfigError (``where``: the phase in messages) when an input
    changed since (:func:`phase_checkpoint`).
    Example: ``got = restore(journal, phase, fp); got is None or got.stage in ("counted", "merged")``."""
    if not journal.resuming:
        return None
    store = journal.store
    cp = phase_checkpoint(store, phase.name, fp, where)
    if cp is None:
        return None
    parity, held_out = store.parity_of(phase.name).cast(PARITY_SCHEMA), held_out_of(store, phase.name)
    if cp["stage"] == "counted":
        table = store.words_of(phase.name)
        counted = Counted.of_table(table, cp["warnings"], cp["seconds_count"], cp["docs"], cp["text_bytes"])
        return Restored("counted", parity, held_out, counted=counted)
    m = store.merges_of(phase.name)
    new = [t for t, r in zip(m["token"].to_pylist(), m["reused"].to_pylist()) if not r]
    return Restored("merged", parity, held_out, new_tokens=new, merges=m.num_rows,
                    summary=PhaseSummary(**cp["summary"]), warnings=list(cp["warnings"]))


# --- identity and fingerprints -------------------------------------------------------------------


def _resolved(path):
    """A source path as the file, folder or pattern it names: ``./big/`` and ``big`` are one."""
    if not isinstance(path, str) or "://" in path:
        return path
    p = os.path.expanduser(path)
    if os.path.exists(p):
        return os.path.realpath(p)
    return os.path.normpath(os.path.abspath(p))


def identity(cfg: RunSpec) -> dict:
    """What a ``--resume`` must be given unchanged, with every path resolved (see ``_resolved``)."""
    ident = json.loads(json.dumps({k: cfg.to_dict().get(k) for k in IDENTITY}, default=str))
    ident["sources"] = [_resolved(s) for s in ident.get("sources") or []]
    for ph in ident.get("phases") or []:
        for src in ph.get("sources") or []:
            src["path"] = _resolved(src.get("path"))
    if ident.get("warm_start") is not None:
        ident["warm_start"] = _resolved(ident["warm_start"])
    return ident


def _check_same_run(store: RunStore, cfg: RunSpec) -> None:
    """``--resume`` continues only the run it was given: same sources (as resolved paths, however
    spelled), merges, seed, budget, ..."""
    now = identity(cfg)
    stored = store.get_meta("identity")
    if stored is None:  # killed before its first write: nothing to continue, nothing to compare
        store.put_meta("identity", now)
        return
    old = json.loads(stored)
    for k in IDENTITY:
        if old.get(k) != now.get(k):
            raise ConfigError(f"--resume: {k} was {_typed(old.get(k))} in the interrupted run and is {_typed(now.get(k))} "
                              "now; pass the same options (or start over with --force)")


def _typed(value) -> str:
    """A recorded option as typed: a str in quotes with its backslashes single (a regex), else its repr."""
    from .patterns import _shown

    return _shown(value, 80) if isinstance(value, str) else repr(value)


def fingerprint(sources: list[Source]) -> list[list]:
    """The files a phase reads as (path, size, modification time), objects in a store as (URL,
    size, ETag): a resumed phase must find them unchanged (data in memory: its name, kind, rows and
    digest, ``toktok.count.memory``)."""
    out = []
    for src in sources:
        for f in src.corpus.files:
            if f.kind == "memory":
                out.append(f.fingerprint())
                continue
            if f.etag is not None:
                out.append([f.path, f.size, f.etag])
                continue
            try:
                mtime = os.stat(f.path).st_mtime_ns
            except OSError:
                mtime = None
            out.append([f.path, f.size, mtime])
    return out


def check_unchanged(sources: list[Source], fp: list[list], where: str = "") -> None:
    """After a phase read its sources: each local file must still have the size it was listed
    with and the modification time of ``fp`` (:func:`fingerprint`), else the run trained on text
    written while it read (a file appended to): InputError naming the file."""
    files = [f for src in sources for f in src.corpus.files]
    for f, (path, _size, mtime) in zip(files, ([x[0], x[1], x[-1]] for x in fp)):
        if f.kind == "memory" or f.etag is not None or mtime is None:
            continue
        try:
            st = os.stat(f.path)
        except OSError:
            continue  # gone: what was read was whole; a --resume names it
        if (st.st_size, st.st_mtime_ns) != (f.size, mtime):
            raise start_over(InputError(
                f"{where}{path}: changed while the run read it ({f.size:,} bytes when listed, {st.st_size:,} "
                "now); rerun once it is complete, or train on a copy"))


def _respell(plans: list[list[Source]], stored: str | None) -> None:
    """Give every input file the path it had in the interrupted run (``stored``: its meta
    "files") when both name the same file, so that the files are read, hashed and recorded
    exactly as before however the sources are spelled now (``big`` then, ``/data/big`` now)."""
    if stored is None:
        return
    spelled = {os.path.realpath(f[0]): f[0] for phase in json.loads(stored) for f in phase}
    for sources in plans:
        for src in sources:
            for f in src.corpus.files:
                f.path = spelled.get(os.path.realpath(f.path), f.path)
            src.corpus.files.sort(key=lambda f: f.path)


def begin(store: RunStore, cfg: RunSpec, plans: list[list[Source]], resuming: bool) -> list[list[list]]:
    """Start (or, ``resuming``, continue) the run in ``store``: a resumed run must be the same run
    (ConfigError otherwise), its files take the interrupted run's spelling and its outputs are
    dropped; records the identity and the input files. Returns each phase's fingerprint."""
    if resuming:
        _check_same_run(store, cfg)
        _respell(plans, store.get_meta("files"))
        store.drop_outputs()
    fingerprints = [fingerprint(srcs) for srcs in plans]
    if not resuming:
        store.put_metas({"identity": identity(cfg), "files": fingerprints})
    elif store.get_meta("files") is None:  # the spelling --resume gives the files
        store.put_meta("files", fingerprints)
    return fingerprints


# --- checkpoints ---------------------------------------------------------------------------------


def phase_checkpoint(store: RunStore, phase: str, fp: list, where: str) -> dict | None:
    """How far the interrupted run got in ``phase`` ({"stage": "counted" | "merged", ...}, None if
    not that far); ConfigError naming the first input that changed since it read them."""
    cp = store.get_checkpoint(phase)
    if cp is not None and cp["fingerprint"] != fp:
        changed = next((f[0] for f, g in zip(fp + [[None]], cp["fingerprint"] + [[None]]) if f != g), "?")
        raise ConfigError(f"{where}{changed}: changed since the interrupted run read it; "
                          "restore it, or start over with --force instead of --resume")
    return cp


def held_out_of(store: RunStore, phase: str) -> pa.Table | None:
    """The pieces a sampled phase's sample did not take, as the run file records them
    (meta('held_out:PHASE'); None for a phase that read every document); ``PARITY_SCHEMA``."""
    v = store.get_meta(f"held_out:{phase}")
    rows = json.loads(v) if v is not None else None
    if rows is None:
        return None
    return pa.Table.from_pylist(rows, schema=PARITY_SCHEMA)


def _put_held_out(store: RunStore, phase: str, table: pa.Table | None) -> None:
    store.put_metas(_held_out_meta(phase, table))


def _held_out_meta(phase: str, table: pa.Table | None) -> dict:
    """The meta row of a phase's held-out pieces (:func:`held_out_of` reads it)."""
    return {f"held_out:{phase}": None if table is None else table.select(PARITY_SCHEMA.names).to_pylist()}


def count_state(store: RunStore, phase: str, fp: list, where: str = "") -> CountState | None:
    """The counting checkpoint an interrupted run left for ``phase`` (None if none, or if only files
    it had not counted yet changed since: then the phase is counted again from its first file).
    ConfigError naming the first file it had counted that changed since (as :func:`phase_checkpoint`)."""
    st = store.get_count_state(phase)
    if st is None:
        return None
    old = st["used"].get("fingerprint")
    if old != fp:
        counted = len(old or []) if st["sample"] is not None else st["files_done"]  # a finished sample read them all
        changed = next((f[0] for f, g in zip(fp + [[None]] * counted, (old or [])[:counted]) if f != g), None)
        if changed is not None:
            raise ConfigError(f"{where}{changed}: changed since the interrupted run read it; "
                              "restore it, or start over with --force instead of --resume")
        return None
    import polars as pl  # the engines' own frames (CountState)

    words = pl.from_arrow(st["words"]) if st["words"] is not None else None
    sample = st["sample"]  # (a Polars frame already)
    parity = st["parity"].cast(PARITY_SCHEMA) if st["parity"].num_rows else None
    return CountState(st["files_done"], words, st["used"]["state"], parity, sample,
                      held_out=held_out_of(store, phase) if sample is not None else None)


def shared_sample(store: RunStore, base: str) -> tuple[list, CountState] | None:
    """The sample an earlier phase kept in the run file for later phases with sample identity
    ``base`` (``toktok.count.stage.SampleKey``): (its key as a list, the counting state it starts
    from: sample, per-file statistics, held-out pieces); None when there is none."""
    got = store.get_shared_sample(base)
    if got is None:
        return None
    meta, sample = got
    return meta["key"], CountState(sample=sample, used=meta["used"], held_out=held_out_of(store, meta["phase"]))


def save_count_state(store: RunStore, phase: str, state: CountState, fp: list) -> None:
    """A counting checkpoint: the counts of the files so far, or the finished sample."""
    if state.sample is not None:  # before the count state that makes it count
        _put_held_out(store, phase, state.held_out)
    store.put_count_state(phase, state.files_done, {"state": state.used, "fingerprint": fp},
                          words=state.words if state.sample is None else None, parity=state.parity,
                          sample=state.sample)


def save_counted(store: RunStore, phase: str, words: pa.Table, parity: pa.Table,
                 held_out: pa.Table | None, sources: list[Source], used: dict, state: dict,
                 tokens=None, keep_sample=None, shared_done: str | None = None, merged: dict | None = None) -> None:
    """The checkpoint of a counted phase, all or nothing: its words, inputs (``used``: per file
    statistics), parity sample and held-out pieces, and ``state`` (fingerprint, warnings, ...) as
    its checkpoint "counted"; its counting checkpoint goes, but for its sample when a later phase
    takes it (``keep_sample``: its ``toktok.count.stage.SampleKey``, by which that phase finds
    it); ``shared_done``: the identity of an earlier phase's sample that this phase took and no
    later one needs, which goes. ``tokens``: each word's number of tokens, stored with it, and
    ``merged``: the checkpoint recorded instead of "counted" (a "merged" checkpoint that stores
    its phase's counted one too, :func:`save_merged`)."""
    with store.transaction(join=True):
        if keep_sample is not None:
            store.keep_sample(phase, keep_sample.base, {"phase": phase, "key": list(keep_sample), "used": used})
        if shared_done is not None:
            store.drop_shared_sample(shared_done)
        store.drop_count_state(phase, keep_sample=keep_sample is not None)
        store.put_words(phase, words if tokens is None else words.append_column("tokens", pa.array(tokens, pa.int32())))
        store.put_parity(phase, parity)
        for src in sources:
            for f in src.corpus.files:
                st = used[f.path]
                store.add_input(f.path, f.kind, phase, f.size, st["docs"], st["bytes"], st["docs_seen"],
                                st["bytes_seen"])
        # (the held-out pieces and the checkpoint in one write of the meta table)
        store.put_metas({**_held_out_meta(phase, held_out),
                         f"checkpoint:{phase}": merged if merged is not None else {"stage": "counted", **state}})


def save_merged(store: RunStore, phase: str, words: pa.Array, counts: np.ndarray, tokens, state: dict,
                due: Callable[..., None] | None = None, merges: pa.Table | None = None) -> None:
    """The checkpoint of a merged phase, all or nothing: each word's tokens, and ``state``
    (fingerprint, warnings, summary) as its checkpoint "merged". ``due``: the phase's "counted"
    checkpoint, not stored yet (:func:`counted`), stored here with the words' tokens, and
    ``merges`` (a :func:`~toktok.store.merges_table`), the loop's merges not stored yet."""
    merged = {"stage": "merged", **state}
    with store.transaction():  # (all or nothing: the checkpoint may be recorded before the merges)
        if due is not None:  # (its checkpoint recorded as this one)
            due(store, tokens=tokens, merged=merged)
        else:
            store.set_tokens(phase, words, counts, tokens)
            store.set_checkpoint(phase, merged)
        if merges is not None:
            store.add_merges(phase, merges)


def check_replay(prior: pa.Table, res: MergeResult, where: str) -> None:
    """The merges recomputed on --resume must begin with the ones the interrupted run checkpointed."""
    k = prior.num_rows
    mine = [res.left[:k], res.right[:k], res.token[:k], res.count[:k], res.reused[:k]]
    theirs = [prior[c].to_numpy(zero_copy_only=False) for c in ("left_id", "right_id", "token_id", "count", "reused")]
    if len(res.left) < k or not all(np.array_equal(a, b.astype(a.dtype)) for a, b in zip(mine, theirs)):
        raise start_over(ParityError(
            f"{where}--resume: the merges learned again differ from the {k:,} the interrupted run "
            "checkpointed (the inputs or toktok changed); start over with --force"))


__all__ = ["Checkpoints", "Journal", "Opened", "Pending", "Restored", "Staging", "CHECKPOINT_SECONDS", "check_out",
           "open_run", "restore", "begin", "identity", "fingerprint", "phase_checkpoint",
           "count_state", "shared_sample", "save_count_state", "save_counted", "save_merged", "held_out_of",
           "check_replay", "start_over", "abandon"]
