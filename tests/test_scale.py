"""scale.py's formulas against the model they describe: its parameter count and the numbers its cache keeps."""

import numpy as np
import pytest

from oneblock import numpy_model
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
            continue  # the scheme's name, the heads, the rotary tables (of positions, not of tokens)
        elif value.dtype.kind == "f" and id(value) not in seen:
            seen.add(id(value))
            total += value.size
    return total


@pytest.mark.parametrize("d, vocab, max_len, blocks, heads", [(16, 96, 64, 1, 1), (8, 11, 5, 1, 1),
                                                              (16, 96, 64, 2, 4), (8, 11, 5, 3, 2)])
def test_the_formulas_count_the_parameters_and_the_activations_of_the_model(d, vocab, max_len, blocks, heads):
    params = numpy_model.init_params(vocab, d, 4 * d, max_len, seed=1, blocks=blocks)
    counts = scale.paper(width=d, blocks=blocks, heads=heads, vocab=vocab, max_len=max_len)
    assert counts["parameters"] == sum(p.size for p in params.values())
    B = 3
    ids = np.arange(B * max_len).reshape(B, max_len) % vocab  # (B, T)
    logits, cache = numpy_model.forward(params, ids, heads=heads)  # (B, T, V)
    kept = cached_numbers(cache, set()) + 2 * logits.size  # the logits and their gradient
    assert counts["activations_per_token"] == kept / (B * max_len)


def test_bad_sizes_are_refused_naming_the_value(capsys):
    with pytest.raises(SystemExit) as e:
        scale.main(["--heads", "5"])
    assert e.value.code == 2 and "--heads 5 does not divide --width 768" in capsys.readouterr().err
    with pytest.raises(SystemExit) as e:
        scale.main(["--gpus", "0"])
    assert e.value.code == 2 and "0 is not greater than 0" in capsys.readouterr().err
