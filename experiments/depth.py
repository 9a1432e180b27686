"""What a second block buys, and what more heads do: the model grown to (blocks, heads) = (1, 1), (1, 4), (2, 1) and
(2, 4), over three seeds, on two tasks, every size with its own small learning-rate sweep.

    python3 -m experiments.depth            # the full experiment (the record says how long it took): out/depth.json
    python3 -m experiments.depth --out experiments/depth.json   # the same, replacing the committed record
    python3 -m experiments.depth --check    # a reduced run (seconds), a shape check of depth.json, its summaries
    python3 -m experiments.depth --rerun induction --blocks 2 --heads 1 --seed 3   # one cell trained again, checked

The tasks, their measures and the sweep are docs/depth.md's "The experiment"; the induction task is induction.py's.

depth.json keeps every run's raw numbers (each tuning curve, every measure, every head's scores); the summaries are
derived from them with exact sums, so `--check` derives each again. Same code, same machine, kernels and thread
count: the same record, bit for bit, but the "seconds" fields.
"""

import math
import random
import statistics
import sys
import time
from pathlib import Path

from oneblock import machine

with machine.needed_by("python3 -m experiments.depth"):
    import numpy as np

    import make_corpus
    from experiments.induction import (PERIODS, TEST_SEED, TUNE_SEED, VOCAB, WINDOW, induction_config,
                                       induction_measures, periodic, train_induction)
    from experiments.recording import (TUNE_STORIES, across_seeds, check_provenance, experiment_parser, field,
                                       first_difference, flags, judged_rerun, last_probs, lr_values, need, parsed,
                                       provenance, recorded_settings, rounded, run_config, run_or_check, spread_text,
                                       sweep_data, sweep_summary, sweep_text, swept_runs, table_row, trained,
                                       validation_loss)
    from experiments.scaling_law import name_of

# ----------------------------------------------------------------------------------------------------------------
# Settings

HERE = Path(__file__).resolve().parent
RECORD_FILE = HERE / "depth.json"
FORMAT = "depth experiment v1"  # the record's "format" field
SIZES = [(1, 1), (1, 4), (2, 1), (2, 4)]  # (blocks, heads)
TASKS = ("stories", "induction")
FULL = {  # the recorded experiment: about 20 minutes on the 2-core machine
    "seeds": [3, 4, 5],
    "stories": {"train": {"steps": 6000, "eval_every": 1000}, "lrs": [0.003, 0.01, 0.03]},
    "induction": {"steps": 2000, "batch": 32, "eval_every": 250, "lrs": [0.001, 0.003, 0.01],
                  "tune_sequences": 300, "test_sequences": 500},  # fixed sequences that choose and that report
}
REDUCED = {  # --check: the same shape in seconds
    "seeds": [3, 4],
    "stories": {"train": {"steps": 20, "batch": 4, "eval_every": 10, "warmup": 5}, "lrs": FULL["stories"]["lrs"]},
    "induction": {"steps": 20, "batch": 4, "eval_every": 10, "lrs": FULL["induction"]["lrs"], "tune_sequences": 20,
                  "test_sequences": 40},
}
COLOUR_SHAPES = ("walk", "pass")  # the story shapes that repeat the colour at the end


def stories_settings(plan):
    """The stories' settings of plan as the record keeps them: the train.py flags of its training, and the rates.

    >>> stories_settings(FULL)
    {'train_args': ['--steps', '6000', '--eval-every', '1000'], 'lrs': [0.003, 0.01, 0.03]}
    """
    return {"train_args": flags(plan["stories"]["train"]), "lrs": plan["stories"]["lrs"]}


# ----------------------------------------------------------------------------------------------------------------
# Stories: the colour the end of a story repeats


