INSERT INTO stages SELECT unnest($stages::VARCHAR[]), unnest($seconds::DOUBLE[]);
