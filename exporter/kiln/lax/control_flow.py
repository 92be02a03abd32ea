"""Structured control flow: cond, switch, while_loop, fori_loop, scan, map.

Each is a primitive holding traced subgraphs, compiled into VM bytecode
(branches and loops) rather than unrolled in Python. Values of enclosing
traces that a branch or body closes over become extra trailing operands.
"""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from ..core import dtypes
from ..core.aval import ShapedArray
from ..core.errors import KilnError
from ..core.evaluate import eval_graph
from ..core.ir import Graph, Var
from ..core.primitive import Primitive, register
from ..core.pytree import tree_flatten, tree_unflatten
from ..core.trace import Tracer, get_aval, trace_to_graph_with_captures
from . import prims


class ControlFlowError(KilnError, TypeError):
    """Branches or loop bodies whose types do not fit together."""


def _leaf(x):
    """A control-flow operand: tracers stay, Python scalars take their weak dtype, others become arrays."""
    if isinstance(x, Tracer):
        return x
    if _is_python_scalar(x):
        return np.asarray(x, dtypes.python_scalar_dtype(x))
    arr = np.asarray(x)
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
cond_p.in_kernel = False


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
while_p.in_kernel = False


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


def _is_python_scalar(x) -> bool:
    return isinstance(x, (bool, int, float)) and not isinstance(x, np.generic)


def _check_structure(where: str, fn, init_tree, out_tree):
    if out_tree != init_tree:
        raise ControlFlowError(f"{where}: {_name(fn)} must return a carry with the structure of the initial value "
                               f"{init_tree}, it returned {out_tree}")


def _promote_weak_carry(where: str, fn, leaves: list, weak: list[bool], init_tree, trace_carry) -> list:
    """Initial carries given as Python scalars take the dtype the body gives them, as in JAX.

    trace_carry(avals) -> (carry treedef, carry avals) of the body; the structure is checked
    first, so that a body returning another structure gets the ControlFlowError.
    """
    if not any(weak):
        return leaves
    out_tree, out_avals = trace_carry([get_aval(x).strip_weak() for x in leaves])
    _check_structure(where, fn, init_tree, out_tree)
    return [np.asarray(x, o.dtype) if w and o.shape == () and o.dtype != get_aval(x).strip_weak().dtype else x
            for x, w, o in zip(leaves, weak, out_avals)]


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
    weak = [_is_python_scalar(x) for x in leaves]
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
scan_p.in_kernel = False


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
    weak = [_is_python_scalar(x) for x in carry_leaves]
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
    x_avals = [ShapedArray(get_aval(x).strip_weak().shape[1:], get_aval(x).strip_weak().dtype) for x in x_leaves]
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
