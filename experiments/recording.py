"""What every experiment here shares: the settings of its runs as plain values, the learning-rate sweep that chooses
each one's rate on held-out data, the numbers across seeds, where its record came from, its record's text and
checks, and its command line (--check, --rerun, --table).

A plan's training settings are values of oneblock.settings.Settings ({"steps": 6000, "eval_every": 1000}); a record
keeps them as the train.py flags that give the same training (`flags`), so that a reader can run one cell by hand:

    >>> flags({"steps": 6000, "eval_every": 1000})
    ['--steps', '6000', '--eval-every', '1000']
"""

import argparse
import json
import statistics
import sys
import time
from functools import partial
from pathlib import Path
from types import SimpleNamespace

import numpy as np

from atomic import write_atomic
from oneblock import checkpoint
from oneblock import data as data_files, floor, machine, numpy_fast, training
from oneblock.settings import TRAINING_SETTINGS, Settings, checked

TUNE_STORIES = 300  # the last training stories, held out of every sweep's training to choose its learning rate

# ----------------------------------------------------------------------------------------------------------------
# The settings of a plan's runs


def flags(values):
    """The train.py flags that give the training settings values (a dict of Settings fields), in their order."""
    return [part for name, value in values.items() for part in (f"--{name.replace('_', '-')}", str(value))]


def lr_values(lr):
    """The settings of a peak learning rate of the sweep: the warm-up rises to lr, the cosine ends at lr / 10 (as
    train.py's default 0.01 ends at 0.001), each as the record's runs were trained: written with %g and read back
    (train.py --lr 0.003 --min-lr 0.0003).

    >>> lr_values(0.003)
    {'lr': 0.003, 'min_lr': 0.0003}
    """
    return {"lr": float(f"{lr:g}"), "min_lr": float(f"{lr / 10:g}")}


def trained(values, data=None, until=None):
    """(weights, history) of training.train with the settings values (quiet), on data when given, stopped after
    step until (on the schedule of the whole run) when given; a run that diverges is a RuntimeError."""
    run = training.train(Settings(**values, quiet=True, stop_at=until), data=data)
    if run.failure is not None:
        raise RuntimeError(run.failure[0])
    return run.state["params"], run.history


def recorded_settings(values):
    """The settings every run of a plan trains with, as its checkpoints would record them, but the scheme, the
    seed and the learning rates.

    >>> recorded_settings({})["steps"], recorded_settings({"batch": 8})["batch"]
    (12000, 8)
    """
    s = checked(Settings(**values))
    return {name: getattr(s, name) for name in TRAINING_SETTINGS if name not in ("positions", "seed", "lr", "min_lr")}


# ----------------------------------------------------------------------------------------------------------------
# The learning-rate sweep


def sweep_data(values, tune_stories):
    """(tuning data, validation data) for runs with the training settings values. The validation data is
    data.prepare's. The tuning data trains on the training stories without their last tune_stories, and holds
    those in the place of the validation stories, so that the run's validation loss is the loss on them: the runs
    of each learning rate are judged on stories none of them trains on, and the validation stories stay unread
    until the chosen runs are reported on them."""
    s = checked(Settings(**values))
    full = data_files.prepare(s)
    stream, texts, ids = data_files.load_data(full.tok, s.val_stories + tune_stories, s.seq_len)
    held_texts, held_ids = texts[:tune_stories], ids[:tune_stories]  # the last stories before the validation ones
    nats, tokens = floor.story_floor(held_texts, full.tok)
    tuning = SimpleNamespace(**{**vars(full), "stream": np.array(stream), "val_texts": held_texts,
                                "val_ids": held_ids, "val_tokens": tokens, "val_floor": nats / tokens})
    return tuning, full


def validation_loss(params, data, positions, heads=1):
    """The validation loss of trained weights as train.py computes it (each validation story of data from its
    start), through numpy_fast.py."""
    loss = partial(numpy_fast.sequence_loss, positions=positions, heads=heads)
    return training.story_nats(loss, params, data.val_ids) / data.val_tokens


