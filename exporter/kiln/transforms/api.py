"""The user-facing transformations: grad, value_and_grad, jvp, vjp, jacfwd, jacrev (jacobian), hessian, vmap.

As in JAX, keyword arguments of a call to grad(f), value_and_grad(f), jacfwd(f), jacrev(f) and hessian(f) are
passed to f and not differentiated."""
from __future__ import annotations

import functools
from typing import Callable, Sequence

import numpy as np

from ..core import dtypes
from ..core.array import as_array, as_arrays
from ..core.ad_util import instantiate, zeros_like_aval
from ..core.trace import get_aval
from ..core.pytree import tree_flatten, tree_unflatten, treedef_flatten_up_to
from ..lax import prims
from ..numpy import reshape, transpose
from ..numpy._base import asarray, convert_weak, weak_float_dtype
from .batching import BatchingError, check_axis_sizes, vmap_flat
from .jvp import DifferentiationError, is_differentiable, jvp_flat, tangent_aval
from .linearize import vjp_flat


def _wraps(fn):
    """functools.wraps without copying fn's __dict__ (a Jitted's __dict__ holds its function and caches)."""
    return functools.wraps(fn, updated=())


def _function_of_arrays(transform):
    """A transformation returning a function, whose results (eager) become kiln arrays."""

    @functools.wraps(transform)
    def make(*args, **kwargs):
        transformed = transform(*args, **kwargs)

        @_wraps(transformed)
        def call(*call_args, **call_kwargs):
            return as_arrays(transformed(*call_args, **call_kwargs))

        return call

    return make


def _name(fn) -> str:
    return getattr(fn, "__name__", type(fn).__name__)


def _argnums(argnums) -> tuple[int, ...]:
    return (argnums,) if isinstance(argnums, int) else tuple(argnums)


def _with_kwargs(fn, kwargs: dict):
    """fn with the call's keyword arguments bound (they are not differentiated); keeps fn's name for messages."""
    if not kwargs:
        return fn
    bound = functools.partial(fn, **kwargs)
    bound.__name__ = _name(fn)
    return bound


def _split_aux(where: str, fn, out):
    """(value, aux) of a has_aux function's output, or a TypeError naming fn."""
    if not (isinstance(out, (tuple, list)) and len(out) == 2):
        raise TypeError(f"{where} of {_name(fn)} with has_aux=True: fn must return a pair (output, aux); got "
                        f"{type(out).__name__}")
    return out[0], out[1]


def _select_args(fn, args, nums, where):
    """Leaves of the arguments at nums, and fn as a function of those leaves."""
    for i in nums:
        if i >= len(args):
            raise TypeError(f"{where} of {_name(fn)}: argnums {i} but only {len(args)} positional arguments given")
    chosen = tuple(args[i] for i in nums)
    leaves, tree = tree_flatten(chosen)
    leaves = [_differentiated_leaf(x) for x in leaves]

    def call(*xs):
        full = list(args)
        for i, v in zip(nums, tree_unflatten(tree, xs)):
            full[i] = v
        return fn(*full)

    return leaves, tree, call


def _differentiated_leaf(x):
    """An argument leaf as an array; a Python float is weakly typed (numpy's float64 eagerly, float32
    traced), so grad(f)(2.0) is a weak value of that dtype as in JAX."""
    if isinstance(x, float):
        return convert_weak(np.asarray(x), weak_float_dtype())
    return asarray(x)


def _check_float_inputs(where: str, fn, leaves, what: str) -> None:
    """A DifferentiationError naming fn and the leaf when a leaf to differentiate is not floating-point."""
    for k, leaf in enumerate(leaves):
        dtype = get_aval(leaf).dtype
        if not is_differentiable(get_aval(leaf)):
            hint = "close over them" if where in ("jvp", "vjp") else "leave them out of argnums"
            raise DifferentiationError(
                f"{where} of {_name(fn)}: {what.format(k=k)} has dtype {dtype}; derivatives are only defined for "
                f"floating-point inputs (for integer or bool arguments, {hint})"
            )


