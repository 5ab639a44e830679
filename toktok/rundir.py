"""The output folder: where a run's files go, the staging folder it is built in, its lock, the
checks before any work, and publishing.

Owns the names of a run's own files: the run file (:data:`RUN_FILE`), the staging folder
``.NAME.partial`` beside the output folder (:func:`staging_of`, read back by :func:`shown`), the
``NAME.toktok`` folder beside a .tiktoken written into a folder toktok does not own
(:func:`companion_name`) and the ``NAME.special_tokens.json`` list beside a .tiktoken
(:func:`special_tokens_file`). A run is built in its staging folder under an exclusive lock
(:func:`open_staging`) and renamed into place by :meth:`Staging.publish` only after it passed its
parity check, so a failed or killed run never leaves a half-written tokenizer, and publishing
replaces only toktok's own outputs, never an input of the run. Imports nothing of toktok but its
errors and the SQL it ships. Example: ``staging = open_staging(output_layout("out/tok", "tokenizer.tiktoken"), force=False)``.
"""
from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from .errors import OutputError, ResourceError
from .statements import sql

#: The run file in every output folder (DuckDB: words, merges, vocabulary, provenance).
RUN_FILE = "run.duckdb"
#: Suffix of the folder that holds a run's other outputs beside a .tiktoken written into a folder
#: toktok does not own (``./tokenizer.tiktoken`` -> ``./tokenizer.toktok/``).
COMPANION_SUFFIX = ".toktok"
#: Suffix of the special-token list beside a .tiktoken (``x.tiktoken`` -> ``x.special_tokens.json``).
SPECIALS_SUFFIX = ".special_tokens.json"
#: Suffix of the hidden staging folder a run into ``NAME`` is built in: ``.NAME.partial``.
STAGING_SUFFIX = ".partial"
#: A staging folder's name, read back (with the ``-N`` some callers add to make it unique).
_STAGING = re.compile(r"^\.(.+)" + re.escape(STAGING_SUFFIX) + r"(-\d+)?$")


def companion_name(tiktoken_name: str) -> str:
    """The folder beside a .tiktoken that holds the run's other outputs when the .tiktoken's folder
    is not toktok's own: ``companion_name("tokenizer.tiktoken") == "tokenizer.toktok"``."""
    stem = tiktoken_name[: -len(".tiktoken")] if tiktoken_name.endswith(".tiktoken") else tiktoken_name
    return (stem or tiktoken_name) + COMPANION_SUFFIX


def special_tokens_file(tiktoken_path: str | os.PathLike) -> Path:
    """The special-token list beside a ``.tiktoken`` file: ``x.tiktoken`` -> ``x.special_tokens.json``
    (a JSON object ``{token: id}``), as ``toktok convert`` writes it."""
    p = Path(tiktoken_path)
    return p.with_name(p.stem + SPECIALS_SUFFIX)


def real(p: str | os.PathLike) -> Path:
    """``p`` with ``~`` and every symlink resolved: a run replaces a linked folder's target and keeps the link."""
    return Path(os.path.realpath(os.path.expanduser(p)))


def inside(path: Path, folder: Path) -> bool:
    """Whether ``path`` is ``folder`` or lies in it (both as given: resolve them first)."""
    return path == folder or folder in path.parents


#: Bytes the names toktok writes beside an output add to its name (``.NAME.partial``, ``.NAME.PID.tmp``).
NAME_MARGIN = 13  # (".NAME.tmp-PID", ".NAME.PID.tmp": a PID of up to 7 digits)


def check_out_parent(out: str) -> None:
    """Fail before any work when the output folder cannot be made: a name in it longer than the
    file system takes (the output's own with room for the temporary names beside it), a file where
    a parent folder should be, or (for a user other than root) a nearest existing folder that is
    not writable."""
    p = Path(out).absolute()
    for k, part in enumerate(p.parts[1:], 1):
        last = k == len(p.parts) - 1
        most = _name_max(p) - (NAME_MARGIN if last else 0)
        if len(os.fsencode(part)) > most:
            raise OutputError(f"{out}: the name {shown_name(part)} is {len(os.fsencode(part)):,} bytes, more than the "
                              f"{most} the file system takes there" + (" (beside toktok's temporary names)" if last else "")
                              + "; pass a shorter --out")
    for anc in p.parents:
        if not os.path.lexists(anc):
            continue
        if not anc.is_dir():
            what = "a link that leads to no folder" if anc.is_symlink() else "a file"
            raise OutputError(f"{out}: cannot create the output folder, {anc} is {what}; pass an --out in a folder")
        if not os.access(anc, os.W_OK | os.X_OK):
            raise OutputError(f"{out}: cannot write in {anc} (permission denied); pass a writable --out")
        return


