"""train.py --backend torch: the twin trained by the same loop as the NumPy path, alone and data-parallel under
torchrun (gloo, 2 CPU ranks), equal to one process; checkpoints that move between backends; a killed 2-rank run
resumed; a grown model (blocks and heads) under DDP; bad launches refused before any work."""

import os
import signal
import subprocess
import sys
import time

import pytest

from oneblock import checkpoint, training
from oneblock.settings import Settings, checked
from fastpath_helpers import rel_err
from run_helpers import ROOT, kill_group, ran

torch = pytest.importorskip("torch", reason="torch is not installed (pip install -r tests/requirements-torch.txt)")
np = pytest.importorskip("numpy")

# 20 float64 steps of 4 windows of 32 tokens, the clip low enough that some steps are clipped and some not
RUN = ["--steps", "20", "--batch", "4", "--seq-len", "32", "--val-stories", "10", "--dtype", "float64",
       "--clip", "0.5", "--eval-every", "10", "--quiet"]
TORCH = ["--backend", "torch", "--device", "cpu"]
TORCHRUN = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2"]  # torchrun
VALUES = {"steps": 20, "batch": 4, "seq_len": 32, "val_stories": 10, "dtype": "float64", "clip": 0.5,
          "eval_every": 10, "quiet": True}  # RUN, as the library's settings


def trained(**values):
    """(weights, history) of the library's train with VALUES and values."""
    run = training.train(Settings(**{**VALUES, **values}))
    assert run.failure is None, run.failure
    return run.state["params"], run.history


def params_of(path):
    """The parameters of a checkpoint file, as float64 arrays."""
    return {name: np.array(values, dtype=np.float64).reshape(shape)
            for name, (_, shape, values) in checkpoint.load_checkpoint(path)["params"].items()}


def train_py(out, *args, launcher=(sys.executable,), check=True, **popen):
    """train.py with the checkpoint at out, in one process or under a launcher (torchrun)."""
    proc = subprocess.run([*launcher, str(ROOT / "train.py"), "--out", str(out), *map(str, args)],
                          capture_output=True, text=True, cwd=out.parent, timeout=600, **popen)
    if check:
        assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


# ----------------------------------------------------------------------------------------------------------------
# One process


@pytest.mark.parametrize("grown", [{}, {"steps": 10, "blocks": 2, "heads": 2, "positions": "rope"}],
                         ids=["one-block", "2x2-rope"])
def test_the_torch_backend_takes_the_numpy_backends_steps(grown):
    torch_params, torch_history = trained(backend="torch", device="cpu", **grown)
    numpy_params, numpy_history = trained(backend="numpy", **grown)
    assert next(iter(torch_params.values())).dtype == torch.float64 and list(torch_params) == list(numpy_params)
    for name, t in torch_params.items():
        assert rel_err(t.detach(), numpy_params[name]) <= 1e-10, name
    for a, b in zip(torch_history, numpy_history, strict=True):
        assert a["val"] == pytest.approx(b["val"], rel=1e-10)


def test_a_checkpoint_moves_between_backends(tmp_path, capsys):
    # numpy stops halfway (on the whole run's schedule), torch finishes it, every sampler backend reads the result
    moved = tmp_path / "moved.safetensors"
    train_py(moved, *RUN, "--backend", "numpy", "--stop-at", "10")
    assert checkpoint.load_checkpoint(moved)["step"] == 10
    proc = train_py(moved, *RUN, *TORCH, "--resume")
    assert "resuming" in proc.stdout and checkpoint.load_checkpoint(moved)["step"] == 20
    got = params_of(moved)
    for name, t in trained(backend="numpy")[0].items():
        assert rel_err(got[name], t) <= 1e-10, name
    texts = set()
    for backend in ("numpy", "python", "torch"):
        proc = ran("sample.py", capsys, "--ckpt", moved, "--backend", backend, "--temperature", "0", "--tokens", "12")
        assert proc.returncode == 0, proc.stderr
        texts.add(proc.stdout)
    assert len(texts) == 1  # greedy: the same tokens from every backend


def test_the_explorer_exports_a_torch_run_as_it_exports_a_numpy_one(tmp_path):
    from oneblock import export

    sites = {}
    for backend in ("numpy", "torch"):
        path = tmp_path / f"{backend}.safetensors"
        train_py(path, *RUN, "--dtype", "float32", "--backend", backend, *(["--device", "cpu"] * (backend == "torch")))
        weights, fields = export.read_weights(path, explicit=True)
        assert fields["trained"] and fields["step"] == 20
        sites[backend] = export.export_site(tmp_path / backend, weights, fields)
    assert {k: v for k, v in sites["torch"].items() if k not in ("source", "val_loss")} == {
        k: v for k, v in sites["numpy"].items() if k not in ("source", "val_loss")}


# ----------------------------------------------------------------------------------------------------------------
# Two ranks


