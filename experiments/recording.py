"""What every experiment here shares: the settings of its runs as plain values, the learning-rate sweep that chooses
each one's rate on held-out data, the numbers across seeds, where its record came from, its record's text and
checks, and its command line (--check, --rerun, --table, and owning the --out it writes).

A plan's training settings are values of oneblock.settings.Settings ({"steps": 6000, "eval_every": 1000}); a record
keeps them as the train.py flags that give the same training (`flags`), so that a reader can run one cell by hand:

    >>> flags({"steps": 6000, "eval_every": 1000})
    ['--steps', '6000', '--eval-every', '1000']

The command line's exit statuses: 0 for a run or a check that is OK; 1 for a check whose answer is NOT OK (a record
that reads, but is not what this code gives: another format or settings, a run missing or out of place, a summary its
runs do not give); 2, with one line "error: ...", for what cannot be done at all: a bad option, an --out that cannot
be written, and a record that cannot be read as one (missing, not a regular file, too large, not UTF-8, not JSON, or
a field missing or of another type than the code writes).
"""

import argparse
import json
import math
import os
import statistics
import sys
import time
from contextlib import ExitStack, contextmanager
from functools import partial
from pathlib import Path
from types import SimpleNamespace

import numpy as np

import atomic
from atomic import holder, interruptible, interruption, read_whole, write_atomic  # noqa: F401  (the experiments' too)
from oneblock import checkpoint
from oneblock import data as data_files, floor, machine, numpy_fast, training
from oneblock.settings import TRAINING_SETTINGS, Settings, checked, model_config

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


def run_config(values, vocab):
    """The ModelConfig of the model that training with the settings values trains, over vocab tokens.

    >>> run_config({"blocks": 2, "positions": "rope"}, 96).describe()
    '2 blocks x 1 head, width 16, rope positions'
    """
    return model_config(checked(Settings(**values)), vocab)


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


def validation_loss(params, data, config):
    """The validation loss of trained weights (of the model config describes) as train.py computes it (each
    validation story of data from its start), through numpy_fast.py."""
    loss = partial(numpy_fast.sequence_loss, config=config)
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
    """(the runs at the chosen learning rate, which are reported; {"lrs", "chosen", and for "tune" and each of
    measures (a run's field name -> a function of the run), one across_seeds per learning rate}).

    >>> runs = [{"lr": 0.01, "tune": 0.5, "val": 0.4}, {"lr": 0.03, "tune": 0.6, "val": 0.3}]
    >>> chosen, sweep = sweep_summary(runs, [0.01, 0.03], {"val": lambda r: r["val"]})
    >>> chosen == runs[:1], sweep["val"][1]["mean"]
    (True, 0.3)
    """
    summary = {"lrs": lrs, "chosen": chosen_lr(runs, lrs)}
    for name, measure in {"tune": lambda r: r["tune"], **measures}.items():
        summary[name] = [across_seeds(measure(r) for r in runs if r["lr"] == lr) for lr in lrs]
    return [r for r in runs if r["lr"] == summary["chosen"]], summary


# ----------------------------------------------------------------------------------------------------------------
# Measures


def last_probs(params, inputs, config):
    """The next-token probabilities (len(inputs), V) at the last position of each input, in float64, of the model
    of params and config; inputs of equal length go through the model as one batch."""
    out = np.empty((len(inputs), config.vocab))  # (S, V)
    for n in sorted({len(ids) for ids in inputs}):
        rows = [i for i, ids in enumerate(inputs) if len(ids) == n]
        logits, _ = numpy_fast.forward(params, np.array([inputs[i] for i in rows]), config)  # (b, n, V)
        last = np.asarray(logits[:, -1], dtype=np.float64)  # (b, V)
        last -= last.max(axis=1, keepdims=True)
        p = np.exp(last)  # (b, V)
        out[rows] = p / p.sum(axis=1, keepdims=True)
    return out


def target_nats(logits, targets):
    """-log p of each target (B, T), in float64, under the next-token logits (B, T, V)."""
    logits = np.asarray(logits, dtype=np.float64)
    top = logits.max(axis=2, keepdims=True)  # (B, T, 1)
    log_z = np.log(np.exp(logits - top).sum(axis=2)) + top[:, :, 0]  # (B, T)
    return log_z - np.take_along_axis(logits, targets[:, :, None], axis=2)[:, :, 0]


