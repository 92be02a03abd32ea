"""kiln.jit: compile a plain function through the full path and run it in the C runtime."""
from __future__ import annotations

import contextlib
import contextvars
import functools
import weakref
import inspect
from typing import Callable

import numpy as np

from .config import config
from .core.array import Array, as_array
from .core.calls import bind_call, plain_arity, positional_arguments
from .core.kernel_call import kernel_call
from .core.pytree import tree_flatten, tree_unflatten, treedef_to_json
from .core.signature import Signature, signature_of, split_static
from .core.trace import Tracer, trace_to_graph_with_captures


class TracedFunction:
    """A function traced at one signature: its graph and output tree structure."""

    def __init__(self, graph, out_treedef, signature: Signature, captured: list):
        self.graph = graph
        self.out_treedef = out_treedef
        self.signature = signature
        # Values of enclosing transformations the function closed over (extra trailing inputs).
        self.captured = captured
        # results keep their weak type, as jax.jit's do
        self.out_weak = tuple(a.weak_type for a in graph.out_avals)
        # numpy's print options its kiln.debug.print templates recorded (None: it prints no array)
        self.print_options = None


_LIVE: "weakref.WeakSet[Jitted]" = weakref.WeakSet()  # every kiln.jit function alive, for clear_caches


def clear_caches() -> None:
    """jax.clear_caches: forgets every kiln.jit function's traces and compiled executables (the next call traces
    and compiles again; compiled kernels may still come from the on-disk cache, kiln.compiler.cache)."""
    for jitted in list(_LIVE):
        jitted._traces.clear()
        jitted._executables.clear()
        jitted._fast.clear()


