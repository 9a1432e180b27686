"""Benchmark (not a test): the floors' bootstrap fits of the scaling record, here and through a pool of every core.

    python3 -m dev.bench_fits                 # the committed record's fits, 3 rounds of each
    python3 -m dev.bench_fits --rounds 1 --bootstrap 20

experiments/scaling_judged.floors_by_cut fits the law again to every bootstrap resampling of every cut, by least
squares and by Huber (how many, and their share of `python3 -m experiments.scaling --check`: docs/developers.md, "The
floors' fits on every core"). refit_floors sends them through a process pool of every core (each worker one BLAS
thread) when there are PARALLEL_FROM or more; this times floors_by_cut with the pool and with every fit in this
process, taking turns round by round, and reports the medians, their ratio, and whether both gave the same floors
(they must). --bootstrap N fits N resamplings instead of the record's plan's.
"""

import argparse
import json
import statistics
import time
from pathlib import Path
from unittest import mock

from dev import positive
from oneblock import machine


def timed_floors(values, plan, floor, pooled):
    """(seconds, floors) of floors_by_cut on the record's cells, its fits pooled or not."""
    import numpy as np

    from experiments import scaling_judged

    with mock.patch.object(scaling_judged, "PARALLEL_FROM", 0 if pooled else float("inf")):  # the pool, or here
        started = time.perf_counter()
        rng = np.random.default_rng(scaling_judged.JUDGED_SEED)
        floors = scaling_judged.floors_by_cut(values, plan, floor, rng)
        return time.perf_counter() - started, floors


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    p.add_argument("--rounds", type=positive(int), default=3,
                   help="rounds; the medians are reported (default: %(default)s)")
    p.add_argument("--bootstrap", type=positive(int), default=None, metavar="N",
                   help="resamplings to fit (default: the record's plan's, 200)")
    args = p.parse_args(argv)
    machine.need("numpy", "python3 -m dev.bench_fits")
    from experiments import grid, scaling_judged
    from experiments.scaling_law import cell_values
    from experiments.scaling_runs import FULL

    record = json.loads(Path(scaling_judged.__file__).with_name("scaling.json").read_text(encoding="utf-8"))
    plan = FULL if args.bootstrap is None else {**FULL, "bootstrap": args.bootstrap}
    values, _ = cell_values(record["runs"], plan)
    floor = record["floor"]["validation_nats_per_token"]
    cuts = len(plan["budgets"]) - scaling_judged.LEFT + 1
    fits = plan["bootstrap"] * cuts * 2
    print(f"{fits} fits ({plan['bootstrap']} resamplings, {cuts} cuts, two fits each), {args.rounds} round(s);"
          f" {machine.blas(1)} in the pool's {grid.cores()} workers", flush=True)
    if fits < scaling_judged.PARALLEL_FROM:
        print(f"(fewer than PARALLEL_FROM = {scaling_judged.PARALLEL_FROM}: the record's summaries fit these here;"
              f" the pool is timed all the same)")
    seconds, first = {"here": [], "pool": []}, {}
    for r in range(args.rounds):
        for name in seconds:
            wall, floors = timed_floors(values, plan, floor, pooled=name == "pool")
            seconds[name].append(wall)
            first.setdefault(name, floors)
            print(f"round {r + 1}: {name:<4} {wall:7.2f} s", flush=True)
    here, pool = statistics.median(seconds["here"]), statistics.median(seconds["pool"])
    print(f"\nmedians over {args.rounds} round(s): here {here:.2f} s, pool of {grid.cores()} {pool:.2f} s,"
          f" speed-up {here / pool:.2f}x; the same floors: {'yes' if first['here'] == first['pool'] else 'NO'}")
    return 0 if first["here"] == first["pool"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
