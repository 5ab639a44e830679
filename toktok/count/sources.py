"""Where the sources are: files, folders and globs (``**`` expanded here, so they work quoted)
resolved into files in sorted order, and each file's identity key; URL sources are listed on
their store by :mod:`toktok.count.remote`. What the folders and globs leave out (files of other
types, dangling or looping links, FIFOs, folders reached twice) becomes warning lines.
Example: ``resolve_sources(["data/**/*.parquet"])`` -> ``[SourceFile("data/a.parquet", ...)]``.
"""
from __future__ import annotations

import errno
import fnmatch
import os
import re
import stat
from collections.abc import Iterator

from . import remote
from ..errors import ConfigError, InputError
from .files import SourceFile, kind_of

_SUPPORTED = ".parquet, .jsonl, .jsonl.zst or .txt"


def _has_magic(s: str) -> bool:
    return any(c in s for c in "*?[")


def _join(base: str, name: str) -> str:
    return os.path.join(base, name) if base else name


def _is_regular(path: str) -> bool:
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        return False


class _Resolver:
    """Expands one source (a folder or a glob) into files, and keeps what it leaves out.

    The rule for folders and ``**`` globs alike: symbolic links are followed (to files and to
    folders), each real folder is listed once (so a link to ``.`` or to a parent ends instead of
    looping, and two links to one folder read it once), names starting with "." are skipped (as
    in shell globs), and only regular files are taken (a FIFO would block ``open`` for ever).
    What is left out other than hidden names is reported by :meth:`warnings`.
    """

    def __init__(self, src: str):
        self.src = src
        self.files: list[str] = []
        self.unsupported: list[str] = []
        self.dangling: list[str] = []
        self.loops: list[str] = []  # links that lead back to themselves (a -> b -> a)
        self.special: list[str] = []  # FIFOs, sockets, devices
        self.repeated: dict[str, None] = {}  # folders reached again through a link (ordered set)
        self._real: set[str] = set()  # real paths of the files left out

    def folders(self, root: str, seen: set) -> Iterator[tuple[str, list[os.DirEntry]]]:
        """(folder, its sorted entries) for ``root`` and every folder under it, each real folder
        once across ``seen`` (``(st_dev, st_ino)`` of the folders visited); ``root`` = "" is ".".
        """
        key = self._key(root or ".")
        if key is None or key in seen:
            return
        seen.add(key)
        stack = [root]
        while stack:
            d = stack.pop()
            try:
                with os.scandir(d or ".") as it:
                    entries = sorted(it, key=lambda e: e.name)
            except OSError as e:
                raise InputError(f"{d or '.'}: cannot list the folder ({e.strerror}); check "
                                 "permissions, or leave it out of the sources") from None
            yield d, entries
            subdirs = []
            # real folders claim their identity before links to them, so a folder is shown
            # under its own name rather than a link's
            dirs = [e for e in entries if not e.name.startswith(".") and _entry_is_dir(e)]
            for e in sorted(dirs, key=lambda e: e.is_symlink()):
                path = _join(d, e.name)
                key = self._key(path)
                if key is None:
                    continue
                if key in seen:  # a link to a folder listed already (or to an ancestor: a loop)
                    self.repeated[path] = None
                    continue
                seen.add(key)
                subdirs.append(path)
            stack.extend(sorted(subdirs, reverse=True))  # depth first, in name order

    @staticmethod
    def _key(path: str) -> tuple[int, int] | None:
        try:
            st = os.stat(path)
        except OSError:
            return None
        return st.st_dev, st.st_ino

    def take(self, path: str, entry: os.DirEntry | None = None) -> None:
        """Keep ``path`` if it is a regular file of a supported kind; else note why not (once
        per real file: resolve_sources keeps one path per real file, the first by name)."""
        try:
            regular = entry.is_file() if entry is not None else _is_regular(path)
        except OSError:
            regular = False
        if regular and kind_of(path) is not None:
            self.files.append(path)
            return
        real = os.path.realpath(path)
        if real in self._real:  # the same file through another link or match
            return
        self._real.add(real)
        if not regular:
            if not os.path.exists(path):  # a link to nothing, or a link loop
                (self.loops if _loops(path) else self.dangling).append(path)
            elif not os.path.isdir(path):
                self.special.append(path)
        else:
            self.unsupported.append(path)

    def walk(self, root: str, seen: set) -> None:
        """Every file under folder ``root`` (recursively)."""
        for d, entries in self.folders(root, seen):
            for e in entries:
                if not e.name.startswith(".") and not _entry_is_dir(e):
                    self.take(_join(d, e.name), e)

    def glob(self, pattern: str) -> None:
        """Files matching ``pattern`` (``**`` = any number of folders), and every file under
        the folders it matches."""
        parts = pattern.split(os.sep)
        k = next(i for i, part in enumerate(parts) if _has_magic(part))
        head = os.sep.join(parts[:k]) if k else ""
        if k == 1 and parts[0] == "":
            head = os.sep
        if head and not os.path.isdir(head):
            return
        matches: list[str] = []
        self._match(head, [q for q in parts[k:] if q], matches)
        matches = sorted(dict.fromkeys(matches))
        for m in matches:
            if not os.path.isdir(m or ".") and not pattern.endswith(os.sep):  # "dir/*/": folders only
                self.take(m)
        # matched folders are read whole: real ones first, so that a link to one is the repeat
        dirs = sorted((m for m in matches if os.path.isdir(m or ".")), key=os.path.islink)
        seen: set = set()
        top = self._key(head or ".")
        if not any(not os.path.islink(m) and self._key(m or ".") == top for m in dirs):
            seen.add(top)  # the pattern's first folder is being read: a link back to it is a loop
        for m in dirs:
            key = self._key(m or ".")
            if key in seen:  # read already, as a part of another matched folder
                if key == top and os.path.islink(m):
                    self.repeated[m] = None
                continue
            self.walk(m, seen)

    def _match(self, base: str, rest: list[str], out: list[str]) -> None:
        if not rest:
            out.append(base)
            return
        part, rest = rest[0], rest[1:]
        if part == "**":  # this folder and every folder under it, each real one once
            if not os.path.isdir(base or "."):
                return
            for d, _entries in self.folders(base, set()):
                self._match(d, rest, out)
            return
        if not _has_magic(part):
            path = _join(base, part)
            if os.path.lexists(path):
                self._match(path, rest, out)
            return
        rx = re.compile(fnmatch.translate(part))
        hidden_ok = part.startswith(".")
        try:
            with os.scandir(base or ".") as it:
                entries = sorted(it, key=lambda e: e.name)
        except NotADirectoryError:
            return
        except OSError as e:
            raise InputError(f"{base or '.'}: cannot list the folder ({e.strerror}); check "
                             "permissions, or leave it out of the sources") from None
        for e in entries:
            if (hidden_ok or not e.name.startswith(".")) and rx.match(e.name):
                if not rest or _entry_is_dir(e):
                    self._match(_join(base, e.name), rest, out)

    def skipped(self, short: bool = False) -> str:
        """What was left out, as one clause (empty if nothing): counts and a few examples (``short``:
        named within the folder given, for an error line that must stay short)."""
        parts = []
        base = self.src if short else ""
        if self.unsupported:
            by_ext: dict[str, int] = {}
            for p in self.unsupported:
                by_ext[_ext(p)] = by_ext.get(_ext(p), 0) + 1
            kinds = ", ".join(f"{n} {x}" for x, n in sorted(by_ext.items(), key=lambda kv: (-kv[1], kv[0]))[:4])
            parts.append(f"{_n(len(self.unsupported), 'file')} of other types ({kinds}: "
                         f"{_examples(self.unsupported, base=base)})")
        if self.dangling:
            parts.append(f"{_n(len(self.dangling), 'dangling symlink')} (the target is missing: "
                         f"{_examples(self.dangling, base=base)})")
        if self.loops:
            parts.append(f"{_n(len(self.loops), 'symlink loop')} (following them never reaches a file: "
                         f"{_examples(self.loops, base=base)})")
        if self.special:
            parts.append(f"{_n(len(self.special), 'FIFO, socket or device', 'FIFOs, sockets or devices')} "
                         f"(not regular files: {_examples(self.special, base=base)})")
        return "; ".join(parts)

    def warnings(self) -> list[str]:
        """One line for what was skipped, one for the folders reached twice."""
        out = []
        if what := self.skipped():
            todo = []
            if self.unsupported:
                todo.append(f"toktok reads {_SUPPORTED} files")
            if any(p.lower().endswith(".gz") for p in self.unsupported):
                todo.append("decompress .gz files, or recompress them with zstd (.jsonl.zst)")
            if self.dangling or self.loops:
                todo.append(f"fix or remove the {'dangling' if not self.loops else 'looping' if not self.dangling else 'dangling and looping'} links")
            if self.special:
                todo.append("only regular files are read")
            out.append(f"{self.src}: skipped {what}; " + "; ".join(todo))
        if self.repeated:
            links = [f"{p} -> {os.readlink(p)}" if os.path.islink(p) else p for p in self.repeated]
            out.append(f"{self.src}: {_n(len(links), 'symlinked folder')} "
                       f"{'leads' if len(links) == 1 else 'lead'} to a folder read already "
                       f"(a loop, or a second link), not read again: {_examples(links)}")
        return out


