"""Run configuration: what to train on, in which phases, from which base, where to write.

Owns validation of user-facing options and the YAML config file (``toktok train --config
run.yaml``); every problem is a ``ConfigError`` naming the option, or the file and the key's
location (``run.yaml: phases[1].sources[0]: unknown key 'paht'``).

The config file takes toktoktok's schema unchanged plus toktok's own keys::

    output: out/tok/tok.tiktoken     # the .tiktoken file (see ``TrainConfig.layout``)
    working_set_mb: 2048             # text held per phase: 2048 x 2^20 / 4 bytes (toktoktok's sizing)
    threads: -1                      # <= 0 = all cores
    verbose: true                    # log merges 1-10 and every 100th; false = no progress bars
    special_tokens: ["<|endoftext|>"]
    roles: {eos_token: "<|endoftext|>"}  # toktok: bos/eos/pad/unk_token for transformers
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
    # toktok's own top-level keys: seed, text_column, budget, hardcoded, bad_utf8,
    # engine (local/ray), ray_address, roles, storage_options (for URL sources; also per source)

Relative paths are taken as they are, i.e. against the current directory; ``~`` is expanded.
Example: ``parse_size("512MB") == 512 * 1000**2``.
"""
from __future__ import annotations

import os
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .errors import ConfigError, OutputError

_UNITS = {
    "": 1, "b": 1,
    "kb": 1000, "mb": 1000**2, "gb": 1000**3, "tb": 1000**4,
    "k": 1024, "m": 1024**2, "g": 1024**3, "t": 1024**4,
    "kib": 1024, "mib": 1024**2, "gib": 1024**3, "tib": 1024**4,
}

#: File names toktok writes beside the .tiktoken file; ``output`` may not take one of them.
RESERVED_NAMES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "run.duckdb")
DEFAULT_TIKTOKEN_NAME = "tokenizer.tiktoken"
MAIN_PHASE = "main"
#: Engines of the count stage (``--engine``): this machine, or a Ray cluster.
ENGINES = ("local", "ray")
#: The smallest DuckDB memory limit toktok accepts (the budget planner's floor too).
MIN_MEMORY_LIMIT = 16 << 20
#: Special-token roles for ``transformers`` (``--bos-token`` ..., YAML ``roles: {bos_token: ...}``).
ROLES = ("bos_token", "eos_token", "pad_token", "unk_token")
#: toktoktok's sizing of ``working_set_mb``: about 4 bytes of memory per character of held text.
WORKING_SET_BYTES_PER_CHAR = 4
#: Suffix of the folder that holds a run's other outputs beside a .tiktoken written into a folder
#: toktok does not own (``./tokenizer.tiktoken`` -> ``./tokenizer.toktok/``).
COMPANION_SUFFIX = ".toktok"


def available_cores() -> int:
    """The cores this process may run on (its CPU affinity), at least 1."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def companion_name(tiktoken_name: str) -> str:
    """The folder beside a .tiktoken that holds the run's other outputs when the .tiktoken's folder
    is not toktok's own: ``companion_name("tokenizer.tiktoken") == "tokenizer.toktok"``."""
    stem = tiktoken_name[: -len(".tiktoken")] if tiktoken_name.endswith(".tiktoken") else tiktoken_name
    return (stem or tiktoken_name) + COMPANION_SUFFIX


@dataclass(frozen=True)
class OutputLayout:
    """Where a run's files go (``TrainConfig.layout``).

    ``folder`` is toktok's own folder: tokenizer.json, the transformers files and run.duckdb, built
    in a staging folder beside it and published (and replaced) as a whole. ``tiktoken`` is the
    .tiktoken file, published with its ``NAME.special_tokens.json`` (when there is one): inside
    ``folder``, or beside it when ``shared`` (its folder is not toktok's: the current folder, or one
    holding other files). Example: ``OutputLayout(Path("tok.toktok"), Path("tok.tiktoken"), True)``.
    """

    folder: Path
    tiktoken: Path
    shared: bool


