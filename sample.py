"""Generate text from a trained checkpoint, one token at a time.

    python3 sample.py                                   # 160 tokens from the start of a line, temperature 1
    python3 sample.py --prompt "mia has a" --temperature 0     # greedy: always the most likely next token
    python3 sample.py --backend python                  # the same on model.py, standard library only
    python3 sample.py --backend torch                   # the same on torch_model.py, read by safetensors.torch

This file is the command line; how a token is chosen, and how each backend computes the logits, is
oneblock/sampling.py's; docs/training.md, "Sampling", shows it run. The tokens are those of the tokenizer the
checkpoint was trained with (docs/own-text.md). A missing or bad checkpoint, one the backend cannot run, a prompt the
tokenizer cannot read and a size that would not fit in memory each exit with status 2 and one line, "error: ...".
"""

import argparse
import math
import os
import random
import sys

from oneblock import checkpoint, machine
from oneblock.data import TOKENIZER_FILE
from oneblock.sampling import TOKEN_BYTES, generate, load_logits_fn

# ----------------------------------------------------------------------------------------------------------------
# Command line


def main(argv=None):
    parser = argparse.ArgumentParser(description="Generate text from a checkpoint written by train.py.",
                                     allow_abbrev=False)
    parser.add_argument("--ckpt", default="out/ckpt.safetensors", metavar="PATH",  # where train.py writes by default
                        help="the checkpoint (default: %(default)s)")
    parser.add_argument("--prompt", default="", help="text to continue; it always follows a newline, so the default,"
                                                     " empty, starts a new story")
    parser.add_argument("--tokens", type=int, default=160, metavar="N",
                        help="tokens to generate (default: %(default)s)")
    parser.add_argument("--temperature", type=float, default=1.0,
                        help="divides the logits: below 1 sharper, above 1 flatter, 0 greedy (default: %(default)s)")
    parser.add_argument("--top-k", type=int, default=0, metavar="K",
                        help="draw only among the K most likely tokens; 0 means all (default: %(default)s)")
    parser.add_argument("--seed", type=int, default=0, help="seeds the random.Random that draws (default: %(default)s)")
    parser.add_argument("--backend", choices=("numpy", "python", "torch"), default="numpy",
                        help="numpy_model.py (default), model.py (standard library only) or torch_model.py (reads the"
                             " file with safetensors.torch)")
    args = parser.parse_args(argv)
    if args.tokens < 1:
        parser.error(f"--tokens must be at least 1, got {args.tokens}")
    if not (math.isfinite(args.temperature) and args.temperature >= 0):
        parser.error(f"--temperature must be 0 (greedy) or a positive finite number, got {args.temperature}")
    if args.top_k < 0:
        parser.error(f"--top-k must be 0 (all tokens) or positive, got {args.top_k}")

    machine.need_backend("sample.py", args.backend,
                         {"numpy": ["numpy"], "python": [], "torch": ["numpy", "torch", "safetensors"]}[args.backend])

    try:  # a size too large for memory, a missing or bad checkpoint, one the backend cannot run, a bad prompt
        machine.check_memory(TOKEN_BYTES * args.tokens, f"--tokens {args.tokens}")
        checkpoint.named_checkpoint(args.ckpt)
        next_logits, ckpt = load_logits_fn(args.ckpt, args.backend)
        tok = checkpoint.tokenizer_of(ckpt, TOKENIZER_FILE, args.ckpt)
        try:
            prompt_ids = tok.encode(args.prompt)
        except ValueError as e:
            raise ValueError(f"--prompt: {e}") from None
        start = tok.encode("\n") if "\n" in tok.ids else []  # a line starts after a newline, if the text has any
        if not start and not prompt_ids:
            raise ValueError(f"--prompt is empty, and the text {args.ckpt} learned has no newline to start a line"
                             f" after; expected a prompt")
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    config = ckpt["config"]  # the model's ModelConfig
    if args.top_k > config.vocab:
        parser.error(f"--top-k {args.top_k} is more than the {config.vocab} tokens of the vocabulary")

    val = ckpt["metadata"].get("val_loss")
    print(f"{args.ckpt}: step {ckpt['step']}"
          + (f", {config.blocks_and_heads()}" if config.grown else "")
          + (f", val loss {float(val):.4f}" if val is not None else ""), file=sys.stderr)
    context = start + prompt_ids  # the prompt starts a line, as every story in the corpus does
    new = generate(next_logits, context, args.tokens, config.max_len, args.temperature, args.top_k,
                   random.Random(args.seed))
    try:
        print(args.prompt + tok.decode(new), flush=True)
    except BrokenPipeError:  # the reader stopped reading (sample.py | head): what it took was written
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # (so that exiting flushes nowhere, quietly)
    return 0


if __name__ == "__main__":
    sys.exit(main())
