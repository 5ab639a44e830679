"""Where the kernels built ahead (:mod:`toktok.ahead`) are, whether they are built for this code
and machine, and their functions, for ``_kernels.Kernel``: asked and loaded without Numba.

A unit's module is ``folder()/UNIT-KEY.EXT`` (``UNIT``: a pattern's scanner, or ``main`` for every
other kernel ``kernels.json`` lists; ``KEY``: the kernels' sources, ``kernels.json``, NumPy, Numba,
Python and the CPU). It exports the unit's i-th listed signature as ``k{i}``; a call runs it only
when Numba would have typed the arguments exactly so (:func:`fits`).
Example: ``[fn for types, fn in exports("toktok.merge.loop._loop")]``.
"""
from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.util
import json
import os
import sys
from functools import cache
from pathlib import Path

LIST = Path(__file__).with_name("kernels.json")
#: The units besides the pattern scanners (each scanner is one of its own): a kernel's stage
#: package. One process builds one unit: building all of them at once held ~330 MB.
STAGES = ("count", "merge", "formats")
#: Where the pattern scanners are (one module each, its kernel named ``_scan_*``): a run builds its
#: own pattern's only.
_SCANNERS = "toktok.count.scan."
#: Where the scanner compiled from a regex is (unit ``rx``: built by the runs it counts for).
_COMPILED = "toktok.count.rx."
#: (the interpreter's own extension suffix, ``sysconfig``'s ``EXT_SUFFIX``: importing that module
#: and its build data costs ~5 ms of every run's start)
_SUFFIX = importlib.machinery.EXTENSION_SUFFIXES[0] if importlib.machinery.EXTENSION_SUFFIXES else ".so"


@cache
def listed() -> dict[str, list[str]]:
    """``{"toktok.count.sample._compact_ranges": ["(Array(uint8, 1, 'C', False, aligned=True), ...) -> int64"], ...}``:
    each kernel's signatures (Numba's spelling of the argument types, then the return type)."""
    return json.loads(LIST.read_text(encoding="utf-8"))


def unit_of(name: str) -> str:
    """``"toktok.count.scan.cl100k._scan_into"`` → ``"_scan_into"``; the kernels of the scanner
    compiled from a regex (``toktok.count.rx``) → ``"rx"``; any other kernel → its stage, e.g.
    ``unit_of("toktok.merge.loop._loop") == "merge"``."""
    kernel = name.rpartition(".")[2]
    if name.startswith(_SCANNERS) and kernel.startswith("_scan_"):
        return kernel
    return "rx" if name.startswith(_COMPILED) else name.split(".")[1]


def units(scanner: str | None) -> tuple[str, ...]:
    """The units a run of a pattern with compiled ``scanner`` (its unit: ``_scan_*``, ``rx``; None:
    counted through ``regex``) calls, e.g.
    ``units("_scan_into") == ("_scan_into", "count", "merge", "formats")``."""
    return STAGES if scanner is None else (scanner, *STAGES)


def _entries(unit: str) -> list[tuple[str, str]]:
    """``(kernel, signature)`` of ``unit`` in the list's order: the module exports the i-th as ``k{i}``."""
    return [(name, sig) for name, sigs in listed().items() if unit_of(name) == unit for sig in sigs]


# --- where the modules are, and whether they are built for this code and machine ---------------

def folder() -> Path:
    """Where the modules are built and loaded from: beside Numba's cache (``$NUMBA_CACHE_DIR/toktok``)
    when it is set, else toktok's own ``__pycache__`` where it may be written, else
    ``~/.cache/toktok``; the first of them this user may trust (:func:`untrusted`): a folder
    another user owns, or one others may write in, is passed over, since a module found there
    runs its code as this user (``NUMBA_CACHE_DIR``'s is dropped then, said once:
    :func:`trust_numba_cache`). When none may be trusted, the last: nothing is loaded from it
    (:func:`module`) nor built in it."""
    trust_numba_cache()
    chosen = _folders()
    for f in chosen:
        if untrusted(f) is None:
            return f
    return chosen[-1]


