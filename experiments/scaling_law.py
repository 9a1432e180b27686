"""The scaling law and how it is fitted: L = E + A / N^alpha + B / D^beta (N non-embedding parameters, D training
tokens, E the loss no model can beat), fitted by least squares on log L from three starts, or by Chinchilla's
Huber loss from a grid of starts, with E free or fixed at a known floor; and the points it is fitted to, read from
a record of experiments/scaling.py (its runs' validation losses, a cell's mean over its seeds, N and D beside them).
experiments/scaling.py fits its record with these, and the scaling lesson (lessons_scaling.py) fits them live (the
page reads that lesson's answer from the export, oneblock/page-lessons.json, and fits nothing).

    >>> n = np.repeat([1e3, 1e4, 1e5], 3)  # (9,): three sizes ...
    >>> d = np.tile([1e5, 1e6, 1e7], 3)  # (9,): ... each at three token counts
    >>> fitted, x = fit_law(n, d, 0.5 + 20 / n ** 0.4 + 300 / d ** 0.3)
    >>> round(fitted["E"], 5), round(float(fitted["alpha"]), 5), round(float(fitted["beta"]), 5)
    (0.5, 0.4, 0.3)
"""

import math
import statistics

import numpy as np
from scipy.optimize import least_squares

POINTS_FORMAT = "scaling law points v1"  # law_points' "format" field

# ----------------------------------------------------------------------------------------------------------------
# The law and its fit

STARTS = [  # where the fits start: [log E, log A, alpha, log B, beta], the least cost of the three wins
    [math.log(0.3), 2.0, 0.3, 4.0, 0.3],
    [math.log(0.3), 4.0, 0.6, 8.0, 0.6],
    [math.log(0.1), 6.0, 0.9, 10.0, 0.9],
]
LOWER = [-10, -20, 0, -20, 0]  # the bounds of the fit's parameters: log E, log A, alpha, log B, beta
UPPER = [5, 40, 3, 40, 3]


def law(x, n, d, floor=None):
    """log L of the law at (n, d) for parameters x: [log E, log A, alpha, log B, beta], or without log E when the
    floor is given.

    >>> law([math.log(0.5), math.log(20.0), 0.5, math.log(300.0), 0.5], np.array([400.0]), np.array([900.0]))
    array([2.44234704])
    >>> round(float(np.exp(law([math.log(20.0), 0.5, math.log(300.0), 0.5], np.array([400.0]), np.array([900.0]),
    ...                         0.5)[0])), 12)
    11.5
    """
    e = floor if floor is not None else math.exp(x[0])
    log_a, alpha, log_b, beta = x[-4:]
    return np.log(e + np.exp(log_a - alpha * np.log(n)) + np.exp(log_b - beta * np.log(d)))  # (points,)


def law_cost(x, n, d, loss, floor=None):
    """What the fit minimises at parameters x: half the sum of squares of log L of the law less log loss over the
    points (least_squares' cost).

    >>> law_cost([math.log(20.0), 0.5, math.log(300.0), 0.5], np.array([400.0]), np.array([900.0]),
    ...          np.array([11.5 * math.e]), 0.5)
    0.5
    """
    residual = law(x, n, d, floor) - np.log(loss)  # (points,)
    return float(0.5 * np.sum(residual ** 2))


def fit_law(n, d, measured, floor=None, starts=STARTS, **solver):
    """The least-squares fit of log L = log(E + A / N^alpha + B / D^beta) to the points (log L of the law less log
    measured, least_squares within LOWER and UPPER), from each of starts (a start of the free fit, without its log E
    when the floor is given), the fit of least cost winning (the first of equal ones): {"E", "A", "alpha", "B",
    "beta"} (E the floor when given) and the parameters as fitted. solver: least_squares' options (TIGHT, to
    converge where a fit hardly pins its parameters; fit_huber's loss).

    >>> n, d = np.repeat([1e3, 1e4, 1e5], 3), np.tile([1e5, 1e6, 1e7], 3)  # (9,), (9,)
    >>> fitted, x = fit_law(n, d, 0.5 + 20 / n ** 0.4 + 300 / d ** 0.3, floor=0.5)
    >>> fitted["E"], round(fitted["A"], 2), round(float(fitted["alpha"]), 5), round(fitted["B"], 1), len(x)
    (0.5, 20.0, 0.4, 300.0, 4)
    """
    lower, upper = (LOWER, UPPER) if floor is None else (LOWER[1:], UPPER[1:])  # log E, log A, alpha, log B, beta
    fits = (least_squares(lambda x: law(x, n, d, floor) - np.log(measured), x0[-len(lower):], bounds=(lower, upper),
                          **solver) for x0 in starts)
    x = min(fits, key=lambda got: got.cost).x
    e = floor if floor is not None else math.exp(x[0])
    return {"E": e, "A": math.exp(x[-4]), "alpha": x[-3], "B": math.exp(x[-2]), "beta": x[-1]}, list(x)


