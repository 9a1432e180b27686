"""dev/compare.py: all OK on the real code (exit 0), NOT OK and a non-zero exit when a path is deliberately broken."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

from dev import compare
from oneblock import numpy_model, sizes
from fastpath_helpers import PATHS

ROOT = Path(__file__).resolve().parent.parent


def short(module):
    """A module's name without its package, as compare.py's tables name the NumPy paths."""
    return module.__name__.rsplit(".", 1)[-1]


def tables(out):
    """{table title: {tensor name: 'OK' or 'NOT OK'}} for every table printed, in order."""
    found, rows = {}, None
    for line in out.splitlines():
        if "(OK: relative error <=" in line:
            rows = found[line.split(" (OK:")[0]] = {}
        elif rows is not None and line.startswith("  ") and "(" in line and line.rstrip().endswith("OK"):
            rows[line[2:16].strip()] = "NOT OK" if line.rstrip().endswith("NOT OK") else "OK"
    return found


def test_compare_script_exits_0_and_prints_all_ok():
    run = subprocess.run([sys.executable, "-m", "dev.compare"], capture_output=True, text=True, cwd=ROOT)
    assert run.returncode == 0, run.stdout + run.stderr
    found = tables(run.stdout)
    assert list(found)[:2] == ["numpy_model float64 vs reference", "numpy_fast float64 vs reference"]
    assert len(found) in (2, 3)  # and PyTorch, when installed
    for title, rows in found.items():
        assert len(rows) == 27, title  # 8 intermediates + loss + 18 gradients
        assert set(rows.values()) == {"OK"}, title
    assert "NOT OK" not in run.stdout and run.stdout.rstrip().endswith("all OK")


@pytest.mark.parametrize("path", PATHS)
def test_broken_backward_fails(path, monkeypatch, capsys):
    """A layer-norm backward off by 0.1%: the forward rows stay OK, gradient rows turn NOT OK in that path's table
    (the other path's stays OK), main returns 1."""
    real = path.layernorm_backward

    def off_by_a_bit(*args, **kwargs):
        dx, dg, db = real(*args, **kwargs)
        return dx * 1.001, dg, db

    monkeypatch.setattr(path, "layernorm_backward", off_by_a_bit)
    assert compare.main(["--no-torch", "--batch", "1", "--length", "20"]) == 1
    out = capsys.readouterr().out
    found = tables(out)
    rows = found.pop(f"{short(path)} float64 vs reference")
    assert rows["logits"] == rows["loss"] == "OK"
    assert rows["grad Wq"] == rows["grad tok_emb"] == "NOT OK"
    assert [set(other.values()) for other in found.values()] == [{"OK"}]
    assert out.rstrip().endswith("NOT OK")


@pytest.mark.parametrize("path", PATHS)
def test_broken_forward_fails(path, monkeypatch, capsys):
    """A NumPy path's layer norm with the wrong EPS: intermediates from h1 on are NOT OK."""
    monkeypatch.setattr(path, "EPS", 1e-3)
    assert compare.main(["--no-torch", "--batch", "2", "--length", "10"]) == 1
    rows = tables(capsys.readouterr().out)[f"{short(path)} float64 vs reference"]
    assert rows["x0"] == "OK" and rows["h1"] == rows["logits"] == "NOT OK"


def test_broken_torch_twin_fails(monkeypatch, capsys):
    pytest.importorskip("torch", reason="torch is not installed")
    from oneblock import torch_model

    monkeypatch.setattr(torch_model, "EPS", 1e-3)
    assert compare.main(["--batch", "1", "--length", "10"]) == 1
    found = tables(capsys.readouterr().out)
    assert found.pop("PyTorch float64 autograd vs reference")["h1"] == "NOT OK"
    assert [set(rows.values()) for rows in found.values()] == [{"OK"}, {"OK"}]


@pytest.mark.parametrize("module", ["numpy_model", "numpy_fast"])
def test_exit_status_of_a_broken_run_in_a_subprocess(module):
    """The exit status itself, through sys.exit, with a NumPy path's attention backward broken."""
    code = (f"import sys\nfrom dev import compare\nfrom oneblock import {module} as path\n"
            "real = path.attention_backward\n"
            "def broken(*args):\n"
            "    grads, dx = real(*args)\n"
            "    grads['Wq'] = grads['Wq'] * 2.0\n"
            "    return grads, dx\n"
            "path.attention_backward = broken\n"
            "sys.exit(compare.main(['--no-torch', '--batch', '1', '--length', '8']))\n")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert run.returncode == 1, run.stdout + run.stderr
    rows = tables(run.stdout)[f"{module} float64 vs reference"]
    assert rows["grad Wq"] == "NOT OK" and rows["grad Wk"] == "OK"


@pytest.mark.parametrize("scheme", ["sinusoidal", "rope"])
def test_schemes_without_a_reference_compare_numpy_with_torch(monkeypatch, capsys, scheme):
    """sinusoidal and rope, past 64 tokens: each NumPy path against PyTorch, all OK; a rope whose sine is dropped
    (each channel scaled by cos instead of turned) is NOT OK in both from the attention weights on."""
    pytest.importorskip("torch", reason="torch is not installed")
    assert compare.main(["--positions", scheme, "--batch", "1", "--length", "100"]) == 0
    found = tables(capsys.readouterr().out)
    assert list(found) == [f"{name} float64 vs PyTorch float64 autograd ({scheme})" for name in compare.NUMPY_PATHS]
    assert all(len(rows) == 27 and set(rows.values()) == {"OK"} for rows in found.values())
    if scheme == "rope":
        real = numpy_model.rope_tables
        monkeypatch.setattr(numpy_model, "rope_tables", lambda T, d: (real(T, d)[0], 0.0 * real(T, d)[1]))
        assert compare.main(["--positions", "rope", "--batch", "1", "--length", "100"]) == 1
        for rows in tables(capsys.readouterr().out).values():
            assert rows["x0"] == rows["h1"] == "OK"
            assert rows["weights"] == rows["logits"] == rows["grad Wq"] == rows["grad tok_emb"] == "NOT OK"


def test_a_scheme_without_reference_needs_torch(capsys):
    assert compare.main(["--positions", "rope", "--no-torch", "--length", "8"]) == 2
    assert "has no reference in model.py" in capsys.readouterr().out



PATHS_BY_NAME = list(compare.NUMPY_PATHS)  # numpy_model, numpy_fast


def grown_rows(out):
    """{row name: "OK" or "NOT OK"} of the one table compare.py prints for a grown model."""
    rows = {}
    for line in out.splitlines():
        m = re.match(r"  (\S.*?)\s+\(.*\s\s(NOT OK|OK)$", line)
        if m:
            rows[m.group(1)] = m.group(2)
    return rows


def test_a_grown_model_compares_numpy_model_with_the_twin(capsys, monkeypatch):
    """--blocks 2 --heads 4: a table for each NumPy path against PyTorch, a row per intermediate of each block (block
    1's named like its parameters), the loss and all 30 gradients, all OK. A backward pass of numpy_model that gets
    one head's part of one Wq gradient wrong turns those rows, and only those, NOT OK."""
    pytest.importorskip("torch", reason="torch is not installed")
    assert compare.main(["--blocks", "2", "--heads", "4", "--batch", "1", "--length", "20"]) == 0
    out = capsys.readouterr().out
    titles = [f"{name} float64 vs PyTorch float64 autograd (learned, 2 blocks x 4 heads)" for name in PATHS_BY_NAME]
    assert [line.split(" (OK:")[0] for line in out.splitlines() if "(OK:" in line] == titles
    for table in out.split("(OK: relative error")[1:]:
        rows = grown_rows(table)
        assert list(rows) == [*compare.intermediate_names(2), "loss", *("grad " + n for n in sizes.param_names(2))]
        assert set(rows.values()) == {"OK"}

    real = numpy_model.attention_backward

    def one_head_off(params, cache, dout):
        grads, dx = real(params, cache, dout)
        grads["Wq"] = grads["Wq"].copy()
        grads["Wq"][:, 4:8] *= 1.001  # head 1's columns, in every block
        return grads, dx

    monkeypatch.setattr(numpy_model, "attention_backward", one_head_off)
    assert compare.main(["--blocks", "2", "--heads", "4", "--batch", "1", "--length", "20"]) == 1
    broken, fine = capsys.readouterr().out.split("(OK: relative error")[1:]
    assert [name for name, status in grown_rows(broken).items() if status == "NOT OK"] == ["grad Wq",
                                                                                             "grad block1.Wq"]
    assert set(grown_rows(fine).values()) == {"OK"}


@pytest.mark.parametrize("args, phrase", [
    (["--heads", "3"], "--blocks 1 --heads 3: heads = 3 does not divide the width d = 16"),
    (["--blocks", "0"], "blocks = 0: expected a whole number of at least 1"),
    (["--heads", "16", "--positions", "rope"], "heads = 16 gives heads of width d / heads = 1"),
])
def test_bad_sizes_are_refused_before_any_comparison(capsys, args, phrase):
    with pytest.raises(SystemExit) as e:
        compare.main(args)
    assert e.value.code == 2 and phrase in capsys.readouterr().err


@pytest.mark.parametrize("backend, args", [
    ("numpy", []),  # the reference runs: both NumPy paths against it (and PyTorch, when installed)
    ("torch", ["--blocks", "2", "--heads", "2", "--positions", "rope"]),  # no reference: NumPy against the twin
], ids=["numpy-one-block", "torch-grown"])
def test_a_checkpoint_is_compared_at_its_weights_with_its_sizes(tmp_path, backend, args):
    if backend == "torch":
        pytest.importorskip("torch")
    ckpt = tmp_path / "ckpt.safetensors"
    trained = subprocess.run([sys.executable, str(ROOT / "train.py"), "--steps", "3", "--batch", "2", "--quiet",
                              "--val-stories", "5", "--backend", backend, *args, "--out", str(ckpt)],
                             capture_output=True, text=True, cwd=ROOT)
    assert trained.returncode == 0, trained.stderr
    run = subprocess.run([sys.executable, "-m", "dev.compare", "--ckpt", str(ckpt), "--length", "20"],
                         capture_output=True, text=True, cwd=ROOT)
    assert run.returncode == 0, run.stdout + run.stderr
    found = tables(run.stdout)
    assert len(found) >= 2 and all(set(rows.values()) == {"OK"} for rows in found.values())
    if args:
        assert "2 blocks x 2 heads" in run.stdout and "rope" in run.stdout
        assert all(any(name.startswith("grad block1.") for name in rows) for rows in found.values())
    refused = subprocess.run([sys.executable, "-m", "dev.compare", "--ckpt", str(ckpt), "--heads", "2"],
                             capture_output=True, text=True, cwd=ROOT)
    assert refused.returncode == 2 and "--heads and --ckpt: the checkpoint says its sizes" in refused.stderr
    missing = subprocess.run([sys.executable, "-m", "dev.compare", "--ckpt", str(tmp_path / "none")],
                             capture_output=True, text=True, cwd=ROOT)
    assert missing.returncode == 2 and "none" in missing.stderr and "Traceback" not in missing.stderr
