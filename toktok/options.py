"""Options: every option of a training run, defined once.

Each :class:`Option` holds its name (the Python keyword of ``toktok.train`` and the field of
``TrainConfig``), its kind (how a value is read from the command line, read from a YAML config and
checked), its default, unit and help, its command-line flags, its YAML key (toktoktok's own names
included, such as ``working_set_mb``) and where it lives (scope ``run``, ``phase`` or
``source``). ``cli.py`` builds ``toktok train``'s flags from :data:`OPTIONS`, ``config.py``
reads and checks YAML keys and validates a ``TrainConfig`` through them, and ``toktok.train``'s
keywords are checked against them (tests/test_api.py). Sizes are read into ints here, once.

Every reading names the option as the user wrote it: ``--merges``, ``run.yaml: phases[0].merges:``
or ``merges=`` (``where``). Adding an option is one entry; a mapping option of run and source scope
whose values may be secret (``storage_options``) is ``Option("storage_options", MAPPING, ...,
scope=("run", "source"), secret=True)``.
Example: ``OPTION["merges"].check(-5, "--merges")`` raises ``ConfigError("--merges -5 is less than
0; pass 0 or more")``.
"""
from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import dataclass, field
from typing import Any

from .errors import ConfigError, shown

_UNITS = {
    "": 1, "b": 1,
    "kb": 1000, "mb": 1000**2, "gb": 1000**3, "tb": 1000**4,
    "k": 1024, "m": 1024**2, "g": 1024**3, "t": 1024**4,
    "kib": 1024, "mib": 1024**2, "gib": 1024**3, "tib": 1024**4,
}
#: the largest ``--budget`` (1 EiB): beyond any machine
_MOST_BYTES = 1 << 60
#: The most ids ``--vocab-size`` and ``--pad-to-multiple-of`` may ask for (262,144, the largest
#: vocabularies in use): what the corpus does not fill becomes reserved special tokens, which cost
#: ~12 KB each at the export and the parity check (tiktoken's and HF's loads of them): 1,048,576
#: of them peaked at 12 GB, 16,777,216 would take ~200 GB.
MOST_IDS = 1 << 18


def parse_size(text: str | int) -> int:
    """Bytes in a human size: ``512MB``, ``8GB``, ``2GiB``, ``1.5g`` or a plain integer."""
    if isinstance(text, int) and not isinstance(text, bool):
        return text
    m = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([a-zA-Z]*)\s*", str(text))
    if not m or m.group(2).lower() not in _UNITS:
        raise ConfigError(f"size {shown(text)} is not understood; use e.g. 512MB, 8GB or 2GiB")
    return int(float(m.group(1)) * _UNITS[m.group(2).lower()])


def kind_of_value(v: Any) -> str:
    """How a value is named in messages: ``a list``, ``str 'ten'``, ``nothing``."""
    if v is None:
        return "nothing"
    if isinstance(v, (dict, list)):
        return "a mapping" if isinstance(v, dict) else "a list"
    return f"{type(v).__name__} {shown(v)}"


def at(where: str, value: str) -> str:
    """``where`` followed by a value: ``--merges -5``, ``run.yaml: seed: -5``, ``merges=-5``."""
    return f"{where}{value}" if where.endswith("=") else f"{where} {value}"


def _choices(values: tuple[str, ...]) -> str:
    return ", ".join(values[:-1]) + " or " + values[-1] if len(values) > 1 else values[0]


# ---------------------------------------------------------------------------------------------
# Kinds: how a value is read (command line, YAML) and checked
# ---------------------------------------------------------------------------------------------


class Kind:
    """How values of one type are read and checked. ``from_text`` reads a command-line string,
    ``from_yaml`` a value parsed from YAML (wrong YAML types are errors at the key), ``check`` a
    Python value (the one validation every value goes through; returns it normalised)."""

    py: Any = str  # the Python type, for the command line's parser
    metavar: str | None = None  # how --help shows a value (None: as its Python type)

    def from_text(self, opt: Option, text: str, where: str) -> Any:
        return self.check(opt, text, where)

    def from_yaml(self, opt: Option, v: Any, where: str) -> Any:
        return self.check(opt, v, where)

    def check(self, opt: Option, v: Any, where: str) -> Any:
        return v


