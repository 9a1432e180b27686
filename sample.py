"""Generate text from a trained checkpoint, one token at a time.

    python3 sample.py                                   # 160 tokens from the start of a line, temperature 1
    python3 sample.py --prompt "mia has a" --temperature 0     # greedy: always the most likely next token
    python3 sample.py --backend python                  # the same on model.py, standard library only
    python3 sample.py --backend torch                   # the same on torch_model.py, read by safetensors.torch

Each step feeds the context (a newline, the prompt, what was generated so far) to the model, takes the logits at
the last position, divides them by the temperature, keeps the top-k, and draws the next token from their softmax
with one seeded random.Random. The model was trained on 64 positions (and with learned positions has no row past
them), so once the context is longer only its last 64 tokens are fed, whatever the position scheme. Every backend
computes in float64 (a float32 checkpoint widens exactly), so they agree to about 1e-15 and, away from exact ties,
pick the same tokens. The model's sizes (blocks, heads, position scheme) are read from the checkpoint; a grown
model runs on the numpy and torch backends (model.py has one block and one head).

The tokens are those of the tokenizer the checkpoint was trained with: the one it carries (a model of your own text,
train.py --data), or the shipped tokenizer.json, which must be the one the checkpoint recorded.

A missing or bad checkpoint (checkpoint.py's checks), one the backend cannot run, a prompt the tokenizer cannot
read and a size that would not fit in memory each exit with status 2 and one line on stderr, "error: ...".
"""

import argparse
import math
import random
import sys
from pathlib import Path

import checkpoint
import model
from oneblock import machine
from oneblock import sizes

