"""Forward-mode differentiation: a trace whose values carry tangents.

Each primitive's `jvp_rule(primals, tangents, **params) -> (primal_outs,
tangent_outs)` says how tangents flow through it; tangents it receives may be
`Zero` (symbolically zero, never materialized). Tangent computations must be
linear in the tangents: reverse mode transposes them (see linearize.py).
"""
from __future__ import annotations

from ..core import dtypes
from ..core.ad_util import Zero
from ..core.aval import ShapedArray, aval_of
from ..core.errors import KilnError
from ..core.trace import Trace, Tracer, get_aval, new_trace


def tangent_aval(aval: ShapedArray) -> ShapedArray:
    """The abstract value of a tangent (and cotangent) of a primal with this aval: the same, weak type
    included, as JAX's to_tangent_aval, so the gradient of a weakly typed input is weakly typed."""
    return aval


class JVPTracer(Tracer):
    __slots__ = ("_trace", "primal", "tangent")

    def __init__(self, trace, primal, tangent):
        self._trace = trace
        self.primal = primal
        self.tangent = tangent

    @property
    def aval(self):
        p = self.primal
        return get_aval(p)

    def concrete_value(self):
        p = self.primal
        return p.concrete_value() if isinstance(p, Tracer) else p


class DifferentiationError(KilnError):
    """A primitive without a differentiation rule, or a non-differentiable input."""


class JVPTrace(Trace):
    def pure(self, value):
        return JVPTracer(self, value, Zero(tangent_aval(aval_of(value))))

    def lift(self, tracer):
        return JVPTracer(self, tracer, Zero(tangent_aval(tracer.aval)))

    def process_primitive(self, prim, tracers, params):
        primals = [t.primal for t in tracers]
        tangents = [t.tangent for t in tracers]
        if prim.jvp_rule is None and prim.inline_rule is not None:
            return prim.inline_rule(*tracers, **params)
        if all(isinstance(t, Zero) for t in tangents):
            outs = prim.bind(*primals, **params)
            outs = outs if prim.multiple_results else [outs]
            return [JVPTracer(self, o, Zero(tangent_aval(get_aval(o)))) for o in outs]
        if prim.jvp_rule is None:
            raise DifferentiationError(f"primitive {prim.name} has no differentiation (JVP) rule")
        primal_outs, tangent_outs = prim.jvp_rule(primals, tangents, **params)
        if not prim.multiple_results:
            primal_outs, tangent_outs = [primal_outs], [tangent_outs]
        return [JVPTracer(self, p, t) for p, t in zip(primal_outs, tangent_outs)]


def jvp_flat(fn, primals: list, tangents: list) -> tuple[list, list]:
    """Runs fn on JVP tracers; returns (primal outputs, tangent outputs)."""
    with new_trace(JVPTrace) as trace:
        ins = [JVPTracer(trace, p, t) for p, t in zip(primals, tangents)]
        outs = [trace.full_raise(o) for o in fn(*ins)]
        return [o.primal for o in outs], [o.tangent for o in outs]


def is_differentiable(aval: ShapedArray) -> bool:
    return dtypes.is_float(aval.dtype)


def has_tangent(aval: ShapedArray) -> bool:
    """A value that carries a tangent inside a differentiated function: float or complex (an FFT's spectrum
    in a loop carry); is_differentiable is the narrower rule for the arguments grad differentiates."""
    return dtypes.is_inexact(aval.dtype)
