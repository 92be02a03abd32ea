"""Convolution: `kiln.lax.conv_general_dilated` with JAX's semantics.

One registration per primitive (eager numpy reference, abstract evaluation,
JVP, transpose and batching rules, kernel code generation):

- `conv_general_dilated[window_strides, padding, lhs_dilation, rhs_dilation,
  dimension_numbers, feature_group_count, batch_group_count]`: bilinear in
  (lhs, rhs). Its transposes are convolutions again (as in JAX's
  _conv_general_dilated_transpose_lhs/rhs), so every derivative order works.
The transpose w.r.t. lhs convolves with the spatially reversed kernel
(kiln.lax's `rev`, a strided view inside the convolution kernel).

dimension_numbers are held normalized as three tuples of ints
(lhs_spec, rhs_spec, out_spec): lhs_spec = (batch dim, feature dim, spatial
dims...), rhs_spec = (out-feature dim, in-feature dim, spatial dims...),
out_spec = (batch dim, feature dim, spatial dims...).
"""
from __future__ import annotations

import itertools
from typing import NamedTuple

import numpy as np

from ..core import dtypes
from ..core.ad_util import Zero, add_any
from ..core.aval import ShapedArray
from ..core.primitive import Primitive, register
from ..core.trace import get_aval
from ..transforms.jvp import tangent_aval
from ..transforms.transpose import is_linear
from . import prims
from .api import _to_dtype, canonicalize_precision, dot_operand_dtypes
from .operands import asarray, promote
from .prims import ShapeError
from .structural_prims import rev

__all__ = ["conv_general_dilated", "conv", "conv_with_general_padding", "conv_dimension_numbers", "padtype_to_pads",
           "conv_transpose", "conv_shape_tuple", "conv_general_shape_tuple", "conv_transpose_shape_tuple",
           "ConvDimensionNumbers", "conv_general_permutations", "conv_general_dilated_patches"]


# ----------------------------------------------------------------------------- helpers


def dilate_dim(d: int, dilation: int) -> int:
    return 0 if d == 0 else 1 + dilation * (d - 1)


