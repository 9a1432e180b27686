"""checkpoint.py: the standard-library safetensors reader and writer against the safetensors library, and every kind
of bad checkpoint refused by checkpoint.load_bytes in one line that names the problem (tests/test_fuzz_checkpoints.py
holds every tool that reads a checkpoint to a one-line refusal of such files; tests/test_page_loader.py the explorer
page)."""

import array
import dataclasses
import json
import math
import random
import struct
import time

import pytest

from oneblock import checkpoint
from oneblock.config import SWITCH_KEY, ModelConfig
import model
from checkpoint_edits import (DEEP, ROOT, drop_meta, edited, join_file, meta_json_edit, set_meta, split_file,
                              tensor_value, version_2, with_header)

np = pytest.importorskip("numpy")

TOKENIZER_SHA = checkpoint.sha256_file(ROOT / "tokenizer.json")
CONFIG = ModelConfig(vocab=96, d=4, hidden=8, max_len=8)  # the tiny copy: small files
GROWN = dataclasses.replace(CONFIG, blocks=2, heads=2)  # its grown model (format version 3)
DECODE_S = 1.0  # the most CPU time checkpoint.decode may take to refuse a shape of 3,000,000 sizes


def tiny_state(dtype="F32", seed=3, blocks=1):
    """(params, moments) of the tiny config (of this many blocks) as {name: (dtype, shape, flat values)}, with
    non-zero moments."""
    ref = dataclasses.replace(CONFIG, blocks=blocks).init_params(seed)
    rng = random.Random(seed)

    def tensors(fn):
        out = {}
        for name, t in ref.items():
            values = [fn(x) for x in checkpoint.flat(t)]
            if dtype == "F32":  # round to float32 so that the comparisons below are exact
                values = array.array("f", values).tolist()
            out[name] = (dtype, model.shape(t), values)
        return out

    return tensors(lambda x: x), (tensors(lambda x: rng.gauss(0, 1e-3)), tensors(lambda x: rng.random() * 1e-6))


def write_tiny(path, dtype="F32", blocks=1, **changes):
    """Save a tiny training checkpoint at path; changes override save_checkpoint's arguments."""
    params, moments = tiny_state(dtype, blocks=blocks)
    rng = random.Random(5)
    rng.random()
    args = {"params": params, "moments": moments, "step": 7, "rng": rng, "config": CONFIG,
            "training": {"steps": 10, "lr": 0.01}, "tokenizer_sha256": TOKENIZER_SHA}
    args.update(changes)
    checkpoint.save_checkpoint(path, **args)
    return args


@pytest.fixture(scope="module")
def bases(tmp_path_factory):
    """{name: bytes} of three tiny checkpoints: one block (format version 1), grown (2 blocks x 2 heads, version 3)
    and a model of your own text (its metadata names the text and carries the tokenizer)."""
    folder = tmp_path_factory.mktemp("bases")
    own = {"text": "notes.txt", "text_sha256": "0" * 64, "split": "document",
           checkpoint.TOKENIZER_KEY: (ROOT / "tokenizer.json").read_text(encoding="utf-8")}
    write_tiny(folder / "one-block")
    write_tiny(folder / "grown", blocks=2, config=GROWN)
    write_tiny(folder / "own-text", training={"steps": 10, "lr": 0.01, "seq_len": 8, "val_fraction": 0.1}, extra=own)
    return {name: (folder / name).read_bytes() for name in ("one-block", "grown", "own-text")}


# ----------------------------------------------------------------------------------------------------------------
# The container: round trips through this reader and through the safetensors library


def test_stdlib_round_trip_is_bit_exact():
    values = [0.1, -2.5e-300, 1e300, -0.0, 5e-324, math.pi]
    tensors = {"f64": ("F64", (2, 3), values), "f32": ("F32", (3,), [0.5, -1.25, 2.0 ** -140]),
               "i64": ("I64", (), [-(2 ** 63)]), "empty": ("F32", (0, 4), [])}
    back, meta = checkpoint.decode(checkpoint.encode(tensors, {"a": "b"}))
    assert list(back) == list(tensors)
    for name, (dtype, shape, vals) in tensors.items():
        assert back[name][:2] == (dtype, shape)
        assert back[name][2].tolist() == vals
    assert [struct.pack("<d", x) for x in back["f64"][2]] == [struct.pack("<d", x) for x in values]
    assert meta["a"] == "b" and len(meta[checkpoint.DATA_HASH_KEY]) == 64


