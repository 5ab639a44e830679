"""Engine on a Ray cluster: the read → sample → pre-tokenize + count stages of one phase, spread
over Ray tasks, with the same result as the local engine (:mod:`toktok.count.local`).

Owns how a phase is cut into work units and how their partial results are merged back; what is
counted follows the counting core (:mod:`toktok.count.common`), as the local engine does. A unit
is one file, or a range of row groups of a Parquet file whose text column has no nulls (its rows
are then numbered exactly as in the whole file: ``SourceFile.row_groups``), planned on the driver
from the Parquet footers. Reads the phase's files on the workers: objects in a store (``s3://``
...) straight from the store, each unit carrying the URL and storage options (so no shared file
system is needed; credentials not in the options come from each node's environment); local paths
must be seen by every node at the same path. Returns a :class:`~toktok.count.common.PhaseCount`
equal to the local engine's for the same sources, seed and capacity: the same word table (byte
for byte), the same per-file ``used`` statistics and the same parity frame. Without a capacity
each unit counts its documents and sends back an Arrow word table, its parity candidates and its
file statistics; the driver folds them in file order (summed by a tree of reduce tasks on the
workers), so that the counts of the first files can be saved as the local engine's checkpoint.
With a capacity, each unit fills its own seeded :class:`~toktok.count.sample.Reservoir` (same
seed, same capacity, the same pieces as the local engine, starting from the threshold of the
sample merged so far, which only drops pieces the final sample cannot hold), the driver merges
them as they come into exactly the one-process sample (``Reservoir.fold`` and ``merge``), saves it
as the checkpoint, and the sample is counted by tasks again. Tasks are sent a few per CPU at a
time. The merge loop, the run file and the export stay on the driver.

Ray is optional (``pip install 'toktok[ray]'``); nothing imports this module unless ``--engine
ray`` is asked for, and it imports Ray only when called. Without an address a private cluster
sized to the machine (``threads`` or all cores) is started on the loopback interface for the phase
and stopped after it; with one (``--ray-address``) the driver joins that cluster. If Ray is
already initialised in the process (tests, notebooks), that cluster is used as it is.
Example: ``count_phase([Source(read_corpus(["data_fixtures/corpus/"]))], seed=0).words.num_rows > 0``.
"""
from __future__ import annotations

import logging
import os
import socket
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass

import numpy as np
import polars as pl
import pyarrow as pa

from . import remote
from .common import (CountState, ParitySample, PhaseCount, Progress, Source, capacity_split, count_batch, count_part,
                     doc_keys, finish_sample, full_ids, full_read_used, offer_file, phase_files, regex_rate,
                     sample_parts, sample_step, snapshot, sum_words, with_every_file)
from ..errors import ConfigError, ResourceError, ToktokError, one_line
from ..patterns import DEFAULT, Pattern
from .memory import KIND
from .read import Corpus, SourceFile, open_parquet
from .shipped import open_payload, ship
from .sample import Reservoir

#: What to tell a user whose Python has no Ray.
INSTALL_HINT = "pip install 'toktok[ray]'"
#: Uncompressed text per work unit when a Parquet file is split by row groups.
UNIT_BYTES = 64 << 20
#: Partial word tables summed per reduce task.
FANIN = 8
#: Sampled bytes gathered on the driver before they are merged into the sample (at least).
MERGE_MIN_BYTES = 1 << 20

_WORDS_SCHEMA = pa.schema([("word", pa.large_binary()), ("count", pa.int64())])


def require_ray():
    """The ``ray`` module, or a ConfigError that says how to install it."""
    try:
        import ray
    except ImportError:
        raise ConfigError(f"--engine ray needs Ray, which is not installed; run: {INSTALL_HINT}") from None
    return ray


# ---------------------------------------------------------------------------------------------
# The cluster
# ---------------------------------------------------------------------------------------------


