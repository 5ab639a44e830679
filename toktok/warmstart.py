"""Warm start and conversion: read a vocabulary to train on top of, keeping every id.

Owns reading a base vocabulary from a ``.tiktoken`` file (ranks in any layout, e.g. GPT-2's,
whose 256 bytes are not at ids 0..255; special tokens as ``export.resolve_specials`` finds them)
or from a Hugging Face ``tokenizer.json`` with a byte-level BPE model (ids kept as they are), and
``toktok convert`` between the two. A base whose special tokens sit right after its last rank
(toktoktok's convention) is bare: a run applies its specials again after the new ranks; specials
anywhere else keep their ids (``Base.kept_vocab``). A base is refused, with the reason, when it
is not byte-level BPE, when its merge order disagrees with its id order (toktok and tiktoken rank
tokens by id), or when an id is neither a token nor a special token (toktok keeps ids, so it
cannot leave a hole).

Special tokens at ids inside the range stay there as ``Vocab.pinned`` (see ``toktok.vocab``).
Example: ``load_base("gpt2.tiktoken").vocab.tokens[0] == b"!"``.
"""
from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from .errors import ConfigError, OutputError, VocabError, not_regular
from .formats.common import (HF_CONFIG_FILE, HF_FILE, HF_SPECIAL_MAP_FILE, TIKTOKEN_FILE, find_tiktoken, read_json,
                             write_atomic)
from .formats.hf import bytelevel_to_token, components, split_pattern, write_hf
from .formats.specials import resolve_specials, special_tokens_json
from .formats.tiktoken import encoding_pattern, read_tiktoken_ranks, recorded_pattern, write_tiktoken
from .options import at
from .patterns import DEFAULT, Pattern, _shown, same
from .rundir import special_tokens_file
from .vocab import Vocab, hardcoded_tokens

if TYPE_CHECKING:
    from .spec import RunSpec


@dataclass
class Base:
    """A warm-start vocabulary: ``vocab.tokens[i]`` is id ``i`` (pinned specials' placeholders
    included). Its special tokens are either ``vocab.pinned`` (kept at their ids: the base puts
    them away from toktoktok's convention, e.g. inside its id range) or ``vocab.specials`` (the
    base follows the convention, specials right after its last rank: it counts as bare, and they
    are applied again after the new ranks). ``kind`` is "tiktoken" or "tokenizer.json";
    ``specials_from`` names the file its specials came from; ``warnings`` say what of the base is
    not carried over (e.g. a pattern tiktoken cannot follow). ``pattern``: the pre-tokenizer the
    base records (its tokenizer.json's Split, or the tokenizer.json or run file beside a
    ``.tiktoken``), which a warm start keeps; None when it records none it can keep."""

    vocab: Vocab
    path: Path
    kind: str
    warnings: list[str] = field(default_factory=list)
    specials_from: str | None = None
    pattern: Pattern | None = None

    @property
    def bare(self) -> bool:
        """Whether the base's specials (if any) follow toktoktok's convention, right after its
        last rank: then they are applied again after the new ranks instead of keeping their ids."""
        return not self.vocab.pinned

    def kept_vocab(self) -> Vocab:
        """The base as a starting vocabulary: its ranks, and its specials pinned at their ids when
        it is not bare (those after its last rank too, so that new tokens come after them)."""
        v = Vocab(list(self.vocab.tokens), [], dict(self.vocab.pinned))
        if not self.bare:
            for s in self.vocab.specials:
                v.pinned[len(v.tokens)] = s
                v.tokens.append(s.encode())
        return v

    def summary(self) -> dict:
        kept = self.kept_vocab()
        return {
            "file": str(self.path), "kind": self.kind, "ids": len(kept.tokens),
            "ranks": len(kept.tokens) - len(kept.pinned),
            "specials": {s: i for i, s in sorted(kept.pinned.items())},
            "specials_after": self.vocab.special_ids() if self.bare else {},
            "specials_from": self.specials_from,
            "pattern": self.pattern.label() if self.pattern is not None else None,
        }


