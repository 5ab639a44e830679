"""Each stage's entry called on its own with plain values: a ``RunSpec``, resolved sources, a word
table, a vocabulary, a run file opened as a ``resume.Journal``; no pipeline state.

The stages run on data_fixtures/corpus/notes.txt (one document of 41 KB) and are held to what a reference
computes (the pattern's pieces counted with ``regex``, the first merge as the training definition
picks it) and to what a whole run of the pipeline gives for the same options.
"""
from __future__ import annotations

import base64
import json
from collections import Counter
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
import regex
import tiktoken

from conftest import FIXTURES
from toktok import insight, resume, start, verify
from toktok.config import TrainConfig
from toktok.count import stage as count
from toktok.count.common import Counted
from toktok.formats import export
from toktok.merge import stage as merge
from toktok.patterns import DEFAULT
from toktok.rundir import RUN_FILE
from toktok.store import RunStore
from toktok.vocab import Vocab

import toktok.insight.stage  # noqa: F401  (insight.stage.record)

NOTES = FIXTURES / "notes.txt"
EOT = "<|endoftext|>"
MERGES = 200


def _spec(tmp_path: Path, **kw):
    opts = dict(merges=MERGES, hardcoded=False, special_tokens=[EOT], verbose=False)
    return TrainConfig([str(NOTES)], str(tmp_path / "tok"), **{**opts, **kw}).describe()


def _journal(tmp_path: Path, name: str = "run.duckdb", **kw) -> resume.Journal:
    return resume.Journal(RunStore.create(tmp_path / name, memory_limit=1 << 30), resume.Checkpoints(), **kw)


def _counted(spec, journal: resume.Journal) -> tuple[Counted, list]:
    phase = spec.phases[0]
    sources = count.resolve(spec, phase)
    fp = resume.fingerprint(sources)
    return count.run(spec, phase, sources, fp, journal=journal, pattern=DEFAULT, specials=[EOT], merges=MERGES), fp


def _reference_words() -> Counter:
    """notes.txt's pieces as the cl100k pattern cuts them (the file is one document)."""
    return Counter(p.encode() for p in regex.findall(DEFAULT.regex, NOTES.read_text(encoding="utf-8")))


def test_count_run_counts_the_patterns_pieces_and_stores_the_counted_checkpoint(tmp_path):
    spec, journal = _spec(tmp_path), _journal(tmp_path)
    phase = spec.phases[0]
    sources = count.resolve(spec, phase)
    started = count.start(spec, phase, sources, None, DEFAULT)  # the first file, read ahead
    assert started is not None and Path(started.path) == NOTES
    fp = resume.fingerprint(sources)
    counted = count.run(spec, phase, sources, fp, journal=journal, pattern=DEFAULT, specials=[EOT],
                        merges=MERGES, started=started)
    got = dict(zip(counted.words.to_pylist(), counted.counts.tolist()))
    assert got == dict(_reference_words())
    assert counted.docs == 1 and counted.text_bytes == NOTES.stat().st_size
    assert counted.parity is not None and counted.parity.num_rows > 0 and counted.held_out is None
    # a short count keeps its checkpoint due (for the merge loop's first one); stored on demand
    assert journal.due is not None and journal.store.get_checkpoint(phase.name) is None
    journal.store_due()
    assert journal.store.get_checkpoint(phase.name)["stage"] == "counted" and journal.kept
    assert journal.store.words_of(phase.name).num_rows == len(got)


def _first_pair(words: Counter) -> bytes:
    """The training definition's first merge: highest total count, ties to the smallest (left, right)."""
    pairs: Counter = Counter()
    for w, c in words.items():
        for a, b in zip(w, w[1:]):
            pairs[(bytes([a]), bytes([b]))] += c
    best = max(pairs.values())
    left, right = min(p for p, c in pairs.items() if c == best)
    return left + right


