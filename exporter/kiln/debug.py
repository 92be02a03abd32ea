"""jax.debug: printing and inspecting values from inside traced functions.

``kiln.debug.print(fmt, *args, **kwargs)`` prints ``fmt.format(*args, **kwargs)`` with arrays as numpy's
``str`` prints them, at run time, in program order:
  - eagerly (no trace, or under ``kiln.disable_jit()``): at once, with Python's formatting;
  - traced (``kiln.jit``, the bodies of ``kiln.lax`` control flow, under ``grad`` (the primal value) and
    ``vmap`` (one line per example, in order, as JAX's batching rule unrolls it), Program functions): as a ``debug_print`` host step, the VM instruction
    ``debug.print`` (format 2.8; docs/vm.md). The C runtime formats the values each time the step runs
    and writes the line to the context's print sink: Python's ``sys.stdout`` under ``kiln.jit`` and
    ``kiln.vm`` (so pytest's capsys sees it), stdout in ``kiln-run``, the embedder's
    ``kiln_context_set_print_callback`` in C. Prints come out in program order with the call's work
    (JAX's ``ordered=True``; the VM runs one step at a time), the way JAX prints them.

Formats: ``{}``, ``{0}``, ``{name}`` print a value as numpy's ``str`` does (a 0-d one as Python's ``format``
does, the float, int or complex it converts to: ``0.1`` in float32 prints ``0.10000000149011612``, as in JAX);
``{x!r}``, ``{x!s}``, ``{x!a}`` as numpy's ``repr``/``str``/``ascii`` (format 2.9); ``{x:SPEC}`` formats a 0-d
value as Python's ``format(float(x) or int(x), SPEC)``, for SPEC in ``[[fill]align][sign][0][width][.precision]
[type]`` with type one of ``f F e E g G d`` (a precision needs one). A tuple, list, dict or namedtuple of arrays
prints as Python prints it, each array's repr (format 2.9). numpy's print options in effect when the print is
traced (``np.set_printoptions``: precision, threshold, edgeitems, linewidth, suppress, sign, floatmode) are
recorded in the template and applied at run time (format 2.9; the others warn). Other specs, a spec on an
array, a complex value or after a conversion, attribute or index fields of traced values and other pytree classes
holding traced values are refused when the function is traced, naming the print's source line. Arguments that
are not traced (Python numbers, strings, shapes) are formatted by Python at trace time.

``callback(fn, *args, **kwargs)`` calls ``fn`` on the values (numpy arrays; only its side effects count,
its result is dropped, as in JAX): eagerly at once; traced, at run time in program order with the prints,
as the VM's ``debug.callback`` instruction (format 2.8), which calls the context's host callback: kiln.vm's
contexts call the function registered under the instruction's number (``kiln.vm.runtime.
register_host_callback``) in this process. So it works in ``kiln.jit`` and in Program instances run from
Python, in loop bodies and under ``vmap`` (once per example, as JAX) and ``grad`` (the primal); an
exception it raises stops the call and is raised by it. A module holding one cannot be exported
(``Program.get_compiled_artifact`` refuses it, naming the callback and its line): the C runtime has no
Python to call. ``breakpoint()`` enters pdb eagerly; traced, it warns and does nothing.
``inspect_array_sharding``, ``visualize_array_sharding`` and ``visualize_sharding`` describe the one host
device. ``ordered=`` is accepted: prints of one call come out in program order either way.
"""
from __future__ import annotations

import contextvars
import re
import string
import warnings

import numpy as np

from kiln.core.aval import ShapedArray
from kiln.core.errors import TracingError
from kiln.core.primitive import Primitive, register
from kiln.core.pytree import tree_flatten, tree_unflatten
from kiln.core.trace import Tracer

__all__ = ["print", "callback", "breakpoint", "inspect_array_sharding", "visualize_array_sharding",
           "visualize_sharding", "DebugEffect", "OrderedDebugEffect"]

_print = print  # the builtin, before this module's print shadows it

class DebugEffect:
    """JAX's effect type of debug callbacks; kiln's prints and callbacks are host steps of the graph."""


class OrderedDebugEffect(DebugEffect):
    """JAX's effect type of ordered debug callbacks."""


def _staged(leaves) -> bool:
    """Whether a print or callback of these leaves runs in compiled code: a value is traced, or a graph is
    being traced (kiln.jit, a Program, a control-flow body) even if no value is: JAX stages a
    ``debug.print("step")`` inside jit too, so it prints at every call, not once while tracing."""
    from kiln.core.trace import compile_time_eval, current_graph_trace

    return any(isinstance(x, Tracer) for x in leaves) or (
        current_graph_trace() is not None and not compile_time_eval.get())


