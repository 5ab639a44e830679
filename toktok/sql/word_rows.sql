-- A phase's rows of the words table by row id: each word's tokens are set in place after its
-- merges (toktok.store.RunStore.set_tokens), in the order the words were stored.
-- name: span
SELECT min(rowid), max(rowid), count(*) FROM words WHERE phase = $phase;
-- name: words_at
SELECT word FROM words WHERE rowid IN ($first, $last) ORDER BY rowid;
-- name: set_tokens
UPDATE words SET tokens = batch.tokens FROM batch WHERE words.rowid = batch.rid AND words.phase = $phase;
