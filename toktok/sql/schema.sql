-- The run file's tables. Schema version lives in meta('schema_version').
-- name: meta
CREATE TABLE IF NOT EXISTS meta (key VARCHAR PRIMARY KEY, value VARCHAR);
-- name: inputs
CREATE TABLE IF NOT EXISTS inputs (
    path VARCHAR, kind VARCHAR, phase VARCHAR, size_bytes BIGINT, docs BIGINT, text_bytes BIGINT,
    docs_seen BIGINT, bytes_seen BIGINT
);
-- name: words
-- The words stored as they are: compressing them (DuckDB's dictionary + FSST) took half of the
-- "counted" checkpoint's write, which the merge loop waits for (100 MB of text, 706k words:
-- 0.18 s against 0.09; the table 7 MB on disk against 11). Counts and tokens too: DuckDB's
-- analysis and bit-packing of them took a fifth of the write of the words with their tokens
-- (1.1M words: ~0.175 s of CPU against ~0.14; the table 19 MB on disk against 30).
CREATE TABLE IF NOT EXISTS words (word BLOB USING COMPRESSION uncompressed, count BIGINT USING COMPRESSION uncompressed,
                                  phase VARCHAR, tokens INTEGER USING COMPRESSION uncompressed);
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
