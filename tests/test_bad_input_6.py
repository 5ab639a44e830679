"""The hostile new user's pass, continued: a source given twice (the same path, a folder and a file
in it, a file and a link to it) was counted twice; a looping symlink was called "dangling";
``toktok cut`` suggested an ``--out`` a shell splits at its space; ``--superbpe`` on a SuperBPE base
learned superwords as its "subwords". Each is now read once with one warning, or refused in one
line naming the file or option and what to do (exit code 2, nothing written)."""
from __future__ import annotations

import shlex
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from conftest import FIXTURES, one_error_line, cli as _cli, cli_ok as _ok

import toktok
from toktok.errors import ConfigError

NOTES = FIXTURES / "notes.txt"
EXTRA = FIXTURES / "extra.jsonl"
FILES = ("tokenizer.json", "tokenizer.tiktoken", "tokenizer_config.json", "special_tokens_map.json")


def _table(path: Path) -> dict[bytes, int]:
    t = pq.read_table(path)
    return dict(zip(t.column("word").to_pylist(), t.column("count").to_pylist()))


def _said_once(output: str, *needles: str) -> str:
    """The one warning line that says a file was read once, naming every needle."""
    lines = [ln for ln in output.splitlines() if "read once" in ln]
    assert len(lines) == 1, output
    for n in needles:
        assert n in lines[0], (n, lines[0])
    return lines[0]


# --- a source given twice -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def once(tmp_path_factory) -> dict[str, dict[bytes, int]]:
    """The word tables of the fixtures' notes alone and of the whole corpus folder, each given once."""
    d = tmp_path_factory.mktemp("once")
    _ok("count", NOTES, "--out", d / "notes.parquet")
    _ok("count", FIXTURES, "--out", d / "all.parquet")
    return {"notes": _table(d / "notes.parquet"), "all": _table(d / "all.parquet")}


def test_count_reads_a_file_given_twice_once_and_says_so(tmp_path, once):
    """``count a a``, ``count a link-to-a``, ``count folder folder/a``, ``count folder 'folder/*'``:
    each file's words were counted once per source naming it (twice the counts)."""
    link = tmp_path / "link.txt"
    link.symlink_to(NOTES)
    cases = [("same", [NOTES, NOTES], "notes", [str(NOTES)]),
             ("link", [NOTES, link], "notes", [str(NOTES), "link.txt"]),
             ("folder", [FIXTURES, NOTES], "all", [str(NOTES), "two sources"]),
             ("glob", [FIXTURES, f"{FIXTURES}/*"], "all", ["3 files", "each read once"])]
    for name, sources, want, needles in cases:
        out = tmp_path / f"{name}.parquet"
        _said_once(_ok("count", *sources, "--out", out), *needles)
        assert _table(out) == once[want], name


def test_train_reads_a_file_given_twice_once(tmp_path):
    """The same tokenizer as with the file given once: in train, from Python and in a config."""
    _ok("train", NOTES, "--out", tmp_path / "one", "--merges", "50", "-q")
    _said_once(_ok("train", NOTES, NOTES, "--out", tmp_path / "two", "--merges", "50", "-q"), str(NOTES))
    r = toktok.train([str(NOTES), str(NOTES)], out=tmp_path / "py", merges=50, verbose=False)
    assert sum("read once" in w for w in r.warnings) == 1
    cfg = tmp_path / "c.yaml"
    cfg.write_text(f"phases:\n  - name: a\n    merges: 50\n    sources: [{{path: '{NOTES}'}}, {{file: '{NOTES}'}}]\n")
    _said_once(_ok("train", "--config", cfg, "--out", tmp_path / "cfg", "-q"), str(NOTES))
    for out in ("two", "py", "cfg"):
        for f in FILES:
            assert (tmp_path / out / f).read_bytes() == (tmp_path / "one" / f).read_bytes(), (out, f)


def test_superbpe_says_a_file_given_twice_once(tmp_path):
    """SuperBPE's two phases read the same sources: the warning was printed once per phase."""
    line = _said_once(_ok("train", NOTES, NOTES, "--out", tmp_path / "o", "--vocab-size", "1600", "--superbpe",
                          "1500"), str(NOTES))
    assert "superwords" not in line, line


