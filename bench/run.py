#!/usr/bin/env python
"""Benchmark: toktok vs Hugging Face ``tokenizers``, ``rustbpe``, ``bpeasy`` and ``ffbpe`` on the same Parquet files.

    python bench/run.py [--data GLOB...] [--vocab 32768 131072] [--repeat 3] [--count-runs 7]
                        [--only toktok,hf,rustbpe,bpeasy,ffbpe,count,cold] [--threads N] [--json OUT]
                        [--slice-mb 100]
                        [--patterns cl100k,o200k,gpt2,qwen2,deepseek_v3,custom,camel] [--train-pattern camel]

Every trainer runs in its own subprocess (``bench/run.py --worker NAME ...``) so that one
trainer's allocator state, thread pools and page-cache habits never leak into another's figures.
The parent measures wall time and samples the RSS of the worker's whole process tree every 50 ms;
the worker reports what only it can see (toktok's stage times, vocabulary size, the tokens) in a
JSON file. All the trainers learn a byte-level BPE with the GPT-4 pre-tokenizer pattern
(``toktok.vocab.PATTERN``) up to the same vocabulary size: 256 byte tokens + ``vocab - 256``
merges, no special tokens (``--train-pattern custom|camel``: with that custom regex instead, for
every trainer). See bench/README.md for how to read the output.
"""
from __future__ import annotations

import argparse
import base64
import gc
import glob
import importlib.util
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from pathlib import Path

import history

REPO = Path(__file__).resolve().parent.parent
DEFAULT_DATA = str(REPO.parent / "shared" / "corpus" / "*.parquet")


def corpus_files() -> list[str]:
    """The bench corpus's Parquet files: ``shared/corpus`` beside the checkout, or beside the
    folder of a worktree that sits one level deeper."""
    for root in (REPO.parent, REPO.parent.parent):
        found = sorted(glob.glob(str(root / "shared" / "corpus" / "*.parquet")))
        if found:
            return found
    return []
TEXT_COLUMN = "text"
TRAINERS = ("toktok", "hf", "rustbpe", "bpeasy", "ffbpe")
PEERS = ("rustbpe", "bpeasy", "ffbpe", "hf")
#: The peers installed from PyPI by the bench extra, reported "unavailable" where missing.
OPTIONAL = ("rustbpe", "bpeasy", "ffbpe")
# bpeasy's longest token (it requires one); toktok and the other peers have none.
BPEASY_MAX_TOKEN = 1024
JOBS = TRAINERS + ("count", "cold")
# The stages after the merge loop; their share of toktok's wall is one of the bench's figures.
TAIL = ("export", "verify", "insight")
# The README's demo (`make demo`), trained from an empty kernel cache for the cold-start row.
DEMO = ["train", str(REPO / "data_fixtures" / "corpus"), "--merges", "2000", "--special-token", "<|endoftext|>",
        "--force", "-q"]
SAMPLE_SECONDS = 0.05
# The patterns counted beside cl100k (``--only count``): the named ones, and two custom regexes
# (counted by the scanner toktok compiles from them, docs/patterns.md): bpeasy's split (letters with
# their marks, numbers of up to 4 digits) and a camelCase-aware split for code (acronyms apart from
# the word after them, single digits). ``NAME-rx`` (cl100k-rx, ...): a named pattern counted by the
# scanner compiled from its regex instead of its own, to compare the two.
CUSTOM_PATTERN = r"""(?:[\p{L}\p{M}]+|\p{N}{1,4}|[^\s\p{L}\p{N}\p{M}]+)|\s+"""
CAMEL_PATTERN = r"""[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\p{N}|[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+|\p{L}+"""
CUSTOM = {"custom": CUSTOM_PATTERN, "camel": CAMEL_PATTERN}
# A regex outside the compiled subset, counted by PCRE2's JIT (docs/patterns.md): cl100k's split with
# runs of one punctuation char (``----``, ``!!!``, ``===``) kept whole, by a backreference.
BACKREF_PATTERN = (r"""'(?i:[sdmt]|ll|ve|re)|([^\s\p{L}\p{N}])\1+|[^\r\n\p{L}\p{N}]?+\p{L}+|\p{N}{1,3}"""
                   r"""| ?[^\s\p{L}\p{N}]++[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+""")
OUTSIDE = {"backref": BACKREF_PATTERN}
PATTERNS = ("cl100k", "o200k", "gpt2", "qwen2", "deepseek_v3", "custom", "camel", "backref")
COMPILED = tuple(f"{n}-rx" for n in ("cl100k", "o200k", "gpt2", "qwen2"))
# Runs of a pattern counted through the regex package (at most): it counts ~10x slower.
CUSTOM_RUNS = 3
# Documents per Arrow batch when feeding HF and rustbpe. Small enough that reading never holds
# more than a few MB of text; the trainers buffer internally anyway (rustbpe: 8192 texts).
READ_BATCH_ROWS = 1024


# --- workers: each runs in a fresh process and writes one JSON result ------------------------


def iter_texts(files: list[str]):
    """The documents of ``files``, one str at a time, read in Arrow batches.

    HF and rustbpe both get exactly this generator, so Parquet decoding is inside their wall
    time as it is inside toktok's (toktok reads the files itself).
    """
    import pyarrow.parquet as pq

    for path in files:
        pf = pq.ParquetFile(path)
        for batch in pf.iter_batches(batch_size=READ_BATCH_ROWS, columns=[TEXT_COLUMN]):
            for text in batch.column(0).to_pylist():
                if text is not None:
                    yield text


