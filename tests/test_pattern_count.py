"""Counting with every pattern: the word counts of cl100k, o200k, gpt2, qwen2 and custom regexes
equal ``Counter(regex.findall(pattern))`` (toktok/count/scan/), whichever engine counts
them (compiled scanner, regex on the counting threads, the small-run reference)."""
from __future__ import annotations

from collections import Counter

import polars as pl
import pytest
import regex
from conftest import FIXTURES, FUZZ
from hypothesis import given, settings
from hypothesis import strategies as st

from toktok.count.scan import WordCounter, count_words, has_scanner
from toktok.patterns import NAMED, SUPERWORD, Pattern

#: Two custom regexes: digits one by one with punctuation kept apart from the space before it,
#: and a bpeasy-like split (letters with any marks, runs of at most 4 digits, a space joins
#: anything after it).
CUSTOM = {
    "digits": Pattern("custom", r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+|\p{N}|[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""",
                      r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+|\p{N}|[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""),
    "bpeasy": Pattern("custom", r"""(?:[\p{L}\p{M}]+|\p{N}{1,4}|[^\s\p{L}\p{N}\p{M}]+)|\s+""",
                      r"""(?:[\p{L}\p{M}]+|\p{N}{1,4}|[^\s\p{L}\p{N}\p{M}]+)|\s+"""),
    # "digits" with a last alternative outside the compiled subset (a look-behind of two chars, always
    # true there): PCRE2's JIT counts it
    "outside": Pattern("custom", r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+|\p{N}|[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+(?<!xy)""",
                       r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+|\p{N}|[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+(?<!x)"""),
    # the same look-behind spelled with a named character, which PCRE2 does not read: through regex
    "unread": Pattern("custom", r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+|\p{N}|[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+(?<!\N{LATIN SMALL LETTER X}y)""",
                      r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+|\p{N}|[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+(?<!x)"""),
}
#: The patterns with a compiled scanner: the named ones and superbpe (SuperBPE's stage 2).
SCANNED = {**NAMED, **SUPERWORD}
PATTERNS = {**SCANNED, **CUSTOM}


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


def test_a_custom_regex_outside_the_subset_and_unread_by_pcre2_counts_through_regex_on_the_threads():
    import threading

    from toktok.count.scan import count_path

    pattern = CUSTOM["unread"]
    assert not has_scanner(pattern) and has_scanner(NAMED["cl100k"]) and has_scanner(CUSTOM["outside"])
    assert count_path(pattern).startswith("regex (outside the compiled subset: \\N: an escape outside the subset")
    assert count_path(pattern).endswith("; not PCRE2: \\N: an escape the two engines may read differently)")
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


@pytest.mark.parametrize("name", list(PATTERNS))
def test_count_phase_on_the_fixtures_equals_findall(name):
    """Every file of data_fixtures/ (Parquet, JSONL, text), read and counted as a run counts."""
    from toktok.count.common import Source
    from toktok.count.local import count_phase
    from toktok.count.read import read_corpus

    pattern = PATTERNS[name]
    files = [str(FIXTURES / n) for n in ("sample.parquet", "extra.jsonl", "notes.txt")]
    texts = [t for b in read_corpus(files).batches() for t in b.texts.to_pylist()]
    pc = count_phase([Source(read_corpus(files))], threads=2, pattern=pattern, specials=["<|endoftext|>"])
    assert dict(zip(*pc.words.to_pydict().values())) == reference(texts, pattern, ["<|endoftext|>"])
    assert (pc.regex_mb_s is None) == has_scanner(pattern)
    assert has_scanner(pattern) == (name != "unread") and (pc.regex_mb_s is None or pc.regex_mb_s > 0)


def test_a_custom_regex_in_the_subset_counts_through_its_compiled_scanner_on_the_threads():
    import threading

    from toktok.count.scan import count_path

    pattern = CUSTOM["digits"]
    assert has_scanner(pattern) and count_path(pattern) == "the scanner compiled from its regex"
    before = set(threading.enumerate())
    texts = ["call 555 1234 now!! (x)  y\n"] * 3000
    c = WordCounter(threads=2, pattern=pattern)
    for i in range(0, len(texts), 700):
        c.add(texts[i : i + 700])
    assert any(t.name.startswith("toktok-count") for t in set(threading.enumerate()) - before)
    assert c.regex_counted == 0 and c._tables and not c._counters
    assert dict(c.result().iter_rows()) == reference(texts, pattern)


# --- the compiled scanners of the named patterns (and regex for the custom ones) ------------------

# Pieces that hit every alternative of every pattern and the boundaries between them: whitespace of
# every kind and \r\n mixes, "/" after newlines (o200k), apostrophes with the contraction letters
# in both cases and their folds (ſ, K), letters of each class o200k tells apart (Lu, Ll, Lt, Lm,
# Lo) and marks (M, not letters), digits of other scripts, runs that cross the 8-byte reads.
ATOMS = [
    " ", "  ", "   ", "\t", "\n", "\r", "\r\n", "\n\r", "\n\n", "\xa0", "\u3000", "\u2028", "\x0b", "\x0c", "\x85",
    "\x1c", "/", "//", "!", "(", ".", "-", "_", "'", "'s", "'S", "'t", "'ll", "'LL", "'Ll", "'re", "'Re", "'ve",
    "'m", "'D", "'x", "ſ", "\u212a", "a", "Z", "é", "É", "ж", "Ж", "Ω", "ω", "中", "한", "ǅ", "ǈ", "ʰ", "ˆ",
    "ª", "々", "\u0301", "\u0308", "\u093f", "\u20dd", "\u200d", "1", "٣", "²", "Ⅻ", "¾", "߀", "😀",
    "👩\u200d💻", "\x00", "Hello", "WORLD", "camelCase", "HTTPServer", "xml", "ABCdef", "abcDEF", "12345",
    "ÀÉÎõü", "e\u0301", "E\u0301", "\u0301a", "ǅungla", "ʰʰa",
    "12", "123", "1234", "0", "٣٤", "٣٤٥٦", "१२३", "½", "²³", " 1,000,000", "99.5", "$3", "7²",
]
TEXTS = st.lists(st.sampled_from(ATOMS), max_size=40).map("".join)
PAD = "pad Pad PAD 123 'll " * 6  # text longer than 64 bytes is read 8 bytes at a time


def _scan_counts(texts, pattern, swar=True):
    c = WordCounter(threads=1, swar=swar, pattern=pattern)
    c.add(texts)
    return dict(c.result().iter_rows())


def _same(texts, pattern):
    texts = list(texts)
    ref = reference(texts, pattern)
    assert dict(count_words(texts, threads=1, pattern=pattern).iter_rows()) == ref
    if has_scanner(pattern):
        assert _scan_counts(texts, pattern, swar=False) == ref
        padded = reference(texts + [PAD], pattern)
        for swar in (True, False):
            assert _scan_counts(texts + [PAD], pattern, swar) == padded, swar


@pytest.mark.parametrize("name", list(PATTERNS))
@settings(max_examples=50 * FUZZ, deadline=None)
@given(texts=st.lists(TEXTS, min_size=1, max_size=4))
def test_fuzz_atoms(name, texts):
    _same(texts, PATTERNS[name])


# U+0295 is Ll in the Unicode of Polars' and tiktoken's Rust regex engine (and Python's), Lo in
# the newer one of the regex package: the scanners classify it as tiktoken does, so it is left out
# of the comparison with regex (the only assigned char where their classes differ; others are
# newly assigned, Cn for Python's unicodedata, which hypothesis leaves out).
RECLASSIFIED = "\u0295"


@pytest.mark.parametrize("name", list(PATTERNS))
@settings(max_examples=25 * FUZZ, deadline=None)
@given(texts=st.lists(st.text(st.characters(exclude_categories=["Cs", "Cn"], exclude_characters=RECLASSIFIED),
                              max_size=40), max_size=5))
def test_fuzz_unicode(name, texts):
    _same(texts, PATTERNS[name])


def test_o200k_reads_u0295_as_tiktoken_does():
    import unicodedata

    from toktok.count.scan import classes

    assert unicodedata.category(RECLASSIFIED) == "Ll" and pl.Series([RECLASSIFIED]).str.contains(r"^\p{Ll}$")[0]
    assert classes._o200k_tables()[1][0x295] & (classes._UP | classes._LO) == classes._LO
    words = dict(count_words(["\u0295Ab"], pattern=NAMED["o200k"]).iter_rows())
    assert sorted(words) == ["Ab".encode(), "\u0295".encode()]  # the regex package: ["\u0295Ab"]


# letters, marks and apostrophes only: o200k's first two alternatives backtracking between
# its overlapping classes (Lm, Lo and marks are in both)
LETTERS = ["A", "a", "Z", "z", "É", "é", "ǅ", "ʰ", "中", "\u0301", "'", "'s", "'S", "'ll", " ", "!", "\n"]


@settings(max_examples=100 * FUZZ, deadline=None)
@given(text=st.lists(st.sampled_from(LETTERS), max_size=30).map("".join))
def test_fuzz_o200k_letters(text):
    _same([text, text * 3], NAMED["o200k"])


EDGES = [
    "", " ", "   ", "a", "hello  world", "x   123", "x \t!y", "x\t\t'sy", "  's", "\n\n  y  ", "foo   (bar)",
    "I'M DON'T we'll", "a\u3000\u3000b", "tab\t\tnumbers\t12", "end with spaces   ", "  \r\n  \r\n x",
    "1234567 3.14159", "emoji 😀😀 and  👩\u200d💻", "ſ's 'ſ 'S", "a \u0301b", "a!\n/b", "x\n//\n/y", "a \nb",
    "HTTPServer's camelCaseWord XMLHttpRequest", "ǅungla ǅUNGLA", "ʰʰʰ ʰA Aʰ", "\u0301\u0301A", "!\u0301A",
    " \u0301Ab", "'S'S'S", "A'sB", "12345678901 ٣٣٣٣", " 123 ' 12", "don't DON'T Don'T",
    "1²23456", "²1234", "12²²345²6", "٣٣1٣²٣٣٣٣", "½1½12½123½1234", "Ⅻ12Ⅻ", "1" * 40 + "²" + "2" * 41,
]


@pytest.mark.parametrize("name", list(PATTERNS))
@pytest.mark.parametrize("text", EDGES)
def test_edge_strings(name, text):
    _same([text], PATTERNS[name])


@pytest.mark.parametrize("name", list(SCANNED))
@settings(max_examples=20 * FUZZ, deadline=None)
@given(before=st.integers(0, 20), after=st.integers(0, 20),
       ch=st.sampled_from(["é", "É", "ж", "中", "😀", "\u00a0", "\u3000", "٣", "\u0301", "¿", "ǅ", "ʰ"]))
def test_non_ascii_at_every_offset(name, before, after, ch):
    # a non-ASCII char at every position of runs of capitals, small letters, digits, spaces and
    # punctuation, so it falls at every offset of an 8-byte read
    texts = ["a" * before + ch + "b" * after, "A" * before + ch + "B" * after, "A" * before + ch + "b" * after,
             " " * before + ch + " " * after + "x", "!" * before + ch + "?" * after, "7" * before + ch + "8" * after,
             "x" + " " * before + ch + "y" * after]
    _same(texts, SCANNED[name])


@pytest.mark.parametrize("name", list(SCANNED))
@pytest.mark.parametrize("n", [1, 7, 8, 9, 13, 255, 256, 5000])
def test_word_lengths(name, n):
    words = ["a" * n, "A" * n, "A" + "b" * (n - 1), " " + "b" * (n - 1), "é" * (n // 2), "1" * n, "!" * n, " " * n]
    _same([" ".join(words), "\n".join(words) + "\n", "x".join(words) * 2], SCANNED[name])


def test_o200k_class_tables_match_polars_per_char():
    import numpy as np

    from toktok.count.scan import classes

    ac, flags = classes._o200k_tables()
    assert ac.dtype == flags.dtype == np.uint16 and classes._o200k_swar_ok()
    chars = [c for a in ATOMS + LETTERS for c in a] + ["\u1c90", "\u0345", "\u02b0", "\u2160", "\u00aa"]
    s = pl.Series(chars)
    for bit, pat in classes._O200K_CLASSES:
        assert [bool(flags[ord(c)] & bit) for c in chars] == s.str.contains(pat).to_list()
    cl = classes._class_tables()[0]
    assert (flags & 0xFF == cl).all()  # cl100k's classes kept as they are


def test_o200k_class_cache(tmp_path, monkeypatch):
    import numpy as np

    from toktok.count.scan import classes

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    path = classes._o200k_cache_path()
    assert path.parent == tmp_path / "toktok" and path.name.startswith("classes-o200k-")
    assert path.name != classes._class_cache_path().name  # cl100k's cache file stays as it is
    got = classes._cached(path, lambda: {"classes": classes._compute_o200k_classes()}, classes._o200k_looks_right)
    assert path.exists() and classes._o200k_looks_right(got)
    path.write_bytes(b"damaged")
    again = classes._cached(path, lambda: {"classes": classes._compute_o200k_classes()}, classes._o200k_looks_right)
    assert np.array_equal(again["classes"], got["classes"])


@pytest.mark.parametrize("name", list(SCANNED))
def test_reference_then_scanner_equals_reference(name):
    # a small run counts its first documents with regex while the scanner is not compiled
    pattern = SCANNED[name]
    texts = pl.read_parquet(FIXTURES / "sample.parquet")["text"]
    half = int(texts.slice(0, 200).str.len_bytes().sum())
    c = WordCounter(threads=2, reference_bytes=half + 1, pattern=pattern)
    for i in range(0, texts.len(), 150):
        c.add(texts.slice(i, 150))
    assert c.reference_counted == half and c._tables
    assert dict(c.result().iter_rows()) == reference(texts.to_list(), pattern)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["o200k", "gpt2", "qwen2"])
def test_shared_corpus_equals_findall(name):
    import glob

    files = sorted(glob.glob(str(FIXTURES.parents[2] / "shared" / "corpus" / "*.parquet")))
    if not files:
        pytest.skip("../shared/corpus not present")
    for f in files:
        texts = pl.read_parquet(f, columns=["text"])["text"]
        assert dict(count_words(texts, pattern=NAMED[name]).iter_rows()) == reference(texts.to_list(), NAMED[name]), f


def test_a_small_first_run_compiles_no_scanner_of_any_pattern(tmp_path):
    """As for cl100k (tests/test_cold_start.py): with an empty kernel cache a small run of any
    named pattern counts through the reference, and compiles no scanner."""
    import os
    import subprocess
    import sys

    from conftest import ROOT

    code = ("from toktok.count.scan import count_words, reference_allowance, REFERENCE_BYTES\n"
            "from toktok.count.scan.named import _kernel_of\n"
            "from toktok._kernels import compiled\nfrom toktok.patterns import NAMED\n"
            "for name, p in NAMED.items():\n"
            "    r = reference_allowance(1000, p)\n"
            "    assert r == REFERENCE_BYTES, name\n"
            "    assert dict(count_words(['Hello World'], reference_bytes=r, pattern=p).iter_rows()), name\n"
            "    assert not compiled((_kernel_of(p),)), name\n"
            "print('ok')\n")
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "numba")}
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr[-2000:]


def test_superbpe_digit_groups_across_documents_and_cut_points():
    # a document that starts with digits right after one that ends in a digit: the look-behind
    # does not see the other document; and long runs of digits of several scripts, whole and cut
    docs = ["a1", "1234", "9", "12", "٣" * 7, "5" * 10, "x" + "7" * 100_001, "²" + "1" * 3001 + "½" + "2" * 5]
    _same(docs, SUPERWORD["superbpe"])
    _same(["".join(docs)], SUPERWORD["superbpe"])
