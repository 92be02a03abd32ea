"""Top-level names of the ``jax`` namespace that have no other home in kiln: the config flags' context managers,
the process queries of a one-host runtime, ``typeof``, ``float0``, ``linear_transpose``, ``custom_gradient``,
``pmap`` and ``print_environment_info``. ``kiln.<name>`` loads them from here (kiln/__init__.py)."""
from __future__ import annotations

import contextlib
import functools
import platform
import sys
from typing import Callable

import numpy as np

from kiln.config import config
from kiln.core.pytree import tree_flatten, tree_map, tree_unflatten
from kiln.dtypes import float0
from kiln.jit import clear_caches, jit
from kiln.numpy import _base
from kiln.transforms import api
from kiln.transforms.custom import custom_vjp

__all__ = ["enable_x64", "debug_nans", "debug_infs", "default_matmul_precision", "default_prng_impl",
           "numpy_rank_promotion", "numpy_dtype_promotion", "log_compiles", "no_tracing", "no_execution",
           "explain_cache_misses", "allow_f16_reductions", "softmax_custom_jvp", "enable_checks",
           "threefry_partitionable", "check_tracer_leaks", "thread_guard", "process_count", "process_index",
           "process_indices", "host_count", "host_id", "host_ids", "typeof", "float0", "clear_caches",
           "print_environment_info", "linear_transpose", "custom_gradient", "pmap", "closure_convert",
           "pure_callback", "effects_barrier", "default_device", "fwd_and_bwd", "ensure_compile_time_eval"]


def _flag_context(flag: str, doc: str):
    @contextlib.contextmanager
    def context(new_val=True):
        old = config.read(flag)
        config.update(flag, new_val)
        try:
            yield
        finally:
            config.update(flag, old)

    context.__name__ = flag.removeprefix("jax_")
    context.__doc__ = (f"Context manager (and decorator) setting kiln.config's {flag} inside its block, as JAX's; "
                       f"{doc}")
    return context


enable_x64 = _flag_context("jax_enable_x64", "no effect on kiln's dtypes, which follow numpy's (docs/jax_compat.md).")
debug_nans = _flag_context("jax_debug_nans", "only False (kiln has no NaN checks).")
debug_infs = _flag_context("jax_debug_infs", "only False (kiln has no inf checks).")
default_matmul_precision = _flag_context("jax_default_matmul_precision", "checked, no effect.")
default_prng_impl = _flag_context("jax_default_prng_impl", "only 'threefry2x32'.")
numpy_rank_promotion = _flag_context("jax_numpy_rank_promotion", "only 'allow'.")
numpy_dtype_promotion = _flag_context("jax_numpy_dtype_promotion", "only 'standard'.")
log_compiles = _flag_context("jax_log_compiles", "checked, no effect.")
no_tracing = _flag_context("jax_no_tracing", "a kiln.jit function that must trace (a cache miss) raises RuntimeError.")
no_execution = _flag_context("jax_no_execution", "a kiln.jit function about to run its compiled module raises "
                             "RuntimeError.")
explain_cache_misses = _flag_context("jax_explain_cache_misses", "each kiln.jit cache miss logs why at WARNING "
                                     "(logger 'kiln.jit').")
allow_f16_reductions = _flag_context("jax_allow_f16_reductions", "False: lax.reduce_sum of float16/bfloat16 raises "
                                     "ValueError.")
softmax_custom_jvp = _flag_context("jax_softmax_custom_jvp", "True: kiln.nn.softmax differentiates with JAX's custom "
                                   "JVP rule.")
enable_checks = _flag_context("jax_enable_checks", "True: the compiler also verifies each traced graph before its "
                              "passes.")
threefry_partitionable = _flag_context("jax_threefry_partitionable", "True only (kiln.random's bits are JAX's "
                                       "partitionable layout).")
check_tracer_leaks = _flag_context("jax_check_tracer_leaks", "checked, no effect (kiln raises UnexpectedTracerError "
                                   "when a leaked tracer is used).")
thread_guard = _flag_context("jax_thread_guard", "checked, no effect (one process).")


def process_count(backend=None) -> int:
    """1: a kiln program runs in one process."""
    return 1


def process_index(backend=None) -> int:
    """0: a kiln program runs in one process."""
    return 0


def process_indices(backend=None) -> list[int]:
    return [0]


host_count, host_id, host_ids = process_count, process_index, process_indices


def typeof(x):
    """The abstract value of `x` (kiln's ShapedArray: ``.shape``, ``.dtype``, ``.weak_type``), traced or not."""
    return _base.aval(x)


def print_environment_info(return_string: bool = False):
    """kiln's, Python's, numpy's versions and the host (the report to paste into a bug report)."""
    import kiln
    from kiln.compiler.target import Target

    try:
        target = str(Target.host())
    except Exception as e:  # a host kiln cannot compile for still gets its report
        target = f"unavailable ({e})"
    text = "\n".join([
        f"kiln:    {kiln.__version__}",
        f"numpy:   {np.__version__}",
        f"python:  {sys.version}",
        f"machine: {platform.platform()} {platform.machine()}",
        f"target:  {target}",
        "devices: 1 (the host CPU)",
    ])
    if return_string:
        return text
    print(text)
    return None


