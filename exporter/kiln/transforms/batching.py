"""vmap: a trace whose values carry a batch axis.

Each primitive's `batching_rule(values, batch_dims, **params) -> (outputs,
out_batch_dims)` maps the primitive over the batch axis; batch_dims entries
are an axis index or None (not batched).
"""
from __future__ import annotations

import contextvars

from ..core.aval import ShapedArray
from ..core.ir import Graph, subgraphs_of
from ..core.errors import KilnError
from ..core.trace import Trace, Tracer, get_aval, new_trace
from ..core.primitive import lookup


# The named axis a batching rule maps over while it runs (name, size): a rule that batches a body graph again
# (control flow, custom_jvp/custom_vjp) calls vmap_flat over the same axis, which takes its name, so that the
# collectives (kiln.lax.psum, ...) inside the body reduce over it.
_rule_axis: contextvars.ContextVar = contextvars.ContextVar("kiln_batching_rule_axis", default=None)


class BatchingError(KilnError):
    """vmap over inconsistent axis sizes, or a primitive without a batching rule."""


class BatchTracer(Tracer):
    __slots__ = ("_trace", "value", "batch_dim")

    def __init__(self, trace, value, batch_dim):
        self._trace = trace
        self.value = value
        self.batch_dim = batch_dim

    @property
    def aval(self):
        a = get_aval(self.value)
        if self.batch_dim is None:
            return a
        shape = a.shape[: self.batch_dim] + a.shape[self.batch_dim + 1:]
        return ShapedArray(shape, a.dtype, a.weak_type)


class BatchTrace(Trace):
    def __init__(self, level, axis_size: int, axis_name=None):
        super().__init__(level)
        self.axis_size = axis_size
        self.axis_name = axis_name  # what kiln.lax's collectives (psum, axis_index, ...) name this mapped axis by

    def pure(self, value):
        return BatchTracer(self, value, None)

    def lift(self, tracer):
        return BatchTracer(self, tracer, None)

    def process_primitive(self, prim, tracers, params):
        collective = getattr(prim, "collective_batching_rule", None)
        if collective is not None:  # kiln.lax's collectives: rule(trace, tracers, params) sees the axis' name
            return collective(self, tracers, params)
        if prim.batching_rule is None and prim.inline_rule is not None:
            return prim.inline_rule(*tracers, **params)
        values = [t.value for t in tracers]
        dims = [t.batch_dim for t in tracers]
        if all(d is None for d in dims) and not _graphs_name(params, self.axis_name):
            outs = prim.bind(*values, **params)
            outs = outs if prim.multiple_results else [outs]
            return [BatchTracer(self, o, None) for o in outs]
        if prim.batching_rule is None:
            raise BatchingError(f"primitive {prim.name} has no batching (vmap) rule")
        token = _rule_axis.set((self.axis_name, self.axis_size) if self.axis_name is not None else None)
        try:
            outs, out_dims = prim.batching_rule(values, dims, axis_size=self.axis_size, **params)
        finally:
            _rule_axis.reset(token)
        if not prim.multiple_results:
            outs, out_dims = [outs], [out_dims]
        return [BatchTracer(self, o, d) for o, d in zip(outs, out_dims)]


def _graphs_name(params: dict, axis_name) -> bool:
    """Whether a graph among a primitive's params (a loop body, a branch, a callee) holds a collective over
    `axis_name`: then the primitive runs at that vmap even when no operand is batched (run as is, the
    collective would meet no axis)."""
    if axis_name is None:
        return False
    for value in params.values():
        for graph in (value if isinstance(value, (tuple, list)) else (value,)):
            if isinstance(graph, Graph) and axis_name in _collective_names(graph):
                return True
    return False


def _collective_names(graph: Graph) -> frozenset:
    """The axis names the collectives in `graph` (and its subgraphs) name; cached on the graph."""
    names = graph.__dict__.get("_kiln_collective_names")
    if names is None:
        found = set()
        for eqn in graph.eqns:
            if getattr(eqn.primitive, "collective_batching_rule", None) is not None:
                found.update(eqn.params["axes"])
            for sub in subgraphs_of(eqn):
                found.update(_collective_names(sub))
        names = graph.__dict__["_kiln_collective_names"] = frozenset(found)
    return names


