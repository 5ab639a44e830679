"""Corpus sources that live in object stores or on web servers: ``s3://``, ``gs://``, ``az://`` /
``abfs://``, ``hf://`` and ``http(s)://`` URLs, read lazily.

Owns which URLs are sources, finding their objects (globs ``*``/``**`` and prefixes are expanded
by listing the store), opening an object for reading, the retries, and the one-line errors.
One layer for every scheme: fsspec (s3fs, gcsfs, adlfs, huggingface_hub's ``HfFileSystem``,
aiohttp for http(s)), each client an optional extra (``pip install 'toktok[s3]'``, ``[gcs]``,
``[azure]``, ``[hf]``, ``[http]`` or ``[remote]`` for all). Nothing is downloaded whole and
nothing is written locally: :func:`open_file` gives a seekable file whose reads are range
requests (``cat_file`` with a start and an end; the size comes from the listing, so opening costs
no request). Parquet (:func:`parquet_file`) costs its footer (once: the metadata read when the
sources are resolved is kept with the file, ``SourceFile.footer``), then the text column's pages,
row group by row group, in reads of up to a block (``BLOCK_BYTES``) that never cross the column
chunk's end (pyarrow's buffered page reader, pre-buffering off), so the other columns are not
fetched; JSONL / ``.jsonl.zst`` / ``.txt`` objects are streamed, a block a request. While one block
is decoded and counted the next one is fetched in the background (:meth:`RemoteFile.plan` for
Parquet: the next part of the text column, in the next row group when this one is done); the
blocks read ahead by every open object together hold at most :func:`readahead_bytes` (a memory
budget sets it: :func:`set_readahead`). Credentials come from each client's usual
places (``AWS_*`` and ``~/.aws``, ``AWS_ENDPOINT_URL`` for S3-compatible stores,
``GOOGLE_APPLICATION_CREDENTIALS``, ``AZURE_STORAGE_*``, ``HF_TOKEN``) and optional
``storage_options`` (passed to the client); :func:`redact` keeps them out of everything toktok
writes. A transient fault (connection refused or reset, timeout, 5xx, throttling) is retried
``retries()`` times with doubling waits from ``RETRY_WAIT`` seconds (the same range is asked for
again); a missing object, denied access, or a store still down after the retries is an
:class:`~toktok.errors.InputError` naming the URL and the cause.
A file's name in the run (``SourceFile.path``) is its URL without user info or query string (a
signed URL's query is a secret); :func:`register` remembers how to open it.
Example: ``[f.path for f in resolve("s3://bucket/perf/*.parquet")] == ["s3://bucket/perf/a.parquet"]``.
"""
from __future__ import annotations

import importlib
import io
import os
import re
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

from ..errors import ConfigError, InputError, one_line
from .files import SourceFile, kind_of

#: scheme -> (fsspec protocol, module the client needs, extra that installs it)
SCHEMES = {
    "s3": ("s3", "s3fs", "s3"),
    "gs": ("gcs", "gcsfs", "gcs"),
    "gcs": ("gcs", "gcsfs", "gcs"),
    "az": ("abfs", "adlfs", "azure"),
    "abfs": ("abfs", "adlfs", "azure"),
    "abfss": ("abfs", "adlfs", "azure"),
    "hf": ("hf", "huggingface_hub", "hf"),
    "http": ("http", "aiohttp", "http"),
    "https": ("http", "aiohttp", "http"),
}
#: Bytes per range request (at most): a block of a streamed object, the page buffer of a Parquet one.
BLOCK_BYTES = 8 << 20
#: Bytes the blocks read ahead hold at most, all open objects together, without a memory budget.
READAHEAD_BYTES = 2 * BLOCK_BYTES
#: The smallest block: a budget that leaves less read-ahead still reads in requests of this size.
MIN_BLOCK_BYTES = 1 << 18
#: Seconds before the first retry of a transient fault; each further wait doubles.
RETRY_WAIT = 1.0
#: Retries of a transient fault (``TOKTOK_REMOTE_RETRIES`` overrides it): 1+2+4+8+16 = 31 s.
RETRIES = 5

