"""experiments/positions.py: the reduced experiment runs and has the full one's shape; the committed positions.json has
the shape and the settings of the code, and its learning-rate sweep chose what its runs say; the probe and the windows
read the validation stories as described."""

import json
import re

import numpy as np
import pytest

import bpe
import make_corpus
from experiments import positions
from oneblock import machine
from run_helpers import ROOT, files_under

TOK = bpe.Tokenizer.load(ROOT / "tokenizer.json")
VAL = (ROOT / "corpus.txt").read_text(encoding="utf-8").splitlines()[-300:]  # train.py's validation stories


def test_reduced_experiment_runs_and_has_the_shape_of_the_full_one(tmp_path, capsys):
    """Before the fix, an --out in a missing folder was a traceback after the run. (depth.py's and drops.py's --check,
    the same recording.run_or_check: docs/depth.md's and docs/scaling.md's commands, run by tests/test_readme.py.)"""
    out = tmp_path / "new" / "sub" / "reduced.json"
    assert positions.main(["--check", "--out", str(out), "--quiet"]) == 0, capsys.readouterr().out
    assert capsys.readouterr().out.splitlines()[-1].startswith("OK: the reduced run has the shape of the full one")
    assert files_under(tmp_path / "new") == ["sub", "sub/reduced.json"]
    record = json.loads(out.read_text(encoding="utf-8"))
    positions.check_record(record, positions.REDUCED)
    learned = record["schemes"]["learned"]["extrapolation"]
    assert not learned["reads_past_64"] and len(learned["loss_by_position"]) == 64
    assert "sequence of 128 tokens is longer than the 64 positions the model has" in learned["why_not"]
    for scheme in ("none", "sinusoidal", "rope"):
        ex = record["schemes"][scheme]["extrapolation"]
        assert ex["reads_past_64"] and ex["why_not"] is None and len(ex["loss_by_position"]) == 128


def record():
    return json.loads(positions.RECORD_FILE.read_text(encoding="utf-8"))


def test_committed_record_has_the_shape_and_settings_of_this_code():
    r = record()
    positions.check_record(r, positions.FULL)
    # 4 schemes x 3 learning rates x 5 seeds of train.py's 12,000 steps: about 25 minutes of one core's time
    assert r["command"] == "python3 -m experiments.positions" and 0 < r["cpu_seconds"] <= r["seconds"] * 1.2 and (
        r["cpu_seconds"] < 40 * 60)
    floor, lrs = r["floor"]["validation_nats_per_token"], r["settings"]["sweep"]["lrs"]
    for scheme, s in r["schemes"].items():  # the summaries, checked here with NumPy, independently of --check
        means = [np.mean([run["tune"] for run in r["runs"][scheme] if run["lr"] == lr]) for lr in lrs]
        runs = [run for run in r["runs"][scheme] if run["lr"] == lrs[int(np.argmin(means))]]  # at the chosen rate
        assert s["sweep"]["chosen"] == runs[0]["lr"], scheme
        assert s["gap_to_floor"] == pytest.approx(s["val_loss"]["mean"] - floor, abs=2e-6), scheme
        assert s["val_loss"]["by_seed"] == [run["val"] for run in runs]
        assert all(run["tune_curve"][-1][1] == run["tune"] for run in r["runs"][scheme])
        assert s["val_loss"]["mean"] == pytest.approx(np.mean(s["val_loss"]["by_seed"]), abs=2e-6), scheme
        by_position = np.array([run["loss_by_position"] for run in runs])  # (seeds, T)
        assert np.allclose(s["extrapolation"]["loss_by_position"], by_position.mean(axis=0), atol=2e-6)
        assert s["extrapolation"]["mean_loss"]["32_63"]["mean"] == pytest.approx(by_position[:, 32:64].mean(),
                                                                                 abs=2e-6)


@pytest.mark.parametrize("path, change, where", [
    (("schemes", "rope", "val_loss", "mean"), 1e-4, "schemes.rope.val_loss.mean"),
    (("schemes", "none", "extrapolation", "loss_by_position", 100), -1e-3,
     "schemes.none.extrapolation.loss_by_position.100"),
    (("schemes", "learned", "probe", "accuracy_by_shape", "walk"), -0.01, "schemes.learned.probe.accuracy_by_shape"),
    (("runs", "sinusoidal", ("chosen", 5), "probe", "mean_probability"), -0.01,
     "schemes.sinusoidal.probe.mean_probability"),
    (("runs", "rope", ("chosen", 7), "loss_by_position", 70), 0.5, "schemes.rope.extrapolation.mean_loss.64_127"),
    (("runs", "learned", ("chosen", 4), "val"), 0.01, "schemes.learned.sweep.val"),
])
def test_check_record_re_derives_every_summary_from_the_runs(path, change, where):
    r = record()
    target = r
    for key in path[:-1]:
        if isinstance(key, tuple):  # the run of that seed at the chosen rate
            _, seed = key
            chosen = r["schemes"][path[1]]["sweep"]["chosen"]
            key = next(i for i, run in enumerate(target) if run["seed"] == seed and run["lr"] == chosen)
        target = target[key]
    target[path[-1]] += change
    with pytest.raises(ValueError, match=f"^{where}"):
        positions.check_record(r, positions.FULL)


