"""Owning --out, a second pass, each case train.py in a real subprocess: the lock is made new and never follows a
link or opens what is at its name (a link to a file of yours, your own file, a folder, a FIFO: each refused and left
as it was), a killed run's lock is still taken over; a run removes only the temporary files a killed writer of its
own path left, never another run's save in progress or a file of yours; a file has one lock however it is named (a
link to it and the file itself are one --out, and a run through a link writes its target); and --out names that the
file system cannot take, or torchrun numbers that make no sense, are one line before anything is made."""

import os
import random
import signal
import string
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from run_helpers import HELD, held, kill_at, one_line_error

from oneblock import checkpoint, settings

ROOT = Path(__file__).resolve().parent.parent
SHORT = ["--steps", "4", "--batch", "2", "--seq-len", "16", "--val-stories", "20", "--eval-every", "4", "--quiet"]
POSIX = pytest.mark.skipif(os.name != "posix", reason="links, FIFOs and flock are POSIX's")


def train(*args, cwd, env=None, timeout=300):
    return subprocess.run([sys.executable, str(ROOT / "train.py"), *map(str, args)], capture_output=True, text=True,
                          cwd=cwd, timeout=timeout, env=None if env is None else {**os.environ, **env})


def files_under(folder):
    return sorted(str(p.relative_to(folder)) for p in Path(folder).rglob("*"))


# ----------------------------------------------------------------------------------------------------------------
# 1. The lock follows no link and opens nothing that is there


