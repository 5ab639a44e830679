"""The kernels a run calls from Python, compiled ahead into extension modules that later runs
import without Numba; built once, on the first run after an install, in second processes before
the run holds anything.

Numba compiles a kernel when it is first called and caches the machine code, but loading it
again costs every later run Numba's import, LLVM and the first call (~0.45 s and ~100 MB of the
README demo's run). So ``python -m toktok.ahead UNIT`` compiles the kernels ``kernels.json``
lists for a unit (each pattern's scanner is one, the scanner compiled from a regex one more, ``rx``;
so is each stage package: count, merge, formats),
for the argument and return types a run gives them, into an ordinary extension module
(``numba.pycc``, for this machine's CPU; a C compiler at build time), in ``prebuilt.folder``.
A kernel called with exactly a listed signature runs the module's function (``_kernels.Kernel``);
with other types, or where no module is built, it runs through Numba as before: the same
compiler from the same source, the same results (a test compares whole runs).

A module's file name holds a key of everything it is built from (the kernels' sources,
``kernels.json``, NumPy, Numba, Python and the CPU): after a change a run builds it again.
Where it cannot be built (no C compiler), the unit's process compiles its kernels into Numba's
cache instead. A run that finds its units missing builds them first (:func:`compile_first`, said
once), one process after the other, each of them finished before the run opens its run file:
under a memory budget that process is the only one working (~40 s on 2 cores in all).

``kernels.json`` is written by ``python tests/test_cold_start.py``, which trains on Parquet
(string and large_string), text and JSON lines with each named pattern under a budget and adds
every signature the kernels were called with from Python (a rare kernel's, once listed, stays); a
test there fails when a run calls a kernel with types the list lacks.
Example: ``if not cached(pattern): compile_first(pattern)``.
"""
from __future__ import annotations

import importlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

from .prebuilt import (MARKER, STAGES, _entries, _module_name, built, listed, path, seal, seal_of, unit_of,
                       units, untrusted)

#: The longest a unit's process may take (5-16 s on 2 cores); then the run goes on and Numba
#: compiles what it calls.
WAIT_SECONDS = 300
#: A module built for other code (or another install sharing the folder) is removed by a build
#: once it is this old.
_STALE_SECONDS = 86400


def _signatures(unit: str):
    """``(dispatcher, argument types, return type)`` of each of ``unit``'s listed signatures, in
    the list's order, as Numba's types (Numba is loaded for it). A signature Numba no longer
    reads (its types spelled otherwise now) gives None for both types."""
    from numba import types

    from . import _kernels

    _kernels.load()
    names = {n: getattr(types, n) for n in dir(types) if not n.startswith("_")}
    for name, sig in _entries(unit):
        mod, _, kernel = name.rpartition(".")
        dispatcher = getattr(importlib.import_module(mod), kernel)
        args, _, ret = sig.partition(" -> ")
        try:
            typed = tuple(eval(s, {"__builtins__": {}}, names) for s in (args, ret))  # noqa: S307 (our own list)
        except Exception:
            typed = (None, None)
        yield dispatcher, *typed


def build(unit: str) -> Path:
    """Compile ``unit``'s listed kernels into its module (``prebuilt.path``) in this process; returns
    the path. Needs Numba and a C compiler; raises where it cannot build (the file is written
    whole or not at all). Example: ``build("merge")``."""
    from numba.pycc import CC

    cc = CC(_module_name(unit))
    cc.target_cpu = "host"  # as Numba compiles for this machine
    nogil = set()
    signatures = list(_signatures(unit))
    for i, (dispatcher, args, ret) in enumerate(signatures):
        cc.export(f"k{i}", ret(*args))(dispatcher.py_func)  # (a type spelled otherwise: raises, not built)
        if dispatcher.targetoptions.get("nogil"):
            nogil.add(dispatcher.py_func)
    # reference counting off where every kernel of the unit is compiled without it, as Numba
    # compiles them (on, its atomic counts around each inlined helper slowed the compiled
    # patterns' machine down 15x)
    cc.use_nrt = any(d.targetoptions.get("_nrt", True) for d, _, _ in signatures)
    target = path(unit)
    target.parent.mkdir(mode=0o755, parents=True, exist_ok=True)  # (only this user may write in it)
    why = untrusted(target.parent)
    if why is not None:  # another user's folder, or one others write in: nothing built there
        raise PermissionError(f"{target.parent}: {why}")
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=".build-") as tmp:
        cc.output_dir, cc.output_file = tmp, target.name
        with _releasing_the_gil(nogil), _without_numbas_cache():
            cc.compile()
        os.chmod(Path(tmp) / target.name, 0o755)  # whatever the umask: a module others may write is not loaded
        os.replace(Path(tmp) / target.name, target)
    seal(target)  # last: a module without its seal is never loaded
    _tidy(target)
    return target


def _tidy(target: Path) -> None:
    """Once ``target`` is built, remove beside it what is a day old: its unit's modules built for
    other code (another install sharing the folder keeps its own meanwhile) and the empty
    ``.build-*`` folders of builds that were killed."""
    unit = target.name.partition("-")[0]
    old = time.time() - _STALE_SECONDS
    for p in [*target.parent.glob(f"{unit}-*"), *target.parent.glob(".build-*")]:
        try:
            if p not in (target, seal_of(target)) and p.stat().st_mtime < old:
                shutil.rmtree(p) if p.is_dir() else p.unlink()
        except OSError:  # gone meanwhile, or another build's: not ours to insist on
            pass


