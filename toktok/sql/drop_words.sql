DELETE FROM words WHERE phase = $phase;
