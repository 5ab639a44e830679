-- Sum the per-batch counts into the word table of a phase; 64-bit sums.
INSERT INTO words
SELECT word, sum(count)::BIGINT AS count, $phase AS phase, NULL AS tokens
FROM word_parts GROUP BY word ORDER BY word;
