"""How far a training result moves from one machine to another, measured on one machine.

    python3 -m experiments.spread     # every position scheme, seed 3, train.py's full run, under each family of
                                      # kernels this CPU can execute, with 1 and 2 threads (the longest of the
                                      # experiments: its record says how long it took); writes out/spread.json
    python3 -m experiments.spread --out experiments/spread.json    # the same, replacing the committed record
    python3 -m experiments.spread --schemes learned --steps 1000 --out quick-spread.json     # a quicker look

Why last bits differ from one machine to another (each OpenBLAS kernel family and thread count adds in its own
order), and what the record found: docs/reproducibility.md.

It trains with the library's train (oneblock/training.py) in a fresh process per (family, threads), with
OPENBLAS_CORETYPE forcing the family (read when OpenBLAS loads, so it must be set for a new process):
how another CPU would compute, on this one. Families this CPU cannot execute are skipped (OpenBLAS then falls back
to another, which the worker reports).
"""

import argparse
import json
import os
import subprocess
import sys
import time
from contextlib import ExitStack
from pathlib import Path

from oneblock import machine
from oneblock.config import SCHEMES
from oneblock.settings import Settings

with machine.needed_by("python3 -m experiments.spread"):
    from experiments.recording import (OUT_FOLDER, counted, flags, given, holder, interruptible, out_option, own,
                                       stopped, trained, whole, write_record, wrote)

ROOT = Path(__file__).resolve().parent.parent  # where the workers run: python3 -m experiments.spread --worker
RECORD_FILE = ROOT / "experiments" / "spread.json"
FORMAT = "one-block kernel spread v1"  # the record's "format" field
SEED = 3  # the seed of its runs: train.py's default
FAMILIES = ("SkylakeX", "Haswell", "Sandybridge", "Nehalem")  # OpenBLAS kernel families, newest first
THREADS = (1, 2)

# ----------------------------------------------------------------------------------------------------------------
# One run, in a worker process whose OpenBLAS was told its family before NumPy loaded it


def run_worker(family, scheme, threads, values):
    """The JSON line a worker (main's --worker: train one model as train.py would, with the training settings values)
    prints, {"kernels", "curve", "seconds"}, run with OPENBLAS_CORETYPE=family; None if it failed (the CPU lacks the
    family's instructions) or OpenBLAS fell back to another family."""
    env = {**os.environ, "OPENBLAS_CORETYPE": family}
    job = json.dumps({"scheme": scheme, "threads": threads, "values": values})
    proc = subprocess.run([sys.executable, "-m", "experiments.spread", "--worker", job], env=env, cwd=ROOT,
                          capture_output=True, text=True)
    if proc.returncode != 0:
        return None
    result = json.loads(proc.stdout.splitlines()[-1])
    return result if result["kernels"] == family else None


# ----------------------------------------------------------------------------------------------------------------
# The experiment


