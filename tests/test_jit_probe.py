"""jit_probe.py: its row loops compute what numpy_fast's passes compute (run here as plain Python, numba or not),
and without numba it says how to install it and exits 2 before any work."""

import numpy as np
import pytest

from dev import jit_probe
from oneblock import numpy_fast, numpy_model
from run_helpers import run_without


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


def test_without_numba_it_says_how_to_install_it():
    run = run_without({"numba"}, "-m dev.jit_probe")
    assert run.returncode == 2 and run.stdout == ""
    assert "python3 -m dev.jit_probe needs numba" in run.stderr and "numba==0.68.1" in run.stderr