def load_base(path: str | os.PathLike) -> Base:
    """The base vocabulary in ``path``: a ``.tiktoken`` file, a ``tokenizer.json``, or a folder
    holding one (its ``.tiktoken`` first). Raises VocabError with the reason when it is refused."""
    p = Path(path)
    kind = not_regular(p)
    if kind is not None:
        raise ConfigError(f"{p}: not a regular file ({kind}); give a .tiktoken file or a tokenizer.json")
    if p.is_dir():
        try:
            return read_tiktoken_base(find_tiktoken(p))
        except VocabError:
            if (p / HF_FILE).is_file():
                return read_hf_base(p / HF_FILE)
            raise
    if not p.exists():
        raise ConfigError(f"{p}: no such warm-start file; give a .tiktoken file or a tokenizer.json")
    if p.suffix == ".json":
        return read_hf_base(p)
    return read_tiktoken_base(p)


def _assemble(path: Path, by_id: dict[int, bytes], specials: dict[str, int], what: str) -> Vocab:
    """tokens by id from ranks and specials; every id 0..max must be one or the other. Specials at
    ids inside the ranks' range are ``Vocab.pinned`` there; those after the last rank are
    ``Vocab.specials``, in id order (toktoktok's convention when nothing is pinned)."""
    special_at = {i: s for s, i in specials.items()}
    if len(special_at) != len(specials):
        raise VocabError(f"{path}: two special tokens share an id")
    n = max([*by_id, *specials.values()]) + 1
    for i, s in special_at.items():
        if i in by_id:
            raise VocabError(f"{path}: special token {s!r} has id {i}, which is also the {what} {by_id[i]!r}")
    holes = [i for i in range(n) if i not in by_id and i not in special_at]
    if holes:
        raise VocabError(
            f"{path}: id {holes[0]} is neither a {what} nor a special token ({len(holes)} such ids); toktok "
            "keeps every id and gives new tokens the ids after the largest, so the ids must be 0..N-1"
        )
    index = {t: i for i, t in by_id.items()}
    for i, s in special_at.items():
        if s.encode() in index:
            raise VocabError(
                f"{path}: special token {s!r} (id {i}) has the same bytes as the {what} of id "
                f"{index[s.encode()]}; a text could not tell them apart"
            )
    last = max(by_id) + 1
    tokens = [by_id[i] if i in by_id else special_at[i].encode() for i in range(last)]
    pinned = {i: s for i, s in special_at.items() if i < last}
    after = [special_at[i] for i in range(last, n)]
    return _checked_base(path, Vocab(tokens, after, pinned), what)


def _checked_base(path: Path, vocab: Vocab, what: str) -> Vocab:
    try:
        vocab.check()
    except VocabError as e:
        hint = ""
        if "single-byte" in str(e):
            hint = ("; a byte-level vocabulary needs all 256 (train HF's BpeTrainer with "
                    "initial_alphabet=pre_tokenizers.ByteLevel.alphabet())") if what == "token" else \
                ("; a byte-level vocabulary needs all 256 single bytes as ranks, so add the missing "
                 "ones (e.g. after the largest id) or start from another base")
        raise VocabError(f"{path}: {e}{hint}") from None
    return vocab


def read_tiktoken_base(path: str | os.PathLike, specials=None) -> Base:
    """A base from a ``.tiktoken`` file: ids = ranks, in whatever layout; special tokens from
    ``specials`` (``{token: id}``, a list, or a file: see ``export.resolve_specials``), else found
    beside it (``NAME.special_tokens.json``, ``special_tokens.txt``, a ``tokenizer.json``).
    """
    p = Path(path)
    by_rank, _ = read_tiktoken_ranks(p)
    sp, where = resolve_specials(p, by_rank, specials)
    base = Base(_assemble(p, by_rank, sp, "rank"), p, "tiktoken", specials_from=where if sp else None)
    base.pattern, source, why = recorded_pattern(p)
    if why is not None:
        base.warnings.append(_not_followed(source, why))
    return base


def _merge_pair(m, k: int, path: Path) -> tuple[str, str]:
    if isinstance(m, str):
        parts = m.split(" ")
        if len(parts) == 2 and parts[0] and parts[1]:
            return parts[0], parts[1]
    elif isinstance(m, list) and len(m) == 2 and all(isinstance(x, str) for x in m):
        return m[0], m[1]
    raise VocabError(f"{path}: merge {k} is {m!r}; expected 'left right' or [left, right]")


