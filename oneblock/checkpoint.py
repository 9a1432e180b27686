"""The training checkpoint of this model, in the safetensors container of tensorfile.py (standard library only):
what it holds, `save_checkpoint`, and `load_checkpoint`, which refuses a bad file with a message naming the problem
(the page refuses the same files: docs/explorer.md, "Which models it runs").

Its tensors are every parameter (F32 or F64, one dtype for all, named as config.py names them), "adam_m.NAME" and
"adam_v.NAME" (Adam's moments, of the same dtype and shapes), "adam_step" (I64, the steps taken) and "rng_state"
(I64, 625 numbers: the batch sampler's Mersenne Twister state). Its metadata strings are

    format, format_version   "one-block checkpoint"; "1" for one block and one head (its bytes are what they were
                             before models could grow), "3" for a grown model, whose config has blocks and heads
                             ("2", read but no longer written: a grown model whose training repeats its model)
    config                   the ModelConfig as JSON (to_json): vocab, d, hidden, max_len, model.py's switch,
                             positions (absent in files from before the schemes), in versions 2 and 3 blocks and heads
    training                 the run's settings (train.py's, or the explorer page's), held to TRAINING_RULES: the
                             model's (MODEL_SETTINGS) are its config's, so version 3 has none of them and version 1
                             positions only, as before models could grow
    tokenizer_sha256         the SHA-256 of the tokenizer.json its token IDs belong to
    data_sha256              the SHA-256 of the data part: a file without it cannot show its data is whole
    metadata_sha256          versions 2 and 3 (required): the SHA-256 of the rest of the metadata (metadata_digest), so
                             that a changed size no tensor shows (heads) is caught
    corpus_sha256, val_loss, floor_nats_per_token, val_floor_nats_per_token   the stories' hash, and finite numbers
                             of nats, at least 0, in digits (as repr writes a float)
    text, text_sha256, split, tokenizer   a model of your own text (train.py --data): all four, or none
    explorer_source          the explorer page's downloads say where their weights came from

and `check_checkpoint` checks each of them, in one place. A version 1 file's metadata has no hash of its own: a
changed val_loss goes unnoticed there, and so would model.py's switch and the scheme changed together.

    >>> shapes = dict(each_expected(ModelConfig(96, 16, 64, 64)))
    >>> len(shapes), shapes["adam_v.W1"], shapes[STEP], sum(math.prod(shape) for shape in shapes.values())
    (56, (16, 64), (), 22946)
"""

import itertools
import json
import math
import re
from pathlib import Path

from atomic import write_atomic
import bpe
import model
from oneblock import machine, settings
from oneblock.config import GROWN_KEYS, GROWN_VERSION, GROWN_VERSIONS, ONE_BLOCK_VERSION, SIZE_KEYS, SWITCH_KEY
from oneblock.config import ModelConfig
from oneblock.config import BLOCK_NAMES, OUTSIDE, each_param_name, said, seed_switch
from oneblock.tensorfile import (DATA_HASH_KEY, MAX_DIGITS, METADATA_HASH_KEY, RNG_STATE_LEN, decode, encode,
                                 metadata_digest, parse_json, read_bytes, rng_from_tensor, rng_tensor, sha256_file,
                                 sha256_text)
# the container's names that callers read as checkpoint.NAME
from oneblock.tensorfile import DTYPES, HEADER_ALIGN, LIST_NUMBER_BYTES, MAX_HEADER, flat, nested  # noqa: F401

# ----------------------------------------------------------------------------------------------------------------
# What a training checkpoint holds: parameters, Adam's moments and step, the batch sampler's random state, metadata

