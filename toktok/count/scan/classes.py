"""Unicode character classes as the scanners read them: per code point (letter, number, whitespace,
o200k's letter classes, the ASCII letters the contractions fold to) and per byte, asked of Polars'
own regex engine so that every path classifies each character alike, kept in a small cache file
(``~/.cache/toktok/``, keyed by the Polars version) and in memory once read.
Example: ``_class_tables()[0][ord("a")] == _L``.
"""
from __future__ import annotations

import functools
import hashlib
import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from ..._kernels import _empty_array, _zero_array, njit

if TYPE_CHECKING:
    import polars as pl

_L, _N, _W = 1, 2, 4  # letter, number, whitespace: per code point, from Polars
_HI, _NL, _SP, _AP = 8, 16, 32, 64  # per byte only: lead of a non-ASCII char, \r or \n, ' ', '
# o200k's tables only (uint16): in [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}], in [\p{Ll}\p{Lm}\p{Lo}\p{M}]; per byte: '/'
_UP, _LO, _SL = 256, 512, 1024
# superbpe's tables only (uint8): a decimal digit (\d, any script's)
_DG = 128


@njit(cache=True, no_cfunc_wrapper=True)
def _utf8_encode_all(cps):
    out = _empty_array(cps.shape[0] * 4, np.uint8)
    off = _zero_array(cps.shape[0] + 1, np.int32)
    o = 0
    for i in range(cps.shape[0]):
        c = cps[i]
        if c < 0x80:
            out[o] = c
            o += 1
        elif c < 0x800:
            out[o] = 0xC0 | (c >> 6)
            out[o + 1] = 0x80 | (c & 0x3F)
            o += 2
        elif c < 0x10000:
            out[o] = 0xE0 | (c >> 12)
            out[o + 1] = 0x80 | ((c >> 6) & 0x3F)
            out[o + 2] = 0x80 | (c & 0x3F)
            o += 3
        else:
            out[o] = 0xF0 | (c >> 18)
            out[o + 1] = 0x80 | ((c >> 12) & 0x3F)
            out[o + 2] = 0x80 | ((c >> 6) & 0x3F)
            out[o + 3] = 0x80 | (c & 0x3F)
            o += 4
        off[i + 1] = o
    return out[:o], off


_TABLES: tuple[np.ndarray, np.ndarray] | None = None
_BYTE_CLASSES: np.ndarray | None = None
_SWAR_OK: bool | None = None

# What the class tables are made of; the cache file's name carries a digest of it and the Polars
# version, so a change to either computes the tables afresh.
_CLASS_PATTERNS = ((_L, r"^\p{L}$"), (_N, r"^\p{N}$"), (_W, r"^\s$"))
_FOLDS = "strevmld"
_CLASS_CHUNK = 1 << 16


def _class_chunks() -> Iterator[tuple[np.ndarray, pl.Series]]:
    """Every code point (surrogates left out) as (code points, a String Series of their chars),
    64K at a time (a Series of all 1.1M code points at once costs ~84 MB of transient memory)."""
    import polars as pl

    for lo in range(0, 0x110000, _CLASS_CHUNK):
        cps = np.arange(lo, min(lo + _CLASS_CHUNK, 0x110000), dtype=np.int64)
        cps = cps[(cps < 0xD800) | (cps > 0xDFFF)]  # surrogates are not characters
        data, off = _utf8_encode_all(cps)
        yield cps, pl.Series("c", pa.StringArray.from_buffers(len(cps), pa.py_buffer(off), pa.py_buffer(data)))


def _compute_class_tables() -> tuple[np.ndarray, np.ndarray]:
    """The tables asked of Polars' regex engine."""
    import polars as pl

    flags = np.zeros(0x110000, np.uint8)
    fold = np.zeros(0x110000, np.uint8)
    for cps, s in _class_chunks():
        for bit, pat in _CLASS_PATTERNS:
            flags[cps[s.str.contains(pat).to_numpy()]] |= bit
        # the folds of the contraction letters are few: find them all, then which letter each is
        foldable = s.str.contains(f"(?i)^[{_FOLDS}]$").to_numpy()
        if foldable.any():
            sub, sub_cps = s.filter(pl.Series(foldable)), cps[foldable]
            for ch in _FOLDS:
                fold[sub_cps[sub.str.contains(f"(?i)^{ch}$").to_numpy()]] = ord(ch)
    return flags, fold


def polars_version() -> str:
    """Polars' version without importing it (~0.1 s and ~20 MB that a run may not need): the loaded
    module's, else from its installed metadata (whichever build of it is installed), else from
    Polars itself where no metadata names it. Example: ``polars_version().count(".") >= 1``."""
    if "polars" in sys.modules:
        return sys.modules["polars"].__version__
    names = ("polars", "polars-lts-cpu", "polars-u64-idx")
    found = dist_version(names, "polars")
    if found is not None:
        return found
    from importlib.metadata import PackageNotFoundError, version

    for name in names:
        try:
            return version(name)
        except PackageNotFoundError:
            pass
    import polars

    return polars.__version__


