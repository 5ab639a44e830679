"""What a run read and learned: per phase (``PhaseSummary``) and in all (``TrainSummary``).

Plain values, below the pipeline and the stages that fill them: the merge stage makes a phase's
summary, ``--resume`` restores it from the run file, the pipeline sums the phases into the run's
(the CLI's closing summary; ``toktok.TrainResult`` extends it).
Example: ``TrainSummary(**totals, out=Path("out/demo"), vocab_size=1917).merges_learned``.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Totals:
    """What a phase, or a whole run (the sum of its phases), read and learned."""

    merges_requested: int
    merges_learned: int
    reused_merges: int
    words: int
    docs: int
    text_bytes: int


@dataclass
class PhaseSummary(Totals):
    """What one phase read and learned."""

    name: str
    first_id: int  # id of the phase's first new token
    seconds: dict[str, float] = field(default_factory=dict)
    stopped_at: int = 0  # --min-frequency ended the merges: the best pair left occurs this often (else 0)


@dataclass
class TrainSummary(Totals):
    """What a run produced, for the CLI's closing summary."""

    out: Path
    vocab_size: int
    seconds: dict[str, float] = field(default_factory=dict)
    parity_strings: int = 0
    warnings: list[str] = field(default_factory=list)
    phases: list[PhaseSummary] = field(default_factory=list)
    warm_start: dict | None = None
    tiktoken: Path | None = None
    shared: bool = False  # the .tiktoken went into a folder toktok does not own; ``out`` is beside it
    specials: dict = field(default_factory=dict)
    pattern: str = "cl100k"  # the pre-tokenizer as Pattern.label() says it; per phase: "cl100k → superbpe"
    hardcoded: int = 0  # hardcoded tokens added (of the 1,161: those the pattern forms as one piece)
    regex_mb_s: list[float] = field(default_factory=list)  # counting through regex (no scanner), per phase
    counted_by: str = ""  # a custom pattern's counting path and why (count.scan.named.count_path)
    reserved: int = 0  # reserved special tokens that fill the ids (--vocab-size, --pad-to-multiple-of)
    min_frequency: int | None = None  # --min-frequency, for the summary's merges row
    max_token_length: int | None = None  # --max-token-length, for the summary's pattern row
    ladder: list[dict] = field(default_factory=list)  # --ladder's smaller tokenizers: vocab_size, folder, ...


__all__ = ["Totals", "PhaseSummary", "TrainSummary"]
