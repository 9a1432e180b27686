"""checkpoint.py: the standard-library safetensors reader and writer against the safetensors library, and every kind
of bad checkpoint rejected with a message that names the problem."""

import array
import dataclasses
import json
import math
import random
import struct
from pathlib import Path

import pytest

from oneblock import checkpoint
from oneblock.config import SWITCH_KEY, ModelConfig
import model

ROOT = Path(__file__).resolve().parent.parent

np = pytest.importorskip("numpy")

TOKENIZER_SHA = checkpoint.sha256_file(ROOT / "tokenizer.json")
CONFIG = ModelConfig(vocab=96, d=4, hidden=8, max_len=8)  # the tiny copy: small files


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


def raw_tensors(path):
    """{name: (dtype, shape, bytes of the values)} as the stdlib reader sees them."""
    tensors, _ = checkpoint.load_file(path)
    return {name: (dtype, shape, values.tobytes()) for name, (dtype, shape, values) in tensors.items()}


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


def test_header_is_padded_and_data_aligned():
    raw = checkpoint.encode({"a": ("F32", (3,), [1.0, 2.0, 3.0]), "b": ("F64", (1,), [4.0])})
    n = int.from_bytes(raw[:8], "little")
    assert n % 8 == 0 and raw[8:9] == b"{" and raw[8 + n - 1:8 + n] in (b" ", b"}")
    header = json.loads(raw[8:8 + n])
    assert header["a"] == {"dtype": "F32", "shape": [3], "data_offsets": [0, 12]}
    assert header["b"]["data_offsets"] == [12, 20]
    assert len(raw) == 8 + n + 20


def test_safetensors_numpy_reads_what_we_write(tmp_path):
    from safetensors.numpy import load_file

    path = tmp_path / "ckpt.safetensors"
    args = write_tiny(path)
    loaded = load_file(str(path))
    ours, _ = checkpoint.load_file(path)
    assert set(loaded) == set(ours)
    for name, (dtype, shape, values) in ours.items():
        assert loaded[name].shape == shape, name
        assert loaded[name].dtype == {"F32": np.float32, "F64": np.float64, "I64": np.int64}[dtype], name
        assert loaded[name].tobytes() == values.tobytes(), name
    assert int(loaded[checkpoint.STEP]) == args["step"]
    assert loaded[checkpoint.RNG].tolist() == list(args["rng"].getstate()[1])


def test_safetensors_torch_reads_what_we_write(tmp_path):
    torch = pytest.importorskip("torch")
    from safetensors.torch import load_file

    path = tmp_path / "ckpt.safetensors"
    write_tiny(path, dtype="F64")
    loaded = load_file(str(path))
    for name, (dtype, shape, values) in checkpoint.load_file(path)[0].items():
        assert tuple(loaded[name].shape) == shape, name
        assert loaded[name].dtype == {"F64": torch.float64, "I64": torch.int64}[dtype], name
        assert loaded[name].flatten().tolist() == values.tolist(), name


def test_we_read_what_safetensors_writes(tmp_path):
    from safetensors.numpy import save_file

    arrays = {"w": np.arange(12, dtype=np.float32).reshape(3, 4) / 7, "s": np.array(42, dtype=np.int64),
              "v": np.linspace(-1, 1, 5)}
    save_file(arrays, str(tmp_path / "theirs.safetensors"), metadata={"who": "safetensors"})
    tensors, meta = checkpoint.load_file(tmp_path / "theirs.safetensors")
    assert meta == {"who": "safetensors"}
    for name, a in arrays.items():
        assert tensors[name][1] == a.shape
        assert tensors[name][2].tobytes() == a.tobytes()


