"""The regex compiler (toktok/count/rx): for every pattern it accepts, its pieces equal the
``regex`` package's whole matches (``finditer``), on the fixtures, the edge strings, random
probes and hypothesis-generated text across scripts; a pattern outside the subset is refused
with its reason, never scanned wrong."""
from __future__ import annotations

import json
import random

import polars as pl
import pytest
import regex
from conftest import FIXTURES
from hypothesis import given
from hypothesis import strategies as st

from toktok.count import rx
from toktok.patterns import _ALPHABET, BY_NAME, EDGE_TEXTS, NAMED, probe_texts

CJK = "一-龥぀-ゟ゠-ヿ"
#: Patterns held equal to regex: the named ones from their regexes, and a set of custom ones
#: that exercise each construct of the subset (and the usual ways of writing pre-tokenizers).
PATTERNS = {name: p.regex for name, p in BY_NAME.items()}  # superbpe's too
PATTERNS.update({
    # camelCase-aware code split: acronyms apart from the word after them, digits one by one
    "camel": r"""[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\p{N}|[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+|\p{L}+""",
    # o200k as GGUF converters spell it (one-char look-aheads before a class, capturing groups)
    "o200k_lookahead": r"""[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+(?:'[sS]|'[tT]|'[rR][eE]|"""
                       r"""'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])"""
                       r"""([^A-Z]))*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\p{N}{1,3}| ?"""
                       r"""[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+""",
    "single_digits": r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+|\p{N}|[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""",
    "bpeasy": r"""(?:[\p{L}\p{M}]+|\p{N}{1,4}|[^\s\p{L}\p{N}\p{M}]+)|\s+""",
    "deepseek_v3_main": "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+"
                        "| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+",
    "cjk_runs": f"\\p{{N}}{{1,3}}|[{CJK}]+|[^\\s\\p{{N}}{CJK}]+|\\s+",
    "lazy": r"""\p{L}+?(?=\s)|\p{L}{2,}?|\d+?|\S|\s""",
    "possessive": r"""\p{L}++|\p{N}{1,3}+|\s*+\n|\s+|[^\s\p{L}]""",
    "atomic": r"""(?>\s+)(?=\S)|\s|(?>a|ab)c|\w+|.|\n""",
    "boundaries": r"""\b\w+\b|\B\W+|\s|.""",
    "anchors": r"""^\s+|\s+$|\S+|\s""",
    "ignorecase": r"""(?i)hello|world|[a-z]+|\d|\s+|.|\n""",
    "groups": r"""(?:ab|a)(?:bc)?|(?:\d\.){2,3}|(x|y){1,3}z|(?:ab)+?c|.|\n""",
    "newlines": r"""(?:\r\n|\n)+|[^\r\n]+""",
    "lookahead": r"""\w+(?=\s+\w)|\w+(?!\s)|(?=\d)\w{2}|\s|.|\n""",
    "gpt2_cased_prefix": r"""'s|'t|'re|'ve|'m|'ll|'d|(?i:'LL)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""",
    "dollar": r"""a$|\n$|[^\n]|\n""",
    "group_repeats": r"""(?:\s\S){2,}|(?:[a-z]\d)*x|.|\n""",
    "nested": r"""((?:a|b(?:c|d)+)+?e|[^\p{L}\p{N}\s[\]]+)|\s|.""",
    "counted": r"""\p{L}{2,5}|\p{L}|\p{N}{3}|\p{N}{,2}?\.|\s{2}|[^\p{L}\p{N}]""",
    "empty_rounds": r"""(?:a?)*b|(?:x?y?)*z|q(?:\s?\S?)+|(?:(?=a)|b)*a|(?:a?){2,}c|(?:a?){0,3}d|(?:e|f?)+?g|.|\n""",
    "lookbehind": r"""(?<=\d)\d{2}|(?<![a-z])[a-z]+|(?<=\s)\S|.|\n""",
    # runs that give back chars until a look-ahead of single chars and literals holds
    "run_before_chars": r"""\p{Lu}+(?=\p{Lu}\p{Ll})|\d{2,}(?=px|\.)|[a-z]+(?=q)|\d+(?=\d\.\d)|\p{L}+|\s|.|\n""",
    "gaps": r"""\p{L}+|\p{N}""",  # leaves text unmatched: findall skips it, so must the scanner
    "literals": r"""\x41+|\u00e9|\t|->|=>|::|\.\.\.|[\x00-\x1f]|\w+|\W""",
})

#: Patterns outside the subset, and (part of) the reason given.
OUTSIDE = {
    r"(?<=ab)c|.": "look-behind of more than one char",
    r"(a)\1|.": "escape outside the subset",
    r"a*|b": "empty string",
    r"(?:a?)*|b": "empty string",
    r"(?s:.)": "flag",
    r"\X|.": "escape outside the subset",
    r"[[:alpha:]]+|.": "POSIX",
    r"a(?i)b": "flag",
}


def _alphabet() -> list[str]:
    return sorted(set(_ALPHABET) | set("0123456789١٢abcdefgqxyzHTTPServer'sdllve一龥ぁゟ゠ヿ\u3099\u3040\u30fb12345 \n\r\t.[]"))


def _random_texts(n: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    alpha = _alphabet()
    return ["".join(rng.choice(alpha) for _ in range(rng.randint(1, 40))) for _ in range(n)]


def _fixture_texts() -> list[str]:
    texts = pl.read_parquet(FIXTURES / "sample.parquet")["text"].to_list()
    texts += [json.loads(line)["text"] for line in (FIXTURES / "extra.jsonl").read_text().splitlines() if line]
    texts.append((FIXTURES / "notes.txt").read_text())
    return texts


def _want(pattern: str, text: str) -> list[str]:
    return [m.group() for m in regex.compile(pattern).finditer(text)]


def _check(pattern: str, texts: list[str]) -> None:
    c = rx.compile(pattern)
    for t in texts:
        assert c.findall(t) == _want(pattern, t), (pattern, t)


@pytest.mark.parametrize("name", sorted(PATTERNS))
def test_equal_to_regex_on_edges_and_probes(name):
    pattern = PATTERNS[name]
    _check(pattern, list(EDGE_TEXTS) + probe_texts(set("'sdmtlrevx.\\"), count=300) + _random_texts(600))


@pytest.mark.parametrize("name", ["cl100k", "o200k", "gpt2", "qwen2", "camel", "deepseek_v3_main", "lookahead"])
def test_equal_to_regex_on_the_fixtures(name):
    pattern = PATTERNS[name]
    texts = _fixture_texts()
    c = rx.compile(pattern)
    got = [c.findall(t) for t in texts]
    assert got == [_want(pattern, t) for t in texts]


def test_spans_of_many_documents_at_once():
    """One call over many documents (the kernels' way): pieces never cross a document's end."""
    import numpy as np

    texts = _random_texts(300, seed=3) + ["", "x"]
    data = "".join(texts).encode()
    offsets = np.cumsum([0] + [len(t.encode()) for t in texts])
    c = rx.compile(NAMED["cl100k"].regex)
    spans = c.spans(np.frombuffer(data, np.uint8), offsets)
    want = []
    for t, o in zip(texts, offsets[:-1]):
        for m in regex.finditer(NAMED["cl100k"].regex, t):
            want.append((int(o) + len(t[: m.start()].encode()), int(o) + len(t[: m.end()].encode())))
    assert [tuple(s) for s in spans.tolist()] == want


def test_deep_backtracking_grows_the_stack():
    """A loop of a group pushes an entry per round: a long match outgrows the first stack."""
    pattern = r"(?:\s\S)+|.|\n"
    text = " x" * 5000 + "yy"
    _check(pattern, [text])


@given(st.lists(st.sampled_from(_alphabet()), max_size=60).map("".join), st.sampled_from(sorted(PATTERNS)))
def test_fuzz_alphabet(text, name):
    _check(PATTERNS[name], [text])


@given(st.text(st.characters(exclude_categories=["Cs"]), max_size=50), st.sampled_from(sorted(PATTERNS)))
def test_fuzz_unicode(text, name):
    _check(PATTERNS[name], [text])


@pytest.mark.parametrize("pattern", sorted(OUTSIDE))
def test_outside_the_subset_is_refused_with_a_reason(pattern):
    why = rx.why_not(pattern)
    assert why is not None and OUTSIDE[pattern] in why, why
    with pytest.raises(rx.Unsupported):
        rx.compile(pattern)


def test_runs_give_back_only_where_needed():
    """A greedy run keeps its chars when what follows cannot start with one of them, and gives
    back one char at once before a look-ahead of its set's complement that ends the match."""
    from toktok.count.rx.program import GIVE, KEEP, RUN, TRIM

    ops = rx.compile(NAMED["cl100k"].regex).program.ops
    modes = [row[4] for row in ops if row[0] == RUN]
    assert modes.count(GIVE) == 1  # \s* before [\r\n]+
    assert modes.count(TRIM) == 1  # \s+ before (?!\S)
    assert KEEP in modes


# --- DeepSeek-V3's split as one pattern --------------------------------------------------------

#: DeepSeek-V3's pre-tokenizer as its tokenizer.json has it: a Sequence of Isolated Splits.
DEEPSEEK_V3_SPLITS = [
    r"\p{N}{1,3}",
    f"[{CJK}]+",
    "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+"
    "| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+",
]
#: Chars around DeepSeek-V3's edges: CJK letters, kana marks and symbols, unassigned code points
#: inside its CJK ranges, digits of several kinds, format and control chars.
DEEPSEEK_CHARS = "一龥ぁゟ゠ヿ\u3099\u309a\u3040\u3097\u30fb\u30a0\u309b\u30fc〇١２Ⅻ\x00\x01\u200b\u00ad\ue000"


def _deepseek_texts() -> list[str]:
    rng = random.Random(7)
    alpha = sorted(set(_alphabet()) | set(DEEPSEEK_CHARS) | set(",!"))
    return list(EDGE_TEXTS) + ["".join(rng.choice(alpha) for _ in range(rng.randint(1, 30))) for _ in range(3000)]


def test_deepseek_v3_is_its_sequence_of_splits():
    """The one pattern splits as HF's Sequence of DeepSeek-V3's three Splits, and tiktoken's engine
    and HF's Oniguruma read it alike (the probes of ``patterns.check``, as a custom regex)."""
    from tokenizers import Regex, pre_tokenizers

    from toktok.patterns import DEEPSEEK_V3, Pattern, _compile_error, _limits, _probe, _read, check

    seq = pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(r), "isolated") for r in DEEPSEEK_V3_SPLITS])
    one = pre_tokenizers.Split(Regex(DEEPSEEK_V3), "isolated")
    c = rx.compile(DEEPSEEK_V3)
    for t in _deepseek_texts():
        want = [p for p, _ in seq.pre_tokenize_str(t)]
        assert [p for p, _ in one.pre_tokenize_str(t)] == want, t
        assert _want(DEEPSEEK_V3, t) == want == c.findall(t), t
    custom = Pattern("custom", DEEPSEEK_V3, DEEPSEEK_V3)
    read = _read(DEEPSEEK_V3)
    assert _compile_error(custom, read.names) is None and _limits(custom, read.atoms) is None
    assert _probe(custom, read.literals | set(DEEPSEEK_CHARS)) is None
    assert check("deepseek_v3").regex == DEEPSEEK_V3


@given(st.text(st.sampled_from(sorted(set(_alphabet()) | set(DEEPSEEK_CHARS))), max_size=40))
def test_fuzz_deepseek_v3(text):
    from tokenizers import Regex, pre_tokenizers

    from toktok.patterns import DEEPSEEK_V3

    seq = pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(r), "isolated") for r in DEEPSEEK_V3_SPLITS])
    assert [p for p, _ in seq.pre_tokenize_str(text)] == _want(DEEPSEEK_V3, text) == rx.compile(DEEPSEEK_V3).findall(text)
