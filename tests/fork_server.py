"""A fork server, for a test that runs one tool hundreds of times: a process imports the library the tools share
(and NumPy) once, then forks a child for each request, which runs the tool as its command line does (run_child), and
reports how that child ended (wait_for). Every case is a real process of its own (its own memory, exit status and
open files) that does not pay the 0.3 s a fresh interpreter takes to import NumPy.

    OPENBLAS_NUM_THREADS=1 python3 tests/fork_server.py sample.py 4294967296   # the tool, the children's RLIMIT_AS
    OPENBLAS_NUM_THREADS=1 python3 tests/fork_server.py "-m dev.compare" 4294967296

A request is a line of JSON on stdin, {"argv": [...], "cwd": folder, "stdout": path, "stderr": path, "limit_s":
seconds}; each reply a line on stdout. BLAS thread pools do not survive a fork: start the server with one BLAS
thread (OPENBLAS_NUM_THREADS=1 in its environment).
"""

import gc
import importlib
import json
import os
import runpy
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PRELOAD = ("numpy", "bpe", "oneblock.checkpoint", "oneblock.numpy_model", "oneblock.numpy_fast", "oneblock.training",
           "oneblock.export", "oneblock.sampling", "oneblock.server",
           "threadpoolctl")  # what the tools import (explore.py's oneblock.server: http.server, email, ssl, ...)


def exit_status(code):
    """The exit status of `raise SystemExit(code)`, as the interpreter gives it (a message prints to stderr).

    >>> exit_status(None), exit_status(2), exit_status(True)
    (0, 2, 1)
    """
    if code is None:
        return 0
    if isinstance(code, int):
        return int(code) & 0xFF
    print(code, file=sys.stderr)
    return 1


def run_child(tool, request, as_limit):
    """In the forked child: run the tool with the request's argv in its folder, under RLIMIT_AS, stdin empty and
    stdout and stderr into the request's files; never returns."""
    import resource

    status = 1
    try:
        os.chdir(request["cwd"])
        resource.setrlimit(resource.RLIMIT_AS, (as_limit, as_limit))
        for fd, path, flags in ((0, os.devnull, os.O_RDONLY),
                                (1, request["stdout"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC),
                                (2, request["stderr"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC)):
            opened = os.open(path, flags, 0o644)
            os.dup2(opened, fd)
            os.close(opened)
        try:
            if tool.startswith("-m "):  # python3 -m MODULE ARGV
                sys.argv = [tool[3:], *request["argv"]]
                runpy.run_module(tool[3:], run_name="__main__", alter_sys=True)
            else:  # python3 SCRIPT ARGV
                sys.argv = [str(ROOT / tool), *request["argv"]]
                runpy.run_path(sys.argv[0], run_name="__main__")
            status = 0
        except SystemExit as e:
            status = exit_status(e.code)
        except BaseException:
            traceback.print_exc()
            status = 1
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(status)


def wait_for(pid, limit_s):
    """How the child pid ended, as a reply (with the CPU seconds it used); killed (SIGKILL) once it has run limit_s
    seconds."""
    deadline, pause = time.monotonic() + limit_s, 0.0005
    while True:
        done, status, usage = os.wait4(pid, os.WNOHANG)
        if done:
            return {"status": os.WEXITSTATUS(status) if os.WIFEXITED(status) else None,
                    "signal": os.WTERMSIG(status) if os.WIFSIGNALED(status) else None, "timed_out": False,
                    "cpu_s": usage.ru_utime + usage.ru_stime}
        if time.monotonic() > deadline:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            return {"status": None, "signal": 9, "timed_out": True}
        time.sleep(pause)
        pause = min(2 * pause, 0.01)


def serve(tool, as_limit):
    """Import what the tools read, then answer requests for tool (a script of the lab's folder, or "-m module")
    until stdin ends."""
    sys.path.insert(0, str(ROOT))
    for name in PRELOAD:
        importlib.import_module(name)
    gc.freeze()  # what was imported stays out of the children's collections: they touch (copy) fewer shared pages
    replies = os.fdopen(os.dup(1), "w")
    quiet = os.open(os.devnull, os.O_WRONLY)
    os.dup2(quiet, 1)  # what the tool's modules print while the server runs goes nowhere, not into the replies
    for line in sys.stdin:
        request = json.loads(line)
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            run_child(tool, request, as_limit)
        replies.write(json.dumps(wait_for(pid, request["limit_s"])) + "\n")
        replies.flush()


if __name__ == "__main__":
    serve(sys.argv[1], int(sys.argv[2]))
