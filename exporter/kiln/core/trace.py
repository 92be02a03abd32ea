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
import contextvars
import dis
import sys
import types
from typing import Any, Callable, Sequence

import numpy as np

from .aval import ShapedArray, aval_method, aval_of, aval_property
from .errors import (ConcretizationError, NumpyOnTracerError, TracerBoolConversionError, TracerIntegerConversionError,
                     UnexpectedTracerError, attach_source)
from .ir import Equation, Graph, Literal, Var
from .primitive import Primitive
from .source_info import user_frame_info


def _reraise_as(error: ConcretizationError, cls: type) -> None:
    """Raises `error` again as its more specific subclass `cls` (same message and source line), so that both
    `except ConcretizationError` and JAX's names (kiln.errors.TracerBoolConversionError) catch it."""
    if isinstance(error, cls):
        raise error from None
    raise cls(getattr(error, "message", str(error)), source=getattr(error, "source", None)) from None


def _subscript_hint(tracer) -> str:
    """The message for a traced index into a numpy array, list or tuple (x[i] on the user's line, where a
    kiln array would have taken the traced index), as JAX refuses it too; '' on any other line."""
    frame = sys._getframe(2)
    while frame is not None and frame.f_globals.get("__name__", "").startswith("kiln."):
        frame = frame.f_back
    if frame is None or dis.opname[frame.f_code.co_code[frame.f_lasti]] != "BINARY_SUBSCR":
        return ""
    return (f"a numpy array, list or tuple was indexed by a traced value ({tracer.aval}), which only kiln arrays "
            "accept: make the indexed value a kiln array first, kiln.numpy.asarray(table)[i] (or index a kiln "
            "array argument); under jit the index is clamped to the bounds as in JAX")


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
        outs = list(out) if prim.multiple_results else [out]
        as_array = _array.as_array  # eager results are kiln arrays (kiln.core.array), weak as traced ones
        if params.get("weak_type") or any(_array.is_weak(v) for v in values):
            avals = prim.abstract_eval(*[aval_of(v) for v in values], **params)
            return [as_array(o, weak=a.weak_type) for o, a in zip(outs, avals)]
        return [as_array(o) for o in outs]


_EVAL = EvalTrace(0)
_stack: list[Trace] = [_EVAL]


def is_eager() -> bool:
    """True when nothing is being traced (no jit, grad, vmap...): kiln.numpy then computes as numpy does."""
    return len(_stack) == 1


def current_graph_trace() -> "GraphTrace | None":
    for trace in reversed(_stack):
        if isinstance(trace, GraphTrace):
            return trace
    return None


# kiln.ensure_compile_time_eval(): primitives whose operands are all concrete evaluate at once, even while a
# function is being traced (their results are concrete values Python control flow can use)
compile_time_eval: contextvars.ContextVar[bool] = contextvars.ContextVar("kiln_compile_time_eval", default=False)


def find_top_trace(args: Sequence[Any]) -> Trace:
    top: Trace = _EVAL if compile_time_eval.get() else (current_graph_trace() or _EVAL)
    for a in args:
        if isinstance(a, Tracer) and a._trace.level > top.level:
            top = a._trace
    return top


@contextlib.contextmanager
def new_trace(make: Callable[[int], Trace]):
    """Pushes a trace made by make(level) for the duration of the block.

    Every exception escaping the block gets the user's source line (kiln.core.errors.attach_source).
    """
    trace = make(len(_stack))
    _stack.append(trace)
    try:
        yield trace
    except Exception as e:
        attach_source(e)
        raise
    finally:
        trace.active = False
        _stack.pop()


