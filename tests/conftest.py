"""Shared pytest settings: under CI (the CI environment variable set), hypothesis runs a fixed, derandomised set
of examples so that a run can be repeated exactly; elsewhere every run explores new random examples. And the
longest tests start first, so that when the suite runs on several cores (pytest-xdist) no core is left with one
long test at the end while the others wait."""

import os

from hypothesis import settings

LONGEST_FIRST = ["test_fuzz_checkpoints.py", "test_readme.py", "test_bench.py", "test_torch_train.py",
                 "test_explorer.py", "test_grown.py"]  # the files whose tests take longest, each a minute or two


def pytest_collection_modifyitems(items):
    """Run the tests of LONGEST_FIRST's files first, in its order, and the others after them as collected."""
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # (a stable sort: each file keeps its order)

settings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")
