"""kiln.checkpoint (kiln.remat), checkpoint_name and checkpoint_policies: JAX's gradient-checkpointing API; and
named_call / named_scope, JAX's names for profiling scopes, which kiln accepts and ignores.

kiln accepts them so that JAX programs run unchanged, and computes what JAX computes: values and derivatives of
every order equal to those of the undecorated function. It does not rematerialize: kiln traces a whole
function (forward and backward) into one graph that its compiler fuses and schedules, so a checkpointed
function's intermediates are kept rather than computed twice, whatever the policy. Memory is the compiler's
buffer planning; the policies below are exact JAX-style predicates, kept for code that builds or composes them.
"""
from __future__ import annotations

import functools
from typing import Callable

__all__ = ["checkpoint", "remat", "checkpoint_name", "checkpoint_policies", "named_call", "named_scope"]


def _name(fn) -> str:
    return getattr(fn, "__name__", type(fn).__name__)


def checkpoint(fun: Callable | None = None, *, prevent_cse: bool = True, policy: Callable | None = None,
               static_argnums=()) -> Callable:
    """fun, marked for rematerialization as jax.checkpoint marks it; in kiln a transparent wrapper (see the
    module's docstring). Usable as @checkpoint, @checkpoint(policy=...) or functools.partial(checkpoint, ...)."""
    if fun is None:
        return functools.partial(checkpoint, prevent_cse=prevent_cse, policy=policy, static_argnums=static_argnums)
    if not callable(fun):
        raise TypeError(f"checkpoint: fun must be callable; got {type(fun).__name__}")
    if not isinstance(prevent_cse, bool):
        raise TypeError(f"checkpoint of {_name(fun)}: prevent_cse must be a bool; got {prevent_cse!r}")
    if policy is not None and not callable(policy):
        raise TypeError(f"checkpoint of {_name(fun)}: policy must be None or a callable such as "
                        f"kiln.checkpoint_policies.dots_saveable; got {policy!r}")
    nums = (static_argnums,) if isinstance(static_argnums, int) else tuple(static_argnums)
    for i in nums:
        if isinstance(i, bool) or not isinstance(i, int):
            raise TypeError(f"checkpoint of {_name(fun)}: static_argnums must be ints; got {i!r}")

    @functools.wraps(fun, updated=())
    def checkpointed(*args, **kwargs):
        for i in nums:
            if not -len(args) <= i < len(args):
                raise ValueError(f"checkpoint of {_name(fun)}: static_argnums {i} is out of range for a call "
                                 f"with {len(args)} positional arguments")
        return fun(*args, **kwargs)

    return checkpointed


remat = checkpoint


def checkpoint_name(x, name: str):
    """x, named for policies such as save_only_these_names (an identity in kiln, as in JAX's values)."""
    if not isinstance(name, str):
        raise TypeError(f"checkpoint_name: name must be a str; got {name!r}")
    return x


def _is_dot(prim) -> bool:
    return getattr(prim, "name", None) == "dot_general"


class checkpoint_policies:  # noqa: N801  (jax.checkpoint_policies is a namespace with this name)
    """JAX's named policies: functions (primitive, *avals, **params) -> whether its output may be saved."""

    @staticmethod
    def everything_saveable(prim, *_, **__) -> bool:
        return True

    @staticmethod
    def nothing_saveable(prim, *_, **__) -> bool:
        return False

    @staticmethod
    def dots_saveable(prim, *_, **__) -> bool:
        return _is_dot(prim)

    checkpoint_dots = dots_saveable

    @staticmethod
    def dots_with_no_batch_dims_saveable(prim, *_, **params) -> bool:
        if not _is_dot(prim):
            return False
        (_, _), (lhs_batch, _) = params["dimension_numbers"]
        return not lhs_batch

    checkpoint_dots_with_no_batch_dims = dots_with_no_batch_dims_saveable

    @staticmethod
    def save_anything_except_these_names(*names: str) -> Callable:
        names = frozenset(names)
        return lambda prim, *_, **params: not (getattr(prim, "name", None) == "name" and params.get("name") in names)

    @staticmethod
    def save_any_names_but_these(*names: str) -> Callable:
        names = frozenset(names)
        return lambda prim, *_, **params: getattr(prim, "name", None) == "name" and params.get("name") not in names

    @staticmethod
    def save_only_these_names(*names: str) -> Callable:
        names = frozenset(names)
        return lambda prim, *_, **params: getattr(prim, "name", None) == "name" and params.get("name") in names

    @staticmethod
    def save_from_both_policies(policy_1: Callable, policy_2: Callable) -> Callable:
        return lambda *args, **params: policy_1(*args, **params) or policy_2(*args, **params)


def named_call(fun: Callable, *, name: str | None = None) -> Callable:
    """fun itself (jax.named_call names a function's scope in compiled code; kiln's IR keeps source lines)."""
    if name is not None and not isinstance(name, str):
        raise TypeError(f"named_call: name must be a str; got {name!r}")
    return fun


class named_scope:  # noqa: N801  (jax.named_scope is used as a context manager)
    """A context manager that names the operations traced inside it in JAX; a no-op in kiln."""

    def __init__(self, name: str):
        if not isinstance(name, str):
            raise TypeError(f"named_scope: name must be a str; got {name!r}")
        self.name = name

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False
