"""Evaluating a graph by binding its primitives: eagerly, or inside another trace."""
from __future__ import annotations

from typing import Sequence

from .ir import Graph, Literal


def eval_graph(graph: Graph, args: Sequence, consts: Sequence | None = None) -> list:
    """Runs graph on args (concrete values or tracers of any trace); returns its outputs."""
    env: dict[int, object] = {}

    def read(atom):
        return atom.value if isinstance(atom, Literal) else env[atom.id]

    for v, c in zip(graph.constvars, graph.consts if consts is None else consts):
        env[v.id] = c
    if len(args) != len(graph.invars):
        raise TypeError(f"graph takes {len(graph.invars)} arguments, got {len(args)}")
    for v, a in zip(graph.invars, args):
        env[v.id] = a
    for eqn in graph.eqns:
        outs = eqn.primitive.bind(*[read(a) for a in eqn.invars], **eqn.params)
        outs = outs if eqn.primitive.multiple_results else [outs]
        for v, o in zip(eqn.outvars, outs):
            env[v.id] = o
    return [read(a) for a in graph.outvars]
