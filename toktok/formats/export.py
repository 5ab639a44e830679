"""The export stage's entry (``write``): a run's vocabulary as tokenizer files in its staging folder.

``write`` writes tokenizer.json and the transformers files (:mod:`.hf`), the ``.tiktoken``
(:mod:`.tiktoken`) and, where special ids are away from toktoktok's convention, the special
tokens beside it (:mod:`.specials`); ``chat_text`` reads a run's chat template before any work and
``compile_kernels`` is what a cold run compiles beside the merge loop's (:mod:`.spell`); a
``--ladder``'s smaller tokenizers are written by ``write_ladder`` (:mod:`.ladder`); ``ahead``
builds tokenizer.json beside the last merge loop, for ``write`` (:mod:`.ahead`).
Example: ``export.write(vocab, staging, cfg=spec)`` (the pipeline's step 5).
"""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from ..added import added_flags
from ..rundir import no_room, special_tokens_file
from ..verify import HFSide, open_hf, worth_a_process
from .ahead import Ahead
from .common import HF_CONFIG_FILE, HF_FILE, HF_SPECIAL_MAP_FILE, Syncing, write_atomic
from .hf import write_hf
from .specials import special_tokens_json
from .tiktoken import tiktoken_text, write_tiktoken

if TYPE_CHECKING:
    from ..patterns import Pattern
    from ..spec import RunSpec
    from ..vocab import Vocab
    from ..warmstart import Base
    from .ladder import Ladder, write_ladder

__all__ = ["Ahead", "Exported", "Ladder", "ahead", "chat_text", "write", "write_ladder"]