def chosen_lr(runs, lrs):
    """The learning rate whose runs have the lowest mean final tuning loss over their seeds ("tune"; the first of
    equal ones), from the runs' own numbers.

    >>> chosen_lr([{"lr": 0.01, "tune": 0.5}, {"lr": 0.01, "tune": 0.7}, {"lr": 0.03, "tune": 0.55}], [0.01, 0.03])
    0.03
    """
    means = [statistics.fmean(r["tune"] for r in runs if r["lr"] == lr) for lr in lrs]
    return lrs[means.index(min(means))]


def sweep_summary(runs, lrs, measures):
    """{"lrs", "chosen", and for "tune" and each of measures (a run's field name -> a function of the run), one
    across_seeds per learning rate}.

    >>> runs = [{"lr": 0.01, "tune": 0.5, "val": 0.4}, {"lr": 0.03, "tune": 0.6, "val": 0.3}]
    >>> sweep_summary(runs, [0.01, 0.03], {"val": lambda r: r["val"]})["val"][1]["mean"]
    0.3
    """
    summary = {"lrs": lrs, "chosen": chosen_lr(runs, lrs)}
    for name, measure in {"tune": lambda r: r["tune"], **measures}.items():
        summary[name] = [across_seeds(measure(r) for r in runs if r["lr"] == lr) for lr in lrs]
    return summary


# ----------------------------------------------------------------------------------------------------------------
# Measures


def last_probs(params, inputs, scheme, heads=1):
    """The next-token probabilities (len(inputs), V) at the last position of each input, in float64; inputs of
    equal length go through the model as one batch."""
    out = np.empty((len(inputs), params["tok_emb"].shape[0]))  # (S, V)
    for n in sorted({len(ids) for ids in inputs}):
        rows = [i for i, ids in enumerate(inputs) if len(ids) == n]
        logits, _ = numpy_fast.forward(params, np.array([inputs[i] for i in rows]), scheme, heads=heads)  # (b, n, V)
        last = np.asarray(logits[:, -1], dtype=np.float64)  # (b, V)
        last -= last.max(axis=1, keepdims=True)
        p = np.exp(last)  # (b, V)
        out[rows] = p / p.sum(axis=1, keepdims=True)
    return out


def across_seeds(values):
    """Mean, sample standard deviation, min, max and the values themselves (one per seed).

    >>> across_seeds([1.0, 2.0, 3.0])
    {'mean': 2.0, 'std': 1.0, 'min': 1.0, 'max': 3.0, 'by_seed': [1.0, 2.0, 3.0]}
    """
    values = [float(v) for v in values]
    std = statistics.stdev(values) if len(values) > 1 else 0.0
    return {"mean": statistics.fmean(values), "std": std, "min": min(values), "max": max(values), "by_seed": values}


# ----------------------------------------------------------------------------------------------------------------
# Where a record came from


def provenance(started, cpu):
    """The fields of an experiment's record that say how it was made, in two dicts: its
    wall-clock seconds since started (longer when the machine is busy), the CPU seconds of this process since cpu
    (about the wall-clock of a quiet machine: one BLAS thread) and the NumPy and kernels it computed with; and the
    SHA-256 of the corpus and the tokenizer it read."""
    made = {"seconds": round(time.perf_counter() - started, 1), "cpu_seconds": round(time.process_time() - cpu, 1),
            "machine": machine.blas(1)}
    return made, {"corpus_sha256": checkpoint.sha256_file(data_files.CORPUS_FILE),
                  "tokenizer_sha256": checkpoint.sha256_file(data_files.TOKENIZER_FILE)}


