"""What positions are for: the same model trained with each position scheme, over several seeds and a small sweep of
learning rates, measured three ways.

    python3 -m experiments.positions            # the full experiment (the record says how long): out/positions.json
    python3 -m experiments.positions --out experiments/positions.json   # the same, replacing the committed record
    python3 -m experiments.positions --check    # a reduced run (seconds) of the same shape, and positions.json's

The schemes, the runs (train.py's training with only the scheme, the seed and the learning rate changed) and the
sweep that gives each scheme its own best rate: docs/positions.md's "Four schemes" and "The experiment"
(recording.sweep_data, recording.chosen_lr). After each run, through numpy_fast.py as the training itself: the
validation loss beside the floor of the same stories (floor.py); the order probe (`probe_items`, `probe`: is the
most likely next token after "now" the name that word order gives?); the loss at each position of 128-token windows
(`loss_by_position`: twice the training length; learned, with no row past 64, on their first 64 positions).

Every number is the mean over seeds with its spread (sample standard deviation, min, max, and each seed's value).
Same code, same machine: the same record, bit for bit (the runs are deterministic), except the "seconds" field.
"""

import math
import statistics
import sys
import time
from pathlib import Path

from oneblock import machine

with machine.needed_by("python3 -m experiments.positions"):
    import numpy as np

    import make_corpus
    from experiments.recording import (TUNE_STORIES, across_seeds, check_provenance, experiment_parser,
                                       first_difference, flags, judged_rerun, last_probs, lr_values, need, parsed,
                                       provenance, recorded_settings, rounded, run_config, run_or_check, spread_text,
                                       sweep_data, sweep_summary, sweep_text, swept_runs, table_row, target_nats,
                                       trained, validation_loss, windows)
    from oneblock import numpy_fast
    from oneblock.config import SCHEMES  # learned, none, sinusoidal, rope
    from oneblock.settings import Settings

# ----------------------------------------------------------------------------------------------------------------
# Settings

HERE = Path(__file__).resolve().parent
RECORD_FILE = HERE / "positions.json"
RERUN_UNTIL = 1000  # the step --rerun stops at unless told
FORMAT = "one-block positions experiment v3"  # the record's "format" field
FULL = {"seeds": [3, 4, 5, 6, 7], "train": {}}  # train.py's defaults, but the learning rate
REDUCED = {"seeds": [3, 4], "train": {"steps": 150, "batch": 8, "warmup": 20}}  # --check: seconds
SWEEP = {"lrs": [0.003, 0.01, 0.03], "tune_stories": TUNE_STORIES}  # peak learning rates; the stories that choose one
WINDOW = 128  # tokens per extrapolation window: twice the 64 positions the models train on
TRAINED = Settings().max_len  # 64: the positions every run trains on, and the rows learned has


# ----------------------------------------------------------------------------------------------------------------
# Measurements of one trained model


