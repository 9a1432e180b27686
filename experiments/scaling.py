"""Scaling in a teacup: the loss of models of seven sizes, each trained at nine compute budgets, against the true
entropy floor of its data, and the scaling law fitted to them with that floor unknown and known.

    python3 -m experiments.scaling            # the full grid (the record says how long it took): out/scaling.json
    python3 -m experiments.scaling --out experiments/scaling.json   # the same, replacing the committed record
    python3 -m experiments.scaling --check    # a reduced grid (seconds), scaling.json's shape, every summary again
    python3 -m experiments.scaling --check --executor dask --workers 2   # the same on a local Dask cluster of two
    python3 -m experiments.scaling --rerun 16x1 --budget 10000000000 --seed 4   # one cell trained again, checked

The data, the grid, its sweep and its executors: docs/scaling.md's "The data", "The grid" and "On every core, on
Dask, and resuming"; what the summaries are and what they found: its "What it found". Every summary is derived from
the runs' raw numbers, so `--check` derives each again (the law, its fit and the cells it reads:
experiments/scaling_law.py; the fits judged: experiments/scaling_judged.py; the runs: experiments/scaling_runs.py,
trained through one executor of experiments/grid.py, each result a file in --runs-dir). Same code, same machine,
kernels and thread count: the same record, bit for bit, on every executor and worker count, but the "seconds" fields.
"""

import functools
import json
import math
import os
import statistics
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

from oneblock import machine

with machine.needed_by("python3 -m experiments.scaling"):
    import numpy as np

    from atomic import same_file
    from experiments import chains, grid
    from experiments.recording import (across_seeds, check_provenance, experiment_parser, field, first_difference,
                                       given, judged_rerun, need, parsed, provenance, rounded, run_or_check, table_row,
                                       trained, whole)
    from experiments.scaling_judged import JUDGED_SEED, cell_arrays, judged, minimum, percentiles
    from experiments.scaling_law import cell_values, chosen_lr, fit_law, law_summary, name_of, slope
    from experiments.scaling_runs import REDUCED  # noqa: F401  (--check's plan: recording.run_or_check reads it)
    from experiments.scaling_runs import (FULL, TUNE_SEED, VALIDATION_SEED, VOCAB, check_chains_data, flops_per_token,
                                          grid_run, held_out, parameters, plan_settings, result_problem, run_data,
                                          run_problem, run_values, splits, steps_for, sweep_tasks, task_key, tokenizer,
                                          tokens_for)

# ----------------------------------------------------------------------------------------------------------------
# Settings

HERE = Path(__file__).resolve().parent
RECORD_FILE = HERE / "scaling.json"
FORMAT = "scaling experiment v1"  # the record's "format" field
BOOTSTRAP_SEED = 0  # numpy.random.default_rng's seed of the resamplings
SUMMARIES = {"cells": dict, "frontier": list, "fits": dict, "isoflop": dict, "conditions": dict, "judged": dict}
PUBLISHED = {  # what the papers found, for docs/scaling.md
    "chinchilla": {"alpha": 0.34, "beta": 0.28, "a": 0.5, "b": 0.5, "tokens_per_parameter": 20},
    "kaplan": {"a": 0.73},
}


def grid_cost(plan):
    """(runs, training FLOPs, training tokens) of a plan, by formula: every cell once per learning rate (the first
    seed) and once per other seed; a cell whose seeds split trains its split_seeds too, on top of these.

    >>> runs, flops, tokens = grid_cost(FULL)
    >>> runs, f"{flops:.3g}", f"{tokens:.3g}"
    (315, '1.79e+14', '3.1e+09')
    """
    per_cell = len(plan["lrs"]) + len(plan["seeds"]) - 1
    cells = [(size, tokens_for(size, c, plan["batch"])) for size in plan["sizes"] for c in plan["budgets"]]
    flops = sum(tokens * flops_per_token(size) for size, tokens in cells)
    return per_cell * len(cells), per_cell * flops, per_cell * sum(tokens for _, tokens in cells)


# ----------------------------------------------------------------------------------------------------------------
# The experiment


