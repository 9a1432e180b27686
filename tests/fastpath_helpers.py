"""Helpers shared by the tests of the NumPy paths and the PyTorch twin: the NumPy paths to run every check on, random
model-like configs, jittered and spread parameters, the reference run on a batch, the tests' own loss, and the relative
error every comparison uses."""

import numpy as np
import pytest
from hypothesis import strategies as st

import model
from oneblock import numpy_fast, numpy_model
from oneblock.config import ModelConfig

SERIES = (96, 16, 64, 64, 3)  # vocab, d, hidden, max_len, seed
SERIES_CONFIG = ModelConfig(*SERIES[:4])  # the series model: one block, one head, learned positions

# The two NumPy implementations of the model, each with forward, loss_and_grads and sequence_loss under the same
# names and signatures (params, ids[, targets], config); a test that takes `path` runs once for each.
PATHS = [pytest.param(numpy_model, id="numpy_model"), pytest.param(numpy_fast, id="numpy_fast")]


def rel_err(got, want):
    """Largest |got - want| over the largest |want| (or the plain difference when want is all zeros)."""
    got, want = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
    assert got.shape == want.shape, (got.shape, want.shape)
    err = float(np.max(np.abs(got - want))) if want.size else 0.0
    scale = float(np.max(np.abs(want))) if want.size else 0.0
    return err / scale if scale > 0 else err


def jittered(vocab, d, hidden, max_len, seed, scale, blocks=1):
    """Reference parameters (dict of lists; of a grown model with blocks > 1) plus noise, so that gains are not 1 and
    biases not 0."""
    rng = np.random.default_rng(seed)
    p = config_for(vocab, d, hidden, max_len, blocks=blocks).init_params(seed)
    return {name: (np.array(t) + rng.normal(0.0, scale, np.shape(t))).tolist() for name, t in p.items()}


def spread_params(config, seed):
    """Parameters of config with every number spread (weights of 0.3, gains and biases near 1 and 0), float64, in the
    config's order: attention far from uniform and every gradient well away from zero."""
    rng = np.random.default_rng(seed)
    return {name: (1.0 if name.endswith("_g") else 0.0) + rng.normal(0.0, 0.3 if len(shape) == 2 else 0.1, shape)
            for name, shape in config.param_shapes().items()}  # {name: (shape) float64}


def config_for(vocab, d, hidden, max_len, *_, **given):
    """The ModelConfig of these sizes (a seed after them is ignored), with any of blocks, heads and positions.

    >>> config_for(*SERIES, positions="rope").positions
    'rope'
    """
    return ModelConfig(vocab, d, hidden, max_len, **given)


def reference(params, ids, targets, switch):
    """Reference logits (B, T, V), mean loss and mean gradients over the rows of ids (B, T), by model.py with its
    own switch (True for learned positions, False for none: seed_switch of a config)."""
    logits, losses, grads = [], [], []
    for x, y in zip(ids.tolist(), targets.tolist()):
        lg, cache = model.forward(params, x, switch)
        loss, dlogits = model.loss_and_dlogits(lg, y)
        logits.append(lg)
        losses.append(loss)
        grads.append(model.backward(params, cache, dlogits))
    B = len(ids)
    return np.array(logits), sum(losses) / B, {n: sum(np.array(g[n]) for g in grads) / B for n in grads[0]}


# Model-like random configs. Left out, because there the metric measures rounding noise, not correctness (any two
# implementations that round differently, PyTorch included, disagree there by more than 1e-12 of the tensor):
# - d = 2 and 3: a layer norm of 2 numbers outputs about +-1 whatever its input, so its input gradient is a
#   difference of nearly equal terms, of relative size EPS / var; with 3 the same happens often enough.
# - weights much larger than 0.2: the attention saturates, and the Wq and Wk gradients shrink to ~1e-30 while
#   the terms that cancel in them stay ~1.
# - a token repeated within a sequence without positions: keys can coincide, the true Wq gradient is exactly 0,
#   and what both sides compute is rounding noise (1e-33 in the reference, 1e-17 here).
configs = st.fixed_dictionaries({
    "vocab": st.integers(12, 40), "d": st.integers(4, 16), "hidden": st.integers(1, 16),
    "max_len": st.integers(1, 12), "seed": st.integers(0, 10**6), "scale": st.sampled_from([0.02, 0.05, 0.1, 0.2]),
    "batch": st.integers(1, 3), "positions": st.booleans(), "flat": st.booleans(),
})


