"""The logistic function and its inverse: expit, logit."""
from __future__ import annotations

import numpy as np

from ... import numpy as knp
from ._common import float_operands, narrow

__all__ = ["expit", "logit"]


def expit(x):
    """1 / (1 + exp(-x)) with e = exp(-|x|): 1 / (1 + e) for x >= 0, e / (1 + e) below (both tails keep their
    relative accuracy; nothing overflows)."""
    (x,), dtype = float_operands("expit", x)
    pos = knp.greater_equal(x, 0)
    e = knp.exp(knp.where(pos, knp.negative(x), x))
    return narrow(knp.where(pos, knp.reciprocal(knp.add(e, 1.0)), knp.divide(e, knp.add(e, 1.0))), dtype)


def logit(p):
    """log(p / (1 - p)): log1p((2p - 1) / (1 - p)) on [1/4, 3/4] (2p - 1 is exact there, so the result keeps its
    relative accuracy near p = 1/2), log(p) - log1p(-p) outside; 0 -> -inf, 1 -> inf, outside [0, 1] NaN."""
    (p,), dtype = float_operands("logit", p)
    middle = knp.logical_and(knp.greater_equal(p, 0.25), knp.less_equal(p, 0.75))
    pm = knp.where(middle, p, 0.5)
    near = knp.log1p(knp.divide(knp.subtract(knp.multiply(pm, 2.0), 1.0), knp.subtract(1.0, pm)))
    po = knp.where(middle, 0.1, p)
    inside = knp.logical_and(knp.greater_equal(po, 0.0), knp.less_equal(po, 1.0))
    po = knp.where(inside, po, 0.1)
    with np.errstate(divide="ignore"):
        far = knp.subtract(knp.log(po), knp.log1p(knp.negative(po)))
    far = knp.where(inside, far, np.nan)
    return narrow(knp.where(middle, near, knp.where(knp.isnan(p), p, far)), dtype)
