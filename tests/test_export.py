"""Export parity: tiktoken, HF tokenizers and transformers must give identical ids and round-trip.

Vocabularies come from a tiny pure-Python BPE trained here on embedded text (no dependency on the
trainer), plus hand-built vocabularies that stress the all-splits merge list.
"""
from __future__ import annotations

import base64
import functools
import itertools
import json
import random
from collections import Counter
from pathlib import Path

import pytest
import regex
import tiktoken
import tokenizers
from conftest import FIXTURES, FUZZ  # FUZZ: TOKTOK_FUZZ, the hypothesis budget multiplier (10 in slow mode)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from vocabs import grown

from toktok.errors import OutputError, VocabError
from toktok.formats.common import HF_CONFIG_FILE, HF_FILE, HF_SPECIAL_MAP_FILE, TIKTOKEN_FILE
from toktok.formats.hf import bytelevel_to_token, load_hf, token_to_bytelevel, write_hf
from toktok.formats.splits import all_split_merges
from toktok.formats.tiktoken import load_encoding, read_tiktoken, write_tiktoken
from toktok.vocab import PATTERN, Vocab


SPECIALS = ["<|endoftext|>", "<|fim_prefix|>", "<|fim_suffix|>"]

TRAIN_TEXT = """\
The quick brown fox jumps over the lazy dog. The dog didn't care; it's a lazy dog, and THE DOG'S
owner said: "We'll see, I'M not sure they'll ever learn." You're right, they've tried 1234567 times
since 2019-03-14 at 3.14159 past noon, costing $1,000,000.00 (or 99.5%).
    def tokenize(text: str) -> list[int]:
        return [ord(c) for c in text if c != "\\n"]  # indentation matters

    for (int i = 0; i < n; ++i) { total += values[i] * 2; }
    if (a != b && c >= d || e <= f) { return x -> y; }
{"key": "value", "list": [1, 2, 3], "nested": {"ok": true, "none": null}}
<item id="42">Tom &amp; Jerry</item>
Ça va très bien, merci ! Le garçon a mangé une crème brûlée à l'hôtel près de la forêt.
Der Fußgänger überquert die Straße; Größe und Übermut führen zu Ärger.
Привет, как дела? Москва — столица России, а Санкт-Петербург стоит на Неве.
Καλημέρα κόσμε, η γλώσσα είναι ελληνική και πολύ όμορφη.
مرحبا بكم في العالم العربي، اللغة العربية جميلة جدا.
שלום לכולם, זה טקסט בעברית לבדיקה.
नमस्ते, आप कैसे हैं? भारत एक विशाल देश है।
สวัสดีครับ ประเทศไทยสวยงามมาก
東京は日本の首都です。中文也是一种很重要的语言，北京是中国的首都。
안녕하세요, 서울은 한국의 수도입니다.
Emoji: 😀 😂 👍🏽 👩‍👩‍👧‍👦 🇫🇷 🇯🇵 ❤️ 🔥🔥🔥
Tabs\tand\t\tspaces   mixed \t here.\r\nWindows line\r\nends.\n\n\nThree newlines above.
the the the then there these those other another mother brother
"""


# ---------------------------------------------------------------------------------------------
# A tiny reference BPE trainer (greedy, most frequent pair, deterministic ties)
# ---------------------------------------------------------------------------------------------


def train_bpe(text: str, merges: int, base: Vocab | None = None) -> Vocab:
    """Greedy byte-level BPE over ``regex.findall(PATTERN, text)``, appended to ``base``.

    A merge whose result is already a token (e.g. b"00" from the hardcoded part) is applied to
    the words but adds no token, so hardcoded tokens get reused as parts of later tokens.
    """
    tokens = list((base or Vocab.base()).tokens)
    ranks = {t: i for i, t in enumerate(tokens)}
    counts = Counter(regex.findall(PATTERN, text))
    words = [[bytes([b]) for b in w.encode()] for w in counts]
    freqs = list(counts.values())
    for _ in range(merges):
        pairs: Counter = Counter()
        for w, f in zip(words, freqs):
            for pair in zip(w, w[1:]):
                pairs[pair] += f
        if not pairs:
            break
        (a, b), _ = max(pairs.items(), key=lambda kv: (kv[1], kv[0]))
        new = a + b
        if new not in ranks:
            ranks[new] = len(tokens)
            tokens.append(new)
        for w in words:
            i = 0
            while i < len(w) - 1:
                if w[i] == a and w[i + 1] == b:
                    w[i : i + 2] = [new]
                i += 1
    return Vocab(tokens)


@functools.lru_cache(maxsize=None)
def tiny_vocab() -> Vocab:
    """300 merges on TRAIN_TEXT over the base (256 bytes + 1161 hardcoded), with specials."""
    v = train_bpe(TRAIN_TEXT, 300)
    return Vocab(v.tokens, list(SPECIALS))


