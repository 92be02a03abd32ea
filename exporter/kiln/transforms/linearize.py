"""Reverse mode: trace the JVP, run its primal part, transpose its linear part.

The JVP of a function is traced into one graph whose inputs are the primals
and the tangents. Equations that depend on a tangent are linear in the
tangents (JVP rules guarantee it); the others are the primal computation.
`vjp_flat` evaluates the primal equations on the actual arguments (concrete
values or tracers of enclosing transformations) and returns a function that
walks the linear equations backwards through their transpose rules.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from ..core.ir import Literal, Var
from ..core.trace import trace_to_graph_with_captures
from .jvp import DifferentiationError, Zero, instantiate, is_differentiable, jvp_flat, tangent_aval
from .transpose_rules import UndefinedPrimal


def _aval(x):
    from ..numpy._base import aval

    return aval(x)


def vjp_flat(fn: Callable, primals: list, has_aux: bool = False):
    """(outputs, aux, vjp_fn) of fn at primals; vjp_fn(output cotangents) -> input cotangents.

    fn maps a list of arrays to a list of arrays, or with has_aux to a pair
    (outputs, aux leaves) whose aux leaves are returned but not differentiated.
    Input cotangents are None for non-float inputs.
    """
    in_avals = [_aval(p).strip_weak() for p in primals]
    diff = [is_differentiable(a) for a in in_avals]
    tangent_avals = [tangent_aval(a) for a, d in zip(in_avals, diff) if d]
    n = len(primals)

    counts = {}

    def with_aux_last(*xs):
        outs = fn(*xs)
        aux = []
        if has_aux:
            outs, aux = outs
        counts["out"], counts["aux"] = len(outs), len(aux)
        return list(outs) + list(aux)

    def jvp_graph_fn(*args):
        xs, ts = list(args[:n]), iter(args[n:])
        tangents = [next(ts) if d else Zero(tangent_aval(a)) for a, d in zip(in_avals, diff)]
        p_out, t_out = jvp_flat(with_aux_last, xs, tangents)
        n_diff = counts["out"]
        t_real = [instantiate(t, tangent_aval(_aval(p))) for t, p in zip(t_out[:n_diff], p_out[:n_diff])]
        return p_out + t_real

    graph, captured = trace_to_graph_with_captures(jvp_graph_fn, in_avals + tangent_avals)
    n_declared = n + len(tangent_avals)
    tangent_inputs = graph.invars[n:n_declared]
    linear: set[int] = {v.id for v in tangent_inputs}
    env: dict[int, object] = {v.id: c for v, c in zip(graph.constvars, graph.consts)}
    env.update({v.id: p for v, p in zip(graph.invars[:n], primals)})
    env.update({v.id: c for v, c in zip(graph.invars[n_declared:], captured)})
    linear_eqns = []

    def read(atom):
        return atom.value if isinstance(atom, Literal) else env[atom.id]

    for eqn in graph.eqns:
        if any(isinstance(a, Var) and a.id in linear for a in eqn.invars):
            linear.update(v.id for v in eqn.outvars)
            linear_eqns.append(eqn)
            continue
        outs = eqn.primitive.bind(*[read(a) for a in eqn.invars], **eqn.params)
        for v, o in zip(eqn.outvars, outs if eqn.primitive.multiple_results else [outs]):
            env[v.id] = o

    n_out, n_aux = counts["out"], counts["aux"]
    primal_outs = [read(a) for a in graph.outvars[:n_out]]
    aux_outs = [read(a) for a in graph.outvars[n_out:n_out + n_aux]]
    tangent_outs = graph.outvars[n_out + n_aux:]

    def vjp_fn(cotangents: list) -> list:
        cts: dict[int, object] = {}

        def accumulate(var, ct):
            if ct is None:
                return
            prev = cts.get(var.id)
            if prev is None:
                cts[var.id] = ct
            else:
                from ..lax import prims

                cts[var.id] = prims.add.bind(prev, ct)

        for atom, ct in zip(tangent_outs, cotangents):
            if isinstance(atom, Var) and atom.id in linear:
                accumulate(atom, ct)
        for eqn in reversed(linear_eqns):
            outs_ct = [cts.pop(v.id, None) for v in eqn.outvars]
            if all(c is None for c in outs_ct):
                continue
            outs_ct = [instantiate(Zero(v.aval) if c is None else c, v.aval) for c, v in zip(outs_ct, eqn.outvars)]
            rule = eqn.primitive.transpose_rule
            if rule is None:
                raise DifferentiationError(f"primitive {eqn.primitive.name} has no transpose rule (reverse mode)")
            args = [UndefinedPrimal(a.aval) if isinstance(a, Var) and a.id in linear else read(a) for a in eqn.invars]
            ct_arg = outs_ct if eqn.primitive.multiple_results else outs_ct[0]
            for a, c in zip(eqn.invars, rule(ct_arg, *args, **eqn.params)):
                if isinstance(a, Var) and a.id in linear:
                    accumulate(a, c)
        grads = iter(tangent_inputs)
        result = []
        for a, d in zip(in_avals, diff):
            if not d:
                result.append(None)
                continue
            v = next(grads)
            ct = cts.get(v.id)
            result.append(np.zeros(v.aval.shape, v.aval.dtype) if ct is None else ct)
        return result

    return primal_outs, aux_outs, vjp_fn
