"""Python binding of the kiln C runtime (ctypes over libkiln_runtime).

    from kiln.vm.runtime import Instance, Module, Context

    instance = Instance(worker_count=0)            # 0: one worker per core
    module = Module.from_file(instance, "linear.vmfb")
    module.functions                               # [FunctionInfo(name, args, results, ...)]
    ctx = Context(module)                          # the module's globals
    (y,) = ctx.invoke("predict", [x])              # numpy in, numpy out (copies)
    ctx.get_global("_steps"); ctx.set_global("_steps", np.int32(3))
    ctx.set_limits(timeout=2.5, max_steps=None)    # bound every later call on ctx
    ctx.cancel()                                   # from another thread: stop the running call

Errors from the runtime raise :class:`KilnRuntimeError` carrying the C
status code and message. Calls on one Context are serialized by a lock;
different contexts run concurrently (ctypes releases the GIL). Ctrl-C
(SIGINT) during a call made on the main thread cancels the call and raises
KeyboardInterrupt; the context stays usable (see :class:`_CtrlC`).

dtypes: f32 f64 f16 i8 i16 i32 i64 u8 bool map onto the numpy dtypes of the
same name; bf16 maps onto ``ml_dtypes.bfloat16`` when ml_dtypes is installed,
else onto uint16 arrays holding the raw bits (either is accepted as input).

Arguments and globals set from Python: numpy arrays of either byte order and
any layout are copied in as native, C-ordered data; numpy scalars and objects
with ``__array__`` keep their dtype (a mismatch is an error, never a cast);
Python numbers and (nested) lists of them take the declared dtype when that
keeps their kind (see _python_data); masked arrays are refused.
"""
from __future__ import annotations

import ctypes
import math
import operator
import os
import select
import signal
import threading
import time
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from kiln.vm import _native

__all__ = [
    "KilnRuntimeError", "Instance", "Module", "Context", "FunctionInfo", "ValueInfo",
    "GlobalInfo", "CallLimits", "KILN_DTYPES",
]

# ---- status codes ------------------------------------------------------------

OK = 0
INVALID_ARGUMENT = 1
NOT_FOUND = 2
OUT_OF_MEMORY = 3
DATA_LOSS = 4
UNIMPLEMENTED = 5
FAILED_PRECONDITION = 6
INTERNAL = 7
IO = 8
CANCELLED = 9           # Context.cancel() stopped the call
DEADLINE_EXCEEDED = 10  # the call ran past its timeout or max_steps (Context.set_limits)

CODE_NAMES = {
    OK: "OK", INVALID_ARGUMENT: "INVALID_ARGUMENT", NOT_FOUND: "NOT_FOUND",
    OUT_OF_MEMORY: "OUT_OF_MEMORY", DATA_LOSS: "DATA_LOSS", UNIMPLEMENTED: "UNIMPLEMENTED",
    FAILED_PRECONDITION: "FAILED_PRECONDITION", INTERNAL: "INTERNAL", IO: "IO",
    CANCELLED: "CANCELLED", DEADLINE_EXCEEDED: "DEADLINE_EXCEEDED",
}


class KilnRuntimeError(RuntimeError):
    """An error reported by the kiln C runtime: ``code`` (int), ``code_name``, ``message``."""

    def __init__(self, code: int, message: str):
        self.code = int(code)
        self.code_name = CODE_NAMES.get(self.code, f"code {self.code}")
        self.message = message
        super().__init__(message)

    def __repr__(self):
        return f"KilnRuntimeError({self.code_name}, {self.message!r})"


# ---- dtypes -----------------------------------------------------------------

KILN_DTYPES = ("f32", "f64", "i8", "i16", "i32", "i64", "u8", "bool", "f16", "bf16")
_DTYPE_CODE = {name: i for i, name in enumerate(KILN_DTYPES)}

try:  # optional: a real bfloat16 numpy dtype
    import ml_dtypes as _ml_dtypes

    _BF16 = np.dtype(_ml_dtypes.bfloat16)
except ImportError:  # pragma: no cover - depends on the environment
    _BF16 = None

_NUMPY_OF = {
    "f32": np.dtype(np.float32), "f64": np.dtype(np.float64), "i8": np.dtype(np.int8),
    "i16": np.dtype(np.int16), "i32": np.dtype(np.int32), "i64": np.dtype(np.int64),
    "u8": np.dtype(np.uint8), "bool": np.dtype(np.bool_), "f16": np.dtype(np.float16),
    "bf16": _BF16 if _BF16 is not None else np.dtype(np.uint16),
}


def numpy_dtype(kiln_dtype: str) -> np.dtype:
    """The numpy dtype that holds values of a kiln dtype ('f32', ..., 'bf16')."""
    return _NUMPY_OF[kiln_dtype]