def run_experiment(plan, report=print, kind="process", workers=None, address=None, runs_dir=None):
    """Train the grid of plan (scaling_runs.sweep_tasks) through one executor of grid.py's (kind, workers and
    address) and return the record (a dict). Each run's result is a file in runs_dir (a temporary folder when None),
    checked (result_problem) before it is believed when read back: how a grid resumes, and its "read_back", are
    docs/scaling.md's "On every core, on Dask, and resuming". report: a line for each run (grid.run_tasks's), or None.
    The record holds the runs one seed after another, each cell's rates in the plan's order; only "seconds" and
    "cpu_seconds" (this process's CPU and that of the workers it started) move with the executor."""
    started, cpu, children = time.perf_counter(), time.process_time(), children_cpu()
    tok = tokenizer()
    tuning = held_out(tok, TUNE_SEED, plan["tune_stories"])
    validation = held_out(tok, VALIDATION_SEED, plan["validation_stories"])
    tasks, follow, chosen = sweep_tasks(plan)
    floors, read_back = {"tuning": tuning[2], "validation": validation[2]}, []
    with ExitStack() as stack:
        folder = runs_dir if runs_dir is not None else stack.enter_context(tempfile.TemporaryDirectory())
        pool = stack.enter_context(grid.executor(kind, workers, address))
        results = grid.run_tasks(pool, grid_run, tasks, folder, follow=follow, report=report, read_back=read_back,
                                 check=lambda args, result: result_problem(args, result, floors))
    runs, streams, first = [], {}, plan["seeds"][0]
    for seed in [*plan["seeds"], *plan["split_seeds"]]:
        for size, budget in [(size, budget) for size in plan["sizes"] for budget in plan["budgets"]]:
            rate = chosen[name_of(size), budget]
            for lr in plan["lrs"] if seed == first else [rate]:
                if task_key(size, budget, lr, seed) not in results:  # (a split seed of a cell that did not split)
                    continue
                result = results[task_key(size, budget, lr, seed)]
                streams.setdefault(str(seed), result["stream"])
                run = result["run"]
                if seed == first and lr == rate:  # (its weights, validated)
                    run = {**run, **results[task_key(size, budget, lr, seed, "-chosen")]["run"]}
                runs.append(run)
    floor = rounded({"validation_nats_per_token": validation[2], "tuning_nats_per_token": tuning[2],
                     "entropy_nats_per_story": chains.entropy(), "uniform_nats_per_token": math.log(VOCAB)})
    made, sources = provenance(sys.modules[__name__], plan, started,
                               cpu - (children_cpu() - children))  # (the workers' CPU counted too)
    record = {
        **made,
        "settings": plan_settings(plan),
        **sources,
        "floor": floor,
        "data": {"validation_tokens": sum(len(x) - 1 for x in validation[0]), "tuning_tokens": tuning[1],
                 "stories_in_the_world": chains.stories(), "streams": streams},
        "runs": runs,
        **({"read_back": read_back} if read_back else {}),  # (the results read from runs_dir, not computed)
    }
    return {**record, **summarise(runs, plan, floor)}


def children_cpu():
    """The CPU seconds of this process's children that have ended (a process pool's workers, once shut down)."""
    times = os.times()
    return times.children_user + times.children_system


# ----------------------------------------------------------------------------------------------------------------
# The summaries: frontier, fits (the law, its fit and the cells' values are scaling_law.py's)


def frontier(means, plan, floor):
    """Per budget: the size of least mean loss, its reducible loss, N_opt and D_opt (parabolas in log N and log D
    through the least cell and its neighbours), tokens per parameter, and whether the least cell is interior."""
    out = []
    n = np.log([parameters(s) for s in plan["sizes"]])  # (sizes,)
    for budget in plan["budgets"]:
        loss = np.array([means[name_of(s), budget] for s in plan["sizes"]])  # (sizes,)
        d = np.log([tokens_for(s, budget, plan["batch"]) for s in plan["sizes"]])  # decreasing
        log_n, log_d = minimum(n, loss, "three_point"), minimum(d[::-1], loss[::-1], "three_point")
        k = int(np.argmin(loss))
        out.append({"budget": budget, "best_size": name_of(plan["sizes"][k]), "loss": float(loss[k]),
                    "reducible": float(loss[k]) - floor, "interior": 0 < k < len(loss) - 1, "n_opt": math.exp(log_n),
                    "d_opt": math.exp(log_d), "tokens_per_parameter": math.exp(log_d - log_n)})
    return out


