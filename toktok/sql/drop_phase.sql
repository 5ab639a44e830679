-- What an interrupted phase left behind, before it runs again on --resume.
DELETE FROM words WHERE phase = $phase;
DELETE FROM inputs WHERE phase = $phase;
DELETE FROM merges WHERE phase = $phase;
DELETE FROM parity WHERE phase = $phase;
