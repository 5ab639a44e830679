"""The first run after an install compiles the kernels and says so, once.

Each test points Numba at an empty cache folder (NUMBA_CACHE_DIR) in a subprocess, as a fresh
install or CI machine has it. How long the compile takes is measured by ``bench/`` (cold-start row).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import FIXTURES, ROOT

NOTICE = "compiling the kernels, once after an install"


def _py(code: str, cache) -> str:
    env = {**os.environ, "NUMBA_CACHE_DIR": str(cache)}
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    return r.stdout.strip()


def test_compiled_is_false_on_an_empty_cache_and_true_once_the_helpers_are_cached(tmp_path):
    cache = tmp_path / "numba"
    ask = "from toktok import _kernels as k; print(k.compiled((k._hash_range, k._grow)))"
    assert _py(ask, cache) == "False"
    # compile (and so cache) the two helpers every stage's kernels call, as a first run does
    _py("from numba import types; from toktok import _kernels as k; "
        "k._hash_range.compile((types.Array(types.uint8, 1, 'C'), types.int64, types.int64)); "
        "k._grow.compile((types.Array(types.int64, 1, 'C'), types.int64))", cache)
    assert _py(ask, cache) == "True"


def test_a_process_that_loads_its_kernels_from_the_cache_leaves_numbas_registries_alone(tmp_path):
    # compiling refreshes Numba's target context (every lowering registry imported); loading
    # machine code from the cache needs only its runtime (_kernels._load_without_refresh)
    cache = tmp_path / "numba"
    code = ("import sys; from numba import types; from toktok import _kernels as k; "
            "k._grow.compile((types.Array(types.int64, 1, 'C'), types.int64)); "
            "print(sum(k._grow._cache_hits.values()), 'numba.np.arraymath' in sys.modules)")
    # (what loaded kernels compute: every test of a run in a process of its own, the golden run's)
    assert (_py(code, cache), _py(code, cache)) == ("0 True", "1 False")


def _cached_signatures(kernels: list[str], cache) -> list[int]:
    """How many compiled versions Numba's cache holds for each ``module.kernel`` of toktok.merge."""
    code = ("import importlib; print(*(len(getattr(importlib.import_module('toktok.merge.' + m), k)"
            "._cache._cache_file._load_index()) for m, k in (x.split('.') for x in %r)))" % (kernels,))
    return [int(x) for x in _py(code, cache).split()]


def _four_times(tmp: Path) -> Path:
    """The fixture's documents four times over as text (2.8 MB): past a tiny run (1 MB), whose
    merge loop compiles on a first run, and within a small one (8 MB): counted by the reference."""
    import pyarrow.parquet as pq

    texts = pq.read_table(FIXTURES / "sample.parquet", columns=["text"]).column(0).to_pylist() * 4
    path = tmp / "four.txt"
    path.write_text("\n".join(t.replace("\n", " ") for t in texts), encoding="utf-8")
    return path


def _units_built(cache: Path) -> list[str]:
    """The units whose modules ``toktok.ahead`` built in ``cache`` (a NUMBA_CACHE_DIR)."""
    return sorted(p.name.partition("-")[0] for p in (cache / "toktok").glob("*-*") if p.suffix in (".so", ".pyd"))


_THROUGH_NUMBA = """
import sys, toktok
from toktok import _kernels
_kernels.load()  # every kernel through Numba from here: the modules built ahead are not called
toktok.train([sys.argv[1]], out=sys.argv[2], merges=int(sys.argv[3]), force=True, verbose=False)
"""


