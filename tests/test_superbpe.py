"""SuperBPE (docs/superbpe.md): the ``superbpe`` pattern splits as the reference's stage-2
pre-tokenizer does (HF ``Digits`` + ``Split("(?=(\\d{3})+(?!\\d))")``) and as tiktoken and HF read
its one regex; a phase may have its own pattern; ``--superbpe T`` is two phases whose merges equal
the slow reference (stage 2 = plain BPE over the stage-2 pieces from stage 1's vocabulary)."""
from __future__ import annotations

import random

import pytest
import regex

from toktok.patterns import SUPERBPE, SUPERWORD, _tiktoken_pieces, check, probe_texts, resolve

#: Characters that exercise the digit rules: ASCII digits, other decimal digits (Arabic-Indic,
#: fullwidth), other numbers (superscripts, Roman numerals), letters, spaces, newlines, punctuation.
_ALPHABET = "0123456789" * 3 + "٣٤５²Ⅻ½" + "ab Z" * 2 + "\n\t.,!'é中😀\u00a0"


def _reference_split():
    """The reference code's stage-2 pre-tokenizer (before ByteLevel), as HF tokenizers runs it."""
    from tokenizers import Regex
    from tokenizers import pre_tokenizers as pt

    return pt.Sequence([pt.Digits(individual_digits=False), pt.Split(Regex(r"(?=(\d{3})+(?!\d))"), "isolated")])


def _texts(n: int = 1500, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    out = ["1234567", "12 345 6789", "١٢٣٤٥", "12²345", "Ⅻ1234", "x1y22z333w4444", "by the way, 1,000,000.",
           "a\n\nb  c\t\td", "", " ", "1", "12", "123", "1234"]
    out += ["".join(rng.choice(_ALPHABET) for _ in range(rng.randint(1, 24))) for _ in range(n)]
    return out + probe_texts(count=0)


def test_superbpe_is_the_reference_stage_2_split_in_every_engine():
    texts = _texts()
    ref = [[p for p, _ in _reference_split().pre_tokenize_str(t)] for t in texts]
    p = SUPERWORD["superbpe"]
    assert [regex.findall(p.regex, t) for t in texts] == ref
    from toktok.patterns import _hf_pieces

    assert _hf_pieces(p.hf, texts) == ref
    assert _tiktoken_pieces(p.regex, texts[:400]) == ref[:400]
    # the digits: groups of three from the right, a run of numbers apart; nothing else splits
    assert regex.findall(SUPERBPE, "by the way, it is 1234567 km.\n\nNext") == [
        "by the way, it is ", "1", "234", "567", " km.\n\nNext"]


def test_superbpe_by_name_and_by_regex():
    p = check("superbpe")
    assert p is SUPERWORD["superbpe"] and p.label() == "superbpe" and p.known and not p.named
    assert resolve(SUPERBPE) is p and check(SUPERBPE) is p
    assert type(p).from_dict(p.to_dict()) is p
