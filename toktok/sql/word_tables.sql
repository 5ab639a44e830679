-- Each phase's words in a table of its own, {table} (words_<k>: toktok.store.RunStore's names,
-- never a value), recorded in word_tables, their tokens in {table}_tokens, row for row (empty
-- until the phase is trained: the words are stored while it merges, their tokens after), and
-- the view words over them all.
-- The words stored as they are: compressing them (DuckDB's dictionary + FSST) took half of the
-- "counted" checkpoint's write, which the merge loop waits for (100 MB of text, 706k words:
-- 0.18 s against 0.09; the table 7 MB on disk against 11). Counts and tokens too: DuckDB's
-- analysis and bit-packing of them took a fifth of the write of the words with their tokens
-- (1.1M words: ~0.175 s of CPU against ~0.14; the table 19 MB on disk against 30).
-- name: create
CREATE TABLE {table} (word BLOB USING COMPRESSION uncompressed, count BIGINT USING COMPRESSION uncompressed);
-- name: create_tokens
CREATE TABLE {table}_tokens (tokens INTEGER USING COMPRESSION uncompressed);
-- name: add
INSERT INTO word_tables VALUES ($phase, $name);
-- name: of
SELECT name FROM word_tables WHERE phase = $phase;
-- name: names
SELECT name FROM word_tables ORDER BY name;
-- name: forget
DELETE FROM word_tables WHERE phase = $phase;
-- name: drop
DROP TABLE IF EXISTS {table};
-- name: drop_tokens
DROP TABLE IF EXISTS {table}_tokens;
-- name: insert
INSERT INTO {table} SELECT word, count FROM batch;
-- name: insert_tokens
INSERT INTO {table}_tokens SELECT tokens FROM batch;
-- name: read
-- A phase's words in the order they were stored (RunStore.set_tokens relies on it).
SELECT word, count FROM {table} ORDER BY rowid;
-- name: span
-- The words' first and last row ids and their number, and their tokens' number.
SELECT min(rowid), max(rowid), count(*), (SELECT count(*) FROM {table}_tokens) FROM {table};
-- name: words_at
SELECT word FROM {table} WHERE rowid IN ($first, $last) ORDER BY rowid;
-- name: view
-- The view words: one SELECT of this form per phase's table, joined by UNION ALL ({selects}).
CREATE OR REPLACE VIEW words AS {selects};
-- name: select
-- (POSITIONAL JOIN: the tokens row for row, NULL past their end)
SELECT w.word, w.count, t.phase, k.tokens
FROM {table} AS w POSITIONAL JOIN {table}_tokens AS k, (SELECT phase FROM word_tables WHERE name = '{table}') AS t
-- name: empty
CREATE OR REPLACE VIEW words AS
SELECT NULL::BLOB AS word, NULL::BIGINT AS count, NULL::VARCHAR AS phase, NULL::INTEGER AS tokens WHERE false;
