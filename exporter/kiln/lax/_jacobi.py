"""Jacobi rotations in the round-robin (parallel) ordering, for kiln.lax.linalg's eigh and svd.

A round applies n/2 disjoint plane rotations at once. Positions are laid out as (2, n/2): round k
pairs position (0, i) with (1, i), so a pair's partner is the view `rev` along the first axis and a
whole round is a few elementwise kernels over views of one materialized array (no per-rotation or
per-element dispatch). Between rounds a fixed permutation (the circle method: position (0, 0) stays,
the others move one step around a ring) brings the next pairs together; it is one gather with a
constant index, and after the n - 1 rounds of a sweep the positions are back in their original order.

Arrays keep their batch axes last here, so that the gather (whose indexed axes come first in its
result) needs no transpose. A sweep is repeated until no pair was above its threshold during a whole
sweep, or MAX_SWEEPS sweeps have run.

- two_sided: for a symmetric matrix A, A <- J^T A J on the rows and columns of each pair, the rotated
  pair's off-diagonal entry set to 0 and its diagonal entries to a_pp - t a_pq and a_qq + t a_pq
  (Golub and Van Loan, Algorithm 8.5.2); a pair rotates when |a_pq| > eps sqrt(|a_pp a_qq|), the
  criterion that keeps eigenvalues' relative accuracy (Demmel and Veselic).
- one_sided: for the columns of W (stored as rows), the rotation that makes a pair orthogonal
  (Hestenes); a pair rotates when |w_p . w_q| > sqrt(m) eps |w_p| |w_q| (LAPACK's gesvj criterion).
"""
from __future__ import annotations

import numpy as np

from ..core.trace import get_aval
from . import api
from .composite import composite_primitive
from .control_flow import fori_loop, while_loop
from .structural_prims import rev
from .structural_prims import slice as slice_

MAX_SWEEPS = 40
_I32 = np.dtype(np.int32)


def _shape(x):
    return get_aval(x).shape


def _dtype(x):
    return get_aval(x).dtype


def _full(shape, value, dtype):
    return api.broadcast_in_dim(np.asarray(value, dtype), shape, ())


def _part(x, index, axis):
    """x's entry `index` along axis, that axis dropped (a strided view of x)."""
    shape = _shape(x)
    starts, limits = [0] * len(shape), list(shape)
    starts[axis], limits[axis] = index, index + 1
    return api.reshape(slice_(x, tuple(starts), tuple(limits)), shape[:axis] + shape[axis + 1:])


def _spread(v, shape, axes):
    """v broadcast to shape, v's axes going to `axes` and its trailing batch axes to shape's last ones."""
    nb = len(_shape(v)) - len(axes)
    return api.broadcast_in_dim(v, shape, tuple(axes) + tuple(range(len(shape) - nb, len(shape))))


def round_robin_order(n: int) -> np.ndarray:
    """The static permutation of the n positions (flattened from (2, n/2)) from one round to the next."""
    h = n // 2
    if h <= 1:
        return np.arange(n)
    top, bottom = list(range(h)), list(range(h, n))
    return np.array(top[:1] + bottom[:1] + top[1:h - 1] + bottom[1:] + top[h - 1:])


def _permute(x, axes_count: int):
    """x (2, h, ..., *batch) with its first axis pair (and, with axes_count=2, the next pair too) moved to
    the next round's positions, flattened to (n, ...) or (n, n, ...): the loop carries the gather's
    result as it is, and the next round reshapes it as a view."""
    shape = _shape(x)
    n = shape[0] * shape[1]
    order = round_robin_order(n)
    if axes_count == 1:
        flat = api.reshape(x, (n,) + shape[2:])
        index = order[:, None]
        axes = (0,)
    else:
        flat = api.reshape(x, (n, n) + shape[4:])
        index = np.stack(np.meshgrid(order, order, indexing="ij"), axis=-1)
        axes = (0, 1)
    return api.gather(flat, index.astype(np.int32), axes, mode="promise_in_bounds")


def _signed(s, shape, axes):
    """s spread over the pairs' axes with the sign of the rotation: -s for the first member, +s for the
    second, so that x_p <- c x_p - s x_q and x_q <- s x_p + c x_q."""
    member_axis, pair_axis = axes
    spread = _spread(s, shape, (pair_axis,))
    member = api.broadcasted_iota(_I32, shape, member_axis)
    return api.select(api.eq(member, 0), api.neg(spread), spread)


