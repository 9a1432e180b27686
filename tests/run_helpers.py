"""Helpers shared by the tests of your own text: a text like the ones learners bring."""

import random


def own_text(lines=120, seed=0):
    """A few KB of text from a seeded generator, one sentence a line, with capitals, digits, punctuation and
    non-ASCII letters: the kind of file a learner brings.

    >>> own_text(2)
    'Mia finds 7 balls: “Ørjan, take it!”\\nMia gives 40 Straßenbahnen to Ørjan; now Ørjan has them (40).\\n'
    """
    rng = random.Random(seed)
    names = ["Zoë", "Åsa", "Jürgen", "Mia", "Léa", "Ørjan"]
    things = ["Kaffee", "crème brûlée", "balls", "Straßenbahnen", "books"]
    out = []
    for _ in range(lines):
        a, b = rng.sample(names, 2)
        n, thing = rng.randint(2, 99), rng.choice(things)
        if rng.random() < 0.5:
            out.append(f"{a} gives {n} {thing} to {b}; now {b} has them ({n}).")
        else:
            out.append(f"{a} finds {n} {thing}: “{b}, take it!”")
    return "".join(line + "\n" for line in out)