def interior(front):
    """The budgets of the frontier whose least-loss size is not the smallest or the largest (a parabola there
    locates its minimum), or all of them when fewer than two are.

    >>> [f["budget"] for f in interior([{"budget": 1, "interior": False}, {"budget": 2, "interior": True},
    ...                                 {"budget": 4, "interior": True}])]
    [2, 4]
    """
    inside = [f for f in front if f["interior"]]
    return inside if len(inside) >= 2 else front


def bootstrap(values, plan, floor, point_fits, where):
    """The bootstrap replicates of alpha, beta, E, a, b and tokens per parameter: each resamples every cell's seeds
    with replacement, then the cells for the law's fits (warm-started at the point fits) and the budgets for a and
    b (at least two different ones)."""
    rng = np.random.default_rng(BOOTSTRAP_SEED)
    n, d, keys = where
    out = {"free_floor": [], "true_floor": [], "a": [], "b": [], "tokens_per_parameter": []}
    for _ in range(plan["bootstrap"]):
        means = {k: float(np.mean(np.array(v)[rng.integers(0, len(v), len(v))])) for k, v in values.items()}
        cells = rng.integers(0, len(keys), len(keys))
        loss = np.array([means[keys[i]] for i in cells])
        for name, e in (("free_floor", None), ("true_floor", floor)):
            fitted, _ = fit_law(n[cells], d[cells], loss, floor=e, starts=[point_fits[name]["x"]])
            out[name].append([fitted["E"], fitted["alpha"], fitted["beta"]])
        front = interior(frontier(means, plan, floor))
        budgets = rng.integers(0, len(front), len(front))
        while len(set(budgets.tolist())) < 2:
            budgets = rng.integers(0, len(front), len(front))
        picked = [front[i] for i in budgets]
        c = [f["budget"] for f in picked]
        out["a"].append(slope(c, [f["n_opt"] for f in picked]))
        out["b"].append(slope(c, [f["d_opt"] for f in picked]))
        out["tokens_per_parameter"].append(float(np.exp(np.mean(np.log([f["tokens_per_parameter"]
                                                                         for f in front])))))
    return out


def summarise(runs, plan, floor):
    """Every summary of the record, from the runs: {"cells", "frontier", "fits", "isoflop", "conditions", "judged"}
    (scaling_judged.py's), as JSON reads them back. A pure function of its arguments, so the last few are kept:
    a record checked again, or changed only in its summaries, is not fitted again."""
    return json.loads(summarised(json.dumps([runs, plan, floor], sort_keys=True)))


@functools.lru_cache(maxsize=4)
def summarised(arguments):
    """summarise's summaries as JSON text, of its arguments as JSON text."""
    runs, plan, floor = json.loads(arguments)
    values, rates = cell_values(runs, plan)
    e = floor["validation_nats_per_token"]
    means = {key: statistics.fmean(v) for key, v in values.items()}
    front = frontier(means, plan, e)
    keys, n, d, _, loss = cell_arrays(values, plan)  # (the cells in values' order)
    fits = law_summary((n, d, loss), e)
    usable = interior(front)
    c = [f["budget"] for f in usable]
    iso = {"a": slope(c, [f["n_opt"] for f in usable]), "b": slope(c, [f["d_opt"] for f in usable]), "budgets": c}
    boot = bootstrap(values, plan, e, fits, (n, d, keys))
    cells = {size: {str(c): {"lr": rates[size, c], "val": across_seeds(values[size, c]),
                             "reducible": statistics.fmean(values[size, c]) - e} for c in plan["budgets"]}
             for size in map(name_of, plan["sizes"])}
    for name in ("free_floor", "true_floor"):
        reps = np.array(boot[name])  # (bootstrap, 3): E, alpha, beta
        fits[name] = {**{k: v for k, v in fits[name].items() if k != "x"},
                      "intervals": {"E": percentiles(reps[:, 0]), "alpha": percentiles(reps[:, 1]),
                                    "beta": percentiles(reps[:, 2])}}
    tpp = float(np.exp(np.mean(np.log([f["tokens_per_parameter"] for f in usable]))))
    isoflop = {"a": iso["a"], "b": iso["b"], "budgets": iso["budgets"], "tokens_per_parameter": tpp,
               "intervals": {k: percentiles(boot[k]) for k in ("a", "b", "tokens_per_parameter")}}
    largest = name_of(plan["sizes"][-1])
    top, below = (values[largest, c] for c in plan["budgets"][:-3:-1])
    conditions = {"frontier_fall": front[0]["reducible"] / front[-1]["reducible"],
                  "largest_gains_at_the_top": statistics.fmean(below) - statistics.fmean(top),
                  "largest_gain_beyond_seeds": min(below) > max(top),
                  "best_validation_error": min((r for r in runs if r["size"] == front[-1]["best_size"]
                                                and r["budget"] == plan["budgets"][-1]),
                                               key=lambda r: r["val"] or math.inf)["val_error"]
                  / front[-1]["reducible"]}
    judgement = judged(values, plan, e, fits, iso["budgets"], np.random.default_rng(JUDGED_SEED))
    return json.dumps(rounded({"cells": cells, "frontier": front, "fits": fits, "isoflop": isoflop,
                               "conditions": conditions, "judged": judgement}))