_KILN_OF_NUMPY = {dtype: name for name, dtype in _NUMPY_OF.items() if name != "bf16"}
if _BF16 is not None:
    _KILN_OF_NUMPY[_BF16] = "bf16"


def kiln_dtype(dtype, *, expected: str | None = None) -> str | None:
    """The kiln dtype name of a numpy dtype, or None when kiln has none.

    uint16 counts as bf16 (raw bits) only where bf16 is expected."""
    dtype = np.dtype(dtype)
    name = _KILN_OF_NUMPY.get(dtype)
    if name is None and expected == "bf16" and dtype == np.uint16:
        return "bf16"
    return name


# ---- the C library ------------------------------------------------------------

class _ValueInfo(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("dtype", ctypes.c_int), ("rank", ctypes.c_size_t),
                ("shape", ctypes.POINTER(ctypes.c_int64)), ("is_mutable", ctypes.c_int)]


class _Function(ctypes.Structure):
    _fields_ = [("module", ctypes.c_void_p), ("ordinal", ctypes.c_uint32)]


class _InstanceOptions(ctypes.Structure):
    _fields_ = [("worker_count", ctypes.c_uint32)]


class _CallLimits(ctypes.Structure):
    _fields_ = [("timeout_ns", ctypes.c_uint64), ("max_steps", ctypes.c_uint64)]


class _Status(ctypes.c_void_p):
    """kiln_context_invoke's status as ctypes returns it: freed when dropped unless taken.

    Python raises a pending KeyboardInterrupt as soon as a C call returns, before
    the caller can store the result; the object then dies with the status inside.
    """

    __slots__ = ()

    def __del__(self):
        ptr = self.value
        if ptr and _lib_handle is not None:
            _lib_handle.kiln_status_free(ptr)


_lib_lock = threading.Lock()
_lib_handle = None


def _declare(lib):
    P = ctypes.c_void_p
    PP = ctypes.POINTER(ctypes.c_void_p)
    S = ctypes.c_size_t
    sigs = {
        "kiln_status_code": (ctypes.c_int, [P]),
        "kiln_status_message": (ctypes.c_char_p, [P]),
        "kiln_status_free": (None, [P]),
        "kiln_status_code_name": (ctypes.c_char_p, [ctypes.c_int]),
        "kiln_dtype_size": (S, [ctypes.c_int]),
        "kiln_buffer_view_create": (P, [ctypes.c_int, S, ctypes.POINTER(ctypes.c_int64), P, S, P]),
        "kiln_buffer_view_release": (None, [P]),
        "kiln_buffer_view_dtype": (ctypes.c_int, [P]),
        "kiln_buffer_view_rank": (S, [P]),
        "kiln_buffer_view_shape": (ctypes.POINTER(ctypes.c_int64), [P]),
        "kiln_buffer_view_byte_size": (S, [P]),
        "kiln_buffer_view_data": (P, [P]),
        "kiln_instance_options_initialize": (None, [ctypes.POINTER(_InstanceOptions)]),
        "kiln_instance_create": (P, [ctypes.POINTER(_InstanceOptions), PP]),
        "kiln_instance_release": (None, [P]),
        "kiln_instance_worker_count": (ctypes.c_uint32, [P]),
        "kiln_module_load_file": (P, [P, ctypes.c_char_p, PP]),
        "kiln_module_load_memory": (P, [P, ctypes.c_char_p, S, PP]),
        "kiln_module_retain": (None, [P]),
        "kiln_module_release": (None, [P]),
        "kiln_module_name": (ctypes.c_char_p, [P]),
        "kiln_module_function_count": (S, [P]),
        "kiln_module_function_at": (P, [P, S, ctypes.POINTER(_Function)]),
        "kiln_module_lookup_function": (P, [P, ctypes.c_char_p, ctypes.POINTER(_Function)]),
        "kiln_function_name": (ctypes.c_char_p, [_Function]),
        "kiln_function_arg_count": (S, [_Function]),
        "kiln_function_result_count": (S, [_Function]),
        "kiln_function_arg_info": (P, [_Function, S, ctypes.POINTER(_ValueInfo)]),
        "kiln_function_result_info": (P, [_Function, S, ctypes.POINTER(_ValueInfo)]),
        "kiln_function_arg_tree": (ctypes.c_char_p, [_Function]),
        "kiln_function_result_tree": (ctypes.c_char_p, [_Function]),
        "kiln_module_global_count": (S, [P]),
        "kiln_module_global_info": (P, [P, S, ctypes.POINTER(_ValueInfo)]),
        "kiln_context_create": (P, [P, PP]),
        "kiln_context_release": (None, [P]),
        "kiln_context_invoke": (_Status, [P, _Function, PP, S, PP, S]),
        "kiln_context_get_global": (P, [P, ctypes.c_char_p, PP]),
        "kiln_context_set_global": (P, [P, ctypes.c_char_p, P]),
        "kiln_context_set_call_limits": (P, [P, ctypes.POINTER(_CallLimits)]),
        "kiln_context_cancel": (None, [P]),
    }
    for name, (restype, argtypes) in sigs.items():
        fn = getattr(lib, name)
        fn.restype = restype
        fn.argtypes = argtypes


