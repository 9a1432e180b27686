"""Nothing lost: every way train.py and bpe.py once replaced or lost a file, or read an input without end. Two runs
racing for one --out (one held in its data preparation by a hook, so that the race happens every time), inputs that
are not regular files or are too large, sizes that would not fit in memory (under a resource limit, so that a
regression cannot take the machine down), and writes that fail (a file-size limit gives a real write error, as a
full disk does), each in a real subprocess; the tokenizer's copy beside a checkpoint through train.py in this
process."""

import os
import time
from pathlib import Path

import pytest
from run_helpers import (HELD, MOST_MEMORY, SHORT, file_size_limit, files_under, held, kinds_under, memory_limit,
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


@pytest.fixture
def notes(tmp_path, monkeypatch):
    """tmp_path, the folder the test runs in, with notes.txt in it."""
    (tmp_path / "notes.txt").write_text(own_text(), encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    return tmp_path


TEXT_RUN = ["--vocab-size", "100", "--steps", "4", "--batch", "2", "--seq-len", "16", "--eval-every", "4", "--quiet"]


def test_a_training_text_named_like_a_tokenizer_copy_is_never_replaced(notes, capsys):
    (notes / "notes.tokenizer.json").write_text(own_text(), encoding="utf-8")  # training text, oddly named
    text = (notes / "notes.tokenizer.json").read_bytes()
    proc = ran("train.py", capsys, "--data", "notes.tokenizer.json", "--out", "notes.safetensors", *TEXT_RUN)
    assert proc.returncode == 0, proc.stderr
    assert (notes / "notes.tokenizer.json").read_bytes() == text  # before the fix: replaced by tokenizer JSON
    carried = checkpoint.load_checkpoint(notes / "notes.safetensors")["metadata"][checkpoint.TOKENIZER_KEY]
    assert (notes / "notes.safetensors.tokenizer.json").read_text(encoding="utf-8") == carried


@pytest.mark.parametrize("name, what", [("n.safetensors.tokenizer.json", "the copy of its tokenizer"),
                                        ("n.best.safetensors", "its best checkpoint")])
def test_a_training_text_at_a_name_the_run_writes_beside_its_out_is_refused(notes, capsys, name, what):
    """The names the copy and the best checkpoint are written to, refused before anything is written (--out itself
    by any name: tests/test_locks.py)."""
    (notes / name).write_text(own_text(), encoding="utf-8")
    before = kinds_under(notes)
    proc = ran("train.py", capsys, "--data", name, "--out", "n.safetensors", *TEXT_RUN)
    one_line_error(proc, f"--data {name} is where this run writes {what}")
    assert kinds_under(notes) == before


def test_two_checkpoints_in_one_folder_keep_a_copy_each(notes, capsys):
    for name, vocab in (("ckpt.a", "100"), ("ckpt.b", "120")):
        args = ["--vocab-size", vocab, *TEXT_RUN[2:]]
        proc = ran("train.py", capsys, "--data", "notes.txt", "--out", f"run/{name}", *args)
        assert proc.returncode == 0, proc.stderr
    for name in ("ckpt.a", "ckpt.b"):  # before the fix: both wrote run/ckpt.tokenizer.json, b's replacing a's
        carried = checkpoint.load_checkpoint(notes / "run" / name)["metadata"][checkpoint.TOKENIZER_KEY]
        assert (notes / "run" / f"{name}.tokenizer.json").read_text(encoding="utf-8") == carried
    assert files_under(notes / "run") == ["ckpt.a", "ckpt.a.tokenizer.json", "ckpt.b", "ckpt.b.tokenizer.json",
                                         "ckpt.best.a", "ckpt.best.b"]


def test_the_copy_is_replaced_by_the_checkpoints_rules(notes, capsys):
    out, copy = notes / "n.safetensors", notes / "n.safetensors.tokenizer.json"
    copy.write_text("my own notes, not a tokenizer\n", encoding="utf-8")
    for extra in ([], ["--overwrite"]):  # a file there that is not a tokenizer is never replaced
        proc = ran("train.py", capsys, "--data", "notes.txt", "--out", out, *TEXT_RUN, *extra)
        one_line_error(proc, "exists but is not a tokenizer.json", "it is never replaced")
        assert copy.read_text(encoding="utf-8") == "my own notes, not a tokenizer\n" and not out.exists()

    bpe.Tokenizer.train(own_text(), 90).save(copy)  # an earlier run's copy, whose checkpoint is gone
    earlier = copy.read_bytes()
    proc = ran("train.py", capsys, "--data", "notes.txt", "--out", out, *TEXT_RUN)
    one_line_error(proc, "already holds a tokenizer", "--overwrite")
    assert copy.read_bytes() == earlier and not out.exists()
    proc = ran("train.py", capsys, "--data", "notes.txt", "--out", out, *TEXT_RUN, "--overwrite")
    assert proc.returncode == 0, proc.stderr
    carried = checkpoint.load_checkpoint(out)["metadata"][checkpoint.TOKENIZER_KEY]
    assert copy.read_text(encoding="utf-8") == carried != earlier.decode()


# ----------------------------------------------------------------------------------------------------------------
# 3. Every input read once, only when it is a regular file, and only up to a bound


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this system")
def test_a_fifo_or_a_device_is_refused_at_once_not_read(notes):
    os.mkfifo(notes / "fifo")
    """Each reader once: a text (bpe.read_text, bpe.py's --data too), a tokenizer, and a checkpoint
    (checkpoint.read_bytes, explore.py's --ckpt too); an --out that is a FIFO is atomic.own's (tests/test_locks.py)."""
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


def test_a_text_past_the_bound_is_refused_before_it_is_read(tmp_path):
    """bpe.read_text's bound, which bpe.py's --data is read with too."""
    big = tmp_path / "big.txt"
    with open(big, "wb") as f:  # a sparse file: no disk or memory spent on it
        f.truncate(bpe.MOST_TEXT + 1)
    proc = run("train.py", "--data", big, "--out", "c.safetensors", *TEXT_RUN, cwd=tmp_path,
               limit=memory_limit(MOST_MEMORY), timeout=60)
    one_line_error(proc, f"is {bpe.MOST_TEXT + 1:,} bytes, more than the {bpe.MOST_TEXT:,} bytes")
    assert files_under(tmp_path) == ["big.txt"]


# ----------------------------------------------------------------------------------------------------------------
# 4. Sizes priced before they are spent


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
