"""Tracing a function to its abstract form without running it: kiln.make_jaxpr (the IR kiln traces, printable,
as jax.make_jaxpr's jaxpr), kiln.eval_shape and kiln.ShapeDtypeStruct."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from .core import dtypes
from .core.aval import ShapedArray
from .core.calls import positional_arguments
from .core.ir import Graph
from .core.pytree import tree_flatten, tree_unflatten
from .core.signature import leaf_aval, split_static
from .core.trace import trace_to_graph_with_captures

__all__ = ["make_jaxpr", "eval_shape", "ShapeDtypeStruct", "ClosedGraph"]


@dataclass(frozen=True)
class ShapeDtypeStruct:
    """A shape and dtype standing for an array (an argument of eval_shape, make_jaxpr or jit.lower). weak_type
    (JAX's, default False) marks a weakly typed value: eval_shape sets it on results a Python scalar's weak type
    reaches, and an argument given with it is traced weakly typed."""

    shape: tuple
    dtype: np.dtype
    weak_type: bool

    def __init__(self, shape, dtype, *, weak_type: bool = False):
        object.__setattr__(self, "shape", tuple(int(d) for d in shape))
        object.__setattr__(self, "dtype", dtypes.canonical(dtype))
        object.__setattr__(self, "weak_type", bool(weak_type))

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    def __repr__(self):
        weak = ", weak_type=True" if self.weak_type else ""
        return f"ShapeDtypeStruct(shape={self.shape}, dtype={self.dtype.name}{weak})"


class ClosedGraph:
    """What make_jaxpr returns: kiln's traced IR, printed by str(), with jax's ClosedJaxpr attributes.

    .jaxpr is the graph itself (.invars, .constvars, .eqns, .outvars); .consts the arrays bound to its constvars;
    .in_avals / .out_avals the abstract values (ShapedArray: shape, dtype, weak_type)."""

    def __init__(self, graph: Graph, out_shape=None):
        self.jaxpr = graph
        self.out_shape = out_shape

    @property
    def consts(self) -> list:
        return list(self.jaxpr.consts)

    @property
    def eqns(self) -> list:
        return self.jaxpr.eqns

    @property
    def in_avals(self) -> list[ShapedArray]:
        return self.jaxpr.in_avals

    @property
    def out_avals(self) -> list[ShapedArray]:
        return self.jaxpr.out_avals

    def __str__(self):
        return str(self.jaxpr)

    def pretty_print(self) -> str:
        return str(self.jaxpr)

    def __repr__(self):
        return str(self.jaxpr)


def _arg_aval(x, where: str) -> ShapedArray:
    if isinstance(x, ShapeDtypeStruct):
        return ShapedArray(x.shape, x.dtype, weak_type=x.weak_type)
    return leaf_aval(x, where)


def _struct(aval: ShapedArray) -> ShapeDtypeStruct:
    return ShapeDtypeStruct(aval.shape, aval.dtype, weak_type=aval.weak_type)


def _trace(fn: Callable, where: str, static_argnums, args, kwargs):
    """(graph, output tree structure) of fn traced at the abstract values of args (static ones fixed)."""
    if kwargs:
        args = positional_arguments(where, fn, args, kwargs)
    static_argnums = (static_argnums,) if isinstance(static_argnums, int) else tuple(static_argnums)
    dynamic, statics = split_static(tuple(args), static_argnums)
    leaves, in_tree = tree_flatten(dynamic)
    avals = [_arg_aval(x, f"{where}: argument leaf {i}") for i, x in enumerate(leaves)]
    out_tree = []
    positions = dict(statics)

    def flat_fn(*xs):
        rest = iter(tree_unflatten(in_tree, xs))
        full = [positions[i] if i in positions else next(rest) for i in range(len(args))]
        out_leaves, treedef = tree_flatten(fn(*full))
        out_tree.append(treedef)
        return out_leaves

    graph, _ = trace_to_graph_with_captures(flat_fn, avals)
    return graph, out_tree[0]


def make_jaxpr(fn: Callable, static_argnums=(), return_shape: bool = False) -> Callable:
    """A function of fn's arguments that traces fn at their shapes and dtypes and returns its IR (a ClosedGraph,
    printed as kiln's IR); with return_shape=True, (IR, tree of ShapeDtypeStruct of the outputs)."""
    name = getattr(fn, "__name__", type(fn).__name__)

    def traced(*args, **kwargs):
        graph, out_tree = _trace(fn, f"make_jaxpr of {name}", static_argnums, args, kwargs)
        closed = ClosedGraph(graph)
        if return_shape:
            return closed, tree_unflatten(out_tree, [_struct(a) for a in graph.out_avals])
        return closed

    traced.__name__ = f"make_jaxpr({name})"
    return traced


def eval_shape(fn: Callable, *args, **kwargs):
    """The shapes and dtypes of fn(*args) (a tree of ShapeDtypeStruct) without computing it; arguments may be
    arrays or ShapeDtypeStructs."""
    name = getattr(fn, "__name__", type(fn).__name__)
    graph, out_tree = _trace(fn, f"eval_shape of {name}", (), args, kwargs)
    return tree_unflatten(out_tree, [_struct(a) for a in graph.out_avals])