def _lib():
    global _lib_handle
    if _lib_handle is None:
        with _lib_lock:
            if _lib_handle is None:
                lib = ctypes.CDLL(_native.runtime_library_path())
                _declare(lib)
                _lib_handle = lib
    return _lib_handle


def _check(status) -> None:
    """Raises KilnRuntimeError for a non-NULL status (a pointer or a _Status), freeing it."""
    if isinstance(status, _Status):
        ptr, status.value = status.value, None
        status = ptr
    if status:
        lib = _lib()
        code = lib.kiln_status_code(status)
        message = lib.kiln_status_message(status).decode("utf-8", "replace")
        lib.kiln_status_free(status)
        raise KilnRuntimeError(code, message)


def _text(value: bytes | None) -> str:
    return value.decode("utf-8", "replace") if value is not None else ""


def _format_type(dtype: str, shape: Sequence[int]) -> str:
    return "x".join([*(str(d) for d in shape), dtype])


# ---- reflection ---------------------------------------------------------------

@dataclass(frozen=True)
class ValueInfo:
    """An argument or result: name, kiln dtype ('f32'), numpy dtype, shape."""
    name: str
    kiln_dtype: str
    dtype: np.dtype
    shape: tuple[int, ...]

    @property
    def type_str(self) -> str:
        return _format_type(self.kiln_dtype, self.shape)


@dataclass(frozen=True)
class GlobalInfo:
    name: str
    kiln_dtype: str
    dtype: np.dtype
    shape: tuple[int, ...]
    mutable: bool

    @property
    def type_str(self) -> str:
        return _format_type(self.kiln_dtype, self.shape)


@dataclass(frozen=True)
class FunctionInfo:
    """An exported function: its arguments and results and their tree structures (JSON)."""
    name: str
    args: tuple[ValueInfo, ...]
    results: tuple[ValueInfo, ...]
    arg_tree: str
    result_tree: str

    @property
    def signature(self) -> str:
        args = ", ".join(f"{a.name or f'arg{i}'}: {a.type_str}" for i, a in enumerate(self.args))
        results = ", ".join(r.type_str for r in self.results)
        return f"{self.name}({args}) -> ({results})"


def _value_info(info: _ValueInfo) -> tuple[str, str, np.dtype, tuple[int, ...]]:
    dtype = KILN_DTYPES[info.dtype] if 0 <= info.dtype < len(KILN_DTYPES) else f"dtype{info.dtype}"
    shape = tuple(int(info.shape[i]) for i in range(info.rank))
    return _text(info.name), dtype, _NUMPY_OF.get(dtype), shape


# ---- objects ----------------------------------------------------------------

class _Handle:
    """Owns one C reference; released by close() or when collected."""

    _release_name = ""

    def __init__(self):
        self._ptr = None

    def close(self) -> None:
        ptr, self._ptr = self._ptr, None
        if ptr and _lib_handle is not None:
            getattr(_lib_handle, self._release_name)(ptr)

    def __del__(self):
        try:
            self.close()
        except Exception:  # interpreter shutdown
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    @property
    def _handle(self):
        if not self._ptr:
            raise ValueError(f"{type(self).__name__} is closed")
        return self._ptr


_UINT32_MAX = 2**32 - 1


def check_worker_count(worker_count, where: str) -> int:
    """worker_count as an int, or a ValueError naming `where`.

    The C option is a uint32 that ctypes would silently wrap; counts that fit
    but exceed the runtime's own maximum are refused when the instance starts."""
    try:
        if isinstance(worker_count, bool):
            raise TypeError
        worker_count = operator.index(worker_count)
    except TypeError:
        raise ValueError(f"{where}: worker_count must be an int (0: one worker per core), "
                         f"got {worker_count!r}") from None
    if worker_count < 0:
        raise ValueError(f"{where}: worker_count must be 0 (one worker per core) or more, "
                         f"got {worker_count}")
    if worker_count > _UINT32_MAX:
        raise ValueError(f"{where}: worker_count {worker_count} is too large")
    return worker_count