def rotation(theta, active):
    """(c, s, t) of the rotation with tangent t = sign(theta) / (|theta| + sqrt(1 + theta^2)) (the
    smaller root of t^2 + 2 theta t - 1 = 0), computed without overflow; (1, 0, 0) where not active."""
    dtype = _dtype(theta)
    ones = _full(_shape(theta), 1, dtype)
    big = api.gt(api.abs(theta), 1)
    inverse = api.div(ones, api.select(big, theta, ones))
    root_big = api.mul(api.abs(theta), api.add(ones, api.sqrt(api.add(ones, api.mul(inverse, inverse)))))
    root_small = api.add(api.abs(theta), api.sqrt(api.add(ones, api.mul(theta, theta))))
    sign = api.select(api.ge(theta, 0), ones, api.neg(ones))
    t = api.select(active, api.div(sign, api.select(big, root_big, root_small)), _full(_shape(theta), 0, dtype))
    c = api.div(ones, api.sqrt(api.add(ones, api.mul(t, t))))
    return c, api.mul(t, c), t


def _sweeps(round_fn, carry, n: int, scalars_shape, dtype):
    """Sweeps of n - 1 rounds of round_fn(carry, scalars) -> (carry, scalars) until a sweep rotated no
    pair (the last row of scalars, 1 where a pair rotated during the sweep, stays 0) or MAX_SWEEPS have
    run."""
    def sweep(state):
        count, _, values = state
        cleared = _full(scalars_shape, 0, dtype)
        values, scalars = fori_loop(0, n - 1, lambda _, inner: round_fn(*inner), (values, cleared))
        return count + np.int32(1), scalars, values

    def more(state):
        count, scalars, _ = state
        flags = _part(scalars, scalars_shape[0] - 1, 0)
        rotated = api.gt(api.reduce_max(flags, tuple(range(len(scalars_shape) - 1))), 0)
        return api.select(api.lt(count, np.int32(MAX_SWEEPS)), rotated, False)

    start = (np.int32(0), _full(scalars_shape, 1, dtype), carry)
    return while_loop(more, sweep, start)[2]


def _stacked(rows_values):
    """The rows of one (k, ...) array from k expressions of that same shape (one kernel writes them all;
    the rotation kernels read its rows as views)."""
    shape = _shape(rows_values[0])
    which = api.broadcasted_iota(_I32, shape, 0)
    out = rows_values[-1]
    for k in range(len(rows_values) - 2, -1, -1):
        out = api.select(api.eq(which, k), rows_values[k], out)
    return out


def _pair_rotation(p, q, pq, threshold_scale, flags):
    """The rotation scalars of every pair, computed in the stacked shape (k, h, *batch): from the pairs'
    p = a_pp (|w_p|^2), q = a_qq (|w_q|^2), pq = a_pq (w_p . w_q) and the threshold
    |pq| > threshold_scale sqrt(|p|) sqrt(|q|). Returns (c, s, t, active, flags | active)."""
    dtype = _dtype(p)
    zeros, ones = _full(_shape(p), 0, dtype), _full(_shape(p), 1, dtype)
    threshold = api.mul(threshold_scale, api.mul(api.sqrt(api.abs(p)), api.sqrt(api.abs(q))))
    active = api.gt(api.abs(pq), threshold)
    safe_pq = api.select(active, pq, ones)
    c, s, t = rotation(api.div(api.sub(q, p), api.mul(2, safe_pq)), active)
    return c, s, t, api.select(active, ones, zeros), api.select(active, ones, flags)


def _two_sided_graph(a, v):
    """two_sided as lax operations (what a compiled module runs)."""
    shape, dtype = _shape(a), _dtype(a)
    n, batch = shape[0], shape[2:]
    h = n // 2
    eps = float(np.finfo(dtype).eps)
    quad = (2, h, 2, h) + batch
    rows = (2, h, n) + batch
    stack = (6, h) + batch  # c, s, new a_pp, new a_qq, active, rotated during the sweep

    i = np.arange(h)
    pair_entries = np.stack([np.stack([i, i], -1), np.stack([i + h, i + h], -1), np.stack([i, i + h], -1)])

    def round_fn(values, scalars):
        a4, vt = api.reshape(values[0], quad), api.reshape(values[1], rows)
        same_column = api.eq(api.broadcasted_iota(_I32, quad, 1), api.broadcasted_iota(_I32, quad, 3))
        entries = api.gather(values[0], pair_entries.astype(np.int32), (0, 1), mode="promise_in_bounds")
        app, aqq, apq = (_spread(_part(entries, k, 0), stack, (1,)) for k in range(3))  # a_pp, a_qq, a_pq (h, ...)
        c, s, t, active, flags = _pair_rotation(app, aqq, apq, eps, _spread(_part(scalars, 5, 0), stack, (1,)))
        moved = api.mul(t, apq)
        scalars = _stacked([c, s, api.sub(app, moved), api.add(aqq, moved), active, flags])
        c, s, new_p, new_q, active = (_part(scalars, k, 0) for k in range(5))
        c_r, c_c = _spread(c, quad, (1,)), _spread(c, quad, (3,))
        s_r, s_c = _signed(s, quad, (0, 1)), _signed(s, quad, (2, 3))
        rotated = api.add(api.add(api.mul(api.mul(c_r, c_c), a4), api.mul(api.mul(s_r, c_c), rev(a4, (0,)))),
                          api.add(api.mul(api.mul(c_r, s_c), rev(a4, (2,))), api.mul(api.mul(s_r, s_c), rev(a4, (0, 2)))))
        row_member = api.broadcasted_iota(_I32, quad, 0)
        same_member = api.eq(row_member, api.broadcasted_iota(_I32, quad, 2))
        new_diagonal = api.select(api.eq(row_member, 0), _spread(new_p, quad, (1,)), _spread(new_q, quad, (1,)))
        pair_entry = api.select(api.gt(_spread(active, quad, (1,)), 0), _full(quad, 0, dtype), rotated)
        a4 = api.select(same_column, api.select(same_member, new_diagonal, pair_entry), rotated)
        vt = api.add(api.mul(_spread(c, rows, (1,)), vt), api.mul(_signed(s, rows, (0, 1)), rev(vt, (0,))))
        return (_permute(a4, 2), _permute(vt, 1)), scalars

    a, vt = _sweeps(round_fn, (a, v), n, stack, dtype)
    diagonal = api.eq(api.broadcasted_iota(_I32, shape, 0), api.broadcasted_iota(_I32, shape, 1))
    return api.reduce_sum(api.select(diagonal, a, _full(shape, 0, dtype)), (1,)), vt


