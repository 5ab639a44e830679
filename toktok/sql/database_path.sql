-- The file of the connection's default database (NULL in memory).
SELECT path FROM duckdb_databases() WHERE database_name = current_database();
