"""Hundreds of damaged checkpoints through every tool that reads one: sample.py, compare.py --ckpt, train.py --resume
and explore.py --export. Each must either refuse the file (exit status 2, one line on stderr that starts with
"error:", nothing on stdout, nothing written) or give exactly what the undamaged file gives.

The files are mutations of three small checkpoints that train.py writes in a second: one block of the stories
(format version 1), a grown model of the stories (2 blocks x 2 heads, version 2) and one block of a text of your own
(--data). The mutations are seeded: bit flips and byte changes anywhere in the header, bit flips in the data,
truncations, and edits of the header's JSON (a config or training that is not an object or nests 5,000 deep, keys
missing, renamed or unknown, values of the wrong type, out of range or huge, a grown model's heads changed, the
hashes removed or wrong, the carried tokenizer replaced), and edits of the data with its hash made right again so
that only the checks of the values stand in the way (an adam_step past the run, a random state of zeros or out of
range, a weight that is NaN).

"The same result" is: the same exit status, stdout and stderr, the same files left in the folder, the checkpoint as
it was (train.py --resume has nothing left to do and must write nothing), and for explore.py the same exported page,
tokenizer, split, weights and manifest. A version 1 file's metadata is not under a hash (its bytes are what they
were before models could grow), so there a damaged digit of val_loss, which sample.py's line on stderr and the
explorer's manifest show, may go unnoticed: that number is the one thing not compared for those files. The own
text has two documents, so that whatever val_fraction says, the same one validates, and it is read in windows as
long as the model (seq_len = max_len = 8), so that no damaged digit of seq_len is both in range and different.

Each case runs in a process of its own, forked from a server that imported the tool once (tests/fork_server.py),
with RLIMIT_AS on it; the test stops starting cases at DEADLINE_S and says how many ran.
"""

import json
import os
import random
import re
import shutil
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from oneblock import checkpoint
from checkpoint_edits import RUNS, join_file, split_file, two_documents, with_header, write_bases

pytest.importorskip("numpy")
if not hasattr(os, "fork"):
    pytest.skip("the fork server needs os.fork (not on Windows)", allow_module_level=True)

ROOT = Path(__file__).resolve().parent.parent
SEED = 20240611
CHILD_MEMORY = 4 << 30  # RLIMIT_AS of each case's process: a regression that allocates without end stops there
CHILD_LIMIT_S = 30  # one case, at most
DEADLINE_S = 75  # no case starts after this many seconds of the test
AT_LEAST = 200  # mutated files each tool must have seen
CKPT = "m.safetensors"  # each tool's copy of the case, in its own folder
SITE = "site"  # explore.py --export's folder


# ----------------------------------------------------------------------------------------------------------------
# The mutations

HOSTILE = ["16", 16.0, True, None, [], {}, -1, 0, 10 ** 12, 10 ** 4000, 1e308, "x" * 300]  # for any JSON value
DEEP = ["[" * 5000 + "]" * 5000, '{"a":' * 5000 + "1" + "}" * 5000]  # deeper than Python's JSON reader goes
NOT_OBJECTS = ["[]", "3", "null", '"x"', "{", "1" * 5000, *DEEP]
BAD_TEXT_NUMBERS = ["abc", "", "nan", "1e999", "-inf"]


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
            add(f"heads {heads} in config and training", edited(
                base, meta_json_edit("config", lambda o, n=heads: o.update(heads=n)),
                meta_json_edit("training", lambda o, n=heads: o.update(heads=n)), resign=False))
        add("no metadata_sha256", edited(base, drop_meta(checkpoint.METADATA_HASH_KEY)))
        add("metadata_sha256 of zeros", edited(base, set_meta(checkpoint.METADATA_HASH_KEY, "0" * 64), resign=False))
        add("format version 1", edited(base, set_meta("format_version", "1")))
    add("format version 3", edited(base, set_meta("format_version", "3")))
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
        for value in (*BAD_TEXT_NUMBERS, "0" * 64, "Z" * 64):
            add(f"metadata {key} = {value!r}", edited(base, set_meta(key, value)))
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


