"""bpe.py's --out and its memory (what is at --out, and --data by another name: tests/test_nothing_lost.py; every
path atomic.own refuses: tests/test_locks.py). The race for --out and the memory run a real bpe.py in a subprocess,
the memory under RLIMIT_AS, so that a regression cannot take the machine down."""

import os
import re
import shutil
import subprocess
import sys
from collections import Counter

import pytest
from hypothesis import given, settings, strategies as st
from run_helpers import (PRIVACY, ROOT, files_under, held, holding, memory_limit, one_line_error, own_text,
                         privacy_id, ran, run)

import bpe

MB = 10**6

TRAIN = ["--data", "notes.txt", "--vocab-size", "100"]


# ----------------------------------------------------------------------------------------------------------------
# 1. --out: through a link, as private as the text, one run at a time (what is there, and --data by another name:
# tests/test_nothing_lost.py)


def test_through_a_link_to_a_tokenizer_the_file_it_leads_to_is_written(notes, capsys):
    out = notes / "t.json"
    bpe.Tokenizer.train(own_text(), 90).save(out)  # an earlier run's tokenizer
    (notes / "link.json").symlink_to("t.json")  # the file it leads to is written, not the link
    proc = ran("bpe.py", capsys, *TRAIN, "--out", "link.json", "--overwrite")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(f"--out link.json leads to {out.resolve()}: this run writes there\nwrote link.json:"
                                  f" 55 characters + 45 merges")
    assert os.readlink(notes / "link.json") == "t.json"
    assert out.read_text(encoding="utf-8") == bpe.Tokenizer.train(own_text(), 100).to_json()
    assert files_under(notes) == ["link.json", "notes.txt", "t.json"]

    proc = ran("bpe.py", capsys, "--overwrite")  # the flag belongs to --data's tokenizer
    one_line_error(proc, "--overwrite go with --data")


@pytest.mark.skipif(os.name == "nt", reason="Windows has no owner, group and others' permission bits")
@pytest.mark.parametrize("umask, text_mode, written", PRIVACY, ids=privacy_id)
def test_the_tokenizer_is_as_private_as_the_text_and_the_umask(notes, capsys, umask, text_mode, written):
    """The tokenizer trained on a text is readable by no one the umask or the text leaves out (its merges spell the
    text's words); before the fix: 0o644 whatever the umask and the text. Replacing one gives the new one the rule's
    mode, whatever the old one had."""
    (notes / "notes.txt").chmod(text_mode)
    (notes / "old.json").write_text(bpe.Tokenizer.train(own_text(), 90).to_json(), encoding="utf-8")
    (notes / "old.json").chmod(0o666)
    for out, extra in (("new/t.json", []), ("old.json", ["--overwrite"])):  # (--out's folder made as it is written)
        proc = ran("bpe.py", capsys, *TRAIN, "--out", out, *extra, umask=umask)
        assert proc.returncode == 0, proc.stderr
        assert (notes / out).stat().st_mode & 0o777 == written, (out, oct((notes / out).stat().st_mode))
    assert files_under(notes) == ["new", "new/t.json", "notes.txt", "old.json"]  # no temporary file, no lock


def test_a_second_run_on_the_same_out_is_refused_while_the_first_holds_it(notes):
    out, waiting, go = notes / "t.json", notes / "waiting", notes / "go"
    reading = holding("bpe.py", "atomic", "read_whole", when='args[1:2] == ("a UTF-8 text file",)')  # --data's read
    with held(reading, waiting, go, *TRAIN, "--out", out, cwd=notes) as slow:
        fast = run("bpe.py", "--data", "notes.txt", "--vocab-size", "120", "--out", out, cwd=notes)
        one_line_error(fast, "is in use by another run", "bpe.py")  # before the fix: it wrote its tokenizer
        assert not out.exists()
    assert slow.returncode == 0, slow.stderr
    assert out.read_text(encoding="utf-8") == bpe.Tokenizer.train(own_text(), 100).to_json()  # the slow run's
    assert files_under(notes) == ["go", "notes.txt", "t.json", "waiting"]  # no lock left


