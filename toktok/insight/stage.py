"""The insight stage's entry (``record``): what a finished run's file offers for inspection.

``record`` adds the run file's views (:func:`.runfile.add_views`), the compression curve on text
the run did not train on where there is some (:func:`.runfile.curve_table`) and the word gains
(:func:`.runfile.gains_table`), built in Arrow (a small run never loads Polars). Example: ``insight.stage.record(run)``.
"""
from __future__ import annotations

import time
from pathlib import Path

import pyarrow as pa

from .runfile import _Prefixes, add_views, curve_table, gains_table

__all__ = ["record"]


def record(run) -> None:
    """The insight stage's entry (the pipeline's step 7, ``run`` its ``_Run``): what the run file
    offers for inspection (:mod:`toktok.insight.runfile`): views, the compression curve and token
    usage (on text the run did not train on where a budget left some out, else on the parity
    sample of the input, labelled by file), word gains. Example: ``record(run_state)``."""
    store = run.store
    t0 = time.perf_counter()
    run.report("insight", 0, 3)
    run.settle()  # word gains read the words' tokens
    with store.translating():
        add_views(store)
        run.report("insight", 1, 3)
        curve, curve_from, curve_text, curve_kinds = _curve_texts(run.parity.df, run.phase_parity, run.phase_held_out)
        pre = _Prefixes(store, run.small)  # the vocabulary by merge count, read once for both
        if curve:
            curve_table(store, curve, by=curve_from, threads=run.threads, checkpoints=8,
                        text=curve_text, text_by_phase=curve_kinds, reference=run.small, prefixes=pre)
        run.report("insight", 2, 3)
        gains_table(store, reference=run.small, prefixes=pre)
        # the blocks its queries and writes left cached, given back before the verification
        # loads tiktoken's half beside HF's load (the tail's peak at 131,072: 412 MB, not 423)
        store.release_memory()
    run.report("insight", 3, 3)
    run.times["insight"] = time.perf_counter() - t0


def _curve_texts(run_parity: pa.Table, parity: dict[str, pa.Table],
                 held_out: dict[str, pa.Table | None]) -> tuple[list[str], list[str], str, dict]:
    """The documents of the run file's compression curve, their file names, and what they are:
    each phase's pieces its sample did not take (``held_out``: text the run never trained on), or,
    for a phase that read every document, its parity sample (``training`` text); ``mixed`` when
    phases differ. Without any held-out piece: the run's parity sample, as before."""
    kinds = {name: "held_out" if held_out.get(name) is not None and held_out[name].num_rows else "training"
             for name in parity}
    if all(k == "training" for k in kinds.values()):
        tables = [run_parity]
    else:
        tables = [held_out[name] if k == "held_out" else parity[name] for name, k in kinds.items()]
    texts = [t for table in tables for t in table.column("text").to_pylist()]
    sources = [Path(p).name for table in tables for p in table.column("source").to_pylist()]
    text = next(iter(set(kinds.values()))) if len(set(kinds.values())) == 1 else "mixed"
    return texts, sources, text, kinds
