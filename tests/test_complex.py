"""complex64 and complex128 as kiln dtypes, end to end: numpy's values and dtypes eagerly, under kiln.jit
(the compiler computes complex values as float parts, kiln.compiler.complex_lowering) and exported through
the standalone kiln-run (complex .npy arguments and results); JAX's promotion of Python complex numbers;
gradients of real losses through complex intermediates against float64 central differences."""
import numpy as np
import pytest

import kiln
import kiln.numpy as knp
from kiln import lax
from kiln.core.errors import CompileError
from kiln.lax.prims import ShapeError
from kiln_tools import check_like_numpy, eager_jit_and_kiln_run, kiln_run_exported, run_kiln_run

COMPLEX = [np.complex64, np.complex128]
ids = lambda d: np.dtype(d).name  # noqa: E731


def cnormal(rng, shape, dtype):
    return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)


def tol(dtype):
    return 2e-6 if np.dtype(dtype) == np.complex64 else 1e-12


def arithmetic(x, y):
    x, y = knp.asarray(x), knp.asarray(y)
    return (x + y, x - y, x * y, x / y, -x, knp.conj(x), x.conj(), knp.real(x), knp.imag(x), x.real, x.imag,
            knp.abs(x), abs(y), x * 2, 1 - x, x ** 2, x ** -3, knp.square(y), knp.reciprocal(x))


def arithmetic_np(x, y):
    return (x + y, x - y, x * y, x / y, -x, np.conj(x), x.conj(), np.real(x), np.imag(x), x.real, x.imag,
            np.abs(x), abs(y), x * 2, 1 - x, x ** 2, x ** -3, np.square(y), np.reciprocal(x))


@pytest.mark.parametrize("dtype", COMPLEX, ids=ids)
def test_arithmetic(dtype, tmp_path):
    rng = np.random.default_rng(0)
    x, y = cnormal(rng, (3, 5), dtype), cnormal(rng, (3, 5), dtype)
    eager_jit_and_kiln_run(arithmetic, arithmetic_np, x, y, tmp_path=tmp_path, tol=tol(dtype))


def transcendental(x):
    x = knp.asarray(x)
    return (knp.exp(x), knp.log(x), knp.sqrt(x), knp.sin(x), knp.cos(x), knp.tan(x), knp.sinh(x), knp.cosh(x),
            knp.tanh(x), knp.sign(x), knp.angle(x), knp.angle(x, deg=True), x ** (0.5 + 0.25j))


@np.errstate(divide="ignore", invalid="ignore")  # log(0) is -inf
def transcendental_np(x):
    return (np.exp(x), np.log(x), np.sqrt(x), np.sin(x), np.cos(x), np.tan(x), np.sinh(x), np.cosh(x),
            np.tanh(x), np.sign(x), np.angle(x), np.angle(x, deg=True), x ** np.asarray(0.5 + 0.25j, x.dtype))


@pytest.mark.parametrize("dtype", COMPLEX, ids=ids)
def test_transcendental(dtype, tmp_path):
    """The branch cuts are numpy's: sqrt and log of negative reals with -0.0 and +0.0 imaginary parts."""
    rng = np.random.default_rng(1)
    x = cnormal(rng, (40,), dtype) * 2
    x[:6] = [-4 + 0j, complex(-4, -0.0), 0j, 3 + 0j, 1j, -2j]
    x[6] = 30 + 1j  # tanh saturates
    ok = np.abs(x) > 0
    fn = lambda x: transcendental(x)[:-1] if not ok.all() else transcendental(x)  # noqa: E731
    fn_np = lambda x: transcendental_np(x)[:-1] if not ok.all() else transcendental_np(x)  # noqa: E731
    eager_jit_and_kiln_run(fn, fn_np, x, tmp_path=tmp_path, tol=10 * tol(dtype))
    check_like_numpy(kiln.jit(lambda z: z ** (0.5 + 0.25j))(x[ok]), x[ok] ** np.asarray(0.5 + 0.25j, dtype),
                     10 * tol(dtype))


def comparisons(x, y):
    x, y = knp.asarray(x), knp.asarray(y)
    return (x == y, x != y, knp.where(x.real > 0, x, y), knp.iscomplex(x), knp.isreal(x), knp.isreal(x.real),
            knp.iscomplex(x.real))


