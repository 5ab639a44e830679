"""The SQL toktok runs: named statements in toktok/sql/ (toktok.statements), and none inline in Python."""
import ast
import re
from pathlib import Path

import duckdb
import pytest

from toktok import statements
from toktok.statements import blocks, named, params_for, parse, sql, temporary
from toktok.store import INSIGHT_TABLES

ROOT = Path(__file__).resolve().parent.parent
SQL_DIR = ROOT / "toktok" / "sql"
FILES = sorted(p.stem for p in SQL_DIR.glob("*.sql"))


def test_the_block_rule():
    text = ("-- header, not a statement\n-- name: first\n-- about first; with a $gone in it\nSELECT $a;\n"
            "-- name: second\nSELECT 'a;b'\nFROM t;\n")
    assert parse(text, "f") == (("first", "SELECT $a;"), ("second", "SELECT 'a;b'\nFROM t;"))
    # a file without markers is one statement, named after the file; never split on ';'
    assert parse("-- c\nSELECT 1; SELECT 2;\n", "f") == (("f", "SELECT 1; SELECT 2;"),)
    with pytest.raises(ValueError, match="two statements are named 'a'"):
        parse("-- name: a\nSELECT 1;\n-- name: a\nSELECT 2;\n", "f")
    with pytest.raises(ValueError, match="statement 'b' is empty"):
        parse("-- name: a\nSELECT 1;\n-- name: b\n-- only a comment\n", "f")


def test_names_reach_files_and_blocks():
    assert sql("get_meta") == "SELECT value FROM meta WHERE key = $key;"
    assert sql("describe.vocab_size") == "SELECT count(*) FROM vocab;"
    assert [n for n, _ in blocks("schema")][:2] == ["meta", "inputs"]
    with pytest.raises(KeyError, match="holds named blocks"):
        sql("schema")
    with pytest.raises(KeyError, match="is one statement"):
        sql("get_meta.x")
    with pytest.raises(KeyError, match="no statement 'nope'"):
        sql("describe.nope")
    assert params_for("SELECT $a, $ab", {"a": 1, "ab": 2, "b": 3}) == {"a": 1, "ab": 2}
    assert temporary("CREATE OR REPLACE VIEW v AS SELECT 1") == "CREATE OR REPLACE TEMP VIEW v AS SELECT 1"
    assert temporary("CREATE TABLE IF NOT EXISTS t (a INT)") == "CREATE TEMP TABLE IF NOT EXISTS t (a INT)"
    with pytest.raises(ValueError):
        temporary("DELETE FROM t")
    # a table's name fills {table} only when it is one toktok makes: never a value
    assert named(sql("word_tables.drop"), table="words_12") == "DROP TABLE IF EXISTS words_12;"
    for bad in ("words; DROP TABLE meta", "Words_0", "w'0", ""):
        with pytest.raises(ValueError, match="not a table name toktok makes"):
            named(sql("word_tables.drop"), table=bad)


@pytest.mark.parametrize("file", FILES)
def test_every_statement_is_exactly_one(file):
    """Each file (or each block of a file) parses to one DuckDB statement: nothing relies on
    splitting text on ';'."""
    found = blocks(file)
    assert found
    for name, text in found:
        text = named(text, table="words_0", selects="SELECT 1")  # (a table toktok names: word_tables.sql)
        assert len(duckdb.extract_statements(text)) == 1, f"{file}.{name} holds several statements"


def test_insight_tables_have_their_blocks():
    names = [n for n, _ in blocks("insight_tables")]
    assert tuple(names) == INSIGHT_TABLES
    rows = dict(blocks("insight_rows"))
    for t in INSIGHT_TABLES:
        assert rows[f"clear_{t}"].startswith(f"DELETE FROM {t}")
        assert rows[f"fill_{t}"].startswith(f"INSERT INTO {t} ")


def test_every_named_statement_the_code_asks_for_exists():
    """The names given to sql()/run()/arrow()/blocks() in toktok/ as string literals resolve."""
    asked = set()
    for path in (ROOT / "toktok").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", None)) in (
                    "sql", "run", "arrow", "blocks", "_script", "_with_batch") and node.args:
                a = node.args[0]
                if isinstance(a, ast.Constant) and isinstance(a.value, str) and re.fullmatch(r"\w+(\.\w+)?", a.value):
                    asked.add((node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id, a.value))
    assert len(asked) > 20
    for how, name in asked:
        if how in ("blocks", "_script"):
            assert blocks(name), name
        else:
            assert sql(name), name


