"""jax.experimental.ode.odeint over kiln: an adaptive Dormand-Prince (RK45) solver with dense output, and
reverse-mode derivatives by the adjoint method (the augmented system solved backwards in time), so gradients
flow to the initial state, the times and the extra arguments without differentiating through the loop.

    ys = odeint(func, y0, t, *args, rtol=1.4e-8, atol=1.4e-8, mxstep=inf, hmax=inf)

`func(y, t, *args)` gives dy/dt for a pytree y; `t` is a 1-D array of increasing times (t[0] is y0's time);
the result stacks y at each time on a leading axis. Traced values `func` closes over are treated as constants
by the adjoint: pass what gradients must reach through `*args` (JAX hoists them with closure_convert).
"""
from __future__ import annotations

import math

import numpy as np

import kiln.lax as lax
import kiln.numpy as knp
from kiln.core.trace import get_aval
from kiln.core.pytree import tree_flatten, tree_map, tree_unflatten
from kiln.flatten_util import ravel_pytree
from kiln.transforms.api import vjp
from kiln.transforms.custom import custom_vjp

__all__ = ["odeint"]

# Dormand-Prince 5(4): nodes, stage coefficients, 5th-order solution, error (5th - 4th) and the dense-output
# weights of the midpoint (Shampine 1986), as in scipy's RK45 and JAX's odeint.
_ALPHA = (1 / 5, 3 / 10, 4 / 5, 8 / 9, 1.0, 1.0)
_BETA = ((1 / 5,),
         (3 / 40, 9 / 40),
         (44 / 45, -56 / 15, 32 / 9),
         (19372 / 6561, -25360 / 2187, 64448 / 6561, -212 / 729),
         (9017 / 3168, -355 / 33, 46732 / 5247, 49 / 176, -5103 / 18656),
         (35 / 384, 0.0, 500 / 1113, 125 / 192, -2187 / 6784, 11 / 84))
_C_SOL = (35 / 384, 0.0, 500 / 1113, 125 / 192, -2187 / 6784, 11 / 84, 0.0)
_C_ERR = (35 / 384 - 1951 / 21600, 0.0, 500 / 1113 - 22642 / 50085, 125 / 192 - 451 / 720,
          -2187 / 6784 + 12231 / 42400, 11 / 84 - 649 / 6300, -1 / 60)
_C_MID = (6025192743 / 30085553152 / 2, 0.0, 51252292925 / 65400821598 / 2, -2691868925 / 45128329728 / 2,
          187940372067 / 1594534317056 / 2, -1776094331 / 19743644256 / 2, 11237099 / 235043384 / 2)


def _rms(x):
    return knp.sqrt(knp.mean(x * x))


def _like(values, x):
    """A constant of x's dtype and weak type (a weakly typed solve stays weak)."""
    return lax.prims.convert.bind(knp.asarray(np.asarray(values), x.dtype), new_dtype=x.dtype,
                                  weak_type=get_aval(x).weak_type)


def _weighted(coeffs, k):  # sum_i coeffs[i] * k[i] over the stages, as one product
    return _like(coeffs, k) @ k


def _rk_step(fun, y0, f0, t0, dt):
    """One Dormand-Prince step: (y1, f1 = fun(y1), the error estimate, the 7 stage derivatives k)."""
    k = [f0]
    for alpha, beta in zip(_ALPHA, _BETA):
        yi = y0 + dt * sum(b * ki for b, ki in zip(beta, k) if b != 0.0)
        k.append(fun(yi, t0 + alpha * dt))
    k = knp.stack(k)
    return y0 + dt * _weighted(_C_SOL, k), k[-1], dt * _weighted(_C_ERR, k), k


def _initial_step(fun, t0, y0, order, rtol, atol, f0):
    """Hairer, Norsett and Wanner's starting step (Solving ODEs I, II.4)."""
    scale = atol + knp.abs(y0) * rtol
    d0, d1 = _rms(y0 / scale), _rms(f0 / scale)
    h0 = knp.where((d0 < 1e-5) | (d1 < 1e-5), 1e-6, 0.01 * d0 / d1)
    f1 = fun(y0 + h0 * f0, t0 + h0)
    d2 = _rms((f1 - f0) / scale) / h0
    h1 = knp.where((d1 <= 1e-15) & (d2 <= 1e-15), knp.maximum(1e-6, h0 * 1e-3),
                   (0.01 / knp.maximum(d1, d2)) ** (1.0 / (order + 1.0)))
    return knp.minimum(100.0 * h0, h1)


