"""Strided views: layout primitives (broadcast, transpose, reshape) and iota as index arithmetic.

A View says where element `index` of a value lives: in region input `source`
at offset + sum(index * strides) (in elements), or, for iota, that the value
is that number itself. Fusion keeps a layout op inside a kernel only when it
has a View; code generation turns Views into address arithmetic.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

IOTA = -1
SPLAT = -2


@dataclass(frozen=True)
class View:
    source: int  # index of a region input, IOTA, or SPLAT (a broadcast scalar literal)
    dtype: np.dtype
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    offset: int = 0
    literal: object = None  # the Literal of a SPLAT

    @property
    def is_buffer(self) -> bool:
        return self.source >= 0


def contiguous_strides(shape) -> tuple[int, ...]:
    strides, step = [], 1
    for d in reversed(shape):
        strides.append(step if d != 1 else 0)
        step *= d
    return tuple(reversed(strides))


def input_view(index: int, aval) -> View:
    return View(index, aval.dtype, aval.shape, contiguous_strides(aval.shape))


def iota_view(shape, dimension: int, dtype) -> View:
    strides = tuple(1 if i == dimension and d != 1 else 0 for i, d in enumerate(shape))
    return View(IOTA, np.dtype(dtype), tuple(shape), strides)


def splat_view(literal) -> View:
    return View(SPLAT, literal.aval.dtype, (), (), 0, literal)


def reshape_strides(old_shape, old_strides, new_shape) -> tuple[int, ...] | None:
    """Strides giving `new_shape` the same elements in row-major order, or None if none exist."""
    if int(np.prod(new_shape, dtype=np.int64)) == 0:
        return contiguous_strides(new_shape)
    old = [(d, s) for d, s in zip(old_shape, old_strides) if d != 1]
    new_positions = [i for i, d in enumerate(new_shape) if d != 1]
    new = [new_shape[i] for i in new_positions]
    strides = [0] * len(new_shape)
    i = j = 0
    while i < len(old) and j < len(new):
        old_product, new_product = old[i][0], new[j]
        i_end, j_end = i + 1, j + 1
        while old_product != new_product:
            if old_product < new_product:
                old_product *= old[i_end][0]
                i_end += 1
            else:
                new_product *= new[j_end]
                j_end += 1
        for k in range(i, i_end - 1):
            if old[k][1] != old[k + 1][1] * old[k + 1][0]:
                return None
        step = old[i_end - 1][1]
        for k in range(j_end - 1, j - 1, -1):
            strides[new_positions[k]] = step
            step *= new[k]
        i, j = i_end, j_end
    return tuple(strides)


def apply_layout(view: View, primitive: str, params: dict, out_shape) -> View | None:
    """The view of a layout primitive's output given its operand's view; None if not strided."""
    out_shape = tuple(out_shape)
    if primitive == "broadcast_in_dim":
        strides = [0] * len(out_shape)
        for src, dst in enumerate(params["broadcast_dimensions"]):
            if view.shape[src] == out_shape[dst] and out_shape[dst] != 1:
                strides[dst] = view.strides[src]
        return View(view.source, view.dtype, out_shape, tuple(strides), view.offset, view.literal)
    if primitive == "transpose":
        strides = tuple(view.strides[p] for p in params["permutation"])
        return View(view.source, view.dtype, out_shape, strides, view.offset, view.literal)
    if primitive == "reshape":
        strides = reshape_strides(view.shape, view.strides, out_shape)
        if strides is None:
            return None
        return View(view.source, view.dtype, out_shape, strides, view.offset, view.literal)
    if primitive == "slice":
        offset = view.offset + sum(s * st for s, st in zip(params["start_indices"], view.strides))
        strides = tuple(st * step if d != 1 else 0 for st, step, d in zip(view.strides, params["strides"], out_shape))
        return View(view.source, view.dtype, out_shape, strides, offset, view.literal)
    if primitive == "rev":
        offset, strides = view.offset, list(view.strides)
        for d in params["dimensions"]:
            if out_shape[d] > 1:
                offset += (out_shape[d] - 1) * strides[d]
                strides[d] = -strides[d]
        return View(view.source, view.dtype, out_shape, tuple(strides), offset, view.literal)
    raise ValueError(f"{primitive} is not a layout primitive")


def region_views(region) -> dict[int, View]:
    """Views of a region's inputs, iotas and of every layout op applied to a viewed value, by Var id."""
    views: dict[int, View] = {}
    for i, v in enumerate(region.invars):
        views[v.id] = input_view(i, v.aval)
    for eqn in region.eqns:
        name = eqn.primitive.name
        out = eqn.outvars[0]
        fusion = eqn.primitive.traits.fusion
        if fusion == "iota":
            views[out.id] = iota_view(eqn.params["shape"], eqn.params["dimension"], eqn.params["dtype"])
        elif fusion == "layout":
            operand = eqn.invars[0]
            inner = views.get(operand.id) if _is_var(operand) else splat_view(operand)
            view = None if inner is None else apply_layout(inner, name, eqn.params, out.aval.shape)
            if view is not None:
                views[out.id] = view
    return views


def _is_var(atom) -> bool:
    return hasattr(atom, "id")


def collapse_dims(shape, stride_sets: list[tuple[int, ...]]) -> tuple[tuple[int, ...], list[tuple[int, ...]]]:
    """Merges adjacent dims that are contiguous with each other in every stride set; drops size-1 dims."""
    dims = [i for i, d in enumerate(shape) if d != 1]
    if not dims:
        return (1,), [(0,) for _ in stride_sets]
    new_shape = [shape[dims[0]]]
    new_strides = [[s[dims[0]]] for s in stride_sets]
    for k in dims[1:]:
        mergeable = all(ns[-1] == s[k] * shape[k] for ns, s in zip(new_strides, stride_sets))
        if mergeable:
            new_shape[-1] *= shape[k]
            for ns, s in zip(new_strides, stride_sets):
                ns[-1] = s[k]
        else:
            new_shape.append(shape[k])
            for ns, s in zip(new_strides, stride_sets):
                ns.append(s[k])
    return tuple(new_shape), [tuple(ns) for ns in new_strides]
