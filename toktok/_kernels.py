"""Compiled primitives shared by the counting and merge stages: hashing, growable arrays, a
prefetch hint, and LLVM's code pages handed back to the kernel; and the lazy ``njit`` and
``intrinsic`` every kernel module decorates with, so that a run that calls no kernel never
imports Numba (~0.25 s and ~65 MB of a small run)."""
from __future__ import annotations

import sys
import threading

import numpy as np

from . import prebuilt

_EMPTY = -1


class Kernel:
    """A function for Numba, handed to it on first use: calling a kernel or reading any attribute
    of its dispatcher (``.signatures``, ``.py_func``, ``._cache``) imports Numba and builds every
    kernel defined so far (:func:`load`). Example: ``_grow(np.zeros(1), 4).shape == (4,)``."""

    __slots__ = ("py_func", "_make", "real", "_ahead")

    def __init__(self, py_func, make):
        self.py_func = py_func
        self._make = make
        self.real = None
        self._ahead = None

    def __call__(self, *args, **kwargs):
        if self.real is None and not kwargs:  # compiled ahead for exactly these types: no Numba
            if self._ahead is None:
                self._ahead = prebuilt.exports(_name(self))
            for types, fn in self._ahead:
                if prebuilt.fits(types, args):
                    return fn(*args)
        return (self.real or load(self)).__call__(*args, **kwargs)

    def __getattr__(self, name):
        return getattr(self.real or load(self), name)

    def __repr__(self) -> str:
        return f"<kernel {self.py_func.__module__}.{self.py_func.__qualname__}>"


def _name(kernel) -> str:
    """``"toktok.merge.loop._loop"``: a kernel's (or its dispatcher's) name in ``kernels.json``."""
    return f"{kernel.py_func.__module__}.{kernel.py_func.__name__}"


_PENDING: list[Kernel] = []
_LOCK = threading.Lock()
_loaded = False


def load(kernel: Kernel | None = None):
    """Import Numba and build every pending kernel, in the order they were defined; each toktok
    module's global that held a ``Kernel`` then holds its dispatcher, so compiled code that names
    another kernel finds a dispatcher (Numba reads a kernel's globals when it types it). Returns
    ``kernel``'s dispatcher. Idempotent and thread-safe."""
    global _loaded
    with _LOCK:
        if _PENDING:
            prebuilt.trust_numba_cache(make=True)  # before Numba reads NUMBA_CACHE_DIR
            import numba  # noqa: F401  (the first kernel used in this process)

            for k in _PENDING:
                k.real = k._make(k.py_func)
            for mod in [m for name, m in list(sys.modules.items()) if name.startswith("toktok") and m]:
                for name, value in list(vars(mod).items()):
                    if isinstance(value, Kernel) and value.real is not None:
                        setattr(mod, name, value.real)
            _PENDING.clear()
        _loaded = True
    return kernel.real if kernel is not None else None


def _load_without_refresh(dispatcher):
    """``dispatcher`` (one of toktok's kernels) loading from Numba's cache without Numba's
    refresh of its whole target context, which imports and installs every lowering and typing
    registry (~0.17 s of each process that loads a kernel): loading machine code needs only
    Numba's runtime (NRT), and compiling refreshes the context itself (``CompilerBase``). Other
    code's Numba functions load as Numba loads them; so do these where its internals moved."""
    cache = getattr(dispatcher, "_cache", None)
    if not all(hasattr(cache, a) for a in ("load_overload", "_load_overload", "_guard_against_spurious_io_errors",
                                           "save_overload")):
        return dispatcher  # pragma: no cover - another Numba
    from numba.core.runtime import rtsys

    def load_overload(sig, target_context):
        rtsys.initialize(target_context)
        try:
            with cache._guard_against_spurious_io_errors():
                return cache._load_overload(sig, target_context)
        except Exception as e:  # noqa: BLE001 - a cache file cut short (a full disk): compiled again
            _cache_trouble("cannot read", e)
            return None

    save = cache.save_overload

    def save_overload(sig, data):
        try:
            save(sig, data)
        except OSError as e:  # a full disk, a read-only cache: the run goes on, the next one compiles again
            _cache_trouble("cannot write", e)

    cache.load_overload, cache.save_overload = load_overload, save_overload
    return dispatcher


