"""Harder stories for the scaling experiment: a thing handed along a chain of three among thirty-two names, beside
another that stays put; every story's probability known exactly, and enough entropy per story that no training run
reads one twice.

Why, what a story is and what a model must learn from it: docs/scaling.md's "The data". The choices and their
options: `options`; the rest follows from them (`sentences`). Every choice is uniform, so every story has the same
probability, one over their number (`stories`), the generator's entropy is its log in nats a story (`entropy`), and
`expected_repeats` says how many equal pairs a number of draws holds.

Stories use only words that the shipped tokenizer.json spells in at most two tokens (the places in at most four),
so that the longest story with its newline fits the model's 64 positions (`longest_story`). `story_ids` encodes a
story from its pieces (bpe.pretokenize's) without reading its text (tests/test_scaling.py checks it against the
tokenizer's encode).

    >>> choices = draw(random.Random(0))
    >>> print(story_text(choices).replace(". ", ".\\n"))
    at the bank, tod has a green boat.
    cam finds a green bag.
    cam gives the bag to bob.
    bob gives the bag to finn.
    finn gives the bag to teo.
    now teo has the green bag.
    >>> parse(story_text(choices)) == choices
    True

The world is a dict (WORLD), so that a tiny world can be enumerated whole (tests/test_scaling.py; `index_number`).
"""

import math
import random  # noqa: F401  (the example above)
import re
from fractions import Fraction
from math import fsum

# ----------------------------------------------------------------------------------------------------------------
# The world: what a story chooses from

WORLD = {
    "names": ["mia", "ava", "leo", "sam", "ben", "zoe", "tom", "kim", "ken", "pam", "nat", "bob", "nia", "tia", "gia",
              "cam", "kat", "theo", "cleo", "finn", "pat", "han", "pia", "kia", "gil", "tam", "tod", "hal", "sami",
              "teo", "fia", "kam"],  # the first six are the seed corpus's, one token each; the others one or two
    "things": ["hat", "ball", "cup", "kite", "book", "kit", "pen", "bag", "boat", "car"],
    "colours": ["red", "blue", "green", "brown"],  # the tokenizer's one-token colours
    "places": ["garden", "park", "farm", "town", "barn", "camp", "bank", "hut"],
    "verbs": ["has", "finds"],  # how a person comes to hold a thing at the start
    "people": 2,  # people with a thing at the start; the last one's thing is handed on
    "handovers": 3,  # hand-overs in every story
}
LISTS = ("places", "names", "verbs", "colours", "things")  # what a choice picks from (a receiver: from the names)


def options(world=WORLD):
    """(list, number of options) of each choice a story makes, in the order they are drawn: the place; per person
    a name (not one before it), a verb, a colour and a thing (not one before it); per hand-over the receiver (any
    name but the giver's).

    >>> [n for _, n in options()]
    [8, 32, 2, 4, 10, 31, 2, 4, 9, 31, 31, 31]
    """
    slots = [("places", len(world["places"]))]
    for i in range(world["people"]):
        slots += [("names", len(world["names"]) - i), ("verbs", len(world["verbs"])),
                  ("colours", len(world["colours"])), ("things", len(world["things"]) - i)]
    return slots + [("names", len(world["names"]) - 1)] * world["handovers"]


# ----------------------------------------------------------------------------------------------------------------
# One story: its choices as numbers and as words, its text


def untaken(words, people, k):
    """The words of a list that no person before has as their k-th word (0: the name, 3: the thing), in order.

    >>> untaken(["hat", "cup", "pen"], [["mia", "has", "red", "cup"]], 3)
    ['hat', 'pen']
    """
    return [w for w in words if w not in [p[k] for p in people]]


def words_of(indices, world=WORLD):
    """The choices {"place", "people": [[name, verb, colour, thing], ...], "receivers": [...]} that option indices
    (one per choice of `options`, each below its count) pick: a name or thing from the list without the ones taken
    before it, a receiver from the names without the giver's, in the lists' order.

    >>> choices = words_of([1, 0, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0])
    >>> choices["place"], choices["people"]
    ('park', [['mia', 'has', 'red', 'hat'], ['ava', 'finds', 'green', 'ball']])
    >>> choices["receivers"]
    ['mia', 'ava', 'mia']
    """
    picks = iter(indices)
    place = world["places"][next(picks)]
    people = []
    for _ in range(world["people"]):
        name = untaken(world["names"], people, 0)[next(picks)]
        verb, colour = world["verbs"][next(picks)], world["colours"][next(picks)]
        people.append([name, verb, colour, untaken(world["things"], people, 3)[next(picks)]])
    receivers, holder = [], people[-1][0]
    for _ in range(world["handovers"]):
        holder = [n for n in world["names"] if n != holder][next(picks)]
        receivers.append(holder)
    return {"place": place, "people": people, "receivers": receivers}


