"""Check that an output folder encodes identically with tiktoken and Hugging Face tokenizers.

``verify(out_dir)`` loads ``tokenizer.tiktoken`` (with tiktoken) and ``tokenizer.json`` (with
``tokenizers``), checks that both describe the same vocabulary, then encodes every text with both,
compares ids, and checks that both decoders give the text back. The first disagreement raises
``ParityError``. HF's half (:mod:`toktok.verify.hf_side`) loads a large tokenizer.json in a second
process while this one loads tiktoken's half: the load holds the GIL for most of a second.
A run's verification is three calls of the pipeline: ``start`` (HF's second process started
beside the last merge loop), ``begin`` (HF encodes the texts ahead in a thread after the export)
and ``check``, the stage's entry. Example: ``verify("out/demo").tokens > 0``.
"""
from __future__ import annotations

import dataclasses
import os
import random
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterable, Iterator

from ..added import encode_like_hf, needs_split, text_like_hf
from ..errors import InputError, ParityError
from ..formats.common import HF_FILE, folder_and_tiktoken, hf_file_of
from ..formats.hf import bytelevel_to_token, token_to_bytelevel
from ..formats.tiktoken import load_encoding_and_tokens
from ..patterns import EDGE_TEXTS
from ..rundir import special_tokens_file
from .hf_side import HFSide, Process, open_hf, worth_a_process

if TYPE_CHECKING:
    from ..vocab import Vocab

#: Texts in a batch handed to each encoder at once (tokenizers encodes a batch in parallel).
BATCH = 256
#: Characters from which :func:`encode_all` hands the texts to tiktoken's pool of threads.
POOL_FROM_CHARS = 1 << 20
#: Characters of texts to check up to which tiktoken encodes them all at once in a thread while
#: HF's half loads (``_TiktokenSide``; a run's check: ~150,000), beyond which batch by batch.
AHEAD_CHARS = 1 << 22
#: Longest random slice, in characters.
MAX_SLICE = 300
#: A given text longer than this many characters is compared in parts of at most this many
#: (:func:`parts`): tiktoken's and HF's BPE are quadratic in a piece's length, and a superword
#: pattern's piece (``superbpe``) runs from one number to the next, a paragraph or a document.
PART = 4_000

