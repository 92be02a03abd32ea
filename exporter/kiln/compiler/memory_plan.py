"""Planned memory: the intermediates of a function placed at offsets of one arena, at export.

A function's top-level dispatches write buffers that later dispatches read. Those that only kernels
touch (not returned, not stored into a global, not handed to control flow or a view) are dead once
their last reader has run, so their memory can be shared: each gets an offset in the function's
transient arena such that two buffers whose lifetimes overlap never overlap in memory (lifetimes are
step intervals [written, last read], both ends inclusive, so a kernel never writes over its own
inputs). The runtime allocates the arena once per context and function (bytecode alloc.transient),
so a steady-state call allocates only its results. docs/vm.md, "Planned memory".
"""
from __future__ import annotations

import contextlib
import contextvars
from dataclasses import dataclass, field

from ..core.ir import Graph, Var
from ..vm_types import tensor_type

ALIGNMENT = 64  # KILN_BUFFER_ALIGNMENT: each buffer starts on a cache line
_ENABLED = contextvars.ContextVar("kiln_memory_planning", default=True)


@contextlib.contextmanager
def planning_disabled():
    """Compiles inside the block allocate every intermediate on its own (alloc), as before planned
    memory: the reference the planned modules are tested against."""
    token = _ENABLED.set(False)
    try:
        yield
    finally:
        _ENABLED.reset(token)


def planning_enabled() -> bool:
    return _ENABLED.get()


@dataclass(frozen=True)
class TransientPlan:
    """Offsets (bytes) of the planned buffers by value id, and the arena's size."""

    offsets: dict[int, int]
    size: int
    enabled: bool = True  # False inside planning_disabled(): no alloc.transient nor alloc.result
    overwrites: dict[int, int] = field(default_factory=dict)  # output id -> the input id it is written over
    body_offsets: dict[int, int] = field(default_factory=dict)  # host step index -> its bodies' arena base
    spare_offsets: dict = field(default_factory=dict)  # (host step index, carry) -> its spare buffer's offset


def step_inputs(step) -> list:
    """The values a step reads: a dispatch's inputs, a host step's operands."""
    return list(step.inputs) if getattr(step, "region", None) is not None else list(step.eqn.invars)


