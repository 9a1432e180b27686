"""What positions are for: the same model trained with each position scheme, over several seeds, measured three ways.

    python3 positions.py            # the full experiment, about 7 minutes on 2 cores; writes positions.json
    python3 positions.py --check    # a reduced run (seconds) with the same shape, and a shape check of positions.json

Each run is train.py's default training (`train.train_model`, 12,000 steps of 16 x 64 tokens) with only
--positions and --seed changed: the same data, budget and settings for every scheme. The schemes (numpy_model.py):
learned (a trained row per position), none (a bag of tokens), sinusoidal (a fixed sine/cosine table added to the
embeddings) and rope (q and k rotated by position inside attention). After each run, through numpy_fast.py as the
training itself:

1. Validation loss: train.py's own (each validation story read from its start), next to the floor of the same
   stories (floor.py): no model can expect to go below it.
2. The order probe: each validation story ends "now Y has ...", and who Y is depends on word order ("mia gives the
   hat to ava" is not "ava gives the hat to mia"). The model reads the story up to "now"; the probe records whether
   the name it finds most likely next (over the whole vocabulary) is Y, and the probability it gives Y.
3. Length extrapolation: the validation stories, one after another, cut into windows of 128 tokens (twice the
   training length), and the loss at each position 0..127 averaged over the windows. learned cannot read them: it
   has no row past 64, so it is measured on the first 64 positions of the same windows and records why not more.

Every number is the mean over seeds with its spread (sample standard deviation, min, max, and each seed's value).
Same code, same machine: the same record, bit for bit (the runs are deterministic), except the "seconds" field.
"""

import argparse
import json
import math
import statistics
import sys
import time
from pathlib import Path

import machine

if "numpy" not in sys.modules:  # BLAS reads its thread count when NumPy is first imported
    machine.set_blas_threads(1)  # one thread, as train.py's default --threads (and the same bits as its runs)

np = machine.need("numpy", "positions.py")

import checkpoint  # noqa: E402
import make_corpus  # noqa: E402
import numpy_fast  # noqa: E402
import numpy_model  # noqa: E402
import spread  # noqa: E402
import train  # noqa: E402
from atomic import write_atomic  # noqa: E402

# ----------------------------------------------------------------------------------------------------------------
# Settings

HERE = Path(__file__).resolve().parent
RECORD_FILE = HERE / "positions.json"
FORMAT = "one-block positions experiment v2"  # the record's "format" field
SCHEMES = numpy_model.SCHEMES  # learned, none, sinusoidal, rope
FULL = {"seeds": [3, 4, 5, 6, 7], "train_args": []}  # train.py's defaults; seed 3 is `python3 train.py` itself
REDUCED = {"seeds": [3, 4], "train_args": ["--steps", "150", "--batch", "8", "--warmup", "20"]}  # --check: seconds
WINDOW = 128  # tokens per extrapolation window: twice the 64 positions the models train on
TRAINED = train.MODEL["max_len"]  # 64: the positions every run trains on, and the rows learned has


# ----------------------------------------------------------------------------------------------------------------
# Measurements of one trained model


def probe_items(tok, val_texts):
    """(inputs, answers, shapes) for the order probe: per validation story, the newline and the story's tokens up to
    and including " now"; the token of the name that follows (Y, read off make_corpus.parse_story, not off the
    text); the story's shape.

    >>> import bpe
    >>> tok = bpe.Tokenizer.load(HERE / "tokenizer.json")
    >>> story = "mia has a red hat. mia gives the hat to ava. now ava has the hat."
    >>> inputs, answers, shapes = probe_items(tok, [story])
    >>> tok.decode(inputs[0][-3:]), tok.decode([answers[0]]), shapes
    (' ava. now', ' ava', ['gift'])
    """
    now = tok.encode(" now")
    if len(now) != 1:
        raise ValueError(f"' now' is {len(now)} tokens in this tokenizer; the probe expects one")
    inputs, answers, shapes = [], [], []
    for text in val_texts:
        shape, choices = make_corpus.parse_story(text)
        ids = tok.encode("\n" + text)  # (n,) the newline before the story, as in the corpus
        cut = len(ids) - 1 - ids[::-1].index(now[0])  # the last " now"
        name = tok.encode(" " + choices["z" if shape == "pass" else "y"])  # who has the thing now
        if len(name) != 1 or ids[cut + 1] != name[0]:
            raise ValueError(f"story {text!r}: expected one name token after ' now'")
        inputs.append(ids[:cut + 1])
        answers.append(name[0])
        shapes.append(shape)
    return inputs, answers, shapes


