"""Every module's docstring examples run somewhere: pytest runs those of the modules under pyproject.toml's testpaths
(--doctest-modules), and this file those of the two modules that need torch (which pytest's options leave out), where
torch is installed. A module left out of both would keep examples nobody runs, and a wrong one would go unseen."""

import doctest
import importlib

import pytest
from run_helpers import ROOT

NEED_TORCH = ["oneblock/torch_model.py", "oneblock/torch_train.py"]
FOLDERS = (ROOT, ROOT / "oneblock", ROOT / "experiments", ROOT / "dev")  # where the lab's modules are


def test_every_module_is_in_testpaths_or_here(pytestconfig):
    testpaths = pytestconfig.getini("testpaths")  # pyproject.toml's
    ignored = [part.split("=", 1)[1] for part in pytestconfig.getini("addopts") if part.startswith("--ignore=")]
    assert sorted(ignored) == sorted(NEED_TORCH)
    modules = sorted(path.relative_to(ROOT).as_posix() for folder in FOLDERS for path in folder.glob("*.py"))
    left_out = [name for name in modules if name not in NEED_TORCH
                and not any(name == t or name.startswith(t + "/") for t in testpaths)]
    assert left_out == [], f"modules whose docstring examples no test runs: {left_out}"


@pytest.mark.parametrize("name", NEED_TORCH)
def test_the_examples_of_the_modules_that_need_torch(name):
    pytest.importorskip("torch", reason="torch is not installed (pip install -r tests/requirements-torch.txt)")
    result = doctest.testmod(importlib.import_module(name[:-3].replace("/", ".")))
    assert result.attempted > 0 and result.failed == 0, result
