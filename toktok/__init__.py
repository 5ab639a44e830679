"""toktok: exact, fast, memory-bounded byte-level BPE training for tiktoken and Hugging Face.

``toktok.train(sources, out=..., merges=...)`` trains from paths or data in memory and returns a
``TrainResult`` (see :mod:`toktok.api`); ``toktok.load_encoding(path)`` loads a trained tokenizer
into tiktoken. Importing toktok changes nothing in the process (no environment variable, no
allocator setting: a run tunes the allocators for its own length, :mod:`toktok.alloc`) and loads
the training stages only when they are first used.
Example: ``toktok.train([["some text", "more text"]], out="out/tiny", merges=10).vocab_size``.
"""
from __future__ import annotations

__version__ = "0.1.0"

from .errors import ToktokError  # noqa: E402

#: What ``toktok.NAME`` loads on first use (module, attribute).
_LAZY = {
    "train": ("api", "train"), "Phase": ("api", "Phase"), "Source": ("api", "Source"),
    "TrainResult": ("api", "TrainResult"), "PATTERN": ("vocab", "PATTERN"), "Vocab": ("vocab", "Vocab"),
    "SpecialToken": ("added", "SpecialToken"), "encode_like_hf": ("added", "encode_like_hf"),
    "word_counts": ("counts", "count"), "cut": ("formats.ladder", "cut"),
}


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        mod, attr = _LAZY[name]
        value = getattr(importlib.import_module(f".{mod}", __name__), attr)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'toktok' has no attribute {name!r}")


def load_encoding(path, special_tokens=None, *, pattern=None):
    """A ready ``tiktoken.Encoding`` for a toktok output folder or ``.tiktoken`` file; its special
    tokens are found beside it, or given: ``{token: id}``, a list, a ``special_tokens.txt`` (ids
    after the last rank, toktoktok's rule) or a ``NAME.special_tokens.json``. It splits text with
    the pattern recorded beside it (tokenizer.json, else run.duckdb); ``pattern`` (``"o200k"``, a
    regex) is for a bare ``.tiktoken``, whose default is cl100k.

    Example: ``load_encoding("out/demo").encode("hello")``.
    """
    from .formats.tiktoken import load_encoding as _load

    return _load(path, special_tokens, pattern=pattern)


__all__ = ["train", "Phase", "Source", "TrainResult", "PATTERN", "Vocab", "SpecialToken", "encode_like_hf",
           "ToktokError", "load_encoding", "__version__", "word_counts", "cut"]