def print(fmt: str, *args, ordered: bool = False, partitioned: bool = False, **kwargs) -> None:  # noqa: A001
    """Prints ``fmt.format(*args, **kwargs)`` with the values of traced arrays at run time (see the module's
    docstring)."""
    leaves, tree = tree_flatten((args, kwargs))
    if not _staged(leaves):
        args, kwargs = tree_unflatten(tree, [np.asarray(x) if hasattr(x, "shape") else x for x in leaves])
        _print(fmt.format(*args, **kwargs))
        return
    template, operands = _template(fmt, args, kwargs)
    if operands:
        template = _options_block() + template
        note_print_options()
    debug_print_p.bind(*operands, template=template)


# numpy's default print options: a template prints with these unless its {!options ...} block says otherwise
_DEFAULT_PRINT_OPTIONS = {"edgeitems": 3, "threshold": 1000, "floatmode": "maxprec", "precision": 8,
                          "suppress": False, "linewidth": 75, "nanstr": "nan", "infstr": "inf", "sign": "-",
                          "formatter": None, "legacy": False, "override_repr": None}
# the options a template records (format 2.9), with the values the C runtime takes
_RECORDED = {"precision": lambda v: isinstance(v, int) and 0 <= v <= 100,
             "threshold": lambda v: isinstance(v, int) and 0 <= v < 2 ** 64,
             "edgeitems": lambda v: isinstance(v, int) and 0 <= v <= 10 ** 9,
             "linewidth": lambda v: isinstance(v, int) and 1 <= v <= 10 ** 9,
             "suppress": lambda v: isinstance(v, (bool, np.bool_)),
             "sign": lambda v: v in ("-", "+", " "),
             "floatmode": lambda v: v in ("maxprec", "unique", "fixed", "maxprec_equal")}
_SIGN_WORDS = {"-": "minus", "+": "plus", " ": "space"}


def _options_block() -> str:
    """The template's {!options ...} block (format 2.9) for numpy's print options now, "" for its defaults:
    the runtime prints arrays with them, as JAX formats with numpy's options. Options the runtime does not
    apply (nanstr, infstr, formatter, legacy, override_repr, and values outside its ranges) warn."""
    current = np.get_printoptions()
    words, ignored = [], []
    for key, value in current.items():
        if key not in _DEFAULT_PRINT_OPTIONS or value == _DEFAULT_PRINT_OPTIONS[key]:
            continue
        check = _RECORDED.get(key)
        if check is None or not check(value):
            ignored.append(f"{key}={value!r}")
            continue
        text = _SIGN_WORDS[value] if key == "sign" else int(value) if key == "suppress" else value
        words.append(f" {key}={text}")
    if ignored:
        warnings.warn(f"kiln.debug.print in compiled code applies numpy's print options precision, threshold, "
                      f"edgeitems, linewidth, suppress, sign and floatmode; the ones set now "
                      f"({', '.join(ignored)}) are not applied", stacklevel=3)
    return "{!options" + "".join(words) + "}" if words else ""


# kiln.jit's record of the traces that printed arrays: each holds numpy's print options when it traced them
_print_option_records: contextvars.ContextVar = contextvars.ContextVar("kiln_print_option_records", default=())


def printed_options() -> dict:
    """numpy's print options as the runtime's templates record them (what a change of them re-traces)."""
    current = np.get_printoptions()
    return {k: current.get(k) for k in _DEFAULT_PRINT_OPTIONS}


def note_print_options(options: dict | None = None) -> None:
    """Tells the traces being recorded (recording_print_options) that they print arrays with these options."""
    for record in _print_option_records.get():
        record.append(printed_options() if options is None else options)


class recording_print_options:
    """Within it, `.options` becomes numpy's print options if anything traced prints an array (else None):
    kiln.jit traces again when they change, so its prints follow numpy's current options, as JAX's do."""

    def __enter__(self):
        self._seen: list = []
        self._token = _print_option_records.set(_print_option_records.get() + (self._seen,))
        return self

    def __exit__(self, *exc):
        _print_option_records.reset(self._token)
        self.options = self._seen[0] if self._seen else None
        return False


def _split_options(template: str) -> tuple[dict, str]:
    """(numpy print options, the rest) of a template with or without its {!options ...} block."""
    if not template.startswith("{!options"):
        return {}, template
    end = template.index("}")
    options = {}
    for word in template[len("{!options"):end].split():
        key, value = word.split("=", 1)
        options[key] = ({v: k for k, v in _SIGN_WORDS.items()}[value] if key == "sign" else bool(int(value))
                        if key == "suppress" else value if key == "floatmode" else int(value))
    return options, template[end + 1:]


