"""--engine ray (toktok/count/ray.py) gives the local engine's output, byte for byte.

One private Ray cluster for the module (2 CPUs, loopback only, no dashboard); each test trains on
data_fixtures/ with the local engine and with Ray (same seed), without a budget and with text
budgets small enough that the reservoirs are full, and compares the run files' word tables and
inputs and the tokenizer files. Parquet files are cut into row-group ranges (UNIT_BYTES lowered)
so that the range readers are exercised too. CI installs the ray extra (make test); elsewhere the
module is skipped without Ray.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import duckdb
import polars as pl
import pyarrow as pa
import faults
import pytest
from conftest import FIXTURES, ROOT

if os.environ.get("CI"):
    import ray  # CI installs toktok[ray]: a missing Ray fails there instead of skipping
else:
    ray = pytest.importorskip("ray")

from toktok.count import ray as engine_ray  # noqa: E402
from toktok.config import PhaseConfig, SourceConfig, TrainConfig  # noqa: E402
from toktok.errors import ConfigError  # noqa: E402
from toktok.pipeline import train  # noqa: E402

SPECIALS = ["<|endoftext|>"]
OUTPUTS = ("tokenizer.tiktoken", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")


@pytest.fixture(scope="module")
def cluster():
    """A private 2-CPU cluster; its address for processes that join it."""
    if ray.is_initialized():
        ray.shutdown()
    ctx = engine_ray.start_local(2)
    yield ctx.address_info["address"]
    ray.shutdown()


# sample.parquet has 9 row groups: cut it into ranges of a few row groups each, and merge samples
# on the driver as soon as a quarter of the capacity came back, so that later tasks start from the
# merged sample's threshold
SMALL_UNITS = dict(unit_bytes=64 << 10, merge_min_bytes=0)


def _train(out: Path, engine: str, **kw) -> Path:
    train(TrainConfig(out=str(out), engine=engine, seed=7, special_tokens=SPECIALS, **kw), ray_tuning=SMALL_UNITS)
    return out


def _table(out: Path, sql: str):
    con = duckdb.connect(str(out / "run.duckdb"), read_only=True)
    try:
        return con.sql(sql).fetchall()
    finally:
        con.close()


def _assert_same(local: Path, other: Path) -> None:
    words = "select phase, word, count, tokens from words order by phase, word"
    a, b = _table(local, words), _table(other, words)
    assert len(a) > 1000 and a == b
    inputs = "select path, phase, docs, text_bytes, docs_seen, bytes_seen from inputs order by phase, path"
    assert _table(local, inputs) == _table(other, inputs)
    merges = "select merge_index, token, count from merges order by merge_index"
    assert _table(local, merges) == _table(other, merges)
    # the pieces a sample left out (the compression curve's held-out text) and the curve itself
    held = "select key, value from meta where key like 'held_out:%' or key = 'compression' order by key"
    assert _table(local, held) == _table(other, held)
    curve = "select * from compression order by merges, subset"
    assert _table(local, curve) == _table(other, curve)
    for name in OUTPUTS:
        assert (local / name).read_bytes() == (other / name).read_bytes(), name


def _sampled(out: Path) -> list[tuple]:
    """(path, text_bytes, bytes_seen) of the files the sample left text of out. (Bytes, not
    documents: a long document is sampled in pieces, and each piece kept counts as a document.)"""
    return _table(out, "select path, text_bytes, bytes_seen from inputs where text_bytes < bytes_seen order by path")


@pytest.fixture(scope="module")
def local_full(tmp_path_factory) -> Path:
    return _train(tmp_path_factory.mktemp("local") / "full", "local", sources=[str(FIXTURES)], merges=300)


def test_full_read_matches_local(cluster, local_full, tmp_path):
    ray_out = _train(tmp_path / "ray", "ray", sources=[str(FIXTURES)], merges=300)
    _assert_same(local_full, ray_out)
    assert not _sampled(ray_out)


def test_sampled_matches_local(cluster, tmp_path):
    """A text budget well under the fixtures' ~700 KB: every file is sampled (notes.txt in pieces)."""
    cfg = dict(phases=[PhaseConfig("main", 300, [SourceConfig(str(FIXTURES))], budget="150KB")])
    local = _train(tmp_path / "local", "local", **cfg)
    ray_out = _train(tmp_path / "ray", "ray", **cfg)
    _assert_same(local, ray_out)
    sampled = {Path(p).name for p, _, _ in _sampled(ray_out)}
    assert {"sample.parquet", "extra.jsonl", "notes.txt"} <= sampled


