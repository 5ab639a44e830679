"""The kernel cache as a hostile or broken machine leaves it (issue #47, items 3 and 10): a module
planted by another user, one lacking the functions toktok expects, a module cut short, a marker
left by a build that failed, and Numba's cache failing to write.

The modules here are real shared objects, compiled by the C compiler a build needs, with
init code that writes a marker file: a test that finds the marker knows the code ran. Each case
runs in a subprocess (a module that crashes the loader kills that process, not the tests) with
its own ``NUMBA_CACHE_DIR``, so nothing of the real cache is touched.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CC = shutil.which("cc") or shutil.which("gcc")
needs_cc = pytest.mark.skipif(CC is None or not Path(sysconfig.get_paths()["include"], "Python.h").is_file(),
                              reason="needs a C compiler and Python's headers (as a kernel build does)")

MERGE_KERNEL = "toktok.merge.layout._tokens_per_word"


def _python(code: str, cache: Path, *, preexec=None, timeout: float = 300) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "NUMBA_CACHE_DIR": str(cache)}
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=env,
                          timeout=timeout, preexec_fn=preexec)


def _module_path(cache: Path, unit: str = "merge") -> Path:
    """Where toktok looks for ``unit``'s module under ``cache``: computable from the public sources."""
    r = _python(f"from toktok import prebuilt; print(prebuilt.path({unit!r}))", cache)
    assert r.returncode == 0, r.stderr
    return Path(r.stdout.strip())


def _compile_module(target: Path, marker: Path, unit: str = "merge") -> None:
    """A real extension module named as ``unit``'s, exporting no kernel; loading it writes ``marker``."""
    name = "_toktok_kernels_" + unit.lstrip("_")
    src = target.parent / "planted.c"
    src.write_text(textwrap.dedent(f"""
        #include <Python.h>
        #include <stdio.h>
        __attribute__((constructor)) static void planted(void) {{
            FILE *f = fopen("{marker}", "w");
            if (f) {{ fputs("ran\\n", f); fclose(f); }}
        }}
        static struct PyModuleDef def = {{PyModuleDef_HEAD_INIT, "{name}", NULL, -1, NULL}};
        PyMODINIT_FUNC PyInit_{name}(void) {{ return PyModule_Create(&def); }}
    """))
    subprocess.run([CC, "-shared", "-fPIC", "-O0", f"-I{sysconfig.get_paths()['include']}", str(src), "-o", str(target)],
                   check=True, capture_output=True)
    src.unlink()


def _seal(target: Path) -> Path:
    """The seal toktok writes beside a module once it is whole (``prebuilt.seal``): size and SHA-256."""
    seal = target.with_name(target.name + ".sealed")
    seal.write_text(json.dumps({"size": target.stat().st_size, "sha256": hashlib.sha256(target.read_bytes()).hexdigest()}))
    os.chmod(seal, 0o644)
    return seal


def _warnings(r: subprocess.CompletedProcess) -> list[str]:
    return [ln for ln in r.stderr.splitlines() if ln.strip()]


# --- 3. a module planted by another user is never imported --------------------------------------


@needs_cc
@pytest.mark.parametrize("how", ["world-writable folder", "another user's folder", "another user's file"])
def test_planted_module_is_not_imported(tmp_path, how):
    if how != "world-writable folder" and os.geteuid() != 0:
        pytest.skip("making a file another user's needs root")
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o1777)  # a shared temp folder, as containers point NUMBA_CACHE_DIR at
    target = _module_path(shared)
    target.parent.mkdir()
    marker = tmp_path / "planted-code-ran"
    _compile_module(target, marker)
    # the planter computes the seal as toktok would write it, too
    seal = _seal(target)
    if how == "world-writable folder":
        os.chmod(target.parent, 0o777)
    elif how == "another user's folder":
        for p in (target.parent, target, seal):
            os.chown(p, 65534, 65534)
    else:
        os.chmod(target.parent, 0o755)
        for p in (target, seal):
            os.chown(p, 65534, 65534)
    r = _python(f"""
        from toktok import prebuilt
        m = prebuilt.module("merge")  # None, or a real module of this user's folder (built there before)
        assert m is None or m.__file__ != {str(target)!r}
        assert all(callable(fn) for _, fn in prebuilt.exports({MERGE_KERNEL!r}))
        print(prebuilt.folder())
    """, shared)
    assert r.returncode == 0, r.stderr
    assert not marker.exists(), "the planted module's code ran"
    lines = _warnings(r)
    assert len(lines) == 1 and lines[0].startswith("toktok: warning: not loading"), r.stderr
    if how != "another user's file":  # built elsewhere: a folder of this user's (else replaced by a build)
        assert Path(r.stdout.strip()) != target.parent
    assert target.exists()  # another user's file is not ours to remove