def indices_of(choices, world=WORLD):
    """The option indices that words_of turns into these choices; a ValueError names the first choice the
    generator could not have made there.

    >>> indices_of(words_of([1, 0, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0]))
    [1, 0, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0]
    """
    def index(what, value, allowed):
        if value not in allowed:
            raise ValueError(f"{what} {value!r}: expected one of {', '.join(allowed)}")
        return allowed.index(value)

    if len(choices["people"]) != world["people"] or len(choices["receivers"]) != world["handovers"]:
        raise ValueError(f"{len(choices['people'])} people and {len(choices['receivers'])} hand-overs: expected"
                         f" {world['people']} and {world['handovers']}")
    out = [index("the place", choices["place"], world["places"])]
    for i, (name, verb, colour, thing) in enumerate(choices["people"]):
        before = choices["people"][:i]
        out += [index(f"person {i + 1}'s name", name, untaken(world["names"], before, 0)),
                index(f"person {i + 1}'s verb", verb, world["verbs"]),
                index(f"person {i + 1}'s colour", colour, world["colours"]),
                index(f"person {i + 1}'s thing", thing, untaken(world["things"], before, 3))]
    holder = choices["people"][-1][0]
    for k, receiver in enumerate(choices["receivers"]):
        out.append(index(f"hand-over {k + 1}'s receiver", receiver, [n for n in world["names"] if n != holder]))
        holder = receiver
    return out


def draw(rng, world=WORLD):
    """One story's choices, every option of every choice alike, drawn with rng."""
    return words_of(draw_indices(rng, world), world)


def draw_indices(rng, world=WORLD):
    """One story's option indices (words_of's), drawn with rng: each choice's index uniform below its count.

    >>> draw_indices(random.Random(0))
    [6, 26, 0, 2, 8, 15, 1, 2, 7, 11, 18, 28]
    """
    return [rng.randrange(n) for _, n in options(world)]


def index_number(indices, world=WORLD):
    """The story's number among all the world's stories, 0 to count - 1: its option indices read as the digits of a
    number whose digit k counts up to choice k's options (two stories are the same story when their numbers are
    equal).

    >>> index_number([0] * 12), index_number([0] * 11 + [1]), index_number([1] + [0] * 11)
    (0, 1, 170223390720)
    """
    n = 0
    for (_, count), i in zip(options(world), indices):
        n = n * count + i
    return n


def sentences(choices):
    """The story's sentences as lists of words: the givers, the thing handed and the last sentence follow from the
    choices.

    >>> for sentence in sentences(words_of([1, 0, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0]))[3:]:
    ...     print(sentence)
    ['ava', 'gives', 'the', 'ball', 'to', 'mia']
    ['mia', 'gives', 'the', 'ball', 'to', 'ava']
    ['ava', 'gives', 'the', 'ball', 'to', 'mia']
    ['now', 'mia', 'has', 'the', 'green', 'ball']
    """
    holder, _, colour, thing = choices["people"][-1]
    out = [["at", "the", choices["place"]], *[[name, verb, "a", c, t] for name, verb, c, t in choices["people"]]]
    for receiver in choices["receivers"]:
        out.append([holder, "gives", "the", thing, "to", receiver])
        holder = receiver
    return out + [["now", holder, "has", "the", colour, thing]]


def story_pieces(choices):
    """The story's text as bpe.pretokenize cuts it: each word with the space before it (the first without), each
    comma and full stop alone.

    >>> story_pieces(words_of([1, 0, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0]))[:8]
    ['at', ' the', ' park', ',', ' mia', ' has', ' a', ' red']
    """
    pieces = []
    for k, sentence in enumerate(sentences(choices)):
        pieces += [(" " if pieces else "") + sentence[0]] + [" " + word for word in sentence[1:]]
        pieces.append("," if k == 0 else ".")
    return pieces


def story_text(choices):
    """The story as one line of text (no newline)."""
    return "".join(story_pieces(choices))


# ----------------------------------------------------------------------------------------------------------------
# A story's text back to its choices, and its probability


