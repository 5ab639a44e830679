INSERT INTO vocab SELECT id, token, kind, phase FROM batch;
