"""custom_jvp and custom_vjp: functions whose derivatives the user defines.

A call stages a primitive holding the function's traced graph and the
user's rule. Without differentiation the graph is used as is (the compiler
inlines it). Under jvp, custom_jvp_call applies the user's JVP rule. Under
reverse mode, custom_vjp_call runs the user's forward function and stages
`custom_lin`, a primitive linear in the tangents whose transpose is the
user's backward function.
"""
from __future__ import annotations

import functools
from typing import Callable

import numpy as np

from ..core.ad_util import Zero, instantiate
from ..core.aval import ShapedArray
from ..core.evaluate import eval_graph
from ..core.primitive import Primitive, lookup, register
from ..core.pytree import tree_flatten, tree_unflatten, treedef_flatten_up_to
from ..core.trace import get_aval, trace_to_graph, trace_to_graph_with_captures
from ..numpy._base import asarray
from .batching import move_batch_axis, vmap_flat
from .jvp import DifferentiationError, tangent_aval


class SymbolicZero:
    """JAX's symbolic zero, passed to custom rules defined with ``symbolic_zeros=True``: the tangent of an input
    that is not differentiated (custom_jvp), or the cotangent of an output nothing depends on (custom_vjp's bwd).
    It is not an array (kiln.numpy does not take it); ``.aval``, ``.shape``, ``.dtype``, ``.ndim`` and ``.size``
    describe the zero it stands for. A rule may return one where its result is zero."""

    def __init__(self, aval: ShapedArray):
        self.aval = aval

    def __repr__(self):
        return f"SymbolicZero({self.aval})"

    def __getattr__(self, name):
        if name in ("shape", "dtype", "ndim", "size", "weak_type"):
            return getattr(self.aval, name)
        raise AttributeError(f"SymbolicZero has no attribute {name}")

    @staticmethod
    def from_primal_value(value) -> "SymbolicZero":
        return SymbolicZero(tangent_aval(get_aval(asarray(value)).strip_weak()))


class CustomVJPPrimal:
    """What a custom_vjp's fwd receives for each argument leaf under ``defvjp(..., symbolic_zeros=True)``: the
    argument (``value``) and whether it is differentiated (``perturbed``; False: its cotangent is not used)."""

    __slots__ = ("value", "perturbed")

    def __init__(self, value, perturbed: bool):
        self.value, self.perturbed = value, perturbed

    def __repr__(self):
        return f"CustomVJPPrimal(value={self.value!r}, perturbed={self.perturbed})"


def _zero_array(aval):
    return np.zeros(aval.shape, aval.dtype)


def _rule_tangent(t, primal_aval):
    """A tangent a rule returned, as an array (a SymbolicZero or None is zeros of the primal's type)."""
    if t is None or isinstance(t, SymbolicZero):
        return asarray(_zero_array(primal_aval))
    return asarray(t)


def _trace_fun(fun, in_tree, leaves):
    out_tree = []

    def flat(*xs):
        out_leaves, treedef = tree_flatten(fun(*tree_unflatten(in_tree, xs)))
        out_tree.append(treedef)
        return [asarray(o) for o in out_leaves]

    # traced at the arguments' own avals, weak types included: a weakly typed argument gives a weakly typed result
    # as the function itself would (JAX keeps weak_type through custom_jvp/custom_vjp)
    graph, captured = trace_to_graph_with_captures(flat, [get_aval(x) for x in leaves])
    if captured:
        raise DifferentiationError(
            f"custom derivative function {getattr(fun, '__name__', fun)} closes over a value of an enclosing "
            "transformation; pass it as an argument instead"
        )
    return graph, out_tree[0]


def _batched_graph(graph, dims, axis_size):
    moved_dims = [None if d is None else 0 for d in dims]
    avals = []
    for a, d in zip(graph.in_avals, dims):
        avals.append(a if d is None else ShapedArray((axis_size,) + a.shape, a.dtype, weak_type=a.weak_type))
    return trace_to_graph(lambda *xs: vmap_flat(lambda *a: eval_graph(graph, a), list(xs), moved_dims, None, axis_size),
                          avals), moved_dims


