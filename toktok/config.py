"""Run configuration: what to train on, in which phases, from which base, where to write.

Holds one run's options (``TrainConfig``: their definitions, defaults and checks are in
:mod:`toktok.options`, once) and reads the YAML config file (``toktok train --config run.yaml``)
into it; every problem is a ``ConfigError`` naming the option as given, or the file and the key's
location (``run.yaml: phases[1].sources[0]: unknown key 'paht'``).

The config file takes toktoktok's schema unchanged plus toktok's own keys::

    output: out/tok/tok.tiktoken     # the .tiktoken file (see ``TrainConfig.layout``)
    working_set_mb: 2048             # text held per phase: 2048 x 2^20 / 4 bytes (toktoktok's sizing)
    threads: -1                      # <= 0 = all cores
    verbose: true                    # log merges 1-10 and every 100th; false = no progress bars
    special_tokens: ["<|endoftext|>"]
    roles: {eos_token: "<|endoftext|>"}  # toktok: bos/eos/pad/unk_token for transformers
    chat_template: chat.jinja        # toktok: a Jinja file, or chatml / llama3 (tokenizer_config.json)
    warm_start: {file: base.tiktoken}   # or a tokenizer.json
    phases:
      - name: general
        merges: 1000
        sources:
          - path: data/                  # file, folder or glob
          - file: notes.txt              # one file
            weight: 2                    # toktok: share of the budget
            text_column: body            # toktok: Parquet column / JSONL field
        budget: 50MB                     # toktok: text to read in this phase
    # toktok's own top-level keys: seed, text_column, budget, memory_limit, hardcoded,
    # bad_utf8, engine (local/ray), ray_address, roles, storage_options (URL sources; also per source),
    # chat_template, progress (rich/plain/json/none), pattern, superbpe, pad_to_multiple_of, max_token_length,
    # min_frequency; a phase may give vocab_size: (its total ids) instead of merges:, and its own pattern:;
    # a special token may be a mapping with
    # HF's added-token flags: {content: "<|eot|>", rstrip: true} (toktok.added)

Relative paths are taken as they are, i.e. against the current directory; ``~`` is expanded.
Example: ``parse_size("512MB") == 512 * 1000**2``.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from .errors import ConfigError, OutputError, not_regular, shown
from .options import (ANY, ENGINES, OPTION, ROLES, SIZE, SPLIT, at, kind_of_value, parse_size, redacted,
                      run_options, yaml_keys)  # parse_size: re-exported (toktok.config.parse_size)
from .rundir import RUN_FILE, OutputLayout, check_out_parent, output_layout
from .spec import PhaseConfig, RunSpec, SourceConfig  # PhaseConfig, SourceConfig: re-exported

#: File names toktok writes beside the .tiktoken file; ``output`` may not take one of them.
RESERVED_NAMES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", RUN_FILE)
DEFAULT_TIKTOKEN_NAME = "tokenizer.tiktoken"
MAIN_PHASE = "main"
#: The smallest DuckDB memory limit toktok accepts (the budget planner's floor too).
MIN_MEMORY_LIMIT = 16 << 20
#: toktoktok's sizing of ``working_set_mb``: about 4 bytes of memory per character of held text.
WORKING_SET_BYTES_PER_CHAR = 4


def available_cores() -> int:
    """The cores this process may run on (its CPU affinity), at least 1."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def machine_memory() -> int | None:
    """Bytes of physical memory of this machine (None if the OS does not say)."""
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def _check_memory_limit(n: int, text: str, where: str) -> None:
    """DuckDB's memory limit: at least 16MiB, and at most this machine's memory (DuckDB itself
    cannot even parse one beyond 2^64 bytes); the default (2GB) is always accepted."""
    if n < MIN_MEMORY_LIMIT:
        raise ConfigError(f"{at(where, text)} is too small for DuckDB; pass at least 16MiB, e.g. "
                          "--memory-limit 256MB (DuckDB spills to disk beyond it)")
    ram = machine_memory()
    if ram is None or n <= max(ram, OPTION["memory_limit"].default):
        return
    raise ConfigError(f"{at(where, text)} is more than this machine's memory ({ram / 2**30:.1f} GiB); pass "
                      f"at most {ram >> 30}GiB, e.g. --memory-limit 2GB (DuckDB spills to disk beyond it)")