def read_hf_base(path: str | os.PathLike) -> Base:
    """A base from a Hugging Face ``tokenizer.json`` with a byte-level BPE model, ids kept.

    Its special ``added_tokens`` are carried over at their ids (inside the range, as HF's
    BpeTrainer puts them at 0..k-1, or after it). Refused with the reason: a model that is not
    BPE, a tokenizer that is not byte-level (no ByteLevel pre-tokenizer, a token outside the
    byte-level alphabet, a missing single byte, a subword prefix or suffix), a merge order that
    disagrees with the id order, a token no merge makes, a non-special added token, an id hole.
    """
    p = Path(path)
    # 0. a byte-level BPE model
    doc, model, pre, vocab = _hf_model(p)
    # 1. special tokens, at their ids
    specials = _hf_specials(p, doc, vocab)
    # 2. the model's tokens, by id
    by_id = _hf_tokens(p, vocab, specials)
    tokens_vocab = _assemble(p, by_id, specials, "token")
    # 3. merges: each must make a token, in id order (HF applies merges by their order,
    #    tiktoken by the merged token's id)
    _check_hf_merges(p, model, by_id)
    base = Base(tokens_vocab, p, "tokenizer.json", specials_from=str(p) if specials else None)
    # 4. its pattern, kept when tiktoken can follow it, and what is not carried over
    base.pattern, why = split_pattern(doc.get("pre_tokenizer"), str(p))
    if why is not None:
        base.warnings.append(_not_followed(p, why))
    base.warnings += _hf_not_kept(p, doc, pre)
    return base


def _not_followed(p: Path, why: str) -> str:
    return (f"{p.name}: {why}, which tiktoken cannot follow; the new tokenizer keeps every id but splits text "
            "with the run's pattern (--pattern, default cl100k)")


def _hf_model(p: Path) -> tuple[dict, dict, list[dict], dict]:
    """The parsed tokenizer.json, its model, its pre-tokenizer steps and its vocab, refused
    with the reason unless the model is byte-level BPE."""
    doc = read_json(p)
    if not isinstance(doc, dict) or not isinstance(doc.get("model"), dict):
        raise VocabError(f"{p}: no model; expected a Hugging Face tokenizer.json")
    model = doc["model"]
    mtype = model.get("type", "BPE" if "merges" in model else None)
    if mtype != "BPE":
        raise VocabError(f"{p}: the model is {mtype or 'of no known type'}, not BPE; toktok warm-starts from byte-level BPE only")
    pre = components(doc.get("pre_tokenizer"))
    if not any(c.get("type") == "ByteLevel" for c in pre):
        raise VocabError(
            f"{p}: not byte-level: the pre-tokenizer has no ByteLevel step "
            f"({', '.join(c.get('type', '?') for c in pre) or 'none'}); toktok warm-starts from byte-level BPE only"
        )
    for key in ("continuing_subword_prefix", "end_of_word_suffix"):
        if model.get(key):
            raise VocabError(f"{p}: the model has {key} {model[key]!r}; byte-level BPE as tiktoken runs it has none")
    vocab = model.get("vocab")
    if not isinstance(vocab, dict) or not vocab:
        raise VocabError(f"{p}: the model has no vocab")
    return doc, model, pre, vocab


def _hf_specials(p: Path, doc: dict, vocab: dict) -> dict[str, int]:
    """The special ``added_tokens`` at their ids; refused: a non-special added token, a special
    that strips or matches words only, one whose id in the vocab differs."""
    specials: dict[str, int] = {}
    for a in doc.get("added_tokens") or []:
        content, i = a.get("content"), a.get("id")
        if not isinstance(content, str) or not isinstance(i, int):
            raise VocabError(f"{p}: added token {a!r} has no content or id")
        if not a.get("special", False):
            raise VocabError(
                f"{p}: added token {content!r} (id {i}) is not special; tiktoken has nothing like "
                "a non-special added token, so mark it special or remove it"
            )
        for flag in ("lstrip", "rstrip", "single_word"):
            if a.get(flag):
                raise VocabError(f"{p}: special token {content!r} (id {i}) has {flag} set, which a warm start does not "
                                 f"carry over; set it false there and give it in the run's special_tokens: "
                                 f"({{content: ..., {flag}: true}})")
        if content in vocab and vocab[content] != i:
            raise VocabError(f"{p}: special token {content!r} has id {i} in added_tokens but {vocab[content]} in the vocab")
        specials[content] = i
    return specials


