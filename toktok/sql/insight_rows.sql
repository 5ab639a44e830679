-- Replacing the rows of the insight tables (toktok.insight: compression_curve, word_gains) from
-- the Arrow table registered as `batch`. One clear_/fill_ pair per table of insight_tables.sql.
-- name: clear_compression
DELETE FROM compression;
-- name: fill_compression
INSERT INTO compression (merges, vocab_size, subset, docs, bytes, tokens, bytes_per_token)
SELECT merges, vocab_size, subset, docs, bytes, tokens, bytes_per_token FROM batch;
-- name: clear_token_usage
DELETE FROM token_usage;
-- name: fill_token_usage
INSERT INTO token_usage (id, subset, uses) SELECT id, subset, uses FROM batch;
-- name: clear_word_gains
DELETE FROM word_gains;
-- name: fill_word_gains
INSERT INTO word_gains (phase, word, count, tokens_before, tokens_after)
SELECT phase, word, count, tokens_before, tokens_after FROM batch;
