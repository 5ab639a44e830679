"""Config files: toktoktok's YAML schema plus toktok's keys, errors that name the key's location,
command-line overrides, and the example configs running unchanged on the bundled sample."""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import duckdb
import pytest
from conftest import FIXTURES, ROOT, one_error_line
from typer.testing import CliRunner

import toktok
from toktok.cli import app
from toktok.config import PhaseConfig, SourceConfig, TrainConfig, build_config, load_config
from toktok.errors import ConfigError, VocabError
from toktok.formats.common import find_tiktoken
from toktok.formats.hf import load_hf
from toktok.verify import verify

runner = CliRunner()
EXAMPLES = ROOT / "examples"


@pytest.fixture
def in_tmp(tmp_path, monkeypatch) -> Path:
    """A fresh current folder holding ``data_fixtures`` (a link), as the repository root does."""
    (tmp_path / "data_fixtures").symlink_to(FIXTURES.parent, target_is_directory=True)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _write(tmp_path: Path, text: str, name: str = "run.yaml") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


# --- the schema ---------------------------------------------------------------------------------

FULL = """\
output: out/t/tok.tiktoken
working_set_mb: 512
threads: 2
verbose: false
special_tokens: ["<|endoftext|>", "<|pad|>"]
warm_start:
  file: base.tiktoken
seed: 3
text_column: body
budget: 1.5MB
hardcoded: true
bad_utf8: replace
phases:
  - name: one
    merges: 10
    sources:
      - path: data/
      - file: notes.txt
        weight: 2
        text_column: content
  - merges: 0
    budget: 2KiB
    sources:
      - data/*.parquet
"""


def test_full_schema(in_tmp):
    cfg = load_config(_write(in_tmp, FULL))
    assert cfg.out == "out/t" and cfg.tiktoken_name == "tok.tiktoken"
    assert cfg.threads == 2 and cfg.verbose is False and cfg.working_set_mb == 512
    assert cfg.special_tokens == ["<|endoftext|>", "<|pad|>"] and cfg.warm_start == "base.tiktoken"
    assert cfg.seed == 3 and cfg.text_column == "body" and cfg.budget == 1_500_000 and cfg.hardcoded is True
    assert cfg.bad_utf8 == "replace"
    assert cfg.phases == [
        PhaseConfig("one", 10, [SourceConfig("data/"), SourceConfig("notes.txt", 2.0, "content", "file")]),
        PhaseConfig("phase2", 0, [SourceConfig("data/*.parquet")], 2048),  # sizes are ints inside
    ]
    assert cfg.phase_budget(cfg.phases[0]) == 1_500_000 and cfg.phase_budget(cfg.phases[1]) == 2048
    cfg.validate()


def test_working_set_is_the_text_held_not_the_budget(in_tmp):
    cfg = load_config(_write(in_tmp, "output: o/x.tiktoken\nworking_set_mb: 768\nphases: [{name: a, merges: 1, sources: [d]}]\n"))
    assert cfg.budget is None and cfg.working_set_mb == 768
    assert cfg.working_set_text() == 768 * 2**20 // 4  # toktoktok's sizing: 4 bytes per character held
    both = load_config(_write(in_tmp, "output: o/x.tiktoken\nworking_set_mb: 64\nbudget: 2GB\n"
                                      "phases: [{name: a, merges: 1, sources: [d]}]\n", "both.yaml"))
    assert both.budget == 2 * 1000**3 and both.working_set_text() == 16 << 20


def test_defaults_and_hardcoded_rule(in_tmp):
    cfg = load_config(_write(in_tmp, "output: o/x.tiktoken\nphases: [{name: a, merges: 1, sources: [{path: d}]}]\n"))
    assert cfg.hardcoded is None and cfg.use_hardcoded() is True  # from scratch
    cfg.warm_start = "b.tiktoken"
    assert cfg.use_hardcoded() is False  # not on a warm start unless asked
    assert cfg.seed == 0 and cfg.text_column == "text" and cfg.memory_limit == 2 * 1000**3 and cfg.verbose is None


