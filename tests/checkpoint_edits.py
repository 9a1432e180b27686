"""Helpers shared by the tests that damage checkpoints on purpose: three small checkpoints written by train.py in a
second, a checkpoint file taken apart and put together again (the hashes made right or left as they were), and the
damaged files (mutations) for the tools (tests/test_fuzz_checkpoints.py) and the page (tests/test_page_loader.py)."""

import hashlib
import json
import random
import struct
import subprocess
import sys
from pathlib import Path

from oneblock import checkpoint
from run_helpers import ROOT, own_text

SEED = 20240611  # of the seeded mutations
SHORT = ["--steps", "4", "--batch", "2", "--seq-len", "8", "--width", "8", "--eval-every", "2", "--ckpt-every", "2",
         "--quiet"]
RUNS = {  # name -> train.py arguments of a small checkpoint (a --resume of it takes the same ones)
    "one-block": [*SHORT, "--val-stories", "5"],  # format version 1
    "grown": [*SHORT, "--val-stories", "5", "--blocks", "2", "--heads", "2"],  # format version 3
    "own-text": [*SHORT, "--data", "notes.txt", "--max-len", "8", "--vocab-size", "60"],  # needs notes.txt
}


def two_documents():
    """The text the own-text checkpoint learns (notes.txt): two documents between blank lines, the first long enough
    to train on, so that whatever the val_fraction, the second one validates.

    >>> two_documents().count("\\n\\n")
    1
    """
    return own_text(30) + "\n" + own_text(4, seed=1)