@contextmanager
def _loopback():
    """Ray on the loopback interface: Ray replaces 127.0.0.1 (and localhost) by the address other
    machines would reach this one by, both for a head it starts and for an address it joins. A
    private cluster needs no such address, and Ray's own switch for that (meant for laptops) is
    this one. It is read when the head's processes start, so it is put back afterwards (a later
    join elsewhere must not see it)."""
    import ray._private.ray_constants as rc

    env_key = rc.ENABLE_RAY_CLUSTERS_ENV_VAR
    old_env, old_flag = os.environ.get(env_key), rc.ENABLE_RAY_CLUSTER
    os.environ[env_key] = "0"
    rc.ENABLE_RAY_CLUSTER = False
    try:
        yield
    finally:
        rc.ENABLE_RAY_CLUSTER = old_flag
        if old_env is None:
            os.environ.pop(env_key, None)
        else:
            os.environ[env_key] = old_env


def start_local(num_cpus: int | None = None, **kwargs):
    """Start a private Ray cluster on this machine, listening on the loopback interface only, with
    ``num_cpus`` workers (default: every core). Returns ``ray.init``'s context, whose
    ``address_info["address"]`` other processes on this machine can join."""
    ray = require_ray()
    with _loopback():
        return ray.init(num_cpus=num_cpus or os.cpu_count() or 1, include_dashboard=False,
                        log_to_driver=False, logging_level=logging.WARNING, **kwargs)


def _host_port(address: str) -> tuple[str, int] | None:
    """(host, port) of a ``host:port`` cluster address; None for other forms (``auto``, ``ray://``)."""
    if "://" in address or ":" not in address:
        return None
    host, _, port = address.rpartition(":")
    host = host.strip("[]")
    return (host, int(port)) if port.isdigit() else None


def _join_error(address: str, why: str) -> ConfigError:
    auth = "" if os.environ.get("RAY_AUTH_MODE") else (
        "; a cluster with token authentication also needs RAY_AUTH_MODE=token and its token")
    return ConfigError(f"--ray-address {address}: cannot join the Ray cluster ({why}); check the "
                       f"address (`ray status` on the head node prints it){auth}")


def check_reachable(address: str) -> None:
    """ConfigError at once if nothing listens at a ``host:port`` address (Ray itself retries an
    unreachable address for many minutes); other forms (``auto``, ``ray://...``) pass."""
    hp = _host_port(address)
    if hp is None:
        return
    try:
        socket.create_connection(hp, timeout=10).close()
    except OSError as e:
        raise _join_error(address, e.strerror or type(e).__name__) from None


def _connect(address: str | None, threads: int | None) -> bool:
    """Make sure the driver is connected to a cluster; True if this call connected it (and the
    phase should disconnect, stopping a private cluster)."""
    ray = require_ray()
    if ray.is_initialized():
        return False
    if not address:
        start_local(threads or None)
        return True
    check_reachable(address)
    hp = _host_port(address)
    local = hp is not None and (hp[0] == "localhost" or hp[0].startswith("127.") or hp[0] == "::1")
    try:
        with _loopback() if local else nullcontext():
            ray.init(address=address, log_to_driver=False, logging_level=logging.WARNING)
    except (ConnectionError, ValueError, RuntimeError) as e:
        raise _join_error(address, one_line(e)) from None
    return True


def _cpus(ray) -> tuple[int, int]:
    """(CPUs of the cluster, CPUs of its largest node)."""
    total = int(ray.cluster_resources().get("CPU", 1)) or 1
    per_node = [int(n.get("Resources", {}).get("CPU", 0)) for n in ray.nodes() if n.get("Alive")]
    return total, max([c for c in per_node if c > 0] or [1])


def _get(ray, refs):
    """``ray.get`` with a task's ToktokError (bad input, ...) raised as itself, one line."""
    try:
        return ray.get(refs)
    except ray.exceptions.RayTaskError as e:
        cause = getattr(e, "cause", None)
        if isinstance(cause, ToktokError):
            raise cause from None
        raise
    except ray.exceptions.RayError as e:
        raise ResourceError(f"the Ray cluster failed ({one_line(e)}); check `ray status` and the "
                            "workers' memory") from None


