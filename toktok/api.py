"""The Python API: ``toktok.train`` on paths or data in memory, with the CLI's options as keywords.

``train`` takes the sources (paths, folders, globs, or data in memory: see :mod:`toktok.memory`)
and every option of ``toktok train`` / a YAML config as a keyword of the same name
(:data:`toktok.options.OPTIONS`, checked by tests/test_api.py); ``config="run.yaml"`` reads a
config first and the keywords override it, as flags do. It returns a :class:`TrainResult`. The CLI
builds its ``TrainConfig`` from flags and runs it through :func:`train_config`, as ``train`` does.

Example::

    import toktok
    r = toktok.train("data/", out="out/tok", merges=1000, special_tokens=["<|endoftext|>"])
    r = toktok.train([texts], out="out/tok", merges=1000)    # a list of str is ONE source: [texts]
    r.encoding.encode("hello")                                # a tiktoken.Encoding
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field, fields
from functools import cached_property
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Optional, Sequence, Union

from .config import PhaseConfig, SourceConfig, TrainConfig, build_config
from .errors import ConfigError, InputError, shown
from .summary import PhaseSummary, TrainSummary

#: How a run reports progress: ``progress(stage, done, total)`` (total may be None), or a mode of
#: ``--progress``: "rich", "plain", "json" or "none" (:mod:`toktok.progress`).
Progress = Union[Callable[[str, int, Optional[int]], None], str]


@dataclass
class Source:
    """One source with its options: ``Source(df, name="wiki", weight=2, text_column="body")``.

    ``data`` is a path, folder or glob (str or ``os.PathLike``), or data in memory (an iterable of
    str, a pyarrow Table / RecordBatchReader / dataset, a Polars DataFrame / LazyFrame, a pandas
    DataFrame, a ``datasets.Dataset`` / ``IterableDataset``). ``name`` labels data in memory in the
    run file (default ``source-1``, ``source-2``, ... in the order given); ``weight`` is its share of
    its phase's budget; ``text_column`` overrides the run's; ``storage_options`` (for a URL:
    credentials, endpoint, ...) go over the run's, key by key. ``counts=True``: ``data`` is a
    word-count table (Parquet file, folder or glob; a YAML phase's ``counts:`` source), its
    columns ``word_column`` and ``count_column`` (default the run's).
    """

    data: Any
    name: str | None = None
    weight: float | None = None
    text_column: str | None = None
    storage_options: Mapping[str, Any] | None = None
    counts: bool = False
    word_column: str | None = None
    count_column: str | None = None


@dataclass
class Phase:
    """One training phase: ``Phase("code", merges=500, sources=["code/"], budget="100MB")``.

    As a YAML config's ``phases:`` entry: its ``name``, the ``merges`` it learns (or its
    ``vocab_size``: the total ids after it, special tokens included), its ``sources`` (each a
    path, data in memory or a :class:`Source`), its own ``budget`` (bytes of text, or a size
    such as ``"100MB"``) and its own ``pattern`` (a name such as ``"superbpe"`` or a regex; default
    the run's; the tokenizer splits text with the last phase's).
    """

    name: str
    merges: int | None = None
    sources: Sequence[Any] = ()
    budget: int | str | None = None
    vocab_size: int | None = None
    pattern: str | None = None


@dataclass
class TrainResult(TrainSummary):
    """What ``toktok.train`` wrote and learned.

    ``out``: toktok's output folder (tokenizer.json, the transformers files, run.duckdb);
    ``tiktoken``: the .tiktoken file; ``files``: every file written, by name; ``phases``: one
    :class:`~toktok.summary.PhaseSummary` per phase; plus the run's totals (``vocab_size``,
    ``merges_learned``, ``docs``, ``text_bytes``, ``seconds``, ``warnings``, ...).
    ``encoding`` is a ready ``tiktoken.Encoding``, ``hf()`` a ready
    ``transformers.PreTrainedTokenizerFast`` and ``run()`` a read-only DuckDB connection to the
    run file.
    Example: ``r.encoding.encode("hello") == r.hf().encode("hello")``.
    """

    files: dict[str, Path] = field(default_factory=dict)

    @classmethod
    def of(cls, s: TrainSummary) -> TrainResult:
        r = cls(**{f.name: getattr(s, f.name) for f in fields(TrainSummary)})
        r.files = {p.name: p for p in sorted(Path(r.out).iterdir()) if p.is_file()}
        if r.tiktoken is not None:
            from .rundir import special_tokens_file

            for p in (r.tiktoken, special_tokens_file(r.tiktoken)):
                if p.is_file():
                    r.files[p.name] = p
        return r

    @cached_property
    def encoding(self):
        """The trained tokenizer as a ``tiktoken.Encoding`` (special tokens included)."""
        from .formats.tiktoken import load_encoding

        return load_encoding(self.tiktoken if self.tiktoken is not None else self.out)

    def hf(self):
        """The trained tokenizer as a ready ``transformers.PreTrainedTokenizerFast`` (its roles,
        added-token flags and chat template from tokenizer_config.json): the same ids as
        ``encoding``, and ``apply_chat_template``. Needs transformers (``pip install
        'toktok[transformers]'``); ConfigError saying so without it. HF tokenizers' own
        ``tokenizers.Tokenizer`` is ``r.hf().backend_tokenizer``, or
        ``tokenizers.Tokenizer.from_file(r.files["tokenizer.json"])`` without transformers."""
        try:
            from transformers import PreTrainedTokenizerFast
        except ImportError:
            raise ConfigError("TrainResult.hf() needs transformers: pip install 'toktok[transformers]' (or load "
                              "tokenizer.json with tokenizers.Tokenizer.from_file)") from None
        return PreTrainedTokenizerFast.from_pretrained(str(self.out))

    def report(self, path: str | os.PathLike = "report.html") -> Path:
        """Write the run's HTML report (``toktok report``: summary, curves, token lengths, a
        vocabulary browser; one file, readable offline) to ``path``; returns its path."""
        from .insight.html import report

        return report([self.out], path)

    def run(self):
        """A read-only DuckDB connection to the run file (``run.duckdb``: tables and views in
        docs/runfile.md); close it when done."""
        import duckdb

        from .rundir import RUN_FILE

        return duckdb.connect(str(Path(self.out) / RUN_FILE), read_only=True)


def read_soon(cfg: TrainConfig) -> None:
    """The run's word-count table read from now on, before the pipeline is imported
    (:func:`toktok.count.early.read_soon`), where its count stage reads it whole at once
    (``toktok.count.stage.start``): the first source of the first phase, one Parquet file with
    the usual columns, on a fresh run without a memory budget. Anything else is read as ever."""
    try:
        first = cfg.phase_list()[0].sources[0]
    except Exception:  # (a hint only: what is wrong is said where the run checks it)
        return
    columns = (first.word_column or cfg.word_column, first.count_column or cfg.count_column)
    if first.kind == "counts" and not cfg.resume and cfg.budget is None and columns == ("word", "count") \
            and isinstance(first.path, str):
        from .count.early import read_soon as read

        read(first.path)


def train_config(cfg: TrainConfig, *, progress: Progress | None = None,
                 log: Callable[[str], None] | None = None, console: Any = None) -> TrainResult:
    """Run a ``TrainConfig`` (validated here) and return its :class:`TrainResult`. ``progress``
    (default: ``cfg.progress``; None reports nothing) is a callable or a mode of ``--progress``
    (:func:`toktok.progress.reporter`, whose Rich bars go to ``console``): it hears the run's end
    too (a ``json`` one writes the summary, or the error, as its last line)."""
    from .options import OPTION

    read_soon(cfg)
    from .pipeline import train as run
    from .progress import reported

    mode = progress if progress is not None else cfg.progress
    if mode is not None:
        mode = OPTION["progress"].check(mode, cfg.name_of("progress"))
    return reported(mode, lambda rep: TrainResult.of(run(cfg.describe(), progress=rep, log=log)), console=console)


def train(
    sources: Any = None,
    *,
    config: str | os.PathLike | None = None,
    out: str | os.PathLike | None = None,
    output: str | os.PathLike | None = None,
    merges: int | None = None,
    vocab_size: int | None = None,
    pad_to_multiple_of: int | None = None,
    max_token_length: int | None = None,
    min_frequency: int | None = None,
    ladder: Sequence[int] | str | None = None,
    word_counts: str | os.PathLike | Sequence[str | os.PathLike] | None = None,
    word_column: str | None = None,
    count_column: str | None = None,
    special_tokens: Sequence[str | Mapping[str, Any]] | None = None,
    text_column: str | None = None,
    bad_utf8: str | None = None,
    hardcoded: bool | None = None,
    pattern: str | None = None,
    superbpe: int | None = None,
    warm_start: str | os.PathLike | None = None,
    budget: int | str | None = None,
    force: bool | None = None,
    resume: bool | None = None,
    memory_limit: int | str | None = None,
    threads: int | None = None,
    seed: int | None = None,
    working_set_mb: int | None = None,
    engine: str | None = None,
    ray_address: str | None = None,
    roles: Mapping[str, str] | None = None,
    storage_options: Mapping[str, Any] | None = None,
    chat_template: str | os.PathLike | None = None,
    verbose: bool | None = None,
    progress: Progress | None = None,
    phases: Sequence[Phase] | None = None,
    log: Callable[[str], None] | None = None,
) -> TrainResult:
    """Train a byte-level BPE tokenizer and write it (.tiktoken, tokenizer.json, run.duckdb).

    ``sources``: one source or a list of them. A source is a path, folder or glob (str or
    ``os.PathLike``, as on the command line), data in memory (an iterable of str, a pyarrow Table,
    RecordBatchReader or dataset, a Polars DataFrame or LazyFrame, a pandas DataFrame, a Hugging
    Face ``Dataset`` or ``IterableDataset``; read in Arrow batches, in one pass) or a
    :class:`Source` with a name, weight or text column of its own. A list of str is a list of
    paths; to train on a list of texts, pass it as one source: ``train([texts], ...)``.
    Every other keyword is the option of the same name of ``toktok train`` and of a YAML config
    (``--memory-limit`` is ``memory_limit``, ``--bos-token`` is ``roles={"bos_token": ...}``,
    ``-q`` is ``verbose=False``); None leaves an option at the config's value or its default.
    Sizes take ints (bytes) or strings such as ``"512MB"``. ``config`` reads a YAML config first;
    ``phases`` is a list of :class:`Phase`. ``special_tokens`` entries are texts, or mappings /
    :class:`~toktok.added.SpecialToken` with HF's added-token flags
    (``{"content": "<|eot|>", "rstrip": True}``). ``progress`` is a callable
    ``progress(stage, done, total)`` or a mode of ``--progress`` ("rich", "plain", "json" on
    stderr, "none"; default: nothing); ``log(line)`` receives the verbose merge log. Raises a
    ``ToktokError`` (one line naming the option or input and what to do) on bad input, before any
    work where it can.

    Example::

        import polars as pl, toktok
        df = pl.read_parquet("data/wiki.parquet")
        r = toktok.train(df, out="out/wiki", merges=8000, special_tokens=["<|endoftext|>"],
                         budget="2GB", seed=1)
        r.encoding.encode("hello world")   # a tiktoken.Encoding
        r.hf().encode("hello world")       # the same ids from transformers
        r.run().sql("select * from phases").show()
    """
    given = {k: v for k, v in locals().items()
             if k not in ("sources", "config", "log", "phases") and v is not None}
    cfg = _config(sources, config, phases, given)
    try:
        return train_config(cfg, log=log)
    except InputError as e:
        if "no such file or directory" in str(e) and isinstance(sources, (list, tuple)) and all(
                isinstance(s, str) for s in sources):
            raise InputError(f"{e} (a list of str is a list of paths; to train on texts, pass it as one source: "
                             "[texts])") from None
        raise


def _config(sources: Any, config: Any, phases: Any, given: dict) -> TrainConfig:
    """The ``TrainConfig`` of ``train``'s arguments: ``given`` holds the options passed (not None)."""
    if phases is not None:
        if sources is not None:
            raise ConfigError("sources given both as sources= and in phases=; give each phase its sources")
        given["phases"] = list(phases)
    names = _Names()
    if "phases" in given:
        given["phases"] = [_phase(ph, k, names) for k, ph in enumerate(given["phases"])]
    _not_texts(sources)  # (first: a list of a million documents is told so at once)
    srcs = [] if sources is None else [_source(s, names) for s in _as_list(sources)]
    if config is not None and srcs:
        raise ConfigError(f"sources given both in config={os.fspath(config)!r} and as sources=; put them in "
                          "the config's phases, or leave config out")
    for k in ("special_tokens",):
        if k in given and not isinstance(given[k], str):
            given[k] = list(given[k])
    for k in ("roles", "storage_options"):
        if k in given:
            given[k] = dict(given[k])
    for k in ("out", "output", "warm_start", "chat_template"):
        if isinstance(given.get(k), os.PathLike):  # anything else: the option's check names it
            given[k] = os.fspath(given[k])
    if config is None and given.get("out") is None and given.get("output") is None:
        raise ConfigError("no output given; pass out='DIR' (the output folder) or output='DIR/NAME.tiktoken'")
    return build_config(None if config is None else os.fspath(config), srcs, given, named=lambda k: k)


