"""lax.custom_linear_solve, lax.custom_root and kiln.scipy.sparse.linalg (cg, bicgstab, gmres): values against
numpy.linalg, derivatives (forward, reverse, second order) against finite differences, vmap, pytrees,
preconditioners, complex systems, errors; eagerly, under kiln.jit and once in kiln-run."""
import numpy as np
import pytest

import kiln
import kiln.lax as lax
import kiln.numpy as knp
from kiln.scipy.sparse import linalg as sparse
from kiln.transforms.jvp import DifferentiationError
from kiln_tools import kiln_run_exported
from references import numerical_grad

RNG = np.random.default_rng(5)
N = 10
_BASE = RNG.standard_normal((N, N))
SPD = _BASE @ _BASE.T + N * np.eye(N)
GENERAL = _BASE + 4 * np.eye(N)
B = RNG.standard_normal(N)


def dense_solve(a, b):
    return lax.custom_linear_solve(lambda x: a @ x, b, lambda mv, rhs: knp.linalg.solve(a, rhs),
                                   transpose_solve=lambda vm, rhs: knp.linalg.solve(a.T, rhs))


def test_custom_linear_solve_value_and_derivatives():
    want = np.linalg.solve(GENERAL, B)
    np.testing.assert_allclose(dense_solve(GENERAL, B), want, rtol=1e-12)
    np.testing.assert_allclose(kiln.jit(dense_solve)(GENERAL, B), want, rtol=1e-12)
    loss = lambda a, b: knp.sum(knp.sin(dense_solve(a, b)))  # noqa: E731
    ref = lambda a, b: np.sum(np.sin(np.linalg.solve(a, b)))  # noqa: E731
    grad_a, grad_b = kiln.grad(loss, argnums=(0, 1))(GENERAL, B)
    np.testing.assert_allclose(grad_b, numerical_grad(lambda b: ref(GENERAL, b), B), rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(grad_a, numerical_grad(lambda a: ref(a, B), GENERAL), rtol=1e-6, atol=1e-9)
    jitted = kiln.jit(kiln.grad(loss, argnums=(0, 1)))(GENERAL, B)
    np.testing.assert_allclose(jitted[0], grad_a, rtol=1e-10)
    direction = RNG.standard_normal((N, N))
    _, tangent = kiln.jvp(lambda a: dense_solve(a, B), (GENERAL,), (direction,))
    np.testing.assert_allclose(tangent, -np.linalg.solve(GENERAL, direction @ want), rtol=1e-10)
    batch = RNG.standard_normal((3, N))
    np.testing.assert_allclose(kiln.vmap(lambda b: dense_solve(GENERAL, b))(batch),
                               np.linalg.solve(GENERAL, batch.T).T, rtol=1e-10)


def test_custom_linear_solve_symmetric_pytree_and_aux():
    def solve(b):
        def matvec(x):
            return {"u": SPD[:4, :4] @ x["u"] + SPD[:4, 4:] @ x["v"], "v": SPD[4:, :4] @ x["u"] + SPD[4:, 4:] @ x["v"]}

        def direct(mv, rhs):
            x = knp.linalg.solve(SPD, knp.concatenate([rhs["u"], rhs["v"]]))
            return {"u": x[:4], "v": x[4:]}, knp.int32(1)

        return lax.custom_linear_solve(matvec, b, direct, symmetric=True, has_aux=True)

    (x, aux) = solve({"u": B[:4], "v": B[4:]})
    np.testing.assert_allclose(np.concatenate([x["u"], x["v"]]), np.linalg.solve(SPD, B), rtol=1e-12)
    assert int(aux) == 1
    grad = kiln.grad(lambda b: knp.sum(solve({"u": b[:4], "v": b[4:]})[0]["v"] ** 2))(B)
    np.testing.assert_allclose(grad, numerical_grad(lambda b: np.sum(np.linalg.solve(SPD, b)[4:] ** 2), B),
                               rtol=1e-6, atol=1e-9)


def test_custom_linear_solve_errors():
    no_transpose = lambda b: knp.sum(lax.custom_linear_solve(lambda x: GENERAL @ x, b,  # noqa: E731
                                                             lambda mv, r: knp.linalg.solve(GENERAL, r)))
    np.testing.assert_allclose(kiln.jvp(no_transpose, (B,), (B,))[1], np.sum(np.linalg.solve(GENERAL, B)), rtol=1e-10)
    with pytest.raises(DifferentiationError, match="needs transpose_solve= \\(or symmetric=True\\)"):
        kiln.grad(no_transpose)(B)
    with pytest.raises(TypeError, match="solve must return a value with b's structure"):
        lax.custom_linear_solve(lambda x: x, B, lambda mv, r: r[:3])
    with pytest.raises(TypeError, match="matvec must return a value with b's structure"):
        lax.custom_linear_solve(lambda x: x.astype(np.float32), B, lambda mv, r: r)


def newton(f, x0):
    def step(carry):
        x, k = carry
        value, slope = kiln.jvp(f, (x,), (knp.ones_like(x),))
        return x - value / slope, k + 1

    return lax.while_loop(lambda c: c[1] < 40, step, (x0, 0))[0]


def cube_root(a):
    return lax.custom_root(lambda x: x ** 3 - a, knp.ones_like(a), newton, lambda g, y: y / g(1.0))


def test_custom_root_scalar_derivatives_of_every_order():
    a = np.float64(5.0)
    np.testing.assert_allclose(cube_root(a), 5 ** (1 / 3), rtol=1e-14)
    np.testing.assert_allclose(kiln.grad(cube_root)(a), 5 ** (-2 / 3) / 3, rtol=1e-12)
    np.testing.assert_allclose(kiln.jit(kiln.grad(cube_root))(a), 5 ** (-2 / 3) / 3, rtol=1e-12)
    np.testing.assert_allclose(kiln.grad(kiln.grad(cube_root))(a), -2 / 9 * 5 ** (-5 / 3), rtol=1e-10)
    np.testing.assert_allclose(kiln.jvp(cube_root, (a,), (2.0,))[1], 2 * 5 ** (-2 / 3) / 3, rtol=1e-12)
    values = np.array([1.0, 8.0, 27.0])
    np.testing.assert_allclose(kiln.vmap(kiln.grad(cube_root))(values), values ** (-2 / 3) / 3, rtol=1e-12)


def test_custom_root_of_a_system_with_aux():
    target = RNG.standard_normal(3)

    def f_of(theta):
        return lambda x: x + 0.1 * knp.sin(x) * theta - target

    def solve(f, x0):
        def step(_, x):
            jac = kiln.jacfwd(f)(x)
            return x - knp.linalg.solve(jac, f(x))

        return lax.fori_loop(0, 30, step, x0), knp.float64(0.0)

    def tangent_solve(g, y):
        return knp.linalg.solve(kiln.jacfwd(g)(knp.zeros_like(y)), y)

    def root(theta):
        return lax.custom_root(f_of(theta), knp.zeros(3), solve, tangent_solve, has_aux=True)[0]

    theta = RNG.standard_normal(3)
    x = root(theta)
    np.testing.assert_allclose(x + 0.1 * np.sin(x) * theta, target, atol=1e-12)
    ref = lambda t: np.asarray(root(t))  # noqa: E731 - the solver's value, differentiated numerically
    np.testing.assert_allclose(kiln.jacrev(root)(theta),
                               np.stack([numerical_grad(lambda t: ref(t)[i], theta) for i in range(3)]), rtol=1e-6,
                               atol=1e-9)


SOLVERS = {"cg": (sparse.cg, SPD), "bicgstab": (sparse.bicgstab, GENERAL), "gmres": (sparse.gmres, GENERAL)}


@pytest.mark.parametrize("name", SOLVERS)
def test_iterative_solvers_values_and_gradients(name):
    solver, a = SOLVERS[name]
    want = np.linalg.solve(a, B)
    x, info = solver(a, B, tol=1e-11)
    if name == "gmres":  # JAX's: 0, or -1 where x has a NaN
        assert info.dtype == np.int32 and int(info) == 0
    else:
        assert info is None
    np.testing.assert_allclose(x, want, rtol=1e-9, atol=1e-11)
    np.testing.assert_allclose(kiln.jit(lambda a, b: solver(a, b, tol=1e-11)[0])(a, B), want, rtol=1e-9, atol=1e-11)
    loss = lambda a, b: knp.sum(knp.sin(solver(a, b, tol=1e-12)[0]))  # noqa: E731
    ref = lambda a, b: np.sum(np.sin(np.linalg.solve(a, b)))  # noqa: E731
    grad_a, grad_b = kiln.grad(loss, argnums=(0, 1))(a, B)
    np.testing.assert_allclose(grad_b, numerical_grad(lambda b: ref(a, b), B), rtol=1e-5, atol=1e-8)
    np.testing.assert_allclose(grad_a, numerical_grad(lambda m: ref(m, B), a), rtol=1e-5, atol=1e-8)
    preconditioned = solver(lambda v: a @ v, B, x0=np.ones(N), tol=1e-11, M=np.diag(1 / np.diag(a)))[0]
    np.testing.assert_allclose(preconditioned, want, rtol=1e-9, atol=1e-11)
    tree = solver(lambda t: {"p": a[:3, :3] @ t["p"] + a[:3, 3:] @ t["q"], "q": a[3:, :3] @ t["p"] + a[3:, 3:] @ t["q"]},
                  {"p": B[:3], "q": B[3:]}, tol=1e-11)[0]
    np.testing.assert_allclose(np.concatenate([tree["p"], tree["q"]]), want, rtol=1e-9, atol=1e-11)


def test_iterative_solvers_complex_restart_vmap_and_export(tmp_path):
    complex_a = GENERAL + 1j * RNG.standard_normal((N, N))
    complex_b = B + 1j * RNG.standard_normal(N)
    hermitian = complex_a @ complex_a.conj().T + N * np.eye(N)
    np.testing.assert_allclose(sparse.cg(hermitian, complex_b, tol=1e-11)[0], np.linalg.solve(hermitian, complex_b),
                               rtol=1e-9, atol=1e-11)
    for solver in (sparse.bicgstab, sparse.gmres):
        np.testing.assert_allclose(solver(complex_a, complex_b, tol=1e-11)[0], np.linalg.solve(complex_a, complex_b),
                                   rtol=1e-9, atol=1e-11)
    np.testing.assert_allclose(sparse.gmres(GENERAL, B, tol=1e-11, restart=3)[0], np.linalg.solve(GENERAL, B),
                               rtol=1e-8, atol=1e-10)
    batch = RNG.standard_normal((3, N))
    np.testing.assert_allclose(kiln.vmap(lambda b: sparse.cg(SPD, b, tol=1e-11)[0])(batch),
                               np.linalg.solve(SPD, batch.T).T, rtol=1e-9, atol=1e-11)
    a32, b32 = GENERAL.astype(np.float32), B.astype(np.float32)
    (got,) = kiln_run_exported(lambda a, b: sparse.bicgstab(a, b, tol=1e-6)[0], a32, b32, tmp_path=tmp_path)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, np.linalg.solve(GENERAL, B), rtol=1e-4, atol=1e-5)