def windows(tok, val_texts, length):
    """(inputs, targets), each (W, length): the validation stories one after another (a newline before the first,
    one after each), cut into consecutive windows; window w reads tokens w*length .. and predicts the next ones.

    >>> import bpe
    >>> tok = bpe.Tokenizer.load(Path(__file__).parent.parent / "tokenizer.json")
    >>> x, y = windows(tok, ["mia has a red hat."] * 10, 16)
    >>> x.shape, bool((x[0, 1:] == y[0, :-1]).all())
    ((4, 16), True)
    """
    stream = np.array(tok.encode("\n" + "".join(s + "\n" for s in val_texts)))  # (n,)
    count = (len(stream) - 1) // length
    starts = np.arange(count)[:, None] * length + np.arange(length)  # (W, length)
    return stream[starts], stream[starts + 1]


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


def provenance(experiment, plan, started, cpu):
    """The fields of an experiment's record (experiment: its module; plan: the one it ran) that say how it was made,
    in two dicts: its format and command, its wall-clock seconds since started (longer when the machine is busy),
    the CPU seconds of this process since cpu (about the wall-clock of a quiet machine: one BLAS thread) and the
    NumPy and kernels it computed with; and the SHA-256 of the corpus and the tokenizer it read."""
    made = {"format": experiment.FORMAT,
            "command": command(experiment) + (" --check" if plan is experiment.REDUCED else ""),
            "seconds": round(time.perf_counter() - started, 1), "cpu_seconds": round(time.process_time() - cpu, 1),
            "machine": machine.blas(1)}
    return made, {"corpus_sha256": checkpoint.sha256_file(data_files.CORPUS_FILE),
                  "tokenizer_sha256": checkpoint.sha256_file(data_files.TOKENIZER_FILE)}


def check_provenance(record, form):
    """Raise a ValueError unless record is of the format form and was made from this corpus.txt and
    tokenizer.json."""
    need(record.get("format") == form, f"format is {record.get('format')!r}, expected {form!r}")
    need(record.get("corpus_sha256") == checkpoint.sha256_file(data_files.CORPUS_FILE), "made from another corpus.txt")
    need(record.get("tokenizer_sha256") == checkpoint.sha256_file(data_files.TOKENIZER_FILE),
         "made with another tokenizer.json")


# ----------------------------------------------------------------------------------------------------------------
# A record's tables, checks and text


def spread_text(summary, digits=4, scale=1.0):
    """A summary across seeds as "mean ± sd (min to max)".

    >>> spread_text({"mean": 0.5, "std": 0.01, "min": 0.49, "max": 0.51})
    '0.5000 ± 0.0100 (0.4900 to 0.5100)'
    """
    m, sd, lo, hi = (summary[k] * scale for k in ("mean", "std", "min", "max"))
    return f"{m:.{digits}f} ± {sd:.{digits}f} ({lo:.{digits}f} to {hi:.{digits}f})"


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


def swept_runs(where, runs, lrs, seeds, steps):
    """The runs of one sweep in a record (where: its name there), each with its name, once their shape is checked: a
    run for each learning rate of lrs and each seed of seeds, in that order, each tuning curve ending at the last
    step (steps) with the run's tune. A ValueError names the first that is not."""
    need([(r["lr"], r["seed"]) for r in runs] == [(lr, seed) for lr in lrs for seed in seeds],
         f"{where}: expected a run for each learning rate of {lrs} and each seed of {seeds}")
    named = [(f"{where} lr {r['lr']:g} seed {r['seed']}", r) for r in runs]
    for name, r in named:
        need(r["tune_curve"][-1] == [steps, r["tune"]],
             f"{name}: the tuning curve does not end at the last step with tune")
    return named