def _train_regex() -> str:
    """The pattern every trainer splits with (BENCH_TRAIN_PATTERN: cl100k, or a name of ``CUSTOM``)."""
    from toktok.vocab import PATTERN

    return CUSTOM.get(os.environ.get("BENCH_TRAIN_PATTERN", "cl100k"), PATTERN)


def work_toktok(files: list[str], vocab: int, threads: int, scratch: str) -> dict:
    # as the ``toktok`` command runs (toktok.cli.main, train): Polars' and Arrow's allocators set
    # before they load, pandas kept out of the run
    from toktok.alloc import arrow_gives_back, polars_gives_back

    polars_gives_back()
    arrow_gives_back()
    from toktok.cli import _without_pandas
    from toktok.config import TrainConfig
    from toktok.pipeline import train

    out = Path(scratch) / "toktok-out"
    # Same semantics as `toktok train DATA --out TMP --merges (vocab-256) --no-hardcoded --force -q`:
    # starting from the 256 bytes only, so the vocabulary size matches the peers'.
    cfg = TrainConfig(sources=files, out=str(out), merges=vocab - 256, hardcoded=False, force=True,
                      threads=threads, pattern=_train_regex())
    t0 = time.perf_counter()
    with _without_pandas(cfg):
        s = train(cfg)
    train_s = time.perf_counter() - t0
    tokens = []
    with open(out / "tokenizer.tiktoken") as fh:
        for line in fh:
            if line.strip():
                tokens.append(base64.b64decode(line.split()[0]).hex())
    return {
        "vocab_size": s.vocab_size, "merges": s.merges_learned, "train_s": train_s,
        "stages_s": s.seconds, "words": s.words, "docs": s.docs, "text_bytes": s.text_bytes,
        "warnings": s.warnings, "tokens": tokens, "counted_by": s.counted_by,
    }


def work_hf(files: list[str], vocab: int, threads: int, scratch: str) -> dict:
    import tokenizers
    from tokenizers import Regex, Tokenizer, models, pre_tokenizers, trainers

    PATTERN = _train_regex()

    tok = Tokenizer(models.BPE())
    # The GPT-4 split, then bytes -> printable chars with no regex of ByteLevel's own: the same
    # recipe toktok's export writes into tokenizer.json.
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(PATTERN), "isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    trainer = trainers.BpeTrainer(vocab_size=vocab, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), special_tokens=[])
    t0 = time.perf_counter()
    tok.train_from_iterator(iter_texts(files), trainer=trainer)
    train_s = time.perf_counter() - t0
    from toktok.formats.hf import bytes_to_unicode

    to_byte = {c: b for b, c in bytes_to_unicode().items()}
    tokens = [bytes(to_byte[c] for c in s).hex() for s in tok.get_vocab()]
    return {"vocab_size": tok.get_vocab_size(), "merges": tok.get_vocab_size() - 256, "train_s": train_s,
            "version": tokenizers.__version__, "tokens": tokens}


def _peer(name: str):
    """The peer trainer's module and version; exit code 3 ("not available" rather than
    "crashed") when it cannot be imported."""
    import importlib
    from importlib.metadata import version

    try:
        return importlib.import_module(name), version(name)
    except ImportError as e:
        print(f"{name} cannot be imported: {e}", file=sys.stderr)
        sys.exit(3)


def work_rustbpe(files: list[str], vocab: int, threads: int, scratch: str) -> dict:
    PATTERN = _train_regex()

    rustbpe, ver = _peer("rustbpe")
    tok = rustbpe.Tokenizer()
    # rustbpe's default pattern is a variant (possessive quantifiers, \s*[\r\n] instead of
    # \s*[\r\n]+); pass PATTERN so all three split text identically.
    t0 = time.perf_counter()
    tok.train_from_iterator(iter_texts(files), vocab, pattern=PATTERN)
    train_s = time.perf_counter() - t0
    tokens = [bytes(b).hex() for b, _ in tok.get_mergeable_ranks()]
    return {"vocab_size": tok.vocab_size, "merges": tok.vocab_size - 256, "train_s": train_s,
            "version": ver, "pattern_used": tok.get_pattern(), "tokens": tokens}


def work_bpeasy(files: list[str], vocab: int, threads: int, scratch: str) -> dict:
    PATTERN = _train_regex()

    bpeasy, ver = _peer("bpeasy")
    t0 = time.perf_counter()
    ranks = bpeasy.train_bpe(iter_texts(files), PATTERN, BPEASY_MAX_TOKEN, vocab)
    train_s = time.perf_counter() - t0
    return {"vocab_size": len(ranks), "merges": len(ranks) - 256, "train_s": train_s, "version": ver,
            "tokens": [bytes(t).hex() for t in ranks]}


def work_ffbpe(files: list[str], vocab: int, threads: int, scratch: str) -> dict:
    """ffbpe: its pre-tokenizer's word counter over the documents (the same generator as the other
    peers), then its trainer from the 256 bytes, no special tokens."""
    PATTERN = _train_regex()

    ffbpe, ver = _peer("ffbpe")
    t0 = time.perf_counter()
    counter = ffbpe.PreTokenizer([], pat_str=PATTERN).word_counter()
    counter.add_source(iter_texts(files))
    trainer = ffbpe.BpeTrainer([])
    trainer.add_word_counter(counter)
    trainer.train(vocab)
    train_s = time.perf_counter() - t0
    tokens = [bytes(t).hex() for t in trainer.vocab]
    return {"vocab_size": trainer.vocab_size, "merges": trainer.vocab_size - 256, "train_s": train_s,
            "version": ver, "tokens": tokens}


