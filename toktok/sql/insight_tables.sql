-- Tables filled by toktok.insight (empty until compression_curve / word_gains ran on the run).
-- name: compression
-- compression: bytes per token of the curve's sample with the vocabulary cut after `merges`
-- merges (subset 'all' plus one row per group, e.g. per language). What the sample is, is in
-- meta('compression').text: held_out (text the run never trained on), training (the run read
-- every document: a parity sample of its input), mixed (per phase) or given (by the caller).
CREATE TABLE IF NOT EXISTS compression (
    merges INTEGER, vocab_size INTEGER, subset VARCHAR, docs BIGINT, bytes BIGINT, tokens BIGINT,
    bytes_per_token DOUBLE
);
-- name: token_usage
-- token_usage: how often the final tokenizer produced each token id on the curve's sample
-- (only ids used at least once), per subset.
CREATE TABLE IF NOT EXISTS token_usage (id INTEGER USING COMPRESSION uncompressed,
    subset VARCHAR USING COMPRESSION uncompressed, uses BIGINT USING COMPRESSION uncompressed);
-- name: word_gains
-- word_gains: a phase's most frequent words, in tokens before and after the phase's merges.
CREATE TABLE IF NOT EXISTS word_gains (
    phase VARCHAR USING COMPRESSION uncompressed, word BLOB USING COMPRESSION uncompressed,
    count BIGINT USING COMPRESSION uncompressed, tokens_before INTEGER USING COMPRESSION uncompressed,
    tokens_after INTEGER USING COMPRESSION uncompressed
);
