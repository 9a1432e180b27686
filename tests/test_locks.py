"""Owning an output path (atomic.own, atomic.hold), each case in this process; then, through the commands (train.py
in this process, through runpy, where no signal is sent), torchrun's numbers and signals, each in one line, leaving
nothing behind. (What is at train.py's and bpe.py's --out: tests/test_nothing_lost.py.)"""

import os
import random
import signal
import socket
import stat
import string
import subprocess
import sys
import time
from contextlib import ExitStack
from pathlib import Path
from types import SimpleNamespace

import pytest
from run_helpers import HELD, ROOT, SHORT, files_under, held, kinds_under, one_line_error, ran

import atomic
from oneblock import checkpoint

POSIX = pytest.mark.skipif(os.name != "posix", reason="links, FIFOs and flock are POSIX's")
if os.name == "posix":
    import fcntl


def own(path, judge=None, reads=(), stack=None):
    """atomic.own on path as a command's --out, for a text file; with no stack given, released at once."""
    with ExitStack() as own_stack:
        return atomic.own(stack if stack is not None else own_stack, str(path), "--out", "a text file", "t.txt",
                          judge, "a test", reads)


def refused(path, *phrases, reads=(), judge=None):
    """atomic.own refuses path in one line that holds each of phrases."""
    with pytest.raises(ValueError) as e:
        own(path, judge, reads)
    line = str(e.value)
    assert "\n" not in line and all(phrase in line for phrase in phrases), line


# ----------------------------------------------------------------------------------------------------------------
# 1. The path: judged before anything is made


@POSIX
def test_a_path_that_cannot_be_a_file_of_the_run_is_refused_and_left_as_it_is(tmp_path, monkeypatch):
    (tmp_path / "notes.txt").write_text("mine\n", encoding="utf-8")
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "to-fifo").symlink_to("fifo")
    (tmp_path / "folder").mkdir()
    (tmp_path / "nowhere").symlink_to("missing.txt")
    (tmp_path / "loop").symlink_to("loop")
    (tmp_path / "runs").symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(tmp_path / "socket"))
    cases = [("folder", "is a folder; expected a text file such as"), ("folder/", "ends with a slash"),
             ("notes.txt/t.txt", "notes.txt is a file, not a folder"),
             ("fifo", "--out fifo is a FIFO (a named pipe), not a regular file"),
             ("to-fifo", "--out to-fifo is a link to a FIFO (a named pipe), not a regular file"),
             ("socket", "--out socket is a socket, not a regular file"),
             ("nowhere", "nowhere is a link to missing.txt, which does not exist"),
             ("loop", "loop is a link to loop"), ("runs/t.txt", "runs is a link to", "which does not exist"),
             ("x" * 300, "a name of 300 bytes", "more than the 255 bytes", "choose a shorter one"),
             ("x" * 240, "a name of 240 bytes"),  # (the lock fits, a temporary file's name does not)
             ("d/" * 2100 + "t.txt", "more than the", "bytes this system allows in a path")]
    try:
        os.mknod(tmp_path / "device", 0o600 | stat.S_IFCHR, os.makedev(1, 3))  # (root only; never /dev/null)
        cases.append(("device", "--out device is a character device, not a regular file"))
    except (OSError, AttributeError):
        pass
    before = kinds_under(tmp_path)
    monkeypatch.chdir(tmp_path)
    try:
        for path, *phrases in cases:  # before: a FIFO, a device, a link replaced; folders made through a link
            refused(path, *phrases, judge=lambda target: pytest.fail(f"{target} was judged"))
    finally:
        server.close()
    assert kinds_under(tmp_path) == before and not (tmp_path / "elsewhere").exists()


@POSIX
def test_an_input_of_the_run_is_never_its_output_by_any_name(tmp_path):
    text = tmp_path / "notes.txt"
    text.write_text("mine\n", encoding="utf-8")
    (tmp_path / "link.txt").symlink_to("notes.txt")
    os.link(text, tmp_path / "hard.txt")
    (tmp_path / "t.txt.lock").write_text("a text named like t.txt's lock\n", encoding="utf-8")
    before = kinds_under(tmp_path)
    for given, out, words in [(text, text, f"--out {text}"), (text, tmp_path / "link.txt", "--out"),
                              (tmp_path / "link.txt", text, "--out"), (text, tmp_path / "hard.txt", "--out"),
                              (tmp_path / "t.txt.lock", tmp_path / "t.txt", "the lock of --out")]:
        refused(out, f"--data {given} is where this run writes {words}", "choose another --out",
                reads=[("--data", given)])  # before: the text was replaced by what the run wrote
    assert kinds_under(tmp_path) == before


