"""A one-block transformer language model in plain Python, with its backward pass written by hand.

Read it top to bottom: small list helpers, the parameters, layer norm, attention, the whole model, the loss, and the
backward pass of the whole model. Every sum of floats goes through `math.fsum`, which rounds the exact sum once, so
no result depends on the order of the terms: that is what makes the causality and word-order facts bit-exact.

Shape legend, used in the comments on every line that makes a tensor:
    T = positions in the sequence, d = model width, H = hidden width of the MLP, V = vocabulary size,
    L = max_len, the number of learned positions.
A matrix is a list of row lists, a vector a flat list of floats.

    >>> p = init_params(vocab=96, d=16, hidden=64, max_len=64, seed=3)
    >>> count_params(p)
    7440
    >>> logits, cache = forward(p, [5, 17, 42])
    >>> shape(logits)
    (3, 96)
"""

import math
import random
from math import fsum
from operator import mul

EPS = 1e-5  # layer norm's guard against dividing by zero; it keeps the normalised variance just below 1


# ----------------------------------------------------------------------------------------------------------------
# Small list helpers


def shape(x):
    """The shape of a nested list, read along its first elements.

    >>> shape([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    (2, 3)
    >>> shape([1.0, 2.0])
    (2,)
    """
    dims = []
    while isinstance(x, list):
        dims.append(len(x))
        if not x:
            break
        x = x[0]
    return tuple(dims)


def zeros(rows, cols):
    """A rows x cols matrix of 0.0.

    >>> zeros(2, 3)
    [[0.0, 0.0, 0.0], [0.0, 0.0, 0.0]]
    """
    return [[0.0] * cols for _ in range(rows)]


def transpose(a):
    """Rows become columns.

    >>> transpose([[1, 2, 3], [4, 5, 6]])
    [[1, 4], [2, 5], [3, 6]]
    """
    return [list(col) for col in zip(*a)]


def matmul(a, b):
    """Matrix product of a (n, k) and b (k, m), each entry one exact-rounded sum.

    >>> matmul([[1.0, 2.0]], [[3.0], [4.0]])
    [[11.0]]
    """
    cols = transpose(b)  # (m, k)
    return [[fsum(map(mul, row, col)) for col in cols] for row in a]


def matmul_bt(a, b):
    """a times b transposed: a (n, k), b (m, k) -> (n, m). Used where b^T would only be transposed back.

    >>> matmul_bt([[1.0, 2.0]], [[3.0, 4.0], [5.0, 6.0]])
    [[11.0, 17.0]]
    """
    return [[fsum(map(mul, row, other)) for other in b] for row in a]


def linear(x, w, b):
    """x w + b, where the bias is one more term of each exact sum: x (n, k), w (k, m), b (m,) -> (n, m).

    >>> linear([[1.0, 2.0]], [[3.0], [4.0]], [0.5])
    [[11.5]]
    """
    cols = transpose(w)  # (m, k)
    return [[fsum([*map(mul, row, col), bias]) for col, bias in zip(cols, b)] for row in x]


def add(a, b):
    """Elementwise sum of two matrices. One addition of two floats is already exact-rounded, like fsum.

    >>> add([[1.0, 2.0]], [[0.5, 0.25]])
    [[1.5, 2.25]]
    """
    return [[x + y for x, y in zip(ra, rb)] for ra, rb in zip(a, b)]


def column_sums(a):
    """The exact-rounded sum of each column: a (n, m) -> (m,).

    >>> column_sums([[1.0, 2.0], [3.0, 4.0]])
    [4.0, 6.0]
    """
    return [fsum(col) for col in zip(*a)]


# ----------------------------------------------------------------------------------------------------------------
# Parameters

# name -> shape, in the order of the parameter dict; V, d, H and L are filled in from a config
PARAM_SHAPES = {
    "tok_emb": ("V", "d"),
    "pos_emb": ("L", "d"),
    "ln1_g": ("d",),
    "ln1_b": ("d",),
    "Wq": ("d", "d"),
    "Wk": ("d", "d"),
    "Wv": ("d", "d"),
    "Wo": ("d", "d"),
    "ln2_g": ("d",),
    "ln2_b": ("d",),
    "W1": ("d", "H"),
    "b1": ("H",),
    "W2": ("H", "d"),
    "b2": ("d",),
    "lnf_g": ("d",),
    "lnf_b": ("d",),
    "W_out": ("d", "V"),
    "b_out": ("V",),
}