def _own_folder(folder: Path) -> bool:
    """Whether ``output:``'s folder is toktok's to fill (and replace): not the current folder or one
    holding it, and not there yet, empty, or holding a toktok run (``run.duckdb``)."""
    real = Path(os.path.realpath(folder))
    here = Path(os.path.realpath(Path.cwd()))
    if real == here or real in here.parents:
        return False
    if not real.is_dir():
        return True  # not there yet (a file there is refused when the run starts)
    try:
        return (real / "run.duckdb").is_file() or next(real.iterdir(), None) is None
    except OSError:
        return False


def parse_size(text: str | int) -> int:
    """Bytes in a human size: ``512MB``, ``8GB``, ``2GiB``, ``1.5g`` or a plain integer."""
    if isinstance(text, int):
        return text
    m = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([a-zA-Z]*)\s*", str(text))
    if not m or m.group(2).lower() not in _UNITS:
        raise ConfigError(f"size {text!r} is not understood; use e.g. 512MB, 8GB or 2GiB")
    return int(float(m.group(1)) * _UNITS[m.group(2).lower()])


def machine_memory() -> int | None:
    """Bytes of physical memory of this machine (None if the OS does not say)."""
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def _check_memory_limit_max(text: str | int) -> None:
    """Refuse a DuckDB memory limit beyond this machine's memory (DuckDB itself cannot even parse
    one beyond 2^64 bytes); the default (2GB) is always accepted."""
    ram = machine_memory()
    if ram is None or parse_size(text) <= max(ram, parse_size(TrainConfig.memory_limit)):
        return
    raise ConfigError(f"--memory-limit {text} is more than this machine's memory ({ram / 2**30:.1f} GiB); pass "
                      f"at most {ram >> 30}GiB, e.g. --memory-limit 2GB (DuckDB spills to disk beyond it)")


@dataclass
class SourceConfig:
    """One source of a phase: a file, folder or glob (``kind`` "path"), or one file (``kind`` "file").

    ``weight`` is the source's share of the phase's budget (default 1); ``text_column`` overrides
    the run's. Example: ``SourceConfig("data/", weight=2)``.
    """

    path: str
    weight: float | None = None
    text_column: str | None = None
    kind: str = "path"
    storage_options: dict | None = None  # for a URL source: over the run's, key by key


@dataclass
class PhaseConfig:
    """One training phase: its sources and how many new tokens it learns.

    ``budget`` (bytes of text, human units) overrides the run's. Example:
    ``PhaseConfig("code", 500, [SourceConfig("code/")])``.
    """

    name: str
    merges: int
    sources: list[SourceConfig]
    budget: str | int | None = None


