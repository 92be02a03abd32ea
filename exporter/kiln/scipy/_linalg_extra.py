"""scipy.linalg's qr_multiply (kiln's Householder QR, then one product), solve_sylvester (a Kronecker
solve for small m n, Bartels-Stewart beyond) and hessenberg (Householder reflections with LAPACK's gehrd
conventions, in a fori_loop over the columns with static shapes and masks). Leading axes are a batch;
real floating dtypes."""
from __future__ import annotations

import math

import numpy as np

from .. import numpy as knp
from ..lax.control_flow import fori_loop
from ..numpy._base import broadcast_shapes
from ..numpy.linalg import _solve as np_linalg

__all__ = ["qr_multiply", "solve_sylvester", "hessenberg"]

KRONECKER_MAX = 256  # solve_sylvester: the largest m * n solved as one Kronecker system


def qr_multiply(a, c, mode="right", pivoting=False, conjugate=False, overwrite_a=False, overwrite_c=False):
    """scipy.linalg.qr_multiply: (Q @ c, R) with mode='left' or (c @ Q, R) with mode='right', where a = Q R
    is the economic QR (Q (M, K), R (K, N), K = min(M, N)). A vector c is a row (right) or a column (left),
    and the product is a vector. pivoting=True is not supported (as kiln's qr)."""
    from .linalg import qr

    if pivoting:
        raise NotImplementedError("scipy.linalg.qr_multiply: pivoting=True (column-pivoted QR) is not supported "
                                  "by kiln")
    if mode not in ("left", "right"):
        raise ValueError(f"scipy.linalg.qr_multiply: mode must be 'left' or 'right', got {mode!r}")
    a, c = knp.asarray(a), knp.asarray(c)
    q, r = qr(a, mode="economic")
    if conjugate:
        q = knp.conj(q)
    m, k = q.shape[-2:]
    need = k if mode == "left" else m
    vector = c.ndim == 1
    inner = c.shape[0] if vector else c.shape[-2 if mode == "left" else -1]
    if c.ndim == 0 or inner != need:
        op = "Q @ c" if mode == "left" else "c @ Q"
        raise ValueError(f"scipy.linalg.qr_multiply: array shapes are not compatible for {op}: a has shape "
                         f"{a.shape} (Q is {(m, k)}), c has shape {c.shape}")
    dtype = np.promote_types(q.dtype, c.dtype)
    q, c = q.astype(dtype), c.astype(dtype)
    if mode == "left":
        return (knp.matmul(q, c), r)
    return (knp.matmul(c, q), r)


def solve_sylvester(a, b, q):
    """scipy.linalg.solve_sylvester: X with A X + X B = Q (A (m, m), B (n, n), Q (m, n)). For m n <=
    KRONECKER_MAX, the (m n) x (m n) system (A (x) I + I (x) B^T) vec(X) = vec(Q) (row-major vec) by LU
    with partial pivoting (differentiable); larger, Bartels-Stewart on the complex Schur forms of A and B
    (scipy's and JAX's method; O(m^3 + n^3) plus the Schur iterations, not differentiable, as JAX's). When
    A and -B share an eigenvalue the problem is singular and X holds inf/NaN (scipy raises or warns)."""
    a = np_linalg._square_float("scipy.linalg.solve_sylvester", a, "a")
    b = np_linalg._square_float("scipy.linalg.solve_sylvester", b, "b")
    q = np_linalg._float_operand("scipy.linalg.solve_sylvester", q)
    m, n = a.shape[-1], b.shape[-1]
    if q.ndim < 2 or q.shape[-2:] != (m, n):
        raise ValueError(f"scipy.linalg.solve_sylvester: q must have shape ({m}, {n}) (a's rows by b's columns), "
                         f"got {q.shape}")
    batch = broadcast_shapes(a.shape[:-2], b.shape[:-2], q.shape[:-2], where="scipy.linalg.solve_sylvester")
    dtype = np.result_type(a.dtype, b.dtype, q.dtype)
    a, b, q = (knp.broadcast_to(x.astype(dtype), batch + x.shape[-2:]) for x in (a, b, q))
    if m * n > KRONECKER_MAX:
        from ._linalg_schur import bartels_stewart
        from ..transforms.api import vmap

        if not math.prod(batch):
            return knp.zeros(batch + (m, n), dtype)
        flat = [knp.reshape(x, (-1,) + x.shape[-2:]) for x in (a, b, q)]
        return knp.reshape(vmap(bartels_stewart)(*flat) if batch else bartels_stewart(a, b, q), batch + (m, n))
    eye_m, eye_n = np.eye(m, dtype=dtype), np.eye(n, dtype=dtype)
    system = (a[..., :, None, :, None] * eye_n[:, None, :] +
              eye_m[:, None, :, None] * knp.swapaxes(b, -1, -2)[..., None, :, None, :])
    system = knp.reshape(system, batch + (m * n, m * n))
    x = knp.linalg.solve(system, knp.reshape(q, batch + (m * n, 1)))
    return knp.reshape(x, batch + (m, n))


def _householder_step(k, state, idx, dtype):
    """Column k: the reflector I - tau v v^T (v[k + 1] = 1, zero above) that zeroes h[k + 2:, k], with
    LAPACK's larfg signs (beta = -sign(alpha) ||x||, tau = 0 when the tail is already zero), applied to h
    from both sides and to q from the right."""
    h, q = state
    col = knp.sum(h * (idx == k).astype(dtype), axis=-1)
    alpha = knp.sum(col * (idx == k + 1).astype(dtype), axis=-1, keepdims=True)
    tail = col * (idx > k + 1).astype(dtype)
    tail2 = knp.sum(tail * tail, axis=-1, keepdims=True)
    beta = -knp.copysign(knp.sqrt(alpha * alpha + tail2), alpha)
    moves = tail2 > 0
    tau = knp.where(moves, (beta - alpha) / knp.where(moves, beta, 1), 0)
    v = tail / knp.where(moves, alpha - beta, 1) + (idx == k + 1).astype(dtype)
    vt = knp.expand_dims(v, -2)
    h = h - knp.expand_dims(tau * v, -1) * knp.matmul(vt, h)
    h = h - knp.matmul(h, knp.expand_dims(v, -1)) * knp.expand_dims(tau, -1) * vt
    q = q - knp.matmul(q, knp.expand_dims(v, -1)) * knp.expand_dims(tau, -1) * vt
    return h, q


def hessenberg(a, calc_q=False, overwrite_a=False, check_finite=True):
    """scipy.linalg.hessenberg: H upper Hessenberg (zero below the first subdiagonal) with a = Q H Q^T, Q
    orthogonal; (H, Q) with calc_q=True. n - 2 Householder reflections with LAPACK's (gehrd's) sign
    conventions, so H and Q agree with scipy's, not just up to signs. Leading axes are a batch."""
    x = np_linalg._square_float("scipy.linalg.hessenberg", a, "a")
    n, dtype = x.shape[-1], x.dtype
    idx = np.arange(n)
    q = knp.broadcast_to(np.eye(n, dtype=dtype), x.shape)
    h, q = fori_loop(0, max(n - 2, 0), lambda k, s: _householder_step(k, s, idx, dtype), (x, q))
    h = h * (idx[:, None] <= idx[None, :] + 1).astype(dtype)
    return (h, q) if calc_q else h