def export(vocab: Vocab, folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    write_tiktoken(vocab, folder / TIKTOKEN_FILE)
    write_hf(vocab, folder)
    return folder


class Encoders:
    """tiktoken, tokenizers and (optionally) transformers loaded from one folder."""

    def __init__(self, folder: Path, with_transformers: bool = True):
        self.enc = load_encoding(folder)
        self.hf = load_hf(folder)
        self.tf = None
        if with_transformers:
            from transformers import PreTrainedTokenizerFast

            self.tf = PreTrainedTokenizerFast.from_pretrained(str(folder))

    def check(self, text: str) -> list[int]:
        """Assert identical ids and exact decodes everywhere; return the ids."""
        ids = self.enc.encode(text, allowed_special="all")
        hf_ids = self.hf.encode(text, add_special_tokens=False).ids
        assert hf_ids == ids, f"tokenizers differs from tiktoken on {text!r}"
        assert self.enc.decode_bytes(ids) == text.encode()
        assert self.hf.decode(ids, skip_special_tokens=False) == text
        if self.tf is not None:
            assert self.tf.encode(text, add_special_tokens=False) == ids, f"transformers differs on {text!r}"
            # No post-processor: the default add_special_tokens=True must not add anything either.
            assert self.tf(text)["input_ids"] == ids
            assert self.tf.decode(ids, skip_special_tokens=False, clean_up_tokenization_spaces=False) == text
        return ids


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory) -> Path:
    return export(tiny_vocab(), tmp_path_factory.mktemp("tiny"))


@pytest.fixture(scope="module")
def tiny_encoders(tiny_dir) -> Encoders:
    return Encoders(tiny_dir)


def builtin_texts() -> list[str]:
    from toktok.verify import DEFAULT_TEXTS, special_texts

    return DEFAULT_TEXTS + special_texts(SPECIALS) + TRAIN_TEXT.splitlines(keepends=True) + [TRAIN_TEXT]


# ---------------------------------------------------------------------------------------------
# Parity on the trained vocabulary
# ---------------------------------------------------------------------------------------------


def test_tiny_vocab_is_valid_and_reuses_hardcoded_tokens():
    v = tiny_vocab()
    v.check()
    assert len(v.tokens) > 1417 + 200
    # Some trained token has a hardcoded token (id 256..1416) as one side of a split.
    hard = set(v.tokens[256:1417])
    assert any(t[:k] in hard or t[k:] in hard for t in v.tokens[1417:] for k in range(1, len(t)))


def test_builtin_texts_parity(tiny_encoders):
    total = 0
    for text in builtin_texts():
        total += len(tiny_encoders.check(text))
    assert total > 1000


def test_trained_merges_are_used(tiny_encoders):
    # The whole training text must compress well below one id per byte, or the test proves little.
    ids = tiny_encoders.check(TRAIN_TEXT)
    assert len(ids) < 0.6 * len(TRAIN_TEXT.encode())


def test_special_tokens_are_single_ids(tiny_encoders):
    n = len(tiny_vocab().tokens)
    for k, s in enumerate(SPECIALS):
        assert tiny_encoders.check(f"x{s}y")[1] == n + k
    assert tiny_encoders.tf.eos_token == "<|endoftext|>"
    assert set(SPECIALS) <= set(tiny_encoders.tf.all_special_tokens)


_WORDS = sorted(set(regex.findall(PATTERN, TRAIN_TEXT)))
_ODD_CHARS = list(
    " \t\n\r\x0b\x0c\x85\xa0\u1680\u2000\u2009\u200a\u2028\u2029\u202f\u205f\u3000"  # whitespace
    "\u200b\u200c\u200d\u2060\ufeff\u180e"  # zero-width, not whitespace
    "'sStTmMlLdDrReEvV0123456789.,;:!?-_/\\\"$%&*()[]{}<>|"  # contractions, digits, punctuation
    "\u0301\u0308\u0327\u093f\u0e31"  # combining marks
    "\u0130\u0131\u017f\u212a\u1e9e\u00df\ufb01"  # case-folding oddities: İ ı ſ K ẞ ß ﬁ
)
#: Broad Unicode text without surrogates, biased toward what the pattern treats specially.
TEXT = st.lists(
    st.one_of(
        st.characters(exclude_categories=("Cs",)),
        st.characters(min_codepoint=0x10000, exclude_categories=("Cs",)),
        st.characters(categories=("Zs", "Zl", "Zp", "Cc", "Cf", "Mn", "Mc", "Me", "Nd", "Nl", "No")),
        st.sampled_from(_ODD_CHARS),
        st.sampled_from(_WORDS),
        st.sampled_from(SPECIALS),
    ),
    max_size=40,
).map("".join)


@settings(max_examples=150 * FUZZ, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=TEXT)
def test_fuzz_parity(tiny_encoders, text):
    tiny_encoders.check(text)


@settings(max_examples=100 * FUZZ, deadline=None)
@given(text=st.text(alphabet=st.characters(exclude_categories=("Cs",)), max_size=80))
def test_fuzz_parity_plain_text(tiny_encoders, text):
    tiny_encoders.check(text)


# ---------------------------------------------------------------------------------------------
# Fuzz on a vocabulary toktok itself trained from a fixture, with the Unicode that breaks
# tokenizers: unusual whitespace, combining marks, ZWJ sequences, flags and tags, astral planes
# ---------------------------------------------------------------------------------------------

#: Every White_Space character, plus the zero-width and bidi controls that are not whitespace.
WHITESPACE = [chr(c) for c in (0x09, 0x0A, 0x0B, 0x0C, 0x0D, 0x20, 0x85, 0xA0, 0x1680, *range(0x2000, 0x200B),
                               0x2028, 0x2029, 0x202F, 0x205F, 0x3000)]
INVISIBLE = ["\u200b", "\u200c", "\u200d", "\u2060", "\ufeff", "\u180e", "\u200e", "\u200f", "\u202a", "\u202e",
             "\u2066", "\u2069", "\u00ad", "\u034f", "\ufe0f", "\ufe0e"]
