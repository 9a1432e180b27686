"""experiments/chains.py: a tiny world enumerated whole is a probability distribution whose every story parses back
to the choices that made it; the full world's stories parse back, are tokenized piece by piece as the tokenizer
encodes them, and fit the model's positions."""

import itertools
import math
import random
from fractions import Fraction
from math import fsum
from pathlib import Path

import pytest

import bpe
from experiments import chains

ROOT = Path(__file__).resolve().parent.parent
TOK = bpe.Tokenizer.load(ROOT / "tokenizer.json")
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
    assert sorted(chains.number(c, TINY) for c in stories) == list(range(len(stories)))
    assert math.isclose(fsum(math.exp(chains.story_log_prob(t, TINY)) for t in texts), 1.0, rel_tol=1e-12)
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
        assert chains.parse(text) == c and chains.story_log_prob(text) == -chains.entropy()
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


def test_enough_entropy_that_a_million_stories_hardly_repeat():
    assert chains.entropy() == fsum(math.log(n) for n in [8, 32, 2, 4, 10, 31, 2, 4, 9, 31, 31, 31])
    assert chains.expected_repeats(10 ** 6) < 0.5