def format_template(template: str, values) -> str:
    """A debug.print template filled in with numpy arrays in Python, as the C runtime fills it in."""
    options, body = _split_options(template)
    with np.printoptions(**options):
        return body.format(*[np.asarray(v) for v in values])


# ---- the debug_print primitive: a host step, the VM's debug.print instruction (format 2.8) ----

debug_print_p = register(Primitive("debug_print", multiple_results=True))
debug_print_p.def_traits(fusion="host")
debug_print_p.has_side_effects = True  # kept by dead-code elimination: it has no outputs
debug_print_p.format_params = lambda params: f" {params['template']!r}"

# the format specs the C runtime implements (runtime-c/src/debug_print.c)
_SPEC = re.compile(r"(?:[ -~]?[<>^=])?[-+ ]?0?[0-9]*(?:\.[0-9]+[fFeEgG]|[fFeEgGd])?\Z")
_PRINTABLE_DTYPES = ("float16", "bfloat16", "float32", "float64", "bool", "int8", "int16", "int32",
                     "int64", "uint8", "uint16", "uint32", "uint64", "complex64", "complex128")


@debug_print_p.def_abstract_eval
def _debug_print_abstract(*avals, template: str):
    return []


@debug_print_p.def_impl
def _debug_print_impl(*values, template: str):
    _print(format_template(template, values))
    return []


def _debug_print_jvp(primals, tangents, *, template: str):
    debug_print_p.bind(*primals, template=template)  # the primal values, as JAX prints under grad
    return [], []


def _debug_print_batch(values, dims, *, axis_size: int, template: str):
    from kiln.lax import index_in_dim

    # as JAX's debug_batching_rule: one print per example, in order, with its values
    for i in range(axis_size):
        debug_print_p.bind(*[v if d is None else index_in_dim(v, i, axis=d, keepdims=False)
                             for v, d in zip(values, dims)], template=template)
    return [], []


debug_print_p.jvp_rule = _debug_print_jvp
debug_print_p.batching_rule = _debug_print_batch


class _Operand:
    """A traced (or array) argument of a print, standing in for it while its format is resolved."""

    def __init__(self, value):
        self.value = value


def _template(fmt: str, args: tuple, kwargs: dict) -> tuple[str, list]:
    """The debug.print template of `fmt` (its fields `{N}` / `{N:SPEC}` naming the operands, static
    arguments formatted now, braces doubled) and the operands: every array argument a field names."""
    leaves, tree = tree_flatten((args, kwargs))
    wrapped_args, wrapped_kwargs = tree_unflatten(tree, [_Operand(x) if hasattr(x, "shape") else x for x in leaves])
    formatter = string.Formatter()
    out: list[str] = []
    operands: list = []
    index_of: dict[int, int] = {}
    auto = 0
    try:
        parsed = list(formatter.parse(fmt))
    except ValueError as e:
        raise TracingError(f"kiln.debug.print: format {fmt!r}: {e}") from None
    for literal, field, spec, conversion in parsed:
        out.append(literal.replace("{", "{{").replace("}", "}}"))
        if field is None:
            continue
        if field == "":
            field = str(auto)
            auto += 1
        try:
            obj, _ = formatter.get_field(field, wrapped_args, wrapped_kwargs)
        except (IndexError, KeyError, AttributeError) as e:
            raise TracingError(f"kiln.debug.print: format {fmt!r}: field {{{field}}} names no argument "
                               f"({type(e).__name__}: {e})") from None
        def operand(x) -> int:
            k = index_of.get(id(x))
            if k is None:
                k = index_of[id(x)] = len(operands)
                operands.append(x)
            return k

        if not isinstance(obj, _Operand) and any(isinstance(x, _Operand) for x in tree_flatten(obj)[0]):
            # a container of arrays prints as Python prints it: the repr of each numpy array
            if spec:
                raise TracingError(f"kiln.debug.print: format {fmt!r}: field {{{field}:{spec}}} formats a "
                                   f"{type(obj).__name__}: unsupported format string passed to "
                                   f"{type(obj).__name__}.__format__")
            for leaf in tree_flatten(obj)[0]:
                if isinstance(leaf, _Operand):
                    _check_dtype(fmt, field, leaf.value)
            out.append(_container_template(obj, fmt, field, lambda leaf: operand(leaf.value)))
            continue
        if not isinstance(obj, _Operand):
            value = formatter.convert_field(obj, conversion) if conversion else obj
            if spec and "{" in spec:
                raise TracingError(f"kiln.debug.print: format {fmt!r}: nested fields in the spec of "
                                   f"{{{field}}} are not supported")
            out.append(format(value, spec).replace("{", "{{").replace("}", "}}"))
            continue
        x = obj.value
        aval = _check_dtype(fmt, field, x)
        name = np.dtype(aval.dtype).name
        if conversion is not None:
            if spec:
                raise TracingError(f"kiln.debug.print: format {fmt!r}: field {{{field}!{conversion}:{spec}}}: a "
                                   f"spec after a conversion of a traced array is not supported")
            out.append("{" + str(operand(x)) + "!" + conversion + "}")  # format 2.9
            continue
        if spec and np.dtype(aval.dtype).kind == "c":
            raise TracingError(f"kiln.debug.print: format {fmt!r}: field {{{field}:{spec}}} is {name}: a format "
                               f"spec does not format complex values (format its .real and .imag)")
        if spec:
            if len(aval.shape) != 0:
                raise TracingError(f"kiln.debug.print: format {fmt!r}: field {{{field}:{spec}}} formats an "
                                   f"array of shape {tuple(aval.shape)}: a format spec applies to 0-d "
                                   f"values only (numpy's ndarray.__format__)")
            sample = 0.0 if np.dtype(aval.dtype).kind == "f" or name == "bfloat16" else 0
            try:
                format(sample, spec)
            except ValueError as e:
                raise TracingError(f"kiln.debug.print: format {fmt!r}: spec {spec!r} of {{{field}}} ({name}): "
                                   f"{e}") from None
            if not _SPEC.match(spec):
                raise TracingError(f"kiln.debug.print: format {fmt!r}: spec {spec!r} of {{{field}}} is not "
                                   f"one kiln's runtime formats: [[fill]align][sign][0][width][.precision]"
                                   f"[type] with type f, F, e, E, g, G or d (a precision needs a type)"
                                   f"")
        out.append("{" + str(operand(x)) + (":" + spec if spec else "") + "}")
    return "".join(out), operands


