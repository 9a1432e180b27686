"""The transformer of `model.py` in NumPy, batched, with its backward pass by hand: the file to read second
(docs/numpy-paths.md, "Two paths, one maths"; its blocks and heads are docs/growing.md's, "The sizes").

It mirrors `model.py` section by section and name by name, each layer written as its formula. Differences:
- The model's description is a `ModelConfig` (config.py), passed beside the weights to every call.
- IDs are an int array of shape (T,) or (B, T), and every tensor has the same leading axes; the loss is the mean
  over all B * T positions. Parameters are a dict of arrays, all float64 or all float32 (`from_lists`, `to_lists`).
- Sums are NumPy's, not `math.fsum`: in float64 the results agree with the reference to about 1e-15 relative.
- Positions come in four schemes, config.positions (docs/positions.md, "Four schemes"). Every scheme but "learned"
  reads up to LONGEST positions, and gives pos_emb gradient 0.
Every call returns new arrays.

Shape legend, used in the comments on every line that makes a tensor:
    B = sequences in the batch (absent for IDs of shape (T,)), T = positions, d = model width, H = hidden width of
    the MLP, V = vocabulary size, L = max_len, the number of learned positions, nh = heads and dh = d / nh, the
    width of one head (with one head there is no nh axis: the shapes are model.py's).

    >>> config = ModelConfig(vocab=96, d=16, hidden=64, max_len=64)
    >>> logits, cache = forward(init_params(config, seed=3), np.array([[5, 17, 42], [1, 2, 3]]), config)
    >>> logits.shape, cache["att"]["weights"].shape
    ((2, 3, 96), (2, 3, 3))
    >>> grown = ModelConfig(vocab=96, d=16, hidden=64, max_len=64, blocks=2, heads=4)
    >>> logits, cache = forward(init_params(grown, seed=3), np.array([[5, 17, 42], [1, 2, 3]]), grown)
    >>> len(cache["blocks"]), cache["blocks"][1]["att"]["weights"].shape
    (2, (2, 4, 3, 3))
"""

import math

import numpy as np

from model import EPS
from oneblock.config import ModelConfig, block_params, prefix, said

DTYPES = (np.float32, np.float64)  # the parameter dtypes this path runs in
LONGEST = 1024  # the most positions "none", "sinusoidal" and "rope" read (they have no table of learned rows)
ROPE_BASE = 10000.0  # pair i turns by pos / ROPE_BASE^(2i/d) radians; also the sinusoid table's wavelengths


# ----------------------------------------------------------------------------------------------------------------
# Parameters: the reference's dict of lists as arrays, and the checks of every input


def from_lists(params, dtype=np.float64):
    """The reference's dict of lists as a dict of arrays of one dtype (float64 or float32), same keys and order.

    >>> from_lists({"b": [1.0, 2.0]}, np.float32)["b"].dtype
    dtype('float32')
    """
    if np.dtype(dtype) not in DTYPES:
        raise ValueError(f"parameters must be float32 or float64, got {np.dtype(dtype)}")
    return {name: np.array(t, dtype=dtype) for name, t in params.items()}


def to_lists(arrays):
    """A dict of arrays (parameters or gradients) as the reference's dict of lists of Python floats.

    >>> to_lists({"b": np.array([1.0, 2.0])})
    {'b': [1.0, 2.0]}
    """
    return {name: np.asarray(t, dtype=np.float64).tolist() for name, t in arrays.items()}


def init_params(config, seed, dtype=np.float64):
    """The reference's initial parameters (the same random draws) of a ModelConfig, as arrays; with more blocks,
    ModelConfig.init_params's.

    >>> init_params(ModelConfig(vocab=96, d=4, hidden=8, max_len=8), seed=3, dtype=np.float32)["ln1_g"]
    array([1., 1., 1., 1.], dtype=float32)
    """
    return from_lists(checked_config(config).init_params(seed), dtype)


