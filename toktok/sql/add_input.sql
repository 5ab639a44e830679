INSERT INTO inputs VALUES ($path, $kind, $phase, $size_bytes, $docs, $text_bytes, $docs_seen, $bytes_seen);
