DELETE FROM merges WHERE phase = $phase;