def _entry_is_dir(e: os.DirEntry) -> bool:
    try:
        return e.is_dir()  # follows a symlink
    except OSError:
        return False


def _loops(path: str) -> bool:
    """Whether following ``path``'s links never ends (``ln -s a b; ln -s b a``): the system's
    ELOOP. Example: ``_loops("loop")`` after ``ln -s loop loop`` is True."""
    try:
        os.stat(path)
    except OSError as e:
        return e.errno == errno.ELOOP
    return False


def _chain(path: str, most: int = 8) -> str:
    """The links from ``path`` as they are written, until one comes back (or ``most`` of them).
    Example: ``_chain("a") == "a -> b -> a"`` after ``ln -s b a; ln -s a b``."""
    shown, p = [path], path
    seen = {os.path.abspath(path)}
    for _ in range(most):
        try:
            target = os.readlink(p)
        except OSError:
            break
        shown.append(target)
        p = os.path.join(os.path.dirname(p), target)
        if (key := os.path.abspath(p)) in seen:
            break
        seen.add(key)
    else:
        shown.append("...")
    return " -> ".join(shown)


def _ext(path: str) -> str:
    """The suffix shown for an unsupported file: ``.jsonl.gz``, ``.md``, or "no suffix"."""
    name = os.path.basename(path).lower()
    parts = name.split(".")[1:]
    if not parts:
        return "without suffix"
    return "." + ".".join(parts[-2:]) if len(parts) >= 2 and len(parts[-1]) <= 4 else "." + parts[-1]