def _move_to_front(values, dims, axis_size):
    return [v if d is None else move_batch_axis(v, d, 0, axis_size) for v, d in zip(values, dims)]


# ---- custom_jvp -----------------------------------------------------------------------

custom_jvp_call = register(Primitive("custom_jvp_call", multiple_results=True))
custom_jvp_call.call_graph_param = "fun_graph"
custom_jvp_call.def_traits(fusion="inlined")
custom_jvp_call.format_params = lambda params: f"[{params['name']}]"
custom_jvp_call.def_abstract_eval(lambda *avals, fun_graph, jvp_flat, name: fun_graph.out_avals)
custom_jvp_call.def_impl(lambda *args, fun_graph, jvp_flat, name: eval_graph(fun_graph, args))
custom_jvp_call.inline_rule = lambda *args, fun_graph, jvp_flat, name: eval_graph(fun_graph, args)


def _custom_jvp_rule(primals, tangents, *, fun_graph, jvp_flat, name):
    outs, t_outs = jvp_flat(list(primals), list(tangents))  # tangents may be Zero (symbolic_zeros rules see them)
    return list(outs), list(t_outs)


def _instantiated(tangents, primals):
    return [instantiate(t, tangent_aval(get_aval(p).strip_weak())) for t, p in zip(tangents, primals)]


def _example_zero(z: Zero, dim) -> Zero:
    """The symbolic zero of one mapped example of `z` (its batch axis, at `dim`, removed), as JAX's rules see
    it under vmap."""
    if dim is None:
        return z
    shape = z.aval.shape
    return Zero(ShapedArray(shape[:dim] + shape[dim + 1:], z.aval.dtype))


def _vmap_with_zeros(fn, values, dims, axis_size):
    """vmap_flat of fn over values where some are symbolic Zeros: the Zeros stay symbolic (each example's
    own, unbatched), only the others are mapped."""
    keep = [k for k, v in enumerate(values) if not isinstance(v, Zero)]
    zeros = {k: _example_zero(v, dims[k]) for k, v in enumerate(values) if isinstance(v, Zero)}

    def mapped(*live):
        it = iter(live)
        return fn(*[zeros[k] if k in zeros else next(it) for k in range(len(values))])

    return vmap_flat(mapped, [values[k] for k in keep], [dims[k] for k in keep], None, axis_size)


def _custom_jvp_batch(values, dims, *, axis_size, fun_graph, jvp_flat, name):
    graph, moved_dims = _batched_graph(fun_graph, dims, axis_size)
    n = len(values)

    def batched_jvp(primals, tangents):
        # an undifferentiated input's tangent stays a symbolic zero (of one example), as under JAX's vmap
        def flat(*a):
            outs, t_outs = jvp_flat(list(a[:n]), list(a[n:]))
            return list(outs) + list(t_outs)

        both = _vmap_with_zeros(flat, list(primals) + list(tangents), moved_dims + moved_dims, axis_size)
        half = len(both) // 2
        return both[:half], both[half:]

    outs = custom_jvp_call.bind(*_move_to_front(values, dims, axis_size), fun_graph=graph, jvp_flat=batched_jvp,
                                name=name)
    return outs, [0] * len(outs)


custom_jvp_call.jvp_rule = _custom_jvp_rule
custom_jvp_call.batching_rule = _custom_jvp_batch


def _split_nondiff(kind, name, args, nondiff_argnums):
    """JAX's nondiff_argnums: the arguments at those positions (any Python values, e.g. functions) are held
    fixed and passed to the rule first; the others are differentiated. Returns (the fixed arguments in
    order, the differentiated ones, merge: differentiated arguments -> the whole argument tuple)."""
    n = len(args)
    for i in nondiff_argnums:
        if not isinstance(i, int) or not -n <= i < n:
            raise TypeError(f"{kind} function {name}: nondiff_argnums entry {i!r} is not a position among its "
                            f"{n} arguments")
    fixed = {i % n: args[i] for i in nondiff_argnums}
    positions = sorted(fixed)

    def merge(diff):
        it = iter(diff)
        return tuple(fixed[i] if i in fixed else next(it) for i in range(n))

    return [fixed[i] for i in positions], [a for i, a in enumerate(args) if i not in fixed], merge


