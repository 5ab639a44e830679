-- name: count_parts
DELETE FROM count_parts WHERE phase = $phase;
-- name: parity
DELETE FROM parity WHERE phase = $phase;
