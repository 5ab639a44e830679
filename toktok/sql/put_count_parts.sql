INSERT INTO count_parts SELECT $phase AS phase, word, count FROM batch;
