"""A grown model (several blocks, several heads) in both NumPy paths, numpy_model.py and numpy_fast.py (the tests
that take `path` run once for each). Causality, one block's word order and float32: test_numpy_paths.py, for grown
models too; the twin: test_torch_model.py; the one-block, one-head bits: test_one_block_fixture.py."""

import math

import numpy as np
import pytest

import model
from oneblock import numpy_model as nm
from oneblock.config import BLOCK_NAMES
from fastpath_helpers import PATHS, assert_central_differences_match, config_for, jittered, rel_err

GROWN = (20, 8, 8, 12, 7)  # vocab, d, hidden, max_len, seed: small enough for every parameter by central differences


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("blocks, heads", [(1, 1), (2, 2), (3, 4)])
@pytest.mark.parametrize("scheme, T", [("learned", 12), ("none", 16), ("sinusoidal", 16), ("rope", 16)])
def test_every_gradient_of_a_grown_model_matches_central_differences(path, blocks, heads, scheme, T, capsys):
    """The schemes without learned rows run past max_len = 12; their pos_emb gradient is exactly 0 and so is every
    central difference of it (the loss does not read pos_emb at all). Prints the worst error, for docs/growing.md."""
    params = nm.from_lists(jittered(*GROWN, scale=0.1, blocks=blocks))
    assert sum(t.size for t in params.values()) == {1: 884, 2: 1316, 3: 1748}[blocks]
    rng = np.random.default_rng(blocks * 10 + heads)
    ids, targets = rng.integers(0, 20, (2, T)), rng.integers(0, 20, (2, T))
    config = config_for(*GROWN, blocks=blocks, heads=heads, positions=scheme)
    numeric, grads, worst = assert_central_differences_match(path, params, ids, targets, config)
    assert list(grads) == config.param_names()
    for name in grads:  # every block's tensors learn: no gradient is all zero but pos_emb's where it is unread
        assert grads[name].any() == (name != "pos_emb" or scheme == "learned"), name
    assert numeric["pos_emb"].any() == (scheme == "learned")
    with capsys.disabled():
        print(f"\ncentral differences, {path.__name__}, {blocks} x {heads}, {scheme}: worst {max(worst.values()):.2e}",
              end="")


def one_head_at_a_time(params, x, heads, rope):
    """Multi-head attention written out head by head: head h is one-head attention of width dh = d / heads on columns
    h dh .. (h + 1) dh - 1 of Wq, Wk and Wv (its q and k turned by rope of width dh), scaled by 1 / sqrt(dh); its
    output goes through the same rows of Wo, and the heads' outputs add up. x (T, d) -> (T, d)."""
    T, d = x.shape
    dh = d // heads
    out = np.zeros((T, d))
    for h in range(heads):
        cols = slice(h * dh, (h + 1) * dh)
        q, k, v = (x @ params[name][:, cols] for name in ("Wq", "Wk", "Wv"))  # (T, dh) each
        if rope:
            cos, sin = nm.rope_tables(T, dh)
            q, k = nm.rope_forward(q, cos, sin), nm.rope_forward(k, cos, sin)
        scores = q @ k.T / math.sqrt(dh)  # (T, T)
        scores[np.triu_indices(T, 1)] = -np.inf
        w = np.exp(scores - scores.max(1, keepdims=True))
        w /= w.sum(1, keepdims=True)
        out += w @ v @ params["Wo"][cols]  # (T, d)
    return out


@pytest.mark.parametrize("heads", [1, 2, 4, 8])
@pytest.mark.parametrize("rope", [False, True])
def test_heads_are_independent_attentions_on_slices_of_the_channels(heads, rope):
    params = nm.from_lists(jittered(96, 16, 8, 8, 3, scale=0.3))
    x = np.random.default_rng(heads).normal(size=(2, 20, 16))  # (B, T, d)
    config = config_for(96, 16, 8, 8, heads=heads, positions="rope" if rope else "learned")
    out, cache = nm.attention_forward(params, x, config)
    assert cache["weights"].shape == ((2, 20, 20) if heads == 1 else (2, heads, 20, 20))
    for b in range(2):
        assert rel_err(out[b], one_head_at_a_time(params, x[b], heads, rope)) <= 1e-13


# ----------------------------------------------------------------------------------------------------------------
# Word order through two blocks


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("blocks, heads", [(2, 1), (2, 4), (3, 2)])
def test_two_blocks_without_positions_tell_the_orders_apart_through_the_causal_mask(path, blocks, heads):
    """The permutation fact is one block's (test_numpy_paths.py, for any number of heads). The first block's output
    at the last position is the same for both orders (it reads a set), but at every earlier position it is a function
    of that position's prefix, which the order changes: the second block reads those, so the last logits differ
    although no position is added. (Models without positions learn where they are from the causal mask.)"""
    p = nm.from_lists(jittered(96, 16, 64, 64, 9, scale=0.05, blocks=blocks))
    rng = np.random.default_rng(9)
    a = rng.integers(0, 96, 30)
    b = np.concatenate([rng.permutation(a[:-1]), a[-1:]])  # same tokens, same last token, another order
    config = config_for(96, 16, 64, 64, blocks=blocks, heads=heads, positions="none")
    (logits_a, cache_a), (logits_b, cache_b) = (path.forward(p, ids, config) for ids in (a, b))
    first_a, first_b = cache_a["blocks"][0]["x2"], cache_b["blocks"][0]["x2"]  # (T, d) each
    assert np.max(np.abs(first_a[-1] - first_b[-1])) <= 1e-12
    assert np.max(np.abs(first_a[1:-1] - first_b[1:-1])) > 1e-3  # the prefixes differ: so do these
    assert np.max(np.abs(logits_a[-1] - logits_b[-1])) > 1e-4


