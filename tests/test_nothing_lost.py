"""Nothing lost: every way train.py and bpe.py once replaced or lost a file, or read an input without end. Races, inputs
that are not regular files, sizes that would not fit in memory (under a resource limit, so that a regression cannot
take the machine down) and failing writes (a file-size limit gives a real write error, as a full disk does) run in a
real subprocess; what is at a path a run writes, through the commands in this process."""

import os
import time
from pathlib import Path

import pytest
from run_helpers import (HELD, MOST_MEMORY, ROOT, SHORT, file_size_limit, files_under, held, kinds_under, memory_limit,
                         one_line_error, own_text, ran, run)

import bpe
from oneblock import checkpoint


# ----------------------------------------------------------------------------------------------------------------
# 1. Two runs on one --out: the check and the claim are one step


def test_a_run_held_in_preparation_owns_its_out_so_a_faster_run_cannot_finish_under_it(tmp_path):
    out, waiting, go = tmp_path / "ckpt.safetensors", tmp_path / "waiting", tmp_path / "go"
    with held(HELD, waiting, go, "--out", out, *SHORT, "--seed", "3", cwd=tmp_path) as slow:
        fast = run("train.py", "--out", out, *SHORT, "--seed", "4", cwd=tmp_path)  # before the fix: it finished
        one_line_error(fast, f"{out} is in use by another run (pid ", "train.py")
        assert not out.exists()
    assert slow.returncode == 0, slow.stderr
    assert checkpoint.load_checkpoint(out)["training"]["seed"] == 3  # the slow run's, written once, whole
    left = sorted(p.name for p in tmp_path.iterdir())
    assert left == ["ckpt.best.safetensors", "ckpt.safetensors", "go", "waiting"]  # no lock left


# ----------------------------------------------------------------------------------------------------------------
# 2. The copy of the tokenizer belongs to its checkpoint


TEXT_RUN = ["--vocab-size", "100", "--steps", "4", "--batch", "2", "--seq-len", "16", "--eval-every", "4", "--quiet"]


def test_two_checkpoints_in_one_folder_keep_a_copy_each_and_a_text_named_like_one_is_kept(notes, capsys):
    (notes / "run").mkdir()
    (notes / "run" / "ckpt.tokenizer.json").write_text(own_text(), encoding="utf-8")  # a training text, oddly named
    text = (notes / "run" / "ckpt.tokenizer.json").read_bytes()
    for name, vocab in (("ckpt.a", "100"), ("ckpt.b", "120")):
        args = ["--vocab-size", vocab, *TEXT_RUN[2:]]
        proc = ran("train.py", capsys, "--data", "run/ckpt.tokenizer.json", "--out", f"run/{name}", *args)
        assert proc.returncode == 0, proc.stderr
    # before the fix: both wrote run/ckpt.tokenizer.json, replacing the text, then b's replacing a's
    assert (notes / "run" / "ckpt.tokenizer.json").read_bytes() == text
    for name in ("ckpt.a", "ckpt.b"):
        carried = checkpoint.load_checkpoint(notes / "run" / name)["metadata"][checkpoint.TOKENIZER_KEY]
        assert (notes / "run" / f"{name}.tokenizer.json").read_text(encoding="utf-8") == carried
    assert files_under(notes / "run") == ["ckpt.a", "ckpt.a.tokenizer.json", "ckpt.b", "ckpt.b.tokenizer.json",
                                         "ckpt.best.a", "ckpt.best.b", "ckpt.tokenizer.json"]


# ----------------------------------------------------------------------------------------------------------------
# 3. What is at a path a run writes (train.py's --out, its best checkpoint and the copy of its tokenizer, bpe.py's
# --out): judged before any work, never replaced unless it is the run's kind and --overwrite asks; never an input
# of the run. (Every path atomic.own refuses, a folder, a FIFO, a device and a link among them: tests/test_locks.py.)

TRAIN = ["--data", "notes.txt", "--out", "n.safetensors", *TEXT_RUN]
WRITES = {  # a path a run writes -> (the command, its arguments, the path)
    "--out": ("train.py", TRAIN, "n.safetensors"),
    "best": ("train.py", TRAIN, "n.best.safetensors"),
    "copy": ("train.py", TRAIN, "n.safetensors.tokenizer.json"),
    "bpe.py --out": ("bpe.py", ["--data", "notes.txt", "--vocab-size", "100", "--out", "t.json"], "t.json"),
}
NEVER = "it is never replaced: choose another --out, or remove the file yourself"
NOT_A_CHECKPOINT = "n.best.safetensors, where this run keeps its best checkpoint, exists but is not a checkpoint"
NOT_A_COPY = "n.safetensors.tokenizer.json, where this run keeps the copy of its tokenizer, exists but is not a"


def refused_unprepared(monkeypatch, script, capsys, *args):
    """script run in this process with args, failing the test if the run prepares its data: a refusal is before any
    work."""
    from oneblock import data

    with monkeypatch.context() as patched:
        patched.setattr(data, "prepare", lambda *a, **k: pytest.fail("the data was prepared"))
        return ran(script, capsys, *args)


