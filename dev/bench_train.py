"""Benchmark (not a test): train.py's own steps per second for each backend and process count, side by side.

    python3 -m dev.bench_train                   # numpy, torch in one process, torch on 2 ranks; 3 rounds
    python3 -m dev.bench_train --steps 300 --rounds 1 --batch 16

Where bench.py times one training step in isolation, this runs `train.py` itself, as a user would, so the figure
includes everything a step costs there: drawing the windows, the optimiser, and for DDP the gradient all-reduce
between the ranks. Each configuration runs the same settings (float32, seed 3, no checkpoint until the end, one
validation at the end) in a fresh process, taking turns round by round so that a busy phase of the machine hits
all alike; reported is the median over rounds of train.py's own tokens per second (the time of the steps only:
neither start-up nor validation counts). Why data parallelism on one CPU costs rather than gains, and the figures:
docs/developers.md, "How fast each backend trains".
"""

import argparse
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from oneblock import machine

ROOT = Path(__file__).resolve().parent.parent  # the lab's folder, where train.py is
RUNS = {  # name -> the launcher and the train.py arguments that make the configuration
    "numpy (numpy_fast)": ([sys.executable], ["--backend", "numpy"]),
    "torch, 1 process": ([sys.executable], ["--backend", "torch", "--device", "cpu"]),
    "torch, 2 ranks (DDP, gloo)": ([sys.executable, "-m", "torch.distributed.run", "--standalone",
                                    "--nproc_per_node", "2"], ["--backend", "torch", "--device", "cpu"]),
}
SPEED = re.compile(r"^done: .*, ([0-9,.]+)(k?) tokens/s\)", re.M)


def tokens_per_second(stdout):
    """train.py's own speed from its summary line.

    >>> tokens_per_second("done: 10 steps (10 in this run, 1,024 tokens, 0.1 s, 512k tokens/s) | val 4.0")
    512000.0
    """
    number, thousands = SPEED.search(stdout).groups()
    return float(number.replace(",", "")) * (1000 if thousands else 1)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    p.add_argument("--steps", type=int, default=1000, help="steps per run (default: %(default)s)")
    p.add_argument("--batch", type=int, default=16, help="windows of 64 tokens per step (default: %(default)s)")
    p.add_argument("--rounds", type=int, default=3, help="rounds; the median is reported (default: %(default)s)")
    args = p.parse_args(argv)
    if args.steps < 1 or args.rounds < 1 or args.batch < 2 or args.batch % 2:
        p.error(f"--steps and --rounds must be at least 1 and --batch an even number (2 ranks share it); got"
                f" {args.steps}, {args.rounds} and {args.batch}")
    machine.need("numpy", "python3 -m dev.bench_train")
    machine.need("torch", "python3 -m dev.bench_train")
    common = ["--steps", str(args.steps), "--batch", str(args.batch), "--eval-every", str(args.steps),
              "--ckpt-every", str(args.steps), "--val-stories", "20", "--quiet"]
    speeds = {name: [] for name in RUNS}
    with tempfile.TemporaryDirectory() as folder:
        for r in range(args.rounds):
            for k, (name, (launcher, extra)) in enumerate(RUNS.items()):
                out = Path(folder) / f"round{r}-run{k}.safetensors"
                proc = subprocess.run([*launcher, str(ROOT / "train.py"), *common, *extra, "--out", str(out)],
                                      capture_output=True, text=True)
                if proc.returncode != 0:
                    print(f"error: {name} failed:\n{proc.stderr}", file=sys.stderr)  # whole: each rank's own words too
                    return 1
                speeds[name].append(tokens_per_second(proc.stdout))
                print(f"round {r + 1}: {name:<28} {speeds[name][-1]:>12,.0f} tokens/s", flush=True)
    base = statistics.median(speeds["numpy (numpy_fast)"])
    print(f"\n{args.steps} steps of {args.batch} x 64 tokens, float32; medians over {args.rounds} round(s):")
    for name, values in speeds.items():
        median = statistics.median(values)
        print(f"  {name:<28} {median:>12,.0f} tokens/s   {median / base:5.2f}x numpy")
    return 0


if __name__ == "__main__":
    sys.exit(main())
