"""Rebuild test_data/ from the bundled sample (data_fixtures/corpus/sample.parquet): a small corpus in
toktoktok's layout (.txt files and one Parquet file with a ``text`` column), split by language and
domain so that multi_phase.yaml's sources (english, code, german, french, spanish) are local folders.
Run from this folder: ``python make_test_data.py``."""
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

HERE = Path(__file__).resolve().parent
SAMPLE = HERE.parents[2] / "data_fixtures" / "corpus" / "sample.parquet"


def main() -> None:
    t = pq.read_table(SAMPLE).to_pylist()
    by = {}
    for row in t:
        by.setdefault(row["lang"], []).append(row["text"])
    out = HERE / "test_data"
    en = by["en"][:120]
    files = {
        "english/wikipedia/en.txt": "\n\n".join(en[0::3]),
        "english/books/en.txt": "\n\n".join(en[1::3]),
        "code/python.txt": "\n\n".join(by["code"][:30]),
        "german/de.txt": "\n\n".join(by["de"]),
        "french/fr.txt": "\n\n".join(by["fr"]),
        "spanish/es.txt": "\n\n".join(by["es"]),
    }
    for name, text in files.items():
        p = out / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text + "\n", encoding="utf-8")
    pq.write_table(pa.table({"text": en[2::3]}), out / "english" / "common_crawl.parquet")


if __name__ == "__main__":
    main()