@pytest.mark.parametrize(
    "text, needle",
    [
        ("output: o/x.tiktoken\nphases: [{name: a, merges: 1, sources: [{path: d}]}]\nfoo: 1\n",
         "run.yaml: unknown key 'foo'"),
        ("output: o/x.tiktoken\nphases:\n - {name: a, merges: 1, sources: [{path: d}]}\n"
         " - {name: b, merges: 1, sources: [{paht: d}]}\n",
         "run.yaml: phases[1].sources[0]: unknown key 'paht'"),
        ("output: o/x.tiktoken\nphases: [{name: a, merge: 1, sources: [{path: d}]}]\n",
         "run.yaml: phases[0]: unknown key 'merge'"),
        ("output: o/x.tiktoken\nwarm_start: {path: b}\nphases: [{name: a, merges: 1, sources: [{path: d}]}]\n",
         "run.yaml: warm_start: unknown key 'path'"),
        ("output: o/x.tiktoken\nwarm_start: {}\nphases: [{name: a, merges: 1, sources: [{path: d}]}]\n",
         "run.yaml: warm_start: needs file"),
        ("output: o/x.tiktoken\nphases: [{name: a, merges: ten, sources: [{path: d}]}]\n",
         "run.yaml: phases[0].merges: expected a whole number, got str 'ten'"),
        ("output: o/x.tiktoken\nphases: [{name: a, merges: -1, sources: [{path: d}]}]\n",
         "run.yaml: phases[0].merges: -1 is less than 0"),
        ("output: o/x.tiktoken\nphases: [{name: a, sources: [{path: d}]}]\n",
         "run.yaml: phases[0]: needs merges"),
        ("output: o/x.tiktoken\nphases: [{name: a, merges: 1}]\n", "run.yaml: phases[0]: needs sources"),
        ("output: o/x.tiktoken\nphases: []\n", "run.yaml: phases: needs at least one phase"),
        ("output: o/x.tiktoken\n", "run.yaml: phases: needs at least one phase"),
        ("output: o/x.tiktoken\nphases: [{name: a, merges: 1, sources: [{path: d, file: e}]}]\n",
         "run.yaml: phases[0].sources[0]: give exactly one of path: (file, folder or glob) or file:"),
        ("output: o/x.tiktoken\nphases: [{name: a, merges: 1, sources: [{weight: 2}]}]\n",
         "run.yaml: phases[0].sources[0]: give exactly one of"),
        ("output: o/x.tiktoken\nphases: [{name: a, merges: 1, sources: [{path: d, weight: 0}]}]\n",
         "run.yaml: phases[0].sources[0].weight: expected a number > 0"),
        ("output: o/x.tiktoken\nphases: [{name: a, merges: 1, sources: [{path: d, weight: 2}]}]\n",
         "phases[0].sources[0].weight: weights share a budget"),
        ("output: o/x.tiktoken\nphases:\n - {name: a, merges: 1, sources: [d]}\n - {name: a, merges: 1, sources: [d]}\n",
         "run.yaml: phases[1].name: phase 'a' is also phases[0]"),
        ("output: o/x.tiktoken\nbudget: lots\nphases: [{name: a, merges: 1, sources: [d]}]\n",
         "run.yaml: budget: size 'lots' is not understood"),
        ("output: o/x.tiktoken\nspecial_tokens: [a, a]\nphases: [{name: a, merges: 1, sources: [d]}]\n",
         "run.yaml: special_tokens[1]: 'a' is given twice"),
        ("output: o/x.tiktoken\nspecial_tokens: '<|x|>'\nphases: [{name: a, merges: 1, sources: [d]}]\n",
         "run.yaml: special_tokens: expected a list"),
        ("output: o/x.tiktoken\nverbose: 3\nphases: [{name: a, merges: 1, sources: [d]}]\n",
         "run.yaml: verbose: expected true or false"),
        ("output: o/x.tiktoken\nthreads: 1.5\nphases: [{name: a, merges: 1, sources: [d]}]\n",
         "run.yaml: threads: expected a whole number, got float 1.5"),
        ("output: o/x.tiktoken\nworking_set_mb: 0\nphases: [{name: a, merges: 1, sources: [d]}]\n",
         "run.yaml: working_set_mb: expected a number > 0"),
        ("output: o/x.tiktoken\nroles: {eos: x}\nphases: [{name: a, merges: 1, sources: [d]}]\n",
         "run.yaml: roles: unknown key 'eos' (known: bos_token, eos_token, pad_token, unk_token)"),
        ("output: o/x.tiktoken\nroles: {pad_token: ''}\nphases: [{name: a, merges: 1, sources: [d]}]\n",
         "run.yaml: roles.pad_token: expected a non-empty string"),
        ("output: o/x.tiktoken\nphases: [{name: a, merges: 1, sources: [d]}]\nthreads: 1\nthreads: 2\n",
         "run.yaml:4:1: not valid YAML (key 'threads' is given twice)"),
        ("output: o/x.tiktoken\nphases: [{name: a, merges: 1, sources: [d]\n", "run.yaml:3:1: not valid YAML"),
        ("- just\n- a list\n", "run.yaml: expected a mapping of keys, got a list"),
        ("", "run.yaml: the config is empty"),
        ("output: o/tokenizer.json\nphases: [{name: a, merges: 1, sources: [d]}]\n",
         "run.yaml: output: 'tokenizer.json' is a file toktok writes beside the .tiktoken file"),
        ("output: o/\nphases: [{name: a, merges: 1, sources: [d]}]\n", "run.yaml: output: 'o/' is a folder"),
    ],
)
def test_schema_errors_name_the_location(in_tmp, text, needle):
    with pytest.raises(ConfigError) as e:
        cfg = load_config(_write(in_tmp, text))
        cfg.validate()
    assert needle in str(e.value)
    assert "\n" not in str(e.value)


