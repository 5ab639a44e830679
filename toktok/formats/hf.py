"""The Hugging Face format: ``tokenizer.json`` (BPE with every split of each token as a merge,
``ignore_merges``, GPT-2's byte-to-unicode vocabulary, Split + ByteLevel pre-tokenizers),
``tokenizer_config.json`` and ``special_tokens_map.json`` for transformers; and reading them back.

tiktoken merges the adjacent pair whose *concatenation* has the lowest rank, while HF's BPE walks
an ordered merge list: the merges are every split of every token, ordered by (rank of the token,
rank of left part, rank of right part) (``splits``), and ``ignore_merges`` takes a whole
pre-token found in the vocabulary as is, like tiktoken does.
Example: ``write_hf(vocab, "out"); load_hf("out").encode("hi").ids``.
"""
from __future__ import annotations

import json
import os
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from ..added import FLAGS
from ..errors import ConfigError, OutputError, VocabError
from ..patterns import DEFAULT, GPT2, Pattern, check
from ..vocab import Vocab
from .common import HF_CONFIG_FILE, HF_FILE, HF_SPECIAL_MAP_FILE, checked_vocab, write_atomic
from .splits import _split_merges

if TYPE_CHECKING:  # heavy imports stay lazy: the CLI must start fast
    import numpy as np
    import tokenizers


#: What transformers writes for "no limit" (``int(1e30)``); keeps long-input warnings away.
MODEL_MAX_LENGTH = 1000000000000000019884624838656


EOS_TOKEN = "<|endoftext|>"


# GPT-2 byte <-> unicode mapping


def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's reversible byte -> printable character table, e.g. ``bytes_to_unicode()[32] == "Ġ"``."""
    bs = (
        list(range(ord("!"), ord("~") + 1))
        + list(range(ord("¡"), ord("¬") + 1))
        + list(range(ord("®"), ord("ÿ") + 1))
    )
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


_BYTE_TO_CHAR = bytes_to_unicode()
# Decoding bytes as latin-1 maps byte b to chr(b), so one str.translate does the whole token.
_LATIN1_TO_BYTELEVEL = {b: c for b, c in _BYTE_TO_CHAR.items()}
_BYTELEVEL_TO_LATIN1 = {ord(c): b for b, c in _BYTE_TO_CHAR.items()}


def token_to_bytelevel(token: bytes) -> str:
    """The Hugging Face ByteLevel spelling of token bytes, e.g. ``token_to_bytelevel(b" a") == "Ġa"``."""
    if len(token) < 4096:
        return token.decode("latin-1").translate(_LATIN1_TO_BYTELEVEL)
    # a whole vocabulary's bytes at once: a table lookup per byte, far faster than str.translate
    import numpy as np

    return _bytelevel_utf32()[np.frombuffer(token, np.uint8)].tobytes().decode("utf-32-le")


@lru_cache(maxsize=1)
def _bytelevel_utf32():
    """Each byte's ByteLevel character as a UTF-32 (little-endian) code unit."""
    import numpy as np

    return np.array([ord(_BYTE_TO_CHAR[b]) for b in range(256)], "<u4")


@lru_cache(maxsize=1)
def _quoted_bytes():
    """Each byte's ByteLevel character as json quotes it inside a string, in UTF-8 (one or two
    bytes: ``"`` and ``\\`` are escaped, the rest are printable), as (first byte, second byte,
    length) arrays."""
    import numpy as np

    spelled = [_quote(_BYTE_TO_CHAR[b])[1:-1].encode("utf-8") for b in range(256)]
    assert all(1 <= len(x) <= 2 for x in spelled)
    return (np.array([x[0] for x in spelled], np.uint8), np.array([x[-1] for x in spelled], np.uint8),
            np.array([len(x) for x in spelled], np.int64))


