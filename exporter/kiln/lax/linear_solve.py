"""jax.lax.custom_linear_solve and custom_root: solvers differentiated implicitly, not through their iterations.

custom_linear_solve(matvec, b, solve) computes solve(matvec, b) and differentiates it as x = A⁻¹b for the
linear map A = matvec: the tangent is A⁻¹(ḃ - Ȧx), one more solve, and the cotangent of b is
transpose_solve(Aᵀ, x̄) (Aᵀ by transposing matvec; solve itself when symmetric). An iterative solver (a
while_loop, which reverse mode cannot go through) is differentiable this way, in both modes and under vmap.

One primitive, custom_linear_solve, holds three traced graphs that share the values they close over as
trailing operands: matvec (x, consts) -> Ax, solve (b, consts) -> x [+ aux], transpose_solve likewise. The
compiler inlines solve (call_graph_param); the derivatives are new custom_linear_solve equations, linear in
their b operands, so reverse mode transposes them.

custom_root(f, initial_guess, solve, tangent_solve) finds x with f(x) = 0 by solve(f, initial_guess) and
differentiates the root implicitly: ẋ = -(∂f/∂x)⁻¹ ∂f/∂θ θ̇, the inverse applied by custom_linear_solve with
tangent_solve.
"""
from __future__ import annotations

from typing import Callable

from ..core.ad_util import Zero, instantiate
from ..core.evaluate import eval_graph
from ..core.primitive import Primitive, register
from ..core.pytree import tree_flatten, tree_unflatten, treedef_flatten_up_to
from ..core.trace import get_aval, trace_to_graph
from ..transforms.jvp import DifferentiationError, jvp_flat, tangent_aval
from ..transforms.linearize import transpose_graph
from ..transforms.transpose import is_linear
from . import prims
from .control_flow import _leaf, _name, join_captures, trace_function

__all__ = ["custom_linear_solve", "custom_root"]

linear_solve_p = register(Primitive("custom_linear_solve", multiple_results=True))
linear_solve_p.call_graph_param = "solve"
linear_solve_p.def_traits(fusion="inlined")
linear_solve_p.format_params = lambda params: f"[{params['name']}]"


def _solved(args, *, solve, matvec, transpose_solve, n_b, symmetric, name):
    return eval_graph(solve, list(args))


linear_solve_p.def_abstract_eval(lambda *avals, solve, **params: solve.out_avals)
linear_solve_p.def_impl(lambda *args, **params: _solved(args, **params))
linear_solve_p.inline_rule = lambda *args, **params: _solved(args, **params)


def _transposed_matvec(matvec, n_b: int):
    """The graph (y, consts) -> Aᵀy of matvec's graph (x, consts) -> Ax."""
    n_consts = len(matvec.invars) - n_b
    transposed = transpose_graph(matvec, [True] * n_b + [False] * n_consts)
    in_avals = [v.aval for v in matvec.outvars] + [v.aval for v in matvec.invars[n_b:]]
    return trace_to_graph(lambda *a: transposed(list(a[n_b:]), list(a[:n_b])), in_avals)


def _linear_solve_jvp(primals, tangents, *, solve, matvec, transpose_solve, n_b, symmetric, name):
    params = dict(solve=solve, matvec=matvec, transpose_solve=transpose_solve, n_b=n_b, symmetric=symmetric,
                  name=name)
    outs = linear_solve_p.bind(*primals, **params)
    x, consts = outs[:n_b], list(primals[n_b:])
    b_dot, const_dots = tangents[:n_b], tangents[n_b:]
    zero_tangents = [Zero(tangent_aval(get_aval(o).strip_weak())) for o in outs]
    if all(isinstance(t, Zero) for t in tangents):
        return outs, zero_tangents
    rhs = [instantiate(t, tangent_aval(get_aval(b).strip_weak())) for t, b in zip(b_dot, primals[:n_b])]
    if not all(isinstance(t, Zero) for t in const_dots):
        x_zero = [Zero(tangent_aval(get_aval(v).strip_weak())) for v in x]
        _, a_dot_x = jvp_flat(lambda *a: eval_graph(matvec, list(a)), list(x) + consts, x_zero + list(const_dots))
        rhs = [r if isinstance(d, Zero) else prims.sub.bind(r, d) for r, d in zip(rhs, a_dot_x)]
    x_dot = linear_solve_p.bind(*rhs, *consts, **params)[:n_b]
    return outs, list(x_dot) + zero_tangents[n_b:]