def draw_batch(rng, vocab, batch, length):
    """IDs (B, T) with no token repeated within a sequence, and targets (B, T)."""
    ids = np.array([rng.permutation(vocab)[:length] for _ in range(batch)])  # (B, T)
    return ids, rng.integers(0, vocab, (batch, length))


def numpy_run(path, params, ids, targets, config):
    """(logits, loss, grads) through a NumPy path: the logits from its forward, the rest from its loss_and_grads."""
    logits, _ = path.forward(params, ids, config)
    return (logits, *path.loss_and_grads(params, ids, targets, config))


def assert_close(got, want, tol, where=""):
    """(logits, loss, grads) of one implementation (named where) within tol of want's, relative; the gradients
    tensor by tensor, named in want's order (model.py's, for the reference's)."""
    (logits, loss, grads), (want_logits, want_loss, want_grads) = got, want
    assert rel_err(logits, want_logits) <= tol, (where, "logits")
    assert abs(loss - want_loss) <= tol * abs(want_loss), (where, "loss")
    assert list(grads) == list(want_grads), where
    for name in grads:
        assert rel_err(grads[name], want_grads[name]) <= tol, (where, name)


def mean_cross_entropy(logits, targets):
    """The loss the tests compute themselves, in float64: -log softmax(logits)[target] averaged over positions."""
    rows = np.asarray(logits, dtype=np.float64).reshape(-1, logits.shape[-1])  # (N, V)
    top = rows.max(axis=1)  # (N,)
    log_z = top + np.log(np.exp(rows - top[:, None]).sum(axis=1))  # (N,)
    return float(np.mean(log_z - rows[np.arange(len(rows)), np.ravel(targets)]))


def central_differences(params, loss, step=1e-6):
    """{name: array of (loss(p + step) - loss(p - step)) / (2 step)} for every number of every array in params,
    perturbed in place one at a time and restored."""
    numeric = {}
    for name, t in params.items():
        flat = t.reshape(-1)  # a view: writing into it perturbs the parameter
        out = np.empty(flat.size)
        for i in range(flat.size):
            keep = flat[i]
            flat[i] = keep + step
            up = loss()
            flat[i] = keep - step
            down = loss()
            flat[i] = keep
            out[i] = (up - down) / (2 * step)
        numeric[name] = out.reshape(t.shape)
    return numeric


def assert_central_differences_match(path, params, ids, targets, config):
    """Every parameter, float64, step 1e-6: max |central difference - gradient| < 1e-8 (the rounding noise of the
    loss differences is about 1e-9). The loss differentiated is the tests' own cross-entropy of the path's logits.
    No step may move a ReLU input across 0 (in any block): a central difference across the kink measures the kink,
    not the derivative, so a test whose sequence does that must pick another. config: the params' ModelConfig.
    Returns (numeric, grads, the worst error of each tensor)."""
    _, grads = path.loss_and_grads(params, ids, targets, config)
    grads = {name: np.array(g) for name, g in grads.items()}

    def relu_inputs():
        logits, cache = path.forward(params, ids, config)
        return logits, np.concatenate([block["pre"].ravel() for block in cache.get("blocks", [cache])]) > 0.0

    relu_on = relu_inputs()[1]
    flips = 0

    def loss():
        nonlocal flips
        logits, on = relu_inputs()
        flips += np.count_nonzero(on != relu_on)
        return mean_cross_entropy(logits, targets)

    numeric = central_differences(params, loss, 1e-6)
    worst = {name: float(np.max(np.abs(numeric[name] - grads[name]))) for name in params}
    assert flips == 0, "a step crossed a ReLU kink: pick another sequence"
    assert max(worst.values()) < 1e-8, worst
    return numeric, grads, worst
