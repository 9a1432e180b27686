"""bpe.py against the Hugging Face `tokenizers` library reading the same tokenizer.json."""

import pytest
from hypothesis import given, settings, strategies as st

import bpe
from run_helpers import ROOT

tokenizers = pytest.importorskip("tokenizers")

TOK = bpe.Tokenizer.load(ROOT / "tokenizer.json")
HF = tokenizers.Tokenizer.from_file(str(ROOT / "tokenizer.json"))
CORPUS = (ROOT / "corpus.txt").read_text(encoding="utf-8")
LINES = CORPUS.splitlines(keepends=True)

REQUIRED = [
    "now mia gives the hat to leo.",
    "now leo gives the hat to mia.",
    "mia has a red ball.",
    "mia has a red hat.",
]


def test_same_vocabulary():
    assert HF.get_vocab_size() == len(TOK.vocab) == 96
    assert all(HF.token_to_id(tok) == i for i, tok in enumerate(TOK.vocab))


def test_same_ids_on_every_corpus_line_and_each_decodes_back():
    for encoding, line in zip(HF.encode_batch(LINES), LINES):
        assert encoding.ids == TOK.encode(line), line
        assert encoding.tokens == TOK.tokens(line), line
        assert HF.decode(encoding.ids) == line


def test_same_ids_on_the_whole_corpus():
    assert HF.encode(CORPUS).ids == TOK.encode(CORPUS)


@pytest.mark.parametrize("text", REQUIRED)
def test_same_ids_on_required_sentences(text):
    encoding = HF.encode(text)
    assert encoding.ids == TOK.encode(text)
    assert encoding.tokens == TOK.tokens(text)
    assert HF.decode(encoding.ids) == text


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="".join(TOK.alphabet), max_size=120))
def test_same_ids_on_random_text(text):
    assert HF.encode(text).ids == TOK.encode(text)
    assert HF.decode(TOK.encode(text)) == text