@dataclass
class TrainConfig:
    """Everything ``toktok train`` needs. Example: ``TrainConfig(["data/"], "out/x", merges=1000)``.

    A run without ``phases`` is one phase named "main" over ``sources`` with ``merges``.
    ``hardcoded`` None means: the hardcoded tokens from scratch, none on a warm start.
    ``out`` is the output folder; the .tiktoken file in it is named ``tiktoken_name``. ``output``
    (toktoktok's key: the .tiktoken's path) sets both, and lets the .tiktoken go into a folder that
    is not toktok's own (see ``layout``). ``threads`` <= 0 means all cores. ``working_set_mb``
    (toktoktok's) caps the text each phase holds at ``working_set_mb * 2**20 / 4`` bytes; ``budget``
    is the memory of the whole run. ``roles`` maps ``bos_token``/``eos_token``/``pad_token``/
    ``unk_token`` to special tokens. ``given_as`` names how an option was given, for messages
    (``{"threads": "run.yaml: threads:"}``; default ``--threads``).
    """

    sources: list[str] = field(default_factory=list)
    out: str = ""
    merges: int = 30000
    special_tokens: list[str] = field(default_factory=list)
    text_column: str = "text"
    bad_utf8: str = "error"
    hardcoded: bool | None = None
    force: bool = False
    resume: bool = False  # continue the interrupted run into the same output folder
    memory_limit: str = "2GB"
    threads: int = 0  # <= 0: all cores
    seed: int = 0
    verify_slices: int = 200
    phases: list[PhaseConfig] = field(default_factory=list)
    warm_start: str | None = None
    tiktoken_name: str = DEFAULT_TIKTOKEN_NAME
    budget: str | int | None = None
    verbose: bool | None = None
    config_file: str | None = None
    engine: str = "local"  # "local" or "ray" (toktok.engine_ray)
    ray_address: str | None = None  # join this Ray cluster; None = start a private one
    output: str | None = None  # toktoktok's output: the .tiktoken's path (sets out, tiktoken_name)
    working_set_mb: int | None = None  # toktoktok's: text held per phase, x 2^20 / 4 bytes
    roles: dict[str, str] = field(default_factory=dict)  # bos_token/eos_token/pad_token/unk_token
    given_as: dict[str, str] = field(default_factory=dict, repr=False, compare=False)

    def name_of(self, key: str) -> str:
        """How the user gave option ``key``: ``--threads``, or ``run.yaml: threads:`` from a config."""
        return self.given_as.get(key) or ("output" if key == "output" else "--" + key.replace("_", "-"))
    storage_options: dict | None = None  # options of the store clients of URL sources (toktok.remote)

    def phase_list(self) -> list[PhaseConfig]:
        """The phases to run, in order (the single "main" phase when none are configured)."""
        if self.phases:
            return self.phases
        return [PhaseConfig(MAIN_PHASE, self.merges, [SourceConfig(s) for s in self.sources])]

    def use_hardcoded(self) -> bool:
        """Whether the hardcoded tokens are added: yes from scratch, no on a warm start, unless set."""
        return self.hardcoded if self.hardcoded is not None else self.warm_start is None

    def validate(self) -> None:
        if self.output is not None:
            self.out, self.tiktoken_name = _output_parts(self.output, self.name_of("output").rstrip(":"))
        if self.out:
            self.out = os.path.expanduser(self.out)
        if not self.phases and not self.sources:
            raise ConfigError("no sources given; pass files, folders or globs to train on")
        if self.phases and self.sources:
            raise ConfigError("sources given both in the config's phases and on the command line; use one")
        if isinstance(self.merges, bool) or not isinstance(self.merges, int):
            raise ConfigError(f"--merges {self.merges!r} is not a whole number")
        if self.merges < 0:
            raise ConfigError(f"--merges {self.merges} is negative; pass 0 or more")
        if not self.out:
            raise ConfigError("no output given; pass --out DIR (or output: in the config)")
        if self.bad_utf8 not in ("error", "replace", "skip"):
            raise ConfigError(f"--bad-utf8 {self.bad_utf8!r}: use error, replace or skip")
        seen = set()
        for s in self.special_tokens:
            if not s:
                raise ConfigError("--special-token is empty; give the token's text")
            if s in seen:
                raise ConfigError(f"--special-token {s!r} is given twice; give each special token once")
            seen.add(s)
        if parse_size(self.memory_limit) < MIN_MEMORY_LIMIT:
            raise ConfigError(
                f"--memory-limit {self.memory_limit} is too small for DuckDB; pass at least 16MiB, e.g. "
                "--memory-limit 256MB (DuckDB spills to disk beyond it)"
            )
        _check_memory_limit_max(self.memory_limit)
        _check_tiktoken_name(self.tiktoken_name, "--out")
        _check_out_parent(self.out)
        names = set()
        for k, ph in enumerate(self.phase_list()):
            where = f"phases[{k}]"
            if not ph.name or not isinstance(ph.name, str):
                raise ConfigError(f"{where}.name: give the phase a name")
            if ph.name in names:
                raise ConfigError(f"{where}.name: phase {ph.name!r} is named twice; names must differ")
            names.add(ph.name)
            if isinstance(ph.merges, bool) or not isinstance(ph.merges, int) or ph.merges < 0:
                raise ConfigError(f"{where}.merges: {ph.merges!r} is not a whole number >= 0")
            if not ph.sources:
                raise ConfigError(f"{where}.sources: the phase has no sources")
            budget = self.phase_budget(ph)
            for j, src in enumerate(ph.sources):
                if src.weight is not None and budget is None and self.working_set_mb is None:
                    raise ConfigError(
                        f"{where}.sources[{j}].weight: weights share a budget; set budget "
                        "(at the top or in the phase, e.g. budget: 100MB) or working_set_mb"
                    )
        if self.engine not in ENGINES:
            raise ConfigError(f"--engine {self.engine!r}: use local or ray")
        if self.ray_address is not None and self.engine != "ray":
            raise ConfigError(f"--ray-address {self.ray_address}: needs --engine ray (engine: ray in the config)")
        if self.engine == "ray":
            from .engine_ray import require_ray

            require_ray()  # a ConfigError naming the install command, before any work
        if self.budget is not None and parse_size(self.budget) <= 0:
            raise ConfigError(f"{self.name_of('budget')} {self.budget!r} must be more than 0 bytes")
        for where, opts in [("storage_options", self.storage_options)] + [
                (f"phases[{k}].sources[{j}].storage_options", src.storage_options)
                for k, ph in enumerate(self.phases) for j, src in enumerate(ph.sources)]:
            if opts is not None and (not isinstance(opts, dict) or not all(isinstance(x, str) for x in opts)):
                raise ConfigError(f"{where}: expected a mapping of option names to values, e.g. "
                                  "{'endpoint_url': 'http://127.0.0.1:9000'}")
        if isinstance(self.threads, bool) or not isinstance(self.threads, int):
            raise ConfigError(f"{self.name_of('threads')} {self.threads!r} is not a whole number; "
                              "pass a count, or -1 for all cores")
        ws = self.working_set_mb
        if ws is not None and (isinstance(ws, bool) or not isinstance(ws, int) or ws < 1):
            raise ConfigError(f"{self.name_of('working_set_mb')} {ws!r} is not a whole number of MiB >= 1, e.g. 1024")
        for role, tok in self.roles.items():
            if role not in ROLES:
                raise ConfigError(f"{self.name_of(role)}: unknown role {role!r}; use {', '.join(ROLES)}")
            if not isinstance(tok, str) or not tok:
                raise ConfigError(f"{self.name_of(role)} is empty; give one of the special tokens")

    def check_roles(self, specials: list[str]) -> None:
        """Each role names one of the run's ``specials`` (the config's and a warm-start base's)."""
        for role, tok in self.roles.items():
            if tok not in specials:
                have = ", ".join(specials) if specials else "none"
                raise ConfigError(f"{self.name_of(role)} {tok!r} is not one of the special tokens ({have}); "
                                  "add it with --special-token (special_tokens: in a config) or pick one of them")

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
        """Where the outputs go. ``--out DIR``, or an ``output:`` whose folder is toktok's own (not
        there yet, empty, or holding a toktok run), gets everything in that folder. An ``output:``
        into any other folder (the current folder, one holding other files) writes exactly that
        .tiktoken there and the other outputs into ``NAME.toktok/`` beside it."""
        folder = Path(os.path.expanduser(self.out))
        tiktoken = folder / self.tiktoken_name
        if self.output is None or _own_folder(folder):
            return OutputLayout(folder, tiktoken, False)
        return OutputLayout(folder / companion_name(self.tiktoken_name), tiktoken, True)

    def phase_budget(self, phase: PhaseConfig) -> int | None:
        """Bytes of text to read in ``phase`` (its own budget, else the run's), None = everything."""
        b = phase.budget if phase.budget is not None else self.budget
        return None if b is None else parse_size(b)

    def tiktoken_path(self) -> Path:
        return Path(self.out) / self.tiktoken_name

    def source_options(self, src: SourceConfig) -> dict:
        """The storage options of one source: the run's, then the source's own on top."""
        return {**(self.storage_options or {}), **(src.storage_options or {})}

    def to_dict(self) -> dict:
        """The config as it may be written down: storage options and the secret parts of URLs
        redacted (``toktok.remote.redact``)."""
        from .remote import redact

        d = asdict(self)
        del d["given_as"]
        d["storage_options"] = redact(d["storage_options"])
        d["sources"] = redact(d["sources"])
        for ph in d["phases"]:
            for src in ph["sources"]:
                src["path"] = redact(src["path"])
                src["storage_options"] = redact(src["storage_options"])
        return d