#: Built-in check texts: scripts, emoji, code, whitespace and digit runs, contractions, odd characters.
DEFAULT_TEXTS: list[str] = [
    # Latin with accents, other scripts
    "Hello, world! Ça va? Déjà vu, naïve façade, Ångström, Øresund, Straße, İstanbul, ǅemal.",
    "Привет, мир! Съешь же ещё этих мягких французских булок, да выпей чаю.",
    "Γειά σου Κόσμε· ξεσκεπάζω την ψυχοφθόρα βδελυγμία.",
    "مرحبا بالعالم! هذه جملة عربية مع أرقام ١٢٣٤٥ وتشكيل: كَتَبَ.",
    "שלום עולם! עברית עם ניקוד: שָׁלוֹם.",
    "नमस्ते दुनिया! हिन्दी में क्षत्रिय, ज्ञान, और १२३।",
    "สวัสดีชาวโลก ภาษาไทยไม่มีช่องว่างระหว่างคำ",
    "你好，世界！这是一个中文句子。日本語のテキスト、カタカナとひらがな。",
    "안녕하세요 세계! 한국어 문장입니다. ㄱㄴㄷ",
    "Tiếng Việt có dấu: Trường Đại học, người, ở đâu?",
    # emoji: single, skin tones, ZWJ families, flags, keycaps
    "Emoji 😀😃😄 👍🏽 👩‍👩‍👧‍👦 👨🏿‍💻 🏳️‍🌈 🇫🇷🇯🇵🇺🇸 1️⃣ #️⃣ ❤️‍🔥",
    # code
    'def f(x: int) -> int:\n    """Docstring."""\n    return x ** 2 if x >= 0 else -x  # comment\n',
    "#include <stdio.h>\nint main(void) {\n\tprintf(\"%d\\n\", 42);\n\treturn 0;\n}\n",
    "const add = (a, b) => a + b;\nlet s = `t${add(1, 2)}`; if (a !== b && c || d) { i++; j--; }\n",
    '{"name": "toktok", "version": [0, 1, 0], "nested": {"k": null, "pi": 3.14159, "ok": true}}',
    '<?xml version="1.0"?>\n<root attr="v"><child>text &amp; more</child><empty/></root>\n',
    # whitespace runs and line ends
    "a  b   c    d                                        e",
    "tab\tsep\t\tvalues\t \t mixed \t\t  end",
    "windows\r\nline\r\n\r\nends\r\n",
    "para\n\n\nbreaks\n\n\n\n\n\n\n\n\n\nmany",
    "   leading and trailing whitespace   ",
    "\n\n  \t\n",
    " ",
    "\t",
    # digits
    "1234567 3.14159 1,000,000 0.0001 2024-01-31 12:34:56 +1 (555) 010-9999 1e-10 0x1F",
    "12345678901234567890 and ⅓ ² ³ ¹ Ⅻ ١٢٣ ߁߂ ๑๒๓",
    # contractions, both cases
    "DON'T we'll I'M you're They've she'd it's IT'S WE'LL You'Re",
    "'s 't 're 've 'm 'll 'd 'S 'T 'RE 'VE 'M 'LL 'D",
    # odd characters: NBSP, zero-width, combining marks, controls
    "non\u00a0breaking\u00a0space and narrow\u202fnbsp and ideographic\u3000space",
    "zero\u200bwidth\u200cnon\u200djoiner\u2060word\ufeffjoiner",
    "combining: e\u0301 a\u0308 n\u0303 o\u0302\u0323 Z\u0351\u0352\u0353\u0354 \u0301lead",
    "controls \x00\x01\x1b[0m\x7f and line sep \u2028 para sep \u2029 nel \x85 end",
    "mixed: naïve café 東京 Москва 🚀 x=1; y='two'\n\tz = [3, 4]",
    # where the named patterns differ (camelCase, contractions, digit runs, spaces before numbers,
    # "/" after punctuation) and the regex engines' edges (toktok.patterns)
    *EDGE_TEXTS,
]


#: Special tokens that each get their own texts (:func:`special_texts`); beyond them, a seeded
#: sample of this many does, and every one of them is checked in a few long texts.
SPECIAL_TEXTS_EACH = 256
#: Special tokens per long text that holds each of them once (a run with many reserved tokens).
SPECIALS_PER_TEXT = 4096


def special_texts(specials: Iterable[str]) -> list[str]:
    """Texts that put each special token inside, around and next to ordinary text. Beyond
    :data:`SPECIAL_TEXTS_EACH` special tokens (a vocabulary padded with reserved ones), those
    texts for a seeded sample of that many, and every special token in context in texts of
    :data:`SPECIALS_PER_TEXT` each: linear in the number of special tokens, whatever it is.

    Example: ``special_texts(["<|endoftext|>"])[0] == "a<|endoftext|>b"``.
    """
    every = sorted(specials)
    some = every if len(every) <= SPECIAL_TEXTS_EACH else sorted(random.Random(0).sample(every, SPECIAL_TEXTS_EACH))
    out: list[str] = []
    for s in some:
        out += [f"a{s}b", s, f"{s}{s}", f"Hello world{s}\n\n{s} next document", f" {s} ", f"1{s}23"]
    if len(some) < len(every):
        out += ["".join(f"a{s} 1{s}" for s in every[i:i + SPECIALS_PER_TEXT])
                for i in range(0, len(every), SPECIALS_PER_TEXT)]
    return out