def _hf_tokens(p: Path, vocab: dict, specials: dict[str, int]) -> dict[int, bytes]:
    """The model's tokens (specials aside) as bytes by id; refused: a bad or repeated id, a
    token outside the byte-level alphabet."""
    by_id: dict[int, bytes] = {}
    for name, i in vocab.items():
        if not isinstance(i, int) or isinstance(i, bool) or i < 0:
            raise VocabError(f"{p}: token {name!r} has id {i!r}; ids must be whole numbers >= 0")
        if specials.get(name) == i:
            continue
        if i in by_id:
            raise VocabError(f"{p}: id {i} is given to two tokens")
        try:
            by_id[i] = bytelevel_to_token(name)
        except VocabError:
            raise VocabError(
                f"{p}: not byte-level: token {name!r} (id {i}) is not spelled in the byte-level alphabet"
            ) from None
    return by_id


def _check_hf_merges(p: Path, model: dict, by_id: dict[int, bytes]) -> None:
    """Every merge makes a token, in id order, and every token longer than a byte is made by one."""
    ids = {t: i for i, t in by_id.items()}
    made: set[int] = set()
    prev = -1
    for k, m in enumerate(model.get("merges") or []):
        a, b = _merge_pair(m, k, p)
        try:
            ta, tb = bytelevel_to_token(a), bytelevel_to_token(b)
        except VocabError:
            raise VocabError(f"{p}: not byte-level: merge {k} ({a!r}, {b!r}) is not spelled in the byte-level alphabet") from None
        if ta not in ids or tb not in ids:
            raise VocabError(f"{p}: merge {k} ({a!r}, {b!r}) uses a token that is not in the vocab")
        t = ids.get(ta + tb)
        if t is None:
            raise VocabError(f"{p}: merge {k} ({a!r}, {b!r}) makes a token that is not in the vocab")
        if t < prev:
            raise VocabError(
                f"{p}: the merge order disagrees with the id order: merge {k} ({a!r}, {b!r}) makes id {t} "
                f"after an earlier merge made id {prev}; tiktoken ranks tokens by id, so toktok can keep "
                "these ids only if the merges come in id order"
            )
        prev = t
        made.add(t)
    for i, t in by_id.items():
        if len(t) > 1 and i not in made:
            raise VocabError(
                f"{p}: token {t!r} (id {i}) is made by no merge; tiktoken would reach it from its "
                "parts and Hugging Face would not, so the ids would encode differently"
            )


def _hf_not_kept(p: Path, doc: dict, pre: list[dict]) -> list[str]:
    """Warnings for what the new tokenizer does not keep: a prefix space, a post-processor, a
    normalizer (its pattern: :func:`toktok.formats.hf.split_pattern`)."""
    warnings: list[str] = []
    for c in pre:
        if c.get("type") == "ByteLevel" and c.get("add_prefix_space"):
            warnings.append(f"{p.name}: its add_prefix_space is not kept")
    if doc.get("post_processor"):
        warnings.append(f"{p.name}: its post-processor ({doc['post_processor'].get('type', '?')}) is not kept")
    if doc.get("normalizer"):
        warnings.append(f"{p.name}: its normalizer ({doc['normalizer'].get('type', '?')}) is not kept")
    return warnings


def add_tokens(vocab: Vocab, tokens: list[bytes]) -> list[int]:
    """Append the ``tokens`` not already in ``vocab`` (ids after the largest); returns their ids."""
    have = set(vocab.tokens)
    out = []
    for t in tokens:
        if t not in have:
            have.add(t)
            out.append(len(vocab.tokens))
            vocab.tokens.append(t)
    return out


# ---------------------------------------------------------------------------------------------
# toktok convert
# ---------------------------------------------------------------------------------------------


def _refuse_existing(paths: list[Path], force: bool) -> None:
    """``convert`` never replaces a file silently: one line naming the first that exists, unless ``force``."""
    for p in paths:
        if p.is_dir():
            raise OutputError(f"{p}: is a folder; give another destination")
        if p.exists() and not force:
            raise OutputError(f"{p}: exists; pass --force to replace it (or give another destination)")