def comparisons_np(x, y):
    return (x == y, x != y, np.where(x.real > 0, x, y), np.iscomplex(x), np.isreal(x), np.isreal(x.real),
            np.iscomplex(x.real))


@pytest.mark.parametrize("dtype", COMPLEX, ids=ids)
def test_comparisons_and_select(dtype, tmp_path):
    rng = np.random.default_rng(2)
    x = cnormal(rng, (12,), dtype)
    y = x.copy()
    y[::3] += 1j
    y[1::3] += 1
    x[2] = 5
    eager_jit_and_kiln_run(comparisons, comparisons_np, x, y, tmp_path=tmp_path)


def conversions(x, r, i):
    x, r, i = knp.asarray(x), knp.asarray(r), knp.asarray(i)
    return (x.astype(np.complex64), x.astype(np.complex128), r.astype(knp.complex64), i.astype(np.complex128),
            knp.real(x).astype(np.float32), x.astype(bool), knp.add(r, knp.multiply(1j, r)), knp.multiply(i, 1j),
            knp.asarray(x, np.complex128))


def conversions_np(x, r, i):
    return (x.astype(np.complex64), x.astype(np.complex128), r.astype(np.complex64), i.astype(np.complex128),
            np.real(x).astype(np.float32), x.astype(bool), r + 1j * r, (i * 1j).astype(np.complex64),  # JAX's weak 1j
            np.asarray(x, np.complex128))


@pytest.mark.parametrize("dtype", COMPLEX, ids=ids)
def test_conversions(dtype, tmp_path):
    rng = np.random.default_rng(3)
    x = cnormal(rng, (7,), dtype)
    x[0], x[1], x[2] = 0, 1j, 2
    r = rng.standard_normal(7).astype(np.float32)
    i = np.arange(7, dtype=np.int64) - 3
    eager_jit_and_kiln_run(conversions, conversions_np, x, r, i, tmp_path=tmp_path, tol=tol(np.complex64))


def numpy_functions(x, y):
    x, y = knp.asarray(x), knp.asarray(y)
    return (knp.isnan(x), knp.isinf(x), knp.isfinite(x), knp.round(y * 1.55, 1), knp.round(y), knp.var(y),
            knp.std(y, axis=0, ddof=1), knp.var(y, where=y.real > 0), knp.linalg.norm(y), knp.linalg.norm(y, axis=1),
            knp.linalg.norm(y, 1), knp.linalg.norm(y, np.inf), knp.linalg.norm(y, "fro"), knp.linspace(y[0, 0], y[1, 1], 4),
            knp.log2(y), knp.log10(y), knp.exp2(y), knp.expm1(y * 1e-3), knp.log1p(y * 1e-3), knp.log1p(y),
            knp.mean(y, axis=1), knp.allclose(y, y * (1 + 1e-9)), knp.diff(y, axis=0))


def numpy_functions_np(x, y):
    return (np.isnan(x), np.isinf(x), np.isfinite(x), np.round(y * 1.55, 1), np.round(y), np.var(y),
            np.std(y, axis=0, ddof=1), np.var(y, where=y.real > 0), np.linalg.norm(y), np.linalg.norm(y, axis=1),
            np.linalg.norm(y, 1), np.linalg.norm(y, np.inf), np.linalg.norm(y, "fro"), np.linspace(y[0, 0], y[1, 1], 4),
            np.log2(y), np.log10(y), np.exp2(y), np.expm1(y * 1e-3), np.log1p(y * 1e-3), np.log1p(y),
            np.mean(y, axis=1), np.allclose(y, y * (1 + 1e-9)), np.diff(y, axis=0))


@pytest.mark.parametrize("dtype", COMPLEX, ids=ids)
def test_numpy_functions_of_complex_arrays(dtype, tmp_path):
    """isnan/isinf/isfinite look at both parts, round rounds both, var/std and the norms use |x|."""
    x = np.array([1 + 2j, complex(np.nan, 1), complex(1, np.nan), complex(np.inf, -1), complex(0, -np.inf), 3], dtype)
    y = cnormal(np.random.default_rng(9), (3, 4), dtype)
    eager_jit_and_kiln_run(numpy_functions, numpy_functions_np, x, y, tmp_path=tmp_path, tol=10 * tol(dtype))


