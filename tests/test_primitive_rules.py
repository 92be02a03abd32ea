"""Every registered primitive's JVP, transpose and batching rules, case by case.

CASES holds functions that exercise each primitive. test_every_rule_has_a_case fails when a
registered primitive has a rule that no case checks; every check also asserts that the rule it
is about actually ran, so a case cannot miss its primitive silently.

- JVP rules: jvp and grad against central finite differences in float64, eagerly and under
  kiln.jit. Zero-derivative primitives (rounding, comparisons, bitwise, argmax, ...): the
  tangent through them is zero, and so is the gradient where the output is a float.
- Transpose rules: the dot-product identity <vjp(ct), t> == <ct, jvp(t)> (finite differences
  stand in for jvp where forward mode is not supported).
- Batching rules: vmap against a Python loop, eagerly and under kiln.jit, with every argument
  mapped over axis 0, and with the first one mapped over its last axis and the others unmapped.

The jit checks compile one function per group of cases (compiling is what costs time).
"""
from __future__ import annotations

import contextlib
import functools
import zlib
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import pytest

import kiln
import kiln.numpy as knp
from kiln import lax
from kiln.core.primitive import all_primitives
from kiln.lax import math_prims as mp
from kiln.lax import pooling_select as ps
from kiln.lax import structural_prims as sp
from kiln.transforms.jvp import DifferentiationError, Zero, jvp_flat
from kiln.transforms.linear_call import linear_call

# Primitives that have no transformation rules, and why none is needed.
NO_RULES = {
    "iota": "no operands: no trace ever sees it with a tangent or a batch axis",
    "global_load": "Program globals: only inside exported functions, outside any transformation",
    "global_store": "Program globals: only inside exported functions, outside any transformation",
    "kernel_call": "transformations trace through the callee (inline_rule, tested in test_transforms.py)",
    "jacobi_two_sided": "inside eigh's graph only: transformations apply eigh's rules and never see it",
    "jacobi_one_sided": "inside svd's graph only: transformations apply svd's rules and never see it",
    "eigh_ql": "inside eigh's graph only: transformations apply eigh's rules and never see it",
    "cholesky_native": "inside cholesky's graph only (float32/float64): transformations apply cholesky's rules",
    "triangular_solve_native": "inside triangular_solve's graph only: transformations apply its rules",
    "lu_native": "inside lu's graph only (float32/float64): transformations apply lu's rules and never see it",
    "syrk_native": "inside cholesky's graph only (a large matrix split into blocks): cholesky's rules apply",
    "cholesky_join_native": "inside cholesky's graph only (a large matrix split into blocks): cholesky's rules apply",
    "qr_kernel": "inside qr's graph only (float32/float64): transformations apply qr's rules and never see it",
    "svd_kernel": "inside svd's graph only (float32/float64): transformations apply svd's rules and never see it",
    "complex_parts": "made by the compiler's complex lowering, after every transformation",
    "complex_from_parts": "made by the compiler's complex lowering, after every transformation",
}

# Primitives whose rules only run inside a transformation the cases here cannot reach, tested elsewhere.
RULES_TESTED_ELSEWHERE = {
    name: "a collective: its JVP and transpose rules run only for grad/jvp inside kiln.vmap(axis_name=...) (a "
          "derivative taken around the vmap goes through its vmap rule); tests/test_collectives_ad.py checks them "
          "against JAX's numbers and finite differences"
    for name in ("psum", "pmax", "pmin", "all_gather", "psum_scatter", "ppermute", "all_to_all")
} | {
    name: "a host step with no value of its own: its JVP rule prints (or calls back with) the primal and its vmap "
          "rule once per example, which tests/test_debug_print.py checks against the printed text and the "
          "callback's arguments"
    for name in ("debug_print", "debug_callback")
}

RULES = {"jvp": "jvp_rule", "transpose": "transpose_rule", "vmap": "batching_rule"}
BATCH = 3


@dataclass
class Case:
    """fn(*make(rng)) exercises primitive `prim`; float64 arguments are differentiated, others held fixed."""

    prim: str
    fn: Callable
    make: Callable
    name: str = ""
    zero: bool = False  # the derivative through prim is zero
    checks: set | None = None  # which of prim's rules this case checks (default: all it has)
    diff: tuple | None = None  # argument positions to differentiate (default: the float ones)
    grad: bool = True  # reverse mode applies (not for while_loop)
    forward: bool = True  # forward mode applies (not for custom_vjp)
    eps: float = 1e-6
    rtol: float = 1e-6
    batched_rtol: float = 1e-10  # batched against one at a time (float32 kernels: compiled and eager math differ)
    vmap_error: str | None = None  # vmap must raise a DifferentiationError matching this
    seed: int = field(init=False)

    def __post_init__(self):
        self.name = self.name or self.prim
        self.seed = zlib.crc32(self.name.encode())

    @property
    def rule_checks(self) -> set:
        prim = all_primitives()[self.prim]
        have = {k for k, attr in RULES.items() if getattr(prim, attr) is not None}
        return have if self.checks is None else set(self.checks)


