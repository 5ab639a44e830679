"""The run file: one DuckDB database per run holding words, merges, vocabulary and provenance.

Owns the run file (``run.duckdb``, :data:`toktok.rundir.RUN_FILE`) and its tables' Arrow
schemas. Writes the word table (word bytes, 64-bit count, phase), the merges (order, left id,
right id, token id and bytes, pair count when merged, reused, phase), the vocabulary,
the inputs with their sizes, stage timings, and ``meta`` (schema version, config, versions,
seed). DuckDB gets a memory limit and a temp directory so the word table spills to disk.
The SQL it runs ships in ``toktok/sql/`` and is loaded by name with ``$name`` parameters
(:mod:`toktok.statements`). Insight writes its views and tables through it too
(:meth:`RunStore.add_insight`, :meth:`RunStore.replace_insight`), and ``toktok sql`` reads
through :meth:`RunStore.sandbox`.
Example: ``RunStore.create("out/run.duckdb", memory_limit=2 << 30).put_meta("seed", "0")``.
"""
from __future__ import annotations

import json
import os
import re
from collections.abc import Sequence
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pyarrow as pa

from .errors import OutputError, ResourceError, ToktokError
from .rundir import RUN_FILE, shown
from .statements import blocks, named, params_for, sql, temporary

try:  # DuckDB's engine alone: its Python layer (relations, Arrow scans and results) is imported
    import _duckdb as duckdb  # when first used (``python_layer``), not at every run's start (~40 ms)
except ImportError:  # (another layout of duckdb: its package)
    import duckdb

#: The run file's schema: "2" keeps each phase's words in a table of its own under the view
#: ``words`` (``word_tables.sql``); "1" kept them in one table ``words`` with a phase on each row.
SCHEMA_VERSION = "2"
#: The schemas this toktok reads (``open``, ``sandbox``: the tables and views a user queries are
#: alike); only its own is written (``create`` refuses to resume another's).
READS = ("1", "2")
#: The tables toktok.insight fills (``insight_tables.sql``): the only names ``replace_insight`` takes.
INSIGHT_TABLES = ("compression", "token_usage", "word_gains")


def python_layer() -> None:
    """DuckDB's Python layer imported (the ``duckdb`` package over its engine): the connection's
    Arrow scans (``register`` of an Arrow table), ``to_arrow_table`` and ``sql`` come with it.
    Once per process; runs also have it imported beside the merge loop (``insight.stage.Ahead``)."""
    import duckdb  # noqa: F401


def _meta_text(value) -> str:
    """A meta value as stored: a str as it is, anything else as JSON."""
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)


