"""experiments/grid.py: the same results, bit for bit and in the tasks' order, in this process, on a process pool of
two workers and on a local Dask cluster of two, however the grid is stopped; and every bad input, result or task
named before any work or stopping the grid in one line.

The tasks are tests/grid_tasks.py's (the workers import them). Without dask and distributed the Dask test skips with
its reason, except under CI=true, where that is a failure."""

import functools
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from contextlib import contextmanager, nullcontext

import pytest

import grid_tasks
from conftest import IN_CI
from experiments import grid
from run_helpers import ROOT, kill_group


def need_dask():
    """Skip (fail under CI=true) where dask or distributed is not installed."""
    try:
        import dask  # noqa: F401
        import distributed  # noqa: F401
    except ImportError:
        reason = "dask and distributed are not installed (python3 -m pip install -r tests/requirements.txt)"
        if IN_CI:
            pytest.fail(f"CI=true and the Dask test cannot run: {reason}")
        pytest.skip(reason)


def toy_grid(pool, folder, marks, count=6, pause=0.0, first_pause=None, report=None):
    """Run toy_tasks(count) and the tasks chain makes follow from them through pool; return the results."""
    marks.mkdir(exist_ok=True)
    return grid.run_tasks(pool, grid_tasks.toy, grid_tasks.toy_tasks(count, marks, pause, first_pause), folder,
                          follow=functools.partial(grid_tasks.chain, marks, pause), report=report)


REAL = [(f"run-{seed}-{lr:g}", [seed, lr, 20]) for seed in (3, 4) for lr in (0.01, 0.03)]  # tiny_run's tasks


def every_result(kind, folder):
    """(toy results, real runs' results, the keys in the order they finished) of both grids on the executor kind."""
    lines = []
    with grid.executor(kind, workers=None if kind == "serial" else 2) as pool:
        if kind != "serial":  # both workers up before a-0 starts, so that it finishes after the others
            (folder / "up").mkdir()
            waiting = [pool.submit(grid_tasks.rendezvous, folder / "up", 2) for _ in range(2)]
            assert len({future.result() for future in waiting}) == 2  # two processes
        toys = toy_grid(pool, folder / "toy", folder / "marks", first_pause=0.6, report=lines.append)
        real = grid.run_tasks(pool, grid_tasks.tiny_run, REAL, folder / "real", report=lines.append)
    return toys, real, [line.split(":")[0] for line in lines]


@pytest.fixture(scope="module")
def serial(tmp_path_factory):
    """The results of the grids run in this process."""
    return every_result("serial", tmp_path_factory.mktemp("serial"))


@pytest.fixture
def pool():
    """The serial executor, for the tests of one grid run in this process."""
    with grid.executor("serial") as pool:
        yield pool


# ----------------------------------------------------------------------------------------------------------------
# The same results, in the same order, on every executor


def test_in_this_process_the_results_come_in_the_tasks_order_and_follow_adds_its_tasks_after_them(serial):
    toys, real, finished = serial
    assert list(toys) == [f"a-{k}" for k in range(6)] + [f"b-{k}" for k in range(6)] + ["c"]
    assert toys["b-2"]["seed"] == int(abs(toys["a-2"]["sum"])) % 1000 and toys["c"]["seed"] == toys["b-1"]["seed"] + 1
    assert list(real) == [key for key, _ in REAL] and finished[:6] == list(toys)[:6]
    assert len({json.dumps(run) for run in real.values()}) == 4  # four runs, four different results
    assert all(run["val"][-1][1] < run["val"][0][1] for run in real.values())  # each learned


@pytest.mark.parametrize("kind", ["process", "dask"])
def test_a_pool_of_two_workers_and_a_dask_cluster_of_two_give_the_serial_results_bit_for_bit(serial, kind, tmp_path):
    if kind == "dask":
        need_dask()
    toys, real, finished = every_result(kind, tmp_path)
    assert json.dumps(toys) == json.dumps(serial[0]) and list(toys) == list(serial[0])
    assert json.dumps(real) == json.dumps(serial[1]) and list(real) == list(serial[1])
    assert finished[0] != "a-0" and finished.index("a-0") > finished.index("a-1")  # a-0 finished after others
    files = {p.name: json.loads(p.read_text()) for p in (tmp_path / "real").glob("*.json")}
    assert {name[:-5]: f["result"] for name, f in files.items()} == serial[1]  # what the files hold