@pytest.mark.slow
def test_first_run_builds_the_kernels_once_and_they_give_what_numba_gives(tmp_path):
    # the first run builds its units ahead (toktok.ahead: the scanner and each stage), says so once,
    # and calls them: Numba's cache never gets the loop; later runs neither build nor say it; a
    # run through Numba's kernels writes the same tokenizer and run file
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "numba")}
    text = _four_times(tmp_path)
    cmd = [sys.executable, "-m", "toktok.cli", "train", str(text), "--merges", "200",
           "--out", str(tmp_path / "tok"), "--force"]
    first = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    second = subprocess.run(cmd + ["-q"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert first.returncode == second.returncode == 0, first.stderr[-2000:] + second.stderr[-2000:]
    assert first.stderr.count(NOTICE) == 1
    assert NOTICE not in second.stderr
    assert _units_built(tmp_path / "numba") == ["_scan_into", "count", "formats", "merge"]
    assert _cached_signatures(["loop._loop", "segment._segment"], tmp_path / "numba") == [0, 0]
    jit = subprocess.run([sys.executable, "-c", _THROUGH_NUMBA, str(text), str(tmp_path / "jit"), "200"], cwd=ROOT,
                         env=env, capture_output=True, text=True, timeout=900)
    assert jit.returncode == 0, jit.stderr[-2000:]
    assert _cached_signatures(["loop._loop"], tmp_path / "numba") == [1]
    for name in ("tokenizer.json", "tokenizer.tiktoken"):
        assert (tmp_path / "tok" / name).read_bytes() == (tmp_path / "jit" / name).read_bytes(), name
    import duckdb

    with duckdb.connect(str(tmp_path / "tok" / "run.duckdb"), read_only=True) as a, \
            duckdb.connect(str(tmp_path / "jit" / "run.duckdb"), read_only=True) as b:
        for table in ("words", "merges", "compression", "word_gains"):
            q = f"select * from {table} order by all"
            assert a.sql(q).fetchall() == b.sql(q).fetchall(), table


@pytest.mark.slow
def test_a_tiny_first_run_merges_in_python_compiles_nothing_and_writes_what_the_loop_writes(tmp_path):
    # the demo's files (0.4 MB, 26,547 words), 9,417 tokens: while the loop is not in the cache, a
    # run this small merges in Python (merge.small.COLD_WORDS) instead of compiling it (~7 s), and
    # spells and splits in Python (spell.UNLOADED_LINES): nothing said, nothing cached or built;
    # with the kernels built (toktok.ahead), the compiled loop and export without Numba, the same files
    cmd = [sys.executable, "-m", "toktok.cli", "train", str(FIXTURES), "--merges", "8000", "--force"]
    cold = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "cold")}
    first = subprocess.run(cmd + ["--out", str(tmp_path / "py")], cwd=ROOT, env=cold, capture_output=True,
                           text=True, timeout=900)
    assert first.returncode == 0, first.stderr[-2000:]
    assert NOTICE not in first.stderr
    assert not list((tmp_path / "cold").rglob("*.nbc")) and not _units_built(tmp_path / "cold")
    warm = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "warm")}
    from toktok.prebuilt import STAGES

    subprocess.run([sys.executable, "-m", "toktok.ahead", "_scan_into", *STAGES], cwd=ROOT, env=warm, check=True,
                   timeout=900)
    code = ("import sys, toktok; from toktok.merge import loop\n"
            f"toktok.train([{str(FIXTURES)!r}], out={str(tmp_path / 'loop')!r}, merges=8000, verbose=False)\n"
            "print(loop._loop._ahead is not None, 'numba' in sys.modules)")  # the loop was called, without Numba
    assert _py(code, tmp_path / "warm").splitlines()[-1] == "True False"
    for name in ("tokenizer.json", "tokenizer.tiktoken"):
        assert (tmp_path / "py" / name).read_bytes() == (tmp_path / "loop" / name).read_bytes(), name


# --- the kernels a budgeted first run compiles ahead (toktok/ahead.py, toktok/kernels.json) ---

