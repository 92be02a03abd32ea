"""Graph-to-graph cleanups before fusion: folding, simplification, CSE and DCE.

All passes keep the graph's inputs and output count; outputs may become
inputs, constants or literals when an equation simplifies away.
"""
from __future__ import annotations

import numpy as np

from ..core.ir import Equation, Graph, Literal, Var, subgraphs_of


def _is_literal_value(atom, value, splats: dict) -> bool:
    """atom is the scalar `value`, or a broadcast of it."""
    if isinstance(atom, Var):
        atom = splats.get(atom.id)
    return isinstance(atom, Literal) and atom.value.shape == () and atom.value.item() == value


def _same_type(a, out: Var) -> bool:
    return a.aval.shape == out.aval.shape and a.aval.dtype == out.aval.dtype


def _is_pure(eqn: Equation) -> bool:
    return eqn.primitive.in_kernel and not list(subgraphs_of(eqn))


def _simplify(eqn: Equation, ins: list, splats: dict):
    """An atom equal to the equation's single output, or None."""
    name = eqn.primitive.name
    out = eqn.outvars[0]
    is_int = out.aval.dtype.kind in "iu"
    if name == "mul":
        for a, b in ((ins[0], ins[1]), (ins[1], ins[0])):
            if _is_literal_value(b, 1, splats) and out.aval.dtype != np.bool_ and _same_type(a, out):
                return a
    if name == "add" and is_int:
        for a, b in ((ins[0], ins[1]), (ins[1], ins[0])):
            if _is_literal_value(b, 0, splats) and _same_type(a, out):
                return a
    if name == "sub" and is_int and _is_literal_value(ins[1], 0, splats) and _same_type(ins[0], out):
        return ins[0]
    if name == "div" and _is_literal_value(ins[1], 1, splats) and _same_type(ins[0], out):
        return ins[0]
    if name == "convert" and ins[0].aval.dtype == out.aval.dtype:
        return ins[0]
    if name == "reshape" and ins[0].aval.shape == out.aval.shape:
        return ins[0]
    if name == "transpose" and tuple(eqn.params["permutation"]) == tuple(range(out.aval.ndim)):
        return ins[0]
    if name == "broadcast_in_dim" and ins[0].aval.shape == out.aval.shape:
        return ins[0]
    if name == "select" and isinstance(ins[1], Var) and ins[1] is ins[2]:
        return ins[1]
    return None


def _fold(eqn: Equation, ins: list):
    """A Literal for a scalar equation over literals, or None."""
    if not _is_pure(eqn) or eqn.primitive.multiple_results or eqn.primitive.impl is None:
        return None
    if not ins or not all(isinstance(a, Literal) for a in ins) or eqn.outvars[0].aval.shape != ():
        return None
    value = np.asarray(eqn.primitive.impl(*[a.value for a in ins], **eqn.params))
    out = eqn.outvars[0].aval
    return Literal(value.astype(out.dtype), out)


def _cse_key(eqn: Equation, ins: list):
    if not _is_pure(eqn):
        return None
    operands = tuple(("v", a.id) if isinstance(a, Var) else ("l", repr(a.value.item()), str(a.aval.dtype)) for a in ins)
    params = tuple((k, repr(eqn.params[k])) for k in sorted(eqn.params))
    return eqn.primitive.name, operands, params


def simplify_and_cse(graph: Graph) -> Graph:
    """Constant folding of scalar ops, trivial simplifications and common subexpression elimination."""
    env: dict[int, object] = {}
    splats: dict[int, Literal] = {}
    seen: dict[tuple, list[Var]] = {}
    eqns = []

    def read(atom):
        return env.get(atom.id, atom) if isinstance(atom, Var) else atom

    for eqn in graph.eqns:
        ins = [read(a) for a in eqn.invars]
        if len(eqn.outvars) == 1:
            replacement = _fold(eqn, ins) or _simplify(eqn, ins, splats)
            if replacement is not None:
                env[eqn.outvars[0].id] = replacement
                continue
        key = _cse_key(eqn, ins)
        if key is not None and key in seen:
            for old, new in zip(eqn.outvars, seen[key]):
                env[old.id] = new
            continue
        if key is not None:
            seen[key] = eqn.outvars
        if eqn.primitive.name == "broadcast_in_dim" and isinstance(ins[0], Literal):
            splats[eqn.outvars[0].id] = ins[0]
        eqns.append(Equation(eqn.primitive, ins, eqn.outvars, eqn.params, eqn.source_info))
    outvars = [read(a) for a in graph.outvars]
    return Graph(graph.invars, graph.constvars, graph.consts, eqns, outvars, set(graph.effects))


