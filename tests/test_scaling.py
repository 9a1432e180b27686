"""experiments/chains.py: a tiny world enumerated whole is a probability distribution whose every story parses back
to the choices that made it; the full world's stories parse back, are tokenized piece by piece as the tokenizer
encodes them, and fit the model's positions."""

import argparse
import itertools
import math
import random
from fractions import Fraction
from math import fsum

import numpy as np
import pytest

import bpe
from experiments import chains
from oneblock.data import TOKENIZER_FILE
from test_positions import verdicts_on_made_up_records

TOK = bpe.Tokenizer.load(TOKENIZER_FILE)
TINY = {"names": ["mia", "tom", "theo"], "things": ["hat", "boat"], "colours": ["red", "blue"],
        "places": ["park", "garden"], "verbs": ["has", "finds"], "people": 2, "handovers": 2}


def every_story(world):
    """The choices of every story of world, one per combination of option indices."""
    return [chains.words_of(list(indices), world)
            for indices in itertools.product(*(range(n) for _, n in chains.options(world)))]


def test_a_tiny_world_enumerated_whole_is_a_distribution_of_distinct_stories_that_parse_back():
    stories = every_story(TINY)
    texts = [chains.story_text(c) for c in stories]
    assert len(stories) == chains.stories(TINY) == 2 * (3 * 2 * 2 * 2) * (2 * 2 * 2 * 1) * 2 * 2
    assert len(set(texts)) == len(texts)  # different choices, different text
    assert sorted(chains.index_number(chains.indices_of(c, TINY), TINY) for c in stories) == list(range(len(stories)))
    assert math.isclose(len(texts) * math.exp(-chains.entropy(TINY)), 1.0, rel_tol=1e-12)  # each story 1 / count
    assert all(chains.parse(t + "\n", TINY) == c for t, c in zip(texts, stories))
    tokens = [len(TOK.encode(t + "\n")) for t in texts]
    assert Fraction(sum(tokens), len(tokens)) == chains.expected_tokens(TOK, TINY)
    assert max(tokens) <= chains.longest_story(TOK, TINY)  # a bound: in TINY the names' longest can't all meet


def test_the_givers_and_the_last_sentence_follow_the_thing_along_the_chain():
    c = chains.parse("at the park, mia has a red hat. theo finds a blue boat. theo gives the boat to tom."
                     " tom gives the boat to theo. now theo has the blue boat.", TINY)
    assert c == {"place": "park", "people": [["mia", "has", "red", "hat"], ["theo", "finds", "blue", "boat"]],
                 "receivers": ["tom", "theo"]}


@pytest.mark.parametrize("text, reason", [
    ("at the park, mia has a red hat. theo finds a blue boat. mia gives the boat to tom. tom gives the boat to theo."
     " now theo has the blue boat.", "a giver, the thing handed or the last sentence"),
    ("at the park, mia has a red hat. theo finds a blue boat. theo gives the boat to tom. tom gives the boat to theo."
     " now theo has the red boat.", "a giver, the thing handed or the last sentence"),
    ("at the park, mia has a red hat. mia finds a blue boat. mia gives the boat to tom. tom gives the boat to mia."
     " now mia has the blue boat.", "person 2's name 'mia': expected one of tom, theo"),
    ("at the zoo, mia has a red hat. theo finds a blue boat. theo gives the boat to tom. tom gives the boat to theo."
     " now theo has the blue boat.", "the place 'zoo'"),
    ("at the park, mia has a red hat. theo finds a blue boat. theo gives the boat to theo. theo gives the boat to tom."
     " now tom has the blue boat.", "hand-over 1's receiver 'theo'"),
    ("mia has a red hat.", "not a story of this generator"),
])
def test_parse_refuses_what_the_generator_cannot_write_saying_why(text, reason):
    with pytest.raises(ValueError, match=reason.replace("(", r"\(")):
        chains.parse(text, TINY)


def test_draws_parse_back_are_tokenized_piece_by_piece_and_fit_the_positions():
    rng, pieces = random.Random(5), chains.piece_tokens(TOK)
    longest = chains.longest_story(TOK)
    assert longest == 63  # with the newline before it, 64 tokens: the model reads 63 and predicts 63
    lengths = []
    for _ in range(2000):
        c = chains.draw(rng)
        text = chains.story_text(c)
        assert chains.parse(text) == c
        ids = chains.story_ids(c, pieces)
        assert ids == TOK.encode(text)
        lengths.append(len(ids) + 1)
    assert max(lengths) <= longest
    assert abs(sum(lengths) / len(lengths) - float(chains.expected_tokens(TOK))) < 0.1  # about 0.9 tokens sd / 45