class RunStore:
    """A run's DuckDB file. Create with ``RunStore.create``; open an existing one with ``RunStore.open``."""

    def __init__(self, con: duckdb.DuckDBPyConnection, path: Path, temp_dir: Path | None = None,
                 memory_limit: int | None = None, limit_shown: str | None = None):
        self.con = con
        self.path = path
        self._in_transaction = False  # inside ``transaction()`` (this connection's own)
        #: ``add_insight`` ran on this connection: the file has every insight table and view.
        self.insight_added = False
        #: DuckDB's temp folder (where it spills beyond ``memory_limit``), named in errors.
        self.temp_dir = Path(temp_dir) if temp_dir is not None else path.parent / (path.name + ".tmp")
        #: DuckDB's memory limit in bytes, and as errors name it (as the user wrote it).
        self.memory_limit = memory_limit
        self.limit_shown = limit_shown if limit_shown is not None or memory_limit is None else _duck_size(memory_limit)
        #: Each phase's finished sample as stored (:meth:`put_count_state`), by phase, while a later
        #: phase of this run may still take it (:meth:`get_shared_sample` hands it over once);
        #: shared with this store's cursors.
        self._held: dict[str, object] = {}
        #: The phases with a counting checkpoint stored by this run (:meth:`put_count_state`),
        #: shared with this store's cursors; None when the file held an earlier run's (``--resume``).
        self._counting: set[str] | None = None

    @classmethod
    def create(cls, path: str | Path, memory_limit: int, threads: int = 0, temp_dir: str | Path | None = None,
               limit_shown: str | None = None) -> "RunStore":
        """A new run file at ``path``; DuckDB spills beyond ``memory_limit`` bytes into ``temp_dir``
        (default: ``run.duckdb.tmp`` beside the file). A full disk or too little memory is a
        ``ResourceError`` naming the folder (and the limit as ``limit_shown``, default in MiB),
        not a DuckDB traceback."""
        path = Path(path)
        tmp = Path(temp_dir) if temp_dir is not None else path.parent / (path.name + ".tmp")
        try:
            tmp.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise OutputError(f"{shown(tmp)}: cannot create DuckDB's temp folder ({e.strerror or e}); "
                              "check that the folder is writable and its disk has room") from None
        existed = path.exists()  # an interrupted run's, on --resume
        try:
            con = duckdb.connect(str(path))
        except duckdb.Error as e:
            raise _unopenable(e, path, existed) from None
        store = cls(con, path, tmp, memory_limit, limit_shown)
        store._counting = None if existed else set()
        names = store.table_names() if existed else set()
        if names and "meta" not in names:
            con.close()
            e = OutputError(f"{shown(path)}: a DuckDB file of another program ({len(names)} tables such as "
                            f"{sorted(names)[0]!r}, no toktok meta), not an interrupted run")
            e.start_over = True  # what --resume would find is not toktok's (resume.start_over)
            raise e
        version = store.get_meta("schema_version") if names else None
        if version not in (None, SCHEMA_VERSION):
            con.close()
            e = OutputError(f"{shown(path)}: an interrupted run of another toktok (run file schema version "
                            f"{version!r}, this toktok writes {SCHEMA_VERSION!r})")
            e.start_over = True
            raise e
        with store.translating():
            store.run("settings.memory_limit", {"limit": _duck_size(memory_limit)})
            store.run("settings.temp_directory", {"path": str(tmp)})
            # preserve_insertion_order stays DuckDB's default (true): with it off and 2+ threads,
            # execute(...).to_arrow_table() collects in parallel and returns the rows of an
            # ORDER BY in blocks of ~2,048 in any order (DuckDB 2.0), so merges read back for
            # --resume came out shuffled. Turning it off saved neither memory nor time on a
            # 2 M-word table at a 32 MiB limit (tests/test_store.py holds the order).
            store.run("settings.preserve_insertion_order")
            if threads:
                store.run("settings.threads", {"threads": int(threads)})
            # the schema's statements in one transaction: each commit costs ~10 ms (a one-document
            # run's whole run file took 0.2 s, 47 statements)
            with store.transaction():
                store._script("schema")
                store.put_meta("schema_version", SCHEMA_VERSION)
        return store

    def translating(self):
        """Turn DuckDB running out of disk (temp folder or run file) or of memory inside the block
        into a ``ResourceError`` naming the folder and what to do; other errors pass unchanged.
        Example: ``with store.translating(): store.con.execute(query)``."""
        return translating(self.path, self.temp_dir, self.limit_shown)

    @classmethod
    def open(cls, path: str | Path, read_only: bool = True) -> "RunStore":
        path = Path(path)
        if path.is_dir():
            path = path / RUN_FILE
        if not path.exists():
            raise ToktokError(f"{path}: no run file here; pass a toktok output folder or its run.duckdb")
        con = duckdb.connect(str(path), read_only=read_only)
        store = cls(con, path)
        store.run("settings.preserve_insertion_order")  # ORDER BY kept in Arrow results (see create)
        version = store.get_meta("schema_version")
        if version not in READS:
            raise ToktokError(f"{path}: run file schema version {version!r}, this toktok reads "
                              f"{' and '.join(map(repr, READS))}")
        return store

    def cursor(self) -> "RunStore":
        """The same run file on a second connection (DuckDB's ``cursor()``: the same database,
        its own transactions), for another thread; close it with ``.con.close()``.
        Example: ``store.cursor().get_meta("seed") == store.get_meta("seed")``."""
        cur = RunStore(self.con.cursor(), self.path, self.temp_dir, self.memory_limit, self.limit_shown)
        cur._held, cur._counting = self._held, self._counting
        cur.insight_added = self.insight_added  # (committed: the cursor sees them)
        return cur

    @classmethod
    def over(cls, con: duckdb.DuckDBPyConnection) -> "RunStore":
        """The run store of a connection opened elsewhere (the caller keeps and closes it).
        Example: ``RunStore.over(duckdb.connect("out/run.duckdb")).table_names()``."""
        path = con.execute(sql("database_path")).fetchall()
        return cls(con, Path(path[0][0] if path and path[0][0] else RUN_FILE))

    @classmethod
    def sandbox(cls, path: str | Path) -> "RunStore":
        """The run file at ``path`` as the read-only default database of a private in-memory DuckDB
        in which no other file can be read or written (``toktok/sql/sandbox.sql``): for the user's
        SQL of ``toktok sql``. A private instance, because DuckDB shares one instance (and its
        settings) among the connections to a file in a process. Close with ``store.con.close()``."""
        path = Path(path)
        con = duckdb.connect(":memory:")
        try:
            params = {"path": str(path), "temp": str(path.parent / (path.name + ".tmp"))}
            for _, stmt in blocks("sandbox"):
                try:
                    con.execute(stmt, params_for(stmt, params))
                except duckdb.Error as e:
                    raise ToktokError(f"{path}: cannot open the run file ({_first_line(e)})") from None
            try:
                version = next(iter(con.execute(sql("get_meta"), {"key": "schema_version"}).fetchall()), None)
            except duckdb.Error:  # a DuckDB file, but not a run's
                version = None
            if not version:
                raise ToktokError(f"{path}: a DuckDB file, but not a toktok run file (no schema version); pass a "
                                  "toktok output folder or its run.duckdb")
            if version[0] not in READS:
                raise ToktokError(f"{path}: run file schema version {version[0]!r}, this toktok reads "
                                  f"{' and '.join(map(repr, READS))}")
        except BaseException:
            con.close()
            raise
        return cls(con, path)

    def run(self, name: str, params: dict | None = None, *, table: str | None = None):
        """Execute the named statement (:func:`toktok.statements.sql`) with its ``$name`` params
        (and ``table``: its ``{table}``, :func:`toktok.statements.named`)."""
        with self.translating():
            return self.con.execute(sql(name) if table is None else named(sql(name), table=table), params or {})

    def table_names(self) -> set[str]:
        """The names of the tables and views the connection sees."""
        return {r[0] for r in self.run("table_names").fetchall()}

    def add_insight(self, temp: bool = False) -> None:
        """The insight tables (empty, where missing) and views (replaced) of
        ``insight_tables.sql`` and ``insight_views.sql``; ``temp``: for this connection only
        (which a read-only one allows)."""
        # (the tables are CREATE ... IF NOT EXISTS; a temporary one must not hide the file's own)
        have = self.table_names() if temp else set()
        with self.transaction():  # one commit, not one a statement (~2 ms each: 0.05-0.1 s in all)
            for name, stmt in blocks("insight_tables"):
                if name not in have:
                    self.con.execute(temporary(stmt) if temp else stmt)
            for _, stmt in blocks("insight_views"):
                self.con.execute(temporary(stmt) if temp else stmt)
        self.insight_added = self.insight_added or not temp

    def replace_insight(self, tables: dict[str, pa.Table], meta: dict[str, str]) -> None:
        """Replace the rows of insight tables (names of :data:`INSIGHT_TABLES`; columns as in
        ``insight_tables.sql``) and set ``meta`` keys, in one transaction."""
        with self.transaction():
            for name, table in tables.items():
                if name not in INSIGHT_TABLES:
                    raise ValueError(f"{name!r} is no insight table ({', '.join(INSIGHT_TABLES)})")
                self.run(f"insight_rows.clear_{name}")
                self._with_batch(f"insight_rows.fill_{name}", table, {})
            self.put_metas(meta)

    def put_meta(self, key: str, value) -> None:
        """Set meta ``key`` to ``value`` (a str as it is, anything else as JSON)."""
        self.put_metas({key: value})

    def put_metas(self, items: dict) -> None:
        """``put_meta`` of each key and value, together (in the transaction open on this
        connection, else in one of their own). Example: ``store.put_metas({"seed": "0"})``."""
        if items:
            keys, values = list(items), [_meta_text(v) for v in items.values()]
            with self.transaction(join=True):
                self.run("put_metas.clear", {"keys": keys})
                self.run("put_metas.insert", {"keys": keys, "values": values})

    def get_meta(self, key: str) -> str | None:
        # fetchall: a result fetched only in part keeps the connection busy (DuckDB 2 refuses a
        # register() on it until the result is finished)
        rows = self.run("get_meta", {"key": key}).fetchall()
        return rows[0][0] if rows else None

    def add_input(self, path: str, kind: str, phase: str, size_bytes: int, docs: int, text_bytes: int,
                  docs_seen: int, bytes_seen: int) -> None:
        """One input file of a phase: documents and text bytes counted (the sample), and seen."""
        self.run("add_input", dict(path=path, kind=kind, phase=phase, size_bytes=size_bytes, docs=docs,
                                   text_bytes=text_bytes, docs_seen=docs_seen, bytes_seen=bytes_seen))

    def put_words(self, phase: str, table) -> None:
        """Store a phase's word table (``word``, ``count`` and, after training, ``tokens``; Arrow
        or Polars), after the words it has (its own table: ``words_table``; the tokens in one of
        their own, row for row, or none while no word has any)."""
        batch = table.to_arrow() if hasattr(table, "to_arrow") else table
        with self.transaction(join=True):
            name = self.words_table(phase, make=True)
            _, _, words, tokens = self.run("word_tables.span", table=name).fetchall()[0]
            given = "tokens" in batch.column_names and batch.column("tokens").null_count < batch.num_rows
            if given or tokens:  # (row for row: the words stored without tokens get nulls)
                if words > tokens:
                    self._with_batch("word_tables.insert_tokens", pa.table({"tokens": pa.nulls(words - tokens, pa.int32())}),
                                     {}, table_name=name)
                self._with_batch("word_tables.insert_tokens", batch.select(["tokens"]) if given else
                                 pa.table({"tokens": pa.nulls(batch.num_rows, pa.int32())}), {}, table_name=name)
            self._with_batch("word_tables.insert", batch, {}, table_name=name)

    def words_table(self, phase: str, *, make: bool = False) -> str | None:
        """The name of the table of ``phase``'s words (``words_0``, ``words_1``, ... as phases
        store words; the view ``words`` is their union); None when it has none, unless ``make``:
        then an empty one is made, in the transaction open here or one of its own."""
        got = self.run("word_tables.of", {"phase": phase}).fetchall()
        if got or not make:
            return got[0][0] if got else None
        taken = {n for (n,) in self.run("word_tables.names").fetchall()}
        name = next(f"words_{k}" for k in range(len(taken) + 1) if f"words_{k}" not in taken)
        with self.transaction(join=True):
            self.run("word_tables.create", table=name)
            self.run("word_tables.create_tokens", table=name)
            self.run("word_tables.add", {"phase": phase, "name": name})
            self._view_words()
        return name

    def drop_words(self, phase: str) -> None:
        """``phase``'s words go: their tables, dropped (no dead blocks left in the file)."""
        name = self.words_table(phase)
        if name is not None:
            with self.transaction(join=True):
                self.run("word_tables.forget", {"phase": phase})
                self._view_words()  # (first: it reads them)
                self.run("word_tables.drop_tokens", table=name)
                self.run("word_tables.drop", table=name)

    def _view_words(self) -> None:
        """The view ``words`` made again over the phases' tables (``word_tables.sql``)."""
        names = [n for (n,) in self.run("word_tables.names").fetchall()]
        if not names:
            self.run("word_tables.empty")
            return
        selects = " UNION ALL ".join(named(sql("word_tables.select"), table=n) for n in names)
        with self.translating():
            self.con.execute(named(sql("word_tables.view"), selects=selects))

    def add_merges(self, phase: str, table: pa.Table) -> None:
        """Append merges of ``phase`` (a :func:`merges_table`)."""
        self._with_batch("add_merges", table, {"phase": phase})

    def add_vocab(self, tokens: Sequence[bytes], specials: Sequence[str], kinds: Sequence[str],
                  phases: Sequence[str | None]) -> pa.Table:
        """The vocabulary: id i is ``tokens[i]`` (its ``kinds[i]``: byte, hardcoded, base, merge,
        special; the phase that learned it in ``phases[i]``), then the ``specials`` after the last
        token, kind "special". Returns the rows it stored (id, token, kind, phase)."""
        n = len(tokens)
        table = pa.table({
            "id": pa.array(np.arange(n + len(specials), dtype=np.int32)),
            "token": pa.array([*tokens, *(s.encode() for s in specials)], pa.binary()),
            # typed: Arrow infers a list of str by importing dateutil (5 ms of a small run)
            "kind": pa.array(list(kinds) + ["special"] * len(specials), pa.string()),
            "phase": pa.array(list(phases) + [None] * len(specials), pa.string())})
        self._with_batch("add_vocab", table, {})
        return table

    def add_stages(self, seconds: dict[str, float]) -> None:
        """Record each stage's seconds (``{"count": 1.2, ...}``), in order, in one statement."""
        if seconds:
            self.run("add_stages", {"stages": list(seconds), "seconds": [float(v) for v in seconds.values()]})

    def release_memory(self) -> None:
        """Give the blocks DuckDB keeps cached after a large write back to the system (~50 MB
        after the bench corpus's word table): lowering the memory limit evicts them, then the
        limit is restored. Best effort: a limit that cannot be lowered now is left as it was.
        Example: ``store.put_words("main", table); store.release_memory()``."""
        if self.memory_limit is None:
            return
        try:
            self.con.execute(sql("settings.memory_limit"), {"limit": "16MiB"})
        except duckdb.Error:  # blocks pinned right now: nothing to give back
            pass
        with self.translating():
            self.run("settings.memory_limit", {"limit": _duck_size(self.memory_limit)})

    @contextmanager
    def roomier(self, limit: int | None):
        """Inside: DuckDB may use ``limit`` bytes (None: as it was), then its own limit again;
        its errors name the limit in force. A step that runs alone under a memory budget takes a
        share the plan gave a step that is over (``toktok.pipeline._insight``)."""
        if limit is None or self.memory_limit is None or limit <= self.memory_limit:
            yield self
            return
        was = self.memory_limit, self.limit_shown
        with self.translating():
            self.run("settings.memory_limit", {"limit": _duck_size(limit)})
        self.memory_limit, self.limit_shown = limit, f"{limit >> 20}MiB"
        try:
            yield self
        finally:
            self.memory_limit, self.limit_shown = was
            with self.translating():
                self.run("settings.memory_limit", {"limit": _duck_size(was[0])})

    # --- checkpoints, for --resume ------------------------------------------------------------

    @contextmanager
    def transaction(self, join: bool = False):
        """Everything in the block is committed together or not at all (a kill -9 inside it
        leaves the file as it was before). ``join``: inside a transaction already open on this
        connection, the block is part of that one."""
        if join and self._in_transaction:
            yield
            return
        with self.translating():
            self.con.begin()
            self._in_transaction = True
            try:
                yield
            except BaseException:
                self.con.rollback()
                raise
            else:
                self.con.commit()
            finally:
                self._in_transaction = False

    def _with_batch(self, name: str, table, params: dict, *, table_name: str | None = None) -> None:
        batch = table.to_arrow() if hasattr(table, "to_arrow") else table
        python_layer()  # (its Arrow scans)
        self.con.register("batch", batch)
        try:
            self.run(name, params, table=table_name)
        finally:
            try:
                self.con.unregister("batch")
            except duckdb.Error:  # an aborted transaction refuses it; the first error is the one to see
                pass

    def _script(self, name: str, params: dict | None = None) -> None:
        """Every statement of ``toktok/sql/NAME.sql`` in order, each with the ``params`` it names."""
        with self.translating():
            for _, stmt in blocks(name):
                self.con.execute(stmt, params_for(stmt, params or {}))

    def set_checkpoint(self, phase: str, state: dict) -> None:
        """Record how far ``phase`` got ({"stage": "counted" | "merged", ...})."""
        self.put_meta(f"checkpoint:{phase}", state)

    def get_checkpoint(self, phase: str) -> dict | None:
        v = self.get_meta(f"checkpoint:{phase}")
        return json.loads(v) if v is not None else None

    def put_parity(self, phase: str, df) -> None:
        self._with_batch("put_parity", df, {"phase": phase})

    def arrow(self, name: str, params: dict | None = None, *, table: str | None = None) -> pa.Table:
        """The rows of the named statement as a pyarrow Table, e.g. ``store.arrow("describe.inputs")``
        (``table``: its ``{table}``, as ``run``)."""
        import warnings

        python_layer()  # (its to_arrow_table)
        with self.translating(), warnings.catch_warnings():
            # DuckDB warns that DB-API results copy once into Arrow: fine for these tables, and
            # con.sql() would refuse while an earlier statement's result is open
            warnings.simplefilter("ignore", UserWarning)
            return self.run(name, params or {}, table=table).to_arrow_table()

    def parity_of(self, phase: str) -> pa.Table:
        return self.arrow("phase_parity", {"phase": phase})

    def words_of(self, phase: str) -> pa.Table:
        """A phase's word table (word, count), in the order ``put_words`` stored it (empty when
        it has none)."""
        name = self.words_table(phase)
        if name is None:
            return pa.table({"word": pa.array([], pa.binary()), "count": pa.array([], pa.int64())})
        return self.arrow("word_tables.read", table=name)

    def merges_of(self, phase: str) -> pa.Table:
        """A phase's merges so far, in order."""
        return self.arrow("phase_merges", {"phase": phase})

    def set_tokens(self, phase: str, words: pa.Array, counts: np.ndarray, tokens) -> None:
        """Give ``phase``'s words (``words`` with their ``counts``, as ``words_of`` returns them)
        their ``tokens`` (number of tokens of each word).

        When the stored rows are those words in that order (one run of row ids, the same number,
        the same first and last word) only their tokens' table is written again: the words stay
        as stored (while the phase merged: :meth:`toktok.resume.Journal.store_due_beside`), and the
        tokens are a twentieth of their bytes. Otherwise the words are deleted and inserted again
        with their tokens. Example: ``store.set_tokens("main", words, counts, [1] * len(words))``."""
        n = len(words)
        name = self.words_table(phase)
        first, last, stored, _ = self.run("word_tables.span", table=name).fetchall()[0] if name else (0, 0, 0, 0)
        if n and stored == n and last - first + 1 == n:
            ends = [w for (w,) in self.run("word_tables.words_at", {"first": first, "last": last},
                                           table=name).fetchall()]
            if ends == [words[i].as_py() for i in sorted({0, n - 1})]:
                with self.transaction(join=True):
                    self.run("word_tables.drop_tokens", table=name)  # (no dead blocks: a table anew)
                    self.run("word_tables.create_tokens", table=name)
                    self._with_batch("word_tables.insert_tokens", pa.table({"tokens": pa.array(tokens, pa.int32())}),
                                     {}, table_name=name)
                return
        self.drop_words(phase)
        self.put_words(phase, pa.table({"word": words, "count": pa.array(counts),
                                        "tokens": pa.array(tokens, pa.int32())}))

    def _sample_file(self, phase: str) -> Path:
        import hashlib

        return self.path.parent / f"sample-{hashlib.sha1(phase.encode()).hexdigest()[:12]}.parquet"

    def put_count_state(self, phase: str, files_done: int, used: dict, words=None, parity=None, sample=None) -> None:
        """Replace ``phase``'s counting checkpoint: the counts of its first ``files_done`` files
        (in the run file), or its finished sample (a Parquet file beside it, written by Arrow a
        slice at a time and uncompressed, so that a sample of hundreds of MB never goes through
        DuckDB's memory limit, is never copied whole, and is written and read back at the speed
        of the disk's cache), with the per-file stats and parity sample. The meta row that makes
        it count is written last: a kill before it leaves the checkpoint before."""
        if self._counting is not None:
            self._counting.add(phase)
        if sample is not None:
            path = self._sample_file(phase)
            tmp = path.with_suffix(".tmp")
            _write_sample(sample, tmp)
            os.replace(tmp, path)
            self._held[phase] = sample  # (a reference: the caller holds it meanwhile anyway)
        with self.transaction():
            self._script("drop_count_state", {"phase": phase})
            if words is not None:
                self._with_batch("put_count_parts", words, {"phase": phase})
            if parity is not None:
                self.put_parity(phase, parity)
            self.put_meta(f"count_state:{phase}", {"files_done": files_done, "used": used,
                                                   "sampled": sample is not None})

    def get_count_state(self, phase: str) -> dict | None:
        """The counting checkpoint of ``phase``: its meta plus ``words`` (Arrow), ``sample`` (a
        Polars frame: :meth:`_read_sample`) and ``parity`` (Arrow); None when there is none or its
        sample file is gone."""
        v = self.get_meta(f"count_state:{phase}")
        if v is None:
            return None
        st = json.loads(v)
        st["words"] = None if st["sampled"] else self.arrow("phase_count_parts", {"phase": phase})
        st["sample"] = None
        if st["sampled"]:
            st["sample"] = self._read_sample(phase)
            if st["sample"] is None:
                return None
        st["parity"] = self.parity_of(phase)
        return st

    def _read_sample(self, phase: str):
        """The sample file of ``phase`` as a Polars frame, the engines' own (read by Polars: a
        third of the memory and time Arrow's reader takes, whose strings it then copies); None
        when it is gone."""
        import polars as pl

        path = self._sample_file(phase)
        if not path.exists():
            return None
        try:
            return pl.read_parquet(path, memory_map=False)
        except (OSError, pl.exceptions.ComputeError):
            return None

    def drop_count_state(self, phase: str, keep_sample: bool = False) -> None:
        """``phase``'s counting checkpoint goes; its sample file too unless ``keep_sample`` (a
        later phase takes it: :meth:`keep_sample`). Nothing is deleted when this run stored
        none for ``phase`` in a file it created (three statements less in the "counted" checkpoint)."""
        if self._counting is None or phase in self._counting:
            self._script("drop_count_state", {"phase": phase})
            self.run("drop_meta", {"key": f"count_state:{phase}"})
        if not keep_sample:
            self._held.pop(phase, None)
            self._sample_file(phase).unlink(missing_ok=True)

    def keep_sample(self, phase: str, key: str, meta: dict) -> None:
        """``phase``'s sample file stays for the later phases that take it, found by their sample
        identity ``key`` (meta ``sample:KEY``: ``meta``, which names ``phase``), if it is there."""
        if self._sample_file(phase).exists():
            self.put_meta(f"sample:{key}", meta)

    def get_shared_sample(self, key: str) -> tuple[dict, object] | None:
        """(its meta, the sample: a Polars frame) of the sample kept for identity ``key``
        (:meth:`keep_sample`); None when there is none or its file is gone. The frame this run
        stored is handed over as it is, once (the store keeps no reference to it after): reading
        the file back cost a SuperBPE run a tenth of its fresh pages, and the frame's text lies
        as its counting left it, so that joining its pieces into documents copies nothing
        (:func:`toktok.count.common.whole_documents`); else the file is read."""
        v = self.get_meta(f"sample:{key}")
        if v is None:
            return None
        meta = json.loads(v)
        held = self._held.pop(meta["phase"], None)
        if held is not None and self._sample_file(meta["phase"]).exists():
            return meta, held
        table = self._read_sample(meta["phase"])
        return None if table is None else (meta, table)

    def let_go_samples(self) -> None:
        """The finished samples this store holds for later phases go from memory (their files
        stay, and are read when taken): a phase that took none calls it as it starts, so that a
        sample kept for a phase after it is not held meanwhile."""
        self._held.clear()

    def drop_shared_sample(self, key: str) -> None:
        """The sample kept for identity ``key`` goes, its file and its meta."""
        v = self.get_meta(f"sample:{key}")
        if v is None:
            return
        self.run("drop_meta", {"key": f"sample:{key}"})
        self._held.pop(json.loads(v)["phase"], None)
        self._sample_file(json.loads(v)["phase"]).unlink(missing_ok=True)

    def drop_phase(self, phase: str) -> None:
        with self.transaction(join=True):
            self.drop_words(phase)
            self._script("drop_phase", {"phase": phase})

    def drop_merges(self, phase: str) -> None:
        self.run("drop_merges", {"phase": phase})

    def drop_outputs(self) -> None:
        self._script("drop_outputs")

    def close(self) -> None:
        try:
            with self.translating():
                self.con.execute(sql("checkpoint"))
        finally:
            self.con.close()
        tmp = self.temp_dir
        if tmp.exists():
            import shutil

            shutil.rmtree(tmp, ignore_errors=True)


