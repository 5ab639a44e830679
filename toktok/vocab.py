"""The vocabulary: token bytes by id, the hardcoded merges, and special tokens.

A vocabulary is a list of byte strings where the index is the id and also the BPE rank
(lower id = merged earlier), e.g. ``Vocab.base().tokens[256] == b"00"``. Ids 0..255 are the
single bytes (id = byte value) unless a warm start brings another layout.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from .errors import VocabError, shown
from .patterns import CL100K, Pattern, hardcoded

#: The GPT-4 (cl100k) pre-tokenization pattern, the default (the named patterns: :mod:`toktok.patterns`).
PATTERN = CL100K

OPERATORS = [
    "==", "!=", "<=", ">=", "+=", "-=", "*=", "/=", "->", "=>",
    "::", "//", "/*", "*/", "&&", "||", "++", "--", "<<", ">>",
]


def hardcoded_tokens(pattern: Pattern | None = None) -> list[bytes]:
    """The 1,161 hardcoded merges in id order (ids 256..1416), e.g. ``hardcoded_tokens()[0] == b"00"``;
    with a ``pattern``, those of them it can produce as one piece, in the same order (all 1,161
    under cl100k, 61 under qwen2: no digit pairs or triples): :func:`toktok.patterns.hardcoded`."""
    toks: list[str] = []
    toks += [f"{i:02d}" for i in range(100)]
    toks += [f"{i:03d}" for i in range(1000)]
    toks += [" " * n for n in range(2, 33)]
    toks += ["\n" * n for n in range(2, 9)]
    toks += ["\r\n"]
    toks += OPERATORS
    toks += ["..", "..."]
    out = [t.encode() for t in toks]
    assert len(out) == 1161 and len(set(out)) == 1161
    return out if pattern is None else hardcoded(pattern, out)


@dataclass
class Vocab:
    """Token bytes by id (= rank), plus special tokens.

    ``tokens[i]`` is the byte string of id ``i``; ``specials`` are strings whose ids are
    ``len(tokens) + k``. ``pinned`` maps ids inside the range to special tokens that keep those
    ids (carried over from a warm start, e.g. a tokenizer.json whose specials sit at ids 0..k-1):
    ``tokens[id]`` then holds the special's UTF-8 bytes as a placeholder, which no merge can make
    or use because specials are cut out of the text before counting and encoding; the placeholder
    is never written as a rank. Example: ``Vocab.base(hardcoded=False).size == 256``.
    """

    tokens: list[bytes]
    specials: list[str] = field(default_factory=list)
    pinned: dict[int, str] = field(default_factory=dict)

    @classmethod
    def base(cls, hardcoded: bool = True, pattern: Pattern | None = None) -> "Vocab":
        """The 256 bytes, then the hardcoded tokens (those ``pattern`` can produce as one piece)."""
        toks = [bytes([b]) for b in range(256)]
        if hardcoded:
            toks += hardcoded_tokens(pattern)
        return cls(toks)

    @property
    def size(self) -> int:
        """Ranks plus special tokens."""
        return len(self.tokens) + len(self.specials)

    def ranks(self) -> dict[bytes, int]:
        """``{token bytes: id}`` as tiktoken wants its mergeable ranks (pinned specials left out)."""
        if not self.pinned:
            return {t: i for i, t in enumerate(self.tokens)}
        return {t: i for i, t in enumerate(self.tokens) if i not in self.pinned}

    def special_ids(self) -> dict[str, int]:
        """``{special: id}`` of every special token: the pinned ones and those after the last rank."""
        n = len(self.tokens)
        out = {s: i for i, s in sorted(self.pinned.items())}
        out.update({s: n + k for k, s in enumerate(self.specials)})
        return out

    def all_specials(self) -> list[str]:
        """Every special token, in id order."""
        return list(self.special_ids())

    def settled(self) -> "Vocab":
        """The same ids, with pinned specials that no rank follows (a warm-start base's specials
        right after its last rank, kept at their ids when no merge came after them) moved to the
        specials after the last rank: so HF keeps them as added tokens only, as tiktoken does,
        and both count the same ranks. Example: ``Vocab([b"a", b"<s>"], [], {1: "<s>"}).settled().specials == ["<s>"]``."""
        n, pinned, tail = len(self.tokens), dict(self.pinned), []
        while n and n - 1 in pinned:
            n -= 1
            tail.append(pinned.pop(n))
        if not tail:
            return self
        return Vocab(self.tokens[:n], tail[::-1] + self.specials, pinned)

    def check(self) -> None:
        """Raise VocabError unless tokens are unique, non-empty and every single byte is present."""
        seen = set(self.tokens)  # (a set in C: a dict built token by token took 37 ms of 131,072)
        if len(seen) != len(self.tokens) or not all(self.tokens):
            first: dict[bytes, int] = {}
            for i, t in enumerate(self.tokens):  # the first empty or repeated token, for the message
                if not t:
                    raise VocabError(f"token id {i} is empty")
                if t in first:
                    raise VocabError(f"token id {i} duplicates id {first[t]} ({shown(t)})")
                first[t] = i
        for i, s in self.pinned.items():
            if not 0 <= i < len(self.tokens) or self.tokens[i] != s.encode():
                raise VocabError(f"special token {shown(s)} is pinned at id {i}, which does not hold its placeholder")
            if len(self.tokens[i]) == 1:
                raise VocabError(f"special token {shown(s)} at id {i} is a single byte; the 256 bytes must be ordinary tokens")
        missing = [b for b in range(256) if bytes([b]) not in seen]
        if missing:
            raise VocabError(f"{len(missing)} single-byte tokens are missing (first: byte {missing[0]})")
        if len(set(self.pinned.values())) != len(self.pinned):
            raise VocabError("a special token is pinned at two ids")
        sp_seen: set[str] = set(self.pinned.values())
        for s in self.specials:
            if not s:
                raise VocabError("a special token is empty")
            if s in sp_seen:
                raise VocabError(f"special token {shown(s)} is given twice")
            if s.encode() in seen:
                raise VocabError(f"special token {shown(s)} collides with vocabulary token id {self.tokens.index(s.encode())}; "
                                 "pick a special token that is not an ordinary token, e.g. <|name|>")
            sp_seen.add(s)
        everything = [*self.pinned.values(), *self.specials]
        for s in everything:
            # HF's ByteLevel decoder maps these characters back to raw bytes, so such a special
            # token would not decode to itself.
            odd = [c for c in s if 0xA1 <= ord(c) <= 0x143 and ord(c) != 0xAD]
            if odd:
                raise VocabError(
                    f"special token {s!r} holds {odd[0]!r} (U+{ord(odd[0]):04X}), which HF's byte-level "
                    "decoder cannot round-trip; use ASCII or characters above U+0143"
                )
        # one starts another iff it starts the next in sorted order (what sorts between a string
        # and one it starts, starts with it too): linear after the sort, not all pairs
        ordered = sorted(set(everything))
        for s, o in zip(ordered, ordered[1:]):
            if o.startswith(s):
                raise VocabError(f"special token {s!r} is a prefix of {o!r}; tiktoken and HF would cut "
                                 "text differently, so give tokens where none starts another")
