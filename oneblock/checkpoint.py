"""Checkpoints in the safetensors format, written and read with the standard library only.

A safetensors file is three parts:
    8 bytes   N, the length of the header, an unsigned little-endian 64-bit integer
    N bytes   the header: UTF-8 JSON starting with "{", padded with spaces at the end (here to a multiple of 8, so
              every tensor starts 8-byte aligned). It maps each tensor name to {"dtype", "shape", "data_offsets":
              [begin, end]}, offsets into the data part; the optional key "__metadata__" maps strings to strings.
    the rest  the data: every tensor's values, little-endian, row-major, one after another with no gaps.
So `safetensors.numpy.load_file` and `safetensors.torch.load_file` read what `save_file` writes, and the reference
model can load a checkpoint without NumPy.

Here a tensor is a plain triple (dtype, shape, values): dtype a safetensors name ("F32", "F64" or "I64"), shape a
tuple of ints, values a flat sequence of numbers in row-major order (a list, or the array.array that reading gives).

    >>> raw = encode({"w": ("F32", (2, 2), [1.0, 2.0, 3.0, 4.0])}, {"note": "hi"})
    >>> tensors, meta = decode(raw)
    >>> tensors["w"][0], tensors["w"][1], tensors["w"][2].tolist(), meta["note"]
    ('F32', (2, 2), [1.0, 2.0, 3.0, 4.0], 'hi')

The second half of the file is the training checkpoint built on that container: which tensors and metadata a
checkpoint of this model holds, and `load_checkpoint`, which rejects a bad file with a message naming the problem.
Its tensors are every parameter (F32 or F64, one dtype for all, named as sizes.py names them), "adam_m.NAME" and
"adam_v.NAME" (Adam's moments, of the same dtype and shapes), "adam_step" (I64, the steps taken) and "rng_state"
(I64, 625 numbers: the batch sampler's Mersenne Twister state). Its metadata strings are

    format, format_version   "one-block checkpoint"; "1" for one block and one head, whose sizes are all in the
                             tensors' shapes (its bytes are what they were before models could grow), "2" for a grown
                             model, whose config has blocks and heads
    config                   a JSON object: vocab, d, hidden, max_len, use_positions, positions (absent in files
                             from before the position schemes) and, in version 2 only, blocks and heads
    training                 a JSON object of the run's settings (train.py's, or the explorer page's), see
                             TRAINING_RULES; a file of your own text has at least val_fraction and seq_len
    tokenizer_sha256         the SHA-256 of the tokenizer.json its token IDs belong to
    data_sha256              the SHA-256 of the data part: a file without it is refused (it cannot show its data
                             is whole)
    metadata_sha256          version 2 (required): the SHA-256 of every other metadata entry but data_sha256, as
                             metadata_digest writes them, so that a changed size no tensor shows (heads) is caught
    corpus_sha256, val_loss, floor_nats_per_token, val_floor_nats_per_token   the stories' hash, and finite numbers
                             of nats, at least 0, in digits (as repr writes a float)
    text, text_sha256, split, tokenizer   a model of your own text (train.py --data): all four, or none
    explorer_source          the explorer page's downloads say where their weights came from

and `check_checkpoint` checks each of them, in one place. A version 1 file's metadata has no hash of its own: its
sizes are all in its tensors' shapes, but a changed val_loss goes unnoticed there, and so would use_positions and
positions changed together (one of them alone is caught: they must agree).
"""

import array
import hashlib
import itertools
import json
import math
import os
import random
import re
import stat
import sys
from pathlib import Path

from atomic import read_whole, write_atomic
import model
from oneblock import machine, sizes

# ----------------------------------------------------------------------------------------------------------------
# The safetensors container

DTYPES = {"F32": "f", "F64": "d", "I64": "q"}  # safetensors dtype -> array.array typecode (4, 8 and 8 bytes)
HEADER_ALIGN = 8  # the header is padded with spaces to a multiple of this, as the safetensors library does
MAX_HEADER = 100 * 1024 * 1024  # a longer header means a corrupt file (the safetensors library has the same limit)
DATA_HASH_KEY = "data_sha256"  # metadata key: SHA-256 of the data part, checked on reading to catch corrupt bytes
MAX_DIGITS = 4300  # the longest whole number read from JSON: Python's own default limit (since 3.11, 3.10.7)
MAX_RANK = 64  # the most dimensions a tensor may have (NumPy's own limit; the lab writes 0, 1 or 2)
READ_COST = 2  # reading a file holds its bytes and the arrays decoded from them: about twice its size in memory


def _packed(dtype, values):
    """The little-endian bytes of a flat sequence of numbers as dtype.

    >>> _packed("I64", [1, 2]).hex()
    '01000000000000000200000000000000'
    """
    a = array.array(DTYPES[dtype], values)
    if sys.byteorder == "big":
        a.byteswap()
    return a.tobytes()


def _unpacked(dtype, raw):
    """A flat array.array of the numbers in little-endian bytes raw.

    >>> _unpacked("F64", bytes(8)).tolist()
    [0.0]
    """
    a = array.array(DTYPES[dtype])
    a.frombytes(raw)
    if sys.byteorder == "big":
        a.byteswap()
    return a


def encode(tensors, metadata=None):
    """The bytes of a safetensors file holding tensors {name: (dtype, shape, values)} in the given order.

    metadata (str -> str) goes into "__metadata__", with DATA_HASH_KEY added.

    >>> raw = encode({"s": ("I64", (), [7])})
    >>> int.from_bytes(raw[:8], "little") % 8, raw[8:9], len(raw) % 8
    (0, b'{', 0)
    """
    metadata = dict(metadata or {})
    for key, value in metadata.items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise ValueError(f"metadata must map strings to strings; got {key!r}: {value!r}")
    if DATA_HASH_KEY in metadata:
        raise ValueError(f"metadata key {DATA_HASH_KEY!r} is reserved: encode adds it")
    header, chunks, offset = {}, [], 0
    for name, (dtype, shape, values) in tensors.items():
        if name == "__metadata__" or not isinstance(name, str) or not name:
            raise ValueError(f"tensor name {name!r} is not allowed; expected a non-empty string other than"
                             f" '__metadata__'")
        if dtype not in DTYPES:
            raise ValueError(f"tensor {name!r} has dtype {dtype!r}; expected one of {sorted(DTYPES)}")
        shape = tuple(shape)
        if any(type(n) is not int or n < 0 for n in shape):
            raise ValueError(f"tensor {name!r} has shape {shape}; expected a tuple of non-negative ints")
        if len(values) != math.prod(shape):
            raise ValueError(f"tensor {name!r} has {len(values)} values but shape {shape} needs {math.prod(shape)}")
        raw = _packed(dtype, values)
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset, offset + len(raw)]}
        chunks.append(raw)
        offset += len(raw)
    data = b"".join(chunks)
    metadata[DATA_HASH_KEY] = hashlib.sha256(data).hexdigest()
    text = json.dumps({"__metadata__": metadata, **header}, separators=(",", ":")).encode("utf-8")
    text += b" " * (-(8 + len(text)) % HEADER_ALIGN)  # so that the data starts at a multiple of 8
    return len(text).to_bytes(8, "little") + text + data