class Instance(_Handle):
    """The runtime instance: the worker threads that run kernels (0: one per core).

    A worker count the runtime cannot take raises ValueError."""

    _release_name = "kiln_instance_release"

    def __init__(self, worker_count: int = 0):
        super().__init__()
        worker_count = check_worker_count(worker_count, "Instance")
        lib = _lib()
        options = _InstanceOptions()
        lib.kiln_instance_options_initialize(ctypes.byref(options))
        options.worker_count = worker_count
        out = ctypes.c_void_p()
        try:
            _check(lib.kiln_instance_create(ctypes.byref(options), ctypes.byref(out)))
        except KilnRuntimeError as e:
            if e.code != INVALID_ARGUMENT:
                raise
            raise ValueError(e.message) from None  # above the runtime's maximum
        self._ptr = out.value

    @property
    def worker_count(self) -> int:
        return int(_lib().kiln_instance_worker_count(self._handle))


class _Reflection:
    """A module's functions and globals, read from a C module pointer and cached.

    Shared by the Module and its Contexts: each keeps the C module alive while it
    uses this (a Context holds its own reference), so a Context outlives Module.close().
    """

    def __init__(self, ptr):
        self.ptr = ptr
        self.functions: list[FunctionInfo] | None = None
        self.globals: list[GlobalInfo] | None = None
        self.by_name: dict[str, tuple[_Function, FunctionInfo]] = {}
        self.global_by_name: dict[str, GlobalInfo] | None = None

    def function_info(self, fn: _Function) -> FunctionInfo:
        lib = _lib()

        def infos(count, getter):
            out = []
            for i in range(count):
                info = _ValueInfo()
                _check(getter(fn, i, ctypes.byref(info)))
                name, kdtype, dtype, shape = _value_info(info)
                out.append(ValueInfo(name, kdtype, dtype, shape))
            return tuple(out)

        return FunctionInfo(
            name=_text(lib.kiln_function_name(fn)),
            args=infos(lib.kiln_function_arg_count(fn), lib.kiln_function_arg_info),
            results=infos(lib.kiln_function_result_count(fn), lib.kiln_function_result_info),
            arg_tree=_text(lib.kiln_function_arg_tree(fn)),
            result_tree=_text(lib.kiln_function_result_tree(fn)),
        )

    def all_functions(self) -> list[FunctionInfo]:
        if self.functions is None:
            lib = _lib()
            found = []
            for i in range(lib.kiln_module_function_count(self.ptr)):
                fn = _Function()
                _check(lib.kiln_module_function_at(self.ptr, i, ctypes.byref(fn)))
                found.append(self.function_info(fn))
            self.functions = found
        return self.functions

    def resolve(self, name: str) -> tuple[_Function, FunctionInfo]:
        """The C function handle and its description (cached: modules are immutable)."""
        found = self.by_name.get(name)
        if found is None:
            fn = _Function()
            _check(_lib().kiln_module_lookup_function(self.ptr, name.encode(), ctypes.byref(fn)))
            found = (fn, self.function_info(fn))
            self.by_name[name] = found
        return found

    def all_globals(self) -> list[GlobalInfo]:
        if self.globals is None:
            lib = _lib()
            found = []
            for i in range(lib.kiln_module_global_count(self.ptr)):
                info = _ValueInfo()
                _check(lib.kiln_module_global_info(self.ptr, i, ctypes.byref(info)))
                name, kdtype, dtype, shape = _value_info(info)
                found.append(GlobalInfo(name, kdtype, dtype, shape, bool(info.is_mutable)))
            self.globals = found
            self.global_by_name = {g.name: g for g in found}
        return self.globals

    def global_info(self, name: str) -> GlobalInfo | None:
        self.all_globals()
        return self.global_by_name.get(name)


class Module(_Handle):
    """A verified, immutable module; shareable between contexts and threads."""

    _release_name = "kiln_module_release"

    def __init__(self, instance: Instance, ptr):
        super().__init__()
        self._instance = instance  # keeps the instance (and its threads) alive
        self._ptr = ptr
        self._reflection = _Reflection(ptr)

    @classmethod
    def from_bytes(cls, instance: Instance, data) -> "Module":
        data = bytes(data)
        out = ctypes.c_void_p()
        _check(_lib().kiln_module_load_memory(instance._handle, data, len(data), ctypes.byref(out)))
        return cls(instance, out.value)

    @classmethod
    def from_file(cls, instance: Instance, path) -> "Module":
        out = ctypes.c_void_p()
        _check(_lib().kiln_module_load_file(instance._handle, os.fsencode(path), ctypes.byref(out)))
        return cls(instance, out.value)

    @property
    def instance(self) -> Instance:
        return self._instance

    @property
    def name(self) -> str:
        return _text(_lib().kiln_module_name(self._handle))

    @property
    def functions(self) -> list[FunctionInfo]:
        """Exported functions, in module order."""
        self._handle  # noqa: B018 - raises when closed
        return list(self._reflection.all_functions())

    def function(self, name: str) -> FunctionInfo:
        """The exported function `name` (KilnRuntimeError NOT_FOUND otherwise)."""
        self._handle  # noqa: B018 - raises when closed
        return self._reflection.resolve(name)[1]

    @property
    def globals(self) -> list[GlobalInfo]:
        self._handle  # noqa: B018 - raises when closed
        return list(self._reflection.all_globals())

    def __repr__(self):
        return f"<kiln Module {self.name!r}: {len(self.functions)} functions>" if self._ptr else "<closed Module>"