# ---------------------------------------------------------------------------------------------
# Work units (planned on the driver, run on the workers)
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Unit:
    """One task's share of a phase: a file, or row groups ``groups`` of a Parquet file whose first
    row is row ``first_row`` of the file. ``group`` is the reservoir it samples into, ``file`` its
    file's index in the phase (``common.phase_files``)."""

    path: str
    kind: str
    size: int  # bytes on disk (the whole file's; progress only)
    text_column: str
    bad_utf8: str
    cwd: str  # the driver's folder: relative paths are taken against it
    group: int = 0
    groups: tuple[int, ...] | None = None
    first_row: int = 0
    share: float = 1.0  # the unit's share of the file, for progress
    key: str = ""  # the file's part of its documents' identities (common.doc_keys)
    location: tuple | None = None  # an object in a store: (URL, storage options, size) to open it
    file: int = 0
    footer: object = None  # the Parquet metadata read on the driver (SourceFile.footer): not fetched again
    memory: tuple | None = None  # data in memory: where its part is in the object store (count.shipped)


def _row_ranges(f: SourceFile, corpus: Corpus, unit_bytes: int) -> list[tuple[tuple[int, ...], int, float]] | None:
    """A Parquet file cut into ranges of row groups of about ``unit_bytes`` of text, as
    (row groups, first row, share of the file); None if the file is one unit. Only files whose
    text column has no nulls (per the footer's statistics) and that no ``bad_utf8="skip"`` can
    shorten are cut: there a document's position among the texts read is its row in the file, in
    a range as in the whole file, so identities (and the sample) do not change."""
    if f.kind != "parquet" or corpus.bad_utf8 == "skip":
        return None
    md = open_parquet(f.path, corpus.text_column, f.footer).metadata
    if md.num_row_groups < 2:
        return None
    leaves = [md.schema.column(j).path for j in range(md.num_columns)]
    if corpus.text_column not in leaves:
        return None
    ci = leaves.index(corpus.text_column)
    sizes = []
    for g in range(md.num_row_groups):
        col = md.row_group(g).column(ci)
        st = col.statistics
        if st is None or not st.has_null_count or st.null_count != 0:
            return None
        sizes.append(col.total_uncompressed_size)
    total = max(sum(sizes), 1)
    out, cur, cur_bytes, row, first = [], [], 0, 0, 0
    for g, nbytes in enumerate(sizes):
        if not cur:
            first = row
        cur.append(g)
        cur_bytes += nbytes
        row += md.row_group(g).num_rows
        if cur_bytes >= unit_bytes:
            out.append((tuple(cur), first, cur_bytes / total))
            cur, cur_bytes = [], 0
    if cur:
        out.append((tuple(cur), first, cur_bytes / total))
    return out if len(out) > 1 else None


def plan_units(sources: list[Source], group: list[int] | None = None, unit_bytes: int = UNIT_BYTES,
               first_file: int = 0, batch_bytes: int = 32 << 20) -> list[Unit]:
    """The phase's files from file ``first_file`` on (in phase order) as work units, in order;
    ``group[i]``: the reservoir source i samples into (``common.capacity_split``; default 0). Data
    in memory is put in the object store here (:func:`toktok.count.shipped.ship`)."""
    cwd = os.getcwd()
    keys = doc_keys(sources)
    units = []
    files = [(si, f) for si, src in enumerate(sources) for f in src.corpus.files]  # phase order
    for k, (si, f) in enumerate(files[first_file:], start=first_file):
        c = sources[si].corpus
        where = remote.location(f.path) if remote.is_url(f.path) else None
        base = dict(path=f.path, kind=f.kind, size=f.size, text_column=c.text_column, bad_utf8=c.bad_utf8,
                    cwd=cwd, group=group[si] if group else 0, key=keys[f.path], location=where, file=k,
                    footer=f.footer)
        if f.kind == KIND:  # data in memory: to the object store, cut as shipped.ship says
            units += [Unit(**base, first_row=r, share=sh, memory=p)
                      for r, sh, p in ship(require_ray(), f, c, unit_bytes, batch_bytes)]
            continue
        ranges = _row_ranges(f, c, unit_bytes)
        if ranges is None:
            units.append(Unit(**base))
        else:
            units += [Unit(**base, groups=g, first_row=r, share=s) for g, r, s in ranges]
    return units