def __getattr__(name: str):
    """``Ladder`` and ``write_ladder`` (:mod:`.ladder`), loaded when a run asks for a ladder, not
    with every run (~1.5 ms before its loop)."""
    if name in ("Ladder", "write_ladder"):
        from . import ladder

        return getattr(ladder, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def ahead(vocab: Vocab, folder: Path, *, cfg: RunSpec, hf: HFSide, pattern: Pattern | None = None,
          final: Callable[[Vocab], Vocab] = lambda v: v) -> Ahead:
    """The staging ``folder``'s tokenizer.json built beside the last phase's merge loop, which
    starts from ``vocab`` (the vocabulary so far): its ``add`` takes the new tokens as the loop
    learns them (``merge.run``'s ``learned``), and it is written, and loading in ``hf`` (HF's half
    of the check, started beside the loop: ``verify.start``), once the merge stage ends; ``final``: the
    vocabulary the export is given of the loop's (the reserved special tokens added). ``write``
    takes it (``ahead=``). Example: ``a = ahead(vocab, staging, cfg=spec, hf=hf)``."""
    return Ahead(folder / HF_FILE, vocab, hf=hf, pattern=pattern, added=added_flags(cfg.special_tokens), final=final)


def chat_text(given: str, specials: list[str], where: str, warnings: list[str] | None = None) -> str:
    """The chat template ``given`` (a name or Jinja text) read and parsed, its specials checked
    against the run's (a file's ``<|name|>`` tokens the run lacks: a line added to ``warnings``);
    its Jinja text for tokenizer_config.json. Example:
    ``chat_text("chatml", ["<|im_start|>", "<|im_end|>"], "--chat-template")``."""
    from .chat import check_specials as check_chat_specials, resolve as chat_template, unknown_specials

    tpl = chat_template(given, where)
    check_chat_specials(tpl, specials, where)
    note = unknown_specials(tpl, specials, where)
    if note is not None and warnings is not None:
        warnings.append(note)
    return tpl.text


class Exported(NamedTuple):
    """What :func:`write` wrote: HF tokenizers' half of the verification loading the new
    tokenizer.json (``hf``), the .tiktoken's text and the vocabulary it holds (``tiktoken``, which
    the verification compares the file with), how the special ids were placed (``specials``:
    the run file's meta "specials", which the pipeline records as it publishes) and ``synced``,
    which waits for the files to be forced to disk (in a thread: before the folder is published;
    OutputError or ResourceError as writing them would raise)."""

    hf: HFSide
    tiktoken: tuple[bytes, Vocab]
    specials: dict
    synced: Callable[[], None]


def write(vocab: Vocab, folder: Path, *, cfg: RunSpec, pattern: Pattern | None = None,
          base: Base | None = None, chat_template: str | None = None, hf: HFSide | None = None,
          budgeted: bool = False, report: Callable[[str, int, int | None], None] | None = None,
          ahead: Ahead | None = None) -> Exported:
    """The export stage's entry (the pipeline's step 5): ``vocab`` (the vocabulary after the last
    phase, checked) as tokenizer files in the staging ``folder``, as ``cfg`` names them (roles,
    added-token flags, ``tiktoken_name``), pre-tokenized by ``pattern``, with ``chat_template``
    (its Jinja text): tokenizer.json and the transformers files first (HF tokenizers starts loading
    it for the verification: in ``hf``, a second process started beside the merge loop, else one
    opened now, in a second process when it is large and the run has no memory budget,
    ``budgeted``), then the .tiktoken (special ids away from toktoktok's convention, a warm-start
    ``base``'s kept ones, are declared beside it); returns how the special ids were placed too
    (nothing goes to the run file here); ``ahead``: tokenizer.json built beside the merge loop
    (:func:`ahead`, with ``hf``), written already when it is this vocabulary's. OutputError when
    the disk is full or read-only.
    Example: ``write(vocab, staging, cfg=spec).specials["rule"]``."""
    report = report or (lambda stage, done, total: None)
    added = added_flags(cfg.special_tokens)  # {special: added-token flags} where they differ
    report("export", 0, 3)
    # tokenizers loads tokenizer.json from when it is written, in a second process (started
    # before the merge loop, else now) when it is large (the load holds the GIL for most of a
    # second) and the run has no memory budget (whose plan counts one process)
    if hf is None:
        hf = open_hf(folder / HF_FILE, process=not budgeted and worth_a_process(len(vocab.tokens)))
    vocab.check()
    built = ahead is not None and ahead.wrote(vocab)  # (and HF's half loading it)
    if ahead is not None and ahead.loading and not built:  # another file loading: a new HF side
        hf.close()
        hf = open_hf(folder / HF_FILE, process=not budgeted and worth_a_process(len(vocab.tokens)))
    try:
        write_hf(vocab, folder, roles=cfg.roles, check=False, pattern=pattern, added=added,
                 chat_template=chat_template, sync=False, tokenizer_json=not built)
        if not built:
            hf.load()  # (from the page cache: forced to disk in a thread, as HF reads it)
        report("export", 1, 3)
        text = tiktoken_text(vocab)
        write_tiktoken(vocab, folder / cfg.tiktoken_name, check=False, text=text, sync=False)
        report("export", 2, 3)
        special_ids = _specials_rule(vocab, base, cfg.tiktoken_name)
        # an added token that is not special is not in tokenizer.json's specials, where the .tiktoken's
        # are looked for: declared beside it then
        side = [special_tokens_file(folder / cfg.tiktoken_name)] \
            if vocab.pinned or any(not f["special"] for f in added.values()) else []
        if side:
            write_atomic(side[0], special_tokens_json(vocab), sync=False)
    except OSError as e:  # a full or read-only disk: one line, nothing published (the staging folder goes)
        raise no_room(e, cfg.layout.folder, folder, len(vocab.tokens)) from None
    # forced to disk beside the check (0.03-0.05 s of the run's longest path when in line)
    syncing = Syncing([*([] if built else [folder / HF_FILE]), folder / HF_CONFIG_FILE, folder / HF_SPECIAL_MAP_FILE,
                       folder / cfg.tiktoken_name, *side])

    def synced() -> None:
        try:
            syncing.wait()
            if built:
                ahead.synced()  # (forced to disk in a thread since it was written)
        except OSError as e:
            raise no_room(e, cfg.layout.folder, folder, len(vocab.tokens)) from None

    report("export", 3, 3)
    return Exported(hf, (text, vocab), special_ids, synced)


def _specials_rule(vocab: Vocab, base: Base | None, tiktoken_name: str) -> dict:
    """Which rule placed the special ids, for the summary and meta('specials'): ``after_last_rank``
    (toktoktok's convention: a plain list in this order loads them), ``declared`` (some are kept at
    a base's ids inside the range, so the .tiktoken's ranks have gaps there and the ids are written
    to NAME.special_tokens.json) or ``none``."""
    ids = vocab.special_ids()
    out: dict = {"rule": "none" if not ids else "declared" if vocab.pinned else "after_last_rank", "ids": ids}
    if vocab.pinned:
        out["declared_in"] = special_tokens_file(tiktoken_name).name
        out["gaps"] = sorted(vocab.pinned)
        out["reason"] = f"kept at the ids of the warm-start base {base.path.name if base else '?'}"
    moved = {s: [i, ids[s]] for s, i in (base.vocab.special_ids().items() if base is not None and base.bare else [])
             if ids.get(s) != i}
    if moved:
        out["moved"] = moved
    return out