_SHAPE_TYPES = [ctypes.c_int64 * max(n, 1) for n in range(17)]
_VIEW_ARRAYS = [ctypes.c_void_p * max(n, 1) for n in range(9)]
_PTR_SIZE = ctypes.sizeof(ctypes.c_void_p)


def _views(n: int):
    """A zeroed C array of n buffer view pointers."""
    return (_VIEW_ARRAYS[n] if n < len(_VIEW_ARRAYS) else ctypes.c_void_p * n)()


def _address(array: np.ndarray) -> int:
    """The address of a C-contiguous array's data (without building numpy's ctypes helper)."""
    try:
        return ctypes.addressof(ctypes.c_char.from_buffer(array))
    except (TypeError, ValueError):  # read-only, or no buffer format for its dtype (bfloat16)
        return array.ctypes.data


def _label(what) -> str:
    """What a conversion error names: a text, or (function, index, ValueInfo | None) of an argument."""
    if isinstance(what, str):
        return what
    name, i, expected = what
    return f"{name}: argument {i}" + (f" '{expected.name}'" if expected is not None else "")


# The kinds of values that Python data of each kind converts into without loss of kind.
_KIND_OF = {"f32": "f", "f64": "f", "f16": "f", "bf16": "f", "i8": "i", "i16": "i", "i32": "i",
            "i64": "i", "u8": "i", "bool": "b"}
_CONVERTS_TO = {"b": "bif", "i": "if", "u": "if", "f": "f"}
_KIND_NAMES = {"b": "bool", "i": "int", "u": "int", "f": "float"}


def _python_data(value, expected: ValueInfo | GlobalInfo | None, what) -> np.ndarray:
    """A Python scalar, or (nested) list or tuple of them, as an array of the declared dtype.

    Python values are weakly typed, as in kiln's tracing: they take the declared
    dtype where that keeps their kind (a bool converts to anything, an int to an
    integer or float dtype, a float to a float dtype); anything else, or an int out
    of the dtype's range, is an INVALID_ARGUMENT rather than a silent change."""
    natural = np.asarray(value)
    kind = natural.dtype.kind
    if kind == "O" and all(isinstance(v, int) for v in natural.flat):  # beyond int64 and uint64
        kind = "i"
    if expected is None or expected.dtype is None or kind not in _CONVERTS_TO:
        return natural  # the dtype check that follows reports what is unsupported
    target = _KIND_OF[expected.kiln_dtype]
    got = f"Python {_KIND_NAMES[kind]}" + (f" {value!r}" if natural.ndim == 0 else "s")
    if natural.size and target not in _CONVERTS_TO[kind]:
        raise KilnRuntimeError(INVALID_ARGUMENT, f"{_label(what)} expects {expected.type_str}, got "
                               f"{got}, which {expected.kiln_dtype} cannot hold without changing kind; "
                               f"pass an array of that dtype")
    if expected.kiln_dtype == "bf16" and _BF16 is None:
        raise KilnRuntimeError(INVALID_ARGUMENT, f"{_label(what)}: converting {got} to bf16 needs "
                               "ml_dtypes; pass the raw bfloat16 bits as uint16")
    try:
        return np.asarray(value, dtype=expected.dtype)
    except OverflowError:
        raise KilnRuntimeError(INVALID_ARGUMENT, f"{_label(what)} expects {expected.type_str}, got "
                               f"{got}, out of {expected.kiln_dtype}'s range") from None


