"""train.py and the library's training (oneblock/training.py, settings.py): learning, determinism, a real SIGKILL
and --resume, divergence, the settings, and the backends. train.py runs in this process (runpy), as its command line
runs it, and in a subprocess only where it is killed; the library's train is called with values, as the experiments
call it."""

import dataclasses
import importlib.util
import json
import math
import re
import signal
import subprocess
import sys
import time
from types import SimpleNamespace

import pytest
from checkpoint_edits import edited, meta_json_edit, version_2
from run_helpers import ROOT, ran

from oneblock import checkpoint, training
from oneblock.config import SWITCH_KEY, ModelConfig
from oneblock.settings import Settings, checked

np = pytest.importorskip("numpy")

# a short run: 4 windows of 32 tokens per step, 20 validation stories, no progress bar
SHORT = ["--batch", "4", "--seq-len", "32", "--val-stories", "20", "--quiet"]


def final_val_loss(stdout):
    """The validation loss on train.py's summary line."""
    return float(re.search(r"^done: .* \| val ([0-9.]+) nats/token", stdout, re.M).group(1))


def trained(**values):
    """(weights, history) of the library's train with the settings of SHORT and values."""
    run = training.train(Settings(**{"batch": 4, "seq_len": 32, "val_stories": 20, "quiet": True, **values}))
    assert run.failure is None, run.failure
    return run.state["params"], run.history


@pytest.fixture
def train_py(tmp_path, capsys, monkeypatch):
    """train.py run in this process as its command line runs it, in tmp_path: train_py(*args) gives returncode,
    stdout and stderr."""
    monkeypatch.chdir(tmp_path)
    return lambda *args: ran("train.py", capsys, *args)


@pytest.fixture
def run_train(train_py):
    """train.py in this process with the checkpoint at out and the settings of SHORT: run_train(out, *args) gives
    returncode, stdout and stderr, and fails the test on a failed run unless check is False."""
    def run(out, *args, check=True):
        proc = train_py("--out", out, *SHORT, *args)
        if check:
            assert proc.returncode == 0, proc.stderr
        return proc
    return run


@pytest.fixture
def sample_py(capsys):
    """sample.py in this process, as its command line runs it: sample_py(*args) gives returncode, stdout and stderr."""
    return lambda *args: ran("sample.py", capsys, *args)


# ----------------------------------------------------------------------------------------------------------------
# Learning and determinism


def test_short_run_learns_far_below_uniform_guessing(tmp_path, run_train):
    out = tmp_path / "ckpt.safetensors"
    proc = run_train(out, "--steps", "300", "--batch", "8", "--eval-every", "150")
    val = final_val_loss(proc.stdout)
    assert val < math.log(96) - 3.0, proc.stdout  # ln 96 = 4.56: from guessing to knowing most of the grammar
    assert "floor 0.3" in proc.stdout
    ckpt = checkpoint.load_checkpoint(out)
    checkpoint.tokenizer_of(ckpt, ROOT / "tokenizer.json", out)  # (the stories' tokenizer)
    assert ckpt["step"] == 300 and float(ckpt["metadata"]["val_loss"]) == pytest.approx(val, abs=1e-4)


def test_data_with_an_order_of_windows_reads_each_once_in_that_order(monkeypatch):
    """A run on data that carries an `order` reads its windows step by step in that order, each once, and draws
    nothing from its sampler; a run longer than its order stops before the step it lacks, naming the numbers."""
    from oneblock import data as data_files

    data = data_files.prepare(checked(Settings(batch=4, seq_len=32, val_stories=20)))
    data.order = list(range(0, 32 * 24, 32))[::-1]  # 24 windows that follow each other, read from the end
    read = []
    starts = training.batch_starts
    monkeypatch.setattr(training, "batch_starts", lambda *a: read.append(starts(*a)) or read[-1])
    run = training.train(Settings(steps=6, batch=4, seq_len=32, val_stories=20, quiet=True), data=data)
    assert [i for batch in read for i in batch] == data.order and run.state["rng"].random() == (
        training.fresh_state(lambda seed: {}, 3)["rng"].random())  # the sampler untouched
    with pytest.raises(ValueError, match="step 7 needs windows 24 to 27, but the data's order has 24"):
        training.train(Settings(steps=7, batch=4, seq_len=32, val_stories=20, quiet=True), data=data)


