INSERT INTO samples SELECT $phase AS phase, hash, source, row, bytes, text FROM batch;
