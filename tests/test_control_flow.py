"""kiln.lax control flow against plain Python: eagerly, compiled (kiln.jit, in the C runtime),
differentiated against finite differences, batched against loops, and errors."""
import numpy as np
import pytest

import kiln
import kiln.numpy as knp
from kiln import lax
from kiln.lax import ControlFlowError
from kiln.transforms.jvp import DifferentiationError
from references import numerical_grad

MODES = ["eager", "jit"]


def run(fn, *args, mode):
    return kiln.jit(fn)(*args) if mode == "jit" else fn(*args)


@pytest.mark.parametrize("mode", MODES)
def test_cond_picks_the_branch_at_run_time(mode):
    f = lambda x: lax.cond(knp.sum(x) > 0, lambda v: v * 2.0, lambda v: v - 1.0, x)  # noqa: E731
    pos, neg = np.array([1.0, 2.0], np.float32), np.array([-1.0, -2.0], np.float32)
    np.testing.assert_allclose(run(f, pos, mode=mode), pos * 2)
    np.testing.assert_allclose(run(f, neg, mode=mode), neg - 1)


@pytest.mark.parametrize("mode", MODES)
def test_switch_clamps_its_index(mode):
    branches = [lambda x: x, lambda x: x + 1.0, lambda x: x * 10.0]
    f = lambda i, x: lax.switch(i, branches, x)  # noqa: E731
    x = np.float32(2.0)
    for i, expected in [(-3, 2.0), (0, 2.0), (1, 3.0), (2, 20.0), (9, 20.0)]:
        assert float(run(f, np.int32(i), x, mode=mode)) == expected


