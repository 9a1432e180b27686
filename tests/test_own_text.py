"""Your own text: bpe.py on any UTF-8 text, train.py --data, and sample.py and explore.py reading that checkpoint with
no tokenizer flag. The commands run in this process (runpy) but for the one run the module's tests read. (A --data
run stopped and resumed: tests/test_best_checkpoint.py; after a real SIGKILL: tests/test_train.py.)"""

import json
import math
import os
from pathlib import Path

import pytest
from checkpoint_edits import edited, set_meta
from hypothesis import given, settings, strategies as st
from run_helpers import ROOT, PRIVACY, files_under, own_text, privacy_id, ran, run

import bpe
from oneblock import checkpoint, export
from oneblock.config import ModelConfig
import model
from oneblock.data import read_data, split_text

np = pytest.importorskip("numpy")

# a hand-made text with capitals, digits, punctuation and non-ASCII letters (ë is one code point, U+00EB)
SMALL = "Zoë saw 2 Zoës.\nZoë: 22!\n"
# lines that stress the pattern: Greek, letters past U+FFFF, CJK, a combining accent, an emoji, typographic quotes,
# a tab and a carriage return
EXOTIC = ("Ωμέγα 𝔘𝔫𝔦 漢字 and cafe\u0301 🙂 naïve — “quotes” ‘x’\n" * 3) + "Tab\there\r\n"
# a short run: 8 windows of 32 tokens per step, no progress bar
SHORT = ["--batch", "8", "--seq-len", "32", "--quiet"]


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


EXOTIC_TOK = bpe.Tokenizer.train(own_text() + SMALL + EXOTIC, 160)


def test_round_trip_and_the_same_ids_in_hugging_face_on_every_line(tmp_path):
    tokenizers = pytest.importorskip("tokenizers")
    text, tok = own_text() + SMALL + EXOTIC, EXOTIC_TOK
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


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet="".join(EXOTIC_TOK.alphabet), max_size=80))
def test_random_texts_over_a_non_ascii_alphabet_round_trip_and_match_hugging_face(text):
    tokenizers = pytest.importorskip("tokenizers")
    hf = tokenizers.Tokenizer.from_str(EXOTIC_TOK.to_json())
    assert EXOTIC_TOK.decode(EXOTIC_TOK.encode(text)) == text
    assert hf.encode(text).ids == EXOTIC_TOK.encode(text)


# ----------------------------------------------------------------------------------------------------------------
# Bad input: one line naming the problem, exit 2, nothing written


BAD_TEXTS = [  # (file name, bytes, the phrase of the message)
    ("empty.txt", b"", "empty.txt is empty"),
    ("picture.png", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "picture.png looks binary: byte 8 is a NUL byte"),
    ("latin1.txt", "Zoë has a café.\n".encode("latin-1"), "latin1.txt is not UTF-8: byte 2 is 0xeb"),
]


@pytest.mark.parametrize("name, content, phrase", BAD_TEXTS + [
    ("folder", None, "folder is a folder, not a UTF-8 text file"),
    ("missing.txt", None, "missing.txt: cannot read it (No such file or directory)"),
    ("big.txt", None, f"is {bpe.MOST_TEXT + 1:,} bytes, more than the {bpe.MOST_TEXT:,} bytes"),
])
def test_a_bad_text_is_refused_in_one_line_naming_it(tmp_path, name, content, phrase):
    """bpe.read_text (bpe.py's --data) and oneblock/data.py's read_data (train.py's): a text past the bound is
    refused before it is read."""
    if content is not None:
        (tmp_path / name).write_bytes(content)
    elif name == "folder":
        (tmp_path / name).mkdir()
    elif name == "big.txt":
        with open(tmp_path / name, "wb") as f:  # a sparse file: no disk or memory spent on it
            f.truncate(bpe.MOST_TEXT + 1)
    for read in (bpe.read_text, read_data):
        with pytest.raises(ValueError) as e:
            read(tmp_path / name)
        assert phrase in str(e.value) and "\n" not in str(e.value), read


