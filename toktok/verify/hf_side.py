"""Hugging Face tokenizers' half of a verification: a ``tokenizer.json`` loaded, its vocabulary
and added tokens read, texts encoded and decoded, in this process or in a second one.

Loading a large tokenizer.json is most of a verification (tokenizers builds its merge table: ~0.45 s
for the 276k merges of a 131k vocabulary) and holds the GIL all along, so no thread can share it.
``open_hf(path, process=True)`` starts ``python -m toktok.verify.hf_side``, and ``load()`` has it
load the file while this process does tiktoken's half (and a run its insight step); the second
process answers the same calls as ``Local`` does here, one pickled request and reply at a time on
its stdin and stdout, errors included. If it cannot start or stops answering, ``Local`` answers
here from then on: results never depend on it.
Example: ``with open_hf("out/demo/tokenizer.json", process=True) as hf: hf.load(); hf.encode(["hi"])``.
"""
from __future__ import annotations

import os
import pickle
import subprocess
import sys
import threading
from pathlib import Path
from typing import Union

from ..alloc import give_back_heap
from ..errors import ParityError, ToktokError
from ..formats.hf import bytelevel_to_token, encoded_ids, load_hf

#: Tokens from which a tokenizer.json loads in a second process by default: below, loading it
#: takes less than starting a process does.
PROCESS_FROM_TOKENS = 16_384
#: What a tokenizer.json takes per token, merges included (~70 bytes): to judge a file by its size.
BYTES_PER_TOKEN = 64
#: How long a closed second process has to exit before it is killed.
EXIT_SECONDS = 5
#: The calls a second process answers: ``Local``'s methods.
CALLS = ("load", "encode_ahead", "specials", "added", "vocab_size", "names_by_id", "vocab", "encode", "token_bytes",
         "flags")

#: The calls after whose reply a second process gives back what parsing the file freed, in a
#: thread: the vocabulary's, once this process is past the calls that allocate much (the trim,
#: ~7 ms, holds the heap's lock; after the load's reply, in line, it delayed every answer the
#: check waits for, and in a thread then, reading the vocabulary beside it waited for the lock).
TRIM_AFTER = ("names_by_id", "vocab")


def worth_a_process(tokens: int) -> bool:
    """Whether a tokenizer.json of ``tokens`` tokens loads in a second process by default.
    Example: ``worth_a_process(131_072) and not worth_a_process(3_000)``."""
    return tokens >= PROCESS_FROM_TOKENS


