-- The $n most frequent words of phase $phase, most frequent first, ties by their bytes (word_gains).
-- The n-th largest count first (a top-n of integers), so that only the words at or above it are
-- sorted with their bytes: a top-n over every word's bytes takes several times as long.
WITH cut AS (SELECT count FROM words WHERE phase = $phase ORDER BY count DESC LIMIT 1 OFFSET $n - 1)
SELECT word, count FROM words
WHERE phase = $phase AND count >= coalesce((SELECT count FROM cut), 0)
ORDER BY count DESC, word
LIMIT $n;