def test_a_url_given_twice_is_read_once(tmp_path, once):
    """The same object twice (one of them with a query string, as a signed URL has)."""
    pytest.importorskip("aiohttp")
    from test_remote import _Files  # (a web server on 127.0.0.1 with HEAD and Range requests)

    web = _Files(FIXTURES)
    try:
        out = tmp_path / "c.parquet"
        _said_once(_ok("count", f"{web.url}/notes.txt", f"{web.url}/notes.txt?sig=X", "--out", out),
                   f"{web.url}/notes.txt")
        assert _table(out) == once["notes"]
    finally:
        web.close()


def test_word_counts_given_twice_are_summed_once(tmp_path):
    counts = tmp_path / "c.parquet"
    _ok("count", NOTES, "--out", counts)
    _ok("train", "--word-counts", counts, "--out", tmp_path / "one", "--merges", "50", "-q")
    _said_once(_ok("train", "--word-counts", counts, "--word-counts", counts, "--out", tmp_path / "two",
                   "--merges", "50", "-q"), "c.parquet")
    assert (tmp_path / "one" / "tokenizer.json").read_bytes() == (tmp_path / "two" / "tokenizer.json").read_bytes()


def test_a_file_in_two_phases_or_two_columns_is_read_by_each(tmp_path):
    """Deliberate: each phase reads its own sources; a Parquet file read for two columns is two texts."""
    cfg = tmp_path / "c.yaml"
    cfg.write_text(f"phases:\n  - {{name: a, merges: 20, sources: [{{path: '{NOTES}'}}]}}\n"
                   f"  - {{name: b, merges: 20, sources: [{{path: '{NOTES}'}}]}}\n")
    assert "read once" not in _ok("train", "--config", cfg, "--out", tmp_path / "o", "-q")
    import pyarrow as pa

    two = tmp_path / "two.parquet"
    pq.write_table(pa.table({"text": ["hello there"] * 5, "title": ["general kenobi"] * 5}), two)
    cfg.write_text(f"phases:\n  - name: a\n    merges: 5\n    sources: [{{path: '{two}'}}, "
                   f"{{path: '{two}', text_column: title}}]\n")
    assert "read once" not in _ok("train", "--config", cfg, "--out", tmp_path / "p", "-q")
    words = toktok.load_encoding(tmp_path / "p").encode("general kenobi")
    assert len(words) < len(b"general kenobi")  # the title column was counted


def test_a_file_in_two_weighted_sources_is_refused(tmp_path):
    """With weights, each source has its share of the sample: a file in two has no clear one."""
    cfg = tmp_path / "c.yaml"
    cfg.write_text(f"phases:\n  - name: a\n    merges: 50\n    budget: 100KB\n    sources:\n"
                   f"      - path: '{FIXTURES}'\n      - path: '{NOTES}'\n        weight: 3\n")
    one_error_line(_cli("train", "--config", cfg, "--out", tmp_path / "o"), str(NOTES), "two sources", "weights",
                   "name each file in one source only")
    with pytest.raises(ConfigError, match="named by two sources"):
        toktok.train(out=tmp_path / "o", phases=[toktok.Phase("a", merges=50, budget="100KB", sources=[
            toktok.Source(str(FIXTURES), weight=1), toktok.Source(str(NOTES), weight=3)])])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.yaml"]


# --- a looping symlink --------------------------------------------------------------------------------


