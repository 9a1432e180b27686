"""The scaling lesson (experiments/lessons_scaling.py) and the law's module (experiments/scaling_law.py): the lesson
driven with scripted input and on the command line; its numbers equal to the committed record's fits; the refits on
the larger budgets computed again here, from the record's runs, with a fit of this file's own calls; the moved
functions the very ones scaling.py uses; and explorer/scaling_law.js, the page's copy of the fit, run in headless
Chromium on law_points' JSON against the Python.

The JavaScript fit goes to the least-squares minimum itself (exact derivatives, run until no step lowers the cost,
then Gauss-Newton): it agrees with the minimum found here (fit_law's answer polished by Gauss-Newton steps with
numpy's lstsq, then in 40 digits with mpmath) within a relative 1e-12 in every parameter of every fit (3.0e-13
measured, B of the refit from 320 GFLOP; 1.1e-14 at most on the fits of more budgets). The fits over every cell are
SciPy's least_squares at its default tolerances, which stops short of that minimum along the long valley of A and
alpha: the two agree within a relative 3e-4 (1.2e-4 measured, A of the E-fixed fit; the refits, converged fully,
within 6e-7), and the JavaScript's cost is never above SciPy's.
"""

import ast
import json
import math
import os
import re
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

np = pytest.importorskip("numpy", reason="the scaling lesson needs NumPy")
pytest.importorskip("scipy", reason="the scaling lesson fits with SciPy")

from experiments import lessons as command, lessons_scaling as ls, recording, scaling, scaling_law  # noqa: E402
from experiments.recording import rounded  # noqa: E402
from oneblock import lessons  # noqa: E402
from run_helpers import script  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
RECORD = json.loads((ROOT / "experiments" / "scaling.json").read_text(encoding="utf-8"))
FLOOR = RECORD["floor"]["validation_nats_per_token"]
PARAMS = ("E", "A", "alpha", "B", "beta")
LAB = lessons.build_lab()



def run_ask(*lines):
    """ask() of the scaling lesson with these lines as the learner's input: (its record, all it wrote as text)."""
    read, said = script(*lines)
    return lessons.ask(ls.SCALING, LAB, read=read, write=said.append), "\n".join(said)


@pytest.fixture(scope="module")
def numbers():
    return ls.SCALING.answer(LAB)["numbers"]


# ----------------------------------------------------------------------------------------------------------------
# The cells, read here from the record's runs on their own


def cells_here(least_budget=0):
    """(n, d, loss) of the record's cells with a budget of at least least_budget, read here: each size at each
    budget, the validation losses of the runs at the rate the record's cells say was chosen, N from the settings,
    D the runs' tokens."""
    n, d, loss = [], [], []
    for size in map(scaling.name_of, RECORD["settings"]["sizes"]):
        for budget in RECORD["settings"]["budgets"]:
            if budget < least_budget:
                continue
            lr = RECORD["cells"][size][str(budget)]["lr"]
            runs = [r for r in RECORD["runs"] if (r["size"], r["budget"], r["lr"]) == (size, budget, lr)]
            seeds = RECORD["settings"]["seeds"]
            assert sorted(r["seed"] for r in runs) in (seeds, seeds + RECORD["settings"]["split_seeds"])
            n.append(RECORD["settings"]["parameters"][size])
            d.append(runs[0]["tokens"])
            loss.append(statistics.fmean(r["val"] for r in sorted(runs, key=lambda r: r["seed"])))
    return np.array(n, dtype=float), np.array(d, dtype=float), np.array(loss)


def cost_here(fit, n, d, loss):
    """Half the sum of squares of log(E + A / N^alpha + B / D^beta) - log loss, from a fit's five numbers."""
    predicted = fit["E"] + fit["A"] / n ** fit["alpha"] + fit["B"] / d ** fit["beta"]  # (cells,)
    return 0.5 * float(np.sum((np.log(predicted) - np.log(loss)) ** 2))


def test_law_points_are_the_cells_scaling_py_fits():
    points = scaling_law.law_points(RECORD)
    n, d, loss = cells_here()
    assert points["format"] == scaling_law.POINTS_FORMAT and points["floor"] == FLOOR
    assert [c["n"] for c in points["cells"]] == n.tolist() and [c["d"] for c in points["cells"]] == d.tolist()
    assert [c["loss"] for c in points["cells"]] == loss.tolist()
    sizes = {scaling.name_of(s): s for s in scaling.FULL["sizes"]}
    for c in points["cells"]:  # N and D as scaling.py's own formulas give them
        assert c["n"] == scaling.parameters(sizes[c["size"]])
        assert c["d"] == scaling.steps_for(sizes[c["size"]], c["budget"], scaling.FULL["batch"]) * (
            scaling.FULL["batch"] * scaling.T)
    assert json.loads(json.dumps(points)) == points  # plain JSON, every float back to its bits