@dataclass
class TrainConfig:
    """Everything ``toktok train`` needs. Example: ``TrainConfig(["data/"], "out/x", merges=1000)``.

    The options are those of :data:`toktok.options.OPTIONS` (names, defaults, meaning); this
    class holds one run's values and :meth:`validate` checks them all, through each option's one
    check, reading sizes into ints. A run without ``phases`` is one phase named "main" over
    ``sources`` (paths, or ``SourceConfig`` objects) with ``merges``.
    ``hardcoded`` None means: the hardcoded tokens from scratch, none on a warm start.
    ``out`` is the output folder; the .tiktoken file in it is named ``tiktoken_name``. ``output``
    (toktoktok's key: the .tiktoken's path) sets both, and lets the .tiktoken go into a folder that
    is not toktok's own (see ``layout``). ``threads`` <= 0 means all cores. ``working_set_mb``
    (toktoktok's) caps the text each phase holds at ``working_set_mb * 2**20 / 4`` bytes; ``budget``
    is the memory of the whole run. ``roles`` maps ``bos_token``/``eos_token``/``pad_token``/
    ``unk_token`` to special tokens. ``given_as`` names how an option was given, for messages
    (``{"threads": "run.yaml: threads:"}``; default ``--threads``); ``written`` keeps sizes as the
    user wrote them (``{"memory_limit": "64MB"}``), for messages.
    """

    sources: list = field(default_factory=list)
    out: str = ""
    merges: int = 30000
    special_tokens: list[str] = field(default_factory=list)
    text_column: str = "text"
    bad_utf8: str = "error"
    hardcoded: bool | None = None
    force: bool = False
    resume: bool = False  # continue the interrupted run into the same output folder
    memory_limit: str | int = OPTION["memory_limit"].default
    threads: int = 0  # <= 0: all cores
    seed: int = 0
    verify_slices: int = 200
    phases: list[PhaseConfig] = field(default_factory=list)
    warm_start: str | None = None
    tiktoken_name: str = DEFAULT_TIKTOKEN_NAME
    budget: str | int | None = None
    verbose: bool | None = None
    config_file: str | None = None
    engine: str = "local"  # "local" or "ray" (toktok.count.ray)
    ray_address: str | None = None  # join this Ray cluster; None = start a private one
    output: str | None = None  # toktoktok's output: the .tiktoken's path (sets out, tiktoken_name)
    working_set_mb: int | None = None  # toktoktok's: text held per phase, x 2^20 / 4 bytes
    roles: dict[str, str] = field(default_factory=dict)  # bos_token/eos_token/pad_token/unk_token
    storage_options: dict | None = None  # options of the store clients of URL sources (toktok.remote)
    chat_template: str | None = None  # a Jinja file or a named template (toktok.formats.chat)
    progress: Any = None  # rich, plain, json, none or a callable (toktok.progress); None: the edge's default
    pattern: Any = None  # a name or regex; a patterns.Pattern after validate; None: cl100k (a warm start: its base's)
    superbpe: int | None = None  # SuperBPE's transition: the one phase is split in two at this many ids
    vocab_size: int | None = None  # total ids instead of merges (the one phase's; phases: each its own)
    pad_to_multiple_of: int | None = None  # total ids rounded up with reserved special tokens
    max_token_length: int | None = None  # bytes: no merge makes a longer token
    min_frequency: int | None = None  # the merges stop when the best pair occurs fewer times
    ladder: list[int] | None = None  # total sizes: the run trains to the largest, writes each smaller one too
    word_counts: list[str] | None = None  # word-count tables (Parquet) of the one phase, beside its text sources
    word_column: str = "word"  # the word-count tables' columns
    count_column: str = "count"
    given_as: dict[str, str] = field(default_factory=dict, repr=False, compare=False)
    written: dict[str, str] = field(default_factory=dict, repr=False, compare=False)

    def name_of(self, key: str) -> str:
        """How the user gave option ``key``: ``--threads``, ``run.yaml: threads:`` from a config,
        ``threads=`` from Python."""
        if key in self.given_as:
            return self.given_as[key]
        opt = OPTION.get(key)
        if opt is not None and opt.flag:
            return opt.flag
        if key in ROLES:
            return OPTION["roles"].key_flags[key][0]
        return key

    def text_of(self, key: str) -> str:
        """A size as the user wrote it (``64MB``), else the number of bytes."""
        return self.written.get(key) or str(getattr(self, key))

    def phase_list(self) -> list[PhaseConfig]:
        """The phases to run, in order (the single "main" phase when none are configured). With
        ``superbpe`` the one phase is two over the same sources (:func:`superbpe_phases`), made
        once: the checks of :meth:`validate` hold for what :meth:`describe` hands on."""
        if self.superbpe is None:
            return self.phases or [self._main_phase()]
        split = self.__dict__.get("_superbpe_phases")
        if split is None or split[0] != (self.superbpe, self.vocab_size, id(self.phases)):
            split = ((self.superbpe, self.vocab_size, id(self.phases)),
                     superbpe_phases(self, self.phases or [self._main_phase()]))
            self.__dict__["_superbpe_phases"] = split
        return split[1]

    def _main_phase(self) -> PhaseConfig:
        return PhaseConfig(MAIN_PHASE, self.merges if self.vocab_size is None else None,
                           [s if isinstance(s, SourceConfig) else SourceConfig(os.fspath(s)) for s in self.sources]
                           + [SourceConfig(p, kind="counts") for p in self.word_counts or ()],
                           vocab_size=self.vocab_size)

    def use_hardcoded(self) -> bool:
        """Whether the hardcoded tokens are added: yes from scratch, no on a warm start, unless set."""
        return self.hardcoded if self.hardcoded is not None else self.warm_start is None

    def validate(self) -> None:
        """Check every option (each through its one check in :mod:`toktok.options`, named as the
        user gave it) and how they go together; sizes are read into ints here."""
        if self.output is not None:
            self.output = os.fspath(self.output)
            self.out, self.tiktoken_name = _output_parts(self.output, self.name_of("output").rstrip(":"))
        if self.out:
            self.out = os.path.expanduser(os.fspath(self.out))
        if not self.phases and not self.sources and not self.word_counts:
            raise ConfigError("no sources given; pass files, folders or globs to train on")
        if self.phases and (self.sources or self.word_counts):
            raise ConfigError("sources given both in the config's phases and on the command line; use one "
                              "(a phase's word-count tables are sources: {counts: FILE})")
        for opt in run_options():
            value = getattr(self, opt.name, None)
            if opt.kind is ANY or opt.name in ("out", "output", "config") or value is None:
                continue
            if opt.kind in (SIZE, SPLIT) and isinstance(value, str):
                self.written.setdefault(opt.name, value)
            setattr(self, opt.name, opt.check(value, self.name_of(opt.name)))
        if not self.out:
            raise ConfigError("no output given; pass --out DIR (or output: in the config)")
        _check_memory_limit(self.memory_limit, self.text_of("memory_limit"), self.name_of("memory_limit"))
        _check_tiktoken_name(self.tiktoken_name, "--out")
        check_out_parent(self.out)
        _check_ladder(self)
        names = set()
        for k, ph in enumerate(self.phase_list()):
            where = f"phases[{k}]"
            if not ph.name or not isinstance(ph.name, str):
                raise ConfigError(f"{where}.name: give the phase a name")
            if ph.name in names:
                raise ConfigError(f"{where}.name: phase {shown(ph.name)} is named twice; names must differ")
            names.add(ph.name)
            if ph.vocab_size is not None:
                if ph.merges is not None:
                    raise ConfigError(f"{where}: give merges: or vocab_size:, not both")
                ph.vocab_size = OPTION["vocab_size"].check(ph.vocab_size, f"{where}.vocab_size:")
            else:
                ph.merges = OPTION["merges"].check(ph.merges, f"{where}.merges:")
            if ph.budget is not None:
                ph.budget = OPTION["budget"].check(ph.budget, f"{where}.budget:")
            if isinstance(ph.pattern, str):
                ph.pattern_given = ph.pattern_given or ph.pattern
                ph.pattern = OPTION["pattern"].check(ph.pattern, self.given_as.get(f"{where}.pattern",
                                                                                    f"{where}.pattern:"))
            if not ph.sources:
                raise ConfigError(f"{where}.sources: the phase has no sources")
            budget = self.phase_budget(ph)
            for j, src in enumerate(ph.sources):
                if src.weight is not None:
                    src.weight = OPTION["weight"].check(src.weight, f"{where}.sources[{j}].weight:")
                if src.text_column is not None:
                    OPTION["text_column"].check(src.text_column, f"{where}.sources[{j}].text_column:")
                if src.weight is not None and budget is None and self.working_set_mb is None:
                    raise ConfigError(
                        f"{where}.sources[{j}].weight: weights share a budget; set budget "
                        "(at the top or in the phase, e.g. budget: 100MB) or working_set_mb"
                    )
        _check_shape(self)
        if self.ray_address is not None and self.engine != "ray":
            raise ConfigError(f"--ray-address {self.ray_address}: needs --engine ray (engine: ray in the config)")
        for role, tok in self.roles.items():
            if role not in ROLES:
                raise ConfigError(f"{self.name_of(role)}: unknown role {shown(role)}; use {', '.join(ROLES)}")
            if not isinstance(tok, str) or not tok:
                raise ConfigError(f"{self.name_of(role)} is empty; give one of the special tokens")

    def thread_count(self) -> tuple[int, str | None]:
        """The threads to use and a warning when ``threads`` asks for more than the cores: <= 0 is
        every core; more than the cores is capped at the cores (more threads do not make counting
        or merging faster, and tens of thousands exhaust the machine's task limit)."""
        cores = available_cores()
        if self.threads <= 0:
            return cores, None
        if self.threads > cores:
            return cores, (f"{self.name_of('threads')} {self.threads} is more than the {cores} cores this "
                           f"process may use; using {cores}")
        return self.threads, None

    def working_set_text(self) -> int | None:
        """Bytes of text a phase may hold under ``working_set_mb`` (toktoktok's sizing: 4 bytes of
        memory per character held), None when not set."""
        return None if self.working_set_mb is None else self.working_set_mb * (1 << 20) // WORKING_SET_BYTES_PER_CHAR

    def layout(self) -> OutputLayout:
        """Where the outputs go (:func:`toktok.rundir.output_layout`). ``--out DIR``, or an
        ``output:`` whose folder is toktok's own (not there yet, empty, or holding a toktok run),
        gets everything in that folder. An ``output:`` into any other folder (the current folder,
        one holding other files) writes exactly that .tiktoken there and the other outputs into
        ``NAME.toktok/`` beside it."""
        return output_layout(self.out, self.tiktoken_name, tiktoken_given=self.output is not None)

    def phase_budget(self, phase: PhaseConfig) -> int | None:
        """Bytes of text to read in ``phase`` (its own budget, else the run's), None = everything;
        after :meth:`validate`, which reads the sizes into ints."""
        return phase.budget if phase.budget is not None else self.budget

    def describe(self) -> RunSpec:
        """The finished run (:class:`toktok.spec.RunSpec`): the options checked (:meth:`validate`),
        the phases resolved, the threads counted, the names kept; the pipeline reads only that.
        Example: ``TrainConfig(["d/"], "o", threads=1).describe().threads == 1``."""
        self.validate()
        threads, warning = self.thread_count()
        names = {k: self.name_of(k) for k in (*OPTION, *ROLES, *self.given_as)}
        options = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in ("given_as", "written")}
        return RunSpec.frozen(options, names, self.written, self.to_dict(), phases=tuple(self.phase_list()),
                              phases_given=bool(self.phases), threads=threads, threads_warning=warning,
                              use_hardcoded=self.use_hardcoded(), working_set_text=self.working_set_text(),
                              layout=self.layout())

    def to_dict(self) -> dict:
        """The configuration as the run file records it (JSON-able; in-memory data by name)."""
        d = {}
        for f in fields(self):
            if f.name in ("given_as", "written", "progress"):  # progress: how it reports (maybe a callable)
                continue
            v = getattr(self, f.name)
            if f.name == "special_tokens":  # with their added-token flags (toktok.added.SpecialToken)
                v = [t.config() if hasattr(t, "config") else t for t in v]
            elif f.name == "phases":
                v = [p.to_dict() for p in v]
            elif f.name == "sources":
                v = [s.to_dict() if isinstance(s, SourceConfig) else os.fspath(s) for s in v]
            elif f.name == "pattern" and v is not None and not isinstance(v, str):  # as given: name or regex
                v = self.written.get("pattern") or (v.name if v.known else v.regex)
            elif isinstance(v, (list, dict)):
                v = type(v)(v)
            d[f.name] = redacted(f.name, v)
        return d


