-- What `toktok report` reads from a run file (toktok.insight.html), one statement per part.
-- name: vocab
-- Every id with its bytes, kind and phase, and for a learned token the merge that made it first
-- (its two parents and the pair count when merged; a reused merge makes no new id).
SELECT v.id, v.token, v.kind, v.phase, m.left_id, m.right_id, m.pair_count
FROM vocab v
LEFT JOIN (SELECT token_id, min_by(left_id, merge_index) AS left_id, min_by(right_id, merge_index) AS right_id,
                  min_by(count, merge_index) AS pair_count
           FROM merges GROUP BY token_id) m ON m.token_id = v.id
ORDER BY v.id;
-- name: merge_counts
-- The pair count of each merge, in merge order (the decay).
SELECT count FROM merges ORDER BY merge_index;
-- name: words
-- The training words of every phase with their counts.
SELECT word, count FROM words;
-- name: curve
-- The compression curve: 'all' first, then its subsets by name.
SELECT merges, vocab_size, subset, bytes_per_token FROM compression ORDER BY subset <> 'all', subset, merges;
-- name: sources
SELECT path, kind, phase, size_bytes, docs, text_bytes, sampled_fraction, share_of_run FROM sources ORDER BY phase, path;
