"""Elementwise epilogues of matrix products: the elementwise work consuming a dot_general's result,
computed by the matmul kernel on each tile it has just finished (epilogue_fusion.py merges the regions).

A region holding a dot_general followed by elementwise equations (bias add, activation, and in the
backward pass the derivative masks such as (1 - h*h) * dh or select(z > 0, dh, 0)) is the matmul
strategy's: the product is accumulated as usual into its `home` output buffer (the product's own output
when something else reads it, else an epilogue output of the product's dtype, which the epilogue then
overwrites element by element), and once all K blocks of a work item's rows x columns are done, a loop
over those elements, innermost along the contiguous columns, reads the product back (still in cache),
evaluates the epilogue and writes every output. The epilogue's other operands are strided views of the
region's inputs (a broadcast bias row), addressed in the product's (batch, rows, columns) space.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from llvmlite import ir

from ..layout import region_views, reshape_strides
from . import scalar_ops
from .loops import const64, for_range
from .region_eval import evaluate, is_var, leaves_used, load_view, needed_equations


class NotFusable(ValueError):
    """A region whose elementwise work after the product cannot be the matmul kernel's epilogue."""


@dataclass
class Epilogue:
    dot: object                 # the dot_general equation
    home: int                   # the output position the product is accumulated into
    eqns: list                  # the epilogue's equations
    outputs: list[int]          # output positions the epilogue writes (all but the product's own)
    leaves: list                # region vars read through views
    views: list                 # their views
    strides: list[tuple]        # their strides in the (batch, rows, columns) space
    cost: int


def dot_equation(region):
    return next(e for e in region.eqns if e.primitive.traits.fusion == "kernel")


def plan(region, sizes) -> Epilogue | None:
    """The epilogue of a matmul region (None: the region is the product alone); sizes: (B, M, N, K)."""
    dot = dot_equation(region)
    after = region.eqns[region.eqns.index(dot) + 1:]
    product = dot.outvars[0]
    if not after and [v.id for v in region.outvars] == [product.id]:
        return None
    positions = [i for i, v in enumerate(region.outvars) if v.id != product.id]
    if any(e.primitive.traits.fusion not in ("elementwise", "layout", "iota") for e in after):
        raise NotFusable("only elementwise work may follow the product")
    home = next((i for i, v in enumerate(region.outvars) if v.id == product.id), None)
    if home is None:
        home = next((i for i in positions if region.outvars[i].aval.dtype == product.aval.dtype), None)
        if home is None:
            raise NotFusable("no output of the product's dtype to accumulate it in")
    shape = tuple(product.aval.shape)
    if any(tuple(region.outvars[i].aval.shape) != shape for i in positions):
        raise NotFusable("an epilogue output's shape differs from the product's")
    targets = [region.outvars[i] for i in positions]
    eqns = needed_equations(after, targets)
    views = region_views(region)
    computed = {v.id for e in eqns for v in e.outvars} | {product.id}
    for e in eqns:
        for a in e.invars:
            if is_var(a) and a.id not in computed and a.id not in views:
                raise NotFusable("an epilogue operand is a layout op over the product")
    if any(t.id not in computed for t in targets):  # an output that is a layout op (transpose) of the product
        raise NotFusable("an epilogue output is not computed elementwise from the product")
    leaves = [v for v in leaves_used(eqns, targets, views) if v.id != product.id]
    b, m, n, k = sizes
    if k == 0 or m == 0 or n == 0:
        raise NotFusable("an empty product")
    strides = []
    for v in leaves:
        view = views[v.id]
        if tuple(view.shape) != shape:
            raise NotFusable("an epilogue operand's shape differs from the product's")
        s = reshape_strides(shape, view.strides, (b, m, n))
        if s is None:
            raise NotFusable("an epilogue operand is not a strided view in (batch, rows, columns)")
        strides.append(tuple(s))
    cost = sum(e.primitive.traits.cost for e in eqns)
    return Epilogue(dot, home, eqns, positions, leaves, [views[v.id] for v in leaves], strides, cost)


def emit(b: ir.IRBuilder, region, ep: Epilogue, pointers, sizes, bi, m0, m_end, n0, n_count, copies=None) -> None:
    """The epilogue over rows [m0, m_end) and columns [n0, n0 + n_count) of batch element bi. `copies`:
    input position -> (pointer, row length) of that operand's rows x columns copied before the product
    was accumulated (codegen/matmul.copied_operands), read there instead of from the input."""
    copies = copies or {}
    _, m, n, _ = sizes
    n_in = len(region.invars)
    product = ep.dot.outvars[0]
    home_ptr = pointers[n_in + ep.home]
    dtype = np.dtype(product.aval.dtype)
    batch_base = b.mul(bi, const64(m * n))

    def row(r):
        row_base = b.add(batch_base, b.mul(r, const64(n)))
        leaf_rows = [b.add(const64(view.offset), b.add(b.mul(bi, const64(s[0])), b.mul(r, const64(s[1]))))
                     for view, s in zip(ep.views, ep.strides)]

        def column(c):
            offset = b.add(row_base, c)

            def leaf_value(var):
                if var.id == product.id:
                    return scalar_ops.load(b, home_ptr, offset, dtype)
                k = next(i for i, v in enumerate(ep.leaves) if v.id == var.id)
                if ep.views[k].source in copies:
                    buf, ld = copies[ep.views[k].source]
                    at = b.add(b.mul(b.sub(r, m0), const64(ld)), b.sub(c, n0))
                    return scalar_ops.load(b, buf, at, ep.views[k].dtype)
                s = ep.strides[k][2]
                at = leaf_rows[k] if s == 0 else b.add(leaf_rows[k], c if s == 1 else b.mul(c, const64(s)))
                return load_view(b, ep.views[k], at, pointers)

            targets = [region.outvars[i] for i in ep.outputs]
            values = evaluate(b, ep.eqns, targets, leaf_value)
            for i, value in zip(ep.outputs, values):
                scalar_ops.store(b, pointers[n_in + i], offset, value, region.outvars[i].aval.dtype)

        for_range(b, n0, b.add(n0, n_count), column, name="ec")

    for_range(b, m0, m_end, row, name="er")
