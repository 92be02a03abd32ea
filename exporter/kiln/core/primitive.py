"""Primitives: the unit of extension. One registration gives an op every rule it has."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable

from .aval import ShapedArray

FUSION_CLASSES = ("elementwise", "layout", "iota", "reduction", "kernel", "host", "inlined", "internal")
"""How the compiler places a primitive (OpTraits.fusion):

- elementwise: computed per element, fused with its producers and consumers;
- layout: a strided view of its operand (broadcast_in_dim, transpose, reshape, slice, rev): index
  arithmetic, no buffer;
- iota: a view computed from the index;
- reduction: a kernel of its own (OpTraits.reduction names the combine), its elementwise producers fused in;
- kernel: a kernel of its own over strided views of materialized values, emitted by the kernel strategy
  OpTraits.kernel names;
- host: run by the VM itself (control flow, global loads and stores);
- inlined: a call-like primitive, replaced by its graph before fusion;
- internal: exists only inside a transformation (never reaches the compiler).
"""

KERNEL_STRATEGIES = ("matmul", "conv", "pooling", "structural", "linalg", "svd", "eigh")
"""The values of OpTraits.kernel: the kernel strategies (kiln.compiler.strategies) that emit a primitive
with a kernel of its own."""


@dataclass(frozen=True)
class OpTraits:
    """What the compiler knows of a primitive: one record, declared where the primitive is defined
    (`prim.def_traits(...)`), read by fusion, the kernel strategies and code generation.

    fusion: one of FUSION_CLASSES (None: not declared; the compiler refuses the primitive).
    reduction: for fusion == "reduction", the combine ("sum", "max", "min", "prod").
    kernel: for fusion == "kernel", the strategy that emits it (one of KERNEL_STRATEGIES).
    cost: rough cost of one element in simple-op units (the one cost table: fusion materializes a value
        whose tree costs 8 or more rather than recompute it in several kernels; the elementwise strategy
        sizes its workgroups by it; row-fused kernels treat 20 or more as exp-like).
    math: for float elementwise primitives computed by kiln.compiler.mathlib, its function's name.
    exact_in_narrow: an elementwise result that is already a value of the operands' f16/bf16 type (no
        rounding when computed in float32).
    """

    fusion: str | None = None
    reduction: str | None = None
    kernel: str | None = None
    cost: int = 1
    math: str | None = None
    exact_in_narrow: bool = False


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
        # What the compiler knows of it (fusion class, cost, math implementation, ...): def_traits.
        self.traits = OpTraits()
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

    def def_traits(self, **traits) -> "Primitive":
        """Declares (some of) the primitive's OpTraits; fields not named keep their value."""
        self.traits = dataclasses.replace(self.traits, **traits)
        if self.traits.fusion is not None and self.traits.fusion not in FUSION_CLASSES:
            raise ValueError(f"primitive {self.name}: fusion class {self.traits.fusion!r} is not one of "
                             f"{FUSION_CLASSES}")
        if self.traits.kernel is not None and self.traits.kernel not in KERNEL_STRATEGIES:
            raise ValueError(f"primitive {self.name}: kernel strategy {self.traits.kernel!r} is not one of "
                             f"{KERNEL_STRATEGIES}")
        return self

    @property
    def in_kernel(self) -> bool:
        """Placed in a kernel (dispatch region) by the compiler, rather than run by the VM."""
        return self.traits.fusion != "host"

    @property
    def elementwise(self) -> bool:
        """Shorthand for traits.fusion == "elementwise" (read-only: declare traits with def_traits)."""
        return self.traits.fusion == "elementwise"

    @property
    def reduction(self) -> str | None:
        """Shorthand for traits.reduction: the combine of a reduction, else None (read-only)."""
        return self.traits.reduction

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
