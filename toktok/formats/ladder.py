"""Vocabulary ladders: a complete tokenizer of any smaller size cut from one run (``cut``, ``rung``).

The first k merges of a run are the run of k merges, so a tokenizer of N total ids is the run's
vocabulary up to the merge that made its n-th new token of the last phase (n = N less the ids
the last phase started with and the run's own special tokens), its special tokens placed by the
run's rule (after the last rank, or kept at a warm-start base's ids), then reserved special tokens
for what the merges did not give and for ``--pad-to-multiple-of``: exactly what a run with
``--vocab-size N`` on the same data, options and seed writes. :class:`Ladder` is what a rung is
cut from (:meth:`Ladder.of_run`: a finished run's file; the pipeline builds one from its own
vocabulary), :func:`rung` the vocabulary of one size, :func:`write_rung` its files (the export's
own writers), proven by the parity check; :func:`cut` is ``toktok cut RUN --vocab-size N --out DIR``.
Example: ``cut("out/demo", vocab_size=1500, out="out/demo-1500").vocab_size == 1500``.
"""
from __future__ import annotations

import json
import os
import re
import shlex
import shutil
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from ..added import added_flags
from ..errors import ConfigError, OutputError, ToktokError, VocabError
from ..options import OPTION, at
from ..patterns import Pattern
from ..rundir import (OutputLayout, check_out_parent, holds_cwd, inside, interrupted_run, publish, real,
                      special_tokens_file, staging_of)
from ..vocab import Vocab
from .common import HF_CONFIG_FILE, HF_FILE, HF_SPECIAL_MAP_FILE, TIKTOKEN_FILE, read_json, write_atomic
from .hf import write_hf
from .specials import special_tokens_json
from .tiktoken import tiktoken_text, write_tiktoken

#: How reserved special tokens are spelled (Llama 3's), ``i`` from 0, skipping names the run has
#: (the same as :data:`toktok.start.RESERVED`).
RESERVED = "<|reserved_special_token_{}|>"
_RESERVED = re.compile(r"<\|reserved_special_token_\d+\|>")
#: Where a run's rungs go inside its output folder: ``OUT/ladder/N/``.
LADDER_FOLDER = "ladder"

__all__ = ["LADDER_FOLDER", "Ladder", "Rung", "cut", "rung", "rung_folder", "write_ladder", "write_rung"]