def _check_out_parent(out: str) -> None:
    """Fail before any work when the output folder cannot be made: a file where a parent folder
    should be, or (for a user other than root) a nearest existing folder that is not writable."""
    p = Path(out).absolute()
    for anc in p.parents:
        if not os.path.lexists(anc):
            continue
        if not anc.is_dir():
            raise OutputError(f"{out}: cannot create the output folder, {anc} is a file; pass an --out in a folder")
        if not os.access(anc, os.W_OK | os.X_OK):
            raise OutputError(f"{out}: cannot write in {anc} (permission denied); pass a writable --out")
        return


def _check_tiktoken_name(name: str, where: str) -> None:
    if not name or "/" in name or os.sep in name or name in (".", ".."):
        raise ConfigError(f"{where}: {name!r} is not a file name for the .tiktoken file")
    if name in RESERVED_NAMES:
        raise ConfigError(f"{where}: {name!r} is a file toktok writes beside the .tiktoken file; name it e.g. tok.tiktoken")


# ---------------------------------------------------------------------------------------------
# The YAML config file
# ---------------------------------------------------------------------------------------------

_TOP_KEYS = {
    # toktoktok's
    "output", "working_set_mb", "threads", "verbose", "special_tokens", "warm_start", "phases",
    # toktok's own
    "seed", "text_column", "budget", "hardcoded", "bad_utf8", "engine", "ray_address", "roles",
    "storage_options",
}
_PHASE_KEYS = {"name", "merges", "sources", "budget"}
_SOURCE_KEYS = {"path", "file", "weight", "text_column", "storage_options"}
_WARM_KEYS = {"file"}