# SQL at the start of a string: a statement written in Python instead of toktok/sql/.
_SQL_START = re.compile(
    r"^\s*(SELECT\s+(\S.*\bFROM\s+\w|[\d'$(*])|INSERT\s+(OR\s+\w+\s+)?INTO\b|DELETE\s+FROM\b|"
    r"UPDATE\s+\w+\s+SET\b|CREATE\s+(OR\s+REPLACE\s+)?(TEMP\w*\s+)?(TABLE|VIEW|INDEX|MACRO|SEQUENCE)\b|"
    r"DROP\s+(TABLE|VIEW)\b|ALTER\s+TABLE\b|WITH\s+\w+\s+AS\s*\(|SET\s+\w+\s*=|RESET\s+\w+\s*;?\s*$|"
    r"ATTACH\s+(DATABASE\s+)?['$]|COPY\s+\w+\s+(TO|FROM)\b|PRAGMA\s+\w+|"
    # one-word statements count in capitals only ("begin" and "checkpoint" are also plain words)
    r"(?-i:(BEGIN(\s+TRANSACTION)?|COMMIT|ROLLBACK|CHECKPOINT))\s*;?\s*$)",
    re.I | re.S)


def _strings(tree: ast.AST):
    """Every string constant and f-string (its literal parts joined), with its line, docstrings aside."""
    docs = {id(n.body[0].value) for n in ast.walk(tree)
            if isinstance(n, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and n.body
            and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
    for n in ast.walk(tree):
        if isinstance(n, ast.JoinedStr):
            yield n.lineno, "".join(v.value if isinstance(v, ast.Constant) else " x " for v in n.values)
        elif isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs:
            yield n.lineno, n.value


def inline_sql(source: str) -> list[tuple[int, str]]:
    """(line, text) of SQL written inline in Python ``source``: a string that starts like a
    statement, or a string built in place as the statement of ``.execute(...)``/``.sql(...)``."""
    tree = ast.parse(source)
    found = [(line, s) for line, s in _strings(tree) if _SQL_START.match(s)]
    for n in ast.walk(tree):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in (
                "execute", "sql", "executemany", "query") and n.args:
            a = n.args[0]
            if isinstance(a, (ast.JoinedStr, ast.BinOp)) or (isinstance(a, ast.Constant) and isinstance(a.value, str)):
                found.append((n.lineno, ast.unparse(a)[:60]))
    return found


def test_the_inline_sql_scan_finds_inline_sql():
    assert inline_sql('con.execute("SELECT count(*) FROM merges")')
    assert inline_sql('con.execute(f"DELETE FROM {name}")')
    assert inline_sql('q = "insert into meta values (1, 2)"')
    assert inline_sql('con.execute("BEGIN TRANSACTION")')
    assert inline_sql("con.execute(\"SET memory_limit = '\" + x + \"'\")")
    assert inline_sql('con.sql(text + " LIMIT 3")')
    assert inline_sql('x = f"CREATE OR REPLACE VIEW {v} AS SELECT 1"')
    assert not inline_sql('con.execute(sql("get_meta"), {"key": k})')
    assert not inline_sql('"""Select the rows. SELECT in a docstring is prose."""\nx = "select the best one"')
    assert not inline_sql('mode = "begin"\nname = "describe"')


def test_no_inline_sql_in_toktok():
    """SQL the code runs lives in toktok/sql/ (loaded by name with $params), never in Python strings."""
    found = []
    for path in sorted((ROOT / "toktok").rglob("*.py")):
        found += [f"{path.relative_to(ROOT)}:{line}: {text[:60]!r}"
                  for line, text in inline_sql(path.read_text(encoding="utf-8"))]
    assert not found, "inline SQL (move it to toktok/sql/NAME.sql):\n" + "\n".join(found)


def test_statements_are_read_from_the_package():
    assert statements.__file__.startswith(str(ROOT / "toktok"))
    assert (SQL_DIR / "sandbox.sql").is_file() and any((SQL_DIR / "ready").glob("*.sql"))
