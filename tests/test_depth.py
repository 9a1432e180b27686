"""experiments/depth.py: the committed depth.json has the shape and settings of the code, re-derives every summary,
and took less than the 30 minutes the experiment is allowed; the periodic sequences, the colour items and the head
scores measure what they say; a rerun reads its record (the reduced experiment, run and checked against the full
one's shape, and the committed record's cell rerun to its digits are docs/depth.md's commands, which
tests/test_readme.py runs)."""

import json
import random

import numpy as np
import pytest

import make_corpus
from experiments import depth, induction
from test_positions import TOK, VAL, verdicts_on_made_up_records


def record():
    return json.loads(depth.RECORD_FILE.read_text(encoding="utf-8"))


def test_committed_record_has_the_shape_of_this_code_and_fits_the_budget():
    r = record()
    depth.check_record(r, depth.FULL)
    assert r["command"] == "python3 -m experiments.depth"
    assert r["cpu_seconds"] < 30 * 60  # the whole experiment, sweep included, on one core of the 2-core machine
    for task, summaries in (("stories", r["stories"]["sizes"]), ("induction", r["induction"]["sizes"])):
        for size, s in summaries.items():  # the chosen rate, found again here with NumPy
            runs = r[task]["runs"][size]
            lrs = depth.FULL[task]["lrs"]
            means = [np.mean([run["tune"] for run in runs if run["lr"] == lr]) for lr in lrs]
            assert s["sweep"]["chosen"] == lrs[int(np.argmin(means))], (task, size)
    for size, s in r["induction"]["sizes"].items():
        chosen = [run for run in r["induction"]["runs"][size] if run["lr"] == s["sweep"]["chosen"]]
        assert s["copy_accuracy"]["by_seed"] == [run["test"]["copy_accuracy"] for run in chosen]


@pytest.mark.parametrize("task, path, change, where", [
    ("stories", ("sizes", "2x4", "colour_loss", "mean"), 1e-3, "stories.sizes.2x4.colour_loss.mean"),
    ("stories", ("runs", "1x4", 1, "val"), 0.01, "stories.sizes.1x4"),
    ("induction", ("sizes", "2x1", "copy_accuracy", "std"), 1e-3, "induction.sizes.2x1.copy_accuracy.std"),
    ("induction", ("runs", "2x4", 0, "head_scores", 1, 1, "induction"), 0.5, "induction.sizes.2x4"),  # the best head
])
def test_check_record_re_derives_every_summary_from_the_runs(task, path, change, where):
    r = record()
    if path[0] == "runs":  # ("runs", size, k, ...): the k-th run at the chosen rate, the runs the summary reads
        chosen = r[task]["sizes"][path[1]]["sweep"]["chosen"]
        at_chosen = [i for i, run in enumerate(r[task]["runs"][path[1]]) if run["lr"] == chosen]
        path = (*path[:2], at_chosen[path[2]], *path[3:])
    target = r[task]
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = min(1.0, target[path[-1]] + change)
    with pytest.raises(ValueError, match=f"^{where}"):
        depth.check_record(r, depth.FULL)


def test_check_record_names_what_is_wrong():
    r = record()
    r["induction"]["runs"]["2x1"].pop()
    with pytest.raises(ValueError, match=r"induction 2x1: expected a run for each learning rate of \[0.001, 0.003,"
                                         r" 0.01\] and each seed of \[3, 4, 5\]"):
        depth.check_record(r, depth.FULL)
    with pytest.raises(ValueError, match="settings seeds .* are not this code's"):
        depth.check_record(record(), depth.REDUCED)


# ----------------------------------------------------------------------------------------------------------------
# What the measures measure


def test_periodic_sequences_repeat_a_segment_of_distinct_tokens():
    ids, targets, periods = induction.periodic(random.Random(5), 200)
    assert ids.shape == targets.shape == (200, 64) and (ids[:, 1:] == targets[:, :-1]).all()
    assert set(periods.tolist()) == set(range(4, 17))  # every period of PERIODS occurs
    for row, p in zip(np.concatenate([ids, targets[:, -1:]], axis=1), periods):
        assert len(set(row[:p].tolist())) == p  # the segment: p distinct tokens
        assert (row[p:] == row[:-p]).all()  # then itself again, to the end
    assert ids.min() >= 0 and ids.max() < 96
    again, _, _ = induction.periodic(random.Random(5), 200)
    assert (again == ids).all()


def test_head_scores_of_an_ideal_induction_head_and_an_ideal_previous_token_head():
    ids, _, periods = induction.periodic(random.Random(1), 30)
    S, T = ids.shape
    ideal, earliest, previous = np.zeros((S, T, T)), np.zeros((S, T, T)), np.zeros((S, T, T))
    for s, p in enumerate(periods):
        for i in range(T):
            ideal[s, i, i - p + 1 if i >= p else i] = 1.0  # the token after the last occurrence of token i
            earliest[s, i, (i + 1) % p or p if i >= p else i] = 1.0  # the token after its first occurrence
            previous[s, i, max(i - 1, 0)] = 1.0
    assert induction.head_scores(ideal, periods) == {"induction": 1.0, "previous_token": 0.0}
    assert induction.head_scores(earliest, periods)["induction"] == 1.0  # any earlier period counts
    assert induction.head_scores(previous, periods) == {"induction": 0.0, "previous_token": 1.0}
    for s, p in enumerate(periods):  # the ideal head reads the token its position is about to see
        for i in range(p, T - 1):
            assert ids[s, ideal[s, i].argmax()] == ids[s, i + 1] == ids[s, earliest[s, i].argmax()]
    uniform = np.tril(np.ones((T, T))) / np.arange(1, T + 1)[:, None]  # (T, T) every query reads all it may, alike
    assert 0 < induction.head_scores(np.broadcast_to(uniform, (S, T, T)), periods)["induction"] < 0.1


def test_colour_items_are_every_walk_and_pass_story_at_the_colour():
    inputs, answers = depth.colour_items(TOK, VAL)
    colours = {TOK.encode(" " + c)[0] for c in make_corpus.COLOURS}
    stories = [text for text in VAL if make_corpus.parse_story(text)[0] in depth.COLOUR_SHAPES]
    assert len(inputs) == len(stories) > 100 and set(answers) <= colours
    for ids, answer, text in zip(inputs, answers, stories):
        assert TOK.decode(ids[-1:]) == " the" and text.startswith(TOK.decode(ids[1:] + [answer]))
        colour = make_corpus.parse_story(text)[1]["colour"]
        assert TOK.decode([answer]) == " " + colour and text.count(" " + colour + " ") == 2  # said before, too


# ----------------------------------------------------------------------------------------------------------------
# A partial rerun of one cell


def test_rerun_gives_each_verdict_on_records_made_up_around_its_loss():
    r = record()
    chosen = r["induction"]["sizes"]["2x1"]["sweep"]["chosen"]
    runs = [run for run in r["induction"]["runs"]["2x1"] if run["lr"] == chosen]
    verdicts_on_made_up_records(lambda rec: depth.rerun(rec, "induction", (2, 1), 3, 250), r, runs, 3, 250)
