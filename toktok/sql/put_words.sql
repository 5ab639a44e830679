INSERT INTO words SELECT word, count, $phase AS phase, tokens FROM batch;