def _one_sided_graph(wt, *, rows: int):
    """one_sided as lax operations (what a compiled module runs)."""
    shape, dtype = _shape(wt), _dtype(wt)
    n, k, batch = shape[0], shape[1], shape[2:]
    h = n // 2
    tol = float(np.sqrt(max(rows, 1)) * np.finfo(dtype).eps)
    pairs = (2, h, k) + batch
    products_shape = (3, h, rows) + batch
    stack = (3, h) + batch  # c, s, rotated during the sweep

    def round_fn(w, scalars):
        w = api.reshape(w, pairs)
        head = slice_(w, (0,) * len(pairs), (2, h, rows) + batch)
        first = api.broadcast_in_dim(_part(head, 0, 0), products_shape, tuple(range(1, len(products_shape))))
        second = api.broadcast_in_dim(_part(head, 1, 0), products_shape, tuple(range(1, len(products_shape))))
        which = api.broadcasted_iota(_I32, products_shape, 0)
        products = api.select(api.eq(which, 0), api.mul(first, first),
                              api.select(api.eq(which, 1), api.mul(second, second), api.mul(first, second)))
        sums = api.reduce_sum(products, (2,))
        alpha, beta, gamma = (_spread(_part(sums, i, 0), stack, (1,)) for i in range(3))
        c, s, _, _, flags = _pair_rotation(alpha, beta, gamma, tol, _spread(_part(scalars, 2, 0), stack, (1,)))
        scalars = _stacked([c, s, flags])
        c, s = _part(scalars, 0, 0), _part(scalars, 1, 0)
        w = api.add(api.mul(_spread(c, pairs, (1,)), w), api.mul(_signed(s, pairs, (0, 1)), rev(w, (0,))))
        return _permute(w, 1), scalars

    return _sweeps(round_fn, wt, n, stack, dtype)


# ---- eager evaluation: the same rounds with numpy -----------------------------------------------------
# Evaluating the traced rounds equation by equation costs ~35 us of interpretation per equation
# (seconds for n = 64); these mirror _two_sided_graph and _one_sided_graph step for step on whole numpy
# arrays (same formulas, order and stopping rule), so eager results equal compiled ones up to rounding.

def _rotation_numpy(theta, active):
    with np.errstate(all="ignore"):
        big = np.abs(theta) > 1
        inverse = 1 / np.where(big, theta, 1)
        root_big = np.abs(theta) * (1 + np.sqrt(1 + inverse * inverse))
        root_small = np.abs(theta) + np.sqrt(1 + theta * theta)
        sign = np.where(theta >= 0, 1, -1).astype(theta.dtype)
        t = np.where(active, sign / np.where(big, root_big, root_small), 0).astype(theta.dtype)
        c = (1 / np.sqrt(1 + t * t)).astype(theta.dtype)
    return c, (t * c).astype(theta.dtype), t


def _member_signs(dtype, ndim):
    """-1 for the first member of each pair, +1 for the second, shaped to broadcast along axis 0."""
    return np.array([-1, 1], dtype).reshape((2,) + (1,) * (ndim - 1))