def check_provenance(record):
    """Raise a ValueError unless record was made from this corpus.txt and tokenizer.json."""
    need(record.get("corpus_sha256") == checkpoint.sha256_file(data_files.CORPUS_FILE), "made from another corpus.txt")
    need(record.get("tokenizer_sha256") == checkpoint.sha256_file(data_files.TOKENIZER_FILE),
         "made with another tokenizer.json")


# ----------------------------------------------------------------------------------------------------------------
# How far another machine may move a result: the spread across kernel families that spread.py records


SPREAD_FILE = Path(__file__).resolve().parent / "spread.json"  # spread.py's record
SPREAD_SEED = 3  # the seed of its runs: train.py's default


def tolerance(record, scheme, step):
    """The spread of scheme's validation loss at step over the recorded runs (largest minus smallest).

    >>> tolerance({"spread": {"rope": {"steps": [0, 500], "width": [0.0, 0.25]}}}, "rope", 500)
    0.25
    """
    s = record["spread"][scheme]
    if step not in s["steps"]:
        raise ValueError(f"spread.json has no spread for {scheme} at step {step}; it has steps {s['steps']}")
    return s["width"][s["steps"].index(step)]


# ----------------------------------------------------------------------------------------------------------------
# A record's tables, checks and text


def spread_text(summary, digits=4, scale=1.0, unit=""):
    """A summary across seeds as "mean ± sd (min to max)".

    >>> spread_text({"mean": 0.5, "std": 0.01, "min": 0.49, "max": 0.51})
    '0.5000 ± 0.0100 (0.4900 to 0.5100)'
    """
    m, sd, lo, hi = (summary[k] * scale for k in ("mean", "std", "min", "max"))
    return f"{m:.{digits}f}{unit} ± {sd:.{digits}f} ({lo:.{digits}f} to {hi:.{digits}f})"


def sweep_text(sweep, digits=4):
    """The sweep's mean tuning loss at each learning rate, the chosen one in bold.

    >>> sweep_text({"lrs": [0.01, 0.03], "chosen": 0.03, "tune": [{"mean": 0.4}, {"mean": 0.35}]})
    '0.4000 / **0.3500**'
    """
    return " / ".join(f"**{t['mean']:.{digits}f}**" if lr == sweep["chosen"] else f"{t['mean']:.{digits}f}"
                      for lr, t in zip(sweep["lrs"], sweep["tune"]))


def table_row(cells):
    """One row of a Markdown table."""
    return "| " + " | ".join(cells) + " |"


def need(ok, what):
    """Raise ValueError(what) unless ok: one check of a record's shape.

    >>> need(1 + 1 == 2, "arithmetic")
    """
    if not ok:
        raise ValueError(what)


def first_difference(derived, recorded, path):
    """Raise a ValueError naming the first place (a path like schemes.rope.val_loss.mean) where recorded differs
    from derived.

    >>> first_difference({"a": [1.0, 2.0]}, {"a": [1.0, 2.5]}, "x")
    Traceback (most recent call last):
    ...
    ValueError: x.a.1 is 2.5 in the record, but its runs give 2.0
    """
    if isinstance(derived, dict) and isinstance(recorded, dict) and list(derived) == list(recorded):
        for key in derived:
            first_difference(derived[key], recorded[key], f"{path}.{key}")
    elif isinstance(derived, list) and isinstance(recorded, list) and len(derived) == len(recorded):
        for i, (a, b) in enumerate(zip(derived, recorded)):
            first_difference(a, b, f"{path}.{i}")
    elif derived != recorded or type(derived) is not type(recorded):
        raise ValueError(f"{path} is {json.dumps(recorded)[:80]} in the record, but its runs give"
                         f" {json.dumps(derived)[:80]}")


def rounded(x):
    """x with every float rounded to six significant digits, far more than seeds or machines agree on.

    >>> rounded({"a": [0.123456789, 2], "b": None})
    {'a': [0.123457, 2], 'b': None}
    """
    if isinstance(x, float):
        return float(f"{x:.6g}")
    if isinstance(x, dict):
        return {k: rounded(v) for k, v in x.items()}
    if isinstance(x, list):
        return [rounded(v) for v in x]
    return x


