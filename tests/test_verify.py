"""verify(): passes on a good folder, and names the first string on every kind of disagreement,
with HF's half in this process and in a second one (``verify.hf_side``) alike."""
from __future__ import annotations

import json
import os
import re
import signal
import time
from pathlib import Path

import pytest

from conftest import FIXTURES
from toktok.errors import InputError, ParityError, VocabError
from toktok.formats.common import HF_FILE, TIKTOKEN_FILE
from toktok.formats.tiktoken import write_tiktoken
from toktok.verify import DEFAULT_TEXTS, MAX_SLICE, VerifyReport, hf_path_of, random_slices, special_texts, verify
from toktok.verify.hf_side import BYTES_PER_TOKEN, PROCESS_FROM_TOKENS, Local, Process, open_hf
from toktok.vocab import Vocab

try:  # the tiny BPE trainer and exporter live beside these tests (pytest puts tests/ on sys.path)
    from test_export import SPECIALS, TRAIN_TEXT, _bytes_vocab, export, tiny_vocab
except ImportError:  # tests/ made a package later
    from tests.test_export import SPECIALS, TRAIN_TEXT, _bytes_vocab, export, tiny_vocab


@pytest.fixture(scope="module")
def good_dir(tmp_path_factory) -> Path:
    return export(tiny_vocab(), tmp_path_factory.mktemp("good"))


def _copy(src: Path, dst: Path) -> Path:
    dst.mkdir(parents=True, exist_ok=True)
    for p in src.iterdir():
        (dst / p.name).write_bytes(p.read_bytes())
    return dst


@pytest.fixture(params=["here", "process"])
def side(request):
    """Where ``check`` loads tokenizer.json: this process, or a second one."""
    return request.param


def check(folder: Path, *args, side: str, **kw) -> VerifyReport:
    """``verify`` with HF's half opened as ``side`` says."""
    return verify(folder, *args, hf=open_hf(hf_path_of(folder), process=side == "process"), **kw)


def _edit_tokenizer_json(folder: Path, edit) -> None:
    path = folder / HF_FILE
    doc = json.loads(path.read_text(encoding="utf-8"))
    edit(doc)
    path.write_text(json.dumps(doc, ensure_ascii=False), encoding="utf-8")


def test_default_texts_pass(good_dir, side):
    report = check(good_dir, side=side)
    assert isinstance(report, VerifyReport) and report.ok
    assert report.strings == len(DEFAULT_TEXTS) + len(special_texts(SPECIALS))
    assert report.tokens > 500


def test_default_texts_cover_the_brief():
    joined = "".join(DEFAULT_TEXTS)
    for needle in ["\r\n", "\n\n\n", "\t", "1234567", "3.14159", "DON'T", "we'll", "I'M", "\u00a0",
                   "\u200b", "\u200d", "\u0301", "🇫🇷", "П", "Γ", "ع", "ש", "न", "ก", "中", "한"]:
        assert needle in joined, needle
    assert "a<|endoftext|>b" in special_texts(["<|endoftext|>"])


def test_given_texts_and_slices(good_dir):
    texts = (t for t in [TRAIN_TEXT, "hello world", ""])  # any iterable, empty string included
    builtin = verify(good_dir, []).strings  # the built-in set always runs
    assert builtin >= len(DEFAULT_TEXTS)
    report = verify(good_dir, texts, slices=200, seed=3)
    assert report.strings == builtin + 3 + 200


def test_random_slices_are_seeded_substrings():
    texts = [TRAIN_TEXT, "short", ""]
    a = random_slices(texts, 100, seed=1)
    assert a == random_slices(texts, 100, seed=1)
    assert a != random_slices(texts, 100, seed=2)
    assert all(0 < len(s) <= MAX_SLICE and (s in TRAIN_TEXT or s in "short") for s in a)
    assert random_slices([""], 5) == [] and random_slices(texts, 0) == []