_URL = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
_SUPPORTED = "s3://, gs://, az://, abfs://, hf://, https:// or a local path"
#: storage_options keys whose values are kept in the run file (everything else is redacted).
_PLAIN = {"endpoint_url", "region_name", "region", "anon", "use_ssl", "requester_pays", "project",
          "account_name", "client_kwargs", "config_kwargs", "retries", "default_block_size",
          "revision", "endpoint", "version_aware", "s3_additional_kwargs", "addressing_style",
          "signature_version", "max_attempts", "mode", "connect_timeout", "read_timeout"}
_REDACTED = "***"

T = TypeVar("T")

# how to open each registered name: name -> (URL to open, storage options, size or None)
_WHERE: dict[str, tuple[str, dict, int | None]] = {}


def scheme_of(source: str) -> str | None:
    """The URL scheme of a source (lower case), None for a local path: ``scheme_of("s3://b/k") == "s3"``."""
    m = _URL.match(os.fspath(source)) if isinstance(source, (str, os.PathLike)) else None
    return m.group(1).lower() if m else None


def is_url(source: str) -> bool:
    """Whether a source is a URL (any ``scheme://``) rather than a local path."""
    return scheme_of(source) is not None


def display(url: str) -> str:
    """The URL as toktok names and records it: without user info and query string (user info
    with a password, ``s3://KEY:SECRET@bucket``, shown as ``***@``; abfs's ``container@account``
    holds none and stays). Example: ``display("s3://K:S@b/x.txt") == "s3://***@b/x.txt"``."""
    try:
        parts = urlsplit(url)
    except ValueError:  # not a URL urllib reads (an unclosed [ in the host): nothing of it shown
        return f"{scheme_of(url) or '?'}://***"
    user, at, host = parts.netloc.rpartition("@")
    if parts.scheme.lower() in ("http", "https"):
        netloc = host
    else:
        netloc = f"***@{host}" if at and ":" in user else parts.netloc
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def _no_credentials(url: str) -> None:
    """A store's URL may not carry credentials (``s3://KEY:SECRET@bucket/x.txt``): the clients
    take them from the environment or ``storage_options``, and a URL is echoed and recorded.
    (http(s)'s ``user:password@`` is the server's basic auth, and never shown.)"""
    scheme = (scheme_of(url) or "").lower()
    if scheme in ("http", "https"):
        return
    netloc = url.split("://", 1)[1].split("/", 1)[0]
    user, at, _ = netloc.rpartition("@")
    if at and (":" in user or SCHEMES.get(scheme, ("",))[0] != "abfs"):
        raise ConfigError(f"{display(url)}: credentials written into the URL (before '@'); toktok does not read "
                          "them there: remove them and pass them as storage_options or the store's environment "
                          "(AWS_*, GOOGLE_APPLICATION_CREDENTIALS, AZURE_STORAGE_*, HF_TOKEN)")


def redact(options: Any) -> Any:
    """``storage_options`` as they may be written down: every value whose key is not known to be
    harmless (endpoint, region, ...) replaced by ``***``, recursively; URLs shown by :func:`display`.
    Example: ``redact({"key": "AKIA...", "endpoint_url": "http://x"}) == {"key": "***", "endpoint_url": "http://x"}``."""
    if isinstance(options, dict):
        return {k: (redact(v) if str(k) in _PLAIN else _REDACTED) for k, v in options.items()}
    if isinstance(options, (list, tuple)):
        return [redact(v) for v in options]
    if isinstance(options, str) and is_url(options):
        return display(options)
    return options


def retries() -> int:
    """Retries of a transient fault: ``TOKTOK_REMOTE_RETRIES`` or ``RETRIES``."""
    try:
        return max(0, int(os.environ.get("TOKTOK_REMOTE_RETRIES", RETRIES)))
    except ValueError:
        raise ConfigError(f"TOKTOK_REMOTE_RETRIES={os.environ['TOKTOK_REMOTE_RETRIES']!r}: "
                          "give a whole number of retries, e.g. 5") from None


def register(name: str, url: str, options: dict | None, size: int | None = None) -> None:
    """Remember how to open the object named ``name``: its URL (which may carry a query), the
    storage options and its size if known. A Ray worker does this for its unit."""
    _WHERE[name] = (url, dict(options or {}), size)


def location(name: str) -> tuple[str, dict, int | None]:
    """(URL to open, storage options, size or None) of a name: as registered, else the name itself."""
    return _WHERE.get(name, (name, {}, None))