@contextmanager
def _without_numbas_cache():
    """The helpers a unit's kernels call compile afresh, neither loaded from Numba's cache nor
    saved to it: an index entry typed with another process's dispatcher (the scanners pass their
    piece rule to ``_scan_loop`` as an argument) cannot be written back once read, and failed
    the build of a second pattern's scanner."""
    from numba.core.caching import NullCache
    from numba.core.dispatcher import Dispatcher

    found = [v for name, m in list(sys.modules.items()) if name.startswith("toktok") and m is not None
             for v in vars(m).values() if isinstance(v, Dispatcher)]
    saved = [(d, d._cache) for d in found]
    for d in found:
        d._cache = NullCache()
    try:
        yield
    finally:
        for d, c in saved:
            d._cache = c


@contextmanager
def _releasing_the_gil(functions: set):
    """``numba.pycc`` compiles every export holding the GIL; a kernel decorated ``nogil=True``
    (the scanners, counted by several threads at once) releases it, as Numba's own does."""
    from numba.pycc import compiler

    original = getattr(compiler, "compile_extra", None)
    if original is None:  # pragma: no cover - another Numba: built holding the GIL
        yield
        return

    def compile_extra(typingctx, targetctx, func, args, return_type, flags, locals, **kwargs):
        flags.release_gil = func in functions
        return original(typingctx, targetctx, func, args, return_type, flags, locals, **kwargs)

    compiler.compile_extra = compile_extra
    try:
        yield
    finally:
        compiler.compile_extra = original


def compile_unit(unit: str) -> int:
    """Where a module cannot be built: compile ``unit``'s listed kernels into Numba's cache in
    this process; returns how many signatures. A signature Numba no longer reads is skipped."""
    n = 0
    for dispatcher, args, _ in _signatures(unit):
        try:
            dispatcher.compile(args)
        except Exception:  # a type Numba spells otherwise now: compiled by the run
            continue
        n += 1
    return n


def cached(pattern) -> bool:
    """Whether the units a run of ``pattern`` calls are built (or, where they could not be, in
    Numba's cache): False on the first run after an install, and after their code changes; asked
    without importing Numba. Example: ``if not cached(pattern): compile_first(pattern)``."""
    from .count.scan import scanner_name

    return built([n for n in listed() if unit_of(n) in units(scanner_name(pattern))], or_cached=True)


def compile_first(pattern) -> None:
    """Build the units a run of ``pattern`` calls (``prebuilt.units``) in second processes, one after
    the other, and wait for them (the first run after an install: ``merge.warm_up``)."""
    from ._kernels import release_llvm_pages
    from .count.scan import scanner_name

    release_llvm_pages()  # mapped by the check that the cache lacks them: not needed until the run loads them
    if not sys.executable:  # an embedded interpreter: Numba compiles what the run calls
        return
    for unit in units(scanner_name(pattern)):
        try:
            subprocess.run(**compiler_process("toktok.ahead", unit), timeout=WAIT_SECONDS, check=False)
        except (OSError, subprocess.SubprocessError):  # Numba compiles what the run calls
            pass


def compiler_process(module: str, *args: str) -> dict:
    """``subprocess.run`` or ``Popen`` keywords for a process compiling kernels for this run,
    ``python -m module args`` without a terminal (it ends with the run: ``_kernels.end_with_parent``).
    It starts in the folder above the running toktok: ``-m`` looks in the folder it starts in
    first, and a ``toktok/`` folder where the user stands must not stand in for this one.
    Example: ``subprocess.Popen(**compiler_process("toktok.ahead", "merge"))``."""
    return dict(args=[sys.executable, "-m", module, *args], cwd=Path(__file__).resolve().parent.parent,
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def main(argv: list[str]) -> None:
    """``python -m toktok.ahead UNIT...`` (``all``: every unit): build each unit's module not
    built yet, or where that fails, compile its kernels into Numba's cache."""
    every = sorted({unit_of(n) for n in listed()}, key=lambda u: u in STAGES)
    for unit in every if argv == ["all"] else argv:
        if built([n for n, _ in _entries(unit)]):
            continue
        try:
            build(unit)
        except Exception:  # no C compiler, numba.pycc gone, a full disk: Numba's cache, as a run would fill it
            compile_unit(unit)
            from . import _kernels

            if _kernels.cache_failed:
                continue  # not cached (a full disk): no marker, the next run tries again
            try:
                path(unit).parent.mkdir(mode=0o755, parents=True, exist_ok=True)
                if untrusted(path(unit).parent) is None:
                    _write_marker(path(unit).with_suffix(".numba"))  # (cached: not built again on each run)
            except OSError:  # a full disk: no marker, the next run tries again
                pass


def _write_marker(p: Path) -> None:
    """The marker that a unit is in Numba's cache (``prebuilt.MARKER``), written whole or not at all."""
    fd, tmp = tempfile.mkstemp(dir=p.parent, prefix=".marker-")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(MARKER)
        os.chmod(tmp, 0o644)
        os.replace(tmp, p)
    finally:
        if os.path.lexists(tmp):
            os.unlink(tmp)


if __name__ == "__main__":
    from ._kernels import end_with_parent

    end_with_parent()
    main(sys.argv[1:])
