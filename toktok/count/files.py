"""What sources.py, read.py and remote.py need: an input file's record and its kind by name.

Below them, so that none imports another for it: ``kind_of("a.jsonl.zst") == "jsonl.zst"``.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

#: File kinds by name suffix (checked in this order, so ``.jsonl.zst`` wins over ``.zst``).
SUFFIXES = ((".jsonl.zst", "jsonl.zst"), (".parquet", "parquet"), (".jsonl", "jsonl"),
            (".txt", "txt"))


@dataclass
class SourceFile:
    """One input file: ``SourceFile("data/a.parquet", "parquet", 1234)``; size is bytes on disk.

    ``key`` is the part of the path the user did not spell out, the file's part of its documents'
    identity (``source_key``): ``a.parquet`` whether the corpus is ``data/``, ``/mnt/x/data/*.parquet``
    or ``s3://bucket/data/``. ``etag`` is an object's version tag in a store (None for local files).
    ``row_groups`` makes it a part of a Parquet file (a Ray work unit): only those row groups are
    read, their rows numbered as in the whole file. ``footer`` is the Parquet metadata of an object
    in a store as read when its sources were resolved, kept so that its footer is fetched once.
    """

    path: str
    kind: str  # "parquet" | "jsonl" | "jsonl.zst" | "txt"
    size: int
    key: str = ""
    etag: str | None = None
    row_groups: tuple[int, ...] | None = None
    footer: Any = field(default=None, repr=False, compare=False)  # pyarrow FileMetaData


def kind_of(path: str) -> str | None:
    """The kind of a file name, None if unsupported: ``kind_of("a.JSONL.zst") == "jsonl.zst"``."""
    low = path.lower()
    for suffix, kind in SUFFIXES:
        if low.endswith(suffix):
            return kind
    return None
