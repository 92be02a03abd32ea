"""kiln.scipy.sparse.linalg: the iterative solvers cg, bicgstab and gmres (JAX's jax.scipy.sparse.linalg).

A is a square matrix or a linear function (x -> Ax) of arrays or pytrees shaped like b; M, the
preconditioner, likewise (default: none). Each solver is a while_loop under kiln.lax.custom_linear_solve,
so the solution is differentiated implicitly (one more solve with A or Aᵀ) in forward and reverse mode
and under vmap, as JAX's. The result is (x, info): info None for cg and bicgstab, 0 or -1 (NaN) for gmres,
as JAX's.

Stopping rule (JAX's and scipy's): ||r|| <= max(tol ||b||, atol), or maxiter iterations (gmres: restarts;
default 10 n) have run; gmres measures the preconditioned residual (see gmres). cg needs A Hermitian
positive definite; bicgstab and gmres take any nonsingular A.
"""
from __future__ import annotations

import functools

import numpy as np

from ... import lax
from ... import numpy as knp
from ...core import dtypes
from ...core.pytree import tree_flatten, tree_leaves, tree_map, tree_structure, tree_unflatten
from ...numpy._base import aval

__all__ = ["cg", "bicgstab", "gmres"]


# ---- vectors as pytrees --------------------------------------------------------------------------------

def _add(a, b):
    return tree_map(lambda u, v: u + v, a, b)


def _sub(a, b):
    return tree_map(lambda u, v: u - v, a, b)


def _scale(alpha, a):
    return tree_map(lambda u: (alpha * u).astype(aval(u).dtype), a)


def _vdot(a, b):
    """Σ conj(a) b over every element of every leaf."""
    return functools.reduce(lambda s, t: s + t, [knp.vdot(u, v) for u, v in zip(tree_leaves(a), tree_leaves(b))])


def _norm_squared(a):
    return functools.reduce(lambda s, t: s + t, [knp.sum(knp.real(u * knp.conj(u))) for u in tree_leaves(a)])


def _select(pred, a, b):
    return tree_map(lambda u, v: knp.where(pred, u, v), a, b)


def _operator(A, where: str, name: str):
    """A linear function from a function or a square matrix (applied as A @ x)."""
    if callable(A):
        return A
    matrix = knp.asarray(A)
    if aval(matrix).ndim != 2 or aval(matrix).shape[0] != aval(matrix).shape[1]:
        raise ValueError(f"{where}: {name} must be a square matrix or a function; got shape {aval(matrix).shape}")
    return lambda x: tree_map(lambda v: knp.matmul(matrix, v), x)


def _float_dtype(b) -> np.dtype:
    leaves = [knp.asarray(v) for v in tree_leaves(b)]
    d = functools.reduce(np.promote_types, [aval(v).dtype for v in leaves])
    return np.dtype(d) if dtypes.is_inexact(d) else np.dtype(np.float64)


def _isolve(solver, where: str, A, b, x0, *, tol, atol, maxiter, M, symmetric: bool, **options):
    if not tree_leaves(b):
        raise ValueError(f"{where}: b has no arrays")
    dtype = _float_dtype(b)
    b = tree_map(lambda v: knp.asarray(v).astype(dtype), b)
    if x0 is None:
        x0 = tree_map(knp.zeros_like, b)
    elif tree_structure(x0) != tree_structure(b) or [aval(knp.asarray(u)).shape for u in tree_leaves(x0)] != \
            [aval(v).shape for v in tree_leaves(b)]:
        raise ValueError(f"{where}: x0 and b must have matching tree structure and shapes; got "
                         f"{tree_structure(x0)} {[aval(knp.asarray(u)).shape for u in tree_leaves(x0)]} and "
                         f"{tree_structure(b)} {[aval(v).shape for v in tree_leaves(b)]}")
    else:
        x0 = tree_map(lambda u: knp.asarray(u).astype(dtype), x0)
    size = sum(int(np.prod(aval(v).shape)) for v in tree_leaves(b))
    maxiter = 10 * size if maxiter is None else int(maxiter)
    A = _operator(A, where, "A")
    M = (lambda x: x) if M is None else _operator(M, where, "M")
    solve = functools.partial(solver, x0=x0, tol=tol, atol=atol, maxiter=maxiter, M=M, **options)
    real = not dtypes.is_complex(dtype)
    x = lax.custom_linear_solve(A, b, solve=solve, transpose_solve=solve, symmetric=symmetric and real)
    return x, None


