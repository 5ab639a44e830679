-- Top merges of each phase: the first 15 it learned (the most frequent pairs), with their parts
-- and the pair count when merged.
SELECT phase, merge_index, rank, left_text, right_text, shown AS token, count
FROM merges_text
QUALIFY row_number() OVER (PARTITION BY phase ORDER BY merge_index) <= 15
ORDER BY min(merge_index) OVER (PARTITION BY phase), merge_index;