def _named(fn, name):
    fn.__name__ = fn.__qualname__ = name
    return fn


class custom_jvp:
    """A function with a user-defined JVP rule: `f.defjvp(lambda primals, tangents: (out, tangent_out))`."""

    def __init__(self, fun: Callable, nondiff_argnums: tuple = ()):
        functools.update_wrapper(self, fun, updated=())  # not fun's __dict__ (a Jitted's holds its fn)
        self.fun = fun
        self.jvp = None
        self.symbolic_zeros = False
        self.nondiff_argnums = tuple(nondiff_argnums)

    def defjvp(self, jvp: Callable, symbolic_zeros: bool = False) -> Callable:
        """Sets the rule. With symbolic_zeros, the rule gets a SymbolicZero as the tangent of each input not
        differentiated (under vmap too: one example's), and may return SymbolicZero (or None) for a zero tangent output."""
        self.jvp = jvp
        self.symbolic_zeros = bool(symbolic_zeros)
        return jvp

    def __call__(self, *args):
        name = getattr(self.fun, "__name__", "custom_jvp")
        if self.jvp is None:
            raise DifferentiationError(f"custom_jvp function {name} has no JVP rule: call {name}.defjvp(rule) first")
        if self.nondiff_argnums:  # jvp(*fixed, primals, tangents) over the other arguments
            fixed, diff, merge = _split_nondiff("custom_jvp", name, args, self.nondiff_argnums)
            inner = custom_jvp(_named(lambda *d: self.fun(*merge(d)), name))
            inner.defjvp(lambda primals, tangents: self.jvp(*fixed, primals, tangents), self.symbolic_zeros)
            return inner(*diff)
        leaves, in_tree = tree_flatten(args)
        leaves = [asarray(x) for x in leaves]
        graph, out_tree = _trace_fun(self.fun, in_tree, leaves)
        rule, symbolic = self.jvp, self.symbolic_zeros

        def jvp_flat(primals, tangents):
            if symbolic:
                tangents = [SymbolicZero(t.aval) if isinstance(t, Zero) else t for t in tangents]
            else:
                tangents = _instantiated(tangents, primals)
            out, t_out = rule(tree_unflatten(in_tree, primals), tree_unflatten(in_tree, tangents))
            outs = [asarray(o) for o in treedef_flatten_up_to(out_tree, out)]
            t_outs = [_rule_tangent(t, get_aval(o).strip_weak()) for t, o in
                      zip(treedef_flatten_up_to(out_tree, t_out), outs)]
            for k, (o, t) in enumerate(zip(outs, t_outs)):
                if get_aval(o).strip_weak().shape != get_aval(t).strip_weak().shape:
                    raise DifferentiationError(f"custom_jvp rule of {name}: tangent output {k} has shape "
                                               f"{get_aval(t).strip_weak().shape}, the primal output has {get_aval(o).strip_weak().shape}")
            return outs, t_outs

        outs = custom_jvp_call.bind(*leaves, fun_graph=graph, jvp_flat=jvp_flat, name=name)
        return tree_unflatten(out_tree, outs)


# ---- custom_vjp -----------------------------------------------------------------------

custom_vjp_call = register(Primitive("custom_vjp_call", multiple_results=True))
custom_vjp_call.call_graph_param = "fun_graph"
custom_vjp_call.def_traits(fusion="inlined")
custom_vjp_call.format_params = lambda params: f"[{params['name']}]"
custom_vjp_call.def_abstract_eval(lambda *avals, fun_graph, fwd_flat, bwd_flat, name: fun_graph.out_avals)
custom_vjp_call.def_impl(lambda *args, fun_graph, fwd_flat, bwd_flat, name: eval_graph(fun_graph, args))
custom_vjp_call.inline_rule = lambda *args, fun_graph, fwd_flat, bwd_flat, name: eval_graph(fun_graph, args)