def measure(schemes, families, values, report=print):
    """The record: every scheme's validation curve under every (family, threads), and per step their least and
    most validation loss and its width (how far kernel families and thread counts move train.py's own run)."""
    started = time.perf_counter()
    runs, spread = {}, {}
    for scheme in schemes:
        runs[scheme] = []
        for family in families:
            for threads in THREADS:
                result = run_worker(family, scheme, threads, values)
                if result is None:
                    raise RuntimeError(f"the {family} kernels stopped working during the experiment")
                runs[scheme].append({"kernels": family, "threads": threads, **result})
                report(f"{scheme:>10} {family:>11} x {threads} thread(s): val {result['curve'][-1][1]:.4f}"
                       f" ({result['seconds']:.0f} s)")
        steps = [step for step, _ in runs[scheme][0]["curve"]]
        by_step = [[r["curve"][i][1] for r in runs[scheme]] for i in range(len(steps))]  # (steps, runs)
        spread[scheme] = {"steps": steps, "min": [min(v) for v in by_step], "max": [max(v) for v in by_step],
                          "width": [max(v) - min(v) for v in by_step]}  # exact: the record rounds each number
    return {
        "format": FORMAT,
        "command": " ".join(["python3", "-m", "experiments.spread", *sys.argv[1:]]),
        "seconds": round(time.perf_counter() - started, 1),
        "machine": {"cpus": os.cpu_count(), "native": machine.blas(1)},
        "settings": {"seed": SEED, "train_args": flags(values), "families": list(families), "threads": list(THREADS)},
        "runs": runs,
        "spread": spread,
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description="Train one seed of each position scheme under each OpenBLAS kernel"
                                                 " family this CPU can run, with 1 and 2 threads, and record how far"
                                                 " the validation loss moves.", allow_abbrev=False)
    parser.add_argument("--schemes", default=",".join(SCHEMES), type=given(f"schemes from {', '.join(SCHEMES)}"),
                        help=f"comma-separated, each once, from {', '.join(SCHEMES)} (default: all)")
    parser.add_argument("--steps", type=whole, default=None,
                        help=f"training steps (default: train.py's, {Settings.steps})")
    parser.add_argument("--dtype", choices=("float32", "float64"), default="float32",
                        help="train.py's --dtype (default: %(default)s)")
    out_option(parser, RECORD_FILE.name, OUT_FOLDER / RECORD_FILE.name)
    parser.add_argument("--worker", help=argparse.SUPPRESS)  # JSON: {"scheme", "threads", "values"}
    args = parser.parse_args(argv)
    if args.worker is not None:
        try:
            job = json.loads(args.worker)
            scheme, threads, values = job["scheme"], job["threads"], job["values"]
        except (ValueError, TypeError, KeyError) as e:
            parser.error(f"--worker: expected the JSON of a job, {{\"scheme\", \"threads\", \"values\"}} ({e})")
        t0 = time.perf_counter()
        _, history = trained({**values, "positions": scheme, "seed": SEED, "threads": threads})
        print(json.dumps({"kernels": machine.openblas_core(), "curve": [[h["step"], h["val"]] for h in history],
                          "seconds": round(time.perf_counter() - t0, 1)}))
        return 0
    schemes = args.schemes.split(",")
    unknown = [s for s in schemes if s not in SCHEMES]
    if unknown:
        parser.error(f"--schemes: unknown {unknown}; choose from {list(SCHEMES)}")
    twice = sorted({s for s in schemes if schemes.count(s) > 1})
    if twice:
        parser.error(f"--schemes {args.schemes}: {', '.join(twice)} more than once; name each scheme once")
    typed = args.out if args.out is not None else str(OUT_FOLDER / RECORD_FILE.name)
    try:
        with interruptible(), ExitStack() as owned:
            return measured(args, schemes, owned, typed, argv)
    except ValueError as e:  # (an --out refused, a record that cannot be written)
        print(f"error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as e:
        return stopped(e, typed)


def measured(args, schemes, owned, typed, argv):
    """The run of main, once its arguments are checked: own --out (recording.own) until owned closes, find the
    kernel families, measure, write the record; the exit status (a ValueError for --out, or for the record, that
    cannot be written)."""
    out = own(owned, typed, args.out is not None, FORMAT, holder("python3 -m experiments.spread", argv),
              RECORD_FILE.name)
    families = [f for f in FAMILIES  # those this CPU runs (a training step with each)
                if run_worker(f, "learned", 1, {"steps": 1, "val_stories": 2, "batch": 1}) is not None]
    if not families:
        print("error: NumPy here does not compute with OpenBLAS kernels that OPENBLAS_CORETYPE can choose, so"
              " spread.py cannot measure the spread on this machine", file=sys.stderr)
        return 2
    print(f"kernel families this CPU runs: {', '.join(families)}; threads: {', '.join(map(str, THREADS))}",
          flush=True)
    values = {"dtype": args.dtype, **({"steps": args.steps} if args.steps else {})}
    record = measure(schemes, families, values, report=counted(len(schemes) * len(families) * len(THREADS)))
    write_record(out, typed, record)
    for scheme, s in record["spread"].items():
        print(f"{scheme:>10}: final validation loss from {s['min'][-1]:.4f} to {s['max'][-1]:.4f}"
              f" (spread {s['width'][-1]:.2g})")
    wrote(typed, f"{record['seconds']:.0f} s", None if args.out is not None else RECORD_FILE)
    return 0


if __name__ == "__main__":
    sys.exit(main())
