-- Under-trained tokens: learned tokens the final tokenizer rarely or never produces on the
-- curve's sample (parts that almost always merge further, text rare outside the training data,
-- and on training text, meta('compression').text = 'training', rare tokens are rarer still on new
-- text). Ordered by uses, then by the pair count they were learned with. Empty until a sample
-- was encoded.
SELECT m.rank, m.shown AS token, m.phase, m.bytes, m.count AS pair_count, COALESCE(u.uses, 0) AS uses
FROM merges_text m
LEFT JOIN token_usage u ON u.id = m.rank AND u.subset = 'all'
WHERE NOT m.reused AND EXISTS (SELECT 1 FROM token_usage)
ORDER BY uses, m.count DESC, m.rank
LIMIT 50;
