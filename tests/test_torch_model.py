"""PyTorch autograd in float64 (torch_model.py) against both NumPy paths (each test once for each), through
dev/compare.py's rows, on random model-like configs of every scheme and size. That the twin computes the model of a
config is tests/test_one_config.py's; this file holds what is the twin's own: its independence of the NumPy path, its
reading of the config, and its agreement on random sizes. Skipped only when torch is not installed (CI installs it)."""

import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fastpath_helpers import PATHS, configs, draw_batch, jittered
from run_helpers import ROOT

from oneblock import config as model_config
from oneblock.config import SCHEMES, ModelConfig

torch = pytest.importorskip("torch", reason="torch is not installed (pip install -r tests/requirements-torch.txt)")
tm = pytest.importorskip("oneblock.torch_model")  # (it imports torch: only once torch is known to be there)

TOL = 1e-11


def test_the_twin_is_independent_of_the_numpy_path():
    """torch_model.py reads the scheme from the config alone: importing it loads no NumPy-path module, its schemes
    are config.py's one list, and a config whose scheme is none of them is refused, never run as "none". (That it
    computes each scheme's model is tests/test_one_config.py's.)"""
    code = ("import sys\nfrom oneblock import torch_model\n"
            "print(sorted(m for m in sys.modules if m.startswith(('numpy_', 'oneblock.numpy_'))))")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert run.returncode == 0 and run.stdout.strip() == "[]", run.stdout + run.stderr
    assert tm.SCHEMES is model_config.SCHEMES
    params, ids = tm.to_torch(jittered(12, 4, 8, 8, 3, scale=0.05)), tm.as_ids([[1, 2, 3]])
    with pytest.raises(ValueError, match="unknown position scheme 'rotary'"):
        tm.forward(params, ids, ModelConfig(12, 4, 8, 8, positions="rotary"))


def test_the_config_not_the_parameter_names_says_the_blocks():
    """Weights of two blocks with a config of one (or the other way round) are refused, naming the first tensor
    that does not fit, before any work. (A config of two blocks runs both: tests/test_one_config.py.)"""
    two = tm.to_torch(jittered(12, 4, 8, 8, 3, scale=0.05, blocks=2))
    ids = tm.as_ids([[1, 2, 3]])
    with pytest.raises(ValueError, match="unknown tensors"):
        tm.loss_and_grads(two, ids, ids, ModelConfig(12, 4, 8, 8))
    with pytest.raises(ValueError, match=r"missing tensors: \['block1\.ln1_g'"):
        tm.loss_and_grads(tm.to_torch(jittered(12, 4, 8, 8, 3, scale=0.05)), ids, ids, ModelConfig(12, 4, 8, 8, 2))


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


def test_the_twin_with_one_head_has_no_heads_axis_and_the_other_blocks_are_named_like_their_parameters():
    params = tm.to_torch(jittered(96, 8, 8, 8, 3, scale=0.05, blocks=2))
    _, inter = tm.forward(params, tm.as_ids([[1, 2, 3]]), ModelConfig(96, 8, 8, 8, blocks=2))
    assert tuple(inter["weights"].shape) == (1, 3, 3) and tuple(inter["block1.weights"].shape) == (1, 3, 3)
    assert list(inter) == ["x0", "h1", "weights", "x1", "h2", "act", "x2", *(f"block1.{n}" for n in
                           ("h1", "weights", "x1", "h2", "act", "x2")), "logits"]
    _, inter = tm.forward(params, tm.as_ids([[1, 2, 3]]), ModelConfig(96, 8, 8, 8, blocks=2, heads=4))
    assert tuple(inter["block1.weights"].shape) == (1, 4, 3, 3)
