"""Build the small warm-start bases in ``data_fixtures/base/`` (used by ``examples/`` and the quick start).

* ``hf_bpe/tokenizer.json`` -- Hugging Face ``BpeTrainer`` (byte-level: ByteLevel pre-tokenizer and
  decoder, the 256-character byte alphabet) on ``notes.txt``, 700 ids: the special tokens
  ``<|endoftext|>`` and ``<|pad|>`` at ids 0 and 1 (where BpeTrainer puts them), the bytes at
  2..257 in GPT-2's order, 442 merges.
* ``gpt2_layout.tiktoken`` + ``gpt2_layout.special_tokens.json`` -- GPT-2's layout in small: the
  bytes at ranks 0..255 in GPT-2's order (not byte value), 300 merges of the same trainer on the
  same text, and ``<|endoftext|>`` right after the last rank (id 556), as GPT-2 has it at 50256.

Deterministic. Run from the project root: ``.venv/bin/python data_fixtures/make_bases.py``.
"""
from __future__ import annotations

import json
from pathlib import Path

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

OUT = Path(__file__).resolve().parent / "base"
TEXT = (Path(__file__).resolve().parent / "notes.txt").read_text(encoding="utf-8")


def bpe(vocab_size: int, specials: list[str]) -> Tokenizer:
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=specials, show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator(TEXT.splitlines(keepends=True), trainer)
    return tok


def main() -> None:
    (OUT / "hf_bpe").mkdir(parents=True, exist_ok=True)
    bpe(700, ["<|endoftext|>", "<|pad|>"]).save(str(OUT / "hf_bpe" / "tokenizer.json"))

    from toktok.warmstart import read_hf_base
    from toktok.export import write_tiktoken

    tmp = OUT / ".gpt2_layout.json"
    bpe(556, []).save(str(tmp))
    vocab = read_hf_base(tmp).vocab
    tmp.unlink()
    write_tiktoken(vocab, OUT / "gpt2_layout.tiktoken")
    (OUT / "gpt2_layout.special_tokens.json").write_text(json.dumps({"<|endoftext|>": len(vocab.tokens)}, indent=1) + "\n")


if __name__ == "__main__":
    main()