def _n(n: int, one: str, many: str | None = None) -> str:
    return f"{n:,} {one if n == 1 else many or one + 's'}"


def _examples(paths: list[str], k: int = 3, base: str = "") -> str:
    """The first ``k`` of ``paths``, below ``base`` (a folder given) as paths within it, so that a
    deep folder keeps the line short. Example: ``_examples(["d/a.gz", "d/b.gz"], 1, "d") == "a.gz, ... (1 more)"``."""
    cut = len(base.rstrip("/")) + 1 if base else 0
    shown = [p[cut:] if cut and p.startswith(base.rstrip("/") + "/") else p for p in paths[:k]]
    return ", ".join(shown) + (f", ... ({len(paths) - k:,} more)" if len(paths) > k else "")


def _unsupported(src: str) -> str:
    """The refusal of a file given directly whose kind toktok does not read."""
    if src.lower().endswith(".gz"):
        return (f"{src}: gzip-compressed files are not read; decompress it (gunzip), or recompress "
                f"it with zstd (zstd -d ... | zstd > FILE.jsonl.zst); toktok reads {_SUPPORTED}")
    return f"{src}: unsupported file type; use {_SUPPORTED}"


def resolve_sources(sources: list[str], *, skipped: list[str] | None = None,
                    storage_options: dict | None = None) -> list[SourceFile]:
    """Expand files, directories (recursive) and globs (``**`` = any depth) into files.

    Files are deduplicated (by real path) and sorted by path, so runs are reproducible.
    Folders and ``**`` globs follow symlinks, list each real folder once and take regular files
    only (see :class:`_Resolver`); what they leave out (files of other types, dangling or looping
    links, FIFOs, folders reached twice) is appended to ``skipped`` as warning lines. URL sources
    (``s3://``, ``gs://``, ``az://``, ``hf://``, ``https://``) are listed on their store
    (:func:`toktok.remote.resolve`, ``storage_options`` go to its client); each file gets its
    identity ``key`` (:func:`source_key`).
    Example: ``resolve_sources(["data/**/*.parquet"])`` -> ``[SourceFile("data/a.parquet", ...)]``.
    Raises InputError for a missing path, an unsupported or irregular file, a directory without
    supported files, or a glob matching none.
    """
    if isinstance(sources, (str, os.PathLike)):
        sources = [sources]
    if not sources:
        raise ConfigError("no corpus sources given; pass files, directories or globs such as "
                          "'data/**/*.parquet'")
    paths: list[str] = []
    urls: dict[str, SourceFile] = {}
    for src in map(os.fspath, sources):
        if remote.is_url(src):
            urls.update((f.path, f) for f in remote.resolve(src, storage_options) if f.path not in urls)
            continue
        expanded = os.path.expanduser(src)
        if os.path.isdir(expanded):
            r = _Resolver(src)
            r.walk(expanded, set())
            if not r.files:
                what = r.skipped(short=True)
                raise InputError(f"{src}: directory has no {_SUPPORTED} files"
                                 + (f" (it has {what})" if what else "")
                                 + "; point at the data files or another folder")
        elif os.path.exists(expanded):
            if not _is_regular(expanded):
                raise InputError(f"{src}: not a regular file or directory (a FIFO, socket or device); "
                                 "pass a data file")
            if kind_of(expanded) is None:
                raise InputError(_unsupported(src))
            paths.append(expanded)
            continue
        elif os.path.islink(expanded) and _loops(expanded):
            raise InputError(f"{src}: symlink loop ({_chain(expanded)}): it never reaches a file; fix the link "
                             "or pass the file it should point to")
        elif os.path.islink(expanded):
            raise InputError(f"{src}: dangling symlink (its target {os.readlink(expanded)} does not "
                             "exist); fix the link or pass the file it should point to")
        elif _has_magic(src):
            r = _Resolver(src)
            r.glob(expanded)
            if not r.files:
                what = r.skipped(short=True)
                raise InputError(f"{src}: pattern matches no {_SUPPORTED} files"
                                 + (f" (it matches {what})" if what else "")
                                 + "; check the pattern (use ** for any depth)")
        else:
            raise InputError(f"{src}: no such file or directory; check the path")
        paths += r.files
        if skipped is not None:
            skipped += r.warnings()

    by_real: dict[str, str] = {}
    for p in sorted(os.path.normpath(p) for p in paths):
        by_real.setdefault(os.path.realpath(p), p)
    out = []
    for p in sorted(by_real.values()):
        try:
            size = os.stat(p).st_size
        except OSError as e:
            raise InputError(f"{p}: cannot stat ({e.strerror}); check permissions") from None
        out.append(SourceFile(p, kind_of(p) or "", size))
    return _with_keys(out, sources) + sorted(urls.values(), key=lambda f: f.path)