@pytest.mark.parametrize("text, vocab_size, phrase", [
    (own_text(), 20, "notes.txt: --vocab-size 20 is smaller than the 55 characters of the text"),
    ("Zoë saw.\n", 20, "notes.txt: --vocab-size 20 is too large: no pairs are left to merge after 5 merges (14 tokens);"
                       " expected at most 14"),
])
def test_a_vocab_size_the_text_cannot_give_is_refused_naming_the_file(text, vocab_size, phrase):
    with pytest.raises(ValueError, match=phrase.replace("(", r"\(").replace(")", r"\)")):
        bpe.train_on_text(text, vocab_size, "notes.txt")


@pytest.mark.parametrize("script, name, content, phrase", [  # (what the readers refuse: tested above)
    ("bpe.py", *BAD_TEXTS[2]),
    ("train.py", "tiny.txt", "Zoë saw it.\nOk.\n".encode(),
     "tiny.txt: its training text is 5 tokens, fewer than one window of --seq-len 32 + 1"),
    ("train.py", "one-line.txt", ("Zoë saw 2 Zoës. " * 40).encode(), "it has 1 line of text: nothing to hold out"),
    ("train.py", "notes.txt", own_text().encode(), "notes.txt, line 1: the character 'M' is not in the tokenizer"),
])
def test_train_py_and_bpe_py_refuse_bad_data_in_one_line_and_write_nothing(tmp_path, capsys, monkeypatch, script,
                                                                            name, content, phrase):
    monkeypatch.chdir(tmp_path)
    (tmp_path / name).write_bytes(content)
    vocab = {"tiny.txt": ["--vocab-size", 21], "notes.txt": ["--tokenizer", ROOT / "tokenizer.json"]}.get(name, [])
    out = (["--out", "runs/x.safetensors", *SHORT] if script == "train.py"
           else ["--vocab-size", 20, "--out", "toks/t.json"])
    before = files_under(tmp_path)
    proc = ran(script, capsys, "--data", name, *vocab, *out)
    assert proc.returncode == 2 and proc.stdout == "", proc.stdout + proc.stderr
    assert proc.stderr.count("\n") == 1 and phrase in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    assert files_under(tmp_path) == before  # not even the folder of --out


# ----------------------------------------------------------------------------------------------------------------
# The split


def test_the_split_follows_the_file():
    lines = "".join(f"line {i}\n" for i in range(20))
    cut, unit, units, held = split_text(lines, 0.1)
    assert (unit, units, held) == ("line", 20, 2) and lines[cut:] == "line 18\nline 19\n"
    docs = "A first\ndocument.\n\n \nA second.\n\n\nThe third\none.\n"  # " " on its own: a blank line too
    cut, unit, units, held = split_text(docs, 0.1)
    assert (unit, units, held) == ("document", 3, 1) and docs[cut:] == "The third\none.\n"
    assert split_text("one\ntwo\n", 0.9)[3] == 1  # at least one unit trains


# ----------------------------------------------------------------------------------------------------------------
# A run on your own text


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    """A folder with notes.txt (a few KB of own_text) and runs/notes.safetensors, 300 steps of train.py --data."""
    folder = tmp_path_factory.mktemp("own-text")
    (folder / "notes.txt").write_text(own_text(), encoding="utf-8")
    proc = run("train.py", "--data", "notes.txt", "--vocab-size", 100, "--steps", 300, "--eval-every", 150,
               "--out", "runs/notes.safetensors", *SHORT, cwd=folder)
    assert proc.returncode == 0, proc.stderr
    (folder / "stdout.txt").write_text(proc.stdout, encoding="utf-8")
    return folder


def test_the_run_says_how_it_split_and_that_there_is_no_floor(run_dir):
    out = (run_dir / "stdout.txt").read_text(encoding="utf-8")
    assert out.startswith("notes.txt: 5,746 characters in 120 lines; the last 12 validate")
    assert "tokenizer: trained on notes.txt, 100 tokens (55 characters + 45 merges)" in out
    assert "no floor: nobody knows the entropy of this text" in out and "floor 0." not in out
    unigram = float(out.split("the token frequencies alone ")[1].split()[0])
    val = float(out.split("| val ")[-1].split()[0])
    assert val < unigram - 1.0  # the model uses the context: far below what token frequencies alone score
    assert "per character | no floor known | runs/notes.safetensors" in out


