"""Tracing a Program's public functions: `self` becomes a view of globals and kernels."""
from __future__ import annotations

import inspect
from dataclasses import dataclass

import numpy as np

from ..core.aval import ShapedArray
from ..core.calls import describe_tree
from ..core.errors import TracingError
from ..core.ir import Graph
from ..core.pytree import TreeDef, tree_flatten, tree_unflatten, treedef_flatten_up_to, treedef_to_json
from ..core.trace import Tracer, trace_to_graph
from .prims import global_load, global_store


@dataclass
class PublicFunction:
    """A traced public function: its graph, signature, and argument/result trees."""

    name: str
    signature: inspect.Signature
    arg_names: list[str]
    in_treedef: TreeDef
    in_avals: list[ShapedArray]
    out_treedef: TreeDef
    source: object  # kiln.compiler.pipeline.ProcedureSource

    def argument_types(self) -> dict[str, str]:
        """Argument name -> text of its declared type (4x3xf32, Params(w=3x4xf32, b=4xf32))."""
        declared = tree_unflatten(self.in_treedef, self.in_avals)
        return {name: describe_tree(tree) for name, tree in zip(self.arg_names, declared)}

    def flatten_arguments(self, values: list) -> list:
        """Leaves of the call's arguments, checked against the traced tree structure (the runtime
        binding converts and checks each leaf)."""
        try:
            leaves = treedef_flatten_up_to(self.in_treedef, tuple(values))
        except ValueError as e:
            raise TypeError(f"{self.name}: arguments do not match the declared structure: {e}") from None
        return leaves


class _ProgramSelf:
    """What `self` is while a public function is traced."""

    def __init__(self, cls):
        object.__setattr__(self, "_cls", cls)

    def __getattr__(self, name):
        cls = object.__getattribute__(self, "_cls")
        table = cls._kiln_globals
        if name in table.trees:
            return _load_tree(table, name)
        if name in cls._kiln_kernels:
            return cls._kiln_kernels[name]
        attr = getattr(cls, name)
        if inspect.isfunction(attr):
            return attr.__get__(self, cls)
        return attr

    def __setattr__(self, name, value):
        cls = object.__getattribute__(self, "_cls")
        table = cls._kiln_globals
        if name not in table.trees:
            raise TracingError(f"cannot assign {name!r}: it is not a global of {cls.__name__} (declare it in the class body)")
        tree = table.trees[name]
        _store_leaves(table, tree.slots, tree.treedef, value, name)


_loaded_slot: dict[int, tuple[int, object]] = {}
# The value each global slot was last loaded as, until a store to it: reads share one load.
_live_loads: dict[int, object] = {}
# The graph trace of the public function being traced: globals are loaded and stored there,
# so a kernel, branch or loop body that reads a global gets the value as a captured input.
_function_trace: list = []


def _load_tree(table, attr: str):
    tree = table.trees[attr]
    leaves = []
    for i in tree.slots:
        slot = table.slots[i]
        t = _live_loads.get(i)
        if t is None:
            (t,) = _function_trace[-1].process_primitive(global_load, [], dict(slot=i, name=slot.name, aval=slot.aval))
            _live_loads[i] = t
            _loaded_slot[id(t)] = (i, t)
        leaves.append(t)
    return tree_unflatten(tree.treedef, leaves)


def _store_leaves(table, slots, treedef, value, where: str):
    import kiln.numpy as knp
    from ..core.trace import current_graph_trace

    if current_graph_trace() is not _function_trace[-1]:
        raise TracingError(
            f"{where}: globals can only be stored at the top level of a public function, not inside a kernel, "
            "a branch or a loop body; return the new value (or carry it through the loop) and store it after"
        )
    try:
        leaves = treedef_flatten_up_to(treedef, value)
    except ValueError as e:
        raise TracingError(f"store to {where}: {e}") from None
    for i, leaf in zip(slots, leaves):
        slot = table.slots[i]
        if not slot.mutable:
            raise TracingError(f"cannot store to global {slot.name}: it was exported with mutable=False")
        v = knp.asarray(leaf)
        aval = v.aval if isinstance(v, Tracer) else ShapedArray(np.shape(v), np.asarray(v).dtype)
        if aval.dtype != slot.aval.dtype and (aval.weak_type or not isinstance(v, Tracer)) and aval.shape == slot.aval.shape:
            v = knp.astype(v, slot.aval.dtype)
        global_store.bind(v, slot=i, name=slot.name, aval=slot.aval)
        _live_loads.pop(i, None)