def _tolerance(b, tol, atol):
    """The squared residual norm that stops an iteration."""
    return knp.maximum(np.square(tol) * _norm_squared(b), np.square(atol))


# ---- conjugate gradients ----------------------------------------------------------------------------------

def _cg_solve(A, b, *, x0, tol, atol, maxiter, M):
    limit = _tolerance(b, tol, atol)
    r0 = _sub(b, A(x0))
    z0 = M(r0)
    state = (x0, r0, z0, _vdot(r0, z0), 0)

    def keep_going(s):
        _, r, _, _, k = s
        return (_norm_squared(r) > limit) & (k < maxiter)

    def step(s):
        x, r, p, gamma, k = s
        q = A(p)
        alpha = gamma / _vdot(p, q)
        x = _add(x, _scale(alpha, p))
        r = _sub(r, _scale(alpha, q))
        z = M(r)
        gamma_next = _vdot(r, z)
        p = _add(z, _scale(gamma_next / gamma, p))
        return x, r, p, gamma_next, k + 1

    return lax.while_loop(keep_going, step, state)[0]


def cg(A, b, x0=None, *, tol=1e-5, atol=0.0, maxiter=None, M=None):
    """scipy.sparse.linalg.cg: conjugate gradients for Hermitian positive definite A; (x, None)."""
    return _isolve(_cg_solve, "cg", A, b, x0, tol=tol, atol=atol, maxiter=maxiter, M=M, symmetric=True)


# ---- BiCGSTAB --------------------------------------------------------------------------------------------

def _bicgstab_solve(A, b, *, x0, tol, atol, maxiter, M):
    limit = _tolerance(b, tol, atol)
    r0 = _sub(b, A(x0))
    dtype = aval(tree_leaves(b)[0]).dtype
    one = np.ones((), dtype)
    zeros = tree_map(knp.zeros_like, b)
    state = (x0, r0, zeros, zeros, one, one, one, 0)

    def keep_going(s):
        _, r, *_, k = s
        return (_norm_squared(r) > limit) & (k < maxiter) & (k >= 0)

    def step(s):
        x, r, p, v, rho, alpha, omega, k = s
        rho_next = _vdot(r0, r)
        beta = (rho_next / rho) * (alpha / omega)
        p = _add(r, _scale(beta, _sub(p, _scale(omega, v))))
        p_hat = M(p)
        v = A(p_hat)
        alpha = rho_next / _vdot(r0, v)
        s_vec = _sub(r, _scale(alpha, v))
        converged = _norm_squared(s_vec) < limit
        s_hat = M(s_vec)
        t = A(s_hat)
        omega = _vdot(t, s_vec) / _vdot(t, t)
        x = _select(converged, _add(x, _scale(alpha, p_hat)),
                    _add(x, _add(_scale(alpha, p_hat), _scale(omega, s_hat))))
        r = _select(converged, s_vec, _sub(s_vec, _scale(omega, t)))
        breakdown = (omega == 0) | (alpha == 0) | (rho_next == 0)
        k = knp.where(breakdown, -1, k + 1)
        return x, r, p, v, rho_next, alpha, omega, k

    return lax.while_loop(keep_going, step, state)[0]


def bicgstab(A, b, x0=None, *, tol=1e-5, atol=0.0, maxiter=None, M=None):
    """scipy.sparse.linalg.bicgstab: biconjugate gradients, stabilized, for any nonsingular A; (x, None). A
    breakdown (ρ, α or ω zero) stops the iteration at the last iterate."""
    return _isolve(_bicgstab_solve, "bicgstab", A, b, x0, tol=tol, atol=atol, maxiter=maxiter, M=M,
                   symmetric=False)


# ---- GMRES -----------------------------------------------------------------------------------------------

