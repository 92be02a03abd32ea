"""What kiln.scipy.stats' distributions share: operands in float64 with the result dtype (as kiln.scipy.special),
standardizing by loc and scale, and scipy's NaN for invalid parameters."""
from __future__ import annotations

import numpy as np

from ... import numpy as knp
from ..special._common import float_operands, joint_dtype, narrow

__all__ = ["float_operands", "joint_dtype", "narrow", "standardize", "invalid_to_nan", "outside"]


def standardize(x, loc, scale):
    """(x - loc) / scale."""
    return knp.divide(knp.subtract(x, loc), scale)


def invalid_to_nan(valid, y):
    """y where the parameters are valid, NaN elsewhere (scipy's value for a non-positive scale, a
    probability outside [0, 1], ...)."""
    return knp.where(valid, y, np.nan)


def outside(condition, value, y):
    """y, with `value` where x lies outside the support (-inf for a log density, 0 for a density)."""
    return knp.where(condition, value, y)
