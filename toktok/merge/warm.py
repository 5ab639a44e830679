"""Compile the merge stage's kernels ahead, in a second process, on the first run after an install.

Numba compiles a kernel the first time it is called and keeps it in its cache for later runs;
on an empty cache that is ~25 s of one core, most of it for the merge loop. ``start`` runs
``python -m toktok.merge.warm`` beside the run: it calls the loop's kernels (``_setup``,
``_loop``, ``_tokens_per_word``) on a few words typed as a run types them, so that they land in
the cache while the run compiles and runs its counting kernels, the segmentation and the layout
(``_segment``, ``_layout``) on the other core; about half of the compiling each. The run waits for it
(``Compiler.wait``) before its merge loop and then loads those kernels from the cache. Results
never depend on it: if it fails, the run compiles them itself.
Example: ``c = start(); ...; c.wait()``.
"""
from __future__ import annotations

import subprocess
import sys

import numpy as np


class Compiler:
    """The process compiling the merge kernels (``start``); ``wait`` returns once it has exited."""

    def __init__(self, proc: subprocess.Popen | None) -> None:
        self._proc = proc

    def wait(self) -> None:
        """Block until the kernels are in the cache (or the process failed: then the caller
        compiles them). While the process works, this one compiles the export's kernel
        (``_splits``, through ``token_splits``: its argument types do not depend on the tokens)."""
        if self._proc is not None:
            if self._proc.poll() is None:
                from .segment import token_splits

                token_splits([b"a", b"b", b"ab"], (), 64)
            self._proc.wait()
            self._proc = None

    def stop(self) -> None:
        """End the process now (the run failed); what it cached so far stays cached."""
        if self._proc is not None:
            self._proc.kill()
            self._proc.wait()
            self._proc = None


def start() -> Compiler:
    """A process compiling the merge loop's kernels into Numba's cache (same interpreter,
    same environment, so the same cache folder); a no-op Compiler where it cannot start."""
    try:
        proc = subprocess.Popen([sys.executable, "-m", "toktok.merge.warm"], stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    except OSError:
        return Compiler(None)
    return Compiler(proc)


def compile_kernels() -> None:
    """Call the merge loop's kernels once, on a few words under the 256 byte tokens (so that the
    segmentation, which the run compiles meanwhile, is not needed), with the argument types a
    run gives them: words as Arrow binary, counts a read-only int64 view."""
    import pyarrow as pa

    from ..vocab import Vocab
    from .learn import learn_merges

    words = pa.array([b"the", b" them", b" then", b"aaaa", b" there"], pa.large_binary())
    counts = np.array([5, 3, 2, 1, 1], np.int64)
    counts.setflags(write=False)  # a run's counts are a read-only view of its word table
    learn_merges(words, counts, Vocab.base(False), 4)

if __name__ == "__main__":
    compile_kernels()
