-- Tokens by language (or source): for each subset of the curve's sample (see the compression
-- table), the distinct tokens it used, the share of its tokens that are learned merges, bytes per
-- token, and its most used learned tokens. Empty until a sample was encoded.
WITH u AS (
    SELECT u.subset, u.id, u.uses, v.kind, v.shown, v.bytes
    FROM token_usage u JOIN vocab_text v USING (id)
)
SELECT subset, count(*) AS distinct_tokens, sum(uses) AS tokens,
       round(sum(uses) FILTER (WHERE kind = 'merge') / sum(uses), 4) AS merge_share,
       round(sum(uses * bytes) / sum(uses), 3) AS bytes_per_token,
       (list(shown ORDER BY uses DESC, id) FILTER (WHERE kind = 'merge'))[1:8] AS top_learned
FROM u GROUP BY subset
ORDER BY subset = 'all' DESC, bytes_per_token DESC, subset;
