"""Structured control flow: cond, switch, while_loop, fori_loop, scan, map.

Each is a primitive holding traced subgraphs, compiled into VM bytecode
(branches and loops) rather than unrolled in Python. Values of enclosing
traces that a branch or body closes over become extra trailing operands.
"""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from ..core import dtypes
from ..core.ad_util import Zero, instantiate
from ..core.aval import ShapedArray
from ..core.errors import KilnError
from ..core.evaluate import eval_graph
from ..core.ir import Equation, Graph, Literal, Var
from ..core.primitive import Primitive, register
from ..core.pytree import tree_flatten, tree_unflatten
from ..core.trace import Tracer, get_aval, trace_to_graph, trace_to_graph_with_captures
from ..transforms.batching import move_batch_axis, vmap_flat
from ..transforms.jvp import has_tangent, jvp_flat, tangent_aval
from ..transforms.linearize import split_linear, transpose_graph
from ..transforms.transpose import UndefinedPrimal
from . import prims


class ControlFlowError(KilnError, TypeError):
    """Branches or loop bodies whose types do not fit together."""


def _leaf(x):
    """A control-flow operand: tracers stay, Python scalars take their weak dtype, others become arrays."""
    if isinstance(x, Tracer):
        return x
    if dtypes.is_python_scalar(x):
        return np.asarray(x, dtypes.python_scalar_dtype(x))
    arr = x if isinstance(x, np.ndarray) else np.asarray(x)  # a kiln array keeps its weak type
    dtypes.canonical(arr.dtype)
    return arr


def _name(fn) -> str:
    return getattr(fn, "__name__", type(fn).__name__)


def _describe(avals) -> str:
    return "(" + ", ".join(str(a) for a in avals) + ")"


def trace_function(fn: Callable, in_tree, in_avals: Sequence[ShapedArray]):
    """Traces fn(*tree) at in_avals: (graph with captures as trailing inputs, out treedef, captured values)."""
    out_tree = []

    def flat(*xs):
        out = fn(*tree_unflatten(in_tree, xs))
        leaves, treedef = tree_flatten(out)
        out_tree.append(treedef)
        return [_leaf(x) for x in leaves]

    graph, captured = trace_to_graph_with_captures(flat, list(in_avals))
    return graph, out_tree[0], captured


def join_captures(traced: list[tuple[Graph, list]]) -> tuple[list[Graph], list]:
    """Gives every graph the union of all graphs' captured values as trailing inputs (same order)."""
    union, index = [], {}
    for _, caps in traced:
        for c in caps:
            if id(c) not in index:
                index[id(c)] = len(union)
                union.append(c)
    graphs = []
    for graph, caps in traced:
        n_declared = len(graph.invars) - len(caps)
        own = {index[id(c)]: v for c, v in zip(caps, graph.invars[n_declared:])}
        extra = [own.get(k) or Var(get_aval(union[k]).strip_weak()) for k in range(len(union))]
        graphs.append(Graph(graph.invars[:n_declared] + extra, graph.constvars, graph.consts, graph.eqns, graph.outvars))
    return graphs, union


def _strip(avals):
    return [a.strip_weak() for a in avals]


# ---- cond / switch ----------------------------------------------------------------

cond_p = register(Primitive("cond", multiple_results=True))
cond_p.def_traits(fusion="host")


@cond_p.def_abstract_eval
def _cond_abstract(index, *operands, branches):
    if index.shape != () or index.dtype != np.int32:
        raise ControlFlowError(f"cond: the branch index must be an int32 scalar, got {index}")
    for i, b in enumerate(branches):
        if _strip(b.in_avals) != _strip(operands):
            raise ControlFlowError(f"cond: branch {i} takes {_describe(b.in_avals)}, operands are {_describe(operands)}")
    return _strip(branches[0].out_avals)


@cond_p.def_impl
def _cond_impl(index, *operands, branches):
    i = int(np.clip(int(index), 0, len(branches) - 1))
    return [np.asarray(o) for o in eval_graph(branches[i], operands)]


def switch(index, branches: Sequence[Callable], *operands):
    """Applies branches[index](*operands); index is clamped into range, as in JAX."""
    return _switch("switch", index, branches, operands, [""] * len(branches))