def _open_unit(unit: Unit) -> Corpus:
    """The unit's file (its row groups only, for a range) as a one-file Corpus, relative paths
    taken against the driver's folder, an object in a store opened as the driver would, data in
    memory read from the object store."""
    if unit.memory is not None:
        return open_payload(require_ray(), unit.path, unit.memory, unit.text_column, unit.bad_utf8)
    if unit.location is not None:
        remote.register(unit.path, *unit.location)
    elif not os.path.isabs(unit.path) and os.path.isdir(unit.cwd) and os.getcwd() != unit.cwd:
        os.chdir(unit.cwd)
    f = SourceFile(unit.path, unit.kind, unit.size, key=unit.key, row_groups=unit.groups, footer=unit.footer)
    return Corpus([f], unit.text_column, unit.bad_utf8)


def _words_arrow(df: pl.DataFrame) -> pa.Table:
    return df.select("word", "count").to_arrow(compat_level=pl.CompatLevel.oldest()).cast(_WORDS_SCHEMA)


def _count_unit(unit: Unit, specials: list[str], seed: int, batch_bytes: int, threads: int,
                pattern: Pattern = DEFAULT):
    """Task: count every document of a unit -> (word table, parity candidates, file stats), its
    documents numbered as ``Corpus.batches`` numbers them in the whole file."""
    from .scan import WordCounter

    counter = WordCounter(specials=specials, threads=threads, pattern=pattern)
    parity = ParitySample()
    corpus = _open_unit(unit)
    for batch in corpus.batches(batch_bytes, pattern=pattern):
        count_batch(counter, parity, batch.path, batch.texts, *full_ids(unit.key, batch, seed))
    return _words_arrow(counter.result()), parity.df, corpus.stats.get(unit.path, {})


def _sample_unit(unit: Unit, res_capacity: int, capacity: int, seed: int, batch_bytes: int, threshold: int,
                 pattern: Pattern = DEFAULT):
    """Task: a unit's documents into its own reservoir, offered as the local engine offers them
    (``common.offer_file``) -> (the kept pieces as Arrow, the reservoir's threshold, docs/bytes
    seen per file, the pieces with the largest hashes it set aside as Arrow: ``Reservoir.fold``
    on the driver takes them back).

    ``threshold`` is the merged sample's on the driver when the task was sent: the final threshold
    can only be lower, so pieces hashing at or above it are dropped here at once (exact, and what
    comes back shrinks to about the unit's share of the sample once the driver's is full)."""
    res = Reservoir(res_capacity, seed, pattern=pattern)
    res.threshold = np.uint64(threshold)
    corpus = _open_unit(unit)
    step = sample_step(unit.kind, capacity, batch_bytes, batch_bytes)
    for _texts in offer_file(res, corpus, corpus.files[0], unit.key, step, unit.first_row):
        pass
    df = res.finish().with_columns(pl.col("source").cast(pl.String))
    seen = {k: (s.docs_seen, s.bytes_seen) for k, s in res.stats.items()}
    aside = res.aside.to_arrow(compat_level=pl.CompatLevel.oldest())
    return df.to_arrow(compat_level=pl.CompatLevel.oldest()), int(res.threshold), seen, aside


def _count_sample(part: pa.Table, specials: list[str], threads: int, pattern: Pattern = DEFAULT):
    """Task: count a slice of the merged sample (source, hash, row, text) -> (words, parity)."""
    from .scan import WordCounter

    counter = WordCounter(specials=specials, threads=threads, pattern=pattern)
    parity = ParitySample()
    count_part(counter, parity, pl.from_arrow(part))
    return _words_arrow(counter.result()), parity.df


def _sum_words(*tables: pa.Table) -> pa.Table:
    """Task: the sum of partial word tables."""
    parts = [pl.from_arrow(t) for t in tables if t.num_rows]
    return _words_arrow(sum_words(parts)) if parts else _WORDS_SCHEMA.empty_table()


