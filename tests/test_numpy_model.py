"""Tests of the NumPy path (numpy_model.py) against the reference model.py, by finite differences, and in float32.

Relative error here means: largest absolute difference / largest absolute value of the reference tensor (the
absolute difference itself when the reference tensor is all zeros). The random configs are described, with what
they leave out and why, in fastpath_helpers.py.
"""

import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE)]  # the repository root (model files) and tests/ (shared helpers)

import model  # noqa: E402
import numpy_model as nm  # noqa: E402
from fastpath_helpers import SERIES, configs, draw_batch, jittered, reference, rel_err  # noqa: E402


def numpy_step(p, ids, targets, use_positions=True, ws=None):
    """(logits copy, loss, grads) through the NumPy path."""
    logits, cache = nm.forward(p, ids, use_positions, ws)
    logits = np.array(logits)
    loss, dlogits = nm.loss_and_dlogits(logits, targets, ws)
    return logits, loss, nm.backward(p, cache, dlogits, ws)


# ----------------------------------------------------------------------------------------------------------------
# float64 against the reference


@settings(max_examples=60, deadline=None)
@given(cfg=configs, length=st.integers(1, 12))
def test_float64_matches_reference(cfg, length):
    """Logits, loss and every gradient within 1e-12 relative; each row of a batch is its own reference run and
    the batch gradient is the mean over rows (1-D IDs when flat and B = 1)."""
    V, d, H, L = cfg["vocab"], cfg["d"], cfg["hidden"], cfg["max_len"]
    T = min(length, L)
    params = jittered(V, d, H, L, cfg["seed"], cfg["scale"])
    ids, targets = draw_batch(np.random.default_rng(cfg["seed"]), V, cfg["batch"], T)
    want_logits, want_loss, want_grads = reference(params, ids, targets, cfg["positions"])

    p = nm.from_lists(params, np.float64)
    if cfg["flat"] and cfg["batch"] == 1:
        logits, loss, grads = numpy_step(p, ids[0], targets[0], cfg["positions"])
        logits = logits[None]
    else:
        logits, loss, grads = numpy_step(p, ids, targets, cfg["positions"])
    assert rel_err(logits, want_logits) <= 1e-12
    assert abs(loss - want_loss) <= 1e-12 * abs(want_loss)
    assert list(grads) == list(model.PARAM_SHAPES)
    for name in grads:
        assert grads[name].shape == want_grads[name].shape, name
        assert rel_err(grads[name], want_grads[name]) <= 1e-12, name


@pytest.mark.parametrize("use_positions", [True, False])
def test_series_size_batch_rows_and_intermediates(use_positions):
    """At series size with B = 3: every intermediate of each row matches the reference run on that row alone."""
    params = jittered(*SERIES, scale=0.05)
    p = nm.from_lists(params)
    rng = np.random.default_rng(7)
    ids = rng.integers(0, 96, (3, 50))
    _, cache = nm.forward(p, ids, use_positions)
    for b in range(3):
        _, ref = model.forward(params, ids[b].tolist(), use_positions)
        for name in ("x0", "h1", "x1", "h2", "act", "x2"):
            assert rel_err(cache[name][b], ref[name]) <= 1e-12, name
        assert rel_err(cache["att"]["weights"][b], ref["att"]["weights"]) <= 1e-12


def test_series_size_batch_gradients():
    """B = 12 at T = 64: long enough that the token-embedding gradient takes its sort-and-add route and that the
    loss runs in more than one block of positions."""
    params = jittered(*SERIES, scale=0.05)
    rng = np.random.default_rng(4)
    ids, targets = rng.integers(0, 96, (12, 64)), rng.integers(0, 96, (12, 64))
    want_logits, want_loss, want_grads = reference(params, ids, targets, True)
    logits, loss, grads = numpy_step(nm.from_lists(params), ids, targets)
    assert rel_err(logits, want_logits) <= 1e-12 and abs(loss - want_loss) <= 1e-12 * want_loss
    for name in grads:
        assert rel_err(grads[name], want_grads[name]) <= 1e-12, name