def test_missing_config_file(in_tmp):
    with pytest.raises(ConfigError, match="nope.yaml: no such config file"):
        load_config("nope.yaml")


def test_cli_config_error_is_one_line_exit_2(in_tmp):
    cfg = _write(in_tmp, "output: o/x.tiktoken\nphases: [{name: a, merges: 1, sources: [{paht: d}]}]\n")
    r = runner.invoke(app, ["train", "--config", str(cfg), "-q"])
    one_error_line(r, "run.yaml: phases[0].sources[0]: unknown key 'paht'")
    assert not (in_tmp / "o").exists()


# --- paths and overrides ------------------------------------------------------------------------


def test_relative_paths_resolve_against_the_current_folder(in_tmp):
    # the config lives in a subfolder, its paths are read from the current folder (as toktoktok does)
    (in_tmp / "conf").mkdir()
    (in_tmp / "text").mkdir()
    (in_tmp / "text" / "a.txt").write_text("hello hello world world world")
    cfg = _write(in_tmp / "conf", "output: out/rel/rel.tiktoken\nphases: [{name: a, merges: 3, sources: [{file: text/a.txt}]}]\n")
    r = runner.invoke(app, ["train", "--config", str(cfg), "-q"])
    assert r.exit_code == 0, r.output
    assert (in_tmp / "out" / "rel" / "rel.tiktoken").is_file()
    assert not (in_tmp / "conf" / "out").exists()


def test_command_line_overrides(in_tmp):
    cfg_path = _write(in_tmp, "output: o/x.tiktoken\nseed: 1\nthreads: 1\nspecial_tokens: [a]\n"
                              "phases: [{name: a, merges: 5, sources: [d]}]\n")
    cfg = build_config(str(cfg_path), [], {"out": "elsewhere", "merges": 9, "seed": 4, "special_tokens": ["<|b|>"]})
    assert cfg.out == "elsewhere" and cfg.tiktoken_name == "x.tiktoken"  # the file keeps its name
    assert cfg.phases[0].merges == 9 and cfg.seed == 4 and cfg.threads == 1 and cfg.special_tokens == ["<|b|>"]
    with pytest.raises(ConfigError, match="sources given both"):
        build_config(str(cfg_path), ["data/"], {})
    two = _write(in_tmp, "output: o/x.tiktoken\nphases: [{name: a, merges: 5, sources: [d]}, {name: b, merges: 5, sources: [d]}]\n", "two.yaml")
    with pytest.raises(ConfigError, match="--merges: .*two.yaml has 2 phases"):
        build_config(str(two), [], {"merges": 3})
    no_out = _write(in_tmp, "phases: [{name: a, merges: 5, sources: [d]}]\n", "noout.yaml")
    with pytest.raises(ConfigError, match="output: missing"):
        build_config(str(no_out), [], {})
    assert build_config(str(no_out), [], {"out": "o2"}).out == "o2"