EMOJI = ["\U0001F468", "\U0001F469", "\U0001F467", "\U0001F466", "\U0001F9D1", "\u2764", "\U0001F525", "\U0001F3F3",
         "\U0001F308", "\U0001F44D", "\U0001F91D", "\U0001F4BB", "\u2695", "\U0001F680", "\U0001F9AF"]
SKIN = [chr(c) for c in range(0x1F3FB, 0x1F400)]
REGIONAL = st.characters(min_codepoint=0x1F1E6, max_codepoint=0x1F1FF)
COMBINING = st.characters(categories=("Mn", "Mc", "Me"))
LETTER = st.one_of(st.characters(categories=("L",)), st.sampled_from(list("aeiouAEIOUnñyıİ")))

_emoji = st.tuples(st.sampled_from(EMOJI), st.sampled_from(["", "", "\ufe0f", *SKIN])).map("".join)
UNICODE_CLUSTERS = st.one_of(
    # ZWJ sequences: 👩‍👩‍👧‍👦, 👨🏽‍💻, 🏳️‍🌈 and nonsense ones (a ZWJ between any two emoji)
    st.lists(_emoji, min_size=2, max_size=5).map("\u200d".join),
    # flags (two regional indicators) and tag sequences (🏴 + tag letters + cancel tag)
    st.lists(REGIONAL, min_size=1, max_size=4).map("".join),
    st.lists(st.characters(min_codepoint=0xE0061, max_codepoint=0xE007A), min_size=1, max_size=6)
    .map(lambda t: "\U0001F3F4" + "".join(t) + "\U000E007F"),
    # keycaps: 1️⃣ #️⃣
    st.sampled_from(list("0123456789#*")).map(lambda c: c + "\ufe0f\u20e3"),
    # a letter under a stack of combining marks (Zalgo), and marks with nothing to combine with
    st.tuples(LETTER, st.lists(COMBINING, min_size=1, max_size=6).map("".join)).map("".join),
    st.lists(COMBINING, min_size=1, max_size=3).map("".join),
    # Hangul jamo (L V T, composed by the reader, not the file) and precomposed syllables
    st.tuples(st.characters(min_codepoint=0x1100, max_codepoint=0x1112), st.characters(min_codepoint=0x1161, max_codepoint=0x1175),
              st.characters(min_codepoint=0x11A8, max_codepoint=0x11C2)).map("".join),
    # runs of unusual whitespace, with and without line ends and invisible characters
    st.lists(st.sampled_from(WHITESPACE + INVISIBLE), min_size=1, max_size=8).map("".join),
    # astral characters: letters (math alphanumerics, CJK ext. B, Gothic), symbols, private use
    st.characters(min_codepoint=0x10000, exclude_categories=("Cs", "Cn")),
    st.characters(min_codepoint=0x1D400, max_codepoint=0x1D7FF, exclude_categories=("Cn",)),
    st.characters(min_codepoint=0x20000, max_codepoint=0x2A6DF),
    st.characters(min_codepoint=0xF0000, max_codepoint=0x10FFFD),
)


@pytest.fixture(scope="module")
def fixture_encoders(tmp_path_factory) -> Encoders:
    """tiktoken / HF / transformers on a vocabulary trained by toktok's own counter and merge loop
    on the multilingual fixture (1,000 merges over the bytes and the hardcoded tokens)."""
    import polars as pl

    from toktok.merge import learn_merges
    from toktok.count.scan import count_words

    table = count_words(pl.read_parquet(FIXTURES / "sample.parquet")["text"], specials=SPECIALS).sort("word")
    res = learn_merges(table["word"].to_arrow(), table["count"].to_numpy(), Vocab.base(), 1000)
    assert res.new_tokens == 1000
    return Encoders(export(Vocab(res.vocab.tokens, list(SPECIALS)), tmp_path_factory.mktemp("fixture_vocab")))


_FIXTURE_WORDS = sorted(set(regex.findall(PATTERN, (FIXTURES / "notes.txt").read_text()[:20000])))
FIXTURE_TEXT = st.lists(
    st.one_of(UNICODE_CLUSTERS, st.sampled_from(_FIXTURE_WORDS), st.sampled_from(_ODD_CHARS), st.sampled_from(SPECIALS),
              st.characters(exclude_categories=("Cs", "Cn"))),
    max_size=30,
).map("".join)


@settings(max_examples=150 * FUZZ, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=FIXTURE_TEXT)
def test_fuzz_parity_on_a_trained_fixture_vocabulary(fixture_encoders, text):
    fixture_encoders.check(text)


@settings(max_examples=100 * FUZZ, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=st.lists(UNICODE_CLUSTERS, min_size=1, max_size=12).map("".join))
def test_fuzz_parity_unicode_clusters(fixture_encoders, text):
    fixture_encoders.check(text)


# ---------------------------------------------------------------------------------------------
# Hand-built vocabularies that stress the all-splits merge list
# ---------------------------------------------------------------------------------------------


def _bytes_vocab(extra: list[bytes], specials: list[str] | None = None) -> Vocab:
    return Vocab([bytes([b]) for b in range(256)] + extra, specials or [])


_A_TEXTS = ["a" * n for n in range(1, 30)] + [
    "aa aaa aaaa aaaaa",
    "baaab abaaaaaba",
    " aaaaaaa\naaaaaaa\taaaaaaaaaaa",
    "a" * 200,
]


