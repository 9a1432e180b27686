"""Both NumPy paths, numpy_model.py (the plain mirror) and numpy_fast.py (the tuned one), against the reference
model.py, by finite differences, in float32, and on what each must refuse. Every test takes the path as a parameter
and runs once for each, through the functions both modules have: forward, loss_and_grads and sequence_loss.

Relative error here means: largest absolute difference / largest absolute value of the reference tensor (the
absolute difference itself when the reference tensor is all zeros). The random configs are described, with what
they leave out and why, in fastpath_helpers.py.
"""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import model
from oneblock import numpy_model as nm
from oneblock.config import SCHEMES, ModelConfig, seed_switch
from fastpath_helpers import (PATHS, SERIES, SERIES_CONFIG, assert_central_differences_match, assert_close,
                              config_for, configs, draw_batch, jittered, numpy_run, reference, rel_err)

pytestmark = pytest.mark.parametrize("path", PATHS)


# ----------------------------------------------------------------------------------------------------------------
# float64 against the reference


@settings(max_examples=60, deadline=None)
@given(cfg=configs, length=st.integers(1, 12))
def test_float64_matches_reference(path, cfg, length):
    """Logits, loss and every gradient within 1e-12 relative; each row of a batch is its own reference run and
    the batch gradient is the mean over rows (1-D IDs when flat and B = 1)."""
    V, d, H, L = cfg["vocab"], cfg["d"], cfg["hidden"], cfg["max_len"]
    config = ModelConfig(V, d, H, L, positions="learned" if cfg["positions"] else "none")
    T = min(length, L)
    params = jittered(V, d, H, L, cfg["seed"], cfg["scale"])
    ids, targets = draw_batch(np.random.default_rng(cfg["seed"]), V, cfg["batch"], T)
    want = reference(params, ids, targets, seed_switch(config))
    p = nm.from_lists(params, np.float64)
    if cfg["flat"] and cfg["batch"] == 1:
        logits, loss, grads = numpy_run(path, p, ids[0], targets[0], config)
        assert logits.shape == (T, V)
        assert_close((logits[None], loss, grads), want, 1e-12)
    else:
        assert_close(numpy_run(path, p, ids, targets, config), want, 1e-12)


def test_series_size_batch_rows_and_intermediates(path):
    """At series size with B = 3: every intermediate of each row matches the reference run on that row alone. (With
    learned positions, the intermediates of a batch are dev/compare.py's, which tests/test_compare.py runs.)"""
    params = jittered(*SERIES, scale=0.05)
    ids = np.random.default_rng(7).integers(0, 96, (3, 50))
    config = config_for(*SERIES, positions="none")
    _, cache = path.forward(nm.from_lists(params), ids, config)
    for b in range(3):
        _, ref = model.forward(params, ids[b].tolist(), seed_switch(config))
        for name in ("x0", "h1", "x1", "h2", "act", "x2"):
            assert rel_err(cache[name][b], ref[name]) <= 1e-12, name
        assert rel_err(cache["att"]["weights"][b], ref["att"]["weights"]) <= 1e-12


def test_series_size_batch_gradients(path):
    """B = 12 at T = 64 (in numpy_fast, long enough for the token-embedding gradient's sort-and-add route)."""
    params = jittered(*SERIES, scale=0.05)
    rng = np.random.default_rng(4)
    ids, targets = rng.integers(0, 96, (12, 64)), rng.integers(0, 96, (12, 64))
    assert_close(numpy_run(path, nm.from_lists(params), ids, targets, SERIES_CONFIG),
                 reference(params, ids, targets, True), 1e-12)


@pytest.mark.parametrize("dtype, tol", [(np.float64, 1e-12), (np.float32, 1e-5)])
def test_large_vocabulary(path, dtype, tol):
    """V = 600 (in numpy_fast, row-major logits, and a loss in several blocks in float64): the reference's numbers,
    float32 within the float32 tolerance."""
    params = jittered(600, 8, 12, 64, 3, scale=0.1)
    rng = np.random.default_rng(6)
    ids, targets = rng.integers(0, 600, (3, 64)), rng.integers(0, 600, (3, 64))
    assert_close(numpy_run(path, nm.from_lists(params, dtype), ids, targets, config_for(600, 8, 12, 64)),
                 reference(params, ids, targets, True), tol)