# ---- samplers ---------------------------------------------------------------------------

def normal(*shape):
    return lambda r: r.standard_normal(shape)


def uniform(lo, hi, *shape):
    return lambda r: r.uniform(lo, hi, shape)


def away_from_zero(*shape):
    return lambda r: r.choice([-1.0, 1.0], shape) * r.uniform(0.3, 2.0, shape)


def integers(lo, hi, *shape, dtype=np.int32):
    return lambda r: r.integers(lo, hi, shape).astype(dtype)


def dyadic(dtype, *shape):
    """Multiples of 2**-10, so that x +- 2**-10 is exact in float32 too."""
    return lambda r: (r.integers(-2000, 2000, shape) / 1024).astype(dtype)


def boolean(*shape):
    return lambda r: r.random(shape) < 0.5


def args(*samplers):
    return lambda r: tuple(s(r) for s in samplers)


def distinct(*shape):
    """Values spaced at least 0.1 apart (no ties for max, min, sort, argmax)."""
    return lambda r: (r.permutation(int(np.prod(shape))).reshape(shape) * 0.37 + r.uniform(0, 0.1, shape)) - 1.0


def rem_args(r):
    y = r.uniform(0.8, 1.5, (2, 3))
    q = r.integers(-3, 3, (2, 3)) + r.uniform(0.2, 0.8, (2, 3))
    return q * y, y


def with_ties(r):
    x, y = r.standard_normal((2, 3)), r.standard_normal((2, 3))
    return x, np.where(r.random((2, 3)) < 0.5, x, y)


def positive_definite(n):
    """Symmetric positive definite n x n matrices, well conditioned."""
    def sample(r):
        a = r.standard_normal((n, n))
        return a @ a.T / n + np.eye(n)
    return sample


def well_conditioned(n):
    """n x n matrices kept away from singular (and from pivot ties) by a diagonal shift."""
    return lambda r: r.standard_normal((n, n)) + 3 * np.eye(n)


def unary(prim):
    return lambda x: prim.bind(x)


def binary(prim):
    return lambda x, y: prim.bind(x, y)


# ---- custom derivatives used by the cases ---------------------------------------------------

@kiln.custom_jvp
def softplus(x):
    return knp.log(1 + knp.exp(x))


@softplus.defjvp
def _softplus_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    return softplus(x), t / (1 + knp.exp(-x))


@kiln.custom_jvp
def difference(x, y):
    return x - y


@difference.defjvp
def _difference_jvp(primals, tangents):
    (x, y), (tx, ty) = primals, tangents
    return x - y, tx - ty  # the tangent is a `sub` of two linear values: reverse mode transposes it


@kiln.custom_vjp
def cube(x):
    return x * x * x


cube.defvjp(lambda x: (x * x * x, x * x), lambda x2, g: (3 * x2 * g,))


# ---- the cases ------------------------------------------------------------------------------

P = mp.P
FLOAT_UNARY = [
    ("abs", lax.abs, away_from_zero(2, 3)), ("exp", lax.exp, normal(2, 3)), ("log", lax.log, uniform(0.5, 2, 2, 3)),
    ("tanh", lax.tanh, normal(2, 3)), ("sqrt", lax.sqrt, uniform(0.5, 2, 2, 3)), ("neg", lax.neg, normal(2, 3)),
    ("sin", unary(P["sin"]), normal(2, 3)), ("cos", unary(P["cos"]), normal(2, 3)),
    ("tan", unary(P["tan"]), uniform(-1.2, 1.2, 2, 3)), ("asin", unary(P["asin"]), uniform(-0.9, 0.9, 2, 3)),
    ("acos", unary(P["acos"]), uniform(-0.9, 0.9, 2, 3)), ("atan", unary(P["atan"]), normal(2, 3)),
    ("sinh", unary(P["sinh"]), normal(2, 3)), ("cosh", unary(P["cosh"]), normal(2, 3)),
    ("asinh", unary(P["asinh"]), normal(2, 3)), ("acosh", unary(P["acosh"]), uniform(1.2, 3, 2, 3)),
    ("atanh", unary(P["atanh"]), uniform(-0.9, 0.9, 2, 3)), ("exp2", unary(P["exp2"]), normal(2, 3)),
    ("expm1", unary(P["expm1"]), normal(2, 3)), ("log1p", unary(P["log1p"]), uniform(-0.5, 2, 2, 3)),
    ("log2", unary(P["log2"]), uniform(0.5, 2, 2, 3)), ("log10", unary(P["log10"]), uniform(0.5, 2, 2, 3)),
    ("erf", unary(P["erf"]), normal(2, 3)), ("rsqrt", unary(P["rsqrt"]), uniform(0.5, 2, 2, 3)),
]
if "erfc" in P:  # being added alongside this file
    FLOAT_UNARY.append(("erfc", unary(P["erfc"]), normal(2, 3)))

