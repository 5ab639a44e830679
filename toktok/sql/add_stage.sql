INSERT INTO stages VALUES ($stage, $seconds);