def _switch(where: str, index, branches: Sequence[Callable], operands, roles: list[str]):
    """switch/cond; roles name the branches in errors ('true_fun ' for cond's branch 1)."""
    if not branches:
        raise ControlFlowError(f"{where}: needs at least one branch")
    leaves, tree = tree_flatten(operands)
    leaves = [_leaf(x) for x in leaves]
    avals = [get_aval(x).strip_weak() for x in leaves]
    traced = [trace_function(b, tree, avals) for b in branches]
    first_graph, first_tree, _ = traced[0]
    for i, (g, t, _) in enumerate(traced[1:], start=1):
        if t != first_tree or _strip(g.out_avals) != _strip(first_graph.out_avals):
            raise ControlFlowError(
                f"{where}: branch outputs differ: branch 0 ({roles[0]}{_name(branches[0])}) returns "
                f"{_describe(first_graph.out_avals)} with structure {first_tree}, branch {i} ({roles[i]}"
                f"{_name(branches[i])}) returns {_describe(g.out_avals)} with structure {t}"
            )
    graphs, captured = join_captures([(g, c) for g, _, c in traced])
    idx = _leaf(index)
    if get_aval(idx).strip_weak().shape != ():
        raise ControlFlowError(f"{where}: the index must be a scalar, got shape {get_aval(idx).strip_weak().shape}")
    if get_aval(idx).strip_weak().dtype != np.int32:
        idx = prims.convert.bind(idx, new_dtype=np.dtype(np.int32))
    if len(branches) > 1:
        idx = prims.max.bind(prims.min.bind(idx, np.int32(len(branches) - 1)), np.int32(0))
    outs = cond_p.bind(idx, *leaves, *captured, branches=tuple(graphs))
    return tree_unflatten(first_tree, outs)


def cond(pred, true_fun: Callable, false_fun: Callable, *operands):
    """true_fun(*operands) if pred else false_fun(*operands), with pred a boolean (or numeric) scalar."""
    p = _leaf(pred)
    if get_aval(p).strip_weak().shape != ():
        raise ControlFlowError(f"cond: pred must be a scalar, got shape {get_aval(p).strip_weak().shape}")
    if get_aval(p).strip_weak().dtype != np.bool_:
        p = prims.ne.bind(p, np.zeros((), get_aval(p).strip_weak().dtype))
    index = prims.convert.bind(p, new_dtype=np.dtype(np.int32))
    return _switch("cond", index, [false_fun, true_fun], operands, ["false_fun ", "true_fun "])


# ---- while_loop / fori_loop ----------------------------------------------------------

while_p = register(Primitive("while", multiple_results=True))
while_p.def_traits(fusion="host")


@while_p.def_abstract_eval
def _while_abstract(*operands, cond_graph, body_graph, n_carry):
    return _strip(operands[:n_carry])


@while_p.def_impl
def _while_impl(*operands, cond_graph, body_graph, n_carry):
    carry = list(operands[:n_carry])
    n_cond = len(cond_graph.invars) - n_carry
    cond_consts = operands[n_carry:n_carry + n_cond]
    body_consts = operands[n_carry + n_cond:]
    while bool(eval_graph(cond_graph, carry + list(cond_consts))[0]):
        carry = [np.asarray(x) for x in eval_graph(body_graph, carry + list(body_consts))]
    return carry


def _check_structure(where: str, fn, init_tree, out_tree):
    if out_tree != init_tree:
        raise ControlFlowError(f"{where}: {_name(fn)} must return a carry with the structure of the initial value "
                               f"{init_tree}, it returned {out_tree}")


def _promote_weak_carry(where: str, fn, leaves: list, weak: list[bool], init_tree, trace_carry) -> list:
    """Weakly typed initial carries (Python scalars, knp.zeros(3) without dtype=, ...) take the dtype
    the body gives them, as in JAX (its _promote_weak_typed_inputs).

    trace_carry(avals) -> (carry treedef, carry avals) of the body; the structure is checked
    first, so that a body returning another structure gets the ControlFlowError.
    """
    if not any(weak):
        return leaves
    weak = list(weak)
    # Repeated to a fixed point: a weak leaf the body passes on unchanged from another weak leaf (the last
    # accepted time beside the time, in an ODE solver) takes its new dtype only once that one has it. At
    # most one pass per leaf, since each pass that changes anything makes a weak leaf strong.
    for _ in range(len(leaves)):
        out_tree, out_avals = trace_carry([get_aval(x) if w else get_aval(x).strip_weak()
                                           for x, w in zip(leaves, weak)])
        _check_structure(where, fn, init_tree, out_tree)
        change = [w and o.shape == get_aval(x).shape and o.dtype != get_aval(x).dtype
                  for x, w, o in zip(leaves, weak, out_avals)]
        if not any(change):
            break
        leaves = [_to_carry_dtype(x, o.dtype) if c else x for x, c, o in zip(leaves, change, out_avals)]
        weak = [w and not c for w, c in zip(weak, change)]
    return leaves


def _to_carry_dtype(x, dtype):
    return prims.convert.bind(x, new_dtype=dtype) if isinstance(x, Tracer) else np.asarray(x, dtype)


def _is_weak(x) -> bool:
    return dtypes.is_python_scalar(x) or get_aval(x).weak_type


