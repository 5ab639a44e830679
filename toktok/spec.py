"""The run description: one finished, immutable value that the pipeline and the stages read.

The edges (the CLI, the YAML config, ``toktok.train``) build a ``TrainConfig``
(:mod:`toktok.config`) and finish it once with ``TrainConfig.describe()``: every option
checked, sizes read into ints, the phases resolved (a run without ``phases`` is the one "main"
phase), the threads counted, each option's name as the user gave it kept for messages, the
output layout chosen. From then on nothing calls back into ``config.py``: this module does not
import it (``tests/test_house.py`` checks that no module the pipeline imports does).

An option's value is an attribute (``spec.seed``, ``spec.merges``): every field of
``TrainConfig`` after its checks, so a new option needs no line here.
Example: ``TrainConfig(["data/"], "out/x", merges=10).describe().phases[0].merges == 10``.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Mapping

from .errors import ConfigError, shown
from .options import redacted
from .rundir import OutputLayout


@dataclass
class SourceConfig:
    """One source of a phase: a file, folder or glob (``kind`` "path"), one file (``kind`` "file"),
    word-count tables (``kind`` "counts": Parquet files, a folder or glob; :mod:`toktok.count.tables`),
    or data in memory (``kind`` "memory": ``path`` is its name, ``data`` the object; see
    :mod:`toktok.memory`).

    ``weight`` is the source's share of the phase's budget (default 1); ``text_column`` overrides
    the run's. Example: ``SourceConfig("data/", weight=2)``.
    """

    path: str
    weight: float | None = None
    text_column: str | None = None
    kind: str = "path"
    storage_options: dict | None = None  # for a URL source: over the run's, key by key
    data: Any = field(default=None, repr=False, compare=False)
    word_column: str | None = None  # a word-count table's (kind "counts") columns, over the run's
    count_column: str | None = None

    def to_dict(self) -> dict:
        """The source as the run file records it (in-memory data by name and kind only)."""
        d = {"path": self.path, "weight": self.weight, "text_column": self.text_column, "kind": self.kind,
             "storage_options": self.storage_options}
        d.update({k: v for k, v in (("word_column", self.word_column), ("count_column", self.count_column)) if v})
        return {k: redacted(k, v) for k, v in d.items()}


@dataclass
class PhaseConfig:
    """One training phase: its sources and how many new tokens it learns: ``merges``, or as many
    as make ``vocab_size`` ids after it (the run's special tokens included; see
    ``merge.stage.budget``), one of the two.

    ``budget`` (bytes of text; human units are read into an int by ``TrainConfig.validate``)
    overrides the run's. Example: ``PhaseConfig("code", 500, [SourceConfig("code/")])``.
    """

    name: str
    merges: int | None
    sources: list[SourceConfig]
    budget: str | int | None = None
    vocab_size: int | None = None  # instead of merges: the total ids after this phase, specials included
    pattern: Any = None  # the phase's own pre-tokenizer (a name or regex; a patterns.Pattern once checked)
    pattern_given: str | None = field(default=None, compare=False)  # as the user wrote it, for the record

    def to_dict(self) -> dict:
        d = {"name": self.name, "merges": self.merges, "budget": self.budget,
             "sources": [s.to_dict() for s in self.sources]}
        if self.vocab_size is not None:  # recorded only when given: a merges run's record is as before
            d["vocab_size"] = self.vocab_size
        if self.pattern is not None:  # likewise
            d["pattern"] = self.pattern_given or (self.pattern if isinstance(self.pattern, str) else
                                                  self.pattern.name if self.pattern.known else self.pattern.regex)
        return d

    def split(self, run_pattern: Any) -> Any:
        """The pattern this phase counts its text with: its own, else the run's (``run_pattern``)."""
        return self.pattern if self.pattern is not None else run_pattern


@dataclass(frozen=True)
class RunSpec:
    """A finished run: ``TrainConfig.describe()`` builds it, nothing changes it afterwards.

    ``options`` holds every option's checked value (read as attributes: ``spec.seed``);
    ``names`` how each option was given (``--threads``, ``run.yaml: threads:``, ``threads=``);
    ``written`` sizes as the user wrote them (``64MB``); ``record`` the configuration as the run
    file stores it. Example: ``spec.name_of("budget") == "--budget"``.
    """

    options: Mapping[str, Any]
    phases: tuple[PhaseConfig, ...]
    phases_given: bool  # the config listed phases (messages name phases[k]), else the one "main" phase
    threads: int
    threads_warning: str | None
    names: Mapping[str, str]
    written: Mapping[str, str]
    use_hardcoded: bool
    working_set_text: int | None  # bytes of text a phase may hold under working_set_mb, None if unset
    layout: OutputLayout
    record: Mapping[str, Any]

    def __getattr__(self, key: str) -> Any:
        # only reached for names that are not fields: the options' values
        options = self.__dict__.get("options")
        if options is not None and key in options:
            return options[key]
        raise AttributeError(f"RunSpec has no option {key!r}")

    @staticmethod
    def frozen(options: dict, names: dict, written: dict, record: dict, **rest: Any) -> RunSpec:
        """A ``RunSpec`` whose mappings are read-only views of copies of those given."""
        ro = MappingProxyType
        return RunSpec(options=ro(dict(options)), names=ro(dict(names)), written=ro(dict(written)),
                       record=ro(copy.deepcopy(record)), **rest)

    def name_of(self, key: str) -> str:
        """How the user gave option ``key`` (``--threads``, ``run.yaml: threads:``, ``threads=``)."""
        return self.names.get(key, key)

    def text_of(self, key: str) -> str:
        """A size as the user wrote it (``64MB``), else the number of bytes."""
        return self.written.get(key) or str(self.options[key])

    def phase_budget(self, phase: PhaseConfig) -> int | None:
        """Bytes of text to read in ``phase`` (its own budget, else the run's), None = everything."""
        return phase.budget if phase.budget is not None else self.options["budget"]

    def tag(self, phase: PhaseConfig) -> str:
        """The phase in progress stage names (`` english``); nothing for a one-phase run."""
        return f" {phase.name}" if len(self.phases) > 1 else ""

    def where(self, phase: PhaseConfig) -> str:
        """The phase in messages (``phase 'english': ``); nothing for a one-phase run."""
        return f"phase {phase.name!r}: " if len(self.phases) > 1 else ""

    def source_options(self, src: SourceConfig) -> dict:
        """The storage options of one source: the run's, then the source's own on top."""
        return {**(self.options["storage_options"] or {}), **(src.storage_options or {})}

    def check_roles(self, specials: list[str]) -> None:
        """Each role names one of the run's ``specials`` (the config's and a warm-start base's)."""
        for role, tok in self.options["roles"].items():
            if tok not in specials:
                have = ", ".join(specials) if specials else "none"
                raise ConfigError(f"{self.name_of(role)} {shown(tok)} is not one of the special tokens ({have}); "
                                  "add it with --special-token (special_tokens: in a config) or pick one of them")

    def to_dict(self) -> dict:
        """The configuration as the run file records it (JSON-able; in-memory data by name)."""
        return copy.deepcopy(dict(self.record))