#: Whether Numba's cache failed to save a kernel in this process (``toktok.ahead`` then writes no marker).
cache_failed = False


def _cache_trouble(what: str, e: BaseException) -> None:
    """Numba's cache failing to load or save a kernel is said once, never the run's end."""
    global cache_failed
    cache_failed = cache_failed or what == "cannot write"
    prebuilt.say_once(f"{what} Numba's cache of the kernels ({getattr(e, 'strerror', None) or type(e).__name__}); "
                      "they are compiled in this run and not kept (free space in NUMBA_CACHE_DIR or "
                      "beside toktok to keep them)")


def _lazy(make):
    """A decorator that defers ``make(py_func)`` (Numba's own decorator) to :func:`load`."""
    def decorate(fn):
        if _loaded:
            return make(fn)
        k = Kernel(fn, make)
        with _LOCK:
            if _loaded:  # loaded meanwhile
                return make(fn)
            _PENDING.append(k)
        return k
    return decorate


def njit(**options):
    """Numba's ``njit(**options)``, applied when the first kernel is used (see :class:`Kernel`).
    Example: ``@njit(cache=True)``."""
    def make(fn):
        import numba

        return _load_without_refresh(numba.njit(**options)(fn))
    return _lazy(make)


def intrinsic(fn):
    """Numba's ``numba.extending.intrinsic``, applied when the first kernel is used."""
    def make(f):
        from numba.extending import intrinsic as numba_intrinsic

        return numba_intrinsic(f)
    return _lazy(make)(fn)


def loaded() -> bool:
    """Whether this process has imported Numba for its kernels, e.g. ``assert not loaded()``."""
    return _loaded



# How the kernels are compiled (the first run after an install compiles them; later runs load
# them from Numba's cache). A helper that only compiled code calls needs no CPython or C
# wrapper (their code is a fifth of a helper's compile time), and a kernel Python calls needs no C
# wrapper (``no_cfunc_wrapper=True``: nothing takes its address). A small helper on a hot path is
# inlined by LLVM (``forceinline``), not by Numba (``inline="always"``, which copies the helper's
# IR into every call site and retypes it: 12 of the scanner's 13 s of compiling; the machine
# code is the same). Integers passed to a compiled helper are typed (``np.int64(0)``, not ``0``):
# Numba compiles a helper once more for each literal it is first typed with (``Literal[int](0)``).
#: Decorator of a helper inlined into the compiled code that calls it.
inlined = njit(cache=True, forceinline=True, no_cpython_wrapper=True, no_cfunc_wrapper=True)
#: Decorator of a kernel that only compiled code calls.
internal = njit(cache=True, no_cpython_wrapper=True, no_cfunc_wrapper=True)


@inlined
def _mix(key):
    x = np.uint64(key)
    x ^= x >> np.uint64(33)
    x *= np.uint64(0xFF51AFD7ED558CCD)
    x ^= x >> np.uint64(33)
    x *= np.uint64(0xC4CEB9FE1A85EC53)
    x ^= x >> np.uint64(33)
    return x


@internal
def _hash_range(data, s, n):
    """FNV-1a of data[s:s+n]; equals ``_bytes_hash`` of two tokens whose bytes concatenate to it."""
    h = np.uint64(0xCBF29CE484222325)
    for i in range(n):
        h ^= np.uint64(data[s + i])
        h *= np.uint64(0x100000001B3)
    return np.int64(h >> np.uint64(1))


@internal
def _grow(arr, need):
    if need <= arr.shape[0]:
        return arr
    cap = arr.shape[0] * 2
    while cap < need:
        cap *= 2
    out = _empty_array(cap, arr.dtype)
    for i in range(arr.shape[0]):  # a loop compiles much faster than a slice assignment
        out[i] = arr[i]
    return out