def mutations(bases):
    """Every case, (label, bytes), in a seeded order: all the random damage, and a seeded share of the structured
    edits (every kind of edit is tried on some base; there are more than the time allows on all three)."""
    rng = random.Random(SEED)
    cases = []
    for name, base in bases.items():
        cases += [(label, make()) for label, make in random_mutations(name, base, rng)]
        edits = structured(name, base)
        keep = set(rng.sample(range(len(edits)), min(len(edits), 120)))
        must = [i for i, (label, _) in enumerate(edits) if any(word in label for word in MUST)]
        cases += [(label, make()) for i, (label, make) in enumerate(edits) if i in keep or i in must]
    rng.shuffle(cases)
    return cases


MUST = ("heads ", "metadata_sha256", "data_sha256", "val8fraction", "blocks = 10^12", "nests", "adam_step",
        "rng_state", "config = '[]'", "training = '3'", "val_loss = 'abc'", "tokenizer")  # tried on every base


# ----------------------------------------------------------------------------------------------------------------
# Running the tools


COMMANDS = {"sample": "sample.py", "compare": "-m dev.compare", "train": "train.py", "explore": "explore.py"}


def start_server(tool):
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    return subprocess.Popen([sys.executable, str(ROOT / "tests" / "fork_server.py"), COMMANDS[tool], str(CHILD_MEMORY)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)


def run_case(server, folder, argv):
    """(status, stdout, stderr) of one forked run of the server's tool in folder."""
    request = {"argv": argv, "cwd": str(folder), "stdout": str(folder.parent / f"{folder.name}.out"),
               "stderr": str(folder.parent / f"{folder.name}.err"), "limit_s": CHILD_LIMIT_S}
    server.stdin.write(json.dumps(request) + "\n")
    server.stdin.flush()
    reply = json.loads(server.stdout.readline())
    assert not reply["timed_out"], f"{argv} ran past {CHILD_LIMIT_S} s"
    out = (folder.parent / f"{folder.name}.out").read_text(encoding="utf-8", errors="replace")
    err = (folder.parent / f"{folder.name}.err").read_text(encoding="utf-8", errors="replace")
    return (reply["status"] if reply["signal"] is None else -reply["signal"]), out, err


def exported(folder, one_block):
    """What explore.py --export wrote, in a form to compare: every file's bytes, but the weights as their tensors and
    config, and the manifest parsed (without val_loss for a version 1 file, whose metadata is not hashed). The config
    with its scheme spelled out: one without "positions" says it by use_positions, as files from before the schemes
    do, and the page (checkpoint.js) reads the two the same way, as checkpoint.positions_of does."""
    site = folder / SITE
    files = {p.relative_to(site).as_posix(): p.read_bytes() for p in sorted(site.rglob("*")) if p.is_file()}
    tensors, metadata = checkpoint.decode(files.pop("data/weights.safetensors"))
    manifest = json.loads(files.pop("data/manifest.json"))
    if one_block:
        manifest.pop("val_loss")
    config = json.loads(metadata["config"])
    config["positions"] = checkpoint.positions_of(config)
    return (files, manifest, json.dumps(config, sort_keys=True),
            {name: (dtype, shape, values.tobytes()) for name, (dtype, shape, values) in tensors.items()})


TOOLS = {  # tool -> the arguments of its case, for a base run's train.py arguments
    "sample": lambda run: ["--ckpt", CKPT, "--tokens", "12", "--seed", "1"],
    "compare": lambda run: ["--ckpt", CKPT, "--no-torch", "--batch", "1", "--length", "6"],
    "train": lambda run: [*run, "--out", CKPT, "--resume"],
    "explore": lambda run: ["--ckpt", CKPT, "--export", SITE],
}


def outcome(tool, folder, name, raw):
    """Run tool on the checkpoint bytes raw (a mutation of the base name) in folder: (status, stdout, stderr, what
    else it did: the files it left in folder, whether the checkpoint is as it was, what it exported)."""
    (folder / CKPT).write_bytes(raw)
    shutil.rmtree(folder / SITE, ignore_errors=True)
    status, out, err = run_case(SERVERS[tool], folder, TOOLS[tool](RUNS[name]))
    out = re.sub(r"\b[0-9]+\.[0-9] s\b", "N s", out)  # (train.py's summary says how long it took: not the file's)
    left = sorted(p.name for p in folder.iterdir())
    said = re.sub(r", val loss [0-9.]+", "", err) if name != "grown" else err  # (version 1's val_loss: see above)
    more = {"files": left, "ckpt_unchanged": (folder / CKPT).read_bytes() == raw, "stderr": said}
    if tool == "explore" and status == 0:
        more["export"] = exported(folder, one_block=name != "grown")
    return status, out, err, more


def problem(got, want):
    """Why the outcome got of a damaged file is neither a one-line refusal that left nothing behind nor the outcome
    want of the good file; None if it is one of the two."""
    status, out, err, more = got
    if "Traceback" in err:
        return f"a traceback: {err[-600:]}"
    if not more["ckpt_unchanged"]:
        return "the checkpoint file changed"
    if (status, out) == want[:2] and more == want[3]:
        return None
    lines = err.splitlines()
    if status == 2 and out == "" and len(lines) == 1 and lines[0].startswith("error: ") and err.endswith("\n"):
        expected = [name for name in want[3]["files"] if name != SITE]  # a refusal exports nothing
        return None if more["files"] == expected else f"a refusal that left {more['files']}, not {expected}"
    return (f"exit {status}, stdout {out[-300:]!r}, stderr {err[-400:]!r}; the good file gives exit {want[0]},"
            f" stdout {want[1][-300:]!r}, stderr {want[2][-400:]!r}")


SERVERS = {}


@pytest.fixture(scope="module")
def bases(tmp_path_factory):
    """{name: bytes} of the three base checkpoints, each written by a short train.py run."""
    return write_bases(tmp_path_factory.mktemp("fuzz-bases"))


def test_damaged_checkpoints_are_refused_in_one_line_or_read_as_the_good_one(bases, tmp_path):
    started = time.monotonic()
    for tool in TOOLS:
        SERVERS[tool] = start_server(tool)
    try:
        folders = {}  # (tool, base) -> the folder its cases run in, with the text the own text's model learned
        for tool in TOOLS:
            for name in RUNS:
                folders[tool, name] = tmp_path / f"{tool}-{name}"
                folders[tool, name].mkdir()
                (folders[tool, name] / "notes.txt").write_text(two_documents(), encoding="utf-8")
        # the good files first: what each tool gives for them is what a damaged file that is read must give
        want = {(tool, name): outcome(tool, folders[tool, name], name, raw)
                for name, raw in bases.items() for tool in TOOLS}
        for (tool, name), (status, out, err, more) in want.items():
            refused = tool == "compare" and name == "grown"  # (compare.py's reference is model.py's one block)
            assert status == (2 if refused else 0), (tool, name, err)
            assert "Traceback" not in err and more["ckpt_unchanged"], (tool, name, err)
        assert "has no reference in model.py" in want["compare", "grown"][1]  # (a grown model: NumPy vs torch only)
        cases = mutations(bases)
        failures, ran, read = [], dict.fromkeys(TOOLS, 0), dict.fromkeys(TOOLS, 0)

        def work(tool):
            for label, raw in cases:
                if time.monotonic() - started > DEADLINE_S:
                    return
                name = label.split(":")[0]
                got = outcome(tool, folders[tool, name], name, raw)
                why = problem(got, want[tool, name])
                if why:
                    failures.append(f"{tool} on {label}: {why}")
                ran[tool] += 1
                read[tool] += got[:2] == want[tool, name][:2] and got[3] == want[tool, name][3]

        threads = [threading.Thread(target=work, args=(tool,)) for tool in TOOLS]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        for server in SERVERS.values():
            server.stdin.close()
            server.wait(timeout=60)
        SERVERS.clear()
    elapsed = time.monotonic() - started
    print(f"\n{len(cases)} damaged checkpoints; cases run: {ran} in {elapsed:.1f} s, of which read as the good file"
          f" (the rest refused): {read}")
    assert failures == [], f"{len(failures)} of {sum(ran.values())} cases:\n" + "\n".join(failures[:15])
    assert min(ran.values()) >= AT_LEAST, f"only {ran} cases ran before the deadline of {DEADLINE_S} s"