def slice_corpus(files: list[str], mb: int, scratch: str) -> list[str]:
    """The first rows of each file, each file's share of ``mb`` MB of text in proportion to its
    own (the same mix of sources as the whole), as Parquet files in ``scratch``."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    tables = [pq.read_table(f, columns=[TEXT_COLUMN]) for f in files]
    sizes = [int(pc.sum(pc.binary_length(t.column(0))).as_py() or 0) for t in tables]
    total, want = sum(sizes), mb * 10**6
    out = []
    for f, t, size in zip(files, tables, sizes):
        share = want * size // total
        lengths = pc.binary_length(t.column(0)).to_numpy(zero_copy_only=False)
        import numpy as np

        rows = int(np.searchsorted(np.cumsum(lengths), share)) + 1
        dest = Path(scratch) / f"slice-{Path(f).stem}.parquet"
        pq.write_table(t.slice(0, min(rows, t.num_rows)), dest)
        out.append(str(dest))
    return out


def _bench_pattern():
    """The pattern a count worker counts (BENCH_PATTERN: a name of ``PATTERNS`` or ``COMPILED``;
    cl100k by default)."""
    from toktok import patterns

    name = os.environ.get("BENCH_PATTERN", "cl100k")
    if name.endswith("-rx"):  # a named pattern's regex as a custom one: the compiled scanner counts it
        regex = patterns.NAMED[name[:-3]].regex
        return patterns.Pattern("custom", regex, regex)
    if name in OUTSIDE:  # (refused by --pattern's check: a backreference)
        return patterns.Pattern("custom", OUTSIDE[name], OUTSIDE[name])
    return patterns.resolve(CUSTOM.get(name, name))


def work_count(files: list[str], vocab: int, threads: int, scratch: str) -> dict:
    """toktok's counting alone, as a run counts (one ``WordCounter`` over every batch, its
    per-thread tables merged once at the end), timed without the reading (done first) and
    without loading the kernels from Numba's cache (once per process, ~0.3 s, whatever the
    corpus: ``load_s``). ``result_s``: the ``result()`` call (waiting for the last batch's
    counting, the merge and the export). The pattern is BENCH_PATTERN's (``_bench_pattern``)."""
    import polars as pl

    from toktok.count.scan import WordCounter
    from toktok.count.read import read_corpus

    pattern = _bench_pattern()
    t0 = time.perf_counter()
    warm = WordCounter(threads=threads, pattern=pattern)
    warm.add(["Loading the kernels, 12 times over."] * 64)
    warm.result()
    load_s = time.perf_counter() - t0
    # read first: the counter's threads count in the background of add(), so reading between
    # the batches would overlap with (and compete with) the counting being timed
    texts = [batch.texts for batch in read_corpus(files, text_column=TEXT_COLUMN).batches()]
    import pyarrow.compute as pc

    nbytes = sum(int(pc.sum(pc.binary_length(t)).as_py() or 0) for t in texts)  # (a batch's texts: Arrow)
    if together := os.environ.get("BENCH_COUNT_TOGETHER"):  # "FOLDER:N": start with N-1 other workers
        folder, n = together.rsplit(":", 1)
        Path(folder, str(os.getpid())).touch()
        give_up = time.monotonic() + 600  # a worker that failed to start must not hold the others
        while len(os.listdir(folder)) < int(n) and time.monotonic() < give_up:
            time.sleep(0.001)
    counter = WordCounter(threads=threads, pattern=pattern)
    t0 = time.perf_counter()
    for t in texts:
        counter.add(t)
    t1 = time.perf_counter()
    words = counter.result()
    secs = time.perf_counter() - t0
    merge_s = time.perf_counter() - t1
    return {"threads": threads or pl.thread_pool_size(), "polars_threads": pl.thread_pool_size(),
            "count_s": secs, "result_s": merge_s, "load_s": load_s, "text_bytes": nbytes,
            "mb_per_s": nbytes / 1e6 / secs if secs else None, "words": words.height,
            "pattern": pattern.name if pattern.named else "custom", "engine": _engine(pattern)}


def _engine(pattern) -> str:
    """How toktok counts ``pattern``: its own scanner, the one compiled from its regex, PCRE2's JIT,
    or regex."""
    from toktok.count.scan import count_path

    path = count_path(pattern)
    return ("scanner" if path.startswith("its own") else "compiled" if path.startswith("the scanner")
            else "pcre" if path.startswith("PCRE2") else "regex")


def work_warmup(files: list[str], vocab: int, threads: int, scratch: str) -> dict:
    """The kernels built ahead (``toktok.ahead``) and a tiny toktok run before the timed runs (a
    fresh checkout would otherwise charge the one-time build to the first timed run)."""
    from toktok import ahead
    from toktok.config import TrainConfig
    from toktok.pipeline import train

    ahead.main(["all"])
    src = Path(scratch) / "warmup.txt"
    src.write_text("The quick brown fox jumps over the lazy dog, 1234 times!\n  isn't it?\n" * 200)
    train(TrainConfig(sources=[str(src)], out=str(Path(scratch) / "warmup-out"), merges=100,
                      hardcoded=False, force=True))
    shutil.rmtree(Path(scratch) / "warmup-out", ignore_errors=True)
    return {}


WORKERS = {"toktok": work_toktok, "hf": work_hf, "rustbpe": work_rustbpe, "bpeasy": work_bpeasy, "ffbpe": work_ffbpe,
           "count": work_count, "warmup": work_warmup}