def colour_items(tok, val_texts):
    """(inputs, answers): per validation story that ends "now Y has the COLOUR THING.", the newline and its tokens
    up to " the" before the colour, and the colour's token (read off make_corpus.parse_story).

    >>> import bpe
    >>> tok = bpe.Tokenizer.load(HERE.parent / "tokenizer.json")
    >>> story = "mia has a red hat. mia gives the hat to ava. then ava gives the hat to leo. now leo has the red hat."
    >>> gift = "mia has a red hat. mia gives the hat to ava. now ava has the hat."  # no colour at the end
    >>> inputs, answers = colour_items(tok, [story, gift])
    >>> tok.decode(inputs[0][-3:]), tok.decode(answers), len(inputs)
    (' leo has the', ' red', 1)
    """
    inputs, answers = [], []
    for text in val_texts:
        shape, choices = make_corpus.parse_story(text)
        if shape not in COLOUR_SHAPES:
            continue
        ids = tok.encode("\n" + text)  # (n,) the newline before the story, as in the corpus
        end = tok.encode(f" {choices['colour']} {choices['thing']}.")  # the story's last tokens
        colour = tok.encode(" " + choices["colour"])
        if len(colour) != 1 or ids[len(ids) - len(end):len(ids) - len(end) + 1] != colour:
            raise ValueError(f"story {text!r}: expected one colour token before the last thing")
        inputs.append(ids[:len(ids) - len(end)])
        answers.append(colour[0])
    return inputs, answers


def colour_measures(params, config, items):
    """{"loss", "accuracy"} of the repeated colour: the mean -log p of its token, and the share of stories where it
    is the most likely next token, under the model of params and config."""
    inputs, answers = items
    p = last_probs(params, inputs, config)  # (S, V)
    picked = p[np.arange(len(answers)), answers]  # (S,)
    return {"loss": float(-np.log(picked).mean()), "accuracy": float((p.argmax(axis=1) == answers).mean())}


def story_runs(plan, size, tuning, full, items, report):
    """Every (learning rate, seed) run of one size on the stories: its raw numbers."""
    runs = []
    for lr in plan["stories"]["lrs"]:
        for seed in plan["seeds"]:
            t0 = time.perf_counter()
            values = {**plan["stories"]["train"], **lr_values(lr), "blocks": size[0], "heads": size[1], "seed": seed}
            params, history = trained(values, data=tuning)
            config = run_config(values, full.vocab)
            run = rounded({"lr": lr, "seed": seed, "tune": history[-1]["val"],
                           "tune_curve": [[h["step"], h["val"]] for h in history],
                           "val": validation_loss(params, full, config),
                           "colour": colour_measures(params, config, items),
                           "seconds": round(time.perf_counter() - t0, 1)})
            runs.append(run)
            report(f"stories   {name_of(size)} lr {lr:<6g} seed {seed}: tune {run['tune']:.4f} | val {run['val']:.4f}"
                   f" | colour {run['colour']['loss']:.3f} nats, {run['colour']['accuracy']:.0%} | {run['seconds']} s")
    return runs


def induction_runs(plan, size, tuning, test, report):
    """Every (learning rate, seed) run of one size on periodic sequences: its raw numbers."""
    runs = []
    for lr in plan["induction"]["lrs"]:
        for seed in plan["seeds"]:
            t0 = time.perf_counter()
            params, curve = train_induction(size, lr, seed, plan["induction"], tuning)
            measures, scores = induction_measures(params, induction_config(size), test)
            run = rounded({"lr": lr, "seed": seed, "tune": curve[-1][1], "tune_curve": curve, "test": measures,
                           "head_scores": scores, "seconds": round(time.perf_counter() - t0, 1)})
            runs.append(run)
            best = max(h["induction"] for block in run["head_scores"] for h in block)
            report(f"induction {name_of(size)} lr {lr:<6g} seed {seed}: tune {run['tune']:.3f} | copy"
                   f" {measures['copy_accuracy']:.0%}, {measures['copy_loss']:.2f} nats | first period"
                   f" {measures['first_period_loss']:.2f} | best induction head {best:.2f} | {run['seconds']} s")
    return runs


# ----------------------------------------------------------------------------------------------------------------
# The experiment and its summaries