def _check_dtype(fmt: str, field: str, x):
    """The abstract value of a printed array, whose dtype the C runtime prints."""
    aval = x.aval if isinstance(x, Tracer) else ShapedArray(np.shape(x), np.asarray(x).dtype)
    name = np.dtype(aval.dtype).name
    if name not in _PRINTABLE_DTYPES:
        raise TracingError(f"kiln.debug.print: format {fmt!r}: field {{{field}}} is {name}, which the "
                           f"C runtime does not print (it prints bool, integer, float16/bfloat16/float32/"
                           f"float64 and complex64/complex128 values)")
    return aval


def _escape(text: str) -> str:
    return text.replace("{", "{{").replace("}", "}}")


def _container_template(obj, fmt: str, field: str, operand) -> str:
    """The template text of a container holding traced arrays, as Python's str() of it with numpy arrays
    in their places: each array's repr ({N!r}, format 2.9), the other leaves' repr now."""
    if isinstance(obj, _Operand):
        return "{" + str(operand(obj)) + "!r}"
    if not any(isinstance(x, _Operand) for x in tree_flatten(obj)[0]):
        return _escape(repr(obj))

    def inner(v):
        return _container_template(v, fmt, field, operand)

    if isinstance(obj, tuple) and hasattr(obj, "_fields"):  # a namedtuple
        return f"{type(obj).__name__}(" + ", ".join(f"{k}={inner(v)}" for k, v in zip(obj._fields, obj)) + ")"
    if isinstance(obj, tuple):
        return "(" + ", ".join(inner(v) for v in obj) + ("," if len(obj) == 1 else "") + ")"
    if isinstance(obj, list):
        return "[" + ", ".join(inner(v) for v in obj) + "]"
    if isinstance(obj, dict):
        return "{{" + ", ".join(f"{_escape(repr(k))}: {inner(v)}" for k, v in obj.items()) + "}}"
    raise TracingError(f"kiln.debug.print: format {fmt!r}: field {{{field}}} is a {type(obj).__name__} holding "
                       f"traced arrays: kiln prints tuples, lists, dicts and namedtuples of arrays (print its "
                       f"arrays, or convert it)")


