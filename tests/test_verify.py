"""verify(): passes on a good folder, and names the first string on every kind of disagreement."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from toktok.errors import InputError, ParityError, VocabError
from toktok.formats.common import HF_FILE, TIKTOKEN_FILE
from toktok.formats.tiktoken import write_tiktoken
from toktok.verify import DEFAULT_TEXTS, MAX_SLICE, VerifyReport, random_slices, special_texts, verify
from toktok.vocab import Vocab

try:  # the tiny BPE trainer and exporter live beside these tests (pytest puts tests/ on sys.path)
    from test_export import SPECIALS, TRAIN_TEXT, _bytes_vocab, export, tiny_vocab
except ImportError:  # tests/ made a package later
    from tests.test_export import SPECIALS, TRAIN_TEXT, _bytes_vocab, export, tiny_vocab


@pytest.fixture(scope="module")
def good_dir(tmp_path_factory) -> Path:
    return export(tiny_vocab(), tmp_path_factory.mktemp("good"))


def _copy(src: Path, dst: Path) -> Path:
    dst.mkdir(parents=True, exist_ok=True)
    for p in src.iterdir():
        (dst / p.name).write_bytes(p.read_bytes())
    return dst


def _edit_tokenizer_json(folder: Path, edit) -> None:
    path = folder / HF_FILE
    doc = json.loads(path.read_text(encoding="utf-8"))
    edit(doc)
    path.write_text(json.dumps(doc, ensure_ascii=False), encoding="utf-8")


def test_default_texts_pass(good_dir):
    report = verify(good_dir)
    assert isinstance(report, VerifyReport) and report.ok
    assert report.strings == len(DEFAULT_TEXTS) + len(special_texts(SPECIALS))
    assert report.tokens > 500


def test_default_texts_cover_the_brief():
    joined = "".join(DEFAULT_TEXTS)
    for needle in ["\r\n", "\n\n\n", "\t", "1234567", "3.14159", "DON'T", "we'll", "I'M", "\u00a0",
                   "\u200b", "\u200d", "\u0301", "🇫🇷", "П", "Γ", "ع", "ש", "न", "ก", "中", "한"]:
        assert needle in joined, needle
    assert "a<|endoftext|>b" in special_texts(["<|endoftext|>"])


def test_given_texts_and_slices(good_dir):
    texts = (t for t in [TRAIN_TEXT, "hello world", ""])  # any iterable, empty string included
    builtin = verify(good_dir, []).strings  # the built-in set always runs
    assert builtin >= len(DEFAULT_TEXTS)
    report = verify(good_dir, texts, slices=200, seed=3)
    assert report.strings == builtin + 3 + 200


def test_random_slices_are_seeded_substrings():
    texts = [TRAIN_TEXT, "short", ""]
    a = random_slices(texts, 100, seed=1)
    assert a == random_slices(texts, 100, seed=1)
    assert a != random_slices(texts, 100, seed=2)
    assert all(0 < len(s) <= MAX_SLICE and (s in TRAIN_TEXT or s in "short") for s in a)
    assert random_slices([""], 5) == [] and random_slices(texts, 0) == []


def test_id_difference_names_the_string(good_dir, tmp_path):
    # Without merges HF falls back to bytes for every pre-token not in the vocab as a whole.
    bad = _copy(good_dir, tmp_path / "bad")
    _edit_tokenizer_json(bad, lambda d: d["model"].update(merges=[]))
    with pytest.raises(ParityError) as e:
        verify(bad, ["x", "x" + "the quick brown fox jumps over the lazy dog. " * 5])
    msg = str(e.value)
    assert "ids differ on '" in msg and "position" in msg and "tiktoken" in msg
    assert "..." in msg and len(msg) < 400 and "\n" not in msg


def test_vocabulary_mismatch_is_reported(good_dir, tmp_path):
    bad = _copy(good_dir, tmp_path / "swap")

    def swap(doc):
        v = doc["model"]["vocab"]
        a, b = "a", "b"
        v[a], v[b] = v[b], v[a]

    _edit_tokenizer_json(bad, swap)
    with pytest.raises(ParityError, match="id 9[78] is"):
        verify(bad, ["ab"])

    bad2 = _copy(good_dir, tmp_path / "short")
    n = len(tiny_vocab().tokens)
    write_tiktoken(Vocab(tiny_vocab().tokens[:-1]), bad2 / TIKTOKEN_FILE)
    with pytest.raises(ParityError, match=f"has {n - 1} ranks but tokenizer.json has {n} vocab entries"):
        verify(bad2, ["ab"])


def test_decode_failure_is_reported(good_dir, tmp_path):
    # Without the ByteLevel decoder HF returns the byte-level alphabet ("Ġ" for a space).
    bad = _copy(good_dir, tmp_path / "nodecoder")
    _edit_tokenizer_json(bad, lambda d: d.update(decoder=None))
    with pytest.raises(ParityError, match="HF decode does not round-trip"):
        verify(bad, ["a b"])


def test_lone_surrogate_is_an_input_error(good_dir):
    with pytest.raises(InputError, match=r"text \d+ .*lone surrogate"):
        verify(good_dir, ["ok", "bad \ud800 text"])


def test_missing_folder_is_a_vocab_error(tmp_path):
    with pytest.raises(VocabError):
        verify(tmp_path / "absent")
