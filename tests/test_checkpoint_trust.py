"""What a checkpoint's header may say: each case of the defect report on checkpoint trust, refused by
checkpoint.load_bytes (in-process) with a message that names the value; the sizes a tool is asked for, priced before
they are spent, in a real subprocess of sample.py, compare.py, train.py --resume or explore.py under RLIMIT_AS (so
that a regression stops there instead of taking the machine), refused in one line with exit status 2 and nothing
written; and an export that cannot be written.

(tests/test_fuzz_checkpoints.py throws hundreds of damaged files, these cases among them, at every tool and holds each
to a one-line refusal; tests/test_page_loader.py gives the same files to the explorer page; tests/test_checkpoint.py
checks the container and the reader's other refusals.)"""

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from oneblock import checkpoint, export, settings
import bpe
from oneblock.data import TOKENIZER_FILE
from checkpoint_edits import (DEEP, RUNS, drop_meta, edit_json, edited, join_file, meta_json_edit, set_meta,
                              split_file, tensor_value, with_header, write_bases)

pytest.importorskip("numpy")
if os.name == "nt":
    pytest.skip("these tests set resource limits on their subprocesses (POSIX only)", allow_module_level=True)

ROOT = Path(__file__).resolve().parent.parent
LIMIT = 3 << 30  # RLIMIT_AS of the subprocesses that could spend memory: enough for NumPy, far below the machine
DECODE_S = 1.0  # the most CPU time checkpoint.decode may take to refuse a shape of 3,000,000 sizes


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    """A folder with notes.txt and the three small checkpoints of checkpoint_edits.RUNS; returns (folder, bytes)."""
    folder = tmp_path_factory.mktemp("trust")
    return folder, write_bases(folder)


def limited(memory=None, file_size=None):
    """A preexec_fn for subprocess: RLIMIT_AS of memory bytes, and RLIMIT_FSIZE of file_size bytes with SIGXFSZ
    ignored (so that a write past it fails with EFBIG, as on a full disk, instead of killing the process)."""
    def apply():
        import resource

        if memory is not None:
            resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
        if file_size is not None:
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
            resource.setrlimit(resource.RLIMIT_FSIZE, (file_size, file_size))
    return apply


