-- What toktok.insight needs to cut the vocabulary after k merges (the rank prefixes).
-- name: vocab
SELECT id, kind = 'special' AS special, token FROM vocab ORDER BY id;
-- name: merge_tokens
SELECT token_id FROM merges ORDER BY merge_index;
-- name: new_merges
SELECT count(*) FROM merges WHERE NOT reused;
-- name: phase_ranges
-- Each phase's first and last merge, in training order (word_gains).
SELECT phase, min(merge_index), max(merge_index) FROM merges GROUP BY phase ORDER BY 2;
