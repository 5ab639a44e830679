"""Safe cuts for every pattern (toktok/count/cuts.py): findall of the parts == findall of the
whole, at every cut the reader (big .txt files) or the sampler (~1 KiB pieces) may take, for each
named pattern's rule and for a custom regex's own match ends."""
from __future__ import annotations

from collections import Counter
from contextlib import contextmanager

import numpy as np
import polars as pl
import pytest
import regex
from conftest import FIXTURES, FUZZ
from hypothesis import given, settings
from hypothesis import strategies as st
from test_pattern_count import CUSTOM, PATTERNS

from toktok.count import cuts
from toktok.count.read import read_corpus
from toktok.count.sample import Reservoir, _buffers, _cut, _pieces, as_large_string
from toktok.patterns import NAMED

# whitespace of every kind, "/" (o200k's punctuation takes it after newlines), apostrophes and
# contraction letters with their folds, letters of every class o200k tells apart (Lu Lt Lm Lo Ll,
# marks), digits of other scripts, and chars sharing UTF-8 prefixes with the whitespace ones
ATOMS = [" ", "  ", "\t", "\n", "\n\n", "\r", "\r\n", "\x0b", "\x0c", "\x1c", "\x85", "\xa0", "\u1680",
         "\u2003", "\u2028", "\u202f", "\u205f", "\u3000", "\u3001", "\u200b", "\xa1",
         "/", "//", "!", "...", "'", "'s", "'S", "'ll", "'LL", "'re", "ſ", "\u212a",
         "a", "Z", "ab", "Ab", "aB", "ǅ", "ʰ", "中", "é", "e\u0301", "\u0301", "ж",
         "7", "42", "1234", "٣", "²", "Ⅻ", "\U0001F600"]
TEXTS = st.lists(st.sampled_from(ATOMS), max_size=40).map("".join)


def _split(pattern, text: str, at: list[int]) -> list[str]:
    """findall of ``text`` cut at ``at``, one part after the other."""
    rx = regex.compile(pattern.regex)
    bounds = [0, *at, len(text)]
    return [w for a, b in zip(bounds, bounds[1:]) for w in rx.findall(text[a:b])]


@pytest.mark.parametrize("name", list(NAMED))
@settings(max_examples=150 * FUZZ, deadline=None)
@given(text=TEXTS)
def test_every_rule_cut_is_a_boundary(name, text):
    pattern = NAMED[name]
    r = cuts.rule(pattern)
    whole = regex.findall(pattern.regex, text)
    reader = [m.end() for m in regex.finditer(r.text.pattern.removeprefix("(?r)"), text)]
    sampler = [m.end() for m in r.sample.finditer(text)]
    for at in {*reader, *sampler}:
        if 0 < at < len(text):
            assert _split(pattern, text, [at]) == whole, (at, text)
    # the last one is the reader's, and the bytes rule finds the same
    i = cuts.split_point(text, pattern)
    assert i == max(reader, default=0)
    assert cuts.split_point(text.encode(), pattern) == len(text[:i].encode())


@pytest.mark.parametrize("name", ["o200k", "gpt2"])
def test_cl100k_rule_is_not_safe_for_o200k_and_gpt2(name):
    # why they have rules of their own: "!\n/" is one o200k piece; GPT-2 gives a whitespace
    # run's last char ("\n") to what follows
    text = {"o200k": "a!\n/b", "gpt2": "a \nb"}[name]
    at = cuts.split_point(text, NAMED["cl100k"])
    assert at and _split(NAMED[name], text, [at]) != regex.findall(NAMED[name].regex, text)
    assert cuts.split_point(text, NAMED[name]) == 0


@pytest.mark.parametrize("name", list(NAMED))
def test_bytes_rules_know_every_whitespace_character(name):
    everything = "".join(chr(c) for c in range(0x110000) if not 0xD800 <= c < 0xE000)
    ws = set(regex.findall(r"\s", everything)) | {ch for ch in everything if ch.isspace()}
    p = NAMED[name]
    for ch in ws:
        assert cuts.split_point(("x\n" + ch).encode(), p) == 0, hex(ord(ch))
        if name == "gpt2":  # whitespace before the "\n" too
            assert cuts.split_point((ch + "\nx").encode(), p) == 0, hex(ord(ch))
    for c in (0x84, 0x86, 0xA1, 0x1681, 0x200B, 0x2027, 0x202A, 0x2030, 0x205E, 0x3001, 0x1F600):
        assert cuts.split_point(("x\n" + chr(c)).encode(), p) == 2, hex(c)
        if name == "gpt2":
            assert cuts.split_point((chr(c) + "\nx").encode(), p) == len(chr(c).encode()) + 1, hex(c)


