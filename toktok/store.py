"""The run file: one DuckDB database per run holding words, merges, vocabulary and provenance.

Owns ``run.duckdb``. Writes the word table (word bytes, 64-bit count, phase), the merges (order,
left id, right id, token id and bytes, pair count when merged, reused, phase), the vocabulary,
the inputs with their sizes, stage timings, and ``meta`` (schema version, config, versions,
seed). DuckDB gets a memory limit and a temp directory so the word table spills to disk.
The SQL it runs ships in ``toktok/sql/`` and is loaded by name with ``$name`` parameters.
Example: ``RunStore.create("out/run.duckdb").put_meta("seed", "0")``.
"""
from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa

from .errors import OutputError, ToktokError

SCHEMA_VERSION = "1"


def sql(name: str) -> str:
    """The text of ``toktok/sql/NAME.sql``."""
    return resources.files("toktok").joinpath("sql", f"{name}.sql").read_text()


class RunStore:
    """A run's DuckDB file. Create with ``RunStore.create``; open an existing one with ``RunStore.open``."""

    def __init__(self, con: duckdb.DuckDBPyConnection, path: Path):
        self.con = con
        self.path = path

    @classmethod
    def create(cls, path: str | Path, memory_limit: str = "2GB", threads: int = 0) -> "RunStore":
        path = Path(path)
        tmp = path.parent / (path.name + ".tmp")
        tmp.mkdir(parents=True, exist_ok=True)
        try:
            con = duckdb.connect(str(path))
        except duckdb.Error as e:
            raise OutputError(f"{path}: cannot create the run file ({e})") from None
        con.execute(f"SET memory_limit = '{_duck_size(memory_limit)}'")
        # SET takes no parameters; the path is quoted as an SQL literal.
        con.execute("SET temp_directory = '" + str(tmp).replace("'", "''") + "'")
        con.execute("SET preserve_insertion_order = false")
        if threads:
            con.execute(f"SET threads = {int(threads)}")
        for stmt in _statements(sql("schema")):
            con.execute(stmt)
        store = cls(con, path)
        store.put_meta("schema_version", SCHEMA_VERSION)
        return store

    @classmethod
    def open(cls, path: str | Path, read_only: bool = True) -> "RunStore":
        path = Path(path)
        if path.is_dir():
            path = path / "run.duckdb"
        if not path.exists():
            raise ToktokError(f"{path}: no run file here; pass a toktok output folder or its run.duckdb")
        con = duckdb.connect(str(path), read_only=read_only)
        store = cls(con, path)
        version = store.get_meta("schema_version")
        if version != SCHEMA_VERSION:
            raise ToktokError(f"{path}: run file schema version {version!r}, this toktok reads {SCHEMA_VERSION!r}")
        return store

    def run(self, name: str, params: dict | None = None):
        return self.con.execute(sql(name), params or {})

    def put_meta(self, key: str, value) -> None:
        if not isinstance(value, str):
            value = json.dumps(value, sort_keys=True, default=str)
        self.run("put_meta", {"key": key, "value": value})

    def get_meta(self, key: str) -> str | None:
        row = self.run("get_meta", {"key": key}).fetchone()
        return row[0] if row else None

    def add_input(self, path: str, kind: str, phase: str, size_bytes: int, docs: int, text_bytes: int,
                  docs_seen: int, bytes_seen: int) -> None:
        """One input file of a phase: documents and text bytes counted (the sample), and seen."""
        self.run("add_input", dict(path=path, kind=kind, phase=phase, size_bytes=size_bytes, docs=docs,
                                   text_bytes=text_bytes, docs_seen=docs_seen, bytes_seen=bytes_seen))

    def put_words(self, phase: str, table) -> None:
        """Store a phase's word table (``word``, ``count`` and ``tokens`` after training)."""
        batch = table.to_arrow() if hasattr(table, "to_arrow") else table
        self.con.register("batch", batch)
        try:
            self.run("put_words", {"phase": phase})
        finally:
            self.con.unregister("batch")

    def add_merges(self, phase: str, table: pa.Table) -> None:
        self.con.register("batch", table)
        try:
            self.run("add_merges", {"phase": phase})
        finally:
            self.con.unregister("batch")

    def add_vocab(self, table: pa.Table) -> None:
        self.con.register("batch", table)
        try:
            self.run("add_vocab")
        finally:
            self.con.unregister("batch")

    def add_stage(self, stage: str, seconds: float) -> None:
        self.run("add_stage", {"stage": stage, "seconds": float(seconds)})

    def close(self) -> None:
        self.con.execute("CHECKPOINT")
        self.con.close()
        tmp = self.path.parent / (self.path.name + ".tmp")
        if tmp.exists():
            import shutil

            shutil.rmtree(tmp, ignore_errors=True)


def _statements(text: str) -> list[str]:
    return [s.strip() for s in text.split(";") if s.strip() and not all(
        line.strip().startswith("--") or not line.strip() for line in s.splitlines())]


def _duck_size(s: str) -> str:
    """Normalise a human size ('512MB', '8GB', '2GiB') for DuckDB; raises on nonsense."""
    from .config import parse_size

    return f"{parse_size(s) // (1 << 20)}MiB"
