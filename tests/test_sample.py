"""The reservoir: byte-bounded, seeded, independent of batching, mergeable across workers."""
from __future__ import annotations

import numpy as np
import polars as pl
import pyarrow as pa
import pytest
import regex
from conftest import FIXTURES
from hypothesis import given
from hypothesis import strategies as st
from oracles.sample import sample_batches

from toktok.count.sample import LEFT_OUT, LEFT_OUT_CHARS, _CUT, Reservoir, _buffers, _cut, _pieces, _source_salt, _space_at, _splitmix, as_large_string, doc_hashes

DOCS = pl.read_parquet(FIXTURES / "sample.parquet")


def _take(r: Reservoir) -> list[tuple[str, int]]:
    df = r.finish()
    return sorted(zip(df["source"].cast(pl.String).to_list(), df["row"].to_list()))


def _offer_all(r: Reservoir, step: int, sources=("a", "b")) -> Reservoir:
    for src in sources:
        texts = DOCS["text"]
        for i in range(0, texts.len(), step):
            r.offer(src, i, texts.slice(i, step))
    return r


def test_capacity_and_prefix_property():
    r = _offer_all(Reservoir(100_000, seed=1, unit=1 << 20), 50)  # whole documents
    df = r.finish()
    assert 0 < df["bytes"].sum() <= 100_000 and r.full
    # every kept document hashes below every dropped one
    kept = set(zip(df["source"].cast(pl.String), (df["row"] // (1 << 20)).to_list()))  # no document is cut
    for src in ("a", "b"):
        h = doc_hashes(src, 0, DOCS.height, 1)
        for row in range(DOCS.height):
            assert ((src, row) in kept) == (h[row] < r.threshold)


@given(st.integers(1, 300), st.integers(1, 300))
def test_independent_of_batching(step1, step2):
    a = _take(_offer_all(Reservoir(80_000, seed=3), step1))
    b = _take(_offer_all(Reservoir(80_000, seed=3), step2))
    assert a == b


def test_merge_equals_one_process():
    one = _take(_offer_all(Reservoir(120_000, seed=7), 64, ("a", "b", "c")))
    parts = [_offer_all(Reservoir(120_000, seed=7), 64, (s,)) for s in ("a", "b", "c")]
    parts[0].merge(parts[1])
    parts[0].merge(parts[2])
    assert _take(parts[0]) == one


def test_seed_changes_the_sample_and_small_corpus_is_kept_whole():
    assert _take(_offer_all(Reservoir(80_000, seed=1), 64)) != _take(_offer_all(Reservoir(80_000, seed=2), 64))
    r = _offer_all(Reservoir(10**9, seed=0), 64)
    assert not r.full and len({(s, row >> 20) for s, row in _take(r)}) == 2 * DOCS.height
    assert r.finish()["bytes"].sum() == 2 * DOCS["text"].str.len_bytes().sum()


def test_source_shares_follow_the_corpus():
    # 3 sources of very different sizes, many small documents: shares within 1 point
    rng = np.random.default_rng(0)
    sizes = {"big": 30000, "mid": 9000, "small": 3000}
    r = Reservoir(2_000_000, seed=5)
    total = {}
    for src, n in sizes.items():
        lens = rng.integers(20, 400, n)
        texts = pl.Series(["x" * int(k) for k in lens])
        total[src] = int(lens.sum())
        for i in range(0, n, 1000):
            r.offer(src, i, texts.slice(i, 1000))
    r.finish()
    corpus = sum(total.values())
    kept = sum(s.bytes_kept for s in r.stats.values())
    for src in sizes:
        assert abs(r.stats[src].bytes_kept / kept - total[src] / corpus) < 0.01
        assert r.stats[src].bytes_seen == total[src]


def test_long_documents_are_sampled_in_safe_pieces():
    doc = "".join(f"line {i} of a long document\n" for i in range(4000))  # ~110 KB
    r = Reservoir(40_000, seed=1, unit=4096)
    r.offer("long.txt", 0, pl.Series([doc]))
    df = r.finish()
    assert 1 < df.height and df["bytes"].sum() <= 40_000
    # every piece starts where the pre-tokenizer cuts the whole document
    from oracles.pretokenize import split_words

    bounds, at = set(), 0
    for w in split_words(doc):
        bounds.add(at)
        at += len(w)
    for piece in df["text"].to_list():
        start = doc.find(piece)
        assert start in bounds and split_words(piece) == split_words(doc[start:start + len(piece)])
    # and every piece of the document, kept or not, splits as the document does there
    pieces = _cut(doc, 4096)
    assert "".join(pieces) == doc and len(pieces) > 20
    assert [w for p in pieces for w in split_words(p)] == split_words(doc)


# text where both safe cuts and all their near misses occur: newlines and spaces next to every kind
# of whitespace, letters, digits, punctuation, apostrophes (contractions) and non-ASCII letters
_SPLIT_ALPHABET = "\n\n  \t\r\xa0\u3000\x1c\x85abZ09'.,-éж\u4e2d"


@given(st.text(_SPLIT_ALPHABET, max_size=200), st.integers(1, 12))
def test_safe_cuts_split_as_the_pretokenizer(text, unit):
    """findall of the pieces, one after the other, is findall of the whole text."""
    from toktok.vocab import PATTERN

    pieces = _cut(text, unit)
    assert "".join(pieces) == text
    assert [w for p in pieces for w in regex.findall(PATTERN, p)] == regex.findall(PATTERN, text)


def test_batches_cover_the_sample():
    r = _offer_all(Reservoir(200_000, seed=0), 100)
    n = r.finish().height
    got = list(sample_batches(r, batch_bytes=20_000))
    assert sum(s.len() for s in got) == n and len(got) > 3


# ---- the compiled piece cutter is `_cut` (the definition) on UTF-8 bytes -----------------------

# whitespace of every kind (regex's \s and the \x1c-\x1f that only str.isspace() counts), newlines,
# and characters of 1 to 4 UTF-8 bytes, so that cuts fall next to every kind of character
_ALPHABET = ("\n" * 6 + " \t\r\x0b\x0c\x1c\x1d\x1e\x1f\x85\xa0\u1680\u2000\u200a\u2028\u2029\u202f\u205f\u3000"
             "ab.é\u00ff\u0100ж\u20ac\u4e2d\U0001f600\U00010348\u2001\u200b\u1681")


def _kernel_pieces(texts: list[str], unit: int) -> list[list[str]]:
    arr = as_large_string(pl.Series(texts, dtype=pl.String))
    offs, data = _buffers(arr)
    lens = np.diff(offs)
    room = len(texts) + int((lens // unit).sum())
    doc, k, s, e = (np.empty(room, np.int64) for _ in range(4))
    m = _pieces(offs, data, unit, doc, k, s, e, 0)
    out: list[list[str]] = [[] for _ in texts]
    raw = data.tobytes()
    for d, kk, a, b in zip(doc[:m], k[:m], s[:m], e[:m]):
        assert kk == len(out[d])
        out[d].append(raw[a:b].decode())
    return out


def _reference_pieces(text: str, unit: int) -> list[str]:
    return _cut(text, unit) if len(text.encode()) > unit else [text]


@given(st.lists(st.text(_ALPHABET, max_size=300), min_size=1, max_size=6), st.integers(1, 40))
def test_compiled_cut_equals_the_definition(texts, unit):
    assert _kernel_pieces(texts, unit) == [_reference_pieces(t, unit) for t in texts]


def test_compiled_cut_on_long_real_text():
    texts = DOCS["text"].to_list()[:200]
    for unit in (64, 1000, 4096):
        assert _kernel_pieces(texts, unit) == [_reference_pieces(t, unit) for t in texts]


def test_space_at_is_regex_whitespace():
    """``_space_at`` decides a cut exactly as ``_CUT``'s (?=\\S) does: every code point whose
    UTF-8 lead byte it looks at (U+0000-00BF, U+1000-3FFF), and every 61st of the others."""
    points = [*range(0xC0), *range(0x1000, 0x4000), *range(0xC0, 0x110000, 61)]
    for c in points:
        if 0xD800 <= c < 0xE000:
            continue
        ch = chr(c)
        b = np.frombuffer(ch.encode() + b"\0\0\0", np.uint8)
        assert bool(_space_at(b, 0)) == (_CUT.match("\n" + ch) is None), hex(c)


def _reference_sample(batches: list[tuple[str, int, list[str]]], capacity: int, seed: int, unit: int,
                      left_out: bool = False):
    """The sample as the definition says, piece by piece in Python: every piece's (hash, source,
    id, bytes, text), sorted by (hash, source, id), the longest prefix that fits ``capacity``.
    With ``left_out``: the pieces after that prefix instead, the LEFT_OUT with the largest hashes
    (largest first), when there are any."""
    rows = []
    for source, first, texts in batches:
        salt = _source_salt(source, seed)
        for i, t in enumerate(texts):
            for k, piece in enumerate(_reference_pieces(t, unit)):
                ident = ((first + i) << 20) + k
                h = int(_splitmix(np.array([ident], np.uint64) * np.uint64(0x9E3779B97F4A7C15) ^ salt)[0])
                rows.append((h, source, ident, len(piece.encode()), piece))
    rows.sort(key=lambda r: r[:3])
    out, total = [], 0
    for r in rows:
        if total + r[3] > capacity:
            break
        out.append(r)
        total += r[3]
    if left_out:
        rest = sorted(rows[len(out):], key=lambda r: (-r[0], r[1], r[2]))[:LEFT_OUT]
        return [(h, src, ident, text[:LEFT_OUT_CHARS]) for h, src, ident, _, text in rest if not out or h > out[-1][0]]
    return out


@given(st.lists(st.text(_ALPHABET, max_size=400), min_size=1, max_size=40), st.integers(1, 3000),
       st.integers(4, 64), st.integers(1, 7))
def test_offer_equals_the_reference_sample(texts, capacity, unit, step):
    batches = [(src, i, texts[i:i + step]) for src in ("a.txt", "b") for i in range(0, len(texts), step)]
    r = Reservoir(capacity, seed=9, unit=unit)
    for src, first, part in batches:
        r.offer(src, first, pl.Series(part, dtype=pl.String) if first % 2 else as_large_string(pa.array(part)))
    df = r.finish()
    got = list(zip(df["hash"].to_list(), df["source"].cast(pl.String).to_list(), df["row"].to_list(),
                   df["bytes"].to_list(), df["text"].to_list()))
    assert got == _reference_sample(batches, capacity, 9, unit)


@given(st.lists(st.text(_ALPHABET, max_size=400), min_size=1, max_size=120), st.integers(1, 6000),
       st.integers(4, 64), st.integers(1, 7), st.booleans())
def test_left_out_is_the_pieces_the_sample_did_not_take(texts, capacity, unit, step, merged):
    """``left_out``: the LEFT_OUT pieces with the largest hashes among those the sample left out,
    whatever the batching, and the same after merging reservoirs of parts of the documents."""
    batches = [(src, i, texts[i:i + step]) for src in ("a.txt", "b") for i in range(0, len(texts), step)]
    pools = [Reservoir(capacity, seed=9, unit=unit) for _ in range(2 if merged else 1)]
    for k, (src, first, part) in enumerate(batches):
        pools[k % len(pools)].offer(src, first, pl.Series(part, dtype=pl.String))
    r = pools[0]
    for other in pools[1:]:
        r.merge(other)
    sample = r.finish()
    lo = r.left_out()
    got = list(zip(lo["hash"].to_list(), lo["source"].to_list(), lo["row"].to_list(), lo["text"].to_list()))
    assert got == _reference_sample(batches, capacity, 9, unit, left_out=True)
    kept = set(zip(sample["source"].cast(pl.String).to_list(), sample["row"].to_list()))
    assert not kept & set(zip(lo["source"].to_list(), lo["row"].to_list()))
    assert (lo.height > 0) == (r.full and len(kept) < sum(1 for _ in _reference_sample(batches, 10**12, 9, unit)))


def test_left_out_of_weighted_reservoirs_is_exact(tmp_path):
    """One reservoir per source (weights): the phase's left-out pieces are the largest hashes over
    all the pieces left out, as if one list held them."""
    from toktok.count.common import Source, left_out_of
    from toktok.count.local import sample_pass
    from toktok.count.read import read_corpus

    _mixed_corpus(tmp_path)
    sources = [Source(read_corpus([str(tmp_path / n)]), w) for n, w in (("a.parquet", 2), ("b.parquet", 1), ("e.txt", 1))]
    pools = sample_pass(sources, 80_000, 5, 1 << 20, lambda *a: None)
    frames = [res.finish() for res in pools]
    got = left_out_of([res.left_out() for res in pools])
    assert got.num_rows == LEFT_OUT
    got = pl.from_arrow(got)
    everyone = pl.concat([res.aside for res in pools])  # each pool's largest hashes, kept or not
    kept = pl.concat([f.select(pl.col("source").cast(pl.String), "row") for f in frames])
    outside = everyone.join(kept, on=["source", "row"], how="anti")
    assert got["hash"].to_list() == sorted(outside["hash"].to_list(), reverse=True)[:LEFT_OUT]
    assert set(got["source"].to_list()) == {str(tmp_path / n) for n in ("a.parquet", "b.parquet", "e.txt")}


# ---- the sample pass: parallel over files, straight from Arrow, same sample and errors ---------

def _sequential_sample(sources, capacity, seed, batch_bytes):
    """The sample pass's definition: every file in order, documents numbered in the file, read by
    ``Corpus.batches`` (text files in chunks of ``min(batch_bytes, max(4096, capacity // 64))``),
    each document's identity (the file's key, row)."""
    from toktok.count.common import doc_keys
    from toktok.count.read import Corpus

    res = Reservoir(capacity, seed)
    keys = doc_keys(sources)
    for src in sources:
        for f in src.corpus.files:
            step = min(batch_bytes, max(1 << 12, capacity // 64)) if f.kind == "txt" else batch_bytes
            row = 0
            for batch in Corpus([f], src.corpus.text_column, src.corpus.bad_utf8).batches(step):
                res.offer(f.path, row, batch.texts, key=keys[f.path])
                row += len(batch.texts)
    return res


def _mixed_corpus(tmp_path, bad: dict[str, list[int]] | None = None):
    import pyarrow.parquet as pq

    bad = bad or {}
    texts = DOCS["text"].to_list()
    for name, rows in (("a", slice(0, 300)), ("b", slice(200, 531)), ("c", slice(0, 531, 2))):
        vals = [t.encode() for t in texts[rows]]
        vals[5] = None  # nulls are not documents
        for r in bad.get(name, []):
            vals[r] = b"bad \xff utf-8"
        pq.write_table(pa.table({"text": pa.array(vals, pa.binary())}), tmp_path / f"{name}.parquet", row_group_size=37)
    (tmp_path / "d.jsonl").write_text("".join(f'{{"text": {t!r}}}\n'.replace("'", '"') for t in ["x y z", "hello there"] * 50))
    (tmp_path / "e.txt").write_text("".join(texts[:120]))


@pytest.mark.parametrize("policy", ["error", "skip", "replace"])
def test_sample_pass_equals_the_sequential_definition(tmp_path, policy):
    from toktok.count.common import Source
    from toktok.count.local import sample_pass
    from toktok.count.read import read_corpus

    _mixed_corpus(tmp_path, {} if policy == "error" else {"b": [3, 100], "c": [0]})
    for capacity, batch in ((60_000, 1 << 20), (200_000, 50_000), (10**9, 1 << 16)):
        sources = [Source(read_corpus([str(tmp_path)], bad_utf8=policy))]
        got = sample_pass(sources, capacity, 3, batch, lambda *a: None)[0]
        want = _sequential_sample(sources, capacity, 3, batch)
        a, b = got.finish(), want.finish()
        assert a.select("hash", "row", "bytes", "text").equals(b.select("hash", "row", "bytes", "text"))
        assert a["source"].cast(pl.String).to_list() == b["source"].cast(pl.String).to_list()
        assert {k: vars(v) for k, v in got.stats.items()} == {k: vars(v) for k, v in want.stats.items()}


def test_sample_pass_fails_on_the_first_bad_file_in_order(tmp_path):
    from toktok.count.common import Source
    from toktok.count.local import sample_pass
    from toktok.errors import InputError
    from toktok.count.read import read_corpus

    _mixed_corpus(tmp_path, {"b": [250], "c": [3]})  # b's bad row comes late, c's early
    corpus = read_corpus([str(tmp_path)])
    with pytest.raises(InputError) as seq:
        list(corpus.batches(1 << 16))
    for _ in range(3):
        with pytest.raises(InputError) as par:
            sample_pass([Source(read_corpus([str(tmp_path)]))], 50_000, 0, 1 << 16, lambda *a: None)
        assert str(par.value) == str(seq.value) and "b.parquet" in str(par.value)


def test_a_pickled_reservoir_goes_on_where_it_was():
    import pickle

    a = _offer_all(Reservoir(60_000, seed=2), 40, ("a",))
    b = pickle.loads(pickle.dumps(a))
    for r in (a, b):
        _offer_all(r, 40, ("b",))
    assert _take(a) == _take(b) == _take(_offer_all(Reservoir(60_000, seed=2), 40))


def test_parity_sample_keeps_no_batch_alive():
    # The parity sample keeps 64 documents; a Polars slice of a string column shares the whole
    # column's buffers, so keeping one would keep every batch that gave a parity document alive
    # (~190 MB of a 200 MB corpus when this was found). Here: one 20 MB batch read by Arrow.
    from toktok.count.common import ParitySample

    before = pa.total_allocated_bytes()
    texts = pa.array([f"{i} " + "x" * 1000 for i in range(20_000)], pa.large_string())
    held = pa.total_allocated_bytes() - before
    assert held > 15 << 20  # the batch lives in Arrow's memory, as a batch read from Parquet does
    ps = ParitySample()
    ps.offer(np.arange(20_000, dtype=np.uint64)[::-1].copy(), "f.parquet", np.arange(20_000), texts)
    assert ps.df.num_rows == 64 and ps.texts()[0].startswith("19999 ")
    del texts
    assert pa.total_allocated_bytes() - before < 1 << 20


# --- a document's identity: (the file's key below its source, row), not where the corpus lives -----


def test_source_key_is_the_part_the_source_did_not_spell_out(tmp_path, monkeypatch):
    from toktok.count.sources import resolve_sources, source_key

    assert source_key("data/**/*.parquet", "data/en/a.parquet") == "en/a.parquet"
    assert source_key("/mnt/x/data/*.parquet", "/mnt/x/data/a.parquet") == "a.parquet"
    assert source_key("*.txt", "a.txt") == "a.txt"
    assert source_key("data/a.parquet", "data/a.parquet") == "a.parquet"
    assert source_key("data/b", "data/a.parquet") is None  # not below that source
    d = tmp_path / "corpus"
    (d / "en").mkdir(parents=True)
    for p in ("en/a.txt", "b.txt"):
        (d / p).write_text("x")
    monkeypatch.chdir(tmp_path)
    forms = [[str(d)], ["corpus"], ["./corpus/"], [str(d / "**/*.txt")], ["corpus/*"], ["corpus/**"]]
    for form in forms:
        assert [f.key for f in resolve_sources(form)] == ["b.txt", "en/a.txt"], form
    assert sorted(f.key for f in resolve_sources(["corpus/en/a.txt", str(d / "b.txt")])) == ["a.txt", "b.txt"]


def test_doc_keys_are_unique_within_a_phase(tmp_path):
    from toktok.count.common import Source, doc_keys
    from toktok.count.read import read_corpus

    for sub in ("en", "code"):
        (tmp_path / sub).mkdir()
        (tmp_path / sub / "shard0.txt").write_text(sub)
    srcs = [Source(read_corpus([str(tmp_path / s / "shard0.txt")])) for s in ("en", "code")]
    keys = doc_keys(srcs)
    assert keys == {str(tmp_path / "en/shard0.txt"): "shard0.txt", str(tmp_path / "code/shard0.txt"): "shard0.txt#2"}
    # so their documents do not share hashes, which would sample the same rows of both
    assert doc_hashes(keys[str(tmp_path / "en/shard0.txt")], 0, 4, 0).tolist() != doc_hashes("shard0.txt#2", 0, 4, 0).tolist()


def test_a_moved_or_relatively_named_corpus_samples_the_same(tmp_path, monkeypatch):
    """The same files in another folder, named by an absolute path, a relative path or a glob:
    a sampled run (every file sampled) writes the same tokenizer, byte for byte."""
    import shutil

    import duckdb

    from toktok.config import PhaseConfig, SourceConfig, TrainConfig
    from toktok.pipeline import train

    first = tmp_path / "one" / "corpus"
    (first / "more").mkdir(parents=True)
    for name in ("sample.parquet", "notes.txt", "extra.jsonl"):
        shutil.copy(FIXTURES / name, first / name)
    shutil.copy(FIXTURES / "extra.jsonl", first / "more" / "extra.jsonl")  # the same name one level down
    moved = tmp_path / "two" / "deeper" / "corpus"
    shutil.copytree(first, moved)

    def run(name: str, *sources: str, seed: int = 5) -> tuple[bytes, bytes]:
        out = tmp_path / "out" / name
        ph = PhaseConfig("main", 300, [SourceConfig(s) for s in sources], budget="150KB")
        train(TrainConfig(out=str(out), seed=seed, phases=[ph]))
        con = duckdb.connect(str(out / "run.duckdb"), read_only=True)
        sampled = con.execute("select count(*) from inputs where text_bytes < bytes_seen").fetchone()[0]
        con.close()
        assert sampled == 4, name  # every file was sampled: the sample decides the tokenizer
        return (out / "tokenizer.tiktoken").read_bytes(), (out / "tokenizer.json").read_bytes()

    ref = run("abs", str(first))
    assert run("moved", str(moved)) == ref
    monkeypatch.chdir(moved.parent)
    assert run("relative", "corpus") == ref
    assert run("glob", "corpus/**") == ref
    assert run("dot", "./corpus/") == ref
    assert run("seed", "corpus", seed=6)[0] != ref[0]  # another sample: the comparisons above could fail



def _views_over(texts: list[str], inline_as: dict[int, bytes] | None = None) -> tuple[pl.Series, pa.Buffer]:
    """A Polars Series of Arrow string views over one buffer holding ``texts`` back to back (as
    a Series made from a large sample's large_string array is), and that buffer; ``inline_as``:
    what some short strings' views hold instead (a buffer that disagrees with its views)."""
    raw = [t.encode() for t in texts]
    offs = np.concatenate([[0], np.cumsum([len(r) for r in raw])]).astype(np.uint32)
    views = np.zeros((len(raw), 16), np.uint8)
    for i, r in enumerate(raw):
        views[i, :4] = np.frombuffer(np.uint32(len(r)).tobytes(), np.uint8)
        if len(r) <= 12:
            held = (inline_as or {}).get(i, r)
            views[i, 4:4 + len(held)] = np.frombuffer(held, np.uint8)
        else:
            views[i, 4:8] = np.frombuffer(r[:4], np.uint8)
            views[i, 12:16] = np.frombuffer(offs[i].tobytes(), np.uint8)
    data = pa.py_buffer(b"".join(raw))
    arr = pa.Array.from_buffers(pa.string_view(), len(raw), [None, pa.py_buffer(views.tobytes()), data])
    return pl.Series("text", arr), data


@given(st.lists(st.text(max_size=30), min_size=1, max_size=40), st.randoms(use_true_random=False))
def test_polars_text_goes_to_arrow_in_place_when_back_to_back(texts, rnd):
    """Strings back to back in one buffer, short ones inline in their views too: large_string over
    that buffer, read-only, equal; a slice too; rows out of order come back equal (copied)."""
    s, data = _views_over(texts)
    got = as_large_string(s)
    assert got.to_pylist() == texts
    if any(len(t.encode()) > 12 for t in texts):  # (else no string is in the buffer: copied)
        assert got.buffers()[2].address == data.address
        assert not _buffers(got)[0].flags.writeable
    lo = rnd.randrange(len(texts))
    assert as_large_string(s.slice(lo, len(texts))).to_pylist() == texts[lo:]
    order = list(range(len(texts)))
    rnd.shuffle(order)
    assert as_large_string(s.gather(order)).to_pylist() == [texts[i] for i in order]


def test_views_whose_short_strings_the_buffer_does_not_hold_are_copied():
    """A short string's view that disagrees with the bytes where the buffer would hold it: the
    text is copied, never read from the buffer."""
    texts = ["a long string, in the buffer", "abc", "another long string in it"]
    s, data = _views_over(texts, inline_as={1: b"xyz"})
    got = as_large_string(s)
    assert got.to_pylist() == [texts[0], "xyz", texts[2]]
    assert got.buffers()[2].address != data.address


def test_a_finished_sample_is_counted_in_source_and_row_order_from_one_buffer():
    """finish() gives a frame whose text, in the order it is counted (source, then row), lies back
    to back in one buffer whatever order the files were offered in: each source's part comes to
    Arrow equal, over that buffer."""
    res = Reservoir(capacity=1 << 22, seed=3, unit=1 << 16)
    rng = np.random.default_rng(0)
    docs = {}
    for name in ("b.txt", "a.txt"):
        docs[name] = ["".join(chr(97 + c) for c in rng.integers(0, 26, rng.integers(0, 3000))) for _ in range(60)]
    for lo in (0, 30):  # the two files' batches interleaved, as two readers offer them
        for name in ("b.txt", "a.txt"):
            res.offer(name, lo, pa.array(docs[name][lo:lo + 30], pa.large_string()))
    frame = res.finish().sort("source", "row")
    whole = _buffers(as_large_string(frame["text"]))[1]
    for part in frame.partition_by("source", maintain_order=True):
        got = as_large_string(part["text"])
        assert got.to_pylist() == docs[part["source"][0]]
        assert _buffers(got)[1].ctypes.data == whole.ctypes.data
