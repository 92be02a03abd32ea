"""Primitives that only exist in a Program's public functions: loads and stores of globals."""
from __future__ import annotations

from ..core.aval import ShapedArray
from ..core.errors import TracingError
from ..core.primitive import Primitive, register

global_load = register(Primitive("global_load"))
global_load.def_traits(fusion="host")

global_store = register(Primitive("global_store", multiple_results=True))
global_store.def_traits(fusion="host")
global_store.has_side_effects = True


global_load.format_params = global_store.format_params = lambda params: f" @{params['name']}"


@global_load.def_abstract_eval
def _load_abstract(*, slot: int, name: str, aval: ShapedArray):
    return aval


@global_store.def_abstract_eval
def _store_abstract(value, *, slot: int, name: str, aval: ShapedArray):
    if value.shape != aval.shape or value.dtype != aval.dtype:
        raise TracingError(f"store to global {name}: it holds {aval}, the value stored is {value.strip_weak()}")
    return []


def _not_eager(*args, **params):
    raise TracingError("globals can only be loaded and stored inside a Program's public functions")


global_load.def_impl(_not_eager)
global_store.def_impl(_not_eager)
