"""The settings of a training run as plain values: `Settings`, one field per setting with a line that says what it
does, and `checked`, the one place where they are checked (with the messages train.py's users read, which name the
command line's flags) and their defaults filled in.

    >>> s = checked(Settings(steps=50))
    >>> s.warmup, s.seq_len, s.dtype, s.val_stories
    (50, 64, 'float32', 300)
    >>> checked(Settings(seq_len=100))
    Traceback (most recent call last):
    ...
    ValueError: --seq-len 100 is longer than the 64 positions the model has; expected 1 to 64
    >>> checked(Settings(steps="ten"))
    Traceback (most recent call last):
    ...
    ValueError: --steps 'ten': expected a whole number

Standard library only: what a setting costs in memory is priced by formula (config.py) before any of it is spent.
"""

import dataclasses
import math
import typing
from dataclasses import dataclass

import bpe
from oneblock import config, machine
from oneblock.tensorfile import LIST_NUMBER_BYTES

BACKENDS = ("numpy", "numpy-plain", "python", "torch")  # which model file computes (training.model_functions)
HIDDEN_PER_WIDTH = 4  # the MLP's hidden units per unit of width: 64 at the series width 16
WARMUP = 100  # default warm-up steps (capped at the length of the run)
VAL_STORIES = 300  # default val_stories: the last 300 stories of corpus.txt validate
VAL_FRACTION = 0.1  # default val_fraction: with data, the last tenth of the lines or documents validate
VAL_BATCH = 256  # with data, validation windows go through the model this many at a time

# the settings a checkpoint records; a resume must use the same ones as the run it continues, but for HOW_RUN
TRAINING_SETTINGS = ("backend", "threads", "dtype", "steps", "batch", "seq_len", "lr", "min_lr", "warmup", "beta1",
                     "beta2", "eps", "clip", "seed", "val_stories", "positions", "blocks", "heads")
TEXT_SETTINGS = ("val_fraction", "vocab_size")  # added to those with data (the text and the tokenizer are hashed)
HOW_RUN = ("backend", "threads")  # where the same run computes: a checkpoint resumes on another backend too
DTYPES = ("float32", "float64")  # of the weights and of Adam's moments
DEVICES = ("cpu", "cuda", "mps", "auto")  # where the torch backend computes (auto: CUDA when there is one)

# ----------------------------------------------------------------------------------------------------------------
# The settings


@dataclass(frozen=True)
class Settings:
    """Everything that decides a training run, with its defaults: the one place they are written (train.py's flags
    take theirs from here). None means "the default that follows from the other settings", which `checked` fills
    in."""

    backend: str = "numpy"  # numpy (numpy_fast.py, tuned), numpy-plain (numpy_model.py), python (model.py), torch
    device: str | None = None  # where the torch backend computes: cpu, cuda, mps or auto (default auto)
    threads: int = 1  # BLAS threads of the numpy backends, and of numpy_fast's loss over a large vocabulary
    dtype: str | None = None  # float32 or float64, of the weights and of Adam's moments (default float32; python: 64)
    steps: int = 12000  # optimiser steps in the whole run
    stop_at: int | None = None  # stop after this step, on the learning-rate schedule of the whole run
    batch: int = 16  # windows per step, B
    seq_len: int | None = None  # tokens per window, T, at most max_len (default max_len)
    lr: float = 1e-2  # peak learning rate, reached at the end of the warm-up
    min_lr: float = 1e-3  # learning rate at the last step, where the cosine decay ends
    warmup: int | None = None  # steps of linear warm-up from lr / warmup to lr (default 100, at most the run)
    beta1: float = 0.9  # Adam: decay rate of the running mean of the gradient
    beta2: float = 0.99  # Adam: decay rate of the running mean of its square
    eps: float = 1e-8  # Adam: added to the root of the second moment
    clip: float = 1.0  # largest global gradient norm (inf: no clipping)
    seed: int = 3  # seeds the initial weights (as model.init_params) and the batch sampler
    val_stories: int | None = None  # the last this many stories of corpus.txt validate (default 300)
    data: str | None = None  # a UTF-8 text file to learn instead of the stories of corpus.txt
    tokenizer: str | None = None  # with data: this tokenizer.json instead of one trained on the text
    vocab_size: int | None = None  # with data: the tokens of the tokenizer trained on it (default 256)
    val_fraction: float | None = None  # with data: the share of its lines or documents, its last, that validate
    width: int = 16  # the model's width d; its MLP has HIDDEN_PER_WIDTH x d hidden units
    max_len: int = 64  # the most positions the model reads, and the rows of learned positions
    positions: str = "learned"  # one of config.SCHEMES: learned, none, sinusoidal or rope
    blocks: int = 1  # transformer blocks
    heads: int = 1  # attention heads in each block, each of width d / heads
    eval_every: int = 500  # steps between validation losses (also at the end)
    ckpt_every: int = 500  # steps between checkpoints (also at the end), for a run that saves
    quiet: bool = False  # no progress bar
    rank: int = 0  # under torchrun: this process's rank (train.py reads torchrun's RANK)
    world: int = 1  # under torchrun: the number of processes (WORLD_SIZE)


