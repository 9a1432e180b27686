"""Benchmark (not a test): the scaling grid's wall-clock per run with one worker and with every core, side by side.

    python3 -m dev.bench_grid                    # the reduced grid (--check's), 3 rounds: out/bench-grid.json
    python3 -m dev.bench_grid --rounds 5 --scale 4 --out out/bench-grid-x4.json
    python3 -m dev.bench_grid --rounds 3 --full 2 --out out/bench-grid-full.json   # the recorded grid's own runs

Each round trains the grid's runs (experiments/scaling_runs.sweep_tasks) through a pool of one worker, then of every
core, into fresh results folders, in turns, each timed from the pool's start to its last result (the workers'
start-up included, not the record's fits); what is reported, and the figures: docs/developers.md, "The grid on every
core". --full K times the recorded grid's K smallest budgets instead of the reduced grid's; --scale multiplies the
plan's budgets. Both pools must give the same results, bit for bit.
"""

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from atomic import folder_for, output_problem, resolved, write_atomic
from dev import figures_judge, load_average, positive
from oneblock import machine

OUT = Path("out") / "bench-grid.json"  # where the figures go unless --out names a path
FORM = "grid benchmark v1"  # the "format" field of the figures' file


def without_seconds(results):
    """The results of a grid, the seconds of each run and task left out: what must be the same on any pool.

    >>> without_seconds({"a": {"run": {"tune": 1.5, "seconds": 0.2}, "cpu_seconds": 0.19}})
    {'a': {'run': {'tune': 1.5}}}
    """
    return {key: {**{k: v for k, v in r.items() if k != "cpu_seconds"},
                  "run": {k: v for k, v in r["run"].items() if k != "seconds"}} for key, r in results.items()}


def cpu_now():
    """The CPU seconds of this process and of its children that have ended (a pool's workers, once shut down)."""
    times = os.times()
    return times.user + times.system + times.children_user + times.children_system


def timed_grid(plan, workers):
    """(wall-clock seconds, CPU seconds of this process and the pool's workers, results) of the plan's runs through
    a fresh process pool of workers."""
    from experiments import grid
    from experiments.scaling_runs import grid_run, sweep_tasks

    tasks, follow, _ = sweep_tasks(plan)
    with tempfile.TemporaryDirectory() as folder:
        started, cpu = time.perf_counter(), cpu_now()
        with grid.executor("process", workers) as pool:
            results = grid.run_tasks(pool, grid_run, tasks, folder, follow=follow, report=None)
        return time.perf_counter() - started, cpu_now() - cpu, results


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    p.add_argument("--rounds", type=positive(int), default=3,
                   help="rounds; the medians are reported (default: %(default)s)")
    p.add_argument("--scale", type=positive(float), default=1.0,
                   help="multiply the grid's budgets by this (default: %(default)s: the reduced grid of --check, or"
                        " the full one's budgets)")
    p.add_argument("--full", type=int, default=None, metavar="K",
                   help="time the recorded grid's own runs (experiments/scaling.py's full plan) at its K smallest"
                        " budgets instead of the reduced grid")
    p.add_argument("--workers", type=int, default=None,
                   help="the workers of the wide pool (default: every core)")
    p.add_argument("--out", default=str(OUT), metavar="PATH", help="where the figures go (default: %(default)s)")
    args = p.parse_args(argv)
    machine.need("numpy", "python3 -m dev.bench_grid")
    from experiments import grid
    from experiments.scaling_runs import FULL, REDUCED

    wide = grid.cores() if args.workers is None else args.workers
    if wide < 2:
        p.error(f"the wide pool must have at least 2 workers; got {wide} (cores here: {grid.cores()})")
    if args.full is not None and not 1 <= args.full <= len(FULL["budgets"]):
        p.error(f"--full {args.full}: expected 1 to {len(FULL['budgets'])} of the full grid's budgets")
    problem = output_problem(args.out, "--out", "a JSON of dev.bench_grid's figures", figures_judge(form=FORM),
                             OUT.name)
    if problem:  # judged before the timing, never after it
        p.error(problem)
    grid_plan = REDUCED if args.full is None else {**FULL, "budgets": FULL["budgets"][:args.full]}
    plan = {**grid_plan, "budgets": [round(c * args.scale) for c in grid_plan["budgets"]]}
    what = ("the reduced grid" if args.full is None else f"the full grid at its {args.full} smallest budget(s)") + (
        f" (budgets x {args.scale:g})" if args.scale != 1.0 else "")
    before = load_average()
    print(f"{what}, {args.rounds} round(s); load average {before}", flush=True)
    seconds, cores, first = {1: [], wide: []}, {1: [], wide: []}, {}  # {workers: per round}
    for r in range(args.rounds):
        for workers in seconds:
            wall, cpu, results = timed_grid(plan, workers)
            runs = sum("stream" in result for result in results.values())  # (the others validated a run's weights)
            seconds[workers].append(wall)
            cores[workers].append(cpu / wall)
            first.setdefault(workers, without_seconds(results))
            print(f"round {r + 1}: {workers:>2} worker(s) {wall:8.2f} s, {wall / runs:6.3f} s a run, the CPU of"
                  f" {cpu / wall:.2f} cores", flush=True)
    same = first[1] == first[wide]
    one, many = statistics.median(seconds[1]), statistics.median(seconds[wide])
    after = load_average()
    print(f"\nmedians over {args.rounds} round(s), {runs} runs, one BLAS thread a worker (cores: the CPU seconds"
          f" the pool got a second of wall-clock):")
    print(f"  1 worker    {one / runs:6.3f} s a run   cores {statistics.median(cores[1]):.2f}")
    print(f"  {wide} workers  {many / runs:6.3f} s a run   cores {statistics.median(cores[wide]):.2f}"
          f"   speed-up {one / many:.2f}x")
    print(f"  the same results, bit for bit: {'yes' if same else 'NO'}; load average before {before}, after {after}")
    figures = {"format": FORM, "command": " ".join(["python3 -m dev.bench_grid", *sys.argv[1:]]),
               "machine": machine.blas(1), "cores": grid.cores(), "cpus": os.cpu_count(), "runs": runs,
               "plan": plan, "seconds": {str(k): v for k, v in seconds.items()},
               "seconds_per_run": {"1": one / runs, str(wide): many / runs}, "speed_up": one / many,
               "cores_used": {str(k): v for k, v in cores.items()},
               "same_results": same, "load_before": before, "load_after": after}
    with folder_for(resolved(args.out)):
        write_atomic(resolved(args.out), json.dumps(figures, indent=1) + "\n")
    print(f"wrote {args.out}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