class _Specials:
    """Which special tokens a text holds, found without a regex of all of them (tiktoken turns
    ``allowed_special="all"`` into a set of every special token at each call, ~0.3 s with
    131,072 of them): by each length at each place where a special token's first character is."""

    def __init__(self, specials: Iterable[str]) -> None:
        by_len: dict[int, set[str]] = {}
        for s in specials:
            by_len.setdefault(len(s), set()).add(s)
        self.by_len = sorted(by_len.items())
        firsts = {s[0] for _, group in self.by_len for s in group}
        self.starts = None
        if firsts:  # (none: no regex to import)
            import regex

            self.starts = regex.compile("[" + "".join(regex.escape(c) for c in sorted(firsts)) + "]")

    def of(self, text: str) -> set[str]:
        """The special tokens that occur in ``text``."""
        found: set[str] = set()
        if self.starts is None:
            return found
        for m in self.starts.finditer(text):
            i = m.start()
            for n, group in self.by_len:
                if text[i:i + n] in group:
                    found.add(text[i:i + n])
        return found


def encode_all(enc, texts: list[str], finder: _Specials | None = None) -> list[list[int]]:
    """``enc.encode_batch(texts, allowed_special="all")``, the same ids at a cost that does not
    grow with the number of special tokens: each text with the special tokens it holds allowed
    (none: ``encode_ordinary``). Example: ``encode_all(enc, ["a<|endoftext|>"])[0][-1] == enc.eot_token``."""
    finder = finder or _Specials(enc.special_tokens_set)
    out: list[list[int] | None] = [None] * len(texts)
    plain = []
    for k, t in enumerate(texts):
        held = finder.of(t)
        if held:
            out[k] = enc.encode(t, allowed_special=held, disallowed_special=())
        else:
            plain.append(k)
    ordinary = [texts[k] for k in plain]
    # a few texts: one after the other (tiktoken's batch starts a pool of 8 threads at each call,
    # 40% more CPU for a run's 332 texts, and no sooner done)
    small = sum(map(len, ordinary)) <= POOL_FROM_CHARS
    for k, ids in zip(plain, map(enc.encode_ordinary, ordinary) if small else enc.encode_ordinary_batch(ordinary)):
        out[k] = ids
    return out


@dataclass(frozen=True)
class VerifyReport:
    """Result of a successful ``verify``: strings compared, ids compared per encoder, ``ok``.

    Example: ``VerifyReport(strings=3, tokens=12).ok is True``.
    """

    strings: int
    tokens: int
    ok: bool = True
    hf_tokenizers: str = ""  # where HF tokenizers loaded tokenizer.json (HFSide.where), for the run file
    cut: int = 0  # given texts longer than PART characters, compared in their parts (each a string)


def _short(text: str, limit: int = 80) -> str:
    r = repr(text)
    return r if len(r) <= limit else r[: limit - 3] + "..."


def random_slices(texts: list[str], count: int, seed: int = 0, max_len: int = MAX_SLICE) -> list[str]:
    """``count`` seeded random substrings of ``texts`` (code-point boundaries, 1..max_len characters).

    Slices may cut a grapheme cluster, a ZWJ sequence or ``\\r\\n`` in two; that is the point.
    Example: ``random_slices(["abcdef"], 2, seed=1)`` gives two substrings of ``"abcdef"``.
    """
    pool = [t for t in texts if t]
    if not pool or count <= 0:
        return []
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        t = rng.choice(pool)
        start = rng.randrange(len(t))
        out.append(t[start : start + rng.randint(1, max_len)])
    return out