def _check_carry(where: str, fn, init_tree, init_avals, out_tree, out_avals):
    _check_structure(where, fn, init_tree, out_tree)
    for k, (a, b) in enumerate(zip(init_avals, out_avals)):
        if a.strip_weak() != b.strip_weak():
            raise ControlFlowError(f"{where}: {_name(fn)} changes carry leaf {k} from {a.strip_weak()} to "
                                   f"{b.strip_weak()}; the carry must keep its shape and dtype")


def while_loop(cond_fun: Callable, body_fun: Callable, init_val):
    """Repeats val = body_fun(val) while cond_fun(val); the carry keeps its shapes and dtypes."""
    leaves, tree = tree_flatten(init_val)
    args_tree = tree_flatten((init_val,))[1]
    weak = [_is_weak(x) for x in leaves]
    leaves = [_leaf(x) for x in leaves]
    def body_carry(avals):
        graph, out_tree, _ = trace_function(body_fun, args_tree, avals)
        return out_tree, graph.out_avals

    leaves = _promote_weak_carry("while_loop", body_fun, leaves, weak, tree, body_carry)
    avals = [get_aval(x).strip_weak() for x in leaves]
    cond_graph, cond_tree, cond_caps = trace_function(cond_fun, args_tree, avals)
    outs = cond_graph.out_avals
    if len(outs) != 1 or outs[0].shape != () or outs[0].dtype != np.bool_:
        raise ControlFlowError(f"while_loop: {_name(cond_fun)} must return a boolean scalar, it returned {_describe(outs)}")
    body_graph, body_tree, body_caps = trace_function(body_fun, args_tree, avals)
    _check_carry("while_loop", body_fun, tree, avals, body_tree, body_graph.out_avals)
    result = while_p.bind(*leaves, *cond_caps, *body_caps, cond_graph=cond_graph, body_graph=body_graph,
                          n_carry=len(leaves))
    return tree_unflatten(tree, result)


def fori_loop(lower, upper, body_fun: Callable, init_val):
    """for i in range(lower, upper): val = body_fun(i, val). Static bounds give a (differentiable) scan."""
    static = not isinstance(lower, Tracer) and not isinstance(upper, Tracer)
    if static:
        lo, hi = int(lower), int(upper)

        def step(carry, _):
            i, val = carry
            return (i + np.int32(1), body_fun(i, val)), None

        (_, result), _ = scan(step, (np.int32(lo), init_val), None, length=max(hi - lo, 0))
        return result

    def cond_fn(carry):
        return carry[0] < carry[1]

    def body_fn(carry):
        i, hi, val = carry
        return i + 1, hi, body_fun(i, val)

    lo = prims.convert.bind(_leaf(lower), new_dtype=np.dtype(np.int32)) if get_aval(_leaf(lower)).strip_weak().dtype != np.int32 else _leaf(lower)
    hi = prims.convert.bind(_leaf(upper), new_dtype=np.dtype(np.int32)) if get_aval(_leaf(upper)).strip_weak().dtype != np.int32 else _leaf(upper)
    return while_loop(cond_fn, body_fn, (lo, hi, init_val))[2]


# ---- scan / map ----------------------------------------------------------------------

scan_p = register(Primitive("scan", multiple_results=True))
scan_p.def_traits(fusion="host")


@scan_p.def_abstract_eval
def _scan_abstract(*operands, body, length, reverse, n_carry, n_xs):
    carry = _strip(operands[:n_carry])
    ys = [ShapedArray((length,) + a.shape, a.dtype) for a in body.out_avals[n_carry:]]
    return carry + ys


@scan_p.def_impl
def _scan_impl(*operands, body, length, reverse, n_carry, n_xs):
    carry = [np.asarray(c) for c in operands[:n_carry]]
    xs = operands[n_carry:n_carry + n_xs]
    consts = list(operands[n_carry + n_xs:])
    y_avals = body.out_avals[n_carry:]
    ys = [np.zeros((length,) + a.shape, a.dtype) for a in y_avals]
    order = range(length - 1, -1, -1) if reverse else range(length)
    for i in order:
        outs = eval_graph(body, carry + [np.asarray(x)[i] for x in xs] + consts)
        carry = [np.asarray(c) for c in outs[:n_carry]]
        for y, o in zip(ys, outs[n_carry:]):
            y[i] = o
    return carry + ys


