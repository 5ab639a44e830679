"""Counting with every pattern: the word counts of cl100k, o200k, gpt2, qwen2 and custom regexes
equal ``Counter(regex.findall(pattern))`` (toktok/count/pretokenize.py), whichever engine counts
them (compiled scanner, regex on the counting threads, the small-run reference)."""
from __future__ import annotations

from collections import Counter

import polars as pl
import pytest
import regex
from conftest import FIXTURES

from toktok.count.pretokenize import WordCounter, count_words, has_scanner
from toktok.patterns import NAMED, Pattern

#: Two custom regexes: digits one by one with punctuation kept apart from the space before it,
#: and a bpeasy-like split (letters with any marks, runs of at most 4 digits, a space joins
#: anything after it).
CUSTOM = {
    "digits": Pattern("custom", r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+|\p{N}|[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""",
                      r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+|\p{N}|[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""),
    "bpeasy": Pattern("custom", r"""(?:[\p{L}\p{M}]+|\p{N}{1,4}|[^\s\p{L}\p{N}\p{M}]+)|\s+""",
                      r"""(?:[\p{L}\p{M}]+|\p{N}{1,4}|[^\s\p{L}\p{N}\p{M}]+)|\s+"""),
}
PATTERNS = {**NAMED, **CUSTOM}


def reference(texts, pattern: Pattern, specials=()) -> dict[bytes, int]:
    """``Counter(regex.findall(pattern))`` over the documents, special tokens cut out first."""
    rx = regex.compile(pattern.regex)
    cut = regex.compile("|".join(regex.escape(s) for s in sorted(specials, key=lambda s: (-len(s), s))))
    out: Counter[bytes] = Counter()
    for doc in texts:
        if doc is None:
            continue
        for seg in cut.split(doc) if specials else [doc]:
            out.update(p.encode() for p in rx.findall(seg))
    return dict(out)


@pytest.mark.parametrize("name", list(PATTERNS))
@pytest.mark.parametrize("threads", [1, 2])
def test_fixture_counts_equal_findall(name, threads):
    texts = pl.read_parquet(FIXTURES / "sample.parquet")["text"]
    got = count_words(texts, ["<|endoftext|>"], threads, pattern=PATTERNS[name])
    assert got.schema == {"word": pl.Binary, "count": pl.Int64}
    assert dict(got.iter_rows()) == reference(texts.to_list(), PATTERNS[name], ["<|endoftext|>"])


def test_a_custom_regex_counts_through_regex_on_the_threads():
    import threading

    pattern = CUSTOM["digits"]
    assert not has_scanner(pattern) and has_scanner(NAMED["cl100k"])
    before = set(threading.enumerate())
    texts = ["call 555 1234 now!! (x)  y\n"] * 3000
    c = WordCounter(threads=2, pattern=pattern, reference_bytes=1 << 20)  # no reference without a scanner
    for i in range(0, len(texts), 700):
        c.add(texts[i : i + 700])
    assert any(t.name.startswith("toktok-count") for t in set(threading.enumerate()) - before)
    assert c.regex_counted == sum(len(t) for t in texts) and c.reference_counted == 0
    assert c.memory_bytes() > 0 and not c._tables
    first = dict(c.result().iter_rows())
    assert first == reference(texts, pattern) and first[b"5"] == 9000
    c.add(["555"])  # cumulative, as the scanner's
    assert dict(c.result().iter_rows())[b"5"] == 9003


def test_count_phase_takes_a_pattern(tmp_path):
    from toktok.count.common import Source
    from toktok.count.local import count_phase
    from toktok.count.read import read_corpus

    sources = [Source(read_corpus([str(FIXTURES / "sample.parquet"), str(FIXTURES / "notes.txt")]))]
    texts = pl.read_parquet(FIXTURES / "sample.parquet")["text"].to_list() + [(FIXTURES / "notes.txt").read_text()]
    for pattern in (NAMED["gpt2"], CUSTOM["bpeasy"]):
        pc = count_phase(sources, threads=2, pattern=pattern)
        assert dict(pc.words.iter_rows()) == reference(texts, pattern)
        assert (pc.regex_mb_s is None) == has_scanner(pattern)
        assert pattern.name != "custom" or pc.regex_mb_s > 0
    assert count_phase(sources, threads=2).regex_mb_s is None