def ordering(z, w):
    z, w = knp.asarray(z), knp.asarray(w)
    return (knp.sort(z), knp.argsort(z), knp.sort_complex(w.real), knp.sort_complex(knp.stack([z, w])),
            knp.maximum(z, w), knp.minimum(z, w), knp.max(w), knp.min(knp.stack([z, w]), axis=0), z < w, z <= w,
            z > w, z >= w, knp.fmax(w, w[::-1]), knp.argmax(z), knp.argmin(w), knp.argmax(knp.stack([z, w]), axis=0),
            knp.argmin(knp.stack([w, z]), axis=1))


@np.errstate(invalid="ignore")
def ordering_np(z, w):
    return (np.sort(z), np.argsort(z, kind="stable"), np.sort_complex(w.real), np.sort_complex(np.stack([z, w])),
            np.maximum(z, w), np.minimum(z, w), np.max(w), np.min(np.stack([z, w]), axis=0), z < w, z <= w,
            z > w, z >= w, np.fmax(w, w[::-1]), np.argmax(z), np.argmin(w), np.argmax(np.stack([z, w]), axis=0),
            np.argmin(np.stack([w, z]), axis=1))


@pytest.mark.parametrize("dtype", COMPLEX, ids=ids)
def test_ordering_is_numpys(dtype, tmp_path):
    """Real parts, then imaginary parts; NaNs sort last ([R + Rj, R + nanj, nan + Rj, nan + nanj]),
    maximum/minimum propagate them, comparisons with a NaN are False."""
    nan = np.nan
    z = np.array([1 + 2j, 1 - 1j, complex(nan, 0), -3, 1 + 2j, complex(2, nan), 0.5j, complex(nan, nan)], dtype)
    w = np.array([1 + 3j, 1 - 1j, 2, complex(-3, 0.5), 0, 5, -0.5j, 7 - 1j], dtype)
    eager_jit_and_kiln_run(ordering, ordering_np, z, w, tmp_path=tmp_path)


def test_complex_functions_without_a_compiled_form_say_so():
    z = np.ones(3, np.complex64)
    np.testing.assert_allclose(np.asarray(knp.arcsin(z * 0.5)), np.arcsin(z * 0.5), rtol=1e-6)  # eagerly numpy's
    with pytest.raises(ShapeError, match="asin does not accept dtype complex64"):
        kiln.jit(knp.arcsin)(z)
    with pytest.raises(NotImplementedError, match="norm: the ord=2 norm of a complex matrix needs a complex SVD"):
        knp.linalg.norm(np.ones((2, 2), np.complex64), 2)
    with pytest.raises(TypeError, match="inv: unsupported dtype complex128"):
        knp.linalg.inv(np.eye(2) * 1j)


def test_complex_to_real_astype_keeps_the_real_part_without_warning():
    """numpy's astype drops the imaginary part with a ComplexWarning; kiln's, like JAX's, silently."""
    x = np.array([1.5 + 2j, -3 - 1j], np.complex64)
    for f in (lambda z: knp.asarray(z).astype(np.float32), kiln.jit(lambda z: z.astype(np.float64)), kiln.jit(lambda z: z.astype(np.int32))):
        np.testing.assert_array_equal(np.asarray(f(x)), x.real.astype(np.asarray(f(x)).dtype))


def reductions(x, y):
    x, y = knp.asarray(x), knp.asarray(y)
    return (knp.sum(x), knp.sum(x, axis=0), knp.prod(x, axis=1), knp.prod(x[:, :3]), knp.mean(x, axis=1),
            knp.cumsum(x, axis=1), knp.cumprod(x, axis=1), x @ y, knp.dot(x[0], y[:, 0]), knp.einsum("ij,jk->ik", x, y), knp.outer(x[0], y[0]),
            knp.vdot(x, x), knp.trace(x[:, :4]), knp.prod(x[:, :0], axis=1))


def reductions_np(x, y):
    return (np.sum(x), np.sum(x, axis=0), np.prod(x, axis=1), np.prod(x[:, :3]), np.mean(x, axis=1),
            np.cumsum(x, axis=1), np.cumprod(x, axis=1), x @ y, np.dot(x[0], y[:, 0]), np.einsum("ij,jk->ik", x, y), np.outer(x[0], y[0]),
            np.vdot(x, x), np.trace(x[:, :4]), np.prod(x[:, :0], axis=1))


