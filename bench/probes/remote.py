"""The same Parquet files over loopback S3 and on local disk: read throughput per layer, and
``toktok train`` end to end.

    python bench/probes/remote.py [--data GLOB...] [--copies N] [--merges 2000] [--repeat 3] [--json OUT]

Starts moto's S3 server (a subprocess on 127.0.0.1, as tests/test_remote.py does) and uploads the
files to it (``--copies N``: each file N times, on disk and in the store). Then, each measurement in a fresh subprocess, one after the other (``--repeat``
times, alternating, the fastest kept):

* read: every file's text column, row group by row group, as Arrow string arrays
    - ``local``: toktok.count.read on the paths (pyarrow on local files)
    - ``fsspec``: toktok.count.read on the s3:// URLs (s3fs + pyarrow over toktok.count.remote's file; the
      layer toktok uses)
    - ``fsspec raw``: the same file objects read by pyarrow alone (no UTF-8 check, no conversion)
    - ``pyarrow.fs``: pyarrow's own S3FileSystem, the same ParquetFile reads
    - ``polars``: ``pl.scan_parquet(url, storage_options=...).select("text").collect()``
* train: ``toktok train`` on the local files and on the s3:// glob (full read, ``--merges``), the
  tokenizer files compared byte for byte.
* stores (``--stores gs,az,https,hf``; ``--stores ''`` skips them): the same files in each other
  store's server on 127.0.0.1 (tests/stores.py: fake-gcs-server, Azurite, a TLS file server, a Hub
  file API server), read by toktok (``read``, the ``fsspec`` layer above) from a listing of the
  prefix (https: file by file), one store at a time; the requests each file cost are counted.

Reports MB/s of text (the UTF-8 bytes of the text column) and the load average before each row.
moto's server is pure Python (Werkzeug), so it bounds what any client gets here: the figures
compare the layers' overheads on one machine, not what S3 itself delivers. Needs the dev extra
(moto[server], boto3, s3fs: ``pip install -e '.[dev]'``).
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: the history
import history  # noqa: E402
sys.path.insert(0, str(ROOT))
OUTPUTS = ("tokenizer.tiktoken", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")
KEY, SECRET, REGION = "bench", "bench-secret", "us-east-1"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_store(files: list[str]) -> tuple[subprocess.Popen, str]:
    import boto3

    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(300):
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            break
        except OSError:
            time.sleep(0.1)
    endpoint = f"http://127.0.0.1:{port}"
    s3 = boto3.client("s3", endpoint_url=endpoint, region_name=REGION, aws_access_key_id=KEY,
                      aws_secret_access_key=SECRET)
    s3.create_bucket(Bucket="bucket")
    for f in files:
        s3.upload_file(f, "bucket", f"perf/{Path(f).name}")
    return proc, endpoint


# --- workers (run in a subprocess each) -------------------------------------------------------------


def work_read(layer: str, files: list[str], endpoint: str) -> dict:
    import pyarrow as pa
    import pyarrow.compute  # noqa: F401 - pa.compute
    import pyarrow.parquet as pq

    import polars  # noqa: F401 - imports are not timed
    import pyarrow.fs  # noqa: F401
    import s3fs  # noqa: F401

    urls = [f"s3://bucket/perf/{Path(f).name}" for f in files]
    t0 = time.perf_counter()
    nbytes = 0
    if layer in ("local", "fsspec", "url"):
        from toktok.count.read import read_corpus

        corpus = read_corpus(files if layer == "local" else files if layer == "url" else urls)
        for f in corpus.files:
            for arr in corpus.arrow_texts(f, 32 << 20):
                nbytes += pa.compute.sum(pa.compute.binary_length(arr)).as_py() or 0
    elif layer in ("pyarrow.fs", "fsspec raw"):
        import pyarrow.fs as pafs

        from toktok.count import remote

        fs = pafs.S3FileSystem(endpoint_override=endpoint, scheme="http", access_key=KEY, secret_key=SECRET,
                               region=REGION)
        for u in urls:
            if layer == "fsspec raw":  # toktok.count.remote's file, without toktok.count.read's checks
                pf = remote.parquet_file(u)
            else:
                pf = pq.ParquetFile(fs.open_input_file(u[len("s3://"):]), buffer_size=8 << 20, pre_buffer=False)
            for g in range(pf.metadata.num_row_groups):
                for rb in pf.iter_batches(row_groups=[g], columns=["text"], use_threads=False):
                    nbytes += pa.compute.sum(pa.compute.binary_length(rb.column(0))).as_py() or 0
    elif layer == "polars":
        import polars as pl

        opts = {"aws_endpoint_url": endpoint, "aws_access_key_id": KEY, "aws_secret_access_key": SECRET,
                "aws_region": REGION, "aws_allow_http": "true"}
        for u in urls:
            df = pl.scan_parquet(u, storage_options=opts).select("text").collect()
            nbytes += int(df["text"].str.len_bytes().sum())
    else:
        raise SystemExit(f"unknown layer {layer}")
    return {"seconds": time.perf_counter() - t0, "text_bytes": nbytes}


def bench_stores(schemes: list[str], files: list[str], repeat: int, tmp: Path) -> dict:
    """toktok's read of the same files from each store's server (tests/stores.py), fastest of
    ``repeat``, with the requests the store saw per file."""
    sys.path.insert(0, str(ROOT / "tests"))
    import stores

    out = {}
    tree = {f"perf/{Path(f).name}": Path(f).read_bytes() for f in files}
    for scheme in schemes:
        root = tmp / f"store-{scheme}"
        root.mkdir()
        home = root / "home"
        home.mkdir()
        s = stores.start(scheme, root, tree)
        try:
            urls = [s.url(k) for k in sorted(tree)] if scheme == "https" else [f"{s.base}/perf/"]
            best = None
            for _ in range(repeat):
                s.proxy.clear()
                load = os.getloadavg()[0]
                r = run_worker(["url", "-", *urls], s.env(home))
                r["load"], r["requests_per_file"] = load, len(s.proxy.requests) / len(tree)
                best = r if best is None or r["seconds"] < best["seconds"] else best
            out[scheme] = best
        finally:
            s.stop()
            del s
    return out


def run_worker(args: list[str], env: dict) -> dict:
    r = subprocess.run([sys.executable, __file__, "--worker", *args], capture_output=True, text=True, env=env, cwd=ROOT)
    if r.returncode != 0:
        sys.exit(f"bench/remote: worker {args[:1]} failed:\n{(r.stdout + r.stderr)[-3000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def run_train(sources: list[str], out: Path, merges: int, env: dict) -> float:
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "toktok.cli", "train", *sources, "--out", str(out), "--merges",
                        str(merges), "--force", "-q"], capture_output=True, text=True, env=env, cwd=ROOT)
    if r.returncode != 0:
        sys.exit(f"bench/remote: train failed:\n{(r.stdout + r.stderr)[-3000:]}")
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", nargs="+", default=[str(ROOT.parent / "shared" / "corpus" / "*.parquet")])
    ap.add_argument("--merges", type=int, default=2000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--copies", type=int, default=1, help="use each file this many times (copies on disk and in the store)")
    ap.add_argument("--json", default=None)
    history.options(ap)
    ap.add_argument("--stores", default="gs,az,https,hf", help="the other stores to read from ('' for none)")
    ap.add_argument("--worker", nargs="+", default=None, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.worker:
        layer, endpoint, *files = a.worker
        print(json.dumps(work_read(layer, files, endpoint)))
        return
    files = sorted({p for g in a.data for p in glob.glob(os.path.expanduser(g))})
    if not files:
        sys.exit(f"bench/remote: no files match {a.data}")
    tmp = tempfile.TemporaryDirectory()
    if a.copies > 1:
        import shutil

        files = [shutil.copy(f, Path(tmp.name) / f"c{k}-{Path(f).name}") for k in range(a.copies) for f in files]
    size = sum(os.path.getsize(f) for f in files)
    proc, endpoint = start_store(files)
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(AWS_ACCESS_KEY_ID=KEY, AWS_SECRET_ACCESS_KEY=SECRET, AWS_DEFAULT_REGION=REGION, AWS_ENDPOINT_URL=endpoint)
    print(f"{len(files)} files, {size / 1e6:.1f} MB on disk; {os.cpu_count()} cores; load average "
          f"{os.getloadavg()[0]:.2f} (a shared machine: other work runs beside this)")
    results: dict = {"files": len(files), "file_bytes": size, "read": {}, "train": {}}
    try:
        layers = ("local", "fsspec", "fsspec raw", "pyarrow.fs", "polars")
        best: dict[str, dict] = {}
        for _ in range(a.repeat):
            for layer in layers:
                load = os.getloadavg()[0]
                r = run_worker([layer, endpoint, *files], env)
                r["load"] = load
                if layer not in best or r["seconds"] < best[layer]["seconds"]:
                    best[layer] = r
        print(f"\n{'read (text column)':<22}{'seconds':>9}{'MB/s':>9}{'text MB':>9}{'load':>7}")
        for layer in layers:
            r = best[layer]
            print(f"{layer:<22}{r['seconds']:>9.2f}{r['text_bytes'] / 1e6 / r['seconds']:>9.1f}"
                  f"{r['text_bytes'] / 1e6:>9.1f}{r['load']:>7.2f}")
        results["read"] = best
        with tempfile.TemporaryDirectory() as d:
            times: dict[str, float] = {}
            for _ in range(a.repeat):
                for name, srcs in (("local", files), ("s3", ["s3://bucket/perf/*.parquet"])):
                    t = run_train(srcs, Path(d) / name, a.merges, env)
                    times[name] = min(times.get(name, t), t)
            same = all((Path(d) / "local" / n).read_bytes() == (Path(d) / "s3" / n).read_bytes() for n in OUTPUTS)
        text = best["local"]["text_bytes"]
        print(f"\n{'train (full read)':<22}{'seconds':>9}{'MB/s':>9}")
        for name, t in times.items():
            print(f"{name:<22}{t:>9.2f}{text / 1e6 / t:>9.1f}")
        print(f"tokenizer files byte-identical: {same}")
        results["train"] = {"seconds": times, "identical": same, "merges": a.merges}
        if not same:
            sys.exit("bench/remote: the s3 run's tokenizer differs from the local run's")
        schemes = [x for x in a.stores.split(",") if x]
        if schemes:
            with tempfile.TemporaryDirectory() as d:
                results["stores"] = got = bench_stores(schemes, files, a.repeat, Path(d))
            print(f"\n{'read from each store':<22}{'seconds':>9}{'MB/s':>9}{'vs disk':>9}{'req/file':>9}{'load':>7}")
            local = best["local"]
            for name, r in [("local disk", local), *got.items()]:
                mbs = r["text_bytes"] / 1e6 / r["seconds"]
                print(f"{name:<22}{r['seconds']:>9.2f}{mbs:>9.1f}{r['seconds'] and local['seconds'] / r['seconds']:>9.2f}"
                      f"{r.get('requests_per_file', 0):>9.1f}{r['load']:>7.2f}")
    finally:
        proc.terminate()
        proc.wait(10)
        tmp.cleanup()
    history.record(a, "remote", results)
    if a.json:
        Path(a.json).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
