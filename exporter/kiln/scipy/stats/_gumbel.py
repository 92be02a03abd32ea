"""The two Gumbel distributions, as functions of the direction s (+1: gumbel_r, the maximum's; -1: gumbel_l)."""
from __future__ import annotations

import math

from ... import numpy as knp
from ._common import float_operands, invalid_to_nan, narrow, standardize


def standard(where, x, loc, scale, s):
    """(u = s z, scale, dtype): the density is exp(-u - e^-u) / scale, the cdf of gumbel_r exp(-e^-u)."""
    (x, loc, scale), dtype = float_operands(where, x, loc, scale)
    return knp.multiply(standardize(x, loc, scale), s), scale, dtype


def finish(scale, y, dtype):
    return narrow(invalid_to_nan(knp.greater(scale, 0), y), dtype)


def logpdf(where, x, loc, scale, s):
    u, scale, dtype = standard(where, x, loc, scale, s)
    y = knp.subtract(knp.negative(knp.add(u, knp.exp(knp.negative(u)))), knp.log(scale))
    return y, scale, dtype


def lower_tail(u):
    """log of exp(-e^-u): -e^-u (the tail where u is large toward -inf)."""
    return knp.negative(knp.exp(knp.negative(u)))


def upper_tail(u):
    """log(1 - exp(-v)), v = e^-u: log1p(-exp(-v)) once exp(-v) < 1/2, log(-expm1(-v)) below (each keeps its
    relative accuracy)."""
    v = knp.exp(knp.negative(u))
    return knp.where(knp.greater(v, math.log(2.0)), knp.log1p(knp.negative(knp.exp(knp.negative(v)))),
                     knp.log(knp.negative(knp.expm1(knp.negative(v)))))
