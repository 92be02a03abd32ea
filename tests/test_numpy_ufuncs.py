"""kiln.numpy's ufunc objects: calls with dtype=/where=/out=, .reduce, .accumulate, .outer and .at against
numpy's ufuncs eagerly, under kiln.jit and through kiln-run; gradients; every error message."""
import numpy as np
import pytest

import kiln
import kiln.numpy as knp
from kiln_tools import check_like_numpy, eager_and_jit, eager_jit_and_kiln_run, random_array
from references import numerical_grad

RNG = np.random.default_rng(31)
X = random_array(RNG, (3, 4))
XI = (np.arange(12, dtype=np.int8).reshape(3, 4) - 5)

BINARY = ["add", "multiply", "maximum", "minimum", "subtract", "divide", "logical_and", "logical_or", "logical_xor",
          "bitwise_and", "bitwise_or", "bitwise_xor", "fmax", "fmin", "hypot", "logaddexp", "gcd", "lcm"]


def _operand(name):
    return XI if name.startswith("bitwise") or name in ("gcd", "lcm") else X


def _numpy_at(name, a, indices, b=None):
    a = a.copy()
    getattr(np, name).at(a, indices, *([] if b is None else [b]))
    return a


def test_objects_and_attributes():
    assert isinstance(knp.add, knp.ufunc) and isinstance(knp.sin, knp.ufunc)
    for name in BINARY + ["sin", "exp", "isnan", "logical_not", "negative", "fabs", "spacing", "nextafter", "bitwise_count"]:
        u, nu = getattr(knp, name), getattr(np, name)
        assert (u.nin, u.nout, u.nargs, u.__name__) == (nu.nin, nu.nout, nu.nargs, name)
        assert u.identity == nu.identity or (u.identity is None and nu.identity is None)
    assert repr(knp.add) == "<kiln.numpy.ufunc 'add'>"


def _calls(name):
    """Each method of the ufunc `name` against numpy's: (label, kiln function, numpy function)."""
    u, nu = getattr(knp, name), getattr(np, name)
    where = (np.array([0, 0, 2]), np.array([1, 1, 3]))
    calls = [(f"reduce axis={axis}", lambda v, axis=axis: u.reduce(v, axis=axis), lambda v, axis=axis: nu.reduce(v, axis=axis))
             for axis in (0, 1, -1, None, (0, 1))]
    calls += [
        ("reduce keepdims", lambda v: u.reduce(v, axis=1, keepdims=True), lambda v: nu.reduce(v, axis=1, keepdims=True)),
        ("reduce initial where", lambda v: u.reduce(v, axis=1, initial=2, where=v > 0),
         lambda v: nu.reduce(v, axis=1, initial=2, where=v > 0)),
        ("accumulate", lambda v: u.accumulate(v, axis=1), lambda v: nu.accumulate(v, axis=1)),
        ("accumulate axis 0", u.accumulate, nu.accumulate),
        ("outer", lambda v: u.outer(v[0], v[1:, :2]), lambda v: nu.outer(v[0], v[1:, :2])),
        ("at", lambda v: u.at(v, where, v[0, :3], inplace=False), lambda v: _numpy_at(name, v, where, v[0, :3])),
        ("at rows", lambda v: u.at(v, np.array([1, 2, 1]), v[0], inplace=False),
         lambda v: _numpy_at(name, v, np.array([1, 2, 1]), v[0])),
    ]
    return calls


@pytest.mark.parametrize("name", BINARY)
def test_methods(name):
    """Every method eagerly against numpy (a numpy error must be kiln's error too), then all of them in one
    jitted function (one compile per ufunc keeps the test fast)."""
    a = _operand(name)
    supported = []
    for label, kfn, nfn in _calls(name):
        try:
            want = nfn(a)
        except ValueError as e:
            with pytest.raises(ValueError, match=f"{name}.reduce: {e}"):
                kfn(a)
            continue
        check_like_numpy(kfn(a), want, tol=1e-9)
        supported.append((kfn, nfn))
    check_like_numpy(kiln.jit(lambda v: [k(v) for k, _ in supported])(a), [n(a) for _, n in supported], tol=1e-9)