@dataclass(frozen=True)
class Ladder:
    """What the rungs of one run are cut from: its ranks after the last merge (``tokens``, a
    warm-start base's pinned specials' placeholders included, ``pinned``), the run's own special
    tokens after the last rank (``specials``: listed, and a base's; no reserved ones), the ids the
    last phase started with (``start``: its merges are ``tokens[start:]``), and how the files are
    written: the pattern, the transformers roles, the added-token flags, the chat template's text,
    the .tiktoken's name and ``--pad-to-multiple-of``.
    Example: ``Ladder(tokens, ["<|endoftext|>"], {}, 1417, DEFAULT).smallest == 1418``."""

    tokens: list[bytes]
    specials: list[str]
    pinned: dict[int, str]
    start: int
    pattern: Pattern
    roles: dict = field(default_factory=dict)
    added: dict = field(default_factory=dict)
    chat_template: str | None = None
    tiktoken_name: str = TIKTOKEN_FILE
    pad_to_multiple_of: int | None = None
    stopped: bool = False  # the last phase learned fewer merges than it asked for: no more to learn

    @property
    def largest(self) -> int | None:
        """The most total ids a rung may have: the run's own vocabulary (no reserved specials),
        or None (any size) when its merges stopped short: a run asked for more learns no more."""
        return None if self.stopped else len(self.tokens) + len(self.specials)

    @property
    def smallest(self) -> int:
        """The fewest total ids a rung may have: the last phase's starting ids and the specials."""
        return self.start + len(self.specials)

    @classmethod
    def of_run(cls, run: str | os.PathLike) -> "Ladder":
        """The ladder of a finished run (its output folder or ``run.duckdb``): the vocabulary, the
        meta keys ``specials``, ``reserved``, ``phases``, ``config`` and ``pattern``, and the chat
        template of its ``tokenizer_config.json``. Reads the run file read-only.
        Example: ``Ladder.of_run("out/demo").start == 1417``."""
        with _run_store(run) as store:
            rows = store.run("ladder.vocab").fetchall()
            meta = {k: store.get_meta(k) for k in ("specials", "reserved", "phases", "config", "pattern")}
        folder = store.path.parent
        if not rows:
            raise ToktokError(f"{store.path}: the run file holds no vocabulary (an unfinished run?); cut a finished run")
        config = json.loads(meta["config"] or "{}")
        specials_meta = json.loads(meta["specials"] or "{}")
        pinned_ids = set(specials_meta.get("gaps") or [])
        n_tokens = max([i for i, _t, kind in rows if kind != "special"] + list(pinned_ids)) + 1
        tokens = [bytes(t) for _i, t, _k in rows[:n_tokens]]
        pinned = {i: tokens[i].decode("utf-8") for i in sorted(pinned_ids)}
        after = [bytes(t).decode("utf-8") for _i, t, _k in rows[n_tokens:]]
        specials = after[:len(after) - _reserved(after, meta["reserved"], config, pinned)]
        phases = json.loads(meta["phases"] or "[]")
        start = int(phases[-1]["first_id"]) if phases else n_tokens
        stopped = bool(phases) and phases[-1]["merges_learned"] < phases[-1]["merges_requested"]
        listed = OPTION["special_tokens"].check(config.get("special_tokens") or [], "special_tokens:")
        chat = None
        if (folder / HF_CONFIG_FILE).is_file():
            hf_config = read_json(folder / HF_CONFIG_FILE)
            if not isinstance(hf_config, dict):
                raise VocabError(f"{folder / HF_CONFIG_FILE}: not a JSON object, so not the run's {HF_CONFIG_FILE}; "
                                 "restore it (its chat template goes into the cut), or remove it")
            chat = hf_config.get("chat_template")
        return cls(tokens, specials, pinned, start, Pattern.from_meta(meta["pattern"]),
                   roles=dict(config.get("roles") or {}), added=added_flags(listed), chat_template=chat,
                   tiktoken_name=config.get("tiktoken_name") or TIKTOKEN_FILE,
                   pad_to_multiple_of=config.get("pad_to_multiple_of"), stopped=stopped)


    @classmethod
    def of_vocab(cls, vocab: Vocab, *, reserved: int, start: int, stopped: bool, cfg, pattern: Pattern,
                 chat_template: str | None) -> "Ladder":
        """The ladder of a run in progress: its vocabulary after the last phase (``vocab``, with
        the ``reserved`` special tokens the run added last), the ids its last phase started with,
        whether its merges stopped short, and how its files are written (``cfg``: the ``RunSpec``'s
        roles, special tokens' flags, .tiktoken name and padding; ``pattern``, ``chat_template``).
        Example: ``Ladder.of_vocab(vocab, reserved=0, start=1417, stopped=False, cfg=spec, pattern=p, chat_template=None)``."""
        own = vocab.specials[:len(vocab.specials) - reserved]
        return cls(list(vocab.tokens), list(own), dict(vocab.pinned), start, pattern, roles=dict(cfg.roles),
                   added=added_flags(cfg.special_tokens), chat_template=chat_template,
                   tiktoken_name=cfg.tiktoken_name, pad_to_multiple_of=cfg.pad_to_multiple_of, stopped=stopped)


@contextmanager
def _run_store(run: str | os.PathLike):
    """The run file of ``run`` (an output folder or its ``run.duckdb``) opened read-only; ToktokError
    (one line naming it) for a path that holds no run file, a file that is not DuckDB's, another
    program's DuckDB database, or one DuckDB cannot open (held by a live run)."""
    import duckdb

    from ..insight.runfile import run_path
    from ..store import RunStore

    p = run_path(run)
    try:
        store = RunStore.open(p)
    except duckdb.Error as e:
        why = " ".join(str(e).split())[:120]
        raise ToktokError(f"{p}: cannot read it as a run file ({why}); pass a finished toktok run's folder "
                          "or its run.duckdb") from None
    try:
        yield store
    except duckdb.Error as e:
        why = " ".join(str(e).split())[:120]
        raise ToktokError(f"{p}: not a toktok run file ({why}); pass a finished toktok run's folder or its "
                          "run.duckdb") from None
    finally:
        store.con.close()


