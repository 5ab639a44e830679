-- What the steps after the phases write, before they run again on --resume.
DELETE FROM vocab;
DELETE FROM stages;
DROP TABLE IF EXISTS compression;
DROP TABLE IF EXISTS token_usage;
DROP TABLE IF EXISTS word_gains;