POOL_SELECT = dict(op="max", window_dimensions=(2, 2), window_strides=(1, 2), padding=((0, 1), (1, 0)),
                   base_dilation=(1, 1), window_dilation=(1, 1))

CASES = [Case(name, fn, args(s)) for name, fn, s in FLOAT_UNARY] + [
    Case("integer_pow", lambda x: lax.integer_pow(x, 3), args(normal(2, 3))),
    Case("integer_pow", lambda x: lax.integer_pow(x, -2), args(uniform(0.5, 2, 2, 3)), name="integer_pow_neg"),
    Case("integer_pow", lambda x: lax.integer_pow(x, 0), args(normal(2, 3)), name="integer_pow_0"),
    Case("add", lax.add, args(normal(2, 3), normal(2, 3))),
    Case("sub", lax.sub, args(normal(2, 3), normal(2, 3)), checks={"jvp", "vmap"}),
    Case("sub", difference, args(normal(2, 3), normal(2, 3)), name="sub_linear", checks={"transpose"}),
    Case("mul", lax.mul, args(normal(2, 3), normal(2, 3))),
    Case("div", lax.div, args(normal(2, 3), away_from_zero(2, 3))),
    Case("pow", lax.pow, args(uniform(0.5, 2, 2, 3), normal(2, 3))),
    Case("max", lax.max, args(distinct(2, 3), distinct(2, 3))),
    Case("min", lax.min, args(distinct(2, 3), distinct(2, 3))),
    Case("atan2", binary(P["atan2"]), args(normal(2, 3), away_from_zero(2, 3))),
    Case("rem", binary(P["rem"]), rem_args),
    Case("select", lax.select, args(boolean(2, 3), normal(2, 3), normal(2, 3))),
    Case("convert", lambda x: lax.convert_element_type(x, np.float32), args(dyadic(np.float64, 2, 3)),
         eps=2.0 ** -10, rtol=1e-6),
    Case("convert", lambda x: lax.convert_element_type(x, np.float64) * 3.0, args(dyadic(np.float32, 2, 3)),
         name="convert_from_f32", eps=2.0 ** -10, rtol=1e-6),
    Case("convert", lambda x: lax.convert_element_type(x, np.int32), args(normal(2, 3)), name="convert_to_int",
         zero=True, checks={"jvp", "vmap"}),
    Case("stop_gradient", kiln.stop_gradient, args(normal(2, 3)), zero=True),
    Case("bitcast", lambda x: lax.bitcast_convert_type(lax.bitcast_convert_type(x, np.int64), np.float64),
         args(normal(2, 3)), zero=True),
    # straight-through: the tangent is reduced as the value (50 mantissa bits: finite differences still see it)
    Case("reduce_precision", lambda x: lax.reduce_precision(x, 11, 50) * x, args(normal(2, 3))),
    *[Case(n, binary(getattr(lax.prims, n)), with_ties, zero=True) for n in ("eq", "ne", "lt", "le", "gt", "ge")],
    *[Case(n, unary(P[n]), args(normal(2, 3)), zero=True) for n in ("floor", "ceil", "trunc", "round", "sign")],
    *[Case(n, binary(P[n]), args(integers(-50, 50, 2, 3), integers(-50, 50, 2, 3)), zero=True)
      for n in ("and", "or", "xor")],
    Case("not", unary(P["not"]), args(integers(-50, 50, 2, 3)), zero=True),
    *[Case(n, binary(P[n]), args(integers(-50, 50, 2, 3), integers(0, 9, 2, 3)), zero=True)
      for n in ("shift_left", "shift_right")],
    *[Case(n, lambda x, p=p: p.bind(x, axis=1, index_dtype=np.dtype(np.int32)), args(distinct(2, 4)), zero=True)
      for n, p in (("argmax", sp.argmax_p), ("argmin", sp.argmin_p))],
    # shapes and reductions
    Case("broadcast_in_dim",
         lambda x, y: (lax.broadcast_in_dim(x, (2, 3), (1,)), lax.broadcast_in_dim(y, (2, 4, 3), (0, 2))),
         args(normal(3), normal(2, 1))),
    Case("reshape", lambda x: lax.reshape(x, (3, 2, 1)), args(normal(2, 3))),
    # complex intermediates of real functions (JAX's transposes; tests/test_complex.py checks more)
    Case("complex", lambda x, y: lax.real(lax.complex(x, y) * lax.complex(y, x)) + lax.imag(lax.complex(x, y) ** 2),
         args(normal(2, 3), normal(2, 3))),
    Case("real", lambda x, y: lax.real(lax.complex(x, y) * lax.complex(y, 2 * x)), args(normal(2, 3), normal(2, 3))),
    Case("imag", lambda x, y: lax.imag(lax.complex(x, y) * lax.complex(y, 2 * x)), args(normal(2, 3), normal(2, 3))),
    Case("conj", lambda x, y: lax.real(lax.conj(lax.complex(x, y)) * lax.complex(y, x) * lax.complex(x, 1.5 * y)),
         args(normal(2, 3), normal(2, 3))),
    Case("transpose", lambda x: lax.transpose(x, (2, 0, 1)), args(normal(2, 3, 2))),
    Case("reduce_sum", lambda x: lax.reduce_sum(x, (1,)), args(normal(2, 3, 2))),
    Case("reduce_max", lambda x: lax.reduce_max(x, (0, 2)), args(distinct(2, 3, 2))),
    Case("reduce_min", lambda x: lax.reduce_min(x, (1,)), args(distinct(2, 3, 2))),
    Case("reduce_prod", lambda x: sp.reduce_prod_p.bind(x, axes=(1,)), args(uniform(-1.5, 1.5, 2, 4))),
    Case("reduce_prod", lambda x: sp.reduce_prod_p.bind(x * np.array([1.0, 0.0, 1.0, 1.0]), axes=(1,)),
         args(normal(2, 4)), name="reduce_prod_with_a_zero"),
    Case("dot_general", lambda x, y: lax.dot_general(x, y, (((1,), (0,)), ((), ()))), args(normal(2, 3), normal(3, 4))),
    Case("dot_general", lambda x, y: lax.dot_general(x, y, (((2,), (1,)), ((0,), (0,)))),
         args(normal(2, 3, 4), normal(2, 4, 2)), name="dot_general_batched"),
    # structural
    Case("slice", lambda x: sp.slice(x, (0, 1), (4, 5), (2, 2)), args(normal(4, 5))),
    Case("rev", lambda x: sp.rev(x, (0, 1)), args(normal(2, 3))),
    Case("pad", lambda x: sp.pad(x, 0.5, ((1, 2, 1), (-1, 1, 0))), args(normal(2, 3))),
    Case("concatenate", lambda x, y: sp.concatenate([x, y, x], 1), args(normal(2, 3), normal(2, 1))),
    Case("gather", lambda x, i: sp.gather(x, i, (0,), mode="clip"), args(normal(4, 3), integers(-1, 5, 5, 1))),
    Case("gather", lambda x, i: sp.gather(x, i, (0, 1), mode="fill"), args(normal(4, 3), integers(-1, 5, 5, 2)),
         name="gather_fill"),
    Case("scatter", lambda x, u: sp.scatter(x, np.array([[2], [0]]), u, (0,), update="set"),
         args(normal(4, 3), normal(2, 3))),
    Case("scatter", lambda x, i, u: sp.scatter(x, i, u, (0,), update="add", mode="clip"),
         args(normal(4, 3), integers(-1, 5, 3, 1), normal(3, 3)), name="scatter_add"),
    Case("scatter", lambda x, u: sp.scatter(x, np.array([[3], [1]]), u, (0,), update="mul"),
         args(normal(4, 3), normal(2, 3)), name="scatter_mul", diff=(0,)),
    Case("scatter", lambda x, u: sp.scatter(x, np.array([[1], [3]]), u, (0,), update="max"),
         args(distinct(4, 3), distinct(2, 3)), name="scatter_max", checks={"jvp", "vmap"}),
    Case("dynamic_slice", lambda x, i, j: sp.dynamic_slice(x, (i, j), (2, 2)),
         args(normal(4, 3), integers(-1, 4), integers(0, 3))),
    Case("dynamic_update_slice", lambda x, u, i: sp.dynamic_update_slice(x, u, (i, np.int32(1))),
         args(normal(4, 3), normal(2, 2), integers(-1, 4))),
    Case("sort", lambda x, y: tuple(sp.sort([x, y], dimension=1, num_keys=1)), args(distinct(2, 4), normal(2, 4))),
    *[Case(n, lambda x, p=p, r=r: p.bind(x, axis=1, reverse=r), args(distinct(2, 4)), name=f"{n}_{tag}")
      for n, p in (("cumsum", sp.cumsum_p), ("cumprod", sp.cumprod_p), ("cummax", sp.cummax_p),
                   ("cummin", sp.cummin_p)) for r, tag in ((False, "forward"), (True, "reverse"))],
    Case("conv_general_dilated",
         lambda x, w: lax.conv_general_dilated(x, w, (2, 1), "SAME", rhs_dilation=(1, 2), feature_group_count=2),
         args(normal(1, 4, 5, 4), normal(2, 2, 3, 2))),
    Case("reduce_window", lambda x: lax.reduce_window(x, 0.0, lax.add, (2, 2), (1, 2), "SAME"), args(normal(3, 5))),
    Case("reduce_window", lambda x: lax.reduce_window(x, -np.inf, lax.max, (2, 2), (1, 1), "VALID"),
         args(distinct(3, 4)), name="reduce_window_max", checks={"jvp", "vmap"}),
    # max/min pooling's derivatives: linear in the first operand, the second (distinct values) selects
    Case("select_and_gather_add", lambda t, x: ps.select_and_gather_add(t, x, **POOL_SELECT),
         args(normal(3, 5), distinct(3, 5)), diff=(0,)),
    Case("select_and_scatter_add", lambda c, x: ps.select_and_scatter_add(c, x, **{**POOL_SELECT, "op": "min"}),
         args(normal(3, 3), distinct(3, 5)), diff=(0,)),
    # kiln.lax.linalg's triangular family
    Case("cholesky", lax.linalg.cholesky, args(positive_definite(3))),
    Case("triangular_solve", lambda a, b: lax.linalg.triangular_solve(a, b, left_side=True, lower=True),
         args(well_conditioned(3), normal(3, 2))),
    Case("triangular_solve",
         lambda a, b: lax.linalg.triangular_solve(a, b, left_side=False, transpose_a=True, unit_diagonal=True),
         args(well_conditioned(3), normal(2, 3)), name="triangular_solve_right_transposed_unit"),
    Case("lu", lax.linalg.lu, args(well_conditioned(3))),
    # kiln.lax.linalg's spectral family (vectors through sign-free products: their signs are the algorithm's)
    Case("qr", lambda x: lax.linalg.qr(x, full_matrices=False), args(normal(4, 3)), name="qr_reduced"),
    Case("qr", lax.linalg.qr, args(normal(4, 2)), name="qr_complete_tall"),
    Case("qr", lax.linalg.qr, args(normal(2, 3)), name="qr_wide"),
    Case("eigh", lambda x: (lambda v, w: (v * v, w))(*lax.linalg.eigh(x)), args(normal(3, 3))),
    Case("svd", lambda x: (lambda u, s, vh: (u @ vh, s))(*lax.linalg.svd(x, full_matrices=False)),
         args(normal(3, 2)), name="svd_tall"),
    Case("svd", lambda x: lax.linalg.svd(x, compute_uv=False), args(normal(2, 3)), name="svd_values_wide"),
    # kiln.lax's special functions (lax/special_math.py: composite primitives with JAX's derivative rules)
    Case("lgamma", lax.lgamma, args(uniform(0.3, 6, 2, 3))),
    Case("digamma", lax.digamma, args(uniform(0.3, 6, 2, 3))),
    Case("erf_inv", lax.erf_inv, args(uniform(-0.9, 0.9, 2, 3))),
    Case("erf_inv32", lambda x: lax.erf_inv(x.astype(np.float32)).astype(np.float64), args(uniform(-0.9, 0.9, 2, 3)),
         eps=1e-3, rtol=1e-3),
    Case("erfcinv", kiln.scipy.special.erfcinv, args(uniform(0.1, 1.9, 2, 3))),
    Case("gelu_tanh32", lambda x: kiln.nn.gelu(x.astype(np.float32)).astype(np.float64),
         args(uniform(0.3, 3, 2, 3)), eps=1e-2, rtol=1e-3, batched_rtol=5e-7),  # tails: test_nn_accuracy
    Case("gelu_exp32", lambda x: unary(P["gelu_exp32"])(x.astype(np.float32)).astype(np.float64),
         args(away_from_zero(2, 3)), eps=1e-2, rtol=1e-3, batched_rtol=5e-7),  # gelu's exp(-|z|): both signs
    Case("igamma", lax.igamma, args(uniform(0.5, 4, 2, 3), uniform(0.2, 5, 2, 3))),
    Case("igammac", lax.igammac, args(uniform(0.5, 4, 2, 3), uniform(0.2, 5, 2, 3))),
    Case("betainc", lax.betainc, args(uniform(0.5, 4, 2, 3), uniform(0.5, 4, 2, 3), uniform(0.1, 0.9, 2, 3)),
         rtol=1e-5),
    # control flow and custom derivatives
    Case("cond", lambda p, x, y: lax.cond(p, lambda v: knp.sin(v) * y, lambda v: knp.exp(v) + y, x),
         args(boolean(), normal(2, 3), normal(2, 3))),
    Case("while", lambda n, x: lax.while_loop(lambda c: c[0] < n, lambda c: (c[0] + 1, knp.sin(c[1]) * x + c[1]),
                                              (np.int32(0), x))[1],
         args(integers(0, 4), normal(2, 3)), grad=False),
    Case("scan", lambda c, xs: lax.scan(lambda c, x: (c * knp.sin(x) + x, c * x), c, xs),
         args(normal(3), normal(4, 3))),
    Case("scan", lambda c, xs: lax.scan(lambda c, x: (knp.tanh(c + x), c * x), c, xs, reverse=True),
         args(normal(3), normal(4, 3)), name="scan_reverse"),
    Case("custom_jvp_call", softplus, args(normal(2, 3))),
    Case("custom_linear_solve", lambda a, b: lax.custom_linear_solve(
        lambda x: a @ x, b, lambda mv, r: knp.linalg.solve(a, r), transpose_solve=lambda vm, r: knp.linalg.solve(a.T, r)),
        args(well_conditioned(3), normal(3))),
    Case("custom_vjp_call", cube, args(normal(2, 3)), forward=False),
    Case("linear_call", lambda m, v: linear_call(lambda m, v: m @ v, lambda m, c: m.T @ c, m, v),
         args(normal(3, 2), normal(2)), diff=(1,)),
    Case("custom_lin", cube, args(normal(2, 3)), forward=False,
         vmap_error="forward-mode differentiation .* of custom_vjp function cube is not supported"),
]


