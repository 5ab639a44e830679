"""tokenizer.json built ahead, beside the last phase's merge loop (``Ahead``), so that HF tokenizers
starts loading it once the merge stage ends rather than after the export.

The merge stage hands ``Ahead.add`` the new tokens as the loop learns them (``merge.run``'s
``learned``); each batch's names (GPT-2's ByteLevel spelling, quoted for JSON) and vocab lines are
spelled then, on the core the loop leaves idle (the export's kernels loaded on the way). Once the
merge stage says the loop ended (``add([], last=True)``, after its result, while the "merged"
checkpoint is stored), what needs the whole vocabulary is made (every split of every token, the merge lines:
a token's split may use a later token), the file written into the staging folder and HF's half of
the check told to load it. The export (:func:`toktok.formats.export.write`) then asks
``Ahead.wrote``: the file holds exactly what it would write for its vocabulary (the same parts:
:func:`toktok.formats.hf.hf_tokenizer_json`), or it writes it itself. The file is forced to
disk in a thread (``synced`` waits for it). Nothing here raises but ``synced`` (the disk's
error, as the export's own writes raise it): a failure leaves the export to do all of it.
Example: ``a = Ahead(staging / "tokenizer.json", vocab, hf=hf); a.add(new, last=True); a.wrote(final)``.
"""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from ..patterns import DEFAULT
from ..vocab import Vocab
from .common import Syncing, write_atomic
from .hf import _head, _merge_lines, _Names, _names, _vocab_lines
from .splits import _split_merges

if TYPE_CHECKING:
    import numpy as np

    from ..patterns import Pattern
    from ..verify import HFSide


class Ahead:
    """tokenizer.json (at ``path``, in the staging folder) for the vocabulary ``start`` (the one the
    last phase starts from) grows to, built as its tokens come (``add``). ``final`` makes the
    vocabulary the export writes of the tokens the loop ends with (the reserved special tokens
    added: :func:`toktok.start.reserve`); ``pattern`` and ``added`` (``{special: flags}``) as
    :func:`toktok.formats.hf.hf_tokenizer_json` takes them; ``hf``: HF's half of the check, told to
    load the file once it is written."""

    def __init__(self, path: Path, start: Vocab, *, hf: HFSide, pattern: Pattern | None = None,
                 added: dict[str, dict] | None = None, final: Callable[[Vocab], Vocab] = lambda v: v) -> None:
        self.path, self.hf, self.pattern, self.added, self.final = Path(path), hf, pattern, added, final
        self.tokens = list(start.tokens)
        self.specials, self.pinned = list(start.specials), dict(start.pinned)
        self._names: list[_Names] = []  # each batch's names and ids
        self._lines: list[bytes] = []  # each batch's vocab lines
        self._built = 0  # the tokens in them
        self._loaded = False  # the export's kernels (``_load_kernels``)
        self._data: list[np.ndarray] = []  # each batch's tokens' bytes, one after the other
        self._lens: list[np.ndarray] = []  # and their lengths
        self._compiled = False  # the lines spelled by the kernel (loaded: ``_load_kernels``)
        self.written: Vocab | None = None  # the vocabulary whose tokenizer.json is written (and loading)
        self.loading = False  # HF's half was told to load a file written here
        self.failed = False  # a step failed: the export builds it all itself
        self._syncing: Syncing | None = None  # the written file being forced to disk

    def add(self, tokens: list[bytes], last: bool = False) -> None:
        """The loop's next new tokens (ids in order); ``last``: it ended with them (the file is
        written then and HF's half starts loading it)."""
        if self.failed or self.written is not None:
            return
        self.tokens += tokens
        try:
            if not self._loaded:
                self._compiled, self._loaded = _load_kernels(), True
            self._build(self.tokens)
            if last:
                self._write(self.final(Vocab(self.tokens, self.specials, self.pinned)))
        except Exception:  # (the export does it all, and raises what it raises there)
            self.failed = True

    def wrote(self, vocab: Vocab) -> bool:
        """Whether the staging folder's tokenizer.json is the one of ``vocab`` (the export's,
        checked) and HF's half is loading it: written with the loop's last tokens, or now, from
        the parts built ahead (when the loop did not say which were its last). False when it is
        another (HF's half was told to load that one: ``loading``) or none."""
        vocab = vocab.settled()
        if self.written is None and not self.failed and not self.loading:
            try:
                self._write(vocab)
            except Exception:
                self.failed = True
        w = self.written
        return (w is not None and w.tokens == vocab.tokens and w.specials == vocab.specials
                and w.pinned == vocab.pinned)

    def _build(self, tokens: list[bytes]) -> None:
        """The names and vocab lines of ``tokens`` from ``_built`` on."""
        import numpy as np

        if len(tokens) > self._built:
            batch = tokens[self._built:]
            self._data.append(np.frombuffer(b"".join(batch), np.uint8))
            self._lens.append(np.fromiter(map(len, batch), np.int32, len(batch)))
            names = _names(batch, self.pinned, self._built)
            self._names.append(names)
            self._lines.append(_vocab_lines(names, self._compiled))
            self._built = len(tokens)

    def _write(self, vocab: Vocab) -> None:
        """tokenizer.json of ``vocab`` from the parts built so far (the tokens they hold must be
        ``vocab``'s first), written; HF's half told to load it."""
        vocab = vocab.settled()
        if len(vocab.tokens) < self._built or vocab.tokens[:self._built] != self.tokens[:self._built] \
                or vocab.pinned != self.pinned:
            raise ValueError("not the vocabulary built ahead")
        self._build(vocab.tokens)
        names = _Names.join(self._names)
        import numpy as np

        arrays = (np.concatenate(self._data), np.concatenate(self._lens))  # (the kernel's arrays, as they came)
        merges = _merge_lines(names, _split_merges(vocab.tokens, vocab.pinned, arrays=arrays))
        before, between, after = _head(vocab, self.pattern or DEFAULT, self.added)
        body = [x for line in self._lines if line for x in (b",\n", line)][1:]  # (written as parts: no join of MBs)
        data = [before, *([b"{\n", *body, b"\n    }"] if body else [b"{}"]), between,
                *([b"[\n", merges, b"\n    ]"] if merges else [b"[]"]), after]
        write_atomic(self.path, data, sync=False)  # (forced to disk in a thread, as HF reads it)
        self.loading = True
        self.hf.load()
        self.written = vocab
        self._syncing = Syncing([self.path])

    def synced(self) -> None:
        """The file written here forced to disk (waited for); OSError as writing it would raise."""
        if self._syncing is not None:
            self._syncing.wait()


def _load_kernels() -> bool:
    """The export's kernels loaded (when they load cheaply: built ahead), here beside the loop
    rather than in the export: the merge and vocab lines', the splits' and the .tiktoken's; and
    tiktoken, which the check after the export loads the .tiktoken with (~7 ms). Whether the
    lines' one is."""
    from importlib import import_module

    from ..merge import splits_ready, token_splits
    from .spell import _ranked_spelled, _spelled, spelled_ready

    import_module("tiktoken")
    if splits_ready():
        token_splits([b"a", b"b", b"ab"], (), 64)
    if not spelled_ready():
        return False
    _spelled(b"a", [0], [1], [[0]], [0], b"")
    _ranked_spelled([b"a"], ())
    return True
