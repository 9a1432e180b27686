"""A grid of independent runs on every core: each task (a key, a small name such as "16x2-10000000000-0.01-3", and
its arguments) goes through one `concurrent.futures` Executor, and each result is written to its own file in a
results folder the moment it comes back, so that a grid that is killed continues where it stopped and ends with the
same results.

The executors: `executor`; how tasks run, resume and follow one another: `run_tasks`; what a worker keeps for
several tasks: `kept`. How the scaling grid uses them: docs/scaling.md, "On every core, on Dask, and resuming".

    >>> import math, tempfile
    >>> with tempfile.TemporaryDirectory() as d, executor("serial") as pool:
    ...     run_tasks(pool, math.pow, [("two-ten", [2, 10]), ("three-two", [3, 2])], d, report=None)
    {'two-ten': 1024.0, 'three-two': 9.0}

The same tasks on the same machine, kernels and thread count give the same results, bit for bit, on every executor
and in the tasks' order, however the workers were scheduled.
"""

import functools
import importlib.util
import json
import multiprocessing
import os
import re
import socket
import threading
import time
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures import Executor as _Executor
from contextlib import contextmanager
from pathlib import Path

from atomic import hold, read_whole, remove_leftovers, write_atomic
from oneblock import machine

KINDS = ("process", "serial", "dask")  # the executors `executor` makes
ADDRESS = re.compile(r"(tcp|tls)://(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._-]+):([0-9]{1,5})")  # scheme, host, port
ANSWER_SECONDS = 10  # how long a scheduler may take to accept a connection and greet it
WORKERS_SECONDS = 60  # how long a scheduler may take to have a worker for the grid
GREETING = (16, 1 << 20)  # the least and most bytes a Dask comm's first message (its handshake) announces
MOST_A_CORE = 4  # workers a core at the most: each run computes with one thread, so more only share the cores
WORKER_BYTES = 100 << 20  # the least a worker takes: a Python with NumPy and the lab, before its stories
FORMAT = "grid result v1"  # the "format" field of every result file
KEY = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,99}")  # a task's key, which names its file: key + ".json"
LARGEST = 1 << 26  # bytes of the largest result file read (64 MiB)
KEPT = 6  # values `kept` keeps in each process, the least recently used dropped first
NEVER = "it is never replaced: remove it to run its task again, or choose another folder"  # a bad result file
DASK = ("dask", "distributed")  # the packages of the "dask" executor (tests/requirements.txt pins them)

# ----------------------------------------------------------------------------------------------------------------
# Making the executor


def cores():
    """The cores this process may run on: os.process_cpu_count() (Python 3.13+), else the CPUs of its affinity mask,
    else every CPU of the machine.

    >>> cores() >= 1
    True
    """
    if hasattr(os, "process_cpu_count"):
        count = os.process_cpu_count()
    elif hasattr(os, "sched_getaffinity"):
        count = len(os.sched_getaffinity(0))
    else:
        count = os.cpu_count()
    return count or 1


@contextmanager
def executor(kind="process", workers=None, address=None):
    """For a with-block: a concurrent.futures Executor of kind (KINDS), shut down at its end (the tasks not yet
    started cancelled, the running ones waited for).

    - "process": a pool of `workers` processes (default: cores()), each started fresh (spawn), computing with
      one BLAS thread and ending with this process however it ends (one_blas_thread).
    - "serial": each task run in this process at the moment it is submitted; workers may only be 1.
    - "dask": distributed.Client(address) for the scheduler at address (its workers are its own: workers must be
      None), or else grid_dask.local_cluster(workers) (default: cores()), stopped at the block's end. dask and
      distributed are imported only here; without them, a RuntimeError names the package and the command that
      installs it.

    A ValueError names a bad kind, worker count or address before anything starts.

    >>> with executor("serial") as pool:
    ...     pool.submit(sum, [1, 2, 3]).result()
    6
    >>> with executor("threads"):
    ...     pass
    Traceback (most recent call last):
    ...
    ValueError: unknown executor 'threads'; expected one of process, serial, dask
    """
    workers = checked_workers(kind, workers, address)
    if kind == "serial":
        yield Serial()
    elif kind == "process":
        pool = ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn"),
                                   initializer=one_blas_thread, initargs=(os.getpid(),))
        try:
            yield pool
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
    else:
        with dask_client(address, workers) as client:
            yield client.get_executor(pure=False)  # (pure=False: a task submitted twice runs twice)