class Jitted:
    """A function compiled once per abstract signature (shapes, dtypes, tree, static args)."""

    def __init__(self, fn: Callable, static_argnums=(), name: str | None = None, limits=None, static_kwnames=()):
        # Name and docstring only (updated=()): copying fn's __dict__ would, when fn is itself
        # a Jitted or a transform of one, replace this object's fn and caches with fn's.
        functools.update_wrapper(self, fn, updated=())
        self.fn = fn
        self.static_argnums = tuple(static_argnums) if isinstance(static_argnums, (tuple, list)) else (static_argnums,)
        self.name = name or getattr(fn, "__name__", "fn")
        self._traces: dict[Signature, TracedFunction] = {}
        self._executables: dict[Signature, object] = {}
        # (shape, dtype, weak) per positional argument -> (executable, out treedef, out weak types): the
        # common call (arrays and Python numbers, no keywords, no statics) skips flattening and avals
        self._fast: dict[tuple, tuple] = {}
        self.trace_count = 0
        self._limits = limits  # kiln.vm.runtime.CallLimits of calls made from Python, or None
        _LIVE.add(self)
        self._plain_arity = plain_arity(fn)
        # keyword-only parameters (or **kwargs): the call's keywords travel as a trailing dict argument
        try:
            self._fn_signature = inspect.signature(fn)
        except (TypeError, ValueError):
            self._fn_signature = None
        self._keywords = self._fn_signature is not None and any(
            p.kind in (p.KEYWORD_ONLY, p.VAR_KEYWORD) for p in self._fn_signature.parameters.values())
        # fn(*args) alone binds any number of positional arguments as they are: the fast path applies
        self._any_arity = self._fn_signature is not None and [
            p.kind for p in self._fn_signature.parameters.values()] == [inspect.Parameter.VAR_POSITIONAL]
        self.static_kwnames = frozenset(static_kwnames)

    def _split(self, args: tuple, kwargs: dict):
        """(dynamic arguments, static ones): positions in static_argnums and keyword-only names in
        static_kwnames are static; other keyword-only arguments form a trailing dict argument."""
        if not self._keywords:
            if kwargs or len(args) != self._plain_arity:
                args = positional_arguments(self.name, self.fn, args, kwargs)
            return split_static(args, self.static_argnums)
        bound = bind_call(self.name, self._fn_signature, args, kwargs)
        dynamic, statics = split_static(bound.args, self.static_argnums)
        keywords = dict(bound.kwargs)
        static_keywords = tuple(sorted((k, keywords.pop(k)) for k in list(keywords) if k in self.static_kwnames))
        for name, value in static_keywords:
            try:
                hash(value)
            except TypeError:
                raise TypeError(f"static argument {name!r} must be hashable, got {type(value).__name__}") from None
        return dynamic + (keywords,), statics + static_keywords

    def trace(self, *args, **kwargs) -> TracedFunction:
        dynamic, statics = self._split(args, kwargs)
        signature, _ = signature_of(dynamic, statics, self.name)
        return self._trace(signature)

    def _trace(self, signature: Signature) -> TracedFunction:
        cached = self._traces.get(signature)
        if cached is not None:
            if cached.print_options is None:
                return cached
            from .debug import note_print_options, printed_options

            if cached.print_options == printed_options():
                note_print_options(cached.print_options)  # an enclosing trace inlines its prints
                return cached
            # numpy's print options changed since its prints were traced: trace again, as JAX formats
            # with the current ones
            self._traces.pop(signature, None)
            self._executables.pop(signature, None)
            self._fast.clear()
        if config.jax_no_tracing:
            raise RuntimeError(f"re-tracing function {self.name} for `jit`, but 'no_tracing' is set")
        if config.jax_explain_cache_misses:
            _explain_cache_miss(self.name, signature, list(self._traces))
        out_tree = []

        def flat_fn(*leaves):
            dynamic = list(tree_unflatten(signature.treedef, leaves))
            keywords = dynamic.pop() if self._keywords else {}
            keywords.update((k, v) for k, v in signature.statics if isinstance(k, str))
            full = _merge_static(dynamic, {i: v for i, v in signature.statics if isinstance(i, int)})
            # kiln.debug.print/callback are host steps of the graph (the VM's debug.print/debug.callback)
            flat, treedef = tree_flatten(self.fn(*full, **keywords))
            out_tree.append(treedef)
            return flat

        self.trace_count += 1
        from .debug import recording_print_options

        with recording_print_options() as printed:
            graph, captured = trace_to_graph_with_captures(flat_fn, signature.avals)
        traced = TracedFunction(graph, out_tree[0], signature, captured)
        traced.print_options = printed.options
        if not captured:
            self._traces[signature] = traced
        return traced

    def __call__(self, *args, **kwargs):
        if _jit_disabled.get() or config.jax_disable_jit:
            return self.fn(*args, **kwargs)
        fast_key = None if kwargs or self._keywords or self.static_argnums or (
            len(args) != self._plain_arity and not self._any_arity) else _fast_key(args)
        if fast_key is not None:
            known = self._fast.get(fast_key)
            if known is not None and not config.jax_no_execution and (
                    known[3] is None or known[3] == _printed_options()):
                executable, out_treedef, out_weak, _ = known
                return tree_unflatten(out_treedef, [as_array(x, w) for x, w in zip(executable(args), out_weak)])
        if kwargs or self._keywords or len(args) != self._plain_arity:
            dynamic, statics = self._split(args, kwargs)
        else:  # the common call: positional arguments only, nothing to bind
            dynamic, statics = split_static(args, self.static_argnums)
        signature, leaves = signature_of(dynamic, statics, self.name)
        traced = self._trace(signature)
        if traced.captured or any(isinstance(x, Tracer) for x in leaves):
            outs = kernel_call.bind(*leaves, *traced.captured, graph=traced.graph, name=self.name)
            return tree_unflatten(traced.out_treedef, outs)
        if config.jax_no_execution:
            raise RuntimeError(f"kiln tried to execute function {self.name}, but the no_execution config option is set")
        executable = self._executables.get(signature)
        if executable is None:
            executable = self._executables[signature] = _compile_traced(self.name, traced, self._limits)
        if fast_key is not None:
            self._fast[fast_key] = (executable, traced.out_treedef, traced.out_weak, traced.print_options)
        # the runtime binding converts the leaves (Python scalars take the traced dtype)
        return tree_unflatten(traced.out_treedef, [as_array(x, w) for x, w in zip(executable(leaves), traced.out_weak)])

    def lower(self, *args, **kwargs) -> "Lowered":
        """The traced IR at these arguments: its text (a str), with JAX's Lowered methods as_text() and
        compile()."""
        return Lowered(str(self.trace(*args, **kwargs).graph), self)