def runs_in(plan):
    """How many runs plan trains: every size on both tasks, at every learning rate of the task, with every seed.

    >>> runs_in(FULL), runs_in(REDUCED)
    (72, 48)
    """
    return len(SIZES) * sum(len(plan[task]["lrs"]) for task in TASKS) * len(plan["seeds"])


def run_experiment(plan, report=print):
    """Train every size with every learning rate of its task and every seed of plan, on both tasks; return the
    record (a dict): the raw numbers of every run under each task's "runs", their summaries under "sizes"."""
    started, cpu = time.perf_counter(), time.process_time()
    tuning, full = sweep_data(plan["stories"]["train"], TUNE_STORIES)
    items = colour_items(full.tok, full.val_texts)
    counts = plan["induction"]["tune_sequences"], plan["induction"]["test_sequences"]
    tune_set, test_set = (periodic(random.Random(seed), n) for seed, n in zip((TUNE_SEED, TEST_SEED), counts))
    t0 = time.perf_counter()
    stories = {name_of(size): story_runs(plan, size, tuning, full, items, report) for size in SIZES}
    t1 = time.perf_counter()
    induction = {name_of(size): induction_runs(plan, size, tune_set, test_set, report) for size in SIZES}
    seconds = {"stories": round(t1 - t0, 1), "induction": round(time.perf_counter() - t1, 1)}
    floor = rounded({"validation_nats_per_token": full.val_floor, "tuning_nats_per_token": tuning.val_floor,
                     "uniform_nats_per_token": math.log(full.vocab), "colour_guess_nats": math.log(4),
                     "first_period_nats": first_period_floor(test_set)})
    made, sources = provenance(sys.modules[__name__], plan, started, cpu)
    return {
        **made,
        "seconds_by_task": seconds,
        "settings": {"seeds": plan["seeds"], "sizes": [name_of(size) for size in SIZES],
                     "stories": stories_settings(plan),
                     "induction": plan["induction"], "tune_stories": TUNE_STORIES, "validation_stories":
                     len(full.val_texts), "colour_stories": len(items[0]), "periods": list(PERIODS),
                     "window": WINDOW},
        **sources,
        "floor": floor,
        "stories": {"sizes": summarise_stories(stories, plan, floor), "runs": stories},
        "induction": {"sizes": summarise_induction(induction, plan), "runs": induction},
    }


def first_period_floor(sequences):
    """The lowest loss any model can expect on the first period of the test sequences: its k-th target (k = 1..p-1)
    is one of the 96 - k tokens the segment has not used, all alike, so -log p = ln(96 - k), averaged over the
    targets of every first period.

    >>> round(first_period_floor((None, None, np.array([2]))), 4)  # one target, one of 95 tokens
    4.5539
    """
    periods = sequences[2]
    return statistics.fmean(math.log(VOCAB - k) for p in periods for k in range(1, int(p)))


def summarise_stories(runs, plan, floor):
    """Per size, the sweep and, at the chosen rate, the validation loss, its gap to the floor and the colour, across
    seeds: every number a function of the runs' raw numbers, with exact sums."""
    out = {}
    for size, rs in runs.items():
        chosen, sweep = sweep_summary(rs, plan["stories"]["lrs"], {"val": lambda r: r["val"]})
        out[size] = {"sweep": sweep, "val_loss": across_seeds(r["val"] for r in chosen),
                     "gap_to_floor": statistics.fmean(r["val"] for r in chosen) - floor["validation_nats_per_token"],
                     "colour_loss": across_seeds(r["colour"]["loss"] for r in chosen),
                     "colour_accuracy": across_seeds(r["colour"]["accuracy"] for r in chosen)}
    return rounded(out)