#: Bytes of text per row group of a sample file (each slice is copied to Arrow on its own).
SAMPLE_GROUP_BYTES = 16 << 20


def _write_sample(sample, path: Path) -> None:
    """A sample (a Polars frame, or an Arrow table) into the Parquet file ``path``, uncompressed,
    in row groups of about ``SAMPLE_GROUP_BYTES`` of text, each slice converted to Arrow on its own.
    A frame is written in the order it is counted (source, then row: any order reads back the
    same sample), in which its text lies back to back as the count left it, so that a slice's
    text goes to Arrow without a copy (:func:`toktok.count.sample.as_large_string`); the text
    is plain-encoded (a dictionary of whole documents only costs time), inside
    :func:`toktok.count.sample.roomy_heap`: the writer's page buffers, a few MB, are reused,
    where with the lean heap each page faulted ~2 MB of fresh pages in (230 MB for 100 MB)."""
    import pyarrow.parquet as pq

    if not hasattr(sample, "to_arrow"):  # an Arrow table already
        pq.write_table(sample, path, compression="none")
        return
    from .count.sample import roomy_heap

    with roomy_heap():
        _write_frame(sample.sort("source", "row"), path)


def _write_frame(sample, path: Path) -> None:
    """:func:`_write_sample` of a frame in the order given."""
    import pyarrow.parquet as pq

    from .count.sample import as_large_string

    n = sample.height
    ends = [n]
    if n:
        cum = sample["bytes"].cum_sum().to_numpy()
        marks = np.arange(SAMPLE_GROUP_BYTES, int(cum[-1]), SAMPLE_GROUP_BYTES)
        ends = sorted({int(e) for e in np.searchsorted(cum, marks, side="right")} - {0} | {n})
    start, writer = 0, None
    try:
        for end in ends:
            sl = sample.slice(start, end - start)
            part = sl.drop("text").to_arrow().append_column("text", as_large_string(sl["text"])) \
                if n and sample.columns[-1] == "text" else sl.to_arrow()
            if writer is None:
                writer = pq.ParquetWriter(path, part.schema, compression="none",
                                          use_dictionary=[c for c in part.schema.names if c != "text"])
            writer.write_table(part)
            start = end
    finally:
        if writer is not None:
            writer.close()


