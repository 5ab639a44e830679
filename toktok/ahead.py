"""The kernels a run compiles, listed ahead: compiled in second processes, one group after the
other, before a first run under a memory budget holds anything.

On the first run after an install Numba compiles each kernel the first time it is called, and the
process keeps what compiling took: LLVM's modules and Numba's typing, ~100 MiB more at the end of
a run than a run that loaded the kernels from the cache (539 against 451 MiB under
``--budget 512MB``). A budget's plan counts one process, so a budgeted first run has its kernels
compiled by :func:`compile_first` before it opens its run file: ``python -m toktok.ahead GROUP``
compiles the kernels ``kernels.json`` lists for the group (the count stage's, then the rest), for
the argument types a run gives them, into Numba's cache; the run then loads them, as a later run
does. The processes never overlap each other, and each holds what it compiles (277 and 239 MiB)
beside a run that holds its libraries (~175 MiB). Results never depend on it: a kernel the list
lacks, or a process that failed, is compiled by the run as before.

``kernels.json`` is written by ``python tests/test_cold_start.py``, which trains on Parquet (string
and large_string), text and JSON lines with each named pattern under a budget and adds every
signature the kernels were called with from Python (a rare kernel's, once listed, stays); a test
there fails when a run calls a kernel with types the list lacks. A run compiles its own
pattern's scanner only.
Example: ``if not cached(pattern): compile_first(pattern)``.
"""
from __future__ import annotations

import importlib
import json
import subprocess
import sys
from functools import cache
from pathlib import Path

#: The groups, compiled in this order, one process each: a kernel's group is its module's stage.
GROUPS = ("count", "rest")
#: The longest a group may take (~15 s on 2 cores); then the run goes on and compiles what is missing.
WAIT_SECONDS = 300
LIST = Path(__file__).with_name("kernels.json")
#: Where the pattern scanners' names start: a run compiles its own pattern's only.
_SCANNERS = "toktok.count.pretokenize._scan_"


@cache
def listed() -> dict[str, list[str]]:
    """``{"toktok.count.sample._pieces": ["(Array(int64, 1, 'C', False, aligned=True), ...)"], ...}``:
    the signatures each kernel is compiled for ahead (Numba's spelling of the argument types)."""
    return json.loads(LIST.read_text(encoding="utf-8"))


def _group_of(name: str) -> str:
    """``"toktok.count.sample._pieces"`` → ``"count"``; any other stage's kernel → ``"rest"``."""
    return "count" if name.startswith("toktok.count.") else "rest"


def compile_group(group: str, scanner: str | None = None) -> int:
    """Compile the listed kernels of ``group`` in this process (``python -m toktok.ahead GROUP
    [SCANNER]``), of the pattern scanners only ``scanner`` (``_scan_into``: cl100k's; "-": none;
    None: all); returns how many signatures. A signature Numba no longer reads is skipped: the
    run compiles what it needs itself."""
    from numba import types

    from . import _kernels

    _kernels.load()
    names = {n: getattr(types, n) for n in dir(types) if not n.startswith("_")}
    n = 0
    for name, sigs in listed().items():
        if _group_of(name) != group or (scanner is not None and name.startswith(_SCANNERS)
                                        and name.rpartition(".")[2] != scanner):
            continue
        module, _, kernel = name.rpartition(".")
        dispatcher = getattr(importlib.import_module(module), kernel)
        for sig in sigs:
            try:
                dispatcher.compile(eval(sig, {"__builtins__": {}}, names))  # noqa: S307 (our own list)
            except Exception:  # a type Numba spells otherwise now: compiled by the run
                continue
            n += 1
    return n


def cached(pattern) -> bool:
    """Whether Numba's cache holds what a run of ``pattern`` compiles first, its scanner and the
    merge loop (False on the first run after an install, and after their files change: a helper's
    own entry, which loading its callers never rewrites, would say so forever).
    Example: ``if not cached(pattern): compile_first(pattern)``."""
    from ._kernels import compiled
    from .count import pretokenize
    from .merge.loop import _loop

    name = pretokenize.scanner_name(pattern)
    return compiled((_loop,) if name is None else (getattr(pretokenize, name), _loop))


def compile_first(pattern) -> None:
    """Compile every listed kernel a run of ``pattern`` calls into Numba's cache in second
    processes, one group at a time, and wait for them (the first run after an install, under a
    budget: ``merge.warm_up``)."""
    from ._kernels import release_llvm_pages
    from .count.pretokenize import scanner_name

    release_llvm_pages()  # mapped by the check that the cache lacks them: not needed until the run loads them
    if not sys.executable:  # an embedded interpreter: the run compiles them itself
        return
    for group in GROUPS:
        try:
            subprocess.run(**compiler_process("toktok.ahead", group, scanner_name(pattern) or "-"),
                           timeout=WAIT_SECONDS, check=False)
        except (OSError, subprocess.SubprocessError):  # the run compiles what the cache lacks itself
            pass


def compiler_process(module: str, *args: str) -> dict:
    """``subprocess.run`` or ``Popen`` keywords for a process compiling kernels for this run,
    ``python -m module args`` without a terminal (it ends with the run: ``_kernels.end_with_parent``).
    It starts in the folder above the running toktok: ``-m`` looks in the folder it starts in
    first, and a ``toktok/`` folder where the user stands must not stand in for this one.
    Example: ``subprocess.Popen(**compiler_process("toktok.merge.warm"))``."""
    return dict(args=[sys.executable, "-m", module, *args], cwd=Path(__file__).resolve().parent.parent,
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


if __name__ == "__main__":
    from ._kernels import end_with_parent

    end_with_parent()
    compile_group(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else None)