def test_each_process_pool_worker_computes_with_one_blas_thread(tmp_path):
    with grid.executor("process", workers=2) as pool:
        direct = [pool.submit(grid_tasks.blas_threads, 0.3) for _ in range(4)]  # outside run_tasks's own limit
        through = grid.run_tasks(pool, grid_tasks.blas_threads, [(f"t-{k}", [0.3]) for k in range(4)], tmp_path,
                                 report=None)
        direct = [future.result() for future in direct]
    assert [threads for _, threads in direct] == [[1]] * 4, direct
    assert [threads for _, threads in through.values()] == [[1]] * 4, through
    assert os.getpid() not in {pid for pid, _ in direct} | {pid for pid, _ in through.values()}


# ----------------------------------------------------------------------------------------------------------------
# The local Dask cluster is the grid's alone

STRANGER = """
import asyncio, json, os, socket, sys
import dask, distributed
from distributed.core import rpc
dask.config.set({"distributed.comm.timeouts.connect": "3s"})
own = distributed.Security.temporary()  # a certificate of the stranger's own
if os.getuid() == 0:  # root: become another user (nobody), everything needed already imported
    os.setgroups([])
    os.setgid(65534)
    os.setuid(65534)
ports, mark = json.loads(sys.stdin.readline())

async def identity(address, security):
    async with rpc(address, connection_args=security.get_connection_args("client")) as node:
        await node.identity()

async def attack(address, security):  # a client that makes the workers write a file as the grid's user
    async with distributed.Client(address, security=security, asynchronous=True, timeout=3) as client:
        await client.run(lambda: open(mark, "w").close())

async def tried(how, address, security):
    try:
        await asyncio.wait_for(how(address, security), 8)
        return "admitted"
    except Exception as e:
        return "refused: " + type(e).__name__

def http(port):  # what a page of a stranger's would get: a GET with a foreign Host
    with socket.create_connection(("127.0.0.1", port), timeout=3) as s:
        s.sendall(b"GET /json/identity.json HTTP/1.1\\r\\nHost: evil.example\\r\\n\\r\\n")
        try:
            return s.recv(5).decode("latin-1")
        except OSError as e:
            return type(e).__name__

async def main():
    ways = [(scheme, own if scheme == "tls" else distributed.Security()) for scheme in ("tcp", "tls")]
    return await asyncio.gather(*[tried(identity, f"{scheme}://127.0.0.1:{port}", security)
                                  for port in ports for scheme, security in ways],
                                *[tried(attack, f"{scheme}://127.0.0.1:{ports[0]}", security)
                                  for scheme, security in ways])

print(json.dumps({"uid": os.getuid(), "rpc": asyncio.run(main()), "http": [http(port) for port in ports]}))
"""


def listening(processes):
    """The TCP ports the processes listen on."""
    return {c.laddr.port for p in processes for c in p.net_connections(kind="tcp") if c.status == "LISTEN"}


