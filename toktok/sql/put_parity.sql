INSERT INTO parity SELECT $phase AS phase, hash, source, row, text FROM batch;