def test_id_difference_names_the_string(good_dir, tmp_path, side):
    # Without merges HF falls back to bytes for every pre-token not in the vocab as a whole.
    bad = _copy(good_dir, tmp_path / "bad")
    _edit_tokenizer_json(bad, lambda d: d["model"].update(merges=[]))
    with pytest.raises(ParityError) as e:
        check(bad, ["x", "x" + "the quick brown fox jumps over the lazy dog. " * 5], side=side)
    msg = str(e.value)
    assert "ids differ on '" in msg and "position" in msg and "tiktoken" in msg
    assert "..." in msg and len(msg) < 400 and "\n" not in msg


def test_vocabulary_mismatch_is_reported(good_dir, tmp_path, side):
    bad = _copy(good_dir, tmp_path / "swap")

    def swap(doc):
        v = doc["model"]["vocab"]
        a, b = "a", "b"
        v[a], v[b] = v[b], v[a]

    _edit_tokenizer_json(bad, swap)
    with pytest.raises(ParityError, match="id 9[78] is"):
        check(bad, ["ab"], side=side)

    bad2 = _copy(good_dir, tmp_path / "short")
    n = len(tiny_vocab().tokens)
    write_tiktoken(Vocab(tiny_vocab().tokens[:-1]), bad2 / TIKTOKEN_FILE)
    with pytest.raises(ParityError, match=f"has {n - 1} ranks but tokenizer.json has {n} vocab entries"):
        check(bad2, ["ab"], side=side)


def test_tiktoken_encoding_ahead_compares_as_batch_by_batch(good_dir, tmp_path, monkeypatch):
    """tiktoken's half encodes the texts in a thread while HF's loads (``_TiktokenSide``), up to
    AHEAD_CHARS characters of them, batch by batch beyond: the same report either way, and the
    same first failure, in the same order (a broken vocabulary before the texts)."""
    import toktok.verify

    texts = ["x", TRAIN_TEXT * 3, "a<|endoftext|>b"]
    bad = _copy(good_dir, tmp_path / "bad")
    _edit_tokenizer_json(bad, lambda d: d["model"].update(merges=[]))
    swap = _copy(good_dir, tmp_path / "swap")
    _edit_tokenizer_json(swap, lambda d: d["model"]["vocab"].update(a=d["model"]["vocab"]["b"], b=d["model"]["vocab"]["a"]))
    seen = []
    for limit in (toktok.verify.AHEAD_CHARS, 0):
        monkeypatch.setattr(toktok.verify, "AHEAD_CHARS", limit)
        got = [verify(good_dir, texts, slices=40, seed=2)]
        for folder in (bad, swap):
            with pytest.raises(ParityError) as e:
                verify(folder, texts, slices=40, seed=2)
            got.append(re.sub(r"id 9[78] is .*", "id 9[78] is ...", str(e.value)))  # (HF's vocab: in any order)
        with pytest.raises(InputError) as e:
            verify(good_dir, ["ok", "bad \ud800 text"])
        seen.append([*got, str(e.value)])
    assert seen[0] == seen[1] and seen[0][0].strings == len(toktok.verify.texts_to_check(SPECIALS, texts, 40, 2)) and "ids differ" in seen[0][1] and "id 9" in seen[0][2]


def test_decode_failure_is_reported(good_dir, tmp_path, side):
    # Without the ByteLevel decoder HF returns the byte-level alphabet ("Ġ" for a space).
    bad = _copy(good_dir, tmp_path / "nodecoder")
    _edit_tokenizer_json(bad, lambda d: d.update(decoder=None))
    with pytest.raises(ParityError, match="HF decode does not round-trip"):
        check(bad, ["a b"], side=side)


def test_lone_surrogate_is_an_input_error(good_dir):
    with pytest.raises(InputError, match=r"text \d+ .*lone surrogate"):
        verify(good_dir, ["ok", "bad \ud800 text"])


def test_missing_folder_is_a_vocab_error(tmp_path):
    with pytest.raises(VocabError):
        verify(tmp_path / "absent")


def _children() -> set[int]:
    import psutil

    return {p.pid for p in psutil.Process().children()}


