"""PyTorch autograd in float64 (torch_model.py) against the reference model.py and both NumPy paths (numpy_model.py and
numpy_fast.py, each test once for each): logits, loss and every gradient within 1e-11 relative (largest absolute
difference / largest absolute value of the reference tensor). The sinusoidal and rope position schemes, which the
reference does not have, are checked between the NumPy paths and the twin alone. Skipped only when torch is not
installed; CI installs torch==2.13.0 (tests/requirements-torch.txt)."""

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fastpath_helpers import (PATHS, SERIES, SERIES_CONFIG, assert_close, configs, draw_batch, jittered, numpy_run,
                              reference, rel_err)

from oneblock import config as model_config, numpy_model as nm
from oneblock.config import SCHEMES, ModelConfig, seed_switch

torch = pytest.importorskip("torch", reason="torch is not installed (pip install -r tests/requirements-torch.txt)")
tm = pytest.importorskip("oneblock.torch_model")  # (it imports torch: only once torch is known to be there)

ROOT = Path(__file__).resolve().parent.parent
TOL = 1e-11


def two_ways(path, params, ids, targets, config):
    """(logits, loss, grads) from a NumPy path (float64) and from PyTorch (float64) for the model of config."""
    fast = numpy_run(path, nm.from_lists(params), ids, targets, config)
    loss, grads, inter = tm.loss_and_grads(tm.to_torch(params), tm.as_ids(ids), tm.as_ids(targets), config)
    return fast, (inter["logits"].numpy(), loss, {n: g.numpy() for n, g in grads.items()})


def three_ways(path, params, ids, targets, config):
    """(logits, loss, grads) from the reference (told config's scheme by seed_switch), a NumPy path (float64) and
    PyTorch (float64)."""
    return (reference(params, ids, targets, seed_switch(config)), *two_ways(path, params, ids, targets, config))


@pytest.mark.parametrize("path", PATHS)
@settings(max_examples=40, deadline=None)
@given(cfg=configs, length=st.integers(1, 12))
def test_torch_float64_matches_reference_and_numpy(path, cfg, length):
    V, d, H, L = cfg["vocab"], cfg["d"], cfg["hidden"], cfg["max_len"]
    config = ModelConfig(V, d, H, L, positions="learned" if cfg["positions"] else "none")
    params = jittered(V, d, H, L, cfg["seed"], cfg["scale"])
    ids, targets = draw_batch(np.random.default_rng(cfg["seed"]), V, cfg["batch"], min(length, L))
    ref, fast, twin = three_ways(path, params, ids, targets, config)
    assert_close(twin, ref, TOL)
    assert_close(twin, fast, TOL)


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("batch, scheme", [(1, "learned"), (1, "none"), (4, "learned")])
def test_series_size(path, batch, scheme):
    params = jittered(*SERIES, scale=0.05)
    rng = np.random.default_rng(batch)
    ids, targets = rng.integers(0, 96, (batch, 64)), rng.integers(0, 96, (batch, 64))
    ref, fast, twin = three_ways(path, params, ids, targets, ModelConfig(*SERIES[:4], positions=scheme))
    assert_close(twin, ref, TOL)
    assert_close(twin, fast, TOL)


@pytest.mark.parametrize("path", PATHS)
def test_intermediates_match_numpy(path):
    """The twin's x0, h1, attention weights, x1, h2, ReLU output and x2 match the NumPy path's."""
    params = jittered(*SERIES, scale=0.05)
    ids = np.random.default_rng(0).integers(0, 96, (2, 40))
    _, cache = path.forward(nm.from_lists(params), ids, SERIES_CONFIG)
    _, inter = tm.forward(tm.to_torch(params), tm.as_ids(ids), SERIES_CONFIG)
    for name in ("x0", "h1", "x1", "h2", "act", "x2"):
        assert rel_err(inter[name].detach().numpy(), cache[name]) <= TOL, name
    assert rel_err(inter["weights"].detach().numpy(), cache["att"]["weights"]) <= TOL


# ----------------------------------------------------------------------------------------------------------------
# The position schemes without parameters, which the reference does not have: the NumPy paths against the twin


