"""kiln.jit: compile a plain function through the full path and run it in the C runtime."""
from __future__ import annotations

import functools
from typing import Callable

from .core.array import as_array
from .core.calls import plain_arity, positional_arguments
from .core.kernel_call import kernel_call
from .core.pytree import tree_flatten, tree_unflatten, treedef_to_json
from .core.signature import Signature, signature_of, split_static
from .core.trace import Tracer, trace_to_graph_with_captures


class TracedFunction:
    """A function traced at one signature: its graph and output tree structure."""

    def __init__(self, graph, out_treedef, signature: Signature, captured: list):
        self.graph = graph
        self.out_treedef = out_treedef
        self.signature = signature
        # Values of enclosing transformations the function closed over (extra trailing inputs).
        self.captured = captured


class Jitted:
    """A function compiled once per abstract signature (shapes, dtypes, tree, static args)."""

    def __init__(self, fn: Callable, static_argnums=(), name: str | None = None, limits=None):
        # Name and docstring only (updated=()): copying fn's __dict__ would, when fn is itself
        # a Jitted or a transform of one, replace this object's fn and caches with fn's.
        functools.update_wrapper(self, fn, updated=())
        self.fn = fn
        self.static_argnums = tuple(static_argnums) if isinstance(static_argnums, (tuple, list)) else (static_argnums,)
        self.name = name or getattr(fn, "__name__", "fn")
        self._traces: dict[Signature, TracedFunction] = {}
        self._executables: dict[Signature, object] = {}
        self.trace_count = 0
        self._limits = limits  # kiln.vm.runtime.CallLimits of calls made from Python, or None
        self._plain_arity = plain_arity(fn)

    def trace(self, *args) -> TracedFunction:
        dynamic, statics = split_static(args, self.static_argnums)
        signature, _ = signature_of(dynamic, statics, self.name)
        return self._trace(signature)

    def _trace(self, signature: Signature) -> TracedFunction:
        cached = self._traces.get(signature)
        if cached is not None:
            return cached
        out_tree = []

        def flat_fn(*leaves):
            dynamic = list(tree_unflatten(signature.treedef, leaves))
            full = _merge_static(dynamic, dict(signature.statics))
            result = self.fn(*full)
            flat, treedef = tree_flatten(result)
            out_tree.append(treedef)
            return flat

        self.trace_count += 1
        graph, captured = trace_to_graph_with_captures(flat_fn, signature.avals)
        traced = TracedFunction(graph, out_tree[0], signature, captured)
        if not captured:
            self._traces[signature] = traced
        return traced

    def __call__(self, *args, **kwargs):
        if kwargs or len(args) != self._plain_arity:
            args = positional_arguments(self.name, self.fn, args, kwargs)
        dynamic, statics = split_static(args, self.static_argnums)
        signature, leaves = signature_of(dynamic, statics, self.name)
        traced = self._trace(signature)
        if traced.captured or any(isinstance(x, Tracer) for x in leaves):
            outs = kernel_call.bind(*leaves, *traced.captured, graph=traced.graph, name=self.name)
            return tree_unflatten(traced.out_treedef, outs)
        executable = self._executables.get(signature)
        if executable is None:
            executable = self._executables[signature] = _compile_traced(self.name, traced, self._limits)
        # the runtime binding converts the leaves (Python scalars take the traced dtype)
        return tree_unflatten(traced.out_treedef, [as_array(x) for x in executable(leaves)])

    def lower(self, *args) -> str:
        """Text of the traced IR at these arguments."""
        return str(self.trace(*args).graph)


def _merge_static(dynamic: list, statics: dict) -> list:
    out = []
    it = iter(dynamic)
    total = len(dynamic) + len(statics)
    for i in range(total):
        out.append(statics[i] if i in statics else next(it))
    return out


def _compile_traced(name: str, traced: TracedFunction, limits=None):
    from .compiler.pipeline import ProcedureSource, build_module
    from .runtime_session import load_module

    graph = traced.graph
    arg_names = [f"arg{i}" for i in range(len(graph.invars))]
    source = ProcedureSource(
        name="main",
        graph=graph,
        arg_names=arg_names,
        result_names=[f"result{i}" for i in range(len(graph.outvars))],
        arg_tree=treedef_to_json(traced.signature.treedef),
        result_tree=treedef_to_json(traced.out_treedef),
    )
    module_bytes = build_module(name, [source], [])
    context = load_module(module_bytes).new_context()
    if limits is not None:
        context.set_limits(timeout=limits.timeout, max_steps=limits.max_steps)
    return lambda arrays: context.invoke("main", arrays)


def jit(fn: Callable | None = None, *, static_argnums=(), timeout: float | None = None,
        max_steps: int | None = None):
    """Compiles fn for each abstract signature it is called with; usable as @jit or @jit(...).

    timeout (seconds) and max_steps (bytecode instructions) bound each call made from Python:
    a call past either raises KilnRuntimeError DEADLINE_EXCEEDED (kiln.vm.runtime.Context.set_limits).
    They do not apply where the function is called inside another traced function. Ctrl-C
    interrupts a call made on the main thread either way.
    """
    limits = None
    if timeout is not None or max_steps is not None:
        from kiln.vm.runtime import CallLimits

        limits = CallLimits(timeout, max_steps)
    if fn is None:
        return lambda f: Jitted(f, static_argnums, limits=limits)
    return Jitted(fn, static_argnums, limits=limits)

