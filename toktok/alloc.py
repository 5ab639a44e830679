"""Allocator tuning for a training run, undone after it.

A run frees large buffers all the time (Arrow batches, word tables): with the allocators' defaults
the process keeps that memory and its RSS grows past what it holds. For the length of a run,
Arrow's default pool is the system allocator (Arrow's own pools keep freed buffers) and glibc gives
freed heap tops back to the system at once (``M_TRIM_THRESHOLD`` 0); both are put back afterwards,
so that ``import toktok`` and a notebook around a run keep their settings.
``ARROW_DEFAULT_MEMORY_POOL`` is set during the run only (child processes started by it, such as a
private Ray cluster's workers, inherit it). What cannot be undone: glibc offers no way to read its
trim threshold, so it is put back to glibc's default (128 KiB), and setting it once stops glibc's
dynamic mmap threshold for the rest of the process. The run starts without the pages of LLVM's
code that loading Numba mapped (:func:`toktok._kernels.release_llvm_pages`).
That covers the buffers toktok asks pyarrow for; Arrow's C++ code (the Parquet reader's pages
and dictionaries) allocates from the pool chosen when pyarrow loads, mimalloc by default, which
keeps what was freed: 60-120 MB after counting 100 MB of Parquet, under the merge loop's peak. So
the ``toktok`` command, a process of its own, chooses the system allocator before pyarrow loads
(:func:`arrow_gives_back`); a notebook that wants the same peak sets
``ARROW_DEFAULT_MEMORY_POOL=system`` before it imports pyarrow.
Polars allocates through its own jemalloc, which by Polars' default gives freed pages back over
0.5-1.5 s: the count stage's temporaries then sit under the merge loop's peak (+15-70 MB on
100 MB of text). Its settings are read once, when Polars loads, and cannot be undone, so only
the ``toktok`` command, a process of its own, sets them (:func:`polars_gives_back`); a notebook
that wants the same peak sets ``_RJEM_MALLOC_CONF=dirty_decay_ms:0,muzzy_decay_ms:0`` before it
imports Polars.
Example: ``with lean(): train(...)``.
"""
from __future__ import annotations

import os
from contextlib import contextmanager
from functools import cache

#: glibc's mallopt parameter and its default value.
M_TRIM_THRESHOLD, DEFAULT_TRIM_THRESHOLD = -1, 128 * 1024
#: The environment variable Polars' jemalloc reads when it loads, and what the command sets:
#: freed pages go back to the system at once instead of over 0.5-1.5 s.
POLARS_MALLOC_CONF = ("_RJEM_MALLOC_CONF", "dirty_decay_ms:0,muzzy_decay_ms:0")
#: The environment variable Arrow's C++ code reads for its default pool, and what the command sets.
ARROW_POOL = ("ARROW_DEFAULT_MEMORY_POOL", "system")


def polars_gives_back() -> bool:
    """For a process toktok owns (the ``toktok`` command), before Polars loads: Polars' allocator
    returns freed pages at once. The settings go before any already in the variable, which Polars
    appends to its own defaults (a later one wins): what the user set stands. Does nothing where
    Polars is loaded already; returns whether it set them.
    Example: ``polars_gives_back(); import polars``."""
    import sys

    name, value = POLARS_MALLOC_CONF
    if "polars" in sys.modules:
        return False
    os.environ[name] = ",".join(v for v in (value, os.environ.get(name)) if v)
    return True


def arrow_gives_back() -> bool:
    """For a process toktok owns (the ``toktok`` command), before pyarrow loads: Arrow's C++ code
    allocates from the system allocator too (``ARROW_DEFAULT_MEMORY_POOL=system``), which gives
    freed memory back where mimalloc keeps it. Does nothing where pyarrow is loaded already or the
    variable is set (the user's choice stands); returns whether it set it. Child processes inherit
    it. Example: ``arrow_gives_back(); import pyarrow``."""
    import sys

    if "pyarrow" in sys.modules or os.environ.get(ARROW_POOL[0]):
        return False
    os.environ[ARROW_POOL[0]] = ARROW_POOL[1]
    return True


@cache
def glibc():
    """glibc's ``mallopt`` and ``malloc_trim``, or None where the C library is not glibc.
    Example: ``(lib := glibc()) is None or lib.malloc_trim(0) in (0, 1)``."""
    import ctypes

    try:
        lib = ctypes.CDLL("libc.so.6")
        lib.mallopt, lib.malloc_trim
    except (OSError, AttributeError):  # pragma: no cover - not glibc
        return None
    return lib


def _mallopt(param: int, value: int) -> bool:
    lib = glibc()
    return lib is not None and bool(lib.mallopt(param, value))


def give_back_heap() -> None:
    """glibc's free heap pages handed back to the system now (``malloc_trim``; the trim threshold
    returns only the heap's top): after a load that freed most of what it allocated, such as HF
    tokenizers parsing a tokenizer.json (131,072 tokens: +140 MB, 91 MB of it freed and kept;
    the trim takes ~9 ms). Nothing where the C library is not glibc.
    Example: ``tok = tokenizers.Tokenizer.from_file(path); give_back_heap()``."""
    lib = glibc()
    if lib is not None:
        lib.malloc_trim(0)


@contextmanager
def lean():
    """Inside the block: Arrow allocates from the system allocator and glibc trims freed heap
    tops at once; after it, the pool, the environment and the trim threshold are put back. On
    entry the pages of LLVM's code loaded so far go back to the kernel (nothing to put back)."""
    import pyarrow as pa

    from ._kernels import release_llvm_pages

    env = os.environ.get("ARROW_DEFAULT_MEMORY_POOL")
    pool = pa.default_memory_pool()
    system = pa.system_memory_pool()
    os.environ["ARROW_DEFAULT_MEMORY_POOL"] = "system"
    if pool.backend_name != system.backend_name:
        pa.set_memory_pool(system)
    trimmed = _mallopt(M_TRIM_THRESHOLD, 0)
    release_llvm_pages()  # see there: ~100 MB of RSS that the run never uses
    try:
        yield
    finally:
        if trimmed:
            _mallopt(M_TRIM_THRESHOLD, DEFAULT_TRIM_THRESHOLD)
        if pool.backend_name != system.backend_name:
            pa.set_memory_pool(pool)
        if env is None:
            os.environ.pop("ARROW_DEFAULT_MEMORY_POOL", None)
        else:
            os.environ["ARROW_DEFAULT_MEMORY_POOL"] = env


__all__ = ["arrow_gives_back", "give_back_heap", "glibc", "lean", "polars_gives_back", "ARROW_POOL",
           "POLARS_MALLOC_CONF"]
