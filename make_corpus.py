"""Make corpus.txt: short lowercase stories about who has what, one per line.

Every story is a template (a "shape") with a few slots filled by uniform random
choices from small word lists. Every story hands an object from one person to
another ("x gives the hat to y") and later says who has it ("now y has the
hat"), so who-has-what depends on word order.

    python3 make_corpus.py          # (re)write corpus.txt next to this script
    python3 make_corpus.py --check  # exit 1 with a one-line reason if it differs

The generator is seeded, so the file is the same byte for byte on every run and
every Python version (3.10 to 3.13). Each story can be parsed back into the exact
choices that made it, which gives its probability under the generator:
story_log_prob(text) is the natural log of that probability, and
generator_entropy() is the entropy of a story in nats.
"""

import argparse
import math
import random
import re
import sys
from pathlib import Path

from atomic import write_atomic

# ----------------------------------------------------------------------------
# settings

SEED = 7                        # seed of the one random.Random that makes the corpus
N_STORIES = 3000                # lines in corpus.txt, the fixed first story included
CORPUS_FILE = "corpus.txt"      # written next to this script

CAST = ["mia", "ava", "leo", "sam", "ben", "zoe"]      # the people
THINGS = ["hat", "ball", "cup", "kite", "book"]        # what they hand over
COLOURS = ["red", "blue", "green", "brown"]            # what the things look like
PLACES = ["garden", "park", "beach", "shop"]           # where it happens

# Slot name -> the list its value comes from. Name slots (x, y, z) are drawn
# from CAST without repeats: y is never x, z is neither x nor y.
SLOT_WORDS = {"x": CAST, "y": CAST, "z": CAST, "colour": COLOURS, "thing": THINGS, "place": PLACES}
NAME_SLOTS = ("x", "y", "z")

# The story shapes, each chosen with the same probability. Every one has a
# transfer "x gives the thing to y" followed by who has the thing now.
SHAPES = {
    "walk": "{x} has a {colour} {thing}. {x} goes to the {place}. at the {place}, {x} gives the {thing} to {y}."
            " now {y} has the {colour} {thing}.",
    "gift": "{x} has a {colour} {thing}. {x} gives the {thing} to {y}. now {y} has the {thing}.",
    "pass": "{x} has a {colour} {thing}. {x} gives the {thing} to {y}. then {y} gives the {thing} to {z}."
            " now {z} has the {colour} {thing}.",
    "find": "at the {place}, {x} finds a {colour} {thing}. {x} gives the {thing} to {y}. now {y} has the {thing}.",
}

# The first line of the corpus, fixed by the spec (test_model.py holds its text); it is a "walk" story.
FIRST_SHAPE = "walk"
FIRST_CHOICES = {"x": "mia", "colour": "red", "thing": "hat", "place": "garden", "y": "ava"}

# ----------------------------------------------------------------------------
# one story: slots, choices, log-probability


def slot_order(shape):
    """The slots of a shape in the order they are drawn (first appearance).

    >>> slot_order("gift")
    ['x', 'colour', 'thing', 'y']
    """
    if shape not in SHAPES:
        raise ValueError(f"unknown story shape {shape!r}; expected one of {sorted(SHAPES)}")
    order = []
    for slot in re.findall(r"\{(\w+)\}", SHAPES[shape]):
        if slot not in order:
            order.append(slot)
    return order


def slot_options(slot, chosen):
    """The words a slot can take, given the choices drawn before it.

    >>> slot_options("y", {"x": "mia"})
    ['ava', 'leo', 'sam', 'ben', 'zoe']
    """
    if slot in NAME_SLOTS:
        taken = [chosen[s] for s in NAME_SLOTS if s in chosen]
        return [name for name in CAST if name not in taken]
    return SLOT_WORDS[slot]


def choices_log_prob(shape, choices):
    """Natural log of the probability that the generator draws exactly these choices.

    >>> round(choices_log_prob("gift", {"x": "mia", "colour": "red", "thing": "hat", "y": "ava"}), 4)
    -7.7832
    """
    logp = -math.log(len(SHAPES))
    chosen = {}
    for slot in slot_order(shape):
        if slot not in choices:
            raise ValueError(f"shape {shape!r} needs a value for slot {slot!r}; got only {sorted(choices)}")
        options = slot_options(slot, chosen)
        if choices[slot] not in options:
            raise ValueError(f"slot {slot!r} cannot be {choices[slot]!r} here; expected one of {options}")
        chosen[slot] = choices[slot]
        logp -= math.log(len(options))
    return logp


def render(shape, choices):
    """The text of a story from its shape and choices (no newline).

    >>> render("gift", {"x": "mia", "colour": "red", "thing": "hat", "y": "ava"})
    'mia has a red hat. mia gives the hat to ava. now ava has the hat.'
    """
    choices_log_prob(shape, choices)  # validates the choices
    return SHAPES[shape].format(**choices)


