"""Scaling in a teacup: the loss of models of seven sizes, each trained at seven compute budgets, against the true
entropy floor of its data, and the scaling law fitted to them with that floor unknown and known.

    python3 -m experiments.scaling            # the full grid (the record says how long it took): out/scaling.json
    python3 -m experiments.scaling --out experiments/scaling.json   # the same, replacing the committed record
    python3 -m experiments.scaling --check    # a reduced grid (seconds), scaling.json's shape, every summary again
    python3 -m experiments.scaling --rerun 16x1 --budget 10000000000 --seed 4   # one cell trained again, checked

The data: chains.py's stories (a thing handed along a chain of three hand-overs; 27.94 nats a story, every story as
likely as every other), drawn fresh for each seed and read once. A run's training stream is its seed's stories, one
after another, each with its newline; it reads windows of 65 tokens that follow each other (starts 0, 64, 128, ...:
every token is a target once), so no run reads a window twice, and the record counts how many of the stories it read
were equal (about none). The 300 tuning stories choose the learning rates; the 8,000 validation stories report, read
only by the runs the sweep chose (enough that the best model's reducible loss has a standard error of a few percent
of itself, over the stories); each set drawn with a seed of its own, read from its start as train.py reads its
validation stories. Their floor is exact: every story's -log p is the generator's entropy, so the floor is stories x
entropy / tokens.

The grid: widths 8, 16, 32 and 64 (4 d hidden units, one head) with one or two blocks (sizes: from 856 to 99,584
non-embedding parameters, 116x), each at every compute budget C (10 to 640 GFLOP, 64x): a size trains for the steps
of 16 windows that spend C by sizes.flops_per_token (Chinchilla's approach 2: IsoFLOP curves). Every run is the
library's training (training.train: numpy_fast.py, float32, Adam, clipping, a warm-up of a tenth of the run up to
100 steps and a cosine to a tenth of the peak learning rate). The sweep: in every cell (size, budget) the first seed
trains at each learning rate of the plan (0.003, 0.01, 0.03) and the lowest loss on the tuning stories chooses the
rate; the two other seeds train at the chosen one, so every point the fits rest on has three seeds.

The summaries, each derived from the runs' raw numbers (so `--check` derives them again):
- each cell's validation loss across seeds, and its reducible loss L - E with E the true floor;
- the frontier: per budget, the size of least loss, and N_opt, D_opt from a parabola in log N (log D) through the
  least-loss cell and its neighbours, with tokens per parameter D_opt / N_opt;
- the law L = E + A / N^alpha + B / D^beta fitted by least squares on log L over every cell (N non-embedding
  parameters, D training tokens), once with E free and once with E fixed at the true floor; and the exponents of
  N_opt ~ C^a and D_opt ~ C^b, fitted on the frontier's budgets whose least cell is neither the smallest nor the
  largest size (`interior`) (the law, its fit and the cells it reads: experiments/scaling_law.py);
- their intervals: 2.5th to 97.5th percentiles over 200 bootstrap resamplings, each drawing every cell's three seeds
  with replacement, the cells (for the law) and the budgets (for a and b) with replacement.

Same code, same machine, kernels and thread count: the same record, bit for bit, but the "seconds" fields.
"""

import math
import random
import statistics
import sys
import time
from pathlib import Path
from types import SimpleNamespace

from oneblock import machine

with machine.needed_by("python3 -m experiments.scaling"):
    import numpy as np

    import bpe
    from experiments import chains
    from experiments.recording import (across_seeds, check_provenance, experiment_parser, field, first_difference,
                                       losses_at, need, parsed, provenance, reading, rerun_main, rerun_verdict,
                                       rounded, run_or_check, table_row, trained, writes)
    from experiments.scaling_law import cell_values, chosen_lr, fit_law, law_summary, name_of, slope
    from experiments.scaling_law import STARTS, law  # noqa: F401  (scaling.law and scaling.STARTS, as before)
    from oneblock import numpy_fast, sizes
    from oneblock.data import TOKENIZER_FILE
    from oneblock.settings import Settings, model_config

