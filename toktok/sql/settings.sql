-- DuckDB settings of a run file's connection (toktok.store.RunStore), values as parameters.
-- name: memory_limit
SET memory_limit = $limit;
-- name: temp_directory
SET temp_directory = $path;
-- name: threads
SET threads = $threads;
-- name: preserve_insertion_order
-- Kept on: ORDER BY results come back in order as Arrow (see RunStore.create).
SET preserve_insertion_order = true;