@pytest.mark.parametrize("where, there, extra, phrases", [
    ("--out", own_text().encode(), [], ["--out n.safetensors exists but is not a checkpoint", NEVER]),
    ("--out", b"", ["--resume"], ["cannot resume: n.safetensors: the file is 0 bytes"]),
    ("best", own_text().encode(), [], [NOT_A_CHECKPOINT, NEVER]),
    ("copy", own_text().encode(), [], [NOT_A_COPY + " tokenizer.json", NEVER]),
    ("bpe.py --out", own_text().encode(), [], ["--out t.json exists but is not a tokenizer.json", NEVER]),
    ("bpe.py --out", b'{"model": {"vocab": {}, "merges": 3}}\n', [],
     ["--out t.json exists but is not a tokenizer.json", NEVER]),
    ("bpe.py --out", (ROOT / "tokenizer.json").read_bytes()[:100] + b"\x00\xff", [],
     ["--out t.json exists but is not a tokenizer.json", NEVER]),
], ids=["out-notes", "out-empty-resume", "best-notes", "copy-notes", "bpe-notes", "bpe-record", "bpe-torn"])
def test_a_file_not_of_the_runs_kind_is_never_replaced(notes, capsys, monkeypatch, where, there, extra, phrases):
    """Refused in one line naming the path, with --overwrite as without it (before the fix: replaced, or the run
    trained and wrote no best file), and left as it was: no lock, no temporary file, no folder."""
    script, args, path = WRITES[where]
    (notes / path).write_bytes(there)
    before = kinds_under(notes)
    for flags in [extra] if "--resume" in extra else [[], ["--overwrite"]]:
        proc = refused_unprepared(monkeypatch, script, capsys, *args, *flags)
        one_line_error(proc, *phrases)
        assert proc.stdout == "" and kinds_under(notes) == before, proc.stdout  # no training line printed


@pytest.mark.parametrize("where, phrase", [
    ("--out", "--out n.safetensors already holds a checkpoint (step 4); pass --resume to continue it, --overwrite to"
              " replace it"),
    ("best", "n.best.safetensors already holds a checkpoint (step 4, the best of an earlier run); pass --overwrite"),
    ("copy", NOT_A_COPY.replace("exists but is not a", "already holds a tokenizer (90 tokens); pass --overwrite")),
    ("bpe.py --out", "--out t.json already holds a tokenizer (90 tokens); pass --overwrite to replace it"),
])
def test_another_runs_file_is_replaced_only_with_overwrite(notes, base_checkpoints, capsys, monkeypatch, where,
                                                           phrase):
    """Another run's checkpoint (of the stories, 4 steps), or an earlier run's tokenizer (90 tokens), whose
    checkpoint is gone."""
    script, args, path = WRITES[where]
    if path.endswith(".json"):
        bpe.Tokenizer.train(own_text(), 90).save(notes / path)
    else:
        (notes / path).write_bytes(base_checkpoints[1]["one-block"])
    before = kinds_under(notes)
    proc = refused_unprepared(monkeypatch, script, capsys, *args)  # before the fix: replaced without a word
    one_line_error(proc, phrase)
    assert kinds_under(notes) == before
    proc = ran(script, capsys, *args, "--overwrite")
    assert proc.returncode == 0, proc.stderr
    if path.endswith(".json"):  # this run's (the copy: the one its checkpoint carries)
        assert (notes / path).read_text(encoding="utf-8") == bpe.Tokenizer.train(own_text(), 100).to_json()
    else:
        assert checkpoint.load_checkpoint(notes / path)["metadata"]["text"] == "notes.txt"  # this run's, of the text


@pytest.mark.parametrize("script, args, phrase", [
    ("train.py", ["--data", "n.safetensors.tokenizer.json", *TRAIN[2:]],
     "--data n.safetensors.tokenizer.json is where this run writes the copy of its tokenizer"),
    ("train.py", ["--data", "n.best.safetensors", *TRAIN[2:]],
     "--data n.best.safetensors is where this run writes its best checkpoint"),
    ("bpe.py", ["--data", "notes.txt", "--vocab-size", "100", "--out", "link.txt", "--overwrite"],
     "--data notes.txt is where this run writes --out link.txt; choose another --out"),  # a link to its input
])
def test_an_input_at_a_path_the_run_writes_is_refused_by_any_name(notes, capsys, script, args, phrase):
    """(--out itself by any name: tests/test_locks.py.) Before the fix: the text replaced by what the run wrote."""
    if args[1] == "notes.txt":
        if os.name != "posix":
            pytest.skip("links are POSIX's")
        (notes / "link.txt").symlink_to("notes.txt")
    else:
        (notes / args[1]).write_text(own_text(), encoding="utf-8")
    before = kinds_under(notes)
    one_line_error(ran(script, capsys, *args), phrase)
    assert kinds_under(notes) == before


