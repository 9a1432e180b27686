"""Train the one-block model (or a grown one: --blocks, --heads) on the story corpus, with checkpoints you can resume
and a loss you can read against the best any model could do.

    python3 train.py                    # NumPy, float32, the default settings: 20 to 40 s on 2 cores
    python3 train.py --resume           # continue out/ckpt.safetensors after a stop, a crash or a kill
    python3 train.py --backend python --steps 20 --batch 4   # the same loop on model.py: slow, standard library only
    python3 train.py --positions rope   # rotary positions instead of learned ones (also: none, sinusoidal)
    python3 train.py --blocks 2 --heads 4 --out out/grown.safetensors   # two blocks of four heads each
    python3 train.py --data notes.txt --out out/notes.safetensors   # your own text, with a tokenizer trained on it
    python3 train.py --help             # every setting, with its default

One step: draw B windows of T + 1 consecutive tokens from the training stories (each start drawn by one seeded
random.Random), predict tokens 1..T of each window from the tokens before them, average the loss over the B * T
positions, backpropagate, clip the gradient's global norm, and take an Adam step whose learning rate rises linearly
during the warm-up and then falls along a cosine to its minimum at the last step.

The split is by whole stories: the last --val-stories lines of corpus.txt are the validation set, the others are
training text. The validation loss reads each validation story from its start (after a newline, as in the corpus)
and predicts every one of its tokens and its final newline; it is the total -log p over the total tokens. The floor
is the same quantity for the generator that wrote the stories (floor.py, corpus-entropy.json): no model can expect
to go below it, so "val 0.35, floor 0.31" means 0.04 nats per token left to learn.

With --data FILE the model learns any UTF-8 text instead. Its tokenizer is --tokenizer, or one trained on FILE
(bpe.py, --vocab-size tokens); either way the checkpoint carries it, and a copy goes beside the checkpoint. The split
follows the file: if it has a blank line between two lines of text, its units are documents (the blocks between
blank lines), otherwise lines; the last --val-fraction of the units are the validation text, the rest trains, each
a piece of the file as it is. The validation text is read in windows of --seq-len + 1 tokens that overlap by one,
so that every token after its first is predicted once. Nobody knows the entropy of such a text, so no floor is
printed; for scale, the run prints what guessing uniformly and what knowing only the token frequencies would score.

Same seed, same settings, same machine: bit-identical weights, also across a kill and a --resume. A checkpoint
(checkpoint.py) holds the parameters, Adam's moments and step, and the batch sampler's random state.

Other scripts train through the same functions: `train_model(argv)` runs the loop below in-process with the same
settings and returns the weights and the loss history without writing a checkpoint (positions.py, plots.py).
"""

import argparse
import array
import glob
import hashlib
import math
import os
import platform
import random
import sys
import time
from collections import Counter
from contextlib import ExitStack
from math import fsum
from functools import partial
from pathlib import Path
from types import SimpleNamespace

import bpe
import checkpoint
import floor
import model
import machine
import sizes
from atomic import hold, read_whole, write_atomic

SCHEMES = checkpoint.POSITION_SCHEMES  # --positions: learned, none, sinusoidal, rope (numpy_model.SCHEMES)

# ----------------------------------------------------------------------------------------------------------------
# Settings

HERE = Path(__file__).resolve().parent
CORPUS_FILE = HERE / "corpus.txt"
TOKENIZER_FILE = HERE / "tokenizer.json"
DEFAULT_OUT = "out/ckpt.safetensors"  # relative to where you run it; sample.py reads the same path by default
MODEL = {"d": 16, "hidden": 64, "max_len": 64}  # the series size (the vocabulary comes from the tokenizer)
HIDDEN_PER_WIDTH = 4  # the MLP's hidden units per unit of width (--width): 64 at the series width 16
WARMUP = 100  # default warm-up steps (capped at the length of the run)
VAL_STORIES = 300  # default --val-stories: the last 300 stories of corpus.txt validate
VAL_FRACTION = 0.1  # default --val-fraction: with --data, the last tenth of the lines or documents validate
VAL_BATCH = 256  # with --data, validation windows go through the model this many at a time

# the settings a checkpoint records; a --resume must use the same ones as the run it continues, but for HOW_RUN
TRAINING_SETTINGS = ("backend", "threads", "dtype", "steps", "batch", "seq_len", "lr", "min_lr", "warmup", "beta1",
                     "beta2", "eps", "clip", "seed", "val_stories", "positions", "blocks", "heads")
SIZES = ("blocks", "heads")  # recorded only when not both 1: a one-block, one-head checkpoint is what it always was
TEXT_SETTINGS = ("val_fraction", "vocab_size")  # added to those by --data (the text and the tokenizer are hashed)
HOW_RUN = ("backend", "threads")  # where the same run computes: a checkpoint resumes on another backend too