def first_difference(derived, recorded, path):
    """Raise an error naming the first place (a path like schemes.rope.val_loss.mean) where recorded differs from
    derived: a ValueError where the values differ, a TypeError where the record has another shape there (other
    fields, another number of items, a value of another kind: text for a number, nothing for a table).

    >>> first_difference({"a": [1.0, 2.0]}, {"a": [1.0, 2.5]}, "x")
    Traceback (most recent call last):
    ...
    ValueError: x.a.1 is 2.5 in the record, but its runs give 2.0
    >>> first_difference({"a": [1.0, 2.0]}, {"a": "two"}, "x")
    Traceback (most recent call last):
    ...
    TypeError: x.a is a string in the record, where its runs give an array
    """
    if isinstance(derived, dict) and isinstance(recorded, dict):
        if list(derived) != list(recorded):
            raise TypeError(f"{path} has the fields {', '.join(recorded)[:80] or 'none'} in the record, where its"
                            f" runs give {', '.join(derived)[:80]}")
        for key in derived:
            first_difference(derived[key], recorded[key], f"{path}.{key}")
    elif isinstance(derived, list) and isinstance(recorded, list):
        if len(derived) != len(recorded):
            raise TypeError(f"{path} has {len(recorded)} items in the record, where its runs give {len(derived)}")
        for i, (a, b) in enumerate(zip(derived, recorded)):
            first_difference(a, b, f"{path}.{i}")
    elif json_kind(derived) != json_kind(recorded):
        raise TypeError(f"{path} is {json_kind(recorded)} in the record, where its runs give {json_kind(derived)}")
    elif derived != recorded or type(derived) is not type(recorded):
        raise ValueError(f"{path} is {json.dumps(recorded)[:80]} in the record, but its runs give"
                         f" {json.dumps(derived)[:80]}")


def json_kind(x):
    """What a value read from JSON is, in JSON's words.

    >>> json_kind(0.5), json_kind(3), json_kind(True), json_kind(None), json_kind({}), json_kind("x")
    ('a number', 'a number', 'true or false', 'null', 'an object', 'a string')
    """
    if isinstance(x, bool):
        return "true or false"
    if isinstance(x, (int, float)):
        return "a number"
    kinds = {dict: "an object", list: "an array", str: "a string", type(None): "null"}
    return kinds.get(type(x), type(x).__name__)


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
    """JSON with two-space indentation, but each list of plain numbers on one line; strict JSON, so a ValueError
    names the first number that is NaN or infinite (no record is ever written with one). Numbers are rounded first.

    >>> print(json_text({"a": [1, 2.5], "b": {"c": None, "curve": [[0, 4.56789012], [500, 0.5]]}}))
    {
      "a": [1, 2.5],
      "b": {
        "c": null,
        "curve": [[0, 4.56789], [500, 0.5]]
      }
    }
    >>> json_text({"runs": [{"val": float("nan")}]})
    Traceback (most recent call last):
    ...
    ValueError: runs[0].val is nan: a record holds finite numbers only
    """
    def dump(x, indent, path):
        pad = "  " * (indent + 1)
        if isinstance(x, dict) and x:
            items = [f"{pad}{json.dumps(k)}: {dump(v, indent + 1, f'{path}.{k}' if path else str(k))}"
                     for k, v in x.items()]
            return "{\n" + ",\n".join(items) + "\n" + "  " * indent + "}"
        if isinstance(x, list) and any(isinstance(v, (dict, list)) for v in x):
            if all(isinstance(v, list) and all(not isinstance(w, (dict, list)) for w in v) for v in x):
                return "[" + ", ".join(dump(v, indent, f"{path}[{k}]") for k, v in enumerate(x)) + "]"
            return "[\n" + ",\n".join(pad + dump(v, indent + 1, f"{path}[{k}]") for k, v in enumerate(x)) + "\n" \
                + "  " * indent + "]"
        try:
            return json.dumps(x, separators=(", ", ": "), allow_nan=False)
        except ValueError:  # (a NaN or an infinity in x: name the first)
            bad = next((k, v) for k, v in enumerate(x if isinstance(x, list) else [x])
                       if isinstance(v, float) and not math.isfinite(v))
            where = f"{path}[{bad[0]}]" if isinstance(x, list) else path
            raise ValueError(f"{where} is {bad[1]}: a record holds finite numbers only") from None

    return dump(rounded(record), 0, "")


# ----------------------------------------------------------------------------------------------------------------
# The command line an experiment shares