def aligned(n: int) -> int:
    return -(-n // ALIGNMENT) * ALIGNMENT


_aligned = aligned


def _intervals(graph: Graph, steps: list, host_defs: dict | None = None, ok_reads: frozenset = frozenset(),
               copied: frozenset = frozenset()) -> dict[int, tuple[int, int, int]]:
    """value id -> (first step, last step, bytes) of every dispatch output only kernels read.

    The schedule widens this for control flow (kiln.compiler.schedule.loop_memory): `host_defs`
    (value id -> step) are values a host step makes in memory the plan may place (a loop's final
    carry, a scan's stacked outputs); `ok_reads` are (step, value id) host reads that keep nothing
    of the value past that step (a loop operand its body only hands to kernels, a branch index that
    i.load reads); `copied` are positions of the graph's outputs that the enclosing step copies as
    soon as the graph returns (a scan body's per-row outputs, a while condition's predicate): an
    output only at such positions lives to the end of the graph and no further."""
    defined: dict[int, tuple[int, int]] = {}
    for index, step in enumerate(steps):
        if getattr(step, "region", None) is not None:
            for v in step.outputs:
                size = tensor_type(v.aval).byte_size
                if size:
                    defined[v.id] = (index, size)
    for vid, (index, aval) in (host_defs or {}).items():
        size = tensor_type(aval).byte_size
        if size:
            defined[vid] = (index, size)
    last: dict[int, int] = {}
    excluded: set[int] = {a.id for k, a in enumerate(graph.outvars) if isinstance(a, Var) and k not in copied}
    for k, a in enumerate(graph.outvars):
        if isinstance(a, Var) and k in copied:
            last[a.id] = len(steps)
    for index, step in enumerate(steps):
        kernel = getattr(step, "region", None) is not None
        for a in step_inputs(step):
            if isinstance(a, Var) and a.id in defined:
                last[a.id] = max(last.get(a.id, index), index)
                if not kernel and (index, a.id) not in ok_reads:
                    excluded.add(a.id)
    return {vid: (first, last.get(vid, first), size) for vid, (first, size) in defined.items()
            if vid not in excluded}


def result_slots(graph: Graph, steps: list, host_defs=()) -> dict[int, int]:
    """value id -> result index of the results a top-level dispatch writes and only kernels read
    otherwise: alloc.result may place them in the caller's destination (kiln_context_invoke_host),
    so the kernel writes the caller's memory and no copy follows. A value returned twice is left out
    (two destinations cannot both be its memory)."""
    positions: dict[int, list[int]] = {}
    for k, a in enumerate(graph.outvars):
        if isinstance(a, Var):
            positions.setdefault(a.id, []).append(k)
    outputs = {v.id for step in steps if getattr(step, "region", None) is not None for v in step.outputs}
    outputs |= set(host_defs)  # a loop's final carry or stacked outputs written where the plan says
    host_read = {a.id for step in steps if getattr(step, "region", None) is None
                 for a in step_inputs(step) if isinstance(a, Var)}
    return {vid: ks[0] for vid, ks in positions.items()
            if len(ks) == 1 and vid in outputs and vid not in host_read}


def plan_transients(graph: Graph, steps: list) -> TransientPlan:
    """Packs the graph's kernel-only intermediates into one arena: largest first, each at the lowest
    aligned offset clear of every placed buffer whose lifetime overlaps its own."""
    if not _ENABLED.get():
        return TransientPlan({}, 0, enabled=False)
    offsets, size = _pack(_intervals(graph, steps))
    return TransientPlan(offsets, size)


def _pack(intervals: dict) -> tuple[dict, int]:
    """key -> offset for (first, last, bytes) intervals, and the arena size. Each order places the
    intervals one by one, each at the lowest aligned offset clear of every placed one whose lifetime
    overlaps its own: largest first (TFLite's and IREE's greedy by size), then largest area (bytes x
    steps) first and longest lifetime first; the first order that reaches the lower bound (the most
    bytes alive at one step) is kept, else the smallest packing. Greedy by size alone misses the bound
    where in-place merges make long spans (a residual MLP training step: 32000 bytes over it, so
    the plain packing won and its in-place writes were dropped)."""
    bound = _live_bound(intervals)
    best = None
    for key in (lambda k: (-intervals[k][2], intervals[k][0], str(k)),
                lambda k: (-(intervals[k][1] - intervals[k][0] + 1) * aligned(intervals[k][2]), intervals[k][0], str(k)),
                lambda k: (intervals[k][0] - intervals[k][1], -intervals[k][2], intervals[k][0], str(k))):
        packed = _pack_in_order(intervals, sorted(intervals, key=key))
        if best is None or packed[1] < best[1]:
            best = packed
        if best[1] <= bound:
            break
    return best


def _live_bound(intervals: dict) -> int:
    """The most aligned bytes alive at one step: no packing of `intervals` is smaller."""
    events: dict[int, int] = {}
    for first, last, nbytes in intervals.values():
        events[first] = events.get(first, 0) + aligned(nbytes)
        events[last + 1] = events.get(last + 1, 0) - aligned(nbytes)
    live = most = 0
    for step in sorted(events):
        live += events[step]
        most = max(most, live)
    return most


def _pack_in_order(intervals: dict, order: list) -> tuple[dict, int]:
    placed: list[tuple[int, int, int, int]] = []  # (first, last, offset, end)
    offsets: dict = {}
    size = 0
    for key in order:
        first, last, nbytes = intervals[key]
        nbytes = aligned(nbytes)
        busy = sorted((o, e) for f, l, o, e in placed if f <= last and first <= l)
        offset = 0
        for start, end in busy:
            if offset + nbytes <= start:
                break
            offset = max(offset, end)
        offsets[key] = offset
        placed.append((first, last, offset, offset + nbytes))
        size = max(size, offset + nbytes)
    return offsets, size


def plan_steps(graph: Graph, steps: list, body_need: dict[int, int], inplace: bool = True, *,
               host_defs: dict | None = None, ok_reads: frozenset = frozenset(), copied: frozenset = frozenset(),
               spares: dict | None = None) -> TransientPlan:
    """The arena of one graph of the schedule: its kernel-only intermediates, the arena parts its
    control-flow steps' bodies need (`body_need`: step index -> bytes, alive during that step only),
    the spare buffers of its loops' carries (`spares`: key -> (step index, bytes), alive during that
    step only) and, with `inplace`, each elementwise output written over an input that dies at its
    dispatch (same type, read element for element: `inplace_pairs`), the two sharing one offset.
    `host_defs`, `ok_reads` and `copied` as for `_intervals`."""
    intervals = _intervals(graph, steps, host_defs, ok_reads, copied)
    planned = _plan_groups(intervals, steps, body_need, inplace, spares or {})
    if planned.overwrites:  # the greedy packing of merged lifetimes may come out larger: keep the smaller
        plain = _plan_groups(intervals, steps, body_need, False, spares or {})
        if plain.size < planned.size:
            return plain
    return planned


def _plan_groups(intervals: dict, steps: list, body_need: dict[int, int], inplace: bool,
                 spares: dict) -> TransientPlan:
    group = {vid: vid for vid in intervals}
    overwrites: dict[int, int] = {}
    if inplace:
        for index, step in enumerate(steps):
            if getattr(step, "region", None) is None:
                continue
            claimed: set[int] = set()
            for i, j in inplace_pairs(step):
                u, v = step.inputs[i], step.outputs[j]
                if (u.id in intervals and v.id in intervals and u.id not in claimed and v.id not in overwrites
                        and intervals[u.id][1] == index and intervals[u.id][2] == intervals[v.id][2]):
                    claimed.add(u.id)
                    overwrites[v.id] = u.id
                    group[v.id] = group[u.id]
    spans: dict = {}
    for vid, (first, last, nbytes) in intervals.items():
        g = group[vid]
        f, l, n = spans.get(g, (first, last, nbytes))
        spans[g] = (min(f, first), max(l, last), max(n, nbytes))
    for index, need in body_need.items():
        spans[("body", index)] = (index, index, need)
    for key, (index, nbytes) in spares.items():
        spans[("spare", key)] = (index, index, nbytes)
    offsets, size = _pack(spans)
    return TransientPlan({vid: offsets[group[vid]] for vid in intervals}, size, True, overwrites,
                         {index: offsets[("body", index)] for index in body_need},
                         {key: offsets[("spare", key)] for key in spares})


def inplace_pairs(step) -> list[tuple[int, int]]:
    """(input position, output position) of an elementwise dispatch whose output may be written over
    that input's memory: the kernel is the elementwise strategy's (one loop that, per element, loads
    every input and then stores every output at that element), the input has the output's shape and
    dtype, and the region reads it only at the element it writes (no transpose, broadcast, slice or
    other layout view of it). A horizontal kernel (codegen/horizontal.py: one such loop per output shape)
    pairs an input and an output of one segment when no other segment reads the input; a row-fused
    kernel its one full-row output and an input read only where it is written (`_row_fused_pairs`); a
    matrix product an epilogue output and an epilogue operand (`_matmul_pairs`)."""
    from .compile import kernel_strategy

    region = step.region
    if not region.outvars:
        return []
    strategy = kernel_strategy(region)
    if strategy == "elementwise":
        return _elementwise_pairs(region)
    if strategy == "row_fused":
        return _row_fused_pairs(region)
    if strategy == "matmul":
        return _matmul_pairs(region)
    if strategy != "horizontal":
        return []
    from .codegen.elementwise import plan_loops
    from .codegen.horizontal import segments

    segs = segments(region)
    readers: dict[int, int] = {}
    for seg in segs:
        for source in {view.source for view in plan_loops(seg.region)[2]}:
            readers[source] = readers.get(source, 0) + 1
    return [(i, seg.positions[j]) for seg in segs for i, j in _elementwise_pairs(seg.region) if readers.get(i) == 1]


def _matmul_pairs(region) -> list[tuple[int, int]]:
    """inplace_pairs of a matrix product with an elementwise epilogue (codegen/epilogue.py): once all K
    blocks of a work item's tile are accumulated into the `home` output, a loop over the tile's
    elements loads, per element, the product and the epilogue's operands, and then stores every
    epilogue output there. An epilogue output may so be written over an input that the kernel reads
    only as an epilogue operand at the element written (every view of it the input itself, at the
    product's shape and dtype): `home` too, as each work item copies such an operand's rows x columns
    to the stack before accumulating the product there (matmul.copied_operands; a residual layer's
    `h + gelu(z @ w + b)` written over h). Never over A or B, which the product reads across its
    output."""
    from .codegen import epilogue as epilogues
    from .codegen import matmul
    from .layout import contiguous_strides

    try:
        p = matmul._plan(region)
        ep = epilogues.plan(region, p.sizes) if p.fast is not None else None
    except Exception:  # not a product this strategy gives an epilogue: never in place
        return []
    if ep is None:
        return []
    shape = tuple(ep.dot.outvars[0].aval.shape)
    identity = tuple(contiguous_strides(shape))
    operands = {p.lhs.view.source, p.rhs.view.source}  # what the kernel reads: A, B and the leaves
    pairs = []
    for i, v in enumerate(region.invars):
        mine = [w for w in ep.views if w.source == i]
        if (i in operands or tuple(v.aval.shape) != shape or not mine
                or not all(tuple(w.shape) == shape and tuple(w.strides) == identity and w.offset == 0
                           and w.dtype == v.aval.dtype for w in mine)):
            continue
        pairs += [(i, j) for j in ep.outputs if j != ep.home and region.outvars[j].aval.dtype == v.aval.dtype]
    copied = matmul.copied_operands(region)
    return pairs + [(i, ep.home) for i in copied]


def _row_fused_pairs(region) -> list[tuple[int, int]]:
    """inplace_pairs of a row-fused region (codegen/row_fused.py: each workgroup takes whole rows and
    runs loops over a row's columns; loop k carries the reductions of level k + 1 and stores the 'col'
    outputs of level k). Its output may be written over an input when it is the region's only full-row
    output, its loop is the row's last and carries no reduction (so that loop has one pass and is never
    run again for a row, and no loop after it reads the row), and every view of the input is the
    input itself at the output's shape and dtype: the loops before read the row whole before anything
    is written, and the last one reads each column of the input just before it writes that column
    (streamed outputs: a chunk after its columns were read). Softmax, layer norm and RMS norm over a
    matrix product's output qualify; a row's other values (sums, per-row outputs) never alias."""
    from .codegen import row_fused
    from .layout import contiguous_strides

    try:
        p = row_fused.plan(region)
    except Exception:  # not a row-fused region as this strategy plans it: never in place
        return []
    full = p.rows_shape + (p.columns,)
    outs = [j for j, v in enumerate(region.outvars) if tuple(v.aval.shape) == full]
    if len(outs) != 1:
        return []
    (j,) = outs
    out = region.outvars[j]
    k = p.level.get(out.id)
    if k is None or k != len(p.loops) - 1 or p.loops[k] or len(p.passes[k]) != 1:
        return []
    identity = contiguous_strides(full)
    pairs = []
    for i, v in enumerate(region.invars):
        views = [w for w in p.views.values() if w.source == i]
        if (tuple(v.aval.shape) == full and v.aval.dtype == out.aval.dtype and views
                and all(tuple(w.shape) == full and tuple(w.strides) == identity and w.offset == 0
                        and w.dtype == v.aval.dtype for w in views)):
            pairs.append((i, j))
    return pairs


def _elementwise_pairs(region) -> list[tuple[int, int]]:
    """inplace_pairs of an elementwise strategy's region (all outputs of one shape)."""
    from .codegen.elementwise import plan_loops
    from .layout import contiguous_strides

    try:
        eqns, _, leaf_views, _ = plan_loops(region)
    except Exception:  # a region the elementwise strategy plans differently: never in place
        return []
    if not all(e.primitive.traits.fusion == "elementwise" for e in eqns):
        return []
    shape = tuple(region.outvars[0].aval.shape)
    identity = contiguous_strides(shape)
    by_source: dict[int, list] = {}
    for view in leaf_views:
        by_source.setdefault(view.source, []).append(view)
    pairs = []
    for i, v in enumerate(region.invars):
        views = by_source.get(i)
        if not views or not all(w.shape == shape and tuple(w.strides) == tuple(identity) and w.offset == 0
                                and w.dtype == v.aval.dtype for w in views):
            continue
        if tuple(v.aval.shape) != shape:
            continue
        for j, out in enumerate(region.outvars):
            if out.aval.dtype == v.aval.dtype and tuple(out.aval.shape) == shape:
                pairs.append((i, j))
    return pairs