# ----------------------------------------------------------------------------------------------------------------
# Names, the cache, and what is refused


def test_names_and_initial_values_of_a_grown_model():
    """Block 0 keeps model.py's names and its random draws; block k >= 1 repeats them after "block{k}."; the
    first block's weights are drawn before the second's, so they are the one-block model's too."""
    one, grown = model.init_params(96, 16, 64, 64, 3), config_for(96, 16, 64, 64, blocks=3).init_params(3)
    assert list(grown) == ["tok_emb", "pos_emb", *BLOCK_NAMES, *("block1." + n for n in BLOCK_NAMES),
                           *("block2." + n for n in BLOCK_NAMES), "lnf_g", "lnf_b", "W_out", "b_out"]
    assert all(grown[name] == one[name] for name in ("tok_emb", "pos_emb", *BLOCK_NAMES))
    assert grown["block1.Wq"] != grown["Wq"] and grown["block2.ln1_g"] == [1.0] * 16
    assert model.count_params(grown) == 7440 + 2 * 3216
    one_block = config_for(96, 16, 64, 64)
    assert one_block.init_params(3) == one == nm.to_lists(nm.init_params(one_block, 3))
    assert nm.to_lists(nm.init_params(config_for(96, 16, 64, 64, blocks=3), 3)) == grown


@pytest.mark.parametrize("path", PATHS)
def test_the_cache_has_every_block_and_the_first_under_model_pys_names(path):
    config = config_for(96, 16, 64, 64, blocks=2, heads=2)
    p = nm.init_params(config, 3)
    logits, cache = path.forward(p, np.array([[1, 2, 3]]), config)
    assert len(cache["blocks"]) == 2 and cache["x1"] is cache["blocks"][0]["x1"] and cache["config"] == config
    assert cache["blocks"][1]["att"]["weights"].shape == (1, 2, 3, 3)
    before_final = cache["blocks"][1]["x2"]
    hf = nm.layernorm_forward(before_final, p["lnf_g"], p["lnf_b"])[0]
    want = hf @ p["W_out"] + p["b_out"]  # numpy_model's own line; numpy_fast forms it as [hf | 1] [W_out; b_out]
    np.testing.assert_allclose(logits, want, rtol=0, atol=0 if path is nm else 1e-14)


@pytest.mark.parametrize("heads, scheme, message", [
    (3, "learned", "heads = 3 does not divide the width d = 16; expected one of 1, 2, 4, 8, 16"),
    (0, "learned", "heads = 0: expected a whole number of at least 1"),
    (2.0, "learned", r"heads = 2.0: expected a whole number of at least 1"),
    (16, "rope", "heads = 16 gives heads of width d / heads = 1, but rope turns pairs of channels in each head"),
])
@pytest.mark.parametrize("path", PATHS)
def test_bad_heads_are_rejected_naming_the_value(path, heads, scheme, message):
    p = nm.init_params(config_for(96, 16, 64, 64, blocks=2), 3)
    config = config_for(96, 16, 64, 64, blocks=2, heads=heads, positions=scheme)
    with pytest.raises(ValueError, match=message):
        path.forward(p, np.array([1, 2]), config)
    with pytest.raises(ValueError, match=message):
        path.loss_and_grads(p, np.array([1, 2]), np.array([2, 3]), config)


@pytest.mark.parametrize("change, message", [
    (lambda p: p.pop("block1.Wq"), r"parameter dict is missing tensors: \['block1.Wq'\]"),
    (lambda p: p.update({"block3.b2": np.zeros(16)}), r"unknown tensors: \['block3.b2'\]"),
    (lambda p: [p.pop(name) for name in list(p) if name.startswith("block1.")], r"missing tensors: \['block1.ln1_g',"),
    (lambda p: p.update({"block0.Wq": np.zeros((16, 16))}), r"unknown tensors: \['block0.Wq'\]"),
    (lambda p: p.update({"block1.W1": np.zeros((16, 63))}), r"parameter block1.W1 has shape \(16, 63\), expected"),
])
@pytest.mark.parametrize("path", PATHS)
def test_a_bad_grown_parameter_dict_names_the_tensor(path, change, message):
    config = config_for(96, 16, 64, 64, blocks=2)
    p = nm.init_params(config, 3)
    change(p)
    with pytest.raises(ValueError, match=message):
        path.forward(p, np.array([1, 2]), config)


def test_the_backward_pass_refuses_a_cache_of_other_blocks():
    one, two = config_for(96, 16, 64, 64), config_for(96, 16, 64, 64, blocks=2)
    logits, cache = nm.forward(nm.init_params(one, 3), np.array([1, 2]), one)
    with pytest.raises(ValueError, match=r"the parameters are not those of the cache's forward pass, of 1 block x 1"
                                         r" head, width 16, learned positions: parameter dict has unknown tensors"):
        nm.backward(nm.init_params(two, 3), cache, np.zeros_like(logits))
