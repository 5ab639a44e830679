UPDATE words SET tokens = batch.tokens FROM batch WHERE words.word = batch.word AND words.phase = $phase;