def run(tool, *args, cwd, memory=LIMIT, file_size=None):
    """A tool (sample, compare, train, explore) run in a subprocess in cwd, as its command line runs it (compare:
    python3 -m dev.compare, with the lab's folder on the module path): (CompletedProcess, seconds it took)."""
    started = time.monotonic()
    command = ["-m", "dev.compare"] if tool == "compare" else [str(ROOT / f"{tool}.py")]
    proc = subprocess.run([sys.executable, *command, *map(str, args)], capture_output=True, text=True, cwd=cwd,
                          timeout=300, preexec_fn=limited(memory, file_size),
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    return proc, time.monotonic() - started


def refused(proc, *phrases):
    """Assert that proc refused in one line on stderr, "error: ..." with every phrase in it, exit status 2 and
    nothing on stdout; return that line."""
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stdout == "" and proc.stderr.count("\n") == 1 and proc.stderr.startswith("error: "), proc.stderr
    for phrase in phrases:
        assert phrase in proc.stderr, proc.stderr
    return proc.stderr


# ----------------------------------------------------------------------------------------------------------------
# Sizes priced before they are spent


@pytest.mark.parametrize("args, phrase", [
    (["--batch", "1000000000"], "--batch 1000000000 --length 63 --blocks 1 --heads 1 needs about"),
    (["--blocks", "10000"], "--batch 2 --length 63 --blocks 10000 --heads 1 needs about"),
])
def test_compare_prices_its_sizes_before_any_work(tmp_path, args, phrase):
    """These ran for minutes while memory grew; under a 3 GiB limit each is now refused at once, naming the value
    and the memory it needs."""
    proc, seconds = run("compare", "--no-torch", *args, cwd=tmp_path)
    line = refused(proc, phrase, "of memory, more than the")
    assert "GiB" in line and seconds < 30


def test_compare_prices_a_batch_at_a_checkpoints_weights(work):
    folder, _ = work
    proc, _ = run("compare", "--ckpt", "one-block.safetensors", "--no-torch", "--batch", "1000000000", cwd=folder)
    refused(proc, "--batch 1000000000 --length 63 at the weights of one-block.safetensors", "needs about")


def test_a_checkpoint_larger_than_memory_is_refused_before_it_is_read(tmp_path):
    """A sparse file of 8 GiB, under a 3 GiB address-space limit: read_whole's bound, priced with the memory."""
    path = tmp_path / "huge.safetensors"
    with open(path, "wb") as f:
        f.truncate(8 << 30)
    for tool, args in (("sample", ["--ckpt", path]), ("compare", ["--ckpt", path, "--no-torch"]),
                       ("train", [*RUNS["one-block"], "--out", path, "--resume"]),
                       ("explore", ["--ckpt", path, "--export", tmp_path / "site"])):
        proc, seconds = run(tool, *args, cwd=tmp_path)
        refused(proc, f"{path}: reading it (8.0 GiB) needs about 16.0 GiB of memory, more than the")
        assert seconds < 30
    assert sorted(p.name for p in tmp_path.iterdir()) == ["huge.safetensors"]


def test_sample_prices_the_tokens_it_is_asked_for(work):
    folder, _ = work
    proc, _ = run("sample", "--ckpt", "one-block.safetensors", "--tokens", 10 ** 12, cwd=folder)
    refused(proc, "--tokens 1000000000000 needs about", "of memory")


# ----------------------------------------------------------------------------------------------------------------
# Metadata: every field's type and range in one place


def damage(*edits, **options):
    """The damage of checkpoint_edits.edited as a function of a checkpoint's bytes (the hashes made right again,
    unless options say otherwise)."""
    return lambda raw: edited(raw, *edits, **options)()


def heads(n, resign):
    """Damage: heads n in the config and the training; the metadata's hash as it was, or made right (resign)."""
    return damage(*(meta_json_edit(key, lambda o: o.update(heads=n)) for key in ("config", "training")),
                  resign=resign)


def flip_w1(header, data):
    """An edit of the data: one bit of a weight of W1 flipped."""
    at = header["W1"]["data_offsets"][0] + 3
    return data[:at] + bytes([data[at] ^ 0x01]) + data[at + 1:]


CASES = [  # label, base, damage, phrases
    ("10^12 blocks", "grown", damage(meta_json_edit("config", lambda o: o.update(blocks=10 ** 12))),  # (by arithmetic)
     ["config blocks is 1,000,000,000,000", "holds 92", "missing tensors: ['block2.ln1_g'"]),
    ("config a list", "one-block", damage(set_meta("config", "[]")),
     ["metadata config is a JSON list, expected an object"]),
    ("training a number", "grown", damage(set_meta("training", "3")),
     ["metadata training is a JSON int, expected an object of settings"]),
    ("config 5,000 deep", "one-block", damage(set_meta("config", DEEP[0])),
     ["metadata config nests deeper than Python's JSON reader goes"]),
    ("training 5,000 deep", "own-text", damage(set_meta("training", DEEP[1])),
     ["metadata training nests deeper than Python's JSON reader goes"]),
    ("header 5,000 deep", "one-block", lambda r: with_header(b'{"__metadata__":' + DEEP[0].encode() + b"}",
                                                             split_file(r)[1]),
     ["the header nests deeper than Python's JSON reader goes", "the file is corrupt"]),
    ("val_loss abc", "one-block", damage(set_meta("val_loss", "abc")),
     ["metadata val_loss is 'abc', expected a finite number"]),
    ("val8fraction", "own-text", lambda r: edit_json(r, "training", lambda t: t.update(
        val8fraction=t.pop("val_fraction"))), ["training has the setting 'val8fraction', which no run"]),
    ("no val_fraction", "own-text", lambda r: edit_json(r, "training", lambda t: t.pop("val_fraction")),
     ["training lacks ['val_fraction'], which a model of your own text"]),
    ("no data_sha256", "one-block", damage(drop_meta(checkpoint.DATA_HASH_KEY), flip_w1, data_hash=False),
     ["metadata lacks data_sha256, so nothing shows whether the data is the data that was written"]),
    ("heads 2 -> 1", "grown", heads(1, resign=False),
     ["the metadata's SHA-256 differs from the one recorded in metadata_sha256"]),
    ("heads 2 -> 8", "grown", heads(8, resign=False),
     ["the metadata's SHA-256 differs from the one recorded in metadata_sha256"]),
    ("heads 2 -> 3, hash made right", "grown", heads(3, resign=True),
     ["config heads = 3 does not divide the width d = 8"]),
    ("version 2 without metadata_sha256", "grown", damage(drop_meta(checkpoint.METADATA_HASH_KEY)),
     ["has no metadata_sha256", "train it again"]),
    ("adam_step 2^62", "one-block", damage(tensor_value(checkpoint.STEP, [2 ** 62])),
     ["adam_step is 4611686018427387904, past the end of the run it records (training steps 4)"]),
    ("rng_state all zero", "grown", damage(tensor_value(checkpoint.RNG, [0] * 624)),
     ["rng_state has 624 words that are all zero"]),
]


@pytest.mark.parametrize("label, base, damage, phrases", CASES, ids=[case[0] for case in CASES])
def test_a_header_that_says_too_much_is_refused_naming_the_value(work, label, base, damage, phrases):
    _, bases = work
    with pytest.raises(ValueError) as e:
        checkpoint.load_bytes(damage(bases[base]), "m.safetensors")
    message = str(e.value)
    assert message.startswith("m.safetensors: ") and "\n" not in message, message
    for phrase in phrases:
        assert phrase in message, message


def long_shape(raw):
    """raw with tensor W1's shape a list of 3,000,000 twos."""
    header, data = split_file(raw)
    header["W1"]["shape"] = [2] * 3_000_000
    return join_file(header, data, resign=True)


def test_decode_refuses_a_long_shape_before_multiplying_it(work):
    """A shape of 3,000,000 twos was multiplied out before its size was checked (2^3,000,000, two minutes of
    arithmetic, then "Exceeds the limit (4300 digits)"). Now the shape's length is bounded before its sizes are
    looked at, and a product of sizes stops once it is past the data (a shape of 65 sizes is refused too, and one
    whose product passes the data by far)."""
    _, bases = work
    raw = long_shape(bases["one-block"])
    started = time.process_time()  # (this process's own work: the machine's other load is not the reader's)
    with pytest.raises(ValueError, match="has a shape of 3,000,000 sizes, more than the 64"):
        checkpoint.decode(raw)
    seconds = time.process_time() - started
    print(f"\ndecode refused 3,000,000 sizes in {seconds:.3f} s of CPU")
    assert seconds < DECODE_S, seconds
    header, data = split_file(bases["one-block"])
    header["W1"]["shape"] = [1] * 63 + header["W1"]["shape"]  # 65 sizes, the same number of values
    with pytest.raises(ValueError, match="has a shape of 65 sizes"):
        checkpoint.decode(join_file(header, data))
    header["W1"]["shape"] = [10 ** 4000, 10 ** 4000, 0]  # no values: the product is 0, however large the others
    with pytest.raises(ValueError, match=r"covers \d+ bytes, but F32 of shape \(1000.*needs 0"):
        checkpoint.decode(join_file(header, data))
    header["W1"]["shape"] = [2] * 64
    with pytest.raises(ValueError, match=r"tensor 'W1' is F32 of shape \(2, 2, .*, more values than the \d+ bytes of"
                                         r" data hold"):
        checkpoint.decode(join_file(header, data))


def test_a_width_of_ten_to_the_4000_is_refused_naming_the_sizes(work):
    """Its count of numbers has 8,000 digits, more than Python prints: the message says the power of ten instead of
    "Exceeds the limit (4300 digits) for integer string conversion"."""
    _, bases = work
    with pytest.raises(ValueError) as e:
        checkpoint.load_bytes(edit_json(bases["grown"], "config", lambda c: c.update(d=10 ** 4000)), "wide")
    for phrase in ("the config's sizes (vocab 96, d 1", "make at least 10^8,", "numbers, but the tensors of this"
                   " file hold"):
        assert phrase in str(e.value), str(e.value)


@pytest.mark.parametrize("value", ["1_000", "-3", " 2", "+3", "infinity"])
def test_a_loss_that_float_reads_but_no_run_writes_is_refused(work, value):
    """val_loss is written as repr writes a float: digits, a point, an exponent; never a sign, a space or an
    underscore, and a loss is never negative."""
    _, bases = work
    with pytest.raises(ValueError, match=re.escape(f"metadata val_loss is {value!r}, expected a finite number")):
        checkpoint.load_bytes(damage(set_meta("val_loss", value))(bases["grown"]), "loss")


def test_every_setting_train_py_and_the_page_record_is_known(work):
    """checkpoint.py cannot import train.py (train imports checkpoint): its table of settings must cover train.py's
    and the explorer page's, and the backends must be train.py's --backend choices, or a new setting would make
    every new checkpoint unreadable."""
    assert set(settings.TRAINING_SETTINGS + settings.TEXT_SETTINGS) <= set(checkpoint.TRAINING_RULES)
    assert set(settings.BACKENDS) | {"explorer"} == set(checkpoint.BACKENDS)
    page = (ROOT / "explorer" / "train.js").read_text(encoding="utf-8")
    defaults = re.search(r"export const DEFAULTS = \{(.*?)\};", page, re.S).group(1)
    keys = re.findall(r"^\s+(\w+):", defaults, re.M)
    assert len(keys) >= 10 and set(keys) | {"backend", "dtype", "seed"} <= set(checkpoint.TRAINING_RULES), keys
    folder, bases = work
    assert checkpoint.load_bytes(bases["own-text"], "own")["training"]["val_stories"] is None
    tok = bpe.Tokenizer.load(TOKENIZER_FILE)
    assert checkpoint.load_bytes(export.untrained_checkpoint(tok), "untrained")["step"] == 0


# ----------------------------------------------------------------------------------------------------------------
# explore.py --export: a write that fails is one line, exit 2, and nothing half-written


def snapshot(folder):
    """{relative path: bytes} of every file under folder."""
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(Path(folder).rglob("*")) if p.is_file()}