def _to_view(value, expected: ValueInfo | GlobalInfo | None, what, out: int) -> None:
    """Writes to `out` (the address of a view pointer) a new C buffer view holding a copy of
    `value` (a numpy array or array-like); `what` names it in errors (see _label).

    Writing through `out` rather than returning keeps the view reachable for the
    caller's cleanup when a KeyboardInterrupt is raised as the C call returns."""
    if not isinstance(value, np.ndarray):
        if isinstance(value, (bool, int, float, list, tuple)) and not isinstance(value, np.generic):
            value = _python_data(value, expected, what)
        else:  # numpy scalars and objects with __array__ keep their dtype
            value = np.asarray(value)
    elif isinstance(value, np.ma.MaskedArray):
        raise KilnRuntimeError(
            INVALID_ARGUMENT, f"{_label(what)} is a numpy masked array: kiln has no masks and would "
            "drop the mask; pass np.ma.filled(x, fill_value) or x.data")
    dtype = value.dtype
    kdtype = _KILN_OF_NUMPY.get(dtype)
    if kdtype is None:
        if not dtype.isnative:
            value = value.astype(dtype.newbyteorder("="))
        kdtype = kiln_dtype(value.dtype, expected=expected.kiln_dtype if expected else None)
        if kdtype is None:
            want = f"expects {expected.type_str}, " if expected is not None else ""
            raise KilnRuntimeError(
                INVALID_ARGUMENT, f"{_label(what)} {want}got numpy dtype {value.dtype} (kiln supports "
                f"float32 float64 float16 bfloat16 int8 int16 int32 int64 uint8 bool)")
    # (np.ascontiguousarray would turn a 0-d array into a 1-d one)
    array = value if value.flags.c_contiguous else np.ascontiguousarray(value)
    ndim = array.ndim
    if ndim > 16:
        raise KilnRuntimeError(INVALID_ARGUMENT, f"{_label(what)} has rank {ndim}: expected at most 16")
    shape = _SHAPE_TYPES[ndim](*array.shape)
    nbytes = array.nbytes
    _check(_lib().kiln_buffer_view_create(_DTYPE_CODE[kdtype], ndim, shape,
                                          _address(array) if nbytes else None, nbytes, out))


def _from_view(view, expected: ValueInfo | None = None) -> np.ndarray:
    """A numpy copy of a C buffer view (the view is not released).

    `expected`, the declared type of a result, saves querying dtype and shape."""
    lib = _lib()
    nbytes = lib.kiln_buffer_view_byte_size(view)
    array = None
    if expected is not None and expected.dtype is not None:
        array = np.empty(expected.shape, dtype=expected.dtype)
        if array.nbytes != nbytes or \
                lib.kiln_buffer_view_dtype(view) != _DTYPE_CODE[expected.kiln_dtype]:
            array = None
    if array is None:
        code = lib.kiln_buffer_view_dtype(view)
        rank = lib.kiln_buffer_view_rank(view)
        shape_ptr = lib.kiln_buffer_view_shape(view)
        shape = tuple(int(shape_ptr[i]) for i in range(rank))
        array = np.empty(shape, dtype=_NUMPY_OF[KILN_DTYPES[code]])
        if nbytes != array.nbytes:
            raise KilnRuntimeError(INTERNAL, f"buffer of {nbytes} bytes for shape {shape}, "
                                             f"dtype {KILN_DTYPES[code]}")
    if nbytes:
        ctypes.memmove(_address(array), lib.kiln_buffer_view_data(view), nbytes)
    return array


# ---- Ctrl-C ---------------------------------------------------------------------

_MAIN_THREAD = threading.main_thread().ident