def trust_numba_cache(*, make: bool = False) -> None:
    """Drop ``NUMBA_CACHE_DIR`` from this process's environment (so from every process it starts:
    ``toktok.ahead``, the merge's warm-up) when a folder toktok would load code from under it may
    not be trusted (:func:`untrusted`): its ``toktok/`` (the built modules) or the folder where
    Numba keeps the cache of a toktok package's kernels (its index ``.nbi`` is a pickle, run as it
    is loaded). Numba then keeps its cache where it does without it (beside toktok's sources, else
    in this user's cache folder), and the modules are built in :func:`folder`'s next choice; said
    once. Called before Numba is imported (``_kernels.load``), which reads the variable then;
    ``make``: create the missing folders now, this user's alone, so that none is made by another
    user between this check and Numba's write."""
    d = os.environ.get("NUMBA_CACHE_DIR")
    if not d:
        return
    for f in [Path(d) / "toktok", *_numba_folders(Path(d))]:
        why = untrusted(f)
        if why is None and make:
            try:
                f.mkdir(mode=0o755, parents=True, exist_ok=True)
            except OSError:
                pass  # Numba says so (cannot write its cache): nothing is loaded from a folder not made
            why = untrusted(f)
        if why is not None:
            os.environ.pop("NUMBA_CACHE_DIR", None)
            numba_config = sys.modules.get("numba.core.config")
            if numba_config is not None:  # imported by the caller already: its setting, read at import
                numba_config.CACHE_DIR = ""
            say_once(f"not loading the kernels from {f} ({why}): another user could plant code there; "
                     "ignoring NUMBA_CACHE_DIR (point it at a folder only you may write in)")
            return


@cache
def _numba_folders(root: Path) -> list[Path]:
    """The folders under ``root`` (``NUMBA_CACHE_DIR``) where Numba keeps the cache of toktok's
    kernels: one per package folder (every one, so that a kernel added anywhere is covered), named
    as Numba names it (the folder's name and the SHA-1 of its absolute path)."""
    top = os.path.dirname(os.path.abspath(__file__))
    dirs = [d for d, _, files in os.walk(top) if "__init__.py" in files]
    return [root / f"{os.path.basename(p)}_{hashlib.sha1(p.encode()).hexdigest()}" for p in sorted(dirs)]


def _folders() -> list[Path]:
    out = []
    if os.environ.get("NUMBA_CACHE_DIR"):
        out.append(Path(os.environ["NUMBA_CACHE_DIR"]) / "toktok")
    own = Path(__file__).resolve().parent / "__pycache__"
    if os.access(own if own.is_dir() else own.parent, os.W_OK):
        out.append(own)
    out.append(Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "toktok")
    return out


def untrusted(p: Path) -> str | None:
    """Why a module (or the folder holding it) at ``p`` may not be loaded: owned by another user,
    or writable by its group or others (a folder not made yet: its nearest existing one may not
    be another user's to write in); None when it may. Example: ``untrusted(folder()) is None``."""
    try:
        st = os.lstat(p)
    except FileNotFoundError:
        parent = p.parent
        while parent != parent.parent and not os.path.lexists(parent):
            parent = parent.parent
        try:
            pst = os.stat(parent)
        except OSError:
            return None
        if pst.st_mode & 0o002 and not pst.st_mode & 0o1000:  # others may write there, and rename what we make
            return f"{parent} is writable by others"
        return None
    except OSError as e:
        return e.strerror or str(e)
    import stat

    if stat.S_ISLNK(st.st_mode):
        return "a symbolic link"
    if hasattr(os, "geteuid") and st.st_uid != os.geteuid():
        return f"owned by another user (uid {st.st_uid})"
    if st.st_mode & 0o022:
        return "writable by group or others"
    return None


_SAID: set[str] = set()


def _stderr(message: str) -> None:
    print(f"toktok: warning: {message}", file=sys.stderr, flush=True)


#: How :func:`say_once` says a line: ``toktok: warning: ...`` on stderr; ``--progress json`` makes
#: it a ``{"event": "warning", ...}`` line of its stream.
SAY = _stderr


def say_once(message: str) -> None:
    """``toktok: warning: MESSAGE`` (:data:`SAY`), once per process (the kernels are loaded from deep
    inside a run: this is the one line that says why they compile or run slower)."""
    if message not in _SAID:
        _SAID.add(message)
        SAY(message)


@cache
def _key() -> str:
    """What the modules are built from: the source of every module that defines kernels,
    ``kernels.json``, NumPy's, Numba's and Python's versions and the CPU (its model and flags)."""
    h = hashlib.sha256()
    root = Path(__file__).resolve().parent
    for p in sorted(root.rglob("*.py")):
        text = p.read_bytes()
        if p.name == "_kernels.py" or b"_kernels import" in text:
            h.update(p.relative_to(root).as_posix().encode() + b"\0" + text)
    h.update(LIST.read_bytes())
    import numpy

    h.update(f"{numpy.__version__} {_numba_version()} {sys.version} {sys.platform}".encode())
    h.update(_cpu())
    return h.hexdigest()[:16]


