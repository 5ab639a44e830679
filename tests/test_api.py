"""toktok.train from Python (issue 16): the same documents in every form give the same tokenizer,
seeded sampling of data in memory, names in the run file, TrainResult, phases and configs, errors
before any work, resume on re-iterable data (refused on one-shot iterators), one option registry
behind the CLI, YAML and keywords, and an import that leaves the process as it found it."""
from __future__ import annotations

import inspect
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import FIXTURES, ROOT

import toktok
from toktok.errors import ConfigError, InputError, ToktokError
from toktok.rundir import RUN_FILE

MERGES = 120


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> dict:
    """sample.parquet's documents with nulls among them, a second column and the text in ``body``
    (a special token inside some documents), as a Parquet file and as an Arrow table."""
    d = tmp_path_factory.mktemp("api_corpus")
    texts = pq.read_table(FIXTURES / "sample.parquet").column("text").to_pylist()[:300]
    texts = [t + " <|endoftext|> " + t[:50] if k % 7 == 0 else t for k, t in enumerate(texts)]
    texts = [None if k % 11 == 5 else t for k, t in enumerate(texts)]
    table = pa.table({"id": list(range(len(texts))), "body": pa.array(texts, pa.string())})
    path = d / "docs.parquet"
    pq.write_table(table, path, row_group_size=64)
    return {"path": path, "table": table, "texts": [t for t in texts if t is not None], "all": texts, "dir": d}


def _train(src, out: Path, **kw) -> toktok.TrainResult:
    kw.setdefault("merges", MERGES)
    kw.setdefault("verbose", False)
    return toktok.train(src, out=out, special_tokens=["<|endoftext|>"], **kw)


def _forms(c: dict) -> dict:
    import datasets
    import pandas as pd
    import polars as pl
    import pyarrow.dataset as pads

    t = c["table"]
    return {
        "table": lambda: t,
        "polars": lambda: pl.from_arrow(t),
        "lazyframe": lambda: pl.scan_parquet(c["path"]),
        "pandas": lambda: t.to_pandas(),
        "dataset": lambda: datasets.Dataset(t),
        "iterable_dataset": lambda: datasets.Dataset(t).to_iterable_dataset(num_shards=3),
        "reader": lambda: pa.RecordBatchReader.from_batches(t.schema, t.to_batches(max_chunksize=17)),
        "arrow_dataset": lambda: pads.dataset(c["path"]),
        "list": lambda: [c["all"]],  # a list of texts is one source: [texts]; its None are skipped as nulls
        "generator": lambda: (x for x in c["texts"]),
    }


def test_every_form_of_the_same_documents_gives_the_same_tiktoken(corpus, tmp_path):
    ref = _train(toktok.Source(corpus["path"], text_column="body"), tmp_path / "path")
    want = ref.tiktoken.read_bytes()
    assert ref.vocab_size == 256 + 1161 + MERGES + 1
    for name, make in _forms(corpus).items():
        r = _train(make(), tmp_path / name, text_column="body")
        assert r.tiktoken.read_bytes() == want, name
        assert (r.docs, r.text_bytes, r.words) == (ref.docs, ref.text_bytes, ref.words), name
        con = r.run()
        assert con.execute("select path, kind, docs, text_bytes from inputs").fetchall() == [
            ("source-1", "memory", ref.docs, ref.text_bytes)], name
        con.close()