# ----------------------------------------------------------------------------------------------------------------
# Settings

HERE = Path(__file__).resolve().parent
RECORD_FILE = HERE / "scaling.json"
SCRIPT = "python3 -m experiments.scaling"  # this experiment's command, from the lab's folder
FORMAT = "scaling experiment v1"  # the record's "format" field
VOCAB, T = 96, Settings().max_len  # the tokenizer's tokens; the window of every run, 64 tokens (train.py's)
FULL = {  # the recorded grid: about half an hour of one core
    "sizes": [[8, 1], [16, 1], [16, 2], [32, 1], [32, 2], [64, 1], [64, 2]],  # [width, blocks]
    "budgets": [10_000_000_000 * 2 ** k for k in range(7)],  # FLOPs of a run: 10 to 640 GFLOP
    "lrs": [0.003, 0.01, 0.03], "seeds": [3, 4, 5], "batch": 16,
    "tune_stories": 300, "validation_stories": 8000, "curve_points": 4, "bootstrap": 200,
}
REDUCED = {  # --check: the same shape in seconds
    "sizes": [[8, 1], [16, 1], [32, 1]], "budgets": [300_000_000, 600_000_000, 1_200_000_000, 2_400_000_000],
    "lrs": [0.01, 0.03], "seeds": [3, 4, 5], "batch": 4,
    "tune_stories": 20, "validation_stories": 40, "curve_points": 2, "bootstrap": 10,
}
TUNE_SEED, VALIDATION_SEED = 1001, 1002  # random.Random seeds of the held-out stories (a run's: its own seed)
BOOTSTRAP_SEED = 0  # numpy.random.default_rng's seed of the resamplings
PUBLISHED = {  # what the papers found, for docs/scaling.md
    "chinchilla": {"alpha": 0.34, "beta": 0.28, "a": 0.5, "b": 0.5, "tokens_per_parameter": 20},
    "kaplan": {"a": 0.73},
}


def size_config(size):
    """The ModelConfig of a size [width, blocks]: train.py's model of that width (4 d hidden units, one head, learned
    positions) and blocks, over the VOCAB tokens.

    >>> size_config([64, 2]).describe(), size_config([64, 2]).hidden
    ('2 blocks x 1 head, width 64, learned positions', 256)
    """
    return model_config(Settings(width=size[0], blocks=size[1]), VOCAB)


def flops_per_token(size):
    """A size's FLOPs per training token (sizes.flops_per_token, 4 d hidden units, 64 positions).

    >>> flops_per_token([16, 1])
    39936
    """
    config = size_config(size)
    return sizes.flops_per_token(config.vocab, config.d, config.hidden, config.blocks, T)


def parameters(size):
    """A size's non-embedding parameters (sizes.non_embedding_parameters).

    >>> parameters([8, 1]), parameters([64, 2])
    (856, 99584)
    """
    config = size_config(size)
    return sizes.non_embedding_parameters(config.d, config.hidden, config.blocks)


def steps_for(size, budget, batch):
    """The steps of batch windows of 64 tokens that spend about budget FLOPs (at least one).

    >>> steps_for([8, 1], 10_000_000_000, 16), steps_for([64, 2], 10_000_000_000, 16)
    (636, 13)
    """
    return max(1, round(budget / (flops_per_token(size) * batch * T)))