def param_shapes(vocab, d, hidden, max_len):
    """Every parameter's shape for a config.

    >>> param_shapes(96, 4, 8, 8)["W1"]
    (4, 8)
    """
    sizes = {"V": vocab, "d": d, "H": hidden, "L": max_len}
    return {name: tuple(sizes[s] for s in dims) for name, dims in PARAM_SHAPES.items()}


def init_params(vocab, d, hidden, max_len, seed):
    """Fresh parameters: matrices gauss(0, 0.02) drawn in dict order row by row, gains 1.0, biases 0.0.

    >>> p = init_params(vocab=96, d=4, hidden=8, max_len=8, seed=3)
    >>> shape(p["pos_emb"]), p["ln1_g"]
    ((8, 4), [1.0, 1.0, 1.0, 1.0])
    """
    rng = random.Random(seed)
    params = {}
    for name, dims in param_shapes(vocab, d, hidden, max_len).items():
        if len(dims) == 2:
            params[name] = [[rng.gauss(0.0, 0.02) for _ in range(dims[1])] for _ in range(dims[0])]
        else:
            params[name] = [1.0 if name.endswith("_g") else 0.0] * dims[0]
    return params


def count_params(params):
    """The number of floats in a parameter dict.

    >>> count_params({"w": [[1.0, 2.0], [3.0, 4.0]], "b": [0.0, 0.0]})
    6
    """
    return sum(math.prod(shape(t)) for t in params.values())


def config_of(params):
    """Read (vocab, d, hidden, max_len) off a parameter dict, and check every tensor has the shape they imply.

    >>> config_of(init_params(vocab=96, d=4, hidden=8, max_len=8, seed=3))
    (96, 4, 8, 8)
    """
    missing = [name for name in PARAM_SHAPES if name not in params]
    if missing:
        raise ValueError(f"parameter dict is missing tensors: {missing}")
    extra = [name for name in params if name not in PARAM_SHAPES]
    if extra:
        raise ValueError(f"parameter dict has unknown tensors: {extra}")
    vocab, d = _matrix_shape("tok_emb", params["tok_emb"])
    max_len = len(params["pos_emb"])
    hidden = len(params["b1"]) if isinstance(params["b1"], list) else -1
    for name, want in param_shapes(vocab, d, hidden, max_len).items():
        t = params[name]
        got = _matrix_shape(name, t) if len(want) == 2 else _vector_shape(name, t)
        if got != want:
            raise ValueError(f"parameter {name} has shape {got}, expected {want}")
    return vocab, d, hidden, max_len


def _matrix_shape(name, t):
    """(rows, cols) of a list of equally long row lists, else a ValueError naming the tensor."""
    if not isinstance(t, list) or not t or not all(isinstance(r, list) for r in t):
        raise ValueError(f"parameter {name} should be a non-empty list of row lists")
    widths = {len(r) for r in t}
    if len(widths) != 1:
        raise ValueError(f"parameter {name} has rows of different lengths {sorted(widths)}")
    return len(t), widths.pop()


def _vector_shape(name, t):
    """(length,) of a flat list of numbers, else a ValueError naming the tensor."""
    if not isinstance(t, list) or any(isinstance(x, list) for x in t):
        raise ValueError(f"parameter {name} should be a flat list of numbers")
    return (len(t),)


def check_ids(ids, vocab, what="token IDs"):
    """Return ids as a list after checking each is a plain int in [0, vocab); bad input is a ValueError.

    >>> check_ids((1, 2), 96)
    [1, 2]
    """
    if isinstance(ids, (str, bytes)) or not hasattr(ids, "__iter__"):
        raise ValueError(f"{what} should be a list of ints, got {type(ids).__name__} {ids!r}")
    ids = list(ids)
    for i, x in enumerate(ids):
        if type(x) is not int:  # bool is an int subclass but not an ID; floats and strings are not IDs either
            raise ValueError(f"{what} should be plain ints, got {x!r} ({type(x).__name__}) at position {i}")
    bad = [x for x in ids if not 0 <= x < vocab]
    if bad:
        raise ValueError(f"{what} outside the vocabulary of size {vocab}: {bad[:5]}")
    return ids


# ----------------------------------------------------------------------------------------------------------------
# Layer norm: each row to mean 0 and variance 1, then a gain g and a bias b per column


