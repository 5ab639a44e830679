"""The insight stage's entry (``record``): what a finished run's file offers for inspection.

``record`` adds the run file's views (:func:`.runfile.add_views`), the compression curve on text
the run did not train on where there is some (:func:`.runfile.curve_table`) and the word gains
(:func:`.runfile.gains_table`), built in Arrow (a small run never loads Polars). What the curve
cuts its documents into does not depend on the merges: ``ahead`` cuts it in a thread beside the
last merge loop, on the core the loop leaves idle, and ``record`` takes it from there. The word
gains are found on a second connection in a thread while the curve is drawn (each writes its
own tables, in its own transaction).
Example: ``insight.stage.record(journal, parity, {"main": parity}, {"main": None})``.
"""
from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from ..store import python_layer
from .runfile import Known, _checkpoints, _Prefixes, add_views, curve_pieces, curve_table, gains_table, top_rows

if TYPE_CHECKING:
    from ..resume import Journal

__all__ = ["Ahead", "Known", "ahead", "known", "record", "superwords"]

#: The most frequent words of each phase the word gains segment (``gains_table``'s ``top``).
TOP_WORDS = 50_000
#: About this many points of the compression curve after 0 merges (``curve_table``'s ``checkpoints``).
CURVE_POINTS = 8


def superwords(tokens: list[bytes], phases, patterns: dict, phase_of: list) -> dict | None:
    """What meta('superwords') records (the view ``superwords`` reads it): the ids, learned by a
    phase whose pattern is not the first phase's, of the tokens the first phase's pattern cuts
    (:func:`.measure.is_superword`), and that pattern; None when every phase splits alike.
    Example: ``superwords(vocab.tokens, phases, {"a": cl100k, "b": superbpe}, phase_of)["ids"]``."""
    from ..patterns import same
    from .measure import is_superword

    first = patterns[phases[0].name]
    coarser = {ph.name for ph in phases[1:] if not same(patterns[ph.name], first)}
    if not coarser:
        return None
    ids = [i for i, ph in enumerate(phase_of) if ph in coarser and is_superword(tokens[i], first)]
    return {"pattern": first.label(), "ids": ids}


class Ahead:
    """The compression curve's documents cut into pieces (:func:`.runfile.curve_pieces`) and a
    phase's most frequent words found (``words``: (phase, words, counts), :func:`.runfile.top_rows`)
    in a thread of its own; ``result()`` waits for them (and raises what it raised), ``top``
    has the words then. ``learned`` segments them, as the loop's tokens come, at the curve's
    points the loop has passed (``points``: the last phase's pattern, the vocabulary sizes of the
    points it plans, and whether the run is small); ``lengths`` gives them to ``record``."""

    def __init__(self, texts: list[str], by: list[str], patterns: list, threads: int,
                 words: tuple | None = None, store=None, points: tuple | None = None) -> None:
        self.texts, self.by = texts, by  # what was cut: record checks that its curve is of these
        self.top: dict[str, pa.Table] = {}
        self._points = points
        self._lengths: dict[tuple[str, int], np.ndarray] = {}  # (regex, vocabulary size) -> tokens a piece
        self._prefix: tuple[np.ndarray, np.ndarray] | None = None  # the tokens they were segmented with
        self.views = False  # the views (and empty insight tables) added to ``store``'s run file
        self._got: dict | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._cut, args=(patterns, threads, words, store),
                                        name="toktok-insight-ahead", daemon=True)
        self._thread.start()

    def _cut(self, patterns: list, threads: int, words: tuple | None, store) -> None:
        try:
            python_layer()  # (DuckDB's, which the steps after the loop use: imported on the core it leaves idle)
            if store is not None:  # (on a second connection: their own commit)
                cursor = store.cursor()
                try:
                    add_views(cursor)
                finally:
                    cursor.con.close()
                self.views = True
            self._got = curve_pieces(self.texts, by=self.by, patterns=patterns, threads=threads)
            if words is not None:
                phase, w, c = words
                del words
                self.top = {phase: top_rows(w, c, TOP_WORDS)}
        except BaseException as e:  # raised by result(), in the run's thread
            self._error = e

    @property
    def busy(self) -> bool:
        """Its documents are still being cut (or its words found)."""
        return self._thread.is_alive()

    def result(self) -> dict:
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._got

    def learned(self, tokens: list[bytes]) -> None:
        """The loop's vocabulary so far (``tokens``: ids in order, the last phase's start first):
        the curve's documents, once cut, segmented at each planned point it holds (the merge
        stage's ``learned``, called beside the loop, on the core it leaves idle). Raises nothing:
        a point not segmented here is segmented by ``record``."""
        if self._points is None or self._thread.is_alive() or self._got is None:
            return
        regex, sizes, reference = self._points
        due = [n for n in sizes if n <= len(tokens) and (regex, n) not in self._lengths]
        cut = self._got["cut"].get(regex)
        if not due or cut is None:
            return
        try:
            from ..merge import Segmenter

            m, (data, lens) = max(due), self._prefix or (np.zeros(0, np.uint8), np.zeros(0, np.int64))
            if m > len(lens):  # (the tokens after those joined before)
                new = tokens[len(lens):m]
                data = np.concatenate([data, np.frombuffer(b"".join(new), np.uint8)])
                lens = np.concatenate([lens, np.fromiter(map(len, new), np.int64, len(new))])
                self._prefix = (data, lens)
            segment = Segmenter(data if len(data) else np.zeros(1, np.uint8), np.cumsum(lens) - lens, lens,
                                reference=reference, threads=1)
            for n in due:
                self._lengths[(regex, n)] = np.diff(segment(cut[0], n)[1])
        except Exception:  # (record segments them)
            self._points = None

    def lengths(self, tables: tuple[np.ndarray, np.ndarray, np.ndarray]) -> dict[tuple[str, int], np.ndarray]:
        """The pieces' tokens at the points ``learned`` segmented ((regex, vocabulary size) ->
        tokens of each piece of ``curve_pieces``' cut), if the vocabulary they were segmented
        with is the first tokens of ``tables`` (``_Prefixes``': tdata, tstart, tlen); else none."""
        if self._prefix is None or not self._lengths:
            return {}
        data, lens = self._prefix
        tdata, tstart, tlen = tables
        m = len(lens)
        if len(tlen) < m or not np.array_equal(tlen[:m], lens) or \
                not np.array_equal(tstart[:m], np.cumsum(lens) - lens + (tstart[0] if m else 0)):
            return {}
        if m and not np.array_equal(tdata[int(tstart[0]):int(tstart[0]) + len(data)], data):
            return {}
        return dict(self._lengths)


