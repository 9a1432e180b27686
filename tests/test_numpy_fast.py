"""What only the tuned path numpy_fast.py has: a Workspace that owns every array of a step. Reusing one gives the
numbers of a fresh one, bit for bit; what it returns lives in it until its next call; a step maps no fresh memory;
and it refuses inputs of another shape than it was made for. The checks against the reference, shared with
numpy_model.py, are in test_numpy_paths.py."""

import sys

import numpy as np
import pytest

from oneblock import numpy_fast as nf
from oneblock import numpy_model as nm
from oneblock.config import SCHEMES
from fastpath_helpers import SERIES, SERIES_CONFIG, config_for, jittered

P = nm.from_lists(jittered(*SERIES, scale=0.05))


def batch(seed, shape, vocab=96):
    rng = np.random.default_rng(seed)
    return rng.integers(0, vocab, shape), rng.integers(0, vocab, shape)


GROWN = nm.from_lists(jittered(*SERIES, scale=0.05, blocks=2))  # with 4 heads below


@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("params, blocks, heads", [(P, 1, 1), (GROWN, 2, 4)], ids=["one-block", "2x4"])
def test_a_reused_workspace_gives_the_numbers_of_a_fresh_one(scheme, params, blocks, heads):
    """The same workspace over several batches (and the fresh one of each one-off call): bit-identical losses,
    gradients and intermediates, of every block."""
    config = config_for(*SERIES, blocks=blocks, heads=heads, positions=scheme)
    ws = nf.Workspace(params, config, 4, 50)
    for seed in range(3):
        ids, targets = batch(seed, (4, 50))
        logits, cache = ws.forward(params, ids)
        want_logits, want_cache = nf.forward(params, ids, config)
        np.testing.assert_array_equal(logits, want_logits)
        np.testing.assert_array_equal(cache["x0"], want_cache["x0"])
        np.testing.assert_array_equal(cache["hf"], want_cache["hf"])
        for block, want_block in zip(cache["blocks"], want_cache["blocks"], strict=True):
            for name in ("h1", "x1", "h2", "pre", "act", "x2"):
                np.testing.assert_array_equal(block[name], want_block[name], err_msg=name)
            np.testing.assert_array_equal(block["att"]["weights"], want_block["att"]["weights"])
        loss, grads = ws.loss_and_grads(params, ids, targets)
        want_loss, want_grads = nf.loss_and_grads(params, ids, targets, config)
        assert loss == want_loss == nf.sequence_loss(params, ids, targets, config)
        for name in want_grads:
            np.testing.assert_array_equal(grads[name], want_grads[name], err_msg=name)


def test_results_live_in_the_workspace_until_its_next_call():
    """The gradients a workspace returns are its own arrays, the same ones on every call: the next call overwrites
    them. The one-off functions make a fresh workspace each, so their results stay."""
    ws = nf.Workspace(P, SERIES_CONFIG, 2, 10)
    ids, targets = batch(1, (2, 10))
    _, first = ws.loss_and_grads(P, ids, targets)
    kept = {name: g.copy() for name, g in first.items()}
    _, second = ws.loss_and_grads(P, targets, ids)
    assert all(second[name] is first[name] for name in first)
    assert all(g.base is None or g.base is ws.dw_out_b_out for g in first.values())  # owned by ws
    assert not np.array_equal(first["Wq"], kept["Wq"])  # overwritten by the second call
    _, one_off = nf.loss_and_grads(P, ids, targets, SERIES_CONFIG)
    nf.loss_and_grads(P, targets, ids, SERIES_CONFIG)
    for name in kept:
        np.testing.assert_array_equal(one_off[name], kept[name], err_msg=name)


def test_the_loss_writes_its_gradient_over_the_logits():
    """dlogits share the logits' memory; loss and dlogits equal the mirror's (computed on a copy of the logits);
    logits from outside the workspace are copied in first (their loss: test_logits_layout_and_the_loss_in_blocks)."""
    ws = nf.Workspace(P, SERIES_CONFIG, 3, 20)
    ids, targets = batch(2, (3, 20))
    logits, _ = ws.forward(P, ids)
    want_loss, want_d = nm.loss_and_dlogits(np.array(logits), targets)
    loss, dlogits = ws.loss_and_dlogits(logits, targets)
    assert np.shares_memory(dlogits, logits) and dlogits is ws.logits
    assert abs(loss - want_loss) <= 1e-12 * want_loss and np.max(np.abs(dlogits - want_d)) <= 1e-17
    outside = np.random.default_rng(0).normal(size=(3, 20, 96))
    _, dlogits = ws.loss_and_dlogits(outside, targets)
    assert not np.shares_memory(dlogits, outside)


@pytest.mark.parametrize("vocab, dtype, tol", [(96, np.float64, 1e-12), (600, np.float64, 1e-12),
                                               (4096, np.float32, 1e-6)])
def test_logits_layout_and_the_loss_in_blocks(vocab, dtype, tol):
    """Below VOCAB_MAJOR_BELOW the logits are stored vocabulary-major, else row-major, and then the loss goes
    through them in blocks of LOSS_BLOCK_BYTES (2 blocks of 3 x 64 positions at V 600 in float64, 6 at V 4096 in
    float32); either way the logits handed out are (B, T, V), and loss and dlogits are the mirror's."""
    config = config_for(vocab, 8, 12, 64)
    ws = nf.Workspace(nm.init_params(config, 3, dtype), config, 3, 64)
    assert ws.vocab_major == (vocab < 512) and ws.logits.shape == (3, 64, vocab)
    assert ws.logits_memory.shape == ((vocab, 192) if vocab < 512 else (192, vocab))
    rng = np.random.default_rng(vocab)
    logits, targets = rng.normal(0.0, 3.0, (3, 64, vocab)).astype(dtype), rng.integers(0, vocab, (3, 64))
    want_loss, want_d = nm.loss_and_dlogits(logits, targets)
    loss, dlogits = ws.loss_and_dlogits(logits, targets)
    assert abs(loss - want_loss) <= tol * want_loss and np.max(np.abs(dlogits - want_d)) <= tol / 192