def move_batch_axis(x, dim, to: int, axis_size: int):
    """x with its batch axis at position `to` (broadcasting it in when x is unbatched).

    Binds kiln.lax's broadcast_in_dim and transpose, found in core's primitive registry by name
    because kiln.lax sits above the transforms.
    """
    a = get_aval(x)
    if dim is None:
        shape = a.shape[:to] + (axis_size,) + a.shape[to:]
        dims = tuple(i if i < to else i + 1 for i in range(a.ndim))
        return lookup("broadcast_in_dim").bind(x, shape=shape, broadcast_dimensions=dims)
    if dim == to:
        return x
    perm = [i for i in range(a.ndim) if i != dim]
    perm.insert(to, dim)
    return lookup("transpose").bind(x, permutation=tuple(perm))


def find_named_axis(axis_name, where: str) -> BatchTrace:
    """The innermost active vmap (or pmap) whose axis_name is `axis_name`; NameError as JAX's otherwise."""
    from kiln.core import trace as trace_module

    for trace in reversed(trace_module._stack):
        if isinstance(trace, BatchTrace) and trace.axis_name is not None and trace.axis_name == axis_name:
            return trace
    raise NameError(f"unbound axis name: {axis_name}. {where} names a mapped axis: call it inside "
                    f"kiln.vmap(..., axis_name={axis_name!r}) or kiln.pmap")


def vmap_flat(fn, args: list, in_dims: list, out_dims: list | None, axis_size: int, where: str = "vmap",
              axis_name=None):
    """Maps fn: list -> list over axis_size; returns outputs with batch axes at out_dims.

    out_dims entries may be negative (counted from the end of the batched output); one
    outside the batched output's rank is a BatchingError that starts with `where`.
    """
    inherited = _rule_axis.get()
    if axis_name is None and inherited is not None and inherited[1] == axis_size:
        axis_name = inherited[0]  # a batching rule mapping a body over its own named axis
    token = _rule_axis.set(None)
    try:
        with new_trace(lambda level: BatchTrace(level, axis_size, axis_name)) as trace:
            ins = [BatchTracer(trace, a, d) for a, d in zip(args, in_dims)]
            outs = [trace.full_raise(o) for o in fn(*ins)]
            results = []
            for i, o in enumerate(outs):
                target = 0 if out_dims is None else out_dims[i]
                if target is None:
                    if o.batch_dim is not None:
                        raise BatchingError(f"{where}: output leaf {i} is batched but out_axes gives None for it")
                    results.append(o.value)
                    continue
                ndim = o.aval.ndim + 1
                if isinstance(target, bool) or not isinstance(target, int) or not -ndim <= target < ndim:
                    raise BatchingError(f"{where}: out_axes {target!r} is out of range for output leaf {i} of shape "
                                        f"{o.aval.shape} (ndim {ndim} with the mapped axis; valid axes are "
                                        f"{-ndim}..{ndim - 1})")
                results.append(move_batch_axis(o.value, o.batch_dim, target % ndim, axis_size))
            return results
    finally:
        _rule_axis.reset(token)


def check_axis_sizes(fn_name: str, args: list, in_dims: list) -> int:
    sizes = {}
    for i, (a, d) in enumerate(zip(args, in_dims)):
        if d is None:
            continue
        shape = get_aval(a).shape
        if not -len(shape) <= d < len(shape):
            raise BatchingError(f"vmap of {fn_name}: in_axes {d} is out of range for argument leaf {i} of shape {shape}")
        sizes[i] = shape[d]
    if not sizes:
        raise BatchingError(f"vmap of {fn_name}: no argument is mapped (every in_axes is None)")
    if len(set(sizes.values())) > 1:
        detail = ", ".join(f"leaf {i} has size {s}" for i, s in sizes.items())
        raise BatchingError(f"vmap of {fn_name}: mapped axes have different sizes: {detail}")
    return next(iter(sizes.values()))

