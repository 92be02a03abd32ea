"""logsumexp, softmax and log_softmax (kiln.nn's are these, with axis -1 by default)."""
from __future__ import annotations

import numpy as np

from ... import numpy as knp
from ...core import dtypes
from ...numpy._base import aval, broadcast_all, convert, normalize_axes
from ...transforms.api import stop_gradient
from ._common import narrow, wide_float

__all__ = ["logsumexp", "softmax", "log_softmax"]


def _row_dtype(dtype):
    """Where per-row sums and logs are kept: float64 for float32 rows (cheap: once per row, or plain arithmetic
    per element), so that the results round once."""
    return np.dtype(np.float64) if dtype == np.float32 else dtype


def _shifted(x, axes):
    """(d, lo, m): x - max = d + lo exactly (Knuth's two-sum; lo is 0 where x - max is infinite or NaN), and the
    max as a row, infinite maxima replaced by 0."""
    m = stop_gradient(knp.max(x, axis=axes, keepdims=True))
    m = knp.where(knp.less(knp.abs(m), np.inf), m, knp.zeros_like(m))
    d = knp.subtract(x, m)
    back = knp.subtract(d, x)
    lo = knp.add(knp.subtract(x, knp.subtract(d, back)), knp.subtract(knp.negative(m), back))
    return d, knp.where(knp.isfinite(lo), lo, knp.zeros_like(lo)), m


def _exp_shifted(d, lo, keep_infinity: bool = False):
    """exp(x - max) = exp(d) (1 + lo) to first order: without lo, the rounding of x - max costs up to
    |x - max| / 2 ulp. keep_infinity: exp(d) where lo is 0, so that a +inf entry (whose row's max was replaced
    by 0) gives +inf, not inf * 0 = NaN (softmax's row is NaN either way)."""
    e = knp.exp(d)
    corrected = knp.add(e, knp.multiply(e, lo))
    return knp.where(knp.equal(lo, 0), e, corrected) if keep_infinity else corrected


def _log_sum_exp_shifted(x, axes):
    """(d, lo, m, log(sum(exp(x - m)))), the sums and the log in the row dtype: the log as log1p((k - 1) + t),
    with k the number of maxima and t the sum of the other terms, so that a dominant maximum keeps the log's
    relative accuracy (log(1 + 1e-20) is 1e-20, not 0). The maxima enter t as d (1 + d (1/2 + d/6)) = 0, whose
    derivatives at 0 are those of exp(d) - 1."""
    d, lo, m = _shifted(x, axes)
    row = _row_dtype(aval(x).dtype)
    e = _exp_shifted(d, lo, keep_infinity=True)
    top = knp.equal(d, 0)
    near = knp.multiply(d, knp.add(knp.multiply(d, knp.add(knp.multiply(d, 1.0 / 6.0), 0.5)), 1.0))
    t = knp.sum(knp.where(top, near, e), axis=axes, keepdims=True, dtype=row)
    k = knp.sum(top, axis=axes, keepdims=True, dtype=row)
    return d, lo, m, knp.log1p(knp.add(knp.subtract(k, 1.0), t))


def _weighted_log_sum_exp(x, b, axes):
    """(log|sum(b exp(x))|, sign of the sum) as rows: terms with b == 0 are left out (as -inf)."""
    row = _row_dtype(aval(x).dtype)
    x = knp.where(knp.equal(b, 0), -np.inf, x)
    m = stop_gradient(knp.max(x, axis=axes, keepdims=True))
    m = knp.where(knp.isfinite(m), m, knp.zeros_like(m))
    s = knp.sum(knp.multiply(convert(b, row), knp.exp(convert(knp.subtract(x, m), row))), axis=axes, keepdims=True)
    sign = knp.sign(s)
    return knp.add(knp.log(knp.abs(s)), convert(m, row)), sign


def logsumexp(a, axis=None, b=None, keepdims: bool = False, return_sign: bool = False, where=None):
    """scipy.special.logsumexp (and jax.nn.logsumexp): log(sum(b * exp(a), axis)), the max subtracted first.
    With b, a negative sum gives NaN unless return_sign=True, which returns (log|sum|, sign of the sum) as scipy
    does. where= (JAX's) leaves out the entries where it is False (a row with none left gives -inf)."""
    x, dtype = wide_float(a)
    if where is not None:
        mask = knp.asarray(where)
        if not dtypes.is_bool(aval(mask).dtype):
            raise TypeError(f"logsumexp: argument where must be a boolean array, got dtype {aval(mask).dtype}")
        b = knp.where(mask, 1.0 if b is None else b, 0.0)
    if b is not None:
        b = knp.asarray(b)
        x, b = broadcast_all(x, convert(b, aval(x).dtype), where="logsumexp")
    axes = normalize_axes(axis, aval(x).ndim, "logsumexp")
    if b is None:
        if axes:
            _, _, m, log_s = _log_sum_exp_shifted(x, axes)
            out = knp.add(convert(m, aval(log_s).dtype), log_s)
        else:
            out = x
        sign = knp.where(knp.equal(out, -np.inf), 0.0, 1.0)
    else:
        out, sign = _weighted_log_sum_exp(x, b, axes)
        if not return_sign:
            out = knp.where(knp.less(sign, 0), np.nan, out)
    if not keepdims and axes:
        out, sign = knp.squeeze(out, axis=axes), knp.squeeze(sign, axis=axes)
    return (narrow(out, dtype), narrow(convert(sign, aval(out).dtype), dtype)) if return_sign else narrow(out, dtype)


def softmax(x, axis=None):
    """scipy.special.softmax: exp(x) / sum(exp(x), axis), the max subtracted first (the sums of float32 rows
    in float64). scipy's default axis=None normalizes over the whole array (kiln.nn.softmax's is -1).
    Differentiated through that formula; with kiln.config's jax_softmax_custom_jvp (kiln.softmax_custom_jvp(),
    as JAX's flag for jax.nn.softmax, which jax.scipy.special.softmax calls) by JAX's custom JVP rule instead,
    y * (t - sum(y * t, axis)), whose reverse mode keeps only y."""
    from ...config import config

    if not config.jax_softmax_custom_jvp:
        return _softmax(x, axis)
    from ...transforms.custom import custom_jvp

    @custom_jvp
    def rule(x):
        return _softmax(x, axis)

    @rule.defjvp
    def rule_jvp(primals, tangents):
        y = rule(primals[0])
        t = tangents[0]
        axes = normalize_axes(axis, aval(y).ndim, "softmax")
        return y, y * (t - knp.sum(y * t, axis=axes, keepdims=True))

    return rule(x)


def _softmax(x, axis):
    x, dtype = wide_float(x)
    axes = normalize_axes(axis, aval(x).ndim, "softmax")
    d, lo, _ = _shifted(x, axes)
    e = _exp_shifted(d, lo)
    return narrow(knp.divide(e, knp.sum(e, axis=axes, keepdims=True)), dtype)


def log_softmax(x, axis=None):
    """scipy.special.log_softmax: x - logsumexp(x, axis, keepdims=True), as (x - max) - log(sum(exp(x - max))),
    the log and the subtraction in float64 for float32 x (rounded once)."""
    x, dtype = wide_float(x)
    axes = normalize_axes(axis, aval(x).ndim, "log_softmax")
    d, lo, _, log_s = _log_sum_exp_shifted(x, axes)
    row = aval(log_s).dtype
    return narrow(knp.add(knp.subtract(convert(d, row), log_s), convert(lo, row)), dtype)
