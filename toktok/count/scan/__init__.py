"""Pre-tokenize and count: documents in, a word-count table out (the pre-tokenize stage).

Owns how each pre-tokenizer pattern (:mod:`toktok.patterns`) splits text. Reads batches of
documents (Arrow arrays or Polars Series of str), writes a table with columns ``word`` (Binary,
UTF-8 bytes of one pre-token) and ``count`` (Int64): a Polars frame (``result``), or an Arrow
table sorted by word (``table``, as a phase's count hands it on). A batch small enough for the
reference is counted as Python strings and never loads Polars. A named pattern (cl100k, o200k,
gpt2, qwen2; and superbpe, SuperBPE's stage 2) is counted by a compiled matcher of it on UTF-8
bytes with per-thread hash tables; a custom regex by the scanner compiled from it (``count/rx``)
or PCRE2's JIT (``count/pcre``) into the same tables, else by the ``regex`` package on the
counting threads. The ``regex`` package is the reference the matchers are tested equal to
(``tests/oracles``, with an exact look-around-free emulation of cl100k inside Polars that the
tests hold to the same reference).

The named patterns are simple enough to match without a regex engine: a character class table
(letter, number, whitespace, as Polars' Rust regex classifies them; o200k's letter classes too)
and one branch per alternative, in the pattern's order. ASCII chars are classified by a 256-entry
byte table, runs of ASCII letters and punctuation are skipped 8 bytes at a time, and only bytes
>= 0x80 are decoded. Pieces are counted in a hash table keyed by their bytes.

The modules: ``classes`` (the Unicode class tables and their cache), ``swar`` (the byte helpers
every scanner inlines), ``cl100k``, ``o200k``, ``gpt2``, ``qwen2``, ``superbpe`` (one scanner each), ``loop``
(the loop a scanner is, around its pattern's piece end), ``named`` (which scanner counts a
pattern), ``table`` (the per-thread word hash table), ``sort`` (the words in byte order),
``reference`` (the ``regex`` path) and ``counter`` (``WordCounter`` and ``count_words``).
Example: ``count_words(["a a"]).sort("word").rows() == [(b" a", 1), (b"a", 1)]``.
"""
from __future__ import annotations

from .counter import WordCounter, count_words
from .named import count_path, has_scanner, scanner_name
from .reference import REFERENCE_BYTES, SMALL_BYTES, TINY_BYTES, reference_allowance

__all__ = ["REFERENCE_BYTES", "SMALL_BYTES", "TINY_BYTES", "WordCounter", "count_path", "count_words", "has_scanner",
           "reference_allowance", "scanner_name"]