def _quoted_names(tokens: list[bytes]):
    """The JSON strings of the tokens' ByteLevel names (``_quote(token_to_bytelevel(t))`` in
    UTF-8), concatenated, and the length of each: built for all tokens at once by a table lookup
    per byte (a 131k vocabulary in ~20 ms, where a Python string per token took ~0.3 s).
    Example: ``_quoted_names([b" a", b"b"]) == ('"Ġa""b"'.encode(), array([5, 3]))``."""
    import numpy as np

    first, second, width = _quoted_bytes()
    data = np.frombuffer(b"".join(tokens), np.uint8)
    n = len(tokens)
    tok_len = np.fromiter(map(len, tokens), np.int64, n)
    out_len = width[data]
    ends = np.cumsum(out_len)
    upto = np.concatenate(([0], ends))  # output bytes of the spellings before byte i
    tok_ends = np.cumsum(tok_len)
    spelled_len = upto[tok_ends] - upto[tok_ends - tok_len]
    name_len = spelled_len + 2
    name_at = np.cumsum(name_len) - name_len
    out = np.empty(int(name_len.sum()), np.uint8)
    # byte j of token k goes after the quotes of tokens 0..k and the spellings of bytes before j
    pos = ends - out_len + 2 * np.repeat(np.arange(n, dtype=np.int64), tok_len) + 1
    out[pos] = first[data]
    two = out_len == 2
    out[pos[two] + 1] = second[data[two]]
    out[name_at] = ord('"')
    out[name_at + name_len - 1] = ord('"')
    return out.tobytes(), name_len


def _decimals(n: int, first: int = 0):
    """The numbers ``first``..n-1 in decimal, concatenated, and the length of each: a column of
    digits at a time (a Python string per number took 8 ms of 65,536).
    Example: ``_decimals(12) == (b"01234567891011", array([1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2]))``."""
    import numpy as np

    top, x = max(n - 1, 0), np.arange(first, n, dtype=np.int64)
    n = len(x)
    width = np.ones(n, np.int64)
    for bound in (10 ** k for k in range(1, len(str(top)))):
        width += x >= bound
    ends = np.cumsum(width)
    out = np.empty(int(ends[-1]) if n else 0, np.uint8)
    for k in range(int(width[-1]) if n else 0):  # the k-th digit from the right of each that has one
        has = width > k if k else slice(None)
        out[ends[has] - 1 - k] = 48 + (x[has] // 10 ** k) % 10
    return out.tobytes(), width


def bytelevel_to_token(text: str) -> bytes:
    """Inverse of ``token_to_bytelevel``; raises VocabError on a character outside the table."""
    try:
        return text.translate(_BYTELEVEL_TO_LATIN1).encode("latin-1")
    except UnicodeEncodeError as e:
        raise VocabError(f"byte-level token {text!r} has character {text[e.start]!r} outside the byte table") from None


def _added_token(content: str, id_: int, flags: dict | None = None) -> dict:
    """An ``added_tokens`` entry; ``flags`` (see :mod:`toktok.added`) over a special token's defaults."""
    fl = {**FLAGS, **(flags or {})}
    return {"id": id_, "content": content, **{k: fl[k] for k in ("single_word", "lstrip", "rstrip", "normalized",
                                                                  "special")}}


# json's own string quoting (C-accelerated), as json.dumps(..., ensure_ascii=False) uses it.
_quote = json.encoder.encode_basestring


def hf_tokenizer_json(vocab: Vocab, pattern: Pattern = DEFAULT, *, added: dict[str, dict] | None = None) -> bytes:
    """The ``tokenizer.json`` content for ``vocab`` split by ``pattern`` (its HF form; see the module
    docstring for the recipe); ``added``: ``{special: flags}`` of the specials whose added-token
    flags differ from the defaults.

    Deterministic: the same vocabulary and pattern always give the same bytes (built ahead, token
    by token beside the merge loop, too: :mod:`.ahead`, from the same parts).
    Example: ``json.loads(hf_tokenizer_json(Vocab.base()))["model"]["type"] == "BPE"``.
    """
    # vocab and merges, one entry per line; json's indent mode is pure Python and far too slow
    # for a million merges, so these lines are spelled by a kernel (``spell.lines``) from a pool
    # of the names (escaped as json does) and the ids
    names = _names(vocab.tokens, vocab.pinned)
    return _spliced(_head(vocab, pattern, added), _vocab_lines(names),
                    _merge_lines(names, _split_merges(vocab.tokens, vocab.pinned)))


def _head(vocab: Vocab, pattern: Pattern = DEFAULT, added: dict[str, dict] | None = None) -> tuple[bytes, bytes, bytes]:
    """tokenizer.json's small parts, laid out by json with a fixed key order, as the text before
    the model's vocab, between it and the merges, and after them (to the end of the file)."""
    skeleton = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [_added_token(s, i, (added or {}).get(s)) for s, i in vocab.special_ids().items()],
        "normalizer": None,
        "pre_tokenizer": {
            "type": "Sequence",
            "pretokenizers": [
                # HF's form (toktok.patterns): Oniguruma reads `{1,3}+` as a repetition, `^`/`$` as line anchors
                {"type": "Split", "pattern": {"Regex": pattern.hf}, "behavior": "Isolated", "invert": False},
                {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False},
            ],
        },
        "post_processor": None,
        "decoder": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False},
        "model": {
            "type": "BPE",
            "dropout": None,
            "unk_token": None,
            "continuing_subword_prefix": None,
            "end_of_word_suffix": None,
            "fuse_unk": False,
            "byte_fallback": False,
            "ignore_merges": True,
            "vocab": "@VOCAB@",
            "merges": "@MERGES@",
        },
    }
    head = json.dumps(skeleton, ensure_ascii=False, indent=2)
    # A special token could spell a placeholder too, but those sit in added_tokens, earlier in
    # the document: the last occurrences are always the model's.
    before, _, after = head.rpartition('"@MERGES@"')
    before_v, _, between = before.rpartition('"@VOCAB@"')
    return before_v.encode("utf-8"), between.encode("utf-8"), after.encode("utf-8") + b"\n"