def checked_workers(kind, workers, address):
    """The worker count an executor of kind gets (workers, or cores() where it is None and the kind makes its
    workers); a ValueError names what is wrong with kind, workers or address: a count of workers this machine makes
    must be at most MOST_A_CORE a core and fit in memory at WORKER_BYTES each, checked before any starts.

    >>> checked_workers("process", None, None) == cores(), checked_workers("dask", 2, None)
    (True, 2)
    >>> checked_workers("process", 0, None)
    Traceback (most recent call last):
    ...
    ValueError: workers 0: expected a whole number of at least 1 (or None: every core)
    """
    if kind not in KINDS:
        raise ValueError(f"unknown executor {kind!r}; expected one of {', '.join(KINDS)}")
    if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int) or workers < 1):
        raise ValueError(f"workers {workers!r}: expected a whole number of at least 1 (or None: every core)")
    if address is not None and kind != "dask":
        raise ValueError(f"address {address!r} is for the dask executor, not {kind!r}")
    if kind == "serial" and workers not in (None, 1):
        raise ValueError(f"workers {workers}: the serial executor runs one task at a time, in this process;"
                         f" expected 1, or the process executor for {workers} workers")
    most = MOST_A_CORE * cores()
    if workers is not None and workers > most and address is None:
        raise ValueError(f"workers {workers}: more than {MOST_A_CORE} a core (this process may run on {cores()}) only"
                         f" share the cores, each a process of its own in memory; expected at most {most}")
    if workers is not None and address is None:
        machine.check_memory(workers * WORKER_BYTES, f"workers {workers} (about {WORKER_BYTES >> 20} MiB each)")
    if kind == "dask" and address is not None:
        found = ADDRESS.fullmatch(address) if isinstance(address, str) else None
        if found is None or not 1 <= int(found.group(3)) <= 65535:
            raise ValueError(f"address {compact(address, 80)}: expected a Dask scheduler's address such as"
                             f" 'tcp://10.0.0.5:8786' (tcp:// or tls://, a host, a port from 1 to 65535)")
        if workers is not None:
            raise ValueError(f"workers {workers} with address {address!r}: an existing Dask cluster has its own"
                             f" workers; give one or the other")
        return None
    return cores() if workers is None else workers


class Serial(_Executor):
    """The serial executor: submit runs the function in this process at once and returns its finished Future (a
    class because an Executor is one: the base class gives map, shutdown and the with-block)."""

    def submit(self, fn, /, *args, **kwargs):
        future = Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except Exception as e:  # (an interrupt is no task's failure: it passes through)
            future.set_exception(e)
        return future


def one_blas_thread(parent=None):
    """A process pool's initializer: this worker's BLAS computes with one thread, both the libraries loaded already
    (threadpoolctl, machine.use_threads) and any loaded later (the thread variables they read at load); and, given
    the process ID of the grid that started it, the worker ends with that grid (ending_with)."""
    os.environ.update({name: "1" for name in machine.THREAD_VARIABLES})
    machine.use_threads(1, "experiments.grid's workers")
    if parent is not None:
        threading.Thread(target=ending_with, args=(parent,), daemon=True, name="ending with the grid").start()


def ending_with(parent, every=0.5):
    """End this process at once (os._exit) when its parent, the process parent, is gone: a grid killed with SIGKILL
    runs no clean-up, and its pool's workers would otherwise wait for tasks forever, and with them the
    resource tracker they share and its semaphores. Checked every `every` seconds (POSIX: a process whose parent
    ends is adopted by another, so its parent ID changes)."""
    while os.getppid() == parent:
        time.sleep(every)
    os._exit(1)


