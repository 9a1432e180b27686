"""When a model learns to follow the chain: each size of the scaling grid trained for the same steps, its tuning loss
followed closely, and the steps at which it comes within each of LEVELS of the floor.

    python3 -m experiments.drops              # 7 sizes x 3 seeds, 8,000 steps each (minutes): out/drops.json
    python3 -m experiments.drops --out experiments/drops.json   # the same, replacing the committed record
    python3 -m experiments.drops --check      # a reduced plan (seconds), drops.json's shape, every summary again
    python3 -m experiments.drops --rerun 32x2 --seed 4 --until 400   # one run trained again up to a step, checked

The runs (scaling_runs.drop_run), when a run reaches a level, why (a run sits on a plateau, then drops once, when it
learns to follow the chain of hand-overs) and what the record found: docs/scaling.md's "When a run learns to follow
the chain". LEVELS are 0.3 (past the plateau every size sits on), 0.1, and 0.02 (between where one block ends in the
grid and where two blocks that learned the chain end). The summaries are derived from the runs (`summarise`), so
--check derives them again.
"""

import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

from oneblock import machine

with machine.needed_by("python3 -m experiments.drops"):
    from experiments import chains, grid
    from experiments.recording import (check_provenance, experiment_parser, field, first_difference, judged_rerun,
                                       need, parsed, provenance, rounded, run_or_check, table_row, trained)
    from experiments.scaling_law import name_of, slope
    from experiments.scaling_runs import (FULL as GRID, T, TUNE_SEED, check_chains_data, drop_data, drop_problem,
                                          drop_result_problem, drop_run, drop_values, held_out, parameters,
                                          plan_settings, tokenizer)

# ----------------------------------------------------------------------------------------------------------------
# Settings

HERE = Path(__file__).resolve().parent
RECORD_FILE = HERE / "drops.json"
FORMAT = "drops experiment v1"
LEVELS = [0.3, 0.1, 0.02]  # nats per token above the tuning floor that a run comes within, step by step
FULL = {"sizes": GRID["sizes"], "steps": 8000, "lr": 0.01, "seeds": [3, 4, 5], "batch": 16, "tune_stories": 300,
        "eval_every": 50, "levels": LEVELS}
REDUCED = {"sizes": [[8, 1], [16, 1], [16, 2]], "steps": 80, "lr": 0.03, "seeds": [3, 4], "batch": 4,
           "tune_stories": 20, "eval_every": 20, "levels": [2.0, 1.2]}  # (levels a short run reaches)


# ----------------------------------------------------------------------------------------------------------------
# The experiment


def run_experiment(plan, report=print):
    """Train every size of plan at each of its seeds (scaling_runs.drop_run) through a process pool of grid.py's,
    the results in a temporary folder, and return the record (a dict): the runs one seed after another, each size
    in the plan's order."""
    started, cpu = time.perf_counter(), time.process_time()
    tuning = held_out(tokenizer(), TUNE_SEED, plan["tune_stories"])
    tasks = [(f"{name_of(size)}-{seed}", [plan, size, seed]) for seed in plan["seeds"] for size in plan["sizes"]]
    with tempfile.TemporaryDirectory() as folder, grid.executor() as pool:
        results = grid.run_tasks(pool, drop_run, tasks, folder, report=report,
                                 check=lambda args, result: drop_result_problem(args, result, tuning[2]))
    runs = [results[key]["run"] for key, _ in tasks]
    streams = {str(seed): results[f"{name_of(plan['sizes'][0])}-{seed}"]["stream"] for seed in plan["seeds"]}
    made, sources = provenance(sys.modules[__name__], plan, started,
                               cpu - sum(results[key]["cpu_seconds"] for key, _ in tasks))  # (theirs too)
    floor = rounded(tuning[2])
    record = {**made, "settings": plan_settings(plan), **sources,
              "floor": {"tuning_nats_per_token": floor, "entropy_nats_per_story": rounded(chains.entropy())},
              "data": {"streams": streams}, "runs": runs}
    return {**record, **summarise(runs, plan, floor)}


# ----------------------------------------------------------------------------------------------------------------
# The summaries


def drop_step(curve, floor, level):
    """The first step of a tuning curve ([step, loss] pairs) at which the loss is within level of floor; None if it
    never is.

    >>> curve = [[0, 4.5], [50, 0.6], [100, 0.52], [150, 0.509], [200, 0.53]]  # 0.019 above at 150, then a rise
    >>> drop_step(curve, 0.49, 0.02), drop_step(curve, 0.49, 0.01), drop_step(curve, 0.49, 5.0)
    (150, None, 0)
    """
    return next((step for step, loss in curve if loss - floor <= level), None)