def test_a_local_dask_cluster_admits_no_other_client_and_serves_no_http(tmp_path):
    """A client of another user (nobody, where the test runs as root), with no certificate or one of its own, is
    refused by the scheduler, the nannies and the workers, and cannot make a worker write a file; nothing of the
    cluster answers HTTP, to any Host: its only ports are its five TLS comms (scheduler, two nannies, two workers)."""
    need_dask()
    import psutil

    mark = tmp_path / "written-by-a-stranger"
    tmp_path.chmod(0o777)  # (so that only the cluster's refusal keeps the stranger from writing there)
    stranger = subprocess.Popen([sys.executable, "-c", STRANGER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
    try:
        me = psutil.Process()
        before = listening([me])
        with grid.executor("dask", workers=2) as pool:
            assert pool.submit(os.getpid).result() != os.getpid()  # (the cluster works for its own client)
            ports = sorted(listening([me, *me.children(recursive=True)]) - before)
            scheduler = pool._client.scheduler.address  # (the stranger tries it first as a client)
            ports.sort(key=lambda port: not scheduler.endswith(f":{port}"))
            out, err = stranger.communicate(json.dumps([ports, str(mark)]) + "\n", timeout=60)
    finally:
        stranger.kill()
    assert stranger.returncode == 0, err
    seen = json.loads(out)
    assert seen["uid"] == (65534 if os.getuid() == 0 else os.getuid())
    assert len(ports) == 5 and scheduler.startswith("tls://127.0.0.1:"), (ports, scheduler)
    assert all(verdict.startswith("refused") for verdict in seen["rpc"]), seen
    assert not mark.exists()
    assert not any(reply.startswith("HTTP") for reply in seen["http"]), seen


# ----------------------------------------------------------------------------------------------------------------
# Resuming after a kill

# a grid of count toy tasks of pause seconds each on the executor kind, in a process of its own, to be killed:
# argv is marks, the results folder, kind, count, pause
KILLED = f"""
import functools, sys
sys.path[:0] = [{str(ROOT)!r}, {str(ROOT / "tests")!r}]
from experiments import grid
import grid_tasks
marks, folder, kind, count, pause = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), float(sys.argv[5])
with grid.executor(kind, workers=2) as pool:
    grid.run_tasks(pool, grid_tasks.toy, grid_tasks.toy_tasks(count, marks, pause), folder,
                   follow=functools.partial(grid_tasks.chain, marks, pause), report=None)
"""


@pytest.mark.skipif(not hasattr(os, "killpg"), reason="kills a process group (POSIX)")
def test_a_grid_killed_with_sigkill_resumes_computing_only_the_missing_tasks(tmp_path):
    folder, marks = tmp_path / "results", tmp_path / "marks"
    marks.mkdir()
    with subprocess.Popen([sys.executable, "-c", KILLED, marks, folder, "process", "10", "0.15"],
                          start_new_session=True, stderr=subprocess.PIPE) as proc:
        try:  # killed once 4 results are written: the grid and its workers at once, no handler, no clean-up
            deadline = time.monotonic() + 60
            while len(list(folder.glob("*.json"))) < 4 and time.monotonic() < deadline and proc.poll() is None:
                time.sleep(0.005)
        finally:
            kill_group(proc)
        assert proc.returncode == -signal.SIGKILL, proc.stderr.read().decode()
    kept = {p.name[:-5]: grid.read_result(p)["result"] for p in folder.glob("*.json")}  # each file whole
    every = {f"a-{k}" for k in range(10)} | {f"b-{k}" for k in range(10)} | {"c"}
    assert 4 <= len(kept) < len(every)
    before = Counter(grid_tasks.calls(marks))
    (folder / "a-9.json.999999999.abcd1234.tmp").write_text('{"half": ')  # a killed writer's, of no process now
    lines = []
    with grid.executor("process", workers=2) as pool:
        resumed = toy_grid(pool, folder, marks, count=10, pause=0.15, report=lines.append)
        unbroken = toy_grid(pool, tmp_path / "unbroken", tmp_path / "marks2", count=10, pause=0.15)
    ran = Counter(grid_tasks.calls(marks)) - before
    assert sorted(ran.elements()) == sorted(every - set(kept))  # each missing task once, no other
    assert lines[0] == f"{len(kept)} results found in {folder}"
    assert json.dumps(resumed) == json.dumps(unbroken) and list(resumed) == list(unbroken)
    assert all(resumed[key] == result for key, result in kept.items())
    assert sorted(p.name for p in folder.iterdir()) == sorted(f"{key}.json" for key in every)  # no .tmp, no lock


@pytest.mark.skipif(not hasattr(os, "getppid") or os.name != "posix", reason="a parent killed with SIGKILL (POSIX)")
@pytest.mark.parametrize("kind", ["process", "dask"])
def test_the_workers_of_a_grid_killed_with_sigkill_end_with_it(tmp_path, kind):
    """Before: the pool's workers and the resource tracker ran on (one set 19 minutes later), holding semaphores.
    A local Dask cluster's worker processes (its nannies live in the grid's process) end the same way."""
    import psutil

    if kind == "dask":
        need_dask()
    marks = tmp_path / "marks"
    marks.mkdir()
    proc = subprocess.Popen([sys.executable, "-c", KILLED, marks, tmp_path / "results", kind, "4", "60"])
    try:
        deadline = time.monotonic() + 60
        while len(list(marks.iterdir())) < 2 and time.monotonic() < deadline:  # both workers in a task
            time.sleep(0.01)
        children = psutil.Process(proc.pid).children(recursive=True)
        assert len(children) >= 3, children  # (two workers and the resource tracker)
        proc.kill()  # the grid alone, as kill -9 PID does
        proc.wait()
        gone, alive = psutil.wait_procs(children, timeout=10)
    finally:
        proc.kill()
    for child in alive:
        child.kill()
    assert alive == [], [child.pid for child in alive]


# ----------------------------------------------------------------------------------------------------------------
# Bad result files, failing tasks, bad inputs


@pytest.mark.parametrize("spoil, said", [
    (lambda folder: (folder / "a-1.json").write_bytes((folder / "a-1.json").read_bytes()[:40]), "is not strict JSON"),
    (lambda folder: (folder / "a-1.json").write_text((folder / "a-1.json").read_text().replace('"trace": ',
                                                                                               '"trace": NaN, "t": ')),
     r"is not strict JSON \(NaN is not a JSON number\)"),
    (lambda folder: (folder / "a-1.json").write_text("[" * 100_000), r"is not strict JSON \(maximum recursion"),
    (lambda folder: (folder / "a-1.json").write_bytes((folder / "a-2.json").read_bytes()),
     "holds the result of 'a-2', not of 'a-1'"),
    (lambda folder: (folder / "a-1.json").write_text('{"format": "grid result v0", "key": "a-1"}'),
     "is not a 'grid result v1' file"),
    (lambda folder: (folder / "a-1.json").write_text('{"format": "grid result v1", "key": "a-1", "args": []}'),
     "lacks one of the fields"),
    (lambda folder: (folder / "a-1.json").write_text((folder / "a-1.json").read_text().replace("\n  11,", "\n  99,")),
     r"a-1.json holds the result of a-1 for other arguments \(.*99.*\) than this grid's \(.*11.*\)"),
    (lambda folder: (folder / "x.json").mkdir(), "is a folder"),
    (lambda folder: (folder / "\x1b]0;owned\x07\x1b[2J.json").write_text("{}"),
     r"holds '\\x1b\]0;owned\\x07\\x1b\[2J\.json', which is no result file's name"),
])
def test_a_bad_result_file_is_named_before_any_work_and_never_replaced(pool, tmp_path, spoil, said):
    folder, marks = tmp_path / "results", tmp_path / "marks"
    toy_grid(pool, folder, marks, count=3)
    spoil(folder)
    spoiled = {p.name: p.read_bytes() for p in folder.glob("*.json") if p.is_file()}
    calls = grid_tasks.calls(marks)
    (folder / "a-0.json").unlink()  # a task to run, which must not run
    with pytest.raises(ValueError, match=said) as caught:
        toy_grid(pool, folder, marks, count=3)
    assert str(folder) in str(caught.value) and "never replaced" in str(caught.value)
    assert grid_tasks.calls(marks) == calls
    assert {p.name: p.read_bytes() for p in folder.glob("*.json") if p.is_file()} == {
        name: raw for name, raw in spoiled.items() if name != "a-0.json"}


def test_a_result_that_is_not_strict_json_or_that_check_refuses_is_never_written_and_stops_the_grid(pool, tmp_path):
    with pytest.raises(RuntimeError, match=r"^task n failed: ValueError: its result cannot be written \(Out of"
                                           r" range float values are not JSON compliant"):
        grid.run_tasks(pool, float, [("n", ["nan"])], tmp_path, report=None)
    with pytest.raises(RuntimeError, match=r"^task a failed: ValueError: its result cannot be written \(it is not"
                                           r" one the task can give: 2 is not above 2\)$"):
        grid.run_tasks(pool, abs, [("a", [-2]), ("b", [3])], tmp_path, report=None,
                       check=lambda args, result: f"{result} is not above 2" if result <= 2 else None)
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_a_result_that_cannot_be_written_stops_the_grid_in_one_line_and_the_written_ones_stay(pool, tmp_path,
                                                                                                      monkeypatch):
    """Before: a full or read-only folder was an OSError's traceback."""
    real, writes = grid.write_atomic, []

    def full_at_the_third(path, data):
        writes.append(path)
        if len(writes) == 3:
            raise OSError(28, "No space left on device", str(path))
        real(path, data)

    monkeypatch.setattr(grid, "write_atomic", full_at_the_third)
    with pytest.raises(ValueError, match=r"^cannot write .*t-2\.json \(No space left on device\); the results"
                                         r" written so far stay: make room or fix the folder"):
        grid.run_tasks(pool, abs, [(f"t-{k}", [k]) for k in range(5)], tmp_path, report=None)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t-0.json", "t-1.json"]


def test_the_keys_read_back_are_named_in_the_tasks_order_and_each_is_checked(pool, tmp_path):
    tasks = [(f"t-{k}", [k]) for k in range(4)]
    grid.run_tasks(pool, abs, tasks, tmp_path, report=None)
    (tmp_path / "t-1.json").unlink()
    seen, read_back = [], []
    got = grid.run_tasks(pool, abs, tasks, tmp_path, report=None, read_back=read_back,
                         check=lambda args, result: seen.append(args[0]))
    assert got == {"t-0": 0, "t-1": 1, "t-2": 2, "t-3": 3} and read_back == ["t-0", "t-2", "t-3"]
    assert seen == [0, 2, 3, 1]  # (those read first, as they are added; then the one computed)


@pytest.mark.parametrize("kind", ["serial", "process"])
def test_a_task_that_raises_stops_the_grid_naming_it_and_the_finished_results_stay(tmp_path, kind):
    folder, marks = tmp_path / "results", tmp_path / "marks"
    marks.mkdir()
    tasks = grid_tasks.toy_tasks(10, marks, pause=0.2 if kind == "process" else 0.0)
    failing = 3 if kind == "serial" else 1
    tasks[failing][1].append(True)  # fail
    if kind == "process":
        tasks[0][1][2] = 0.6  # still running when a-1 fails
    with grid.executor(kind, workers=None if kind == "serial" else 2) as pool:
        with pytest.raises(RuntimeError, match=f"^task a-{failing} failed: ValueError: no numbers for a-{failing}$"):
            grid.run_tasks(pool, grid_tasks.toy, tasks, folder, report=None)
    written = sorted(p.name for p in folder.iterdir())
    calls = grid_tasks.calls(marks)
    if kind == "serial":
        assert calls == ["a-0", "a-1", "a-2", "a-3"] and written == ["a-0.json", "a-1.json", "a-2.json"]
    else:
        assert "a-0.json" in written and f"a-{failing}.json" not in written and len(calls) < 10
        assert written == sorted(f"{key}.json" for key in calls if key != f"a-{failing}")  # every other one written
    assert all(grid.read_result(folder / name)["key"] == name[:-5] for name in written)


def test_a_link_at_the_grids_lock_name_is_never_followed(pool, tmp_path):
    """Whoever can write the results folder can put a link at the name the grid's lock is made beside (grid): the
    lock stays in the folder, nothing is made where the link points, and the link is left as it is."""
    folder, outside = tmp_path / "results", tmp_path / "etc" / "passwd"
    folder.mkdir()
    outside.parent.mkdir()
    outside.write_text("root:x:0:0:root:/root:/bin/sh\n")
    (folder / "grid").symlink_to(outside)
    seen = grid.run_tasks(pool, grid_tasks.there, [("t", [f"{outside}.lock", f"{folder}/grid.lock"])], folder,
                          report=None)["t"]
    assert seen == [False, True]  # (while the grid ran: no lock beside passwd, one in the folder)
    assert sorted(p.name for p in outside.parent.iterdir()) == ["passwd"] and outside.read_text().startswith("root")
    assert os.readlink(folder / "grid") == str(outside) and sorted(p.name for p in folder.iterdir()) == ["grid",
                                                                                                        "t.json"]


@pytest.mark.parametrize("kind, workers, address, said", [
    ("process", True, None, "workers True: expected a whole number"),
    ("dask", "2", None, "workers '2': expected a whole number"),
    ("serial", 2, None, "workers 2: the serial executor runs one task at a time"),
    ("process", 10**5, None, f"workers 100000: more than 4 a core (this process may run on {grid.cores()}) only"
                             f" share the cores, each a process of its own in memory; expected at most"
                             f" {4 * grid.cores()}$"),
    ("process", None, "tcp://127.0.0.1:8786", "address 'tcp://127.0.0.1:8786' is for the dask executor"),
    ("dask", 2, "tcp://127.0.0.1:8786", "workers 2 with address 'tcp://127.0.0.1:8786': an existing Dask cluster"),
    ("dask", None, 8786, "address 8786: expected a Dask scheduler's address"),
    ("dask", None, "http://127.0.0.1:8787", "address 'http://127.0.0.1:8787': expected a Dask scheduler's address"),
])
def test_a_bad_executor_is_named_before_anything_starts(kind, workers, address, said):
    with pytest.raises(ValueError, match="^" + said.replace("(", r"\(").replace(")", r"\)")):
        with grid.executor(kind, workers, address):
            pytest.fail("the executor started")


@pytest.mark.parametrize("tasks, said", [
    ([(3, [])], "key 3 names a file"),
    ([("a", [1]), ("a", [2])], "task 'a' comes twice"),
    ([("Run", [1]), ("run", [2])], "task 'run' comes twice, as 'Run' (file names may ignore case)"),
    ([("a", {1, 2})], "task a's args {1, 2} are not a list of arguments"),
    ([("a", [{1, 2}])], "task a's args are not JSON values"),
    ([("a",)], "task ('a',) is not a pair"),
])
def test_a_bad_task_is_named_before_any_work(pool, tmp_path, tasks, said):
    with pytest.raises(ValueError, match=said.replace("(", r"\(").replace(")", r"\)").replace("{", r"\{")):
        grid.run_tasks(pool, pytest.fail, tasks, tmp_path / "results", report=None)
    assert not (tmp_path / "results").exists()


def test_a_bad_task_from_follow_is_named_with_the_task_it_followed(pool, tmp_path):
    with pytest.raises(ValueError, match=r"^follow\('a-0', \.\.\.\): task 'a-0' comes twice"):
        grid.run_tasks(pool, grid_tasks.toy, grid_tasks.toy_tasks(1, tmp_path), tmp_path / "results",
                       follow=lambda key, result: [(key, [])], report=None)


def test_a_results_folder_that_is_a_file_or_a_link_is_refused(pool, tmp_path):
    (tmp_path / "file").write_text("mine")
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real", target_is_directory=True)
    for folder, said in [("file", "is a file; expected a folder"), ("file/results", "file is a file, not a"),
                         ("link", "is a link; expected a folder"), ("link/results", "link is a link")]:
        with pytest.raises(ValueError, match=f"^results folder {tmp_path / folder}: .*{said}|"
                                             f"^results folder {tmp_path / folder} {said}"):
            grid.run_tasks(pool, pytest.fail, [("a", [])], tmp_path / folder, report=None)
    assert (tmp_path / "file").read_text() == "mine" and list((tmp_path / "real").iterdir()) == []


@pytest.mark.parametrize("missing, said", [
    ("distributed", "the dask executor needs distributed"),
    ("cryptography", r"the dask executor's local cluster needs cryptography \(for the certificate .*\)"),
])
def test_without_a_package_it_needs_the_dask_executor_is_one_clear_error(monkeypatch, missing, said):
    monkeypatch.setitem(sys.modules, missing, None)  # as if it were not installed: its import fails
    monkeypatch.setattr(grid.importlib.util, "find_spec", lambda name, *a: None if name == missing else name)
    with pytest.raises(RuntimeError, match=f"^{said}, which is not installed; install it with: python3 -m pip install"
                                           f" -r tests/requirements.txt$"):
        with grid.executor("dask", workers=2):
            pytest.fail("the executor started")


@contextmanager
def listener(greeting=None):
    """The address of a TCP listener on 127.0.0.1 for a with-block: one that never accepts (greeting None), or
    accepts each connection and sends greeting."""
    server = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def serve():
        server.settimeout(0.1)
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            with conn:
                conn.sendall(greeting)
                stop.wait(2)

    thread = threading.Thread(target=serve, daemon=True)
    if greeting is not None:
        thread.start()
    try:
        yield f"tcp://127.0.0.1:{server.getsockname()[1]}"
    finally:
        stop.set()
        if greeting is not None:
            thread.join()
        server.close()


def test_a_scheduler_address_that_is_no_scheduler_is_one_line_within_its_time_limit(monkeypatch):
    """Before: a listener that never answers hung with no output, a closed port was a traceback after 30 s, and an
    HTTP server's reply made the client allocate 3.07 EiB."""
    need_dask()
    monkeypatch.setattr(grid, "ANSWER_SECONDS", 1)
    with socket.create_server(("127.0.0.1", 0)) as closed:
        port = closed.getsockname()[1]
    cases = [(listener(), "did not greet a connection in 1 s, as a Dask scheduler does at once"),
             (listener(b"HTTP/1.1 400 Bad Request\r\n\r\n"), "does not speak Dask's protocol: its first message"
                                                                " announces 3,543,824,036,068,086,856 bytes"),
             (nullcontext(f"tcp://127.0.0.1:{port}"), "cannot connect to it (Connection refused)")]
    for place, said in cases:
        with place as address:
            started = time.monotonic()
            with pytest.raises(ValueError, match=f"^--scheduler {address}:? " + re.escape(said)):
                with grid.executor("dask", address=address):
                    pytest.fail("the executor started")
            assert time.monotonic() - started < 5


def test_a_scheduler_without_workers_is_one_line_after_its_time_limit(monkeypatch):
    need_dask()
    import distributed

    monkeypatch.setattr(grid, "WORKERS_SECONDS", 1)
    with distributed.LocalCluster(n_workers=0, processes=False, protocol="tcp://", host="127.0.0.1",
                                  dashboard_address=None) as cluster:
        with pytest.raises(ValueError, match=f"^--scheduler {cluster.scheduler_address} has no workers \\(none came"
                                             f" in 1 s\\); start some with: dask worker"):
            with grid.executor("dask", address=cluster.scheduler_address):
                pytest.fail("the executor started")


# ----------------------------------------------------------------------------------------------------------------
# What a worker keeps

MADE = []  # the arguments made() was called with


def made(*args):
    MADE.append(args)
    return list(args)


def test_kept_makes_a_value_once_a_process_and_keeps_the_last_few(tmp_path):
    first = grid.kept(made, str(tmp_path), 0)
    assert grid.kept(made, str(tmp_path), 0) is first and MADE.count((str(tmp_path), 0)) == 1
    for k in range(1, grid.KEPT + 1):  # KEPT others: the first is the least recently used, dropped
        grid.kept(made, str(tmp_path), k)
    assert grid.kept(made, str(tmp_path), 0) == first and MADE.count((str(tmp_path), 0)) == 2
