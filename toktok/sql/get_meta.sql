SELECT value FROM meta WHERE key = $key;
