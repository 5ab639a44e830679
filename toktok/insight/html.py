"""``toktok report``: one self-contained HTML page about one or more runs, readable offline.

The page holds what ``toktok show`` says (the summary, sources, phases), the compression curve
per subset of the curve's text (bytes per token over the merges), the pair count of each merge
(the decay), token lengths by kind and phase, and a vocabulary browser (search by text or id;
each token's kind, phase, parents, pair count when merged and count in the training words; text
shown escaped where not printable, hex on demand). Several runs are compared side by side.

Nothing is fetched: the plots are SVG drawn by the page's own script
(``toktok/insight/assets/report.js``), and the data are JSON in the page, one block per run and
one per run's vocabulary (parsed when the browser first shows it). A token's text is its bytes
decoded as UTF-8 with each byte that is not valid UTF-8 on its own carried as U+DC80..U+DCFF
(Python's ``surrogateescape``), which the page shows as ``\\xNN``; never GPT-2's byte-level
spelling. Example: ``report(["out/small", "out/big"], "report.html")``.
"""
from __future__ import annotations

import io
import json
import os
import re
from html import escape
from pathlib import Path
from typing import Sequence

import numpy as np

from ..errors import ConfigError, OutputError, not_regular
from ..rundir import COMPANION_SUFFIX, check_out_parent, real, special_tokens_file
from .runfile import RunLike, _connect, _ensure_views, _Prefixes, describe, run_path

#: The page's template, style and script (package data).
ASSETS = Path(__file__).resolve().parent / "assets"
#: At most this many points of a run's decay are drawn (its counts sampled on a linear and a
#: logarithmic grid of ranks, so both axes read well).
DECAY_POINTS = 1200
#: Token lengths above this many bytes share the last bar.
LENGTH_CAP = 40


def report(runs: Sequence[RunLike], path: str | os.PathLike, *, names: Sequence[str] | None = None,
           force: bool = False) -> Path:
    """Write one HTML page about ``runs`` (output folders or run files) to ``path``; returns it.

    ``names``: a label per run (default: its folder's name, made unique). The file is written
    whole or not at all (a temporary file beside it, renamed). ConfigError without runs,
    OutputError for a ``path`` that is a folder or a file in one of the runs' folders (its
    ``ladder/N/`` too), and for an existing file that is not a toktok report (``force``: replaced).
    Example: ``report(["out/demo"], "out/demo.html")``.
    """
    runs = [runs] if isinstance(runs, (str, os.PathLike)) else list(runs)  # (one run, as a path)
    if not runs:
        raise ConfigError("no runs given; pass one or more toktok output folders (or their run.duckdb)")
    if names is not None and len(names) != len(runs):
        raise ConfigError(f"{len(names)} names for {len(runs)} runs; give one name per run")
    out = Path(path).expanduser()
    _check_target(out, runs, force)
    labels = list(names) if names is not None else _labels(runs)
    page = render([run_data(r, n) for r, n in zip(runs, labels)])
    try:
        tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_bytes(page)
        os.replace(tmp, out)
    except OSError as e:
        tmp.unlink(missing_ok=True)
        raise OutputError(f"{out}: cannot write the report ({e.strerror or e}); pass a path you can write") from None
    return out


#: What every report's head holds (``assets/report.html``): a file with it is a toktok report.
GENERATOR = b'<meta name="generator" content="toktok report">'


def _check_target(out: Path, runs: list, force: bool = False) -> None:
    """``out`` may be written: not a folder, not a file in a run's folder (but a new or earlier
    report there), and, unless ``force``, not an existing file other than a toktok report."""
    check_out_parent(os.fspath(out))
    if out.is_dir():
        raise OutputError(f"{out}: is a folder; pass the report's file name, e.g. {out / 'report.html'}")
    if (what := not_regular(out)) is not None:  # (--force would put a file in place of /dev/null)
        raise OutputError(f"{out}: is {what}, not a file; pass the report's file name, e.g. report.html")
    target = real(out)  # (links resolved as far as they go: a loop raises nothing here)
    for r in runs:
        if isinstance(r, (str, os.PathLike)):
            rp = real(run_path(r))
            if target == rp or target in _beside(rp.parent) or \
                    (rp.parent in target.parents and os.path.lexists(out) and not _is_report(out)):
                raise OutputError(f"{out}: would overwrite a file of the run in {rp.parent}; pass another path "
                                  "(e.g. report.html)")
    if os.path.lexists(out) and not force and not _is_report(out):
        raise OutputError(f"{out}: exists and is not a toktok report; pass another path (e.g. report.html), "
                          "or --force to replace it")