def grid_cost(plan):
    """(runs, training FLOPs, training tokens) of a plan, by formula: every cell once per learning rate (the first
    seed) and once per other seed.

    >>> runs, flops, tokens = grid_cost(FULL)
    >>> runs, f"{flops:.3g}", f"{tokens:.3g}"
    (245, '4.45e+13', '7.72e+08')
    """
    per_cell = len(plan["lrs"]) + len(plan["seeds"]) - 1
    cells = [(size, steps_for(size, c, plan["batch"]) * plan["batch"] * T) for size in plan["sizes"]
             for c in plan["budgets"]]  # (size, tokens) of every cell
    flops = sum(tokens * flops_per_token(size) for size, tokens in cells)
    return per_cell * len(cells), per_cell * flops, per_cell * sum(tokens for _, tokens in cells)


# ----------------------------------------------------------------------------------------------------------------
# The data: fresh stories, read once


def held_out(tok, seed, count):
    """(stories as token IDs, each the newline before it, the story and its newline; their tokens predicted; their
    floor in nats per token) of count stories drawn with random.Random(seed)."""
    rng, pieces, newline = random.Random(seed), chains.piece_tokens(tok), tok.encode("\n")
    ids = [newline + chains.story_ids(chains.draw(rng), pieces) + newline for _ in range(count)]
    tokens = sum(len(x) - 1 for x in ids)
    return ids, tokens, count * chains.entropy() / tokens


def story_key(choices):
    """A story's choices as a tuple, to count equal stories."""
    return choices["place"], *(tuple(p) for p in choices["people"]), *choices["receivers"]


def training_stream(tok, seed, tokens, held=()):
    """(stream, counts): at least tokens + 1 token IDs of stories drawn with random.Random(seed), each with its
    newline (an int32 array), and {"stories", "distinct", "held_out"}: how many stories it holds, how many of them
    differ, and how many are among the held-out stories' keys held."""
    rng, pieces, newline = random.Random(seed), chains.piece_tokens(tok), tok.encode("\n")
    stream, seen, count = [], set(), 0
    while len(stream) < tokens + 1:
        choices = chains.draw(rng)
        stream += chains.story_ids(choices, pieces) + newline
        seen.add(story_key(choices))
        count += 1
    return np.array(stream, dtype=np.int32), {"stories": count, "distinct": len(seen),
                                               "held_out": len(seen & set(held))}


def held_keys(seed, count):
    """The keys of the count stories random.Random(seed) draws first (held_out's stories)."""
    rng = random.Random(seed)
    return {story_key(chains.draw(rng)) for _ in range(count)}


def story_nats(params, config, stories):
    """Each story's -log p in nats under the model of params and config (float64), predicting its tokens after the
    first; stories of equal length go through numpy_fast.forward as one batch."""
    out = np.empty(len(stories))  # (S,)
    for n in sorted({len(ids) for ids in stories}):
        rows = [i for i, ids in enumerate(stories) if len(ids) == n]
        batch = np.array([stories[i] for i in rows])  # (b, n)
        logits, _ = numpy_fast.forward(params, batch[:, :-1], config)  # (b, n - 1, V)
        z = np.asarray(logits, dtype=np.float64)  # (b, n - 1, V)
        z -= z.max(axis=2, keepdims=True)
        logp = z - np.log(np.exp(z).sum(axis=2, keepdims=True))  # (b, n - 1, V)
        picked = np.take_along_axis(logp, batch[:, 1:, None], axis=2)[:, :, 0]  # (b, n - 1)
        out[rows] = -picked.sum(axis=1)
    return out


def mean_and_error(nats, tokens_each):
    """(loss in nats per token, its standard error): the ratio of the stories' total nats to their total tokens,
    and the ratio estimator's error over the stories (each story's residual nats - tokens x loss).

    >>> mean_and_error(np.array([2.0, 4.0]), np.array([2, 2]))
    (1.5, 0.5)
    """
    loss = float(nats.sum() / tokens_each.sum())
    residual = nats - tokens_each * loss  # (S,)
    error = float(residual.std(ddof=1) / math.sqrt(len(nats)) / tokens_each.mean())
    return loss, error


# ----------------------------------------------------------------------------------------------------------------
# One run


