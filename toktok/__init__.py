"""toktok: exact, fast, memory-bounded byte-level BPE training for tiktoken and Hugging Face."""
from __future__ import annotations

import os as _os

__version__ = "0.1.0"


def _lean_allocators() -> None:
    """Give freed memory back to the system, so that a run's RSS follows what it holds: Arrow's
    own pool keeps freed buffers (set before pyarrow loads), and glibc keeps freed heap tops."""
    _os.environ.setdefault("ARROW_DEFAULT_MEMORY_POOL", "system")
    try:
        import ctypes

        ctypes.CDLL("libc.so.6").mallopt(-1, 0)  # M_TRIM_THRESHOLD = 0
    except (OSError, AttributeError):  # pragma: no cover - not glibc
        pass


_lean_allocators()

from .errors import ToktokError  # noqa: E402
from .vocab import PATTERN, Vocab  # noqa: E402


def load_encoding(path, special_tokens=None):
    """A ready ``tiktoken.Encoding`` for a toktok output folder or ``.tiktoken`` file; its special
    tokens are found beside it, or given: ``{token: id}``, a list, a ``special_tokens.txt`` (ids
    after the last rank, toktoktok's rule) or a ``NAME.special_tokens.json``.

    Example: ``load_encoding("out/demo").encode("hello")``.
    """
    from .export import load_encoding as _load

    return _load(path, special_tokens)


__all__ = ["PATTERN", "Vocab", "ToktokError", "load_encoding", "__version__"]
