"""The loss floor: the lowest loss any model can reach on corpus.txt, in nats per token.

    python3 -m oneblock.floor          # (re)write corpus-entropy.json, the record beside this module
    python3 -m oneblock.floor --check  # exit 1 with a one-line reason if it differs from a fresh computation

make_corpus.py knows the probability p of every story it writes: the product of its random choices. A story's text
determines its choices (make_corpus.parse_story finds exactly one way to make it), and the text determines its tokens,
so no model can predict a story's tokens better than the generator itself does, on average. A model that reads a
story from its start (right after the newline that ends the story before it) and predicts each of its tokens, the
final newline included, pays at best -log p nats for the whole story. Summed over the corpus and divided by the
number of tokens, that is the floor every reported loss should be read against:

    floor = sum over stories of -log p(story) / sum over stories of tokens(story + newline)

    >>> import bpe
    >>> tok = bpe.Tokenizer.load(ROOT / "tokenizer.json")
    >>> nats, tokens = story_floor(["mia has a red hat. mia gives the hat to ava. now ava has the hat."], tok)
    >>> math.isclose(nats, math.log(4 * 6 * 4 * 5 * 5), rel_tol=1e-15)  # "gift": 4 shapes, 6 givers, 4 colours, ...
    True
    >>> round(nats, 4), tokens, round(nats / tokens, 4)  # ... 5 things, 5 receivers; 20 tokens with the newline
    (7.7832, 20, 0.3892)
"""

import argparse
import json
import math
import sys
from math import fsum
from pathlib import Path

from atomic import write_atomic
import bpe
from bpe import CORPUS_FILE, TOKENIZER_FILE  # the stories, one per line, and the tokenizer that counts their tokens
import make_corpus
from oneblock.tensorfile import sha256_file, sha256_text

# ----------------------------------------------------------------------------
# settings

ROOT = Path(__file__).resolve().parent.parent  # the lab's folder, where the corpus and its tokenizer are
ENTROPY_FILE = "corpus-entropy.json"        # what this module writes, beside itself
RECORD = Path(__file__).resolve().parent / ENTROPY_FILE
COMMAND = "python3 -m oneblock.floor"       # writes it
FORMAT = "one-block corpus entropy v1"      # the "format" field of that file

# ----------------------------------------------------------------------------
# the floor of a list of stories


def story_floor(stories, tok):
    """(total -log p in nats, total tokens) of stories given without their newline; tokens include the newline.

    Every sum goes through math.fsum, so the result does not depend on the order of the stories.
    """
    nats = fsum(-make_corpus.story_log_prob(text) for text in stories)
    tokens = sum(len(tok.encode(text + "\n")) for text in stories)
    return nats, tokens


def fresh_text(folder=ROOT):
    """corpus-entropy.json as it should be for the corpus and tokenizer in folder (its keys in this order)."""
    corpus = (Path(folder) / CORPUS_FILE).read_text(encoding="utf-8")
    tok = bpe.Tokenizer.load(Path(folder) / TOKENIZER_FILE)
    stories = corpus.splitlines()
    if not stories or corpus != "".join(s + "\n" for s in stories):
        raise ValueError("the corpus must be non-empty stories, one per line, each ending with a newline")
    nats, tokens = story_floor(stories, tok)
    record = {
        "format": FORMAT,
        "corpus": CORPUS_FILE,
        "corpus_sha256": sha256_text(corpus),
        "tokenizer_sha256": sha256_file(Path(folder) / TOKENIZER_FILE),
        "stories": len(stories),
        "tokens": tokens,
        "total_nats": nats,
        "nats_per_story": nats / len(stories),
        "nats_per_token": nats / tokens,
        "uniform_nats_per_token": math.log(len(tok.vocab)),
        "note": "nats_per_token is the lowest mean loss any model can expect on these stories: the generator's own"
                " -log p per story, divided by the story's tokens (its newline included)",
    }
    return json.dumps(record, indent=2) + "\n"


def load_floor():
    """The floor in nats per token from the record (corpus-entropy.json) of the lab's corpus; a missing or stale
    record is a ValueError saying so."""
    if not RECORD.exists():
        raise ValueError(f"{ENTROPY_FILE} is missing; run {COMMAND} to write it")
    record = json.loads(RECORD.read_text(encoding="utf-8"))
    if record.get("format") != FORMAT:
        raise ValueError(f"{ENTROPY_FILE} has format {record.get('format')!r}, expected {FORMAT!r};"
                         f" run {COMMAND} to rewrite it")
    if record.get("corpus_sha256") != sha256_file(ROOT / CORPUS_FILE):
        raise ValueError(f"{ENTROPY_FILE} was computed for another {CORPUS_FILE}; run {COMMAND} to rewrite it")
    return record["nats_per_token"]


def check(folder=ROOT, record=RECORD):
    """None if the record (corpus-entropy.json) equals a fresh computation on the corpus in folder, else a one-line
    reason."""
    path = Path(record)
    if not path.exists():
        return f"{ENTROPY_FILE} is missing; run {COMMAND} to write it"
    if path.read_text(encoding="utf-8") != fresh_text(folder):
        return f"{ENTROPY_FILE} differs from a fresh computation on {CORPUS_FILE}; run {COMMAND} to rewrite it"
    return None


# ----------------------------------------------------------------------------
# command line

if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="Write corpus-entropy.json: the corpus's entropy in nats per token,"
                                                 " the floor under every loss this model can report.",
                                     allow_abbrev=False)
    parser.add_argument("--check", action="store_true", help="exit 1 if corpus-entropy.json differs from a fresh"
                                                             " computation")
    args = parser.parse_args()
    if args.check:
        reason = check()
        if reason:
            print(f"NOT OK: {reason}")
            sys.exit(1)
        print(f"OK: {ENTROPY_FILE} matches {CORPUS_FILE} and {TOKENIZER_FILE}")
    else:
        text = fresh_text()
        write_atomic(RECORD, text)
        record = json.loads(text)
        print(f"wrote {ENTROPY_FILE}: {record['stories']} stories, {record['tokens']} tokens,"
              f" {record['nats_per_token']:.4f} nats per token"
              f" (uniform guessing: {record['uniform_nats_per_token']:.4f})")