def test_the_longest_story_is_one_the_generator_can_write():
    """Each word of a list at its longest: a story of the world that is exactly longest_story tokens."""
    pieces = chains.piece_tokens(TOK)
    pick = {key: max(chains.WORLD[key], key=lambda w: len(pieces[" " + w])) for key in chains.LISTS}
    names = sorted(chains.WORLD["names"], key=lambda w: -len(pieces[" " + w]))
    things = sorted(chains.WORLD["things"], key=lambda w: -len(pieces[" " + w]))
    c = {"place": pick["places"], "people": [[names[0], pick["verbs"], pick["colours"], things[0]],
                                             [names[1], pick["verbs"], pick["colours"], things[1]]],
         "receivers": [names[2], names[1], names[2]]}
    text = chains.story_text(c)
    assert chains.parse(text) == c
    assert len(TOK.encode(text + "\n")) == chains.longest_story(TOK)


def test_a_story_read_straight_from_its_indices_is_the_story_its_words_make():
    """scaling_runs.story_tokens, the stream's fast path, against chains.story_ids(chains.words_of(...))."""
    from experiments import scaling_runs

    rng, pieces, table = random.Random(11), chains.piece_tokens(TOK), scaling_runs.story_table(TOK)
    for _ in range(20000):
        indices = chains.draw_indices(rng)
        assert scaling_runs.story_tokens(indices, table) == chains.story_ids(chains.words_of(indices), pieces)
        assert chains.indices_of(chains.words_of(indices)) == indices
    tiny = scaling_runs.story_table(TOK, TINY)  # (a world of its own: the lists' lengths are not WORLD's)
    for choices in every_story(TINY):
        indices = chains.indices_of(choices, TINY)
        assert scaling_runs.story_tokens(indices, tiny) == chains.story_ids(choices, chains.piece_tokens(TOK, TINY))


def test_a_training_stream_counts_its_stories_and_those_held_out_by_number():
    from experiments import scaling_runs

    newline = TOK.encode("\n")
    stream, counts = scaling_runs.training_stream(TOK, 7, 5000, held=scaling_runs.held_numbers(7, 10))
    rng, ids = random.Random(7), []
    while len(ids) < 5001:
        ids += chains.story_ids(chains.draw(rng), chains.piece_tokens(TOK)) + newline
    assert stream.dtype == np.int32 and stream.tolist() == ids
    assert counts == {"stories": ids.count(newline[0]), "distinct": counts["stories"], "held_out": 10}
    _, again = scaling_runs.training_stream(TOK, 8, 5000, held=scaling_runs.held_numbers(7, 10))
    assert again["held_out"] == 0


def test_enough_entropy_that_a_million_stories_hardly_repeat():
    assert chains.entropy() == fsum(math.log(n) for n in [8, 32, 2, 4, 10, 31, 2, 4, 9, 31, 31, 31])
    assert chains.expected_repeats(10 ** 6) < 0.5


# ----------------------------------------------------------------------------------------------------------------
# experiments/scaling.py: the grid, its record, its fits


def assert_fresh(streams):
    """Each seed's stream of stories: none held out, and repeats only as often as chance allows (Poisson's chance of
    that many or more, with chains.expected_repeats's mean, above one in a million)."""
    for s in streams.values():
        repeats, expected = s["stories"] - s["distinct"], chains.expected_repeats(s["stories"])
        at_least = 1 - fsum(math.exp(-expected) * expected ** k / math.factorial(k) for k in range(repeats))
        assert s["held_out"] == 0 and at_least > 1e-6, (s, expected)


def split_cells(record, plan):
    """The cells (size, budget) whose three seeds span more than the plan's split, found again here."""
    first = {}
    for run in record["runs"]:
        cell = record["cells"][run["size"]][str(run["budget"])]
        if run["lr"] == cell["lr"] and run["seed"] in plan["seeds"]:
            first.setdefault((run["size"], run["budget"]), []).append(run["val"])
    return [key for key, v in first.items() if max(v) - min(v) > plan["split"]]


def scaling_record():
    pytest.importorskip("scipy")
    from experiments import scaling

    if not scaling.RECORD_FILE.exists():
        pytest.fail(f"{scaling.RECORD_FILE.name} is missing; run python3 -m experiments.scaling")
    import json

    return scaling, json.loads(scaling.RECORD_FILE.read_text(encoding="utf-8"))