def test_result_gives_the_encoding_the_hf_tokenizer_and_the_run(corpus, tmp_path):
    r = _train([corpus["texts"]], tmp_path / "o")
    assert r.out == tmp_path / "o" and r.tiktoken == tmp_path / "o" / "tokenizer.tiktoken"
    assert set(r.files) == {"tokenizer.tiktoken", "tokenizer.json", "tokenizer_config.json",
                            "special_tokens_map.json", "run.duckdb"}
    assert all(p.is_file() for p in r.files.values())
    assert [(p.name, p.merges_learned) for p in r.phases] == [("main", MERGES)]
    text = "Hello world <|endoftext|> and more text, 中文 too"
    ids = r.encoding.encode(text, allowed_special="all")
    from transformers import PreTrainedTokenizerFast

    tok = r.hf()  # a ready transformers tokenizer: the same ids, the run's roles
    assert isinstance(tok, PreTrainedTokenizerFast) and tok.eos_token == "<|endoftext|>"
    assert ids == tok.encode(text) == tok(text)["input_ids"] and r.encoding.decode(ids) == tok.decode(ids) == text
    con = r.run()
    assert con.execute("select count(*) from merges").fetchone()[0] == MERGES
    with pytest.raises(duckdb.Error):
        con.execute("create table x (a int)")  # read-only
    con.close()


def test_a_budget_samples_data_in_memory_reproducibly(corpus, tmp_path):
    import polars as pl

    def run(src, out, seed):
        r = toktok.train(phases=[toktok.Phase("main", merges=MERGES, sources=[src], budget="60KB")],
                         out=out, seed=seed, verbose=False, text_column="body")
        con = r.run()
        got = (con.execute("select docs, docs_seen, text_bytes from inputs").fetchone(),
               con.execute("select source, row from parity order by hash").fetchall())
        con.close()
        return r.tiktoken.read_bytes(), got

    t = corpus["table"]
    a = run(toktok.Source(t, name="wiki"), tmp_path / "a", 1)
    assert a[1][0][0] < a[1][0][1] and a[1][0][2] <= 60_000  # sampled: fewer pieces kept than seen
    assert run(toktok.Source(t, name="wiki"), tmp_path / "b", 1) == a  # the same seed, the same sample
    # the identity of a document is (name, row): another form of the same rows samples the same
    assert run(toktok.Source(pl.from_arrow(t), name="wiki"), tmp_path / "c", 1) == a
    assert run(toktok.Source(t, name="wiki"), tmp_path / "d", 2)[1] != a[1]  # another seed, another sample
    # a generator is read once, sampled in the same pass
    g = run(toktok.Source((x for x in t.column("body").to_pylist()), name="wiki"), tmp_path / "e", 1)
    assert g[0] == a[0]


def test_show_and_sql_read_a_run_on_data_in_memory(corpus, tmp_path):
    from typer.testing import CliRunner

    from toktok.cli import app

    r = toktok.train([toktok.Source(corpus["texts"], name="my texts")], out=tmp_path / "o", merges=10,
                     budget="4GB", verbose=False)
    shown = CliRunner().invoke(app, ["show", str(r.out)])
    assert shown.exit_code == 0 and "my texts" in shown.output and "budget 4GB" in shown.output and "memory 2GB" in shown.output, shown.output
    q = CliRunner().invoke(app, ["sql", str(r.out), "select path, kind from sources", "--csv"])
    assert q.exit_code == 0 and "my texts,memory" in q.output, q.output


def test_names_label_the_sources_in_the_run_file(corpus, tmp_path):
    t = corpus["table"]
    r = toktok.train([t, toktok.Source(t, name="wiki", weight=2), t, corpus["path"]], out=tmp_path / "o",
                     merges=20, text_column="body", budget="4GB", verbose=False)
    con = r.run()
    paths = [p for (p,) in con.execute("select path from sources order by path").fetchall()]
    stored = json.loads(con.execute("select value from meta where key = 'config'").fetchone()[0])
    con.close()
    assert paths == sorted(["source-1", "wiki", "source-2", str(corpus["path"])])
    assert [s["path"] if isinstance(s, dict) else s for s in stored["sources"]] == [
        "source-1", "wiki", "source-2", str(corpus["path"])]
    assert stored["sources"][1] == {"path": "wiki", "weight": 2.0, "text_column": None, "kind": "memory",
                                   "storage_options": None}