def _flat(tree):
    """(the leaves raveled into one vector, the function back to tree's structure)."""
    leaves, treedef = tree_flatten(tree)
    shapes = [aval(v).shape for v in leaves]
    sizes = [int(np.prod(s)) for s in shapes]
    offsets = np.cumsum([0] + sizes)

    def unflat(vector):
        return tree_unflatten(treedef, [vector[int(o):int(o) + n].reshape(s)
                                        for o, n, s in zip(offsets, sizes, shapes)])

    return knp.concatenate([v.reshape(-1) for v in leaves]), unflat


def _safe_norm(v, thresh):
    """JAX's _safe_normalize's norm: ||v||, or 0 at or below thresh."""
    norm = knp.sqrt(_norm_squared(v))
    return knp.where(norm > thresh, norm, 0)


def _gmres_solve(A, b, *, x0, tol, atol, maxiter, M, restart, incremental, limits):
    """JAX's _gmres_solve: restarts while the preconditioned residual ||M(b - A x)|| (recomputed after each
    restart) is above atol = max(tol ||b||, atol), at most maxiter restarts; within a restart, 'batched' runs
    all m Arnoldi steps (fewer only at a breakdown), 'incremental' stops once the rotated residual is at or
    below ptol = ||M b|| min(1, atol / ||b||). limits holds (atol, ptol) from the b gmres was called with,
    as JAX's (the transposed solve of a gradient reuses them)."""
    atol_, ptol = limits
    b_flat, unflat = _flat(b)
    x_flat = _flat(x0)[0]
    n = aval(b_flat).shape[0]
    dtype = aval(b_flat).dtype
    real = dtypes.real_dtype(dtype)
    eps = float(np.finfo(real).eps)
    m = max(1, min(int(restart), n))
    op = lambda v: _flat(M(A(unflat(v))))[0]  # noqa: E731 - the left-preconditioned operator
    residual_of = lambda x: _flat(M(_sub(b, A(unflat(x)))))[0]  # noqa: E731
    rows = knp.arange(m + 1)

    def cycle(x, r, beta):
        """One restart from x with residual r = M(b - A x) of norm beta: Arnoldi steps (Givens-rotated
        Hessenberg); returns the improved x, its residual and the residual's norm."""
        unit = knp.where(beta > 0, r / knp.where(beta > 0, beta, 1).astype(dtype), 0)
        basis = knp.zeros((m + 1, n), dtype).at[0].set(unit)
        hessenberg = knp.zeros((m + 1, m), dtype)
        cosines, sines = knp.zeros(m, dtype), knp.zeros(m, dtype)
        g = knp.zeros(m + 1, dtype).at[0].set(beta.astype(dtype))

        def arnoldi(j, state):
            basis, hessenberg, cosines, sines, g, used, broken = state
            active = (knp.abs(g[j]) > ptol) if incremental else ~broken
            w = op(basis[j])
            w_norm = _safe_norm(w, eps)
            mask = (rows <= j).astype(real)
            for _ in range(2):  # classical Gram-Schmidt, repeated once for orthogonality
                h = (knp.conj(basis) @ w) * mask
                w = w - h @ basis
                column = h if _ == 0 else column + h
            norm = _safe_norm(w, eps * w_norm)  # 0: a breakdown (an invariant subspace), as JAX's
            column = column.at[j + 1].set(norm.astype(dtype))
            basis = basis.at[j + 1].set(w / knp.where(norm > 0, norm, 1).astype(dtype) * (norm > 0).astype(dtype))

            def rotate(i, col):
                a, c = col[i], col[i + 1]
                turn = i < j
                new_a = knp.conj(cosines[i]) * a + knp.conj(sines[i]) * c
                new_c = -sines[i] * a + cosines[i] * c
                return col.at[i].set(knp.where(turn, new_a, a)).at[i + 1].set(knp.where(turn, new_c, c))

            column = lax.fori_loop(0, m, rotate, column)
            a, c = column[j], column[j + 1]
            radius = knp.sqrt(knp.real(a * knp.conj(a)) + knp.real(c * knp.conj(c)))
            safe = knp.where(radius > 0, radius, 1).astype(dtype)
            cos = knp.where(radius > 0, a / safe, 1).astype(dtype)
            sin = knp.where(radius > 0, c / safe, 0).astype(dtype)
            column = column.at[j].set(radius.astype(dtype)).at[j + 1].set(0)
            g_j = g[j]
            g_next = g.at[j].set(knp.conj(cos) * g_j).at[j + 1].set(-sin * g_j)
            return (knp.where(active, basis, state[0]), knp.where(active, hessenberg.at[:, j].set(column), hessenberg),
                    cosines.at[j].set(knp.where(active, cos, cosines[j])),
                    sines.at[j].set(knp.where(active, sin, sines[j])), knp.where(active, g_next, g),
                    used + active.astype(np.int32), broken | (active & (norm == 0)))

        basis, hessenberg, _, _, g, used, _ = lax.fori_loop(
            0, m, arnoldi, (basis, hessenberg, cosines, sines, g, np.int32(0), np.bool_(False)))
        valid = knp.arange(m) < used
        triangle = knp.where(valid[:, None] & valid[None, :], hessenberg[:m], knp.eye(m, dtype=dtype))
        rhs = knp.where(valid, g[:m], 0)

        def back_substitute(k, y):
            i = m - 1 - k
            return y.at[i].set((rhs[i] - triangle[i] @ y) / triangle[i, i])

        y = lax.fori_loop(0, m, back_substitute, knp.zeros(m, dtype))
        x = x + y @ basis[:m]
        r = residual_of(x)
        return x, r, _safe_norm(r, eps)

    def keep_going(state):
        _, _, residual, k = state
        return (residual > atol_) & (k < maxiter)

    def step(state):
        x, r, beta, k = state
        x, r, beta = cycle(x, r, beta)
        return x, r, beta, k + 1

    r0 = residual_of(x_flat)
    start = (x_flat, r0, _safe_norm(r0, eps), 0)
    return unflat(lax.while_loop(keep_going, step, start)[0])


