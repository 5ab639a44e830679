"""The pipeline: read → pre-tokenize + count → merge (per phase) → export → verify, one run end to end.

The only module besides the CLI that imports several stages. Reads the sources of a
``TrainConfig``; writes into the output folder the tokenizer files (the ``.tiktoken`` file,
``tokenizer.json``, ``tokenizer_config.json``, ``special_tokens_map.json``) and ``run.duckdb``
(or, for an ``output:`` into a folder toktok does not own, exactly that ``.tiktoken`` and the rest
in ``NAME.toktok/`` beside it: ``TrainConfig.layout``).
Phases run in order and share one merge history: phase k counts its own sources, segments those
words with the vocabulary after phase k-1 and learns its own number of merges. The starting
vocabulary is the bytes (+ hardcoded tokens) or a warm-start base whose ids are all kept.
Everything is built in a staging folder beside the output folder and renamed into place only
after the parity check passed, so a failed run never leaves a half-written tokenizer.
Example: ``train(TrainConfig(["data_fixtures/"], "out/demo", merges=500))``.
"""
from __future__ import annotations

import dataclasses
import os
import platform
import shutil
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa

from . import __version__
from .config import OutputLayout, PhaseConfig, TrainConfig, parse_size
from .errors import ConfigError, InputError, OutputError, ParityError, ToktokError
from .insight.runfile import add_views, compression_curve, word_gains
from .export import special_tokens_file, special_tokens_json, write_hf, write_tiktoken, _write_atomic
from .merge.loop import MergeResult, learn_merges
from ._kernels import release_llvm_pages
from .budget import MERGE_BYTES_PER_MERGE, BudgetPlan, cap_words, human, plan_budget, possible_merges
from .count.local import CountState, ParitySample, Source, count_phase
from .count.memory import corpus_of
from .count.read import read_corpus
from .count.remote import redact
from .store import RunStore
from .verify import verify
from .vocab import PATTERN, Vocab, hardcoded_tokens
from .warmstart import Base, add_tokens, load_base

#: How a run reports progress: ``progress(stage, done, total)``; total may be None.
Progress = Callable[[str, int, "int | None"], None]
#: Where a verbose run's log lines go (``train(..., log=...)``; default: stderr).
Log = Callable[[str], None]


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
    shared: bool = False  # the .tiktoken went into a folder toktok does not own; ``out`` is beside it
    specials: dict = field(default_factory=dict)


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


def _real(p: Path) -> Path:
    """``p`` with every symlink resolved: a run replaces a linked folder's target and keeps the link."""
    return Path(os.path.realpath(os.path.expanduser(p)))


def _staging_of(out: Path) -> Path:
    """Where a run into ``out`` is built (and where ``--resume`` finds an interrupted one)."""
    real = _real(out)
    return real.parent / f".{real.name}.partial"


def interrupted_run(out: str | Path) -> Path | None:
    """The staging folder an interrupted run into ``out`` left for ``--resume``, or None."""
    staging = _staging_of(Path(out))
    return staging if (staging / "run.duckdb").is_file() else None


