"""What the compiled patterns share with the named scanners: the per-thread word table's helpers
(hashing, a word's home row, counting a word) and the 8-byte load."""
from __future__ import annotations

from ..pretokenize import (_HIGHS, _Table, _bump_long, _bump_short, _ctz, _head, _home, _ld8,  # noqa: F401
                           _letter_bits, _long_hash, _low, _lower_bits, _other_bits, _short_hash, _upper_bits,
                           _words64)