FORMAT = "one-block checkpoint"  # metadata "format"
MOMENT_PREFIXES = ("adam_m.", "adam_v.")  # Adam's first and second moments, one tensor per parameter
STEP = "adam_step"  # I64 scalar: the number of optimiser steps taken
RNG = "rng_state"  # I64 (625,): the batch sampler's Mersenne Twister state (tensorfile.rng_tensor)
METADATA_KEYS = ("format", "format_version", "config", "training", "tokenizer_sha256")  # required
TOKENIZER_KEY = "tokenizer"  # optional: the tokenizer.json text of a model of your own text (train.py --data)
TEXT_KEYS = ("text", "text_sha256", "split", TOKENIZER_KEY)  # your own text: all four; the stories: none
HASH_KEYS = ("tokenizer_sha256", "corpus_sha256", "text_sha256", DATA_HASH_KEY, METADATA_HASH_KEY)  # SHA-256s, in hex
NUMBER_KEYS = ("val_loss", "floor_nats_per_token", "val_floor_nats_per_token")  # nats (at least 0), as text
VERSIONS = (ONE_BLOCK_VERSION, *GROWN_VERSIONS)  # the format versions read
MODEL_SETTINGS = ("positions", *GROWN_KEYS, SWITCH_KEY)  # a run's settings that are its model's: the config's
KNOWN_KEYS = (*METADATA_KEYS, "corpus_sha256", *NUMBER_KEYS, *TEXT_KEYS, "explorer_source", DATA_HASH_KEY,
              METADATA_HASH_KEY)  # every metadata key a checkpoint of this model may have


def each_expected(config):
    """(name, shape) of every tensor a training checkpoint of a ModelConfig holds, in order, one at a time (a config
    of 10^12 blocks costs nothing until its names are read): the parameters, their moments, the step, the rng state.

    >>> next(itertools.islice(each_expected(ModelConfig(9, 4, 8, 8, blocks=10 ** 12)), 14, None))
    ('block1.ln1_g', (4,))
    """
    one = model.param_shapes(config.vocab, config.d, config.hidden, config.max_len)
    for prefix in ("", *MOMENT_PREFIXES):
        for name in each_param_name(config.blocks):
            yield prefix + name, one[name.rpartition(".")[2]]
    yield STEP, ()
    yield RNG, (RNG_STATE_LEN,)


def save_checkpoint(path, params, moments, step, rng, config, training, tokenizer_sha256, extra=None, mode=0o644):
    """Write a training checkpoint atomically (checkpoint_bytes), with the permissions mode less the umask."""
    write_atomic(path, checkpoint_bytes(params, moments, step, rng, config, training, tokenizer_sha256, extra), mode)


def checkpoint_bytes(params, moments, step, rng, config, training, tokenizer_sha256, extra=None):
    """The bytes of a training checkpoint: params and each of moments (m, v) {name: (dtype, shape, flat values)} in
    the model's order, step an int, rng the batch sampler's random.Random, config the ModelConfig, training the
    settings dict (recorded_training keeps the run's), extra more metadata strings. A grown model's file is version
    3, its metadata hashed."""
    tensors = dict(params)
    for prefix, moment in zip(MOMENT_PREFIXES, moments):
        tensors.update({prefix + name: t for name, t in moment.items()})
    tensors[STEP] = ("I64", (), [step])
    tensors[RNG] = rng_tensor(rng)
    metadata = {
        "format": FORMAT,
        "format_version": GROWN_VERSION if config.grown else ONE_BLOCK_VERSION,
        "config": json.dumps(config.to_json()),
        "training": json.dumps(recorded_training(training, config)),
        "tokenizer_sha256": tokenizer_sha256,
        **(extra or {}),
    }
    if config.grown:
        metadata[METADATA_HASH_KEY] = metadata_digest(metadata)
    return encode(tensors, metadata)