def last_probs(params, inputs, scheme):
    """The next-token probabilities (len(inputs), V) at the last position of each input, in float64; inputs of
    equal length go through the model as one batch."""
    out = np.empty((len(inputs), params["tok_emb"].shape[0]))  # (S, V)
    for n in sorted({len(ids) for ids in inputs}):
        rows = [i for i, ids in enumerate(inputs) if len(ids) == n]
        logits, _ = numpy_fast.forward(params, np.array([inputs[i] for i in rows]), scheme)  # (b, n, V)
        last = np.asarray(logits[:, -1], dtype=np.float64)  # (b, V)
        last -= last.max(axis=1, keepdims=True)
        p = np.exp(last)  # (b, V)
        out[rows] = p / p.sum(axis=1, keepdims=True)
    return out


def probe(params, scheme, items):
    """{"accuracy", "mean_probability", "accuracy_by_shape"}: the share of stories where the right name is the most
    likely next token, and the mean probability it gets."""
    inputs, answers, shapes = items
    p = last_probs(params, inputs, scheme)  # (S, V)
    answers = np.array(answers)  # (S,)
    right = p.argmax(axis=1) == answers  # (S,)
    by_shape = {shape: float(np.mean([r for r, s in zip(right, shapes) if s == shape]))
                for shape in sorted(set(shapes))}
    return {"accuracy": float(right.mean()), "mean_probability": float(p[np.arange(len(answers)), answers].mean()),
            "accuracy_by_shape": by_shape}


def windows(tok, val_texts, length):
    """(inputs, targets), each (W, length): the validation stories one after another (a newline before the first,
    one after each), cut into consecutive windows; window w reads tokens w*length .. and predicts the next ones.

    >>> import bpe
    >>> x, y = windows(bpe.Tokenizer.load(HERE / "tokenizer.json"), ["mia has a red hat."] * 10, 16)
    >>> x.shape, bool((x[0, 1:] == y[0, :-1]).all())
    ((4, 16), True)
    """
    stream = np.array(tok.encode("\n" + "".join(s + "\n" for s in val_texts)))  # (n,)
    count = (len(stream) - 1) // length
    starts = np.arange(count)[:, None] * length + np.arange(length)  # (W, length)
    return stream[starts], stream[starts + 1]


def loss_by_position(params, scheme, inputs, targets):
    """The mean -log p of the target at each position over the windows, (T,) float64; for learned only the first
    64 positions, after recording that the model refuses the whole window. Returns (losses, refusal or None)."""
    refusal = None
    try:
        numpy_fast.forward(params, inputs[:1], scheme)
    except ValueError as e:  # learned: no row past 64
        refusal = str(e)
        inputs, targets = inputs[:, :TRAINED], targets[:, :TRAINED]
    logits, _ = numpy_fast.forward(params, inputs, scheme)  # (W, T, V)
    logits = np.asarray(logits, dtype=np.float64)
    top = logits.max(axis=2, keepdims=True)  # (W, T, 1)
    log_z = np.log(np.exp(logits - top).sum(axis=2)) + top[:, :, 0]  # (W, T)
    picked = np.take_along_axis(logits, targets[:, :, None], axis=2)[:, :, 0]  # (W, T)
    return (log_z - picked).mean(axis=0), refusal  # (T,)


# ----------------------------------------------------------------------------------------------------------------
# The experiment


def across_seeds(values):
    """Mean, sample standard deviation, min, max and the values themselves (one per seed).

    >>> across_seeds([1.0, 2.0, 3.0])
    {'mean': 2.0, 'std': 1.0, 'min': 1.0, 'max': 3.0, 'by_seed': [1.0, 2.0, 3.0]}
    """
    values = [float(v) for v in values]
    std = statistics.stdev(values) if len(values) > 1 else 0.0
    return {"mean": statistics.fmean(values), "std": std, "min": min(values), "max": max(values), "by_seed": values}


