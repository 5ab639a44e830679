"""The compiled scanner (and the Polars emulation, tests/oracles) must give exactly the `regex`
package's word counts."""
from __future__ import annotations

import polars as pl
import pyarrow as pa
import pytest
from conftest import FIXTURES, FUZZ
from hypothesis import given, settings
from hypothesis import strategies as st

from oracles.pretokenize import PolarsWordCounter, count_words_polars, count_words_reference, split_words

from toktok.count.scan import WordCounter, count_words

COUNTERS = {"scan": WordCounter, "polars": PolarsWordCounter}
COUNT_WORDS = {"scan": count_words, "polars": count_words_polars}

# Pieces chosen to hit every alternative of the pattern and every boundary between them.
ATOMS = [
    " ", "  ", "   ", "\t", "\n", "\r", "\r\n", "\n\n", "\u00a0", "\u3000", "\u2028", "\x0b", "\x0c", "\x85",
    "a", "Z", "é", "ж", "Ω", "中", "한", "ſ", "\u212a", "1", "٣", "²", "Ⅻ", "!", "(", ".", "-", "_", "'", "'s",
    "'S", "'ll", "'LL", "'Re", "'ve", "'m", "'D", "\u0301", "\u200d", "😀", "👩\u200d💻", "\x00", "\x1c",
]


# A document that makes a batch's text longer than 64 bytes, so the scanner reads it 8 bytes at
# a time (shorter text is read byte by byte): both ways are checked.
PAD = "pad " * 20


def _scan_counts(texts, specials=(), threads=1, swar=True):
    c = WordCounter(specials, threads, swar=swar)
    c.add(texts)
    return dict(c.result().iter_rows())


def _same(texts, specials=()):
    texts = list(texts)
    ref = dict(count_words_reference(texts, specials=specials))
    for engine, count in COUNT_WORDS.items():
        fast = dict(count(texts, specials=specials).iter_rows())
        assert fast == ref, engine
    # the byte-table scanner (used were Polars' ASCII classes to differ from the 8-byte tests)
    assert _scan_counts(texts, specials, swar=False) == ref
    padded = dict(count_words_reference(texts + [PAD], specials=specials))
    for swar in (True, False):
        assert _scan_counts(texts + [PAD], specials, swar=swar) == padded, swar


@pytest.mark.parametrize(
    "text",
    [
        "", " ", "   ", "a", "hello  world", "x   123", "x \t!y", "x\t\t'sy", "  's", "\n\n  y  ",
        "foo   (bar)", "I'M DON'T we'll", "a\u3000\u3000b", "tab\t\tnumbers\t12", "end with spaces   ",
        "  \r\n  \r\n x", "1234567 3.14159", "emoji 😀😀 and  👩\u200d💻", "ſ's 'ſ 'S", "a \u0301b",
    ],
)
def test_examples(text):
    _same([text])


def test_known_split():
    # The whitespace run before a word gives its last char to the word.
    assert split_words("a   b") == ["a", "  ", " b"]
    assert dict(count_words(["a   b"]).iter_rows()) == {b"a": 1, b"  ": 1, b" b": 1}


@given(st.lists(st.sampled_from(ATOMS), max_size=30).map("".join))
def test_fuzz_atoms(text):
    _same([text])


@given(st.lists(st.text(st.characters(exclude_categories=["Cs", "Cn"]), max_size=40), max_size=6))
def test_fuzz_unicode(texts):
    _same(texts)


@given(st.lists(st.lists(st.sampled_from(ATOMS + ["<|endoftext|>", "<|x|>"]), max_size=20).map("".join), max_size=8))
def test_fuzz_specials(texts):
    _same(texts, specials=["<|endoftext|>", "<|x|>"])


def test_specials_never_counted():
    wc = dict(count_words(["a<|endoftext|>b  <|endoftext|>"], specials=["<|endoftext|>"]).iter_rows())
    assert wc == {b"a": 1, b"b": 1, b"  ": 1}


@pytest.mark.parametrize("engine", ["scan", "polars"])
def test_counts_are_int64_and_parallel_slices_agree(engine):
    texts = ["the cat  sat\n"] * 500 + ["другой  текст 123"] * 300 + ["x" * 5000, "y" * 7, "z" * 8]
    one = COUNT_WORDS[engine](texts, threads=1).sort("word")
    many = COUNT_WORDS[engine](texts, threads=4).sort("word")
    assert one.schema["count"] == pl.Int64 and one.schema["word"] == pl.Binary
    assert one.equals(many)
    got = dict(one.iter_rows())
    assert got[b" cat"] == 500 and got[b"x" * 5000] == 1 and got[b"y" * 7] == 1 and got[b"z" * 8] == 1


