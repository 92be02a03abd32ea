"""kiln.scipy.optimize: minimize with BFGS (and JAX's L-BFGS) and its OptimizeResults (JAX's
jax.scipy.optimize).

Both methods take a 1-d x0, differentiate fun with kiln.value_and_grad, and search each step's length
with a strong-Wolfe line search (Nocedal & Wright, algorithms 3.5 and 3.6: bracketing by doubling, then
zooming with a safeguarded quadratic interpolation; c1 = 1e-4, c2 = 0.9). Everything is one while_loop,
so minimize runs eagerly, under kiln.jit and vmap, and in exported modules.

status: 0 converged (the gradient's `norm` below gtol), 1 maxiter reached, 3 the line search failed
(no step met the Wolfe conditions within line_search_maxiter evaluations; the iteration stops there).
"""
from __future__ import annotations

from typing import Callable, NamedTuple

import numpy as np

from .. import lax
from .. import numpy as knp
from ..core import dtypes
from ..numpy._base import aval
from ..transforms.api import value_and_grad

__all__ = ["minimize", "OptimizeResults"]


class OptimizeResults(NamedTuple):
    """The result of minimize (JAX's fields): the point x, success, status (see the module), fun and jac at x,
    hess_inv (BFGS's inverse-Hessian estimate; None for L-BFGS), the numbers of function and gradient
    evaluations nfev and njev, and of iterations nit."""

    x: object
    success: object
    status: object
    fun: object
    jac: object
    hess_inv: object
    nfev: object
    njev: object
    nit: object


_C1, _C2 = 1e-4, 0.9


def _line_search(value_grad, x, f0, g0, p, maxiter: int):
    """(step, f, g, evaluations, failed): a step along p meeting the strong Wolfe conditions."""
    dtype = aval(x).dtype
    slope0 = knp.dot(g0, p)

    def evaluate(step):
        f, g = value_grad(x + step * p)
        return f, g, knp.dot(g, p)

    zero = np.zeros((), dtype)
    state = dict(i=np.int32(0), done=np.bool_(False), zooming=np.bool_(False), trial=np.ones((), dtype),
                 prev=zero, f_prev=f0, slope_prev=slope0, lo=zero, hi=zero, f_lo=f0, slope_lo=slope0, f_hi=f0,
                 step=zero, f=f0, g=g0)

    def keep_going(s):
        return (~s["done"]) & (s["i"] < maxiter)

    def body(s):
        width = s["hi"] - s["lo"]
        # the zoom's trial: the minimum of the quadratic through (lo, f_lo, slope_lo) and (hi, f_hi), kept
        # inside the middle 80% of the interval (bisection when the quadratic has no usable minimum)
        curvature = s["f_hi"] - s["f_lo"] - s["slope_lo"] * width
        quadratic = s["lo"] - s["slope_lo"] * width * width / (2 * knp.where(curvature != 0, curvature, 1))
        low, high = knp.minimum(s["lo"], s["hi"]), knp.maximum(s["lo"], s["hi"])
        inside = (curvature > 0) & (quadratic > low + 0.1 * (high - low)) & (quadratic < high - 0.1 * (high - low))
        zoom_trial = knp.where(inside, quadratic, (s["lo"] + s["hi"]) / 2)
        step = knp.where(s["zooming"], zoom_trial, s["trial"])
        f, g, slope = evaluate(step)
        armijo_fails = (f > f0 + _C1 * step * slope0) | ~knp.isfinite(f)
        curvature_met = knp.abs(slope) <= -_C2 * slope0
        # bracketing: armijo fails or f rose -> zoom in [prev, step]; Wolfe met -> done;
        # slope >= 0 -> zoom in [step, prev]; else double the step
        rose = armijo_fails | ((s["i"] > 0) & (f >= s["f_prev"]))
        b_done = ~rose & curvature_met
        b_zoom_up = rose
        b_zoom_down = ~rose & ~curvature_met & (slope >= 0)
        # zooming: armijo fails or f >= f_lo -> hi = step; else Wolfe met -> done, or move lo (and maybe hi)
        z_shrink_hi = armijo_fails | (f >= s["f_lo"])
        z_done = ~z_shrink_hi & curvature_met
        z_flip = ~z_shrink_hi & ~curvature_met & (slope * (s["hi"] - s["lo"]) >= 0)
        zooming = s["zooming"]
        done = knp.where(zooming, z_done, b_done)
        new = dict(s)
        new["i"] = s["i"] + 1
        new["done"] = done
        new["zooming"] = zooming | b_zoom_up | b_zoom_down
        lo_b = knp.where(b_zoom_up, s["prev"], step)
        hi_b = knp.where(b_zoom_up, step, s["prev"])
        f_lo_b = knp.where(b_zoom_up, s["f_prev"], f)
        slope_lo_b = knp.where(b_zoom_up, s["slope_prev"], slope)
        f_hi_b = knp.where(b_zoom_up, f, s["f_prev"])
        hi_z = knp.where(z_shrink_hi, step, knp.where(z_flip, s["lo"], s["hi"]))
        f_hi_z = knp.where(z_shrink_hi, f, knp.where(z_flip, s["f_lo"], s["f_hi"]))
        lo_z = knp.where(z_shrink_hi, s["lo"], step)
        f_lo_z = knp.where(z_shrink_hi, s["f_lo"], f)
        slope_lo_z = knp.where(z_shrink_hi, s["slope_lo"], slope)
        new["lo"] = knp.where(zooming, lo_z, knp.where(b_zoom_up | b_zoom_down, lo_b, s["lo"]))
        new["hi"] = knp.where(zooming, hi_z, knp.where(b_zoom_up | b_zoom_down, hi_b, s["hi"]))
        new["f_lo"] = knp.where(zooming, f_lo_z, knp.where(b_zoom_up | b_zoom_down, f_lo_b, s["f_lo"]))
        new["slope_lo"] = knp.where(zooming, slope_lo_z, knp.where(b_zoom_up | b_zoom_down, slope_lo_b, s["slope_lo"]))
        new["f_hi"] = knp.where(zooming, f_hi_z, knp.where(b_zoom_up | b_zoom_down, f_hi_b, s["f_hi"]))
        new["prev"], new["f_prev"], new["slope_prev"] = step, f, slope
        new["trial"] = knp.where(zooming, s["trial"], 2 * step)
        new["step"] = knp.where(done, step, s["step"])
        new["f"] = knp.where(done, f, s["f"])
        new["g"] = knp.where(done, g, s["g"])
        return new

    out = lax.while_loop(keep_going, body, state)
    return out["step"], out["f"], out["g"], out["i"], ~out["done"]