def checked_config(config):
    """config, after checking that it is a ModelConfig whose values make sense (ModelConfig.checked's messages).

    >>> checked_config((96, 4, 8, 8))
    Traceback (most recent call last):
    ...
    TypeError: the model's description should be a ModelConfig, got tuple (96, 4, 8, 8)
    """
    if not isinstance(config, ModelConfig):
        raise TypeError(f"the model's description should be a ModelConfig, got {type(config).__name__}"
                        f" {said(config)}")
    return config.checked()


def check_params(params, config):
    """Raise a ValueError unless params are the parameters of the model config describes: a dict of NumPy arrays,
    all float32 or all float64, with exactly the names and shapes of config.param_shapes().

    >>> config = ModelConfig(vocab=96, d=4, hidden=8, max_len=8)
    >>> p = init_params(config, seed=3)
    >>> check_params(p, config)
    >>> check_params({**p, "W1": np.zeros((4, 9))}, config)
    Traceback (most recent call last):
    ...
    ValueError: parameter W1 has shape (4, 9), expected (4, 8)
    """
    checked_config(config)
    for name, t in params.items():
        if not isinstance(t, np.ndarray):
            raise ValueError(f"parameter {name} should be a NumPy array, got {type(t).__name__} "
                             "(HINT: from_lists(params) converts the reference's dict of lists)")
    problem = config.shape_problem({name: t.shape for name, t in params.items()})
    if problem is not None:
        raise ValueError(problem)
    dtype = params["tok_emb"].dtype
    if dtype not in DTYPES:
        raise ValueError(f"parameters must be float32 or float64, got {dtype} for tok_emb")
    for name, t in params.items():
        if t.dtype != dtype:
            raise ValueError(f"parameter {name} has dtype {t.dtype}, but tok_emb has {dtype}: use one dtype")


def check_ids(ids, vocab, what="token IDs"):
    """Return ids as an int array of shape (T,) or (B, T) after checking each is an int in [0, vocab).

    >>> check_ids([[1, 2]], 96)
    array([[1, 2]])
    """
    if isinstance(ids, (str, bytes)) or ids is None:
        raise ValueError(f"{what} should be an int array of shape (T,) or (B, T), got {type(ids).__name__} {ids!r}")
    arr = np.asarray(ids)
    if arr.dtype == object:  # a list mixing ints with None, strings, ...: name the first element that is no int
        for pos, x in np.ndenumerate(arr):
            if type(x) is not int:
                raise ValueError(f"{what} should be plain ints, got {x!r} ({type(x).__name__}) at position {pos}")
        arr = arr.astype(np.int64)
    if arr.dtype.kind not in "iu":  # bool, float, str: not IDs, even where the values look whole
        raise ValueError(f"{what} should be plain ints, got an array of dtype {arr.dtype}")
    if arr.ndim not in (1, 2):
        raise ValueError(f"{what} should have shape (T,) or (B, T), got shape {arr.shape}")
    bad = arr[(arr < 0) | (arr >= vocab)]
    if bad.size:
        raise ValueError(f"{what} outside the vocabulary of size {vocab}: {bad[:5].tolist()}")
    return arr


def check_length(shape, scheme, max_len):
    """Raise a ValueError unless IDs of this shape, (T,) or (B, T), fit a model with max_len rows and this scheme.

    >>> check_length((2, 100), "rope", 64)
    """
    B, T = (1, *shape) if len(shape) == 1 else shape
    if T == 0:
        raise ValueError("empty sequence: forward needs at least one token ID")
    if B == 0:
        raise ValueError("empty batch: forward needs at least one sequence")
    if T > max_len and scheme == "learned":
        raise ValueError(f"sequence of {T} tokens is longer than the {max_len} positions the model has")
    if T > LONGEST:
        raise ValueError(f"sequence of {T} tokens is longer than the {LONGEST} positions the model has with"
                         f" positions={scheme!r}")


