"""URL sources (toktok/remote.py) against a real S3-compatible server on 127.0.0.1.

The server is moto's, in server mode, in a subprocess started here with IAM authentication on
(requests must be signed with the access key made for the tests, so wrong credentials fail as
on S3). Runs see only the standard AWS_* variables (AWS_ENDPOINT_URL points at the server; HOME
is an empty folder, so no ~/.aws). Faults go through a TCP proxy in front of the server (the
stores' own, tests/stores.py) that can stop answering after a given number of bytes (connections cut, new ones refused) and come
back on the same port: the store goes down mid-read. Each run's tokenizer files are compared
byte for byte with a run on the same files on disk. The Ray engine is checked against the same
server. CI installs the test-time packages (moto[server], s3fs) with the dev extra (make test);
elsewhere the module is skipped without them.
"""
from __future__ import annotations

import dataclasses
import io
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import FIXTURES, ROOT, one_error_line

if os.environ.get("CI"):
    import boto3  # noqa: F401 - CI installs the dev extra: a missing package fails there
    import s3fs  # noqa: F401
    from moto import server as _moto  # noqa: F401
else:
    pytest.importorskip("s3fs")
    pytest.importorskip("boto3")
    pytest.importorskip("moto.server")

import boto3  # noqa: E402
import faults  # noqa: E402
from stores import Proxy, corpus_tree, free_port, wait_port  # noqa: E402
from toktok.rundir import RUN_FILE  # noqa: E402

TOKTOK = [sys.executable, "-m", "toktok.cli"]
OUTPUTS = ("tokenizer.tiktoken", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")
NAMES = ("sample.parquet", "extra.jsonl", "notes.txt")
REGION = "us-east-1"


# --- the store ------------------------------------------------------------------------------------


class Store:
    """moto's S3 server with IAM auth, a bucket holding ``stores.corpus_tree()``, and the same files on disk."""

    def __init__(self, root: Path):
        self.port = free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        env = {**os.environ, "INITIAL_NO_AUTH_ACTION_COUNT": "3", "MOTO_PORT": str(self.port)}
        self.proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)],
                                     env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_port(self.port, self.proc)
        # the three unauthenticated actions: a user, its policy, its key
        iam = boto3.client("iam", endpoint_url=self.endpoint, region_name=REGION,
                           aws_access_key_id="bootstrap", aws_secret_access_key="bootstrap")
        iam.create_user(UserName="toktok")
        iam.put_user_policy(UserName="toktok", PolicyName="s3", PolicyDocument=json.dumps({
            "Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}]}))
        key = iam.create_access_key(UserName="toktok")["AccessKey"]
        self.key_id, self.secret = key["AccessKeyId"], key["SecretAccessKey"]
        self.s3 = boto3.client("s3", endpoint_url=self.endpoint, region_name=REGION,
                               aws_access_key_id=self.key_id, aws_secret_access_key=self.secret)
        self.s3.create_bucket(Bucket="bucket")
        self.local = root / "local"
        for key_name, data in corpus_tree().items():
            self.put(key_name, data)
            p = self.local / key_name
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_bytes(data)

    def put(self, key: str, data: bytes) -> None:
        self.s3.put_object(Bucket="bucket", Key=key, Body=data)

    def env(self, home: Path, endpoint: str | None = None, **extra: str) -> dict[str, str]:
        """The environment of a run: the standard AWS_* variables only (no ~/.aws)."""
        env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "TOKTOK_"))}
        env.update(AWS_ACCESS_KEY_ID=self.key_id, AWS_SECRET_ACCESS_KEY=self.secret, AWS_DEFAULT_REGION=REGION,
                   AWS_ENDPOINT_URL=endpoint or self.endpoint, HOME=str(home))
        env.update(extra)
        return env

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(10)


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    s = Store(tmp_path_factory.mktemp("store"))
    yield s
    s.stop()


@pytest.fixture
def home(tmp_path) -> Path:
    h = tmp_path / "home"
    h.mkdir()
    return h


def _train(args: list, env: dict, cwd: Path | None = None, timeout: float = 600,
           driver: list[str] = TOKTOK) -> subprocess.CompletedProcess:
    """``toktok train ARGS -q``; ``driver=faults.command(...)`` runs it with checkpoints of a test's own."""
    return subprocess.run(driver + ["train", *map(str, args), "-q"], capture_output=True, text=True, env=env,
                          cwd=cwd or ROOT, timeout=timeout)


