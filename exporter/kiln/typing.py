"""jax.typing: the annotations JAX programs write on their functions.

``ArrayLike``: what kiln.numpy functions accept as an array (kiln arrays, traced arrays, numpy arrays and
scalars, Python numbers). ``DTypeLike``: what they accept as a dtype (a numpy dtype, a scalar type such as
numpy.float32 or kiln.numpy.bfloat16, a dtype name, a Python type). For type checkers and documentation;
kiln checks nothing against them at run time.
"""
from __future__ import annotations

from typing import Any, Union

import numpy as np

from kiln.core.array import Array
from kiln.core.trace import Tracer

ArrayLike = Union[Array, Tracer, np.ndarray, np.bool_, np.number, bool, int, float, complex]
DTypeLike = Union[str, type[Any], np.dtype, Any]

__all__ = ["ArrayLike", "DTypeLike"]