def _beside(folder: Path) -> set[Path]:
    """A run's files outside its folder: the ``NAME.tiktoken`` (and its special-token list) of
    ``output: ./NAME.tiktoken``, whose run is the ``NAME.toktok`` folder beside it."""
    if not folder.name.endswith(COMPANION_SUFFIX):
        return set()
    tiktoken = folder.parent / (folder.name[: -len(COMPANION_SUFFIX)] + ".tiktoken")
    return {tiktoken, special_tokens_file(tiktoken)}


def _is_report(path: Path) -> bool:
    """Whether ``path`` is a regular file whose head is a toktok report's."""
    try:
        if not path.is_file():
            return False
        with open(path, "rb") as f:
            return GENERATOR in f.read(4096)
    except OSError:
        return False


def _labels(runs: list) -> list[str]:
    """Each run's folder name (a run file's folder), with its parent's where two are alike."""
    paths = [run_path(r) if isinstance(r, (str, os.PathLike)) else None for r in runs]
    names = [p.parent.name if p is not None else f"run {i + 1}" for i, p in enumerate(paths)]
    for i, n in enumerate(names):
        if names.count(n) > 1 and paths[i] is not None:
            names[i] = f"{paths[i].parent.parent.name}/{n}"
    seen: dict[str, int] = {}
    for i, n in enumerate(names):
        seen[n] = seen.get(n, 0) + 1
        if seen[n] > 1:
            names[i] = f"{n} ({seen[n]})"
    return names


# ---------------------------------------------------------------------------------------------
# What the page shows of one run
# ---------------------------------------------------------------------------------------------


def run_data(run: RunLike, name: str) -> dict:
    """The page's data about one run: ``summary`` (``toktok show``'s text), ``sources``,
    ``phases``, ``curve``, ``decay``, ``lengths`` and ``vocab`` (column arrays by id: ``t`` text,
    ``k``/``p`` kind and phase codes run-length encoded, ``l``/``r`` parents, ``q`` pair count when
    merged, ``c`` count in the training words).
    Example: ``run_data("out/demo", "demo")["vocab"]["n"] == 3418``."""
    d = describe(run)
    with _connect(run, read_only=True) as store:
        _ensure_views(store)
        vocab = store.arrow("report.vocab")
        merge_counts = store.arrow("report.merge_counts")["count"].to_numpy()
        curve = store.arrow("report.curve").to_pylist()
        sources = store.arrow("report.sources").to_pylist()
        uses = _uses_in_words(store, vocab.num_rows)
    tokens = [bytes(t).decode("utf-8", "surrogateescape") for t in vocab["token"].to_pylist()]
    kinds, kind_of = _codes(vocab["kind"].to_pylist())
    phases, phase_of = _codes(vocab["phase"].to_pylist())
    return {
        "name": name,
        "path": d.get("run"),
        "summary": _summary_text(d),
        "vocabSize": d.get("vocab_size"),
        "parts": d.get("vocab") or {},
        "curveText": (d.get("sample") or {}).get("text"),
        "sources": sources,
        "phases": [{k: r.get(k) for k in ("phase", "merges", "reused", "first_id", "last_id", "max_count", "last_count",
                                          "files", "docs", "text_bytes", "words", "vocab_share")} for r in d["phases"]],
        "curve": _curve(curve),
        "decay": _decay(merge_counts),
        "lengths": _lengths([len(t) for t in vocab["token"].to_pylist()], vocab["kind"].to_pylist(),
                            vocab["phase"].to_pylist()),
        "vocab": {
            "n": vocab.num_rows, "t": tokens, "kinds": kinds, "k": _runs(kind_of), "phases": phases, "p": _runs(phase_of),
            "l": _ints(vocab["left_id"]), "r": _ints(vocab["right_id"]),
            "q": _ints(vocab["pair_count"], 0), "c": uses.tolist(),
        },
    }


def _codes(values: list) -> tuple[list, list[int]]:
    """The distinct values (in order of first appearance; None left out) and each value's index
    into them (-1 for None)."""
    distinct: dict = {}
    for v in values:
        if v is not None and v not in distinct:
            distinct[v] = len(distinct)
    return list(distinct), [distinct[v] if v is not None else -1 for v in values]


def _runs(codes: list[int]) -> list[int]:
    """``codes`` run-length encoded as ``[value, length, value, length, ...]`` (ids come in runs
    of one kind and phase: bytes, hardcoded, each phase's merges, specials).
    Example: ``_runs([0, 0, 1]) == [0, 2, 1, 1]``."""
    out: list[int] = []
    for c in codes:
        if out and out[-2] == c:
            out[-1] += 1
        else:
            out += [c, 1]
    return out


def _ints(col, null: int = -1) -> list[int]:
    return [null if v is None else int(v) for v in col.to_pylist()]