def test_training_checkpoint_round_trip(tmp_path):
    path = tmp_path / "ckpt.safetensors"
    args = write_tiny(path)
    ckpt = checkpoint.load_checkpoint(path, TOKENIZER_SHA)
    assert ckpt["config"] == CONFIG and ckpt["training"] == args["training"] and ckpt["step"] == 7
    assert ckpt["rng"].getstate() == args["rng"].getstate()
    assert ckpt["rng"].random() == args["rng"].random()  # the sampler continues where it was
    for name, (dtype, shape, values) in args["params"].items():
        assert ckpt["params"][name][:2] == (dtype, shape)
        assert ckpt["params"][name][2].tolist() == values
    for saved, loaded in zip(args["moments"], ckpt["moments"]):
        assert {n: t[2].tolist() for n, t in loaded.items()} == {n: t[2] for n, t in saved.items()}
    meta = ckpt["metadata"]
    assert meta["format"] == checkpoint.FORMAT and meta["format_version"] == checkpoint.FORMAT_VERSION
    assert meta["tokenizer_sha256"] == TOKENIZER_SHA


def test_reference_model_runs_on_a_loaded_checkpoint(tmp_path):
    path = tmp_path / "ckpt.safetensors"
    write_tiny(path, dtype="F64")
    params = checkpoint.reference_params(checkpoint.load_checkpoint(path))
    want = model.init_params(96, 4, 8, 8, 3)
    assert params == want  # float64 values come back exactly, as nested lists
    logits, _ = model.forward(params, [1, 2, 3])
    assert model.shape(logits) == (3, 96)


def test_save_replaces_the_file_and_leaves_no_temporary(tmp_path):
    path = tmp_path / "ckpt.safetensors"
    write_tiny(path, step=1)
    write_tiny(path, step=2)
    assert checkpoint.load_checkpoint(path)["step"] == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt.safetensors"]


# ----------------------------------------------------------------------------------------------------------------
# Bad files: each rejected with a message that names the problem


def rewrite(path, tensors=None, metadata=None):
    """Rewrite the checkpoint at path with changed tensors or metadata (a valid container, a bad checkpoint)."""
    old_tensors, old_meta = checkpoint.load_file(path)
    old_meta.pop(checkpoint.DATA_HASH_KEY)
    new_tensors = tensors(old_tensors) if tensors else old_tensors
    new_meta = metadata(old_meta) if metadata else old_meta
    checkpoint.save_file(path, new_tensors, new_meta)


def expect_rejected(path, *phrases, tokenizer_sha=TOKENIZER_SHA):
    with pytest.raises(ValueError) as err:
        checkpoint.load_checkpoint(path, tokenizer_sha)
    message = str(err.value)
    assert str(path) in message
    for phrase in phrases:
        assert phrase in message, message
    return message


def test_truncated_file_is_rejected_at_every_length(tmp_path):
    path = tmp_path / "ckpt.safetensors"
    write_tiny(path)
    raw = path.read_bytes()
    n = int.from_bytes(raw[:8], "little")
    cuts = [0, 3, 8, 9, n // 2, 8 + n - 1, 8 + n, 8 + n + 1, len(raw) // 2, len(raw) - 8, len(raw) - 1]
    for cut in cuts:
        path.write_bytes(raw[:cut])
        message = expect_rejected(path)
        assert "truncated" in message or "corrupt" in message, (cut, message)


@pytest.mark.parametrize("where", ["header", "data"])
def test_flipped_byte_is_rejected(tmp_path, where):
    path = tmp_path / "ckpt.safetensors"
    write_tiny(path)
    raw = bytearray(path.read_bytes())
    n = int.from_bytes(raw[:8], "little")
    if where == "header":
        raw[8:8 + 2] = b"[{"  # no longer an object
    else:
        raw[8 + n + 100] ^= 0x10  # one bit of one weight
    path.write_bytes(bytes(raw))
    expect_rejected(path, "corrupt")


def test_header_length_past_the_end_is_rejected(tmp_path):
    path = tmp_path / "ckpt.safetensors"
    write_tiny(path)
    raw = path.read_bytes()
    path.write_bytes((len(raw) * 2).to_bytes(8, "little") + raw[8:])
    expect_rejected(path, "truncated")


def test_gap_between_tensors_is_rejected():
    raw = checkpoint.encode({"a": ("F32", (1,), [1.0]), "b": ("F32", (1,), [2.0])})
    n = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8:8 + n])
    header["b"]["data_offsets"] = [8, 12]  # a hole from 4 to 8, and the data part is now too short
    text = json.dumps(header).encode()
    with pytest.raises(ValueError, match="truncated|gaps"):
        checkpoint.decode(len(text).to_bytes(8, "little") + text + raw[8 + n:] + bytes(4))