#: Trains under a budget (4GB: the process holds every run before) on text, JSON lines and Parquet
#: (from the bytes alone too, as the bench does: --no-hardcoded),
#: past merge.small, spell.SMALL_LINES and the count's reference (9,000 tokens; the text 11 MB, past
#: REFERENCE_BYTES, so that each pattern's scanner counts it even on an empty cache; the Parquet
#: after them, its scanner cached), with each named pattern and a custom one (the scanner compiled
#: from its regex, toktok.count.rx), then prints the signatures its
#: kernels were called with from Python as JSON (helpers only compiled code calls compile with
#: their callers: left out), whether a module built ahead ran it or Numba.
_RECORD = """
import json, sys
from pathlib import Path
import pyarrow as pa, pyarrow.parquet as pq, toktok
import numba
from toktok import _kernels, prebuilt as ahead
called, _exports = {}, ahead.exports
def exports(name):  # a module's function records its listed signature (ahead.fits: as Numba types the call)
    sigs = [s for n, s in ahead._entries(ahead.unit_of(name)) if n == name]
    def recording(fn, sig):
        def call(*args):
            called.setdefault(name, set()).add(sig)
            return fn(*args)
        return call
    return [(types, recording(fn, sig)) for (types, fn), sig in zip(_exports(name), sigs)]
ahead.exports = exports
fixtures, d = Path(sys.argv[1]), Path(sys.argv[2])
CAMEL = r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\\p{N}|[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+|\\p{L}+"  # a custom one
texts = pq.read_table(fixtures / "sample.parquet", columns=["text"]).column(0).to_pylist() * 18
pq.write_table(pa.table({"text": pa.array(texts, pa.large_string())}), d / "a.parquet")
pq.write_table(pa.table({"text": pa.array(texts, pa.string())}), d / "b.parquet")
(d / "c.txt").write_text("\\n".join(t.replace("\\n", " ") for t in texts), encoding="utf-8")
(d / "d.jsonl").write_text("".join(json.dumps({"text": t}) + "\\n" for t in texts), encoding="utf-8")
for src, pattern, hardcoded in (("c.txt", None, None), ("d.jsonl", None, None), ("a.parquet", None, None),
                                ("b.parquet", None, None), ("b.parquet", None, False), ("c.txt", "o200k", None),
                                ("c.txt", "gpt2", None), ("c.txt", "qwen2", None), ("a.parquet", CAMEL, None)):
    toktok.train([str(d / src)], out=str(d / "out"), vocab_size=9000, budget="4GB", pattern=pattern,
                 hardcoded=hardcoded, force=True, verbose=False)
_kernels.load()  # (every kernel's dispatcher: those called with other types hold their signatures)
used = {k: sorted(v) for k, v in called.items()}
for name, module in sorted(sys.modules.items()):
    if not name.startswith("toktok") or module is None:
        continue
    for value in vars(module).values():
        if (isinstance(value, numba.core.dispatcher.Dispatcher) and value.signatures
                and not value.targetoptions.get("no_cpython_wrapper")):
            key = f"{value.py_func.__module__}.{value.py_func.__name__}"
            used[key] = sorted(set(used.get(key, [])) |
                               {f"{s} -> {value.overloads[s].signature.return_type!r}" for s in value.signatures})
print(json.dumps(used))
"""


def _recorded(tmp: Path) -> dict[str, list[str]]:
    # an empty cache: the runs compute the pre-tokenizers' class tables, as a first run on a new
    # machine does (with the tables cached by an earlier test, their kernels went unrecorded)
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp / "cache")}
    r = subprocess.run([sys.executable, "-c", _RECORD, str(FIXTURES), str(tmp)], cwd=ROOT, capture_output=True,
                       text=True, timeout=900, env=env)
    assert r.returncode == 0, r.stderr[-2000:]
    return json.loads(r.stdout.splitlines()[-1])


