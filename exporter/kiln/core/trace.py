"""Traces and tracers: how a primitive application reaches eager numpy or a graph.

A stack of traces is active at any time, the eager trace at its bottom. A
primitive's `bind` goes to the highest-level trace among its arguments'
tracers, or to the innermost graph trace when none is higher, so that
everything inside a traced function is staged. Transformations (jvp, vmap)
add trace kinds of their own on the same stack.
"""
from __future__ import annotations

import abc
import contextlib
from typing import Any, Callable, Sequence

import numpy as np

from .aval import ShapedArray, aval_of
from .errors import ConcretizationError, UnexpectedTracerError
from .ir import Equation, Graph, Literal, Var
from .primitive import Primitive
from .source_info import user_frame_info


class Trace(abc.ABC):
    """One level of interpretation. Subclasses define pure, lift and process_primitive."""

    def __init__(self, level: int):
        self.level = level
        self.active = True

    @abc.abstractmethod
    def pure(self, value) -> "Tracer":
        """Wraps a concrete value as a tracer of this trace."""

    @abc.abstractmethod
    def lift(self, tracer: "Tracer") -> "Tracer":
        """Wraps a tracer of a lower-level trace as a tracer of this trace."""

    @abc.abstractmethod
    def process_primitive(self, prim: Primitive, tracers: list, params: dict) -> list:
        """Applies prim to tracers of this trace; returns the list of outputs."""

    def full_raise(self, value):
        if not isinstance(value, Tracer):
            return self.pure(value)
        if value._trace is self:
            return value
        if not value._trace.active:
            raise UnexpectedTracerError(
                "a traced value escaped the function being traced (it was stored outside "
                "and used after tracing ended); return it instead"
            )
        if value._trace.level < self.level:
            return self.lift(value)
        raise UnexpectedTracerError(
            f"a value traced at level {value._trace.level} reached an enclosing trace at level {self.level}"
        )


class EvalTrace(Trace):
    """Eager evaluation with numpy: the bottom of the stack."""

    def pure(self, value):
        return value

    def lift(self, tracer):
        return tracer

    def full_raise(self, value):
        return value

    def process_primitive(self, prim, values, params):
        out = prim.impl(*values, **params)
        return list(out) if prim.multiple_results else [out]


_EVAL = EvalTrace(0)
_stack: list[Trace] = [_EVAL]


def current_graph_trace() -> "GraphTrace | None":
    for trace in reversed(_stack):
        if isinstance(trace, GraphTrace):
            return trace
    return None


def find_top_trace(args: Sequence[Any]) -> Trace:
    top: Trace = current_graph_trace() or _EVAL
    for a in args:
        if isinstance(a, Tracer) and a._trace.level > top.level:
            top = a._trace
    return top


@contextlib.contextmanager
def new_trace(make: Callable[[int], Trace]):
    """Pushes a trace made by make(level) for the duration of the block."""
    trace = make(len(_stack))
    _stack.append(trace)
    try:
        yield trace
    finally:
        trace.active = False
        _stack.pop()


class Tracer:
    """A value inside a trace; subclasses provide `aval`. Array operators come from kiln.numpy."""

    __array_priority__ = 1000
    _trace: Trace
    aval: ShapedArray

    @property
    def shape(self):
        return self.aval.shape

    @property
    def dtype(self):
        return self.aval.dtype

    @property
    def ndim(self):
        return self.aval.ndim

    @property
    def size(self):
        return self.aval.size

    def __len__(self):
        if not self.shape:
            raise TypeError("len() of a 0-d array")
        return self.shape[0]

    def concrete_value(self):
        """The concrete value if this trace knows it; raises ConcretizationError otherwise."""
        raise ConcretizationError(
            f"a traced array ({self.aval}) was used where Python needs a concrete value; "
            "the value is only known when the compiled program runs. Use kiln.lax.cond / "
            "kiln.lax.while_loop / kiln.numpy.where for control flow on traced values"
        )

    def __bool__(self):
        return bool(self.concrete_value())

    def __int__(self):
        return int(self.concrete_value())

    def __float__(self):
        return float(self.concrete_value())

    def __index__(self):
        return int(self.concrete_value())

    def __array__(self, dtype=None, copy=None):
        value = self.concrete_value()
        return np.asarray(value, dtype=dtype)

    def __iter__(self):
        if not self.shape:
            raise TypeError("iteration over a 0-d array")
        return (self[i] for i in range(self.shape[0]))

    def __hash__(self):
        raise TypeError("traced arrays are not hashable")