#: The names of SuperBPE's two phases in a run without configured phases.
SUBWORDS, SUPERWORDS = "subwords", "superwords"


def superbpe_phases(cfg: TrainConfig, phases: list[PhaseConfig]) -> list[PhaseConfig]:
    """SuperBPE as two phases over the same sources: the one phase of ``phases`` up to
    ``cfg.superbpe`` total ids with its own (the run's) pattern, then ``superwords`` up to its
    ``vocab_size`` with the ``superbpe`` pattern (:data:`toktok.patterns.SUPERWORD`). A run
    without configured phases names them ``subwords`` and ``superwords``. ConfigError when the
    run has several phases, no ``vocab_size``, or a transition not below it."""
    from .patterns import SUPERWORD

    where = cfg.name_of("superbpe")
    if len(phases) != 1:
        raise ConfigError(f"{where.rstrip(':=')}: the config has {len(phases)} phases; SuperBPE splits one phase "
                          "in two: give one phase, or give the later phases pattern: superbpe yourself")
    ph = phases[0]
    total = ph.vocab_size
    if total is None:
        size = cfg.name_of("vocab_size") if not cfg.phases else "phases[0].vocab_size:"
        raise ConfigError(f"{where.rstrip(':=')}: needs {size.rstrip(':=')} (the total ids after the superwords), "
                          "not merges; e.g. --superbpe 26000 --vocab-size 32768")
    t = OPTION["superbpe"].check(cfg.superbpe, where)
    tables = [src for src in ph.sources if isinstance(src, SourceConfig) and src.kind == "counts"]
    if tables:
        given = cfg.name_of("word_counts") if cfg.word_counts else "phases[0] counts:"
        raise ConfigError(f"{where.rstrip(':=')} with {given.rstrip(':=')} {tables[0].path}: superwords need text "
                          "split by the superbpe pattern, not a word table; train from the text, or give two phases, "
                          "the second pattern: superbpe with counts from toktok count --pattern superbpe")
    if isinstance(total, int) and t >= total:
        raise ConfigError(f"{at(where, str(t))}: the transition must be below the vocabulary size {total}; "
                          f"e.g. {int(total * 0.8)} (80%)")
    first = PhaseConfig(ph.name if cfg.phases else SUBWORDS, None, ph.sources, ph.budget, vocab_size=t,
                        pattern=ph.pattern, pattern_given=ph.pattern_given)
    name = SUPERWORDS if first.name != SUPERWORDS else SUPERWORDS + "-2"
    return [first, PhaseConfig(name, None, ph.sources, ph.budget, vocab_size=total, pattern=SUPERWORD["superbpe"],
                               pattern_given="superbpe")]