@contextmanager
def dask_client(address, workers):
    """For a with-block: a distributed.Client of the scheduler at address, or of grid_dask.local_cluster(workers),
    which only this client can reach; closed at the end."""
    missing = dask_missing(address)
    if missing:
        raise RuntimeError(missing)
    import distributed

    if address is not None:
        problem = scheduler_problem(address)
        if problem:
            raise ValueError(problem)
        try:
            client = distributed.Client(address, timeout=ANSWER_SECONDS)
        except (OSError, TimeoutError) as e:
            raise ValueError(f"--scheduler {address}: cannot connect a Dask client to it"
                             f" ({compact(str(e) or type(e).__name__, 160)})") from None
        with client:
            try:
                client.wait_for_workers(1, timeout=WORKERS_SECONDS)
            except TimeoutError:
                raise ValueError(f"--scheduler {address} has no workers (none came in {WORKERS_SECONDS} s); start"
                                 f" some with: dask worker {address}") from None
            yield client
        return
    from experiments.grid_dask import local_cluster

    cluster, security = local_cluster(workers)
    with cluster, distributed.Client(cluster, security=security) as client:
        yield client


def scheduler_problem(address, seconds=None):
    """Why address (checked_workers's form) is not a Dask scheduler that answers, in one line, or None: judged with a
    plain socket, within seconds (ANSWER_SECONDS) for each step, before a Dask client reads anything from it (a
    client reads the length of the first message and makes room for it: an HTTP server's reply announces exabytes).
    A closed port, a listener that never greets (a Dask comm greets first), and a first message of a length no
    handshake has are each refused. Over tls:// the greeting comes after TLS's own handshake, which the client's
    certificates do: only the connection is tried.

    >>> print(scheduler_problem("tcp://127.0.0.1:1", 1))
    --scheduler tcp://127.0.0.1:1: cannot connect to it (Connection refused)
    """
    seconds = ANSWER_SECONDS if seconds is None else seconds
    scheme, host, port = ADDRESS.fullmatch(address).groups()
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=seconds) as s:
            if scheme == "tls":
                return None
            head = b""
            while len(head) < 8:
                more = s.recv(8 - len(head))
                if not more:
                    return f"--scheduler {address} closed the connection without a word: not a Dask scheduler"
                head += more
    except TimeoutError:
        return (f"--scheduler {address} did not greet a connection in {seconds} s, as a Dask scheduler does at"
                f" once: is it one?")
    except OSError as e:
        return f"--scheduler {address}: cannot connect to it ({e.strerror or e})"
    size = int.from_bytes(head, "little")
    if not GREETING[0] <= size <= GREETING[1]:
        return (f"--scheduler {address} does not speak Dask's protocol: its first message announces {size:,} bytes,"
                f" and a scheduler's greeting is {GREETING[0]} to {GREETING[1]:,}")
    return None


def dask_missing(address):
    """Why the dask executor of the scheduler at address cannot start, in one line, or None: dask or distributed is
    not installed, or (for its own local cluster: address None) the package that makes the cluster's certificate
    (cryptography, for Dask's Security.temporary)."""
    for package in DASK:
        if importlib.util.find_spec(package) is None:
            return machine.not_installed(package, "the dask executor")
    if address is None and importlib.util.find_spec("cryptography") is None:
        return machine.not_installed("cryptography", "the dask executor's local cluster",
                                     " (for the certificate that closes it to other users)")
    return None


# ----------------------------------------------------------------------------------------------------------------
# Running tasks


