"""The regularized incomplete gamma and beta functions: gammainc, gammaincc, betainc (kiln.lax's igamma,
igammac and betainc kernels, lax/special_math.py)."""
from __future__ import annotations

from ... import numpy as knp
from ...lax.special_math import betainc64, gammainc64, gammaincc64
from ._common import float_operands, narrow

__all__ = ["gammainc", "gammaincc", "betainc"]


def gammainc(a, x):
    """The regularized lower incomplete gamma function P(a, x) = gamma(a, x) / Gamma(a). The derivative in x
    is exact; the one in a is lax.igamma_grad_a (its power series differentiated term by term)."""
    (a, x), dtype = float_operands("gammainc", a, x)
    return narrow(gammainc64(a, x), dtype)


def gammaincc(a, x):
    """The regularized upper incomplete gamma function Q(a, x) = 1 - P(a, x), accurate where it is small."""
    (a, x), dtype = float_operands("gammaincc", a, x)
    return narrow(gammaincc64(a, x), dtype)


def betainc(a, b, x):
    """The regularized incomplete beta function I_x(a, b) (JAX's argument order). The derivative in x is exact;
    those in a and b are float64 central differences (relative accuracy about 1e-9)."""
    (a, b, x), dtype = float_operands("betainc", a, b, x)
    return narrow(betainc64(a, b, x, knp.subtract(1.0, x)), dtype)
