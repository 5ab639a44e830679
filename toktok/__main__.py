"""The ``toktok`` command as a process (the console script, ``python -m toktok``): :func:`command`.

:func:`toktok.cli.main` runs the command; then the process ends at once: what Python's exit would
still do that matters is done first (the threads that are not daemons joined, the ``atexit``
functions run, stdout and stderr flushed), then ``os._exit`` with the command's exit code, without
the modules' and the libraries' teardown (DuckDB, Arrow, NumPy freeing what the process gives back
anyway: 0.05-0.1 s of a run). ``cli.main`` itself returns, for callers that go on after it.
Before anything imports NumPy, its BLAS is held to one thread (``OPENBLAS_NUM_THREADS=1``, unless
the environment sets it): toktok does no linear algebra, and OpenBLAS's idle threads spin on a
core after each call (a word-count table's one dot product: ~0.1 s of CPU beside the merge loop).
The CLI's modules are imported with the collector off, then kept out of every later collection
(``gc.freeze``), as the pipeline's are (:func:`toktok.cli._import_pipeline`).
Example: ``python -m toktok --help``.
"""
from __future__ import annotations

import atexit
import gc
import os
import sys
import threading


def command() -> None:  # pragma: no cover
    """Run the ``toktok`` command (:func:`toktok.cli.main`) and end the process with its exit code
    (see the module docstring). An error that is no ``SystemExit`` ends it as Python does."""
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # (before NumPy loads OpenBLAS: see above)
    enabled = gc.isenabled()
    gc.disable()  # (the CLI's modules live as long as the process: ~25 collections, 2-3 ms, spared)
    try:
        from .cli import main
    finally:
        gc.freeze()
        if enabled:
            gc.enable()

    try:
        main()
        code = 0
    except SystemExit as e:
        code = e.code
    shutdown = getattr(threading, "_shutdown", None)
    run_exit = getattr(atexit, "_run_exitfuncs", None)
    if shutdown is None or run_exit is None:  # (another Python: its own exit)
        sys.exit(code)
    if code is None:
        code = 0
    elif not isinstance(code, int):  # as Python's exit: the message on stderr, status 1
        print(code, file=sys.stderr)
        code = 1
    shutdown()  # the threads that are not daemons joined, as Python's exit joins them
    run_exit()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe: Python's exit says so with status 120
            code = code or 120
    os._exit(code)


if __name__ == "__main__":  # pragma: no cover
    command()
