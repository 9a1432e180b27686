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

from fastpath_helpers import PATHS, SERIES, assert_close, configs, draw_batch, jittered, numpy_run, reference, rel_err

from oneblock import numpy_model as nm

torch = pytest.importorskip("torch", reason="torch is not installed (pip install -r tests/requirements-torch.txt)")
tm = pytest.importorskip("oneblock.torch_model")  # (it imports torch: only once torch is known to be there)

ROOT = Path(__file__).resolve().parent.parent
TOL = 1e-11


def two_ways(path, params, ids, targets, scheme):
    """(logits, loss, grads) from a NumPy path (float64) and from PyTorch (float64) for one position scheme
    (a name, or True / False for learned / none)."""
    fast = numpy_run(path, nm.from_lists(params), ids, targets, scheme)
    loss, grads, inter = tm.loss_and_grads(tm.to_torch(params), tm.as_ids(ids), tm.as_ids(targets), scheme)
    return fast, (inter["logits"].numpy(), loss, {n: g.numpy() for n, g in grads.items()})


def three_ways(path, params, ids, targets, use_positions):
    """(logits, loss, grads) from the reference, a NumPy path (float64) and PyTorch (float64)."""
    return (reference(params, ids, targets, use_positions), *two_ways(path, params, ids, targets, use_positions))


@pytest.mark.parametrize("path", PATHS)
@settings(max_examples=40, deadline=None)
@given(cfg=configs, length=st.integers(1, 12))
def test_torch_float64_matches_reference_and_numpy(path, cfg, length):
    V, d, H, L = cfg["vocab"], cfg["d"], cfg["hidden"], cfg["max_len"]
    params = jittered(V, d, H, L, cfg["seed"], cfg["scale"])
    ids, targets = draw_batch(np.random.default_rng(cfg["seed"]), V, cfg["batch"], min(length, L))
    ref, fast, twin = three_ways(path, params, ids, targets, cfg["positions"])
    assert_close(twin, ref, TOL)
    assert_close(twin, fast, TOL)


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("batch, use_positions", [(1, True), (1, False), (4, True)])
def test_series_size(path, batch, use_positions):
    params = jittered(*SERIES, scale=0.05)
    rng = np.random.default_rng(batch)
    ids, targets = rng.integers(0, 96, (batch, 64)), rng.integers(0, 96, (batch, 64))
    ref, fast, twin = three_ways(path, params, ids, targets, use_positions)
    assert_close(twin, ref, TOL)
    assert_close(twin, fast, TOL)


@pytest.mark.parametrize("path", PATHS)
def test_intermediates_match_numpy(path):
    """The twin's x0, h1, attention weights, x1, h2, ReLU output and x2 match the NumPy path's."""
    params = jittered(*SERIES, scale=0.05)
    ids = np.random.default_rng(0).integers(0, 96, (2, 40))
    _, cache = path.forward(nm.from_lists(params), ids)
    _, inter = tm.forward(tm.to_torch(params), tm.as_ids(ids))
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
    fast, twin = two_ways(path, params, ids, targets, scheme)
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
    fast, twin = two_ways(path, params, ids, targets, scheme)
    assert_close(twin, fast, TOL)


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("scheme", ["sinusoidal", "rope"])
def test_intermediates_match_numpy_for_fixed_schemes(path, scheme):
    params = jittered(*SERIES, scale=0.05)
    ids = np.random.default_rng(0).integers(0, 96, (2, 90))
    _, cache = path.forward(nm.from_lists(params), ids, scheme)
    _, inter = tm.forward(tm.to_torch(params), tm.as_ids(ids), scheme)
    for name in ("x0", "h1", "x1", "h2", "act", "x2"):
        assert rel_err(inter[name].detach().numpy(), cache[name]) <= TOL, name
    assert rel_err(inter["weights"].detach().numpy(), cache["att"]["weights"]) <= TOL


def test_the_twin_is_independent_of_the_numpy_path():
    """torch_model.py parses its own scheme names: importing it loads no NumPy-path module, and it reads the
    reference's switch and the scheme names the same way."""
    code = ("import sys\nfrom oneblock import torch_model\n"
            "print(sorted(m for m in sys.modules if m.startswith(('numpy_', 'oneblock.numpy_'))))")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert run.returncode == 0 and run.stdout.strip() == "[]", run.stdout + run.stderr
    assert tm.SCHEMES == nm.SCHEMES
    for positions, use_positions in [("learned", None), ("rope", None), (True, None), (False, None),
                                     ("learned", False), (True, True)]:
        assert tm.scheme_name(positions, use_positions) == nm.position_scheme(positions, use_positions)
    for positions, use_positions in [("rotary", None), ("rope", False)]:
        with pytest.raises(ValueError):
            tm.scheme_name(positions, use_positions)


# ----------------------------------------------------------------------------------------------------------------
# Grown models: both NumPy paths against the twin, every intermediate compare.py prints and every gradient


@st.composite
def grown_configs(draw):
    """A model-like config of 1 to 3 blocks whose heads divide d (and leave an even head width for rope), a scheme,
    and a batch."""
    cfg = draw(configs)
    scheme = draw(st.sampled_from(nm.SCHEMES))
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
    twin = compare.torch_run(params, ids, targets, cfg["scheme"], cfg["heads"])
    rows = compare.compare(twin, compare.numpy_run(params, ids, targets, cfg["scheme"], path, cfg["heads"]), TOL)
    assert len(rows) == 2 + 6 * cfg["blocks"] + 1 + len(params)  # x0, each block's six, logits, loss, gradients
    assert [name for name, *_ in rows][-len(params):] == ["grad " + name for name in params]
    bad = [(name, rel) for name, _, _, rel, ok in rows if not ok]
    assert not bad, bad


@pytest.mark.parametrize("path", PATHS)
def test_grown_series_size_worst_relative_error(path, capsys):
    """2 blocks x 4 heads at series width, B 4, T 64, every scheme: every row within 1e-11; prints the worst."""
    from dev import compare

    worst = {}
    for scheme in nm.SCHEMES:
        params = jittered(*SERIES[:4], 5, scale=0.05, blocks=2)
        rng = np.random.default_rng(5)
        ids, targets = rng.integers(0, 96, (4, 64)), rng.integers(0, 96, (4, 64))
        rows = compare.compare(compare.torch_run(params, ids, targets, scheme, 4),
                               compare.numpy_run(params, ids, targets, scheme, path, 4), TOL)
        assert all(ok for *_, ok in rows), [r for r in rows if not r[-1]]
        worst[scheme] = max(rows, key=lambda r: r[3])
    with capsys.disabled():
        for scheme, (name, _, _, rel, _) in worst.items():
            print(f"\n{path.__name__} vs twin, 2 blocks x 4 heads, {scheme}: worst {rel:.2e} relative ({name})", end="")


def test_the_twin_with_one_head_has_no_heads_axis_and_the_other_blocks_are_named_like_their_parameters():
    params = tm.to_torch(jittered(96, 8, 8, 8, 3, scale=0.05, blocks=2))
    _, inter = tm.forward(params, tm.as_ids([[1, 2, 3]]))
    assert tuple(inter["weights"].shape) == (1, 3, 3) and tuple(inter["block1.weights"].shape) == (1, 3, 3)
    assert list(inter) == ["x0", "h1", "weights", "x1", "h2", "act", "x2", *(f"block1.{n}" for n in
                           ("h1", "weights", "x1", "h2", "act", "x2")), "logits"]
    _, inter = tm.forward(params, tm.as_ids([[1, 2, 3]]), heads=4)
    assert tuple(inter["block1.weights"].shape) == (1, 4, 3, 3)