def by_name(name) -> Case:
    return next(c for c in CASES if c.name == name)


def cases_for(check):
    return [c for c in CASES if check in c.rule_checks]


# ---- helpers --------------------------------------------------------------------------------

def is_float(x) -> bool:
    return np.asarray(x).dtype.kind == "f"


def sample(case: Case, k: int = 0) -> tuple:
    return case.make(np.random.default_rng(case.seed + k))


def diff_positions(case: Case, xs) -> tuple:
    return case.diff if case.diff is not None else tuple(i for i, x in enumerate(xs) if is_float(x))


def closed(case: Case, xs) -> Callable:
    """case.fn as a function of the differentiated arguments only (the others are fixed to xs)."""
    pos = diff_positions(case, xs)

    def f(*d):
        full = list(xs)
        for i, v in zip(pos, d):
            full[i] = v
        return case.fn(*full)

    return f


@functools.lru_cache(maxsize=None)
def weights(name: str) -> list:
    """Fixed random weights, one per float output leaf, that make the output a scalar loss."""
    case = by_name(name)
    rng = np.random.default_rng(case.seed + 99)
    outs = kiln.tree_leaves(case.fn(*sample(case)))
    return [rng.uniform(0.5, 1.5, np.shape(o)) if is_float(o) else None for o in outs]


