"""toktok: exact, fast, memory-bounded byte-level BPE training for tiktoken and Hugging Face."""
from __future__ import annotations

__version__ = "0.1.0"

from .errors import ToktokError  # noqa: E402
from .vocab import PATTERN, Vocab  # noqa: E402


def load_encoding(path):
    """A ready ``tiktoken.Encoding`` for a toktok output folder or ``.tiktoken`` file.

    Example: ``load_encoding("out/demo").encode("hello")``.
    """
    from .export import load_encoding as _load

    return _load(path)


__all__ = ["PATTERN", "Vocab", "ToktokError", "load_encoding", "__version__"]
