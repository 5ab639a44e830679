-- The tables and views of the run file's connection.
SELECT table_name FROM information_schema.tables;
