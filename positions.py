"""What positions are for: the same model trained with each position scheme, over several seeds and a small sweep of
learning rates, measured three ways.

    python3 positions.py            # the full experiment, about 25 minutes on 2 cores; writes positions.json
    python3 positions.py --check    # a reduced run (seconds) with the same shape, and a shape check of positions.json

Each run is train.py's default training (`train.train_model`, 12,000 steps of 16 x 64 tokens) with only
--positions, --seed and the learning rate changed: the same data, budget and settings for every scheme. The schemes
(numpy_model.py): learned (a trained row per position), none (a bag of tokens), sinusoidal (a fixed sine/cosine table
added to the embeddings) and rope (q and k rotated by position inside attention).

A fair comparison gives every scheme its best learning rate, not the one tuned for learned positions. So every
scheme trains with each peak learning rate of SWEEP (the same few for all, each decaying to a tenth of itself, as
train.py's 0.01 does to 0.001) and every seed, on the training stories without the last SWEEP["tune_stories"] of
them; the loss on those held-out stories, averaged over the seeds, chooses the scheme's learning rate, and the runs
at that rate are the ones reported, on the validation stories, which no choice has read (`sweep_data`,
`chosen_lr`). depth.py chooses its learning rates the same way. After each run, through numpy_fast.py as the
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
from functools import partial
from pathlib import Path
from types import SimpleNamespace

import machine

np = machine.numpy_like_train("positions.py")  # one BLAS thread, as train.py's default --threads

import checkpoint  # noqa: E402
import floor  # noqa: E402
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
FORMAT = "one-block positions experiment v3"  # the record's "format" field
SCHEMES = numpy_model.SCHEMES  # learned, none, sinusoidal, rope
FULL = {"seeds": [3, 4, 5, 6, 7], "train_args": []}  # train.py's defaults, but the learning rate
REDUCED = {"seeds": [3, 4], "train_args": ["--steps", "150", "--batch", "8", "--warmup", "20"]}  # --check: seconds
SWEEP = {"lrs": [0.003, 0.01, 0.03], "tune_stories": 300}  # peak learning rates, and the stories that choose one
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
    """The settings every run of plan trains with (train.py's, as its checkpoints record them), but the scheme, the
    seed and the learning rates.

    >>> training_settings(FULL)["steps"], training_settings(REDUCED)["batch"]
    (12000, 8)
    """
    parser = train.build_parser()
    s = parser.parse_args(plan["train_args"])
    train.check_settings(parser, s)
    return {name: getattr(s, name) for name in train.TRAINING_SETTINGS
            if name not in ("positions", "seed", "lr", "min_lr")}


# ----------------------------------------------------------------------------------------------------------------
# The learning-rate sweep, shared with depth.py


def lr_args(lr):
    """train.py's arguments for a peak learning rate of the sweep: the warm-up rises to lr, the cosine ends at
    lr / 10 (as train.py's default 0.01 ends at 0.001).

    >>> lr_args(0.003)
    ['--lr', '0.003', '--min-lr', '0.0003']
    """
    return ["--lr", f"{lr:g}", "--min-lr", f"{lr / 10:g}"]


def sweep_data(train_args, tune_stories):
    """(tuning data, validation data) for train.train_model runs with train_args. The validation data is
    train.prepare's. The tuning data trains on the training stories without their last tune_stories, and holds
    those in the place of the validation stories, so that fit's validation loss is the loss on them: the runs of
    each learning rate are judged on stories none of them trains on, and the validation stories stay unread until
    the chosen runs are reported on them."""
    parser = train.build_parser()
    s = parser.parse_args(train_args)
    train.check_settings(parser, s)
    full = train.prepare(s)
    stream, texts, ids = train.load_data(full.tok, s.val_stories + tune_stories, s.seq_len)
    held_texts, held_ids = texts[:tune_stories], ids[:tune_stories]  # the last stories before the validation ones
    nats, tokens = floor.story_floor(held_texts, full.tok)
    tuning = SimpleNamespace(**{**vars(full), "stream": np.array(stream), "val_texts": held_texts,
                                "val_ids": held_ids, "val_tokens": tokens, "val_floor": nats / tokens})
    return tuning, full


def validation_loss(params, data, positions, heads=1):
    """The validation loss of trained weights as train.py computes it (each validation story of data from its
    start), through numpy_fast.py."""
    loss = partial(numpy_fast.sequence_loss, positions=positions, heads=heads)
    return train.story_nats(loss, params, data.val_ids) / data.val_tokens


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
# The experiment


def run_experiment(plan, report=print):
    """Train every scheme with every learning rate of SWEEP and every seed of plan and measure each run; return the
    record (a dict): the raw numbers of every run under "runs", and under "schemes" their summaries, derived from
    those raw numbers only."""
    started, cpu = time.perf_counter(), time.process_time()
    tuning, full = sweep_data(plan["train_args"], SWEEP["tune_stories"])
    items = probe_items(full.tok, full.val_texts)
    inputs, targets = windows(full.tok, full.val_texts, WINDOW)
    runs = {scheme: [] for scheme in SCHEMES}
    for scheme in SCHEMES:
        for lr in SWEEP["lrs"]:
            for seed in plan["seeds"]:
                t0 = time.perf_counter()
                argv = [*plan["train_args"], *lr_args(lr), "--positions", scheme, "--seed", str(seed)]
                params, history, _ = train.train_model(argv, data=tuning)
                by_position, refusal = loss_by_position(params, scheme, inputs, targets)
                run = rounded({"lr": lr, "seed": seed, "tune": history[-1]["val"],
                               "tune_curve": [[h["step"], h["val"]] for h in history],
                               "val": validation_loss(params, full, scheme), "probe": probe(params, scheme, items),
                               "loss_by_position": by_position.tolist(), "refusal": refusal})
                runs[scheme].append(run)
                report(f"{scheme:>10} lr {lr:<6g} seed {seed}: tune {run['tune']:.4f} | val {run['val']:.4f} |"
                       f" probe {run['probe']['accuracy']:.3f} | {time.perf_counter() - t0:.1f} s")
    floor_ = rounded({"validation_nats_per_token": full.val_floor, "tuning_nats_per_token": tuning.val_floor,
                      "corpus_nats_per_token": full.corpus_floor, "uniform_nats_per_token": math.log(full.vocab)})
    made, sources = provenance(started, cpu)
    return {
        "format": FORMAT,
        "command": "python3 positions.py" + (" --check" if plan is REDUCED else ""),
        **made,
        "settings": {"seeds": plan["seeds"], "train_args": plan["train_args"], "training": training_settings(plan),
                     "sweep": SWEEP, "window": WINDOW, "validation_stories": len(full.val_texts),
                     "probe_stories": len(items[0]), "extrapolation_windows": len(inputs)},
        **sources,
        "floor": floor_,
        "schemes": summarise(runs, floor_),
        "runs": runs,
    }


def provenance(started, cpu):
    """The fields of an experiment's record (this file's or depth.py's) that say how it was made, in two dicts: its
    wall-clock seconds since started (longer when the machine is busy), the CPU seconds of this process since cpu
    (about the wall-clock of a quiet machine: one BLAS thread) and the NumPy and kernels it computed with; and the
    SHA-256 of the corpus and the tokenizer it read."""
    made = {"seconds": round(time.perf_counter() - started, 1), "cpu_seconds": round(time.process_time() - cpu, 1),
            "machine": machine.blas(1)}
    return made, {"corpus_sha256": checkpoint.sha256_file(train.CORPUS_FILE),
                  "tokenizer_sha256": checkpoint.sha256_file(train.TOKENIZER_FILE)}


def check_provenance(record):
    """Raise a ValueError unless record was made from this corpus.txt and tokenizer.json."""
    need(record.get("corpus_sha256") == checkpoint.sha256_file(train.CORPUS_FILE), "made from another corpus.txt")
    need(record.get("tokenizer_sha256") == checkpoint.sha256_file(train.TOKENIZER_FILE),
         "made with another tokenizer.json")


def summarise(runs, floor):
    """Per scheme, the sweep (tuning and validation loss of each learning rate across seeds, and the one chosen) and
    the summaries of the runs at the chosen rate: every number a function of the runs' raw numbers (and the floor)
    alone, computed with exactly rounded sums (statistics.fmean), so that positions.py --check re-derives the same
    digits on any machine."""
    ranges = {"0_63": (0, TRAINED), "32_63": (TRAINED // 2, TRAINED), "64_127": (TRAINED, WINDOW)}
    schemes = {}
    for scheme, all_runs in runs.items():
        sweep = sweep_summary(all_runs, SWEEP["lrs"], {"val": lambda r: r["val"]})
        rs = [r for r in all_runs if r["lr"] == sweep["chosen"]]  # the runs reported
        curves = [r["loss_by_position"] for r in rs]  # (seeds, T)
        shapes = rs[0]["probe"]["accuracy_by_shape"]
        schemes[scheme] = {
            "sweep": sweep,
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
# The README's tables, from a record


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


def tables(record):
    """The README's table of positions.json: per scheme, the sweep and the runs at its chosen learning rate."""
    lrs = " / ".join(f"{lr:g}" for lr in record["settings"]["sweep"]["lrs"])
    lines = [table_row(["scheme", f"tuning loss at lr {lrs}", "validation loss, mean ± sd (min to max)",
                        "gap to floor", "probe accuracy, % (min to max)", "mean probability of the right name",
                        "loss at positions 32 to 63", "loss at positions 64 to 127"]),
             table_row(["---"] * 8)]
    for scheme, summary in record["schemes"].items():
        probe, loss = summary["probe"], summary["extrapolation"]["mean_loss"]
        accuracy = probe["accuracy"]
        lines.append(table_row([
            scheme, sweep_text(summary["sweep"]), spread_text(summary["val_loss"]), f"{summary['gap_to_floor']:+.4f}",
            f"{accuracy['mean']:.1%} ({accuracy['min']:.0%} to {accuracy['max']:.0%})",
            f"{probe['mean_probability']['mean']:.3f}", spread_text(loss["32_63"], 3),
            spread_text(loss["64_127"], 3) if loss["64_127"] else "cannot read them: no row past 63"]))
    return "\n".join(lines)


# ----------------------------------------------------------------------------------------------------------------
# The record's shape, and writing it


def need(ok, what):
    """Raise ValueError(what) unless ok: one check of a record's shape.

    >>> need(1 + 1 == 2, "arithmetic")
    """
    if not ok:
        raise ValueError(what)


def check_record(record, plan):
    """Raise a ValueError naming the first field that does not have the shape a run of plan gives, or the first
    summary that differs from the one derived again from the record's raw per-run numbers."""
    need(record.get("format") == FORMAT, f"format is {record.get('format')!r}, expected {FORMAT!r}")
    settings = record.get("settings", {})
    need(settings.get("seeds") == plan["seeds"] and settings.get("train_args") == plan["train_args"],
         f"settings {settings} are not this code's ({plan})")
    check_provenance(record)
    need(settings.get("sweep") == SWEEP, f"the sweep {settings.get('sweep')} is not this code's ({SWEEP})")
    need(list(record.get("runs", {})) == list(SCHEMES), f"runs are not of the schemes {list(SCHEMES)}")
    floor = record["floor"]["validation_nats_per_token"]
    cells = [(lr, seed) for lr in SWEEP["lrs"] for seed in plan["seeds"]]
    for scheme, rs in record["runs"].items():
        need([(r["lr"], r["seed"]) for r in rs] == cells,
             f"{scheme}: expected a run for each learning rate of {SWEEP['lrs']} and each seed of {plan['seeds']}")
        for r in rs:
            name = f"{scheme} lr {r['lr']:g} seed {r['seed']}"
            need(r["val"] > floor - 0.05, f"{name}: val {r['val']} is far below the floor {floor}")
            need(r["tune"] > record["floor"]["tuning_nats_per_token"] - 0.05, f"{name}: tune {r['tune']} is far"
                 f" below the floor of the tuning stories")
            need(r["tune_curve"][-1] == [training_settings(plan)["steps"], r["tune"]],
                 f"{name}: the tuning curve does not end at the last step with tune")
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


def rerun(record, kernel_spread, scheme, seed, until, lr):
    """Train scheme with seed, learning rate lr and the full settings on the tuning split up to step until (the
    same schedule as the full run, stopped early) and compare the loss on the tuning stories there with the record's
    curve. Returns (ok, one line saying so).

    The same machine, kernels and threads give the recorded digits exactly; another machine, a loss within the
    spread that spread.json measured for this scheme at this step across OpenBLAS kernel families (for train.py's
    own run, on all the training stories at the learning rate 0.01: a yardstick of how far kernels move a run)."""
    run = {(r["lr"], r["seed"]): r for r in record["runs"][scheme]}[lr, seed]
    recorded = dict(run["tune_curve"])[until]
    tolerance = spread.tolerance(kernel_spread, scheme, until)
    argv = [*FULL["train_args"], *lr_args(lr), "--positions", scheme, "--seed", str(seed)]
    tuning, _ = sweep_data(FULL["train_args"], SWEEP["tune_stories"])
    _, history, _ = train.train_model(argv, data=tuning, until=until)
    got = rounded(history[-1]["val"])
    cell = f"{scheme} lr {lr:g} seed {seed} at step {until}: tune {got:.6g}, recorded {recorded:.6g}"
    if got == recorded:
        return True, f"OK: {cell}: the same digits (the kernels and thread count of the record)"
    within = abs(got - recorded) <= tolerance
    measured = (f"the spread across kernel families at this step is {tolerance:.2g} (spread.json, seed"
                f" {spread.SEED})")
    return within, f"{'OK' if within else 'NOT OK'}: {cell}: {'within' if within else 'outside'} {measured}"


# ----------------------------------------------------------------------------------------------------------------
# Command line


def experiment_parser(description, record, reduced, rerun, until=None):
    """The command line an experiment (this file or depth.py) shares: --check (reduced says what it runs), --out,
    --quiet, and --rerun (its choices and help given) with --seed and --until (until: its default, or None for the
    record's first curve point). The experiment adds the rest of its --rerun's options."""
    parser = argparse.ArgumentParser(description=description)
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
                        help=f"print the README's tables of the committed {record} (no training) and exit")
    return parser


def main(argv=None):
    parser = experiment_parser(
        "Train the model with each position scheme over several seeds and a sweep of learning rates, and record"
        " validation loss, an order probe and length extrapolation.", RECORD_FILE.name, "2 seeds, 150 steps",
        {"choices": SCHEMES, "metavar": "SCHEME",
         "help": "train one cell of positions.json again (with --seed and --lr, up to --until) and check its loss on"
                 " the tuning stories against the record, within the spread across machines that spread.json"
                 " records; exit 1 if it is outside"}, until=1000)
    parser.add_argument("--lr", type=float, default=None,
                        help="the peak learning rate of --rerun, one of the sweep's (default: the one the record"
                             " chose for the scheme)")
    args = parser.parse_args(argv)
    if args.rerun:
        return main_rerun(parser, args)
    return run_or_check(sys.modules[__name__], args)


def run_or_check(experiment, args):
    """The body of an experiment's main (this file's, or depth.py's; experiment is the module, with FULL, REDUCED,
    RECORD_FILE, run_experiment and check_record): run the full plan and write its record; or with --check run the
    reduced plan and check the shape of its record, then the committed record's shape, deriving every summary in
    it again from its runs. Returns the exit status."""
    script, committed = Path(experiment.__file__).name, experiment.RECORD_FILE
    if args.table:
        if not committed.exists():
            print(f"error: --table needs {committed.name}; run python3 {script} to make it", file=sys.stderr)
            return 2
        print(experiment.tables(json.loads(committed.read_text(encoding="utf-8"))))
        return 0
    plan = experiment.REDUCED if args.check else experiment.FULL
    report = (lambda line: None) if args.quiet else (lambda line: print(line, flush=True))  # noqa: E731
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
        print(f"NOT OK: {committed.name} is missing; run python3 {script} to write it")
        return 1
    try:
        experiment.check_record(json.loads(committed.read_text(encoding="utf-8")), experiment.FULL)
    except (ValueError, KeyError, TypeError) as e:
        reason = str(e) if isinstance(e, ValueError) else f"a missing or malformed field ({e!r})"
        print(f"NOT OK: {committed.name}: {reason}; run python3 {script} to rewrite it")
        return 1
    print(f"OK: the reduced run has the shape of the full one, and so has {committed.name}, whose every summary its"
          f" runs give again ({record['seconds']:.0f} s)")
    return 0


def rerun_records(parser, args, files):
    """The records --rerun reads (files: (path, the script that writes it) pairs), after refusing --check beside
    it; None, after saying which record is missing, if one is."""
    if args.check:
        parser.error("--rerun and --check are separate checks; pick one")
    for path, script in files:
        if not path.exists():
            print(f"error: --rerun needs {path.name}; run python3 {script} to make it", file=sys.stderr)
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


def main_rerun(parser, args):
    """positions.py --rerun: check the arguments against the records before training, then rerun the cell."""
    records = rerun_records(parser, args, ((RECORD_FILE, "positions.py"), (spread.RECORD_FILE, "spread.py")))
    if records is None:
        return 2
    record, kernel_spread = records
    lr = record["schemes"][args.rerun]["sweep"]["chosen"] if args.lr is None else args.lr
    if lr not in record["settings"]["sweep"]["lrs"]:
        parser.error(f"--lr {args.lr:g}: {RECORD_FILE.name} has the learning rates"
                     f" {record['settings']['sweep']['lrs']}")
    until = rerun_step(parser, args.until, record["runs"][args.rerun][0]["tune_curve"], args.seed,
                       record["settings"]["seeds"], RECORD_FILE.name)
    ok, line = rerun(record, kernel_spread, args.rerun, args.seed, until, lr)
    print(line)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
