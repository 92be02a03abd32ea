"""Shared fixtures: the example programs."""
import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope="session")
def linear_example():
    sys.path.insert(0, os.path.join(ROOT, "examples"))
    try:
        import linear
    finally:
        sys.path.pop(0)
    return linear