def _options(where: str, options, allowed: dict) -> dict:
    unknown = set(options) - set(allowed)
    if unknown:
        raise TypeError(f"minimize ({where}): unknown options {sorted(unknown)}; the options are {sorted(allowed)}")
    return {**allowed, **options}


def _grad_norm(g, norm):
    return knp.linalg.norm(g, ord=norm)


def _bfgs(value_grad, x0, *, maxiter, norm, gtol, line_search_maxiter):
    n = aval(x0).shape[0]
    dtype = aval(x0).dtype
    f0, g0 = value_grad(x0)
    identity = np.eye(n, dtype=dtype)
    state = dict(k=np.int32(0), x=x0, f=f0, g=g0, H=identity, converged=_grad_norm(g0, norm) < gtol,
                 failed=np.bool_(False), nfev=np.int32(1), ngev=np.int32(1))

    def keep_going(s):
        return (~s["converged"]) & (~s["failed"]) & (s["k"] < maxiter)

    def body(s):
        p = -(s["H"] @ s["g"])
        step, f, g, evals, failed = _line_search(value_grad, s["x"], s["f"], s["g"], p, line_search_maxiter)
        sk = step * p
        yk = g - s["g"]
        rho = 1 / knp.dot(yk, sk)
        left = identity - rho * knp.outer(sk, yk)
        updated = left @ s["H"] @ left.T + rho * knp.outer(sk, sk)
        H = knp.where(knp.isfinite(rho) & (rho > 0), updated, s["H"])
        return dict(k=s["k"] + 1, x=knp.where(failed, s["x"], s["x"] + sk), f=knp.where(failed, s["f"], f),
                    g=knp.where(failed, s["g"], g), H=knp.where(failed, s["H"], H),
                    converged=~failed & (_grad_norm(g, norm) < gtol), failed=failed,
                    nfev=s["nfev"] + evals, ngev=s["ngev"] + evals)

    s = lax.while_loop(keep_going, body, state)
    return s, s["H"]


