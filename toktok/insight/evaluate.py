"""Compare tokenizers on text: bytes per token, tokens per word and vocabulary utilization.

Reads tokenizers (toktok output folders, ``.tiktoken`` files, Hugging Face ``tokenizer.json``
files or folders holding one) and data (``.parquet``, ``.jsonl``, ``.jsonl.zst``, ``.txt``, folders
and globs as for ``toktok train``); writes nothing. The one public verb is ``evaluate``; the CLI's
``toktok eval`` prints its rows as a table or JSON.

Words are the GPT-4 pre-tokenizer's pieces (the pattern toktok trains with), counted on the data
once, so tokens per word compares tokenizers on the same denominator whatever their own
pre-tokenizer is. Texts are encoded as a user would: tiktoken with ``allowed_special="all"``,
Hugging Face with ``add_special_tokens=False``. Every encoding is decoded again: a lossy tokenizer
(no byte fallback: a WordPiece or Unigram ``tokenizer.json``, or one that maps unknown characters
to ``[UNK]``) covers less text with its tokens and looks better than it is, so its rows say how
much text it did not keep and a :class:`~toktok.errors.ToktokWarning` says so.
Example: ``evaluate(["out/a", "out/b/tokenizer.json"], ["data/test.parquet"], by="lang")``.
"""
from __future__ import annotations

import itertools
import json
import os
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import ConfigError, InputError, ToktokWarning, VocabError
from . import measure
from .measure import ALL

#: What "word" means in tokens_per_word.
WORD_UNIT = "GPT-4 pre-tokenizer pieces"
#: ``--by file`` groups by source file when the data has no column of that name.
BY_FILE = "file"
_BATCH_BYTES = 8 << 20
#: A ``.tiktoken``'s documents of this many characters or more are encoded piece by piece by
#: toktok's compiled segmenter (:class:`_LongDocs`): tiktoken's BPE is quadratic in a piece's
#: length, and a superword pattern's pieces (``superbpe``) run from one number to the next.
LONG_DOC = 100_000


@dataclass
class _Tokenizer:
    name: str
    path: str
    kind: str  # "tiktoken" | "hf"
    vocab_size: int
    encode: Callable[[list[str]], list[list[int]]]
    decode: Callable[[list[list[int]]], list[str]]
    #: characters of each text not represented by a known token (unknown or dropped); None:
    #: the tokenizer cannot lose any (byte-level: every byte is a token)
    lost: Callable[[list[str]], list[int]] | None = None
    unk_id: int | None = None
    #: ids and lost characters in one pass, for tokenizers that are not byte-level
    encode_lost: Callable[[list[str]], tuple[list[list[int]], list[int]]] | None = None


def _load(spec: str, threads: int, pattern=None) -> _Tokenizer:
    """A tokenizer to compare; ``pattern``: the pre-tokenizer of a .tiktoken that records none."""
    from ..formats.common import HF_FILE, TIKTOKEN_FILE, folder_and_tiktoken
    from ..formats.hf import encoded_ids, load_hf
    from ..formats.tiktoken import load_encoding, recorded_pattern

    p = Path(spec)
    if p.is_dir():
        if (p / TIKTOKEN_FILE).is_file() or any(p.glob("*.tiktoken")):
            pass  # load_encoding finds the folder's .tiktoken file
        elif (p / HF_FILE).is_file():
            p = p / HF_FILE
        else:
            raise VocabError(f"{spec}: folder has neither a .tiktoken file nor {HF_FILE}; pass a toktok output folder")
    elif not p.is_file():
        raise VocabError(f"{spec}: no such tokenizer; pass a toktok output folder, a .tiktoken file or a tokenizer.json")
    if p.suffix == ".json":
        hf = load_hf(p)
        doc = json.loads(hf.to_str())
        unk_id = _unk_id(hf, doc.get("model") or {})
        t = _Tokenizer(
            name="", path=str(spec), kind="hf", vocab_size=hf.get_vocab_size(with_added_tokens=True),
            encode=lambda texts: encoded_ids(hf, texts),
            decode=lambda ids: hf.decode_batch(ids, skip_special_tokens=False),
            lost=lambda texts: _lost_chars(hf.encode_batch(texts, add_special_tokens=False), texts, unk_id),
            unk_id=unk_id,
        )
        if not _byte_level(doc):
            # Most of its documents will not round-trip: encode once with offsets, which say
            # what text each token stands for, rather than again for every lossy document.
            def encode_lost(texts: list[str]) -> tuple[list[list[int]], list[int]]:
                encs = hf.encode_batch(texts, add_special_tokens=False)
                return [e.ids for e in encs], _lost_chars(encs, texts, unk_id)
            t.encode_lost = encode_lost
        return t
    bare = pattern is not None and recorded_pattern(folder_and_tiktoken(p)[1])[1] is None
    enc = load_encoding(p, pattern=pattern if bare else None)  # specials, pattern: from beside it, if any
    long = _LongDocs(enc)
    return _Tokenizer(
        name="", path=str(spec), kind="tiktoken", vocab_size=enc.n_vocab,
        encode=lambda texts: long.encode(texts, threads),
        decode=lambda ids: enc.decode_batch(ids, errors="replace", num_threads=threads),
    )