# ----------------------------------------------------------------------------------------------------------------
# What each setting must be


def at_least(low, null=None):
    """The rule (test, what is expected in words) of a setting that is a whole number of at least low (true and
    false are no numbers here), or None when null says what that means."""
    words = f"a whole number of at least {low}" + (f", or null ({null})" if null else "")
    return (lambda v: (null is not None and v is None) or (type(v) is int and v >= low)), words


def within(low, high, words, from_low=False, to_high=False):
    """The rule of a setting that is a number between low and high (from_low, to_high: the ends taken in), compared
    exactly: an end of infinity leaves infinity out unless taken in, and NaN is never within.

    >>> [RULES["lr"][0](v) for v in (1e-3, 10 ** 400, math.inf, math.nan, 0, True, None)]
    [True, True, False, False, False, False, False]
    """
    return (lambda v: type(v) in (int, float) and (low <= v if from_low else low < v)
            and (v <= high if to_high else v < high)), words


def one_of(choices):
    """The rule of a setting that names one of choices."""
    return (lambda v: isinstance(v, str) and v in choices), f"one of {list(choices)}"


# What each setting must be, on its own: name -> (test, what is expected in words), the one table of the settings'
# ranges. `checked` holds a run's settings to it, checkpoint.py a file's recorded training (TRAINING_RULES).
RULES = {
    "backend": one_of(BACKENDS),
    "threads": at_least(1),
    "dtype": one_of(DTYPES),
    "steps": at_least(1),
    "batch": at_least(1),
    "seq_len": at_least(1),
    "lr": within(0, math.inf, "a positive finite number"),
    "min_lr": within(0, math.inf, "a finite number of at least 0", from_low=True),
    "warmup": at_least(0),
    "beta1": within(0, 1, "a number in [0, 1)", from_low=True),
    "beta2": within(0, 1, "a number in [0, 1)", from_low=True),
    "eps": within(0, math.inf, "a positive finite number"),
    "clip": within(0, math.inf, "a positive number (Infinity: no clipping)", to_high=True),
    "seed": at_least(0),
    "val_stories": at_least(1),
    "positions": one_of(config.SCHEMES),
    "blocks": at_least(1),
    "heads": at_least(1),
    "val_fraction": within(0, 1, "a number between 0 and 1"),
    "vocab_size": at_least(1),
    "eval_every": at_least(1),
    "ckpt_every": at_least(1),
    "width": at_least(1),
    "max_len": at_least(1),
}

# The rules between settings, each written once: (the setting, the one it may not pass), in the order they are
# checked. `crossed` finds the first one broken; each caller words it: `checked` with the flags (FLAG_WORDS),
# checkpoint.py with the names a file records.
CROSS_RULES = (("seq_len", "max_len"),  # a window reads at most the positions the model has
               ("warmup", "steps"),  # the warm-up fits in the run
               ("min_lr", "lr"))  # the learning rate falls
FLAG_WORDS = {  # a broken rule as train.py's users read it (str.format of the settings' values)
    "seq_len": "--seq-len {seq_len} is longer than the {max_len} positions the model has; expected 1 to {max_len}",
    "warmup": "--warmup {warmup} is longer than the run (--steps {steps})",
    "min_lr": "--min-lr {min_lr} is more than --lr {lr}: expected a learning rate that falls",
}


def crossed(values, words):
    """The first rule between settings (CROSS_RULES) that values {name: value} break, in its words (words[name],
    filled in with the values), or None; a rule whose settings are not both given (absent or None) is not checked.

    >>> crossed({"warmup": 50, "steps": 10, "lr": 0.01}, FLAG_WORDS), crossed({"warmup": 5, "steps": 10}, FLAG_WORDS)
    ('--warmup 50 is longer than the run (--steps 10)', None)
    """
    for name, bound in CROSS_RULES:
        if values.get(name) is not None and values.get(bound) is not None and values[name] > values[bound]:
            return words[name].format(**values)
    return None