class _Allowance:
    """The bytes that blocks read ahead may hold, shared by every open object of the process: a
    block is fetched ahead only when its bytes fit (else it is fetched when it is needed)."""

    def __init__(self, total: int):
        self.total, self.held = total, 0
        self._lock = threading.Lock()

    def take(self, n: int) -> bool:
        with self._lock:
            if self.held + n > self.total:
                return False
            self.held += n
            return True

    def give(self, n: int) -> None:
        with self._lock:
            self.held -= n


_AHEAD = _Allowance(READAHEAD_BYTES)
_POOL = None  # the read-ahead's threads, started on first use
_POOL_LOCK = threading.Lock()


def set_readahead(total: int | None) -> None:
    """Bound the read-ahead of every object opened from now on to ``total`` bytes together (None:
    ``READAHEAD_BYTES``); blocks shrink to half of it (at least ``MIN_BLOCK_BYTES``), so that one
    block read ahead of each of two objects read at once fits. The pipeline calls it with
    ``BudgetPlan.readahead_bytes``. Example: ``set_readahead(4 << 20); block_bytes() == 2 << 20``."""
    global _AHEAD
    _AHEAD = _Allowance(READAHEAD_BYTES if total is None else max(0, int(total)))


def readahead_bytes() -> int:
    """What the read-ahead of all open objects holds at most (:func:`set_readahead`)."""
    return _AHEAD.total