def _name_max(p: Path) -> int:
    """The longest file name (bytes) the file system of ``p``'s nearest existing folder takes."""
    for anc in p.parents:
        try:
            return int(os.pathconf(anc, "PC_NAME_MAX"))
        except (OSError, ValueError):
            continue
    return 255


def shown_name(name: str) -> str:
    """A long file name in a message: its start, ``...`` and its length's worth said elsewhere."""
    return repr(name) if len(name) <= 40 else repr(name[:30]) + "..."


def holds_cwd(folder: str | os.PathLike) -> bool:
    """Whether ``folder`` is the current folder or holds it (links resolved): toktok never fills
    (nor replaces) such a folder as its own."""
    return inside(real(Path.cwd()), real(folder))


def is_run_folder(folder: str | os.PathLike) -> bool:
    """Whether ``folder`` holds a file named :data:`RUN_FILE` (an interrupted run's may be cut
    short: ``--resume`` tells what it is). Whether the folder is toktok's: :func:`is_toktok_folder`."""
    return (Path(folder) / RUN_FILE).is_file()


def is_toktok_folder(folder: str | os.PathLike) -> bool:
    """Whether ``folder``'s :data:`RUN_FILE` is a toktok run file: a DuckDB file whose ``meta``
    table records a ``schema_version`` (any: an older toktok's run is toktok's too). A text file of
    that name, or another program's DuckDB database, is not, and ``--force`` never replaces its
    folder. Read-only, without DuckDB for what is not a DuckDB file at all.
    Example: ``is_toktok_folder("out/demo")``."""
    p = Path(folder) / RUN_FILE
    try:
        with open(p, "rb") as f:
            if f.read(12)[8:12] != b"DUCK":  # DuckDB's magic
                return False
            st = os.fstat(f.fileno())
    except OSError:
        return False
    # the run checks its output folder before any work and again as it opens its staging folder:
    # the same file (inode, size, modification time) once found toktok's is not opened again
    # (~40 ms of DuckDB each); a "no" (a live writer holds it, say) is asked again. A file that
    # toktok published and nothing changed since says so itself (``_marked``)
    key = (str(p), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
    if key in _TOKTOK_FILES or _marked(p, st):
        return True
    if not _records_schema_version(p):
        return False
    _TOKTOK_FILES.clear()
    _TOKTOK_FILES.add(key)
    return True


#: The run file ``is_toktok_folder`` last found toktok's, by its identity.
_TOKTOK_FILES: set[tuple] = set()
#: The extended attribute of a published run file (:func:`publish`): its size and modification
#: time then. While they hold, a later run's ``--force`` finds the folder toktok's without opening
#: the file with DuckDB (~25 ms of the run's start, beside the reading of its input); a file
#: written since, copied without its attributes, or on a file system without them is opened.
MARK = "user.toktok.run"


def _stamp(st: os.stat_result) -> bytes:
    return f"{st.st_size}:{st.st_mtime_ns}".encode()


def _marked(p: Path, st: os.stat_result) -> bool:
    """Whether the run file ``p`` (``st``: its stat) is as toktok published it (:data:`MARK`)."""
    try:
        return os.getxattr(p, MARK) == _stamp(st)
    except (OSError, AttributeError):  # (none, or no extended attributes here: not Linux)
        return False


def _mark(p: Path) -> None:
    """Record on the finished run file ``p`` that toktok published it as it is (:data:`MARK`)."""
    try:
        os.setxattr(p, MARK, _stamp(os.stat(p)))
    except (OSError, AttributeError):
        pass


def _records_schema_version(p: Path) -> bool:
    """Whether the DuckDB file ``p``'s ``meta`` table records a ``schema_version`` (read-only)."""
    try:  # (DuckDB's engine alone: see toktok.store)
        import _duckdb as duckdb
    except ImportError:
        import duckdb

    try:
        con = duckdb.connect(str(p), read_only=True)
    except duckdb.Error:  # held by a live writer, or unreadable: not shown to be toktok's
        return False
    try:
        rows = con.execute(sql("get_meta"), {"key": "schema_version"}).fetchall()
        return bool(rows and rows[0][0])
    except duckdb.Error:  # no meta table, or another one of that name
        return False
    finally:
        con.close()


@dataclass(frozen=True)
class OutputLayout:
    """Where a run's files go (:func:`output_layout`, ``TrainConfig.layout``).

    ``folder`` is toktok's own folder: tokenizer.json, the transformers files and the run file, built
    in a staging folder beside it and published (and replaced) as a whole. ``tiktoken`` is the
    .tiktoken file, published with its ``NAME.special_tokens.json`` (when there is one): inside
    ``folder``, or beside it when ``shared`` (its folder is not toktok's: the current folder, or one
    holding other files). Example: ``OutputLayout(Path("tok.toktok"), Path("tok.tiktoken"), True)``.
    """

    folder: Path
    tiktoken: Path
    shared: bool

    @property
    def run_file(self) -> Path:
        """The published run file: ``folder``'s :data:`RUN_FILE`."""
        return self.folder / RUN_FILE


def _own_folder(folder: Path) -> bool:
    """Whether ``output:``'s folder is toktok's to fill (and replace): not the current folder or one
    holding it, and not there yet, empty, or holding a toktok run."""
    if holds_cwd(folder):
        return False
    folder = real(folder)
    if not folder.is_dir():
        return True  # not there yet (a file there is refused when the run starts)
    try:
        return is_toktok_folder(folder) or next(folder.iterdir(), None) is None
    except OSError:
        return False


def output_layout(out: str | os.PathLike, tiktoken_name: str, *, tiktoken_given: bool = False) -> OutputLayout:
    """Where the outputs go. ``--out DIR``, or a .tiktoken path (``tiktoken_given``: toktoktok's
    ``output:``) whose folder is toktok's own (not there yet, empty, or holding a toktok run), gets
    everything in that folder. A .tiktoken path into any other folder (the current folder, one
    holding other files) writes exactly that .tiktoken there and the other outputs into
    ``NAME.toktok/`` beside it. Example: ``output_layout("out/tok", "tokenizer.tiktoken").shared is False``."""
    folder = Path(os.path.expanduser(out))
    tiktoken = folder / tiktoken_name
    if not tiktoken_given or _own_folder(folder):
        return OutputLayout(folder, tiktoken, False)
    return OutputLayout(folder / companion_name(tiktoken_name), tiktoken, True)


def staging_of(out: str | os.PathLike) -> Path:
    """Where a run into ``out`` is built (and where ``--resume`` finds an interrupted one):
    ``.NAME.partial`` beside the real folder."""
    r = real(out)
    return r.parent / f".{r.name}{STAGING_SUFFIX}"


def shown(p: str | os.PathLike | None) -> str:
    """A path as the user knows it: a run's hidden staging folder shown as the output folder it
    becomes (``out/.tok.partial-12/run.duckdb`` -> ``out/tok/run.duckdb``)."""
    if p is None:
        return "?"
    parts = [m.group(1) if (m := _STAGING.match(part)) else part for part in Path(p).parts]
    return str(Path(*parts)) if parts else str(p)


def interrupted_run(out: str | os.PathLike) -> Path | None:
    """The staging folder an interrupted run into ``out`` left for ``--resume``, or None."""
    staging = staging_of(out)
    return staging if is_run_folder(staging) else None


def _check_inputs(inputs: list[tuple[str, str]], replaced: list[Path], out: Path) -> None:
    """No input of the run (a source file or folder, the warm-start base) may lie in what publishing
    the run replaces: the run would delete the data it was trained on."""
    for path, what in inputs:
        if "://" in path:
            continue
        p = real(path)
        for r in replaced:
            if inside(p, real(r)):
                raise OutputError(
                    f"{path}: {what} of this run lies in {r}, which publishing the run replaces; "
                    f"move it out, or write the output elsewhere (not {out})")


def _check_shared(layout: OutputLayout) -> None:
    """An ``output:`` into a folder toktok does not own replaces only toktok's own outputs of that
    name: the .tiktoken and its special-token list if the ``NAME.toktok`` folder beside them holds a
    toktok run, the folder itself if it does (or is empty)."""
    comp = layout.folder
    folder = real(comp)
    ours = is_toktok_folder(folder)
    fix = "move it away, or name another output"
    if os.path.lexists(folder) and not folder.is_dir():
        raise OutputError(f"{comp}: exists and is not a folder; toktok keeps the run's other outputs there, so {fix}")
    if folder.is_dir() and not ours and next(folder.iterdir(), None) is not None:
        raise OutputError(f"{comp}: exists and is not a toktok output folder (no {RUN_FILE}); toktok keeps the "
                          f"run's other outputs there, so {fix}")
    if not ours:
        for f in (layout.tiktoken, special_tokens_file(layout.tiktoken)):
            if os.path.lexists(f):
                raise OutputError(f"{f}: exists and toktok did not write it (no {comp}/{RUN_FILE}); "
                                  f"toktok replaces only its own outputs, so {fix}")


def _check_out(layout: OutputLayout, force: bool, resume: bool, inputs: list[tuple[str, str]]) -> Path:
    """The checks before any work: the output is not the current folder, publishing replaces no
    input, a ``--resume`` has an interrupted run to continue, and what is there may be replaced.
    Returns the staging folder."""
    out = layout.folder
    if holds_cwd(out):
        raise OutputError(f"{out}: is the current folder or holds it; toktok writes (and replaces) a folder of "
                          "its own: pick one, e.g. --out out/tok (a config's output: ./NAME.tiktoken writes "
                          "only the .tiktoken here)")
    staging = staging_of(out)
    replaced = [staging] + ([layout.tiktoken, special_tokens_file(layout.tiktoken)] if layout.shared else [])
    if os.path.lexists(real(out)):
        replaced.append(out)
    _check_inputs(inputs, replaced, out)
    if resume and interrupted_run(out) is None:
        if is_run_folder(out):
            raise OutputError(f"{out}: this run finished (no interrupted run to resume); its output is in place, "
                              "nothing to do (to train it again, rerun with --force instead of --resume)")
        raise OutputError(f"{out}: no interrupted run to resume (no {staging}/{RUN_FILE}); "
                          "run without --resume")
    if layout.shared:
        _check_shared(layout)
    elif out.exists() and not out.is_dir():
        raise OutputError(f"{out}: exists and is not a folder; pass another --out")
    elif out.exists() and any(out.iterdir()):
        if not force:
            # a --force rerun killed beside a finished output: --resume continues it, and it
            # replaces the output when it finishes, as the rerun would have
            if resume:
                raise OutputError(f"{out}: exists and is not empty; the resumed run replaces it when it finishes: "
                                  "pass --resume --force")
            also = f" (or --resume --force to continue the interrupted run in {staging})" if is_run_folder(staging) else ""
            raise OutputError(f"{out}: exists and is not empty; pass --force to replace it{also}")
        # --force replaces the folder as a whole: only ever a toktok output folder
        if not is_toktok_folder(out):
            what = f"its {RUN_FILE} is not a toktok run file" if is_run_folder(out) else f"no {RUN_FILE}"
            raise OutputError(f"{out}: is not a toktok output folder ({what}); --force replaces only those, "
                              "so pick another folder")
    return staging


def _lock(staging: Path):
    """Hold an exclusive lock on the staging folder for this process's lifetime (released by the
    OS when the process dies, even by kill -9), so that two runs never write one folder."""
    import fcntl

    f = open(staging / ".lock", "a")
    try:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        f.close()
        raise OutputError(f"{staging}: another toktok run is writing this output; wait for it or pick another --out") from None
    return f


class Staging:
    """A run's staging folder (``path``), locked by this process until :meth:`publish` or
    :meth:`release`; ``resuming`` when it holds an interrupted run that this one continues."""

    def __init__(self, path: Path, resuming: bool, lock) -> None:
        self.path = path
        self.resuming = resuming
        self._lock = lock

    def release(self) -> None:
        """Give up the lock (the folder stays, e.g. for a later ``--resume``)."""
        self._lock.close()

    def discard(self) -> None:
        """Remove the folder and what it holds."""
        shutil.rmtree(self.path, ignore_errors=True)

    def publish(self, layout: OutputLayout) -> None:
        """Release the lock and put the finished folder in place (:func:`publish`)."""
        self._lock.close()
        (self.path / ".lock").unlink(missing_ok=True)
        publish(self.path, layout)


def check_output(layout: OutputLayout, force: bool, resume: bool = False,
                 inputs: list[tuple[str, str]] | None = None) -> Path:
    """The output's checks, before any work: it may be written and replaced, publishing replaces
    no input of the run (``inputs``: (path, what it is)), a ``--resume`` has an interrupted run to
    continue, and an interrupted run is never thrown away without ``force`` (nor while another run
    writes it). Leaves every file as it was. Returns the staging folder.
    Example: ``check_output(layout, force=False).name == ".tok.partial"``."""
    out = layout.folder
    staging = _check_out(layout, force, resume, inputs or [])
    if not resume and staging.exists():
        _lock(staging).close()  # refuses while another run is writing it
        if not force and is_run_folder(staging):
            raise OutputError(f"{out}: an interrupted run was found in {staging}; pass --resume to continue it "
                              "or --force to start over")
    return staging


def open_staging(layout: OutputLayout, force: bool, resume: bool = False,
                 inputs: list[tuple[str, str]] | None = None) -> Staging:
    """The output checked again (:func:`check_output`: what is there may have changed since the
    run's plan) and the staging folder beside it locked: the interrupted run's with ``resume``,
    else a new empty one. Example: ``open_staging(layout, force=False).path.name == ".tok.partial"``."""
    out = layout.folder
    staging = check_output(layout, force, resume, inputs)
    if not resume:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
        try:
            staging.parent.mkdir(parents=True, exist_ok=True)
            staging.mkdir()
        except OSError as e:
            raise OutputError(f"{out}: cannot write here ({e.strerror}); pass a writable --out") from None
    try:
        lock = _lock(staging)
    except OSError as e:  # (another run holding the lock is an OutputError: its folder stays)
        if not resume:  # made just now by this run
            shutil.rmtree(staging, ignore_errors=True)
        raise OutputError(f"{out}: cannot write here ({e.strerror or e}); pass a writable --out") from None
    return Staging(staging, resume, lock)


#: about what the tokenizer files take per token (tokenizer.json ~70 bytes, the .tiktoken ~10)
EXPORT_BYTES_PER_TOKEN = 96


def no_room(e: OSError, out: Path, staging: Path, tokens: int) -> OutputError | ResourceError:
    """The one line for a write into the staging folder that failed (a full disk, a read-only file
    system, no permission): the output folder, the cause, and about how many bytes the run's
    files need there (what the staging folder holds plus the tokenizer files).
    Example: ``no_room(OSError(28, "No space left on device"), Path("tok"), Path(".tok.partial"), 1422)``."""
    import errno

    held = sum(p.stat().st_size for p in staging.rglob("*") if p.is_file()) if staging.is_dir() else 0
    need = held + EXPORT_BYTES_PER_TOKEN * tokens
    denied = e.errno in (errno.EROFS, errno.EACCES, errno.EPERM)
    kind, fix = (OutputError, "pass a writable --out") if denied else \
        (ResourceError, "free space on that disk or pass another --out")
    return kind(f"{out}: cannot write the tokenizer files ({e.strerror or e}); they need about "
                f"{need:,} bytes there with the run file; {fix}")


def publish(staging: Path, layout: OutputLayout) -> None:
    """Put the finished staging folder in place, each file whole. Into a folder toktok does not own,
    the .tiktoken and its special-token list (if any; a stale one of an earlier run goes) replace
    theirs first; then the folder is swapped, the old one going only after the swap. A symlinked
    output folder keeps its link: the link's target is replaced."""
    target = real(layout.folder)
    _mark(staging / RUN_FILE)
    if layout.shared:
        tt = staging / layout.tiktoken.name
        side, side_to = special_tokens_file(tt), real(special_tokens_file(layout.tiktoken))
        if side.exists():
            side.rename(side_to)
        elif os.path.lexists(side_to):
            side_to.unlink()  # toktok's own (checked up front): it no longer describes the .tiktoken
        tt.rename(real(layout.tiktoken))
    old = None
    if os.path.lexists(target):
        old = target.parent / f".{target.name}.old-{os.getpid()}"
        target.rename(old)
    staging.rename(target)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


__all__ = ["RUN_FILE", "OutputLayout", "Staging", "check_output", "output_layout", "open_staging", "publish", "interrupted_run", "no_room",
           "staging_of", "shown", "companion_name", "special_tokens_file", "holds_cwd", "is_run_folder",
           "is_toktok_folder"]
