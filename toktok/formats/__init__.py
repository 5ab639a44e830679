"""The output formats: each module reads and writes one, so that tiktoken and Hugging Face
``tokenizers``/``transformers`` give identical ids.

``tiktoken`` (the ``.tiktoken`` ranks, ``load_encoding``), ``hf`` (``tokenizer.json`` and the
transformers files, ``load_hf``), ``splits`` (the HF merges: every split of every token),
``spell`` (tokenizer.json's long vocab and merge lines, compiled),
``specials`` (the special tokens beside a ``.tiktoken``), ``common`` (file names and places,
``write_atomic``). Example: ``from toktok.formats.tiktoken import load_encoding``.
"""
