"""linear_call: a call of a function linear in some of its arguments, with a user-given transpose (JAX's
jax.custom_derivatives.linear_call).

``linear_call(fun, fun_transpose, residual_args, linear_args)`` is ``fun(residual_args, linear_args)``, where
`fun` is linear in `linear_args`; reverse mode transposes it by calling ``fun_transpose(residual_args,
cotangent)`` (which must give a tree shaped like `linear_args`), and the transpose of that call is `fun` again.
The call is the primitive ``linear_call`` holding `fun`'s traced graph (the compiler inlines it): its JVP is the
call on the tangents of `linear_args` (the residuals are not differentiated: a tangent reaching one is an error),
its transpose the call of `fun_transpose`'s graph. Under vmap the graph is inlined (batched as ordinary code).
"""
from __future__ import annotations

from typing import Callable

from ..core.ad_util import Zero, instantiate, with_primal_type
from ..core.evaluate import eval_graph
from ..core.primitive import Primitive, register
from ..core.pytree import tree_flatten, tree_unflatten
from ..core.trace import get_aval, trace_to_graph_with_captures
from ..numpy._base import asarray
from .jvp import DifferentiationError, tangent_aval
from .transpose import is_linear

linear_call_p = register(Primitive("linear_call", multiple_results=True))
linear_call_p.call_graph_param = "callee"
linear_call_p.def_traits(fusion="inlined")
linear_call_p.format_params = lambda params: f"[{params['name']}]"
linear_call_p.def_abstract_eval(lambda *avals, callee, transpose, num_res, name: callee.out_avals)
linear_call_p.def_impl(lambda *args, callee, transpose, num_res, name: eval_graph(callee, args))
linear_call_p.inline_rule = lambda *args, callee, transpose, num_res, name: eval_graph(callee, args)


def _trace(fn: Callable, trees: tuple, avals: list, what: str):
    """fn(*trees unflattened) traced at `avals`: (graph, output tree)."""
    out_tree = []
    sizes = [t.num_leaves for t in trees]

    def flat(*xs):
        parts, start = [], 0
        for tree, size in zip(trees, sizes):
            parts.append(tree_unflatten(tree, list(xs[start:start + size])))
            start += size
        leaves, treedef = tree_flatten(fn(*parts))
        out_tree.append(treedef)
        return [asarray(x) for x in leaves]

    graph, captured = trace_to_graph_with_captures(flat, avals)
    if captured:
        raise DifferentiationError(f"linear_call: {what} closes over a value of an enclosing transformation; pass "
                                   "it in residual_args instead")
    return graph, out_tree[0]


def _linear_call_jvp(primals, tangents, *, callee, transpose, num_res, name):
    if any(not isinstance(t, Zero) for t in tangents[:num_res]):
        raise DifferentiationError(f"linear_call {name}: its residual_args are not differentiated (fun need not be "
                                   "linear in them); make the differentiated values linear_args")
    params = dict(callee=callee, transpose=transpose, num_res=num_res, name=name)
    outs = linear_call_p.bind(*primals, **params)
    if all(isinstance(t, Zero) for t in tangents[num_res:]):
        return outs, [Zero(tangent_aval(get_aval(o))) for o in outs]
    lin = [instantiate(t, tangent_aval(get_aval(p))) for t, p in zip(tangents[num_res:], primals[num_res:])]
    return outs, linear_call_p.bind(*primals[:num_res], *lin, **params)


def _linear_call_transpose(cts, *args, callee, transpose, num_res, name):
    residuals, linear = list(args[:num_res]), args[num_res:]
    if any(is_linear(r) for r in residuals) or not all(is_linear(x) for x in linear):
        raise DifferentiationError(f"linear_call {name}: only its linear_args may be transposed")
    graph, back = transpose(callee)  # the transpose's graph, and how to transpose it in turn
    cts = [instantiate(Zero(a) if c is None else c, a) for c, a in zip(cts, callee.out_avals)]
    outs = linear_call_p.bind(*residuals, *cts, callee=graph, transpose=back, num_res=num_res, name=name + "_t")
    return [None] * num_res + list(outs)


linear_call_p.jvp_rule = _linear_call_jvp
linear_call_p.transpose_rule = _linear_call_transpose


def linear_call(fun: Callable, fun_transpose: Callable, residual_args, linear_args):
    """``fun(residual_args, linear_args)``, transposed (reverse mode, kiln.linear_transpose) by
    ``fun_transpose(residual_args, cotangent)``. See the module's docstring."""
    res_leaves, res_tree = tree_flatten(residual_args)
    lin_leaves, lin_tree = tree_flatten(linear_args)
    res_leaves, lin_leaves = [asarray(x) for x in res_leaves], [asarray(x) for x in lin_leaves]
    res_avals = [get_aval(x).strip_weak() for x in res_leaves]
    name = getattr(fun, "__name__", "linear_call")
    callee, out_tree = _trace(fun, (res_tree, lin_tree), res_avals + [get_aval(x).strip_weak() for x in lin_leaves],
                              "fun")

    def transpose_of_fun(graph):
        lin_avals = graph.in_avals[len(res_avals):]

        def typed(res, ct):  # fun_transpose's results in the linear inputs' dtypes (Python numbers are weak)
            out = fun_transpose(res, ct)
            leaves, tree = tree_flatten(out)
            if tree != lin_tree:
                raise TypeError(f"linear_call: fun_transpose's output structure {tree} must match that of the "
                                f"linear inputs {lin_tree}")
            for k, (x, a) in enumerate(zip(leaves, lin_avals)):
                if get_aval(asarray(x)).shape != a.shape:
                    raise TypeError(f"linear_call: fun_transpose's output {k} has shape {get_aval(asarray(x)).shape}, "
                                    f"the linear input {a.shape}")
            return tree_unflatten(tree, [with_primal_type(asarray(x), a) for x, a in zip(leaves, lin_avals)])

        t_graph, _ = _trace(typed, (res_tree, out_tree), res_avals + list(graph.out_avals), "fun_transpose")
        return t_graph, lambda _: (graph, transpose_of_fun)

    outs = linear_call_p.bind(*res_leaves, *lin_leaves, callee=callee, transpose=transpose_of_fun,
                              num_res=len(res_leaves), name=name)
    return tree_unflatten(out_tree, outs)
