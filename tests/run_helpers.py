"""Helpers shared by the tests that run the lab's commands: run one in a subprocess (run, under a memory_limit;
run_without, where some packages cannot be imported) or in this process (ran), hold one at a call of the library
(held, holding: HELD holds train.py in its data preparation), kill a process group with a real SIGKILL,
serve a folder as explore.py does (served), assert that a run failed as a bad input should and see what it left
(files_under, kinds_under), a text of one's own, and the cases of a private one (PRIVACY)."""

import os
import random
import re
import runpy
import signal
import stat
import subprocess
import sys
import threading
import time
from contextlib import contextmanager, suppress
from pathlib import Path
from types import SimpleNamespace

from oneblock.server import make_server

ROOT = Path(__file__).resolve().parent.parent  # the lab's folder


def run(script, *args, cwd, limit=None, timeout=300):
    """One of the lab's scripts in a subprocess in cwd (a file of its folder, or "-m module" with its folder on the
    module path), optionally under a resource limit (a function run in the child); the CompletedProcess (text)."""
    command = ["-m", script[3:]] if script.startswith("-m ") else [str(ROOT / script)]
    return subprocess.run([sys.executable, *command, *map(str, args)], capture_output=True, text=True, cwd=cwd,
                          timeout=timeout, preexec_fn=limit, env={**os.environ, "PYTHONPATH": str(ROOT)})


WITHOUT = """  # run_without's interpreter: blocked packages cannot be imported
import runpy, sys
class Missing:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {blocked!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
sys.meta_path.insert(0, Missing())
sys.path.insert(0, {root!r})
sys.argv = {argv!r}
if {module!r}:  # python3 -m module
    runpy.run_module({module!r}, run_name="__main__", alter_sys=True)
else:
    runpy.run_path(sys.argv[0], run_name="__main__")
"""


def run_without(blocked, script, *args, cwd=ROOT):
    """Run script (a file of the lab's folder, or "-m module") with args in a fresh interpreter in which the
    packages of blocked cannot be imported: a finder first on sys.meta_path answers their import as Python does for
    a package that is not installed (ModuleNotFoundError naming it)."""
    module = script[3:] if script.startswith("-m ") else ""
    argv = [module if module else str(ROOT / script), *map(str, args)]
    code = WITHOUT.format(blocked=set(blocked), root=str(ROOT), argv=argv, module=module)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=cwd, timeout=300)


def memory_limit(n):
    """A preexec_fn: at most n bytes of address space (RLIMIT_AS), so that a run that would take more fails (a
    regression cannot swap, nor take the machine down). POSIX."""
    def limit():
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (n, n))
    return limit


def files_under(folder):
    """Every path under folder, relative, sorted: to see that a refused command wrote nothing."""
    return sorted(str(p.relative_to(folder)) for p in Path(folder).rglob("*"))


def kinds_under(folder):
    """Each path under folder (links not followed) with what it is: a file's bytes, a link's target, or its kind."""
    found = {}
    for path in sorted(Path(folder).rglob("*")):
        mode = os.lstat(path).st_mode
        found[str(path.relative_to(folder))] = (path.read_bytes() if stat.S_ISREG(mode) else os.readlink(path)
                                                if stat.S_ISLNK(mode) else stat.S_IFMT(mode))
    return found


@contextmanager
def held(script, waiting, go, *args, cwd):
    """Run script (a held command line, holding's: argv is waiting, go, the lab's folder, then args) in cwd; once it
    is held (it made the file waiting), the with-block runs; at its end the file go lets it go on, and the run is
    waited for. Yields a namespace whose returncode, stdout and stderr are the run's after the block; a run that
    never gets held fails the test, and one still running when the block fails is killed."""
    proc = subprocess.Popen([sys.executable, "-c", script, str(waiting), str(go), str(ROOT), *map(str, args)], cwd=cwd,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    done = SimpleNamespace(returncode=None, stdout=None, stderr=None)
    try:
        deadline = time.monotonic() + 120
        while not Path(waiting).exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)
        assert Path(waiting).exists(), proc.communicate()
        yield done
        Path(go).touch()
        done.stdout, done.stderr = proc.communicate(timeout=300)
        done.returncode = proc.returncode
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def kill_group(proc, timeout=60):
    """SIGKILL the process group of proc (started with start_new_session) and every process descended from proc,
    even one in a session of its own (torchrun starts each rank so), and return once all have exited: proc reaped,
    the others gone or zombies. A process still dying after proc is reaped (a worker, a torchrun rank) holds its
    files, and so its locks, until it has; a zombie holds nothing. POSIX."""
    family, tree = {proc.pid}, processes()
    while True:  # (found before the kill: a dead parent's children are handed to another)
        more = {pid for pid, (_, ppid, _) in tree.items() if ppid in family} - family
        if not more:
            break
        family |= more
    os.killpg(proc.pid, signal.SIGKILL)
    for pid in family - {proc.pid}:
        with suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    proc.wait()
    deadline = time.monotonic() + timeout
    while any((pid in family or group == proc.pid) and state != "Z" for pid, (state, _, group) in processes().items()):
        assert time.monotonic() < deadline, f"process group {proc.pid} still runs {timeout} s after its SIGKILL"
        time.sleep(0.01)