def layernorm_forward(x, g, b):
    """Normalise each row of x (T, n); return (out, cache).

    >>> out, _ = layernorm_forward([[1.0, 3.0]], [1.0, 1.0], [0.0, 0.0])
    >>> [round(v, 4) for v in out[0]]
    [-1.0, 1.0]
    """
    n = len(g)
    out, xhat, std = [], [], []
    for row in x:
        mu = fsum(row) / n
        centred = [v - mu for v in row]  # (n,)
        s = math.sqrt(fsum(c * c for c in centred) / n + EPS)
        xh = [c / s for c in centred]  # (n,)
        out.append([gi * xi + bi for gi, xi, bi in zip(g, xh, b)])  # (n,)
        xhat.append(xh)
        std.append(s)
    return out, {"xhat": xhat, "std": std}  # (T, n), {(T, n), (T,)}


def layernorm_backward(dy, g, cache):
    """Gradients (dx, dg, db) of layer norm, given dy (T, n) = d loss / d out.

    With u = dy * g, each row's dx = (u - mean(u) - xhat * mean(u * xhat)) / sqrt(var + EPS).

    >>> _, c = layernorm_forward([[1.0, 3.0]], [1.0, 1.0], [0.0, 0.0])
    >>> dx, dg, db = layernorm_backward([[1.0, 1.0]], [1.0, 1.0], c)
    >>> dx, db
    ([[0.0, 0.0]], [1.0, 1.0])
    """
    n = len(g)
    dx = []
    for dyr, xh, s in zip(dy, cache["xhat"], cache["std"]):
        u = [a * gi for a, gi in zip(dyr, g)]  # (n,)
        mean_u = fsum(u) / n
        mean_ux = fsum(map(mul, u, xh)) / n
        dx.append([(ui - mean_u - xi * mean_ux) / s for ui, xi in zip(u, xh)])  # (n,)
    dg = column_sums([[a * xi for a, xi in zip(dyr, xh)] for dyr, xh in zip(dy, cache["xhat"])])  # (n,)
    db = column_sums(dy)  # (n,)
    return dx, dg, db


# ----------------------------------------------------------------------------------------------------------------
# Causal self-attention, one head of width d: position i reads positions 0..i only


def attention_forward(params, x):
    """Causal single-head attention of x (T, d); return ((attn v) Wo, cache). cache["weights"] is (T, T).

    >>> p = init_params(vocab=96, d=4, hidden=8, max_len=8, seed=3)
    >>> out, c = attention_forward(p, [[1.0, 0.0, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0]])
    >>> c["weights"][0]
    [1.0, 0.0]
    """
    T, d = len(x), len(x[0])
    scale = 1.0 / math.sqrt(d)
    q = matmul(x, params["Wq"])  # (T, d)
    k = matmul(x, params["Wk"])  # (T, d)
    v = matmul(x, params["Wv"])  # (T, d)
    v_cols = transpose(v)  # (d, T)
    weights, ctx = [], []
    for i in range(T):
        scores = [fsum(map(mul, q[i], k[j])) * scale for j in range(i + 1)]  # (i+1,) the mask: j > i is never read
        top = max(scores)
        e = [math.exp(s - top) for s in scores]  # (i+1,)
        z = fsum(e)
        w = [ej / z for ej in e]  # (i+1,)
        ctx.append([fsum(map(mul, w, col[: i + 1])) for col in v_cols])  # (d,)
        weights.append(w + [0.0] * (T - i - 1))  # (T,)
    out = matmul(ctx, params["Wo"])  # (T, d)
    return out, {"x": x, "q": q, "k": k, "v": v, "weights": weights, "ctx": ctx}