def test_an_export_that_cannot_be_written_is_one_line_and_leaves_the_old_export(work, tmp_path):
    """A full disk, as RLIMIT_FSIZE makes one: no file may pass 64 KB, so the stories' split.json (over 100 KB) fails
    after the weights and the tokenizer were written beside their old copies. The old export (of the own text)
    stays as it was, file for file, with no temporary file left."""
    folder, _ = work
    site = tmp_path / "site"
    proc, _ = run("explore", "--ckpt", "own-text.safetensors", "--export", site, cwd=folder)
    assert proc.returncode == 0, proc.stderr
    old = snapshot(site)
    proc, _ = run("explore", "--ckpt", "one-block.safetensors", "--export", site, cwd=folder, file_size=64 << 10)
    refused(proc, f"--export {site}: cannot write {site / 'data' / 'split.json'} (File too large)")
    assert snapshot(site) == old

    # the same into a folder that did not exist: the folders it made are not left behind
    proc, _ = run("explore", "--ckpt", "one-block.safetensors", "--export", tmp_path / "new" / "site", cwd=folder,
                  file_size=64 << 10)
    refused(proc, "(File too large)")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["site"]

    # and without the limit the export goes through: the stories' files replace the own text's
    proc, _ = run("explore", "--ckpt", "one-block.safetensors", "--export", site, cwd=folder)
    assert proc.returncode == 0 and len(snapshot(site)["data/split.json"]) > 100_000, proc.stderr


def test_an_export_to_where_no_folder_can_be_is_one_line(work, tmp_path):
    folder, _ = work
    (tmp_path / "file").write_text("x", encoding="utf-8")
    places = [(tmp_path / "file" / "site", "cannot create the folder", "(Not a directory)"),
              (Path("/proc/explore-site"), "cannot create the folder /proc/explore-site", "")]
    if os.path.isdir("/sys/kernel"):  # a folder that exists and nobody, not even root, can write in
        places.append((Path("/sys/kernel"), "cannot create the folder /sys/kernel/data", ""))
    if os.geteuid() != 0:  # (root writes in any folder whatever its mode says)
        locked = tmp_path / "locked"
        locked.mkdir(mode=0o555)
        places.append((locked, f"cannot create the folder {locked / 'data'}", "(Permission denied)"))
    for place, *phrases in places:
        proc, _ = run("explore", "--ckpt", folder / "one-block.safetensors", "--export", place, cwd=folder)
        refused(proc, f"--export {place}: ", *phrases)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file"] + ["locked"] * (os.geteuid() != 0)
