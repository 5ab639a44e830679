"""Terminal renderings for ``toktok sql``, ``toktok eval`` and ``toktok show`` (Rich objects).

Pure functions from data (a pyarrow Table, ``evaluate`` rows, a ``describe`` dict) to Rich
renderables; the CLI prints them. Example: ``Console().print(eval_table(rows))``.
Data is never Rich markup: words, tokens, special tokens, paths and warnings such as ``[/INST]``
or ``[bold]`` go into ``Text`` objects (printed as they are, whatever the console's settings),
and control characters (ANSI escapes, bidi overrides, ...) are shown escaped (:func:`printable`).
"""
from __future__ import annotations

import decimal
import json
import math
import os
import re

from typing import TYPE_CHECKING

from rich import box
from rich.console import Group
from rich.table import Table
from rich.text import Text

if TYPE_CHECKING:  # Arrow loads with the command that has a table to show
    import pyarrow as pa


# What must not reach a terminal raw: C0 controls (ESC starts ANSI sequences), DEL, C1 controls
# (U+009B is a one-character CSI), the bidi controls that reorder what is shown, the line and
# paragraph separators, and lone surrogates (an undecodable file name; they cannot be printed).
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069\ud800-\udfff]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape_one(m: re.Match) -> str:
    c = m.group()
    return _NAMED.get(c) or (f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}")


def printable(s) -> str:
    """``str(s)`` with control characters shown as Python escapes, safe to print to a terminal;
    everything else (backslashes, brackets, any script) as it is.
    Example: ``printable("\\x1b[31mred") == "\\\\x1b[31mred"``."""
    return _UNSAFE.sub(_escape_one, str(s))


def literal(s, style: str = "") -> Text:
    """A Rich ``Text`` of ``printable(s)``: never read as markup. Example: ``literal("[/INST]")``."""
    return Text(printable(s), style=style)


def _row(table: Table, *cells) -> None:
    """``table.add_row`` with every str cell literal (Rich reads str cells as markup)."""
    table.add_row(*(literal(c) if isinstance(c, str) else c for c in cells))


def _cell(v) -> str:
    if v is None:
        return "∅"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        if math.isnan(v) or math.isinf(v):
            return str(v)
        if v == int(v) and abs(v) < 1e15:
            return f"{int(v):,}"
        return f"{v:,.4g}" if abs(v) >= 1e-3 else f"{v:.3e}"
    if isinstance(v, int):
        return f"{v:,}"
    if isinstance(v, decimal.Decimal):
        return f"{int(v):,}" if v == v.to_integral_value() else f"{float(v):,.4g}"
    if isinstance(v, (bytes, bytearray)):
        try:
            return repr(bytes(v).decode("utf-8"))
        except UnicodeDecodeError:
            return repr(bytes(v))
    if isinstance(v, str):
        return repr(v)[1:-1] if any(c in v for c in "\n\r\t") or v != v.strip() else printable(v)
    if isinstance(v, list):  # strings quoted, control escapes visible, backslashes as they are
        return "[" + ", ".join(f'"{printable(x)}"' if isinstance(x, str) else _cell(x) for x in v) + "]"
    if isinstance(v, dict):
        return printable(json.dumps(v, ensure_ascii=False, default=str))
    return printable(v)


def arrow_table(table: pa.Table, limit: int = 40, title: str | None = None, rows: int | None = None) -> Group:
    """A Rich table of the first ``limit`` rows; numbers right-aligned, strings shown with escapes.
    ``rows``: the result's rows in all, when ``table`` holds only its head (:func:`head_of`)."""
    if table.num_rows == 1 and rows in (None, 1) and table.num_columns > 6:  # one wide row (e.g. the runs view): column / value
        t = Table(title=literal(title) if title else None, title_justify="left", header_style="bold")
        t.add_column("column", style="bold")
        t.add_column("value", overflow="fold")
        for k, v in zip(table.column_names, _rows(table.slice(0, 1))[0]):
            _row(t, k, _cell(v))
        return Group(t)
    import pyarrow as pa

    t = Table(title=literal(title) if title else None, title_justify="left", header_style="bold", show_lines=False)
    for f in table.schema:
        numeric = pa.types.is_integer(f.type) or pa.types.is_floating(f.type) or pa.types.is_decimal(f.type)
        t.add_column(literal(f.name), justify="right" if numeric else "left", overflow="fold")
    for row in _rows(table.slice(0, limit)):
        _row(t, *(_cell(v) for v in row))
    total = table.num_rows if rows is None else rows
    shown = min(limit, table.num_rows)
    note = f"{total:,} row{'s' if total != 1 else ''}" + (
        f" ({shown:,} shown; --limit N, --csv or --parquet FILE for all)" if shown < total else "")
    return Group(t, Text(note, style="dim"))