def build_parser():
    """The command line: every setting with its default and what it does."""
    p = argparse.ArgumentParser(
        description="Train the one-block transformer (or a grown one, with --blocks and --heads) on corpus.txt"
                    " or your own text, write checkpoints, and report the validation loss next to the corpus's"
                    " entropy floor (floor.py).")
    p.add_argument("--backend", choices=("numpy", "numpy-plain", "python", "torch"), default="numpy",
                   help="numpy: numpy_fast.py, the tuned batched path (default). numpy-plain: numpy_model.py, the"
                        " plain mirror of model.py, the same maths written as formulas, slower. python: model.py,"
                        " one sequence at a time, standard library only, hundreds of times slower: for reading"
                        " along with a few steps (one block and one head only). torch: torch_model.py on --device,"
                        " in one process or data-parallel under torchrun (torch_train.py)")
    p.add_argument("--device", choices=("cpu", "cuda", "mps", "auto"), default=None,
                   help="where --backend torch computes (default: auto, CUDA when there is one, else the CPU)")
    p.add_argument("--threads", type=int, default=1, metavar="N",
                   help="BLAS threads of the numpy backends, and of numpy's loss over a large vocabulary (default:"
                        " %(default)s). At this model size one thread is"
                        " as fast as two on a quiet machine and several times faster on a busy one")
    p.add_argument("--dtype", choices=("float32", "float64"), default=None,
                   help="floating-point type of the weights and of Adam's moments (default: float32 for numpy;"
                        " the python backend computes in float64 only)")
    p.add_argument("--steps", type=int, default=12000, metavar="N",
                   help="optimiser steps in the whole run (default: %(default)s)")
    p.add_argument("--stop-at", type=int, default=None, metavar="STEP",
                   help="stop after this step, with the learning-rate schedule of the whole run, and save: a later"
                        " --resume (with the same settings) finishes the run as if it had never stopped")
    p.add_argument("--batch", type=int, default=16, metavar="B", help="windows per step (default: %(default)s)")
    p.add_argument("--seq-len", type=int, default=None, metavar="T",
                   help="tokens per window, at most the model's positions (default: --max-len, 64)")
    p.add_argument("--lr", type=float, default=1e-2,
                   help="peak learning rate, reached at the end of the warm-up (default: %(default)s)")
    p.add_argument("--min-lr", type=float, default=1e-3,
                   help="learning rate at the last step, where the cosine decay ends (default: %(default)s)")
    p.add_argument("--warmup", type=int, default=None, metavar="N",
                   help="steps of linear warm-up from lr/N to lr (default: 100, or the whole run if it is shorter)")
    p.add_argument("--beta1", type=float, default=0.9,
                   help="Adam: decay rate of the running mean of the gradient (default: %(default)s)")
    p.add_argument("--beta2", type=float, default=0.99,
                   help="Adam: decay rate of the running mean of its square (default: %(default)s)")
    p.add_argument("--eps", type=float, default=1e-8,
                   help="Adam: added to the root of the second moment (default: %(default)s)")
    p.add_argument("--clip", type=float, default=1.0,
                   help="largest global gradient norm; longer gradients are scaled down to it; inf switches"
                        " clipping off (default: %(default)s)")
    p.add_argument("--seed", type=int, default=3,
                   help="seeds the initial weights (as model.init_params) and the batch sampler (default:"
                        " %(default)s)")
    p.add_argument("--val-stories", type=int, default=None, metavar="N",
                   help=f"the last N stories of corpus.txt are the validation set (default: {VAL_STORIES})")
    p.add_argument("--data", default=None, metavar="FILE",
                   help="learn this UTF-8 text file instead of the stories of corpus.txt: split by lines, or by"
                        " documents if blank lines separate it; no floor is known for it, so none is printed")
    p.add_argument("--tokenizer", default=None, metavar="PATH",
                   help="with --data: this tokenizer.json (its characters must cover FILE) instead of one trained"
                        " on FILE")
    p.add_argument("--vocab-size", type=int, default=None, metavar="N",
                   help=f"with --data: the tokens of the tokenizer trained on FILE, at least its number of different"
                        f" characters (default: {bpe.TEXT_VOCAB_SIZE})")
    p.add_argument("--val-fraction", type=float, default=None, metavar="F",
                   help=f"with --data: the share of FILE's lines or documents, its last ones, that validate"
                        f" (default: {VAL_FRACTION})")
    p.add_argument("--width", type=int, default=MODEL["d"], metavar="D",
                   help=f"the model's width d; its MLP has {HIDDEN_PER_WIDTH} x D hidden units (default: %(default)s)")
    p.add_argument("--max-len", type=int, default=MODEL["max_len"], metavar="L",
                   help="the most positions the model reads, and the rows of learned positions (default:"
                        " %(default)s)")
    p.add_argument("--positions", choices=SCHEMES, default=None,
                   help="how the model knows where a token is: learned (a trained row per position, default),"
                        " none (a bag of tokens), sinusoidal (a fixed sine/cosine table added to the embeddings) or"
                        " rope (q and k rotated by position inside attention); the python backend has learned and"
                        " none only")
    p.add_argument("--blocks", type=int, default=1, metavar="N",
                   help="transformer blocks, each with its own layer norms, attention and MLP (default: %(default)s,"
                        " model.py's model)")
    p.add_argument("--heads", type=int, default=1, metavar="N",
                   help="attention heads in each block, each of width 16 / N, so N must divide 16 (and leave an even"
                        " width with --positions rope) (default: %(default)s, model.py's model)")
    p.add_argument("--no-positions", action="store_true",
                   help="the same as --positions none: switch the learned position embeddings off (the model then"
                        " sees a bag of tokens)")
    p.add_argument("--eval-every", type=int, default=500, metavar="N",
                   help="steps between validation losses; also at the end (default: %(default)s)")
    p.add_argument("--ckpt-every", type=int, default=500, metavar="N",
                   help="steps between checkpoints; also at the end (default: %(default)s)")
    p.add_argument("--out", default=DEFAULT_OUT, metavar="PATH",
                   help="checkpoint file, replaced atomically at each save; its folder is created (default:"
                        " %(default)s)")
    p.add_argument("--resume", action="store_true",
                   help="continue the checkpoint at --out; pass the same settings as the run that wrote it")
    p.add_argument("--overwrite", action="store_true", help="start afresh even if --out already holds a checkpoint")
    p.add_argument("--quiet", action="store_true", help="no progress bar (the loss lines and the summary remain)")
    return p


def check_settings(parser, args):
    """Reject values that make no sense, with a message naming the value and what was expected (exit status 2).
    Under torchrun every rank checks the same settings, and rank 0 alone says what is wrong."""
    args.rank, args.world = int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))  # torchrun's
    error = parser.error if args.rank == 0 else (lambda message: sys.exit(quietly(2)))
    if args.no_positions and args.positions not in (None, "none"):
        error(f"--no-positions and --positions {args.positions} contradict each other; pick one")
    args.positions = "none" if args.no_positions else args.positions or "learned"
    for name in SIZES:
        if getattr(args, name) < 1:
            error(f"--{name} must be at least 1, got {getattr(args, name)}")
    if args.backend == "python" and (args.blocks, args.heads) != (1, 1):
        error(f"--blocks {args.blocks} --heads {args.heads}: the python backend is model.py, which has one"
              f" block and one head; use --backend numpy, numpy-plain or torch")
    if args.backend == "python" and args.positions not in ("learned", "none"):
        error(f"--positions {args.positions}: the python backend (model.py) has learned positions and none"
              f" only; use --backend numpy")
    if args.dtype is None:
        args.dtype = "float64" if args.backend == "python" else "float32"
    if args.backend == "python" and args.dtype != "float64":
        error(f"--dtype {args.dtype}: the python backend computes in Python floats, which are float64;"
              f" drop --dtype or use --backend numpy")
    if args.warmup is None:
        args.warmup = min(WARMUP, max(args.steps, 0))
    if args.seq_len is None:
        args.seq_len = args.max_len
    check_data_settings(error, args)
    at_least = {"threads": 1, "steps": 1, "batch": 1, "seq_len": 1, "warmup": 0, "seed": 0, "val_stories": 1,
                "eval_every": 1, "ckpt_every": 1, "width": 1, "max_len": 1, "vocab_size": 1}
    for name, low in at_least.items():
        if getattr(args, name) is not None and getattr(args, name) < low:
            error(f"--{name.replace('_', '-')} must be at least {low}, got {getattr(args, name)}")
    try:
        sizes.check_sizes(args.width, args.blocks, args.heads, args.positions)
    except ValueError as e:
        error(f"--heads {args.heads}: {e}")
    if args.seq_len > args.max_len:
        error(f"--seq-len {args.seq_len} is longer than the {args.max_len} positions the model has;"
              f" expected 1 to {args.max_len}")
    if args.stop_at is not None and not 1 <= args.stop_at <= args.steps:
        error(f"--stop-at {args.stop_at} is outside the run: expected a step from 1 to --steps ({args.steps})")
    if args.warmup > args.steps:
        error(f"--warmup {args.warmup} is longer than the run (--steps {args.steps})")
    if not (math.isfinite(args.lr) and args.lr > 0):
        error(f"--lr must be a positive number, got {args.lr}")
    if not (math.isfinite(args.min_lr) and 0 <= args.min_lr <= args.lr):
        error(f"--min-lr must be between 0 and --lr ({args.lr}), got {args.min_lr}")
    for name in ("beta1", "beta2"):
        if not 0 <= getattr(args, name) < 1:
            error(f"--{name} must be in [0, 1), got {getattr(args, name)}")
    if not (math.isfinite(args.eps) and args.eps > 0):
        error(f"--eps must be a positive number, got {args.eps}")
    if not args.clip > 0:  # also rejects nan
        error(f"--clip must be positive (inf switches clipping off), got {args.clip}")
    if args.resume and args.overwrite:
        error("--resume and --overwrite contradict each other; pick one")
    on_cpu = True
    if args.backend != "torch":
        if args.device is not None:
            error(f"--device {args.device} is for --backend torch; the {args.backend} backend runs on the CPU")
        if args.world > 1:
            error(f"torchrun started {args.world} processes, but only --backend torch trains data-parallel;"
                  f" add --backend torch, or run train.py without torchrun")
    else:
        args.device = args.device or "auto"
        machine.need("torch", "train.py --backend torch")
        import torch_train

        problem = torch_train.device_problem(args.device)
        if problem:
            error(problem)
        if args.batch % args.world:
            error(f"--batch {args.batch} cannot be shared by the {args.world} processes torchrun started: each"
                  f" takes the same number of windows, so the batch must be a multiple of {args.world}")
        on_cpu = torch_train.device_of(args).type == "cpu"
    if on_cpu:  # (a GPU's memory is the framework's to count)
        named = ["width", "max_len", "blocks", "heads", "batch", "seq_len"] + (["vocab_size"] if args.vocab_size else [])
        try:
            machine.check_memory(step_memory(args), " ".join(f"--{name.replace('_', '-')} {getattr(args, name)}"
                                                             for name in named))
        except ValueError as e:
            error(str(e))


