-- The run file's tables. Schema version lives in meta('schema_version').
-- name: meta
CREATE TABLE IF NOT EXISTS meta (key VARCHAR PRIMARY KEY, value VARCHAR);
-- name: inputs
CREATE TABLE IF NOT EXISTS inputs (
    path VARCHAR, kind VARCHAR, phase VARCHAR, size_bytes BIGINT, docs BIGINT, text_bytes BIGINT,
    docs_seen BIGINT, bytes_seen BIGINT
);
-- name: word_tables
-- Each phase's words are a table of their own (word_tables.sql), named here: a phase column on
-- every row cost a third of the write of the words with their tokens, which a run does in its
-- last second (the bench corpus's 1.1M words: ~0.25 s of CPU against ~0.16).
CREATE TABLE IF NOT EXISTS word_tables (phase VARCHAR, name VARCHAR);
-- name: words
-- Every phase's words (word, count, phase, tokens): made again over their tables as a phase's
-- table comes or goes (word_tables.sql), empty until then.
CREATE VIEW IF NOT EXISTS words AS
SELECT NULL::BLOB AS word, NULL::BIGINT AS count, NULL::VARCHAR AS phase, NULL::INTEGER AS tokens WHERE false;
-- name: merges
-- The tables written after the merge loop (merges, vocab and insight_tables.sql's) are stored as
-- they are too: the run's last CHECKPOINT, which publishing waits for, compressed them in one
-- thread (the bench corpus at 65,536: ~0.05 s of CPU against ~0.017; ~2 MB more on disk).
CREATE TABLE IF NOT EXISTS merges (
    merge_index INTEGER USING COMPRESSION uncompressed, left_id INTEGER USING COMPRESSION uncompressed,
    right_id INTEGER USING COMPRESSION uncompressed, token_id INTEGER USING COMPRESSION uncompressed,
    token BLOB USING COMPRESSION uncompressed, count BIGINT USING COMPRESSION uncompressed,
    reused BOOLEAN USING COMPRESSION uncompressed, phase VARCHAR USING COMPRESSION uncompressed
);
-- name: vocab
CREATE TABLE IF NOT EXISTS vocab (id INTEGER USING COMPRESSION uncompressed, token BLOB USING COMPRESSION uncompressed,
                                  kind VARCHAR USING COMPRESSION uncompressed, phase VARCHAR USING COMPRESSION uncompressed);
-- name: stages
CREATE TABLE IF NOT EXISTS stages (stage VARCHAR, seconds DOUBLE);
-- name: parity
-- The parity sample of each phase (documents with the smallest seeded hashes), kept for --resume.
CREATE TABLE IF NOT EXISTS parity (phase VARCHAR, hash UBIGINT, source VARCHAR, row BIGINT, text VARCHAR);
-- name: count_parts
-- Checkpoint of a full-read phase's counting, for --resume (emptied once the phase is counted):
-- the counts of the files read so far. (A sampled phase's finished sample is a Parquet file beside
-- the run file instead.)
CREATE TABLE IF NOT EXISTS count_parts (phase VARCHAR, word BLOB, count BIGINT);