def _dist_key(name: str) -> str:
    return "".join("_" if c in "-." else c for c in name.lower())


def dist_version(names, module: str) -> str | None:
    """The version of the installed distribution named one of ``names`` that holds the top-level
    package ``module``, read from the name of its ``NAME-VERSION.dist-info`` folder beside the
    package (as installers name it), without importing the package or ``importlib.metadata``
    (~20 ms of a run's start, and ~3 ms a name); None when that folder is not there or not the
    only one of those names (``importlib.metadata.version`` says then).
    Example: ``dist_version(["numpy"], "numpy") == numpy.__version__``."""
    import importlib.util

    try:
        spec = importlib.util.find_spec(module)  # (a top-level name: found, not imported)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.origin or not spec.has_location:
        return None
    origin = Path(spec.origin)
    site = origin.parent.parent if spec.submodule_search_locations is not None else origin.parent
    keys = {_dist_key(n) for n in names}
    found = _dist_infos(str(site))
    if found is None:
        return None
    versions = [v for n, _, v in found if _dist_key(n) in keys]
    return versions[0] if len(versions) == 1 and versions[0] else None


@functools.lru_cache(maxsize=8)
def _dist_infos(site: str) -> list[tuple[str, str, str]] | None:
    """``(name, "-", version)`` of each ``.dist-info`` folder in ``site``, listed once a run (a
    site-packages folder of a few hundred entries: ~1 ms a listing, and a run's start asks for
    five versions); None when it cannot be listed."""
    try:
        return [e[:-10].rpartition("-") for e in os.listdir(site) if e.endswith(".dist-info")]
    except OSError:
        return None


def _class_cache_path() -> Path:
    digest = hashlib.sha1(repr((_CLASS_PATTERNS, _FOLDS, 0x110000)).encode()).hexdigest()[:12]
    root = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return root / "toktok" / f"classes-polars{polars_version()}-{digest}.npz"


def _tables_look_right(flags: np.ndarray, fold: np.ndarray) -> bool:
    return (
        flags.shape == fold.shape == (0x110000,) and flags.dtype == fold.dtype == np.uint8
        and flags[ord("a")] == _L and flags[ord("7")] == _N and flags[ord(" ")] == _W
        and flags[ord("!")] == 0 and flags[0x4E2D] == _L and fold[ord("S")] == ord("s")
        and fold[0x17F] == ord("s") and fold[ord("x")] == 0 and int(flags.max()) <= 7
    )


def _class_tables() -> tuple[np.ndarray, np.ndarray]:
    """Per code point: class flags (letter, number, whitespace) and, for the letters of the
    contractions, the ASCII letter they fold to under (?i). Asked of Polars' own regex engine so
    that both paths classify every character the same way; kept in a small cache file
    (``~/.cache/toktok/``, keyed by the Polars version) because asking takes about a second,
    and in memory once read."""
    global _TABLES
    if _TABLES is None:
        _TABLES = _cached_class_tables(_class_cache_path())
    return _TABLES