class _Whole(Kind):
    """A whole number, at least ``opt.minimum`` and at most ``opt.maximum`` when it has them."""

    py = str  # read as text, so that "ten" and "1.5" get toktok's message, not Click's
    metavar = "INTEGER"  # (--help would say <str>)

    def from_text(self, opt, text, where):
        try:
            v = int(str(text).strip())
        except ValueError:
            raise ConfigError(f"{at(where, shown(text))} is not a whole number; {opt.hint}") from None
        return self.check(opt, v, where)

    def from_yaml(self, opt, v, where):
        if isinstance(v, bool) or not isinstance(v, int):
            raise ConfigError(f"{where} expected a whole number, got {kind_of_value(v)}")
        return self.check(opt, v, where)

    def check(self, opt, v, where):
        if isinstance(v, bool) or not isinstance(v, int):
            raise ConfigError(f"{at(where, shown(v))} is not a whole number; {opt.hint}")
        if opt.minimum is not None and v < opt.minimum:
            raise ConfigError(f"{at(where, str(v))} is less than {opt.minimum}; pass {opt.minimum} or more")
        if opt.maximum is not None and v > opt.maximum:
            raise ConfigError(f"{at(where, shown(v))} is more than {opt.maximum:,}; pass {opt.maximum} or less")
        return v


