"""The special tokens that go with a ``.tiktoken`` file, which holds ranks only.

They either follow toktoktok's convention
(after the last rank, in list order: id = number of ranks + index in the list), which a plain
list gives (toktoktok's special_tokens.txt), or sit elsewhere (e.g. inside the id range, where
a Hugging Face tokenizer keeps them) and must be declared with their ids in
NAME.special_tokens.json beside NAME.tiktoken. ``resolve_specials`` finds them; the files are
read here and written by ``special_tokens_json``.
Example: ``resolve_specials("tok.tiktoken", ranks, ["<|endoftext|>"])``.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

from ..errors import ConfigError, VocabError, shown
from ..rundir import special_tokens_file
from ..vocab import Vocab
from .common import SPECIALS_TXT, hf_file_of, read_json
from .hf import read_hf_specials


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
            raise VocabError(f"{p}:{lineno}: special token {shown(tok)} already given on line {seen[tok]}; list each once")
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
    # (a caller that loads that tokenizer.json anyway gives its specials: not parsed twice when
    # the file is not laid out as toktok and HF write it, whose added_tokens are read alone)
    from_hf = read_hf_specials(hf, whole=hf_specials is None)
    if from_hf is None:
        from_hf = hf_specials()
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


def special_tokens_json(vocab: Vocab) -> bytes:
    """The ``NAME.special_tokens.json`` content: every special token and its id, in id order.

    Example: ``special_tokens_json(v) == b'{\\n "<|endoftext|>": 0\\n}\\n'`` for a special pinned at 0.
    """
    data = json.dumps(vocab.special_ids(), ensure_ascii=False, indent=1)
    return (data + "\n").encode("utf-8")
