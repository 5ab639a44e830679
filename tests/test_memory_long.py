"""A long str in memory is read in parts cut where the pattern cuts (issue #47: one 200 MB string
under ``budget="512MB"`` peaked at 1.6x the budget, held whole as Arrow beside the caller's str):
the words counted are the uncut document's, the parts are one document for the statistics and
the fingerprint. Small documents and a forced small cut size (``batch_bytes``); the memory it
saves is measured outside the tests (``bench/long_string_memory.py``)."""
from __future__ import annotations

import pyarrow as pa
import pytest
from test_pattern_count import PATTERNS, reference

from toktok.count.common import Source
from toktok.count.cuts import rule
from toktok.count.local import count_phase
from toktok.count.memory import corpus_of
from toktok.errors import InputError
from toktok.spec import SourceConfig

LINE = "Hello world, it's 2024!\n  indented\tline 12345 ok\n\nΩmega été 中文 😀 's\n"


def _corpus(data, bad_utf8="error"):
    return corpus_of(SourceConfig("long", kind="memory", data=data), "text", bad_utf8)


def _counts(data, batch_bytes, pattern, *, sampled=False):
    pc = count_phase([Source(_corpus(data))], batch_bytes=batch_bytes, pattern=pattern, specials=[],
                     capacity=1 << 30 if sampled else None)
    return dict(zip(pc.words.column("word").to_pylist(), pc.words.column("count").to_pylist())), pc


@pytest.mark.parametrize("name", list(PATTERNS))
def test_a_long_str_cut_counts_the_words_of_the_whole(name):
    pattern = PATTERNS[name]
    custom = rule(pattern) is None  # no cut rule (a custom regex, superbpe): cut 2 * REGEX_MARGIN apart
    docs = ["short one", LINE * (4000 if custom else 400) + "tail", "", "after " * 50, "x" * 3000, LINE * 30]
    want = reference(docs, pattern)
    c = _corpus(docs)
    batches = list(c.batches(256, pattern=pattern))
    uncut = _corpus(docs)
    assert len(list(uncut.batches(1 << 20, pattern=pattern))) == 1
    assert c.stats == uncut.stats  # the parts are one document
    assert sum(len(b.texts) - b.continued for b in batches) == c.stats["long"]["docs"]
    assert "".join(t for b in batches for t in b.texts.to_pylist()) == "".join(docs)
    continued = [b.first_row for b in batches if b.continued]
    assert continued.count(1) >= (1 if custom else 10) and set(continued) <= {1, 5}  # parts carry its row
    if not custom:
        assert max(b.texts.nbytes for b in batches if b.first_row in (1, 5)) < 1024  # about a batch each
    parts = list(c.arrow_texts(c.files[0], 256, pattern=pattern))  # the sample pass reads the parts too
    assert len(parts) > len(docs) and "".join(t for a in parts for t in a.to_pylist()) == "".join(docs)
    cut, pc = _counts(docs, 256, pattern)
    whole, pc_whole = _counts(docs, 1 << 20, pattern)
    assert cut == whole == want
    assert pc.used == pc_whole.used
    sampled, _ = _counts(docs, 256, pattern, sampled=True)
    assert sampled == want

def test_the_fingerprint_of_a_long_str_does_not_depend_on_its_cuts():
    """``resume`` compares the digest of a pass with one computed again (at another size)."""
    docs = ["a", LINE * 300, "b"]
    c = _corpus(docs)
    list(c.batches(128, pattern=PATTERNS["cl100k"]))
    assert c.files[0].fingerprint() == _corpus(docs).files[0].fingerprint(now=True)


def test_a_long_str_with_a_lone_surrogate_is_decided_whole():
    docs = [LINE * 100 + "\ud800" + LINE * 100]
    with pytest.raises(InputError, match=r"long: row 0: a lone surrogate"):
        list(_corpus(docs).batches(128, pattern=PATTERNS["cl100k"]))
    c = _corpus(docs, "skip")
    assert list(c.batches(128, pattern=PATTERNS["cl100k"])) == [] and c.stats["long"]["skipped"] == 1
    c = _corpus(docs, "replace")
    (b,) = c.batches(128, pattern=PATTERNS["cl100k"])
    assert isinstance(b.texts, pa.Array) and "\ud800" not in b.texts[0].as_py()
