"""For the lab's developers: the cross-check of every path, benchmarks, probes and paper arithmetic, none of which the
lab needs to run. Run them from the lab's folder:

    compare.py         every intermediate and gradient of both NumPy paths and PyTorch against model.py
    bench.py           one training step of every backend, side by side, against the speed targets
    bench_train.py     train.py's own tokens per second for each backend and process count
    bench_explorer.py  the browser explorer's training in a headless Chromium, against train.py's
    bench_grid.py      the scaling grid's runs with one worker and with every core: the speed-up
    bench_fits.py      the scaling record's bootstrap fits of its floors, here and through a pool of every core
    lessons_page.py    the explorer's lessons in a headless Chromium: each one's time, and the picture of a reveal
    chromium.py        what those two share: the explorer served in a headless Chromium page, and its pictures
    __init__.py        what the commands share: their own figures' file, a call's time, the load, positive options
    jit_probe.py       what a JIT (numba) would buy the tuned path's row-wise passes
    scale.py           a larger model on paper: parameters, memory, FLOPs, tokens per second per GPU

    python3 -m dev.scale --width 16 --blocks 1 --heads 1 --vocab 96 --max-len 64 --batch 16
"""

import argparse
import json
import os
import time


def figures_judge(*key_sets, form=None):
    """The judge a benchmark gives atomic.output_problem (its ours) to know its own figures' file, which its --json
    or --out may replace, from a file of yours: whether a file's bytes are a JSON object that holds every key of one
    of key_sets, and, with form, whose "format" is form.

    >>> ours = figures_judge({"info", "rows"}, {"command", "tricks"})
    >>> ours(b'{"info": {}, "rows": []}'), ours(b'{"command": "", "tricks": []}'), ours(b'{"info": {}}')
    (True, True, False)
    >>> ours(b"my notes"), ours(b"[1, 2]"), [figures_judge(form="v1")(raw) for raw in (b'{"format": "v1"}', b"{}")]
    (False, False, [True, False])
    """
    def ours(raw):
        try:
            found = json.loads(raw)
        except ValueError:
            return False
        return (isinstance(found, dict) and (not key_sets or any(set(keys) <= found.keys() for keys in key_sets))
                and (form is None or found.get("format") == form))

    return ours


def timed(fn, k=1):
    """Seconds per call of fn, over k calls in a row."""
    t0 = time.perf_counter()
    for _ in range(k):
        fn()
    return (time.perf_counter() - t0) / k


def load_average():
    """The machine's load averages over 1, 5 and 15 minutes, to two decimals, or None where there are none.

    >>> load_average() is None or len(load_average()) == 3
    True
    """
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except (AttributeError, OSError):  # (no getloadavg on Windows; OSError where the system has no figures)
        return None


def positive(kind):
    """An argparse type: a number of kind (int or float) greater than zero.

    >>> positive(int)("3"), positive(float)("0.25")
    (3, 0.25)
    >>> positive(int)("0")
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: 0 is not greater than 0
    """
    def parse(text):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        if not value > 0:
            raise argparse.ArgumentTypeError(f"{text} is not greater than 0")
        return value
    return parse