def test_fixture_equals_reference():
    df = pl.read_parquet(FIXTURES / "sample.parquet")
    _same(df["text"])


@pytest.mark.slow
def test_shared_corpus_equals_reference():
    import glob

    files = sorted(glob.glob(str(FIXTURES.parents[2] / "shared" / "corpus" / "*.parquet")))
    if not files:
        pytest.skip("../shared/corpus not present")
    for f in files:
        texts = pl.read_parquet(f, columns=["text"])["text"]
        _same(texts)


@pytest.mark.parametrize("engine", ["scan", "polars"])
def test_counter_across_batches_equals_one_pass(engine):
    df = pl.read_parquet(FIXTURES / "sample.parquet")["text"]
    c = COUNTERS[engine](specials=["<|endoftext|>"], threads=2)
    for i in range(0, df.len(), 37):  # uneven batches, some smaller than the thread count
        c.add(df.slice(i, 37))
    c.add(["tail<|endoftext|>  ", "x" * 100])
    got = dict(c.result().iter_rows())
    ref = count_words_reference(df.to_list() + ["tail<|endoftext|>  ", "x" * 100], specials=["<|endoftext|>"])
    assert got == dict(ref)


# --- the compiled scanner's edges -----------------------------------------------------------

# Long runs of each kind of piece, to cross the 8-byte reads and the short/long word boundary.
LONG_ATOMS = ATOMS + [
    "abcdefg", "abcdefgh", "ABCDEFGHIJKL", "abcdefghijklm", "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
    "1234567890", "!!!!!!!!!", "--------------", "        ", "\t\t\t\t\t\t\t\t\t", "\n\n\n\n\n\n\n\n",
    "ééééé", "жжжжжжжж", "中文中文中文", "😀😀😀", "a\u0301a\u0301a\u0301", "can't", "WE'LL",
]


@given(st.lists(st.lists(st.sampled_from(LONG_ATOMS), max_size=60).map("".join), min_size=1, max_size=5))
def test_fuzz_long_runs(texts):
    _same(texts)


NON_ASCII = ["é", "ж", "中", "😀", "\u00a0", "\u3000", "٣", "\u0301", "¿"]


@given(st.integers(0, 40), st.integers(0, 40), st.sampled_from(NON_ASCII))
def test_non_ascii_at_every_offset(before, after, ch):
    # a non-ASCII char at every position of (and around) runs of letters, digits, spaces and
    # punctuation, so it falls at every offset of an 8-byte read
    texts = [
        "a" * before + ch + "b" * after,
        " " * before + ch + " " * after + "x",
        "!" * before + ch + "?" * after,
        "7" * before + ch + "8" * after,
        "x" + " " * before + ch + "y" * after,
    ]
    _same(texts)


