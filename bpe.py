"""A character-level byte-pair-encoding (BPE) tokenizer, standard library only.

    python3 bpe.py          # train on corpus.txt and write tokenizer.json
    python3 bpe.py --check  # exit 1 with a one-line reason if tokenizer.json differs from a fresh training

How it works:
1. Pre-tokenisation splits text into pieces with one regex, PATTERN: a word with
   at most one space in front of it (" mia"), or any single other character
   ("." "," "\\n" or a space that is not followed by a letter). Merges never cross
   a piece boundary. "mia has a hat.\\n" -> "mia", " has", " a", " hat", ".", "\\n".
2. The base vocabulary is the sorted set of characters of the training text.
3. Training repeats: count every adjacent pair of tokens inside the pieces, each
   piece weighted by how often it occurs, and merge the most frequent pair into a
   new token. Tie-break: among pairs with the same count, the smallest pair in
   Python string order (compare the left tokens, then the right tokens) wins.
   A pair whose joined string is already a token is skipped. Training stops when
   the vocabulary has vocab_size tokens. IDs: base characters first (sorted),
   then one new ID per merge, in merge order.
4. Encoding a piece starts from its characters and applies merges by rank: the
   lowest-rank merge whose pair is present, at all its occurrences left to right,
   then the next. This is what the Hugging Face `tokenizers` BPE model does, and
   tokenizer.json is in that library's format, so
   tokenizers.Tokenizer.from_file("tokenizer.json") gives the same IDs.

Training is the classmethod Tokenizer.train(text, vocab_size).
"""

import argparse
import json
import re
import sys
from collections import Counter
from pathlib import Path

from atomic import write_atomic

# ----------------------------------------------------------------------------
# settings

PATTERN = r" ?[a-z]+|[^a-z]"    # pre-tokenizer: optional space + lowercase word, or any one other character
VOCAB_SIZE = 96                 # tokens in the shipped tokenizer
CORPUS_FILE = "corpus.txt"      # training text, next to this script
TOKENIZER_FILE = "tokenizer.json"

PIECE_RE = re.compile(PATTERN)

# ----------------------------------------------------------------------------
# small helpers


def pretokenize(text):
    """Split text into the pieces that merges never cross.

    >>> pretokenize("mia has a hat.\\nnow")
    ['mia', ' has', ' a', ' hat', '.', '\\n', 'now']
    """
    pieces = PIECE_RE.findall(text)
    if "".join(pieces) != text:  # cannot happen with PATTERN; guards an edited pattern
        raise ValueError(f"pattern {PATTERN!r} does not cover the text {text!r}; every character must be matched")
    return pieces


def pair_counts(words):
    """Count adjacent pairs over (symbols, count) words, each weighted by its count.

    >>> pair_counts([(["a", "a", "b"], 2), (["a", "b"], 1)])
    {('a', 'a'): 2, ('a', 'b'): 3}
    """
    counts = {}
    for symbols, n in words:
        for pair in zip(symbols, symbols[1:]):
            counts[pair] = counts.get(pair, 0) + n
    return counts


def merge(symbols, pair):
    """Replace every occurrence of pair in symbols by the joined token, left to right.

    >>> merge(["a", "a", "a", "b"], ("a", "a"))
    ['aa', 'a', 'b']
    """
    out, i = [], 0
    while i < len(symbols):
        if i + 1 < len(symbols) and (symbols[i], symbols[i + 1]) == pair:
            out.append(symbols[i] + symbols[i + 1])
            i += 2
        else:
            out.append(symbols[i])
            i += 1
    return out


def first_difference(have, want, where="top level"):
    """Describe the first place where two JSON values differ, or return None.

    >>> first_difference({"a": {"b": 1}}, {"a": {"b": 2}})
    "field 'a.b' is 1, expected 2"
    """
    if isinstance(want, dict) and isinstance(have, dict):
        for key in want:
            name = key if where == "top level" else f"{where}.{key}"
            if key not in have:
                return f"field {name!r} is missing"
            diff = first_difference(have[key], want[key], name)
            if diff:
                return diff
        extra = [key for key in have if key not in want]
        return f"unexpected field {extra[0]!r} in {where}" if extra else None
    if type(have) is not type(want) or have != want:
        return f"field {where!r} is {json.dumps(have)[:60]}, expected {json.dumps(want)[:60]}"
    return None


# ----------------------------------------------------------------------------
# the tokenizer