def check_data_settings(error, args):
    """The settings of the data: --val-stories for the stories, the others with --data only; fill in defaults."""
    if args.data is None:
        given = [f"--{name.replace('_', '-')}" for name in ("tokenizer", "vocab_size", "val_fraction")
                 if getattr(args, name) is not None]
        if given:
            error(f"{' and '.join(given)} go with --data FILE; the stories of corpus.txt have the shipped"
                  f" tokenizer.json and --val-stories")
        args.val_stories = VAL_STORIES if args.val_stories is None else args.val_stories
        return
    if args.val_stories is not None:
        error(f"--val-stories {args.val_stories} counts the stories of corpus.txt; with --data the share of"
              f" the text that validates is --val-fraction")
    if args.tokenizer is not None and args.vocab_size is not None:
        error(f"--tokenizer {args.tokenizer} and --vocab-size {args.vocab_size} contradict each other: a given"
              f" tokenizer has its own size; pick one")
    if args.tokenizer is None and args.vocab_size is None:
        args.vocab_size = bpe.TEXT_VOCAB_SIZE
    args.val_fraction = VAL_FRACTION if args.val_fraction is None else args.val_fraction
    if not 0 < args.val_fraction < 1:
        error(f"--val-fraction must be between 0 and 1 (a share of the text), got {args.val_fraction}")


def training_settings(s):
    """The settings that decide the weights, as a checkpoint records them (a --resume must match them); blocks and
    heads only when not both 1, so that a one-block, one-head checkpoint is byte for byte what it was before models
    could grow.

    >>> parser = build_parser()
    >>> grown, lab = parser.parse_args(["--heads", "4"]), parser.parse_args([])
    >>> check_settings(parser, grown), check_settings(parser, lab)
    (None, None)
    >>> training_settings(grown)["heads"], "heads" in training_settings(lab)
    (4, False)
    """
    names = TRAINING_SETTINGS + (TEXT_SETTINGS if s.data is not None else ())
    training = {name: getattr(s, name) for name in names}
    if (s.blocks, s.heads) == (1, 1):
        for name in SIZES:
            del training[name]
    return training


def step_memory(s):
    """About the bytes a step of this run holds at once (sizes.step_bytes), before its data: the NumPy paths and
    torch hold numbers of --dtype, and validate up to VAL_BATCH windows or all --val-stories at once; model.py holds
    Python floats in lists (about 32 bytes each, the float and the list's pointer to it) and every row's gradients
    until their mean. The vocabulary is --vocab-size, or the stories' 96 (a --tokenizer's own is not read yet).

    >>> parser = build_parser()
    >>> lab = parser.parse_args([])
    >>> check_settings(parser, lab)
    >>> f"{step_memory(lab) / 2**20:.0f} MiB", f"{step_memory(SimpleNamespace(**{**vars(lab), 'width': 10**5})):.1e}"
    ('87 MiB', '2.2e+12')
    """
    vocab, d, hidden = s.vocab_size or bpe.VOCAB_SIZE, s.width, HIDDEN_PER_WIDTH * s.width
    if s.backend == "python":
        n = sizes.parameter_count(vocab, d, hidden, s.max_len)
        return 32 * ((4 + s.batch) * n + 2 * s.seq_len * sizes.activations_per_token(vocab, d, hidden, 1, 1,
                                                                                        s.seq_len))
    rows = max(s.batch, VAL_BATCH if s.data is not None else s.val_stories)  # (rows, T) the most at once
    return sizes.step_bytes(vocab, d, hidden, s.max_len, s.blocks, s.heads, rows, s.seq_len,
                            4 if s.dtype == "float32" else 8)


def model_size(s):
    """The model's sizes besides its vocabulary, from --width and --max-len.

    >>> model_size(SimpleNamespace(width=16, max_len=64)) == MODEL
    True
    """
    return {"d": s.width, "hidden": HIDDEN_PER_WIDTH * s.width, "max_len": s.max_len}


# ----------------------------------------------------------------------------------------------------------------
# Data: a split by whole stories, training windows, validation stories


def load_data(tok, val_stories, seq_len, max_len=MODEL["max_len"]):
    """(training token stream, validation stories as texts, validation stories as token lists).

    Each validation story's tokens are the newline before it, the story, and its newline: the model reads the first
    len - 1 and predicts the last len - 1.
    """
    stories = CORPUS_FILE.read_text(encoding="utf-8").splitlines()
    if val_stories >= len(stories):
        raise ValueError(f"--val-stories {val_stories} leaves no training stories: the corpus has {len(stories)};"
                         f" expected fewer than {len(stories)}")
    train, val = stories[:-val_stories], stories[-val_stories:]
    stream = tok.encode("".join(s + "\n" for s in train))  # (n,) one long list of token IDs
    if len(stream) <= seq_len:
        raise ValueError(f"the training text has {len(stream)} tokens, too few for windows of {seq_len} + 1")
    newline = tok.encode("\n")
    val_ids = [newline + tok.encode(s + "\n") for s in val]
    longest = max(len(ids) - 1 for ids in val_ids)
    if longest > max_len:
        raise ValueError(f"a validation story needs {longest} positions, more than the model's {max_len}")
    return stream, val, val_ids


# ----------------------------------------------------------------------------------------------------------------
# Data of your own (--data): a split by lines or documents, validation windows, a baseline for scale


def split_text(text, fraction):
    """(cut, unit, units, held): the text splits at cut into training text[:cut] and validation text[cut:], whole
    units each. unit is "document" when a blank line (nothing, or only spaces and tabs) stands between two lines of
    text, and the units are the blocks between blank lines; otherwise "line", and the units are the lines. The last
    held = max(1, round(fraction * units)) units validate (Python's round: halves to even), and at least one unit is
    left to train on.

    >>> split_text("one\\ntwo\\nthree\\nfour\\n", 0.25)
    (14, 'line', 4, 1)
    >>> split_text("a b\\nc\\n\\nd e\\n\\n\\nf\\n", 0.5)
    (7, 'document', 3, 2)
    """
    starts, offset, after_blank = [], 0, False  # starts: (offset, follows a blank line) of each line of text
    for line in text.split("\n"):
        if line.strip(" \t"):
            starts.append((offset, after_blank and bool(starts)))
            after_blank = False
        else:
            after_blank = True
        offset += len(line) + 1
    documents = any(blank for _, blank in starts)
    if documents:  # a document starts at the first line of text and after each blank line
        starts = starts[:1] + [start for start in starts[1:] if start[1]]
    unit = "document" if documents else "line"
    if len(starts) < 2:
        raise ValueError(f"it has {len(starts)} {unit} of text: nothing to hold out for validation; expected at least"
                         f" 2 lines, or 2 documents between blank lines")
    held = min(max(1, round(fraction * len(starts))), len(starts) - 1)
    return starts[len(starts) - held][0], unit, len(starts), held