def ahead(parity: pa.Table, phase_parity: dict[str, pa.Table], phase_held_out: dict[str, pa.Table | None],
          patterns: Iterable, *, threads: int = 1, words: tuple | None = None, store=None,
          points: tuple | None = None) -> Ahead:
    """The documents of the compression curve ``record`` will draw (``_curve_texts``) cut into the
    pieces of each of ``patterns`` (the run's phases'), in a thread, while the last merge loop runs
    (the pieces depend on the parity sample only); passed to ``record`` as ``ahead``. ``words``:
    (phase, words, counts), the last phase's word table, whose most frequent words the word gains
    segment (found meanwhile: its "merged" checkpoint may store them after ``record`` began);
    ``store``: the run file (a ``RunStore``), which gets its views meanwhile (:func:`add_views`);
    ``points``: (the last phase's pattern, the vocabulary size after 0 merges, the merges planned
    in all, small): the curve's points the loop passes are segmented as it learns (``Ahead.learned``).
    Example: ``record(journal, parity, pp, ho, ahead=ahead(parity, pp, ho, [DEFAULT]))``."""
    texts, by, _, _ = _curve_texts(parity, phase_parity, phase_held_out)
    if points is not None:
        pattern, first, planned, small = points
        points = (pattern.regex, [first + k for k in _checkpoints(planned, None, CURVE_POINTS)[:-1]], small)
    return Ahead(texts, by, list({p.regex: p for p in patterns}.values()), threads, words, store, points)


def known(vocab: pa.Table | None, phases: Iterable[tuple[str, int, int]]) -> Known | None:
    """What ``record`` may take from memory (:class:`.runfile.Known`): the vocabulary table the
    run file stores (``RunStore.add_vocab``'s) and each phase's (name, merges, reused merges), in
    order; None when there is no table or some merge reused a token (the merges' ids are read
    from the run file then). Example: ``known(table, [("main", 500, 0)])``."""
    phases = list(phases)
    if vocab is None or any(reused for _, _, reused in phases):
        return None
    return Known(vocab, [(name, m) for name, m, _ in phases if m > 0])


