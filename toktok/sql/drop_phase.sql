-- What an interrupted phase left behind, before it runs again on --resume (its words' table:
-- RunStore.drop_words).
-- name: inputs
DELETE FROM inputs WHERE phase = $phase;
-- name: merges
DELETE FROM merges WHERE phase = $phase;
-- name: parity
DELETE FROM parity WHERE phase = $phase;