class _TreeSum:
    """Sums word tables with a tree of reduce tasks (``FANIN`` tables each) as they come in, so
    no task sums more than ``FANIN`` tables and the driver only ever fetches the final one."""

    def __init__(self, remote_sum):
        self.remote_sum = remote_sum
        self.levels: list[list] = [[]]  # levels[h]: refs that are sums of FANIN**h unit tables

    def add(self, ref, level: int = 0) -> None:
        while len(self.levels) <= level:
            self.levels.append([])
        self.levels[level].append(ref)
        if len(self.levels[level]) >= FANIN:
            refs, self.levels[level] = self.levels[level], []
            self.add(self.remote_sum.remote(*refs), level + 1)

    def result(self, ray) -> pl.DataFrame:
        pending = [r for level in self.levels for r in level]
        while len(pending) > 1:
            pending = [self.remote_sum.remote(*pending[i:i + FANIN]) for i in range(0, len(pending), FANIN)]
        table = _get(ray, pending[0]) if pending else _WORDS_SCHEMA.empty_table()
        return pl.from_arrow(table).sort("word")


class _InOrder:
    """Full-read results folded in phase order (a unit's wait until every earlier unit's came
    back), so that the counts of the first files are known on their own: at the end of a file,
    at most every ``every`` seconds, they are saved as the checkpoint the local engine saves
    (``common.snapshot``), and the sum starts again."""

    def __init__(self, ray, units: list[Unit], n_files: int, state: CountState,
                 save: Callable[[CountState], None] | None, every: float):
        self.ray, self.units, self.n_files, self.state, self.save, self.every = ray, units, n_files, state, save, every
        self.remote_sum = ray.remote(num_cpus=1)(_sum_words)
        self.tree = _TreeSum(self.remote_sum)
        self.parity = ParitySample()
        if state.parity is not None:
            self.parity.merge_frame(state.parity)
        self.used = {k: dict(v) for k, v in state.used.items()}
        self.waiting: dict[int, tuple] = {}
        self.next = 0  # the first unit not folded yet
        self.file_st = {"docs": 0, "bytes": 0}
        self.t_saved = time.monotonic()

    def add(self, i: int, words_ref, parity: pa.Table, stats: dict) -> None:
        """Unit ``i``'s results (its word table still on the cluster)."""
        self.waiting[i] = (words_ref, parity, stats)
        while self.next in self.waiting:
            words_ref, parity, stats = self.waiting.pop(self.next)
            u = self.units[self.next]
            self.tree.add(words_ref)
            self.parity.merge_frame(parity)
            for key in self.file_st:
                self.file_st[key] += stats.get(key, 0)
            self.next += 1
            if self.next == len(self.units) or self.units[self.next].file != u.file:
                self.used[u.path] = full_read_used(self.file_st)
                self.file_st = {"docs": 0, "bytes": 0}
                self._file_done(u.file)

    def _file_done(self, k: int) -> None:
        if self.save is None or time.monotonic() - self.t_saved < self.every or k + 1 >= self.n_files:
            return
        self.state = snapshot(self.state, self.tree.result(self.ray), k + 1, self.used, self.parity)
        self.tree = _TreeSum(self.remote_sum)
        self.save(self.state)
        self.t_saved = time.monotonic()

    def words(self) -> pl.DataFrame:
        """Every file's counts, sorted by word."""
        return sum_words([self.state.words, self.tree.result(self.ray)]).sort("word")


def _stream(ray, submit, n: int, inflight: int) -> Iterator[tuple[int, tuple]]:
    """``submit(i)`` for i in 0..n-1, at most ``inflight`` tasks at a time, each submitted only
    when there is room (so it sees the driver's state then); yields (i, the task's refs) as tasks
    finish, waiting on the last ref of each."""
    running: dict = {}
    nxt = 0
    while nxt < n or running:
        while nxt < n and len(running) < inflight:
            refs = submit(nxt)
            running[refs[-1]] = (nxt, refs)
            nxt += 1
        ready, _ = ray.wait(list(running), num_returns=1)
        yield running.pop(ready[0])


# ---------------------------------------------------------------------------------------------
# The phase
# ---------------------------------------------------------------------------------------------