def stop_gradient(x):
    """x with derivatives stopped: every transformation treats it as a constant."""
    leaves, treedef = tree_flatten(x)
    return tree_unflatten(treedef, [prims.stop_gradient.bind(asarray(v)) for v in leaves])


@_function_of_arrays
def _check_real(where: str, fn, holomorphic: bool, allow_int: bool) -> None:
    """JAX's holomorphic= and allow_int= flags: kiln has no complex dtypes and no float0, so both must be False."""
    if holomorphic:
        raise DifferentiationError(f"{where} of {_name(fn)}: holomorphic=True needs complex inputs; kiln has no "
                                   "complex dtypes")
    if allow_int:
        raise DifferentiationError(f"{where} of {_name(fn)}: allow_int=True is not supported (JAX's float0 "
                                   "gradients of integer inputs); leave integer arguments out of argnums")


def value_and_grad(fn: Callable, argnums=0, has_aux: bool = False, holomorphic: bool = False,
                   allow_int: bool = False) -> Callable:
    """(fn(*args), gradient of fn with respect to the arguments at argnums); fn returns a float scalar."""
    _check_real("grad", fn, holomorphic, allow_int)
    nums = _argnums(argnums)

    @_wraps(fn)
    def wrapped(*args, **kwargs):
        leaves, tree, call = _select_args(_with_kwargs(fn, kwargs), args, nums, "grad")
        _check_float_inputs("grad", fn, leaves, f"input leaf {{k}} of argnums {argnums}")
        aux_tree = []

        def flat_fn(*xs):
            out = call(*xs)
            aux_leaves = []
            if has_aux:
                out, aux = _split_aux("grad", fn, out)
                aux_leaves, aux_def = tree_flatten(aux)
                aux_tree.append(aux_def)
            out = asarray(out)
            a = get_aval(out)
            if a.shape != ():
                raise DifferentiationError(
                    f"grad of {_name(fn)}: fn must return a scalar, it returned shape {a.shape}; "
                    "use jacrev or vjp for non-scalar outputs"
                )
            if not dtypes.is_float(a.dtype):  # bfloat16 included
                raise DifferentiationError(f"grad of {_name(fn)}: fn returned dtype {a.dtype}; it must be floating-point")
            return ([out], aux_leaves) if has_aux else [out]

        (value,), aux, vjp_fn = vjp_flat(flat_fn, leaves, has_aux=has_aux)
        grads = tree_unflatten(tree, vjp_fn([np.ones((), get_aval(value).dtype)]))
        g = grads[0] if isinstance(argnums, int) else grads
        if has_aux:
            return (value, tree_unflatten(aux_tree[-1], aux)), g
        return value, g

    return wrapped


@_function_of_arrays
def grad(fn: Callable, argnums=0, has_aux: bool = False, holomorphic: bool = False,
         allow_int: bool = False) -> Callable:
    """The gradient of a scalar-valued fn with respect to the arguments at argnums."""
    value_and_grad_fn = value_and_grad(fn, argnums, has_aux, holomorphic, allow_int)

    @_wraps(fn)
    def wrapped(*args, **kwargs):
        value, g = value_and_grad_fn(*args, **kwargs)
        return (g, value[1]) if has_aux else g

    return wrapped


def _flat_output(fn, in_tree, out_tree: list):
    def flat_fn(*xs):
        leaves, treedef = tree_flatten(fn(*tree_unflatten(in_tree, xs)))
        out_tree.append(treedef)
        return [asarray(x) for x in leaves]

    return flat_fn


def _weak_tangent(t, p):
    """A weakly typed floating tangent (a Python number) takes its primal's tangent dtype and stays weak, as
    JAX's jvp gives it (jvp(f, (x,), (1.0,)) with a float32 x: a float32 tangent, not float64)."""
    ta, want = get_aval(t), tangent_aval(get_aval(p))
    if ta.weak_type and ta.dtype != want.dtype and dtypes.is_inexact(ta.dtype) and dtypes.is_inexact(want.dtype):
        return convert_weak(t, want.dtype)
    return t