class _Doc:
    """Typed access to one mapping of the config, naming ``file: location`` in every error."""

    def __init__(self, file: str, where: str, value: Any, allowed: set[str]):
        self.file = file
        self.where = where
        if not isinstance(value, dict):
            raise self.error(f"expected a mapping of keys, got {_kind(value)}")
        for k in value:
            if not isinstance(k, str):
                raise self.error(f"key {k!r} is not a name")
            if k not in allowed:
                raise self.error(f"unknown key {k!r} (known: {', '.join(sorted(allowed))})")
        self.value = value

    def error(self, msg: str, key: str | None = None) -> ConfigError:
        loc = self.where + (("." if self.where else "") + key if key else "")
        return ConfigError(f"{self.file}: {loc}: {msg}" if loc else f"{self.file}: {msg}")

    def has(self, key: str) -> bool:
        return key in self.value and self.value[key] is not None

    def raw(self, key: str) -> Any:
        return self.value.get(key)

    def str(self, key: str) -> str | None:
        v = self.value.get(key)
        if v is None:
            return None
        if not isinstance(v, str) or not v:
            raise self.error(f"expected a non-empty string, got {_kind(v)}", key)
        return v

    def int(self, key: str, minimum: int | None = 0) -> int | None:
        v = self.value.get(key)
        if v is None:
            return None
        if isinstance(v, bool) or not isinstance(v, int):
            raise self.error(f"expected a whole number, got {_kind(v)}", key)
        if minimum is not None and v < minimum:
            raise self.error(f"{v} is less than {minimum}", key)
        return v

    def number(self, key: str) -> float | None:
        v = self.value.get(key)
        if v is None:
            return None
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not v > 0 or v != v or v == float("inf"):
            raise self.error(f"expected a number > 0, got {_kind(v)}", key)
        return float(v)

    def bool(self, key: str) -> bool | None:
        v = self.value.get(key)
        if v is None:
            return None
        if not isinstance(v, bool):
            raise self.error(f"expected true or false, got {_kind(v)}", key)
        return v

    def size(self, key: str) -> str | int | None:
        v = self.value.get(key)
        if v is None:
            return None
        if isinstance(v, bool) or not isinstance(v, (str, int)):
            raise self.error(f"expected a size such as 100MB, got {_kind(v)}", key)
        try:
            n = parse_size(v)
        except ConfigError:
            raise self.error(f"size {v!r} is not understood; use e.g. 512MB, 8GB or 2GiB", key) from None
        if n <= 0:
            raise self.error(f"size {v!r} must be more than 0 bytes", key)
        return v

    def list(self, key: str) -> list | None:
        v = self.value.get(key)
        if v is None:
            return None
        if not isinstance(v, list):
            raise self.error(f"expected a list, got {_kind(v)}", key)
        return v