@pytest.mark.parametrize("dtype, tol", [(np.float64, 1e-12), (np.float32, 1e-5)])
def test_large_vocabulary_row_major_logits(dtype, tol):
    """V = 600: the logits are stored row-major and the loss runs in several blocks; same numbers as the reference
    (float32 against it within the float32 tolerance)."""
    params = jittered(600, 8, 12, 64, 3, scale=0.1)
    rng = np.random.default_rng(6)
    ids, targets = rng.integers(0, 600, (3, 64)), rng.integers(0, 600, (3, 64))
    want_logits, want_loss, want_grads = reference(params, ids, targets, True)
    logits, loss, grads = numpy_step(nm.from_lists(params, dtype), ids, targets)
    assert nm.forward(nm.from_lists(params, dtype), ids)[0].flags.c_contiguous  # row-major at this vocabulary size
    assert rel_err(logits, want_logits) <= tol and abs(loss - want_loss) <= tol * want_loss
    for name in grads:
        assert rel_err(grads[name], want_grads[name]) <= tol, name


def test_rows_past_T_and_unused_tokens_get_exact_zeros():
    p = nm.init_params(*SERIES)
    ids = np.array([[1, 2, 2, 5]])
    logits, cache = nm.forward(p, ids)
    _, dlogits = nm.loss_and_dlogits(logits, np.array([[2, 2, 5, 1]]))
    g = nm.backward(p, cache, dlogits)
    assert not g["pos_emb"][4:].any() and g["pos_emb"][:4].all()
    unused = np.setdiff1d(np.arange(96), ids)
    assert not g["tok_emb"][unused].any()
    _, cache = nm.forward(p, ids, use_positions=False)
    assert not nm.backward(p, cache, dlogits)["pos_emb"].any()


def test_workspace_reuse_gives_the_same_numbers():
    """With a workspace, buffers are reused across calls and shapes: results equal those of fresh arrays."""
    p = nm.from_lists(jittered(*SERIES, scale=0.05))
    rng = np.random.default_rng(1)
    ws = {}
    for shape in [(4, 20), (4, 20), (2, 64), (30,), (4, 20)]:
        ids, targets = rng.integers(0, 96, shape), rng.integers(0, 96, shape)
        fresh = numpy_step(p, ids, targets)
        reused = numpy_step(p, ids, targets, ws=ws)
        np.testing.assert_array_equal(fresh[0], reused[0])
        assert fresh[1] == reused[1]
        for name in fresh[2]:
            np.testing.assert_array_equal(fresh[2][name], reused[2][name])


def test_loss_in_place_on_the_logits():
    p = nm.init_params(*SERIES)
    ids, targets = np.array([[3, 4, 5]]), np.array([[4, 5, 6]])
    logits, _ = nm.forward(p, ids)
    want_loss, want_d = nm.loss_and_dlogits(np.array(logits), targets)
    loss, dlogits = nm.loss_and_dlogits(logits, targets, out=logits)
    assert loss == want_loss
    np.testing.assert_array_equal(dlogits, want_d)
    assert np.shares_memory(dlogits, logits)


# ----------------------------------------------------------------------------------------------------------------
# Finite differences and the exactness properties that survive BLAS


