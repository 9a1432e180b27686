"""Tests of the NumPy path (numpy_model.py) against the reference model.py, by finite differences, and in float32.

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
import numpy_model as nm
from fastpath_helpers import SERIES, central_differences, configs, draw_batch, jittered, reference, rel_err


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

    ws, h, flips = {}, 1e-6, 0

    def loss():
        nonlocal flips
        logits, c = nm.forward(params, ids, ws=ws)
        flips += np.count_nonzero((c["pre"] > 0.0) != relu_on)
        return nm.loss_and_dlogits(logits, targets, ws, out=logits)[0]

    numeric = central_differences(params, loss, h)
    worst = max(float(np.max(np.abs(numeric[name] - grads[name]))) for name in params)
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


# ----------------------------------------------------------------------------------------------------------------
# Position schemes: learned, none, sinusoidal, rope

MID = (96, 8, 16, 16, 5)  # vocab, d, hidden, max_len, seed: 2,344 parameters, small enough for every one by FD


@pytest.mark.parametrize("scheme, T", [("learned", 16), ("none", 40), ("sinusoidal", 40), ("rope", 40)])
def test_each_scheme_passes_central_differences(scheme, T):
    """Every parameter, float64, step 1e-6: max |central difference - backward| < 1e-8, as for the series size
    above. The schemes without learned rows run past max_len = 16 (T = 40); their pos_emb gradient is exactly 0
    and so is every central difference of it (the loss does not read pos_emb at all)."""
    params = nm.from_lists(jittered(*MID, scale=0.1))
    rng = np.random.default_rng(3)
    ids, targets = rng.integers(0, 96, (2, T)), rng.integers(0, 96, (2, T))
    logits, cache = nm.forward(params, ids, scheme)
    _, dlogits = nm.loss_and_dlogits(logits, targets)
    grads = {n: g.copy() for n, g in nm.backward(params, cache, dlogits).items()}
    relu_on = cache["pre"] > 0.0  # (B T, H)

    ws, h, flips = {}, 1e-6, 0

    def loss():
        nonlocal flips
        logits, c = nm.forward(params, ids, scheme, ws)
        flips += np.count_nonzero((c["pre"] > 0.0) != relu_on)
        return nm.loss_and_dlogits(logits, targets, ws, out=logits)[0]

    numeric = central_differences(params, loss, h)
    worst = {name: float(np.max(np.abs(numeric[name] - grads[name]))) for name in params}
    if scheme != "learned":
        assert not numeric["pos_emb"].any() and not grads["pos_emb"].any()
    assert flips == 0, "a step crossed a ReLU kink: pick another sequence"
    assert max(worst.values()) < 1e-8, worst


def test_sinusoid_table_is_the_standard_one():
    """PE[pos, 2i] = sin(pos / 10000^(2i/d)), PE[pos, 2i + 1] = cos(...), entry by entry, for even and odd d; and
    x0 of the sinusoidal scheme is the token rows plus exactly that table."""
    for d in (6, 7):
        table = nm.sinusoid_table(50, d)
        for pos in (0, 1, 49):
            for c in range(d):
                angle = pos / 10000 ** ((c - c % 2) / d)
                assert table[pos, c] == pytest.approx(math.sin(angle) if c % 2 == 0 else math.cos(angle), abs=1e-15)
    p = nm.init_params(*SERIES)
    ids = np.arange(100) % 96
    _, cache = nm.forward(p, ids, "sinusoidal")
    np.testing.assert_array_equal(cache["x0"], p["tok_emb"][ids] + nm.sinusoid_table(100, 16))


def test_rope_scores_depend_on_the_offset_only():
    """A sequence of one repeated token: with rope, log(w[i, i - m] / w[i, i]) = score(i, i - m) - score(i, i) is the
    same for every query i (the scores see only the offset m); with sinusoidal positions it is not (they are
    absolute), and without positions every key gets the same weight."""
    p = nm.from_lists(jittered(*SERIES, scale=0.2))
    ids = np.full(80, 7)
    logs = {}
    for scheme in ("rope", "sinusoidal", "none"):
        w = nm.forward(p, ids, scheme)[1]["att"]["weights"]  # (T, T)
        logs[scheme] = np.array([[math.log(w[i, i - m] / w[i, i]) for i in range(10, 80)] for m in (1, 5, 9)])
    assert np.ptp(logs["rope"], axis=1).max() <= 1e-12
    assert np.ptp(logs["sinusoidal"], axis=1).min() > 1e-3
    assert np.abs(logs["none"]).max() <= 1e-12


def test_rope_keeps_lengths_and_its_backward_is_the_inverse_rotation():
    """The rotation keeps each pair's length; the backward formula applied to the forward's output gives back
    the input (a rotation's inverse is its transpose)."""
    cos, sin = nm.rope_tables(70, 16)  # (T, d) each
    x = np.random.default_rng(0).normal(size=(70, 16))  # (T, d)
    J = nm._pair_turn({}, 16, np.float64)  # (d, d)
    y = x * cos + (x @ J) * sin  # (T, d)
    pair_len = lambda a: np.hypot(a[:, 0::2], a[:, 1::2])  # noqa: E731
    np.testing.assert_allclose(pair_len(y), pair_len(x), rtol=1e-14)
    np.testing.assert_allclose(y * cos - (y * sin) @ J, x, atol=1e-14)
    with pytest.raises(ValueError, match="the width d must be even, got d = 7"):
        nm.rope_tables(4, 7)
    p7 = nm.init_params(96, 7, 8, 8, 3)
    with pytest.raises(ValueError, match="d must be even"):
        nm.forward(p7, np.array([1, 2]), "rope")


@pytest.mark.parametrize("scheme", ["sinusoidal", "rope"])
def test_word_order_reaches_the_last_position_with_fixed_schemes(scheme):
    """As for learned positions above: two orderings of the same tokens give different last logits with the two
    schemes that have no parameters (and the same within 1e-12 with none)."""
    p = nm.from_lists(jittered(*SERIES, scale=0.05))
    rng = np.random.default_rng(9)
    a = rng.integers(0, 96, 30)
    b = np.concatenate([rng.permutation(a[:-1]), a[-1:]])
    last = lambda ids, s: np.array(nm.forward(p, ids, s)[0][-1])  # noqa: E731
    assert np.max(np.abs(last(a, scheme) - last(b, scheme))) > 1e-6
    assert np.max(np.abs(last(a, "none") - last(b, "none"))) <= 1e-12


@pytest.mark.parametrize("scheme", ["none", "sinusoidal", "rope"])
def test_schemes_without_rows_read_up_to_their_maximum(scheme):
    """none, sinusoidal and rope read up to LONGEST = 1024 positions and reject more with the SPEC's message;
    learned stops at its 64 rows. Causality holds past 64 too."""
    p = nm.from_lists(jittered(*SERIES, scale=0.05))
    ids = np.random.default_rng(2).integers(0, 96, nm.LONGEST + 1)
    logits, _ = nm.forward(p, ids[:nm.LONGEST], scheme)
    assert logits.shape == (1024, 96) and np.isfinite(logits).all()
    with pytest.raises(ValueError, match=f"sequence of 1025 tokens is longer than the 1024 positions the model has"
                                         f" with positions='{scheme}'"):
        nm.forward(p, ids, scheme)
    with pytest.raises(ValueError, match="sequence of 65 tokens is longer than the 64 positions the model has$"):
        nm.forward(p, ids[:65], "learned")
    changed = ids[:128].copy()
    changed[100] = (changed[100] + 1) % 96
    before, after = np.array(nm.forward(p, ids[:128], scheme)[0]), np.array(nm.forward(p, changed, scheme)[0])
    assert np.max(np.abs(before[:100] - after[:100])) <= 1e-15 and np.abs(before[100] - after[100]).max() > 0


@pytest.mark.parametrize("scheme", ["none", "sinusoidal", "rope"])
def test_schemes_float32_and_workspace(scheme):
    """float32 within 1e-5 of float64; a workspace reused across lengths gives the numbers of fresh arrays; the
    pos_emb gradient is all zeros."""
    params = jittered(*SERIES, scale=0.05)
    rng = np.random.default_rng(11)
    ids, targets = rng.integers(0, 96, (4, 100)), rng.integers(0, 96, (4, 100))
    _, loss64, g64 = numpy_step(nm.from_lists(params), ids, targets, scheme)
    _, loss32, g32 = numpy_step(nm.from_lists(params, np.float32), ids, targets, scheme)
    assert abs(loss32 - loss64) <= 1e-5 * abs(loss64)
    for name in g64:
        assert rel_err(g32[name], g64[name]) <= 1e-5, name
    assert not g64["pos_emb"].any()
    p, ws = nm.from_lists(params), {}
    for T in (100, 30, 100):
        fresh = numpy_step(p, ids[:, :T], targets[:, :T], scheme)
        reused = numpy_step(p, ids[:, :T], targets[:, :T], scheme, ws=ws)
        np.testing.assert_array_equal(fresh[0], reused[0])
        for name in fresh[2]:
            np.testing.assert_array_equal(fresh[2][name], reused[2][name])


def test_the_scheme_argument():
    """Booleans and the reference's keyword keep working; a bad name or two contradicting arguments are errors."""
    ids = np.array([1, 2, 3])
    want = {s: np.array(nm.forward(P, ids, s)[0]) for s in ("learned", "none")}
    np.testing.assert_array_equal(nm.forward(P, ids, True)[0], want["learned"])
    np.testing.assert_array_equal(nm.forward(P, ids, False)[0], want["none"])
    np.testing.assert_array_equal(nm.forward(P, ids, use_positions=False)[0], want["none"])
    assert nm.sequence_loss(P, ids, ids, "rope") == nm.sequence_loss(P, ids, ids, positions="rope")
    with pytest.raises(ValueError, match=r"positions='rotary' is no position scheme; expected one of \['learned',"):
        nm.forward(P, ids, "rotary")
    with pytest.raises(ValueError, match="not both"):
        nm.forward(P, ids, "rope", use_positions=False)