class Tracer:
    """A value inside a trace; subclasses provide `aval`.

    Python's operators and the array attributes (x.sum(), x.T, ...) forward to the abstract value, on
    which kiln.numpy installs their implementations (install_array_methods).
    """

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
        try:
            return bool(self.concrete_value())
        except ConcretizationError as e:
            _reraise_as(e, TracerBoolConversionError)

    def __int__(self):
        try:
            return int(self.concrete_value())
        except ConcretizationError as e:
            _reraise_as(e, TracerIntegerConversionError)

    def __float__(self):
        return float(self.concrete_value())

    def __index__(self):
        try:
            return int(self.concrete_value())
        except ConcretizationError as e:
            hint = _subscript_hint(self)
            if hint:
                raise TracerIntegerConversionError(hint) from None
            _reraise_as(e, TracerIntegerConversionError)

    def __array__(self, dtype=None, copy=None):
        try:
            value = self.concrete_value()
        except ConcretizationError:
            raise NumpyOnTracerError(_subscript_hint(self) or (
                f"a traced array ({self.aval}) was converted to a numpy array (numpy.asarray, numpy.array or "
                "a numpy function); its value is only known when the compiled program runs. "
                "Use kiln.numpy functions on traced arrays (kiln.numpy.asarray, kiln.numpy.sin, ...)"
            )) from None
        return np.asarray(value, dtype=dtype)

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        """numpy's operators on (ndarray, tracer) come here: run the tracer's operator; other ufuncs are errors."""
        ops = _UFUNC_OPERATORS.get(ufunc.__name__)
        if ops is not None and method == "__call__" and not kwargs and len(inputs) == 2:
            a, b = inputs
            tracer, op, other = (a, ops[0], b) if isinstance(a, Tracer) else (b, ops[1], a)
            operator = getattr(type(tracer), op, None)
            if operator is not None:
                return operator(tracer, other)
        if method == "__call__":
            raise NumpyOnTracerError(_numpy_on_tracer_message(f"numpy.{ufunc.__name__}", ufunc.__name__, self))
        raise NumpyOnTracerError(_numpy_on_tracer_message(f"numpy.{ufunc.__name__}.{method}", None, self))

    def __array_function__(self, func, types, args, kwargs):
        """numpy.shape/ndim/size work on tracers; any other numpy function is an error naming kiln.numpy's."""
        if func.__name__ in ("shape", "ndim", "size") and func.__module__ == "numpy":
            return func._implementation(*args, **kwargs)
        module = func.__module__ or "numpy"
        kiln_name = func.__name__ if module == "numpy" else None
        raise NumpyOnTracerError(_numpy_on_tracer_message(f"{module}.{func.__name__}", kiln_name, self))

    def _concrete(self, method: str):
        try:
            return np.asarray(self.concrete_value())
        except ConcretizationError:
            raise ConcretizationError(
                f"x.{method}() needs the value of a traced array ({self.aval}), which is only known when the "
                f"compiled program runs; return the array from the traced function and call .{method}() on the result"
            ) from None

    def item(self, *args):
        return self._concrete("item").item(*args)

    def tolist(self):
        return self._concrete("tolist").tolist()

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        if not name.startswith("_") and name in _array_methods().attribute_names:
            attr = getattr(self.aval, name)
            if isinstance(attr, aval_property):
                return attr.fget(self)
            if isinstance(attr, aval_method):
                return types.MethodType(attr.fun, self)
        raise AttributeError(f"kiln arrays have no attribute {name!r}", name=name, obj=self)

    def __iter__(self):
        if not self.shape:
            raise TypeError("iteration over a 0-d array")
        return (self[i] for i in range(self.shape[0]))

    def __hash__(self):
        raise TypeError("traced arrays are not hashable")


class _ArrayMethods:
    """What install_array_methods installed: attribute names and the namespace (kiln.numpy) behind them."""

    def __init__(self):
        self.attribute_names: frozenset[str] = frozenset()
        self.namespace: types.ModuleType | None = None


_ARRAY_METHODS = _ArrayMethods()

# Python's operators on a tracer: each forwards to the abstract value's `_<name>` (ShapedArray._add, ...).
_OPERATOR_NAMES = (
    "add", "radd", "sub", "rsub", "mul", "rmul", "truediv", "rtruediv", "floordiv", "rfloordiv", "mod", "rmod",
    "pow", "rpow", "matmul", "rmatmul", "lt", "le", "gt", "ge", "eq", "ne", "neg", "pos", "abs", "and", "rand",
    "or", "ror", "xor", "rxor", "lshift", "rlshift", "rshift", "rrshift", "invert", "getitem", "setitem",
    "divmod", "rdivmod",
)


def _forwarding_operator(name: str):
    aval_name = f"_{name}"

    def operator(self, *args):
        _array_methods()
        return getattr(self.aval, aval_name)(self, *args)

    operator.__name__ = operator.__qualname__ = f"__{name}__"
    return operator


for _name in _OPERATOR_NAMES:
    setattr(Tracer, f"__{_name}__", _forwarding_operator(_name))
del _name


def install_array_methods(operators: dict, attributes: dict, namespace: types.ModuleType) -> None:
    """Installs the array operators (`{"__add__": fn}`) and attributes (aval_method / aval_property by name)
    on ShapedArray; namespace (kiln.numpy) names the functions that error messages suggest."""
    for dunder, fn in operators.items():
        setattr(ShapedArray, f"_{dunder.strip('_')}", staticmethod(fn))
    for name, attr in attributes.items():
        setattr(ShapedArray, name, attr)
    _ARRAY_METHODS.attribute_names = _ARRAY_METHODS.attribute_names | frozenset(attributes)
    _ARRAY_METHODS.namespace = namespace


