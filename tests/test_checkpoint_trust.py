"""What the tools that read a checkpoint are asked for, in a real subprocess of sample.py, compare.py, train.py
--resume or explore.py under RLIMIT_AS, so that a regression stops there instead of taking the machine. (checkpoint.py's
refusal of each kind of bad file: tests/test_checkpoint.py; hundreds of damaged files through every tool:
tests/test_fuzz_checkpoints.py.)"""

import os
import re
import time

import pytest

from oneblock import checkpoint, export, settings
from checkpoint_edits import RUNS
import run_helpers
from run_helpers import ROOT, file_size_limit, kinds_under, memory_limit, one_line_error, ran

pytest.importorskip("numpy")
if os.name == "nt":
    pytest.skip("these tests set resource limits on their subprocesses (POSIX only)", allow_module_level=True)

LIMIT = 3 << 30  # RLIMIT_AS of the subprocesses that could spend memory: enough for NumPy, far below the machine


def run(tool, *args, cwd, memory=LIMIT, file_size=None):
    """A tool (sample, compare, train, explore) run in a subprocess in cwd, as its command line runs it (compare:
    python3 -m dev.compare, with the lab's folder on the module path), under RLIMIT_AS of memory bytes and, when
    given, RLIMIT_FSIZE of file_size bytes (a write past it fails as on a full disk): (CompletedProcess, seconds it
    took)."""
    def limit():
        memory_limit(memory)()
        if file_size is not None:
            file_size_limit(file_size)()

    started = time.monotonic()
    proc = run_helpers.run("-m dev.compare" if tool == "compare" else f"{tool}.py", *args, cwd=cwd, limit=limit)
    return proc, time.monotonic() - started


def refused(proc, *phrases):
    """Assert that proc refused as run_helpers.one_line_error holds it, in our own "error: ..." line and with nothing
    on stdout; return that line."""
    one_line_error(proc, *phrases)
    assert proc.stdout == "" and proc.stderr.startswith("error: "), proc.stderr
    return proc.stderr


# ----------------------------------------------------------------------------------------------------------------
# Sizes priced before they are spent


@pytest.mark.parametrize("tool, args, phrase", [
    ("compare", ["--no-torch", "--batch", "1000000000"], "--batch 1000000000 --length 63 --blocks 1 --heads 1 needs"),
    ("compare", ["--no-torch", "--blocks", "10000"], "--batch 2 --length 63 --blocks 10000 --heads 1 needs about"),
    ("compare", ["--ckpt", "one-block.safetensors", "--no-torch", "--batch", "1000000000"],
     "--batch 1000000000 --length 63 at the weights of one-block.safetensors (1 block x 1 head) needs about"),
    ("sample", ["--ckpt", "one-block.safetensors", "--tokens", 10 ** 12], "--tokens 1000000000000 needs about"),
])
def test_the_sizes_a_tool_is_asked_for_are_priced_before_any_work(base_checkpoints, tool, args, phrase):
    """These ran for minutes while memory grew; under a 3 GiB limit each is now refused at once, naming the value
    and the memory it needs."""
    folder, _ = base_checkpoints
    proc, seconds = run(tool, *args, cwd=folder)
    line = refused(proc, phrase, "of memory, more than the")
    assert "GiB" in line and seconds < 30


def test_a_checkpoint_larger_than_memory_is_refused_before_it_is_read(tmp_path):
    """A sparse file of 8 GiB, under a 3 GiB address-space limit: read_whole's bound, priced with the memory."""
    path = tmp_path / "huge.safetensors"
    with open(path, "wb") as f:
        f.truncate(8 << 30)
    for tool, args in (("sample", ["--ckpt", path]), ("compare", ["--ckpt", path, "--no-torch"]),
                       ("train", [*RUNS["one-block"], "--out", path, "--resume"]),
                       ("explore", ["--ckpt", path, "--export", tmp_path / "site"])):
        proc, seconds = run(tool, *args, cwd=tmp_path)
        refused(proc, f"{path}: reading it (8.0 GiB) needs about 16.0 GiB of memory, more than the")
        assert seconds < 30
    assert sorted(p.name for p in tmp_path.iterdir()) == ["huge.safetensors"]


# ----------------------------------------------------------------------------------------------------------------
# The settings a checkpoint may record


def test_every_setting_train_py_and_the_page_record_is_known():
    """checkpoint.py cannot import train.py (train imports checkpoint): its tables must cover train.py's settings and
    backends and the explorer page's, or a new setting would make every new checkpoint unreadable."""
    assert set(settings.TRAINING_SETTINGS + settings.TEXT_SETTINGS) <= set(checkpoint.TRAINING_RULES)
    assert set(settings.BACKENDS) | {"explorer"} == set(checkpoint.BACKENDS)
    page = (ROOT / "explorer" / "train.js").read_text(encoding="utf-8")
    defaults = re.search(r"export const DEFAULTS = \{(.*?)\};", page, re.S).group(1)
    keys = re.findall(r"^\s+(\w+):", defaults, re.M) + list(export.PAGE_TRAINING)  # the page's own, and train.py's
    assert len(keys) >= 10 and set(keys) | {"backend", "dtype", "seed"} <= set(checkpoint.TRAINING_RULES), keys


# ----------------------------------------------------------------------------------------------------------------
# explore.py --export: a write that fails is one line, exit 2, and nothing half-written


def test_an_export_that_cannot_be_written_is_one_line_and_leaves_the_old_export(base_checkpoints, tmp_path):
    """A full disk, as RLIMIT_FSIZE makes one: no file may pass 64 KB, so the stories' split.json (over 100 KB) fails
    after the weights and the tokenizer were written beside their old copies. The old export (of the own text)
    stays as it was, file for file, with no temporary file left."""
    folder, _ = base_checkpoints
    site = tmp_path / "site"
    proc, _ = run("explore", "--ckpt", "own-text.safetensors", "--export", site, cwd=folder)
    assert proc.returncode == 0, proc.stderr
    old = kinds_under(site)
    proc, _ = run("explore", "--ckpt", "one-block.safetensors", "--export", site, cwd=folder, file_size=64 << 10)
    refused(proc, f"--export {site}: cannot write {site / 'data' / 'split.json'} (File too large)")
    assert kinds_under(site) == old

    # the same into a folder that did not exist: the folders it made are not left behind
    proc, _ = run("explore", "--ckpt", "one-block.safetensors", "--export", tmp_path / "new" / "site", cwd=folder,
                  file_size=64 << 10)
    refused(proc, "(File too large)")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["site"]

    # and without the limit the export goes through: the stories' files replace the own text's
    proc, _ = run("explore", "--ckpt", "one-block.safetensors", "--export", site, cwd=folder)
    assert proc.returncode == 0 and len(kinds_under(site)["data/split.json"]) > 100_000, proc.stderr


def test_an_export_to_where_no_folder_can_be_is_one_line(base_checkpoints, tmp_path, capsys, monkeypatch):
    """(explore.py run in this process: the subject is where it writes, not what it spends. Every other folder that
    cannot be made, in /proc, /sys or a read-only folder, is atomic.folder_for's, which the export's lock makes:
    tests/test_locks.py::test_a_folder_that_cannot_be_made_or_written_is_one_line.)"""
    folder, _ = base_checkpoints
    monkeypatch.chdir(folder)
    (tmp_path / "file").write_text("x", encoding="utf-8")
    place = tmp_path / "file" / "site"
    refused(ran("explore.py", capsys, "--ckpt", "one-block.safetensors", "--export", place),
            f"--export {place}: ", "cannot create the folder", "(Not a directory)")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file"]