# ----------------------------------------------------------------------------------------------------------------
# The table of docs/scaling.md


def tables(record):
    """The tables of scaling.json that docs/scaling.md shows: the reducible loss of every cell, the frontier, and
    the fits next to Chinchilla's and Kaplan's."""
    budgets = record["settings"]["budgets"]
    rows = [table_row(["size (N)", *[f"{c / 1e9:g} GFLOP" for c in budgets]]), table_row(["---"] * (1 + len(budgets)))]
    for size, cells in record["cells"].items():
        rows.append(table_row([f"{size} ({record['settings']['parameters'][size]:,})",
                               *[f"{cells[str(c)]['reducible']:.4f}" for c in budgets]]))
    front = [table_row(["budget", "least-loss size", "L - E", "N_opt", "D_opt", "tokens per parameter"]),
             table_row(["---"] * 6)]
    for f in record["frontier"]:
        front.append(table_row([f"{f['budget'] / 1e9:g} GFLOP", f["best_size"] + ("" if f["interior"] else
                                                                                  " (edge)"),
                                f"{f['reducible']:.4f}", f"{f['n_opt']:,.0f}", f"{f['d_opt']:,.0f}",
                                f"{f['tokens_per_parameter']:.1f}"]))

    def value(fit, key, digits=3):
        lo, hi = fit["intervals"][key]
        return f"{fit[key]:.{digits}f} [{lo:.{digits}f}, {hi:.{digits}f}]"

    fits, iso, paper = record["fits"], record["isoflop"], PUBLISHED
    powers = record["judged"]["flops"]["exponents"]  # the law's, with FLOPs as they are
    law = [table_row(["", "E", "alpha", "beta", "N_opt ~ C^a", "D_opt ~ C^b", "tokens per parameter"]),
           table_row(["---"] * 7),
           table_row(["fit with E free", value(fits["free_floor"], "E", 4), value(fits["free_floor"], "alpha"),
                      value(fits["free_floor"], "beta"), f"{powers['free_floor']['a']:.2f} (law)",
                      f"{powers['free_floor']['b']:.2f} (law)", ""]),
           table_row(["fit with E the true floor", f"{fits['true_floor']['E']:.4f}",
                      value(fits["true_floor"], "alpha"), value(fits["true_floor"], "beta"),
                      f"{powers['true_floor']['a']:.2f} (law)", f"{powers['true_floor']['b']:.2f} (law)", ""]),
           table_row(["IsoFLOP minima", "", "", "", value(iso, "a", 2), value(iso, "b", 2),
                      value(iso, "tokens_per_parameter", 1)]),
           table_row(["Chinchilla (Hoffmann et al. 2022)", "", f"{paper['chinchilla']['alpha']}",
                      f"{paper['chinchilla']['beta']}", f"{paper['chinchilla']['a']}", f"{paper['chinchilla']['b']}",
                      f"about {paper['chinchilla']['tokens_per_parameter']}"]),
           table_row(["Kaplan et al. 2020", "", "", "", f"{paper['kaplan']['a']}", "", ""])]
    c, flops = record["conditions"], record["judged"]["flops"]
    return "\n".join([*rows, "", *front, "", *law, "",
                      f"(true floor {record['floor']['validation_nats_per_token']:.4f} nats/token; the frontier's"
                      f" reducible loss falls {c['frontier_fall']:.1f}x; the best model's standard error is"
                      f" {c['best_validation_error']:.1%} of its reducible loss; (law): the fit's optimum with C ="
                      f" {flops['k']:.1f} N^{flops['gamma']:.3f} D, the FLOPs per token of the sizes within"
                      f" {flops['worst']:.1%})", "", *judged_tables(record)])


