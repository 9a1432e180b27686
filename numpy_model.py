"""The one-block transformer of `model.py`, vectorised with NumPy and batched, with its backward pass by hand.

It mirrors `model.py` section by section and name by name; read that file first. Differences:
- IDs are an int array of shape (T,) or (B, T); every tensor gets a leading batch axis B (B = 1 for a 1-D input,
  and the outputs then drop it again). The loss is the mean over all B * T positions.
- Parameters are a dict of NumPy arrays with the same names and shapes, all float64 or all float32 (the caller
  picks; `from_lists` and `to_lists` convert to and from the reference's dict of lists).
- Sums are BLAS and NumPy sums, not `math.fsum`: results agree with the reference to about 1e-15 relative in
  float64, but they are no longer independent of the order of the terms.
- Positions come in four schemes, chosen by forward's `positions` argument (the reference has the first two):
  "learned" (the pos_emb rows, at most max_len positions), "none" (no position signal), "sinusoidal" (a fixed
  sine/cosine table added to the token embeddings) and "rope" (q and k rotated by position-dependent angles inside
  attention). The last three have no parameters of their own and read up to LONGEST positions. `pos_emb` stays in
  the parameter dict whatever the scheme, so checkpoints and shapes are the same; its gradient is 0 when unused.
- Every function takes an optional workspace `ws` (a plain dict). Without it each call allocates fresh arrays.
  With it, arrays are reused from call to call, which is what makes a training loop fast (fresh arrays of a few
  hundred KB cost page faults on every step); the price is that what a call returns is overwritten by the next
  call with the same workspace.

Shape legend, used in the comments on every line that makes a tensor:
    B = sequences in the batch, T = positions, N = B * T, d = model width, H = hidden width of the MLP,
    V = vocabulary size, L = max_len, the number of learned positions, P = d / 2 channel pairs.

Two layouts differ from the obvious one, because NumPy reduces along a long contiguous axis about 8x faster than
along a short one: the attention scores are stored key-major, (T_key, B, T_query), and for a small vocabulary
(V < 512) the logits vocabulary-major, (V, N). The arrays handed out (`logits`, `cache["att"]["weights"]`) are then
transposed views with the usual axis order.

    >>> p = init_params(vocab=96, d=16, hidden=64, max_len=64, seed=3)
    >>> count_params(p)
    7440
    >>> logits, cache = forward(p, np.array([[5, 17, 42], [1, 2, 3]]))
    >>> logits.shape, cache["att"]["weights"].shape
    ((2, 3, 96), (2, 3, 3))
"""

import functools
import math

import numpy as np

import model
from model import EPS, PARAM_SHAPES, param_shapes

DTYPES = (np.float32, np.float64)  # the parameter dtypes this path runs in
SCHEMES = ("learned", "none", "sinusoidal", "rope")  # forward's `positions`: see "Positions" below
LONGEST = 1024  # the most positions "none", "sinusoidal" and "rope" read (they have no table of learned rows)
ROPE_BASE = 10000.0  # pair i turns by pos / ROPE_BASE^(2i/d) radians; also the sinusoid table's wavelengths


# ----------------------------------------------------------------------------------------------------------------
# Workspace helpers: arrays reused from step to step when the caller passes a workspace dict


def _buf(ws, name, shape, dtype):
    """An uninitialised array: the one kept in the workspace dict ws under name, remade if the shape or dtype
    changed. (A function called without a workspace passes a fresh dict, so all its arrays are new.)

    >>> ws = {}
    >>> _buf(ws, "a", (2, 3), np.float32) is _buf(ws, "a", (2, 3), np.float32)
    True
    """
    a = ws.get(name)
    if a is None or a.shape != shape or a.dtype != dtype:
        a = ws[name] = np.empty(shape, dtype)
    return a


def _sub(ws, name):
    """The part of a workspace that one layer uses.

    >>> _sub({}, "ln1")
    {}
    """
    return ws.setdefault(name, {})


def _const(ws, name, shape, dtype, make):
    """A constant array filled from make() (anything that broadcasts to shape) when it is made, then reused from
    the workspace, so it must never be written to.

    >>> _const({}, "half", (2,), np.float64, lambda: 0.5)
    array([0.5, 0.5])
    """
    a = ws.get(name)
    if a is None or a.shape != shape or a.dtype != dtype:
        a = ws[name] = np.empty(shape, dtype)
        a[...] = make()
    return a


def _ones(ws, n, dtype):
    """n ones: `ones @ x` is the column sums of x (n, m) as one BLAS matrix-vector product, about 10x faster than
    NumPy's `x.sum(0)` at these sizes. (Likewise `x @ (ones / n)` is the mean of each row.)

    >>> _ones({}, 3, np.float64)
    array([1., 1., 1.])
    """
    return _const(ws, ("ones", n), (n,), dtype, lambda: 1.0)


def _copy(ws, name, a):
    """A contiguous copy of a, in the workspace's array for name.

    >>> _copy({}, "a", np.eye(2)[:, 1])
    array([0., 1.])
    """
    out = _buf(ws, name, a.shape, a.dtype)
    out[...] = a
    return out