@pytest.mark.parametrize("n", [1, 6, 7, 8, 9, 12, 13, 63, 64, 65, 254, 255, 256, 70_000])
def test_word_lengths(n):
    # 7 bytes: the last word packed into its key; 8: the first kept in the arena; 12/13: inline
    # in an Arrow view or not; 255: the arena's one-byte length runs out
    words = ["a" * n, " " + "b" * (n - 1), "é" * (n // 2) + "c" * (n % 2), "1" * n, "!" * n, " " * n]
    texts = [" ".join(words), "\n".join(words) + "\n", "x".join(words) * 2]
    _same(texts)
    got = count_words(["z" * n + " " + "z" * n]).rows()
    assert sorted(got) == sorted([(b"z" * n, 1), (b" " + b"z" * n, 1)])


def test_words_over_64k_and_padding_alignments():
    import numpy as np

    huge = "q" * 100_000
    texts = [huge, huge + " " + huge, "a" + "  " * 40_000 + "b", "€" * 30_000]
    _same(texts)
    # documents placed at every alignment of the 8-byte reads
    raw = "".join(texts).encode()
    for shift in range(8):
        buf = np.zeros(len(raw) + 16, np.uint8)
        data = buf[shift : shift + len(raw)]
        data[:] = np.frombuffer(raw, np.uint8)
        off = np.cumsum([0] + [len(t.encode()) for t in texts]).astype(np.int64)
        c = WordCounter(threads=1)
        c._scan_arrays(data, off)
        assert dict(c.result().iter_rows()) == dict(count_words_reference(texts)), shift


def _word(i):
    """The i-th of many distinct words (letters only, so each is one piece), 4 to 20 bytes."""
    return "".join(chr(97 + i // 26**k % 26) for k in range(4)) + "é" * (i % 3) + "x" * (i % 11)


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_table_growth_many_distinct_words(threads):
    # far more distinct words (short and long) than the first table and arena hold
    texts = [" ".join(_word(i) for i in range(j, 200_000, 7)) for j in range(7)]
    texts.append("w1 w1 w1 " * 1000)
    c = WordCounter(threads=threads)
    for i in range(0, len(texts), 3):
        c.add(texts[i : i + 3])
    got = dict(c.result().iter_rows())
    assert got == dict(count_words_reference(texts))
    assert len(got) > 200_000 and got[b" w"] == 2999


def test_result_is_cumulative():
    c = WordCounter(threads=2)
    c.add(["one two", "two three three"] * 10)
    first = dict(c.result().iter_rows())
    c.add(["three four"] * 5)
    second = dict(c.result().iter_rows())
    assert first == dict(count_words_reference(["one two", "two three three"] * 10))
    assert second == dict(count_words_reference(["one two", "two three three"] * 10 + ["three four"] * 5))


@pytest.mark.parametrize("threads", [2, 3])
def test_result_is_cumulative_with_many_words(threads):
    # what an earlier result() merged is merged again with what was counted since
    texts = [" ".join(_word(i) for i in range(j, 60_000, 5)) for j in range(5)]
    c = WordCounter(threads=threads)
    seen = []
    for i in range(0, len(texts), 2):
        c.add(texts[i : i + 2])
        seen += texts[i : i + 2]
        assert dict(c.result().iter_rows()) == dict(count_words_reference(seen))


def _table_of(texts, parts):
    """A thread's counting table (of ``parts`` parts) holding the words of ``texts``."""
    import numpy as np
    from toktok.count.scan import classes, counter, table

    raw = "".join(texts).encode()
    data = np.frombuffer(raw, np.uint8)
    off = np.cumsum([0] + [len(t.encode()) for t in texts]).astype(np.int64)
    flags, fold = classes._class_tables()
    tb = table._Table(parts)
    scan = (data, *table._words64(data), off, classes._byte_classes(), flags, fold, True)
    counter._scan_chunk(tb, scan, 0, len(texts))
    return tb


def test_tables_fold_into_the_first_that_holds_the_word():
    import numpy as np
    from toktok.count.scan import classes, counter, table

    # three threads' tables (of two parts) of different sizes, their words partly shared; each
    # table's first long word (at arena offset 0) is one the table before it holds elsewhere
    texts = [
        [" " + " ".join(["abcdefghijkl"] + [_word(i) for i in range(0, 40_000)] + ["internationalization"])],
        [" " + " ".join(["internationalization"] + [_word(i) for i in range(30_000, 50_000)]) + " a bb ccc"],
        [" " + " ".join([_word(i) for i in range(35_000, 60_000)]) + " a bb qrstuvwxyz internationalization"],
    ]
    tables = [_table_of(t, 2) for t in texts]
    rows = [t.T for t in tables]
    c = WordCounter(threads=2)
    c._tables = list(tables)
    df = c.result()
    assert df["word"].is_unique().all()
    assert dict(df.iter_rows()) == dict(count_words_reference(sum(texts, [])))
    order = c._tables
    assert order == [tables[0], tables[2], tables[1]]  # the roomiest first
    # nothing inserted, nothing grown: each word counted in one row, in the first table that
    # had it; the others' rows left at 0
    assert all(t.T is r for t, r in zip(tables, rows))
    held = [t.T[t.T[:, 0] != table._EMPTY] for t in tables]  # an empty row's count is not set
    assert sum(int((h[:, 1] > 0).sum()) for h in held) == df.height < sum(len(h) for h in held)
    shared = " " + _word(36_000)
    assert _count_in(order, shared) == [3, 0, 0]
    assert _count_in(order, " internationalization") == [3, 0, 0]
    assert _count_in(order, " bb") == [0, 2, 0]
    assert _count_in(order, " qrstuvwxyz") == [0, 1, 0]
    # counting on adds to rows left at 0; the next fold moves those counts again
    more = [shared + " " + _word(55_000) + " bb internationalization zzzzzzzzzzzzzzzzz"]
    data = np.frombuffer(more[0].encode(), np.uint8)
    off = np.array([0, data.shape[0]], np.int64)
    scan = (data, *table._words64(data), off, classes._byte_classes(), *classes._class_tables(), True)
    counter._scan_chunk(order[2], scan, 0, 1)
    assert _count_in(order, shared) == [3, 0, 1]
    df = c.result()
    assert df["word"].is_unique().all()
    assert dict(df.iter_rows()) == dict(count_words_reference(sum(texts, []) + more))
    assert _count_in(order, shared) == [4, 0, 0]
    assert _count_in(order, " bb") == [0, 3, 0]


def _count_in(tables, word):
    """The count of ``word`` in each table (0 where it has no row)."""
    from toktok.count.scan import table

    word, out = word.encode(), []
    for t in tables:
        got = 0
        for k, n in t.T[t.T[:, 0] != table._EMPTY]:
            if k & table._LONG:
                o = int(k & table._OFF_MASK)
                m = int(t.arena[o])  # its length (these words are shorter than 255 bytes)
                b = t.arena[o + 1 : o + 1 + m].tobytes()
            else:
                b = int(k & ((1 << 56) - 1)).to_bytes(7, "little")[: k >> 56]
            if b == word:
                got = int(n)
        out.append(got)
    return out


def test_a_keys_top_bits_are_its_words_hash():
    # growing and merging find a word's row from its key: the top bits of its hash, kept in a
    # long word's key (up to 26 of them), else computed from its bytes
    import numpy as np
    from numba import njit

    from toktok.count.scan import table

    @njit
    def tops(T, arena, a64, cbits):
        out = np.empty((T.shape[0], 2), np.int64)
        for r in range(T.shape[0]):
            k = T[r, 0]
            out[r, 0] = table._top(k, arena, a64, cbits)
            if k & table._LONG:
                w, n = table._arena_word(arena, k & table._OFF_MASK)
                h = table._long_hash(a64, arena, np.int64(0), w, n)
            else:
                h = table._short_hash(k)
            out[r, 1] = np.int64(h >> np.uint64(64 - cbits))
        return out

    tb = _table_of([" ".join(_word(i) for i in range(5_000)) + " a bb " + "z" * 300], 1)
    rows = tb.T[tb.T[:, 0] != table._EMPTY]
    assert (rows[:, 0] & table._LONG != 0).sum() > 1000 and (rows[:, 0] & table._LONG == 0).sum() > 100
    for cbits in (10, 20, 26, 27, 40):
        got = tops(rows, tb.arena_view(), tb.a64(), cbits)
        assert (got[:, 0] == got[:, 1]).all(), cbits


def test_counting_threads_end_with_the_result():
    import threading

    before = set(threading.enumerate())
    c = WordCounter(threads=2)
    c.add([PAD * 50] * 40)
    mine = [t for t in threading.enumerate() if t not in before and t.name.startswith("toktok-count")]
    assert mine
    assert dict(c.result().iter_rows()) == dict(count_words_reference([PAD * 50] * 40))
    assert not any(t.is_alive() for t in mine)
    # close() (after an error) ends them without counting what is queued
    c = WordCounter(threads=2)
    c.add([PAD * 50] * 4000)
    mine = [t for t in threading.enumerate() if t not in before and t.name.startswith("toktok-count")]
    c.close()
    assert mine and not any(t.is_alive() for t in mine)


def test_export_without_views():
    texts = ["short words and some quite long words: internationalization " * 3, "x" * 5000]
    c = WordCounter(threads=2)
    c.add(texts)
    df = c.result(views=False)
    assert df.schema == {"word": pl.Binary, "count": pl.Int64}
    assert dict(df.iter_rows()) == dict(count_words_reference(texts))


def test_empty_inputs():
    for texts in ([], [""], ["", ""], [None]):
        c = WordCounter()
        c.add(pl.Series(texts, dtype=pl.String))
        df = c.result()
        assert df.height == 0 and df.schema == {"word": pl.Binary, "count": pl.Int64}


@pytest.mark.parametrize("engine", ["scan", "polars"])
def test_memory_bytes(engine):
    from toktok.count.scan import table

    c = COUNTERS[engine](threads=2)
    assert c.memory_bytes() == 0
    c.add(["a few words, a few words"] * 100)
    small = c.memory_bytes()
    assert small > 0
    c.add([" ".join(_word(i) for i in range(100_000))])
    big = c.memory_bytes()
    assert big > small
    if engine == "scan":
        # exactly what the tables and arenas hold, and no more than the text's 16-byte rows need
        assert big == sum(t.T.nbytes + t.arena.nbytes + t.st.nbytes for t in c._tables)
        assert big < 16 * 100_000 * 2 * 2 / 0.7 * 1.5
        assert isinstance(c._tables[0], table._Table)
    c.result()
    assert c.memory_bytes() > 0


def test_ascii_classes_allow_8_byte_scanning():
    from toktok.count.scan.classes import _swar_ok

    assert _swar_ok()  # else the (slower) byte-table path would silently be used


def test_class_table_cache(tmp_path, monkeypatch):
    import numpy as np

    from toktok.count.scan import classes

    fresh = classes._compute_class_tables()
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    path = classes._class_cache_path()
    assert not path.exists()
    flags, fold = classes._cached_class_tables(path)  # computes and writes the cache
    assert path.exists() and path.parent == tmp_path / "toktok"
    assert np.array_equal(flags, fresh[0]) and np.array_equal(fold, fresh[1])
    flags2, fold2 = classes._cached_class_tables(path)  # read back from the cache
    assert np.array_equal(flags2, fresh[0]) and np.array_equal(fold2, fresh[1])
    # a damaged cache is recomputed and replaced
    path.write_bytes(b"not an npz")
    flags3, _ = classes._cached_class_tables(path)
    assert np.array_equal(flags3, fresh[0])
    assert np.load(path)["flags"].shape == (0x110000,)
    # a cache that cannot be written is skipped
    blocked = tmp_path / "file"
    blocked.write_text("x")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocked))
    flags4, _ = classes._cached_class_tables(classes._class_cache_path())
    assert np.array_equal(flags4, fresh[0])


def test_class_tables_match_polars_per_char():
    # spot checks of the tables against Polars' own regex, for chars the tests use
    from toktok.count.scan.classes import _L, _N, _W, _class_tables

    flags, fold = _class_tables()
    chars = [c for a in ATOMS for c in a] + ["\u212a", "\u017f", "\u0130", "\u1680", "\u2029", "\u0085"]
    s = pl.Series(chars)
    for bit, pat in ((_L, r"^\p{L}$"), (_N, r"^\p{N}$"), (_W, r"^\s$")):
        assert [bool(flags[ord(c)] & bit) for c in chars] == s.str.contains(pat).to_list()
    assert fold[ord("\u017f")] == ord("s") and fold[ord("L")] == ord("l") and fold[ord("\u212a")] == 0


# --- the reference, for small runs before the scanner is compiled ------------------------------


def test_reference_then_scanner_equals_reference():
    # the first documents up to reference_bytes go through the regex reference, the document that
    # does not fit and every later batch through the scanner; the table is the same as either alone
    df = pl.read_parquet(FIXTURES / "sample.parquet")["text"]
    half = int(df.slice(0, 200).str.len_bytes().sum())
    c = WordCounter(specials=["<|endoftext|>"], threads=2, reference_bytes=half + 1)
    for i in range(0, df.len(), 150):
        c.add(df.slice(i, 150))
    assert c.reference_counted == half and c.reference_bytes == 0 and c._tables
    ref = count_words_reference(df.to_list(), specials=["<|endoftext|>"])
    got = c.result()
    assert dict(got.iter_rows()) == dict(ref) and got.schema == {"word": pl.Binary, "count": pl.Int64}


def test_reference_alone_compiles_nothing_and_matches():
    texts = ["I'M DON'T we'll", "emoji 😀😀 and  👩\u200d💻", "  \r\n  \r\n x", "x   123", "end   "]
    df = count_words(texts, threads=2, reference_bytes=1 << 20)
    assert dict(df.iter_rows()) == dict(count_words_reference(texts))
    c = WordCounter(reference_bytes=1 << 20)
    c.add(texts)
    assert c.memory_bytes() > 0 and not c._tables  # no scanner table was made
    assert c.reference_counted == sum(len(t.encode()) for t in texts)


def test_reference_allowance_is_for_small_runs_only(tmp_path):
    import os
    import subprocess
    import sys

    from conftest import ROOT

    from toktok._kernels import ready
    from toktok.count.scan import REFERENCE_BYTES, SMALL_BYTES, TINY_BYTES, reference_allowance
    from toktok.count.scan.cl100k import _scan_into

    assert reference_allowance(REFERENCE_BYTES + 1) == 0
    # a medium run counts with the reference only until the scanner is compiled
    assert reference_allowance(SMALL_BYTES + 1) in (0, REFERENCE_BYTES)
    count_words(["compile the scanner"])
    assert reference_allowance(SMALL_BYTES + 1) == 0
    # a small run does while the scanner does not load cheaply (built ahead, or Numba loaded with
    # it cached): loading it through Numba costs more than counting 1 MB with regex
    small = 0 if ready((_scan_into,)) else REFERENCE_BYTES
    assert reference_allowance(TINY_BYTES + 1) == reference_allowance(SMALL_BYTES) == small
    # a tiny run always does: a process's first scan costs more than the reference takes
    assert reference_allowance(0) == reference_allowance(TINY_BYTES) == REFERENCE_BYTES
    # on a first run (nothing built, nothing cached) every run up to REFERENCE_BYTES does
    code = ("from toktok.count.scan import reference_allowance as a, REFERENCE_BYTES as R, SMALL_BYTES as S; "
            "print(a(0) == a(S) == a(S + 1) == a(R) == R, a(R + 1))")
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300,
                       env={**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "empty")})
    assert r.stdout.split() == ["True", "0"], r.stderr[-2000:]