class _Names(NamedTuple):
    """Tokens' names as tokenizer.json spells them (JSON strings: the ByteLevel spelling, a pinned
    special's own text), in one pool, with their ids in decimal after them: entry k of the pool
    (``at[k]``, ``length[k]``) is token ``first + k``'s name, entry ``n + k`` its id."""

    pool: bytes
    at: np.ndarray
    length: np.ndarray
    first: int  # the id of the first name
    n: int  # names

    @staticmethod
    def join(parts: list[_Names]) -> _Names:
        """Consecutive parts (ids in order) as one; the ids' entries are dropped (only the merges
        are spelled from the whole)."""
        import numpy as np

        at, shift = [], 0
        for p in parts:
            at.append(p.at[:p.n] + shift)
            shift += len(p.pool)
        return _Names(b"".join(p.pool for p in parts), np.concatenate(at), np.concatenate([p.length[:p.n] for p in parts]),
                      parts[0].first, sum(p.n for p in parts))


def _names(tokens: list[bytes], pinned: dict[int, str], first: int = 0) -> _Names:
    """The names and ids of ``tokens``, ids ``first`` on (``pinned``: ``{id: special}`` of the
    whole vocabulary; a pinned special sits in the model's vocab under its own text, as HF's
    BpeTrainer puts its specials, so that HF keeps its id; no merge makes or uses it)."""
    import numpy as np

    n = len(tokens)
    names, name_len = _quoted_names(tokens) if n else (b"", np.zeros(0, np.int64))
    name_at = np.cumsum(name_len) - name_len
    for i, s in pinned.items():  # spelled after the other names
        if first <= i < first + n:
            q = _quote(s).encode("utf-8")
            name_at[i - first], name_len[i - first] = len(names), len(q)
            names += q
    ids, id_len = _decimals(first + n, first)
    id_at = np.cumsum(id_len) - id_len + len(names)
    return _Names(names + ids, np.concatenate([name_at, id_at]), np.concatenate([name_len, id_len]), first, n)


def _vocab_lines(names: _Names, compiled: bool = False) -> bytes:
    """The model's vocab lines (``"name": id``, joined by ",\n") of the tokens in ``names``
    (``compiled``: by the kernel, however few: ``spell._spelled``)."""
    import numpy as np

    from .spell import _spelled, lines

    rows = np.arange(names.n, dtype=np.int32)[:, None] + np.array([0, names.n], np.int32)
    return (_spelled if compiled else lines)(names.pool, names.at, names.length, rows, [b"      ", 0, b": ", 1], b",\n")