@pytest.mark.parametrize("path", PATHS)
@settings(max_examples=40, deadline=None)
@given(cfg=configs, length=st.integers(1, 24), scheme=st.sampled_from(["sinusoidal", "rope"]))
def test_torch_float64_matches_numpy_for_fixed_schemes(path, cfg, length, scheme):
    """Random model-like configs (d even for rope, which turns pairs of channels), lengths past max_len."""
    V, d, H, L = cfg["vocab"], cfg["d"], cfg["hidden"], cfg["max_len"]
    if scheme == "rope" and d % 2:
        d -= 1  # rope turns pairs of channels
    params = jittered(V, d, H, L, cfg["seed"], cfg["scale"])
    ids, targets = draw_batch(np.random.default_rng(cfg["seed"]), V, cfg["batch"], min(length, V))
    fast, twin = two_ways(path, params, ids, targets, ModelConfig(V, d, H, L, positions=scheme))
    assert_close(twin, fast, TOL)
    assert not fast[2]["pos_emb"].any() and not twin[2]["pos_emb"].any()


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("scheme", ["none", "sinusoidal", "rope"])
@pytest.mark.parametrize("batch, T", [(1, 64), (2, 128)])
def test_series_size_schemes(path, scheme, batch, T):
    """At series size, also at 128 positions, past the 64 learned rows."""
    params = jittered(*SERIES, scale=0.05)
    rng = np.random.default_rng(T + batch)
    ids, targets = rng.integers(0, 96, (batch, T)), rng.integers(0, 96, (batch, T))
    fast, twin = two_ways(path, params, ids, targets, ModelConfig(*SERIES[:4], positions=scheme))
    assert_close(twin, fast, TOL)


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("scheme", ["sinusoidal", "rope"])
def test_intermediates_match_numpy_for_fixed_schemes(path, scheme):
    params = jittered(*SERIES, scale=0.05)
    ids = np.random.default_rng(0).integers(0, 96, (2, 90))
    config = ModelConfig(*SERIES[:4], positions=scheme)
    _, cache = path.forward(nm.from_lists(params), ids, config)
    _, inter = tm.forward(tm.to_torch(params), tm.as_ids(ids), config)
    for name in ("x0", "h1", "x1", "h2", "act", "x2"):
        assert rel_err(inter[name].detach().numpy(), cache[name]) <= TOL, name
    assert rel_err(inter["weights"].detach().numpy(), cache["att"]["weights"]) <= TOL


def test_the_twin_is_independent_of_the_numpy_path():
    """torch_model.py reads the scheme from the config alone: importing it loads no NumPy-path module, its schemes
    are config.py's one list, and a config whose scheme is none of them is refused, never run as "none"."""
    code = ("import sys\nfrom oneblock import torch_model\n"
            "print(sorted(m for m in sys.modules if m.startswith(('numpy_', 'oneblock.numpy_'))))")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert run.returncode == 0 and run.stdout.strip() == "[]", run.stdout + run.stderr
    assert tm.SCHEMES is model_config.SCHEMES
    params, ids = tm.to_torch(jittered(12, 4, 8, 8, 3, scale=0.05)), tm.as_ids([[1, 2, 3]])
    for scheme in SCHEMES:
        logits, _ = tm.forward(params, ids, ModelConfig(12, 4, 8, 8, positions=scheme))
        assert tuple(logits.shape) == (1, 3, 12)
    with pytest.raises(ValueError, match="unknown position scheme 'rotary'"):
        tm.forward(params, ids, ModelConfig(12, 4, 8, 8, positions="rotary"))


def test_the_config_not_the_parameter_names_says_the_blocks():
    """Weights of two blocks with a config of one (or the other way round) are refused, naming the first tensor
    that does not fit, before any work; a config of two blocks runs both."""
    two = tm.to_torch(jittered(12, 4, 8, 8, 3, scale=0.05, blocks=2))
    ids = tm.as_ids([[1, 2, 3]])
    with pytest.raises(ValueError, match="unknown tensors"):
        tm.loss_and_grads(two, ids, ids, ModelConfig(12, 4, 8, 8))
    with pytest.raises(ValueError, match=r"missing tensors: \['block1\.ln1_g'"):
        tm.loss_and_grads(tm.to_torch(jittered(12, 4, 8, 8, 3, scale=0.05)), ids, ids, ModelConfig(12, 4, 8, 8, 2))
    _, grads, inter = tm.loss_and_grads(two, ids, ids, ModelConfig(12, 4, 8, 8, blocks=2))
    assert "block1.x2" in inter and all(g.abs().max() > 0 for g in grads.values())


