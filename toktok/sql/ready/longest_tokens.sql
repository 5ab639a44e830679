-- The 30 longest learned tokens (in bytes), with the phase that learned them and the pair count
-- when they were merged.
SELECT m.rank, m.shown AS token, m.bytes, m.chars, m.phase, m.count
FROM merges_text m
WHERE NOT m.reused
ORDER BY m.bytes DESC, m.rank
LIMIT 30;