def test_rows_past_T_and_unused_tokens_get_exact_zeros(path):
    p = nm.init_params(SERIES_CONFIG, 3)
    ids, targets = np.array([[1, 2, 2, 5]]), np.array([[2, 2, 5, 1]])
    _, g = path.loss_and_grads(p, ids, targets, SERIES_CONFIG)
    assert not g["pos_emb"][4:].any() and g["pos_emb"][:4].all()
    assert not g["tok_emb"][np.setdiff1d(np.arange(96), ids)].any()


# ----------------------------------------------------------------------------------------------------------------
# Finite differences and the exactness properties that survive BLAS


def test_full_central_difference_gradient_check_at_series_size(path):
    """All 7,440 parameters at series size, one sequence of T = 63."""
    params = nm.init_params(SERIES_CONFIG, 3)
    assert sum(t.size for t in params.values()) == 7440
    seq = np.random.default_rng(7).integers(0, 96, 64)
    assert_central_differences_match(path, params, seq[:-1], seq[1:], SERIES_CONFIG)


@pytest.mark.parametrize("blocks, heads, scheme", [(1, 1, "learned"), (2, 4, "learned"), (2, 4, "rope"),
                                                  (3, 2, "learned"), (3, 2, "rope")])
def test_causality_earlier_logits_unchanged(path, blocks, heads, scheme):
    """Changing the token at position t leaves logits before t within 1e-15, in every block (in practice
    bit-identical: BLAS computes each row of a product from that row alone, and masked weights are exactly 0)."""
    p = nm.from_lists(jittered(*SERIES[:4], 5, scale=0.05, blocks=blocks))
    config = config_for(*SERIES, blocks=blocks, heads=heads, positions=scheme)
    ids = np.random.default_rng(5).integers(0, 96, (3, 40))
    base = path.forward(p, ids, config)[0]
    for t in (0, 17, 39):
        changed = ids.copy()
        changed[:, t] = (changed[:, t] + 1) % 96
        logits = path.forward(p, changed, config)[0]
        assert np.max(np.abs(logits[:, :t] - base[:, :t]), initial=0.0) <= 1e-15
        assert np.max(np.abs(logits[:, t] - base[:, t])) > 0.0


@pytest.mark.parametrize("heads", [1, 2, 4, 8])
def test_word_order_reaches_the_last_position_only_with_positions(path, heads):
    """Two orderings of the same tokens, with the same last token: with no positions the last logits of one block
    of any number of heads are the same within 1e-12 (every head reads the set of the tokens before it; the
    reference is bit-exact, BLAS sums in its own order); with each scheme that has positions they differ."""
    p = nm.from_lists(jittered(*SERIES[:4], 9, scale=0.05))
    rng = np.random.default_rng(9)
    a = rng.integers(0, 96, 30)
    b = np.concatenate([rng.permutation(a[:-1]), a[-1:]])  # same tokens, same last token, another order
    assert (a != b).any()
    last = lambda ids, s: path.forward(p, ids, config_for(*SERIES, heads=heads, positions=s))[0][-1]  # noqa: E731
    assert np.max(np.abs(last(a, "none") - last(b, "none"))) <= 1e-12
    for scheme in ("learned", "sinusoidal", "rope"):
        assert np.max(np.abs(last(a, scheme) - last(b, scheme))) > 1e-6, scheme


# ----------------------------------------------------------------------------------------------------------------
# float32


@pytest.mark.parametrize("blocks, heads, scheme, batch, T", [
    (1, 1, "learned", 1, 64), (1, 1, "learned", 4, 64), (1, 1, "none", 4, 100), (1, 1, "sinusoidal", 4, 100),
    (1, 1, "rope", 4, 100), *((2, 4, scheme, 4, 64) for scheme in SCHEMES)])