# ----------------------------------------------------------------------------------------------------------------
# Grown models: both NumPy paths against the twin, every intermediate compare.py prints and every gradient


@st.composite
def grown_configs(draw):
    """A model-like config of 1 to 3 blocks whose heads divide d (and leave an even head width for rope), a scheme,
    and a batch."""
    cfg = draw(configs)
    scheme = draw(st.sampled_from(SCHEMES))
    d = cfg["d"] - cfg["d"] % 2 if scheme == "rope" else cfg["d"]
    heads = draw(st.sampled_from([h for h in range(1, d + 1) if d % h == 0 and (scheme != "rope" or d // h % 2 == 0)]))
    return {**cfg, "d": d, "blocks": draw(st.integers(1, 3)), "heads": heads, "scheme": scheme}


@pytest.mark.parametrize("path", PATHS)
@settings(max_examples=40, deadline=None)
@given(cfg=grown_configs(), length=st.integers(1, 16))
def test_grown_numpy_paths_match_the_twin_in_every_intermediate_and_gradient(path, cfg, length):
    from dev import compare

    V, d, H, L = cfg["vocab"], cfg["d"], cfg["hidden"], cfg["max_len"]
    T = min(length, L) if cfg["scheme"] == "learned" else length
    params = jittered(V, d, H, L, cfg["seed"], cfg["scale"], cfg["blocks"])
    ids, targets = draw_batch(np.random.default_rng(cfg["seed"]), V, cfg["batch"], min(T, V))
    config = ModelConfig(V, d, H, L, cfg["blocks"], cfg["heads"], cfg["scheme"])
    twin = compare.torch_run(params, ids, targets, config)
    rows = compare.compare(twin, compare.numpy_run(params, ids, targets, config, path), TOL)
    assert len(rows) == 2 + 6 * cfg["blocks"] + 1 + len(params)  # x0, each block's six, logits, loss, gradients
    assert [name for name, *_ in rows][-len(params):] == ["grad " + name for name in params]
    bad = [(name, rel) for name, _, _, rel, ok in rows if not ok]
    assert not bad, bad


@pytest.mark.parametrize("path", PATHS)
def test_grown_series_size_worst_relative_error(path, capsys):
    """2 blocks x 4 heads at series width, B 4, T 64, every scheme: every row within 1e-11; prints the worst."""
    from dev import compare

    worst = {}
    for scheme in SCHEMES:
        params = jittered(*SERIES[:4], 5, scale=0.05, blocks=2)
        config = ModelConfig(*SERIES[:4], blocks=2, heads=4, positions=scheme)
        rng = np.random.default_rng(5)
        ids, targets = rng.integers(0, 96, (4, 64)), rng.integers(0, 96, (4, 64))
        rows = compare.compare(compare.torch_run(params, ids, targets, config),
                               compare.numpy_run(params, ids, targets, config, path), TOL)
        assert all(ok for *_, ok in rows), [r for r in rows if not r[-1]]
        worst[scheme] = max(rows, key=lambda r: r[3])
    with capsys.disabled():
        for scheme, (name, _, _, rel, _) in worst.items():
            print(f"\n{path.__name__} vs twin, 2 blocks x 4 heads, {scheme}: worst {rel:.2e} relative ({name})", end="")


def test_the_twin_with_one_head_has_no_heads_axis_and_the_other_blocks_are_named_like_their_parameters():
    params = tm.to_torch(jittered(96, 8, 8, 8, 3, scale=0.05, blocks=2))
    _, inter = tm.forward(params, tm.as_ids([[1, 2, 3]]), ModelConfig(96, 8, 8, 8, blocks=2))
    assert tuple(inter["weights"].shape) == (1, 3, 3) and tuple(inter["block1.weights"].shape) == (1, 3, 3)
    assert list(inter) == ["x0", "h1", "weights", "x1", "h2", "act", "x2", *(f"block1.{n}" for n in
                           ("h1", "weights", "x1", "h2", "act", "x2")), "logits"]
    _, inter = tm.forward(params, tm.as_ids([[1, 2, 3]]), ModelConfig(96, 8, 8, 8, blocks=2, heads=4))
    assert tuple(inter["block1.weights"].shape) == (1, 4, 3, 3)