# ----------------------------------------------------------------------------------------------------------------
# The answer: the record's fits, and the refits computed here


def test_the_answer_is_the_records_fits_as_rounded_there(numbers):
    answer = ls.SCALING.answer(LAB)
    assert answer["value"] == numbers["free"]["E"] and rounded(answer["value"]) == RECORD["fits"]["free_floor"]["E"]
    for name, fit in (("free_floor", numbers["free"]), ("true_floor", numbers["fixed"])):
        assert {k: rounded(fit[k]) for k in PARAMS} == {k: RECORD["fits"][name][k] for k in PARAMS}, name
    assert numbers["floor"] == FLOOR and numbers["fixed"]["E"] == FLOOR and numbers["cells"] == 63
    shown = "\n".join(answer["shown"])
    assert f"{FLOOR:.4f} nats per token" in shown and f"E {numbers['free']['E']:.4f}," in shown
    assert f"costs {numbers['cost_ratio']:.2f}x" in shown


def test_forcing_the_floor_costs_what_the_residuals_here_say(numbers):
    n, d, loss = cells_here()
    free, fixed = cost_here(numbers["free"], n, d, loss), cost_here(numbers["fixed"], n, d, loss)
    assert numbers["free"]["cost"] == pytest.approx(free, rel=1e-12)
    assert numbers["fixed"]["cost"] == pytest.approx(fixed, rel=1e-12)
    assert numbers["cost_ratio"] == pytest.approx(fixed / free, rel=1e-12) and fixed > free


def test_the_refits_on_the_larger_budgets_are_the_fits_of_those_cells_here(numbers):
    budgets = RECORD["settings"]["budgets"]
    assert [row["budget"] for row in numbers["cuts"]] == budgets[:len(budgets) - 3]  # four budgets at least
    for row in numbers["cuts"]:
        n, d, loss = cells_here(row["budget"])
        fitted, _ = scaling.fit_law(n, d, loss, **scaling_law.TIGHT)  # this file's own call, on the subset read here
        assert row["cells"] == len(loss) == 7 * sum(b >= row["budget"] for b in budgets)
        assert {k: row[k] for k in PARAMS} == {k: float(fitted[k]) for k in PARAMS}, row["budget"]
        assert row["cost"] == pytest.approx(cost_here(row, n, d, loss), rel=1e-12)
    first = numbers["cuts"][0]  # the first refit is every cell, converged further than the record's own fit
    assert first["cells"] == numbers["cells"] and first["cost"] <= numbers["free"]["cost"]
    floors = RECORD["judged"]["floors_by_cut"]  # ... and every refit is the record's floor by cut
    assert [(row["budget"], row["cells"]) for row in numbers["cuts"]] == [
        (f["least_budget"], f["cells"]) for f in floors]
    assert [round(row["E"], 4) for row in numbers["cuts"]] == [f["least_squares"]["E"] for f in floors]


def test_what_the_explanation_says_holds_in_the_record(numbers):
    """The explanation's figures and claims, each read off the numbers: 0.06 below, 1.2 times the cost, E past the
    floor on the 28 cells from 320 GFLOP, the largest model worse at the top budget than 32x2."""
    explain = " ".join(ls.SCALING.explain.split())
    assert f"about {FLOOR - numbers['free']['E']:.2f} below it" in explain
    assert f"({numbers['cost_ratio']:.1f} times the cost)" in explain
    last = numbers["cuts"][-1]
    assert last["E"] > FLOOR and f"{last['cells']} cells at {last['budget'] / 1e9:g} GFLOP and up" in explain
    top = str(RECORD["settings"]["budgets"][-1])
    largest, quarter = RECORD["cells"]["64x2"][top]["reducible"], RECORD["cells"]["32x2"][top]["reducible"]
    assert f"64x2, is {largest:.3f} above the floor" in explain and largest > quarter
    assert RECORD["settings"]["parameters"]["64x2"] / RECORD["settings"]["parameters"]["32x2"] == pytest.approx(4,
                                                                                                          rel=0.02)
    question = " ".join(ls.SCALING.question.split())
    assert f"beat {FLOOR:.4f} nats per token" in question and f"all {numbers['cells']} cells" in question


