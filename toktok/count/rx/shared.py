"""What the compiled patterns share with the named scanners (:mod:`toktok.count.scan`): the
per-thread word table and the two steps of counting a piece in it (its home row probed a piece
ahead, then the count), as the named scanners' loop (:mod:`toktok.count.scan.loop`) counts; the
8-byte load and the 8-bytes-at-a-time tests of ASCII letters, other chars, capitals and small
letters."""
from __future__ import annotations

from ..scan.o200k import _lower_bits, _upper_bits  # noqa: F401
from ..scan.swar import _HIGHS, _ctz, _ld8, _letter_bits, _other_bits  # noqa: F401
from ..scan.table import _count_piece, _probe, _Table, _words64  # noqa: F401