def run_tasks(pool, fn, tasks, folder, follow=None, report=print, check=None, read_back=None):
    """Run fn(*args) for every task (key, args) of tasks through the executor pool, each result written to
    folder/KEY.json as it comes back, and return {key: result} in the tasks' order: the tasks given, then those
    follow added, in the order it added them.

    - A task whose result file is in folder already is not run: its result is read from the file.
    - follow(key, result), when given, is called once for every task, in the tasks' order (a result that comes back
      early waits for those before it), whether it was run now or read, and returns the tasks that need it
      (an empty list for none): the tasks and their order never depend on which worker finished first.
    - report(line), unless None: a line for each task run, its key, its seconds and how many tasks are done of
      those known so far (follow adds to them), and one line first when results were found in folder.
    - check(args, result), when given, says in one line why result (as JSON gives it back) is not one that
      fn(*args) can return, or None: every result, read from its file or fresh from a worker, is checked before it
      is believed, so that a file that parses but was edited (a loss made lower, a NaN) never reaches the record.
    - read_back, when given, is a list to which the keys of the results read from folder are added, in the
      tasks' order: what a record says it did not compute itself.

    A key names its file (checked_task); args, a list of JSON values, are kept in the result file, so that a
    result of other arguments is never taken for this one's; a result is JSON too, read back as it was written (a
    fresh result and a resumed one are the same values). fn must be a module-level function the workers can import.

    A ValueError, before anything runs, names a bad task (one of follow's when follow returns it), a folder that is
    a file or a link, a folder another grid is writing, and a bad result file (read_result; one of other arguments;
    one that check refuses): such a file is never replaced, nor its task run again, since write_atomic never
    leaves half a file and a bad one was changed or is someone else's. A task that raises, or returns a result
    that is not strict JSON or that check refuses (never written), stops the grid: nothing more starts, the tasks
    already running are still written, and a RuntimeError names the task's key and its error. A result that cannot
    be written (a full disk, a folder made read-only) stops it the same way, with a ValueError naming the file.
    """
    folder = results_folder(folder)
    tasks = [checked_task(task, "tasks") for task in tasks]
    with hold(folder / "grid", f"experiments.grid, process {os.getpid()}", follow=False):  # (grid.lock, in folder)
        remove_leftovers(folder, names=r".+\.json")  # the temporary files of a grid killed as it wrote a result
        stored = stored_results(folder)
        order, args_of, lowered = [], {}, {}  # the keys in order; {key: args}; {key.lower(): key}
        results, running, failure = {}, {}, []  # {key: result}; {future: key}; the first failure, (key, error)
        unwritable = []  # the errors of results that could not be written (the folder's, not the task's)
        if stored and report:
            report(f"{len(stored)} results found in {folder}")

        def finish(future):
            """Write the result of a finished future or, if it failed, keep the failure and cancel what waits."""
            key = running.pop(future)
            if future.cancelled():
                return
            error = future.exception()
            if error is None:
                result, seconds = future.result()
                try:
                    results[key] = written(folder, key, args_of[key], result, seconds, check)
                except (TypeError, ValueError) as e:
                    error = ValueError(f"its result cannot be written ({e})")
                except OSError as e:  # (a full disk, a folder made read-only: the folder's failure, not the task's)
                    error = ValueError(f"cannot write {folder / (key + '.json')} ({e.strerror or e}); the results"
                                       f" written so far stay: make room or fix the folder, then run the same command"
                                       f" again to continue")
                    unwritable.append(error)
                else:
                    if report:
                        report(f"{key}: {seconds:.1f} s, {len(results)} of {len(order)} done")
            if error is not None and not failure:
                failure.append((key, error))
                for waiting in running:
                    waiting.cancel()  # (only those not started yet; the running ones finish and are written)

        def add(new, origin):
            """Take new tasks in order: read those whose results are in folder, submit the others."""
            source = "tasks" if origin is None else f"follow({origin!r}, ...)"
            if origin is not None:
                new = [checked_task(task, source) for task in new]
            for key, args in new:
                same = lowered.setdefault(key.lower(), key)
                if key in args_of or same != key:
                    raise ValueError(f"{source}: task {key!r} comes twice"
                                     + ("" if same == key else f", as {same!r} (file names may ignore case)"))
                args_of[key] = args
                if key in stored and stored[key]["args"] != args:
                    raise ValueError(f"{folder / (key + '.json')} holds the result of {key} for other arguments"
                                     f" ({compact(stored[key]['args'])}) than this grid's ({compact(args)}); {NEVER}")
                problem = check(args, stored[key]["result"]) if key in stored and check else None
                if problem:
                    raise ValueError(f"{folder / (key + '.json')} holds a result that {key} cannot give: {problem};"
                                     f" {NEVER}")
            order.extend(key for key, _ in new)
            if read_back is not None:
                read_back.extend(key for key, _ in new if key in stored)
            results.update((key, stored[key]["result"]) for key, _ in new if key in stored)
            for key, args in new:
                if key not in stored and not failure:
                    future = pool.submit(timed, fn, args)
                    running[future] = key
                    if future.done():  # the serial executor: run already, written before the next starts
                        finish(future)

        add(tasks, None)
        followed = 0  # the first followed tasks of order have been given to follow
        while True:
            while not failure and followed < len(order) and order[followed] in results:
                key = order[followed]
                followed += 1
                if follow is not None:
                    add(follow(key, results[key]) or [], key)
            if not running:
                break
            for future in wait(running, return_when=FIRST_COMPLETED)[0]:
                finish(future)
        if failure:
            key, error = failure[0]
            if error in unwritable:  # (the folder's failure: a ValueError, one line for the command)
                raise error
            raise RuntimeError(f"task {key} failed: {type(error).__name__}: {error}") from error
        return {key: results[key] for key in order}