# ----------------------------------------------------------------------------------------------------------------
# Checking the settings


def checked(s):
    """s with every default filled in, or a ValueError naming the first setting that makes no sense and what was
    expected. It also prices the run's step in memory (on the CPU) and refuses one that would not fit here."""
    problem = _kind_problem(s)
    if problem:
        raise ValueError(problem)
    fill = {}
    if s.dtype is None:
        fill["dtype"] = "float64" if s.backend == "python" else "float32"
    if s.warmup is None:
        fill["warmup"] = min(WARMUP, max(s.steps, 0))
    if s.seq_len is None:
        fill["seq_len"] = s.max_len
    if s.data is None:
        fill["val_stories"] = VAL_STORIES if s.val_stories is None else s.val_stories
    else:
        if s.tokenizer is None and s.vocab_size is None:
            fill["vocab_size"] = bpe.TEXT_VOCAB_SIZE
        fill["val_fraction"] = VAL_FRACTION if s.val_fraction is None else s.val_fraction
    if s.backend == "torch":
        fill["device"] = s.device or "auto"
    problem = _problem(s, dataclasses.replace(s, **fill))
    if problem:
        raise ValueError(problem)
    return dataclasses.replace(s, **fill)


def _kind_problem(s):
    """The first setting of s whose value is not of its field's type, in one line, or None (the command line's
    parser sees to the types; a caller of the library may not)."""
    for field in dataclasses.fields(Settings):
        value, kinds = getattr(s, field.name), typing.get_args(field.type) or (field.type,)
        if not _of_kind(value, kinds):
            names = " or ".join("a whole number" if k is int else "a number" if k is float else "true or false"
                                if k is bool else "text" if k is str else "None" for k in kinds)
            return f"--{field.name.replace('_', '-')} {value!r}: expected {names}"
    return None


def _problem(given, s):
    """The first thing wrong with the settings s (given: as they came, before the defaults), in one line, or None."""
    for name, (test, expected) in RULES.items():  # (None: a default that follows from settings said below)
        if getattr(s, name) is not None and not test(getattr(s, name)):
            return f"--{name.replace('_', '-')} {getattr(s, name)!r}: expected {expected}"
    if s.world < 1:
        return f"world {s.world}: expected at least 1 process (torchrun's WORLD_SIZE)"
    if not 0 <= s.rank < s.world:
        return (f"rank {s.rank}: expected " + ("0, the only process" if s.world == 1 else
                                               f"0 to {s.world - 1}, one for each of the {s.world} processes")
                + " (torchrun's RANK and WORLD_SIZE)")
    model = model_config(s, s.vocab_size or bpe.VOCAB_SIZE)
    if s.backend == "python" and model.seed_problem():
        return (f"--backend python runs model.py: this run's model {model.seed_problem()}; use --backend numpy,"
                f" numpy-plain or torch")
    if s.backend == "python" and s.dtype != "float64":
        return (f"--dtype {s.dtype}: the python backend computes in Python floats, which are float64; drop --dtype or"
                f" use --backend numpy")
    problem = _data_problem(given)
    if problem:
        return problem
    try:  # the model's own checks (the flags above have said what is not a size): heads, and rope's even width
        model.checked()
    except ValueError as e:  # (one head divides every width: then it is rope's, on an odd width)
        return f"{'--width' if s.heads == 1 else '--heads'} {s.width if s.heads == 1 else s.heads}: {e}"
    if s.stop_at is not None and not 1 <= s.stop_at <= s.steps:
        return f"--stop-at {s.stop_at} is outside the run: expected a step from 1 to --steps ({s.steps})"
    problem = crossed(dataclasses.asdict(s), FLAG_WORDS)  # seq_len, warmup, min_lr
    if problem:
        return problem
    if s.backend != "torch":
        if s.device is not None:
            return f"--device {s.device} is for --backend torch; the {s.backend} backend runs on the CPU"
        if s.world > 1:
            return (f"torchrun started {s.world} processes, but only --backend torch trains data-parallel; add"
                    f" --backend torch, or run train.py without torchrun")
        return _memory_problem(s)
    if s.device not in DEVICES:
        return f"--device {s.device!r}: expected one of {', '.join(DEVICES)}"
    machine.need_backend("train.py", "torch", ["torch"])
    from oneblock import torch_train

    problem = torch_train.device_problem(s.device)
    if problem:
        return problem
    if s.batch % s.world:
        return (f"--batch {s.batch} cannot be shared by the {s.world} processes torchrun started: each takes the same"
                f" number of windows, so the batch must be a multiple of {s.world}")
    return _memory_problem(s) if torch_train.device_of(s).type == "cpu" else None  # (a GPU's is the framework's)


