INSERT INTO merges SELECT merge_index, left_id, right_id, token_id, token, count, reused, $phase FROM batch;
