"""The best checkpoint beside the last: --out's name with .best before its suffix, by --out's rules (what is at that
name: tests/test_nothing_lost.py). The text is lines of random letters, which a model can only learn by heart: past
the letters' frequencies nothing in the training part carries over to the held-out part, so the validation loss rises
after a few dozen steps. The run the tests read is one subprocess; the others run train.py in this process (runpy)."""

import random
import re

import pytest
from run_helpers import files_under, one_line_error, ran, run

from oneblock import checkpoint, training

pytest.importorskip("numpy")

# a run that memorises: 20 lines of 40 random letters, a model twice the default width, a validation every 20 steps
RUN = ["--data", "letters.txt", "--vocab-size", "20", "--width", "32", "--batch", "8", "--seq-len", "32",
       "--steps", "300", "--eval-every", "20", "--quiet"]
LOSS_LINE = re.compile(r"^step +([0-9]+) \|(?: train [0-9.]+ \|)? val ([0-9.]+)", re.M)
WARNING = "warning: the validation loss rose at each of the last"


def letters(lines=20, width=40, seed=0):
    """Lines of random letters and spaces: a text whose only pattern is how often each letter occurs.

    >>> letters(2, 8)
    'ggae hge\\nhfd cecb\\n'
    """
    rng = random.Random(seed)
    return "".join("".join(rng.choice("abcdefgh ") for _ in range(width)) + "\n" for _ in range(lines))


def losses(stdout):
    """[(step, validation loss as printed)] of a run's loss lines."""
    return [(int(step), float(val)) for step, val in LOSS_LINE.findall(stdout)]


def lowest(seen):
    """The (step, loss) of the lowest validation after step 0 (the seed's initial weights, never kept as the best),
    the first of equal ones (a tie is not lower).

    >>> lowest([(0, 1.0), (20, 2.5), (40, 2.0), (60, 2.0)])
    (40, 2.0)
    """
    return min(seen[1:], key=lambda pair: pair[1])


