DELETE FROM count_parts WHERE phase = $phase;
DELETE FROM samples WHERE phase = $phase;
DELETE FROM parity WHERE phase = $phase;
