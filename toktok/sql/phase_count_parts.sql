SELECT word, count FROM count_parts WHERE phase = $phase;
