"""The budget split, the refusal of budgets that cannot work, and the word-table cap."""
from __future__ import annotations

import numpy as np
import pytest

from toktok.budget import MIN_WORK, cap_words, merge_bytes, plan_budget
from toktok.config import parse_size
from toktok.errors import ConfigError


def test_plan_parts_fit_the_budget():
    p = plan_budget(parse_size("2GB"), baseline=300 << 20)
    assert p.baseline + p.sample_bytes * 2 + p.duckdb_bytes + p.batch_bytes < p.budget
    assert p.baseline + p.work_bytes + p.duckdb_bytes + p.batch_bytes < p.budget
    assert p.sample_bytes > 300 << 20


def test_too_small_budget_names_one_that_works():
    with pytest.raises(ConfigError) as e:
        plan_budget(parse_size("300MB"), baseline=300 << 20)
    msg = str(e.value)
    assert "smallest budget that works is" in msg
    smallest = msg.rsplit("is ", 1)[1]
    value = float(smallest.split()[0]) * (1 << 30 if "GB" in smallest else 1 << 20)
    plan_budget(int(value) + 1, baseline=300 << 20)  # the named budget is accepted
    assert int(value) >= (300 << 20) + MIN_WORK


def test_cap_drops_the_rarest_words_first():
    lens = np.array([5, 5, 5, 5, 1])
    counts = np.array([10, 1, 7, 3, 100])
    full = merge_bytes(lens)
    assert cap_words(lens, counts, full).tolist() == [0, 1, 2, 3, 4]
    limit = merge_bytes(lens[[0, 2, 4]])
    kept = cap_words(lens, counts, limit)
    assert kept.tolist() == [0, 2, 4]
    assert cap_words(lens, counts, limit - 1).tolist() == [0, 4]


def test_sizes_are_parsed_in_human_units():
    assert parse_size("512MB") == 512 * 1000**2 and parse_size("8GB") == 8 * 1000**3
    assert parse_size("2GiB") == 2 << 30 and parse_size(1024) == 1024
    with pytest.raises(ConfigError):
        parse_size("lots")


def test_rss_noise_does_not_change_the_plan():
    """Runs measure a few pages more or less of RSS at start: the plan (and so the sample) must not move."""
    a = plan_budget(parse_size("512MB"), baseline=(300 << 20) + 4096)
    b = plan_budget(parse_size("512MB"), baseline=(300 << 20) + 20480)
    assert a == b


def test_resident_library_pages_do_not_change_the_plan():
    """How much of the libraries' code is resident at start depends on the page cache (what ran
    before): any RSS below the floor plans the same, so a seed gives the same tokenizer."""
    from toktok.budget import BASELINE_FLOOR

    cold, warm = plan_budget(parse_size("512MB"), baseline=300 << 20), plan_budget(parse_size("512MB"), baseline=190 << 20)
    assert cold == warm and cold.baseline == BASELINE_FLOOR
    busy = plan_budget(parse_size("2GB"), baseline=900 << 20)  # a notebook holding more: planned from it
    assert busy.baseline == 928 << 20
    assert busy.sample_bytes < plan_budget(parse_size("2GB"), baseline=300 << 20).sample_bytes


def test_cap_leaves_room_for_the_pair_table_of_the_merges_asked_for():
    from toktok.budget import MERGE_BYTES_PER_MERGE

    lens, counts = np.array([5, 5, 5]), np.array([3, 2, 1])
    room = merge_bytes(lens)
    assert cap_words(lens, counts, room, n_merges=0).tolist() == [0, 1, 2]
    assert cap_words(lens, counts, room + MERGE_BYTES_PER_MERGE, n_merges=1).tolist() == [0, 1, 2]
    assert cap_words(lens, counts, room + MERGE_BYTES_PER_MERGE - 1, n_merges=1).tolist() == [0, 1]
    assert merge_bytes(lens, 10) == room + 10 * MERGE_BYTES_PER_MERGE