def test_the_default_command_still_rewrites_the_shipped_tokenizer(tmp_path):
    for name in ("bpe.py", "atomic.py", "corpus.txt", "tokenizer.json"):
        shutil.copy(ROOT / name, tmp_path / name)
    (tmp_path / "tokenizer.json").write_text("stale\n", encoding="utf-8")
    proc = subprocess.run([sys.executable, "bpe.py"], capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert proc.returncode == 0 and proc.stdout.startswith("wrote tokenizer.json: 26 characters + 70 merges")
    # the shipped bytes again (bpe.py --check after it: docs/model.md's commands, which tests/test_readme.py runs)
    assert (tmp_path / "tokenizer.json").read_bytes() == (ROOT / "tokenizer.json").read_bytes()


# ----------------------------------------------------------------------------------------------------------------
# 2. The training in stretches: the same merges, in bounded memory


def reference_train(text, vocab_size):
    """The merges of the training as it was before it went a stretch at a time: every piece in one list, and each
    merge's string made anew at each place it occurs (the counts and the tie-break are the same rule)."""
    pattern = bpe.pattern_for(sorted(set(text)))
    words = [(list(piece), n) for piece, n in sorted(Counter(re.findall(pattern, text)).items())]
    merges, tokens = [], set(text)
    while len(set(text)) + len(merges) < vocab_size:
        counts = Counter()
        for symbols, n in words:
            for pair in zip(symbols, symbols[1:]):
                counts[pair] += n
        candidates = [(-n, pair) for pair, n in counts.items() if pair[0] + pair[1] not in tokens]
        if not candidates:
            break
        best = min(candidates)[1]
        merges.append(best)
        tokens.add(best[0] + best[1])
        for k, (symbols, n) in enumerate(words):
            out, i = [], 0
            while i < len(symbols):
                if tuple(symbols[i:i + 2]) == best:
                    out.append(symbols[i] + symbols[i + 1])
                    i += 2
                else:
                    out.append(symbols[i])
                    i += 1
            words[k] = (out, n)
    return merges


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet="ab AΩé.\n2𝔘", max_size=120), st.integers(1, 8), st.integers(0, 8))
def test_stretches_split_as_pretokenize_does_and_training_is_unchanged(text, size, extra):
    """extra: the merges asked for (a text may run out of pairs first)."""
    alphabet = sorted(set(text))
    pieces = [piece for part in bpe.stretches(text, alphabet, size) for piece in part]
    assert pieces == bpe.pretokenize(text, bpe.pattern_for(alphabet))
    if text:
        vocab_size = len(alphabet) + extra
        try:
            trained = bpe.Tokenizer.train(text, vocab_size)
        except ValueError as e:
            assert "no pairs are left" in str(e)
            merges = reference_train(text, vocab_size)
            assert len(merges) < extra
        else:
            merges = trained.merges
            assert merges == reference_train(text, vocab_size) and len(trained.vocab) == vocab_size
        tok = bpe.Tokenizer(alphabet, merges)
        assert tok.count(text) == len(tok.encode(text)) and tok.decode(tok.encode(text)) == text


# 60 MB of one letter, one piece: its training takes more than 768 MiB
def test_a_training_that_runs_out_of_memory_is_one_line_and_writes_nothing(tmp_path):
    (tmp_path / "one.txt").write_bytes(b"a" * (60 * MB))
    proc = run("bpe.py", "--data", "one.txt", "--out", "t.json", cwd=tmp_path, limit=memory_limit(3 * 2**28),
               timeout=120)
    one_line_error(proc, f"one.txt: training on its {60 * MB:,} characters ran out of memory",
                   "expected a smaller text, or more memory")  # before the fix: a MemoryError's traceback
    assert files_under(tmp_path) == ["one.txt"]


def test_sixty_megabytes_of_words_train_under_one_gigabyte(tmp_path):
    reps = 60 * MB // len(own_text().encode())
    (tmp_path / "words.txt").write_text(own_text() * reps, encoding="utf-8")
    proc = run("bpe.py", "--data", "words.txt", "--vocab-size", "60", "--out", "t.json", cwd=tmp_path,
               limit=memory_limit(2**30), timeout=300)  # before the fix: a MemoryError, all pieces in one list
    once = bpe.Tokenizer.train(own_text(), 60)  # the same text over and over: the same merges
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(f"wrote t.json: 55 characters + 5 merges = 60 tokens; words.txt is"
                                  f" {reps * len(once.encode(own_text())):,} tokens")
    assert (tmp_path / "t.json").read_text(encoding="utf-8") == once.to_json()