MOST_RECORD = 16 * 2**20  # bytes: the most read as a record (the committed ones are 20 to 140 KB)
OUT_FOLDER = Path("out")  # where a full run writes its record unless --out names a path: train.py's folder
RERUN_SEED = Settings.seed  # --rerun's default seed: train.py's, 3


def command(experiment):
    """The command that runs an experiment's module (its __main__ too), from the lab's folder.

    >>> command(sys.modules[__name__])
    'python3 -m experiments.recording'
    """
    return f"python3 -m {experiment.__spec__.name}"


def writes(script, record):
    """The command that rewrites the committed record (a path of experiments/) with script: the full run, told its
    path.

    >>> writes("python3 -m experiments.depth", Path("experiments/depth.json"))
    'python3 -m experiments.depth --out experiments/depth.json'
    """
    return f"{script} --out experiments/{Path(record).name}"


def given(what):
    """An argparse type: the value as typed, unless it is empty or blank, which is a usage error saying what was
    expected (an empty --out is not "no --out").

    >>> given("a file path")("out/x.json")
    'out/x.json'
    """
    def value(text):
        if not text.strip():
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}")
        return text

    return value


def whole(text):
    """An argparse type: a whole number of at least 1.

    >>> whole("2")
    2
    """
    if not text.strip().isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number of at least 1, got {text!r}")
    return int(text)


def experiment_parser(description, record, reduced, rerun, until=None):
    """The command line every experiment shares: --check (reduced says what it runs), --out, --quiet, --table, and
    --rerun (its choices, and its help: what it trains again, which the verdict's words end) with --seed and --until
    (until: its default, or None for the record's first curve point). The experiment adds the rest of its --rerun's
    options, each with the default None (parsed fills their defaults in)."""
    parser = argparse.ArgumentParser(description=description, allow_abbrev=False)
    parser.add_argument("--check", action="store_true",
                        help=f"run a reduced experiment ({reduced}: seconds) and check its shape; check the shape of"
                             f" the committed {record} and re-derive every summary in it from its per-run numbers;"
                             f" exit 1 (NOT OK) with a one-line reason if a record is not what this code gives, 2 if"
                             f" one cannot be read as a record")
    verdict = (" and check its tuning loss against the record's: the same digits with the record's kernels and thread"
               " count, else within the spread of the record's seeds at that step; exit 1 if not")
    parser.add_argument("--rerun", default=None, type=given(f"a {rerun['metavar'].lower()} of {record}"),
                        **{**rerun, "help": rerun["help"] + verdict})
    parser.add_argument("--seed", type=int, default=None, help=f"the seed of --rerun (default: {RERUN_SEED})")
    parser.add_argument("--until", type=int, default=None, metavar="STEP",
                        help="the step --rerun stops at: a step of the record's tuning curves (default: "
                             + (f"{until}" if until else "the curve's first point after step 0")
                             + ", seconds of training)")
    out_option(parser, record, f"{OUT_FOLDER / record} for the full run, nothing for --check")
    parser.add_argument("--quiet", action="store_true", help="no line per run")
    parser.add_argument("--table", action="store_true",
                        help=f"print the tables of the committed {record} that its docs page shows (no training),"
                             f" and exit")
    return parser


def out_option(parser, record, default):
    """Add --out, the path a run writes its record to (default: what the help says it is), to parser."""
    parser.add_argument("--out", default=None, metavar="PATH", type=given("a file path"),
                        help=f"where to write the record (default: {default}). The committed experiments/{record} is"
                             f" replaced only when --out names it, and a file that is not a record of this experiment"
                             f" never is; the run owns the path from its start, so a second run on it is refused")


