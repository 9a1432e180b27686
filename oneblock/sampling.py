"""Sampling: text from a trained model, one token at a time (sample.py is the command line on it).

Each step feeds the context (a newline, the prompt, what was generated so far) to the model, takes the logits at
the last position, divides them by the temperature, keeps the top-k, and draws the next token from their softmax
with one seeded random.Random. The model was trained on max_len positions (and with learned positions has no row past
them), so once the context is longer only its last max_len tokens are fed, whatever the position scheme. Every
backend computes in float64 (a float32 checkpoint widens exactly), so they pick the same tokens (docs/training.md,
"Sampling"); the model's sizes are read from the checkpoint, and model.py runs one block and one head only.

    >>> generate(lambda ids: [0.0, 1.0, 0.5], [0], 4, 64, 0, 0, None)  # greedy: always the largest logit
    [1, 1, 1, 1]
"""

import math
import random  # noqa: F401  (choose's example)

import model
from oneblock import checkpoint
from oneblock.config import seed_switch

TOKEN_BYTES = 64  # memory a generated token takes: its ID in the context list, and its share of the printed text

# ----------------------------------------------------------------------------------------------------------------
# Choosing the next token


def choose(logits, temperature, top_k, rng):
    """The next token ID from one position's logits (a list of V floats).

    temperature 0 is greedy (the first of the largest logits); otherwise softmax(logits / temperature) over the
    top_k largest (0: all of them), drawn with rng.

    >>> choose([0.0, 3.0, 1.0], 0, 0, None)
    1
    >>> rng = random.Random(0)
    >>> [choose([0.0, 1.0, 0.5], 1.0, 2, rng) for _ in range(10)]  # token 0 is not in the top 2
    [2, 2, 1, 1, 1, 1, 2, 1, 1, 1]
    """
    if temperature == 0:
        return max(range(len(logits)), key=lambda i: (logits[i], -i))
    ranked = sorted(range(len(logits)), key=lambda i: (-logits[i], i))  # largest first, ties by ID
    kept = sorted(ranked[:top_k] if top_k else ranked)  # (k,) IDs, back in ID order
    top = logits[ranked[0]]
    weights = [math.exp((logits[i] - top) / temperature) for i in kept]  # (k,) softmax numerators
    u = rng.random() * math.fsum(weights)
    total = 0.0
    for i, w in zip(kept, weights):
        total += w
        if u < total:
            return i
    return kept[-1]  # u landed on the rounding error past the last cumulative sum


def generate(next_logits, context, n_tokens, max_len, temperature, top_k, rng):
    """n_tokens new IDs after context (a list of IDs); next_logits(ids) gives the last position's logits.

    >>> generate(lambda ids: [float(i == len(ids)) for i in range(4)], [0], 4, 2, 0, 0, None)  # (the window's length)
    [1, 2, 2, 2]
    """
    ids = list(context)
    for _ in range(n_tokens):
        window = ids[-max_len:]  # (<= L,) the model has max_len positions: crop to the most recent ones
        ids.append(choose(next_logits(window), temperature, top_k, rng))
    return ids[len(context):]


# ----------------------------------------------------------------------------------------------------------------
# Backends: a function from a list of IDs to the logits of its last position


def load_logits_fn(path, backend):
    """(next_logits, ckpt) for a checkpoint: next_logits(ids) -> list of V floats, computed in float64, by the model
    the checkpoint's ModelConfig (ckpt["config"]) describes."""
    ckpt = checkpoint.load_checkpoint(path)  # the checks: format, hash, shapes, finite values
    config = ckpt["config"]  # sizes, blocks, heads and position scheme (an older file's read as it meant them)
    if backend == "python":
        problem = config.seed_problem()
        if problem:
            raise ValueError(f"{path} {problem}; use --backend numpy or torch")
        params, switch = checkpoint.reference_params(ckpt), seed_switch(config)

        def next_logits(ids):
            return model.forward(params, ids, switch)[0][-1]
    elif backend == "numpy":
        from oneblock import numpy_model

        params = numpy_model.from_lists(checkpoint.reference_params(ckpt))  # float64

        def next_logits(ids):
            logits, _ = numpy_model.forward(params, ids, config)  # (T, V)
            return logits[-1].tolist()
    else:
        import safetensors.torch
        import torch

        from oneblock import torch_model

        state = safetensors.torch.load_file(str(path))  # every tensor of the file, as torch tensors
        params = torch_model.to_torch({name: state[name] for name in ckpt["params"]})  # float64

        def next_logits(ids):
            with torch.no_grad():
                logits, _ = torch_model.forward(params, torch_model.as_ids(ids), config)  # (1, T, V)
            return logits[0, -1].tolist()
    return next_logits, ckpt