@pytest.mark.parametrize("dtype", ["F32", "F64"])
def test_safetensors_reads_what_we_write(tmp_path, dtype):
    """The safetensors library reads our files bit for bit (its NumPy loader here; safetensors.torch, which
    sample.py --backend torch uses, reads with the same parser)."""
    from safetensors.numpy import load_file

    path = tmp_path / "ckpt.safetensors"
    args = write_tiny(path, dtype=dtype)
    loaded = load_file(str(path))
    ours, _ = checkpoint.decode(path.read_bytes())
    assert set(loaded) == set(ours)
    for name, (kind, shape, values) in ours.items():
        assert loaded[name].shape == shape, name
        assert loaded[name].dtype == {"F32": np.float32, "F64": np.float64, "I64": np.int64}[kind], name
        assert loaded[name].tobytes() == values.tobytes(), name
    assert int(loaded[checkpoint.STEP]) == args["step"]
    assert loaded[checkpoint.RNG].tolist() == list(args["rng"].getstate()[1])


def test_we_read_what_safetensors_writes(tmp_path):
    from safetensors.numpy import save_file

    arrays = {"w": np.arange(12, dtype=np.float32).reshape(3, 4) / 7, "s": np.array(42, dtype=np.int64),
              "v": np.linspace(-1, 1, 5)}
    save_file(arrays, str(tmp_path / "theirs.safetensors"), metadata={"who": "safetensors"})
    tensors, meta = checkpoint.decode((tmp_path / "theirs.safetensors").read_bytes())
    assert meta == {"who": "safetensors"}
    for name, a in arrays.items():
        assert tensors[name][1] == a.shape
        assert tensors[name][2].tobytes() == a.tobytes()


def test_training_checkpoint_round_trip(tmp_path):
    path = tmp_path / "ckpt.safetensors"
    args = write_tiny(path)
    ckpt = checkpoint.load_checkpoint(path)
    assert ckpt["config"] == CONFIG and ckpt["training"] == args["training"] and ckpt["step"] == 7
    assert ckpt["rng"].getstate() == args["rng"].getstate()
    assert ckpt["rng"].random() == args["rng"].random()  # the sampler continues where it was
    for name, (dtype, shape, values) in args["params"].items():
        assert ckpt["params"][name][:2] == (dtype, shape)
        assert ckpt["params"][name][2].tolist() == values
    for saved, loaded in zip(args["moments"], ckpt["moments"]):
        assert {n: t[2].tolist() for n, t in loaded.items()} == {n: t[2] for n, t in saved.items()}
    meta = ckpt["metadata"]
    assert meta["format"] == checkpoint.FORMAT and meta["format_version"] == checkpoint.ONE_BLOCK_VERSION == "1"
    assert "blocks" not in json.loads(meta["config"])  # one block of one head: no sizes recorded
    assert meta["tokenizer_sha256"] == TOKENIZER_SHA


def test_decode_refuses_a_long_shape_before_multiplying_it(bases):
    """A shape of 3,000,000 twos was multiplied out before its size was checked (2^3,000,000, two minutes of
    arithmetic, then "Exceeds the limit (4300 digits)")."""
    header, data = split_file(bases["one-block"])
    header["W1"]["shape"] = [2] * 3_000_000
    raw = join_file(header, data)
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


# ----------------------------------------------------------------------------------------------------------------
# Bad files: each kind refused by checkpoint.load_bytes in one line that names the problem (tests/checkpoint_edits.py
# makes the edits)


def damage(*edits, **options):
    """The damage of checkpoint_edits.edited as a function of a checkpoint's bytes (the hashes made right again,
    unless options say otherwise)."""
    return lambda raw: edited(raw, *edits, **options)()


def rewritten(tensors=lambda t: t, metadata=lambda m: m):
    """Damage that leaves a valid container of a bad checkpoint: its tensors or its metadata strings changed by
    tensors(dict) or metadata(dict), the data hashed anew."""
    def make(raw):
        old_tensors, old_meta = checkpoint.decode(raw)
        old_meta.pop(checkpoint.DATA_HASH_KEY)
        return checkpoint.encode(tensors(old_tensors), metadata(old_meta))
    return make