def folder_with_text(folder):
    """folder, made if missing, with the text the runs learn in it."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "letters.txt").write_text(letters(), encoding="utf-8")
    return folder


@pytest.fixture(scope="module")
def straight(tmp_path_factory):
    """(folder, CompletedProcess) of the whole run, written to runs/l.safetensors."""
    folder = folder_with_text(tmp_path_factory.mktemp("straight"))
    proc = run("train.py", *RUN, "--out", "runs/l.safetensors", cwd=folder)
    assert proc.returncode == 0, proc.stderr
    return folder, proc


# ----------------------------------------------------------------------------------------------------------------
# The best, the warning, the last


def test_the_best_file_holds_the_lowest_validations_checkpoint(straight):
    folder, proc = straight
    seen = losses(proc.stdout)
    assert [step for step, _ in seen] == list(range(0, 301, 20))
    step, val = lowest(seen)
    assert 0 < step < 200 and seen[-1][1] > val + 0.5  # the text is learnt by heart: validation rises far
    best = checkpoint.load_checkpoint(folder / "runs" / "l.best.safetensors")  # a whole checkpoint, every check
    assert best["step"] == step and f"{float(best['metadata']['val_loss']):.4f}" == f"{val:.4f}"
    assert best["metadata"]["text"] == "letters.txt" and checkpoint.TOKENIZER_KEY in best["metadata"]
    assert best["config"].d == 32 and best["training"]["steps"] == 300
    last_line = proc.stdout.strip().splitlines()[-1]
    assert last_line.endswith(f"| runs/l.safetensors | best val {val:.4f} at step {step}: runs/l.best.safetensors")
    assert files_under(folder) == ["letters.txt", "runs", "runs/l.best.safetensors", "runs/l.safetensors",
                                   "runs/l.safetensors.tokenizer.json"]  # no lock, no temporary file left


def test_the_rise_is_said_once_with_the_best_and_against_guessing_by_frequency(straight):
    _, proc = straight
    seen = [val for _, val in losses(proc.stdout)]
    rises = [0]
    for before, after in zip(seen, seen[1:]):
        rises.append(rises[-1] + 1 if after > before else 0)
    assert max(rises) > training.RISES_TO_WARN  # the rise goes on past the warning: "once" is put to the test
    at = rises.index(training.RISES_TO_WARN)  # the first validation that makes three rises in a row
    assert proc.stderr.count(WARNING) == 1, proc.stderr
    (line,) = [line for line in proc.stderr.splitlines() if line.startswith("warning:")]
    step, val = lowest(losses(proc.stdout))
    unigram = float(proc.stdout.split("the token frequencies alone ")[1].split()[0])
    said = "above" if seen[at] > unigram else "still below"
    assert f"to {seen[at]:.4f} at step {20 * at} ({said} the {unigram:.4f} of guessing by token frequency)" in line
    assert line.endswith(f"The lowest, {val:.4f} at step {step}, is kept in runs/l.best.safetensors")


def test_the_last_checkpoint_stays_the_last_steps(straight, tmp_path, capsys, monkeypatch):
    """The file at --out is what it always was: the last step's state, with the last validation loss, bit for bit the
    file of the same run validated only at its end (validation changes no weight and draws no batch)."""
    folder, proc = straight
    last = checkpoint.load_checkpoint(folder / "runs" / "l.safetensors")
    assert last["step"] == 300 and f"{float(last['metadata']['val_loss']):.4f}" == f"{losses(proc.stdout)[-1][1]:.4f}"
    assert (folder / "runs" / "l.best.safetensors").read_bytes() != (folder / "runs" / "l.safetensors").read_bytes()
    once = folder_with_text(tmp_path)
    monkeypatch.chdir(once)
    quiet = ran("train.py", capsys, *RUN, "--eval-every", "300", "--out", "l.safetensors")
    assert quiet.returncode == 0 and WARNING not in quiet.stderr, quiet.stderr
    assert (once / "l.safetensors").read_bytes() == (folder / "runs" / "l.safetensors").read_bytes()
    assert (once / "l.best.safetensors").read_bytes() == (once / "l.safetensors").read_bytes()  # its one validation


# ----------------------------------------------------------------------------------------------------------------
# A resumed run keeps the best so far


def test_a_resumed_run_keeps_the_best_so_far(straight, tmp_path, capsys, monkeypatch):
    """A run of your own text, stopped and resumed: the same files as the straight run, bit for bit, with the tokenizer
    its checkpoint carries."""
    folder, proc = straight
    step, _ = lowest(losses(proc.stdout))
    stop = step + 60  # past the best, before the end: the resumed part only ever validates higher
    work = folder_with_text(tmp_path)
    monkeypatch.chdir(work)
    first = ran("train.py", capsys, *RUN, "--out", "runs/l.safetensors", "--stop-at", stop)
    assert first.returncode == 0, first.stderr
    best = work / "runs" / "l.best.safetensors"
    assert best.read_bytes() == (folder / "runs" / "l.best.safetensors").read_bytes()
    inode = best.stat().st_ino
    resumed = ran("train.py", capsys, *RUN, "--out", "runs/l.safetensors", "--resume")
    assert resumed.returncode == 0 and f"resuming runs/l.safetensors at step {stop}" in resumed.stdout
    assert "tokenizer: the one the checkpoint carries" in resumed.stdout
    assert best.stat().st_ino == inode  # never rewritten: before the fix, the resumed part's first loss was "best"
    assert best.read_bytes() == (folder / "runs" / "l.best.safetensors").read_bytes()
    assert (work / "runs" / "l.safetensors").read_bytes() == (folder / "runs" / "l.safetensors").read_bytes()
    assert resumed.stdout.strip().splitlines()[-1].endswith(proc.stdout.strip().splitlines()[-1].split(" | ")[-1])
    assert resumed.stderr.count(WARNING) == 1  # it counts its rises from its checkpoint's validation loss


def test_a_resume_refuses_a_best_file_of_another_run_and_leaves_it(tmp_path, capsys, monkeypatch):
    work = folder_with_text(tmp_path)
    monkeypatch.chdir(work)
    assert ran("train.py", capsys, *RUN, "--out", "l.safetensors", "--stop-at", "40").returncode == 0
    # the same text and settings but the seed: another run (stopped as early: its best file is all it is for)
    seeded = ran("train.py", capsys, *RUN, "--seed", "5", "--out", "seeded.safetensors", "--stop-at", "40")
    assert seeded.returncode == 0, seeded.stderr
    foreign = (work / "seeded.best.safetensors").read_bytes()
    (work / "l.best.safetensors").write_bytes(foreign)
    kept = (work / "l.safetensors").read_bytes()
    proc = ran("train.py", capsys, *RUN, "--out", "l.safetensors", "--resume")
    one_line_error(proc, "cannot resume:", "l.best.safetensors", "holds a checkpoint of another run",
                   "never replaced by a resume")
    assert (work / "l.best.safetensors").read_bytes() == foreign and (work / "l.safetensors").read_bytes() == kept

