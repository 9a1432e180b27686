"""A PyTorch twin of the transformer in `model.py` and `numpy_model.py`, for cross-checking gradients with autograd.

Same architecture, parameter names and shapes, built from standard `torch.nn.functional` pieces where they fit
(`F.embedding`, `F.layer_norm`, `F.linear`, a masked softmax, `F.cross_entropy`), and the same four position schemes
as `numpy_model.py`, written independently: the sinusoid table from torch ops, and rope as a product of complex
numbers (each channel pair of q and k as x[2i] + i x[2i + 1], times e^(i angle)), where numpy_model.py uses real
sines and cosines with a hand-written inverse rotation for the backward pass. Every function takes the model's
`ModelConfig` beside the weights, and it grows as numpy_model.py does (docs/growing.md, "The sizes"), its heads axis
made by `view` and `transpose`. The reference stores a weight as (in, out) and computes x W; `F.linear` wants
(out, in), so it gets the transposed view `W.T` (no copy). Importing this module imports torch.

Shape legend: B = sequences in the batch, T = positions, d = model width, H = hidden width, V = vocabulary size,
L = max_len, nh = heads, dh = d / nh.

    >>> cfg = ModelConfig(vocab=96, d=4, hidden=8, max_len=8)
    >>> p = to_torch(cfg.init_params(3))
    >>> loss, grads, inter = loss_and_grads(p, torch.tensor([[1, 2, 3]]), torch.tensor([[2, 3, 4]]), cfg)
    >>> grads["W1"].shape, inter["weights"].shape
    (torch.Size([4, 8]), torch.Size([1, 3, 3]))
"""

import math

import numpy as np
import torch
import torch.nn.functional as F

from model import EPS
from oneblock.config import SCHEMES, ModelConfig, block_params, prefix  # noqa: F401  (ModelConfig: the examples)

ROPE_BASE = 10000.0  # channel pair i turns by pos / ROPE_BASE^(2i/d) radians; also the sinusoids' wavelengths

# ----------------------------------------------------------------------------------------------------------------
# Parameters


def to_torch(params, dtype=torch.float64):
    """A dict of leaf tensors that require gradients, from the reference's dict of lists or a dict of arrays.

    >>> to_torch({"b": [1.0, 2.0]})["b"]
    tensor([1., 2.], dtype=torch.float64, requires_grad=True)
    """
    return {name: torch.tensor(np.asarray(t, dtype=np.float64), dtype=dtype, requires_grad=True)
            for name, t in params.items()}


def as_ids(ids):
    """Token IDs (list, array or tensor; shape (T,) or (B, T)) as a (B, T) int64 tensor.

    >>> as_ids([1, 2]).shape
    torch.Size([1, 2])
    """
    ids = torch.as_tensor(np.asarray(ids), dtype=torch.int64)
    return ids if ids.dim() == 2 else ids[None]


# ----------------------------------------------------------------------------------------------------------------
# Positions: the two schemes without parameters (the sinusoid table and the rotary turn)


