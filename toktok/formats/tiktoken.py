"""The tiktoken format: a ``.tiktoken`` file of ``base64(token) rank`` lines (special tokens are
not in it: see ``specials``), written, read back with errors that name the line, and loaded as a
``tiktoken.Encoding``.
Example: ``write_tiktoken(vocab, "out/tokenizer.tiktoken"); load_encoding("out").encode("hi")``.
"""
from __future__ import annotations

import base64
import binascii
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import ConfigError, ToktokError, VocabError
from ..patterns import DEFAULT, Pattern, check, same
from ..rundir import RUN_FILE, companion_name
from ..vocab import Vocab
from .common import TIKTOKEN_FILE, checked_vocab, folder_and_tiktoken, hf_file_of, write_atomic
from .specials import resolve_specials

if TYPE_CHECKING:  # heavy imports stay lazy: the CLI must start fast
    import tiktoken


def tiktoken_text(vocab: Vocab) -> bytes:
    """The ``.tiktoken`` file content: ``base64(token) rank`` per line, ranks 0..N-1.

    Example: ``tiktoken_text(Vocab.base(hardcoded=False)).splitlines()[65] == b"QQ== 65"``.
    """
    from .spell import ranked_lines

    return ranked_lines(vocab.tokens, vocab.pinned)


def write_tiktoken(vocab: Vocab, path: str | os.PathLike, *, check: bool = True, text: bytes | None = None,
                   sync: bool = True) -> Path:
    """Write ``vocab`` ranks as a standard tiktoken file at ``path`` (special tokens are not stored;
    the ids of pinned specials are left out of the ranks). ``check=False``: the caller has run
    ``vocab.check()`` on this vocabulary already; ``text``: its ``tiktoken_text``, made already;
    ``sync``: see :func:`~toktok.formats.common.write_atomic`.

    Returns the path. Example: ``write_tiktoken(Vocab.base(), "out/tokenizer.tiktoken")``.
    """
    path = Path(path)
    write_atomic(path, text if text is not None else tiktoken_text(checked_vocab(vocab) if check else vocab), sync=sync)
    return path


_TIKTOKEN_FIX = "; each line must be 'base64(token) rank', fix or regenerate the file"


def read_tiktoken_ranks(path: str | os.PathLike, written: tuple[bytes, Vocab] | None = None
                        ) -> tuple[dict[int, bytes], dict[int, int]]:
    """``({rank: token bytes}, {rank: line number})`` of a ``.tiktoken`` file; ranks may have gaps.

    Blank lines are skipped (as tiktoken does). Raises VocabError naming the file and line on a
    malformed line, an empty token, or a repeated rank or token. ``written``: ``(text, vocab)``
    where this process wrote ``text = tiktoken_text(vocab)`` to ``path``: a file that still holds
    exactly that text holds those ranks (reading it back gives them: the tests hold it), so it
    is compared instead of parsed (0.12 s of 131,072 tokens).
    Example: ``read_tiktoken_ranks("out/demo/tokenizer.tiktoken")[0][65] == b"A"``.
    """
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as e:
        raise VocabError(f"{path}: cannot read ({e.strerror or e})") from None
    if written is not None and data == written[0]:
        vocab = written[1]
        by_rank = {i: t for i, t in enumerate(vocab.tokens) if i not in vocab.pinned} if vocab.pinned \
            else dict(enumerate(vocab.tokens))
        return by_rank, dict(zip(by_rank, range(1, len(by_rank) + 1)))
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
    return list(map(by_rank.get, range(n)))


def read_tiktoken(path: str | os.PathLike) -> list[bytes]:
    """Token bytes by rank from a ``.tiktoken`` file; lines may be in any order, ranks must be 0..N-1.

    Blank lines are skipped (as tiktoken does). Raises VocabError naming the file and line on a
    malformed line, an empty token, a repeated rank or token, or a missing rank.
    Example: ``read_tiktoken("out/demo/tokenizer.tiktoken")[65] == b"A"``.
    """
    by_rank, rank_line = read_tiktoken_ranks(path)
    return tokens_by_id(path, by_rank, rank_line, {})  # type: ignore[return-value]


def specials_beside(tt_path: Path) -> dict[str, int]:
    """Special tokens for a ``.tiktoken`` file as ``resolve_specials`` finds them beside it."""
    by_rank, _ = read_tiktoken_ranks(tt_path)
    return resolve_specials(tt_path, by_rank)[0]


