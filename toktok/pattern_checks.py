"""Two checks of a user's regex that probe strings cannot make: that every code point falls in
some piece, decided over all 1,112,064 code points at once (:func:`uncovered`), and that matching
long runs of one kind of character stays fast in all three engines (:func:`too_slow`).

A regex sees a character only through its atoms: literals, classes, ``\\p{...}``, ``\\s``, ``.``
(and ``\\w`` for ``\\b``). Code points that every atom treats alike (in or out of each, with and
without ``(?i)``) are matched alike everywhere, so one representative of each such class stands
for all of its members: a pattern has tens of classes, not a million code points. A code point
is covered when the pattern matches a non-empty piece starting at it, whatever follows it (and,
for a pattern with ``\\b``, ``\\B`` or ``\\A``, whatever precedes it): the check tries each
representative alone, before each representative, and before each pair of them (after each one
too, for those anchors). That is exact for every alternative that looks at most two characters
past where it starts (a look-ahead such as ``(?!\\S)``, an optional prefix before a class, as
every pattern in use does); the probes and each run's parity check still stand behind it.

The run probes (:func:`too_slow`) are runs of each representative (``aaaa...``, ``a a a ...``)
of ``RUN_CHARS`` characters, split by the ``regex`` package, tiktoken's engine and HF's
Oniguruma in a second process whose CPU time is bounded (``RUN_SECONDS`` per run and engine): a
nested quantifier that backtracks without end, or Oniguruma's ``retry-limit-in-match over``
panic, stays there and is said in one line. The named patterns are trusted and not probed.
Example: ``uncovered(r"[^\\s\\p{N}\\p{Georgian}]+|\\p{N}+|\\s+", [r"[^\\s\\p{N}\\p{Georgian}]", r"\\p{N}", r"\\s"])``
names U+10A0 (GEORGIAN CAPITAL LETTER AN).
"""
from __future__ import annotations

import functools
import json
import subprocess
import sys
import unicodedata
from dataclasses import dataclass

import numpy as np

#: Characters in each run probe (a run of one letter, of spaces, of digits, ... as real text holds).
RUN_CHARS = 20_000
#: CPU seconds one engine may take on one run probe (linear engines take ~10 ms).
RUN_SECONDS = 1.0
#: The most pattern matches the coverage check makes (pairs of contexts are left out beyond it).
MOST_MATCHES = 400_000


@functools.lru_cache(maxsize=1)
def _code_points() -> str:
    """Every code point but the surrogates (which UTF-8 text cannot hold), in order."""
    cp = np.arange(0x110000, dtype=np.uint32)
    return cp[(cp < 0xD800) | (cp > 0xDFFF)].tobytes().decode("utf-32-le")


@functools.lru_cache(maxsize=256)
def _members(atom: str) -> np.ndarray:
    """Which code points (of :func:`_code_points`) the one-character ``atom`` matches, found as
    runs (a class is a few hundred ranges)."""
    import regex

    text = _code_points()
    mask = np.zeros(len(text), dtype=bool)
    for m in regex.finditer(f"(?:{atom})+", text):
        mask[m.start():m.end()] = True
    return mask


@dataclass(frozen=True)
class Classes:
    """The code points a regex cannot tell apart, as classes: a representative of each
    (``reps``), each class's size, each one's first assigned code point (for messages; its
    first code point when none is assigned)."""

    reps: list[str]
    sizes: list[int]
    named: list[str]


