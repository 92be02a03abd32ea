"""Row-fused reduction kernels: reductions over the last axis with their elementwise producers and
consumers on the same rows (softmax, log_softmax, logsumexp, layernorm, rmsnorm, variance), one kernel.

A region of this strategy computes, per row of `rows x C` elements, a few reductions over the row
and elementwise values on it. Each workgroup takes whole rows; for one row the kernel runs a few
loops over its C columns (one per dependency level of the reductions, and one for the row-shaped
results if none is left to carry them), per-row scalars between them. A full-row value computed in
one loop and needed in a later one is kept in a row scratch on the stack (never recomputed: it may
hold exp), so a row is read from memory once and stays in cache for the loops after the first:
at most two passes over memory, each row reduced in a fixed order (the same bits for every worker
count).

Values of the region have one of three roles: 'col' (one value per element of the row), 'row'
(one per row: reduction results, per-row elementwise values and their reshapes/broadcasts back to
the row's shape) and leaves (strided views of the inputs, iotas and literals, loaded where used).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from llvmlite import ir

from ..layout import region_views
from . import scalar_ops
from .pipeline import allow_wide_vectors, wide_loop_lanes
from .loops import const64, delinearize, dot_offsets, for_range, workgroup_slice
from .reduce import _Combiner, epilogue_fusable, has_epilogue, is_multi
from .region_eval import load_view
from .types import I32

SCRATCH_LIMIT = 128 * 1024
"""Bytes of row scratch at most (on the worker's stack): longer rows keep the one-kernel-per-reduction
partition."""

_OPS = ("sum", "max", "min")


class NotRowFusable(Exception):
    """The region is not a row-fused reduction (the caller keeps its kernels apart)."""


@dataclass
class RowPlan:
    rows_shape: tuple[int, ...]
    columns: int
    views: dict
    role: dict[int, str] = field(default_factory=dict)  # var id -> 'row' | 'col' (leaves: absent)
    level: dict[int, int] = field(default_factory=dict)  # loops that must finish before the value is known
    loops: list = field(default_factory=list)  # per loop: the reduction equations it carries
    col_outputs: list = field(default_factory=list)  # per loop: indices of the 'col' outputs it stores
    row_eqns: list = field(default_factory=list)  # per level: the 'row' equations computed then
    scratch: list = field(default_factory=list)  # 'col' var ids kept in the row scratch
    passes: list = field(default_factory=list)  # per loop: one or two _Pass over the columns

    @property
    def rows(self) -> int:
        return int(np.prod(self.rows_shape, dtype=np.int64))


def is_row_fused(region) -> bool:
    """Whether the region is this strategy's: one with a reduction that is not a plain reduction region
    (one reduction, last, whose result is the region's only output) nor a reduction with an epilogue
    (reduce.has_epilogue and epilogue_fusable: the reduction strategy's) nor independent reductions
    (reduce.is_multi: the multi_reduction strategy's)."""
    found = [i for i, e in enumerate(region.eqns) if e.primitive.traits.fusion == "reduction"]
    if not found:
        return False
    last = region.eqns[-1]
    plain = len(found) == 1 and found[0] == len(region.eqns) - 1 and list(region.outvars) == [last.outvars[0]]
    return not plain and not (has_epilogue(region) and epilogue_fusable(region)) and not is_multi(region)


def plan(region) -> RowPlan:
    """The loops of a row-fused region; NotRowFusable when it is not one."""
    reductions = [e for e in region.eqns if e.primitive.traits.fusion == "reduction"]
    if not reductions:
        raise NotRowFusable("no reduction")
    full = tuple(reductions[0].invars[0].aval.shape)
    if not full or full[-1] < 2 or 0 in full:
        raise NotRowFusable("rows shorter than 2 or empty")
    rows_shape, columns = full[:-1], full[-1]
    per_row = (rows_shape, rows_shape + (1,))
    p = RowPlan(rows_shape, columns, region_views(region))

    def role(atom):
        if not hasattr(atom, "id") or atom.id in p.views:
            return None
        return p.role[atom.id]

    def level(atom) -> int:
        return p.level.get(atom.id, 0) if hasattr(atom, "id") else 0

    for eqn in region.eqns:
        out = eqn.outvars[0]
        shape = tuple(out.aval.shape)
        name = eqn.primitive.name
        if out.id in p.views:
            if shape not in per_row and shape != full:
                raise NotRowFusable(f"view of shape {shape}")
            continue
        ins = [role(a) for a in eqn.invars]
        traits = eqn.primitive.traits
        if traits.fusion == "reduction":
            if traits.reduction not in _OPS or tuple(eqn.params["axes"]) != (len(full) - 1,) \
                    or tuple(eqn.invars[0].aval.shape) != full:
                raise NotRowFusable(f"{name} not over the rows' last axis")
            p.role[out.id] = "row"
            p.level[out.id] = level(eqn.invars[0]) + 1
            continue
        if traits.fusion in ("layout", "iota"):
            if ins != ["row"] or not _keeps_rows(eqn, rows_shape, full):
                raise NotRowFusable(f"{name} of a computed value")
            p.role[out.id] = "row"
        elif traits.fusion == "elementwise" and len(eqn.outvars) == 1:
            if shape == full:
                p.role[out.id] = "col"
            elif shape in per_row and "col" not in ins:
                p.role[out.id] = "row"
            else:
                raise NotRowFusable(f"{name} of shape {shape}")
        else:
            raise NotRowFusable(f"{name} in a row kernel")
        p.level[out.id] = max((level(a) for a in eqn.invars), default=0)
    for out in region.outvars:
        if out.id in p.views:
            raise NotRowFusable("an output that is an input view")
    _schedule(p, region)
    scratch_bytes = sum(np.dtype(_var(region, v).aval.dtype).itemsize for v in p.scratch) * columns
    if scratch_bytes > SCRATCH_LIMIT:
        raise NotRowFusable(f"row scratch of {scratch_bytes} bytes")
    return p


def _keeps_rows(eqn, rows_shape, full) -> bool:
    """A reshape between (rows) and (rows, 1), or a broadcast of either to (rows, 1) or (rows, C)."""
    src = tuple(eqn.invars[0].aval.shape)
    dst = tuple(eqn.outvars[0].aval.shape)
    per_row = (rows_shape, rows_shape + (1,))
    if src not in per_row:
        return False
    if eqn.primitive.name == "reshape":
        return dst in per_row
    if eqn.primitive.name == "broadcast_in_dim":
        return dst in per_row + (full,) and tuple(eqn.params["broadcast_dimensions"]) == tuple(range(len(src)))
    return False


def _var(region, var_id):
    for v in region.invars:
        if v.id == var_id:
            return v
    for e in region.eqns:
        for v in e.outvars:
            if v.id == var_id:
                return v
    raise KeyError(var_id)


def _schedule(p: RowPlan, region) -> None:
    """Loops, the 'row' equations of each level, the 'col' equations of each loop and the scratch."""
    producer = {v.id: e for e in region.eqns for v in e.outvars}
    reductions = [e for e in region.eqns if e.primitive.traits.fusion == "reduction"]
    full = p.rows_shape + (p.columns,)
    col_outs = [i for i, v in enumerate(region.outvars) if tuple(v.aval.shape) == full]
    n_loops = max([p.level[e.outvars[0].id] for e in reductions]
                  + [p.level[region.outvars[i].id] + 1 for i in col_outs])
    p.loops = [[e for e in reductions if p.level[e.outvars[0].id] == k + 1] for k in range(n_loops)]
    p.col_outputs = [[i for i in col_outs if p.level[region.outvars[i].id] == k] for k in range(n_loops)]
    p.row_eqns = [[e for e in region.eqns if p.role.get(e.outvars[0].id) == "row"
                   and e.primitive.traits.fusion != "reduction" and p.level[e.outvars[0].id] == k]
                  for k in range(n_loops + 1)]
    computed: dict[int, int] = {}
    scratch: list[int] = []
    for k in range(n_loops):
        targets = [e.invars[0] for e in p.loops[k]] + [region.outvars[i] for i in p.col_outputs[k]]
        for v in _tree(p, producer, targets, stop=lambda v: v in computed and computed[v] < k):
            computed.setdefault(v, k)
        for v in _tree_cuts(p, producer, targets, lambda v: v in computed and computed[v] < k):
            if v not in scratch:
                scratch.append(v)
    for k in range(n_loops):
        for e in p.loops[k]:
            v = _narrow_source(p, producer, e.invars[0])
            if v is not None and v not in scratch and computed.get(v) == k:
                tree = _tree(p, producer, [_var(region, v)], stop=lambda u: u in scratch and computed[u] < k)
                if any(producer[u].primitive.traits.cost >= 20 for u in tree):
                    scratch.append(v)
    p.scratch = scratch
    for k in range(n_loops):
        made_here = [v for v in scratch if computed[v] == k]
        outputs = [region.outvars[i] for i in p.col_outputs[k]]
        operands = [e.invars[0] for e in p.loops[k]]
        before = {v for v in scratch if computed[v] < k}
        if made_here and p.loops[k]:
            # Values kept for later loops first (their loop vectorizes at the data's width), then the
            # reductions over them from the scratch (an f64 accumulator would halve the first loop's width).
            first = _Pass(_eqns(p, producer, region, [_var(region, v) for v in made_here] + outputs, before),
                          made_here, [], p.col_outputs[k])
            cut = before | set(made_here)
            p.passes.append([first, _Pass(_eqns(p, producer, region, operands, cut), [], p.loops[k], [])])
        else:
            eqns = _eqns(p, producer, region, operands + outputs, before)
            p.passes.append([_Pass(eqns, made_here, p.loops[k], p.col_outputs[k])])


def _narrow_source(p: RowPlan, producer, operand):
    """The var id of a reduction's operand, or of the value it is a widening convert of, when that is
    a computed 'col' value of at most 32 bits (an f64 accumulator halves a loop's vector width)."""
    while hasattr(operand, "id") and p.role.get(operand.id) == "col" and producer[operand.id].primitive.name == "convert":
        operand = producer[operand.id].invars[0]
    if not hasattr(operand, "id") or p.role.get(operand.id) != "col" or np.dtype(operand.aval.dtype).itemsize > 4:
        return None
    return operand.id


@dataclass
class _Pass:
    """One loop over a row's columns: equations evaluated per column, the values it keeps in the
    scratch, the reductions it carries and the 'col' outputs it stores."""

    eqns: list
    stores: list
    reductions: list
    outputs: list


def _tree(p: RowPlan, producer, targets, stop) -> list[int]:
    """'col' var ids that computing `targets` evaluates, not walking past those `stop` accepts."""
    seen: list[int] = []
    stack = [t for t in targets if hasattr(t, "id")]
    done: set[int] = set()
    while stack:
        v = stack.pop()
        if p.role.get(v.id) != "col" or v.id in done or stop(v.id):
            continue
        done.add(v.id)
        seen.append(v.id)
        stack.extend(a for a in producer[v.id].invars if hasattr(a, "id"))
    return seen


def _tree_cuts(p: RowPlan, producer, targets, stop) -> list[int]:
    """The 'col' var ids at which _tree stops (the values read from the scratch)."""
    cuts: list[int] = []
    stack = [t for t in targets if hasattr(t, "id")]
    done: set[int] = set()
    while stack:
        v = stack.pop()
        if p.role.get(v.id) != "col" or v.id in done:
            continue
        done.add(v.id)
        if stop(v.id):
            cuts.append(v.id)
            continue
        stack.extend(a for a in producer[v.id].invars if hasattr(a, "id"))
    return cuts


def _eqns(p: RowPlan, producer, region, targets, cut: set[int]) -> list:
    chosen = set(_tree(p, producer, targets, stop=lambda v: v in cut))
    return [e for e in region.eqns if e.outvars[0].id in chosen]


def parallel_items(region) -> int:
    return plan(region).rows


def work(region) -> int:
    p = plan(region)
    return p.rows * p.columns * (len(p.loops) + len(region.eqns) // 2)


def emit_kernel(region, target=None):
    """The kernel's body emitter; `target` (a kiln.compiler.target.Target) lets the passes without a reduction
    use the target's widest vectors (_wide_lanes)."""
    p = plan(region)
    n_in = len(region.invars)
    out_index = {v.id: i for i, v in enumerate(region.outvars)}
    dtypes = {v.id: v.aval.dtype for e in region.eqns for v in e.outvars}
    combiners = {id(e): _Combiner(e.primitive.traits.reduction, e.outvars[0].aval.dtype) for loop in p.loops for e in loop}

    streams = _streams(p, region)
    wide = _wide_lanes(p, region, target) if target is not None else {}

    def body(b: ir.IRBuilder, pointers, workgroup_id, workgroup_count):
        if wide:
            allow_wide_vectors(b.module, target)
        candidates = _streamed_outputs(p, region, b.module.triple)
        modes = {}  # staged outputs -> (quiet passes, prefetch): the kernel without streaming, and with
        for staged in ([], candidates) if candidates else ([],):
            quiet = _quiet_passes(p, staged)
            kept = [s for s in streams if not (s.write and s.pointer - n_in in staged)]
            modes[tuple(staged)] = quiet, _Prefetch(p, kept, len(quiet)) if quiet and kept else None
        scratch = {v: b.alloca(scalar_ops.info(dtypes[v]).storage, size=const64(p.columns), name=f"row{v}")
                   for v in p.scratch}
        chunk = modes[tuple(candidates)][1]
        stage_columns = max(STAGE_COLUMNS, chunk.chunk if chunk is not None else 0)
        stage_buffers = {i: _aligned_alloca(b, scalar_ops.info(region.outvars[i].aval.dtype).storage, stage_columns,
                                            f"stage{i}") for i in candidates}
        accs = {key: b.alloca(c.acc_type, name="acc") for key, c in combiners.items()}
        unordered = b.alloca(ir.IntType(1), name="unordered")
        lo, hi = workgroup_slice(b, p.rows, workgroup_id, workgroup_count)

        def rows(staged):
            """The workgroup's rows, the outputs `staged` streamed past the caches."""
            quiet, prefetch = modes[tuple(staged)]
            stage = {i: stage_buffers[i] for i in staged}
            def row(r):
                row_index = delinearize(b, r, p.rows_shape) if p.rows_shape else []
                if prefetch is not None:
                    following = b.add(r, const64(1))
                    following = b.select(b.icmp_unsigned("<", following, hi), following, r)
                    bases = prefetch.row_bases(b, following)
                env: dict[int, ir.Value] = {}

                def leaf(atom, col):
                    if not hasattr(atom, "id"):
                        return scalar_ops.literal(atom.value, atom.aval.dtype)
                    if atom.id in env:
                        return env[atom.id]
                    view = p.views[atom.id]
                    index = row_index + ([col] if len(view.shape) > len(p.rows_shape) and col is not None else [])
                    if len(view.shape) > len(index):
                        index = index + [const64(0)]
                    return load_view(b, view, dot_offsets(b, index, view.strides, const64(view.offset)), pointers)

                def apply(eqn, read):
                    if eqn.primitive.traits.fusion == "layout":
                        return read(eqn.invars[0])
                    args = [read(a) for a in eqn.invars]
                    return scalar_ops.emit(b, eqn.primitive.name, eqn.params, args, [a.aval.dtype for a in eqn.invars],
                                           eqn.outvars[0].aval.dtype)

                def row_phase(k):
                    for eqn in p.row_eqns[k]:
                        env[eqn.outvars[0].id] = apply(eqn, lambda a: leaf(a, None))
                        v = eqn.outvars[0]
                        if v.id in out_index and tuple(v.aval.shape) != p.rows_shape + (p.columns,):
                            scalar_ops.store(b, pointers[n_in + out_index[v.id]], r, env[v.id], v.aval.dtype)

                def run_loop(k, fast: bool, again: bool = False):
                    """Loop k's passes over the row. fast: its float max/min reductions combine unchecked
                    (_Combiner.combine_unchecked) and `unordered` records whether an operand was NaN;
                    again: the exact rerun of a row (cold: prefetches nothing)."""
                    loop, passes = p.loops[k], p.passes[k]
                    for e in loop:
                        b.store(combiners[id(e)].init(), accs[id(e)])
                    if fast:
                        b.store(ir.Constant(ir.IntType(1), 0), unordered)
                    for n, step in enumerate(passes):
                        chunk_start = [None]  # the staged chunk's first column (outputs streamed past the caches)
                        lanes = wide.get((k, n))

                        def column(c, step=step):
                            local: dict[int, ir.Value] = {}

                            def read(atom):
                                if hasattr(atom, "id"):
                                    if atom.id in local:
                                        return local[atom.id]
                                    if atom.id in scratch:
                                        return scalar_ops.load(b, scratch[atom.id], c, dtypes[atom.id])
                                return leaf(atom, c)

                            for eqn in step.eqns:
                                local[eqn.outvars[0].id] = apply(eqn, read)
                            for v in step.stores:
                                scalar_ops.store(b, scratch[v], c, local[v], dtypes[v])
                            for e in step.reductions:
                                comb, acc, value = combiners[id(e)], accs[id(e)], read(e.invars[0])
                                if fast and comb.unchecked(b.module):
                                    b.store(comb.combine_unchecked(b, b.load(acc), value), acc)
                                    b.store(b.or_(b.load(unordered), comb.is_nan(b, value)), unordered)
                                else:
                                    b.store(comb.combine(b, b.load(acc), value, True), acc)
                            for i in step.outputs:
                                v = region.outvars[i]
                                if i in stage:
                                    scalar_ops.store(b, stage[i], b.sub(c, chunk_start[0]), read(v), v.aval.dtype)
                                    continue
                                offset = b.add(b.mul(r, const64(p.columns)), c)
                                scalar_ops.store(b, pointers[n_in + i], offset, read(v), v.aval.dtype)

                        def run_chunk(start, end, step=step, column=column, chunk_start=chunk_start, name=f"c{k}.{n}",
                                      lanes=lanes):
                            """The columns [start, end), then the chunk's staged outputs streamed out."""
                            chunk_start[0] = start
                            for_range(b, start, end, column, name=f"{name}.c", vector_width=lanes)
                            row_start = b.mul(r, const64(p.columns))
                            for i in step.outputs:
                                if i in stage:
                                    _copy_streaming(b, pointers[n_in + i], b.add(row_start, start), stage[i],
                                                    b.sub(end, start), region.outvars[i].aval.dtype, name=f"{name}.s{i}")

                        if prefetch is not None and (k, n) in quiet and not again:
                            prefetch.columns(b, pointers, bases, quiet.index((k, n)), run_chunk, name=f"c{k}.{n}")
                        elif any(i in stage for i in step.outputs):
                            def chunk(start, run_chunk=run_chunk):
                                end = b.add(start, const64(STAGE_COLUMNS))
                                run_chunk(start, b.select(b.icmp_unsigned("<", end, const64(p.columns)), end, const64(p.columns)))

                            for_range(b, 0, p.columns, chunk, name=f"c{k}.{n}", step=STAGE_COLUMNS)
                        else:
                            for_range(b, 0, p.columns, column, name=f"c{k}.{n}", vector_width=lanes)

                row_phase(0)
                for k, loop in enumerate(p.loops):
                    unchecked = [e for e in loop if combiners[id(e)].unchecked(b.module)]
                    if unchecked:
                        # Float max/min: the vectorized loop combines without NaN and signed-zero handling
                        # (one max instruction per vector, not five); a row where an operand was NaN or
                        # whose result is a zero runs the loop again with the exact combine, so every
                        # result is the exact one's, bit for bit (cold: NaN or zero maxima are rare).
                        run_loop(k, True)
                        redo = b.load(unordered)
                        for e in unchecked:
                            redo = b.select(redo, redo, combiners[id(e)].is_zero(b, b.load(accs[id(e)])))
                        with b.if_then(redo, likely=False):
                            run_loop(k, False, again=True)
                    else:
                        run_loop(k, False)
                    for e in loop:
                        v = e.outvars[0]
                        env[v.id] = combiners[id(e)].finalize(b, b.load(accs[id(e)]))
                        if v.id in out_index:
                            scalar_ops.store(b, pointers[n_in + out_index[v.id]], r, env[v.id], v.aval.dtype)
                    row_phase(k + 1)

            for_range(b, lo, hi, row, name="r")
            if stage and str(b.module.triple).startswith("x86_64"):
                # x86's streaming stores are weakly ordered: fenced before the workgroup reports its work done.
                # (aarch64's stnp is ordered as any store: the pool's release of the finished work covers it.)
                fence = b.module.globals.get("llvm.x86.sse.sfence") or ir.Function(
                    b.module, ir.FunctionType(ir.VoidType(), []), name="llvm.x86.sse.sfence")
                b.call(fence, [])

        if candidates:
            # Streamed where the outputs are at least the machine's last-level cache (the dispatch says its size).
            with b.if_else(_streaming(b, p, region, candidates)) as (streamed, cached):
                with streamed:
                    rows(candidates)
                with cached:
                    rows([])
        else:
            rows([])

    return body


def _wide_lanes(p: RowPlan, region, target) -> dict[tuple[int, int], int]:
    """(loop, pass) -> vector lanes, for the passes that carry no reduction, where the target's widest vectors
    are wider than LLVM's tuning prefers (pipeline.wide_loop_lanes: AVX-512, 512-bit vectors rather than 256).
    Such a pass computes the same operations in every lane at any width, so its bits do not depend on it,
    while the reductions, whose order the width would change, keep LLVM's choice; these passes hold the
    kernel's elementwise work (softmax's exp and its division: 4096x4096 f32 on one Zen 4 core, in cache,
    0.65 -> 0.52 ms per 256 rows). The lanes are those of the pass's widest value."""
    found = {}
    for k, loop in enumerate(p.passes):
        for n, step in enumerate(loop):
            if step.reductions:
                continue
            values = [v for e in step.eqns for v in list(e.invars) + list(e.outvars) if hasattr(v, "aval")]
            values += [region.outvars[i] for i in step.outputs]
            widest = max((np.dtype(v.aval.dtype).itemsize for v in values), default=0)
            lanes = wide_loop_lanes(target, widest) if widest else None
            if lanes and lanes > 1:
                found[(k, n)] = lanes
    return found


STREAM_MIN_BYTES = 32 * 2**20
"""Where the runtime does not know the machine's last-level cache (kiln_dispatch_args_t.last_level_cache_kib
is 0: no sysfs, or a runtime before the field), full-row floating-point outputs of at least this many bytes
in all are streamed (see _streaming)."""
STREAM_FLOOR_BYTES = 2**20
"""Outputs of fewer bytes in all are never streamed, whatever the cache (no x86-64 CPU with a smaller
last-level cache is a target worth a second copy of the kernel's row loop)."""
STREAM_MIN_ROW_BYTES = 1024
STAGE_COLUMNS = 256
"""Columns per staged chunk of a streamed output: the pass computes a chunk into a stack buffer (in L1),
then copies it to the output with aligned 64-byte streaming stores. Short chunks interleave the stores
with the compute (4096x4096 f32, two workers, quiet 16-core Xeon: softmax 9.0 / 8.1 / 7.9 / 7.2 / 7.2 ms,
layernorm 5.4 / 5.0 / 4.8 / 5.2 / 4.1 ms with 4096 / 2048 / 1024 / 512 / 256 columns)."""


def _streamed_outputs(p: RowPlan, region, triple: str) -> list[int]:
    """The positions of the 'col' outputs the kernel may write with streaming stores: all of its floating-point
    full-row outputs (float16, bfloat16, float32, float64), on x86-64 and aarch64 (where LLVM's non-temporal
    stores are stnp pairs), where they are STREAM_FLOOR_BYTES or more
    together in rows of STREAM_MIN_ROW_BYTES or more; each dispatch streams them or not by the machine's
    last-level cache (_streaming)."""
    if not str(triple).startswith(("x86_64", "aarch64")):
        return []
    full = p.rows_shape + (p.columns,)
    outs = [i for i, v in enumerate(region.outvars)
            if tuple(v.aval.shape) == full and scalar_ops.info(v.aval.dtype).is_float]
    sizes = [np.dtype(region.outvars[i].aval.dtype).itemsize for i in outs]
    if not outs or _output_bytes(p, region, outs) < STREAM_FLOOR_BYTES or p.columns * min(sizes) < STREAM_MIN_ROW_BYTES:
        return []
    return outs


def _output_bytes(p: RowPlan, region, outs) -> int:
    return p.rows * p.columns * sum(np.dtype(region.outvars[i].aval.dtype).itemsize for i in outs)


def _streaming(b: ir.IRBuilder, p: RowPlan, region, outs) -> ir.Value:
    """Whether this dispatch streams the outputs `outs` (an i1): where they are at least as large as the
    machine's last-level cache, which the runtime gives every dispatch (kiln_dispatch_args_t.last_level_cache_kib;
    codegen.kernel: the builder's last_level_cache_kib), or STREAM_MIN_BYTES where it is 0 (unknown). An output
    that large goes to memory anyway before the next kernel could read it from the cache, and a streaming store
    writes its line without reading it first (a normal store's miss reads the line it writes: 1.5x the memory
    traffic of a softmax); smaller outputs stay cached for their reader (streamed, a 1024x4096 layer norm ran
    14% slower where its 16 MiB stayed in a large L3). The choice changes how the outputs are written, never
    their values."""
    total = _output_bytes(p, region, outs)
    cache = getattr(b, "last_level_cache_kib", None)
    if cache is None:
        return ir.Constant(ir.IntType(1), int(total >= STREAM_MIN_BYTES))
    kib = b.zext(cache, ir.IntType(64))
    limit = b.select(b.icmp_unsigned("==", kib, const64(0)), const64(STREAM_MIN_BYTES), b.mul(kib, const64(1024)))
    return b.icmp_unsigned("<=", limit, const64(total))


def _aligned_alloca(b: ir.IRBuilder, ty, count: int, name: str):
    slot = b.alloca(ty, size=const64(count), name=name)
    slot.align = _LINE
    return slot


def _copy_streaming(b: ir.IRBuilder, out, offset, stage, count, dtype, name: str) -> None:
    """out[offset : offset + count] = stage[:count], the 64-byte-aligned lines of the destination written
    with non-temporal vector stores, the elements before the first and after the last such line with
    ordinary stores."""
    storage = scalar_ops.info(dtype).storage
    size = np.dtype(dtype).itemsize
    per_line = _LINE // size
    dst = b.gep(out, [offset], inbounds=True, source_etype=storage)
    address = b.ptrtoint(dst, ir.IntType(64))
    to_line = b.and_(b.sub(const64(0), address), const64(_LINE - 1))
    head = b.udiv(to_line, const64(size))
    head = b.select(b.icmp_unsigned("==", b.and_(address, const64(size - 1)), const64(0)), head, count)
    head = b.select(b.icmp_unsigned("<", head, count), head, count)
    lines = b.udiv(b.sub(count, head), const64(per_line))
    body_end = b.add(head, b.mul(lines, const64(per_line)))

    def element(i):
        value = b.load(b.gep(stage, [i], inbounds=True, source_etype=storage), typ=storage)
        b.store(value, b.gep(dst, [i], inbounds=True, source_etype=storage))

    line_type = ir.VectorType(ir.IntType(32), _LINE // 4)
    nontemporal = b.module.add_metadata([ir.Constant(I32, 1)])

    def line(j):
        first = b.add(head, b.mul(j, const64(per_line)))
        value = b.load(b.gep(stage, [first], inbounds=True, source_etype=storage), typ=line_type, align=size)
        store = b.store(value, b.gep(dst, [first], inbounds=True, source_etype=storage), align=_LINE)
        store.set_metadata("nontemporal", nontemporal)

    for_range(b, 0, head, element, name=f"{name}.head")
    for_range(b, 0, lines, line, name=f"{name}.lines")
    for_range(b, body_end, count, element, name=f"{name}.tail")


PREFETCH_MIN_ROW_BYTES = 1024
"""Rows whose streamed bytes (inputs read and outputs written, see _streams) are fewer are not
prefetched: the hardware's stream prefetcher keeps up with short rows."""
PREFETCH_CHUNK_BYTES = 1024
"""Bytes of the widest stream per chunk of a prefetching loop (each chunk issues its share of the
next row's prefetches, then runs the columns of the chunk)."""
_LINE = 64


@dataclass(frozen=True)
class _Stream:
    """A buffer a row reads or writes along unit-stride columns, at a different place for each row."""

    pointer: int  # index into the kernel's pointers: a region input, or n_in + an output's index
    dtype: np.dtype
    row_strides: tuple[int, ...]
    offset: int
    write: bool


def _streams(p: RowPlan, region) -> list[_Stream]:
    """The buffers a row streams from or to memory: full-shape input views with unit column stride
    that move with the row (not gamma/beta-like views broadcast over the rows, which stay cached),
    and the full-shape outputs."""
    full = p.rows_shape + (p.columns,)
    found: list[_Stream] = []
    for view in p.views.values():
        if not view.is_buffer or tuple(view.shape) != full or view.strides[-1] != 1 or not any(view.strides[:-1]):
            continue
        stream = _Stream(view.source, np.dtype(view.dtype), tuple(view.strides[:-1]), view.offset, False)
        if stream not in found:
            found.append(stream)
    n_in = len(region.invars)
    rows_strides = tuple(int(s) for s in np.cumprod((p.columns,) + p.rows_shape[:0:-1])[::-1]) if p.rows_shape else ()
    for i, v in enumerate(region.outvars):
        if tuple(v.aval.shape) == full:
            found.append(_Stream(n_in + i, np.dtype(v.aval.dtype), rows_strides, 0, True))
    if sum(s.dtype.itemsize for s in found) * p.columns < PREFETCH_MIN_ROW_BYTES:
        return []
    return found


def _quiet_passes(p: RowPlan, staged=()) -> list[tuple[int, int]]:
    """(loop, pass) of the passes over a row that touch no memory stream: after the row's first (which
    reads it from memory) and storing no full-row output but streamed ones (`staged`, written with
    non-temporal stores: no miss to compete with). A row kernel without one (rmsnorm: a sum of squares,
    then the scaled row stored) streams as a copy does, which the hardware prefetcher serves best;
    software prefetches there only compete with the stores' misses (measured slower)."""
    passes = [(k, n) for k, loop in enumerate(p.passes) for n in range(len(loop))][1:]
    return [(k, n) for k, n in passes if all(i in staged for i in p.passes[k][n].outputs)]


class _Prefetch:
    """Software prefetch of the next row while the row is in cache (issue 10: a row's first pass reads
    it from memory and its last writes the outputs, while the passes between run from cache; without
    prefetching, memory idles during those and the compute idles during the first pass's misses and
    the last pass's write misses).

    Each quiet pass (_quiet_passes) runs its columns in chunks; chunk t of the T = (quiet passes x
    chunks per pass) issues the prefetches of lines [t*q, (t+1)*q) of every stream of the next row
    (q = ceil(lines / T)), so the next row's lines are requested evenly over the time the row spends
    in cache: reads into L2 (llvm.prefetch locality 2), outputs with write intent, so the last pass's
    stores find their lines owned. The next row is that of the same workgroup (the last row of a
    workgroup's slice prefetches nothing new); prefetches never fault and change no value."""

    def __init__(self, p: RowPlan, streams: list[_Stream], passes: int):
        self.p = p
        self.streams = streams
        widest = max(s.dtype.itemsize for s in streams)
        self.chunk = max(PREFETCH_CHUNK_BYTES // widest, 1)
        self.chunks = -(-p.columns // self.chunk)
        total = passes * self.chunks
        self.lines = [-(-p.columns * s.dtype.itemsize // _LINE) for s in streams]
        self.per_chunk = [-(-lines // total) for lines in self.lines]

    def row_bases(self, b: ir.IRBuilder, row: ir.Value) -> list[ir.Value]:
        index = delinearize(b, row, self.p.rows_shape) if self.p.rows_shape else []
        return [dot_offsets(b, index, s.row_strides, const64(s.offset)) for s in self.streams]

    def columns(self, b: ir.IRBuilder, pointers, bases, quiet: int, run, name: str) -> None:
        """run(start, end) over the row's columns in chunks of at most self.chunk, each first prefetching
        its share (quiet: the index of this pass among the row's quiet passes)."""
        fn = b.module.globals.get("llvm.prefetch.p0") or ir.Function(
            b.module, ir.FunctionType(ir.VoidType(), [ir.PointerType(), I32, I32, I32]), name="llvm.prefetch.p0")

        def chunk(i):
            start = b.mul(i, const64(self.chunk)) if self.chunks > 1 else const64(0)
            t = b.add(const64(quiet * self.chunks), i) if self.chunks > 1 else const64(quiet)
            for s, base, lines, q in zip(self.streams, bases, self.lines, self.per_chunk):
                per_line = max(_LINE // s.dtype.itemsize, 1)
                first = b.mul(t, const64(q))
                for j in range(q):
                    line = b.add(first, const64(j))
                    line = b.select(b.icmp_unsigned("<", line, const64(lines)), line, const64(lines - 1))
                    offset = b.add(base, b.mul(line, const64(per_line)))
                    address = b.gep(pointers[s.pointer], [offset], source_etype=scalar_ops.info(s.dtype).storage)
                    b.call(fn, [address, ir.Constant(I32, int(s.write)), ir.Constant(I32, 2), ir.Constant(I32, 1)])
            if self.chunks == 1:
                run(const64(0), const64(self.p.columns))
                return
            end = b.add(start, const64(self.chunk))
            run(start, b.select(b.icmp_unsigned("<", end, const64(self.p.columns)), end, const64(self.p.columns)))

        if self.chunks == 1:
            chunk(const64(0))
        else:
            for_range(b, 0, self.chunks, chunk, name=name)