def parsed(parser, argv, **rerun):
    """The arguments of an experiment's command line (argv, or sys.argv), checked as a whole before anything runs:
    at most one of --check, --rerun and --table; no option of --rerun without --rerun (it would be ignored: in a
    full run, the whole experiment run instead); no --out where nothing is written. rerun: the options that only
    --rerun reads besides --seed and --until, each with its default (and --until's, when it has one), filled in
    where not given."""
    args = parser.parse_args(argv)
    modes = [flag for flag, on in (("--check", args.check), ("--rerun", args.rerun is not None),
                                   ("--table", args.table)) if on]
    if len(modes) > 1:
        parser.error(f"{modes[0]} and {modes[1]} are separate commands; pick one")
    defaults = {"seed": RERUN_SEED, "until": None, **rerun}
    for name in defaults:
        flag, value = f"--{name.replace('_', '-')}", getattr(args, name)
        if value is not None and args.rerun is None:
            parser.error(f"{flag} {value} is an option of --rerun, which is not given"
                         + ("" if modes else ": without it this is the full experiment")
                         + f"; pass --rerun too, or leave {flag} out")
    if args.out is not None and modes and modes[0] != "--check":
        parser.error(f"--out {args.out}: {modes[0]} writes no record; leave --out out")
    for name, default in defaults.items():
        if getattr(args, name) is None:
            setattr(args, name, default)
    return args


def shown(path):
    """path as a message shows it: relative to the current folder when it lies inside it (experiments/depth.json,
    run from the lab's folder), else as it is.

    >>> shown(Path.cwd() / "experiments" / "depth.json") == str(Path("experiments", "depth.json"))
    True
    """
    path, here = Path(os.path.abspath(path)), Path(os.path.abspath(os.getcwd()))
    return str(path.relative_to(here)) if path.is_relative_to(here) else str(path)


# ----------------------------------------------------------------------------------------------------------------
# Reading a record


MALFORMED = (KeyError, IndexError, TypeError, AttributeError, StopIteration)  # a field missing or of another kind


def read_record(path, script=None, form=None):
    """The record at path, a JSON object, read once and whole through atomic.read_whole (only a regular file, and at
    most MOST_RECORD bytes); a ValueError in one line that names path and says what is wrong: missing, not a regular
    file, too large, not UTF-8, not JSON, not an object, or (form given) a record of another format. script: the
    command that writes it, for the hint that ends the line.

    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as d:
    ...     _ = (Path(d) / "r.json").write_bytes(b'{"format": "x v1"')
    ...     try:
    ...         read_record(Path(d) / "r.json", "x.py")
    ...     except ValueError as e:
    ...         print(str(e).replace(d, "D"))
    D/r.json is not JSON (cut short or edited? Expecting ',' delimiter at line 1, column 18); run x.py to rewrite it
    """
    path = Path(path)
    hint = f"; run {script} to rewrite it" if script else ""
    if not os.path.lexists(path):
        raise ValueError(f"there is no {shown(path)}" + (f"; run {script} to make it" if script else ""))
    try:
        raw = read_whole(path, "a record (a JSON file)", most=MOST_RECORD)
    except ValueError as e:
        raise ValueError(f"{e}{hint}") from None
    try:
        record = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as e:
        where = f"byte {raw[e.start]:#04x} at offset {e.start}"
        raise ValueError(f"{shown(path)} is not UTF-8 text ({where}){hint}") from None
    except json.JSONDecodeError as e:
        raise ValueError(f"{shown(path)} is not JSON (cut short or edited? {e.msg} at line {e.lineno}, column"
                         f" {e.colno}){hint}") from None
    except RecursionError:
        raise ValueError(f"{shown(path)} is not a record: JSON nested too deeply to read{hint}") from None
    if not isinstance(record, dict):
        raise ValueError(f"{shown(path)} holds {json_kind(record)}, not a record (a JSON object){hint}")
    if form is not None and record.get("format") != form:
        raise ValueError(f"{shown(path)} is not a record of this code: its format is"
                         f" {str(record.get('format'))[:60]!r}, expected {form!r}{hint}")
    return record


def malformed(path, e, script):
    """The line that refuses the record at path, which lacks a field its reader needs or has it of another kind (e:
    the exception reading it raised, one of MALFORMED).

    >>> malformed(Path("r.json"), KeyError("runs"), "x.py")
    "r.json does not have the shape of this code's record (no field 'runs'); run x.py to rewrite it"
    """
    if isinstance(e, KeyError) and e.args:
        what = f"no field {e.args[0]!r}"
    elif isinstance(e, StopIteration):
        what = "a run it should hold is not there"
    else:
        what = str(e) or type(e).__name__
    return f"{shown(path)} does not have the shape of this code's record ({what[:160]}); run {script} to rewrite it"