def scalar_loss(case: Case, xs) -> Callable:
    """sum(output * weights) over the float outputs, as a function of the differentiated arguments."""
    f, w = closed(case, xs), weights(case.name)

    def loss(*d):
        total = 0.0
        for o, wi in zip(kiln.tree_leaves(f(*d)), w):
            if wi is not None:
                total = total + knp.sum(knp.astype(o, np.float64) * wi)
        return total

    return loss


def tangents(case: Case, xs) -> list:
    """Random tangents in multiples of 2**-10 (so x +- eps*t stays exact in float32 for dyadic x, eps)."""
    rng = np.random.default_rng(case.seed + 7)
    return [(np.round(rng.standard_normal(np.shape(xs[i])) * 1024) / 1024).astype(np.asarray(xs[i]).dtype)
            for i in diff_positions(case, xs)]


def central(f, d: list, direction: list, eps: float) -> list:
    """Central differences of every output leaf of f at d along direction."""
    up = f(*[x + eps * t for x, t in zip(d, direction)])
    down = f(*[x - eps * t for x, t in zip(d, direction)])
    return [(np.asarray(a, np.float64) - np.asarray(b, np.float64)) / (2 * eps)
            for a, b in zip(kiln.tree_leaves(up), kiln.tree_leaves(down))]