def judged_tables(record):
    """The tables of scaling.json's "judged" (scaling_judged.py) that docs/scaling.md shows: E free by the least
    budget fitted, the held-out predictions, and the IsoFLOP exponents by the way the minimum is located."""
    j, floor = record["judged"], record["floor"]["validation_nats_per_token"]

    def e(fit):
        lo, hi = fit["interval"]
        return f"{fit['E']:.3f} [{lo:.3f}, {hi:.3f}]"

    floors = [table_row(["budgets fitted", "cells", f"E free, least squares (truth {floor:.4f})", "E free, Huber",
                         "cost of E at the truth"]), table_row(["---"] * 5)]
    for cut in j["floors_by_cut"]:
        floors.append(table_row([f">= {cut['least_budget'] / 1e9:g} GFLOP", str(cut["cells"]),
                                 e(cut["least_squares"]), e(cut["huber"]), f"{cut['true_floor_cost']:.2f}x"]))
    held = [table_row(["held out", "seed error", "fit", "E", "rms error", "mean error", "worst error"]),
            table_row(["---"] * 7)]
    for cut in j["held_out"]:
        for k, (name, fit) in enumerate(cut["fits"].items()):
            held.append(table_row([", ".join(f"{c / 1e9:g}" for c in cut["held_budgets"]) + " GFLOP" if k == 0
                                   else "", f"{cut['seed_error']:.2%}" if k == 0 else "", name.replace("_", " "),
                                   f"{fit['E']:.3f}", f"{fit['rms_error']:.1%}", f"{fit['mean_error']:+.1%}",
                                   f"{fit['worst_error']:.1%}"]))
    iso = j["isoflop_methods"]
    methods = [table_row(["the minimum of a budget", "N_opt ~ C^a", "D_opt ~ C^b"]), table_row(["---"] * 3)]
    for name, what in (("three_point", "parabola through the least cell and its neighbours"),
                       ("all_sizes", "parabola through every size"), ("least_cell", "the least cell itself")):
        methods.append(table_row([what, f"{iso[name]['a']:.2f}", f"{iso[name]['b']:.2f}"]))
    return [*floors, "", *held, "", *methods]


# ----------------------------------------------------------------------------------------------------------------
# The record's shape


def check_record(record, plan):
    """Raise a ValueError naming the first field that does not have the shape a run of plan gives, or the first
    summary that differs from the one derived again from the record's per-run numbers."""
    check_provenance(record, FORMAT)
    need(record.get("settings") == plan_settings(plan), f"settings {str(record.get('settings'))[:80]} are not this"
         f" code's")
    for key, kind in SUMMARIES.items():  # (their kinds first: deriving them again takes a minute)
        if not isinstance(record.get(key), kind):
            raise TypeError(f"{key} is missing or not {'an object' if kind is dict else 'an array'} in the record")
    floor = record["floor"]
    check_chains_data(record)
    cells = [(name_of(s), c) for s in plan["sizes"] for c in plan["budgets"]]
    keys = [(size, c, lr, plan["seeds"][0]) for size, c in cells for lr in plan["lrs"]]
    runs = record["runs"]
    need([(r["size"], r["budget"], r["lr"], r["seed"]) for r in runs[:len(keys)]] == keys,
         f"expected the first seed's run of every cell at each learning rate of {plan['lrs']} first")
    values, _ = cell_values([r for r in runs if r["seed"] in plan["seeds"]], plan)
    split = [cell for cell in cells if splits(values[cell], plan)]
    fixed = grid_cost(plan)[0]  # (the runs where no cell's seeds split)
    need(len(runs) == fixed + len(split) * len(plan["split_seeds"]), f"{len(runs)} runs, expected"
         f" {fixed} and {len(plan['split_seeds'])} more for each of the {len(split)} cells whose seeds split")
    floors = {"tuning": floor["tuning_nats_per_token"], "validation": floor["validation_nats_per_token"]}
    for r in runs:  # (each what a run of its own settings can give, as a result file is checked)
        problem = run_problem(r, plan, floors, r["lr"] == chosen_lr(runs, plan, r["size"], r["budget"]))
        need(problem is None, problem)
    for seeds, at, what in ((plan["seeds"][1:], cells, "one run of every cell at the rate the first seed chose"),
                            (plan["split_seeds"], split, "one run of each cell whose seeds split, at its chosen rate")):
        for seed in seeds:
            got = [(r["size"], r["budget"], r["lr"]) for r in runs if r["seed"] == seed]
            need(got == [(size, c, chosen_lr(runs, plan, size, c)) for size, c in at], f"seed {seed}: expected {what}")
    derived = summarise(runs, plan, floor)
    for key in derived:
        first_difference(derived[key], record.get(key), key)