def said(value, most=80):
    """repr(value) for a message, cut to most characters: what a file holds may be any length.

    >>> said("heads"), said("x" * 100, 10)
    ("'heads'", "'xxxxxx...")
    """
    if isinstance(value, (list, tuple)) and len(value) > most:  # (the first items begin the same text)
        value = value[:most]
    text = repr(value)
    return text if len(text) <= most else text[:most - 3] + "..."


def _no_duplicates(pairs):
    """object_pairs_hook for json.loads: a dict, but a key that occurs twice is an error (safetensors forbids it)."""
    out = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"has the key {said(key)} twice")
        out[key] = value
    return out


def _whole_number(text):
    """parse_int for json.loads: the int, or a ValueError past MAX_DIGITS digits (where Python's own message would
    be about lifting its limit)."""
    digits = len(text.lstrip("-"))
    if digits > MAX_DIGITS:
        raise ValueError(f"has a number of {digits:,} digits, more than the {MAX_DIGITS:,} Python reads")
    return int(text)


def _may_hold_long_numbers(text):
    """Whether text may hold a whole number of more than MAX_DIGITS digits. Such a run of digits covers one of the
    stretches of half that length that start at a multiple of it, so only those are looked at: a few thousand
    slices of a long header, where a search for the run itself would try every digit.

    >>> _may_hold_long_numbers("[1, 2]"), _may_hold_long_numbers(" " + "7" * (MAX_DIGITS + 1))
    (False, True)
    """
    half = (MAX_DIGITS + 1) // 2
    return any(text[i:i + half].isdigit() for i in range(0, len(text), half))


def parse_json(text, what):
    """The value of the JSON text; a ValueError that starts with what when it is not JSON, repeats a key in an
    object, holds a whole number too long to read, or nests deeper than Python's JSON reader goes (a RecursionError
    there).

    >>> parse_json('{"a": [1, 2.5]}', "the header")
    {'a': [1, 2.5]}
    >>> parse_json("[" * 5000 + "]" * 5000, "metadata config")
    Traceback (most recent call last):
    ...
    ValueError: metadata config nests deeper than Python's JSON reader goes (maximum recursion depth exceeded ...)
    """
    hook = _whole_number if _may_hold_long_numbers(text) else None  # (a call for every number: only when needed)
    try:
        return json.loads(text, object_pairs_hook=_no_duplicates, parse_int=hook)
    except json.JSONDecodeError as e:
        raise ValueError(f"{what} is not valid JSON ({e.msg} at character {e.pos})") from None
    except RecursionError as e:
        raise ValueError(f"{what} nests deeper than Python's JSON reader goes ({e})") from None
    except ValueError as e:  # from the two hooks
        raise ValueError(f"{what} {e}") from None


def _is_text(s):
    """Whether a string decoded from JSON is text that can be written as UTF-8: JSON can spell half of a character
    (a lone surrogate such as \\ud800), which no file name or tokenizer holds.

    >>> _is_text("Zoë"), _is_text("\\ud800")
    (True, False)
    """
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _count(shape, most):
    """The number of values of a tensor of this shape (the product of its sizes), or None once it is past most: the
    product stops growing there, so that a shape of a million twos costs a million small multiplications, not one
    number of a million bits.

    >>> _count([2, 3], 100), _count([], 100), _count([10 ** 30, 0], 100), _count([2] * 1000, 100)
    (6, 1, 0, None)
    """
    if 0 in shape:
        return 0
    count = 1
    for size in shape:
        count *= size
        if count > most:
            return None
    return count


