"""kiln.scipy.optimize: minimize with BFGS (and JAX's L-BFGS) and its OptimizeResults (JAX's
jax.scipy.optimize).

Both methods take a 1-d x0, differentiate fun with kiln.value_and_grad, and are JAX's minimize_bfgs and
_minimize_lbfgs with JAX's line_search and _zoom, step for step (docs/scipy.md says where kiln deliberately
differs: tol, and the zoom's width test). Everything is one while_loop, so minimize runs eagerly, under
kiln.jit and vmap, and in exported modules. Statuses: docs/scipy.md (JAX's).
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


def _where(pred, new: dict, old: dict) -> dict:
    return {k: knp.where(pred, new[k], old[k]) for k in new}


def _cubicmin(a, fa, fpa, b, fb, c, fc):
    """The minimizer of the cubic through (a, fa) with slope fpa, (b, fb) and (c, fc) (NaN when none)."""
    C = fpa
    db, dc = b - a, c - a
    denom = (db * dc) ** 2 * (db - dc)
    A = (dc ** 2 * (fb - fa - C * db) - db ** 2 * (fc - fa - C * dc)) / denom
    B = (-dc ** 3 * (fb - fa - C * db) + db ** 3 * (fc - fa - C * dc)) / denom
    return a + (-B + knp.sqrt(B * B - 3.0 * A * C)) / (3.0 * A)


def _quadmin(a, fa, fpa, b, fb):
    db = b - a
    B = (fb - fa - fpa * db) / (db * db)
    return a - fpa / (2.0 * B)


def _zoom(evaluate, wolfe_one, wolfe_two, lo, hi, g0, pass_through, dtype):
    """JAX's _zoom (Nocedal & Wright algorithm 3.6: cubic, then quadratic interpolation, then bisection),
    step for step but for the width test (see below); lo and hi are (step, f, slope) triples."""
    one = np.ones((), dtype)
    state = dict(done=np.bool_(False), failed=np.bool_(False), j=np.int32(0), a_lo=lo[0], phi_lo=lo[1],
                 dphi_lo=lo[2], a_hi=hi[0], phi_hi=hi[1], dphi_hi=hi[2], a_rec=(lo[0] + hi[0]) / 2,
                 phi_rec=(lo[1] + hi[1]) / 2, a_star=one, phi_star=lo[1], dphi_star=lo[2], g_star=g0,
                 nfev=np.int32(0))
    threshold = 1e-10 if dtype.itemsize >= 8 else 1e-5

    def body(s):
        s = dict(s)
        dalpha = s["a_hi"] - s["a_lo"]
        a, b = knp.minimum(s["a_hi"], s["a_lo"]), knp.maximum(s["a_hi"], s["a_lo"])
        cchk, qchk = 0.2 * dalpha, 0.1 * dalpha
        # JAX tests dalpha <= threshold: a bracket with hi below lo (every zoom the bracketing phase starts on
        # a rising slope) fails at once there, and with it the line search; kiln tests the bracket's width
        s["failed"] = s["failed"] | (knp.abs(dalpha) <= threshold)
        cubic = _cubicmin(s["a_lo"], s["phi_lo"], s["dphi_lo"], s["a_hi"], s["phi_hi"], s["a_rec"], s["phi_rec"])
        use_cubic = (s["j"] > 0) & (cubic > a + cchk) & (cubic < b - cchk)
        quad = _quadmin(s["a_lo"], s["phi_lo"], s["dphi_lo"], s["a_hi"], s["phi_hi"])
        use_quad = ~use_cubic & (quad > a + qchk) & (quad < b - qchk)
        a_j = knp.where(use_cubic, cubic, knp.where(use_quad, quad, (s["a_lo"] + s["a_hi"]) / 2))
        phi_j, dphi_j, g_j = evaluate(a_j)
        s["nfev"] = s["nfev"] + 1
        hi_to_j = wolfe_one(a_j, phi_j) | (phi_j >= s["phi_lo"])
        star_to_j = wolfe_two(dphi_j) & ~hi_to_j
        hi_to_lo = (dphi_j * (s["a_hi"] - s["a_lo"]) >= 0) & ~hi_to_j & ~star_to_j
        lo_to_j = ~hi_to_j & ~star_to_j
        s.update(_where(hi_to_j, dict(a_hi=a_j, phi_hi=phi_j, dphi_hi=dphi_j, a_rec=s["a_hi"], phi_rec=s["phi_hi"]), s))
        s["done"] = star_to_j | s["done"]
        s.update(_where(star_to_j, dict(a_star=a_j, phi_star=phi_j, dphi_star=dphi_j, g_star=g_j), s))
        s.update(_where(hi_to_lo, dict(a_hi=s["a_lo"], phi_hi=s["phi_lo"], dphi_hi=s["dphi_lo"], a_rec=s["a_hi"],
                                       phi_rec=s["phi_hi"]), s))
        s.update(_where(lo_to_j & ~hi_to_lo, dict(a_rec=s["a_lo"], phi_rec=s["phi_lo"]), s))
        s.update(_where(lo_to_j, dict(a_lo=a_j, phi_lo=phi_j, dphi_lo=dphi_j), s))
        s["j"] = s["j"] + 1
        s["failed"] = s["failed"] | (s["j"] >= 30)
        return s

    return lax.while_loop(lambda s: ~s["done"] & ~pass_through & ~s["failed"], body, state)


def _line_search(value_grad, x, f0, g0, p, maxiter: int, old_old_fval=None):
    """JAX's line_search (jax.scipy.optimize.line_search; Nocedal & Wright algorithm 3.5, the first trial
    step from the previous decrease when old_old_fval is given, doubling, then _zoom), step for step:
    (step, f, g, evaluations, failed, status) with status 0 passed, 1 zoom failed, 3 maxiter reached."""
    dtype = aval(x).dtype

    def evaluate(t):
        f, g = value_grad(x + t.astype(dtype) * p)
        return f, knp.real(knp.dot(g, p)), g

    dphi0 = knp.real(knp.dot(g0, p))
    if old_old_fval is not None:
        candidate = 1.01 * 2 * (f0 - old_old_fval) / dphi0
        start = knp.where(candidate > 1, np.ones((), dtype), candidate).astype(dtype)
    else:
        start = np.ones((), dtype)

    def wolfe_one(a, phi):
        return phi > f0 + _C1 * a * dphi0

    def wolfe_two(dphi):
        return knp.abs(dphi) <= -_C2 * dphi0

    zero = np.zeros((), dtype)
    state = dict(done=np.bool_(False), failed=np.bool_(False), i=np.int32(1), a_i1=zero, phi_i1=f0, dphi_i1=dphi0,
                 nfev=np.int32(0), a_star=zero, phi_star=f0, dphi_star=dphi0, g_star=g0)

    def body(s):
        s = dict(s)
        a_i = knp.where(s["i"] == 1, start, s["a_i1"] * 2).astype(dtype)
        phi_i, dphi_i, g_i = evaluate(a_i)
        s["nfev"] = s["nfev"] + 1
        to_zoom1 = wolfe_one(a_i, phi_i) | ((phi_i >= s["phi_i1"]) & (s["i"] > 1))
        to_i = wolfe_two(dphi_i) & ~to_zoom1
        to_zoom2 = (dphi_i >= 0) & ~to_zoom1 & ~to_i
        zoom1 = _zoom(evaluate, wolfe_one, wolfe_two, (s["a_i1"], s["phi_i1"], s["dphi_i1"]), (a_i, phi_i, dphi_i),
                      g0, ~to_zoom1, dtype)
        zoom2 = _zoom(evaluate, wolfe_one, wolfe_two, (a_i, phi_i, dphi_i), (s["a_i1"], s["phi_i1"], s["dphi_i1"]),
                      g0, ~to_zoom2, dtype)
        s["nfev"] = s["nfev"] + zoom1["nfev"] + zoom2["nfev"]
        keys = ("a_star", "phi_star", "dphi_star", "g_star")
        s["done"] = to_zoom1 | s["done"]
        s["failed"] = (to_zoom1 & zoom1["failed"]) | s["failed"]
        s.update(_where(to_zoom1, {k: zoom1[k] for k in keys}, s))
        s["done"] = to_i | s["done"]
        s.update(_where(to_i, dict(a_star=a_i, phi_star=phi_i, dphi_star=dphi_i, g_star=g_i), s))
        s["done"] = to_zoom2 | s["done"]
        s["failed"] = (to_zoom2 & zoom2["failed"]) | s["failed"]
        s.update(_where(to_zoom2, {k: zoom2[k] for k in keys}, s))
        s.update(i=s["i"] + 1, a_i1=a_i, phi_i1=phi_i, dphi_i1=dphi_i)
        return s

    s = lax.while_loop(lambda s: ~s["done"] & (s["i"] <= maxiter) & ~s["failed"], body, state)
    status = knp.where(s["failed"], 1, knp.where(s["i"] > maxiter, 3, 0)).astype(np.int32)
    step = s["a_star"]
    if dtype.itemsize < 8:  # JAX's floor on the step below 64 bits (a zero step would stall the iteration)
        step = knp.where(knp.abs(step) < 1e-8, knp.sign(step) * 1e-8, step).astype(dtype)
    return step, s["phi_star"], s["g_star"], s["nfev"], s["failed"] | ~s["done"], status


def _options(where: str, options, allowed: dict) -> dict:
    unknown = set(options) - set(allowed)
    if unknown:
        raise TypeError(f"minimize ({where}): unknown options {sorted(unknown)}; the options are {sorted(allowed)}")
    return {**allowed, **options}


def _grad_norm(g, norm):
    return knp.linalg.norm(g, ord=norm)


def _bfgs(value_grad, x0, *, maxiter, norm, gtol, line_search_maxiter):
    """JAX's minimize_bfgs step for step (a failed line search still moves x by its last step)."""
    n = aval(x0).shape[0]
    dtype = aval(x0).dtype
    if maxiter is None:
        maxiter = 200 * n
    f0, g0 = value_grad(x0)
    identity = np.eye(n, dtype=dtype)
    state = dict(k=np.int32(0), x=x0, f=f0, g=g0, H=identity, converged=_grad_norm(g0, norm) < gtol,
                 failed=np.bool_(False), nfev=np.int32(1), old_old_fval=f0 + knp.linalg.norm(g0) / 2,
                 ls_status=np.int32(0))

    def keep_going(s):
        return (~s["converged"]) & (~s["failed"]) & (s["k"] < maxiter)

    def body(s):
        p = -(s["H"] @ s["g"])
        step, f, g, evals, failed, ls_status = _line_search(value_grad, s["x"], s["f"], s["g"], p,
                                                            line_search_maxiter, s["old_old_fval"])
        sk = step * p
        yk = g - s["g"]
        rho = 1 / knp.dot(yk, sk)
        w = identity - rho * knp.outer(sk, yk)
        updated = w @ s["H"] @ w.T + rho * knp.outer(sk, sk)
        return dict(k=s["k"] + 1, x=s["x"] + sk, f=f, g=g, H=knp.where(knp.isfinite(rho), updated, s["H"]),
                    converged=_grad_norm(g, norm) < gtol, failed=failed, nfev=s["nfev"] + evals,
                    old_old_fval=s["f"], ls_status=ls_status)

    s = lax.while_loop(keep_going, body, state)
    status = knp.where(s["converged"], 0, knp.where(s["k"] == maxiter, 1,
                                                     knp.where(s["failed"], 2 + s["ls_status"], -1)))
    return s, s["H"], status