def scan(f: Callable, init, xs=None, length: int | None = None, reverse: bool = False):
    """(carry, ys): carry, y = f(carry, x) for each x in xs along the leading axis; ys stacked."""
    carry_leaves, carry_tree = tree_flatten(init)
    weak = [_is_weak(x) for x in carry_leaves]
    carry_leaves = [_leaf(x) for x in carry_leaves]
    x_leaves, x_tree = tree_flatten(xs)
    x_leaves = [_leaf(x) for x in x_leaves]
    lengths = {get_aval(x).strip_weak().shape[0] for x in x_leaves if get_aval(x).strip_weak().ndim > 0}
    if any(get_aval(x).strip_weak().ndim == 0 for x in x_leaves):
        raise ControlFlowError("scan: every leaf of xs needs a leading axis to scan over")
    if length is not None:
        lengths.add(int(length))
    if len(lengths) != 1:
        detail = sorted(lengths) if lengths else "none (no xs and no length)"
        raise ControlFlowError(f"scan of {_name(f)}: cannot tell the length: leading axes / length give {detail}")
    n = lengths.pop()
    x_avals = [ShapedArray(get_aval(x).shape[1:], get_aval(x).dtype, get_aval(x).weak_type) for x in x_leaves]
    n_carry = len(carry_leaves)
    pair_tree = tree_flatten((init, xs))[1]

    def body_fn(carry, x):
        out = f(carry, x)
        if not (isinstance(out, (tuple, list)) and len(out) == 2):
            raise ControlFlowError(f"scan: {_name(f)} must return a pair (carry, y)")
        return out

    def body_carry(avals):
        graph, out_tree, _ = trace_function(body_fn, pair_tree, avals + x_avals)
        return out_tree.children[0], graph.out_avals[:n_carry]

    carry_leaves = _promote_weak_carry("scan", f, carry_leaves, weak, carry_tree, body_carry)
    carry_avals = [get_aval(c).strip_weak() for c in carry_leaves]

    graph, out_tree, captured = trace_function(body_fn, pair_tree, carry_avals + x_avals)
    out_carry_tree, y_tree = out_tree.children
    _check_carry("scan", f, carry_tree, carry_avals, out_carry_tree, graph.out_avals[:n_carry])
    outs = scan_p.bind(*carry_leaves, *x_leaves, *captured, body=graph, length=n, reverse=bool(reverse),
                       n_carry=n_carry, n_xs=len(x_leaves))
    return tree_unflatten(carry_tree, outs[:n_carry]), tree_unflatten(y_tree, outs[n_carry:])


def map(f: Callable, xs):
    """[f(x) for x in xs] stacked, as a scan (one traced body, a loop in the module)."""
    _, ys = scan(lambda carry, x: (carry, f(x)), (), xs)
    return ys


# ----------------------------------------------------------------------------- rules
# JVP, transpose and batching rules of cond, while and scan.
#
# Reverse mode needs the JVP of a branch or loop body split in two: a primal
# part that also returns the residuals (primal values the tangent code uses)
# and a tangent part, linear in the tangents, that consumes them. The JVP
# rules below emit the two parts as separate cond/scan equations, so that
# kiln.transforms.linearize sees a non-linear equation and a linear one it can transpose.


def jvp_of_graph(graph: Graph, nonzero: list[bool]) -> Graph:
    """(inputs..., tangents of nonzero inputs...) -> (outputs..., tangents of float outputs...)."""
    avals = [a.strip_weak() for a in graph.in_avals]
    n = len(avals)
    t_avals = [tangent_aval(a) for a, nz in zip(avals, nonzero) if nz]

    def fn(*args):
        ts = iter(args[n:])
        tangents = [next(ts) if nz else Zero(tangent_aval(a)) for a, nz in zip(avals, nonzero)]
        po, to = jvp_flat(lambda *xs: eval_graph(graph, xs), list(args[:n]), tangents)
        return list(po) + [instantiate(t, tangent_aval(get_aval(p).strip_weak())) for t, p in zip(to, po) if has_tangent(get_aval(p).strip_weak())]

    return trace_to_graph(fn, avals + t_avals)


def _zeros_eqn(aval: ShapedArray) -> tuple[Equation, Var]:
    out = Var(aval)
    zero = Literal(np.zeros((), aval.dtype), ShapedArray((), aval.dtype))
    eqn = Equation(prims.broadcast_in_dim, [zero], [out], {"shape": aval.shape, "broadcast_dimensions": ()})
    return eqn, out