def test_merge_run_learns_the_merges_a_whole_run_learns(tmp_path):
    spec, journal = _spec(tmp_path), _journal(tmp_path)
    counted, fp = _counted(spec, journal)
    vocab = Vocab.base(hardcoded=False)
    merged = merge.run(spec.phases[0], counted, Vocab(vocab.tokens, [EOT]), cfg=spec, fp=fp, journal=journal,
                       small=True, tiny=True)
    assert merged.merges == len(merged.new_tokens) == MERGES and merged.warnings == []
    assert merged.new_tokens[0] == _first_pair(_reference_words())
    assert merged.summary.first_id == 256 and merged.summary.merges_learned == MERGES
    journal.settle()  # the "merged" checkpoint, stored beside whatever came next
    assert journal.store.get_checkpoint("main")["stage"] == "merged"
    assert journal.store.merges_of("main").num_rows == MERGES
    # a whole run of the pipeline learns the same tokens
    from toktok.pipeline import train

    train(spec)
    ranks = [base64.b64decode(line.split()[0]) for line in (tmp_path / "tok" / "tokenizer.tiktoken").read_text().split("\n") if line]
    assert ranks == vocab.tokens + merged.new_tokens
    assert merge.budget(spec.phases[0], Vocab(vocab.tokens, [EOT])) == MERGES


def test_merge_run_says_when_the_corpus_allows_fewer_merges(tmp_path):
    spec = _spec(tmp_path, merges=50)
    words = pa.array([b"abab", b"ab"], pa.binary())
    counted = Counted(words, np.array([3, 2], dtype=np.int64), [], 0.0, 2, 6)
    merged = merge.run(spec.phases[0], counted, Vocab.base(hardcoded=False), cfg=spec, fp=[], journal=_journal(tmp_path),
                       tiny=True, small=True)
    assert merged.new_tokens == [b"ab", b"abab"]  # "ab": 3 x 2 + 2 = 8, then "abab": 3
    assert "allows only 2 merges of the 50" in merged.warnings[0]


def _merged_vocab(tmp_path: Path, spec) -> tuple[Vocab, resume.Journal, Counted]:
    journal = _journal(tmp_path)
    counted, fp = _counted(spec, journal)
    parity = counted.parity
    vocab = Vocab(Vocab.base(hardcoded=False).tokens, [EOT])
    merged = merge.run(spec.phases[0], counted, vocab, cfg=spec, fp=fp, journal=journal, small=True, tiny=True)
    counted.parity = parity
    return Vocab(vocab.tokens + merged.new_tokens, [EOT]), journal, counted


def test_export_write_writes_the_vocabulary_as_tokenizer_files(tmp_path):
    spec = _spec(tmp_path)
    vocab, journal, _ = _merged_vocab(tmp_path, spec)
    folder = tmp_path / "staging"
    folder.mkdir()
    out = export.write(vocab, folder, cfg=spec, pattern=DEFAULT)
    enc = tiktoken.Encoding("t", pat_str=DEFAULT.regex, mergeable_ranks={
        base64.b64decode(a): int(b) for a, b in (ln.split() for ln in (folder / "tokenizer.tiktoken").read_text().splitlines())},
        special_tokens={EOT: len(vocab.tokens)})
    assert enc.n_vocab == vocab.size == 256 + MERGES + 1
    assert [enc.decode_single_token_bytes(i) for i in range(len(vocab.tokens))] == vocab.tokens
    assert json.loads((folder / "tokenizer.json").read_text())["model"]["ignore_merges"] is True
    assert out.specials == {"rule": "after_last_rank", "ids": {EOT: len(vocab.tokens)}}
    assert journal.store.get_meta("specials") is None  # (the pipeline records it as it publishes)
    assert out.tiktoken[0] == (folder / "tokenizer.tiktoken").read_bytes() and out.tiktoken[1] is vocab
    out.hf.close()