@pytest.mark.slow
def test_a_first_run_under_a_budget_compiles_its_kernels_first_and_never_again(tmp_path):
    # past a tiny run: the run's units are built first, in toktok.ahead's processes, said once,
    # and the run calls them: had it called one with other types, Numba would have compiled it;
    # the same tokenizer as a first run without a budget
    from toktok.prebuilt import listed

    base = [sys.executable, "-m", "toktok.cli", "train", str(_four_times(tmp_path)), "--merges", "300", "--force"]
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "numba")}
    r = subprocess.run(base + ["--out", str(tmp_path / "budget"), "--budget", "512MB"], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stderr.count(NOTICE) == 1 and "before the run starts: inside the memory budget" in r.stderr
    assert _units_built(tmp_path / "numba") == ["_scan_into", "count", "formats", "merge"]
    # the run called the modules: Numba's cache holds none of the kernels it calls
    names = [k for k in listed() if "scan.cl100k._scan_into" in k or ".merge.loop." in k or "sample._pieces" in k]
    code = ("import importlib; from toktok import _kernels; _kernels.load(); print(*(len(getattr(importlib."
            "import_module(n.rpartition('.')[0]), n.rpartition('.')[2])._cache._cache_file._load_index()) for n in %r))"
            % (names,))
    assert [int(x) for x in _py(code, tmp_path / "numba").split()] == [0] * len(names)
    free = subprocess.run(base + ["--out", str(tmp_path / "free"), "-q"], cwd=ROOT,
                          env={**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "other")}, capture_output=True,
                          text=True, timeout=900)
    assert free.returncode == 0, free.stderr[-2000:]
    for name in ("tokenizer.json", "tokenizer.tiktoken"):
        assert (tmp_path / "budget" / name).read_bytes() == (tmp_path / "free" / name).read_bytes(), name


