"""Every entry point without the package it needs: one line naming the package, the script and the install command,
exit status 2, no traceback; and what needs no package still runs without it (run_helpers.run_without makes a
package missing as where it is not installed)."""

import json
import subprocess
import sys

import pytest
from run_helpers import run_without


@pytest.mark.parametrize("blocked, script, args, who", [
    ({"numpy"}, "train.py", ["--steps", "2"], "train.py --backend numpy (the default; --backend python needs nothing)"),
    ({"numpy"}, "sample.py", [], "sample.py --backend numpy (the default; --backend python needs nothing)"),
    ({"torch"}, "sample.py", ["--backend", "torch"], "sample.py --backend torch"),
    ({"numpy"}, "-m dev.compare", [], "python3 -m dev.compare"),
    ({"numpy"}, "-m experiments.plots", ["--steps", "2"], "python3 -m experiments.plots"),
    ({"matplotlib"}, "-m experiments.plots", ["--steps", "2"], "python3 -m experiments.plots"),
    ({"numpy"}, "-m experiments.positions", ["--check"], "python3 -m experiments.positions"),
    ({"numpy"}, "-m experiments.depth", ["--check"], "python3 -m experiments.depth"),
    ({"numpy"}, "-m experiments.scaling", ["--check"], "python3 -m experiments.scaling"),
    ({"scipy"}, "-m experiments.scaling", ["--check"], "python3 -m experiments.scaling"),
    ({"numpy"}, "-m dev.bench", ["--sizes", "series-b1", "--no-torch"], "python3 -m dev.bench"),
    ({"numpy"}, "-m dev.bench_explorer", [], "python3 -m dev.bench_explorer"),
    ({"playwright"}, "-m dev.bench_explorer", [], "python3 -m dev.bench_explorer"),
    ({"numpy"}, "-m experiments.spread", ["--steps", "1"], "python3 -m experiments.spread"),
    ({"threadpoolctl"}, "train.py", ["--steps", "2"], "train.py --backend numpy (the default; --backend python needs"
                                                      " nothing)"),
])
def test_a_missing_package_is_named_with_its_install_command(tmp_path, blocked, script, args, who):
    proc = run_without(blocked, script, *args, cwd=tmp_path)
    (package,) = blocked
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stdout == "" and "Traceback" not in proc.stderr
    assert proc.stderr.startswith(f"error: {who} needs {package}, which is not installed; install it with:"
                                  f" python3 -m pip install -r tests/requirements")
    assert proc.stderr.count("\n") == 1
    assert list(tmp_path.iterdir()) == []  # nothing written before the message


def test_the_standard_library_paths_need_no_package(tmp_path):
    blocked = {"numpy", "torch", "matplotlib", "safetensors", "tokenizers"}
    proc = run_without(blocked, "train.py", "--backend", "python", "--steps", "1", "--batch", "1", "--seq-len", "8",
                       "--val-stories", "2", "--quiet", "--out", tmp_path / "py.safetensors")
    assert proc.returncode == 0, proc.stderr
    proc = run_without(blocked, "sample.py", "--backend", "python", "--ckpt", tmp_path / "py.safetensors",
                       "--tokens", "3")
    assert proc.returncode == 0, proc.stderr
    assert run_without(blocked, "trace_block.py", "--check").returncode == 0
    proc = run_without(blocked | {"scipy"}, "-m experiments.lessons", "--lesson", "skip-paths", "--guess", "0.03")
    assert proc.returncode == 0 and "verdict: right" in proc.stdout, proc.stderr  # a lesson of the first ten
    proc = run_without(blocked | {"scipy"}, "explore.py", "--ckpt", tmp_path / "py.safetensors", "--export",
                       tmp_path / "site")
    assert proc.returncode == 0, proc.stderr
    page = json.loads((tmp_path / "site" / "data" / "lessons.json").read_text(encoding="utf-8"))
    from oneblock.lessons import LESSONS, numpy_lessons  # (here, with NumPy and SciPy: every lesson of the path)

    assert [words["key"] for words in page["lessons"]] == [lesson.key for lesson in LESSONS + numpy_lessons()[0]]
    assert page["lessons"][-1]["key"] == "scaling" and "value" in page["scaling"]  # the ones that need NumPy too


def test_a_worker_that_stops_is_named_not_a_json_error():
    from dev import bench

    proc = subprocess.Popen([sys.executable, "-c", "import sys; sys.exit(3)", "--worker", "numpy-f32", "--size",
                             "series-b1"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    with pytest.raises(SystemExit, match="worker numpy-f32 --size series-b1 stopped with exit status 3"):
        bench.reply(proc)
