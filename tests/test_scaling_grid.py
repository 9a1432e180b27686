"""experiments/scaling.py on every core: the reduced grid (--check's plan) gives the same record, bit for bit but its
seconds, in this process, on a running Dask scheduler's workers, and on a process pool of two workers resuming from
the per-run results a stopped grid wrote. (Every executor of experiments/grid.py, and resuming after SIGKILL:
tests/test_grid.py.)

The command line here runs without the committed record's check, the minute of every --check that these tests do
not ask about (docs/scaling.md's --check checks scaling.json, as a command: tests/test_readme.py).

Without dask and distributed the Dask case skips with its reason, except under CI=true, where that is a failure."""

import json
import shutil
import subprocess
import sys

import pytest

from run_helpers import ROOT
from test_grid import need_dask
from test_scaling import assert_fresh, split_cells

pytest.importorskip("scipy")

from experiments import scaling  # noqa: E402  (after the skip: scaling's fits need scipy)
from experiments import scaling_runs as runs  # noqa: E402


def without_seconds(record):
    """The record, its "seconds" and "cpu_seconds" fields and each run's "seconds" left out, as JSON text."""
    runs = [{k: v for k, v in run.items() if k != "seconds"} for run in record["runs"]]
    return json.dumps({**{k: v for k, v in record.items() if k not in ("seconds", "cpu_seconds")}, "runs": runs})


@pytest.fixture(scope="module")
def serial(tmp_path_factory):
    """The reduced grid's record, trained in this process, and the folder of its per-run results."""
    folder = tmp_path_factory.mktemp("serial") / "runs"
    return scaling.run_experiment(scaling.REDUCED, report=None, kind="serial", runs_dir=folder), folder


# ----------------------------------------------------------------------------------------------------------------
# The same record on every executor


def test_in_this_process_the_grid_writes_a_result_per_run_and_a_record_of_the_reduced_shape(serial):
    record, folder = serial
    scaling.check_record(json.loads(json.dumps(record)), scaling.REDUCED)
    assert "read_back" not in record  # (it computed every run: a resumed grid names those it read back, below)
    cells = len(scaling.REDUCED["sizes"]) * len(scaling.REDUCED["budgets"])
    files = sorted(p.name for p in folder.glob("*.json"))
    split = sum(r["seed"] in scaling.REDUCED["split_seeds"] for r in record["runs"])  # (runs of split cells)
    assert split and len(files) == scaling.grid_cost(scaling.REDUCED)[0] + split + cells
    assert sum(name.endswith("-chosen.json") for name in files) == cells
    chosen = [r for r in record["runs"] if r["val"] is not None and r["seed"] == scaling.REDUCED["seeds"][0]]
    for run in chosen:  # the validation is that of the sweep run's own weights, kept in its result
        key = f"{run['size']}-{run['budget']}-{run['lr']:g}-{run['seed']}"
        validated = json.loads((folder / f"{key}-chosen.json").read_text())
        swept = json.loads((folder / f"{key}.json").read_text())["result"]
        assert swept["run"]["val"] is None and validated["args"][-1] == swept["weights"]
        assert validated["result"]["run"] == {"val": run["val"], "val_error": run["val_error"]}
    run = chosen[0]
    size = [int(v) for v in run["size"].split("x")]
    weights = runs.unpacked(json.loads((folder / f"{run['size']}-{run['budget']}-{run['lr']:g}-3.json").read_text())
                            ["result"]["weights"])  # (validated again here, in this process)
    stories = runs.validation_data(scaling.REDUCED["validation_stories"])
    again = runs.validate({}, weights, runs.size_config(size), stories)
    assert again == {"val": run["val"], "val_error": run["val_error"]}


def test_the_reduced_grid_trains_more_seeds_where_they_split_and_check_record_holds_it_to_that(serial):
    r = json.loads(json.dumps(serial[0]))
    assert scaling.grid_cost(scaling.REDUCED)[0] == 3 * 4 * (2 + 2)
    split = split_cells(r, scaling.REDUCED)
    assert split and len(r["runs"]) == scaling.grid_cost(scaling.REDUCED)[0] + 2 * len(split)  # (it splits)
    for (size, budget), cell in ((key, r["cells"][key[0]][str(key[1])]) for key in split):
        assert sorted(run["seed"] for run in r["runs"] if (run["size"], run["budget"], run["lr"]) == (
            size, budget, cell["lr"])) == [3, 4, 5, 6, 7] and len(cell["val"]["by_seed"]) == 5
    assert_fresh(r["data"]["streams"])
    assert sorted(r["data"]["streams"]) == ["3", "4", "5", "6", "7"]
    less = {**r, "runs": [run for run in r["runs"] if (run["size"], run["budget"], run["seed"]) != (*split[0], 7)]}
    with pytest.raises(ValueError, match=f"runs, expected 48 and 2 more for each of the {len(split)} cells whose"):
        scaling.check_record(less, scaling.REDUCED)
    moved = {**r, "runs": [{**run, "seed": 6} if (run["size"], run["budget"], run["seed"]) == (*split[0], 7) else run
                           for run in r["runs"]]}
    with pytest.raises(ValueError, match="seed 6: expected one run of each cell whose seeds split"):
        scaling.check_record(moved, scaling.REDUCED)