def test_the_checkpoint_carries_its_tokenizer_and_a_copy_lies_beside_it(run_dir):
    ckpt = checkpoint.load_checkpoint(run_dir / "runs" / "notes.safetensors")
    carried = ckpt["metadata"][checkpoint.TOKENIZER_KEY]
    assert carried == bpe.Tokenizer.train(own_text(), 100).to_json()
    assert ckpt["metadata"]["tokenizer_sha256"] == checkpoint.sha256_text(carried)
    assert (run_dir / "runs" / "notes.safetensors.tokenizer.json").read_text(encoding="utf-8") == carried
    assert ckpt["metadata"]["text"] == "notes.txt" and ckpt["metadata"]["split"] == "line"
    assert ckpt["metadata"]["text_sha256"] == checkpoint.sha256_file(run_dir / "notes.txt")
    assert ckpt["config"] == ModelConfig(vocab=100, d=16, hidden=64, max_len=64, positions="learned")
    assert ckpt["training"]["val_fraction"] == 0.1 and ckpt["training"]["vocab_size"] == 100
    assert sorted(p.name for p in (run_dir / "runs").iterdir()) == ["notes.best.safetensors", "notes.safetensors",
                                                                    "notes.safetensors.tokenizer.json"]


def test_the_recorded_validation_loss_is_the_loss_of_the_held_out_text(run_dir):
    """An independent reading of the held-out lines with the plain NumPy mirror in float64, window by window."""
    from oneblock import numpy_model

    ckpt = checkpoint.load_checkpoint(run_dir / "runs" / "notes.safetensors")
    tok = checkpoint.tokenizer_of(ckpt, ROOT / "tokenizer.json", "notes")
    params = numpy_model.from_lists(checkpoint.reference_params(ckpt))
    val_text = "".join(own_text().splitlines(keepends=True)[-12:])  # the last 12 of 120 lines
    ids = tok.encode(val_text)
    windows = [ids[i:i + 33] for i in range(0, len(ids) - 1, 32)]  # 33 tokens, overlapping by one
    nats = sum(numpy_model.sequence_loss(params, w[:-1], w[1:], ckpt["config"]) * (len(w) - 1) for w in windows)
    assert nats / (len(ids) - 1) == pytest.approx(float(ckpt["metadata"]["val_loss"]), rel=1e-5)


def test_sample_reads_the_checkpoint_with_no_tokenizer_flag(run_dir, capsys, monkeypatch):
    """Greedy text from sample.py against an independent greedy loop on model.py with the carried tokenizer (its
    backends' agreement with model.py: tests/test_sample.py)."""
    monkeypatch.chdir(run_dir)
    path = run_dir / "runs" / "notes.safetensors"
    ckpt = checkpoint.load_checkpoint(path)
    tok = bpe.Tokenizer.from_json(ckpt["metadata"][checkpoint.TOKENIZER_KEY], "carried")
    params = checkpoint.reference_params(ckpt)
    ids = tok.encode("\nZoë gives")
    for _ in range(40):
        last = model.forward(params, ids[-64:])[0][-1]
        ids.append(last.index(max(last)))
    want = "Zoë gives" + tok.decode(ids[len(tok.encode("\nZoë gives")):]) + "\n"
    proc = ran("sample.py", capsys, "--ckpt", path, "--prompt", "Zoë gives", "--temperature", 0, "--tokens", 40)
    assert proc.returncode == 0 and proc.stdout == want, proc.stderr
    proc = ran("sample.py", capsys, "--ckpt", path, "--prompt", "zoë gives")  # "z" is not in the text
    assert proc.returncode == 2 and "--prompt: unknown character 'z' at position 0" in proc.stderr, proc.stderr
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr  # (sample.py's one-line refusal)