@functools.lru_cache(maxsize=None)
def references(name: str):
    """(args, differentiated args, tangents, FD directional derivative per output leaf, FD gradient)."""
    case = by_name(name)
    xs = sample(case)
    d = [xs[i] for i in diff_positions(case, xs)]
    ts = tangents(case, xs)
    fd_jvp = central(closed(case, xs), d, ts, case.eps)
    loss = scalar_loss(case, xs)
    fd_grad = []
    for k, x in enumerate(d):
        g = np.zeros(np.shape(x))
        for i in range(np.size(x)):
            e = [np.zeros(np.shape(v), np.asarray(v).dtype) for v in d]
            e[k].flat[i] = 1
            g.flat[i] = central(loss, d, e, case.eps)[0]
        fd_grad.append(g)
    return xs, d, ts, fd_jvp, fd_grad


@contextlib.contextmanager
def rule_runs(case: Case, check: str):
    """Asserts that case.prim's rule for `check` is called inside the block."""
    prim = all_primitives()[case.prim]
    attr = RULES[check]
    rule = getattr(prim, attr)
    calls = []

    def spy(*a, **k):
        calls.append(1)
        return rule(*a, **k)

    setattr(prim, attr, spy)
    try:
        yield
    finally:
        setattr(prim, attr, rule)
    assert calls, f"case {case.name}: the {attr} of {case.prim} never ran"


def assert_close(got, want, case: Case, what: str):
    np.testing.assert_allclose(np.asarray(got, np.float64), np.asarray(want, np.float64), rtol=case.rtol, atol=1e-8,
                               err_msg=f"{case.name}: {what}")


def float_outputs(tree) -> list[int]:
    return [k for k, o in enumerate(kiln.tree_leaves(tree)) if is_float(o)]


# ---- the registry is covered ------------------------------------------------------------