def _lbfgs(value_grad, x0, *, maxiter, norm, maxcor, ftol, gtol, maxfun, maxgrad, maxls):
    """JAX's _minimize_lbfgs step for step (history rolled, newest last)."""
    n = aval(x0).shape[0]
    dtype = aval(x0).dtype
    m = int(maxcor)
    if maxiter is None and maxfun is None and maxgrad is None:
        maxiter = 200 * n
    maxiter, maxfun, maxgrad = (np.inf if v is None else v for v in (maxiter, maxfun, maxgrad))
    f0, g0 = value_grad(x0)
    state = dict(k=np.int32(0), x=x0, f=f0, g=g0, S=knp.zeros((m, n), dtype), Y=knp.zeros((m, n), dtype),
                 rho=knp.zeros(m, dtype), gamma=np.ones((), dtype), converged=np.bool_(False),
                 failed=np.bool_(False), nfev=np.int32(1), status=np.int32(0))

    def direction(s):
        """JAX's two-loop recursion over the min(k, m) newest pairs."""
        used = knp.minimum(s["k"], m)

        def backward(j, carry):
            q, alphas = carry
            i = m - 1 - j
            alpha = s["rho"][i] * knp.real(knp.dot(knp.conj(s["S"][i]), q)).astype(dtype)
            return q - alpha * knp.conj(s["Y"][i]), alphas.at[i].set(alpha)

        q, alphas = lax.fori_loop(0, used, backward, (-knp.conj(s["g"]), knp.zeros(m, dtype)))
        q = s["gamma"] * q

        def forward(j, q):
            i = m - used + j
            beta = s["rho"][i] * knp.real(knp.dot(s["Y"][i], q)).astype(dtype)
            return q + (alphas[i] - beta) * s["S"][i]

        return lax.fori_loop(0, used, forward, q)

    def keep_going(s):
        return (~s["converged"]) & (~s["failed"])

    def body(s):
        p = direction(s)
        step, f, g, evals, failed, _ = _line_search(value_grad, s["x"], s["f"], s["g"], p, maxls)
        sk = step.astype(dtype) * p
        yk = g - s["g"]
        sy = knp.real(knp.dot(yk, sk))
        status = knp.where(s["f"] - f < ftol, 4, 0)
        status = knp.where(s["nfev"] >= maxgrad, 3, status)
        status = knp.where(s["nfev"] >= maxfun, 2, status)
        status = knp.where(s["k"] >= maxiter, 1, status)
        status = knp.where(failed, 5, status).astype(np.int32)
        converged = _grad_norm(g, norm) < gtol
        return dict(k=s["k"] + 1, x=s["x"] + sk, f=f, g=g,
                    S=knp.roll(s["S"], -1, axis=0).at[-1].set(sk), Y=knp.roll(s["Y"], -1, axis=0).at[-1].set(yk),
                    rho=knp.roll(s["rho"], -1).at[-1].set((1 / sy).astype(dtype)),
                    gamma=(sy / knp.real(knp.dot(knp.conj(yk), yk))).astype(dtype), converged=converged,
                    failed=(status > 0) & ~converged, nfev=s["nfev"] + evals,
                    status=knp.where(converged, 0, status).astype(np.int32))

    s = lax.while_loop(keep_going, body, state)
    return s, None, s["status"]