def convert(src: str | os.PathLike, dst: str | os.PathLike, *, special_tokens=None, force: bool = False,
            pattern=None) -> list[Path]:
    """Convert between a ``tokenizer.json`` and a ``.tiktoken`` file, ids kept; returns the files written.

    * ``tokenizer.json`` (or a folder holding one) -> ``DST`` (a ``.tiktoken`` path, or a folder
      that gets ``tokenizer.tiktoken``): the ranks, plus ``<name>.special_tokens.json``
      (``{token: id}``) when the source has special tokens, whatever their layout. A ``.tiktoken``
      does not record its pattern: a ``ToktokWarning`` says which to give ``load_encoding`` when
      it is not cl100k and no tokenizer.json sits beside the new file.
    * ``.tiktoken`` -> ``DST`` folder (or a path ending in ``tokenizer.json``): ``tokenizer.json``,
      ``tokenizer_config.json``, ``special_tokens_map.json``, checked for id parity with tiktoken
      first. Its special tokens: ``special_tokens`` (``{token: id}``, a list, or a file:
      ``NAME.special_tokens.json`` or toktoktok's plain ``special_tokens.txt``), else found beside it
      (see ``export.resolve_specials``). Its pattern (the Split written): the one recorded beside it
      (a tokenizer.json, a run file), else ``pattern`` (a name or a regex), else cl100k.
    An existing destination file is refused unless ``force``; each file is written under a
    temporary name and renamed into place, so none is ever half-written.
    ``.tiktoken`` -> ``tokenizer.json`` -> ``.tiktoken`` gives back the same bytes and special ids.
    Example: ``convert("hf/tokenizer.json", "out/base.tiktoken")``.
    """
    s, d = Path(src), Path(dst)
    if s.is_dir():
        if (s / HF_FILE).is_file():
            s = s / HF_FILE
        else:
            s = find_tiktoken(s)
    if not s.exists():
        raise ConfigError(f"{s}: no such file; give a tokenizer.json or a .tiktoken file")
    if s.suffix == ".json":
        if special_tokens is not None:
            raise ConfigError(f"{s}: a tokenizer.json holds its own special tokens; --special-tokens is for a .tiktoken source")
        if pattern is not None:
            raise ConfigError(f"{s}: a tokenizer.json holds its own pattern; --pattern is for a .tiktoken source")
        return _to_tiktoken(read_hf_base(s), d, force)
    if d.suffix == ".json" and d.name != HF_FILE and not d.is_dir():
        raise ConfigError(f"{d}: the Hugging Face files are written into a folder; give a folder (or .../tokenizer.json)")
    folder = d.parent if d.name == HF_FILE else d
    if folder.exists() and not folder.is_dir():
        raise OutputError(f"{folder}: exists and is not a folder; give a folder for the Hugging Face files")
    targets = [folder / name for name in (HF_FILE, HF_CONFIG_FILE, HF_SPECIAL_MAP_FILE)]
    _refuse_existing(targets, force)
    split = encoding_pattern(s, pattern, "--pattern")
    base = read_tiktoken_base(s, special_tokens)
    from .verify import verify

    with tempfile.TemporaryDirectory(prefix=".toktok-convert-") as tmp:
        write_tiktoken(base.vocab, Path(tmp) / TIKTOKEN_FILE)
        if base.vocab.pinned:
            write_atomic(special_tokens_file(Path(tmp) / TIKTOKEN_FILE), special_tokens_json(base.vocab))
        write_hf(base.vocab, tmp, pattern=split)
        verify(tmp, pattern=split)
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise OutputError(f"{folder}: cannot create folder ({e.strerror or e})") from None
        for t in targets:
            write_atomic(t, (Path(tmp) / t.name).read_bytes())
    return targets


def _to_tiktoken(base: Base, d: Path, force: bool) -> list[Path]:
    """``convert``'s first way: a tokenizer.json's base written as a ``.tiktoken`` at ``d``."""
    import warnings

    from .errors import ToktokWarning

    tt = d if d.suffix == ".tiktoken" else d / TIKTOKEN_FILE
    side = special_tokens_file(tt)
    _refuse_existing([tt, side], force)
    try:
        tt.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise OutputError(f"{tt.parent}: cannot create folder ({e.strerror or e})") from None
    written = [write_tiktoken(base.vocab, tt)]
    if base.vocab.special_ids():
        write_atomic(side, special_tokens_json(base.vocab))
        written.append(side)
    elif side.exists():  # --force: a list left from an earlier file would give this one specials
        side.unlink()
    if base.pattern is not None and base.pattern is not DEFAULT and not (tt.parent / HF_FILE).is_file():
        shown = base.pattern.name if base.pattern.known else "the regex of its Split"
        warnings.warn(ToktokWarning(f"{tt}: {base.path.name} splits text with {base.pattern.label()}, which a "
                                    f".tiktoken does not record; load it with pattern= ({shown}) or keep "
                                    "the tokenizer.json beside it"))
    return written


