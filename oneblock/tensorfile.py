"""The safetensors container, written and read with the standard library only: the file format that the training
checkpoint (checkpoint.py) and the explorer's weights are stored in.

A safetensors file is three parts:
    8 bytes   N, the length of the header, an unsigned little-endian 64-bit integer
    N bytes   the header: UTF-8 JSON starting with "{", padded with spaces at the end (here to a multiple of 8, so
              every tensor starts 8-byte aligned). It maps each tensor name to {"dtype", "shape", "data_offsets":
              [begin, end]}, offsets into the data part; the optional key "__metadata__" maps strings to strings.
    the rest  the data: every tensor's values, little-endian, row-major, one after another with no gaps.
So `safetensors.numpy.load_file` and `safetensors.torch.load_file` read what `encode` writes, and the reference
model can load a checkpoint without NumPy.

Here a tensor is a plain triple (dtype, shape, values): dtype a safetensors name ("F32", "F64" or "I64"), shape a
tuple of ints, values a flat sequence of numbers in row-major order (a list, or the array.array that reading gives).
Beside the container: the SHA-256s a file's metadata records (of its data, checked on reading, and of the rest of
its metadata, metadata_digest), and Python values as tensors (nested lists, a random.Random's state).

    >>> raw = encode({"w": ("F32", (2, 2), [1.0, 2.0, 3.0, 4.0])}, {"note": "hi"})
    >>> tensors, meta = decode(raw)
    >>> tensors["w"][0], tensors["w"][1], tensors["w"][2].tolist(), meta["note"]
    ('F32', (2, 2), [1.0, 2.0, 3.0, 4.0], 'hi')
"""

import array
import hashlib
import json
import os
import random
import stat
import sys
from pathlib import Path

from atomic import read_whole
from oneblock import machine
from oneblock.config import said

# ----------------------------------------------------------------------------------------------------------------
# The safetensors container

DTYPES = {"F32": "f", "F64": "d", "I64": "q"}  # safetensors dtype -> array.array typecode (4, 8 and 8 bytes)
HEADER_ALIGN = 8  # the header is padded with spaces to a multiple of this, as the safetensors library does
MAX_HEADER = 100 * 1024 * 1024  # a longer header means a corrupt file (the safetensors library has the same limit)
DATA_HASH_KEY = "data_sha256"  # metadata key: SHA-256 of the data part, checked on reading to catch corrupt bytes
METADATA_HASH_KEY = "metadata_sha256"  # metadata key a file may add: SHA-256 of its other metadata (metadata_digest)
MAX_DIGITS = 4300  # the longest whole number read from JSON: Python's own default limit (since 3.11, 3.10.7)
MAX_RANK = 64  # the most dimensions a tensor may have (NumPy's own limit; the lab writes 0, 1 or 2)
READ_COST = 2  # reading a file holds its bytes and the arrays decoded from them: about twice its size in memory
RNG_STATE_LEN = 625  # a random.Random's state as a tensor: its 624 Mersenne Twister words and the position in them
LIST_NUMBER_BYTES = 32  # a number in a Python list: the float object (24 bytes) and the list's pointer to it (8)


def _little_endian(a):
    """The array.array a, its numbers turned in place between this machine's byte order and a file's little-endian
    order (nothing to do on a little-endian machine).

    >>> _little_endian(array.array("q", [1, 2])).tobytes().hex()
    '01000000000000000200000000000000'
    """
    if sys.byteorder == "big":
        a.byteswap()
    return a


def encode(tensors, metadata=None):
    """The bytes of a safetensors file holding tensors {name: (dtype, shape, values)} in the given order.

    metadata (str -> str) goes into "__metadata__", with DATA_HASH_KEY added (or made anew).

    >>> raw = encode({"s": ("I64", (), [7])})
    >>> int.from_bytes(raw[:8], "little") % 8, raw[8:9], len(raw) % 8
    (0, b'{', 0)
    """
    metadata = dict(metadata or {})  # (the callers' own: strings, and tensors whose shapes fit their values)
    header, chunks, offset = {}, [], 0
    for name, (dtype, shape, values) in tensors.items():
        raw = _little_endian(array.array(DTYPES[dtype], values)).tobytes()
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset, offset + len(raw)]}
        chunks.append(raw)
        offset += len(raw)
    data = b"".join(chunks)
    metadata[DATA_HASH_KEY] = hashlib.sha256(data).hexdigest()
    text = json.dumps({"__metadata__": metadata, **header}, separators=(",", ":")).encode("utf-8")
    text += b" " * (-(8 + len(text)) % HEADER_ALIGN)  # so that the data starts at a multiple of 8
    return len(text).to_bytes(8, "little") + text + data


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
        values = array.array(DTYPES[dtype])
        values.frombytes(data[offsets[0]:offsets[1]])
        tensors[name] = (dtype, tuple(shape), _little_endian(values))
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


# ----------------------------------------------------------------------------------------------------------------
# Hashes and files


def sha256_file(path):
    """Hex SHA-256 of a file's bytes (a tokenizer.json, a corpus)."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def sha256_text(text):
    """Hex SHA-256 of a text's UTF-8 bytes: the hash of the file that text is written to.

    >>> sha256_text("")[:16]
    'e3b0c44298fc1c14'
    """
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def metadata_digest(metadata):
    """The SHA-256 that METADATA_HASH_KEY records: of every metadata entry but the two hashes, as one JSON object
    with its keys sorted, no spaces and every character past ASCII escaped (the same entries give the same bytes).

    >>> metadata_digest({"b": "2", "a": "ü", DATA_HASH_KEY: "0"}) == sha256_text('{"a":"\\\\u00fc","b":"2"}')
    True
    """
    covered = {key: value for key, value in metadata.items() if key not in (DATA_HASH_KEY, METADATA_HASH_KEY)}
    return hashlib.sha256(json.dumps(covered, sort_keys=True, separators=(",", ":")).encode("ascii")).hexdigest()


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


# ----------------------------------------------------------------------------------------------------------------
# Python values as tensors: nested lists (the reference model's layout) and a random.Random's state


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


def rng_tensor(rng):
    """The state of a random.Random as an I64 tensor (its 624 Mersenne Twister words and the position in them).

    >>> import random
    >>> dtype, shape, words = rng_tensor(random.Random(3))
    >>> dtype, shape, rng_from_tensor(words).random() == random.Random(3).random()
    ('I64', (625,), True)
    """
    return ("I64", (RNG_STATE_LEN,), list(rng.getstate()[1]))  # (a sampler's rng draws no gauss: none pending)


def rng_from_tensor(values):
    """A random.Random in the state that rng_tensor recorded."""
    rng = random.Random()
    rng.setstate((3, tuple(int(v) for v in values), None))
    return rng