def test_float32_close_to_float64(path, blocks, heads, scheme, batch, T):
    """float32 loss and gradients within 1e-5 relative of float64 (same parameters, same IDs), in float32, in one
    block and in a grown model."""
    params = jittered(*SERIES, scale=0.05, blocks=blocks)
    rng = np.random.default_rng(11)
    ids, targets = rng.integers(0, 96, (batch, T)), rng.integers(0, 96, (batch, T))
    config = config_for(*SERIES, blocks=blocks, heads=heads, positions=scheme)
    loss64, g64 = path.loss_and_grads(nm.from_lists(params, np.float64), ids, targets, config)
    loss32, g32 = path.loss_and_grads(nm.from_lists(params, np.float32), ids, targets, config)
    assert abs(loss32 - loss64) <= 1e-5 * abs(loss64)
    for name in g64:
        assert g32[name].dtype == np.float32, name
        assert rel_err(g32[name], g64[name]) <= 1e-5, name
    assert path.forward(nm.from_lists(params, np.float32), ids, config)[0].dtype == np.float32


# ----------------------------------------------------------------------------------------------------------------
# Validation: the same errors from both paths

P = nm.init_params(SERIES_CONFIG, 3)


@pytest.mark.parametrize("ids, message", [
    (np.array([], dtype=int), "empty sequence"),
    (np.zeros((0, 3), dtype=int), "empty batch"),
    (np.zeros(65, dtype=int), "sequence of 65 tokens is longer than the 64 positions the model has$"),
    (np.array([[-1, 2, 100]]), r"token IDs outside the vocabulary of size 96: \[-1, 100\]"),
    (np.array([1.0, 2.0]), "token IDs should be plain ints, got an array of dtype float64"),
    (np.array([True, False]), "token IDs should be plain ints, got an array of dtype bool"),
    ([1, None], r"token IDs should be plain ints, got None \(NoneType\) at position \(1,\)"),
    ("abc", "token IDs should be an int array"),
    (np.zeros((1, 2, 3), dtype=int), r"token IDs should have shape \(T,\) or \(B, T\), got shape \(1, 2, 3\)"),
    (np.int64(3), r"token IDs should have shape \(T,\) or \(B, T\), got shape \(\)"),
])
def test_bad_ids_are_rejected(path, ids, message):
    with pytest.raises(ValueError, match=message):
        path.forward(P, ids, SERIES_CONFIG)
    with pytest.raises(ValueError, match=message):
        path.loss_and_grads(P, ids, ids, SERIES_CONFIG)


@pytest.mark.parametrize("targets, message", [
    (np.array([1, 2]), "3 positions but 2 targets"),
    (np.array([[1, 2, 3]]), r"targets of shape \(1, 3\) do not match logits of shape \(3, 96\)"),
    (np.array([1, 2, 96]), r"target IDs outside the vocabulary of size 96: \[96\]"),
    (np.array([1.5, 2, 3]), "target IDs should be plain ints"),
])
def test_bad_targets_are_rejected(path, targets, message):
    with pytest.raises(ValueError, match=message):
        path.loss_and_grads(P, np.array([1, 2, 3]), targets, SERIES_CONFIG)
    with pytest.raises(ValueError, match=message):
        path.sequence_loss(P, np.array([1, 2, 3]), targets, SERIES_CONFIG)


@pytest.mark.parametrize("change, message", [
    (lambda p: p.pop("Wq"), r"parameter dict is missing tensors: \['Wq'\]"),
    (lambda p: p.update(extra=np.zeros(1)), r"parameter dict has unknown tensors: \['extra'\]"),
    (lambda p: p.update(W1=np.zeros((16, 63))), r"parameter W1 has shape \(16, 63\), expected \(16, 64\)"),
    (lambda p: p.update(W2=[[0.0] * 16] * 64), "parameter W2 should be a NumPy array, got list"),
    (lambda p: p.update(ln1_g=np.ones(16, np.float32)), "parameter ln1_g has dtype float32, but tok_emb has"),
    (lambda p: p.update(tok_emb=np.zeros((96, 16), int)), "parameters must be float32 or float64, got int64"),
    (lambda p: p.update(tok_emb=np.zeros(96)), r"parameter tok_emb has shape \(96,\), expected \(96, 16\)"),
])
def test_bad_parameters_are_rejected(path, change, message):
    p = dict(P)
    change(p)
    with pytest.raises(ValueError, match=message):
        path.forward(p, np.array([1, 2]), SERIES_CONFIG)
    with pytest.raises(ValueError, match=message):
        path.loss_and_grads(p, np.array([1, 2]), np.array([2, 3]), SERIES_CONFIG)


