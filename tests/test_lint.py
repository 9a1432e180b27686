"""The code is held to the rules pyproject.toml selects for ruff (pinned in tests/requirements.txt): every Python
file of the tree, with no finding. The explorer's JavaScript has its own check (tests/test_explorer_js.py)."""

import importlib.util
import subprocess
import sys

import pytest
from run_helpers import ROOT


def test_ruff_finds_nothing():
    if importlib.util.find_spec("ruff") is None:
        pytest.fail("ruff is not installed: python3 -m pip install -r tests/requirements.txt installs the pinned one")
    done = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "--output-format", "concise", "."],
                          cwd=ROOT, capture_output=True, text=True, check=False)
    assert done.returncode == 0, f"ruff check found problems:\n{done.stdout}{done.stderr}"


def test_ruff_sees_a_long_line(tmp_path):
    """The check can fail: a line past the limit in a file of the tree's layout is a finding."""
    (tmp_path / "pyproject.toml").write_text((ROOT / "pyproject.toml").read_text())
    (tmp_path / "long.py").write_text(f"x = {'1 + ' * 40}1\n")
    done = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "--output-format", "concise", "."],
                          cwd=tmp_path, capture_output=True, text=True, check=False)
    assert done.returncode == 1 and "E501" in done.stdout, done.stdout + done.stderr