@pytest.mark.parametrize("dtype", COMPLEX, ids=ids)
def test_reductions_and_products(dtype, tmp_path):
    """reduce_prod is a tree of complex products (7 terms: an odd count at every level)."""
    rng = np.random.default_rng(4)
    x, y = cnormal(rng, (4, 7), dtype), cnormal(rng, (7, 3), dtype)
    eager_jit_and_kiln_run(reductions, reductions_np, x, y, tmp_path=tmp_path, tol=10 * tol(dtype))


def structural(x, idx):
    x, idx = knp.asarray(x), knp.asarray(idx)
    return (x.reshape(3, 4), x.T, x[1:, ::2], x[::-1], knp.concatenate([x, x[:1]]), knp.pad(x, 1),
            knp.pad(x, ((0, 1), (2, 0)), constant_values=1 - 2j), knp.take(x.T, idx % 2, axis=1), x[idx],
            x.at[0, 1].set(7j), x.at[idx, 0].add(1 + 1j), knp.stack([x, 2 * x]), knp.broadcast_to(x[0], (3, 2)),
            knp.roll(x, 1), knp.flip(x, 1), lax.dynamic_slice(x, (idx[0], 0), (1, 2)),
            lax.dynamic_update_slice(x, knp.ones((1, 2), x.dtype) * 3j, (idx[1], 0)))


def structural_np(x, idx):
    a = x.copy()
    a[0, 1] = 7j
    b = x.copy()
    np.add.at(b, (idx, 0), 1 + 1j)
    c = x.copy()
    c[idx[1]:idx[1] + 1, 0:2] = 3j
    return (x.reshape(3, 4), x.T, x[1:, ::2], x[::-1], np.concatenate([x, x[:1]]), np.pad(x, 1),
            np.pad(x, ((0, 1), (2, 0)), constant_values=1 - 2j), np.take(x.T, idx % 2, axis=1), x[idx], a, b,
            np.stack([x, 2 * x]), np.broadcast_to(x[0], (3, 2)), np.roll(x, 1), np.flip(x, 1),
            x[idx[0]:idx[0] + 1, 0:2], c)


@pytest.mark.parametrize("dtype", COMPLEX, ids=ids)
def test_structural(dtype, tmp_path):
    rng = np.random.default_rng(5)
    x = cnormal(rng, (6, 2), dtype)
    idx = np.array([4, 1, 4], np.int32)
    eager_jit_and_kiln_run(structural, structural_np, x, idx, tmp_path=tmp_path, tol=tol(dtype))


def loops(z, n):
    z, n = knp.asarray(z), knp.asarray(n)
    def body(i, c):
        return c * (1 + 0.5j) + z[i]

    def step(c, x):
        c = c * x + 1j
        return c, knp.conj(c)

    carry, ys = lax.scan(step, z[0], z)
    w = lax.while_loop(lambda c: knp.abs(c[0]) < 100.0, lambda c: (c[0] * (1 + 1j), c[1] + 1), (z[1], 0))
    picked = lax.cond(n > 2, lambda a: a * 2j, lambda a: knp.conj(a), z)
    return lax.fori_loop(0, 3, body, z[2]), carry, ys, w[0], w[1], picked


def loops_np(z, n):
    c = z[2]
    for i in range(3):
        c = c * np.asarray(1 + 0.5j, z.dtype) + z[i]
    carry, ys = z[0], []
    for x in z:
        carry = carry * x + np.asarray(1j, z.dtype)
        ys.append(np.conj(carry))
    w, k = z[1], 0
    while abs(w) < 100:
        w, k = w * np.asarray(1 + 1j, z.dtype), k + 1
    return c, carry, np.array(ys), w, np.int32(k), z * np.asarray(2j, z.dtype) if n > 2 else np.conj(z)


@pytest.mark.parametrize("dtype", COMPLEX, ids=ids)
def test_control_flow_carries_complex_values(dtype, tmp_path):
    """scan, while, cond and fori_loop carry complex values as two float parts when compiled."""
    rng = np.random.default_rng(6)
    z = cnormal(rng, (5,), dtype)
    for n in (np.int32(1), np.int32(3)):
        eager_jit_and_kiln_run(loops, loops_np, z, n, tmp_path=tmp_path, tol=10 * tol(dtype))