def test_a_missing_or_foreign_record_is_a_skip_that_says_what_to_run(tmp_path):
    with pytest.raises(lessons.Skip, match=r"^there is no .*none\.json; run python3 -m experiments\.scaling"):
        ls.read_points(tmp_path / "none.json")
    (tmp_path / "other.json").write_text(json.dumps({"format": "depth experiment v1"}), encoding="utf-8")
    with pytest.raises(lessons.Skip, match="its format is 'depth experiment v1', expected 'scaling experiment v1'"):
        ls.read_points(tmp_path / "other.json")
    assert ls.RECORD_FORMAT == scaling.FORMAT


def spoiled(path, how):
    """Put a damaged scaling record at path, spoiled as how says."""
    record = json.loads(ls.RECORD_FILE.read_text(encoding="utf-8"))
    if how == "a FIFO":
        os.mkfifo(path)
    elif how == "a link to /dev/zero":
        path.symlink_to("/dev/zero")
    elif how == "too large":
        with open(path, "wb") as f:  # (sparse: no disk spent)
            f.truncate(recording.MOST_RECORD + 1)
    else:
        text = {"not UTF-8": lambda: b"\xff\xfe{}", "nested": lambda: b"[" * 100_000,
                "runs of another kind": lambda: json.dumps({**record, "runs": "x"}).encode(),
                "a loss of another kind": lambda: json.dumps({**record, "runs": [{**r, "val": "low"} for r in
                                                                                  record["runs"]]}).encode(),
                "no floor": lambda: json.dumps({k: v for k, v in record.items() if k != "floor"}).encode()}[how]()
        path.write_bytes(text)


@pytest.mark.skipif(os.name != "posix", reason="FIFOs and /dev/zero are POSIX's")
@pytest.mark.parametrize("how, said", [
    ("a FIFO", "a FIFO (a named pipe), not a regular file"), ("a link to /dev/zero", "a character device"),
    ("too large", "bytes, more than the"), ("not UTF-8", "is not UTF-8 text"),
    ("nested", "JSON nested too deeply to read"), ("runs of another kind", "does not have the shape"),
    ("a loss of another kind", "does not have the shape"), ("no floor", "no field 'floor'"),
])
def test_a_damaged_record_is_a_skip_in_one_line_read_as_the_experiments_read_theirs(tmp_path, how, said):
    """Before: tracebacks (JSONDecodeError, UnicodeDecodeError, RecursionError, ...), a FIFO called missing, and no
    bound on the size read."""
    path = tmp_path / "scaling.json"
    spoiled(path, how)
    with pytest.raises(lessons.Skip) as skipped:
        ls.read_points(path)
    line = str(skipped.value)
    assert said in line and "\n" not in line and "run python3 -m experiments.scaling" in line, line


def test_the_moved_functions_are_the_ones_scaling_py_uses():
    for name in ("law", "STARTS", "fit_law", "law_summary", "slope", "name_of", "chosen_lr", "cell_values"):
        assert getattr(scaling, name) is getattr(scaling_law, name), name
    tree = ast.parse((ROOT / "experiments" / "scaling.py").read_text(encoding="utf-8"))
    defined = {node.name for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)}
    assert defined.isdisjoint({"law", "fit_law", "law_summary", "slope", "name_of", "chosen_lr", "cell_values"})


# ----------------------------------------------------------------------------------------------------------------
# The lesson driven as a learner drives it


def test_the_tenth_lesson_comes_after_the_second_block_and_is_well_formed():
    keys = [lesson.key for lesson in command.all_lessons()]
    assert keys.index("scaling") == 9 and keys[8] == "second-block" and len(keys) == 10
    lesson = ls.SCALING
    assert ls.LESSONS == [lesson] and lesson.guess == ("number",) and lesson.needs == "numpy"
    for line in (*lesson.question.splitlines(), *lesson.explain.splitlines()):
        assert len(line) <= 120, line
    assert "2-vCPU machine" in lesson.explain and "longer on a busy one" in lesson.explain.replace("\n", " ")
    for part in lesson.source.split("; "):  # every file and function the source names is there
        file, names = part.split(": ", 1)
        tree = ast.parse((ROOT / file).read_text(encoding="utf-8"))
        defined = {node.name for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)}
        assert {name.strip() for name in names.split(",")} <= defined, part