def _children(pid: int) -> list[int]:
    """The live processes whose parent is ``pid`` (Linux's /proc)."""
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            state, ppid = stat.read_text().rpartition(")")[2].split()[:2]
        except OSError:
            continue
        if int(ppid) == pid and state != "Z":
            out.append(int(stat.parent.name))
    return out


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the compiler ends with its run on Linux")
def test_a_run_killed_while_its_kernels_compile_leaves_no_compiler(tmp_path):
    # kill -9 of a budgeted first run while toktok.ahead compiles: the compiler goes with it
    # (_kernels.end_with_parent)
    import time

    cmd = [sys.executable, "-m", "toktok.cli", "train", str(_four_times(tmp_path)), "--merges", "300",
           "--out", str(tmp_path / "tok"), "--budget", "512MB", "-q"]
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "numba")}
    run = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline, kids = time.monotonic() + 120, []
    while not kids and time.monotonic() < deadline and run.poll() is None:
        kids = _children(run.pid)
        time.sleep(0.05)
    assert kids, "no compiling process was seen"
    time.sleep(1)
    run.kill()
    run.wait()
    deadline = time.monotonic() + 10
    while any(map(_alive, kids)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(map(_alive, kids))
    # killed before its run file was opened: nothing staged, so a plain rerun runs
    again = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert again.returncode == 0, again.stderr[-2000:]
    assert (tmp_path / "tok" / "tokenizer.json").exists()


def test_the_kernels_listed_ahead_are_typed_as_runs_call_them(tmp_path):
    # a budgeted first run compiles the listed signatures before it starts (toktok.ahead); a run
    # calling a kernel with other types would compile it in its own process, over the budget
    from toktok.prebuilt import listed

    used, ahead = _recorded(tmp_path), listed()  # (each "(arguments) -> return type")
    assert {"toktok.count.scan.cl100k._scan_into", "toktok.merge.loop._loop", "toktok.formats.spell._lines",
            "toktok.count.sample._pieces", "toktok.count.rx.vm._count_kernel"} <= set(used)
    missing = {k: [s for s in v if not _covered(s, ahead.get(k, []))] for k, v in used.items()}
    missing = {k: v for k, v in missing.items() if v}
    assert not missing, f"kernels.json lacks {missing}: write it again with `python tests/test_cold_start.py`"


def _covered(sig: str, listed_sigs: list[str]) -> bool:
    """Whether a run's signature ``sig`` runs a listed one: the same, or one whose read-only array
    parameters the run passes writable (``prebuilt.fits``: Arrow's buffers are writable, Polars'
    are not, and one listed version serves both), never the other way round."""
    from toktok.prebuilt import _argument_types

    def same(used, listed):
        if type(used) is not tuple or type(listed) is not tuple:
            return used == listed
        return used[:3] == listed[:3] and (used[3] == listed[3] or listed[3])

    args, ret = _argument_types(sig), sig.partition(" -> ")[2]
    return any(ret == other.partition(" -> ")[2] and len(args) == len(theirs := _argument_types(other))
               and all(same(u, t) for u, t in zip(args, theirs)) for other in listed_sigs)


def test_a_writable_array_is_covered_by_a_read_only_listed_one_never_the_reverse():
    ro = "(Array(uint8, 1, 'C', True, aligned=True), int64) -> int64"
    rw = "(Array(uint8, 1, 'C', False, aligned=True), int64) -> int64"
    assert _covered(rw, [ro]) and _covered(ro, [ro]) and not _covered(ro, [rw])
    assert not _covered(rw.replace("uint8", "int64"), [ro]) and not _covered(rw.replace("-> int64", "-> bool"), [ro])


if __name__ == "__main__":  # writes toktok/kernels.json: what the runs above call, and what it lists already
    import tempfile

    from toktok.prebuilt import LIST, listed

    with tempfile.TemporaryDirectory() as tmp:
        found = _recorded(Path(tmp))
    old = listed() if LIST.exists() else {}
    merged = {k: sorted(set(old.get(k, [])) | set(found.get(k, []))) for k in sorted(set(old) | set(found))}
    LIST.write_text(json.dumps(merged, indent=1) + "\n", encoding="utf-8")
    print(f"{LIST}: {sum(map(len, merged.values()))} signatures of {len(merged)} kernels")


# --- the modules built ahead (toktok/ahead.py): called for exactly the types Numba would compile ---

def test_a_module_function_is_called_only_for_the_types_numba_would_give_its_arguments():
    # ahead.fits stands in for Numba's typeof: a listed signature's function runs only where
    # Numba would have typed the arguments as listed (else Numba compiles them), a writable array
    # also where the parameter is read-only (the function only reads it), never the reverse
    import numpy as np
    from numba import typeof, types

    from toktok.prebuilt import _argument_types, fits, listed

    names = {n: getattr(types, n) for n in dir(types) if not n.startswith("_")}
    ro = np.arange(6, dtype=np.uint8)
    ro.setflags(write=False)
    values = [np.zeros(4, np.uint8), ro, np.zeros(4, np.int64), np.zeros((3, 2), np.int64),
              np.zeros((3, 2), np.int32), np.zeros(8, np.uint8)[::2], np.zeros(4, np.dtype(">i8")),
              np.zeros((2, 3), np.int64).T, np.zeros(3, np.uint32), np.zeros(3, bool),
              3, True, np.int64(3), np.uint64(3), np.int32(3), np.bool_(False), 2.5]
    seen = 0
    for sigs in listed().values():
        for sig in sigs:
            want = eval(sig.partition(" -> ")[0], {"__builtins__": {}}, names)  # noqa: S307
            spec = _argument_types(sig)
            for i in range(len(want)):
                for v in values:
                    args = [None] * len(want)
                    args[i] = v
                    try:
                        by_numba = typeof(v) == want[i] or (
                            isinstance(v, np.ndarray) and v.flags.writeable and isinstance(want[i], types.Array)
                            and typeof(v).copy(readonly=True) == want[i])
                    except Exception:  # a dtype Numba does not type (big-endian): it compiles nothing for it
                        by_numba = False
                    spec_i = spec[:i] + spec[i + 1:]
                    rest = [a for j, a in enumerate(args) if j != i]
                    assert fits((spec[i],), (v,)) == by_numba, (sig, i, v)
                    assert not fits(spec_i, rest) or not spec_i  # None fits nothing
                    seen += by_numba
    assert seen > 50


def test_whether_the_kernels_are_built_is_asked_without_numba(tmp_path):
    # the first-run check (ahead.cached) and a small run's (_kernels.compiled) import no Numba
    # where the modules are built; on an empty cache the first says no, still without Numba
    code = ("import sys; from toktok import ahead, patterns; print(ahead.cached(patterns.DEFAULT), "
            "'numba' in sys.modules)")
    assert _py(code, tmp_path / "empty") == "False False"


def test_a_build_removes_what_killed_builds_and_other_code_left_once_a_day_old(tmp_path):
    # a build killed by kill -9 leaves its empty .build-* folder; modules of another key may be
    # another install's, sharing the folder: both go once a day old, nothing fresh is touched
    from toktok import ahead

    target = tmp_path / "merge-aaaa.so"
    names = ["merge-aaaa.so", "merge-old.so", "merge-new.so", "count-old.so", ".build-old", ".build-new"]
    for name in names:
        (tmp_path / name).mkdir() if name.startswith(".build") else (tmp_path / name).write_bytes(b"x")
    day_ago = ahead.time.time() - ahead._STALE_SECONDS - 60
    for name in ("merge-old.so", "count-old.so", ".build-old"):
        os.utime(tmp_path / name, (day_ago, day_ago))
    os.utime(target, (day_ago, day_ago))  # the module just built is kept however old
    ahead._tidy(target)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        ["merge-aaaa.so", "merge-new.so", "count-old.so", ".build-new"])