def _numba_version() -> str:
    """Numba's version file as it is installed (read, not imported: ``importlib.metadata`` takes
    ~25 ms to find it, and this is asked on every run)."""
    try:
        spec = importlib.util.find_spec("numba")
        return (Path(spec.origin).parent / "_version.py").read_text(encoding="utf-8")
    except (AttributeError, ImportError, OSError, TypeError):  # not installed as usual: still a key
        return "?"


def _cpu() -> bytes:
    """The CPU's model and flags (the modules are compiled for it)."""
    try:
        with open("/proc/cpuinfo", "rb") as f:
            lines = [ln for ln in f.read().split(b"\n\n", 1)[0].splitlines()
                     if ln.startswith((b"model name", b"flags", b"Features", b"CPU part"))]
        return b"\n".join(lines)
    except OSError:
        import platform

        return f"{platform.machine()} {platform.processor()}".encode()


def path(unit: str, where: Path | None = None) -> Path:
    """The file of ``unit``'s module for this code and machine (built or not), in :func:`folder`
    (``where``: that folder, found already)."""
    return (where or folder()) / f"{unit}-{_key()}{_SUFFIX}"


_MODULES: dict[str, object] = {}
#: Suffix of the seal written beside a module once it is whole: its size and SHA-256.
SEAL_SUFFIX = ".sealed"


def seal_of(module_path: Path) -> Path:
    """The seal beside a module: ``merge-KEY.cpython-311-x86_64-linux-gnu.so.sealed``."""
    return module_path.with_name(module_path.name + SEAL_SUFFIX)


def seal(module_path: Path) -> None:
    """Write ``module_path``'s seal (its size and SHA-256), last, once the module is whole: a module
    without one, or whose size differs from it, is never loaded (a build cut short, a copy cut
    short by a full disk: loading a truncated module dies by SIGBUS)."""
    import tempfile

    digest = _digest(module_path)
    fd, tmp = tempfile.mkstemp(dir=module_path.parent, prefix=".seal-")
    try:
        with os.fdopen(fd, "w") as f:
            json.dump({"size": module_path.stat().st_size, "sha256": digest}, f)
        os.chmod(tmp, 0o644)
        os.replace(tmp, seal_of(module_path))
    finally:
        if os.path.lexists(tmp):
            os.unlink(tmp)