def run_values(plan, size, steps, lr, seed):
    """The training settings of one run: the size, its steps of the plan's batch, the peak rate lr decaying to a
    tenth of itself, a warm-up of a tenth of the run (at most 100 steps), the tuning loss curve_points times.

    >>> run_values(FULL, [64, 2], 13, 0.01, 4)["warmup"], run_values(FULL, [8, 1], 40690, 0.03, 3)["eval_every"]
    (1, 10172)
    """
    return {"width": size[0], "blocks": size[1], "steps": steps, "batch": plan["batch"], "lr": lr, "min_lr": lr / 10,
            "warmup": min(100, steps // 10), "seed": seed, "eval_every": max(1, steps // plan["curve_points"])}


def run_cell(plan, size, budget, lr, seed, data):
    """Train one size at one budget, learning rate and seed on data (its seed's stream, the tuning stories in the
    place of validation stories); return (the trained weights, the run's raw numbers, its validation loss still
    None: only the runs the sweep chooses read the validation stories, `validate`)."""
    t0 = time.perf_counter()
    steps = steps_for(size, budget, plan["batch"])
    params, history = trained(run_values(plan, size, steps, lr, seed), data=data)
    tokens = steps * plan["batch"] * T
    return params, rounded({"size": name_of(size), "budget": budget, "lr": lr, "seed": seed, "steps": steps,
                            "tokens": tokens, "flops": tokens * flops_per_token(size), "tune": history[-1]["val"],
                            "tune_curve": [[h["step"], h["val"]] for h in history], "val": None, "val_error": None,
                            "seconds": round(time.perf_counter() - t0, 1)})


def validate(run, params, config, validation):
    """The run with its validation loss and that loss's standard error, from the weights it trained (of the model
    config describes); validation: (stories, their tokens each)."""
    val, error = mean_and_error(story_nats(params, config, validation[0]), validation[1])
    return {**run, "val": rounded(val), "val_error": rounded(error)}


def run_data(tok, plan, seed, tokens, tuning, held):
    """The data a run of seed reads: the stream of its stories (enough for tokens), its windows in order, and the
    tuning stories to judge it by; with the counts of its stories."""
    stream, counts = training_stream(tok, seed, tokens, held)
    windows = (len(stream) - 1) // T  # windows of T + 1 tokens that share their ends
    data = SimpleNamespace(tok=tok, vocab=VOCAB, stream=stream, order=range(0, windows * T, T), val_ids=tuning[0],
                           val_tokens=tuning[1], val_batch=None, val_floor=tuning[2])
    return data, counts


# ----------------------------------------------------------------------------------------------------------------
# The experiment


def runs_in(plan):
    """How many runs plan trains.

    >>> runs_in(FULL), runs_in(REDUCED)
    (245, 48)
    """
    return grid_cost(plan)[0]


def run_experiment(plan, report=print):
    """Train the grid of plan: every cell at every learning rate with the first seed, then with the others at the
    rate it chose; return the record (a dict)."""
    started, cpu = time.perf_counter(), time.process_time()
    tok = bpe.Tokenizer.load(TOKENIZER_FILE)
    tuning = held_out(tok, TUNE_SEED, plan["tune_stories"])
    validation = held_out(tok, VALIDATION_SEED, plan["validation_stories"])
    val_each = (validation[0], np.array([len(x) - 1 for x in validation[0]]))
    held = held_keys(TUNE_SEED, plan["tune_stories"]) | held_keys(VALIDATION_SEED, plan["validation_stories"])
    cells = [(size, budget) for size in plan["sizes"] for budget in plan["budgets"]]
    longest = max(steps_for(size, budget, plan["batch"]) for size, budget in cells) * plan["batch"] * T
    runs, streams, chosen = [], {}, {}
    for seed in plan["seeds"]:
        data, streams[str(seed)] = run_data(tok, plan, seed, longest, tuning, held)
        for size, budget in cells:
            lrs = plan["lrs"] if seed == plan["seeds"][0] else [chosen[name_of(size), budget]]
            trials = [run_cell(plan, size, budget, lr, seed, data) for lr in lrs]
            best = min(range(len(trials)), key=lambda k: trials[k][1]["tune"])  # the first of equal ones
            chosen[name_of(size), budget] = trials[best][1]["lr"]
            for k, (params, run) in enumerate(trials):
                run = validate(run, params, size_config(size), val_each) if k == best else run
                runs.append(run)
                val = (f"val {run['val']:.4f} ± {run['val_error']:.4f} (floor {validation[2]:.4f})" if k == best
                       else "not chosen")
                report(f"{run['size']:>4} at {budget / 1e9:g} GFLOP, lr {run['lr']:<5g} seed {seed}:"
                       f" {run['steps']} steps, tune {run['tune']:.4f} | {val} | {run['seconds']} s")
        del data
    floor = rounded({"validation_nats_per_token": validation[2], "tuning_nats_per_token": tuning[2],
                     "entropy_nats_per_story": chains.entropy(), "uniform_nats_per_token": math.log(VOCAB)})
    made, sources = provenance(started, cpu)
    record = {
        "format": FORMAT,
        "command": "python3 -m experiments.scaling" + (" --check" if plan is REDUCED else ""),
        **made,
        "settings": plan_settings(plan),
        **sources,
        "floor": floor,
        "data": {"validation_tokens": int(val_each[1].sum()), "tuning_tokens": tuning[1],
                 "stories_in_the_world": chains.stories(), "streams": streams},
        "runs": runs,
    }
    return {**record, **summarise(runs, plan, floor)}


def plan_settings(plan):
    """The plan as the record keeps it, with each size's FLOPs per token and non-embedding parameters."""
    return {**plan, "flops_per_token": {name_of(s): flops_per_token(s) for s in plan["sizes"]},
            "parameters": {name_of(s): parameters(s) for s in plan["sizes"]}}


# ----------------------------------------------------------------------------------------------------------------
# The summaries: frontier, fits (the law, its fit and the cells' values are scaling_law.py's)


def parabola_minimum(x, y):
    """The x of the least y of points (x, y) (x increasing), from the parabola through the least point and its
    neighbours (the three at an end, when the least is there), and whether the least point is interior.

    >>> x, interior = parabola_minimum([0.0, 1.0, 2.0, 3.0], [3.0, 1.0, 1.0, 3.0])
    >>> round(x, 9), interior
    (1.5, True)
    """
    k = int(np.argmin(y))
    lo = min(max(k - 1, 0), len(x) - 3)
    c2, c1, _ = np.polyfit(x[lo:lo + 3], y[lo:lo + 3], 2)
    interior = 0 < k < len(x) - 1
    if c2 <= 0:  # no minimum: the least point itself
        return float(x[k]), interior
    return float(-c1 / (2 * c2)), interior


def frontier(means, plan, floor):
    """Per budget: the size of least mean loss, its reducible loss, N_opt and D_opt (parabolas in log N and log D
    through the least cell and its neighbours), tokens per parameter, and whether the least cell is interior."""
    out = []
    n = np.log([parameters(s) for s in plan["sizes"]])  # (sizes,)
    for budget in plan["budgets"]:
        loss = np.array([means[name_of(s), budget] for s in plan["sizes"]])  # (sizes,)
        d = np.log([steps_for(s, budget, plan["batch"]) * plan["batch"] * T for s in plan["sizes"]])  # decreasing
        log_n, inside = parabola_minimum(n, loss)
        log_d, _ = parabola_minimum(d[::-1], loss[::-1])
        k = int(np.argmin(loss))
        out.append({"budget": budget, "best_size": name_of(plan["sizes"][k]), "loss": float(loss[k]),
                    "reducible": float(loss[k]) - floor, "interior": inside, "n_opt": math.exp(log_n),
                    "d_opt": math.exp(log_d), "tokens_per_parameter": math.exp(log_d - log_n)})
    return out


def summaries_of(values, plan, floor):
    """The point summaries (frontier, law fits, IsoFLOP exponents) of cell values {(size, budget): [losses]}."""
    means = {key: statistics.fmean(v) for key, v in values.items()}
    front = frontier(means, plan, floor)
    keys = list(values)
    n = np.array([parameters([int(v) for v in size.split("x")]) for size, _ in keys], dtype=float)
    d = np.array([steps_for([int(v) for v in size.split("x")], c, plan["batch"]) * plan["batch"] * T
                  for size, c in keys], dtype=float)
    fits = law_summary((n, d, np.array([means[k] for k in keys])), floor)
    usable = interior(front)
    c = [f["budget"] for f in usable]
    iso = {"a": slope(c, [f["n_opt"] for f in usable]), "b": slope(c, [f["d_opt"] for f in usable]),
           "budgets": c}
    return front, fits, iso, (n, d, keys)


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


def interval(values):
    """The 2.5th and 97.5th percentiles of bootstrap values.

    >>> interval(list(range(201)))
    [5.0, 195.0]
    """
    return [float(np.percentile(values, 2.5)), float(np.percentile(values, 97.5))]


def summarise(runs, plan, floor):
    """Every summary of the record, from the runs: {"cells", "frontier", "fits", "isoflop", "conditions"}."""
    values, rates = cell_values(runs, plan)
    e = floor["validation_nats_per_token"]
    front, fits, iso, where = summaries_of(values, plan, e)
    boot = bootstrap(values, plan, e, fits, where)
    cells = {size: {str(c): {"lr": rates[size, c], "val": across_seeds(values[size, c]),
                             "reducible": statistics.fmean(values[size, c]) - e} for c in plan["budgets"]}
             for size in map(name_of, plan["sizes"])}
    for name in ("free_floor", "true_floor"):
        reps = np.array(boot[name])  # (bootstrap, 3): E, alpha, beta
        fits[name] = {**{k: v for k, v in fits[name].items() if k != "x"},
                      "intervals": {"E": interval(reps[:, 0]), "alpha": interval(reps[:, 1]),
                                    "beta": interval(reps[:, 2])}}
    tpp = float(np.exp(np.mean(np.log([f["tokens_per_parameter"] for f in interior(front)]))))
    isoflop = {"a": iso["a"], "b": iso["b"], "budgets": iso["budgets"], "tokens_per_parameter": tpp,
               "intervals": {k: interval(boot[k]) for k in ("a", "b", "tokens_per_parameter")}}
    largest = name_of(plan["sizes"][-1])
    top, below = (values[largest, c] for c in plan["budgets"][:-3:-1])
    conditions = {"frontier_fall": front[0]["reducible"] / front[-1]["reducible"],
                  "largest_gains_at_the_top": statistics.fmean(below) - statistics.fmean(top),
                  "largest_gain_beyond_seeds": min(below) > max(top),
                  "best_validation_error": min((r for r in runs if r["size"] == front[-1]["best_size"]
                                                and r["budget"] == plan["budgets"][-1]),
                                               key=lambda r: r["val"] or math.inf)["val_error"]
                  / front[-1]["reducible"]}
    return rounded({"cells": cells, "frontier": front, "fits": fits, "isoflop": isoflop, "conditions": conditions})


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
    law = [table_row(["", "E", "alpha", "beta", "N_opt ~ C^a", "D_opt ~ C^b", "tokens per parameter"]),
           table_row(["---"] * 7),
           table_row(["fit with E free", value(fits["free_floor"], "E", 4), value(fits["free_floor"], "alpha"),
                      value(fits["free_floor"], "beta"), f"{fits['free_floor']['implied_a']:.2f} (law)",
                      f"{fits['free_floor']['implied_b']:.2f} (law)", ""]),
           table_row(["fit with E the true floor", f"{fits['true_floor']['E']:.4f}",
                      value(fits["true_floor"], "alpha"), value(fits["true_floor"], "beta"),
                      f"{fits['true_floor']['implied_a']:.2f} (law)", f"{fits['true_floor']['implied_b']:.2f} (law)",
                      ""]),
           table_row(["IsoFLOP minima", "", "", "", value(iso, "a", 2), value(iso, "b", 2),
                      value(iso, "tokens_per_parameter", 1)]),
           table_row(["Chinchilla (Hoffmann et al. 2022)", "", f"{paper['chinchilla']['alpha']}",
                      f"{paper['chinchilla']['beta']}", f"{paper['chinchilla']['a']}", f"{paper['chinchilla']['b']}",
                      f"about {paper['chinchilla']['tokens_per_parameter']}"]),
           table_row(["Kaplan et al. 2020", "", "", "", f"{paper['kaplan']['a']}", "", ""])]
    c = record["conditions"]
    return "\n".join([*rows, "", *front, "", *law, "",
                      f"(true floor {record['floor']['validation_nats_per_token']:.4f} nats/token; the frontier's"
                      f" reducible loss falls {c['frontier_fall']:.1f}x; the best model's standard error is"
                      f" {c['best_validation_error']:.1%} of its reducible loss)"])


# ----------------------------------------------------------------------------------------------------------------
# The record's shape


def check_record(record, plan):
    """Raise a ValueError naming the first field that does not have the shape a run of plan gives, or the first
    summary that differs from the one derived again from the record's per-run numbers."""
    need(record.get("format") == FORMAT, f"format is {record.get('format')!r}, expected {FORMAT!r}")
    need(record.get("settings") == plan_settings(plan), f"settings {str(record.get('settings'))[:80]} are not this"
         f" code's")
    check_provenance(record)
    floor = record["floor"]
    need(floor["entropy_nats_per_story"] == rounded(chains.entropy()), "the entropy is not chains.py's")
    cells = [(name_of(s), c) for s in plan["sizes"] for c in plan["budgets"]]
    keys = [(size, c, lr, plan["seeds"][0]) for size, c in cells for lr in plan["lrs"]]
    runs = record["runs"]
    need([(r["size"], r["budget"], r["lr"], r["seed"]) for r in runs[:len(keys)]] == keys,
         f"expected the first seed's run of every cell at each learning rate of {plan['lrs']} first")
    need(len(runs) == runs_in(plan), f"{len(runs)} runs, expected {runs_in(plan)}")
    sizes_of = {name_of(s): s for s in plan["sizes"]}
    for r in runs:
        name = f"{r['size']} at {r['budget']} FLOPs lr {r['lr']:g} seed {r['seed']}"
        steps = steps_for(sizes_of[r["size"]], r["budget"], plan["batch"])
        need(r["steps"] == steps and r["tokens"] == steps * plan["batch"] * T, f"{name}: steps or tokens are not"
             f" the budget's")
        need(r["flops"] == r["tokens"] * flops_per_token(sizes_of[r["size"]]), f"{name}: flops are not the formula's")
        need(r["tune_curve"][-1] == [steps, r["tune"]], f"{name}: the tuning curve does not end at the last step")
        if r["lr"] == chosen_lr(runs, plan, r["size"], r["budget"]):
            need(r["val"] > floor["validation_nats_per_token"] - 5 * r["val_error"] - 1e-6, f"{name}: val"
                 f" {r['val']} is below the floor")
        else:
            need(r["val"] is None and r["val_error"] is None, f"{name}: a run the sweep did not choose has read"
                 f" the validation stories")
        need(r["tune"] > floor["tuning_nats_per_token"] - 0.05, f"{name}: tune {r['tune']} is far below the floor")
    for seed in plan["seeds"][1:]:
        got = [(r["size"], r["budget"], r["lr"]) for r in runs if r["seed"] == seed]
        want = [(size, c, chosen_lr(runs, plan, size, c)) for size, c in cells]
        need(got == want, f"seed {seed}: expected one run of every cell at the rate the first seed chose")
    for seed, counts in record["data"]["streams"].items():
        need(counts["held_out"] == 0, f"seed {seed}'s training stories include {counts['held_out']} held-out ones")
    derived = summarise(runs, plan, floor)
    for key in derived:
        first_difference(derived[key], record.get(key), key)


# ----------------------------------------------------------------------------------------------------------------
# A rerun of one cell


def rerun(record, size, budget, seed, until):
    """Train one cell of the record (size, budget, seed, at the rate the record chose) up to step until and compare
    its tuning loss there with the record's curve (recording.rerun_verdict): with the record's kernels and thread
    count the digits must be the same; with others, the loss must lie within the spread of the record's seeds of
    that size, budget and rate at that step. Returns (ok, one line saying so). Every field of the record it needs is
    read before it trains: a damaged record is a ValueError naming it (recording.reading)."""
    plan = FULL
    with reading(RECORD_FILE, writes(SCRIPT, RECORD_FILE), also=(ValueError,)):
        lr = field(record["cells"][size][str(budget)]["lr"], "a number", f"cells.{size}.{budget}.lr")
        runs = [r for r in record["runs"] if (r["size"], r["budget"], r["lr"]) == (size, budget, lr)]
        run = next(r for r in runs if r["seed"] == seed)
        recorded, seeds = losses_at([run], until)[0], losses_at(runs, until)
        field(record["machine"], "a string", "machine")
    tok = bpe.Tokenizer.load(TOKENIZER_FILE)
    width, blocks = (int(v) for v in size.split("x"))
    steps = steps_for([width, blocks], budget, plan["batch"])
    data, _ = run_data(tok, plan, seed, steps * plan["batch"] * T, held_out(tok, TUNE_SEED, plan["tune_stories"]), ())
    _, history = trained(run_values(plan, [width, blocks], steps, lr, seed), data=data, until=until)
    got = rounded(history[-1]["val"])
    cell = f"{size} at {budget / 1e9:g} GFLOP lr {lr:g} seed {seed} at step {until}: tune {got:.6g}, recorded" \
           f" {recorded:.6g}"
    return rerun_verdict(cell, got, recorded, record, seeds)


# ----------------------------------------------------------------------------------------------------------------
# Command line


def main(argv=None):
    parser = experiment_parser(
        "Train models of seven sizes at seven compute budgets on stories of known entropy, and fit the scaling law"
        " to their losses with the floor unknown and known.", RECORD_FILE.name, "3 sizes, 4 budgets",
        {"metavar": "SIZE", "help": "train one cell of scaling.json again (a size, WIDTHxBLOCKS such as 16x1, with"
                                    " --budget and --seed, at the learning rate the record chose, up to --until) and"
                                    " check its tuning loss against the record's: the same digits with the record's"
                                    " kernels and thread count, else within the spread of the record's seeds at that"
                                    " step; exit 1 if not"})
    parser.add_argument("--budget", type=int, default=None,
                        help=f"the compute budget of --rerun in FLOPs (default: {FULL['budgets'][0]})")
    args = parsed(parser, argv, budget=FULL["budgets"][0])
    if args.rerun is not None:
        return rerun_main(parser, args, SCRIPT, (RECORD_FILE, FORMAT), rerun_cell, rerun)
    return run_or_check(sys.modules[__name__], args, argv)


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
    run = next(r for r in record["runs"] if (r["size"], r["budget"], r["lr"]) == (args.rerun, args.budget, lr))
    return {"size": args.rerun, "budget": args.budget}, run["tune_curve"]


if __name__ == "__main__":
    sys.exit(main())