@pytest.mark.parametrize("grown, backends", [
    ({"batch": 2, "seq_len": 64}, ("python", "numpy-plain", "numpy")),
    ({"batch": 3, "seq_len": 40, "blocks": 2, "heads": 4, "positions": "rope"}, ("numpy-plain", "numpy")),
], ids=["one-block", "2x4-rope"])
def test_the_backends_take_the_same_steps(grown, backends):
    """The same loop on model.py (one block), the plain NumPy mirror and the tuned path, in float64: every step's
    training loss, every validation loss and the final weights agree to rounding, for the one-block model and a
    grown one (2 blocks x 4 heads, rope)."""
    values = {"steps": 4, "dtype": "float64", "eval_every": 1, "val_stories": 5, **grown}
    (ref_params, ref_history), *others = (trained(**values, backend=backend) for backend in backends)
    assert ref_history[-1]["train"] < ref_history[1]["train"] - 0.05  # the steps did change the weights
    for backend, (params, history) in zip(backends[1:], others, strict=True):
        assert list(params) == list(ref_params) and ("block1.Wq" in params) == ("blocks" in grown), backend
        for h, ref in zip(history, ref_history, strict=True):
            assert h["step"] == ref["step"] and h["val"] == pytest.approx(ref["val"], abs=1e-9, rel=0), backend
            if ref["train"] is not None:
                assert h["train"] == pytest.approx(ref["train"], abs=1e-9, rel=0), backend
        for name, t in params.items():
            assert np.abs(t - np.array(ref_params[name])).max() <= 1e-9, (backend, name)


def test_python_backend_runs_from_the_command_line_and_shows_its_speed_in_tokens_per_second(tmp_path, run_train):
    out = tmp_path / "py.safetensors"
    proc = run_train(out, "--backend", "python", "--steps", "2", "--batch", "2", "--seq-len", "16",
                     "--val-stories", "3")
    assert "python float64" in proc.stdout and final_val_loss(proc.stdout) < math.log(96)
    assert checkpoint.load_checkpoint(out)["params"]["W1"][0] == "F64"
    speed = re.search(r", ([0-9,]+k?) tokens/s\)", proc.stdout).group(1)
    assert not speed.endswith("k") and int(speed.replace(",", "")) > 0, proc.stdout


# ----------------------------------------------------------------------------------------------------------------
# Kill and resume


def test_sigkill_then_resume_gives_bit_identical_weights(tmp_path, run_train):
    """A run killed with SIGKILL (TerminateProcess on Windows: no handler, no clean-up, no last save) past step 300,
    its checkpoint read all along and saved every 5 steps, never torn, resumes to the bytes of the straight run. (A
    grown model resumed so: test_a_grown_checkpoint_of_version_2_resumes_to_the_bytes_of_the_run_it_continues; the
    temporary files of a writer killed mid-save removed, and only those: tests/test_locks.py.)"""
    run = ["--steps", "2000", "--ckpt-every", "5", "--eval-every", "2000"]
    straight = tmp_path / "straight" / "ckpt.safetensors"
    killed = tmp_path / "killed" / "ckpt.safetensors"
    for path in (straight, killed):
        path.parent.mkdir()
    run_train(straight, *run)

    cmd = [sys.executable, str(ROOT / "train.py"), "--out", str(killed), *SHORT, *run]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=killed.parent)
    try:
        step, deadline = 0, time.monotonic() + 120
        while step < 300 and time.monotonic() < deadline and proc.poll() is None:
            if killed.exists():
                step = checkpoint.load_checkpoint(killed)["step"]  # a whole checkpoint, at every read
            time.sleep(0.002)
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == (-signal.SIGKILL if hasattr(signal, "SIGKILL") else 1), "the run ended by itself"
    at_kill = checkpoint.load_checkpoint(killed)["step"]
    assert 300 <= at_kill < 2000

    proc = run_train(killed, *run, "--resume")
    assert f"resuming {killed} at step {at_kill}" in proc.stdout
    assert killed.read_bytes() == straight.read_bytes()
    best = "ckpt.best.safetensors"  # the checkpoint of the lowest validation loss, the same one after the resume
    assert (killed.parent / best).read_bytes() == (straight.parent / best).read_bytes()
    assert sorted(p.name for p in killed.parent.iterdir()) == [best, killed.name]  # no temporary file left behind


