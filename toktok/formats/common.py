"""What the two formats share: the names of the output files, where the files of a vocabulary
are found (an output folder, a ``.tiktoken`` file, a ``NAME.toktok`` companion folder), writing a
file whole (``write_atomic``), forcing files to disk in a thread (``Syncing``) and reading a JSON
file with an error that names it.
Example: ``find_tiktoken("out/demo") == Path("out/demo/tokenizer.tiktoken")``.
"""
from __future__ import annotations

import json
import os
import threading
from pathlib import Path

from ..errors import OutputError, VocabError
from ..rundir import COMPANION_SUFFIX, companion_name
from ..vocab import Vocab


TIKTOKEN_FILE = "tokenizer.tiktoken"
HF_FILE = "tokenizer.json"
HF_CONFIG_FILE = "tokenizer_config.json"
HF_SPECIAL_MAP_FILE = "special_tokens_map.json"
#: toktoktok's plain special-token list, looked for in a .tiktoken file's folder.
SPECIALS_TXT = "special_tokens.txt"


def write_atomic(path: Path, data: bytes | list, *, sync: bool = True) -> None:
    """Write ``data`` (bytes, or a list of bytes-like parts written one after the other) to a
    temporary name beside ``path`` and rename it over ``path``.

    Readers never see a half-written file; the temporary is removed on failure. ``sync=False``:
    not forced to disk before the rename (a file of a staging folder that another process reads
    at once; :func:`synced` forces it before the folder is published).
    """
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        with open(tmp, "wb") as f:
            f.writelines(data) if isinstance(data, list) else f.write(data)
            f.flush()
            if sync:
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as e:
        try:
            tmp.unlink()
        except OSError:
            pass
        raise OutputError(f"{path}: cannot write ({e.strerror or e}); check the folder exists and is writable") from None


def synced(*paths: Path) -> None:
    """Each file forced to disk (what :func:`write_atomic` with ``sync=False`` left to the page
    cache); OSError as writing it would raise."""
    for p in paths:
        fd = os.open(p, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


class Syncing:
    """``paths`` forced to disk (:func:`synced`) in a thread, while the run goes on (files of a
    staging folder, published later); ``wait()`` joins it and raises the OSError forcing them
    raised. Example: ``s = Syncing([folder / "tokenizer.json"]); ...; s.wait()``."""

    def __init__(self, paths: list[Path]) -> None:
        self._error: OSError | None = None
        self._thread = threading.Thread(target=self._run, args=(list(paths),), name="toktok-export-sync", daemon=True)
        self._thread.start()

    def _run(self, paths: list[Path]) -> None:
        try:
            synced(*paths)
        except OSError as e:
            self._error = e

    def wait(self) -> None:
        self._thread.join()
        if self._error is not None:
            raise self._error


def checked_vocab(vocab: Vocab) -> Vocab:
    """``vocab`` after ``Vocab.check``, before either format writes it."""
    # tiktoken panics on a missing single byte and HF silently drops duplicates: refuse both up front.
    vocab.check()
    return vocab


def read_json(path: str | os.PathLike):
    """The parsed JSON of a vocabulary file; VocabError naming the file when unreadable or invalid."""
    p = Path(path)
    try:
        return json.loads(p.read_bytes())
    except OSError as e:
        raise VocabError(f"{p}: cannot read ({e.strerror or e})") from None
    except ValueError as e:
        raise VocabError(f"{p}: not valid JSON ({e}); fix the file or give another (a Hugging Face "
                         "tokenizer.json, a .tiktoken)") from None


def companion_tiktoken(folder: Path) -> Path | None:
    """The ``.tiktoken`` beside a ``NAME.toktok`` folder (where a run written into a folder toktok
    does not own keeps its other outputs): ``NAME.tiktoken``, else ``NAME``; None if neither."""
    if not folder.name.endswith(COMPANION_SUFFIX) or len(folder.name) == len(COMPANION_SUFFIX):
        return None
    stem = folder.name[: -len(COMPANION_SUFFIX)]
    for name in (stem + ".tiktoken", stem):
        if (folder.parent / name).is_file():
            return folder.parent / name
    return None


def hf_file_of(tt_path: Path) -> Path:
    """The ``tokenizer.json`` that goes with a ``.tiktoken``: in its ``NAME.toktok`` folder when it
    has one (an ``output:`` into a folder toktok does not own), else beside it."""
    comp = tt_path.parent / companion_name(tt_path.name) / HF_FILE
    return comp if comp.is_file() else tt_path.parent / HF_FILE


def find_tiktoken(folder: str | os.PathLike) -> Path:
    """The ``.tiktoken`` file of an output folder: ``tokenizer.tiktoken``, else the only ``*.tiktoken``,
    else (a ``NAME.toktok`` folder) ``NAME.tiktoken`` beside it.

    Raises VocabError when there is none or several.
    """
    folder = Path(folder)
    if (folder / TIKTOKEN_FILE).is_file():
        return folder / TIKTOKEN_FILE
    found = sorted(p for p in folder.glob("*.tiktoken") if p.is_file())
    if len(found) == 1:
        return found[0]
    if not found and (beside := companion_tiktoken(folder)) is not None:
        return beside
    if not found:
        raise VocabError(f"{folder}: no .tiktoken file here; pass a toktok output folder or a .tiktoken file")
    raise VocabError(f"{folder}: several .tiktoken files ({', '.join(p.name for p in found)}); pass one of them")


def folder_and_tiktoken(path: Path) -> tuple[Path, Path]:
    if path.is_dir():
        return path, find_tiktoken(path)
    return path.parent, path