def _of_kind(value, kinds):
    """Whether value is of one of the kinds a field's annotation allows (a bool is no number; an int is a float).

    >>> _of_kind(3, (float,)), _of_kind(True, (int,)), _of_kind(None, (str, type(None)))
    (True, False, True)
    """
    for kind in kinds:
        if kind is type(None) and value is None or kind is bool and type(value) is bool:
            return True
        if kind in (int, float) and type(value) is not bool and isinstance(value, int if kind is int else (int, float)):
            return True
        if kind is str and isinstance(value, str):
            return True
    return False


def _data_problem(s):
    """What is wrong with the settings of the data as given: val_stories goes with the stories, the others with
    data only."""
    if s.data is None:
        given = [f"--{name.replace('_', '-')}" for name in ("tokenizer", "vocab_size", "val_fraction")
                 if getattr(s, name) is not None]
        if given:
            return (f"{' and '.join(given)} go with --data FILE; the stories of corpus.txt have the shipped"
                    f" tokenizer.json and --val-stories")
        return None
    if s.val_stories is not None:
        return (f"--val-stories {s.val_stories} counts the stories of corpus.txt; with --data the share of the text"
                f" that validates is --val-fraction")
    if s.tokenizer is not None and s.vocab_size is not None:
        return (f"--tokenizer {s.tokenizer} and --vocab-size {s.vocab_size} contradict each other: a given tokenizer"
                f" has its own size; pick one")
    return None


def _memory_problem(s):
    """The run's step priced in memory against what this process can still take (machine.check_memory)."""
    named = ["width", "max_len", "blocks", "heads", "batch", "seq_len"] + (["vocab_size"] if s.vocab_size else [])
    try:
        machine.check_memory(step_memory(s), " ".join(f"--{name.replace('_', '-')} {getattr(s, name)}"
                                                         for name in named))
    except ValueError as e:
        return str(e)
    return None


# ----------------------------------------------------------------------------------------------------------------
# What follows from the settings


def step_memory(s):
    """About the bytes a step of a run with the checked settings s holds at once (ModelConfig.step_bytes), before its
    data: the NumPy paths and torch hold numbers of s.dtype, and validate up to VAL_BATCH windows or all val_stories at
    once; model.py holds Python floats in lists (LIST_NUMBER_BYTES each) and every row's gradients until their mean.
    The vocabulary is vocab_size, or the stories' 96 (a given tokenizer's own is not read yet).

    >>> lab = checked(Settings())
    >>> f"{step_memory(lab) / 2**20:.0f} MiB", f"{step_memory(dataclasses.replace(lab, width=10**5)):.1e}"
    ('87 MiB', '2.2e+12')
    """
    m = model_config(s, s.vocab_size or bpe.VOCAB_SIZE)
    if s.backend == "python":
        return LIST_NUMBER_BYTES * ((4 + s.batch) * m.parameter_count()
                     + 2 * s.seq_len * m.activations_per_token(s.seq_len))
    rows = max(s.batch, VAL_BATCH if s.data is not None else s.val_stories)  # (rows, T) the most at once
    return m.step_bytes(rows, s.seq_len, 4 if s.dtype == "float32" else 8)


def model_config(s, vocab):
    """The model the settings s train, over a vocabulary of vocab tokens: width d, HIDDEN_PER_WIDTH x d hidden
    units, max_len, blocks, heads and the position scheme (unchecked: `.checked()` says what does not fit).

    >>> model_config(Settings(blocks=2, positions="rope"), 96)
    ModelConfig(vocab=96, d=16, hidden=64, max_len=64, blocks=2, heads=1, positions='rope')
    """
    return config.ModelConfig(vocab, s.width, HIDDEN_PER_WIDTH * s.width, s.max_len, s.blocks, s.heads, s.positions)


def training_settings(s):
    """The settings that decide the weights (a resume must match them): what a checkpoint records of the run, less
    the model's own, which its config holds (checkpoint.recorded_training).

    >>> training_settings(checked(Settings(heads=4)))["heads"], "val_fraction" in training_settings(checked(Settings()))
    (4, False)
    """
    names = TRAINING_SETTINGS + (TEXT_SETTINGS if s.data is not None else ())
    return {name: getattr(s, name) for name in names}