def training_settings(plan):
    """The settings every run of plan trains with (train.py's, as its checkpoints record them), but the scheme and
    the seed.

    >>> training_settings(FULL)["steps"], training_settings(REDUCED)["batch"]
    (12000, 8)
    """
    parser = train.build_parser()
    s = parser.parse_args(plan["train_args"])
    train.check_settings(parser, s)
    return {name: getattr(s, name) for name in train.TRAINING_SETTINGS if name not in ("positions", "seed")}


def run_experiment(plan, report=print):
    """Train every scheme with every seed of plan and measure each run; return the record (a dict): the raw numbers
    of every run under "runs", and under "schemes" their summaries, derived from those raw numbers only."""
    started = time.perf_counter()
    data, runs = None, {scheme: [] for scheme in SCHEMES}
    for scheme in SCHEMES:
        for seed in plan["seeds"]:
            t0 = time.perf_counter()
            argv = [*plan["train_args"], "--positions", scheme, "--seed", str(seed)]
            params, history, data = train.train_model(argv, data=data)
            if scheme == SCHEMES[0] and seed == plan["seeds"][0]:
                items = probe_items(data.tok, data.val_texts)
                inputs, targets = windows(data.tok, data.val_texts, WINDOW)
            by_position, refusal = loss_by_position(params, scheme, inputs, targets)
            curve = [[h["step"], h["val"]] for h in history]
            run = rounded({"seed": seed, "val": history[-1]["val"], "val_curve": curve,
                           "probe": probe(params, scheme, items), "loss_by_position": by_position.tolist(),
                           "refusal": refusal})
            runs[scheme].append(run)
            report(f"{scheme:>10} seed {seed}: val {run['val']:.4f} | probe {run['probe']['accuracy']:.3f}"
                   f" (p {run['probe']['mean_probability']:.3f}) | {time.perf_counter() - t0:.1f} s")
    floor = rounded({"validation_nats_per_token": data.val_floor, "corpus_nats_per_token": data.corpus_floor,
                     "uniform_nats_per_token": math.log(data.vocab)})
    return {
        "format": FORMAT,
        "command": "python3 positions.py" + (" --check" if plan is REDUCED else ""),
        "seconds": round(time.perf_counter() - started, 1),
        "machine": machine.blas(1),
        "settings": {"seeds": plan["seeds"], "train_args": plan["train_args"], "training": training_settings(plan),
                     "window": WINDOW, "validation_stories": len(data.val_texts),
                     "probe_stories": len(items[0]), "extrapolation_windows": len(inputs)},
        "corpus_sha256": checkpoint.sha256_file(train.CORPUS_FILE),
        "tokenizer_sha256": checkpoint.sha256_file(train.TOKENIZER_FILE),
        "floor": floor,
        "schemes": summarise(runs, floor),
        "runs": runs,
    }


