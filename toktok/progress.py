"""How a run reports progress: Rich bars, plain lines, JSON lines, nothing, or a callback.

The pipeline calls ``progress(stage, done, total)`` as it goes: ``count``/``sample`` in bytes of
the sources (``total`` None when their sizes are not known), ``merge`` in merges, ``export`` and
``insight`` in steps, ``verify`` in strings, and on the first run after an install ``compile`` (0
then 1 step: the merge loop waiting for its kernels); a phase's name follows the stage's in a run
of several phases (``count english``). :func:`reporter` turns ``--progress`` (``progress=``) into such a
callable that also hears the run's end (``finish(result)``, ``fail(error)``):

- ``rich``: a bar per stage with its rate and time left (the command line's default on a terminal);
- ``plain``: a line per stage every few seconds once it has run a second, then one when it ends,
  no ANSI (the default elsewhere);
- ``json``: JSON lines on stderr for machines, one per second at most per stage plus its first and
  last, then one with the run's summary (see :class:`JsonLines` for the schema);
- ``none``: nothing; a callable: called as the pipeline calls it.

Every line and bar has the stage's rate and ETA from what it did so far (``eta`` null until it is
known). Example: ``with reporter("json") as rep: rep("merge", 10, 100)``.
"""
from __future__ import annotations

import dataclasses
import json
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable, TextIO

#: Seconds between two JSON lines of one stage (its first and last line come when they come).
JSON_SECONDS = 1.0
#: Seconds between two plain lines of one stage; and how long a stage runs before its first.
PLAIN_SECONDS = 5.0
PLAIN_FIRST = 1.0

#: The unit of each stage's ``done`` and ``total``.
UNITS = {"count": "bytes", "sample": "bytes", "merge": "merges", "compile": "steps", "export": "steps",
         "insight": "steps", "verify": "strings"}


def unit_of(stage: str) -> str:
    """The unit of a stage's counts: ``unit_of("count english") == "bytes"``."""
    return UNITS.get(stage.split(" ", 1)[0], "steps")


class Reporter:
    """Progress of one run: called as ``rep(stage, done, total)``; ``finish(result)`` after it
    succeeded, ``fail(error)`` after it failed, ``close()`` when it ends (before either; ``with``
    closes it). This base reports nothing (``--progress none``)."""

    def __call__(self, stage: str, done: int, total: int | None) -> None:
        pass

    def finish(self, result: Any) -> None:
        pass

    def fail(self, error: BaseException) -> None:
        pass

    def close(self) -> None:
        pass

    def __enter__(self) -> Reporter:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class _Callback(Reporter):
    """A user's ``progress(stage, done, total)``."""

    def __init__(self, fn: Callable[[str, int, int | None], None]) -> None:
        self.fn = fn

    def __call__(self, stage, done, total):
        self.fn(stage, done, total)


@dataclasses.dataclass
class _Stage:
    """One stage as a reporter sees it: when it began, its counts, and what was last shown."""

    t0: float
    start: int  # done at its first report (a resumed stage starts part way)
    still: float = 0.0  # when it last reported no move from start (a stage may wait before it moves)
    last: float = 0.0  # when it last reported: where a stage that never reaches its total ended
    done: int = 0
    total: int | None = None
    shown_at: float = -1.0
    shown: tuple | None = None  # (done, total) of the last line
    ended: bool = False

    def update(self, done: int, total: int | None, now: float) -> None:
        self.done = max(self.done, int(done))  # never back: a stream's done only grows
        self.total = None if total is None else int(total)
        self.last = now
        if self.done == self.start:
            self.still = now

    def figures(self, now: float) -> tuple[float, float | None, float | None]:
        """Seconds since it began, its rate (per second since it began to move; None until it
        moved) and the seconds left at that rate (0 once done; None while the rate or the total
        is not known)."""
        elapsed = now - self.t0
        moved = self.done - self.start
        rate = moved / (now - self.still) if now > self.still and moved > 0 else None
        if self.total is not None and self.done >= self.total:
            return elapsed, rate, 0.0
        eta = (self.total - self.done) / rate if rate and self.total is not None else None
        return elapsed, rate, eta

    @property
    def complete(self) -> bool:
        return self.total is not None and self.done >= self.total