def jvp(fn: Callable, primals: Sequence, tangents: Sequence, has_aux: bool = False):
    """(fn(*primals), the derivative of fn at primals along tangents); with has_aux=True fn returns
    (output, aux) and the result is (output, tangent, aux)."""
    if has_aux:
        def with_aux(*args):
            return _split_aux("jvp", fn, fn(*args))

        with_aux.__name__ = _name(fn)
        (out, aux), (tangent, _) = jvp(with_aux, primals, tangents)
        return out, tangent, aux
    p_leaves, p_tree = tree_flatten(tuple(primals))
    try:
        t_leaves = treedef_flatten_up_to(p_tree, tuple(tangents))
    except ValueError as e:
        raise ValueError(f"jvp of {_name(fn)}: tangents do not match primals: {e}") from None
    p_leaves = [asarray(p) for p in p_leaves]
    t_leaves = [_weak_tangent(asarray(t), p) for t, p in zip(t_leaves, p_leaves)]
    _check_float_inputs("jvp", fn, p_leaves, "primal leaf {k}")
    for k, (p, t) in enumerate(zip(p_leaves, t_leaves)):
        if get_aval(p).shape != get_aval(t).shape:
            raise ValueError(f"jvp of {_name(fn)}: tangent leaf {k} has shape {get_aval(t).shape}, its primal {get_aval(p).shape}")
        want = tangent_aval(get_aval(p)).dtype
        if get_aval(t).dtype != want:  # JAX's TypeError (a Python float took the primal's dtype above)
            raise TypeError(f"jvp of {_name(fn)}: tangent leaf {k} has dtype {get_aval(t).dtype}, but its primal of dtype "
                            f"{get_aval(p).dtype} takes tangents of dtype {want}: primal and tangent dtypes must "
                            "match, as in jax.jvp")
    out_tree: list = []
    po, to = jvp_flat(_flat_output(fn, p_tree, out_tree), p_leaves, t_leaves)
    to = [instantiate(t, tangent_aval(get_aval(p))) for t, p in zip(to, po)]
    return as_arrays((tree_unflatten(out_tree[-1], po), tree_unflatten(out_tree[-1], to)))


def vjp(fn: Callable, *primals, has_aux: bool = False):
    """(fn(*primals), vjp_fn[, aux]); vjp_fn(cotangent like the output) gives a tuple like primals."""
    p_leaves, p_tree = tree_flatten(tuple(primals))
    p_leaves = [asarray(p) for p in p_leaves]
    _check_float_inputs("vjp", fn, p_leaves, "primal leaf {k}")
    out_tree: list = []
    aux_tree: list = []

    def flat_fn(*xs):
        out = fn(*tree_unflatten(p_tree, xs))
        if has_aux:
            out, aux = _split_aux("vjp", fn, out)
            aux_leaves, aux_def = tree_flatten(aux)
            aux_tree.append(aux_def)
        leaves, treedef = tree_flatten(out)
        out_tree.append(treedef)
        leaves = [asarray(x) for x in leaves]
        return (leaves, aux_leaves) if has_aux else leaves

    outs, aux, flat_vjp = vjp_flat(flat_fn, p_leaves, has_aux=has_aux)
    treedef = out_tree[-1]

    def vjp_fn(cotangent):
        cts = [asarray(c) for c in treedef_flatten_up_to(treedef, cotangent)]
        grads = flat_vjp(cts)
        return as_arrays(tree_unflatten(p_tree, [zeros_like_aval(get_aval(p)) if g is None else g
                                                 for g, p in zip(grads, p_leaves)]))

    primal_out = as_arrays(tree_unflatten(treedef, outs))
    if has_aux:
        return primal_out, vjp_fn, as_arrays(tree_unflatten(aux_tree[-1], aux))
    return primal_out, vjp_fn


