INSERT OR REPLACE INTO meta SELECT unnest($keys::VARCHAR[]), unnest($values::VARCHAR[]);