def test_promotion_follows_numpy_and_jax_weak_types():
    """Arrays promote as numpy (complex64 + float64 -> complex128); a Python complex is weak as in JAX:
    complex64 with float32 or int32 arrays, complex128 with float64, numpy's complex128 eagerly alone."""
    c64, c128 = np.ones(2, np.complex64), np.ones(2, np.complex128)
    f32, f64, i32 = np.ones(2, np.float32), np.ones(2, np.float64), np.ones(2, np.int32)
    for a, b in [(c64, f64), (c64, f32), (c64, c128), (c64, i32), (f32, c128), (c64, np.ones(2, np.int64))]:
        want = np.result_type(a, b)
        assert knp.add(a, b).dtype == want and kiln.jit(knp.add)(a, b).dtype == want
    for x, want in [(f32, np.complex64), (f64, np.complex128), (i32, np.complex64), (c64, np.complex64)]:
        assert np.asarray(kiln.jit(lambda v: v * 1j)(x)).dtype == want, (x.dtype, want)
    assert knp.add(1j, 2).dtype == np.complex128 and knp.add(1j, 2) == 2 + 1j
    root = kiln.jit(lambda: knp.sqrt(2j))()  # a Python number alone: JAX's complex64 traced (float32 for 2.0)
    assert root.dtype == np.complex64 and np.isclose(complex(root), 1 + 1j, rtol=1e-7)
    assert knp.complex64 is np.complex64 and knp.complex128 is np.complex128
    assert knp.iscomplexobj(c64) and not knp.iscomplexobj(f32)
    assert kiln.jit(lambda v: np.int32(knp.iscomplexobj(v)))(c64) == 1


def test_lax_complex_parts():
    rng = np.random.default_rng(7)
    a, b = rng.standard_normal(4), rng.standard_normal(4)
    for f in (lambda a, b: lax.complex(a, b), kiln.jit(lambda a, b: lax.complex(a, b))):
        z = np.asarray(f(a, b))
        assert z.dtype == np.complex128
        np.testing.assert_array_equal(z, a + 1j * b)
    z = (a + 1j * b).astype(np.complex64)
    for f in (lambda z: (lax.real(z), lax.imag(z), lax.conj(z)), kiln.jit(lambda z: (lax.real(z), lax.imag(z), lax.conj(z)))):
        check_like_numpy(f(z), (z.real, z.imag, np.conj(z)))


def test_errors():
    with pytest.raises(ShapeError, match=r"complex takes two float32 or two float64 operands of one shape, got f32\[2\] and f64\[2\]"):
        kiln.jit(lax.complex)(np.ones(2, np.float32), np.ones(2))
    with pytest.raises(ShapeError, match=r"real takes a complex64 or complex128 operand, got f32\[2\]"):
        kiln.jit(lax.real)(np.ones(2, np.float32))
    with pytest.raises(CompileError, match="cummax of complex values cannot be compiled yet"):
        kiln.jit(lax.cummax)(np.ones(3, np.complex64))
    with pytest.raises(CompileError, match="scatter with update='mul' of complex values cannot be compiled yet"):
        kiln.jit(lambda z: z.at[0].multiply(2j))(np.ones(3, np.complex64))


# ---- gradients of real losses through complex intermediates ---------------------------------------

def loss(x, y):
    z = x + 1j * y
    w = knp.exp(z) * knp.conj(z) + z * z / (z + 2.0) - knp.sqrt(z + 3.0) * knp.log(z + 4.0)
    u = knp.sin(z) * knp.cosh(z) / (1.5 + knp.tanh(z))
    return (knp.sum(knp.real(w * knp.conj(w))) + knp.sum(knp.abs(u)) + knp.sum(knp.angle(w))
            + knp.real(knp.vdot(z, w)) + knp.imag(knp.prod(z)) + knp.sum(knp.abs(z) ** 2))


def central(f, args, i, eps=1e-6):
    g = np.zeros_like(args[i])
    for k in range(args[i].size):
        p, m = [a.copy() for a in args], [a.copy() for a in args]
        p[i].flat[k] += eps
        m[i].flat[k] -= eps
        g.flat[k] = (float(f(*p)) - float(f(*m))) / (2 * eps)
    return g