def test_hf_process_answers_as_this_process_does(good_dir):
    path = good_dir / HF_FILE
    texts = ["hello world", "a<|endoftext|>b", ""]
    before = _children()
    here, there = open_hf(path, process=False), open_hf(path, process=True)
    assert isinstance(here, Local) and isinstance(there, Process)
    proc = there._proc
    assert _children() - before  # the second process runs
    with here, there:
        for call, args in [("vocab_size", ()), ("names_by_id", ()), ("vocab", ()), ("added", ()),
                           ("specials", ()), ("encode", (texts,)), ("token_bytes", (300,)), ("token_bytes", (10**6,))]:
            assert getattr(there, call)(*args) == getattr(here, call)(*args), call
        assert here.names_by_id()[0].startswith("ĀāĂ")  # byte-level names in id order
    # closed: the second process exits on its own, waited for in a thread (a process an earlier
    # test left, such as another tokenizer's, may end meanwhile: only new ones count)
    deadline = time.monotonic() + 10
    while _children() - before and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not _children() - before
    assert proc.wait(timeout=10) == 0  # (it ends at once, without a teardown, but as a success)


def test_hf_side_encodes_as_tokenizers_encode_batch_does(good_dir):
    # (the ids of encode_batch_fast where tokenizers has it: the same, without the offsets)
    from toktok.formats.hf import load_hf
    from toktok.verify import texts_to_check
    from toktok.verify.hf_side import _encode

    tok = load_hf(good_dir)
    texts = texts_to_check(SPECIALS, ["hello world", "a<|endoftext|>b", "  x\n\n y", ""], 40, 0)
    ids, back = _encode(tok, texts)
    assert ids == [e.ids for e in tok.encode_batch(texts, add_special_tokens=False)]
    assert back == tok.decode_batch(ids, skip_special_tokens=False)


def test_hf_encoding_ahead_answers_as_encoding_when_asked(good_dir):
    """What HF's half encodes ahead in a thread is what it answers, batch by batch in order; texts
    asked out of that order, or a failed thread, are encoded when asked; a check that compares
    them passes (its texts are ``texts_to_check``'s)."""
    from toktok.verify import BATCH, texts_to_check

    path = good_dir / HF_FILE
    texts = texts_to_check(SPECIALS, ["hello world", "a<|endoftext|>b", ""] * 100, 50, 0)
    assert len(texts) > BATCH
    with open_hf(path, process=False) as now, open_hf(path, process=False) as ahead:
        ahead.encode_ahead(texts)
        assert ahead.encode(texts[:BATCH]) == now.encode(texts[:BATCH])
        assert ahead._ahead.at == BATCH  # taken from what the thread encoded
        assert ahead.encode(texts[:3]) == now.encode(texts[:3])  # not the next texts: encoded now
        assert ahead._ahead is None
        ahead.encode_ahead(["fine", "bad \ud800 text"])  # tokenizers refuses a lone surrogate
        with pytest.raises(Exception) as here:
            ahead.encode(["fine", "bad \ud800 text"])
        with pytest.raises(type(here.value)):
            now.encode(["fine", "bad \ud800 text"])
    hf = open_hf(path, process=False)
    hf.encode_ahead(texts_to_check(SPECIALS, ["some text"], 40, 3))
    report = verify(good_dir, ["some text"], slices=40, seed=3, hf=hf)
    assert report.strings == len(texts_to_check(SPECIALS, ["some text"], 40, 3))


