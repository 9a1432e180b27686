"""The scaling law's fits judged by what the lab knows and they do not: the true floor, and the losses of budgets a
fit never saw. experiments/scaling.py derives these from its record's cells, with the rest of its summaries:
the floors by cut (`floors_by_cut`: E free fitted on the budgets from a least one up, by least squares and by
Huber, beside the true floor), held-out predictions (`held_out`), the IsoFLOP minimum located three ways
(`isoflop_methods`, `minimum`) and the law's own exponents with FLOPs as they are (`flop_power`, `law_exponents`).
What each is and what they found: docs/scaling.md, "What it found".

    >>> law_exponents({"alpha": 0.5, "beta": 0.5}, 1.0)  # C proportional to N D: half and half
    {'a': 0.5, 'b': 0.5}
"""

import math
import statistics

import numpy as np

from experiments import grid
from experiments.scaling_law import TIGHT, fit_huber, fit_law, law, law_cost, name_of, slope
from experiments.scaling_runs import flops_per_token, parameters, tokens_for

LEFT = 4  # the fewest budgets a floor by cut is fitted on (on three, five parameters are not pinned)
JUDGED_SEED = 1  # numpy.random.default_rng's seed of floors_by_cut's resamplings (scaling.py's summaries)
PARALLEL_FROM = 200  # floors_by_cut's bootstrap fits from which they go through a pool (below, its start costs more)
HELD = (1, 2, 3)  # the top budgets each held-out fit leaves out (where at least two budgets stay to fit)
FITS = {  # the held-out fits: name -> (fit, with the floor given)
    "least_squares": (fit_law, False),
    "huber": (fit_huber, False),
    "true_floor": (fit_law, True),
}

# ----------------------------------------------------------------------------------------------------------------
# The cells as arrays


def cell_arrays(values, plan):
    """(keys, n, d, c, loss) of every cell (size, budget) of the plan in its order: non-embedding parameters, training
    tokens, budget and the mean of its seeds' losses (values: {(size, budget): [losses]}), as arrays of one value a
    cell."""
    keys = [(name_of(s), c) for s in plan["sizes"] for c in plan["budgets"]]
    sizes = {name_of(s): s for s in plan["sizes"]}
    n = np.array([parameters(sizes[k]) for k, _ in keys], dtype=float)  # (cells,)
    d = np.array([tokens_for(sizes[k], c, plan["batch"]) for k, c in keys], dtype=float)  # (cells,)
    c = np.array([c for _, c in keys], dtype=float)  # (cells,)
    loss = np.array([statistics.fmean(values[k]) for k in keys])  # (cells,)
    return keys, n, d, c, loss


# ----------------------------------------------------------------------------------------------------------------
# Floors by cut: E free, fitted from a least budget up


def floors_by_cut(values, plan, floor, rng):
    """For each least budget (all but the top LEFT - 1, so that LEFT budgets or more are fitted): the cells fitted,
    E free by least squares and by Huber with their bootstrap intervals (2.5th to 97.5th percentiles over
    plan["bootstrap"] resamplings of every cell's seeds, then of the cut's cells, each fit warm-started at its point
    fit), and the least-squares cost with E the true floor over that with E free. E and its interval are kept to
    1e-4 nats (nats), and every fit converges fully (scaling_law.TIGHT), so that a record's floors come out the
    same on every BLAS kernel."""
    keys, n, d, c, loss = cell_arrays(values, plan)
    cuts = []
    for least in plan["budgets"][:-LEFT + 1]:
        at = c >= least  # (cells,)
        free, x_free = fit_law(n[at], d[at], loss[at], **TIGHT)
        huber, x_huber = fit_huber(n[at], d[at], loss[at], **TIGHT)
        _, x_true = fit_law(n[at], d[at], loss[at], floor=floor, **TIGHT)
        ratio = law_cost(x_true, n[at], d[at], loss[at], floor) / law_cost(x_free, n[at], d[at], loss[at])
        cuts.append({"least_budget": least, "cells": int(at.sum()), "least_squares": {"E": free["E"], "x": x_free},
                     "huber": {"E": huber["E"], "x": x_huber}, "true_floor_cost": ratio})
    replicas = {(k, name): [] for k in range(len(cuts)) for name in ("least_squares", "huber")}
    jobs = []  # (cut, name, the fit's arguments): every resampling drawn first, then fitted (refit_floors)
    for _ in range(plan["bootstrap"]):
        drawn = np.array([float(np.mean(np.array(values[k])[rng.integers(0, len(values[k]), len(values[k]))]))
                          for k in keys])  # (cells,): each cell's seeds drawn again
        for k, cut in enumerate(cuts):
            inside = np.flatnonzero(c >= cut["least_budget"])
            pick = inside[rng.integers(0, len(inside), len(inside))]  # the cut's cells drawn again
            jobs += [(k, name, (name, n[pick], d[pick], drawn[pick], cut[name]["x"]))
                     for name in ("least_squares", "huber")]
    for (k, name, _), e in zip(jobs, refit_floors([job for _, _, job in jobs])):
        replicas[k, name].append(e)
    for k, cut in enumerate(cuts):
        for name in ("least_squares", "huber"):
            cut[name] = {"E": nats(cut[name]["E"]), "interval": [nats(e) for e in percentiles(replicas[k, name])]}
    return cuts


