"""The vocabulary's shape: --vocab-size (total ids), --pad-to-multiple-of (reserved special tokens),
--max-token-length and --min-frequency, through the command line, a config's phases and toktok.train;
ids exactly 0..N-1 in tiktoken and HF, and merges equal to the reference trained with the same limits."""
from __future__ import annotations

import duckdb
import polars as pl
import pytest
from conftest import FIXTURES
from oracles.reference_bpe import train as reference_train
from typer.testing import CliRunner

import toktok
from toktok.cli import app
from toktok.count.scan import count_words
from toktok.errors import ConfigError
from toktok.formats.hf import load_hf
from toktok.vocab import Vocab

runner = CliRunner()
SPECIALS = ["<|endoftext|>", "<|pad|>"]
PARQUET = FIXTURES / "sample.parquet"
PROBES = ["hello world <|endoftext|> 12345", "<|reserved_special_token_0|>x<|pad|>", "naïve café, ünïcode 😀",
          "    indented\n\tcode()", "<|reserved_special_token_3|><|reserved_special_token_30|>"]


def _train(*args) -> str:
    r = runner.invoke(app, ["train", *map(str, args), "-q"])
    assert r.exit_code == 0, r.output
    return r.output


def _ids_are_exactly(out, n: int) -> None:
    """tiktoken and HF tokenizers both hold ids 0..n-1, each once, and agree on every id's bytes,
    on the specials' ids and on the probes' ids."""
    enc = toktok.load_encoding(out)
    hf = load_hf(out)
    assert enc.n_vocab == n and hf.get_vocab_size(with_added_tokens=True) == n
    ids = sorted(hf.get_vocab(with_added_tokens=True).values())
    assert ids == list(range(n))
    specials = enc._special_tokens
    assert sorted(set(range(n)) - set(specials.values())) == sorted(enc._mergeable_ranks.values())
    for s, i in specials.items():
        assert hf.token_to_id(s) == i
    for text in PROBES:
        assert enc.encode(text, allowed_special="all") == hf.encode(text, add_special_tokens=False).ids


def _merges(out, phase=None):
    con = duckdb.connect(str(out / "run.duckdb"), read_only=True)
    rows = con.execute("select left_id, right_id, token_id, count, reused, phase from merges order by merge_index").fetchall()
    return [r[:5] for r in rows if phase is None or r[5] == phase]


def _word_counts(texts: list[str], specials=SPECIALS) -> dict[bytes, int]:
    t = count_words(texts, specials=specials).sort("word")
    return dict(zip(t["word"].to_list(), t["count"].to_list()))


def test_vocab_size_2048_with_two_specials(tmp_path):
    out = tmp_path / "v"
    _train(PARQUET, "--out", out, "--vocab-size", 2048, "-s", SPECIALS[0], "-s", SPECIALS[1])
    _ids_are_exactly(out, 2048)
    enc = toktok.load_encoding(out)
    assert enc._special_tokens == {"<|endoftext|>": 2046, "<|pad|>": 2047}  # no reserved ones needed
    assert len(_merges(out)) - sum(r[4] for r in _merges(out)) == 2048 - 1417 - 2


