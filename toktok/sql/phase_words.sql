SELECT word, count FROM words WHERE phase = $phase ORDER BY word;