def refit_floor(job):
    """The E of one bootstrap fit of floors_by_cut: job (the fit's name, n, d, loss, its start), warm-started there.

    >>> n, d = np.repeat([1e3, 1e4, 1e5], 3), np.tile([1e5, 1e6, 1e7], 3)  # (9,), (9,)
    >>> round(refit_floor(("huber", n, d, 0.5 + 20 / n ** 0.4 + 300 / d ** 0.3, [-0.7, 3.0, 0.4, 5.7, 0.3])), 4)
    0.5
    """
    name, n, d, loss, start = job
    fitted, _ = (fit_law if name == "least_squares" else fit_huber)(n, d, loss, starts=[start], **TIGHT)
    return fitted["E"]


def refit_floors(jobs):
    """refit_floor of each job, in order: through a process pool of every core (experiments/grid.py's, one BLAS
    thread a worker) where there are PARALLEL_FROM jobs or more, else here. Each fit is the same wherever it runs:
    it converges fully (TIGHT) from its own start. The pool replaces `[refit_floor(job) for job in jobs]`; what it
    gains on the record's 2,400 fits: `python3 -m dev.bench_fits` (its figures are in docs/developers.md)."""
    if len(jobs) < PARALLEL_FROM:
        return [refit_floor(job) for job in jobs]
    with grid.executor("process") as pool:
        return list(pool.map(refit_floor, jobs, chunksize=max(1, len(jobs) // (8 * grid.cores()))))


def nats(e):
    """A floor by cut as the record keeps it, to 1e-4 nats per token (the seeds' noise is ten times that): a
    resampling whose fit does not pin E puts it near nothing, at a point that moves with the BLAS kernels by far
    less than that, where six digits of it would differ.

    >>> nats(6.476e-05), nats(0.49119)
    (0.0001, 0.4912)
    """
    return round(float(e), 4)


def percentiles(values):
    """The 2.5th and 97.5th percentiles of bootstrap values.

    >>> percentiles(list(range(201)))
    [5.0, 195.0]
    """
    return [float(np.percentile(values, 2.5)), float(np.percentile(values, 97.5))]


# ----------------------------------------------------------------------------------------------------------------
# Held-out predictions: fitted up to a cut, judged above it


def held_out(values, plan, floor):
    """For each count k of HELD (the top k budgets held out, where at least two stay): the budgets fitted and held,
    and for each fit of FITS its E and its errors on the held-out cells in log L (predicted over measured): their
    root mean square, mean and worst; the held-out cells' seed error in log L (the median over them of the standard
    error of their mean) for scale; and every held-out cell's measured and predicted losses."""
    keys, n, d, c, loss = cell_arrays(values, plan)
    budgets, out = plan["budgets"], []
    for k in [k for k in HELD if len(plan["budgets"]) - k >= 2]:
        top = budgets[-k - 1]  # the last budget fitted
        fit_at, held_at = c <= top, c > top  # (cells,), (cells,)
        entry = {"fitted_budgets": budgets[:-k], "held_budgets": budgets[-k:], "fits": {},
                 "seed_error": statistics.median(
                     statistics.stdev(np.log(values[keys[i]])) / math.sqrt(len(values[keys[i]]))
                     for i in np.flatnonzero(held_at)),
                 "cells": [{"size": keys[i][0], "budget": keys[i][1], "measured": float(loss[i])}
                           for i in np.flatnonzero(held_at)]}
        for name, (fit, with_floor) in FITS.items():
            e = floor if with_floor else None
            fitted, x = fit(n[fit_at], d[fit_at], loss[fit_at], floor=e, **TIGHT)
            predicted = np.exp(law(x, n[held_at], d[held_at], e))  # (held cells,)
            errors = np.log(predicted / loss[held_at])  # (held cells,)
            entry["fits"][name] = {"E": fitted["E"], "rms_error": float(np.sqrt(np.mean(errors ** 2))),
                                   "mean_error": float(np.mean(errors)), "worst_error": float(np.max(np.abs(errors)))}
            for cell, value in zip(entry["cells"], predicted):
                cell[name] = float(value)
        out.append(entry)
    return out


# ----------------------------------------------------------------------------------------------------------------
# The IsoFLOP minimum, located three ways


def minimum(x, y, how):
    """The x of the least y of a budget's points (x increasing), located how: "three_point", the parabola through the
    least point and its neighbours (the three at an end when the least is there); "all_sizes", the parabola through
    every point; "least_cell", the least point itself. A parabola that opens downwards gives the least point; a
    vertex beyond the points the parabola runs through (the least at an end) gives the nearest of them: nothing
    was measured there.

    >>> [round(minimum([0.0, 1.0, 2.0, 3.0], [3.0, 1.0, 1.0, 3.0], how), 9) for how in METHODS]
    [1.5, 1.5, 1.0]
    >>> minimum([0.0, 1.0, 2.0], [1.0, 1.1, 1.3], "three_point")  # (the vertex, -1.5, lies outside)
    0.0
    >>> minimum([0.0, 1.0, 2.0], [0.0, 0.5, 0.2], "three_point")  # (it opens downwards)
    0.0
    """
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    k = int(np.argmin(y))
    if how == "least_cell":
        return float(x[k])
    lo = min(max(k - 1, 0), len(x) - 3) if how == "three_point" else 0
    hi = lo + 3 if how == "three_point" else len(x)
    c2, c1, _ = np.polyfit(x[lo:hi], y[lo:hi], 2)
    return float(np.clip(-c1 / (2 * c2), x[lo], x[hi - 1])) if c2 > 0 else float(x[k])


METHODS = ("three_point", "all_sizes", "least_cell")


def isoflop_methods(values, plan, budgets):
    """For each way of METHODS to locate a budget's minimum (in log N, and in log D for D_opt): the exponents a and b
    of N_opt ~ C^a and D_opt ~ C^b over the given budgets (the record's isoflop budgets: those whose least cell is
    interior), and how far the three a's and b's lie apart."""
    keys, n, d, c, loss = cell_arrays(values, plan)
    out = {}
    for how in METHODS:
        n_opt, d_opt = [], []
        for budget in budgets:
            at = c == budget  # (cells,): the budget's sizes, in the plan's order (N increasing)
            n_opt.append(math.exp(minimum(np.log(n[at]), loss[at], how)))
            order = np.argsort(d[at])  # D decreases as N grows
            d_opt.append(math.exp(minimum(np.log(d[at])[order], loss[at][order], how)))
        out[how] = {"a": slope(budgets, n_opt), "b": slope(budgets, d_opt)}
    out["spread"] = {key: max(out[how][key] for how in METHODS) - min(out[how][key] for how in METHODS)
                     for key in ("a", "b")}
    return out


# ----------------------------------------------------------------------------------------------------------------
# The law's exponents with FLOPs as they are


def flop_power(plan):
    """(gamma, k, worst): FLOPs per token as k N^gamma, fitted by least squares in log-log over the plan's sizes, and
    the worst relative error of that power at a size.

    >>> gamma, k, worst = flop_power({"sizes": [[8, 1], [16, 1], [32, 1], [64, 1]]})
    >>> round(gamma, 2), worst < 0.1
    (0.79, True)
    """
    n = np.log([parameters(s) for s in plan["sizes"]])  # (sizes,)
    f = np.log([flops_per_token(s) for s in plan["sizes"]])  # (sizes,)
    gamma, log_k = np.polyfit(n, f, 1)
    worst = float(np.max(np.abs(np.exp(gamma * n + log_k - f) - 1)))  # |k N^gamma / (FLOPs per token) - 1|
    return float(gamma), float(math.exp(log_k)), worst


def law_exponents(fit, gamma):
    """The exponents of N_opt ~ C^a and D_opt ~ C^b at the fitted law's optimum when C = k N^gamma D: setting
    d L / d N = 0 along D = C / (k N^gamma) gives N^(alpha + gamma beta) proportional to C^beta.

    >>> {key: round(value, 9) for key, value in law_exponents({"alpha": 0.3, "beta": 0.3}, 0.5).items()}
    {'a': 0.666666667, 'b': 0.666666667}
    """
    a = fit["beta"] / (fit["alpha"] + gamma * fit["beta"])
    return {"a": float(a), "b": float(1 - gamma * a)}


# ----------------------------------------------------------------------------------------------------------------
# Everything at once


def judged(values, plan, floor, fits, isoflop_budgets, rng):
    """Every judgement of the fits: {"floors_by_cut", "held_out", "isoflop_methods", "flops"}, "flops" holding the
    power of FLOPs per token (flop_power) and the law's exponents (law_exponents) of the record's two fits (fits:
    law_summary's) and of the Huber fit to every cell."""
    _, n, d, _, loss = cell_arrays(values, plan)
    gamma, k, worst = flop_power(plan)
    huber, _ = fit_huber(n, d, loss, **TIGHT)
    return {
        "floors_by_cut": floors_by_cut(values, plan, floor, rng),
        "held_out": held_out(values, plan, floor),
        "isoflop_methods": isoflop_methods(values, plan, isoflop_budgets),
        "flops": {"gamma": gamma, "k": k, "worst": worst, "huber": {"E": huber["E"], "alpha": huber["alpha"],
                                                                     "beta": huber["beta"]},
                  "exponents": {name: law_exponents(fit, gamma) for name, fit in
                                (("free_floor", fits["free_floor"]), ("true_floor", fits["true_floor"]),
                                 ("huber", huber))}},
    }