def split_jvp_graph(g: Graph, n_primal_in: int, n_primal_out: int, keep_as_inputs: set[int] = frozenset()):
    """Splits a JVP graph into (primal graph, tangent graph, residual vars).

    primal: primal inputs -> primal outputs + residuals.
    tangent: residuals + tangent inputs -> tangent outputs.
    Residuals are the non-linear values the tangent part reads. Primal inputs in
    keep_as_inputs are left out of the residual outputs (the caller passes them directly).
    """
    tangent_in = g.invars[n_primal_in:]
    linear, primal_eqns, linear_eqns = split_linear(g.eqns, {v.id for v in tangent_in})
    const_ids = {v.id for v in g.constvars}
    residuals: list[Var] = []
    seen: set[int] = set()

    def note(atom):
        if isinstance(atom, Var) and atom.id not in linear and atom.id not in const_ids and atom.id not in seen:
            seen.add(atom.id)
            residuals.append(atom)

    for eqn in linear_eqns:
        for a in eqn.invars:
            note(a)
    for a in g.outvars[n_primal_out:]:
        note(a)
    primal = Graph(g.invars[:n_primal_in], g.constvars, g.consts, primal_eqns,
                   list(g.outvars[:n_primal_out]) + [r for r in residuals if r.id not in keep_as_inputs])
    tangent = Graph(residuals + list(tangent_in), g.constvars, g.consts, linear_eqns, list(g.outvars[n_primal_out:]))
    return primal, tangent, residuals


# ---- cond --------------------------------------------------------------------------


def _cond_jvp(primals, tangents, *, branches):
    index, ops = primals[0], list(primals[1:])
    t_ops = tangents[1:]
    nonzero = [not isinstance(t, Zero) for t in t_ops]
    n_in, n_out = len(ops), len(branches[0].outvars)
    splits = [split_jvp_graph(jvp_of_graph(b, nonzero), n_in, n_out) for b in branches]
    slots = [(k, r) for k, (_, _, res) in enumerate(splits) for r in res]
    primal_graphs, tangent_graphs = [], []
    for k, (primal, tangent, res) in enumerate(splits):
        extra_eqns, outs = [], list(primal.outvars[:n_out])
        for owner, r in slots:
            if owner == k:
                outs.append(r)
            else:
                eqn, z = _zeros_eqn(r.aval)
                extra_eqns.append(eqn)
                outs.append(z)
        primal_graphs.append(Graph(primal.invars, primal.constvars, primal.consts, primal.eqns + extra_eqns, outs))
        mine = {r.id for r in res}
        res_inputs = [r if owner == k and r.id in mine else Var(r.aval) for owner, r in slots]
        tangent_graphs.append(Graph(res_inputs + tangent.invars[len(res):], tangent.constvars, tangent.consts,
                                    tangent.eqns, tangent.outvars))
    outs = cond_p.bind(index, *ops, branches=tuple(primal_graphs))
    primal_out, res_vals = outs[:n_out], outs[n_out:]
    nz_tangents = [t for t in t_ops if not isinstance(t, Zero)]
    t_out = iter(cond_p.bind(index, *res_vals, *nz_tangents, branches=tuple(tangent_graphs)))
    tangents_out = [next(t_out) if has_tangent(get_aval(p).strip_weak()) else Zero(tangent_aval(get_aval(p).strip_weak())) for p in primal_out]
    return primal_out, tangents_out


def _transposed_graph(graph: Graph, mask: list[bool], nonlinear_avals, ct_avals) -> Graph:
    transpose = transpose_graph(graph, mask)
    n = len(nonlinear_avals)
    return trace_to_graph(lambda *a: transpose(list(a[:n]), list(a[n:])), list(nonlinear_avals) + list(ct_avals))


def _cond_transpose(cts, index, *args, branches):
    mask = [isinstance(a, UndefinedPrimal) for a in args]
    nonlinear = [a for a in args if not isinstance(a, UndefinedPrimal)]
    nl_avals = [get_aval(x).strip_weak() for x in nonlinear]
    ct_avals = [get_aval(c).strip_weak() for c in cts]
    graphs = tuple(_transposed_graph(b, mask, nl_avals, ct_avals) for b in branches)
    out = iter(cond_p.bind(index, *nonlinear, *cts, branches=graphs))
    return [None] + [next(out) if m else None for m in mask]


def _cond_batch(values, dims, *, axis_size, branches):
    index, ops = values[0], values[1:]
    index_dim, op_dims = dims[0], dims[1:]
    if index_dim is not None:
        outs = [vmap_flat(lambda *xs, b=b: eval_graph(b, xs), list(ops), list(op_dims), None, axis_size)
                for b in branches]
        idx = move_batch_axis(index, index_dim, 0, axis_size)
        result = list(outs[0])
        for k in range(1, len(branches)):
            for j, o in enumerate(outs[k]):
                shape = get_aval(o).strip_weak().shape
                pick = prims.eq.bind(idx, prims.broadcast_in_dim.bind(np.int32(k), shape=(axis_size,), broadcast_dimensions=()))
                pick = prims.broadcast_in_dim.bind(pick, shape=shape, broadcast_dimensions=(0,))
                result[j] = prims.select.bind(pick, o, result[j])
        return result, [0] * len(result)
    avals = [_batched_aval(v, d) for v, d in zip(ops, op_dims)]
    graphs = tuple(trace_to_graph(lambda *xs, b=b: vmap_flat(lambda *a: eval_graph(b, a), list(xs), list(_zero_dims(op_dims)), None, axis_size), avals)
                   for b in branches)
    moved = [move_batch_axis(v, d, 0, axis_size) if d is not None else v for v, d in zip(ops, op_dims)]
    outs = cond_p.bind(index, *moved, branches=graphs)
    return outs, [0] * len(outs)


