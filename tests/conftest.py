"""Shared pytest settings: under CI (the CI environment variable set), hypothesis runs a fixed, derandomised set
of examples so that a run can be repeated exactly; elsewhere every run explores new random examples."""

import os

from hypothesis import settings

settings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")
