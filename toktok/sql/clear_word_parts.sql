DELETE FROM word_parts;
