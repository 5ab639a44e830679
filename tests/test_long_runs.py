"""Long runs of one character (rules of '=' or '-', whitespace, a letter repeated) and base64 blobs,
as scraped text holds them: training stays fast and exact, and the tokenizer keeps its parity.

A 1 MB run is one pre-token; its merges grow tokens of 2^k bytes. Each run here goes through the
real CLI (count, merge, export, verify, insight), then tiktoken, tokenizers and transformers load
the output and must give the same ids on the run and on runs of other lengths. Seconds are measured
in ``bench/probes/long_runs.py``, not here.
"""
from __future__ import annotations

import base64
import random
from pathlib import Path

import duckdb
import pytest
from conftest import FIXTURES
from typer.testing import CliRunner

import toktok
from toktok.cli import app
from toktok.formats.hf import load_hf

MB = 1 << 20
runner = CliRunner()


def blob(n: int, seed: int = 1) -> str:
    """``n`` characters of base64 of random bytes."""
    return base64.b64encode(random.Random(seed).randbytes(n * 3 // 4 + 3)).decode()[:n]


LINES = {
    "a": "a" * MB,
    "dash": "-" * MB,
    "equals": "=" * MB,
    "spaces": "x" + " " * MB + "y",
    "base64": blob(MB),
}


def _train(src: Path, out: Path, merges: int = 2000):
    r = runner.invoke(app, ["train", str(src), "--out", str(out), "--merges", str(merges), "-q"])
    assert r.exit_code == 0, r.output
    return out


def _check(out: Path, texts: list[str]) -> None:
    """tiktoken, tokenizers and transformers give the same ids, and the ids decode back."""
    from transformers import PreTrainedTokenizerFast

    enc, hf = toktok.load_encoding(out), load_hf(out)
    tf = PreTrainedTokenizerFast.from_pretrained(str(out))
    for text in texts:
        ids = enc.encode_ordinary(text)
        assert hf.encode(text, add_special_tokens=False).ids == ids, (len(text), text[:20])
        assert tf.encode(text, add_special_tokens=False) == ids, (len(text), text[:20])
        assert enc.decode(ids) == text


def _parity_ok(out: Path) -> bool:
    import json

    con = duckdb.connect(str(out / "run.duckdb"), read_only=True)
    try:
        return json.loads(con.execute("SELECT value FROM meta WHERE key = 'parity'").fetchone()[0])["ok"]
    finally:
        con.close()


@pytest.mark.parametrize("kind", ["a", "dash", "spaces",
                                  pytest.param("equals", marks=pytest.mark.slow),
                                  pytest.param("base64", marks=pytest.mark.slow)])
def test_a_1mb_line_in_a_small_corpus(tmp_path, kind):
    """notes.txt plus one 1 MB line: the run finishes (in seconds: see bench/probes/long_runs.py), its
    long tokens are runs of 2^k characters, and the three libraries agree on the line."""
    line = LINES[kind]
    src = tmp_path / "corpus.txt"
    src.write_text((FIXTURES / "notes.txt").read_text() + "\n" + line + "\n")
    out = _train(src, tmp_path / "tok")
    assert _parity_ok(out)
    tokens = set(toktok.load_encoding(out)._mergeable_ranks)
    if kind != "base64":
        ch = line[1].encode()
        runs = {len(t) for t in tokens if t and t == ch * len(t)}
        assert {2 ** k for k in range(1, 11)} <= runs  # 'xx' .. 1,024 x merged (counts 2^19 .. 2^10)
    # tiktoken's regex overflows its stack on 1 MB of spaces: parity on 100 KB of them
    texts = [line] if kind != "spaces" else [line[:100_000] + "y"]
    texts += [line[:n] for n in (1, 2, 3, 1000, 1023, 1024, 1025, 4097, 65537)]
    texts += [f"Hello {line[:3000]} world\n{line[:777]}\n"]
    _check(out, texts)


def test_runs_mixed_into_a_normal_corpus(tmp_path):
    """The fixtures' text with all of these lines between its documents (and shorter rules of
    random lengths): trained, and parity holds on the text and the lines."""
    rng = random.Random(5)
    notes = (FIXTURES / "notes.txt").read_text()
    parts = [notes[i:i + 20_000] for i in range(0, len(notes), 20_000)]
    lines = list(LINES.values()) + [rng.choice("=-*#~ ") * rng.randint(1, 5000) for _ in range(300)]
    body = []
    for i, ln in enumerate(lines):
        body.append(parts[i % len(parts)][:2000])
        body.append(ln)
    src = tmp_path / "mixed.txt"
    src.write_text("\n".join(body) + "\n")
    ref = _train(src, tmp_path / "tok", merges=6000)
    assert _parity_ok(ref)
    _check(ref, [parts[0][:5000], LINES["a"], LINES["equals"][:300_000], LINES["base64"][:200_000],
                 "\n".join(b[:50_000] for b in body[:40])])