class _CtrlC:
    """Makes Ctrl-C (SIGINT) cancel a call that the main thread is making into the runtime.

    Python runs its SIGINT handler, which raises KeyboardInterrupt, in the main
    thread between bytecodes: a call blocked in C would notice only when it
    returns, which a never-ending loop never does. For the duration of a call
    on the main thread, the signal wakeup fd (signal.set_wakeup_fd) points
    Python's C-level signal handler at a pipe that a watcher thread reads. On
    SIGINT, when Python's handler for it is the default one, the watcher
    cancels the call (kiln_context_cancel, repeated every few milliseconds
    until the call returns, which also covers a SIGINT that lands just before
    the call starts); the call returns CANCELLED, having released what it
    allocated, and Python raises the KeyboardInterrupt as the call returns.
    A wakeup fd set before the call (asyncio's, for example) gets every byte
    forwarded and is restored afterwards.

    Why this scheme: the call stays on the calling thread and costs two
    wakeup fd swaps and a lock (about a microsecond) per call; running
    the call on a helper thread while the main thread waits interruptibly
    costs a thread hand-off per call (10 to 70 us measured, with the GIL).
    Calls from other threads are not touched (Python delivers
    KeyboardInterrupt to the main thread only); Context.cancel() and
    set_limits() bound those.
    """

    def __init__(self):
        self._reset()
        if hasattr(os, "register_at_fork"):
            os.register_at_fork(after_in_child=self._forget)

    def _reset(self) -> None:
        self._lock = threading.Lock()  # orders the watcher's cancel against a call's end
        self._read_fd = self._write_fd = -1
        self._poll = None
        self._active = None       # the main thread's call: [context pointer, cancelled by SIGINT]
        self._forward = -1        # the wakeup fd that was set before that call
        self._last_previous = -1  # the same, kept after the call

    def _start(self) -> None:
        read_fd, write_fd = os.pipe()
        os.set_blocking(read_fd, False)
        os.set_blocking(write_fd, False)  # Python's handler must never block on it
        self._poll = select.poll()
        self._poll.register(read_fd, select.POLLIN)
        self._read_fd, self._write_fd = read_fd, write_fd
        try:
            threading.Thread(target=self._watch, args=(read_fd,), name="kiln-ctrl-c", daemon=True).start()
        except BaseException:
            self._forget()
            raise

    def _forget(self) -> None:
        """Closes the pipe and starts afresh on the next call (in a forked child, whose watcher
        thread is gone, or when the watcher could not start)."""
        fds = self._read_fd, self._write_fd
        self._reset()  # first: an old watcher then sees the pipe is no longer ours and stops
        for fd in fds:
            if fd >= 0:
                try:
                    os.close(fd)
                except OSError:
                    pass

    def invoke(self, *call) -> _Status:
        """kiln_context_invoke(*call) made on the main thread, cancelled by SIGINT."""
        c_invoke = _lib_handle.kiln_context_invoke
        if self._write_fd < 0:
            try:
                self._start()
            except (OSError, RuntimeError):  # no pipe or thread to be had: an uninterruptible call
                return c_invoke(*call)
        outer = self._active, self._forward  # a call from a signal handler nests
        try:
            previous = signal.set_wakeup_fd(self._write_fd, warn_on_full_buffer=False)
        except ValueError:  # not the main interpreter's main thread: no signals here
            return c_invoke(*call)
        except BaseException:  # a KeyboardInterrupt raised as it returned, its result lost
            self._restore(self._last_previous)
            raise
        try:
            if previous != self._write_fd:
                self._forward = self._last_previous = previous
            self._active = token = [call[0], False]
            status = c_invoke(*call)
        finally:
            self._restore(previous)
            with self._lock:
                if previous >= 0 and self._poll.poll(0):  # bytes the watcher has not passed on
                    self._pass_on(os.read(self._read_fd, 4096))
                self._active, self._forward = outer
        if token[1] and status.value and \
                _lib_handle.kiln_status_code(status.value) == CANCELLED:
            # a SIGINT whose KeyboardInterrupt Python raised before this call began
            # reached the watcher only now: it interrupts this call instead
            raise KeyboardInterrupt
        return status

    @staticmethod
    def _restore(fd: int) -> None:
        try:
            signal.set_wakeup_fd(fd)
        except (ValueError, OSError):  # closed meanwhile
            signal.set_wakeup_fd(-1)

    def _pass_on(self, data: bytes) -> None:
        """Forwards signal bytes to the wakeup fd our pipe replaced (under the lock)."""
        if self._forward >= 0:
            try:
                os.write(self._forward, data)
            except OSError:  # full or closed: Python's own handler would drop them too
                pass

    def _watch(self, read_fd: int) -> None:
        while True:
            try:
                select.select([read_fd], [], [])
            except (OSError, ValueError):  # closed
                return
            with self._lock:
                if read_fd != self._read_fd:
                    return
                try:
                    data = os.read(read_fd, 4096)
                except BlockingIOError:  # the calling thread took them
                    continue
                except OSError:  # closed
                    return
                self._pass_on(data)
                call = self._active
            if call is None or signal.SIGINT not in data \
                    or signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
                continue
            call[1] = True
            while True:
                with self._lock:
                    if self._active is not call:
                        break
                    _lib_handle.kiln_context_cancel(call[0])
                time.sleep(0.005)


_CTRL_C = _CtrlC()


# ---- contexts -------------------------------------------------------------------

@dataclass(frozen=True)
class CallLimits:
    """Bounds on each call on a Context: timeout in seconds of wall-clock time, max_steps in
    bytecode instructions (callees included; deterministic, unlike the timeout); None: no bound.
    Invalid values raise ValueError."""
    timeout: float | None = None
    max_steps: int | None = None

    def __post_init__(self):
        timeout, steps = self.timeout, self.max_steps
        if timeout is not None:
            try:
                if isinstance(timeout, (bool, str, bytes)):
                    raise TypeError
                seconds = float(timeout)
            except (TypeError, ValueError, OverflowError):
                seconds = math.nan
            if not 0 < seconds < 2**64 / 1e9:  # (False for nan)
                raise ValueError(f"timeout must be a positive, finite number of seconds or None, "
                                 f"got {timeout!r}")
            object.__setattr__(self, "timeout", seconds)
        if steps is not None:
            try:
                if isinstance(steps, bool):
                    raise TypeError
                count = operator.index(steps)
            except TypeError:
                count = 0
            if not 1 <= count < 2**64:
                raise ValueError(f"max_steps must be an int from 1 to 2**64-1 or None, got {steps!r}")
            object.__setattr__(self, "max_steps", count)

    def _as_c(self) -> _CallLimits:
        # at least 1 ns: 0 means no limit in C
        timeout_ns = max(1, round(self.timeout * 1e9)) if self.timeout is not None else 0
        return _CallLimits(timeout_ns, self.max_steps or 0)


