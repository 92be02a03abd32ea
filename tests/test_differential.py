"""Differential tests: kiln compiled and run in the C runtime (kiln.jit) against numpy, on
shapes, dtypes, axes and values drawn by hypothesis.

Profiles (docs/testing.md): the default ("ci") runs few examples per test so that the
suite stays fast; `KILN_HYPOTHESIS_PROFILE=long python -m pytest tests/test_differential.py`
runs many more. Compiling is the cost, so each example compiles ONE function that
computes every op of its family at once, shapes are drawn from small pools, and the
jitted functions are cached across examples (kiln.jit does not re-trace a signature
it has seen).

Functions that other parts add to kiln.numpy (math, structural) are picked up when they
exist: each table lists a name, and entries whose name kiln.numpy lacks are left out.
"""
from __future__ import annotations

import functools
import math
import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from hypothesis.extra import numpy as hnp

import kiln
import kiln.nn as nn
import kiln.numpy as knp

settings.register_profile("ci", max_examples=6, deadline=None, derandomize=True, print_blob=True,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.register_profile("long", max_examples=300, deadline=None, print_blob=True,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.load_profile(os.environ.get("KILN_HYPOTHESIS_PROFILE", "ci"))

F32, F64, I32, I8, U8, BOOL = (np.dtype(t) for t in (np.float32, np.float64, np.int32, np.int8, np.uint8, np.bool_))
FLOATS = [F32, F64]
INTS = [I32, I8]

# ----------------------------------------------------------------------------- tolerances: one table
# (rtol, atol) per function family and dtype; integer and bool results must match exactly.
_TRANSCENDENTAL = {F32: (4e-6, 2e-6), F64: (1e-12, 1e-13)}
TOLERANCES = {
    "default": {F32: (2e-6, 1e-6), F64: (1e-13, 1e-14)},
    "transcendental": _TRANSCENDENTAL,            # exp, log, tanh, sin, erf, ... (kiln's mathlib approximations)
    "hyperbolic": {F32: (1e-5, 4e-6), F64: (1e-11, 1e-12)},   # sinh, cosh, arc* (composed of exp/log)
    "reduction": {F32: (1e-5, 1e-5), F64: (1e-12, 1e-12)},    # kiln sums f32 in f64; numpy sums pairwise in f32
    "matmul": {F32: (2e-5, 2e-5), F64: (1e-12, 1e-12)},
    "nn": {F32: (1e-5, 2e-6), F64: (1e-11, 1e-12)},
}


def assert_close(got, want, family: str, what: str):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, f"{what}: shape {got.shape}, numpy {want.shape}"
    assert got.dtype == want.dtype, f"{what}: dtype {got.dtype}, numpy {want.dtype}"
    if got.dtype.kind == "f":
        rtol, atol = TOLERANCES[family].get(got.dtype, TOLERANCES["default"][F32])
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, equal_nan=True, err_msg=what)
    else:
        np.testing.assert_array_equal(got, want, err_msg=what)


# ----------------------------------------------------------------------------- strategies

SHAPES = [(), (1,), (5,), (0,), (2, 3), (1, 4), (3, 1), (0, 3), (2, 3, 4), (3, 1, 2), (1, 1, 1), (2, 0, 2), (17,), (4, 33)]
NONEMPTY = [s for s in SHAPES if 0 not in s]


def values(dtype, shape, domain="any"):
    if dtype.kind == "f":
        lo, hi = {"any": (-10, 10), "pos": (0.125, 10), "unit": (-0.9375, 0.9375), "small": (-3, 3)}[domain]
        elements = st.floats(lo, hi, width=32 if dtype == F32 else 64)
    elif dtype.kind == "b":
        elements = st.booleans()
    else:
        lo, hi = {"any": (-100, 100), "pos": (1, 100), "unit": (-1, 1), "small": (-3, 3)}[domain]
        if dtype.kind == "u":
            lo = max(lo, 0)
        elements = st.integers(lo, hi)
    return hnp.arrays(dtype, shape, elements=elements)


@st.composite
def broadcast_partner(draw, shape):
    """A shape that broadcasts with `shape`: some dims set to 1, some leading dims dropped."""
    drop = draw(st.integers(0, len(shape)))
    dims = [1 if draw(st.booleans()) else d for d in shape[drop:]]
    return tuple(dims)


# ----------------------------------------------------------------------------- op tables
# (name, numpy reference, domain, dtype kinds, tolerance family)

def _np(name):
    return getattr(np, name)


UNARY = [
    ("negative", np.negative, "any", "fi", "default"),
    ("abs", np.abs, "any", "fi", "default"),
    ("square", np.square, "any", "fi", "default"),
    ("sign", np.sign, "any", "fi", "default"),
    ("exp", np.exp, "any", "f", "transcendental"),
    ("log", np.log, "pos", "f", "transcendental"),
    ("tanh", np.tanh, "any", "f", "transcendental"),
    ("sqrt", np.sqrt, "pos", "f", "default"),
    ("reciprocal", np.reciprocal, "pos", "f", "default"),
    ("sin", np.sin, "any", "f", "transcendental"),
    ("cos", np.cos, "any", "f", "transcendental"),
    ("arctan", np.arctan, "any", "f", "transcendental"),
    ("arcsin", np.arcsin, "unit", "f", "hyperbolic"),
    ("arccos", np.arccos, "unit", "f", "hyperbolic"),
    ("arctanh", np.arctanh, "unit", "f", "hyperbolic"),
    ("arcsinh", np.arcsinh, "any", "f", "hyperbolic"),
    ("sinh", np.sinh, "small", "f", "hyperbolic"),
    ("cosh", np.cosh, "small", "f", "hyperbolic"),
    ("expm1", np.expm1, "small", "f", "transcendental"),
    ("log1p", np.log1p, "pos", "f", "transcendental"),
    ("log2", np.log2, "pos", "f", "transcendental"),
    ("log10", np.log10, "pos", "f", "transcendental"),
    ("exp2", np.exp2, "any", "f", "transcendental"),
    ("erf", np.vectorize(math.erf, otypes=[float]), "small", "f", "transcendental"),
    ("floor", np.floor, "any", "f", "default"),
    ("ceil", np.ceil, "any", "f", "default"),
    ("trunc", np.trunc, "any", "f", "default"),
    ("rint", np.rint, "any", "f", "default"),
    ("isfinite", np.isfinite, "any", "f", "default"),
]
UNARY = [u for u in UNARY if hasattr(knp, u[0])]

BINARY = [
    ("add", np.add, "any", "fi", "default"),
    ("subtract", np.subtract, "any", "fi", "default"),
    ("multiply", np.multiply, "any", "fi", "default"),
    ("maximum", np.maximum, "any", "fi", "default"),
    ("minimum", np.minimum, "any", "fi", "default"),
    ("true_divide", np.true_divide, "pos", "f", "default"),
    ("floor_divide", np.floor_divide, "pos", "fi", "default"),
    ("remainder", np.remainder, "pos", "fi", "default"),
    ("power", np.power, "pos", "f", "transcendental"),
    ("arctan2", np.arctan2, "pos", "f", "transcendental"),
    ("equal", np.equal, "any", "fi", "default"),
    ("less", np.less, "any", "fi", "default"),
    ("greater_equal", np.greater_equal, "any", "fi", "default"),
]
BINARY = [b for b in BINARY if hasattr(knp, b[0])]

REDUCTIONS = [
    ("sum", np.sum, True), ("mean", np.mean, False), ("max", np.max, False), ("min", np.min, False),
    ("prod", np.prod, True), ("argmax", np.argmax, False), ("argmin", np.argmin, False),
]
REDUCTIONS = [r for r in REDUCTIONS if hasattr(knp, r[0])]


def _applies(kinds, dtype):
    return dtype.kind in kinds or (dtype.kind == "u" and "i" in kinds)


# ----------------------------------------------------------------------------- compiled families (cached)

@functools.lru_cache(maxsize=None)
def _unary_family(dtype):
    ops = [u for u in UNARY if _applies(u[3], dtype)]

    def fn(x_any, x_pos, x_unit, x_small):
        args = {"any": x_any, "pos": x_pos, "unit": x_unit, "small": x_small}
        return tuple(getattr(knp, name)(args[dom]) for name, _, dom, _, _ in ops)

    return ops, kiln.jit(fn)


@given(st.data())
def test_unary_elementwise(data):
    dtype = data.draw(st.sampled_from(FLOATS + INTS), label="dtype")
    shape = data.draw(st.sampled_from(SHAPES), label="shape")
    ins = {d: data.draw(values(dtype, shape, d), label=d) for d in ("any", "pos", "unit", "small")}
    ops, fn = _unary_family(dtype)
    outs = fn(ins["any"], ins["pos"], ins["unit"], ins["small"])
    for (name, ref, dom, _, fam), got in zip(ops, outs):
        with np.errstate(all="ignore"):
            want = np.asarray(ref(ins[dom]))
        if name == "erf":
            want = want.astype(dtype)
        assert_close(got, want, fam, f"{name}{shape} {dtype}")


@functools.lru_cache(maxsize=None)
def _binary_family(dtype):
    ops = [b for b in BINARY if _applies(b[3], dtype)]

    def fn(a, b, b_pos):
        return tuple(getattr(knp, name)(a, b_pos if dom == "pos" else b) for name, _, dom, _, _ in ops)

    return ops, kiln.jit(fn)


@given(st.data())
def test_binary_elementwise_broadcasting(data):
    dtype = data.draw(st.sampled_from(FLOATS + INTS), label="dtype")
    shape = data.draw(st.sampled_from(SHAPES), label="shape")
    other = data.draw(broadcast_partner(shape), label="other")
    if data.draw(st.booleans(), label="swap"):
        a_shape, b_shape = other, shape
    else:
        a_shape, b_shape = shape, other
    a = data.draw(values(dtype, a_shape, "pos" if dtype.kind == "f" else "any"), label="a")
    b = data.draw(values(dtype, b_shape), label="b")
    b_pos = data.draw(values(dtype, b_shape, "pos"), label="b_pos")
    ops, fn = _binary_family(dtype)
    outs = fn(a, b, b_pos)
    for (name, ref, dom, _, fam), got in zip(ops, outs):
        with np.errstate(all="ignore"):
            want = ref(a, b_pos if dom == "pos" else b)
        assert_close(got, want, fam, f"{name}({a_shape}, {b_shape}) {dtype}")


@given(st.data())
def test_python_scalars_are_weak(data):
    dtype = data.draw(st.sampled_from(FLOATS + INTS), label="dtype")
    shape = data.draw(st.sampled_from(SHAPES), label="shape")
    x = data.draw(values(dtype, shape), label="x")
    fn = _scalar_family()
    got = fn(x)
    assert_close(got[0], x + 2, "default", "x + 2")
    assert_close(got[1], x * 3, "default", "x * 3")
    assert_close(got[2], x - 1, "default", "x - 1")
    assert_close(got[3], x / 4, "default", "x / 4")


@functools.lru_cache(maxsize=None)
def _scalar_family():
    return kiln.jit(lambda x: (x + 2, x * 3, x - 1, x / 4))


@functools.lru_cache(maxsize=None)
def _reduction_family(dtype, axis, keepdims, nonempty):
    ops = [r for r in REDUCTIONS if r[2] or nonempty]
    ops = [r for r in ops if not (r[0] in ("argmax", "argmin") and (keepdims or isinstance(axis, tuple)))]

    def fn(x):
        out = []
        for name, _, _ in ops:
            f = getattr(knp, name)
            out.append(f(x, axis=axis) if name in ("argmax", "argmin") else f(x, axis=axis, keepdims=keepdims))
        return tuple(out)

    return ops, kiln.jit(fn)


@st.composite
def axes_for(draw, ndim):
    kind = draw(st.sampled_from(["none", "int", "tuple"]))
    if kind == "none" or ndim == 0:
        return None
    if kind == "int":
        return draw(st.integers(-ndim, ndim - 1))
    picked = draw(st.lists(st.integers(0, ndim - 1), unique=True, max_size=ndim))
    return tuple(sorted(picked))


@given(st.data())
def test_reductions_axes_keepdims(data):
    dtype = data.draw(st.sampled_from(FLOATS + INTS + [BOOL]), label="dtype")
    shape = data.draw(st.sampled_from(SHAPES), label="shape")
    axis = data.draw(axes_for(len(shape)), label="axis")
    keepdims = data.draw(st.booleans(), label="keepdims")
    x = data.draw(values(dtype, shape, "small"), label="x")
    reduced = range(len(shape)) if axis is None else ([axis % len(shape)] if isinstance(axis, int) else axis)
    nonempty = all(shape[d] != 0 for d in reduced) and (axis is not None or x.size > 0)
    ops, fn = _reduction_family(dtype, axis, keepdims, nonempty)
    ops_run = [(n, r) for n, r, _ in ops if not (n == "mean" and x.size == 0)]
    outs = dict(zip([n for n, _, _ in ops], fn(x)))
    for name, ref in ops_run:
        with np.errstate(all="ignore"):
            want = ref(x, axis=axis) if name in ("argmax", "argmin") else ref(x, axis=axis, keepdims=keepdims)
        if name in ("argmax", "argmin"):
            want = np.asarray(want)
        assert_close(outs[name], np.asarray(want), "reduction", f"{name}({shape}, axis={axis}, keepdims={keepdims}) {dtype}")


MATMUL_SHAPES = [
    ((3,), (3,)), ((2, 3), (3,)), ((3,), (3, 4)), ((2, 3), (3, 4)), ((1, 1), (1, 1)), ((0, 3), (3, 2)),
    ((2, 0), (0, 3)), ((4, 2, 3), (3, 5)), ((3, 1, 2, 3), (2, 3, 4)), ((5, 17), (17, 9)), ((2, 2, 3), (2, 3, 1)),
]


@functools.lru_cache(maxsize=None)
def _matmul_family():
    return kiln.jit(lambda a, b: (a @ b, knp.matmul(a, b), knp.dot(a, b) if a.ndim <= 2 and b.ndim <= 2 else a @ b))


@given(st.data())
def test_matmul_shapes(data):
    dtype = data.draw(st.sampled_from(FLOATS + [I32]), label="dtype")
    sa, sb = data.draw(st.sampled_from(MATMUL_SHAPES), label="shapes")
    a = data.draw(values(dtype, sa, "small"), label="a")
    b = data.draw(values(dtype, sb, "small"), label="b")
    got = _matmul_family()(a, b)
    want = a @ b
    for g, what in zip(got, ("@", "matmul", "dot")):
        assert_close(g, want, "matmul", f"{what}({sa}, {sb}) {dtype}")


@st.composite
def shape_op_case(draw):
    shape = draw(st.sampled_from(SHAPES))
    nd = len(shape)
    perm = tuple(draw(st.permutations(range(nd))))
    new_axis = draw(st.integers(-nd - 1, nd))
    ones = tuple(i for i, d in enumerate(shape) if d == 1)
    return shape, perm, new_axis, ones


@functools.lru_cache(maxsize=None)
def _shape_family(shape, perm, new_axis, ones):
    size = int(np.prod(shape, dtype=np.int64))

    def fn(x):
        out = [knp.reshape(x, (-1,)), knp.reshape(x, (size, 1)), knp.transpose(x, perm), knp.expand_dims(x, new_axis),
               knp.squeeze(x, axis=ones), knp.broadcast_to(x, (2,) + shape), knp.stack([x, x], axis=0)]
        if hasattr(knp, "concatenate") and len(shape):
            out.append(knp.concatenate([x, x], axis=0))
        if hasattr(knp, "flip"):
            out.append(knp.flip(x))
        if hasattr(knp, "swapaxes") and len(shape) >= 2:
            out.append(knp.swapaxes(x, 0, -1))
        if len(shape) and shape[0] > 1:
            out.append(x[1:])
        return tuple(out)

    return kiln.jit(fn)


@given(shape_op_case(), st.sampled_from(FLOATS + INTS + [BOOL]), st.data())
def test_shape_ops(case, dtype, data):
    shape, perm, new_axis, ones = case
    x = data.draw(values(dtype, shape), label="x")
    got = _shape_family(shape, perm, new_axis, ones)(x)
    want = [x.reshape(-1), x.reshape(x.size, 1), np.transpose(x, perm), np.expand_dims(x, new_axis),
            np.squeeze(x, axis=ones), np.broadcast_to(x, (2,) + shape), np.stack([x, x])]
    if hasattr(knp, "concatenate") and len(shape):
        want.append(np.concatenate([x, x]))
    if hasattr(knp, "flip"):
        want.append(np.flip(x))
    if hasattr(knp, "swapaxes") and len(shape) >= 2:
        want.append(np.swapaxes(x, 0, -1))
    if len(shape) and shape[0] > 1:
        want.append(x[1:])
    assert len(got) == len(want)
    for i, (g, w) in enumerate(zip(got, want)):
        assert_close(g, w, "default", f"shape op {i} on {shape} {dtype}")


def _np_lse(x, axis):
    m = np.max(x, axis=axis, keepdims=True)
    return np.squeeze(np.log(np.sum(np.exp(x - m), axis=axis, keepdims=True)) + m, axis=axis)


@functools.lru_cache(maxsize=None)
def _nn_family(axis):
    return kiln.jit(lambda x: (nn.relu(x), nn.gelu(x), nn.gelu(x, approximate=False), nn.silu(x), nn.softplus(x),
                               nn.softmax(x, axis=axis), nn.log_softmax(x, axis=axis), nn.logsumexp(x, axis=axis),
                               nn.standardize(x, axis=axis)))


@given(st.data())
def test_nn_functions(data):
    dtype = data.draw(st.sampled_from(FLOATS), label="dtype")
    shape = data.draw(st.sampled_from([s for s in NONEMPTY if s]), label="shape")
    axis = data.draw(st.integers(-len(shape), len(shape) - 1), label="axis")
    x = data.draw(values(dtype, shape), label="x")
    x64 = x.astype(np.float64)
    sm = np.exp(x64 - np.expand_dims(_np_lse(x64, axis), axis))
    mu = x64.mean(axis=axis, keepdims=True)
    erf = np.vectorize(math.erf)
    want = [np.maximum(x64, 0), 0.5 * x64 * (1 + np.tanh(np.sqrt(2 / np.pi) * (x64 + 0.044715 * x64**3))),
            0.5 * x64 * (1 + erf(x64 / np.sqrt(2))), x64 / (1 + np.exp(-x64)), np.logaddexp(x64, 0), sm,
            x64 - np.expand_dims(_np_lse(x64, axis), axis), _np_lse(x64, axis),
            (x64 - mu) / np.sqrt(((x64 - mu) ** 2).mean(axis=axis, keepdims=True) + 1e-5)]
    names = ["relu", "gelu", "gelu_exact", "silu", "softplus", "softmax", "log_softmax", "logsumexp", "standardize"]
    for name, g, w in zip(names, _nn_family(axis)(x), want):
        assert_close(g, w.astype(dtype), "nn", f"nn.{name}({shape}, axis={axis}) {dtype}")


CONV_CONFIGS = [
    ((1, 5, 5, 2), (3, 3, 2, 3), (1, 1), "SAME", 1),
    ((2, 6, 4, 4), (2, 2, 2, 4), (2, 1), "VALID", 2),
    ((1, 4, 4, 3), (3, 3, 1, 3), (1, 1), "SAME", 3),
]


@functools.lru_cache(maxsize=None)
def _conv_family(strides, padding, groups):
    def fn(x, w):
        out = kiln.lax.conv_general_dilated(x, w, strides, padding, dimension_numbers=("NHWC", "HWIO", "NHWC"),
                                            feature_group_count=groups)
        return out, nn.max_pool(out, (2, 2), (1, 1), "SAME"), nn.avg_pool(out, (2, 2), (2, 2))

    return kiln.jit(fn)


@given(st.data())
def test_conv_and_pooling(data):
    from test_conv import naive_conv, naive_pool

    dtype = data.draw(st.sampled_from(FLOATS), label="dtype")
    xs, ws, strides, padding, groups = data.draw(st.sampled_from(CONV_CONFIGS), label="config")
    x = data.draw(values(dtype, xs, "small"), label="x")
    w = data.draw(values(dtype, ws, "small"), label="w")
    conv, mp, ap = _conv_family(strides, padding, groups)(x, w)
    want = naive_conv(x, w, strides, padding, dimension_numbers=("NHWC", "HWIO", "NHWC"), feature_group_count=groups)
    assert_close(conv, want, "matmul", "conv")
    assert_close(mp, naive_pool(np.asarray(conv), "max", (1, 2, 2, 1), (1, 1, 1, 1), "SAME"), "default", "max_pool")
    want_ap = naive_pool(np.asarray(conv), "add", (1, 2, 2, 1), (1, 2, 2, 1), "VALID") / 4
    assert_close(ap, want_ap.astype(dtype), "reduction", "avg_pool")


if __name__ == "__main__":  # pragma: no cover
    pytest.main([__file__, "-q"])