def recorded_training(training, config):
    """The settings a checkpoint of the ModelConfig records of a run's settings (training): the model's own
    (MODEL_SETTINGS) are in its config, so a grown model's file (version 3) leaves them all out, and a one-block
    file keeps positions alone, byte for byte as before models could grow.

    >>> run = {"seed": 3, "positions": "rope", "blocks": 1, "heads": 1}
    >>> recorded_training(run, ModelConfig(96, 16, 64, 64, positions="rope"))
    {'seed': 3, 'positions': 'rope'}
    >>> recorded_training({**run, "blocks": 2}, ModelConfig(96, 16, 64, 64, blocks=2, positions="rope"))
    {'seed': 3}
    """
    left_out = MODEL_SETTINGS if config.grown else GROWN_KEYS
    return {name: value for name, value in training.items() if name not in left_out}


# ----------------------------------------------------------------------------------------------------------------
# Checking a decoded checkpoint: every metadata field's type and range, the sizes against the tensors, the tensors

SPLITS = ("line", "document")  # metadata "split": the units of your own text (train.split_text)
BACKENDS = (*settings.BACKENDS, "explorer")  # training "backend": train.py's, or the page's
DTYPE_NAMES = dict(zip(settings.DTYPES, ("F32", "F64")))  # training "dtype" -> the parameters' safetensors dtype
SHA256 = re.compile(r"[0-9a-f]{64}")  # a SHA-256 as hexdigest writes it
NATS = re.compile(r"[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?")  # a number of nats as repr writes a float: no sign


# Every setting a checkpoint's training may record: train.py's (settings.TRAINING_SETTINGS and, with --data,
# TEXT_SETTINGS) and the explorer page's downloads (model.py's switch, eval_every), held to the settings' own rules
# (settings.RULES); name -> (test, what is expected, in words), in the order the messages list them. Older files may
# lack the settings added later. What a file may hold besides a run's settings is said here: the page's backend and
# its untrained weights of 0 steps, no seed for weights from elsewhere, no val_stories for your own text, no
# vocab_size for a given tokenizer, and positions true or false from before the schemes.
TRAINING_RULES = {
    **{name: settings.RULES[name] for name in settings.TRAINING_SETTINGS + settings.TEXT_SETTINGS},
    "backend": settings.one_of(BACKENDS),
    "steps": settings.at_least(0),
    "seed": settings.at_least(0, "weights from elsewhere"),
    "val_stories": settings.at_least(1, "your own text"),
    "positions": (lambda v: type(v) is bool or settings.RULES["positions"][0](v),
                  f"{settings.RULES['positions'][1]}, or true or false (from before the schemes)"),
    "vocab_size": settings.at_least(1, "a given tokenizer"),
    SWITCH_KEY: (lambda v: type(v) is bool, "true or false"),
    "eval_every": settings.RULES["eval_every"],
}
TEXT_NEEDS = ("val_fraction", "seq_len")  # the settings a model of your own text needs to split it again
TRAINING_WORDS = {  # a broken rule between settings (settings.CROSS_RULES) in the names a file records
    "seq_len": "training seq_len is {seq_len}, more than the {max_len} positions of the model (config max_len)",
    "warmup": "training warmup is {warmup}, longer than the run (steps {steps})",
    "min_lr": "training min_lr is {min_lr}, more than lr {lr}: expected a learning rate that falls",
}


def _is_nats_text(v):
    """Whether the text v is a finite number of at least 0 in plain digits, as val_loss and the floors are written
    (repr of a float): float() alone would also read "1_000", " 2", "+3", "-3" and "infinity".

    >>> [_is_nats_text(v) for v in ("0.3306", "1e-05", "nan", "1_000", "-3", "1e999", "abc")]
    [True, True, False, False, False, False, False]
    """
    return NATS.fullmatch(v) is not None and math.isfinite(float(v))


def check_metadata(metadata):
    """Raise a ValueError naming the first bad metadata entry of a checkpoint (its strings, before config and
    training are read); return its format version."""
    if metadata.get("format") != FORMAT:
        raise ValueError(f"format is {said(metadata.get('format'))}, expected {FORMAT!r}: not a checkpoint of this"
                         f" model")
    version = metadata.get("format_version")
    if version not in VERSIONS:
        raise ValueError(f"format version is {said(version)}, but this code reads versions"
                         f" {', '.join(map(repr, VERSIONS))}")
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
        if key in metadata and not SHA256.fullmatch(metadata[key]):
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


