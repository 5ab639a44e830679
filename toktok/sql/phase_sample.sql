SELECT hash, source, row, bytes, text FROM samples WHERE phase = $phase;