def _reserved(after: list[str], recorded: str | None, config: dict, pinned: dict[int, str]) -> int:
    """How many of the specials after the last rank are reserved ones the run added (meta
    ``reserved``; a run file from before it: the trailing ``<|reserved_special_token_i|>`` that
    the config does not list)."""
    if recorded is not None:
        return int(json.loads(recorded))
    listed = {t if isinstance(t, str) else t.get("content") for t in config.get("special_tokens") or []}
    k = 0
    while k < len(after) and _RESERVED.fullmatch(after[-1 - k]) and after[-1 - k] not in listed:
        k += 1
    return k


@dataclass(frozen=True)
class Rung:
    """One size of a ladder: its vocabulary (reserved specials included), the new tokens of the
    last phase it keeps, the reserved special tokens that fill it, and how many of them make up
    for merges the run did not learn (``short``)."""

    vocab: Vocab
    merges: int
    reserved: int
    short: int

    @property
    def vocab_size(self) -> int:
        return self.vocab.size


def rung(ladder: Ladder, vocab_size: int, where: str = "--vocab-size") -> Rung:
    """The vocabulary of ``vocab_size`` total ids cut from ``ladder``: the last phase's first
    ``vocab_size - ladder.smallest`` new tokens, the run's specials, then reserved special tokens
    for a shortfall and up to ``--pad-to-multiple-of`` (as :func:`toktok.start.reserve`). ConfigError
    (naming ``where``) for a size below the ids the last phase starts with, above the run's own
    (unless its merges stopped short: :attr:`Ladder.largest`), or not a multiple of the padding. Example: ``rung(ladder, 2048).vocab.size == 2048``."""
    OPTION["vocab_size"].check(vocab_size, where)
    if vocab_size < ladder.smallest:
        raise ConfigError(f"{at(where, str(vocab_size))} is less than the {ladder.smallest:,} ids the run's last phase "
                          f"starts with ({ladder.start:,} tokens + {len(ladder.specials)} special); pass at least "
                          f"{ladder.smallest}")
    if ladder.largest is not None and vocab_size > ladder.largest:
        raise ConfigError(f"{at(where, str(vocab_size))} is more than the run's {ladder.largest:,} ids "
                          f"({len(ladder.tokens):,} tokens + {len(ladder.specials)} special, reserved ones aside): a cut "
                          f"keeps a prefix of its merges; train with --vocab-size {vocab_size} (or a --ladder up to it)")
    pad = ladder.pad_to_multiple_of
    if pad and vocab_size % pad:
        raise ConfigError(f"{at(where, str(vocab_size))} is not a multiple of the run's --pad-to-multiple-of {pad}; "
                          f"pass a multiple, e.g. {-(-vocab_size // pad) * pad}")
    merges = min(vocab_size - ladder.smallest, len(ladder.tokens) - ladder.start)
    vocab = Vocab(ladder.tokens[:ladder.start + merges], list(ladder.specials), dict(ladder.pinned))
    short = vocab_size - vocab.size
    names = reserved_names(vocab.all_specials(), short)
    return Rung(Vocab(vocab.tokens, vocab.specials + names, vocab.pinned), merges, len(names), short)


def reserved_names(have: list[str], k: int) -> list[str]:
    """``k`` reserved special tokens (:data:`RESERVED`, from 0) whose names are not in ``have``.
    Example: ``reserved_names(["<|reserved_special_token_0|>"], 1) == ["<|reserved_special_token_1|>"]``."""
    taken, names, i = set(have), [], 0
    while len(names) < k:
        if (name := RESERVED.format(i)) not in taken:
            names.append(name)
        i += 1
    return names


def rung_folder(out: str | os.PathLike, vocab_size: int) -> Path:
    """Where a run's rung of ``vocab_size`` ids goes: ``OUT/ladder/N/``."""
    return Path(out) / LADDER_FOLDER / str(vocab_size)