def _check_shape(cfg: TrainConfig) -> None:
    """The phases' vocab_size totals never go down, and the last one is a multiple of
    ``pad_to_multiple_of`` (the rest is checked against the starting ids by ``start.vocabulary``)."""
    phases = cfg.phase_list()
    named = [(k, ph.vocab_size) for k, ph in enumerate(phases) if ph.vocab_size is not None]
    for (j, a), (k, b) in zip(named, named[1:]):
        if b < a:
            raise ConfigError(f"phases[{k}].vocab_size: {b} is less than phases[{j}]'s {a}; a phase's vocab_size "
                              "is the total ids after it, so give a larger one (or merges:)")
    last, pad = phases[-1].vocab_size, cfg.pad_to_multiple_of
    if last is not None and pad is not None and last % pad:
        where = cfg.name_of("vocab_size") if not cfg.phases else f"phases[{len(phases) - 1}].vocab_size:"
        up = -(-last // pad) * pad
        raise ConfigError(f"{at(where, str(last))} is not a multiple of {cfg.name_of('pad_to_multiple_of')} {pad}; "
                          f"pass a multiple, e.g. {up}")


def _check_ladder(cfg: TrainConfig) -> None:
    """``ladder`` (sorted total sizes): the run trains to the largest, which is the last phase's
    ``vocab_size`` (set here for a one-phase run that gives none; ``merges`` is then not asked
    for), and each size is a multiple of ``pad_to_multiple_of``."""
    if not cfg.ladder:
        return
    where, top = cfg.name_of("ladder"), cfg.ladder[-1]
    shown_ = ",".join(map(str, cfg.ladder))
    if not cfg.phases:
        if cfg.vocab_size is None:
            cfg.vocab_size = top
            cfg.given_as.setdefault("vocab_size", where)  # messages about it name the ladder
        elif cfg.vocab_size != top:
            raise ConfigError(f"{at(where, shown_)}: its largest size is the run's; {cfg.name_of('vocab_size')} "
                              f"{cfg.vocab_size} differs: pass --vocab-size {top} or leave it out")
    else:
        last = cfg.phases[-1]
        if last.vocab_size != top:
            raise ConfigError(f"{at(where, shown_)}: the last phase's vocab_size: must be the largest size, {top} "
                              f"(phases[{len(cfg.phases) - 1}] gives {last.vocab_size or f'merges: {last.merges}'})")
    pad = cfg.pad_to_multiple_of
    odd = [n for n in cfg.ladder if pad and n % pad]
    if odd:
        raise ConfigError(f"{at(where, shown_)}: {odd[0]} is not a multiple of {cfg.name_of('pad_to_multiple_of')} "
                          f"{pad}; pass multiples, e.g. {-(-odd[0] // pad) * pad}")


def _check_tiktoken_name(name: str, where: str) -> None:
    if not name or "/" in name or os.sep in name or name in (".", ".."):
        raise ConfigError(f"{where}: {name!r} is not a file name for the .tiktoken file")
    if name in RESERVED_NAMES:
        raise ConfigError(f"{where}: {name!r} is a file toktok writes beside the .tiktoken file; name it e.g. tok.tiktoken")


# ---------------------------------------------------------------------------------------------
# The YAML config file
# ---------------------------------------------------------------------------------------------

class _Doc:
    """One mapping of the config: its keys are checked against the options of its scope
    (``run`` = the top level, ``phase``, ``source``), and every error names ``file: location``."""

    def __init__(self, file: str, where: str, value: Any, allowed: set[str]):
        self.file = file
        self.where = where
        if not isinstance(value, dict):
            raise self.error(f"expected a mapping of keys, got {kind_of_value(value)}")
        for k in value:
            if not isinstance(k, str):
                raise self.error(f"key {k!r} is not a name")
            if k not in allowed:
                raise self.error(f"unknown key {k!r} (known: {', '.join(sorted(allowed))})")
        self.value = value

    def error(self, msg: str, key: str | None = None) -> ConfigError:
        return ConfigError(f"{self.at(key)} {msg}")

    def at(self, key: str | None = None) -> str:
        """``file: location:`` of ``key`` (of the mapping itself without one)."""
        loc = self.where + (("." if self.where else "") + key if key else "")
        return f"{self.file}: {loc}:" if loc else f"{self.file}:"

    def get(self, key: str, option: str | None = None) -> Any:
        """The value of ``key`` read as its option says (None when absent or null)."""
        v = self.value.get(key)
        return None if v is None else OPTION[option or key].from_yaml(v, self.at(key))


def _yaml_load(path: Path) -> Any:
    import yaml

    class Loader(yaml.SafeLoader):
        pass

    def check(loader, node, deep):
        # A key given twice in one mapping is an error. Keys brought in by a merge key
        # (``<<: *base`` or ``<<: [*a, *b]``) are not: the mapping's own keys override them, as
        # YAML says; each merged mapping is checked on its own.
        seen: set = set()
        for key_node, value_node in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                merged = value_node.value if isinstance(value_node, yaml.SequenceNode) else [value_node]
                for m in merged:
                    if isinstance(m, yaml.MappingNode):
                        check(loader, m, deep)
                continue
            key = loader.construct_object(key_node, deep=deep)
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"key {key!r} is given twice", key_node.start_mark)
            seen.add(key)

    def mapping(loader, node, deep=False):
        check(loader, node, deep)
        return loader.construct_mapping(node, deep=deep)

    Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, mapping)
    kind = not_regular(path)
    if kind is not None:
        raise ConfigError(f"{path}: not a regular file ({kind}); give the config as a YAML file")
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such config file; check the path") from None
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"{path}: cannot read the config ({getattr(e, 'strerror', None) or e})") from None
    try:
        return yaml.load(text, Loader=Loader)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else str(path)
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise ConfigError(f"{where}: not valid YAML ({problem}); fix the file there") from None