def _linear_solve_transpose(cts, *args, solve, matvec, transpose_solve, n_b, symmetric, name):
    consts = list(args[n_b:])
    if any(is_linear(c) for c in consts):
        raise DifferentiationError(f"custom_linear_solve {name}: transposing in the values matvec or solve close "
                                   "over is not supported (the solve is linear in b only)")
    if transpose_solve is None and not symmetric:
        raise DifferentiationError(f"custom_linear_solve {name}: reverse-mode differentiation needs "
                                   "transpose_solve= (or symmetric=True)")
    b_avals = [a.aval if is_linear(a) else get_aval(a).strip_weak() for a in args[:n_b]]
    ct_x = [instantiate(Zero(a) if c is None else c, a) for c, a in zip(cts[:n_b], b_avals)]
    if symmetric:
        params = dict(solve=solve, matvec=matvec, transpose_solve=transpose_solve)
    else:
        params = dict(solve=transpose_solve, matvec=_transposed_matvec(matvec, n_b), transpose_solve=solve)
    ct_b = linear_solve_p.bind(*ct_x, *consts, n_b=n_b, symmetric=symmetric, name=name, **params)[:n_b]
    return list(ct_b) + [None] * len(consts)


def _linear_solve_batch(values, dims, *, axis_size, solve, matvec, transpose_solve, n_b, symmetric, name):
    from ..transforms.batching import move_batch_axis
    from ..transforms.custom import _batched_graph  # at call time: transforms.custom imports kiln.numpy

    b = [move_batch_axis(v, d, 0, axis_size) for v, d in zip(values[:n_b], dims[:n_b])]
    consts = [v if d is None else move_batch_axis(v, d, 0, axis_size) for v, d in zip(values[n_b:], dims[n_b:])]
    const_dims = [None if d is None else 0 for d in dims[n_b:]]
    graph_dims = [0] * n_b + const_dims

    def batched(graph):
        return None if graph is None else _batched_graph(graph, graph_dims, axis_size)[0]

    outs = linear_solve_p.bind(*b, *consts, solve=batched(solve), matvec=batched(matvec),
                               transpose_solve=batched(transpose_solve), n_b=n_b, symmetric=symmetric, name=name)
    return outs, [0] * len(outs)


linear_solve_p.jvp_rule = _linear_solve_jvp
linear_solve_p.transpose_rule = _linear_solve_transpose
linear_solve_p.batching_rule = _linear_solve_batch


def _check_like_b(where: str, got_tree, got_avals, b_tree, b_avals):
    if got_tree != b_tree or [(a.shape, a.dtype) for a in got_avals] != [(a.shape, a.dtype) for a in b_avals]:
        raise TypeError(f"custom_linear_solve: {where} must return a value with b's structure, shapes and dtypes "
                        f"{[(a.shape, str(a.dtype)) for a in b_avals]}; got "
                        f"{[(a.shape, str(a.dtype)) for a in got_avals]}")


def custom_linear_solve(matvec: Callable, b, solve: Callable, transpose_solve: Callable | None = None,
                        symmetric: bool = False, has_aux: bool = False):
    """x = solve(matvec, b) for the linear map matvec (x -> Ax, x shaped like b), differentiated as A⁻¹b.
    transpose_solve(vecmat, b) solves with Aᵀ (needed for reverse mode unless symmetric=True). With has_aux,
    solve and transpose_solve return (x, aux) and so does this function (aux is not differentiated)."""
    leaves, b_tree = tree_flatten(b)
    leaves = [_leaf(x) for x in leaves]
    b_avals = [get_aval(x).strip_weak() for x in leaves]
    n_b = len(leaves)
    name = _name(solve)
    one_argument = tree_flatten((b,))[1]
    mv_graph, mv_tree, mv_consts = trace_function(matvec, one_argument, b_avals)
    _check_like_b("matvec", mv_tree, mv_graph.out_avals, b_tree, b_avals)

    def solver(fn, operator, where):
        aux_tree = []

        def run(b_value):
            out = fn(operator, b_value)
            x, aux = out if has_aux else (out, ())
            x_leaves, x_tree = tree_flatten(x)
            aux_leaves, treedef = tree_flatten(aux)
            aux_tree.append(treedef)
            _check_like_b(where, x_tree, [get_aval(_leaf(v)).strip_weak() for v in x_leaves], b_tree, b_avals)
            return list(x_leaves) + list(aux_leaves)

        graph, _, captured = trace_function(run, one_argument, b_avals)
        return graph, captured, aux_tree

    solve_graph, s_consts, aux_tree = solver(solve, matvec, "solve")
    traced = [(mv_graph, mv_consts), (solve_graph, s_consts)]
    if transpose_solve is not None and not symmetric:
        mv_transposed = transpose_graph(mv_graph, [True] * n_b + [False] * len(mv_consts))

        def vecmat(y):
            y_leaves = [_like(v, a) for v, a in zip(treedef_leaves(b_tree, y), b_avals)]
            return tree_unflatten(b_tree, mv_transposed(list(mv_consts), y_leaves))

        ts_graph, ts_consts, _ = solver(transpose_solve, vecmat, "transpose_solve")
        traced.append((ts_graph, ts_consts))
    graphs, consts = join_captures(traced)
    outs = linear_solve_p.bind(*leaves, *consts, solve=graphs[1], matvec=graphs[0],
                               transpose_solve=graphs[2] if len(graphs) > 2 else None, n_b=n_b,
                               symmetric=bool(symmetric), name=name)
    x = tree_unflatten(b_tree, outs[:n_b])
    return (x, tree_unflatten(aux_tree[0], outs[n_b:])) if has_aux else x