def arrow_of(values: np.ndarray) -> pa.Array:
    """A NumPy array of numbers as an Arrow array over the same memory: ``pa.array`` of a NumPy
    array imports ``numpy.ma`` (to ask if it is masked: ~15 ms holding the GIL, on the way to the
    merge loop). Example: ``arrow_of(np.arange(3)).to_pylist() == [0, 1, 2]``."""
    values = np.ascontiguousarray(values)
    return pa.Array.from_buffers(pa.from_numpy_dtype(values.dtype), len(values), [None, pa.py_buffer(values)])


def merges_table(start: int, left: np.ndarray, right: np.ndarray, token: np.ndarray, tokens: list[bytes],
                 count: np.ndarray, reused: np.ndarray) -> pa.Table:
    """Merges as :meth:`RunStore.add_merges` takes them: the ``k``-th numbered ``start + k``, the
    ids of its left and right parts and of the token it makes, that token's bytes, the pair's count
    when merged and whether the token existed already."""
    return pa.table({
        "merge_index": pa.array(np.arange(start, start + len(left), dtype=np.int32)),
        "left_id": pa.array(left), "right_id": pa.array(right), "token_id": pa.array(token),
        "token": pa.array(tokens, pa.binary()), "count": pa.array(count),
        "reused": pa.array(np.asarray(reused, bool)),
    })