def _axes_per_leaf(axes, args, where) -> list:
    """in_axes (int, None, or a tuple with one entry per argument, itself a tree) per argument leaf."""
    if axes is None or isinstance(axes, int):
        return [axes] * len(tree_flatten(tuple(args))[0])
    if isinstance(axes, list):
        axes = tuple(axes)
    if not isinstance(axes, tuple) or len(axes) != len(args):
        raise BatchingError(f"{where}: in_axes must be an int, None, or a tuple with one entry per argument "
                            f"({len(args)} arguments)")
    dims = []
    for arg, ax in zip(args, axes):
        n = len(tree_flatten(arg)[0])
        if ax is None or isinstance(ax, int):
            dims += [ax] * n
        else:
            dims += treedef_flatten_up_to(tree_flatten(arg)[1], ax)
    return dims


def _leaf_names(args) -> list[str]:
    """'argument i' (or 'argument i, leaf j' when it is a tree) for every leaf of args."""
    names = []
    for i, arg in enumerate(args):
        leaves, treedef = tree_flatten(arg)
        single = treedef.kind == "leaf"
        names += [f"argument {i}" if single else f"argument {i}, leaf {j}" for j in range(len(leaves))]
    return names


def _check_axis(where: str, what: str, axis, ndim: int, owner: str, shape) -> int:
    """axis normalized into [0, ndim); a BatchingError naming the owner when it is not an int in range."""
    if isinstance(axis, bool) or not isinstance(axis, (int, np.integer)):
        raise BatchingError(f"{where}: {what} for {owner} must be an int or None, got {axis!r}")
    if ndim == 0:
        raise BatchingError(f"{where}: {what} {axis} is out of range for {owner}, a 0-d value (ndim 0) that has no "
                            "axis to map over; give None for it")
    if not -ndim <= axis < ndim:
        raise BatchingError(f"{where}: {what} {axis} is out of range for {owner} of shape {tuple(shape)} "
                            f"(ndim {ndim}; valid axes are {-ndim}..{ndim - 1})")
    return int(axis) % ndim


@_function_of_arrays
def vmap(fn: Callable, in_axes=0, out_axes=0, axis_name=None, axis_size: int | None = None,
         spmd_axis_name=None) -> Callable:
    """fn mapped over an axis of its arguments; in_axes/out_axes are ints, None, or trees of them.

    axis_size gives the size where no argument is mapped (every in_axes None) and is checked otherwise.
    axis_name names the mapped axis for kiln.lax's collectives (psum, pmean, pmax, pmin, axis_index, all_gather,
    ...) called inside fn; spmd_axis_name is accepted for JAX code and unused."""

    @_wraps(fn)
    def wrapped(*args):
        where = f"vmap of {_name(fn)}"
        raw, treedef = tree_flatten(tuple(args))
        leaves = [asarray(x) for x in raw]
        dims = _axes_per_leaf(in_axes, args, where)
        names = _leaf_names(args)
        dims = [None if d is None else _check_axis(where, "in_axes", d, get_aval(x).ndim, name, get_aval(x).shape)
                for d, x, name in zip(dims, leaves, names)]
        if axis_size is not None and all(d is None for d in dims):
            size = int(axis_size)
        else:
            size = check_axis_sizes(_name(fn), leaves, dims)
            if axis_size is not None and int(axis_size) != size:
                raise BatchingError(f"{where}: axis_size {axis_size} differs from the mapped axes' size {size}")
        out_tree: list = []
        flat_fn = _flat_output(fn, treedef, out_tree)
        # unmapped Python numbers reach fn as they are, so they stay weak (float32 with float32), as in JAX
        kept = {i: x for i, (x, d) in enumerate(zip(raw, dims))
                if d is None and dtypes.is_python_scalar(x)}
        if kept:
            mapped_fn = flat_fn

            def flat_fn(*mapped):
                rest = iter(mapped)
                return mapped_fn(*[kept[i] if i in kept else next(rest) for i in range(len(raw))])

            leaves = [x for i, x in enumerate(leaves) if i not in kept]
            dims = [d for i, d in enumerate(dims) if i not in kept]
        out_dims = _OutAxes(out_axes, out_tree, where)
        outs = vmap_flat(flat_fn, leaves, dims, out_dims, size, where=where, axis_name=axis_name)
        return tree_unflatten(out_tree[-1], outs)

    return wrapped