def _zero_dims(dims):
    return [None if d is None else 0 for d in dims]


def _batched_aval(value, dim) -> ShapedArray:
    a = get_aval(value).strip_weak()
    if dim is None or dim == 0:
        return a
    shape = list(a.shape)
    shape.insert(0, shape.pop(dim))
    return ShapedArray(tuple(shape), a.dtype)


# ---- while ----------------------------------------------------------------------------


def _reorder(graph: Graph, order: list[int]) -> Graph:
    return Graph([graph.invars[i] for i in order], graph.constvars, graph.consts, graph.eqns, graph.outvars)


def _with_unused_inputs(graph: Graph, position: int, avals) -> Graph:
    invars = list(graph.invars)
    invars[position:position] = [Var(a) for a in avals]
    return Graph(invars, graph.constvars, graph.consts, graph.eqns, graph.outvars)


def _while_jvp(primals, tangents, *, cond_graph, body_graph, n_carry):
    n_cond = len(cond_graph.invars) - n_carry
    carry, cconsts, bconsts = primals[:n_carry], primals[n_carry:n_carry + n_cond], primals[n_carry + n_cond:]
    t_carry = tangents[:n_carry]
    t_bconsts = tangents[n_carry + n_cond:]
    float_carry = [has_tangent(get_aval(c).strip_weak()) for c in carry]
    nz_bconst = [not isinstance(t, Zero) for t in t_bconsts]
    g = jvp_of_graph(body_graph, float_carry + nz_bconst)
    n_tc, n_b = sum(float_carry), len(bconsts)
    order = list(range(n_carry)) + list(range(n_carry + n_b, n_carry + n_b + n_tc)) \
        + list(range(n_carry, n_carry + n_b)) + list(range(n_carry + n_b + n_tc, len(g.invars)))
    body = _reorder(g, order)
    tc_avals = [tangent_aval(get_aval(c).strip_weak()) for c, f in zip(carry, float_carry) if f]
    cond = _with_unused_inputs(cond_graph, n_carry, tc_avals)
    tc_vals = [instantiate(t, tangent_aval(get_aval(c).strip_weak())) for t, c, f in zip(t_carry, carry, float_carry) if f]
    tb_vals = [t for t in t_bconsts if not isinstance(t, Zero)]
    outs = while_p.bind(*carry, *tc_vals, *cconsts, *bconsts, *tb_vals, cond_graph=cond, body_graph=body,
                        n_carry=n_carry + n_tc)
    primal_out, t_out = outs[:n_carry], iter(outs[n_carry:])
    return primal_out, [next(t_out) if f else Zero(tangent_aval(get_aval(p).strip_weak())) for p, f in zip(primal_out, float_carry)]


WHILE_NOT_TRANSPOSABLE = (
    "reverse-mode differentiation of while_loop is not supported: its trip count is only known when it runs. "
    "Use kiln.lax.fori_loop with static bounds or kiln.lax.scan, or forward mode (jvp, jacfwd)"
)


def _while_batch(values, dims, *, axis_size, cond_graph, body_graph, n_carry):
    n_cond = len(cond_graph.invars) - n_carry
    carry = [move_batch_axis(v, d, 0, axis_size) for v, d in zip(values[:n_carry], dims[:n_carry])]
    consts = list(values[n_carry:])
    const_dims = _zero_dims(dims[n_carry:])
    consts = [move_batch_axis(v, d, 0, axis_size) if d is not None else v for v, d in zip(consts, dims[n_carry:])]
    carry_dims = [0] * n_carry
    cdims, bdims = const_dims[:n_cond], const_dims[n_cond:]
    carry_avals = [get_aval(c).strip_weak() for c in carry]
    cond_avals = carry_avals + [get_aval(c).strip_weak() for c in consts[:n_cond]]

    def batched_pred(*xs):
        return vmap_flat(lambda *a: eval_graph(cond_graph, a), list(xs), carry_dims + cdims, None, axis_size)[0]

    def any_cond(*xs):
        return [prims.reduce_max.bind(batched_pred(*xs), axes=(0,))]

    def masked_body(*xs):
        c = list(xs[:n_carry])
        pred = batched_pred(*(c + list(xs[n_carry:n_carry + n_cond])))
        new = vmap_flat(lambda *a: eval_graph(body_graph, a), c + list(xs[n_carry + n_cond:]), carry_dims + bdims,
                        None, axis_size)
        out = []
        for old, nw in zip(c, new):
            mask = prims.broadcast_in_dim.bind(pred, shape=get_aval(old).strip_weak().shape, broadcast_dimensions=(0,))
            out.append(prims.select.bind(mask, nw, old))
        return out

    cond = trace_to_graph(any_cond, cond_avals)
    body = trace_to_graph(masked_body, carry_avals + [get_aval(c).strip_weak() for c in consts])
    # The masked body evaluates the predicate too, so it receives the cond's constants as well as its own.
    outs = while_p.bind(*carry, *consts[:n_cond], *consts, cond_graph=cond, body_graph=body, n_carry=n_carry)
    return outs, [0] * n_carry