#: Words in DuckDB's (and the OS's) messages when a write fails for lack of room.
_DISK_FULL = ("no space left", "file too large", "disk full", "disk quota", "quota exceeded")


def _unopenable(e: duckdb.Error, path: Path, existed: bool) -> OutputError:
    """Why DuckDB could not open the run file at ``path`` (``existed``: an interrupted run's), in
    one line with what to do: another process holds it, it is damaged, or the folder is not writable."""
    msg = _first_line(e)
    if "Could not set lock" in msg:
        pid = re.search(r"PID (\d+)", str(e))
        return OutputError(f"{shown(path)}: another process{f' (PID {pid.group(1)})' if pid else ''} holds the run "
                           "file open; close it (or wait for it to end), then rerun")
    if existed:
        why = ("truncated" if "read enough bytes" in msg else "not a DuckDB file" if "not a valid DuckDB" in msg
               else msg[:80])
        out = OutputError(f"{shown(path)}: the interrupted run's run file cannot be read ({why})")
        out.start_over = True  # (resume.start_over) what the run kept cannot be continued
        return out
    return OutputError(f"{shown(path)}: cannot create the run file ({msg}); "
                       "check that the folder is writable and its disk has room")


def _first_line(e: BaseException) -> str:
    lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
    return lines[0] if lines else type(e).__name__


