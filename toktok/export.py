"""Write a vocabulary as tiktoken and Hugging Face files that give identical ids, and load them back.

The two formats encode differently: tiktoken merges the adjacent pair whose *concatenation* has the
lowest rank, while Hugging Face BPE walks an ordered merge list. ``write_hf`` lists every split of
every token as a merge, ordered by (rank of the token, rank of left part, rank of right part), and sets
``ignore_merges`` so a whole pre-token found in the vocabulary is taken as is, like tiktoken does.
Example: ``write_tiktoken(vocab, "out/tokenizer.tiktoken"); write_hf(vocab, "out")``.
"""
from __future__ import annotations

import base64
import binascii
import json
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING

from .errors import ConfigError, OutputError, VocabError
from .rundir import COMPANION_SUFFIX, companion_name, special_tokens_file  # the names of the outputs
from .vocab import PATTERN, Vocab

if TYPE_CHECKING:  # heavy imports stay lazy: the CLI must start fast
    import tiktoken
    import tokenizers

TIKTOKEN_FILE = "tokenizer.tiktoken"
HF_FILE = "tokenizer.json"
HF_CONFIG_FILE = "tokenizer_config.json"
HF_SPECIAL_MAP_FILE = "special_tokens_map.json"
#: toktoktok's plain special-token list, looked for in a .tiktoken file's folder.
SPECIALS_TXT = "special_tokens.txt"

#: What transformers writes for "no limit" (``int(1e30)``); keeps long-input warnings away.
MODEL_MAX_LENGTH = 1000000000000000019884624838656

EOS_TOKEN = "<|endoftext|>"


# ---------------------------------------------------------------------------------------------
# GPT-2 byte <-> unicode mapping
# ---------------------------------------------------------------------------------------------


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
    return token.decode("latin-1").translate(_LATIN1_TO_BYTELEVEL)


def bytelevel_to_token(text: str) -> bytes:
    """Inverse of ``token_to_bytelevel``; raises VocabError on a character outside the table."""
    try:
        return text.translate(_BYTELEVEL_TO_LATIN1).encode("latin-1")
    except UnicodeEncodeError as e:
        raise VocabError(f"byte-level token {text!r} has character {text[e.start]!r} outside the byte table") from None


# ---------------------------------------------------------------------------------------------
# Writing
# ---------------------------------------------------------------------------------------------


def _write_atomic(path: Path, data: bytes) -> None:
    """Write ``data`` to a temporary name beside ``path`` and rename it over ``path``.

    Readers never see a half-written file; the temporary is removed on failure.
    """
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as e:
        try:
            tmp.unlink()
        except OSError:
            pass
        raise OutputError(f"{path}: cannot write ({e.strerror or e}); check the folder exists and is writable") from None


def _checked(vocab: Vocab) -> Vocab:
    # tiktoken panics on a missing single byte and HF silently drops duplicates: refuse both up front.
    vocab.check()
    return vocab


def tiktoken_text(vocab: Vocab) -> bytes:
    """The ``.tiktoken`` file content: ``base64(token) rank`` per line, ranks 0..N-1.

    Example: ``tiktoken_text(Vocab.base(hardcoded=False)).splitlines()[65] == b"QQ== 65"``.
    """
    pinned = vocab.pinned
    return b"".join(base64.b64encode(t) + b" %d\n" % i for i, t in enumerate(vocab.tokens) if i not in pinned)


def write_tiktoken(vocab: Vocab, path: str | os.PathLike) -> Path:
    """Write ``vocab`` ranks as a standard tiktoken file at ``path`` (special tokens are not stored;
    the ids of pinned specials are left out of the ranks).

    Returns the path. Example: ``write_tiktoken(Vocab.base(), "out/tokenizer.tiktoken")``.
    """
    path = Path(path)
    _write_atomic(path, tiktoken_text(_checked(vocab)))
    return path


