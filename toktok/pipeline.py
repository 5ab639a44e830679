"""The pipeline: read → pre-tokenize + count → merge → export → verify, one run end to end.

The only module besides the CLI that imports several stages. Reads the sources of a
``TrainConfig``; writes into ``--out`` the tokenizer files (``tokenizer.tiktoken``,
``tokenizer.json``, ``tokenizer_config.json``, ``special_tokens_map.json``) and ``run.duckdb``.
Everything is built in a staging folder beside ``--out`` and renamed into place only after the
parity check passed, so a failed run never leaves a half-written tokenizer.
Example: ``train(TrainConfig(["data_fixtures/"], "out/demo", merges=500))``.
"""
from __future__ import annotations

import os
import platform
import queue
import random
import shutil
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa

from . import __version__
from .config import TrainConfig, parse_size
from .errors import InputError, OutputError
from .export import write_hf, write_tiktoken
from .merge import MergeResult, learn_merges
from .pretokenize import WordCounter
from .read import read_corpus
from .store import RunStore
from .verify import verify
from .vocab import PATTERN, Vocab

PHASE = "main"

#: How a run reports progress: ``progress(stage, done, total)``; total may be None.
Progress = Callable[[str, int, "int | None"], None]


@dataclass
class TrainSummary:
    """What a run produced, for the CLI's closing summary."""

    out: Path
    vocab_size: int
    merges_requested: int
    merges_learned: int
    reused_merges: int
    words: int
    docs: int
    text_bytes: int
    seconds: dict[str, float] = field(default_factory=dict)
    parity_strings: int = 0
    warnings: list[str] = field(default_factory=list)


def _versions() -> dict[str, str]:
    import duckdb
    import numba
    import polars
    import tiktoken
    import tokenizers

    return {
        "toktok": __version__, "python": sys.version.split()[0], "platform": platform.platform(),
        "polars": polars.__version__, "duckdb": duckdb.__version__, "numba": numba.__version__,
        "numpy": np.__version__, "tiktoken": tiktoken.__version__, "tokenizers": tokenizers.__version__,
    }


def _prepare_out(out: Path, force: bool) -> Path:
    """Check the output folder and make a fresh staging folder beside it."""
    if out.exists() and not out.is_dir():
        raise OutputError(f"{out}: exists and is not a folder; pass another --out")
    if out.exists() and any(out.iterdir()) and not force:
        raise OutputError(f"{out}: exists and is not empty; pass --force to replace it")
    parent = out.resolve().parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
        staging = parent / f".{out.name}.partial-{os.getpid()}"
        if staging.exists():
            shutil.rmtree(staging)
        staging.mkdir()
    except OSError as e:
        raise OutputError(f"{out}: cannot write here ({e.strerror}); pass a writable --out") from None
    return staging


def _prefetch(items: Iterator, depth: int = 1) -> Iterator:
    """Iterate ``items`` in a background thread, ``depth`` items ahead (reading overlaps counting;
    pyarrow and the scanner release the GIL). Errors are raised here, in the caller's thread."""
    q: queue.Queue = queue.Queue(maxsize=depth)
    done = object()
    stop = threading.Event()

    def run() -> None:
        try:
            for item in items:
                if stop.is_set():
                    return
                q.put(item)
            q.put(done)
        except BaseException as e:  # handed to the consumer
            q.put(e)

    th = threading.Thread(target=run, name="toktok-read", daemon=True)
    th.start()
    try:
        while True:
            item = q.get()
            if item is done:
                return
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        stop.set()
        while th.is_alive():  # unblock a producer waiting on a full queue
            try:
                q.get_nowait()
            except queue.Empty:
                th.join(0.05)


def _publish(staging: Path, out: Path) -> None:
    """Swap the finished staging folder into place; the old folder goes only after the swap."""
    old = None
    if out.exists():
        old = out.parent / f".{out.name}.old-{os.getpid()}"
        out.rename(old)
    staging.rename(out)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def _merge_table(res: MergeResult, start: int) -> pa.Table:
    toks = res.vocab.tokens
    return pa.table({
        "merge_index": pa.array(np.arange(start, start + len(res.left), dtype=np.int32)),
        "left_id": pa.array(res.left), "right_id": pa.array(res.right), "token_id": pa.array(res.token),
        "token": pa.array([toks[t] for t in res.token.tolist()], pa.binary()),
        "count": pa.array(res.count), "reused": pa.array(res.reused),
    })


def _vocab_table(vocab: Vocab, n_base: int, hardcoded: bool) -> pa.Table:
    kinds = []
    for i in range(len(vocab.tokens)):
        if i < 256:
            kinds.append("byte")
        elif i < n_base:
            kinds.append("hardcoded" if hardcoded else "base")
        else:
            kinds.append("merge")
    ids = list(range(len(vocab.tokens))) + [len(vocab.tokens) + k for k in range(len(vocab.specials))]
    toks = list(vocab.tokens) + [s.encode() for s in vocab.specials]
    kinds += ["special"] * len(vocab.specials)
    phases = [PHASE if k == "merge" else None for k in kinds]
    return pa.table({"id": pa.array(ids, pa.int32()), "token": pa.array(toks, pa.binary()),
                     "kind": pa.array(kinds), "phase": pa.array(phases, pa.string())})