class _LongDocs:
    """tiktoken's ids of texts, a long one's (:data:`LONG_DOC` characters or more, no special
    token in it) by toktok's own rank-BPE: its pieces as tiktoken splits it with the encoding's
    pattern (by the scanner compiled from the pattern, else the ``regex`` package: :meth:`words`),
    each segmented by :class:`~toktok.merge.segment.Segmenter` (whole-piece lookup, then the lowest rank, leftmost
    on ties, with a heap: O(n log n) in a piece's length; tested equal to tiktoken). The same ids
    as ``enc.encode(text, allowed_special="all")`` without tiktoken's quadratic time in a long
    piece. A vocabulary whose ranks leave gaps (a special token among them), or a first use after an
    install (the segmenter not compiled yet: tens of seconds, ``_kernels.compiled``) goes to
    tiktoken whole."""

    def __init__(self, enc) -> None:
        self.enc = enc
        self._seg = None  # the Segmenter, built at the first long text; False: tiktoken it is
        self._specials = None

    def encode(self, texts: list[str], threads: int) -> list[list[int]]:
        enc = self.enc
        long = [k for k, t in enumerate(texts) if len(t) >= LONG_DOC and self._ready() and not self._special_in(t)]
        if not long:
            return enc.encode_batch(texts, allowed_special="all", num_threads=threads)
        out: list = [None] * len(texts)
        short = sorted(set(range(len(texts))) - set(long))
        for k, ids in zip(short, enc.encode_batch([texts[k] for k in short], allowed_special="all",
                                                  num_threads=threads)):
            out[k] = ids
        for k in long:
            out[k] = self.ids(texts[k])
        return out

    def ids(self, text: str) -> list[int]:
        """The ids of one text without special tokens, piece by piece."""
        flat, _ = self._seg.ids(self.words(text), self._n)
        return flat.tolist()

    def words(self, text: str):
        """The pieces of ``text`` (an Arrow array) as tiktoken splits it with the encoding's
        pattern: by the scanner compiled from the pattern, or PCRE2's outside its subset
        (:func:`~toktok.count.cuts.compiled_spans`: no Python object per piece) when Numba's
        cache holds it, else by the ``regex`` package (:func:`~toktok.count.cuts.pieces`); the
        same pieces either way."""
        import pyarrow as pa

        from ..count.cuts import compiled_spans, pieces

        rx = self.enc._pat_str
        try:
            b = text.encode("utf-8")
        except UnicodeEncodeError:  # (a lone surrogate: no UTF-8 for the scanner to read)
            return pa.array(pieces(rx, text), pa.large_string())
        spans = compiled_spans(rx, np.frombuffer(b, np.uint8), compile=False)
        if spans is not None and (len(spans) == 0 or (spans[0, 0] == 0 and spans[-1, 1] == len(b)
                                                      and np.array_equal(spans[1:, 0], spans[:-1, 1]))):
            # the pieces cover the text end to end (as a pre-tokenizer's do): the text is the words' buffer
            offsets = np.append(spans[:, 0], len(b)).astype(np.int64) if len(spans) else np.zeros(1, np.int64)
            return pa.LargeBinaryArray.from_buffers(pa.large_binary(), len(offsets) - 1,
                                                    [None, pa.py_buffer(offsets), pa.py_buffer(b)])
        return pa.array(pieces(rx, text), pa.large_string())

    def _ready(self) -> bool:
        if self._seg is None:
            from .._kernels import compiled
            from ..merge.segment import Segmenter, _segment, _token_table

            if not compiled((_segment, _token_table)):
                self._seg = False
                return False

            ranks = self.enc._mergeable_ranks
            n = len(ranks)
            tokens: list = [None] * n
            for t, r in ranks.items():
                if 0 <= r < n:
                    tokens[r] = t
            if None in tokens or b"" in tokens:
                self._seg = False
                return False
            tlen = np.fromiter(map(len, tokens), np.int32, n)
            tstart = np.zeros(n, np.int64)
            np.cumsum(tlen[:-1], out=tstart[1:])
            tdata = np.frombuffer(b"".join(tokens), np.uint8).copy()
            self._seg, self._n = Segmenter(tdata, tstart, tlen), n
        return self._seg is not False

    def _special_in(self, text: str) -> bool:
        if self._specials is None:
            from ..verify import _Specials

            self._specials = _Specials(self.enc.special_tokens_set)
        return bool(self._specials.of(text))


