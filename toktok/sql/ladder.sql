-- The run file read back to cut a smaller tokenizer from it (toktok.formats.ladder).

-- name: vocab
SELECT id, token, kind FROM vocab ORDER BY id;

-- name: parity_texts
SELECT text FROM parity ORDER BY phase, hash, source, row;