def _sweeps_numpy(round_fn, values, n, flags_shape):
    count, rotated = 0, True
    while count < MAX_SWEEPS and rotated:
        flags = np.zeros(flags_shape, bool)
        for _ in range(n - 1):
            values, active = round_fn(values)
            flags |= active
        count, rotated = count + 1, bool(flags.any())
    return values


def _two_sided_numpy(a, v):
    n, batch, dtype = a.shape[0], a.shape[2:], a.dtype
    h = n // 2
    eps = np.finfo(dtype).eps
    order = round_robin_order(n)
    i = np.arange(h)
    along = (1, h) + batch

    def round_fn(values):
        a, vt = values
        app, aqq, apq = a[i, i], a[i + h, i + h], a[i, i + h]
        with np.errstate(all="ignore"):
            active = np.abs(apq) > eps * (np.sqrt(np.abs(app)) * np.sqrt(np.abs(aqq)))
            theta = (aqq - app) / (2 * np.where(active, apq, 1))
        c, s, t = _rotation_numpy(theta, active)
        moved = t * apq
        c2, s2 = c.reshape(along), s.reshape(along) * _member_signs(dtype, 2 + len(batch))
        c_r, s_r = c2[:, :, None, None], s2[:, :, None, None]
        c_c, s_c = c2[None, None], s2[None, None]
        a4 = a.reshape((2, h, 2, h) + batch)
        with np.errstate(all="ignore"):
            rotated = (c_r * c_c * a4 + s_r * c_c * a4[::-1] + c_r * s_c * a4[:, :, ::-1]
                       + s_r * s_c * a4[::-1, :, ::-1]).astype(dtype)
            rotated[0, i, 0, i] = app - moved
            rotated[1, i, 1, i] = aqq + moved
        rotated[0, i, 1, i] = np.where(active, 0, rotated[0, i, 1, i])
        rotated[1, i, 0, i] = np.where(active, 0, rotated[1, i, 0, i])
        vt3 = vt.reshape((2, h, n) + batch)
        with np.errstate(all="ignore"):
            vt3 = (c2[:, :, None] * vt3 + s2[:, :, None] * vt3[::-1]).astype(dtype)
        a = rotated.reshape(a.shape)[order][:, order]
        return (a, vt3.reshape(vt.shape)[order]), active

    a, vt = _sweeps_numpy(round_fn, (np.asarray(a), np.asarray(v)), n, (h,) + batch)
    return [np.ascontiguousarray(a[np.arange(n), np.arange(n)]), vt]


def _one_sided_numpy(wt, *, rows):
    n, k, batch, dtype = wt.shape[0], wt.shape[1], wt.shape[2:], wt.dtype
    h = n // 2
    tol = np.sqrt(max(rows, 1)) * np.finfo(dtype).eps
    order = round_robin_order(n)

    def round_fn(w):
        w3 = w.reshape((2, h, k) + batch)
        first, second = w3[0, :, :rows], w3[1, :, :rows]
        with np.errstate(all="ignore"):
            alpha, beta, gamma = (np.sum(p, axis=1) for p in (first * first, second * second, first * second))
            active = np.abs(gamma) > tol * (np.sqrt(alpha) * np.sqrt(beta))
            c, s, _ = _rotation_numpy((beta - alpha) / (2 * np.where(active, gamma, 1)), active)
            c3 = c[None, :, None]
            s3 = s[None, :, None] * _member_signs(dtype, 3 + len(batch))
            w3 = (c3 * w3 + s3 * w3[::-1]).astype(dtype)
        return w3.reshape(w.shape)[order], active

    return _sweeps_numpy(round_fn, np.asarray(wt), n, (h,) + batch)


_two_sided_p = composite_primitive("jacobi_two_sided", _two_sided_graph, multiple_results=True)
_two_sided_p.def_impl(lambda a, v, *, graph: _two_sided_numpy(a, v))
_one_sided_p = composite_primitive("jacobi_one_sided", _one_sided_graph)
_one_sided_p.def_impl(lambda wt, *, graph, rows: _one_sided_numpy(wt, rows=rows))


def two_sided(a, v):
    """Diagonalizes the symmetric a (n, n, *batch), n even, by Jacobi rotations. Returns (d, vt): d (n, *batch)
    the diagonal reached (the eigenvalues) and vt (n, n, *batch), v (usually the identity) with the same
    rotations applied to its rows, so that row k of vt is the eigenvector of d[k]. Used inside eigh's
    graph: compiled, its rounds are inlined; evaluated eagerly, the numpy mirror runs."""
    return tuple(_two_sided_p.apply(a, v))


def one_sided(wt, rows: int):
    """Orthogonalizes the rows wt[:, :rows] (n, k, *batch) (n even) by rotating pairs of rows; the rest of
    each row (e.g. an identity, to accumulate V) is rotated along. Returns the rotated wt."""
    return _one_sided_p.apply(wt, rows=int(rows))