@contextmanager
def reading(path, script, also=()):
    """For a with-block that reads fields of the record at path: a field that is missing or of another kind than the
    code writes (MALFORMED, and the exceptions of also) becomes a ValueError in one line naming the record (malformed).
    Read every field a run needs this way before it trains, so that a damaged record stops it before any work."""
    try:
        yield
    except (*MALFORMED, *also) as e:
        raise ValueError(malformed(path, e, script)) from None


def field(x, kind, what):
    """x, when it is of kind, in JSON's words (json_kind: "a number", "a string", "an object", "an array"); else a
    TypeError naming what it is.

    >>> field(0.5, "a number", "tune")
    0.5
    >>> field("0.5", "a number", "tune")
    Traceback (most recent call last):
    ...
    TypeError: tune is a string, not a number
    """
    if json_kind(x) != kind:
        raise TypeError(f"{what} is {json_kind(x)}, not {kind}")
    return x


# ----------------------------------------------------------------------------------------------------------------
# Owning --out, and writing the record


def own(stack, typed, named, form, note, example, reads=()):
    """Make this run the owner of its record file, --out typed (named: whether the user gave it), until stack (an
    ExitStack) closes (atomic.own; reads: (words, path) pairs of the files the run reads, which --out must not be;
    example: a record's name, for the hint), and judge what is there while it owns it, so that no other run changes
    it between this look and the write: there must be none, or a record of this experiment (its format, form) that
    --out named. So a record is replaced only by a run of its experiment that was told its path (the committed one
    never by a run that was not), and a file that is not such a record (text, another experiment's record) never
    is. A ValueError, before anything is trained or written, says why. Returns the file to write: --out with its
    links followed."""

    def judge(out):
        if not os.path.lexists(out):
            return
        try:
            record = read_record(out)
        except ValueError as e:
            raise ValueError(atomic.not_its_kind(f"--out {typed}", "a record", e)) from None
        if record.get("format") != form:
            raise ValueError(f"--out {typed} holds a record of another experiment or version"
                             f" ({str(record.get('format'))[:60]!r}, not {form!r}); {atomic.NEVER_REPLACED}")
        if not named:
            raise ValueError(f"{typed} already holds a record of this experiment, an earlier run's; name it (--out"
                             f" {typed}) to replace it, or give another --out to keep it")

    return atomic.own(stack, typed, "--out", "a record file", example, judge, note, reads)[0]


def write_record(out, typed, record):
    """Write record's text (json_text) to out in one step (atomic.write_atomic: the file there is replaced whole, or
    kept as it was); a ValueError in one line when it cannot be written (a full disk, a folder made read-only
    meanwhile)."""
    try:
        text = json_text(record)
    except ValueError as e:
        raise ValueError(f"cannot write {typed}: {e}; this run's record is lost, and what was there is as it was")
    try:
        write_atomic(out, text + "\n")
    except OSError as e:
        raise ValueError(f"cannot write {typed} ({e.strerror or e}); what was there is as it was, and this run's"
                         f" record is lost: make room or fix the folder, then run again") from None


def wrote(typed, took, committed):
    """Print the line of a record written to --out typed (took: how long it took), which says too that committed,
    the committed record (None: not to be said), is as it was."""
    told = "" if committed is None else (f"; {shown(committed)}, the committed record, is as it was:"
                                         f" --out {shown(committed)} replaces it")
    print(f"wrote {typed} ({took}){told}")


def stopped(e, typed, runs=None):
    """The exit status of a run that the KeyboardInterrupt e stopped (Ctrl-C, or a signal that atomic.interruptible
    turned into one): 128 + the signal's number, after one line saying so and what was kept (typed: --out, or None;
    runs: the folder of a grid's results, which stay, or None)."""
    name, status = interruption(e)
    kept = f"; {typed} is as it was" if typed else ""
    if runs is not None:
        print(f"interrupted ({name}): no record written{kept}; the results of the runs that finished stay in"
              f" {shown(runs)}, and the same command continues from them", file=sys.stderr)
    else:
        print(f"interrupted ({name}): this run wrote nothing{kept}", file=sys.stderr)
    return status