def load_config(path: str | os.PathLike) -> TrainConfig:
    """A ``TrainConfig`` from a YAML config file (schema in the module docstring; the keys are the
    options' YAML keys, :func:`toktok.options.yaml_keys`).

    Unknown keys and wrong values are ``ConfigError``s naming the key's location. The result has
    ``out`` = the folder of ``output`` and ``tiktoken_name`` = its file name; sizes are ints.
    Example: ``load_config("examples/phases.yaml").phase_list()[0].name == "english"``.
    """
    p = Path(path)
    name = str(path)
    doc = _yaml_load(p)
    if doc is None:
        raise ConfigError(f"{name}: the config is empty; it needs at least output and phases")
    top = _Doc(name, "", doc, yaml_keys("run"))
    cfg = TrainConfig(config_file=name)
    for key, raw in top.value.items():
        if raw is None or key == "phases":
            continue
        if key == "output":
            cfg.output = os.path.expanduser(top.get("output"))
            cfg.out, cfg.tiktoken_name = _split_output(cfg.output, top)
        elif key == "warm_start":  # toktoktok's shape: warm_start: {file: base.tiktoken}
            ws = _Doc(name, "warm_start", raw, {"file"})
            if ws.value.get("file") is None:
                raise ws.error("needs file: the .tiktoken or tokenizer.json to start from")
            cfg.warm_start = ws.get("file", "warm_start")
        elif key == "roles":
            for role, tok in top.get("roles").items():
                cfg.roles[role] = tok
                cfg.given_as[role] = top.at(f"roles.{role}")
            continue
        else:
            opt = OPTION[key]
            setattr(cfg, opt.name, top.get(key))
            if opt.kind is SIZE:
                cfg.written[opt.name] = str(raw)
        cfg.given_as[key] = top.at(key)

    phases = top.value.get("phases")
    if not phases:
        if phases is not None and not isinstance(phases, list):
            raise top.error(f"expected a list, got {kind_of_value(phases)}", "phases")
        raise top.error("needs at least one phase (name, merges, sources)", "phases")
    if not isinstance(phases, list):
        raise top.error(f"expected a list, got {kind_of_value(phases)}", "phases")
    names: dict[str, int] = {}
    for k, raw in enumerate(phases):
        ph = _Doc(name, f"phases[{k}]", raw, yaml_keys("phase"))
        pname = ph.get("name") or f"phase{k + 1}"
        if pname in names:
            raise ph.error(f"phase {pname!r} is also phases[{names[pname]}]; names must differ", "name")
        names[pname] = k
        merges, size = ph.get("merges"), ph.get("vocab_size")
        if merges is None and size is None:
            raise ph.error("needs merges: the number of new tokens this phase learns (or vocab_size: the total ids)")
        if merges is not None and size is not None:
            raise ph.error("give merges: (new tokens) or vocab_size: (total ids), not both")
        srcs = ph.value.get("sources")
        if srcs is not None and not isinstance(srcs, list):
            raise ph.error(f"expected a list, got {kind_of_value(srcs)}", "sources")
        if not srcs:
            raise ph.error("needs sources: a list of path: or file: entries")
        sources = [_source(name, f"phases[{k}].sources[{j}]", s) for j, s in enumerate(srcs)]
        cfg.phases.append(PhaseConfig(pname, merges, sources, ph.get("budget"), vocab_size=size,
                                      pattern=ph.get("pattern"), pattern_given=ph.get("pattern")))
        if ph.get("pattern") is not None:
            cfg.given_as[f"phases[{k}].pattern"] = ph.at("pattern")
    return cfg