def _merge_lines(names: _Names, merges) -> bytes:
    """The model's merge lines (``"left right"``, joined by ",\n") of rows (left id, right id),
    ``names`` those of every token: each merge one JSON string, its two names inside without
    their quotes, a space between (a byte-level name has no space: byte 0x20 is spelled "Ġ"; a
    pinned special, which may, is in no merge). tokenizers reads that form as the pair form
    ``["left", "right"]``, the same merges, and loads it ~25% faster (0.10 s where the pairs
    took 0.13 s, at 65,536 tokens): the check's HF half waits for that load."""
    from .spell import lines

    return lines(names.pool, names.at + 1, names.length - 2, merges, [b'      "', 0, b" ", 1, b'"'], b",\n")


def _spliced(head: tuple[bytes, bytes, bytes], vocab_body: bytes, merges_body: bytes) -> bytes:
    """tokenizer.json from its head (``_head``) and the model's vocab and merge lines."""
    before, between, after = head
    vocab_text = b"{\n" + vocab_body + b"\n    }" if vocab_body else b"{}"
    merges_text = b"[\n" + merges_body + b"\n    ]" if merges_body else b"[]"
    return b"".join([before, vocab_text, between, merges_text, after])


def hf_config_files(vocab: Vocab, roles: dict[str, str] | None = None, *, added: dict[str, dict] | None = None,
                    chat_template: str | None = None) -> tuple[bytes, bytes]:
    """The ``tokenizer_config.json`` and ``special_tokens_map.json`` contents for ``vocab``.

    ``roles`` maps ``bos_token``/``eos_token``/``pad_token``/``unk_token`` to special tokens of
    ``vocab``; without an ``eos_token`` role, ``<|endoftext|>`` is the eos token when it is special.
    ``added``: ``{special: flags}`` as for :func:`hf_tokenizer_json` (a token with ``special``
    false is an added token, not one of transformers' special tokens); ``chat_template``: the Jinja
    text of transformers' ``apply_chat_template``.
    Example: ``json.loads(hf_config_files(v)[0])["tokenizer_class"] == "PreTrainedTokenizerFast"``.
    """
    decoder = {}
    for s, i in vocab.special_ids().items():
        entry = _added_token(s, i, (added or {}).get(s))
        del entry["id"]
        decoder[str(i)] = entry
    config: dict = {"added_tokens_decoder": decoder}
    special_map: dict = {}
    specials = [s for s in vocab.all_specials() if (added or {}).get(s, FLAGS)["special"]]
    if specials:
        config["additional_special_tokens"] = specials
        special_map["additional_special_tokens"] = specials
    specials = vocab.all_specials()  # a role may name any added token
    roles = dict(roles or {})
    if "eos_token" not in roles and EOS_TOKEN in specials:
        roles["eos_token"] = EOS_TOKEN
    for role in ("bos_token", "eos_token", "pad_token", "unk_token"):
        if role in roles:
            if roles[role] not in specials:
                raise VocabError(f"{role} {roles[role]!r} is not one of the special tokens; pick one of them")
            config[role] = special_map[role] = roles[role]
    if chat_template is not None:
        config["chat_template"] = chat_template
    config.update(
        {
            "clean_up_tokenization_spaces": False,
            "model_max_length": MODEL_MAX_LENGTH,
            "tokenizer_class": "PreTrainedTokenizerFast",
        }
    )
    dump = lambda o: (json.dumps(o, ensure_ascii=False, indent=2) + "\n").encode("utf-8")  # noqa: E731
    return dump(config), dump(special_map)