HERE = Path(__file__).resolve().parent
TOKENIZER_FILE = HERE / "tokenizer.json"
DEFAULT_CKPT = "out/ckpt.safetensors"  # where train.py writes by default
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

    >>> generate(lambda ids: [0.0, 0.0, float(len(ids))], [0], 3, 2, 0, 0, None)
    [2, 2, 2]
    """
    ids = list(context)
    for _ in range(n_tokens):
        window = ids[-max_len:]  # (<= L,) the model has max_len positions: crop to the most recent ones
        ids.append(choose(next_logits(window), temperature, top_k, rng))
    return ids[len(context):]


# ----------------------------------------------------------------------------------------------------------------
# Backends: a function from a list of IDs to the logits of its last position


def load_logits_fn(path, backend, tokenizer_sha256=None):
    """(next_logits, ckpt) for a checkpoint: next_logits(ids) -> list of V floats, computed in float64."""
    ckpt = checkpoint.load_checkpoint(path, tokenizer_sha256)  # the checks: format, hash, shapes, finite values
    positions = checkpoint.positions_of(ckpt["config"])  # the scheme; older files: from use_positions
    blocks, heads = checkpoint.sizes_of(ckpt["config"])  # 1 and 1 in a file that does not say
    if backend == "python":
        if positions not in ("learned", "none"):
            raise ValueError(f"{path} has positions {positions!r}, which model.py does not have (it has learned"
                             f" and none); use --backend numpy or torch")
        if (blocks, heads) != (1, 1):
            raise ValueError(f"{path} is a model of {sizes.describe(blocks, heads)}, and model.py has one block and"
                             f" one head; use --backend numpy or torch")
        params = checkpoint.reference_params(ckpt)

        def next_logits(ids):
            return model.forward(params, ids, positions == "learned")[0][-1]
    elif backend == "numpy":
        from oneblock import numpy_model

        params = numpy_model.from_lists(checkpoint.reference_params(ckpt))  # float64

        def next_logits(ids):
            logits, _ = numpy_model.forward(params, ids, positions, heads=heads)  # (T, V)
            return logits[-1].tolist()
    else:
        import safetensors.torch
        import torch

        from oneblock import torch_model

        state = safetensors.torch.load_file(str(path))  # every tensor of the file, as torch tensors
        params = torch_model.to_torch({name: state[name] for name in ckpt["params"]})  # float64

        def next_logits(ids):
            with torch.no_grad():
                logits, _ = torch_model.forward(params, torch_model.as_ids(ids), positions, heads=heads)  # (1, T, V)
            return logits[0, -1].tolist()
    return next_logits, ckpt


# ----------------------------------------------------------------------------------------------------------------
# Command line


def build_parser():
    """The command line: every option with its default and what it does."""
    p = argparse.ArgumentParser(description="Generate text from a checkpoint written by train.py.")
    p.add_argument("--ckpt", default=DEFAULT_CKPT, metavar="PATH", help="the checkpoint (default: %(default)s)")
    p.add_argument("--prompt", default="", help="text to continue; it always follows a newline, so the default,"
                                                " empty, starts a new story")
    p.add_argument("--tokens", type=int, default=160, metavar="N", help="tokens to generate (default: %(default)s)")
    p.add_argument("--temperature", type=float, default=1.0,
                   help="divides the logits: below 1 sharper, above 1 flatter, 0 greedy (default: %(default)s)")
    p.add_argument("--top-k", type=int, default=0, metavar="K",
                   help="draw only among the K most likely tokens; 0 means all (default: %(default)s)")
    p.add_argument("--seed", type=int, default=0, help="seeds the random.Random that draws (default: %(default)s)")
    p.add_argument("--backend", choices=("numpy", "python", "torch"), default="numpy",
                   help="numpy_model.py (default), model.py (standard library only) or torch_model.py (reads the"
                        " file with safetensors.torch)")
    return p


def main(argv=None):
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.tokens < 1:
        parser.error(f"--tokens must be at least 1, got {args.tokens}")
    if not (math.isfinite(args.temperature) and args.temperature >= 0):
        parser.error(f"--temperature must be 0 (greedy) or a positive finite number, got {args.temperature}")
    if args.top_k < 0:
        parser.error(f"--top-k must be 0 (all tokens) or positive, got {args.top_k}")

    who = {"numpy": "sample.py --backend numpy (the default; --backend python needs nothing)",
           "torch": "sample.py --backend torch"}
    for module in {"numpy": ["numpy"], "python": [], "torch": ["numpy", "torch", "safetensors"]}[args.backend]:
        machine.need(module, who[args.backend])

    try:
        machine.check_memory(TOKEN_BYTES * args.tokens, f"--tokens {args.tokens}")
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if not Path(args.ckpt).exists():
        print(f"error: no checkpoint at {args.ckpt}; train one with python3 train.py", file=sys.stderr)
        return 2
    if Path(args.ckpt).is_dir():
        print(f"error: --ckpt {args.ckpt} is a folder; expected a checkpoint file such as"
              f" {Path(args.ckpt) / 'ckpt.safetensors'}", file=sys.stderr)
        return 2
    try:
        next_logits, ckpt = load_logits_fn(args.ckpt, args.backend)
        tok = checkpoint.tokenizer_of(ckpt, TOKENIZER_FILE, args.ckpt)
    except ValueError as e:  # a bad checkpoint, one the chosen backend cannot run, or one too large for memory
        print(f"error: {e}", file=sys.stderr)
        return 2
    try:
        prompt_ids = tok.encode(args.prompt)
    except ValueError as e:
        print(f"error: --prompt: {e}", file=sys.stderr)
        return 2
    start = tok.encode("\n") if "\n" in tok.ids else []  # a line starts after a newline, if the text has any
    if not start and not prompt_ids:
        print(f"error: --prompt is empty, and the text {args.ckpt} learned has no newline to start a line after;"
              f" expected a prompt", file=sys.stderr)
        return 2
    if args.top_k > ckpt["config"]["vocab"]:
        parser.error(f"--top-k {args.top_k} is more than the {ckpt['config']['vocab']} tokens of the vocabulary")

    val = ckpt["metadata"].get("val_loss")
    grown = checkpoint.sizes_of(ckpt["config"])
    print(f"{args.ckpt}: step {ckpt['step']}" + (f", {sizes.describe(*grown)}" if grown != (1, 1) else "")
          + (f", val loss {float(val):.4f}" if val is not None else ""), file=sys.stderr)
    context = start + prompt_ids  # the prompt starts a line, as every story in the corpus does
    new = generate(next_logits, context, args.tokens, ckpt["config"]["max_len"], args.temperature, args.top_k,
                   random.Random(args.seed))
    print(args.prompt + tok.decode(new))
    return 0


if __name__ == "__main__":
    sys.exit(main())