class _OutAxes:
    """out_axes per output leaf, resolved once the output tree is known."""

    def __init__(self, out_axes, out_tree: list, where: str = "vmap"):
        self.out_axes = out_axes
        self.out_tree = out_tree
        self.where = where
        self._leaves = None

    def __getitem__(self, i):
        if self.out_axes is None or isinstance(self.out_axes, int):
            return self.out_axes
        if self._leaves is None:
            try:
                self._leaves = treedef_flatten_up_to(self.out_tree[-1], self.out_axes)
            except ValueError as e:
                raise BatchingError(f"{self.where}: out_axes {self.out_axes!r} does not match the output's "
                                    f"structure: {e}") from None
        return self._leaves[i]


def _move_first_to_last(x):
    nd = get_aval(x).ndim
    return transpose(x, tuple(range(1, nd)) + (0,)) if nd > 1 else x


@_function_of_arrays
def jacfwd(fn: Callable, argnums=0, has_aux: bool = False, holomorphic: bool = False) -> Callable:
    """The Jacobian by forward mode: vmap of jvp over each input leaf's standard basis.

    has_aux=True: fn returns (output, aux) and the result is (Jacobian, aux); aux comes from one more call of fn
    at the primal arguments (under jit the compiler shares it with the Jacobian's forward pass)."""
    _check_real("jacfwd", fn, holomorphic, False)
    nums = _argnums(argnums)

    @_wraps(fn)
    def wrapped(*args, **kwargs):
        if has_aux:
            main = _with_kwargs(fn, kwargs)
            aux = _split_aux("jacfwd", fn, main(*args))[1]
            primary = _wraps(fn)(lambda *a: _split_aux("jacfwd", fn, main(*a))[0])
            return jacfwd(primary, argnums)(*args), aux
        leaves, in_tree, call = _select_args(_with_kwargs(fn, kwargs), args, nums, "jacfwd")
        _check_float_inputs("jacfwd", fn, leaves, f"input leaf {{k}} of argnums {argnums}")
        out_tree: list = []
        flat_fn = _flat_output(lambda *xs: call(*xs), in_tree, out_tree)
        per_input = []
        for k, x in enumerate(leaves):
            shape = get_aval(x).shape
            n, basis = _standard_basis(get_aval(x))

            def push(t, k=k):
                tangents = [t if j == k else zeros_like_aval(get_aval(y)) for j, y in enumerate(leaves)]
                outs, out_tangents = jvp_flat(flat_fn, leaves, tangents)
                # an output that does not depend on the inputs has a symbolic Zero tangent: its columns are zeros
                return [instantiate(t, tangent_aval(get_aval(o))) for t, o in zip(out_tangents, outs)]

            cols = vmap_flat(lambda t: push(t), [basis], [0], _OutAxes(0, []), n)
            per_input.append([reshape(_move_first_to_last(c), get_aval(c).shape[1:] + shape) for c in cols])
        return _assemble(out_tree[-1], in_tree, per_input, argnums)

    return wrapped


