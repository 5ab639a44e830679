"""tokenizer.json built ahead, beside the last merge loop (toktok.formats.ahead): byte for byte the
file the export writes after the loop, whatever batches the tokens come in; a failure, another
vocabulary or a dead HF process leave the export (and the check) to do it as without it."""
from __future__ import annotations

import json
import random

import numpy as np
import pytest
from conftest import FIXTURES
from vocabs import grown

from toktok.formats.ahead import Ahead
from toktok.formats.common import HF_FILE
from toktok.formats.hf import hf_tokenizer_json
from toktok.patterns import DEFAULT, check
from toktok.verify import open_hf
from toktok.vocab import Vocab


def _grown(n: int, seed: int = 1) -> list[bytes]:
    """``n`` tokens after the 256 bytes, built like BPE (``vocabs.grown``), of text with quotes,
    backslashes, newlines and a two-byte letter: what JSON and the byte-level spelling escape."""
    return grown(n, b"abcdefgh \n\"\\\xc3\xa9", longest=24, seed=seed)


def _batches(items: list, rng: random.Random) -> list[list]:
    cuts = sorted(rng.sample(range(len(items) + 1), min(len(items) + 1, rng.randint(1, 12))))
    return [items[a:b] for a, b in zip([0, *cuts], [*cuts, len(items)])]


def _reserve(extra: int):
    return lambda v: Vocab(v.tokens, v.specials + [f"<|reserved_{i}|>" for i in range(extra)], v.pinned)


@pytest.mark.parametrize("n, seed", [(300, 0), (12_000, 1), (20_000, 2)])
@pytest.mark.parametrize("pinned", [False, True])
def test_tokenizer_json_built_ahead_is_the_one_the_export_writes(tmp_path, n, seed, pinned):
    """Tokens fed in random batches (empty ones too), the last one said or not: the file is
    ``hf_tokenizer_json`` of the final vocabulary (reserved specials added, a warm start's pinned
    ids kept), and HF's half loads it."""
    rng = random.Random(seed)
    tokens = _grown(n, seed)
    start_n = 256 + n // 3
    pins = {3: "<|a|>", start_n - 2: "<|b|>"} if pinned else {}
    for i, s in pins.items():
        tokens[i] = s.encode()
    start = Vocab(tokens[:start_n], ["<|endoftext|>"], pins)
    pattern = check("o200k")
    added = {"<|endoftext|>": {"lstrip": True}}
    for say_last in (True, False):
        path = tmp_path / f"{say_last}" / HF_FILE
        path.parent.mkdir()
        hf = open_hf(path, process=False)
        ahead = Ahead(path, start, hf=hf, pattern=pattern, added=added, final=_reserve(5))
        batches = _batches(tokens[start_n:], rng)
        for i, b in enumerate(batches):
            ahead.add(b, last=say_last and i == len(batches) - 1)
        final = _reserve(5)(Vocab(tokens, ["<|endoftext|>"], pins))
        assert (ahead.written is not None) == say_last
        assert ahead.wrote(final) and not ahead.failed
        ahead.synced()
        assert path.read_bytes() == hf_tokenizer_json(final, pattern, added=added)
        assert hf.vocab_size() == len(tokens) and hf.specials()["<|reserved_4|>"] == len(tokens) + 5
        hf.close()


def test_another_vocabulary_or_a_failure_leaves_the_file_to_the_export(tmp_path):
    tokens = _grown(400)
    start = Vocab(tokens[:300], [])
    hf = open_hf(tmp_path / HF_FILE, process=False)
    # the export's vocabulary is not the one built: False, and HF's half was told to load another
    ahead = Ahead(tmp_path / HF_FILE, start, hf=hf)
    ahead.add(tokens[300:], last=True)
    assert ahead.loading and not ahead.wrote(Vocab(tokens[:-1], []))
    assert not ahead.wrote(Vocab(tokens, ["<|x|>"]))
    # a step that fails: nothing written, the export does it all
    (tmp_path / "f").mkdir()

    def broken(v):
        raise RuntimeError("no")

    ahead = Ahead(tmp_path / "f" / HF_FILE, start, hf=hf, final=broken)
    ahead.add(tokens[300:], last=True)
    assert ahead.failed and not ahead.loading and not ahead.wrote(Vocab(tokens, []))
    assert not (tmp_path / "f" / HF_FILE).exists()
    # a folder that cannot be written
    ahead = Ahead(tmp_path / "missing" / HF_FILE, start, hf=hf)
    ahead.add(tokens[300:])
    assert not ahead.wrote(Vocab(tokens, [])) and ahead.failed and not ahead.loading
    hf.close()