class Tokenizer:
    """A trained BPE tokenizer: base characters plus an ordered list of merges.

    Minimal state is (alphabet, merges); the vocabulary is rebuilt from it:
    vocab = sorted characters, then a + b for every merge (a, b) in order.
    """

    def __init__(self, alphabet, merges):
        alphabet = list(alphabet)
        if alphabet != sorted(set(alphabet)) or any(len(ch) != 1 for ch in alphabet):
            raise ValueError(f"alphabet {alphabet!r} must be distinct single characters in sorted order")
        self.alphabet = alphabet
        self.merges = [tuple(pair) for pair in merges]
        self.vocab = list(alphabet)                          # index = token ID
        self.ids = {tok: i for i, tok in enumerate(self.vocab)}
        for rank, (a, b) in enumerate(self.merges):
            for part in (a, b):
                if part not in self.ids:
                    raise ValueError(f"merge {rank} {[a, b]!r} uses {part!r}, which is not a token before it")
            if a + b in self.ids:
                raise ValueError(f"merge {rank} {[a, b]!r} makes {a + b!r}, which is already a token")
            self.ids[a + b] = len(self.vocab)
            self.vocab.append(a + b)
        self.ranks = {pair: rank for rank, pair in enumerate(self.merges)}
        self.cache = {}                                       # piece -> token IDs

    # ---- training

    @classmethod
    def train(cls, text, vocab_size):
        """Learn merges from text until the vocabulary has vocab_size tokens.

        >>> Tokenizer.train("aaab aab\\n", 6).merges
        [('a', 'a'), (' ', 'aa')]
        """
        if not isinstance(text, str) or not text:
            raise ValueError(f"training text must be a non-empty string; got {text!r:.40}")
        if type(vocab_size) is not int:
            raise ValueError(f"vocab_size must be an int; got {vocab_size!r}")
        alphabet = sorted(set(text))
        if vocab_size < len(alphabet):
            raise ValueError(f"vocab_size {vocab_size} is smaller than the {len(alphabet)} characters of the text;"
                             f" expected at least {len(alphabet)}")
        words = [(list(piece), n) for piece, n in sorted(Counter(pretokenize(text)).items())]
        tokens = set(alphabet)
        merges = []
        while len(alphabet) + len(merges) < vocab_size:
            counts = pair_counts(words)
            candidates = [(-n, pair) for pair, n in counts.items() if pair[0] + pair[1] not in tokens]
            if not candidates:
                raise ValueError(f"vocab_size {vocab_size} is too large: no pairs are left to merge after"
                                 f" {len(merges)} merges ({len(alphabet) + len(merges)} tokens)")
            best = min(candidates)[1]   # highest count, then smallest pair
            merges.append(best)
            tokens.add(best[0] + best[1])
            words = [(merge(symbols, best), n) for symbols, n in words]
        return cls(alphabet, merges)

    # ---- encoding and decoding

    def encode_piece(self, piece):
        """Token IDs of one pre-tokenised piece: apply merges in rank order."""
        if piece not in self.cache:
            symbols = list(piece)
            while len(symbols) > 1:
                ranked = [self.ranks[p] for p in zip(symbols, symbols[1:]) if p in self.ranks]
                if not ranked:
                    break
                symbols = merge(symbols, self.merges[min(ranked)])
            self.cache[piece] = [self.ids[s] for s in symbols]
        return self.cache[piece]

    def encode(self, text):
        """Token IDs of text; every character must be in the alphabet."""
        if not isinstance(text, str):
            raise ValueError(f"encode expects a string; got {type(text).__name__} {text!r:.40}")
        for pos, ch in enumerate(text):
            if ch not in self.ids:
                raise ValueError(f"unknown character {ch!r} at position {pos}; the tokenizer knows only"
                                 f" {''.join(self.alphabet)!r}")
        ids = []
        for piece in pretokenize(text):
            ids.extend(self.encode_piece(piece))
        return ids

    def decode(self, ids):
        """Text of a list of token IDs (ints in [0, len(vocab)))."""
        parts = []
        for pos, i in enumerate(ids):
            if type(i) is not int:
                raise ValueError(f"token ID {i!r} at position {pos} is a {type(i).__name__}; expected an int")
            if not 0 <= i < len(self.vocab):
                raise ValueError(f"token ID {i} at position {pos} is outside the vocabulary [0, {len(self.vocab)})")
            parts.append(self.vocab[i])
        return "".join(parts)

    def tokens(self, text):
        """The tokens of text as strings.

        >>> Tokenizer.train("aaab aab\\n", 6).tokens("aab aaab")
        ['aa', 'b', ' aa', 'a', 'b']
        """
        return [self.vocab[i] for i in self.encode(text)]

    # ---- saving and loading (Hugging Face tokenizers format)

    def to_dict(self):
        """The tokenizer.json document, in the Hugging Face `tokenizers` format."""
        return {
            "version": "1.0",
            "truncation": None,
            "padding": None,
            "added_tokens": [],
            "normalizer": None,
            "pre_tokenizer": {"type": "Split", "pattern": {"Regex": PATTERN}, "behavior": "Isolated", "invert": False},
            "post_processor": None,
            "decoder": {"type": "Fuse"},
            "model": {
                "type": "BPE",
                "dropout": None,
                "unk_token": None,
                "continuing_subword_prefix": None,
                "end_of_word_suffix": None,
                "fuse_unk": False,
                "byte_fallback": False,
                "ignore_merges": False,
                "vocab": {tok: i for i, tok in enumerate(self.vocab)},
                "merges": [list(pair) for pair in self.merges],
            },
        }

    def to_json(self):
        """tokenizer.json as text: fixed key order, 2-space indent, final newline."""
        return json.dumps(self.to_dict(), indent=2) + "\n"

    def save(self, path):
        """Write tokenizer.json to path atomically."""
        write_atomic(path, self.to_json())

    @classmethod
    def load(cls, path):
        """Read a tokenizer.json written by save; a malformed file is a ValueError naming it."""
        path = Path(path)
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
        except UnicodeDecodeError as e:
            raise ValueError(f"{path}: not UTF-8 text ({e.reason}); expected a tokenizer.json") from None
        except json.JSONDecodeError as e:
            raise ValueError(f"{path}: not valid JSON ({e.msg} at line {e.lineno} column {e.colno});"
                             f" the file may be truncated") from None
        model = doc.get("model") if isinstance(doc, dict) else None
        vocab = model.get("vocab") if isinstance(model, dict) else None
        merges = model.get("merges") if isinstance(model, dict) else None
        if not isinstance(vocab, dict) or not isinstance(merges, list):
            raise ValueError(f"{path}: expected an object with model.vocab (an object) and model.merges (a list)")
        ids = list(vocab.values())
        if any(type(i) is not int for i in ids) or sorted(ids) != list(range(len(ids))):
            raise ValueError(f"{path}: model.vocab IDs must be the ints 0 to {len(vocab) - 1}, each once")
        if any(not isinstance(p, list) or len(p) != 2 or not all(isinstance(s, str) for s in p) for p in merges):
            raise ValueError(f"{path}: model.merges must be a list of [left, right] string pairs")
        alphabet = [tok for tok in vocab if len(tok) == 1]
        try:
            tok = cls(sorted(alphabet), merges)
        except ValueError as e:
            raise ValueError(f"{path}: {e}") from None
        diff = first_difference(doc, tok.to_dict())
        if diff:
            raise ValueError(f"{path}: {diff}")
        return tok


