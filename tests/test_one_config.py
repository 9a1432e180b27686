"""One config, every implementation: the same ModelConfig and the same weights through numpy_model.py, numpy_fast.py,
the PyTorch twin, model.py (where the seed's one block, one head and two schemes reach) and the page's model.js give
the same logits, loss and gradients, in float64, within 1e-12 relative; and the config the weights travel with is
the same one everywhere (a checkpoint's JSON read back by checkpoint.py and by the page is the config written).

This is the test a new model option joins: add its values to CONFIGS, and every implementation must agree on them
(docs/growing.md, "What a new model option touches")."""

import dataclasses
import json

import numpy as np
import pytest

from fastpath_helpers import assert_close, numpy_run, reference, spread_params

from oneblock import numpy_fast, numpy_model
from oneblock.config import SCHEMES, ModelConfig, seed_switch

TOL = 1e-12
SMALL = {"vocab": 20, "d": 8, "hidden": 16, "max_len": 12}  # small enough for model.py's lists to be quick
CONFIGS = [ModelConfig(**SMALL, blocks=blocks, heads=heads, positions=scheme)
           for scheme in SCHEMES for blocks, heads in [(1, 1), (2, 2), (3, 4)]]


def ids_of(config):
    """The test's token IDs and targets for config, (2, T) each: past the learned rows where a scheme has none."""
    rng = np.random.default_rng(CONFIGS.index(config))
    T = config.max_len if config.positions == "learned" else config.max_len + 4
    return rng.integers(0, config.vocab, (2, T)), rng.integers(0, config.vocab, (2, T))  # (B, T) each


def weights_of(config):
    """Parameters of config with every number spread (fastpath_helpers.spread_params), a seed of its own."""
    return spread_params(config, 7 + CONFIGS.index(config))


def numpy_answer(config):
    """(logits, loss, grads) of numpy_model.py for config, the answer the others are held to."""
    return numpy_run(numpy_model, weights_of(config), *ids_of(config), config)


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: f"{c.positions}-{c.blocks}x{c.heads}")
def test_every_python_implementation_computes_the_same_model_from_the_same_config(config):
    want = numpy_answer(config)
    params, (ids, targets) = weights_of(config), ids_of(config)
    assert_close(numpy_run(numpy_fast, params, ids, targets, config), want, TOL, "numpy_fast")
    if config.seed_problem() is None:  # what the seed's model.py has: it takes the config's parameters (its config_of
        # refuses a name or shape not its own) and its switch (seed_switch: learned or none)
        ids, targets = ids[:, :config.max_len], targets[:, :config.max_len]  # (B, L) model.py reads at most L
        lists = {name: t.tolist() for name, t in params.items()}
        want = numpy_run(numpy_model, params, ids, targets, config)
        assert_close(reference(lists, ids, targets, seed_switch(config)), want, TOL, "model.py")


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: f"{c.positions}-{c.blocks}x{c.heads}")
def test_the_pytorch_twin_computes_the_same_model_from_the_same_config(config):
    pytest.importorskip("torch", reason="torch is not installed (pip install -r tests/requirements-torch.txt)")
    from oneblock import torch_model

    params, (ids, targets) = weights_of(config), ids_of(config)
    loss, grads, inter = torch_model.loss_and_grads(torch_model.to_torch(params), torch_model.as_ids(ids),
                                                    torch_model.as_ids(targets), config)
    got = (inter["logits"].numpy(), float(loss), {name: g.numpy() for name, g in grads.items()})
    assert_close(got, numpy_answer(config), TOL, "torch_model")


PAGE_PASS = """([fields, json_text, lists, ids, targets, sums]) => {
  const config = model.model_config(fields);
  const read = model.config_from_json(ckpt.read_json(json_text, "config", model.JSON_KEYS));  // as a file's
  const params = model.from_lists(lists);
  const logits = ids.map((row) => model.to_lists({l: model.forward(params, row, config, model[sums])[0]}).l);
  const rows = ids.map((row, i) => model.loss_and_grads(params, row, targets[i], config, model[sums]));
  const grads = Object.fromEntries(Object.keys(rows[0][1]).map(
    (name) => [name, rows.map(([, g]) => model.to_lists({g: g[name]}).g)]));  // {name: one gradient per row}
  return {same: Object.entries(read).join() === Object.entries(config).join(), logits,
          losses: rows.map(([loss]) => loss), grads, json: JSON.stringify(model.config_to_json(config))};
}"""


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: f"{c.positions}-{c.blocks}x{c.heads}")
@pytest.mark.parametrize("sums", ["EXACT", "PLAIN"])
def test_the_page_computes_the_same_model_from_the_same_config(modules_page, config, sums):
    """model.js, given the same config (its fields, and the checkpoint JSON config.py writes) and the same weights,
    gives numpy_model's logits, loss and gradients (the mean of its per-row losses and gradients), with exact sums
    and with the plain sums the page trains with."""
    params, (ids, targets) = weights_of(config), ids_of(config)
    got = modules_page.evaluate(PAGE_PASS, [dataclasses.asdict(config), json.dumps(config.to_json()),
                                            {name: t.tolist() for name, t in params.items()}, ids.tolist(),
                                            targets.tolist(), sums])
    assert got["same"] and got["json"] == json.dumps(config.to_json(), separators=(",", ":"))
    grads = {name: np.mean(np.array(rows), axis=0) for name, rows in got["grads"].items()}  # the batch's mean
    assert_close((np.array(got["logits"]), float(np.mean(got["losses"])), grads), numpy_answer(config), TOL,
                 "model.js")
