"""The formulas scale.py prints (ModelConfig's) against the model they describe: its parameter count, the numbers its
cache keeps, and the FLOPs of a training step, counted in PyTorch's own operations on the twin of the model."""

import numpy as np
import pytest

from oneblock import numpy_model
from oneblock.config import ModelConfig
from dev import scale


def cached_numbers(cache, seen):
    """The count of numbers in the float arrays of a (nested) forward cache, each array once."""
    total = 0
    for value in cache.values():
        if isinstance(value, dict):
            total += cached_numbers(value, seen)
        elif isinstance(value, list):  # a grown model's blocks
            total += sum(cached_numbers(block, seen) for block in value)
        elif not isinstance(value, np.ndarray):
            continue  # the config, the heads, the rotary tables (of positions, not of tokens)
        elif value.dtype.kind == "f" and id(value) not in seen:
            seen.add(id(value))
            total += value.size
    return total


@pytest.mark.parametrize("d, vocab, max_len, blocks, heads", [(16, 96, 64, 1, 1), (8, 11, 5, 1, 1),
                                                              (16, 96, 64, 2, 4), (8, 11, 5, 3, 2)])
def test_the_formulas_count_the_parameters_and_the_activations_of_the_model(d, vocab, max_len, blocks, heads):
    """Every parameter, and those outside the embeddings and the output layer (the blocks and the final layer
    norm); the numbers a training step keeps per token."""
    config = ModelConfig(vocab, d, 4 * d, max_len, blocks, heads)
    params = numpy_model.init_params(config, seed=1)
    assert config.parameter_count() == sum(p.size for p in params.values())
    outside = ("tok_emb", "pos_emb", "W_out", "b_out")
    assert config.non_embedding_parameters() == sum(p.size for name, p in params.items() if name not in outside)
    B = 3
    ids = np.arange(B * max_len).reshape(B, max_len) % vocab  # (B, T)
    logits, cache = numpy_model.forward(params, ids, config)  # (B, T, V)
    kept = cached_numbers(cache, set()) + 2 * logits.size  # the logits and their gradient
    assert config.activations_per_token(max_len) == kept / (B * max_len)


@pytest.mark.parametrize("d, vocab, T, blocks, heads", [(16, 96, 64, 1, 1), (8, 11, 5, 3, 2), (32, 96, 64, 2, 4),
                                                      (8, 96, 64, 1, 1), (64, 96, 64, 2, 1)])
def test_the_flops_formula_counts_the_matrix_products_of_a_training_step(d, vocab, T, blocks, heads):
    """torch.utils.flop_counter counts every matrix product autograd runs, forward and backward, in torch_model.py's
    twin of the model: it must be the formula's count, to the FLOP."""
    torch = pytest.importorskip("torch")
    from torch.utils.flop_counter import FlopCounterMode

    from oneblock import torch_model

    config = ModelConfig(vocab, d, 4 * d, T, blocks, heads)
    params = numpy_model.init_params(config, seed=1)
    p = torch_model.to_torch(params, dtype=torch.float32)
    B = 3
    ids = torch.arange(B * T).reshape(B, T) % vocab  # (B, T)
    with FlopCounterMode(display=False) as counter:
        torch_model.loss_and_grads(p, ids, (ids + 1) % vocab, config)
    assert counter.get_total_flops() == B * T * config.flops_per_token(T)


def test_bad_sizes_are_refused_naming_the_value(capsys):
    with pytest.raises(SystemExit) as e:
        scale.main(["--heads", "5"])
    assert e.value.code == 2 and "--heads 5 does not divide --width 768" in capsys.readouterr().err
