"""A PyTorch twin of the one-block transformer in `model.py`, for cross-checking gradients with autograd.

Same architecture, parameter names and shapes, built from standard `torch.nn.functional` pieces where they fit
(`F.embedding`, `F.layer_norm`, `F.linear`, a masked softmax, `F.cross_entropy`), and the same four position schemes
as `numpy_model.py`, written independently, down to parsing the scheme names: the sinusoid table from torch ops, and
rope as a product of complex numbers (each channel pair of q and k as x[2i] + i x[2i + 1], times e^(i angle)), where
numpy_model.py uses real sines and cosines with a hand-written inverse rotation for the backward pass. The reference
stores a weight as (in, out) and computes x W; `F.linear` wants (out, in), so it gets the transposed view `W.T` (no
copy). Importing this module imports torch; `model.py` and `numpy_model.py` never do.

Shape legend: B = sequences in the batch, T = positions, d = model width, H = hidden width, V = vocabulary size,
L = max_len.

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

from model import EPS, PARAM_SHAPES

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
    """x (B, T, d), d even, with channel pair i of position pos turned by pos / 10000^(2i/d) radians.

    >>> rotary(torch.tensor([[[1.0, 0.0], [1.0, 0.0]]], dtype=torch.float64))[0, 1]  # position 1: 1 radian
    tensor([0.5403, 0.8415], dtype=torch.float64)
    """
    B, T, d = x.shape
    pos = torch.arange(T, dtype=torch.float64)[:, None]  # (T, 1)
    angle = pos / ROPE_BASE ** (torch.arange(0, d, 2, dtype=torch.float64) / d)  # (T, d / 2)
    turn = torch.polar(torch.ones_like(angle), angle)  # (T, d / 2) e^(i angle), complex
    z = torch.view_as_complex(x.reshape(B, T, d // 2, 2).contiguous())  # (B, T, d / 2) x[2i] + i x[2i + 1]
    return torch.view_as_real(z * turn.to(z.dtype)).reshape(B, T, d)  # (B, T, d)


# ----------------------------------------------------------------------------------------------------------------
# The model


def forward(p, ids, positions="learned", *, use_positions=None):
    """Logits (B, T, V) for ids (B, T), and the intermediates the comparison tool checks, by the reference's names.

    positions: "learned", "none", "sinusoidal" or "rope" (True and False, or the keyword use_positions, as in the
    reference).

    >>> import model
    >>> logits, inter = forward(to_torch(model.init_params(96, 4, 8, 8, 3)), as_ids([1, 2]))
    >>> tuple(logits.shape), tuple(inter["act"].shape)
    ((1, 2, 96), (1, 2, 8))
    """
    scheme = scheme_name(positions, use_positions)
    B, T = ids.shape
    d = p["tok_emb"].shape[1]
    x0 = F.embedding(ids, p["tok_emb"])  # (B, T, d)
    if scheme == "learned":
        x0 = x0 + p["pos_emb"][:T]  # (B, T, d)
    elif scheme == "sinusoidal":
        x0 = x0 + sinusoids(T, d, x0.dtype)  # (B, T, d)
    h1 = F.layer_norm(x0, (d,), p["ln1_g"], p["ln1_b"], eps=EPS)  # (B, T, d)
    q = F.linear(h1, p["Wq"].T)  # (B, T, d)
    k = F.linear(h1, p["Wk"].T)  # (B, T, d)
    v = F.linear(h1, p["Wv"].T)  # (B, T, d)
    if scheme == "rope":
        q, k = rotary(q), rotary(k)  # (B, T, d) each
    scores = q @ k.transpose(1, 2) / math.sqrt(d)  # (B, T, T)
    future = torch.ones(T, T, dtype=torch.bool).triu(1)  # (T, T) True where key j > query i
    weights = scores.masked_fill(future, float("-inf")).softmax(dim=-1)  # (B, T, T)
    x1 = x0 + F.linear(weights @ v, p["Wo"].T)  # (B, T, d) skip path 1
    h2 = F.layer_norm(x1, (d,), p["ln2_g"], p["ln2_b"], eps=EPS)  # (B, T, d)
    act = F.relu(F.linear(h2, p["W1"].T, p["b1"]))  # (B, T, H)
    x2 = x1 + F.linear(act, p["W2"].T, p["b2"])  # (B, T, d) skip path 2
    hf = F.layer_norm(x2, (d,), p["lnf_g"], p["lnf_b"], eps=EPS)  # (B, T, d)
    logits = F.linear(hf, p["W_out"].T, p["b_out"])  # (B, T, V)
    inter = {"x0": x0, "h1": h1, "weights": weights, "x1": x1, "h2": h2, "act": act, "x2": x2, "logits": logits}
    return logits, inter


def loss_fn(logits, targets):
    """Mean cross-entropy over all B * T positions.

    >>> round(loss_fn(torch.zeros(1, 1, 2), torch.tensor([[1]])).item(), 6)
    0.693147
    """
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


def loss_and_grads(p, ids, targets, positions="learned", *, use_positions=None):
    """(loss, gradients by name, detached intermediates) for one batch, through autograd.

    >>> import model
    >>> loss, grads, _ = loss_and_grads(to_torch(model.init_params(96, 4, 8, 8, 3)), as_ids([1]), as_ids([2]))
    >>> list(grads) == list(model.PARAM_SHAPES)
    True
    """
    for t in p.values():
        t.grad = None
    logits, inter = forward(p, ids, positions, use_positions=use_positions)
    loss = loss_fn(logits, targets)
    loss.backward()
    # a tensor the graph did not use (pos_emb with any scheme but "learned") has no .grad; its gradient is zero
    grads = {name: p[name].grad if p[name].grad is not None else torch.zeros_like(p[name]) for name in PARAM_SHAPES}
    return loss.item(), grads, {name: t.detach() for name, t in inter.items()}