def test_gradients_through_complex_values_match_finite_differences():
    """JAX's convention (grad of a real loss of real inputs), eagerly and under jit, float64 differences."""
    rng = np.random.default_rng(8)
    x, y = rng.standard_normal(4), rng.standard_normal(4)
    want = [central(loss, [x, y], i) for i in (0, 1)]
    for grad in (kiln.grad(loss, argnums=(0, 1)), kiln.jit(kiln.grad(loss, argnums=(0, 1)))):
        got = grad(x, y)
        for g, w in zip(got, want):
            np.testing.assert_allclose(np.asarray(g), w, rtol=1e-6, atol=1e-7)


def test_gradient_of_abs_at_zero_is_finite():
    """d|z| at z = 0 reads |z| as 1 (JAX's rule): 0 there, not NaN."""
    g = kiln.grad(lambda x: knp.sum(knp.abs(x * (1 + 1j))))(np.array([0.0, 2.0]))
    np.testing.assert_allclose(np.asarray(g), [0.0, np.sqrt(2)])


def test_vmap_of_complex_parts():
    z = np.arange(6.0).reshape(2, 3) * (1 - 1j)
    got = kiln.vmap(lambda r: lax.real(lax.complex(r, r)) + lax.imag(lax.conj(lax.complex(r, 2 * r))))(z.real)
    np.testing.assert_array_equal(np.asarray(got), z.real - 2 * z.real)


# ---- the runtime: complex arguments, results and globals --------------------------------------------

def test_kiln_run_reads_and_prints_complex_values(tmp_path):
    """Inline complex arguments as Python writes them; results printed as numpy's str() prints them."""
    z = np.zeros(3, np.complex64)
    kiln_run_exported(lambda a: a * 2j, z, tmp_path=tmp_path)  # writes exported.vmfb
    out = run_kiln_run(f"--module={tmp_path / 'exported.vmfb'}", "--function=run", "--input=3xc64=1+2j,-0.5j,3")
    assert out.stdout.splitlines() == ["result[0]: 3xc64", "[-4.+2.j  1.+0.j  0.+6.j]"], out.stdout  # numpy's str()


def test_complex_global_in_a_program(tmp_path):
    """A complex global is stored as a complex buffer (buffer.view of its parts) and kept between calls."""
    from kiln import Program

    class Rotor(Program, export_name="rotor"):
        _state = Program.export_global(np.array([1 + 0j, 2j], np.complex64), mutable=True)

        def step(self, turn=Program.like(np.complex64(1j))):
            self._state = self._state * turn
            return self._state

    m = Rotor()
    np.testing.assert_array_equal(m.step(np.complex64(1j)), np.array([1j, -2], np.complex64))
    got = m.step(np.complex64(1j))
    assert got.dtype == np.complex64
    np.testing.assert_array_equal(got, np.array([-1, -2j], np.complex64))


def test_buffer_view_checks_the_byte_size():
    """The VM op behind complex arguments and results refuses a view of another byte size."""
    from kiln.vm.isa import Instr
    from kiln.vm.module_spec import ModuleSpec, TensorType
    from kiln.vm.runtime import Context, Instance, KilnRuntimeError, Module
    from kiln.vm.writer import serialize
    from runtime_tools import ensure_runtime_library
    from vm_specs import fn

    ensure_runtime_library()
    parts, bad = TensorType("f32", (2, 2)), TensorType("f32", (3,))
    c2 = TensorType("c64", (2,))
    spec = ModuleSpec("views", functions=[
        fn("join", [("p", parts)], [("z", c2)], [Instr("buffer.view", 1, 0, c2), Instr("ret", [1])]),
        fn("bad", [("p", bad)], [("z", c2)], [Instr("buffer.view", 1, 0, c2), Instr("ret", [1])]),
    ], globals=[], constants=[], kernel_images=[], kernels=[])
    with Instance(worker_count=1) as inst, Module.from_bytes(inst, serialize(spec)) as m, Context(m) as ctx:
        (z,) = ctx.invoke("join", [np.array([[1, 2], [3, -4]], np.float32)])
        np.testing.assert_array_equal(z, np.array([1 + 2j, 3 - 4j], np.complex64))
        with pytest.raises(KilnRuntimeError, match=r"buffer.view: src r0 is 3xf32 \(12 bytes\), which cannot be "
                                                    r"viewed as 2xc64 \(16 bytes\)"):
            ctx.invoke("bad", [np.ones(3, np.float32)])
