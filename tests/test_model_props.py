"""Property tests of model.py over random small configs and random token sequences (pytest + hypothesis)."""

import random

from hypothesis import given, settings
from hypothesis import strategies as st

import model

STEP = 1e-6  # central-difference step, as in trace_block.py


@st.composite
def configs(draw):
    """A small random config, parameters with non-trivial gains and biases, and a sequence with its targets."""
    vocab = draw(st.integers(2, 12))
    d = draw(st.integers(2, 5))
    hidden = draw(st.integers(1, 6))
    max_len = draw(st.integers(1, 6))
    seed = draw(st.integers(0, 2**32 - 1))
    params = model.init_params(vocab, d, hidden, max_len, seed)
    rng = random.Random(seed)
    for name, tensor in params.items():  # gains away from 1 and biases away from 0, so every term of backward shows
        if not isinstance(tensor[0], list):
            params[name] = [v + rng.gauss(0.0, 0.5) for v in tensor]
    T = draw(st.integers(1, max_len))
    ids = draw(st.lists(st.integers(0, vocab - 1), min_size=T, max_size=T))
    targets = draw(st.lists(st.integers(0, vocab - 1), min_size=T, max_size=T))
    return params, ids, targets


@settings(max_examples=60, deadline=None)
@given(configs(), st.booleans())
def test_every_gradient_matches_central_differences(case, switch):
    """switch: model.py's own third argument, True for learned positions (config.seed_switch)."""
    params, ids, targets = case
    logits, cache = model.forward(params, ids, switch)
    _, dlogits = model.loss_and_dlogits(logits, targets)
    grads = model.backward(params, cache, dlogits)
    assert list(grads) == list(params)
    for name, tensor in params.items():
        rows = tensor if isinstance(tensor[0], list) else [tensor]
        grad_rows = grads[name] if isinstance(tensor[0], list) else [grads[name]]
        assert model.shape(grads[name]) == model.shape(tensor), name
        for i, (row, grad_row) in enumerate(zip(rows, grad_rows)):
            for j, saved in enumerate(row):
                row[j] = saved + STEP
                up = model.sequence_loss(params, ids, targets, switch)
                row[j] = saved - STEP
                down = model.sequence_loss(params, ids, targets, switch)
                row[j] = saved
                numeric = (up - down) / (2 * STEP)
                assert abs(numeric - grad_row[j]) < 1e-7, (name, i, j, numeric, grad_row[j])


@settings(max_examples=50, deadline=None)
@given(configs(), st.data())
def test_a_later_token_never_moves_an_earlier_logit(case, data):
    params, ids, _ = case
    vocab = len(params["tok_emb"])
    t = data.draw(st.integers(0, len(ids) - 1))
    changed = list(ids)
    changed[t] = (ids[t] + data.draw(st.integers(1, vocab - 1))) % vocab
    switch = data.draw(st.booleans())
    before, _ = model.forward(params, ids, switch)
    after, _ = model.forward(params, changed, switch)
    assert after[:t] == before[:t]  # bit-identical


@settings(max_examples=50, deadline=None)
@given(configs(), st.randoms(use_true_random=False))
def test_without_positions_the_last_logits_ignore_the_order_before_them(case, rnd):
    params, ids, _ = case
    shuffled = ids[:-1]
    rnd.shuffle(shuffled)
    shuffled.append(ids[-1])
    before, _ = model.forward(params, ids, False)
    after, _ = model.forward(params, shuffled, False)
    assert after[-1] == before[-1]  # bit-identical
