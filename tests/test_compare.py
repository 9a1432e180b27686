"""compare.py: all OK on the real code (exit 0), NOT OK and a non-zero exit when a path is deliberately broken."""

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import compare
import numpy_model

ROOT = Path(__file__).resolve().parent.parent


def table(out):
    """{tensor name: 'OK' or 'NOT OK'} for every table row printed, in order (a second table overwrites)."""
    rows = {}
    for line in out.splitlines():
        if line.startswith("  ") and "(" in line and line.rstrip().endswith("OK"):
            rows[line[2:16].strip()] = "NOT OK" if line.rstrip().endswith("NOT OK") else "OK"
    return rows


def row_count(out):
    return sum(1 for line in out.splitlines() if line.startswith("  ") and "(" in line and line.endswith("OK"))


def test_compare_script_exits_0_and_prints_all_ok():
    run = subprocess.run([sys.executable, str(ROOT / "compare.py")], capture_output=True, text=True, cwd=ROOT)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "NOT OK" not in run.stdout and set(table(run.stdout).values()) == {"OK"}
    assert row_count(run.stdout) in (27, 54)  # 8 intermediates + loss + 18 gradients, once more with PyTorch
    assert run.stdout.rstrip().endswith("all OK")


def test_broken_backward_fails(monkeypatch, capsys):
    """A layer-norm backward off by 0.1%: the forward rows stay OK, gradient rows turn NOT OK, main returns 1."""
    real = numpy_model.layernorm_backward

    def off_by_a_bit(dy, g, cache, ws=None):
        dx, dg, db = real(dy, g, cache, ws)
        return dx * 1.001, dg, db

    monkeypatch.setattr(numpy_model, "layernorm_backward", off_by_a_bit)
    assert compare.main(["--no-torch", "--batch", "1", "--length", "20"]) == 1
    out = capsys.readouterr().out
    rows = table(out)
    assert rows["logits"] == rows["loss"] == "OK"
    assert rows["grad Wq"] == rows["grad tok_emb"] == "NOT OK"
    assert out.rstrip().endswith("NOT OK")


def test_broken_forward_fails(monkeypatch, capsys):
    """The NumPy path's layer norm with the wrong EPS: intermediates from h1 on are NOT OK."""
    monkeypatch.setattr(numpy_model, "EPS", 1e-3)
    assert compare.main(["--no-torch", "--batch", "2", "--length", "10"]) == 1
    rows = table(capsys.readouterr().out)
    assert rows["x0"] == "OK" and rows["h1"] == rows["logits"] == "NOT OK"


def test_broken_torch_twin_fails(monkeypatch, capsys):
    pytest.importorskip("torch", reason="torch is not installed")
    import torch_model

    monkeypatch.setattr(torch_model, "EPS", 1e-3)
    assert compare.main(["--batch", "1", "--length", "10"]) == 1
    out = capsys.readouterr().out
    numpy_part, torch_part = out.split("PyTorch float64 autograd vs reference")
    assert set(table(numpy_part).values()) == {"OK"}
    assert table(torch_part)["h1"] == "NOT OK"


def test_exit_status_of_a_broken_run_in_a_subprocess():
    """The exit status itself, through sys.exit, with the NumPy path's attention backward broken."""
    code = ("import sys, numpy_model, compare\n"
            "real = numpy_model.attention_backward\n"
            "def broken(params, cache, dout, ws=None):\n"
            "    grads, dx = real(params, cache, dout, ws)\n"
            "    grads['Wq'] = grads['Wq'] * 2.0\n"
            "    return grads, dx\n"
            "numpy_model.attention_backward = broken\n"
            "sys.exit(compare.main(['--no-torch', '--batch', '1', '--length', '8']))\n")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert run.returncode == 1, run.stdout + run.stderr
    assert "grad Wq" in run.stdout and "NOT OK" in run.stdout


@pytest.mark.parametrize("scheme", ["sinusoidal", "rope"])
def test_schemes_without_a_reference_compare_numpy_with_torch(monkeypatch, capsys, scheme):
    """sinusoidal and rope, past 64 tokens: NumPy against PyTorch, all OK; a rope whose pair turn J is dropped
    (each channel scaled by cos instead of turned) is NOT OK from the attention weights on."""
    pytest.importorskip("torch", reason="torch is not installed")
    assert compare.main(["--positions", scheme, "--batch", "1", "--length", "100"]) == 0
    out = capsys.readouterr().out
    assert row_count(out) == 27 and set(table(out).values()) == {"OK"} and f"({scheme})" in out
    if scheme == "rope":
        monkeypatch.setattr(numpy_model, "_pair_turn", lambda ws, n, dtype: np.zeros((n, n), dtype))
        assert compare.main(["--positions", "rope", "--batch", "1", "--length", "100"]) == 1
        rows = table(capsys.readouterr().out)
        assert rows["x0"] == rows["h1"] == "OK"
        assert rows["weights"] == rows["logits"] == rows["grad Wq"] == rows["grad tok_emb"] == "NOT OK"


def test_a_scheme_without_reference_needs_torch(capsys):
    assert compare.main(["--positions", "rope", "--no-torch", "--length", "8"]) == 2
    assert "has no reference in model.py" in capsys.readouterr().out
