DELETE FROM count_parts WHERE phase = $phase;
DELETE FROM parity WHERE phase = $phase;