def timed(fn, args):
    """(fn(*args), its seconds), computed with one BLAS thread (restored after): what a worker runs for a task."""
    started = time.perf_counter()
    with machine.use_threads(1, "experiments.grid's tasks"):
        result = fn(*args)
    return result, time.perf_counter() - started


def checked_task(task, where):
    """(key, args as JSON gives them back) of a task (key, args); a ValueError names what is wrong with it.

    >>> checked_task(("16x2-10000000000-0.01-3", ([16, 2], 1e10)), "tasks")
    ('16x2-10000000000-0.01-3', [[16, 2], 10000000000.0])
    >>> checked_task(("runs/1", []), "tasks")
    Traceback (most recent call last):
    ...
    ValueError: tasks: key 'runs/1' names a file, so it must be 1 to 100 letters, digits and ._+- (starting with a \
letter or digit)
    """
    if not isinstance(task, (tuple, list)) or len(task) != 2:
        raise ValueError(f"{where}: task {compact(task)} is not a pair (key, args)")
    key, args = task
    if not isinstance(key, str) or not KEY.fullmatch(key):
        raise ValueError(f"{where}: key {key!r} names a file, so it must be 1 to 100 letters, digits and ._+-"
                         f" (starting with a letter or digit)")
    if not isinstance(args, (tuple, list)):
        raise ValueError(f"{where}: task {key}'s args {compact(args)} are not a list of arguments")
    try:
        return key, json.loads(json.dumps(list(args)))
    except (TypeError, ValueError) as e:
        raise ValueError(f"{where}: task {key}'s args are not JSON values ({e})") from None


def compact(value, most=120):
    """A value's repr, cut to most characters.

    >>> compact(list(range(100)), 20)
    '[0, 1, 2, 3, 4, 5...'
    """
    text = repr(value)
    return text if len(text) <= most else text[:most - 3] + "..."


# ----------------------------------------------------------------------------------------------------------------
# The result files


def results_folder(folder):
    """folder as a Path, if it can hold results: a folder, or a name where one can be made (hold makes it); a
    ValueError names a link or a file in the way.

    >>> results_folder("atomic.py")
    Traceback (most recent call last):
    ...
    ValueError: results folder atomic.py is a file; expected a folder (or a name where one can be made)
    """
    path = Path(folder)
    for name in (path, *path.parents):
        if os.path.islink(name):
            raise ValueError(f"results folder {folder}: {name} is a link; expected a folder, not a link to one")
    if path.exists() and not path.is_dir():
        raise ValueError(f"results folder {folder} is a file; expected a folder (or a name where one can be made)")
    for name in path.parents:
        if name.exists() and not name.is_dir():
            raise ValueError(f"results folder {folder}: {name} is a file, not a folder")
    return path


def judged_folder(folder):
    """results_folder(folder), and if it is there already, what run_tasks would refuse in it judged now, before a
    command's long work: another grid holding it (its lock, taken and given back at once), a file that is no
    result file of this format. A ValueError names the first. A result's content (does its run give it?) is judged
    by run_tasks's check, which knows the tasks.

    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as d:
    ...     _ = (Path(d) / "x.json").write_text("{")
    ...     try:
    ...         judged_folder(d)
    ...     except ValueError as e:
    ...         print(str(e).replace(d, "D").split(" (")[0])
    D/x.json is not strict JSON
    """
    folder = results_folder(folder)
    if folder.is_dir():
        with hold(folder / "grid", f"experiments.grid, process {os.getpid()}, judging the folder", follow=False):
            stored_results(folder)
    return folder