@_function_of_arrays
def jacrev(fn: Callable, argnums=0, has_aux: bool = False, holomorphic: bool = False,
           allow_int: bool = False) -> Callable:
    """The Jacobian by reverse mode: vmap of vjp over each output leaf's standard basis.

    has_aux=True: fn returns (output, aux) and the result is (Jacobian, aux)."""
    _check_real("jacrev", fn, holomorphic, allow_int)
    nums = _argnums(argnums)

    @_wraps(fn)
    def wrapped(*args, **kwargs):
        leaves, in_tree, call = _select_args(_with_kwargs(fn, kwargs), args, nums, "jacrev")
        _check_float_inputs("jacrev", fn, leaves, f"input leaf {{k}} of argnums {argnums}")
        out_tree: list = []
        aux_tree: list = []
        flat_fn = _flat_output(lambda *xs: call(*xs), in_tree, out_tree)
        if has_aux:
            def flat_fn(*xs):
                out, aux = _split_aux("jacrev", fn, call(*tree_unflatten(in_tree, xs)))
                aux_leaves, aux_def = tree_flatten(aux)
                aux_tree.append(aux_def)
                out_leaves, treedef = tree_flatten(out)
                out_tree.append(treedef)
                return [asarray(x) for x in out_leaves], aux_leaves
        outs, aux, flat_vjp = vjp_flat(flat_fn, leaves, has_aux=has_aux)
        per_output = []
        for k, y in enumerate(outs):
            shape = get_aval(y).shape
            m, basis = _standard_basis(get_aval(y))

            def pull(c, k=k):
                cts = [c if j == k else zeros_like_aval(get_aval(o)) for j, o in enumerate(outs)]
                return [g if g is not None else zeros_like_aval(get_aval(x)) for g, x in zip(flat_vjp(cts), leaves)]

            rows = vmap_flat(pull, [basis], [0], _OutAxes(0, []), m)
            per_output.append([reshape(r, shape + get_aval(x).shape) for r, x in zip(rows, leaves)])
        per_input = [[per_output[o][i] for o in range(len(outs))] for i in range(len(leaves))]
        jac = _assemble(out_tree[-1], in_tree, per_input, argnums)
        return (jac, tree_unflatten(aux_tree[-1], aux)) if has_aux else jac

    return wrapped


jacobian = jacrev


def _standard_basis(aval) -> tuple:
    """(n, the n unit arrays of aval's shape stacked): the tangents (cotangents) that give a Jacobian's
    columns (rows); weakly typed for a weakly typed value, so a Jacobian of values computed from Python
    numbers alone promotes as they do."""
    n = int(np.prod(aval.shape, dtype=np.int64))
    return n, as_array(np.eye(n, dtype=aval.dtype).reshape((n,) + aval.shape), weak=aval.weak_type)


def _assemble(out_tree, in_tree, per_input, argnums):
    """Jacobian blocks (per input leaf, per output leaf) as a tree of the output of trees of the input."""
    n_out = len(per_input[0]) if per_input else 0
    blocks = []
    for o in range(n_out):
        selected = tree_unflatten(in_tree, [per_input[i][o] for i in range(len(per_input))])
        blocks.append(selected[0] if isinstance(argnums, int) else selected)
    return tree_unflatten(out_tree, blocks)


@_function_of_arrays
def hessian(fn: Callable, argnums=0, has_aux: bool = False, holomorphic: bool = False) -> Callable:
    """The Hessian of a scalar fn: jacfwd of jacrev (with has_aux=True, (Hessian, aux))."""
    _check_real("hessian", fn, holomorphic, False)
    return jacfwd(jacrev(fn, argnums, has_aux=has_aux), argnums, has_aux=has_aux)


def linearize(fn: Callable, *primals):
    """(fn(*primals), f_jvp) with f_jvp(*tangents) the derivative of fn at primals along tangents (jax.linearize).
    Each f_jvp call evaluates the JVP at the stored primals; under jit the compiler shares the primal work."""
    out = fn(*primals)

    def f_jvp(*tangents):
        if len(tangents) != len(primals):
            raise TypeError(f"linearize of {_name(fn)}: f_jvp takes {len(primals)} tangents (one per primal); got "
                            f"{len(tangents)}")
        return jvp(fn, primals, tangents)[1]

    return out, f_jvp
