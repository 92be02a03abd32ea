"""Reduction kernels: sum/max/min over any axes, with the operand's elementwise producers fused in.

Two loop orders, chosen by whether the operand's last dim is reduced:
- reduced innermost: one accumulator per output element, the innermost
  (contiguous) reduced loop vectorized as a reassociated reduction;
- kept innermost: a tile of accumulators per output row, updated elementwise
  across the contiguous kept dim (vectorized), reduced dims in the loops outside.
f32/f16 sums accumulate in f64; integer sums wrap like numpy's astype.

Elementwise work consuming only the reduction's result (mean = sum / n, a loss's scalar tail, the scale
after a column sum) is the kernel's epilogue (compiler/epilogue_fusion.fuse_reduction_epilogues merges
the regions): applied to each output element once its accumulator is final, where the result would be
stored; the epilogue's outputs have the result's elements (keepdims reshapes of the result allowed), its
other operands are strided views of the inputs read at the output element. A split reduction takes it
in its combine kernel (the partials), never in the chunks.

A large reduction with few outputs runs as two kernels (compiler/split_reduction.py): partials over
`chunks` ranges of the outermost reduced dim (each a workgroup item, accumulators stored unrounded),
then their combine in chunk order: the same bits for every worker count.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from llvmlite import ir

from ..layout import collapse_dims, contiguous_strides, region_views
from . import scalar_ops
from .intrinsics import call_binary, intrinsic
from .loops import const64, delinearize, dot_offsets, for_range, workgroup_slice
from .region_eval import evaluate, is_var, leaves_used, load_view, needed_equations
from .scalar_ops import round_to_narrow
from .types import F64, I8, info, int_const

TILE = 256
ROWS_PER_BLOCK = 8


class NotFusable(ValueError):
    """Elementwise work after a reduction that cannot be the reduction kernel's epilogue."""


_ORDER_PRESERVING = ("reshape", "squeeze", "expand_dims", "broadcast_in_dim")


@dataclass
class ReduceEpilogue:
    eqns: list                  # the epilogue's equations (layout ops of computed values resolved away)
    targets: list               # the values the outputs receive
    positions: list[int]        # their output positions
    result_position: int | None  # the output position of the reduction's own result, if it is one
    leaves: list                # region vars read through views
    views: list                 # their views (each of the output's element count)


