"""The data a run reads: the stories of corpus.txt split by whole stories, or a text of your own split by lines or
documents, its tokenizer, the validation sequences, and the floors to read a loss against.

The split of the stories: the last val_stories lines of corpus.txt are the validation set, the others are training
text. The validation loss reads each validation story from its start (after a newline, as in the corpus), as the
floor (floor.py) does: "val 0.35, floor 0.31" means 0.04 nats per token left to learn.

A text of your own (settings.data) gets the tokenizer settings.tokenizer names, or one trained on it (bpe.py,
vocab_size tokens); how it is split (`split_text`), read for validation (`windows`), and scored without a floor
(`unigram_loss`): docs/own-text.md, "What changes compared with the stories".

    >>> data = prepare(checked(Settings(val_stories=20, backend="python")))
    >>> data.vocab, len(data.val_ids), round(data.val_floor, 4)
    (96, 20, 0.3096)
"""

import hashlib
import math
from collections import Counter
from math import fsum
from pathlib import Path
from types import SimpleNamespace

from atomic import read_whole
import bpe
from oneblock import checkpoint, floor
from oneblock.settings import VAL_BATCH, Settings, checked  # noqa: F401  (checked: the example above)

ROOT = Path(__file__).resolve().parent.parent  # the lab's folder
CORPUS_FILE = ROOT / "corpus.txt"
TOKENIZER_FILE = ROOT / "tokenizer.json"

# ----------------------------------------------------------------------------------------------------------------
# The stories: a split by whole stories


def load_data(tok, val_stories, seq_len, max_len=Settings.max_len):
    """(training token stream, validation stories as texts, validation stories as token lists: each the newline
    before it, the story and its newline)."""
    stories = CORPUS_FILE.read_text(encoding="utf-8").splitlines()
    if val_stories >= len(stories):
        raise ValueError(f"--val-stories {val_stories} leaves no training stories: the corpus has {len(stories)};"
                         f" expected fewer than {len(stories)}")
    train, val = stories[:-val_stories], stories[-val_stories:]
    stream = tok.encode("".join(s + "\n" for s in train))  # (n,) one long list of token IDs
    if len(stream) <= seq_len:
        raise ValueError(f"the training text has {len(stream)} tokens, too few for windows of {seq_len} + 1")
    newline = tok.encode("\n")
    val_ids = [newline + tok.encode(s + "\n") for s in val]
    longest = max(len(ids) - 1 for ids in val_ids)
    if longest > max_len:
        raise ValueError(f"a validation story needs {longest} positions, more than the model's {max_len}")
    return stream, val, val_ids


# ----------------------------------------------------------------------------------------------------------------
# A text of your own: a split by lines or documents, validation windows, a baseline for scale


def split_text(text, fraction):
    """(cut, unit, units, held): the text splits at cut into training text[:cut] and validation text[cut:], whole
    units each. unit is "document" when a blank line (nothing, or only spaces and tabs) stands between two lines of
    text, and the units are the blocks between blank lines; otherwise "line", and the units are the lines. The last
    held = max(1, round(fraction * units)) units validate (Python's round: halves to even), and at least one unit is
    left to train on.

    >>> split_text("one\\ntwo\\nthree\\nfour\\n", 0.25)
    (14, 'line', 4, 1)
    >>> split_text("a b\\nc\\n\\nd e\\n\\n\\nf\\n", 0.5)
    (7, 'document', 3, 2)
    """
    starts, offset, after_blank = [], 0, False  # starts: (offset, follows a blank line) of each line of text
    for line in text.split("\n"):
        if line.strip(" \t"):
            starts.append((offset, after_blank and bool(starts)))
            after_blank = False
        else:
            after_blank = True
        offset += len(line) + 1
    documents = any(blank for _, blank in starts)
    if documents:  # a document starts at the first line of text and after each blank line
        starts = starts[:1] + [start for start in starts[1:] if start[1]]
    unit = "document" if documents else "line"
    if len(starts) < 2:
        raise ValueError(f"it has {len(starts)} {unit} of text: nothing to hold out for validation; expected at least"
                         f" 2 lines, or 2 documents between blank lines")
    held = min(max(1, round(fraction * len(starts))), len(starts) - 1)
    return starts[len(starts) - held][0], unit, len(starts), held


def windows(ids, length):
    """Consecutive windows of up to length + 1 IDs that overlap by one, over a list of IDs: read in them, every ID
    after the first is predicted exactly once, from at most length IDs before it.

    >>> windows([1, 2, 3, 4, 5, 6], 2)
    [[1, 2, 3], [3, 4, 5], [5, 6]]
    """
    return [ids[i:i + length + 1] for i in range(0, len(ids) - 1, length)]


def unigram_loss(train_ids, predicted, vocab):
    """The mean -log p of the predicted IDs under the training IDs' frequencies, each count plus one (so that a token
    the training text lacks still has a probability): what a model that ignores the context would score.

    >>> round(unigram_loss([0, 0, 1], [0, 1], 3), 4)  # p = 3/6 and 2/6
    0.8959
    """
    counts = Counter(train_ids)
    total = len(train_ids) + vocab
    return fsum(-math.log((counts[i] + 1) / total) for i in predicted) / len(predicted)