@pytest.mark.parametrize("name", list(PATTERNS))
@settings(max_examples=50 * FUZZ, deadline=None)
@given(texts=st.lists(TEXTS, min_size=1, max_size=5), unit=st.integers(1, 40))
def test_sampler_pieces_split_as_the_whole_and_compiled_equals_definition(name, texts, unit):
    pattern = PATTERNS[name]
    kind = Reservoir(1, pattern=pattern).cut_kind
    arr = as_large_string(pl.Series(texts, dtype=pl.String))
    offs, data = _buffers(arr)
    room = len(texts) + int((np.diff(offs) // unit).sum())
    doc, k, s, e = (np.empty(room, np.int64) for _ in range(4))
    m = _pieces(offs, data, unit, doc, k, s, e, kind)
    got: list[list[str]] = [[] for _ in texts]
    for d, a, b in zip(doc[:m], s[:m], e[:m]):
        got[d].append(data[a:b].tobytes().decode())
    for t, ps in zip(texts, got):
        assert ps == (_cut(t, unit, pattern) if len(t.encode()) > unit else [t])
        assert "".join(ps) == t
        assert [w for p in ps for w in regex.findall(pattern.regex, p)] == regex.findall(pattern.regex, t)
    if pattern.name == "custom":
        assert kind == -1 and all(len(ps) == 1 for ps in got)


@contextmanager
def small_margins():
    """A custom regex's cuts on short texts: margins of a few characters."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(cuts, "REGEX_MARGIN", 3)
        mp.setattr(cuts, "REGEX_CHECK", 5)
        yield


# a regex with gaps between its matches, and one whose look-ahead sees the end of the text
SPARSE = r"\p{L}+|\d"
LOOKAHEAD = r"\w+(?=\d)|\w+|\s+(?!\S)|\s+|[^\w\s]+"


@pytest.mark.parametrize("rx", [CUSTOM["digits"].regex, CUSTOM["bpeasy"].regex, SPARSE, LOOKAHEAD, r"(a)|[^a]+"])
@settings(max_examples=60 * FUZZ, deadline=None)
@given(text=TEXTS)
def test_custom_regex_cut_is_a_boundary(rx, text):
    with small_margins():
        i = cuts.regex_split_point(text, rx)
        pieces = cuts.pieces(rx, text)
        if i:
            assert 0 < i <= len(text) - cuts.REGEX_MARGIN
            assert cuts.pieces(rx, text[:i]) + cuts.pieces(rx, text[i:]) == pieces
            assert cuts.regex_split_point(text.encode(), rx) == len(text[:i].encode())


def test_custom_regex_cut_is_not_taken_where_the_end_changes_the_matches():
    # "\s+(?!\S)" leaves a run's last space to what follows, but takes the run whole at the end
    # of a text: the match " " that ends at 4 is no cut (the text cut there splits otherwise)
    rx = r"\s+(?!\S)|\s+|\S+"
    text = "a   xyzuvwxyz"
    assert cuts.pieces(rx, text) == ["a", "  ", " ", "xyzuvwxyz"]
    assert cuts.pieces(rx, text[:4]) + cuts.pieces(rx, text[4:]) != cuts.pieces(rx, text)
    with small_margins():
        assert cuts.regex_split_point(text, rx) == 0
        # where the matches before the end do not depend on it, the last match end is taken
        assert cuts.regex_split_point("ab cd ef gh ij", rx) == 11
        assert cuts.regex_split_point("ab cd ef gh ij".encode(), rx) == 11


def test_pieces_are_whole_matches_for_a_regex_with_groups():
    assert cuts.pieces(r"(a)b|c", "abcab") == ["ab", "c", "ab"]


@pytest.mark.parametrize("name", list(PATTERNS))
def test_txt_read_in_cuts_counts_as_the_whole_file(tmp_path, name, monkeypatch):
    pattern = PATTERNS[name]
    monkeypatch.setattr(cuts, "REGEX_MARGIN", 512)
    monkeypatch.setattr(cuts, "REGEX_CHECK", 256)
    import toktok.count.read as read

    monkeypatch.setattr(read, "REGEX_MARGIN", 512)
    notes = (FIXTURES / "notes.txt").read_text(encoding="utf-8")
    tricky = "a!\n/b x \ny  \n\tz 12345 ab'S Ab\n//\r\n中文 \u3000\n" * 40
    text = tricky + notes[:30_000] + tricky
    p = tmp_path / "a.txt"
    p.write_text(text, encoding="utf-8", newline="")
    batches = list(read_corpus([str(p)]).batches(2000, pattern=pattern))
    chunks = [t for b in batches for t in b.texts.to_pylist()]
    assert len(chunks) > 5 and "".join(chunks) == text
    rx = regex.compile(pattern.regex)
    assert Counter(w for c in chunks for w in rx.findall(c)) == Counter(rx.findall(text))