def _many(n):
    """A count for a message: n with commas between thousands, or, past the MAX_DIGITS digits Python prints, the
    power of ten it reaches.

    >>> _many(10 ** 7), _many(36 * 10 ** 5000)
    ('10,000,000', 'at least 10^5,001')
    """
    if n < 10 ** MAX_DIGITS:
        return f"{n:,}"
    power = int(math.log10(n))
    power += (10 ** (power + 1) <= n) - (10 ** power > n)  # (exact where the float is not)
    return f"at least 10^{power:,}"


def check_fits(config, tensors, version):
    """Raise a ValueError, by arithmetic before any name is made, when the config's sizes (blocks = 10^12) ask for
    more tensors or numbers than the file holds, naming the sizes and the first tensors missing or misshapen."""
    per = 1 + len(MOMENT_PREFIXES)  # each parameter and its two moments; then the step and the random state
    need_tensors = per * (len(OUTSIDE) + config.blocks * len(BLOCK_NAMES)) + 2
    need_numbers = per * config.parameter_count() + 1 + RNG_STATE_LEN
    have_numbers = sum(math.prod(shape) for _, shape, _ in tensors.values())
    if need_tensors <= len(tensors) and need_numbers <= have_numbers:
        return
    missing = list(itertools.islice((name for name, _ in each_expected(config) if name not in tensors), 6))
    if need_tensors > len(tensors):
        what = (f"config blocks is {config.blocks:,}: a checkpoint of {config.blocks:,} block"
                f"{'s' * (config.blocks != 1)} holds {_many(need_tensors)} tensors, but this file holds"
                f" {len(tensors):,}")
    else:
        named = (*SIZE_KEYS, *GROWN_KEYS[:1] * (version in GROWN_VERSIONS))  # (a version 1 file has no blocks)
        asked = ", ".join(f"{key} {getattr(config, key):,}" for key in named)
        what = (f"the config's sizes ({asked}) make {_many(need_numbers)} numbers, but the tensors of this file hold"
                f" {have_numbers:,}")
    if missing:
        raise ValueError(f"{what}; missing tensors: {missing[:5]}{' ...' if len(missing) > 5 else ''}")
    name, want = next((name, shape) for name, shape in each_expected(config) if tensors[name][1] != shape)
    raise ValueError(f"{what}; tensor {name!r} has shape {said(tensors[name][1])}, expected {said(want)}")


def check_training(training, config, metadata):
    """Raise a ValueError naming the first bad setting of a parsed training dict; return it if it is good: known
    settings only, each held to its rule (TRAINING_RULES), the settings your own text needs to split it again, and
    agreement with each other and with the ModelConfig (settings.crossed's rules, the scheme and the sizes)."""
    if not isinstance(training, dict):
        raise ValueError(f"metadata training is a JSON {type(training).__name__}, expected an object of settings")
    for name, value in training.items():
        if name not in TRAINING_RULES:
            raise ValueError(f"training has the setting {said(name)}, which no run records; expected some of"
                             f" {list(TRAINING_RULES)}")
        test, expected = TRAINING_RULES[name]
        if not test(value):
            raise ValueError(f"training {name} is {said(value)}, expected {expected}")
    repeated = [name for name in MODEL_SETTINGS if name in training]
    if metadata["format_version"] == GROWN_VERSION and repeated:
        raise ValueError(f"training has {repeated}, but a version {GROWN_VERSION!r} file records the model in its"
                         f" config alone")
    lacks = [name for name in TEXT_NEEDS if name not in training]
    if "text" in metadata and lacks:
        raise ValueError(f"training lacks {lacks}, which a model of your own text (metadata text) needs to split its"
                         f" text as it was split")
    problem = settings.crossed({**training, "max_len": config.max_len}, TRAINING_WORDS)
    if problem:
        raise ValueError(problem)
    scheme = training.get("positions", config.positions)
    if isinstance(scheme, bool):  # written before the schemes, when --no-positions made it false
        scheme = "learned" if scheme else "none"
    if scheme != config.positions:
        raise ValueError(f"training positions is {said(training['positions'])}, but the config's scheme is"
                         f" {config.positions!r}")
    if training.get(SWITCH_KEY, seed_switch(config)) != seed_switch(config):
        raise ValueError(f"training {SWITCH_KEY} is {str(training[SWITCH_KEY]).lower()}, but config {SWITCH_KEY} is"
                         f" {str(seed_switch(config)).lower()}")
    for name in GROWN_KEYS:
        if training.get(name, getattr(config, name)) != getattr(config, name):
            raise ValueError(f"training {name} is {training[name]}, but the config's {name} is"
                             f" {getattr(config, name)}")
    return training