# --- 3. a module lacking the expected functions: a clear fallback -------------------------------


@needs_cc
def test_module_lacking_functions_falls_back(tmp_path):
    cache = tmp_path / "cache"
    cache.mkdir()
    target = _module_path(cache)
    target.parent.mkdir(mode=0o755)
    _compile_module(target, tmp_path / "ran")
    os.chmod(target, 0o755)
    _seal(target)
    r = _python(f"""
        from toktok import prebuilt
        assert prebuilt.exports({MERGE_KERNEL!r}) == []
        assert prebuilt.exports({MERGE_KERNEL!r}) == []  # said once
    """, cache)
    assert r.returncode == 0, r.stderr
    lines = _warnings(r)
    assert len(lines) == 1 and "lack the functions" in lines[0], r.stderr
    assert not target.exists()  # removed: the next run builds it again


# --- 10. a module cut short is not loaded (no SIGBUS), and is built again -------------------------


@needs_cc
def test_truncated_module_is_not_loaded(tmp_path):
    """A module cut to half its size, as a copy or a build cut short by a full disk leaves it
    (truncated for real with ``os.truncate``): loading it died by SIGBUS, with no message."""
    cache = tmp_path / "cache"
    cache.mkdir()
    target = _module_path(cache)
    target.parent.mkdir(mode=0o755)
    marker = tmp_path / "ran"
    _compile_module(target, marker)
    os.chmod(target, 0o755)
    _seal(target)
    os.truncate(target, target.stat().st_size // 2)
    r = _python(f"""
        from toktok import prebuilt
        assert not prebuilt.built([{MERGE_KERNEL!r}])  # so the run builds it first
        assert prebuilt.module("merge") is None
    """, cache)
    assert r.returncode == 0, (r.returncode, r.stderr)
    lines = _warnings(r)
    assert len(lines) == 1 and "cut short" in lines[0], r.stderr
    assert not marker.exists()
    assert not target.exists()  # removed: the next run builds it again


@needs_cc
def test_unsealed_module_is_not_loaded(tmp_path):
    """A module without its seal (a build killed between the two writes, or an older toktok's)."""
    cache = tmp_path / "cache"
    cache.mkdir()
    target = _module_path(cache)
    target.parent.mkdir(mode=0o755)
    marker = tmp_path / "ran"
    _compile_module(target, marker)
    os.chmod(target, 0o755)
    r = _python(f"""
        from toktok import prebuilt
        assert not prebuilt.built([{MERGE_KERNEL!r}])
        assert prebuilt.module("merge") is None
    """, cache)
    assert r.returncode == 0, r.stderr
    assert not marker.exists() and "no seal" in r.stderr


# --- 10. a marker left by a build that failed -----------------------------------------------------


def test_marker_cut_short_does_not_count_as_cached(tmp_path):
    """A unit's process that could not build its module compiles into Numba's cache and leaves a
    marker; on a full disk the marker's write is cut short (an empty file). Such a marker must not
    say the unit is cached (later runs then never built it, and died when Numba could not cache)."""
    cache = tmp_path / "cache"
    cache.mkdir()
    target = _module_path(cache)
    target.parent.mkdir(mode=0o755)
    target.with_suffix(".numba").write_bytes(b"")
    code = f"from toktok import prebuilt; print(prebuilt.built([{MERGE_KERNEL!r}], or_cached=True))"
    r = _python(code, cache)
    assert r.returncode == 0 and r.stdout.strip() == "False", r.stderr
    target.with_suffix(".numba").write_bytes(b"compiled\n")  # prebuilt.MARKER, written whole
    r = _python(code, cache)
    assert r.returncode == 0 and r.stdout.strip() == "True", r.stderr


def _no_file_writes():
    """Every write to a regular file fails (``RLIMIT_FSIZE`` 0, SIGXFSZ ignored: EFBIG), as every
    write on a full disk fails (ENOSPC): a real failing write, no mock."""
    import resource
    import signal

    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))


