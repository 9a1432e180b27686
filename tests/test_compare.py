"""dev/compare.py: all OK on the real code (exit 0), NOT OK and a non-zero exit when a path is deliberately broken.
compare.main runs in this process; the command line's own exit status, in a subprocess, is the pages' commands' test
at the end (where PyTorch is not installed)."""

import re

import pytest

from dev import compare
from oneblock import machine, numpy_model
from oneblock.config import each_param_name
from fastpath_helpers import PATHS
from run_helpers import ROOT, ran, run_without


def short(module):
    """A module's name without its package, as compare.py's tables name the NumPy paths."""
    return module.__name__.rsplit(".", 1)[-1]


def tables(out):
    """{table title: {tensor name: 'OK' or 'NOT OK'}} for every table printed, in order."""
    found, rows = {}, None
    for line in out.splitlines():
        if "(OK: relative error <=" in line:
            rows = found[line.split(" (OK:")[0]] = {}
        elif rows is not None and (row := re.match(r"  (\S.*?)\s+\(.*\s\s(NOT OK|OK)$", line)):
            rows[row.group(1)] = row.group(2)
    return found


def test_the_plain_compare_returns_0_and_prints_all_ok(capsys):
    assert compare.main([]) == 0
    out = capsys.readouterr().out
    found = tables(out)
    assert list(found)[:2] == ["numpy_model float64 vs reference", "numpy_fast float64 vs reference"]
    assert len(found) in (2, 3)  # and PyTorch, when installed
    for title, rows in found.items():
        assert len(rows) == 27, title  # 8 intermediates + loss + 18 gradients
        assert set(rows.values()) == {"OK"}, title
    last = out.rstrip().splitlines()[-1]  # and, where torch is not installed, that its rows are skipped
    assert "NOT OK" not in out and last == ("all OK" if len(found) == 3 else
                                                   "all OK (PyTorch skipped: torch is not installed)")


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
    assert out.rstrip().splitlines()[-1] == "NOT OK (PyTorch skipped: --no-torch)"


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


@pytest.mark.parametrize("path", PATHS)
def test_without_the_twin_a_scheme_without_reference_compares_the_numpy_paths(path, monkeypatch, capsys):
    """rope with --no-torch: no NOT OK for the missing twin, but numpy_fast against numpy_model, all OK and exit 0;
    either path's layer-norm backward off by 0.1% turns the gradient rows NOT OK and the exit status 1."""
    assert compare.main(["--positions", "rope", "--no-torch", "--length", "8"]) == 0
    out = capsys.readouterr().out
    assert "PyTorch: skipped (--no-torch)" in out and "has no reference in model.py" in out
    assert tables(out) == {"numpy_fast float64 vs numpy_model float64 (rope)": dict.fromkeys(
        [*compare.intermediate_names(1), "loss", *("grad " + n for n in each_param_name(1))], "OK")}
    assert out.rstrip().splitlines()[-1] == "all OK (PyTorch skipped: --no-torch)"

    real = path.layernorm_backward
    monkeypatch.setattr(path, "layernorm_backward", lambda *a, **k: (real(*a, **k)[0] * 1.001, *real(*a, **k)[1:]))
    assert compare.main(["--positions", "rope", "--no-torch", "--length", "8"]) == 1
    out = capsys.readouterr().out
    (rows,) = tables(out).values()
    assert rows["logits"] == rows["loss"] == "OK" and rows["grad Wq"] == rows["grad tok_emb"] == "NOT OK"
    assert out.rstrip().splitlines()[-1] == "NOT OK (PyTorch skipped: --no-torch)"


def test_a_grown_model_compares_numpy_model_with_the_twin(capsys, monkeypatch):
    """--blocks 2 --heads 4: a table for each NumPy path against PyTorch, a row per intermediate of each block (block
    1's named like its parameters), the loss and all 30 gradients, all OK. A backward pass of numpy_model that gets
    one head's part of one Wq gradient wrong turns those rows, and only those, NOT OK."""
    pytest.importorskip("torch", reason="torch is not installed")
    assert compare.main(["--blocks", "2", "--heads", "4", "--batch", "1", "--length", "20"]) == 0
    found = tables(capsys.readouterr().out)
    assert list(found) == [f"{name} float64 vs PyTorch float64 autograd (learned, 2 blocks x 4 heads)"
                           for name in compare.NUMPY_PATHS]
    for rows in found.values():
        assert list(rows) == [*compare.intermediate_names(2), "loss", *("grad " + n for n in each_param_name(2))]
        assert set(rows.values()) == {"OK"}

    real = numpy_model.attention_backward

    def one_head_off(params, cache, dout):
        grads, dx = real(params, cache, dout)
        grads["Wq"] = grads["Wq"].copy()
        grads["Wq"][:, 4:8] *= 1.001  # head 1's columns, in every block
        return grads, dx

    monkeypatch.setattr(numpy_model, "attention_backward", one_head_off)
    assert compare.main(["--blocks", "2", "--heads", "4", "--batch", "1", "--length", "20"]) == 1
    broken, fine = tables(capsys.readouterr().out).values()
    assert [name for name, status in broken.items() if status == "NOT OK"] == ["grad Wq", "grad block1.Wq"]
    assert set(fine.values()) == {"OK"}