def parse(text, world=WORLD):
    """The one set of choices that makes text (a story, with or without its newline); a ValueError if no choices
    do, naming what the generator could not have written.

    >>> parse("at the park, mia has a red hat. leo finds a blue cup. leo gives the cup to ava."
    ...       " ava gives the cup to mia. mia gives the cup to leo. now leo has the blue cup.")["receivers"]
    ['ava', 'mia', 'leo']
    """
    word = "([a-z]+)"  # (every word of the story read into a group)
    person, handover = rf" {word} {word} a {word} {word}\.", rf" {word} gives the {word} to {word}\."
    pattern = (rf"at the {word},{person * world['people']}{handover * world['handovers']} now {word} has the"
               rf" {word} {word}\.")
    m = re.fullmatch(pattern, text[:-1] if text.endswith("\n") else text)
    if m is None:
        raise ValueError(f"{text[:50]!r}...: not a story of this generator (expected: at the PLACE, then"
                         f" {world['people']} people with a thing, {world['handovers']} hand-overs and who has it now)")
    words, people = m.groups(), world["people"]
    choices = {"place": words[0], "people": [list(words[1 + 4 * i:5 + 4 * i]) for i in range(people)],
               "receivers": [words[3 + 4 * people + 3 * k] for k in range(world["handovers"])]}
    indices_of(choices, world)  # every choice one the world allows
    if story_text(choices) != m.group(0):
        raise ValueError(f"{text[:50]!r}...: a giver, the thing handed or the last sentence is not what the story's"
                         f" choices make: {story_text(choices)[-60:]!r}")
    return choices


# ----------------------------------------------------------------------------------------------------------------
# What the generator holds: its entropy, its lengths, its repeats


def stories(world=WORLD):
    """How many different stories the world can write: the product of every choice's options.

    >>> f"{stories():.3e}"
    '1.362e+12'
    """
    return math.prod(n for _, n in options(world))


def entropy(world=WORLD):
    """The entropy of one story in nats: every story has the same probability, 1 / stories(), so it is the log of
    their number.

    >>> round(entropy(), 4)
    27.9398
    """
    return fsum(math.log(n) for _, n in options(world))


def expected_repeats(count, world=WORLD):
    """How many pairs of equal stories count draws are expected to hold: pairs of draws times the chance that two
    are the same story.

    >>> round(expected_repeats(1_000_000), 2)
    0.37
    """
    return count * (count - 1) / 2 / stories(world)


def piece_tokens(tok, world=WORLD):
    """{piece: its token IDs} for every piece a story of the world can have."""
    words = ["the", "a", "gives", "to", "now", "has", *(w for key in LISTS for w in world[key])]
    return {piece: tok.encode(piece) for piece in ["at", ",", "."] + [" " + w for w in dict.fromkeys(words)]}


def story_ids(choices, pieces):
    """The token IDs of a story (no newline), from its pieces and piece_tokens's table."""
    return [i for piece in story_pieces(choices) for i in pieces[piece]]


def slot_tokens(tok, world, pick):
    """The tokens of a story, its newline included, if each of its words of a list is the one pick(list) gives
    (a number: a count, or a mean) and every other word is as it always is: a story's words of the lists are its
    place, its people's names, verbs, colours and things, each giver and receiver, and the last sentence's name,
    colour and thing."""
    pieces = piece_tokens(tok, world)
    n = lambda *fixed: sum(len(pieces[p]) for p in fixed)  # noqa: E731
    length = n("at", " the", ",") + pick("places")
    length += world["people"] * (n(" a", ".") + pick("names") + pick("verbs") + pick("colours") + pick("things"))
    length += world["handovers"] * (n(" gives", " the", " to", ".") + 2 * pick("names") + pick("things"))
    return length + n(" now", " has", " the", ".") + pick("names") + pick("colours") + pick("things") + 1


def expected_tokens(tok, world=WORLD):
    """The mean tokens of a story with its newline, exactly (a Fraction). The generator treats the words of a list
    alike, so each word of a story, on its own, is any of its list's words alike; a story's mean length is then its
    fixed words' tokens plus, for each of its words of a list, the mean tokens of that list's words.

    >>> float(expected_tokens(__import__("bpe").Tokenizer.load("tokenizer.json")))
    56.8375
    """
    pieces = piece_tokens(tok, world)
    return slot_tokens(tok, world, lambda key: Fraction(sum(len(pieces[" " + w]) for w in world[key]),
                                                        len(world[key])))


def longest_story(tok, world=WORLD):
    """At most how many tokens a story has with its newline: each of its words of a list at the longest of the list
(a bound that the world's stories reach, since its lists hold enough longest words for distinct names and things).

    >>> longest_story(__import__("bpe").Tokenizer.load("tokenizer.json"))
    63
    """
    pieces = piece_tokens(tok, world)
    return slot_tokens(tok, world, lambda key: max(len(pieces[" " + w]) for w in world[key]))
