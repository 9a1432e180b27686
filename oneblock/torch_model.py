"""A PyTorch twin of the transformer in `model.py` and `numpy_model.py`, for cross-checking gradients with autograd.

Same architecture, parameter names and shapes, built from standard `torch.nn.functional` pieces where they fit
(`F.embedding`, `F.layer_norm`, `F.linear`, a masked softmax, `F.cross_entropy`), and the same four position schemes
as `numpy_model.py`, written independently, down to parsing the scheme names: the sinusoid table from torch ops, and
rope as a product of complex numbers (each channel pair of q and k as x[2i] + i x[2i + 1], times e^(i angle)), where
numpy_model.py uses real sines and cosines with a hand-written inverse rotation for the backward pass. It grows as
numpy_model.py does (the other blocks' names are sizes.py's), but its attention always has a heads axis, made by
`view` and `transpose`, where numpy_model.py has none for one head. The reference
stores a weight as (in, out) and computes x W; `F.linear` wants (out, in), so it gets the transposed view `W.T` (no
copy). Importing this module imports torch; `model.py` and `numpy_model.py` never do.

Shape legend: B = sequences in the batch, T = positions, d = model width, H = hidden width, V = vocabulary size,
L = max_len, nh = heads, dh = d / nh.

    >>> import model
    >>> p = to_torch(model.init_params(96, 4, 8, 8, 3))
    >>> loss, grads, inter = loss_and_grads(p, torch.tensor([[1, 2, 3]]), torch.tensor([[2, 3, 4]]))
    >>> grads["W1"].shape, inter["weights"].shape
    (torch.Size([4, 8]), torch.Size([1, 3, 3]))
"""

import math

import numpy as np
import torch
import torch.nn.functional as F

from model import EPS
from oneblock import sizes

SCHEMES = ("learned", "none", "sinusoidal", "rope")  # how positions enter the model; see forward
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
# Positions: the scheme's name, and the two schemes without parameters (the sinusoid table and the rotary turn)


def scheme_name(positions="learned", use_positions=None):
    """One of SCHEMES, from forward's arguments: a scheme's name, or the reference's switch (True means learned
    rows, False none), given as positions or as the keyword use_positions.

    >>> scheme_name("rope"), scheme_name(False), scheme_name(use_positions=True)
    ('rope', 'none', 'learned')
    """
    if use_positions is not None and positions not in ("learned", True):
        raise ValueError(f"positions={positions!r} and use_positions={use_positions!r} contradict each other")
    if use_positions is not None:
        return "learned" if use_positions else "none"
    if isinstance(positions, (bool, np.bool_)):
        return "learned" if positions else "none"
    if positions not in SCHEMES:
        raise ValueError(f"unknown position scheme {positions!r}; the schemes are {', '.join(SCHEMES)}")
    return positions


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


def forward(p, ids, positions="learned", *, heads=1, use_positions=None):
    """Logits (B, T, V) for ids (B, T), and the intermediates the comparison tool checks, by the reference's names;
    those of block k >= 1 after sizes.prefix(k), like its parameters ("block1.x1").

    positions: "learned", "none", "sinusoidal" or "rope" (True and False, or the keyword use_positions, as in the
    reference). heads: the heads of every block (the blocks are counted from the parameters' names). "weights" is
    (B, T, T) for one head and (B, nh, T, T) for more, as in numpy_model.py.

    >>> import model
    >>> logits, inter = forward(to_torch(model.init_params(96, 4, 8, 8, 3)), as_ids([1, 2]))
    >>> tuple(logits.shape), tuple(inter["act"].shape)
    ((1, 2, 96), (1, 2, 8))
    """
    scheme = scheme_name(positions, use_positions)
    B, T = ids.shape
    d = p["tok_emb"].shape[1]
    dh = d // heads
    x = F.embedding(ids, p["tok_emb"])  # (B, T, d)
    if scheme == "learned":
        x = x + p["pos_emb"][:T]  # (B, T, d)
    elif scheme == "sinusoidal":
        x = x + sinusoids(T, d, x.dtype)  # (B, T, d)
    inter = {"x0": x}
    future = torch.ones(T, T, dtype=torch.bool).triu(1)  # (T, T) True where key j > query i
    # one Wq in every block ("Wq", "block1.Wq", ...): counted here, not by sizes.blocks_of, whose cache torch.compile
    # would warn about while tracing through it
    blocks = sum(name.rpartition(".")[2] == "Wq" for name in p)
    for block in range(blocks):
        name = sizes.prefix(block)  # "" for the first block, "block1." for the second, ...
        w = sizes.block_params(p, block)  # this block's tensors by the reference's names
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


def loss_and_grads(p, ids, targets, positions="learned", *, heads=1, use_positions=None):
    """(loss, gradients by name, detached intermediates) for one batch, through autograd.

    >>> import model
    >>> loss, grads, _ = loss_and_grads(to_torch(model.init_params(96, 4, 8, 8, 3)), as_ids([1]), as_ids([2]))
    >>> list(grads) == list(model.PARAM_SHAPES)
    True
    >>> _, grads, inter = loss_and_grads(to_torch(sizes.init_params(96, 4, 8, 8, 3, blocks=2)), as_ids([1]),
    ...                                  as_ids([2]), heads=2)
    >>> list(grads)[14], tuple(inter["block1.weights"].shape)
    ('block1.ln1_g', (1, 2, 1, 1))
    """
    for t in p.values():
        t.grad = None
    logits, inter = forward(p, ids, positions, heads=heads, use_positions=use_positions)
    loss = loss_fn(logits, targets)
    loss.backward()
    # a tensor the graph did not use (pos_emb with any scheme but "learned") has no .grad; its gradient is zero
    grads = {name: p[name].grad if p[name].grad is not None else torch.zeros_like(p[name])
             for name in p}
    return loss.item(), grads, {name: t.detach() for name, t in inter.items()}
