SELECT hash, source, row, text FROM parity WHERE phase = $phase ORDER BY hash, source, row;
