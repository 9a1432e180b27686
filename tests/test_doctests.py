"""Every module's docstring examples run somewhere: pytest runs those of the modules in pyproject.toml's testpaths
(--doctest-modules), and this file those of the two modules that need torch, where torch is installed. A module left
out of both would keep examples nobody runs, and a wrong one would go unseen."""

import doctest
import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
NEED_TORCH = ["oneblock/torch_model.py", "oneblock/torch_train.py"]


def test_every_module_is_in_testpaths_or_here(pytestconfig):
    testpaths = pytestconfig.getini("testpaths")  # pyproject.toml's
    modules = sorted(path.relative_to(ROOT).as_posix() for folder in (ROOT, ROOT / "oneblock") for path in folder.glob("*.py"))
    left_out = [name for name in modules if name not in testpaths and name not in NEED_TORCH]
    assert left_out == [], f"modules whose docstring examples no test runs: {left_out}"


@pytest.mark.parametrize("name", NEED_TORCH)
def test_the_examples_of_the_modules_that_need_torch(name):
    pytest.importorskip("torch", reason="torch is not installed (pip install -r requirements-torch.txt)")
    result = doctest.testmod(importlib.import_module(name[:-3].replace("/", ".")))
    assert result.attempted > 0 and result.failed == 0, result