def probe_items(tok, val_texts):
    """(inputs, answers, shapes) for the order probe: per validation story, the newline and the story's tokens up to
    and including " now"; the token of the name that follows (Y, read off make_corpus.parse_story, not off the
    text); the story's shape.

    >>> import bpe
    >>> tok = bpe.Tokenizer.load(HERE.parent / "tokenizer.json")
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


def probe(params, config, items):
    """{"accuracy", "mean_probability", "accuracy_by_shape"}: the share of stories where the right name is the most
    likely next token, and the mean probability it gets, under the model of params and config."""
    inputs, answers, shapes = items
    p = last_probs(params, inputs, config)  # (S, V)
    answers = np.array(answers)  # (S,)
    right = p.argmax(axis=1) == answers  # (S,)
    by_shape = {shape: float(np.mean([r for r, s in zip(right, shapes) if s == shape]))
                for shape in sorted(set(shapes))}
    return {"accuracy": float(right.mean()), "mean_probability": float(p[np.arange(len(answers)), answers].mean()),
            "accuracy_by_shape": by_shape}


def loss_by_position(params, config, inputs, targets):
    """The mean -log p of the target at each position over the windows, (T,) float64, under the model of params
    and config; for learned only the first 64 positions, after recording that the model refuses the whole window.
    Returns (losses, refusal or None)."""
    refusal = None
    try:
        numpy_fast.forward(params, inputs[:1], config)
    except ValueError as e:  # learned: no row past 64
        refusal = str(e)
        inputs, targets = inputs[:, :TRAINED], targets[:, :TRAINED]
    logits, _ = numpy_fast.forward(params, inputs, config)  # (W, T, V)
    return target_nats(logits, targets).mean(axis=0), refusal  # (T,)


# ----------------------------------------------------------------------------------------------------------------
# The experiment


def runs_in(plan):
    """How many runs plan trains: every scheme at every learning rate of the sweep, with every seed.

    >>> runs_in(FULL), runs_in(REDUCED)
    (60, 24)
    """
    return len(SCHEMES) * len(SWEEP["lrs"]) * len(plan["seeds"])


def run_experiment(plan, report=print):
    """Train every scheme with every learning rate of SWEEP and every seed of plan and measure each run; return the
    record (a dict): the raw numbers of every run under "runs", and under "schemes" their summaries, derived from
    those raw numbers only."""
    started, cpu = time.perf_counter(), time.process_time()
    tuning, full = sweep_data(plan["train"], SWEEP["tune_stories"])
    items = probe_items(full.tok, full.val_texts)
    inputs, targets = windows(full.tok, full.val_texts, WINDOW)
    runs = {scheme: [] for scheme in SCHEMES}
    for scheme in SCHEMES:
        for lr in SWEEP["lrs"]:
            for seed in plan["seeds"]:
                t0 = time.perf_counter()
                values = {**plan["train"], **lr_values(lr), "positions": scheme, "seed": seed}
                params, history = trained(values, data=tuning)
                config = run_config(values, full.vocab)
                by_position, refusal = loss_by_position(params, config, inputs, targets)
                run = rounded({"lr": lr, "seed": seed, "tune": history[-1]["val"],
                               "tune_curve": [[h["step"], h["val"]] for h in history],
                               "val": validation_loss(params, full, config), "probe": probe(params, config, items),
                               "loss_by_position": by_position.tolist(), "refusal": refusal})
                runs[scheme].append(run)
                report(f"{scheme:>10} lr {lr:<6g} seed {seed}: tune {run['tune']:.4f} | val {run['val']:.4f} |"
                       f" probe {run['probe']['accuracy']:.3f} | {time.perf_counter() - t0:.1f} s")
    floor_ = rounded({"validation_nats_per_token": full.val_floor, "tuning_nats_per_token": tuning.val_floor,
                      "corpus_nats_per_token": full.corpus_floor, "uniform_nats_per_token": math.log(full.vocab)})
    made, sources = provenance(sys.modules[__name__], plan, started, cpu)
    return {
        **made,
        "settings": {"seeds": plan["seeds"], "train_args": flags(plan["train"]),
                     "training": recorded_settings(plan["train"]),
                     "sweep": SWEEP, "window": WINDOW, "validation_stories": len(full.val_texts),
                     "probe_stories": len(items[0]), "extrapolation_windows": len(inputs)},
        **sources,
        "floor": floor_,
        "schemes": summarise(runs, floor_),
        "runs": runs,
    }


def summarise(runs, floor):
    """Per scheme, the sweep (tuning and validation loss of each learning rate across seeds, and the one chosen) and
    the summaries of the runs at the chosen rate: every number a function of the runs' raw numbers (and the floor)
    alone, computed with exactly rounded sums (statistics.fmean), so that positions.py --check re-derives the same
    digits on any machine."""
    ranges = {"0_63": (0, TRAINED), "32_63": (TRAINED // 2, TRAINED), "64_127": (TRAINED, WINDOW)}
    schemes = {}
    for scheme, all_runs in runs.items():
        rs, sweep = sweep_summary(all_runs, SWEEP["lrs"], {"val": lambda r: r["val"]})  # rs: the runs reported
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
# The table of docs/positions.md, from a record


def tables(record):
    """The table of positions.json that docs/positions.md shows: per scheme, the sweep and the runs at its chosen
    learning rate."""
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


def check_record(record, plan):
    """Raise a ValueError naming the first field that does not have the shape a run of plan gives, or the first
    summary that differs from the one derived again from the record's raw per-run numbers."""
    check_provenance(record, FORMAT)
    settings = record.get("settings", {})
    need(settings.get("seeds") == plan["seeds"] and settings.get("train_args") == flags(plan["train"]),
         f"settings {settings} are not this code's ({plan})")
    need(settings.get("sweep") == SWEEP, f"the sweep {settings.get('sweep')} is not this code's ({SWEEP})")
    need(list(record.get("runs", {})) == list(SCHEMES), f"runs are not of the schemes {list(SCHEMES)}")
    floor = record["floor"]["validation_nats_per_token"]
    steps = recorded_settings(plan["train"])["steps"]
    for scheme, rs in record["runs"].items():
        for name, r in swept_runs(scheme, rs, SWEEP["lrs"], plan["seeds"], steps):
            need(r["val"] > floor - 0.05, f"{name}: val {r['val']} is far below the floor {floor}")
            need(r["tune"] > record["floor"]["tuning_nats_per_token"] - 0.05, f"{name}: tune {r['tune']} is far"
                 f" below the floor of the tuning stories")
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