def test_a_wrong_tokenizer_is_refused(run_dir, tmp_path, capsys, monkeypatch):
    """(Every tool that reads a checkpoint given a damaged carried tokenizer: tests/test_fuzz_checkpoints.py; a
    checkpoint of the stories given another tokenizer: tests/test_checkpoint.py.)"""
    monkeypatch.chdir(tmp_path)
    path = run_dir / "runs" / "notes.safetensors"
    # a resume told to use another tokenizer
    other = tmp_path / "other.json"
    bpe.Tokenizer.train(own_text(), 101).save(other)
    copy = tmp_path / "notes.safetensors"
    copy.write_bytes(path.read_bytes())
    proc = ran("train.py", capsys, "--data", run_dir / "notes.txt", "--tokenizer", other, "--steps", 300,
               "--eval-every", 150, "--out", copy, "--resume", *SHORT)
    assert proc.returncode == 2 and "token IDs would mean different things" in proc.stderr, proc.stderr
    assert copy.read_bytes() == path.read_bytes()
    # a checkpoint whose carried tokenizer was replaced
    carried = set_meta(checkpoint.TOKENIZER_KEY, other.read_text(encoding="utf-8"))
    copy.write_bytes(edited(path.read_bytes(), carried)())
    proc = ran("sample.py", capsys, "--ckpt", copy)
    assert proc.returncode == 2 and "does not have the SHA-256 recorded" in proc.stderr, proc.stderr
    # and one that records the other tokenizer's hash too: its size is not the model's
    copy.write_bytes(edited(path.read_bytes(), carried, set_meta("tokenizer_sha256", checkpoint.sha256_file(other)))())
    proc = ran("sample.py", capsys, "--ckpt", copy)
    assert proc.returncode == 2 and "its tokenizer has 101 tokens, but the model's vocabulary is 100" in proc.stderr


