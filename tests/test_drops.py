"""experiments/drops.py: when each size learns to follow the chain. The committed record's summaries come again from
its runs, and from runs made up around known drops (a drop itself is drop_step's doctest; a bad rerun, refused
before training, is tests/test_experiment_cli.py's; the reduced plan, run and checked against the full one's shape,
and a run rerunning to the record's digits are docs/scaling.md's commands, which tests/test_readme.py runs)."""

import json
import math

import numpy as np
import pytest

from experiments import drops


def committed():
    return json.loads(drops.RECORD_FILE.read_text(encoding="utf-8"))


def test_the_summaries_of_runs_made_up_around_a_known_drop():
    plan = {**drops.REDUCED, "levels": [0.02], "seeds": [3, 4]}
    floor = 0.5

    def run(size, seed, drop):
        return {"size": size, "seed": seed, "tune_curve": [[0, 4.5], *[[s, floor + (0.01 if s >= drop else 0.3)]
                                                                         for s in range(20, 81, 20)]]}

    runs = [run("8x1", 3, 999), run("16x1", 3, 40), run("16x2", 3, 20), run("8x1", 4, 999), run("16x1", 4, 80),
            run("16x2", 4, 40)]
    s = drops.summarise(runs, plan, floor)
    at = {size: s["sizes"][size]["levels"]["0.02"] for size in ("8x1", "16x1", "16x2")}
    assert at["8x1"]["steps"] == [None, None] and at["8x1"]["median"] is None and at["8x1"]["tokens"] is None
    assert at["16x1"]["steps"] == [40, 80] and at["16x1"]["median"] == 60
    assert at["16x1"]["tokens"] == 60 * plan["batch"] * 64
    assert s["sizes"]["16x2"]["final"] == pytest.approx(0.01)
    n = [s["sizes"][k]["parameters"] for k in ("16x1", "16x2")]
    assert s["powers"]["0.02"]["sizes"] == ["16x1", "16x2"]
    assert s["powers"]["0.02"]["exponent"] == pytest.approx(math.log(30 / 60) / math.log(n[1] / n[0]), rel=1e-5)
    assert drops.summarise(runs[:1] + runs[3:4], {**plan, "sizes": [[8, 1]]}, floor)["powers"]["0.02"] is None


def test_committed_record_has_the_shape_of_this_code_and_its_summaries_come_from_its_runs():
    r = committed()
    drops.check_record(r, drops.FULL)
    assert np.isfinite([s["final"] for s in r["sizes"].values()]).all()
    floor = r["floor"]["tuning_nats_per_token"]
    for size, s in r["sizes"].items():  # found again here, from the curves
        runs = [x for x in r["runs"] if x["size"] == size]
        for level in drops.LEVELS:
            for run, step in zip(runs, s["levels"][f"{level:g}"]["steps"]):
                within = [t for t, loss in run["tune_curve"] if loss - floor <= level]
                assert step == (within[0] if within else None)
    changed = json.loads(json.dumps(r))
    size = next(iter(changed["sizes"]))
    changed["sizes"][size]["final"] += 1e-3
    with pytest.raises(ValueError, match=f"^sizes.{size}.final"):
        drops.check_record(changed, drops.FULL)
    changed = json.loads(json.dumps(r))
    changed["runs"][-1]["tune_curve"][-1][1] -= 0.001  # a run's number: the summaries follow it
    with pytest.raises(ValueError, match="^sizes"):
        drops.check_record(changed, drops.FULL)


def test_check_record_names_what_is_wrong():
    r = committed()
    r["runs"][2]["flops"] += 1
    with pytest.raises(ValueError, match="flops are not the formula's"):
        drops.check_record(r, drops.FULL)
    r = committed()
    r["runs"][0]["tune_curve"] = r["runs"][0]["tune_curve"][::2]
    with pytest.raises(ValueError, match="not evaluated every 50 steps"):
        drops.check_record(r, drops.FULL)
    with pytest.raises(ValueError, match="settings .* are not this code's"):
        drops.check_record(committed(), drops.REDUCED)