def test_the_tricks_compute_the_plain_lines():
    """A few tricks against the plain line they replace, exactly where the arithmetic is the same."""
    x = np.random.default_rng(0).normal(size=(70, 16))  # (T, d)
    y = np.zeros((2048, 16))
    nf.add_bias(y, x[0], nf.joined(2048, 16), np.empty(nf.joined(2048, 16)[1]))
    np.testing.assert_array_equal(y, np.zeros((2048, 16)) + x[0])
    ids = np.random.default_rng(1).integers(0, 96, 2048)  # long enough for the sort-and-add route
    want = np.zeros((96, 16))
    np.add.at(want, ids, np.ones((2048, 16)))
    ws = nf.Workspace(P, SERIES_CONFIG, 32, 64)
    np.testing.assert_array_equal(nf.token_rows_sum(ids, np.ones((2048, 16)), np.empty((96, 16)), ws), want)


@pytest.mark.skipif(sys.platform == "win32", reason="counts page faults with the resource module")
@pytest.mark.parametrize("scheme, dtype, blocks, heads", [("learned", np.float32, 1, 1), ("rope", np.float64, 1, 1),
                                                          ("learned", np.float32, 2, 4), ("rope", np.float32, 3, 2)])
def test_a_step_maps_no_fresh_memory(scheme, dtype, blocks, heads):
    """After two warm-up steps, 20 steps at series size with B = 32 take (almost) no minor page faults: every array
    of the size that the allocator maps afresh on each request lives in the workspace. (The plain mirror takes
    about 2,000 a step here.)"""
    import resource

    p = nm.from_lists(jittered(*SERIES, scale=0.05, blocks=blocks), dtype)
    ids, targets = batch(3, (32, 64))
    ws = nf.Workspace(p, config_for(*SERIES, blocks=blocks, heads=heads, positions=scheme), 32, 64)
    ws.loss_and_grads(p, ids, targets)
    ws.loss_and_grads(p, ids, targets)
    who = getattr(resource, "RUSAGE_THREAD", resource.RUSAGE_SELF)  # (this thread's faults: not those of a thread
    before = resource.getrusage(who).ru_minflt  # another test of this process left running, where Linux can tell)
    for _ in range(20):
        ws.loss_and_grads(p, ids, targets)
    assert resource.getrusage(who).ru_minflt - before <= 20


def test_a_workspace_refuses_other_shapes():
    """Each call, against the workspace's own shapes and dtype. (What a new one refuses is numpy_model's checks, which
    the one-off functions reach through it: tests/test_numpy_paths.py's and tests/test_grown.py's, for both paths.)"""
    ws = nf.Workspace(P, SERIES_CONFIG, 2, 5)
    ids, targets = batch(4, (2, 5))
    with pytest.raises(ValueError, match=r"this workspace is for IDs of shape \(2, 5\), got \(3, 5\)"):
        ws.forward(P, np.zeros((3, 5), dtype=int))
    with pytest.raises(ValueError, match=r"this workspace is for logits of shape \(2, 5, 96\), got \(1, 5, 96\)"):
        ws.loss_and_dlogits(np.zeros((1, 5, 96)), targets[:1])
    with pytest.raises(ValueError, match="this workspace was made for NumPy arrays in float64, but parameter tok_emb"
                                         " is a ndarray in float32"):
        ws.loss_and_grads(nm.from_lists(jittered(*SERIES, scale=0.05), np.float32), ids, targets)
    with pytest.raises(ValueError, match=r"parameter dict has unknown tensors: \['block1.ln1_g', 'block1.ln1_b'"):
        ws.forward(GROWN, ids)  # the parameters of another config


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_loss_on_several_threads_gives_the_bits_of_one(monkeypatch, dtype):
    """Large row-major logits go through the loss's blocks on two or three threads: the same blocks, the same bits
    of the loss and of every gradient as one thread (here with a vocabulary of 600 and small blocks, so that the split
    happens at a small size)."""
    config = config_for(600, 8, 16, 16)
    params = nm.init_params(config, 3, dtype)
    ids, targets = batch(4, (3, 16), vocab=600)
    monkeypatch.setattr(nf, "LOSS_BLOCK_BYTES", 5 * 600 * np.dtype(dtype).itemsize)  # 5 rows a block: 10 blocks
    monkeypatch.setattr(nf, "LOSS_SPLIT_FROM", 1)
    one = nf.Workspace(params, config, 3, 16)
    assert one.pool is None and not one.vocab_major
    for threads in (2, 3):
        many = nf.Workspace(params, config, 3, 16, threads=threads)
        assert many.pool is not None
        for _ in range(2):  # and again, on the same threads
            loss, grads = one.loss_and_grads(params, ids, targets)
            loss2, grads2 = many.loss_and_grads(params, ids, targets)
            assert loss == loss2
            for name in grads:
                np.testing.assert_array_equal(grads[name], grads2[name], err_msg=name)