def _error_ratio(err, rtol, atol, y0, y1):
    return _rms(err / (atol + rtol * knp.maximum(knp.abs(y0), knp.abs(y1))))


def _next_step(dt, ratio, safety=0.9, ifactor=10.0, dfactor=0.2, order=5.0):
    dfactor = knp.where(ratio < 1, 1.0, dfactor)
    factor = knp.minimum(ifactor, knp.maximum(ratio ** (-1.0 / order) * safety, dfactor))
    return knp.where(ratio == 0, dt * ifactor, dt * factor)


def _dense_fit(y0, y1, k, dt):
    """Coefficients (highest power first) of the quartic through y0 (s=0), the midpoint estimate (s=1/2) and y1
    (s=1) with the slopes dt*k[0] and dt*k[-1] at the ends, s the position in the step."""
    y_mid = y0 + dt * _weighted(_C_MID, k)
    dy0, dy1 = dt * k[0], dt * k[-1]
    a = -2.0 * dy0 + 2.0 * dy1 - 8.0 * y0 - 8.0 * y1 + 16.0 * y_mid
    b = 5.0 * dy0 - 3.0 * dy1 + 18.0 * y0 + 14.0 * y1 - 32.0 * y_mid
    c = -4.0 * dy0 + dy1 - 11.0 * y0 - 5.0 * y1 + 16.0 * y_mid
    return knp.stack([a, b, c, dy0, y0])


def _dense_eval(coeffs, s):
    out = coeffs[0]
    for i in range(1, 5):
        out = out * s + coeffs[i]
    return out


def _solve(fun, y0, ts, rtol, atol, mxstep, hmax):
    """y (flat) at every time of ts (ts[0] is y0's)."""
    f0 = fun(y0, ts[0])
    dt = knp.clip(_initial_step(fun, ts[0], y0, 4, rtol, atol, f0), 0.0, hmax)
    coeffs = knp.stack([y0] * 5) * _like([0.0, 0.0, 0.0, 0.0, 1.0], y0)[:, None]
    max_steps = np.iinfo(np.int32).max if math.isinf(mxstep) else int(mxstep)

    def to_target(state, target):
        def cond(s):
            _, _, t, dt, _, _, i = s
            return (t < target) & (i < max_steps) & (dt > 0)

        def body(s):
            y, f, t, dt, last_t, coeffs, i = s
            y1, f1, err, k = _rk_step(fun, y, f, t, dt)
            ratio = _error_ratio(err, rtol, atol, y, y1)
            new_coeffs = _dense_fit(y, y1, k, dt)
            new_dt = knp.clip(_next_step(dt, ratio), 0.0, hmax)
            accept = ratio <= 1.0
            keep = lambda new, old: knp.where(accept, new, old)
            return (keep(y1, y), keep(f1, f), keep(t + dt, t), new_dt, keep(t, last_t),
                    keep(new_coeffs, coeffs), i + 1)

        state = lax.while_loop(cond, body, (*state, knp.asarray(0, np.int32)))[:-1]
        y, _, t, _, last_t, coeffs = state
        s = (target - last_t) / (t - last_t)
        return state, _dense_eval(coeffs, s)

    state = (y0, f0, ts[0], dt, ts[0], coeffs)
    _, ys = lax.scan(to_target, state, ts[1:])
    return knp.concatenate([y0[None], ys])


