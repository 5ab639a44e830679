"""The pipeline: read → pre-tokenize + count → merge (per phase) → export → verify, one run end to end.

The only module besides the CLI that imports several stages. Reads the sources of a
``TrainConfig``; writes into the output folder the tokenizer files (the ``.tiktoken`` file,
``tokenizer.json``, ``tokenizer_config.json``, ``special_tokens_map.json``) and ``run.duckdb``.
Phases run in order and share one merge history: phase k counts its own sources, segments those
words with the vocabulary after phase k-1 and learns its own number of merges. The starting
vocabulary is the bytes (+ hardcoded tokens) or a warm-start base whose ids are all kept.
Everything is built in a staging folder beside the output folder and renamed into place only
after the parity check passed, so a failed run never leaves a half-written tokenizer.
Example: ``train(TrainConfig(["data_fixtures/"], "out/demo", merges=500))``.
"""
from __future__ import annotations

import os
import platform
import shutil
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa

from . import __version__
from .config import PhaseConfig, TrainConfig, parse_size
from .errors import InputError, OutputError
from .insight import add_views, compression_curve, word_gains
from .export import write_hf, write_tiktoken
from .merge import MergeResult, learn_merges
from .budget import BudgetPlan, cap_words, plan_budget
from .engine import ParitySample, Source, count_phase
from .read import read_corpus
from .store import RunStore
from .verify import verify
from .vocab import PATTERN, Vocab, hardcoded_tokens
from .warmstart import Base, add_tokens, load_base

#: How a run reports progress: ``progress(stage, done, total)``; total may be None.
Progress = Callable[[str, int, "int | None"], None]


@dataclass
class PhaseSummary:
    """What one phase read and learned."""

    name: str
    merges_requested: int
    merges_learned: int
    reused_merges: int
    words: int
    docs: int
    text_bytes: int
    first_id: int  # id of the phase's first new token
    seconds: dict[str, float] = field(default_factory=dict)


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
    phases: list[PhaseSummary] = field(default_factory=list)
    warm_start: dict | None = None
    tiktoken: Path | None = None


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
    if out.exists() and any(out.iterdir()):
        if not force:
            raise OutputError(f"{out}: exists and is not empty; pass --force to replace it")
        # --force replaces the folder as a whole: only ever a toktok output folder
        here = Path.cwd().resolve()
        if out.resolve() == here or out.resolve() in here.parents:
            raise OutputError(f"{out}: is the current folder or holds it; toktok will not replace it, pick an output folder of its own")
        if not (out / "run.duckdb").is_file():
            raise OutputError(f"{out}: is not a toktok output folder (no run.duckdb); --force replaces only those, so pick another folder")
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


def _vocab_table(vocab: Vocab, kinds: list[str], phases: list[str | None]) -> pa.Table:
    n = len(vocab.tokens)
    ids = list(range(n)) + [n + k for k in range(len(vocab.specials))]
    toks = list(vocab.tokens) + [s.encode() for s in vocab.specials]
    kinds = kinds + ["special"] * len(vocab.specials)
    phases = phases + [None] * len(vocab.specials)
    return pa.table({"id": pa.array(ids, pa.int32()), "token": pa.array(toks, pa.binary()),
                     "kind": pa.array(kinds), "phase": pa.array(phases, pa.string())})


def _resolve_phase(cfg: TrainConfig, phase: PhaseConfig) -> list[Source]:
    """Resolve every source of ``phase``; fails on a bad path before any work."""
    return [Source(read_corpus([src.path], text_column=src.text_column or cfg.text_column, bad_utf8=cfg.bad_utf8),
                   src.weight) for src in phase.sources]


def _phase_capacity(cfg: TrainConfig, phase: PhaseConfig, plan: BudgetPlan | None) -> int | None:
    """Bytes of text a phase may sample: what the memory budget allows, and at most the phase's
    own ``budget`` (text bytes) when it has one; None = read everything."""
    caps = []
    if plan is not None:
        caps.append(plan.sample_bytes)
    if phase.budget is not None:
        caps.append(parse_size(phase.budget))
    return min(caps) if caps else None