def train(cfg: TrainConfig, progress: Progress | None = None) -> TrainSummary:
    """Train a tokenizer as ``cfg`` says and publish it in ``cfg.out``; raises ToktokError on bad input.

    Example: ``train(TrainConfig(["data_fixtures/"], "out/demo", merges=500)).vocab_size == 256 + 1161 + 500``
    (when the corpus allows 500 merges).
    """
    cfg.validate()
    report = progress or (lambda stage, done, total: None)
    out = Path(cfg.out)
    times: dict[str, float] = {}
    warnings: list[str] = []

    # 1. inputs and output: fail on bad paths before any work
    corpus = read_corpus(cfg.sources, text_column=cfg.text_column, bad_utf8=cfg.bad_utf8)
    base = Vocab.base(hardcoded=cfg.hardcoded)
    base.specials = list(cfg.special_tokens)
    base.check()
    staging = _prepare_out(out, cfg.force)
    try:
        store = RunStore.create(staging / "run.duckdb", memory_limit=cfg.memory_limit, threads=cfg.threads)
        store.put_meta("config", cfg.to_dict())
        store.put_meta("versions", _versions())
        store.put_meta("seed", str(cfg.seed))
        store.put_meta("pattern", PATTERN)
        store.put_meta("started", time.strftime("%Y-%m-%dT%H:%M:%S%z"))

        # 2. read (in a background thread, one batch ahead), pre-tokenize and count; keep a
        #    seeded sample of documents for the parity check
        t0 = time.perf_counter()
        rng = random.Random(cfg.seed)
        keep: list[str] = []
        seen_docs = 0
        total_bytes = sum(f.size for f in corpus.files)
        counter = WordCounter(specials=cfg.special_tokens, threads=cfg.threads)
        for batch in _prefetch(corpus.batches()):
            counter.add(batch.texts)
            for doc in batch.texts.head(64).to_list():
                seen_docs += 1
                if len(keep) < 64:
                    keep.append(doc[:4000])
                elif (j := rng.randrange(seen_docs)) < 64:
                    keep[j] = doc[:4000]
            # progress in on-disk bytes of the files before this batch's (files come in order)
            done_bytes = sum(f.size for f in corpus.files if f.path < batch.path)
            report("count", done_bytes, total_bytes)
        table = counter.result().sort("word")
        del counter
        report("count", total_bytes, total_bytes)
        for f in corpus.files:
            st = corpus.stats.get(f.path, {})
            store.add_input(f.path, f.kind, PHASE, f.size, st.get("docs", 0), st.get("bytes", 0))
        words = table["word"].to_arrow()
        counts = table["count"].to_numpy()
        times["count"] = time.perf_counter() - t0
        docs = sum(s.get("docs", 0) for s in corpus.stats.values())
        text_bytes = sum(s.get("bytes", 0) for s in corpus.stats.values())
        if len(words) == 0:
            raise InputError(
                f"{', '.join(cfg.sources)}: the corpus is empty (no text in {len(corpus.files)} file(s)); "
                "check the sources and --text-column"
            )

        # 3. merges
        t0 = time.perf_counter()
        report("merge", 0, cfg.merges)
        res = learn_merges(words, counts, base, cfg.merges, progress=lambda n: report("merge", n, cfg.merges))
        report("merge", res.new_tokens, cfg.merges)
        store.put_words(PHASE, table.with_columns(tokens=pl.Series(res.word_tokens, dtype=pl.Int32)))
        times["merge"] = time.perf_counter() - t0
        if res.new_tokens < cfg.merges:
            warnings.append(
                f"the corpus allows only {res.new_tokens} merges of the {cfg.merges} asked for "
                "(no adjacent pair left); the vocabulary is smaller"
            )
        vocab = res.vocab
        vocab.specials = list(cfg.special_tokens)
        vocab.check()
        store.add_merges(PHASE, _merge_table(res, 0))
        store.add_vocab(_vocab_table(vocab, len(base.tokens), cfg.hardcoded))

        # 4. export
        t0 = time.perf_counter()
        write_tiktoken(vocab, staging / "tokenizer.tiktoken")
        write_hf(vocab, staging)
        times["export"] = time.perf_counter() - t0

        # 5. verify id parity on the built-in set and on slices of the input
        t0 = time.perf_counter()
        rep = verify(staging, keep, slices=cfg.verify_slices, seed=cfg.seed)
        times["verify"] = time.perf_counter() - t0
        for k, v in times.items():
            store.add_stage(k, v)
        store.put_meta("parity", {"ok": True, "strings": rep.strings, "tokens": rep.tokens})
        store.put_meta("warnings", warnings)
        store.put_meta("finished", time.strftime("%Y-%m-%dT%H:%M:%S%z"))
        store.close()

        # 6. publish atomically
        _publish(staging, out)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return TrainSummary(
        out=out, vocab_size=vocab.size, merges_requested=cfg.merges, merges_learned=res.new_tokens,
        reused_merges=int(res.reused.sum()), words=len(words), docs=docs, text_bytes=text_bytes,
        seconds=times, parity_strings=rep.strings, warnings=warnings,
    )


__all__ = ["train", "TrainSummary", "TrainConfig", "parse_size"]