def json_text(record):
    """JSON with two-space indentation, but each list of plain numbers on one line.

    >>> print(json_text({"a": [1, 2.5], "b": {"c": None}}))
    {
      "a": [1, 2.5],
      "b": {
        "c": null
      }
    }
    """
    def dump(x, indent):
        pad = "  " * (indent + 1)
        if isinstance(x, dict) and x:
            items = [f"{pad}{json.dumps(k)}: {dump(v, indent + 1)}" for k, v in x.items()]
            return "{\n" + ",\n".join(items) + "\n" + "  " * indent + "}"
        if isinstance(x, list) and any(isinstance(v, (dict, list)) for v in x):
            if all(isinstance(v, list) and all(not isinstance(w, (dict, list)) for w in v) for v in x):
                return "[" + ", ".join(json.dumps(v, separators=(", ", ": ")) for v in x) + "]"
            return "[\n" + ",\n".join(pad + dump(v, indent + 1) for v in x) + "\n" + "  " * indent + "]"
        return json.dumps(x, separators=(", ", ": "))

    return dump(rounded(record), 0)


# ----------------------------------------------------------------------------------------------------------------
# The command line an experiment shares


def command(experiment):
    """The command that runs an experiment's module (its __main__ too), from the lab's folder.

    >>> command(sys.modules[__name__])
    'python3 -m experiments.recording'
    """
    return f"python3 -m {experiment.__spec__.name}"


def experiment_parser(description, record, reduced, rerun, until=None):
    """The command line every experiment shares: --check (reduced says what it runs), --out,
    --quiet, and --rerun (its choices and help given) with --seed and --until (until: its default, or None for the
    record's first curve point). The experiment adds the rest of its --rerun's options."""
    parser = argparse.ArgumentParser(description=description, allow_abbrev=False)
    parser.add_argument("--check", action="store_true",
                        help=f"run a reduced experiment ({reduced}: seconds) and check its shape; check the shape of"
                             f" the committed {record} and re-derive every summary in it from its per-run numbers;"
                             f" exit 1 with a one-line reason if anything is wrong")
    parser.add_argument("--rerun", default=None, **rerun)
    parser.add_argument("--seed", type=int, default=3, help="the seed of --rerun (default: %(default)s)")
    parser.add_argument("--until", type=int, default=until, metavar="STEP",
                        help="the step --rerun stops at: a step of the record's tuning curves (default: "
                             + ("%(default)s" if until else "the curve's first point after step 0")
                             + ", seconds of training)")
    parser.add_argument("--out", default=None, metavar="PATH",
                        help=f"where to write the record (default: {record} next to this script for the full run;"
                             f" nothing for --check)")
    parser.add_argument("--quiet", action="store_true", help="no line per run")
    parser.add_argument("--table", action="store_true",
                        help=f"print the tables of the committed {record} that its docs page shows (no training), and exit")
    return parser


