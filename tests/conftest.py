"""Shared fixtures: the example programs. The kernel cache of a test run is its own."""
import atexit
import os
import shutil
import sys
import tempfile

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

if "KILN_CACHE_DIR" not in os.environ:  # kernels compiled by tests (and their subprocesses) never reach ~/.cache
    os.environ["KILN_CACHE_DIR"] = tempfile.mkdtemp(prefix="kiln-test-cache-")
    atexit.register(shutil.rmtree, os.environ["KILN_CACHE_DIR"], True)


@pytest.fixture(scope="session")
def linear_example():
    sys.path.insert(0, os.path.join(ROOT, "examples"))
    try:
        import linear
    finally:
        sys.path.pop(0)
    return linear