@pytest.mark.parametrize("change, settings, differ", [
    ({"positions": "rope"}, {}, "is another model than this run's: positions 'learned' there, 'rope' here"),
    ({"blocks": 2, "heads": 4}, {}, "is another model than this run's: blocks 1 there, 2 here; heads 1 there, 4 here"),
    ({"d": 32, "hidden": 128}, {}, "is another model than this run's: d 16 there, 32 here; hidden 64 there, 128 here"),
    ({}, {"steps": 30}, "was made with other settings: --steps 20 there, 30 here"),
    ({}, {"lr": 0.02}, "was made with other settings: --lr 0.01 there, 0.02 here"),
])
def test_resume_refuses_another_model_or_other_settings(change, settings, differ):
    """A resume compares the whole ModelConfig of the file with the run's, not only its width and max_len: a file
    of another scheme, other heads or another hidden width is refused in one line naming every field that differs,
    before any tensor is read; and so is a file of other settings (the run's steps, its learning rate)."""
    there = ModelConfig(96, 16, 64, 64)
    ckpt = {"metadata": {"tokenizer_sha256": "0" * 64}, "config": there, "training": {"steps": 20, "lr": 0.01}}
    data = SimpleNamespace(tokenizer_sha="0" * 64, metadata={})
    with pytest.raises(ValueError) as e:
        training.resumed_state(checked(Settings()), ckpt, "c.safetensors", {"steps": 20, "lr": 0.01, **settings},
                               dataclasses.replace(there, **change), data)
    assert str(e.value) == f"c.safetensors {differ}. HINT: to resume, pass the settings of the run you resume"


def test_resume_without_a_checkpoint_says_so(tmp_path, train_py):
    out = tmp_path / "none.safetensors"
    proc = train_py("--out", out, *SHORT, "--steps", "10", "--resume")
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr == f"error: cannot resume: there is no checkpoint at {out}; run without --resume to start one\n"


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # (NumPy on the overflow that makes the loss nan)
def test_non_finite_loss_stops_the_run_and_keeps_the_last_good_checkpoint(tmp_path, run_train):
    out = tmp_path / "ckpt.safetensors"
    # a learning rate of 1e38 throws float32 weights to about 1e38 in one step: the next loss is nan
    proc = run_train(out, "--steps", "50", "--ckpt-every", "1", "--lr", "1e38", "--min-lr", "1e38", "--warmup", "0",
                     check=False)
    assert proc.returncode == 1
    assert "the loss is nan" in proc.stderr and "keeps step 1" in proc.stderr and "Traceback" not in proc.stderr
    assert checkpoint.load_checkpoint(out)["step"] == 1  # loads: every value in it is finite


# ----------------------------------------------------------------------------------------------------------------
# Settings


@pytest.mark.parametrize("values, message", [
    ({"steps": -5}, "--steps -5: expected a whole number of at least 1"),
    ({"lr": -0.1}, "--lr -0.1: expected a positive finite number"),
    ({"lr": math.nan}, "--lr nan: expected a positive finite number"),
    ({"min_lr": 1.0}, "--min-lr 1.0 is more than --lr 0.01: expected a learning rate that falls"),
    ({"beta2": 1.0}, "--beta2 1.0: expected a number in [0, 1)"),
    ({"clip": 0.0}, "--clip 0.0: expected a positive number (Infinity: no clipping)"),
    ({"backend": "python", "dtype": "float32"}, "--dtype float32: the python backend computes in Python floats,"
                                                " which are float64; drop --dtype or use --backend numpy"),
    ({"heads": 3}, "--heads 3: heads = 3 does not divide the width d = 16; expected one of 1, 2, 4, 8, 16"),
    ({"heads": 16, "positions": "rope"}, "--heads 16: heads = 16 gives heads of width d / heads = 1, but rope turns"
                                         " pairs of channels in each head: the head width must be even; expected one"
                                         " of 1, 2, 4, 8 heads for d = 16"),
    ({"backend": "python", "heads": 2}, "--backend python runs model.py: this run's model has 1 block x 2 heads, but"
                                        " model.py has one block and one head; use --backend numpy, numpy-plain or"
                                        " torch"),
    ({"backend": "python", "positions": "sinusoidal"}, "--backend python runs model.py: this run's model has"
                                                       " positions 'sinusoidal', but model.py has learned positions"
                                                       " and none only; use --backend numpy, numpy-plain or torch"),
])
def test_settings_that_make_no_sense_are_one_line_naming_the_value(values, message):
    with pytest.raises(ValueError) as e:
        checked(Settings(**values))
    assert str(e.value) == message