def sinusoids(T, d, dtype=torch.float64):
    """(T, d): PE[pos, 2i] = sin(pos / 10000^(2i/d)), PE[pos, 2i + 1] = cos(pos / 10000^(2i/d)).

    >>> sinusoids(2, 2)
    tensor([[0.0000, 1.0000],
            [0.8415, 0.5403]], dtype=torch.float64)
    """
    pos = torch.arange(T, dtype=torch.float64)[:, None]  # (T, 1)
    wavelength = ROPE_BASE ** (torch.arange(0, d, 2, dtype=torch.float64) / d)  # (ceil(d / 2),)
    angle = pos / wavelength  # (T, ceil(d / 2))
    pe = torch.zeros(T, d, dtype=torch.float64)  # (T, d)
    pe[:, 0::2] = torch.sin(angle)
    pe[:, 1::2] = torch.cos(angle[:, :d // 2])
    return pe.to(dtype)


def rotary(x):
    """x (..., T, d), d even, with channel pair i of position pos turned by pos / 10000^(2i/d) radians.

    >>> rotary(torch.tensor([[[1.0, 0.0], [1.0, 0.0]]], dtype=torch.float64))[0, 1]  # position 1: 1 radian
    tensor([0.5403, 0.8415], dtype=torch.float64)
    """
    *lead, T, d = x.shape
    pos = torch.arange(T, dtype=torch.float64)[:, None]  # (T, 1)
    angle = pos / ROPE_BASE ** (torch.arange(0, d, 2, dtype=torch.float64) / d)  # (T, d / 2)
    turn = torch.polar(torch.ones_like(angle), angle)  # (T, d / 2) e^(i angle), complex
    z = torch.view_as_complex(x.reshape(*lead, T, d // 2, 2).contiguous())  # (..., T, d / 2) x[2i] + i x[2i + 1]
    return torch.view_as_real(z * turn.to(z.dtype)).reshape(*lead, T, d)  # (..., T, d)


def split_heads(x, heads):
    """x (B, T, d) as (B, heads, T, d / heads), head h reading channels h d/heads .. (h + 1) d/heads - 1; with one
    head x itself, with no heads axis (so that a one-head step has no autograd steps for it).

    >>> tuple(split_heads(torch.zeros(2, 5, 12), 3).shape), tuple(split_heads(torch.zeros(2, 5, 12), 1).shape)
    ((2, 3, 5, 4), (2, 5, 12))
    """
    if heads == 1:
        return x
    B, T, d = x.shape
    return x.view(B, T, heads, d // heads).transpose(1, 2)  # (B, nh, T, dh)


def merge_heads(x, heads):
    """The heads side by side again, (B, heads, T, dh) -> (B, T, heads dh); with one head x itself.

    >>> x = torch.arange(24.0).reshape(2, 3, 4)
    >>> torch.equal(merge_heads(split_heads(x, 2), 2), x)
    True
    """
    if heads == 1:
        return x
    B, nh, T, dh = x.shape
    return x.transpose(1, 2).reshape(B, T, nh * dh)  # (B, T, d)


# ----------------------------------------------------------------------------------------------------------------
# The model


def forward(p, ids, config):
    """Logits (B, T, V) for ids (B, T), and the intermediates the comparison tool checks, by the reference's names;
    those of block k >= 1 after prefix(k), like its parameters ("block1.x1"). "weights" is (B, T, T) for one head
    and (B, nh, T, T) for more, as in numpy_model.py.

    >>> cfg = ModelConfig(96, 4, 8, 8)
    >>> logits, inter = forward(to_torch(cfg.init_params(3)), as_ids([1, 2]), cfg)
    >>> tuple(logits.shape), tuple(inter["act"].shape)
    ((1, 2, 96), (1, 2, 8))
    """
    scheme, heads = config.positions, config.heads
    if scheme not in SCHEMES:  # (one that is not a scheme must not run as "none")
        raise ValueError(f"unknown position scheme {scheme!r}; the schemes are {', '.join(SCHEMES)}")
    B, T = ids.shape
    d = config.d
    dh = d // heads
    x = F.embedding(ids, p["tok_emb"])  # (B, T, d)
    if scheme == "learned":
        x = x + p["pos_emb"][:T]  # (B, T, d)
    elif scheme == "sinusoidal":
        x = x + sinusoids(T, d, x.dtype)  # (B, T, d)
    inter = {"x0": x}
    future = torch.ones(T, T, dtype=torch.bool).triu(1)  # (T, T) True where key j > query i
    for block in range(config.blocks):
        name = prefix(block)  # "" for the first block, "block1." for the second, ...
        w = block_params(p, block)  # this block's tensors by the reference's names
        h1 = F.layer_norm(x, (d,), w["ln1_g"], w["ln1_b"], eps=EPS)  # (B, T, d)
        q = split_heads(F.linear(h1, w["Wq"].T), heads)  # (B, nh, T, dh)
        k = split_heads(F.linear(h1, w["Wk"].T), heads)  # (B, nh, T, dh)
        v = split_heads(F.linear(h1, w["Wv"].T), heads)  # (B, nh, T, dh)
        if scheme == "rope":
            q, k = rotary(q), rotary(k)  # (B, nh, T, dh) each, every head turned alike
        scores = q @ k.transpose(-1, -2) / math.sqrt(dh)  # (B, nh, T, T)
        weights = scores.masked_fill(future, float("-inf")).softmax(dim=-1)  # (B, nh, T, T)
        ctx = merge_heads(weights @ v, heads)  # (B, T, d) the heads side by side
        x1 = x + F.linear(ctx, w["Wo"].T)  # (B, T, d) skip path 1
        h2 = F.layer_norm(x1, (d,), w["ln2_g"], w["ln2_b"], eps=EPS)  # (B, T, d)
        act = F.relu(F.linear(h2, w["W1"].T, w["b1"]))  # (B, T, H)
        x = x1 + F.linear(act, w["W2"].T, w["b2"])  # (B, T, d) skip path 2
        inter.update({name + "h1": h1, name + "weights": weights, name + "x1": x1, name + "h2": h2,
                      name + "act": act, name + "x2": x})
    hf = F.layer_norm(x, (d,), p["lnf_g"], p["lnf_b"], eps=EPS)  # (B, T, d)
    logits = F.linear(hf, p["W_out"].T, p["b_out"])  # (B, T, V)
    inter["logits"] = logits
    return logits, inter


def loss_fn(logits, targets):
    """Mean cross-entropy over all B * T positions.

    >>> round(loss_fn(torch.zeros(1, 1, 2), torch.tensor([[1]])).item(), 6)
    0.693147
    """
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


def loss_and_grads(p, ids, targets, config):
    """(loss, gradients by name, detached intermediates) for one batch, through autograd. Weights whose names or
    shapes are not config's are a ValueError (config.shape_problem's), before any work.

    >>> import model
    >>> cfg = ModelConfig(96, 4, 8, 8)
    >>> loss, grads, _ = loss_and_grads(to_torch(cfg.init_params(3)), as_ids([1]), as_ids([2]), cfg)
    >>> list(grads) == list(model.PARAM_SHAPES)
    True
    >>> grown = ModelConfig(96, 4, 8, 8, blocks=2, heads=2)
    >>> _, grads, inter = loss_and_grads(to_torch(grown.init_params(3)), as_ids([1]), as_ids([2]), grown)
    >>> list(grads)[14], tuple(inter["block1.weights"].shape)
    ('block1.ln1_g', (1, 2, 1, 1))
    >>> loss_and_grads(to_torch(cfg.init_params(3)), as_ids([1]), as_ids([2]), ModelConfig(96, 4, 9, 8))
    Traceback (most recent call last):
    ...
    ValueError: parameter W1 has shape (4, 8), expected (4, 9)
    """
    problem = config.shape_problem({name: tuple(t.shape) for name, t in p.items()})
    if problem is not None:
        raise ValueError(problem)
    for t in p.values():
        t.grad = None
    logits, inter = forward(p, ids, config)
    loss = loss_fn(logits, targets)
    loss.backward()
    # a tensor the graph did not use (pos_emb with any scheme but "learned") has no .grad; its gradient is zero
    grads = {name: p[name].grad if p[name].grad is not None else torch.zeros_like(p[name])
             for name in p}
    return loss.item(), grads, {name: t.detach() for name, t in inter.items()}