def read_once(sources: list, given: list, where: str = "") -> None:
    """Each file once per phase: a file that a later source of the phase names again (the same
    path twice, a folder and a file in it, a file and a link to it, the same URL) is read by the
    first source that names it and left out of the later ones, said in one warning line per set
    of sources naming the same files (on the last one's corpus). ``sources`` are a phase's
    resolved sources (``count.Source``: ``corpus.files``, ``weight``), ``given`` their
    ``SourceConfig``s, in the same order; in-memory data is never the same file, nor a file
    read for another text column or as a word-count table. ``where``: the phase, for messages.
    Raises ConfigError when the phase's sources have weights: which share the file belongs to is
    not clear, so the user says it. A file listed in two phases is read by each.
    Example: ``read_once([Source(read_corpus(["a.txt"])), Source(read_corpus(["a.txt"]))], cfgs)``
    leaves the second source without files."""
    weighted = any(s.weight is not None for s in sources)
    named: dict[tuple, list] = {}  # (a table?, columns, the file's identity) -> [its path, the sources naming it]
    for k, (src, cfg) in enumerate(zip(sources, given)):
        if cfg.kind == "memory":
            continue
        kept = []
        for f in src.corpus.files:
            ident = (cfg.kind == "counts", src.corpus.text_column, cfg.word_column, cfg.count_column,
                     f.path if remote.is_url(f.path) else os.path.realpath(f.path))
            got = named.setdefault(ident, [f.path])
            if got[-1] == k:  # (twice in one source: resolve_sources keeps one, so never)
                continue
            got.append(k)
            if len(got) == 2:
                kept.append(f)
            elif weighted:
                first, again = _shown(given[got[1]].path), _shown(cfg.path)
                raise ConfigError(f"{where}{_shown(got[0])}: named by two sources ({first} and {again}) of a phase "
                                  "whose sources have weights, so its share is unclear; name each file in one source "
                                  "only (a glob can leave it out of a folder's)")
        src.corpus.files = kept
    again: dict[tuple[int, ...], list[str]] = {}
    for path, *ks in named.values():
        if len(ks) > 1:
            again.setdefault(tuple(ks), []).append(path)
    for ks, paths in again.items():
        by = f"{'two' if len(ks) == 2 else len(ks)} sources ({', '.join(_shown(given[k].path) for k in ks)})"
        paths = [_shown(p) for p in paths]
        what = (f"{paths[0]}: named by {by}; read once" if len(paths) == 1 else
                f"{_n(len(paths), 'file')} named by {by}: {_examples(paths)}; each read once")
        sources[ks[-1]].corpus.warnings.append(where + what)