def worker_main(a: argparse.Namespace) -> None:
    res = WORKERS[a.worker](a.data, a.vocab, a.threads, a.scratch)
    res["maxrss"] = own_peak()
    Path(a.result).write_text(json.dumps(res))
    gc.freeze()  # every worker ends as the ``toktok`` command does (toktok.cli.main)


def own_peak() -> int:
    """The kernel's peak RSS of the largest process of this worker's tree, in bytes: its own
    memory's high-water mark (VmHWM), or a child's peak if larger. Not ``ru_maxrss`` of the
    worker itself or the bench's ``wait4``: a process started by vfork and exec (``subprocess``)
    inherits the peak of its parent's memory at the exec, so the worker's figure held the bench
    process's own peak (656 MB for a toktok run whose own peak was 416 MB)."""
    import resource

    with open("/proc/self/status") as fh:
        hwm = next(int(line.split()[1]) for line in fh if line.startswith("VmHWM:"))
    return max(hwm, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss) * 1024


# --- parent: run workers, sample memory, report ------------------------------------------------


def tree_rss(root) -> int:
    """RSS of ``root`` plus all its descendants, in bytes (processes may vanish mid-walk)."""
    import psutil

    total = 0
    try:
        procs = [root] + root.children(recursive=True)
    except psutil.Error:
        return 0
    for p in procs:
        try:
            total += p.memory_info().rss
        except psutil.Error:
            pass
    return total


def run_worker(job: str, files: list[str], vocab: int, threads: int, scratch: str,
               env_extra: dict[str, str]) -> dict:
    """Run one worker; returns its result plus wall_s, peak_rss (sampled) and maxrss (the
    kernel's, as the worker read it: :func:`own_peak`)."""
    result = Path(scratch) / f"{job}.json"
    log = Path(scratch) / f"{job}.log"
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", job.split(":")[0],
           "--result", str(result), "--scratch", scratch, "--vocab", str(vocab),
           "--threads", str(threads), "--data", *files]
    out = run_measured(cmd, log, env_extra)
    if out["exit_code"] == 0 and result.exists():
        out.update(json.loads(result.read_text()))
        out["status"] = "ok"
    else:
        out["status"] = "unavailable" if out["exit_code"] == 3 else "failed"
        out["error"] = "\n".join(log.read_text(errors="replace").splitlines()[-40:])
    return out


def count_together(n: int, files: list[str], vocab: int, scratch: str, env: dict[str, str]) -> dict:
    """n 1-thread count workers whose counting starts at once (each waits for the others once it
    has read the corpus): what n cores give n independent countings on this machine (they share
    only the machine: caches, memory, the host's other tenants), the ceiling for n threads.
    count_s: the last one's time; runs_each_s: each one's."""
    from concurrent.futures import ThreadPoolExecutor

    folder = tempfile.mkdtemp(dir=scratch)
    extra = {**env, **thread_env(1), "BENCH_COUNT_TOGETHER": f"{folder}:{n}"}
    with ThreadPoolExecutor(n) as ex:
        runs = list(ex.map(lambda k: run_worker(f"count:1:together{k}", files, vocab, 1, scratch, extra), range(n)))
    if bad := [r for r in runs if r["status"] != "ok"]:
        return bad[0]
    return {"status": "ok", "workers": n, "count_s": max(r["count_s"] for r in runs),
            "runs_each_s": [r["count_s"] for r in runs]}


def run_measured(cmd: list[str], log: Path, env_extra: dict[str, str]) -> dict:
    """Run ``cmd`` with its output in ``log``: wall_s, peak_rss of its process tree (sampled),
    maxrss (``wait4``'s: the peak of its largest process, or of this process at the exec, which a
    child started by vfork inherits; a worker's result holds its own, :func:`own_peak`) and exit_code."""
    import psutil

    env = {**os.environ, **env_extra}
    with open(log, "wb") as fh:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, env=env, cwd=REPO)
        root = psutil.Process(proc.pid)
        peak = 0
        # os.wait4 instead of Popen.poll: it also returns the child's rusage (a worker reports its
        # own peak instead: see own_peak). It waits in a thread, so that the wall ends when the child does, not at the next
        # sample (a 0.2 s row read up to 50 ms long).
        ended: dict = {}

        def wait() -> None:
            ended["wait4"] = os.wait4(proc.pid, 0)
            ended["t"] = time.perf_counter()

        waiter = threading.Thread(target=wait, daemon=True)
        waiter.start()
        while waiter.is_alive():
            peak = max(peak, tree_rss(root))
            waiter.join(SAMPLE_SECONDS)
        _pid, status, usage = ended["wait4"]
        wall = ended["t"] - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
    return {"wall_s": wall, "peak_rss": peak, "maxrss": usage.ru_maxrss * 1024, "exit_code": proc.returncode}