def test_phases_and_a_config_with_keywords_on_top(corpus, tmp_path, monkeypatch):
    import pandas as pd

    r = toktok.train(phases=[toktok.Phase("en", merges=30, sources=[pd.DataFrame({"text": corpus["texts"]})]),
                             toktok.Phase("notes", merges=20, sources=str(FIXTURES / "notes.txt"))],
                     out=tmp_path / "p", verbose=False)
    assert [(p.name, p.merges_learned) for p in r.phases] == [("en", 30), ("notes", 20)]
    monkeypatch.chdir(tmp_path)
    (tmp_path / "run.yaml").write_text(
        f"output: out/x.tiktoken\nseed: 4\nphases: [{{name: a, merges: 9, sources: [{{file: {FIXTURES / 'notes.txt'}}}]}}]\n")
    r = toktok.train(config="run.yaml", merges=12, memory_limit="256MB", verbose=False)
    assert r.tiktoken == Path("out/x.tiktoken") and r.merges_learned == 12
    con = r.run()
    cfg = json.loads(con.execute("select value from meta where key = 'config'").fetchone()[0])
    con.close()
    assert cfg["seed"] == 4 and cfg["memory_limit"] == 256 * 10**6 and cfg["phases"][0]["merges"] == 12


def _one_line(e: pytest.ExceptionInfo, *needles: str) -> str:
    msg = str(e.value)
    assert "\n" not in msg and all(n in msg for n in needles), msg
    return msg


@pytest.mark.parametrize("make, kind, needles", [
    (lambda c: c["table"], InputError, ["source-1: no column 'text' (columns: id, body)", "text_column=NAME"]),
    (lambda c: toktok.Source(c["table"].select(["id"]), name="ids", text_column="id"), InputError,
     ["ids: column 'id' has type int64, not string"]),
    (lambda c: [["a text", 3]], InputError, ["source-1: row 1: expected a str, got int"]),
    (lambda c: [["fine", "bad \ud800 text"]], InputError, ["source-1: row 1: a lone surrogate", "bad_utf8='replace'"]),
    (lambda c: 42, ConfigError, ["source-1: int is not a source"]),
    (lambda c: [{"text": "a dict"}], ConfigError, ["source-1: dict is not a source"]),
    (lambda c: [toktok.Source(c["texts"], name="a"), toktok.Source(c["texts"], name="a")], ConfigError,
     ["two sources are named 'a'"]),
    (lambda c: ["hello world, a text", "another text"], InputError,
     ["a list of 2 str that are not paths", "'hello world, a text'", "pass [texts] or toktok.Source(texts)"]),
])
def test_bad_sources_fail_before_any_work_in_one_line(corpus, tmp_path, make, kind, needles):
    with pytest.raises(kind) as e:
        toktok.train(make(corpus), out=tmp_path / "o", merges=5, verbose=False)
    _one_line(e, *needles)
    assert not (tmp_path / "o").exists() and not list(tmp_path.glob(".o.partial*"))


@pytest.mark.parametrize("kw, needles", [
    ({"merges": -5}, ["merges -5 is less than 0; pass 0 or more"]),
    ({"merges": "ten"}, ["merges 'ten' is not a whole number"]),
    ({"budget": "lots"}, ["budget size 'lots' is not understood"]),
    ({"memory_limit": "1MB"}, ["memory_limit 1MB is too small for DuckDB"]),
    ({"bad_utf8": "ignore"}, ["bad_utf8 'ignore': use error, replace or skip"]),
    ({"special_tokens": ["<|x|>", "<|x|>"]}, ["special_tokens '<|x|>' is given twice"]),
    ({"roles": {"eos_token": "<|nope|>"}}, ["eos_token '<|nope|>' is not one of the special tokens"]),
    ({"resume": True, "data": "generator"}, ["resume=True: source-1 is a one-shot generator", "force=True"]),
])
def test_bad_options_name_the_keyword(corpus, tmp_path, kw, needles):
    data = (x for x in corpus["texts"]) if kw.pop("data", None) == "generator" else [corpus["texts"]]
    with pytest.raises(ToktokError) as e:
        toktok.train(data, out=tmp_path / "o", verbose=False, **kw)
    _one_line(e, *needles)
    assert not (tmp_path / "o").exists()


