"""Warm start keeps every id of the base (from a .tiktoken in any layout and from a tokenizer.json
made by HF's BpeTrainer), tiktoken and HF agree on the grown vocabulary, words the new tokens do
not touch encode exactly as before, refusals say why, and ``toktok convert`` round-trips."""
from __future__ import annotations

import json
from pathlib import Path

import duckdb
import polars as pl
import pytest
import tiktoken
from conftest import FIXTURES, FUZZ
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from oracles.reference_bpe import train as reference_train
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from typer.testing import CliRunner

import toktok
from toktok.cli import app
from toktok.errors import VocabError
from toktok.formats.hf import bytelevel_to_token, load_hf, token_to_bytelevel
from toktok.formats.specials import follows_convention
from toktok.formats.tiktoken import read_tiktoken_ranks, write_tiktoken
from toktok.count.scan import count_words
from toktok.patterns import DEFAULT, NAMED
from toktok.vocab import PATTERN, Vocab, hardcoded_tokens
from toktok.warmstart import convert, load_base, read_hf_base, read_tiktoken_base

runner = CliRunner()
NOTES = (FIXTURES / "notes.txt").read_text()
SAMPLE = pl.read_parquet(FIXTURES / "sample.parquet")["text"].to_list()
HF_SPECIALS = ["<|endoftext|>", "<|pad|>"]
NEW_MERGES = 150