def _kind(v: Any) -> str:
    if v is None:
        return "nothing"
    if isinstance(v, (dict, list)):
        return "a mapping" if isinstance(v, dict) else "a list"
    return f"{type(v).__name__} {v!r}"


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
    """A ``TrainConfig`` from a YAML config file (schema in the module docstring).

    Unknown keys and wrong types are ``ConfigError``s naming the key's location. The result has
    ``out`` = the folder of ``output`` and ``tiktoken_name`` = its file name.
    Example: ``load_config("examples/phases.yaml").phase_list()[0].name == "english"``.
    """
    p = Path(path)
    name = str(path)
    doc = _yaml_load(p)
    if doc is None:
        raise ConfigError(f"{name}: the config is empty; it needs at least output and phases")
    top = _Doc(name, "", doc, _TOP_KEYS)
    cfg = TrainConfig(config_file=name)

    def given(key: str, where: str | None = None) -> None:
        cfg.given_as[key] = f"{name}: {where or key}:"

    output = top.str("output")
    if output is not None:
        cfg.output = os.path.expanduser(output)
        cfg.out, cfg.tiktoken_name = _split_output(cfg.output, top)
        given("output")
    if (mb := top.number("working_set_mb")) is not None:
        # toktoktok's working set: the memory of the text held, 4 bytes per character
        if int(mb) < 1:
            raise top.error(f"{mb} is less than 1 MiB", "working_set_mb")
        cfg.working_set_mb = int(mb)
        given("working_set_mb")
    if (v := top.int("threads", minimum=None)) is not None:
        cfg.threads = v  # <= 0: all cores, as toktoktok's -1
        given("threads")
    cfg.verbose = top.bool("verbose")
    if (v := top.int("seed")) is not None:
        cfg.seed = v
    if (v := top.str("text_column")) is not None:
        cfg.text_column = v
    if (v := top.str("bad_utf8")) is not None:
        if v not in ("error", "replace", "skip"):
            raise top.error(f"{v!r}: use error, replace or skip", "bad_utf8")
        cfg.bad_utf8 = v
    if (b := top.size("budget")) is not None:
        cfg.budget = b
        given("budget")
    if top.has("roles"):
        roles = _Doc(name, "roles", top.raw("roles"), set(ROLES))
        for role in ROLES:
            if (tok := roles.str(role)) is not None:
                cfg.roles[role] = tok
                given(role, f"roles.{role}")
    cfg.hardcoded = top.bool("hardcoded")
    if (v := top.str("engine")) is not None:
        if v not in ENGINES:
            raise top.error(f"{v!r}: use local or ray", "engine")
        cfg.engine = v
    cfg.ray_address = top.str("ray_address")
    cfg.storage_options = _options(top)

    specials = top.list("special_tokens") or []
    for k, s in enumerate(specials):
        if not isinstance(s, str) or not s:
            raise top.error(f"expected the token's text, got {_kind(s)}", f"special_tokens[{k}]")
        if s in specials[:k]:
            raise top.error(f"{s!r} is given twice; list each special token once", f"special_tokens[{k}]")
    cfg.special_tokens = list(specials)

    if top.has("warm_start"):
        ws = _Doc(name, "warm_start", top.raw("warm_start"), _WARM_KEYS)
        file = ws.str("file")
        if file is None:
            raise ws.error("needs file: the .tiktoken or tokenizer.json to start from")
        cfg.warm_start = file

    phases = top.list("phases")
    if not phases:
        raise top.error("needs at least one phase (name, merges, sources)", "phases")
    names: dict[str, int] = {}
    for k, raw in enumerate(phases):
        ph = _Doc(name, f"phases[{k}]", raw, _PHASE_KEYS)
        pname = ph.str("name") or f"phase{k + 1}"
        if pname in names:
            raise ph.error(f"phase {pname!r} is also phases[{names[pname]}]; names must differ", "name")
        names[pname] = k
        merges = ph.int("merges")
        if merges is None:
            raise ph.error("needs merges: the number of new tokens this phase learns")
        srcs = ph.list("sources")
        if not srcs:
            raise ph.error("needs sources: a list of path: or file: entries")
        sources = [_source(name, f"phases[{k}].sources[{j}]", s) for j, s in enumerate(srcs)]
        cfg.phases.append(PhaseConfig(pname, merges, sources, ph.size("budget")))
    return cfg