@pytest.mark.parametrize("args, phrase", [
    (["--resume", "--overwrite"], "contradict"),
    (["--steps", "ten"], "invalid int value: 'ten'"),
    (["--dtype", "float16"], "invalid choice: 'float16'"),
    (["--heads", "0"], "error: --heads 0: expected a whole number of at least 1\n"),  # (the settings' own words)
    (["--step", "10"], "unrecognized arguments: --step"),  # an abbreviated flag is an error, not a run
    (["--val-stories", "3000"], "--val-stories 3000 leaves no training stories"),
    (["--no-positions", "--positions", "rope"], "--no-positions and --positions rope contradict"),
    # the settings of --data
    (["--tokenizer", "t.json"], "--tokenizer go with --data FILE"),
    (["--vocab-size", "64", "--val-fraction", "0.2"], "--vocab-size and --val-fraction go with --data FILE"),
    (["--data", "x.txt", "--val-stories", "30"], "with --data the share of the text that validates is --val-fraction"),
    (["--data", "x.txt", "--tokenizer", "t.json", "--vocab-size", "64"], "contradict each other"),
    (["--data", "x.txt", "--val-fraction", "1"], "--val-fraction 1.0: expected a number between 0 and 1"),
])
def test_nonsensical_settings_are_rejected(tmp_path, train_py, args, phrase):
    proc = train_py(*args, "--out", "c.safetensors")
    assert proc.returncode == 2 and phrase in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    assert list(tmp_path.iterdir()) == []


def test_help_explains_every_setting(train_py):
    proc = train_py("--help")
    assert proc.returncode == 0
    text = " ".join(proc.stdout.split())
    options = re.findall(r"^  (-[-\w]+(?:, --[-\w]+)?)(?: [A-Z_{][^ ]*)?(?:  +(\S.*))?$", proc.stdout, re.M)
    assert len(options) > 30
    for flag, _ in options:  # every option has a help text: at least one word after it in the listing
        assert re.search(re.escape(flag.split(", ")[-1]) + r"\b[^-]*?[a-z]{3}", text), flag
    assert "default: 12000" in text and "float32 for numpy" in text and "out/ckpt.best.safetensors" in text


# ----------------------------------------------------------------------------------------------------------------
# Position schemes


def test_a_checkpoint_from_before_the_schemes_still_resumes_and_samples(tmp_path, run_train, sample_py):
    """Files written before --positions had model.py's switch only in their config (SWITCH_KEY) and training
    positions true or false."""
    out = tmp_path / "old.safetensors"
    run_train(out, "--steps", "20", "--no-positions")
    assert json.loads(checkpoint.decode(out.read_bytes())[1]["config"])["positions"] == "none"  # (--no-positions)
    out.write_bytes(edited(out.read_bytes(), meta_json_edit("config", lambda config: config.pop("positions")),
                           meta_json_edit("training", lambda training: training.update(positions=False)))())
    proc = run_train(out, "--steps", "20", "--no-positions", "--resume")
    assert f"resuming {out} at step 20" in proc.stdout
    for backend in ("python", "numpy"):
        proc = sample_py("--ckpt", out, "--tokens", "5", "--backend", backend)
        assert proc.returncode == 0, proc.stderr