def _bpe_trainer_json(path: Path, vocab_size: int, specials: list[str], alphabet: bool = True) -> Path:
    """A tokenizer.json from HF's own BpeTrainer (byte-level), trained on notes.txt."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    kw = {"initial_alphabet": pre_tokenizers.ByteLevel.alphabet()} if alphabet else {}
    tok.train_from_iterator(NOTES.splitlines(keepends=True), trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=specials, show_progress=False, **kw))
    tok.save(str(path))
    return path


def _word_counts(texts: list[str], specials: list[str], pattern=DEFAULT) -> dict[bytes, int]:
    table = count_words(texts, specials=specials, pattern=pattern).sort("word")
    return dict(zip(table["word"].to_list(), table["count"].to_list()))


def _check_untouched_words_keep_base_ids(base_ids, new_enc: tiktoken.Encoding, base_tokens: list, new_tokens: set, words):
    """A word whose base encoding has no adjacent pair joined by a new token encodes to the base ids."""
    untouched = 0
    for w in words:
        ids = base_ids(w)
        joined = any(base_tokens[a] + base_tokens[b] in new_tokens for a, b in zip(ids, ids[1:]))
        if not joined:
            untouched += 1
            assert new_enc.encode_ordinary(w.decode()) == ids, w
    assert untouched > len(words) // 2
    return untouched


# --- from a tokenizer.json made by BpeTrainer ---------------------------------------------------


@pytest.fixture(scope="module")
def hf_base(tmp_path_factory) -> Path:
    return _bpe_trainer_json(tmp_path_factory.mktemp("hf") / "tokenizer.json", 600, HF_SPECIALS)


@pytest.fixture(scope="module")
def warm_hf(hf_base, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("warm_hf") / "out"
    r = runner.invoke(app, ["train", str(FIXTURES / "sample.parquet"), "--out", str(out), "--merges", str(NEW_MERGES),
                            "--warm-start", str(hf_base), "-s", "<|endoftext|>", "-s", "<|new|>", "-q"])
    assert r.exit_code == 0, r.output
    assert "warning" not in r.output  # ByteLevel's own regex is GPT-2's: kept, nothing to warn about
    return out


def test_a_warm_start_keeps_its_bases_pattern(warm_hf):
    """BpeTrainer's base splits with ByteLevel's own regex, GPT-2's: the new tokenizer splits with gpt2."""
    con = duckdb.connect(str(warm_hf / "run.duckdb"), read_only=True)
    meta = json.loads(con.execute("select value from meta where key = 'pattern'").fetchone()[0])
    assert (meta["name"], meta["from"]) == ("gpt2", "warm start")
    doc = json.loads((warm_hf / "tokenizer.json").read_text())
    assert doc["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] == NAMED["gpt2"].hf
    assert toktok.load_encoding(warm_hf)._pat_str == NAMED["gpt2"].regex


def test_hf_base_layout(hf_base):
    doc = json.loads(hf_base.read_text())
    base = read_hf_base(hf_base)
    v = base.vocab
    assert v.pinned == {0: "<|endoftext|>", 1: "<|pad|>"}  # BpeTrainer puts specials first
    assert len(v.tokens) == 600 and v.tokens[2] == b"!"  # the bytes at 2..257, GPT-2's order
    for name, i in doc["model"]["vocab"].items():
        assert v.tokens[i] == (name.encode() if i in v.pinned else bytelevel_to_token(name))


def test_every_base_id_is_kept_from_tokenizer_json(hf_base, warm_hf):
    base = json.loads(hf_base.read_text())
    new = json.loads((warm_hf / "tokenizer.json").read_text())
    # all of them, in the HF file ...
    assert all(new["model"]["vocab"][name] == i for name, i in base["model"]["vocab"].items())
    new_added = {a["content"]: a["id"] for a in new["added_tokens"]}
    assert all(new_added[a["content"]] == a["id"] for a in base["added_tokens"])
    # ... and in tiktoken
    enc = toktok.load_encoding(warm_hf)
    for name, i in base["model"]["vocab"].items():
        if name in HF_SPECIALS:
            assert enc.encode_single_token(name) == i
        else:
            assert enc.encode_single_token(bytelevel_to_token(name)) == i
    # new tokens after the largest base id, then the new special
    assert enc.n_vocab == 600 + NEW_MERGES + 1
    assert new_added["<|new|>"] == 600 + NEW_MERGES
    con = duckdb.connect(str(warm_hf / "run.duckdb"), read_only=True)
    assert con.execute("select min(token_id), max(token_id), count(*) from merges where not reused").fetchone() == (
        600, 600 + NEW_MERGES - 1, NEW_MERGES)
    kinds = dict(con.execute("select kind, count(*) from vocab group by kind").fetchall())
    assert kinds == {"special": 3, "byte": 256, "base": 600 - 258, "merge": NEW_MERGES}  # no hardcoded tokens
    ws = json.loads(con.execute("select value from meta where key = 'warm_start'").fetchone()[0])
    assert ws["specials"] == {"<|endoftext|>": 0, "<|pad|>": 1} and ws["ids"] == 600


def test_tiktoken_hf_and_transformers_agree_after_warm_start(warm_hf):
    from transformers import PreTrainedTokenizerFast

    enc = toktok.load_encoding(warm_hf)
    hf = load_hf(warm_hf)
    tf = PreTrainedTokenizerFast.from_pretrained(str(warm_hf))
    texts = SAMPLE[:40] + ["<|endoftext|>hello<|pad|> world<|new|>", "ΑΒΓ  мир\r\n\r\n  中文 12345 😀"]
    for t in texts:
        ids = enc.encode(t, allowed_special="all")
        assert hf.encode(t, add_special_tokens=False).ids == ids
        assert tf(t, add_special_tokens=False)["input_ids"] == ids
        assert enc.decode(ids) == t and tf.decode(ids) == t
    assert enc.encode("<|endoftext|><|pad|>", allowed_special="all") == [0, 1]


def test_untouched_words_keep_their_base_encoding_hf(hf_base, warm_hf):
    base_hf = Tokenizer.from_file(str(hf_base))
    v = read_hf_base(hf_base).vocab
    enc = toktok.load_encoding(warm_hf)
    tokens = read_tiktoken_ranks(next(warm_hf.glob("*.tiktoken")))[0]
    new_tokens = {tokens[i] for i in range(600, 600 + NEW_MERGES)}
    words = list(_word_counts(SAMPLE, HF_SPECIALS, NAMED["gpt2"]))

    def base_ids(w):  # the base's own BPE (HF, merge list) on the word
        return [t.id for t in base_hf.model.tokenize(token_to_bytelevel(w))]

    _check_untouched_words_keep_base_ids(base_ids, enc, v.tokens, new_tokens, words)


def test_warm_merges_equal_the_reference(hf_base, warm_hf):
    v = read_hf_base(hf_base).vocab  # placeholders at the special ids: no word holds them
    wc = _word_counts(SAMPLE, ["<|endoftext|>", "<|pad|>", "<|new|>"], NAMED["gpt2"])
    ref_tokens, ref_merges = reference_train(wc, v.tokens, NEW_MERGES)
    con = duckdb.connect(str(warm_hf / "run.duckdb"), read_only=True)
    got = con.execute("select left_id, right_id, token_id, count, reused from merges order by merge_index").fetchall()
    assert got == [tuple(m) for m in ref_merges]


# --- from a .tiktoken, in layouts other than bytes at 0..255 ------------------------------------


def _gpt2_layout(tmp: Path) -> tuple[Path, dict[str, int]]:
    """GPT-2's layout in small: bytes at ranks 0..255 in GPT-2's order, merges, <|endoftext|> next."""
    src = _bpe_trainer_json(tmp / "plain.json", 456, [])
    tt = tmp / "gpt2.tiktoken"
    convert(src, tt)
    specials = {"<|endoftext|>": 456}
    (tmp / "gpt2.special_tokens.json").write_text(json.dumps(specials))
    return tt, specials


def _bytes_last_layout(tmp: Path) -> tuple[Path, dict[str, int]]:
    """Multi-byte tokens first, the 256 bytes last (in reverse byte order), a special in between."""
    v = read_hf_base(_bpe_trainer_json(tmp / "plain.json", 456, [])).vocab
    multi = [t for t in v.tokens if len(t) > 1]
    tokens = multi[:100] + [b"<|sep|>"] + multi[100:] + [bytes([b]) for b in range(255, -1, -1)]
    vocab = Vocab(tokens, [], {100: "<|sep|>"})
    tt = tmp / "odd.tiktoken"
    write_tiktoken(vocab, tt)
    specials = {"<|sep|>": 100}
    (tmp / "odd.special_tokens.json").write_text(json.dumps(specials))
    return tt, specials


@pytest.mark.parametrize("layout", [_gpt2_layout, _bytes_last_layout], ids=["gpt2", "bytes_last"])
def test_every_base_id_is_kept_from_tiktoken(tmp_path, layout):
    tt, specials = layout(tmp_path)
    base_ranks = read_tiktoken_ranks(tt)[0]
    assert any(base_ranks[i] != bytes([i]) for i in range(256) if i in base_ranks)  # not the identity layout
    # GPT-2's <|endoftext|> right after the last rank follows toktoktok's convention: the base counts
    # as bare and the listed specials come after the new ranks; a special inside the range keeps its id
    bare = follows_convention(base_ranks, specials)
    assert bare == (layout is _gpt2_layout)
    n_base = len(base_ranks) if bare else max([*base_ranks, *specials.values()]) + 1
    out = tmp_path / "out"
    cfg = tmp_path / "warm.yaml"
    cfg.write_text(f"output: {out / 'warm.tiktoken'}\nspecial_tokens: ['<|endoftext|>']\n"
                   f"warm_start: {{file: {tt}}}\n"
                   f"phases: [{{name: more, merges: 100, sources: [{{file: {FIXTURES / 'extra.jsonl'}}}]}}]\n")
    r = runner.invoke(app, ["train", "--config", str(cfg), "-q"])
    assert r.exit_code == 0, r.output

    enc = toktok.load_encoding(out)
    new_ranks = read_tiktoken_ranks(out / "warm.tiktoken")[0]
    assert all(new_ranks[i] == t for i, t in base_ranks.items())  # every rank, same id
    if not bare:
        for s, i in specials.items():
            assert enc.encode_single_token(s) == i
    assert sorted(set(new_ranks) - set(base_ranks)) == list(range(n_base, n_base + 100))
    # a special given in the config comes after everything (the base's, when it is bare, too)
    assert enc.encode_single_token("<|endoftext|>") == n_base + 100
    assert not (out / "warm.special_tokens.json").exists() if bare else \
        json.loads((out / "warm.special_tokens.json").read_text()) == {**specials, "<|endoftext|>": n_base + 100}
    hf = load_hf(out)
    texts = [json.loads(line)["text"] for line in (FIXTURES / "extra.jsonl").read_text().splitlines()[:30]]
    for t in texts + ["a<|endoftext|>b"]:
        assert hf.encode(t, add_special_tokens=False).ids == enc.encode(t, allowed_special="all")

    # untouched words: exactly the base's ids (the base encoded by tiktoken, ranks = ids)
    base_enc = tiktoken.Encoding("base", pat_str=PATTERN, mergeable_ranks={t: i for i, t in base_ranks.items()},
                                 special_tokens=specials)
    base_tokens = [base_ranks.get(i, b"") for i in range(n_base)]
    new_tokens = {new_ranks[i] for i in range(n_base, n_base + 100)}
    all_specials = [*specials, "<|endoftext|>"]
    texts = [json.loads(line)["text"] for line in (FIXTURES / "extra.jsonl").read_text().splitlines()]
    wc = _word_counts(texts, all_specials)
    _check_untouched_words_keep_base_ids(lambda w: base_enc.encode_ordinary(w.decode()), enc, base_tokens, new_tokens, list(wc))

    # and the merges are the reference's on top of the base (placeholders at the special ids)
    base_vocab = read_tiktoken_base(tt).vocab
    _, ref_merges = reference_train(wc, base_vocab.tokens, 100)
    con = duckdb.connect(str(out / "run.duckdb"), read_only=True)
    got = con.execute("select left_id, right_id, token_id, count, reused from merges order by merge_index").fetchall()
    assert got == [tuple(m) for m in ref_merges]


def test_hardcoded_tokens_only_when_asked(tmp_path):
    tt, _ = _gpt2_layout(tmp_path)
    args = ["train", str(FIXTURES / "notes.txt"), "--merges", "10", "--warm-start", str(tt), "-q"]
    r = runner.invoke(app, [*args, "--out", str(tmp_path / "plain")])
    assert r.exit_code == 0, r.output
    enc = toktok.load_encoding(tmp_path / "plain")
    assert enc.n_vocab == 457 + 10
    assert enc.encode_single_token("<|endoftext|>") == 456 + 10  # the bare base's special, after the new ranks
    r = runner.invoke(app, [*args, "--out", str(tmp_path / "hc"), "--hardcoded"])
    assert r.exit_code == 0, r.output
    ranks = read_tiktoken_ranks(tmp_path / "hc" / "tokenizer.tiktoken")[0]
    base = read_tiktoken_ranks(tt)[0]
    added = [t for t in hardcoded_tokens() if t not in set(base.values())]
    assert [ranks[i] for i in range(456, 456 + len(added))] == added  # after every base rank
    assert len(ranks) == 456 + len(added) + 10


def test_warm_start_from_a_toktok_output_continues_its_history(tmp_path):
    """Two runs (the second warm-started from the first's folder) equal one two-phase run."""
    notes, extra = FIXTURES / "notes.txt", FIXTURES / "extra.jsonl"
    r = runner.invoke(app, ["train", str(notes), "--out", str(tmp_path / "a"), "--merges", "40", "-q"])
    assert r.exit_code == 0, r.output
    r = runner.invoke(app, ["train", str(extra), "--out", str(tmp_path / "b"), "--merges", "30",
                            "--warm-start", str(tmp_path / "a"), "-q"])
    assert r.exit_code == 0, r.output
    cfg = tmp_path / "two.yaml"
    cfg.write_text(f"output: {tmp_path / 'c' / 'tokenizer.tiktoken'}\nphases:\n"
                   f"  - {{name: a, merges: 40, sources: [{{file: {notes}}}]}}\n"
                   f"  - {{name: b, merges: 30, sources: [{{file: {extra}}}]}}\n")
    r = runner.invoke(app, ["train", "--config", str(cfg), "-q"])
    assert r.exit_code == 0, r.output
    assert (tmp_path / "b" / "tokenizer.tiktoken").read_bytes() == (tmp_path / "c" / "tokenizer.tiktoken").read_bytes()


# --- refusals -----------------------------------------------------------------------------------


def _edited(hf_base: Path, tmp_path: Path, edit) -> Path:
    doc = json.loads(hf_base.read_text())
    edit(doc)
    p = tmp_path / "edited.json"
    p.write_text(json.dumps(doc))
    return p


def _swap_merges(doc):
    m = doc["model"]["merges"]
    m[10], m[20] = m[20], m[10]


def _wordpiece(doc):
    doc["model"]["type"] = "WordPiece"


def _whitespace(doc):
    doc["pre_tokenizer"] = {"type": "Whitespace"}


def _non_special(doc):
    doc["added_tokens"].append({"id": 600, "content": "hello", "single_word": False, "lstrip": False,
                                "rstrip": False, "normalized": True, "special": False})


def _hole(doc):
    doc["added_tokens"].append({"id": 605, "content": "<|far|>", "single_word": False, "lstrip": False,
                                "rstrip": False, "normalized": False, "special": True})


def _not_bytelevel_token(doc):
    v = doc["model"]["vocab"]
    name = next(n for n, i in v.items() if i == 599)
    v["日本"] = v.pop(name)
    doc["model"]["merges"] = [m for m in doc["model"]["merges"] if "".join(m if isinstance(m, list) else m.split()) != name]


def _suffix(doc):
    doc["model"]["end_of_word_suffix"] = "</w>"


@pytest.mark.parametrize("edit, needle", [
    (_swap_merges, "the merge order disagrees with the id order"),
    (_wordpiece, "is WordPiece, not BPE"),
    (_whitespace, "not byte-level: the pre-tokenizer has no ByteLevel step"),
    (_non_special, "added token 'hello' (id 600) is not special"),
    (_hole, "id 600 is neither a token nor a special token"),
    (_not_bytelevel_token, "not byte-level: token '日本'"),
    (_suffix, "end_of_word_suffix"),
])
def test_tokenizer_json_refusals(hf_base, tmp_path, edit, needle):
    with pytest.raises(VocabError) as e:
        load_base(_edited(hf_base, tmp_path, edit))
    assert needle in str(e.value)


def test_missing_byte_alphabet_is_refused(tmp_path):
    p = _bpe_trainer_json(tmp_path / "tokenizer.json", 400, [], alphabet=False)
    with pytest.raises(VocabError, match="single-byte tokens are missing.*initial_alphabet"):
        load_base(p)


def test_tiktoken_refusals(tmp_path):
    v = Vocab.base(hardcoded=False)
    v.tokens += [b"ab", b"abc"]
    tt = tmp_path / "holes.tiktoken"
    tt.write_bytes(b"".join(b"%s %d\n" % (__import__("base64").b64encode(t), i if i < 257 else i + 3)
                            for i, t in enumerate(v.tokens)))
    with pytest.raises(VocabError, match="id 257 is neither a rank nor a special token"):
        load_base(tt)
    (tmp_path / "holes.special_tokens.json").write_text('{"<|a|>": 257, "<|b|>": 258, "<|c|>": 259}')
    assert load_base(tt).vocab.pinned == {257: "<|a|>", 258: "<|b|>", 259: "<|c|>"}  # holes filled by specials
    (tmp_path / "holes.special_tokens.json").write_text('{"<|a|>": 5}')
    with pytest.raises(VocabError, match="special token '<|a|>' has id 5, which is also the rank"):
        load_base(tt)


def test_cli_refusal_is_one_line(hf_base, tmp_path):
    bad = _edited(hf_base, tmp_path, _swap_merges)
    out = tmp_path / "o"
    r = runner.invoke(app, ["train", str(FIXTURES / "notes.txt"), "--out", str(out), "--merges", "5",
                            "--warm-start", str(bad), "-q"])
    assert r.exit_code == 2, r.output
    lines = [ln for ln in r.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and "merge order disagrees" in lines[0]
    assert not out.exists()


def test_special_tokens_keep_ids_and_collisions_are_refused(hf_base, tmp_path):
    # a config special equal to a base special is the base's (same id), not a second one
    out = tmp_path / "o"
    r = runner.invoke(app, ["train", str(FIXTURES / "notes.txt"), "--out", str(out), "--merges", "5",
                            "--warm-start", str(hf_base), "-s", "<|pad|>", "-q"])
    assert r.exit_code == 0, r.output
    assert toktok.load_encoding(out).encode("<|pad|>", allowed_special="all") == [1]
    # a new special that a base special starts is refused (tiktoken and HF would cut differently)
    r = runner.invoke(app, ["train", str(FIXTURES / "notes.txt"), "--out", str(tmp_path / "p"), "--merges", "5",
                            "--warm-start", str(hf_base), "-s", "<|pad|>x", "-q"])
    assert r.exit_code == 2 and "prefix" in r.output
    # a new special whose bytes are a base token is refused
    r = runner.invoke(app, ["train", str(FIXTURES / "notes.txt"), "--out", str(tmp_path / "q"), "--merges", "5",
                            "--warm-start", str(hf_base), "-s", "the", "-q"])
    assert r.exit_code == 2 and "collides" in r.output


# --- convert ------------------------------------------------------------------------------------


def test_convert_round_trip_keeps_every_id(hf_base, tmp_path):
    r = runner.invoke(app, ["convert", str(hf_base), str(tmp_path / "t" / "base.tiktoken")])
    assert r.exit_code == 0, r.output
    tt = tmp_path / "t" / "base.tiktoken"
    assert json.loads((tmp_path / "t" / "base.special_tokens.json").read_text()) == {"<|endoftext|>": 0, "<|pad|>": 1}
    doc = json.loads(hf_base.read_text())
    ranks = read_tiktoken_ranks(tt)[0]
    assert sorted(ranks) == list(range(2, 600))  # ids 0 and 1 are the specials
    for name, i in doc["model"]["vocab"].items():
        if i > 1:
            assert ranks[i] == bytelevel_to_token(name)
    enc = toktok.load_encoding(tt)  # specials from the list beside it
    assert enc.encode("<|pad|>", allowed_special="all") == [1]
    # and back: a tokenizer.json with the same ids, checked against tiktoken
    r = runner.invoke(app, ["convert", str(tt), str(tmp_path / "back")])
    assert r.exit_code == 0, r.output
    back = json.loads((tmp_path / "back" / "tokenizer.json").read_text())
    assert back["model"]["vocab"] == doc["model"]["vocab"]
    assert {a["content"]: a["id"] for a in back["added_tokens"]} == {"<|endoftext|>": 0, "<|pad|>": 1}
    hf = load_hf(tmp_path / "back")
    for t in SAMPLE[:20] + ["<|endoftext|>x<|pad|>"]:
        assert hf.encode(t, add_special_tokens=False).ids == enc.encode(t, allowed_special="all")


def test_convert_refusals(hf_base, tmp_path):
    bad = _edited(hf_base, tmp_path, _swap_merges)
    r = runner.invoke(app, ["convert", str(bad), str(tmp_path / "x.tiktoken")])
    assert r.exit_code == 2 and "merge order disagrees" in r.output
    r = runner.invoke(app, ["convert", str(tmp_path / "nope.json"), str(tmp_path / "x.tiktoken")])
    assert r.exit_code == 2 and "no such file" in r.output


# --- fuzz: every base id is kept, whatever the base -------------------------------------------


FUZZ_TEXT = NOTES[:4000]
FUZZ_ALPHABET = b"etaoinsh .\n"


@st.composite
def _random_base(draw):
    """A byte-level base in a random layout: the 256 bytes, tokens built by joining two earlier
    ones (so every token has a merge, as a tokenizer.json needs), and special tokens inside the
    id range (HF's layout) or after it. Returns (entries by id: bytes or special str, kind)."""
    multi: list[bytes] = []
    have = {bytes([b]) for b in range(256)}
    for _ in range(draw(st.integers(0, 40))):
        pool = [bytes([c]) for c in FUZZ_ALPHABET] + multi
        t = draw(st.sampled_from(pool)) + draw(st.sampled_from(pool))
        if t not in have:
            have.add(t)
            multi.append(t)
    singles = [bytes([b]) for b in range(256)]
    layout = draw(st.sampled_from(["bytes_first", "bytes_last", "shuffled_bytes", "shuffled"]))
    if layout == "bytes_first":
        entries = singles + multi
    elif layout == "bytes_last":
        entries = multi + singles[::-1]
    elif layout == "shuffled_bytes":
        entries = draw(st.permutations(singles)) + multi
    else:
        entries = draw(st.permutations(singles + multi))
    entries = list(entries)
    for k in range(draw(st.integers(0, 3))):
        at = draw(st.one_of(st.just(len(entries)), st.integers(0, len(entries))))  # often after the last rank
        entries.insert(at, f"<|s{k}|>")
    return entries, draw(st.sampled_from(["tiktoken", "tokenizer.json"]))


@settings(max_examples=8 * FUZZ, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(base=_random_base(), merges=st.integers(0, 30), hardcoded=st.booleans(), keep=st.booleans(), new_special=st.booleans())
# specials inside the ranks and right after the last one, no merge after them: HF keeps the last as an
# added token only, as tiktoken does (it was a model entry too: one more than tiktoken's ranks)
@example(base=(["<|a|>", *(bytes([b]) for b in range(256)), b"ab", "<|b|>"], "tiktoken"), merges=0, hardcoded=False,
         keep=False, new_special=False)
def test_fuzz_warm_start_keeps_every_base_id(tmp_path_factory, base, merges, hardcoded, keep, new_special):
    from toktok.config import TrainConfig
    from toktok.formats.hf import write_hf
    from toktok.pipeline import train

    entries, kind = base
    d = tmp_path_factory.mktemp("fuzz_ws")
    specials = {e: i for i, e in enumerate(entries) if isinstance(e, str)}
    ranks = {i: e for i, e in enumerate(entries) if isinstance(e, bytes)}
    if kind == "tiktoken":
        src = d / "base.tiktoken"
        src.write_bytes(b"".join(b"%s %d\n" % (__import__("base64").b64encode(t), i) for i, t in ranks.items()))
        (d / "base.special_tokens.json").write_text(json.dumps(specials))
    else:
        tokens = [e.encode() if isinstance(e, str) else e for e in entries]
        write_hf(Vocab(tokens, [], {i: s for s, i in specials.items()}), d)
        src = d / "tokenizer.json"
    corpus = d / "corpus.txt"
    corpus.write_text(FUZZ_TEXT)
    asked = ([next(iter(specials))] if keep and specials else []) + (["<|new|>"] if new_special else [])
    out = d / "out"
    train(TrainConfig([str(corpus)], str(out), merges=merges, warm_start=str(src), hardcoded=hardcoded,
                      special_tokens=asked, verify_slices=5, verbose=False))

    # specials right after the last rank (toktoktok's convention): a bare base, its specials applied
    # again after the new ranks; anywhere else: every special keeps its id, declared beside the .tiktoken
    bare = follows_convention(ranks, specials)
    n_base = len(ranks) if bare else len(entries)
    new_ranks = read_tiktoken_ranks(out / "tokenizer.tiktoken")[0]
    assert all(new_ranks[i] == t for i, t in ranks.items())  # every rank, same id
    grown = sorted(set(new_ranks) - set(ranks))
    assert grown == list(range(n_base, n_base + len(grown)))  # new tokens right after the base
    assert len(grown) <= merges + (len(hardcoded_tokens()) if hardcoded else 0)
    enc = toktok.load_encoding(out)
    if bare:
        order = asked + [s for s in specials if s not in asked]
        want = {s: n_base + len(grown) + k for k, s in enumerate(order)}
        assert not (out / "tokenizer.special_tokens.json").exists()
    else:
        want = {**specials, **({"<|new|>": n_base + len(grown)} if new_special else {})}
        assert json.loads((out / "tokenizer.special_tokens.json").read_text()) == want
    assert {s: enc.encode_single_token(s) for s in want} == want
    assert enc.n_vocab == max([*new_ranks, *want.values()]) + 1
    doc = json.loads((out / "tokenizer.json").read_text())
    vocab = doc["model"]["vocab"]
    assert all(vocab[token_to_bytelevel(t)] == i for i, t in ranks.items())
    added = {a["content"]: a["id"] for a in doc["added_tokens"]}
    assert added == want
