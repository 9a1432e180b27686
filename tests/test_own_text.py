"""Your own text: bpe.py on any UTF-8 text (a hand-derived known answer, round trips, the Hugging Face library
giving the same IDs on every line), and every bad input a one-line message, exit 2 and nothing written."""

import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st
from run_helpers import own_text

import bpe

ROOT = Path(__file__).resolve().parent.parent

# a hand-made text with capitals, digits, punctuation and non-ASCII letters (ë is one code point, U+00EB)
SMALL = "Zoë saw 2 Zoës.\nZoë: 22!\n"
# lines that stress the pattern: Greek, letters past U+FFFF, CJK, a combining accent, an emoji, typographic quotes,
# a tab and a carriage return
EXOTIC = ("Ωμέγα 𝔘𝔫𝔦 漢字 and cafe\u0301 🙂 naïve — “quotes” ‘x’\n" * 3) + "Tab\there\r\n"


def run(script, *args, cwd):
    """Run one of the scripts in a subprocess; the CompletedProcess (text)."""
    return subprocess.run([sys.executable, str(ROOT / script), *map(str, args)], capture_output=True, text=True,
                          cwd=cwd, timeout=300)


def files_under(folder):
    """Every path under folder, relative, sorted: to see that a refused command wrote nothing."""
    return sorted(str(p.relative_to(folder)) for p in Path(folder).rglob("*"))


# ----------------------------------------------------------------------------------------------------------------
# The tokenizer on any text


def test_hand_derived_known_answer():
    # Alphabet (sorted by code point): "\n" " " "!" "." "2" ":" "Z" "a" "o" "s" "w" "ë" = IDs 0-11. Letters: Z a o s
    # w ë, so the pattern is " ?[A-Za-zë]+|[^A-Za-zë]" and the pieces are "Zoë" x2, " saw", " " x2 (a space before a
    # digit stands alone), "2" x3 (digits are pieces of their own), " Zoës", ".", "\n" x2, ":", "!".
    # Round 1: (Z,o) 2 + 1 = 3 and (o,ë) 2 + 1 = 3 tie; "Z" < "o", so (Z,o) -> "Zo", ID 12.
    # Round 2: (Zo,ë) 3 -> "Zoë", ID 13. Left: (" ",Zoë) (Zoë,s) (" ",s) (s,a) (a,w), each once.
    # Round 3: the smallest pair: left " " first, then "Zoë" < "s" on the right: (" ",Zoë) -> " Zoë", ID 14.
    # Round 4: (" Zoë",s) (" ",s) (s,a) (a,w): " " < " Zoë", so (" ",s) -> " s", ID 15.
    tok = bpe.Tokenizer.train(SMALL, 16)
    assert tok.pattern == " ?[A-Za-zë]+|[^A-Za-zë]"
    assert tok.alphabet == ["\n", " ", "!", ".", "2", ":", "Z", "a", "o", "s", "w", "ë"]
    assert tok.merges == [("Z", "o"), ("Zo", "ë"), (" ", "Zoë"), (" ", "s")]
    assert tok.tokens(SMALL) == ["Zoë", " s", "a", "w", " ", "2", " Zoë", "s", ".", "\n", "Zoë", ":", " ", "2", "2",
                                 "!", "\n"]
    assert tok.encode(SMALL) == [13, 15, 7, 10, 1, 4, 14, 9, 3, 0, 13, 5, 1, 4, 4, 2, 0]


def test_the_pattern_keeps_words_whole_and_everything_else_apart():
    alphabet = sorted(set(SMALL + EXOTIC))
    pattern = bpe.pattern_for(alphabet)
    assert pattern.startswith(" ?[A-Za-z") and "𝔘" in pattern and "\u0301" in pattern
    pieces = bpe.pretokenize("Ωμέγα 𝔘𝔫𝔦 cafe\u0301 22🙂.", pattern)
    assert pieces == ["Ωμέγα", " 𝔘𝔫𝔦", " cafe\u0301", " ", "2", "2", "🙂", "."]
    # the shipped tokenizer's pattern is the same rule on the stories' lowercase alphabet
    shipped = bpe.Tokenizer.load(ROOT / "tokenizer.json")
    assert shipped.pattern == bpe.PATTERN == bpe.pattern_for(shipped.alphabet) == " ?[a-z]+|[^a-z]"
    assert bpe.pattern_for("0123 .\n") == r"[\s\S]"  # no letters at all: every character is a piece