# ----------------------------------------------------------------------------------------------------------------
# What a run reads


def read_data(path):
    """(text, SHA-256 of its bytes) of --data FILE from one read, with bpe.read_text's checks and bound: the hash is
    of the very bytes trained on, and a FIFO or a device is refused rather than read twice or without end."""
    raw = read_whole(path, "a UTF-8 text file", bpe.MOST_TEXT)
    return bpe.decode_text(raw, path), hashlib.sha256(raw).hexdigest()


def prepare(s, carried=None, text=None):
    """What a run reads besides its settings: the tokenizer, the training stream (a NumPy array for the numpy
    backends, a list for python), the validation sequences, the floors (None for a text of your own), and the
    metadata its checkpoints carry about the data. carried: with --data, the tokenizer to use instead of --tokenizer
    or a fresh training (the one a resumed checkpoint carries); text: --data FILE as read_data read it (read here
    when not given). A ValueError says what is wrong with the data or with --val-stories / --seq-len."""
    if s.data is None:
        tok = bpe.Tokenizer.load(TOKENIZER_FILE)
        stream, val_texts, val_ids = load_data(tok, s.val_stories, s.seq_len, s.max_len)
        corpus_floor = floor.load_floor()
        val_floor_nats, val_tokens = floor.story_floor(val_texts, tok)
        data = SimpleNamespace(tok=tok, stream=stream, val_texts=val_texts, val_ids=val_ids, val_tokens=val_tokens,
                               val_batch=None, val_floor=val_floor_nats / val_tokens, corpus_floor=corpus_floor,
                               tokenizer_sha=checkpoint.sha256_file(TOKENIZER_FILE),
                               metadata={"corpus_sha256": checkpoint.sha256_file(CORPUS_FILE),
                                         "floor_nats_per_token": repr(corpus_floor),
                                         "val_floor_nats_per_token": repr(val_floor_nats / val_tokens)})
    else:
        data = prepare_text(s, carried, *(text or read_data(s.data)))
    data.vocab = len(data.tok.vocab)
    if s.backend != "python":
        import numpy

        data.stream = numpy.array(data.stream)  # (n,) its slices are the rows of a batch
    return data


def prepare_text(s, carried, text, text_sha256):
    """prepare for --data, given the file's text and the SHA-256 of its bytes: split it, get its tokenizer, and
    encode both parts."""
    try:
        cut, unit, units, held = split_text(text, s.val_fraction)
    except ValueError as e:
        raise ValueError(f"{s.data}: {e}") from None
    if carried is not None:
        tok, how = carried, "the one the checkpoint carries"
    elif s.tokenizer is not None:
        tok, how = bpe.Tokenizer.load(s.tokenizer), f"{s.tokenizer}"
    else:
        tok, how = bpe.train_on_text(text, s.vocab_size, s.data), f"trained on {s.data}"
    bad = next((i for i, ch in enumerate(text) if ch not in tok.ids), None)
    if bad is not None:
        line = text.count("\n", 0, bad) + 1
        raise ValueError(f"{s.data}, line {line}: the character {text[bad]!r} is not in the tokenizer ({how}), which"
                         f" knows {len(tok.alphabet)} characters; leave out --tokenizer to train one on the file")
    stream, val_stream = tok.encode(text[:cut]), tok.encode(text[cut:])  # (n,) and (m,) token IDs
    if len(stream) <= s.seq_len:
        raise ValueError(f"{s.data}: its training text is {len(stream)} tokens, fewer than one window of --seq-len"
                         f" {s.seq_len} + 1; expected a longer text, or a shorter --seq-len")
    if len(val_stream) < 2:
        raise ValueError(f"{s.data}: its validation text ({held} {unit}) is {len(val_stream)} token, nothing to"
                         f" predict; expected a larger --val-fraction")
    val_ids = windows(val_stream, s.seq_len)
    tokenizer_json = tok.to_json()
    documents = " (the blocks between blank lines)" if unit == "document" else ""
    about = [(f"{s.data}: {len(text):,} characters in {units:,} {unit}s{documents}; the last {held:,} validate"
              f" ({(len(text) - cut) / len(text):.1%} of the characters)"),
             (f"tokenizer: {how}, {len(tok.vocab)} tokens ({len(tok.alphabet)} characters + {len(tok.merges)}"
              f" merges), {len(text) / (len(stream) + len(val_stream)):.2f} characters per token")]
    return SimpleNamespace(
        tok=tok, stream=stream, val_ids=val_ids, val_tokens=len(val_stream) - 1, val_batch=VAL_BATCH,
        val_floor=None, corpus_floor=None, tokenizer_sha=checkpoint.sha256_text(tokenizer_json), about=about,
        val_chars=len(text) - cut - len(tok.vocab[val_stream[0]]),  # the characters of the predicted tokens
        unigram=unigram_loss(stream, val_stream[1:], len(tok.vocab)),
        metadata={"text": str(s.data), "text_sha256": text_sha256, "split": unit,
                  checkpoint.TOKENIZER_KEY: tokenizer_json})