def heads(n, resign):
    """Damage: heads n in the config; the metadata's hash as it was, or made right (resign)."""
    return damage(meta_json_edit("config", lambda o: o.update(heads=n)), resign=resign)


def flip_w1(header, data):
    """An edit of the data: one bit of a weight of W1 flipped."""
    at = header["W1"]["data_offsets"][0] + 3
    return data[:at] + bytes([data[at] ^ 0x01]) + data[at + 1:]


def poisoned(name, bad):
    """Damage: the value at flat index 1 of tensor name made bad."""
    def change(tensors):
        dtype, shape, values = tensors[name]
        values = values.tolist()
        values[1] = bad
        return {**tensors, name: (dtype, shape, values)}
    return rewritten(tensors=change)


def sized(version, config):
    """Damage: format version and config (a dict) as given."""
    return damage(set_meta("format_version", version), set_meta("config", json.dumps(config)))


CASES = [  # label, base, damage, phrases of the message
    # the container (test_truncated_file_is_rejected_at_every_length cuts it everywhere)
    ("header not an object", "one-block", lambda r: r[:8] + b"[{" + r[10:], ["corrupt"]),
    ("a bit of a weight flipped", "one-block", damage(flip_w1, data_hash=False), ["corrupt"]),
    ("header length past the end", "one-block", lambda r: (len(r) * 2).to_bytes(8, "little") + r[8:], ["truncated"]),
    # the metadata strings
    ("not a checkpoint of this model", "one-block",
     lambda r: checkpoint.encode({"w": ("F32", (1,), [1.0])}, {"format": "pt"}), ["format is 'pt'"]),
    ("format version 4", "one-block", damage(set_meta("format_version", "4")),
     ["format version is '4'", "reads versions '1', '2', '3'"]),
    ("no data_sha256", "one-block", damage(drop_meta(checkpoint.DATA_HASH_KEY), flip_w1, data_hash=False),
     ["metadata lacks data_sha256, so nothing shows whether the data is the data that was written"]),
    ("version 3 without metadata_sha256", "grown", damage(drop_meta(checkpoint.METADATA_HASH_KEY)),
     ["has no metadata_sha256", "train it again"]),
    ("heads 2 -> 1", "grown", heads(1, resign=False),  # (valid sizes: only the metadata's hash can tell)
     ["the metadata's SHA-256 differs from the one recorded in metadata_sha256"]),
    *[(f"val_loss {value!r}", "grown", damage(set_meta("val_loss", value)),  # (float() reads all but abc)
       [f"metadata val_loss is {value!r}, expected a finite number"])
      for value in ("abc", "1_000", "-3", " 2", "+3", "infinity")],
    # the JSON of the config and the training, and of the header
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
    # the config's sizes and scheme
    ("10^12 blocks", "grown", damage(meta_json_edit("config", lambda o: o.update(blocks=10 ** 12))),  # (by arithmetic)
     ["config blocks is 1,000,000,000,000", "holds 92", "missing tensors: ['block2.ln1_g'"]),
    ("a width of 10^4000", "grown", damage(meta_json_edit("config", lambda o: o.update(d=10 ** 4000))),
     ["the config's sizes (vocab 96, d 1", "make at least 10^8,", "numbers, but the tensors of this file hold"]),
    ("heads 2 -> 3, hash made right", "grown", heads(3, resign=True),
     ["config heads = 3 does not divide the width d = 4"]),
    ("grown sizes in version 1", "grown", sized("1", GROWN.to_json()),
     ["config has blocks or heads, but format version '1' is of one block and one head"]),
    ("version 3 without sizes", "grown", sized("3", CONFIG.to_json()),
     ["config blocks is None, expected a positive int"]),
    ("heads 0", "grown", sized("3", {**GROWN.to_json(), "heads": 0}), ["config heads is 0, expected a positive int"]),
    ("blocks 3", "grown", sized("3", {**GROWN.to_json(), "blocks": 3}), ["missing tensors", "block2.ln1_g"]),
    ("blocks 1", "grown", sized("3", {**GROWN.to_json(), "blocks": 1}), ["unexpected tensors", "block1.ln1_g"]),
    ("positions sinusoidal, switch on", "one-block", sized("1", {**CONFIG.to_json(), "positions": "sinusoidal"}),
     [f"{SWITCH_KEY} is true but positions is 'sinusoidal'", "exactly for 'learned'"]),
    ("positions alibi", "one-block", sized("1", {**CONFIG.to_json(), "positions": "alibi"}),
     ["config positions is 'alibi', expected one of ['learned', 'none', 'sinusoidal', 'rope']"]),
    # the training settings, and the rules between them (settings.CROSS_RULES), in the names the file records
    ("val8fraction", "own-text", damage(meta_json_edit("training", lambda t: t.update(
        val8fraction=t.pop("val_fraction")))), ["training has the setting 'val8fraction', which no run"]),
    ("no val_fraction", "own-text", damage(meta_json_edit("training", lambda t: t.pop("val_fraction"))),
     ["training lacks ['val_fraction'], which a model of your own text"]),
    ("seq_len past max_len", "one-block", damage(meta_json_edit("training", lambda t: t.update(seq_len=9))),
     ["training seq_len is 9, more than the 8 positions of the model (config max_len)"]),
    ("warmup past the run", "one-block", damage(meta_json_edit("training", lambda t: t.update(warmup=11))),
     ["training warmup is 11, longer than the run (steps 10)"]),
    ("min_lr above lr", "one-block", damage(meta_json_edit("training", lambda t: t.update(min_lr=0.1))),
     ["training min_lr is 0.1, more than lr 0.01: expected a learning rate that falls"]),
    # the model, in the config alone (version 3), or repeated in the training and held to it (versions 1 and 2)
    ("training repeats heads in version 3", "grown", damage(meta_json_edit("training", lambda t: t.update(heads=2))),
     ["training has ['heads'], but a version '3' file records the model in its config alone"]),
    ("version 2, training heads 1", "grown", damage(version_2(heads=1)),
     ["training heads is 1, but the config's heads is 2"]),
    ("version 2, training positions rope", "grown", damage(version_2(positions="rope")),
     ["training positions is 'rope', but the config's scheme is 'learned'"]),
    ("version 1, training positions false", "one-block",
     damage(meta_json_edit("training", lambda t: t.update(positions=False))),
     ["training positions is False, but the config's scheme is 'learned'"]),
    # the tensors
    ("a missing tensor", "one-block", rewritten(lambda t: {k: v for k, v in t.items() if k != "adam_v.Wq"}),
     ["missing tensors", "adam_v.Wq"]),
    ("a misshapen tensor", "one-block", rewritten(lambda t: {**t, "W1": ("F32", (8, 4), t["W1"][2])}),
     ["'W1'", "shape (8, 4)", "expected (4, 8)"]),
    ("an unexpected tensor", "one-block", rewritten(lambda t: {**t, "W9": ("F32", (1,), [0.0])}),
     ["unexpected tensors", "W9"]),
    ("mixed dtypes", "one-block", rewritten(lambda t: {**t, "b1": ("F64", t["b1"][1], t["b1"][2])}),
     ["'b1'", "dtype F64", "expected F32"]),
    *[(f"{name} {bad}", "one-block", poisoned(name, bad), [f"{name!r}", "non-finite", "flat index 1"])
      for name in ("Wo", "adam_m.b2", "adam_v.tok_emb") for bad in (math.nan, math.inf, -math.inf)],
    ("adam_step 2^62", "one-block", damage(tensor_value(checkpoint.STEP, [2 ** 62])),
     ["adam_step is 4611686018427387904, past the end of the run it records (training steps 10)"]),
    ("rng_state of 2^40s", "one-block", rewritten(lambda t: {**t, checkpoint.RNG: ("I64", (625,), [2 ** 40] * 625)}),
     [checkpoint.RNG, "Mersenne"]),
    ("rng_state all zero", "grown", damage(tensor_value(checkpoint.RNG, [0] * 624)),
     ["rng_state has 624 words that are all zero"]),
]