def draw_choices(shape, pick):
    """The choices of one story of this shape: each slot's word is pick(the words it can take), slot by slot in the
    order they are drawn.

    >>> draw_choices("gift", lambda words: words[0])
    {'x': 'mia', 'colour': 'red', 'thing': 'hat', 'y': 'ava'}
    """
    chosen = {}
    for slot in slot_order(shape):
        chosen[slot] = pick(slot_options(slot, chosen))
    return chosen


# ----------------------------------------------------------------------------
# reading a story back into its choices


def _shape_regex(shape):
    """A regex that matches exactly the texts of one shape, one named group per slot."""
    parts, seen = [], set()
    for literal, slot in re.findall(r"([^{]*)(?:\{(\w+)\})?", SHAPES[shape]):
        parts.append(re.escape(literal))
        if slot:
            parts.append(f"(?P={slot})" if slot in seen else f"(?P<{slot}>[a-z]+)")
            seen.add(slot)
    return re.compile("".join(parts))


SHAPE_REGEXES = {shape: _shape_regex(shape) for shape in sorted(SHAPES)}


def parse_story(text):
    """Recover (shape, choices) from a story's text; exactly one shape must fit.

    >>> parse_story("mia has a red hat. mia gives the hat to ava. now ava has the hat.")
    ('gift', {'x': 'mia', 'colour': 'red', 'thing': 'hat', 'y': 'ava'})
    """
    text = text[:-1] if text.endswith("\n") else text
    found = []
    for shape, regex in SHAPE_REGEXES.items():
        m = regex.fullmatch(text)
        if m:
            found.append((shape, {slot: m.group(slot) for slot in slot_order(shape)}))
    if len(found) != 1:
        names = [shape for shape, _ in found]
        raise ValueError(f"story {text!r} fits {len(found)} shapes {names}; expected exactly one")
    shape, choices = found[0]
    choices_log_prob(shape, choices)  # raises if a word is not one the generator could draw
    return shape, choices


def story_log_prob(text):
    """Natural log of the probability that the generator writes this story."""
    return choices_log_prob(*parse_story(text))


def generator_entropy():
    """Entropy of one story in nats.

    Shapes are equally likely and, within a shape, every story has the same
    probability (each slot has a fixed number of options), so the entropy is the
    mean over shapes of -log p of any one story of that shape (here the one of the first word each slot can take).
    """
    total = 0.0
    for shape in SHAPES:
        total -= choices_log_prob(shape, draw_choices(shape, lambda words: words[0]))
    return total / len(SHAPES)


# ----------------------------------------------------------------------------
# the corpus


def generate():
    """The corpus as a list of N_STORIES (text, log-probability) pairs, text without newline.

    The first story is FIRST_CHOICES of FIRST_SHAPE; the rest come from one random.Random(SEED).
    """
    stories = [(render(FIRST_SHAPE, FIRST_CHOICES), choices_log_prob(FIRST_SHAPE, FIRST_CHOICES))]
    rng = random.Random(SEED)
    while len(stories) < N_STORIES:  # a shape, then its slots, every choice drawn with rng
        shape = rng.choice(sorted(SHAPES))
        chosen = draw_choices(shape, rng.choice)
        stories.append((render(shape, chosen), choices_log_prob(shape, chosen)))
    return stories


def corpus_text():
    """The whole corpus file as one string: one story per line, each ending with a newline."""
    return "".join(text + "\n" for text, _ in generate())


def check(path):
    """None if the file at path equals a fresh generation, else a one-line reason."""
    path = Path(path)
    if not path.exists():
        return f"{path.name} is missing; run python3 make_corpus.py to write it"
    want = corpus_text().encode("utf-8")
    have = path.read_bytes()
    if have == want:
        return None
    have_lines, want_lines = have.split(b"\n"), want.split(b"\n")
    for i, (a, b) in enumerate(zip(have_lines, want_lines)):
        if a != b:
            return f"{path.name} differs from the generator at line {i + 1}; run python3 make_corpus.py to rewrite it"
    return (f"{path.name} has {len(have)} bytes but the generator makes {len(want)};"
            f" run python3 make_corpus.py to rewrite it")


# ----------------------------------------------------------------------------
# command line

if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="Write corpus.txt, or check it with --check.", allow_abbrev=False)
    parser.add_argument("--check", action="store_true", help="exit 1 if corpus.txt differs from a fresh generation")
    args = parser.parse_args()
    out = Path(__file__).resolve().parent / CORPUS_FILE
    if args.check:
        reason = check(out)
        if reason:
            print(f"NOT OK: {reason}")
            sys.exit(1)
        print(f"OK: {CORPUS_FILE} matches the generator ({N_STORIES} stories)")
    else:
        text = corpus_text()
        write_atomic(out, text)
        print(f"wrote {CORPUS_FILE}: {N_STORIES} stories, {len(text.encode('utf-8'))} bytes,"
              f" {generator_entropy():.4f} nats per story")