def odeint(func, y0, t, *args, rtol=1.4e-8, atol=1.4e-8, mxstep=math.inf, hmax=math.inf):
    """y(t) for dy/dt = func(y, t, *args), y(t[0]) = y0 (a pytree), at each time of the increasing 1-D array t:
    a tree like y0 whose leaves gain a leading axis of len(t). Differentiable in y0, t and args (adjoint)."""
    for name, value in (("rtol", rtol), ("atol", atol), ("mxstep", mxstep), ("hmax", hmax)):
        if not isinstance(value, (int, float, np.number)):
            raise TypeError(f"odeint: {name} must be a Python or numpy number (a static value), got {value!r}; "
                            "pass traced values through *args")
    t = knp.asarray(t)
    if t.ndim != 1:
        raise ValueError(f"odeint: t must be a 1-D array of times, got shape {tuple(t.shape)}")
    flat_y0, unravel = ravel_pytree(y0)
    flat_y0 = knp.asarray(flat_y0)
    if not knp.issubdtype(flat_y0.dtype, knp.floating):
        flat_y0 = flat_y0.astype(np.float32)
    if get_aval(flat_y0).weak_type:
        # a weakly typed y0 (knp.array([1.0, 0.0]): numpy's float64, weak) takes the dtype the dynamics give
        # it, as a loop's weak initial carry does (JAX's float32 y0 with float32 dynamics stays float32); where
        # the dynamics compute with weak values only, the solve keeps it weak (custom_vjp keeps weak types)
        from kiln.staging import make_jaxpr

        out = make_jaxpr(lambda y, tt, *a: ravel_pytree(func(unravel(y), tt, *a))[0])(flat_y0, t[0], *args)
        out = out.out_avals[0]
        if out.shape == flat_y0.shape and knp.issubdtype(out.dtype, knp.floating) and out.dtype != flat_y0.dtype:
            flat_y0 = flat_y0.astype(out.dtype)
    if t.dtype != flat_y0.dtype and (not knp.issubdtype(t.dtype, knp.floating) or get_aval(t).weak_type):
        t = t.astype(flat_y0.dtype)  # integer or weakly typed times (knp.linspace) take y's dtype
    dtype = flat_y0.dtype

    def flat_func(y, tt, *a):
        out, _ = ravel_pytree(func(unravel(y), tt, *a))
        out = knp.asarray(out)
        return out if out.dtype == dtype else out.astype(dtype)

    ys = _odeint(flat_func, rtol, atol, mxstep, hmax, flat_y0, t, *args)
    return _unravel_rows(unravel, ys)


def _unravel_rows(unravel, ys):
    """The tree of y0 with each leaf stacked over the rows of ys."""
    rows = [unravel(ys[i]) for i in range(ys.shape[0])]
    leaves = [tree_flatten(r)[0] for r in rows]
    treedef = tree_flatten(rows[0])[1]
    return tree_unflatten(treedef, [knp.stack([lv[j] for lv in leaves]) for j in range(len(leaves[0]))])


def _odeint(func, rtol, atol, mxstep, hmax, y0, ts, *args):
    @custom_vjp
    def solve(y0, ts, *args):
        return _solve(lambda y, t: func(y, t, *args), y0, ts, rtol, atol, mxstep, hmax)

    def fwd(y0, ts, *args):
        ys = solve(y0, ts, *args)
        return ys, (ys, ts, args)

    def bwd(res, g):
        ys, ts, args = res

        def aug_dynamics(state, t):
            # backwards in time: s = -t; d/ds of (y, a, t_bar, args_bar) with a = y_bar the adjoint
            y, y_bar = state[0], state[1]
            y_dot, pullback = vjp(lambda y, t, *a: func(y, t, *a), y, -t, *args)
            cts = pullback(y_bar)
            return (-y_dot, *cts)

        def aug_flat(fl, t):
            out, _ = ravel_pytree(aug_dynamics(unravel_aug(fl), t))
            return out

        n = ts.shape[0]
        args_bar = tree_map(knp.zeros_like, args)
        _, unravel_aug = ravel_pytree((ys[-1], g[-1], knp.zeros((), ts.dtype), args_bar))

        def step(carry, xs):
            y_bar, t0_bar, args_bar = carry
            y_i, t_i, t_prev, g_i, g_prev = xs
            t_bar = knp.dot(func(y_i, t_i, *args), g_i)
            t0_bar = t0_bar - t_bar
            start, _ = ravel_pytree((y_i, y_bar, t0_bar, args_bar))
            path = _solve(aug_flat, start, -knp.stack([t_i, t_prev]), rtol, atol, mxstep, hmax)
            _, y_bar, t0_bar, args_bar = unravel_aug(path[-1])
            return (y_bar + g_prev, t0_bar, args_bar), t_bar

        idx = slice(n - 1, 0, -1)
        xs = (ys[idx], ts[idx], ts[n - 2::-1] if n > 1 else ts[:0], g[idx], g[n - 2::-1] if n > 1 else g[:0])
        (y_bar, t0_bar, args_bar), rev_ts_bar = lax.scan(step, (g[-1], knp.zeros((), ts.dtype), args_bar), xs)
        ts_bar = knp.concatenate([t0_bar[None], rev_ts_bar[::-1]])
        return (y_bar, ts_bar, *args_bar)

    solve.defvjp(fwd, bwd)
    return solve(y0, ts, *args)