def record(journal: Journal, parity: pa.Table, phase_parity: dict[str, pa.Table],
           phase_held_out: dict[str, pa.Table | None], *, threads: int = 1, small: bool = False,
           report: Callable[[str, int, int | None], None] | None = None, ahead: Ahead | None = None,
           known: Known | None = None) -> None:
    """The insight stage's entry (the pipeline's step 7): what the run file (``journal``'s store)
    offers for inspection (:mod:`toktok.insight.runfile`): views, the compression curve and token
    usage (on text the run did not train on where a budget left some out, ``phase_held_out``,
    else on each phase's parity sample, ``phase_parity``, or the run's, ``parity``, labelled by
    file), word gains; with the references for a ``small`` run. Writes them into the run file and
    returns nothing; ``ahead``: its curve's documents cut already (:func:`ahead`, of the same
    parity samples), and the last phase's most frequent words found. The checkpoint being stored
    (the last phase's "merged" one, which may store its words and last merges) is waited for
    first, unless the run has no memory budget and ``known`` (:func:`known`: the vocabulary and
    the merges) and ``ahead``'s words give all the step reads of it: then the step runs beside it
    (on another connection; DuckDB's CHECKPOINT waits for both: ``toktok.pipeline._Beside``).
    Example: ``record(journal, parity, {"main": parity}, {"main": None})``."""
    report = report or (lambda stage, done, total: None)
    store = journal.store
    report("insight", 0, 3)
    pieces = ahead.result() if ahead is not None else None  # (its words: found once it is done)
    top = ahead.top if ahead is not None else {}
    if journal.busy and (journal.inline or known is None or not _all_known(known, top)):
        journal.settle()  # the word gains read the words and merges it stores
    with store.translating():
        if ahead is not None and ahead.views:
            store.insight_added = True  # (added beside the merge loop)
        else:
            add_views(store)
        report("insight", 1, 3)
        curve, curve_from, curve_text, curve_kinds = _curve_texts(parity, phase_parity, phase_held_out)
        if pieces is not None and (ahead.texts != curve or ahead.by != curve_from):
            pieces = None  # (cut from other samples: cut again)
        pre = _Prefixes(store, small, known if journal.busy else None)  # the vocabulary by merge count, once for both
        # the word gains on a second connection in a thread meanwhile (mostly DuckDB's work and
        # the kernels', without the GIL), unless a small run's references segment (tiktoken's)
        gains = None if small else _Beside(gains_table, store, pre, top)
        try:
            if curve:
                lengths = ahead.lengths(pre._tables) if pieces is not None else None
                curve_table(store, curve, by=curve_from, threads=threads, checkpoints=CURVE_POINTS,
                            text=curve_text, text_by_phase=curve_kinds, reference=small, prefixes=pre, pieces=pieces,
                            lengths=lengths)
        except BaseException:
            if gains is not None:
                gains.join()  # (the curve's error is the one to report)
            raise
        report("insight", 2, 3)
        if gains is None:
            gains_table(store, TOP_WORDS, reference=small, prefixes=pre, top_words=top)
        else:
            gains.result()
        # the blocks its queries and writes left cached, given back before the verification
        # loads tiktoken's half beside HF's load (the tail's peak at 131,072: 412 MB, not 423);
        # while a checkpoint is being stored on another connection its writes need them: given
        # back once it is (Journal.settle)
        if not journal.busy:
            store.release_memory()
    report("insight", 3, 3)


def _all_known(known: Known, top: dict[str, pa.Table]) -> bool:
    """``known`` and ``top`` hold all the word gains read of the checkpoint being stored: the
    words of the last phase that learned merges (the earlier phases' were stored before it)."""
    return not known.phases or known.phases[-1][0] in top


class _Beside:
    """``table(cursor, TOP_WORDS, prefixes=pre, top_words=top)`` (:func:`.runfile.gains_table`) on a second connection to
    ``store`` (its own transaction: another table than the curve's), in a thread; ``result()``
    waits for it and raises what it raised. ``pre``'s segmenter and token table are built first,
    so that both threads share them."""

    def __init__(self, table: Callable, store, pre: _Prefixes, top: dict[str, pa.Table]) -> None:
        pre.segment(pre.n_merges, [b""])  # (built here, once: not by both threads at once)
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(table, store.cursor(), pre, top), name="toktok-gains",
                                        daemon=True)
        self._thread.start()

    def _run(self, table: Callable, cursor, pre: _Prefixes, top: dict[str, pa.Table]) -> None:
        try:
            with cursor.translating():
                table(cursor, TOP_WORDS, prefixes=pre, top_words=top)
        except BaseException as e:  # raised by result(), in the step's thread
            self._error = e
        finally:
            cursor.con.close()

    def join(self) -> None:
        self._thread.join()

    def result(self) -> None:
        self._thread.join()
        if self._error is not None:
            raise self._error


def _curve_texts(run_parity: pa.Table, parity: dict[str, pa.Table],
                 held_out: dict[str, pa.Table | None]) -> tuple[list[str], list[str], str, dict]:
    """The documents of the run file's compression curve, their file names, and what they are:
    each phase's pieces its sample did not take (``held_out``: text the run never trained on), or,
    for a phase that read every document, its parity sample (``training`` text); ``mixed`` when
    phases differ. Without any held-out piece: the run's parity sample, as before."""
    kinds = {name: "held_out" if held_out.get(name) is not None and held_out[name].num_rows else "training"
             for name in parity}
    if all(k == "training" for k in kinds.values()):
        tables = [run_parity]
    else:
        tables = [held_out[name] if k == "held_out" else parity[name] for name, k in kinds.items()]
    texts = [t for table in tables for t in table.column("text").to_pylist()]
    sources = [Path(p).name for table in tables for p in table.column("source").to_pylist()]
    text = next(iter(set(kinds.values()))) if len(set(kinds.values())) == 1 else "mixed"
    return texts, sources, text, kinds