def test_the_plan_counts_the_read_ahead():
    """The blocks read ahead from objects in a store have their share of the budget, within what the
    plan hands out, and the readers follow it (toktok.count.remote)."""
    from toktok.budget import HEADROOM, READAHEAD_BYTES
    from toktok.count import remote

    assert READAHEAD_BYTES == remote.READAHEAD_BYTES
    for budget in (512 << 20, 2 << 30, 64 << 30):
        p = plan_budget(budget, baseline=300 << 20)
        avail = budget * (1 - HEADROOM) - p.baseline
        # its own 4% beside the others' 22 + 58 + 8 + 4 (DuckDB's floor aside)
        assert 0 < p.readahead_bytes <= min(READAHEAD_BYTES, 0.04 * avail + 1)
        assert p.sample_bytes + p.work_bytes + p.batch_bytes + p.readahead_bytes <= 0.92 * avail + 4
    try:
        remote.set_readahead(plan_budget(512 << 20, baseline=300 << 20).readahead_bytes)
        assert remote.readahead_bytes() < READAHEAD_BYTES and remote.block_bytes() * 2 <= remote.readahead_bytes()
    finally:
        remote.set_readahead(None)
    assert remote.block_bytes() == remote.BLOCK_BYTES


def test_a_cut_by_tokens_hands_the_loop_the_ids_it_made(monkeypatch):
    # a table beyond the bytes that does not fit by its bytes is segmented (in runs of words) and
    # cut by its tokens; the ids of the words kept are the loop's, which learns from them what it
    # learns segmenting the words itself
    import random

    import pyarrow as pa

    import toktok.budget as budget
    from toktok.budget import _tokens, fit_words
    from toktok.merge.learn import learn_merges
    from toktok.merge.segment import segment
    from toktok.merge.stage import segmenter
    from toktok.vocab import Vocab

    rng = random.Random(3)
    parts = ["ab", "abab", " c", "cc", "ab c", "a", "b", "c", " "]
    words = sorted({"".join(rng.choice(parts) for _ in range(rng.randint(1, 20))).encode() for _ in range(3000)})
    counts = np.array([rng.randint(1, 5) for _ in words])
    base = Vocab.base(hardcoded=False)
    assert segmenter(base) is None  # from the 256 bytes: the bytes are the tokens
    vocab = Vocab(base.tokens + [b"ab", b"abab", b" c", b"ab c", b"cc"])
    table = pa.table({"word": pa.array(words, pa.binary()), "count": pa.array(counts, pa.int64())})
    flat, offsets = segment(words, vocab)
    tokens, lens = np.diff(offsets), np.array([len(w) for w in words])
    assert tokens.sum() < lens.sum() * 3 // 4
    plan = dataclasses.replace(plan_budget(2 << 30, baseline=300 << 20), work_bytes=merge_bytes(tokens, 60) * 2 // 3)
    expect = cap_words(tokens, counts, plan.work_bytes, 60)
    assert len(cap_words(lens, counts, plan.work_bytes, 60)) < len(expect) < len(words)
    for run_bytes in (1 << 20, 500):  # the words in one run, in many
        monkeypatch.setattr(budget, "SEGMENT_RUN", run_bytes)
        kept, warning, ids = fit_words(table, plan, 60, budget="--budget 2GB", segment=segmenter(vocab))
        assert kept.column("word").to_pylist() == [words[i] for i in expect] and "rarest" in warning
        ids_kept, offsets_kept = segment(kept.column("word"), vocab)
        assert ids[0].tolist() == ids_kept.tolist() and ids[1].tolist() == offsets_kept.tolist()
    # ids that would take more than the room: the same tokens, and none kept (the loop segments)
    got, runs = _tokens(table.column("word"), lens, segmenter(vocab), 4 * int(tokens.sum()) - 1)
    assert got.tolist() == tokens.tolist() and runs is None
    kept_words, kept_counts = kept.column("word").combine_chunks(), kept.column("count").to_numpy()
    a = learn_merges(kept_words, kept_counts, vocab, 60)
    b = learn_merges(kept_words, kept_counts, vocab, 60, segmented=[ids])
    assert a.vocab.tokens == b.vocab.tokens and len(a.vocab.tokens) == len(vocab.tokens) + 60
    assert a.count.tolist() == b.count.tolist() and a.word_tokens.tolist() == b.word_tokens.tolist()


# --- a later phase's words are held to the budget by their tokens, not their bytes ---------------

import dataclasses
import json

import duckdb
from conftest import FIXTURES
from oracles.reference_bpe import train as reference_train

T, N = 500, 620  # SuperBPE from the 256 bytes: 244 subword merges, then 120 superword ones


@pytest.fixture(scope="module")
def superbpe_source(tmp_path_factory):
    import polars as pl

    docs = pl.read_parquet(FIXTURES / "sample.parquet")["text"].to_list()[:400]
    path = tmp_path_factory.mktemp("budget") / "docs.jsonl"
    path.write_text("".join(json.dumps({"text": d}) + "\n" for d in docs))
    return path


def _superbpe(source, out, monkeypatch=None, work: int | None = None):
    """``--superbpe T --vocab-size N --no-hardcoded`` on ``source``; with ``work``, under a budget
    whose share for the word tables and the merge loop is ``work`` bytes (the rest of a 4 GB plan)."""
    import toktok
    import toktok.pipeline

    if work is not None:
        real = toktok.pipeline.plan_budget
        monkeypatch.setattr(toktok.pipeline, "plan_budget",
                            lambda budget, **k: dataclasses.replace(real(budget, **k), work_bytes=work))
    return toktok.train(str(source), out=out, vocab_size=N, superbpe=T, hardcoded=False, verbose=False,
                        budget="4GB" if work is not None else None)


def _run_file(out, phase: str):
    con = duckdb.connect(str(out / "run.duckdb"), read_only=True)
    rows = con.execute("select word, count from words where phase = $p", {"p": phase}).fetchall()
    words = {bytes(w): c for w, c in rows}
    merges = con.execute("select left_id, right_id, token_id, count, reused from merges where phase = $p "
                         "order by merge_index", {"p": phase}).fetchall()
    return words, merges


@pytest.fixture(scope="module")
def unbudgeted(superbpe_source, tmp_path_factory):
    """The run without a budget: each phase's words and merges, the first phase's vocabulary, and
    what the merge loop's share must hold for each phase's words (by bytes; the second's by tokens too)."""
    import tiktoken

    import toktok

    out = tmp_path_factory.mktemp("unbudgeted") / "o"
    _superbpe(superbpe_source, out)
    (words1, merges1), (words2, merges2) = _run_file(out, "subwords"), _run_file(out, "superwords")
    enc = toktok.load_encoding(out)
    tokens1 = [enc.decode_single_token_bytes(i) for i in range(T)]
    # tiktoken's own BPE of each superword piece under the first phase's vocabulary: its positions
    bpe = tiktoken.Encoding("t1", pat_str=r"[\s\S]+", mergeable_ranks={t: i for i, t in enumerate(tokens1)},
                            special_tokens={})
    w2 = list(words2)
    tokens = np.array([len(bpe.encode_ordinary(w.decode())) for w in w2])
    counts = np.array([words2[w] for w in w2])
    lens2 = np.array([len(w) for w in w2])
    return dict(out=out, words1=words1, merges1=merges1, words2=words2, merges2=merges2, tokens1=tokens1,
                w2=w2, tokens=tokens, counts=counts, lens2=lens2,
                need1=merge_bytes(np.array([len(w) for w in words1]), T - 256),
                need2_bytes=merge_bytes(lens2, N - T), need2_tokens=merge_bytes(tokens, N - T))


def test_a_later_phase_that_fits_by_its_tokens_keeps_every_word(unbudgeted, superbpe_source, tmp_path, monkeypatch):
    # the superwords' positions are their tokens under the subwords' vocabulary, ~1/4 of their
    # bytes: a share that holds them by tokens (and the subwords by bytes) but not by bytes drops
    # nothing, and the run is the unbudgeted one (the byte bound dropped the longest paragraphs)
    u = unbudgeted
    work = max(u["need1"], u["need2_tokens"])
    assert work < u["need2_bytes"] * 3 // 4, u  # (the premise: by bytes, the superwords would not fit)
    r = _superbpe(superbpe_source, tmp_path / "o", monkeypatch, work)
    assert not [w for w in r.warnings if "the budget holds" in w], r.warnings
    for phase in ("subwords", "superwords"):
        words, merges = _run_file(r.out, phase)
        assert words == u["words1" if phase == "subwords" else "words2"] and len(merges) > 100
        assert merges == u["merges1" if phase == "subwords" else "merges2"], phase
    assert (r.out / "tokenizer.json").read_bytes() == (u["out"] / "tokenizer.json").read_bytes()


def test_a_later_phase_cut_by_its_tokens_says_what_text_it_lost(unbudgeted, superbpe_source, tmp_path, monkeypatch):
    # a share that holds only part of the superwords' tokens: the rarest go (ties: fewer tokens
    # first), as many as the tokens allow, the warning says the share of occurrences and of the
    # phase's text they held, and the merges are exact on the words kept
    from toktok.budget import MERGE_BYTES_PER_MERGE, MERGE_BYTES_PER_POSITION, MERGE_BYTES_PER_WORD

    u = unbudgeted
    work = (u["need1"] + u["need2_tokens"]) // 2
    assert u["need1"] <= work < u["need2_tokens"]
    r = _superbpe(superbpe_source, tmp_path / "o", monkeypatch, work)
    words, merges = _run_file(r.out, "superwords")
    assert _run_file(r.out, "subwords")[1] == u["merges1"]
    tokens, counts, lens = u["tokens"], u["counts"], u["lens2"]
    kept = np.array([w in words for w in u["w2"]])
    assert 0 < kept.sum() < len(kept) and all(words[w] == u["words2"][w] for w in words)
    # the most frequent first, ties fewer tokens first: no word dropped comes before one kept
    rank = np.lexsort((tokens, -counts))
    order = kept[rank]
    assert order[: order.sum()].all() or _ties_only(rank, order, counts, tokens)
    # as many as the tokens allow: the words kept fit, one more would not
    cost = np.where(tokens >= 2, tokens, 0) * MERGE_BYTES_PER_POSITION + MERGE_BYTES_PER_WORD
    room = work - min(N - T, int(np.maximum(tokens - 1, 0).sum())) * MERGE_BYTES_PER_MERGE
    assert cost[kept].sum() <= room < cost[kept].sum() + cost[~kept].min()
    lost = 1 - counts[kept].sum() / counts.sum()
    lost_text = 1 - (lens * counts)[kept].sum() / (lens * counts).sum()
    said = [w for w in r.warnings if "the budget holds" in w]
    assert len(said) == 1 and f"holds {kept.sum():,} of {len(kept):,} distinct words" in said[0], r.warnings
    assert f"({lost:.2%} of word occurrences, {lost_text:.2%} of the phase's text)" in said[0], said
    assert said[0].startswith("phase 'superwords': ")
    _, ref = reference_train(words, u["tokens1"], N - T)
    assert merges == [tuple(m) for m in ref]


def _ties_only(rank, order, counts, tokens) -> bool:
    """Whether the words dropped before a kept one (in ``rank`` order) all tie with it (count, tokens)."""
    keys = list(zip(counts[rank].tolist(), tokens[rank].tolist()))
    last_kept = max(i for i, k in enumerate(order) if k)
    first_dropped = min(i for i, k in enumerate(order) if not k)
    return keys[first_dropped] == keys[last_kept]