def windows(ids, length):
    """Consecutive windows of up to length + 1 IDs that overlap by one, over a list of IDs: read in them, every ID
    after the first is predicted exactly once, from at most length IDs before it.

    >>> windows([1, 2, 3, 4, 5, 6], 2)
    [[1, 2, 3], [3, 4, 5], [5, 6]]
    """
    return [ids[i:i + length + 1] for i in range(0, len(ids) - 1, length)]


def unigram_loss(train_ids, predicted, vocab):
    """The mean -log p of the predicted IDs under the training IDs' frequencies, each count plus one (so that a token
    the training text lacks still has a probability): what a model that ignores the context would score.

    >>> round(unigram_loss([0, 0, 1], [0, 1], 3), 4)  # p = 3/6 and 2/6
    0.8959
    """
    counts = Counter(train_ids)
    total = len(train_ids) + vocab
    return fsum(-math.log((counts[i] + 1) / total) for i in predicted) / len(predicted)


def draw_starts(rng, stream_len, seq_len, batch):
    """The start of each of batch windows of seq_len + 1 tokens, drawn uniformly with rng.

    >>> import random
    >>> draw_starts(random.Random(0), 100, 10, 3)
    [49, 53, 5]
    """
    return [rng.randrange(stream_len - seq_len) for _ in range(batch)]


def learning_rate(step, s):
    """The learning rate of step (0-based): linear warm-up to s.lr, then a cosine down to s.min_lr at the last step.

    >>> s = SimpleNamespace(lr=1.0, min_lr=0.1, warmup=10, steps=111)
    >>> learning_rate(0, s), learning_rate(9, s), learning_rate(60, s), learning_rate(110, s)
    (0.1, 1.0, 0.55, 0.1)
    """
    if step < s.warmup:
        return s.lr * (step + 1) / s.warmup
    progress = (step - s.warmup) / max(1, s.steps - 1 - s.warmup)  # 0 after the warm-up, 1 at the last step
    return s.min_lr + 0.5 * (s.lr - s.min_lr) * (1.0 + math.cos(math.pi * progress))


# ----------------------------------------------------------------------------------------------------------------
# Tensors: NumPy arrays, torch tensors, or model.py's nested lists of floats, and what the loop does to each


def each(fn, *tensors):
    """fn applied to matching tensors: to arrays and torch tensors whole (their operators loop), to nested lists
    number by number.

    >>> each(lambda a, b: a + 2 * b, [[1.0, 2.0]], [[3.0, 4.0]])
    [[7.0, 10.0]]
    """
    if isinstance(tensors[0], list):
        return [each(fn, *parts) for parts in zip(*tensors)]
    return fn(*tensors)


def squares(t):
    """The sum of the squares of a tensor's numbers (fsum over a nested list; a dot product of an array or a torch
    tensor with itself, which for an array is BLAS's dot, the same bits as numpy.vdot).

    >>> squares([[3.0], [4.0]])
    25.0
    """
    if isinstance(t, list):
        return fsum(squares(x) for x in t)
    if isinstance(t, float):
        return t * t
    return float(t.ravel() @ t.ravel())


def root(x):
    """The square root of a float, or of each number of an array (`x ** 0.5` is NumPy's sqrt, bit for bit).

    >>> root(2.25)
    1.5
    """
    return math.sqrt(x) if isinstance(x, float) else x ** 0.5


def zeros_like(t):
    """A tensor of zeros shaped and typed like t.

    >>> zeros_like([[1.5, -2.0]])
    [[0.0, 0.0]]
    """
    return each(lambda x: x - x, t)  # +0.0 for every finite number, in floats, arrays and tensors alike


def finite(t):
    """Whether every number of a tensor is finite.

    >>> finite([[1.0, float("inf")]])
    False
    """
    if isinstance(t, list):
        return all(finite(x) for x in t)
    if isinstance(t, float):
        return math.isfinite(t)
    return bool(abs(t).max() < math.inf)  # NaN is not below infinity either


# ----------------------------------------------------------------------------------------------------------------
# The model files behind one interface: init(seed) -> params; loss_and_grads(params, ids, targets) -> (mean loss,
# gradients); loss(params, ids, targets) -> mean loss. ids and targets: B rows of T token IDs.


def python_loss_and_grads(params, ids, targets, positions):
    """model.py reads one sequence at a time: the mean of the B rows' losses and of their gradients, which is the
    mean over all B * T positions that the NumPy files compute, since every row has T positions."""
    rows = []
    for x, y in zip(ids, targets):
        logits, cache = model.forward(params, x, positions == "learned")  # (T, V)
        loss, dlogits = model.loss_and_dlogits(logits, y)
        rows.append((loss, model.backward(params, cache, dlogits)))
    B = len(rows)
    grads = {name: each(lambda *g: fsum(g) / B, *(row_grads[name] for _, row_grads in rows)) for name in params}
    return fsum(loss for loss, _ in rows) / B, grads


def python_loss(params, ids, targets, positions):
    """The mean loss over the B rows, with model.py."""
    return fsum(model.sequence_loss(params, x, y, positions == "learned") for x, y in zip(ids, targets)) / len(ids)


def model_functions(s, vocab):
    """(init, loss_and_grads, loss) of the model file --backend names, for this run's settings.

    numpy (the default) is numpy_fast.py, whose Workspace holds every array of a step (its gradients live there
    until the next step); numpy-plain is numpy_model.py, the plain mirror; both grow (s.blocks, s.heads). python is
    model.py itself; torch is torch_model.py through torch_train.py, in one process or one rank of a data-parallel
    run.
    """
    shape = (vocab, *model_size(s).values())  # (V, d, hidden, max_len)
    if s.backend == "torch":
        import torch_train

        return torch_train.model_functions(s, shape)
    if s.backend == "python":
        return (partial(model.init_params, *shape), partial(python_loss_and_grads, positions=s.positions),
                partial(python_loss, positions=s.positions))
    machine.set_blas_threads(s.threads)  # read once, when NumPy is first imported: here
    import numpy as np

    import numpy_fast
    import numpy_model

    init = partial(numpy_model.init_params, *shape, dtype=np.dtype(s.dtype), blocks=s.blocks)
    if s.backend == "numpy-plain":
        return (init, partial(numpy_model.loss_and_grads, positions=s.positions, heads=s.heads),
                partial(numpy_model.sequence_loss, positions=s.positions, heads=s.heads))
    workspace = numpy_fast.Workspace(init(0), s.batch, s.seq_len, s.positions, s.heads, s.threads)  # (shapes, dtype)
    return init, workspace.loss_and_grads, partial(numpy_fast.sequence_loss, positions=s.positions, heads=s.heads)


def story_nats(loss, params, stories, most=None):
    """Total -log p (a float) of predicting tokens 1.. of each story from the ones before; stories of equal length
    go through the model as one batch (of at most `most` stories, when given)."""
    total = []
    for n in sorted({len(ids) for ids in stories}):
        group = [ids for ids in stories if len(ids) == n]  # (b, n)
        for part in (group[i:i + most] for i in range(0, len(group), most)) if most else [group]:
            total.append(loss(params, [ids[:-1] for ids in part], [ids[1:] for ids in part]) * (len(part) * (n - 1)))
    return fsum(total)


# ----------------------------------------------------------------------------------------------------------------
# Checkpoints: the tensors of a state, and a state from tensors


