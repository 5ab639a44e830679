"""The general path (toktok/count/pcre): a regex outside the compiled subset counted by the system's
PCRE2 and its JIT from compiled code. Its word counts equal ``Counter`` of ``regex``'s whole matches
on the fixtures, the edge strings, probes and hypothesis-generated text across scripts, for
patterns with backreferences, look-behinds, atomic groups, possessive groups and empty matches;
documents holding a code point the two engines class differently (PCRE2's older Unicode tables),
or on which PCRE2 fails, count through ``regex``; what PCRE2 may read differently is refused with
the reason, and the run says which path it took. Skipped where the system has no PCRE2 with JIT."""
from __future__ import annotations

import unicodedata
from collections import Counter

import pytest
import regex
from conftest import FIXTURES
from hypothesis import given
from hypothesis import strategies as st

from toktok.count import pcre
from toktok.count.pcre import lib
from toktok.count.scan import REFERENCE_BYTES, WordCounter, count_path, count_words, has_scanner
from toktok.patterns import EDGE_TEXTS, Pattern, probe_texts

pytestmark = pytest.mark.skipif(lib.library() is None, reason=f"no PCRE2 JIT here: {lib.missing()}")

#: Patterns outside the compiled subset that PCRE2 counts.
PATTERNS = {
    # cl100k with runs of one punctuation char kept whole (bench/run.py's backref)
    "backref": r"""'(?i:[sdmt]|ll|ve|re)|([^\s\p{L}\p{N}])\1+|[^\r\n\p{L}\p{N}]?+\p{L}+|\p{N}{1,3}"""
               r"""| ?[^\s\p{L}\p{N}]++[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+""",
    "doubled": r"""(\p{L})\1|(\p{L}\p{L})\2|\p{L}+|\p{N}+|\s+|.""",
    "lookbehind": r"""(?<=\p{Lu}\p{Lu})\p{Ll}+|(?<!ab|\d)\d{2}|(?<=\s\s)\S+|\p{L}+|\d|\s|.""",
    "atomic_possessive": r"""(?>\p{L}+|\p{N})(?:'\p{L}+)?+|(?:\s\S)++|(?:ab|a)++c|(?<=\p{L}\p{L})\s+|\s+"""
                         r"""|[^\p{L}\p{N}\s]+""",
    "empty": r"""x*|\p{L}+|(?=\d)|\d+|\b|(?m:^)""",
    "fold_anchors": r"""(?i)straße|(?i:k)\w+|\bword\b|\s+\Z|^\s+|\u00e9\w*|a{,2}|(?s:.)""",
    "flags": r"""(?m:^\w+$)|(?s:<.*?>)|\w+|\s|.""",
}
TEXTS_EXTRA = ["aab bb cc ßß Straße STRASSE kelvin Kelvin word sword  \n", "AAbc ab12 x12 \t\tfoo <a\nb> éé",
               "!!!! ---- === ... 12345 it's ABCdef", "\n\nline one\nline two\n", "", " ", "\u212a\u0130\u0131"]


def reference(texts, rx: str) -> dict[bytes, int]:
    """``Counter`` of ``regex``'s whole matches over the documents."""
    c = regex.compile(rx)
    return dict(Counter(m.group().encode() for t in texts for m in c.finditer(t)))


def _fixture_texts() -> list[str]:
    import json

    import polars as pl

    texts = pl.read_parquet(FIXTURES / "sample.parquet")["text"].to_list()
    texts += [json.loads(line)["text"] for line in (FIXTURES / "extra.jsonl").read_text().splitlines() if line]
    texts.append((FIXTURES / "notes.txt").read_text())
    return texts


