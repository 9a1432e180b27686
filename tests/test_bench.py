"""bench.py's options that the README's reduced run does not reach: a grown size on every path that grows, and
--against, which times another checkout's backends in the same rounds (here this checkout against itself)."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

pytest.importorskip("numpy")

QUICK = ["--rounds", "1", "--round-seconds", "0.01", "--pause", "0", "--no-torch", "--threads", "1"]


def bench(*args):
    return subprocess.run([sys.executable, str(ROOT / "bench.py"), *QUICK, *args], capture_output=True, text=True,
                          timeout=600)


def rows(stdout):
    """{(size, backend as the table names it): the numbers of its row} of the table bench.py prints."""
    table = stdout.split("rounds x steps\n", 1)[1].split("\n\n", 1)[0]
    found = {}
    for line in table.splitlines():
        words = line.split()
        first_number = next(i for i, word in enumerate(words) if word[0].isdigit())
        found[words[0], " ".join(words[1:first_number])] = words[first_number:]
    return found


def test_a_grown_size_runs_on_both_numpy_paths_and_not_on_the_reference():
    proc = bench("--sizes", "grown-b32")
    assert proc.returncode == 0, proc.stderr
    assert sorted(rows(proc.stdout)) == [("grown-b32", b) for b in ("fast-f32", "fast-f64", "plain-f32", "plain-f64")]


def test_against_another_checkout_times_both_in_the_same_rounds(tmp_path):
    proc = bench("--sizes", "series-b1", "--reference-rounds", "0", "--against", str(ROOT))
    assert proc.returncode == 0, proc.stderr
    found = rows(proc.stdout)
    assert sorted(found) == sorted([("series-b1", b) for b in ("plain-f64", "plain-f32", "fast-f64", "fast-f32")]
                                   + [("series-b1", f"{b} before") for b in ("plain-f64", "plain-f32", "fast-f64",
                                                                              "fast-f32")])
    assert "vs before" in proc.stdout
    for backend in ("plain-f32", "fast-f32"):  # ms, tokens/s, GFLOP/s, %ceil, vs before, rounds x steps
        assert float(found["series-b1", backend][4].rstrip("x")) > 0
        assert len(found["series-b1", f"{backend} before"]) == len(found["series-b1", backend]) - 1  # no ratio
    proc = bench("--sizes", "series-b1", "--against", str(tmp_path))
    assert proc.returncode == 2 and f"--against {tmp_path}: expected a folder holding another checkout's bench.py" in (
        proc.stderr)