custom_lin = register(Primitive("custom_lin", multiple_results=True))
custom_lin.def_traits(fusion="internal")  # only inside linearize: transposed away before compiling


@custom_lin.def_abstract_eval
def _custom_lin_abstract(*avals, n_res, bwd_flat, out_avals, name):
    return list(out_avals)


def _forward_mode_unsupported(*args, name, **params):
    raise DifferentiationError(
        f"forward-mode differentiation (jvp, jacfwd) of custom_vjp function {name} is not supported; "
        "use reverse mode (grad, vjp, jacrev), or define it with custom_jvp"
    )


custom_lin.def_impl(_forward_mode_unsupported)
custom_lin.batching_rule = lambda values, dims, axis_size, **params: _forward_mode_unsupported(**params)


def _custom_lin_transpose(cts, *args, n_res, bwd_flat, out_avals, name):
    residuals = list(args[:n_res])
    cts = [Zero(a) if c is None else c for c, a in zip(cts, out_avals)]  # bwd_flat decides what a Zero becomes
    grads = bwd_flat(residuals, cts)
    return [None] * n_res + list(grads)


custom_lin.transpose_rule = _custom_lin_transpose
custom_lin.symbolic_zero_cotangents = True  # backward_pass passes Zero for the cotangent of an unused output


def _custom_vjp_jvp(primals, tangents, *, fun_graph, fwd_flat, bwd_flat, name):
    outs, residuals = fwd_flat(list(primals), [not isinstance(t, Zero) for t in tangents])
    tangents = [instantiate(t, tangent_aval(get_aval(p).strip_weak())) for t, p in zip(tangents, primals)]
    out_avals = tuple(tangent_aval(get_aval(o).strip_weak()) for o in outs)
    t_outs = custom_lin.bind(*residuals, *tangents, n_res=len(residuals), bwd_flat=bwd_flat, out_avals=out_avals,
                             name=name)
    return list(outs), list(t_outs)


def _custom_vjp_batch(values, dims, *, axis_size, fun_graph, fwd_flat, bwd_flat, name):
    graph, moved_dims = _batched_graph(fun_graph, dims, axis_size)

    def batched_fwd(primals, perturbed):
        n_out = []

        def flat(*a):
            outs, res = fwd_flat(list(a), perturbed)
            n_out.append(len(outs))
            return list(outs) + list(res)

        both = vmap_flat(flat, list(primals), moved_dims, None, axis_size)
        return both[:n_out[0]], both[n_out[0]:]

    def batched_bwd(residuals, cts):
        n_res = len(residuals)
        # the cotangent of an output nothing depends on stays a symbolic zero (of one example), as under JAX's vmap
        grads = _vmap_with_zeros(lambda *a: bwd_flat(list(a[:n_res]), list(a[n_res:])), list(residuals) + list(cts),
                                 [0] * (n_res + len(cts)), axis_size)
        # An argument not mapped (moved_dims None: shared by every example) gets the sum of the examples'
        # cotangents, as the transpose of its broadcast; each example's cotangent would be the wrong shape.
        return [lookup("reduce_sum").bind(g, axes=(0,)) if d is None else g for g, d in zip(grads, moved_dims)]

    outs = custom_vjp_call.bind(*_move_to_front(values, dims, axis_size), fun_graph=graph, fwd_flat=batched_fwd,
                                bwd_flat=batched_bwd, name=name)
    return outs, [0] * len(outs)


custom_vjp_call.jvp_rule = _custom_vjp_jvp
custom_vjp_call.batching_rule = _custom_vjp_batch