# ---- scan -----------------------------------------------------------------------------


def _scan_jvp(primals, tangents, *, body, length, reverse, n_carry, n_xs):
    carry, xs, consts = primals[:n_carry], primals[n_carry:n_carry + n_xs], primals[n_carry + n_xs:]
    t_carry, t_xs, t_consts = tangents[:n_carry], tangents[n_carry:n_carry + n_xs], tangents[n_carry + n_xs:]
    n_c = len(consts)
    float_carry = [has_tangent(get_aval(c).strip_weak()) for c in carry]
    nz_xs = [not isinstance(t, Zero) for t in t_xs]
    nz_c = [not isinstance(t, Zero) for t in t_consts]
    g = jvp_of_graph(body, float_carry + nz_xs + nz_c)
    n_primal_in = n_carry + n_xs + n_c
    n_y = len(body.outvars) - n_carry
    const_inputs = {v.id for v in g.invars[n_carry + n_xs:n_primal_in]}
    primal, tangent, residuals = split_jvp_graph(g, n_primal_in, n_carry + n_y, keep_as_inputs=const_inputs)
    stacked = [r for r in residuals if r.id not in const_inputs]
    const_res = [r for r in residuals if r.id in const_inputs]
    outs = scan_p.bind(*carry, *xs, *consts, body=primal, length=length, reverse=reverse, n_carry=n_carry, n_xs=n_xs)
    carry_out, ys, res_stacked = outs[:n_carry], outs[n_carry:n_carry + n_y], outs[n_carry + n_y:]
    const_pos = {v.id: k for k, v in enumerate(g.invars[n_carry + n_xs:n_primal_in])}
    res_consts = [consts[const_pos[r.id]] for r in const_res]
    n_tc, n_tx = sum(float_carry), sum(nz_xs)
    # tangent graph invars: residuals (stacked + const, in `residuals` order) + t_carry + t_xs + t_consts
    res_vars = {r.id: v for r, v in zip(residuals, tangent.invars[:len(residuals)])}
    t_in = tangent.invars[len(residuals):]
    invars = t_in[:n_tc] + [res_vars[r.id] for r in stacked] + t_in[n_tc:n_tc + n_tx] \
        + [res_vars[r.id] for r in const_res] + t_in[n_tc + n_tx:]
    t_body = Graph(invars, tangent.constvars, tangent.consts, tangent.eqns, tangent.outvars)
    tc_vals = [instantiate(t, tangent_aval(get_aval(c).strip_weak())) for t, c, f in zip(t_carry, carry, float_carry) if f]
    tx_vals = [t for t in t_xs if not isinstance(t, Zero)]
    tcon_vals = [t for t in t_consts if not isinstance(t, Zero)]
    t_outs = scan_p.bind(*tc_vals, *res_stacked, *tx_vals, *res_consts, *tcon_vals, body=t_body, length=length,
                         reverse=reverse, n_carry=n_tc, n_xs=len(stacked) + n_tx)
    t_carry_out, t_ys = iter(t_outs[:n_tc]), iter(t_outs[n_tc:])
    primal_out = list(carry_out) + list(ys)
    t_out = [next(t_carry_out) if f else Zero(tangent_aval(get_aval(p).strip_weak())) for p, f in zip(carry_out, float_carry)]
    t_out += [next(t_ys) if has_tangent(get_aval(y).strip_weak()) else Zero(tangent_aval(get_aval(y).strip_weak())) for y in ys]
    return primal_out, t_out