def _binary_size(n: int) -> str:
    """``n`` bytes in the largest binary unit that divides it: ``_binary_size(1 << 60) == "1EiB"``."""
    for unit, shift in (("EiB", 60), ("PiB", 50), ("TiB", 40), ("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n and n % (1 << shift) == 0:
            return f"{n >> shift}{unit}"
    return f"{n}B"


class _Size(Kind):
    """Bytes, written with units (``512MB``, ``2GiB``) or as a whole number; read into an int."""

    metavar = "SIZE"

    def check(self, opt, v, where):
        if isinstance(v, bool) or not isinstance(v, (str, int)):
            raise ConfigError(f"{where} expected a size such as 100MB, got {kind_of_value(v)}")
        try:
            n = parse_size(v)
        except ConfigError:
            raise ConfigError(f"{where} size {shown(v)} is not understood; use e.g. 512MB, 8GB or 2GiB") from None
        if n <= 0:
            raise ConfigError(f"{where} size {shown(v)} must be more than 0 bytes")
        # the option's own bound (--memory-limit has the machine's memory, checked by the config)
        if opt.maximum is not None and n > opt.maximum:
            raise ConfigError(f"{where} size {shown(v)} is beyond any machine; pass at most "
                              f"{_binary_size(opt.maximum)}, e.g. 8GB")
        return n


class _Text(Kind):
    """A non-empty string."""

    def check(self, opt, v, where):
        if not isinstance(v, str) or not v:
            raise ConfigError(f"{where} expected a non-empty string, got {kind_of_value(v)}")
        return v


class _Path(_Text):
    """A path: a non-empty string (or path object), kept as written."""

    def check(self, opt, v, where):
        import os

        if isinstance(v, os.PathLike):
            v = os.fspath(v)
        return super().check(opt, v, where)


class _Choice(Kind):
    """One of ``opt.choices``."""

    def check(self, opt, v, where):
        if v not in opt.choices:
            raise ConfigError(f"{at(where, shown(v))}: use {_choices(opt.choices)}")
        return v


class _Flag(Kind):
    """True or false."""

    py = bool

    def check(self, opt, v, where):
        if not isinstance(v, bool):
            raise ConfigError(f"{where} expected true or false, got {kind_of_value(v)}")
        return v


class _Number(Kind):
    """A finite number > 0."""

    def check(self, opt, v, where):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not v > 0 or math.isinf(v):
            raise ConfigError(f"{where} expected a number > 0, got {kind_of_value(v)}")
        return float(v)


class _MiB(Kind):
    """Whole MiB >= 1 (toktoktok's ``working_set_mb``); a YAML number is rounded down, as toktoktok does."""

    def from_text(self, opt, text, where):
        return _WHOLE.from_text(opt, text, where)

    def from_yaml(self, opt, v, where):
        n = _NUMBER.check(opt, v, where)
        if int(n) < 1:
            raise ConfigError(f"{where} {n} is less than 1 MiB")
        return int(n)

    def check(self, opt, v, where):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ConfigError(f"{at(where, repr(v))} is not a whole number of MiB >= 1, e.g. 1024")
        return v


class _Tokens(Kind):
    """A list of distinct special tokens, in id order: each its text, or (YAML, Python) a mapping
    ``{content: TEXT, rstrip: true, ...}`` / a ``toktok.SpecialToken`` with HF's added-token flags
    (:mod:`toktok.added`; read into a ``SpecialToken``, a ``str``)."""

    def from_yaml(self, opt, v, where):
        from .added import special_token

        if not isinstance(v, list):
            raise ConfigError(f"{where} expected a list, got {kind_of_value(v)}")
        stem = where[:-1] if where.endswith(":") else where
        out: list[str] = []
        for k, s in enumerate(v):
            if isinstance(s, dict):
                s = special_token(s, f"{stem}[{k}]")
            if not isinstance(s, str) or not s:
                raise ConfigError(f"{stem}[{k}]: expected the token's text, got {kind_of_value(s)}")
            if s in out:
                raise ConfigError(f"{stem}[{k}]: {str(s)!r} is given twice; list each special token once")
            out.append(s)
        return out

    def check(self, opt, v, where):
        from collections.abc import Mapping

        from .added import special_token

        if isinstance(v, str) or not isinstance(v, (list, tuple)):
            raise ConfigError(f"{where} expected a list of tokens, got {kind_of_value(v)}")
        out: list[str] = []
        for k, s in enumerate(v):
            if isinstance(s, Mapping):
                s = special_token(s, f"{where.rstrip('=')}[{k}]")
            if not isinstance(s, str):
                raise ConfigError(f"{where} expected the token's text, got {kind_of_value(s)}")
            if not s:
                raise ConfigError(f"{where} is empty; give the token's text")
            if s in out:
                raise ConfigError(f"{at(where, repr(str(s)))} is given twice; give each special token once")
            out.append(special_token(s, where))
        return out


class _Mapping(Kind):
    """A mapping of names to strings; ``opt.keys`` (when given) are the names allowed, each with a
    command-line flag of its own (``--bos-token`` sets ``roles["bos_token"]``)."""

    def from_yaml(self, opt, v, where):
        if not isinstance(v, dict):
            raise ConfigError(f"{where} expected a mapping of keys, got {kind_of_value(v)}")
        stem = where[:-1] if where.endswith(":") else where
        out = {}
        for k, x in v.items():
            if not isinstance(k, str):
                raise ConfigError(f"{where} key {k!r} is not a name")
            if opt.keys and k not in opt.keys:
                raise ConfigError(f"{where} unknown key {k!r} (known: {', '.join(sorted(opt.keys))})")
            if x is None:
                continue
            if not isinstance(x, str) or not x:
                raise ConfigError(f"{stem}.{k}: expected a non-empty string, got {kind_of_value(x)}")
            out[k] = x
        return out

    def check(self, opt, v, where):
        if not isinstance(v, dict):
            raise ConfigError(f"{where} expected a mapping, got {kind_of_value(v)}")
        for k, x in v.items():
            if opt.keys and k not in opt.keys:
                raise ConfigError(f"{where}: unknown key {k!r}; use {', '.join(opt.keys)}")
        return dict(v)


class _StoreOptions(Kind):
    """Options of a store's client (``storage_options``): a mapping of names to anything the
    client takes (strings, numbers, nested mappings). Values are never shown in a message: they
    may be secrets."""

    def from_yaml(self, opt, v, where):
        return self.check(opt, v, where)

    def check(self, opt, v, where):
        if not isinstance(v, dict) or not all(isinstance(k, str) for k in v):
            raise ConfigError(f"{where} expected a mapping of option names to values (name: value lines), "
                              "e.g. {'endpoint_url': 'http://127.0.0.1:9000'}")
        return dict(v)


class _Progress(Kind):
    """How a run reports progress: one of ``opt.choices``, or (from Python) a callable
    ``progress(stage, done, total)``."""

    def check(self, opt, v, where):
        if callable(v):
            return v
        if v not in opt.choices:
            python = not where.startswith("-") and not where.endswith(":")  # a keyword of toktok.train
            raise ConfigError(f"{at(where, repr(v))}: use {_choices(opt.choices)}"
                              + (", or a callable progress(stage, done, total)" if python else ""))
        return v


class _Split(Kind):
    """A pre-tokenizer pattern: a name (``cl100k``, ``o200k``, ``gpt2``, ``qwen2``, ``llama3``) or a
    regex, read as written; the one check turns it into a :class:`toktok.patterns.Pattern`,
    refusing a regex that tiktoken and HF tokenizers would read differently (:func:`toktok.patterns.check`)."""

    def from_text(self, opt, text, where):
        return self.from_yaml(opt, text, where)

    def from_yaml(self, opt, v, where):
        if isinstance(v, str) and not v.strip():
            raise ConfigError(f"{where} is empty; give a pattern name (cl100k, o200k, gpt2, qwen2, llama3, superbpe) "
                              "or a regex, or leave it out for cl100k")
        if not isinstance(v, str):
            raise ConfigError(f"{where} expected a pattern name (cl100k, o200k, gpt2, qwen2, llama3, superbpe) or a "
                              "regex, "
                              f"got {kind_of_value(v)}")
        return v

    def check(self, opt, v, where):
        from .patterns import check

        return check(v, where)


class _Paths(Kind):
    """Paths, files, folders or globs (a repeatable flag; a YAML list or one string): a list of str."""

    def from_text(self, opt, text, where):
        return self.check(opt, text, where)

    def check(self, opt, v, where):
        import os

        items = [v] if isinstance(v, (str, os.PathLike)) else v
        if not isinstance(items, (list, tuple)) or not items:
            raise ConfigError(f"{where} expected one or more paths, got {kind_of_value(v)}")
        out = []
        for x in items:
            x = os.fspath(x) if isinstance(x, os.PathLike) else x
            if not isinstance(x, str) or not x:
                raise ConfigError(f"{where} expected paths (files, folders or globs), got {kind_of_value(x)}")
            out.append(x)
        return out


class _Sizes(Kind):
    """Total vocabulary sizes (``8192,16384,32768``; a YAML or Python list of whole numbers), each
    one as ``--vocab-size`` takes it, distinct; read into a sorted list of ints."""

    def from_text(self, opt, text, where):
        parts = [p.strip() for p in str(text).split(",")]
        try:
            sizes = [int(p) for p in parts]
        except ValueError:
            raise ConfigError(f"{at(where, shown(text))} is not a list of whole numbers; {opt.hint}") from None
        return self.check(opt, sizes, where)

    def check(self, opt, v, where):
        if isinstance(v, str):
            return self.from_text(opt, v, where)
        if not isinstance(v, (list, tuple)) or not v:
            got = "an empty list" if isinstance(v, (list, tuple)) else kind_of_value(v)
            raise ConfigError(f"{where} expected a list of total sizes, got {got}; {opt.hint}")
        each = dataclasses.replace(OPTION["vocab_size"], hint=opt.hint)  # its bounds, the ladder's hint
        sizes = [_WHOLE.check(each, x, where) for x in v]
        twice = [x for i, x in enumerate(sizes) if x in sizes[:i]]
        if twice:
            raise ConfigError(f"{at(where, ','.join(map(str, sizes)))}: {twice[0]} is given twice; give each size once")
        return sorted(sizes)


class _Any(Kind):
    """Checked elsewhere (the phases, the sources)."""


_WHOLE, _SIZE, _TEXT, _PATH, _CHOICE, _FLAG, _NUMBER = _Whole(), _Size(), _Text(), _Path(), _Choice(), _Flag(), _Number()
WHOLE, SIZE, TEXT, PATH, CHOICE, FLAG, NUMBER = _WHOLE, _SIZE, _TEXT, _PATH, _CHOICE, _FLAG, _NUMBER
MIB, TOKENS, MAPPING, STORE_OPTIONS, ANY = _MiB(), _Tokens(), _Mapping(), _StoreOptions(), _Any()
PROGRESS = _Progress()
SPLIT = _Split()
PATHS, SIZES = _Paths(), _Sizes()


@dataclass(frozen=True)
class Option:
    """One option: ``Option("seed", WHOLE, 0, "Seed of the sampling", cli=("--seed",), yaml="seed")``.

    ``cli``: its flags, the first long one naming it in messages (a boolean with an ``off`` flag
    is written ``"--hardcoded/--no-hardcoded"``); ``yaml``: its key in a config file (in each
    scope of ``yaml_scope``, default ``scope``), None if config files do not take it; ``scope``:
    where it lives (``run``: a keyword of ``toktok.train``; ``phase``: of ``toktok.Phase``;
    ``source``: of ``toktok.Source``); ``stored``: part of the run's configuration as recorded in
    the run file (False for what only says how to run it: ``force``, ``resume``, ``config``);
    ``secret``: values are redacted when stored. ``minimum``/``maximum``/``choices``/``keys`` parametrise
    the kind; ``hint`` ends the message for a value of the wrong type.
    """

    name: str
    kind: Kind
    default: Any
    help: str
    cli: tuple[str, ...] = ()
    yaml: str | None = None
    scope: tuple[str, ...] = ("run",)
    yaml_scope: tuple[str, ...] | None = None
    unit: str | None = None
    toktoktok: bool = False
    stored: bool = True
    secret: bool = False
    minimum: int | None = None
    maximum: int | None = None
    choices: tuple[str, ...] = ()
    keys: tuple[str, ...] = ()
    key_flags: dict = field(default_factory=dict)  # mapping options: key -> (flag, help)
    hint: str = ""
    metavar: str | None = None

    @property
    def flag(self) -> str | None:
        """The flag that names the option in messages (``--merges``), None without one."""
        return self.cli[0].split("/")[0] if self.cli else None

    def where_yaml(self) -> tuple[str, ...]:
        return (self.yaml_scope if self.yaml_scope is not None else self.scope) if self.yaml else ()

    def check(self, v: Any, where: str | None = None) -> Any:
        """``v`` checked and normalised (sizes into ints); ConfigError naming ``where``."""
        return self.kind.check(self, v, where or self.flag or self.name)

    def from_text(self, text: str, where: str | None = None) -> Any:
        return self.kind.from_text(self, text, where or self.flag or self.name)

    def from_yaml(self, v: Any, where: str) -> Any:
        return self.kind.from_yaml(self, v, where)


#: Special-token roles for ``transformers`` (``--bos-token`` ..., YAML ``roles: {bos_token: ...}``).
ROLES = ("bos_token", "eos_token", "pad_token", "unk_token")
ENGINES = ("local", "ray")
BAD_UTF8 = ("error", "replace", "skip")
#: How a run reports progress (``--progress``): :mod:`toktok.progress`.
PROGRESS_MODES = ("rich", "plain", "json", "none")

#: Every option of ``toktok train`` / ``toktok.train`` / a config file, in the order of ``--help``.
OPTIONS: tuple[Option, ...] = (
    Option("config", PATH, None, "YAML config file (phases, warm start, ...); flags given here override it",
           cli=("--config", "-c"), stored=False),
    Option("out", PATH, "", "Output folder for the tokenizer and run.duckdb", cli=("--out", "-o")),
    Option("output", PATH, None, "The .tiktoken file's path (toktoktok's output:); the other files go beside "
           "it, in NAME.toktok/ when its folder is not toktok's own", yaml="output", toktoktok=True),
    Option("merges", WHOLE, 30000, "Number of merges to learn (new tokens); default 30000", cli=("--merges", "-n"),
           yaml="merges", scope=("run", "phase"), yaml_scope=("phase",), toktoktok=True, minimum=0, unit="tokens",
           hint="pass the number of new tokens, e.g. --merges 30000"),
    Option("vocab_size", WHOLE, None, "Total ids instead of --merges: 256 bytes + hardcoded + merges + special "
           "tokens; a shortfall is filled with reserved special tokens", cli=("--vocab-size",), yaml="vocab_size",
           scope=("run", "phase"), yaml_scope=("phase",), minimum=1, maximum=MOST_IDS, unit="ids",
           hint="pass the total number of ids, e.g. --vocab-size 32768"),
    Option("pad_to_multiple_of", WHOLE, None, "Round the total ids up to a multiple of this with reserved special "
           "tokens <|reserved_special_token_i|> after the given ones", cli=("--pad-to-multiple-of",),
           yaml="pad_to_multiple_of", minimum=1, maximum=MOST_IDS, unit="ids",
           hint="pass e.g. --pad-to-multiple-of 128"),
    Option("max_token_length", WHOLE, None, "No merge makes a token longer than this many bytes (the merges come "
           "from the other pairs; hardcoded tokens longer are left out)", cli=("--max-token-length",),
           yaml="max_token_length", minimum=2, unit="bytes", hint="pass a number of bytes, e.g. --max-token-length 16"),
    Option("min_frequency", WHOLE, None, "Stop merging when the best pair occurs fewer times than this (fewer "
           "merges, said in the summary)", cli=("--min-frequency",), yaml="min_frequency", minimum=1,
           hint="pass a count, e.g. --min-frequency 2"),
    Option("ladder", SIZES, None, "Also write a complete tokenizer at each of these smaller total sizes, e.g. "
           "8192,16384,32768: one run to the largest (its --vocab-size), each smaller one in OUT/ladder/N/",
           cli=("--ladder",), yaml="ladder", metavar="N,N,...", hint="pass total sizes, e.g. --ladder 8192,16384,32768"),
    Option("word_counts", PATHS, None, "Word-count tables (Parquet: a word and an integer count column, e.g. from "
           "toktok count) to train from, instead of or beside text; repeatable, globs allowed", cli=("--word-counts",),
           metavar="FILE|GLOB"),
    Option("word_column", TEXT, "word", "The word column of --word-counts tables (text or binary; default word)",
           cli=("--word-column",), yaml="word_column", scope=("run", "source")),
    Option("count_column", TEXT, "count", "The count column of --word-counts tables (integers; default count)",
           cli=("--count-column",), yaml="count_column", scope=("run", "source")),
    Option("special_tokens", TOKENS, (), "Special token, repeatable, in id order", cli=("--special-token", "-s"),
           yaml="special_tokens", toktoktok=True),
    Option("text_column", TEXT, "text", "Parquet column / JSONL field with the text (default text)",
           cli=("--text-column",), yaml="text_column", scope=("run", "source")),
    Option("bad_utf8", CHOICE, "error", "Undecodable UTF-8: error (default), replace or skip", cli=("--bad-utf8",),
           yaml="bad_utf8", choices=BAD_UTF8),
    Option("hardcoded", FLAG, None, "Add the hardcoded tokens (default: yes from scratch, no on a warm start)",
           cli=("--hardcoded/--no-hardcoded",), yaml="hardcoded"),
    Option("pattern", SPLIT, None, "Pre-tokenizer: cl100k (default; a warm start keeps its base's), o200k, gpt2, "
           "qwen2, llama3 (= cl100k), superbpe, or a regex that tiktoken and HF tokenizers read alike; a phase may "
           "have its own (the tokenizer splits with the last phase's)", cli=("--pattern",), yaml="pattern",
           scope=("run", "phase"), metavar="NAME|REGEX"),
    Option("superbpe", WHOLE, None, "SuperBPE: learn subwords with the run's pattern up to this many ids, then "
           "superwords (across whitespace: pattern superbpe) on the same text up to --vocab-size",
           cli=("--superbpe",), yaml="superbpe", minimum=1, maximum=MOST_IDS, unit="ids", metavar="T",
           hint="pass the total ids at the transition, e.g. --superbpe 26000 with --vocab-size 32768"),
    Option("warm_start", PATH, None, "Start from this .tiktoken or tokenizer.json, keeping every id",
           cli=("--warm-start",), yaml="warm_start", toktoktok=True),
    Option("budget", SIZE, None, "Memory budget of the whole run, e.g. 512MB or 8GB: larger corpora are sampled to fit",
           cli=("--budget",), yaml="budget", scope=("run", "phase"), maximum=_MOST_BYTES, unit="bytes"),
    Option("force", FLAG, False, "Replace an existing output folder (or start an interrupted run over)",
           cli=("--force",), stored=False),
    Option("resume", FLAG, False, "Continue the interrupted run into --out from its last checkpoint (same options)",
           cli=("--resume",), stored=False),
    Option("memory_limit", SIZE, 2 * 1000**3, "DuckDB memory limit (spills to disk beyond it); default 2GB",
           cli=("--memory-limit",), yaml="memory_limit", unit="bytes"),
    Option("threads", WHOLE, 0, "Threads (0 or -1 = all cores; more than the cores is capped)", cli=("--threads",),
           yaml="threads", toktoktok=True, hint="pass a count, or -1 for all cores"),
    Option("seed", WHOLE, 0, "Seed of the sampling and of the parity check", cli=("--seed",), yaml="seed", minimum=0,
           hint="pass a whole number >= 0, e.g. --seed 1"),
    Option("working_set_mb", MIB, None, "Text held per phase, toktoktok's sizing: MiB x 2^20 / 4 bytes of text",
           cli=("--working-set-mb",), yaml="working_set_mb", toktoktok=True, unit="MiB"),
    Option("engine", CHOICE, "local", "Where to read, sample and count: local (default) or ray (needs pip install "
           "'toktok[ray]')", cli=("--engine",), yaml="engine", choices=ENGINES),
    Option("ray_address", TEXT, None, "With --engine ray: join this Ray cluster (default: start a private one on this "
           "machine)", cli=("--ray-address",), yaml="ray_address"),
    Option("roles", MAPPING, {}, "Special tokens that transformers uses as bos/eos/pad/unk_token", yaml="roles",
           keys=ROLES, key_flags={
               "bos_token": ("--bos-token", "Special token that transformers uses as bos_token"),
               "eos_token": ("--eos-token", "Special token for eos_token (default: <|endoftext|> when it is special)"),
               "pad_token": ("--pad-token", "Special token for pad_token"),
               "unk_token": ("--unk-token", "Special token for unk_token")}),
    Option("storage_options", STORE_OPTIONS, None, "Options of the store clients of URL sources (s3://, gs://, "
           "az://, hf://, https://): credentials, endpoint_url, ...; a source's own go over the run's",
           yaml="storage_options", scope=("run", "source"), secret=True),
    Option("verbose", FLAG, None, "Log merges 1-10 and every 100th (pair, new token, id, count) to stderr; "
           "false: no merge log and no progress (unless --progress)", cli=("--verbose", "-v"), yaml="verbose",
           toktoktok=True),
    Option("chat_template", PATH, None, "Chat template for transformers' apply_chat_template, written to "
           "tokenizer_config.json: a Jinja file, or chatml or llama3 (their special tokens must be the run's)",
           cli=("--chat-template",), yaml="chat_template", metavar="FILE|NAME"),
    Option("progress", PROGRESS, None, "Progress on stderr: rich (bars; default on a terminal), plain (a line per "
           "stage every few seconds; default otherwise), json (JSON lines) or none", cli=("--progress",),
           yaml="progress", stored=False, choices=PROGRESS_MODES),
    Option("phases", ANY, (), "Training phases in order, each with its name, merges, sources and budget",
           yaml="phases", toktoktok=True),
    # a phase
    Option("name", TEXT, None, "The phase's (or an in-memory source's) name", yaml="name",
           scope=("phase", "source"), yaml_scope=("phase",), toktoktok=True),
    Option("sources", ANY, (), "Files, folders (recursive) or globs (** recursive): .parquet, .jsonl, .jsonl.zst, "
           ".txt; from Python also data in memory", yaml="sources", scope=("run", "phase"), yaml_scope=("phase",),
           toktoktok=True),
    # a source
    Option("path", PATH, None, "A file, folder or glob", yaml="path", scope=("source",), toktoktok=True),
    Option("file", PATH, None, "One file", yaml="file", scope=("source",), toktoktok=True),
    Option("counts", PATH, None, "A word-count table (Parquet), folder or glob: trained from as a run's counted text",
           yaml="counts", scope=("source",)),
    Option("weight", NUMBER, None, "The source's share of its phase's budget (default 1)", yaml="weight",
           scope=("source",)),
)

#: The options by name.
OPTION: dict[str, Option] = {o.name: o for o in OPTIONS}
#: Flags of ``toktok train`` that are not options of a run: how the command prints.
CLI_ONLY = {
    "--quiet": "verbose=False: no progress (unless --progress is given) and no merge log",
    "--debug": "show tracebacks (the library raises them anyway)",
}
#: Keywords of ``toktok.train`` that neither the command line nor a config file has: Python callables.
PYTHON_ONLY = {"log": "where verbose merge lines go"}


def redacted(name: str, value: Any) -> Any:
    """``value`` as the run file may record it: a secret option's values replaced by ``"***"``
    (all but keys known to be harmless, such as an endpoint: ``toktok.remote.redact``), and the
    secret parts of URLs (a signed query, user info) left out, so that credentials never reach
    ``meta('config')``."""
    opt = OPTION.get(name)
    if opt is None or value is None:
        return value
    from .count.remote import redact  # light: the store clients load only when a URL is read

    if opt.secret:
        return redact(value)
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, list) and name == "sources":
        return [redact(v) if isinstance(v, str) else v for v in value]
    return value


def run_options() -> list[Option]:
    """The options of a run (``toktok.train``'s keywords), in ``--help`` order."""
    return [o for o in OPTIONS if "run" in o.scope]


def yaml_keys(scope: str) -> set[str]:
    """The keys a config file takes at ``scope`` (``run`` = the top level, ``phase``, ``source``)."""
    return {o.yaml for o in OPTIONS if scope in o.where_yaml()}


def cli_flags() -> dict[str, tuple[str, str | None]]:
    """Every flag of ``toktok train`` that sets an option: flag -> (option name, mapping key or None)."""
    out: dict[str, tuple[str, str | None]] = {}
    for o in OPTIONS:
        for f in o.cli:
            for part in f.split("/"):
                out[part] = (o.name, None)
        for k, (flag, _help) in o.key_flags.items():
            out[flag] = (o.name, k)
    return out


__all__ = ["Option", "OPTIONS", "OPTION", "ROLES", "ENGINES", "parse_size", "run_options", "yaml_keys", "cli_flags",
           "redacted"]