def _output_parts(output: str, where: str) -> tuple[str, str]:
    """``output`` (the .tiktoken's path, ``~`` expanded) as (folder, file name); ``where`` names
    the option in errors."""
    output = os.path.expanduser(output)
    if output.endswith(("/", os.sep)) or os.path.isdir(output):
        raise ConfigError(f"{where}: {output!r} is a folder; give the path of the .tiktoken file, e.g. ./tokenizer.tiktoken")
    p = Path(output)
    _check_tiktoken_name(p.name, where)
    if p.suffix != ".tiktoken" or p.name == ".tiktoken":  # the parity check, and every reader, find it by its suffix
        raise ConfigError(f"{where}: {p.name!r} does not end in .tiktoken; name the .tiktoken file so, "
                          f"e.g. {p.with_name((p.stem or 'tokenizer') + '.tiktoken')}")
    return str(p.parent), p.name


def _split_output(output: str, doc: _Doc) -> tuple[str, str]:
    """``output`` (the .tiktoken path) as (folder, file name), errors naming the config's key."""
    try:
        return _output_parts(output, "output")
    except ConfigError as e:
        raise doc.error(str(e)[len("output: "):], "output") from None


def _source(file: str, where: str, raw: Any) -> SourceConfig:
    if isinstance(raw, str) and raw:
        return SourceConfig(raw)
    src = _Doc(file, where, raw, yaml_keys("source"))
    path, one, counts = src.get("path"), src.get("file"), src.get("counts")
    if sum(x is not None for x in (path, one, counts)) != 1:
        raise src.error("give exactly one of path: (file, folder or glob) or file: (or counts: a word-count table)")
    if one is not None and os.path.isdir(one):
        raise src.error(f"{one!r} is a folder; use path: for folders and globs", "file")
    out = SourceConfig(path or one or counts, kind="path" if path else "file" if one else "counts")
    for key in src.value:  # the other keys of a source: its options (weight, text_column, ...)
        if key not in ("path", "file", "counts"):
            setattr(out, OPTION[key].name, src.get(key))
    return out