def callback(fn, *args, ordered: bool = False, partitioned: bool = False, **kwargs) -> None:
    """Calls ``fn(*args, **kwargs)`` with the values (numpy arrays) for its side effects; its result is dropped.
    Traced, at run time in program order (the VM's debug.callback, format 2.8); a module holding one cannot
    be exported (it needs this process's Python)."""
    leaves, tree = tree_flatten((args, kwargs))
    if not _staged(leaves):
        args, kwargs = tree_unflatten(tree, [np.asarray(x) if hasattr(x, "shape") else x for x in leaves])
        fn(*args, **kwargs)
        return
    from kiln.core.source_info import user_frame_info
    from kiln.vm.runtime import register_host_callback

    dynamic = [i for i, x in enumerate(leaves) if hasattr(x, "shape")]
    static = {i: x for i, x in enumerate(leaves) if not hasattr(x, "shape")}
    name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or type(fn).__name__
    for i in dynamic:
        x = leaves[i]
        dtype = np.dtype((x.aval if isinstance(x, Tracer) else np.asarray(x)).dtype)
        if dtype.kind == "c":
            raise TracingError(f"kiln.debug.callback({name}): argument {i} is {dtype.name}: complex values are "
                               f"not passed to callbacks in compiled code (pass their real and imaginary parts)")

    count = len(leaves)

    def call(*values):  # holds no traced value: the graph holding its number is not kept alive by it
        full = [static[i] if i in static else None for i in range(count)]
        for i, v in zip(dynamic, values):
            full[i] = v
        a, k = tree_unflatten(tree, full)
        fn(*a, **k)

    info = user_frame_info()
    call.kiln_site = f"kiln.debug.callback({name})" + (f" at {info}" if info is not None else "")
    debug_callback_p.bind(*[leaves[i] for i in dynamic], callback=register_host_callback(call), name=name)


# ---- the debug_callback primitive: a host step, the VM's debug.callback instruction (format 2.8) ----

debug_callback_p = register(Primitive("debug_callback", multiple_results=True))
debug_callback_p.def_traits(fusion="host")
debug_callback_p.has_side_effects = True
debug_callback_p.format_params = lambda params: f" {params['name']} #{params['callback']}"


@debug_callback_p.def_abstract_eval
def _debug_callback_abstract(*avals, callback: int, name: str):
    return []


@debug_callback_p.def_impl
def _debug_callback_impl(*values, callback: int, name: str):
    from kiln.vm.runtime import host_callback

    host_callback(callback)(*[np.asarray(v) for v in values])
    return []


def _debug_callback_jvp(primals, tangents, **params):
    debug_callback_p.bind(*primals, **params)
    return [], []


def _debug_callback_batch(values, dims, *, axis_size: int, **params):
    from kiln.lax import index_in_dim

    for i in range(axis_size):  # as JAX's debug_batching_rule: once per example, in order
        debug_callback_p.bind(*[v if d is None else index_in_dim(v, i, axis=d, keepdims=False)
                                for v, d in zip(values, dims)], **params)
    return [], []


debug_callback_p.jvp_rule = _debug_callback_jvp
debug_callback_p.batching_rule = _debug_callback_batch


def exported_callbacks(functions) -> list[str]:
    """Where the debug.callback instructions of these FunctionSpecs were traced ("kiln.debug.callback(fn) at
    file:line"): a module holding one cannot be exported."""
    from kiln.vm.runtime import host_callback

    sites = []
    for f in functions:
        for ins in f.code:
            if getattr(ins, "op", None) == "debug.callback":
                fn = host_callback(ins.operands[0])
                sites.append(getattr(fn, "kiln_site", f"kiln.debug.callback #{ins.operands[0]}"))
    return sites


def breakpoint(*, backend=None, filter_frames=True, num_frames=None, ordered=False, token=None, **kwargs):  # noqa: A001
    """pdb at this line when running eagerly (kiln.disable_jit()); traced, a warning and nothing else."""
    from kiln.core.trace import is_eager

    if is_eager():
        import pdb

        pdb.Pdb().set_trace()
        return token
    warnings.warn("kiln.debug.breakpoint inside a traced function does nothing (kiln's modules do not call back "
                  "into Python); run under kiln.disable_jit() to stop here", stacklevel=2)
    return token


def inspect_array_sharding(value, *, callback) -> None:
    """Calls callback with the sharding of every leaf: the one host device."""
    from kiln.sharding import SingleDeviceSharding

    for _ in tree_flatten(value)[0]:
        callback(SingleDeviceSharding())


def visualize_array_sharding(arr, **kwargs) -> None:
    _print(f"array {tuple(np.shape(arr))}: one shard on CpuDevice(id=0)")


def visualize_sharding(shape, sharding, **kwargs) -> None:
    _print(f"array {tuple(shape)}: one shard on CpuDevice(id=0)")