def test_full_central_difference_gradient_check_at_series_size():
    """All 7,440 parameters, float64, step 1e-6: max |central difference - backward| < 1e-8 (the rounding noise
    of the loss differences is about 1e-9). The sequence is one where no step moves any ReLU input across 0:
    a central difference across the kink measures the kink, not the derivative; the test checks that too."""
    params = nm.init_params(*SERIES)
    assert nm.count_params(params) == 7440
    seq = np.random.default_rng(7).integers(0, 96, 64)
    ids, targets = seq[:-1], seq[1:]  # T = 63
    logits, cache = nm.forward(params, ids)
    _, dlogits = nm.loss_and_dlogits(logits, targets)
    grads = {n: g.copy() for n, g in nm.backward(params, cache, dlogits).items()}
    relu_on = cache["pre"] > 0.0  # (T, H)

    ws, h, worst, flips = {}, 1e-6, 0.0, 0

    def loss():
        nonlocal flips
        logits, c = nm.forward(params, ids, ws=ws)
        flips += np.count_nonzero((c["pre"] > 0.0) != relu_on)
        return nm.loss_and_dlogits(logits, targets, ws, out=logits)[0]

    for name, t in params.items():
        flat = t.reshape(-1)  # a view: writing into it perturbs the parameter
        numeric = np.empty(flat.size)
        for i in range(flat.size):
            keep = flat[i]
            flat[i] = keep + h
            up = loss()
            flat[i] = keep - h
            down = loss()
            flat[i] = keep
            numeric[i] = (up - down) / (2 * h)
        worst = max(worst, float(np.max(np.abs(numeric - grads[name].reshape(-1)))))
    assert flips == 0, "a step crossed a ReLU kink: pick another sequence"
    assert worst < 1e-8


def test_causality_earlier_logits_unchanged():
    """Changing the token at position t leaves logits before t within 1e-15 (in practice bit-identical: BLAS
    computes each row of a product from that row alone, and masked weights are exactly 0)."""
    p = nm.from_lists(jittered(*SERIES, scale=0.05))
    rng = np.random.default_rng(5)
    ids = rng.integers(0, 96, (3, 40))
    base = np.array(nm.forward(p, ids)[0])
    for t in (0, 17, 39):
        changed = ids.copy()
        changed[:, t] = (changed[:, t] + 1) % 96
        logits = np.array(nm.forward(p, changed)[0])
        assert np.max(np.abs(logits[:, :t] - base[:, :t]), initial=0.0) <= 1e-15
        assert np.max(np.abs(logits[:, t] - base[:, t])) > 0.0


def test_word_order_without_positions():
    """Without positions, two orderings of the same tokens give the same last logits within 1e-12 (the reference
    is bit-exact; BLAS sums are not order-independent, so here the rounding differs slightly); with positions
    they differ."""
    p = nm.from_lists(jittered(*SERIES, scale=0.05))
    rng = np.random.default_rng(9)
    a = rng.integers(0, 96, 30)
    b = np.concatenate([rng.permutation(a[:-1]), a[-1:]])  # same tokens, same last token, another order
    assert (a != b).any()
    last = lambda ids, pos: np.array(nm.forward(p, ids, use_positions=pos)[0][-1])  # noqa: E731
    assert np.max(np.abs(last(a, False) - last(b, False))) <= 1e-12
    assert np.max(np.abs(last(a, True) - last(b, True))) > 1e-6


# ----------------------------------------------------------------------------------------------------------------
# float32


@pytest.mark.parametrize("batch", [1, 4])
def test_float32_close_to_float64(batch):
    """float32 loss and gradients within 1e-5 relative of float64 (same parameters, same IDs)."""
    params = jittered(*SERIES, scale=0.05)
    rng = np.random.default_rng(11)
    ids, targets = rng.integers(0, 96, (batch, 64)), rng.integers(0, 96, (batch, 64))
    _, loss64, g64 = numpy_step(nm.from_lists(params, np.float64), ids, targets)
    p32 = nm.from_lists(params, np.float32)
    _, loss32, g32 = numpy_step(p32, ids, targets)
    assert abs(loss32 - loss64) <= 1e-5 * abs(loss64)
    for name in g64:
        assert g32[name].dtype == np.float32, name
        assert rel_err(g32[name], g64[name]) <= 1e-5, name


# ----------------------------------------------------------------------------------------------------------------
# Parameters, conversion and validation


