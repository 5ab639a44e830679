"""Time one BPE merge round written in SQL, to show why toktok's merge loop is not SQL.

A round needs every adjacent pair's total count and the arg max; this times only that part (no
replacement of the chosen pair, which would cost more) in DuckDB on the most frequent words of a
run file's word table, each word as a list of byte ids. 32,512 such rounds (vocab 32,768) at
half a second each would take hours; toktok's compiled loop does all of them in about a second
(bench/probes/merge_only.py).

    python bench/probes/sql_round.py out/demo/run.duckdb --words 370000 --rounds 5
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import duckdb

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: the history
import history  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run", help="a run.duckdb with a words table")
    ap.add_argument("--words", type=int, default=370_000, help="most frequent words to keep")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    history.options(ap)
    a = ap.parse_args()
    con = duckdb.connect()
    con.execute(f"set threads = {int(a.threads)}")
    con.execute("set lambda_syntax = 'ENABLE_SINGLE_ARROW'")
    con.execute(f"attach '{a.run}' as r (read_only)")
    con.execute("create table w as select word, count from r.words order by count desc, word limit $n", {"n": a.words})
    con.execute("create or replace table w as select count, list_transform(range(0, octet_length(word)), "
                "i -> ('0x' || substr(hex(word), 2 * i + 1, 2))::int) as t from w")
    words, positions = con.execute("select count(*), sum(len(t)) from w").fetchone()
    print(f"{words:,} words, {positions:,} positions, {a.threads} threads")
    rounds = []
    for k in range(a.rounds):
        t = time.perf_counter()
        best = con.execute("""select p[1] as l, p[2] as r, sum(count) as n
            from (select count, unnest(list_zip(t[1:-1], t[2:])) as p from w where len(t) > 1)
            group by l, r order by n desc, l, r limit 1""").fetchone()
        rounds.append(time.perf_counter() - t)
        print(f"round {k}: pair counts + arg max {rounds[-1]:.3f} s, best pair {best}")
    history.record(a, "sql_round", {"words": words, "positions": positions, "threads": a.threads, "rounds_s": rounds})


if __name__ == "__main__":
    main()
