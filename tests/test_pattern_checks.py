"""A user's regex: capture groups accepted (whole matches everywhere), every code point in some
piece (decided over all of them, :mod:`toktok.pattern_checks`), long runs split in bounded time by
the three engines, and the regex shown as written in messages and the summary."""
from __future__ import annotations

import json

import pytest
import regex
from conftest import FIXTURES
from typer.testing import CliRunner

import toktok
from toktok.cli import app
from toktok.count.scan import count_words
from toktok.errors import ConfigError
from toktok.formats.hf import load_hf
from toktok.pattern_checks import classes, uncovered
from toktok.patterns import NAMED, _read, check

runner = CliRunner()


def _one_line(r) -> str:
    assert r.exit_code == 2, r.output
    lines = [ln for ln in r.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("toktok: error: ") and "Traceback" not in r.output, r.output
    return lines[0]


# --- 6: capture groups -------------------------------------------------------------------------

GROUPS = [r"(\p{L}+)|\p{N}+|\s+|[^\s\p{L}\p{N}]+", r"(?P<w>\p{L}+)|(\p{N}{1,3})|\s+|[^\s\p{L}\p{N}]+",
          r"(?<w>\p{L})(\p{L}*)|(\p{N})|\s+|[^\s\p{L}\p{N}]+"]


@pytest.mark.parametrize("rx", GROUPS)
def test_capture_groups_are_accepted_and_split_whole(rx):
    p = check(rx)
    text = "camelCase 12345 x, y!"
    want = [m.group() for m in regex.finditer(p.regex, text)]
    assert p.findall(text) == want and "".join(want) == text
    counted = count_words([text], pattern=p)
    assert sorted(counted["word"].to_list()) == sorted(w.encode() for w in set(want))


def test_a_run_with_two_groups_trains_and_keeps_parity(tmp_path):
    r = runner.invoke(app, ["train", str(FIXTURES / "notes.txt"), "--out", str(tmp_path / "o"), "--merges", "30",
                            "--pattern", GROUPS[1], "-q"])
    assert r.exit_code == 0, r.output
    enc, hf = toktok.load_encoding(tmp_path / "o"), load_hf(tmp_path / "o")
    text = "Hello 2024 world, naïve 12345!"
    assert enc.encode(text) == hf.encode(text, add_special_tokens=False).ids
    assert enc.decode(enc.encode(text)) == text


# --- 5: every code point in some piece ---------------------------------------------------------


@pytest.mark.parametrize("script, first", [("Georgian", "U+10A0"), ("Ethiopic", "U+1200"), ("Armenian", "U+0531"),
                                           ("Tamil", "U+0B82")])
def test_a_pattern_that_leaves_a_script_in_no_piece_is_refused(script, first):
    with pytest.raises(ConfigError) as e:
        check(rf"[^\s\p{{N}}\p{{{script}}}]+|\p{{N}}+|\s+")
    msg = str(e.value)
    assert "text left unmatched" in msg and first in msg and script.upper() in msg and "catch-all" in msg, msg
    assert "\n" not in msg and len(msg) <= 300


def test_the_refusal_comes_before_any_work(tmp_path):
    line = _one_line(runner.invoke(app, ["train", str(FIXTURES / "notes.txt"), "--out", str(tmp_path / "o"),
                                         "--pattern", r"[^\s\p{N}\p{Georgian}]+|\p{N}+|\s+", "-q"]))
    assert "U+10A0" in line and r"'[^\s\p{N}\p{Georgian}]+|\p{N}+|\s+'" in line
    assert not (tmp_path / "o").exists()


def test_coverage_is_decided_over_every_code_point():
    """The named patterns cover everything; a context the pattern needs is found; classes of code
    points the pattern cannot tell apart are few, and each holds all its members."""
    for p in NAMED.values():
        assert uncovered(p.regex, classes(_read(p.regex).atoms, fold=True)) is None, p.name
    # 'a' only before 'b': 'a' at the end is in no piece
    assert "U+0061" in uncovered(r"ab|[^a]", classes(["a", "b", "[^a]"]))
    # a space before a letter is in no piece: two characters of context are needed to see it
    gap = uncovered(r"\s+(?!\S)|\S+", classes([r"\s", r"\S"]))
    assert gap.startswith("U+0009") and "in '\\t" in gap, gap
    # letters and marks of one script, the 1,112,064 code points in a handful of classes
    found = classes([r"\p{L}", r"\p{Georgian}", r"\s"])
    assert len(found.reps) == 4 and sum(found.sizes) == 1_112_064  # none, other letters, Georgian, \\s
    # a pattern that covers Georgian but not its digits-free letters
    assert uncovered(r"\p{L}+|\p{N}+|\s+|[^\s\p{L}\p{N}]+", classes([r"\p{L}", r"\p{N}", r"\s", r"[^\s\p{L}\p{N}]"])) is None


# --- 7: long runs ------------------------------------------------------------------------------


@pytest.mark.parametrize("rx, run", [(r"(?:a+)+b|\p{L}+|\s+|[^\s\p{L}]+", "x 'a'"),
                                     (r"(\w+\s?)+$|\s+|\S+", " then '\\x00'")])
def test_a_pattern_that_backtracks_on_long_runs_is_refused_before_work(tmp_path, rx, run):
    line = _one_line(runner.invoke(app, ["train", str(FIXTURES / "notes.txt"), "--out", str(tmp_path / "o"),
                                         "--pattern", rx, "-q"]))
    assert "a long run" in line and "CPU" in line and run in line and "(?>" in line, line
    assert not (tmp_path / "o").exists()


def test_oniguruma_giving_up_is_said_not_shown(capfd):
    """Oniguruma's retry limit (a panic in tokenizers, with a Rust backtrace) stays in the probe's
    process and comes back as one clause."""
    from toktok.pattern_checks import too_slow

    rx = r"(?:a|a)+b|[\s\S]"
    got = too_slow(rx, rx, classes(["a", "b", r"[\s\S]"]), engines=("hf",))
    out = capfd.readouterr()
    assert "panicked" not in out.err + out.out and "Traceback" not in out.err + out.out
    assert got == "HF tokenizers' Oniguruma fails on 20,000 x 'a' (Onig: Regex search error: retry-limit-in-match over)"


# --- the small ones: the regex as written ------------------------------------------------------


def test_a_custom_regex_is_echoed_as_written(tmp_path, monkeypatch):
    """In a refusal of --resume (a changed pattern) and of a warm start's other pattern: single
    backslashes, as typed (repr doubled them)."""
    from toktok.resume import _typed

    rx = r"\p{L}+|\p{N}{1,2}|\s+|[^\s\p{L}\p{N}]+"
    assert _typed(rx) == f"'{rx}'" and _typed(5) == "5"
    base = tmp_path / "base"
    assert runner.invoke(app, ["train", str(FIXTURES / "notes.txt"), "--out", str(base), "--merges", "5",
                               "--pattern", "qwen2", "-q"]).exit_code == 0
    line = _one_line(runner.invoke(app, ["train", str(FIXTURES / "notes.txt"), "--out", str(tmp_path / "w"),
                                         "--warm-start", str(base), "--merges", "5", "--pattern", rx, "-q"]))
    assert f"'{rx}'" in line and "\\\\" not in line, line


def test_a_parity_failure_under_a_custom_regex_advises_a_new_pattern_not_resume():
    from toktok.errors import ParityError
    from toktok.verify import pattern_advice

    e = pattern_advice(ParityError("out/x: ids differ on 'a'"), check(GROUPS[0]))
    assert e.start_over and "change it" in str(e) and "pattern's regex" in str(e) and "--resume keeps the pattern" in str(e)
    named = pattern_advice(ParityError("out/x: ids differ"), NAMED["o200k"])
    assert str(named) == "out/x: ids differ" and not getattr(named, "start_over", False)


def test_vocab_size_too_small_names_no_hardcoded(tmp_path):
    line = _one_line(runner.invoke(app, ["train", str(FIXTURES / "notes.txt"), "--out", str(tmp_path / "o"),
                                         "--vocab-size", "1000", "-q"]))
    assert "pass at least 1417, or --no-hardcoded" in line and "then at least 256" in line, line
    with pytest.raises(ConfigError, match=r"or hardcoded=False .*then at least 257\)"):
        toktok.train([str(FIXTURES / "notes.txt")], out=tmp_path / "p", vocab_size=1000, special_tokens=["<|e|>"])


def test_oniguruma_giving_up_in_the_parity_check_is_a_parity_error(tmp_path):
    """Belt and braces behind the probes: a panic of tokenizers while the parity check encodes
    is a ParityError (one line), not a PanicException and its backtrace."""
    from tokenizers import Regex, Tokenizer, models, pre_tokenizers

    from toktok.errors import ParityError
    from toktok.verify.hf_side import Local

    tok = Tokenizer(models.BPE(vocab={"a": 0, "b": 1}, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.Split(Regex(r"(?:a|a)+b|[\s\S]"), "isolated")
    tok.save(str(tmp_path / "tokenizer.json"))
    with pytest.raises(ParityError, match="retry-limit-in-match over"):
        Local(tmp_path / "tokenizer.json").encode(["a" * 20_000])