def write_rung(ladder: Ladder, vocab: Vocab, folder: str | os.PathLike) -> tuple[str, Vocab]:
    """``vocab`` (a :func:`rung`'s) as the run's tokenizer files in ``folder``: tokenizer.json and
    the transformers files, the .tiktoken, and the specials beside it where the run's rule
    declares them (:func:`toktok.formats.export.write` writes the same). Returns the .tiktoken's
    text and the vocabulary, for the parity check (``verify(written=...)``)."""
    folder = Path(folder)
    vocab.check()
    write_hf(vocab, folder, roles=ladder.roles, check=False, pattern=ladder.pattern, added=ladder.added,
             chat_template=ladder.chat_template)
    text = tiktoken_text(vocab)
    write_tiktoken(vocab, folder / ladder.tiktoken_name, check=False, text=text)
    if vocab.pinned or any(not f["special"] for f in ladder.added.values()):
        write_atomic(special_tokens_file(folder / ladder.tiktoken_name), special_tokens_json(vocab))
    return text, vocab


def prove(ladder: Ladder, folder: str | os.PathLike, written: tuple[str, Vocab], texts: list[str] | None = None,
          *, slices: int = 200, seed: int = 0):
    """The parity check of a rung's files (:func:`toktok.verify.verify`): tiktoken and HF
    tokenizers give the same ids on the built-in texts, ``texts`` and ``slices`` random slices of
    them; ParityError if not. Returns the verification's report."""
    from ..verify import verify

    vocab = written[1]
    specials = None if special_tokens_file(Path(folder) / ladder.tiktoken_name).is_file() else vocab.special_ids()
    return verify(folder, texts, slices=slices, seed=seed, special_tokens=specials, pattern=ladder.pattern,
                  written=written)


def write_ladder(ladder: Ladder, sizes: list[int], out: str | os.PathLike, texts: list[str] | None = None, *,
                 slices: int = 200, seed: int = 0, report=None) -> list[dict]:
    """Each of ``sizes`` (total ids) as a complete tokenizer in ``OUT/ladder/N/`` (:func:`rung_folder`),
    each proven by the parity check on ``texts`` (the run's parity sample) and ``slices`` random
    slices of them (ParityError if not); ``report(stage, done, total)`` hears the rungs written.
    Returns what each rung is, for the run file (meta ``ladder``): its size, folder (relative to
    ``out``), merges of the last phase, reserved special tokens, strings compared.
    Example: ``write_ladder(ladder, [8192, 16384], staging, texts)[0]["vocab_size"] == 8192``."""
    done = []
    for k, n in enumerate(sizes):
        if report is not None:
            report("ladder", k, len(sizes))
        r = rung(ladder, n, "--ladder")
        folder = rung_folder(out, n)
        folder.mkdir(parents=True, exist_ok=True)
        written = write_rung(ladder, r.vocab, folder)
        rep = prove(ladder, folder, written, texts, slices=slices, seed=seed)
        done.append({"vocab_size": n, "folder": str(folder.relative_to(out)), "merges": r.merges,
                     "reserved": r.reserved, "parity_strings": rep.strings})
    if report is not None:
        report("ladder", len(sizes), len(sizes))
    return done


@dataclass(frozen=True)
class CutResult:
    """What ``cut`` wrote: the folder, the total ids, the new tokens of the last phase kept, the
    reserved special tokens, and the strings the parity check compared."""

    out: Path
    vocab_size: int
    merges: int
    reserved: int
    parity_strings: int


#: The files a cut writes (and ``--force`` may replace): a folder holding only these is a tokenizer's.
_OWN = (HF_FILE, HF_CONFIG_FILE, HF_SPECIAL_MAP_FILE)


def _cut_of(run_folder: Path | str) -> str:
    """The ``--out`` a message suggests for a cut of ``run_folder``, quoted as a shell takes it.
    Example: ``_cut_of(Path("my run")) == "'my run-cut'"``."""
    return shlex.quote(f"{run_folder}-cut")