def test_a_looping_symlink_is_called_a_loop(tmp_path):
    """``ln -s loop loop`` and ``a -> b -> a`` given as sources were "dangling (its target ... does
    not exist)"; inside a folder or a glob they were counted as dangling links."""
    (tmp_path / "loop").symlink_to("loop")
    (tmp_path / "a").symlink_to("b")
    (tmp_path / "b").symlink_to("a")
    (tmp_path / "gone").symlink_to("nowhere.txt")
    for args, needles in ((["loop"], ["loop -> loop", "symlink loop"]), (["a"], ["a -> b -> a", "symlink loop"])):
        for cmd in (["count", tmp_path / args[0], "--out", tmp_path / "c.parquet"],
                    ["train", tmp_path / args[0], "--out", tmp_path / "o"]):
            line = one_error_line(_cli(*cmd), *needles, "fix the link")
            assert "dangling" not in line
    line = one_error_line(_cli("count", tmp_path / "gone", "--out", tmp_path / "c.parquet"), "dangling symlink")
    assert "symlink loop" not in line
    d = tmp_path / "d"
    d.mkdir()
    (d / "notes.txt").write_text(NOTES.read_text())
    (d / "self.txt").symlink_to("self.txt")
    (d / "gone.txt").symlink_to("nowhere.txt")
    for src in (d, f"{d}/*.txt"):
        out = _ok("count", src, "--out", tmp_path / "c.parquet", "--force")
        said = [ln for ln in out.splitlines() if "skipped" in ln]
        assert len(said) == 1 and "1 symlink loop" in said[0] and "self.txt" in said[0], out
        assert "1 dangling symlink" in said[0] and "gone.txt" in said[0], out
        assert "looping" in said[0]
    (d / "notes.txt").unlink()
    (d / "gone.txt").unlink()
    one_error_line(_cli("count", d, "--out", tmp_path / "x.parquet"), "1 symlink loop", "self.txt")
    assert not (tmp_path / "o").exists() and not (tmp_path / "x.parquet").exists()


# --- toktok cut's suggestions ---------------------------------------------------------------------------


def test_cut_quotes_the_paths_it_suggests(tmp_path):
    """``e.g. --out my run-cut``: pasted, a shell passes ``run-cut`` as another argument."""
    run = tmp_path / "my run"
    _ok("train", NOTES, "--out", run, "--vocab-size", "1467", "--ladder", "1450,1467", "-q")
    line = one_error_line(_cli("cut", run, "--vocab-size", "1450", "--out", run), "run's own folder")
    assert shlex.split(line.split("e.g. ", 1)[1]) == [f"{run}-cut"]
    line = one_error_line(_cli("cut", run / "ladder" / "1450", "--vocab-size", "1450", "--out", tmp_path / "c"),
                          "a rung of the run")
    cmd = shlex.split(line.split("cut from the run: ", 1)[1])
    assert cmd[:3] == ["toktok", "cut", str(run)] and cmd[3:5] == ["--vocab-size", "1450"]
    _ok("cut", *cmd[2:-1], tmp_path / "c")  # what it says works as pasted
    assert (tmp_path / "c" / "tokenizer.json").is_file()


# --- --superbpe on a SuperBPE base -------------------------------------------------------------------


def test_superbpe_on_a_superbpe_base_is_refused(tmp_path):
    """The base splits with ``superbpe``, a warm start keeps it, so the "subwords" phase learned
    superwords and the transition meant nothing; likewise ``--pattern superbpe --superbpe``."""
    base = tmp_path / "base"
    _ok("train", NOTES, "--out", base, "--vocab-size", "1600", "--superbpe", "1500", "-q")
    for ws in (base, base / "tokenizer.tiktoken", base / "tokenizer.json"):
        one_error_line(_cli("train", EXTRA, "--out", tmp_path / "o", "--warm-start", ws, "--vocab-size", "1800",
                            "--superbpe", "1700"),
                       "--superbpe 1700", "splits text with superbpe already", "leave --superbpe out")
    one_error_line(_cli("train", EXTRA, "--out", tmp_path / "o", "--vocab-size", "1800", "--superbpe", "1700",
                        "--pattern", "superbpe"), "--superbpe 1700", "--pattern superbpe", "e.g. cl100k")
    cfg = tmp_path / "c.yaml"
    cfg.write_text(f"superbpe: 1700\nphases:\n  - vocab_size: 1800\n    pattern: superbpe\n"
                   f"    sources: [{{path: '{EXTRA}'}}]\n")
    one_error_line(_cli("train", "--config", cfg, "--out", tmp_path / "o"), "c.yaml", "phases[0].pattern: superbpe")
    with pytest.raises(ConfigError, match="splits text with superbpe already"):
        toktok.train(str(EXTRA), out=tmp_path / "o", warm_start=base, vocab_size=1800, superbpe=1700)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["base", "c.yaml"]
    # what the refusal says: without --superbpe the base goes on learning superwords
    _ok("train", EXTRA, "--out", tmp_path / "o", "--warm-start", base, "--vocab-size", "1800", "-q")
    enc = toktok.load_encoding(tmp_path / "o")
    assert enc.n_vocab == 1800 and enc._pat_str == toktok.load_encoding(base)._pat_str