def test_every_rule_has_a_case():
    """A primitive with a JVP, transpose or batching rule must have a case that checks it."""
    missing = []
    for name, prim in sorted(all_primitives().items()):
        has = [check for check, attr in RULES.items() if getattr(prim, attr) is not None]
        if not has and prim.inline_rule is None and name not in NO_RULES:
            missing.append(f"{name}: no rules at all (add them, or list it in NO_RULES with the reason)")
        for check in has:
            if name in RULES_TESTED_ELSEWHERE:
                continue
            if not any(c.prim == name and check in c.rule_checks for c in CASES):
                missing.append(f"{name}: {RULES[check]} has no {check} case")
    assert not missing, "primitives whose rules are untested:\n" + "\n".join(missing)
    unknown = {c.prim for c in CASES} - set(all_primitives())
    assert not unknown, f"cases for unregistered primitives: {unknown}"
    assert len({c.name for c in CASES}) == len(CASES), "case names must be unique"


# ---- eager checks, one case at a time --------------------------------------------------------

@pytest.mark.parametrize("case", cases_for("jvp"), ids=lambda c: c.name)
def test_jvp_rule(case):
    """jvp and grad against central finite differences (zero-derivative cases: zero tangents and gradients)."""
    xs, d, ts, fd_jvp, fd_grad = references(case.name)
    f = closed(case, xs)
    if case.zero:
        _check_zero_derivative(case, xs)
        return
    with rule_runs(case, "jvp"):
        if case.forward:
            out, t_out = kiln.jvp(f, tuple(d), tuple(ts))
            for k in float_outputs(out):
                assert_close(kiln.tree_leaves(t_out)[k], fd_jvp[k], case, f"jvp of output {k}")
        if case.grad:
            g = kiln.grad(scalar_loss(case, xs), argnums=tuple(range(len(d))))(*d)
            for k, (got, want) in enumerate(zip(g, fd_grad)):
                assert_close(got, want, case, f"grad of argument {k}")


def _check_zero_derivative(case: Case, xs):
    """Tangents of every argument (integer ones too) give a zero output tangent; float gradients are zero."""
    rng = np.random.default_rng(case.seed + 3)
    ts = [(rng.standard_normal(np.shape(x)) * 5).astype(np.asarray(x).dtype) for x in xs]
    with rule_runs(case, "jvp"):
        _, t_out = jvp_flat(lambda *a: kiln.tree_leaves(case.fn(*a)), list(xs), ts)
    for t in t_out:
        assert isinstance(t, Zero) or not np.any(np.asarray(t)), f"{case.name}: non-zero tangent {t}"
    if any(is_float(x) for x in xs) and float_outputs(case.fn(*xs)):
        d = [xs[i] for i in diff_positions(case, xs)]
        g = kiln.grad(scalar_loss(case, xs), argnums=tuple(range(len(d))))(*d)
        for got in g:
            np.testing.assert_array_equal(got, 0.0, err_msg=f"{case.name}: gradient")


@pytest.mark.parametrize("case", cases_for("transpose"), ids=lambda c: c.name)
def test_transpose_rule(case):
    """<vjp(ct), t> == <ct, jvp(t)> for random ct and t, with the transpose rule on the reverse path."""
    xs, d, ts, fd_jvp, _ = references(case.name)
    f = closed(case, xs)
    rng = np.random.default_rng(case.seed + 5)
    with rule_runs(case, "transpose"):
        out, vjp_fn = kiln.vjp(f, *d)
        outs = kiln.tree_leaves(out)
        cts = [rng.standard_normal(np.shape(o)).astype(np.asarray(o).dtype) if is_float(o) else
               np.zeros(np.shape(o), np.asarray(o).dtype) for o in outs]
        grads = vjp_fn(kiln.tree_unflatten(kiln.tree_flatten(out)[1], cts))
    lhs = sum(np.vdot(np.asarray(g, np.float64), np.asarray(t, np.float64)) for g, t in zip(grads, ts))
    if case.forward:
        _, t_out = kiln.jvp(f, tuple(d), tuple(ts))
        pushed = [np.asarray(t, np.float64) for t in kiln.tree_leaves(t_out)]
    else:
        pushed = fd_jvp
    rhs = sum(np.vdot(cts[k].astype(np.float64), pushed[k]) for k in float_outputs(out))
    np.testing.assert_allclose(lhs, rhs, rtol=case.rtol, atol=1e-9,
                               err_msg=f"{case.name}: <vjp(ct), t> != <ct, jvp(t)>")


def batched_inputs(case: Case):
    """(samples, all-mapped-at-0 arguments, first-argument-mapped-at--1 arguments) for the vmap checks."""
    samples = [sample(case, k) for k in range(BATCH)]
    at0 = tuple(np.stack([s[i] for s in samples]) for i in range(len(samples[0])))
    last = (np.stack([s[0] for s in samples], axis=-1),) + tuple(samples[0][1:])
    return samples, at0, last


def loop_references(case: Case, samples):
    """The outputs of a Python loop over the samples, stacked like vmapped()'s two layouts."""
    at0 = [case.fn(*s) for s in samples]
    last = [case.fn(s[0], *samples[0][1:]) for s in samples]
    stack = lambda outs, axis: [np.stack([np.asarray(kiln.tree_leaves(o)[k]) for o in outs], axis=axis)  # noqa: E731
                                for k in range(len(kiln.tree_leaves(outs[0])))]
    return stack(at0, 0), stack(last, -1)


