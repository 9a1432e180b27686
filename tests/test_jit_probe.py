"""jit_probe.py: its row loops compute what numpy_fast's passes compute (run here as plain Python, numba or not),
and without numba it says how to install it and exits 2 before any work."""

import importlib.util
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from dev import jit_probe
from oneblock import numpy_fast, numpy_model

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("dtype, tol", [(np.float32, 1e-5), (np.float64, 1e-13)])
def test_the_row_loops_match_the_numpy_passes(dtype, tol):
    rng = np.random.default_rng(1)
    ws = numpy_fast.Workspace(numpy_model.init_params(jit_probe.SERIES, 3, dtype=dtype), jit_probe.SERIES, B=2, T=5)
    x = rng.standard_normal((10, 16)).astype(dtype)  # (N, d)
    g, b = rng.standard_normal(16).astype(dtype), rng.standard_normal(16).astype(dtype)
    ways = [[np.empty((10, 16), dtype), np.empty((10, 16), dtype), np.empty(10, dtype)] for _ in range(2)]
    numpy_fast.layernorm_forward(x, g, b, *ways[0], ws)
    jit_probe.layernorm_rows(x, g, b, *ways[1])
    for fast, loop in zip(*ways):
        assert np.abs(loop - fast).max() <= tol * np.abs(fast).max()

    logits = (3.0 * rng.standard_normal((10, 96))).astype(dtype)  # (N, V)
    fast, loop = logits.copy(), logits.copy()
    top, z = np.empty(10, dtype), np.empty(10, dtype)
    numpy_fast.softmax_blocks(fast, [slice(0, 10)], ws)
    jit_probe.softmax_rows(loop, top, z, 10)
    assert np.abs(loop - fast).max() <= tol * np.abs(fast).max()
    assert np.array_equal(top, ws.top) and np.abs(z - ws.z).max() <= tol * np.abs(ws.z).max()


@pytest.mark.skipif(importlib.util.find_spec("numba") is not None, reason="numba is installed here")
def test_without_numba_it_says_how_to_install_it():
    run = subprocess.run([sys.executable, "-m", "dev.jit_probe"], capture_output=True, text=True, cwd=ROOT)
    assert run.returncode == 2 and run.stdout == ""
    assert "python3 -m dev.jit_probe needs numba" in run.stderr and "numba==0.68.1" in run.stderr


def test_bad_settings_exit_2_naming_them(capsys):
    with pytest.raises(SystemExit) as e:  # (before numba is asked for: in this process)
        jit_probe.main(["--rounds", "0"])
    err = capsys.readouterr().err
    assert e.value.code == 2 and "argument --rounds: 0 is not greater than 0" in err