def _cached_class_tables(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """The class tables from the cache file ``path``; computed and written there when it is
    absent, unreadable or damaged. A cache that cannot be written is skipped.
    Example: ``_cached_class_tables(_class_cache_path())[0][ord("a")] == _L``."""
    got = _cached(path, lambda: dict(zip(("flags", "fold"), _compute_class_tables())),
                  lambda z: _tables_look_right(z["flags"], z["fold"]))
    return got["flags"], got["fold"]


def _cached(path: Path, compute, looks_right) -> dict[str, np.ndarray]:
    """Arrays by name from the cache file ``path`` when it is there and ``looks_right`` of them,
    else ``compute()`` (written to ``path``, atomically; skipped if it cannot be written)."""
    try:
        with np.load(path) as z:
            got = {k: z[k] for k in z.files}
        if not looks_right(got):
            raise ValueError("bad class cache")
        return got
    except Exception:  # absent, unreadable or damaged: compute (and try to keep) them
        got = compute()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as fh:
                np.savez_compressed(fh, **got)
            os.replace(tmp, path)  # atomic: a reader never sees half a file
        except BaseException:
            os.unlink(tmp)
            raise
    except OSError:
        pass
    return got


# o200k's letter classes, asked of Polars as cl100k's are, in a cache file of their own (cl100k's
# stays as it is).
_O200K_CLASSES = ((_UP, r"^[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]$"), (_LO, r"^[\p{Ll}\p{Lm}\p{Lo}\p{M}]$"))
_O200K_TABLES: tuple[np.ndarray, np.ndarray] | None = None


def _o200k_cache_path() -> Path:
    import polars as pl

    digest = hashlib.sha1(repr((_O200K_CLASSES, 0x110000)).encode()).hexdigest()[:12]
    return _class_cache_path().with_name(f"classes-o200k-polars{pl.__version__}-{digest}.npz")


def _compute_o200k_classes() -> np.ndarray:
    """Per code point, o200k's bits _UP and _LO (uint16), from Polars' regex engine."""
    out = np.zeros(0x110000, np.uint16)
    for cps, s in _class_chunks():
        for bit, pat in _O200K_CLASSES:
            out[cps[s.str.contains(pat).to_numpy()]] |= bit
    return out


def _o200k_looks_right(z: dict) -> bool:
    u = z.get("classes")
    return (u is not None and u.shape == (0x110000,) and u.dtype == np.uint16
            and u[ord("A")] == _UP and u[ord("a")] == _LO and u[0x4E2D] == _UP | _LO
            and u[0x0301] == _UP | _LO and u[0x01C5] == _UP and u[ord("!")] == 0 and int(u.max()) <= _UP | _LO)


def _o200k_tables() -> tuple[np.ndarray, np.ndarray]:
    """o200k's (per byte, per code point) class tables: cl100k's as uint16, with _UP and _LO
    (and _SL for "/")."""
    global _O200K_TABLES
    if _O200K_TABLES is None:
        extra = _cached(_o200k_cache_path(), lambda: {"classes": _compute_o200k_classes()}, _o200k_looks_right)
        flags = _class_tables()[0].astype(np.uint16) | extra["classes"]
        ac = np.full(256, _HI, np.uint16)
        ac[:128] = flags[:128] | _byte_classes()[:128]
        ac[47] |= _SL
        _O200K_TABLES = ac, flags
    return _O200K_TABLES


# superbpe's decimal digits, asked of Polars as the other classes are, in a cache file of their own.
_DIGITS = r"^\d$"
_SUPERBPE_TABLES: tuple[np.ndarray, np.ndarray] | None = None


def _digits_cache_path() -> Path:
    import polars as pl

    digest = hashlib.sha1(repr((_DIGITS, 0x110000)).encode()).hexdigest()[:12]
    return _class_cache_path().with_name(f"classes-digits-polars{pl.__version__}-{digest}.npz")


def _compute_digits() -> np.ndarray:
    """Per code point, whether it is a decimal digit (bool), from Polars' regex engine."""
    out = np.zeros(0x110000, np.bool_)
    for cps, s in _class_chunks():
        out[cps[s.str.contains(_DIGITS).to_numpy()]] = True
    return out


def _digits_look_right(z: dict) -> bool:
    u = z.get("digits")
    return (u is not None and u.shape == (0x110000,) and u.dtype == np.bool_ and u[48:58].all()
            and u[0x0663] and not u[0xB2] and not u[ord("a")] and int(u.sum()) < 1000)


def _superbpe_tables() -> tuple[np.ndarray, np.ndarray]:
    """superbpe's (per byte, per code point) class tables: cl100k's with _DG on the decimal digits."""
    global _SUPERBPE_TABLES
    if _SUPERBPE_TABLES is None:
        digits = _cached(_digits_cache_path(), lambda: {"digits": _compute_digits()}, _digits_look_right)["digits"]
        flags = _class_tables()[0] | (digits.astype(np.uint8) * np.uint8(_DG))
        ac = np.full(256, _HI, np.uint8)
        ac[:128] = flags[:128]
        _SUPERBPE_TABLES = ac, flags
    return _SUPERBPE_TABLES


def _byte_classes() -> np.ndarray:
    """Per byte: the flags of an ASCII char (from ``_class_tables``) plus \\r\\n, space and
    apostrophe bits; bytes >= 0x80 are marked for a full decode."""
    global _BYTE_CLASSES
    if _BYTE_CLASSES is None:
        flags, _ = _class_tables()
        ac = np.full(256, _HI, np.uint8)
        ac[:128] = flags[:128]
        ac[10] |= _NL
        ac[13] |= _NL
        ac[32] |= _SP
        ac[39] |= _AP
        _BYTE_CLASSES = ac
    return _BYTE_CLASSES


def _swar_ok() -> bool:
    """Whether Polars' classes of the ASCII chars are the ones the 8-byte scanning assumes."""
    global _SWAR_OK
    if _SWAR_OK is None:
        flags, _ = _class_tables()
        want = np.zeros(128, np.uint8)
        for lo, hi, bit in ((65, 90, _L), (97, 122, _L), (48, 57, _N), (9, 13, _W), (32, 32, _W)):
            want[lo : hi + 1] = bit
        _SWAR_OK = bool((flags[:128] == want).all())
    return _SWAR_OK


def _o200k_swar_ok() -> bool:
    """``_swar_ok``, and o200k's ASCII capitals [A-Z] and small letters [a-z] as it assumes."""
    flags = _o200k_tables()[1][:128]
    want = np.zeros(128, np.uint16)
    want[65:91], want[97:123] = _UP, _LO
    return _swar_ok() and bool((flags & (_UP | _LO) == want).all())