def tensors_of(params, dtype):
    """{name: (safetensors dtype, shape, flat values)} of a dict of tensors, bit for bit.

    >>> tensors_of({"b": [0.5, 1.5]}, "float64")
    {'b': ('F64', (2,), [0.5, 1.5])}
    """
    out = {}
    for name, t in params.items():
        if isinstance(t, list):  # model.py's nested lists of Python floats
            out[name] = ("F64", model.shape(t), checkpoint.flat(t))
        else:
            if hasattr(t, "detach"):  # a torch tensor, on any device
                t = t.detach().cpu().numpy()
            st = {"float32": "F32", "float64": "F64"}[dtype]
            values = array.array(checkpoint.DTYPES[st])
            values.frombytes(t.astype(dtype, copy=False).tobytes())
            out[name] = (st, t.shape, values)
    return out


def from_tensors(tensors, s):
    """A dict of tensors of s.backend from {name: (dtype, shape, flat values)}, bit for bit."""
    if s.backend == "python":
        return {name: checkpoint.nested([float(x) for x in values], shape)
                for name, (_, shape, values) in tensors.items()}
    import numpy as np

    st = {"float32": "F32", "float64": "F64"}[s.dtype]
    for name, (got, _, _) in tensors.items():
        if got != st:
            raise ValueError(f"tensor {name!r} is {got}, but this run computes in {s.dtype} ({st})")
    arrays = {name: np.frombuffer(values, dtype=s.dtype).reshape(shape).copy()
              for name, (_, shape, values) in tensors.items()}
    if s.backend == "torch":
        import torch_train

        return torch_train.from_arrays(arrays, s)
    return arrays


# ----------------------------------------------------------------------------------------------------------------
# Progress on stderr


def rate(tokens_per_s):
    """Tokens per second at their scale: thousands as k above 10,000, every token below.

    >>> rate(678_300.0), rate(1_049.6)
    ('678k', '1,050')
    """
    return f"{tokens_per_s / 1000:,.0f}k" if tokens_per_s >= 10_000 else f"{tokens_per_s:,.0f}"