def test_a_bad_guess_is_named_and_asked_again_then_the_answer_is_judged():
    record, said = run_ask("lots", "0.43")
    assert record["verdict"] == "right" and record["value"] == ls.SCALING.answer(LAB)["value"], said
    assert said.count("your guess (") == 2 and "not a guess: 'lots' is not a number. Try again." in said
    assert said.index("your guess (") < said.index("the answer: ") and ls.SCALING.question in said
    assert ls.SCALING.explain in said and f"source: {ls.SCALING.source}" in said
    assert run_ask("0.4")[0]["verdict"] == "close"
    record, said = run_ask(f"{FLOOR}")  # the truth is not what the usual fit finds
    assert record["verdict"] == "off" and "verdict: off" in said
    assert run_ask("q")[0] is None


def lessons_py(*args, stdin=""):
    """python3 -m experiments.lessons with args and stdin, as a learner runs it."""
    return subprocess.run([sys.executable, "-m", "experiments.lessons", *args], input=stdin, capture_output=True,
                          text=True, cwd=ROOT, timeout=120)


def test_the_command_line_asks_it_by_its_key():
    done = lessons_py("--lesson", "scaling", "--guess", "0.43")
    assert done.returncode == 0 and done.stderr == "", done.stderr
    assert "lesson 1 of 1: scaling" in done.stdout and "verdict: right" in done.stdout
    lines = lessons.answer_lines(ls.SCALING.answer(LAB))
    assert "\n".join(lines) in done.stdout  # every figure, as the lesson computes it
    done = lessons_py("--lesson", "scaling", stdin="lots\n0.49\n")
    assert done.returncode == 0 and "not a guess: 'lots'" in done.stdout and "verdict: off" in done.stdout
    done = lessons_py("--lesson", "scaling", "--guess", "lots")
    assert done.returncode == 2 and done.stdout == "" and done.stderr == "error: 'lots' is not a number\n"
    listed = lessons_py("--list").stdout.splitlines()
    assert listed[9].startswith("10. scaling") and ls.SCALING.title in listed[9]


def test_without_scipy_the_scaling_lesson_is_left_out_saying_why_and_a_broken_one_raises(monkeypatch):
    real = command.importlib.import_module

    def missing(name):
        def fake(module):
            if module == "experiments.lessons_scaling":
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)
            return real(module)
        return fake

    monkeypatch.setattr(command.importlib, "import_module", missing("scipy"))
    more, why = command.numpy_lessons()
    assert [lesson.key for lesson in more] == ["floor", "positions-past-length", "second-block"]
    assert why == "the scaling lesson is left out: SciPy is not installed"
    monkeypatch.setattr(command.importlib, "import_module", missing("experiments.lessons_scaling"))
    assert command.numpy_lessons()[1] == "the scaling lesson is left out: experiments/lessons_scaling.py is not there"
    monkeypatch.setattr(command.importlib, "import_module", missing("matplotlib"))  # not what may be missing: a bug
    with pytest.raises(ModuleNotFoundError):
        command.numpy_lessons()


# ----------------------------------------------------------------------------------------------------------------
# explorer/scaling_law.js: the page's copy of the fit


def jacobian(x, n, d, floor):
    """(cells, params): the derivatives of log L by each parameter, written here from the law."""
    e = floor if floor is not None else math.exp(x[0])
    tn, td = np.exp(x[-4] - x[-3] * np.log(n)), np.exp(x[-2] - x[-1] * np.log(d))  # (cells,) each
    s = e + tn + td  # (cells,)
    columns = ([] if floor is not None else [e / s]) + [tn / s, -np.log(n) * tn / s, td / s, -np.log(d) * td / s]
    return np.stack(columns, axis=1)  # (cells, params)


def minimum(n, d, loss, floor=None):
    """fit_law's answer polished to the least-squares minimum: Gauss-Newton steps (numpy's lstsq on the exact
    Jacobian) until a step moves no parameter by a part in 10^15, then the same steps in 40-digit arithmetic
    (mpmath) until one moves none by a part in 10^25: in float64 alone the steps stop where rounding of the
    residuals moves the answer, by up to about 1e-12 of B in the record's worst-conditioned fit."""
    _, x = scaling.fit_law(n, d, loss, floor=floor)
    x = np.array(x)  # (params,)
    for _ in range(100):
        residual = scaling.law(x, n, d, floor) - np.log(loss)  # (cells,)
        step = np.linalg.lstsq(jacobian(x, n, d, floor), -residual, rcond=None)[0]  # (params,)
        x = x + step
        if np.max(np.abs(step) / np.maximum(1.0, np.abs(x))) < 1e-15:
            break
    x = polished(x, n, d, loss, floor)
    assert np.all((x > np.array(scaling_law.LOWER[-len(x):])) & (x < np.array(scaling_law.UPPER[-len(x):])))
    e = floor if floor is not None else math.exp(x[0])
    return {"E": e, "A": math.exp(x[-4]), "alpha": x[-3], "B": math.exp(x[-2]), "beta": x[-1]}