def test_committed_record_meets_the_issues_conditions_and_fits_the_budget():
    """(That its every summary is what its runs give, check_record's answer with its thousands of bootstrap fits, is
    docs/scaling.md's `--check`, which tests/test_readme.py runs: fitted there, not a third time here.)"""
    scaling, r = scaling_record()
    assert r["command"] == "python3 -m experiments.scaling" and r["seconds"] <= 3 * 60 * 60  # three hours, every core
    parameters = [r["settings"]["parameters"][scaling.name_of(s)] for s in scaling.FULL["sizes"]]
    budgets = r["settings"]["budgets"]
    assert len(parameters) >= 5 and parameters[-1] / parameters[0] >= 20 and len(budgets) >= 4 and (
        budgets[-1] / budgets[0] >= 16)
    c = r["conditions"]
    assert c["frontier_fall"] >= 10 and c["largest_gain_beyond_seeds"] and c["best_validation_error"] <= 0.1
    front = r["frontier"]  # found again here: the least mean loss of each budget, with NumPy
    for f in front:
        means = {size: np.mean(cells[str(f["budget"])]["val"]["by_seed"]) for size, cells in r["cells"].items()}
        assert f["best_size"] == min(means, key=means.get)
    assert_fresh(r["data"]["streams"])
    for name in ("free_floor", "true_floor"):  # every interval holds its point estimate
        fit = r["fits"][name]
        for key in ("alpha", "beta"):
            assert fit["intervals"][key][0] <= fit[key] <= fit["intervals"][key][1], (name, key)


def test_check_record_names_what_is_wrong():
    scaling, r = scaling_record()
    r["runs"][5]["flops"] += 1
    with pytest.raises(ValueError, match="flops are not the formula's"):
        scaling.check_record(r, scaling.FULL)
    with pytest.raises(ValueError, match="settings .* are not this code's"):
        scaling.check_record(scaling_record()[1], scaling.REDUCED)


def test_a_rerun_gives_each_verdict_on_records_made_up_around_its_loss():
    scaling, r = scaling_record()
    size, budget = scaling.name_of(scaling.FULL["sizes"][-1]), scaling.FULL["budgets"][0]
    lr = r["cells"][size][str(budget)]["lr"]
    runs = [run for run in r["runs"] if (run["size"], run["budget"], run["lr"]) == (size, budget, lr)]
    step = runs[0]["tune_curve"][1][0]  # the first point after step 0, as --rerun's default
    verdicts_on_made_up_records(lambda rec: scaling.rerun(rec, size, budget, 4, step), r, runs, 4, step)


def test_the_committed_grid_trained_more_seeds_where_its_seeds_split_and_reruns_only_those(capsys):
    scaling, r = scaling_record()
    split = split_cells(r, scaling.FULL)
    assert split and len(r["runs"]) == scaling.grid_cost(scaling.FULL)[0] + 2 * len(split)
    for size, budget in split:
        assert len(r["cells"][size][str(budget)]["val"]["by_seed"]) == 5
    whole = next((size, budget) for size in r["cells"] for budget in r["cells"][size]
                 if (size, int(budget)) not in split)
    with pytest.raises(SystemExit) as e:  # refused before training, naming the seeds the cell has
        scaling.main(["--rerun", whole[0], "--budget", whole[1], "--seed", "7"])
    assert e.value.code == 2 and f"--seed 7: {whole[0]} at {whole[1]} FLOPs has the seeds [3, 4, 5] (its seeds" in (
        capsys.readouterr().err)
    args = argparse.Namespace(rerun=split[0][0], budget=split[0][1], seed=7)  # a cell that split: its seed 7 reruns
    assert scaling.rerun_cell(argparse.ArgumentParser(allow_abbrev=False), args, r)[0] == {
        "size": split[0][0], "budget": split[0][1]}


def test_the_grid_costs_what_its_formula_says():
    """grid_cost counts the FLOPs of every run by formula, as the runs record them."""
    scaling, r = scaling_record()
    runs, flops, tokens = scaling.grid_cost(scaling.FULL)
    fixed = [x for x in r["runs"] if x["seed"] in scaling.FULL["seeds"]]  # (the split seeds' runs come on top)
    assert (runs, flops, tokens) == (len(fixed), sum(x["flops"] for x in fixed), sum(x["tokens"] for x in fixed))

