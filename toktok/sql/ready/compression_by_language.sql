-- Compression per language (or source) of the curve's sample (held out or training text: see
-- meta('compression').text): bytes per token with the starting
-- vocabulary, halfway through the merges and at the end, and the gain of the merges.
WITH c AS (
    SELECT *, max(merges) OVER () AS last FROM compression
), p AS (
    SELECT subset, any_value(docs) AS docs, any_value(bytes) AS bytes,
           min(bytes_per_token) FILTER (WHERE merges = 0) AS at_start,
           arg_min(bytes_per_token, abs(merges - last / 2)) AS halfway,
           min(bytes_per_token) FILTER (WHERE merges = last) AS at_end
    FROM c GROUP BY subset
)
SELECT subset, docs, bytes, round(at_start, 3) AS at_start, round(halfway, 3) AS halfway,
       round(at_end, 3) AS at_end, round(at_end / at_start, 3) AS gain
FROM p
ORDER BY subset = 'all' DESC, gain DESC, subset;