def test_the_scheme_is_the_configs(path):
    """config.positions chooses the scheme: each of SCHEMES gives logits of its own, and sequence_loss is the loss of
    loss_and_grads; model.py's switch (seed_switch) is True exactly for learned. A scheme that is none of SCHEMES,
    or a description that is no ModelConfig, is an error naming it."""
    ids = np.array([1, 2, 3])
    logits = [path.forward(P, ids, config_for(*SERIES, positions=s))[0] for s in SCHEMES]
    assert all(not np.array_equal(a, b) for i, a in enumerate(logits) for b in logits[i + 1:])
    assert [seed_switch(config_for(*SERIES, positions=s)) for s in SCHEMES] == [True, False, False, False]
    rope = config_for(*SERIES, positions="rope")
    assert path.sequence_loss(P, ids, ids, rope) == path.loss_and_grads(P, ids, ids, rope)[0]
    with pytest.raises(ValueError, match="positions = 'rotary': expected one of learned, none, sinusoidal, rope"):
        path.forward(P, ids, config_for(*SERIES, positions="rotary"))
    with pytest.raises(TypeError, match="the model's description should be a ModelConfig, got str 'rope'"):
        path.forward(P, ids, "rope")


# ----------------------------------------------------------------------------------------------------------------
# Position schemes: learned, none, sinusoidal, rope (each one's gradients by central differences:
# test_grown.py's, for one block of one head too)


def test_sinusoidal_scheme_adds_the_table(path):
    """x0 of the sinusoidal scheme is the token rows plus exactly numpy_model.sinusoid_table."""
    p = nm.init_params(SERIES_CONFIG, 3)
    ids = np.arange(100) % 96
    _, cache = path.forward(p, ids, config_for(*SERIES, positions="sinusoidal"))
    np.testing.assert_array_equal(cache["x0"], p["tok_emb"][ids] + nm.sinusoid_table(100, 16))


def test_rope_scores_depend_on_the_offset_only(path):
    """A sequence of one repeated token: with rope, log(w[i, i - m] / w[i, i]) = score(i, i - m) - score(i, i) is the
    same for every query i (the scores see only the offset m); with sinusoidal positions it is not (they are
    absolute), and without positions every key gets the same weight."""
    p = nm.from_lists(jittered(*SERIES, scale=0.2))
    ids = np.full(80, 7)
    logs = {}
    for scheme in ("rope", "sinusoidal", "none"):
        w = path.forward(p, ids, config_for(*SERIES, positions=scheme))[1]["att"]["weights"]  # (T, T)
        logs[scheme] = np.array([[math.log(w[i, i - m] / w[i, i]) for i in range(10, 80)] for m in (1, 5, 9)])
    assert np.ptp(logs["rope"], axis=1).max() <= 1e-12
    assert np.ptp(logs["sinusoidal"], axis=1).min() > 1e-3
    assert np.abs(logs["none"]).max() <= 1e-12


@pytest.mark.parametrize("scheme", ["none", "sinusoidal", "rope"])
def test_schemes_without_rows_read_up_to_their_maximum(path, scheme):
    """none, sinusoidal and rope read up to LONGEST = 1024 positions and reject more with the SPEC's message
    (learned stops at its 64 rows: test_bad_ids_are_rejected). Causality holds past 64 too."""
    p = nm.from_lists(jittered(*SERIES, scale=0.05))
    config = config_for(*SERIES, positions=scheme)
    ids = np.random.default_rng(2).integers(0, 96, nm.LONGEST + 1)
    logits, _ = path.forward(p, ids[:nm.LONGEST], config)
    assert logits.shape == (1024, 96) and np.isfinite(logits).all()
    with pytest.raises(ValueError, match=f"sequence of 1025 tokens is longer than the 1024 positions the model has"
                                         f" with positions='{scheme}'"):
        path.forward(p, ids, config)
    changed = ids[:128].copy()
    changed[100] = (changed[100] + 1) % 96
    before, after = path.forward(p, ids[:128], config)[0], path.forward(p, changed, config)[0]
    assert np.max(np.abs(before[:100] - after[:100])) <= 1e-15 and np.abs(before[100] - after[100]).max() > 0
