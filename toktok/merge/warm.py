"""Compile the merge stage's kernels ahead, in a second process, on the first run after an install.

Numba compiles a kernel the first time it is called and keeps it in its cache for later runs;
on an empty cache that is ~25 s of one core, most of it for the merge loop. ``start`` runs
``python -m toktok.merge.warm`` beside the run: it compiles the loop (``_loop``, ``AHEAD``) for
the argument types a run gives it, into the cache, while the run counts and compiles the layout
(``_layout``) on the other core, then the loop's setup and the words' token counts
(``_setup``, ``_tokens_per_word``) and what the caller adds (a run: the export's kernels) as it
waits for the loop (``Compiler.wait``). The run then loads the loop from the cache. Results
never depend on it: if it fails, the run compiles the loop itself. (The loop leaves its rare
steps, rebuilding the pair table and making room in the pool, to its caller: a run compiles them
only if it needs them, and the loop compiles in ~6 s instead of ~10 s.)
Example: ``c = start(); ...; c.wait()``.
"""
from __future__ import annotations

import subprocess
from typing import Callable

import numpy as np

from ..ahead import compiler_process

#: The longest a run waits for the second process (it takes ~6 s on 2 cores); then it goes on
#: without it, compiling what the cache lacks itself.
WAIT_SECONDS = 300
#: The kernels the second process compiles (the run compiles the rest of ``signatures``).
AHEAD = ("_loop",)


class Compiler:
    """The process compiling the merge kernels (``start``); ``wait`` returns once it has exited."""

    def __init__(self, proc: subprocess.Popen | None, also: Callable[[], None] | None = None) -> None:
        self._proc, self._also = proc, also

    def wait(self) -> None:
        """Block until the kernels are in the cache (or the process failed: then the caller
        compiles them). While the process works, this one compiles the loop's setup and the
        words' token counts (``_setup``, ``_tokens_per_word``), then calls ``also`` (``start``)."""
        if self._proc is not None:
            if self._proc.poll() is None:
                compile_kernels([k for k in signatures() if k.py_func.__name__ not in AHEAD])
                if self._also is not None:
                    self._also()
            try:
                self._proc.wait(timeout=WAIT_SECONDS)
            except subprocess.TimeoutExpired:  # stuck: the run compiles what is missing itself
                self._proc.kill()
                self._proc.wait()
            self._proc = None

    def stop(self) -> None:
        """End the process now (the run failed); what it cached so far stays cached."""
        if self._proc is not None:
            self._proc.kill()
            self._proc.wait()
            self._proc = None


def start(also: Callable[[], None] | None = None) -> Compiler:
    """A process compiling the merge loop's kernels into Numba's cache (same interpreter,
    same environment, so the same cache folder); a no-op Compiler where it cannot start.
    ``also``: what else this process compiles while it waits for that one (``Compiler.wait``)."""
    try:
        proc = subprocess.Popen(**compiler_process("toktok.merge.warm"))
    except (OSError, ValueError):
        return Compiler(None)
    return Compiler(proc, also)


def signatures() -> dict:
    """The argument types a run gives the merge loop's kernels, by kernel: ``{_setup: (...), ...}``.
    The token tables, records and counters are typed from the arrays ``learn`` builds for them;
    the position array (uint32 rows of two, ``layout._TC``), its escapes and the loop's state
    (what ``_setup`` returns) are spelled out here (tests/test_cold_start.py holds them to a run's)."""
    from numba import typeof, types

    from ..vocab import Vocab
    from .layout import _tokens_per_word
    from .learn import _records, _work_arrays
    from .loop import _loop, _setup
    from .tokens import _token_arrays

    i64, i32 = types.int64, types.int32
    arr = lambda dtype, ndim=1: types.Array(dtype, ndim, "C")  # noqa: E731
    tdata, tstart, tlen = map(typeof, _token_arrays(Vocab.base(False), 1))
    rec = tuple(map(typeof, _records(1)))
    counters = typeof(np.zeros(16, np.int64))  # the loop's stats, and _setup's scalars (st)
    P, ek, ev = arr(types.uint32, 2), arr(i64), arr(i64)  # _layout's
    bkeys, bids, T, L, pool, H = arr(i64), arr(i32), arr(i64, 2), arr(i32, 2), arr(i32), arr(i64, 2)  # _setup's
    return {
        _setup: (P, ek, ev, i64, tdata, tstart, tlen, i64, i64, i64, i64, i64, types.boolean),
        _loop: (P, ek, ev, i64, tdata, tstart, tlen, bkeys, bids, T, L, pool, H, counters,
                typeof(np.zeros((8, 1), np.int64)), *map(typeof, _work_arrays()), i64, i64, *rec, counters),
        _tokens_per_word: (P, typeof(np.zeros(1, np.int64)), i64),
    }


def compile_kernels(kernels=None) -> None:
    """Compile the merge loop's ``kernels`` (default: all) for the argument types a run gives
    them (``signatures``): into Numba's cache, without running them (so without the layout,
    which the run compiles)."""
    for kernel, sig in signatures().items():
        if kernels is None or kernel in kernels:
            kernel.compile(sig)


if __name__ == "__main__":
    from .._kernels import end_with_parent

    end_with_parent()
    compile_kernels([k for k in signatures() if k.py_func.__name__ in AHEAD])