def padtype_to_pads(in_shape, window_shape, window_strides, padding) -> tuple[tuple[int, int], ...]:
    """Explicit (lo, hi) pairs for 'SAME', 'SAME_LOWER', 'VALID' or a sequence of pairs."""
    if isinstance(padding, str):
        mode = padding.upper()
        if mode == "VALID":
            return tuple((0, 0) for _ in in_shape)
        if mode in ("SAME", "SAME_LOWER"):
            pads = []
            for d, w, s in zip(in_shape, window_shape, window_strides):
                out = -(-d // s)
                total = max(0, (out - 1) * s + w - d)
                lo = total // 2 if mode == "SAME" else total - total // 2
                pads.append((lo, total - lo))
            return tuple(pads)
        raise ValueError(f"padding must be 'SAME', 'SAME_LOWER', 'VALID' or a sequence of (low, high) pairs; got {padding!r}")
    pads = tuple(tuple(int(v) for v in p) for p in padding)
    if len(pads) != len(in_shape) or any(len(p) != 2 for p in pads):
        raise ValueError(f"padding needs one (low, high) pair for each of the {len(in_shape)} spatial dimensions; got {padding!r}")
    return pads


class ConvDimensionNumbers(NamedTuple):
    """jax.lax.ConvDimensionNumbers: lhs_spec = (batch, feature, spatial...), rhs_spec = (out feature,
    in feature, spatial...), out_spec = (batch, feature, spatial...), as axis numbers."""

    lhs_spec: tuple
    rhs_spec: tuple
    out_spec: tuple


def conv_dimension_numbers(lhs_ndim, rhs_ndim, dimension_numbers) -> ConvDimensionNumbers:
    """Normalizes None, ('NHWC','HWIO','NHWC')-style strings or int tuples to (lhs_spec, rhs_spec, out_spec).
    lhs_ndim and rhs_ndim may be the operands' ranks or, as in jax.lax, their shapes."""
    lhs_ndim = lhs_ndim if isinstance(lhs_ndim, (int, np.integer)) else len(lhs_ndim)
    rhs_ndim = rhs_ndim if isinstance(rhs_ndim, (int, np.integer)) else len(rhs_ndim)
    return ConvDimensionNumbers(*_conv_specs(int(lhs_ndim), int(rhs_ndim), dimension_numbers))


def conv_general_permutations(dimension_numbers) -> tuple[tuple[int, ...], ...]:
    """(lhs, rhs, out) axis permutations for string dimension_numbers such as ('NHWC', 'HWIO', 'NHWC')."""
    if not isinstance(dimension_numbers, (tuple, list)) or len(dimension_numbers) != 3 \
            or not all(isinstance(spec, str) for spec in dimension_numbers):
        raise TypeError(f"conv_general_permutations: dimension_numbers must be three strings; got "
                        f"{dimension_numbers!r}")
    rank = len(dimension_numbers[0])
    return tuple(_conv_specs(rank, rank, dimension_numbers))


def _conv_specs(lhs_ndim: int, rhs_ndim: int, dimension_numbers):
    if lhs_ndim != rhs_ndim or lhs_ndim < 2:
        raise ShapeError(f"conv_general_dilated: lhs and rhs must have the same rank >= 2; got ranks {lhs_ndim} and {rhs_ndim}")
    if dimension_numbers is None:
        canonical = tuple(range(lhs_ndim))
        return canonical, canonical, canonical
    if len(dimension_numbers) != 3:
        raise ValueError(f"dimension_numbers must be (lhs_spec, rhs_spec, out_spec); got {dimension_numbers!r}")
    lhs, rhs, out = dimension_numbers
    if all(isinstance(s, str) for s in dimension_numbers):
        for spec, chars in ((lhs, "NC"), (rhs, "OI"), (out, "NC")):
            if len(spec) != lhs_ndim or any(c not in spec for c in chars) or len(set(spec)) != len(spec):
                raise ValueError(f"dimension_numbers {dimension_numbers!r}: {spec!r} does not describe a rank {lhs_ndim} array")
        spatial_rhs = [c for c in rhs if c not in "OI"]
        if sorted(c for c in lhs if c not in "NC") != sorted(spatial_rhs) or sorted(c for c in out if c not in "NC") != sorted(spatial_rhs):
            raise ValueError(f"dimension_numbers {dimension_numbers!r}: spatial dimension names differ")

        def perm(spec, a, b):
            spatial = sorted((i for i, c in enumerate(spec) if c not in (a, b)), key=lambda i: rhs.index(spec[i]))
            return (spec.index(a), spec.index(b)) + tuple(spatial)

        return perm(lhs, "N", "C"), perm(rhs, "O", "I"), perm(out, "N", "C")
    specs = tuple(tuple(int(i) for i in s) for s in dimension_numbers)
    for s in specs:
        if sorted(s) != list(range(lhs_ndim)):
            raise ValueError(f"dimension_numbers {dimension_numbers!r}: each spec must be a permutation of range({lhs_ndim})")
    return specs


def _conv_out_spatial(lhs_sp, rhs_sp, window_strides, padding, lhs_dilation, rhs_dilation):
    out = []
    for d, k, s, (lo, hi), ld, rd in zip(lhs_sp, rhs_sp, window_strides, padding, lhs_dilation, rhs_dilation):
        padded = dilate_dim(d, ld) + lo + hi
        out.append(max(0, (padded - dilate_dim(k, rd)) // s + 1))
    return tuple(out)


# ----------------------------------------------------------------------------- the primitive

conv_general_dilated_p = register(Primitive("conv_general_dilated"))
conv_general_dilated_p.def_traits(fusion="kernel", kernel="conv")


@conv_general_dilated_p.def_abstract_eval
def _conv_abstract(lhs, rhs, *, window_strides, padding, lhs_dilation, rhs_dilation, dimension_numbers,
                   feature_group_count, batch_group_count):
    if lhs.dtype != rhs.dtype:
        raise ShapeError(f"conv_general_dilated: operand dtypes differ: {lhs} and {rhs}")
    if dtypes.is_bool(lhs.dtype):
        raise ShapeError("conv_general_dilated does not accept bool operands; convert them to a number type first")
    lhs_spec, rhs_spec, out_spec = dimension_numbers
    nsp = lhs.ndim - 2
    for name, v in (("window_strides", window_strides), ("lhs_dilation", lhs_dilation), ("rhs_dilation", rhs_dilation)):
        if len(v) != nsp or any(int(x) < 1 for x in v):
            raise ShapeError(f"conv_general_dilated: {name} must be {nsp} positive ints; got {v}")
    if len(padding) != nsp:
        raise ShapeError(f"conv_general_dilated: padding needs {nsp} (low, high) pairs; got {padding}")
    n, c = lhs.shape[lhs_spec[0]], lhs.shape[lhs_spec[1]]
    o, i = rhs.shape[rhs_spec[0]], rhs.shape[rhs_spec[1]]
    g, b = feature_group_count, batch_group_count
    if g < 1 or b < 1 or (g > 1 and b > 1):
        raise ShapeError(f"conv_general_dilated: feature_group_count ({g}) and batch_group_count ({b}) must be >= 1, and one of them 1")
    if c != i * g:
        raise ShapeError(f"conv_general_dilated: lhs has {c} input features, but rhs expects {i} x feature_group_count {g}")
    if o % (g * b):
        raise ShapeError(f"conv_general_dilated: rhs output features {o} are not divisible by the group count {g * b}")
    if n % b:
        raise ShapeError(f"conv_general_dilated: lhs batch {n} is not divisible by batch_group_count {b}")
    lhs_sp = [lhs.shape[d] for d in lhs_spec[2:]]
    rhs_sp = [rhs.shape[d] for d in rhs_spec[2:]]
    out_sp = _conv_out_spatial(lhs_sp, rhs_sp, window_strides, padding, lhs_dilation, rhs_dilation)
    canonical = (n // b, o) + out_sp
    shape = [0] * lhs.ndim
    for axis, d in enumerate(out_spec):
        shape[d] = canonical[axis]
    return ShapedArray(tuple(shape), lhs.dtype, lhs.weak_type and rhs.weak_type)


def _dilate_and_pad(x, dilation, padding, fill):
    """x (N, C, spatial...) with zeros (fill) between elements and (lo, hi) padding (negative crops)."""
    nsp = x.ndim - 2
    shape = x.shape[:2] + tuple(dilate_dim(d, r) for d, r in zip(x.shape[2:], dilation))
    dilated = np.full(shape, fill, x.dtype)
    dilated[(slice(None), slice(None)) + tuple(slice(None, None, r) for r in dilation)] = x
    widths = [(0, 0), (0, 0)] + [(max(lo, 0), max(hi, 0)) for lo, hi in padding]
    padded = np.pad(dilated, widths, constant_values=fill)
    crop = (slice(None), slice(None)) + tuple(
        slice(-min(lo, 0), padded.shape[2 + k] + min(hi, 0)) for k, (lo, hi) in enumerate(padding)
    )
    del nsp
    return padded[crop]


def conv_reference(lhs, rhs, *, window_strides, padding, lhs_dilation, rhs_dilation, dimension_numbers,
                   feature_group_count, batch_group_count):
    """The numpy reference: dilate and pad lhs, then one einsum per kernel position and group."""
    lhs, rhs = np.asarray(lhs), np.asarray(rhs)
    dtype = lhs.dtype
    # bfloat16's numpy kind is "V": it accumulates in float64 as the other floats (it was truncated to int64)
    acc = np.complex128 if dtypes.is_complex(dtype) else np.float64 if dtypes.is_float(dtype) else np.int64
    lhs_spec, rhs_spec, out_spec = dimension_numbers
    x = np.transpose(lhs, lhs_spec).astype(acc)
    w = np.transpose(rhs, rhs_spec).astype(acc)
    g, b = feature_group_count, batch_group_count
    n, c = x.shape[:2]
    o, i = w.shape[:2]
    nout = n // b
    xp = _dilate_and_pad(x, lhs_dilation, padding, 0)
    out_sp = _conv_out_spatial(x.shape[2:], w.shape[2:], window_strides, padding, lhs_dilation, rhs_dilation)
    out = np.zeros((nout, o) + out_sp, acc)
    groups = g * b
    block = o // groups if groups else 0
    if out.size and i:
        for kpos in itertools.product(*[range(k) for k in w.shape[2:]]):
            window = tuple(
                slice(kp * rd, kp * rd + s * (od - 1) + 1, s)
                for kp, rd, s, od in zip(kpos, rhs_dilation, window_strides, out_sp)
            )
            xs = xp[(slice(None), slice(None)) + window]
            for grp in range(groups):
                if g > 1:
                    part = xs[:, grp * i:(grp + 1) * i]
                elif b > 1:
                    part = xs[grp * nout:(grp + 1) * nout]
                else:
                    part = xs
                wk = w[(slice(grp * block, (grp + 1) * block), slice(None)) + kpos]
                out[:, grp * block:(grp + 1) * block] += np.einsum("nc...,oc->no...", part, wk)
    with np.errstate(all="ignore"):
        return np.transpose(out, tuple(int(a) for a in np.argsort(out_spec))).astype(dtype)


conv_general_dilated_p.def_impl(conv_reference)


def _format_conv_params(params) -> str:
    keys = ("window_strides", "padding", "lhs_dilation", "rhs_dilation", "dimension_numbers",
            "feature_group_count", "batch_group_count")
    return "[" + ", ".join(f"{k}={params[k]!r}" for k in keys) + "]"


conv_general_dilated_p.format_params = _format_conv_params


def reverse(x, dimensions):
    """x reversed along `dimensions` (kiln.lax's rev: a strided view inside kernels)."""
    dimensions = tuple(int(d) for d in dimensions)
    return rev(x, dimensions) if dimensions else x


# ----------------------------------------------------------------------------- public API


def conv_general_dilated(lhs, rhs, window_strides, padding, lhs_dilation=None, rhs_dilation=None,
                         dimension_numbers=None, feature_group_count: int = 1, batch_group_count: int = 1,
                         precision=None, preferred_element_type=None):
    """JAX's lax.conv_general_dilated: a general N-d convolution.

    lhs, rhs: arrays of the same dtype and rank (2 + spatial dims).
    window_strides: one int per spatial dim. padding: 'SAME', 'SAME_LOWER',
    'VALID' or (low, high) pairs (negative values crop). lhs_dilation
    (transposed convolution) and rhs_dilation (atrous), default 1s.
    dimension_numbers: None (NCHW/OIHW/NCHW), strings such as
    ('NHWC', 'HWIO', 'NHWC'), or (lhs_spec, rhs_spec, out_spec) int tuples.
    feature_group_count: grouped convolution (= input channels for depthwise).
    precision: checked, no effect (kiln.lax.Precision); preferred_element_type: the result dtype, with JAX's
    rules (kiln.lax.api.dot_operand_dtypes: int8 -> int32 and bfloat16 -> float32 accumulate in the result type).
    """
    canonicalize_precision(precision, "conv_general_dilated")
    lhs, rhs = promote(asarray(lhs), asarray(rhs))
    operand_dtype, out_dtype = dot_operand_dtypes("conv_general_dilated", get_aval(lhs).dtype, get_aval(rhs).dtype,
                                                  preferred_element_type)
    lhs, rhs = _to_dtype(lhs, operand_dtype), _to_dtype(rhs, operand_dtype)
    la, ra = get_aval(lhs), get_aval(rhs)
    dn = tuple(conv_dimension_numbers(la.ndim, ra.ndim, dimension_numbers))  # plain tuples in the IR
    nsp = la.ndim - 2

    def ints(v, name):
        if v is None:
            return (1,) * nsp
        v = tuple(int(x) for x in v)
        if len(v) != nsp:
            raise ValueError(f"conv_general_dilated: {name} needs {nsp} values (one per spatial dimension); got {v}")
        return v

    window_strides = ints(window_strides, "window_strides")
    lhs_dilation = ints(lhs_dilation, "lhs_dilation")
    rhs_dilation = ints(rhs_dilation, "rhs_dilation")
    lhs_sp = [la.shape[d] for d in dn[0][2:]]
    rhs_sp = [dilate_dim(ra.shape[d], r) for d, r in zip(dn[1][2:], rhs_dilation)]
    pads = padtype_to_pads(lhs_sp, rhs_sp, window_strides, padding)
    params = dict(window_strides=window_strides, padding=pads, lhs_dilation=lhs_dilation, rhs_dilation=rhs_dilation,
                  dimension_numbers=dn, feature_group_count=int(feature_group_count),
                  batch_group_count=int(batch_group_count))
    conv_general_dilated_p.abstract_eval(la, ra, **params)  # checks shapes eagerly too
    return _to_dtype(conv_general_dilated_p.bind(lhs, rhs, **params), out_dtype)


def conv(lhs, rhs, window_strides, padding, precision=None, preferred_element_type=None):
    """lax.conv: NCHW/OIHW convolution without dilation."""
    return conv_general_dilated(lhs, rhs, window_strides, padding, precision=precision,
                                preferred_element_type=preferred_element_type)


def conv_with_general_padding(lhs, rhs, window_strides, padding, lhs_dilation, rhs_dilation, precision=None,
                              preferred_element_type=None):
    return conv_general_dilated(lhs, rhs, window_strides, padding, lhs_dilation, rhs_dilation, precision=precision,
                                preferred_element_type=preferred_element_type)


def conv_general_dilated_patches(lhs, filter_shape, window_strides, padding, lhs_dilation=None, rhs_dilation=None,
                                 dimension_numbers=None, precision=None, preferred_element_type=None):
    """jax.lax.conv_general_dilated_patches: the patches a convolution with a kernel of filter_shape (spatial)
    would see, as C x prod(filter_shape) output features (channel-major, then the filter positions in order):
    a grouped convolution with one-hot kernels, as JAX computes it."""
    lhs = asarray(lhs)
    la = get_aval(lhs)
    filter_shape = tuple(int(d) for d in filter_shape)
    if len(filter_shape) != la.ndim - 2:
        raise ValueError(f"conv_general_dilated_patches: filter_shape {filter_shape} needs {la.ndim - 2} spatial "
                         "sizes")
    lhs_spec, rhs_spec, _ = dn = conv_dimension_numbers(la.shape, (1, 1) + filter_shape, dimension_numbers)
    spatial_size = int(np.prod(filter_shape, dtype=np.int64))
    channels = la.shape[lhs_spec[1]]
    one_hot = np.broadcast_to(np.eye(spatial_size, dtype=la.dtype), (channels, spatial_size, spatial_size))
    rhs = np.moveaxis(one_hot.reshape((channels * spatial_size, 1) + filter_shape), (0, 1), (rhs_spec[0], rhs_spec[1]))
    canonicalize_precision(precision, "conv_general_dilated_patches")
    return conv_general_dilated(lhs, np.ascontiguousarray(rhs), window_strides, padding, lhs_dilation, rhs_dilation,
                                tuple(dn), feature_group_count=channels,
                                preferred_element_type=preferred_element_type)


_TRANSPOSE_LAYOUTS = {2: ("NC", "IO", "NC"), 3: ("NHC", "HIO", "NHC"), 4: ("NHWC", "HWIO", "NHWC"),
                      5: ("NHWDC", "HWDIO", "NHWDC")}


def _conv_transpose_padding(k: int, s: int, padding) -> tuple[int, int]:
    """(before, after) padding of the dilated input for a kernel of (dilated) size k and stride s, from the
    forward convolution's 'SAME' or 'VALID' padding or its (lo, hi) pair."""
    if padding == "SAME":
        total = k + s - 2
        before = k - 1 if s > k - 1 else -(-total // 2)
    elif padding == "VALID":
        total = k + s - 2 + max(k - s, 0)
        before = k - 1
    elif isinstance(padding, tuple):
        before = k - padding[0] - 1
        total = before + k - padding[1] - 1
    else:
        raise ValueError(f"conv_transpose: padding must be 'SAME', 'VALID' or (low, high) pairs; got {padding!r}")
    return before, total - before


def conv_transpose(lhs, rhs, strides, padding, rhs_dilation=None, dimension_numbers=None,
                   transpose_kernel: bool = False, precision=None, preferred_element_type=None,
                   use_consistent_padding: bool = False):
    """jax.lax.conv_transpose: a fractionally strided convolution (the input dilated by `strides`).

    dimension_numbers default to TensorFlow's layouts (NHWC, HWIO, NHWC and their 1-, 3- and 0-spatial forms).
    'SAME' and 'VALID' padding name the forward convolution's padding (so 'SAME' gives an output `strides` times
    the input); explicit (low, high) pairs pad the dilated input, unless use_consistent_padding=True, where
    they are the forward convolution's too (PyTorch's convention). transpose_kernel=True flips the kernel's
    spatial axes and swaps its input and output feature axes, giving exactly the gradient of
    conv_general_dilated with respect to its input (keras' Conv2DTranspose)."""
    if isinstance(padding, str) and padding not in ("SAME", "SAME_LOWER", "VALID"):
        raise ValueError(f"conv_transpose: padding must be 'SAME', 'VALID' or (low, high) pairs; got {padding!r}")
    lhs, rhs = asarray(lhs), asarray(rhs)
    la, ra = get_aval(lhs), get_aval(rhs)
    if la.ndim != ra.ndim or la.ndim < 2:
        raise ShapeError(f"conv_transpose: lhs and rhs must have the same rank >= 2; got shapes {la.shape} and "
                         f"{ra.shape}")
    if dimension_numbers is None:
        if la.ndim not in _TRANSPOSE_LAYOUTS:
            raise ValueError(f"conv_transpose: no default dimension_numbers for rank {la.ndim} operands; give them")
        dimension_numbers = _TRANSPOSE_LAYOUTS[la.ndim]
    dn = conv_dimension_numbers(la.ndim, ra.ndim, dimension_numbers)
    nsp = la.ndim - 2
    strides = tuple(int(v) for v in strides)
    if len(strides) != nsp:
        raise ValueError(f"conv_transpose: strides needs {nsp} values (one per spatial dimension); got {strides}")
    rhs_dilation = (1,) * nsp if rhs_dilation is None else tuple(int(v) for v in rhs_dilation)
    kernel = [dilate_dim(ra.shape[d], r) for d, r in zip(dn[1][2:], rhs_dilation)]
    if use_consistent_padding or (isinstance(padding, str) and padding in ("SAME", "VALID")):
        per_dim = [padding] * nsp if isinstance(padding, str) else [tuple(int(v) for v in p) for p in padding]
        if len(per_dim) != nsp:
            raise ValueError(f"conv_transpose: padding needs {nsp} (low, high) pairs; got {padding!r}")
        pads = tuple(_conv_transpose_padding(k, s, p) for k, s, p in zip(kernel, strides, per_dim))
    else:
        pads = padding
    if transpose_kernel:
        rhs = reverse(rhs, dn[1][2:])
        perm = list(range(ra.ndim))
        perm[dn[1][0]], perm[dn[1][1]] = perm[dn[1][1]], perm[dn[1][0]]
        rhs = prims.transpose.bind(rhs, permutation=tuple(perm))
    return conv_general_dilated(lhs, rhs, (1,) * nsp, pads, strides, rhs_dilation, dn, precision=precision,
                                preferred_element_type=preferred_element_type)


def conv_shape_tuple(lhs_shape, rhs_shape, strides, pads, batch_group_count: int = 1) -> tuple[int, ...]:
    """The output shape of a convolution in the canonical layout (N, C, spatial...) / (O, I, spatial...)."""
    lhs_shape, rhs_shape = tuple(int(d) for d in lhs_shape), tuple(int(d) for d in rhs_shape)
    pads = padtype_to_pads(lhs_shape[2:], rhs_shape[2:], strides, pads)
    padded = [d + lo + hi for d, (lo, hi) in zip(lhs_shape[2:], pads)]
    if any(d < 0 for d in padded):
        raise ValueError(f"conv_shape_tuple: negative padding {pads} is larger than the dimensions {lhs_shape[2:]}")
    spatial = tuple(max(0, (d - k) // s + 1) for d, k, s in zip(padded, rhs_shape[2:], strides))
    return (lhs_shape[0] // batch_group_count, rhs_shape[0]) + spatial


def _permuted(shape, perm):
    return tuple(int(shape[i]) for i in perm)


def _unpermuted(canonical, out_spec):
    shape = [0] * len(canonical)
    for axis, d in enumerate(out_spec):
        shape[d] = canonical[axis]
    return tuple(shape)


def conv_general_shape_tuple(lhs_shape, rhs_shape, window_strides, padding, dimension_numbers) -> tuple[int, ...]:
    """The output shape of conv_general_dilated (no dilation) for these shapes and dimension_numbers."""
    lhs_spec, rhs_spec, out_spec = conv_dimension_numbers(len(lhs_shape), len(rhs_shape), dimension_numbers)
    canonical = conv_shape_tuple(_permuted(lhs_shape, lhs_spec), _permuted(rhs_shape, rhs_spec),
                                 tuple(int(s) for s in window_strides), padding)
    return _unpermuted(canonical, out_spec)


def conv_transpose_shape_tuple(lhs_shape, rhs_shape, window_strides, padding, dimension_numbers) -> tuple[int, ...]:
    """The output shape of conv_transpose for these shapes, strides, padding and dimension_numbers."""
    lhs_spec, rhs_spec, out_spec = conv_dimension_numbers(len(lhs_shape), len(rhs_shape), dimension_numbers)
    lhs_t, rhs_t = _permuted(lhs_shape, lhs_spec), _permuted(rhs_shape, rhs_spec)
    strides = tuple(int(s) for s in window_strides)
    if isinstance(padding, str):
        padding = [_conv_transpose_padding(k, s, padding) for k, s in zip(rhs_t[2:], strides)]
    totals = [int(sum(p)) for p in padding]
    spatial = tuple((i - 1) * s - k + 2 + p for i, k, s, p in zip(lhs_t[2:], rhs_t[2:], strides, totals))
    return _unpermuted((lhs_t[0], rhs_t[0]) + spatial, out_spec)


# ----------------------------------------------------------------------------- rules


def _shape(x):
    return get_aval(x).shape


def _reshape_axis_into(src, dst, x):
    """Moves axis src next to dst (dst numbered after removing src) and merges it in, major."""
    shape = _shape(x)
    perm = [i for i in range(len(shape)) if i != src]
    perm.insert(dst, src)
    new_shape = [shape[i] for i in range(len(shape)) if i != src]
    new_shape[dst] *= shape[src]
    if perm != list(range(len(shape))):
        x = prims.transpose.bind(x, permutation=tuple(perm))
    return prims.reshape.bind(x, new_shape=tuple(new_shape))


def _reshape_axis_out_of(src, size1, x):
    shape = list(_shape(x))
    size2, ragged = divmod(shape[src], size1)
    assert not ragged
    shape[src:src + 1] = [size1, size2]
    return prims.reshape.bind(x, new_shape=tuple(shape))


def _spec_transpose(spec):
    return (spec[1], spec[0]) + tuple(spec[2:])


def _vjp_lhs_padding(in_shape, window_dimensions, window_strides, out_shape, padding, lhs_dilation, rhs_dilation):
    pads = []
    for d, k, s, od, (lo, _), ld, rd in zip(in_shape, window_dimensions, window_strides, out_shape, padding,
                                            lhs_dilation, rhs_dilation):
        lhs_d, rhs_d, out_d = dilate_dim(d, ld), dilate_dim(k, rd), dilate_dim(od, s)
        before = rhs_d - lo - 1
        after = lhs_d + rhs_d - 1 - out_d - before
        pads.append((before, after))
    return tuple(pads)


def _vjp_rhs_padding(in_shape, window_dimensions, window_strides, out_shape, padding, lhs_dilation, rhs_dilation):
    pads = []
    for d, k, s, od, (lo, _), ld, rd in zip(in_shape, window_dimensions, window_strides, out_shape, padding,
                                            lhs_dilation, rhs_dilation):
        lhs_d, rhs_d, out_d = dilate_dim(d, ld), dilate_dim(k, rd), dilate_dim(od, s)
        pads.append((lo, (out_d - lhs_d) + (rhs_d - lo - 1)))
    return tuple(pads)


def _transpose_lhs(ct, rhs, lhs_aval, *, window_strides, padding, lhs_dilation, rhs_dilation, dimension_numbers,
                   feature_group_count, batch_group_count):
    lhs_spec, rhs_spec, out_spec = dimension_numbers
    t_rhs_spec = _spec_transpose(rhs_spec)
    g = feature_group_count
    if feature_group_count > 1:
        rhs = _reshape_axis_out_of(rhs_spec[0], feature_group_count, rhs)
        rhs = _reshape_axis_into(rhs_spec[0], rhs_spec[1], rhs)
    elif batch_group_count > 1:
        rhs = _reshape_axis_out_of(rhs_spec[0], batch_group_count, rhs)
        rhs = _reshape_axis_into(rhs_spec[0], rhs_spec[1], rhs)
        g = batch_group_count
    # A strided convolution's input gradient (lhs dilation = the strides) with the features not last (NCHW):
    # computed with contiguous features, (N, H, W, C), and transposed to the input's layout (a copy of the
    # input's size), as the compiler's GEMM skips the dilation's holes phase by phase only where it writes
    # rows of contiguous features (codegen/conv.py, _emit_gemm_phases).
    ndim = len(lhs_spec)
    permuted = (any(s != 1 for s in window_strides) and lhs_spec[1] != ndim - 1 and batch_group_count == 1
                and np.dtype(lhs_aval.dtype) in (np.float32, np.float64))
    result_spec = (0, ndim - 1) + tuple(range(1, ndim - 1)) if permuted else lhs_spec
    trans_dn = (out_spec, t_rhs_spec, result_spec)
    rshape = _shape(rhs)
    pads = _vjp_lhs_padding([lhs_aval.shape[d] for d in lhs_spec[2:]], [rshape[d] for d in rhs_spec[2:]],
                            window_strides, [_shape(ct)[d] for d in out_spec[2:]], padding, lhs_dilation, rhs_dilation)
    revd = reverse(rhs, rhs_spec[2:])
    out = conv_general_dilated_p.bind(
        ct, revd, window_strides=tuple(lhs_dilation), padding=pads, lhs_dilation=tuple(window_strides),
        rhs_dilation=tuple(rhs_dilation), dimension_numbers=trans_dn, feature_group_count=g, batch_group_count=1,
    )
    if permuted:
        perm = [0] * ndim
        for k in range(ndim):
            perm[lhs_spec[k]] = result_spec[k]
        out = prims.transpose.bind(out, permutation=tuple(perm))
    if batch_group_count > 1:
        out = _reshape_axis_out_of(lhs_spec[1], batch_group_count, out)
        out = _reshape_axis_into(lhs_spec[1], lhs_spec[0], out)
    return out


def _transpose_rhs(ct, lhs, rhs_aval, *, window_strides, padding, lhs_dilation, rhs_dilation, dimension_numbers,
                   feature_group_count, batch_group_count):
    if int(np.prod(_shape(ct), dtype=np.int64)) == 0:
        return prims.zeros_like_shaped_array(ShapedArray(rhs_aval.shape, rhs_aval.dtype))
    lhs_spec, rhs_spec, out_spec = dimension_numbers
    lhs_t, rhs_t, out_t = map(_spec_transpose, dimension_numbers)
    g, b = feature_group_count, batch_group_count
    if b > 1:
        g, b = b, 1
    elif g > 1:
        g, b = 1, g
    ndim = len(rhs_spec)
    # The kernel's output features contiguous in the convolution's result, then transposed to the kernel's
    # layout: the compiler's kernel-gradient GEMM ('gemm_batch') writes rows of contiguous features, so an
    # OIHW kernel's gradient is computed as (I, H, W, O) and transposed (a copy of the kernel's size).
    permuted = (rhs_t[1] != ndim - 1 and np.dtype(rhs_aval.dtype) in (np.float32, np.float64)
                and g == 1 and b == 1)
    result_spec = (0, ndim - 1) + tuple(range(1, ndim - 1)) if permuted else rhs_t
    trans_dn = (lhs_t, out_t, result_spec)
    lshape = _shape(lhs)
    pads = _vjp_rhs_padding([lshape[d] for d in lhs_spec[2:]], [rhs_aval.shape[d] for d in rhs_spec[2:]],
                            window_strides, [_shape(ct)[d] for d in out_spec[2:]], padding, lhs_dilation, rhs_dilation)
    out = conv_general_dilated_p.bind(
        lhs, ct, window_strides=tuple(rhs_dilation), padding=pads, lhs_dilation=tuple(lhs_dilation),
        rhs_dilation=tuple(window_strides), dimension_numbers=trans_dn, feature_group_count=g, batch_group_count=b,
    )
    if permuted:
        perm = [0] * ndim
        for k in range(ndim):
            perm[rhs_t[k]] = result_spec[k]
        out = prims.transpose.bind(out, permutation=tuple(perm))
    return out


def _conv_transpose_rule(ct, lhs, rhs, **params):
    if is_linear(lhs) and is_linear(rhs):
        raise AssertionError("conv_general_dilated of two linear values is not linear")
    ct_lhs = _transpose_lhs(ct, rhs, lhs.aval, **params) if is_linear(lhs) else None
    ct_rhs = _transpose_rhs(ct, lhs, rhs.aval, **params) if is_linear(rhs) else None
    return [ct_lhs, ct_rhs]


def _conv_jvp_rule(primals, tangents, **params):
    (x, w), (tx, tw) = primals, tangents
    out = conv_general_dilated_p.bind(x, w, **params)
    t = Zero(tangent_aval(get_aval(out)))
    if not isinstance(tx, Zero):
        t = add_any(t, conv_general_dilated_p.bind(tx, w, **params))
    if not isinstance(tw, Zero):
        t = add_any(t, conv_general_dilated_p.bind(x, tw, **params))
    return out, t


def _conv_batching_rule(values, dims, *, axis_size, **params):
    lhs, rhs = values
    lhs_bdim, rhs_bdim = dims
    lhs_spec, rhs_spec, out_spec = params["dimension_numbers"]
    g, b = params["feature_group_count"], params["batch_group_count"]
    # Specs stay those of the unbatched operands: the batch axis is merged into an existing dim.
    if lhs_bdim is not None and rhs_bdim is not None:
        if b > 1:
            new_lhs = _reshape_axis_into(lhs_bdim, lhs_spec[0], lhs)
            b *= axis_size
        else:
            new_lhs = _reshape_axis_into(lhs_bdim, lhs_spec[1], lhs)
            g *= axis_size
        new_rhs = _reshape_axis_into(rhs_bdim, rhs_spec[0], rhs)
        out = conv_general_dilated_p.bind(new_lhs, new_rhs, **{**params, "feature_group_count": g, "batch_group_count": b})
        return _reshape_axis_out_of(out_spec[1], axis_size, out), out_spec[1]
    if lhs_bdim is not None:
        if b == 1:
            new_lhs = _reshape_axis_into(lhs_bdim, lhs_spec[0], lhs)
        else:
            new_lhs = _reshape_axis_out_of(lhs_spec[0] + int(lhs_bdim <= lhs_spec[0]), b, lhs)
            new_lhs = _reshape_axis_into(lhs_bdim + int(lhs_spec[0] < lhs_bdim), lhs_spec[0] + 1, new_lhs)
            new_lhs = _reshape_axis_into(lhs_spec[0], lhs_spec[0], new_lhs)
        out = conv_general_dilated_p.bind(new_lhs, rhs, **params)
        return _reshape_axis_out_of(out_spec[0], axis_size, out), out_spec[0]
    if g == 1 and b == 1:
        new_rhs = _reshape_axis_into(rhs_bdim, rhs_spec[0], rhs)
        out = conv_general_dilated_p.bind(lhs, new_rhs, **params)
        return _reshape_axis_out_of(out_spec[1], axis_size, out), out_spec[1]
    groups = g if g > 1 else b
    new_rhs = _reshape_axis_out_of(rhs_spec[0] + int(rhs_bdim <= rhs_spec[0]), groups, rhs)
    new_rhs = _reshape_axis_into(rhs_bdim + int(rhs_spec[0] < rhs_bdim), rhs_spec[0] + 1, new_rhs)
    new_rhs = _reshape_axis_into(rhs_spec[0], rhs_spec[0], new_rhs)
    out = conv_general_dilated_p.bind(lhs, new_rhs, **params)
    out = _reshape_axis_out_of(out_spec[1], groups, out)
    out = _reshape_axis_out_of(out_spec[1] + 1, axis_size, out)
    out = _reshape_axis_into(out_spec[1], out_spec[1] + 1, out)
    return out, out_spec[1]


conv_general_dilated_p.jvp_rule = _conv_jvp_rule
conv_general_dilated_p.transpose_rule = _conv_transpose_rule
conv_general_dilated_p.batching_rule = _conv_batching_rule