def _prefetch_name() -> str:
    """The intrinsic's name mangles the pointer type: opaque pointers since LLVM 17 (llvmlite 0.45)."""
    from llvmlite.binding import llvm_version_info

    return "llvm.prefetch.p0" if llvm_version_info >= (17,) else "llvm.prefetch.p0i8"


@intrinsic
def _prefetch(typingctx, arr, i):
    """Hint the CPU to load the cache line of ``arr[i]`` (first element of row ``i`` for a 2-D
    array); no effect on results. For loops whose next addresses are known ahead."""
    from llvmlite import ir
    from numba.core import cgutils, types

    if not isinstance(arr, types.Array) or not isinstance(i, types.Integer):
        return None

    def codegen(context, builder, signature, args):
        aryty = signature.args[0]
        ary = context.make_array(aryty)(context, builder, args[0])
        i0 = context.cast(builder, args[1], signature.args[1], types.intp)
        idx = [i0] + [ir.Constant(i0.type, 0)] * (aryty.ndim - 1)
        ptr = cgutils.get_item_pointer(context, builder, aryty, ary, idx, wraparound=False)
        i8p = builder.bitcast(ptr, ir.IntType(8).as_pointer())
        i32 = ir.IntType(32)
        fnty = ir.FunctionType(ir.VoidType(), [i8p.type, i32, i32, i32])
        fn = cgutils.get_or_insert_function(builder.module, fnty, _prefetch_name())
        builder.call(fn, [i8p, ir.Constant(i32, 0), ir.Constant(i32, 3), ir.Constant(i32, 1)])
        return context.get_dummy_value()

    return types.void(arr, i), codegen


@intrinsic
def _atomic_get(typingctx, arr, i):
    """``arr[i]`` of a C-contiguous int64 array, read with acquire ordering: what another thread wrote
    before it stored that element with ``_atomic_set`` is visible after it (and the read is never
    hoisted out of a loop that waits for it)."""
    from numba.core import cgutils, types

    if not isinstance(arr, types.Array) or arr.dtype != types.int64 or not isinstance(i, types.Integer):
        return None

    def codegen(context, builder, signature, args):
        ary = context.make_array(signature.args[0])(context, builder, args[0])
        i0 = context.cast(builder, args[1], signature.args[1], types.intp)
        ptr = cgutils.get_item_pointer(context, builder, signature.args[0], ary, [i0], wraparound=False)
        return builder.load_atomic(ptr, "acquire", 8)

    return types.int64(arr, i), codegen


@intrinsic
def _atomic_set(typingctx, arr, i, v):
    """``arr[i] = v`` (C-contiguous int64 array) with release ordering: see ``_atomic_get``."""
    from numba.core import cgutils, types

    if not isinstance(arr, types.Array) or arr.dtype != types.int64 or not isinstance(i, types.Integer):
        return None
    if not isinstance(v, types.Integer):
        return None

    def codegen(context, builder, signature, args):
        ary = context.make_array(signature.args[0])(context, builder, args[0])
        i0 = context.cast(builder, args[1], signature.args[1], types.intp)
        ptr = cgutils.get_item_pointer(context, builder, signature.args[0], ary, [i0], wraparound=False)
        builder.store_atomic(context.cast(builder, args[2], signature.args[2], types.int64), ptr, "release", 8)
        return context.get_dummy_value()

    return types.void(arr, i, v), codegen