def test_init_and_conversion_round_trip():
    ref = model.init_params(*SERIES)
    p = nm.init_params(*SERIES)
    assert list(p) == list(ref) and nm.count_params(p) == model.count_params(ref) == 7440
    assert nm.to_lists(p) == ref  # float64 holds the reference's floats exactly
    assert all(t.dtype == np.float32 for t in nm.from_lists(ref, np.float32).values())
    with pytest.raises(ValueError, match="float32 or float64"):
        nm.from_lists(ref, np.float16)


P = nm.init_params(*SERIES)


@pytest.mark.parametrize("ids, message", [
    (np.array([], dtype=int), "empty sequence"),
    (np.zeros((2, 0), dtype=int), "empty sequence"),
    (np.zeros(65, dtype=int), "sequence of 65 tokens is longer than the 64 positions the model has"),
    (np.array([1, 96]), r"token IDs outside the vocabulary of size 96: \[96\]"),
    (np.array([[-1, 2, 100]]), r"token IDs outside the vocabulary of size 96: \[-1, 100\]"),
    (np.array([1.0, 2.0]), "token IDs should be plain ints, got an array of dtype float64"),
    (np.array([True, False]), "token IDs should be plain ints, got an array of dtype bool"),
    ([1, None], r"token IDs should be plain ints, got None \(NoneType\) at position \(1,\)"),
    ("abc", "token IDs should be an int array"),
    (np.zeros((1, 2, 3), dtype=int), r"token IDs should have shape \(T,\) or \(B, T\), got shape \(1, 2, 3\)"),
    (np.int64(3), r"token IDs should have shape \(T,\) or \(B, T\), got shape \(\)"),
])
def test_bad_ids_are_rejected(ids, message):
    with pytest.raises(ValueError, match=message):
        nm.forward(P, ids)


def test_lists_of_ints_are_accepted():
    logits, _ = nm.forward(P, [[1, 2, 3]])
    assert logits.shape == (1, 3, 96)


@pytest.mark.parametrize("targets, message", [
    (np.array([1, 2]), "3 positions but 2 targets"),
    (np.array([[1, 2, 3]]), r"targets of shape \(1, 3\) do not match logits of shape \(3, 96\)"),
    (np.array([1, 2, 96]), r"target IDs outside the vocabulary of size 96: \[96\]"),
    (np.array([1.5, 2, 3]), "target IDs should be plain ints"),
])
def test_bad_targets_are_rejected(targets, message):
    logits, _ = nm.forward(P, np.array([1, 2, 3]))
    with pytest.raises(ValueError, match=message):
        nm.loss_and_dlogits(logits, targets)


@pytest.mark.parametrize("change, message", [
    (lambda p: p.pop("Wq"), r"parameter dict is missing tensors: \['Wq'\]"),
    (lambda p: p.update(extra=np.zeros(1)), r"parameter dict has unknown tensors: \['extra'\]"),
    (lambda p: p.update(W1=np.zeros((16, 63))), r"parameter W1 has shape \(16, 63\), expected \(16, 64\)"),
    (lambda p: p.update(b_out=np.zeros(95)), r"parameter b_out has shape \(95,\), expected \(96,\)"),
    (lambda p: p.update(W2=[[0.0] * 16] * 64), "parameter W2 should be a NumPy array, got list"),
    (lambda p: p.update(ln1_g=np.ones(16, np.float32)), "parameter ln1_g has dtype float32, but tok_emb has"),
    (lambda p: p.update(tok_emb=np.zeros((96, 16), int)), "parameters must be float32 or float64, got int64"),
    (lambda p: p.update(tok_emb=np.zeros(96)), r"parameter tok_emb has shape \(96,\), expected \(V, d\)"),
])
def test_bad_parameters_are_rejected(change, message):
    p = dict(P)
    change(p)
    with pytest.raises(ValueError, match=message):
        nm.forward(p, np.array([1, 2]))
