-- Write the run file's WAL into the file before it is closed.
CHECKPOINT;
