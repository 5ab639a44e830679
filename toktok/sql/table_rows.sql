-- Every row of the table or view $name (`toktok sql RUN merges`): the name is a value, not SQL.
SELECT * FROM query_table($name);