def write_bases(folder):
    """Train the RUNS in folder, side by side (with notes.txt there), and return {name: the checkpoint's bytes}."""
    folder = Path(folder)
    (folder / "notes.txt").write_text(two_documents(), encoding="utf-8")
    procs = {name: subprocess.Popen([sys.executable, str(ROOT / "train.py"), *args, "--out", f"{name}.safetensors"],
                                    cwd=folder, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for name, args in RUNS.items()}
    for name, proc in procs.items():
        _, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, f"{name}: {err}"
    return {name: (folder / f"{name}.safetensors").read_bytes() for name in RUNS}


def split_file(raw):
    """(header dict, data bytes) of a safetensors file's bytes."""
    n = int.from_bytes(raw[:8], "little")
    return json.loads(raw[8:8 + n]), raw[8 + n:]


def join_file(header, data, data_hash=True, resign=False):
    """The bytes of a safetensors file of this header (a dict) and data, padded as checkpoint.encode pads. data_hash:
    record the data's SHA-256 anew; resign: and the metadata's, when it has one (a grown model's), so that only the
    checks of the values themselves stand in the way of an edit."""
    meta = header.get("__metadata__")
    if isinstance(meta, dict):
        if data_hash:
            meta[checkpoint.DATA_HASH_KEY] = hashlib.sha256(data).hexdigest()
        if resign and checkpoint.METADATA_HASH_KEY in meta:
            meta[checkpoint.METADATA_HASH_KEY] = checkpoint.metadata_digest(meta)
    return with_header(json.dumps(header, separators=(",", ":")).encode("utf-8"), data)


def with_header(text, data):
    """A safetensors file of the header bytes text (padded with spaces) and data."""
    text += b" " * (-(8 + len(text)) % checkpoint.HEADER_ALIGN)
    return len(text).to_bytes(8, "little") + text + data


# ----------------------------------------------------------------------------------------------------------------
# The damaged files: seeded mutations of the three checkpoints, every kind of edit of their header, and the
# pitfalls of a reader in JavaScript

HOSTILE = ["16", 16.0, True, None, [], {}, -1, 0, 10 ** 12, 10 ** 4000, 1e308, "x" * 300]  # for any JSON value
DEEP = ["[" * 5000 + "]" * 5000, '{"a":' * 5000 + "1" + "}" * 5000]  # deeper than Python's JSON reader goes
NOT_OBJECTS = ["[]", "3", "null", '"x"', "{", "1" * 5000, *DEEP]
BAD_TEXT_NUMBERS = ["abc", "", "nan", "1e999", "-inf"]
# the headers that cost a careless reader its time (a shape of 3,000,000 twos was multiplied out for two minutes, and
# the page froze for 7 to 140 s), by the end of their labels: each reader must refuse them at once, by arithmetic
HOSTILE_HEADERS = ("shape of 3,000,000 twos", "blocks = 10^7", "blocks = 10^9", "blocks = 10^12",
                   "d = 300000001", "d = 100000000000")


def edited(base, *edits, data_hash=True, resign=True):
    """A mutation of base: make() -> bytes. Each edit(header, data), in turn, changes the header dict in place and
    may return new data (bytes; anything else keeps it); then the data's hash is made right again (data_hash), and a
    grown model's metadata hash too (resign), so that the checks of the values themselves must refuse the edit."""
    def make():
        header, data = split_file(base)
        for edit in edits:
            new = edit(header, data)
            data = new if isinstance(new, bytes) else data
        return join_file(header, data, data_hash, resign)
    return make


def meta_json_edit(key, change):
    """An edit of the JSON object in metadata key (config or training): change(dict) changes it in place."""
    def edit(header, data):
        obj = json.loads(header["__metadata__"][key])
        change(obj)
        header["__metadata__"][key] = json.dumps(obj)
    return edit


def set_meta(key, value):
    """An edit: metadata key set to value."""
    def edit(header, data):
        header["__metadata__"][key] = value
    return edit


def drop_meta(key):
    """An edit: metadata key removed."""
    def edit(header, data):
        header["__metadata__"].pop(key, None)
    return edit


def version_2(**model):
    """An edit of a grown model's file (version 3) into one as version 2 wrote it: its training repeats the model's
    positions, blocks and heads (those of its config, or model's values for them)."""
    def edit(header, data):
        config = json.loads(header["__metadata__"]["config"])
        header["__metadata__"]["format_version"] = "2"
        repeated = {name: config[name] for name in ("positions", "blocks", "heads")}
        meta_json_edit("training", lambda o: o.update({**repeated, **model}))(header, data)
    return edit


def tensor_value(name, values, dtype="<q"):
    """An edit of the data: the first values of tensor name, packed as dtype."""
    def edit(header, data):
        begin, end = header[name]["data_offsets"]
        packed = b"".join(struct.pack(dtype, v) for v in values)
        return data[:begin] + packed + data[begin + len(packed):]
    return edit


def structured(name, base):
    """Every edit of the header's meaning tried on base: (label, make)."""
    header, data = split_file(base)
    meta = header["__metadata__"]
    config, training = json.loads(meta["config"]), json.loads(meta["training"])
    grown = checkpoint.METADATA_HASH_KEY in meta
    out = []

    def add(label, make):
        out.append((f"{name}: {label}", make))

    for key in ("config", "training"):
        for text in NOT_OBJECTS:
            add(f"{key} = {text[:12]!r}...", edited(base, set_meta(key, text)))
    for key, obj in (("config", config), ("training", training)):
        for field in obj:
            add(f"{key} without {field}", edited(base, meta_json_edit(key, lambda o, f=field: o.pop(f))))
            add(f"{key} {field} renamed", edited(base, meta_json_edit(
                key, lambda o, f=field: o.__setitem__(f[:-1] + chr(ord(f[-1]) ^ 1), o.pop(f)))))
            for value in HOSTILE:
                add(f"{key} {field} = {str(value)[:12]}", edited(base, meta_json_edit(
                    key, lambda o, f=field, v=value: o.__setitem__(f, v))))
    add("training val8fraction", edited(base, meta_json_edit("training", lambda o: o.__setitem__("val8fraction",
                                                                                                 0.1))))
    add("config blocks = 10^12", edited(base, meta_json_edit("config", lambda o: o.update(blocks=10 ** 12))))
    add("config blocks = 10^12, unsigned", edited(base, meta_json_edit("config", lambda o: o.update(blocks=10 ** 12)),
                                                  resign=False))
    if grown:
        for heads in (1, 4, 8):  # valid sizes: only the metadata's hash can tell
            add(f"heads {heads} in config", edited(
                base, meta_json_edit("config", lambda o, n=heads: o.update(heads=n)), resign=False))
        add("training repeats heads in version 3", edited(base, meta_json_edit("training",
                                                                                lambda o: o.update(heads=2))))
        add("version 2, training heads 1", edited(base, version_2(heads=1)))
        add("version 2, training positions rope", edited(base, version_2(positions="rope")))
        add("no metadata_sha256", edited(base, drop_meta(checkpoint.METADATA_HASH_KEY)))
        add("metadata_sha256 of zeros", edited(base, set_meta(checkpoint.METADATA_HASH_KEY, "0" * 64), resign=False))
        add("format version 1", edited(base, set_meta("format_version", "1")))
    add("format version 4", edited(base, set_meta("format_version", "4")))
    add("no data_sha256", edited(base, drop_meta(checkpoint.DATA_HASH_KEY), data_hash=False))
    top = header["pos_emb"]["data_offsets"][0] + int(header["pos_emb"]["dtype"][1:]) // 8 - 1  # row 0's exponent
    add("no data_sha256, a weight changed", edited(base, drop_meta(checkpoint.DATA_HASH_KEY),
                                                   lambda h, d: d[:top] + bytes([d[top] ^ 0x40]) + d[top + 1:],
                                                   data_hash=False))
    for key in meta:
        if key == checkpoint.DATA_HASH_KEY:
            continue
        add(f"metadata without {key}", edited(base, drop_meta(key)))
        add(f"metadata {key} renamed", edited(base, lambda h, d, k=key: h["__metadata__"].__setitem__(
            k[:-1] + chr(ord(k[-1]) ^ 1), h["__metadata__"].pop(k))))
        for value in (*BAD_TEXT_NUMBERS, "0" * 64, "Z" * 64):  # ("0" * 64 is a loss of 0: only the hash tells)
            add(f"metadata {key} = {value!r}", edited(base, set_meta(key, value),
                                                       resign=key not in checkpoint.NUMBER_KEYS))
    add("an unknown metadata key", edited(base, set_meta("note", "hello")))
    if checkpoint.TOKENIZER_KEY in meta:
        for text in ("[]", '{"model": {"vocab": {}, "merges": []}}', '{"model": 1}', *DEEP):
            add(f"carried tokenizer {text[:12]!r}... (hash made right)", edited(
                base, set_meta(checkpoint.TOKENIZER_KEY, text),
                set_meta("tokenizer_sha256", checkpoint.sha256_text(text))))
    steps = training["steps"]
    for value in (2 ** 62, 2 ** 63 - 1, steps + 1, -1):
        add(f"adam_step = {value}", edited(base, tensor_value(checkpoint.STEP, [value])))
    add("rng_state words all zero", edited(base, tensor_value(checkpoint.RNG, [0] * 624)))
    add("rng_state word 2^40", edited(base, tensor_value(checkpoint.RNG, [2 ** 40])))
    add("rng_state word -1", edited(base, tensor_value(checkpoint.RNG, [-1])))
    last = header[checkpoint.RNG]["data_offsets"][0] + 624 * 8
    add("rng_state position 625", edited(base, lambda h, d: d[:last] + (625).to_bytes(8, "little") + d[last + 8:]))
    float_type = "<f" if header["tok_emb"]["dtype"] == "F32" else "<d"
    for value in (float("nan"), float("inf")):
        add(f"a weight = {value}", edited(base, tensor_value("W1", [value], float_type)))
    for field, values in (("dtype", ["F16", "I64", 7, []]), ("shape", [[1000], [-1], "x", [10 ** 12, 10 ** 12]]),
                          ("data_offsets", [[0], [5, 3], ["a", 1], [0, 10 ** 30]])):
        for value in values:
            add(f"tensor W1 {field} = {value}", edited(base, lambda h, d, f=field, v=value: h["W1"].update({f: v})))
    add("tensor W1 gone from the header", edited(base, lambda h, d: h.pop("W1")))
    add("tensor W1 renamed W9", edited(base, lambda h, d: h.__setitem__("W9", h.pop("W1"))))
    for value in ([], "x", None, {"format": 3}):
        add(f"__metadata__ = {value}", edited(base, lambda h, d, v=value: h.__setitem__("__metadata__", v)))
    add("header nests 5,000 deep", lambda: with_header(b'{"__metadata__":' + DEEP[0].encode() + b"}", data))
    add("header a list", lambda: with_header(b"[" + json.dumps(header).encode() + b"]", data))
    add("header twice the key W1", lambda: with_header(
        json.dumps(header).encode()[:-1] + b',"W1":' + json.dumps(header["W1"]).encode() + b"}", data))
    return out


def random_mutations(name, base, rng):
    """Seeded damage anywhere in base: (label, make)."""
    n = int.from_bytes(base[:8], "little")
    out = []

    def flip(at, bit):
        return lambda: base[:at] + bytes([base[at] ^ (1 << bit)]) + base[at + 1:]

    for _ in range(30):
        at, bit = rng.randrange(8 + n), rng.randrange(8)
        out.append((f"{name}: header byte {at} bit {bit} flipped", flip(at, bit)))
    for _ in range(15):
        at, value = rng.randrange(8 + n), rng.randrange(256)
        out.append((f"{name}: header byte {at} = {value}",
                    lambda a=at, v=value: base[:a] + bytes([v]) + base[a + 1:]))
    for _ in range(10):
        at, bit = rng.randrange(8 + n, len(base)), rng.randrange(8)
        out.append((f"{name}: data byte {at} bit {bit} flipped", flip(at, bit)))
    for _ in range(10):
        cut = rng.randrange(len(base))
        out.append((f"{name}: cut to {cut} bytes", lambda c=cut: base[:c]))
    out.append((f"{name}: 8 bytes more", lambda: base + bytes(8)))
    return out


def pitfalls(name, base):
    """Damage that a reader gets past unless it reads every number, key and name as Python does, and the headers
    that cost a careless reader its time or memory, each tried on base: (label, make). Every one must be refused.
    JavaScript's JSON.parse keeps the last of two equal keys, reads 8.0 as the whole number 8, rounds whole numbers
    past 2^53 and gives objects a prototype (a tensor named "__proto__" or "toString"); float() reads "1_000" and
    "-3", which no loss is; and a shape of three million twos, a width of 300,000,001 or 10^7 blocks must be refused
    by arithmetic, before anything is made for them."""
    header, data = split_file(base)
    meta = header["__metadata__"]
    begin, end = header["W1"]["data_offsets"]
    out = []

    def add(label, make):
        out.append((f"{name}: {label}", make))

    for key in ("config", "training"):  # its first key written twice, as text (a dict cannot hold it twice)
        first, value = next(iter(json.loads(meta[key]).items()))
        add(f"{key} with a key twice", edited(base, set_meta(
            key, meta[key][:-1] + f", {json.dumps(first)}: {json.dumps(value)}}}")))
    add("header with __metadata__ twice", lambda: with_header(
        json.dumps(header).encode()[:-1] + b',"__metadata__":' + json.dumps(meta).encode() + b"}", data))
    for new in ("__proto__", "toString"):
        add(f"tensor W1 named {new}", edited(base, lambda h, d, n=new: h.__setitem__(n, h.pop("W1"))))
    add("a tensor named constructor", edited(base, lambda h, d: h.__setitem__(
        "constructor", {"dtype": "F32", "shape": [0], "data_offsets": [len(d), len(d)]})))
    add("tensor W1 data_offsets as floats", edited(base, lambda h, d: h["W1"].update(
        data_offsets=[float(begin), float(end)])))
    add("tensor W1 shape as floats", edited(base, lambda h, d: h["W1"].update(
        shape=[float(s) for s in h["W1"]["shape"]])))
    add("adam_step 2^53 + 1, training steps 2^53", edited(base, meta_json_edit(
        "training", lambda o: o.update(steps=2 ** 53)), tensor_value(checkpoint.STEP, [2 ** 53 + 1])))
    add("training lr = NaN", edited(base, meta_json_edit("training", lambda o: o.update(lr=float("nan")))))
    add("explorer_source half a character", edited(base, set_meta("explorer_source", "\ud800")))
    for key in [key for key in checkpoint.NUMBER_KEYS if key in meta]:
        for value in ("1_000", "-3", " 2", "+3", "infinity", "NaN", "0x10"):
            add(f"metadata {key} = {value!r}", edited(base, set_meta(key, value)))
    add("tensor W1 shape of 3,000,000 twos", edited(base, lambda h, d: h["W1"].update(shape=[2] * 3_000_000)))
    add("tensor W1 shape of 65 sizes", edited(base, lambda h, d: h["W1"].update(shape=[1] * 63 + h["W1"]["shape"])))
    for blocks in (10 ** 7, 10 ** 9):  # (in the training settings too, so that the two agree)
        add(f"config blocks = 10^{len(str(blocks)) - 1}", edited(
            base, meta_json_edit("config", lambda o, n=blocks: o.update(blocks=n)),
            meta_json_edit("training", lambda o, n=blocks: o.update(blocks=n))))
    for d in (300_000_001, 10 ** 4000):
        add(f"config d = {str(d)[:12]}", edited(base, meta_json_edit("config", lambda o, n=d: o.update(d=n))))
    return out


def mutations(bases):
    """Every case, (label, bytes), in a seeded order: all the random damage, a seeded share of the structured
    edits (every kind of edit is tried on some base; there are more than the time allows on all three), and every
    pitfall on every base."""
    rng = random.Random(SEED)
    cases = []
    for name, base in bases.items():
        cases += [(label, make()) for label, make in random_mutations(name, base, rng)]
        edits = structured(name, base)
        keep = set(rng.sample(range(len(edits)), min(len(edits), 120)))
        must = [i for i, (label, _) in enumerate(edits) if any(word in label for word in MUST)]
        cases += [(label, make()) for i, (label, make) in enumerate(edits) if i in keep or i in must]
        cases += [(label, make()) for label, make in pitfalls(name, base)]
    rng.shuffle(cases)
    return cases


MUST = ("heads ", "metadata_sha256", "data_sha256", "val8fraction", "blocks = 10^12", "nests", "adam_step",
        "rng_state", "config = '[]'", "training = '3'", "val_loss = 'abc'", "tokenizer", "= '[[[[", "= '{\"a\":{",
        "training without val_fraction")  # tried on every base (tests/test_checkpoint.py's cases among them)