def test_verify_check_compares_tiktoken_and_hf_on_the_written_files(tmp_path):
    spec = _spec(tmp_path)
    vocab, journal, counted = _merged_vocab(tmp_path, spec)
    folder = tmp_path / "staging"
    folder.mkdir()
    assert verify.start(folder, len(vocab.tokens)) is None  # a small tokenizer.json loads in this process
    out = export.write(vocab, folder, cfg=spec, pattern=DEFAULT)
    texts = counted.parity.column("text").to_pylist()
    verify.begin(out.hf, vocab, texts, slices=20, seed=0)
    rep = verify.check(folder, vocab, texts, hf=out.hf, pattern=DEFAULT, slices=20, seed=0, written=out.tiktoken)
    assert rep.ok and rep.strings > len(texts) and rep.tokens > 0 and rep.hf_tokenizers == "this process"


def test_insight_record_adds_the_curve_and_word_gains(tmp_path):
    spec = _spec(tmp_path)
    vocab, journal, counted = _merged_vocab(tmp_path, spec)
    n = len(vocab.tokens)
    journal.store.add_vocab(vocab.tokens, vocab.specials, ["byte"] * 256 + ["merge"] * MERGES,
                            [None] * 256 + ["main"] * MERGES)
    insight.stage.record(journal, counted.parity, {"main": counted.parity}, {"main": None}, small=True)
    assert journal.busy is False  # the "merged" checkpoint was waited for: the gains read the words' tokens
    con = journal.store.con
    assert con.execute("SELECT count(*) FROM compression").fetchone()[0] > 0
    assert 0 < con.execute("SELECT count(*) FROM word_gains").fetchone()[0]
    assert con.execute("SELECT max(token_id) FROM merges").fetchone()[0] == n - 1


def test_start_vocabulary_and_reserve(tmp_path):
    spec = _spec(tmp_path, pad_to_multiple_of=64)
    st = start.vocabulary(spec, list(spec.phases))
    assert len(st.vocab.tokens) == 256 and st.specials == [EOT] and st.kinds == ["byte"] * 256
    got = start.reserve(st.vocab, spec)
    assert got.vocab.size == 320 and got.vocab.size % 64 == 0 and got.warning is None
    assert got.names[0] == start.RESERVED.format(0) and len(got.names) == 320 - 257
    assert got.vocab.specials == [EOT, *got.names] and st.vocab.specials == [EOT]  # the input is not changed
    short = start.reserve(Vocab(st.vocab.tokens + [b"ab"], [EOT]), _spec(tmp_path, merges=None, vocab_size=300))
    assert len(short.names) == 300 - 258 and "42 short; 42 reserved special tokens fill ids 258..299" in short.warning
    assert start.reserve(st.vocab, _spec(tmp_path)).names == []


def test_resume_open_run_and_restore(tmp_path):
    spec = _spec(tmp_path)
    plans = [count.resolve(spec, ph) for ph in spec.phases]
    opened = resume.open_run(spec, plans, resume.Checkpoints(), inputs=[], plan=None, threads=1, pattern=DEFAULT)
    journal = opened.journal
    assert (opened.staging.path / RUN_FILE).is_file() and not opened.staging.resuming
    assert journal.store.get_meta("seed") == "0" and opened.fingerprints[0][0][0] == str(NOTES)
    phase = spec.phases[0]
    assert resume.restore(journal, phase, opened.fingerprints[0]) is None  # a fresh run restores nothing
    counted = count.run(spec, phase, plans[0], opened.fingerprints[0], journal=journal, pattern=DEFAULT,
                        specials=[EOT], merges=MERGES)
    journal.store_due()
    # the same run file, read as a resumed run's: the counted phase comes back as it was stored
    again = resume.restore(resume.Journal(journal.store, resume.Checkpoints(), resuming=True), phase,
                           opened.fingerprints[0])
    assert again.stage == "counted" and again.counted.words.to_pylist() == counted.words.to_pylist()
    assert again.parity.num_rows == counted.parity.num_rows
    with pytest.raises(Exception, match="changed since the interrupted run"):
        resume.restore(resume.Journal(journal.store, resume.Checkpoints(), resuming=True), phase, [[str(NOTES), 1, 2]])
    journal.store.close()
    opened.staging.release()