def polished(x, n, d, loss, floor):
    """Gauss-Newton steps from x in 40 significant digits, on the same float64 points, until a step moves no
    parameter by a part in 10^25; the answer rounded to float64 (params,)."""
    mpmath = pytest.importorskip("mpmath", reason="the minimum the JavaScript is held to is polished in mpmath")
    with mpmath.workdps(40):
        x = [mpmath.mpf(float(v)) for v in x]  # (params,), a list: an mpmath matrix has no negative indices
        points = [(mpmath.log(float(a)), mpmath.log(float(b)), mpmath.log(float(c))) for a, b, c in zip(n, d, loss)]
        for _ in range(200):
            e = mpmath.mpf(floor) if floor is not None else mpmath.exp(x[0])
            rows, residual = [], []
            for ln, ld, ll in points:
                tn, td = mpmath.exp(x[-4] - x[-3] * ln), mpmath.exp(x[-2] - x[-1] * ld)
                s = e + tn + td
                residual.append(mpmath.log(s) - ll)
                rows.append(([] if floor is not None else [e / s]) + [tn / s, -ln * tn / s, td / s, -ld * td / s])
            jac = mpmath.matrix(rows)  # (cells, params)
            step = mpmath.lu_solve(jac.T * jac, -(jac.T * mpmath.matrix(residual)))  # (params,)
            x = [v + step[i] for i, v in enumerate(x)]
            if max(abs(step[i]) / max(1, abs(v)) for i, v in enumerate(x)) < mpmath.mpf(10) ** -25:
                break
        else:
            raise AssertionError("the 40-digit Gauss-Newton steps did not settle")
        return np.array([float(v) for v in x])  # (params,)


def largest_gap(a, b):
    """The largest relative difference of the five parameters of two fits."""
    return max(abs(a[k] - b[k]) / abs(b[k]) for k in PARAMS)


IMPORT = "async () => { window.sl = await import('./scaling_law.js'); }"


@pytest.fixture(scope="module")
def js(modules_page):
    modules_page.evaluate(IMPORT)
    return modules_page


def test_the_js_fit_finds_the_pythons_minimum_in_every_fit(js, numbers):
    points = scaling_law.law_points(RECORD)
    got = js.evaluate("(points) => sl.scaling_numbers(points)", points)
    assert got["floor"] == FLOOR and got["cells"] == numbers["cells"]
    fits = [("free", numbers["free"], got["free"], None, 0), ("fixed", numbers["fixed"], got["fixed"], FLOOR, 0)]
    fits += [(f">= {row['budget']}", row, mine, None, row["budget"]) for row, mine in zip(numbers["cuts"], got["cuts"],
                                                                                         strict=True)]
    for name, python, mine, floor, least in fits:
        n, d, loss = scaling_law.point_arrays(points, least)
        assert largest_gap(mine, minimum(n, d, loss, floor)) <= 1e-12, name  # the minimum itself
        assert largest_gap(mine, python) <= 3e-4, name  # fit_law, stopped by SciPy's default tolerances
        assert mine["cost"] <= python["cost"] * (1 + 1e-14), name  # ... never below the JavaScript's cost
        assert mine["cost"] == pytest.approx(python["cost"], rel=1e-9), name
        if "cells" in python:
            assert (mine["budget"], mine["cells"]) == (python["budget"], python["cells"])
    assert got["cost_ratio"] == pytest.approx(numbers["cost_ratio"], rel=1e-9)
    assert [f"{row['E']:.4f}" for row in got["cuts"]] == [f"{row['E']:.4f}" for row in numbers["cuts"]]