def block_bytes() -> int:
    """Bytes per range request: ``BLOCK_BYTES``, or half the read-ahead allowance if that is less."""
    return max(MIN_BLOCK_BYTES, min(BLOCK_BYTES, _AHEAD.total // 2))


def _pool():
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            from concurrent.futures import ThreadPoolExecutor

            _POOL = ThreadPoolExecutor(max_workers=4, thread_name_prefix="toktok-readahead")
        return _POOL


# ---------------------------------------------------------------------------------------------
# Clients
# ---------------------------------------------------------------------------------------------


def _client(url: str) -> tuple[str, str]:
    """(scheme, fsspec protocol) of a URL, or a ConfigError naming the pip command that installs
    its client."""
    scheme = scheme_of(url) or ""
    if scheme not in SCHEMES:
        raise ConfigError(f"{display(url)}: {scheme}:// sources are not supported; use {_SUPPORTED}")
    _no_credentials(url)
    protocol, module, extra = SCHEMES[scheme]
    for mod in (module, "fsspec"):
        try:
            importlib.import_module(mod)
        except ImportError:
            raise ConfigError(f"{display(url)}: reading {scheme}:// needs {module}, which is not installed; "
                              f"run: pip install 'toktok[{extra}]'") from None
    return scheme, protocol


def _defaults(protocol: str, options: dict) -> dict:
    """The client options toktok uses under the user's: for S3, no retries of the client's own
    (toktok retries, with its own waits, so that a store that is down fails after a known time)."""
    opts = dict(options)
    if protocol == "s3":
        cfg = dict(opts.get("config_kwargs") or {})
        cfg.setdefault("retries", {"max_attempts": 1})
        opts["config_kwargs"] = cfg
    return opts


def filesystem(url: str, options: dict | None = None):
    """(fsspec file system, path on it) for a URL; ``options`` go to the client.
    Example: ``fs, path = filesystem("s3://bucket/perf/a.parquet")``."""
    _, protocol = _client(url)
    from fsspec.core import url_to_fs

    try:
        fs, path = url_to_fs(url, **_defaults(protocol, options or {}))
        if protocol == "s3":
            fs.retries = 1  # s3fs's own retry loop (a class attribute, not an option): one try
        elif protocol == "hf":  # huggingface_hub logs each of its own retries; toktok reports the fault once
            import logging

            logging.getLogger("huggingface_hub.utils._http").setLevel(logging.ERROR)
        elif protocol == "gcs" and "_request" not in vars(fs):
            # gcsfs retries each request 6 times (~30 s of waits, fixed when the class is defined);
            # the undecorated request is one try, as for S3: toktok retries, with its own waits
            plain = getattr(type(fs)._request, "__wrapped__", None)
            if plain is not None:
                fs._request = plain.__get__(fs)
        return fs, path
    except TypeError as e:  # an option the client does not take
        raise ConfigError(f"{display(url)}: storage_options not accepted by the {protocol} client "
                          f"({_one_line(e)}); check the option names") from None
    except ValueError as e:
        raise ConfigError(f"{display(url)}: {_one_line(e)}; check the URL and storage_options") from None
    except Exception as e:  # noqa: BLE001 - a client that cannot load its credentials (a bad key file, ...)
        raise InputError(f"{display(url)}: the {protocol} client cannot use the credentials given "
                         f"({type(e).__name__}: {_one_line(e)}); check the credentials (AWS_* or ~/.aws, "
                         "GOOGLE_APPLICATION_CREDENTIALS, AZURE_STORAGE_*, HF_TOKEN) or storage_options") from None


# ---------------------------------------------------------------------------------------------
# Faults
# ---------------------------------------------------------------------------------------------


_URL_IN_TEXT = re.compile(r"\b[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"<>()]+")


def _one_line(e: BaseException) -> str:
    """The cause in one line, each URL in it as :func:`display` shows it: a client's message may
    quote the URL it asked for, a signed URL's signature with it."""
    text = _URL_IN_TEXT.sub(lambda m: display(m.group(0)), one_line(e, 400))
    # short: the line around it names the file, the retries and the fix within 300 characters
    return text if len(text) <= 80 else text[:77] + "..."


def _status(e: BaseException) -> int | None:
    for obj in (e, getattr(e, "response", None)):
        for attr in ("status", "status_code", "code"):
            v = getattr(obj, attr, None)
            if isinstance(v, int) and 100 <= v < 600:
                return v
    return None


def classify(e: BaseException) -> str | None:
    """"missing", "denied", "transient" or None (not a store fault: not retried)."""
    if isinstance(e, (FileNotFoundError, IsADirectoryError)):
        return "missing"
    if isinstance(e, PermissionError):
        return "denied"
    status = _status(e)
    if status in (401, 403):
        return "denied"
    if status == 404:
        return "missing"
    if status is not None and (status >= 500 or status in (408, 429)):
        return "transient"
    names = " ".join(t.__name__ for t in type(e).__mro__)
    if isinstance(e, (ConnectionError, TimeoutError)) or re.search(
            r"Connect|Timeout|Disconnect|IncompleteRead|Payload|ProtocolError|ReadError", names):
        return "transient"
    if isinstance(e, OSError) and not isinstance(e, (NotADirectoryError, FileExistsError)):
        return "transient"  # an I/O error of the client (a reset, a short read, ...)
    if re.search(r"ServiceRequestError|ServiceResponseError", names):
        return "transient"  # azure-core: the request could not be sent, or its answer was cut
    cause = e.__cause__ or e.__context__
    return classify(cause) if cause is not None and cause is not e else None


def _fail(name: str, kind: str, e: BaseException) -> InputError:
    cause = _one_line(e)
    if kind == "missing" and (scheme_of(name) or "").startswith("http"):  # fsspec's http client says
        return InputError(f"{name}: no such object, or access denied ({cause}); check the URL (a signed "  # 404 for 403
                          "URL's signature may be wrong or expired)")
    if kind == "missing":
        return InputError(f"{name}: no such object or bucket ({cause}); check the URL")
    return InputError(f"{name}: access denied ({cause}); check the credentials (AWS_* or ~/.aws, "
                      "GOOGLE_APPLICATION_CREDENTIALS, AZURE_STORAGE_*, HF_TOKEN) or storage_options")


def call(fn: Callable[[], T], name: str) -> T:
    """``fn()`` (one request to the store), retrying transient faults with doubling waits; other
    store faults and a fault that outlasts the retries are one-line InputErrors naming ``name``."""
    n = retries()
    waited = 0.0
    for attempt in range(n + 1):
        try:
            return fn()
        except InputError:
            raise
        except Exception as e:  # noqa: BLE001 - each client raises its own types; classified here
            kind = classify(e)
            if kind in ("missing", "denied"):
                raise _fail(name, kind, e) from None
            if kind is None:
                raise
            last = e
            if attempt < n:
                wait = RETRY_WAIT * (2 ** attempt)
                time.sleep(wait)
                waited += wait
    raise InputError(f"{name}: the store did not answer after {n} retries over {waited:.0f}s "
                     f"({_one_line(last)}); check the connection or the endpoint (AWS_ENDPOINT_URL), then rerun"
                     ) from None


# ---------------------------------------------------------------------------------------------
# Finding objects
# ---------------------------------------------------------------------------------------------


def _has_magic(s: str) -> bool:
    return any(c in s for c in "*?[")


def _tag(info: dict) -> str | None:
    """A version tag of an object from its listing (ETag, generation, blob id), None if none."""
    for k in ("ETag", "etag", "md5Hash", "generation", "blob_id", "sha256", "last_modified",
              "LastModified", "mtime"):
        v = info.get(k)
        if v:
            return str(v).strip('"')
    lfs = info.get("lfs")
    if isinstance(lfs, dict) and lfs.get("sha256"):
        return str(lfs["sha256"])
    return None


def resolve(source: str, options: dict | None = None) -> list:
    """The objects a URL source names, as ``SourceFile``s sorted by URL, each with its
    size, version tag (``etag``) and identity ``key`` (its path after the part of the URL before
    any wildcard: ``s3://b/perf/*.parquet`` -> ``a.parquet``; a prefix ``s3://b/perf/`` -> the
    path below it; one object -> its name). Globs (``*``, ``**``) and prefixes are listed on the
    store; http(s) URLs are single files. Raises InputError (nothing found, missing, denied,
    unreachable) or ConfigError (unsupported scheme, client not installed)."""
    options = dict(options or {})
    name = display(source)
    scheme = scheme_of(source) or ""
    fs, path = filesystem(source, options)
    fs.invalidate_cache()  # list afresh: a cached listing (same process) would hide a changed ETag
    web = SCHEMES.get(scheme, ("",))[0] == "http"
    found: list[tuple[str, str, dict]] = []  # (display URL, key, listing info)
    if _has_magic(urlsplit(source).path if web else source.split("://", 1)[1]):
        if web:
            raise InputError(f"{name}: http(s) sources are single files; list them one by one, or use "
                             "a store that lists (s3://, gs://, az://, hf://) for globs")
        head = source[:_magic_at(source)]
        base = head[:head.rfind("/") + 1]  # up to the last "/" before the first wildcard
        base_path = fs._strip_protocol(base).rstrip("/")
        hits = call(lambda: fs.glob(path, detail=True), name)
        for p, info in sorted(hits.items()):
            if info.get("type") == "directory":
                for q, sub in call(lambda p=p: fs.find(p, detail=True), name).items():
                    found.append(_found(base, base_path, q, sub))
            else:
                found.append(_found(base, base_path, p, info))
        found = [f for f in found if _wanted(f[1], kind_of)]
        if not found and base_path and not call(lambda: fs.exists(base_path), name):
            raise InputError(f"{name}: nothing at {base} (no such bucket, container or folder); check the URL")
        if not found:
            raise InputError(f"{name}: pattern matches no .parquet, .jsonl, .jsonl.zst or .txt objects; "
                             "check the pattern (use ** for any depth)")
    else:
        info = call(lambda: fs.info(path), name)
        if info.get("type") == "directory":
            base = source.rstrip("/") + "/"
            base_path = path.rstrip("/")
            hits = call(lambda: fs.find(path, detail=True), name)
            found = [f for f in (_found(base, base_path, q, sub) for q, sub in sorted(hits.items()))
                     if _wanted(f[1], kind_of)]
            if not found:
                raise InputError(f"{name}: no .parquet, .jsonl, .jsonl.zst or .txt objects under this "
                                 "prefix; point at the data files or another prefix")
        else:
            if kind_of(name) is None:
                raise InputError(f"{name}: unsupported file type; use .parquet, .jsonl, .jsonl.zst or .txt")
            size = info.get("size")
            if size is None:  # a web server that does not say: the first bytes tell nothing either
                raise InputError(f"{name}: the server does not give the file's size; toktok reads by "
                                 "ranges and needs it, download the file and pass its path")
            found = [(name, name.rstrip("/").rsplit("/", 1)[-1], info)]
    out = []
    for url, key, info in sorted(found, key=lambda f: f[0]):
        size = int(info.get("size") or 0)
        register(url, source if url == name else url, options, size)
        out.append(SourceFile(url, kind_of(url) or "", size, key=key, etag=_tag(info)))
    return out


def _magic_at(s: str) -> int:
    return min(i for i in (s.find(c) for c in "*?[") if i >= 0)


def _found(base: str, base_path: str, p: str, info: dict) -> tuple[str, str, dict]:
    """(URL as the user's base spells it, key = the path below the base, listing info)."""
    p = p.rstrip("/")
    rel = p[len(base_path):].lstrip("/") if p.startswith(base_path) else p.rsplit("/", 1)[-1]
    return base + rel, rel, info


def _wanted(key: str, kind_of) -> bool:
    """A supported data file, not hidden (no part of its key starts with ".", as local folders)."""
    return bool(key) and kind_of(key) is not None and not any(c.startswith(".") for c in key.split("/"))


# ---------------------------------------------------------------------------------------------
# Reading
# ---------------------------------------------------------------------------------------------


class RemoteFile(io.RawIOBase):
    """A read-only, seekable file over an object: each read is one range request (``cat_file``
    with start and end) unless a block fetched before holds it; a transient fault is retried
    (:func:`call`). The size comes from the listing, so opening costs no request.

    ``stream``: reads are of at least a block (``block_bytes()``), kept for the next reads, and
    the next block is fetched in the background while this one is used (JSONL, text). Without
    it reads are exact, and :meth:`plan` names the byte ranges that will be read in order (a
    Parquet file's text column chunks), whose next block is fetched ahead the same way. A block
    is fetched ahead only within the process's read-ahead allowance (:func:`set_readahead`).
    Example: ``open_file("s3://b/a.txt").read(5)``."""

    def __init__(self, name: str, size: int | None = None, readahead: bool = True):
        super().__init__()
        self.name = name
        self._url, self._options, known = location(name)
        self._stream = readahead
        self._fs = self._path = None
        self._pos = 0
        self._size = size if size is not None else known
        self._buf, self._buf_at = b"", 0  # the block being read, and its offset in the object
        self._ranges: list[tuple[int, int]] = []  # planned (start, end) ranges, in reading order
        self._ahead = None  # (start, end, future) of the block fetched ahead
        self._block = block_bytes()
        self._allow = _AHEAD  # the allowance in force when opened (set_readahead replaces it)
        #: Requests made, and how many of them were fetched ahead (tests, bench).
        self.requests = self.ahead_used = 0

    def _target(self):
        if self._fs is None:
            self._fs, self._path = filesystem(self._url, self._options)
        return self._fs, self._path

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def size(self) -> int:
        if self._size is None:
            fs, path = self._target()
            self._size = int(call(lambda: fs.size(path), self.name))
        return self._size

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = 0) -> int:
        base = {0: 0, 1: self._pos, 2: None}[whence]
        self._pos = max(0, offset + (self.size() if base is None else base))
        return self._pos

    def plan(self, ranges: list[tuple[int, int]]) -> None:
        """The byte ranges that will be read next, in order (a Parquet file's text column chunks,
        row group by row group): while one block of them is read, the next is fetched."""
        self._ranges = sorted((int(a), int(b)) for a, b in ranges if b > a)

    def _fetch(self, start: int, end: int) -> bytes:
        """Bytes [start, end) of the object: one range request, retried (:func:`call`)."""
        fs, path = self._target()
        extra = {"cache_type": "none"} if type(fs).__name__ == "HfFileSystem" else {}  # exactly the range
        got = call(lambda: fs.cat_file(path, start=start, end=end, **extra), self.name)
        if len(got) != end - start:  # a short body: the object changed or the store cut it
            raise InputError(f"{self.name}: the store sent {len(got)} of {end - start} bytes at "
                             f"offset {start}; the object may have changed, rerun")
        return got

    def _next_range(self, at: int) -> tuple[int, int] | None:
        """The block to fetch ahead once the reads reached offset ``at``."""
        size = self.size()
        if self._stream:
            return (at, min(size, at + self._block)) if at < size else None
        for lo, hi in self._ranges:
            if hi > at:
                lo = max(lo, at)
                return lo, min(hi, lo + self._block)
        return None

    def _read_ahead(self, at: int) -> None:
        if self._ahead is not None or self.closed:
            return
        nxt = self._next_range(at)
        if nxt is None or not self._allow.take(nxt[1] - nxt[0]):
            return
        self.requests += 1
        self._ahead = (*nxt, _pool().submit(self._fetch, *nxt))

    def _drop_ahead(self) -> None:
        if self._ahead is None:
            return
        lo, hi, fut = self._ahead
        self._ahead = None
        if fut.cancel() or fut.done():
            self._allow.give(hi - lo)
        else:  # still arriving: its bytes are held until then
            fut.add_done_callback(lambda _f, allow=self._allow: allow.give(hi - lo))

    def _from_ahead(self, start: int, end: int) -> bool:
        """Make the block fetched ahead the current one if it holds [start, end) (waiting for it);
        drop it if the reads went past it."""
        if self._ahead is None:
            return False
        lo, hi, fut = self._ahead
        if not (lo <= start and end <= hi):
            if start >= lo:  # the reads moved on (or jumped): it will not be used
                self._drop_ahead()
            return False
        self._ahead = None
        try:
            data = fut.result()
        finally:
            self._allow.give(hi - lo)
        self._buf, self._buf_at = data, lo
        self.ahead_used += 1
        return True

    def read(self, n: int = -1) -> bytes:
        size = self.size()
        end = size if n is None or n < 0 else min(size, self._pos + n)
        if end <= self._pos:
            return b""
        start = self._pos
        lo = start - self._buf_at
        if not (0 <= lo and end <= self._buf_at + len(self._buf)) and not self._from_ahead(start, end):
            fetch_end = min(size, max(end, start + self._block)) if self._stream else end
            self.requests += 1
            self._buf, self._buf_at = self._fetch(start, fetch_end), start
        lo = start - self._buf_at
        data = self._buf[lo:lo + end - start]
        self._pos = end
        if end >= self._buf_at + len(self._buf):  # used up: only the block read ahead stays
            self._buf, self._buf_at = b"", end
        self._read_ahead(self._buf_at + len(self._buf) if self._buf else end)
        return data

    def readall(self) -> bytes:
        return self.read(-1)

    def readinto(self, b) -> int:
        data = self.read(len(b))
        b[:len(data)] = data
        return len(data)

    def close(self) -> None:
        self._buf = b""
        self._drop_ahead()
        super().close()


def open_file(name: str, size: int | None = None, readahead: bool = True) -> RemoteFile:
    """A :class:`RemoteFile` for a registered name (or a plain URL); ``readahead``: streamed."""
    return RemoteFile(name, size, readahead)


def parquet_file(name: str, size: int | None = None, metadata=None):
    """A ``pyarrow.parquet.ParquetFile`` over the object: the footer is read at once unless its
    ``metadata`` is given (read before: no request), the pages on demand through pyarrow's
    buffered reader (a block per read, within the column chunk; :func:`plan_parquet` reads the
    next block ahead); pre-buffering (on by default) would fetch each whole column chunk at once."""
    import pyarrow.parquet as pq

    raw = open_file(name, size, readahead=False)
    pf = pq.ParquetFile(raw, metadata=metadata, buffer_size=raw._block, pre_buffer=False)
    pf.toktok_source = raw
    return pf


def plan_parquet(pf, row_groups, column: str) -> None:
    """Tell the object under ``pf`` (opened by :func:`parquet_file`) that column ``column`` of
    ``row_groups`` will be read in this order, so that the next block is fetched while one is
    read. Does nothing for a local file or a column it does not find."""
    raw = getattr(pf, "toktok_source", None)
    md = pf.metadata
    leaves = [md.schema.column(j).path for j in range(md.num_columns)]
    if raw is None or leaves.count(column) != 1:
        return
    ci = leaves.index(column)
    ranges = []
    for g in row_groups:
        col = md.row_group(g).column(ci)
        start = col.data_page_offset
        if col.has_dictionary_page and col.dictionary_page_offset and col.dictionary_page_offset < start:
            start = col.dictionary_page_offset  # as pyarrow computes the column chunk's range
        ranges.append((start, start + col.total_compressed_size))
    raw.plan(ranges)


__all__ = ["SCHEMES", "is_url", "scheme_of", "display", "redact", "resolve", "open_file", "parquet_file",
           "plan_parquet", "set_readahead", "readahead_bytes", "block_bytes", "register", "location", "filesystem", "call", "classify", "RemoteFile"]