@pytest.mark.parametrize("path, change, where", [
    (("runs", -1, "val"), 1e-3, "cells.{size}"),  # (a run: the first summary that differs is that of its cell)
    (("cells", "16x1", "600000000", "reducible"), 1e-3, "cells.16x1.600000000.reducible"),
    (("fits", "free_floor", "alpha"), 1e-3, "fits.free_floor.alpha"),
    (("isoflop", "a"), 1e-2, "isoflop.a"),
    (("judged", "floors_by_cut", 0, "huber", "E"), 1e-3, "judged.floors_by_cut.0.huber.E"),
    (("judged", "held_out", 1, "fits", "true_floor", "rms_error"), 1e-3, "judged.held_out.1.fits.true_floor"),
])
def test_check_record_derives_every_summary_again_from_the_runs(serial, path, change, where):
    """A summary moved and the runs left as they were, or a run's validation loss moved and every summary left as it
    was: check_record names the summary that differs (on the reduced grid's record, whose summaries are those of the
    full one's code, fitted in seconds). where is formatted with the fields of what holds the moved value."""
    r = json.loads(json.dumps(serial[0]))
    target = r
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] += change
    with pytest.raises(ValueError, match="^" + where.format(**target)):
        scaling.check_record(r, scaling.REDUCED)


