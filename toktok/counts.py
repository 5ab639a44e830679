"""``toktok count``: a corpus's word table written out, for ``toktok train --word-counts``.

``count(sources, out=...)`` reads, samples and counts the sources exactly as the count stage of
``toktok train`` with the same options would (the pattern, special tokens, ``--budget`` /
``--working-set-mb`` sampling and seed, engine, threads, text column, bad UTF-8), and writes the
word table that run would merge as Parquet (:func:`toktok.count.tables.write_counts`): ``word``
binary, ``count`` int64, sorted by word; the metadata key ``toktok`` records the pattern, the
special tokens cut out, the files read with their documents and bytes, the seed and budget, and
toktok's version. A memory budget's cut of the word table to the merge loop's share (which
depends on the merges a run asks for) is not applied: the table is the counted one.
Like ``pipeline``, it runs a stage from the finished options; the edges call it.
Example: ``count(["data_fixtures/"], out="counts.parquet").words``.
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import __version__
from .errors import OutputError, not_regular


@dataclass(frozen=True)
class CountResult:
    """What ``count`` wrote: the Parquet file, its words and their total count, the documents and
    text bytes counted, the warnings and the seconds it took."""

    out: Path
    words: int
    total: int
    docs: int
    text_bytes: int
    warnings: list[str]
    seconds: float


def count(sources: list, *, out: str | os.PathLike, force: bool = False, progress: Any = None,
          console: Any = None, **options: Any) -> CountResult:
    """The word table of ``sources`` (files, folders, globs, URLs) as ``toktok train`` with the
    same ``options`` (keywords of ``toktok.train``: ``pattern``, ``special_tokens``, ``budget``,
    ``seed``, ``engine``, ``threads``, ``text_column``, ``bad_utf8``, ``working_set_mb``,
    ``warm_start`` for its pattern and specials, ...) counts it, written to the Parquet file
    ``out`` (an existing file only with ``force``). ``progress`` is as ``toktok.train``'s: a mode
    of ``--progress`` (``rich``, whose bars go to ``console``, ``plain``, ``json``: JSON lines
    ending with the result's figures or the error, ``none``) or a callable
    ``progress(stage, done, total)`` (None: nothing).
    Example: ``count(["data/"], out="c.parquet", pattern="o200k").words > 0``."""
    from .options import OPTION
    from .progress import reported

    mode = OPTION["progress"].check(progress, "progress") if progress is not None else None
    return reported(mode, lambda rep: _count(sources, out=out, force=force, report=rep, **options), console=console)


def _count(sources: list, *, out: str | os.PathLike, force: bool, report: Any, **options: Any) -> CountResult:
    """``count``'s work, reporting to ``report(stage, done, total)``."""
    from . import start
    from .budget import plan_budget
    from .config import build_config
    from .count.local import Source, count_phase
    from .count.stage import engine, resolve
    from .count.tables import write_counts
    from .options import OPTION
    from .rundir import check_out_parent

    t0 = time.perf_counter()
    if isinstance(sources, (str, os.PathLike)):  # one source, as toktok.train takes it
        sources = [sources]
    path = Path(os.path.expanduser(OPTION["out"].check(out, "out")))
    check_out_parent(os.fspath(path))
    if path.is_dir() or not path.name.endswith(".parquet"):
        raise OutputError(f"{out}: the word table is one Parquet file; pass --out NAME.parquet")
    if (what := not_regular(path)) is not None:  # (--force would put a file in place of /dev/null)
        raise OutputError(f"{out}: is {what}, not a file; pass --out NAME.parquet")
    if os.path.lexists(path) and not force:  # (a dangling link too: it is not replaced unasked)
        raise OutputError(f"{out}: exists; pass --force to replace it")
    cfg = build_config(None, list(sources), {**options, "out": str(path.parent / f".{path.name}.run"), "merges": 0},
                       named=lambda k: getattr(OPTION.get(k), "flag", None) or f"--{k.replace('_', '-')}").describe()
    phase = cfg.phases[0]
    ray_count = engine(cfg, [phase])
    st = start.vocabulary(cfg, [phase])
    plan = plan_budget(cfg.budget, name=cfg.name_of("budget")) if cfg.budget is not None else None
    srcs: list[Source] = resolve(cfg, phase)
    _check_inputs(srcs, path, cfg.warm_start)
    caps = [c for c in (plan.sample_bytes if plan else None, cfg.working_set_text, phase.budget) if c is not None]
    kw = dict(seed=cfg.seed, capacity=min(caps) if caps else None, specials=st.specials, threads=cfg.threads,
              report=report, pattern=st.pattern)
    if plan is not None:
        kw["batch_bytes"] = plan.batch_bytes
    pc = (ray_count(srcs, address=cfg.ray_address, **kw) if ray_count is not None else count_phase(srcs, **kw))
    warnings = list(dict.fromkeys(w for s in srcs for w in s.corpus.warnings))
    used = pc.used
    meta = {"pattern": st.pattern.to_dict(), "special_tokens": st.specials, "toktok_version": __version__,
            "seed": cfg.seed, "budget": cfg.budget, "sampled": kw["capacity"] is not None,
            # in the order of the sources' files (a Ray count's units come back in any order)
            "read": [{"path": f.path, **used[f.path]} for s in srcs for f in s.corpus.files if f.path in used]}
    write_counts(pc.words, path, meta)
    total = int(sum(pc.words.column("count").to_pylist())) if pc.words.num_rows < 1 << 20 else \
        int(pc.words.column("count").to_numpy().sum())
    return CountResult(path, pc.words.num_rows, total, sum(u["docs"] for u in used.values()),
                       sum(u["bytes"] for u in used.values()), warnings, time.perf_counter() - t0)


def _check_inputs(srcs: list, path: Path, warm_start) -> None:
    """No file the count reads (a source's, the warm-start base) may be the file it writes, with or
    without ``force``: the count would replace the data it read."""
    from .rundir import real

    target = real(path.parent) / path.name  # (a link there is replaced itself, not what it points to)
    files = [f.path for s in srcs for f in s.corpus.files] + ([os.fspath(warm_start)] if warm_start else [])
    for f in files:
        if "://" not in f and real(f) == target:
            raise OutputError(f"{f}: is an input of this count and its --out; write the word table elsewhere "
                              "(e.g. counts.parquet)")
