"""The floating-point work of a dispatch region: the flop count a kernel declares in the module
(`Kernel.flops`, format 2.5), from which `kiln-run --print_statistics` reports achieved GFLOP/s.

A count is the work the region defines, not what the generated code happens to execute (a kernel that
recomputes a value, or skips padding zeros, does not change it). Only floating-point work counts: an
operation counts when one of its operands or results is a floating-point (or complex) value.

- matrix products (`dot_general`): 2 m n k per batch element (a multiply and an add per term);
- convolutions: 2 per multiply-accumulate, each output element taking (weights / output features) terms,
  whatever the groups, strides and dilations;
- elementwise operations: the primitive's cost (`OpTraits.cost`, the compiler's one cost table in
  simple-op units: add 1, div 4, exp 20, ...) per result element; `integer_pow` one multiply per
  square-and-multiply step; operations that compute nothing (select, convert, real/imag parts, bit
  operations, stop_gradient) count 0;
- reductions: one combine per element folded in (operand elements - result elements), split reductions'
  chunk and partial kernels each their own share; windowed reductions (pooling) one per window element
  per output; cumulative scans one per element; argmax/argmin one compare per element folded in;
  max/min pooling's derivatives (select_and_gather_add/select_and_scatter_add) one combine per window
  element and one divide per window;
- the symmetric eigendecomposition (`eigh_ql`): 9 n^3 per n x n matrix (Golub and Van Loan's count for the
  eigenvalues and eigenvectors by tridiagonalization and symmetric QR);
- the native triangular factorizations, LAPACK's counts per matrix: Cholesky (`cholesky_native`) n^3 / 3,
  LU (`lu_native`, m x n) m n^2 - n^3 / 3 for m >= n (n m^2 - m^3 / 3 otherwise), triangular solves
  (`triangular_solve_native`) m^2 per right-hand side of length m, the split Cholesky's update
  (`syrk_native`) k s (s + 1);
- layout, gathers, scatters, sorts, pads, iota: 0.
"""
from __future__ import annotations

import math

from kiln.core import dtypes
from kiln.core.ir import Equation, Graph

# Elementwise primitives that move or reinterpret values instead of computing with them.
_NO_ARITHMETIC = frozenset({"select", "convert", "bitcast", "stop_gradient", "real", "imag", "complex", "conj",
                            "and", "or", "not", "xor", "shift_left", "shift_right"})
_PER_ELEMENT_KERNELS = frozenset({"cumsum", "cumprod", "cummax", "cummin"})
_FOLDING_KERNELS = frozenset({"argmax", "argmin"})


def _size(atom) -> int:
    return math.prod(atom.aval.shape)


def _inexact(eqn: Equation) -> bool:
    return any(dtypes.is_inexact(a.aval.dtype) for a in list(eqn.invars) + list(eqn.outvars))


def equation_flops(eqn: Equation) -> int:
    """The floating-point operations of one equation (0 for integer and boolean work)."""
    if not _inexact(eqn):
        return 0
    prim = eqn.primitive
    name, traits = prim.name, prim.traits
    out = _size(eqn.outvars[0]) if eqn.outvars else 0
    if name == "dot_general":
        (lhs_contract, _), _ = eqn.params["dimension_numbers"]
        k = math.prod(eqn.invars[0].aval.shape[d] for d in lhs_contract)
        return 2 * out * k
    if name == "conv_general_dilated":
        rhs = eqn.invars[1].aval
        out_features = rhs.shape[eqn.params["dimension_numbers"][1][0]]
        return 2 * out * (math.prod(rhs.shape) // max(out_features, 1))
    if name == "reduce_window":
        if eqn.params["op"] not in ("add", "max", "min"):
            return 0
        return out * math.prod(int(w) for w in eqn.params["window_dimensions"])
    if name in ("select_and_gather_add", "select_and_scatter_add"):
        windows = _size(eqn.outvars[0] if name == "select_and_gather_add" else eqn.invars[0])
        return windows * (math.prod(int(w) for w in eqn.params["window_dimensions"]) + 1)
    if name == "eigh_ql":
        n = eqn.invars[0].aval.shape[-1]
        return (_size(eqn.invars[0]) // max(n * n, 1)) * 9 * n ** 3
    if name in ("cholesky_native", "lu_native", "triangular_solve_native"):
        return _triangular_flops(eqn)
    if name == "syrk_native":  # LAPACK's count of a rank-k update of a triangle of s x s: k s (s + 1)
        s, k = eqn.invars[0].aval.shape[-1], eqn.invars[1].aval.shape[-2]
        return (_size(eqn.invars[0]) // max(s * s, 1)) * k * s * (s + 1)
    if name in _PER_ELEMENT_KERNELS:
        return _size(eqn.invars[0])
    if traits.fusion == "reduction" or name in _FOLDING_KERNELS:
        return max(_size(eqn.invars[0]) - out, 0)
    if traits.fusion == "elementwise":
        if name in _NO_ARITHMETIC:
            return 0
        if name == "integer_pow":
            y = abs(int(eqn.params["y"]))
            steps = max(y.bit_length() - 1 + bin(y).count("1") - 1, 0)
            return out * (steps + (4 if eqn.params["y"] < 0 else 0))
        return out * int(traits.cost)
    return 0


def _triangular_flops(eqn: Equation) -> int:
    shape = eqn.invars[0].aval.shape
    matrices = math.prod(shape[:-2])
    m, n = shape[-2:]
    if eqn.primitive.name == "cholesky_native":
        return matrices * n ** 3 // 3
    if eqn.primitive.name == "lu_native":
        big, small = max(m, n), min(m, n)
        return matrices * (big * small ** 2 - small ** 3 // 3)
    b = eqn.invars[1].aval.shape
    right_hand_sides = b[-1] if eqn.params["left_side"] else b[-2]
    return matrices * n * n * right_hand_sides


def region_flops(region: Graph) -> int:
    """The floating-point operations of one dispatch of a kernel compiled from `region`."""
    return sum(equation_flops(eqn) for eqn in region.eqns)