@intrinsic
def _atomic_swap(typingctx, arr, i, old, new):
    """Set ``arr[i]`` (C-contiguous int64 array) to ``new`` if it is ``old``, atomically (acquire and
    release ordering); returns whether it did. Of two threads that try it, one does."""
    from numba.core import cgutils, types

    if not isinstance(arr, types.Array) or arr.dtype != types.int64 or not isinstance(i, types.Integer):
        return None
    if not isinstance(old, types.Integer) or not isinstance(new, types.Integer):
        return None

    def codegen(context, builder, signature, args):
        ary = context.make_array(signature.args[0])(context, builder, args[0])
        i0 = context.cast(builder, args[1], signature.args[1], types.intp)
        ptr = cgutils.get_item_pointer(context, builder, signature.args[0], ary, [i0], wraparound=False)
        o = context.cast(builder, args[2], signature.args[2], types.int64)
        n = context.cast(builder, args[3], signature.args[3], types.int64)
        pair = builder.cmpxchg(ptr, o, n, "acq_rel", "acquire")
        return builder.extract_value(pair, 1)

    return types.boolean(arr, i, old, new), codegen


@intrinsic
def _futex(typingctx, arr, i, op, val, ts, nr):
    """Linux's ``futex(&arr[i], op, val, ts)`` (system call number ``nr``, which depends on the machine)
    on the low 32 bits of ``arr[i]`` (C-contiguous int64, little-endian): with ``op`` FUTEX_WAIT_PRIVATE
    (128) the thread sleeps while the value is ``val``, at most the time in ``ts`` (int64 array:
    seconds, nanoseconds); with FUTEX_WAKE_PRIVATE (129) it wakes up to ``val`` threads sleeping so.
    Returns the call's result (an error is a negative number: nothing else happens)."""
    from llvmlite import ir
    from numba.core import cgutils, types

    if not isinstance(arr, types.Array) or arr.dtype != types.int64 or not isinstance(ts, types.Array):
        return None
    if not all(isinstance(x, types.Integer) for x in (i, op, val, nr)):
        return None

    def codegen(context, builder, signature, args):
        i64, i32, i8p = ir.IntType(64), ir.IntType(32), ir.IntType(8).as_pointer()
        ary = context.make_array(signature.args[0])(context, builder, args[0])
        i0 = context.cast(builder, args[1], signature.args[1], types.intp)
        ptr = cgutils.get_item_pointer(context, builder, signature.args[0], ary, [i0], wraparound=False)
        tsa = context.make_array(signature.args[4])(context, builder, args[4])
        fnty = ir.FunctionType(i64, [i64], var_arg=True)
        fn = cgutils.get_or_insert_function(builder.module, fnty, "syscall")
        return builder.call(fn, [context.cast(builder, args[5], signature.args[5], types.int64),
                                 builder.bitcast(ptr, i8p),
                                 builder.trunc(context.cast(builder, args[2], signature.args[2], types.int64), i32),
                                 builder.trunc(context.cast(builder, args[3], signature.args[3], types.int64), i32),
                                 builder.bitcast(tsa.data, i8p)])

    return types.int64(arr, i, op, val, ts, nr), codegen


@intrinsic
def _address(typingctx, arr):
    """The address of ``arr``'s first element, as an int64, for ``_peek``. A compiled helper
    that takes arrays costs atomic reference-count updates per call, forceinlined or not; one
    that takes addresses costs none (the caller keeps its arrays alive)."""
    from llvmlite import ir
    from numba.core import types

    if not isinstance(arr, types.Array):
        return None

    def codegen(context, builder, signature, args):
        ary = context.make_array(signature.args[0])(context, builder, args[0])
        return builder.ptrtoint(ary.data, ir.IntType(64))

    return types.int64(arr), codegen


@intrinsic
def _alive(typingctx, *arrays):
    """Nothing, in compiled code: a use of ``arrays`` at the end of a kernel that takes them, so
    that Numba drops its references to them there, together, and not each after its last use:
    references taken on entry and dropped together in the block that returns are pruned (no
    atomic count updates per call), if the kernel calls no other that is not inlined."""
    from numba.core import types

    def codegen(context, builder, signature, args):
        return context.get_dummy_value()

    return types.void(types.StarArgTuple.from_types(arrays)), codegen


