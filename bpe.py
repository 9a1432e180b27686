"""A character-level byte-pair-encoding (BPE) tokenizer for any text, standard library only.

    python3 bpe.py          # train on corpus.txt and write tokenizer.json
    python3 bpe.py --check  # exit 1 with a one-line reason if tokenizer.json differs from a fresh training
    python3 bpe.py --data notes.txt --vocab-size 256 --out notes.tokenizer.json   # any UTF-8 text, anywhere
    python3 bpe.py --data notes.txt --out notes.tokenizer.json --overwrite        # replace the tokenizer there

How it works:
1. Pre-tokenisation splits text into pieces with one regex, pattern_for(the alphabet): " ?[a-z]+|[^a-z]" for
   corpus.txt. Merges never cross a piece boundary. What a piece is, and why the regex is written out letter by
   letter: docs/own-text.md, "Its tokenizer".
2. The base vocabulary is the sorted set of characters of the training text.
3. Training repeats: count every adjacent pair of tokens inside the pieces, each piece weighted by how often it
   occurs, and merge the most frequent pair into a new token. Tie-break: among pairs with the same count, the
   smallest pair in Python string order (compare the left tokens, then the right tokens) wins. A pair whose joined
   string is already a token is skipped. Training stops when the vocabulary has vocab_size tokens. IDs: base
   characters first (sorted), then one new ID per merge, in merge order.
4. Encoding a piece starts from its characters and applies merges by rank: the lowest-rank merge whose pair is
   present, at all its occurrences left to right, then the next. This is what the Hugging Face `tokenizers` BPE
   model does, and tokenizer.json is in that library's format, so tokenizers.Tokenizer.from_file("tokenizer.json")
   gives the same IDs. A character outside the alphabet is an error that names it and its position: there is no
   fallback, so a text is never silently changed.

Training is the classmethod Tokenizer.train(text, vocab_size); bpe.py --data (train_on_file) trains on a file's text
and writes its tokenizer as docs/own-text.md says.
"""

import argparse
import json
import os
import re
import sys
import unicodedata
from collections import Counter
from contextlib import ExitStack
from pathlib import Path

from atomic import holder, interruptible, interruption, not_its_kind, own, private_mode, read_whole, write_atomic

# ----------------------------------------------------------------------------
# settings

PATTERN = r" ?[a-z]+|[^a-z]"    # the shipped tokenizer's pre-tokenizer: pattern_for(the corpus's alphabet)
VOCAB_SIZE = 96                 # tokens in the shipped tokenizer
TEXT_VOCAB_SIZE = 256           # default tokens of a tokenizer trained on another text (--data)
CORPUS_FILE = "corpus.txt"      # training text, next to this script
TOKENIZER_FILE = "tokenizer.json"
MOST_TEXT = 64 * 2**20          # bytes of a training text read at most: its merges are counted in Python
MOST_TOKENIZER = 16 * 2**20     # bytes of a tokenizer.json read at most (the shipped one is 6 KB)
STRETCH = 2**16                 # characters split into pieces at a time (stretches): no list of every piece is made

# ----------------------------------------------------------------------------
# small helpers


def pattern_for(alphabet):
    """The pre-tokenizer regex for a tokenizer with this alphabet: an optional space and a run of its letters
    (written out as letter_class writes them), or any one other character. Encoding rejects characters outside the
    alphabet first, so the pattern only ever meets these. None of the characters regexes treat specially inside
    brackets is a letter, so nothing needs escaping.

    >>> pattern_for("\\n ,.abhimst")
    ' ?[a-z]+|[^a-z]'
    >>> pattern_for("\\n !.29EGaeéß")
    ' ?[A-Za-zßé]+|[^A-Za-zßé]'
    >>> pattern_for("\\n 0123")  # no letters: every character is a piece
    '[\\\\s\\\\S]'
    """
    word = letter_class(alphabet)
    return f" ?[{word}]+|[^{word}]" if word else r"[\s\S]"


