"""Run configuration: what to train on, how many merges, where to write, within what memory.

Owns validation of user-facing options; every problem is a ``ConfigError`` naming the option.
Example: ``parse_size("512MB") == 512 * 1000**2``.
"""
from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field

from .errors import ConfigError

_UNITS = {
    "": 1, "b": 1,
    "kb": 1000, "mb": 1000**2, "gb": 1000**3, "tb": 1000**4,
    "k": 1024, "m": 1024**2, "g": 1024**3, "t": 1024**4,
    "kib": 1024, "mib": 1024**2, "gib": 1024**3, "tib": 1024**4,
}


def parse_size(text: str | int) -> int:
    """Bytes in a human size: ``512MB``, ``8GB``, ``2GiB``, ``1.5g`` or a plain integer."""
    if isinstance(text, int):
        return text
    m = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([a-zA-Z]*)\s*", str(text))
    if not m or m.group(2).lower() not in _UNITS:
        raise ConfigError(f"size {text!r} is not understood; use e.g. 512MB, 8GB or 2GiB")
    return int(float(m.group(1)) * _UNITS[m.group(2).lower()])


@dataclass
class TrainConfig:
    """Everything ``toktok train`` needs. Example: ``TrainConfig(["data/"], "out/x", merges=1000)``."""

    sources: list[str]
    out: str
    merges: int = 30000
    special_tokens: list[str] = field(default_factory=list)
    text_column: str = "text"
    bad_utf8: str = "error"
    hardcoded: bool = True
    force: bool = False
    memory_limit: str = "2GB"
    threads: int = 0
    seed: int = 0
    verify_slices: int = 200

    def validate(self) -> None:
        if not self.sources:
            raise ConfigError("no sources given; pass files, folders or globs to train on")
        if isinstance(self.merges, bool) or not isinstance(self.merges, int):
            raise ConfigError(f"--merges {self.merges!r} is not a whole number")
        if self.merges < 0:
            raise ConfigError(f"--merges {self.merges} is negative; pass 0 or more")
        if self.bad_utf8 not in ("error", "replace", "skip"):
            raise ConfigError(f"--bad-utf8 {self.bad_utf8!r}: use error, replace or skip")
        seen = set()
        for s in self.special_tokens:
            if not s:
                raise ConfigError("--special-token is empty; give the token's text")
            if s in seen:
                raise ConfigError(f"--special-token {s!r} is given twice")
            seen.add(s)
        parse_size(self.memory_limit)

    def to_dict(self) -> dict:
        return asdict(self)