__all__ = ["Base", "load_base", "read_tiktoken_base", "read_hf_base", "add_tokens", "convert"]


def start_vocab(cfg: RunSpec) -> tuple[Vocab, list[str], Base | None, Pattern]:
    """The vocabulary a run starts from (for :func:`toktok.start.vocabulary`), each id's kind and
    the run's pattern: the bytes (+ the hardcoded tokens the pattern forms as one piece), or a
    warm-start base (+ those only when asked) whose ids are all kept, and whose pattern the run
    keeps (:func:`_warm_pattern`).
    Example: ``start_vocab(TrainConfig(["data_fixtures/corpus/"], "out/x").describe())[0].size == 256 + 1161``."""
    if cfg.warm_start is None:
        pattern = cfg.pattern or DEFAULT
        vocab = Vocab.base(hardcoded=False)
        if cfg.use_hardcoded:  # those the first phase's pattern forms as one piece
            first = cfg.phases[0].split(pattern) if cfg.phases else pattern
            vocab.tokens += _no_longer(hardcoded_tokens(first), cfg.max_token_length)
        kinds = ["byte"] * 256 + ["hardcoded"] * (len(vocab.tokens) - 256)
        return vocab, kinds, None, pattern
    base = load_base(cfg.warm_start)
    pattern = _warm_pattern(cfg, base)
    vocab = base.kept_vocab()
    kinds = ["special" if i in vocab.pinned else "byte" if len(t) == 1 else "base" for i, t in enumerate(vocab.tokens)]
    if cfg.use_hardcoded:
        first = cfg.phases[0].split(pattern) if cfg.phases else pattern
        kinds += ["hardcoded"] * len(add_tokens(vocab, _no_longer(hardcoded_tokens(first), cfg.max_token_length)))
    return vocab, kinds, base, pattern


def moved_pattern(cfg: RunSpec, base: Base | None, pattern: Pattern) -> str | None:
    """What a warm start changes when a phase splits text with a pattern other than its base's
    (a phase's own ``pattern:``, or ``--superbpe``'s superwords): one warning, or None."""
    if base is None or base.pattern is None:
        return None
    moved = [ph for ph in cfg.phases if not same(ph.split(pattern), base.pattern)]
    if not moved:
        return None
    last = cfg.phases[-1].split(pattern)
    names = ", ".join(repr(ph.name) for ph in moved)
    return (f"the warm-start base {base.path.name} splits text with {base.pattern.label(40)}; phase {names} with "
            f"{moved[-1].split(pattern).label(40)}: every id and merge of the base is kept, the tokenizer written splits "
            f"text with {last.label(40)}, so the same text may encode into the base's tokens differently than with "
            "the base")


def _no_longer(tokens: list[bytes], limit: int | None) -> list[bytes]:
    """The ``tokens`` of at most ``limit`` bytes (``--max-token-length``; all without one)."""
    return tokens if limit is None else [t for t in tokens if len(t) <= limit]


def _warm_pattern(cfg: RunSpec, base: Base) -> Pattern:
    """A warm start's pattern: its base's own (its tokenizer.json's Split, or the tokenizer.json or
    run file beside its .tiktoken), which ``--pattern`` may repeat but not change; ``--pattern``
    (else cl100k) for a base that records none."""
    given, own = cfg.pattern, base.pattern
    if own is None or given is None:
        return own or given or DEFAULT
    if not same(own, given):
        text = cfg.written.get("pattern")
        shown = given.name if given.known else _shown(text) if text else given.label()  # as typed, not repr'd
        raise ConfigError(f"{at(cfg.name_of('pattern'), shown)}: the warm-start "
                          f"base {base.path.name} splits text with {own.label(40)}, and a warm start keeps its "
                          f"base's pattern; leave the pattern out (or give {own.name if own.known else 'the same regex'}), or give a "
                          "phase its own pattern (phases[k].pattern:, toktok.Phase(pattern=)) to move to another")
    return own