def test_pad_to_multiple_of_128(tmp_path):
    out = tmp_path / "p"
    text = _train(PARQUET, "--out", out, "--merges", 1000, "-s", SPECIALS[0], "-s", SPECIALS[1],
                  "--pad-to-multiple-of", 128)
    n = 1417 + 1000 + 2
    total = -(-n // 128) * 128
    _ids_are_exactly(out, total)
    enc = toktok.load_encoding(out)
    reserved = [f"<|reserved_special_token_{i}|>" for i in range(total - n)]
    assert [s for s, _ in sorted(enc._special_tokens.items(), key=lambda x: x[1])] == SPECIALS + reserved
    assert f"{total - n:,} of them reserved special tokens" in " ".join(text.split())


def test_vocab_size_with_pad_and_a_shortfall_fills_with_reserved_tokens(tmp_path):
    # the corpus (two words) allows few merges: the rest of --vocab-size is reserved special tokens,
    # with a warning, and the ids are still exactly 0..N-1
    src = tmp_path / "tiny.txt"
    src.write_text("abcdef abcdef ghij\n" * 10)
    out = tmp_path / "s"
    r = runner.invoke(app, ["train", str(src), "--out", str(out), "--vocab-size", "1536", "--pad-to-multiple-of",
                            "512", "-s", "<|endoftext|>"])
    assert r.exit_code == 0, r.output
    assert "reserved special tokens fill ids" in r.output
    _ids_are_exactly(out, 1536)


def test_max_token_length_4(tmp_path):
    out = tmp_path / "m"
    _train(PARQUET, "--out", out, "--merges", 1000, "--max-token-length", 4)
    enc = toktok.load_encoding(out)
    lengths = [len(t) for t in enc._mergeable_ranks]
    assert max(lengths) == 4
    assert enc.n_vocab == 256 + len([t for t in Vocab.base().tokens[256:] if len(t) <= 4]) + 1000  # all learned
    _ids_are_exactly(out, enc.n_vocab)


def _one_phase_equals_reference(tmp_path, texts, n, **limits):
    out = tmp_path / "r"
    r = toktok.train([texts], out=out, merges=n, special_tokens=SPECIALS[:1], hardcoded=False, **limits)
    ref_tokens, ref_merges = reference_train(_word_counts(texts, SPECIALS[:1]), Vocab.base(False).tokens, n, **limits)
    assert _merges(out) == ref_merges
    assert r.merges_learned == len(ref_tokens) - 256
    return r


def test_max_token_length_equals_reference(tmp_path):
    texts = pl.read_parquet(PARQUET)["text"].head(80).to_list()
    r = _one_phase_equals_reference(tmp_path, texts, 500, max_token_length=3)
    assert r.merges_learned == 500


def test_min_frequency_stops_where_the_reference_stops(tmp_path):
    texts = pl.read_parquet(PARQUET)["text"].head(80).to_list()
    r = _one_phase_equals_reference(tmp_path, texts, 3000, min_frequency=6)
    assert 0 < r.merges_learned < 3000
    assert r.phases[0].stopped_at and r.phases[0].stopped_at < 6
    assert any(w.startswith("min_frequency 6 stopped the merges at") for w in r.warnings)


def test_min_frequency_in_the_summary(tmp_path):
    out = tmp_path / "f"
    text = _train(PARQUET, "--out", out, "--merges", 5000, "--min-frequency", 50)
    assert "--min-frequency 50 stopped early (the best pair left occurs" in " ".join(text.split())


def test_phases_vocab_size_per_phase(tmp_path):
    # phase sizes are totals after each phase, specials included; the last one is exact
    cfg = tmp_path / "run.yaml"
    cfg.write_text(f"""output: {tmp_path / 'out' / 'two.tiktoken'}
special_tokens: ["<|endoftext|>"]
pad_to_multiple_of: 64
max_token_length: 12
phases:
  - name: notes
    vocab_size: 1600
    sources: [{{file: {FIXTURES / 'notes.txt'}}}]
  - name: sample
    vocab_size: 2048
    sources: [{{file: {PARQUET}}}]
""")
    r = runner.invoke(app, ["train", "--config", str(cfg), "-q"])
    assert r.exit_code == 0, r.output
    out = tmp_path / "out"
    _ids_are_exactly(out, 2048)
    con = duckdb.connect(str(out / "run.duckdb"), read_only=True)
    new = dict(con.execute("select phase, count(*) from merges where not reused group by phase").fetchall())
    start = 256 + len([t for t in Vocab.base().tokens[256:] if len(t) <= 12])  # 20 runs of spaces left out
    assert start == 1397
    assert new["notes"] == 1600 - start - 1 and new["notes"] + new["sample"] == 2048 - start - 1
    assert max(len(t) for t in toktok.load_encoding(out)._mergeable_ranks) <= 12


def test_warm_start_with_vocab_size(tmp_path):
    base = tmp_path / "base"
    _train(FIXTURES / "notes.txt", "--out", base, "--merges", 100, "-s", "<|endoftext|>")
    out = tmp_path / "w"
    r = toktok.train(str(PARQUET), out=out, warm_start=base / "tokenizer.tiktoken", vocab_size=2000,
                     special_tokens=["<|endoftext|>", "<|pad|>"], max_token_length=6, min_frequency=2)
    assert r.vocab_size == 2000
    _ids_are_exactly(out, 2000)
    enc, old = r.encoding, toktok.load_encoding(base)
    for t, i in old._mergeable_ranks.items():  # the base's ids kept
        assert enc._mergeable_ranks[t] == i
    assert all(len(t) <= 6 for t, i in enc._mergeable_ranks.items() if i >= old.max_token_value)


def test_kill9_then_resume_with_the_shape_options(tmp_path):
    import signal
    import subprocess

    import faults

    args = [str(PARQUET), "--vocab-size", "2944", "--pad-to-multiple-of", "128", "--max-token-length", "5",
            "--min-frequency", "3", "-s", "<|endoftext|>", "-q"]

    def run(out, *extra, kill_at=None):
        return subprocess.run(faults.command(every=0, step=50, kill_at=kill_at) + ["train", *args, "--out", str(out),
                              *extra], capture_output=True, text=True, timeout=600)

    assert run(tmp_path / "ref").returncode == 0
    r = run(tmp_path / "tok", kill_at=4)
    assert r.returncode == -signal.SIGKILL, r.stderr
    other = subprocess.run(faults.command(every=0) + ["train", *[a if a != "3" else "4" for a in args], "--out",
                           str(tmp_path / "tok"), "--resume"], capture_output=True, text=True, timeout=600)
    assert other.returncode == 2 and "min_frequency was 3" in other.stderr  # the identity holds the options
    r = run(tmp_path / "tok", "--resume")
    assert r.returncode == 0, r.stderr
    for f in ("tokenizer.tiktoken", "tokenizer.json"):
        assert (tmp_path / "tok" / f).read_bytes() == (tmp_path / "ref" / f).read_bytes()
    _ids_are_exactly(tmp_path / "tok", 2944)


@pytest.mark.parametrize("kw, needle", [
    (dict(merges=10, vocab_size=2048), "merges and vocab_size both given"),
    (dict(vocab_size=1000), "vocab_size 1000 is less than the 1,417 ids"),
    (dict(vocab_size=2050, pad_to_multiple_of=64), "not a multiple of pad_to_multiple_of 64"),
    (dict(max_token_length=1), "max_token_length 1 is less than 2"),
])
def test_bad_keywords(tmp_path, kw, needle):
    with pytest.raises(ConfigError) as e:
        toktok.train(str(FIXTURES / "notes.txt"), out=tmp_path / "o", **kw)
    assert needle in str(e.value) and "\n" not in str(e.value)
    assert not (tmp_path / "o").exists()


def test_phase_keyword_takes_vocab_size(tmp_path):
    r = toktok.train(phases=[toktok.Phase("a", vocab_size=1500, sources=[str(FIXTURES / "notes.txt")])],
                     out=tmp_path / "o")
    assert r.vocab_size == 1500
    with pytest.raises(ConfigError, match="merges= .* or vocab_size="):
        toktok.train(phases=[toktok.Phase("a", sources=[str(FIXTURES / "notes.txt")])], out=tmp_path / "p")


def test_vocab_size_flag_replaces_a_one_phase_configs_merges(tmp_path):
    cfg = tmp_path / "one.yaml"
    cfg.write_text(f"output: {tmp_path / 'o' / 'one.tiktoken'}\nphases:\n  - name: a\n    merges: 5\n"
                   f"    sources: [{{file: {FIXTURES / 'notes.txt'}}}]\n")
    r = runner.invoke(app, ["train", "--config", str(cfg), "--vocab-size", "1500", "-q"])
    assert r.exit_code == 0, r.output
    assert toktok.load_encoding(tmp_path / "o" / "one.tiktoken").n_vocab == 1500
    # a config's phases each give their own; the flag is refused for several
    two = tmp_path / "two.yaml"
    two.write_text(cfg.read_text().replace("phases:\n", "phases:\n  - {name: b, merges: 5, sources: [" +
                                           str(FIXTURES / "notes.txt") + "]}\n"))
    r = runner.invoke(app, ["train", "--config", str(two), "--vocab-size", "1500", "-q"])
    assert r.exit_code == 2 and "set vocab_size per phase" in r.output