def _output_parts(output: str, where: str) -> tuple[str, str]:
    """``output`` (the .tiktoken's path, ``~`` expanded) as (folder, file name); ``where`` names
    the option in errors."""
    output = os.path.expanduser(output)
    if output.endswith(("/", os.sep)) or os.path.isdir(output):
        raise ConfigError(f"{where}: {output!r} is a folder; give the path of the .tiktoken file, e.g. ./tokenizer.tiktoken")
    p = Path(output)
    _check_tiktoken_name(p.name, where)
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
    src = _Doc(file, where, raw, _SOURCE_KEYS)
    path, one = src.str("path"), src.str("file")
    if (path is None) == (one is None):
        raise src.error("give exactly one of path: (file, folder or glob) or file:")
    if one is not None and os.path.isdir(one):
        raise src.error(f"{one!r} is a folder; use path: for folders and globs", "file")
    return SourceConfig(path or one, src.number("weight"), src.str("text_column"), "path" if path else "file",
                        _options(src))


def _options(doc: _Doc) -> dict | None:
    """``storage_options``: a mapping of option names (passed to the store's client as they are)."""
    v = doc.raw("storage_options")
    if v is None:
        return None
    if not isinstance(v, dict) or not all(isinstance(k, str) for k in v):
        # the value is not shown: it may hold a secret
        raise doc.error("expected a mapping of option names to values (name: value lines)", "storage_options")
    return dict(v)


def build_config(config: str | None, sources: list[str], overrides: dict[str, Any]) -> TrainConfig:
    """The run's ``TrainConfig``: the config file (if any), then command-line values on top.

    ``overrides`` holds only the options given on the command line (``out``, ``merges``,
    ``special_tokens``, ``text_column``, ``bad_utf8``, ``hardcoded``, ``force``, ``memory_limit``,
    ``threads``, ``seed``, ``warm_start``, ``budget``, ``verbose``, ``engine``, ``ray_address``,
    ``roles``: the roles given, each replacing the config's).
    ``--out`` replaces the output folder (the .tiktoken keeps the config's file name, and the
    folder is toktok's own, as for any ``--out``); ``~`` is expanded;
    ``--merges`` sets the merges of a one-phase config. Example: ``build_config(None, ["data/"], {"out": "o", "merges": 10})``.
    """
    if config is None:
        cfg = TrainConfig(sources=list(sources))
    else:
        if sources:
            raise ConfigError("sources given both in --config and on the command line; put them in the config's phases")
        cfg = load_config(config)
    ov = dict(overrides)
    if "merges" in ov:
        n = ov.pop("merges")
        if config is not None:
            if len(cfg.phases) != 1:
                raise ConfigError(f"--merges: {config} has {len(cfg.phases)} phases; set merges per phase in the config")
            if isinstance(n, bool) or not isinstance(n, int) or n < 0:
                raise ConfigError(f"--merges {n!r} is not a whole number >= 0")
            cfg.phases[0].merges = n
        else:
            cfg.merges = n
    if "out" in ov:
        ov["out"] = os.path.expanduser(ov["out"])
        cfg.output = None
    for role, tok in ov.pop("roles", {}).items():
        cfg.roles[role] = tok
        cfg.given_as.pop(role, None)
    for key, value in ov.items():
        if not hasattr(cfg, key):
            raise ConfigError(f"unknown option {key!r}")
        setattr(cfg, key, value)
        cfg.given_as.pop(key, None)  # named as the command line's option from now on
    if config is not None and not cfg.out:
        raise ConfigError(f"{config}: output: missing; give the path of the .tiktoken file (or pass --out)")
    return cfg