# ----------------------------------------------------------------------------
# command line


def check(path, text):
    """None if the file at path equals a fresh training on text, else a one-line reason."""
    path = Path(path)
    if not path.exists():
        return f"{path.name} is missing; run python3 bpe.py to write it"
    want = Tokenizer.train(text, VOCAB_SIZE).to_json().encode("utf-8")
    if path.read_bytes() != want:
        return f"{path.name} differs from a fresh training on {CORPUS_FILE}; run python3 bpe.py to rewrite it"
    return None


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="Train the BPE tokenizer on corpus.txt and write tokenizer.json.")
    parser.add_argument("--check", action="store_true", help="exit 1 if tokenizer.json differs from a fresh training")
    args = parser.parse_args()
    here = Path(__file__).resolve().parent
    corpus = (here / CORPUS_FILE).read_text(encoding="utf-8")
    if args.check:
        reason = check(here / TOKENIZER_FILE, corpus)
        if reason:
            print(f"NOT OK: {reason}")
            sys.exit(1)
        print(f"OK: {TOKENIZER_FILE} matches a fresh training ({VOCAB_SIZE} tokens)")
    else:
        tok = Tokenizer.train(corpus, VOCAB_SIZE)
        tok.save(here / TOKENIZER_FILE)
        first = corpus.split("\n")[0] + "\n"
        print(f"wrote {TOKENIZER_FILE}: {len(tok.alphabet)} characters + {len(tok.merges)} merges"
              f" = {len(tok.vocab)} tokens; first story = {len(tok.encode(first))} tokens")