#: How many of a list's str :func:`_not_texts` asks the file system about: a list of paths names
#: one among its first (a million documents were asked about one by one: 7.8 s).
_PROBED = 64


def _not_texts(sources: Any) -> None:
    """A list of str is a list of paths; when none of its first :data:`_PROBED` is an existing
    path, a glob that matches or a URL, it is most likely a list of documents: one line saying how
    to pass those."""
    import glob

    from .count.remote import is_url

    if not isinstance(sources, (list, tuple)) or not sources or not isinstance(sources[0], str):
        return
    probed = sources[:_PROBED]
    if not all(isinstance(s, str) for s in probed):
        return
    for s in probed:
        if "\n" in s or "\0" in s or len(s) > 4096:
            continue
        try:
            path = os.path.expanduser(s)  # as the sources are read (count.sources.resolve_sources)
            if is_url(s) or os.path.lexists(path) or next(glob.iglob(path, recursive=True), None) is not None:
                return
        except (OSError, ValueError):
            continue
    n = len(sources)
    which = "that are not paths" if n <= _PROBED else f"whose first {_PROBED} are not paths"
    raise InputError(f"a list of {n} str {which} (the first: {shown(sources[0], 40)}); a list of str "
                     "is a list of paths: check them, or to train on texts pass [texts] or toktok.Source(texts)")