def _like(value, aval):
    """value (a vector given to a linear map, possibly a Python number) with aval's dtype and shape."""
    if get_aval(value).dtype != aval.dtype:
        value = prims.convert.bind(value, new_dtype=aval.dtype)
    if get_aval(value).shape != aval.shape:
        if get_aval(value).shape:
            raise TypeError(f"a solver passed a vector of shape {get_aval(value).shape} to a linear map of vectors "
                            f"of shape {aval.shape}")
        value = prims.broadcast_in_dim.bind(value, shape=aval.shape, broadcast_dimensions=())
    return value


def treedef_leaves(treedef, tree) -> list:
    """tree's leaves, which must have treedef's structure."""
    return [_leaf(v) for v in treedef_flatten_up_to(treedef, tree)]


def custom_root(f: Callable, initial_guess, solve: Callable, tangent_solve: Callable, has_aux: bool = False):
    """x = solve(f, initial_guess), a root of f (f(x) = 0, x shaped like initial_guess), differentiated
    implicitly through the values f closes over: tangent_solve(g, y) solves the linear g(x) = y (g is ∂f/∂x at
    the root, e.g. `lambda g, y: y / g(1.0)` for a scalar). With has_aux, solve returns (x, aux), and so does
    this function."""
    from ..transforms.custom import custom_jvp  # at call time: transforms.custom imports kiln.numpy

    leaves, x_tree = tree_flatten(initial_guess)
    leaves = [_leaf(x) for x in leaves]
    avals = [get_aval(x).strip_weak() for x in leaves]
    n = len(leaves)
    f_graph, f_tree, f_consts = trace_function(f, tree_flatten((initial_guess,))[1], avals)
    if f_tree != x_tree:
        raise TypeError("custom_root: f must return a value with initial_guess's structure")
    aux_tree = []

    def run_solve(*guess):
        out = solve(f, tree_unflatten(x_tree, list(guess)))
        x, aux = out if has_aux else (out, ())
        aux_leaves, treedef = tree_flatten(aux)
        aux_tree.append(treedef)
        return treedef_leaves(x_tree, x) + [_leaf(a) for a in aux_leaves]

    solve_graph, _, s_consts = trace_function(run_solve, tree_flatten(tuple(leaves))[1], avals)
    (f_graph, solve_graph), consts = join_captures([(f_graph, f_consts), (solve_graph, s_consts)])

    def f_at(x_leaves, const_values):
        return eval_graph(f_graph, list(x_leaves) + list(const_values))

    @custom_jvp
    def root(const_values, guess):
        return eval_graph(solve_graph, list(guess) + list(const_values))

    @root.defjvp
    def root_jvp(primals, tangents):
        const_values, guess = primals
        const_dots = tangents[0]
        outs = root(const_values, guess)
        x = outs[:n]
        x_zero = [Zero(tangent_aval(get_aval(v).strip_weak())) for v in x]
        _, f_dot = jvp_flat(lambda *a: f_at(a[:n], a[n:]), list(x) + list(const_values), x_zero + list(const_dots))
        rhs = [prims.neg.bind(instantiate(d, tangent_aval(get_aval(v).strip_weak()))) for d, v in zip(f_dot, x)]

        def df_dx(v):
            directions = [_like(d, get_aval(p).strip_weak()) for d, p in zip(treedef_leaves(x_tree, v), x)]
            _, out = jvp_flat(lambda *a: f_at(a, const_values), list(x), directions)
            return tree_unflatten(x_tree, out)

        x_dot = custom_linear_solve(df_dx, tree_unflatten(x_tree, rhs), tangent_solve, transpose_solve=tangent_solve)
        aux_avals = [tangent_aval(get_aval(o).strip_weak()) for o in outs[n:]]
        return outs, treedef_leaves(x_tree, x_dot) + [instantiate(Zero(a), a) for a in aux_avals]

    outs = root(list(consts), leaves)
    x = tree_unflatten(x_tree, outs[:n])
    return (x, tree_unflatten(aux_tree[0], outs[n:])) if has_aux else x
