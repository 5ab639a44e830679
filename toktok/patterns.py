"""Pre-tokenizer patterns: the named ones and how a name or a regex becomes a :class:`Pattern`.

A pattern splits text into pieces (words) before BPE; merges never cross a piece's edge. Each
:class:`Pattern` carries its regex as tiktoken's engine (and the ``regex`` package, toktok's
reference) reads it, and the form written to ``tokenizer.json``, which HF's Oniguruma reads the
same way (no possessive quantifiers: Oniguruma reads ``\\p{N}{1,3}+`` as ``(\\p{N}{1,3})+``).
The named patterns count through the compiled scanner; any other regex counts through ``regex``.
Example: ``resolve("o200k").regex.startswith("[^\\\\r\\\\n")``.
"""
from __future__ import annotations

from dataclasses import dataclass

#: GPT-4's split (cl100k_base), exactly as tiktoken's original cl100k_base (no possessive quantifiers).
CL100K = (
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"""
    r""" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
)
#: GPT-4o's split (o200k_base): camelCase apart, contractions kept on the word, ``/`` after punctuation.
O200K = "|".join([
    r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
    r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
    r"""\p{N}{1,3}""",
    r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
    r"""\s*[\r\n]+""",
    r"""\s+(?!\S)""",
    r"""\s+""",
])
#: GPT-2's split (r50k_base), as in the original GPT-2 release: spaces stay on numbers, case-sensitive contractions.
GPT2 = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
#: Qwen2's split: cl100k's with single digits.
QWEN2 = (
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|"""
    r""" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
)


@dataclass(frozen=True)
class Pattern:
    """A pre-tokenizer pattern: ``name`` (``cl100k``, ``o200k``, ``gpt2``, ``qwen2``, or ``custom``
    for a user's regex), ``regex`` (as tiktoken and the ``regex`` package read it) and ``hf`` (as
    written to ``tokenizer.json``). Example: ``Pattern("cl100k", CL100K, CL100K).named``."""

    name: str
    regex: str
    hf: str

    @property
    def named(self) -> bool:
        """Whether this is one of the named patterns (counted by the compiled scanner)."""
        return self.name in NAMED


#: The named patterns, by name; ``cl100k`` is the default.
NAMED: dict[str, Pattern] = {
    "cl100k": Pattern("cl100k", CL100K, CL100K),
    "o200k": Pattern("o200k", O200K, O200K),
    "gpt2": Pattern("gpt2", GPT2, GPT2),
    "qwen2": Pattern("qwen2", QWEN2, QWEN2),
}
#: Other names of named patterns: Llama 3 splits as cl100k does.
ALIASES = {"llama3": "cl100k"}
DEFAULT = NAMED["cl100k"]


def resolve(text: str) -> Pattern:
    """The pattern a ``--pattern`` value names: a named pattern (or an alias), else a regex as
    given (``custom``), or the named pattern whose regex it is.
    Example: ``resolve("llama3") is NAMED["cl100k"]``."""
    key = ALIASES.get(text, text)
    if key in NAMED:
        return NAMED[key]
    for p in NAMED.values():
        if text == p.regex:
            return p
    return Pattern("custom", text, text)


__all__ = ["Pattern", "NAMED", "ALIASES", "DEFAULT", "resolve", "CL100K", "O200K", "GPT2", "QWEN2"]