def count_phase(
    sources: list[Source], *, seed: int = 0, capacity: int | None = None, batch_bytes: int = 32 << 20,
    specials: list[str] | None = None, threads: int | None = None, report: Progress | None = None,
    tag: str = "", address: str | None = None, unit_bytes: int | None = None, merge_min_bytes: int | None = None,
    restored: CountState | None = None, save: Callable[[CountState], None] | None = None, every: float = 30.0,
    pattern: Pattern = DEFAULT,
) -> PhaseCount:
    """``toktok.count.local.count_phase`` on a Ray cluster: same arguments, same result, the same
    checkpoints (``save``, ``restored``, ``every``: the counts of the first files at file
    boundaries, or the finished sample), saved on the driver.

    ``address`` joins an existing cluster (``ray.init(address=...)``); without one a private
    cluster with ``threads`` (0/None = all cores) CPUs is started for the phase. ``unit_bytes``:
    text per work unit when Parquet files are cut by row groups (default ``UNIT_BYTES``);
    ``merge_min_bytes``: the least of the workers' samples the driver merges at once (default
    ``MERGE_MIN_BYTES``).
    Example: ``count_phase([Source(read_corpus(["notes.txt"]))]).words.num_rows > 0``.
    """
    report = report or (lambda stage, done, total: None)
    specials = list(specials or [])
    unit_bytes = unit_bytes or UNIT_BYTES
    merge_min_bytes = MERGE_MIN_BYTES if merge_min_bytes is None else merge_min_bytes
    state = restored or CountState()
    ray = require_ray()
    t0 = time.perf_counter()
    connected = _connect(address, threads)
    try:
        if capacity is None:
            pc, counted = _count_all(ray, sources, seed, batch_bytes, specials, report, tag, unit_bytes, state,
                                     save, every, pattern)
        else:
            pc, counted = _count_sampled(ray, sources, seed, capacity, batch_bytes, specials, report, tag,
                                         unit_bytes, state, save, merge_min_bytes, pattern)
    finally:
        if connected:
            ray.shutdown()
    with_every_file(pc.used, sources)
    pc.seconds["count"] = time.perf_counter() - t0 - pc.seconds.get("sample", 0.0)
    from .scan import has_scanner

    if not has_scanner(pattern):
        pc.regex_mb_s = regex_rate(counted, pc.seconds["count"])
    return pc


