"""Engine: the read → sample → pre-tokenize + count stages of one phase, on this machine.

Owns how a phase's counting is spread over this machine: files are sampled in parallel by a
thread pool (:func:`sample_pass`), and documents are counted in the main thread while a background
thread reads one batch ahead (:func:`prefetch`). The rules of what is counted (identities, the
capacity's split, the pieces of text files, statistics, the parity sample, checkpoints) are the
counting core's (:mod:`toktok.count.common`), which the Ray engine (:mod:`toktok.count.ray`)
follows too, so both return the same :class:`~toktok.count.common.PhaseCount` for the same
sources, seed and capacity. Reads the phase's :class:`~toktok.count.read.Corpus` objects; writes
nothing itself (the pipeline stores the result and the checkpoints handed to ``save``).
Example: ``count_phase([Source(read_corpus(["data_fixtures/corpus/"]))], seed=0).words.num_rows > 0``.
"""
from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import NamedTuple

import pyarrow as pa

from .._kernels import release_llvm_pages
from ..patterns import DEFAULT, Pattern
from . import sample
from .common import (BATCH_BYTES, PARITY_DOCS, PARITY_SCHEMA, CountState, ParitySample, PhaseCount, Progress,
                     Source, capacity_split, count_batch, count_part, doc_keys, finish_sample, full_ids, full_read_used, left_out_of, offer_file,
                     phase_files, regex_rate, sample_parts, sample_step, snapshot, sum_words, with_every_file)
from .scan import WordCounter, reference_allowance
from .read import Corpus
from .sample import _MAX, Reservoir, SourceStats, pieces_of, roomy_heap


def prefetch(items: Iterator, depth: int = 1) -> Iterator:
    """Iterate ``items`` in a background thread, ``depth`` items ahead (reading overlaps counting;
    pyarrow and the scanner release the GIL). Errors are raised here, in the caller's thread."""
    q: queue.Queue = queue.Queue(maxsize=depth)
    done = object()
    stop = threading.Event()

    def run() -> None:
        try:
            for item in items:
                if stop.is_set():
                    return
                q.put(item)
            q.put(done)
        except BaseException as e:  # handed to the consumer
            q.put(e)

    th = threading.Thread(target=run, name="toktok-read", daemon=True)
    th.start()
    try:
        while True:
            item = q.get()
            if item is done:
                return
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        stop.set()
        while th.is_alive():  # unblock a producer waiting on a full queue
            try:
                q.get_nowait()
            except queue.Empty:
                th.join(0.05)


def _workers(jobs: int) -> int:
    """The sample pass's threads: Polars' thread pool's size (every core by default), at most one a file."""
    import polars as pl

    return max(1, min(pl.thread_pool_size(), jobs))