def write_hf(vocab: Vocab, out_dir: str | os.PathLike, *, roles: dict[str, str] | None = None,
             check: bool = True, pattern: Pattern = DEFAULT, added: dict[str, dict] | None = None,
             chat_template: str | None = None, sync: bool = True, tokenizer_json: bool = True) -> Path:
    """Write ``tokenizer.json``, ``tokenizer_config.json`` and ``special_tokens_map.json`` into ``out_dir``
    (``roles``, ``added``, ``chat_template``: see ``hf_config_files``; ``check=False``: the caller
    has run ``vocab.check()``; ``pattern``: the pre-tokenizer, whose HF form the Split gets;
    ``sync=False``: the files are not forced to disk, :func:`~.common.write_atomic`;
    ``tokenizer_json=False``: the transformers files only, tokenizer.json is written: built ahead).

    The folder loads with ``tokenizers.Tokenizer.from_file`` and
    ``transformers.PreTrainedTokenizerFast.from_pretrained`` and gives tiktoken's ids.
    Returns the folder. Example: ``write_hf(Vocab.base(), "out/demo")``.
    """
    out = Path(out_dir)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise OutputError(f"{out}: cannot create folder ({e.strerror or e})") from None
    vocab = (checked_vocab(vocab) if check else vocab).settled()
    config, special_map = hf_config_files(vocab, roles, added=added, chat_template=chat_template)
    if tokenizer_json:
        write_atomic(out / HF_FILE, hf_tokenizer_json(vocab, pattern, added=added), sync=sync)
    write_atomic(out / HF_CONFIG_FILE, config, sync=sync)
    write_atomic(out / HF_SPECIAL_MAP_FILE, special_map, sync=sync)
    return out


def read_hf_specials(tokenizer_json: str | os.PathLike, *, whole: bool = True) -> dict[str, int] | None:
    """``{content: id}`` of the special ``added_tokens`` in a tokenizer.json; {} if the file is absent.
    A file laid out as toktok and HF write it (two-space indent) is read from its ``added_tokens``
    key only, not parsed whole (4 MB at 65,536 tokens: ~0.03 s); another is parsed whole, or,
    with ``whole=False``, gives None (for a caller that has it loaded elsewhere).

    Example: ``read_hf_specials("out/demo/tokenizer.json") == {"<|endoftext|>": 2000}``.
    """
    p = Path(tokenizer_json)
    if not p.exists():
        return {}
    try:
        data = p.read_bytes()
        added = _depth_one_value(data, b"added_tokens")
        if added is _ABSENT:
            if not whole:
                return None
            doc = json.loads(data)
            added = doc.get("added_tokens")
        return {a["content"]: int(a["id"]) for a in added or [] if a.get("special", True)}
    except (OSError, ValueError, TypeError, KeyError, AttributeError) as e:
        raise VocabError(f"{p}: cannot read added_tokens ({e})") from None


_ABSENT = object()


def _depth_one_value(data: bytes, key: bytes):
    """The value of ``key`` in a JSON object laid out with a two-space indent, read from the key
    on (a key at depth 1 is the only place a newline and two spaces can come before it: a JSON
    string holds no raw newline); ``_ABSENT`` when the file is not laid out so or holds the key
    twice (then it is parsed whole, as tokenizers parses it)."""
    marker = b'\n  "' + key + b'": '
    at = data.find(marker)
    if at < 0 or data.find(marker, at + 1) >= 0 or not data.startswith(b"{\n  \""):
        return _ABSENT
    try:
        return json.JSONDecoder().raw_decode(data[at + len(marker):].decode("utf-8"))[0]
    except ValueError:
        return _ABSENT


def components(node, out: list[dict] | None = None) -> list[dict]:
    """The steps of a tokenizer.json pre-tokenizer / normalizer / decoder tree, depth first (a
    ``Sequence``'s steps, not the ``Sequence``).
    Example: ``[c["type"] for c in components(doc["pre_tokenizer"])] == ["Split", "ByteLevel"]``."""
    out = [] if out is None else out
    if isinstance(node, dict):
        if "type" in node and node.get("type") != "Sequence":
            out.append(node)
        for v in node.values():
            components(v, out)
    elif isinstance(node, list):
        for v in node:
            components(v, out)
    return out