def _rows_joined(M, n):
    """How many rows of an (M, n) array to view as one, for broadcasting a length-n vector along long rows.

    NumPy broadcasts with one inner loop per row; for rows of 16 floats the loop overhead costs more than the
    arithmetic, and viewing (M, n) as (M / k, k n) against the vector tiled k times makes the op about 2x faster.

    >>> _rows_joined(2048, 16), _rows_joined(63, 16)
    (64, 1)
    """
    return math.gcd(M, max(1, 1024 // n))  # k divides M, and k n stays at most about 1024 floats


def _tiled(ws, name, vec, k):
    """vec (n,) repeated k times, (k n,); vec itself when k = 1.

    >>> _tiled({}, "v", np.array([1.0, 2.0]), 2)
    array([1., 2., 1., 2.])
    """
    if k == 1:
        return vec
    out = _buf(ws, name, (k, len(vec)), vec.dtype)  # (k, n)
    out[...] = vec
    return out.reshape(k * len(vec))


def _weight_grad(x, dy, ws, name):
    """x^T dy for x (N, k), dy (N, m): the gradient of a weight (k, m) of `x @ W`.

    OpenBLAS runs these long (K = N) products up to 3x faster when the longer side of the result is its rows, so
    the product is formed in that orientation and copied into a (k, m) array if need be.

    >>> _weight_grad(np.ones((3, 1)), np.ones((3, 2)), {}, "g")
    array([[3., 3.]])
    """
    k, m = x.shape[1], dy.shape[1]
    out = _buf(ws, name, (k, m), x.dtype)  # (k, m)
    if k >= m or len(x) < 512:  # (for short products the orientation does not matter)
        return np.matmul(x.T, dy, out=out)
    out[...] = np.matmul(dy.T, x, out=_buf(ws, name + "_t", (m, k), x.dtype)).T  # (m, k) formed, then transposed
    return out


# ----------------------------------------------------------------------------------------------------------------
# Parameters: the reference's dict of lists, as arrays


def from_lists(params, dtype=np.float64):
    """The reference's dict of lists as a dict of arrays of one dtype (float64 or float32), same keys and order.

    >>> p = from_lists({"b": [1.0, 2.0]}, np.float32)
    >>> p["b"].dtype, p["b"].shape
    (dtype('float32'), (2,))
    """
    dtype = np.dtype(dtype)
    if dtype not in DTYPES:
        raise ValueError(f"parameters must be float32 or float64, got {dtype}")
    return {name: np.array(t, dtype=dtype) for name, t in params.items()}


def to_lists(arrays):
    """A dict of arrays (parameters or gradients) as the reference's dict of lists of Python floats.

    >>> to_lists({"b": np.array([1.0, 2.0])})
    {'b': [1.0, 2.0]}
    """
    return {name: np.asarray(t, dtype=np.float64).tolist() for name, t in arrays.items()}


def init_params(vocab, d, hidden, max_len, seed, dtype=np.float64):
    """The reference's initial parameters (same random draws), as arrays.

    >>> p = init_params(vocab=96, d=4, hidden=8, max_len=8, seed=3, dtype=np.float32)
    >>> p["pos_emb"].shape, p["ln1_g"]
    ((8, 4), array([1., 1., 1., 1.], dtype=float32))
    """
    return from_lists(model.init_params(vocab, d, hidden, max_len, seed), dtype)


def count_params(params):
    """The number of floats in a parameter dict.

    >>> count_params({"w": np.zeros((2, 2)), "b": np.zeros(2)})
    6
    """
    return sum(int(np.size(t)) for t in params.values())


@functools.lru_cache(maxsize=32)
def _expected(vocab, d, hidden, max_len):
    """((name, shape), ...) for a config, computed once per config (config_of runs on every step).

    >>> _expected(96, 4, 8, 8)[0]
    ('tok_emb', (96, 4))
    """
    return tuple(param_shapes(vocab, d, hidden, max_len).items())


def config_of(params):
    """Read (vocab, d, hidden, max_len) off a dict of arrays; check every tensor's type, dtype and shape.

    >>> config_of(init_params(vocab=96, d=4, hidden=8, max_len=8, seed=3))
    (96, 4, 8, 8)
    """
    if params.keys() != PARAM_SHAPES.keys():
        missing = [name for name in PARAM_SHAPES if name not in params]
        if missing:
            raise ValueError(f"parameter dict is missing tensors: {missing}")
        raise ValueError(f"parameter dict has unknown tensors: {[n for n in params if n not in PARAM_SHAPES]}")
    tok, pos, b1 = params["tok_emb"], params["pos_emb"], params["b1"]
    if not all(isinstance(t, np.ndarray) and t.ndim for t in (tok, pos, b1)) or tok.ndim != 2:
        for name in ("tok_emb", "pos_emb", "b1"):
            _check_tensor(name, params[name], None, None)
        raise ValueError(f"parameter tok_emb has shape {tok.shape}, expected (V, d)")
    dtype = tok.dtype
    if dtype not in DTYPES:
        raise ValueError(f"parameters must be float32 or float64, got {dtype} for tok_emb")
    config = (*tok.shape, b1.shape[0], pos.shape[0])  # (V, d, H, L)
    for name, want in _expected(*config):
        t = params[name]
        if type(t) is not np.ndarray or t.shape != want or t.dtype != dtype:
            _check_tensor(name, t, want, dtype)
    return config


def _check_tensor(name, t, want, dtype):
    """Raise a ValueError naming the tensor if t is no array, or (when given) has the wrong shape or dtype."""
    if not isinstance(t, np.ndarray):
        raise ValueError(f"parameter {name} should be a NumPy array, got {type(t).__name__} "
                         "(HINT: from_lists(params) converts the reference's dict of lists)")
    if want is not None and t.shape != want:
        raise ValueError(f"parameter {name} has shape {t.shape}, expected {want}")
    if dtype is not None and t.dtype != dtype:
        raise ValueError(f"parameter {name} has dtype {t.dtype}, but tok_emb has {dtype}: use one dtype")
    if t.ndim == 0:
        raise ValueError(f"parameter {name} is a scalar, expected an array")


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


# ----------------------------------------------------------------------------------------------------------------
# Positions: the four schemes, the sinusoid table and the rotary angles


def position_scheme(positions="learned", use_positions=None):
    """The scheme name for forward's `positions` argument: one of SCHEMES, or a bool as in the reference
    (True is "learned", False is "none"). The reference's keyword `use_positions` is accepted too.

    >>> position_scheme("rope"), position_scheme(False), position_scheme(use_positions=True)
    ('rope', 'none', 'learned')
    """
    if use_positions is not None:  # the reference's name for the switch, as a keyword
        if positions not in ("learned", True):
            raise ValueError(f"give positions={positions!r} or use_positions={use_positions!r}, not both")
        positions = use_positions
    if isinstance(positions, (bool, np.bool_)):
        return "learned" if positions else "none"
    if positions not in SCHEMES:
        raise ValueError(f"positions={positions!r} is no position scheme; expected one of {list(SCHEMES)}"
                         f" (or True / False, meaning 'learned' / 'none')")
    return positions


def _angles(T, d):
    """(T, P') angles pos / 10000^(2i / d) for pos = 0..T-1 and i = 0..P'-1, P' = ceil(d / 2), in float64.

    >>> _angles(2, 4).round(4)
    array([[0.  , 0.  ],
           [1.  , 0.01]])
    """
    inv_freq = ROPE_BASE ** (-np.arange(0, d, 2) / d)  # (P',) 1, then slower and slower
    return np.arange(T)[:, None] * inv_freq  # (T, P')


def sinusoid_table(T, d):
    """The fixed position table of the original transformer, (T, d) float64: PE[pos, 2i] = sin(pos / 10000^(2i/d)),
    PE[pos, 2i + 1] = cos(pos / 10000^(2i/d)).

    >>> sinusoid_table(2, 4).round(4)
    array([[0.    , 1.    , 0.    , 1.    ],
           [0.8415, 0.5403, 0.01  , 1.    ]])
    """
    angles = _angles(T, d)  # (T, P')
    table = np.empty((T, d))  # (T, d)
    table[:, 0::2] = np.sin(angles)
    table[:, 1::2] = np.cos(angles[:, :d // 2])
    return table


def rope_tables(T, d):
    """(cos, sin), each (T, d) float64: the rotary angle of channel pair i at position pos, pos / 10000^(2i/d),
    written into both channels of the pair (2i and 2i + 1). d must be even.

    >>> cos, sin = rope_tables(2, 4)
    >>> sin.round(4)
    array([[0.    , 0.    , 0.    , 0.    ],
           [0.8415, 0.8415, 0.01  , 0.01  ]])
    """
    if d % 2:
        raise ValueError(f"rope rotates pairs of channels: the width d must be even, got d = {d}")
    angles = np.repeat(_angles(T, d), 2, axis=1)  # (T, d) each pair's angle twice
    return np.cos(angles), np.sin(angles)


def _pair_turn(ws, n, dtype):
    """(n, n) J with x @ J = (-x1, x0, -x3, x2, ...): each channel pair turned by 90 degrees. So a rotation of every
    pair by its angle is x * cos + (x @ J) * sin, and its inverse (J^T = -J) is y * cos - (y * sin) @ J.

    >>> np.array([[1.0, 2.0]]) @ _pair_turn({}, 2, np.float64)
    array([[-2.,  1.]])
    """
    def make():
        J = np.zeros((n, n))  # (n, n)
        J[np.arange(1, n, 2), np.arange(0, n, 2)] = -1.0  # out[2i] = -x[2i + 1]
        J[np.arange(0, n, 2), np.arange(1, n, 2)] = 1.0  # out[2i + 1] = x[2i]
        return J

    return _const(ws, ("pair_turn", n), (n, n), dtype, make)


# ----------------------------------------------------------------------------------------------------------------
# Layer norm: each row to mean 0 and variance 1, then a gain g and a bias b per column


def _centering(ws, n, dtype):
    """The (n, n) matrix I - 1/n: `x @ C` subtracts each row's mean, as one small product (cheaper than a mean
    and a broadcast subtraction on rows of 16).

    >>> np.array([[1.0, 3.0]]) @ _centering({}, 2, np.float64)
    array([[-1.,  1.]])
    """
    return _const(ws, ("centering", n), (n, n), dtype, lambda: np.eye(n) - 1.0 / n)


def layernorm_forward(x, g, b, ws=None):
    """Normalise each row of x (..., n); return (out, cache).

    >>> out, _ = layernorm_forward(np.array([[1.0, 3.0]]), np.ones(2), np.zeros(2))
    >>> out.round(4)
    array([[-1.,  1.]])
    """
    ws = {} if ws is None else ws  # no workspace: every array is new
    n = x.shape[-1]
    x2 = x.reshape(-1, n)  # (M, n), M = every row
    M, dt = len(x2), x.dtype
    xhat = np.matmul(x2, _centering(ws, n, dt), out=_buf(ws, "xhat", (M, n), dt))  # (M, n) centred for now
    sq = np.multiply(xhat, xhat, out=_buf(ws, "sq", (M, n), dt))  # (M, n)
    mean_w = _const(ws, ("mean", n), (n,), dt, lambda: 1.0 / n)  # (n,) x @ mean_w is the mean of each row
    rstd = np.matmul(sq, mean_w, out=_buf(ws, "rstd", (M,), dt))  # (M,) the variance, for a moment
    rstd += EPS
    np.sqrt(rstd, out=rstd)
    np.divide(1.0, rstd, out=rstd)  # (M,) 1 / sqrt(var + EPS): one division per row, then products only
    xhat *= rstd[:, None]  # (M, n) normalised
    k = _rows_joined(M, n)  # out = xhat * g + b, along rows k times longer
    out = np.multiply(xhat.reshape(M // k, k * n), _tiled(ws, "g", g, k), out=_buf(ws, "out", (M // k, k * n), dt))
    out += _tiled(ws, "b", b, k)  # (M / k, k n)
    return out.reshape(x.shape), {"xhat": xhat, "rstd": rstd}  # (..., n), {(M, n), (M,)}


def layernorm_backward(dy, g, cache, ws=None):
    """Gradients (dx, dg, db) of layer norm, given dy (..., n) = d loss / d out.

    With u = dy * g, each row's dx = (u - mean(u) - xhat * mean(u * xhat)) / sqrt(var + EPS). Here u - mean(u) is
    one product, dy (g C) with the centering matrix C, and mean(u * xhat) = (dy * xhat) g / n.

    >>> _, c = layernorm_forward(np.array([[1.0, 3.0]]), np.ones(2), np.zeros(2))
    >>> dx, dg, db = layernorm_backward(np.array([[1.0, 1.0]]), np.ones(2), c)
    >>> dx, db
    (array([[0., 0.]]), array([1., 1.]))
    """
    ws = {} if ws is None else ws  # no workspace: every array is new
    xhat, rstd = cache["xhat"], cache["rstd"]  # (M, n), (M,)
    M, n = xhat.shape
    dt = xhat.dtype
    dy2 = dy.reshape(M, n)  # (M, n)
    prod = np.multiply(dy2, xhat, out=_buf(ws, "prod", (M, n), dt))  # (M, n)
    ones = _ones(ws, M, dt)  # (M,)
    dg = np.matmul(ones, prod, out=_buf(ws, "dg", (n,), dt))  # (n,) column sums
    db = np.matmul(ones, dy2, out=_buf(ws, "db", (n,), dt))  # (n,)
    g_mean = np.multiply(g, 1.0 / n, out=_buf(ws, "g_mean", (n,), dt))  # (n,)
    c = np.matmul(prod, g_mean, out=_buf(ws, "c", (M,), dt))  # (M,) mean(u * xhat)
    c *= rstd  # (M,)
    g_centering = np.multiply(g[:, None], _centering(ws, n, dt), out=_buf(ws, "gC", (n, n), dt))  # (n, n)
    dx = np.matmul(dy2, g_centering, out=_buf(ws, "dx", (M, n), dt))  # (M, n) u - mean(u)
    dx *= rstd[:, None]
    np.multiply(xhat, c[:, None], out=prod)  # (M, n) the buffer of dy * xhat, reused
    dx -= prod
    return dx.reshape(dy.shape), dg, db


# ----------------------------------------------------------------------------------------------------------------
# Causal self-attention, one head of width d: position i reads positions 0..i only


def _causal_mask(ws, T, B, dtype):
    """(T_key, B, T_query): 0 where key j <= query i, -inf where j > i; added to the key-major scores. It is kept
    at full size: adding a (T, 1, T) mask would broadcast in B T short loops, about 2x slower.

    >>> _causal_mask({}, 2, 1, np.float64)[:, 0]
    array([[  0.,   0.],
           [-inf,   0.]])
    """
    def make():
        future = np.arange(T)[:, None, None] > np.arange(T)[None, None, :]  # (T, 1, T) key j after query i
        return np.where(future, -np.inf, 0.0)  # (T, 1, T), broadcast to (T, B, T)

    return _const(ws, "mask", (T, B, T), dtype, make)


def attention_forward(params, x, ws=None, rope=False):
    """Causal single-head attention of x (B, T, d); return ((attn v) Wo, cache). cache["weights"] is (B, T, T).

    With rope=True, q and k are rotated after the projections and before the scores: channel pair i of position pos
    turns by pos / 10000^(2i/d) radians (see `rope_tables`), so a score q_i . k_j depends on the offset i - j.

    Tricks: q, k and v come from one product with [Wq / sqrt(d) | Wk | Wv] (the scale folded into Wq); the
    scores are kept key-major, st[j, b, i] = q_bi . k_bj, so that the softmax's max and sum run along the long
    axis; and for a batch q is copied transposed, because OpenBLAS's batched products run about 2.5x slower on a
    transposed view than on a contiguous copy.

    >>> p = init_params(vocab=96, d=4, hidden=8, max_len=8, seed=3)
    >>> out, c = attention_forward(p, np.array([[[1.0, 0.0, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0]]]))
    >>> c["weights"][0, 0]
    array([1., 0.])
    """
    ws = {} if ws is None else ws  # no workspace: every array is new
    B, T, d = x.shape
    N, dt = B * T, x.dtype
    w_qkv = _buf(ws, "w_qkv", (d, 3 * d), dt)  # (d, 3d)
    np.multiply(params["Wq"], 1.0 / math.sqrt(d), out=w_qkv[:, :d])
    w_qkv[:, d:2 * d] = params["Wk"]
    w_qkv[:, 2 * d:] = params["Wv"]
    qkv = np.matmul(x.reshape(N, d), w_qkv, out=_buf(ws, "qkv", (N, 3 * d), dt)).reshape(B, T, 3 * d)  # (B, T, 3d)
    q, k, v = qkv[:, :, :d], qkv[:, :, d:2 * d], qkv[:, :, 2 * d:]  # (B, T, d) each, views; q carries the scale
    qk_rot = cos = sin = None
    if rope:  # rotate q and k side by side: [q | k] * cos + ([q | k] @ J) * sin, the tables tiled twice
        cos, sin = _rope_qk_tables(ws, T, d, dt)  # (T, 2d) each
        qk_rot = _buf(ws, "qk_rot", (B, T, 2 * d), dt)  # (B, T, 2d)
        np.matmul(qkv.reshape(N, 3 * d)[:, :2 * d], _pair_turn(ws, 2 * d, dt), out=qk_rot.reshape(N, 2 * d))
        qk_rot *= sin  # (B, T, 2d) the turned pairs times sin
        qk_rot += np.multiply(qkv[:, :, :2 * d], cos, out=_buf(ws, "qk_cos", (B, T, 2 * d), dt))  # (B, T, 2d)
        q, k = qk_rot[:, :, :d], qk_rot[:, :, d:]  # (B, T, d) each, views: the rotated q and k
    q_t = _copy(ws, "q_t", q.transpose(0, 2, 1)) if B > 1 else q.transpose(0, 2, 1)  # (B, d, T)

    st = _buf(ws, "st", (T, B, T), dt)  # (T_key, B, T_query)
    np.matmul(k, q_t, out=st.transpose(1, 0, 2))  # (B, T_key, T_query) written key-major
    st += _causal_mask(ws, T, B, dt)  # (T, B, T) -inf where the key comes later: exp gives exactly 0 there
    st2 = st.reshape(T, N)  # (T_key, N) one column per query
    top = np.maximum.reduce(st2, axis=0, out=_buf(ws, "top", (N,), dt))  # (N,)
    st2 -= top
    np.exp(st2, out=st2)
    z = np.matmul(_ones(ws, T, dt), st2, out=_buf(ws, "z", (N,), dt))  # (N,) column sums
    np.divide(1.0, z, out=z)
    st2 *= z  # (T, N) now the softmax weights, still key-major
    weights = st.transpose(1, 2, 0)  # (B, T_query, T_key) view

    ctx = np.matmul(weights, v, out=_buf(ws, "ctx", (B, T, d), dt))  # (B, T, d)
    out = np.matmul(ctx.reshape(N, d), params["Wo"], out=_buf(ws, "out", (N, d), dt))  # (N, d)
    cache = {"x": x, "w_qkv": w_qkv, "qkv": qkv, "q_t": q_t, "st": st, "weights": weights, "ctx": ctx,
             "qk_rot": qk_rot, "rope_cos": cos, "rope_sin": sin}
    return out.reshape(B, T, d), cache


def _rope_qk_tables(ws, T, d, dtype):
    """rope_tables(T, d) tiled twice along the channels, (T, 2d) each, for q and k side by side; made once per
    (T, d, dtype) and kept in the workspace.

    >>> cos, sin = _rope_qk_tables({}, 3, 2, np.float64)
    >>> cos.shape, float(sin[1, 2]) == float(np.sin(1.0))
    ((3, 4), True)
    """
    def make(i):
        return lambda: np.tile(rope_tables(T, d)[i], 2)  # (T, 2d)

    return (_const(ws, "rope_cos", (T, 2 * d), dtype, make(0)), _const(ws, "rope_sin", (T, 2 * d), dtype, make(1)))


def attention_backward(params, cache, dout, ws=None):
    """Gradients of attention: dout (B, T, d) -> ({"Wq", "Wk", "Wv", "Wo"}, dx (B, T, d)).

    Through each query's softmax, dscores = w * dw - w * sum_j w_j dw_j. (The shortcut sum_j w_j dw_j = dctx . ctx
    is cheaper but rounds differently: where one key has all the weight, as the first query always does, it
    leaves noise where the exact answer is 0.) With rope, the gradients of the rotated q and k then go back
    through the inverse rotation (each pair turned back by its angle) to those of q and k.

    >>> p = init_params(vocab=96, d=4, hidden=8, max_len=8, seed=3)
    >>> _, c = attention_forward(p, np.array([[[1.0, 0.0, 0.0, 0.0]]]))
    >>> grads, dx = attention_backward(p, c, np.array([[[1.0, 0.0, 0.0, 0.0]]]))
    >>> sorted(grads), dx.shape
    (['Wk', 'Wo', 'Wq', 'Wv'], (1, 1, 4))
    """
    ws = {} if ws is None else ws  # no workspace: every array is new
    x, w_qkv, qkv, st, ctx = (cache[n] for n in ("x", "w_qkv", "qkv", "st", "ctx"))
    B, T, d = x.shape
    N, dt = B * T, x.dtype
    q, k, v = qkv[:, :, :d], qkv[:, :, d:2 * d], qkv[:, :, 2 * d:]  # (B, T, d) each
    qk_rot = cache["qk_rot"]  # (B, T, 2d) with rope, else None
    if qk_rot is not None:
        q, k = qk_rot[:, :, :d], qk_rot[:, :, d:]  # (B, T, d) each: the scores were made from these
    dout2, ctx2 = dout.reshape(N, d), ctx.reshape(N, d)  # (N, d) each
    dWo = _weight_grad(ctx2, dout2, ws, "dWo")  # (d, d)
    dctx = np.matmul(dout2, params["Wo"].T, out=_buf(ws, "dctx", (N, d), dt))  # (N, d)
    dctx_t = dctx.reshape(B, T, d).transpose(0, 2, 1)  # (B, d, T) a view
    if B > 1:
        dctx_t = _copy(ws, "dctx_t", dctx_t)  # (B, d, T)

    # through the weighted sum ctx_i = sum_j w_ij v_j, then through each query's softmax (all key-major)
    dst = _buf(ws, "dst", (T, B, T), dt)  # (T_key, B, T_query)
    np.matmul(v, dctx_t, out=dst.transpose(1, 0, 2))  # dw[j, b, i] = dctx_bi . v_bj
    dst2, st2 = dst.reshape(T, N), st.reshape(T, N)  # (T_key, N) each
    dst2 *= st2  # (T, N) w * dw
    rowdot = np.matmul(_ones(ws, T, dt), dst2, out=_buf(ws, "rowdot", (N,), dt))  # (N,) sum_j w_j dw_j
    w_rowdot = np.multiply(st2, rowdot, out=_buf(ws, "w_rowdot", (T, N), dt))  # (T, N)
    dst2 -= w_rowdot  # (T, N) dscores; exactly 0 where the mask put weight 0 and where one key has weight 1

    dqkv = _buf(ws, "dqkv", (B, T, 3 * d), dt)  # (B, T, 3d) dq, dk, dv side by side
    np.matmul(dst.transpose(1, 2, 0), k, out=dqkv[:, :, :d])  # dq_i = sum_j ds_ij k_j (for the scaled q)
    np.matmul(dst.transpose(1, 0, 2), q, out=dqkv[:, :, d:2 * d])  # dk_j = sum_i ds_ij q_i
    np.matmul(st.transpose(1, 0, 2), dctx.reshape(B, T, d), out=dqkv[:, :, 2 * d:])  # dv_j = sum_i w_ij dctx_i
    if qk_rot is not None:  # so far the gradients of the rotated q and k: turn each pair back by its angle
        cos, sin = cache["rope_cos"], cache["rope_sin"]  # (T, 2d) each
        dqk = dqkv[:, :, :2 * d]  # (B, T, 2d) a view
        dqk_sin = np.multiply(dqk, sin, out=_buf(ws, "dqk_sin", (B, T, 2 * d), dt))  # (B, T, 2d)
        turned = np.matmul(dqk_sin.reshape(N, 2 * d), _pair_turn(ws, 2 * d, dt),
                           out=_buf(ws, "dqk_turned", (N, 2 * d), dt))  # (N, 2d)
        dqk *= cos
        dqk -= turned.reshape(B, T, 2 * d)  # (B, T, 2d) dy * cos - (dy * sin) @ J: the inverse rotation
    dqkv2 = dqkv.reshape(N, 3 * d)  # (N, 3d)
    dw_qkv = _weight_grad(x.reshape(N, d), dqkv2, ws, "dw_qkv")  # (d, 3d)
    grads = {
        "Wq": np.multiply(dw_qkv[:, :d], 1.0 / math.sqrt(d), out=_buf(ws, "dWq", (d, d), dt)),  # (d, d) the scale
        "Wk": _copy(ws, "dWk", dw_qkv[:, d:2 * d]),  # (d, d)
        "Wv": _copy(ws, "dWv", dw_qkv[:, 2 * d:]),  # (d, d)
        "Wo": dWo,  # (d, d)
    }
    # x feeds q, k and v: its gradient is one product over all three paths
    dx = np.matmul(dqkv2, w_qkv.T, out=_buf(ws, "dx", (N, d), dt))  # (N, d)
    return grads, dx.reshape(B, T, d)


# ----------------------------------------------------------------------------------------------------------------
# The model: embeddings, one pre-norm block (attention and MLP, each with a skip path), final layer norm, logits


def _add_bias(y, b, ws, name):
    """y (M, m) += b (m,), in place, along long rows (see `_rows_joined`).

    >>> y = np.zeros((2, 2)); _add_bias(y, np.array([1.0, 2.0]), {}, "b"); y
    array([[1., 2.],
           [1., 2.]])
    """
    M, m = y.shape
    k = _rows_joined(M, m)
    y_joined = y.reshape(M // k, k * m)  # (M / k, k m) a view
    y_joined += _tiled(ws, name, b, k)


def _ones_column(ws, name, M, k, dtype):
    """An (M, k + 1) array whose last column is 1 (set once, when it is made). With x written into [:, :k],
    x_aug @ [W; b] = x W + b: the bias is one more term of each sum, as in the reference's `linear`, so the bias
    costs no pass of its own, and the bias gradient comes out of the weight-gradient product as its last row.

    >>> _ones_column({}, "x", 2, 1, np.float64)[:, 1]
    array([1., 1.])
    """
    a = ws.get(name)
    if a is None or a.shape != (M, k + 1) or a.dtype != dtype:
        a = ws[name] = np.empty((M, k + 1), dtype)
        a[:, k] = 1.0
    return a


def _stacked(ws, name, w, b):
    """[w; b] (k + 1, m): a weight (k, m) with its bias (m,) as one more row.

    >>> _stacked({}, "wb", np.zeros((1, 2)), np.ones(2))
    array([[0., 0.],
           [1., 1.]])
    """
    out = _buf(ws, name, (len(w) + 1, w.shape[1]), w.dtype)  # (k + 1, m)
    out[:-1] = w
    out[-1] = b
    return out


def forward(params, ids, positions="learned", ws=None, *, use_positions=None):
    """Logits (T, V) or (B, T, V) for token IDs of shape (T,) or (B, T), and the cache the backward pass needs.

    positions: the scheme, one of SCHEMES (see `position_scheme`; True and False, or the keyword use_positions, work
    as in the reference). "learned" reads at most max_len positions, the others at most LONGEST.
    For V < 512 the logits are a transposed view of a (V, N) array (see the layouts note at the top).

    >>> p = init_params(vocab=96, d=4, hidden=8, max_len=8, seed=3)
    >>> logits, cache = forward(p, np.array([1, 2, 3]))
    >>> logits.shape, cache["att"]["weights"].shape, cache["act"].shape
    ((3, 96), (3, 3), (3, 8))
    """
    ws = {} if ws is None else ws  # no workspace: every array is new
    scheme = position_scheme(positions, use_positions)
    vocab, d, hidden, max_len = config_of(params)
    ids = check_ids(ids, vocab)
    batched = ids.ndim == 2
    ids2 = ids if batched else ids[None]  # (B, T)
    B, T = ids2.shape
    if T == 0:
        raise ValueError("empty sequence: forward needs at least one token ID")
    if B == 0:
        raise ValueError("empty batch: forward needs at least one sequence")
    if T > max_len and scheme == "learned":
        raise ValueError(f"sequence of {T} tokens is longer than the {max_len} positions the model has")
    if T > LONGEST:
        raise ValueError(f"sequence of {T} tokens is longer than the {LONGEST} positions the model has with"
                         f" positions={scheme!r}")
    N, dt = B * T, params["tok_emb"].dtype

    x0 = np.take(params["tok_emb"], ids2, axis=0, out=_buf(ws, "x0", (B, T, d), dt))  # (B, T, d)
    if scheme == "learned":
        x0 += params["pos_emb"][:T]  # (T, d) added to every sequence
    elif scheme == "sinusoidal":
        x0 += _const(ws, "sinusoid", (T, d), dt, lambda: sinusoid_table(T, d))  # (T, d) fixed, no parameters
    h1, ln1 = layernorm_forward(x0, params["ln1_g"], params["ln1_b"], _sub(ws, "ln1"))  # (B, T, d)
    a, att = attention_forward(params, h1, _sub(ws, "att"), rope=scheme == "rope")  # (B, T, d)
    x1 = np.add(x0, a, out=_buf(ws, "x1", (B, T, d), dt))  # (B, T, d) skip path 1
    h2, ln2 = layernorm_forward(x1, params["ln2_g"], params["ln2_b"], _sub(ws, "ln2"))  # (B, T, d)
    pre = np.matmul(h2.reshape(N, d), params["W1"], out=_buf(ws, "pre", (N, hidden), dt))  # (N, H)
    _add_bias(pre, params["b1"], ws, "b1_tiled")
    # ReLU as a maximum with an array of zeros: NumPy's fast loop wants two arrays, a scalar 0 is ~3x slower
    zeros = _const(ws, "zeros", (N, hidden), dt, lambda: 0.0)  # (N, H)
    act = np.maximum(pre, zeros, out=_buf(ws, "act", (N, hidden), dt))  # (N, H)
    m = np.matmul(act, params["W2"], out=_buf(ws, "m", (N, d), dt))  # (N, d)
    _add_bias(m, params["b2"], ws, "b2_tiled")
    x2 = np.add(x1, m.reshape(B, T, d), out=_buf(ws, "x2", (B, T, d), dt))  # (B, T, d) skip path 2
    hf, lnf = layernorm_forward(x2, params["lnf_g"], params["lnf_b"], _sub(ws, "lnf"))  # (B, T, d)
    # the output layer takes its bias as one more input column of ones (see _ones_column): a separate bias pass
    # would run over all N x V logits. (For the MLP the copy into a wider array would cost more than it saves.)
    hf_aug = _ones_column(ws, "hf_aug", N, d, dt)  # (N, d + 1)
    hf_aug[:, :d] = hf.reshape(N, d)
    w_out_b_out = _stacked(ws, "W_out_b_out", params["W_out"], params["b_out"])  # (d + 1, V)
    if vocab < 512:  # short rows: vocabulary-major, so that the loss reduces along the long N axis
        logits_vn = np.matmul(w_out_b_out.T, hf_aug.T, out=_buf(ws, "logits_vn", (vocab, N), dt))  # (V, N)
        logits = logits_vn.T.reshape(B, T, vocab)  # (B, T, V) view
    else:  # long rows: the usual order (the faster product for this shape)
        logits = np.matmul(hf_aug, w_out_b_out, out=_buf(ws, "logits", (N, vocab), dt)).reshape(B, T, vocab)

    cache = {"ids": ids2, "positions": scheme, "x0": x0, "h1": h1, "ln1": ln1, "att": att, "x1": x1,
             "h2": h2, "ln2": ln2, "pre": pre, "act": act.reshape(B, T, hidden), "x2": x2, "hf": hf, "lnf": lnf,
             "hf_aug": hf_aug}
    if not batched:  # a 1-D input gets 2-D results, like the reference (the backward pass reshapes to (N, ...))
        for name in ("x0", "h1", "x1", "h2", "act", "x2"):
            cache[name] = cache[name][0]
        att["weights"] = att["weights"][0]
        logits = logits[0]
    return logits, cache


# ----------------------------------------------------------------------------------------------------------------
# The loss: mean cross-entropy of the next token


def loss_and_dlogits(logits, targets, ws=None, out=None):
    """Mean over all positions of -log softmax(logits[..., t, :])[target], and its gradient (softmax - onehot) / N.

    logits (T, V) or (B, T, V), targets of the same leading shape. The gradient is written into `out` if given
    (`out=logits` is allowed and saves a pass through memory when the logits are not needed afterwards), else
    into an array laid out like the logits.

    >>> loss, dlogits = loss_and_dlogits(np.array([[0.0, 0.0]]), np.array([1]))
    >>> round(loss, 6), dlogits
    (0.693147, array([[ 0.5, -0.5]]))
    """
    ws = {} if ws is None else ws  # no workspace: every array is new
    if not isinstance(logits, np.ndarray) or logits.ndim not in (2, 3) or logits.shape[-1] == 0:
        raise ValueError(f"logits should be an array of shape (T, V) or (B, T, V), got {np.shape(logits)}")
    if logits.dtype not in DTYPES:
        raise ValueError(f"logits should be float32 or float64, got {logits.dtype}")
    vocab = logits.shape[-1]
    targets = check_ids(targets, vocab, what="target IDs")
    if targets.shape != logits.shape[:-1]:
        n_pos = math.prod(logits.shape[:-1])
        if targets.size != n_pos:
            raise ValueError(f"{n_pos} positions but {targets.size} targets")
        raise ValueError(f"targets of shape {targets.shape} do not match logits of shape {logits.shape}")
    dt = logits.dtype
    lg = logits.reshape(-1, vocab)  # (N, V) a view whenever the logits came from forward
    N = len(lg)
    tgt = targets.reshape(N)  # (N,)
    if out is None:  # the same memory order as the logits, so that every pass runs along contiguous memory
        vocab_major = lg.T.flags.c_contiguous
        p = _buf(ws, "p", (vocab, N) if vocab_major else (N, vocab), dt)
        p = p.T if vocab_major else p  # (N, V)
    else:
        p = out.reshape(N, vocab)  # (N, V)
    # each target's logit as one 1-D index into the contiguous memory under lg and p (2-D fancy indexing on the
    # transposed views is about 3x slower); the vocabulary-major layout has position n, token t at t * N + n
    lg_vocab_major, p_vocab_major = lg.T.flags.c_contiguous, p.T.flags.c_contiguous
    rows = np.arange(N)  # (N,)
    if lg_vocab_major and p_vocab_major and not lg.flags.c_contiguous:
        flat = tgt * N + rows  # (N,)
        lg_flat, p_flat = lg.T.reshape(N * vocab), p.T.reshape(N * vocab)  # views
    elif lg.flags.c_contiguous and p.flags.c_contiguous:
        flat = rows * vocab + tgt  # (N,)
        lg_flat, p_flat = lg.reshape(N * vocab), p.reshape(N * vocab)  # views
    else:  # mixed layouts (a caller's own `out`): plain 2-D indexing
        flat = lg_flat = p_flat = None
    # (N,) a copy, taken before `out=logits` overwrites them
    picked = lg[rows, tgt] if flat is None else lg_flat[flat]
    top, z, scale = (_buf(ws, name, (N,), dt) for name in ("top", "z", "scale"))  # (N,) each
    ones = _ones(ws, vocab, dt)  # (V,)
    # Blocks of positions small enough (~512 KB) to stay in cache through all five passes over them: the logits
    # then travel through memory once instead of five times (at V = 4096 this saves a third of the loss's time).
    # Vocabulary-major logits are not blocked: a block of positions is then a strided view, on which NumPy's
    # ufuncs run 1.5-3x slower than on the whole contiguous array (measured: 190 vs 330 us at N 2048, V 96).
    step = N if p_vocab_major else max(1, (1 << 19) // (vocab * dt.itemsize))
    for i in range(0, N, step):
        block = slice(i, i + step)
        lg_b, p_b, top_b, z_b, s_b = lg[block], p[block], top[block], z[block], scale[block]  # views
        np.maximum.reduce(lg_b, axis=1, out=top_b)  # (n,)
        np.subtract(lg_b, top_b[:, None], out=p_b)  # (n, V)
        np.exp(p_b, out=p_b)
        np.matmul(p_b, ones, out=z_b)  # (n,) row sums
        np.multiply(z_b, N, out=s_b)
        np.divide(1.0, s_b, out=s_b)  # (n,) 1 / (N z): one division per row, then products only
        p_b *= s_b[:, None]  # (n, V) softmax / N
    losses = np.log(z)  # (N,)
    losses += top
    losses -= picked
    loss = float(losses.sum(dtype=np.float64)) / N
    if flat is None:
        p[rows, tgt] -= 1.0 / N
    else:
        p_flat[flat] -= 1.0 / N
    return loss, p.reshape(logits.shape)


def sequence_loss(params, ids, targets, positions="learned", ws=None, *, use_positions=None):
    """The loss of predicting targets from ids, as one float (positions as in `forward`).

    >>> p = init_params(vocab=96, d=4, hidden=8, max_len=8, seed=3)
    >>> round(sequence_loss(p, np.array([1, 2]), np.array([2, 3])), 2)
    4.55
    """
    logits, _ = forward(params, ids, positions, ws, use_positions=use_positions)
    return loss_and_dlogits(logits, targets, ws, out=logits)[0]


# ----------------------------------------------------------------------------------------------------------------
# The backward pass of the whole model, last layer first


def backward(params, cache, dlogits, ws=None):
    """One gradient per parameter (same names, shapes and dtype), given dlogits = d loss / d logits.

    >>> p = init_params(vocab=96, d=4, hidden=8, max_len=8, seed=3)
    >>> logits, cache = forward(p, np.array([1, 2]))
    >>> _, dlogits = loss_and_dlogits(logits, np.array([2, 3]))
    >>> g = backward(p, cache, dlogits)
    >>> list(g) == list(p), g["W1"].shape
    (True, (4, 8))
    """
    ws = {} if ws is None else ws  # no workspace: every array is new
    vocab, d, hidden, max_len = config_of(params)
    ids = cache["ids"]  # (B, T)
    B, T = ids.shape
    N, dt = B * T, params["tok_emb"].dtype
    dlogits = np.asarray(dlogits)
    if dlogits.shape[-1:] != (vocab,) or dlogits.size != N * vocab:
        raise ValueError(f"dlogits of shape {dlogits.shape} do not match the {N} positions and {vocab} tokens")
    dlg = dlogits.reshape(N, vocab)  # (N, V)
    g = {}

    # logits = LayerNorm(x2) W_out + b_out, the bias as the ones column of hf_aug: its gradient is the last row
    dw_out = _weight_grad(cache["hf_aug"], dlg, ws, "dW_out_b_out")  # (d + 1, V)
    g["W_out"], g["b_out"] = dw_out[:d], dw_out[d]  # (d, V), (V,)
    dhf = np.matmul(dlg, params["W_out"].T, out=_buf(ws, "dhf", (N, d), dt))  # (N, d)
    dx2, g["lnf_g"], g["lnf_b"] = layernorm_backward(dhf, params["lnf_g"], cache["lnf"], _sub(ws, "lnf"))  # (N, d)

    # x2 = x1 + m: the gradient goes to the MLP branch and to the skip path unchanged
    dm = dx2  # (N, d)
    ones = _ones(ws, N, dt)  # (N,)
    g["b2"] = np.matmul(ones, dm, out=_buf(ws, "db2", (d,), dt))  # (d,) column sums
    g["W2"] = _weight_grad(cache["act"].reshape(N, hidden), dm, ws, "dW2")  # (H, d)
    dpre = np.matmul(dm, params["W2"].T, out=_buf(ws, "dpre", (N, hidden), dt))  # (N, H) d loss / d act so far
    dpre *= np.greater(cache["pre"], 0.0, out=_buf(ws, "relu_mask", (N, hidden), np.bool_))  # (N, H) ReLU
    g["b1"] = np.matmul(ones, dpre, out=_buf(ws, "db1", (hidden,), dt))  # (H,)
    g["W1"] = _weight_grad(cache["h2"].reshape(N, d), dpre, ws, "dW1")  # (d, H)
    dh2 = np.matmul(dpre, params["W1"].T, out=_buf(ws, "dh2", (N, d), dt))  # (N, d)
    dx1_mlp, g["ln2_g"], g["ln2_b"] = layernorm_backward(dh2, params["ln2_g"], cache["ln2"], _sub(ws, "ln2"))
    dx1 = np.add(dx2, dx1_mlp, out=_buf(ws, "dx1", (N, d), dt))  # (N, d) skip path 2: both contributions added

    # x1 = x0 + attention(LayerNorm(x0)): again two paths
    att_grads, dh1 = attention_backward(params, cache["att"], dx1.reshape(B, T, d), _sub(ws, "att"))  # (B, T, d)
    dx0_att, g["ln1_g"], g["ln1_b"] = layernorm_backward(dh1, params["ln1_g"], cache["ln1"], _sub(ws, "ln1"))
    dx0 = np.add(dx1, dx0_att.reshape(N, d), out=_buf(ws, "dx0", (N, d), dt))  # (N, d) skip path 1

    # x0 = tok_emb[ids] + pos_emb[0:T] (or the fixed table, or nothing): a token's row collects every position that
    # used it
    g_tok = _buf(ws, "dtok_emb", (vocab, d), dt)  # (V, d)
    ids_flat = ids.reshape(N)  # (N,)
    if N * d <= 8192:  # short input: one bincount over the flat index id * d + column, in float64
        flat = (ids_flat[:, None] * d + np.arange(d)).reshape(N * d)  # (N * d,)
        g_tok.reshape(vocab * d)[...] = np.bincount(flat, weights=dx0.reshape(N * d), minlength=vocab * d)
    else:  # long input: sort the positions by token, then add up each token's run of rows (about 3x faster)
        keys = ids_flat.astype(np.int16) if vocab <= 32767 else ids_flat  # (N,) 16-bit keys: a radix sort
        order = np.argsort(keys, kind="stable")  # (N,)
        counts = np.bincount(ids_flat, minlength=vocab)  # (V,) positions per token
        used = np.flatnonzero(counts)  # (U,) the tokens that occur, in sorted order
        starts = (np.cumsum(counts) - counts)[used]  # (U,) where each token's run begins in the sorted order
        rows = np.take(dx0, order, axis=0, out=_buf(ws, "dx0_sorted", (N, d), dt))  # (N, d)
        sums = _buf(ws, "tok_sums", (vocab, d), dt)[:len(used)]  # (U, d) one row per token used
        np.add.reduceat(rows, starts, axis=0, out=sums)
        g_tok.fill(0.0)
        g_tok[used] = sums
    g_pos = _buf(ws, "dpos_emb", (max_len, d), dt)  # (L, d) rows past T stay exactly zero
    g_pos.fill(0.0)  # all of it when the scheme is not "learned": pos_emb is then unused
    if cache["positions"] == "learned":
        np.matmul(_ones(ws, B, dt), dx0.reshape(B, T * d), out=g_pos[:T].reshape(T * d))  # sum over sequences

    grads = {"tok_emb": g_tok, "pos_emb": g_pos, **att_grads, **g}
    return {name: grads[name] for name in PARAM_SHAPES}  # same order as the parameters
