"""Property tests for bpe.py (pytest + hypothesis): round trips on random texts over the alphabet."""

from hypothesis import given, settings, strategies as st

import bpe
from run_helpers import ROOT

TOK = bpe.Tokenizer.load(ROOT / "tokenizer.json")
ALPHABET = "".join(TOK.alphabet)
WORDS = sorted({piece.strip() for piece in bpe.pretokenize((ROOT / "corpus.txt").read_text(encoding="utf-8"))})

# random characters over the alphabet, and random sequences of corpus words and punctuation
texts = st.text(alphabet=ALPHABET, max_size=200)
wordy = st.lists(st.sampled_from(WORDS + [" ", " ", "."]), max_size=40).map("".join)


@settings(max_examples=300, deadline=None)
@given(st.one_of(texts, wordy))
def test_round_trip(text):
    ids = TOK.encode(text)
    assert all(type(i) is int and 0 <= i < len(TOK.vocab) for i in ids)
    assert TOK.decode(ids) == text
    assert "".join(TOK.tokens(text)) == text


@settings(max_examples=200, deadline=None)
@given(texts, texts)
def test_encoding_splits_at_newlines(a, b):
    # pieces never cross a newline, so encoding concatenated lines is concatenating their encodings
    assert TOK.encode(a + "\n" + b) == TOK.encode(a + "\n") + TOK.encode(b)


@settings(max_examples=200, deadline=None)
@given(texts, st.characters().filter(lambda ch: ch not in ALPHABET), texts)
def test_unknown_character_error_names_it_and_its_position(before, bad, after):
    try:
        TOK.encode(before + bad + after)
    except ValueError as e:
        assert repr(bad) in str(e)
        assert f"position {len(before)}" in str(e)
    else:
        raise AssertionError("no ValueError for an unknown character")