def summarise_induction(runs, plan):
    """Per size, the sweep and, at the chosen rate, the copy accuracy and loss, the loss on the first period, the
    best induction score of any head and the best previous-token score of a first-block head, across seeds."""
    out = {}
    for size, rs in runs.items():
        chosen, sweep = sweep_summary(rs, plan["induction"]["lrs"],
                                      {"copy_accuracy": lambda r: r["test"]["copy_accuracy"]})
        out[size] = {"sweep": sweep, **{key: across_seeds(r["test"][key] for r in chosen)
                                        for key in ("copy_accuracy", "copy_loss", "first_period_loss")},
                     "best_induction_score": across_seeds(max(h["induction"] for block in r["head_scores"]
                                                              for h in block) for r in chosen),
                     "best_previous_token_score": across_seeds(max(h["previous_token"] for h in r["head_scores"][0])
                                                               for r in chosen)}
    return rounded(out)


# ----------------------------------------------------------------------------------------------------------------
# The tables of docs/depth.md, from a record


def tables(record):
    """The two tables of depth.json that docs/depth.md shows: per size, the sweep and the runs at its chosen learning
    rate, on the stories and on the induction task."""
    settings, floor = record["settings"], record["floor"]
    lrs = {task: " / ".join(f"{lr:g}" for lr in settings[task]["lrs"]) for task in TASKS}
    stories = [table_row(["blocks x heads", f"tuning loss at lr {lrs['stories']}", "validation loss, mean ± sd"
                          " (min to max)", "gap to floor", "loss on the repeated colour, nats", "colour predicted"
                          " right, %"]), table_row(["---"] * 6)]
    for size, summary in record["stories"]["sizes"].items():
        stories.append(table_row([size, sweep_text(summary["sweep"]), spread_text(summary["val_loss"]),
                                  f"{summary['gap_to_floor']:+.4f}", spread_text(summary["colour_loss"], 3),
                                  spread_text(summary["colour_accuracy"], 0, 100)]))
    induction = [table_row(["blocks x heads", f"tuning loss at lr {lrs['induction']}", "copy accuracy, %",
                            "copy loss, nats", "first-period loss, nats", "best induction score of a head",
                            "best previous-token score, block 1"]), table_row(["---"] * 7)]
    for size, summary in record["induction"]["sizes"].items():
        induction.append(table_row([size, sweep_text(summary["sweep"], 3),
                                    spread_text(summary["copy_accuracy"], 1, 100),
                                    spread_text(summary["copy_loss"], 3), spread_text(summary["first_period_loss"], 3),
                                    spread_text(summary["best_induction_score"], 2),
                                    spread_text(summary["best_previous_token_score"], 2)]))
    return "\n".join([*stories, "", f"(floor {floor['validation_nats_per_token']:.4f} nats/token; guessing one of"
                       f" the four colours {floor['colour_guess_nats']:.3f} nats)", "", *induction, "",
                       f"(first period: at best {floor['first_period_nats']:.3f} nats; {settings['induction']['steps']}"
                       f" steps of {settings['induction']['batch']} sequences)"])


# ----------------------------------------------------------------------------------------------------------------
# The record's shape