def test_cli_out_overrides_the_config(in_tmp):
    cfg = _write(in_tmp, "output: o/x.tiktoken\nphases: [{name: a, merges: 20, sources: [{file: data_fixtures/corpus/notes.txt}]}]\n")
    r = runner.invoke(app, ["train", "--config", str(cfg), "--out", "other", "--merges", "7", "-q"])
    assert r.exit_code == 0, r.output
    assert not (in_tmp / "o").exists()
    assert (in_tmp / "other" / "x.tiktoken").is_file()
    con = duckdb.connect(str(in_tmp / "other" / "run.duckdb"), read_only=True)
    assert con.execute("select count(*), min(phase), max(phase) from merges").fetchone() == (7, "a", "a")
    stored = json.loads(con.execute("select value from meta where key = 'config'").fetchone()[0])
    assert stored["config_file"] == str(cfg) and stored["phases"][0]["merges"] == 7


def test_force_replaces_only_toktok_folders(in_tmp):
    (in_tmp / "mine").mkdir()
    (in_tmp / "mine" / "precious.txt").write_text("keep me")
    r = runner.invoke(app, ["train", "data_fixtures/corpus/notes.txt", "--out", "mine", "--merges", "1", "--force", "-q"])
    one_error_line(r, "not a toktok output folder")
    assert (in_tmp / "mine" / "precious.txt").read_text() == "keep me"
    r = runner.invoke(app, ["train", "data_fixtures/corpus/notes.txt", "--out", ".", "--merges", "1", "--force", "-q"])
    one_error_line(r, "is the current folder")


# --- folders whose .tiktoken has another name ---------------------------------------------------


def test_load_encoding_and_verify_find_the_named_tiktoken(in_tmp):
    cfg = _write(in_tmp, "output: o/named.tiktoken\nspecial_tokens: ['<|endoftext|>']\n"
                          "phases: [{name: a, merges: 30, sources: [{file: data_fixtures/corpus/notes.txt}]}]\n")
    r = runner.invoke(app, ["train", "--config", str(cfg), "-q"])
    assert r.exit_code == 0, r.output
    out = in_tmp / "o"
    assert sorted(p.name for p in out.iterdir()) == [
        "named.tiktoken", "run.duckdb", "special_tokens_map.json", "tokenizer.json", "tokenizer_config.json"]
    assert find_tiktoken(out) == out / "named.tiktoken"
    enc = toktok.load_encoding(out)
    assert enc.n_vocab == 256 + 1161 + 30 + 1 == load_hf(out).get_vocab_size()
    assert verify(out, ["some text <|endoftext|> more"]).ok
    r = runner.invoke(app, ["verify", str(out)])
    assert r.exit_code == 0, r.output
    shutil.copy(out / "named.tiktoken", out / "second.tiktoken")
    with pytest.raises(VocabError, match="several .tiktoken files"):
        toktok.load_encoding(out)


# --- the examples run unchanged -----------------------------------------------------------------

EXAMPLE_FILES = sorted(p.name for p in EXAMPLES.glob("*.yaml"))


def test_examples_exist():
    assert {"scratch.yaml", "phases.yaml", "warm_start_gpt2_layout.yaml", "warm_start_hf.yaml", "budget.yaml"} <= set(EXAMPLE_FILES)


@pytest.mark.parametrize("name", EXAMPLE_FILES)
def test_example_runs_unchanged(in_tmp, name):
    import subprocess
    import sys

    path = EXAMPLES / name
    cfg = load_config(path)
    # as a user runs it: its own process, so that a memory budget (working_set_mb) is measured
    # against toktok's own footprint, not the test session's
    exe = Path(sys.executable).parent / "toktok"
    r = subprocess.run([str(exe), "train", "--config", str(path), "-q"], capture_output=True, text=True, cwd=os.getcwd())
    assert r.returncode == 0, r.stderr
    out = in_tmp / cfg.out
    assert (out / cfg.tiktoken_name).is_file() and (out / "tokenizer.json").is_file()
    con = duckdb.connect(str(out / "run.duckdb"), read_only=True)
    learned = dict(con.execute("select phase, count(*) from merges where not reused group by phase").fetchall())
    assert learned == {ph.name: ph.merges for ph in cfg.phases if ph.merges}
    enc = toktok.load_encoding(out)
    assert set(cfg.special_tokens) <= enc.special_tokens_set