def linear_transpose(fun: Callable, *primals, reduce_axes=()):
    """The transpose of a linear `fun`: ``transpose(cotangent)`` gives one cotangent per argument (a tuple), shaped
    like `primals` (arrays or ShapeDtypeStructs giving the arguments' shapes and dtypes). Computed as the VJP of
    `fun` at zeros, which for a linear function does not depend on the point."""
    if reduce_axes:
        raise NotImplementedError("linear_transpose: reduce_axes was removed from JAX and is not supported")
    leaves, tree = tree_flatten(primals)
    zeros = tree_unflatten(tree, [np.zeros(np.shape(x), x.dtype if hasattr(x, "dtype") else _base.aval(x).dtype)
                                  for x in leaves])  # Python numbers too
    out, pullback = api.vjp(fun, *zeros)
    out_leaves, out_tree = tree_flatten(out)

    def transposed(*cotangent):
        ct = cotangent[0] if len(cotangent) == 1 else cotangent
        ct_leaves, ct_tree = tree_flatten(ct)
        if ct_tree != out_tree or any(np.shape(c) != np.shape(o) for c, o in zip(ct_leaves, out_leaves)):
            raise TypeError(f"linear_transpose: the cotangent must have the output's structure and shapes "
                            f"({[tuple(np.shape(o)) for o in out_leaves]}), got {[tuple(np.shape(c)) for c in ct_leaves]}")
        return tuple(pullback(ct))

    return transposed


def custom_gradient(fun: Callable) -> Callable:
    """JAX's custom_gradient: `fun(*args)` returns ``(value, vjp)`` where ``vjp(g)`` gives the cotangents of
    `args` (a tuple; a single value for one argument). Built on kiln.custom_vjp: the backward pass calls `fun`
    again at the saved arguments to get `vjp` (kiln's residuals are arrays, not Python functions)."""

    @custom_vjp
    def f(*args):
        return fun(*args)[0]

    def fwd(*args):
        return fun(*args)[0], args

    def bwd(args, g):
        cts = fun(*args)[1](g)
        cts = tuple(cts) if isinstance(cts, (tuple, list)) else (cts,)
        if len(cts) != len(args):
            raise TypeError(f"custom_gradient: the vjp function gave {len(cts)} cotangents for {len(args)} arguments")
        return cts

    f.defvjp(fwd, bwd)
    return functools.wraps(fun)(lambda *args: f(*args))


def pmap(fun: Callable = None, axis_name=None, *, in_axes=0, out_axes=0, static_broadcasted_argnums=(),
         devices=None, backend=None, axis_size=None, donate_argnums=(), global_arg_shapes=None):
    """jax.pmap on one host: the mapped axis runs as kiln.vmap inside one kiln.jit function, whatever its size
    (JAX would need that many devices). ``axis_name`` names the axis for kiln.lax's collectives (psum, pmean,
    all_gather, ppermute, ...; differentiable inside the mapped function, kiln.lax.collectives). ``devices`` must be None or the host CPU; static_broadcasted_argnums are static."""
    if fun is None:
        return lambda f: pmap(f, axis_name, in_axes=in_axes, out_axes=out_axes,
                              static_broadcasted_argnums=static_broadcasted_argnums, devices=devices, backend=backend,
                              axis_size=axis_size, donate_argnums=donate_argnums)
    from kiln.devices import _check_backend, devices as all_devices

    _check_backend(backend, "pmap")
    if devices is not None and list(devices) != all_devices():
        raise ValueError(f"pmap: kiln has one device, the host CPU; got devices={devices!r}")
    if global_arg_shapes is not None:
        raise ValueError("pmap: global_arg_shapes is not supported (removed from JAX)")
    static = (static_broadcasted_argnums,) if isinstance(static_broadcasted_argnums, int) else tuple(
        static_broadcasted_argnums)

    @functools.wraps(fun)
    def mapped(*args):
        statics = {i % len(args) for i in static}
        dynamic_positions = [i for i in range(len(args)) if i not in statics]
        axes = in_axes
        if isinstance(in_axes, (tuple, list)) and statics:
            if len(in_axes) != len(args):
                raise ValueError(f"pmap: in_axes has {len(in_axes)} entries for {len(args)} arguments")
            axes = tuple(in_axes[i] for i in dynamic_positions)

        def inner(*dynamic):
            full = list(args)
            for i, x in zip(dynamic_positions, dynamic):
                full[i] = x
            return fun(*full)

        return api.vmap(inner, in_axes=axes, out_axes=out_axes, axis_name=axis_name, axis_size=axis_size)(
            *[args[i] for i in dynamic_positions])

    return jit(mapped, static_argnums=tuple(sorted(static)))