def test_two_ranks_equal_one_process_halfway_and_at_the_end(tmp_path):
    """A grown model (2 blocks x 2 heads, rope): both ranks train it, and their weights are one process's."""
    grown = [*RUN, "--blocks", "2", "--heads", "2", "--positions", "rope"]
    one, two = tmp_path / "one.safetensors", tmp_path / "two.safetensors"
    train_py(one, *grown, *TORCH, "--stop-at", "10")
    proc = train_py(two, *grown, *TORCH, "--stop-at", "10", launcher=TORCHRUN)
    assert "2 blocks x 2 heads" in proc.stdout and "2 processes (gloo)" in proc.stdout
    assert proc.stdout.count("done:") == 1  # rank 0 alone reports
    for when in ("halfway", "at the end"):
        got = params_of(two)
        for name, t in params_of(one).items():
            assert rel_err(got[name], t) <= 1e-12, (when, name)
        assert checkpoint.load_checkpoint(two)["step"] == checkpoint.load_checkpoint(one)["step"]
        if when == "halfway":
            train_py(one, *grown, *TORCH, "--resume")
            train_py(two, *grown, *TORCH, "--resume", launcher=TORCHRUN)
    assert checkpoint.load_checkpoint(two)["step"] == 20 and checkpoint.load_checkpoint(two)["config"].blocks == 2


def test_a_killed_two_rank_run_resumes_to_the_uninterrupted_bytes(tmp_path):
    run = [a for a in RUN if a not in ("20", "--steps")] + ["--steps", "300", "--ckpt-every", "5"]
    straight, killed = tmp_path / "straight.safetensors", tmp_path / "killed.safetensors"
    train_py(straight, *run, *TORCH, launcher=TORCHRUN)
    cmd = [*TORCHRUN, str(ROOT / "train.py"), "--out", str(killed), *run, *TORCH]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=tmp_path,
                            start_new_session=True)  # its own process group: torchrun and both ranks
    try:
        step, deadline = 0, time.monotonic() + 300
        while step < 20 and time.monotonic() < deadline and proc.poll() is None:
            if killed.exists():
                step = checkpoint.load_checkpoint(killed)["step"]
            time.sleep(0.05)
        assert proc.poll() is None and 20 <= step < 300, "the run ended before it could be killed"
    finally:
        kill_group(proc)  # both ranks gone too, their lock with them
    kept = checkpoint.load_checkpoint(killed)["step"]  # a whole checkpoint, never a torn one
    assert 20 <= kept < 300
    train_py(killed, *run, *TORCH, "--resume", launcher=TORCHRUN)
    assert killed.read_bytes() == straight.read_bytes()


def test_a_rank_that_dies_ends_the_run_and_keeps_the_last_checkpoint(tmp_path):
    out = tmp_path / "ckpt.safetensors"
    run = [a for a in RUN if a not in ("20", "--steps")] + ["--steps", "100000", "--ckpt-every", "5"]
    proc = subprocess.Popen([*TORCHRUN, str(ROOT / "train.py"), "--out", str(out), *run, *TORCH],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path,
                            start_new_session=True)
    try:
        deadline = time.monotonic() + 300
        while not (out.exists() and checkpoint.load_checkpoint(out)["step"] >= 10) and time.monotonic() < deadline:
            assert proc.poll() is None, "the run ended by itself"
            time.sleep(0.05)
        ranks = subprocess.run(["pgrep", "-P", str(proc.pid)], capture_output=True, text=True).stdout.split()
        assert len(ranks) == 2
        os.kill(int(max(ranks, key=int)), signal.SIGKILL)  # one rank dies
        _, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            kill_group(proc)
    assert proc.returncode != 0 and "FAILED" in err and "Signal 9 (SIGKILL)" in err  # torchrun names the rank
    assert checkpoint.load_checkpoint(out)["step"] >= 10


# ----------------------------------------------------------------------------------------------------------------
# Bad launches


@pytest.mark.parametrize("args, phrase", [
    ([*TORCH, "--batch", "3"], "--batch 3 cannot be shared by the 2 processes torchrun started"),
    ([*TORCH, "--resume"], "cannot resume: there is no checkpoint at"),
    (["--backend", "numpy"], "only --backend torch trains data-parallel"),
])
def test_a_bad_launch_is_one_message_and_writes_nothing(tmp_path, args, phrase):
    out = tmp_path / "run" / "ckpt.safetensors"
    out.parent.mkdir()
    proc = train_py(out, *RUN, *args, launcher=TORCHRUN, check=False)
    assert proc.returncode != 0
    assert proc.stderr.count(phrase) == 1, proc.stderr  # said once, by rank 0 (torchrun adds its own report)
    assert list(out.parent.iterdir()) == []


def test_a_device_the_run_cannot_use_is_named_before_any_work():
    """The settings' check, in this process (train.py says each of its refusals in one line with exit 2:
    tests/test_train.py's command-line cases)."""
    with pytest.raises(ValueError, match="^--device cpu is for --backend torch"):
        checked(Settings(backend="numpy", device="cpu"))
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="^--device cuda: PyTorch .* sees no CUDA device here"):
            checked(Settings(backend="torch", device="cuda"))