def sample_pass(
    sources: list[Source], capacity: int, seed: int, batch_bytes: int, report: Progress, tag: str = "",
    pattern: Pattern = DEFAULT,
) -> list[Reservoir]:
    """One pass over every file of the phase into seeded reservoir(s), shared as
    :func:`~toktok.count.common.capacity_split` says, long documents cut where ``pattern`` cuts.
    Returns the reservoirs in source order (a shared one repeated)."""
    total = sum(s.size for s in sources)
    if any(f.kind == "memory" and not f.size for _, f in phase_files(sources)):
        total = None  # data in an iterable: its size is known once it is read
    pools, jobs = _sample_jobs(sources, capacity, seed, pattern)
    keys = doc_keys(sources)
    workers = _workers(len(jobs))
    # small reads (sample.READ_BYTES): decoded text is cut and hashed while still in cache, and
    # the workers together hold less than one batch
    per_worker = max(1 << 16, min(sample.READ_BYTES, batch_bytes // workers))
    first_error = [len(jobs)]  # index of the first file (in order) that failed
    errors: dict[int, BaseException] = {}
    lock = threading.Lock()
    abort = threading.Event()

    def run(i: int) -> None:
        with lock:
            active.add(i)
        try:
            read_file(i)
        finally:
            with lock:
                active.discard(i)
                files_done[0] += inside.file_done(jobs[i][1], text_of[i])
            finished.put(i)

    def so_far() -> int:
        """Bytes of the files done, and of those being read how far they are (:class:`_InFile`)."""
        with lock:
            return files_done[0] + sum(inside.at(jobs[i][1], text_of[i]) for i in active)

    def read_file(i: int) -> None:
        corpus, f, res = jobs[i]
        if abort.is_set() or first_error[0] < i:
            return
        try:
            for texts in offer_file(res, corpus, f, keys[f.path], sample_step(f.kind, capacity, batch_bytes, per_worker)):
                if abort.is_set() or first_error[0] < i:  # the error of an earlier file wins
                    return
                read[0] += texts.nbytes
                text_of[i] += texts.nbytes
                if not loaded.is_set():  # the sampling kernels are loaded now: LLVM's pages can go
                    loaded.set()
                    release_llvm_pages()
                if read[0] >= tidy_every:  # give the free heap back now and then (roomy_heap)
                    read[0] = 0
                    tidy()
        except BaseException as e:
            with lock:
                errors[i] = e
                first_error[0] = min(first_error[0], i)

    loaded = threading.Event()
    read = [0]  # bytes read since the heap was last tidied: about two batches, the reads' share
    tidy_every = 2 * batch_bytes
    # progress: the files done, and how far into its file each worker is (_InFile; _wait_for)
    finished: queue.Queue = queue.Queue()
    active: set[int] = set()
    text_of = [0] * len(jobs)  # bytes of text read of each file
    files_done = [0]
    inside = _InFile()
    with roomy_heap() as tidy:  # decoding Parquet pages without faulting fresh memory in for each
        pool = ThreadPoolExecutor(workers, thread_name_prefix="toktok-sample")
        try:
            for i in range(len(jobs)):
                pool.submit(run, i)
            report("sample" + tag, 0, total)
            _wait_for(len(jobs), finished, lambda: report("sample" + tag, so_far(), total))
        finally:
            abort.set()
            pool.shutdown(wait=True, cancel_futures=True)
    if errors:  # the same error as reading the files one after the other
        raise errors[min(errors)]
    return pools


def _sample_jobs(sources: list[Source], capacity: int, seed: int,
                 pattern: Pattern) -> tuple[list[Reservoir], list[tuple]]:
    """Each source's reservoir (a shared one repeated, :func:`capacity_split`) and the files to
    read, ``(corpus, file, reservoir)`` in file order, each file's statistics already in place."""
    caps, group = capacity_split(sources, capacity)
    reservoirs = [Reservoir(c, seed, pattern=pattern) for c in caps]
    pools = [reservoirs[g] for g in group]
    # Files are read in parallel (Parquet decoding and UTF-8 checks release the GIL), each by one
    # thread in file order, straight from Arrow: only the kept pieces are copied (sample.py). The
    # sample does not depend on the order in which files finish.
    jobs = [(src.corpus, f, res) for src, res in zip(sources, pools) for f in src.corpus.files]
    for _, f, res in jobs:  # per-file statistics in file order, whichever file finishes first
        res.stats.setdefault(f.path, SourceStats())
    return pools, jobs


def _wait_for(n: int, finished: queue.Queue, progress: Callable[[], None]) -> None:
    """Until ``n`` items came on ``finished`` (one per file done); ``progress()`` after each and
    at least every ``SAMPLE_POLL`` seconds, so that one large file shows how far it is too."""
    while n:
        try:
            finished.get(timeout=SAMPLE_POLL)
            n -= 1
        except queue.Empty:
            pass
        progress()


_FILE_DONE = "file done"
_STREAMED = "streamed"  # a sampled phase whose documents all fit is counted as it is read (_streamed)
_RESTART = "restart"  # ... and they did not fit after all: (_RESTART, state) comes before the sample pass
_TOTAL = "total"  # a sampled phase counts its sample: (_TOTAL, its bytes) comes before the first part

#: Bytes of a compressed file (Parquet, .jsonl.zst) per byte of its text, until the phase's
#: first such file says: where a file's progress is estimated from the text read of it.
COMPRESSED_PRIOR = 1 / 3
#: Seconds between progress reports of the sample pass while no file finishes.
SAMPLE_POLL = 0.5


class _InFile:
    """How far into a file counting is, in bytes of the file, from the bytes of text read of it:
    a plain file's text is about its size; a compressed one's is estimated at the ratio of the
    compressed files the phase read before (``COMPRESSED_PRIOR`` for the first). Never past the
    file's size, whose bytes count once it is done; a file of unknown size (data in a Python
    iterable) counts its text."""

    def __init__(self) -> None:
        self.file_bytes = self.text_bytes = 0  # of the compressed files done

    def at(self, f, text: int) -> int:
        if f.kind == "memory" and not f.size:
            return text
        ratio = 1.0
        if f.kind in ("parquet", "jsonl.zst"):
            ratio = self.file_bytes / self.text_bytes if self.text_bytes else COMPRESSED_PRIOR
        return min(int(text * ratio), f.size)

    def file_done(self, f, text: int) -> int:
        """The file's bytes, once counted (its text, for a file of unknown size)."""
        if f.kind in ("parquet", "jsonl.zst") and text:
            self.file_bytes += f.size
            self.text_bytes += text
        return text if f.kind == "memory" and not f.size else f.size


class _FirstAhead:
    """An iterator whose first item is taken at once, in a thread of its own: a file's first
    read (its footer, and a dictionary page that can be as large as its row group: 0.13-0.18 s
    for 21 MB of the bench corpus's English file) overlaps the counting of the file before it
    instead of stopping it. Iterating it waits for that item, then goes on in the caller's
    thread; an error of the first read is raised there. Example: ``list(_FirstAhead(iter([1, 2])))``."""

    def __init__(self, items: Iterator) -> None:
        self._items = items
        self._first: list = []
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._take, name="toktok-read-ahead", daemon=True)
        self._thread.start()

    def _take(self) -> None:
        try:
            self._first.append(next(self._items))
        except StopIteration:
            pass
        except BaseException as e:  # raised where the file is reached, as reading it there would
            self._error = e

    def __iter__(self) -> Iterator:
        self._thread.join()
        if self._error is not None:
            raise self._error
        if self._first:
            yield self._first.pop()
            yield from self._items


class Started(NamedTuple):
    """A phase's first file with its first batch being read already (:func:`start_reading`); with
    ``texts``, its first texts as a phase that counts its sample as read reads them
    (:func:`start_streaming`)."""

    path: str
    corpus: Corpus
    batches: _FirstAhead
    texts: bool = False


def start_reading(sources: list[Source], batch_bytes: int = BATCH_BYTES, pattern: Pattern = DEFAULT) -> Started | None:
    """The first file of a phase read from now on, its first batch in a thread of its own, for a
    full read's ``count_phase(started=...)`` (which reads the same batches itself without it):
    the pipeline starts it before it opens the run file (~0.05 s, and the decoding of the first
    batch, off a run's start). None for a phase without files.
    Example: ``count_phase(sources, started=start_reading(sources))``."""
    files = phase_files(sources)
    if not files:
        return None
    c = _file_corpus(*files[0])
    return Started(c.files[0].path, c, _FirstAhead(c.batches(batch_bytes, pattern=pattern)))


def start_streaming(sources: list[Source], capacity: int, batch_bytes: int,
                    pattern: Pattern = DEFAULT) -> Started | None:
    """:func:`start_reading` for a sampled phase whose documents all fit (``count_phase``
    counts them as it reads them: :func:`_streamed`): its first file's first texts read from now
    on; None when they may not all fit, or for a phase without files.
    Example: ``count_phase(sources, capacity=c, started=start_streaming(sources, c, b), batch_bytes=b)``."""
    files = phase_files(sources)
    if not files or not _fits(sources, capacity):
        return None
    src, f = files[0]
    texts = src.corpus.arrow_texts(f, _read_step(f, capacity, batch_bytes), pattern=pattern)
    return Started(f.path, src.corpus, _FirstAhead(texts), texts=True)


def _read_step(f, capacity: int, batch_bytes: int) -> int:
    """Bytes per read of file ``f`` by a phase that counts its sample as read: what the sample
    pass reads a ``.txt`` file in (its pieces' identities), else a full read's batch."""
    return sample_step(f.kind, capacity, batch_bytes, min(batch_bytes, BATCH_BYTES))


def _file_corpus(src: Source, f) -> Corpus:
    """File ``f`` of source ``src`` as a corpus of its own (its ``stats`` for it alone)."""
    return Corpus([f], src.corpus.text_column, src.corpus.bad_utf8)


def _batches(
    sources: list[Source], capacity: int | None, seed: int, batch_bytes: int, report: Progress, tag: str,
    times: dict[str, float], state: CountState, save: Callable[[CountState], None] | None, pattern: Pattern,
    started: Started | None = None, keep: Kept | None = None, reads: Kept | None = None,
) -> Iterator[tuple]:
    """What a phase counts, in order, with the bytes done before it: (done, (path, texts, hashes,
    rows)) for each batch of a full read, then (_FILE_DONE, file index, path, its statistics) after
    each file; (done, a slice of the sample) for a sampled phase. Without a ``capacity`` every
    document is read (from file ``state.files_done`` on); with one, only the reservoirs' sample
    (``state.sample`` when a resumed run has it; else ``state`` gets the one the pass takes)."""
    if capacity is None:
        keys = doc_keys(sources)
        done, inside = 0, _InFile()
        files = phase_files(sources)
        corpora = [_file_corpus(src, f) for src, f in files]
        ahead = None  # the next file's first batch, read while this file is counted
        if started is not None and state.files_done == 0 and files and files[0][1].path == started.path:
            corpora[0], ahead = started.corpus, started.batches
        for k, (_src, f) in enumerate(files):
            text = 0  # bytes of text of the file read before the batch
            if k >= state.files_done:  # else counted before the interruption
                c = corpora[k]
                batches = ahead if ahead is not None else c.batches(batch_bytes, pattern=pattern)
                following = next((j for j in range(k + 1, len(files)) if j >= state.files_done), None)
                ahead = None if following is None else \
                    _FirstAhead(corpora[following].batches(batch_bytes, pattern=pattern))
                for batch in batches:
                    yield done + inside.at(f, text), (batch.path, batch.texts, *full_ids(keys[f.path], batch, seed))
                    text = c.stats[f.path]["bytes"]
                yield _FILE_DONE, k, f.path, full_read_used(c.stats.get(f.path, {}))
            done += inside.file_done(f, text)
        return
    if state.sample is None and _fits(sources, capacity):
        # every document fits: the sample would take them all, so the phase counts them as it
        # reads them, in the sample's pieces (_streamed), and keeps no sample; should they not
        # fit after all, it starts over with the sample pass
        fit = yield from _streamed(sources, capacity, seed, batch_bytes, pattern, state, keep, reads,
                                   started if started is not None and started.texts else None)
        if fit:
            return
        if keep is not None:
            keep.clear()
        state.files_done, state.words, state.used, state.parity = 0, None, {}, None
        yield _RESTART, state
    if state.sample is None:
        t0 = time.perf_counter()
        pools = sample_pass(sources, capacity, seed, batch_bytes, report, tag, pattern)
        times["sample"] = times.get("sample", 0.0) + time.perf_counter() - t0
        taken = finish_sample(pools, sources)
        del pools
        state.sample, state.used, state.held_out = taken.sample, taken.used, taken.held_out
        if save is not None:
            save(state)
    counted = 0
    yield _TOTAL, int(state.sample["bytes"].sum()) if state.sample.height else 0
    for part in sample_parts(state.sample, batch_bytes):
        yield counted, part
        counted += int(part["bytes"].sum())


def _fits(sources: list[Source], capacity: int) -> bool:
    """Whether every document of the phase's files fits in its reservoirs
    (:func:`~toktok.count.common.capacity_split`) as far as their sizes say before reading them
    (:meth:`~toktok.count.read.Corpus.text_bound`); False when a file's size is not known so."""
    caps, group = capacity_split(sources, capacity)
    held = [0] * len(caps)
    for src, g in zip(sources, group):
        for f in src.corpus.files:
            bound = src.corpus.text_bound(f)
            if bound is None:
                return False
            held[g] += bound
    return all(h <= c for h, c in zip(held, caps))


class Kept(dict):
    """The texts a streamed phase read (:func:`_streamed`), by file path: the arrays
    ``Corpus.arrow_texts`` gave, in order; ``key``: the identity of the sample they are (the
    caller's ``toktok.count.stage.SampleKey``), ``complete`` once every file was read into it. A
    later phase that reads the same documents the same way counts them instead of reading the
    files again (``count_phase(reads=...)``), each file's going as it is counted."""

    def __init__(self, key=None) -> None:
        super().__init__()
        self.key = key
        self.complete = False


def _streamed(sources: list[Source], capacity: int, seed: int, batch_bytes: int, pattern: Pattern,
              state: CountState, keep: Kept | None = None, reads: Kept | None = None,
              started: Started | None = None) -> Iterator[tuple]:
    """A sampled phase read as a full read when its reservoirs would take every document: the
    same files, read the same way as :func:`~toktok.count.common.offer_file` offers them (rows
    and ``.txt`` steps alike), cut in the same pieces with the same identities and hashes
    (:func:`~toktok.count.sample.pieces_of`), so that counting them and offering them to the
    parity sample as they come gives the sampled count exactly, with the per-file statistics of a
    sample that took everything; nothing is kept. Yields ``(_STREAMED,)``, then what a full
    read yields (a batch is its pieces: (done, (path, texts, hashes, ids))), from file
    ``state.files_done`` on (a checkpoint's); returns True, or False as soon as the text read
    outgrows a reservoir, or a piece hashes to the top, which no reservoir takes (the caller
    starts over with the sample pass). ``keep``: every array read goes in it too (from a first
    file on; it is ``complete`` once all are); ``reads``: the arrays of a file it holds are taken
    (and go from it) instead of reading the file; ``started``: the first file, being read already
    (:func:`start_streaming`). Each file's first read is taken in a thread of its own while the
    file before it is counted (:class:`_FirstAhead`), as a full read does."""
    yield (_STREAMED,)
    if keep is not None and state.files_done:
        keep = None
    caps, group = capacity_split(sources, capacity)
    held = [0] * len(caps)  # text bytes of each reservoir's files so far
    keys = doc_keys(sources)
    kind = Reservoir(capacity, seed, pattern=pattern).cut_kind
    files = [(src, f, g) for src, g in zip(sources, group) for f in src.corpus.files]
    done, inside = 0, _InFile()

    def reading(k: int) -> Iterator[pa.Array]:
        """File ``k``'s texts: as held in ``reads``, else its first read taken ahead."""
        src, f, _g = files[k]
        taken = None if reads is None else reads.pop(f.path, None)
        if taken is not None:
            return iter(taken)
        if k == 0 and started is not None and started.path == f.path:
            return started.batches
        return _FirstAhead(src.corpus.arrow_texts(f, _read_step(f, capacity, batch_bytes), pattern=pattern))

    ahead = reading(state.files_done) if state.files_done < len(files) else None
    for k, (src, f, g) in enumerate(files):
        text = docs = 0
        if k < state.files_done:  # counted before the interruption
            text = state.used.get(f.path, {}).get("bytes_seen", 0)
            held[g] += text
        else:
            texts_of, ahead = ahead, reading(k + 1) if k + 1 < len(files) else None
            kept = None if keep is None else keep.setdefault(f.path, [])
            for texts in texts_of:
                if kept is not None:
                    kept.append(texts)
                p = pieces_of(texts, docs, keys[f.path], seed, cut_kind=kind)
                nbytes = int(p.offs[-1] - p.offs[0])
                held[g] += nbytes
                if held[g] > caps[g] or (len(p.h) and p.h.max() == _MAX):
                    return False
                yield done + inside.at(f, text), (f.path, p.texts(), p.h, p.ids)
                docs += len(texts)
                text += nbytes
            if f.kind == "txt":  # read in steps, each a "row" of the sample
                docs = min(docs, 1)
            yield _FILE_DONE, k, f.path, {"docs": docs, "bytes": text, "docs_seen": docs, "bytes_seen": text}
        done += inside.file_done(f, text)
    if keep is not None:
        keep.complete = True
    return True


class _Tally:
    """A phase's word counter (``counter``, a :class:`~toktok.count.scan.WordCounter`) and what its
    counting used up so far: the reference's allowance (a small run's text counted before the
    scanner is compiled: ``reference_allowance`` of the phase's ``total`` bytes) and the bytes
    counted through regex (a pattern without a compiled scanner)."""

    def __init__(self, specials: list[str] | None, threads: int | None, pattern: Pattern, total: int) -> None:
        self.specials, self.threads, self.pattern, self.total = specials or [], threads, pattern, total
        self.counter: WordCounter | None = None
        self.restart()

    def _new(self) -> WordCounter:
        return WordCounter(specials=self.specials, threads=self.threads, reference_bytes=self.reference,
                           pattern=self.pattern)

    def restart(self) -> None:
        """Nothing counted: a fresh counter (a count that starts over)."""
        self.close()
        self.reference, self.regex_bytes = reference_allowance(self.total, self.pattern), 0
        self.counter = self._new()

    def so_far(self):
        """The counts so far (a Polars frame, a checkpoint's); counting goes on in a fresh counter."""
        words = self.counter.result()
        self.reference -= self.counter.reference_counted
        self.regex_bytes += self.counter.regex_counted
        self.counter = self._new()
        return words

    def words(self, whole: bool):
        """The counts: a count from the start hands its table on as it is (``whole``: sorted
        Arrow; a small one never loads Polars), one resumed from a checkpoint a Polars frame to
        add to the counts of the files before it."""
        words = self.counter.table() if whole else self.counter.result()
        self.regex_bytes += self.counter.regex_counted
        return words

    def close(self) -> None:
        """The counter's threads end now, and its tables go."""
        if self.counter is not None:
            self.counter.close()
            self.counter = None


def count_phase(
    sources: list[Source], *, seed: int = 0, capacity: int | None = None, batch_bytes: int = BATCH_BYTES,
    specials: list[str] | None = None, threads: int | None = None, report: Progress | None = None,
    tag: str = "", restored: CountState | None = None, save: Callable[[CountState], None] | None = None,
    every: float = 30.0, pattern: Pattern = DEFAULT, started: Started | None = None,
    keep: Kept | None = None, reads: Kept | None = None,
) -> PhaseCount:
    """Read (and, with a ``capacity`` in bytes of text, sample) a phase's sources and count their
    words with the pre-tokenizer ``pattern`` (GPT-4's by default), special tokens cut out.

    ``save(state)`` is called with a :class:`CountState` at file boundaries at most every
    ``every`` seconds (full read) or once after the sample pass (sampled); ``restored`` (a state
    saved by an interrupted run) continues from there, with the same result. ``started``: the
    first file being read already (:func:`start_reading`), taken by a full read from its start.
    A sampled phase whose documents all fit in ``capacity`` (as the files' sizes say) counts them
    as it reads them, in the sample's pieces, with the same result (:func:`_streamed`): the
    arrays it read go in ``keep`` (a :class:`Kept`), and those ``reads`` holds are counted
    instead of reading their files again.
    Example: ``count_phase([Source(read_corpus(["notes.txt"]))]).words.num_rows > 0``.
    """
    report = report or (lambda stage, done, total: None)
    times: dict[str, float] = {}
    state = restored or CountState()
    used = {k: dict(v) for k, v in state.used.items()}
    total = sum(s.size for s in sources)
    n_files = len(phase_files(sources))
    # what counting goes through, for progress: the sources' bytes (None while data in an
    # iterable is not read: its size is not known), or a sampled phase's sample
    shown = None if any(f.kind == "memory" and not f.size for _, f in phase_files(sources)) else total
    t0 = time.perf_counter()
    tally = _Tally(specials, threads, pattern, total)
    parity = ParitySample()
    if state.parity is not None:
        parity.merge_frame(state.parity)
    t_saved = time.monotonic()
    loaded = streamed = False
    try:
        for item in prefetch(_batches(sources, capacity, seed, batch_bytes, report, tag, times, state, save, pattern,
                                      started, keep, reads)):
            if item[0] is _TOTAL or item[0] is _STREAMED:
                shown, streamed = (item[1], streamed) if item[0] is _TOTAL else (shown, True)
                continue
            if item[0] is _RESTART:  # the documents did not fit after all: the sample pass counts
                state, used, parity, streamed = item[1], {}, ParitySample(), False
                tally.restart()
                continue
            if item[0] is _FILE_DONE:
                _, k, path, used[path] = item
                if save is not None and time.monotonic() - t_saved >= every and k + 1 < n_files:
                    # 1. checkpoint: everything counted in the files so far (a snapshot, not a delta)
                    state = snapshot(state, tally.so_far(), k + 1, used, parity)
                    save(state)
                    t_saved = time.monotonic()
                continue
            done, what = item
            report("count" + tag, done, shown)
            if isinstance(what, tuple):  # a batch of a file read whole, else a slice of the sample
                count_batch(tally.counter, parity, *what)
            else:
                count_part(tally.counter, parity, what)
            if not loaded:  # loading the counting kernels touched LLVM's pages again: they can go
                release_llvm_pages()
                loaded = True
        words = tally.words(whole=state.words is None)
    finally:
        tally.close()  # after an error its threads end now, not when it is collected
    if state.words is not None:
        words = sum_words([state.words, words]).sort("word").to_arrow()
    if capacity is not None and not streamed:
        used = {k: dict(v) for k, v in state.used.items()}
    if shown is None:
        shown = sum(u["bytes"] for u in used.values())
    report("count" + tag, shown, shown)
    times["count"] = time.perf_counter() - t0 - times.get("sample", 0.0)
    return PhaseCount(words, with_every_file(used, sources), parity.df, times,
                      held_out=PARITY_SCHEMA.empty_table() if streamed else
                      state.held_out if capacity is not None else None,
                      regex_mb_s=regex_rate(tally.regex_bytes, times["count"]))


__all__ = ["count_phase", "sample_pass", "prefetch", "start_reading", "start_streaming", "Started", "Kept",
           # the counting core's types, for the pipeline (defined in count.common)
           "CountState", "PhaseCount", "Source", "ParitySample", "PARITY_DOCS", "doc_keys", "left_out_of"]