@intrinsic
def _peek(typingctx, addr, i, dtype):
    """Element ``i`` of a C-contiguous array of ``dtype`` at ``addr`` (``_address``); no bounds
    check. Example (compiled): ``_peek(_address(a), np.int64(2), np.uint8) == a[2]``."""
    from numba.core import types

    if not isinstance(addr, types.Integer) or not isinstance(i, types.Integer):
        return None
    if not isinstance(dtype, types.NumberClass):
        return None
    item = dtype.instance_type

    def codegen(context, builder, signature, args):
        ll = context.get_data_type(item)
        ptr = builder.inttoptr(args[0], ll.as_pointer())
        i0 = context.cast(builder, args[1], signature.args[1], types.int64)
        return builder.load(builder.gep(ptr, [i0]))

    return item(addr, i, dtype), codegen


@intrinsic
def _poke(typingctx, addr, i, value, dtype):
    """Set element ``i`` of a C-contiguous array of ``dtype`` at ``addr`` (``_address``) to
    ``value``, as ``_peek`` reads it; no bounds check."""
    from numba.core import types

    if not isinstance(addr, types.Integer) or not isinstance(i, types.Integer):
        return None
    if not isinstance(dtype, types.NumberClass) or not isinstance(value, types.Number):
        return None
    item = dtype.instance_type

    def codegen(context, builder, signature, args):
        ll = context.get_data_type(item)
        ptr = builder.inttoptr(args[0], ll.as_pointer())
        i0 = context.cast(builder, args[1], signature.args[1], types.int64)
        builder.store(context.cast(builder, args[2], signature.args[2], item), builder.gep(ptr, [i0]))
        return context.get_dummy_value()

    return types.void(addr, i, value, dtype), codegen


@intrinsic
def _load8(typingctx, addr):
    """The 8 bytes at byte address ``addr`` (any alignment) as a uint64 in the machine's byte
    order (little-endian: the first byte is the lowest). The caller makes sure they are there."""
    from llvmlite import ir
    from numba.core import types

    if not isinstance(addr, types.Integer):
        return None

    def codegen(context, builder, signature, args):
        i64 = ir.IntType(64)
        return builder.load(builder.inttoptr(args[0], i64.as_pointer()), align=1)

    return types.uint64(addr), codegen


# New arrays in compiled code. ``np.empty``, ``np.zeros`` and ``np.full`` each compile a function
# of their own (Numba's implementation of them) for every shape and dtype a kernel asks for: 40
# such compilations on the first run after an install, 2.7 s of the compiling. These intrinsics
# emit the same allocation (Numba's own ``_empty_nd_impl``) straight into the kernel that calls
# them, so nothing more is compiled. Same arrays: C-contiguous, owned by Numba's runtime.


def _array_type(shape, dtype):
    """The array type a constructor of ``shape`` (int or tuple of ints) and ``dtype`` returns."""
    from numba.core import types
    from numba.core.typing.npydecl import parse_dtype, parse_shape

    item, ndim = parse_dtype(dtype), parse_shape(shape)
    return None if item is None or ndim is None else types.Array(item, ndim, "C")


def _allocate(context, builder, signature, args):
    from numba.np.arrayobj import _empty_nd_impl, _parse_shape

    ary = _empty_nd_impl(context, builder, signature.return_type,
                         _parse_shape(context, builder, signature.args[0], args[0]))
    return ary, builder.mul(ary.itemsize, ary.nitems)


def _new_array(shape, dtype, *, zeroed: bool):
    """Signature and code generator of ``_empty_array`` (``zeroed``: of ``_zero_array``)."""
    from numba.core import cgutils

    arr = _array_type(shape, dtype)
    if arr is None:
        return None

    def codegen(context, builder, signature, args):
        ary, size = _allocate(context, builder, signature, args)
        if zeroed:
            cgutils.memset(builder, ary.data, size, 0)
        return ary._getvalue()

    return arr(shape, dtype), codegen


@intrinsic
def _empty_array(typingctx, shape, dtype):
    """``np.empty(shape, dtype)`` in compiled code, e.g. ``_empty_array((n, 2), np.int64)``."""
    return _new_array(shape, dtype, zeroed=False)


