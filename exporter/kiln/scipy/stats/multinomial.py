"""kiln.scipy.stats.multinomial: counts x (last axis) of n draws over categories of probabilities p."""
from __future__ import annotations

import numpy as np

from ... import numpy as knp
from .. import special
from ._common import float_operands, invalid_to_nan, joint_dtype, narrow

__all__ = ["logpmf", "pmf"]


def _logpmf(where, x, n, p):
    """gammaln(n + 1) - sum gammaln(x + 1) + sum x log p over the last axis; -inf unless the counts are
    non-negative integers summing to n; NaN for probabilities outside [0, 1]."""
    x_in, p_in, n_in = x, p, n
    (x, p), dtype = float_operands(where, x, p)
    (n,), n_dtype = float_operands(where, n)
    dtype = joint_dtype(([x_in, p_in], dtype), ([n_in], n_dtype))
    counts_ok = knp.all(knp.logical_and(knp.greater_equal(x, 0), knp.equal(x, knp.floor(x))), axis=-1)
    inside = knp.logical_and(counts_ok, knp.equal(knp.sum(x, axis=-1), n))
    xs = knp.where(knp.greater_equal(x, 0), x, 0.0)
    y = knp.add(knp.subtract(special.gammaln(knp.add(n, 1.0)), knp.sum(special.gammaln(knp.add(xs, 1.0)), axis=-1)),
                knp.sum(special.xlogy(xs, p), axis=-1))
    valid = knp.all(knp.logical_and(knp.greater_equal(p, 0), knp.less_equal(p, 1)), axis=-1)
    return invalid_to_nan(valid, knp.where(inside, y, -np.inf)), dtype


def logpmf(x, n, p):
    return narrow(*_logpmf("multinomial.logpmf", x, n, p))


def pmf(x, n, p):
    y, dtype = _logpmf("multinomial.pmf", x, n, p)
    return narrow(knp.exp(y), dtype)