def letter_class(alphabet):
    """The letters of an alphabet as the inside of a regex's brackets ("" for none): the characters that belong in
    words, letters (str.isalpha) and combining marks (Unicode category M*); a-z and A-Z for the ASCII ones (whichever
    of the two it has), then the others one by one in code point order.

    >>> letter_class("\\n .Zaeéz"), letter_class("9_ß\\u0301")
    ('A-Za-zé', 'ß\u0301')
    """
    letters = sorted(ch for ch in set(alphabet) if ch.isalpha() or unicodedata.category(ch).startswith("M"))
    ranges = [r for r, (lo, hi) in (("A-Z", "AZ"), ("a-z", "az")) if any(lo <= ch <= hi for ch in letters)]
    others = [ch for ch in letters if not ("A" <= ch <= "Z" or "a" <= ch <= "z")]
    return "".join(ranges + others)


def pretokenize(text, pattern=PATTERN):
    """Split text into the pieces that merges never cross.

    >>> pretokenize("mia has a hat.\\nnow")
    ['mia', ' has', ' a', ' hat', '.', '\\n', 'now']
    >>> pretokenize("Mia has 2 hats.", pattern_for("Mia has 2 hats."))
    ['Mia', ' has', ' ', '2', ' hats', '.']
    """
    pieces = re.findall(pattern, text)
    if sum(map(len, pieces)) != len(text):  # cannot happen with pattern_for's patterns; guards an edited pattern
        raise ValueError(f"pattern {pattern!r} does not cover the text {text!r:.80}; every character must be matched")
    return pieces  # (matches never overlap, so pieces as long as the text are all of it)


def stretches(text, alphabet, size=STRETCH):
    """The pieces of text, as pretokenize(text, pattern_for(alphabet)) splits it, one list for each stretch of about
    size characters, so that no list of all the pieces of a long text is ever made. A stretch ends just before a
    character that is not a letter: a piece always starts there, since a word is letters after at most one space.

    >>> list(stretches("mia has a hat.", "\\n .ahimst", size=4))
    [['mia', ' has'], [' a', ' hat'], ['.']]
    """
    pattern, word = pattern_for(alphabet), letter_class(alphabet)
    cut = re.compile(f"[^{word}]") if word else None  # (no letters: every character is a piece)
    start = 0
    while start < len(text):
        found = cut.search(text, start + size) if cut else None
        end = found.start() if found else len(text) if cut else min(start + size, len(text))
        yield pretokenize(text[start:end], pattern)
        start = end


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