class _Lines(Reporter):
    """A reporter that writes lines: keeps each stage's state, under a lock (the pipeline reports
    from one thread, but a caller's threads may too)."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self._stream = stream
        self.stages: dict[str, _Stage] = {}
        self.lock = threading.Lock()

    @property
    def stream(self) -> TextIO:
        return self._stream if self._stream is not None else sys.stderr  # where stderr is at the time

    def write(self, line: str) -> None:
        s = self.stream
        s.write(line + "\n")
        s.flush()

    def __call__(self, stage, done, total):
        with self.lock:
            now = time.monotonic()
            st = self.stages.get(stage)
            if st is None:
                for name, other in self.stages.items():  # what the stages before it got to
                    if not other.ended:
                        self.flush(name, other, now)
                st = self.stages[stage] = _Stage(t0=now, start=int(done), still=now)
                st.update(done, total, now)
                self.begin(stage, st, now)
                return
            st.update(done, total, now)
            self.step(stage, st, now)

    def close(self) -> None:
        with self.lock:
            now = time.monotonic()
            for name, st in self.stages.items():
                if not st.ended:
                    self.end(name, st, now)

    def begin(self, stage: str, st: _Stage, now: float) -> None: ...

    def step(self, stage: str, st: _Stage, now: float) -> None: ...

    def flush(self, stage: str, st: _Stage, now: float) -> None:
        """Another stage began: this one has likely ended (a stage may wait inside another,
        as the merge loop waits for its kernels to compile)."""

    def end(self, stage: str, st: _Stage, now: float) -> None:
        st.ended = True


class JsonLines(_Lines):
    """``--progress json``: one JSON object a line on stderr.

    Progress: ``{"event": "progress", "stage": "merge", "phase": null, "unit": "merges", "done": 120,
    "total": 30000, "rate": 2500.0, "eta": 11.9, "elapsed": 0.048}``: ``stage`` without the phase
    (``phase``: its name in a run of several phases, else null); ``rate`` per second and ``eta`` in
    seconds, null while not known; ``elapsed`` seconds since the stage began. ``done`` never goes
    back. At most one line a second per stage, plus its first and its last (done = total, or its
    last figures once the next stage begins or the run ends).
    The end: ``{"event": "summary", ...}`` with the printed summary's figures (``out``,
    ``tiktoken``, ``files``, ``vocab_size``, ``merges_learned``, ``merges_requested``,
    ``reused_merges``, ``words``, ``docs``, ``text_bytes``, ``seconds`` per stage,
    ``parity_strings``, ``warnings``, ``phases``, ``specials``, ``reserved``, ``warm_start``), or
    ``{"event": "error", "error": "ConfigError", "message": "...", "exit_code": 2}``.
    """

    def line(self, stage: str, st: _Stage, now: float) -> None:
        elapsed, rate, eta = st.figures(now)
        name, _, phase = stage.partition(" ")
        self.write(json.dumps({"event": "progress", "stage": name, "phase": phase or None, "unit": unit_of(stage),
                               "done": st.done, "total": st.total, "rate": _round(rate), "eta": _round(eta),
                               "elapsed": round(elapsed, 3)}, ensure_ascii=False))
        st.shown_at, st.shown = now, (st.done, st.total)

    def begin(self, stage, st, now):
        self.line(stage, st, now)
        if st.complete:
            st.ended = True

    def step(self, stage, st, now):
        if st.ended or (st.done, st.total) == st.shown:
            return
        if st.complete:  # its last line
            self.line(stage, st, now)
            st.ended = True
        elif now - st.shown_at >= JSON_SECONDS:
            self.line(stage, st, now)

    def flush(self, stage, st, now):
        if (st.done, st.total) != st.shown:
            self.line(stage, st, now)

    def end(self, stage, st, now):
        self.flush(stage, st, now)
        st.ended = True

    def finish(self, result):
        self.write(json.dumps({"event": "summary", **summary_of(result)}, ensure_ascii=False, default=str))

    def fail(self, error):
        self.write(json.dumps(error_of(error), ensure_ascii=False))


class PlainLines(_Lines):
    """``--progress plain``: ``toktok: merge 1,200 of 30,000 merges (4%), 2,500/s, 12 s left``,
    a line per stage every ``PLAIN_SECONDS`` once it has run ``PLAIN_FIRST``, and one when a stage
    that printed ends (``toktok: merge done: 30,000 merges in 14.2 s``); nothing for a stage shorter
    than that. No colours, no cursor moves."""

    def step(self, stage, st, now):
        if st.ended:
            return
        if st.complete:
            self.end(stage, st, now)
        elif now - st.t0 >= PLAIN_FIRST and (st.shown is None or now - st.shown_at >= PLAIN_SECONDS):
            elapsed, rate, eta = st.figures(now)
            of = f" of {_amount(st.total, stage)}" if st.total is not None else ""
            pct = f" ({100 * st.done / st.total:.0f}%)" if st.total else ""
            left = f", {_seconds(eta)} left" if eta is not None else ""
            self.write(f"toktok: {stage} {_amount(st.done, stage, unit=not of)}{of}{pct}"
                       f"{', ' + _rate(rate, stage) if rate else ''}{left}")
            st.shown_at, st.shown = now, (st.done, st.total)

    def end(self, stage, st, now):
        if st.shown is not None:
            # timed to its last report: a stage short of its total is said only when the run ends
            self.write(f"toktok: {stage} done: {_amount(st.done, stage)} in {_seconds(st.last - st.t0)}")
        st.ended = True


class RichBars(Reporter):
    """``--progress rich``: a Rich bar per stage on ``console`` (stderr), with its rate and time
    left; the bars go when the run ends."""

    def __init__(self, console=None) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, Progress, TaskProgressColumn, TextColumn, TimeRemainingColumn

        console = console or Console(stderr=True, markup=False, emoji=False, highlight=False)
        self.bar = Progress(TextColumn("{task.description}", markup=False), BarColumn(), TaskProgressColumn(),
                            TextColumn("{task.fields[rate]}"), TimeRemainingColumn(), console=console,
                            transient=True)
        self.tasks: dict[str, Any] = {}
        self.bar.start()

    def __call__(self, stage, done, total):
        from .insight.report import printable

        if stage not in self.tasks:
            self.tasks[stage] = self.bar.add_task(printable(stage), total=total, rate="")
        t = self.bar.tasks[self.tasks[stage]]
        el = t.elapsed or 0
        rate = _rate(done / el, stage) if el > 0 and done else ""
        self.bar.update(self.tasks[stage], completed=done, total=total, rate=rate)

    def close(self):
        self.bar.stop()


def reporter(progress: str | Callable | None, *, console=None, stream: TextIO | None = None) -> Reporter:
    """The reporter of ``--progress`` / ``progress=``: ``rich``, ``plain``, ``json``, ``none``
    (or None), or a callable ``progress(stage, done, total)``; ``console`` is the Rich console of
    the bars, ``stream`` where lines go (default: stderr at the time). Values are checked by the
    option (:data:`toktok.options.OPTIONS`) before they come here."""
    if progress is None or progress == "none":
        return Reporter()
    if callable(progress):
        return _Callback(progress)
    if progress == "json":
        return JsonLines(stream)
    if progress == "plain":
        return PlainLines(stream)
    if progress == "rich":
        return RichBars(console)
    raise ValueError(f"progress {progress!r}")  # the option's check lets no other through


def reported(progress: str | Callable | None, work: Callable, *, console=None):
    """``work(report)`` with the reporter of ``progress`` (as :func:`reporter`): closed when the
    work ends, then told the error (raised again) or the result (returned)."""
    rep = reporter(progress, console=console)
    try:
        try:
            result = work(rep)
        finally:
            rep.close()
    except BaseException as e:
        rep.fail(e)
        raise
    rep.finish(result)
    return result


def summary_of(result: Any) -> dict:
    """The run's summary as JSON values: a ``TrainSummary``'s (or ``TrainResult``'s, or
    ``toktok count``'s ``CountResult``'s) fields, paths as strings, seconds rounded to the millisecond."""
    d = {f.name: getattr(result, f.name) for f in dataclasses.fields(result)}
    if "phases" in d:
        d["phases"] = [dataclasses.asdict(p) for p in d["phases"] or []]
        for p in d["phases"]:
            p["seconds"] = {k: round(v, 3) for k, v in p["seconds"].items()}
    seconds = d.get("seconds")
    d["seconds"] = round(seconds, 3) if isinstance(seconds, float) else \
        {k: round(v, 3) for k, v in (seconds or {}).items()}
    return json.loads(json.dumps(d, default=lambda o: str(o) if isinstance(o, Path) else repr(o)))


def error_of(error: BaseException) -> dict:
    """How a failed run ends in JSON: the error's type, its one-line message and the exit code."""
    from .errors import ToktokError, one_line

    if isinstance(error, KeyboardInterrupt):
        return {"event": "error", "error": "KeyboardInterrupt", "message": "interrupted", "exit_code": 130}
    code = error.exit_code if isinstance(error, ToktokError) else 1
    return {"event": "error", "error": type(error).__name__, "message": one_line(error), "exit_code": code}


def say_error(error: BaseException) -> None:
    """An error found before a command made its reporter, as the JSON stream's one line (stderr)."""
    print(json.dumps(error_of(error), ensure_ascii=False), file=sys.stderr, flush=True)


def _round(v: float | None) -> float | None:
    return None if v is None else round(v, 3)


def _amount(n: int | None, stage: str, unit: bool = True) -> str:
    if n is None:
        return "?"
    u = unit_of(stage)
    if u == "bytes":
        return f"{n / 1e6:,.1f} MB"
    return f"{n:,} {u}" if unit else f"{n:,}"


def _rate(rate: float | None, stage: str) -> str:
    if not rate:
        return ""
    return f"{rate / 1e6:,.1f} MB/s" if unit_of(stage) == "bytes" else f"{rate:,.0f}/s"


def _seconds(s: float) -> str:
    return f"{s:.1f} s" if s < 60 else f"{int(s // 60)} min {int(s % 60)} s"


__all__ = ["Reporter", "JsonLines", "PlainLines", "RichBars", "reporter", "summary_of", "error_of", "say_error", "unit_of",
           "UNITS"]