def _rows(table: pa.Table) -> list[tuple]:
    """Rows as tuples, by position: a result may repeat a column name (``SELECT 1 AS a, 2 AS a``),
    which ``to_pylist``'s dicts would collapse."""
    return list(zip(*(c.to_pylist() for c in table.columns))) if table.num_columns else []


def eval_table(rows: list[dict], word_unit: str) -> Table:
    """``toktok eval``'s table: per subset and tokenizer, bytes/token (and the difference to the
    first tokenizer), tokens/word and vocabulary utilization; the best bytes/token in bold."""
    t = Table(header_style="bold", title_justify="left", box=box.SIMPLE_HEAD, collapse_padding=True, pad_edge=False)
    for name, just in (("subset", "left"), ("tokenizer", "left"), ("docs", "right"), ("text", "right"),
                       ("bytes/tok", "right"), ("vs first", "right"), ("tok/word", "right"),
                       ("vocab", "right")):
        t.add_column(name, justify=just, overflow="fold", no_wrap=just == "right",
                     min_width=len(name) if name == "tokenizer" else None)
    by_subset: dict[str, list[dict]] = {}
    for r in rows:
        by_subset.setdefault(r["subset"], []).append(r)
    shown = {k: k for k in by_subset}
    if rows and rows[0].get("by") == "file":  # file paths: their names, where those are unique
        names = [os.path.basename(k) for k in by_subset]
        if len(set(names)) == len(names):
            shown = dict(zip(by_subset, names))
    for subset, rs in by_subset.items():
        best = max((r["bytes_per_token"] or 0) for r in rs)
        first = rs[0]["bytes_per_token"]
        for k, r in enumerate(rs):
            bpt = r["bytes_per_token"]
            vs = "" if k == 0 or not first or bpt is None else f"{(bpt / first - 1) * 100:+.1f}%"
            _row(
                t, shown[subset] if k == 0 else "",
                Text.assemble(literal(r["tokenizer"]), (" (lossy)", "yellow")) if r.get("lossy_docs") else r["tokenizer"],
                f"{r['docs']:,}", _size(r["bytes"]),
                Text(f"{bpt:.3f}" if bpt else "–", style="bold" if len(rs) > 1 and bpt == best else ""),
                vs, f"{r['tokens_per_word']:.3f}" if r["tokens_per_word"] else "–",
                f"{r['vocab_utilization'] * 100:.1f}%" if r["vocab_utilization"] is not None else "–",
            )
        t.add_section()
    t.caption = (f"words = {word_unit}; bytes are UTF-8; bold = most bytes per token (best compression); "
                 "vocab = share of the vocabulary produced at least once"
                 + ("; lossy = its tokens do not decode back to the text" if any(r.get("lossy_docs") for r in rows) else ""))
    t.caption_justify = "left"
    return t


def _size(n) -> str:
    if n is None:
        return "–"
    for unit, f in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if n >= f:
            return f"{n / f:,.1f} {unit}"
    return f"{n:,} B"


def specials_line(sp: dict) -> str:
    """Which rule placed a run's special ids (meta('specials'), ``formats.export._specials_rule``), in one line."""
    ids = sp["ids"]
    span = f"{min(ids.values()):,}" + (f"-{max(ids.values()):,}" if len(ids) > 1 else "")
    if sp["rule"] == "after_last_rank":
        line = f"{len(ids)} at {span}: after the last rank, in list order (toktoktok's convention)"
    else:
        gaps = sp["gaps"]
        line = (f"{len(ids)} at {span}: {len(gaps)} {sp['reason']}, so the .tiktoken's ranks have gaps at "
                f"{', '.join(map(str, gaps[:6]))}{' ...' if len(gaps) > 6 else ''}; ids declared in {sp['declared_in']}")
    moved = sp.get("moved") or {}
    if moved:
        line += f"; the base had {len(moved)} of them at {', '.join(str(a) for a, _ in list(moved.values())[:4])}" + (
            " ..." if len(moved) > 4 else "")
    return line


#: What the compression curve was measured on (meta('compression').text), as ``toktok show`` says it.
_SAMPLE_TEXT = {
    "held_out": "held out (text the run did not train on):",
    "training": "training text (the run read every document; a parity sample of them):",
    "mixed": "held out where a phase was sampled, training text where it read everything:",
    "given": "given text:",
}