# JAX 0.10.2's jax.scipy.sparse.linalg.gmres (float64) on GMRES_A x = GMRES_B: x after the given options
GMRES_A = np.sin(np.arange(100).reshape(10, 10) * 1.3) + 3.0 * np.eye(10)
GMRES_B = np.cos(np.arange(10) * 0.7)
GMRES_M = np.diag(np.linspace(0.5, 2.0, 10))
GMRES_JAX = [
    # batched: one restart runs all 6 Arnoldi steps, though tol 0.1 is met sooner
    (dict(tol=1e-1, restart=6, maxiter=1),
     [0.3378674212606581, 0.2543801152598364, 0.05109207264193418, -0.17781217179661293,
     -0.3258066560658791, -0.32391540804417435, -0.17303664902116928, 0.05648127123155801,
     0.25781246410482783, 0.33768807207196794]),
    # preconditioned: restarts stop on ||M r|| <= tol ||b|| (b's norm, not M b's)
    (dict(tol=1e-1, restart=6, maxiter=1, M=GMRES_M),
     [0.3354704207146522, 0.25578644190768157, 0.05038689472845208, -0.17810396470724302,
     -0.3254027413113912, -0.3233147411645927, -0.17234135806916812, 0.056755609035114216,
     0.2584760845964989, 0.33750173949953566]),
    (dict(tol=1e-3, restart=3, maxiter=2, M=GMRES_M),
     [0.33245566699428325, 0.2562404901751324, 0.0502622336009849, -0.17761666114849858,
     -0.3238048285794003, -0.3235480173187768, -0.1751558775632584, 0.05412381616662283,
     0.25664505751571814, 0.33799166593659663]),
]