class Context(_Handle):
    """A module's globals (mutable state) and the calls that use them.

    The context holds its own reference to the C module, so it keeps working
    after its Module object is closed.
    """

    _release_name = "kiln_context_release"

    def __init__(self, module: Module):
        super().__init__()
        self._module = module
        self._lock = threading.Lock()         # serializes calls (the C API requires it)
        self._cancel_lock = threading.Lock()  # keeps the pointer alive during cancel()
        self._limits = CallLimits()
        lib = _lib()
        module_ptr = module._handle
        self._reflection = module._reflection
        out = ctypes.c_void_p()
        _check(lib.kiln_context_create(module_ptr, ctypes.byref(out)))
        lib.kiln_module_retain(module_ptr)
        self._module_ptr = module_ptr
        self._ptr = out.value

    def close(self) -> None:
        """Releases the context (waiting for a call in progress to return)."""
        with self._lock, self._cancel_lock:
            super().close()
            module_ptr, self._module_ptr = getattr(self, "_module_ptr", None), None
            if module_ptr and _lib_handle is not None:
                _lib_handle.kiln_module_release(module_ptr)

    @property
    def module(self) -> Module:
        return self._module

    @property
    def limits(self) -> CallLimits:
        """The bounds every call on this context runs under (set_limits)."""
        return self._limits

    def set_limits(self, *, timeout: float | None = None, max_steps: int | None = None) -> None:
        """Bounds every later call: `timeout` seconds of wall-clock time, `max_steps`
        bytecode instructions; a call past either fails with KilnRuntimeError
        DEADLINE_EXCEEDED and the context stays usable. None removes a bound.

        The runtime checks before each dispatch and call and at each backward
        branch: a kernel that has started runs to its end.
        """
        limits = CallLimits(timeout, max_steps)
        c_limits = limits._as_c()
        with self._lock:
            _check(_lib().kiln_context_set_call_limits(self._handle, ctypes.byref(c_limits)))
            self._limits = limits

    def cancel(self) -> None:
        """Stops the call running on this context, from any thread: it fails with
        KilnRuntimeError CANCELLED (globals keep what it stored before stopping).
        Does nothing when no call is running; later calls are not affected."""
        with self._cancel_lock:
            _lib().kiln_context_cancel(self._handle)

    def invoke(self, name: str, args: Sequence = ()) -> list[np.ndarray]:
        """Calls exported function `name` with numpy arrays; returns its results (copies)."""
        lib = _lib()
        self._handle  # noqa: B018 - raises when closed
        fn, info = self._reflection.resolve(name)
        args = args if isinstance(args, (list, tuple)) else list(args)
        n_args, n_results = len(args), len(info.results)
        views = _views(n_args)
        results = _views(n_results)
        address = ctypes.addressof(views)
        try:
            for i, value in enumerate(args):
                expected = info.args[i] if i < len(info.args) else None
                _to_view(value, expected, (name, i, expected), address + i * _PTR_SIZE)
            with self._lock:
                ptr = self._handle
                if threading.get_ident() == _MAIN_THREAD:
                    status = _CTRL_C.invoke(ptr, fn, views, n_args, results, n_results)
                else:
                    status = lib.kiln_context_invoke(ptr, fn, views, n_args, results, n_results)
            _check(status)
            return [_from_view(results[i], info.results[i]) for i in range(n_results)]
        finally:
            for i in range(n_results):
                if results[i]:
                    lib.kiln_buffer_view_release(results[i])
            for i in range(n_args):
                if views[i]:
                    lib.kiln_buffer_view_release(views[i])

    def get_global(self, name: str) -> np.ndarray:
        """A copy of global `name`'s current value."""
        lib = _lib()
        out = ctypes.c_void_p()
        try:
            with self._lock:
                _check(lib.kiln_context_get_global(self._handle, name.encode(), ctypes.byref(out)))
            return _from_view(out.value)
        finally:
            if out.value:
                lib.kiln_buffer_view_release(out.value)

    def set_global(self, name: str, value) -> None:
        """Replaces global `name`'s value with a copy of `value` (dtype and shape must match)."""
        lib = _lib()
        self._handle  # noqa: B018 - raises when closed
        view = ctypes.c_void_p()
        try:
            _to_view(value, self._reflection.global_info(name), f"set_global '{name}':",
                     ctypes.addressof(view))
            with self._lock:
                _check(lib.kiln_context_set_global(self._handle, name.encode(), view))
        finally:
            if view.value:
                lib.kiln_buffer_view_release(view.value)

    def globals(self) -> dict[str, np.ndarray]:
        """Every global's current value, by name."""
        return {g.name: self.get_global(g.name) for g in self._reflection.all_globals()}