def decode(raw):
    """(tensors, metadata) from the bytes of a safetensors file; anything malformed is a ValueError naming it.

    Checked: the header's length and JSON, every tensor's dtype, shape (at most MAX_RANK sizes, whose product must
    fit in the data) and byte range, that the ranges tile the data part exactly (no gaps, no overlaps, nothing after),
    and the data's SHA-256 when the metadata records one.

    >>> decode(encode({"x": ("F64", (1,), [0.5])}))[0]["x"][2].tolist()
    [0.5]
    >>> decode(b"\\x10\\x00")
    Traceback (most recent call last):
    ...
    ValueError: the file is 2 bytes, shorter than the 8-byte header length: it is truncated or not a safetensors file
    """
    raw = memoryview(raw)
    if len(raw) < 8:
        raise ValueError(f"the file is {len(raw)} bytes, shorter than the 8-byte header length:"
                         f" it is truncated or not a safetensors file")
    n = int.from_bytes(raw[:8], "little")
    if n > MAX_HEADER:
        raise ValueError(f"the header length reads {n} bytes, more than the {MAX_HEADER} allowed:"
                         f" the file is corrupt or not a safetensors file")
    if 8 + n > len(raw):
        raise ValueError(f"the header length reads {n} bytes but only {len(raw) - 8} follow: the file is truncated")
    text = bytes(raw[8:8 + n])
    if not text.startswith(b"{"):
        raise ValueError(f"the header starts with {text[:10]!r}, expected '{{': the file is corrupt or not a"
                         f" safetensors file")
    try:
        header = parse_json(text.decode("utf-8"), "the header")
    except UnicodeDecodeError as e:
        raise ValueError(f"the header is not UTF-8 ({e.reason} at byte {e.start}): the file is corrupt") from None
    except ValueError as e:
        raise ValueError(f"{e}: the file is corrupt") from None
    if not isinstance(header, dict):
        raise ValueError(f"the header is a JSON {type(header).__name__}, expected an object: the file is corrupt")

    metadata = header.pop("__metadata__", {})
    if not isinstance(metadata, dict) or not all(isinstance(v, str) for v in metadata.values()):
        raise ValueError("__metadata__ must map strings to strings: the file is corrupt")
    broken = next((key for key, value in metadata.items() if not (_is_text(key) and _is_text(value))), None)
    if broken is not None:
        raise ValueError(f"__metadata__ {said(broken)} holds half of a character (a lone surrogate), which is not"
                         f" text: the file is corrupt")
    data = raw[8 + n:]
    spans, tensors = [], {}
    for name, info in header.items():
        if not isinstance(info, dict) or sorted(info) != ["data_offsets", "dtype", "shape"]:
            raise ValueError(f"tensor {said(name)}: expected exactly the fields dtype, shape and data_offsets, got"
                             f" {said(info)}")
        dtype, shape, offsets = info["dtype"], info["shape"], info["data_offsets"]
        if not isinstance(dtype, str) or dtype not in DTYPES:
            raise ValueError(f"tensor {said(name)} has dtype {said(dtype)}; this reader knows {sorted(DTYPES)}")
        if isinstance(shape, list) and len(shape) > MAX_RANK:  # (before anything is done with each size)
            raise ValueError(f"tensor {said(name)} has a shape of {len(shape):,} sizes, more than the {MAX_RANK} this"
                             f" reader takes: the file is corrupt")
        if not isinstance(shape, list) or any(type(s) is not int or s < 0 for s in shape):
            raise ValueError(f"tensor {said(name)} has shape {said(shape)}; expected a list of non-negative ints")
        if (not isinstance(offsets, list) or len(offsets) != 2 or any(type(o) is not int for o in offsets)
                or not 0 <= offsets[0] <= offsets[1]):
            raise ValueError(f"tensor {said(name)} has data_offsets {said(offsets)}; expected [begin, end], 0 <="
                             f" begin <= end")
        itemsize = array.array(DTYPES[dtype]).itemsize
        count = _count(shape, len(data) // itemsize)
        if count is None:
            raise ValueError(f"tensor {said(name)} is {dtype} of shape {said(tuple(shape))}, more values than the"
                             f" {len(data)} bytes of data hold: the file is corrupt")
        size = count * itemsize
        if offsets[1] - offsets[0] != size:
            raise ValueError(f"tensor {said(name)} covers {offsets[1] - offsets[0]} bytes, but {dtype} of shape"
                             f" {said(tuple(shape))} needs {said(size)}: the file is corrupt")
        if offsets[1] > len(data):
            raise ValueError(f"tensor {said(name)} ends at byte {offsets[1]} of the data, but the file holds only"
                             f" {len(data)} bytes of data: the file is truncated")
        spans.append((offsets[0], offsets[1], name))
        tensors[name] = (dtype, tuple(shape), _unpacked(dtype, data[offsets[0]:offsets[1]]))
    end = 0
    for begin, stop, name in sorted(spans):
        if begin != end:
            raise ValueError(f"tensor {said(name)} starts at byte {begin} of the data, expected {end}: the tensors"
                             f" must follow each other without gaps or overlaps")
        end = stop
    if end != len(data):
        raise ValueError(f"the data part has {len(data)} bytes but the tensors cover {end}: the file is corrupt")
    want = metadata.get(DATA_HASH_KEY)
    if want is not None and hashlib.sha256(data).hexdigest() != want:
        raise ValueError("the data's SHA-256 differs from the one recorded in the header: the file is corrupt")
    return tensors, metadata


def save_file(path, tensors, metadata=None):
    """Write a safetensors file atomically: a crash at any moment leaves the old file or the new one, whole."""
    write_atomic(path, encode(tensors, metadata))


def read_bytes(path):
    """The bytes of the file at path, read once. Refused first, with a ValueError that starts with the path: a
    folder, anything but a regular file (atomic.read_whole), and a file that reading and decoding would not fit in
    the memory this process can still take (READ_COST times its size), a message that names both.

    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as d:
    ...     read_bytes(d)
    Traceback (most recent call last):
    ...
    ValueError: ... is a folder, not a checkpoint file
    """
    try:
        st = os.stat(path)
    except (OSError, ValueError):  # read_whole says why it cannot be read
        st = None
    have = machine.memory_available()
    if st is not None and stat.S_ISREG(st.st_mode):
        try:
            machine.check_memory(READ_COST * st.st_size, f"reading it ({machine.in_bytes(st.st_size)})")
        except ValueError as e:
            raise ValueError(f"{path}: {e}") from None
    return read_whole(path, "a checkpoint file", None if have is None else have // READ_COST)


def load_file(path):
    """(tensors, metadata) of a safetensors file; a bad or unreadable file is a ValueError that starts with its path.

    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as d:
    ...     load_file(d)
    Traceback (most recent call last):
    ...
    ValueError: ... is a folder, not a checkpoint file
    """
    raw = read_bytes(path)
    try:
        return decode(raw)
    except ValueError as e:
        raise ValueError(f"{path}: {e}") from None


def nested(values, shape):
    """Flat row-major values as nested lists of the given shape (the reference model's layout).

    >>> nested([1.0, 2.0, 3.0, 4.0, 5.0, 6.0], (2, 3))
    [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]
    >>> nested([7], ())
    7
    """
    values = list(values)
    if not shape:
        return values[0]
    if len(shape) == 1:
        return values
    step = len(values) // shape[0]
    return [nested(values[i * step:(i + 1) * step], shape[1:]) for i in range(shape[0])]


def flat(t):
    """Nested lists flattened in row-major order (the inverse of `nested`).

    >>> flat([[1.0, 2.0], [3.0, 4.0]])
    [1.0, 2.0, 3.0, 4.0]
    """
    return [x for row in t for x in flat(row)] if isinstance(t, list) else [t]


# ----------------------------------------------------------------------------------------------------------------
# The training checkpoint: parameters, Adam's moments and step, the batch sampler's random state, and metadata

FORMAT = "one-block checkpoint"  # metadata "format"
FORMAT_VERSION = "1"  # metadata "format_version" of a model of one block and one head, as before models could grow
GROWN_VERSION = "2"  # ... of a grown model: its config has blocks and heads, which code from before refuses to read
METADATA_HASH_KEY = "metadata_sha256"  # a grown model's file: SHA-256 of the rest of its metadata (metadata_digest)
MOMENT_PREFIXES = ("adam_m.", "adam_v.")  # Adam's first and second moments, one tensor per parameter
STEP = "adam_step"  # I64 scalar: the number of optimiser steps taken
RNG = "rng_state"  # I64 (625,): the Mersenne Twister state of the batch sampler (random.Random.getstate()[1])
RNG_STATE_LEN = 625
METADATA_KEYS = ("format", "format_version", "config", "training", "tokenizer_sha256")  # required
TOKENIZER_KEY = "tokenizer"  # optional: the tokenizer.json text of a model of your own text (train.py --data)
TEXT_KEYS = ("text", "text_sha256", "split", TOKENIZER_KEY)  # your own text: all four; the stories: none
HASH_KEYS = ("tokenizer_sha256", "corpus_sha256", "text_sha256", DATA_HASH_KEY, METADATA_HASH_KEY)  # SHA-256s, in hex
NUMBER_KEYS = ("val_loss", "floor_nats_per_token", "val_floor_nats_per_token")  # nats (at least 0), as text
KNOWN_KEYS = (*METADATA_KEYS, "corpus_sha256", *NUMBER_KEYS, *TEXT_KEYS, "explorer_source", DATA_HASH_KEY,
              METADATA_HASH_KEY)  # every metadata key a checkpoint of this model may have
SPLITS = ("line", "document")  # metadata "split": the units of your own text (train.split_text)
POSITION_SCHEMES = ("learned", "none", "sinusoidal", "rope")  # config "positions" (numpy_model.SCHEMES)
SIZE_KEYS = ("vocab", "d", "hidden", "max_len")  # config: the sizes every model has
GROWN_KEYS = ("blocks", "heads")  # config: the sizes of a grown model (version 2 only)
CONFIG_KEYS = (*SIZE_KEYS, *GROWN_KEYS, "use_positions", "positions")  # "positions" is absent in files from before
BACKENDS = ("numpy", "numpy-plain", "python", "torch", "explorer")  # training "backend": train.py's, or the page's
DTYPE_NAMES = {"float32": "F32", "float64": "F64"}  # training "dtype" -> the parameters' safetensors dtype


def _whole(v, low):
    """Whether v is a JSON whole number of at least low (true and false are not numbers here).

    >>> _whole(3, 1), _whole(True, 1), _whole(2.0, 1)
    (True, False, False)
    """
    return type(v) is int and v >= low


def _number(v):
    """Whether v is a JSON number: an int or a float, not true or false."""
    return type(v) in (int, float)


def _finite(v):
    """Whether v is a JSON number that is not Infinity or NaN (a whole number is, however long)."""
    return _number(v) and (type(v) is int or math.isfinite(v))


# Every setting a checkpoint's training may record: train.py's (its TRAINING_SETTINGS and, with --data,
# TEXT_SETTINGS, each checked there by check_settings) and the explorer page's downloads (use_positions, eval_every);
# name -> (test, what is expected, in words). Older files may lack the settings added later.
TRAINING_RULES = {
    "backend": (lambda v: isinstance(v, str) and v in BACKENDS, f"one of {list(BACKENDS)}"),
    "threads": (lambda v: _whole(v, 1), "a whole number of at least 1"),
    "dtype": (lambda v: isinstance(v, str) and v in DTYPE_NAMES, f"one of {list(DTYPE_NAMES)}"),
    "steps": (lambda v: _whole(v, 0), "a whole number of at least 0"),  # (explore.py's untrained weights: 0)
    "batch": (lambda v: _whole(v, 1), "a whole number of at least 1"),
    "seq_len": (lambda v: _whole(v, 1), "a whole number of at least 1"),
    "lr": (lambda v: _finite(v) and v > 0, "a positive finite number"),
    "min_lr": (lambda v: _finite(v) and v >= 0, "a finite number of at least 0"),
    "warmup": (lambda v: _whole(v, 0), "a whole number of at least 0"),
    "beta1": (lambda v: _number(v) and 0 <= v < 1, "a number in [0, 1)"),
    "beta2": (lambda v: _number(v) and 0 <= v < 1, "a number in [0, 1)"),
    "eps": (lambda v: _finite(v) and v > 0, "a positive finite number"),
    "clip": (lambda v: _number(v) and v > 0, "a positive number (Infinity: no clipping)"),
    "seed": (lambda v: v is None or _whole(v, 0), "a whole number of at least 0, or null (weights from elsewhere)"),
    "val_stories": (lambda v: v is None or _whole(v, 1), "a whole number of at least 1, or null (your own text)"),
    "positions": (lambda v: type(v) is bool or (isinstance(v, str) and v in POSITION_SCHEMES),
                  f"one of {list(POSITION_SCHEMES)}, or true or false (from before the schemes)"),
    "blocks": (lambda v: _whole(v, 1), "a whole number of at least 1"),
    "heads": (lambda v: _whole(v, 1), "a whole number of at least 1"),
    "val_fraction": (lambda v: _number(v) and 0 < v < 1, "a number between 0 and 1"),
    "vocab_size": (lambda v: v is None or _whole(v, 1), "a whole number of at least 1, or null (a given tokenizer)"),
    "use_positions": (lambda v: type(v) is bool, "true or false"),
    "eval_every": (lambda v: _whole(v, 1), "a whole number of at least 1"),
}
TEXT_NEEDS = ("val_fraction", "seq_len")  # the settings a model of your own text needs to split it again


def sha256_file(path):
    """Hex SHA-256 of a file's bytes (a tokenizer.json, a corpus)."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def sizes_of(config):
    """(blocks, heads) of a model config: a config of one block and one head has neither (so that its file is byte
    for byte what it was before models could grow), a grown one has both.

    >>> sizes_of({"d": 16}), sizes_of({"d": 16, "blocks": 2, "heads": 4})
    ((1, 1), (2, 4))
    """
    return config.get("blocks", 1), config.get("heads", 1)


def param_shapes(config):
    """The parameters' names and shapes, in order, for a model config (vocab, d, hidden, max_len and, if grown,
    blocks and heads).

    >>> list(param_shapes({"vocab": 96, "d": 4, "hidden": 8, "max_len": 8, "blocks": 2, "heads": 2}))[14]
    'block1.ln1_g'
    """
    blocks = sizes_of(config)[0]
    return sizes.param_shapes(config["vocab"], config["d"], config["hidden"], config["max_len"], blocks)


def sha256_text(text):
    """Hex SHA-256 of a text's UTF-8 bytes: the hash of the file that text is written to.

    >>> sha256_text("")[:16]
    'e3b0c44298fc1c14'
    """
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def expected_shapes(config):
    """Every tensor a training checkpoint holds, name -> shape, for a model config (see param_shapes).

    >>> shapes = expected_shapes({"vocab": 96, "d": 16, "hidden": 64, "max_len": 64})
    >>> len(shapes), shapes["adam_v.W1"], shapes[STEP]
    (56, (16, 64), ())
    """
    params = param_shapes(config)
    shapes = dict(params)
    for prefix in MOMENT_PREFIXES:
        shapes.update({prefix + name: shape for name, shape in params.items()})
    shapes[STEP] = ()
    shapes[RNG] = (RNG_STATE_LEN,)
    return shapes


def each_expected(config):
    """(name, shape) of every tensor a training checkpoint of config holds, in expected_shapes' order, one at a time:
    a config of 10^12 blocks costs nothing until its names are read.

    >>> list(each_expected({"vocab": 96, "d": 16, "hidden": 64, "max_len": 64})) == list(expected_shapes(
    ...     {"vocab": 96, "d": 16, "hidden": 64, "max_len": 64}).items())
    True
    >>> next(itertools.islice(each_expected({"vocab": 9, "d": 4, "hidden": 8, "max_len": 8, "blocks": 10**12}), 14,
    ...                       None))
    ('block1.ln1_g', (4,))
    """
    one = model.param_shapes(config["vocab"], config["d"], config["hidden"], config["max_len"])
    blocks = sizes_of(config)[0]
    for prefix in ("", *MOMENT_PREFIXES):
        names = itertools.chain(sizes.OUTSIDE[:2], (sizes.prefix(b) + name for b in range(blocks)
                                                    for name in sizes.BLOCK_NAMES), sizes.OUTSIDE[2:])
        for name in names:
            yield prefix + name, one[name.rpartition(".")[2]]
    yield STEP, ()
    yield RNG, (RNG_STATE_LEN,)


def tensor_count(blocks):
    """How many tensors a training checkpoint of this many blocks holds: each parameter three times (itself and its
    two moments), the step and the random state.

    >>> tensor_count(1), tensor_count(2)
    (56, 92)
    """
    return (1 + len(MOMENT_PREFIXES)) * (len(sizes.OUTSIDE) + blocks * len(sizes.BLOCK_NAMES)) + 2


def number_count(config):
    """How many numbers the tensors of a training checkpoint of config hold, worked out by arithmetic.

    >>> number_count({"vocab": 96, "d": 16, "hidden": 64, "max_len": 64})  # 3 x 7440 + 1 + 625
    22946
    """
    params = sizes.parameter_count(*(config[key] for key in SIZE_KEYS), blocks=sizes_of(config)[0])
    return (1 + len(MOMENT_PREFIXES)) * params + 1 + RNG_STATE_LEN


def positions_of(config):
    """The position scheme of a model config: its "positions", or for a file written before there were schemes,
    "learned" or "none" from its "use_positions" (model.py's switch, true exactly for "learned").

    >>> positions_of({"use_positions": False}), positions_of({"use_positions": False, "positions": "rope"})
    ('none', 'rope')
    """
    return config.get("positions", "learned" if config["use_positions"] else "none")


def rng_tensor(rng):
    """The state of a random.Random as an I64 tensor (its 624 Mersenne Twister words and the position in them)."""
    version, words, gauss_next = rng.getstate()
    if version != 3 or len(words) != RNG_STATE_LEN or gauss_next is not None:
        raise ValueError(f"cannot store this random.Random state (version {version}, {len(words)} words,"
                         f" gauss_next {gauss_next!r}); expected version 3, {RNG_STATE_LEN} words, no pending gauss")
    return ("I64", (RNG_STATE_LEN,), list(words))


def rng_from_tensor(values):
    """A random.Random in the state that rng_tensor recorded."""
    rng = random.Random()
    rng.setstate((3, tuple(int(v) for v in values), None))
    return rng


def metadata_digest(metadata):
    """The SHA-256 that metadata_sha256 records: of every metadata entry but data_sha256 and metadata_sha256 itself,
    written as one JSON object with its keys sorted, no spaces and every character past ASCII escaped (so that the
    same entries always give the same bytes).

    >>> metadata_digest({"b": "2", "a": "ü", DATA_HASH_KEY: "0"}) == sha256_text('{"a":"\\\\u00fc","b":"2"}')
    True
    """
    covered = {key: value for key, value in metadata.items() if key not in (DATA_HASH_KEY, METADATA_HASH_KEY)}
    return hashlib.sha256(json.dumps(covered, sort_keys=True, separators=(",", ":")).encode("ascii")).hexdigest()


def save_checkpoint(path, params, moments, step, rng, config, training, tokenizer_sha256, extra=None):
    """Write a training checkpoint atomically.

    params and each of moments = (m, v): {name: (dtype, shape, flat values)} in the model's order; step: int;
    rng: the batch sampler's random.Random; config: the model config dict (vocab, d, hidden, max_len, for a grown
    model blocks and heads, use_positions, positions); training: the training settings dict; extra: more metadata
    strings (for people reading it). A grown model's file is format version GROWN_VERSION, and its metadata carries
    METADATA_HASH_KEY, so that a changed size (heads, which no tensor's shape shows) is caught on reading; a model
    of one block and one head is written byte for byte as before models could grow.
    """
    tensors = dict(params)
    for prefix, moment in zip(MOMENT_PREFIXES, moments):
        tensors.update({prefix + name: t for name, t in moment.items()})
    tensors[STEP] = ("I64", (), [step])
    tensors[RNG] = rng_tensor(rng)
    grown = "blocks" in config or "heads" in config
    metadata = {
        "format": FORMAT,
        "format_version": GROWN_VERSION if grown else FORMAT_VERSION,
        "config": json.dumps(config),
        "training": json.dumps(training),
        "tokenizer_sha256": tokenizer_sha256,
        **(extra or {}),
    }
    if grown:
        metadata[METADATA_HASH_KEY] = metadata_digest(metadata)
    save_file(path, tensors, metadata)


# ----------------------------------------------------------------------------------------------------------------
# Checking a decoded checkpoint: every metadata field's type and range, the sizes against the tensors, the tensors


def _is_hash(v):
    """Whether v is a SHA-256 as hexdigest writes it: 64 lower-case hexadecimal digits.

    >>> _is_hash("0" * 64), _is_hash("0" * 63), _is_hash("A" * 64)
    (True, False, False)
    """
    return len(v) == 64 and all(c in "0123456789abcdef" for c in v)


NATS = re.compile(r"[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?")  # a number of nats as repr writes a float: no sign


def _is_nats_text(v):
    """Whether the text v is a finite number of at least 0 in plain digits, as val_loss and the floors are written
    (repr of a float): a loss and an entropy are never negative, and float() alone would also read "1_000", " 2",
    "+3" and "infinity".

    >>> _is_nats_text("0.3306"), _is_nats_text("1e-05"), _is_nats_text("nan"), _is_nats_text("1_000")
    (True, True, False, False)
    >>> _is_nats_text("-3"), _is_nats_text("1e999"), _is_nats_text("abc")
    (False, False, False)
    """
    return NATS.fullmatch(v) is not None and math.isfinite(float(v))


def check_metadata(metadata):
    """Raise a ValueError naming the first bad metadata entry of a checkpoint (its strings, before config and
    training are read); return its format version. Checked: the format and its version, the required keys and
    data_sha256 (a file without it cannot show that its data is whole), no key this model's files never have, every
    hash 64 hexadecimal digits, val_loss and the floors finite numbers of at least 0 in digits, your own text's four
    keys all there or none, its split a known unit, and the tokenizer it carries JSON with the SHA-256 recorded."""
    if metadata.get("format") != FORMAT:
        raise ValueError(f"format is {said(metadata.get('format'))}, expected {FORMAT!r}: not a checkpoint of this"
                         f" model")
    version = metadata.get("format_version")
    if version not in (FORMAT_VERSION, GROWN_VERSION):
        raise ValueError(f"format version is {said(version)}, but this code reads versions {FORMAT_VERSION!r} and"
                         f" {GROWN_VERSION!r}")
    missing = [key for key in METADATA_KEYS if key not in metadata]
    if missing:
        raise ValueError(f"metadata lacks {missing}")
    if DATA_HASH_KEY not in metadata:
        raise ValueError(f"metadata lacks {DATA_HASH_KEY}, so nothing shows whether the data is the data that was"
                         f" written: a changed weight would load unnoticed; every checkpoint this code writes has it")
    unknown = next((key for key in metadata if key not in KNOWN_KEYS), None)
    if unknown is not None:
        raise ValueError(f"metadata has the key {said(unknown)}, which no checkpoint of this model has; expected"
                         f" some of {list(KNOWN_KEYS)}")
    for key in HASH_KEYS:
        if key in metadata and not _is_hash(metadata[key]):
            raise ValueError(f"metadata {key} is {said(metadata[key])}, expected a SHA-256: 64 hexadecimal digits")
    for key in NUMBER_KEYS:
        if key in metadata and not _is_nats_text(metadata[key]):
            raise ValueError(f"metadata {key} is {said(metadata[key])}, expected a finite number of at least 0 in"
                             f" digits, such as 0.3306")
    present = [key for key in TEXT_KEYS if key in metadata]
    if present and len(present) != len(TEXT_KEYS):
        raise ValueError(f"metadata has {present} but not {[key for key in TEXT_KEYS if key not in present]}: a"
                         f" model of your own text has all of {list(TEXT_KEYS)}, a model of the stories none")
    if present:
        if metadata["split"] not in SPLITS:
            raise ValueError(f"metadata split is {said(metadata['split'])}, expected one of {list(SPLITS)}")
        if not metadata["text"]:
            raise ValueError("metadata text is empty, expected the name of the text file the model learned")
        parse_json(metadata[TOKENIZER_KEY], f"the tokenizer it carries (metadata {TOKENIZER_KEY!r})")
        if sha256_text(metadata[TOKENIZER_KEY]) != metadata["tokenizer_sha256"]:
            raise ValueError(f"the tokenizer it carries (metadata {TOKENIZER_KEY!r}) does not have the SHA-256"
                             f" recorded in tokenizer_sha256: the file is corrupt")
    return version


def check_config(config, version):
    """Raise a ValueError naming the first bad entry of a parsed config; return it if it is good. Checked: a JSON
    object of known keys only, the sizes positive whole numbers (blocks and heads exactly in a version 2 file),
    use_positions true or false, and the position scheme, which must agree with it."""
    if not isinstance(config, dict):
        raise ValueError(f"metadata config is a JSON {type(config).__name__}, expected an object")
    unknown = next((key for key in config if key not in CONFIG_KEYS), None)
    if unknown is not None:
        raise ValueError(f"config has the key {said(unknown)}, which no model config has; expected some of"
                         f" {list(CONFIG_KEYS)}")
    grown = version == GROWN_VERSION
    for key in (*SIZE_KEYS, *(GROWN_KEYS if grown else ())):
        if not _whole(config.get(key), 1):
            raise ValueError(f"config {key} is {said(config.get(key))}, expected a positive int")
    if not grown and any(key in config for key in GROWN_KEYS):
        raise ValueError(f"config has blocks or heads, but format version {FORMAT_VERSION!r} is of one block and one"
                         f" head: a grown model's file is version {GROWN_VERSION!r}")
    if type(config.get("use_positions")) is not bool:
        raise ValueError(f"config use_positions is {said(config.get('use_positions'))}, expected true or false")
    if "positions" in config:  # (files written before the position schemes have use_positions only)
        if not isinstance(config["positions"], str) or config["positions"] not in POSITION_SCHEMES:
            raise ValueError(f"config positions is {said(config['positions'])}, expected one of"
                             f" {list(POSITION_SCHEMES)}")
        if config["use_positions"] != (config["positions"] == "learned"):
            raise ValueError(f"config use_positions is {str(config['use_positions']).lower()} but positions is"
                             f" {config['positions']!r}: use_positions is true exactly for 'learned'")
    return config


def _many(n):
    """A count for a message: n with commas between thousands, or, for a number longer than Python prints
    (MAX_DIGITS digits), the power of ten it reaches.

    >>> _many(10 ** 7), _many(36 * 10 ** 5000)
    ('10,000,000', 'at least 10^5,001')
    """
    if n < 10 ** MAX_DIGITS:
        return f"{n:,}"
    power = int(math.log10(n))
    power += (10 ** (power + 1) <= n) - (10 ** power > n)  # (exact where the float is not)
    return f"at least 10^{power:,}"


def check_fits(config, tensors):
    """Raise a ValueError when the config's sizes ask for more tensors, or more numbers, than the file holds, before
    any name is made for them (a header that says blocks = 10^12 is refused at once, by arithmetic); the message
    names the sizes and the first tensors that are missing or of another shape."""
    blocks = sizes_of(config)[0]
    need_tensors, need_numbers = tensor_count(blocks), number_count(config)
    have_numbers = sum(math.prod(shape) for _, shape, _ in tensors.values())
    if need_tensors <= len(tensors) and need_numbers <= have_numbers:
        return
    missing = list(itertools.islice((name for name, _ in each_expected(config) if name not in tensors), 6))
    if need_tensors > len(tensors):
        what = (f"config blocks is {blocks:,}: a checkpoint of {blocks:,} block{'s' * (blocks != 1)} holds"
                f" {_many(need_tensors)} tensors, but this file holds {len(tensors):,}")
    else:
        asked = ", ".join(f"{key} {config[key]:,}" for key in (*SIZE_KEYS, "blocks") if key in config)
        what = (f"the config's sizes ({asked}) make {_many(need_numbers)} numbers, but the tensors of this file hold"
                f" {have_numbers:,}")
    if missing:
        raise ValueError(f"{what}; missing tensors: {missing[:5]}{' ...' if len(missing) > 5 else ''}")
    name, want = next((name, shape) for name, shape in each_expected(config) if tensors[name][1] != shape)
    raise ValueError(f"{what}; tensor {name!r} has shape {said(tensors[name][1])}, expected {said(want)}")


def check_training(training, config, metadata):
    """Raise a ValueError naming the first bad setting of a parsed training dict; return it if it is good. Checked:
    a JSON object of known settings only (TRAINING_RULES), each of its type and range; the settings a model of your
    own text needs to split its text again; and that the settings agree with the config and with each other
    (seq_len within the model's positions, min_lr at most lr, warmup within the steps, the same position scheme and
    sizes)."""
    if not isinstance(training, dict):
        raise ValueError(f"metadata training is a JSON {type(training).__name__}, expected an object of settings")
    for name, value in training.items():
        if name not in TRAINING_RULES:
            raise ValueError(f"training has the setting {said(name)}, which no run records; expected some of"
                             f" {list(TRAINING_RULES)}")
        test, expected = TRAINING_RULES[name]
        if not test(value):
            raise ValueError(f"training {name} is {said(value)}, expected {expected}")
    if "text" in metadata:
        lacks = [name for name in TEXT_NEEDS if name not in training]
        if lacks:
            raise ValueError(f"training lacks {lacks}, which a model of your own text (metadata text) needs to split"
                             f" its text as it was split")
    if training.get("seq_len", 0) > config["max_len"]:
        raise ValueError(f"training seq_len is {training['seq_len']}, more than the {config['max_len']} positions of"
                         f" the model (config max_len)")
    if "lr" in training and training.get("min_lr", 0) > training["lr"]:
        raise ValueError(f"training min_lr is {training['min_lr']}, more than lr {training['lr']}: expected a"
                         f" learning rate that falls")
    if "steps" in training and training.get("warmup", 0) > training["steps"]:
        raise ValueError(f"training warmup is {training['warmup']}, longer than the run (steps"
                         f" {training['steps']})")
    scheme = positions_of(config)
    if "positions" in training:
        recorded = training["positions"]
        if isinstance(recorded, bool):  # before the schemes: whether the learned positions were on
            recorded = "learned" if recorded else "none"
        if recorded != scheme:
            raise ValueError(f"training positions is {said(training['positions'])}, but the config's scheme is"
                             f" {scheme!r}")
    if "use_positions" in training and training["use_positions"] != config["use_positions"]:
        raise ValueError(f"training use_positions is {str(training['use_positions']).lower()}, but config"
                         f" use_positions is {str(config['use_positions']).lower()}")
    for name, size in zip(GROWN_KEYS, sizes_of(config)):
        if training.get(name, size) != size:
            raise ValueError(f"training {name} is {training[name]}, but the config's {name} is {size}")
    return training


def check_tensors(tensors, config, training):
    """Raise a ValueError naming the first bad tensor: every expected tensor there with its shape and no others, one
    float dtype for the parameters and moments (the training dtype's, when recorded), every value finite, a step
    from 0 to the run's steps, and a Mersenne Twister state that random.Random can have reached."""
    shapes = expected_shapes(config)
    missing = [name for name in shapes if name not in tensors]
    if missing:
        raise ValueError(f"missing tensors: {missing[:5]}{' ...' if len(missing) > 5 else ''}")
    extra = [name for name in tensors if name not in shapes]
    if extra:
        shown = [name if len(name) <= 60 else name[:57] + "..." for name in extra[:5]]  # (a name may be any length)
        raise ValueError(f"unexpected tensors: {shown}{' ...' if len(extra) > 5 else ''}")
    float_dtype = tensors["tok_emb"][0]
    if float_dtype not in ("F32", "F64"):
        raise ValueError(f"tensor 'tok_emb' has dtype {float_dtype}, expected F32 or F64")
    if "dtype" in training and DTYPE_NAMES[training["dtype"]] != float_dtype:
        raise ValueError(f"tensor 'tok_emb' has dtype {float_dtype}, but training dtype is {training['dtype']!r}")
    for name, want in shapes.items():
        dtype, shape, values = tensors[name]
        if shape != want:
            raise ValueError(f"tensor {name!r} has shape {said(shape)}, expected {want} for config {config}")
        want_dtype = "I64" if name in (STEP, RNG) else float_dtype
        if dtype != want_dtype:
            raise ValueError(f"tensor {name!r} has dtype {dtype}, expected {want_dtype}")
        if dtype != "I64":
            bad = [i for i, x in enumerate(values) if not math.isfinite(x)]
            if bad:
                raise ValueError(f"tensor {name!r} has {len(bad)} non-finite values (the first, at flat index"
                                 f" {bad[0]}, is {values[bad[0]]})")
    step = tensors[STEP][2][0]
    if step < 0:
        raise ValueError(f"{STEP} is {step}, expected a non-negative count of steps")
    if step > training.get("steps", step):
        raise ValueError(f"{STEP} is {step}, past the end of the run it records (training steps"
                         f" {training['steps']}): the file is corrupt")
    words = tensors[RNG][2]
    if any(not 0 <= w < 2 ** 32 for w in words[:-1]) or not 0 <= words[-1] <= 624:
        raise ValueError(f"{RNG} is not a Mersenne Twister state (624 32-bit words and a position from 0 to 624)")
    if not any(words[:-1]):
        raise ValueError(f"{RNG} has 624 words that are all zero, a Mersenne Twister state that no seed gives (it"
                         f" would draw zeros for ever): the file is corrupt")


def check_metadata_hash(metadata, version):
    """Raise a ValueError unless the metadata is the metadata that was written: a version 2 file (a grown model,
    whose heads no tensor's shape shows) must carry metadata_sha256, and any file that carries it must match it."""
    if METADATA_HASH_KEY not in metadata:
        if version == GROWN_VERSION:
            raise ValueError(f"this grown model's file (format version {GROWN_VERSION!r}) has no {METADATA_HASH_KEY},"
                             f" so nothing shows that its sizes, such as heads, are the ones it was trained with: it"
                             f" was written by code from before grown models' metadata was hashed; train it again")
        return
    if metadata_digest(metadata) != metadata[METADATA_HASH_KEY]:
        raise ValueError(f"the metadata's SHA-256 differs from the one recorded in {METADATA_HASH_KEY}: the header"
                         f" is corrupt or was edited (a model's sizes, such as heads, are in it)")


def check_checkpoint(tensors, metadata, tokenizer_sha256=None):
    """Raise a ValueError naming the first problem of a decoded checkpoint; return (config, training) if it is good.

    The one place where a checkpoint is checked: its metadata strings (check_metadata), the config and training
    JSON (parse_json, check_config, check_training), the sizes against what the file holds (check_fits, before any
    per-block name is made, then sizes.check_sizes), the tokenizer's hash (when given), the tensors (check_tensors)
    and, last, the metadata's own hash (check_metadata_hash).
    """
    version = check_metadata(metadata)
    config = check_config(parse_json(metadata["config"], "metadata config"), version)
    check_fits(config, tensors)
    blocks, heads = sizes_of(config)
    scheme = positions_of(config)
    try:
        sizes.check_sizes(config["d"], blocks, heads, scheme)
    except ValueError as e:
        raise ValueError(f"config {e}") from None
    if scheme == "rope" and (config["d"] // heads) % 2:  # (check_sizes says so only for several heads)
        raise ValueError(f"config positions is 'rope', which turns pairs of channels, but the head width d / heads ="
                         f" {config['d'] // heads} is odd")
    training = check_training(parse_json(metadata["training"], "metadata training"), config, metadata)
    if tokenizer_sha256 is not None and metadata["tokenizer_sha256"] != tokenizer_sha256:
        raise ValueError(tokenizer_mismatch(metadata["tokenizer_sha256"], tokenizer_sha256))
    check_tensors(tensors, config, training)
    check_metadata_hash(metadata, version)
    return config, training


def load_bytes(raw, where, tokenizer_sha256=None):
    """Decode and check the bytes of a training checkpoint (where names it in messages: a bad file is a ValueError
    that starts with where); see load_checkpoint."""
    try:
        tensors, metadata = decode(raw)
        config, training = check_checkpoint(tensors, metadata, tokenizer_sha256)
    except ValueError as e:
        raise ValueError(f"{where}: {e}") from None
    names = list(param_shapes(config))
    return {
        "config": config,
        "training": training,
        "params": {name: tensors[name] for name in names},
        "moments": tuple({name: tensors[prefix + name] for name in names} for prefix in MOMENT_PREFIXES),
        "step": int(tensors[STEP][2][0]),
        "rng": rng_from_tensor(tensors[RNG][2]),
        "metadata": metadata,
    }


def load_checkpoint(path, tokenizer_sha256=None):
    """Read and check a training checkpoint; a bad file is a ValueError that starts with its path.

    Returns a dict: config, training (settings), params and moments ({name: (dtype, shape, values)} each, the
    moments as a pair (m, v)), step (int), rng (a random.Random in the saved state), metadata (all of it).
    """
    return load_bytes(read_bytes(path), path, tokenizer_sha256)


LIST_NUMBER_BYTES = 32  # a number in a Python list: the float object (24 bytes) and the list's pointer to it (8)


def reference_params(ckpt):
    """The parameters of a loaded checkpoint as the reference model's dict of lists (Python floats); a ValueError,
    before they are made, when they would not fit in memory (LIST_NUMBER_BYTES a number).

    >>> import model
    >>> ckpt = {"params": {"b": ("F32", (2,), [0.5, 1.5]), "w": ("F64", (1, 2), [1.0, 2.0])}}
    >>> reference_params(ckpt)
    {'b': [0.5, 1.5], 'w': [[1.0, 2.0]]}
    """
    count = sum(len(values) for _, _, values in ckpt["params"].values())
    machine.check_memory(LIST_NUMBER_BYTES * count, f"the {count:,} parameters as Python lists")
    return {name: nested(values, shape) for name, (dtype, shape, values) in ckpt["params"].items()}


def tokenizer_mismatch(recorded, have):
    """The message for a tokenizer that is not the one a checkpoint was trained with (SHA-256s recorded and have)."""
    return (f"the checkpoint was trained with a tokenizer whose SHA-256 is {recorded[:16]}..., but this tokenizer.json"
            f" has {have[:16]}...: token IDs would mean different things")


def carried_tokenizer(metadata, where):
    """The tokenizer a checkpoint's metadata carries (a model of your own text), or None (a model of the stories);
    where names the checkpoint in messages."""
    import bpe

    text = metadata.get(TOKENIZER_KEY)
    return None if text is None else bpe.Tokenizer.from_json(text, f"{where}: the tokenizer it carries")


def tokenizer_of(ckpt, shipped, where):
    """The tokenizer whose token IDs a loaded checkpoint reads and writes: the one it carries (train.py --data), or
    else the tokenizer.json at the path shipped (the stories' tokenizer), which must have the SHA-256 the checkpoint
    recorded. Either way its size must be the model's vocabulary. A ValueError, starting with where (the
    checkpoint's path), says what does not match."""
    import bpe

    tok = carried_tokenizer(ckpt["metadata"], where)
    if tok is None:
        recorded, have = ckpt["metadata"]["tokenizer_sha256"], sha256_file(shipped)
        if recorded != have:
            raise ValueError(f"{where}: {tokenizer_mismatch(recorded, have)}")
        tok = bpe.Tokenizer.load(shipped)
    if len(tok.vocab) != ckpt["config"]["vocab"]:
        raise ValueError(f"{where}: its tokenizer has {len(tok.vocab)} tokens, but the model's vocabulary is"
                         f" {ckpt['config']['vocab']}")
    return tok