def _start_vocab(cfg: TrainConfig) -> tuple[Vocab, list[str], Base | None]:
    """The starting vocabulary and each id's kind: the bytes (+ hardcoded tokens), or a warm-start
    base (+ hardcoded tokens only when asked) whose ids are all kept."""
    if cfg.warm_start is None:
        vocab = Vocab.base(hardcoded=cfg.use_hardcoded())
        kinds = ["byte"] * 256 + ["hardcoded"] * (len(vocab.tokens) - 256)
        return vocab, kinds, None
    base = load_base(cfg.warm_start)
    vocab = Vocab(list(base.vocab.tokens), [], dict(base.vocab.pinned))
    kinds = ["special" if i in vocab.pinned else "byte" if len(t) == 1 else "base" for i, t in enumerate(vocab.tokens)]
    if cfg.use_hardcoded():
        kinds += ["hardcoded"] * len(add_tokens(vocab, hardcoded_tokens()))
    return vocab, kinds, base


def train(cfg: TrainConfig, progress: Progress | None = None) -> TrainSummary:
    """Train a tokenizer as ``cfg`` says and publish it in ``cfg.out``; raises ToktokError on bad input.

    Example: ``train(TrainConfig(["data_fixtures/"], "out/demo", merges=500)).vocab_size == 256 + 1161 + 500``
    (when the corpus allows 500 merges).
    """
    cfg.validate()
    report = progress or (lambda stage, done, total: None)
    out = Path(cfg.out)
    phases = cfg.phase_list()
    many = len(phases) > 1
    times: dict[str, float] = {"count": 0.0, "merge": 0.0}
    warnings: list[str] = []

    # 1. budget, inputs, base and output: fail on a budget that cannot work, bad paths and
    #    vocabularies before any work
    plan = plan_budget(parse_size(cfg.budget)) if cfg.budget is not None else None
    batch_bytes = plan.batch_bytes if plan is not None else 32 << 20
    memory_limit = f"{plan.duckdb_bytes >> 20}MiB" if plan is not None else cfg.memory_limit
    plans = [_resolve_phase(cfg, ph) for ph in phases]
    vocab, kinds, base = _start_vocab(cfg)
    if base is not None:
        warnings += base.warnings
    pinned_names = set(vocab.pinned.values())
    vocab.specials = [s for s in cfg.special_tokens if s not in pinned_names]
    vocab.check()
    all_specials = vocab.all_specials()
    phase_of: list[str | None] = [None] * len(vocab.tokens)
    staging = _prepare_out(out, cfg.force)
    try:
        store = RunStore.create(staging / "run.duckdb", memory_limit=memory_limit, threads=cfg.threads)
        if plan is not None:
            store.put_meta("budget", plan.to_dict())
        store.put_meta("config", cfg.to_dict())
        store.put_meta("versions", _versions())
        store.put_meta("seed", str(cfg.seed))
        store.put_meta("pattern", PATTERN)
        store.put_meta("started", time.strftime("%Y-%m-%dT%H:%M:%S%z"))
        if base is not None:
            store.put_meta("warm_start", {**base.summary(), "hardcoded_added": kinds.count("hardcoded")})

        parity = ParitySample()
        summaries: list[PhaseSummary] = []
        merge_index = 0
        for phase, sources in zip(phases, plans):
            tag = f" {phase.name}" if many else ""
            where = f"phase {phase.name!r}: " if many else ""

            # 2. read, sample (when the budget says so), pre-tokenize and count
            capacity = _phase_capacity(cfg, phase, plan)
            pc = count_phase(sources, seed=cfg.seed, capacity=capacity, batch_bytes=batch_bytes,
                             specials=all_specials, threads=cfg.threads, report=report, tag=tag)
            table, used = pc.words, pc.used
            parity.merge_frame(pc.parity)
            for src in sources:
                for f in src.corpus.files:
                    st = used[f.path]
                    store.add_input(f.path, f.kind, phase.name, f.size, st["docs"], st["bytes"],
                                    st["docs_seen"], st["bytes_seen"])
            if plan is not None:
                # the merge loop's arrays must fit the budget: drop the rarest words if not
                lengths = table["word"].bin.size().to_numpy()
                kept = cap_words(lengths, table["count"].to_numpy(), plan.work_bytes)
                if len(kept) < table.height:
                    dropped = table.height - len(kept)
                    lost = 1 - table["count"].gather(kept).sum() / max(table["count"].sum(), 1)
                    table = table[kept]
                    warnings.append(
                        f"{where}the budget holds {len(kept):,} of {len(kept) + dropped:,} distinct words: "
                        f"dropped the {dropped:,} rarest ({lost:.2%} of word occurrences)"
                    )
            words = table["word"].to_arrow()
            counts = table["count"].to_numpy()
            t_count = pc.seconds["count"]
            times["sample"] = times.get("sample", 0.0) + pc.seconds.get("sample", 0.0)
            docs = sum(u["docs"] for u in used.values())
            text_bytes = sum(u["bytes"] for u in used.values())
            if len(words) == 0:
                paths = ", ".join(s.path for s in phase.sources)
                n_files = sum(len(s.corpus.files) for s in sources)
                raise InputError(
                    f"{where}{paths}: the corpus is empty (no text in {n_files} file(s)); "
                    "check the sources and --text-column"
                )

            # 3. merges on top of the vocabulary so far
            t0 = time.perf_counter()
            n = phase.merges
            report("merge" + tag, 0, n)
            start = Vocab(vocab.tokens, [], vocab.pinned)
            res = learn_merges(words, counts, start, n, progress=lambda k: report("merge" + tag, k, n))
            report("merge" + tag, res.new_tokens, n)
            store.put_words(phase.name, table.with_columns(tokens=pl.Series(res.word_tokens, dtype=pl.Int32)))
            t_merge = time.perf_counter() - t0
            if res.new_tokens < n:
                warnings.append(
                    f"{where}the corpus allows only {res.new_tokens} merges of the {n} asked for "
                    "(no adjacent pair left); the vocabulary is smaller"
                )
            first_id = len(vocab.tokens)
            store.add_merges(phase.name, _merge_table(res, merge_index))
            merge_index += len(res.left)
            vocab = Vocab(res.vocab.tokens, vocab.specials, vocab.pinned)
            kinds += ["merge"] * (len(vocab.tokens) - first_id)
            phase_of += [phase.name] * (len(vocab.tokens) - first_id)
            times["count"] += t_count
            times["merge"] += t_merge
            summaries.append(PhaseSummary(
                phase.name, n, res.new_tokens, int(res.reused.sum()), len(words), docs, text_bytes,
                first_id, {"count": t_count, "merge": t_merge},
            ))
            del table, words, counts, res

        vocab.check()
        store.add_vocab(_vocab_table(vocab, kinds, phase_of))
        store.put_meta("phases", [
            {"name": s.name, "merges_requested": s.merges_requested, "merges_learned": s.merges_learned,
             "reused_merges": s.reused_merges, "words": s.words, "docs": s.docs, "text_bytes": s.text_bytes,
             "first_id": s.first_id, "budget": cfg.phase_budget(ph), "seconds": sum(s.seconds.values()),
             "seconds_count": s.seconds["count"], "seconds_merge": s.seconds["merge"],
             "sources": [{"path": src.path, "weight": src.weight} for src in ph.sources]}
            for s, ph in zip(summaries, phases)
        ])

        keep = parity.df["text"].to_list()
        keep_from = parity.df["source"].to_list()

        # 4. export
        t0 = time.perf_counter()
        write_tiktoken(vocab, staging / cfg.tiktoken_name)
        write_hf(vocab, staging)
        times["export"] = time.perf_counter() - t0

        # 5. verify id parity on the built-in set and on slices of the input
        t0 = time.perf_counter()
        rep = verify(staging, keep, slices=cfg.verify_slices, seed=cfg.seed)
        times["verify"] = time.perf_counter() - t0
        # 6. what the run file offers for inspection: views, the compression curve and token
        #    usage on the parity sample (documents of the input, labelled by file), word gains
        t0 = time.perf_counter()
        add_views(store.con)
        if keep:
            compression_curve(store.con, keep, by=[Path(p).name for p in keep_from], threads=cfg.threads, checkpoints=8)
        word_gains(store.con)
        times["insight"] = time.perf_counter() - t0
        for k, v in times.items():
            store.add_stage(k, v)
        store.put_meta("parity", {"ok": True, "strings": rep.strings, "tokens": rep.tokens})
        store.put_meta("warnings", warnings)
        store.put_meta("finished", time.strftime("%Y-%m-%dT%H:%M:%S%z"))
        store.close()

        # 7. publish atomically
        _publish(staging, out)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return TrainSummary(
        out=out, vocab_size=vocab.size, merges_requested=sum(s.merges_requested for s in summaries),
        merges_learned=sum(s.merges_learned for s in summaries),
        reused_merges=sum(s.reused_merges for s in summaries), words=sum(s.words for s in summaries),
        docs=sum(s.docs for s in summaries), text_bytes=sum(s.text_bytes for s in summaries),
        seconds=times, parity_strings=rep.strings, warnings=warnings, phases=summaries,
        warm_start=base.summary() if base is not None else None, tiktoken=out / cfg.tiktoken_name,
    )


__all__ = ["train", "TrainSummary", "PhaseSummary", "TrainConfig", "parse_size"]