def build_config(config: str | os.PathLike | None, sources: list, overrides: dict[str, Any], *,
                 named: Any = None) -> TrainConfig:
    """The run's ``TrainConfig``: the config file (if any), then the options given on top.

    ``overrides`` holds only the options given (on the command line, or as keywords of
    ``toktok.train``), by option name (:data:`toktok.options.OPTIONS`); ``roles`` holds the roles
    given, each replacing the config's. ``named(key)`` says how an option was given, for messages
    (default: its flag, ``--merges``). ``out`` replaces the output folder (the .tiktoken keeps the
    config's file name, and the folder is toktok's own, as for any ``--out``); ``~`` is expanded;
    ``merges`` sets the merges of a one-phase config.
    Example: ``build_config(None, ["data/"], {"out": "o", "merges": 10})``.
    """
    if config is None:
        cfg = TrainConfig(sources=list(sources))
    else:
        if sources:
            raise ConfigError("sources given both in --config and on the command line; put them in the config's phases")
        cfg = load_config(config)
    ov = dict(overrides)

    def name(key: str) -> None:
        if named is not None:
            cfg.given_as[key] = named(key)
        else:
            cfg.given_as.pop(key, None)  # named as the command line's option from now on

    if "merges" in ov and "vocab_size" in ov:
        a, b = ((named(k) if named is not None else OPTION[k].flag) for k in ("merges", "vocab_size"))
        raise ConfigError(f"{a.rstrip('=')} and {b.rstrip('=')} both given; pass one: new tokens, or total ids")
    if "merges" in ov and "ladder" in ov:
        a, b = ((named(k) if named is not None else OPTION[k].flag) for k in ("merges", "ladder"))
        raise ConfigError(f"{a.rstrip('=')} and {b.rstrip('=')} both given; the ladder's largest size is the run's "
                          "total ids (its --vocab-size): leave the merges out")
    for key, other in (("merges", "vocab_size"), ("vocab_size", "merges")):
        if key not in ov:
            continue
        n = ov.pop(key)
        if config is not None:  # the one phase's, replacing what the config gives it
            where = named(key) if named is not None else OPTION[key].flag
            if len(cfg.phases) != 1:
                raise ConfigError(f"{where.rstrip('=')}: {config} has {len(cfg.phases)} phases; set {key} per "
                                  "phase in the config")
            setattr(cfg.phases[0], key, OPTION[key].check(n, where))
            setattr(cfg.phases[0], other, None)
        else:
            setattr(cfg, key, n)
            name(key)
    if "out" in ov and ov["out"] is not None:
        ov["out"] = os.path.expanduser(OPTION["out"].check(ov["out"], named("out") if named else "--out"))
        cfg.output = None
    for role, tok in (ov.pop("roles", None) or {}).items():
        cfg.roles[role] = tok
        name(role)
    for key, value in ov.items():
        opt = OPTION.get(key)
        if opt is None or "run" not in opt.scope or key in ("config", "sources", "phases") and config is not None:
            raise ConfigError(f"unknown option {key!r}")
        setattr(cfg, key, value)
        name(key)
        if opt.kind is SIZE and isinstance(value, str):
            cfg.written[key] = value
        else:
            cfg.written.pop(key, None)
    if config is not None and not cfg.out:
        raise ConfigError(f"{config}: output: missing; give the path of the .tiktoken file (or pass --out)")
    return cfg