class Local:
    """A tokenizer.json loaded in this process, at the first call (VocabError naming the file if
    tokenizers cannot load it)."""

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)
        self._tok = None
        self._added: dict = {}
        self._by_id: tuple | None = None
        self._ahead: _Ahead | None = None
        #: the heap given back after the load by the caller (``_serve``: once the reply is sent)
        self.trim_later = False

    def encode_ahead(self, texts: list[str]) -> None:
        """Start encoding ``texts`` (and decoding them back) in a thread, for the ``encode``
        calls that ask for them next, in order, in batches: tokenizers encodes without the GIL,
        so the caller goes on meanwhile. The file is loaded first (``load``). A call that asks
        for other texts, or any failure of the thread, is answered as without it."""
        self.load()
        if self._tok is not None:
            self._ahead = _Ahead(self._tok, texts)

    def load(self) -> None:
        """Load the file now; if that fails, the first call that needs the file raises why. (Its
        vocabulary by id, what every verification reads first, is read when asked: in a second
        process, after the texts encoded ahead have started, beside them.)"""
        try:
            self._loaded()
        except Exception:
            pass

    def _loaded(self):
        """The ``tokenizers.Tokenizer``, loaded once. The encoding ahead is not waited for: its
        thread only encodes and decodes, which tokenizers does beside the other read-only calls
        (the vocabulary is compared meanwhile; ``encode`` waits for its results)."""
        if self._tok is None:
            self._tok = load_hf(self.path)
            if not self.trim_later:
                give_back_heap()  # what parsing the file freed: most of the load (see there)
            self._added = dict(self._tok.get_added_tokens_decoder())
        return self._tok

    def specials(self) -> dict[str, int]:
        """``{content: id}`` of the special added tokens."""
        self._loaded()
        return {a.content: i for i, a in self._added.items() if a.special}

    def added(self) -> dict[str, int]:
        """``{content: id}`` of every added token."""
        self._loaded()
        return {a.content: i for i, a in self._added.items()}

    def vocab_size(self) -> int:
        """Entries of the model's vocabulary (added tokens outside it not counted)."""
        return self._loaded().get_vocab_size(with_added_tokens=False)

    def flags(self) -> dict[str, dict[str, bool]]:
        """``{content: flags}`` of every added token (``lstrip``, ``rstrip``, ... as
        :data:`toktok.added.FLAGS`): how HF cuts text on them."""
        self._loaded()
        return {a.content: {"single_word": a.single_word, "lstrip": a.lstrip, "rstrip": a.rstrip,
                            "normalized": a.normalized, "special": a.special} for a in self._added.values()}

    def names_by_id(self) -> tuple[str, list[int]] | None:
        """The model's vocabulary as one string, the name of each id 0..n-1 in order (an added
        token's content where one has that id), and each name's length; None unless every id
        0..n-1 has a name. (One string crosses a pipe far faster than a dict of 131k entries, and
        compares to tiktoken's tokens in one step.)"""
        if self._by_id is None:
            tok = self._loaded()
            # id by id: half the time of get_vocab's dict, and no reordering
            names = list(map(tok.id_to_token, range(tok.get_vocab_size(with_added_tokens=False))))
            self._by_id = (None,) if None in names else ("".join(names), list(map(len, names)))
        return None if self._by_id == (None,) else self._by_id

    def vocab(self) -> dict[str, int]:
        """The model's vocabulary, ``{byte-level name: id}``."""
        return self._loaded().get_vocab(with_added_tokens=False)

    def encode(self, texts: list[str]) -> tuple[list[list[int]], list[str]]:
        """Each text's ids (no special tokens added) and those ids decoded back (specials kept)."""
        tok = self._loaded()
        if self._ahead is not None:
            done = self._ahead.take(texts)
            if done is not None:
                return done
            self._ahead = None
        return _encode(tok, texts)

    def token_bytes(self, i: int) -> bytes | str | None:
        """An id's token bytes, for messages; an added token stays its text."""
        name = self._loaded().id_to_token(i)
        if name is None or i in self._added:
            return name
        return bytelevel_to_token(name)

    @property
    def where(self) -> str:
        """Where the file was loaded: "this process"."""
        return "this process"

    def close(self) -> None:
        if self._ahead is not None:
            self._ahead.wait()
        self._tok = self._by_id = self._ahead = None

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _encode(tok, texts: list[str]) -> tuple[list[list[int]], list[str]]:
    """Each text's ids by ``tok`` (no special tokens added) and those ids decoded back (specials
    kept). tokenizers panics where Oniguruma gives up on a text (``retry-limit-in-match over``):
    a ParityError then, not the panic."""
    try:
        ids = encoded_ids(tok, texts)
    except BaseException as e:
        if type(e).__name__ != "PanicException":
            raise
        raise ParityError(f"HF tokenizers gave up splitting a text ({' '.join(str(e).split())[:100]}); its "
                          "pattern backtracks too much there") from None
    return ids, tok.decode_batch(ids, skip_special_tokens=False)


