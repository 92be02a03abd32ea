"""Evaluating a region's elementwise equations at one point of an iteration space."""
from __future__ import annotations

from typing import Callable

from llvmlite import ir

from ..layout import View
from . import scalar_ops
from .loops import const64, dot_offsets
from .types import I64

def is_var(atom) -> bool:
    return hasattr(atom, "id")


def needed_equations(eqns, targets) -> list:
    """Elementwise equations (in order) that the target Vars depend on."""
    wanted = {t.id for t in targets if is_var(t)}
    chosen = []
    for eqn in reversed(eqns):
        if eqn.primitive.traits.fusion in ("layout", "iota") or not any(v.id in wanted for v in eqn.outvars):
            continue
        chosen.append(eqn)
        wanted.update(a.id for a in eqn.invars if is_var(a))
    return chosen[::-1]


def leaves_used(eqns, targets, views: dict[int, View]) -> list:
    """Vars with a View that the equations or targets read (first-use order, no repeats)."""
    seen, leaves = set(), []
    atoms = [a for eqn in eqns for a in eqn.invars] + list(targets)
    for a in atoms:
        if is_var(a) and a.id in views and a.id not in seen:
            seen.add(a.id)
            leaves.append(a)
    return leaves


def load_view(b: ir.IRBuilder, view: View, offset: ir.Value, pointers: list[ir.Value]) -> ir.Value:
    """The value of a View at element offset `offset` (iota: the offset is the value)."""
    if view.literal is not None:
        return scalar_ops.literal(view.literal.value, view.dtype)
    if view.source < 0:
        return scalar_ops.convert(b, offset, "int64", view.dtype)
    return scalar_ops.load(b, pointers[view.source], offset, view.dtype)


def view_offset(b: ir.IRBuilder, view: View, index: list[ir.Value]) -> ir.Value:
    return dot_offsets(b, index, view.strides, const64(view.offset))


def evaluate(b: ir.IRBuilder, eqns, targets, leaf_value: Callable[[object], ir.Value]) -> list[ir.Value]:
    """Emits the equations; returns the values of `targets` (Vars or Literals)."""
    env: dict[int, ir.Value] = {}

    def read(atom):
        if not is_var(atom):
            return scalar_ops.literal(atom.value, atom.aval.dtype)
        if atom.id not in env:
            env[atom.id] = leaf_value(atom)
        return env[atom.id]

    for eqn in eqns:
        args = [read(a) for a in eqn.invars]
        in_dtypes = [a.aval.dtype for a in eqn.invars]
        value = scalar_ops.emit(b, eqn.primitive.name, eqn.params, args, in_dtypes, eqn.outvars[0].aval.dtype)
        env[eqn.outvars[0].id] = value
    return [read(t) for t in targets]


__all__ = ["I64", "evaluate", "leaves_used", "load_view", "needed_equations", "view_offset"]