def test_bad_sizes_are_refused_before_any_comparison(capsys):
    """The sizes are ModelConfig.checked's to refuse (its every refusal: tests/test_grown.py's and config.py's
    doctest); compare.py names the options that gave them."""
    with pytest.raises(SystemExit) as e:
        compare.main(["--heads", "3"])
    assert e.value.code == 2 and "--blocks 1 --heads 3: heads = 3 does not divide the width d = 16" in (
        capsys.readouterr().err)


@pytest.mark.parametrize("backend, args", [
    ("numpy", []),  # the reference runs: both NumPy paths against it (and PyTorch, when installed)
    ("torch", ["--blocks", "2", "--heads", "2", "--positions", "rope"]),  # no reference: NumPy against the twin
], ids=["numpy-one-block", "torch-grown"])
def test_a_checkpoint_is_compared_at_its_weights_with_its_sizes(tmp_path, capsys, monkeypatch, backend, args):
    """train.py and compare.py in this process (the command line's own run: the test of the plain command above)."""
    if backend == "torch":
        pytest.importorskip("torch")
    monkeypatch.chdir(tmp_path)
    ckpt = tmp_path / "ckpt.safetensors"
    trained = ran("train.py", capsys, "--steps", "3", "--batch", "2", "--quiet", "--val-stories", "5", "--backend",
                  backend, *args, "--out", ckpt)
    assert trained.returncode == 0, trained.stderr
    assert compare.main(["--ckpt", str(ckpt), "--length", "20"]) == 0
    out = capsys.readouterr().out
    found = tables(out)
    assert len(found) >= 2 and all(set(rows.values()) == {"OK"} for rows in found.values())
    if args:
        assert "2 blocks x 2 heads" in out and "rope" in out
        assert all(any(name.startswith("grad block1.") for name in rows) for rows in found.values())
        return
    with pytest.raises(SystemExit) as refused:
        compare.main(["--ckpt", str(ckpt), "--heads", "2"])
    assert refused.value.code == 2 and "--heads and --ckpt: the checkpoint says its sizes" in capsys.readouterr().err
    assert compare.main(["--ckpt", str(tmp_path / "none")]) == 2
    err = capsys.readouterr().err
    assert "none" in err and "Traceback" not in err and err.count("\n") == 1


# ----------------------------------------------------------------------------------------------------------------
# Where PyTorch is not installed: the pages' commands skip the twin's rows, with the reason, and exit 0

INSTALL_TORCH = machine.INSTALL["torch"]  # the command that installs it, as the pages give it
PAGES = ["docs/growing.md", "docs/positions.md"]  # the pages whose dev.compare commands need the twin


def test_without_torch_every_compare_command_of_the_pages_skips_the_twin_and_exits_0(tmp_path):
    """Each of the pages' dev.compare commands (each after a `$ ` prompt), and the plain one, as written, where torch
    cannot be imported: the twin's rows skipped in one line that says why and how to install it, every table that ran
    all OK, exit 0."""
    texts = [(ROOT / page).read_text(encoding="utf-8") for page in PAGES]
    commands = [command for text in texts for command in re.findall(r"^    \$ (python3 -m dev\.compare\b.*)$", text,
                                                                    re.M)]
    assert commands == ["python3 -m dev.compare --blocks 2 --heads 4",
                        "python3 -m dev.compare --ckpt out/grown.safetensors",
                        "python3 -m dev.compare --positions rope --length 128"]
    for page, text in zip(PAGES, texts):  # and each page says that the twin's rows need PyTorch, and where its pin is
        assert "tests/requirements-torch.txt" in text, page
    trained = run_without({"torch"}, "train.py", "--blocks", "2", "--heads", "4", "--steps", "3", "--batch", "2",
                          "--val-stories", "5", "--quiet", "--out", "out/grown.safetensors", cwd=tmp_path)
    assert trained.returncode == 0, trained.stderr
    for command in [*commands, "python3 -m dev.compare"]:
        run = run_without({"torch"}, " ".join(command.split()[1:3]), *command.split()[3:], cwd=tmp_path)
        said = f"{command}:\n{run.stdout}{run.stderr}"
        assert run.returncode == 0 and "NOT OK" not in run.stdout and run.stderr == "", said
        skip = [line for line in run.stdout.splitlines() if line.startswith("PyTorch: skipped")]
        assert skip == [f"PyTorch: skipped (torch is not installed); the twin's rows need it: {INSTALL_TORCH}"], said
        titles = [line.split(" (")[0] for line in run.stdout.splitlines() if "(OK: relative error" in line]
        if command == "python3 -m dev.compare":  # the reference runs: both NumPy paths against it
            assert titles == ["numpy_model float64 vs reference", "numpy_fast float64 vs reference"], said
        else:  # no reference and no twin: the NumPy paths against each other
            assert titles == ["numpy_fast float64 vs numpy_model float64"], said
        for rows in tables(run.stdout).values():
            assert len(rows) >= 27 and set(rows.values()) == {"OK"}, said
        assert run.stdout.rstrip().splitlines()[-1] == "all OK (PyTorch skipped: torch is not installed)", said
