-- What the steps after the phases write, before they run again on --resume.
-- name: vocab
DELETE FROM vocab;
-- name: stages
DELETE FROM stages;
-- name: compression
DROP TABLE IF EXISTS compression;
-- name: token_usage
DROP TABLE IF EXISTS token_usage;
-- name: word_gains
DROP TABLE IF EXISTS word_gains;