def summarise(runs, floor):
    """Per scheme, the summaries of its runs: every number a function of the runs' raw numbers (and the floor)
    alone, computed with exactly rounded sums (statistics.fmean), so that positions.py --check re-derives the same
    digits on any machine."""
    ranges = {"0_63": (0, TRAINED), "32_63": (TRAINED // 2, TRAINED), "64_127": (TRAINED, WINDOW)}
    schemes = {}
    for scheme, rs in runs.items():
        curves = [r["loss_by_position"] for r in rs]  # (seeds, T)
        shapes = rs[0]["probe"]["accuracy_by_shape"]
        schemes[scheme] = {
            "val_loss": across_seeds(r["val"] for r in rs),
            "gap_to_floor": statistics.fmean(r["val"] for r in rs) - floor["validation_nats_per_token"],
            "probe": {
                "accuracy": across_seeds(r["probe"]["accuracy"] for r in rs),
                "mean_probability": across_seeds(r["probe"]["mean_probability"] for r in rs),
                "accuracy_by_shape": {shape: statistics.fmean(r["probe"]["accuracy_by_shape"][shape] for r in rs)
                                      for shape in shapes},
            },
            "extrapolation": {
                "reads_past_64": rs[0]["refusal"] is None,
                "why_not": rs[0]["refusal"],
                "mean_loss": {name: (across_seeds(statistics.fmean(c[a:b]) for c in curves) if b <= len(curves[0])
                                     else None) for name, (a, b) in ranges.items()},
                "loss_by_position": [statistics.fmean(column) for column in zip(*curves)],
            },
        }
    return rounded(schemes)


# ----------------------------------------------------------------------------------------------------------------
# The record's shape, and writing it


def check_record(record, plan):
    """Raise a ValueError naming the first field that does not have the shape a run of plan gives, or the first
    summary that differs from the one derived again from the record's raw per-run numbers."""
    def need(ok, what):
        if not ok:
            raise ValueError(what)

    need(record.get("format") == FORMAT, f"format is {record.get('format')!r}, expected {FORMAT!r}")
    settings = record.get("settings", {})
    need(settings.get("seeds") == plan["seeds"] and settings.get("train_args") == plan["train_args"],
         f"settings {settings} are not this code's ({plan})")
    need(record.get("corpus_sha256") == checkpoint.sha256_file(train.CORPUS_FILE), "made from another corpus.txt")
    need(record.get("tokenizer_sha256") == checkpoint.sha256_file(train.TOKENIZER_FILE),
         "made with another tokenizer.json")
    need(list(record.get("runs", {})) == list(SCHEMES), f"runs are not of the schemes {list(SCHEMES)}")
    floor = record["floor"]["validation_nats_per_token"]
    for scheme, rs in record["runs"].items():
        need([r["seed"] for r in rs] == plan["seeds"], f"{scheme}: expected a run for each seed of {plan['seeds']}")
        for r in rs:
            name = f"{scheme} seed {r['seed']}"
            need(r["val"] > floor - 0.05, f"{name}: val {r['val']} is far below the floor {floor}")
            need(r["val_curve"][-1] == [training_settings(plan)["steps"], r["val"]],
                 f"{name}: the validation curve does not end at the last step with val")
            need(0 <= r["probe"]["accuracy"] <= 1 and 0 <= r["probe"]["mean_probability"] <= 1,
                 f"{name}: probe numbers outside [0, 1]")
            need(sorted(r["probe"]["accuracy_by_shape"]) == sorted(make_corpus.SHAPES),
                 f"{name}: probe accuracy_by_shape is not by the corpus's shapes")
            need(len(r["loss_by_position"]) == (TRAINED if scheme == "learned" else WINDOW),
                 f"{name}: loss_by_position has {len(r['loss_by_position'])} positions")
            need(all(math.isfinite(x) and x > 0 for x in r["loss_by_position"]), f"{name}: a loss is not positive")
            if scheme == "learned":
                need("longer than the 64 positions the model has" in r["refusal"],
                     f"{name}: expected the refusal of {WINDOW} tokens")
            else:
                need(r["refusal"] is None, f"{name}: refused the windows: {r['refusal']}")
    first_difference(summarise(record["runs"], record["floor"]), record.get("schemes"), "schemes")


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
# A partial rerun: one cell of the record, trained again


def rerun(record, kernel_spread, scheme, seed, until):
    """Train scheme with seed and the full settings up to step until (the same schedule as the full run, stopped
    early) and compare the validation loss there with the record's curve. Returns (ok, one line saying so).

    The same machine, kernels and threads give the recorded digits exactly; another machine, a loss within the
    spread that spread.json measured for this scheme at this step across OpenBLAS kernel families."""
    run = {r["seed"]: r for r in record["runs"][scheme]}[seed]
    recorded = dict(run["val_curve"])[until]
    tolerance = spread.tolerance(kernel_spread, scheme, until)
    argv = [*FULL["train_args"], "--positions", scheme, "--seed", str(seed)]
    _, history, _ = train.train_model(argv, until=until)
    got = rounded(history[-1]["val"])
    cell = f"{scheme} seed {seed} at step {until}: val {got:.6g}, recorded {recorded:.6g}"
    if got == recorded:
        return True, f"OK: {cell}: the same digits (the kernels and thread count of the record)"
    within = abs(got - recorded) <= tolerance
    measured = (f"the spread across kernel families at this step is {tolerance:.2g} (spread.json, seed"
                f" {spread.SEED})")
    return within, f"{'OK' if within else 'NOT OK'}: {cell}: {'within' if within else 'outside'} {measured}"


# ----------------------------------------------------------------------------------------------------------------
# Command line


def main(argv=None):
    parser = argparse.ArgumentParser(description="Train the model with each position scheme over several seeds and"
                                                 " record validation loss, an order probe and length extrapolation.")
    parser.add_argument("--check", action="store_true",
                        help="run a reduced experiment (2 seeds, 150 steps: seconds) and check its shape; check the"
                             " shape of the committed positions.json and re-derive every summary in it from its"
                             " per-run numbers; exit 1 with a one-line reason if anything is wrong")
    parser.add_argument("--rerun", choices=SCHEMES, default=None, metavar="SCHEME",
                        help="train one cell of positions.json again (with --seed, up to --until) and check its"
                             " validation loss against the record, within the spread across machines that"
                             " spread.json records; exit 1 if it is outside")
    parser.add_argument("--seed", type=int, default=3, help="the seed of --rerun (default: %(default)s)")
    parser.add_argument("--until", type=int, default=1000, metavar="STEP",
                        help="the step --rerun stops at: a step of the record's validation curves (default:"
                             " %(default)s, seconds of training)")
    parser.add_argument("--out", default=None, metavar="PATH",
                        help="where to write the record (default: positions.json next to this script for the full"
                             " run; nothing for --check)")
    parser.add_argument("--quiet", action="store_true", help="no line per run")
    args = parser.parse_args(argv)
    if args.rerun:
        return main_rerun(parser, args)
    plan = REDUCED if args.check else FULL
    report = (lambda line: None) if args.quiet else (lambda line: print(line, flush=True))  # noqa: E731
    record = run_experiment(plan, report=report)
    out = Path(args.out) if args.out else (None if args.check else RECORD_FILE)
    if out is not None:
        write_atomic(out, json_text(record) + "\n")
        print(f"wrote {out} ({record['seconds']:.0f} s)")
    if args.check:
        try:
            check_record(json.loads(json_text(record)), REDUCED)
        except ValueError as e:
            print(f"NOT OK: the reduced run's record: {e}")
            return 1
        if not RECORD_FILE.exists():
            print(f"NOT OK: {RECORD_FILE.name} is missing; run python3 positions.py to write it")
            return 1
        try:
            check_record(json.loads(RECORD_FILE.read_text(encoding="utf-8")), FULL)
        except (ValueError, KeyError, TypeError) as e:
            reason = str(e) if isinstance(e, ValueError) else f"a missing or malformed field ({e!r})"
            print(f"NOT OK: {RECORD_FILE.name}: {reason}; run python3 positions.py to rewrite it")
            return 1
        print(f"OK: the reduced run has the shape of the full one, and so has {RECORD_FILE.name}, whose every"
              f" summary its runs give again"
              f" ({record['seconds']:.0f} s)")
    return 0


def main_rerun(parser, args):
    """positions.py --rerun: check the arguments against the records before training, then rerun the cell."""
    if args.check:
        parser.error("--rerun and --check are separate checks; pick one")
    records = []
    for path, command in ((RECORD_FILE, "positions.py"), (spread.RECORD_FILE, "spread.py")):
        if not path.exists():
            print(f"error: --rerun needs {path.name}; run python3 {command} to make it", file=sys.stderr)
            return 2
        records.append(json.loads(path.read_text(encoding="utf-8")))
    record, kernel_spread = records
    seeds = [r["seed"] for r in record["runs"][args.rerun]]
    if args.seed not in seeds:
        parser.error(f"--seed {args.seed}: {RECORD_FILE.name} has the seeds {seeds}")
    steps = [step for step, _ in record["runs"][args.rerun][0]["val_curve"]][1:]
    if args.until not in steps:
        parser.error(f"--until {args.until}: expected a step of the recorded validation curves, {steps[0]} to"
                     f" {steps[-1]} in steps of {steps[1] - steps[0]}")
    ok, line = rerun(record, kernel_spread, args.rerun, args.seed, args.until)
    print(line)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