def merge(symbols, pair, joined=None):
    """Replace every occurrence of pair in symbols by the joined token, left to right: one string, joined (the
    pair's two strings together, made here when not given), shared by every occurrence.

    >>> merge(["a", "a", "a", "b"], ("a", "a"))
    ['aa', 'a', 'b']
    """
    joined = pair[0] + pair[1] if joined is None else joined
    out, i = [], 0
    while i < len(symbols):
        if i + 1 < len(symbols) and (symbols[i], symbols[i + 1]) == pair:
            out.append(joined)
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

    Minimal state is (alphabet, merges); the vocabulary and the pre-tokenizer are rebuilt from it:
    vocab = sorted characters, then a + b for every merge (a, b) in order; pattern = pattern_for(alphabet).
    """

    def __init__(self, alphabet, merges):
        alphabet = list(alphabet)
        if alphabet != sorted(set(alphabet)) or any(len(ch) != 1 for ch in alphabet):
            raise ValueError(f"alphabet {alphabet!r} must be distinct single characters in sorted order")
        self.alphabet = alphabet
        self.pattern = pattern_for(alphabet)                  # the pre-tokenizer
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
    def train(cls, text, vocab_size, what="vocab_size"):
        """Learn merges from text until the vocabulary has vocab_size tokens (what: its name in messages).

        >>> Tokenizer.train("aaab aab\\n", 6).merges
        [('a', 'a'), (' ', 'aa')]
        """
        if not isinstance(text, str) or not text:
            raise ValueError(f"training text must be a non-empty string; got {text!r:.40}")
        if type(vocab_size) is not int:
            raise ValueError(f"{what} must be an int; got {vocab_size!r}")
        alphabet = sorted(set(text))
        if vocab_size < len(alphabet):
            raise ValueError(f"{what} {vocab_size} is smaller than the {len(alphabet)} characters of the text;"
                             f" expected at least {len(alphabet)}")
        counts = Counter(piece for pieces in stretches(text, alphabet) for piece in pieces)  # a stretch at a time
        words = [(list(piece), n) for piece, n in sorted(counts.items())]
        tokens = set(alphabet)
        merges = []
        while len(alphabet) + len(merges) < vocab_size:
            counts = pair_counts(words)
            candidates = [(-n, pair) for pair, n in counts.items() if pair[0] + pair[1] not in tokens]
            if not candidates:
                raise ValueError(f"{what} {vocab_size} is too large: no pairs are left to merge after"
                                 f" {len(merges)} merges ({len(alphabet) + len(merges)} tokens); expected at most"
                                 f" {len(alphabet) + len(merges)}")
            best = min(candidates)[1]   # highest count, then smallest pair
            joined = best[0] + best[1]  # one string, shared by every word that has the pair
            merges.append(best)
            tokens.add(joined)
            words = [(merge(symbols, best, joined), n) for symbols, n in words]
        return cls(alphabet, merges)

    # ---- encoding and decoding

    def encode_piece(self, piece):
        """Token IDs of one pre-tokenised piece: apply merges in rank order."""
        if piece not in self.cache:
            symbols = list(piece)
            while len(symbols) > 1:
                rank = min((self.ranks[p] for p in zip(symbols, symbols[1:]) if p in self.ranks), default=None)
                if rank is None:
                    break
                symbols = merge(symbols, self.merges[rank], self.vocab[len(self.alphabet) + rank])
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
        for pieces in stretches(text, self.alphabet):  # (self.pattern, a stretch at a time)
            for piece in pieces:
                ids.extend(self.encode_piece(piece))
        return ids

    def count(self, text):
        """How many tokens encode(text) gives, without making their list (text: in the alphabet, as when trained).

        >>> Tokenizer.train("aaab aab\\n", 6).count("aab aaab")
        5
        """
        return sum(n * len(self.encode_piece(piece)) for pieces in stretches(text, self.alphabet)
                   for piece, n in Counter(pieces).items())  # (each stretch's pieces counted first: far fewer)

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
            "pre_tokenizer": {"type": "Split", "pattern": {"Regex": self.pattern}, "behavior": "Isolated",
                              "invert": False},
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

    def save(self, path, mode=0o644):
        """Write tokenizer.json to path atomically, with the permissions mode less the umask (atomic.write_atomic)."""
        write_atomic(path, self.to_json(), mode)

    @classmethod
    def load(cls, path):
        """Read a tokenizer.json written by save; a missing, unreadable or malformed file is a ValueError naming it."""
        path = Path(path)
        try:
            text = read_whole(path, "a tokenizer.json", MOST_TOKENIZER).decode("utf-8")
        except UnicodeDecodeError as e:
            raise ValueError(f"{path}: not UTF-8 text ({e.reason}); expected a tokenizer.json") from None
        return cls.from_json(text, path)

    @classmethod
    def from_json(cls, text, where):
        """The tokenizer whose tokenizer.json text is text (as to_json writes it); a malformed one is a ValueError
        that starts with where (a path, or a name such as the checkpoint that carries it)."""
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as e:
            raise ValueError(f"{where}: not valid JSON ({e.msg} at line {e.lineno} column {e.colno});"
                             f" the file may be truncated") from None
        except (RecursionError, ValueError) as e:  # nested too deep, or a number too long to read
            raise ValueError(f"{where}: not a tokenizer.json ({type(e).__name__}: {str(e)[:80]})") from None
        model = doc.get("model") if isinstance(doc, dict) else None
        vocab = model.get("vocab") if isinstance(model, dict) else None
        merges = model.get("merges") if isinstance(model, dict) else None
        if not isinstance(vocab, dict) or not isinstance(merges, list):
            raise ValueError(f"{where}: expected an object with model.vocab (an object) and model.merges (a list)")
        ids = list(vocab.values())
        if any(type(i) is not int for i in ids) or sorted(ids) != list(range(len(ids))):
            raise ValueError(f"{where}: model.vocab IDs must be the ints 0 to {len(vocab) - 1}, each once")
        if any(not isinstance(p, list) or len(p) != 2 or not all(isinstance(s, str) for s in p) for p in merges):
            raise ValueError(f"{where}: model.merges must be a list of [left, right] string pairs")
        alphabet = [tok for tok in vocab if len(tok) == 1]
        try:
            tok = cls(sorted(alphabet), merges)
        except ValueError as e:
            raise ValueError(f"{where}: {e}") from None
        diff = first_difference(doc, tok.to_dict())
        if diff:
            raise ValueError(f"{where}: {diff}")
        return tok


# ----------------------------------------------------------------------------
# a training text from a file


def read_text(path):
    """The text of a UTF-8 file of at most MOST_TEXT bytes, to train on, read once (decode_text says how).

    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as d:
    ...     path = Path(d) / "t.txt"
    ...     _ = path.write_bytes(b"\\xef\\xbb\\xbfOne\\r\\nTwo\\n")
    ...     read_text(path)
    'One\\nTwo\\n'
    """
    return decode_text(read_whole(path, "a UTF-8 text file", MOST_TEXT), path)


def decode_text(raw, path):
    """The text in the bytes raw of the file at path, to train on: line ends \\r\\n and \\r are read as \\n, and
    a byte-order mark at the start is dropped. A ValueError names the file and what is wrong with it: empty, binary
    (it has a NUL byte, which text never has) or not UTF-8 (the first byte that is not, and where).

    >>> decode_text(b"a\\r\\nb\\rc", "t.txt")
    'a\\nb\\nc'
    >>> decode_text(b"", "t.txt")
    Traceback (most recent call last):
    ...
    ValueError: t.txt is empty; expected a UTF-8 text file with some text in it
    """
    nul = raw.find(b"\0")
    if nul >= 0:
        raise ValueError(f"{path} looks binary: byte {nul} is a NUL byte, which text never has (UTF-16 text has"
                         f" them too); expected a UTF-8 text file")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise ValueError(f"{path} is not UTF-8: byte {e.start} is 0x{raw[e.start]:02x} ({e.reason}); expected UTF-8"
                         f" text (a Latin-1 file converts with iconv -f latin1 -t utf-8)") from None
    if not text:
        raise ValueError(f"{path} is empty; expected a UTF-8 text file with some text in it")
    return text.replace("\r\n", "\n").replace("\r", "\n")


def train_on_text(text, vocab_size, name):
    """Tokenizer.train for --vocab-size on the text of the file name (at most MOST_TEXT bytes, read_text's cap): a
    size below the text's number of characters or above what its pairs can make, or a training that runs out of
    memory (a machine, or a `ulimit -v`, smaller than such a text needs), is a ValueError that names the file and
    what is possible."""
    try:
        return Tokenizer.train(text, vocab_size, "--vocab-size")
    except ValueError as e:
        raise ValueError(f"{name}: {e}") from None
    except MemoryError:  # (what training had made is freed as this unwinds, so the message can be printed)
        raise ValueError(f"{name}: training on its {len(text):,} characters ran out of memory; expected a smaller"
                         f" text, or more memory") from None


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


def tokenizer_there(shown, overwrite):
    """The reader bpe.py --data judges its --out with while it owns it (atomic.own), and train.py --data the copy of
    its tokenizer: nothing there, or a tokenizer.json and overwrite (--overwrite); a file that is not a tokenizer is
    never replaced (a ValueError in one line, naming the file as shown, says why)."""
    def judge(target):
        if not os.path.lexists(target):
            return None
        try:
            there = Tokenizer.load(target)
        except ValueError as e:
            raise ValueError(not_its_kind(shown, "a tokenizer.json", e)) from None
        if not overwrite:
            raise ValueError(f"{shown} already holds a tokenizer ({len(there.vocab)} tokens); pass --overwrite"
                             f" to replace it, or another --out to keep it")
    return judge


def main(argv=None):
    parser = argparse.ArgumentParser(
        description="Train the BPE tokenizer on corpus.txt and write tokenizer.json, or train one on any UTF-8 text"
                    " (--data) and write it anywhere (--out).", allow_abbrev=False)
    parser.add_argument("--check", action="store_true", help="exit 1 if tokenizer.json differs from a fresh training")
    parser.add_argument("--data", metavar="FILE",
                        help="train on this UTF-8 text file instead of corpus.txt; needs --out")
    parser.add_argument("--vocab-size", type=int, default=None, metavar="N",
                        help=f"tokens of the tokenizer trained on --data, at least the number of different characters"
                             f" in it (default: {TEXT_VOCAB_SIZE}; corpus.txt's tokenizer has {VOCAB_SIZE})")
    parser.add_argument("--out", metavar="PATH", help="the file --data's tokenizer is written to; its folder is made")
    parser.add_argument("--overwrite", action="store_true",
                        help="replace the tokenizer already at --out (a file that is not a tokenizer never is)")
    args = parser.parse_args(argv)
    if args.data is None and (args.vocab_size is not None or args.out is not None or args.overwrite):
        parser.error("--vocab-size, --out and --overwrite go with --data; without it bpe.py writes the shipped"
                     f" tokenizer.json, {VOCAB_SIZE} tokens of {CORPUS_FILE}")
    if args.data is not None and (args.check or args.out is None):
        parser.error("--data needs --out PATH, where its tokenizer goes (and --check compares only the shipped"
                     " tokenizer.json)")
    try:  # (SIGTERM and SIGHUP stop it as Ctrl-C does: the lock and any temporary file are removed on the way out)
        with interruptible():
            return run(args, argv)
    except KeyboardInterrupt as e:
        name, status = interruption(e)
        kept = f"{args.out} is as it was" if args.data is not None else f"{TOKENIZER_FILE} is as it was"
        print(f"interrupted ({name}): nothing written, {kept}", file=sys.stderr)
        return status


def run(args, argv):
    """main's work once its arguments are checked: train and write (or --check) a tokenizer; the exit status."""
    here = Path(__file__).resolve().parent
    if args.data is not None:
        vocab_size = TEXT_VOCAB_SIZE if args.vocab_size is None else args.vocab_size
        return train_on_file(args.data, vocab_size, args.out, args.overwrite, argv)
    corpus = (here / CORPUS_FILE).read_text(encoding="utf-8")
    if args.check:
        reason = check(here / TOKENIZER_FILE, corpus)
        if reason:
            print(f"NOT OK: {reason}")
            return 1
        print(f"OK: {TOKENIZER_FILE} matches a fresh training ({VOCAB_SIZE} tokens)")
    else:
        tok = Tokenizer.train(corpus, VOCAB_SIZE)
        try:
            tok.save(here / TOKENIZER_FILE)
        except OSError as e:
            print(f"error: cannot write {here / TOKENIZER_FILE} ({e.strerror or e}); the old file is as it was",
                  file=sys.stderr)
            return 2
        first = corpus.split("\n")[0] + "\n"
        print(f"wrote {TOKENIZER_FILE}: {len(tok.alphabet)} characters + {len(tok.merges)} merges"
              f" = {len(tok.vocab)} tokens; first story = {len(tok.encode(first))} tokens")
    return 0


def train_on_file(data, vocab_size, out, overwrite=False, argv=None):
    """bpe.py --data: train on a text file and write the tokenizer to out, as private as the text
    (atomic.private_mode), owning out for the length of the run (atomic.own, with tokenizer_there as its reader);
    exit status 2 with one line on stderr, and nothing written (a file already at out stays as it was), when the
    file, the size, the memory it needs or the path is wrong, or the tokenizer cannot be written."""
    try:
        with ExitStack() as owned:  # owned first, so that what is at out is judged by the run that will write there
            target, _ = own(owned, out, "--out", "a tokenizer file", "tokenizer.json",
                            tokenizer_there(f"--out {out}", overwrite), holder("bpe.py", argv), [("--data", data)])
            text = read_text(data)
            mode = private_mode(paths=[data])  # its merges spell the text's words: as private as the text
            tok = train_on_text(text, vocab_size, data)
            try:
                tok.save(target, mode)
            except OSError as e:  # a full disk, a folder that cannot be written
                raise ValueError(f"cannot write {out} ({e.strerror or e})") from None
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    n = tok.count(text)
    print(f"wrote {out}: {len(tok.alphabet)} characters + {len(tok.merges)} merges = {len(tok.vocab)} tokens;"
          f" {data} is {n:,} tokens ({len(text) / n:.2f} characters per token)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
