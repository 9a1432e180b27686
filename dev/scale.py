"""A larger model on paper: its parameters, the memory a training step needs, its FLOPs per token, and what that
means for tokens per second per GPU, all by formula (no model is built, nothing is timed).

    python3 -m dev.scale                                # GPT-2 small's shape with this lab's layers
    python3 -m dev.scale --width 16 --blocks 1 --heads 1 --vocab 96 --max-len 64 --batch 16   # the lab's model

The layers are this lab's (numpy_model.py): per block two layer norms (a gain and a bias each), Wq, Wk, Wv, Wo of
(d, d) without biases, an MLP of 4 d hidden units with biases; token and learned position tables; a final layer norm;
an output matrix W_out (d, V) of its own (not tied to tok_emb) with its bias. Float32 throughout, as train.py's
default dtype: 4 bytes a number.

- parameters        N = V d + max_len d + blocks (12 d^2 + 9 d) + 2 d + d V + V
- weights, gradients and Adam's two moments: 16 N bytes; DistributedDataParallel adds its gradient buckets, 4 N
- activations kept for the backward pass, per token: blocks (18 d + 2 + heads T) + 3 d + 1 + 2 V numbers
- FLOPs per token of a training step: 3 (blocks (24 d^2 + 4 T d) + 2 d V)
- tokens per second per GPU = sustained FLOP/s / FLOPs per token
- gradient all-reduce over n ranks (a ring): each rank sends and receives 2 (n - 1) / n x 4 N bytes a step

The counts are ModelConfig's (oneblock/config.py: parameter_count, activations_per_token, flops_per_token, whose
docstrings say what each counts), with windows of the model's max_len tokens.
"""

import argparse
import sys

from dev import positive
from oneblock.config import ModelConfig

BYTES = 4  # float32


def human(n, unit):
    """n with a decimal prefix.

    >>> human(163_050_577, ""), human(2.6e9, "B")
    ('163.05 M', '2.60 GB')
    """
    for scale, prefix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(n) >= scale:
            return f"{n / scale:.2f} {prefix}{unit}"
    return f"{n:g} {unit}".rstrip()


def report(args):
    """The lines scale.py prints for the parsed arguments."""
    config = ModelConfig(args.vocab, args.width, 4 * args.width, args.max_len, args.blocks, args.heads)  # 4 d hidden
    n, tokens = config.parameter_count(), args.batch * args.max_len  # tokens per GPU per step
    per_token, flops = config.activations_per_token(args.max_len), config.flops_per_token(args.max_len)
    state = 16 * n + (4 * n if args.gpus > 1 else 0)
    acts = per_token * BYTES * tokens
    per_gpu = args.flops / flops
    step = flops * tokens / args.flops
    ring = 2 * (args.gpus - 1) / args.gpus * BYTES * n
    return [
        f"model: d = {args.width}, {config.blocks_and_heads().replace(' x ', ' of ')}, V = {args.vocab},"
        f" T = {args.max_len};"
        f" a step of {args.batch} windows ({tokens:,} tokens) per GPU, {args.gpus} GPUs, float32",
        f"parameters                 {n:,} ({human(n, '')})",
        f"weights, gradients, Adam   {human(16 * n, 'B')}" + (f" + DDP buckets {human(4 * n, 'B')}"
                                                                if args.gpus > 1 else ""),
        f"activations                {per_token:,} numbers per token: {human(acts, 'B')} per GPU",
        f"memory per GPU, about      {human(state + acts, 'B')} (before the framework's own workspace)",
        f"FLOPs per token            {human(flops, 'FLOP')} (6 N would say"
        f" {human(6 * n, 'FLOP')})",
        f"tokens/s per GPU           {per_gpu:,.0f} at {human(args.flops, 'FLOP/s')} sustained,"
        f" {step * 1e3:.3g} ms a step;"
        f" {per_gpu * args.gpus:,.0f} tokens/s on {args.gpus}",
        f"all-reduce per step        {human(ring, 'B')} sent and received by each GPU" if args.gpus > 1 else
        "all-reduce per step        none (one GPU)",
    ]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    parser.add_argument("--width", type=positive(int), default=768, help="d (default: %(default)s)")
    parser.add_argument("--blocks", type=positive(int), default=12, help="blocks (default: %(default)s)")
    parser.add_argument("--heads", type=positive(int), default=12, help="heads per block (default: %(default)s)")
    parser.add_argument("--vocab", type=positive(int), default=50257, help="V (default: %(default)s, GPT-2's)")
    parser.add_argument("--max-len", type=positive(int), default=1024, help="T, tokens per window (default:"
                                                                            " %(default)s)")
    parser.add_argument("--batch", type=positive(int), default=8, help="windows per GPU per step (default:"
                                                                       " %(default)s)")
    parser.add_argument("--gpus", type=positive(int), default=8, help="data-parallel ranks (default: %(default)s)")
    parser.add_argument("--flops", type=positive(float), default=20e12,
                        help="the FLOP/s one GPU sustains in float32 matrix products: an assumption, give yours"
                             " (default: %(default)g)")
    args = parser.parse_args(argv)
    if args.width % args.heads:
        parser.error(f"--heads {args.heads} does not divide --width {args.width}")
    print("\n".join(report(args)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
