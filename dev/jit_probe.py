"""What a JIT would buy the tuned path's row-wise passes: a probe, not a part of the lab.

The speed issue allowed a pinned JIT (numba) for the passes that go row by row (layer norm, the softmaxes) if
measurement justified it. This times model.py's row loops for layer norm and for the loss's softmax, compiled by
numba as written (the bits of a plain loop) and with fastmath (sums reordered: other bits), against numpy_fast's
passes on one series B 32 step's arrays, in float32 and float64, taking turns.

    python3 -m pip install numba==0.68.1   # not a requirement of the lab: only this probe uses it
    python3 -m dev.jit_probe               # about a minute

docs/developers.md ("What bounds each size, and what was tried") reports what it found and why numba stays out.

>>> rows = np.array([[1.0, 3.0]])
>>> out, xhat, rstd = np.empty((1, 2)), np.empty((1, 2)), np.empty(1)
>>> layernorm_rows(rows, np.ones(2), np.zeros(2), out, xhat, rstd); out.round(4)
array([[-1.,  1.]])
"""

import argparse
import math
import statistics
import sys
import time

from dev import positive, timed
from oneblock import machine
from oneblock.config import ModelConfig

with machine.needed_by("python3 -m dev.jit_probe"):
    import numpy as np

    from model import EPS
    from oneblock import numpy_fast, numpy_model

SERIES = ModelConfig(vocab=96, d=16, hidden=64, max_len=64)  # the series size
VOCAB, WIDTH = SERIES.vocab, SERIES.d


# ----------------------------------------------------------------------------------------------------------------
# The row loops, as model.py writes them (plain Python here; numba compiles these very functions)


def layernorm_rows(x, g, b, out, xhat, rstd):
    """numpy_fast.layernorm_forward as one loop over the rows of x (M, n): out = g * xhat + b, with xhat and
    rstd = 1 / sqrt(var + EPS) kept, as model.layernorm_forward does it one row at a time."""
    M, n = x.shape
    for r in range(M):
        total = x[r, 0] * 0.0  # 0 in x's dtype: the sums stay in it, as NumPy's do
        for j in range(n):
            total += x[r, j]
        mean = total / n
        squares = total * 0.0
        for j in range(n):
            c = x[r, j] - mean
            xhat[r, j] = c
            squares += c * c
        s = 1.0 / math.sqrt(squares / n + EPS)
        rstd[r] = s
        for j in range(n):
            xhat[r, j] *= s
            out[r, j] = xhat[r, j] * g[j] + b[j]


def softmax_rows(lg, top, z, N):
    """numpy_fast.softmax_blocks as one loop over the rows of the logits lg (M, V), in place: softmax / N, each row's
    largest logit into top and its sum of exponentials into z, as model.loss_and_dlogits does it."""
    M, V = lg.shape
    for r in range(M):
        t = lg[r, 0]
        for j in range(1, V):
            t = max(t, lg[r, j])
        total = t * 0.0
        for j in range(V):
            e = math.exp(lg[r, j] - t)
            lg[r, j] = e
            total += e
        top[r], z[r] = t, total
        scale = 1.0 / (N * total)
        for j in range(V):
            lg[r, j] *= scale


# ----------------------------------------------------------------------------------------------------------------
# Timing


def passes(dtype, B, T, jits):
    """{pass name: {way: function}} for one dtype: each function runs one pass over fresh copies of the same
    inputs; and {pass name: the outputs of each way, to compare}."""
    rng = np.random.default_rng(0)
    params = numpy_model.init_params(SERIES, 3, dtype=dtype)
    ws = numpy_fast.Workspace(params, SERIES, B, T)
    N = B * T
    x = rng.standard_normal((N, WIDTH)).astype(dtype)  # (N, d)
    g, b = (1.0 + 0.1 * rng.standard_normal(WIDTH)).astype(dtype), (0.1 * rng.standard_normal(WIDTH)).astype(dtype)
    logits = (3.0 * rng.standard_normal((N, VOCAB))).astype(dtype)  # (N, V)
    outputs = {"layer norm": {}, "loss softmax": {}}

    def layernorm(way):
        out, xhat, rstd = np.empty((N, WIDTH), dtype), np.empty((N, WIDTH), dtype), np.empty(N, dtype)
        outputs["layer norm"][way] = out
        if way == "numpy":
            return lambda: numpy_fast.layernorm_forward(x, g, b, out, xhat, rstd, ws)
        return lambda: jits[way][0](x, g, b, out, xhat, rstd)

    def softmax(way):
        lg, top, z = np.empty((N, VOCAB), dtype), np.empty(N, dtype), np.empty(N, dtype)
        outputs["loss softmax"][way] = lg

        def run():
            lg[...] = logits  # the pass works in place: the same input every call (a copy, timed alike for all)
            if way == "numpy":
                numpy_fast.softmax_blocks(lg, [slice(0, N)], ws)
            else:
                jits[way][1](lg, top, z, N)
        return run

    ways = ["numpy", *jits]
    return {"layer norm": {w: layernorm(w) for w in ways}, "loss softmax": {w: softmax(w) for w in ways}}, outputs


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    parser.add_argument("--batch", type=positive(int), default=32, help="sequences a step (rows = batch x 64)")
    parser.add_argument("--rounds", type=positive(int), default=9, help="timed rounds of each way (median over them)")
    args = parser.parse_args(argv)
    numba = machine.need("numba", "python3 -m dev.jit_probe")
    machine.use_threads(1, "python3 -m dev.jit_probe")  # one BLAS thread, as train.py's default --threads
    started = time.perf_counter()
    jits = {"numba": [numba.njit(f) for f in (layernorm_rows, softmax_rows)],
            "numba fastmath": [numba.njit(fastmath=True)(f) for f in (layernorm_rows, softmax_rows)]}
    print(f"numba {numba.__version__}; {machine.blas(1)}; rows: {args.batch} x 64")
    print(f"{'pass':14s} {'dtype':8s} {'way':16s} {'us/call':>9s} {'vs numpy':>9s} {'largest |difference|':>22s}")
    for dtype in (np.float32, np.float64):
        table, outputs = passes(dtype, args.batch, 64, jits)
        for name, ways in table.items():
            for run in ways.values():
                run()  # compiles the numba ones (for this dtype), and fills the outputs
            calls = max(1, 20000 // args.batch)
            times = {way: [] for way in ways}
            for _ in range(args.rounds):  # the ways take turns, round by round
                for way, run in ways.items():
                    timed(run, calls)  # a warm-up round of as many calls, then the timed one
                    times[way].append(timed(run, calls) * 1e6)
            base = statistics.median(times["numpy"])
            for way in ways:
                us = statistics.median(times[way])
                diff = float(np.abs(outputs[name][way] - outputs[name]["numpy"]).max())
                print(f"{name:14s} {np.dtype(dtype).name:8s} {way:16s} {us:9.1f} {base / us:8.2f}x {diff:22.2e}")
    print(f"(medians over {args.rounds} rounds; {time.perf_counter() - started:.0f} s with compiling)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