def _same_outputs(a: Path, b: Path) -> None:
    for name in OUTPUTS:
        assert (a / name).read_bytes() == (b / name).read_bytes(), name


def _inputs(out: Path) -> list[tuple]:
    con = duckdb.connect(str(out / RUN_FILE), read_only=True)
    try:
        return con.sql("select path, docs, text_bytes, docs_seen, bytes_seen from inputs order by path").fetchall()
    finally:
        con.close()


# --- the same files, on disk and in the store -----------------------------------------------------


@pytest.fixture(scope="module")
def local_refs(store, tmp_path_factory) -> dict[str, Path]:
    """Runs on the files on disk: the Parquet glob without and with --budget, and a sampled
    config over all kinds (all three compared with the same runs on the store)."""
    d = tmp_path_factory.mktemp("refs")
    home = d / "home"
    home.mkdir()
    env = store.env(home)
    refs = {}
    for name, extra in (("glob", []), ("budget", ["--budget", "1GB"])):
        r = _train([store.local / "perf/*.parquet", "--out", d / name, "--merges", "300", *extra], env)
        assert r.returncode == 0, r.stderr
        refs[name] = d / name
    cfg = _sampled_config(d / "local.yaml", f"{store.local}/perf/", f"{store.local}/deep/**/*.jsonl.zst")
    r = _train(["--config", cfg, "--out", d / "sampled"], env)
    assert r.returncode == 0, r.stderr
    refs["sampled"] = d / "sampled"
    return refs


def _sampled_config(path: Path, *sources: str, top: str = "", per_source: str = "") -> Path:
    """A one-phase config with a text budget well under the corpus: every file is sampled."""
    lines = "".join(f"      - path: {s}\n{per_source}" for s in sources)
    path.write_text(f"{top}seed: 3\nphases:\n  - name: main\n    merges: 300\n    budget: 120KB\n    sources:\n{lines}")
    return path


@pytest.mark.parametrize("name", ["glob", "budget"])
def test_parquet_glob_on_the_store_equals_the_local_run(store, local_refs, home, tmp_path, name):
    """`toktok train 's3://bucket/perf/*.parquet'` with only AWS_* set: the local run's files."""
    out = tmp_path / "s3"
    extra = ["--budget", "1GB"] if name == "budget" else []
    r = _train(["s3://bucket/perf/*.parquet", "--out", out, "--merges", "300", *extra], store.env(home))
    assert r.returncode == 0, r.stderr
    _same_outputs(local_refs[name], out)
    assert [p for p, *_ in _inputs(out)] == ["s3://bucket/perf/sample.parquet"]
    assert [row[1:] for row in _inputs(out)] == [row[1:] for row in _inputs(local_refs[name])]


def test_sampled_run_over_every_kind_equals_the_local_run(store, local_refs, home, tmp_path):
    """A prefix (Parquet, JSONL, txt) and a ** glob (.jsonl.zst below two folders), sampled."""
    cfg = _sampled_config(tmp_path / "s3.yaml", "s3://bucket/perf/", "s3://bucket/deep/**/*.jsonl.zst")
    out = tmp_path / "s3"
    r = _train(["--config", cfg, "--out", out], store.env(home))
    assert r.returncode == 0, r.stderr
    _same_outputs(local_refs["sampled"], out)
    rows = _inputs(out)
    assert [p for p, *_ in rows] == ["s3://bucket/deep/code/extra.jsonl.zst", "s3://bucket/perf/extra.jsonl",
                                     "s3://bucket/perf/notes.txt", "s3://bucket/perf/sample.parquet"]
    assert all(text < seen for _, _, text, _, seen in rows)  # every file was sampled
    assert [row[1:] for row in rows] == [row[1:] for row in _inputs(local_refs["sampled"])]


