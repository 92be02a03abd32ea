"""Shared fixtures: the example programs. The kernel cache of a test run is its own."""
import atexit
import os
import shutil
import tempfile

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

if "KILN_CACHE_DIR" not in os.environ:  # kernels compiled by tests (and their subprocesses) never reach ~/.cache
    os.environ["KILN_CACHE_DIR"] = tempfile.mkdtemp(prefix="kiln-test-cache-")
    atexit.register(shutil.rmtree, os.environ["KILN_CACHE_DIR"], True)

# Exports compile for this machine only (one kernel build, not the portable default's three); the
# portability tests (tests/test_targets.py) ask for the portable variants themselves.
os.environ.setdefault("KILN_TARGET", "host")


@pytest.fixture(scope="session")
def linear_example():
    from kiln_tools import example

    return example("linear")