def test_reduce_details():
    a = np.abs(X) + 0.5
    left_fold = a[:, 0]
    for i in range(1, 4):
        left_fold = left_fold ** a[:, i]
    # numpy's own power.reduce depends on the memory layout; kiln's is the left fold numpy documents
    np.testing.assert_allclose(knp.power.reduce(a, axis=1), left_fold, rtol=1e-12)
    eager_and_jit(lambda v: knp.add.reduce(v, dtype=np.int32), lambda v: np.add.reduce(v, dtype=np.int32), XI)
    eager_and_jit(lambda v: knp.multiply.reduce(v, axis=None, dtype=np.float32), lambda v: np.multiply.reduce(v, axis=None, dtype=np.float32), XI)
    eager_and_jit(lambda v: knp.maximum.reduce(v, axis=(), initial=0.5), lambda v: np.maximum.reduce(v, axis=(), initial=0.5), X)
    eager_and_jit(lambda v: knp.subtract.reduce(v[:, :0], axis=1, initial=3.0), lambda v: np.subtract.reduce(v[:, :0], axis=1, initial=3.0), X)
    eager_and_jit(lambda v: knp.bitwise_and.reduce(v[:, :0], axis=1), lambda v: np.bitwise_and.reduce(v[:, :0], axis=1), XI)
    eager_and_jit(lambda v: knp.logical_and.reduce(v, axis=0, initial=True), lambda v: np.logical_and.reduce(v, axis=0, initial=True), X > 0)
    with pytest.raises(ValueError, match="subtract.reduce: reduction operation 'subtract' is not reorderable"):
        knp.subtract.reduce(X, axis=(0, 1))
    with pytest.raises(ValueError, match="maximum.reduce: zero-size array to reduction operation maximum which has no identity"):
        knp.maximum.reduce(X[:, :0], axis=1)
    with pytest.raises(ValueError, match="fmax.reduce: zero-size array to reduction operation fmax which has no identity"):
        knp.fmax.reduce(X[:, :0], axis=1)
    with pytest.raises(ValueError, match="subtract.reduce: reduction operation 'subtract' does not have an identity"):
        knp.subtract.reduce(X, axis=1, where=X > 0)
    with pytest.raises(ValueError, match="sin.reduce: only supported for binary functions"):
        knp.sin.reduce(X)
    with pytest.raises(ValueError, match="add.accumulate: cannot accumulate on a scalar"):
        knp.add.accumulate(np.float64(1))


def test_call_keywords():
    eager_and_jit(lambda v: knp.add(v, 1.0, where=v > 0), lambda v: np.where(v > 0, v + 1, 0.0), X)
    eager_and_jit(lambda v: knp.sin(v, where=[True, False, True, False]), lambda v: np.where([True, False, True, False], np.sin(v), 0.0), X)
    eager_and_jit(lambda v: knp.add(v, v, dtype=np.float32), lambda v: np.add(v, v, dtype=np.float32), X)
    eager_and_jit(lambda v: knp.multiply(v, 3, dtype=np.int16), lambda v: np.multiply(v, 3, dtype=np.int16), XI)
    eager_and_jit(lambda v: knp.exp(v, out=None), lambda v: np.exp(v, out=None), X)
    with pytest.raises(NotImplementedError, match="add: out= is not supported: kiln arrays are immutable"):
        knp.add(X, X, out=np.empty_like(X))
    with pytest.raises(NotImplementedError, match="add.reduce: out= is not supported"):
        knp.add.reduce(X, out=np.empty(4))
    with pytest.raises(TypeError, match=r"add\(\) takes 2 positional arguments but 1 were given"):
        knp.add(X)


def test_at_details():
    eager_and_jit(lambda v: knp.sin.at(v, [0, 0, 2], inplace=False), lambda v: _numpy_at("sin", v, [0, 0, 2]), X)
    eager_and_jit(lambda v: knp.negative.at(v, (slice(None), 1), inplace=False), lambda v: _numpy_at("negative", v, (slice(None), 1)), X)
    eager_and_jit(lambda v: knp.add.at(v, (slice(None), [1, 1]), 1.0, inplace=False), lambda v: _numpy_at("add", v, (slice(None), [1, 1]), 1.0), X)
    eager_and_jit(lambda v: knp.subtract.at(v, 1, 2.0, inplace=False), lambda v: _numpy_at("subtract", v, 1, 2.0), X)
    # traced positions along axis 0, repeated ones applied twice
    got = kiln.jit(lambda v, i: knp.subtract.at(v, i, v[0], inplace=False))(X, np.array([2, 2, 0]))
    np.testing.assert_allclose(got, _numpy_at("subtract", X, np.array([2, 2, 0]), X[0]), rtol=1e-12)
    with pytest.raises(ValueError, match="add.at: kiln arrays are immutable.*inplace=False"):
        knp.add.at(X, [0], 1.0)
    with pytest.raises(TypeError, match="subtract.at: a second operand b is required"):
        knp.subtract.at(X, [0], inplace=False)
    with pytest.raises(TypeError, match="sin.at: takes no operand b"):
        knp.sin.at(X, [0], 1.0, inplace=False)
    with pytest.raises(IndexError, match="subtract.at: index 5 is out of bounds"):
        knp.subtract.at(X, [5], 1.0, inplace=False)