def written(folder, key, args, result, seconds, check=None):
    """Write the result file of task key (atomically: whole or not at all) and return the result as it reads back;
    a ValueError, and nothing written, for a result that is not strict JSON (a NaN or an infinity) or that
    check(args, result) refuses."""
    text = json.dumps({"format": FORMAT, "key": key, "args": args, "seconds": round(seconds, 3), "result": result},
                      indent=1, allow_nan=False) + "\n"
    back = json.loads(text)["result"]
    problem = check(args, back) if check else None
    if problem:
        raise ValueError(f"it is not one the task can give: {problem}")
    write_atomic(folder / f"{key}.json", text)
    return back


def stored_results(folder):
    """{key: the contents of its file} of every result file in folder (every *.json there); a ValueError names the
    first that is not a result file of this format and of the key its name says, and why: first of all a name that
    no key gives, shown with its characters escaped (a name can hold a terminal's control sequences)."""
    found = {}
    for name in sorted(os.listdir(folder)):
        if name.endswith(".json"):
            if not KEY.fullmatch(name[:-5]):
                raise ValueError(f"{folder} holds {ascii(name)}, which is no result file's name (a key of letters,"
                                 f" digits and ._+-, then .json): it is never replaced; move it out of the folder,"
                                 f" or choose another folder")
            found[name[:-5]] = read_result(folder / name)
    return found


def read_result(path):
    """The contents of the result file at path, checked: a ValueError names it and says what is wrong."""
    never = f"; a result file is written whole or not at all, so this one was changed or is another program's: {NEVER}"
    if os.path.islink(path):
        raise ValueError(f"{path} is a link, not a result file{never}")
    try:
        raw = read_whole(path, "a result file", LARGEST)
    except ValueError as e:
        raise ValueError(f"{e}{never}") from None
    try:
        record = json.loads(raw.decode("utf-8"), parse_constant=not_a_number)
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        raise ValueError(f"{path} is not strict JSON ({str(e) or type(e).__name__}){never}") from None
    fields = {"format": str, "key": str, "args": list, "seconds": (int, float)}
    if not isinstance(record, dict) or record.get("format") != FORMAT:
        raise ValueError(f"{path} is not a {FORMAT!r} file{never}")
    if "result" not in record or any(not isinstance(record.get(f), kinds) for f, kinds in fields.items()):
        raise ValueError(f"{path} lacks one of the fields result, {', '.join(fields)} (or one is of another type)"
                         f"{never}")
    if record["key"] + ".json" != path.name:
        raise ValueError(f"{path} holds the result of {record['key']!r}, not of {path.name[:-5]!r}{never}")
    return record


def not_a_number(name):
    """json.loads's parse_constant: NaN, Infinity and -Infinity are no JSON numbers, and no result holds one.

    >>> json.loads("[NaN]", parse_constant=not_a_number)
    Traceback (most recent call last):
    ...
    ValueError: NaN is not a JSON number
    """
    raise ValueError(f"{name} is not a JSON number")


# ----------------------------------------------------------------------------------------------------------------
# What a worker keeps


@functools.lru_cache(maxsize=KEPT)
def kept(make, *args):
    """make(*args), made once in this process and kept for the next task that asks for the same: a seed's stream of
    stories, built in the worker rather than sent to it. make must be a module-level function and args hashable
    (numbers, strings, tuples). The bound: the last KEPT values asked for, in each worker process (and in this one
    for the serial executor): scaling's seeds' streams (five where a plan has split seeds) and its validation
    stories. A stream holds the plan's longest run, 4 bytes a token: 167 MB for the recorded grid's 8x1 runs at 640
    GFLOP, four times that for a grid to 2,560 GFLOP. A value is shared by the tasks that ask for it, so a task must
    not change it.

    >>> kept(pow, 2, 10), kept(pow, 2, 10) is kept(pow, 2, 10)
    (1024, True)
    """
    return make(*args)
