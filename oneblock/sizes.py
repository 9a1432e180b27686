"""The two sizes model.py does not have, blocks and heads: the parameter names and shapes they give, fresh parameters,
and the checks that turn a bad size into a message naming it. Standard library only.

A grown model stacks `blocks` pre-norm blocks, each with its own layer norms, attention and MLP, between the
embeddings and one final layer norm; its attention has `heads` heads of width d / heads each. Names, in the order of
the parameter dict:

    tok_emb, pos_emb                          the embeddings, as in model.py
    ln1_g, ln1_b, Wq, ..., W2, b2             block 0: model.py's names, so a one-block model is model.py's dict
    block1.ln1_g, block1.ln1_b, ...           block 1: the same names after "block1."
    ...                                       block k: after "block{k}."
    lnf_g, lnf_b, W_out, b_out                the final layer norm and the output layer, as in model.py

Heads add no tensor: head h of a block reads columns h d/heads .. (h + 1) d/heads - 1 of its Wq, Wk and Wv, and
writes through the same rows of its Wo (as GPT-2 does), so the number of heads is a size that the weights cannot
tell; checkpoints record it.

    >>> list(param_shapes(96, 4, 8, 8, blocks=2))[:4], list(param_shapes(96, 4, 8, 8, blocks=2))[14:16]
    (['tok_emb', 'pos_emb', 'ln1_g', 'ln1_b'], ['block1.ln1_g', 'block1.ln1_b'])
"""

import functools
import math
import random

from model import PARAM_SHAPES, param_shapes as one_block_shapes

OUTSIDE = ("tok_emb", "pos_emb", "lnf_g", "lnf_b", "W_out", "b_out")  # the tensors that are no block's
BLOCK_NAMES = tuple(name for name in PARAM_SHAPES if name not in OUTSIDE)  # ln1_g, ..., b2: one block's, in order


def prefix(block):
    """What goes before a tensor's name in block `block` (counted from 0).

    >>> prefix(0), prefix(1), prefix(12)
    ('', 'block1.', 'block12.')
    """
    return f"block{block}." if block else ""


def param_names(blocks=1):
    """The parameter names of a model with this many blocks, in the order of the parameter dict.

    >>> param_names(2)[12:16]
    ['W2', 'b2', 'block1.ln1_g', 'block1.ln1_b']
    """
    inside = [prefix(block) + name for block in range(blocks) for name in BLOCK_NAMES]
    return [*OUTSIDE[:2], *inside, *OUTSIDE[2:]]


def param_shapes(vocab, d, hidden, max_len, blocks=1):
    """Every parameter's shape, in the order of the parameter dict; with one block exactly model.param_shapes.

    >>> shapes = param_shapes(96, 16, 64, 64, blocks=3)
    >>> len(shapes), shapes["block2.W1"], list(shapes)[-1]
    (42, (16, 64), 'b_out')
    """
    return dict(shape_table(vocab, d, hidden, max_len, blocks))


# Every forward and backward pass of numpy_model.py checks its parameters against the table of its config
# (config.ModelConfig.param_shapes). Worked out once per size (functools.cache) instead of on every call, the plain
# mirror's step at series size, B = 1, is as fast as before models could grow
# (python3 -m dev.bench --sizes series-b1 --against DIR).


@functools.cache
def shape_table(vocab, d, hidden, max_len, blocks):
    """param_shapes as a tuple of (name, shape) pairs, worked out once for each size."""
    check_sizes(d, blocks, 1)
    one = one_block_shapes(vocab, d, hidden, max_len)
    return tuple((name, one[name.rpartition(".")[2]]) for name in param_names(blocks))


def init_params(vocab, d, hidden, max_len, seed, blocks=1):
    """Fresh parameters as model.init_params makes them (one random.Random(seed); each matrix gauss(0, 0.02) row by
    row in dict order; gains 1.0, biases 0.0), for any number of blocks: with one block the same draws, so exactly
    model.init_params; a second block's matrices are drawn after the first block's, before W_out.

    >>> import model
    >>> init_params(96, 4, 8, 8, 3) == model.init_params(96, 4, 8, 8, 3)
    True
    """
    rng = random.Random(seed)
    params = {}
    for name, (rows, *cols) in param_shapes(vocab, d, hidden, max_len, blocks).items():
        if cols:
            params[name] = [[rng.gauss(0.0, 0.02) for _ in range(cols[0])] for _ in range(rows)]
        else:
            params[name] = [1.0 if name.endswith("_g") else 0.0] * rows
    return params


def block_params(params, block):
    """The tensors of one block under their names inside it (model.py's names, without the prefix). The first
    block's names have no prefix: for it, params itself (the tensors outside the blocks ride along unread), so
    that a one-block step builds no dict for it.

    >>> p = init_params(96, 4, 8, 8, 3, blocks=2)
    >>> sorted(block_params(p, 1)) == sorted(BLOCK_NAMES), block_params(p, 1)["Wq"] is p["block1.Wq"]
    (True, True)
    >>> block_params(p, 0) is p
    True
    """
    if block == 0:
        return params
    return {name: params[prefix(block) + name] for name in BLOCK_NAMES}


# ----------------------------------------------------------------------------------------------------------------
# What a size costs: the numbers a model and a training step hold, by formula, so that a size can be refused before
# its memory is spent (scale.py prints them for any size; tests/test_scale.py holds them to the model's own arrays)