@pytest.mark.parametrize("label, base, damage, phrases", CASES, ids=[case[0] for case in CASES])
def test_a_bad_file_is_refused_in_one_line_naming_the_problem(bases, label, base, damage, phrases):
    with pytest.raises(ValueError) as e:
        checkpoint.load_bytes(damage(bases[base]), "m.safetensors")
    message = str(e.value)
    assert message.startswith("m.safetensors: ") and "\n" not in message, message
    for phrase in phrases:
        assert phrase in message, message


def test_truncated_file_is_rejected_at_every_length(bases):
    raw = bases["one-block"]
    n = int.from_bytes(raw[:8], "little")
    cuts = [0, 3, 8, 9, n // 2, 8 + n - 1, 8 + n, 8 + n + 1, len(raw) // 2, len(raw) - 8, len(raw) - 1]
    for cut in cuts:
        with pytest.raises(ValueError) as err:
            checkpoint.load_bytes(raw[:cut], "m.safetensors")
        message = str(err.value)
        assert message.startswith("m.safetensors: "), (cut, message)
        assert "truncated" in message or "corrupt" in message, (cut, message)


def test_gap_between_tensors_is_rejected():
    header, data = split_file(checkpoint.encode({"a": ("F32", (1,), [1.0]), "b": ("F32", (1,), [2.0])}))
    header["b"]["data_offsets"] = [8, 12]  # a hole from 4 to 8, and the data part is now too short
    with pytest.raises(ValueError, match="truncated|gaps"):
        checkpoint.decode(with_header(json.dumps(header).encode(), data + bytes(4)))


def test_duplicate_header_key_is_rejected():
    entry = b'{"dtype":"F32","shape":[1],"data_offsets":[0,4]}'
    text = b'{"a":' + entry + b',"a":' + entry + b"}"
    with pytest.raises(ValueError, match="twice"):
        checkpoint.decode(with_header(text, bytes(4)))


def test_other_tokenizer_is_rejected(bases, tmp_path):
    other = tmp_path / "tokenizer.json"
    other.write_text((ROOT / "tokenizer.json").read_text(encoding="utf-8") + "\n", encoding="utf-8")
    with pytest.raises(ValueError) as err:
        checkpoint.tokenizer_of(checkpoint.load_bytes(bases["one-block"], "m.safetensors"), other, "m.safetensors")
    assert str(err.value).startswith("m.safetensors: the checkpoint was trained with a tokenizer whose SHA-256 is")
    assert "token IDs would mean different things" in str(err.value)


# ----------------------------------------------------------------------------------------------------------------
# The position scheme in the config, and a grown model's sizes (format version 3; version 2 still reads)


def test_position_scheme_in_the_config():
    """A config may name its scheme; model.py's switch must then be true exactly for learned (CASES hold the
    refusals). A config without one (files from before the schemes) reads as learned or none from the switch (such a
    file resumed and sampled: tests/test_train.py)."""
    before = {key: value for key, value in CONFIG.to_json().items() if key != "positions"}
    assert ModelConfig.from_json(CONFIG.to_json()).positions == "learned" == ModelConfig.from_json(before).positions
    assert ModelConfig.from_json({**before, SWITCH_KEY: False}).positions == "none"


def test_a_grown_checkpoint_records_its_model_once_as_version_3(tmp_path):
    """A grown model's training records the run's settings only: its positions, blocks and heads are its config's.
    A version 2 file, whose training repeats them, reads as the same model and the same run."""
    path = tmp_path / "grown.safetensors"
    run = {"steps": 10, "lr": 0.01}
    args = write_tiny(path, blocks=2, config=GROWN, training={**run, "positions": "learned", "blocks": 2, "heads": 2})
    ckpt = checkpoint.load_checkpoint(path)
    assert ckpt["metadata"]["format_version"] == checkpoint.GROWN_VERSION == "3" and ckpt["training"] == run
    old = checkpoint.load_bytes(edited(path.read_bytes(), version_2())(), "old.safetensors")
    assert old["metadata"]["format_version"] == "2" and old["config"] == GROWN
    assert old["training"] == {**run, "positions": "learned", "blocks": 2, "heads": 2}
    assert checkpoint.recorded_settings(old["training"]) == run == checkpoint.recorded_settings(ckpt["training"])
    assert ckpt["config"] == GROWN and (ckpt["config"].blocks, ckpt["config"].heads) == (2, 2)
    assert json.loads(ckpt["metadata"]["config"]) == GROWN.to_json() and "blocks" in GROWN.to_json()
    assert list(ckpt["params"]) == ModelConfig(96, 16, 64, 64, blocks=2).param_names() == list(args["params"])