@dataclass
class ReducePlan:
    op: str  # 'sum', 'max', 'min'
    dtype: np.dtype
    operand: object
    eqns: list
    leaves: list
    leaf_views: list
    kept_shape: tuple[int, ...]
    kept_strides: list[tuple[int, ...]]  # per leaf, then output
    red_shape: tuple[int, ...]
    red_strides: list[tuple[int, ...]]
    kept_innermost: bool
    empty_output: bool
    chunks: int = 1  # > 1: partials of `chunks` ranges of red_shape[0], stored as accumulators
    kept_size: int = 1
    result: object = None       # the reduction's result Var
    epilogue: ReduceEpilogue | None = None

    @property
    def base_items(self) -> int:
        if self.empty_output:
            return 0
        if self.kept_innermost:
            return int(np.prod(self.kept_shape[:-1], dtype=np.int64)) * -(-self.kept_shape[-1] // TILE)
        return int(np.prod(self.kept_shape, dtype=np.int64))

    @property
    def parallel_items(self) -> int:
        return self.base_items * self.chunks


def reduction_index(region) -> int | None:
    """The position of the region's one reduction equation (None: no reduction or several)."""
    found = [i for i, e in enumerate(region.eqns) if e.primitive.traits.fusion == "reduction"]
    return found[0] if len(found) == 1 else None


def has_epilogue(region) -> bool:
    """Whether the region is one reduction followed by elementwise work on its result whose outputs all
    have the result's element count (the form fuse_reduction_epilogues makes; row-fused regions differ)."""
    i = reduction_index(region)
    if i is None or i == len(region.eqns) - 1:
        return False
    size = region.eqns[i].outvars[0].aval.size
    return (all(e.primitive.traits.fusion in ("elementwise", "layout", "iota") for e in region.eqns[i + 1:])
            and all(v.aval.size == size for v in region.outvars))


def epilogue_fusable(region) -> bool:
    """Whether the reduction kernel takes this region (its reduction's consumers as the epilogue)."""
    try:
        _plan(region)
    except NotFusable:
        return False
    return True


def _epilogue(region, index: int, views) -> ReduceEpilogue:
    eqn = region.eqns[index]
    result = eqn.outvars[0]
    size = result.aval.size
    if "chunks" in eqn.params:
        raise NotFusable("a split reduction's chunks take no epilogue")
    after = region.eqns[index + 1:]
    alias: dict[int, object] = {}
    computed = {result.id}
    eqns = []

    def resolve(a):
        return alias.get(a.id, a) if is_var(a) else a

    for e in after:
        fusion = e.primitive.traits.fusion
        if fusion == "layout" and is_var(e.invars[0]) and resolve(e.invars[0]).id in computed:
            if e.primitive.name not in _ORDER_PRESERVING or e.outvars[0].aval.size != size or (
                    e.primitive.name == "broadcast_in_dim"
                    and list(e.params["broadcast_dimensions"]) != sorted(e.params["broadcast_dimensions"])):
                raise NotFusable(f"{e.primitive.name} of the reduction's result in the epilogue")
            alias[e.outvars[0].id] = resolve(e.invars[0])
        elif fusion == "elementwise":
            for a in e.invars:
                if is_var(a) and resolve(a).id not in computed and a.id not in views:
                    raise NotFusable("an epilogue operand is computed before the reduction")
            eqns.append(type(e)(e.primitive, [resolve(a) for a in e.invars], e.outvars, e.params, e.source_info))
            computed.add(e.outvars[0].id)
        elif fusion not in ("layout", "iota"):
            raise NotFusable("only elementwise work may follow the reduction")
    positions, targets, result_position = [], [], None
    for i, v in enumerate(region.outvars):
        if v.aval.size != size:
            raise NotFusable("an output's size differs from the reduction's result")
        t = resolve(v)
        if t.id == result.id and v.id == result.id:
            result_position = i
            continue
        if t.id not in computed:
            raise NotFusable("an output is not computed from the reduction's result")
        positions.append(i)
        targets.append(t)
    eqns = needed_equations(eqns, targets)
    leaves = [v for v in leaves_used(eqns, targets, views) if v.id != result.id]
    for v in leaves:
        if int(np.prod(views[v.id].shape, dtype=np.int64)) != size:
            raise NotFusable("an epilogue operand's size differs from the reduction's result")
    return ReduceEpilogue(eqns, targets, positions, result_position, leaves, [views[v.id] for v in leaves])


def _plan(region) -> ReducePlan:
    index = reduction_index(region)
    if index is None:
        raise ValueError("a reduction kernel's region holds one reduction")
    eqn = region.eqns[index]
    plain = index == len(region.eqns) - 1 and list(region.outvars) == [eqn.outvars[0]]
    op = eqn.primitive.traits.reduction
    chunks = int(eqn.params.get("chunks", 1))
    operand = eqn.invars[0]
    shape = tuple(operand.aval.shape)
    axes = tuple(eqn.params["axes"])
    views = region_views(region)
    epilogue = None if plain else _epilogue(region, index, views)
    eqns = needed_equations(region.eqns[:index], [operand])
    leaves = leaves_used(eqns, [operand], views)
    leaf_views = [views[v.id] for v in leaves]
    kept = [d for d in range(len(shape)) if d not in axes]
    reduced = [d for d in range(len(shape)) if d in axes]
    out_contig = contiguous_strides(tuple(shape[d] for d in kept))
    out_strides = [0] * len(shape)
    for d, s in zip(kept, out_contig):
        out_strides[d] = s
    stride_sets = [v.strides for v in leaf_views]
    kept_shape, kept_strides = collapse_dims([shape[d] for d in kept], [[s[d] for d in kept] for s in stride_sets + [tuple(out_strides)]])
    red_shape, red_strides = collapse_dims([shape[d] for d in reduced], [[s[d] for d in reduced] for s in stride_sets])
    last_kept = bool(shape) and (len(shape) - 1) in kept and shape[-1] != 1 and kept_shape[-1] != 1
    empty_output = any(shape[d] == 0 for d in kept)
    dtype = np.dtype(eqn.params["dtype"] if chunks > 1 else eqn.outvars[0].aval.dtype)
    kept_size = int(np.prod([shape[d] for d in kept], dtype=np.int64))
    return ReducePlan(op, dtype, operand, eqns, leaves, leaf_views, kept_shape, kept_strides, red_shape, red_strides,
                      last_kept, empty_output, chunks, kept_size, eqn.outvars[0], epilogue)


def accumulator_dtype(op: str, dtype) -> np.dtype:
    """The dtype partials are stored in: the accumulator's (float64 for float sums, the compute float
    for float16/bfloat16 max/min)."""
    d = info(dtype)
    if d.is_float:
        return np.dtype(np.float64) if op == "sum" or np.dtype(dtype).itemsize == 8 else np.dtype(np.float32)
    return np.dtype(dtype)


def _chunk_range(b: ir.IRBuilder, chunk, p: ReducePlan):
    """[chunk * n / chunks, (chunk + 1) * n / chunks) of the outermost reduced dim (n = red_shape[0])."""
    n = const64(p.red_shape[0])
    start = b.udiv(b.mul(chunk, n), const64(p.chunks))
    stop = b.udiv(b.mul(b.add(chunk, const64(1)), n), const64(p.chunks))
    return start, stop


def parallel_items(region) -> int:
    return _plan(region).parallel_items


def work(region) -> int:
    return int(region.eqns[reduction_index(region)].invars[0].aval.size) * (1 + len(region.eqns) // 2)


def _linear_offset(b: ir.IRBuilder, view, linear) -> ir.Value:
    """The element of a view at row-major position `linear` of its shape."""
    shape = tuple(view.shape)
    strides = [s for s, d in zip(view.strides, shape) if d != 1]
    dims = tuple(d for d in shape if d != 1)
    if all(s == 0 for s in strides):
        return const64(view.offset)
    if tuple(strides) == tuple(contiguous_strides(dims)):
        return b.add(const64(view.offset), linear)
    return dot_offsets(b, delinearize(b, linear, dims), strides, const64(view.offset))


class _Combiner:
    """Accumulator type, initial value, combine and finalize for one reduction."""

    def __init__(self, op: str, dtype):
        self.op = op
        self.d = info(dtype)
        if op == "sum" and self.d.is_float:
            self.acc_type = F64
        elif self.d.kind == "b":
            self.acc_type = I8
        else:
            self.acc_type = self.d.compute

    def init(self) -> ir.Constant:
        d = self.d
        if self.op == "sum":
            return ir.Constant(self.acc_type, 0.0) if d.is_float else ir.Constant(self.acc_type, 0)
        if self.op == "prod":
            return ir.Constant(self.acc_type, 1.0) if d.is_float else ir.Constant(self.acc_type, 1)
        is_max = self.op == "max"
        if d.is_float:
            return ir.Constant(self.acc_type, -np.inf if is_max else np.inf)
        if d.kind == "b":
            return ir.Constant(I8, 0 if is_max else 1)
        if d.is_signed:
            bound = -(1 << (d.bits - 1)) if is_max else (1 << (d.bits - 1)) - 1
        else:
            bound = 0 if is_max else (1 << d.bits) - 1
        return int_const(self.acc_type, bound)

    def combine(self, b: ir.IRBuilder, acc, value, reassociate: bool):
        d = self.d
        if d.kind == "b":
            return call_binary(b, "umin" if self.op in ("min", "prod") else "umax", acc, b.zext(value, I8))
        if self.op == "prod":
            if d.is_float:
                result = b.fmul(acc, value)
                if reassociate:
                    result.flags.extend(["reassoc", "contract"])
                return result
            return b.mul(acc, value)
        if self.op == "sum":
            if d.is_float:
                if value.type != self.acc_type:
                    value = b.fpext(value, self.acc_type)
                result = b.fadd(acc, value)
                if reassociate:
                    result.flags.extend(["reassoc", "contract"])
                return result
            return b.add(acc, value)
        is_max = self.op == "max"
        if d.is_float:
            return call_binary(b, "maximum" if is_max else "minimum", acc, value)
        name = ("smax" if is_max else "smin") if d.is_signed else ("umax" if is_max else "umin")
        return call_binary(b, name, acc, value)

    def unchecked(self, module: ir.Module) -> bool:
        """Whether a loop combines with combine_unchecked: a float max or min on x86-64, where the exact
        combine (llvm.maximum or minimum) costs about five instructions per vector (NaN and signed-zero
        handling); aarch64's fmax/fmin are the exact combine in one instruction."""
        return self.op in ("max", "min") and self.d.is_float and str(module.triple).startswith("x86_64")

    def combine_unchecked(self, b: ir.IRBuilder, acc, value):
        """The max or min assuming no NaN operand and ignoring the sign of zero (one max/min instruction
        per vector). Its result is the exact combine's, bit for bit, where no operand was NaN (is_nan of
        each) and the result is not a zero (is_zero): a loop using it reruns with combine where either
        fails (the result is poison after a NaN operand)."""
        fn = intrinsic(b.module, "maximum" if self.op == "max" else "minimum", acc.type, [acc.type] * 2, [acc.type])
        return b.call(fn, [acc, value], fastmath=("nnan", "nsz"))

    def is_nan(self, b: ir.IRBuilder, value):
        return b.fcmp_unordered("uno", value, value)

    def is_zero(self, b: ir.IRBuilder, acc):
        return b.fcmp_ordered("==", acc, ir.Constant(acc.type, 0.0))

    def finalize(self, b: ir.IRBuilder, acc):
        if self.d.kind == "b":
            return b.icmp_unsigned("!=", acc, ir.Constant(I8, 0))
        if acc.type != self.d.compute:
            return b.fptrunc(acc, self.d.compute)
        return acc


def emit_reduce_kernel(region):
    p = _plan(region)
    items = _emit_items(region, p)

    def body(b: ir.IRBuilder, pointers, workgroup_id, workgroup_count):
        lo, hi = workgroup_slice(b, p.parallel_items, workgroup_id, workgroup_count)
        items(b, pointers, lo, hi)

    return body


def _emit_items(region, p: ReducePlan):
    """items(builder, pointers, lo, hi): the kernel's work items [lo, hi)."""
    comb = _Combiner(p.op, p.dtype)
    n_in = len(region.invars)
    n_leaves = len(p.leaves)
    kept_rank = len(p.kept_shape)

    def body(b: ir.IRBuilder, pointers, lo, hi):
        if p.empty_output:
            return
        out_ptr = pointers[n_in]

        def value_at(kept_index, red_index):
            def leaf_value(var):
                k = p.leaves.index(var)
                offset = dot_offsets(b, kept_index, p.kept_strides[k], const64(p.leaf_views[k].offset))
                offset = dot_offsets(b, red_index, p.red_strides[k], offset)
                return load_view(b, p.leaf_views[k], offset, pointers)

            return evaluate(b, p.eqns, [p.operand], leaf_value)[0]

        chunk = [None]  # this item's chunk of red_shape[0] (chunks > 1)

        def reduced_loops(emit_point, depth=0, index=()):
            if depth == len(p.red_shape):
                emit_point(list(index))
                return
            start, stop = (0, p.red_shape[depth]) if depth or p.chunks == 1 else _chunk_range(b, chunk[0], p)
            for_range(b, start, stop, lambda r: reduced_loops(emit_point, depth + 1, index + (r,)), name=f"r{depth}")

        def reduced_blocks(emit_block, depth=0, index=()):
            """reduced_loops, the innermost reduced dim in blocks of ROWS_PER_BLOCK indices (then its
            remainder one by one), so a column's accumulator is loaded and stored once per block; the
            order of the combines is unchanged."""
            last = len(p.red_shape) - 1
            start, stop = (0, p.red_shape[depth]) if depth or p.chunks == 1 else _chunk_range(b, chunk[0], p)
            start = const64(start) if isinstance(start, int) else start
            stop = const64(stop) if isinstance(stop, int) else stop
            if depth < last:
                for_range(b, start, stop, lambda r: reduced_blocks(emit_block, depth + 1, index + (r,)), name=f"r{depth}")
                return
            whole = b.add(start, b.mul(b.udiv(b.sub(stop, start), const64(ROWS_PER_BLOCK)), const64(ROWS_PER_BLOCK)))
            for_range(b, start, whole, lambda r: emit_block([list(index) + [b.add(r, const64(j))] for j in range(ROWS_PER_BLOCK)]),
                      name=f"r{depth}", step=ROWS_PER_BLOCK)
            for_range(b, whole, stop, lambda r: emit_block([list(index) + [r]]), name=f"r{depth}.rest")

        def split_item(linear):
            """The base item of a linear item; sets the chunk (partials go to chunk * kept_size on)."""
            if p.chunks == 1:
                return linear
            chunk[0] = b.udiv(linear, const64(p.base_items))
            return b.urem(linear, const64(p.base_items))

        def store_result(offset, acc):
            ep = p.epilogue
            if p.chunks == 1 and ep is not None:
                value = comb.finalize(b, acc)
                if info(p.dtype).name in ("f16", "bf16"):
                    value = round_to_narrow(b, value, info(p.dtype).name)  # the result as stored
                if ep.result_position is not None:
                    scalar_ops.store(b, pointers[n_in + ep.result_position], offset, value, p.dtype)

                def leaf_value(var):
                    if var.id == p.result.id:
                        return value
                    k = next(i for i, v in enumerate(ep.leaves) if v.id == var.id)
                    return load_view(b, ep.views[k], _linear_offset(b, ep.views[k], offset), pointers)

                for i, v in zip(ep.positions, evaluate(b, ep.eqns, ep.targets, leaf_value)):
                    scalar_ops.store(b, pointers[n_in + i], offset, v, region.outvars[i].aval.dtype)
            elif p.chunks == 1:
                scalar_ops.store(b, out_ptr, offset, comb.finalize(b, acc), p.dtype)
            else:
                offset = b.add(offset, b.mul(chunk[0], const64(p.kept_size)))
                scalar_ops.store(b, out_ptr, offset, acc, accumulator_dtype(p.op, p.dtype))

        if not p.kept_innermost:
            acc = b.alloca(comb.acc_type, name="acc")
            unchecked = comb.unchecked(b.module)
            unordered = b.alloca(ir.IntType(1), name="unordered") if unchecked else None

            def row(o):
                kept_index = delinearize(b, split_item(o), p.kept_shape)
                b.store(comb.init(), acc)

                def point(red_index):
                    innermost = len(red_index) == len(p.red_shape)
                    b.store(comb.combine(b, b.load(acc), value_at(kept_index, red_index), innermost), acc)

                def fast_point(red_index):
                    value = value_at(kept_index, red_index)
                    b.store(comb.combine_unchecked(b, b.load(acc), value), acc)
                    b.store(b.or_(b.load(unordered), comb.is_nan(b, value)), unordered)

                if unchecked:
                    # A float max/min: combined unchecked, then again exactly where an operand was NaN or
                    # the result is a zero (_Combiner.combine_unchecked): the exact combine's bits.
                    b.store(ir.Constant(ir.IntType(1), 0), unordered)
                    reduced_loops(fast_point)
                    redo = b.load(unordered)
                    redo = b.select(redo, redo, comb.is_zero(b, b.load(acc)))
                    with b.if_then(redo, likely=False):
                        b.store(comb.init(), acc)
                        reduced_loops(point)
                else:
                    reduced_loops(point)
                out_offset = dot_offsets(b, kept_index, p.kept_strides[n_leaves])
                store_result(out_offset, b.load(acc))

            for_range(b, lo, hi, row, name="o")
            return

        inner = p.kept_shape[-1]
        tiles = -(-inner // TILE)
        accs = b.alloca(comb.acc_type, size=const64(TILE), name="accs")
        unchecked = comb.unchecked(b.module)
        unordered = b.alloca(ir.IntType(1), name="unordered") if unchecked else None
        zero = b.alloca(ir.IntType(1), name="zero") if unchecked else None

        def acc_ptr(c):
            return b.gep(accs, [c], inbounds=True, source_etype=comb.acc_type)

        def item(t_linear):
            t_linear = split_item(t_linear)
            o = b.udiv(t_linear, const64(tiles))
            tile = b.urem(t_linear, const64(tiles))
            start = b.mul(tile, const64(TILE))
            count = b.select(b.icmp_unsigned("<", b.sub(const64(inner), start), const64(TILE)),
                             b.sub(const64(inner), start), const64(TILE))
            outer_index = delinearize(b, o, p.kept_shape[:-1]) if kept_rank > 1 else []
            def block(red_indices, fast=False):
                def lane(c):
                    kept_index = outer_index + [b.add(start, c)]
                    acc = b.load(acc_ptr(c))
                    for red_index in red_indices:
                        value = value_at(kept_index, red_index)
                        if fast:
                            acc = comb.combine_unchecked(b, acc, value)
                            b.store(b.or_(b.load(unordered), comb.is_nan(b, value)), unordered)
                        else:
                            acc = comb.combine(b, acc, value, False)
                    b.store(acc, acc_ptr(c))

                for_range(b, 0, count, lane, name="c")

            for_range(b, 0, count, lambda c: b.store(comb.init(), acc_ptr(c)), name="init")
            if unchecked:
                # A float max/min: each column combined unchecked (one max per vector), then the tile again
                # exactly where an operand was NaN or a column's result is a zero (_Combiner.combine_unchecked):
                # the exact combine's bits.
                b.store(ir.Constant(ir.IntType(1), 0), unordered)
                reduced_blocks(lambda red_indices: block(red_indices, True))
                b.store(b.load(unordered), zero)
                for_range(b, 0, count, lambda c: b.store(
                    b.select(b.load(zero), b.load(zero), comb.is_zero(b, b.load(acc_ptr(c)))), zero), name="z")
                with b.if_then(b.load(zero), likely=False):
                    for_range(b, 0, count, lambda c: b.store(comb.init(), acc_ptr(c)), name="init")
                    reduced_blocks(block)
            else:
                reduced_blocks(block)

            def write(c):
                kept_index = outer_index + [b.add(start, c)]
                out_offset = dot_offsets(b, kept_index, p.kept_strides[n_leaves])
                store_result(out_offset, b.load(acc_ptr(c)))

            for_range(b, 0, count, write, name="w")

        for_range(b, lo, hi, item, name="t")

    return body


# ------------------------------------------------------------------ independent reductions in one kernel

@dataclass
class Segment:
    region: object          # the merged region's inputs, the equations this segment's outputs need
    positions: list[int]    # its outputs' positions among the merged region's outputs
    plan: ReducePlan


def _closure(eqns, targets) -> list:
    """The equations (layout ops included) the targets depend on, in order."""
    wanted = {t.id for t in targets if is_var(t)}
    chosen = []
    for eqn in reversed(eqns):
        if any(v.id in wanted for v in eqn.outvars):
            chosen.append(eqn)
            wanted.update(a.id for a in eqn.invars if is_var(a))
    return chosen[::-1]


def segments(region) -> list[Segment] | None:
    """A region of independent reductions (horizontal_fusion.fuse_reductions): its outputs grouped by the
    one reduction each depends on, each group a reduction kernel's region (plain or with an epilogue),
    every reduction keeping its operand's last axis (the column sums of bias gradients; a row reduction
    is row fusion's). None where the region is not one."""
    from ...core.ir import Graph

    reds = [e for e in region.eqns if e.primitive.traits.fusion == "reduction"]
    if len(reds) < 2:
        return None
    groups: dict[int, list[int]] = {}
    for i, v in enumerate(region.outvars):
        if not is_var(v):
            return None
        found = [e for e in _closure(region.eqns, [v]) if e.primitive.traits.fusion == "reduction"]
        if len(found) != 1:
            return None
        groups.setdefault(id(found[0]), []).append(i)
    if len(groups) != len(reds):
        return None
    result = []
    for e in reds:
        rank = len(e.invars[0].aval.shape)
        if "chunks" in e.params or not rank or rank - 1 in tuple(e.params.get("axes", ())):
            return None
        positions = groups[id(e)]
        outs = [region.outvars[i] for i in positions]
        sub = Graph(region.invars, [], [], _closure(region.eqns, outs), outs)
        try:
            plan = _plan(sub)
        except (NotFusable, ValueError):
            return None
        if plan.chunks != 1:
            return None
        result.append(Segment(sub, positions, plan))
    return result


def is_multi(region) -> bool:
    """Whether the region is several independent reductions for one kernel (segments)."""
    return segments(region) is not None


def multi_work(region) -> int:
    return sum(work(s.region) for s in segments(region))


def multi_parallel_items(region) -> int:
    return sum(s.plan.parallel_items for s in segments(region))


def emit_multi_kernel(region):
    """The segments' work items laid end to end, the workgroups splitting them: each output element is
    still reduced by one item in a fixed order, so its bits do not depend on the worker count."""
    segs = segments(region)
    total = sum(s.plan.parallel_items for s in segs)
    n_in = len(region.invars)
    emitters = [_emit_items(s.region, s.plan) for s in segs]

    def body(b: ir.IRBuilder, pointers, workgroup_id, workgroup_count):
        if total == 0:
            return
        lo, hi = workgroup_slice(b, total, workgroup_id, workgroup_count)
        base = 0
        for seg, items in zip(segs, emitters):
            n = seg.plan.parallel_items
            if n:
                seg_pointers = list(pointers[:n_in]) + [pointers[n_in + i] for i in seg.positions]
                items(b, seg_pointers, _clamp(b, lo, base, n), _clamp(b, hi, base, n))
            base += n

    return body


def _clamp(b: ir.IRBuilder, x, base: int, n: int):
    local = b.sub(x, const64(base))
    local = b.select(b.icmp_signed("<", local, const64(0)), const64(0), local)
    return b.select(b.icmp_signed(">", local, const64(n)), const64(n), local)
