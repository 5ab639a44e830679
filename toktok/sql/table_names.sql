-- The tables and views of the run file's connection (information_schema.tables' names, from
-- DuckDB's catalog functions, which a process binds faster the first time).
SELECT table_name FROM duckdb_tables() UNION ALL SELECT view_name FROM duckdb_views() WHERE NOT internal;
