"""The run's vocabulary before and after the merges: what it starts from, and the reserved ids that fill it.

``vocabulary`` is the pipeline's step 1 for the vocabulary, every check before any work: the bytes
(+ the hardcoded tokens the pattern forms as one piece) or a warm-start base whose ids are all kept
(:func:`toktok.warmstart.start_vocab`), the run's special tokens in id order, the roles, and each
phase's ``vocab_size`` against the ids the run starts with. ``reserve``, after the last phase,
adds the reserved special tokens that ``--vocab-size`` and ``--pad-to-multiple-of`` ask for.
Example: ``vocabulary(spec, list(spec.phases)).vocab.size == 256 + 1161``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple

from .errors import ConfigError
from .options import at
from .patterns import SUPERWORD, Pattern, same
from .vocab import Vocab
from .warmstart import Base, moved_pattern, start_vocab

if TYPE_CHECKING:
    from .spec import PhaseConfig, RunSpec

#: How reserved special tokens are spelled (Llama 3's), ``i`` from 0, skipping names the run has.
RESERVED = "<|reserved_special_token_{}|>"

#: What the pipeline reads besides the entries: the types of the starting vocabulary's parts.
__all__ = ["Base", "Pattern", "RESERVED", "Reserved", "Start", "Vocab", "reserve", "vocabulary"]


@dataclass
class Start:
    """The vocabulary a run starts from: its tokens and specials (``vocab``), each id's kind
    (byte, hardcoded, base, special), the warm-start base (None without one), the pattern, every
    special token of the run (listed, and the base's) and the warnings found on the way."""

    vocab: Vocab
    kinds: list[str]
    base: Base | None
    pattern: Pattern
    specials: list[str]
    warnings: list[str]


def vocabulary(cfg: RunSpec, phases: list[PhaseConfig]) -> Start:
    """The starting vocabulary of the run ``cfg`` describes, checked before any work: the special
    tokens (a base's unlisted ones follow the listed ones, with a warning), their roles and each
    phase's ``vocab_size`` (ConfigError naming the key and the least that fits). Reads the base.
    Example: ``vocabulary(spec, list(spec.phases)).specials == ["<|endoftext|>"]``."""
    vocab, kinds, base, pattern = start_vocab(cfg)
    _check_superbpe(cfg, phases, base, pattern)
    warnings = list(base.warnings) if base is not None else []
    moved = moved_pattern(cfg, base, pattern)
    if moved is not None:
        warnings.append(moved)
    listed = [str(t) for t in cfg.special_tokens]  # their added-token flags: for the export (formats.export)
    vocab.specials, unlisted = _run_specials(listed, vocab, base)
    if unlisted and cfg.special_tokens:
        warnings.append(f"the base's special tokens {', '.join(map(repr, unlisted))} are not in special_tokens; "
                        "they follow the listed ones (list every special token, as toktoktok needs, to choose the order)")
    vocab.check()
    _check_sizes(cfg, phases, vocab)
    specials = vocab.all_specials()
    cfg.check_roles(specials)
    return Start(vocab, kinds, base, pattern, specials, warnings)


def _check_superbpe(cfg: RunSpec, phases: list[PhaseConfig], base: Base | None, pattern: Pattern) -> None:
    """``--superbpe T``'s subwords need a subword pattern: when its first phase would split text
    with ``superbpe`` already (a SuperBPE warm-start base's own, or the pattern given), the
    "subwords" would be superwords too and T would mean nothing: ConfigError naming where the
    pattern came from and what to do."""
    if cfg.superbpe is None or not phases or not same(phases[0].split(pattern), SUPERWORD["superbpe"]):
        return
    where, flag = at(cfg.name_of("superbpe"), str(cfg.superbpe)), cfg.name_of("superbpe").rstrip(":=").split(" ")[-1]
    if base is not None and phases[0].pattern is None and base.pattern is not None and same(base.pattern, pattern):
        raise ConfigError(f"{where}: the warm-start base {base.path.name} splits text with superbpe already (a "
                          f"SuperBPE tokenizer), so its subwords would be superwords too; leave {flag} out to go on "
                          "learning superwords, or warm-start from a tokenizer with a subword pattern (e.g. cl100k)")
    given = "phases[0].pattern:" if phases[0].pattern is not None else cfg.name_of("pattern").rsplit(": ", 1)[-1]
    raise ConfigError(f"{where}: {at(given, 'superbpe')} is the superwords' own pattern, so the subwords would be "
                      f"superwords too; give the subwords' pattern (e.g. cl100k, the default), or leave {flag} out")


def _check_sizes(cfg: RunSpec, phases: list[PhaseConfig], vocab: Vocab) -> None:
    """Each phase's ``vocab_size`` leaves room for at least no merge: the ids the run starts with
    (tokens, pinned specials and the specials after the last rank) plus the most the phases before
    it can add (their merges, or their own vocab_size); ``--ladder``'s smallest size as the last
    phase's. Checked before any work."""
    start = len(vocab.tokens) + len(vocab.specials)
    most = start
    added = 0  # what the phases before add to the ids the run starts with (None: a phase's total sets them)
    ladder = getattr(cfg, "ladder", None)
    for k, ph in enumerate(phases):
        if ph.vocab_size is None:
            most += ph.merges
            added = None if added is None else added + ph.merges
            continue
        for size, where in ((ph.vocab_size, _vocab_size_key(cfg, k)),
                            *([(ladder[0], cfg.name_of("ladder"))] if ladder and k == len(phases) - 1 else [])):
            if size >= most:
                continue
            if size < start:
                before = (f"; the phases before it reach up to {most:,}" if most > start else "")
                raise ConfigError(f"{at(where, str(size))} is less than the {start:,} ids the run starts with "
                                  f"({len(vocab.tokens):,} tokens + {len(vocab.specials)} special){before}; pass at "
                                  f"least {most}" + (_without_hardcoded(cfg, vocab, added) if added is not None else ""))
            # (the ids the run starts with fit: the phases before it reach further, --no-hardcoded or not)
            raise ConfigError(f"{at(where, str(size))} is less than the {most:,} ids the phases before it reach (the "
                              f"run starts with {start:,}); pass at least {most}"
                              + (_without_hardcoded(cfg, vocab, added) if added is not None else ""))
        most, added = ph.vocab_size, None


def _without_hardcoded(cfg: RunSpec, vocab: Vocab, added: int) -> str:
    """The other way out when the hardcoded tokens fill the ids (a run from scratch):
    ``--no-hardcoded`` (as the size was given: flag, YAML key or keyword), and the least
    ``vocab_size`` it allows (the 256 bytes, the specials, what the phases before add)."""
    hard = len(vocab.tokens) - 256
    if not cfg.use_hardcoded or cfg.warm_start or hard <= 0:
        return ""
    given = cfg.name_of("vocab_size")
    flag = "--no-hardcoded" if given.startswith("-") else "hardcoded: false" if given.endswith(":") else "hardcoded=False"
    return (f", or {flag} to start without the {hard:,} hardcoded tokens (then at least "
            f"{256 + len(vocab.specials) + added})")


def _vocab_size_key(cfg: RunSpec, k: int) -> str:
    """Where phase ``k``'s ``vocab_size`` was given, for a message: the option, or ``phases[k]``'s key."""
    if cfg.superbpe is not None and k == 0:  # the subwords' total ids: the transition
        return cfg.name_of("superbpe")
    return cfg.name_of("vocab_size") if not cfg.phases_given else f"phases[{k}].vocab_size:"


def _run_specials(listed: list[str], vocab: Vocab, base: Base | None) -> tuple[list[str], list[str]]:
    """The run's special tokens after the last rank, in id order, and those of the base that the
    config does not list. Specials the base keeps at their ids (``pinned``) stay there. A base
    whose specials follow toktoktok's convention counts as bare: as toktoktok does, the listed
    specials come after the last new rank in list order; the base's unlisted ones follow them."""
    pinned = set(vocab.pinned.values())
    out = [s for s in listed if s not in pinned]
    unlisted = [s for s in (base.vocab.specials if base is not None and base.bare else []) if s not in out]
    return out + unlisted, unlisted


class Reserved(NamedTuple):
    """What :func:`reserve` added: the vocabulary with the reserved special tokens after the run's
    own (``vocab``), their names in id order and the warning it gives (None without one)."""

    vocab: Vocab
    names: list[str]
    warning: str | None


def reserve(vocab: Vocab, cfg: RunSpec) -> Reserved:
    """Reserved special tokens (:data:`RESERVED`) after ``vocab``'s own specials (the pipeline's
    step after the last phase): as many as the last phase of ``cfg`` lacks of its ``vocab_size``
    (merges that the corpus or ``--min-frequency`` did not give), then up to a multiple of
    ``--pad-to-multiple-of``. Ids stay exactly 0..N-1; a shortfall is a warning.
    Example: ``reserve(vocab, spec).vocab.size % spec.pad_to_multiple_of == 0``."""
    last = cfg.phases[-1]
    short = max(0, (last.vocab_size or 0) - vocab.size)
    pad = (-(vocab.size + short)) % cfg.pad_to_multiple_of if cfg.pad_to_multiple_of else 0
    if not short + pad:
        return Reserved(vocab, [], None)
    have, names, i = set(vocab.all_specials()), [], 0
    while len(names) < short + pad:
        if (name := RESERVED.format(i)) not in have:
            names.append(name)
        i += 1
    warning = None
    if short:
        where = _vocab_size_key(cfg, len(cfg.phases) - 1)
        warning = (f"{at(where, str(last.vocab_size))}: the merges stopped {short:,} short; {short:,} reserved "
                   f"special tokens fill ids {vocab.size:,}..{vocab.size + short - 1:,}")
    return Reserved(Vocab(vocab.tokens, vocab.specials + names, vocab.pinned), names, warning)