# ----------------------------------------------------------------------------------------------------------------
# 4. Every input read once, and only when it is a regular file (a text past its bound: tests/test_own_text.py)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this system")
def test_a_fifo_or_a_device_is_refused_at_once_not_read(notes):
    """Each reader once: a text (bpe.read_text, bpe.py's --data too), a tokenizer, and a checkpoint
    (checkpoint.read_bytes, explore.py's --ckpt too); an --out that is a FIFO is atomic.own's (tests/test_locks.py)."""
    os.mkfifo(notes / "fifo")
    cases = [("train.py", ["--data", "fifo", "--out", "c.safetensors", *TEXT_RUN]),
             ("train.py", ["--data", "notes.txt", "--tokenizer", "fifo", "--out", "c.safetensors", *TEXT_RUN[2:]]),
             ("sample.py", ["--ckpt", "fifo"])]
    if Path("/dev/zero").exists():
        cases.append(("train.py", ["--data", "/dev/zero", "--out", "c.safetensors", *TEXT_RUN]))
    before = files_under(notes)
    for script, args in cases:  # before the fix: a FIFO hung the run, /dev/zero read until the kernel killed it
        proc = run(script, *args, cwd=notes, limit=memory_limit(MOST_MEMORY), timeout=60)
        one_line_error(proc, "not a regular file")
    assert files_under(notes) == before


# ----------------------------------------------------------------------------------------------------------------
# 5. Sizes priced before they are spent


@pytest.mark.parametrize("args", [["--batch", "1000000000"], ["--width", "1000000"], ["--blocks", "1000000"],
                                  ["--max-len", "1000000000"], ["--max-len", "100000000", "--seq-len", "64"],
                                  ["--backend", "python", "--batch", "100000000"],
                                  ["--backend", "numpy-plain", "--dtype", "float64", "--width", "100000"]])
def test_a_size_that_will_not_fit_is_refused_at_once_naming_the_memory(tmp_path, args):
    started = time.monotonic()
    proc = run("train.py", *args, "--out", "c.safetensors", cwd=tmp_path, limit=memory_limit(MOST_MEMORY), timeout=60)
    one_line_error(proc, "needs about", "of memory, more than the", args[-1])
    assert time.monotonic() - started < 30  # (before the fix: minutes of growing memory, or a MemoryError)
    assert files_under(tmp_path) == []


def test_a_grown_model_and_a_run_of_your_text_still_fit_under_two_gigabytes(notes):
    """The sizes are priced against the limit, not refused under it: a grown model of the stories, and the lab's
    one-block model on a text of your own, its tokenizer trained first (bpe.py's own run: tests/test_bpe_out.py)."""
    for args in (["--blocks", "2", "--heads", "4", "--width", "32", *SHORT],
                 ["--data", "notes.txt", *TEXT_RUN[:2], "--steps", "20", "--batch", "8", "--seq-len", "32", "--quiet"]):
        proc = run("train.py", *args, "--out", "c.safetensors", "--overwrite", cwd=notes, limit=memory_limit(2 * 2**30))
        assert proc.returncode == 0, proc.stderr


# ----------------------------------------------------------------------------------------------------------------
# 6. Writes that fail: one line, exit 2, and what was on disk stays as it was


def test_a_checkpoint_that_cannot_be_written_stops_the_run_keeping_the_last_one(tmp_path):
    out = tmp_path / "c.safetensors"
    proc = run("train.py", "--out", out, *SHORT, "--steps", "8", "--stop-at", "4", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    kept = out.read_bytes()
    proc = run("train.py", "--out", out, *SHORT, "--steps", "8", "--resume", cwd=tmp_path,
               limit=file_size_limit(len(kept) // 2))
    one_line_error(proc, f"cannot write {out}", "File too large", "keeps step 4", "--resume")
    assert out.read_bytes() == kept
    assert files_under(tmp_path) == ["c.best.safetensors", "c.safetensors"]  # no temporary file, no lock

    fresh = tmp_path / "fresh" / "c.safetensors"
    proc = run("train.py", "--out", fresh, *SHORT, cwd=tmp_path, limit=file_size_limit(len(kept) // 2))
    one_line_error(proc, "cannot write", "this run wrote no checkpoint")
    assert files_under(tmp_path) == ["c.best.safetensors", "c.safetensors"]


def test_bpe_py_write_errors_are_one_line_and_leave_the_old_file(notes):
    out = notes / "t.json"
    assert run("bpe.py", "--data", "notes.txt", "--vocab-size", "100", "--out", out, cwd=notes).returncode == 0
    old = out.read_bytes()
    proc = run("bpe.py", "--data", "notes.txt", "--vocab-size", "120", "--out", out, "--overwrite", cwd=notes,
               limit=file_size_limit(len(old) // 2))
    one_line_error(proc, f"cannot write {out}", "File too large")
    assert out.read_bytes() == old and files_under(notes) == ["notes.txt", "t.json"]

    proc = run("bpe.py", "--data", "notes.txt", "--vocab-size", "100", "--out", notes / "new" / "sub" / "t.json",
               cwd=notes, limit=file_size_limit(100))
    one_line_error(proc, "File too large")
    assert files_under(notes) == ["notes.txt", "t.json"]  # no folder left behind either
