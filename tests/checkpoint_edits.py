"""Helpers shared by the tests that damage checkpoints on purpose: three small checkpoints written by train.py in a
second, and a checkpoint file taken apart into its header and data and put together again, with the hashes made
right or left as they were."""

import hashlib
import json
import subprocess
import sys
from pathlib import Path

from oneblock import checkpoint
from run_helpers import own_text

ROOT = Path(__file__).resolve().parent.parent
SHORT = ["--steps", "4", "--batch", "2", "--seq-len", "8", "--width", "8", "--eval-every", "2", "--ckpt-every", "2",
         "--quiet"]
RUNS = {  # name -> train.py arguments of a small checkpoint (a --resume of it takes the same ones)
    "one-block": [*SHORT, "--val-stories", "5"],  # format version 1
    "grown": [*SHORT, "--val-stories", "5", "--blocks", "2", "--heads", "2"],  # format version 2
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


def edit_json(raw, key, change, resign=True):
    """The file raw with the JSON object in metadata key (config or training) changed by change(dict), in place."""
    header, data = split_file(raw)
    obj = json.loads(header["__metadata__"][key])
    change(obj)
    header["__metadata__"][key] = json.dumps(obj)
    return join_file(header, data, resign=resign)