def test_output_problem_reads_what_is_there_with_the_callers_judge(tmp_path):
    ours = lambda raw: raw.startswith(b"{")  # noqa: E731
    assert atomic.output_problem(tmp_path / "new" / "deeper" / "t.json", "--out", "a record", ours, "t.json") is None
    (tmp_path / "t.json").write_text("{}", encoding="utf-8")
    assert atomic.output_problem(tmp_path / "t.json", "--out", "a record", ours, "t.json") is None
    # (a file the judge says is not of its kind: output_problem's doctest)
    (tmp_path / "big.json").write_bytes(b"{" + b" " * 100)
    too_big = atomic.output_problem(tmp_path / "big.json", "--out", "a record", ours, "t.json", most=10)
    assert "more than the 10 bytes" in too_big


def test_a_folder_that_cannot_be_made_or_written_is_one_line(tmp_path):
    cases = [(f"/{system}/one-block-test/t.txt", f"cannot create the folder /{system}/one-block-test")
             for system in ("sys", "proc") if Path(f"/{system}/self" if system == "proc" else "/sys/kernel").is_dir()]
    if os.name == "posix" and os.geteuid() != 0:  # (root writes in any folder, whatever its mode)
        (tmp_path / "ro").mkdir(mode=0o555)
        cases.append((tmp_path / "ro" / "t.txt", "cannot write in the folder"))
    if not cases:
        pytest.skip("no folder here that this user cannot write in")
    for path, phrase in cases:
        refused(path, "--out:", phrase)


def test_a_deep_path_is_made_without_recursion(tmp_path):
    deep = tmp_path / ("d/" * 1500 + "t.txt")  # 3,000 bytes: within Linux's 4,096, past Python's recursion limit
    try:
        with ExitStack() as stack:  # before the fix: a RecursionError
            target, _ = own(deep, stack=stack)
            atomic.write_atomic(target, "deep\n")
        assert deep.read_text(encoding="utf-8") == "deep\n"
    finally:  # the chain d/d/d/..., too deep for a recursive remover (shutil.rmtree): removed deepest first
        chain = [tmp_path / "d"]
        while (chain[-1] / "d").is_dir():
            chain.append(chain[-1] / "d")
        for here in reversed(chain):
            for path in here.iterdir():
                if not path.is_dir():
                    path.unlink()
            here.rmdir()


# ----------------------------------------------------------------------------------------------------------------
# 2. The lock follows no link and opens nothing that is there


@POSIX
@pytest.mark.parametrize("kind", ["link", "link to nothing", "file", "empty file beside a live holder", "folder",
                                  "fifo", "hard link"])
def test_a_lock_name_that_holds_something_else_is_refused_and_kept(tmp_path, kind):
    lock, victim = tmp_path / "t.txt.lock", tmp_path / "victim.txt"
    victim.write_text("precious\n", encoding="utf-8")
    if kind == "link":
        lock.symlink_to(victim)
    elif kind == "link to nothing":  # no file is made where it points
        lock.symlink_to(tmp_path / "made-by-the-run")
    elif kind == "file":
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
        holder = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_EXCL)
        fcntl.flock(holder, fcntl.LOCK_EX)
    before = kinds_under(tmp_path)
    try:  # before: the link's target or the file truncated to the note, the file deleted, a FIFO opened
        refused(tmp_path / "t.txt", "t.txt", {
            "link": "is a symbolic link, not a lock", "link to nothing": "is a symbolic link, not a lock",
            "file": "does not hold this lab's mark", "folder": "is a folder, not a lock",
            "fifo": "is a FIFO (a named pipe), not a lock", "hard link": "has other names",
            "empty file beside a live holder": "is in use by another run (its holder wrote no note yet)"}[kind])
    finally:
        if holder is not None:
            os.close(holder)
    assert kinds_under(tmp_path) == before and victim.read_text(encoding="utf-8") == "precious\n"