def _digest(p: Path) -> str:
    h = hashlib.sha256()
    with open(p, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def _sealed(p: Path, full: bool) -> str | None:
    """Why the module at ``p`` may not be loaded (:func:`untrusted`, its seal missing, or its size
    (``full``: and checksum) not the sealed one); None when it may."""
    s = seal_of(p)
    why = untrusted(p.parent) or untrusted(p) or untrusted(s)
    if why is not None:
        return why
    try:
        want = json.loads(s.read_text(encoding="utf-8"))
        size = p.stat().st_size
        if size != want["size"]:
            return f"cut short: {size:,} of {want['size']:,} bytes"
        if full and _digest(p) != want["sha256"]:
            return "its checksum differs from when it was built"
    except (OSError, ValueError, TypeError, KeyError):
        return "no seal (a build that did not finish)"
    return None


def _discard(p: Path) -> None:
    """Remove a module that may not be loaded, and its seal, where this user may (the next run
    builds it again)."""
    for f in (p, seal_of(p)):
        try:
            if untrusted(p.parent) is None:
                f.unlink()
        except OSError:
            pass


def module(unit: str):
    """``unit``'s module, imported once per process; None when it is not built, may not be trusted
    (another user's, writable by others), is not whole (its seal: :func:`seal`), or will not load:
    then Numba runs the kernels, and a damaged module is removed for the next run to build again
    (said once)."""
    if unit not in _MODULES:
        p, m = path(unit), None
        if os.path.lexists(p):
            why = _sealed(p, full=True)
            if why is not None:
                say_once(f"not loading the built kernels {p} ({why}); the kernels run through Numba "
                         "(slower to start), and the next run builds them again")
                if untrusted(p) is None:
                    _discard(p)
            else:
                try:
                    spec = importlib.util.spec_from_file_location(_module_name(unit), p)
                    m = importlib.util.module_from_spec(spec)
                    spec.loader.exec_module(m)
                except (ImportError, OSError) as e:  # a broken file: Numba runs the kernels, the next build replaces it
                    say_once(f"cannot load the built kernels {p} ({type(e).__name__}); the kernels run "
                             "through Numba, and the next run builds them again")
                    _discard(p)
                    m = None
        _MODULES[unit] = m
    return _MODULES[unit]


def _module_name(unit: str) -> str:
    return "_toktok_kernels_" + unit.lstrip("_")


def built(names, *, or_cached: bool = False) -> bool:
    """Whether every kernel of ``names`` (``"toktok.merge.loop._loop"``, ...) is in a module built
    for this code and machine (without importing it); with ``or_cached``, or compiled into Numba's
    cache by a unit's process that could not build its module. Example: ``built(["toktok.merge.loop._loop"])``."""
    where, listing = folder(), listed()  # (found once: resolving it took ~0.4 ms a kernel)

    def done(unit: str) -> bool:
        p = path(unit, where)
        return (p.is_file() and _sealed(p, full=False) is None) or (or_cached and cached_marker(p))

    return all(name in listing and done(unit_of(name)) for name in names)


#: What a ``.numba`` marker holds once every signature of its unit compiled into Numba's cache
#: (written last: an empty marker is what a write cut short by a full disk leaves).
MARKER = b"compiled\n"


def cached_marker(module_path: Path) -> bool:
    """Whether the marker beside ``module_path`` says that its unit's process compiled the unit
    into Numba's cache (where no module could be built): whole, and this user's."""
    m = module_path.with_suffix(".numba")
    try:
        return untrusted(m) is None and m.read_bytes() == MARKER
    except OSError:
        return False


def exports(name: str) -> list[tuple[tuple, object]]:
    """``(argument types, function)`` of each listed signature of kernel ``name`` in its unit's
    module ([] when it is not built), for ``_kernels.Kernel`` (:func:`fits`)."""
    if name not in listed():
        return []
    unit = unit_of(name)
    m = module(unit)
    if m is None:
        return []
    found = [(_argument_types(sig), getattr(m, f"k{i}", None)) for i, (n, sig) in enumerate(_entries(unit)) if n == name]
    if any(fn is None or not callable(fn) for _, fn in found):  # not the module built for this list
        say_once(f"the built kernels {path(unit)} lack the functions toktok expects; the kernels run through "
                 "Numba, and the next run builds them again")
        _MODULES[unit] = None
        _discard(path(unit))
        return []
    return found


_DTYPES = ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float32", "float64")


def _argument_types(sig: str) -> tuple:
    """A listed signature's argument types, without Numba: an array as ``(dtype, ndim, layout,
    readonly)``, a scalar as the set of Python types Numba types so (int64: ``int`` and
    ``np.int64``; bool: ``bool`` and ``np.bool_``; any other: its NumPy scalar type)."""
    import numpy as np

    also = {"int64": int, "bool": bool}
    scalars = {t: frozenset({np.dtype(t).type, also.get(t, np.dtype(t).type)}) for t in _DTYPES}
    dtype_of = {v: np.dtype(k) for k, v in scalars.items()}

    def array(item, ndim, layout, readonly=False, aligned=True):
        return (dtype_of[item], ndim, layout, readonly)

    args = eval(sig.partition(" -> ")[0], {"__builtins__": {}}, {"Array": array, **scalars})  # noqa: S307 (our own list)
    return args if isinstance(args, tuple) else (args,)


def fits(types: tuple, args: tuple) -> bool:
    """Whether Numba would type ``args`` as ``types`` (:func:`exports`), so that the module's
    function runs what Numba would compile for them; a writable array also fits a read-only
    parameter (the function only reads it: Arrow's and NumPy's own buffers are writable,
    Polars' are not, and one listed version serves both), never the other way round.
    Example: ``fits(_argument_types("(int64,)"), (3,))``, not with ``(True,)``."""
    import numpy as np

    if len(args) != len(types):
        return False
    for t, a in zip(types, args):
        if type(t) is not tuple:  # a scalar: the Python types typed so
            if type(a) not in t:
                return False
            continue
        if type(a) is not np.ndarray:
            return False
        dtype, ndim, layout, readonly = t
        f = a.flags
        if a.dtype != dtype or a.ndim != ndim or (not readonly and not f.writeable) or not f.aligned or \
                (layout == "C" and not f.c_contiguous):
            return False
    return True
