-- Count decay over the ranks: the merges in 20 equal buckets (in training order), with the pair
-- count when merged at the top, middle and bottom of each, relative to the first merge.
WITH b AS (
    SELECT merge_index, count, ntile(20) OVER (ORDER BY merge_index) AS bucket FROM merges
)
SELECT bucket, min(merge_index) AS first_merge, max(merge_index) AS last_merge,
       max(count) AS max_count, CAST(median(count) AS BIGINT) AS median_count, min(count) AS min_count,
       round(median(count) / (SELECT max(count) FROM merges), 5) AS median_vs_top
FROM b GROUP BY bucket ORDER BY bucket;
