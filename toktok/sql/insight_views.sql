-- Views over the run file (toktok.insight.add_views). They are stored in run.duckdb, so the stock
-- duckdb package sees them without importing toktok. One view per `-- name:` block (toktok/statements.py).

-- name: vocab_text
-- Every token with its text (NULL where the bytes are not valid UTF-8 on their own), a printable
-- form (`shown`: the text, or DuckDB's \xNN escapes), its length and the part of the vocabulary
-- it belongs to (`part`: byte, hardcoded/base, special, or the phase that learned it).
CREATE OR REPLACE VIEW vocab_text AS
SELECT id, token, text, COALESCE(text, CAST(token AS VARCHAR)) AS shown, kind, phase,
       CASE WHEN kind = 'merge' THEN COALESCE(phase, 'merge') ELSE kind END AS part,
       octet_length(token) AS bytes, length(text) AS chars
FROM (SELECT *, TRY(decode(token)) AS text FROM vocab);
-- name: superwords

-- Superwords: the tokens the first phase's pattern cuts (their complete characters are several of
-- its pieces), as the run recorded them (meta('superwords'); none without a phase of another pattern).
CREATE OR REPLACE VIEW superwords AS
SELECT v.id, v.token, v.text, v.shown, v.phase, v.bytes, v.chars
FROM vocab_text v
WHERE v.id IN (SELECT CAST(j AS INTEGER)
               FROM (SELECT unnest(json_extract(value, '$.ids[*]')) AS j FROM meta WHERE key = 'superwords'));
-- name: merges_text

-- Merges in training order: rank (= token id) of the result, its parts, the pair count when it
-- was merged, whether it reused an existing token, the phase and the token length.
CREATE OR REPLACE VIEW merges_text AS
SELECT m.merge_index, m.token_id AS rank, m.left_id, m.right_id,
       l.shown AS left_text, r.shown AS right_text, m.token, t.text, t.shown,
       t.bytes, t.chars, m.count, m.reused, m.phase
FROM merges m
LEFT JOIN vocab_text l ON l.id = m.left_id
LEFT JOIN vocab_text r ON r.id = m.right_id
LEFT JOIN vocab_text t ON t.id = m.token_id;
-- name: words_text

-- Words (pre-tokenizer pieces) with their text, length, count, phase and tokens after training.
CREATE OR REPLACE VIEW words_text AS
SELECT word, text, COALESCE(text, CAST(word AS VARCHAR)) AS shown, octet_length(word) AS bytes,
       length(text) AS chars, count, phase, tokens,
       octet_length(word) / NULLIF(tokens, 0) AS bytes_per_token
FROM (SELECT *, TRY(decode(word)) AS text FROM words);
-- name: sources

-- Input files: text bytes seen and counted (the sample, under a budget), the sampled fraction, and
-- the counted bytes' share of their phase and of the run.
CREATE OR REPLACE VIEW sources AS
SELECT path, kind, phase, size_bytes, docs_seen, bytes_seen, docs, text_bytes,
       text_bytes / NULLIF(bytes_seen, 0) AS sampled_fraction,
       text_bytes / NULLIF(sum(text_bytes) OVER (PARTITION BY phase), 0) AS share_of_phase,
       text_bytes / NULLIF(sum(text_bytes) OVER (), 0) AS share_of_run
FROM inputs;
-- name: phases