class Lowered(str):
    """The text of a jitted function's IR at one signature (a str, as kiln.jit(f).lower always gave), with
    jax.stages.Lowered's as_text() and compile() (the Compiled object calls the jitted function)."""

    def __new__(cls, text: str, jitted: "Jitted"):
        out = super().__new__(cls, text)
        out.jitted = jitted
        return out

    def as_text(self, dialect=None) -> str:
        return str(self)

    def compile(self, compiler_options=None) -> "Compiled":
        return Compiled(self.jitted, str(self))


class Compiled:
    """What Lowered.compile() gives: call it as the jitted function (compiled on first use per signature)."""

    def __init__(self, jitted: "Jitted", text: str):
        self.jitted = jitted
        self._text = text

    def __call__(self, *args, **kwargs):
        return self.jitted(*args, **kwargs)

    def as_text(self) -> str:
        return self._text


def _explain_cache_miss(name: str, signature: Signature, seen: list) -> None:
    """Logs (jax_explain_cache_misses) why kiln.jit traces `name` again: the new signature and, against the
    closest one already traced, the arguments whose types (or static values) differ."""
    import logging

    log = logging.getLogger("kiln.jit")
    if not seen:
        log.warning("TRACING CACHE MISS at %s: never seen function %s before (first trace)", name, name)
        return

    def differences(old):
        if old.treedef != signature.treedef:
            return ["the arguments' tree structure changed"]
        diff = [f"argument leaf {i}: {a.str_short()} (was {b.str_short()})"
                for i, (a, b) in enumerate(zip(signature.avals, old.avals)) if a != b]
        if old.statics != signature.statics:
            diff.append(f"static arguments {signature.statics!r} (was {old.statics!r})")
        return diff

    closest = min((differences(old) for old in seen), key=len)
    log.warning("TRACING CACHE MISS at %s: %d signature(s) traced before; closest one differs in: %s", name,
                len(seen), "; ".join(closest) or "nothing visible (a weak type)")


_INT32_MIN, _INT32_MAX = -2 ** 31, 2 ** 31 - 1


def _fast_key(args: tuple):
    """A key that determines the signature of plain positional arguments: numpy or kiln arrays of native
    byte order (shape, dtype, weak type) and Python floats, bools and int32-sized ints (their type); None
    for anything else (trees, tracers, masked arrays, wide ints), which takes the full path."""
    key = []
    for a in args:
        kind = type(a)
        if kind is np.ndarray or kind is Array:
            dtype = a.dtype
            if not dtype.isnative:
                return None
            key.append((a.shape, dtype, kind is Array and a._weak))
        elif kind is float or kind is bool or (kind is int and _INT32_MIN <= a <= _INT32_MAX):
            key.append(kind)
        else:
            return None
    return tuple(key)


def _merge_static(dynamic: list, statics: dict) -> list:
    out = []
    it = iter(dynamic)
    total = len(dynamic) + len(statics)
    for i in range(total):
        out.append(statics[i] if i in statics else next(it))
    return out


def _printed_options() -> dict:
    from .debug import printed_options

    return printed_options()


def _compile_traced(name: str, traced: TracedFunction, limits=None):
    from .compiler.pipeline import ProcedureSource, build_module
    from .runtime_session import load_module

    graph = traced.graph
    arg_names = [f"arg{i}" for i in range(len(graph.invars))]
    source = ProcedureSource(
        name="main",
        graph=graph,
        arg_names=arg_names,
        result_names=[f"result{i}" for i in range(len(graph.outvars))],
        arg_tree=treedef_to_json(traced.signature.treedef),
        result_tree=treedef_to_json(traced.out_treedef),
    )
    module_bytes = build_module(name, [source], [], export=f"kiln.jit of {name}")
    context = load_module(module_bytes).new_context()
    if limits is not None:
        context.set_limits(timeout=limits.timeout, max_steps=limits.max_steps)
    # Context.invoke("main", arrays) less its lookup, one C call per call, with results made as read-only
    # kiln Arrays of the traced weak types (as_array then passes them on as they are), and without the
    # Ctrl-C machinery where Ctrl-C could not stop a call before its end anyway
    from kiln.vm.runtime import _ctrl_c_stops_early

    return context._caller("main", Array, traced.out_weak, _ctrl_c_stops_early(module_bytes, "main"))


