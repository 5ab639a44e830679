-- A phase's words in the order they were stored (RunStore.set_tokens relies on it).
SELECT word, count FROM words WHERE phase = $phase ORDER BY rowid;
