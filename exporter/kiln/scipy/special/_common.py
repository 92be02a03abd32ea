"""Shared by kiln.scipy.special's modules: operands in float64 with the result dtype, rounding once to it,
polynomials, an exact square, and the iteration limits of the functions computed by while_loop."""
from __future__ import annotations

import numpy as np

from ... import numpy as knp
from ...core import dtypes
from ...core.trace import is_eager
from ...numpy._base import aval, broadcast_all, convert, promote

__all__ = ["float_operands", "joint_dtype", "narrow"]


def float_operands(where: str, *xs):
    """(operands in float64, the result dtype), broadcast together: the common float dtype of the float arrays
    among the operands; float64 where the arrays are integers or bools (Python floats beside them do not make it
    float32, as in scipy), and for Python numbers alone eagerly (float32 traced, as JAX's weak types)."""
    ops = promote(*xs)
    dtype = aval(ops[0]).dtype
    strong = [aval(x) for x in xs if not dtypes.is_python_scalar(x) and not aval(x).weak_type]
    if not dtypes.is_float(dtype) or (strong and not any(dtypes.is_float(a.dtype) for a in strong)):
        dtype = np.dtype(np.float64 if strong or is_eager() else np.float32)  # ints, or Python numbers traced
    ops = broadcast_all(*[convert(o, np.float64) for o in ops], where=where)
    return ops, dtypes.canonical(dtype)


def joint_dtype(*groups):
    """The result dtype of operands converted by separate float_operands calls (their shapes do not broadcast
    together), each group given as (original operands, the dtype float_operands gave): a group of weak values
    only (Python numbers, arrays made without dtype=) takes the other groups' dtype, as in one call."""
    strong = [d for xs, d in groups if any(not dtypes.is_python_scalar(x) and not aval(x).weak_type for x in xs)]
    return dtypes.canonical(np.result_type(*(strong or [d for _, d in groups])))


def narrow(y, dtype):
    """y rounded once to the result dtype."""
    return y if aval(y).dtype == dtype else convert(y, dtype)


def wide_float(x):
    """(x in its compute dtype, the result dtype) for the reductions: float16/bfloat16 in float32, the
    per-row sums in float64 (_row_dtype)."""
    x = knp.asarray(x)
    dtype = aval(x).dtype
    if not dtypes.is_float(dtype):
        dtype = np.dtype(np.float32 if aval(x).weak_type and not is_eager() else np.float64)
        x = convert(x, dtype)
    if dtype.itemsize == 2:
        x = convert(x, np.float32)
    return x, dtypes.canonical(dtype)


def horner(t, coeffs):
    """sum coeffs[k] t^k."""
    total = coeffs[-1]
    for c in coeffs[-2::-1]:
        total = knp.add(knp.multiply(total, t), c)
    return total


def square_exactly(x):
    """(hi, lo) with hi + lo = x * x exactly (Veltkamp's split of x into two 26-bit halves)."""
    c = knp.multiply(x, 134217729.0)
    x_hi = knp.subtract(c, knp.subtract(c, x))
    x_lo = knp.subtract(x, x_hi)
    hi = knp.multiply(x, x)
    lo = knp.add(knp.add(knp.subtract(knp.multiply(x_hi, x_hi), hi), knp.multiply(knp.multiply(x_hi, x_lo), 2.0)),
                 knp.multiply(x_lo, x_lo))
    return hi, lo


MAX_ITERATIONS = 2000  # the most steps a while_loop series or continued fraction takes
EPS = 2.0 ** -53  # the relative change at which an element of such a loop has converged


def central_difference(fn, v):
    """d fn / d v by a float64 central difference with step 1e-5 max(v, 1)."""
    h = knp.multiply(knp.maximum(knp.abs(v), 1.0), 1e-5)
    return knp.divide(knp.subtract(fn(knp.add(v, h)), fn(knp.subtract(v, h))), knp.multiply(h, 2.0))
