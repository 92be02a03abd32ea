"""Composite primitives: an operation with its own JVP, transpose and batching rules whose eager
implementation and lowering are a graph of other kiln.lax operations (JAX's `lower_fun`).

A factorization written with fori_loop, dynamic slices and matmuls becomes one primitive this way:
transformations see the primitive and apply its rules (they never differentiate through the loop),
eager code evaluates the graph with numpy, and the compiler inlines the graph (the `graph` param,
like kernel_call's) before fusion, so the loop and its kernels run in the C runtime.

Evaluating the graph eagerly interprets it one operation at a time (for a loop, every step); a
primitive may pass `eager=`, a numpy function computing the same result, for concrete operands.

Usage: `p = composite_primitive("cholesky", implementation)`, then `p.apply(x, lower=True)` traces
`implementation(x, lower=True)` once per operand shapes/dtypes and params and binds `p`. Rules set
with `p.jvp_rule = ...` etc. receive the params without the graph (the decorators below strip it).
"""
from __future__ import annotations

import functools
from typing import Callable

from ..core.aval import ShapedArray
from ..core.evaluate import eval_graph
from ..core.primitive import Primitive, register
from ..core.trace import get_aval, trace_to_graph


class CompositePrimitive(Primitive):
    """A primitive implemented by a traced graph of lax operations (see the module docstring)."""

    def __init__(self, name: str, implementation: Callable, *, multiple_results: bool, eager: Callable | None = None):
        super().__init__(name, multiple_results=multiple_results)
        self.implementation = implementation
        self.call_graph_param = "graph"
        self.def_traits(fusion="inlined")
        self.format_params = lambda params: " ".join(f"{k}={v}" for k, v in params.items() if k != "graph")
        if eager is None:
            self.def_impl(lambda *args, graph, **params: self._outputs(eval_graph(graph, args)))
        else:
            self.def_impl(lambda *args, graph, **params: eager(*args, **params))
        self.def_abstract_eval(lambda *avals, graph, **params: self._outputs(graph.out_avals))

    def _outputs(self, outs):
        return list(outs) if self.multiple_results else outs[0]

    def apply(self, *operands, **params):
        """Binds the primitive on operands, with the graph traced for their shapes and dtypes."""
        avals = tuple(get_aval(x).strip_weak() for x in operands)
        graph = _graph_for(self, tuple((a.shape, a.dtype) for a in avals), tuple(sorted(params.items())))
        return self.bind(*operands, graph=graph, **params)

    def graph_free(self, rule: Callable) -> Callable:
        """rule with the `graph` param removed, for the JVP/transpose/batching rule protocols."""

        @functools.wraps(rule)
        def wrapped(*args, graph=None, **params):
            return rule(*args, **params)

        return wrapped


@functools.lru_cache(maxsize=512)
def _graph_for(prim: CompositePrimitive, shapes_dtypes, params):
    avals = [ShapedArray(shape, dtype) for shape, dtype in shapes_dtypes]

    def flat(*xs):
        outs = prim.implementation(*xs, **dict(params))
        return list(outs) if prim.multiple_results else [outs]

    return trace_to_graph(flat, avals)


def composite_primitive(name: str, implementation: Callable, *, multiple_results: bool = False,
                        eager: Callable | None = None) -> CompositePrimitive:
    """Registers a composite primitive implemented by `implementation(*operands, **params)`. `eager`, if
    given, computes the same result from numpy arrays (`eager(*arrays, **params)`) when the primitive runs
    on concrete values; without it the traced graph is evaluated op by op."""
    return register(CompositePrimitive(name, implementation, multiple_results=multiple_results, eager=eager))
