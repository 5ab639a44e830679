"""The bench's history: one append-only file of runs, ``bench/history.jsonl``, one JSON object a line.

Every bench script appends its run (:func:`append`); ``bench/report.py`` prints today's tables from
the newest runs of each kind. A line holds:

- ``date`` (``YYYY-MM-DD``, UTC), ``commit`` (the code measured: ``git describe``'s short hash,
  ``-dirty`` when the tree had changes; null for runs recorded before the file existed, whose
  ``recorded_in`` names the commit that added their figures), ``load`` (the 1-minute load average
  at the start), ``machine`` (cores, memory, Python, platform);
- ``bench`` (the script: ``run``, ``fixed_costs``, ``scale``, ...; ``notes`` for the dated prose the
  docs kept before), ``args`` (its command line), ``label`` (a name to cite the run by, e.g.
  ``2026-12-05a-100mb``) and ``figures`` (every figure the script wrote, as it wrote them).

Lines are never rewritten: a new run is a new line. Example::

    from history import append, runs
    append("run", figures, args=sys.argv[1:])
    newest = runs("fixed_costs")[-1]["figures"]
"""
from __future__ import annotations

import datetime
import json
import os
import platform
import subprocess
from pathlib import Path

PATH = Path(__file__).resolve().with_name("history.jsonl")
REPO = PATH.parent.parent


def commit() -> str | None:
    """The measured code's short commit hash, ``-dirty`` when the tree has changes; None outside git."""
    try:
        out = subprocess.run(["git", "describe", "--always", "--dirty", "--abbrev=7"], cwd=REPO,
                             capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None


def machine() -> dict:
    """The machine a run ran on (what makes its figures comparable)."""
    info = {"cores": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform()}
    try:
        import psutil

        info["physical_cores"] = psutil.cpu_count(logical=False)
        info["mem_gb"] = round(psutil.virtual_memory().total / 2**30, 1)
    except ImportError:
        pass
    return info


def append(bench: str, figures: dict, *, args: list[str] | None = None, label: str | None = None,
           load: float | None = None, path: Path | None = None) -> dict:
    """Append one run of script ``bench`` with its ``figures`` to the history (``path``: another
    file, for tests); ``load``: the load average at its start (default: now). Returns the line's
    object. Example: ``append("fixed_costs", {"rows": rows}, args=sys.argv[1:])``."""
    today = datetime.datetime.now(datetime.timezone.utc).date().isoformat()
    entry = {"date": today, "commit": commit(), "load": round(os.getloadavg()[0] if load is None else load, 2),
             "machine": machine(), "bench": bench, "args": args, "label": label or f"{today}-{bench}",
             "figures": figures}
    with open(path or PATH, "a", encoding="utf-8") as fh:
        fh.write(json.dumps(entry, separators=(",", ":")) + "\n")
    return entry


def options(ap) -> None:
    """Add every bench script's history options to argparse parser ``ap``: ``--label`` and
    ``--no-history`` (a trial run, not appended)."""
    ap.add_argument("--label", help="the name the run is cited by in the history (default: DATE-SCRIPT)")
    ap.add_argument("--no-history", action="store_true", help="do not append this run to bench/history.jsonl")


def record(a, bench: str, figures: dict, *, load: float | None = None) -> None:
    """Append a script's run (``a``: its parsed arguments, with :func:`options`'s) unless
    ``--no-history``; says where. Example: ``record(args, "scale", fig)``."""
    import sys

    if getattr(a, "no_history", False):
        return
    entry = append(bench, figures, args=sys.argv[1:], label=getattr(a, "label", None), load=load)
    print(f"bench: appended {entry['label']} to {PATH.relative_to(REPO)}", file=sys.stderr)


def runs(bench: str | None = None, *, path: Path | None = None) -> list[dict]:
    """The history's runs in the order they were appended (oldest first), of script ``bench`` only
    when given. Example: ``runs("run")[-1]["date"]``."""
    with open(path or PATH, encoding="utf-8") as fh:
        every = [json.loads(line) for line in fh if line.strip()]
    return [r for r in every if bench is None or r["bench"] == bench]
