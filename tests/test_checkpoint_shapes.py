"""Headers whose numbers cost a careless reader its time, and numbers that float() reads but no checkpoint holds:
each refused by every tool that reads a checkpoint, in a real subprocess, in one line that names it, with exit
status 2. A shape of 3,000,000 twos was multiplied out before its size was checked (2^3,000,000, two minutes of
arithmetic, then "Exceeds the limit (4300 digits)"); a width of 10^4000 made a count too long to print; and
val_loss "1_000" or "-3" was read as a loss.

(tests/test_page_loader.py holds the explorer page to the same refusals.)"""

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from oneblock import checkpoint
from checkpoint_edits import RUNS, edit_json, join_file, split_file, write_bases
from run_helpers import one_line_error

pytest.importorskip("numpy")

ROOT = Path(__file__).resolve().parent.parent
TOOLS = {  # tool -> its command line on the checkpoint at path, a damaged copy of the base checkpoint name
    "sample": lambda name, path: [str(ROOT / "sample.py"), "--ckpt", path, "--tokens", "5"],
    "compare": lambda name, path: ["-m", "dev.compare", "--ckpt", path, "--no-torch", "--batch", "1", "--length", "4"],
    "train": lambda name, path: [str(ROOT / "train.py"), *RUNS[name], "--out", path, "--resume"],
    "explore": lambda name, path: [str(ROOT / "explore.py"), "--ckpt", path, "--export", "site"],
}
LIMIT_S = 60  # a run that takes longer has multiplied out a shape (it took two minutes)
TOOL_S = 5.0  # the most a tool may take to refuse a hostile header, starting Python and NumPy included
DECODE_S = 1.0  # the most checkpoint.decode may take to refuse a shape of 3,000,000 sizes


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    """A folder with notes.txt and the three small checkpoints of checkpoint_edits.RUNS; returns (folder, bytes)."""
    folder = tmp_path_factory.mktemp("shapes")
    return folder, write_bases(folder)


def run(tool, name, path, cwd):
    """tool run on the checkpoint at path in a subprocess: (CompletedProcess, seconds it took)."""
    started = time.monotonic()
    proc = subprocess.run([sys.executable, *TOOLS[tool](name, str(path))], capture_output=True, text=True, cwd=cwd,
                          timeout=LIMIT_S, env={**os.environ, "PYTHONPATH": str(ROOT)})
    return proc, time.monotonic() - started


def long_shape(raw):
    """raw with tensor W1's shape a list of 3,000,000 twos."""
    header, data = split_file(raw)
    header["W1"]["shape"] = [2] * 3_000_000
    return join_file(header, data, resign=True)


@pytest.mark.parametrize("tool", TOOLS)
def test_a_shape_of_three_million_twos_is_refused_at_once(work, tool):
    folder, bases = work
    path = folder / f"long-shape-{tool}.safetensors"
    path.write_bytes(long_shape(bases["one-block"]))
    proc, seconds = run(tool, "one-block", path, folder)
    one_line_error(proc, str(path), "tensor 'W1' has a shape of 3,000,000 sizes, more than the 64 this reader takes")
    print(f"\n{tool}: refused in {seconds:.2f} s")
    assert seconds < TOOL_S, seconds
    assert not (folder / "site").exists()


def test_decode_refuses_a_long_shape_before_multiplying_it(work):
    """In process: the shape's length is bounded before its sizes are looked at, and a product of sizes stops once
    it is past the data (a shape of 65 sizes is refused too, and one whose product passes the data by far)."""
    _, bases = work
    raw = long_shape(bases["one-block"])
    started = time.monotonic()
    with pytest.raises(ValueError, match="has a shape of 3,000,000 sizes, more than the 64"):
        checkpoint.decode(raw)
    seconds = time.monotonic() - started
    print(f"\ndecode refused 3,000,000 sizes in {seconds:.3f} s")
    assert seconds < DECODE_S, seconds
    header, data = split_file(bases["one-block"])
    header["W1"]["shape"] = [1] * 63 + header["W1"]["shape"]  # 65 sizes, the same number of values
    with pytest.raises(ValueError, match="has a shape of 65 sizes"):
        checkpoint.decode(join_file(header, data))
    header["W1"]["shape"] = [10 ** 4000, 10 ** 4000, 0]  # no values: the product is 0, however large the others
    with pytest.raises(ValueError, match=r"covers \d+ bytes, but F32 of shape \(1000.*needs 0"):
        checkpoint.decode(join_file(header, data))
    header["W1"]["shape"] = [2] * 64
    with pytest.raises(ValueError, match=r"tensor 'W1' is F32 of shape \(2, 2, .*, more values than the \d+ bytes of"
                                         r" data hold"):
        checkpoint.decode(join_file(header, data))


def test_a_width_of_ten_to_the_4000_is_refused_naming_the_sizes(work):
    """Its count of numbers has 8,000 digits, more than Python prints: the message says the power of ten instead of
    "Exceeds the limit (4300 digits) for integer string conversion"."""
    folder, bases = work
    path = folder / "wide.safetensors"
    path.write_bytes(edit_json(bases["grown"], "config", lambda c: c.update(d=10 ** 4000)))
    proc, _ = run("sample", "grown", path, folder)
    one_line_error(proc, str(path), "the config's sizes (vocab 96, d 1", "make at least 10^8,", "numbers, but the"
                   " tensors of this file hold")
    assert "Exceeds the limit" not in proc.stderr


@pytest.mark.parametrize("value", ["1_000", "-3", " 2", "+3", "infinity"])
@pytest.mark.parametrize("tool", ["sample", "explore"])
def test_a_loss_that_float_reads_but_no_run_writes_is_refused(work, value, tool):
    """val_loss is written as repr writes a float: digits, a point, an exponent; never a sign, a space or an
    underscore, and a loss is never negative."""
    folder, bases = work
    header, data = split_file(bases["grown"])
    header["__metadata__"]["val_loss"] = value
    path = folder / f"loss-{tool}.safetensors"
    path.write_bytes(join_file(header, data, resign=True))
    proc, _ = run(tool, "grown", path, folder)
    one_line_error(proc, str(path), f"metadata val_loss is {value!r}, expected a finite number of at least 0")
    assert not (folder / "site").exists()