def _uses_in_words(store, n: int) -> np.ndarray:
    """How often each id occurs in the training words encoded with the final tokenizer (each
    word as one piece, times its count; every phase's words)."""
    from ..count.sample import widened  # (DuckDB gives BLOBs as binary)

    words = store.arrow("report.words")
    uses = np.zeros(n, np.int64)
    if not words.num_rows:
        return uses
    pre = _Prefixes(store, reference=True)
    flat, off = pre.segment(pre.n_merges, widened(words["word"].combine_chunks()))
    weight = np.repeat(words["count"].to_numpy().astype(np.int64), np.diff(off))
    # integer sums (bincount adds in float64: exact below 2**53)
    got = np.bincount(flat, weights=weight, minlength=n).astype(np.int64)
    uses[: len(got)] = got[:n]
    return uses


def _summary_text(d: dict) -> str:
    """``toktok show``'s summary as plain text (100 columns)."""
    from rich.console import Console

    from .report import run_summary

    buf = io.StringIO()
    Console(file=buf, width=100, color_system=None, markup=False, emoji=False, highlight=False,
            force_terminal=False, legacy_windows=False).print(run_summary(d))
    return "\n".join(line.rstrip() for line in buf.getvalue().splitlines())


def _curve(rows: list[dict]) -> dict:
    """The compression curve as columns: ``k`` (merges), ``size`` (ids) and bytes per token per
    subset (``all`` first), rounded to 4 decimals."""
    ks = sorted({r["merges"] for r in rows})
    at = {k: i for i, k in enumerate(ks)}
    size = [0] * len(ks)
    subsets: dict[str, list] = {}
    for r in rows:
        size[at[r["merges"]]] = r["vocab_size"]
        subsets.setdefault(r["subset"], [None] * len(ks))[at[r["merges"]]] = (
            None if r["bytes_per_token"] is None else round(r["bytes_per_token"], 4))
    return {"k": ks, "size": size, "subsets": subsets}


def _decay(counts: np.ndarray) -> dict:
    """The pair count of each merge, at most ``DECAY_POINTS`` of them (ranks from 1)."""
    n = len(counts)
    if n <= DECAY_POINTS:
        idx = np.arange(n)
    else:
        half = DECAY_POINTS // 2
        idx = np.unique(np.concatenate([np.linspace(0, n - 1, half).round(),
                                        np.geomspace(1, n, half).round() - 1]).astype(np.int64))
    return {"rank": (idx + 1).tolist(), "count": counts[idx].astype(np.int64).tolist(), "n": n}


def _lengths(lengths: list[int], kinds: list[str], phases: list) -> dict:
    """How many tokens have each length in bytes (the last bucket: ``LENGTH_CAP`` and more), per
    kind, learned tokens per phase where the run has several phases."""
    many = len({p for k, p in zip(kinds, phases) if k == "merge"}) > 1
    top = min(max(lengths, default=1), LENGTH_CAP)
    groups: dict[str, list[int]] = {}
    for n, k, p in zip(lengths, kinds, phases):
        g = f"{k} · {p}" if (k == "merge" and many) else k
        groups.setdefault(g, [0] * top)[min(n, top) - 1] += 1
    return {"max": top, "capped": max(lengths, default=0) > LENGTH_CAP, "groups": groups}


# ---------------------------------------------------------------------------------------------
# The page
# ---------------------------------------------------------------------------------------------


def _json_block(value) -> str:
    """``value`` as JSON safe inside ``<script type="application/json">``: no ``<`` (so no
    ``</script>``), and the lone surrogates of undecodable bytes as ``\\udcXX`` escapes."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    text = text.replace("<", "\\u003c")
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def render(datas: list[dict]) -> bytes:
    """The page (UTF-8) for the runs' data (:func:`run_data`)."""
    template = (ASSETS / "report.html").read_text(encoding="utf-8")
    blocks = []
    for i, d in enumerate(datas):
        vocab = d["vocab"]
        head = {k: v for k, v in d.items() if k != "vocab"}
        blocks.append(f'<script type="application/json" id="run-{i}">{_json_block(head)}</script>')
        blocks.append(f'<script type="application/json" id="vocab-{i}">{_json_block(vocab)}</script>')
    title = "toktok report: " + ", ".join(d["name"] for d in datas)
    parts = {
        "title": escape(title),
        "style": (ASSETS / "report.css").read_text(encoding="utf-8"),
        "data": "\n".join(blocks),
        "script": (ASSETS / "report.js").read_text(encoding="utf-8"),
    }
    # one pass over the template: what goes in (tokens, paths) is never read for marks
    template = re.sub(r"\{\{(\w+)\}\}", lambda m: parts[m.group(1)], template)
    return template.encode("utf-8")


__all__ = ["report", "run_data", "render", "ASSETS"]