def test_hf_vocabulary_calls_answer_beside_the_encoding_ahead(good_dir):
    """The vocabulary calls (what the check compares first) do not wait for the texts encoded
    ahead: they answer while the thread still encodes, as without it, and the encodings stay
    what they are; the second process trims its heap after its reply, not before."""
    import threading

    from toktok.verify import BATCH, texts_to_check

    path = good_dir / HF_FILE
    texts = texts_to_check(SPECIALS, ["hello world " * 50, "a<|endoftext|>b"] * 400, 50, 0)
    with open_hf(path, process=False) as now, open_hf(path, process=False) as ahead:
        ahead.load()
        release = threading.Event()
        ahead.encode_ahead([])  # the file is loaded; a thread that holds until released stands in for a long encode
        ahead._ahead._thread.join()
        ahead._ahead = hold = type(ahead._ahead).__new__(type(ahead._ahead))
        hold.texts, hold.at, hold.ids, hold.back = texts, 0, None, None
        hold._thread = threading.Thread(target=lambda: (release.wait(10), hold._run(ahead._tok)), daemon=True)
        hold._thread.start()
        for call in ("vocab_size", "names_by_id", "vocab", "added", "specials", "flags"):
            assert getattr(ahead, call)() == getattr(now, call)(), call
        assert hold._thread.is_alive()  # answered while the encoding ahead had not ended
        release.set()
        assert ahead.encode(texts[:BATCH]) == now.encode(texts[:BATCH])
        assert ahead._ahead.at == BATCH  # taken from what the thread encoded
    with open_hf(path, process=True) as there:
        there.load()
        there.encode_ahead(texts)
        assert there.names_by_id() == now.names_by_id() and there.where == "second process"


def test_the_second_process_encodes_ahead_and_answers_as_encoding_when_asked(good_dir):
    # Process.encode_ahead hands the texts to the second process, which encodes them once the
    # file is loaded; its reply is read with the next call's, and the answers stay in order
    from toktok.verify import BATCH, texts_to_check

    path = good_dir / HF_FILE
    texts = texts_to_check(SPECIALS, ["hello world", "a<|endoftext|>b", ""] * 100, 50, 0)
    with open_hf(path, process=False) as now, open_hf(path, process=True) as there:
        there.load()
        there.encode_ahead(texts)
        assert there.vocab_size() == now.vocab_size()
        assert there.encode(texts[:BATCH]) == now.encode(texts[:BATCH])
        assert there.encode(texts[:3]) == now.encode(texts[:3])  # not the next texts: encoded when asked
        assert there.where == "second process"
        there.encode_ahead(["fine", "bad \ud800 text"])
        with pytest.raises(Exception) as here:
            now.encode(["fine", "bad \ud800 text"])
        with pytest.raises(type(here.value)):
            there.encode(["fine", "bad \ud800 text"])
        assert there.where == "second process"


def test_hf_process_raises_what_this_process_raises(tmp_path):
    bad = tmp_path / HF_FILE
    bad.write_text('{"model": ', encoding="utf-8")
    errors = []
    for process in (False, True):
        with open_hf(bad, process=process) as hf, pytest.raises(VocabError) as e:
            hf.load()  # quietly: the first call that needs the file says why it cannot load
            hf.vocab_size()
        errors.append(str(e.value))
    assert errors[0] == errors[1] and str(bad) in errors[0] and "cannot load it" in errors[0]


def test_hf_process_that_dies_is_replaced_by_this_one(good_dir):
    with open_hf(good_dir / HF_FILE, process=True) as hf:
        hf.load()
        want = hf.encode(["hello world"])
        os.kill(hf._proc.pid, signal.SIGKILL)
        hf._proc.wait()
        assert hf.encode(["hello world"]) == want and hf.vocab_size() > 256
        assert isinstance(hf._local, Local)  # answered here


def test_open_hf_loads_a_large_tokenizer_json_in_a_second_process(good_dir, tmp_path):
    assert isinstance(open_hf(good_dir / HF_FILE), Local)  # a few KB: not worth a process
    big = tmp_path / HF_FILE
    doc = json.loads((good_dir / HF_FILE).read_text(encoding="utf-8"))
    text = json.dumps(doc, ensure_ascii=False, indent=1)
    big.write_text(text + " " * (PROCESS_FROM_TOKENS * BYTES_PER_TOKEN - len(text.encode())), encoding="utf-8")
    with open_hf(big) as hf:
        assert isinstance(hf, Process) and hf.vocab_size() == Local(good_dir / HF_FILE).vocab_size()


