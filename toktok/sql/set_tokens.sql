-- Each word's number of tokens after its phase's merges.
UPDATE words SET tokens = batch.tokens FROM batch WHERE words.phase = $phase AND words.word = batch.word;
