"""The SQL toktok runs, by name: statements shipped as package data in ``toktok/sql/``.

The rule: ``sql("NAME")`` is the one statement of ``toktok/sql/NAME.sql`` (a file without
markers); ``sql("FILE.BLOCK")`` is block ``BLOCK`` of ``toktok/sql/FILE.sql``, where a block
starts at a line ``-- name: BLOCK`` and runs to the next such line or the end of the file (lines
before the first marker are the file's header). ``blocks("FILE")`` gives a file's statements in
order, for files run top to bottom (the schema). Text is never split on ``;``: each file or block
holds one statement (tests/test_sql.py parses every one with DuckDB to hold that). Full-line
comments are left out of the statement text, so a ``$name`` in a comment is no parameter. Values
go in as ``$name`` parameters, never into the text; a ``{table}`` in the text is the name of a
table toktok makes for itself (a phase's words: ``words_0``), filled in by :func:`named`. Example::

    con.execute(sql("get_meta"), {"key": "seed"})
    for name, text in blocks("schema"): con.execute(text)
"""
from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

#: The package's SQL folder.
_SQL = Path(__file__).resolve().parent / "sql"
#: A block's first line: ``-- name: BLOCK``.
_MARK = re.compile(r"^--\s*name:\s*(\w+)\s*$", re.M)
_PARAM = re.compile(r"\$(\w+)")
_CREATE = re.compile(r"^CREATE( OR REPLACE)? (TABLE|VIEW) ")
#: A table name toktok makes (``{table}``): lower-case letters, digits and underscores.
_TABLE = re.compile(r"[a-z][a-z0-9_]*")


def parse(text: str, file: str) -> tuple[tuple[str, str], ...]:
    """The statements of one file's ``text`` as (name, statement) pairs, by the rule above: a file
    without markers is one statement named ``file``. ValueError for an empty statement or a name
    used twice. Example: ``parse("-- name: a\\nSELECT 1;", "f") == (("a", "SELECT 1;"),)``."""
    marks = list(_MARK.finditer(text))
    if not marks:
        found = [(file, _code(text))]
    else:
        ends = [m.start() for m in marks[1:]] + [len(text)]
        found = [(m.group(1), _code(text[m.end():end])) for m, end in zip(marks, ends)]
    names = [name for name, _ in found]
    twice = [name for i, name in enumerate(names) if name in names[:i]]
    if twice:
        raise ValueError(f"toktok/sql/{file}.sql: two statements are named {twice[0]!r}")
    empty = [name for name, code in found if not code]
    if empty:
        raise ValueError(f"toktok/sql/{file}.sql: statement {empty[0]!r} is empty")
    return tuple(found)


def _code(text: str) -> str:
    return "\n".join(ln for ln in text.splitlines() if not ln.lstrip().startswith("--")).strip()


@lru_cache(maxsize=None)
def _file(file: str) -> tuple[bool, tuple[tuple[str, str], ...]]:
    path = _SQL / f"{file}.sql"
    if path.is_file():  # (the package's folder: importlib.resources costs ~9 ms of imports, zipfile's)
        text = path.read_text(encoding="utf-8")
    else:  # (a package not in a folder: a zip)
        from importlib import resources

        text = resources.files("toktok").joinpath("sql", f"{file}.sql").read_text(encoding="utf-8")
    return bool(_MARK.search(text)), parse(text, file)


def blocks(file: str) -> tuple[tuple[str, str], ...]:
    """(name, statement) of every statement of ``toktok/sql/FILE.sql``, in the file's order."""
    return _file(file)[1]


def sql(name: str) -> str:
    """The statement ``NAME`` (a file) or ``FILE.BLOCK`` (a block of a file); KeyError if none."""
    file, _, block = name.partition(".")
    marked, found = _file(file)
    if marked != bool(block):
        raise KeyError(f"{name}: toktok/sql/{file}.sql " + (
            "holds named blocks; ask for FILE.BLOCK" if marked else "is one statement; ask for FILE"))
    for n, code in found:
        if n == (block or file):
            return code
    raise KeyError(f"{name}: toktok/sql/{file}.sql has no statement {block!r}")


def params_for(statement: str, params: dict) -> dict:
    """The ``params`` that ``statement`` names (DuckDB refuses any other): a file's statements
    run with one dict. Example: ``params_for("SELECT $a", {"a": 1, "b": 2}) == {"a": 1}``."""
    named = set(_PARAM.findall(statement))
    return {k: v for k, v in params.items() if k in named}


def named(statement: str, *, table: str | None = None, selects: str | None = None) -> str:
    """``statement`` with ``{table}`` the name of a table toktok makes (ValueError for any other
    text: it is never a value) and ``{selects}`` statements of toktok's own joined (the view
    ``words``: ``word_tables.select`` once a phase). Example:
    ``named("DROP TABLE {table};", table="words_0") == "DROP TABLE words_0;"``."""
    if table is not None:
        if not _TABLE.fullmatch(table):
            raise ValueError(f"{table!r} is not a table name toktok makes")
        statement = statement.replace("{table}", table)
    if selects is not None:
        statement = statement.replace("{selects}", selects)
    return statement


def temporary(statement: str) -> str:
    """A ``CREATE [OR REPLACE] TABLE|VIEW`` statement as its ``TEMP`` form (this connection only,
    allowed on a read-only one); ValueError for any other statement."""
    out, n = _CREATE.subn(lambda m: f"CREATE{m.group(1) or ''} TEMP {m.group(2)} ", statement, count=1)
    if not n:
        raise ValueError(f"not a CREATE TABLE or VIEW statement: {statement[:40]!r}")
    return out


__all__ = ["sql", "blocks", "parse", "params_for", "named", "temporary"]