def check_tensors(tensors, config, training, recorded):
    """Raise a ValueError naming the first bad tensor: every expected tensor there with its shape and no others, one
    float dtype (the training dtype's, when recorded), every value finite, a step from 0 to the run's steps, and a
    Mersenne Twister state random.Random can reach. recorded: the config as the file's JSON has it, for messages."""
    shapes = dict(each_expected(config))
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
            raise ValueError(f"tensor {name!r} has shape {said(shape)}, expected {want} for config {recorded}")
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


def recorded_settings(training):
    """The run's settings in a checkpoint's training, without the model's (MODEL_SETTINGS): its config holds those
    (check_training holds any that a version 1 or 2 file repeats to it), and a resume compares the configs apart.

    >>> recorded_settings({"seed": 0, "positions": False})
    {'seed': 0}
    """
    return {name: value for name, value in training.items() if name not in MODEL_SETTINGS}


def check_checkpoint(tensors, metadata):
    """Raise a ValueError naming the first problem of a decoded checkpoint; return (config, training), the config a
    ModelConfig. The one place a checkpoint is checked, in this order: the metadata strings, the config's JSON, its
    sizes against what the file holds (check_fits, before any per-block name is made), ModelConfig.checked, the
    training settings, the tensors and, last, the metadata's own hash. (Whose tokenizer: tokenizer_of.)"""
    version = check_metadata(metadata)
    recorded = parse_json(metadata["config"], "metadata config")
    config = ModelConfig.from_json(recorded, grown=version in GROWN_VERSIONS)
    check_fits(config, tensors, version)
    try:
        config.checked()
    except ValueError as e:
        raise ValueError(f"config {e}") from None
    training = check_training(parse_json(metadata["training"], "metadata training"), config, metadata)
    check_tensors(tensors, config, training, recorded)
    # last, the metadata's own hash: a grown model's heads are a size that no tensor's shape shows
    if METADATA_HASH_KEY not in metadata and version in GROWN_VERSIONS:
        raise ValueError(f"this grown model's file (format version {version!r}) has no {METADATA_HASH_KEY},"
                         f" so nothing shows that its sizes, such as heads, are the ones it was trained with: it"
                         f" was written by code from before grown models' metadata was hashed; train it again")
    if METADATA_HASH_KEY in metadata and metadata_digest(metadata) != metadata[METADATA_HASH_KEY]:
        raise ValueError(f"the metadata's SHA-256 differs from the one recorded in {METADATA_HASH_KEY}: the header"
                         f" is corrupt or was edited (a model's sizes, such as heads, are in it)")
    return config, training


def load_bytes(raw, where):
    """load_checkpoint of a file's bytes raw, read already: a bad file is a ValueError that starts with where."""
    try:
        tensors, metadata = decode(raw)
        config, training = check_checkpoint(tensors, metadata)
    except ValueError as e:
        raise ValueError(f"{where}: {e}") from None
    names = config.param_names()
    return {
        "config": config,
        "training": training,
        "params": {name: tensors[name] for name in names},
        "moments": tuple({name: tensors[prefix + name] for name in names} for prefix in MOMENT_PREFIXES),
        "step": int(tensors[STEP][2][0]),
        "rng": rng_from_tensor(tensors[RNG][2]),
        "metadata": metadata,
    }