def test_duplicate_header_key_is_rejected():
    entry = b'{"dtype":"F32","shape":[1],"data_offsets":[0,4]}'
    text = b'{"a":' + entry + b',"a":' + entry + b"}"
    with pytest.raises(ValueError, match="twice"):
        checkpoint.decode(len(text).to_bytes(8, "little") + text + bytes(4))


def test_wrong_format_version_is_rejected(tmp_path):
    path = tmp_path / "ckpt.safetensors"
    write_tiny(path)
    rewrite(path, metadata=lambda m: {**m, "format_version": "3"})
    expect_rejected(path, "format version is '3'", "reads versions '1' and '2'")


def test_not_a_checkpoint_of_this_model_is_rejected(tmp_path):
    path = tmp_path / "other.safetensors"
    checkpoint.save_file(path, {"w": ("F32", (1,), [1.0])}, {"format": "pt"})
    expect_rejected(path, "format is 'pt'")


def test_missing_tensor_is_rejected(tmp_path):
    path = tmp_path / "ckpt.safetensors"
    write_tiny(path)
    rewrite(path, tensors=lambda t: {k: v for k, v in t.items() if k != "adam_v.Wq"})
    expect_rejected(path, "missing tensors", "adam_v.Wq")


def test_misshapen_tensor_is_rejected(tmp_path):
    path = tmp_path / "ckpt.safetensors"
    write_tiny(path)
    rewrite(path, tensors=lambda t: {**t, "W1": ("F32", (8, 4), t["W1"][2])})
    expect_rejected(path, "'W1'", "shape (8, 4)", "expected (4, 8)")


def test_unexpected_tensor_is_rejected(tmp_path):
    path = tmp_path / "ckpt.safetensors"
    write_tiny(path)
    rewrite(path, tensors=lambda t: {**t, "W9": ("F32", (1,), [0.0])})
    expect_rejected(path, "unexpected tensors", "W9")


def test_mixed_dtypes_are_rejected(tmp_path):
    path = tmp_path / "ckpt.safetensors"
    write_tiny(path)
    rewrite(path, tensors=lambda t: {**t, "b1": ("F64", t["b1"][1], t["b1"][2])})
    expect_rejected(path, "'b1'", "dtype F64", "expected F32")


def test_other_tokenizer_is_rejected(tmp_path):
    path = tmp_path / "ckpt.safetensors"
    write_tiny(path)
    expect_rejected(path, "tokenizer", "SHA-256", tokenizer_sha="0" * 64)


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
@pytest.mark.parametrize("name", ["Wo", "adam_m.b2", "adam_v.tok_emb"])
def test_non_finite_values_are_rejected(tmp_path, bad, name):
    path = tmp_path / "ckpt.safetensors"
    write_tiny(path)

    def poison(t):
        dtype, shape, values = t[name]
        values = values.tolist()
        values[1] = bad
        return {**t, name: (dtype, shape, values)}

    rewrite(path, tensors=poison)
    expect_rejected(path, f"{name!r}", "non-finite", "flat index 1")


def test_broken_rng_state_is_rejected(tmp_path):
    path = tmp_path / "ckpt.safetensors"
    write_tiny(path)
    rewrite(path, tensors=lambda t: {**t, checkpoint.RNG: ("I64", (625,), [2 ** 40] * 625)})
    expect_rejected(path, checkpoint.RNG, "Mersenne")


# ----------------------------------------------------------------------------------------------------------------
# The position scheme in the config


def with_config(path, config):
    """Rewrite the checkpoint at path with config (a dict) as its metadata config."""
    rewrite(path, metadata=lambda m: {**m, "config": json.dumps(config)})