def progress(step, total, loss, tokens_per_s, started, final=False):
    """One progress-bar line on stderr, redrawn in place on a terminal, printed every 10% otherwise."""
    width = 24
    filled = width * step // total
    eta = (time.perf_counter() - started) / max(step, 1) * (total - step)
    line = (f"step {step:>{len(str(total))}}/{total} [{'#' * filled}{'.' * (width - filled)}] loss {loss:.4f}"
            f" | {rate(tokens_per_s)} tok/s | eta {eta:4.0f}s")
    if sys.stderr.isatty():
        print("\r" + line, end="\n" if final else "", file=sys.stderr, flush=True)
    elif final or step % max(1, total // 10) == 0:
        print(line, file=sys.stderr, flush=True)


# ----------------------------------------------------------------------------------------------------------------
# The optimiser, a fresh start, a resumed one


def adam(state, grads, lr, s):
    """One Adam step on every parameter of state, with bias correction: step number state["step"] + 1. The one
    optimiser of every backend (its formulas applied to arrays whole, or number by number to nested lists)."""
    t = state["step"] + 1
    c1, c2 = 1.0 - s.beta1 ** t, 1.0 - s.beta2 ** t
    params, m, v = state["params"], state["m"], state["v"]
    for name, g in grads.items():
        m[name] = each(lambda m, g: s.beta1 * m + (1.0 - s.beta1) * g, m[name], g)
        v[name] = each(lambda v, g: s.beta2 * v + (1.0 - s.beta2) * (g * g), v[name], g)
        params[name] = each(lambda p, m, v: p - lr * (m / c1) / (root(v / c2) + s.eps), params[name], m[name],
                            v[name])


def fresh_state(init, seed):
    """The state before the first step: the reference's initial weights, zero moments, a seeded batch sampler."""
    params = init(seed)
    return {"params": params, "m": {name: zeros_like(t) for name, t in params.items()},
            "v": {name: zeros_like(t) for name, t in params.items()}, "rng": random.Random(seed), "step": 0}


def resumed_state(s, path, training, config, data):
    """The state saved at path; a ValueError says why it cannot be resumed (bad file, other data, other tokenizer,
    other model size, other settings)."""
    ckpt = checkpoint.load_checkpoint(path, data.tokenizer_sha)  # (main checked first that it learned this text)
    if ckpt["metadata"].get("corpus_sha256") != data.metadata.get("corpus_sha256"):
        raise ValueError(f"{path} was trained on another corpus.txt; it cannot be resumed on this one")
    other = {key: (ckpt["config"][key], config[key]) for key in ("d", "max_len") if ckpt["config"][key] != config[key]}
    if other:
        raise ValueError(f"{path} is a model of another size: " + "; ".join(
            f"--{'width' if key == 'd' else 'max-len'} {there} there, {here} here" for key, (there, here) in
            other.items()) + ". HINT: to resume, pass the settings of the run you resume")
    there = {**dict.fromkeys(SIZES, 1), **ckpt["training"]}  # (a one-block, one-head file records no sizes)
    if isinstance(there.get("positions"), bool):  # written before the schemes, when --no-positions made it false
        there["positions"] = "learned" if there["positions"] else "none"
    here = {**dict.fromkeys(SIZES, 1), **training}
    differ = [f"--{k.replace('_', '-')} {there.get(k)!r} there, {v!r} here"
              for k, v in here.items() if there.get(k) != v and k not in HOW_RUN]
    if differ:
        raise ValueError(f"{path} was made with other settings: {'; '.join(differ)}. HINT: to resume, pass the"
                         f" settings of the run you resume")
    m, v = (from_tensors(moment, s) for moment in ckpt["moments"])
    return {"params": from_tensors(ckpt["params"], s), "m": m, "v": v, "rng": ckpt["rng"], "step": ckpt["step"]}


def other_text(s, path, metadata, text_sha256):
    """Raise a ValueError if the checkpoint at path (its metadata) learned another text than this run reads: the
    stories or --data FILE, and which FILE (text_sha256: the SHA-256 of the bytes this run read from it)."""
    there = metadata.get("text")  # the --data FILE it learned, as it was given
    if there is None and s.data is not None:
        raise ValueError(f"{path} learned the stories of corpus.txt; resume it without --data")
    if there is not None and s.data is None:
        raise ValueError(f"{path} learned --data {there}; resume it with the same --data")
    if there is not None and metadata.get("text_sha256") != text_sha256:
        raise ValueError(f"{path} learned another text than {s.data} ({there} as it was then); it cannot be resumed"
                         f" on this one")


def read_data(path):
    """(text, SHA-256 of its bytes) of --data FILE from one read, with bpe.read_text's checks and bound: the hash is
    of the very bytes trained on, and a FIFO or a device is refused rather than read twice or without end."""
    raw = read_whole(path, "a UTF-8 text file", bpe.MOST_TEXT)
    return bpe.decode_text(raw, path), hashlib.sha256(raw).hexdigest()


def read_inputs(s, out):
    """What the run reads, once each: --data FILE (if given) and, with --resume, the checkpoint at out, which must
    have learned that text (its tokenizer is then the run's, unless --tokenizer names one, which must be the same);
    then prepare's data. A ValueError says what is wrong."""
    text = read_data(s.data) if s.data is not None else None
    carried = None
    if s.resume:
        metadata = checkpoint.load_checkpoint(out)["metadata"]
        other_text(s, out, metadata, text and text[1])
        carried = checkpoint.carried_tokenizer(metadata, out) if s.tokenizer is None else None
    return prepare(s, carried, text)


# ----------------------------------------------------------------------------------------------------------------
# The data a run reads, its backend, and the loop


def prepare(s, carried=None, text=None):
    """What a run reads besides its settings: the tokenizer, the training stream (a NumPy array for the numpy
    backends, a list for python), the validation sequences, the floors (None for a text of your own), and the
    metadata its checkpoints carry about the data. carried: with --data, the tokenizer to use instead of --tokenizer
    or a fresh training (the one a resumed checkpoint carries); text: --data FILE as read_data read it (read here
    when not given). A ValueError says what is wrong with the data or with --val-stories / --seq-len."""
    if s.data is None:
        tok = bpe.Tokenizer.load(TOKENIZER_FILE)
        stream, val_texts, val_ids = load_data(tok, s.val_stories, s.seq_len, s.max_len)
        corpus_floor = floor.load_floor(HERE)
        val_floor_nats, val_tokens = floor.story_floor(val_texts, tok)
        data = SimpleNamespace(tok=tok, stream=stream, val_texts=val_texts, val_ids=val_ids, val_tokens=val_tokens,
                               val_batch=None, val_floor=val_floor_nats / val_tokens, corpus_floor=corpus_floor,
                               tokenizer_sha=checkpoint.sha256_file(TOKENIZER_FILE),
                               metadata={"corpus_sha256": checkpoint.sha256_file(CORPUS_FILE),
                                         "floor_nats_per_token": repr(corpus_floor),
                                         "val_floor_nats_per_token": repr(val_floor_nats / val_tokens)})
    else:
        data = prepare_text(s, carried, *(text or read_data(s.data)))
    data.vocab = len(data.tok.vocab)
    if s.backend != "python":
        machine.set_blas_threads(s.threads)  # read once, when NumPy is first imported: here
        import numpy

        data.stream = numpy.array(data.stream)  # (n,) its slices are the rows of a batch
    return data


def prepare_text(s, carried, text, text_sha256):
    """prepare for --data, given the file's text and the SHA-256 of its bytes: split it, get its tokenizer, and
    encode both parts."""
    try:
        cut, unit, units, held = split_text(text, s.val_fraction)
    except ValueError as e:
        raise ValueError(f"{s.data}: {e}") from None
    if carried is not None:
        tok, how = carried, "the one the checkpoint carries"
    elif s.tokenizer is not None:
        tok, how = bpe.Tokenizer.load(s.tokenizer), f"{s.tokenizer}"
    else:
        tok, how = bpe.train_on_text(text, s.vocab_size, s.data), f"trained on {s.data}"
    bad = next((i for i, ch in enumerate(text) if ch not in tok.ids), None)
    if bad is not None:
        line = text.count("\n", 0, bad) + 1
        raise ValueError(f"{s.data}, line {line}: the character {text[bad]!r} is not in the tokenizer ({how}), which"
                         f" knows {len(tok.alphabet)} characters; leave out --tokenizer to train one on the file")
    stream, val_stream = tok.encode(text[:cut]), tok.encode(text[cut:])  # (n,) and (m,) token IDs
    if len(stream) <= s.seq_len:
        raise ValueError(f"{s.data}: its training text is {len(stream)} tokens, fewer than one window of --seq-len"
                         f" {s.seq_len} + 1; expected a longer text, or a shorter --seq-len")
    if len(val_stream) < 2:
        raise ValueError(f"{s.data}: its validation text ({held} {unit}) is {len(val_stream)} token, nothing to"
                         f" predict; expected a larger --val-fraction")
    val_ids = windows(val_stream, s.seq_len)
    tokenizer_json = tok.to_json()
    documents = " (the blocks between blank lines)" if unit == "document" else ""
    about = [(f"{s.data}: {len(text):,} characters in {units:,} {unit}s{documents}; the last {held:,} validate"
              f" ({(len(text) - cut) / len(text):.1%} of the characters)"),
             (f"tokenizer: {how}, {len(tok.vocab)} tokens ({len(tok.alphabet)} characters + {len(tok.merges)}"
              f" merges), {len(text) / (len(stream) + len(val_stream)):.2f} characters per token")]
    return SimpleNamespace(
        tok=tok, stream=stream, val_ids=val_ids, val_tokens=len(val_stream) - 1, val_batch=VAL_BATCH,
        val_floor=None, corpus_floor=None, tokenizer_sha=checkpoint.sha256_text(tokenizer_json), about=about,
        val_chars=len(text) - cut - len(tok.vocab[val_stream[0]]),  # the characters of the predicted tokens
        unigram=unigram_loss(stream, val_stream[1:], len(tok.vocab)),
        metadata={"text": str(s.data), "text_sha256": text_sha256, "split": unit,
                  checkpoint.TOKENIZER_KEY: tokenizer_json})


def versus_floor(val_loss, val_floor, gap=True):
    """The end of a loss line: the floor and the gap to it; nothing for a text of your own, which has no floor.

    >>> versus_floor(0.3306, 0.3074), versus_floor(2.5, None)
    (' | floor 0.3074 | gap +0.0232', '')
    """
    if val_floor is None:
        return ""
    return f" | floor {val_floor:.4f}" + (f" | gap {val_loss - val_floor:+.4f}" if gap else "")


def step(state, ids, targets, loss_and_grads, s):
    """One optimiser step on B rows of T IDs and their targets: the loss and its gradient, the gradient's global
    norm, clipping, Adam. Returns (loss, norm); when either is not finite the weights and moments stay as they were
    and state["step"] does not advance."""
    loss, grads = loss_and_grads(state["params"], ids, targets)
    norm = math.sqrt(fsum(squares(g) for g in grads.values()))  # the length of the whole gradient
    if math.isfinite(loss) and math.isfinite(norm):
        if norm > s.clip:
            grads = {name: each(lambda g: g * (s.clip / norm), g) for name, g in grads.items()}
        adam(state, grads, learning_rate(state["step"], s), s)
        state["step"] += 1
    return loss, norm


def fit(state, data, s, functions, save=None, report=print):
    """Take steps until state["step"] is s.steps (or s.stop_at, to stop a run early on its own schedule), with the
    model's (init, loss_and_grads, loss) functions. The validation loss at step 0 (on a fresh state), every
    s.eval_every steps and at the end goes to report as one line and into the history; every s.ckpt_every steps
    and at the end, save(val_loss or None) is called (if given) once the weights are checked to be finite.

    Returns SimpleNamespace(history, failure, val_loss, train_seconds): history a list of {"step", "train", "val"}
    (train: the mean training loss since the evaluation before, None at step 0); failure None, or (reason, hint)
    when the run stopped early because the loss or the weights stopped being finite (state keeps the last good
    step). A KeyboardInterrupt passes through.
    """
    _, loss_and_grads, loss_fn = functions
    first, last = state["step"], s.steps if s.stop_at is None else s.stop_at
    history, failure, val_loss, recent, train_seconds = [], None, None, [], 0.0

    def evaluate():
        return story_nats(loss_fn, state["params"], data.val_ids, data.val_batch) / data.val_tokens

    if first == 0:
        val_loss = evaluate()
        history.append({"step": 0, "train": None, "val": val_loss})
        report(f"step {0:>6} | val {val_loss:.4f}" + versus_floor(val_loss, data.val_floor, gap=False))
    started = time.perf_counter()
    newline = sys.stderr.isatty() and not s.quiet  # a progress bar drawn in place must end before a loss line
    while state["step"] < last:
        # ---- one step on B windows of T + 1 tokens drawn from the training stream
        t0 = time.perf_counter()
        starts = draw_starts(state["rng"], len(data.stream), s.seq_len, s.batch)
        share = s.batch // s.world  # under torchrun, each rank takes its own share of the B windows, in order
        starts = starts[s.rank * share:(s.rank + 1) * share]
        ids = [data.stream[i:i + s.seq_len] for i in starts]  # (B, T)
        targets = [data.stream[i + 1:i + s.seq_len + 1] for i in starts]  # (B, T) the token after each one
        loss, norm = step(state, ids, targets, loss_and_grads, s)
        train_seconds += time.perf_counter() - t0
        if not (math.isfinite(loss) and math.isfinite(norm)):
            failure = (f"error: step {state['step'] + 1}: the loss is {loss} and the gradient norm {norm}: the run"
                       f" diverged and stops", "HINT: a lower --lr")
            break
        done = state["step"]

        # ---- progress, validation, checkpoint
        recent.append(loss)
        if not s.quiet:
            progress(done, s.steps, loss, (done - first) * s.batch * s.seq_len / train_seconds, started,
                     final=done == last)
        evaluated = done % s.eval_every == 0 or done == last
        if evaluated:
            val_loss = evaluate()
            train_loss = fsum(recent) / len(recent)
            history.append({"step": done, "train": train_loss, "val": val_loss})
            if newline and done != s.steps:
                print(file=sys.stderr)
            report(f"step {done:>6} | train {train_loss:.4f} | val {val_loss:.4f}"
                   + versus_floor(val_loss, data.val_floor))
            recent = []
        if save is not None and (done % s.ckpt_every == 0 or done == last):
            if not all(finite(t) for t in state["params"].values()):
                failure = (f"error: step {done}: the weights are no longer finite and the run stops",
                           "HINT: a lower --lr")
                break
            save(val_loss if evaluated else None)
    return SimpleNamespace(history=history, failure=failure, val_loss=val_loss, train_seconds=train_seconds)


def train_model(argv, data=None, report=None, until=None):
    """Train in this process with train.py's settings (argv as on the command line; --out, --resume and the
    checkpoint settings are ignored, nothing is written) and return (params, history, data): the trained weights
    (a dict of NumPy arrays for the numpy backends), fit's history, and prepare's data (pass it back in to skip
    reading the corpus again; it must come from the same --backend, --val-stories and --seq-len). report: a function
    that takes each loss line (default: none are shown). until: stop after that many steps, with the learning-rate
    schedule of the whole run (so the weights there are the full run's at that step). A bad setting exits as on the
    command line; a run that diverges is a RuntimeError.

    >>> params, history, data = train_model(["--steps", "3", "--batch", "2", "--seq-len", "8", "--eval-every", "2",
    ...                                      "--quiet"])
    >>> [h["step"] for h in history], params["pos_emb"].shape, data.vocab
    ([0, 2, 3], (64, 16), 96)
    """
    parser = build_parser()
    s = parser.parse_args([*argv, "--quiet"])
    check_settings(parser, s)
    data = prepare(s) if data is None else data
    functions = model_functions(s, data.vocab)
    state = fresh_state(functions[0], s.seed)
    s.stop_at = until
    result = fit(state, data, s, functions, report=report or (lambda line: None))
    if result.failure is not None:
        raise RuntimeError(result.failure[0])
    return state["params"], result.history, data


# ----------------------------------------------------------------------------------------------------------------
# The run


def path_problem(s):
    """Why --out (as typed) cannot name this run's checkpoint, in one line, judged from the path alone before
    anything is made on disk; None if it can. It must name a file (not a folder, not a path through a file), and
    no input of the run (--data, --tokenizer) may be one of the files it writes: the checkpoint, its lock or its
    tokenizer copy.

    >>> print(path_problem(SimpleNamespace(out="runs/", data=None, tokenizer=None)))
    --out runs/ ends with a slash, so it names a folder; expected a checkpoint file such as runs/ckpt.safetensors
    >>> print(path_problem(SimpleNamespace(out="n.safetensors", data="n.safetensors.tokenizer.json", tokenizer=None)))
    --data n.safetensors.tokenizer.json is where this run writes the copy of its tokenizer; choose another --out
    """
    out, path = s.out, Path(s.out)
    if out.endswith(("/", os.sep)):
        return (f"--out {out} ends with a slash, so it names a folder; expected a checkpoint file such as"
                f" {path / 'ckpt.safetensors'}")
    for folder in reversed(path.parents):
        if folder.exists() and not folder.is_dir():
            return f"--out {out}: {folder} is a file, not a folder"
    if path.is_dir():
        return f"--out {out} is a folder; expected a checkpoint file such as {path / 'ckpt.safetensors'}"
    written = {"the checkpoint": path, "the lock that owns it": path.with_name(path.name + ".lock"),
               "the copy of its tokenizer": tokenizer_beside(path)}
    for flag, given in (("--data", s.data), ("--tokenizer", s.tokenizer)):
        for what, target in written.items() if given is not None else ():
            if same_file(given, target) and not (flag == "--tokenizer" and what == "the copy of its tokenizer"):
                return f"{flag} {given} is where this run writes {what}; choose another --out"
    return None


def same_file(a, b):
    """Whether paths a and b name the same file: the same file on disk when both exist, else the same path once
    resolved (links followed).

    >>> same_file("out/../train.py", "train.py"), same_file("a.txt", "b.txt")
    (True, False)
    """
    a, b = Path(a), Path(b)
    if a.exists() and b.exists():
        return os.path.samefile(a, b)
    return a.resolve() == b.resolve()


def disk_problem(s, out):
    """Why the files at out cannot take this run's checkpoint, in one line, judged while the run owns out (so that
    no other run can change them between this look and the run's first save); None if they can. With --resume a
    checkpoint must be there; without it, a checkpoint there is replaced only with --overwrite, and a file that is
    not a checkpoint never is. With --data the copy of the tokenizer beside it follows the same rules: a
    tokenizer.json there is replaced only by a run that resumes or overwrites, and anything else never is."""
    copy = tokenizer_beside(out)
    its_input = s.tokenizer is not None and copy.exists() and same_file(s.tokenizer, copy)  # rewritten as it is
    if s.data is not None and copy.exists() and not its_input:
        try:
            bpe.Tokenizer.load(copy)
        except ValueError as e:
            return (f"{copy}, where this run keeps the copy of its tokenizer, exists but is not a tokenizer.json"
                    f" ({e}); it is never replaced: choose another --out, or remove the file yourself")
        if not (s.resume or s.overwrite):
            return (f"{copy} already holds a tokenizer (the copy of an earlier run's); pass --overwrite to replace"
                    f" it with this run's, or another --out to keep it")
    if not out.exists():
        return f"cannot resume: there is no checkpoint at {s.out}; run without --resume to start one" if s.resume else None
    try:
        step = checkpoint.load_checkpoint(out)["step"]
    except ValueError as e:
        if s.resume:
            return f"cannot resume: {e}"
        return (f"--out {s.out} exists but is not a checkpoint ({e}); it is never replaced: choose another --out, or"
                f" remove the file yourself")
    if not s.resume and not s.overwrite:
        return (f"--out {s.out} already holds a checkpoint (step {step}); pass --resume to continue it, --overwrite"
                f" to replace it, or another --out to keep it")
    return None


def quietly(status):
    """The exit status of a rank other than 0 that stops on a problem rank 0 also found: after a pause, because
    torchrun stops every rank as soon as one ends, and rank 0 is the one that says what is wrong."""
    time.sleep(3)
    return status


def main(argv=None):
    parser = build_parser()
    s = parser.parse_args(argv)
    check_settings(parser, s)
    if s.backend != "python":
        machine.set_blas_threads(s.threads)
        default = " (the default; --backend python needs nothing)" if s.backend == "numpy" else ""
        machine.need("numpy", f"train.py --backend {s.backend}{default}")
    out = Path(s.out)
    holder = f"pid {os.getpid()} on {platform.node()}, since {time.strftime('%Y-%m-%d %H:%M:%S')}: " + " ".join(
        ["train.py", *(sys.argv[1:] if argv is None else argv)])
    with ExitStack() as owned:
        if s.backend == "torch":  # under torchrun: join the other ranks; rank 0 alone owns --out
            import torch_train

            torch_train.start(s)
            owned.callback(torch_train.finish)
        data, problem = None, path_problem(s)
        if problem is None and s.rank == 0:
            try:  # owned first, so that what is on disk is judged by the run that will write there and no other
                owned.enter_context(hold(out, holder))  # released when the run ends, however it ends
            except ValueError as e:  # another run holds the path, or its folder cannot be made or written
                problem = f"--out: {e}"
        if problem is None:
            problem = disk_problem(s, out)
        if problem is None:
            try:  # everything about the data is checked before anything is written
                data = read_inputs(s, out)
            except ValueError as e:
                problem = f"{'cannot resume: ' if s.resume else ''}{e}"
        if s.backend == "torch":
            problem = torch_train.share(problem)  # rank 0's word: the lock on --out is rank 0's alone
        if problem is not None:
            if s.rank == 0:
                print(f"error: {problem}", file=sys.stderr)
            return 2 if s.rank == 0 else quietly(2)
        status = run(s, out, data)
        if s.backend == "torch" and status == 0:
            torch_train.together()
        return status if s.rank == 0 or status == 0 else quietly(status)


def tokenizer_beside(out):
    """Where a run on --data keeps a copy of its tokenizer: beside the checkpoint, its whole name and a suffix (as its
    lock file is named), so that no two checkpoints share one and no input of another name is mistaken for it.

    >>> tokenizer_beside(Path("out/notes.safetensors")).as_posix()
    'out/notes.safetensors.tokenizer.json'
    """
    return out.with_name(out.name + ".tokenizer.json")


def run(s, out, data):
    """The run of main, while it owns out: clean up, train, save, summarise; the exit status. Under torchrun every
    rank runs it; rank 0 alone prints, writes and cleans up."""
    training = training_settings(s)
    say = print if s.rank == 0 else (lambda *args, **kwargs: None)
    s.quiet = s.quiet or s.rank != 0

    # a save that a kill interrupted leaves its temporary file beside the checkpoint (never in its place)
    leftovers = sorted(out.parent.glob(glob.escape(out.name) + ".*.tmp")) if s.rank == 0 else []
    for path in leftovers:
        path.unlink()
    if leftovers:
        say(f"removed {len(leftovers)} temporary file(s) of an interrupted save beside {out}", file=sys.stderr)

    # use_positions: model.py's switch (whether the learned rows are added); positions: the scheme
    grown = {name: training[name] for name in SIZES if name in training}  # blocks and heads, for a grown model
    config = {"vocab": data.vocab, **model_size(s), **grown, "use_positions": s.positions == "learned",
              "positions": s.positions}

    # ---- the model's functions, and the state to start from
    functions = model_functions(s, data.vocab)
    if s.resume:
        try:
            state = resumed_state(s, out, training, config, data)
        except ValueError as e:
            say(f"error: cannot resume: {e}", file=sys.stderr)
            return 2
    else:
        state = fresh_state(functions[0], s.seed)
    first = state["step"]
    saved = first if s.resume else None  # the step the file at out holds, for the messages of a stopped run
    copied = s.data is None  # whether the copy of the tokenizer is beside the checkpoint (written at the first save)

    def save(val_loss):
        nonlocal saved, copied
        extra = dict(data.metadata)
        if val_loss is not None:
            extra["val_loss"] = repr(val_loss)
        moments = (tensors_of(state["m"], s.dtype), tensors_of(state["v"], s.dtype))
        checkpoint.save_checkpoint(out, tensors_of(state["params"], s.dtype), moments, state["step"], state["rng"],
                                   config, training, data.tokenizer_sha, extra)
        saved = state["step"]
        if not copied:  # the checkpoint carries its tokenizer; the copy beside it is for you
            write_atomic(tokenizer_beside(out), data.tok.to_json())
            copied = True

    if data.val_floor is not None:
        say(f"floor {data.corpus_floor:.4f} nats/token (corpus-entropy.json); {data.val_floor:.4f} on the"
            f" {len(data.val_ids)} validation stories; uniform guessing {math.log(data.vocab):.4f}")
    else:
        say("\n".join(data.about))
        say(f"no floor: nobody knows the entropy of this text. For scale, uniform guessing scores"
            f" {math.log(data.vocab):.4f} nats/token and the token frequencies alone {data.unigram:.4f}")
    if s.backend == "torch":
        import torch_train

        say(f"computing with {torch_train.describe(s)}")
    elif s.backend != "python":
        say(f"computing with {machine.blas(s.threads)}: the same run elsewhere gives other last bits (spread.py)")
    where = f", {sizes.describe(s.blocks, s.heads)}" if grown else ""
    say(f"{s.backend} {s.dtype}{where}, {len(data.stream):,} training tokens, {s.steps} steps of {s.batch} x"
        f" {s.seq_len} tokens, lr {s.lr:g} -> {s.min_lr:g}"
        + (f", positions {s.positions}" if s.positions != "learned" else "")
        + (f"; resuming {out} at step {first}" if s.resume else ""))

    # ---- the loop
    started = time.perf_counter()
    newline = "\n" if sys.stderr.isatty() and not s.quiet else ""  # ends a progress bar drawn in place

    def stopped(why, hint):
        kept = f"{out} keeps step {saved}" if saved is not None else f"this run wrote no checkpoint to {out}"
        say(f"{newline}{why}; {kept}. {hint}", file=sys.stderr)

    try:
        result = fit(state, data, s, functions, save=save if s.rank == 0 else None,
                     report=lambda line: say(line, flush=True))
    except KeyboardInterrupt:
        stopped(f"interrupted at step {state['step']}", "Continue with the same command plus --resume")
        return 130
    except OSError as e:  # a save that could not be written: a full disk, a folder made read-only meanwhile
        stopped(f"error: cannot write {e.filename or out} at step {state['step']} ({e.strerror or e})",
                "HINT: make room or fix the folder, then continue with the same command plus --resume")
        return 2
    if result.failure is not None:
        stopped(*result.failure)
        return 1

    # ---- summary
    val_loss = result.val_loss
    if val_loss is None:  # a resumed run that had nothing left to do
        val_loss = story_nats(functions[2], state["params"], data.val_ids, data.val_batch) / data.val_tokens
    elapsed = time.perf_counter() - started
    done, tokens = state["step"], (state["step"] - first) * s.batch * s.seq_len
    speed = f", {rate(tokens / result.train_seconds)} tokens/s" if result.train_seconds else ""
    against = (versus_floor(val_loss, data.val_floor) if data.val_floor is not None
               else f", {val_loss * data.val_tokens / data.val_chars:.4f} per character | no floor known")
    stopped_early = f" of {s.steps} (--stop-at; --resume finishes the run)" if done < s.steps else ""
    say(f"done: {done} steps{stopped_early} ({done - first} in this run, {tokens:,} tokens, {elapsed:.1f} s{speed})"
        f" | val {val_loss:.4f} nats/token{against} | {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
