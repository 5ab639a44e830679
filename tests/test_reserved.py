"""Many special tokens cost linear time: the prefix check over them (a sort), the parity check's
texts (a bounded sample, and every one of them in a few long texts) and tiktoken's encoding of
those texts (each text with the special tokens it holds allowed, not all of them); the most ids
``--vocab-size`` and ``--pad-to-multiple-of`` take (``options.MOST_IDS``)."""
from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
from conftest import FIXTURES
from typer.testing import CliRunner

import toktok
from toktok.cli import app
from toktok.errors import VocabError
from toktok.formats.hf import load_hf
from toktok.options import MOST_IDS
from toktok.start import RESERVED
from toktok.verify import SPECIAL_TEXTS_EACH, encode_all, special_texts
from toktok.vocab import Vocab

runner = CliRunner()


def test_the_prefix_check_is_a_sort_and_still_names_the_pair():
    base = Vocab.base(hardcoded=False)
    many = [RESERVED.format(i) for i in range(200_000)]
    Vocab(base.tokens, many).check()  # all pairs would be 4e10 comparisons: this returns at once
    with pytest.raises(VocabError, match=r"'<\|a' is a prefix of '<\|ab\|>'"):
        Vocab(base.tokens, ["<|z|>", *many[:1000], "<|ab|>", "<|a"]).check()
    with pytest.raises(VocabError, match=r"'<\|x\|>' is a prefix of '<\|x\|>y'"):  # not adjacent in the list
        Vocab(base.tokens, ["<|x|>", "<|m|>", "<|x|>y"]).check()


def test_the_parity_texts_are_bounded_and_hold_every_special_token():
    specials = [RESERVED.format(i) for i in range(131_072)] + ["<|endoftext|>"]
    texts = special_texts(specials)
    assert len(texts) <= 6 * SPECIAL_TEXTS_EACH + 64  # one per token would be 786,438 texts
    held = "".join(texts)
    assert all(s in held for s in specials)
    assert special_texts(["<|b|>", "<|a|>"])[:2] == ["a<|a|>b", "<|a|>"]  # few: each its own texts, as before


def test_encode_all_equals_tiktokens_allowed_all():
    enc = toktok.load_encoding(_small_run())
    texts = ["plain text", "a<|endoftext|>b<|pad|>", "<|pad|><|pad|>x", "", "<|endoftext", "x<|endoftext|>"]
    assert encode_all(enc, texts) == enc.encode_batch(texts, allowed_special="all")


_RUN = {}


def _small_run():
    if "out" not in _RUN:
        import tempfile

        out = tempfile.mkdtemp(prefix="toktok-reserved-") + "/tok"
        toktok.train([str(FIXTURES / "notes.txt")], out=out, merges=20, special_tokens=["<|endoftext|>", "<|pad|>"],
                     progress="none")
        _RUN["out"] = out
    return _RUN["out"]


def _train_in_a_process(tmp_path, args: str, seconds: int) -> subprocess.CompletedProcess:
    """A run in a process of its own, stopped after ``seconds`` (a hang detector, not a timing:
    the quadratic code took minutes where this takes a few seconds)."""
    code = textwrap.dedent(f"""
        import toktok
        r = toktok.train([{str(tmp_path / 'c.txt')!r}], out={str(tmp_path / 'out')!r}, progress="none", {args})
        print(r.vocab_size if hasattr(r, "vocab_size") else "")
    """)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=seconds)


def test_pad_to_a_multiple_of_10000_is_linear(tmp_path):
    (tmp_path / "c.txt").write_text("hello world, hello there. the cat sat on the mat; 12 cats.\n" * 30)
    r = _train_in_a_process(tmp_path, "merges=20, pad_to_multiple_of=10000", 240)
    assert r.returncode == 0, r.stderr[-2000:]
    hf = load_hf(tmp_path / "out")
    enc = toktok.load_encoding(tmp_path / "out")
    assert enc.n_vocab == 10000 == hf.get_vocab_size(with_added_tokens=True)
    s = RESERVED.format(7000) + " hi " + RESERVED.format(0)
    assert enc.encode(s, allowed_special="all") == hf.encode(s, add_special_tokens=False).ids


@pytest.mark.slow
def test_vocab_size_131072_on_a_small_corpus(tmp_path):
    (tmp_path / "c.txt").write_text((FIXTURES / "notes.txt").read_text()[:34_000])
    r = _train_in_a_process(tmp_path, "vocab_size=131072", 600)
    assert r.returncode == 0, r.stderr[-2000:]
    assert load_hf(tmp_path / "out").get_vocab_size(with_added_tokens=True) == 131072


def test_the_most_ids_is_what_fits(tmp_path):
    """The maximum is 262,144 (2**18): 1,048,576 reserved tokens peaked at 12 GB."""
    assert MOST_IDS == 1 << 18
    src = tmp_path / "c.txt"
    src.write_text("hello world\n")
    r = runner.invoke(app, ["train", str(src), "--out", str(tmp_path / "o"), "--vocab-size", str(MOST_IDS + 1), "-q"])
    assert r.exit_code == 2 and "262,144" in r.output and "Traceback" not in r.output, r.output
    assert not (tmp_path / "o").exists()