def test_learned_says_every_merge_of_a_loop_in_a_thread_once(tmp_path):
    """``learn_merges``' ``learned`` gets the loop's records as it publishes them, then the
    rest with ``last`` True, once: they concatenate to the result's."""
    import polars as pl

    from toktok.count.scan import count_words
    from toktok.merge import learn_merges

    table = count_words(pl.read_parquet(FIXTURES / "sample.parquet")["text"]).sort("word")
    calls = []
    res = learn_merges(table["word"].to_arrow(), table["count"].to_numpy(), Vocab.base(), 3000,
                       learned=lambda *got: calls.append((*(x.copy() for x in got[:4]), got[4])))
    assert [c[4] for c in calls].count(True) == 1 and calls[-1][4]
    for k, got in enumerate((res.left, res.right, res.token, res.reused)):
        assert np.array_equal(np.concatenate([c[k] for c in calls]), got)


def test_a_run_loads_the_tokenizer_json_built_beside_its_loop_even_without_hfs_process(tmp_path, monkeypatch):
    """A run large enough for HF's second process builds tokenizer.json beside its last merge
    loop: the file it publishes is the export's of its vocabulary (special tokens, padding to a
    multiple), byte for byte; when that process is gone before it is told to load the file, the
    check loads it in this process and the run still publishes a verified tokenizer."""
    import duckdb

    import toktok.formats.ahead
    import toktok.verify
    from toktok.config import TrainConfig
    from toktok.formats.tiktoken import read_tiktoken_ranks
    from toktok.pipeline import train
    from toktok.rundir import RUN_FILE
    from toktok.verify import verify
    from toktok.verify.hf_side import PROCESS_FROM_TOKENS

    writes, starting = [], toktok.verify.start
    real_write = toktok.formats.ahead.Ahead._write
    monkeypatch.setattr(toktok.formats.ahead.Ahead, "_write", lambda self, v: (writes.append(len(v.tokens)),
                                                                               real_write(self, v))[1])
    specials = ["<|endoftext|>", "<|pad|>"]
    for dead in (False, True):
        if dead:  # the second process ends before the file is written
            def start(*a, **k):
                hf = starting(*a, **k)
                hf.spawn()  # (started at once here, not once the loop has begun)
                hf._proc.kill()
                hf._proc.wait()
                return hf

            monkeypatch.setattr(toktok.verify, "start", start)
        out = tmp_path / f"dead{dead}"
        s = train(TrainConfig(sources=[str(FIXTURES)], out=str(out), merges=PROCESS_FROM_TOKENS - 256 - 1161 + 50,
                              special_tokens=specials, pad_to_multiple_of=128, verify_slices=20, verbose=False))
        assert verify(out).ok and s.vocab_size % 128 == 0
        ranks = read_tiktoken_ranks(out / "tokenizer.tiktoken")[0]
        tokens = [ranks[i] for i in range(len(ranks))]
        doc = json.loads((out / HF_FILE).read_bytes())
        names = [a["content"] for a in doc["added_tokens"]]
        assert names[:2] == specials and len(tokens) + len(names) == s.vocab_size
        assert (out / HF_FILE).read_bytes() == hf_tokenizer_json(Vocab(tokens, names), DEFAULT)
        assert writes == [len(tokens)]
        writes.clear()
        with duckdb.connect(str(out / RUN_FILE), read_only=True) as con:
            parity = json.loads(con.execute("select value from meta where key = 'parity'").fetchall()[0][0])
        assert parity["ok"] and parity["hf_tokenizers"] == ("this process" if dead else "second process")
