"""The scaling lesson (experiments/lessons_scaling.py) and the law's module (experiments/scaling_law.py): the lesson's
numbers equal to the committed record's fits (tests/test_lessons.py drives it with scripted input and on the command
line, with the ten); the refits on the larger budgets computed again here, from the record's runs, with a fit of this
file's own calls; and the answer explore.py's export gives the page (oneblock/export.py's lessons_data): the lesson's
own, or a skip that says what to run, and a damaged record refused.
"""

import json
import statistics

import pytest

np = pytest.importorskip("numpy", reason="the scaling lesson needs NumPy")
pytest.importorskip("scipy", reason="the scaling lesson fits with SciPy")

from experiments import lessons_scaling as ls, scaling, scaling_law  # noqa: E402
from experiments.recording import rounded  # noqa: E402
from oneblock import lessons  # noqa: E402

RECORD = json.loads(ls.RECORD_FILE.read_text(encoding="utf-8"))
FLOOR = RECORD["floor"]["validation_nats_per_token"]
PARAMS = ("E", "A", "alpha", "B", "beta")
LAB = lessons.build_lab()


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
        assert c["d"] == scaling.tokens_for(sizes[c["size"]], c["budget"], scaling.FULL["batch"])
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


SPOILED = {  # how a scaling record is damaged -> (its bytes, what its refusal says); what recording.read_record
    # refuses of every record (a FIFO, a device, too large, not UTF-8) is tests/test_experiment_cli.py's
    "nested": (b"[" * 100_000, "JSON nested too deeply to read"),
    "a loss of another kind": (json.dumps({**RECORD, "runs": [{**r, "val": "low"} for r in RECORD["runs"]]}).encode(),
                               "does not have the shape"),
    "no floor": (json.dumps({k: v for k, v in RECORD.items() if k != "floor"}).encode(), "no field 'floor'"),
    "of another experiment": (json.dumps({"format": "depth experiment v1"}).encode(),
                              "its format is 'depth experiment v1', expected 'scaling experiment v1'"),
}


@pytest.mark.parametrize("how", SPOILED)
def test_a_damaged_record_is_a_skip_in_one_line_read_as_the_experiments_read_theirs(tmp_path, how):
    """Before: tracebacks (JSONDecodeError, RecursionError, ...)."""
    path = tmp_path / "scaling.json"
    path.write_bytes(SPOILED[how][0])
    with pytest.raises(lessons.Skip) as skipped:
        ls.read_points(path)
    line = str(skipped.value)
    assert SPOILED[how][1] in line and "\n" not in line and "run python3 -m experiments.scaling" in line, line


# ----------------------------------------------------------------------------------------------------------------
# The page's answer: the export's, computed here


def test_the_export_gives_the_page_the_lessons_own_answer(tmp_path, monkeypatch):
    from oneblock import export

    data = export.lessons_data()
    ours = ls.SCALING.answer(LAB)
    assert data["scaling"] == {key: ours[key] for key in ("value", "shown", "bounds")}
    assert json.loads(json.dumps(data)) == data  # plain JSON, every float back to its bits
    (tmp_path / "bad.json").write_bytes(SPOILED["nested"][0])  # (a missing record: the same one-line Skip)
    read = ls.read_points
    monkeypatch.setattr(ls, "read_points", lambda _: read(tmp_path / "bad.json"))  # (the record the lesson reads)
    with pytest.raises(ValueError, match="bad.json") as refused:
        export.lessons_data()
    assert "\n" not in str(refused.value)


def test_every_export_copies_the_committed_page_lessons(tmp_path):
    """An export copies oneblock/page-lessons.json's bytes: the page gets every lesson and the scaling answer where
    NumPy or SciPy is missing, and explore.py fits nothing. (That the file is what `python3 -m oneblock.export` would
    write now is its --check, which docs/reproducibility.md shows and tests/test_readme.py runs.)"""
    from oneblock import export

    export.export_data(tmp_path, *export.read_weights(tmp_path / "no-such.safetensors", explicit=False))
    assert (tmp_path / "lessons.json").read_bytes() == export.PAGE_LESSONS.read_bytes()