def _array_methods() -> _ArrayMethods:
    """The installed array methods, importing kiln.numpy, which installs them, when nothing has yet."""
    if _ARRAY_METHODS.namespace is None:
        # Layering exception (tests/test_layering.py): kiln.numpy sits above core and installs the methods.
        import kiln.numpy  # noqa: F401
    return _ARRAY_METHODS


def get_aval(x) -> ShapedArray:
    """The abstract value of a tracer or of a concrete value (numpy array, numpy or Python scalar)."""
    return x.aval if isinstance(x, Tracer) else aval_of(x)


# numpy ufuncs that Python operators turn into when an ndarray is on the left of a tracer:
# ufunc name -> (the tracer's operator when it is on the left, when it is on the right).
_UFUNC_OPERATORS = {
    "add": ("__add__", "__radd__"), "subtract": ("__sub__", "__rsub__"),
    "multiply": ("__mul__", "__rmul__"), "divide": ("__truediv__", "__rtruediv__"),
    "true_divide": ("__truediv__", "__rtruediv__"), "floor_divide": ("__floordiv__", "__rfloordiv__"),
    "remainder": ("__mod__", "__rmod__"), "divmod": ("__divmod__", "__rdivmod__"),
    "power": ("__pow__", "__rpow__"), "matmul": ("__matmul__", "__rmatmul__"),
    "bitwise_and": ("__and__", "__rand__"), "bitwise_or": ("__or__", "__ror__"),
    "bitwise_xor": ("__xor__", "__rxor__"), "left_shift": ("__lshift__", "__rlshift__"),
    "right_shift": ("__rshift__", "__rrshift__"),
    "less": ("__lt__", "__gt__"), "less_equal": ("__le__", "__ge__"), "greater": ("__gt__", "__lt__"),
    "greater_equal": ("__ge__", "__le__"), "equal": ("__eq__", "__eq__"), "not_equal": ("__ne__", "__ne__"),
}


def _numpy_on_tracer_message(what: str, kiln_name: str | None, tracer: Tracer) -> str:
    """The error for numpy function `what` applied to a tracer; kiln_name: kiln.numpy's counterpart, if any."""
    if kiln_name is not None and hasattr(_array_methods().namespace, kiln_name):
        hint = f"use kiln.numpy.{kiln_name}"
    else:
        hint = "kiln.numpy has no equivalent; write it with kiln.numpy functions"
    return (f"{what} was applied to a traced array ({tracer.aval}); numpy cannot compute on values that are only "
            f"known when the compiled program runs: {hint}")


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
        self._const_ids: dict[int, tuple[object, Var]] = {}
        self.captured: list[tuple[Var, Tracer]] = []
        self.closed = False  # traced by trace_to_graph, which refuses captured values
        self._captured_ids: dict[int, GraphTracer] = {}

    def new_input(self, aval: ShapedArray) -> GraphTracer:
        return GraphTracer(self, Var(aval))

    def pure(self, value) -> GraphTracer:
        aval = aval_of(value)
        if aval.shape == ():
            return GraphTracer(self, Literal(value, aval))
        known = self._const_ids.get(id(value))
        if known is not None:
            return GraphTracer(self, known[1])
        var = Var(aval)
        # value itself is kept alive with its id: np.asarray of a kiln array is another object, and a freed
        # value's id may be reused by a later constant
        self._const_ids[id(value)] = (value, var)
        self.constvars.append(var)
        self.consts.append(np.asarray(value))
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


def trace_to_graph_with_captures(fn: Callable, in_avals: Sequence[ShapedArray],
                                 closed: bool = False) -> tuple[Graph, list]:
    """Traces fn(*tracers) -> list of outputs; returns the graph and the enclosing-trace values it
    captured, which the graph takes as extra trailing inputs (`closed`: the caller refuses captures, so that
    nothing should capture a value on purpose: the trace's `closed` attribute says so)."""
    with new_trace(GraphTrace) as trace:
        trace.closed = closed
        inputs = [trace.new_input(a) for a in in_avals]
        outputs = fn(*inputs)
        graph = trace.finish(inputs, list(outputs))
        return graph, [t for _, t in trace.captured]


def trace_to_graph(fn: Callable, in_avals: Sequence[ShapedArray]) -> Graph:
    """Traces fn(*tracers) -> list of outputs into a closed graph (no captured values allowed)."""
    graph, captured = trace_to_graph_with_captures(fn, in_avals, closed=True)
    if captured:
        raise UnexpectedTracerError(
            "a value from an enclosing transformation was used inside a function traced on its own; "
            "pass it as an argument instead"
        )
    return graph


from . import array as _array  # noqa: E402  (kiln.core.array imports Tracer from here)