def _inside(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def _check_inputs(inputs: list[tuple[str, str]], replaced: list[Path], out: Path) -> None:
    """No input of the run (a source file or folder, the warm-start base) may lie in what publishing
    the run replaces: the run would delete the data it was trained on."""
    for path, what in inputs:
        if "://" in path:
            continue
        p = _real(Path(path))
        for r in replaced:
            if _inside(p, _real(r)):
                raise OutputError(
                    f"{path}: {what} of this run lies in {r}, which publishing the run replaces; "
                    f"move it out, or write the output elsewhere (not {out})")


def _check_shared(layout: OutputLayout) -> None:
    """An ``output:`` into a folder toktok does not own replaces only toktok's own outputs of that
    name: the .tiktoken and its special-token list if the ``NAME.toktok`` folder beside them holds a
    toktok run, the folder itself if it does (or is empty)."""
    comp = layout.folder
    real = _real(comp)
    ours = (real / "run.duckdb").is_file()
    fix = "move it away, or name another output"
    if os.path.lexists(real) and not real.is_dir():
        raise OutputError(f"{comp}: exists and is not a folder; toktok keeps the run's other outputs there, so {fix}")
    if real.is_dir() and not ours and next(real.iterdir(), None) is not None:
        raise OutputError(f"{comp}: exists and is not a toktok output folder (no run.duckdb); toktok keeps the "
                          f"run's other outputs there, so {fix}")
    if not ours:
        for f in (layout.tiktoken, special_tokens_file(layout.tiktoken)):
            if os.path.lexists(f):
                raise OutputError(f"{f}: exists and toktok did not write it (no {comp}/run.duckdb); "
                                  f"toktok replaces only its own outputs, so {fix}")


def _prepare_out(layout: OutputLayout, force: bool, resume: bool = False,
                 inputs: list[tuple[str, str]] | None = None) -> tuple[Path, bool]:
    """Check the output; return the staging folder beside it and whether it holds an interrupted
    run to continue. An interrupted run is never thrown away without ``--force``; what publishing
    replaces never holds an input of the run (``inputs``: (path, what it is))."""
    out = layout.folder
    real = _real(out)
    here = _real(Path.cwd())
    if _inside(here, real):
        raise OutputError(f"{out}: is the current folder or holds it; toktok writes (and replaces) a folder of "
                          "its own: pick one, e.g. --out out/tok (a config's output: ./NAME.tiktoken writes "
                          "only the .tiktoken here)")
    staging = _staging_of(out)
    replaced = [staging] + ([layout.tiktoken, special_tokens_file(layout.tiktoken)] if layout.shared else [])
    if os.path.lexists(real):
        replaced.append(out)
    _check_inputs(inputs or [], replaced, out)
    if resume and interrupted_run(out) is None:
        if (out / "run.duckdb").is_file():
            raise OutputError(f"{out}: this run finished (no interrupted run to resume); its output is in place, "
                              "nothing to do (to train it again, rerun with --force instead of --resume)")
        raise OutputError(f"{out}: no interrupted run to resume (no {staging}/run.duckdb); "
                          "run without --resume")
    if layout.shared:
        _check_shared(layout)
    elif out.exists() and not out.is_dir():
        raise OutputError(f"{out}: exists and is not a folder; pass another --out")
    elif out.exists() and any(out.iterdir()):
        if not force:
            raise OutputError(f"{out}: exists and is not empty; pass --force to replace it")
        # --force replaces the folder as a whole: only ever a toktok output folder
        if not (out / "run.duckdb").is_file():
            raise OutputError(f"{out}: is not a toktok output folder (no run.duckdb); --force replaces only those, so pick another folder")
    if resume:
        return staging, True
    if staging.exists():
        _lock(staging).close()  # refuses while another run is writing it
        if not force and (staging / "run.duckdb").exists():
            raise OutputError(f"{out}: an interrupted run was found in {staging}; pass --resume to continue it "
                              "or --force to start over")
        shutil.rmtree(staging, ignore_errors=True)
    try:
        staging.parent.mkdir(parents=True, exist_ok=True)
        staging.mkdir()
    except OSError as e:
        raise OutputError(f"{out}: cannot write here ({e.strerror}); pass a writable --out") from None
    return staging, False


def _lock(staging: Path):
    """Hold an exclusive lock on the staging folder for this process's lifetime (released by the
    OS when the process dies, even by kill -9), so that two runs never write one folder."""
    import fcntl

    f = open(staging / ".lock", "a")
    try:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        f.close()
        raise OutputError(f"{staging}: another toktok run is writing this output; wait for it or pick another --out") from None
    return f


#: Seconds between checkpoints of the merge loop (``TOKTOK_CHECKPOINT_SECONDS`` overrides it).
CHECKPOINT_SECONDS = 2.0
#: Identity of a run: a ``--resume`` must be given the same values.
_IDENTITY = ("sources", "merges", "special_tokens", "text_column", "bad_utf8", "hardcoded", "seed",
             "phases", "warm_start", "tiktoken_name", "budget", "working_set_mb")


class _Checkpoints:
    """Counts checkpoints, and for fault-injection tests kills the process (SIGKILL, as kill -9)
    right after the N-th one when ``TOKTOK_FAULT=checkpoint:N``. With
    ``TOKTOK_CHECKPOINT_SECONDS=0`` the merge loop checkpoints deterministically, after every
    ``TOKTOK_CHECKPOINT_MERGES`` new tokens (default 1)."""

    def __init__(self) -> None:
        self.n = 0
        fault = os.environ.get("TOKTOK_FAULT", "")
        self.kill_at = int(fault.split(":", 1)[1]) if fault.startswith("checkpoint:") else None
        self.every = float(os.environ.get("TOKTOK_CHECKPOINT_SECONDS", CHECKPOINT_SECONDS))
        self.step = int(os.environ.get("TOKTOK_CHECKPOINT_MERGES", 1))

    def done(self) -> None:
        self.n += 1
        if self.kill_at is not None and self.n >= self.kill_at:
            import signal

            os.kill(os.getpid(), signal.SIGKILL)


def _fingerprint(sources: list[Source]) -> list[list]:
    """The files a phase reads as (path, size, modification time), objects in a store as (URL,
    size, ETag): a resumed phase must find them unchanged (data in memory: its name, kind, rows and
    digest, ``toktok.memory``)."""
    out = []
    for src in sources:
        for f in src.corpus.files:
            if f.kind == "memory":
                out.append(f.fingerprint())
                continue
            if f.etag is not None:
                out.append([f.path, f.size, f.etag])
                continue
            try:
                mtime = os.stat(f.path).st_mtime_ns
            except OSError:
                mtime = None
            out.append([f.path, f.size, mtime])
    return out


def _publish(staging: Path, layout: OutputLayout) -> None:
    """Put the finished staging folder in place, each file whole. Into a folder toktok does not own,
    the .tiktoken and its special-token list (if any; a stale one of an earlier run goes) replace
    theirs first; then the folder is swapped, the old one going only after the swap. A symlinked
    output folder keeps its link: the link's target is replaced."""
    real = _real(layout.folder)
    if layout.shared:
        tt = staging / layout.tiktoken.name
        side, side_to = special_tokens_file(tt), _real(special_tokens_file(layout.tiktoken))
        if side.exists():
            side.rename(side_to)
        elif os.path.lexists(side_to):
            side_to.unlink()  # toktok's own (checked up front): it no longer describes the .tiktoken
        tt.rename(_real(layout.tiktoken))
    old = None
    if os.path.lexists(real):
        old = real.parent / f".{real.name}.old-{os.getpid()}"
        real.rename(old)
    staging.rename(real)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def _literal(token: bytes) -> str:
    """A token for a log line: its text, with control characters (escape sequences too) and bytes
    that are not UTF-8 written as Python escapes."""
    text = token.decode("utf-8", "backslashreplace")
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


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
    return [Source(corpus_of(src, cfg.text_column, cfg.bad_utf8, resume=cfg.resume) if src.kind == "memory" else
                   read_corpus([src.path], text_column=src.text_column or cfg.text_column, bad_utf8=cfg.bad_utf8,
                               storage_options=cfg.source_options(src)),
                   src.weight) for src in phase.sources]


def _phase_capacity(cfg: TrainConfig, phase: PhaseConfig, plan: BudgetPlan | None) -> int | None:
    """Bytes of text a phase may sample: what the memory budget allows, at most what
    ``working_set_mb`` holds, and at most the phase's own ``budget`` (text bytes) when it has one;
    None = read everything."""
    caps = []
    if plan is not None:
        caps.append(plan.sample_bytes)
    if (ws := cfg.working_set_text()) is not None:
        caps.append(ws)
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
    vocab = base.kept_vocab()
    kinds = ["special" if i in vocab.pinned else "byte" if len(t) == 1 else "base" for i, t in enumerate(vocab.tokens)]
    if cfg.use_hardcoded():
        kinds += ["hardcoded"] * len(add_tokens(vocab, hardcoded_tokens()))
    return vocab, kinds, base


def _run_specials(listed: list[str], vocab: Vocab, base: Base | None) -> tuple[list[str], list[str]]:
    """The run's special tokens after the last rank, in id order, and those of the base that the
    config does not list. Specials the base keeps at their ids (``pinned``) stay there. A base
    whose specials follow toktoktok's convention counts as bare: as toktoktok does, the listed
    specials come after the last new rank in list order; the base's unlisted ones follow them."""
    pinned = set(vocab.pinned.values())
    out = [s for s in listed if s not in pinned]
    unlisted = [s for s in (base.vocab.specials if base is not None and base.bare else []) if s not in out]
    return out + unlisted, unlisted


def _specials_rule(vocab: Vocab, base: Base | None, tiktoken_name: str) -> dict:
    """Which rule placed the special ids, for the summary and meta('specials'): ``after_last_rank``
    (toktoktok's convention: a plain list in this order loads them), ``declared`` (some are kept at
    a base's ids inside the range, so the .tiktoken's ranks have gaps there and the ids are written
    to NAME.special_tokens.json) or ``none``."""
    ids = vocab.special_ids()
    out: dict = {"rule": "none" if not ids else "declared" if vocab.pinned else "after_last_rank", "ids": ids}
    if vocab.pinned:
        out["declared_in"] = special_tokens_file(tiktoken_name).name
        out["gaps"] = sorted(vocab.pinned)
        out["reason"] = f"kept at the ids of the warm-start base {base.path.name if base else '?'}"
    moved = {s: [i, ids[s]] for s, i in (base.vocab.special_ids().items() if base is not None and base.bare else [])
             if ids.get(s) != i}
    if moved:
        out["moved"] = moved
    return out


def _start_over(e: ToktokError) -> ToktokError:
    """Mark ``e`` as an error whose fix changes the options a ``--resume`` must repeat (or the
    inputs): what the run kept is of no use to a later run, so it is not kept."""
    e.start_over = True
    return e


def _resolved(path):
    """A source path as the file, folder or pattern it names: ``./big/`` and ``big`` are one."""
    if not isinstance(path, str) or "://" in path:
        return path
    p = os.path.expanduser(path)
    if os.path.exists(p):
        return os.path.realpath(p)
    return os.path.normpath(os.path.abspath(p))


def _identity(cfg: TrainConfig) -> dict:
    """What a ``--resume`` must be given unchanged, with every path resolved (see ``_resolved``)."""
    import json

    ident = json.loads(json.dumps({k: cfg.to_dict().get(k) for k in _IDENTITY}, default=str))
    ident["sources"] = [_resolved(s) for s in ident.get("sources") or []]
    for ph in ident.get("phases") or []:
        for src in ph.get("sources") or []:
            src["path"] = _resolved(src.get("path"))
    if ident.get("warm_start") is not None:
        ident["warm_start"] = _resolved(ident["warm_start"])
    return ident


def _check_same_run(store: RunStore, cfg: TrainConfig, staging: Path) -> None:
    """``--resume`` continues only the run it was given: same sources (as resolved paths, however
    spelled), merges, seed, budget, ..."""
    import json

    now = _identity(cfg)
    stored = store.get_meta("identity")
    if stored is None:  # killed before its first write: nothing to continue, nothing to compare
        store.put_meta("identity", now)
        return
    old = json.loads(stored)
    for k in _IDENTITY:
        if old.get(k) != now.get(k):
            raise ConfigError(f"--resume: {k} was {old.get(k)!r} in the interrupted run and is {now.get(k)!r} now; "
                              "pass the same options (or start over with --force)")


def _respell(plans: list[list[Source]], stored: str | None) -> None:
    """Give every input file the path it had in the interrupted run (``stored``: its meta
    "files") when both name the same file, so that the files are read, hashed and recorded
    exactly as before however the sources are spelled now (``big`` then, ``/data/big`` now)."""
    import json

    if stored is None:
        return
    spelled = {os.path.realpath(f[0]): f[0] for phase in json.loads(stored) for f in phase}
    for sources in plans:
        for src in sources:
            for f in src.corpus.files:
                f.path = spelled.get(os.path.realpath(f.path), f.path)
            src.corpus.files.sort(key=lambda f: f.path)


def _count_state(store: RunStore, phase: str, fp: list) -> CountState | None:
    """The counting checkpoint an interrupted run left for ``phase`` (None if none, or if its
    files changed since: then the phase is counted again from its first file)."""
    st = store.get_count_state(phase)
    if st is None or st["used"].get("fingerprint") != fp:
        return None
    words = pl.from_arrow(st["words"]) if st["words"] is not None else None
    sample = pl.from_arrow(st["sample"]) if st["sample"] is not None else None
    parity = pl.from_arrow(st["parity"]) if st["parity"].num_rows else None
    return CountState(st["files_done"], words, st["used"]["state"], parity, sample,
                      held_out=_held_out_of(store, phase) if sample is not None else None)


def _held_out_of(store: RunStore, phase: str) -> pl.DataFrame | None:
    """The pieces a sampled phase's sample did not take, as the run file records them
    (meta('held_out:PHASE'); None for a phase that read every document)."""
    import json

    v = store.get_meta(f"held_out:{phase}")
    rows = json.loads(v) if v is not None else None
    if rows is None:
        return None
    return pl.DataFrame(rows, schema={"hash": pl.UInt64, "source": pl.String, "row": pl.Int64, "text": pl.String})


def _put_held_out(store: RunStore, phase: str, df: pl.DataFrame | None) -> None:
    store.put_meta(f"held_out:{phase}", None if df is None else df.select("hash", "source", "row", "text").to_dicts())


def _curve_texts(run_parity: pl.DataFrame, parity: dict[str, pl.DataFrame],
                 held_out: dict[str, pl.DataFrame | None]) -> tuple[list[str], list[str], str, dict]:
    """The documents of the run file's compression curve, their file names, and what they are:
    each phase's pieces its sample did not take (``held_out``: text the run never trained on), or,
    for a phase that read every document, its parity sample (``training`` text); ``mixed`` when
    phases differ. Without any held-out piece: the run's parity sample, as before."""
    kinds = {name: "held_out" if held_out.get(name) is not None and held_out[name].height else "training"
             for name in parity}
    if all(k == "training" for k in kinds.values()):
        frames = [run_parity]
    else:
        frames = [held_out[name] if k == "held_out" else parity[name] for name, k in kinds.items()]
    docs = pl.concat([f.select("source", "text") for f in frames]) if frames else pl.DataFrame({"source": [], "text": []})
    text = next(iter(set(kinds.values()))) if len(set(kinds.values())) == 1 else "mixed"
    return docs["text"].to_list(), [Path(p).name for p in docs["source"].to_list()], text, kinds


def _check_replay(prior: pa.Table, res: MergeResult, where: str) -> None:
    """The merges recomputed on --resume must begin with the ones the interrupted run checkpointed."""
    k = prior.num_rows
    mine = [res.left[:k], res.right[:k], res.token[:k], res.count[:k], res.reused[:k]]
    theirs = [prior[c].to_numpy(zero_copy_only=False) for c in ("left_id", "right_id", "token_id", "count", "reused")]
    if len(res.left) < k or not all(np.array_equal(a, b.astype(a.dtype)) for a, b in zip(mine, theirs)):
        raise _start_over(ParityError(
            f"{where}--resume: the merges learned again differ from the {k:,} the interrupted run "
            "checkpointed (the inputs or toktok changed); start over with --force"))


def train(cfg: TrainConfig, progress: Progress | None = None, log: Log | None = None) -> TrainSummary:
    """Train a tokenizer as ``cfg`` says and publish it (``cfg.layout()``); raises ToktokError on bad input.

    The allocators are tuned for the run and put back after it (:func:`toktok.alloc.lean`).
    Example: ``train(TrainConfig(["data_fixtures/"], "out/demo", merges=500)).vocab_size``.
    """
    from .alloc import lean

    with lean():
        return _train(cfg, progress, log)


def _train(cfg: TrainConfig, progress: Progress | None = None, log: Log | None = None) -> TrainSummary:
    """Train a tokenizer as ``cfg`` says and publish it (``cfg.layout()``); raises ToktokError on bad input.

    With ``cfg.verbose`` the merges are logged as toktoktok does (the first 10 of each phase and
    every 100th: the pair, the new token, its id and count), one line each to ``log`` (default: stderr).

    Example: ``train(TrainConfig(["data_fixtures/"], "out/demo", merges=500)).vocab_size == 256 + 1161 + 500``
    (when the corpus allows 500 merges).
    """
    cfg.validate()
    report = progress or (lambda stage, done, total: None)
    say = (log or (lambda line: print(line, file=sys.stderr, flush=True))) if cfg.verbose else None
    layout = cfg.layout()
    out = layout.folder
    phases = cfg.phase_list()
    many = len(phases) > 1
    times: dict[str, float] = {"count": 0.0, "merge": 0.0}
    warnings: list[str] = []
    threads, too_many = cfg.thread_count()
    if too_many:
        warnings.append(too_many)

    # 1. budget, inputs, base and output: fail on a budget that cannot work, bad paths and
    #    vocabularies before any work
    release_llvm_pages()  # see there: ~100 MB of RSS that the run never uses
    plan = plan_budget(parse_size(cfg.budget), name=cfg.name_of("budget")) if cfg.budget is not None else None
    batch_bytes = plan.batch_bytes if plan is not None else 32 << 20
    memory_limit = f"{plan.duckdb_bytes >> 20}MiB" if plan is not None else cfg.text_of("memory_limit")
    plans = [_resolve_phase(cfg, ph) for ph in phases]
    warnings += dict.fromkeys(w for srcs in plans for src in srcs for w in src.corpus.warnings)
    vocab, kinds, base = _start_vocab(cfg)
    if base is not None:
        warnings += base.warnings
    vocab.specials, unlisted = _run_specials(cfg.special_tokens, vocab, base)
    if unlisted and cfg.special_tokens:
        warnings.append(f"the base's special tokens {', '.join(map(repr, unlisted))} are not in special_tokens; "
                        "they follow the listed ones (list every special token, as toktoktok needs, to choose the order)")
    vocab.check()
    all_specials = vocab.all_specials()
    cfg.check_roles(all_specials)
    phase_of: list[str | None] = [None] * len(vocab.tokens)
    inputs = [(f.path, "a source") for srcs in plans for src in srcs for f in src.corpus.files if f.kind != "memory"]
    inputs += [(src.path, "a source") for ph in phases for src in ph.sources
               if src.kind != "memory" and os.path.isdir(os.path.expanduser(src.path))]
    if cfg.warm_start is not None:
        inputs.append((cfg.warm_start, "the warm-start base"))
    marks = _Checkpoints()
    staging, resuming = _prepare_out(layout, cfg.force, getattr(cfg, "resume", False), inputs)
    kept = resuming  # whether a failure leaves the staging folder for --resume
    try:
        lock = _lock(staging)
    except OSError as e:  # (another run holding the lock is an OutputError: its folder stays)
        if not resuming:  # made just now by this run
            shutil.rmtree(staging, ignore_errors=True)
        raise OutputError(f"{out}: cannot write here ({e.strerror or e}); pass a writable --out") from None
    try:
        store = RunStore.create(staging / "run.duckdb", memory_limit=memory_limit, threads=threads)
        if resuming:
            _check_same_run(store, cfg, staging)
            _respell(plans, store.get_meta("files"))
            store.drop_outputs()
        fingerprints = [_fingerprint(srcs) for srcs in plans]
        if not resuming:
            store.put_meta("identity", _identity(cfg))
        if not resuming or store.get_meta("files") is None:  # the spelling --resume gives the files
            store.put_meta("files", fingerprints)
        if plan is not None:
            store.put_meta("budget", plan.to_dict())
        store.put_meta("config", cfg.to_dict())
        store.put_meta("versions", _versions())
        store.put_meta("seed", str(cfg.seed))
        store.put_meta("pattern", PATTERN)
        if not resuming:
            store.put_meta("started", time.strftime("%Y-%m-%dT%H:%M:%S%z"))
        else:
            store.put_meta("resumed", time.strftime("%Y-%m-%dT%H:%M:%S%z"))
        if base is not None:
            store.put_meta("warm_start", {**base.summary(), "hardcoded_added": kinds.count("hardcoded")})

        parity = ParitySample()
        # per phase, for the compression curve: its parity sample and the pieces its sample did not take
        phase_parity: dict[str, pl.DataFrame] = {}
        phase_held_out: dict[str, pl.DataFrame | None] = {}
        summaries: list[PhaseSummary] = []
        merge_index = 0
        for phase, sources, fp in zip(phases, plans, fingerprints):
            tag = f" {phase.name}" if many else ""
            where = f"phase {phase.name!r}: " if many else ""
            cp = store.get_checkpoint(phase.name) if resuming else None
            if cp is not None and cp["fingerprint"] != fp:
                changed = next((f[0] for f, g in zip(fp + [[None]], cp["fingerprint"] + [[None]]) if f != g), "?")
                raise ConfigError(f"{where}{changed}: changed since the interrupted run read it; "
                                  "restore it, or start over with --force instead of --resume")

            if cp is not None and cp["stage"] == "merged":
                # 2'. a phase the interrupted run finished: its merges and parity sample from the run file
                first_id = len(vocab.tokens)
                m = store.merges_of(phase.name)
                new = [t for t, r in zip(m["token"].to_pylist(), m["reused"].to_pylist()) if not r]
                vocab = Vocab(list(vocab.tokens) + new, vocab.specials, vocab.pinned)
                kinds += ["merge"] * len(new)
                phase_of += [phase.name] * len(new)
                merge_index += m.num_rows
                parity.merge_frame(pl.from_arrow(store.parity_of(phase.name)))
                phase_parity[phase.name] = pl.from_arrow(store.parity_of(phase.name))
                phase_held_out[phase.name] = _held_out_of(store, phase.name)
                sm = cp["summary"]
                summaries.append(PhaseSummary(**sm))
                warnings += cp["warnings"]
                for k in ("count", "merge"):
                    times[k] += sm["seconds"][k]
                continue

            phase_warnings: list[str] = []
            if cp is not None and cp["stage"] == "counted":
                # 2'. a phase the interrupted run counted: its word table from the run file
                table = pl.from_arrow(store.words_of(phase.name))
                parity.merge_frame(pl.from_arrow(store.parity_of(phase.name)))
                phase_parity[phase.name] = pl.from_arrow(store.parity_of(phase.name))
                phase_held_out[phase.name] = _held_out_of(store, phase.name)
                phase_warnings = cp["warnings"]
                t_count, docs, text_bytes = cp["seconds_count"], cp["docs"], cp["text_bytes"]
            else:
                # 2. read, sample (when the budget says so), pre-tokenize and count
                restored = None
                if resuming:
                    restored = _count_state(store, phase.name, fp)
                    store.drop_phase(phase.name)
                capacity = _phase_capacity(cfg, phase, plan)

                def save(state: CountState, phase=phase, fp=fp) -> None:
                    nonlocal kept
                    kept = True
                    if state.sample is not None:  # before the count state that makes it count
                        _put_held_out(store, phase.name, state.held_out)
                    store.put_count_state(
                        phase.name, state.files_done, {"state": state.used, "fingerprint": fp},
                        words=state.words if state.sample is None else None,
                        parity=state.parity, sample=state.sample)
                    marks.done()

                # counting checkpoints (local engine): at file boundaries every 15x the merge
                # loop's interval (a snapshot of the counts so far), and the finished sample
                count = partial(count_phase, restored=restored, save=save, every=marks.every * 15)
                if cfg.engine == "ray":  # the same PhaseCount, counted on a Ray cluster
                    from .count.ray import count_phase as ray_count_phase

                    count = partial(ray_count_phase, address=cfg.ray_address)
                pc = count(sources, seed=cfg.seed, capacity=capacity, batch_bytes=batch_bytes,
                           specials=all_specials, threads=threads, report=report, tag=tag)
                table, used = pc.words, pc.used
                if plan is not None and table.height:
                    # the merge loop's arrays must fit the budget: drop the rarest words if not
                    lengths = table["word"].bin.size().to_numpy()
                    keep_rows = cap_words(lengths, table["count"].to_numpy(), plan.work_bytes, phase.merges)
                    if len(keep_rows) == 0:
                        n = min(phase.merges, possible_merges(lengths))
                        raise _start_over(ConfigError(
                            f"{where}{cfg.name_of('budget')} {cfg.text_of('budget')}: its share for the word table and the merge loop is "
                            f"{human(plan.work_bytes)}, and {n:,} merges take {human(n * MERGE_BYTES_PER_MERGE)} "
                            "of it before any word; pass a larger --budget or fewer --merges"))
                    if len(keep_rows) < table.height:
                        dropped = table.height - len(keep_rows)
                        lost = 1 - table["count"].gather(keep_rows).sum() / max(table["count"].sum(), 1)
                        table = table[keep_rows]
                        phase_warnings.append(
                            f"{where}the budget holds {len(keep_rows):,} of {len(keep_rows) + dropped:,} distinct "
                            f"words: dropped the {dropped:,} rarest ({lost:.2%} of word occurrences)"
                        )
                t_count = pc.seconds["count"]
                times["sample"] = times.get("sample", 0.0) + pc.seconds.get("sample", 0.0)
                docs = sum(u["docs"] for u in used.values())
                text_bytes = sum(u["bytes"] for u in used.values())
                if table.height == 0:
                    paths = ", ".join(redact(s.path) for s in phase.sources)
                    n_files = sum(len(s.corpus.files) for s in sources)
                    raise _start_over(InputError(
                        f"{where}{paths}: the corpus is empty (no text in {n_files} file(s)); "
                        "check the sources and --text-column"
                    ))
                # checkpoint: the phase's words, inputs and parity sample, all or nothing
                with store.transaction():
                    store.drop_count_state(phase.name)
                    store.put_words(phase.name, table.with_columns(tokens=pl.lit(None, dtype=pl.Int32)))
                    store.put_parity(phase.name, pc.parity)
                    _put_held_out(store, phase.name, pc.held_out)
                    for src in sources:
                        for f in src.corpus.files:
                            st = used[f.path]
                            store.add_input(f.path, f.kind, phase.name, f.size, st["docs"], st["bytes"],
                                            st["docs_seen"], st["bytes_seen"])
                    store.set_checkpoint(phase.name, {
                        "stage": "counted", "fingerprint": fp, "warnings": phase_warnings,
                        "seconds_count": t_count, "docs": docs, "text_bytes": text_bytes})
                kept = True
                marks.done()
                parity.merge_frame(pc.parity)
                phase_parity[phase.name], phase_held_out[phase.name] = pc.parity, pc.held_out
                del pc
            warnings += phase_warnings
            # one copy of the word table during the merges (to_arrow copies the words): the merge
            # stage is the run's peak of memory
            words = table["word"].to_arrow()
            counts = table["count"].to_numpy()
            del table
            store.release_memory()
            release_llvm_pages()

            # 3. merges on top of the vocabulary so far, checkpointed every few seconds; on
            #    --resume the loop runs again from the word table and must agree with the checkpoint
            t0 = time.perf_counter()
            n = phase.merges
            report("merge" + tag, 0, n)
            first_id = len(vocab.tokens)
            prior = store.merges_of(phase.name) if cp is not None else None
            store.drop_merges(phase.name)
            toks = list(vocab.tokens)
            at = [merge_index]
            learned = [0]  # new tokens of this phase so far, for the merge log

            def checkpoint(left, right, token, count, reused, phase=phase, toks=toks, at=at, learned=learned, tag=tag):
                rows = []
                for lt, rt, t, c, r in zip(left.tolist(), right.tolist(), token.tolist(), count.tolist(), reused.tolist()):
                    if not r:
                        toks.append(toks[lt] + toks[rt])
                        learned[0] += 1
                        k = learned[0]
                        if say is not None and (k <= 10 or k % 100 == 0):  # toktoktok's verbose log
                            say(f"{f'[{phase.name}] ' if tag else ''}Merge {k}: \"{_literal(toks[lt])}\" + "
                                f"\"{_literal(toks[rt])}\" -> \"{_literal(toks[t])}\" (id {lt} + {rt} -> {t}, count: {c})")
                    rows.append(toks[t])
                store.add_merges(phase.name, pa.table({
                    "merge_index": pa.array(np.arange(at[0], at[0] + len(left), dtype=np.int32)),
                    "left_id": pa.array(left), "right_id": pa.array(right), "token_id": pa.array(token),
                    "token": pa.array(rows, pa.binary()), "count": pa.array(count),
                    "reused": pa.array(np.asarray(reused, bool)),
                }))
                at[0] += len(left)
                marks.done()

            start = Vocab(vocab.tokens, [], vocab.pinned)
            res = learn_merges(words, counts, start, n, progress=lambda k: report("merge" + tag, k, n),
                               checkpoint=checkpoint, every=marks.every, step=marks.step)
            report("merge" + tag, res.new_tokens, n)
            if prior is not None and prior.num_rows:
                _check_replay(prior, res, where)
            t_merge = time.perf_counter() - t0
            if res.new_tokens < n:
                phase_warnings.append(
                    f"{where}the corpus allows only {res.new_tokens} merges of the {n} asked for "
                    "(no adjacent pair left); the vocabulary is smaller"
                )
                warnings.append(phase_warnings[-1])
            summary = PhaseSummary(
                phase.name, n, res.new_tokens, int(res.reused.sum()), len(words), docs, text_bytes,
                first_id, {"count": t_count, "merge": t_merge},
            )
            with store.transaction():
                store.set_tokens(phase.name, pa.table({"word": words, "count": pa.array(counts),
                                                        "tokens": pa.array(res.word_tokens, pa.int32())}))
                store.set_checkpoint(phase.name, {
                    "stage": "merged", "fingerprint": fp, "warnings": phase_warnings,
                    "summary": dataclasses.asdict(summary)})
            marks.done()
            merge_index += len(res.left)
            vocab = Vocab(res.vocab.tokens, vocab.specials, vocab.pinned)
            kinds += ["merge"] * (len(vocab.tokens) - first_id)
            phase_of += [phase.name] * (len(vocab.tokens) - first_id)
            times["count"] += t_count
            times["merge"] += t_merge
            summaries.append(summary)
            del words, counts, res

        vocab.check()
        store.add_vocab(_vocab_table(vocab, kinds, phase_of))
        store.put_meta("phases", [
            {"name": s.name, "merges_requested": s.merges_requested, "merges_learned": s.merges_learned,
             "reused_merges": s.reused_merges, "words": s.words, "docs": s.docs, "text_bytes": s.text_bytes,
             "first_id": s.first_id, "budget": cfg.phase_budget(ph), "seconds": sum(s.seconds.values()),
             "seconds_count": s.seconds["count"], "seconds_merge": s.seconds["merge"],
             "sources": [{"path": redact(src.path), "weight": src.weight} for src in ph.sources]}
            for s, ph in zip(summaries, phases)
        ])

        keep = parity.df["text"].to_list()

        # 4. export; special ids away from toktoktok's convention are declared beside the .tiktoken
        t0 = time.perf_counter()
        write_tiktoken(vocab, staging / cfg.tiktoken_name)
        specials = _specials_rule(vocab, base, cfg.tiktoken_name)
        store.put_meta("specials", specials)
        if vocab.pinned:
            _write_atomic(special_tokens_file(staging / cfg.tiktoken_name), special_tokens_json(vocab))
        write_hf(vocab, staging, roles=cfg.roles)
        times["export"] = time.perf_counter() - t0

        # 5. verify id parity on the built-in set and on slices of the input
        t0 = time.perf_counter()
        rep = verify(staging, keep, slices=cfg.verify_slices, seed=cfg.seed)
        times["verify"] = time.perf_counter() - t0
        # 6. what the run file offers for inspection: views, the compression curve and token
        #    usage (on text the run did not train on where a budget left some out, else on the
        #    parity sample of the input, labelled by file), word gains
        t0 = time.perf_counter()
        with store.translating():
            add_views(store.con)
            curve, curve_from, curve_text, curve_kinds = _curve_texts(parity.df, phase_parity, phase_held_out)
            if curve:
                compression_curve(store.con, curve, by=curve_from, threads=threads, checkpoints=8,
                                  text=curve_text, text_by_phase=curve_kinds)
            word_gains(store.con)
        times["insight"] = time.perf_counter() - t0
        for k, v in times.items():
            store.add_stage(k, v)
        store.put_meta("parity", {"ok": True, "strings": rep.strings, "tokens": rep.tokens})
        store.put_meta("warnings", warnings)
        store.put_meta("finished", time.strftime("%Y-%m-%dT%H:%M:%S%z"))
        store.close()

        # 7. publish atomically
        lock.close()
        (staging / ".lock").unlink(missing_ok=True)
        _publish(staging, layout)
    except BaseException as e:
        lock.close()
        # keep what a later --resume can continue from (a phase counted, or the interrupted run
        # being resumed); a run that failed before its first checkpoint leaves nothing behind,
        # nor does one whose fix changes the options that --resume must be given unchanged
        over = getattr(e, "start_over", False)
        if not kept or (over and not resuming):
            shutil.rmtree(staging, ignore_errors=True)
        elif isinstance(e, ToktokError) and e.args:
            note = (f"the interrupted run in {staging} cannot continue past this: start over with --force" if over
                    else f"the progress so far is kept in {staging}: fix this and rerun with --resume")
            e.args = (f"{e.args[0]} ({note})", *e.args[1:])
        raise
    return TrainSummary(
        out=out, vocab_size=vocab.size, merges_requested=sum(s.merges_requested for s in summaries),
        merges_learned=sum(s.merges_learned for s in summaries),
        reused_merges=sum(s.reused_merges for s in summaries), words=sum(s.words for s in summaries),
        docs=sum(s.docs for s in summaries), text_bytes=sum(s.text_bytes for s in summaries),
        seconds=times, parity_strings=rep.strings, warnings=warnings, phases=summaries,
        warm_start=base.summary() if base is not None else None, tiktoken=layout.tiktoken, shared=layout.shared,
        specials=specials,
    )


__all__ = ["train", "TrainSummary", "PhaseSummary", "TrainConfig", "parse_size"]
