"""The scaling lesson, 14 of docs/lessons.md: the law fitted live to experiments/scaling.json's runs (training
nothing), with oneblock/lessons.py's Lesson and judges. explore.py's export computes the same answer for the page.

    >>> SCALING.key, SCALING.guess, SCALING.judge(0.43, {"value": 0.430}), SCALING.judge(0.49, {"value": 0.430})
    ('scaling', ('number',), 'right', 'off')
    >>> [round(row["E"], 4) for row in scaling_numbers(read_points())["cuts"]]
    [0.4302, 0.4388, 0.4721, 0.4984, 0.5185, 0.5163]

The times the explanations quote, and how each was measured: docs/lessons.md's last section.
"""

from pathlib import Path

from experiments.recording import read_record, reading
from experiments.scaling_judged import LEFT
from experiments.scaling_law import TIGHT, fit_law, law_cost, law_points, point_arrays
from oneblock.lessons import Lesson, Skip, Within

RECORD_FILE = Path(__file__).resolve().parent / "scaling.json"  # experiments/scaling.py's committed record
RECORD_FORMAT = "scaling experiment v1"  # its "format" field (scaling.py's FORMAT)


# ----------------------------------------------------------------------------------------------------------------
# The numbers: the law fitted to the record's cells, three ways


def read_points(path=RECORD_FILE):
    """law_points of the record at path, read as the experiments read their records (recording.read_record), or
    Skip in one line saying what is wrong and what to run.

    >>> read_points(Path("no-such.json"))
    Traceback (most recent call last):
    ...
    oneblock.lessons.Skip: there is no no-such.json; run python3 -m experiments.scaling --out experiments/scaling.json \
to make it
    """
    script = "python3 -m experiments.scaling --out experiments/scaling.json"
    try:
        record = read_record(path, script, RECORD_FORMAT)
        with reading(path, script, also=(ValueError, ZeroDivisionError, OverflowError, RecursionError)):
            return law_points(record)
    except ValueError as e:
        raise Skip(str(e)) from None


def cuts(points):
    """The budgets each refit starts from: every budget of the points that leaves at least LEFT budgets from it up
    (scaling_judged's, as the record's floors by cut: on three, E is not pinned; the least budget first: every cell).

    >>> cuts({"cells": [{"budget": b} for b in (10, 20, 40, 80, 160)]})
    [10, 20]
    """
    budgets = sorted({c["budget"] for c in points["cells"]})
    return budgets[:len(budgets) - LEFT + 1]


def fitted_at(n, d, loss, floor=None, **options):
    """fit_law's {"E", "A", "alpha", "B", "beta"} as plain floats, with the fit's cost (scaling_law.law_cost);
    options go to SciPy's least_squares (TIGHT: converged fully)."""
    fitted, x = fit_law(n, d, loss, floor=floor, **options)
    return {**{k: float(v) for k, v in fitted.items()}, "cost": law_cost(x, n, d, loss, floor)}


def scaling_numbers(points):
    """The lesson's numbers from law_points' JSON: the floor; the fits over every cell with E free and with E fixed
    at the floor (as scaling.py fits them), and the ratio of their costs; and E free refitted from each cut's budget
    up, converged fully (TIGHT), as the record's floors by cut are."""
    floor = points["floor"]
    n, d, loss = point_arrays(points)  # (cells,) each
    free, fixed = fitted_at(n, d, loss), fitted_at(n, d, loss, floor)
    rows = []
    for budget in cuts(points):
        n, d, loss = point_arrays(points, least_budget=budget)  # (cells from budget up,) each
        rows.append({"budget": budget, "cells": len(loss), **fitted_at(n, d, loss, **TIGHT)})
    return {"floor": floor, "cells": len(points["cells"]), "free": free, "fixed": fixed,
            "cost_ratio": fixed["cost"] / free["cost"], "cuts": rows}


def scaling_answer(lab, path=RECORD_FILE):
    """The fits of the record's cells (scaling_numbers), as the lesson shows them; the value is E with E free. The
    lab is not read: explore.py's export computes this answer for the page (lab None)."""
    numbers = scaling_numbers(read_points(path))
    floor, free, fixed = numbers["floor"], numbers["free"], numbers["fixed"]
    shown = [f"the floor of the validation stories: {floor:.4f} nats per token (exact: stories x entropy / tokens)",
             f"the law fitted by least squares on log L to the {numbers['cells']} cells (each the mean of its seeds):",
             *(f"  E {name:7s} E {fit['E']:.4f}, A {fit['A']:.3g}, alpha {fit['alpha']:.3f}, B {fit['B']:.3g},"
               f" beta {fit['beta']:.3f}; cost {fit['cost']:.4g}"
               for name, fit in (("free:", free), ("fixed:", fixed))),
             f"  forcing E to the floor costs {numbers['cost_ratio']:.2f}x the free fit's cost (half the sum of"
             f" squares of the misses in log L)",
             "E free, refitted on the budgets from a cut up:"]
    for row in numbers["cuts"]:
        side = "below" if row["E"] < floor else "above"  # which side of the floor E is
        shown.append(f"  budgets >= {row['budget'] / 1e9:>3g} GFLOP: {row['cells']:2d} cells, E {row['E']:.4f}"
                     f" ({abs(row['E'] - floor):.4f} {side} the floor), alpha {row['alpha']:.3f},"
                     f" beta {row['beta']:.3f}")
    return {"value": free["E"], "shown": shown,
            "bounds": "fitted live from scaling.json's runs: the record's own fits, to the six digits it keeps",
            "numbers": numbers}


SCALING = Lesson(
    key="scaling",
    title="The scaling law's floor: does the usual fit find it?",
    question="experiments/scaling.py trained 7 sizes (856 to 99,584 non-embedding parameters N) at 9 compute\n"
             "budgets (10 to 2,560 GFLOP), 3 seeds each (5 where they split), on stories of known probability: no\n"
             "model can beat 0.4912 nats per token on its validation stories, the floor, known exactly. The usual\n"
             "way to find a floor is to fit L = E + A / N^alpha + B / D^beta (D training tokens) to the losses by\n"
             "least squares on log L, with E free (Chinchilla's approach 3). Fitted to all 63 cells, what E does\n"
             "the fit find?",
    guess=("number",),
    answer=scaling_answer,
    judge=Within(0.02, 0.05),
    explain="The fit misses the floor, by about 0.06 below it, and forcing E to the truth makes it fit worse (1.2\n"
            "times the cost). Every cell counts the same in the least squares, and the smallest budgets are far from\n"
            "any floor: their runs end on the plateau that training crosses before the loss drops, or partway down\n"
            "the drop, a shape no sum of two power laws draws, and the fit bends E down to follow them. The largest\n"
            "models never near their limit (at 2,560 GFLOP the largest, 64x2, is 0.027 above the floor, worse than\n"
            "32x2 at a quarter of its size), so nothing pins A / N^alpha, and E trades against it. Refitted on the\n"
            "larger budgets only, E climbs to the floor and past it as the points thin out (28 cells at 320 GFLOP\n"
            "and up). A fitted E is a parameter of the curve, not a measurement of the floor. The whole command\n"
            "takes about 1 s on a 2-vCPU machine, the fits a tenth of that; longer on a busy one (the page shows the\n"
            "fits its export made: python3 explore.py).",
    source="experiments/scaling_law.py: fit_law, law, law_cost, law_points; experiments/lessons_scaling.py:"
           " scaling_numbers",
)


# ----------------------------------------------------------------------------------------------------------------
# The path

LESSONS = [SCALING]
