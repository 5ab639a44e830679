"""What the command line prints through Rich: its two consoles, the one-line errors and warnings,
and the closing summary of ``toktok train``.

Imported when the CLI first prints, not with the CLI (:mod:`toktok.cli`): Rich's console and
table take ~15 ms to import, which a ``toktok train`` would spend before its run starts, on the
one core the run then has (the other idles, or reads a word-count table). A run imports this
module beside its merge loop instead (:func:`toktok.later.load`), so that its summary finds it
loaded. Nothing printed is Rich markup, emoji codes or a repr to highlight: paths, tokens and
messages such as "[/INST]" or ":fire:" are data; styles come from Text objects.
Example: ``out.print(summary_table(toktok.train(...)))``.
"""
from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text

from .insight.report import literal, printable, specials_line

err = Console(stderr=True, markup=False, emoji=False, highlight=False)
out = Console(markup=False, emoji=False, highlight=False)


def say(kind: str, style: str, msg: str) -> None:
    """``toktok: error: ...`` / ``toktok: warning: ...`` on stderr, the message as it is
    (control characters escaped)."""
    err.print(Text.assemble((f"toktok: {kind}:", style), " ", printable(msg)), soft_wrap=True)


def summary_table(summary) -> Table:
    """The closing summary of ``toktok train`` (a ``TrainSummary``) as a table to print."""
    if summary.shared:
        t = Table(title=literal(f"toktok: wrote {summary.tiktoken}"), show_header=False, box=None)
        t.add_row("vocabulary", f"{summary.vocab_size:,} tokens" + _vocab_parts(summary)
                  + (f", {summary.reserved:,} of them reserved special tokens" if summary.reserved else ""))
        t.add_row("other files", literal(f"{summary.out}/ (tokenizer.json, tokenizer_config.json, "
                  "special_tokens_map.json, run.duckdb)"))
    else:
        t = Table(title=literal(f"toktok: wrote {summary.out}"), show_header=False, box=None)
        t.add_row("vocabulary", literal(f"{summary.vocab_size:,} tokens" + _vocab_parts(summary) + (f" ({summary.tiktoken.name})" if summary.tiktoken and summary.tiktoken.name != "tokenizer.tiktoken" else "")
                  + (f", {summary.reserved:,} of them reserved special tokens" if summary.reserved else "")))
    if summary.warm_start:
        ws = summary.warm_start
        t.add_row("warm start", literal(f"{ws['file']}: {ws['ids']:,} ids kept"
                  + (f" ({len(ws['specials'])} special tokens at their ids)" if ws["specials"] else "")))
    if summary.specials.get("ids"):
        t.add_row("special ids", literal(specials_line(summary.specials)))
    t.add_row("pattern", literal(_pattern_line(summary)))
    t.add_row("merges", f"{summary.merges_learned:,} learned of {summary.merges_requested:,}"
              + (f" ({summary.reused_merges} reused existing tokens)" if summary.reused_merges else "")
              + _stopped(summary))
    if len(summary.phases) > 1:
        for ph in summary.phases:
            t.add_row(literal(f"  {ph.name}"), f"{ph.merges_learned:,} of {ph.merges_requested:,} merges (ids from {ph.first_id:,}), "
                      f"{count_of(ph.docs, 'document')}, {ph.text_bytes / 1e6:,.1f} MB, {count_of(ph.words, 'unique word')}")
    t.add_row("corpus", (f"{count_of(summary.docs, 'document')}" if summary.docs or not summary.text_bytes else
                         "word-count tables")  # (--word-counts alone: no documents, the text their counts stand for)
              + f", {summary.text_bytes / 1e6:,.1f} MB, {count_of(summary.words, 'unique word')}")
    t.add_row("time", ", ".join(f"{k} {v:.2f}s" for k, v in summary.seconds.items()))
    t.add_row("parity", f"ok: tiktoken == HF tokenizers on {summary.parity_strings:,} strings")
    if summary.ladder:
        t.add_row("ladder", literal(", ".join(f"{r['vocab_size']:,}" for r in summary.ladder)
                                    + f" in {summary.out}/ladder/N/, each parity ok"))
    return t


def _vocab_parts(summary) -> str:
    """What the vocabulary is made of: `` = 256 bytes + 1,161 hardcoded + 2,000 merges + 1 special``
    (a warm start's ids in place of the bytes; reused merges add no id); empty if they do not add up."""
    parts = [(summary.warm_start["ids"], "from the warm start") if summary.warm_start else (256, "bytes")]
    parts += [(summary.hardcoded, "hardcoded"), (summary.merges_learned - summary.reused_merges, "merges")]
    rest = summary.vocab_size - sum(n for n, _ in parts)
    if rest < 0:
        return ""
    parts.append((rest, "special" if rest == 1 else "specials"))
    return " = " + " + ".join(f"{n:,} {what}" for n, what in parts if n or what in ("bytes", "merges"))


def _stopped(summary) -> str:
    """The merges row's note when --min-frequency ended a phase's merges early."""
    stops = [ph for ph in summary.phases if ph.stopped_at]
    if not stops:
        return ""
    where = f" in {', '.join(ph.name for ph in stops)}" if len(summary.phases) > 1 else ""
    return (f"; --min-frequency {summary.min_frequency} stopped early{where} (the best pair left occurs "
            f"{min(ph.stopped_at for ph in stops):,} times)")


def count_of(n: int, noun: str) -> str:
    """``n`` things, singular for one: ``count_of(1, "document") == "1 document"``."""
    return f"{n:,} {noun}" + ("" if n == 1 else "s")


def _pattern_line(summary) -> str:
    """The summary's pattern row: the pattern, and how many hardcoded tokens it kept."""
    from .vocab import hardcoded_tokens

    everyone = len(hardcoded_tokens())
    line = summary.pattern
    if summary.hardcoded == everyone:
        line += f"; hardcoded {everyone:,}"
    elif summary.hardcoded:
        why = "never form one piece under it" + (f" or are longer than {summary.max_token_length} bytes"
                                                  if summary.max_token_length else "")
        line += f"; hardcoded {summary.hardcoded:,} of {everyone:,} (the rest {why})"
    if summary.regex_mb_s:
        lo, hi = min(summary.regex_mb_s), max(summary.regex_mb_s)
        why = summary.counted_by.partition(" (")[2].rstrip(")")
        line += (f"; counted through regex{f' ({why})' if why else ''} at {lo:,.1f}"
                 + (f"-{hi:,.1f}" if hi - lo >= 0.05 else "") + " MB/s")
    elif summary.counted_by:
        line += f"; counted by {summary.counted_by}"
    return line


__all__ = ["count_of", "err", "literal", "out", "say", "summary_table"]