def gmres(A, b, x0=None, *, tol=1e-5, atol=0.0, restart=20, maxiter=None, M=None, solve_method="batched"):
    """scipy.sparse.linalg.gmres, JAX's: restarted GMRES (Krylov spaces of size restart, left-preconditioned
    by M, Givens rotations, classical Gram-Schmidt repeated once) for any nonsingular A; (x, info), info 0,
    or -1 where x has a NaN (as JAX's). maxiter counts restarts, as JAX's. The restarts stop on the
    preconditioned residual ||M(b - A x)|| <= max(tol ||b||, atol) (b's norm, not M b's, as JAX's);
    solve_method 'batched' runs all restart Arnoldi steps of a restart (fewer at a breakdown), 'incremental'
    stops a restart once its residual estimate is at or below ||M b|| min(1, max(tol ||b||, atol) / ||b||)."""
    if solve_method not in ("batched", "incremental"):
        raise ValueError(f"gmres: solve_method must be 'batched' or 'incremental'; got {solve_method!r}")
    if int(restart) < 1:
        raise ValueError(f"gmres: restart must be at least 1; got {restart!r}")
    if not tree_leaves(b):
        raise ValueError("gmres: b has no arrays")
    dtype = _float_dtype(b)
    b_cast = tree_map(lambda v: knp.asarray(v).astype(dtype), b)
    M_op = (lambda x: x) if M is None else _operator(M, "gmres", "M")
    b_norm = knp.sqrt(_norm_squared(b_cast))
    atol_ = knp.maximum(tol * b_norm, atol)
    ptol = knp.sqrt(_norm_squared(M_op(b_cast))) * knp.minimum(1.0, atol_ / b_norm)
    x, _ = _isolve(_gmres_solve, "gmres", A, b, x0, tol=tol, atol=atol, maxiter=maxiter, M=M, symmetric=False,
                   restart=restart, incremental=solve_method == "incremental", limits=(atol_, ptol))
    return x, knp.where(knp.isnan(knp.sqrt(_norm_squared(x))), np.int32(-1), np.int32(0))
