SELECT merge_index, left_id, right_id, token_id, token, count, reused FROM merges
WHERE phase = $phase ORDER BY merge_index;