def _routed(rx: str, n: int = 3) -> list[str]:
    """A few code points the plan of ``rx`` routes (classed differently by the engines)."""
    import numpy as np

    bits = np.unpackbits(pcre.plan(rx).routed, bitorder="little")
    return [chr(c) for c in np.flatnonzero(bits)[:: max(1, int(bits.sum()) // n)][:n]]


def _count(rx: str, texts, threads: int = 2) -> dict[bytes, int]:
    return dict(count_words(texts, threads=threads, pattern=Pattern("custom", rx, rx)).iter_rows())


@pytest.mark.parametrize("name", sorted(PATTERNS))
def test_outside_the_subset_and_counted_by_pcre2(name):
    from toktok.count import rx

    p = PATTERNS[name]
    assert rx.why_not(p) is not None and pcre.why_not(p) is None
    assert has_scanner(Pattern("custom", p, p))
    assert count_path(Pattern("custom", p, p)).startswith("PCRE2 10.")
    # its pieces, one by one, as regex's (the plan's finditer: what the kernel reads)
    code = pcre.plan(p).code
    for t in TEXTS_EXTRA + list(EDGE_TEXTS):
        b = t.encode()
        assert [b[a:z].decode() for a, z in code.finditer(b)] == [m.group() for m in regex.finditer(p, t)], t


@pytest.mark.parametrize("name", sorted(PATTERNS))
def test_word_counts_equal_findall_on_edges_probes_fixtures_and_routed_text(name):
    p = PATTERNS[name]
    routed = _routed(p)
    texts = (TEXTS_EXTRA + list(EDGE_TEXTS) + probe_texts(set("'sdmtlrevxab!-"), count=300) + _fixture_texts()
             + [f"ab {c}{c} cc!! {c}" for c in routed] + [f"x{routed[0]}", "Ab" + "".join(routed)])
    assert _count(p, texts) == reference(texts, p)
    assert _count(p, texts * 3, threads=1) == {k: 3 * v for k, v in reference(texts, p).items()}


def test_a_routed_document_counts_its_pieces_from_regex_into_a_growing_table():
    p = PATTERNS["doubled"]
    (c,) = _routed(p, 1)
    assert regex.match(r"\p{L}", c) and not list(lib.Code(r"\p{L}").finditer(c))  # a letter to regex, not yet to PCRE2
    doc = " ".join(f"w{i}x{c}" for i in range(60_000))  # more words than a fresh table holds
    texts = [doc, "plain text aa", doc[:999]]
    c1 = WordCounter(threads=2, pattern=Pattern("custom", p, p))
    c1.add(texts)
    assert dict(c1.result().iter_rows()) == reference(texts, p)


def test_a_document_pcre2_fails_on_counts_through_regex():
    p = r"(?:(a)|b)+|.|\n"  # a group repeated 600,000 times: past PCRE2's JIT stack
    assert pcre.why_not(p) is None
    texts = ["ab" * 300_000, "xyz ab", "\n" + "ab" * 300_000 + "c"]
    with pytest.raises(lib.CompileError, match="JIT stack"):
        list(pcre.plan(p).code.finditer(texts[0]))
    assert _count(p, texts) == reference(texts, p)


@given(st.text(st.characters(exclude_categories=["Cs"]), max_size=60), st.sampled_from(sorted(PATTERNS)))
def test_fuzz_unicode(text, name):
    p = PATTERNS[name]
    assert _count(p, [text], threads=1) == reference([text], p)


_SCRIPTS = ("aZ09 '\n\t.!-_ßéİıΣσςабвЖ中文字あア한글٣٤۵०१ก\u0301\u200d😀\u3000"
            + ("".join(_routed(PATTERNS["backref"], 4)) if lib.library() else ""))  # (and routed letters)


@given(st.lists(st.sampled_from(sorted(set(_SCRIPTS))), max_size=80).map("".join), st.sampled_from(sorted(PATTERNS)))
def test_fuzz_scripts(text, name):
    p = PATTERNS[name]
    assert _count(p, [text, text[::-1]], threads=2) == reference([text, text[::-1]], p)


#: What PCRE2 may read differently from regex, refused with (part of) the reason.
REFUSED = {
    r"\X|.": "escape the two engines",
    r"\N{LATIN SMALL LETTER A}|.": "escape the two engines",
    r"(?x) a |.": "flag x",
    r"(?i)(a)\1|.": "backreference under (?i)",
    r"(a)\1|x{|.": "a { that is not a repetition",
    r"[a&&b]|.": "set operator",
    r"\0|.": "octal",
    r"(a)?(?(1)b|c)|.": "group construct",
    r"a(?i)b|.": "group construct",
    r"(?P<x>a)(?P=x)|.": "named backreference",
    r"a(*SKIP)(*FAIL)|(a)\1|.": "backtracking verb",
    # [[:alpha:]] is Alphabetic to regex and \p{L} to PCRE2: they differ on 1,679 assigned chars
    r"[[:alpha:]]+|(\s)\1|.": "code points PCRE2 knows differently (e.g. U+0345)",
}


@pytest.mark.parametrize("rx", sorted(REFUSED))
def test_what_pcre2_may_read_otherwise_stays_with_regex(rx):
    why = pcre.why_not(rx)
    assert why is not None and REFUSED[rx] in why
    path = count_path(Pattern("custom", rx, rx))
    assert path.startswith("regex (outside the compiled subset: ") and path.endswith(f"; not PCRE2: {why})")
    texts = ["aab ab a{ x", "\u00e9 e\u0301"]
    assert _count(rx, texts) == reference(texts, rx)


def test_a_class_read_otherwise_on_ascii_stays_with_regex():
    # PCRE2's [[:punct:]] under UCP holds the ASCII symbols $+<=>^`|~ too? Whichever the engines
    # disagree on, a disagreement on an ASCII char keeps the regex with regex.
    got = pcre._routed([(r"[\w]", r"[\w\-]")])
    assert got[1].startswith(r"[\w] holds U+002D for one engine")


def test_without_pcre2_a_run_says_so_and_counts_through_regex(monkeypatch):
    p = PATTERNS["doubled"]
    monkeypatch.setattr(lib, "_load", lambda: (None, "", "no libpcre2-8 on this system (Debian: apt-get install "
                                                         "libpcre2-8-0)"))
    pcre.plan.cache_clear()
    from toktok.count.pcre import count as pcre_count

    pcre_count.scanner.cache_clear()
    try:
        path = count_path(Pattern("custom", p, p))
        assert path.endswith("; not PCRE2: no libpcre2-8 on this system (Debian: apt-get install libpcre2-8-0))")
        assert not has_scanner(Pattern("custom", p, p))
        texts = ["aa bb cd", "xx"]
        assert _count(p, texts) == reference(texts, p)
    finally:
        pcre.plan.cache_clear()
        pcre_count.scanner.cache_clear()


def _script_digits() -> str:
    """Each script's decimal digits in runs of up to three, a script's never joined to another's
    (one class per script: past the compiled subset's 64 sets)."""
    zeros = [c for c in range(0x110000) if unicodedata.category(chr(c)) == "Nd" and unicodedata.digit(chr(c)) == 0
             and all(unicodedata.category(chr(c + k)) == "Nd" for k in range(10))]
    return "|".join(f"[{chr(z)}-{chr(z + 9)}]{{1,3}}" for z in zeros)


def test_a_run_with_a_pattern_pcre2_counts_passes_its_parity_check(tmp_path):
    import toktok

    rx = (r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?\p{L}+|""" + _script_digits()
          + r"""|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+""")
    texts = _fixture_texts() + ["٣٤٥٦ 1234567 ۱۲۳۴ १२३४५ ١٢ 12٣٤"]
    src = tmp_path / "a.txt"
    # past what a run counts with the reference while the kernel is not compiled: PCRE2's kernel counts
    src.write_text("\n".join(t.replace("\n", " ") for t in texts * 13), encoding="utf-8")
    assert src.stat().st_size > REFERENCE_BYTES
    r = toktok.train([str(src)], out=str(tmp_path / "out"), merges=300, pattern=rx, verbose=False)
    assert r.counted_by.startswith("PCRE2 10.") and "more than 64 distinct character sets" in r.counted_by
    assert r.parity_strings > 0 and not r.regex_mb_s  # (nothing counted through regex)
    enc = r.encoding
    assert enc.decode(enc.encode("١٢٣٤ 12٣٤")) == "١٢٣٤ 12٣٤"


def test_a_big_text_is_cut_where_pcre2_says_and_the_cut_changes_no_piece():
    from toktok.count.cuts import REGEX_MARGIN, _compiled_split_point, regex_split_point

    p = PATTERNS["backref"]
    text = ("Hello  world!!! ---- it's 12345 x\n" * (3 * REGEX_MARGIN // 34))[:-7]
    i = _compiled_split_point(text, p, 0)
    assert i is not None and 0 < i <= len(text) - REGEX_MARGIN
    assert i == regex_split_point(text, p) == _compiled_split_point(text.encode(), p, 0)  # (bytes: ASCII)
    whole = [m.group() for m in regex.finditer(p, text)]
    assert [m.group() for m in regex.finditer(p, text[:i])] + [m.group() for m in regex.finditer(p, text[i:])] == whole
    (c,) = _routed(p, 1)
    assert _compiled_split_point(text + c, p, 0) is None  # a routed char: regex finds the cut