def _check_out(out: Path, force: bool, run_folder: Path) -> None:
    """The cut's output folder: not the run's own folder nor inside it (a run's rungs are its
    ``ladder/N/``, written by ``--ladder``), and empty or, with ``force``, holding only tokenizer files."""
    if holds_cwd(out):
        raise OutputError(f"{out}: is the current folder or holds it; a cut writes (and replaces) a folder of its "
                          f"own: pick one, e.g. --out {_cut_of(run_folder.name)}")
    if real(out) == real(run_folder):
        raise OutputError(f"{out}: is the run's own folder; pass another --out, e.g. {_cut_of(run_folder)}")
    if inside(real(out), real(run_folder)):
        raise OutputError(f"{out}: lies in the run's own folder {run_folder} (its ladder/N/ are written by "
                          f"train --ladder); pass an --out outside it, e.g. {_cut_of(run_folder)}")
    if not os.path.lexists(out):
        return
    if not out.is_dir():
        raise OutputError(f"{out}: exists and is not a folder; pass another --out")
    names = [p.name for p in out.iterdir()]
    if not names:
        return
    if not force:
        raise OutputError(f"{out}: exists and is not empty; pass --force to replace it")
    other = [n for n in names if n not in _OWN and not n.endswith((".tiktoken", ".special_tokens.json"))]
    if other:
        raise OutputError(f"{out}: holds {other[0]!r}, not a tokenizer's file; --force replaces only tokenizer "
                          "folders, so pick another --out")


def cut(run: str | os.PathLike, *, vocab_size: int, out: str | os.PathLike, force: bool = False,
        texts: list[str] | None = None, seed: int = 0, slices: int = 200) -> CutResult:
    """A complete tokenizer of ``vocab_size`` total ids cut from the finished run ``run`` (its
    output folder or run file) into the folder ``out``, without reading the corpus again: byte for
    byte what a run with ``--vocab-size vocab_size`` and the run's other options writes (its
    ``run.duckdb`` aside). Proven by the parity check on the run's parity sample (or ``texts``)
    before it is put in place: built in ``.OUT.partial`` beside ``out`` and renamed. Refuses (one
    line) a size below the last phase's starting ids or off the run's padding, and an ``out`` that
    is not empty (``force``: one that holds only tokenizer files is replaced).
    Example: ``cut("out/demo", vocab_size=1500, out="out/demo-1500").merges``."""
    from ..insight.runfile import run_path

    run, out = OPTION["out"].check(run, "run"), OPTION["out"].check(out, "out")
    where = Path(os.path.expanduser(run))
    if where.parent.name == LADDER_FOLDER and (where.parent.parent / "run.duckdb").is_file() and \
            not (where / "run.duckdb").exists():
        raise ConfigError(f"{run}: a rung of the run {where.parent.parent} (a rung has no run file); cut from "
                          f"the run: toktok cut {shlex.quote(str(where.parent.parent))} --vocab-size {vocab_size} --out DIR")
    run_file = run_path(run)
    ladder = Ladder.of_run(run_file)
    r = rung(ladder, vocab_size)
    out = Path(os.path.expanduser(os.fspath(out)))
    check_out_parent(os.fspath(out))
    _check_out(out, force, run_file.parent)
    if texts is None:
        with _run_store(run_file) as store:
            texts = [t for (t,) in store.run("ladder.parity_texts").fetchall()]
    staging = staging_of(out)
    if interrupted_run(out) is not None or (staging / ".lock").exists():  # (a cut's own leftover holds neither)
        raise OutputError(f"{out}: a run into it, interrupted or still running, keeps its progress in {staging}; "
                          "pick another --out (or finish that run with --resume, or remove the folder)")
    shutil.rmtree(staging, ignore_errors=True)
    try:
        staging.mkdir(parents=True)
        written = write_rung(ladder, r.vocab, staging)
        report = prove(ladder, staging, written, texts, slices=slices, seed=seed)
        publish(staging, OutputLayout(out, out / ladder.tiktoken_name, False))
    except BaseException as e:
        shutil.rmtree(staging, ignore_errors=True)
        if isinstance(e, OSError):
            raise OutputError(f"{out}: cannot write the tokenizer there ({e.strerror or e}); pass a writable --out "
                              "with room for it") from None
        raise
    return CutResult(out, r.vocab_size, r.merges, r.reserved, report.strings)