_MASKED = r"""
import sys
from toktok.cli import _NoPandas
sys.meta_path.insert(0, _NoPandas())  # (as toktok train keeps pandas out: toktok.cli._without_pandas)
import numpy as np
import pyarrow as pa
from toktok.count.tables import word_documents
from toktok.store import arrow_of
from toktok.insight.runfile import top_rows
from toktok.merge import learn
from toktok.vocab import Vocab

learn.FILL_POSITIONS = 4  # (the position array filled in two parts, as a large table's is)
words = pa.array([b"hello", b" world", b" hello", b"!"] * 50, pa.binary())
counts = np.arange(1, 201, dtype=np.int64)
word_documents(words, counts, 0)
top_rows(words, counts, 10)
learn.lay_out(words.to_pylist(), counts, Vocab.base(False), 20, threads=2)
pa.table({"word": words, "count": arrow_of(counts)})
print("numpy.ma" in sys.modules)
"""


def test_numpy_masked_arrays_are_not_imported_on_the_way_to_the_loop():
    """What a run does before its merge loop (and beside its first rounds) never imports
    ``numpy.ma`` (~15 ms holding the GIL): ``pa.array`` of a NumPy array and ``np.unique`` do;
    it is imported beside the loop instead (``toktok.later``)."""
    r = subprocess.run([sys.executable, "-c", _MASKED], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.strip() == "False"
    # and what does import it, as a check that this one can fail
    r = subprocess.run([sys.executable, "-c", "import sys, numpy as np, pyarrow as pa; pa.array(np.arange(3)); "
                        "print('numpy.ma' in sys.modules)"], capture_output=True, text=True, timeout=60)
    assert r.stdout.strip() == "True"


_COMPUTE = r"""
import sys
from toktok.count import early
early.read_soon(sys.argv[1])  # (as the command does, from its start)
from toktok.count import tables
from toktok.patterns import DEFAULT
checked = []
check = tables._check_pieces
tables._check_pieces = lambda *a: (checked.append(a), check(*a))[1]
got = tables.read_counts([sys.argv[1]], pattern=DEFAULT)
print(got.words.num_rows, len(checked), "pyarrow._compute" in sys.modules)
"""


def test_toktoks_own_word_counts_are_read_without_arrows_compute_functions(tmp_path):
    """A table ``toktok count`` wrote, read from the command's start (``count.early``), is taken as
    written (its words not cut again) without ``pyarrow._compute`` (4-9 ms holding the GIL beside
    the run's start, for an order check its seal makes needless); its rows moved, it is checked."""
    import pyarrow.parquet as pq

    own = tmp_path / "c.parquet"
    r = subprocess.run([sys.executable, "-m", "toktok", "count", str(FIXTURES / "sample.parquet"), "--out", str(own),
                        "-q"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    moved = tmp_path / "moved.parquet"
    t = pq.read_table(own)
    pq.write_table(t.take(list(range(t.num_rows))[::-1]), moved)
    got = {}
    for f in (own, moved):
        r = subprocess.run([sys.executable, "-c", _COMPUTE, str(f)], cwd=ROOT, capture_output=True, text=True,
                           timeout=300)
        assert r.returncode == 0, r.stderr[-2000:]
        got[f.name] = r.stdout.split()
    assert got["c.parquet"] == [str(t.num_rows), "0", "False"]
    assert got["moved.parquet"][:2] == [str(t.num_rows), "1"]  # (read as anyone's: its words checked)