def test_no_output_and_a_failing_generator(tmp_path):
    with pytest.raises(ConfigError) as e:
        toktok.train([["text"]], merges=5)
    _one_line(e, "no output given; pass out='DIR'")

    def broken():
        yield "fine"
        raise RuntimeError("the network went away")

    with pytest.raises(InputError) as e:
        toktok.train(broken(), out=tmp_path / "o", merges=5, verbose=False)
    _one_line(e, "source-1: cannot read the generator (RuntimeError: the network went away)")
    assert isinstance(e.value.__cause__, RuntimeError) and not (tmp_path / "o").exists()


def test_one_generator_given_twice_is_refused(corpus, tmp_path):
    g = (x for x in corpus["texts"])
    with pytest.raises(ConfigError) as e:
        toktok.train(phases=[toktok.Phase("a", merges=5, sources=[g]), toktok.Phase("b", merges=5, sources=[g])],
                     out=tmp_path / "o")
    _one_line(e, "source-2: the same one-shot generator as source-1", "give it once")


# --- resume ----------------------------------------------------------------------------------

RESUME = """\
import sys, pyarrow.parquet as pq, toktok
t = pq.read_table(sys.argv[1])
if sys.argv[3] == "changed":
    import pyarrow as pa
    body = t.column("body").to_pylist()
    body[3] = (body[3] or "") + " changed"
    t = t.set_column(1, "body", pa.array(body, pa.string()))
toktok.train(toktok.Source(t, name="wiki"), out=sys.argv[2], merges=400, text_column="body", verbose=False,
             special_tokens=["<|endoftext|>"], resume=sys.argv[4] == "resume")
"""


def _script(tmp_path: Path, *args: str, fault: int | None = None) -> subprocess.CompletedProcess:
    """The RESUME script, checkpointing deterministically; killed (SIGKILL) right after its
    ``fault``-th checkpoint when given (tests/faults.py)."""
    import faults

    (tmp_path / "run.py").write_text(RESUME)
    return subprocess.run(faults.command(every=0, kill_at=fault) + [str(tmp_path / "run.py"), *args],
                          capture_output=True, text=True, timeout=600)


def test_a_table_resumes_and_a_changed_one_is_detected(corpus, tmp_path):
    p = str(corpus["path"])
    assert _script(tmp_path, p, str(tmp_path / "ref"), "same", "new").returncode == 0
    r = _script(tmp_path, p, str(tmp_path / "o"), "same", "new", fault=3)
    assert r.returncode == -9, r.stderr  # killed after its third checkpoint
    assert not (tmp_path / "o").exists() and (tmp_path / ".o.partial" / RUN_FILE).is_file()
    r = _script(tmp_path, p, str(tmp_path / "o"), "changed", "resume")
    assert r.returncode == 1 and "wiki" in r.stderr and "changed since the interrupted run read it" in r.stderr
    r = _script(tmp_path, p, str(tmp_path / "o"), "same", "resume")
    assert r.returncode == 0, r.stderr
    for f in ("tokenizer.tiktoken", "tokenizer.json"):
        assert (tmp_path / "o" / f).read_bytes() == (tmp_path / "ref" / f).read_bytes(), f


# --- one definition of every option ----------------------------------------------------------