def processes():
    """{pid: (state, parent's pid, process group)} of every process /proc lists (none where there is no /proc)."""
    found = {}
    for stat_file in Path("/proc").glob("[0-9]*/stat"):
        try:  # (one may vanish as it is read)
            fields = stat_file.read_text().rsplit(")", 1)[1].split()  # after "pid (name)": state, ppid, pgrp, ...
        except OSError:
            continue
        found[int(stat_file.parent.name)] = (fields[0], int(fields[1]), int(fields[2]))
    return found


@contextmanager
def served(folder):
    """The URL of folder served by the explorer's own server (oneblock.server, as explore.py serves the page), in a
    thread of this process, until the block ends."""
    server = make_server(folder, 0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def ran(script, capsys, *args, umask=None):
    """One of the lab's scripts run in this process as its command line runs it (through runpy, as __main__, with
    sys.argv its script and args, under umask when given; both put back after), read as a subprocess's run is: a
    namespace of returncode (the SystemExit it ends with), stdout and stderr."""
    argv, before = sys.argv, None if umask is None else os.umask(umask)
    sys.argv = [script, *map(str, args)]
    try:
        runpy.run_path(str(ROOT / script), run_name="__main__")
        returncode = 0
    except SystemExit as e:
        returncode = e.code
    finally:
        sys.argv = argv
        if before is not None:
            os.umask(before)
    stdout, stderr = capsys.readouterr()
    return SimpleNamespace(returncode=returncode, stdout=stdout, stderr=stderr)


def one_line_error(proc, *phrases):
    """Assert that a run failed as every bad input should: exit 2, one line on stderr starting with "error:" (or
    argparse's usage and one line), naming each phrase, and no traceback."""
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr, proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert re.match(r"(error:|[\w.-]+\.py: error:)", last), proc.stderr  # ours, or argparse's "train.py: error:"
    if last.startswith("error:"):
        assert proc.stderr.count("\n") == 1, proc.stderr
    for phrase in phrases:
        assert phrase in last, (phrase, proc.stderr)


def own_text(lines=120, seed=0):
    """A few KB of text from a seeded generator, one sentence a line, with capitals, digits, punctuation and
    non-ASCII letters: the kind of file a learner brings.

    >>> own_text(2)
    'Mia finds 7 balls: “Ørjan, take it!”\\nMia gives 40 Straßenbahnen to Ørjan; now Ørjan has them (40).\\n'
    """
    rng = random.Random(seed)
    names = ["Zoë", "Åsa", "Jürgen", "Mia", "Léa", "Ørjan"]
    things = ["Kaffee", "crème brûlée", "balls", "Straßenbahnen", "books"]
    out = []
    for _ in range(lines):
        a, b = rng.sample(names, 2)
        n, thing = rng.randint(2, 99), rng.choice(things)
        if rng.random() < 0.5:
            out.append(f"{a} gives {n} {thing} to {b}; now {b} has them ({n}).")
        else:
            out.append(f"{a} finds {n} {thing}: “{b}, take it!”")
    return "".join(line + "\n" for line in out)


# (umask, mode of the text, mode of every file made from it): the umask takes bits off, and so does a private text
PRIVACY = [(0o077, 0o600, 0o600), (0o022, 0o600, 0o600), (0o022, 0o644, 0o644), (0o027, 0o644, 0o640)]


def privacy_id(value):
    """A value of a PRIVACY case as the test's ID shows it: its octal digits.

    >>> privacy_id(0o77), privacy_id(0o644)
    ('077', '644')
    """
    return f"{value:03o}"


# ----------------------------------------------------------------------------------------------------------------
# A command held at one call of the library, for held()

HOLDING = """
import importlib, pathlib, runpy, sys, time
sys.path.insert(0, sys.argv[3])
hooked = importlib.import_module({module!r})
waiting, go = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
real = getattr(hooked, {name!r})
def held(*args, **kwargs):
    if {when}:
        waiting.touch()
        while not go.exists():
            time.sleep(0.01)
    return real(*args, **kwargs)
setattr(hooked, {name!r}, held)
script = str(pathlib.Path(sys.argv[3]) / {script!r})
sys.argv = [script, *sys.argv[4:]]
runpy.run_path(script, run_name="__main__")  # the script as its command line runs it
"""


def holding(script, module, name, when="True"):
    """A held command line for held(): script (a file of the lab's folder) with module's function name hooked (the
    hook is the test's; the script has none): a call of it for which when holds (a condition on its args and
    kwargs) touches the file argv[1], and goes on once the file argv[2] exists."""
    return HOLDING.format(script=script, module=module, name=name, when=when)


HELD = holding("train.py", "oneblock.data", "prepare")  # train.py held in its data preparation


# ----------------------------------------------------------------------------------------------------------------
# Limits of a run in a subprocess, and train.py's shortest run

SHORT = ["--steps", "4", "--batch", "2", "--seq-len", "16", "--val-stories", "20", "--eval-every", "4", "--quiet"]
MOST_MEMORY = 4 * 2**30  # RLIMIT_AS of a run asked for too much, or reading without end: it fails, it cannot swap


def file_size_limit(n):
    """A preexec_fn: files of at most n bytes, and a write past that fails with EFBIG, as on a full disk, instead of
    killing the process with SIGXFSZ (an ignored signal stays ignored across exec). POSIX."""
    def limit():
        import resource

        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (n, n))
    return limit