def attention_backward(params, cache, dout):
    """Gradients of attention: dout (T, d) -> ({"Wq", "Wk", "Wv", "Wo"}, dx (T, d)).

    >>> p = init_params(vocab=96, d=4, hidden=8, max_len=8, seed=3)
    >>> _, c = attention_forward(p, [[1.0, 0.0, 0.0, 0.0]])
    >>> grads, dx = attention_backward(p, c, [[1.0, 0.0, 0.0, 0.0]])
    >>> sorted(grads), shape(dx)
    (['Wk', 'Wo', 'Wq', 'Wv'], (1, 4))
    """
    x, q, k, v, weights, ctx = (cache[n] for n in ("x", "q", "k", "v", "weights", "ctx"))
    T, d = len(x), len(x[0])
    scale = 1.0 / math.sqrt(d)
    dWo = matmul(transpose(ctx), dout)  # (d, d)
    dctx = matmul_bt(dout, params["Wo"])  # (T, d)

    # through the weighted sum ctx[i] = sum_j w[i][j] v[j], then through each row's softmax
    dscores = []
    for i in range(T):
        w = weights[i][: i + 1]  # (i+1,)
        dw = [fsum(map(mul, dctx[i], v[j])) for j in range(i + 1)]  # (i+1,)
        mean_dw = fsum(map(mul, w, dw))
        dscores.append([wj * (dwj - mean_dw) * scale for wj, dwj in zip(w, dw)])  # (i+1,) the 1/sqrt(d) included
    dctx_cols = transpose(dctx)  # (d, T)
    q_cols, k_cols = transpose(q), transpose(k)  # (d, T) each
    dv, dk, dq = [], [], []
    for j in range(T):
        w_col = [weights[i][j] for i in range(j, T)]  # (T-j,) who read position j
        ds_col = [dscores[i][j] for i in range(j, T)]  # (T-j,)
        dv.append([fsum(map(mul, w_col, col[j:])) for col in dctx_cols])  # (d,)
        dk.append([fsum(map(mul, ds_col, col[j:])) for col in q_cols])  # (d,)
        dq.append([fsum(map(mul, dscores[j], col[: j + 1])) for col in k_cols])  # (d,)

    x_cols = transpose(x)  # (d, T)
    grads = {
        "Wq": matmul(x_cols, dq),  # (d, d)
        "Wk": matmul(x_cols, dk),  # (d, d)
        "Wv": matmul(x_cols, dv),  # (d, d)
        "Wo": dWo,  # (d, d)
    }
    # x feeds q, k and v: its gradient is one exact sum over all three paths
    dqkv = [a + b + c for a, b, c in zip(dq, dk, dv)]  # (T, 3d) rows joined
    w_qkv = [a + b + c for a, b, c in zip(params["Wq"], params["Wk"], params["Wv"])]  # (d, 3d)
    dx = matmul_bt(dqkv, w_qkv)  # (T, d)
    return grads, dx


# ----------------------------------------------------------------------------------------------------------------
# The model: embeddings, one pre-norm block (attention and MLP, each with a skip path), final layer norm, logits


def forward(params, ids, use_positions=True):
    """Logits (T, V) for a list of T token IDs, and the cache the backward pass needs.

    >>> p = init_params(vocab=96, d=4, hidden=8, max_len=8, seed=3)
    >>> logits, cache = forward(p, [1, 2, 3])
    >>> shape(logits), shape(cache["att"]["weights"]), shape(cache["act"])
    ((3, 96), (3, 3), (3, 8))
    """
    vocab, d, hidden, max_len = config_of(params)
    ids = check_ids(ids, vocab)
    T = len(ids)
    if T == 0:
        raise ValueError("empty sequence: forward needs at least one token ID")
    if T > max_len:
        raise ValueError(f"sequence of {T} tokens is longer than the {max_len} positions the model has")

    x0 = [list(params["tok_emb"][i]) for i in ids]  # (T, d)
    if use_positions:
        x0 = add(x0, params["pos_emb"][:T])  # (T, d)
    h1, ln1 = layernorm_forward(x0, params["ln1_g"], params["ln1_b"])  # (T, d)
    a, att = attention_forward(params, h1)  # (T, d)
    x1 = add(x0, a)  # (T, d) skip path 1
    h2, ln2 = layernorm_forward(x1, params["ln2_g"], params["ln2_b"])  # (T, d)
    pre = linear(h2, params["W1"], params["b1"])  # (T, H)
    act = [[z if z > 0.0 else 0.0 for z in row] for row in pre]  # (T, H) ReLU
    m = linear(act, params["W2"], params["b2"])  # (T, d)
    x2 = add(x1, m)  # (T, d) skip path 2
    hf, lnf = layernorm_forward(x2, params["lnf_g"], params["lnf_b"])  # (T, d)
    logits = linear(hf, params["W_out"], params["b_out"])  # (T, V)

    cache = {"ids": ids, "use_positions": use_positions, "x0": x0, "h1": h1, "ln1": ln1, "att": att, "x1": x1,
             "h2": h2, "ln2": ln2, "pre": pre, "act": act, "x2": x2, "hf": hf, "lnf": lnf}
    return logits, cache


# ----------------------------------------------------------------------------------------------------------------
# The loss: mean cross-entropy of the next token


