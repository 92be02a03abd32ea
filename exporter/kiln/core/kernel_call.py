"""kernel_call: a traced kernel (jit function) applied inside another traced function."""
from __future__ import annotations

from .evaluate import eval_graph
from .primitive import Primitive, register

kernel_call = register(Primitive("kernel_call", multiple_results=True))
kernel_call.def_traits(fusion="inlined")


@kernel_call.def_abstract_eval
def _abstract(*avals, graph, name):
    expected = [a.strip_weak() for a in graph.in_avals]
    if [a.strip_weak() for a in avals] != expected:
        raise TypeError(f"kernel {name}: called with {[str(a) for a in avals]}, traced for {[str(a) for a in expected]}")
    return graph.out_avals


@kernel_call.def_impl
def _impl(*args, graph, name):
    return eval_graph(graph, args)


kernel_call.inline_rule = lambda *args, graph, name: eval_graph(graph, args)
kernel_call.call_graph_param = "graph"