# ----------------------------------------------------------------------------------------------------------------
# A rerun of one cell


def rerun(record, size, budget, seed, until):
    """Train one cell of the record (size, budget, seed, at the rate the record chose) up to step until and compare
    its tuning loss there with the record's curve (recording.judged_rerun): with the record's kernels and thread
    count the digits must be the same; with others, the loss must lie within the spread of the record's seeds of
    that size, budget and rate at that step. Returns (ok, one line saying so)."""
    plan, shape = FULL, [int(v) for v in size.split("x")]

    def runs_of(record):
        lr = field(record["cells"][size][str(budget)]["lr"], "a number", f"cells.{size}.{budget}.lr")
        return [r for r in record["runs"] if (r["size"], r["budget"], r["lr"]) == (size, budget, lr)]

    def train(lr):
        tok = tokenizer()
        steps = steps_for(shape, budget, plan["batch"])
        data, _ = run_data(tok, plan, seed, tokens_for(shape, budget, plan["batch"]),
                           held_out(tok, TUNE_SEED, plan["tune_stories"]), ())
        _, history = trained(run_values(plan, shape, steps, lr, seed), data=data, until=until)
        return f"{size} at {budget / 1e9:g} GFLOP lr {lr:g}", history[-1]["val"]

    return judged_rerun(sys.modules[__name__], record, runs_of, seed, until, train)


# ----------------------------------------------------------------------------------------------------------------
# Command line


def main(argv=None):
    parser = experiment_parser(
        "Train models of seven sizes at nine compute budgets on stories of known entropy, and fit the scaling law"
        " to their losses with the floor unknown and known.", RECORD_FILE.name, "3 sizes, 4 budgets",
        {"metavar": "SIZE", "help": "train one cell of scaling.json again (a size, WIDTHxBLOCKS such as 16x1, with"
                                    " --budget and --seed, at the learning rate the record chose, up to --until)"})
    parser.add_argument("--budget", type=int, default=None,
                        help=f"the compute budget of --rerun in FLOPs (default: {FULL['budgets'][0]})")
    grid_options(parser)
    args = parsed(parser, argv, budget=FULL["budgets"][0])
    checked_grid(parser, args)
    return run_or_check(sys.modules[__name__], parser, args, argv, grid=lambda out: grid_settings(args, out))


def grid_settings(args, out):
    """run_experiment's grid options for a record written to out (None for none), the results folder judged at once
    (grid.judged_folder: another grid holding it, a file there that is no result), before the committed record's
    long check; a ValueError names what it refuses."""
    runs_dir = args.runs_dir if args.runs_dir is not None else None if out is None else runs_beside(out)
    if runs_dir is not None:
        grid.judged_folder(runs_dir)
    return {"kind": args.executor, "workers": args.workers, "address": args.scheduler, "runs_dir": runs_dir}