def check_record(record, plan):
    """Raise a ValueError naming the first field that does not have the shape a run of plan gives, or the first
    summary that differs from the one derived again from the record's raw per-run numbers."""
    check_provenance(record, FORMAT)
    settings = record.get("settings", {})
    for key, want in (("seeds", plan["seeds"]), ("stories", stories_settings(plan)), ("induction", plan["induction"])):
        need(settings.get(key) == want, f"settings {key} {settings.get(key)} are not this code's ({want})")
    need(settings.get("sizes") == [name_of(size) for size in SIZES], f"sizes {settings.get('sizes')} are not"
         f" this code's")
    floor = record["floor"]
    steps = {"stories": recorded_settings(plan["stories"]["train"])["steps"],
             "induction": plan["induction"]["steps"]}
    for task in TASKS:
        runs = record[task]["runs"]
        need(list(runs) == settings["sizes"], f"{task}: runs are not of the sizes {settings['sizes']}")
        for size, rs in runs.items():
            for name, r in swept_runs(f"{task} {size}", rs, plan[task]["lrs"], plan["seeds"], steps[task]):
                if task == "stories":
                    need(r["val"] > floor["validation_nats_per_token"] - 0.05, f"{name}: val {r['val']} is far"
                         f" below the floor")
                    need(0 <= r["colour"]["accuracy"] <= 1 and r["colour"]["loss"] > 0, f"{name}: colour numbers"
                         f" out of range")
                else:
                    blocks, heads = map(int, size.split("x"))
                    need([len(block) for block in r["head_scores"]] == [heads] * blocks,
                         f"{name}: expected the scores of {heads} heads in each of {blocks} blocks")
                    need(all(0 <= h[key] <= 1 for block in r["head_scores"] for h in block
                             for key in ("induction", "previous_token")), f"{name}: a head's score outside [0, 1]")
                    need(0 <= r["test"]["copy_accuracy"] <= 1, f"{name}: copy accuracy outside [0, 1]")
                    need(r["test"]["first_period_loss"] > floor["first_period_nats"] - 0.5,
                         f"{name}: the first period's loss {r['test']['first_period_loss']} is far below what any"
                         f" model can expect")
    derived = {"stories": summarise_stories(record["stories"]["runs"], plan, floor),
               "induction": summarise_induction(record["induction"]["runs"], plan)}
    for task in TASKS:
        first_difference(derived[task], record[task].get("sizes"), f"{task}.sizes")


# ----------------------------------------------------------------------------------------------------------------
# A partial rerun of one cell


def rerun(record, task, size, seed, until):
    """recording.judged_rerun of one cell of the record (task, size, seed, at the learning rate the record chose),
    trained again up to step until."""
    plan, name = FULL, name_of(size)

    def runs_of(record):
        lr = field(record[task]["sizes"][name]["sweep"]["chosen"], "a number", f"{task}.sizes.{name}.sweep.chosen")
        return [r for r in record[task]["runs"][name] if r["lr"] == lr]

    def train(lr):
        if task == "stories":
            tuning, _ = sweep_data(plan["stories"]["train"], TUNE_STORIES)
            values = {**plan["stories"]["train"], **lr_values(lr), "blocks": size[0], "heads": size[1], "seed": seed}
            got = trained(values, data=tuning, until=until)[1][-1]["val"]
        else:
            tuning = periodic(random.Random(TUNE_SEED), plan["induction"]["tune_sequences"])
            got = train_induction(size, lr, seed, plan["induction"], tuning, until=until)[1][-1][1]
        return f"{task} {name} lr {lr:g}", got

    return judged_rerun(sys.modules[__name__], record, runs_of, seed, until, train)


# ----------------------------------------------------------------------------------------------------------------
# Command line


def main(argv=None):
    parser = experiment_parser(
        "Train the model grown to 1 or 2 blocks of 1 or 4 heads on the stories and on periodic sequences, over seeds"
        " and a sweep of learning rates, and record what a second block and more heads buy.", RECORD_FILE.name,
        "2 seeds, 20 steps", {"choices": TASKS, "metavar": "TASK",
                              "help": "train one cell of depth.json again (stories or induction, with --blocks,"
                                      " --heads and --seed, at the learning rate the record chose, up to --until)"})
    parser.add_argument("--blocks", type=int, default=None, help="the blocks of --rerun (default: 2)")
    parser.add_argument("--heads", type=int, default=None, help="the heads of --rerun (default: 1)")
    args = parsed(parser, argv, blocks=2, heads=1)
    return run_or_check(sys.modules[__name__], parser, args, argv)


def rerun_cell(parser, args, record):
    """recording.rerun_main's cell: rerun's task and size, and the tuning curve whose steps --until may name."""
    size = args.blocks, args.heads
    if size not in SIZES:
        parser.error(f"--blocks {args.blocks} --heads {args.heads}: {RECORD_FILE.name} has the sizes"
                     f" {', '.join(name_of(s) for s in SIZES)} (blocks x heads)")
    return {"task": args.rerun, "size": size}, record[args.rerun]["runs"][name_of(size)][0]["tune_curve"]


if __name__ == "__main__":
    sys.exit(main())
