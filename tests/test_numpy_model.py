"""What only the plain mirror numpy_model.py has: conversion to and from the reference's lists, the position tables
and the rotary turn as functions of their own, the loss's own checks, and new arrays from every call. The checks
against the reference, shared with numpy_fast.py, are in test_numpy_paths.py."""

import math

import numpy as np
import pytest

import model
from oneblock import numpy_model as nm
from fastpath_helpers import SERIES, SERIES_CONFIG, config_for, jittered


def test_init_and_conversion_round_trip():
    ref = model.init_params(*SERIES)
    p = nm.init_params(SERIES_CONFIG, 3)
    assert list(p) == list(ref)
    assert nm.to_lists(p) == ref  # float64 holds the reference's floats exactly
    assert all(t.dtype == np.float32 for t in nm.from_lists(ref, np.float32).values())
    with pytest.raises(ValueError, match="float32 or float64"):
        nm.from_lists(ref, np.float16)


def test_sinusoid_table_is_the_standard_one():
    """PE[pos, 2i] = sin(pos / 10000^(2i/d)), PE[pos, 2i + 1] = cos(...), entry by entry, for even and odd d."""
    for d in (6, 7):
        table = nm.sinusoid_table(50, d)
        for pos in (0, 1, 49):
            for c in range(d):
                angle = pos / 10000 ** ((c - c % 2) / d)
                assert table[pos, c] == pytest.approx(math.sin(angle) if c % 2 == 0 else math.cos(angle), abs=1e-15)


def test_rope_keeps_lengths_and_its_backward_is_the_inverse_turn():
    """Each pair (2i, 2i + 1) turned by pos / 10000^(2i/d): entry by entry, lengths kept, and the backward formula
    applied to the forward's output gives back the input (a rotation's inverse is its transpose)."""
    cos, sin = nm.rope_tables(70, 16)  # (T, d) each
    x = np.random.default_rng(0).normal(size=(2, 70, 16))  # (B, T, d)
    y = nm.rope_forward(x, cos, sin)  # (B, T, d)
    for pos, i in [(0, 0), (1, 0), (69, 3), (69, 7)]:
        angle = pos / 10000 ** (2 * i / 16)
        a, b = x[1, pos, 2 * i], x[1, pos, 2 * i + 1]
        assert y[1, pos, 2 * i] == pytest.approx(a * math.cos(angle) - b * math.sin(angle), abs=1e-14)
        assert y[1, pos, 2 * i + 1] == pytest.approx(a * math.sin(angle) + b * math.cos(angle), abs=1e-14)
    pair_len = lambda a: np.hypot(a[..., 0::2], a[..., 1::2])  # noqa: E731
    np.testing.assert_allclose(pair_len(y), pair_len(x), rtol=1e-14)
    np.testing.assert_allclose(nm.rope_backward(y, cos, sin), x, atol=1e-14)


def test_loss_checks_its_inputs():
    with pytest.raises(ValueError, match=r"logits should be an array of shape \(T, V\) or \(B, T, V\), got \(3,\)"):
        nm.loss_and_dlogits(np.zeros(3), np.array([1, 2, 0]))
    with pytest.raises(ValueError, match="logits should be float32 or float64, got int64"):
        nm.loss_and_dlogits(np.zeros((1, 3), dtype=np.int64), np.array([1]))
    logits, cache = nm.forward(nm.init_params(SERIES_CONFIG, 3), np.array([1, 2, 3]), SERIES_CONFIG)
    with pytest.raises(ValueError, match=r"dlogits of shape \(3, 95\) do not match the 3 positions and 96 tokens"):
        nm.backward(nm.init_params(SERIES_CONFIG, 3), cache, np.zeros((3, 95)))


def test_no_call_changes_what_an_earlier_call_returned():
    """Every array the mirror returns is new: a later call, on other IDs and with other parameters, leaves the
    earlier logits, cache and gradients as they were, and no gradient shares memory with a parameter."""
    p = nm.from_lists(jittered(*SERIES, scale=0.05))
    rng = np.random.default_rng(3)
    ids, targets = rng.integers(0, 96, (2, 20)), rng.integers(0, 96, (2, 20))
    logits, cache = nm.forward(p, ids, SERIES_CONFIG)
    loss, grads = nm.loss_and_grads(p, ids, targets, SERIES_CONFIG)
    kept = [np.array(a) for a in (logits, cache["x1"], cache["att"]["weights"], *grads.values())]
    q = {name: t * 1.5 for name, t in p.items()}
    nm.forward(q, ids[:, ::-1], SERIES_CONFIG)
    nm.loss_and_grads(q, targets, ids, config_for(*SERIES, positions="rope"))
    for before, now in zip(kept, (logits, cache["x1"], cache["att"]["weights"], *grads.values())):
        np.testing.assert_array_equal(before, now)
    assert not any(np.shares_memory(g, t) for g in grads.values() for t in p.values())