def test_weighted_phases_match_local(cluster, tmp_path):
    """Weighted sources (one reservoir each) and a second phase with its own budget."""
    sample, extra, notes = (str(FIXTURES / n) for n in ("sample.parquet", "extra.jsonl", "notes.txt"))
    cfg = dict(phases=[
        PhaseConfig("mix", 200, [SourceConfig(sample, weight=2), SourceConfig(extra, weight=1)], budget="60KB"),
        PhaseConfig("notes", 50, [SourceConfig(notes)], budget="10KB"),
    ])
    local = _train(tmp_path / "local", "local", **cfg)
    ray_out = _train(tmp_path / "ray", "ray", **cfg)
    _assert_same(local, ray_out)
    assert {Path(p).name for p, _, _ in _sampled(ray_out)} == {"sample.parquet", "extra.jsonl", "notes.txt"}


def test_vocabulary_shape_matches_local(cluster, tmp_path):
    """--vocab-size, --pad-to-multiple-of, --max-token-length and --min-frequency act after counting:
    the same outputs from either engine, phases with vocab_size: included."""
    cfg = dict(phases=[PhaseConfig("mix", None, [SourceConfig(str(FIXTURES / "sample.parquet"))], vocab_size=1700),
                       PhaseConfig("notes", None, [SourceConfig(str(FIXTURES / "notes.txt"))], vocab_size=1920)],
               pad_to_multiple_of=128, max_token_length=6, min_frequency=3)
    local = _train(tmp_path / "local", "local", **cfg)
    ray_out = _train(tmp_path / "ray", "ray", **cfg)
    _assert_same(local, ray_out)
    import toktok

    assert toktok.load_encoding(ray_out).n_vocab == 1920


def test_superbpe_matches_local(cluster, tmp_path):
    """SuperBPE's second phase counts with its own pattern (through regex) on the cluster too,
    sampled (a text budget under the fixtures' size): the same outputs from either engine."""
    cfg = dict(phases=[PhaseConfig("web", None, [SourceConfig(str(FIXTURES))], budget="150KB", vocab_size=1900)],
               superbpe=1700)
    local = _train(tmp_path / "local", "local", **cfg)
    ray_out = _train(tmp_path / "ray", "ray", **cfg)
    _assert_same(local, ray_out)
    assert _table(ray_out, "select count(*) from superwords")[0][0] > 0


def test_cli_joins_a_cluster(cluster, local_full, tmp_path):
    """`toktok train --engine ray --ray-address ADDR` from another process joins the cluster."""
    out = tmp_path / "cli"
    r = subprocess.run(
        [sys.executable, "-m", "toktok.cli", "train", str(FIXTURES), "--out", str(out), "--merges", "300",
         "--seed", "7", "--special-token", SPECIALS[0], "--engine", "ray", "--ray-address", cluster, "-q"],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
        env={**os.environ, "RAY_AUTH_MODE": os.environ.get("RAY_AUTH_MODE", "token")},
    )
    assert r.returncode == 0, r.stderr[-3000:]
    for name in OUTPUTS:
        assert (out / name).read_bytes() == (local_full / name).read_bytes(), name