# ----------------------------------------------------------------------------------------------------------------
# A partial rerun: one cell of the record, trained again


def rerun(record, scheme, seed, until, lr):
    """recording.judged_rerun of one cell of the record (scheme, seed, learning rate lr), trained again on the
    tuning split up to step until."""
    def train(lr):
        tuning, _ = sweep_data(FULL["train"], SWEEP["tune_stories"])
        _, history = trained({**FULL["train"], **lr_values(lr), "positions": scheme, "seed": seed}, data=tuning,
                             until=until)
        return f"{scheme} lr {lr:g}", history[-1]["val"]

    return judged_rerun(sys.modules[__name__], record, lambda rec: [r for r in rec["runs"][scheme] if r["lr"] == lr],
                        seed, until, train)


# ----------------------------------------------------------------------------------------------------------------
# Command line


def main(argv=None):
    parser = experiment_parser(
        "Train the model with each position scheme over several seeds and a sweep of learning rates, and record"
        " validation loss, an order probe and length extrapolation.", RECORD_FILE.name, "2 seeds, 150 steps",
        {"choices": SCHEMES, "metavar": "SCHEME",
         "help": "train one cell of positions.json again (with --seed and --lr, up to --until)"}, until=RERUN_UNTIL)
    parser.add_argument("--lr", type=float, default=None,
                        help="the peak learning rate of --rerun, one of the sweep's (default: the one the record"
                             " chose for the scheme)")
    args = parsed(parser, argv, until=RERUN_UNTIL, lr=None)
    return run_or_check(sys.modules[__name__], parser, args, argv)


def rerun_cell(parser, args, record):
    """recording.rerun_main's cell: rerun's scheme and learning rate (the record's choice unless --lr is given),
    and the tuning curve whose steps --until may name."""
    lr = record["schemes"][args.rerun]["sweep"]["chosen"] if args.lr is None else args.lr
    if lr not in record["settings"]["sweep"]["lrs"]:
        parser.error(f"--lr {args.lr:g}: {RECORD_FILE.name} has the learning rates"
                     f" {record['settings']['sweep']['lrs']}")
    return {"scheme": args.rerun, "lr": lr}, record["runs"][args.rerun][0]["tune_curve"]


if __name__ == "__main__":
    sys.exit(main())