def test_toktoktok_examples_use_only_toktoktok_keys():
    """scratch, phases and the warm starts are plain toktoktok configs (no toktok-only key)."""
    import yaml

    ours = {"seed", "text_column", "budget", "hardcoded", "bad_utf8", "weight", "roles", "engine", "ray_address"}
    for name in ["scratch.yaml", "phases.yaml", "warm_start_gpt2_layout.yaml", "warm_start_hf.yaml"]:
        doc = yaml.safe_load((EXAMPLES / name).read_text())
        keys = set(doc) | {k for ph in doc["phases"] for k in ph} | {
            k for ph in doc["phases"] for s in ph["sources"] for k in s}
        assert not keys & ours, (name, keys & ours)


def test_config_dataclass_round_trips_to_json():
    cfg = TrainConfig(["a"], "o", merges=3)
    d = cfg.to_dict()
    assert json.loads(json.dumps(d))["merges"] == 3 and d["phases"] == [] and d["tiktoken_name"] == "tokenizer.tiktoken"
    assert cfg.phase_list() == [PhaseConfig("main", 3, [SourceConfig("a")])]
    assert os.fspath(cfg.describe().layout.tiktoken) == os.path.join("o", "tokenizer.tiktoken")


# --- YAML merge keys, the memory limit's upper bound (issue 13) ---------------------------------

MERGE_KEYS = """\
output: out/m/tok.tiktoken
phases:
  - &english
    name: english
    merges: 10
    budget: 1MB
    sources: &srcs
      - path: data_fixtures/corpus/notes.txt
        weight: 2
  - <<: *english
    name: code
    merges: 5
  - <<: [*english]
    name: third
    budget: 3MB
    sources: *srcs
"""


def test_yaml_merge_keys(in_tmp):
    cfg = load_config(_write(in_tmp, MERGE_KEYS))
    assert [(p.name, p.merges, p.budget) for p in cfg.phases] == [
        ("english", 10, 10**6), ("code", 5, 10**6), ("third", 10, 3 * 10**6)]  # own keys override merged ones
    assert all(p.sources == [SourceConfig("data_fixtures/corpus/notes.txt", weight=2.0)] for p in cfg.phases)
    r = runner.invoke(app, ["train", "--config", "run.yaml", "-q", "--memory-limit", "256MB"])
    assert r.exit_code == 0, r.output
    assert toktok.load_encoding(in_tmp / "out" / "m").n_vocab == 256 + 1161 + 25


@pytest.mark.parametrize("text, where", [
    # a key twice in a mapping that also merges one in; twice inside a merged mapping; plain
    (MERGE_KEYS.replace("    name: code\n", "    name: code\n    name: again\n"), "run.yaml:12:5:"),
    (MERGE_KEYS.replace("    merges: 10\n", "    merges: 10\n    merges: 11\n", 1), "run.yaml:6:5:"),
    (MERGE_KEYS.replace("<<: [*english]", "<<: [{budget: 3KiB, budget: 4KiB}, *english]"), "run.yaml:13:25:"),
])
def test_duplicate_keys_are_still_refused_with_merge_keys(in_tmp, text, where):
    with pytest.raises(ConfigError) as e:
        load_config(_write(in_tmp, text))
    assert f"/{where} not valid YAML (key " in str(e.value) and "is given twice" in str(e.value), str(e.value)


def test_memory_limit_beyond_the_machine(in_tmp):
    from toktok.config import machine_memory

    ram = machine_memory()
    assert ram and ram > 0
    for big in ("99999999999999999999TB", "100000TB", f"{ram + (1 << 30)}"):
        with pytest.raises(ConfigError) as e:
            TrainConfig(["x"], "o", memory_limit=big).validate()
        assert str(e.value).startswith(f"--memory-limit {big} is more than this machine's memory")
        assert f"pass at most {ram >> 30}GiB" in str(e.value)
    for ok in (f"{ram}", "2GB", "16MiB"):  # the machine's memory, the default and the smallest pass
        TrainConfig(["x"], "o", memory_limit=ok).validate()