-- One row per phase, in training order: merges asked for, learned and reused, token ids, pair
-- counts, inputs (text read: the sample when the phase has a budget) and words, the budget and
-- seconds recorded in meta('phases'), and the phase's share of the (non-special) vocabulary.
CREATE OR REPLACE VIEW phases AS
WITH pm AS (
    SELECT json_extract_string(e, '$.name') AS phase,
           TRY_CAST(json_extract_string(e, '$.merges_requested') AS BIGINT) AS merges_requested,
           TRY_CAST(json_extract_string(e, '$.budget') AS BIGINT) AS budget,
           TRY_CAST(json_extract_string(e, '$.seconds') AS DOUBLE) AS seconds
    FROM (SELECT unnest(json_extract(value, '$[*]')) AS e FROM meta WHERE key = 'phases')
), names AS (
    SELECT phase FROM inputs UNION SELECT phase FROM words UNION SELECT phase FROM merges
    UNION SELECT phase FROM pm
), m AS (
    SELECT phase, min(merge_index) AS first_merge, max(merge_index) AS last_merge,
           count(*) FILTER (WHERE NOT reused) AS merges, count(*) FILTER (WHERE reused) AS reused,
           min(token_id) FILTER (WHERE NOT reused) AS first_id,
           max(token_id) FILTER (WHERE NOT reused) AS last_id,
           max(count) AS max_count, arg_max(count, merge_index) AS last_count
    FROM merges GROUP BY phase
), i AS (
    SELECT phase, count(*) AS files, CAST(sum(docs) AS BIGINT) AS docs,
           CAST(sum(text_bytes) AS BIGINT) AS text_bytes
    FROM inputs GROUP BY phase
), w AS (
    SELECT phase, count(*) AS words, CAST(sum(count) AS BIGINT) AS word_count FROM words GROUP BY phase
)
SELECT n.phase, m.first_merge, m.last_merge, pm.merges_requested, COALESCE(m.merges, 0) AS merges,
       COALESCE(m.reused, 0) AS reused, m.first_id, m.last_id, m.max_count, m.last_count,
       i.files, i.docs, i.text_bytes, w.words, w.word_count, pm.budget, pm.seconds,
       COALESCE(m.merges, 0) / NULLIF((SELECT count(*) FROM vocab WHERE kind <> 'special'), 0)
           AS vocab_share
FROM names n LEFT JOIN m USING (phase) LEFT JOIN i USING (phase) LEFT JOIN w USING (phase)
LEFT JOIN pm USING (phase)
WHERE n.phase IS NOT NULL;
-- name: runs

-- The run in one row: where, when, how long, what was asked and learned, corpus, parity.
CREATE OR REPLACE VIEW runs AS
WITH kv AS (SELECT key, value FROM meta)
SELECT
    json_extract_string((SELECT value FROM kv WHERE key = 'config'), '$.out') AS out,
    (SELECT value FROM kv WHERE key = 'started') AS started,
    (SELECT value FROM kv WHERE key = 'finished') AS finished,
    (SELECT sum(seconds) FROM stages) AS seconds,
    COALESCE(
        (SELECT sum(TRY_CAST(json_extract_string(e, '$.merges_requested') AS BIGINT))
         FROM (SELECT unnest(json_extract(value, '$[*]')) AS e FROM kv WHERE key = 'phases')),
        TRY_CAST(json_extract_string((SELECT value FROM kv WHERE key = 'config'), '$.merges') AS BIGINT)
    ) AS merges_requested,
    (SELECT count(*) FILTER (WHERE NOT reused) FROM merges) AS merges_learned,
    (SELECT count(*) FILTER (WHERE reused) FROM merges) AS merges_reused,
    (SELECT count(*) FROM vocab) AS vocab_size,
    (SELECT count(*) FROM vocab WHERE kind = 'special') AS specials,
    (SELECT count(DISTINCT phase) FROM merges) AS phases,
    (SELECT count(*) FROM inputs) AS files,
    (SELECT CAST(sum(docs) AS BIGINT) FROM inputs) AS docs,
    (SELECT CAST(sum(text_bytes) AS BIGINT) FROM inputs) AS text_bytes,
    (SELECT count(*) FROM words) AS words,
    (SELECT CAST(sum(count) AS BIGINT) FROM words) AS word_count,
    TRY_CAST(json_extract_string((SELECT value FROM kv WHERE key = 'parity'), '$.ok') AS BOOLEAN)
        AS parity_ok,
    TRY_CAST(json_extract_string((SELECT value FROM kv WHERE key = 'parity'), '$.strings') AS BIGINT)
        AS parity_strings,
    json_extract_string((SELECT value FROM kv WHERE key = 'versions'), '$.toktok') AS toktok_version,
    (SELECT value FROM kv WHERE key = 'seed') AS seed,
    (SELECT value FROM kv WHERE key = 'schema_version') AS schema_version;
-- name: vocab_usage

-- Every token with its use on the curve's sample (subset 'all', see meta('compression').text), 0 = never produced.
CREATE OR REPLACE VIEW vocab_usage AS
SELECT v.id, v.shown, v.kind, v.phase, v.part, v.bytes, v.chars, COALESCE(u.uses, 0) AS uses
FROM vocab_text v LEFT JOIN token_usage u ON u.id = v.id AND u.subset = 'all';
