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
