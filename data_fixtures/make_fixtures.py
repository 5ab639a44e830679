"""Build the small real-text fixtures in ``data_fixtures/corpus/`` (unit-test inputs and the quick start).

Provenance: every document is an excerpt of the benchmark corpus ``/work/shared/corpus``
(``en.parquet``: Project Gutenberg books, man pages, GNU/Debian/Python/PostgreSQL/SQLite manuals,
GCIDE/WordNet, State of the Union addresses, SpamAssassin mail; ``code.parquet``: Linux, OpenJDK,
Go, CPython, Rust, Perl, Ruby, TypeScript, JavaScript sources; ``multi.parquet``: translated man
pages, message catalogues, LibreOffice/GNOME help, Debian handbook, CC0 Bibles). Licences are
those of the sources (public domain, GPL, GFDL, PSF, CC-BY-SA, CC0, MPL, Apache 2.0); see the
corpus README. Nothing is rewritten except: excerpts are cut at line boundaries, and some
``extra.jsonl`` documents get ``\\r\\n`` line endings on purpose.

Writes (about 700 KB of text in all):

* ``sample.parquet`` -- ~600 KB, zstd, columns ``text``, ``source`` (en/code/multi), ``lang``
  (``en``, ``code`` or the corpus language tag); ~40 % English, ~30 % code, ~30 % in 42
  languages chosen so that 20+ scripts appear (Latin, Cyrillic, Greek, Georgian, Arabic, Hebrew,
  Syriac, Devanagari, Bengali, Gurmukhi, Gujarati, Oriya, Tamil, Telugu, Kannada, Malayalam,
  Thai, Khmer, Tibetan, Han, Kana, Hangul, Ethiopic, Cherokee). Documents are 256 B..8 KB
  windows (log-uniform lengths), so there are a few hundred; small row groups (64 rows) so
  readers see several.
* ``extra.jsonl`` -- ~60 KB, ``{"text": ...}`` per line, documents not used in the sample;
  every third one has ``\\r\\n`` line endings, code documents contain tabs, a few are one line.
* ``notes.txt`` -- ~40 KB plain text, English with a few code excerpts.

Deterministic: a fixed seed and fixed writer settings give the same files for the same corpus.
Run from the project root: ``.venv/bin/python data_fixtures/make_fixtures.py [CORPUS_DIR]``.
"""
from __future__ import annotations

import json
import math
import random
import sys
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import regex

SEED = 20241129
OUT = Path(__file__).resolve().parent / "corpus"  # the corpus only: `make demo` trains on the folder
CORPUS = Path(sys.argv[1]) if len(sys.argv) > 1 else Path("/work/shared/corpus")

SAMPLE_BUDGET = {"en": 240_000, "code": 180_000, "multi": 180_000}
MIN_DOC, MAX_DOC = 256, 8192

# Language tag -> script the excerpt must mostly be written in. Chosen for script coverage, not
# for size: several (th, gez, ml, te) have only a few KB in the corpus.
LANGS = {
    "de": "Latin", "fr": "Latin", "es": "Latin", "pl": "Latin", "cs": "Latin", "tr": "Latin",
    "vi": "Latin", "fi": "Latin", "hu": "Latin",
    "ru": "Cyrillic", "uk": "Cyrillic", "sr": "Cyrillic", "bg": "Cyrillic", "kk": "Cyrillic",
    "el": "Greek", "ka": "Georgian",
    "ar-MA": "Arabic", "fa": "Arabic", "ug": "Arabic",
    "he": "Hebrew", "yi": "Hebrew", "syr": "Syriac",
    "hi": "Devanagari", "mr": "Devanagari", "ne": "Devanagari",
    "bn": "Bengali", "pa": "Gurmukhi", "gu": "Gujarati", "or": "Oriya", "ta": "Tamil",
    "te": "Telugu", "kn": "Kannada", "ml": "Malayalam",
    "th": "Thai", "km": "Khmer", "dz": "Tibetan",
    "zh-Hans": "Han", "zh-Hant": "Han", "ja": "Han|Hiragana|Katakana", "ko": "Hangul",
    "gez": "Ethiopic", "chr": "Cherokee",
}


def script_share(text: str, script: str) -> float:
    """Fraction of letters and marks in ``text`` that belong to ``script`` (``a|b`` = any of)."""
    total = len(regex.findall(r"[\p{L}\p{M}]", text))
    cls = "".join(rf"\p{{Script={s}}}" for s in script.split("|"))
    return len(regex.findall(f"[{cls}]", text)) / total if total else 0.0


def doc_cap(rng: random.Random, lo: int = MIN_DOC, hi: int = MAX_DOC) -> int:
    """A log-uniform excerpt length, so short and long documents are both common."""
    return int(math.exp(rng.uniform(math.log(lo), math.log(hi))))


def excerpt(text: str, cap: int, rng: random.Random) -> str:
    """A window of at most ``cap`` UTF-8 bytes starting and ending at line boundaries."""
    b = text.encode()
    if len(b) <= cap:
        return text
    start = rng.randrange(0, len(b) - cap)
    nl = b.find(b"\n", start)
    # Start right after a newline so the window begins at a line (and character) boundary.
    start = nl + 1 if 0 <= nl < len(b) - 1 else 0
    piece = b[start : start + cap]
    cut = piece.rfind(b"\n")
    if cut >= 0 and cut + 1 >= min(MIN_DOC, len(piece)) // 2:
        piece = piece[: cut + 1]
    # No usable newline (one huge line): drop a possibly split trailing character.
    return piece.decode("utf-8", "ignore")


