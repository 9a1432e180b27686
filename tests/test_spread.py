"""spread.py: each OpenBLAS kernel family gives its own run, the native one the same bits as training here, and the
committed spread.json is a full record whose spreads are its runs' ranges."""

import json

import pytest

from experiments import recording, spread
from oneblock import machine
from oneblock.config import SCHEMES


def test_a_short_spread_run_records_every_family_and_the_native_one_matches_training_here(tmp_path, monkeypatch,
                                                                                         capsys):
    """And without --out it writes out/spread.json, never the committed record (a copy of it here)."""
    if machine.openblas_core() is None:
        pytest.skip("NumPy here does not use OpenBLAS kernels that OPENBLAS_CORETYPE can choose")
    committed = tmp_path / "experiments" / "spread.json"
    committed.parent.mkdir()
    original = spread.RECORD_FILE.read_bytes()
    committed.write_bytes(original)
    monkeypatch.setattr(spread, "RECORD_FILE", committed)
    monkeypatch.chdir(tmp_path)
    assert spread.main(["--schemes", "learned", "--steps", "40"]) == 0
    said = capsys.readouterr().out.splitlines()[-1]
    assert said.startswith("wrote out/spread.json (") and said.endswith(
        "; experiments/spread.json, the committed record, is as it was: --out experiments/spread.json replaces it")
    assert committed.read_bytes() == original  # (before the fix: rewritten)
    record = json.loads((tmp_path / "out" / "spread.json").read_text(encoding="utf-8"))
    assert record["format"] == spread.FORMAT and list(record["runs"]) == ["learned"]
    runs = record["runs"]["learned"]
    families = record["settings"]["families"]
    assert machine.openblas_core() in families
    assert [(r["kernels"], r["threads"]) for r in runs] == [(f, t) for f in families for t in spread.THREADS]
    _, history = recording.trained({"steps": 40, "positions": "learned", "seed": 3})
    native = next(r for r in runs if r["kernels"] == machine.openblas_core() and r["threads"] == 1)
    assert native["curve"] == recording.rounded([[h["step"], h["val"]] for h in history])
    s = record["spread"]["learned"]
    assert s["steps"] == [0, 40]
    assert s["min"][-1] == min(r["curve"][-1][1] for r in runs) and s["max"][-1] == max(r["curve"][-1][1] for r in runs)


def test_the_committed_record_covers_every_scheme_and_its_spreads_are_its_ranges():
    record = json.loads(spread.RECORD_FILE.read_text(encoding="utf-8"))
    assert record["format"] == spread.FORMAT and record["settings"]["seed"] == spread.SEED
    assert record["settings"]["train_args"] == ["--dtype", "float32"]  # train.py's full run
    assert len(record["settings"]["families"]) >= 2 and record["settings"]["threads"] == list(spread.THREADS)
    assert list(record["runs"]) == list(SCHEMES)
    for scheme, runs in record["runs"].items():
        s = record["spread"][scheme]
        assert len(runs) == len(record["settings"]["families"]) * len(spread.THREADS)
        assert s["steps"] == list(range(0, 12001, 500)) == [[step for step, _ in r["curve"]] for r in runs][0]
        for i in range(len(s["steps"])):
            values = [r["curve"][i][1] for r in runs]
            assert (s["min"][i], s["max"][i]) == (min(values), max(values))
            assert s["width"][i] == pytest.approx(max(values) - min(values), abs=2e-6)
        assert s["width"][0] < 1e-6  # the same initial weights: only the last bits of the sums differ
        assert s["width"][-1] > 1e-4  # 12,000 steps later, the runs differ visibly