def test_every_cli_flag_and_yaml_key_is_a_keyword_of_train_and_back():
    import typer

    from toktok.cli import app
    from toktok.config import TrainConfig
    from toktok.options import CLI_ONLY, OPTION, OPTIONS, PYTHON_ONLY, cli_flags, yaml_keys

    kw = set(inspect.signature(toktok.train).parameters)
    train_cmd = next(c for c in typer.main.get_command(app).commands.values() if c.name == "train")
    flags = {o for p in train_cmd.params for o in [*p.opts, *p.secondary_opts] if o.startswith("--")}
    known = cli_flags()
    # every flag of `toktok train` is an option's, and that option is a keyword of toktok.train
    for f in flags - set(CLI_ONLY):
        name, key = known[f]
        assert name in kw, f
        assert key is None or key in OPTION[name].keys, f
    # every YAML key is a keyword: of toktok.train (top level), toktok.Phase, or toktok.Source
    phase_kw = set(inspect.signature(toktok.Phase).parameters)
    source_kw = set(inspect.signature(toktok.Source).parameters)
    assert yaml_keys("run") <= kw
    assert yaml_keys("phase") <= phase_kw
    assert yaml_keys("source") - {"path", "file"} <= source_kw  # path: / file: are Source(data)
    # ... and back: every keyword of toktok.train is an option with a flag or a YAML key
    for k in kw - set(PYTHON_ONLY):
        o = OPTION[k]
        assert o.cli or o.key_flags or o.yaml, k
        assert "run" in o.scope, k
    assert {o.name for o in OPTIONS if "run" in o.scope} == kw - set(PYTHON_ONLY)
    assert set(PYTHON_ONLY) <= kw and set(CLI_ONLY) <= flags
    # the help, the defaults and the flags come from the one definition
    by_flag = {p.opts[0]: p for p in train_cmd.params if p.opts}
    for o in OPTIONS:
        if o.cli:
            assert by_flag[o.cli[0].split("/")[0]].help.replace("\\[", "[") == o.help, o.name
        if o.name in {f.name for f in __import__("dataclasses").fields(TrainConfig)} and o.name not in ("phases", "sources"):
            default = getattr(TrainConfig(), o.name)
            assert default == (list(o.default) if isinstance(o.default, tuple) else o.default), o.name
        assert inspect.signature(toktok.train).parameters.get(o.name, inspect.Parameter("x", 3, default=None)).default is None


def test_the_cli_and_the_library_give_the_same_run(tmp_path):
    from typer.testing import CliRunner

    from toktok.cli import app

    args = [str(FIXTURES / "notes.txt"), "--out", str(tmp_path / "cli"), "--merges", "40", "-s", "<|endoftext|>",
            "--eos-token", "<|endoftext|>", "--budget", "4GB", "--working-set-mb", "64", "--seed", "3", "-q"]
    r = CliRunner().invoke(app, ["train", *args])
    assert r.exit_code == 0, r.output
    lib = toktok.train(str(FIXTURES / "notes.txt"), out=tmp_path / "lib", merges=40, special_tokens=["<|endoftext|>"],
                       roles={"eos_token": "<|endoftext|>"}, budget="4GB", working_set_mb=64, seed=3, verbose=False)
    for f in ("tokenizer.tiktoken", "tokenizer.json", "tokenizer_config.json"):
        assert (tmp_path / "cli" / f).read_bytes() == (lib.out / f).read_bytes(), f


# --- import ----------------------------------------------------------------------------------

IMPORT = """\
import os, sys, json
before = dict(os.environ)
import toktok
after = dict(os.environ)
heavy = sorted(m for m in ("pyarrow", "polars", "duckdb", "numba", "numpy", "tokenizers", "tiktoken", "typer")
               if m in sys.modules)
print(json.dumps({"env": before == after, "heavy": heavy, "train": callable(toktok.train)}))
"""


def test_import_toktok_changes_no_environment_variable_and_loads_no_stage():
    env = {k: v for k, v in os.environ.items() if k != "ARROW_DEFAULT_MEMORY_POOL"}
    r = subprocess.run([sys.executable, "-c", IMPORT], capture_output=True, text=True, env=env, cwd=ROOT, timeout=120)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == {"env": True, "heavy": [], "train": True}


