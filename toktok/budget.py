"""Budget: how a run's memory budget is split between its stages, and the checks that hold it.

Owns the numbers. Reads the budget the user declared and what the process already holds (its
RSS after imports); writes a ``BudgetPlan`` that the pipeline follows: bytes of sampled text,
working memory for the word tables and the merge loop, DuckDB's memory limit, the read batch
size. A budget that cannot work is refused up front with the smallest budget that would, and a
word table that does not fit its share loses its rarest words (:func:`fit_words`: a word's
positions are its tokens under the vocabulary the phase starts from).
Example: ``plan_budget(2 << 30, baseline=300 << 20).sample_bytes > 0``.
"""
from __future__ import annotations

import math
import os
from dataclasses import asdict, dataclass

import numpy as np

from .errors import ConfigError

#: Below this much working memory (after what the process holds) no useful run fits.
MIN_WORK = 96 << 20
#: The measured baseline is rounded up to this step (determinism across runs).
BASELINE_STEP = 32 << 20
#: The smallest baseline assumed: what a toktok run holds with its libraries and kernels loaded
#: (290-300 MiB of RSS after the imports on Linux x86-64, before LLVM's code pages are handed back;
#: loading the kernels adds ~60 MiB). How much of the libraries' code is resident when measured
#: depends on the page cache (a library read by an earlier process is mapped more widely), so a
#: measured RSS below this is taken as this: the plan, hence the sample and the tokenizer, does not
#: depend on what ran before. A process that holds more (a notebook) is planned from what it holds.
BASELINE_FLOOR = 320 << 20
#: Headroom kept free for allocator slack and short-lived copies.
HEADROOM = 0.08
#: The most the read-ahead of objects in a store holds (``toktok.count.remote.READAHEAD_BYTES``,
#: written here too: the budget does not import the readers).
READAHEAD_BYTES = 16 << 20

# Bytes the merge loop needs, measured on the bench corpus (12.05 M positions, 1.12 M words,
# 32,512 merges: +221 MiB): per position (token of a word with two or more tokens) the position
# row (8), its entry in the pair lists with their spare room (~4.6) and the segmentation's token
# (4, while the rows are laid out), with room to spare; per word its wall row, length, count and
# offsets; per merge asked for, the pair table's rows (~16 new pairs per merge, table at most half
# full, rounded up to a power of two: 24 B x 2 x 2 x 16). The loop makes room for 4 a merge, fewer past
# 32,768 merges (merge.learn.expected_pairs): what is planned lets its table double twice, and holds
# the loop's second thread's rows (merge.learn._Beside, ~9 MiB at 65,536 tokens).
MERGE_BYTES_PER_POSITION = 24
MERGE_BYTES_PER_WORD = 40
MERGE_BYTES_PER_MERGE = 1536