@pytest.mark.parametrize("specials", [[], ["<|endoftext|>", "<|end|>"]])
def test_a_batch_the_reference_counts_whole_is_the_same_table_without_polars(specials):
    # the reference's Python path (a batch within reference_bytes) against the compiled scanner
    # and Polars' path of the same texts, as Arrow tables sorted by word
    import pyarrow as pa

    texts = ["Hello  world<|endoftext|>hello\n\n  42 1234 don't", None, "", "é日本語 ok<|end|>x<|endoftext|>",
             "tail<|end|>"]
    arr = pa.array(texts, pa.large_string())
    small = WordCounter(specials=specials, reference_bytes=1 << 20)
    small.add(arr)
    scanned = WordCounter(specials=specials, reference_bytes=0)
    scanned.add(arr)
    got, want = small.table(), scanned.table()
    assert got.equals(want), (got.to_pylist(), want.to_pylist())
    assert small.reference_counted > 0 and scanned.reference_counted == 0
    words = got.column("word").to_pylist()
    assert words == sorted(words) and not any(s.encode() in w for w in words for s in specials)
    assert dict(zip(words, got.column("count").to_pylist())) == dict(count_words(texts, specials).iter_rows())


@pytest.mark.parametrize("threads", [1, 2])
def test_the_table_is_in_byte_order_whatever_the_words_share(threads):
    # table() sorts the scanner's words itself (by 7-byte keys, then runs of equal keys by their
    # bytes): words sharing 7, 8 or 20 bytes, ending at byte 7 or 8, NUL and 0xFF-led bytes
    # (as UTF-8: U+0000, ÿ), both halves of the two-thread sort; held to Python's bytes order
    # and to Polars' sort of result()
    stems = ["abcdefg", "abcdefgh", "abcdefghijklmnopqrst", "ÿÿÿÿ", "a\x00\x00\x00\x00\x00\x00"]
    words = {s + t for s in stems for t in ["", "a", "b", "\x00", "ÿ", "aa", "a\x00", "zzzzzzzzzz"]}
    words |= {_word(i) for i in range(5_000)}
    texts = ["\n".join(sorted(words)), "\n".join(sorted(words, reverse=True)[:100])]
    c = WordCounter(threads=threads)
    c.add(texts)
    got = c.table()
    assert got.schema.types == [pa.large_binary(), pa.int64()]
    listed = got.column("word").to_pylist()
    assert listed == sorted(listed) and len(set(listed)) == len(listed) > 5_000
    assert got.equals(c.result().sort("word").to_arrow())
    assert dict(zip(listed, got.column("count").to_pylist())) == dict(count_words_reference(texts))