def test_a_run_puts_the_allocators_back(tmp_path):
    code = textwrap.dedent(f"""
        import os, json, pyarrow as pa, toktok
        pool = pa.default_memory_pool().backend_name
        seen = []
        toktok.train([["some text here and there"] * 50], out={str(tmp_path / 'o')!r}, merges=5, verbose=False,
                     progress=lambda *a: seen.append((pa.default_memory_pool().backend_name,
                                                      os.environ.get("ARROW_DEFAULT_MEMORY_POOL"))))
        print(json.dumps([pool, pa.default_memory_pool().backend_name,
                          os.environ.get("ARROW_DEFAULT_MEMORY_POOL"), sorted(set(map(tuple, seen)))]))
    """)
    env = {k: v for k, v in os.environ.items() if k != "ARROW_DEFAULT_MEMORY_POOL"}
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    before, after, var, during = json.loads(r.stdout)
    assert before == after != "system" and var is None
    assert during == [["system", "system"]]


GIVES_BACK = """\
import json, sys, time
import numpy as np
{before}
import polars as pl
def rss():
    return next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmRSS:")) >> 10
frame = pl.DataFrame({{"x": np.random.default_rng(0).random(20_000_000)}}).sort("x")  # ~160 MB
held = rss()
del frame
time.sleep(0.2)
print(json.dumps({{"set": set_it, "freed_mb": held - rss()}}))
"""