def human(n: int) -> str:
    """``1536 << 20`` → ``'1.5 GB'`` (binary units, as RSS is reported)."""
    for unit, size in (("GB", 1 << 30), ("MB", 1 << 20), ("KB", 1 << 10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"


def current_rss() -> int:
    """Resident memory of this process in bytes."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:  # pragma: no cover - not Linux
        import resource

        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


@dataclass(frozen=True)
class BudgetPlan:
    """The split of one budget. ``work_bytes`` bounds the word tables and the merge loop."""

    budget: int
    baseline: int
    sample_bytes: int
    work_bytes: int
    duckdb_bytes: int
    batch_bytes: int
    #: What the blocks read ahead from objects in a store hold at most (``toktok.count.remote``).
    readahead_bytes: int = 0

    def to_dict(self) -> dict:
        return asdict(self)

    def after_loops(self) -> int:
        """DuckDB's limit once the merge loops are over (the insight step, in line under a
        budget): its share and half of theirs, the other half left to the step's own arrays."""
        return self.duckdb_bytes + self.work_bytes // 2


def plan_budget(budget: int, baseline: int | None = None, *, name: str = "--budget") -> BudgetPlan:
    """Split ``budget`` bytes; raises ConfigError naming the smallest budget that would work (and
    the option as ``name``: ``--budget`` or ``run.yaml: budget:``).

    Of what is left after the baseline and the headroom: 22% sampled text (its trimming briefly
    doubles it), 58% word tables and merge loop, 8% DuckDB, 4% read batches, and up to 4% (at
    most ``READAHEAD_BYTES``) for the blocks read ahead from objects in a store.
    """
    # the measured RSS moves by a few pages from run to run: rounded up, so that the same budget
    # always gives the same plan, hence the same sample and the same tokenizer for a seed
    base = current_rss() if baseline is None else baseline
    base = max(BASELINE_FLOOR, -(-base // BASELINE_STEP) * BASELINE_STEP)
    avail = int(budget * (1 - HEADROOM)) - base
    if avail < MIN_WORK:
        need = math.ceil((base + MIN_WORK) / (1 - HEADROOM) / (64 << 20)) * (64 << 20)
        raise ConfigError(
            f"{name} {human(budget)} is too small: toktok itself holds {human(base)} and needs "
            f"{human(MIN_WORK)} to work; the smallest budget that works is {human(need)}"
        )
    return BudgetPlan(
        budget=budget,
        baseline=base,
        sample_bytes=int(avail * 0.22),
        work_bytes=int(avail * 0.58),
        # DuckDB's floor: with 300 k words, 16 MiB ran out of memory now and then (2 threads)
        duckdb_bytes=max(int(avail * 0.08), 32 << 20),
        batch_bytes=int(min(32 << 20, max(1 << 20, avail * 0.04))),
        readahead_bytes=int(min(READAHEAD_BYTES, avail * 0.04)),
    )


def possible_merges(word_lengths: np.ndarray) -> int:
    """The most merges words of these byte lengths allow: each merge takes one token out of a
    word, and a word of n bytes has at most n tokens. Example: ``possible_merges(np.array([3, 1])) == 2``."""
    return int(np.maximum(np.asarray(word_lengths, np.int64) - 1, 0).sum())


def merge_bytes(word_lengths: np.ndarray, n_merges: int = 0) -> int:
    """Estimated merge-loop memory for words of these lengths (their tokens under the vocabulary
    the loop starts from, or their bytes, which bound them) and ``n_merges`` merges (at most what
    the words allow)."""
    pos = int(word_lengths[word_lengths >= 2].sum())
    n_merges = min(n_merges, possible_merges(word_lengths))
    return pos * MERGE_BYTES_PER_POSITION + len(word_lengths) * MERGE_BYTES_PER_WORD + n_merges * MERGE_BYTES_PER_MERGE


def cap_words(word_lengths: np.ndarray, counts: np.ndarray, limit: int, n_merges: int = 0) -> np.ndarray:
    """Indices of the words to keep so that ``merge_bytes`` of them (and ``n_merges``, at most
    what all the words allow) fits ``limit``: the most frequent first (ties: shorter first, then
    by index), i.e. the rarest words are dropped. Empty when not even one word fits. The lengths
    are tokens or bytes, as for :func:`merge_bytes`."""
    # the pair table does not depend on the words kept
    limit -= min(n_merges, possible_merges(word_lengths)) * MERGE_BYTES_PER_MERGE
    if merge_bytes(word_lengths) <= limit:
        return np.arange(len(word_lengths))
    order = np.lexsort((np.arange(len(counts)), word_lengths, -counts))
    lens = word_lengths[order]
    cost = np.where(lens >= 2, lens, 0) * MERGE_BYTES_PER_POSITION + MERGE_BYTES_PER_WORD
    n = int(np.searchsorted(np.cumsum(cost), limit, side="right"))
    return np.sort(order[:n])


#: Bytes of words segmented at a time when a phase's words are counted in tokens (:func:`fit_words`).
SEGMENT_RUN = 64 << 20


def fit_words(table, plan: BudgetPlan, n_merges: int, *, budget: str, where: str = "", segment=None):
    """A phase's word table (an Arrow table: ``word``, ``count``) cut to what the merge loop's
    share of the budget holds (:func:`cap_words`), the warning that says what was dropped (None
    when all fit) and the words' segmentation, when it was made here (else None). ``budget`` names
    the option as given (``--budget 64MB``), ``where`` the phase (``"phase 'code': "``). A word's
    positions in the loop are its tokens under the vocabulary the phase starts from: its bytes for
    a phase from the 256 bytes; for a later phase or a warm start (``segment``: that vocabulary's
    segmentation, ``words -> (ids, offsets)``, :func:`toktok.merge.stage.segmenter`) about a
    quarter of them, so a table that does not fit by its bytes is segmented (:func:`_tokens`) and
    cut by its tokens, and the segmentation of the words kept, ``(ids, offsets)``, is handed to the
    merge loop rather than made again. Raises ConfigError when the merges asked for leave room for
    no word. Example: ``table, warning, ids = fit_words(table, plan, 1000, budget="--budget 64MB")``."""
    if not table.num_rows:
        return table, None, None
    import pyarrow.compute as pc

    lengths = pc.binary_length(table.column("word")).to_numpy().astype(np.int64)
    counts = table.column("count").to_numpy()
    sizes, ids = lengths, None
    keep_rows = cap_words(lengths, counts, plan.work_bytes, n_merges)
    if segment is not None and len(keep_rows) < table.num_rows:  # counted in tokens, the real positions
        # (the ids held meanwhile are the loop's own for the words kept, and at most half its share)
        sizes, ids = _tokens(table.column("word"), lengths, segment, plan.work_bytes // 2)
        keep_rows = cap_words(sizes, counts, plan.work_bytes, n_merges)
    if len(keep_rows) == 0:
        n = min(n_merges, possible_merges(sizes))
        raise ConfigError(
            f"{where}{budget}: its share for the word table and the merge loop is "
            f"{human(plan.work_bytes)}, and {n:,} merges take {human(n * MERGE_BYTES_PER_MERGE)} "
            "of it before any word; pass a larger --budget or fewer --merges")
    ids = _kept_ids(ids, sizes, keep_rows) if ids is not None else None
    if len(keep_rows) == table.num_rows:
        return table, None, ids
    dropped = table.num_rows - len(keep_rows)
    lost = 1 - int(counts[keep_rows].sum()) / max(int(counts.sum()), 1)
    text = lengths * counts
    lost_text = 1 - int(text[keep_rows].sum()) / max(int(text.sum()), 1)
    return table.take(keep_rows), (
        f"{where}the budget holds {len(keep_rows):,} of {len(keep_rows) + dropped:,} distinct words: dropped the "
        f"{dropped:,} rarest ({lost:.2%} of word occurrences, {lost_text:.2%} of the phase's text)"), ids


def _tokens(words, lengths: np.ndarray, segment, room: int) -> tuple[np.ndarray, list | None]:
    """Each word's tokens under ``segment`` (``words``: an Arrow binary column, ``lengths``: their
    bytes), a run of about ``SEGMENT_RUN`` bytes of words at a time, and the runs' ids, ``(first
    word, end, ids)``, while they hold at most ``room`` bytes in all (else None: the merge loop
    segments the words kept again)."""
    col = words.chunk(0) if words.num_chunks == 1 else words  # (a slice of one chunk is no copy)
    ends = np.cumsum(lengths)
    tokens: list[np.ndarray] = []
    runs: list | None = []
    held = a = 0
    while a < len(lengths):
        b = max(a + 1, int(np.searchsorted(ends, ends[a] - lengths[a] + SEGMENT_RUN, side="right")))
        flat, offsets = segment(col.slice(a, b - a))
        tokens.append(np.diff(offsets))
        held += flat.nbytes
        runs = runs + [(a, b, flat)] if runs is not None and held <= room else None
        a = b
        del flat, offsets
    return np.concatenate(tokens), runs


def _kept_ids(runs: list, tokens: np.ndarray, keep_rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The ids of the words ``keep_rows`` (sorted; ``tokens``: every word's) out of the runs of
    :func:`_tokens`, with their offsets; the list is emptied on the way, each run freed once copied."""
    offsets = np.zeros(len(keep_rows) + 1, np.int64)
    np.cumsum(tokens[keep_rows], out=offsets[1:])
    every = len(keep_rows) == len(tokens)  # every word kept: the runs joined, no mask
    if every and len(runs) == 1:
        return runs.pop()[2], offsets
    keep = None if every else np.zeros(len(tokens), np.bool_)
    if keep is not None:
        keep[keep_rows] = True
    out = np.empty(int(offsets[-1]), runs[0][2].dtype)
    o = 0
    while runs:
        a, b, flat = runs.pop(0)
        if keep is None:
            n = len(flat)
            out[o : o + n] = flat
        else:
            n = int(tokens[a:b][keep[a:b]].sum())
            np.compress(np.repeat(keep[a:b], tokens[a:b]), flat, out=out[o : o + n])
        o += n
        del flat
    return out, offsets
