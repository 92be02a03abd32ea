"""Complex numbers' own primitives (real, imag, complex, conj), as jax.lax's, with their rules.

complex64 and complex128 are dtypes (docs/numpy.md, "Complex numbers"): the arithmetic primitives
(add, mul, exp, dot_general, ...) take complex operands as they are; these four move between a complex
value and its float parts. Kernels never see a complex value: kiln.compiler.complex_lowering rewrites
every complex operation of a graph into float operations on the parts before fusion.
"""
from __future__ import annotations

import numpy as np

from ..core import dtypes
from ..core.ad_util import Zero, instantiate
from ..core.aval import ShapedArray
from ..core.primitive import Primitive, register
from ..core.trace import get_aval
from ..transforms.jvp import tangent_aval
from . import prims
from .prims import ShapeError, _elementwise_rule

__all__ = ["real", "imag", "complex", "conj"]


def _complex_operand(name, x: ShapedArray) -> ShapedArray:
    if not dtypes.is_complex(x.dtype):
        raise ShapeError(f"{name} takes a complex64 or complex128 operand, got {x}")
    return x


def _unary(name, numpy_fn, result):
    prim = register(Primitive(name))
    prim.def_traits(fusion="elementwise")  # computed on the float parts (kiln.compiler.complex_lowering)
    prim.def_abstract_eval(lambda x: ShapedArray(x.shape, result(_complex_operand(name, x).dtype), x.weak_type))

    @prim.def_impl
    def impl(x):
        x = np.asarray(x)
        return np.asarray(numpy_fn(x)).astype(result(x.dtype))

    return prim


real_p = _unary("real", np.real, dtypes.real_dtype)
imag_p = _unary("imag", np.imag, dtypes.real_dtype)
conj_p = _unary("conj", np.conjugate, lambda d: d)

complex_p = register(Primitive("complex"))
complex_p.def_traits(fusion="elementwise")


@complex_p.def_abstract_eval
def _complex_abstract(x, y):
    if x.shape != y.shape or x.dtype != y.dtype or x.dtype not in (np.float32, np.float64):
        raise ShapeError(f"complex takes two float32 or two float64 operands of one shape, got {x} and {y}")
    return ShapedArray(x.shape, dtypes.complex_dtype(x.dtype), x.weak_type and y.weak_type)


@complex_p.def_impl
def _complex_impl(x, y):
    x, y = np.asarray(x), np.asarray(y)
    out = np.empty(x.shape, dtypes.complex_dtype(x.dtype))
    out.real, out.imag = x, y
    return out


def real(x):
    """jax.lax.real: the real part of a complex array."""
    return real_p.bind(x)


def imag(x):
    """jax.lax.imag: the imaginary part of a complex array."""
    return imag_p.bind(x)


def conj(x):
    """jax.lax.conj: the complex conjugate."""
    return conj_p.bind(x)


def complex(x, y):  # noqa: A001  (jax.lax.complex)
    """jax.lax.complex: x + i y from two float32 or two float64 arrays of one shape."""
    return complex_p.bind(x, y)


# ---- rules: all four are linear, with JAX's transposes (the transpose, not the adjoint: grad of a real
# loss through complex intermediates matches JAX's).

def _linear_jvp(prim):
    def rule(primals, tangents):
        ts = [instantiate(t, tangent_aval(get_aval(p))) for t, p in zip(tangents, primals)]
        return prim.bind(*primals), prim.bind(*ts)

    return rule


def _zeros(x):
    return np.zeros(get_aval(x).shape, get_aval(x).dtype)


for _p in (real_p, imag_p, conj_p, complex_p):
    _p.jvp_rule = _linear_jvp(_p)
    _p.batching_rule = _elementwise_rule(_p)

real_p.transpose_rule = lambda ct, x: [complex_p.bind(ct, _zeros(ct))]
imag_p.transpose_rule = lambda ct, x: [complex_p.bind(_zeros(ct), prims.neg.bind(ct))]
conj_p.transpose_rule = lambda ct, x: [conj_p.bind(ct)]
complex_p.transpose_rule = lambda ct, x, y: [real_p.bind(ct), prims.neg.bind(imag_p.bind(ct))]


def _abs_jvp(real_rule):
    """abs of a complex z: d|z| = real(conj(z) t) / |z|, with |z| = 0 read as 1 (JAX's rule); real operands
    keep their rule."""

    def rule(primals, tangents):
        (z,), (t,) = primals, tangents
        if not dtypes.is_complex(get_aval(z).dtype):
            return real_rule(primals, tangents)
        out = prims.abs.bind(z)
        if isinstance(t, Zero):
            return out, Zero(tangent_aval(get_aval(out)))
        zero = np.zeros((), get_aval(out).dtype)
        safe = prims.select.bind(prims.eq.bind(out, prims.broadcast_in_dim.bind(zero, shape=get_aval(out).shape,
                                                                                 broadcast_dimensions=())),
                                 prims.broadcast_in_dim.bind(np.ones((), get_aval(out).dtype),
                                                             shape=get_aval(out).shape, broadcast_dimensions=()),
                                 out)
        return out, prims.div.bind(real_p.bind(prims.mul.bind(conj_p.bind(z), t)), safe)

    return rule


prims.abs.jvp_rule = _abs_jvp(prims.abs.jvp_rule)
