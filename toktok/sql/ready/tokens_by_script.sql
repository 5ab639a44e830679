-- Learned tokens by script (of their first letter; tokens without letters by what they hold),
-- per phase, with their share of the phase's tokens, mean length and a few examples.
WITH t AS (
    SELECT rank, phase, text, shown, bytes, regexp_extract(text, '\p{L}') AS ch
    FROM merges_text WHERE NOT reused
), s AS (
    SELECT *, CASE
        WHEN text IS NULL THEN 'partial UTF-8'
        WHEN ch = '' AND regexp_matches(text, '^[\s\p{Z}]+$') THEN 'whitespace'
        WHEN ch = '' AND regexp_matches(text, '\p{N}') THEN 'digits'
        WHEN ch = '' THEN 'punctuation/symbols'
        WHEN regexp_matches(ch, '\p{Latin}') THEN 'Latin'
        WHEN regexp_matches(ch, '\p{Cyrillic}') THEN 'Cyrillic'
        WHEN regexp_matches(ch, '\p{Greek}') THEN 'Greek'
        WHEN regexp_matches(ch, '\p{Armenian}') THEN 'Armenian'
        WHEN regexp_matches(ch, '\p{Georgian}') THEN 'Georgian'
        WHEN regexp_matches(ch, '\p{Arabic}') THEN 'Arabic'
        WHEN regexp_matches(ch, '\p{Hebrew}') THEN 'Hebrew'
        WHEN regexp_matches(ch, '\p{Syriac}') THEN 'Syriac'
        WHEN regexp_matches(ch, '\p{Devanagari}') THEN 'Devanagari'
        WHEN regexp_matches(ch, '\p{Bengali}') THEN 'Bengali'
        WHEN regexp_matches(ch, '\p{Gurmukhi}') THEN 'Gurmukhi'
        WHEN regexp_matches(ch, '\p{Gujarati}') THEN 'Gujarati'
        WHEN regexp_matches(ch, '\p{Oriya}') THEN 'Oriya'
        WHEN regexp_matches(ch, '\p{Tamil}') THEN 'Tamil'
        WHEN regexp_matches(ch, '\p{Telugu}') THEN 'Telugu'
        WHEN regexp_matches(ch, '\p{Kannada}') THEN 'Kannada'
        WHEN regexp_matches(ch, '\p{Malayalam}') THEN 'Malayalam'
        WHEN regexp_matches(ch, '\p{Thai}') THEN 'Thai'
        WHEN regexp_matches(ch, '\p{Khmer}') THEN 'Khmer'
        WHEN regexp_matches(ch, '\p{Tibetan}') THEN 'Tibetan'
        WHEN regexp_matches(ch, '\p{Ethiopic}') THEN 'Ethiopic'
        WHEN regexp_matches(ch, '\p{Cherokee}') THEN 'Cherokee'
        WHEN regexp_matches(ch, '\p{Han}') THEN 'Han'
        WHEN regexp_matches(ch, '\p{Hiragana}') THEN 'Hiragana'
        WHEN regexp_matches(ch, '\p{Katakana}') THEN 'Katakana'
        WHEN regexp_matches(ch, '\p{Hangul}') THEN 'Hangul'
        ELSE 'other letters' END AS script
    FROM t
)
SELECT phase, script, count(*) AS tokens,
       round(count(*) / sum(count(*)) OVER (PARTITION BY phase), 4) AS share,
       round(avg(bytes), 2) AS mean_bytes,
       list(shown ORDER BY rank)[1:6] AS first_learned
FROM s GROUP BY phase, script
ORDER BY phase, tokens DESC, script;