class _Names:
    """Names of in-memory sources: given, or ``source-1``, ``source-2``, ... in the order given."""

    def __init__(self) -> None:
        self.k = 0
        self.used: set[str] = set()

    def take(self, name: str | None) -> str:
        from .count.memory import default_name

        if name is None:
            self.k += 1
            name = default_name(self.k)
            while name in self.used:
                self.k += 1
                name = default_name(self.k)
        elif not isinstance(name, str) or not name:
            raise ConfigError(f"Source(name={name!r}): give the source a non-empty name")
        elif name in self.used:
            raise ConfigError(f"Source(name={name!r}): two sources are named {name!r}; names must differ")
        self.used.add(name)
        return name


def _as_list(sources: Any) -> list:
    """One source, or a list/tuple of them (a list of str: paths, as on the command line)."""
    if isinstance(sources, (list, tuple)):
        return list(sources)
    return [sources]


def _source(s: Any, names: _Names) -> Any:
    """A path (str) stays a path; anything else becomes a ``SourceConfig``."""
    from .count.memory import KIND, is_memory

    if isinstance(s, Source):
        if s.counts:
            if is_memory(s.data):
                raise ConfigError("Source(counts=True): give the word-count table's path (Parquet), not data in memory")
            return SourceConfig(os.fspath(s.data), s.weight, kind="counts", word_column=s.word_column,
                                count_column=s.count_column)
        if not is_memory(s.data):
            return SourceConfig(os.fspath(s.data), s.weight, s.text_column,
                                storage_options=None if s.storage_options is None else dict(s.storage_options))
        return SourceConfig(names.take(s.name), s.weight, s.text_column, KIND, data=s.data)
    if not is_memory(s):
        if isinstance(s, bytes):
            raise ConfigError(f"{s[:40]!r}: a source is a path (str) or data in memory, not bytes")
        return os.fspath(s)
    return SourceConfig(names.take(None), None, None, KIND, data=s)


def _phase(ph: Any, k: int, names: _Names) -> PhaseConfig:
    if not isinstance(ph, Phase):
        raise ConfigError(f"phases[{k}]: expected a toktok.Phase(name, merges=..., sources=[...]), got "
                          f"{type(ph).__name__}")
    srcs = [_source(s, names) for s in _as_list(ph.sources)] if ph.sources is not None else []
    if (ph.merges is None) == (ph.vocab_size is None):
        raise ConfigError(f"phases[{k}]: give toktok.Phase merges= (new tokens) or vocab_size= (total ids), one of them")
    return PhaseConfig(ph.name, ph.merges,
                       [s if isinstance(s, SourceConfig) else SourceConfig(s) for s in srcs], ph.budget,
                       vocab_size=ph.vocab_size, pattern=ph.pattern)


__all__ = ["train", "train_config", "Phase", "Source", "TrainResult", "PhaseSummary"]