def _lbfgs(value_grad, x0, *, maxiter, norm, gtol, maxcor, line_search_maxiter):
    n = aval(x0).shape[0]
    dtype = aval(x0).dtype
    m = int(maxcor)
    f0, g0 = value_grad(x0)
    state = dict(k=np.int32(0), x=x0, f=f0, g=g0, S=knp.zeros((m, n), dtype), Y=knp.zeros((m, n), dtype),
                 rho=knp.zeros(m, dtype), gamma=np.ones((), dtype), converged=_grad_norm(g0, norm) < gtol,
                 failed=np.bool_(False), nfev=np.int32(1), ngev=np.int32(1))

    def direction(s):
        """-H g by the two-loop recursion over the stored pairs, newest first (unused slots have rho 0)."""
        newest = (s["k"] - 1) % m

        def backward(j, carry):
            q, alphas = carry
            i = (newest - j) % m
            alpha = s["rho"][i] * knp.dot(s["S"][i], q)
            return q - alpha * s["Y"][i], alphas.at[i].set(alpha)

        q, alphas = lax.fori_loop(0, m, backward, (s["g"], knp.zeros(m, dtype)))
        r = s["gamma"] * q

        def forward(j, r):
            i = (newest - (m - 1) + j) % m
            beta = s["rho"][i] * knp.dot(s["Y"][i], r)
            return r + s["S"][i] * (alphas[i] - beta)

        return -lax.fori_loop(0, m, forward, r)

    def keep_going(s):
        return (~s["converged"]) & (~s["failed"]) & (s["k"] < maxiter)

    def body(s):
        p = direction(s)
        step, f, g, evals, failed = _line_search(value_grad, s["x"], s["f"], s["g"], p, line_search_maxiter)
        sk = step * p
        yk = g - s["g"]
        sy = knp.dot(sk, yk)
        keep = ~failed & (sy > 0)
        slot = s["k"] % m
        return dict(k=s["k"] + 1, x=knp.where(failed, s["x"], s["x"] + sk), f=knp.where(failed, s["f"], f),
                    g=knp.where(failed, s["g"], g),
                    S=knp.where(keep, s["S"].at[slot].set(sk), s["S"]), Y=knp.where(keep, s["Y"].at[slot].set(yk), s["Y"]),
                    rho=knp.where(keep, s["rho"].at[slot].set(1 / knp.where(keep, sy, 1)), s["rho"]),
                    gamma=knp.where(keep, sy / knp.dot(yk, yk), s["gamma"]),
                    converged=~failed & (_grad_norm(g, norm) < gtol), failed=failed,
                    nfev=s["nfev"] + evals, ngev=s["ngev"] + evals)

    return lax.while_loop(keep_going, body, state), None


_BFGS_OPTIONS = {"maxiter": None, "norm": np.inf, "gtol": 1e-5, "line_search_maxiter": 10}
_LBFGS_OPTIONS = {"maxiter": None, "norm": np.inf, "gtol": 1e-5, "maxcor": 10, "line_search_maxiter": 20}


def minimize(fun: Callable, x0, args=(), *, method: str, tol=None, options=None) -> OptimizeResults:
    """scipy.optimize.minimize for method 'BFGS' (and JAX's 'l-bfgs-experimental-do-not-rely-on-this'):
    the minimum of fun(x, *args) from the 1-d x0. options: maxiter (default 200 n), norm (of the gradient,
    default inf), gtol (default 1e-5; tol sets it when options do not, as scipy), line_search_maxiter
    (BFGS 10, L-BFGS 20), and for L-BFGS maxcor (10)."""
    if not isinstance(args, tuple):
        raise TypeError(f"minimize: args must be a tuple; got {type(args).__name__}")
    kind = str(method).lower()
    if kind not in ("bfgs", "l-bfgs-experimental-do-not-rely-on-this"):
        raise ValueError(f"minimize: method {method!r} is not supported; the methods are 'BFGS' and "
                         "'l-bfgs-experimental-do-not-rely-on-this'")
    x0 = knp.asarray(x0)
    if aval(x0).ndim != 1:
        raise ValueError(f"minimize: x0 must be one-dimensional; got shape {aval(x0).shape}")
    if not dtypes.is_float(aval(x0).dtype):
        x0 = x0.astype(np.float64)
    opts = dict(options or {})
    if tol is not None:
        opts.setdefault("gtol", tol)
    opts = _options(method, opts, _BFGS_OPTIONS if kind == "bfgs" else _LBFGS_OPTIONS)
    if opts["maxiter"] is None:
        opts["maxiter"] = 200 * aval(x0).shape[0]
    value_grad = value_and_grad(lambda x: fun(x, *args))
    state, hess_inv = (_bfgs if kind == "bfgs" else _lbfgs)(value_grad, x0, **opts)
    status = knp.where(state["converged"], 0, knp.where(state["failed"], 3, knp.where(state["k"] >= opts["maxiter"], 1,
                                                                                          -1)))
    return OptimizeResults(x=state["x"], success=state["converged"] & ~state["failed"], status=status.astype(np.int32),
                           fun=state["f"], jac=state["g"], hess_inv=hess_inv, nfev=state["nfev"],
                           njev=state["ngev"], nit=state["k"])