@pytest.mark.parametrize("order", list(itertools.permutations([b"aa", b"aaa", b"aaaa", b"aaaaa"])))
def test_runs_of_one_letter_in_any_rank_order(tmp_path, order):
    # Later tokens are not always reachable from earlier ones (b"aaa" before b"aa"), so HF must
    # use every split, not only the one a trainer would have merged.
    enc = Encoders(export(_bytes_vocab(list(order)), tmp_path), with_transformers=False)
    for text in _A_TEXTS:
        enc.check(text)


def test_random_small_vocabularies_in_random_order(tmp_path):
    # Random subsets of all 2..5 letter strings over {a, b}, in random rank order.
    rng = random.Random(7)
    pool = [("".join(p)).encode() for n in range(2, 6) for p in itertools.product("ab", repeat=n)]
    for trial in range(15):
        extra = rng.sample(pool, rng.randint(3, 20))
        enc = Encoders(export(_bytes_vocab(extra), tmp_path / str(trial)), with_transformers=False)
        texts = ["".join(rng.choice("ab") for _ in range(rng.randint(1, 25))) for _ in range(150)]
        ids = enc.enc.encode_ordinary_batch(texts)
        hf = [e.ids for e in enc.hf.encode_batch(texts, add_special_tokens=False)]
        for text, a, b in zip(texts, ids, hf):
            assert a == b, f"{text!r} with vocab {extra}"


def test_tokens_that_are_invalid_utf8_halves(tmp_path):
    euro, smile = "€".encode(), "😀".encode()
    extra = [
        smile,  # the whole before its halves
        euro[:2],
        smile[:2],
        euro,
        smile[2:],
        smile[:3],
        euro[1:],
        b" " + euro[:1],
        b" " + euro,
        euro + euro,
        b"\xff\xfe",  # never valid UTF-8
        b"\xc3",  # lone lead byte of a 2-byte character... already a byte, skipped below
    ]
    extra = [t for t in extra if len(t) > 1]
    vocab = _bytes_vocab(extra, ["<|endoftext|>"])
    enc = Encoders(export(vocab, tmp_path), with_transformers=True)
    for text in ["€", "€€", "€€€", " €€ €😀😀", "x€y 😀€", "😀😀😀😀", " €", "  € ", "a<|endoftext|>€"]:
        enc.check(text)
    # The halves really are in the merge list.
    merges = all_split_merges(vocab.tokens)
    ranks = vocab.ranks()
    assert (ranks[euro[:2]], ranks[euro[2:]]) in merges
    assert (ranks[euro[:1]], ranks[euro[1:]]) in merges


def test_token_without_any_split_is_only_taken_whole(tmp_path):
    vocab = _bytes_vocab([b"xyz", b"xyzw", b"wxyz"])
    assert all_split_merges(vocab.tokens) == [(vocab.ranks()[b"xyz"], ord("w")), (ord("w"), vocab.ranks()[b"xyz"])]
    enc = Encoders(export(vocab, tmp_path), with_transformers=False)
    assert enc.check("xyz") == [256]
    assert enc.check("xyzw") == [257]
    assert enc.check("xyzwx") == list(b"xyzwx")  # no pair merges, the whole is no token
    for text in ["wxyzw", "xyzxyz", "wxyz xyz"]:
        enc.check(text)


def test_all_split_merges_order():
    tokens = [bytes([b]) for b in range(256)] + [b"bc", b"ab", b"abc", b"cab", b"abcab"]
    r = {t: i for i, t in enumerate(tokens)}
    a, b, c = ord("a"), ord("b"), ord("c")
    assert all_split_merges(tokens) == [
        (b, c),  # bc
        (a, b),  # ab
        (a, r[b"bc"]), (r[b"ab"], c),  # abc: left rank a < ab
        (c, r[b"ab"]),  # cab
        (r[b"ab"], r[b"cab"]), (r[b"abc"], r[b"ab"]),  # abcab: ab|cab and abc|ab
    ]


# ---------------------------------------------------------------------------------------------
# Special tokens that tiktoken and HF would treat differently are refused up front
# ---------------------------------------------------------------------------------------------


def test_special_token_that_prefixes_another_is_refused(tmp_path):
    # tiktoken matches specials by a regex alternation in hash order (for this pair the shorter
    # wins: [<|endoftext|>, "2"]) while HF matches leftmost-longest ([<|endoftext|>2]).
    with pytest.raises(VocabError, match="prefix"):
        export(_bytes_vocab([], ["<|endoftext|>", "<|endoftext|>2"]), tmp_path)


def test_special_token_with_latin1_character_is_refused(tmp_path):
    # HF's ByteLevel decoder maps U+00A1..U+0143 in a special's text to raw bytes: '<|é|>' would
    # decode to '<|\ufffd|>' although the ids agree.
    with pytest.raises(VocabError, match="U\\+00E9"):
        export(_bytes_vocab([], ["<|é|>"]), tmp_path)


# ---------------------------------------------------------------------------------------------
# Files: format, determinism, atomic writes
# ---------------------------------------------------------------------------------------------


def test_tiktoken_file_is_standard(tmp_path, monkeypatch):
    from tiktoken.load import load_tiktoken_bpe

    v = tiny_vocab()
    path = write_tiktoken(v, tmp_path / TIKTOKEN_FILE)
    lines = path.read_bytes().splitlines()
    assert len(lines) == len(v.tokens)
    assert lines[65] == base64.b64encode(b"A") + b" 65"
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", "")  # no caching of our temp file in /tmp
    assert load_tiktoken_bpe(str(path)) == v.ranks()
    assert read_tiktoken(path) == v.tokens


