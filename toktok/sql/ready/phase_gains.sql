-- Words that gained the most from a phase: the phase's frequent words ranked by tokens saved
-- (count x tokens before the phase minus tokens after it). Empty until word_gains ran.
SELECT phase, COALESCE(TRY(decode(word)), CAST(word AS VARCHAR)) AS word, count, tokens_before,
       tokens_after, count * (tokens_before - tokens_after) AS tokens_saved
FROM word_gains
WHERE tokens_before > tokens_after
QUALIFY row_number() OVER (PARTITION BY phase ORDER BY tokens_saved DESC, count DESC, word) <= 20
ORDER BY phase, tokens_saved DESC, count DESC, word;