def grid_options(parser):
    """The options of the grid's executor and its results folder (experiments/grid.py)."""
    parser.add_argument("--workers", type=whole, default=None, metavar="N",
                        help=f"the runs trained at once, each in its own process with one BLAS thread (default: every"
                             f" core, here {grid.cores()}; at most {grid.MOST_A_CORE} a core); the record is the"
                             f" same for any N")
    parser.add_argument("--executor", default="process", choices=grid.KINDS,
                        help="where the runs train: a process pool on this machine (the default), this process alone"
                             " (serial), or Dask distributed (dask: a local cluster of --workers processes, or the"
                             " scheduler at --scheduler)")
    parser.add_argument("--scheduler", default=None, metavar="ADDRESS", type=given("a Dask scheduler's address"),
                        help="with --executor dask: the address of a running Dask scheduler (tcp://HOST:8786), whose"
                             " workers train the runs (each must be able to import this lab; the results come back"
                             " to this process, which alone writes --runs-dir)")
    parser.add_argument("--runs-dir", default=None, metavar="DIR", type=given("a folder"),
                        help="the folder of the per-run results, one file a run written as it finishes (default: beside"
                             " the record, out/scaling-runs/ for out/scaling.json; none kept for --check without"
                             " --out). The same command run again reads the results there and trains only the missing"
                             " runs: a stopped grid resumes and ends with the same record. A result there of another"
                             " plan (other settings of the same run) is refused, naming its file, and never replaced:"
                             " give each plan a folder of its own")


def checked_grid(parser, args):
    """Refuse, before any work, grid options that nothing reads (--rerun and --table train no grid) or that do not
    go together; and a --runs-dir that cannot be a folder."""
    given_options = [f"{flag} {value}" for flag, value in (("--workers", args.workers), ("--scheduler", args.scheduler),
                                                           ("--runs-dir", args.runs_dir)) if value is not None]
    if args.executor != "process":
        given_options.insert(0, f"--executor {args.executor}")
    mode = "--rerun" if args.rerun is not None else "--table" if args.table else None
    if mode and given_options:
        parser.error(f"{given_options[0]}: {mode} trains no grid (a rerun trains its one cell in this process); leave"
                     f" it out")
    missing = grid.dask_missing(args.scheduler) if args.executor == "dask" else None
    if missing:
        parser.error(f"--executor dask: {missing}")
    try:
        grid.checked_workers(args.executor, args.workers, args.scheduler)
        if args.runs_dir is not None:
            grid.results_folder(args.runs_dir)
    except ValueError as e:
        parser.error(f"--runs-dir {args.runs_dir}: {e}" if "results folder" in str(e) else str(e))
    if args.runs_dir is not None and args.out is not None and same_file(args.runs_dir, Path(args.out).parent):
        parser.error(f"--runs-dir {args.runs_dir} is the folder of --out {args.out}, where the record would lie among"
                     f" the results and be taken for one; give the runs a folder of their own")
    problem = grid.scheduler_problem(args.scheduler) if args.scheduler is not None else None
    if problem:  # (tried once, before the record's long check: a silent listener takes its whole time limit)
        parser.error(problem)


def runs_beside(out):
    """The folder of per-run results beside the record written to out.

    >>> runs_beside("out/scaling.json")
    'out/scaling-runs'
    """
    return str(Path(out).with_name(Path(out).stem + "-runs"))


def rerun_cell(parser, args, record):
    """The cell scaling.py --rerun trains, its arguments checked against the record (recording.rerun_main): rerun's
    size and budget, and the tuning curve whose steps --until may name (that of the rate the record chose)."""
    cells = field(record["cells"], "an object", "cells")
    if args.rerun not in cells:
        parser.error(f"--rerun {args.rerun}: {RECORD_FILE.name} has the sizes {', '.join(cells)} (width x blocks)")
    if str(args.budget) not in field(cells[args.rerun], "an object", f"cells.{args.rerun}"):
        parser.error(f"--budget {args.budget}: {RECORD_FILE.name} has the budgets"
                     f" {', '.join(map(str, record['settings']['budgets']))}")
    lr = cells[args.rerun][str(args.budget)]["lr"]
    runs = [r for r in record["runs"] if (r["size"], r["budget"], r["lr"]) == (args.rerun, args.budget, lr)]
    seeds = [r["seed"] for r in runs]
    if args.seed in record["settings"]["split_seeds"] and args.seed not in seeds:
        parser.error(f"--seed {args.seed}: {args.rerun} at {args.budget} FLOPs has the seeds {seeds} (its seeds did"
                     f" not split, so it trained no more)")
    return {"size": args.rerun, "budget": args.budget}, runs[0]["tune_curve"]


if __name__ == "__main__":
    sys.exit(main())