def test_hf_files_content(tiny_dir):
    doc = json.loads((tiny_dir / HF_FILE).read_text(encoding="utf-8"))
    model = doc["model"]
    assert model["type"] == "BPE" and model["ignore_merges"] is True and model["byte_fallback"] is False
    assert model["vocab"][token_to_bytelevel(b" the")] == tiny_vocab().ranks()[b" the"]
    assert doc["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] == PATTERN
    assert [a["content"] for a in doc["added_tokens"]] == SPECIALS
    config = json.loads((tiny_dir / HF_CONFIG_FILE).read_text(encoding="utf-8"))
    assert config["tokenizer_class"] == "PreTrainedTokenizerFast"
    assert config["clean_up_tokenization_spaces"] is False
    special_map = json.loads((tiny_dir / HF_SPECIAL_MAP_FILE).read_text(encoding="utf-8"))
    assert special_map == {"additional_special_tokens": SPECIALS, "eos_token": "<|endoftext|>"}
    # Our hand-assembled JSON is exactly what tokenizers itself would serialize, but for the
    # merges' form: "left right" strings, which tokenizers writes as ["left", "right"] pairs.
    assert model["merges"] and all(isinstance(m, str) and m.count(" ") == 1 for m in model["merges"])
    model["merges"] = [m.split(" ") for m in model["merges"]]
    assert json.loads(tokenizers.Tokenizer.from_file(str(tiny_dir / HF_FILE)).to_str()) == doc


def test_merges_as_strings_load_as_the_pairs_they_spell(tmp_path):
    """tokenizer.json's merges are "left right" strings (tokenizers loads them ~25% faster than
    ["left", "right"] pairs): tokenizers, transformers and ``toktok convert``'s reader take them
    as the same merges, the same model and the same ids as the pair form."""
    from toktok.warmstart import read_hf_base

    vocab = train_bpe(TRAIN_TEXT + "".join(builtin_texts()), 600)
    vocab = Vocab(vocab.tokens, list(SPECIALS))
    strings = export(vocab, tmp_path / "strings")
    doc = json.loads((strings / HF_FILE).read_text(encoding="utf-8"))
    assert all(isinstance(m, str) and len(m.split(" ")) == 2 for m in doc["model"]["merges"])
    doc["model"]["merges"] = [m.split(" ") for m in doc["model"]["merges"]]
    pairs = export(vocab, tmp_path / "pairs")
    (pairs / HF_FILE).write_text(json.dumps(doc, ensure_ascii=False, indent=2), encoding="utf-8")
    a, b = (tokenizers.Tokenizer.from_file(str(d / HF_FILE)) for d in (strings, pairs))
    assert a.to_str() == b.to_str()  # the same model, merges and their order
    from transformers import PreTrainedTokenizerFast

    tf_a, tf_b = (PreTrainedTokenizerFast.from_pretrained(str(d)) for d in (strings, pairs))
    for text in builtin_texts():
        ids = a.encode(text, add_special_tokens=False).ids
        assert ids == b.encode(text, add_special_tokens=False).ids == tf_a.encode(text, add_special_tokens=False) \
            == tf_b.encode(text, add_special_tokens=False)
    assert read_hf_base(strings / HF_FILE).vocab.tokens == read_hf_base(pairs / HF_FILE).vocab.tokens


def test_bytelevel_mapping_round_trips():
    every = bytes(range(256))
    s = token_to_bytelevel(every)
    assert len(s) == 256 and " " not in s and bytelevel_to_token(s) == every
    assert token_to_bytelevel(b" a\n") == "ĠaĊ"
    with pytest.raises(VocabError):
        bytelevel_to_token("€")


def test_writes_are_deterministic(tmp_path):
    names = [TIKTOKEN_FILE, HF_FILE, HF_CONFIG_FILE, HF_SPECIAL_MAP_FILE]
    a = export(tiny_vocab(), tmp_path / "a")
    b = export(Vocab(list(tiny_vocab().tokens), list(SPECIALS)), tmp_path / "b")
    export(tiny_vocab(), a)  # overwrite in place
    for name in names:
        assert (a / name).read_bytes() == (b / name).read_bytes(), name
        assert (a / name).read_bytes().endswith(b"\n")
    assert sorted(p.name for p in a.iterdir()) == sorted(names)  # no temporary files left behind


def test_write_refuses_invalid_vocab(tmp_path):
    with pytest.raises(VocabError):
        write_hf(_bytes_vocab([b"ab", b"ab"]), tmp_path)
    with pytest.raises(VocabError):
        write_tiktoken(Vocab([b"a", b"b"]), tmp_path / TIKTOKEN_FILE)
    assert list(tmp_path.iterdir()) == []


def test_write_to_unwritable_place_raises_output_error(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(OutputError):
        write_hf(Vocab.base(), blocker)
    with pytest.raises(OutputError):
        write_tiktoken(Vocab.base(), blocker / TIKTOKEN_FILE)


def test_large_vocabulary_exports(tmp_path):
    # 100k tokens of up to 16 bytes, built like BPE (token + short token) from letters and space;
    # must export in about a second.
    tokens = grown(100_000 - 256, b"abcdefghijklmnopqrstuvwxyz ", longest=16)
    rng = random.Random(2)
    vocab = Vocab(tokens, ["<|endoftext|>"])
    enc = Encoders(export(vocab, tmp_path), with_transformers=False)
    texts = ["".join(rng.choice("abcdefghijklmnopqrstuvwxyz  ") for _ in range(200)) for _ in range(100)]
    assert enc.enc.encode_ordinary_batch(texts) == [e.ids for e in enc.hf.encode_batch(texts, add_special_tokens=False)]
    enc.check(texts[0] + "<|endoftext|>" + texts[1])


# ---------------------------------------------------------------------------------------------
# Reading back
# ---------------------------------------------------------------------------------------------


def _b64(t: bytes) -> str:
    return base64.b64encode(t).decode()


def _tiktoken_file(tmp_path: Path, lines: list[str]) -> Path:
    p = tmp_path / "v.tiktoken"
    p.write_text("".join(line + "\n" for line in lines))
    return p


def test_read_tiktoken_ranks_of_a_file_written_here_are_its_vocabulary_unless_it_changed(tmp_path):
    # the run's verification passes what the export wrote (formats.tiktoken.read_tiktoken_ranks(
    # written=...)): the file is compared, not parsed, while it holds exactly that text
    from toktok.formats.tiktoken import read_tiktoken_ranks, tiktoken_text

    vocab = Vocab(list(Vocab.base(hardcoded=False).tokens) + [b"ab", b"abc"], [])
    pinned = Vocab(list(vocab.tokens) + [b"<|x|>", b"abcd"], [], {258: "<|x|>"})  # a rank gap at 258
    for v in (pinned, vocab):
        text = tiktoken_text(v)
        p = tmp_path / "t.tiktoken"
        p.write_bytes(text)
        assert read_tiktoken_ranks(p, (text, v)) == read_tiktoken_ranks(p)
    changed = text.replace(b"YWI= 256", b"YWI= 259")  # the file edited after the export
    p.write_bytes(changed)
    ranks = read_tiktoken_ranks(p, (text, vocab))[0]
    assert ranks == read_tiktoken_ranks(p)[0] and ranks[259] == b"ab" and 256 not in ranks


def test_read_tiktoken_accepts_any_line_order_and_blank_lines(tmp_path):
    p = _tiktoken_file(tmp_path, [f"{_b64(b'b')} 1", "", f"{_b64(b'c')} 2", f"{_b64(b'a')} 0", ""])
    assert read_tiktoken(p) == [b"a", b"b", b"c"]


@pytest.mark.parametrize(
    "lines, line_no, words",
    [
        (["YQ== 0", "not*base64 1"], 2, "not valid base64"),
        (["YQ== 0", "Yg=="], 2, "expected 'base64 rank'"),
        (["YQ== 0", "Yg== 1 extra"], 2, "expected 'base64 rank'"),
        (["YQ== 0", "Yg== -1"], 2, "not a non-negative integer"),
        (["YQ== 0", "Yg== x"], 2, "not a non-negative integer"),
        (["YQ== 0", "Yg== 1", "Yw== 3"], 3, "rank 2 is missing"),
        (["Yg== 1", "Yw== 2"], 1, "rank 0 is missing"),
        (["YQ== 0", "Yg== 1", "Yw== 1"], 3, "rank 1 already given on line 2"),
        (["YQ== 0", "Yg== 1", "YQ== 2"], 3, "already given on line 1"),
        (["YQ== 0", " 1"], 2, "expected 'base64 rank'"),
        (["YQ== 0", "= 1"], 2, "not valid base64"),
    ],
)
def test_read_tiktoken_errors_name_file_and_line(tmp_path, lines, line_no, words):
    p = _tiktoken_file(tmp_path, lines)
    with pytest.raises(VocabError) as e:
        read_tiktoken(p)
    msg = str(e.value)
    assert f"{p}:{line_no}:" in msg and words in msg and "\n" not in msg


def test_read_tiktoken_empty_or_missing(tmp_path):
    with pytest.raises(VocabError, match="no tokens"):
        read_tiktoken(_tiktoken_file(tmp_path, []))
    with pytest.raises(VocabError, match="cannot read"):
        read_tiktoken(tmp_path / "absent.tiktoken")


def test_load_encoding_from_folder_and_file(tiny_dir, tmp_path):
    n = len(tiny_vocab().tokens)
    enc = load_encoding(tiny_dir)
    assert isinstance(enc, tiktoken.Encoding)
    assert enc.n_vocab == n + len(SPECIALS)
    assert enc.encode("<|fim_prefix|>", allowed_special="all") == [n + 1]
    # A bare .tiktoken file elsewhere: no tokenizer.json beside it, so no specials.
    lone = tmp_path / "mine.tiktoken"
    lone.write_bytes((tiny_dir / TIKTOKEN_FILE).read_bytes())
    enc2 = load_encoding(lone)
    assert enc2.name == "mine" and enc2.special_tokens_set == set()
    assert enc2.encode(TRAIN_TEXT) == enc.encode(TRAIN_TEXT)
    # Explicit specials win.
    enc3 = load_encoding(lone, special_tokens={"<|x|>": n})
    assert enc3.encode("<|x|>", allowed_special="all") == [n]
    with pytest.raises(VocabError, match="inside the"):
        load_encoding(lone, special_tokens={"<|x|>": 5})


def test_load_hf_from_folder_file_and_errors(tiny_dir, tmp_path):
    assert load_hf(tiny_dir).get_vocab_size() == load_hf(tiny_dir / HF_FILE).get_vocab_size()
    with pytest.raises(VocabError, match="no such file"):
        load_hf(tmp_path)
    bad = tmp_path / HF_FILE
    bad.write_text("{not json")
    with pytest.raises(VocabError, match="cannot load"):
        load_hf(bad)


def test_special_tokens_with_json_hazards(tmp_path):
    # Quotes, backslashes, control characters and our own placeholder text must survive.
    specials = ['<|"q"|>', "<|\\|>", "<|\t|>", '"@VOCAB@"', "@MERGES@"]
    folder = export(_bytes_vocab([b"ab", b"abc"], specials), tmp_path)
    enc = Encoders(folder, with_transformers=False)
    for s in specials:
        assert enc.check(f"ab{s}abc")[1] == 256 + 2 + specials.index(s)
    assert len(json.loads((folder / HF_FILE).read_text(encoding="utf-8"))["model"]["merges"]) == 2


# ---------------------------------------------------------------------------------------------
# Long tokens: a run of one character grows tokens of 2^k bytes
# ---------------------------------------------------------------------------------------------


def _every_split_point(tokens: list[bytes]) -> list[tuple[int, int]]:
    """The definition: every split point of every token, both halves tokens; ordered by (token,
    left, right) rank."""
    get = {t: i for i, t in enumerate(tokens)}.get
    out = []
    for tok in tokens:
        out += sorted((get(tok[:k]), get(tok[k:])) for k in range(1, len(tok))
                      if get(tok[:k]) is not None and get(tok[k:]) is not None)
    return out


def _long_path(tokens: list[bytes], skip=None) -> list[tuple[int, int]]:
    """all_split_merges with every token through the path of long tokens."""
    return all_split_merges(tokens, skip, up_to=0, plain_budget=0)


def _compiled_splits(tokens: list[bytes], skip=None) -> list[tuple[int, int]]:
    """all_split_merges with the short tokens split by the kernel, whatever the vocabulary's size
    (a small one is split in Python)."""
    import toktok.formats.splits as splits

    small, splits.SMALL_TOKENS = splits.SMALL_TOKENS, 0
    try:
        return all_split_merges(tokens, skip)
    finally:
        splits.SMALL_TOKENS = small


_RUNS = st.lists(st.tuples(st.sampled_from([b"a", b"-", b"ab", b"a-", b"=", b"\xc3\xa9", b"\xff"]), st.integers(1, 150))
                 .map(lambda t: t[0] * t[1]), max_size=40)


@given(runs=_RUNS, extra=st.lists(st.binary(min_size=2, max_size=12), max_size=30))
def test_fuzz_splits_of_long_tokens_are_every_split_point(runs, extra):
    """The long-token path (lengths that fit, fingerprints, startswith/endswith) finds exactly
    the splits of trying every split point, in the same order; so does the mixed default."""
    tokens = [bytes([b]) for b in range(256)]
    for t in runs + extra:
        if t not in tokens:
            tokens.append(t)
    want = _every_split_point(tokens)
    assert _long_path(tokens) == want
    assert all_split_merges(tokens) == want
    assert _compiled_splits(tokens) == want


def test_splits_of_long_tokens_on_a_trained_vocabulary_and_with_pinned_ids():
    import polars as pl

    from toktok.merge import learn_merges
    from toktok.count.scan import count_words

    texts = pl.Series([TRAIN_TEXT * 3, "=" * 5000 + "\n" + "-" * 3000 + " " + "a" * 4100, "ab" * 700])
    table = count_words(texts).sort("word")
    res = learn_merges(table["word"].to_arrow(), table["count"].to_numpy(), Vocab.base(), 10**6)
    tokens = res.vocab.tokens
    assert max(map(len, tokens)) >= 4096 and sum(len(t) > 64 for t in tokens) >= 20
    assert all_split_merges(tokens) == _long_path(tokens) == _every_split_point(tokens) == _compiled_splits(tokens)
    # a pinned id (a warm start's special) is neither split nor a part, on both paths
    pinned = {tokens.index(b"a" * 2048): "<|x|>", tokens.index(b"=" * 64): "<|y|>"}
    got = all_split_merges(tokens, pinned)
    assert got == _long_path(tokens, pinned) == _compiled_splits(tokens, pinned)
    assert all(a not in pinned and b not in pinned for a, b in got)
    assert got == [m for m in _every_split_point(tokens) if m[0] not in pinned and m[1] not in pinned
                   and tokens.index(tokens[m[0]] + tokens[m[1]]) not in pinned]


@pytest.fixture(scope="module")
def long_run_encoders(tmp_path_factory) -> Encoders:
    """A vocabulary trained by toktok on text with long runs ('a' x 70,000, '-', '=', spaces, a
    base64 blob), exported and loaded by tiktoken, tokenizers and transformers."""
    import polars as pl

    from toktok.merge import learn_merges
    from toktok.count.scan import count_words

    blob = base64.b64encode(random.Random(3).randbytes(30_000)).decode()
    texts = pl.Series([TRAIN_TEXT, "a" * 70_000, "x" + "-" * 40_000 + "\n", "=" * 33_333, "b" + " " * 20_000 + "c",
                       blob, TRAIN_TEXT + "=" * 100 + "\n" + "-" * 77 + "\n"])
    table = count_words(texts, specials=SPECIALS).sort("word")
    res = learn_merges(table["word"].to_arrow(), table["count"].to_numpy(), Vocab.base(), 10**6)
    assert res.new_tokens < 10**6  # every merge the corpus allows: the runs end as one token each
    tokens = res.vocab.tokens
    for run in (b"a" * 70_000, b"a" * 32768, b"-" * 40_000 + b"\n", b"-" * 16384, b" " * 19_999, b"=" * 33_333):
        assert run in tokens
    return Encoders(export(Vocab(tokens, list(SPECIALS)), tmp_path_factory.mktemp("long_runs")))


@pytest.mark.parametrize("ch", ["a", "-", "=", " "])
def test_long_runs_have_parity_in_tokenizers_and_transformers(long_run_encoders, ch):
    """Runs of every length around the tokens' (2^k +- 1), and up to and past the longest token,
    alone and inside text: tiktoken, tokenizers and transformers give the same ids."""
    lengths = sorted({*range(1, 40), *(2 ** k + d for k in range(5, 17) for d in (-1, 0, 1)), 70_000, 70_001})
    for n in lengths:
        run = ch * n
        ids = long_run_encoders.check(run)
        assert len(ids) <= 2 * n.bit_length() + 2  # taken in long tokens, not byte by byte
        long_run_encoders.check(f"x{run}y")
    long_run_encoders.check(f"The {ch * 5000} end. {ch * 1234}\n{ch * 77}")


def test_base64_blob_has_parity(long_run_encoders):
    blob = base64.b64encode(random.Random(3).randbytes(30_000)).decode()
    long_run_encoders.check(blob)
    long_run_encoders.check(base64.b64encode(random.Random(4).randbytes(5000)).decode())


@settings(max_examples=200 * FUZZ, deadline=None)
@given(pool=st.binary(max_size=40), data=st.data(),
       consts=st.lists(st.binary(max_size=3), min_size=1, max_size=3), sep=st.binary(max_size=2))
def test_lines_spells_the_same_bytes_as_joining_them(pool, data, consts, sep):
    """tokenizer.json's vocab and merge lines (formats.spell.lines, compiled, and the Python
    join a few lines take) == joining each line's pieces in Python: empty slices, empty
    constants, a column used twice and no lines."""
    import numpy as np

    from toktok.formats.spell import _spelled, lines

    k = data.draw(st.integers(1, 5))  # slices in the table
    at = [data.draw(st.integers(0, len(pool))) for _ in range(k)]
    size = [data.draw(st.integers(0, len(pool) - a)) for a in at]
    cols = data.draw(st.integers(1, 2))
    rows = np.array(data.draw(st.lists(st.lists(st.integers(0, k - 1), min_size=cols, max_size=cols), max_size=6)),
                    np.int64).reshape(-1, cols)
    columns = [data.draw(st.integers(0, cols - 1)) for _ in consts]
    fields = [f for pair in itertools.zip_longest(consts, columns) for f in pair if f is not None]
    want = sep.join(b"".join(f if isinstance(f, bytes) else pool[at[r[f]]: at[r[f]] + size[r[f]]] for f in fields)
                    for r in rows.tolist())
    assert lines(pool, np.array(at), np.array(size), rows, fields, sep) == want
    assert _spelled(pool, np.array(at), np.array(size), rows, fields, sep) == want


@settings(max_examples=200 * FUZZ, deadline=None)
@given(tokens=st.lists(st.binary(min_size=1, max_size=12), unique=True, max_size=30), data=st.data())
def test_tiktoken_lines_are_base64_and_rank_and_read_back(tokens, data, tmp_path_factory):
    """The .tiktoken's lines (formats.spell.ranked_lines, compiled, and the Python lines a small
    vocabulary takes) == base64 and rank per token, the skipped ids left out; read back, they
    give the tokens at their ranks."""
    from toktok.formats.spell import _ranked_spelled, ranked_lines
    from toktok.formats.tiktoken import read_tiktoken_ranks

    skip = {i: "s" for i in data.draw(st.sets(st.integers(0, max(0, len(tokens) - 1)), max_size=3)) if i < len(tokens)}
    want = b"".join(base64.b64encode(t) + b" %d\n" % i for i, t in enumerate(tokens) if i not in skip)
    assert ranked_lines(tokens, skip) == _ranked_spelled(tokens, skip) == want
    if len(skip) < len(tokens):
        p = tmp_path_factory.mktemp("tt") / "t.tiktoken"
        p.write_bytes(want)
        assert read_tiktoken_ranks(p)[0] == {i: t for i, t in enumerate(tokens) if i not in skip}


@settings(max_examples=200 * FUZZ, deadline=None)
@given(tokens=st.lists(st.binary(max_size=12), max_size=30))
def test_quoted_names_are_json_quoting_each_bytelevel_name(tokens):
    """tokenizer.json's names spelled for all tokens at once (formats.hf._quoted_names) == json's
    quoting of each token's ByteLevel name, in UTF-8: escapes ('"', '\\\\') and empty tokens included."""
    import json

    from toktok.formats.hf import _quoted_names

    want = [json.dumps(token_to_bytelevel(t), ensure_ascii=False).encode("utf-8") for t in tokens]
    pool, lengths = _quoted_names(tokens)
    assert pool == b"".join(want) and lengths.tolist() == [len(w) for w in want]


@pytest.mark.parametrize("n", [0, 1, 9, 10, 11, 99, 100, 1001, 65_536, 131_073])
def test_the_ids_of_tokenizer_json_are_spelled_as_python_spells_them(n):
    """tokenizer.json's ids come from ``_decimals`` (a column of digits at a time): the bytes of
    ``b"%d" % i`` back to back, and each one's length."""
    from toktok.formats.hf import _decimals

    text, lengths = _decimals(n)
    want = [b"%d" % i for i in range(n)]
    assert text == b"".join(want) and lengths.tolist() == [len(w) for w in want]