def summarise(runs, plan, floor):
    """Every summary of the record, from the runs: {"sizes": per size its non-embedding parameters, its mean loss above
    the floor at the end, and per level (its text, "0.1") the steps by seed at which it came within the level, their
    median and the tokens read by then (None unless every seed did); "powers": per level, the least-squares slope of
    log median step against log N over the sizes whose every seed reached it, and which they are (None for fewer than
    two)}."""
    sizes, powers = {}, {}
    for size in map(name_of, plan["sizes"]):
        own = [r for r in runs if r["size"] == size]
        sizes[size] = {"parameters": parameters([int(v) for v in size.split("x")]),
                       "final": statistics.fmean(r["tune_curve"][-1][1] for r in own) - floor, "levels": {}}
        for level in plan["levels"]:
            steps = [drop_step(r["tune_curve"], floor, level) for r in own]
            median = statistics.median(steps) if None not in steps else None
            sizes[size]["levels"][f"{level:g}"] = {"steps": steps, "median": median,
                                                   "tokens": None if median is None else
                                                   median * plan["batch"] * T}
    for level in map("{:g}".format, plan["levels"]):
        reached = [size for size, s in sizes.items() if s["levels"][level]["median"] is not None]
        powers[level] = None
        if len(reached) >= 2:
            medians = [sizes[s]["levels"][level]["median"] for s in reached]
            powers[level] = {"sizes": reached, "exponent": slope([sizes[s]["parameters"] for s in reached], medians)}
    return rounded({"sizes": sizes, "powers": powers})


# ----------------------------------------------------------------------------------------------------------------
# The table of docs/scaling.md


def tables(record):
    """The table of drops.json that docs/scaling.md shows: for each size the median step (of its seeds) at which it
    came within each level of the floor, how many seeds did, and its loss above the floor at the end; and the power
    of N the median step goes as, per level."""
    settings, levels = record["settings"], [f"{level:g}" for level in record["settings"]["levels"]]
    seeds = len(settings["seeds"])
    rows = [table_row(["size (N)", *[f"within {level} (seeds)" for level in levels],
                       f"L - E at step {settings['steps']:,}"]), table_row(["---"] * (2 + len(levels)))]
    for size, s in record["sizes"].items():
        cells = []
        for level in levels:
            at = s["levels"][level]
            reached = sum(x is not None for x in at["steps"])
            cells.append(f"{at['median']:,.0f} ({reached}/{seeds})" if at["median"] is not None else
                         f"- ({reached}/{seeds}" + (f": {', '.join(f'{x:,}' for x in at['steps'] if x)})"
                                                    if reached else ")"))
        rows.append(table_row([f"{size} ({s['parameters']:,})", *cells, f"{s['final']:.4f}"]))
    said = []
    for level in levels:
        power = record["powers"][level]
        said.append(f"within {level}: " + ("fewer than two sizes with every seed there" if power is None else
                                           f"N^{power['exponent']:.2f} over {', '.join(power['sizes'])}"))
    return "\n".join([*rows, "", f"(the median step goes as {'; '.join(said)}; a level is reached at the first"
                                 f" evaluation within it of the floor, {record['floor']['tuning_nats_per_token']:.4f},"
                                 f" every {settings['eval_every']} steps at the peak rate {settings['lr']:g})"])


# ----------------------------------------------------------------------------------------------------------------
# The record's shape


def check_record(record, plan):
    """Raise a ValueError naming the first field that does not have the shape a run of plan gives, or the first
    summary that differs from the one derived again from the record's runs."""
    check_provenance(record, FORMAT)
    need(record.get("settings") == plan_settings(plan), f"settings {str(record.get('settings'))[:80]} are not this"
         f" code's")
    check_chains_data(record)
    runs = record["runs"]
    want = [(name_of(size), seed) for seed in plan["seeds"] for size in plan["sizes"]]
    need([(r["size"], r["seed"]) for r in runs] == want, f"expected one run of every size for each seed of"
         f" {plan['seeds']}, one seed after another")
    for r in runs:  # (each what a run of its own settings can give, as a result file is checked)
        problem = drop_problem(r, plan, record["floor"]["tuning_nats_per_token"])
        need(problem is None, problem)
    derived = summarise(runs, plan, record["floor"]["tuning_nats_per_token"])
    for key in derived:
        first_difference(derived[key], record.get(key), key)


# ----------------------------------------------------------------------------------------------------------------
# A rerun of one run


def rerun(record, size, seed, until):
    """recording.judged_rerun of one run of the record (size, seed), trained again up to step until."""
    def train(lr):
        data, _ = drop_data(json.dumps(FULL, sort_keys=True), seed)  # (the counts of its stories are the record's)
        _, history = trained(drop_values(FULL, [int(v) for v in size.split("x")], seed), data=data, until=until)
        return size, history[-1]["val"]

    return judged_rerun(sys.modules[__name__], record, lambda rec: [r for r in rec["runs"] if r["size"] == size],
                        seed, until, train)


def rerun_cell(parser, args, record):
    """recording.rerun_main's cell: rerun's size, and the tuning curve whose steps --until may name."""
    sizes = field(record["sizes"], "an object", "sizes")
    if args.rerun not in sizes:
        parser.error(f"--rerun {args.rerun}: {RECORD_FILE.name} has the sizes {', '.join(sizes)} (width x blocks)")
    run = next(r for r in record["runs"] if r["size"] == args.rerun)
    return {"size": args.rerun}, run["tune_curve"]


# ----------------------------------------------------------------------------------------------------------------
# Command line


def main(argv=None):
    parser = experiment_parser(
        "Train each size of the scaling grid for the same steps and find the step at which it learns to follow the"
        " chain.", RECORD_FILE.name, "3 sizes, 2 seeds, 80 steps",
        {"metavar": "SIZE", "help": "train one run of drops.json again (a size, WIDTHxBLOCKS such as 32x2, with"
                                    " --seed, up to --until)"})
    args = parsed(parser, argv)
    return run_or_check(sys.modules[__name__], parser, args, argv, grid=lambda out: {})


if __name__ == "__main__":
    sys.exit(main())