def _unk_id(hf, model: dict) -> int | None:
    """The id of the model's unknown token (WordPiece, Unigram, BPE without byte fallback)."""
    if isinstance(model.get("unk_id"), int):  # Unigram stores the id
        return model["unk_id"]
    unk = model.get("unk_token")
    return hf.token_to_id(unk) if isinstance(unk, str) else None


def _byte_level(doc: dict) -> bool:
    """Whether a tokenizer.json can encode any text without loss: byte-level (GPT-2 style) or
    with byte fallback."""
    def byte_level(part) -> bool:
        if not isinstance(part, dict):
            return False
        return part.get("type") == "ByteLevel" or any(
            byte_level(x) for x in (part.get("pretokenizers") or part.get("decoders") or []))
    return bool((doc.get("model") or {}).get("byte_fallback")) or byte_level(doc.get("pre_tokenizer")) \
        or byte_level(doc.get("decoder"))


# Unicode White_Space: what a WordPiece-style pre-tokenizer may drop without losing text.
_WHITESPACE = np.array([*range(0x09, 0x0E), 0x20, 0x85, 0xA0, 0x1680, *range(0x2000, 0x200B), 0x2028,
                        0x2029, 0x202F, 0x205F, 0x3000], dtype=np.uint32)


def _lost_chars(encodings, texts: list[str], unk_id: int | None) -> list[int]:
    """Per text, the characters that no known token stands for: inside an unknown token, or
    covered by no token at all (whitespace aside: pre-tokenizers may drop it). ``encodings``
    are Hugging Face encodings of ``texts``, with their offsets (characters)."""
    out = []
    for t, e in zip(texts, encodings):
        n = len(t)
        ids = np.asarray(e.ids, dtype=np.int64)
        spans = np.fromiter(itertools.chain.from_iterable(e.offsets), dtype=np.int64, count=2 * len(ids))
        spans = np.minimum(spans.reshape(-1, 2)[ids != (-1 if unk_id is None else unk_id)], n)
        # how many known tokens cover each character: +1 where a span starts, -1 where it ends
        depth = np.bincount(spans[:, 0], minlength=n + 1) - np.bincount(spans[:, 1], minlength=n + 1)
        bare = np.cumsum(depth[:n]) <= 0
        if bare.any():
            cps = np.frombuffer(t.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
            bare &= ~np.isin(cps, _WHITESPACE)
        out.append(int(bare.sum()))
    return out


def _rungs(runs: Sequence[str], names: list[str]) -> tuple[list[str], list[str]]:
    """Each run of ``runs`` (trained with ``--ladder``) as its rungs, smallest first, then itself;
    each with its run's name. ConfigError for one without rungs."""
    from ..formats.ladder import LADDER_FOLDER

    out, out_names = [], []
    for run, name in zip(runs, names):
        folder = Path(run) / LADDER_FOLDER
        rungs = sorted((p for p in folder.iterdir() if p.is_dir() and p.name.isdigit()), key=lambda p: int(p.name)) \
            if folder.is_dir() else []
        if not rungs:
            raise ConfigError(f"{run}: no {LADDER_FOLDER}/ of smaller tokenizers in it; --ladder takes runs trained "
                              "with --ladder (or pass the tokenizers themselves)")
        out += [str(p) for p in rungs] + [str(run)]
        out_names += [name] * (len(rungs) + 1)
    return out, out_names


def _names(specs: Sequence[str]) -> list[str]:
    """Short display names: the folder name (or file stem), the given path where those collide."""
    short = []
    for s in specs:
        p = Path(s)
        name = p.name if p.is_dir() else (p.parent.name if p.stem in ("tokenizer", "") else p.stem)
        short.append(name or str(s))
    two = [str(Path(Path(s).parent.name) / Path(s).name) for s in specs]
    return [n if short.count(n) == 1 else t if two.count(t) == 1 else str(s) for n, t, s in zip(short, two, specs)]


# ---------------------------------------------------------------------------------------------
# Data
# ---------------------------------------------------------------------------------------------


def _read_data(data: Sequence[str], text_column: str, by: str | None,
               bad_utf8: str) -> tuple[list[str], list[str] | None]:
    """All documents of ``data`` (read by ``count.read``, streamed: the same formats, folders,
    globs, URLs, warnings and ``bad_utf8`` as training) and, with ``by``, each one's group."""
    from ..count.read import Corpus, read_corpus

    corpus = read_corpus(list(data), text_column, bad_utf8, label_column=by)
    for w in corpus.warnings:
        warnings.warn(w, ToktokWarning, stacklevel=3)
    docs: list[str] = []
    groups: list[str] | None = [] if by else None
    for f in corpus.files:
        # --by file: a Parquet column named "file" is used if there is one; JSONL goes by file
        label = None if by == BY_FILE and f.kind != "parquet" else by
        texts, labels = _read_file(Corpus([f], text_column, bad_utf8, label_column=label), by)
        docs += texts
        if groups is not None:
            groups += [f.path] * len(texts) if labels is None else [_label(v) for v in labels]
    if not docs:
        raise InputError(f"{', '.join(data)}: no documents to evaluate on; check the data and --text-column")
    return docs, groups


def _read_file(corpus, by: str | None) -> tuple[list[str], list | None]:
    """The documents of a one-file corpus and, with ``by``, their values of its label column or
    field; None: group them by their file (``by`` is ``file`` and the corpus reads no label)."""
    from ..count.read import open_parquet

    f = corpus.files[0]
    by_file = by == BY_FILE
    if by and not by_file and f.kind == "txt":
        raise InputError(f"{f.path}: a .txt file has no column {by!r}; use --by {BY_FILE} or Parquet/JSONL data")
    if by and not by_file and f.kind == "parquet":
        names = open_parquet(f.path, corpus.text_column, f.footer).schema_arrow.names
        if by not in names:
            raise InputError(f"{f.path}: no column {by!r} to group by (columns: {', '.join(names)}); use --by "
                             f"{BY_FILE} to group by file")
    texts: list[str] = []
    labels: list | None = []
    for batch in corpus.batches(_BATCH_BYTES):
        texts += batch.texts.to_pylist()
        if batch.labels is None:
            labels = None
        elif labels is not None:
            labels += batch.labels
    if f.kind == "txt":  # one document, however many pieces it was read in
        texts = ["".join(texts)] if texts else []
    if f.kind.startswith("jsonl") and labels is not None and texts and all(v is None for v in labels):
        raise InputError(f"{f.path}: no record has field {by!r} to group by; use --by {BY_FILE} to group by file")
    return texts, labels if by else None


def _label(v) -> str:
    return "null" if v is None else str(v)


# ---------------------------------------------------------------------------------------------
# The comparison
# ---------------------------------------------------------------------------------------------


def _batches(nbytes: np.ndarray):
    """(start, end) document ranges of about _BATCH_BYTES each."""
    start, acc = 0, 0
    for i, b in enumerate(nbytes.tolist()):
        acc += b
        if acc >= _BATCH_BYTES:
            yield start, i + 1
            start, acc = i + 1, 0
    if start < len(nbytes):
        yield start, len(nbytes)


def _encode_all(tok, docs: list[str], nbytes: np.ndarray, doc_group: np.ndarray | None,
                n_subsets: int) -> tuple[np.ndarray, np.ndarray, _Loss]:
    """``tok`` over ``docs`` in batches: tokens per document, the ids each subset used (row 0:
    all; the others by ``doc_group`` when grouped) and what was lost (:class:`_Loss`)."""
    ntok = np.zeros(len(docs), dtype=np.int64)
    used = np.zeros((n_subsets, tok.vocab_size), dtype=bool)
    loss = _Loss(len(docs))
    for start, end in _batches(nbytes):
        if tok.encode_lost is not None:
            ids, lost = tok.encode_lost(docs[start:end])
            loss.lost[start:end] = lost
        else:
            ids = tok.encode(docs[start:end])
        lens = np.fromiter(map(len, ids), dtype=np.int64, count=len(ids))
        flat = np.fromiter(itertools.chain.from_iterable(ids), dtype=np.int64, count=int(lens.sum()))
        ntok[start:end] = lens
        loss.check(tok, docs, start, end, ids, lens, flat)
        if flat.size and flat.max() >= used.shape[1]:  # an id beyond the reported size: grow
            used = np.pad(used, ((0, 0), (0, int(flat.max()) + 1 - used.shape[1])))
        used[0, flat] = True
        if doc_group is not None:
            used[np.repeat(doc_group[start:end], lens), flat] = True
    return ntok, used, loss


def evaluate(
    tokenizers: Sequence[str],
    data: Sequence[str],
    by: str | None = None,
    *,
    text_column: str = "text",
    bad_utf8: str = "error",
    threads: int = 0,
    pattern=None,
    ladder: bool = False,
) -> list[dict]:
    """Compare ``tokenizers`` on ``data``: one row per (subset, tokenizer).

    Subsets are 'all' and, with ``by``, each value of that column (``by="file"`` groups by source
    file when no column has that name). Each row has ``subset``, ``tokenizer`` (short name),
    ``path``, ``kind`` ('tiktoken' or 'hf'), ``docs``, ``bytes`` (UTF-8), ``chars``, ``words``
    (GPT-4 pre-tokenizer pieces, see WORD_UNIT), ``tokens``, ``bytes_per_token``,
    ``chars_per_token``, ``tokens_per_word``, ``vocab_size``, ``vocab_used`` (distinct ids
    produced) and ``vocab_utilization`` (= vocab_used / vocab_size). Rows come subset by subset
    ('all' first, then sorted), tokenizers in the given order. The data is read as training reads
    it (``toktok.count.read``): ``bad_utf8`` is "error", "replace" or "skip".
    A ``.tiktoken`` splits text with the pattern recorded beside it (its tokenizer.json, else its
    run file), else with ``pattern`` (a name or a regex; default cl100k).
    With ``ladder``, each tokenizer is a run trained with ``--ladder``: its rungs (``ladder/N/``)
    and the run itself, smallest first, each named by the run and its size (``tok 8,192``).
    Raises VocabError for a tokenizer that cannot be loaded and InputError for bad data.
    Example: ``evaluate(["out/small", "out/big"], ["data_fixtures/corpus/sample.parquet"], by="lang")``.
    """
    if not tokenizers:
        raise ConfigError("no tokenizers given; pass toktok output folders, .tiktoken files or tokenizer.json files")
    if not data:
        raise ConfigError("no data given; pass --data with Parquet, JSONL or text files")
    threads = threads or os.cpu_count() or 1
    if pattern is not None:
        from ..patterns import check

        pattern = check(pattern, "--pattern")
    named = _names([str(t) for t in tokenizers])
    if ladder:
        tokenizers, named = _rungs(tokenizers, named)
    toks = [_load(str(t), threads, pattern) for t in tokenizers]
    for t, name in zip(toks, named):
        t.name = name if not ladder else f"{name} {t.vocab_size:,}"
    docs, groups = _read_data(data, text_column, by, bad_utf8)

    names, doc_group = measure.subsets(groups, len(docs))
    nbytes = measure.utf8_bytes(docs)
    nchars = np.array([len(d) for d in docs], dtype=np.int64)
    _, counts, of = measure.pieces(docs, doc_group, len(names), threads)
    words = measure.sums(counts, of, len(names))
    rows_by_tok = []
    for tok in toks:
        ntok, used, loss = _encode_all(tok, docs, nbytes, doc_group if groups is not None else None, len(names))
        rows_by_tok.append((tok, ntok, used, loss))
        loss.warn(tok, nbytes, nchars)

    n_sub = len(names)
    ndocs, sbytes, schars = (measure.sums(v, doc_group, n_sub) for v in (np.ones(len(docs), np.int64), nbytes, nchars))
    per_tok = [(tok, used, [measure.sums(v.astype(np.int64), doc_group, n_sub)
                            for v in (ntok, loss.bad, loss.lost, loss.unk)])
               for tok, ntok, used, loss in rows_by_tok]
    rows = []
    for s, name in enumerate(names):  # subset by subset ('all' first), tokenizers in the given order
        b, c, w = int(sbytes[s]), int(schars[s]), int(words[s])
        for tok, used, (stoks, bad, lost, unk) in per_tok:
            n, u = int(stoks[s]), int(used[s].sum())
            rows.append({
                "subset": name, "by": by, "tokenizer": tok.name, "path": tok.path, "kind": tok.kind,
                "docs": int(ndocs[s]), "bytes": b, "chars": c, "words": w, "tokens": n,
                "bytes_per_token": measure.ratio(b, n), "chars_per_token": measure.ratio(c, n),
                "tokens_per_word": measure.ratio(n, w),
                "vocab_size": tok.vocab_size, "vocab_used": u, "vocab_utilization": measure.ratio(u, tok.vocab_size),
                "lossy_docs": int(bad[s]), "lost_chars": int(lost[s]), "unk_tokens": int(unk[s]),
            })
    return rows
    return rows


class _Loss:
    """Per document: does decoding give the text back, how many characters no known token
    stands for, how many unknown tokens."""

    def __init__(self, n: int):
        self.bad = np.zeros(n, dtype=bool)
        self.lost = np.zeros(n, dtype=np.int64)
        self.unk = np.zeros(n, dtype=np.int64)

    def check(self, tok: _Tokenizer, docs: list[str], start: int, end: int, ids: list[list[int]],
              lens: np.ndarray, flat: np.ndarray) -> None:
        if tok.unk_id is not None and flat.size:
            hit = flat == tok.unk_id
            if hit.any():
                doc = np.repeat(np.arange(end - start), lens)
                self.unk[start:end] = np.bincount(doc[hit], minlength=end - start)
        # a document with lost characters cannot decode back: only the others are decoded
        self.bad[start:end] = self.lost[start:end] > 0
        todo = np.flatnonzero(~self.bad[start:end]).tolist()
        texts = tok.decode([ids[i] for i in todo])
        bad = [i for i, t in zip(todo, texts) if docs[start + i] != t]
        if not bad:
            return
        self.bad[[start + i for i in bad]] = True
        if tok.lost is not None and tok.encode_lost is None:
            self.lost[[start + i for i in bad]] = tok.lost([docs[start + i] for i in bad])

    def warn(self, tok: _Tokenizer, nbytes: np.ndarray, nchars: np.ndarray) -> None:
        """One ToktokWarning for a tokenizer that did not keep all of the text."""
        k = int(self.bad.sum())
        if not k:
            return
        n, lost, unk = len(self.bad), int(self.lost.sum()), int(self.unk.sum())
        share = f"{k:,} of {n:,} documents ({nbytes[self.bad].sum() / max(1, nbytes.sum()):.1%} of the bytes)"
        if lost:
            what = (f"{lost / max(1, nchars.sum()):.2%} of the characters have no token of their own ("
                    + (f"{unk:,} unknown tokens stand for them" if unk else "they are dropped") + "), and "
                    + share + " do not decode back to their text; its bytes/token and tok/word count text "
                    "it did not keep, so it looks better than it is")
        else:
            what = (share + " do not decode back to their text (its normalizer or decoder changes the text)")
        warnings.warn(f"{tok.name}: lossy tokenizer: {what}", ToktokWarning, stacklevel=3)


__all__ = ["evaluate", "WORD_UNIT", "ALL", "BY_FILE"]