HUBER_DELTA = 1e-3  # Chinchilla's robust fit: the residual in log L beyond which the cost grows linearly
INIT_GRID = [[log_e, log_a, alpha, log_b, beta]  # its grid of starts (the KEEP of least cost are polished)
             for log_e in (-1.0, -0.5, 0.0) for log_a in (0.0, 5.0, 10.0) for alpha in (0.25, 0.5, 1.0)
             for log_b in (0.0, 5.0, 10.0, 15.0) for beta in (0.25, 0.5, 1.0)]
KEEP = 8
TIGHT = {"xtol": 1e-14, "ftol": 1e-14, "gtol": 1e-14, "max_nfev": 20000}  # least_squares' options to converge fully:
# a fit that hardly pins its parameters (a bootstrap's resampled cells, E near nothing) otherwise stops where its
# path through a flat valley happens to be, and that path moves with the BLAS kernels' rounding


def huber_cost(x, n, d, loss, floor=None, delta=HUBER_DELTA):
    """What Chinchilla's fit minimises at parameters x: the Huber loss of log L of the law less log loss, summed over
    the points (half the square within delta of zero, linear beyond: least_squares' loss="huber" at f_scale delta).

    >>> x = [math.log(20.0), 0.5, math.log(300.0), 0.5]  # the law of law_cost's example, E the floor 0.5
    >>> round(huber_cost(x, np.array([400.0]), np.array([900.0]), np.array([11.5 * math.e]), 0.5), 12)
    0.0009995
    """
    r = np.abs(law(x, n, d, floor) - np.log(loss))  # (points,)
    return float(np.sum(np.where(r <= delta, 0.5 * r ** 2, delta * (r - delta / 2))))


def law_jacobian(x, n, d, floor=None):
    """d log L / d x at each point: (points, 5) for x = [log E, log A, alpha, log B, beta], (points, 4) without log E
    when the floor is given. With L = E + A N^-alpha + B D^-beta, d log L / d log A = A N^-alpha / L, d / d alpha =
    -log N A N^-alpha / L, and alike for B and beta, E / L for log E.

    >>> law_jacobian([0.0, 0.0, 1.0, 0.0, 1.0], np.array([1.0]), np.array([1.0]))  # E = A = B = 1 at N = D = 1
    array([[ 0.33333333,  0.33333333, -0.        ,  0.33333333, -0.        ]])
    """
    e = floor if floor is not None else math.exp(x[0])
    log_a, alpha, log_b, beta = x[-4:]
    by_n, by_d = np.exp(log_a - alpha * np.log(n)), np.exp(log_b - beta * np.log(d))  # (points,), (points,)
    total = e + by_n + by_d  # (points,)
    columns = [by_n / total, -np.log(n) * by_n / total, by_d / total, -np.log(d) * by_d / total]
    return np.stack(([np.full_like(total, e) / total] if floor is None else []) + columns, axis=1)  # (points, 5|4)


def fit_huber(n, d, loss, floor=None, starts=None, **solver):
    """Chinchilla's fit (Hoffmann et al. 2022, approach 3): the Huber loss (HUBER_DELTA) of log(E + A / N^alpha +
    B / D^beta), written as log-sum-exp, against log L, minimised from a grid of starts: of INIT_GRID the KEEP of
    least cost are polished (or the given starts, each polished) and the least cost wins. Returns what fit_law does;
    solver: least_squares' options, as there.

    >>> n, d = np.repeat([1e3, 1e4, 1e5], 3), np.tile([1e5, 1e6, 1e7], 3)  # (9,), (9,)
    >>> fitted, x = fit_huber(n, d, 0.5 + 20 / n ** 0.4 + 300 / d ** 0.3)
    >>> round(fitted["E"], 4), round(float(fitted["alpha"]), 3), round(float(fitted["beta"]), 3)
    (0.5, 0.4, 0.3)
    """
    if starts is None:
        grid = [x0[1:] if floor is not None else x0 for x0 in INIT_GRID]  # (without log E when the floor is given)
        starts = sorted(grid, key=lambda x0: huber_cost(x0, n, d, loss, floor))[:KEEP]
    return fit_law(n, d, loss, floor, starts, jac=lambda x: law_jacobian(x, n, d, floor), loss="huber",
                   f_scale=HUBER_DELTA, **solver)


def law_summary(points, floor):
    """The two least-squares fits of the law to points (n, d, loss arrays), with E free and with E the floor, each
    with its parameters as fitted ("x", to warm-start the bootstrap's fits). (The exponents of the compute-optimal
    size that each implies, with FLOPs as they are: scaling_judged.law_exponents.)

    >>> n, d = np.repeat([1e3, 1e4, 1e5], 3), np.tile([1e5, 1e6, 1e7], 3)  # (9,), (9,)
    >>> fits = law_summary((n, d, 0.5 + 20 / n ** 0.4 + 300 / d ** 0.3), 0.5)
    >>> list(fits), round(float(fits["true_floor"]["alpha"]), 4)
    (['free_floor', 'true_floor'], 0.4)
    """
    out = {}
    for name, e in (("free_floor", None), ("true_floor", floor)):
        fitted, x = fit_law(*points, floor=e)
        out[name] = {**fitted, "x": x}
    return out