@pytest.mark.parametrize("mode", MODES)
def test_while_loop_with_data_dependent_trip_count(mode):
    def collatz_steps(n):
        def body(c):
            n, steps = c
            is_even = (n - (n // 2) * 2) == 0
            return lax.cond(is_even, lambda m: m // 2, lambda m: 3 * m + 1, n), steps + 1
        return lax.while_loop(lambda c: c[0] != 1, body, (n, np.int32(0)))[1]

    def python_steps(n):
        steps = 0
        while n != 1:
            n = n // 2 if n % 2 == 0 else 3 * n + 1
            steps += 1
        return steps

    for n in (1, 6, 27):
        assert int(run(collatz_steps, np.int32(n), mode=mode)) == python_steps(n)


@pytest.mark.parametrize("mode", MODES)
def test_fori_loop_static_and_dynamic_bounds(mode):
    f = lambda x: lax.fori_loop(0, 5, lambda i, c: c * 2.0 + knp.astype(i, np.float32), x)  # noqa: E731
    expected = np.float32(1.0)
    for i in range(5):
        expected = expected * 2 + i
    np.testing.assert_allclose(run(f, np.float32(1.0), mode=mode), expected)
    g = lambda n, x: lax.fori_loop(0, n, lambda i, c: c + 1.5, x)  # noqa: E731
    np.testing.assert_allclose(run(g, np.int32(4), np.float32(0), mode=mode), 6.0)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("reverse", [False, True])
def test_scan_carry_and_stacked_outputs(mode, reverse):
    def f(xs):
        return lax.scan(lambda c, x: (c + x, c * x), np.float32(1.0), xs, reverse=reverse)

    xs = np.arange(1, 6, dtype=np.float32)
    carry, ys = run(f, xs, mode=mode)
    c, expected = np.float32(1.0), np.zeros(5, np.float32)
    for i in (range(4, -1, -1) if reverse else range(5)):
        expected[i] = c * xs[i]
        c = c + xs[i]
    np.testing.assert_allclose(carry, c)
    np.testing.assert_allclose(ys, expected)


@pytest.mark.parametrize("mode", MODES)
def test_scan_over_trees_with_length_and_map(mode):
    def f(xs):
        def step(carry, x):
            s, n = carry
            return (s + x["a"].sum(), n + 1), {"sq": x["a"] ** 2, "b": x["b"] * 2}
        return lax.scan(step, (np.float32(0), np.int32(0)), xs)

    xs = {"a": np.arange(12, dtype=np.float32).reshape(4, 3), "b": np.arange(4, dtype=np.int32)}
    (s, n), ys = run(f, xs, mode=mode)
    assert float(s) == xs["a"].sum() and int(n) == 4
    np.testing.assert_allclose(ys["sq"], xs["a"] ** 2)
    np.testing.assert_array_equal(ys["b"], xs["b"] * 2)
    np.testing.assert_allclose(run(lambda v: lax.map(lambda r: knp.max(r), v), xs["a"], mode=mode), xs["a"].max(axis=1))


@pytest.mark.parametrize("mode", MODES)
def test_grad_through_cond_scan_and_fori(mode):
    def f(x):
        y = lax.cond(knp.sum(x) > 0, lambda v: knp.tanh(v) * v, lambda v: knp.exp(v), x)
        y = lax.fori_loop(0, 3, lambda i, c: knp.tanh(c * x), y)
        _, ys = lax.scan(lambda c, v: (c * v, c + v), np.float64(1.0), y)
        return knp.sum(ys ** 2)

    for x in (np.array([0.3, -1.2, 2.0]), np.array([-0.3, -1.2, 0.5])):
        got = run(kiln.grad(f), x, mode=mode)
        np.testing.assert_allclose(got, numerical_grad(f, x), rtol=1e-6, atol=1e-9)


def test_scan_rnn_gradient_wrt_weights_and_inputs():
    def rnn(w, xs):
        def step(h, x):
            h = knp.tanh(h @ w + x)
            return h, knp.sum(h)
        h, ys = lax.scan(step, knp.zeros((3,)), xs)
        return knp.sum(h ** 2) + knp.sum(ys)

    rng = np.random.default_rng(0)
    w, xs = rng.standard_normal((3, 3)) * 0.5, rng.standard_normal((5, 3))
    gw, gx = kiln.grad(rnn, argnums=(0, 1))(w, xs)
    np.testing.assert_allclose(gw, numerical_grad(lambda v: rnn(v, xs), w), rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(gx, numerical_grad(lambda v: rnn(w, v), xs), rtol=1e-6, atol=1e-9)


def test_forward_mode_through_while():
    f = lambda x: lax.while_loop(lambda c: c[0] < 3, lambda c: (c[0] + 1, c[1] * x), (0, x))[1]  # noqa: E731
    y, t = kiln.jvp(f, (np.float64(1.5),), (np.float64(1.0),))
    np.testing.assert_allclose(y, 1.5 ** 4)
    np.testing.assert_allclose(t, 4 * 1.5 ** 3)


@pytest.mark.parametrize("mode", MODES)
def test_vmap_of_control_flow_matches_a_python_loop(mode):
    xs = np.array([1.0, -2.0, 3.0, 0.5])
    f = kiln.vmap(lambda x: lax.cond(x > 0, lambda v: v * 2, lambda v: -v, x))
    np.testing.assert_allclose(run(f, xs, mode=mode), [2.0, 2.0, 6.0, 1.0])
    g = kiln.vmap(lambda x: lax.while_loop(lambda c: c < 10, lambda c: c * 2, x))
    np.testing.assert_allclose(run(g, xs[[0, 2, 3]], mode=mode), [16.0, 12.0, 16.0])
    h = kiln.vmap(lambda x: lax.scan(lambda c, y: (c + y, c), 0.0, x))
    m = np.arange(6.0).reshape(2, 3)
    carry, ys = run(h, m, mode=mode)
    np.testing.assert_allclose(carry, m.sum(axis=1))
    np.testing.assert_allclose(ys, np.cumsum(m, axis=1) - m)


def test_errors_name_the_function_and_what_differs():
    with pytest.raises(ControlFlowError, match=r"cond: branch outputs differ: branch 0 \(false_fun <lambda>\) returns "
                                              r"\(f32\[\]\).*branch 1 \(true_fun <lambda>\) returns \(f32\[3\]\)"):
        lax.cond(True, lambda x: x, lambda x: x.sum(), np.ones(3, np.float32))
    with pytest.raises(ControlFlowError, match=r"switch: branch outputs differ: branch 0 \(<lambda>\) returns "
                                              r"\(f32\[3\]\).*branch 2 \(<lambda>\) returns \(f32\[\]\)"):
        lax.switch(1, [lambda x: x, lambda x: x + 1, lambda x: x.sum()], np.ones(3, np.float32))

    def grow(c):
        return c.reshape(1, 3)

    with pytest.raises(ControlFlowError, match=r"while_loop: grow changes carry leaf 0 from f64\[3\] to f64\[1,3\]"):
        lax.while_loop(lambda c: c.sum() < 3, grow, np.ones(3))

    def to_int(c, x):
        return knp.astype(c, np.int32), x

    with pytest.raises(ControlFlowError, match=r"scan: to_int changes carry leaf 0 from f32\[\] to i32\[\]"):
        lax.scan(to_int, np.float32(0), np.ones(3))
    with pytest.raises(ControlFlowError, match=r"boolean scalar"):
        lax.while_loop(lambda c: c, lambda c: c, np.ones(2))
    with pytest.raises(DifferentiationError, match="while_loop is not supported"):
        kiln.grad(lambda x: lax.while_loop(lambda c: c < 3, lambda c: c * x, x))(np.float64(1.5))


def test_changed_carry_structure_with_python_scalar_init():
    """Python-scalar initial carries are promoted after the structure check, so the error is the ControlFlowError."""
    def drop_one(c):
        return (c[0] + 1,)

    with pytest.raises(ControlFlowError, match=r"while_loop: drop_one must return a carry with the structure of the "
                                              r"initial value .*it returned"):
        lax.while_loop(lambda c: c[0] < 10, drop_one, (0, 1.0))

    def nest(c, x):
        return (c, c), x

    with pytest.raises(ControlFlowError, match=r"scan: nest must return a carry with the structure of the initial value"):
        lax.scan(nest, 0.0, np.ones(3))


@pytest.mark.parametrize("mode", MODES)
def test_grad_through_switch(mode):
    branches = [lambda v: knp.sin(v) * v, lambda v: knp.exp(v) / (1.0 + v * v), lambda v: v ** 3]
    f = lambda x, i: knp.sum(lax.switch(i, branches, x) * np.array([0.5, -1.0, 2.0]))  # noqa: E731
    x = np.array([0.3, -1.2, 0.8])
    for i in (0, 1, 2):
        got = run(kiln.grad(f), x, np.int32(i), mode=mode)
        np.testing.assert_allclose(got, numerical_grad(lambda v: f(v, np.int32(i)), x), rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize("mode", MODES)
def test_switch_with_a_batched_index(mode):
    branches = [lambda v: v * 2.0, lambda v: knp.sin(v), lambda v: -v]
    f = kiln.vmap(lambda i, x: lax.switch(i, branches, x))
    idx = np.array([2, 0, 1, 7, -1], np.int32)
    xs = np.linspace(-1.0, 1.0, 10).reshape(5, 2)
    expected = np.stack([[x * 2.0, np.sin(x), -x][min(max(i, 0), 2)] for i, x in zip(idx, xs)])
    np.testing.assert_allclose(run(f, idx, xs, mode=mode), expected, rtol=1e-12)


@pytest.mark.parametrize("mode", MODES)
def test_grad_of_reverse_and_length_only_scans(mode):
    def reverse(xs):
        carry, ys = lax.scan(lambda c, x: (c * knp.sin(x) + x, c * x), np.float64(1.0), xs, reverse=True)
        return carry + knp.sum(ys * np.arange(1.0, 5.0))

    def python_reverse(xs):
        c, total = 1.0, 0.0
        for i in range(len(xs) - 1, -1, -1):
            total += c * xs[i] * (i + 1)
            c = c * np.sin(xs[i]) + xs[i]
        return c + total

    xs = np.array([0.4, -0.7, 1.1, 0.2])
    np.testing.assert_allclose(reverse(xs), python_reverse(xs), rtol=1e-12)
    np.testing.assert_allclose(run(kiln.grad(reverse), xs, mode=mode), numerical_grad(python_reverse, xs), rtol=1e-6,
                               atol=1e-9)

    def length_only(w):
        carry, ys = lax.scan(lambda c, _: (knp.tanh(c * w[0] + w[1]), c), np.float64(0.5), None, length=4)
        return carry + knp.sum(ys ** 2)

    def python_length_only(w):
        c, total = 0.5, 0.0
        for _ in range(4):
            total += c * c
            c = np.tanh(c * w[0] + w[1])
        return c + total

    w = np.array([0.9, -0.3])
    np.testing.assert_allclose(length_only(w), python_length_only(w), rtol=1e-12)
    np.testing.assert_allclose(run(kiln.grad(length_only), w, mode=mode), numerical_grad(python_length_only, w),
                               rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize("mode", MODES)
def test_vmap_of_fori_loop_with_batched_bounds(mode):
    f = kiln.vmap(lambda lo, hi, x: lax.fori_loop(lo, hi, lambda i, c: c * 1.5 + knp.astype(i, np.float64), x))
    los, his = np.array([0, 2, 5, 1], np.int32), np.array([3, 2, 9, 6], np.int32)
    xs = np.array([1.0, -2.0, 0.5, 0.25])

    def python(lo, hi, x):
        for i in range(lo, hi):
            x = x * 1.5 + i
        return x

    expected = [python(lo, hi, x) for lo, hi, x in zip(los, his, xs)]
    np.testing.assert_allclose(run(f, los, his, xs, mode=mode), expected, rtol=1e-12)
    only_hi = kiln.vmap(lambda hi: lax.fori_loop(0, hi, lambda i, c: c + i, np.int32(0)))
    np.testing.assert_array_equal(run(only_hi, his, mode=mode), [sum(range(h)) for h in his])


# Complex carries and outputs carry tangents (a spectral solver's rfft state in a scan): the gradients were
# zero. Values recorded from JAX 0.10.2 (float32).
COMPLEX_LOOPS = {
    "scan": (lambda a: knp.sum(knp.real(lax.scan(lambda c, _: (c * 1.01, None),
                                                  (a * knp.ones(4)).astype(np.complex64), None, length=2)[0])),
             4.0804),
    "fori": (lambda a: knp.sum(knp.real(lax.fori_loop(0, 2, lambda i, c: c * 1.01,
                                                      (a * knp.ones(4)).astype(np.complex64)))), 4.0804),
    "scan_ys": (lambda a: _complex_scan_ys(a), 16.720798),
    "cond": (lambda a: knp.abs(lax.cond(a > 0, lambda z: z * (1 + 2j), lambda z: z, lax.complex(a, a))),
             3.1622777),
}


def _complex_scan_ys(a):
    c, ys = lax.scan(lambda c, _: (c * (1.01 + 0.5j), knp.imag(c)),
                     lax.complex(a * knp.ones(4), 0.5 * a * knp.ones(4)), None, length=2)
    return knp.sum(knp.real(c) + knp.imag(c)) + knp.sum(ys ** 2)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", list(COMPLEX_LOOPS))
def test_grad_through_complex_carries(name, mode):
    fn, want = COMPLEX_LOOPS[name]
    np.testing.assert_allclose(run(kiln.grad(fn), np.float32(1.0), mode=mode), want, rtol=1e-6)
    _, tangent = kiln.jvp(fn, (np.float32(1.0),), (np.float32(1.0),))
    np.testing.assert_allclose(tangent, want, rtol=1e-6)


def test_forward_mode_through_a_complex_while():
    f = lambda a: knp.real(lax.while_loop(lambda c: knp.abs(c) < 3, lambda c: c * (1 + 1j),  # noqa: E731
                                          lax.complex(a, np.float32(0))))
    y, t = kiln.jvp(f, (np.float32(1.0),), (np.float32(1.0),))
    np.testing.assert_allclose((y, t), (-4.0, -4.0))  # (1+i)^4 = -4


@pytest.mark.parametrize("mode", MODES)
def test_weak_carry_passed_on_from_another_weak_carry_takes_the_body_dtype(mode):
    """The second leaf is the first one's previous value: it learns the body's float32 only once the first
    has it, a second promotion pass (an ODE solver's last accepted time beside the time)."""
    dt = np.float32(0.25)

    def f(x):
        t, last = lax.while_loop(lambda s: s[0] < x, lambda s: (s[0] + dt, s[0]), (knp.asarray(0.0), knp.asarray(0.0)))
        chain = lax.fori_loop(0, 3, lambda i, c: (c[1], c[2], c[2] * dt), (1.0, 2.0, 3.0))
        return t - last, chain

    step, chain = run(f, np.float32(1.0), mode=mode)
    assert step.dtype == np.float32 and all(c.dtype == np.float32 for c in chain)
    np.testing.assert_allclose(step, 0.25)
    np.testing.assert_allclose([float(c) for c in chain], [0.75, 0.1875, 0.046875])
