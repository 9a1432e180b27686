"""Benchmark (not a test): time one full training step (forward + loss + backward of every parameter) for the
reference `model.py`, the NumPy path in float64 and float32, and PyTorch eager autograd in float32 and float64.

    python3 bench.py                                  # every size, every backend, a few minutes
    python3 bench.py --sizes series-b32 --rounds 5 --no-torch --json bench.json

How it measures, and why:
- Each backend runs in its own worker process, and the NumPy workers never import torch: importing torch changes
  glibc's allocator thresholds, which would hide the page-fault cost a NumPy training loop really pays.
- The workers take turns round by round (only one runs at a time), so a busy phase of this shared machine hits
  every backend alike; a short pause between turns lets the previous worker's BLAS/OpenMP threads stop spinning.
  Each turn runs one untimed step, then enough timed steps to last about --round-seconds.
- Reported: the median over rounds of the time per step, tokens per second (B * T per step), achieved GFLOP/s
  counted as 6 x (non-embedding parameters) + 6 x T x d per token, and that as a share of NumPy's own 2048 x 2048
  matmul rate in the same dtype (the "ceiling", measured in a torch-free worker).
- The reference runs one sequence at a time (B = 1 at length T, whatever B the size has), a few rounds only; at
  the large size it is skipped (minutes per step).

Shape legend: B = sequences per step, T = positions, d = width, H = hidden width, V = vocabulary, L = max_len.
"""

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time

import machine

# ----------------------------------------------------------------------------------------------------------------
# Sizes and backends

SIZES = {  # name -> model and batch config
    "series-b1": {"V": 96, "d": 16, "H": 64, "L": 64, "B": 1, "T": 63},
    "series-b32": {"V": 96, "d": 16, "H": 64, "L": 64, "B": 32, "T": 64},
    "large": {"V": 4096, "d": 128, "H": 512, "L": 256, "B": 16, "T": 256},
}
BACKENDS = ["reference", "numpy-f64", "numpy-f32", "torch-f64", "torch-f32"]
SEED = 3  # parameters and token IDs are drawn from this seed, identically in every worker


def flops_per_token(cfg):
    """Training FLOPs per token: 6 x non-embedding parameters + 6 x T x d (attention).

    >>> flops_per_token(SIZES["series-b32"]), flops_per_token(SIZES["large"])
    (35424, 4555008)
    """
    V, d, H = cfg["V"], cfg["d"], cfg["H"]
    non_embedding = 6 * d + 4 * d * d + d * H + H + H * d + d + d * V + V
    return 6 * non_embedding + 6 * cfg["T"] * d


# ----------------------------------------------------------------------------------------------------------------
# Worker side: one backend, one size; steps on request


def make_inputs(cfg):
    """Parameters (dict of float64 arrays, the reference's names and shapes) and IDs, targets (B, T)."""
    import numpy as np

    import model

    rng = np.random.default_rng(SEED)
    params = {}
    shapes = model.param_shapes(cfg["V"], cfg["d"], cfg["H"], cfg["L"])
    for name, shape in shapes.items():
        if len(shape) == 2:
            params[name] = rng.normal(0.0, 0.02, shape)  # (rows, cols)
        else:
            params[name] = np.full(shape, 1.0 if name.endswith("_g") else 0.0)  # (n,)
    ids = rng.integers(0, cfg["V"], (cfg["B"], cfg["T"]))  # (B, T)
    targets = rng.integers(0, cfg["V"], (cfg["B"], cfg["T"]))  # (B, T)
    return params, ids, targets


def make_step(backend, cfg):
    """A function running one training step for a backend, and the number of tokens it processes."""
    params, ids, targets = make_inputs(cfg)
    if backend == "reference":
        import model

        p = {name: t.tolist() for name, t in params.items()}
        x, y = ids[0].tolist(), targets[0].tolist()  # one sequence at a time

        def step():
            logits, cache = model.forward(p, x)
            _, dlogits = model.loss_and_dlogits(logits, y)
            model.backward(p, cache, dlogits)

        return step, cfg["T"]
    if backend.startswith("numpy"):
        import numpy as np

        import numpy_model

        p = numpy_model.from_lists(params, np.float32 if backend.endswith("f32") else np.float64)
        ws = {}  # the workspace: buffers reused from step to step

        def step():
            logits, cache = numpy_model.forward(p, ids, ws=ws)
            _, dlogits = numpy_model.loss_and_dlogits(logits, targets, ws, out=logits)
            numpy_model.backward(p, cache, dlogits, ws)

        return step, cfg["B"] * cfg["T"]
    import torch

    import torch_model

    p = torch_model.to_torch(params, torch.float32 if backend.endswith("f32") else torch.float64)
    x, y = torch_model.as_ids(ids), torch_model.as_ids(targets)

    def step():
        for t in p.values():
            t.grad = None
        logits, _ = torch_model.forward(p, x)
        torch_model.loss_fn(logits, y).backward()

    return step, cfg["B"] * cfg["T"]


