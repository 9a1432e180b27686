"""The maths of `numpy_model.py`, tuned for a training loop: every array a step writes lives in one `Workspace`.

Read `numpy_model.py` first, then docs/numpy-paths.md ("Two paths, one maths"): what a workspace is, how a loop
uses it, and what `forward`, `loss_and_grads` and `sequence_loss` at the bottom (a fresh workspace on every call)
are for. Much of what it buys is the workspace itself: no fresh arrays, so no page faults on a step
(tests/test_numpy_fast.py counts them). Each trick is marked `trick:` with the plain line of numpy_model.py it
replaces and what it bought: numpy_fast's own function against the same function with the plain line in its
place, on the same float32 arrays, series size with B = 32 unless said otherwise, medians of three runs of
`python3 -m dev.bench --tricks --threads 1` on the lab's machine with OpenBLAS's SkylakeX kernels
(docs/developers.md, "The NumPy paths' speed").

A grown model runs here too: each block keeps its own arrays (`BlockArrays`); the heads are an axis of the
key-major scores, and with one head every product is the one it was before the model could grow
(tests/test_one_block_fixture.py checks the bits).

Shape legend, used in the comments on every line that makes a tensor:
    B = sequences in the batch, T = positions, N = B * T, d = model width, H = hidden width of the MLP,
    V = vocabulary size, L = max_len, k = rows joined into one (see `joined`), nh = heads, dh = d / nh.
"""

import math
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from model import EPS
from oneblock import numpy_model
from oneblock.config import BLOCK_NAMES, block_params, prefix
from oneblock.config import ModelConfig  # noqa: F401  (the examples)
from oneblock.numpy_model import split_heads, turn_pairs

VOCAB_MAJOR_BELOW = 512  # logits are stored (V, N) for a smaller vocabulary, (N, V) from this size on
LOSS_BLOCK_BYTES = 1 << 19  # row-major logits go through the loss in blocks of this size, which stay in cache
LOSS_SPLIT_FROM = 1 << 22  # row-major logits of at least this many numbers: the loss's blocks shared by threads
TRANSPOSE_PRODUCT_FROM = 512  # weight gradients of at least this many rows are formed in the faster orientation


# ----------------------------------------------------------------------------------------------------------------
# The workspace: every array a step writes, declared once