#: Tokens up to this many bytes have every split point tried (compiled: ``merge.token_splits``);
#: longer ones in Python, every split point while that is cheap (``LONG_PLAIN_BUDGET``), else
#: only those where a token of each length could fit (see ``_FingerprintIndex.splits``).
SPLIT_ALL_UP_TO = 64
#: Bytes of slicing (the sum of the squared lengths of the long tokens) up to which every split
#: point of a long token is tried as for short ones: indexing every token costs more than that.
LONG_PLAIN_BUDGET = 1 << 24


def all_split_merges(tokens: list[bytes], skip: "set[int] | dict[int, str] | None" = None) -> list[tuple[int, int]]:
    """Every (left id, right id) whose concatenation is a token, ordered by (token, left, right) rank.

    Ids in ``skip`` (pinned special tokens' placeholders) are neither split nor parts.
    A short token costs one pair of lookups per split point (compiled). A long token (a run of
    one character grows to 2^k bytes) costs a few lookups per length of the tokens that begin
    with its first byte plus one comparison of its bytes per split found, so a 1 MB token is not
    sliced at each of its million split points; while the long tokens are few and short enough
    (``LONG_PLAIN_BUDGET``), they are sliced at every split point instead of indexing them all.
    Example: ``all_split_merges([b"a", b"b", b"ab"]) == [(0, 1)]``.
    """
    rows = _split_merges(tokens, skip)
    return list(zip(rows[:, 0].tolist(), rows[:, 1].tolist()))


def _split_merges(tokens: list[bytes], skip=None):
    """``all_split_merges`` as an array of rows (left, right)."""
    import numpy as np

    from .merge import token_splits

    skip = skip or ()
    rows = [token_splits(tokens, skip, SPLIT_ALL_UP_TO)]
    long = [(i, t) for i, t in enumerate(tokens) if len(t) > SPLIT_ALL_UP_TO and i not in skip]
    if long:
        ids = {t: i for i, t in enumerate(tokens) if i not in skip}
        if sum(len(t) ** 2 for _, t in long) <= LONG_PLAIN_BUDGET:
            get = ids.get
            found = [(n_id, left, right) for n_id, tok in long for k in range(1, len(tok))
                     if (left := get(tok[:k])) is not None and (right := get(tok[k:])) is not None]
            found.sort()
        else:
            index = _FingerprintIndex(tokens, ids)
            found = sorted((n_id, left, right) for n_id, tok in long for left, right in index.splits(tok))
        rows.append(np.array(found, np.int64).reshape(-1, 3))
        # id order = rank order of the merged token; distinct split points give distinct left
        # parts, so (token, left) orders them totally (each part is in that order already)
        out = np.concatenate(rows)
        out = out[np.argsort(out[:, 0], kind="stable")]
    else:
        out = rows[0]
    return out[:, 1:]


def _fingerprint(t: bytes) -> tuple[int, bytes, bytes]:
    return len(t), t[:8], t[-8:]


class _FingerprintIndex:
    """The tokens by (length, first 8 bytes, last 8 bytes), and the lengths of the tokens that
    begin / end with each byte."""

    def __init__(self, tokens: list[bytes], ids: dict[bytes, int]):
        self.tokens = tokens
        self.by_print: dict[tuple[int, bytes, bytes], list[int]] = {}
        first: dict[int, set[int]] = {}
        self.last: dict[int, set[int]] = {}
        for t, i in ids.items():
            self.by_print.setdefault(_fingerprint(t), []).append(i)
            if t:
                first.setdefault(t[0], set()).add(len(t))
                self.last.setdefault(t[-1], set()).add(len(t))
        self.first = {b: sorted(ls) for b, ls in first.items()}

    def splits(self, tok: bytes) -> list[tuple[int, int]]:
        """Every (left id, right id) that spells ``tok``. Only split points k where a token of
        length k begins like ``tok`` and one of length len - k ends like it are tried; a
        fingerprint of 16 bytes of ``tok`` finds the candidates, ``startswith``/``endswith``
        confirm them without copying. Cost: O(tokens beginning with tok's first byte), plus
        O(len) per split found (the split's line in tokenizer.json is that long anyway)."""
        n = len(tok)
        ends = self.last.get(tok[-1], ())
        out = []
        for k in self.first.get(tok[0], ()):
            if k >= n:
                break
            if n - k not in ends:
                continue
            lefts = self.by_print.get((k, tok[:min(k, 8)], tok[max(0, k - 8):k]))
            if lefts is None:
                continue
            rights = self.by_print.get((n - k, tok[k:k + 8], tok[max(k, n - 8):]))
            if rights is None:
                continue
            left = next((i for i in lefts if tok.startswith(self.tokens[i])), None)
            right = next((i for i in rights if tok.endswith(self.tokens[i])), None)
            if left is not None and right is not None:
                out.append((left, right))
        return out