def recorded_pattern(tt_path: Path) -> tuple[Pattern | None, Path | None, str | None]:
    """The pattern recorded beside a ``.tiktoken``, the file that records it, and why it cannot be
    used when it cannot: the Split of the tokenizer.json that goes with it
    (:func:`toktok.formats.hf.read_split`; ``(None, file, why)`` when tiktoken cannot split text as
    it does), else the run file's ``meta('pattern')``; ``(None, None, None)`` when neither is there."""
    from .hf import read_split

    hf = hf_file_of(tt_path)
    if hf.is_file():
        p, why = read_split(hf)
        return p, hf, why
    comp = tt_path.parent / companion_name(tt_path.name) / RUN_FILE
    run = comp if comp.is_file() else tt_path.parent / RUN_FILE
    if run.is_file():
        return _run_pattern(run), run, None
    return None, None, None


def _run_pattern(run: Path) -> Pattern:
    """A run file's ``meta('pattern')`` (:meth:`toktok.patterns.Pattern.from_meta`)."""
    import duckdb

    from ..store import RunStore

    try:
        store = RunStore.open(run, read_only=True)
        try:
            value = store.get_meta("pattern")
        finally:
            store.con.close()
    except (duckdb.Error, ToktokError) as e:
        raise VocabError(f"{run}: cannot read the pattern it records ({' '.join(str(e).split())[:100]}); pass "
                         "pattern= (--pattern)") from None
    return Pattern.from_meta(value)


def encoding_pattern(tt_path: Path, given=None, where: str = "pattern=") -> Pattern:
    """The pattern a ``.tiktoken`` is loaded with: the one recorded beside it (:func:`recorded_pattern`),
    else ``given`` (a name, a regex or a Pattern, checked), else cl100k. ``given`` must agree with
    a recorded one (ConfigError naming ``where`` otherwise)."""
    recorded, source, why = recorded_pattern(tt_path)
    if why is not None:
        if given is not None:
            return given if isinstance(given, Pattern) else check(given, where)
        raise VocabError(f"{source}: tiktoken cannot split text as this tokenizer.json does ({why}); pass "
                         f"{where.rstrip('= ')}= (--pattern) to load {tt_path.name} with a pattern of your choice"[:300])
    if given is None:
        return recorded or DEFAULT
    p = given if isinstance(given, Pattern) else check(given, where)
    if recorded is not None and not same(p, recorded):
        shown = given.label() if isinstance(given, Pattern) else given
        head = f"{where}{shown}" if where.endswith("=") else f"{where} {shown}"
        alt = recorded.name if recorded.known else "the same regex"
        raise ConfigError(f"{head}: {source} records the pattern {recorded.label()}; leave "
                          f"{where.rstrip('= ')} out (or pass {alt})"[:300])
    return p


def load_encoding(path: str | os.PathLike, special_tokens=None, *, pattern=None) -> "tiktoken.Encoding":
    """A ``tiktoken.Encoding`` for an output folder (its ``.tiktoken`` file: ``tokenizer.tiktoken``
    or the only ``*.tiktoken``) or for a ``.tiktoken`` file.

    ``special_tokens``: ``{token: id}``, a list of tokens (toktoktok's rule: id = number of
    ranks + index), or a file (``NAME.special_tokens.json`` or a plain ``special_tokens.txt``);
    by default they are found beside the file as ``resolve_specials`` says (none if nothing is there).
    The pre-tokenizer is the one recorded beside the file (the tokenizer.json that goes with it,
    else its run file); ``pattern`` (``"o200k"``, a regex, a :class:`toktok.patterns.Pattern`) is for a
    bare ``.tiktoken`` (default cl100k) and must agree with a recorded one.
    Example: ``load_encoding("out/demo").encode("hi<|endoftext|>", allowed_special="all")``.
    """
    return load_encoding_and_tokens(path, special_tokens, pattern=pattern)[0]


def load_encoding_and_tokens(
    path: str | os.PathLike, special_tokens=None, hf_specials=None, *, pattern=None,
    written: tuple[bytes, Vocab] | None = None,
) -> tuple["tiktoken.Encoding", list[bytes | None]]:
    """``load_encoding`` plus the token bytes by id (tiktoken keeps its table private); ids of
    special tokens inside the rank range hold ``None``. ``hf_specials``: see ``resolve_specials``;
    ``written``: see ``read_tiktoken_ranks``."""
    import tiktoken

    folder, tt_path = folder_and_tiktoken(Path(path))
    split = encoding_pattern(tt_path, pattern)
    by_rank, rank_line = read_tiktoken_ranks(tt_path, written)
    specials, _ = resolve_specials(tt_path, by_rank, special_tokens, hf_specials)
    tokens = tokens_by_id(tt_path, by_rank, rank_line, specials)
    name = folder.name if tt_path.name == TIKTOKEN_FILE else tt_path.stem
    try:
        enc = tiktoken.Encoding(
            name=name or "toktok",
            pat_str=split.regex,
            mergeable_ranks=dict(zip(by_rank.values(), by_rank)),
            special_tokens=specials,
        )
        return enc, tokens
    except (ValueError, AssertionError) as e:
        raise VocabError(f"{tt_path}: tiktoken refuses the vocabulary ({e})") from None