def test_a_run_checks_a_large_vocabulary_with_hf_in_a_second_process(tmp_path, monkeypatch):
    """The pipeline opens HF's half before it writes tokenizer.json: in a second process from
    PROCESS_FROM_TOKENS tokens on, opened before the merge loop and started once the loop runs (it
    imports tokenizers on the core the loop leaves idle), here otherwise; the run file says which,
    and both publish a tokenizer that verifies."""
    import duckdb

    import toktok.merge.stage
    import toktok.verify
    from toktok.config import TrainConfig
    from toktok.pipeline import train
    from toktok.rundir import RUN_FILE

    merging, starting = toktok.merge.stage.run, toktok.verify.start
    seen = []
    monkeypatch.setattr(toktok.merge.stage, "run", lambda *a, **k: (seen.append("merge"), merging(*a, **k))[1])
    monkeypatch.setattr(toktok.verify, "start", lambda *a, **k: (
        hf := starting(*a, **k), seen.append(type(hf).__name__ + ("" if getattr(hf, "_proc", None) is None else " started")))[0])
    where = {}
    for name, merges in (("small", 300), ("large", PROCESS_FROM_TOKENS - 256 - 1161 + 50)):
        out = tmp_path / name
        s = train(TrainConfig(sources=[str(FIXTURES)], out=str(out), merges=merges, verify_slices=20, verbose=False))
        assert s.vocab_size >= (PROCESS_FROM_TOKENS if name == "large" else 0) and verify(out).ok
        with duckdb.connect(str(out / RUN_FILE), read_only=True) as con:
            parity = json.loads(con.execute("select value from meta where key = 'parity'").fetchall()[0][0])
        assert parity["ok"] is True and parity["strings"] > 20
        where[name] = parity["hf_tokenizers"]
    assert where == {"small": "this process", "large": "second process"}
    assert seen == ["NoneType", "merge", "Process", "merge"]  # the large one's process started before its merges


def test_a_run_whose_tokenizer_json_lost_a_special_fails_and_publishes_nothing(tmp_path, monkeypatch):
    """The run's check loads tiktoken's half with the run's own specials (it need not wait for
    HF's parse to read them), and holds tokenizer.json's added tokens equal to them: a file that
    lost one fails the run, and nothing is published."""
    import toktok.formats.export
    from toktok.config import TrainConfig
    from toktok.pipeline import train

    writing = toktok.formats.export.write_hf

    def losing_one(vocab, staging, **kw):
        writing(vocab, staging, **kw)
        _edit_tokenizer_json(Path(staging), lambda doc: doc["added_tokens"].pop())

    monkeypatch.setattr(toktok.formats.export, "write_hf", losing_one)
    out = tmp_path / "tok"
    with pytest.raises(ParityError, match="special tokens differ"):
        train(TrainConfig(sources=[str(FIXTURES / "notes.txt")], out=str(out), merges=50,
                          special_tokens=["<|endoftext|>", "<|pad|>"], verbose=False))
    assert not out.exists()


def test_hf_process_ends_with_the_process_that_started_it(good_dir):
    """kill -9 of a run leaves no second process behind: it exits when its stdin closes."""
    import subprocess
    import sys
    import time

    import psutil

    # the second process has answered a call and waits for the next one when its parent dies
    code = ("import sys, time; from toktok.verify.hf_side import Process; p = Process(sys.argv[1]); p.load(); "
            "p.vocab_size(); print(p._proc.pid, flush=True); time.sleep(120)")
    parent = subprocess.Popen([sys.executable, "-c", code, str(good_dir / HF_FILE)], stdout=subprocess.PIPE, text=True)
    child = psutil.Process(int(parent.stdout.readline()))
    assert "toktok.verify.hf_side" in " ".join(child.cmdline())
    parent.kill()
    parent.wait()
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            if child.status() == psutil.STATUS_ZOMBIE:
                break
        except psutil.NoSuchProcess:
            break
        time.sleep(0.05)
    else:
        child.kill()
        pytest.fail("the second process outlived the process that started it")