def loss_and_dlogits(logits, targets):
    """Mean over positions of -log softmax(logits[t])[targets[t]], and its gradient (softmax - onehot) / T.

    >>> loss, dlogits = loss_and_dlogits([[0.0, 0.0]], [1])
    >>> round(loss, 6), dlogits
    (0.693147, [[0.5, -0.5]])
    """
    T, vocab = len(logits), len(logits[0]) if logits else 0
    targets = check_ids(targets, vocab, what="target IDs")
    if len(targets) != T:
        raise ValueError(f"{T} positions but {len(targets)} targets")
    losses, dlogits = [], []
    for row, y in zip(logits, targets):
        top = max(row)
        e = [math.exp(z - top) for z in row]  # (V,)
        total = fsum(e)
        losses.append(top + math.log(total) - row[y])
        p = [ei / total for ei in e]  # (V,) softmax
        p[y] -= 1.0
        dlogits.append([pi / T for pi in p])  # (V,)
    return fsum(losses) / T, dlogits


def sequence_loss(params, ids, targets, use_positions=True):
    """The loss of predicting targets from ids, as one float.

    >>> p = init_params(vocab=96, d=4, hidden=8, max_len=8, seed=3)
    >>> round(sequence_loss(p, [1, 2], [2, 3]), 2)
    4.55
    """
    logits, _ = forward(params, ids, use_positions)
    return loss_and_dlogits(logits, targets)[0]


# ----------------------------------------------------------------------------------------------------------------
# The backward pass of the whole model, last layer first


def backward(params, cache, dlogits):
    """One gradient per parameter (same names and shapes), given dlogits (T, V) = d loss / d logits.

    >>> p = init_params(vocab=96, d=4, hidden=8, max_len=8, seed=3)
    >>> logits, cache = forward(p, [1, 2])
    >>> _, dlogits = loss_and_dlogits(logits, [2, 3])
    >>> g = backward(p, cache, dlogits)
    >>> list(g) == list(p), shape(g["W1"])
    (True, (4, 8))
    """
    vocab, d, hidden, max_len = config_of(params)
    ids = cache["ids"]
    T = len(ids)
    g = {}

    # logits = LayerNorm(x2) W_out + b_out
    g["b_out"] = column_sums(dlogits)  # (V,)
    g["W_out"] = matmul(transpose(cache["hf"]), dlogits)  # (d, V)
    dhf = matmul_bt(dlogits, params["W_out"])  # (T, d)
    dx2, g["lnf_g"], g["lnf_b"] = layernorm_backward(dhf, params["lnf_g"], cache["lnf"])  # (T, d)

    # x2 = x1 + m: the gradient goes to the MLP branch and to the skip path unchanged
    dm = dx2  # (T, d)
    g["b2"] = column_sums(dm)  # (d,)
    g["W2"] = matmul(transpose(cache["act"]), dm)  # (H, d)
    dact = matmul_bt(dm, params["W2"])  # (T, H)
    dpre = [[da if z > 0.0 else 0.0 for da, z in zip(ra, rz)] for ra, rz in zip(dact, cache["pre"])]  # (T, H) ReLU
    g["b1"] = column_sums(dpre)  # (H,)
    g["W1"] = matmul(transpose(cache["h2"]), dpre)  # (d, H)
    dh2 = matmul_bt(dpre, params["W1"])  # (T, d)
    dx1_mlp, g["ln2_g"], g["ln2_b"] = layernorm_backward(dh2, params["ln2_g"], cache["ln2"])  # (T, d)
    dx1 = add(dx2, dx1_mlp)  # (T, d) skip path 2: both contributions added

    # x1 = x0 + attention(LayerNorm(x0)): again two paths
    att_grads, dh1 = attention_backward(params, cache["att"], dx1)  # (T, d)
    dx0_att, g["ln1_g"], g["ln1_b"] = layernorm_backward(dh1, params["ln1_g"], cache["ln1"])  # (T, d)
    dx0 = add(dx1, dx0_att)  # (T, d) skip path 1: both contributions added

    # x0 = tok_emb[ids] + pos_emb[0:T]: a token's row collects every position that used it
    d_tok = zeros(vocab, d)  # (V, d)
    for token in set(ids):
        rows = [dx0[t] for t in range(T) if ids[t] == token]
        d_tok[token] = column_sums(rows)  # (d,)
    d_pos = zeros(max_len, d)  # (L, d) rows past T stay exactly zero
    if cache["use_positions"]:
        d_pos[:T] = [list(row) for row in dx0]

    grads = {"tok_emb": d_tok, "pos_emb": d_pos, **att_grads, **g}
    return {name: grads[name] for name in PARAM_SHAPES}  # same order as the parameters