# ----------------------------------------------------------------------------------------------------------------
# An experiment's main


def run_or_check(experiment, parser, args, argv=None, grid=None):
    """The body of an experiment's main (experiment: its module, with FULL, REDUCED, FORMAT, RECORD_FILE,
    run_experiment, check_record, tables, and rerun_cell and rerun; args: what parsed gave; argv: its arguments, for
    the note in the lock): --rerun (rerun_main), --table (print_tables), the full run written to --out (out/NAME.json
    unless given), or --check (the committed record checked, then the reduced run and its record's shape). A run owns
    its --out from its start (own). grid, for an experiment whose runs go through experiments/grid.py: a function of
    the path the record is written to (None for none) that gives run_experiment's further options (whose report
    lines then count the grid's tasks themselves). Returns the exit status."""
    script, committed = command(experiment), experiment.RECORD_FILE
    machine.use_threads(1, script)  # one BLAS thread, as train.py's default --threads: the records' bits
    if args.rerun is not None:
        return rerun_main(parser, args, experiment)
    if args.table:
        return print_tables(experiment)
    typed = args.out if args.out is not None else (None if args.check else str(OUT_FOLDER / committed.name))
    plan = experiment.REDUCED if args.check else experiment.FULL
    options = {}
    try:
        with interruptible(), ExitStack() as owned:
            options = grid(typed) if grid else {}  # (a grid's executor and the folder its results stay in)
            if typed is not None:
                reads = [("the committed record, which --check reads:", shown(committed))] if args.check else []
                out = own(owned, typed, args.out is not None, experiment.FORMAT,
                          holder(script, argv), committed.name, reads)
            verdict = committed_verdict(experiment) if args.check else None
            report = (lambda line: None) if args.quiet else print if grid else counted(experiment.runs_in(plan))
            record = experiment.run_experiment(plan, report=report, **options)
            if typed is not None:
                write_record(out, typed, record)
                wrote(typed, f"{record['seconds']:.0f} s, {record['cpu_seconds']:.0f} s of CPU",
                      None if args.check or args.out is not None else committed)
    except ValueError as e:  # (an --out refused, an unreadable committed record, a result refused, a full disk)
        print(f"error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as e:
        return stopped(e, typed, options.get("runs_dir"))
    if not args.check:
        return 0
    try:
        experiment.check_record(json.loads(json_text(record)), experiment.REDUCED)
    except ValueError as e:
        print(f"NOT OK: the reduced run's record: {e}")
        return 1
    ok, line = verdict
    if not ok:
        print(line)
        return 1
    print(f"OK: the reduced run has the shape of the full one, and so has {committed.name}, whose every summary its"
          f" runs give again ({record['seconds']:.0f} s)")
    return 0


def committed_verdict(experiment):
    """(ok, the NOT OK line or None) of --check on the committed record, read and checked before the reduced run; a
    record that cannot be read as one is a ValueError (the exit statuses: this module's docstring)."""
    committed = experiment.RECORD_FILE
    script = writes(command(experiment), committed)
    record = read_record(committed, script)
    try:
        experiment.check_record(record, experiment.FULL)
    except ValueError as e:
        return False, f"NOT OK: {committed.name}: {e}; run {script} to rewrite it"
    except MALFORMED as e:
        raise ValueError(malformed(committed, e, script)) from None
    return True, None


def print_tables(experiment):
    """--table: print the tables of the committed record (its module's tables); the exit status (2, after one line,
    when the record cannot be read as one)."""
    committed = experiment.RECORD_FILE
    script = writes(command(experiment), committed)
    try:
        record = read_record(committed, script, experiment.FORMAT)
        with reading(committed, script, also=(ValueError,)):  # (a format code refusing a value of another kind)
            text = experiment.tables(record)
    except ValueError as e:
        print(f"error: --table: {e}", file=sys.stderr)
        return 2
    print(text)
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


def rerun_verdict(cell, got, recorded, record, seeds):
    """(ok, one line) of a rerun whose number got (cell says what it is) should be the record's, recorded; seeds:
    the record's values of that number for each of its seeds (the same cell, step and learning rate but the seed).
    The rule and the line: docs/reproducibility.md's "A rerun on another machine".

    >>> rerun_verdict("x", 1.5, 1.5, {"machine": "?"}, [1.5, 1.6])[0]
    True
    >>> print(rerun_verdict("x", 1.55, 1.5, {"machine": "kernels K"}, [1.5, 1.7, 1.6])[1])  # doctest: +ELLIPSIS
    OK: x: 0.05 from the record, within the spread of its 3 seeds at this step (0.2: 1.5 to 1.7); the record ...
    >>> rerun_verdict("x", 1.75, 1.5, {"machine": "kernels K"}, [1.5, 1.7, 1.6])[0]
    False
    """
    here = machine.blas(machine.blas_threads())  # (1 thread under --rerun: rerun_main sets it)
    if got == recorded:
        return True, f"OK: {cell}: the same digits ({here})"
    if here == record["machine"]:
        return False, f"NOT OK: {cell}: other digits with the kernels and thread count of the record ({here})"
    lo, hi = min(seeds), max(seeds)
    distance, spread = abs(got - recorded), hi - lo
    ok = distance <= spread
    where = "within" if ok else "further than"
    many = f"{len(seeds)} seed{'s' if len(seeds) != 1 else ''}"
    return ok, (f"{'OK' if ok else 'NOT OK'}: {cell}: {distance:.2g} from the record, {where} the spread of its"
                f" {many} at this step ({spread:.2g}: {lo:.6g} to {hi:.6g}); the record was made with"
                f" {record['machine']}, this run with {here}")


def rerun_main(parser, args, experiment):
    """The body of an experiment's --rerun (experiment: its module): read its record whole, check the arguments
    against it before any training (the module's rerun_cell(parser, args, record) gives (rerun's keyword arguments
    besides seed and until, the recorded tuning curve whose steps --until may name); a bad --seed or --until is a
    usage error naming it), then train the cell again (the module's rerun(record, seed, until, **those)) and print
    the verdict's line. Exit 2, after one line, for a record that cannot be read or lacks what the rerun reads; else
    0 for OK and 1 for NOT OK."""
    path, form = experiment.RECORD_FILE, experiment.FORMAT
    writer = writes(command(experiment), path)
    try:
        record = read_record(path, writer, form)
        with reading(path, writer, also=(ValueError,)):
            arguments, curve = experiment.rerun_cell(parser, args, record)
            settings = record["settings"]
            seeds = [*settings["seeds"], *settings.get("split_seeds", [])]  # (scaling.py's: more where seeds split)
            if args.seed not in seeds:
                parser.error(f"--seed {args.seed}: {path.name} has the seeds {seeds}")
            steps = [step for step, _ in curve][1:]
            until = steps[0] if args.until is None else args.until
            if until not in steps:
                parser.error(f"--until {until}: expected a step of the recorded tuning curves, {steps[0]} to"
                             f" {steps[-1]} in steps of {steps[1] - steps[0]}")
        with interruptible():
            ok, line = experiment.rerun(record, seed=args.seed, until=until, **arguments)
    except ValueError as e:
        print(f"error: --rerun: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as e:
        return stopped(e, None)
    print(line)
    return 0 if ok else 1


def judged_rerun(experiment, record, runs_of, seed, until, train):
    """(ok, one line: rerun_verdict's) of an experiment's rerun (experiment: its module) of one cell of its record:
    runs_of(record) gives the record's runs of the cell, one a seed, at one learning rate; train(lr) trains the run
    of seed again at that rate up to step until (the full run's schedule, stopped early) and gives (the cell's name,
    its tuning loss there). Every field of the record it needs is read before it trains (reading)."""
    path = experiment.RECORD_FILE
    with reading(path, writes(command(experiment), path), also=(ValueError,)):
        runs = runs_of(record)
        run = next(r for r in runs if r["seed"] == seed)
        seeds = [field(dict(r["tune_curve"])[until], "a number", f"the tuning loss at step {until}") for r in runs]
        recorded = seeds[runs.index(run)]
        field(record["machine"], "a string", "machine")
    cell, got = train(run["lr"])
    got = rounded(got)
    return rerun_verdict(f"{cell} seed {seed} at step {until}: tune {got:.6g}, recorded {recorded:.6g}", got, recorded,
                         record, seeds)