def test_eval_reads_the_store_as_it_reads_disk(store, local_refs, home):
    """`toktok eval TOK --data s3://...` gives the numbers of the same files on disk, by file too."""
    def rows(*data: str) -> list[dict]:
        r = subprocess.run(TOKTOK + ["eval", str(local_refs["glob"]), "--data", *data, "--by", "file", "--json"],
                           capture_output=True, text=True, env=store.env(home), cwd=ROOT, timeout=300)
        assert r.returncode == 0, r.stderr
        return [{k: v for k, v in row.items() if k != "subset"} for row in json.loads(r.stdout)["rows"]]

    on_disk = rows(f"{store.local}/perf/sample.parquet", f"{store.local}/perf/extra.jsonl")
    in_store = rows("s3://bucket/perf/sample.parquet", "s3://bucket/perf/extra.jsonl")
    assert len(on_disk) == 3 and on_disk == in_store  # all, and one row per file
    assert on_disk[0]["docs"] > 0 and on_disk[0]["tokens"] > 0


def test_globs_are_expanded_on_the_store(store):
    from toktok.count.sources import resolve_sources

    opts = {"key": store.key_id, "secret": store.secret, "endpoint_url": store.endpoint}
    files = resolve_sources(["s3://bucket/deep/**"], storage_options=opts)
    assert [(f.path, f.key, f.kind) for f in files] == [
        ("s3://bucket/deep/code/extra.jsonl.zst", "code/extra.jsonl.zst", "jsonl.zst"),
        ("s3://bucket/deep/en/sample.parquet", "en/sample.parquet", "parquet"),
        ("s3://bucket/deep/notes.txt", "notes.txt", "txt"),
    ]  # the hidden folder and the README are not data
    assert [f.key for f in resolve_sources(["s3://bucket/deep/*/*.parquet"], storage_options=opts)] == ["en/sample.parquet"]
    one = resolve_sources(["s3://bucket/perf/notes.txt"], storage_options=opts)[0]
    assert (one.key, one.size) == ("notes.txt", (FIXTURES / "notes.txt").stat().st_size)
    assert one.etag  # the object's ETag: what --resume compares
    # the same keys as the files on disk: the documents' identities do not depend on the place
    local = resolve_sources([str(store.local / "deep")])
    assert [f.key for f in local] == [f.key for f in files]


