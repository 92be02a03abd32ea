"""Reverse mode: trace the JVP, run its primal part, transpose its linear part.

The JVP of a function is traced into one graph whose inputs are the primals
and the tangents. Equations that depend on a tangent are linear in the
tangents (JVP rules guarantee it); the others are the primal computation.
`vjp_flat` evaluates the primal equations on the actual arguments (concrete
values or tracers of enclosing transformations) and returns a function that
walks the linear equations backwards through their transpose rules.
"""
from __future__ import annotations

from typing import Callable, Iterable


from ..core.ad_util import Zero, add_any, instantiate, with_primal_type, zeros_like_aval
from ..core.ir import Equation, Graph, Literal, Var
from ..core.trace import get_aval, trace_to_graph_with_captures
from .jvp import DifferentiationError, is_differentiable, jvp_flat, tangent_aval
from .transpose import UndefinedPrimal


def split_linear(eqns: Iterable[Equation], linear_inputs: set[int]) -> tuple[set[int], list, list]:
    """(ids of linear values, non-linear equations, linear equations): linear = depends on a linear input."""
    linear = set(linear_inputs)
    primal, tangent = [], []
    for eqn in eqns:
        if any(isinstance(a, Var) and a.id in linear for a in eqn.invars):
            linear.update(v.id for v in eqn.outvars)
            tangent.append(eqn)
        else:
            primal.append(eqn)
    return linear, primal, tangent


def backward_pass(linear_eqns: list, linear: set[int], read: Callable, output_cts: list) -> dict[int, object]:
    """Transposes linear equations; output_cts pairs output atoms with cotangents. Returns cts by value id."""
    cts: dict[int, object] = {}

    def accumulate(var, ct):
        if ct is None:
            return
        prev = cts.get(var.id)
        cts[var.id] = ct if prev is None else add_any(prev, ct)

    for atom, ct in output_cts:
        if isinstance(atom, Var) and atom.id in linear:
            accumulate(atom, ct)
    for eqn in reversed(linear_eqns):
        outs_ct = [cts.pop(v.id, None) for v in eqn.outvars]
        if all(c is None for c in outs_ct):
            continue
        if getattr(eqn.primitive, "symbolic_zero_cotangents", False):  # the rule takes Zero for an unused output
            outs_ct = [Zero(v.aval) if c is None else c for c, v in zip(outs_ct, eqn.outvars)]
        else:
            outs_ct = [instantiate(Zero(v.aval) if c is None else c, v.aval) for c, v in zip(outs_ct, eqn.outvars)]
        rule = eqn.primitive.transpose_rule
        if rule is None:
            raise DifferentiationError(f"primitive {eqn.primitive.name} has no transpose rule (reverse mode)")
        args = [UndefinedPrimal(a.aval) if isinstance(a, Var) and a.id in linear else read(a) for a in eqn.invars]
        ct_arg = outs_ct if eqn.primitive.multiple_results else outs_ct[0]
        for a, c in zip(eqn.invars, rule(ct_arg, *args, **eqn.params)):
            if isinstance(a, Var) and a.id in linear:
                accumulate(a, c)
    return cts


def check_transposable(linear_eqns: list) -> None:
    """Fails early, with the primitive's own reason, when reverse mode cannot go through an equation."""
    for eqn in linear_eqns:
        reason = getattr(eqn.primitive, "no_transpose_reason", None)
        if reason:
            raise DifferentiationError(reason)
        if eqn.primitive.transpose_rule is None:
            raise DifferentiationError(f"primitive {eqn.primitive.name} has no transpose rule (reverse mode)")


def evaluate_equations(eqns: Iterable[Equation], env: dict[int, object]) -> None:
    """Binds each equation's primitive on values from env, storing its outputs there."""
    for eqn in eqns:
        args = [a.value if isinstance(a, Literal) else env[a.id] for a in eqn.invars]
        outs = eqn.primitive.bind(*args, **eqn.params)
        for v, o in zip(eqn.outvars, outs if eqn.primitive.multiple_results else [outs]):
            env[v.id] = o


def vjp_flat(fn: Callable, primals: list, has_aux: bool = False):
    """(outputs, aux, vjp_fn) of fn at primals; vjp_fn(output cotangents) -> input cotangents.

    fn maps a list of arrays to a list of arrays, or with has_aux to a pair
    (outputs, aux leaves) whose aux leaves are returned but not differentiated.
    Input cotangents are None for non-float inputs.
    """
    in_avals = [get_aval(p) for p in primals]
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
        t_real = [instantiate(t, tangent_aval(get_aval(p))) for t, p in zip(t_out[:n_diff], p_out[:n_diff])]
        return p_out + t_real

    graph, captured = trace_to_graph_with_captures(jvp_graph_fn, in_avals + tangent_avals)
    n_declared = n + len(tangent_avals)
    tangent_inputs = graph.invars[n:n_declared]
    linear, primal_eqns, linear_eqns = split_linear(graph.eqns, {v.id for v in tangent_inputs})
    check_transposable(linear_eqns)
    env: dict[int, object] = {v.id: c for v, c in zip(graph.constvars, graph.consts)}
    env.update({v.id: p for v, p in zip(graph.invars[:n], primals)})
    env.update({v.id: c for v, c in zip(graph.invars[n_declared:], captured)})
    evaluate_equations(primal_eqns, env)

    def read(atom):
        return atom.value if isinstance(atom, Literal) else env[atom.id]

    n_out, n_aux = counts["out"], counts["aux"]
    primal_outs = [read(a) for a in graph.outvars[:n_out]]
    aux_outs = [read(a) for a in graph.outvars[n_out:n_out + n_aux]]
    tangent_outs = graph.outvars[n_out + n_aux:]

    def vjp_fn(cotangents: list) -> list:
        cts = backward_pass(linear_eqns, linear, read, list(zip(tangent_outs, cotangents)))
        grads = iter(tangent_inputs)
        result = []
        for d, aval in zip(diff, in_avals):
            if not d:
                result.append(None)
                continue
            ct = cts.get(next(grads).id)
            result.append(zeros_like_aval(aval) if ct is None else with_primal_type(ct, aval))
        return result

    return primal_outs, aux_outs, vjp_fn


def transpose_graph(graph: Graph, linear_mask: list[bool]) -> Callable:
    """For a graph linear in the inputs marked True: fn(non-linear inputs, output cts) -> cts of linear inputs."""
    linear_inputs = [v for v, m in zip(graph.invars, linear_mask) if m]
    linear, primal_eqns, linear_eqns = split_linear(graph.eqns, {v.id for v in linear_inputs})

    def transposed(nonlinear_values: list, output_cts: list) -> list:
        env: dict[int, object] = {v.id: c for v, c in zip(graph.constvars, graph.consts)}
        env.update({v.id: x for v, x in zip([v for v, m in zip(graph.invars, linear_mask) if not m], nonlinear_values)})
        evaluate_equations(primal_eqns, env)

        def read(atom):
            return atom.value if isinstance(atom, Literal) else env[atom.id]

        cts = backward_pass(linear_eqns, linear, read, list(zip(graph.outvars, output_cts)))
        return [cts.get(v.id, None) if cts.get(v.id) is not None else zeros_like_aval(v.aval) for v in linear_inputs]

    return transposed