def test_numba_cache_that_cannot_be_written_is_one_line(tmp_path):
    """A kernel compiled where Numba's cache cannot be written (a full disk) runs, and says so once,
    instead of dying with a traceback of Numba's cache."""
    cache = tmp_path / "cache"
    cache.mkdir()
    r = _python(f"""
        import numpy as np
        from toktok.merge.layout import _tokens_per_word
        P = np.zeros((8, 2), np.uint32)
        print(_tokens_per_word(P, np.array([1, 1], np.int64), np.int64(20)).tolist())
    """, cache, preexec=_no_file_writes)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.strip() == "[1, 1]"
    lines = _warnings(r)
    assert len(lines) == 1 and "cannot write Numba's cache" in lines[0], r.stderr[-3000:]


# --- a kill -9 while a first run builds its kernels leaves no run to --resume ----------------------


def test_kill_during_the_first_kernel_build_leaves_nothing_to_resume(tmp_path):
    """The first run after an install builds its kernels (~40 s); killed meanwhile (kill -9), it
    once left a staging folder with a run file that the next plain run refused ("pass --resume")."""
    import signal
    import time

    src = tmp_path / "words.txt"
    line = " ".join(f"w{i}x{i % 7}" for i in range(2000)) + "\n"
    src.write_text(line * 80)  # ~1.4 MB: past a tiny run, so the kernels are built first
    out = tmp_path / "tok"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "NUMBA_CACHE_DIR": str(tmp_path / "numba")}
    p = subprocess.Popen([sys.executable, "-m", "toktok.cli", "train", str(src), "--out", str(out), "--merges", "10",
                          "--progress", "none"], env=env, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        deadline = time.time() + 240
        seen = ""
        while time.time() < deadline and "compiling the kernels" not in seen:
            seen += p.stderr.readline()
            if p.poll() is not None:
                break
        assert "compiling the kernels" in seen, seen
        time.sleep(1.0)  # the unit's process is compiling now
        os.killpg(p.pid, signal.SIGKILL)
        p.wait(30)
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait(30)
    from toktok.rundir import interrupted_run

    assert interrupted_run(out) is None
    assert not out.exists() and not (tmp_path / ".tok.partial").exists()


# --- 3. Numba's own cache in an untrusted folder is never loaded -----------------------------------


class _Planted:
    """Unpickled, it creates the folder ``path`` (a marker that code of the planter's ran)."""

    def __init__(self, path: str):
        self.path = path

    def __reduce__(self):
        return (os.mkdir, (self.path,))


def test_planted_numba_cache_is_not_loaded(tmp_path):
    """Numba's cache index (``.nbi``) is a pickle: loading it runs code. Planted where Numba would
    look for a toktok kernel's cache under a world-writable ``NUMBA_CACHE_DIR`` (its folder named
    as Numba names it: computable from the public sources), it is never read; the kernel runs, and
    a process the run starts (``toktok.ahead``) inherits the choice."""
    import pickle

    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o1777)  # a shared temp folder, as containers point NUMBA_CACHE_DIR at
    marker = tmp_path / "planted-code-ran"
    merge = ROOT / "toktok" / "merge"
    folder = shared / f"merge_{hashlib.sha1(str(merge).encode()).hexdigest()}"
    folder.mkdir()
    os.chmod(folder, 0o777)
    r = _python("from toktok.merge.layout import _tokens_per_word as k; print(k.py_func.__code__.co_firstlineno)",
                shared)
    assert r.returncode == 0, r.stderr
    base = f"layout._tokens_per_word-{r.stdout.strip()}.py{sys.version_info[0]}{sys.version_info[1]}{sys.abiflags}"
    (folder / f"{base}.nbi").write_bytes(pickle.dumps(_Planted(str(marker))))
    (folder / f"{base}.0.nbc").write_bytes(pickle.dumps(_Planted(str(marker))))
    r = _python("""
        import os, subprocess, sys
        import numpy as np
        from toktok import _kernels
        from toktok.merge.layout import _tokens_per_word
        _kernels.load()  # through Numba (not a module built ahead)
        P = np.zeros((8, 2), np.uint32)
        print(_tokens_per_word(P, np.array([1, 1], np.int64), np.int64(20)).tolist())
        subprocess.run([sys.executable, "-c", "import os; print(os.environ.get('NUMBA_CACHE_DIR'))"], check=True)
    """, shared)
    assert r.returncode == 0, r.stderr[-3000:]
    assert not marker.exists(), "the planted cache's code ran"
    assert r.stdout.split() == ["[1,", "1]", "None"], r.stdout
    lines = _warnings(r)
    assert len(lines) == 1 and lines[0].startswith("toktok: warning: not loading the kernels from"), r.stderr
    assert str(folder) in lines[0] and "NUMBA_CACHE_DIR" in lines[0]