def test_the_js_law_its_constants_and_its_cost_are_the_pythons(js):
    constants = js.evaluate("() => [sl.STARTS, sl.LOWER, sl.UPPER, sl.LEAST_BUDGETS, sl.POINTS_FORMAT]")
    assert constants == [scaling_law.STARTS, scaling_law.LOWER, scaling_law.UPPER, ls.LEAST_BUDGETS,
                         scaling_law.POINTS_FORMAT]
    n, d, loss = cells_here()
    for x, floor in (([-1.05, 3.3, 0.65, 7.0, 0.63], None), ([8.8, 1.5, 8.2, 0.75], FLOOR)):
        mine = js.evaluate("([x, n, d, floor]) => Array.from(sl.law(x, n, d, floor))",
                           [x, n.tolist(), d.tolist(), floor])
        assert np.allclose(mine, scaling_law.law(x, n, d, floor), rtol=1e-14, atol=0)
        cost = js.evaluate("([x, n, d, loss, floor]) => sl.law_cost(x, n, d, loss, floor)",
                           [x, n.tolist(), d.tolist(), loss.tolist(), floor])
        assert cost == pytest.approx(scaling_law.law_cost(x, n, d, loss, floor), rel=1e-13)


def test_the_js_fit_recovers_a_law_it_is_given_and_keeps_to_the_bounds(js):
    """Points made by a known law, no noise: the fit finds it. Points that the law fits best with a parameter past
    its bound (alpha 4 > 3, log B above 40, E = 1e-6 below e^-10): the JavaScript stops on the bound, SciPy's fit
    just inside it, the others where SciPy's are, and the JavaScript's cost is no higher."""
    n, d = np.repeat([1e3, 3e3, 1e4, 3e4, 1e5], 5), np.tile([1e5, 4e5, 1.6e6, 6.4e6, 2.56e7], 5)  # (25,), (25,)
    fit = "([n, d, loss, floor]) => { const [, x] = sl.fit_law(n, d, loss, floor); return [x, sl.law_cost(x, n, d," \
          " loss, floor)]; }"
    loss = 0.5 + 20 / n ** 0.4 + 300 / d ** 0.3  # (25,)
    x, _ = js.evaluate(fit, [n.tolist(), d.tolist(), loss.tolist(), None])
    assert np.allclose(x, [math.log(0.5), math.log(20), 0.4, math.log(300), 0.3], rtol=1e-9, atol=1e-12)
    for loss, floor, k, bound in [(0.5 + 1e12 / n ** 4 + 300 / d ** 0.3, 0.5, 1, 3),  # alpha at its upper bound
                                  (0.5 + 20 / n ** 0.4 + 3e20 / d ** 3.5, 0.5, 2, 40),  # log B at its upper bound
                                  (1e-6 + 20 / n ** 0.4 + 300 / d ** 0.3, None, 0, -10)]:  # log E at its lower one
        mine, cost = js.evaluate(fit, [n.tolist(), d.tolist(), loss.tolist(), floor])
        _, python = scaling.fit_law(n, d, loss, floor=floor)
        assert mine[k] == bound and python[k] == pytest.approx(bound, abs=1e-5), (k, mine, python)
        assert np.allclose(mine, python, rtol=1e-4, atol=1e-5), (mine, python)
        assert cost <= scaling_law.law_cost(python, n, d, loss, floor) * (1 + 1e-12)


@pytest.mark.parametrize("change, says", [
    ({"format": "scaling experiment v1"}, 'the format is "scaling experiment v1", expected "scaling law points v1"'),
    ({"floor": -0.5}, "the floor is -0.5, expected a positive number"),
    ({"cells": []}, "expected cells, a list of {size, budget, n, d, loss}"),
    ({"cell": {"loss": "1.2"}}, "cell 3's loss is \"1.2\", expected a positive number"),
    ({"cell": {"d": 0}}, "cell 3's d is 0, expected a positive number"),
])
def test_the_js_refuses_points_that_are_not_law_points_naming_the_value(js, change, says):
    points = scaling_law.law_points(RECORD)
    if "cell" in change:
        points["cells"][3].update(change.pop("cell"))
    points.update(change)
    got = js.evaluate("(points) => { try { sl.scaling_numbers(points); return null; } catch (e) { return e.message; }"
                      " }", points)
    assert got == f"scaling law points: {says}"


def test_the_js_explains_itself_as_the_explorers_modules_do():
    text = (ROOT / "explorer" / "scaling_law.js").read_text(encoding="utf-8")
    exported = re.findall(r"^export function (\w+)", text, flags=re.M)
    assert {"law", "law_cost", "fit_law", "point_arrays", "cuts", "scaling_numbers"} <= set(exported)
    for name in exported:  # each exported function has a doc comment, as in the Python it mirrors
        assert re.search(r"\*/\nexport function " + name + r"\(", text), name
