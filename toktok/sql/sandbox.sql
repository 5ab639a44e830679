-- `toktok sql`: the run file attached read-only as the default database of a private in-memory
-- DuckDB (params: path, the run file, and temp, the spill folder beside it). External access
-- is then turned off (no COPY ... TO, no ATTACH, no reading other files) and the configuration
-- locked, so the user's SQL cannot turn it back on (other connections to the file are untouched).
-- name: attach
ATTACH $path AS run (READ_ONLY);
-- name: use
USE run;
-- name: temp_directory
SET temp_directory = $temp;
-- name: no_external_access
SET enable_external_access = false;
-- name: lock
SET lock_configuration = true;