class Workspace:
    """Every array of a training step (forward, loss, backward) for B sequences of T tokens, made once. (What a step
    still allocates is small: the checks' masks over the IDs, and the index arrays of `token_rows_sum`.)

    params is read for its shapes and dtype only (the values come with each call); config is its ModelConfig,
    whose blocks, heads and position scheme every step follows, as in numpy_model.forward. threads: how many
    threads share the loss's passes over large row-major logits (LOSS_SPLIT_FROM), for the same bits; the
    workspace makes the others once and keeps them. The same checks of sizes and lengths as numpy_model.forward
    apply, with the same errors. Each block's arrays are in `block` (see `BlockArrays`), the rest are the
    workspace's own, shared by the blocks where a block uses them only while it runs.

    >>> config = ModelConfig(96, 4, 8, 8)
    >>> ws = Workspace(numpy_model.init_params(config, 3), config, B=2, T=5)
    >>> ws.x0.shape, ws.block[0].scores.shape, ws.logits.shape
    ((2, 5, 4), (5, 2, 5), (2, 5, 96))
    >>> grown = ModelConfig(96, 4, 8, 8, blocks=3, heads=2)
    >>> len(Workspace(numpy_model.init_params(grown, 3), grown, B=2, T=5).block)
    3
    """

    def __init__(self, params, config, B, T, threads=1):
        numpy_model.check_params(params, config)
        numpy_model.check_length((B, T), config.positions, config.max_len)
        V, d, H, blocks, heads = config.vocab, config.d, config.hidden, config.blocks, config.heads
        self.config, self.positions, self.heads = config, config.positions, heads  # (read by every layer)
        N, dt, nh, rope = B * T, params["tok_emb"].dtype, heads, self.positions == "rope"
        self.B, self.T, self.dtype = B, T, dt
        self.shapes = config.param_shapes()  # {name: shape}, in the parameters' order

        # constants, written once
        self.ones = {n: np.ones(n, dt) for n in {N, T, B, V}}  # for sums as products, see `column_sums`
        self.centering = (np.eye(d) - 1.0 / d).astype(dt)  # (d, d) `x @ centering` = x minus its row mean
        self.mean_d = np.full(d, 1.0 / d, dt)  # (d,) `x @ mean_d` = the mean of each row
        self.zeros_NH = np.zeros((N, H), dt)  # (N, H) the ReLU's other operand, see `forward`
        future = np.arange(T)[:, None, None] > np.arange(T)[None, None, :]  # (T, 1, T) key j after query i
        self.mask = np.empty((T, B * nh, T), dt)  # (T, B nh, T) 0 where the query may read the key, -inf where not
        self.mask[...] = np.where(future, -np.inf, 0.0)
        self.sinusoid = numpy_model.sinusoid_table(T, d).astype(dt) if self.positions == "sinusoidal" else None
        if rope:  # the tables of one head's width, tiled for every head of q and of k side by side
            self.rope_cos, self.rope_sin = (np.tile(t, 2 * nh).astype(dt) for t in numpy_model.rope_tables(T, d // nh))
        self.joined_d, self.joined_H = joined(N, d), joined(N, H)  # (N / k, k d), (N / k, k H) row shapes
        self.tile_d = np.empty(self.joined_d[1], dt)  # (k d,) a gain or bias, repeated k times
        self.tile_H = np.empty(self.joined_H[1], dt)  # (k H,)
        self.positions_index = np.arange(N)  # (N,)

        # forward: embeddings, each block's arrays, final layer norm, logits; and the blocks' scratch
        self.ids = np.empty((B, T), np.int64)  # (B, T)
        self.x0, self.hf = np.empty((B, T, d), dt), np.empty((B, T, d), dt)  # (B, T, d) each
        self.block = [BlockArrays(B, T, d, H, nh, dt, rope) for _ in range(blocks)]
        self.lnf_xhat, self.lnf_rstd = np.empty((N, d), dt), np.empty(N, dt)  # (N, d), (N,) 1 / std
        self.squares = np.empty((N, d), dt)  # (N, d) scratch of each layer norm
        self.qk_cos = np.empty((B, T, 2 * d), dt)  # (B, T, 2d) scratch of rope
        self.q_t = np.empty((B, nh, d // nh, T), dt)  # (B, nh, dh, T) q transposed, each head's
        self.att_top, self.att_z = np.empty(N * nh, dt), np.empty(N * nh, dt)  # (N nh,) top score, 1 / sum
        self.att_out = np.empty((N, d), dt)  # (N, d)
        self.m = np.empty((N, d), dt)  # (N, d)
        self.hf_ones = np.ones((N, d + 1), dt)  # (N, d + 1) [hf | 1], see `forward`
        self.w_out_b_out = np.empty((d + 1, V), dt)  # (d + 1, V) [W_out; b_out]
        self.vocab_major = V < VOCAB_MAJOR_BELOW
        split = threads > 1 and not self.vocab_major and N * V >= LOSS_SPLIT_FROM
        self.threads = threads if split else 1
        self.pool = ThreadPoolExecutor(threads - 1) if split else None
        self.logits_memory = np.empty((V, N) if self.vocab_major else (N, V), dt)  # see `forward`
        self.logits = (self.logits_memory.T if self.vocab_major else self.logits_memory).reshape(B, T, V)  # view

        # loss (dlogits are written over the logits)
        self.top, self.z, self.scale = (np.empty(N, dt) for _ in range(3))  # (N,) largest logit, sum, 1 / (N z)
        self.losses, self.picked = np.empty(N, dt), np.empty(N, dt)  # (N,) each
        self.target_index = np.empty(N, np.int64)  # (N,) each target's place in logits_memory

        # backward: the gradients, and scratch shared by the blocks
        self.grads = {name: np.empty(shape, dt) for name, shape in self.shapes.items()}  # named as the params
        self.dw_out_b_out = np.empty((d + 1, V), dt)  # (d + 1, V) [dW_out; db_out]: see `forward`
        self.grads["W_out"], self.grads["b_out"] = self.dw_out_b_out[:d], self.dw_out_b_out[d]  # views
        self.dw_out_b_out_t = np.empty((V, d + 1), dt)  # (V, d + 1)
        self.dW1_t, self.dW2_t = np.empty((H, d), dt), np.empty((d, H), dt)  # (H, d), (d, H)
        self.dhf, self.dx2, self.dh2, self.dx1_mlp, self.dx1 = (np.empty((N, d), dt) for _ in range(5))
        self.dh1, self.dx0_att, self.dx0, self.dx0_sorted = (np.empty((N, d), dt) for _ in range(4))
        self.dpre = np.empty((N, H), dt)  # (N, H)
        self.relu_mask = np.empty((N, H), np.bool_)  # (N, H)
        self.ln_products = np.empty((N, d), dt)  # (N, d) scratch of each layer-norm backward
        self.ln_rows = np.empty(N, dt)  # (N,)
        self.g_mean = np.empty(d, dt)  # (d,)
        self.g_centering = np.empty((d, d), dt)  # (d, d)
        self.dctx = np.empty((N, d), dt)  # (N, d)
        self.dctx_t = np.empty((B, nh, d // nh, T), dt)  # (B, nh, dh, T)
        self.dscores = np.empty((T, B * nh, T), dt)  # (T_key, B nh, T_query)
        self.rowdot = np.empty(N * nh, dt)  # (N nh,)
        self.weighted = np.empty((T, N * nh), dt)  # (T, N nh)
        self.dqkv = np.empty((B, T, 3 * d), dt)  # (B, T, 3d) [dq | dk | dv]
        self.dqk_sin = np.empty((B, T, 2 * d), dt)  # (B, T, 2d) scratch of rope
        self.dqk_turned = np.empty((B, T, 2 * d), dt)  # (B, T, 2d)
        self.dw_qkv = np.empty((d, 3 * d), dt)  # (d, 3d)
        self.dw_qkv_t = np.empty((3 * d, d), dt)  # (3d, d)
        self.tok_sums = np.empty((V, d), dt)  # (V, d)
        # each block's gradients by the names inside it (the same arrays), see `config.block_params`
        self.block_grads = [{name: self.grads[prefix(b) + name] for name in BLOCK_NAMES} for b in range(blocks)]

        # the cache forward returns: views of the arrays above, so made once (see `forward`)
        caches = [{"h1": blk.h1, "x1": blk.x1, "h2": blk.h2, "pre": blk.pre.reshape(B, T, H),
                   "act": blk.act.reshape(B, T, H), "x2": blk.x2,
                   "att": {"weights": by_query(blk.scores, B, heads)}} for blk in self.block]
        self.cache = {"ids": self.ids, "config": config, "x0": self.x0, **caches[0], "blocks": caches, "hf": self.hf}

    # ------------------------------------------------------------------------------------------------------------
    # The step, and its parts for the checks

    def loss_and_grads(self, params, ids, targets):
        """The mean loss over the B * T positions and one gradient per parameter, like numpy_model.loss_and_grads.
        The gradients are this workspace's arrays: valid until its next call.

        >>> config = ModelConfig(96, 4, 8, 8)
        >>> p = numpy_model.init_params(config, 3)
        >>> loss, grads = Workspace(p, config, B=1, T=2).loss_and_grads(p, [[1, 2]], [[2, 3]])
        >>> round(loss, 2), grads["tok_emb"].shape
        (4.55, (96, 4))
        """
        logits, _ = self.forward(params, ids)
        loss, dlogits = self.loss_and_dlogits(logits, targets)
        return loss, self.backward(params, dlogits, check=False)  # (forward checked the same params)

    def check(self, params):
        """Raise a ValueError unless params have the shapes and dtype this workspace was made for.

        >>> config = ModelConfig(96, 4, 8, 8)
        >>> p = numpy_model.init_params(config, 3)
        >>> Workspace(p, config, B=1, T=2).check(p)
        """
        # trick: numpy_model.check_params(params, config) once, in the constructor, and here only a comparison of
        # shapes and dtype: 5 us instead of 9 (dev/bench.py --tricks: parameter check)
        if params.keys() != self.shapes.keys() or any(
                type(t) is not np.ndarray or t.shape != self.shapes[name] or t.dtype != self.dtype
                for name, t in params.items()):
            numpy_model.check_params(params, self.config)  # names what is wrong, if anything; else it is the dtype
            name, t = next((name, t) for name, t in params.items()
                           if type(t) is not np.ndarray or t.dtype != self.dtype)
            raise ValueError(f"this workspace was made for NumPy arrays in {self.dtype}, but parameter {name} is a"
                             f" {type(t).__name__} in {t.dtype}: make one for those")

    def forward(self, params, ids):
        """Logits (B, T, V) for ids (B, T), and a cache of the intermediates by numpy_model's names (views of
        this workspace's arrays, in the same dict every call): each block's under "blocks", the first block's also at
        the top.

        >>> config = ModelConfig(96, 4, 8, 8)
        >>> p = numpy_model.init_params(config, 3)
        >>> logits, cache = Workspace(p, config, B=1, T=3).forward(p, [[1, 2, 3]])
        >>> logits.shape, cache["att"]["weights"].shape, cache["act"].shape
        ((1, 3, 96), (1, 3, 3), (1, 3, 8))
        """
        self.check(params)
        V, d = self.config.vocab, self.config.d
        B, T, N = self.B, self.T, self.B * self.T
        ids = numpy_model.check_ids(ids, V)
        if ids.shape != (B, T):
            raise ValueError(f"this workspace is for IDs of shape {(B, T)}, got {ids.shape}: make one for that shape")
        self.ids[...] = ids

        # trick: mode="clip", as the IDs are checked already: the default mode="raise" goes through a temporary
        # copy; within the whole forward pass it is not measurable, 1,069 us against 1,081 (dev/bench.py --tricks:
        # take clip)
        x0 = np.take(params["tok_emb"], ids, axis=0, out=self.x0, mode="clip")  # (B, T, d)
        if self.positions == "learned":
            x0 += params["pos_emb"][:T]  # (B, T, d)
        elif self.positions == "sinusoidal":
            x0 += self.sinusoid  # (B, T, d)
        x = x0
        for b, blk in enumerate(self.block):
            x = block_forward(block_params(params, b), x, blk, self)  # (B, T, d)
        hf = layernorm_forward(x, params["lnf_g"], params["lnf_b"], self.hf, self.lnf_xhat, self.lnf_rstd, self)
        # trick: replaces `hf @ params["W_out"] + params["b_out"]`: the bias rides in the product as a column of
        # ones, [hf | 1] @ [W_out; b_out], so it costs no pass of its own over the N x V logits, and its gradient
        # comes out of the weight gradient's product as the last row; the forward pass takes 955 us instead
        # of 983 (dev/bench.py --tricks: output bias)
        self.hf_ones[:, :d] = hf.reshape(N, d)
        self.w_out_b_out[:d] = params["W_out"]
        self.w_out_b_out[d] = params["b_out"]
        # trick: for a small vocabulary the logits are stored vocabulary-major, (V, N), so that the loss reduces
        # along the long N axis: the loss takes 238 us instead of 383 (dev/bench.py --tricks: loss layout).
        # self.logits is the (B, T, V) view either way
        if self.vocab_major:
            np.matmul(self.w_out_b_out.T, self.hf_ones.T, out=self.logits_memory)  # (V, N)
        else:
            np.matmul(self.hf_ones, self.w_out_b_out, out=self.logits_memory)  # (N, V)
        return self.logits, self.cache

    def loss_and_dlogits(self, logits, targets):
        """Mean over the B * T positions of -log softmax(logits)[target], and its gradient (softmax - onehot) / N,
        written over this workspace's logits (logits from elsewhere are copied in first).

        >>> config = ModelConfig(96, 4, 8, 8)
        >>> p = numpy_model.init_params(config, 3)
        >>> ws = Workspace(p, config, B=1, T=1)
        >>> loss, dlogits = ws.loss_and_dlogits(np.zeros((1, 1, 96)), [[5]])
        >>> round(loss, 4), round(float(dlogits[0, 0, 5]), 4), round(float(dlogits[0, 0, 6]), 4)
        (4.5643, -0.9896, 0.0104)
        """
        targets = numpy_model.check_targets(targets, logits)
        if targets.shape != (self.B, self.T) or logits.shape != self.logits.shape:
            raise ValueError(f"this workspace is for logits of shape {self.logits.shape}, got {logits.shape}")
        if logits is not self.logits:
            self.logits[...] = logits
        V, N = self.config.vocab, self.B * self.T
        lg = self.logits.reshape(N, V)  # (N, V) a view, the gradient's memory too
        # trick: each target's logit by one 1-D index into the logits' memory, replaces
        # `np.take_along_axis(logits, targets[..., None], -1)`: 231 us instead of 247 (dev/bench.py --tricks: picked)
        index = self.target_index
        if self.vocab_major:  # position n, token t is at t N + n
            np.multiply(targets.reshape(N), N, out=index)
            index += self.positions_index
        else:  # at n V + t
            np.multiply(self.positions_index, V, out=index)
            index += targets.reshape(N)
        memory = self.logits_memory.reshape(N * V)  # (N V,) a view
        np.take(memory, index, out=self.picked)  # (N,)
        # trick: row-major logits go through in blocks of positions small enough to stay in cache through all
        # five passes: at the large size the loss takes 19.7 ms instead of 26.4 (dev/bench.py --tricks: large: loss
        # blocks). Vocabulary-major ones go in one block (a block of them would be a strided view, on which NumPy
        # is slower)
        step = N if self.vocab_major else max(1, LOSS_BLOCK_BYTES // (V * self.dtype.itemsize))
        blocks = [slice(i, i + step) for i in range(0, N, step)]
        if self.pool is None:
            softmax_blocks(lg, blocks, self)
        else:
            # trick: the blocks shared by the threads, one run of them each, the first on this thread and the
            # others on the workspace's own (NumPy lets go of the GIL inside each pass), replacing the one loop over
            # them: the same blocks and the same bits; at the large size, with two threads, 15.8 ms instead of 19.9
            # (1.24x to 1.73x over the three runs: it gains only while the second core is free)
            # (dev/bench.py --tricks: large: loss threads)
            n = self.threads
            runs = [blocks[i * len(blocks) // n:(i + 1) * len(blocks) // n] for i in range(n)]
            others = [self.pool.submit(softmax_blocks, lg, run, self) for run in runs[1:]]
            softmax_blocks(lg, runs[0], self)
            for other in others:
                other.result()
        losses = np.log(self.z, out=self.losses)  # (N,)
        losses += self.top
        losses -= self.picked
        loss = float(losses.sum(dtype=np.float64)) / N
        memory[index] -= 1.0 / N  # (softmax - onehot) / N
        return loss, self.logits

    def backward(self, params, dlogits, check=True):
        """One gradient per parameter (same names, shapes and dtype, this workspace's arrays), given dlogits
        (B, T, V) = d loss / d logits, after this workspace's forward. check=False skips the check of params,
        for a caller whose forward just checked the same ones.

        >>> config = ModelConfig(96, 4, 8, 8)
        >>> p = numpy_model.init_params(config, 3)
        >>> ws = Workspace(p, config, B=1, T=2)
        >>> logits, _ = ws.forward(p, [[1, 2]])
        >>> _, dlogits = ws.loss_and_dlogits(logits, [[2, 3]])
        >>> g = ws.backward(p, dlogits)
        >>> list(g) == list(p), g["W1"].shape
        (True, (4, 8))
        """
        if check:
            self.check(params)
        V, d = self.config.vocab, self.config.d
        B, T, N = self.B, self.T, self.B * self.T
        dlg = np.asarray(dlogits).reshape(N, V)  # (N, V) a view when dlogits came from loss_and_dlogits
        g = self.grads

        # logits = [hf | 1] [W_out; b_out]: the bias gradient is the last row of the weight gradient
        weight_grad(self.hf_ones, dlg, self.dw_out_b_out, self.dw_out_b_out_t)  # (d + 1, V) g["W_out"], g["b_out"]
        dhf = np.matmul(dlg, params["W_out"].T, out=self.dhf)  # (N, d)
        dx, g["lnf_g"], g["lnf_b"] = layernorm_backward(dhf, params["lnf_g"], self.lnf_xhat, self.lnf_rstd, self,
                                                        out=(self.dx2, g["lnf_g"], g["lnf_b"]))  # (N, d)

        # the blocks, last first: each takes the gradient of the stream after it, writes its gradients into g and
        # the one before it into self.dx0 (after its last read of the one it took, which from the second block on
        # is there too)
        for b in reversed(range(len(self.block))):
            _, dx = block_backward(block_params(params, b), dx, self.block[b], self, self.block_grads[b])  # (N, d)
        dx0 = dx  # (N, d)

        # x0 = tok_emb[ids] + pos_emb[0:T] (or the fixed table, or nothing)
        token_rows_sum(self.ids.reshape(N), dx0, g["tok_emb"], self)  # (V, d)
        g["pos_emb"].fill(0.0)  # (L, d) rows past T stay exactly zero, and all of them without learned rows
        if self.positions == "learned":  # summed over the sequences
            np.matmul(self.ones[B], dx0.reshape(B, T * d), out=g["pos_emb"][:T].reshape(T * d))
        return dict(g)  # every gradient, in the parameters' order


# ----------------------------------------------------------------------------------------------------------------
# Helpers with output targets: the loss's softmax, sums, weight gradients, biases


def softmax_blocks(lg, blocks, ws):
    """For each block of rows of the logits lg (N, V), in place: softmax / N, the loss's gradient before its -1 / N
    at the target; each row's largest logit into ws.top, its sum of exponentials into ws.z.

    >>> config = ModelConfig(2, 2, 2, 2)
    >>> ws = Workspace(numpy_model.init_params(config, 3), config, B=1, T=2)
    >>> lg = np.zeros((2, 2))
    >>> softmax_blocks(lg, [slice(0, 1), slice(1, 2)], ws); lg, ws.z
    (array([[0.25, 0.25],
           [0.25, 0.25]]), array([2., 2.]))
    """
    N, V = lg.shape
    for rows in blocks:
        lg_b, top_b, z_b, s_b = lg[rows], ws.top[rows], ws.z[rows], ws.scale[rows]  # views
        np.maximum.reduce(lg_b, axis=1, out=top_b)  # (n,)
        np.subtract(lg_b, top_b[:, None], out=lg_b)  # (n, V) from here on lg holds the gradient
        np.exp(lg_b, out=lg_b)
        np.matmul(lg_b, ws.ones[V], out=z_b)  # (n,) row sums
        np.multiply(z_b, N, out=s_b)
        np.divide(1.0, s_b, out=s_b)  # (n,) 1 / (N z), then products (see reciprocal in layernorm_forward)
        lg_b *= s_b[:, None]  # (n, V) softmax / N


def column_sums(x, ones, out):
    """x.sum(0) for x (M, n), written into out (n,).

    trick: replaces `.sum(0)` over rows of numpy_model.py (e.g. `dy.reshape(-1, n).sum(0)`): one BLAS
    matrix-vector product with a vector of ones, 3 us instead of 45 at (2048, 16) (dev/bench.py --tricks: column
    sums). The same product with a vector of 1 / n takes a mean along rows: layernorm_forward takes 52 us instead of
    96 (row means).

    >>> column_sums(np.array([[1.0, 2.0], [3.0, 4.0]]), np.ones(2), np.empty(2))
    array([4., 6.])
    """
    return np.matmul(ones, x, out=out)


def weight_grad(x, dy, out, out_t):
    """x^T dy for x (N, k), dy (N, m): the gradient of a weight (k, m) of `x @ W`, written into out (k, m).

    trick: replaces `x.reshape(-1, k).T @ dy.reshape(-1, m)`: for k < m and N >= TRANSPOSE_PRODUCT_FROM the
    product is formed as (m, k) in out_t and copied transposed into out, which OpenBLAS was found to run faster
    with two threads. With one thread it buys nothing: 108 us against 106 for the output layer's (17, 96), and
    6.3 ms against 6.3 for the large size's (128, 512) (dev/bench.py --tricks: weight gradient); with two threads
    on the busy machine the figures were too noisy to quote. Both orientations give the same bits here.

    >>> weight_grad(np.ones((3, 1)), np.ones((3, 2)), np.empty((1, 2)), np.empty((2, 1)))
    array([[3., 3.]])
    """
    if x.shape[1] >= dy.shape[1] or len(x) < TRANSPOSE_PRODUCT_FROM:
        return np.matmul(x.T, dy, out=out)
    out[...] = np.matmul(dy.T, x, out=out_t).T  # (m, k) formed, then transposed
    return out


def joined(M, n):
    """The shape (M / k, k n) to view an (M, n) array in, for broadcasting a length-n vector along long rows.

    trick: NumPy broadcasts with one inner loop per row; for rows of 16 floats the loop costs more than the
    arithmetic, and viewing (M, n) as (M / k, k n) against the vector tiled k times for `xhat * g + b`, the
    layer norm takes 50 us instead of 64 (dev/bench.py --tricks: joined rows), add_bias at (2048, 64) 23 us
    instead of 29 (bias rows). k divides M, and k n stays at most about 1024 floats. Where
    k = 1 (M = 63 at B = 1) the vector is used as it is: filling a tile would be a NumPy call for nothing (what
    that bought at B = 1: docs/developers.md, "What bounds each size, and what was tried").

    >>> joined(2048, 16), joined(63, 16)
    ((32, 1024), (63, 16))
    """
    k = math.gcd(M, max(1, 1024 // n))
    return M // k, k * n


def repeated(v, shape, tile):
    """v (m,) repeated along the joined rows of `shape` (see `joined`), k times into tile (k m,); for k = 1 (a row
    count with no factor to join) v itself, one NumPy call fewer.

    >>> repeated(np.array([1.0, 2.0]), (1, 4), np.empty(4)), repeated(np.array([1.0, 2.0]), (3, 2), None)
    (array([1., 2., 1., 2.]), array([1., 2.]))
    """
    if shape[1] == len(v):
        return v
    tile.reshape(-1, len(v))[...] = v
    return tile


def add_bias(y, b, shape, tile):
    """y (M, m) += b (m,), in place, along the joined rows of `shape` (see `joined`); tile lends the repeated b.

    >>> y = np.zeros((2, 2)); add_bias(y, np.array([1.0, 2.0]), (1, 4), np.empty(4)); y
    array([[1., 2.],
           [1., 2.]])
    """
    rows = y.reshape(shape)  # (M / k, k m) a view
    rows += repeated(b, shape, tile)


# ----------------------------------------------------------------------------------------------------------------
# Layer norm


def layernorm_forward(x, g, b, out, xhat, rstd, ws):
    """out = g * xhat + b for each row of x (..., n), xhat = (x - mean) / sqrt(var + EPS), written into out (..., n);
    xhat (M, n) and rstd (M,) = 1 / sqrt(var + EPS) are kept for the backward pass. ws lends constants and scratch.

    >>> config = ModelConfig(96, 2, 2, 2)
    >>> ws = Workspace(numpy_model.init_params(config, 3), config, B=1, T=1)
    >>> layernorm_forward(np.array([[1.0, 3.0]]), np.ones(2), np.zeros(2), np.empty((1, 2)), np.empty((1, 2)),
    ...                   np.empty(1), ws).round(4)
    array([[-1.,  1.]])
    """
    n = x.shape[-1]
    rows = x.reshape(-1, n)  # (M, n)
    # trick: replaces `x - x.mean(-1, keepdims=True)` by one small product with the centering matrix I - 1/n:
    # the layer norm takes 51 us instead of 102 (dev/bench.py --tricks: centring); the variance is a product too
    # (row means)
    np.matmul(rows, ws.centering, out=xhat)  # (M, n) centred, for now
    squares = np.multiply(xhat, xhat, out=ws.squares)  # (M, n)
    np.matmul(squares, ws.mean_d, out=rstd)  # (M,) the variance, for a moment
    rstd += EPS
    np.sqrt(rstd, out=rstd)
    # trick: one division per row, then products, in place of `centred / std`. It buys nothing measurable here
    # (53 us against 55: dev/bench.py --tricks: reciprocal), but it decides the rounding, and with it the bits of
    # train.py's checkpoints; it stays, here and in both softmaxes, so that those come out as they always have
    np.divide(1.0, rstd, out=rstd)  # (M,) 1 / sqrt(var + EPS)
    xhat *= rstd[:, None]  # (M, n) normalised
    shape = ws.joined_d  # (M / k, k n): out = xhat * g + b along long rows
    rows = out.reshape(shape)  # (M / k, k n) a view
    np.multiply(xhat.reshape(shape), repeated(g, shape, ws.tile_d), out=rows)
    rows += repeated(b, shape, ws.tile_d)  # (the tile's g is used up: it lends b now)
    return out


def layernorm_backward(dy, g, xhat, rstd, ws, out):
    """Gradients (dx (M, n), dg (n,), db (n,)) of layer norm, written into out = (dx, dg, db), given dy (..., n).

    With u = dy * g, each row's dx = (u - mean(u) - xhat * mean(u * xhat)) * rstd. Here u - mean(u) is one
    product, dy (g C) with the centering matrix C, and mean(u * xhat) = (dy * xhat) g / n.

    >>> config = ModelConfig(96, 2, 2, 2)
    >>> ws = Workspace(numpy_model.init_params(config, 3), config, B=1, T=1)
    >>> xhat, rstd = np.empty((1, 2)), np.empty(1)
    >>> _ = layernorm_forward(np.array([[1.0, 3.0]]), np.ones(2), np.zeros(2), np.empty((1, 2)), xhat, rstd, ws)
    >>> dx, dg, db = layernorm_backward(np.array([[1.0, 1.0]]), np.ones(2), xhat, rstd, ws,
    ...                                 out=(np.empty((1, 2)), np.empty(2), np.empty(2)))
    >>> dx, db
    (array([[0., 0.]]), array([1., 1.]))
    """
    dx, dg, db = out
    M, n = xhat.shape
    dy = dy.reshape(M, n)  # (M, n)
    products = np.multiply(dy, xhat, out=ws.ln_products)  # (M, n)
    column_sums(products, ws.ones[M], out=dg)  # (n,)
    column_sums(dy, ws.ones[M], out=db)  # (n,)
    np.multiply(g, 1.0 / n, out=ws.g_mean)  # (n,)
    c = np.matmul(products, ws.g_mean, out=ws.ln_rows)  # (M,) mean(u * xhat)
    c *= rstd  # (M,)
    np.multiply(g[:, None], ws.centering, out=ws.g_centering)  # (n, n)
    np.matmul(dy, ws.g_centering, out=dx)  # (M, n) u - mean(u)
    dx *= rstd[:, None]
    np.multiply(xhat, c[:, None], out=products)  # (M, n) the buffer of dy * xhat, reused
    dx -= products
    return dx, dg, db


# ----------------------------------------------------------------------------------------------------------------
# One block: its arrays, its forward and backward pass


class BlockArrays:
    """The arrays one block writes in a step and its backward pass reads again (the stream after each skip path, the
    layer norms' xhat and 1 / std, q, k, v, the attention weights, the MLP's input and output); the scratch they
    pass through is the workspace's. With nh heads of width dh = d / nh, the scores of every head are key-major,
    scores[j, b nh + h, i] = q_bhi . k_bhj (see `by_query` for the weights as (B, nh, T_query, T_key)).

    >>> BlockArrays(B=2, T=5, d=4, H=8, heads=2, dtype=np.float32, rope=False).scores.shape
    (5, 4, 5)
    """

    def __init__(self, B, T, d, H, heads, dtype, rope):
        N = B * T
        self.h1, self.x1, self.h2, self.x2 = (np.empty((B, T, d), dtype) for _ in range(4))
        self.ln1_xhat, self.ln2_xhat = np.empty((N, d), dtype), np.empty((N, d), dtype)  # (N, d) each
        self.ln1_rstd, self.ln2_rstd = np.empty(N, dtype), np.empty(N, dtype)  # (N,) 1 / std
        self.w_qkv = np.empty((d, 3 * d), dtype)  # (d, 3d) [Wq / sqrt(dh) | Wk | Wv]
        self.qkv = np.empty((B, T, 3 * d), dtype)  # (B, T, 3d) [q | k | v], each head's channels side by side
        self.qk_turned = np.empty((B, T, 2 * d), dtype) if rope else None  # (B, T, 2d) [q | k] turned by rope
        self.scores = np.empty((T, B * heads, T), dtype)  # (T_key, B nh, T_query) the scores, then the weights
        self.ctx = np.empty((B, T, d), dtype)  # (B, T, d) the heads' outputs side by side
        self.pre, self.act = np.empty((N, H), dtype), np.empty((N, H), dtype)  # (N, H) each


def block_forward(params, x, blk, ws):
    """One block (params: its tensors by model.py's names) on the stream x (B, T, d); returns the stream after it,
    blk.x2.

    >>> config = ModelConfig(96, 4, 8, 8)
    >>> p = numpy_model.init_params(config, 3)
    >>> ws = Workspace(p, config, B=1, T=2)
    >>> block_forward(p, np.ones((1, 2, 4)), ws.block[0], ws) is ws.block[0].x2
    True
    """
    B, T, d = x.shape
    N = B * T
    h1 = layernorm_forward(x, params["ln1_g"], params["ln1_b"], blk.h1, blk.ln1_xhat, blk.ln1_rstd, ws)
    a = attention_forward(params, h1, blk, ws)  # (B, T, d)
    x1 = np.add(x, a, out=blk.x1)  # (B, T, d) skip path 1
    h2 = layernorm_forward(x1, params["ln2_g"], params["ln2_b"], blk.h2, blk.ln2_xhat, blk.ln2_rstd, ws)
    pre = np.matmul(h2.reshape(N, d), params["W1"], out=blk.pre)  # (N, H)
    add_bias(pre, params["b1"], ws.joined_H, ws.tile_H)
    # trick: replaces `np.maximum(pre, 0.0)`: NumPy's fast loop wants two arrays, and a scalar 0.0 takes a
    # slower one; within the block it is hardly measurable, 638 us instead of 658 (dev/bench.py --tricks: relu)
    act = np.maximum(pre, ws.zeros_NH, out=blk.act)  # (N, H)
    m = np.matmul(act, params["W2"], out=ws.m)  # (N, d)
    add_bias(m, params["b2"], ws.joined_d, ws.tile_d)
    return np.add(x1, m.reshape(B, T, d), out=blk.x2)  # (B, T, d) skip path 2


def block_backward(params, dx2, blk, ws, g):
    """Gradients of one block, given dx2 (N, d) = d loss / d (the stream after it): (its gradients by model.py's
    names, written into the arrays of g; the gradient of the stream before it, written into ws.dx0).

    >>> config = ModelConfig(96, 4, 8, 8)
    >>> p = numpy_model.init_params(config, 3)
    >>> ws = Workspace(p, config, B=1, T=2)
    >>> _ = block_forward(p, np.ones((1, 2, 4)), ws.block[0], ws)
    >>> grads, dx = block_backward(p, np.ones((2, 4)), ws.block[0], ws, {name: ws.grads[name] for name in p})
    >>> grads["W1"] is ws.grads["W1"], dx is ws.dx0
    (True, True)
    """
    N, d = dx2.shape
    B, T = ws.B, ws.T
    # x2 = x1 + m: the gradient goes to the MLP branch and to the skip path unchanged
    dm = dx2  # (N, d)
    column_sums(dm, ws.ones[N], out=g["b2"])  # (d,)
    weight_grad(blk.act, dm, g["W2"], ws.dW2_t)  # (H, d)
    dpre = np.matmul(dm, params["W2"].T, out=ws.dpre)  # (N, H) d loss / d act, so far
    dpre *= np.greater(blk.pre, 0.0, out=ws.relu_mask)  # (N, H) ReLU
    column_sums(dpre, ws.ones[N], out=g["b1"])  # (H,)
    weight_grad(blk.h2.reshape(N, d), dpre, g["W1"], ws.dW1_t)  # (d, H)
    dh2 = np.matmul(dpre, params["W1"].T, out=ws.dh2)  # (N, d)
    dx1_mlp, _, _ = layernorm_backward(dh2, params["ln2_g"], blk.ln2_xhat, blk.ln2_rstd, ws,
                                       out=(ws.dx1_mlp, g["ln2_g"], g["ln2_b"]))  # (N, d)
    dx1 = np.add(dx2, dx1_mlp, out=ws.dx1)  # (N, d) skip path 2: both contributions added

    # x1 = x + attention(LayerNorm(x)): again two paths
    att_grads, dh1 = attention_backward(params, dx1.reshape(B, T, d), blk, ws, g)  # (N, d)
    dx_att, _, _ = layernorm_backward(dh1, params["ln1_g"], blk.ln1_xhat, blk.ln1_rstd, ws,
                                      out=(ws.dx0_att, g["ln1_g"], g["ln1_b"]))  # (N, d)
    dx = np.add(dx1, dx_att, out=ws.dx0)  # (N, d) skip path 1
    return {**g, **att_grads}, dx  # (att_grads are arrays of g)


# ----------------------------------------------------------------------------------------------------------------
# Causal self-attention, each head of width dh = d / nh


def by_key(scores, B, heads):
    """Key-major scores (T_key, B nh, T_query) as (B, nh, T_key, T_query), a view; for one head (B, T_key, T_query).

    >>> by_key(np.zeros((5, 6, 5)), 2, 3).shape, by_key(np.zeros((5, 2, 5)), 2, 1).shape
    ((2, 3, 5, 5), (2, 5, 5))
    """
    T = len(scores)
    if heads == 1:
        return scores.transpose(1, 0, 2)  # (B, T_key, T_query)
    return scores.reshape(T, B, heads, T).transpose(1, 2, 0, 3)  # (B, nh, T_key, T_query)


def by_query(scores, B, heads):
    """The same as (B, nh, T_query, T_key), the weights' usual orientation; for one head (B, T_query, T_key).

    >>> by_query(np.zeros((5, 6, 5)), 2, 3).shape
    (2, 3, 5, 5)
    """
    return by_key(scores, B, heads).swapaxes(-1, -2)


def attention_forward(params, x, blk, ws):
    """Causal attention of x (B, T, d) with ws.heads heads into ws.att_out, returned as (B, T, d); the weights stay
    in blk.scores, key-major.

    >>> config = ModelConfig(96, 4, 8, 8)
    >>> p = numpy_model.init_params(config, 3)
    >>> ws = Workspace(p, config, B=1, T=2)
    >>> _ = attention_forward(p, np.array([[[1.0, 0.0, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0]]]), ws.block[0], ws)
    >>> ws.block[0].scores[:, 0, 0]  # the weights of query 0
    array([1., 0.])
    """
    B, T, d = x.shape
    N, nh = B * T, ws.heads
    dh = d // nh
    # trick: q, k and v from one product with [Wq / sqrt(dh) | Wk | Wv], replacing the three products
    # `x @ params["Wq"]`, ... and the division `/ math.sqrt(width)` of the scores: the attention takes 345 us
    # against 349, no gain measurable at this size (dev/bench.py --tricks: fused qkv)
    np.multiply(params["Wq"], 1.0 / math.sqrt(dh), out=blk.w_qkv[:, :d])
    blk.w_qkv[:, d:2 * d] = params["Wk"]
    blk.w_qkv[:, 2 * d:] = params["Wv"]
    qkv = np.matmul(x.reshape(N, d), blk.w_qkv, out=blk.qkv.reshape(N, 3 * d)).reshape(B, T, 3 * d)  # (B, T, 3d)
    q, k, v = qkv[:, :, :d], qkv[:, :, d:2 * d], qkv[:, :, 2 * d:]  # (B, T, d) each, views; q carries the scale
    if ws.positions == "rope":  # q and k turned side by side: [q | k] * cos + turn_pairs([q | k]) * sin
        turned = turn_pairs(qkv[:, :, :2 * d], out=blk.qk_turned)  # (B, T, 2d)
        turned *= ws.rope_sin
        turned += np.multiply(qkv[:, :, :2 * d], ws.rope_cos, out=ws.qk_cos)  # (B, T, 2d)
        q, k = turned[:, :, :d], turned[:, :, d:]  # (B, T, d) each, views
    q, k, v = split_heads(q, nh), split_heads(k, nh), split_heads(v, nh)  # (B, nh, T, dh) each, views
    # trick: for a batch (or several heads) q is copied transposed, because the batched product runs slower on a
    # transposed view than on a contiguous copy: the attention takes 342 us instead of 395 (dev/bench.py --tricks:
    # q transposed)
    q_t = q.swapaxes(-1, -2)  # (B, nh, dh, T) a view
    if B > 1 or nh > 1:
        q_t = ws.q_t if nh > 1 else ws.q_t[:, 0]  # (B, nh, dh, T)
        q_t[...] = q.swapaxes(-1, -2)

    # trick: the scores are stored key-major, st[j, b nh + h, i] = q_bhi . k_bhj, so that the softmax's max and sum
    # run along the long axis, replacing `q @ k.swapaxes(-1, -2)` and its reductions over the last axis: the
    # attention takes 346 us instead of 917 (dev/bench.py --tricks: key-major softmax)
    st = blk.scores  # (T_key, B nh, T_query)
    np.matmul(k, q_t, out=by_key(st, B, nh))  # (B, nh, T_key, T_query) written key-major
    # trick: the mask is kept at full size, (T, B nh, T): adding a (T, 1, T) one broadcasts in B nh short loops,
    # but within the attention it is not measurable, 348 us against 346 (dev/bench.py --tricks: full mask)
    st += ws.mask  # (T, B nh, T) -inf where the key comes later: exp gives exactly 0 there
    st2 = st.reshape(T, N * nh)  # (T_key, N nh) one column per query of each head
    top = np.maximum.reduce(st2, axis=0, out=ws.att_top)  # (N nh,)
    st2 -= top
    np.exp(st2, out=st2)
    z = column_sums(st2, ws.ones[T], out=ws.att_z)  # (N nh,)
    np.divide(1.0, z, out=z)  # (N nh,) one division per query, then products (see reciprocal in layernorm_forward)
    st2 *= z  # (T, N nh) now the softmax weights, still key-major

    np.matmul(by_query(st, B, nh), v, out=split_heads(blk.ctx, nh))  # (B, nh, T, dh) into (B, T, d)
    out = np.matmul(blk.ctx.reshape(N, d), params["Wo"], out=ws.att_out)  # (N, d)
    return out.reshape(B, T, d)


def attention_backward(params, dout, blk, ws, g):
    """Gradients of attention: dout (B, T, d) -> ({"Wq", "Wk", "Wv", "Wo"}, the arrays of g they are written into;
    dx (N, d), in ws.dh1).

    Through each query's softmax, dscores = w * dw - w * sum_j w_j dw_j. (The shortcut sum_j w_j dw_j = dctx . ctx
    is cheaper but rounds differently: where one key has all the weight, as the first query always does, it
    leaves noise where the exact answer is 0.)

    >>> config = ModelConfig(96, 4, 8, 8)
    >>> p = numpy_model.init_params(config, 3)
    >>> ws = Workspace(p, config, B=1, T=1)
    >>> _ = attention_forward(p, np.array([[[1.0, 0.0, 0.0, 0.0]]]), ws.block[0], ws)
    >>> grads, dx = attention_backward(p, np.array([[[1.0, 0.0, 0.0, 0.0]]]), ws.block[0], ws, ws.grads)
    >>> sorted(grads), dx.shape
    (['Wk', 'Wo', 'Wq', 'Wv'], (1, 4))
    """
    B, T, d = dout.shape
    N, nh = B * T, ws.heads
    dh = d // nh
    qkv, st = blk.qkv, blk.scores
    q, k, v = qkv[:, :, :d], qkv[:, :, d:2 * d], qkv[:, :, 2 * d:]  # (B, T, d) each
    if ws.positions == "rope":
        q, k = blk.qk_turned[:, :, :d], blk.qk_turned[:, :, d:]  # (B, T, d) each: the scores were made from these
    q, k, v = split_heads(q, nh), split_heads(k, nh), split_heads(v, nh)  # (B, nh, T, dh) each, views
    dout2 = dout.reshape(N, d)  # (N, d)
    weight_grad(blk.ctx.reshape(N, d), dout2, g["Wo"], None)  # (d, d) square: formed as it is
    dctx = np.matmul(dout2, params["Wo"].T, out=ws.dctx)  # (N, d)
    dctx = split_heads(dctx.reshape(B, T, d), nh)  # (B, nh, T, dh) a view
    dctx_t = dctx.swapaxes(-1, -2)  # (B, nh, dh, T) a view
    if B > 1 or nh > 1:
        dctx_t = ws.dctx_t if nh > 1 else ws.dctx_t[:, 0]
        dctx_t[...] = dctx.swapaxes(-1, -2)  # (B, nh, dh, T)

    # through the weighted sum ctx_i = sum_j w_ij v_j, then through each query's softmax (all key-major)
    dst = ws.dscores  # (T_key, B nh, T_query)
    np.matmul(v, dctx_t, out=by_key(dst, B, nh))  # dw[j, b nh + h, i] = dctx_bhi . v_bhj
    dst2, st2 = dst.reshape(T, N * nh), st.reshape(T, N * nh)  # (T_key, N nh) each
    dst2 *= st2  # (T, N nh) w * dw
    rowdot = column_sums(dst2, ws.ones[T], out=ws.rowdot)  # (N nh,) sum_j w_j dw_j
    dst2 -= np.multiply(st2, rowdot, out=ws.weighted)  # (T, N nh) dscores; exactly 0 where w is 0 or 1

    dqkv = ws.dqkv  # (B, T, 3d) dq, dk, dv side by side
    dq, dk, dv = (split_heads(dqkv[:, :, i * d:(i + 1) * d], nh) for i in range(3))  # (B, nh, T, dh) each, views
    np.matmul(by_query(dst, B, nh), k, out=dq)  # dq_i = sum_j ds_ij k_j (for the scaled q)
    np.matmul(by_key(dst, B, nh), q, out=dk)  # dk_j = sum_i ds_ij q_i
    np.matmul(by_key(st, B, nh), dctx, out=dv)  # dv_j = sum_i w_ij dctx_i
    if ws.positions == "rope":  # so far the gradients of the turned q and k: turn each pair back by its angle
        dqk = dqkv[:, :, :2 * d]  # (B, T, 2d) a view
        dqk_sin = np.multiply(dqk, ws.rope_sin, out=ws.dqk_sin)  # (B, T, 2d)
        turned = turn_pairs(dqk_sin, out=ws.dqk_turned)  # (B, T, 2d)
        dqk *= ws.rope_cos
        dqk -= turned  # (B, T, 2d) dy * cos - turn_pairs(dy * sin): the inverse turn
    dqkv2 = dqkv.reshape(N, 3 * d)  # (N, 3d)
    dw_qkv = weight_grad(blk.h1.reshape(N, d), dqkv2, ws.dw_qkv, ws.dw_qkv_t)  # (d, 3d)
    np.multiply(dw_qkv[:, :d], 1.0 / math.sqrt(dh), out=g["Wq"])  # (d, d) the scale of q
    g["Wk"][...] = dw_qkv[:, d:2 * d]  # (d, d)
    g["Wv"][...] = dw_qkv[:, 2 * d:]  # (d, d)
    # x feeds q, k and v: its gradient is one product over all three paths
    dx = np.matmul(dqkv2, blk.w_qkv.T, out=ws.dh1)  # (N, d)
    return {name: g[name] for name in ("Wq", "Wk", "Wv", "Wo")}, dx


# ----------------------------------------------------------------------------------------------------------------
# The token rows of the embedding gradient


def token_rows_sum(ids, dx0, out, ws):
    """out (V, d) = for each token, the sum of the rows of dx0 (N, d) at the positions holding it.

    trick: replaces `np.add.at(d_tok, ids, dx0)`, which is slow. For a short input, one bincount over the flat
    index id * d + column (in float64, then rounded): 8 us instead of 13 with B = 1 (dev/bench.py --tricks: token rows
    B 1); for a long one, the positions sorted by token (a radix sort of 16-bit keys) and each token's run of rows
    added up by reduceat: 50 us instead of 324 (token rows).

    >>> config = ModelConfig(3, 2, 2, 2)
    >>> ws = Workspace(numpy_model.init_params(config, 3), config, B=1, T=2)
    >>> token_rows_sum(np.array([2, 2]), np.array([[1.0, 2.0], [3.0, 4.0]]), np.empty((3, 2)), ws)
    array([[0., 0.],
           [0., 0.],
           [4., 6.]])
    """
    (N, d), V = dx0.shape, len(out)
    if N * d <= 8192:  # short input
        flat = (ids[:, None] * d + np.arange(d)).reshape(N * d)  # (N d,)
        out.reshape(V * d)[...] = np.bincount(flat, weights=dx0.reshape(N * d), minlength=V * d)
        return out
    keys = ids.astype(np.int16) if V <= 32767 else ids  # (N,) 16-bit keys: a radix sort
    order = np.argsort(keys, kind="stable")  # (N,)
    counts = np.bincount(ids, minlength=V)  # (V,) positions per token
    used = np.flatnonzero(counts)  # (U,) the tokens that occur, in sorted order
    starts = (np.cumsum(counts) - counts)[used]  # (U,) where each token's run begins in the sorted order
    rows = np.take(dx0, order, axis=0, out=ws.dx0_sorted, mode="clip")  # (N, d)
    sums = ws.tok_sums[:len(used)]  # (U, d) one row per token used
    np.add.reduceat(rows, starts, axis=0, out=sums)
    out.fill(0.0)
    out[used] = sums
    return out


# ----------------------------------------------------------------------------------------------------------------
# One call with a fresh workspace, by numpy_model's names: for checks and one-off use


def forward(params, ids, config):
    """numpy_model.forward through a fresh workspace: logits (T, V) or (B, T, V), and the cache of intermediates.

    >>> config = ModelConfig(96, 4, 8, 8)
    >>> logits, cache = forward(numpy_model.init_params(config, 3), [1, 2, 3], config)
    >>> logits.shape, cache["att"]["weights"].shape
    ((3, 96), (3, 3))
    """
    ws, ids, logits = one_off(params, ids, config)
    if ids.ndim == 2:
        return logits, ws.cache
    return logits[0], first_row(ws.cache)


def first_row(x):
    """A cache of a batch of one without its batch axis: every array of it (in dicts and lists too) indexed [0].

    >>> first_row({"a": np.zeros((1, 3)), "b": [{"c": np.ones((1, 2))}], "d": "rope"})["b"][0]["c"]
    array([1., 1.])
    """
    if isinstance(x, np.ndarray):
        return x[0]
    if isinstance(x, dict):
        return {name: first_row(value) for name, value in x.items()}
    if isinstance(x, list):
        return [first_row(value) for value in x]
    return x


def loss_and_grads(params, ids, targets, config):
    """numpy_model.loss_and_grads through a fresh workspace: the mean loss over every position of ids (T,) or
    (B, T), and one gradient per parameter.

    >>> config = ModelConfig(96, 4, 8, 8)
    >>> loss, grads = loss_and_grads(numpy_model.init_params(config, 3), [[1, 2]], [[2, 3]], config)
    >>> round(loss, 2), grads["tok_emb"].shape
    (4.55, (96, 4))
    """
    ws, ids, logits = one_off(params, ids, config)
    targets = numpy_model.check_targets(targets, logits if ids.ndim == 2 else logits[0])
    loss, dlogits = ws.loss_and_dlogits(logits, targets.reshape(ws.B, ws.T))
    return loss, ws.backward(params, dlogits, check=False)  # (its forward checked the same params)


def sequence_loss(params, ids, targets, config):
    """numpy_model.sequence_loss through a fresh workspace: the loss of predicting targets from ids, one float.

    >>> config = ModelConfig(96, 4, 8, 8)
    >>> round(sequence_loss(numpy_model.init_params(config, 3), [1, 2], [2, 3], config), 2)
    4.55
    """
    ws, ids, logits = one_off(params, ids, config)
    targets = numpy_model.check_targets(targets, logits if ids.ndim == 2 else logits[0])
    return ws.loss_and_dlogits(logits, targets.reshape(ws.B, ws.T))[0]


def one_off(params, ids, config):
    """(a fresh Workspace for ids of shape (T,) or (B, T), ids as an array, the logits (B, T, V) of its forward pass
    over them), after numpy_model.forward's checks.

    >>> config = ModelConfig(96, 4, 8, 8, positions="rope")
    >>> ws, ids, logits = one_off(numpy_model.init_params(config, 3), [1, 2], config)
    >>> ws.B, ws.T, ws.positions, logits.shape
    (1, 2, 'rope', (1, 2, 96))
    """
    numpy_model.check_params(params, config)
    ids = numpy_model.check_ids(ids, config.vocab)
    ws = Workspace(params, config, *((1, *ids.shape) if ids.ndim == 1 else ids.shape))
    return ws, ids, ws.forward(params, ids.reshape(ws.B, ws.T))[0]