@pytest.mark.parametrize("user_value", [None, "dirty_decay_ms:10000"])
def test_the_command_has_polars_give_freed_memory_back(user_value):
    # what main() does before any command: Polars' jemalloc then returns a dropped 160 MB frame at
    # once; a setting of the user's stands (theirs comes after toktok's: the later one wins)
    env = {k: v for k, v in os.environ.items() if k != "_RJEM_MALLOC_CONF"}
    if user_value is not None:
        env["_RJEM_MALLOC_CONF"] = user_value
    code = GIVES_BACK.format(before="from toktok.alloc import polars_gives_back; set_it = polars_gives_back()")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    assert got["set"] is True
    if user_value is None:
        assert got["freed_mb"] > 120
    else:  # the user's 10 s decay kept the pages
        assert got["freed_mb"] < 60
    # the console script sets it for the whole process, its children included
    r = subprocess.run([sys.executable, "-c", "import os, sys\nfrom toktok.cli import main\nsys.argv = ['toktok', '--help']\n"
                        "try:\n    main()\nexcept SystemExit:\n    pass\nprint(os.environ.get('_RJEM_MALLOC_CONF'))"],
                       capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[-1] == ",".join(v for v in ("dirty_decay_ms:0,muzzy_decay_ms:0", user_value) if v)


ARROW_GIVES_BACK = """\
import json, os, sys
{before}
import pyarrow as pa
from toktok.count.read import read_corpus
n = sum(len(b.texts) for b in read_corpus([sys.argv[1]]).batches(1 << 16))
print(json.dumps({{"set": set_it, "docs": n, "mimalloc_peak": pa.mimalloc_memory_pool().max_memory(),
                  "var": os.environ.get("ARROW_DEFAULT_MEMORY_POOL")}}))
"""


@pytest.mark.parametrize("user_value", [None, "mimalloc"])
def test_the_command_has_arrows_readers_allocate_from_the_system(tmp_path, user_value):
    # what main() does before any command: Arrow's C++ code (the Parquet reader's pages and
    # dictionaries) allocates from the system allocator, which gives freed memory back, instead
    # of mimalloc, which kept 60-120 MB of it under the merge loop; a choice of the user's stands
    import pyarrow as pa
    import pyarrow.parquet as pq

    p = tmp_path / "t.parquet"
    pq.write_table(pa.table({"text": [f"doc {i} " * 50 for i in range(2000)]}), p)
    env = {k: v for k, v in os.environ.items() if k != "ARROW_DEFAULT_MEMORY_POOL"}
    if user_value is not None:
        env["ARROW_DEFAULT_MEMORY_POOL"] = user_value
    code = ARROW_GIVES_BACK.format(before="from toktok.alloc import arrow_gives_back; set_it = arrow_gives_back()")
    r = subprocess.run([sys.executable, "-c", code, str(p)], capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    assert got["docs"] == 2000 and got["set"] is (user_value is None)
    if user_value is None:
        assert got["var"] == "system" and got["mimalloc_peak"] == 0
    else:
        assert got["var"] == "mimalloc" and got["mimalloc_peak"] > 0
    # the console script sets it for the whole process (the verifier's process inherits it)
    r = subprocess.run([sys.executable, "-c", "import os, sys\nfrom toktok.cli import main\nsys.argv = ['toktok', '--help']\n"
                        "try:\n    main()\nexcept SystemExit:\n    pass\nprint(os.environ.get('ARROW_DEFAULT_MEMORY_POOL'))"],
                       capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[-1] == (user_value or "system")


def test_storage_options_is_one_entry_of_run_and_source_scope(tmp_path):
    """storage_options (URL sources) is one registry entry: the YAML loader takes the key at the top
    and in a source, checks it, names its location in errors (never its value), and the stored
    config redacts its secrets; toktok.train and toktok.Source take it as a keyword."""
    import inspect

    from toktok import options
    from toktok.config import load_config

    cfg = tmp_path / "run.yaml"
    cfg.write_text("output: o/x.tiktoken\nstorage_options: {key: AKIA1, secret: s3cr3t, endpoint_url: 'http://h:1'}\n"
                   "phases: [{name: a, merges: 1, sources: [{path: 's3://b/x', storage_options: {anon: true}}]}]\n")
    c = load_config(cfg)
    assert c.storage_options == {"key": "AKIA1", "secret": "s3cr3t", "endpoint_url": "http://h:1"}
    assert c.phases[0].sources[0].storage_options == {"anon": True}
    assert options.redacted("storage_options", c.storage_options) == {"key": "***", "secret": "***",
                                                                      "endpoint_url": "http://h:1"}
    stored = json.dumps(c.to_dict())
    assert "AKIA1" not in stored and "s3cr3t" not in stored and "http://h:1" in stored
    cfg.write_text("output: o/x.tiktoken\nphases: [{name: a, merges: 1, sources: [{path: x, storage_options: 3}]}]\n")
    with pytest.raises(ConfigError, match=r"run.yaml: phases\[0\].sources\[0\].storage_options: expected a mapping"):
        load_config(cfg)
    assert "storage_options" in inspect.signature(toktok.train).parameters
    assert toktok.Source("s3://b/x", storage_options={"anon": True}).storage_options == {"anon": True}


def test_new_keys_and_flags_from_the_registry(tmp_path, monkeypatch):
    """Options that had only one of a flag or a key get the other from the registry: memory_limit:
    in a config (named there in errors), --working-set-mb on the command line."""
    from typer.testing import CliRunner

    from toktok.cli import app
    from toktok.config import load_config

    monkeypatch.chdir(tmp_path)
    phase = f"phases: [{{name: a, merges: 5, sources: [{{file: {FIXTURES / 'notes.txt'}}}]}}]\n"
    (tmp_path / "ok.yaml").write_text("output: o/x.tiktoken\nmemory_limit: 256MB\n" + phase)
    assert load_config("ok.yaml").memory_limit == 256 * 10**6
    (tmp_path / "small.yaml").write_text("output: o/x.tiktoken\nmemory_limit: 1MB\n" + phase)
    r = CliRunner().invoke(app, ["-c", "small.yaml", "-q"])
    assert r.exit_code == 2 and "small.yaml: memory_limit: 1MB is too small for DuckDB" in r.output, r.output
    r = CliRunner().invoke(app, ["-c", "ok.yaml", "--working-set-mb", "1", "-q"])
    assert r.exit_code == 0, r.output
    con = duckdb.connect(str(tmp_path / "o" / RUN_FILE), read_only=True)
    cfg = json.loads(con.execute("select value from meta where key = 'config'").fetchone()[0])
    con.close()
    assert cfg["working_set_mb"] == 1 and cfg["memory_limit"] == 256 * 10**6