def dead_code_elimination(graph: Graph) -> Graph:
    """Drops pure equations whose outputs are unused, and unused constants."""
    live = {a.id for a in graph.outvars if isinstance(a, Var)}
    kept = []
    for eqn in reversed(graph.eqns):
        if _is_pure(eqn) and not any(v.id in live for v in eqn.outvars):
            continue
        kept.append(eqn)
        live.update(a.id for a in eqn.invars if isinstance(a, Var))
    consts = [(v, c) for v, c in zip(graph.constvars, graph.consts) if v.id in live]
    return Graph(graph.invars, [v for v, _ in consts], [c for _, c in consts], kept[::-1], list(graph.outvars), set(graph.effects))


def _swapped_product_permutation(dims, lhs_ndim: int, rhs_ndim: int) -> tuple[int, ...]:
    """The permutation of dot_general(lhs, rhs)'s result (batch, lhs free, rhs free) that puts the rhs free
    dims before the lhs free dims: the result of dot_general(rhs, lhs) with the dimension numbers swapped."""
    (lc, rc), (lb, _) = dims
    nb = len(lb)
    nl = lhs_ndim - len(lc) - nb
    nr = rhs_ndim - len(rc) - nb
    return tuple(range(nb)) + tuple(nb + nl + j for j in range(nr)) + tuple(nb + i for i in range(nl))


def fold_product_transposes(graph: Graph) -> Graph:
    """transpose(dot_general(a, b)) whose permutation swaps the two free dim groups (batch dims kept first)
    becomes dot_general(b, a) with swapped dimension numbers, where the transpose is the product's only
    reader: (A B)^T = B^T A^T, so the kernel writes the transposed result in place of a product plus a
    transposed read. A reverse-mode weight gradient is such a pair (the transpose rule of `x @ w` with
    respect to w computes g^T x, then transposes it); the matmul reads either operand through strides."""
    uses: dict[int, int] = {}
    for eqn in graph.eqns:
        for a in eqn.invars:
            if isinstance(a, Var):
                uses[a.id] = uses.get(a.id, 0) + 1
    for a in graph.outvars:
        if isinstance(a, Var):
            uses[a.id] = uses.get(a.id, 0) + 1
    products = {eqn.outvars[0].id: eqn for eqn in graph.eqns if eqn.primitive.name == "dot_general"}
    eqns = []
    changed = False
    for eqn in graph.eqns:
        if eqn.primitive.name == "transpose" and isinstance(eqn.invars[0], Var):
            product = products.get(eqn.invars[0].id)
            if product is not None and uses.get(eqn.invars[0].id) == 1:
                lhs, rhs = product.invars
                dims = product.params["dimension_numbers"]
                perm = tuple(eqn.params["permutation"])
                if perm != tuple(range(len(perm))) and perm == _swapped_product_permutation(
                        dims, len(lhs.aval.shape), len(rhs.aval.shape)):
                    (lc, rc), (lb, rb) = dims
                    params = dict(product.params, dimension_numbers=((rc, lc), (rb, lb)))
                    eqns.append(Equation(product.primitive, [rhs, lhs], eqn.outvars, params, eqn.source_info))
                    changed = True
                    continue
        eqns.append(eqn)
    if not changed:
        return graph
    return Graph(graph.invars, graph.constvars, graph.consts, eqns, list(graph.outvars), set(graph.effects))


def optimize(graph: Graph) -> Graph:
    """The pass pipeline fusion expects: simplify/fold/CSE to a fixed point, transposed products folded,
    then DCE."""
    for _ in range(4):
        before = len(graph.eqns)
        graph = simplify_and_cse(graph)
        if len(graph.eqns) == before:
            break
    return dead_code_elimination(fold_product_transposes(graph))