@contextmanager
def translating(run_file: str | Path | None = None, temp_dir: str | Path | None = None,
                memory_limit: str | None = None):
    """Inside the block, a DuckDB error that means a full disk or too little memory becomes the
    ``ResourceError`` of :func:`resource_error`; any other error passes unchanged. The run store's
    own calls (``RunStore.translating``) and, as the last resort for DuckDB errors outside them, a
    whole run (``toktok.pipeline.train``) use it.
    Example: ``with translating(layout.run_file, memory_limit="64MB"): train_steps()``."""
    try:
        yield
    except duckdb.Error as e:
        te = resource_error(e, run_file, temp_dir, memory_limit)
        if te is None:
            raise
        raise te from e


def resource_error(e: BaseException, run_file: str | Path | None = None, temp_dir: str | Path | None = None,
                   memory_limit: str | None = None) -> ToktokError | None:
    """The ``ToktokError`` for a DuckDB error that means the disk (temp folder or run file) is full
    or the memory limit (``memory_limit``: as the user wrote it) is too small, naming the folder and
    saying what to do; None for any other error. Used by :func:`translating`."""
    if not isinstance(e, duckdb.Error):
        return None
    text = str(e)
    low = text.lower()
    # a failed write can also come as another kind of error, e.g. a COMMIT's TransactionException
    if not isinstance(e, (duckdb.IOException, duckdb.OutOfMemoryException)) and not (
            "could not write" in low or any(w in low for w in _DISK_FULL)):
        return None
    first = _first_line(e)
    tmp = Path(temp_dir) if temp_dir is not None else (
        Path(run_file).parent / (Path(run_file).name + ".tmp") if run_file is not None else None)
    where_tmp = f"{shown(tmp)} (DuckDB's temp folder)" if tmp is not None else "DuckDB's temp folder"
    if isinstance(e, duckdb.OutOfMemoryException):
        if "max_temp_directory_size" in low or "offload" in low:
            # DuckDB's temp quota defaults to the free space of the temp folder's disk: this is "disk full"
            return ResourceError(
                f"{where_tmp}: full, DuckDB could not spill to it ({first}); free space on that disk, "
                "or pass a larger --memory-limit so DuckDB spills less")
        limit = f" of {memory_limit}" if memory_limit else ""
        return ResourceError(
            f"{shown(run_file)}: DuckDB ran out of memory under its limit{limit} ({first}); "
            "pass a larger --memory-limit (or --budget)")
    # an IO error: which file, and why
    m = re.search(r'"([^"]+)"', text)
    file = Path(m.group(1)) if m else None
    in_tmp = file is not None and tmp is not None and (file == tmp or tmp in file.parents)
    reason = text.rsplit('": ', 1)[1].splitlines()[0].strip() if m and '": ' in text else first
    full = any(w in low for w in _DISK_FULL)
    if in_tmp:
        what = where_tmp
        todo = ("free space on that disk, or pass a larger --memory-limit so DuckDB spills less" if full
                else "check that the folder is writable")
    else:
        what = shown(file or run_file)
        todo = ("free space on that disk, or pass an --out on a disk with room" if full
                else "check that the output folder is writable and its disk has room")
    return ResourceError(f"{what}: DuckDB cannot write {'there' if in_tmp else 'it'} "
                         f"({'disk full: ' if full else ''}{reason}); {todo}")


def _duck_size(n: int) -> str:
    """A size in bytes as DuckDB takes it, in whole MiB: ``_duck_size(2 << 30) == "2048MiB"``."""
    return f"{int(n) >> 20}MiB"
