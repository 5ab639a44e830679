-- What `toktok show` prints (toktok.insight.describe), one statement per part.
-- name: meta
SELECT key, value FROM meta;
-- name: curve
SELECT * FROM compression WHERE subset = 'all' ORDER BY merges;
-- name: inputs
SELECT path, kind, phase, size_bytes, docs, text_bytes FROM inputs ORDER BY phase, path;
-- name: subsets
-- The curve's groups at its last point, lowest bytes per token first.
SELECT subset, docs, bytes, bytes_per_token FROM compression
WHERE merges = (SELECT max(merges) FROM compression) AND subset <> 'all'
ORDER BY bytes_per_token;
-- name: phases
SELECT * FROM phases ORDER BY first_merge NULLS LAST, phase;
-- name: vocab
SELECT kind, count(*) FROM vocab GROUP BY kind ORDER BY min(id);
-- name: vocab_size
SELECT count(*) FROM vocab;
-- name: words
SELECT count(*) AS unique_words, sum(count) AS total FROM words;
-- name: stages
SELECT stage, seconds FROM stages;
-- name: superwords
-- The longest superwords, for the summary's examples.
SELECT shown FROM superwords ORDER BY bytes DESC, id LIMIT 5;