def named_checkpoint(path, instead=""):
    """The checkpoint a command's --ckpt names, as a Path to read, or a ValueError where there is none (ending with
    what to do instead of training one) or it is a folder.

    >>> named_checkpoint("no-such.safetensors", ", or leave out --ckpt")
    Traceback (most recent call last):
    ValueError: no checkpoint at no-such.safetensors; train one with python3 train.py, or leave out --ckpt
    """
    path = Path(path)
    if not path.exists():
        raise ValueError(f"no checkpoint at {path}; train one with python3 train.py{instead}")
    if path.is_dir():
        raise ValueError(f"--ckpt {path} is a folder; expected a checkpoint file such as {path / 'ckpt.safetensors'}")
    return path


def load_checkpoint(path):
    """Read and check a training checkpoint; a bad file is a ValueError that starts with its path. Returns a dict:
    config (a ModelConfig), training (settings), params and moments ({name: (dtype, shape, values)} each, the
    moments a pair (m, v)), step (int), rng (a random.Random in the saved state), metadata (all of it)."""
    return load_bytes(read_bytes(path), path)


# ----------------------------------------------------------------------------------------------------------------
# What reads a loaded checkpoint: the reference model's lists, the tokenizer its token IDs belong to


def reference_params(ckpt):
    """The parameters of a loaded checkpoint as the reference model's dict of nested lists of Python numbers; a
    ValueError, before they are made, when they would not fit in memory (LIST_NUMBER_BYTES a number).

    >>> reference_params({"params": {"b": ("F32", (2,), [0.5, 1.5]), "w": ("F64", (1, 2), [1.0, 2.0])}})
    {'b': [0.5, 1.5], 'w': [[1.0, 2.0]]}
    """
    count = sum(len(values) for _, _, values in ckpt["params"].values())
    machine.check_memory(LIST_NUMBER_BYTES * count, f"the {count:,} parameters as Python lists")
    return {name: nested(values, shape) for name, (_, shape, values) in ckpt["params"].items()}


def tokenizer_mismatch(recorded, have):
    """The message for a tokenizer that is not the one a checkpoint was trained with (SHA-256s recorded and have)."""
    return (f"the checkpoint was trained with a tokenizer whose SHA-256 is {recorded[:16]}..., but this tokenizer.json"
            f" has {have[:16]}...: token IDs would mean different things")


def carried_tokenizer(metadata, where):
    """The tokenizer a checkpoint's metadata carries (a model of your own text), or None; where names the file."""
    text = metadata.get(TOKENIZER_KEY)
    return None if text is None else bpe.Tokenizer.from_json(text, f"{where}: the tokenizer it carries")


def tokenizer_of(ckpt, shipped, where):
    """The tokenizer whose token IDs a loaded checkpoint reads and writes: the one it carries (train.py --data), or
    else the tokenizer.json at the path shipped (the stories'), which must have the SHA-256 the checkpoint recorded.
    Either way its size must be the model's vocabulary; a ValueError, starting with where, says what does not match."""
    tok = carried_tokenizer(ckpt["metadata"], where)
    if tok is None:
        recorded, have = ckpt["metadata"]["tokenizer_sha256"], sha256_file(shipped)
        if recorded != have:
            raise ValueError(f"{where}: {tokenizer_mismatch(recorded, have)}")
        tok = bpe.Tokenizer.load(shipped)
    if len(tok.vocab) != ckpt["config"].vocab:
        raise ValueError(f"{where}: its tokenizer has {len(tok.vocab)} tokens, but the model's vocabulary is"
                         f" {ckpt['config'].vocab}")
    return tok
