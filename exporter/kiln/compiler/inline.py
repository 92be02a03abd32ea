"""Inlining calls (kernels, custom-derivative functions) so that fusion sees one flat graph per procedure.

stop_gradient, an identity once transformations are done, is dropped here too.
"""
from __future__ import annotations

from ..core.ir import Equation, Graph, Literal, Var
from ..lax.prims import stop_gradient


def inline_calls(graph: Graph) -> Graph:
    """A copy of graph with every call-like equation replaced by the callee's equations."""
    eqns: list[Equation] = []
    constvars = list(graph.constvars)
    consts = list(graph.consts)
    rename: dict[int, object] = {}

    def read(atom, local):
        if isinstance(atom, Literal):
            return atom
        return local.get(atom.id, atom)

    def emit(g: Graph, local: dict):
        for eqn in g.eqns:
            ins = [read(a, local) for a in eqn.invars]
            if eqn.primitive.call_graph_param is not None:
                sub = eqn.params[eqn.primitive.call_graph_param]
                sub_local: dict[int, object] = {}
                for v, c in zip(sub.constvars, sub.consts):
                    fresh = Var(v.aval)
                    constvars.append(fresh)
                    consts.append(c)
                    sub_local[v.id] = fresh
                for v, a in zip(sub.invars, ins):
                    sub_local[v.id] = a
                emit(sub, sub_local)
                for v, a in zip(eqn.outvars, sub.outvars):
                    local[v.id] = read(a, sub_local)
                continue
            if eqn.primitive is stop_gradient:
                local[eqn.outvars[0].id] = ins[0]
                continue
            outs = [Var(v.aval) for v in eqn.outvars]
            for old, new in zip(eqn.outvars, outs):
                local[old.id] = new
            eqns.append(Equation(eqn.primitive, ins, outs, eqn.params, eqn.source_info))

    emit(graph, rename)
    outvars = [read(a, rename) for a in graph.outvars]
    return Graph(list(graph.invars), constvars, consts, eqns, outvars, set(graph.effects))
