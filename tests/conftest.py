"""Shared pytest settings: under CI (the CI environment variable set), hypothesis runs a fixed, derandomised set
of examples so that a run can be repeated exactly; elsewhere every run explores new random examples. And the
longest tests start first, so that when the suite runs on several cores (pytest-xdist) no core is left with one
long test at the end while the others wait. The browser tests share one fixture, the system's Chromium driven by
Playwright (and modules_page, a page of it with the explorer's model.js and checkpoint.js imported): without either
the tests skip with a one-line reason, and under CI=true that is a failure."""

import os
from pathlib import Path

import pytest
from hypothesis import settings

from oneblock import machine
from run_helpers import served

LONGEST_FIRST = ["test_fuzz_checkpoints.py", "test_readme.py", "test_bench.py", "test_torch_train.py",
                 "test_explorer.py", "test_grown.py"]  # the files whose tests take longest, each a minute or two


def pytest_collection_modifyitems(items):
    """Run the tests of LONGEST_FIRST's files first, in its order, and the others after them as collected."""
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # (a stable sort: each file keeps its order)

settings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")

IN_CI = os.environ.get("CI", "").lower() in ("true", "1")


@pytest.fixture(scope="module")
def browser():
    """The system's Chromium, headless, driven by Playwright, for one test module's tests."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        reason = "Playwright is not installed (python3 -m pip install -r tests/requirements.txt)"
    else:
        reason = None if machine.find_chromium() else ("no Chromium found (chromium, chromium-browser or"
                                                       " google-chrome on PATH; .ci/run installs it with apt-get)")
    if reason:
        if IN_CI:
            pytest.fail(f"CI=true and the browser tests cannot run: {reason}")
        pytest.skip(reason)
    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=machine.find_chromium(), args=["--no-sandbox"])
        yield chromium
        chromium.close()


@pytest.fixture(scope="module")
def modules_page(browser):
    """A page of the served explorer/ with model.js and checkpoint.js imported as window.model and window.ckpt."""
    with served(Path(__file__).resolve().parent.parent / "explorer") as url:
        page = browser.new_page()
        page.route(f"{url}/modules.html", lambda route: route.fulfill(status=200, content_type="text/html",
                                                                      body="<!doctype html><title>modules</title>"))
        page.goto(f"{url}/modules.html")
        page.evaluate("async () => { window.model = await import('./model.js');"
                      " window.ckpt = await import('./checkpoint.js'); }")
        yield page
        page.close()