def test_position_scheme_in_the_config(tmp_path):
    """A config may name its scheme; model.py's switch must then be true exactly for learned. A config without one
    (files from before the schemes) reads as learned or none from the switch."""
    path = tmp_path / "ckpt.safetensors"
    write_tiny(path, config=dataclasses.replace(CONFIG, positions="rope"))
    assert checkpoint.load_checkpoint(path)["config"].positions == "rope"
    assert json.loads(checkpoint.load_file(path)[1]["config"])[SWITCH_KEY] is False
    before = {key: value for key, value in CONFIG.to_json().items() if key != "positions"}
    assert checkpoint.positions_of(CONFIG.to_json()) == "learned" == checkpoint.positions_of(before)
    assert checkpoint.positions_of({**before, SWITCH_KEY: False}) == "none"
    for switch, scheme in ((True, "learned"), (False, "none")):
        write_tiny(path)
        with_config(path, {**before, SWITCH_KEY: switch})
        assert checkpoint.load_checkpoint(path)["config"] == dataclasses.replace(CONFIG, positions=scheme)
    write_tiny(path)
    with_config(path, {**CONFIG.to_json(), "positions": "sinusoidal"})
    expect_rejected(path, f"{SWITCH_KEY} is true but positions is 'sinusoidal'", "exactly for 'learned'")
    write_tiny(path)
    with_config(path, {**CONFIG.to_json(), "positions": "alibi"})
    expect_rejected(path, "config positions is 'alibi', expected one of ['learned', 'none', 'sinusoidal', 'rope']")


# ----------------------------------------------------------------------------------------------------------------
# A grown model's checkpoint: its sizes in the config, format version 2


GROWN = dataclasses.replace(CONFIG, blocks=2, heads=2)


def test_a_grown_checkpoint_records_its_sizes_as_version_2_and_a_one_block_one_stays_version_1(tmp_path):
    path = tmp_path / "grown.safetensors"
    args = write_tiny(path, blocks=2, config=GROWN)
    ckpt = checkpoint.load_checkpoint(path, TOKENIZER_SHA)
    assert ckpt["metadata"]["format_version"] == checkpoint.GROWN_VERSION == "2"
    assert ckpt["config"] == GROWN and (ckpt["config"].blocks, ckpt["config"].heads) == (2, 2)
    assert json.loads(ckpt["metadata"]["config"]) == GROWN.to_json() and "blocks" in GROWN.to_json()
    assert list(ckpt["params"]) == ModelConfig(96, 16, 64, 64, blocks=2).param_names() == list(args["params"])
    write_tiny(path)
    ckpt = checkpoint.load_checkpoint(path, TOKENIZER_SHA)
    assert ckpt["metadata"]["format_version"] == "1" and "blocks" not in json.loads(ckpt["metadata"]["config"])
    assert ckpt["config"] == CONFIG and (ckpt["config"].blocks, ckpt["config"].heads) == (1, 1)


@pytest.mark.parametrize("config, version, phrases", [
    (GROWN.to_json(), "1", ["config has blocks or heads, but format version '1' is of one block and one head"]),
    (CONFIG.to_json(), "2", ["config blocks is None, expected a positive int"]),
    ({**GROWN.to_json(), "heads": 0}, "2", ["config heads is 0, expected a positive int"]),
    ({**GROWN.to_json(), "heads": 3}, "2", ["config heads = 3 does not divide the width d = 4"]),
    ({**GROWN.to_json(), "blocks": 3}, "2", ["missing tensors", "block2.ln1_g"]),
    ({**GROWN.to_json(), "blocks": 1}, "2", ["unexpected tensors", "block1.ln1_g"]),
])
def test_bad_sizes_in_a_checkpoint_are_rejected_naming_them(tmp_path, config, version, phrases):
    path = tmp_path / "grown.safetensors"
    write_tiny(path, blocks=2, config=GROWN)
    rewrite(path, metadata=lambda m: {**m, "format_version": version, "config": json.dumps(config)})
    expect_rejected(path, *phrases)