_BFGS_OPTIONS = {"maxiter": None, "norm": np.inf, "gtol": 1e-5, "line_search_maxiter": 10}
_LBFGS_OPTIONS = {"maxiter": None, "norm": np.inf, "maxcor": 10, "ftol": 2.220446049250313e-09, "gtol": 1e-5,
                  "maxfun": None, "maxgrad": None, "maxls": 20}


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
    if dtypes.is_complex(aval(x0).dtype):  # JAX's L-BFGS takes complex x0; kiln differentiates real inputs only
        raise TypeError(f"minimize: x0 must be real; got {aval(x0).dtype} (kiln's gradients are of real inputs: "
                        "minimize over the real and imaginary parts stacked)")
    if not dtypes.is_float(aval(x0).dtype):
        x0 = x0.astype(np.float64)
    opts = dict(options or {})
    if tol is not None:
        opts.setdefault("gtol", tol)
    opts = _options(method, opts, _BFGS_OPTIONS if kind == "bfgs" else _LBFGS_OPTIONS)
    value_grad = value_and_grad(lambda x: fun(x, *args))
    state, hess_inv, status = (_bfgs if kind == "bfgs" else _lbfgs)(value_grad, x0, **opts)
    return OptimizeResults(x=state["x"], success=state["converged"] & ~state["failed"], status=status.astype(np.int32),
                           fun=state["f"], jac=state["g"], hess_inv=hess_inv, nfev=state["nfev"],
                           njev=state["nfev"], nit=state["k"])