class _Ahead:
    """``texts`` encoded and decoded back by ``tok`` in a thread of their own (``Local.encode_ahead``)."""

    def __init__(self, tok, texts: list[str]) -> None:
        self.texts, self.at = texts, 0
        self.ids: list[list[int]] | None = None
        self.back: list[str] | None = None
        self._thread = threading.Thread(target=self._run, args=(tok,), name="toktok-hf-encode", daemon=True)
        self._thread.start()

    def _run(self, tok) -> None:
        try:
            self.ids, self.back = _encode(tok, self.texts)
        except Exception:  # (an encode call then meets the same failure itself, where it belongs)
            self.ids = None

    def wait(self) -> None:
        self._thread.join()

    def take(self, texts: list[str]) -> tuple[list[list[int]], list[str]] | None:
        """The next ``len(texts)`` results, if ``texts`` are the next texts encoded ahead."""
        self.wait()
        lo, hi = self.at, self.at + len(texts)
        if self.ids is None or self.texts[lo:hi] != texts:
            return None
        self.at = hi
        return self.ids[lo:hi], self.back[lo:hi]


class Process:
    """A tokenizer.json loading in a second process from now on (``later``: from :meth:`spawn`, or
    the first call); answers as ``Local`` does."""

    def __init__(self, path: str | os.PathLike, *, later: bool = False) -> None:
        self.path = Path(path)
        self._local: Local | None = None
        self._unread = 0  # requests whose reply is read before the next call's (``load``)
        self._writing: threading.Thread | None = None  # a request still being written (encode_ahead's)
        self._proc: subprocess.Popen | None = None
        self._spawned = False
        if not later:
            self.spawn()

    def spawn(self) -> None:
        """Start the second process, if not started yet (``later=True`` leaves it to this call,
        or to the first call that needs it)."""
        if self._spawned:
            return
        self._spawned = True
        try:
            self._proc = subprocess.Popen(
                [sys.executable, "-m", "toktok.verify.hf_side", str(self.path)],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        except OSError:
            self._proc = None

    def _written(self) -> None:
        """The request being written in a thread, written (requests go out whole, in order)."""
        if self._writing is not None:
            self._writing.join()
            self._writing = None

    def _send(self, name: str, args: tuple) -> bool:
        self._written()
        try:
            pickle.dump((name, args), self._proc.stdin, protocol=pickle.HIGHEST_PROTOCOL)
            self._proc.stdin.flush()
            return True
        except (OSError, ValueError):
            self.close()  # it died: this process answers from here on
            return False

    def _reply(self) -> tuple[bool, object] | None:
        try:
            return pickle.load(self._proc.stdout)
        except (OSError, EOFError, pickle.UnpicklingError, ValueError):
            self.close()  # it died or garbled its reply: this process answers from here on
            return None

    def _call(self, name: str, *args):
        self.spawn()
        while self._proc is not None and self._unread:
            self._unread -= 1
            self._reply()  # load's: a failed load raises again at the call that needs the file
        if self._proc is not None and self._send(name, args):
            got = self._reply()
            if got is not None:
                ok, value = got
                if ok:
                    return value
                raise value
        if self._local is None:
            self._local = Local(self.path)
        return getattr(self._local, name)(*args)

    @property
    def where(self) -> str:
        """Where the calls were answered: "second process", or "this process" once it took over
        (the second process did not start or stopped answering)."""
        return "this process" if self._local is not None else "second process"

    def encode_ahead(self, texts: list[str]) -> None:
        """Have the second process encode ``texts`` as soon as the file is loaded (``Local``'s
        ``encode_ahead`` there), for the ``encode`` calls that ask for them next; its reply is
        read with the next call's."""
        self.spawn()
        if self._proc is None:
            return
        # written in a thread: the texts (~300 KB) fill the pipe while the process loads the file,
        # and it reads them once loaded; a failed write shows at the next call's reply
        self._written()
        request, stdin = pickle.dumps(("encode_ahead", (texts,)), protocol=pickle.HIGHEST_PROTOCOL), self._proc.stdin

        def write() -> None:
            try:
                stdin.write(request)
                stdin.flush()
            except (OSError, ValueError):
                pass

        self._writing = threading.Thread(target=write, name="toktok-hf-send", daemon=True)
        self._writing.start()
        self._unread += 1

    def load(self) -> None:
        """Have the second process load the file now; its reply is read with the next call's."""
        self.spawn()
        if self._proc is not None and self._send("load", ()):
            self._unread += 1

    def specials(self) -> dict[str, int]:
        return self._call("specials")

    def added(self) -> dict[str, int]:
        return self._call("added")

    def vocab_size(self) -> int:
        return self._call("vocab_size")

    def flags(self) -> dict[str, dict[str, bool]]:
        return self._call("flags")

    def names_by_id(self) -> tuple[str, list[int]] | None:
        return self._call("names_by_id")

    def vocab(self) -> dict[str, int]:
        return self._call("vocab")

    def encode(self, texts: list[str]) -> tuple[list[list[int]], list[str]]:
        return self._call("encode", texts)

    def token_bytes(self, i: int) -> bytes | str | None:
        return self._call("token_bytes", i)

    def close(self) -> None:
        """End the second process: it exits once its stdin is closed. Its exit is waited for in
        a thread (and it is killed if it has not exited after ``EXIT_SECONDS``): freeing a large
        tokenizer takes it ~0.15 s that the caller need not wait."""
        proc, self._proc, self._spawned = self._proc, None, True
        if proc is not None:
            self._written()
            try:
                proc.stdin.close()
            except OSError:
                pass
            threading.Thread(target=_reap, args=(proc,), name="toktok-hf-exit", daemon=True).start()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _reap(proc: subprocess.Popen) -> None:
    """Wait for a closed second process to exit; kill it if it does not."""
    try:
        proc.wait(timeout=EXIT_SECONDS)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    proc.stdout.close()


#: Either half: both answer the same calls.
HFSide = Union[Local, Process]


def open_hf(path: str | os.PathLike, *, process: bool | None = None) -> HFSide:
    """HF tokenizers' half of a verification for the tokenizer.json at ``path``: in a second
    process (``process=True``), in this one (``False``), or the first when the file's size says
    it holds ``PROCESS_FROM_TOKENS`` or more (None). The file loads at ``load()`` (which a caller
    calls as soon as the file is written, to have it load meanwhile) or at the first call that
    needs it. Close it (or use ``with``) when done.
    Example: ``open_hf("out/demo/tokenizer.json", process=False).vocab_size() > 256``.
    """
    if process is None:
        try:
            process = worth_a_process(os.path.getsize(path) // BYTES_PER_TOKEN)
        except OSError:
            process = False  # Local names the missing file at the first call
    return Process(path) if process else Local(path)


def _pickled(value, ok: bool) -> bytes:
    try:
        return pickle.dumps((ok, value), protocol=pickle.HIGHEST_PROTOCOL)
    except Exception:  # an exception that does not pickle still says what it says
        return pickle.dumps((False, ToktokError(str(value))), protocol=pickle.HIGHEST_PROTOCOL)


def _serve(path: str) -> None:
    """The second process: answer calls on ``path`` until stdin closes (``load`` first, usually)."""
    # Replies alone go to the real stdout; anything else printed goes where stderr goes.
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    import tokenizers  # noqa: F401  (imported while the caller still writes the file)

    side = Local(path)
    side.trim_later = True  # (after a reply: TRIM_AFTER)
    inp = sys.stdin.buffer
    while True:
        try:
            name, args = pickle.load(inp)
        except EOFError:
            out.close()
            os._exit(0)  # (no teardown: freeing the tokenizer and the modules cost ~20 ms of a core)
        try:
            if name not in CALLS:
                raise ToktokError(f"toktok.verify.hf_side: no call {name!r}")
            reply = _pickled(getattr(side, name)(*args), True)
        except Exception as e:
            reply = _pickled(e, False)
        out.write(reply)
        out.flush()
        if side.trim_later and side._tok is not None and name in TRIM_AFTER:
            side.trim_later = False
            # what parsing the file freed (Local._loaded), in a thread: see TRIM_AFTER
            threading.Thread(target=give_back_heap, name="toktok-hf-trim", daemon=True).start()


if __name__ == "__main__":
    _serve(sys.argv[1])