def run_or_check(experiment, args):
    """The body of an experiment's main (experiment is its module, with FULL, REDUCED,
    RECORD_FILE, run_experiment and check_record): run the full plan and write its record; or with --check run the
    reduced plan and check the shape of its record, then the committed record's shape, deriving every summary in
    it again from its runs. Returns the exit status."""
    script, committed = command(experiment), experiment.RECORD_FILE
    machine.use_threads(1, script)  # one BLAS thread, as train.py's default --threads: the records' bits
    if args.table:
        if not committed.exists():
            print(f"error: --table needs {committed.name}; run {script} to make it", file=sys.stderr)
            return 2
        print(experiment.tables(json.loads(committed.read_text(encoding="utf-8"))))
        return 0
    plan = experiment.REDUCED if args.check else experiment.FULL
    report = (lambda line: None) if args.quiet else counted(experiment.runs_in(plan))  # noqa: E731
    record = experiment.run_experiment(plan, report=report)
    out = Path(args.out) if args.out else (None if args.check else committed)
    if out is not None:
        write_atomic(out, json_text(record) + "\n")
        print(f"wrote {out} ({record['seconds']:.0f} s, {record['cpu_seconds']:.0f} s of CPU)")
    if not args.check:
        return 0
    try:
        experiment.check_record(json.loads(json_text(record)), experiment.REDUCED)
    except ValueError as e:
        print(f"NOT OK: the reduced run's record: {e}")
        return 1
    if not committed.exists():
        print(f"NOT OK: {committed.name} is missing; run {script} to write it")
        return 1
    try:
        experiment.check_record(json.loads(committed.read_text(encoding="utf-8")), experiment.FULL)
    except (ValueError, KeyError, TypeError) as e:
        reason = str(e) if isinstance(e, ValueError) else f"a missing or malformed field ({e!r})"
        print(f"NOT OK: {committed.name}: {reason}; run {script} to rewrite it")
        return 1
    print(f"OK: the reduced run has the shape of the full one, and so has {committed.name}, whose every summary its"
          f" runs give again ({record['seconds']:.0f} s)")
    return 0


def counted(total):
    """A report for an experiment's lines, one a run: each printed after how many runs of total are done and about
    how long the rest will take, at the pace so far.

    >>> report = counted(4)
    >>> report("learned lr 0.01 seed 3: tune 0.34")  # doctest: +ELLIPSIS
    [1/4, about ... s left] learned lr 0.01 seed 3: tune 0.34
    """
    started, done = time.perf_counter(), 0

    def report(line):
        nonlocal done
        done += 1
        left = (time.perf_counter() - started) / done * (total - done)
        print(f"[{done}/{total}, about {left / 60:.0f} min left] {line}" if left >= 90 else
              f"[{done}/{total}, about {left:.0f} s left] {line}", flush=True)

    return report


def rerun_verdict(cell, got, recorded, record):
    """(ok, one line) of a rerun whose number got (cell says what it is) should be the record's: with the record's
    kernels and thread count the digits must be the same; with others they differ and the line says by how much
    (spread.py measures how far kernels move the one-block model; the spreads over seeds say what a difference
    means).

    >>> rerun_verdict("x", 1.5, 1.5, {"machine": "?"})[0]
    True
    """
    here = machine.blas(1)
    if got == recorded:
        return True, f"OK: {cell}: the same digits ({here})"
    if here == record["machine"]:
        return False, f"NOT OK: {cell}: other digits with the kernels and thread count of the record ({here})"
    return True, (f"OTHER MACHINE: {cell}: {abs(got - recorded):.2g} apart; the record was made with"
                  f" {record['machine']}, this run with {here}, which add in another order")


def rerun_records(parser, args, files):
    """The records --rerun reads (files: (path, the script that writes it) pairs), after refusing --check beside
    it; None, after saying which record is missing, if one is."""
    if args.check:
        parser.error("--rerun and --check are separate checks; pick one")
    for path, script in files:
        if not path.exists():
            print(f"error: --rerun needs {path.name}; run {script} to make it", file=sys.stderr)
            return None
    return [json.loads(path.read_text(encoding="utf-8")) for path, _ in files]


def rerun_step(parser, until, curve, seed, seeds, name):
    """The step --rerun stops at (until, or the curve's first point after step 0), after checking that it is a step
    of the recorded curve and the seed one of the record's; a bad one is a usage error naming it."""
    if seed not in seeds:
        parser.error(f"--seed {seed}: {name} has the seeds {seeds}")
    steps = [step for step, _ in curve][1:]
    until = steps[0] if until is None else until
    if until not in steps:
        parser.error(f"--until {until}: expected a step of the recorded tuning curves, {steps[0]} to {steps[-1]} in"
                     f" steps of {steps[1] - steps[0]}")
    return until