def matmul_ceiling():
    """NumPy's best rate on a 2048 x 2048 matmul, GFLOP/s, for float32 and float64."""
    import numpy as np

    rates = {}
    n = 2048
    for name, dtype in (("f32", np.float32), ("f64", np.float64)):
        a = np.random.default_rng(0).standard_normal((n, n)).astype(dtype)  # (n, n)
        out = np.empty_like(a)  # (n, n)
        np.matmul(a, a, out=out)
        best = min(_timed(lambda: np.matmul(a, a, out=out)) for _ in range(5))
        rates[name] = 2 * n**3 / best / 1e9
    return rates


def _timed(fn):
    """Seconds one call of fn takes."""
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def worker(backend, size):
    """Serve the parent over stdin/stdout: 'run K' -> seconds per step over K timed steps; 'quit'."""
    if backend == "ceiling":
        print(json.dumps(matmul_ceiling()), flush=True)
        return
    step, tokens = make_step(backend, SIZES[size])
    times, t_end = [], time.perf_counter() + 0.5  # warm-up for about half a second, at least 3 steps
    while len(times) < 3 or time.perf_counter() < t_end:
        times.append(_timed(step))
    print(json.dumps({"tokens": tokens, "estimate": statistics.median(times[len(times) // 2:])}), flush=True)
    for line in sys.stdin:
        cmd = line.split()
        if cmd[0] == "quit":
            return
        k = int(cmd[1])
        step()  # untimed: caches and threads back to work after the other workers' turns
        t0 = time.perf_counter()
        for _ in range(k):
            step()
        print(json.dumps({"per_step": (time.perf_counter() - t0) / k}), flush=True)


# ----------------------------------------------------------------------------------------------------------------
# Parent side: start the workers, interleave their rounds, report


def reply(proc):
    """The next line a worker prints, as JSON; if it stopped instead, exit naming it (its error is printed above)."""
    line = proc.stdout.readline()
    if not line:
        raise SystemExit(f"error: the bench.py worker {' '.join(proc.args[-3:])} stopped with exit status"
                         f" {proc.wait()} before answering; its error is printed above")
    return json.loads(line)


def start(backend, size):
    """A worker process for backend at size, after its warm-up; and its first reply."""
    proc = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--worker", backend, "--size", size],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    return proc, reply(proc)


def ask(proc, k):
    """Seconds per step over k steps, from a running worker."""
    proc.stdin.write(f"run {k}\n")
    proc.stdin.flush()
    return reply(proc)["per_step"]


def torch_available():
    """Whether torch can be imported, checked in a throwaway process (this one must stay torch-free)."""
    return subprocess.run([sys.executable, "-c", "import torch"], capture_output=True).returncode == 0


def bench_size(size, backends, args):
    """Rows {size, backend, ms, tokens_per_s, rounds} for one size, backends interleaved round by round."""
    workers, k, times = {}, {}, {}
    for b in backends:
        if b == "reference" and (size == "large" or args.reference_rounds == 0):
            continue
        proc, hello = start(b, size)
        workers[b] = proc
        k[b] = 1 if b == "reference" else max(1, round(args.round_seconds / hello["estimate"]))
        times[b] = []
    order = list(workers)
    for r in range(args.rounds):
        for b in order[r % len(order):] + order[:r % len(order)]:  # rotate who goes first
            if b == "reference" and r >= args.reference_rounds:
                continue
            time.sleep(args.pause)
            times[b].append(ask(workers[b], k[b]))
    for proc in workers.values():
        proc.stdin.write("quit\n")
        proc.stdin.flush()
        proc.wait()
    cfg = SIZES[size]
    rows = []
    for b in order:
        per_step = statistics.median(times[b])
        tokens = cfg["T"] if b == "reference" else cfg["B"] * cfg["T"]
        rows.append({"size": size, "backend": b, "ms": per_step * 1e3, "tokens_per_s": tokens / per_step,
                     "gflops": tokens / per_step * flops_per_token(cfg) / 1e9, "rounds": len(times[b]),
                     "steps_per_round": k[b]})
    return rows


def report(rows, ceiling):
    """Print the table: one line per (size, backend), with ratios."""
    by = {(r["size"], r["backend"]): r for r in rows}
    print(f"{'size':11s} {'backend':10s} {'ms/step':>10s} {'tokens/s':>12s} {'GFLOP/s':>8s} {'%ceil':>6s} "
          f"{'vs torch':>9s} {'vs ref':>8s}  rounds x steps")
    for r in rows:
        dt = r["backend"][-3:] if r["backend"] != "reference" else None
        ceil = f"{100 * r['gflops'] / ceiling[dt]:5.1f}%" if dt in ceiling else ""
        peer = by.get((r["size"], "torch-" + dt)) if r["backend"].startswith("numpy") else None
        vs_torch = f"{r['tokens_per_s'] / peer['tokens_per_s']:8.2f}x" if peer else ""
        ref = by.get((r["size"], "reference"))
        vs_ref = f"{r['tokens_per_s'] / ref['tokens_per_s']:7.0f}x" if ref and r["backend"] != "reference" else ""
        print(f"{r['size']:11s} {r['backend']:10s} {r['ms']:10.3f} {r['tokens_per_s']:12,.0f} {r['gflops']:8.2f} "
              f"{ceil:>6s} {vs_torch:>9s} {vs_ref:>8s}  {r['rounds']} x {r['steps_per_round']}")


def targets(rows, ceiling):
    """The issue's performance targets, each with the measured value and whether it is met."""
    by = {(r["size"], r["backend"]): r["tokens_per_s"] for r in rows}
    checks = []

    def ratio(size, a, b, want, what, info=False):
        if (size, a) in by and (size, b) in by:
            value = by[(size, a)] / by[(size, b)]
            checks.append({"target": what, "value": value, "want": want, "met": value >= want, "info": info})

    ratio("series-b32", "numpy-f32", "torch-f32", 1.5, "series B=32 f32: NumPy / PyTorch eager >= 1.5x")
    ratio("series-b1", "numpy-f32", "torch-f32", 3.0, "series B=1 f32: NumPy / PyTorch eager >= 3x")
    ratio("series-b1", "numpy-f64", "torch-f64", 3.0, "series B=1 f64: NumPy / PyTorch eager >= 3x", info=True)
    ratio("large", "numpy-f32", "torch-f32", 1.5, "large f32: NumPy / PyTorch eager >= 1.5x")
    if ("large", "numpy-f32") in by:
        share = by[("large", "numpy-f32")] * flops_per_token(SIZES["large"]) / 1e9 / ceiling["f32"]
        checks.append({"target": "large f32: NumPy >= 50% of the f32 matmul ceiling", "value": share,
                       "want": 0.5, "met": share >= 0.5, "info": False})
    ratio("series-b32", "numpy-f32", "reference", 500, "series B=32 f32: NumPy >= 500x the reference")
    return checks


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default=",".join(SIZES), help=f"comma-separated, from {', '.join(SIZES)}")
    parser.add_argument("--rounds", type=int, default=9, help="rounds per size (median over them)")
    parser.add_argument("--reference-rounds", type=int, default=3, help="rounds for the slow reference (0: skip it)")
    parser.add_argument("--round-seconds", type=float, default=0.25, help="timed seconds per backend per round")
    parser.add_argument("--pause", type=float, default=0.2, help="seconds between two workers' turns")
    parser.add_argument("--no-torch", action="store_true", help="skip the PyTorch backends")
    parser.add_argument("--json", metavar="PATH", help="also write the table and targets as JSON")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--size", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        worker(args.worker, args.size)
        return 0
    machine.need("numpy", "bench.py")  # every worker but the reference's, and the ceiling
    sizes = args.sizes.split(",")
    unknown = [s for s in sizes if s not in SIZES]
    if unknown:
        parser.error(f"unknown sizes {unknown}; choose from {list(SIZES)}")
    if args.rounds < 1 or args.reference_rounds < 0:
        parser.error("--rounds must be at least 1 and --reference-rounds at least 0")
    backends = BACKENDS
    if args.no_torch or not torch_available():
        print("PyTorch: not compared (" + ("--no-torch" if args.no_torch else "torch is not installed") + ")")
        backends = [b for b in BACKENDS if not b.startswith("torch")]

    proc, ceiling = start("ceiling", "")
    proc.wait()
    print(f"NumPy 2048 x 2048 matmul ceiling: {ceiling['f32']:.0f} GFLOP/s float32, {ceiling['f64']:.0f} float64")
    rows = []
    for size in sizes:
        cfg = SIZES[size]
        print(f"... {size}: V {cfg['V']}, d {cfg['d']}, H {cfg['H']}, L {cfg['L']}, B {cfg['B']}, T {cfg['T']}",
              flush=True)
        rows += bench_size(size, backends, args)
    print()
    report(rows, ceiling)
    ref = [r for r in rows if r["size"] == "series-b1" and r["backend"] == "reference"]
    if ref:
        print(f"\nreference model.py, series size, T = 63: forward + loss + backward {ref[0]['ms']:.1f} ms "
              f"(median of {ref[0]['rounds']})")
    checks = targets(rows, ceiling)
    if checks:
        print("\ntargets:")
        for c in checks:
            value = f"{100 * c['value']:.0f}%" if c["want"] < 1 else f"{c['value']:.2f}x"
            status = ("met    " if c["met"] else "not met") if c["info"] else ("MET    " if c["met"] else "NOT MET")
            print(f"  {status} {c['target']}: {value}{' (float64, for information)' if c['info'] else ''}")
    if args.json:
        import numpy

        info = {"python": platform.python_version(), "numpy": numpy.__version__, "machine": platform.machine(),
                "cpus": os.cpu_count(), "command": " ".join(["python3", "bench.py", *(argv or sys.argv[1:])])}
        with open(args.json, "w") as f:
            json.dump({"info": info, "ceiling_gflops": ceiling, "rows": rows, "targets": checks}, f, indent=2)
        print(f"\nwrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