def test_a_killed_runs_lock_is_taken_over_and_what_is_there_judged_while_held(tmp_path):
    out, lock = tmp_path / "runs" / "t.txt", tmp_path / "runs" / "t.txt.lock"
    lock.parent.mkdir()
    lock.write_text(atomic.LOCK_MARK + "pid 999999999, killed\n", encoding="utf-8")  # its holder's lock died with it
    out.write_text("an earlier run's\n", encoding="utf-8")
    seen = []

    def judge(target):  # the caller's reader: run while the path is held, its answer returned
        seen.append(lock.read_text(encoding="utf-8"))
        return target.read_text(encoding="utf-8")

    with ExitStack() as stack:
        target, judged = own(out, judge, stack=stack)
        assert target == out and judged == "an earlier run's\n"
        assert seen == [atomic.LOCK_MARK + "a test"]
        refused(out, "is in use by another run (a test)")  # a second owner, while this one holds it
    assert files_under(tmp_path) == ["runs", "runs/t.txt"]  # the lock is gone with its owner

    def not_ours(target):
        raise ValueError(f"--out {target} is not ours")

    refused(tmp_path / "new" / "t.txt", "is not ours", judge=not_ours)
    assert files_under(tmp_path) == ["runs", "runs/t.txt"]  # nor the lock, nor the folder made for it


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


