"""Tasks for tests/test_grid.py's grids, module-level functions in a module that a process pool's and a Dask
cluster's workers import (tests/ is on their sys.path as on the tests'): a toy task of NumPy numbers that notes each
call, the follow-ups it leads to, the BLAS threads a worker computes with, and one small real training run."""

import hashlib
import os
import time
from pathlib import Path

import numpy as np
import threadpoolctl

from experiments import grid
from experiments.recording import trained
from oneblock import data
from oneblock.settings import Settings, checked

# ----------------------------------------------------------------------------------------------------------------
# A toy task and its follow-ups


def toy(key, seed, pause, marks, fail=False):
    """Note the call (a new file in the folder marks, named key.NANOSECONDS.PID), wait pause seconds, then return
    numbers computed from seed through BLAS (a matrix product, whose bits depend on the thread count as a training
    run's do); raise a ValueError instead when fail."""
    Path(marks, f"{key}.{time.time_ns()}.{os.getpid()}").touch()
    time.sleep(pause)
    if fail:
        raise ValueError(f"no numbers for {key}")
    a = np.random.default_rng(seed).standard_normal((96, 96))  # (96, 96)
    product = a @ a.T  # (96, 96)
    return {"seed": seed, "trace": float(np.trace(product)), "sum": float(product.sum()),
            "top": [float(x) for x in np.sort(product.ravel())[-3:]]}


def toy_tasks(count, marks, pause=0.0, first_pause=None):
    """Tasks a-0 ... a-(count - 1) of toy, seeds 10, 11, ...; the first waits first_pause seconds when given."""
    return [(f"a-{k}", [f"a-{k}", 10 + k, pause if k or first_pause is None else first_pause, str(marks)])
            for k in range(count)]


def chain(marks, pause, key, result):
    """follow for toy_tasks, as functools.partial(chain, marks, pause): every a-k leads to b-k, seeded by its
    result's sum (a task that needs another's result); b-1 leads to c, seeded by b-1's seed + 1. Each notes its
    calls in marks and waits pause seconds."""
    name, _, k = key.partition("-")
    if name == "a":
        return [(f"b-{k}", [f"b-{k}", int(abs(result["sum"])) % 1000, pause, str(marks)])]
    if key == "b-1":
        return [("c", ["c", result["seed"] + 1, pause, str(marks)])]
    return []


def calls(marks):
    """The keys of the toy calls noted in the folder marks, one for each call, sorted."""
    return sorted(p.name.split(".")[0] for p in Path(marks).iterdir())


# ----------------------------------------------------------------------------------------------------------------
# What a worker computes with


def blas_threads(pause=0.0):
    """(this process's ID, the threads of each BLAS library NumPy loaded, as threadpoolctl finds them)."""
    time.sleep(pause)
    return os.getpid(), [pool["num_threads"] for pool in threadpoolctl.threadpool_info() if pool["user_api"] == "blas"]


def there(*paths):
    """Which of paths name something at the moment the task runs (a link counts, whatever it leads to)."""
    return [os.path.lexists(path) for path in paths]


def rendezvous(folder, count):
    """Note this process in folder and wait until count processes have (at most 60 s): count of these at once
    return only once count workers are running, so that a test's timing starts with every worker up."""
    Path(folder, str(os.getpid())).touch()
    deadline = time.monotonic() + 60
    while len(list(Path(folder).iterdir())) < count:
        if time.monotonic() > deadline:
            raise TimeoutError(f"fewer than {count} workers came up in 60 s")
        time.sleep(0.01)
    return os.getpid()


# ----------------------------------------------------------------------------------------------------------------
# One small real training run


def corpus_data():
    """The stories of corpus.txt as the default settings read them (data.prepare)."""
    return data.prepare(checked(Settings()))


def tiny_run(seed, lr, steps):
    """Train the library's default model (numpy_fast, float32) for steps steps of 4 windows on the corpus, read once
    per worker (grid.kept); return its validation losses and a SHA-256 of its weights' bytes."""
    params, history = trained({"steps": steps, "batch": 4, "lr": lr, "seed": seed, "eval_every": steps // 2},
                              data=grid.kept(corpus_data))
    digest = hashlib.sha256()
    for name in sorted(params):
        digest.update(name.encode() + np.ascontiguousarray(params[name]).tobytes())
    return {"val": [[h["step"], h["val"]] for h in history], "weights": digest.hexdigest()}