def closure_convert(fun: Callable, *example_args):
    """``(converted, consts)`` with ``converted(*args, *consts) == fun(*args)``: `fun` traced at `example_args`
    with the traced values of enclosing transformations it closes over (what custom_vjp rules must receive
    explicitly for gradients to reach them) hoisted into `consts`. Eagerly nothing is closed over: ``consts`` is
    empty."""
    from kiln.core.evaluate import eval_graph
    from kiln.core.trace import get_aval, trace_to_graph_with_captures

    leaves, in_tree = tree_flatten(example_args)
    out_tree = []

    def flat(*xs):
        out_leaves, treedef = tree_flatten(fun(*tree_unflatten(in_tree, list(xs))))
        out_tree.append(treedef)
        return out_leaves

    graph, captured = trace_to_graph_with_captures(flat, [get_aval(x) for x in leaves])
    n_args = len(example_args)

    def converted(*args_and_consts):
        args, consts = args_and_consts[:n_args], args_and_consts[n_args:]
        xs, tree = tree_flatten(tuple(args))
        if tree != in_tree or len(consts) != len(captured):
            raise TypeError(f"closure_convert: expected the arguments' structure {in_tree} and {len(captured)} "
                            f"constants, got {tree} and {len(consts)}")
        return tree_unflatten(out_tree[0], eval_graph(graph, list(xs) + list(consts)))

    return converted, list(captured)


def pure_callback(callback: Callable, result_shape_dtypes, *args, sharding=None, vmap_method=None, **kwargs):
    """Calls the Python function `callback` on the values of `args` (numpy arrays) and checks its result against
    `result_shape_dtypes` (a tree of arrays or ShapeDtypeStructs). Eagerly only: kiln's compiled functions and
    modules run in the C runtime with no way to call back into Python, so under kiln.jit, a transformation or a
    Program trace it is an error (run under kiln.disable_jit(), or write the computation with kiln.numpy)."""
    from kiln.core.errors import TracingError
    from kiln.core.trace import Tracer, is_eager

    leaves, tree = tree_flatten((args, kwargs))
    if not is_eager() or any(isinstance(x, Tracer) for x in leaves):
        raise TracingError("kiln.pure_callback cannot run inside a traced function: kiln's compiled code runs in the C "
                           "runtime, which has no way to call back into Python. Compute it with kiln.numpy, or run "
                           "eagerly (kiln.disable_jit())")
    a, k = tree_unflatten(tree, [np.asarray(x) if hasattr(x, "shape") else x for x in leaves])
    result = callback(*a, **k)
    want, want_tree = tree_flatten(result_shape_dtypes)
    got, got_tree = tree_flatten(result)
    if got_tree != want_tree:
        raise TypeError(f"pure_callback: the callback returned the structure {got_tree}, expected {want_tree}")
    outs = []
    for g, w in zip(got, want):
        g = np.asarray(g)
        if g.shape != tuple(w.shape) or g.dtype != np.dtype(w.dtype):
            raise TypeError(f"pure_callback: the callback returned {g.dtype}{list(g.shape)}, expected "
                            f"{np.dtype(w.dtype)}{list(w.shape)}")
        outs.append(_base.asarray(g))
    return tree_unflatten(want_tree, outs)


def effects_barrier() -> None:
    """Nothing to wait for: kiln's calls return when their results (and prints) are done."""


@contextlib.contextmanager
def default_device(device):
    """Context manager: computations inside run on `device`, which must be the host CPU (or None)."""
    from kiln.devices import devices as all_devices

    if device is not None and device != all_devices()[0] and device != "cpu":
        raise ValueError(f"default_device: kiln has one device, the host CPU; got {device!r}")
    yield


def fwd_and_bwd(fun: Callable, argnums, has_aux: bool = False, jitted: bool = True):
    """``(fwd, bwd)``: ``fwd(*args)`` gives ``(fun(*args), residuals)`` (with ``aux`` third when `has_aux`), and
    ``bwd(residuals, cotangent)`` the cotangents of the arguments `argnums` names (one value for an int, a tuple
    for a sequence), as ``kiln.vjp``'s. kiln's residuals are the arguments themselves: ``bwd`` runs the forward
    pass again inside its own (jitted, compiled once) function, where JAX's keeps the forward's intermediates."""
    single = isinstance(argnums, int)
    nums = (argnums,) if single else tuple(argnums)

    def fwd(*args):
        out = fun(*args)
        if has_aux:
            return out[0], args, out[1]
        return out, args

    def bwd(residuals, cotangent):
        args = list(residuals)

        def of_selected(*selected):
            full = list(args)
            for i, x in zip(nums, selected):
                full[i] = x
            out = fun(*full)
            return out[0] if has_aux else out

        _, pullback = api.vjp(of_selected, *[args[i] for i in nums])
        cts = tuple(pullback(cotangent))
        return cts[0] if single else cts

    return (jit(fwd), jit(bwd)) if jitted else (fwd, bwd)


@contextlib.contextmanager
def ensure_compile_time_eval():
    """Inside the block, operations whose operands are all concrete (numpy arrays, Python numbers, values computed
    in the block) run at once even while a function is traced, so their results can steer Python control flow or
    give shapes; operations on traced values are traced as usual, as in JAX."""
    from kiln.core.trace import compile_time_eval

    token = compile_time_eval.set(True)
    try:
        yield
    finally:
        compile_time_eval.reset(token)