@POSIX
def test_a_link_at_the_locks_name_is_refused_and_what_it_points_to_is_untouched(tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n", encoding="utf-8")
    (tmp_path / "a").mkdir()
    lock = tmp_path / "a" / "ck.safetensors.lock"
    lock.symlink_to(victim)
    proc = train("--out", "a/ck.safetensors", *SHORT, cwd=tmp_path)  # before the fix: exit 0, victim.txt the note
    one_line_error(proc, "ck.safetensors.lock", "is a symbolic link, not a lock", "never opened for writing")
    assert victim.read_text(encoding="utf-8") == "precious\n" and lock.is_symlink()
    assert not (tmp_path / "a" / "ck.safetensors").exists()

    lock.unlink()  # a link to nothing: no file is made where it points
    lock.symlink_to(tmp_path / "made-by-the-run")
    proc = train("--out", "a/ck.safetensors", *SHORT, cwd=tmp_path)
    one_line_error(proc, "is a symbolic link, not a lock")
    assert not (tmp_path / "made-by-the-run").exists() and lock.is_symlink()


@POSIX
@pytest.mark.parametrize("kind", ["file", "empty file beside a live holder", "folder", "fifo", "hard link"])
def test_a_lock_name_that_holds_something_else_is_refused_and_kept(tmp_path, kind):
    lock, victim = tmp_path / "ck.safetensors.lock", tmp_path / "victim.txt"
    victim.write_text("precious\n", encoding="utf-8")
    if kind == "file":
        lock.write_text("my own notes on the run\n", encoding="utf-8")
    elif kind == "folder":
        lock.mkdir()
        (lock / "inside.txt").write_text("kept\n", encoding="utf-8")
    elif kind == "fifo":
        os.mkfifo(lock)
    elif kind == "hard link":
        os.link(victim, lock)
    holder = None
    if kind == "empty file beside a live holder":  # a run that made its lock and has not yet written its note
        holder = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
            import fcntl, os, sys
            fd = os.open({str(lock)!r}, os.O_RDWR | os.O_CREAT | os.O_EXCL)
            fcntl.flock(fd, fcntl.LOCK_EX)
            print("held", flush=True)
            sys.stdin.read()""")], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert holder.stdout.readline() == "held\n"
    before = {p: (p.stat().st_mode, p.read_bytes() if p.is_file() and kind != "fifo" else None)
              for p in tmp_path.rglob("*")}
    try:
        started = time.monotonic()
        proc = train("--out", "ck.safetensors", *SHORT, cwd=tmp_path, timeout=60)  # before: truncated, deleted
        assert time.monotonic() - started < 30
    finally:
        if holder is not None:
            holder.stdin.close()
            holder.wait(timeout=30)
    phrase = {"file": "does not hold this lab's mark", "folder": "is a folder, not a lock",
              "fifo": "is a FIFO (a named pipe), not a lock", "hard link": "has other names",
              "empty file beside a live holder": "is in use by another run"}[kind]
    one_line_error(proc, "ck.safetensors", phrase)
    after = {p: (p.stat().st_mode, p.read_bytes() if p.is_file() and kind != "fifo" else None)
             for p in tmp_path.rglob("*")}
    assert after == before and victim.read_text(encoding="utf-8") == "precious\n"


def test_a_killed_runs_lock_is_taken_over_by_the_next_run(tmp_path):
    out = tmp_path / "ck.safetensors"
    cmd = [sys.executable, str(ROOT / "train.py"), "--out", str(out), "--steps", "3000", "--batch", "2",
           "--seq-len", "16", "--val-stories", "20", "--eval-every", "1000", "--ckpt-every", "20", "--quiet"]
    step = kill_at(cmd, out, tmp_path, at_least=20)
    lock = tmp_path / "ck.safetensors.lock"
    assert lock.read_text(encoding="utf-8").startswith("one-block lock, held by pid ")  # left by the kill
    proc = train("--out", out, "--steps", "3000", "--batch", "2", "--seq-len", "16", "--val-stories", "20",
                 "--eval-every", "1000", "--ckpt-every", "20", "--quiet", "--resume", "--stop-at", step + 20,
                 cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert checkpoint.load_checkpoint(out)["step"] == step + 20 and not lock.exists()


# ----------------------------------------------------------------------------------------------------------------
# 3. A run removes only what a killed writer of its own path left

# a writer of path argv[1] killed in the middle of its save: its temporary file is on disk, its lock gone with it
KILLED_WRITER = """
import os, signal, sys
sys.path.insert(0, sys.argv[2])
import atomic
os.fsync = lambda fd: os.kill(os.getpid(), signal.SIGKILL)
atomic.write_atomic(sys.argv[1], b"half of a checkpoint")
"""

# another run's save of path argv[1] in progress: its temporary file, locked, until stdin closes
SAVING = """
import fcntl, os, sys
name = f"{sys.argv[1]}.{os.getpid()}.savingxy.tmp"
fd = os.open(name, os.O_RDWR | os.O_CREAT | os.O_EXCL)
fcntl.flock(fd, fcntl.LOCK_EX)
print(name, flush=True)
sys.stdin.read()
"""


@POSIX
def test_a_run_removes_only_the_temporary_files_a_killed_writer_of_its_path_left(tmp_path):
    out = tmp_path / "ck.safetensors"
    killed = subprocess.run([sys.executable, "-c", KILLED_WRITER, out, ROOT], capture_output=True, timeout=60)
    assert killed.returncode == -signal.SIGKILL
    (left,) = [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
    yours = [tmp_path / name for name in ("ck.safetensors.backup.tmp", "ck.safetensors.old.tmp",
                                          "ck.safetensors.1.abcdefgh.tmp")]  # pid 1 runs: it may be a writer
    for path in yours:
        path.write_text(f"yours: {path.name}\n", encoding="utf-8")
    saving = subprocess.Popen([sys.executable, "-c", SAVING, out], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True)
    try:
        in_progress = Path(saving.stdout.readline().strip())
        proc = train("--out", out, *SHORT, cwd=tmp_path)  # before the fix: every ck.safetensors.*.tmp deleted
        assert in_progress.exists()  # the other run's save goes on
    finally:
        saving.stdin.close()
        saving.wait(timeout=30)
    assert proc.returncode == 0, proc.stderr
    assert "removed 1 temporary file(s) that a killed run left" in proc.stderr
    assert not left.exists()
    for path in yours:
        assert path.read_text(encoding="utf-8") == f"yours: {path.name}\n"


# ----------------------------------------------------------------------------------------------------------------
# 4. One lock per file, however it is named


@POSIX
def test_a_run_on_a_link_and_a_run_on_its_file_are_one_out(tmp_path):
    (tmp_path / "real").mkdir()
    out, link = tmp_path / "real" / "ck.safetensors", tmp_path / "link.safetensors"
    assert train("--out", out, *SHORT, "--seed", "2", cwd=tmp_path).returncode == 0  # (a link to nothing is refused)
    link.symlink_to(out)
    waiting, go = tmp_path / "waiting", tmp_path / "go"
    with held(HELD, waiting, go, "--out", out, *SHORT, "--seed", "3", "--overwrite", cwd=tmp_path) as slow:
        for other in (link, tmp_path / "real" / ".." / "real" / "ck.safetensors"):
            proc = train("--out", other, *SHORT, "--seed", "4", "--overwrite", cwd=tmp_path)  # before: it went
            one_line_error(proc, "is in use by another run", "train.py")
    assert slow.returncode == 0, slow.stderr
    assert checkpoint.load_checkpoint(out)["training"]["seed"] == 3 and link.is_symlink()


@POSIX
def test_resuming_through_a_link_writes_its_target_and_keeps_the_link(tmp_path):
    (tmp_path / "real").mkdir()
    out, link = tmp_path / "real" / "ck.safetensors", tmp_path / "link.safetensors"
    assert train("--out", out, *SHORT, "--steps", "8", "--stop-at", "4", cwd=tmp_path).returncode == 0
    link.symlink_to(os.path.relpath(out, tmp_path))
    proc = train("--out", "link.safetensors", *SHORT, "--steps", "8", "--resume", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert f"--out link.safetensors leads to {out.resolve()}: this run writes there" in proc.stdout
    assert link.is_symlink() and os.readlink(link) == os.path.relpath(out, tmp_path)  # before: replaced by a file
    assert checkpoint.load_checkpoint(out)["step"] == 8
    assert files_under(tmp_path) == ["link.safetensors", "real", "real/ck.best.safetensors", "real/ck.safetensors"]


@POSIX
def test_a_link_that_leads_nowhere_is_refused_and_nothing_is_made_where_it_points(tmp_path):
    elsewhere = tmp_path / "elsewhere"
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "ck.safetensors").symlink_to(elsewhere / "made.safetensors")
    (tmp_path / "runs").symlink_to(elsewhere / "runs", target_is_directory=True)
    for target in ("out/ck.safetensors", "runs/ck.safetensors"):
        proc = train("--out", target, *SHORT, cwd=tmp_path)  # before the fix: a checkpoint (and folders) made there
        one_line_error(proc, "which does not exist (or is a loop)", "no link")
    os.symlink("loop", tmp_path / "loop")
    one_line_error(train("--out", "loop", *SHORT, cwd=tmp_path), "loop is a link to loop")
    assert not elsewhere.exists()
    assert files_under(tmp_path) == ["loop", "out", "out/ck.safetensors", "runs"]


# ----------------------------------------------------------------------------------------------------------------
# 14. Names the file system cannot take, and torchrun numbers that make no sense


def test_a_name_too_long_for_the_file_system_is_refused_before_anything_is_made(tmp_path):
    for name, size in (("x" * 300, 300), ("x" * 240, 240)):  # 240: the lock fits, a temporary file's name does not
        started = time.monotonic()
        proc = train("--out", name, *SHORT, cwd=tmp_path)  # before: a traceback, or an error after training
        one_line_error(proc, f"a name of {size} bytes", "more than the 255 bytes", "choose a shorter one")
        assert "step" not in proc.stdout and time.monotonic() - started < 30
    assert files_under(tmp_path) == []


def remove_deep(folder):
    """Remove a chain of folders d/d/d/... too deep for a recursive remover (os.walk, shutil.rmtree), deepest first."""
    chain = [Path(folder)]
    while (chain[-1] / "d").is_dir():
        chain.append(chain[-1] / "d")
    for here in reversed(chain):
        for path in here.iterdir():
            if not path.is_dir():
                path.unlink()
        here.rmdir()


def test_a_deep_path_is_made_without_recursion_and_one_past_the_systems_limit_is_refused(tmp_path):
    deep = "d/" * 1500 + "ck.safetensors"  # 3,000 bytes: within Linux's 4,096, past Python's recursion limit
    try:
        proc = train("--out", deep, *SHORT, cwd=tmp_path)  # before the fix: a RecursionError
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert checkpoint.load_checkpoint(tmp_path / deep)["step"] == 4
    finally:
        remove_deep(tmp_path / "d")
    proc = train("--out", "d/" * 2100 + "ck.safetensors", *SHORT, cwd=tmp_path)
    one_line_error(proc, "more than the", "bytes this system allows in a path")
    assert files_under(tmp_path) == []


@pytest.mark.parametrize("env, phrase", [({"RANK": "-1"}, "rank -1: expected 0, the only process"),
                                         ({"RANK": "5", "WORLD_SIZE": "2"}, "rank 5: expected 0 to 1"),
                                         ({"WORLD_SIZE": "0"}, "world 0: expected at least 1 process"),
                                         ({"RANK": "x"}, "the environment variable RANK is 'x'")])
def test_torchrun_numbers_that_make_no_sense_are_one_line(tmp_path, env, phrase):
    started = time.monotonic()
    proc = train("--out", "ck.safetensors", *SHORT, cwd=tmp_path, env=env)  # before: silence, or a traceback
    one_line_error(proc, phrase)
    assert time.monotonic() - started < 30 and files_under(tmp_path) == []


def test_settings_refuse_a_world_of_no_processes_and_a_rank_outside_it():
    for values, phrase in (({"world": 0}, "world 0"), ({"world": -3}, "world -3"), ({"rank": -1}, "rank -1"),
                           ({"rank": 2, "world": 2}, "rank 2: expected 0 to 1")):
        with pytest.raises(ValueError, match=phrase):  # before the fix: accepted, then ZeroDivisionError
            settings.checked(settings.Settings(**values))


# ----------------------------------------------------------------------------------------------------------------
# 4. A signal the moment the lock file is made

# a run whose SIGTERM arrives the instant os.open has made its lock file (the moment a test or a user who waits for
# the lock to appear sends it), turned into a KeyboardInterrupt as the experiments' interruptible() does
SIGNAL_AT_OPEN = """
import os, signal, sys
sys.path.insert(0, sys.argv[2])
import atomic

def stop(signum, frame):
    raise KeyboardInterrupt(signum)

signal.signal(signal.SIGTERM, stop)
real_open = os.open

def open_then_signalled(path, flags, mode=0o777):
    fd = real_open(path, flags, mode)
    if str(path).endswith(".lock"):
        os.kill(os.getpid(), signal.SIGTERM)  # delivered as this call returns, before its caller stores fd
    return fd

atomic.os.open = open_then_signalled
try:
    with atomic.hold(sys.argv[1], "a run stopped as it starts"):
        print("held", flush=True)
except KeyboardInterrupt:
    print("interrupted", flush=True)
"""


@POSIX
def test_a_signal_as_the_lock_file_is_made_leaves_no_lock_behind(tmp_path):
    """SIGTERM between the lock file's creation and the moment hold keeps its descriptor: the interrupt is held
    back until hold can clean up, so nothing stays (before: the lock file, and the folder made for it)."""
    out = tmp_path / "runs" / "ck.safetensors"
    proc = subprocess.run([sys.executable, "-c", SIGNAL_AT_OPEN, str(out), str(ROOT)], capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0 and proc.stdout.split() in (["interrupted"], ["held", "interrupted"]), proc.stderr
    assert files_under(tmp_path) == [], files_under(tmp_path)


# ----------------------------------------------------------------------------------------------------------------
# 5. SIGTERM, SIGHUP and Ctrl-C stop train.py and bpe.py in one line, leaving nothing behind


def signalled(cmd, cwd, sign, ready, *, at=0.0):
    """Start cmd in cwd, send it sign once ready() holds (and at seconds more), and return the finished process."""
    proc = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while not ready() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.005)
        assert proc.poll() is None, proc.communicate()  # (still running: the signal meets a live run)
        time.sleep(at)
        proc.send_signal(sign)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return SimpleNamespace(returncode=proc.returncode, stdout=out, stderr=err)


@POSIX
@pytest.mark.parametrize("sign, at", [(signal.SIGTERM, 0.0), (signal.SIGTERM, 0.013), (signal.SIGHUP, 0.029),
                                      (signal.SIGINT, 0.041)])
def test_a_signalled_training_run_says_so_in_one_line_and_leaves_only_whole_checkpoints(tmp_path, sign, at):
    """Before: SIGTERM ended train.py with no message, its lock files left behind (and now and then a .tmp)."""
    out = tmp_path / "ck.safetensors"
    cmd = [sys.executable, str(ROOT / "train.py"), "--out", str(out), "--steps", "3000", "--batch", "2",
           "--seq-len", "16", "--val-stories", "20", "--eval-every", "10", "--ckpt-every", "1", "--quiet"]
    proc = signalled(cmd, tmp_path, sign, out.exists, at=at)  # (a save every step: the signal may meet one)
    name = signal.Signals(sign).name
    assert proc.returncode == 128 + sign, proc.stderr
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith(f"interrupted ({name}) at step "), proc.stderr
    assert set(files_under(tmp_path)) <= {"ck.safetensors", "ck.best.safetensors"}, files_under(tmp_path)
    assert checkpoint.load_checkpoint(out)["step"] >= 1  # (whole)


@POSIX
def test_a_training_run_signalled_before_it_trains_writes_nothing_and_says_so(tmp_path):
    out = tmp_path / "runs" / "ck.safetensors"
    with held(HELD, tmp_path / "waiting", tmp_path / "go", "--out", out, *SHORT, cwd=tmp_path) as done:
        pid = int(next(p for p in (tmp_path / "runs" / "ck.safetensors.lock").read_text().split() if p.isdigit()))
        os.kill(pid, signal.SIGTERM)
    assert done.returncode == 143 and done.stderr == ("interrupted (SIGTERM) before training began: this run wrote"
                                                      " nothing\n"), done.stderr
    assert files_under(tmp_path) == ["go", "waiting"]


@POSIX
@pytest.mark.parametrize("sign", [signal.SIGINT, signal.SIGTERM])
def test_a_signalled_tokenizer_training_says_so_in_one_line_and_leaves_nothing(tmp_path, sign):
    """Before: Ctrl-C was a KeyboardInterrupt traceback, and SIGTERM left the lock beside --out."""
    rng = random.Random(0)  # 20,000 words of random letters: pairs to merge for many seconds, never too few
    words = ["".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randint(3, 9))) for _ in range(20000)]
    text = tmp_path / "notes.txt"
    text.write_text("".join(" ".join(words[k:k + 12]) + "\n" for k in range(0, len(words), 12)))
    out = tmp_path / "tok" / "notes.json"
    cmd = [sys.executable, str(ROOT / "bpe.py"), "--data", str(text), "--out", str(out), "--vocab-size", "3000"]
    proc = signalled(cmd, tmp_path, sign, lambda: (tmp_path / "tok" / "notes.json.lock").exists(), at=0.3)
    name = signal.Signals(sign).name
    assert proc.returncode == 128 + sign and proc.stderr == f"interrupted ({name}): nothing written, {out} is as it" \
                                                             f" was\n", proc.stderr
    assert files_under(tmp_path) == ["notes.txt"]