def _threads_per_task(ray, n_tasks: int) -> int:
    total, node = _cpus(ray)
    return max(1, min(node, total // max(n_tasks, 1)))


def _count_all(ray, sources, seed, batch_bytes, specials, report, tag, unit_bytes, state, save, every,
               pattern) -> tuple[PhaseCount, int]:
    """Every document of the phase counted by tasks, one per unit -> (the count, its text's bytes)."""
    files = phase_files(sources)
    total = sum(f.size for _, f in files)
    units = plan_units(sources, None, unit_bytes, first_file=state.files_done, batch_bytes=batch_bytes)
    k = _threads_per_task(ray, len(units))
    count_unit = ray.remote(num_cpus=k, num_returns=3)(_count_unit)
    folded = _InOrder(ray, units, len(files), state, save, every)
    done = float(sum(f.size for _, f in files[:state.files_done]))  # counted before an interruption
    report("count" + tag, int(done), total)
    inflight = 2 * max(1, _cpus(ray)[0] // k)
    submit = lambda i: count_unit.remote(units[i], specials, seed, batch_bytes, k, pattern)  # noqa: E731
    counted = 0
    for i, (words, parity, stats) in _stream(ray, submit, len(units), inflight):
        stats = _get(ray, stats)
        counted += stats.get("bytes", 0)
        folded.add(i, words, _get(ray, parity), stats)
        done += units[i].size * units[i].share
        report("count" + tag, int(done), total)
    words = folded.words()
    report("count" + tag, total, total)
    return PhaseCount(words.to_arrow(), folded.used, folded.parity.df, {}), counted


def _reservoir_of(results: list[tuple[pa.Table, int, dict, pa.Table]], capacity: int, seed: int,
                  pattern: Pattern) -> Reservoir:
    """Workers' reservoirs rebuilt on the driver as one, ready for one ``Reservoir.merge``:
    merging them one by one gives the same sample, but sorts the whole sample each time."""
    res = Reservoir(capacity, seed, pattern=pattern)
    for table, threshold, seen, aside in results:
        res.fold(pl.from_arrow(table), threshold, seen, pl.from_arrow(aside))
    return res


def _sample_pass(ray, sources, seed, capacity, batch_bytes, report, tag, unit_bytes,
                 merge_min_bytes, pattern) -> list[Reservoir]:
    """The phase's files sampled by tasks, one per unit, each into its own reservoir; the
    driver merges them as they come into exactly the local engine's reservoirs (one per
    ``capacity_split`` share)."""
    total = sum(s.size for s in sources)
    caps, group = capacity_split(sources, capacity)
    pools = [Reservoir(c, seed, pattern=pattern) for c in caps]
    units = plan_units(sources, group, unit_bytes, batch_bytes=batch_bytes)
    sample_unit = ray.remote(num_cpus=1, num_returns=4)(_sample_unit)
    pending: list[list] = [[] for _ in caps]  # results not merged yet, per reservoir
    pending_bytes = [0] * len(caps)

    def flush(g: int) -> None:
        if pending[g]:
            pools[g].merge(_reservoir_of(pending[g], caps[g], seed, pattern))
            pending[g], pending_bytes[g] = [], 0

    def submit(i: int):
        u = units[i]
        return sample_unit.remote(u, caps[u.group], capacity, seed, batch_bytes, int(pools[u.group].threshold),
                                  pattern)

    done = 0.0
    report("sample" + tag, 0, total)
    inflight = 2 * _cpus(ray)[0]
    # merged as they come, a quarter of the capacity at a time: the driver holds the sample so
    # far plus about that much
    for i, refs in _stream(ray, submit, len(units), inflight):
        u = units[i]
        result = _get(ray, list(refs))
        pending[u.group].append(result)
        pending_bytes[u.group] += result[0].nbytes
        if pending_bytes[u.group] >= max(caps[u.group] // 4, merge_min_bytes):
            flush(u.group)
        done += u.size * u.share
        report("sample" + tag, int(done), total)
    for g in range(len(caps)):
        flush(g)
    return pools


def _count_sampled(ray, sources, seed, capacity, batch_bytes, specials, report, tag, unit_bytes,
                   state, save, merge_min_bytes, pattern) -> tuple[PhaseCount, int]:
    """The phase's sample taken by tasks, then counted by tasks -> (the count, its text's bytes)."""
    t0 = time.perf_counter()
    if state.sample is None:  # else a resumed run has the sample already
        pools = _sample_pass(ray, sources, seed, capacity, batch_bytes, report, tag, unit_bytes, merge_min_bytes,
                             pattern)
        state = finish_sample(pools, sources)
        del pools
        if save is not None:
            save(state)
    sample_seconds = time.perf_counter() - t0
    smp, used, held_out = state.sample, {k: dict(v) for k, v in state.used.items()}, state.held_out
    del state  # the parts below hold the driver's copy of the sample (unless the caller keeps one)
    sample_bytes = int(smp["bytes"].sum()) if smp.height else 0
    piece = max(1 << 20, min(batch_bytes, sample_bytes // max(1, 2 * _cpus(ray)[0]) + 1))
    parts = sample_parts(smp, piece)
    del smp
    # count the sample in slices, on the workers
    count_sample = ray.remote(num_cpus=1, num_returns=2)(_count_sample)
    tree = _TreeSum(ray.remote(num_cpus=1)(_sum_words))
    parity_refs = []
    for part in parts:
        table = part.select("source", "hash", "row", "text").to_arrow(compat_level=pl.CompatLevel.oldest())
        words, parity = count_sample.remote(ray.put(table), specials, 1, pattern)
        tree.add(words)
        parity_refs.append(parity)
    part = parts = None  # the slices live in the object store now
    parity_all = ParitySample()
    report("count" + tag, 0, sample_bytes)
    for j, ref in enumerate(parity_refs):
        parity_all.merge_frame(_get(ray, ref))
        report("count" + tag, int(sample_bytes * (j + 1) / len(parity_refs)), sample_bytes)
    return (PhaseCount(tree.result(ray).to_arrow(), used, parity_all.df, {"sample": sample_seconds}, held_out=held_out),
            sample_bytes)


__all__ = ["count_phase", "start_local", "require_ray", "plan_units", "Unit", "INSTALL_HINT"]
