-- `batch` is a registered Arrow table of one batch's counts.
INSERT INTO word_parts SELECT word, count FROM batch;