def _shown(path: str) -> str:
    """A path or URL as a message shows it (a URL's user info as ``***@``: :func:`remote.display`)."""
    return remote.display(path) if remote.is_url(path) else path


def source_key(source: str, path: str) -> str | None:
    """The part of a local ``path`` that ``source`` did not spell out, None if ``source`` does not
    name it: below a folder source, the path inside it; below a glob, the path after the glob's
    leading folders without wildcards; a file source, the file's name. "/"-separated.
    Example: ``source_key("data/**/*.parquet", "data/en/a.parquet") == "en/a.parquet"``."""
    src = os.path.normpath(os.path.expanduser(os.fspath(source)))
    path = os.path.normpath(path)
    if src == path and not os.path.isdir(src):
        return os.path.basename(path)
    if _has_magic(src) and not os.path.exists(src):
        parts = src.split(os.sep)
        k = next(i for i, part in enumerate(parts) if _has_magic(part))
        src = os.sep.join(parts[:k]) or (os.sep if src.startswith(os.sep) else ".")
    rel = os.path.relpath(path, src)
    if rel == "." or rel == ".." or rel.startswith(".." + os.sep):
        return None
    return rel.replace(os.sep, "/")


def _with_keys(files: list[SourceFile], sources: list[str]) -> list[SourceFile]:
    """Set each file's ``key``: from the first source that names it (else its file name)."""
    local = [s for s in map(os.fspath, sources) if not remote.is_url(s)]
    for f in files:
        if not f.key:
            f.key = next((k for s in local if (k := source_key(s, f.path))), os.path.basename(f.path))
    return files