@POSIX
def test_a_run_removes_only_the_temporary_files_a_killed_writer_of_its_path_left(tmp_path, capsys):
    out = tmp_path / "ck.safetensors"
    killed = subprocess.run([sys.executable, "-c", KILLED_WRITER, out, ROOT], capture_output=True, timeout=60)
    assert killed.returncode == -signal.SIGKILL
    (left,) = [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
    yours = [tmp_path / name for name in ("ck.safetensors.backup.tmp", "ck.safetensors.old.tmp",
                                          "ck.safetensors.1.abcdefgh.tmp")]  # pid 1 runs: it may be a writer
    for path in yours:
        path.write_text(f"yours: {path.name}\n", encoding="utf-8")
    in_progress = tmp_path / f"ck.safetensors.{os.getpid()}.savingxy.tmp"  # another save, its writer alive
    saving = os.open(in_progress, os.O_RDWR | os.O_CREAT | os.O_EXCL)
    fcntl.flock(saving, fcntl.LOCK_EX)
    try:
        own(out)  # before the fix: every ck.safetensors.*.tmp deleted
    finally:
        os.close(saving)
    assert "removed 1 temporary file(s) that a killed run left" in capsys.readouterr().err
    assert not left.exists() and in_progress.exists()
    for path in yours:
        assert path.read_text(encoding="utf-8") == f"yours: {path.name}\n"


# ----------------------------------------------------------------------------------------------------------------
# 4. One lock per file, however it is named


@POSIX
def test_a_link_and_its_file_are_one_path(tmp_path):
    (tmp_path / "real").mkdir()
    out, link = tmp_path / "real" / "t.txt", tmp_path / "link.txt"
    out.write_text("an earlier run's\n", encoding="utf-8")  # (a link to nothing is refused)
    link.symlink_to(out)
    with ExitStack() as stack:
        own(out, stack=stack)
        for other in (link, tmp_path / "real" / ".." / "real" / "t.txt"):  # before: a second run went on
            refused(other, "is in use by another run (a test)")


@POSIX
def test_resuming_through_a_link_writes_its_target_and_keeps_the_link(tmp_path, capsys, monkeypatch):
    """train.py in this process: a resume reads and writes the checkpoint the link leads to."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "real").mkdir()
    out, link = tmp_path / "real" / "ck.safetensors", tmp_path / "link.safetensors"
    assert ran("train.py", capsys, "--out", out, *SHORT, "--steps", "8", "--stop-at", "4").returncode == 0
    link.symlink_to(os.path.relpath(out, tmp_path))
    proc = ran("train.py", capsys, "--out", "link.safetensors", *SHORT, "--steps", "8", "--resume")
    assert proc.returncode == 0, proc.stderr
    assert f"--out link.safetensors leads to {out.resolve()}: this run writes there" in proc.stdout
    assert link.is_symlink() and os.readlink(link) == os.path.relpath(out, tmp_path)  # before: replaced by a file
    assert checkpoint.load_checkpoint(out)["step"] == 8
    assert files_under(tmp_path) == ["link.safetensors", "real", "real/ck.best.safetensors", "real/ck.safetensors"]


# ----------------------------------------------------------------------------------------------------------------
# 5. Through train.py: torchrun numbers that make no sense are one line


@pytest.mark.parametrize("env, phrase", [({"RANK": "-1"}, "rank -1: expected 0, the only process"),
                                         ({"RANK": "2", "WORLD_SIZE": "2"}, "rank 2: expected 0 to 1"),
                                         ({"WORLD_SIZE": "0"}, "world 0: expected at least 1 process"),
                                         ({"RANK": "x"}, "the environment variable RANK is 'x'")])
def test_torchrun_numbers_that_make_no_sense_are_one_line(tmp_path, capsys, monkeypatch, env, phrase):
    monkeypatch.chdir(tmp_path)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    started = time.monotonic()
    proc = ran("train.py", capsys, "--out", "ck.safetensors", *SHORT)  # before: silence, a ZeroDivisionError
    one_line_error(proc, phrase)
    assert time.monotonic() - started < 30 and files_under(tmp_path) == []


# ----------------------------------------------------------------------------------------------------------------
# 6. A signal the moment the lock file is made

# a run whose SIGTERM arrives the instant os.open has made argv[3]'s file (a checkpoint's temporary file, or the
# lock: the moment a test or a user who waits for the lock to appear sends it). argv[4] "alone": a process of one
# thread, with a handler of its own that turns SIGTERM into a KeyboardInterrupt, so that only the system's hold keeps
# the signal back. "thread": a process with another thread (as NumPy's BLAS pool is), under interruptible(); the
# system hands SIGTERM to that thread, since the main one holds it back, and Python runs the handler in the main
# thread at its next step
SIGNAL_AS_MADE = """
import contextlib, os, signal, sys, threading, time
sys.path.insert(0, sys.argv[2])
import atomic

def stop(signum, frame):
    raise KeyboardInterrupt(signum)

if sys.argv[4] == "thread":
    threading.Thread(target=threading.Event().wait, daemon=True).start()  # a thread that holds no signal back
    stopping = atomic.interruptible()
else:
    signal.signal(signal.SIGTERM, stop)
    stopping = contextlib.nullcontext()
real_open = os.open

def open_then_signalled(path, flags, mode=0o777):
    fd = real_open(path, flags, mode)
    if str(path).endswith(sys.argv[3]):
        os.kill(os.getpid(), signal.SIGTERM)  # delivered as this call returns, before its caller stores fd
        time.sleep(0.2)  # (another thread takes it meanwhile; Python's handler runs at the main thread's next step)
    return fd

atomic.os.open = open_then_signalled
try:
    with stopping:
        if sys.argv[3] == ".lock":
            with atomic.hold(sys.argv[1], "a run stopped as it starts"):
                print("held", flush=True)
        else:
            atomic.write_atomic(sys.argv[1], b"a checkpoint")
            print("written", flush=True)
except KeyboardInterrupt as e:
    print("interrupted", *atomic.interruption(e), flush=True)
"""


@POSIX
@pytest.mark.parametrize("made, threads", [(".lock", "alone"), (".tmp", "thread"), (".lock", "thread")])
def test_a_signal_as_the_lock_or_a_temporary_file_is_made_leaves_nothing_behind(tmp_path, made, threads):
    """SIGTERM between a file's creation and the moment its name is kept: the interrupt waits until the clean-up
    can remove it. Alone, the system's hold does it (before: the lock file, and the folder made for it, stayed);
    with another thread, interruptible's handler does (before: the mask held the signal back from the main thread
    alone, the handler ran all the same, and ck.safetensors.PID.RANDOM.tmp, or the lock, stayed)."""
    out = tmp_path / ("runs/ck.safetensors" if made == ".lock" else "ck.safetensors")  # (a lock makes its folder)
    proc = subprocess.run([sys.executable, "-c", SIGNAL_AS_MADE, str(out), str(ROOT), made, threads],
                          capture_output=True, text=True, timeout=60)
    said = ["interrupted SIGTERM 143\n"] + (["held\ninterrupted SIGTERM 143\n"] if threads == "alone" else [])
    assert proc.returncode == 0 and proc.stdout in said, proc.stdout + proc.stderr
    assert files_under(tmp_path) == [], files_under(tmp_path)


# ----------------------------------------------------------------------------------------------------------------
# 7. SIGTERM, SIGHUP and Ctrl-C stop train.py and bpe.py in one line, leaving nothing behind


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