def slope(x, y):
    """The least-squares slope of log y against log x (the IsoFLOP exponents: N_opt ~ C^a).

    >>> round(slope([1.0, 10.0, 100.0], [3.0, 30.0, 300.0]), 9)
    1.0
    """
    return float(np.polyfit(np.log(x), np.log(y), 1)[0])


# ----------------------------------------------------------------------------------------------------------------
# The points: a record's cells, each a size at a budget


def name_of(size):
    """The key of a size in a record: its two numbers joined by an x (width x blocks; depth.py's blocks x heads).

    >>> name_of([64, 2])
    '64x2'
    """
    return f"{size[0]}x{size[1]}"


def chosen_lr(runs, plan, size, budget):
    """The learning rate the first seed's sweep chose in a cell: the lowest final tuning loss (the first of
    equal ones).

    >>> runs = [{"size": "8x1", "budget": 10, "seed": 3, "lr": lr, "tune": t} for lr, t in [(0.01, 2.0), (0.03, 1.5)]]
    >>> chosen_lr(runs, {"seeds": [3, 4]}, "8x1", 10)
    0.03
    """
    sweep = [r for r in runs if r["size"] == size and r["budget"] == budget and r["seed"] == plan["seeds"][0]]
    return min(sweep, key=lambda r: r["tune"])["lr"]


def cell_values(runs, plan):
    """{(size, budget): [validation loss of each seed at the chosen rate]} and the chosen rates: the plan's seeds,
    then its split_seeds where the cell trained them (scaling_runs.splits).

    >>> runs = [{"size": "8x1", "budget": 10, "seed": s, "lr": 0.01, "tune": 2.0, "val": v} for s, v in [(3, 1.5),
    ...                                                                                             (4, 1.7)]]
    >>> cell_values(runs, {"sizes": [[8, 1]], "budgets": [10], "seeds": [3, 4]})
    ({('8x1', 10): [1.5, 1.7]}, {('8x1', 10): 0.01})
    """
    values, rates = {}, {}
    for size in map(name_of, plan["sizes"]):
        for budget in plan["budgets"]:
            lr = rates[size, budget] = chosen_lr(runs, plan, size, budget)
            values[size, budget] = [r["val"] for seed in [*plan["seeds"], *plan.get("split_seeds", [])] for r in runs
                                    if (r["size"], r["budget"], r["lr"], r["seed"]) == (size, budget, lr, seed)]
    return values, rates


def law_points(record):
    """What the law is fitted to, from a record of experiments/scaling.py, as plain JSON (what the scaling lesson
    fits): {"format", "floor": the validation stories' exact floor, "cells": [{"size", "budget", "n": non-embedding
    parameters, "d": training tokens, "loss": the mean validation loss of its seeds}]}, the cells in the record's
    order (each size, at each budget), as scaling.py fits them.

    >>> record = {"settings": {"sizes": [[8, 1]], "budgets": [10], "seeds": [3, 4], "parameters": {"8x1": 856}},
    ...           "floor": {"validation_nats_per_token": 0.49},
    ...           "runs": [{"size": "8x1", "budget": 10, "seed": s, "lr": 0.01, "tune": 2.0, "val": v, "tokens": 64}
    ...                    for s, v in [(3, 1.5), (4, 1.75)]]}
    >>> law_points(record)["cells"]
    [{'size': '8x1', 'budget': 10, 'n': 856, 'd': 64, 'loss': 1.625}]
    """
    plan = record["settings"]
    values, rates = cell_values(record["runs"], plan)
    tokens = {(r["size"], r["budget"]): r["tokens"] for r in record["runs"]}  # every run of a cell reads as many
    cells = [{"size": size, "budget": budget, "n": plan["parameters"][size], "d": tokens[size, budget],
              "loss": statistics.fmean(v)} for (size, budget), v in values.items()]
    return {"format": POINTS_FORMAT, "floor": record["floor"]["validation_nats_per_token"], "cells": cells}


def point_arrays(points, least_budget=0):
    """(n, d, loss) arrays of law_points' cells whose budget is at least least_budget.

    >>> points = {"cells": [{"budget": 10, "n": 856, "d": 64, "loss": 1.5}, {"budget": 20, "n": 856, "d": 128,
    ...                                                                     "loss": 1.2}]}
    >>> point_arrays(points, least_budget=20)
    (array([856.]), array([128.]), array([1.2]))
    """
    cells = [c for c in points["cells"] if c["budget"] >= least_budget]
    n = np.array([c["n"] for c in cells], dtype=float)  # (cells,)
    d = np.array([c["d"] for c in cells], dtype=float)  # (cells,)
    loss = np.array([c["loss"] for c in cells], dtype=float)  # (cells,)
    return n, d, loss