def take(rows: list[str], order: list[int], used: set[int], budget: int, rng: random.Random,
         script: str | None = None, lo: int = MIN_DOC, hi: int = MAX_DOC,
         passes: int = 1) -> list[str]:
    """Excerpts from unused rows (in ``order``) until ``budget`` bytes; marks the rows used.

    With ``passes > 1`` a row may give several (distinct) windows: some languages have only one
    or two documents in the corpus.
    """
    taken_before = set(used)
    out, seen, size = [], set(), 0
    for _ in range(passes):
        for i in order:
            if size >= budget:
                return out
            if i in taken_before:
                continue
            cap = min(doc_cap(rng, lo, hi), max(lo, budget - size))
            # Help pages mix English UI strings into translations: retry windows until the
            # target script dominates, so each language really contributes its script.
            for _ in range(8):
                piece = excerpt(rows[i], cap, rng)
                if script is None or script_share(piece, script) >= 0.5:
                    break
            else:
                continue
            if len(piece.strip()) < 32 or piece in seen:
                continue
            used.add(i)
            seen.add(piece)
            out.append(piece)
            size += len(piece.encode())
    return out


def main() -> None:
    rng = random.Random(SEED)
    en = pl.read_parquet(CORPUS / "en.parquet", columns=["text"])["text"].to_list()
    code = pl.read_parquet(CORPUS / "code.parquet", columns=["text"])["text"].to_list()
    multi = pl.read_parquet(CORPUS / "multi.parquet", columns=["text", "lang"])
    used: dict[str, set[int]] = {"en": set(), "code": set(), "multi": set()}

    def shuffled(n: int) -> list[int]:
        idx = list(range(n))
        rng.shuffle(idx)
        return idx

    records: list[tuple[str, str, str]] = []  # (text, source, lang)
    for t in take(en, shuffled(len(en)), used["en"], SAMPLE_BUDGET["en"], rng):
        records.append((t, "en", "en"))
    for t in take(code, shuffled(len(code)), used["code"], SAMPLE_BUDGET["code"], rng):
        records.append((t, "code", "code"))

    mrows = multi["text"].to_list()
    mlang = multi["lang"].to_list()
    per_lang = SAMPLE_BUDGET["multi"] // len(LANGS)
    for lang, script in LANGS.items():
        idx = [i for i, lg in enumerate(mlang) if lg == lang]
        rng.shuffle(idx)
        got = take(mrows, idx, used["multi"], per_lang, rng, script=script, lo=MIN_DOC,
                   hi=min(MAX_DOC, per_lang), passes=6)
        if not got:
            raise SystemExit(f"make_fixtures: no usable {lang} ({script}) text in the corpus")
        records += [(t, "multi", lang) for t in got]
    rng.shuffle(records)

    table = pa.table({
        "text": pa.array([r[0] for r in records], pa.large_string()),
        "source": pa.array([r[1] for r in records], pa.string()),
        "lang": pa.array([r[2] for r in records], pa.string()),
    })
    pq.write_table(table, OUT / "sample.parquet", compression="zstd", row_group_size=64)

    # extra.jsonl: rows the sample did not use (a different slice), smaller documents.
    extra: list[str] = []
    extra += take(en, shuffled(len(en)), used["en"], 26_000, rng, hi=4096)
    tabbed = [i for i in shuffled(len(code)) if "\t" in code[i]]
    extra += take(code, tabbed, used["code"], 20_000, rng, hi=4096)
    for lang in ("de", "ru", "ja", "ar-MA", "hi", "ko"):
        idx = [i for i, lg in enumerate(mlang) if lg == lang]
        rng.shuffle(idx)
        extra += take(mrows, idx, used["multi"], 2_500, rng, script=LANGS[lang], hi=2048)
    rng.shuffle(extra)
    lines = []
    for k, t in enumerate(extra):
        if k % 7 == 3:  # a few one-line documents: the first non-blank line only
            t = next((ln for ln in t.splitlines() if ln.strip()), t)
        elif k % 3 == 0:  # Windows line endings, which the pre-tokenizer must see as "\r\n"
            t = t.replace("\n", "\r\n")
        lines.append(json.dumps({"text": t}, ensure_ascii=False))
    (OUT / "extra.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8", newline="\n")

    # notes.txt: English prose with a few code excerpts in between, as one document.
    prose = take(en, shuffled(len(en)), used["en"], 32_000, rng, lo=1024, hi=6000)
    snippets = take(code, shuffled(len(code)), used["code"], 8_000, rng, lo=512, hi=2500)
    parts = []
    for k, p in enumerate(prose):
        parts.append(p.strip("\n"))
        if k % 2 == 1 and snippets:
            parts.append(snippets.pop().strip("\n"))
    parts += [s.strip("\n") for s in snippets]
    (OUT / "notes.txt").write_text("\n\n".join(parts) + "\n", encoding="utf-8", newline="\n")

    summary(table)


def summary(table: pa.Table) -> None:
    """Print sizes and script coverage, so a regenerated fixture can be eyeballed."""
    df = pl.from_arrow(table)
    by = df.group_by("source").agg(pl.len().alias("docs"), pl.col("text").str.len_bytes().sum()
                                   .alias("bytes")).sort("source")
    print(by)
    text = "".join(df["text"].to_list())
    scripts = sorted({s for v in LANGS.values() for s in v.split("|")})
    present = [s for s in scripts if regex.search(rf"\p{{Script={s}}}", text)]
    print(f"{len(present)}/{len(scripts)} scripts: {', '.join(present)}")
    for name in ("sample.parquet", "extra.jsonl", "notes.txt"):
        print(f"{name}: {(OUT / name).stat().st_size:,} bytes on disk")


if __name__ == "__main__":
    main()
