"""What the compiled patterns share with the named scanners (:mod:`toktok.count.scan`): the
per-thread word table and its helpers (hashing, a word's home row, counting a word), the 8-byte
load and the 8-bytes-at-a-time tests of ASCII letters, other chars, capitals and small letters."""
from __future__ import annotations

from ..scan.o200k import _lower_bits, _upper_bits  # noqa: F401
from ..scan.swar import _HIGHS, _ctz, _ld8, _letter_bits, _other_bits  # noqa: F401
from ..scan.table import (_Table, _bump_long, _bump_short, _head, _home, _long_hash, _low,  # noqa: F401
                          _short_hash, _words64)
