"""jax.debug: printing and inspecting values from inside traced functions.

``kiln.debug.print(fmt, *args, **kwargs)`` formats with ``fmt.format(*args, **kwargs)`` (arrays as numpy
prints them) and prints:
  - eagerly (no trace, or under ``kiln.disable_jit()``): at once;
  - in a ``kiln.jit`` function called from Python: after the call returns, with the values the compiled code
    computed, in program order. The printed arrays become extra outputs of the compiled function (kiln's modules
    have no callback into the host: the C runtime runs without Python), so each print costs one small output;
    a jit function called inside another passes its prints on to the caller's;
  - where the values cannot leave as outputs (inside the bodies of ``kiln.lax`` control flow, under
    ``grad``/``vmap`` inside the jit, in exported Program functions run by the C runtime): kiln prints the
    format with the values' shapes and dtypes once, when the function is traced, and warns that the values are
    not printed there (run under ``kiln.disable_jit()`` to see them).

``callback(fn, *args, **kwargs)`` calls ``fn`` on the values the same way (only its side effects count; its
result is dropped, as in JAX). ``breakpoint()`` enters pdb eagerly; traced, it warns and does nothing.
``inspect_array_sharding``, ``visualize_array_sharding`` and ``visualize_sharding`` describe the one host
device. ``ordered=`` is accepted: prints of one call come out in program order either way.
"""
from __future__ import annotations

import contextvars
import warnings

import numpy as np

from kiln.core.pytree import tree_flatten, tree_unflatten
from kiln.core.trace import Tracer

__all__ = ["print", "callback", "breakpoint", "inspect_array_sharding", "visualize_array_sharding",
           "visualize_sharding", "DebugEffect", "OrderedDebugEffect"]

_print = print  # the builtin, before this module's print shadows it

# (the kiln.jit trace collecting prints, its list of (callback, treedef, leaf count, traced leaves)) or None
_SINK: contextvars.ContextVar = contextvars.ContextVar("kiln_debug_sink", default=None)


class DebugEffect:
    """JAX's effect type of debug callbacks; kiln's prints are outputs of the call, not effects."""


class OrderedDebugEffect(DebugEffect):
    """JAX's effect type of ordered debug callbacks."""


def _format_and_print(fmt, args, kwargs):
    _print(fmt.format(*args, **kwargs))


def _emit(fn, tree, leaves):
    """Calls fn(*args, **kwargs) for the tree (args, kwargs) of `leaves` now, or records it with the enclosing
    kiln.jit trace so that it is called with the computed values after the call."""
    traced = [x for x in leaves if isinstance(x, Tracer)]
    if not traced:
        args, kwargs = tree_unflatten(tree, [np.asarray(x) if hasattr(x, "shape") else x for x in leaves])
        fn(*args, **kwargs)
        return
    sink = _SINK.get()
    if sink is not None and all(x._trace is sink[0] for x in traced):
        sink[1].append((fn, tree, leaves))
        return
    args, kwargs = tree_unflatten(tree, [x.aval if isinstance(x, Tracer) else x for x in leaves])
    warnings.warn("kiln.debug: values inside a kiln.lax control-flow body, a transformation inside kiln.jit or an "
                  "exported Program function are not printed (kiln's modules have no host callback); their "
                  "shapes and dtypes are printed once at trace time. Run under kiln.disable_jit() to see the values",
                  stacklevel=3)
    try:
        fn(*args, **kwargs)
    except Exception:  # a callback that needs real values: the warning says why nothing came out
        pass


def print(fmt: str, *args, ordered: bool = False, partitioned: bool = False, **kwargs) -> None:  # noqa: A001
    """Prints ``fmt.format(*args, **kwargs)`` with the values of traced arrays (see the module's docstring)."""
    leaves, tree = tree_flatten((args, kwargs))
    _emit(lambda *a, **k: _format_and_print(fmt, a, k), tree, leaves)


def callback(fn, *args, ordered: bool = False, partitioned: bool = False, **kwargs) -> None:
    """Calls ``fn(*args, **kwargs)`` with the values (numpy arrays) for its side effects; its result is dropped."""
    leaves, tree = tree_flatten((args, kwargs))
    _emit(fn, tree, leaves)


def breakpoint(*, backend=None, filter_frames=True, num_frames=None, ordered=False, token=None, **kwargs):  # noqa: A001
    """pdb at this line when running eagerly (kiln.disable_jit()); traced, a warning and nothing else."""
    from kiln.core.trace import is_eager

    if is_eager():
        import pdb

        pdb.Pdb().set_trace()
        return token
    warnings.warn("kiln.debug.breakpoint inside a traced function does nothing (kiln's modules do not call back "
                  "into Python); run under kiln.disable_jit() to stop here", stacklevel=2)
    return token


def inspect_array_sharding(value, *, callback) -> None:
    """Calls callback with the sharding of every leaf: the one host device."""
    from kiln.sharding import SingleDeviceSharding

    for _ in tree_flatten(value)[0]:
        callback(SingleDeviceSharding())


def visualize_array_sharding(arr, **kwargs) -> None:
    _print(f"array {tuple(np.shape(arr))}: one shard on CpuDevice(id=0)")


def visualize_sharding(shape, sharding, **kwargs) -> None:
    _print(f"array {tuple(shape)}: one shard on CpuDevice(id=0)")


# kiln.jit's side (jit.py calls these)

def start_collecting(trace):
    """Begins collecting the prints of the jit trace `trace`; returns (token, the list)."""
    collected: list = []
    return _SINK.set((trace, collected)), collected


def stop_collecting(token) -> None:
    _SINK.reset(token)


def replay(specs, values) -> None:
    """Calls each collected print's function with its share of `values` (computed, or tracers of a caller's
    trace when a jit function is called inside another)."""
    k = 0
    for fn, tree, leaves in specs:
        n = sum(isinstance(x, Tracer) for x in leaves)
        mine = iter(values[k:k + n])
        k += n
        _emit(fn, tree, [next(mine) if isinstance(x, Tracer) else x for x in leaves])