class GraphTracer(Tracer):
    """A value being staged into a graph: an IR atom (Var or Literal)."""

    __slots__ = ("_trace", "atom")

    def __init__(self, trace: "GraphTrace", atom):
        self._trace = trace
        self.atom = atom

    @property
    def aval(self):
        return self.atom.aval

    def __repr__(self):
        return f"Traced<{self.aval}>"


class GraphTrace(Trace):
    """Stages primitive applications into a graph."""

    def __init__(self, level: int):
        super().__init__(level)
        self.eqns: list[Equation] = []
        self.constvars: list[Var] = []
        self.consts: list[np.ndarray] = []
        self._const_ids: dict[int, Var] = {}
        self.captured: list[tuple[Var, Tracer]] = []
        self._captured_ids: dict[int, GraphTracer] = {}

    def new_input(self, aval: ShapedArray) -> GraphTracer:
        return GraphTracer(self, Var(aval))

    def pure(self, value) -> GraphTracer:
        aval = aval_of(value)
        if aval.shape == ():
            return GraphTracer(self, Literal(value, aval))
        arr = np.asarray(value)
        var = self._const_ids.get(id(value))
        if var is None:
            var = Var(aval)
            self._const_ids[id(value)] = var
            self.constvars.append(var)
            self.consts.append(arr)
        return GraphTracer(self, var)

    def lift(self, tracer):
        """A value of an enclosing transformation used here becomes an extra input (closure conversion)."""
        lifted = self._captured_ids.get(id(tracer))
        if lifted is None:
            var = Var(tracer.aval)
            self.captured.append((var, tracer))
            lifted = self._captured_ids[id(tracer)] = GraphTracer(self, var)
        return lifted

    def process_primitive(self, prim, tracers, params):
        in_atoms = [t.atom for t in tracers]
        out_avals = prim.abstract_eval(*[a.aval for a in in_atoms], **params)
        outvars = [Var(a) for a in out_avals]
        self.eqns.append(Equation(prim, in_atoms, outvars, params, user_frame_info()))
        return [GraphTracer(self, v) for v in outvars]

    def finish(self, inputs: list[GraphTracer], outputs: list) -> Graph:
        """The graph; values captured from enclosing traces are extra inputs after the declared ones."""
        out_atoms = [self.full_raise(o).atom for o in outputs]
        invars = [t.atom for t in inputs] + [v for v, _ in self.captured]
        return Graph(invars, self.constvars, self.consts, self.eqns, out_atoms)


def trace_to_graph_with_captures(fn: Callable, in_avals: Sequence[ShapedArray]) -> tuple[Graph, list]:
    """Traces fn(*tracers) -> list of outputs; returns the graph and the enclosing-trace values it
    captured, which the graph takes as extra trailing inputs."""
    with new_trace(GraphTrace) as trace:
        inputs = [trace.new_input(a) for a in in_avals]
        outputs = fn(*inputs)
        graph = trace.finish(inputs, list(outputs))
        return graph, [t for _, t in trace.captured]


def trace_to_graph(fn: Callable, in_avals: Sequence[ShapedArray]) -> Graph:
    """Traces fn(*tracers) -> list of outputs into a closed graph (no captured values allowed)."""
    graph, captured = trace_to_graph_with_captures(fn, in_avals)
    if captured:
        raise UnexpectedTracerError(
            "a value from an enclosing transformation was used inside a function traced on its own; "
            "pass it as an argument instead"
        )
    return graph