def check_targets(targets, logits):
    """Return targets as an int array of the logits' leading shape, after checking both.

    >>> check_targets([1, 0], np.zeros((2, 3)))
    array([1, 0])
    """
    if not isinstance(logits, np.ndarray) or logits.ndim not in (2, 3) or logits.shape[-1] == 0:
        raise ValueError(f"logits should be an array of shape (T, V) or (B, T, V), got {np.shape(logits)}")
    if logits.dtype not in DTYPES:
        raise ValueError(f"logits should be float32 or float64, got {logits.dtype}")
    targets = check_ids(targets, logits.shape[-1], what="target IDs")
    if targets.shape != logits.shape[:-1]:
        if targets.size != math.prod(logits.shape[:-1]):
            raise ValueError(f"{math.prod(logits.shape[:-1])} positions but {targets.size} targets")
        raise ValueError(f"targets of shape {targets.shape} do not match logits of shape {logits.shape}")
    return targets


# ----------------------------------------------------------------------------------------------------------------
# Positions: the sinusoid table, and the rotary turn of channel pairs


def sinusoid_table(T, d):
    """The fixed position table of the original transformer, (T, d) float64: PE[pos, 2i] = sin(pos / 10000^(2i/d)),
    PE[pos, 2i + 1] = cos(pos / 10000^(2i/d)).

    >>> sinusoid_table(2, 4).round(4)
    array([[0.    , 1.    , 0.    , 1.    ],
           [0.8415, 0.5403, 0.01  , 1.    ]])
    """
    angles = np.arange(T)[:, None] * ROPE_BASE ** (-np.arange(0, d, 2) / d)  # (T, ceil(d / 2))
    table = np.empty((T, d))  # (T, d)
    table[:, 0::2] = np.sin(angles)
    table[:, 1::2] = np.cos(angles[:, :d // 2])
    return table


def rope_tables(T, d):
    """(cos, sin), each (T, d) float64: the rotary angle pos / 10000^(2i/d) of channel pair i at position pos,
    written into both channels of the pair (2i and 2i + 1). d must be even (ModelConfig.checked sees to it).

    >>> cos, sin = rope_tables(2, 4)
    >>> sin.round(4)
    array([[0.    , 0.    , 0.    , 0.    ],
           [0.8415, 0.8415, 0.01  , 0.01  ]])
    """
    angles = np.arange(T)[:, None] * ROPE_BASE ** (-np.arange(0, d, 2) / d)  # (T, d / 2)
    angles = np.repeat(angles, 2, axis=1)  # (T, d) each pair's angle twice
    return np.cos(angles), np.sin(angles)


def turn_pairs(x, out=None):
    """Each channel pair (a, b) of x (..., d) turned a quarter turn, to (-b, a): written into out when given (a
    workspace's array, in numpy_fast), else into a new array.

    >>> turn_pairs(np.array([1.0, 2.0, 3.0, 4.0]))
    array([-2.,  1., -4.,  3.])
    """
    out = np.empty_like(x) if out is None else out  # (..., d)
    np.negative(x[..., 1::2], out=out[..., 0::2])  # (..., d / 2) each pair's -b first
    out[..., 1::2] = x[..., 0::2]  # (..., d / 2) then its a
    return out


def rope_forward(x, cos, sin):
    """x (..., T, d) with each channel pair (a, b) turned by its angle: (a cos - b sin, a sin + b cos).

    >>> cos, sin = rope_tables(2, 2)
    >>> rope_forward(np.array([[1.0, 0.0], [1.0, 0.0]]), cos, sin).round(4)  # position 1 turns by 1 radian
    array([[1.    , 0.    ],
           [0.5403, 0.8415]])
    """
    return x * cos + turn_pairs(x) * sin  # (..., T, d)


def rope_backward(dout, cos, sin):
    """The gradient through rope_forward: each pair turned back by its angle (a rotation's inverse is its transpose).

    >>> cos, sin = rope_tables(2, 2)
    >>> x = np.array([[1.0, 2.0], [3.0, 4.0]])
    >>> np.allclose(rope_backward(rope_forward(x, cos, sin), cos, sin), x)
    True
    """
    return dout * cos - turn_pairs(dout) * sin  # (..., T, d)


# ----------------------------------------------------------------------------------------------------------------
# Layer norm: each row to mean 0 and variance 1, then a gain g and a bias b per column


def layernorm_forward(x, g, b):
    """Normalise each row of x (..., n); return (out, cache).

    >>> out, _ = layernorm_forward(np.array([[1.0, 3.0]]), np.ones(2), np.zeros(2))
    >>> out.round(4)
    array([[-1.,  1.]])
    """
    centred = x - x.mean(-1, keepdims=True)  # (..., n)
    std = np.sqrt((centred * centred).mean(-1, keepdims=True) + EPS)  # (..., 1)
    xhat = centred / std  # (..., n)
    return g * xhat + b, {"xhat": xhat, "std": std}  # (..., n)


def layernorm_backward(dy, g, cache):
    """Gradients (dx, dg, db) of layer norm, given dy (..., n) = d loss / d out.

    With u = dy * g, each row's dx = (u - mean(u) - xhat * mean(u * xhat)) / sqrt(var + EPS).

    >>> _, c = layernorm_forward(np.array([[1.0, 3.0]]), np.ones(2), np.zeros(2))
    >>> dx, dg, db = layernorm_backward(np.array([[1.0, 1.0]]), np.ones(2), c)
    >>> dx, db
    (array([[0., 0.]]), array([1., 1.]))
    """
    xhat, std, n = cache["xhat"], cache["std"], len(g)
    u = dy * g  # (..., n)
    dx = (u - u.mean(-1, keepdims=True) - xhat * (u * xhat).mean(-1, keepdims=True)) / std  # (..., n)
    dg = (dy * xhat).reshape(-1, n).sum(0)  # (n,) summed over every row
    db = dy.reshape(-1, n).sum(0)  # (n,)
    return dx, dg, db


# ----------------------------------------------------------------------------------------------------------------
# Causal self-attention, heads of width d / heads: position i reads positions 0..i only


def split_heads(x, heads):
    """x (..., T, d) as (..., heads, T, d / heads): head h gets channels h d/heads .. (h + 1) d/heads - 1. With one
    head, x itself: no heads axis, the shapes of model.py.

    >>> split_heads(np.arange(8.0).reshape(2, 4), 2)  # 2 positions, 2 heads of width 2
    array([[[0., 1.],
            [4., 5.]],
    <BLANKLINE>
           [[2., 3.],
            [6., 7.]]])
    """
    if heads == 1:
        return x
    *lead, T, d = x.shape
    return x.reshape(*lead, T, heads, d // heads).swapaxes(-2, -3)  # (..., nh, T, dh)


def merge_heads(x, heads):
    """The heads side by side again: (..., heads, T, d / heads) -> (..., T, d), the inverse of split_heads.

    >>> x = np.arange(8.0).reshape(2, 4)
    >>> np.array_equal(merge_heads(split_heads(x, 2), 2), x)
    True
    """
    if heads == 1:
        return x
    *lead, nh, T, dh = x.shape
    return x.swapaxes(-2, -3).reshape(*lead, T, nh * dh)  # (..., T, d)


def attention_forward(params, x, config):
    """Causal attention of x (..., T, d) with config.heads heads; return ((attn v) Wo, cache). cache["weights"] is
    (..., T, T) for one head, (..., heads, T, T) for more.

    The heads are docs/growing.md's ("The sizes", `split_heads`); with the "rope" scheme, q and k are turned after
    the projections (`rope_forward`; docs/positions.md, "Four schemes").

    >>> config = ModelConfig(vocab=96, d=4, hidden=8, max_len=8)
    >>> p = init_params(config, seed=3)
    >>> out, c = attention_forward(p, np.array([[1.0, 0.0, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0]]), config)
    >>> c["weights"][0]
    array([1., 0.])
    >>> attention_forward(p, np.zeros((3, 5, 4)), ModelConfig(96, 4, 8, 8, heads=2))[1]["weights"].shape
    (3, 2, 5, 5)
    """
    heads = config.heads
    T, d = x.shape[-2:]
    width = d // heads  # dh, the width of one head
    q = split_heads(x @ params["Wq"], heads)  # (B, nh, T, dh)
    k = split_heads(x @ params["Wk"], heads)  # (B, nh, T, dh)
    v = split_heads(x @ params["Wv"], heads)  # (B, nh, T, dh)
    turn = None
    if config.positions == "rope":
        turn = [t.astype(x.dtype) for t in rope_tables(T, width)]  # (T, dh) cos and (T, dh) sin
        q, k = rope_forward(q, *turn), rope_forward(k, *turn)  # (B, nh, T, dh) each
    scores = q @ k.swapaxes(-1, -2) / math.sqrt(width)  # (B, nh, T, T)
    future = np.triu(np.ones((T, T), dtype=bool), 1)  # (T, T) True where key j comes after query i
    scores = np.where(future, -np.inf, scores)  # (B, nh, T, T) the mask: exp(-inf) is exactly 0
    e = np.exp(scores - scores.max(-1, keepdims=True))  # (B, nh, T, T)
    weights = e / e.sum(-1, keepdims=True)  # (B, nh, T, T) each query's softmax over the keys, in each head
    ctx = merge_heads(weights @ v, heads)  # (B, T, d) the heads' outputs side by side
    out = ctx @ params["Wo"]  # (B, T, d)
    return out, {"x": x, "q": q, "k": k, "v": v, "turn": turn, "weights": weights, "ctx": ctx, "heads": heads}


def attention_backward(params, cache, dout):
    """Gradients of attention: dout (..., T, d) -> ({"Wq", "Wk", "Wv", "Wo"}, dx (..., T, d)).

    >>> config = ModelConfig(vocab=96, d=4, hidden=8, max_len=8)
    >>> p = init_params(config, seed=3)
    >>> _, c = attention_forward(p, np.array([[1.0, 0.0, 0.0, 0.0]]), config)
    >>> grads, dx = attention_backward(p, c, np.array([[1.0, 0.0, 0.0, 0.0]]))
    >>> sorted(grads), dx.shape
    (['Wk', 'Wo', 'Wq', 'Wv'], (1, 4))
    """
    x, q, k, v, weights, ctx, heads = (cache[n] for n in ("x", "q", "k", "v", "weights", "ctx", "heads"))
    d, width = x.shape[-1], q.shape[-1]
    dctx = split_heads(dout @ params["Wo"].T, heads)  # (B, nh, T, dh)

    # through the weighted sum ctx_i = sum_j w_ij v_j, then through each query's softmax (1 / sqrt(dh) included),
    # in every head at once
    dweights = dctx @ v.swapaxes(-1, -2)  # (B, nh, T, T)
    dv = weights.swapaxes(-1, -2) @ dctx  # (B, nh, T, dh)
    dscores = weights * (dweights - (weights * dweights).sum(-1, keepdims=True)) / math.sqrt(width)  # (B, nh, T, T)
    dq = dscores @ k  # (B, nh, T, dh)
    dk = dscores.swapaxes(-1, -2) @ q  # (B, nh, T, dh)
    if cache["turn"] is not None:  # q and k were turned: turn their gradients back
        dq, dk = rope_backward(dq, *cache["turn"]), rope_backward(dk, *cache["turn"])  # (B, nh, T, dh) each
    dq, dk, dv = (merge_heads(t, heads) for t in (dq, dk, dv))  # (B, T, d) each

    rows = x.reshape(-1, d)  # (B T, d) every position of every sequence
    grads = {
        "Wq": rows.T @ dq.reshape(-1, d),  # (d, d)
        "Wk": rows.T @ dk.reshape(-1, d),  # (d, d)
        "Wv": rows.T @ dv.reshape(-1, d),  # (d, d)
        "Wo": ctx.reshape(-1, d).T @ dout.reshape(-1, d),  # (d, d)
    }
    dx = dq @ params["Wq"].T + dk @ params["Wk"].T + dv @ params["Wv"].T  # (B, T, d) x feeds q, k and v
    return grads, dx


# ----------------------------------------------------------------------------------------------------------------
# One pre-norm block: attention and MLP, each with a skip path


def block_forward(params, x, config):
    """One block on the stream x (..., T, d), with params its tensors by model.py's names (`config.block_params`):
    return (the stream after it, cache).

    >>> config = ModelConfig(vocab=96, d=4, hidden=8, max_len=8)
    >>> x2, c = block_forward(init_params(config, seed=3), np.ones((2, 4)), config)
    >>> x2.shape, sorted(c)
    ((2, 4), ['act', 'att', 'h1', 'h2', 'ln1', 'ln2', 'pre', 'x1', 'x2'])
    """
    h1, ln1 = layernorm_forward(x, params["ln1_g"], params["ln1_b"])  # (B, T, d)
    a, att = attention_forward(params, h1, config)  # (B, T, d)
    x1 = x + a  # (B, T, d) skip path 1
    h2, ln2 = layernorm_forward(x1, params["ln2_g"], params["ln2_b"])  # (B, T, d)
    pre = h2 @ params["W1"] + params["b1"]  # (B, T, H)
    act = np.maximum(pre, 0.0)  # (B, T, H) ReLU
    m = act @ params["W2"] + params["b2"]  # (B, T, d)
    x2 = x1 + m  # (B, T, d) skip path 2
    return x2, {"h1": h1, "ln1": ln1, "att": att, "x1": x1, "h2": h2, "ln2": ln2, "pre": pre, "act": act, "x2": x2}


def block_backward(params, cache, dx2):
    """Gradients of one block, given dx2 (..., T, d) = d loss / d (the stream after it): (its gradients by
    model.py's names, the gradient of the stream before it).

    >>> config = ModelConfig(vocab=96, d=4, hidden=8, max_len=8)
    >>> p = init_params(config, seed=3)
    >>> _, c = block_forward(p, np.ones((2, 4)), config)
    >>> g, dx = block_backward(p, c, np.ones((2, 4)))
    >>> from oneblock.config import BLOCK_NAMES
    >>> sorted(g) == sorted(BLOCK_NAMES), dx.shape
    (True, (2, 4))
    """
    d, hidden = dx2.shape[-1], params["b1"].shape[0]
    g = {}
    # x2 = x1 + m: the gradient goes to the MLP branch and to the skip path unchanged
    dm = dx2  # (B, T, d)
    g["b2"] = dm.reshape(-1, d).sum(0)  # (d,)
    g["W2"] = cache["act"].reshape(-1, hidden).T @ dm.reshape(-1, d)  # (H, d)
    dact = dm @ params["W2"].T  # (B, T, H)
    dpre = dact * (cache["pre"] > 0.0)  # (B, T, H) ReLU: the gradient passes where the input was positive
    g["b1"] = dpre.reshape(-1, hidden).sum(0)  # (H,)
    g["W1"] = cache["h2"].reshape(-1, d).T @ dpre.reshape(-1, hidden)  # (d, H)
    dh2 = dpre @ params["W1"].T  # (B, T, d)
    dx1_mlp, g["ln2_g"], g["ln2_b"] = layernorm_backward(dh2, params["ln2_g"], cache["ln2"])  # (B, T, d)
    dx1 = dx2 + dx1_mlp  # (B, T, d) skip path 2: both contributions added

    # x1 = x + attention(LayerNorm(x)): again two paths
    att_grads, dh1 = attention_backward(params, cache["att"], dx1)  # (B, T, d)
    dx_att, g["ln1_g"], g["ln1_b"] = layernorm_backward(dh1, params["ln1_g"], cache["ln1"])  # (B, T, d)
    dx = dx1 + dx_att  # (B, T, d) skip path 1: both contributions added
    return {**att_grads, **g}, dx


# ----------------------------------------------------------------------------------------------------------------
# The model: embeddings, the blocks, final layer norm, logits


def forward(params, ids, config):
    """Logits (T, V) or (B, T, V) for token IDs of shape (T,) or (B, T), and the cache the backward pass needs.

    config: the ModelConfig of params, whose blocks, heads and position scheme the pass follows.

    The cache holds the config, x0, hf, lnf, "blocks" (one cache per block, see `block_forward`) and, under
    model.py's names (h1, att, x1, h2, act, x2, ...), the first block's: with one block, model.py's cache.

    >>> config = ModelConfig(vocab=96, d=4, hidden=8, max_len=8)
    >>> logits, cache = forward(init_params(config, seed=3), np.array([1, 2, 3]), config)
    >>> logits.shape, cache["att"]["weights"].shape, cache["act"].shape
    ((3, 96), (3, 3), (3, 8))
    """
    check_params(params, config)
    scheme = config.positions
    ids = check_ids(ids, config.vocab)
    check_length(ids.shape, scheme, config.max_len)
    T = ids.shape[-1]

    x0 = params["tok_emb"][ids]  # (B, T, d)
    if scheme == "learned":
        x0 = x0 + params["pos_emb"][:T]  # (B, T, d)
    elif scheme == "sinusoidal":
        x0 = x0 + sinusoid_table(T, config.d).astype(x0.dtype)  # (B, T, d) a fixed table, no parameters
    x, caches = x0, []
    for block in range(config.blocks):
        x, block_cache = block_forward(block_params(params, block), x, config)  # (B, T, d)
        caches.append(block_cache)
    hf, lnf = layernorm_forward(x, params["lnf_g"], params["lnf_b"])  # (B, T, d)
    logits = hf @ params["W_out"] + params["b_out"]  # (B, T, V)

    cache = {"ids": ids, "config": config, "x0": x0, **caches[0], "blocks": caches, "hf": hf, "lnf": lnf}
    return logits, cache


# ----------------------------------------------------------------------------------------------------------------
# The loss: mean cross-entropy of the next token


def loss_and_dlogits(logits, targets):
    """Mean over all positions of -log softmax(logits[..., t, :])[target], and its gradient (softmax - onehot) / N,
    N = the number of positions. logits (T, V) or (B, T, V), targets of the same leading shape.

    >>> loss, dlogits = loss_and_dlogits(np.array([[0.0, 0.0]]), np.array([1]))
    >>> round(loss, 6), dlogits
    (0.693147, array([[ 0.5, -0.5]]))
    """
    targets = check_targets(targets, logits)
    N = targets.size
    top = logits.max(-1, keepdims=True)  # (B, T, 1)
    e = np.exp(logits - top)  # (B, T, V)
    z = e.sum(-1, keepdims=True)  # (B, T, 1)
    picked = np.take_along_axis(logits, targets[..., None], -1)  # (B, T, 1) each target's logit
    loss = float((top + np.log(z) - picked).sum()) / N
    onehot = np.eye(logits.shape[-1], dtype=logits.dtype)[targets]  # (B, T, V)
    return loss, (e / z - onehot) / N  # (B, T, V)


def sequence_loss(params, ids, targets, config):
    """The loss of predicting targets from ids, as one float (config as in `forward`).

    >>> config = ModelConfig(vocab=96, d=4, hidden=8, max_len=8)
    >>> round(sequence_loss(init_params(config, seed=3), np.array([1, 2]), np.array([2, 3]), config), 2)
    4.55
    """
    logits, _ = forward(params, ids, config)
    return loss_and_dlogits(logits, targets)[0]


# ----------------------------------------------------------------------------------------------------------------
# The backward pass of the whole model, last layer first


def backward(params, cache, dlogits):
    """One gradient per parameter (same names, shapes and dtype), given dlogits = d loss / d logits, after a forward
    pass whose cache holds the config.

    >>> config = ModelConfig(vocab=96, d=4, hidden=8, max_len=8)
    >>> p = init_params(config, seed=3)
    >>> logits, cache = forward(p, np.array([1, 2]), config)
    >>> _, dlogits = loss_and_dlogits(logits, np.array([2, 3]))
    >>> g = backward(p, cache, dlogits)
    >>> list(g) == list(p), g["W1"].shape
    (True, (4, 8))
    """
    config = cache["config"]
    try:
        check_params(params, config)
    except ValueError as e:
        raise ValueError(f"the parameters are not those of the cache's forward pass, of {config.describe()}: {e}"
                         ) from None
    vocab, d, max_len = config.vocab, config.d, config.max_len
    ids = cache["ids"]  # (B, T)
    dlogits = np.asarray(dlogits)
    if dlogits.shape[-1:] != (vocab,) or dlogits.size != ids.size * vocab:
        raise ValueError(f"dlogits of shape {dlogits.shape} do not match the {ids.size} positions and {vocab} tokens")
    dlogits = dlogits.reshape(*ids.shape, vocab)  # (B, T, V)
    T = ids.shape[-1]
    g = {}

    # logits = LayerNorm(x) W_out + b_out, x the stream after the last block
    g["b_out"] = dlogits.reshape(-1, vocab).sum(0)  # (V,) summed over every position
    g["W_out"] = cache["hf"].reshape(-1, d).T @ dlogits.reshape(-1, vocab)  # (d, V)
    dhf = dlogits @ params["W_out"].T  # (B, T, d)
    dx, g["lnf_g"], g["lnf_b"] = layernorm_backward(dhf, params["lnf_g"], cache["lnf"])  # (B, T, d)

    # the blocks, last first: each takes the gradient of the stream after it and gives the one before it
    for block in reversed(range(config.blocks)):
        block_grads, dx = block_backward(block_params(params, block), cache["blocks"][block], dx)  # (B, T, d)
        g.update({prefix(block) + name: t for name, t in block_grads.items()})
    dx0 = dx  # (B, T, d)

    # x0 = tok_emb[ids] + pos_emb[0:T] (or the fixed table, or nothing): a token's row collects every position that
    # used it
    d_tok = np.zeros((vocab, d), dtype=dx0.dtype)  # (V, d)
    np.add.at(d_tok, ids, dx0)  # row ids[b, t] += dx0[b, t], once for every position
    d_pos = np.zeros((max_len, d), dtype=dx0.dtype)  # (L, d) rows past T stay exactly zero
    if config.positions == "learned":
        d_pos[:T] = dx0.reshape(-1, T, d).sum(0)  # (T, d) summed over the sequences

    grads = {"tok_emb": d_tok, "pos_emb": d_pos, **g}
    return {name: grads[name] for name in params}  # same order as the parameters


def loss_and_grads(params, ids, targets, config):
    """The mean loss over every position of ids (T,) or (B, T), and one gradient per parameter: what a training step
    needs (config as in `forward`; in a loop, numpy_fast's Workspace computes the same into arrays made once).

    >>> config = ModelConfig(vocab=96, d=4, hidden=8, max_len=8)
    >>> loss, grads = loss_and_grads(init_params(config, seed=3), np.array([[1, 2]]), np.array([[2, 3]]), config)
    >>> round(loss, 2), grads["tok_emb"].shape
    (4.55, (96, 4))
    """
    logits, cache = forward(params, ids, config)
    loss, dlogits = loss_and_dlogits(logits, targets)
    return loss, backward(params, cache, dlogits)