def split_pattern(pre_tokenizer, where: str = "tokenizer.json") -> tuple[Pattern | None, str | None]:
    """The pattern a tokenizer.json's ``pre_tokenizer`` splits text with, as ``(pattern, None)``
    when toktok reads it the same way in tiktoken (one ``Split`` of a regex, ``Isolated``, beside
    ``ByteLevel`` without its own regex: the regex checked as written, :func:`toktok.patterns.check`;
    or ``ByteLevel`` with its regex alone: GPT-2's), else ``(None, why)``; ``(None, None)`` without
    a pre-tokenizer.
    Example: ``split_pattern(json.load(open("out/demo/tokenizer.json"))["pre_tokenizer"])[0].name == "cl100k"``."""
    if pre_tokenizer is None:
        return None, None  # records none (a tokenizer.json kept beside a .tiktoken for its specials)
    parts = components(pre_tokenizer)
    splits = [c for c in parts if c.get("type") == "Split"]
    levels = [c for c in parts if c.get("type") == "ByteLevel"]
    regex_levels = [c for c in levels if c.get("use_regex", True)]
    others = [c.get("type", "?") for c in parts if c.get("type") not in ("Split", "ByteLevel")]
    if others:
        return None, f"its pre-tokenizer has a {others[0]} step"
    if not splits:
        if regex_levels:
            return check(GPT2), None  # ByteLevel's own regex is GPT-2's
        return None, "it has no Split pattern"
    if len(splits) > 1 or regex_levels:
        return None, "it splits text twice (several Split steps, or a Split and ByteLevel's own regex)"
    sp = splits[0]
    regex_text = (sp.get("pattern") or {}).get("Regex")
    if not isinstance(regex_text, str) or sp.get("behavior") != "Isolated" or sp.get("invert"):
        return None, "its Split is not one regex split Isolated"
    try:
        return check(regex_text, f"{where}: pre_tokenizer Split", keep=True), None
    except ConfigError as e:
        return None, str(e).split(": ", 2)[-1]


def read_split(path: str | os.PathLike) -> tuple[Pattern | None, str | None]:
    """:func:`split_pattern` of a tokenizer.json file. A file laid out as toktok and HF write it
    (two-space indent) is read only from its ``pre_tokenizer`` key on, not parsed whole."""
    p = Path(path)
    try:
        data = p.read_bytes()
    except OSError as e:
        raise VocabError(f"{p}: cannot read ({e.strerror or e})") from None
    marker = b'\n  "pre_tokenizer": '  # a key at depth 1: JSON strings cannot hold a raw newline
    key = data.find(marker)
    try:
        text = data[key + len(marker):key + len(marker) + (1 << 20)].decode("utf-8", "ignore")
        pre = json.JSONDecoder().raw_decode(text)[0] if key >= 0 else None
    except ValueError:
        key = -1
    if key < 0:
        try:
            doc = json.loads(data)
        except ValueError as e:
            raise VocabError(f"{p}: not valid JSON ({e}); fix the file or give another") from None
        if not isinstance(doc, dict):
            raise VocabError(f"{p}: a JSON {type(doc).__name__}, not a Hugging Face tokenizer.json (an object with a "
                             "model); give the tokenizer.json a tokenizer was saved as")
        pre = doc.get("pre_tokenizer")
    return split_pattern(pre, str(p))


def encoded_ids(tok, texts: list[str]) -> list[list[int]]:
    """Each text's ids by the ``tokenizers.Tokenizer`` ``tok``, no special tokens added: by
    ``encode_batch_fast`` where tokenizers has it (0.20+: the same ids without the offsets,
    ~30% less CPU). Example: ``encoded_ids(load_hf("out/demo"), ["hello"])[0]``."""
    encode = getattr(tok, "encode_batch_fast", None) or tok.encode_batch
    return [e.ids for e in encode(texts, add_special_tokens=False)]


def load_hf(path: str | os.PathLike) -> "tokenizers.Tokenizer":
    """A ``tokenizers.Tokenizer`` from a folder holding ``tokenizer.json`` or from the file itself.

    Example: ``load_hf("out/demo").encode("hello", add_special_tokens=False).ids``.
    """
    import tokenizers

    p = Path(path)
    if p.is_dir():
        p = p / HF_FILE
    if not p.is_file():
        raise VocabError(f"{p}: no such file; expected a Hugging Face tokenizer.json")
    try:
        return tokenizers.Tokenizer.from_file(str(p))
    except Exception as e:  # tokenizers raises a bare Exception on any parse problem
        msg = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise VocabError(f"{p}: Hugging Face tokenizers cannot load it ({msg})") from None
