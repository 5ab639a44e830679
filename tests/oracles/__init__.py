"""Oracles: slow, obviously-correct definitions the package is tested against (the reference BPE,
the `regex` package's pre-tokenizer, a Polars emulation of it, the sample read in batches). Used
only by tests; nothing in ``toktok`` imports them."""