def _added_token(content: str, id_: int) -> dict:
    return {
        "id": id_,
        "content": content,
        "single_word": False,
        "lstrip": False,
        "rstrip": False,
        "normalized": False,
        "special": True,
    }


# json's own string quoting (C-accelerated), as json.dumps(..., ensure_ascii=False) uses it.
_quote = json.encoder.encode_basestring


def hf_tokenizer_json(vocab: Vocab) -> bytes:
    """The ``tokenizer.json`` content for ``vocab`` (see the module docstring for the recipe).

    Deterministic: the same vocabulary always gives the same bytes.
    Example: ``json.loads(hf_tokenizer_json(Vocab.base()))["model"]["type"] == "BPE"``.
    """
    # Phase 1: the small parts, laid out by json with a fixed key order.
    skeleton = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [_added_token(s, i) for s, i in vocab.special_ids().items()],
        "normalizer": None,
        "pre_tokenizer": {
            "type": "Sequence",
            "pretokenizers": [
                # Non-possessive pattern on purpose: Oniguruma reads `{1,3}+` as a repetition.
                {"type": "Split", "pattern": {"Regex": PATTERN}, "behavior": "Isolated", "invert": False},
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

    # Phase 2: vocab and merges, one entry per line; json's indent mode is pure Python and far
    # too slow for a million merges, so these lines are assembled by hand (strings still escaped by json).
    # A pinned special sits in the model's vocab under its own text (as HF's BpeTrainer puts
    # its specials), so that HF keeps its id; no merge makes or uses it.
    names = [_quote(vocab.pinned[i] if i in vocab.pinned else token_to_bytelevel(t)) for i, t in enumerate(vocab.tokens)]
    vocab_body = ",\n".join(f"      {s}: {i}" for i, s in enumerate(names))
    merges = _split_merges(vocab.tokens, vocab.pinned)
    merges_body = ",\n".join(f"      [{names[a]}, {names[b]}]" for a, b in zip(merges[:, 0].tolist(), merges[:, 1].tolist()))
    vocab_text = "{\n" + vocab_body + "\n    }" if names else "{}"
    merges_text = "[\n" + merges_body + "\n    ]" if merges_body else "[]"

    # Phase 3: splice. A special token could spell a placeholder too, but those sit in
    # added_tokens, earlier in the document: the last occurrences are always the model's.
    before, _, after = head.rpartition('"@MERGES@"')
    before_v, _, between = before.rpartition('"@VOCAB@"')
    text = before_v + vocab_text + between + merges_text + after
    return (text + "\n").encode("utf-8")


def hf_config_files(vocab: Vocab, roles: dict[str, str] | None = None) -> tuple[bytes, bytes]:
    """The ``tokenizer_config.json`` and ``special_tokens_map.json`` contents for ``vocab``.

    ``roles`` maps ``bos_token``/``eos_token``/``pad_token``/``unk_token`` to special tokens of
    ``vocab``; without an ``eos_token`` role, ``<|endoftext|>`` is the eos token when it is special.
    Example: ``json.loads(hf_config_files(v)[0])["tokenizer_class"] == "PreTrainedTokenizerFast"``.
    """
    decoder = {}
    for s, i in vocab.special_ids().items():
        entry = _added_token(s, i)
        del entry["id"]
        decoder[str(i)] = entry
    config: dict = {"added_tokens_decoder": decoder}
    special_map: dict = {}
    specials = vocab.all_specials()
    if specials:
        config["additional_special_tokens"] = specials
        special_map["additional_special_tokens"] = specials
    roles = dict(roles or {})
    if "eos_token" not in roles and EOS_TOKEN in specials:
        roles["eos_token"] = EOS_TOKEN
    for role in ("bos_token", "eos_token", "pad_token", "unk_token"):
        if role in roles:
            if roles[role] not in specials:
                raise VocabError(f"{role} {roles[role]!r} is not one of the special tokens; pick one of them")
            config[role] = special_map[role] = roles[role]
    config.update(
        {
            "clean_up_tokenization_spaces": False,
            "model_max_length": MODEL_MAX_LENGTH,
            "tokenizer_class": "PreTrainedTokenizerFast",
        }
    )
    dump = lambda o: (json.dumps(o, ensure_ascii=False, indent=2) + "\n").encode("utf-8")  # noqa: E731
    return dump(config), dump(special_map)


def write_hf(vocab: Vocab, out_dir: str | os.PathLike, *, roles: dict[str, str] | None = None) -> Path:
    """Write ``tokenizer.json``, ``tokenizer_config.json`` and ``special_tokens_map.json`` into ``out_dir``
    (``roles``: see ``hf_config_files``).

    The folder loads with ``tokenizers.Tokenizer.from_file`` and
    ``transformers.PreTrainedTokenizerFast.from_pretrained`` and gives tiktoken's ids.
    Returns the folder. Example: ``write_hf(Vocab.base(), "out/demo")``.
    """
    out = Path(out_dir)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise OutputError(f"{out}: cannot create folder ({e.strerror or e})") from None
    vocab = _checked(vocab)
    config, special_map = hf_config_files(vocab, roles)
    _write_atomic(out / HF_FILE, hf_tokenizer_json(vocab))
    _write_atomic(out / HF_CONFIG_FILE, config)
    _write_atomic(out / HF_SPECIAL_MAP_FILE, special_map)
    return out


# ---------------------------------------------------------------------------------------------
# Reading
# ---------------------------------------------------------------------------------------------


_TIKTOKEN_FIX = "; each line must be 'base64(token) rank', fix or regenerate the file"


def read_tiktoken_ranks(path: str | os.PathLike) -> tuple[dict[int, bytes], dict[int, int]]:
    """``({rank: token bytes}, {rank: line number})`` of a ``.tiktoken`` file; ranks may have gaps.

    Blank lines are skipped (as tiktoken does). Raises VocabError naming the file and line on a
    malformed line, an empty token, or a repeated rank or token.
    """
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as e:
        raise VocabError(f"{path}: cannot read ({e.strerror or e})") from None
    fast = _ranks_of_plain_lines(data)
    if fast is not None:
        return fast

    by_rank: dict[int, bytes] = {}
    rank_line: dict[int, int] = {}
    token_line: dict[bytes, int] = {}
    for lineno, raw in enumerate(data.splitlines(), start=1):
        line = raw.strip()
        if not line:
            continue
        where = f"{path}:{lineno}"
        parts = line.split()
        if len(parts) != 2:
            raise VocabError(f"{where}: expected 'base64 rank', got {raw[:60].decode('latin-1')!r}" + _TIKTOKEN_FIX)
        b64, rank_text = parts
        try:
            token = base64.b64decode(b64, validate=True)
        except (binascii.Error, ValueError):
            raise VocabError(f"{where}: {b64[:60].decode('latin-1')!r} is not valid base64" + _TIKTOKEN_FIX) from None
        if not rank_text.isdigit():
            raise VocabError(f"{where}: rank {rank_text[:20].decode('latin-1')!r} is not a non-negative integer" + _TIKTOKEN_FIX)
        rank = int(rank_text)
        if not token:
            raise VocabError(f"{where}: token of rank {rank} is empty" + _TIKTOKEN_FIX)
        if rank in by_rank:
            raise VocabError(f"{where}: rank {rank} already given on line {rank_line[rank]}; "
                             "each rank must appear once, fix or regenerate the file")
        if token in token_line:
            raise VocabError(f"{where}: token {token!r} already given on line {token_line[token]}; "
                             "each token must appear once, fix or regenerate the file")
        by_rank[rank] = token
        rank_line[rank] = lineno
        token_line[token] = lineno

    if not by_rank:
        raise VocabError(f"{path}: no tokens; expected lines of 'base64 rank'")
    return by_rank, rank_line


#: A .tiktoken file as toktok and tiktoken write it: ``base64 rank`` lines, one space, "\n" ends.
_PLAIN_TIKTOKEN = re.compile(rb"(?:(?:[A-Za-z0-9+/]+={0,2}|={1,2}) [0-9]+\n)*(?:(?:[A-Za-z0-9+/]+={0,2}|={1,2}) [0-9]+)?")


def _ranks_of_plain_lines(data: bytes) -> tuple[dict[int, bytes], dict[int, int]] | None:
    """``read_tiktoken_ranks`` of a file whose lines are all plain ``base64 rank`` (no blank line,
    one space), decoded in bulk; None if it is not, or if a token is empty or repeated, or a
    rank repeated: then the line-by-line reading names the line."""
    if not data or _PLAIN_TIKTOKEN.fullmatch(data) is None:
        return None
    fields = data.split()
    try:  # the regex checked what base64.b64decode(validate=True) checks, except the padding
        tokens = list(map(binascii.a2b_base64, fields[0::2]))
    except binascii.Error:
        return None
    ranks = list(map(int, fields[1::2]))
    by_rank = dict(zip(ranks, tokens))
    if len(by_rank) != len(ranks) or len(set(tokens)) != len(tokens) or not all(tokens):
        return None
    return by_rank, dict(zip(ranks, range(1, len(ranks) + 1)))


def tokens_by_id(
    path: str | os.PathLike, by_rank: dict[int, bytes], rank_line: dict[int, int], specials: dict[str, int]
) -> list[bytes | None]:
    """Token bytes by id, ``None`` at the ids of special tokens inside the rank range.

    Every id up to the largest rank must be a rank or a special; a special must not take a
    rank's id. Raises VocabError naming the file and line otherwise.
    """
    path = Path(path)
    n = max(by_rank) + 1
    special_at = {i: s for s, i in specials.items()}
    for s, i in specials.items():
        if i in by_rank:
            raise VocabError(
                f"{path}:{rank_line[i]}: special token {s!r} has id {i}, inside the {n} ranks where "
                f"that id is the token {by_rank[i]!r}; give it an id no rank has"
            )
    if len(by_rank) + sum(1 for i in special_at if i < n) != n:
        missing = next(r for r in range(n) if r not in by_rank and r not in special_at)
        above = min(r for r in by_rank if r > missing)
        raise VocabError(
            f"{path}:{rank_line[above]}: rank {missing} is missing (this line has rank {above}); "
            f"ranks must be 0..N-1 except the ids of special tokens"
        )
    return [by_rank.get(i) for i in range(n)]


def read_tiktoken(path: str | os.PathLike) -> list[bytes]:
    """Token bytes by rank from a ``.tiktoken`` file; lines may be in any order, ranks must be 0..N-1.

    Blank lines are skipped (as tiktoken does). Raises VocabError naming the file and line on a
    malformed line, an empty token, a repeated rank or token, or a missing rank.
    Example: ``read_tiktoken("out/demo/tokenizer.tiktoken")[65] == b"A"``.
    """
    by_rank, rank_line = read_tiktoken_ranks(path)
    return tokens_by_id(path, by_rank, rank_line, {})  # type: ignore[return-value]


def read_json(path: str | os.PathLike):
    """The parsed JSON of a vocabulary file; VocabError naming the file when unreadable or invalid."""
    p = Path(path)
    try:
        return json.loads(p.read_bytes())
    except OSError as e:
        raise VocabError(f"{p}: cannot read ({e.strerror or e})") from None
    except ValueError as e:
        raise VocabError(f"{p}: not valid JSON ({e}); fix the file or give another (a Hugging Face "
                         "tokenizer.json, a .tiktoken)") from None


def read_special_tokens_file(path: str | os.PathLike) -> dict[str, int]:
    """``{token: id}`` from a special-token list (see ``special_tokens_file``)."""
    p = Path(path)
    doc = read_json(p)
    if not isinstance(doc, dict) or not all(
        isinstance(k, str) and k and isinstance(v, int) and not isinstance(v, bool) and v >= 0 for k, v in doc.items()
    ):
        raise VocabError(f'{p}: expected a JSON object of special tokens and their ids, e.g. {{"<|endoftext|>": 1000}}')
    if len(set(doc.values())) != len(doc):
        raise VocabError(f"{p}: two special tokens share an id")
    return dict(doc)


def companion_tiktoken(folder: Path) -> Path | None:
    """The ``.tiktoken`` beside a ``NAME.toktok`` folder (where a run written into a folder toktok
    does not own keeps its other outputs): ``NAME.tiktoken``, else ``NAME``; None if neither."""
    if not folder.name.endswith(COMPANION_SUFFIX) or len(folder.name) == len(COMPANION_SUFFIX):
        return None
    stem = folder.name[: -len(COMPANION_SUFFIX)]
    for name in (stem + ".tiktoken", stem):
        if (folder.parent / name).is_file():
            return folder.parent / name
    return None


def hf_file_of(tt_path: Path) -> Path:
    """The ``tokenizer.json`` that goes with a ``.tiktoken``: in its ``NAME.toktok`` folder when it
    has one (an ``output:`` into a folder toktok does not own), else beside it."""
    comp = tt_path.parent / companion_name(tt_path.name) / HF_FILE
    return comp if comp.is_file() else tt_path.parent / HF_FILE


def find_tiktoken(folder: str | os.PathLike) -> Path:
    """The ``.tiktoken`` file of an output folder: ``tokenizer.tiktoken``, else the only ``*.tiktoken``,
    else (a ``NAME.toktok`` folder) ``NAME.tiktoken`` beside it.

    Raises VocabError when there is none or several.
    """
    folder = Path(folder)
    if (folder / TIKTOKEN_FILE).is_file():
        return folder / TIKTOKEN_FILE
    found = sorted(p for p in folder.glob("*.tiktoken") if p.is_file())
    if len(found) == 1:
        return found[0]
    if not found and (beside := companion_tiktoken(folder)) is not None:
        return beside
    if not found:
        raise VocabError(f"{folder}: no .tiktoken file here; pass a toktok output folder or a .tiktoken file")
    raise VocabError(f"{folder}: several .tiktoken files ({', '.join(p.name for p in found)}); pass one of them")


def _folder_and_tiktoken(path: Path) -> tuple[Path, Path]:
    if path.is_dir():
        return path, find_tiktoken(path)
    return path.parent, path


def read_hf_specials(tokenizer_json: str | os.PathLike) -> dict[str, int]:
    """``{content: id}`` of the special ``added_tokens`` in a tokenizer.json; {} if the file is absent.

    Example: ``read_hf_specials("out/demo/tokenizer.json") == {"<|endoftext|>": 2000}``.
    """
    p = Path(tokenizer_json)
    if not p.exists():
        return {}
    try:
        doc = json.loads(p.read_bytes())
        return {a["content"]: int(a["id"]) for a in doc.get("added_tokens") or [] if a.get("special", True)}
    except (OSError, ValueError, TypeError, KeyError, AttributeError) as e:
        raise VocabError(f"{p}: cannot read added_tokens ({e})") from None


# ---------------------------------------------------------------------------------------------
# Special tokens of a .tiktoken file
# ---------------------------------------------------------------------------------------------
#
# A .tiktoken file holds ranks only. Its special tokens either follow toktoktok's convention
# (after the last rank, in list order: id = number of ranks + index in the list), which a plain
# list gives (toktoktok's special_tokens.txt), or sit elsewhere (e.g. inside the id range, where
# a Hugging Face tokenizer keeps them) and must be declared with their ids in
# NAME.special_tokens.json beside NAME.tiktoken.

def follows_convention(rank_ids, specials: dict[str, int]) -> bool:
    """Whether ``specials`` sit right after contiguous ranks 0..N-1 (toktoktok's convention), so
    that a plain list in id order gives them back. Example: ``follows_convention(range(3), {"<s>": 3})``."""
    n = len(rank_ids)
    if n and max(rank_ids) != n - 1:
        return False
    return sorted(specials.values()) == list(range(n, n + len(specials)))


def read_special_tokens_txt(path: str | os.PathLike) -> list[str]:
    """The tokens of toktoktok's plain list (``special_tokens.txt``): one token a line, in id order,
    each line stripped of surrounding whitespace as toktoktok's loaders do; blank lines only at the
    end (toktoktok's loaders count a blank line in the index, so one in the middle would shift ids).
    Example: ``read_special_tokens_txt("examples/special_tokens.txt")[0] == "<|pad|>"``."""
    p = Path(path)
    try:
        text = p.read_bytes().decode("utf-8-sig")
    except OSError as e:
        raise VocabError(f"{p}: cannot read ({e.strerror or e})") from None
    except UnicodeDecodeError as e:
        raise VocabError(f"{p}: not UTF-8 (byte {e.start}); a special-token list is UTF-8 text, one token a line") from None
    out: list[str] = []
    seen: dict[str, int] = {}
    blank = None
    for lineno, line in enumerate(text.splitlines(), start=1):
        tok = line.strip()
        if not tok:
            blank = blank or lineno
            continue
        if blank is not None:
            raise VocabError(f"{p}:{blank}: blank line before the token on line {lineno}; toktoktok's loaders "
                             "count it as a special token's place (id = ranks + line index), so remove it")
        if tok in seen:
            raise VocabError(f"{p}:{lineno}: special token {tok!r} already given on line {seen[tok]}; list each once")
        seen[tok] = lineno
        out.append(tok)
    return out


def _specials_after_ranks(tokens: list[str], by_rank: dict[int, bytes], tt_path: Path, where: str) -> dict[str, int]:
    """toktoktok's id rule for a plain list: id = number of ranks + index in the list."""
    n = len(by_rank)
    if tokens and by_rank and max(by_rank) != n - 1:
        hole = next(i for i in range(n + 1) if i not in by_rank)
        raise VocabError(
            f"{where}: a plain list puts special tokens right after the ranks (id = {n} ranks + index), but "
            f"{tt_path} has gaps in its ranks (id {hole} is no rank); declare the ids in "
            f"{special_tokens_file(tt_path).name} ({{token: id}}) instead")
    return {s: n + k for k, s in enumerate(tokens)}


def resolve_specials(tt_path: str | os.PathLike, by_rank: dict[int, bytes], given=None,
                     hf_specials=None) -> tuple[dict[str, int], str | None]:
    """The special tokens of the ``.tiktoken`` file ``tt_path`` (whose ranks are ``by_rank``) and
    where they came from (a path, "given", or None when there are none).

    ``given`` wins: ``{token: id}``, a list of tokens (toktoktok's rule: id = number of ranks +
    index), or a file (``.json`` = ``{token: id}``, else a plain list, one token a line). Else,
    beside the file: ``NAME.special_tokens.json`` (ids declared), then ``special_tokens.txt`` in
    the same folder (toktoktok's plain list), then the ``added_tokens`` of the ``tokenizer.json``
    that goes with it (``hf_file_of``: in its ``NAME.toktok`` folder, else in the same folder);
    none if there is none of them. ``hf_specials``: a function giving that tokenizer.json's
    special ``added_tokens`` (``{content: id}``), for a caller that loads the file anyway.
    Example: ``resolve_specials("tok.tiktoken", ranks, ["<|endoftext|>"])[0] == {"<|endoftext|>": len(ranks)}``.
    """
    tt = Path(tt_path)
    if given is not None:
        if isinstance(given, dict):
            return dict(given), "given"
        if isinstance(given, (list, tuple)):
            return _specials_after_ranks(list(given), by_rank, tt, "the special tokens given"), "given"
        g = Path(given)
        if not g.is_file():
            raise ConfigError(f"{g}: no such special-token file; give a special_tokens.txt (one token a line) "
                              "or a NAME.special_tokens.json ({token: id})")
        if g.suffix == ".json":
            return read_special_tokens_file(g), str(g)
        return _specials_after_ranks(read_special_tokens_txt(g), by_rank, tt, str(g)), str(g)
    side = special_tokens_file(tt)
    if side.is_file():
        return read_special_tokens_file(side), str(side)
    txt, hf = tt.parent / SPECIALS_TXT, hf_file_of(tt)
    # (a caller that loads that tokenizer.json anyway gives its specials: no second parse)
    from_hf = hf_specials() if hf_specials is not None else read_hf_specials(hf)
    if txt.is_file():
        listed = _specials_after_ranks(read_special_tokens_txt(txt), by_rank, tt, str(txt))
        if from_hf and from_hf != listed:
            raise VocabError(
                f"{txt}: gives the special tokens {listed} but {hf} beside it has {from_hf}; two lists for one "
                f"vocabulary, so remove one (or pass the right one explicitly)")
        return listed, str(txt)
    if from_hf:
        return from_hf, str(hf)
    return {}, None


def specials_beside(tt_path: Path) -> dict[str, int]:
    """Special tokens for a ``.tiktoken`` file as ``resolve_specials`` finds them beside it."""
    by_rank, _ = read_tiktoken_ranks(tt_path)
    return resolve_specials(tt_path, by_rank)[0]


def special_tokens_json(vocab: Vocab) -> bytes:
    """The ``NAME.special_tokens.json`` content: every special token and its id, in id order.

    Example: ``special_tokens_json(v) == b'{\\n "<|endoftext|>": 0\\n}\\n'`` for a special pinned at 0.
    """
    data = json.dumps(vocab.special_ids(), ensure_ascii=False, indent=1)
    return (data + "\n").encode("utf-8")


def load_encoding(path: str | os.PathLike, special_tokens=None) -> "tiktoken.Encoding":
    """A ``tiktoken.Encoding`` for an output folder (its ``.tiktoken`` file: ``tokenizer.tiktoken``
    or the only ``*.tiktoken``) or for a ``.tiktoken`` file.

    ``special_tokens``: ``{token: id}``, a list of tokens (toktoktok's rule: id = number of
    ranks + index), or a file (``NAME.special_tokens.json`` or a plain ``special_tokens.txt``);
    by default they are found beside the file as ``resolve_specials`` says (none if nothing is there).
    Example: ``load_encoding("out/demo").encode("hi<|endoftext|>", allowed_special="all")``.
    """
    return _load_encoding_and_tokens(path, special_tokens)[0]


def _load_encoding_and_tokens(
    path: str | os.PathLike, special_tokens=None, hf_specials=None
) -> tuple["tiktoken.Encoding", list[bytes | None]]:
    """``load_encoding`` plus the token bytes by id (tiktoken keeps its table private); ids of
    special tokens inside the rank range hold ``None``. ``hf_specials``: see ``resolve_specials``."""
    import tiktoken

    folder, tt_path = _folder_and_tiktoken(Path(path))
    by_rank, rank_line = read_tiktoken_ranks(tt_path)
    specials, _ = resolve_specials(tt_path, by_rank, special_tokens, hf_specials)
    tokens = tokens_by_id(tt_path, by_rank, rank_line, specials)
    name = folder.name if tt_path.name == TIKTOKEN_FILE else tt_path.stem
    try:
        enc = tiktoken.Encoding(
            name=name or "toktok",
            pat_str=PATTERN,
            mergeable_ranks={t: i for i, t in by_rank.items()},
            special_tokens=specials,
        )
        return enc, tokens
    except (ValueError, AssertionError) as e:
        raise VocabError(f"{tt_path}: tiktoken refuses the vocabulary ({e})") from None


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