def classes(atoms: list[str], *, fold: bool = False, word: bool = False) -> Classes:
    """The classes of code points that the one-character ``atoms`` split them into (``fold``: each
    atom with ``(?i)`` too; ``word``: ``\\w`` too, for ``\\b``). Example: ``len(classes([r"\\s"]).reps) == 2``."""
    preds = sorted(set(atoms) | ({f"(?i:{a})" for a in atoms} if fold else set()) | ({r"\w"} if word else set()))
    text = _code_points()
    words = [np.zeros(len(text), dtype=np.uint64) for _ in range(max(1, (len(preds) + 63) // 64))]
    for k, atom in enumerate(preds):
        words[k // 64] |= _members(atom).astype(np.uint64) << np.uint64(k % 64)
    key = words[0] if len(words) == 1 else np.stack(words, axis=1)
    _, first, inverse, sizes = np.unique(key, return_index=True, return_inverse=True, return_counts=True,
                                         axis=None if len(words) == 1 else 0)
    inverse = inverse.reshape(-1)
    assigned = ~_members(r"\p{Cn}")
    named_at = np.array(first)
    got, at = np.unique(inverse[assigned], return_index=True)
    named_at[got] = np.flatnonzero(assigned)[at]
    return Classes([text[i] for i in first], sizes.tolist(), [text[i] for i in named_at])


def uncovered(regex_text: str, found: Classes) -> str | None:
    """Where ``regex_text`` (as the ``regex`` package and tiktoken read it) leaves a code point in
    no piece: the code point named, the context, and how many code points share its fate; None
    when every code point starts a non-empty match in every context tried (see the module)."""
    import regex

    rx = regex.compile(regex_text)
    reps = found.reps
    lefts = [""] + (reps if regex.search(r"\\[bBA]", regex_text) else [])
    k = len(reps)
    rights = [""] + reps
    if k * len(lefts) * (1 + k + k * k) <= MOST_MATCHES:
        rights += [a + b for a in reps for b in reps]
    bad: list[tuple[int, str, str]] = []
    for ci, c in enumerate(reps):
        for left in lefts:
            for right in rights:
                m = rx.match(left + c + right, len(left))
                if m is not None and m.end() == len(left):
                    return f"empty at {_spelled(found.named[ci] + right)}"
                if m is None:
                    bad.append((ci, left, right))
                    break
            else:
                continue
            break
    if not bad:
        return None
    ci, left, right = min(bad, key=lambda b: (unicodedata.category(found.named[b[0]]) == "Cn", ord(found.named[b[0]])))
    c = found.named[ci]
    others = sum(found.sizes[b[0]] for b in bad) - 1
    where = " in " + _spelled(left + c + right) if left or right else ""
    name = unicodedata.name(c, "")
    return (f"U+{ord(c):04X} {_spelled(c)}{f' ({name})' if name else ''} is in no piece{where}"
            f"{f' (nor are {others:,} other code points)' if others else ''}")


def _spelled(text: str) -> str:
    return "'" + "".join(c if c.isprintable() else repr(c)[1:-1] for c in text) + "'"


def run_probes(found: Classes) -> list[tuple[str, str]]:
    """The run probes, ``(what, text)``: a run of each representative, and each representative
    between spaces and between line ends up to a character that ends nothing."""
    n = RUN_CHARS
    out = []
    for c in found.reps:
        out.append((f"{n:,} x {_spelled(c)}", c * n))
        out.append((f"{_spelled(c + ' ')} x {n // 2:,} then '\\x00'", (c + " ") * (n // 2) + "\x00"))
        out.append((f"{_spelled(c + chr(10))} x {n // 2:,} then '!'", (c + "\n") * (n // 2) + "!"))
    return out


#: The second process of :func:`too_slow`: each engine splits each text, its CPU time bounded;
#: it says which it starts and what went wrong, one line each.
_CHILD = r"""
import json, resource, sys, time
job = json.load(sys.stdin)
texts, limit = job["texts"], job["seconds"]

def say(*parts):
    print(*parts, flush=True)

def regex_engine():
    import regex
    rx = regex.compile(job["regex"])
    return lambda t: rx.findall(t)

def tiktoken_engine():
    import tiktoken
    enc = tiktoken.Encoding("toktok-probe", pat_str=job["regex"], mergeable_ranks={bytes([b]): b for b in range(256)},
                            special_tokens={})
    return lambda t: enc.encode_ordinary(t)

def hf_engine():
    from tokenizers import Regex, pre_tokenizers
    split = pre_tokenizers.Split(Regex(job["hf"]), "isolated")
    return lambda t: split.pre_tokenize_str(t)

for name, make in (("regex", regex_engine), ("tiktoken", tiktoken_engine), ("hf", hf_engine)):
    if name not in job["engines"]:
        continue
    run = make()
    for i, t in enumerate(texts):
        used = time.process_time()
        soft = int(used + limit) + 2
        resource.setrlimit(resource.RLIMIT_CPU, (soft, resource.RLIM_INFINITY))
        say("start", name, i)
        try:
            run(t)
        except BaseException as e:
            say("error", name, i, " ".join(str(e).split())[:120] or type(e).__name__)
            sys.exit(0)
        spent = time.process_time() - used
        if spent > limit:
            say("slow", name, i, round(spent, 2))
            sys.exit(0)
say("done")
"""

_ENGINES = {"regex": "the regex package (toktok's counting)", "tiktoken": "tiktoken's engine",
            "hf": "HF tokenizers' Oniguruma"}


def too_slow(regex_text: str, hf_text: str, found: Classes, *, seconds: float = RUN_SECONDS,
             wait: float = 600.0, engines: tuple[str, ...] = tuple(_ENGINES)) -> str | None:
    """Whether an engine (of ``engines``) cannot split the run probes (:func:`run_probes`) in
    ``seconds`` of CPU each, or fails on one: what and where, in words; None when they split them all."""
    probes = run_probes(found)
    job = json.dumps({"regex": regex_text, "hf": hf_text, "texts": [t for _, t in probes], "seconds": seconds,
                      "engines": list(engines)})
    try:
        r = subprocess.run([sys.executable, "-c", _CHILD], input=job, capture_output=True, text=True, timeout=wait)
        out = r.stdout
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
    except OSError:
        return None  # no second process: the parity check still stands
    lines = [ln.split(" ", 3) for ln in out.splitlines() if ln.strip()]
    if lines and lines[-1][0] == "done":
        return None
    if not lines:
        return None  # the second process could not start its work: the parity check still stands
    kind, engine, i = lines[-1][0], lines[-1][1], int(lines[-1][2])
    what, who = probes[i][0], _ENGINES[engine]
    if kind == "error":
        return f"{who} fails on {what} ({lines[-1][3]})"
    return f"{who} takes more than {seconds:g} s of CPU on {what} (backtracking without end on a long run)"


__all__ = ["Classes", "classes", "uncovered", "too_slow", "run_probes", "RUN_CHARS", "RUN_SECONDS"]