def test_check_record_derives_the_chosen_rate_again():
    """Runs of another learning rate that end lower on the tuning stories: the record's choice is stale."""
    r = record()
    runs = r["runs"]["none"]
    other = next(lr for lr in r["settings"]["sweep"]["lrs"] if lr != r["schemes"]["none"]["sweep"]["chosen"])
    lowest = min(run["tune"] for run in runs)
    for run in runs:
        if run["lr"] == other:
            run["tune"] = run["tune_curve"][-1][1] = lowest - 1e-4
    with pytest.raises(ValueError, match="^schemes.none.sweep.chosen"):
        positions.check_record(r, positions.FULL)


def test_check_record_names_what_is_wrong():
    r = record()
    r["runs"]["rope"].pop()
    with pytest.raises(ValueError, match=r"rope: expected a run for each learning rate of \[0.003, 0.01, 0.03\] and"
                                         r" each seed of \[3, 4, 5, 6, 7\]"):
        positions.check_record(r, positions.FULL)
    with pytest.raises(ValueError, match="settings .* are not this code's"):
        positions.check_record(r, positions.REDUCED)


# ----------------------------------------------------------------------------------------------------------------
# A partial rerun of one cell


OTHER_KERNELS = "NumPy 0.0, OpenBLAS Elsewhere kernels, 1 thread"  # a made-up record's machine: not this one


def verdicts_on_made_up_records(rerun, record, runs, seed, step):
    """Check that a rerun reads its record: rerun(record) trains its cell again and returns (ok, line); runs are the
    record's runs of that cell, one per seed, whose tuning losses at step are made up around the loss the rerun gives
    here (got), with one BLAS thread, as the command runs it. The same digits with the record's kernels (this seed's
    loss read at step) and further than the spread with others (every seed's read): recording.rerun_verdict's other
    verdicts are tests/test_experiment_cli.py's test_a_reruns_verdict."""
    with machine.use_threads(1):
        here = machine.blas(1)
        _, line = rerun(record)
        got = float(re.search(r": tune ([0-9.e+-]+), recorded", line).group(1))
        mine, others = next(r for r in runs if r["seed"] == seed), [r for r in runs if r["seed"] != seed]
        assert len(others) >= 2, "a cell needs three seeds for these cases"

        def made_up(kernels, recorded, lo, hi):  # this seed's loss, the others' lowest and highest
            record["machine"] = kernels
            for r, value in [(mine, recorded), (others[0], lo)] + [(r, hi) for r in others[1:]]:
                next(point for point in r["tune_curve"] if point[0] == step)[1] = value
            return rerun(record)

        ok, line = made_up(here, got, got - 0.5, got + 0.5)  # the record's kernels, the same digits
        assert ok and line.endswith(f": the same digits ({here})"), line
        ok, line = made_up(OTHER_KERNELS, got + 0.01, got + 0.005, got + 0.012)  # the seeds span 0.007
        assert not ok and line.startswith("NOT OK: ") and (f"0.01 from the record, further than the spread of its"
                                                           f" {len(runs)} seeds at this step (0.007: ") in line, line


def test_rerun_gives_each_verdict_on_records_made_up_around_its_loss():
    r = record()
    lr = r["schemes"]["learned"]["sweep"]["chosen"]
    runs = [run for run in r["runs"]["learned"] if run["lr"] == lr]
    verdicts_on_made_up_records(lambda rec: positions.rerun(rec, "learned", 3, 500, lr), r, runs, 3, 500)


def test_probe_items_cover_every_validation_story_with_the_name_after_now():
    inputs, answers, shapes = positions.probe_items(TOK, VAL)
    assert len(inputs) == len(answers) == len(shapes) == 300
    names = {TOK.encode(" " + name)[0] for name in make_corpus.CAST}
    now = TOK.encode(" now")[0]
    for ids, answer, text in zip(inputs, answers, VAL):
        assert ids[0] == TOK.encode("\n")[0] and ids[-1] == now and answer in names
        assert text.startswith(TOK.decode(ids[1:] + [answer]) + " has the")  # "... now Y has the ..."
    assert set(shapes) == set(make_corpus.SHAPES)


def test_windows_are_consecutive_stretches_of_the_validation_stories():
    inputs, targets = positions.windows(TOK, VAL, 128)
    stream = TOK.encode("\n" + "".join(s + "\n" for s in VAL))
    assert inputs.shape == targets.shape == ((len(stream) - 1) // 128, 128)
    assert inputs.reshape(-1).tolist() == stream[:inputs.size]
    assert targets.reshape(-1).tolist() == stream[1:inputs.size + 1]
