"""Primitives: the unit of extension. One registration gives an op every rule it has."""
from __future__ import annotations

from typing import Any, Callable

from .aval import ShapedArray


class Primitive:
    """An operation with an eager implementation, an abstract evaluation and optional rules.

    Rules are attributes so that each transformation (jvp, transpose, batching)
    and the compiler can attach its own per primitive without editing others.
    """

    def __init__(self, name: str, *, multiple_results: bool = False):
        self.name = name
        self.multiple_results = multiple_results
        self.impl: Callable | None = None
        self._abstract_eval: Callable | None = None
        self.jvp_rule: Callable | None = None
        self.transpose_rule: Callable | None = None
        self.batching_rule: Callable | None = None
        # Placed in a kernel (dispatch region) by the compiler, or run by the VM.
        self.in_kernel = True
        # Kept by dead-code elimination even when no output is used (stores).
        self.has_side_effects = False
        # For call-like primitives (kernel_call): fn(*args, **params) -> outputs,
        # which transformations use to trace through the callee instead.
        self.inline_rule: Callable | None = None
        # For call-like primitives: the name of the param holding the callee's graph,
        # which the compiler inlines before fusion.
        self.call_graph_param: str | None = None
        # Optional params -> text for the IR printer, for params too noisy to show raw.
        self.format_params = None
        # Results of weakly typed operands alone are weakly typed (see abstract_eval); False for the ops
        # whose params decide it (convert) and for call-like ones (their graph decides).
        self.weak_from_operands = True

    def __repr__(self):
        return self.name

    def def_impl(self, fn):
        self.impl = fn
        return fn

    def def_abstract_eval(self, fn):
        self._abstract_eval = fn
        return fn

    def abstract_eval(self, *avals: ShapedArray, **params) -> list[ShapedArray]:
        """Output abstract values (always a list)."""
        out = self._abstract_eval(*avals, **params)
        outs = list(out) if self.multiple_results else [out]
        if avals and self.weak_from_operands and self.call_graph_param is None and \
                all(getattr(a, "weak_type", False) for a in avals):
            return [_weak_if_operand_dtype(o, avals) for o in outs]
        return outs

    def bind(self, *args, **params) -> Any:
        from .trace import find_top_trace

        trace = find_top_trace(args)
        outs = trace.process_primitive(self, [trace.full_raise(a) for a in args], params)
        return outs if self.multiple_results else outs[0]


_REGISTRY: dict[str, Primitive] = {}


def register(prim: Primitive) -> Primitive:
    if prim.name in _REGISTRY:
        raise ValueError(f"primitive {prim.name!r} is registered twice")
    _REGISTRY[prim.name] = prim
    return prim


def lookup(name: str) -> Primitive:
    return _REGISTRY[name]


def all_primitives() -> dict[str, Primitive]:
    return dict(_REGISTRY)


def _weak_if_operand_dtype(out, avals):
    """An output of an operand's dtype made weakly typed: a value computed from weakly typed values alone
    (Python numbers, arrays made without dtype=) stays weak through every operation, not only those JAX
    marks, because kiln's weak values are float64/int64 (numpy's) where JAX's are 32-bit: a strong 64-bit
    result would turn the float32 values it later meets into float64 (docs/numpy.md, "Default dtypes")."""
    if out.weak_type or not any(out.dtype == a.dtype for a in avals):
        return out
    return out.update(weak_type=True)