def parts(text: str, most: int = PART) -> list[str]:
    """``text`` cut into parts of at most ``most`` characters, each cut after the last line end
    in the second half of a part, else after its last whitespace, else at ``most``; a text that
    short as it is. Every character is compared once; what is not compared is the text's pieces
    across a cut as one piece (each part is text like any other: the two libraries must agree
    on it). Example: ``parts("ab\ncd", 4) == ["ab\n", "cd"]``."""
    if len(text) <= most:
        return [text]
    out, i, n = [], 0, len(text)
    while n - i > most:
        end = i + most
        cut = text.rfind("\n", i + most // 2, end) + 1
        if not cut:
            cut = next((k + 1 for k in range(end - 1, i + most // 2 - 1, -1) if text[k].isspace()), end)
        out.append(text[i:cut])
        i = cut
    out.append(text[i:])
    return out


def texts_to_check(specials: Iterable[str], texts: Iterable[str] | None, slices: int, seed: int) -> list[str]:
    """What ``verify`` compares, in order: the built-in set (with texts around each of
    ``specials``, the tokenizer's special tokens), the given ``texts`` (a long one in its
    :func:`parts`), then ``slices`` seeded random slices of them (of the built-in set when none
    are given). Example: ``texts_to_check([], ["hello"], 2, 0)[-3] == "hello"``."""
    builtin = DEFAULT_TEXTS + special_texts(specials)
    given = list(texts) if texts is not None else []
    cut = [p for t in given for p in (parts(t) if isinstance(t, str) else [t])]
    return [*builtin, *cut, *(random_slices(given or builtin, slices, seed) if slices > 0 else [])]


def _batches(texts: Iterable[str], size: int) -> Iterator[list[str]]:
    batch: list[str] = []
    for t in texts:
        batch.append(t)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


def _check_same_vocab(where: Path, enc, tokens: list[bytes], hf: HFSide) -> None:
    """Raise ParityError unless both files give every id the same bytes and the same specials."""
    # Phase 1: ranks (this side's spelling first: HF's process may still be parsing).
    spelled = None if None in tokens else (list(map(len, tokens)), token_to_bytelevel(b"".join(tokens)))
    n_hf = hf.vocab_size()
    if n_hf != len(tokens):
        raise ParityError(
            f"{where}: tokenizer.tiktoken has {len(tokens)} ranks but tokenizer.json has "
            f"{n_hf} vocab entries; export both from the same vocabulary"
        )
    tt_specials = {s: enc.encode_single_token(s) for s in enc.special_tokens_set}
    special_at = {i: s for s, i in tt_specials.items()}
    for name, i in ([] if _same_ranks(hf, spelled) else hf.vocab().items()):
        if 0 <= i < len(tokens) and tokens[i] is None:
            # a special token inside the rank range: HF keeps it in the model under its text
            if special_at.get(i) != name:
                raise ParityError(f"{where}: id {i} is {name!r} in tokenizer.json but the special {special_at.get(i)!r} in tiktoken")
            continue
        tok = bytelevel_to_token(name)
        tt = tokens[i] if 0 <= i < len(tokens) else None
        if tt != tok:
            raise ParityError(f"{where}: id {i} is {tok!r} in tokenizer.json but {tt!r} in tokenizer.tiktoken")
    # Phase 2: specials, by content and id.
    hf_specials = hf.added()
    if tt_specials != hf_specials:
        raise ParityError(f"{where}: special tokens differ: tiktoken {tt_specials} vs tokenizer.json {hf_specials}")


def _same_ranks(hf: HFSide, spelled: tuple[list[int], str] | None) -> bool:
    """Whether HF's vocab is exactly the tokens, id for id, each under its byte-level spelling
    (one character per byte): checked on all of them at once, spellings joined (``spelled``:
    the tokens' lengths and joined spelling, None when a special sits inside the rank range;
    False then, and the entry-by-entry check decides)."""
    if spelled is None:
        return False
    by_id = hf.names_by_id()
    if by_id is None:
        return False
    joined, lengths = by_id
    return lengths == spelled[0] and joined == spelled[1]


def _first_diff(a: list[int], b: list[int]) -> int:
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return min(len(a), len(b))


def verify(
    out_dir: str | os.PathLike,
    texts: Iterable[str] | None = None,
    *,
    slices: int = 0,
    seed: int = 0,
    special_tokens=None,
    hf: HFSide | None = None,
    progress: Callable[[int, int], None] | None = None,
    pattern=None,
    written=None,
) -> VerifyReport:
    """Encode ``DEFAULT_TEXTS``, texts around each special token, and ``texts`` with
    tiktoken and HF tokenizers from ``out_dir``; raise ParityError at the first id or round-trip
    difference. ``slices`` adds that many seeded random substrings of the texts.

    tiktoken encodes with ``allowed_special="all"``, HF with ``add_special_tokens=False``; tiktoken's
    ``decode_bytes`` must give ``text.encode()`` and HF's ``decode(ids, skip_special_tokens=False)``
    must give ``text``. ``special_tokens`` are the ``.tiktoken``'s (``{token: id}``, a list or a
    file, see ``formats.specials.resolve_specials``; default: found beside it). ``hf``: HF's half
    already opened on this folder's tokenizer.json (``open_hf(hf_path_of(out_dir))``, loading in a
    second process while the caller did other work); closed here. By default a large tokenizer.json
    loads in a second process while this one loads tiktoken's half (``open_hf``). tiktoken splits
    text with the pattern recorded beside the ``.tiktoken`` (the tokenizer.json's Split); ``pattern``
    (a run's own) must agree with it. ``written``: ``(text, vocab)`` where this process wrote the
    ``.tiktoken`` (``formats.tiktoken.read_tiktoken_ranks``: compared, not parsed again).
    Added tokens whose flags make HF cut text otherwise (``lstrip``, ``rstrip``, ``single_word``:
    :mod:`toktok.added`) are compared as HF cuts them: tiktoken's ids are
    ``encode_like_hf(enc, text, flags)`` and both decodes must give ``text_like_hf(text, flags)``.
    ``progress(done, total)`` hears the strings compared so far.
    Example: ``verify("out/demo", ["hello world"], slices=200).ok``.
    """
    # Phase 1: load both and compare the vocabularies themselves.
    where = Path(out_dir)
    tt = folder_and_tiktoken(where)[1]
    hf_path = hf_path_of(where)
    if hf is None:
        hf = open_hf(hf_path)
        hf.load()  # in a second process, while this one loads tiktoken's half
    with hf:
        # tiktoken's specials come from the tokenizer.json that goes with the .tiktoken when
        # nothing else gives them: read from its added_tokens alone when laid out as toktok writes
        # it (not waiting for HF's half to load it), else, when it is the one loaded here, asked
        # of HF's half (parsed once, by tokenizers)
        enc, tokens = load_encoding_and_tokens(where, special_tokens, hf.specials if hf_path == hf_file_of(tt) else None,
                                               pattern=pattern, written=written)
        texts = list(texts) if texts is not None else None
        mine = _TiktokenSide.ahead(enc, texts, slices, seed)  # (while HF's half may still be loading)
        _check_same_vocab(where, enc, tokens, hf)
        del tokens
        report = _compare(where, enc, hf, texts, slices, seed, progress, mine)
    held = [enc]
    del enc, mine
    _free_beside(held)
    return report


#: Seconds a thread of :func:`_free_beside` waits before it frees what it holds.
FREE_AFTER = 0.005


def _free_beside(held: list) -> None:
    """The objects in ``held`` (their only references: the caller holds none) freed in a thread,
    once the caller has gone on (``FREE_AFTER``): a tiktoken ``Encoding`` of 65,536 tokens takes
    ~10-30 ms to free, holding the GIL, which the run (about to publish: mostly DuckDB's writes
    and waits, without the GIL) need not wait for."""

    def free() -> None:
        time.sleep(FREE_AFTER)
        held.clear()

    threading.Thread(target=free, name="toktok-free", daemon=True).start()


def hf_path_of(out_dir: str | os.PathLike) -> Path:
    """The tokenizer.json ``verify(out_dir)`` compares: the folder's, else the one that goes with
    its ``.tiktoken`` (in ``NAME.toktok/``). Example: ``hf_path_of("out/demo").name == "tokenizer.json"``."""
    where = Path(out_dir)
    return where / HF_FILE if (where / HF_FILE).is_file() else hf_file_of(folder_and_tiktoken(where)[1])


class _TiktokenSide:
    """tiktoken's half of phases 2 and 3 of ``verify``, made in a thread while HF's half still
    loads and the vocabularies are compared (tiktoken encodes without the GIL): the texts to
    check, each one's ids (with the special tokens it holds allowed: :func:`encode_all`) and those
    ids decoded back. What ``_compare`` checks them against, and in which order, is as without it."""

    def __init__(self, enc, stream: list[str]) -> None:
        self.stream = stream
        self.ids: list[list[int]] | None = None
        self.back: list[bytes] | None = None
        self._thread = threading.Thread(target=self._run, args=(enc,), name="toktok-tiktoken-encode", daemon=True)
        self._thread.start()

    def _run(self, enc) -> None:
        try:
            ids = encode_all(enc, self.stream)
            self.back = [enc.decode_bytes(a) for a in ids]
            self.ids = ids
        except Exception:  # (``_compare`` then encodes them itself, and meets the failure where it belongs)
            self.ids = None

    @classmethod
    def ahead(cls, enc, texts: list | None, slices: int, seed: int) -> _TiktokenSide | None:
        """Started for ``texts`` (as ``verify`` got them), or None when one is no valid text (the
        comparison then says which, in order, as it does without this) or they hold more than
        ``AHEAD_CHARS`` characters (compared batch by batch, as they come)."""
        if any(not isinstance(t, str) for t in texts or ()):
            return None
        stream = texts_to_check(enc.special_tokens_set, texts, slices, seed)
        if sum(map(len, stream)) > AHEAD_CHARS:  # (their ids all at once would hold too much)
            return None
        try:
            for t in stream:
                t.encode("utf-8")
        except UnicodeEncodeError:
            return None
        return cls(enc, stream)

    def done(self) -> bool:
        """Whether the texts are encoded and decoded (waited for)."""
        self._thread.join()
        return self.ids is not None


def _compare(where: Path, enc, hf: HFSide, texts: list | None, slices: int, seed: int,
             progress: Callable[[int, int], None] | None = None, mine: _TiktokenSide | None = None) -> VerifyReport:
    """Phases 2 and 3 of ``verify``: the texts, encoded by both and compared one by one, in order
    (``mine``: tiktoken's ids and decodes of them made already, used when its ids are the ones
    compared, see ``_TiktokenSide``)."""
    # Phase 2: the texts to check (a long one in parts).
    cut = sum(1 for t in texts or () if isinstance(t, str) and len(t) > PART)
    stream = mine.stream if mine is not None else texts_to_check(enc.special_tokens_set, texts, slices, seed)

    # Phase 3: encode in batches and compare text by text, in order; tiktoken's ids as HF cuts
    # the added tokens when their flags make it cut otherwise (toktok.added)
    added = hf.flags()
    like_hf = needs_split(added)
    if like_hf or mine is not None and not mine.done():
        mine = None
    finder = None if like_hf or mine is not None else _Specials(enc.special_tokens_set)
    strings = tokens = 0
    if progress is not None:
        progress(0, len(stream))
    for batch in _batches(stream, BATCH):
        for k, t in enumerate(batch):
            if not isinstance(t, str):
                raise InputError(f"text {strings + k}: expected str, got {type(t).__name__}")
            try:
                t.encode("utf-8")
            except UnicodeEncodeError as e:
                raise InputError(
                    f"text {strings + k} {_short(t)}: not valid Unicode at character {e.start} "
                    f"(lone surrogate); tokenizers need UTF-8 text"
                ) from None
        if like_hf:
            tt_all = [encode_like_hf(enc, t, added) for t in batch]
        elif mine is not None:
            tt_all = mine.ids[strings:strings + len(batch)]
        else:
            tt_all = encode_all(enc, batch, finder)
        hf_all, hf_text = hf.encode(batch)
        for t, a, b, back in zip(batch, tt_all, hf_all, hf_text):
            want = text_like_hf(t, added) if like_hf else t
            if a != b:
                i = _first_diff(a, b)
                raise ParityError(
                    f"{where}: ids differ on {_short(t)} at position {i}: tiktoken {a[i:i + 4]} "
                    f"{[enc.decode_single_token_bytes(x) for x in a[i:i + 4]]} vs HF {b[i:i + 4]} "
                    f"{[hf.token_bytes(x) for x in b[i:i + 4]]}"
                )
            raw = mine.back[strings] if mine is not None else enc.decode_bytes(a)
            if raw != want.encode("utf-8"):
                raise ParityError(f"{where}: tiktoken decode does not round-trip {_short(t)}: got {_short(raw.decode('utf-8', 'replace'))}")
            if back != want:
                raise ParityError(f"{where}: HF decode does not round-trip {_short(t)}: got {_short(back)}")
            strings += 1
            tokens += len(a)
        if progress is not None:
            progress(strings, len(stream))
    return VerifyReport(strings=strings, tokens=tokens, cut=cut)


def pattern_advice(e: ParityError, pattern) -> ParityError:
    """A parity failure under a user's regex: the regex is what tiktoken and HF read differently
    (the named patterns are proven alike), and ``--resume`` refuses a changed pattern, so the
    advice is a new pattern and a fresh start (nothing is kept for ``--resume``). Others as they are.
    Example: ``pattern_advice(ParityError("ids differ"), check(r"\\p{L}+|[\\s\\S]")).start_over``."""
    if pattern is None or pattern.named or not e.args:
        return e
    e.args = (f"{e.args[0]}; the cause is the pattern's regex, which tiktoken and HF split differently here: "
              "change it (or use a named pattern) and train again; --resume keeps the pattern", *e.args[1:])
    e.start_over = True  # (toktok.resume.start_over: what the run kept is of no use with another pattern)
    return e


def start(folder: Path, tokens: int, *, budgeted: bool = False) -> HFSide | None:
    """HF's half of the check opened before the last phase's merges when the run's tokenizer.json
    (in the staging ``folder``) will hold ``tokens`` tokens or so and loads in a second process
    (no memory budget, ``worth_a_process``); None otherwise (the export opens it then). Its process
    starts at ``spawn()``, which the pipeline calls once the merge loop has learned its first
    merges: it imports tokenizers on the core the loop leaves idle, not beside the export (0.1-0.2 s
    of CPU there) nor beside the words' layout before the loop (~0.07 s). Example:
    ``verify.start(staging, 131_072).spawn()``."""
    if not budgeted and worth_a_process(tokens):
        return Process(Path(folder) / HF_FILE, later=True)
    return None


def begin(hf: HFSide, vocab: Vocab, texts: list[str], *, slices: int, seed: int) -> None:
    """HF's half of the check (``hf``, which the export opened) starts encoding the texts
    :func:`check` compares (the built-in set, ``vocab``'s specials, ``slices`` seeded slices of
    ``texts``, the run's parity sample) while the run's next steps go on: in this process in a
    thread (tokenizers encodes without the GIL; a large tokenizer.json loads in a second process
    meanwhile instead). Example: ``verify.begin(hf, vocab, texts, slices=200, seed=0)`` after the export."""
    specials = [*vocab.specials, *vocab.pinned.values()]
    hf.encode_ahead(texts_to_check(specials, texts, slices, seed))


def check(folder: Path, vocab: Vocab, texts: list[str], *, hf: HFSide, pattern=None, slices: int, seed: int,
          written: tuple | None = None, report: Callable[[str, int, int | None], None] | None = None) -> VerifyReport:
    """The verify stage's entry (the pipeline's step 8): tiktoken and HF tokenizers give the same
    ids on the staging ``folder``'s files (of ``vocab``, pre-tokenized by ``pattern``), on the
    built-in set and on ``slices`` seeded slices of ``texts`` (the run's parity sample):
    ParityError if not (nothing is published then). HF's half is ``hf``, the one the export
    opened (closed here); ``written``: the .tiktoken text and vocabulary the export wrote, which
    the file must hold. Returns what was compared, and where HF tokenizers loaded
    (``VerifyReport.hf_tokenizers``). Example: ``verify.check(staging, vocab, texts, hf=hf, slices=200, seed=0).ok``."""
    # tiktoken's specials: the run's own, so that its half loads while HF's still parses (which
    # the specials would wait for; the check then holds HF's added tokens equal to them), unless
    # the export declared them in a file beside the .tiktoken, which is read and checked then
    folder = Path(folder)
    tt = folder_and_tiktoken(folder)[1]
    specials = None if special_tokens_file(tt).is_file() else vocab.special_ids()
    try:
        rep = verify(folder, texts, slices=slices, special_tokens=specials, seed=seed, hf=hf, pattern=pattern,
                     written=written, progress=(lambda done, total: report("verify", done, total)) if report else None)
    except ParityError as e:
        raise pattern_advice(e, pattern) from None
    return dataclasses.replace(rep, hf_tokenizers=hf.where)