def _config_line(cfg: dict, phases_cfg: list[dict], pattern: str | None) -> str:
    """The run's options in one line, from the config its run file recorded."""
    if phases_cfg:
        opts = ["phases " + ", ".join(f"{p.get('name')} {p.get('merges', '?'):,}" if isinstance(p.get("merges"), int)
                                      else str(p.get("name")) for p in phases_cfg) + " merges"]
    elif isinstance(cfg.get("vocab_size"), int):
        opts = [f"vocab size {cfg['vocab_size']:,}"]
    else:
        opts = [f"merges {cfg['merges']:,}" if isinstance(cfg.get("merges"), int) else "merges ?"]
    if isinstance(cfg.get("superbpe"), int):
        opts.append(f"superbpe {cfg['superbpe']:,}")
    if cfg.get("special_tokens"):
        opts.append("specials " + " ".join(t.get("content", "?") if isinstance(t, dict) else str(t)  # flagged: a mapping
                                           for t in cfg["special_tokens"]))
    if cfg.get("warm_start"):
        opts.append(f"warm start {cfg['warm_start']}")
    if cfg.get("budget"):
        opts.append(f"budget {_size_as_written(cfg['budget'])}")
    if pattern:
        opts.append(f"pattern {pattern}")
    opts += [f"seed {cfg.get('seed', '?')}", f"memory {_size_as_written(cfg.get('memory_limit', '?'))}"]
    if cfg.get("config_file"):
        opts.append(f"from {cfg['config_file']}")
    return ", ".join(opts)


def _size_as_written(v):
    """A stored size as a user writes it (``2GB``, ``512MiB``); sizes are stored as ints (bytes)
    since the option registry, older runs hold text, which is shown as it is."""
    if not isinstance(v, int) or isinstance(v, bool) or v <= 0:
        return v
    for unit, base in (("TB", 1000**4), ("TiB", 1 << 40), ("GB", 1000**3), ("GiB", 1 << 30),
                       ("MB", 1000**2), ("MiB", 1 << 20), ("KB", 1000), ("KiB", 1 << 10)):
        if v % base == 0:
            return f"{v // base}{unit}"  # as a user writes it: 2GB, 512MiB
    return f"{v:,} bytes"


def _sample_rows(head: Table, s: dict | None) -> None:
    """The compression curve's rows: bytes per token over the merges, by subset if grouped."""
    if s:
        what = _SAMPLE_TEXT.get(s.get("text"), "text of unrecorded origin:")
        line = (f"{what} {s.get('docs', 0):,} docs, {_size(s.get('bytes'))}: bytes/token "
                f"{s['bytes_per_token_start']:.3f} → {s['bytes_per_token_end']:.3f} over the merges")
        _row(head, "sample", line)
        subs = s.get("subsets") or []
        if subs:
            worst, best = subs[:3], subs[-3:]
            _row(head, "", f"by {s.get('by') or 'group'} ({len(subs)}): lowest "
                 + ", ".join(f"{x['subset']} {x['bytes_per_token']:.2f}" for x in worst)
                 + "; highest " + ", ".join(f"{x['subset']} {x['bytes_per_token']:.2f}" for x in reversed(best)))
    else:
        _row(head, "sample", "no compression curve recorded (no compression table)")


