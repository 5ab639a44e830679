"""Typed errors. The library raises these; only the CLI turns them into exit codes.

Every message is one line that names the culprit (file, row, line, byte offset or key) and says
what to do, e.g. ``InputError("data/a.parquet: no column 'text' (columns: body, id); pass --text-column")``.
"""
from __future__ import annotations


#: the most characters a message may have (the house rule for bad input: one line of at most 300)
LIMIT = 300


def shown(value: object, limit: int = 60) -> str:
    """User input as a message echoes it: its ``repr`` for a str (quotes, newlines and control
    characters escaped), else ``str``, on one line and cut to ``limit`` characters with ``...``.
    Example: ``shown("first line\\nsecond " * 20, 20) == "'first line\\\\nseco..."``."""
    text = repr(value) if isinstance(value, str) else str(value)
    text = text.replace("\r", "\\r").replace("\n", "\\n")
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _fit(message: str) -> str:
    """``message`` on one line (line breaks escaped) and at most LIMIT characters, its middle cut:
    the head names the culprit and the tail says what to do. The net under every message."""
    text = message.replace("\r", "\\r").replace("\n", "\\n")
    if len(text) <= LIMIT:
        return text
    keep = (LIMIT - 5) // 2
    return f"{text[:keep]} ... {text[len(text) - (LIMIT - 5 - keep):]}"


class ToktokError(Exception):
    """Base class of every error toktok raises on purpose. Its message is one line of at most
    LIMIT characters whatever it echoes (``_fit``); build it with :func:`shown` for user input."""

    exit_code = 2

    def __str__(self) -> str:  # also when a caller added to ``args`` (resume.abandon's note)
        return _fit(super().__str__())


class InputError(ToktokError):
    """A corpus source is missing, unreadable or malformed."""


class ConfigError(ToktokError):
    """An option or config value is invalid."""


class VocabError(ToktokError):
    """A vocabulary file (warm start, special tokens) is invalid."""


class OutputError(ToktokError):
    """The output folder cannot be written, or exists without --force."""


class ResourceError(ToktokError):
    """The machine ran short: DuckDB's temp folder or the run file's disk is full, or DuckDB ran out
    of memory under its limit. Names the folder and says what to free or raise."""


class ParityError(ToktokError):
    """tiktoken and Hugging Face tokenizers disagree on an id, or a decode does not round-trip."""


class QueryError(ToktokError):
    """A query on a run file failed: names the query (file) and gives DuckDB's message."""


class ToktokWarning(UserWarning):
    """Something the user should know that does not stop the work (e.g. ``toktok eval`` on a
    tokenizer that drops characters). The CLI prints each as ``toktok: warning: ...``."""


def not_regular(path) -> str | None:
    """What ``path`` is when it exists and is neither a regular file nor a folder (``"a FIFO"``,
    ``"a device"``, ``"a socket"``), else None: such a file given as an option (a config, a chat
    template, a warm start) is refused before it is opened, since reading one may block for ever
    (a FIFO) or never end (``/dev/zero``). Example: ``not_regular("/dev/zero") == "a device"``."""
    import os
    import stat

    try:
        mode = os.stat(os.path.expanduser(os.fspath(path))).st_mode
    except (OSError, ValueError):
        return None  # missing or unreadable: the caller's open says so
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        return None
    return "a FIFO" if stat.S_ISFIFO(mode) else "a socket" if stat.S_ISSOCK(mode) else "a device"


def one_line(e: BaseException, limit: int | None = None) -> str:
    """What an exception says, on one line (its type's name if it says nothing), cut to ``limit``
    characters: the cause inside toktok's own messages. Example: ``one_line(OSError("a\\n b")) == "a b"``."""
    text = " ".join(str(e).split()) or type(e).__name__
    return text if limit is None or len(text) <= limit else text[:limit - 3] + "..."