def jit(fn: Callable | None = None, *, static_argnums=(), static_argnames=(), donate_argnums=(),
        donate_argnames=(), keep_unused: bool = False, inline: bool = False, timeout: float | None = None,
        max_steps: int | None = None):
    """Compiles fn for each abstract signature it is called with; usable as @jit or @jit(...).

    static_argnums / static_argnames: arguments (by position or by name; each also found from the other through
    fn's signature, as in JAX) that are Python values fixed at trace time: hashable, part of the cache key.
    donate_argnums / donate_argnames, keep_unused and inline are accepted for JAX code and checked, with no
    effect: kiln never writes into its callers' arrays, so a donated argument stays valid.

    timeout (seconds) and max_steps (bytecode instructions) bound each call made from Python:
    a call past either raises KilnRuntimeError DEADLINE_EXCEEDED (kiln.vm.runtime.Context.set_limits).
    They do not apply where the function is called inside another traced function. Ctrl-C
    interrupts a call made on the main thread either way.
    """
    limits = None
    if timeout is not None or max_steps is not None:
        from kiln.vm.runtime import CallLimits

        limits = CallLimits(timeout, max_steps)

    def make(f):
        static, static_kwnames = _static_positions(f, static_argnums, static_argnames, "static")
        _static_positions(f, donate_argnums, donate_argnames, "donate")
        return Jitted(f, static, limits=limits, static_kwnames=static_kwnames)

    if fn is None:
        return make
    return make(fn)


def _as_tuple(value, kind) -> tuple:
    if value is None:
        return ()
    if isinstance(value, kind):
        return (value,)
    return tuple(value)


def _static_positions(fn, argnums, argnames, what: str) -> tuple[tuple[int, ...], tuple[str, ...]]:
    """(the positions of fn's {what}_argnums and of its positional {what}_argnames, the keyword-only names)."""
    name = getattr(fn, "__name__", type(fn).__name__)
    nums = _as_tuple(argnums, int)
    names = _as_tuple(argnames, str)
    for i in nums:
        if isinstance(i, bool) or not isinstance(i, int):
            raise TypeError(f"jit of {name}: {what}_argnums must be ints; got {i!r}")
    for n in names:
        if not isinstance(n, str):
            raise TypeError(f"jit of {name}: {what}_argnames must be strings; got {n!r}")
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        params = None
    if params is None:
        if names:
            raise TypeError(f"jit of {name}: {what}_argnames needs a function whose signature can be read")
        return nums, ()
    positional = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    has_var_positional = any(p.kind == p.VAR_POSITIONAL for p in params)
    out, keyword_only = [], []
    takes_any_keyword = any(p.kind == p.VAR_KEYWORD for p in params)
    for i in nums:
        if i < 0:
            if has_var_positional:
                raise ValueError(f"jit of {name}: negative {what}_argnums {i} with *args in the signature")
            i += len(positional)
        if i < 0 or (i >= len(positional) and not has_var_positional):
            raise ValueError(f"jit of {name}: {what}_argnums {i} is out of range; it takes {len(positional)} "
                             "positional arguments")
        out.append(i)
    for n in names:
        if n in positional:
            out.append(positional.index(n))
        elif any(p.name == n for p in params) or takes_any_keyword:
            keyword_only.append(n)
        else:
            raise ValueError(f"jit of {name}: {what}_argnames {n!r} is not an argument of {name} "
                             f"({', '.join(p.name for p in params)})")
    return tuple(sorted(set(out))), tuple(keyword_only)


_jit_disabled: contextvars.ContextVar[bool] = contextvars.ContextVar("kiln_jit_disabled", default=False)


@contextlib.contextmanager
def disable_jit(disable: bool = True):
    """Within it, kiln.jit functions run their Python eagerly (for debugging with print and pdb), as JAX's."""
    token = _jit_disabled.set(bool(disable))
    try:
        yield
    finally:
        _jit_disabled.reset(token)