def run_summary(d: dict) -> Group:
    """``toktok show``: one screen about a run from ``insight.describe``."""
    cfg = d.get("config") or {}
    head = Table(show_header=False, box=None, pad_edge=False, title=literal(f"toktok run {d.get('run') or ''}"),
                 title_justify="left", title_style="bold")
    head.add_column(style="bold cyan", no_wrap=True)
    head.add_column(overflow="fold")
    _row(head, "when", f"{d.get('started') or '?'} → {d.get('finished') or 'unfinished'}"
         + (f"  (toktok {d['versions'].get('toktok')})" if d.get("versions") else ""))
    phases_cfg = [p for p in cfg.get("phases") or [] if isinstance(p, dict)]
    _row(head, "config", _config_line(cfg, phases_cfg, d.get("pattern")))
    if phases_cfg:
        srcs = "; ".join(f"{p.get('name')}: " + " ".join(str(s.get("path")) if isinstance(s, dict) else str(s)
                                                          for s in p.get("sources") or []) for p in phases_cfg)
    else:
        srcs = " ".join(str(s.get("path")) if isinstance(s, dict) else str(s) for s in cfg.get("sources") or [])
    _row(head, "sources", srcs or "–")
    inputs = d.get("inputs") or []
    _row(head, "inputs", f"{len(inputs)} file(s), {sum(i['docs'] or 0 for i in inputs):,} documents, "
         f"{_size(sum(i['text_bytes'] or 0 for i in inputs))} of text")
    for i in inputs[:6]:
        _row(head, "", Text.assemble(literal(i["path"]), "  ", literal(f"{i['kind']}, {i['phase']}", "dim"),
                                   f", {i['docs']:,} docs, {_size(i['text_bytes'])}"))
    if len(inputs) > 6:
        _row(head, "", f"… {len(inputs) - 6} more (toktok sql RUN sources)")
    w = d.get("words") or {}
    _row(head, "words", f"{w.get('unique_words') or 0:,} unique, {w.get('total') or 0:,} in all")
    _sample_rows(head, d.get("sample"))
    for k, r in enumerate(d.get("phases") or []):
        parts = [f"{r['merges']:,} merges" + (f" ({r['reused']:,} reused)" if r["reused"] else "")]
        if r["first_id"] is not None:
            parts.append(f"ids {r['first_id']}–{r['last_id']}")
        if r["max_count"] is not None:
            parts.append(f"pair count {r['max_count']:,} → {r['last_count']:,}")
        parts.append(f"{r['files'] or 0} file(s), {_size(r['text_bytes'])}, {r['words'] or 0:,} unique words")
        parts.append(f"{(r['vocab_share'] or 0) * 100:.1f}% of the vocab")
        _row(head, "phases" if k == 0 else "", Text.assemble(literal(r["phase"], "bold"), literal(": " + ", ".join(parts))))
    if isinstance(d.get("specials"), dict) and d["specials"].get("ids"):
        _row(head, "special ids", literal(specials_line(d["specials"])))
    sw = d.get("superwords")
    if isinstance(sw, dict):
        _row(head, "superwords", literal(f"{sw['count']:,} tokens that {sw.get('pattern') or 'the first pattern'} "
                                         "cuts, e.g. " + " ".join(repr(x) for x in sw.get("examples") or [])
                                         + " (toktok sql RUN superwords)"))
    vocab = d.get("vocab") or {}
    _row(head, "vocab", f"{d.get('vocab_size', 0):,} tokens: " + ", ".join(f"{v:,} {k}" for k, v in vocab.items()))
    p = d.get("parity")
    if isinstance(p, dict):
        _row(head, "parity", f"ok: tiktoken == HF tokenizers on {p.get('strings', 0):,} strings, {p.get('tokens', 0):,} tokens"
             if p.get("ok") else Text.assemble(("failed", "red"), literal(f": {p}")))
    else:
        _row(head, "parity", Text.assemble(("not recorded", "yellow"), " (the run did not finish)"))
    st = d.get("stages") or {}
    if st:
        _row(head, "time", ", ".join(f"{k} {v:.2f}s" for k, v in st.items()) + f"  (total {sum(st.values()):.2f}s)")
    for warn in d.get("warnings") or []:
        head.add_row(Text("warning", "yellow"), literal(warn))

    return Group(head)


def _plain(v):
    """A CSV cell: text as is, bytes as UTF-8 (escaped where invalid), lists/dicts as JSON."""
    if isinstance(v, (bytes, bytearray)):
        return bytes(v).decode("utf-8", "backslashreplace")
    if isinstance(v, (list, dict)):
        return json.dumps(v, ensure_ascii=False, default=str)
    return "" if v is None else v


def write_csv(table, stream) -> None:
    """All rows of ``table`` (a pyarrow Table, or record batches with a ``schema``: a streamed
    result) as CSV (header first) to a text stream, one batch at a time."""
    import csv

    import pyarrow as pa

    w = csv.writer(stream, lineterminator="\n")
    w.writerow(table.schema.names)
    for batch in table.to_batches(4096) if isinstance(table, pa.Table) else table:
        for row in _rows(pa.Table.from_batches([batch])):
            w.writerow([_plain(v) for v in row])


def write_parquet(table, path: str) -> int:
    """``table`` (a pyarrow Table, or record batches with a ``schema``) as a Parquet file, written
    batch by batch beside it and renamed into place when whole; returns the rows written.
    OutputError if it cannot be written (a file there before is left as it was)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from ..errors import OutputError

    target, rows = os.path.realpath(os.path.expanduser(path)), 0
    tmp = os.path.join(os.path.dirname(target), f".{os.path.basename(target)}.partial-{os.getpid()}")
    try:
        try:
            with pq.ParquetWriter(tmp, table.schema) as w:
                for batch in table.to_batches() if isinstance(table, pa.Table) else table:
                    w.write_batch(batch)
                    rows += batch.num_rows
            os.replace(tmp, target)
        finally:
            if os.path.lexists(tmp):
                os.unlink(tmp)
    except (OSError, pa.ArrowException) as e:
        raise OutputError(f"{path}: cannot write Parquet ({e})") from None
    return rows


def head_of(batches, limit: int):
    """The first ``limit`` rows of streamed record batches as a Table, and how many rows there are
    in all (the rest counted, not kept): what ``toktok sql`` shows in the terminal."""
    import pyarrow as pa

    kept, n = [], 0
    for batch in batches:
        if n < limit:
            kept.append(batch.slice(0, limit - n))
        n += batch.num_rows
    return pa.Table.from_batches(kept, schema=batches.schema), n
