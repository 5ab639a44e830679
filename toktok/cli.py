"""The command line: parse, call one library function, turn typed errors into one line and an exit code.

``toktok train SOURCE... --out DIR --merges N`` trains and writes a tokenizer;
``toktok verify DIR [SOURCE...]`` checks tiktoken/HF id parity of a written tokenizer.
"""
from __future__ import annotations

import sys
from typing import List, Optional

import typer
from rich.console import Console
from rich.progress import BarColumn, Progress, TaskProgressColumn, TextColumn, TimeRemainingColumn
from rich.table import Table

from .errors import ToktokError

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False, help="Exact, fast byte-level BPE training.")
err = Console(stderr=True)
out = Console()


def _fail(e: BaseException, debug: bool) -> None:
    if debug:
        raise e
    msg = str(e).splitlines()[0] if str(e) else type(e).__name__
    err.print(f"[bold red]toktok: error:[/] {msg}", highlight=False, markup=True, soft_wrap=True)
    raise typer.Exit(getattr(e, "exit_code", 2))


@app.command()
def train(
    sources: List[str] = typer.Argument(..., help="Files, folders (recursive) or globs (** recursive): .parquet, .jsonl, .jsonl.zst, .txt"),
    out_dir: str = typer.Option(..., "--out", "-o", help="Output folder for the tokenizer and run.duckdb"),
    merges: str = typer.Option("30000", "--merges", "-n", help="Number of merges to learn (new tokens)"),
    special_token: List[str] = typer.Option([], "--special-token", "-s", help="Special token, repeatable, in id order"),
    text_column: str = typer.Option("text", "--text-column", help="Parquet column / JSONL field with the text"),
    bad_utf8: str = typer.Option("error", "--bad-utf8", help="Undecodable UTF-8: error, replace or skip"),
    no_hardcoded: bool = typer.Option(False, "--no-hardcoded", help="Start from the 256 bytes only"),
    force: bool = typer.Option(False, "--force", help="Replace an existing output folder"),
    memory_limit: str = typer.Option("2GB", "--memory-limit", help="DuckDB memory limit (spills to disk beyond it)"),
    threads: int = typer.Option(0, "--threads", help="Threads for counting (0 = all cores)"),
    seed: int = typer.Option(0, "--seed", help="Seed for sampling the parity check"),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bars"),
    debug: bool = typer.Option(False, "--debug", help="Show tracebacks"),
) -> None:
    """Train a byte-level BPE tokenizer and write .tiktoken + tokenizer.json with identical ids."""
    try:
        from .config import TrainConfig
        from .errors import ConfigError
        from .pipeline import train as run_train

        try:
            n = int(merges)
        except ValueError:
            raise ConfigError(f"--merges {merges!r} is not a whole number") from None
        cfg = TrainConfig(
            sources=list(sources), out=out_dir, merges=n, special_tokens=list(special_token),
            text_column=text_column, bad_utf8=bad_utf8, hardcoded=not no_hardcoded, force=force,
            memory_limit=memory_limit, threads=threads, seed=seed,
        )
        if quiet or not err.is_terminal:
            summary = run_train(cfg)
        else:
            with Progress(
                TextColumn("{task.description}"), BarColumn(), TaskProgressColumn(),
                TextColumn("{task.fields[rate]}"), TimeRemainingColumn(), console=err, transient=True,
            ) as bar:
                tasks: dict[str, int] = {}

                def progress(stage: str, done: int, total: Optional[int]) -> None:
                    if stage not in tasks:
                        tasks[stage] = bar.add_task(stage, total=total, rate="")
                    t = bar.tasks[tasks[stage]]
                    el = t.elapsed or 0
                    rate = (f"{done / el / 1e6:.1f} MB/s" if stage == "count" else f"{done / el:,.0f}/s") if el > 0 else ""
                    bar.update(tasks[stage], completed=done, total=total, rate=rate)

                summary = run_train(cfg, progress=progress)
    except ToktokError as e:
        _fail(e, debug)
        return
    except KeyboardInterrupt:
        err.print("toktok: interrupted; nothing was written")
        raise typer.Exit(130)

    for w in summary.warnings:
        err.print(f"[yellow]toktok: warning:[/] {w}", highlight=False)
    t = Table(title=f"toktok: wrote {summary.out}", show_header=False, box=None)
    t.add_row("vocabulary", f"{summary.vocab_size:,} tokens")
    t.add_row("merges", f"{summary.merges_learned:,} learned of {summary.merges_requested:,}"
              + (f" ({summary.reused_merges} reused existing tokens)" if summary.reused_merges else ""))
    t.add_row("corpus", f"{summary.docs:,} documents, {summary.text_bytes / 1e6:,.1f} MB, {summary.words:,} unique words")
    t.add_row("time", ", ".join(f"{k} {v:.2f}s" for k, v in summary.seconds.items()))
    t.add_row("parity", f"ok: tiktoken == HF tokenizers on {summary.parity_strings:,} strings")
    out.print(t)


@app.command("verify")
def verify_cmd(
    folder: str = typer.Argument(..., help="A toktok output folder"),
    sources: List[str] = typer.Argument(None, help="Text to check on (default: a built-in multilingual set)"),
    text_column: str = typer.Option("text", "--text-column"),
    slices: int = typer.Option(200, "--slices", help="Random slices of the sources to check too"),
    seed: int = typer.Option(0, "--seed"),
    debug: bool = typer.Option(False, "--debug"),
) -> None:
    """Check that tiktoken and HF tokenizers give identical ids and round-trip decodes."""
    try:
        from .read import read_corpus
        from .verify import verify

        texts = None
        if sources:
            texts = []
            for batch in read_corpus(list(sources), text_column=text_column).batches():
                texts.extend(batch.texts.to_list())
        rep = verify(folder, texts, slices=slices if texts else 0, seed=seed)
    except ToktokError as e:
        _fail(e, debug)
        return
    out.print(f"toktok: parity ok: {rep.strings:,} strings, {rep.tokens:,} tokens, tiktoken == HF tokenizers")


def main() -> None:  # pragma: no cover
    app()


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
