"""Checking a Python call's arguments against a function's signature, with messages that say
what the function takes and what it was given."""
from __future__ import annotations

import inspect
import weakref

from . import dtypes
from .aval import ShapedArray

_P = inspect.Parameter
_signatures: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def describe_aval(aval: ShapedArray) -> str:
    """kiln-run's spelling of a type: 4x3xf32, or f32 for a scalar."""
    return "x".join([*(str(d) for d in aval.shape), dtypes.short_name(aval.dtype)])


def describe_tree(tree, limit: int = 60) -> str:
    """A short text of a tree of abstract values: (4x3xf32, [2xi32]), Params(w=3x4xf32, b=4xf32)."""
    def go(t):
        if isinstance(t, ShapedArray):
            return describe_aval(t)
        if t is None:
            return "None"
        if isinstance(t, tuple) and hasattr(t, "_fields"):
            return f"{type(t).__name__}({', '.join(f'{k}={go(v)}' for k, v in zip(t._fields, t))})"
        if isinstance(t, tuple):
            return f"({', '.join(go(v) for v in t)}{',' if len(t) == 1 else ''})"
        if isinstance(t, list):
            return f"[{', '.join(go(v) for v in t)}]"
        if isinstance(t, dict):
            return "{" + ", ".join(f"{k!r}: {go(v)}" for k, v in t.items()) + "}"
        return type(t).__name__

    text = go(tree)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _signature(fn) -> inspect.Signature | None:
    try:
        return _signatures[fn]
    except (KeyError, TypeError):
        pass
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        sig = None
    try:
        _signatures[fn] = sig
    except TypeError:  # not weakly referenceable
        pass
    return sig


def _takes(params: list, types: dict | None) -> str:
    positional = [p for p in params if p.kind in (_P.POSITIONAL_ONLY, _P.POSITIONAL_OR_KEYWORD)]
    if any(p.kind == _P.VAR_POSITIONAL for p in params):
        count = f"at least {sum(p.default is _P.empty for p in positional)}"
    else:
        required = sum(p.default is _P.empty for p in positional)
        count = str(len(positional)) if required == len(positional) else f"{required} to {len(positional)}"
    if not positional:
        return "takes no arguments"
    listed = ", ".join(f"{p.name}: {types[p.name]}" if types and p.name in types else str(p) for p in positional)
    plural = "" if count == "1" else "s"
    return f"takes {count} argument{plural} ({listed})"


def bind_call(name: str, signature: inspect.Signature, args: tuple, kwargs: dict,
              types: dict | None = None) -> inspect.BoundArguments:
    """signature.bind(*args, **kwargs), or a TypeError saying what `name` takes and what it got.

    types: argument name -> text of its declared type, shown in the message (e.g. 4x3xf32).
    """
    try:
        return signature.bind(*args, **kwargs)
    except TypeError:
        pass
    params = list(signature.parameters.values())
    takes = _takes(params, types)
    by_name = {p.name: p for p in params if p.kind != _P.POSITIONAL_ONLY}
    var_keyword = any(p.kind == _P.VAR_KEYWORD for p in params)
    for key in kwargs:
        if key not in by_name and not var_keyword:
            raise TypeError(f"{name} got an unexpected keyword argument {key!r}; it {takes}") from None
    for i, p in enumerate(params[: len(args)]):
        if p.kind in (_P.POSITIONAL_ONLY, _P.POSITIONAL_OR_KEYWORD) and p.name in kwargs:
            raise TypeError(f"{name} got multiple values for argument {p.name!r}; it {takes}") from None
    missing = [p.name for p in params if p.kind == _P.KEYWORD_ONLY and p.default is _P.empty and p.name not in kwargs]
    if missing:
        raise TypeError(f"{name} is missing the keyword argument {missing[0]!r}") from None
    given = len(args) + len(kwargs)
    raise TypeError(f"{name} {takes}, got {given}") from None


def plain_arity(fn) -> int | None:
    """The number of fn's parameters when they are all positional without defaults (a call with
    that many positional arguments needs no binding), else None."""
    signature = _signature(fn)
    if signature is None:
        return None
    params = signature.parameters.values()
    if all(p.kind in (_P.POSITIONAL_ONLY, _P.POSITIONAL_OR_KEYWORD) and p.default is _P.empty for p in params):
        return len(params)
    return None


def positional_arguments(name: str, fn, args: tuple, kwargs: dict) -> tuple:
    """The call fn(*args, **kwargs) as positional arguments, checked against fn's signature (kiln.jit)."""
    signature = _signature(fn)
    if signature is None:
        if kwargs:
            raise TypeError(f"{name} takes positional arguments only; got keyword {next(iter(kwargs))!r}")
        return args
    bound = bind_call(name, signature, args, kwargs)
    if bound.kwargs:
        key = next(iter(bound.kwargs))
        raise TypeError(f"{name}: keyword-only argument {key!r} is not supported by kiln.jit; "
                        "make it a positional argument")
    return bound.args