@intrinsic
def _zero_array(typingctx, shape, dtype):
    """``np.zeros(shape, dtype)`` in compiled code, e.g. ``_zero_array(n, np.int32)``."""
    return _new_array(shape, dtype, zeroed=True)


@intrinsic
def _full_array(typingctx, shape, value, dtype):
    """``np.full(shape, value, dtype)`` in compiled code, e.g. ``_full_array(256, -1, np.int32)``."""
    from numba.core import cgutils, types

    arr = _array_type(shape, dtype)
    if arr is None or not isinstance(value, types.Number):
        return None

    def codegen(context, builder, signature, args):
        ary, _ = _allocate(context, builder, signature, args)
        v = context.cast(builder, args[1], signature.args[1], arr.dtype)
        with cgutils.for_range(builder, ary.nitems) as loop:
            builder.store(v, builder.gep(ary.data, [loop.index]))
        return ary._getvalue()

    return arr(shape, value, dtype), codegen


_MADV_PAGEOUT = 21  # Linux >= 5.4
_PR_SET_PDEATHSIG = 1


def end_with_parent() -> None:
    """In a process that compiles kernels for a run (``toktok.ahead``, ``toktok.merge.warm``): be
    killed when the run ends, even by SIGKILL, so that no compiler outlives it (Linux; elsewhere
    nothing). What it cached so far stays cached: Numba writes each file whole."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes
    import os
    import signal

    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):
        return
    if os.getppid() == 1:  # the run ended before the line above
        os._exit(0)



def release_llvm_pages() -> int:
    """Hand the pages of LLVM's code (``libllvmlite.so``) back to the kernel; returns how many
    mappings were advised (0 where the system does not allow it, e.g. not Linux).

    LLVM is needed only while Numba loads or compiles a kernel, yet the kernel maps ~100 MB of
    its 180 MB library when it is loaded (static initializers all over the code, mapped a large
    folio at a time), and RSS counts all of it for the whole run. The pages are clean copies of
    the file: MADV_PAGEOUT drops them from this process, and the few that loading a later kernel
    touches come back on demand. Results never change; only the resident set shrinks.
    Example: ``release_llvm_pages() >= 0``.
    """
    if not sys.platform.startswith("linux") or "llvmlite" not in sys.modules:  # nothing mapped
        return 0
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        maps = open("/proc/self/maps").read().splitlines()
    except OSError:
        return 0
    n = 0
    for line in maps:
        parts = line.split()
        if len(parts) >= 6 and parts[5].endswith("/libllvmlite.so") and "w" not in parts[1]:
            lo, hi = (int(x, 16) for x in parts[0].split("-"))
            if libc.madvise(ctypes.c_void_p(lo), ctypes.c_size_t(hi - lo), _MADV_PAGEOUT) == 0:
                n += 1
    return n


def ready(kernels: tuple) -> bool:
    """Whether ``kernels`` load cheaply here: built ahead (``toktok.prebuilt``), or this process has
    Numba already and its cache holds them (no import, no compiling); a small run's reference
    paths are taken otherwise. Example: ``ready((_segment,))``."""
    return _ahead(kernels) or (_loaded and compiled(kernels))


def _ahead(kernels: tuple) -> bool:
    """Whether calls of ``kernels`` run their modules built ahead: built, and this process has
    not handed its kernels to Numba (:func:`load`)."""
    return not _loaded and prebuilt.built([_name(k) for k in kernels])


def compiled(kernels: tuple) -> bool:
    """Whether ``kernels`` are built ahead (``toktok.ahead``) or in Numba's cache (False on the
    first run after an install, when they compile: tens of seconds, once), e.g.
    ``if not compiled((_loop,)): ...``. Asks each kernel's cache index; True when it cannot tell.
    Ask for kernels Python calls: a helper that only compiled code calls keeps a stale entry once
    its file changes, as loading its callers never rewrites it."""
    if _ahead(kernels):
        return True
    try:
        return all(f._cache._cache_file._load_index() for f in kernels)
    except Exception:  # Numba's cache internals moved: say nothing rather than something wrong
        return True