def parameter_count(vocab, d, hidden, max_len, blocks=1):
    """The number of parameters of a model of these sizes, worked out without a name or a tensor for each block.

    >>> parameter_count(96, 16, 64, 64), parameter_count(96, 16, 64, 64, blocks=10**12) > 10**15
    (7440, True)
    """
    one = {name: math.prod(shape) for name, shape in one_block_shapes(vocab, d, hidden, max_len).items()}
    return sum(one[name] for name in OUTSIDE) + blocks * sum(one[name] for name in BLOCK_NAMES)


def activations_per_token(vocab, d, hidden, blocks, heads, T):
    """The numbers numpy_model's cache keeps per token for the backward pass, in windows of T tokens: per block its
    input, two layer norms' outputs and normalised rows (5 d in all) and their deviations (2), q, k, v, the
    attention's context and the residual after it (5 d), both hidden layers of the MLP (2 hidden), and each head's
    row of T attention weights; then the final layer norm's input, output and normalised rows (3 d) and deviation
    (1), and the logits and their gradient (2 V).

    >>> activations_per_token(96, 16, 64, blocks=1, heads=1, T=64)
    595
    """
    return blocks * (10 * d + 2 * hidden + 2 + heads * T) + 3 * d + 1 + 2 * vocab


def flops_per_token(vocab, d, hidden, blocks, T):
    """The floating-point operations of one training step per token (a multiply-add is 2): the forward pass's
    matrix products, per block Wq, Wk, Wv and Wo (4 d^2 multiply-adds), the MLP's two layers (2 d hidden), every
    score of the (T, T) attention matrix and the weighted sum of the values (2 T d, as the kernels compute the whole
    matrix before the causal mask), then the output layer (d V); the backward pass costs twice the forward, a
    product for the gradient of each of its two inputs. Layer norms, softmaxes, the loss and Adam are left out: they
    grow with d, not d^2.

    >>> flops_per_token(96, 16, 64, blocks=1, T=64)  # 3 (24 d^2 + 4 T d + 2 d V) for hidden = 4 d
    39936
    """
    forward = blocks * (2 * (4 * d * d + 2 * d * hidden) + 4 * T * d) + 2 * d * vocab
    return 3 * forward


def non_embedding_parameters(d, hidden, blocks):
    """The parameters of a model's blocks and its final layer norm: every parameter but the token and position
    tables and the output layer, which scaling laws count apart (Kaplan et al. 2020).

    >>> non_embedding_parameters(16, 64, blocks=1), parameter_count(96, 16, 64, 64) - 96 * 16 - 64 * 16 - 16 * 96 - 96
    (3248, 3248)
    """
    return parameter_count(0, d, hidden, 0, blocks)


def step_bytes(vocab, d, hidden, max_len, blocks, heads, batch, seq_len, itemsize):
    """About how many bytes a training step of the NumPy paths holds at once, numbers of itemsize bytes: the
    parameters, their gradients and Adam's two moments (4 numbers a parameter), and the activations of B x T tokens
    twice over (the backward pass makes arrays of the same sizes).

    >>> step_bytes(96, 16, 64, 64, blocks=1, heads=1, batch=16, seq_len=64, itemsize=4)
    4993280
    """
    params = parameter_count(vocab, d, hidden, max_len, blocks)
    return itemsize * (4 * params + 2 * batch * seq_len * activations_per_token(vocab, d, hidden, blocks, heads,
                                                                                  seq_len))


def check_sizes(d, blocks, heads, positions=None):
    """Raise a ValueError naming the bad value unless blocks and heads fit a model of width d: at least one block,
    at least one head, heads dividing d, and (for rotary positions, which turn pairs of channels in each head) an
    even head width.

    >>> check_sizes(16, 2, 4, "rope")
    >>> check_sizes(16, 1, 3)
    Traceback (most recent call last):
    ...
    ValueError: heads = 3 does not divide the width d = 16; expected one of 1, 2, 4, 8, 16
    """
    for name, value in (("blocks", blocks), ("heads", heads)):
        if type(value) is not int or value < 1:
            raise ValueError(f"{name} = {value!r}: expected a whole number of at least 1")
    if d % heads:
        raise ValueError(f"heads = {heads} does not divide the width d = {d}; expected one of"
                         f" {', '.join(map(str, divisors(d)))}")
    if positions == "rope" and (d // heads) % 2:
        even = [n for n in divisors(d) if (d // n) % 2 == 0]
        if heads == 1:  # (numpy_model.rope_tables says the same)
            raise ValueError(f"rope rotates pairs of channels: the width d must be even, got d = {d}")
        raise ValueError(f"heads = {heads} gives heads of width d / heads = {d // heads}, but rope turns pairs of"
                         f" channels in each head: the head width must be even; expected one of"
                         f" {', '.join(map(str, even))} heads for d = {d}")


def divisors(n):
    """The divisors of n in order, found up to its square root (so that a huge width is answered at once).

    >>> divisors(16), divisors(7)
    ([1, 2, 4, 8, 16], [1, 7])
    """
    small = [k for k in range(1, math.isqrt(n) + 1) if n % k == 0]
    return small + [n // k for k in reversed(small) if k * k != n]


def describe(blocks, heads):
    """The sizes in words, for headers and titles.

    >>> describe(1, 1), describe(2, 4)
    ('1 block x 1 head', '2 blocks x 4 heads')
    """
    return f"{blocks} block{'s' if blocks != 1 else ''} x {heads} head{'s' if heads != 1 else ''}"