def vmapped(case: Case, n_args: int):
    """(vmap over axis 0 of every argument, vmap over the last axis of the first one only, out_axes=-1)."""
    return (kiln.vmap(case.fn), kiln.vmap(case.fn, in_axes=(-1,) + (None,) * (n_args - 1), out_axes=-1))


def assert_batched(got, want, case: Case, what: str):
    """Floats to case.batched_rtol (a batched reduction may sum in another order), integers and bools exactly."""
    for k, (g, w) in enumerate(zip(kiln.tree_leaves(got), want)):
        if is_float(w):
            np.testing.assert_allclose(g, w, rtol=case.batched_rtol, atol=1e-12, err_msg=f"{case.name}: {what}, output {k}")
        else:
            np.testing.assert_array_equal(g, w, err_msg=f"{case.name}: {what}, output {k}")


@pytest.mark.parametrize("case", cases_for("vmap"), ids=lambda c: c.name)
def test_batching_rule(case):
    """vmap against a Python loop (custom_lin: vmap of forward mode is the clear error)."""
    samples, at0, last = batched_inputs(case)
    map0, map_last = vmapped(case, len(at0))
    if case.vmap_error:
        d = sample(case)
        with rule_runs(case, "vmap"), pytest.raises(DifferentiationError, match=case.vmap_error):
            kiln.vmap(lambda x, t: kiln.jvp(case.fn, (x,), (t,))[1])(at0[0], np.stack([d[0]] * BATCH))
        return
    want0, want_last = loop_references(case, samples)
    with rule_runs(case, "vmap"):
        assert_batched(map0(*at0), want0, case, "vmap over axis 0")
    assert_batched(map_last(*last), want_last, case, "vmap over the last axis of argument 0")


# ---- under kiln.jit: one compiled function per group of cases ---------------------------------

def groups(cases, size):
    """cases in lists of at most size: one kiln.jit compile each."""
    return [cases[i:i + size] for i in range(0, len(cases), size)]


JIT_DERIVATIVE_CASES = [c for c in cases_for("jvp") if not c.zero or c.name in ("floor", "stop_gradient", "sign")]
JIT_DERIVATIVE_GROUPS = groups(JIT_DERIVATIVE_CASES, 16)
JIT_VMAP_GROUPS = groups([c for c in cases_for("vmap") if not c.vmap_error], 24)


def _group_id(group):
    return f"{group[0].name}..{group[-1].name}"


@pytest.mark.parametrize("group", JIT_DERIVATIVE_GROUPS, ids=_group_id)
def test_derivatives_under_jit(group):
    """jvp and grad of every case in the group, compiled as one function, against finite differences."""
    refs = {c.name: references(c.name) for c in group}

    def derivatives(d_by_case, t_by_case):
        out = {}
        for c in group:
            xs = refs[c.name][0]
            d, ts = d_by_case[c.name], t_by_case[c.name]
            if c.forward:
                out[c.name + "/jvp"] = kiln.jvp(closed(c, xs), tuple(d), tuple(ts))[1]
            if c.grad:
                out[c.name + "/grad"] = kiln.grad(scalar_loss(c, xs), argnums=tuple(range(len(d))))(*d)
        return out

    got = kiln.jit(derivatives)({n: list(r[1]) for n, r in refs.items()}, {n: list(r[2]) for n, r in refs.items()})
    for c in group:
        xs, d, ts, fd_jvp, fd_grad = refs[c.name]
        if c.forward:
            t_out = kiln.tree_leaves(got[c.name + "/jvp"])
            for k in float_outputs(c.fn(*xs)):
                assert_close(t_out[k], 0.0 if c.zero else fd_jvp[k], c, f"jit jvp of output {k}")
        if c.grad:
            for k, (g, want) in enumerate(zip(got[c.name + "/grad"], fd_grad)):
                assert_close(g, 0.0 if c.zero else want, c, f"jit grad of argument {k}")


@pytest.mark.parametrize("group", JIT_VMAP_GROUPS, ids=_group_id)
def test_batching_under_jit(group):
    """vmap of every case in the group (both axis layouts), compiled as one function, against Python loops."""
    inputs = {c.name: batched_inputs(c) for c in group}

    def batched(at0, last):
        out = {}
        for c in group:
            map0, map_last = vmapped(c, len(at0[c.name]))
            out[c.name] = (map0(*at0[c.name]), map_last(*last[c.name]))
        return out

    got = kiln.jit(batched)({n: list(v[1]) for n, v in inputs.items()}, {n: list(v[2]) for n, v in inputs.items()})
    for c in group:
        want0, want_last = loop_references(c, inputs[c.name][0])
        assert_batched(got[c.name][0], want0, c, "jit vmap over axis 0")
        assert_batched(got[c.name][1], want_last, c, "jit vmap over the last axis of argument 0")