class custom_vjp:
    """A function with user-defined reverse mode: `f.defvjp(fwd, bwd)`.

    fwd(*args) -> (output, residuals); bwd(residuals, output_cotangent) -> a tuple
    with one cotangent per argument.
    """

    def __init__(self, fun: Callable, nondiff_argnums: tuple = ()):
        functools.update_wrapper(self, fun, updated=())  # not fun's __dict__ (a Jitted's holds its fn)
        self.fun = fun
        self.fwd = self.bwd = None
        self.symbolic_zeros = False
        self.nondiff_argnums = tuple(nondiff_argnums)

    def defvjp(self, fwd: Callable, bwd: Callable, symbolic_zeros: bool = False, optimize_remat: bool = False) -> None:
        """Sets the rules. With symbolic_zeros (JAX's mode), fwd receives each argument leaf as a
        CustomVJPPrimal(value, perturbed) (perturbed False: not differentiated; custom_vjp_primal_tree_values
        strips them), and bwd receives a SymbolicZero as the cotangent of each output nothing depends on
        (under vmap too: one example's); bwd may return None or a SymbolicZero for a zero cotangent. optimize_remat is accepted
        (kiln does not rematerialize)."""
        self.fwd, self.bwd = fwd, bwd
        self.symbolic_zeros = bool(symbolic_zeros)

    def __call__(self, *args):
        name = getattr(self.fun, "__name__", "custom_vjp")
        if self.fwd is None:
            raise DifferentiationError(f"custom_vjp function {name} has no rules: call {name}.defvjp(fwd, bwd) first")
        if self.nondiff_argnums:  # fwd(*args); bwd(*fixed, residuals, ct) -> one cotangent per other argument
            fixed, diff, merge = _split_nondiff("custom_vjp", name, args, self.nondiff_argnums)
            inner = custom_vjp(_named(lambda *d: self.fun(*merge(d)), name))
            inner.defvjp(lambda *d: self.fwd(*merge(d)), lambda res, ct: self.bwd(*fixed, res, ct),
                         self.symbolic_zeros)
            return inner(*diff)
        leaves, in_tree = tree_flatten(args)
        leaves = [asarray(x) for x in leaves]
        graph, out_tree = _trace_fun(self.fun, in_tree, leaves)
        fwd, bwd, symbolic = self.fwd, self.bwd, self.symbolic_zeros
        res_tree = []
        in_avals = [get_aval(x).strip_weak() for x in leaves]

        def fwd_flat(primals, perturbed):
            if symbolic:
                primals = [CustomVJPPrimal(p, bool(d)) for p, d in zip(primals, perturbed)]
            out, res = fwd(*tree_unflatten(in_tree, primals))
            res_leaves, treedef = tree_flatten(res)
            res_tree.append(treedef)
            return [asarray(o) for o in treedef_flatten_up_to(out_tree, out)], [asarray(r) for r in res_leaves]

        def bwd_flat(residuals, cts):
            if symbolic:
                cts = [SymbolicZero(c.aval) if isinstance(c, Zero) else c for c in cts]
            else:
                cts = [instantiate(c, c.aval) if isinstance(c, Zero) else c for c in cts]
            grads = bwd(tree_unflatten(res_tree[-1], residuals), tree_unflatten(out_tree, cts))
            if not isinstance(grads, tuple) or len(grads) != len(args):
                raise DifferentiationError(f"custom_vjp bwd of {name} must return a tuple with one cotangent per "
                                           f"argument ({len(args)}), got {type(grads).__name__}")
            flat = treedef_flatten_up_to(in_tree, grads)
            out = []
            for k, (g, a) in enumerate(zip(flat, in_avals)):
                if g is None or isinstance(g, SymbolicZero):
                    out.append(np.zeros(a.shape, a.dtype))
                    continue
                g = asarray(g)
                if get_aval(g).strip_weak().shape != a.shape:
                    raise DifferentiationError(f"custom_vjp bwd of {name}: cotangent {k} has shape {get_aval(g).strip_weak().shape}, "
                                               f"the argument has {a.shape}")
                out.append(g)
            return out

        outs = custom_vjp_call.bind(*leaves, fun_graph=graph, fwd_flat=fwd_flat, bwd_flat=bwd_flat, name=name)
        return tree_unflatten(out_tree, outs)