def test_a_grown_checkpoint_of_version_2_resumes_to_the_bytes_of_the_run_it_continues(tmp_path, run_train):
    """A version 2 file repeats the model's positions, blocks and heads in its training; it resumes as the same run,
    and the resumed run writes version 3."""
    grown = ["--steps", "20", "--ckpt-every", "10", "--eval-every", "10", "--blocks", "2", "--heads", "2"]
    straight, old = tmp_path / "straight.safetensors", tmp_path / "old.safetensors"
    run_train(straight, *grown)
    run_train(old, *grown, "--stop-at", "10")
    old.write_bytes(edited(old.read_bytes(), version_2())())
    assert checkpoint.load_checkpoint(old)["metadata"]["format_version"] == "2"
    proc = run_train(old, *grown, "--resume")
    assert f"resuming {old} at step 10" in proc.stdout
    assert old.read_bytes() == straight.read_bytes()


def test_the_librarys_train_gives_the_command_lines_weights_and_another_seed_others(tmp_path, run_train):
    """training.train (what the experiments call, with values) is the same training as the command line, bit for
    bit; another seed trains other weights. (The same seed's whole file, byte for byte:
    test_a_one_block_one_head_checkpoint_records_no_sizes.)"""
    out = tmp_path / "ckpt.safetensors"
    run_train(out, "--steps", "40", "--positions", "sinusoidal")
    params, history = trained(steps=40, positions="sinusoidal", eval_every=20)
    saved = checkpoint.load_checkpoint(out)["params"]
    for name, a in params.items():
        assert a.tobytes() == saved[name][2].tobytes(), name
    assert [h["step"] for h in history] == [0, 20, 40] and history[0]["train"] is None
    other, _ = trained(steps=40, positions="sinusoidal", eval_every=20, seed=4)
    assert other["W1"].tobytes() != params["W1"].tobytes()


# ----------------------------------------------------------------------------------------------------------------
# A grown model: which path it trains on, its checkpoint, and the scripts that read it


def test_a_grown_rope_run_says_its_path_records_its_model_and_sample_reads_it(tmp_path, run_train, sample_py):
    """(The explorer's export of a grown model, and sample.py's default backend on one: the good files of
    tests/test_fuzz_checkpoints.py. A one-block file records its scheme in its training too: the doctest of
    checkpoint.recorded_training.)"""
    out = tmp_path / "grown.safetensors"
    proc = run_train(out, "--steps", "30", "--blocks", "2", "--heads", "4", "--positions", "rope", "--eval-every", "30")
    assert "numpy float32, 2 blocks x 4 heads, " in proc.stdout and "positions rope" in proc.stdout
    ckpt = checkpoint.load_checkpoint(out)
    assert ckpt["metadata"]["format_version"] == "3" and (ckpt["config"].blocks, ckpt["config"].heads) == (2, 4)
    assert ckpt["config"].positions == "rope" and json.loads(ckpt["metadata"]["config"])[SWITCH_KEY] is False
    assert ckpt["training"]["backend"] == "numpy" and not set(checkpoint.MODEL_SETTINGS) & set(ckpt["training"])
    sample = ["--ckpt", out, "--tokens", "30", "--temperature", "0"]
    texts = {}
    for backend in ("numpy", "torch") if importlib.util.find_spec("torch") else ("numpy",):
        proc = sample_py(*sample, "--backend", backend)
        assert proc.returncode == 0 and "2 blocks x 4 heads" in proc.stderr, proc.stderr
        texts[backend] = proc.stdout
    assert len(set(texts.values())) == 1  # the twin reads the same sizes and writes the same text
    proc = sample_py(*sample, "--backend", "python")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "has 2 blocks x 4 heads, but model.py has one block and one head" in proc.stderr


def test_a_one_block_one_head_checkpoint_records_no_sizes(tmp_path, run_train):
    """--blocks 1 --heads 1 spelled out is the default run, byte for byte: version 1, no sizes recorded."""
    a, b = tmp_path / "a.safetensors", tmp_path / "b.safetensors"
    run_train(a, "--steps", "10")
    run_train(b, "--steps", "10", "--blocks", "1", "--heads", "1", "--backend", "numpy")
    assert a.read_bytes() == b.read_bytes()
    ckpt = checkpoint.load_checkpoint(a)
    recorded = json.loads(ckpt["metadata"]["config"]) | ckpt["training"]  # what the file says
    assert ckpt["metadata"]["format_version"] == "1" and "heads" not in recorded and "blocks" not in recorded
    assert ckpt["config"] == ModelConfig(96, 16, 64, 64)  # the default model: learned positions
