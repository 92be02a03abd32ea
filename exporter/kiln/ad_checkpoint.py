"""jax.ad_checkpoint: checkpoint, checkpoint_name and checkpoint_policies (kiln.transforms.checkpoint; kiln
accepts the policies and does not rematerialize, docs/jax_compat.md), under the module name JAX programs import
them from, and print_saved_residuals (what reverse mode keeps from the forward pass)."""
import inspect
from typing import NamedTuple

from kiln.core.ad_util import Zero, instantiate
from kiln.core.ir import Var
from kiln.core.pytree import tree_flatten, tree_unflatten
from kiln.core.trace import get_aval, trace_to_graph_with_captures
from kiln.transforms.checkpoint import checkpoint, checkpoint_name, checkpoint_policies
from kiln.transforms.jvp import is_differentiable, jvp_flat, tangent_aval
from kiln.transforms.linearize import split_linear

remat = checkpoint


class _Marker:
    def __init__(self, name):
        self._name = name

    def __repr__(self):
        return self._name


# What a JAX policy may return for a value (besides True/False); kiln accepts policies and does not consult them.
Saveable = _Marker("Saveable")
Recompute = _Marker("Recompute")


class Offloadable(NamedTuple):
    """A policy's answer "save, in memory space dst" (JAX moves the value from src to dst): kiln keeps values in
    host memory."""
    src: str
    dst: str


def saved_residuals(f, *args, **kwargs) -> list:
    """``[(aval, description), ...]``: the values kiln's reverse mode of ``f(*args, **kwargs)`` keeps from the
    forward pass for the backward one (the primal values its transposed linear equations read), each described
    as JAX's: "from the argument NAME", "from a constant", "from a value of an enclosing transformation", or
    "output of PRIMITIVE from FILE:LINE (FUNCTION)"."""
    try:
        names = list(inspect.signature(f).bind(*args, **kwargs).arguments)
    except (TypeError, ValueError):
        names = [f"#{i}" for i in range(len(args))] + list(kwargs)
    owners = []
    for name, value in zip(names, list(args) + list(kwargs.values())):
        owners += [name] * len(tree_flatten(value)[0])
    leaves, in_tree = tree_flatten((args, kwargs))
    avals = [get_aval(x) for x in leaves]
    diff = [is_differentiable(a) for a in avals]
    n = len(leaves)

    def flat(*xs):
        a, k = tree_unflatten(in_tree, list(xs))
        return tree_flatten(f(*a, **k))[0]

    def jvp_graph(*xs_and_ts):
        ts = iter(xs_and_ts[n:])
        tangents = [next(ts) if d else Zero(tangent_aval(a)) for a, d in zip(avals, diff)]
        primals, tangent_outs = jvp_flat(flat, list(xs_and_ts[:n]), tangents)
        return primals + [instantiate(t, tangent_aval(get_aval(p))) for t, p in zip(tangent_outs, primals)]

    graph, _ = trace_to_graph_with_captures(jvp_graph, avals + [tangent_aval(a) for a, d in zip(avals, diff) if d])
    tangent_ids = {v.id for v in graph.invars[n:n + sum(diff)]}
    linear, primal_eqns, linear_eqns = split_linear(graph.eqns, tangent_ids)
    produced = {v.id: eqn for eqn in primal_eqns for v in eqn.outvars}
    arguments = {v.id: owners[i] for i, v in enumerate(graph.invars[:n])}
    constants = {v.id for v in graph.constvars}
    seen, out = set(), []
    for eqn in linear_eqns:
        for a in eqn.invars:
            if not isinstance(a, Var) or a.id in linear or a.id in seen:
                continue
            seen.add(a.id)
            if a.id in arguments:
                what = f"from the argument {arguments[a.id]}"
            elif a.id in constants:
                what = "from a constant"
            elif a.id in produced:
                eqn_from, info = produced[a.id], produced[a.id].source_info
                where = f" from {info.filename}:{info.lineno} ({info.function})" if info is not None else ""
                what = f"output of {eqn_from.primitive.name}{where}"
            else:
                what = "from a value of an enclosing transformation"
            out.append((a.aval, what))
    return out


def print_saved_residuals(f, *args, **kwargs) -> None:
    """Prints saved_residuals(f, *args, **kwargs), one value a line: its type and where it comes from."""
    for aval, what in saved_residuals(f, *args, **kwargs):
        print(f"{aval.str_short()} {what}")


__all__ = ["checkpoint", "checkpoint_name", "checkpoint_policies", "remat", "Saveable", "Recompute", "Offloadable",
           "saved_residuals", "print_saved_residuals"]