def test_units_number_rows_as_in_the_file(tmp_path):
    """Row-group ranges start at their row in the file; files with nulls stay whole."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from toktok.count.common import Source
    from toktok.count.read import read_corpus

    pq.write_table(pa.table({"text": [f"doc {i}" for i in range(100)]}), tmp_path / "a.parquet", row_group_size=30)
    pq.write_table(pa.table({"text": ["x", None] * 50}), tmp_path / "b.parquet", row_group_size=30)
    units = engine_ray.plan_units([Source(read_corpus([str(tmp_path)]))], unit_bytes=1)
    assert [(Path(u.path).name, u.groups, u.first_row) for u in units] == [
        ("a.parquet", (0,), 0), ("a.parquet", (1,), 30), ("a.parquet", (2,), 60), ("a.parquet", (3,), 90),
        ("b.parquet", None, 0),
    ]


def test_without_ray_a_config_error_says_how_to_install(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` fails as if not installed
    cfg = TrainConfig(sources=[str(FIXTURES)], out=str(tmp_path / "o"), engine="ray")
    with pytest.raises(ConfigError, match=r"pip install 'toktok\[ray\]'"):
        train(cfg)
    assert os.listdir(tmp_path) == []  # before any work


def test_engine_options_are_checked(tmp_path):
    with pytest.raises(ConfigError, match="use local or ray"):
        TrainConfig(sources=[str(FIXTURES)], out=str(tmp_path / "o"), engine="spark").validate()
    with pytest.raises(ConfigError, match="needs --engine ray"):
        TrainConfig(sources=[str(FIXTURES)], out=str(tmp_path / "o"), ray_address="127.0.0.1:1").validate()
    cfg_file = tmp_path / "run.yaml"
    cfg_file.write_text(f"output: {tmp_path}/o/t.tiktoken\nengine: ray\nray_address: 127.0.0.1:6379\n"
                        f"phases:\n  - name: a\n    merges: 1\n    sources: [{FIXTURES}]\n")
    from toktok.config import load_config

    cfg = load_config(cfg_file)
    assert (cfg.engine, cfg.ray_address) == ("ray", "127.0.0.1:6379")


def test_unreachable_address_fails_fast():
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(ConfigError, match="cannot join the Ray cluster"):
        engine_ray.check_reachable(f"127.0.0.1:{port}")
    engine_ray.check_reachable("auto")  # Ray resolves that one itself


def test_local_engine_does_not_import_ray():
    code = "import sys, toktok.cli, toktok.pipeline, toktok.count.local; assert 'ray' not in sys.modules, 'ray imported'"
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr


# --- counting checkpoints: the local engine's, taken on the driver -------------------------------


def _phase(budget: bool) -> tuple[list, dict]:
    """Three files, and the count arguments: a full read, or a capacity small enough that every
    file is sampled."""
    from toktok.count.common import Source
    from toktok.count.read import read_corpus

    sources = [Source(read_corpus([str(FIXTURES / n)])) for n in ("sample.parquet", "notes.txt", "extra.jsonl")]
    return sources, dict(seed=7, capacity=150_000 if budget else None, specials=SPECIALS, threads=2)


def _same_state(a, b) -> None:
    assert (a.files_done, a.used) == (b.files_done, b.used)
    for name, key in (("words", "word"), ("sample", ["source", "row"]), ("parity", "hash"), ("held_out", "hash")):
        x, y = getattr(a, name), getattr(b, name)
        assert (x is None) == (y is None), name
        if x is not None:  # (the parity sample and the held-out pieces are Arrow tables)
            x, y = (pl.from_arrow(t) if isinstance(t, pa.Table) else t for t in (x, y))
            assert x.sort(key).equals(y.sort(key).select(x.columns)), name


@pytest.mark.parametrize("budget", [False, True], ids=["full-read", "sampled"])
def test_ray_takes_the_local_engines_counting_checkpoints(cluster, budget):
    """Saved on the driver at the same points with the same content (the counts of the first files,
    byte for byte, though the units finish in any order; the finished sample), and a count resumed
    from any of them gives the uninterrupted result."""
    from toktok.count.local import count_phase as count_local

    sources, kw = _phase(budget)
    local_states, ray_states = [], []
    local = count_local(sources, save=local_states.append, every=0, **kw)
    got = engine_ray.count_phase(sources, save=ray_states.append, every=0, **kw, **SMALL_UNITS)
    assert len(ray_states) == len(local_states) == (1 if budget else 2)
    for a, b in zip(local_states, ray_states):
        _same_state(a, b)
    for state in ray_states:
        resumed = engine_ray.count_phase(sources, restored=state, **kw, **SMALL_UNITS)
        for pc in (got, resumed):
            assert pc.words.equals(local.words) and pc.used == local.used and pc.parity.equals(local.parity)
            assert (pc.held_out is None) == (not budget) and (not budget or pc.held_out.equals(local.held_out))


@pytest.mark.parametrize("budget", [False, True], ids=["full-read", "sampled"])
def test_kill9_while_ray_counts_resumes_from_the_checkpoint(cluster, tmp_path, budget):
    """A real `toktok train --engine ray` killed (SIGKILL) right after its first counting
    checkpoint resumes from it with --resume, and ends with the local engine's files."""
    import signal

    files = "".join(f"      - path: {FIXTURES / n}\n" for n in ("sample.parquet", "notes.txt", "extra.jsonl"))
    cfg = tmp_path / "run.yaml"
    cfg.write_text("budget: 1GB\n" * budget + "seed: 7\nspecial_tokens: ['<|endoftext|>']\nphases:\n  - name: main\n"
                   "    merges: 300\n" + "    budget: 150KB\n" * budget + "    sources:\n" + files)
    local, out = tmp_path / "local", tmp_path / "ray"
    env = {**os.environ, "RAY_AUTH_MODE": os.environ.get("RAY_AUTH_MODE", "token")}
    train_args = ["train", "--config", str(cfg), "-q", "--out"]
    # every=0: counting checkpoints at every file boundary
    r = subprocess.run(faults.command(every=0) + train_args + [str(local)], cwd=ROOT, capture_output=True,
                       text=True, timeout=300, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    args = train_args + [str(out), "--engine", "ray", "--ray-address", cluster]
    r = subprocess.run(faults.command(every=0, kill_at=1) + args, cwd=ROOT, capture_output=True, text=True,
                       timeout=300, env=env)
    assert r.returncode == -signal.SIGKILL, r.stderr[-3000:]
    staging = tmp_path / ".ray.partial"
    sample = len(list(staging.glob("sample-*.parquet")))
    parts = _table(staging, "select count(*) from count_parts")[0][0]
    assert (sample > 0 and parts == 0) if budget else (parts > 0 and sample == 0)
    r = subprocess.run(faults.command(every=0) + args + ["--resume"], cwd=ROOT, capture_output=True, text=True,
                       timeout=300, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    _assert_same(local, out)


# --- data in memory (toktok/count/shipped.py) -------------------------------------------------------


def _memory(kind: str):
    """sample.parquet's texts as data in memory of one kind (a fresh object each call: a generator is
    read once)."""
    import polars as pl

    df = pl.read_parquet(FIXTURES / "sample.parquet").select("text", "lang")
    return {"pandas": df.to_pandas, "polars": lambda: df, "arrow": df.to_arrow,
            "list": lambda: df["text"].to_list(), "generator": lambda: (t for t in df["text"].to_list())}[kind]()


def _memory_phases(kind: str) -> dict:
    """A full phase and a sampled one (a text budget well under the data's ~300 KB)."""
    return dict(phases=[PhaseConfig("full", 200, [SourceConfig("docs", kind="memory", data=_memory(kind))]),
                        PhaseConfig("sampled", 200, [SourceConfig("more", kind="memory", data=_memory(kind))],
                                    budget="60KB")])


@pytest.fixture(scope="module")
def local_memory(tmp_path_factory) -> Path:
    return _train(tmp_path_factory.mktemp("local-memory") / "out", "local", **_memory_phases("list"))


@pytest.mark.parametrize("kind", ["pandas", "polars", "list", "generator"])
def test_data_in_memory_matches_local(cluster, local_memory, tmp_path, kind):
    """toktok.train on data in memory with engine="ray": the data goes to the object store (tables by
    reference, cut into row ranges of 64 KB here; iterables read in batches) and the run gives the
    local engine's files and run file, a full phase and a sampled one."""
    out = _train(tmp_path / "ray", "ray", **_memory_phases(kind))
    _assert_same(local_memory, out)
    assert _sampled(out) and {p for p, _, _ in _sampled(out)} == {"more"}
    assert _table(out, "select distinct path from inputs order by path") == [("docs",), ("more",)]


def test_tables_in_memory_are_cut_by_rows(cluster):
    """A table is put in the object store once and cut into row ranges (by reference); a column with
    nulls stays one unit, as a list does (read on the driver in batches)."""
    import polars as pl

    from toktok.count.common import Source
    from toktok.count.memory import corpus_of

    def units(data):
        src = SourceConfig("docs", kind="memory", data=data)
        return engine_ray.plan_units([Source(corpus_of(src, "text", "error"))], unit_bytes=64 << 10)

    cut = units(_memory("polars"))
    assert len(cut) > 2 and [u.memory[0] for u in cut] == ["table"] * len(cut)
    assert [u.first_row for u in cut] == [u.memory[3] for u in cut] and cut[0].first_row == 0
    assert len({u.memory[1] for u in cut}) == 1  # one object for every unit
    with_null = pl.DataFrame({"text": ["a", None, "b"]})
    assert [u.memory[0] for u in units(with_null)] == ["table"] and len(units(with_null)) == 1
    assert [u.memory[0] for u in units(_memory("list"))] == ["batches"]


@pytest.mark.parametrize("budget", [False, True], ids=["full-read", "sampled"])
def test_ray_counts_other_patterns_as_the_local_engine_does(cluster, budget):
    """A named pattern other than cl100k and custom regexes (one compiled, one outside the
    subset counted by PCRE2's JIT on the workers, one through regex): the same word table,
    statistics and parity sample as the local engine."""
    from test_pattern_count import CUSTOM

    from toktok.count.local import count_phase as count_local
    from toktok.count.scan import has_scanner
    from toktok.patterns import NAMED

    sources, kw = _phase(budget)
    for pattern in (NAMED["o200k"], CUSTOM["digits"], CUSTOM["outside"], CUSTOM["unread"]):
        local = count_local(sources, **kw, pattern=pattern)
        got = engine_ray.count_phase(sources, **kw, **SMALL_UNITS, pattern=pattern)
        assert got.words.equals(local.words) and got.used == local.used and got.parity.equals(local.parity)
        assert not local.words.equals(count_local(sources, **kw).words)  # the pattern was used
        assert (got.regex_mb_s is None) == (local.regex_mb_s is None) == has_scanner(pattern)


# --- word counts (issue 51): toktok count and train --word-counts with --engine ray ---------------


@pytest.mark.parametrize("budget", [None, "150KB"], ids=["full-read", "sampled"])
def test_count_with_ray_writes_the_local_engines_table(cluster, tmp_path, budget):
    """``toktok.word_counts(..., engine="ray")`` writes the local engine's word table and metadata
    (the same seeded sample under a budget); ``train --word-counts`` of it with ``--engine ray``
    (no text to count: nothing goes to the cluster) is the local text run."""
    import pyarrow.parquet as pq

    import toktok

    files = [FIXTURES / n for n in ("sample.parquet", "notes.txt", "extra.jsonl")]
    kw = dict(special_tokens=SPECIALS, seed=7, **({"working_set_mb": 1} if budget else {}))
    local = toktok.word_counts(files, out=tmp_path / "local.parquet", **kw)
    got = toktok.word_counts(files, out=tmp_path / "ray.parquet", engine="ray", **kw)
    a, b = pq.read_table(local.out), pq.read_table(got.out)
    assert a.num_rows > 1000 and a.equals(b)
    meta_a, meta_b = (json.loads(t.schema.metadata[b"toktok"]) for t in (a, b))
    assert meta_a == meta_b and meta_a["sampled"] == bool(budget)
    assert (got.words, got.total, got.docs, got.text_bytes) == (local.words, local.total, local.docs, local.text_bytes)
    text = _train(tmp_path / "text", "local", sources=[str(f) for f in files], vocab_size=1800,
                  **({"working_set_mb": 1} if budget else {}))
    out = _train(tmp_path / "counts", "ray", word_counts=[str(got.out)], vocab_size=1800)
    for name in OUTPUTS:
        assert (out / name).read_bytes() == (text / name).read_bytes(), name


def test_text_and_counts_in_one_phase_with_ray_match_local(cluster, tmp_path):
    """A phase of text (counted on the cluster) and a word-count table (read on the driver), summed:
    the local engine's run file and files; and ``toktok count`` / ``train --word-counts`` from
    another process join the cluster with ``--ray-address``."""
    import toktok

    counts = toktok.word_counts([FIXTURES / "notes.txt", FIXTURES / "extra.jsonl"], out=tmp_path / "c.parquet",
                                special_tokens=SPECIALS, seed=7)
    phase = [PhaseConfig("main", 300, [SourceConfig(str(FIXTURES / "sample.parquet")),
                                       SourceConfig(str(counts.out), kind="counts")])]
    local = _train(tmp_path / "local", "local", phases=phase)
    ray_out = _train(tmp_path / "ray", "ray", phases=phase)
    _assert_same(local, ray_out)
    env = {**os.environ, "RAY_AUTH_MODE": os.environ.get("RAY_AUTH_MODE", "token")}
    cli = [sys.executable, "-m", "toktok.cli"]
    r = subprocess.run(cli + ["count", str(FIXTURES / "notes.txt"), str(FIXTURES / "extra.jsonl"), "--out",
                              str(tmp_path / "cli.parquet"), "--seed", "7", "--special-token", SPECIALS[0],
                              "--engine", "ray", "--ray-address", cluster], cwd=ROOT, capture_output=True,
                       text=True, timeout=300, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    assert (tmp_path / "cli.parquet").read_bytes() == counts.out.read_bytes()
    r = subprocess.run(cli + ["train", str(FIXTURES / "sample.parquet"), "--word-counts", str(tmp_path / "cli.parquet"),
                              "--out", str(tmp_path / "cli"), "--merges", "300", "--seed", "7", "--special-token",
                              SPECIALS[0], "--engine", "ray", "--ray-address", cluster, "-q"],
                       cwd=ROOT, capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    for name in OUTPUTS:
        assert (tmp_path / "cli" / name).read_bytes() == (local / name).read_bytes(), name