def store_through(target, value) -> None:
    """Program.store_global: store into the globals whose loaded values make up `target`."""
    leaves, treedef = tree_flatten(target)
    slots = []
    for leaf in leaves:
        entry = _loaded_slot.get(id(leaf))
        if entry is None or entry[1] is not leaf:
            raise TracingError("Program.store_global: the target must be a global (or tree of globals) read from self")
        slots.append(entry[0])
    table = _current_table[-1]
    _store_leaves(table, slots, treedef, value, "Program.store_global")


_current_table: list = []


def trace_public_function(cls, name: str, fn) -> PublicFunction:
    """Traces public method `name` at the signature its Program.like defaults declare."""
    from ..compiler.pipeline import ProcedureSource, collection_paused
    from ..compiler.timing import stage

    signature = inspect.signature(fn)
    params = list(signature.parameters.values())[1:]
    arg_names = []
    declared = []
    for p in params:
        if p.kind not in (p.POSITIONAL_OR_KEYWORD, p.POSITIONAL_ONLY):
            raise TracingError(f"{cls.__name__}.{name}: argument {p.name!r}: *args/**kwargs are not supported in public functions")
        if p.default is inspect.Parameter.empty:
            raise TracingError(
                f"{cls.__name__}.{name}: argument {p.name!r} has no declared type; "
                f"give it a default such as {p.name}=Program.like(example_array)"
            )
        arg_names.append(p.name)
        declared.append(p.default)
    in_leaves, in_treedef = tree_flatten(tuple(declared))
    for i, leaf in enumerate(in_leaves):
        if not isinstance(leaf, ShapedArray):
            raise TracingError(f"{cls.__name__}.{name}: argument defaults must be Program.like(...) trees; found {type(leaf).__name__}")
    out_tree = []

    def flat_fn(*leaves):
        from ..core.trace import current_graph_trace

        _function_trace.append(current_graph_trace())
        args = tree_unflatten(in_treedef, leaves)
        result = fn(_ProgramSelf(cls), *args)
        flat, treedef = tree_flatten(result)
        out_tree.append(treedef)
        return flat

    _current_table.append(cls._kiln_globals)
    try:
        with stage("trace", name) as timed, collection_paused():
            graph: Graph = trace_to_graph(flat_fn, in_leaves)
            timed.detail = f"{name}: {len(graph.eqns)} equations"
    finally:
        _current_table.pop()
        _loaded_slot.clear()
        _live_loads.clear()
        del _function_trace[:]
    arg_leaf_names = _leaf_names(arg_names, declared)
    result_names = [f"result{i}" for i in range(len(graph.outvars))]
    source = ProcedureSource(
        name=name,
        graph=graph,
        arg_names=arg_leaf_names,
        result_names=result_names,
        arg_tree=treedef_to_json(in_treedef),
        result_tree=treedef_to_json(out_tree[0]),
    )
    call_signature = signature.replace(parameters=[p.replace(default=inspect.Parameter.empty) for p in params])
    return PublicFunction(name, call_signature, arg_names, in_treedef, list(in_leaves), out_tree[0], source)


def _leaf_names(arg_names: list[str], declared: list) -> list[str]:
    from .globals import _leaf_paths

    names = []
    for n, tree in zip(arg_names, declared):
        if isinstance(tree, ShapedArray):
            names.append(n)
        else:
            names.extend(n + p for p in _leaf_paths(tree))
    return names
