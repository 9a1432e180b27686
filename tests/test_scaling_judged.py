"""experiments/scaling_judged.py: the scaling law's fits judged against a known truth. Each judgement is run on
losses drawn from a law it is given, where the right answer is known: the floor, exact predictions, the exponents
of a moving parabola, the optimum of a law under a power cost."""

import math
import statistics

import numpy as np
import pytest

pytest.importorskip("scipy")

from experiments import scaling_judged as judged  # noqa: E402
from experiments.scaling_law import name_of  # noqa: E402
from experiments.scaling_runs import FULL  # noqa: E402

PLAN = {**FULL, "bootstrap": 20}  # the recorded grid's sizes and budgets, a few resamplings
E, A, ALPHA, B, BETA = 0.49, 40.0, 0.6, 900.0, 0.45  # the law the losses are drawn from


def law_values(plan, noise=0.0, seeds=3, rng=None):
    """{(size, budget): [a loss a seed]} of the law at every cell of plan, each seed's loss times exp(noise z)."""
    cells = {(name_of(s), c): [0.0] for s in plan["sizes"] for c in plan["budgets"]}  # (every cell's one loss)
    keys, n, d, _, _ = judged.cell_arrays(cells, plan)
    loss = E + A / n ** ALPHA + B / d ** BETA  # (cells,)
    rng = rng or np.random.default_rng(0)
    return {k: list(value * np.exp(noise * rng.standard_normal(seeds))) for k, value in zip(keys, loss)}


def test_floors_by_cut_find_the_floor_of_a_law_that_holds_with_both_fits():
    values = law_values(PLAN, noise=1e-3)
    cuts = judged.floors_by_cut(values, PLAN, E, np.random.default_rng(1))
    assert [cut["least_budget"] for cut in cuts] == PLAN["budgets"][:-3]  # four budgets fitted at the fewest
    assert [cut["cells"] for cut in cuts] == [len(PLAN["sizes"]) * k for k in range(len(PLAN["budgets"]), 3, -1)]
    for cut in cuts:
        for name in ("least_squares", "huber"):
            fit = cut[name]
            assert fit["E"] == pytest.approx(E, abs=0.01), (cut["least_budget"], name)
            assert fit["interval"][0] <= fit["interval"][1]
        assert cut["true_floor_cost"] >= 1 - 1e-6  # E free can fit no worse than E held at any value


def test_held_out_cells_are_predicted_exactly_when_the_law_holds():
    values = law_values(PLAN)  # no noise: every cell on the law
    out = judged.held_out(values, PLAN, E)
    assert [len(cut["held_budgets"]) for cut in out] == [1, 2, 3]
    for cut in out:
        assert cut["fitted_budgets"] + cut["held_budgets"] == PLAN["budgets"]
        assert len(cut["cells"]) == len(PLAN["sizes"]) * len(cut["held_budgets"])
        assert all(c["budget"] in cut["held_budgets"] for c in cut["cells"])
        for name, fit in cut["fits"].items():
            assert fit["rms_error"] < 1e-4 and fit["worst_error"] < 1e-4, (cut["held_budgets"], name)
            assert fit["E"] == pytest.approx(E, rel=1e-3)
        assert cut["fits"]["true_floor"]["E"] == E
        assert cut["seed_error"] == 0.0


def test_held_out_errors_are_the_predictions_against_the_measurements():
    values = law_values(PLAN, noise=0.02, rng=np.random.default_rng(5))
    cut = judged.held_out(values, PLAN, E)[0]
    for name, fit in cut["fits"].items():
        errors = [math.log(c[name] / c["measured"]) for c in cut["cells"]]
        assert fit["rms_error"] == pytest.approx(math.sqrt(statistics.fmean(e * e for e in errors)))
        assert fit["mean_error"] == pytest.approx(statistics.fmean(errors))
        assert fit["worst_error"] == pytest.approx(max(map(abs, errors)))
    for c in cut["cells"]:
        assert c["measured"] == pytest.approx(statistics.fmean(values[c["size"], c["budget"]]))


def test_isoflop_methods_agree_where_every_budget_is_a_parabola_in_log_n():
    plan = {"sizes": FULL["sizes"], "budgets": FULL["budgets"], "batch": 16}
    cells = {(name_of(s), c): [0.0] for s in plan["sizes"] for c in plan["budgets"]}  # (every cell's one loss)
    keys, n, _, c, _ = judged.cell_arrays(cells, plan)
    centre = 0.5 * np.log(c) - 4.0  # (cells,): the minimum in log N moves as C^0.5
    loss = 1.0 + (np.log(n) - centre) ** 2  # (cells,)
    out = judged.isoflop_methods({key: [value] for key, value in zip(keys, loss)}, plan, plan["budgets"])
    assert out["three_point"]["a"] == pytest.approx(0.5, abs=1e-9)
    assert out["all_sizes"]["a"] == pytest.approx(0.5, abs=1e-9)
    assert out["least_cell"]["a"] == pytest.approx(0.5, abs=0.15)  # the sizes are a factor of 2 apart
    assert out["spread"]["a"] == pytest.approx(abs(out["least_cell"]["a"] - 0.5), abs=1e-9)


def test_the_laws_exponents_are_its_optimum_under_a_power_cost():
    gamma, k = 0.8, 60.0  # C = k N^gamma D
    fit = {"E": E, "A": A, "alpha": ALPHA, "B": B, "beta": BETA}
    log_n = np.linspace(math.log(1e2), math.log(1e8), 200_001)  # (grid,)
    optimum = []
    for c in (1e12, 1e15):
        d = c / (k * np.exp(gamma * log_n))  # (grid,)
        loss = E + A / np.exp(ALPHA * log_n) + B / d ** BETA  # (grid,)
        at = int(np.argmin(loss))
        optimum.append((math.log(c), log_n[at], math.log(d[at])))
    (c0, n0, d0), (c1, n1, d1) = optimum
    got = judged.law_exponents(fit, gamma)
    assert got["a"] == pytest.approx((n1 - n0) / (c1 - c0), abs=1e-3)
    assert got["b"] == pytest.approx((d1 - d0) / (c1 - c0), abs=1e-3)


def test_the_flop_power_is_the_sizes_flops_per_token_within_its_worst_error():
    from experiments.scaling_runs import flops_per_token, parameters

    gamma, k, worst = judged.flop_power(FULL)
    errors = [abs(k * parameters(s) ** gamma / flops_per_token(s) - 1) for s in FULL["sizes"]]
    assert max(errors) == pytest.approx(worst) and 0.5 < gamma < 1  # attention and the output layer: below 1