def test_parquet_is_read_lazily(store, home, tmp_path):
    """A Parquet object whose other column is 16x the text: the footer and the text column's
    pages come over the wire, the other column does not."""
    import random

    from toktok.count.read import read_corpus

    rng = random.Random(0)
    n = 400
    text = [f"document {i} " + " ".join(rng.choice(["alpha", "beta", "gamma", "delta"]) for _ in range(40)) for i in range(n)]
    blob = [rng.randbytes(4000) for _ in range(n)]  # incompressible, ~1.6 MB
    buf = io.BytesIO()
    pq.write_table(pa.table({"text": text, "blob": blob}), buf, row_group_size=50)
    data = buf.getvalue()
    store.put("lazy/wide.parquet", data)
    proxy = Proxy(store.port)
    try:
        opts = {"key": store.key_id, "secret": store.secret, "endpoint_url": proxy.endpoint}
        corpus = read_corpus(["s3://bucket/lazy/wide.parquet"], storage_options=opts)
        got = [t for b in corpus.batches() for t in b.texts.to_pylist()]
    finally:
        proxy.close()
    assert got == text
    text_bytes = sum(pq.ParquetFile(io.BytesIO(data)).metadata.row_group(g).column(0).total_compressed_size
                     for g in range(n // 50))
    assert len(data) > 1_500_000 and proxy.sent < text_bytes + 300_000, (proxy.sent, text_bytes, len(data))


# --- a corpus moved elsewhere or named another way samples the same ---------------------------------


def test_the_sample_does_not_depend_on_where_the_files_are(store, local_refs, home, tmp_path):
    """The sampled config's files copied to another folder and named by a relative path: the
    same tokenizer as the run on the originals (and as the store's, tested above)."""
    moved = tmp_path / "elsewhere" / "copy"
    shutil.copytree(store.local, moved)
    cfg = _sampled_config(tmp_path / "rel.yaml", "copy/perf", "copy/deep/**/*.jsonl.zst")
    out = tmp_path / "rel"
    r = _train(["--config", cfg, "--out", out], store.env(home), cwd=tmp_path / "elsewhere")
    assert r.returncode == 0, r.stderr
    _same_outputs(local_refs["sampled"], out)


# --- credentials and secrets ----------------------------------------------------------------------


def test_storage_options_in_the_config_and_no_secret_in_any_output(store, local_refs, home, tmp_path):
    """Credentials and endpoint in the YAML's storage_options (no AWS_* set): the same files,
    and the secret key is in no output file (run.duckdb's bytes included) nor in what is printed."""
    env = {k: v for k, v in store.env(home).items() if not k.startswith("AWS_")}
    top = (f"storage_options:\n  endpoint_url: {store.endpoint}\n  client_kwargs: {{region_name: {REGION}}}\n")
    per = f"        storage_options: {{key: {store.key_id}, secret: {store.secret}}}\n"
    cfg = _sampled_config(tmp_path / "opts.yaml", "s3://bucket/perf/", "s3://bucket/deep/**/*.jsonl.zst",
                          top=top, per_source=per)
    out = tmp_path / "opts"
    r = subprocess.run(TOKTOK + ["train", "--config", str(cfg), "--out", str(out)], capture_output=True, text=True,
                       env={**env, "COLUMNS": "200"}, cwd=ROOT, timeout=600)  # not quiet: the summary is printed too
    assert r.returncode == 0, r.stderr
    _same_outputs(local_refs["sampled"], out)
    secret = store.secret.encode()
    files = [p for p in out.rglob("*") if p.is_file()]
    assert any(p.name == "run.duckdb" for p in files)
    for p in files:
        assert secret not in p.read_bytes(), p
    assert store.secret not in r.stdout + r.stderr
    con = duckdb.connect(str(out / RUN_FILE), read_only=True)
    try:
        config = json.loads(con.execute("select value from meta where key = 'config'").fetchone()[0])
    finally:
        con.close()
    src = config["phases"][0]["sources"][0]
    assert src["storage_options"] == {"key": "***", "secret": "***"}
    assert config["storage_options"]["endpoint_url"] == store.endpoint


def test_wrong_credentials_are_one_line(store, home, tmp_path):
    out = tmp_path / "o"
    r = _train(["s3://bucket/perf/*.parquet", "--out", out], store.env(home, AWS_SECRET_ACCESS_KEY="not-the-secret"))
    line = one_error_line(r, "s3://bucket/perf/", "access denied", "check the credentials")
    assert "not-the-secret" not in line
    assert not out.exists() and not list(tmp_path.glob(".o*"))


@pytest.mark.parametrize("url, needles", [
    ("s3://bucket/perf/nope.parquet", ["s3://bucket/perf/nope.parquet", "no such object", "check the URL"]),
    ("s3://no-bucket/perf/*.parquet", ["s3://no-bucket/perf/*.parquet", "no such bucket", "check the URL"]),
    ("s3://bucket/perf/*.csv", ["s3://bucket/perf/*.csv", "matches no", "check the pattern"]),
    ("s3://bucket/nothing/", ["s3://bucket/nothing/", "no such object"]),
])
def test_missing_objects_are_one_line(store, home, tmp_path, url, needles):
    outs = tmp_path / "outs"
    outs.mkdir()
    r = _train([url, "--out", outs / "o"], store.env(home))
    one_error_line(r, *needles)
    assert os.listdir(outs) == []  # nothing published, no staging folder left


def test_a_missing_client_names_the_pip_command(monkeypatch, tmp_path):
    from typer.testing import CliRunner

    from toktok.cli import app

    monkeypatch.setitem(sys.modules, "s3fs", None)  # `import s3fs` fails as if not installed
    r = CliRunner().invoke(app, ["train", "s3://bucket/perf/*.parquet", "--out", str(tmp_path / "o"), "-q"])
    assert r.exit_code == 2, r.output
    lines = [ln for ln in r.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and "needs s3fs" in lines[0] and "pip install 'toktok[s3]'" in lines[0], lines
    assert not (tmp_path / "o").exists()


# --- faults ---------------------------------------------------------------------------------------


ORDER = ("extra.jsonl", "notes.txt", "sample.parquet")  # read in this order: the Parquet object last
FULL = [f"s3://bucket/perf/{n}" for n in ORDER]


@pytest.fixture(scope="module")
def full_ref(store, tmp_path_factory) -> Path:
    """A full read of perf/'s three files from disk (the reference of the fault runs)."""
    d = tmp_path_factory.mktemp("fullref")
    home = d / "home"
    home.mkdir()
    r = _train([*(store.local / "perf" / n for n in ORDER), "--out", d / "ref", "--merges", "300"], store.env(home))
    assert r.returncode == 0, r.stderr
    return d / "ref"


def _bytes_before_last_file(store, home, tmp_path) -> int:
    """Bytes the store sends for a full read of FULL, measured through a proxy: a run with the
    proxy going down at a given share of it is cut in the middle of reading the last file."""
    proxy = Proxy(store.port)
    try:
        r = _train([*FULL, "--out", tmp_path / "measure", "--merges", "300"], store.env(home, proxy.endpoint))
        assert r.returncode == 0, r.stderr
        return proxy.sent
    finally:
        proxy.close()


def test_store_down_mid_read_then_resume(store, full_ref, home, tmp_path):
    """The store stops answering while the last file is read: after the retries one line naming
    the object and the cause, exit 2, nothing published, the counts of the first files kept; once
    the store is back, --resume continues (fingerprints: size and ETag) to the uninterrupted run's
    files."""
    total = _bytes_before_last_file(store, home, tmp_path)
    proxy = Proxy(store.port, down_after=int(total * 0.85))
    try:
        env = store.env(home, proxy.endpoint, TOKTOK_REMOTE_RETRIES="2")
        out = tmp_path / "tok"
        args = [*FULL, "--out", out, "--merges", "300"]
        t0 = time.monotonic()
        r = _train(args, env, driver=faults.command(every=0))  # counting checkpoints at every file
        line = one_error_line(r, "s3://bucket/perf/sample.parquet", "the store did not answer", "after 2 retries",
                               "--resume")
        assert time.monotonic() - t0 < 120 and proxy.downs == 1
        assert not out.exists()
        con = duckdb.connect(str(tmp_path / ".tok.partial" / RUN_FILE), read_only=True)
        assert con.execute("select count(*) from count_parts").fetchone()[0] > 0  # the first files' counts
        con.close()
        # still down: --resume cannot list the objects, and keeps the interrupted run
        r = _train(args + ["--resume"], env, driver=faults.command(every=0))
        one_error_line(r, "s3://bucket/perf/", "the store did not answer")
        assert (tmp_path / ".tok.partial" / RUN_FILE).is_file()
        proxy.up()
        r = _train(args + ["--resume"], env, driver=faults.command(every=0))
        assert r.returncode == 0, r.stderr
        _same_outputs(full_ref, out)
        assert "did not answer" in line
    finally:
        proxy.close()


def test_a_short_outage_is_retried(store, full_ref, home, tmp_path):
    """Down for a second in the middle of the read, then back: the retries carry the run through."""
    total = _bytes_before_last_file(store, home, tmp_path)
    proxy = Proxy(store.port, down_after=int(total * 0.6), back_after=1.0)
    try:
        out = tmp_path / "tok"
        r = _train([*FULL, "--out", out, "--merges", "300"], store.env(home, proxy.endpoint, TOKTOK_REMOTE_RETRIES="4"))
        assert r.returncode == 0, r.stderr
        assert proxy.downs == 1
        _same_outputs(full_ref, out)
    finally:
        proxy.close()


def test_resume_refuses_an_object_that_changed(store, home, tmp_path):
    """--resume compares each object's size and ETag: a rewritten object is named."""
    store.put("changing/a.txt", (FIXTURES / "notes.txt").read_bytes())
    store.put("changing/b.txt", (FIXTURES / "notes.txt").read_bytes()[:20000])
    env = store.env(home)
    out = tmp_path / "tok"
    args = ["s3://bucket/changing/", "--out", out, "--merges", "200"]
    r = _train(args, env, driver=faults.command(every=0, kill_at=2))
    assert r.returncode == -signal.SIGKILL, r.stderr
    store.put("changing/a.txt", (FIXTURES / "notes.txt").read_bytes().replace(b"the", b"teh"))  # same size
    r = _train(args + ["--resume"], env, driver=faults.command(every=0))
    one_error_line(r, "s3://bucket/changing/a.txt", "changed since the interrupted run")


# --- the Ray engine -------------------------------------------------------------------------------


def test_ray_units_are_planned_from_the_footers(store):
    """The driver cuts a Parquet object into row-group ranges from its footer, as a local file."""
    pytest.importorskip("ray")
    from toktok.count import ray as engine_ray
    from toktok.count.common import Source
    from toktok.count.read import read_corpus

    opts = {"key": store.key_id, "secret": store.secret, "endpoint_url": store.endpoint}
    units = engine_ray.plan_units([Source(read_corpus(["s3://bucket/perf/"], storage_options=opts))],
                                  unit_bytes=64 << 10)
    parquet = [u for u in units if u.path.endswith(".parquet")]
    assert len(parquet) > 2 and [u.first_row for u in parquet][0] == 0
    assert all(u.location is not None and u.location[1] == opts for u in units)
    assert [u.key for u in units][-1] == "sample.parquet"


def test_ray_engine_reads_from_the_store(store, local_refs, home, tmp_path):
    """--engine ray (a private 2-CPU cluster started by the run) on the store, full and sampled:
    the local engine's files on disk, byte for byte."""
    pytest.importorskip("ray")
    cfg = tmp_path / "ray.yaml"
    cfg.write_text("seed: 3\nengine: ray\nthreads: 2\nphases:\n"
                   "  - name: full\n    merges: 300\n    sources: [{path: 's3://bucket/perf/*.parquet'}]\n"
                   "  - name: sampled\n    merges: 300\n    budget: 120KB\n"
                   "    sources: [{path: 's3://bucket/perf/'}, {path: 's3://bucket/deep/**/*.jsonl.zst'}]\n")
    local = tmp_path / "local.yaml"
    local.write_text(cfg.read_text().replace("engine: ray\n", "").replace("s3://bucket", str(store.local)))
    r = _train(["--config", local, "--out", tmp_path / "local"], store.env(home))
    assert r.returncode == 0, r.stderr
    r = _train(["--config", cfg, "--out", tmp_path / "ray"], store.env(home))
    assert r.returncode == 0, r.stderr
    _same_outputs(tmp_path / "local", tmp_path / "ray")


# --- https:// (single files; here plain http on 127.0.0.1) -----------------------------------------


class _Files:
    """A web server on 127.0.0.1 serving a folder with HEAD and Range requests (as a CDN or the
    Hub's file URLs do); it records each request's path and query."""

    def __init__(self, root: Path):
        import http.server

        seen = self.seen = []

        class Handler(http.server.BaseHTTPRequestHandler):
            def _file(self):
                path, _, query = self.path.partition("?")
                seen.append((self.command, path, query, self.headers.get("Range")))
                p = root / path.lstrip("/")
                return p.read_bytes() if p.is_file() else None

            def do_HEAD(self):
                data = self._file()
                self.send_response(200 if data is not None else 404)
                self.send_header("Content-Length", str(len(data or b"")))
                self.send_header("Accept-Ranges", "bytes")
                self.end_headers()

            def do_GET(self):
                data = self._file()
                if data is None:
                    self.send_error(404)
                    return
                rng = self.headers.get("Range")
                if rng:
                    lo, _, hi = rng.removeprefix("bytes=").partition("-")
                    lo, hi = int(lo), min(int(hi) if hi else len(data) - 1, len(data) - 1)
                    self.send_response(206)
                    self.send_header("Content-Range", f"bytes {lo}-{hi}/{len(data)}")
                    data = data[lo:hi + 1]
                else:
                    self.send_response(200)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *a):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def test_https_single_files_with_a_signed_query(store, home, tmp_path):
    """Web URLs are single files read by range requests; a signed URL's query string reaches the
    server but is never recorded (the run file names the URL without it)."""
    pytest.importorskip("aiohttp")
    web = _Files(store.local / "perf")
    try:
        urls = [f"{web.url}/sample.parquet?sig=SIGNED-SECRET", f"{web.url}/extra.jsonl", f"{web.url}/notes.txt"]
        out = tmp_path / "web"
        r = _train([*urls, "--out", out, "--merges", "300"], store.env(home))
        assert r.returncode == 0, r.stderr
        ref = tmp_path / "ref"
        r = _train([*(store.local / "perf" / n for n in NAMES), "--out", ref, "--merges", "300"], store.env(home))
        assert r.returncode == 0, r.stderr
        _same_outputs(ref, out)
        assert [p for p, *_ in _inputs(out)] == sorted(u.split("?")[0] for u in urls)
        for p in out.rglob("*"):
            assert not p.is_file() or b"SIGNED-SECRET" not in p.read_bytes(), p
        gets = [s for s in web.seen if s[0] == "GET" and s[1] == "/sample.parquet"]
        assert gets and all(q == "sig=SIGNED-SECRET" and rng for _, _, q, rng in gets)  # ranges only
        r = _train([f"{web.url}/*.parquet", "--out", tmp_path / "glob"], store.env(home))
        one_error_line(r, f"{web.url}/*.parquet", "single files")
        r = _train([f"{web.url}/nope.parquet", "--out", tmp_path / "nope"], store.env(home))
        one_error_line(r, f"{web.url}/nope.parquet", "no such object")
    finally:
        web.close()


# --- what is written down ---------------------------------------------------------------------------


def test_redaction_of_options_and_urls():
    from toktok.config import PhaseConfig, SourceConfig, TrainConfig
    from toktok.count.remote import display, redact

    assert display("https://user:pw@cdn.example.org/a/b.parquet?X-Amz-Signature=abc") == "https://cdn.example.org/a/b.parquet"
    assert display("s3://bucket/a.parquet") == "s3://bucket/a.parquet"
    opts = {"key": "AKIA1", "secret": "S3", "token": "T", "endpoint_url": "http://127.0.0.1:9000",
            "client_kwargs": {"region_name": "eu-west-1", "aws_session_token": "T2"}, "account_key": "K", "sas_token": "Q"}
    assert redact(opts) == {"key": "***", "secret": "***", "token": "***", "endpoint_url": "http://127.0.0.1:9000",
                            "client_kwargs": {"region_name": "eu-west-1", "aws_session_token": "***"},
                            "account_key": "***", "sas_token": "***"}
    cfg = TrainConfig(sources=["https://x.org/a.txt?sig=SECRET"], storage_options={"secret": "SECRET"}, out="o",
                      phases=[PhaseConfig("p", 1, [SourceConfig("s3://b/?", storage_options={"key": "SECRET"})])])
    d = json.dumps(cfg.to_dict())
    assert "SECRET" not in d and '"secret": "***"' in d and '"key": "***"' in d
    cfg = dataclasses.replace(cfg, sources=[])
    assert cfg.describe().source_options(cfg.phases[0].sources[0]) == {"secret": "SECRET", "key": "SECRET"}  # used as given


@pytest.mark.parametrize("url, module, extra", [
    ("s3://b/x/*.parquet", "s3fs", "s3"), ("gs://b/x/*.parquet", "gcsfs", "gcs"), ("az://c/x/", "adlfs", "azure"),
    ("abfs://c@acct.dfs.core.windows.net/x/", "adlfs", "azure"), ("hf://datasets/org/name/data/*.parquet", "huggingface_hub", "hf"),
    ("https://example.org/a.parquet", "aiohttp", "http"),
])
def test_each_scheme_names_its_client(monkeypatch, url, module, extra):
    from toktok.errors import ConfigError
    from toktok.count.sources import resolve_sources

    monkeypatch.setitem(sys.modules, module, None)
    with pytest.raises(ConfigError, match=rf"needs {module}, which is not installed; run: pip install 'toktok\[{extra}\]'"):
        resolve_sources([url])


def test_faults_are_classified():
    import errno

    from toktok.count.remote import classify

    class Response:
        def __init__(self, code):
            self.status_code = code

    class HTTPError(Exception):
        def __init__(self, code):
            super().__init__(f"{code}")
            self.response = Response(code)

    assert classify(FileNotFoundError("x")) == "missing"
    assert classify(PermissionError("x")) == "denied"
    assert [classify(HTTPError(c)) for c in (401, 403, 404, 429, 500, 503)] == [
        "denied", "denied", "missing", "transient", "transient", "transient"]
    assert classify(ConnectionResetError()) == "transient" and classify(TimeoutError()) == "transient"
    assert classify(OSError(errno.EIO, "short read")) == "transient"
    assert classify(ValueError("a bug")) is None  # not a store fault: raised as it is