def test_the_command_line_on_a_running_dask_scheduler_writes_the_serial_record(serial, tmp_path):
    """--executor dask --scheduler ADDRESS: a cluster started apart (here, on 127.0.0.1, by this test), whose
    workers train the runs while the command alone writes the record and the per-run results (its committed record
    taken as checked and found OK: recording.committed_verdict)."""
    need_dask()
    import logging

    import distributed

    out = tmp_path / "reduced.json"
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                                  dashboard_address=None, worker_dashboard_address=None,
                                  silence_logs=logging.ERROR) as cluster:
        done = subprocess.run([sys.executable, "-c", "import sys; from experiments import recording, scaling;"
                               " recording.committed_verdict = lambda experiment: (True, None);"
                               " sys.exit(scaling.main(sys.argv[1:]))", "--check", "--out", str(out), "--quiet",
                               "--executor", "dask", "--scheduler", cluster.scheduler_address],
                              cwd=ROOT, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stdout + done.stderr
        assert len(cluster.scheduler.workers) == 2  # (its own workers: the command started none)
    assert done.stdout.splitlines()[-1].startswith("OK: the reduced run has the shape of the full one")
    assert without_seconds(json.loads(out.read_text())) == without_seconds(serial[0])
    assert len(list((tmp_path / "reduced-runs").glob("*.json"))) == len(list(serial[1].glob("*.json")))


# ----------------------------------------------------------------------------------------------------------------
# Resuming


def test_a_stopped_grid_resumes_from_its_runs_on_two_workers_and_ends_with_the_same_record(serial, tmp_path):
    """The results written first (the twelve a grid killed part-way had written: each file whole, tests/test_grid.py)
    are read back, only the missing runs train, on a process pool of two workers, and the record names those it read
    back."""
    runs = tmp_path / "runs"
    runs.mkdir()
    written = sorted(serial[1].glob("*.json"), key=lambda p: p.stat().st_mtime_ns)  # (in the order they finished)
    for path in written[:12]:
        shutil.copy2(path, runs / path.name)
    lines = []
    record = scaling.run_experiment(scaling.REDUCED, report=lines.append, workers=2, runs_dir=runs)
    assert lines[0] == f"12 results found in {runs}"
    assert sum(line.endswith(" done") for line in lines) == len(written) - 12  # only the missing runs trained
    assert sorted(record.pop("read_back")) == sorted(path.name[:-5] for path in written[:12])
    assert without_seconds(record) == without_seconds(serial[0])
    assert len(list(runs.glob("*.json"))) == len(written)


# ----------------------------------------------------------------------------------------------------------------
# A result read back is believed only if its run could have given it


def lower_tune(text):
    """A result file whose sweep run's tuning loss (and the end of its curve) says 0.001."""
    result = json.loads(text)
    run = result["result"]["run"]
    run["tune"], run["tune_curve"][-1][1] = 0.001, 0.001
    return json.dumps(result)


@pytest.mark.parametrize("key, edit, said", [
    ("8x1-300000000-0.01-3", lower_tune, r"holds a result that 8x1-300000000-0\.01-3 cannot give: 8x1 at 300000000"
                                         r" FLOPs lr 0\.01 seed 3: tune 0\.001 is far below the floor"),
    ("16x1-600000000-0.03-3", lambda text: text.replace('"seed": 3', '"seed": 4', 1), r"holds the run of 16x1"),
    ("8x1-300000000-0.01-3", lambda text: text.replace('"held_out": 0', '"held_out": 2', 1),
     r"its stream's counts are not whole numbers of stories, none of them held out"),
])
def test_a_result_file_edited_to_what_no_run_gives_is_refused_before_any_work(serial, tmp_path, key, edit, said):
    folder = tmp_path / "runs"  # (a copy of the serial grid's results, key's file edited)
    shutil.copytree(serial[1], folder)
    (folder / f"{key}.json").write_text(edit((folder / f"{key}.json").read_text()))
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    with pytest.raises(ValueError, match=said + ".*it is never replaced"):
        scaling.run_experiment(scaling.REDUCED, report=None, kind="serial", runs_dir=folder)
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before  # (nothing trained, nothing replaced)


def test_another_grids_lock_on_the_results_is_refused_before_the_committed_records_check(tmp_path, capsys,
                                                                                          monkeypatch):
    """(A file there that is no result, refused by the same judged_folder at the same moment: its doctest.)"""
    from atomic import hold
    from experiments import recording

    folder = tmp_path / "runs"
    monkeypatch.chdir(ROOT)
    monkeypatch.setattr(recording, "committed_verdict", lambda experiment: pytest.fail("the long check started"))
    monkeypatch.setattr(scaling, "run_experiment", lambda *a, **k: pytest.fail("the grid started"))
    with hold(folder / "grid", "another grid", follow=False):
        status = scaling.main(["--check", "--runs-dir", str(folder), "--out", str(tmp_path / "r.json"), "--quiet"])
    err = capsys.readouterr().err
    assert status == 2 and len(err.splitlines()) == 1 and "is in use by another run (another grid)" in err, err
    assert not (tmp_path / "r.json").exists()


# ----------------------------------------------------------------------------------------------------------------
# The grid's options, checked before any work


@pytest.mark.parametrize("args, phrase", [
    (["--workers", "two"], "--workers: expected a whole number of at least 1, got 'two'"),
    (["--executor", "dask", "--scheduler", "tcp://127.0.0.1:1"], "--scheduler tcp://127.0.0.1:1: cannot connect to it"),
    (["--check", "--out", "out/r.json", "--runs-dir", "out"], "--runs-dir out is the folder of --out out/r.json"),
    (["--executor", "threads"], "--executor: invalid choice: 'threads'"),
    (["--scheduler", "tcp://127.0.0.1:8786"], "address 'tcp://127.0.0.1:8786' is for the dask executor"),
    (["--check", "--runs-dir", "README.md"], "--runs-dir README.md: results folder README.md is a file"),
    (["--table", "--workers", "2"], "--workers 2: --table trains no grid"),
    (["--rerun", "16x1", "--executor", "serial"], "--executor serial: --rerun trains no grid"),
])
def test_a_bad_grid_option_is_refused_before_any_work_naming_it(args, phrase, capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    monkeypatch.setattr(scaling, "run_experiment", lambda *a, **k: pytest.fail("the grid started"))
    with pytest.raises(SystemExit) as e:
        scaling.main(args)
    assert e.value.code == 2 and phrase in capsys.readouterr().err


def test_without_dask_the_dask_executor_is_refused_naming_the_packages(capsys, monkeypatch):
    monkeypatch.setattr(scaling.grid.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(SystemExit) as e:
        scaling.main(["--check", "--executor", "dask"])
    assert e.value.code == 2 and "--executor dask: the dask executor needs dask, which is not installed" in (
        capsys.readouterr().err)


# ----------------------------------------------------------------------------------------------------------------
# The benchmark


def test_the_grid_benchmark_times_one_worker_and_two_and_writes_the_speed_up(tmp_path, capsys):
    from dev import bench_grid

    out = tmp_path / "new" / "bench.json"  # (its folder is made)
    assert bench_grid.main(["--rounds", "1", "--scale", "0.25", "--workers", "2", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    figures = json.loads(out.read_text())
    assert sorted(figures["seconds"]) == ["1", "2"] and figures["same_results"] is True
    per_run = figures["seconds_per_run"]
    assert figures["speed_up"] == pytest.approx(per_run["1"] / per_run["2"]) and all(v > 0 for v in per_run.values())
    assert f"speed-up {figures['speed_up']:.2f}x" in printed and f"wrote {out}" in printed
    (tmp_path / "notes.json").write_text("mine")
    with pytest.raises(SystemExit) as refused:
        bench_grid.main(["--out", str(tmp_path / "notes.json")])
    assert refused.value.code == 2 and "is never replaced" in capsys.readouterr().err
    assert (tmp_path / "notes.json").read_text() == "mine"