def test_a_resume_refuses_another_text_another_size_and_the_stories(run_dir, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "notes.safetensors"
    path.write_bytes((run_dir / "runs" / "notes.safetensors").read_bytes())
    same = ["--steps", 300, "--eval-every", 150, "--out", path, "--resume", *SHORT]
    changed = tmp_path / "notes.txt"
    changed.write_text(own_text().replace("Zoë", "Zoe"), encoding="utf-8")
    # (another width: every field of the model, tests/test_train.py)
    for args, phrase in [(["--data", changed, "--vocab-size", 100], "learned another text than"),
                         ([], "learned --data notes.txt; resume it with the same --data")]:
        proc = ran("train.py", capsys, *args, *same)
        assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and phrase in proc.stderr, proc.stderr
    assert path.read_bytes() == (run_dir / "runs" / "notes.safetensors").read_bytes()


def test_width_and_max_len_make_the_model_and_a_given_tokenizer_is_reused(run_dir, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    tokenizer = run_dir / "runs" / "notes.safetensors.tokenizer.json"
    proc = ran("train.py", capsys, "--data", run_dir / "notes.txt", "--tokenizer", tokenizer, "--width", 8,
               "--max-len", 32, "--steps", 20, "--out", "small.safetensors", *SHORT)
    assert proc.returncode == 0, proc.stderr
    ckpt = checkpoint.load_checkpoint(tmp_path / "small.safetensors")
    assert (ckpt["config"].d, ckpt["config"].hidden, ckpt["config"].max_len) == (8, 32, 32)
    assert ckpt["params"]["pos_emb"][1] == (32, 8) and ckpt["params"]["W_out"][1] == (8, 100)
    assert ckpt["metadata"]["tokenizer_sha256"] == checkpoint.sha256_file(tokenizer)
    assert ckpt["training"]["vocab_size"] is None
    assert f"tokenizer: {tokenizer}, 100 tokens" in proc.stdout


def test_the_explorer_exports_a_model_of_your_text(run_dir, tmp_path, monkeypatch):
    """(Which text it exports, and a text changed since refused: tests/test_explore_server.py.)"""
    monkeypatch.chdir(run_dir)  # where train.py ran: the text is there by the name it was given
    weights, fields = export.read_weights(Path("runs/notes.safetensors"), explicit=True)
    manifest = export.export_site(tmp_path / "site", weights, fields)
    data = tmp_path / "site" / "data"
    assert manifest["floor"] is None and manifest["val_floor"] is None and manifest["text"] == "notes.txt"
    carried = checkpoint.load_checkpoint(data / "weights.safetensors")["metadata"][checkpoint.TOKENIZER_KEY]
    assert (data / "tokenizer.json").read_text(encoding="utf-8") == carried
    assert manifest["tokenizer_sha256"] == checkpoint.sha256_text(carried)
    split = json.loads((data / "split.json").read_text(encoding="utf-8"))
    assert split["train"] + split["val"] == own_text() and split["seq_len"] == 32 and split["unit"] == "line"
    assert manifest["order"] == {"a": "now mia gives the hat to leo.", "b": "now leo gives the hat to mia."}


# ----------------------------------------------------------------------------------------------------------------
# What a run writes is as private as your text and your umask; the stories run carries no tokenizer


def modes_under(folder):
    """{name: permission bits} of every file under folder, relative."""
    return {str(p.relative_to(folder)): p.stat().st_mode & 0o777 for p in Path(folder).rglob("*") if p.is_file()}


PRIVATE_RUN = ["--data", "notes.txt", "--vocab-size", 100, "--steps", 8, "--eval-every", 4, "--out",
               "runs/notes.safetensors", *SHORT]  # a tiny run that writes every file at step 4 and again at 8
PRIVATE_FILES = ["notes.best.safetensors", "notes.safetensors", "notes.safetensors.tokenizer.json"]


@pytest.mark.skipif(os.name == "nt", reason="Windows has no owner, group and others' permission bits")
@pytest.mark.parametrize("umask, text_mode, written", PRIVACY, ids=privacy_id)
def test_the_checkpoints_and_the_copy_are_as_private_as_the_text_and_the_umask(notes, capsys, umask, text_mode,
                                                                               written):
    """train.py --data: the checkpoint, the best one and the copy of the tokenizer are readable by no one the
    umask or the text leaves out (before the fix: 0o644 whatever the umask and the text), and a resume keeps the
    privacy of the checkpoint it resumes."""
    (notes / "notes.txt").chmod(text_mode)
    proc = ran("train.py", capsys, *PRIVATE_RUN, "--stop-at", 4, umask=umask)
    assert proc.returncode == 0, proc.stderr
    assert modes_under(notes / "runs") == dict.fromkeys(PRIVATE_FILES, written)
    if written == 0o644:
        (notes / "runs" / "notes.safetensors").chmod(0o600)  # made private since: the resume keeps it so
        written = 0o600
    proc = ran("train.py", capsys, *PRIVATE_RUN, "--resume", umask=umask)
    assert proc.returncode == 0 and "resuming runs/notes.safetensors at step 4" in proc.stdout, proc.stderr
    assert "best val" in proc.stdout and "at step 8" in proc.stdout  # the best one was written again too
    assert modes_under(notes / "runs") == dict.fromkeys(PRIVATE_FILES, written)


def test_the_stories_run_carries_no_tokenizer_and_writes_as_the_umask_allows(tmp_path, capsys, monkeypatch):
    """Without --data the lab's own stories: the checkpoint is as before, the shipped tokenizer by its hash and
    nothing about --data; its files are 0o644 less what the umask takes (before the fix: 0o644 under 0o077)."""
    monkeypatch.chdir(tmp_path)
    proc = ran("train.py", capsys, "--steps", 4, "--eval-every", 4, "--out", "ckpt.safetensors", *SHORT,
               umask=0o077)
    assert proc.returncode == 0 and proc.stdout.startswith("floor 0.3081 nats/token (corpus-entropy.json)")
    meta = checkpoint.load_checkpoint(tmp_path / "ckpt.safetensors")["metadata"]
    assert list(meta) == ["format", "format_version", "config", "training", "tokenizer_sha256", "corpus_sha256",
                          "floor_nats_per_token", "val_floor_nats_per_token", "val_loss", checkpoint.DATA_HASH_KEY]
    assert meta["tokenizer_sha256"] == checkpoint.sha256_file(ROOT / "tokenizer.json")
    assert not math.isnan(float(meta["val_loss"]))
    assert files_under(tmp_path) == ["ckpt.best.safetensors", "ckpt.safetensors"]
    if os.name != "nt":  # (Windows has no owner, group and others' permission bits)
        assert modes_under(tmp_path) == {"ckpt.best.safetensors": 0o600, "ckpt.safetensors": 0o600}