@pytest.mark.parametrize("options,want", GMRES_JAX)
def test_gmres_restarts_and_stops_as_jax(options, want):
    x, info = sparse.gmres(GMRES_A, GMRES_B, **options)
    np.testing.assert_allclose(x, want, rtol=1e-12, atol=1e-13)
    if "M" in options:
        return
    # no restart when x0 already meets the tolerance, none with maxiter=0 (JAX's)
    x0 = np.linalg.solve(GMRES_A, GMRES_B) + 1e-9
    np.testing.assert_array_equal(sparse.gmres(GMRES_A, GMRES_B, x0=x0, restart=2, maxiter=1)[0], x0)
    np.testing.assert_array_equal(sparse.gmres(GMRES_A, GMRES_B, restart=4, maxiter=0)[0], np.zeros(10))


def test_iterative_solver_errors():
    with pytest.raises(ValueError, match="cg: A must be a square matrix or a function; got shape \\(3, 4\\)"):
        sparse.cg(np.ones((3, 4)), np.ones(3))
    with pytest.raises(ValueError, match="bicgstab: x0 and b must have matching tree structure and shapes"):
        sparse.bicgstab(GENERAL, B, x0=np.ones(3))
    with pytest.raises(ValueError, match="gmres: solve_method must be 'batched' or 'incremental'; got 'qr'"):
        sparse.gmres(GENERAL, B, solve_method="qr")
    with pytest.raises(ValueError, match="gmres: restart must be at least 1; got 0"):
        sparse.gmres(GENERAL, B, restart=0)