def test_existing_calls_and_window_ops():
    """The ufunc objects still work as plain functions everywhere: operators, reduce_window, grad, vmap."""
    import kiln.lax as lax

    eager_and_jit(lambda v: lax.reduce_window(v, -np.inf, knp.maximum, (2, 2), (1, 1), "VALID"),
                  lambda v: np.max(np.lib.stride_tricks.sliding_window_view(v, (2, 2)), axis=(-2, -1)), X)
    f = lambda v: knp.sum(knp.multiply.reduce(knp.add.outer(v, v), axis=1))  # noqa: E731
    x = np.array([0.3, -0.2, 0.5])
    np.testing.assert_allclose(kiln.grad(f)(x), numerical_grad(f, x), rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(kiln.vmap(knp.add.reduce)(X), np.add.reduce(X, axis=1), rtol=1e-12)
    g = lambda v: knp.sum(knp.logaddexp.reduce(v, axis=1) + knp.subtract.accumulate(v, axis=1)[:, -1])  # noqa: E731
    np.testing.assert_allclose(kiln.grad(g)(X), numerical_grad(g, X), rtol=1e-6, atol=1e-9)
    h = lambda v: knp.sum(knp.maximum.at(v, [0, 2], v[1] * 2, inplace=False) ** 2)  # noqa: E731
    np.testing.assert_allclose(kiln.grad(h)(x), numerical_grad(h, x), rtol=1e-6, atol=1e-9)


def test_exported(tmp_path):
    a = random_array(RNG, (3, 4), np.float32)
    i = np.array([[1, 0, 2, 1]], np.int8)
    eager_jit_and_kiln_run(
        lambda v, w: (knp.add.reduce(v, axis=1), knp.maximum.accumulate(v, axis=0), knp.subtract.outer(v[0], v[1]),
                      knp.bitwise_or.reduce(w, axis=1), knp.logaddexp.reduce(v, axis=None),
                      knp.add.at(v, (np.array([0, 0]), np.array([1, 1])), 1.0, inplace=False),
                      knp.hypot.at(v, [0, 0], 2.0, inplace=False), knp.multiply(v, 2, where=v > 0)),
        lambda v, w: (np.add.reduce(v, axis=1), np.maximum.accumulate(v, axis=0), np.subtract.outer(v[0], v[1]),
                      np.bitwise_or.reduce(w, axis=1), np.logaddexp.reduce(v, axis=None),
                      _numpy_at("add", v, (np.array([0, 0]), np.array([1, 1])), np.float32(1.0)),
                      _numpy_at("hypot", v, [0, 0], np.float32(2.0)), np.where(v > 0, v * 2, np.float32(0))),
        a, i, tmp_path=tmp_path, tol=1e-5)


def test_user_defined_ufunc():
    """jax.numpy.ufunc's constructor: a function of nin arrays gets the methods (a left fold for reduce)."""
    def smooth_max(a, b):
        return knp.logaddexp(a, b)

    u = knp.ufunc(smooth_max, 2, 1, identity=-np.inf)
    assert (u.nin, u.nout, u.nargs, u.identity, u.__name__) == (2, 1, 3, -np.inf, "smooth_max")
    eager_and_jit(lambda v: [u(v, 1.0), u.reduce(v, axis=1), u.accumulate(v, axis=0), u.outer(v[0], v[1]),
                             u.at(v, [0, 0], 2.0, inplace=False)],
                  lambda v: [np.logaddexp(v, 1.0), np.logaddexp.reduce(v, axis=1), np.logaddexp.accumulate(v, axis=0),
                             np.logaddexp.outer(v[0], v[1]), _numpy_at("logaddexp", v, [0, 0], 2.0)], X, tol=1e-9)
    with pytest.raises(ValueError, match="ufunc: only functions with one output"):
        knp.ufunc(smooth_max, 2, 2)


def test_reduceat():
    x, xi = random_array(RNG, (6, 4)), np.arange(24, dtype=np.int8).reshape(6, 4)
    for name, a in (("add", x), ("multiply", x), ("maximum", x), ("subtract", x), ("bitwise_or", xi), ("add", xi)):
        u, nu = getattr(knp, name), getattr(np, name)
        eager_and_jit(lambda v: [u.reduceat(v, [0, 4, 1, 5]), u.reduceat(v, [0, 2, 2], axis=1)],
                      lambda v: [nu.reduceat(v, [0, 4, 1, 5]), nu.reduceat(v, [0, 2, 2], axis=1)], a, tol=1e-9)
    with pytest.raises(IndexError, match=r"add.reduceat: indices must be integers in \[0, 6\) along axis 0"):
        knp.add.reduceat(x, [0, 6])
    with pytest.raises(TypeError, match="add.reduceat: indices must be concrete"):
        kiln.jit(lambda v, i: knp.add.reduceat(v, i))(x, np.array([0, 2]))