def test_round_trip_and_the_same_ids_in_hugging_face_on_every_line(tmp_path):
    tokenizers = pytest.importorskip("tokenizers")
    text = own_text() + SMALL + EXOTIC
    tok = bpe.Tokenizer.train(text, 160)
    assert len(tok.vocab) == 160 and tok.decode(tok.encode(text)) == text
    path = tmp_path / "tokenizer.json"
    tok.save(path)
    again = bpe.Tokenizer.load(path)
    assert again.merges == tok.merges and again.pattern == tok.pattern
    hf = tokenizers.Tokenizer.from_file(str(path))
    lines = text.splitlines(keepends=True)
    for encoding, line in zip(hf.encode_batch(lines), lines, strict=True):
        assert encoding.ids == tok.encode(line), line
        assert hf.decode(encoding.ids) == line
    assert hf.encode(text).ids == tok.encode(text)


EXOTIC_TOK = bpe.Tokenizer.train(own_text() + SMALL + EXOTIC, 160)


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet="".join(EXOTIC_TOK.alphabet), max_size=80))
def test_random_texts_over_a_non_ascii_alphabet_round_trip_and_match_hugging_face(text):
    tokenizers = pytest.importorskip("tokenizers")
    hf = tokenizers.Tokenizer.from_str(EXOTIC_TOK.to_json())
    assert EXOTIC_TOK.decode(EXOTIC_TOK.encode(text)) == text
    assert hf.encode(text).ids == EXOTIC_TOK.encode(text)


def test_bpe_py_trains_on_a_file_and_writes_anywhere(tmp_path):
    (tmp_path / "notes.txt").write_text(own_text(), encoding="utf-8")
    proc = run("bpe.py", "--data", "notes.txt", "--vocab-size", 120, "--out", "deep/er/notes.json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("wrote deep/er/notes.json: ") and "= 120 tokens" in proc.stdout
    written = (tmp_path / "deep" / "er" / "notes.json").read_text(encoding="utf-8")
    assert written == bpe.Tokenizer.train(own_text(), 120).to_json()
    assert files_under(tmp_path) == ["deep", "deep/er", "deep/er/notes.json", "notes.txt"]  # no temporary file


# ----------------------------------------------------------------------------------------------------------------
# Bad input: one line naming the problem, exit 2, nothing written


BAD_TEXTS = [  # (file name, bytes, the phrase of the message)
    ("empty.txt", b"", "empty.txt is empty"),
    ("picture.png", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "picture.png looks binary: byte 8 is a NUL byte"),
    ("latin1.txt", "Zoë has a café.\n".encode("latin-1"), "latin1.txt is not UTF-8: byte 2 is 0xeb"),
]


@pytest.mark.parametrize("name, content, phrase", BAD_TEXTS + [
    ("notes.txt", own_text().encode(), "notes.txt: --vocab-size 20 is smaller than the 55 characters of the text"),
    ("small.txt", "Zoë saw.\n".encode(),
     ("small.txt: --vocab-size 20 is too large: no pairs are left to merge after 5 merges (14 tokens); expected at"
      " most 14")),
])
def test_bpe_py_refuses_bad_data_in_one_line_and_writes_nothing(tmp_path, name, content, phrase):
    (tmp_path / name).write_bytes(content)
    before = files_under(tmp_path)
    proc = run("bpe.py", "--data", name, "--vocab-size", 20, "--out", "toks/t.json", cwd=tmp_path)
    assert proc.returncode == 2 and proc.stdout == "", proc.stdout + proc.stderr
    assert proc.stderr.count("\n") == 1 and phrase in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    assert files_under(tmp_path) == before
