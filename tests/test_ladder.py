"""Vocabulary ladders (issue 51): ``--ladder`` trains once to the largest size and writes each smaller
one to ``OUT/ladder/N/``; ``toktok cut`` cuts one from a finished run. Every rung is byte for byte the
tokenizer a separate run at that size writes (same data, options, seed), its ordinary ids a prefix
of the largest's; specials by the run's rule (after the last rank, or kept at a warm-start base's
ids), reserved ids and padding per rung; each checked by the parity check."""
from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest
from conftest import FIXTURES, ROOT, cli_ok as _ok
from typer.testing import CliRunner

import toktok
from toktok.errors import ConfigError
from toktok.cli import app
from toktok.formats.ladder import Ladder, rung

runner = CliRunner()
FILES = ("tokenizer.json", "tokenizer.tiktoken", "tokenizer_config.json", "special_tokens_map.json")
SPECIALS = ["-s", "<|endoftext|>", "-s", "<|pad|>"]
DATA = [FIXTURES / "sample.parquet", FIXTURES / "notes.txt"]


def _fails(*args) -> str:
    r = runner.invoke(app, [*map(str, args)])
    assert r.exit_code == 2, r.output
    lines = [ln for ln in r.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("toktok: error: "), r.output
    return lines[0]


def _same(a: Path, b: Path, files=FILES) -> None:
    for f in files:
        assert (a / f).read_bytes() == (b / f).read_bytes(), f"{a / f} differs from {b / f}"


def _ranks(folder: Path) -> list[bytes]:
    enc = toktok.load_encoding(folder)
    return [t for t, _i in sorted(enc._mergeable_ranks.items(), key=lambda kv: kv[1])]


@pytest.fixture(scope="module")
def ladder_run(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("ladder") / "tok"
    _ok("train", *DATA, "--out", out, "--ladder", "2048,1500,1800", *SPECIALS, "--chat-template", "chatml",
        "-s", "<|im_start|>", "-s", "<|im_end|>", "-q")
    return out


@pytest.mark.parametrize("size", [1500, 1800])
def test_every_rung_is_a_separate_run_at_that_size(tmp_path, ladder_run, size):
    """A rung's files are those of ``--vocab-size N`` on the same data, byte for byte; its
    ordinary ids are the largest's first ones; the run records the rung."""
    alone = tmp_path / "alone"
    _ok("train", *DATA, "--out", alone, "--vocab-size", size, *SPECIALS, "--chat-template", "chatml",
        "-s", "<|im_start|>", "-s", "<|im_end|>", "-q")
    rung_dir = ladder_run / "ladder" / str(size)
    _same(rung_dir, alone)
    small, large = _ranks(rung_dir), _ranks(ladder_run)
    assert len(small) == size - 4 and large[:len(small)] == small
    assert toktok.load_encoding(rung_dir).n_vocab == size
    con = duckdb.connect(str(ladder_run / "run.duckdb"), read_only=True)
    rungs = json.loads(con.execute("select value from meta where key = 'ladder'").fetchone()[0])
    assert [r["vocab_size"] for r in rungs] == [1500, 1800] and rungs[0]["folder"] == "ladder/1500"
    assert all(r["parity_strings"] > 300 for r in rungs)
    # the largest is the run itself, and toktok cut gives every rung again from its run file
    assert toktok.load_encoding(ladder_run).n_vocab == 2048
    got = toktok.cut(ladder_run, vocab_size=size, out=tmp_path / "cut")
    assert got.vocab_size == size and got.parity_strings > 300
    _same(tmp_path / "cut", alone)


def test_padding_reserved_ids_and_a_short_run_per_rung(tmp_path):
    """With --pad-to-multiple-of and --min-frequency stopping the merges, each rung still equals
    its separate run: the reserved special tokens are recomputed per rung (the largest's are not
    carried down), and a rung beyond what the corpus gave is filled like a separate run's."""
    opts = ["--pad-to-multiple-of", "64", "--min-frequency", "40", "-s", "<|endoftext|>", "-q"]
    out = tmp_path / "lad"
    _ok("train", FIXTURES / "notes.txt", "--out", out, "--ladder", "1472,1536,1600", *opts)
    short = json.loads(duckdb.connect(str(out / "run.duckdb"), read_only=True).execute(
        "select value from meta where key = 'phases'").fetchone()[0])[0]["merges_learned"]
    assert 1472 - 1418 < short < 1536 - 1418  # the 1,536 rung is short: reserved ids fill it
    for size in (1472, 1536):
        alone = tmp_path / f"alone{size}"
        _ok("train", FIXTURES / "notes.txt", "--out", alone, "--vocab-size", size, *opts)
        _same(out / "ladder" / str(size), alone)
    # cut from a --merges run with padding: the run's reserved ids are its own, not the rung's
    m = tmp_path / "merges"
    _ok("train", FIXTURES / "notes.txt", "--out", m, "--merges", "300", "--pad-to-multiple-of", "64",
        "-s", "<|endoftext|>", "-q")
    _ok("cut", m, "--vocab-size", "1600", "--out", tmp_path / "m1600")
    _ok("train", FIXTURES / "notes.txt", "--out", tmp_path / "a1600", "--vocab-size", "1600",
        "--pad-to-multiple-of", "64", "-s", "<|endoftext|>", "-q")
    _same(tmp_path / "m1600", tmp_path / "a1600")


def test_warm_start_with_pinned_specials(tmp_path):
    """A warm start whose specials sit at the base's ids (0 and 1, declared beside the .tiktoken):
    the rung keeps them there, like a separate run."""
    base = ROOT / "data_fixtures" / "base" / "hf_bpe" / "tokenizer.json"
    common = ["--warm-start", base, *SPECIALS, "-q"]
    _ok("train", FIXTURES / "sample.parquet", "--out", tmp_path / "lad", "--ladder", "900,1100", *common)
    _ok("train", FIXTURES / "sample.parquet", "--out", tmp_path / "alone", "--vocab-size", "900", *common)
    _same(tmp_path / "lad" / "ladder" / "900", tmp_path / "alone",
          FILES + ("tokenizer.special_tokens.json",))
    assert json.loads((tmp_path / "alone" / "tokenizer.special_tokens.json").read_text())["<|pad|>"] == 1
    toktok.cut(tmp_path / "lad", vocab_size=900, out=tmp_path / "cut")  # the run file's pinned ids
    _same(tmp_path / "cut", tmp_path / "alone", FILES + ("tokenizer.special_tokens.json",))


def test_phases_ladder_cuts_the_last_phase(tmp_path):
    """With phases, the ladder's largest size is the last phase's vocab_size and each rung cuts
    that phase's merges; below the ids the last phase starts with, a cut is refused."""
    def config(name: str, last: str) -> Path:
        p = tmp_path / f"{name}.yaml"
        p.write_text(f"output: {tmp_path}/{name}/tokenizer.tiktoken\nspecial_tokens: ['<|endoftext|>']\n{last}"
                     f"phases:\n  - {{name: code, merges: 200, sources: [{{file: {FIXTURES}/extra.jsonl}}]}}\n")
        return p
    lad = config("lad", "ladder: [1800, 2000]\n")
    lad.write_text(lad.read_text() + f"  - {{name: text, vocab_size: 2000, sources: [{{path: {FIXTURES}/sample.parquet}}]}}\n")
    alone = config("alone", "")
    alone.write_text(alone.read_text() + f"  - {{name: text, vocab_size: 1800, sources: [{{path: {FIXTURES}/sample.parquet}}]}}\n")
    _ok("train", "--config", lad, "-q")
    _ok("train", "--config", alone, "-q")
    _same(tmp_path / "lad" / "ladder" / "1800", tmp_path / "alone")
    line = _fails("cut", tmp_path / "lad", "--vocab-size", "1500", "--out", tmp_path / "c")
    assert "--vocab-size 1500 is less than the 1,618 ids the run's last phase starts with" in line


def test_cut_refusals(tmp_path, ladder_run):
    """A size below the last phase's start, above what the run learned, off its padding; an
    --out that holds something else: one line each, nothing written."""
    assert "pass at least 1421" in _fails("cut", ladder_run, "--vocab-size", "1000", "--out", tmp_path / "a")
    line = _fails("cut", ladder_run, "--vocab-size", "4096", "--out", tmp_path / "a")
    assert "more than the run's 2,048 ids" in line and "train with --vocab-size 4096" in line
    assert "not a whole number" in _fails("cut", ladder_run, "--vocab-size", "lots", "--out", tmp_path / "a")
    assert not (tmp_path / "a").exists()
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "notes.txt").write_text("mine")
    assert "exists and is not empty; pass --force" in _fails("cut", ladder_run, "--vocab-size", "1500", "--out", tmp_path / "b")
    line = _fails("cut", ladder_run, "--vocab-size", "1500", "--out", tmp_path / "b", "--force")
    assert "holds 'notes.txt', not a tokenizer's file" in line
    assert (tmp_path / "b" / "notes.txt").read_text() == "mine"
    _ok("cut", ladder_run, "--vocab-size", "1500", "--out", tmp_path / "c")
    _ok("cut", ladder_run, "--vocab-size", "1600", "--out", tmp_path / "c", "--force")
    assert toktok.load_encoding(tmp_path / "c").n_vocab == 1600
    ladder = Ladder.of_run(ladder_run)
    with pytest.raises(ConfigError, match="not a multiple of the run's --pad-to-multiple-of 64"):
        rung(Ladder(**{**ladder.__dict__, "pad_to_multiple_of": 64}), 1500)


@pytest.mark.parametrize("args,needle", [
    (["--ladder", "1500,2048", "--merges", "10"], "--merges and --ladder both given"),
    (["--ladder", "1500,2048", "--vocab-size", "3000"], "its largest size is the run's; --vocab-size 3000 differs"),
    (["--ladder", "1500,1500"], "1500 is given twice"),
    (["--ladder", "1500,x"], "is not a list of whole numbers"),
    (["--ladder", "1536,2000", "--pad-to-multiple-of", "64"], "2000 is not a multiple of --pad-to-multiple-of 64"),
    (["--ladder", "1000,2048"], "--ladder 1000 is less than the 1,419 ids"),
])
def test_ladder_option_refusals(tmp_path, args, needle):
    line = _fails("train", FIXTURES / "notes.txt", "--out", tmp_path / "o", *SPECIALS, *args, "-q")
    assert needle in line
    assert not (tmp_path / "o").exists()


def test_eval_over_a_ladder(ladder_run, tmp_path):
    """``toktok eval OUT --ladder``: bytes per token and tokens per word per size (smallest first)
    and per --by group in one table; more ids compress better on the whole; a run without rungs
    is refused."""
    r = runner.invoke(app, ["eval", str(ladder_run), "--ladder", "--data", str(FIXTURES / "sample.parquet"),
                            "--by", "lang", "--json"])
    assert r.exit_code == 0, r.output
    rows = json.loads(r.output)["rows"]
    top = [x for x in rows if x["subset"] == "all"]
    assert [x["vocab_size"] for x in top] == [1500, 1800, 2048]
    assert [x["tokenizer"] for x in top] == ["tok 1,500", "tok 1,800", "tok 2,048"]
    assert top[0]["bytes_per_token"] < top[1]["bytes_per_token"] < top[2]["bytes_per_token"]
    assert len({x["subset"] for x in rows}) > 5 and all(x["tokens_per_word"] for x in rows)
    plain = tmp_path / "plain"
    _ok("cut", ladder_run, "--vocab-size", "1500", "--out", plain)
    assert "no ladder/ of smaller tokenizers" in _fails("eval", plain, "--ladder", "--data", FIXTURES / "notes.txt")


def test_superbpe_ladder_cuts_the_superword_phase(tmp_path):
    """With --superbpe the ladder's rungs cut the superword phase (the last): each is the separate
    SuperBPE run at that size, byte for byte."""
    _ok("train", *DATA, "--out", tmp_path / "lad", "--superbpe", "1600", "--ladder", "1700,1800", "-q")
    _ok("train", *DATA, "--out", tmp_path / "alone", "--superbpe", "1600", "--vocab-size", "1700", "-q")
    _same(tmp_path / "lad" / "ladder" / "1700", tmp_path / "alone")