def _scan_transpose(cts, *args, body, length, reverse, n_carry, n_xs):
    carry, xs, consts = args[:n_carry], args[n_carry:n_carry + n_xs], args[n_carry + n_xs:]
    mask = [True] * n_carry + [isinstance(x, UndefinedPrimal) for x in xs] + [isinstance(c, UndefinedPrimal) for c in consts]
    nl_xs = [x for x in xs if not isinstance(x, UndefinedPrimal)]
    nl_consts = [c for c in consts if not isinstance(c, UndefinedPrimal)]
    lin_consts = [c for c in consts if isinstance(c, UndefinedPrimal)]
    lin_xs = [x for x in xs if isinstance(x, UndefinedPrimal)]
    ct_carry, ct_ys = list(cts[:n_carry]), list(cts[n_carry:])
    transpose = transpose_graph(body, mask)
    n_nlx, n_lc = len(nl_xs), len(lin_consts)

    def body_t(*a):
        ct_c = list(a[:n_carry])
        acc = list(a[n_carry:n_carry + n_lc])
        rest = a[n_carry + n_lc:]
        x_rows, ct_y = list(rest[:n_nlx]), list(rest[n_nlx:n_nlx + len(ct_ys)])
        c_vals = list(rest[n_nlx + len(ct_ys):])
        lin_cts = transpose(x_rows + c_vals, ct_c + ct_y)
        new_ct_c = lin_cts[:n_carry]
        ct_x = lin_cts[n_carry:n_carry + len(lin_xs)]
        ct_lc = lin_cts[n_carry + len(lin_xs):]
        return new_ct_c + [prims.add.bind(a_, c_) for a_, c_ in zip(acc, ct_lc)] + ct_x

    acc0 = [np.zeros(c.aval.shape, c.aval.dtype) for c in lin_consts]
    avals = [_carry_aval(c) for c in carry] + [c.aval for c in lin_consts] \
        + [ShapedArray(get_aval(x).strip_weak().shape[1:], get_aval(x).strip_weak().dtype) for x in nl_xs] \
        + [ShapedArray(get_aval(c).strip_weak().shape[1:], get_aval(c).strip_weak().dtype) for c in ct_ys] + [get_aval(c).strip_weak() for c in nl_consts]
    graph = trace_to_graph(body_t, avals)
    outs = scan_p.bind(*ct_carry, *acc0, *nl_xs, *ct_ys, *nl_consts, body=graph, length=length, reverse=not reverse,
                       n_carry=n_carry + n_lc, n_xs=n_nlx + len(ct_ys))
    ct_init, ct_lin_consts, ct_lin_xs = outs[:n_carry], iter(outs[n_carry:n_carry + n_lc]), iter(outs[n_carry + n_lc:])
    # The body is linear in the whole carry; a carry that starts from a constant gets no cotangent.
    result = [ct if isinstance(c, UndefinedPrimal) else None for ct, c in zip(ct_init, carry)]
    result += [next(ct_lin_xs) if isinstance(x, UndefinedPrimal) else None for x in xs]
    result += [next(ct_lin_consts) if isinstance(c, UndefinedPrimal) else None for c in consts]
    return result


def _carry_aval(c) -> ShapedArray:
    return c.aval if isinstance(c, UndefinedPrimal) else get_aval(c).strip_weak()


def _scan_batch(values, dims, *, axis_size, body, length, reverse, n_carry, n_xs):
    carry = [move_batch_axis(v, d, 0, axis_size) for v, d in zip(values[:n_carry], dims[:n_carry])]
    xs = [move_batch_axis(v, d, 1, axis_size) if d is not None else v
          for v, d in zip(values[n_carry:n_carry + n_xs], dims[n_carry:n_carry + n_xs])]
    consts = [move_batch_axis(v, d, 0, axis_size) if d is not None else v
              for v, d in zip(values[n_carry + n_xs:], dims[n_carry + n_xs:])]
    in_dims = [0] * n_carry + _zero_dims(dims[n_carry:n_carry + n_xs]) + _zero_dims(dims[n_carry + n_xs:])
    avals = [get_aval(c).strip_weak() for c in carry] + [ShapedArray(get_aval(x).strip_weak().shape[1:], get_aval(x).strip_weak().dtype) for x in xs] \
        + [get_aval(c).strip_weak() for c in consts]
    graph = trace_to_graph(lambda *a: vmap_flat(lambda *b: eval_graph(body, b), list(a), in_dims, None, axis_size), avals)
    outs = scan_p.bind(*carry, *xs, *consts, body=graph, length=length, reverse=reverse, n_carry=n_carry, n_xs=n_xs)
    return outs, [0] * n_carry + [1] * (len(outs) - n_carry)


def _register_control_flow_rules() -> None:
    cond_p.jvp_rule = _cond_jvp
    cond_p.transpose_rule = _cond_transpose
    cond_p.batching_rule = _cond_batch
    while_p.jvp_rule = _while_jvp
    while_p.no_transpose_reason = WHILE_NOT_TRANSPOSABLE
    while_p.batching_rule = _while_batch
    scan_p.jvp_rule = _scan_jvp
    scan_p.transpose_rule = _scan_transpose
    scan_p.batching_rule = _scan_batch


_register_control_flow_rules()