def median_by(runs: list[dict], key: str) -> dict:
    """The run of median ``key`` (a failed run if any), with every run's ``key`` in ``runs_<key>``."""
    bad = [r for r in runs if r["status"] != "ok"]
    if bad:
        return bad[0]
    out = dict(sorted(runs, key=lambda r: r[key])[(len(runs) - 1) // 2])
    out[f"runs_{key}"] = [r[key] for r in runs]
    return out


def median_of(runs: list[dict]) -> dict:
    """One trainer's figure from its repeated runs: the run of median wall time (``median_by``),
    with the median peak RSS beside it and every run's peak kept (``runs_peak_rss``). A failed
    run makes the figure that run's (failures are not averaged away)."""
    import statistics

    out = median_by(runs, "wall_s")
    if out["status"] == "ok":
        out["peak_rss"] = statistics.median_low(r["peak_rss"] for r in runs)
        out["runs_peak_rss"] = [r["peak_rss"] for r in runs]
    return out


def tail_seconds(tk: dict) -> float:
    """toktok's time after the merge loop: its train time less every stage before export (so what
    runs between the stages the run times, such as publishing, is counted too)."""
    return tk["train_s"] - sum(v for k, v in tk["stages_s"].items() if k not in TAIL)


def cold_start(scratch: str, env: dict[str, str]) -> dict:
    """The README's demo from an empty kernel cache (``NUMBA_CACHE_DIR`` a new folder: every
    kernel compiled, as on the first run after an install), then again with that cache warm."""
    cache = Path(scratch) / "numba-cache"
    cache.mkdir()
    out = {}
    for name in ("cold", "warm"):
        cmd = [sys.executable, "-m", "toktok.cli", *DEMO, "--out", str(Path(scratch) / f"demo-{name}")]
        r = run_measured(cmd, Path(scratch) / f"demo-{name}.log", {**env, "NUMBA_CACHE_DIR": str(cache)})
        if r["exit_code"] != 0:
            r["error"] = "\n".join((Path(scratch) / f"demo-{name}.log").read_text(errors="replace").splitlines()[-40:])
        out[name] = r
    return out


def data_stats(files: list[str]) -> dict:
    """UTF-8 bytes and rows of the text column, and bytes on disk."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    text_bytes = rows = 0
    for path in files:
        for batch in pq.ParquetFile(path).iter_batches(batch_size=4096, columns=[TEXT_COLUMN]):
            col = batch.column(0)
            text_bytes += int(pc.sum(pc.binary_length(col)).as_py() or 0)
            rows += len(col) - col.null_count
    return {"files": files, "text_bytes": text_bytes, "rows": rows,
            "disk_bytes": sum(os.path.getsize(f) for f in files)}


def thread_env(n: int) -> dict[str, str]:
    """Env that caps every thread pool the three trainers use (Polars, Numba, DuckDB reads
    --threads itself; HF tokenizers and rustbpe use rayon's global pool)."""
    if n <= 0:
        return {}
    v = str(n)
    return {"POLARS_MAX_THREADS": v, "NUMBA_NUM_THREADS": v, "RAYON_NUM_THREADS": v,
            "RAYON_RS_NUM_CPUS": v, "OMP_NUM_THREADS": v}


def _fmt(x, spec: str) -> str:
    return "—" if x is None else format(x, spec)


def report(fig: dict) -> None:
    from rich.console import Console
    from rich.markup import escape

    # Not a terminal (make, a log file): rich would wrap at 80 columns and break the table.
    con = Console() if sys.stdout.isatty() else Console(width=120)
    m, d = fig["machine"], fig["data"]
    con.print(f"machine: {m['cores']} cores ({m['physical_cores']} physical), {m['mem_gb']:.0f} GB RAM, "
              f"load average at start {m['load_start']:.2f}; python {m['python']}")
    con.print(f"data: {len(d['files'])} file(s), {d['text_bytes'] / 1e6:,.1f} MB of text "
              f"({d['rows']:,} documents, {d['disk_bytes'] / 1e6:,.1f} MB on disk); "
              f"threads {fig['threads'] or 'all'}; each trainer run {fig['repeat']} time(s), the median shown; "
              f"pattern {fig.get('train_pattern', 'cl100k')}")
    for vocab, per in fig["by_vocab"].items():
        report_vocab(con, int(vocab), per, d)
    c = fig.get("counting")
    if c:
        parts = [f"{r['threads']} thread(s) {r['mb_per_s']:.1f} MB/s (runs "
                 f"{', '.join(f'{x:.2f}' for x in r.get('runs_count_s', [r['count_s']]))} s)"
                 for r in c.values() if r.get("status") == "ok"]
        ok = [r for r in c.values() if r.get("status") == "ok"]
        speedup = f"; speed-up {ok[1]['mb_per_s'] / ok[0]['mb_per_s']:.2f}x (goal >= 1.8x)" if len(ok) == 2 else ""
        if len(ok) == 2 and all("runs_count_s" in r for r in ok):
            pairs = [x / y for x, y in zip(ok[0]["runs_count_s"], ok[1]["runs_count_s"])]
            speedup += f", run by run {min(pairs):.2f}-{max(pairs):.2f}x"
        if len(ok) == 2 and all("load_s" in r for r in ok):
            with_load = [r["count_s"] + r["load_s"] for r in ok]
            speedup += (f"; {with_load[0] / with_load[1]:.2f}x counting the kernels' loading too "
                        f"({ok[0]['load_s']:.2f} and {ok[1]['load_s']:.2f} s, once per process)")
        con.print("toktok counting as a run counts (reading and loading the kernels excluded), median: "
                  + ", ".join(parts) + speedup)
        tog = fig.get("counting_together")
        if tog and tog.get("status") == "ok" and len(ok) == 2:
            n, solo = tog["workers"], ok[0]["count_s"]
            ceiling = n * solo / tog["count_s"]
            con.print(f"the machine's own ceiling: {n} 1-thread countings at once took {tog['count_s']:.2f} s (median; "
                      f"runs {', '.join(f'{x:.2f}' for x in tog['runs_count_s'])} s), one alone {solo:.2f} s: "
                      f"{ceiling:.2f}x; {ok[1]['threads']} threads reach {ok[1]['mb_per_s'] / ok[0]['mb_per_s'] / ceiling:.0%} of it")
    report_patterns(con, fig.get("counting_patterns"))
    for name, r in {**(c or {}), **(fig.get("counting_patterns") or {})}.items():
        if r.get("status") in ("unavailable", "failed"):
            con.print(f"[red]{name} {r['status']}[/] (exit {r['exit_code']}):\n{escape(r['error'])}")
    cold = fig.get("cold_start")
    if cold:
        runs = cold.get("runs_cold_wall_s", [cold["cold"]["wall_s"]])
        if cold["cold"]["exit_code"] == cold["warm"]["exit_code"] == 0:
            con.print(f"cold start (make demo, empty kernel cache), median: {cold['cold']['wall_s']:.1f} s wall "
                      f"(runs {', '.join(f'{x:.1f}' for x in runs)}), then {cold['warm']['wall_s']:.1f} s with "
                      "the cache warm (goal: cold <= 15 s)")
        for name in ("cold", "warm"):
            r = cold[name]
            if r["exit_code"] != 0:
                con.print(f"[red]demo ({name} cache) failed[/] (exit {r['exit_code']}):\n{escape(r['error'])}")


def report_patterns(con, per: dict | None) -> None:
    """One row per pattern: its counting throughput on all cores and its share of cl100k's."""
    if not per:
        return
    from rich.table import Table

    base = per.get("cl100k", {})
    t = Table(title="counting per pattern, all cores (reading and loading the kernels excluded), median")
    for col in ("pattern", "engine", "MB/s", "of cl100k", "runs s", "words"):
        t.add_column(col, justify="left" if col in ("pattern", "engine") else "right")
    for name, r in per.items():
        if r.get("status") != "ok":
            t.add_row(name, r.get("status", "?"), *["—"] * 4)
            continue
        share = (f"{r['mb_per_s'] / base['mb_per_s']:.0%}" if base.get("status") == "ok" else "—")
        t.add_row(name, r.get("engine", "?"), f"{r['mb_per_s']:.1f}", share,
                  ", ".join(f"{x:.2f}" for x in r.get("runs_count_s", [r["count_s"]])), f"{r['words']:,}")
    con.print(t)
    from rich.markup import escape

    con.print("goal: each named pattern >= 80% of cl100k, a custom regex in the compiled subset >= 70%, "
              f"outside it >= 20 MB/s; custom: {escape(CUSTOM_PATTERN)}, camel: {escape(CAMEL_PATTERN)}, "
              f"backref: {escape(BACKREF_PATTERN)}")


def report_vocab(con, vocab: int, per: dict, d: dict) -> None:
    from rich.markup import escape
    from rich.table import Table

    res = per["results"]
    t = Table(title=f"BPE training, vocab {vocab:,}: same data, same pattern, same vocabulary size")
    for col in ("trainer", "vocab", "wall s", "count s", "merge s", "merges/s", "peak RSS MB", "MB/s"):
        t.add_column(col, justify="left" if col == "trainer" else "right")
    for name in TRAINERS:
        r = res.get(name)
        if r is None:
            continue
        if r["status"] != "ok":
            t.add_row(name, r["status"], *["—"] * 6)
            continue
        st = r.get("stages_s", {})
        merge_s = st.get("merge")
        t.add_row(
            name, f"{r['vocab_size']:,}", f"{r['wall_s']:.1f}", _fmt(st.get("count"), ".1f"), _fmt(merge_s, ".1f"),
            _fmt(r["merges"] / merge_s if merge_s else None, ",.0f"), f"{r['peak_rss'] / 1e6:,.0f}",
            f"{d['text_bytes'] / 1e6 / r['wall_s']:.2f}",
        )
    con.print(t)

    tk = res.get("toktok", {})
    if tk.get("status") == "ok":
        st = tk["stages_s"]
        other = tk["wall_s"] - tk["train_s"]
        con.print("toktok wall = " + " + ".join(f"{k} {v:.1f}s" for k, v in st.items())
                  + f" + process start/imports {other:.1f}s (export and verify are extra work the peers skip)")
        tail = tail_seconds(tk)
        con.print(f"toktok tail ({', '.join(TAIL)}): {tail:.1f}s = {tail / tk['wall_s']:.0%} of its wall "
                  f"(goal at 131,072: <= 25%)")
        if len(tk.get("runs_wall_s", [])) > 1:
            con.print("toktok runs: " + ", ".join(f"{w:.1f}s" for w in tk["runs_wall_s"]))
        for w in tk.get("warnings", []):
            con.print(f"[yellow]toktok warning:[/] {escape(w)}")
    for name, r in per["ratios"].items():
        con.print(f"toktok / {name}: wall {r['wall']:.2f}x, peak RSS {r['peak_rss']:.2f}x")
    for name, v in per["overlap"].items():
        con.print(f"tokens in common, {name}: {v['common']:,} of {v['size']:,} ({v['fraction']:.1%})")
    sizes = {r["vocab_size"] for r in res.values() if r.get("status") == "ok" and "vocab_size" in r}
    if len(sizes) > 1:
        con.print(f"[yellow]note:[/] vocabulary sizes differ: {sorted(sizes)}")
    for name, r in res.items():
        if r.get("status") == "unavailable":
            con.print(f"[yellow]{name}: not run[/]: {escape(r['error'].strip())}")
        elif r.get("status") == "failed":
            # escape: tracebacks hold [brackets] that rich would take for markup and drop
            con.print(f"[red]{name} failed[/] (exit {r['exit_code']}):\n{escape(r['error'])}")
        elif r.get("maxrss", 0) > 1.15 * r.get("peak_rss", 0):
            # A spike shorter than the sampling period; the kernel figure is the true peak.
            con.print(f"[yellow]note:[/] {name}: kernel peak RSS {r['maxrss'] / 1e6:,.0f} MB exceeds the sampled "
                      f"{r['peak_rss'] / 1e6:,.0f} MB (short spike between samples)")


def compare(res: dict) -> dict:
    """One vocabulary's results with toktok's ratios to each peer and the tokens they share."""
    per: dict = {"results": res, "ratios": {}, "overlap": {}}
    tk = res.get("toktok", {})
    for name in PEERS:
        r = res.get(name, {})
        if tk.get("status") == "ok" and r.get("status") == "ok":
            per["ratios"][name] = {"wall": tk["wall_s"] / r["wall_s"], "peak_rss": tk["peak_rss"] / r["peak_rss"]}
    if tk.get("status") == "ok":
        per["tail_s"] = tail_seconds(tk)
        per["tail_share"] = per["tail_s"] / tk["wall_s"]
    # Shared tokens: a cheap sanity check that the trainers were set up alike (a wrong pattern or
    # alphabet shows up as a low overlap); exact equality is not expected (tie-breaking differs).
    ok = {n: set(r["tokens"]) for n, r in res.items() if r.get("status") == "ok"}
    for x, y in (("toktok", "hf"), ("toktok", "rustbpe"), ("toktok", "bpeasy"), ("toktok", "ffbpe"), ("hf", "rustbpe"),
                 ("hf", "ffbpe")):
        if x in ok and y in ok:
            common = len(ok[x] & ok[y])
            size = max(len(ok[x]), len(ok[y]))
            per["overlap"][f"{x} & {y}"] = {"common": common, "size": size, "fraction": common / size}
    for r in res.values():
        r.pop("tokens", None)
    return per


def main() -> None:
    ap = argparse.ArgumentParser(description="Train toktok, HF tokenizers, rustbpe, bpeasy and ffbpe on the same data and compare.")
    ap.add_argument("--data", nargs="+", default=[DEFAULT_DATA], metavar="GLOB",
                    help=f"Parquet files or globs with a '{TEXT_COLUMN}' column (default: {DEFAULT_DATA})")
    ap.add_argument("--vocab", type=int, nargs="+", default=[32768, 131072],
                    help="vocabulary sizes, 256 bytes included; one table each (default 32768 131072)")
    ap.add_argument("--repeat", type=int, default=3,
                    help="runs of each trainer per vocabulary, interleaved; the median is shown (default 3)")
    ap.add_argument("--count-runs", type=int, default=7,
                    help="runs of each counting configuration (1 thread, all cores), interleaved; the median "
                         "is shown (default 7: on a shared 2-core machine one pair's ratio moves +-15%%)")
    ap.add_argument("--only", default=",".join(JOBS),
                    help=f"comma-separated subset of {','.join(JOBS)} (count = toktok's 1-thread vs all-core "
                         "counting, cold = the demo from an empty kernel cache)")
    ap.add_argument("--threads", type=int, default=0, help="cap every trainer's threads (0 = all cores)")
    ap.add_argument("--patterns", default=",".join(PATTERNS),
                    help=f"with count: the patterns counted on all cores, one row each (default {','.join(PATTERNS)}; "
                         "'' for none)")
    ap.add_argument("--train-pattern", default="cl100k", choices=["cl100k", *CUSTOM],
                    help="the pattern every trainer splits with (default cl100k; custom, camel: the regexes of "
                         "the count table, which toktok counts with the scanner it compiles from them)")
    ap.add_argument("--json", metavar="OUT", help="also write the figures to this JSON file")
    history.options(ap)
    ap.add_argument("--slice-mb", type=int, default=0, metavar="MB",
                    help="train on the first MB megabytes of text of the data, each file's share in proportion "
                         "(the same mix); 0 = all of it")
    ap.add_argument("--worker", choices=sorted(WORKERS), help=argparse.SUPPRESS)
    ap.add_argument("--result", help=argparse.SUPPRESS)
    ap.add_argument("--scratch", help=argparse.SUPPRESS)
    a = ap.parse_args()

    if a.worker:
        a.vocab = a.vocab[0]
        worker_main(a)
        return

    only = [x.strip() for x in a.only.split(",") if x.strip()]
    if bad := [x for x in only if x not in JOBS]:
        ap.error(f"--only: unknown {', '.join(bad)}; choose from {', '.join(JOBS)}")
    if min(a.vocab) <= 256:
        ap.error("--vocab must be more than 256 (the byte tokens)")
    if a.repeat < 1 or a.count_runs < 1:
        ap.error("--repeat and --count-runs must be 1 or more")
    pats = [x.strip() for x in a.patterns.split(",") if x.strip()]
    if bad := [x for x in pats if x not in PATTERNS + COMPILED]:
        ap.error(f"--patterns: unknown {', '.join(bad)}; choose from {', '.join(PATTERNS + COMPILED)}")
    try:
        import psutil
    except ImportError:
        sys.exit("bench: psutil is missing; run `make bench` or `pip install -e '.[bench]'`")
    files: list[str] = []
    for pattern in a.data:
        hits = sorted(glob.glob(os.path.expanduser(pattern), recursive=True))
        if not hits:
            sys.exit(f"bench: {pattern}: no such file; pass --data GLOB pointing at Parquet files")
        files += [str(Path(h).resolve()) for h in hits]
    files = list(dict.fromkeys(files))

    fig: dict = {
        "machine": {
            "cores": os.cpu_count(), "physical_cores": psutil.cpu_count(logical=False),
            "mem_gb": psutil.virtual_memory().total / 2**30, "load_start": os.getloadavg()[0],
            "python": platform.python_version(), "platform": platform.platform(),
        },
        "threads": a.threads, "repeat": a.repeat, "count_runs": a.count_runs, "data": data_stats(files), "by_vocab": {},
        "train_pattern": a.train_pattern,
    }
    if fig["machine"]["load_start"] > 0.5:
        print(f"bench: warning: load average is {fig['machine']['load_start']:.2f}; something else is "
              "running and the timings will be noisy", file=sys.stderr)
    env = {**thread_env(a.threads), "BENCH_TRAIN_PATTERN": a.train_pattern}
    scratch = tempfile.mkdtemp(prefix="toktok-bench-")
    try:
        if a.slice_mb:
            files = slice_corpus(files, a.slice_mb, scratch)
            fig["data"] = {**data_stats(files), "slice_mb": a.slice_mb}
        if "toktok" in only:
            print("bench: building the kernels ahead (untimed) ...", file=sys.stderr)
            w = run_worker("warmup", files, a.vocab[0], a.threads, scratch, env)
            if w["status"] != "ok":
                print(f"bench: warm-up failed, toktok's first run will include building the kernels:\n{w['error']}",
                      file=sys.stderr)
        for vocab in a.vocab:
            runs: dict[str, list[dict]] = {}
            # Interleaved (toktok, hf, rustbpe, toktok, ...) so that a change of load on the shared
            # machine falls on every trainer alike.
            for i in range(a.repeat):
                for name in TRAINERS:
                    if name not in only:
                        continue
                    if name in OPTIONAL and importlib.util.find_spec(name) is None:
                        runs[name] = [{"status": "unavailable", "error": f"{name} is not installed "
                                       f"(pip install {name}, or make bench)"}]
                        continue
                    print(f"bench: vocab {vocab:,}: training {name} ({i + 1} of {a.repeat}) ...", file=sys.stderr)
                    runs.setdefault(name, []).append(run_worker(name, files, vocab, a.threads, scratch, env))
            fig["by_vocab"][str(vocab)] = compare({name: median_of(r) for name, r in runs.items()})
        if "count" in only:
            counts: dict[int, list[dict]] = {}
            together: list[dict] = []
            by_pattern: dict[str, list[dict]] = {}
            all_n = a.threads or os.cpu_count() or 1
            for i in range(a.count_runs):  # interleaved, as the trainers
                for n in dict.fromkeys([1, all_n]):
                    print(f"bench: toktok counting with {n} thread(s) ({i + 1} of {a.count_runs}) ...", file=sys.stderr)
                    # POLARS_MAX_THREADS, not just threads=1: the counter's own threads are only one
                    # of the places Polars runs in parallel
                    counts.setdefault(n, []).append(run_worker(f"count:{n}", files, a.vocab[0], n, scratch,
                                                               {**env, **thread_env(n)}))
                # the other patterns on all cores, beside cl100k's run of the same round
                for p in pats:
                    if p == "cl100k":
                        by_pattern.setdefault(p, []).append(counts[all_n][-1])
                        continue
                    if (p in CUSTOM or p in OUTSIDE) and i >= CUSTOM_RUNS and by_pattern.get(p, [{}])[0].get("engine") == "regex":
                        continue
                    print(f"bench: toktok counting {p} with {all_n} thread(s) ({i + 1} of {a.count_runs}) ...",
                          file=sys.stderr)
                    by_pattern.setdefault(p, []).append(run_worker(f"count:{all_n}:{p}", files, a.vocab[0], all_n,
                                                                   scratch, {**env, **thread_env(all_n),
                                                                             "BENCH_PATTERN": p}))
                if all_n > 1:
                    print(f"bench: {all_n} 1-thread countings at once ({i + 1} of {a.count_runs}) ...", file=sys.stderr)
                    together.append(count_together(all_n, files, a.vocab[0], scratch, env))
            fig["counting"] = {f"threads_{n}": median_by(r, "count_s") for n, r in counts.items()}
            if by_pattern:
                fig["counting_patterns"] = {p: median_by(r, "count_s") for p, r in by_pattern.items()}
            if together:
                fig["counting_together"] = median_by(together, "count_s")
        if "cold" in only:
            colds = []
            for i in range(a.repeat):
                print(f"bench: the demo from an empty kernel cache, then warm ({i + 1} of {a.repeat}) ...",
                      file=sys.stderr)
                colds.append(cold_start(tempfile.mkdtemp(dir=scratch), env))
            fig["cold_start"] = sorted(colds, key=lambda c: c["cold"]["wall_s"])[(len(colds) - 1) // 2]
            fig["cold_start"]["runs_cold_wall_s"] = [c["cold"]["wall_s"] for c in colds]
    finally:
        shutil.rmtree(scratch, ignore_errors=True)

    report(fig)
    if not a.label:  # e.g. 2026-12-06-100mb for a slice
        a.label = time.strftime("%Y-%m-%d", time.gmtime()) + (f"-{a.slice_mb}mb" if a.slice_mb else "-run")
    history.record(a, "run", fig, load=fig["machine"]["load_start"])
    if a.json:
        Path(a.json).parent.mkdir(parents=True, exist_ok=True)
        Path(a.json).write_text(json.dumps(fig, indent=2) + "\n")
        print(f"bench: wrote {a.json}", file=sys.stderr)


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        sys.exit(130)
    except Exception:
        traceback.print_exc()
        sys.exit(1)
