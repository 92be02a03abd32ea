"""Python binding of the kiln C runtime (ctypes over libkiln_runtime).

    from kiln.vm.runtime import Instance, Module, Context

    instance = Instance(worker_count=0)            # 0: one worker per core
    module = Module.from_file(instance, "linear.vmfb")
    module.functions                               # [FunctionInfo(name, args, results, ...)]
    ctx = Context(module)                          # the module's globals
    (y,) = ctx.invoke("predict", [x])              # numpy in, numpy out (copies)
    ctx.get_global("_steps"); ctx.set_global("_steps", np.int32(3))

Errors from the runtime raise :class:`KilnRuntimeError` carrying the C
status code and message. Calls on one Context are serialized by a lock;
different contexts run concurrently (ctypes releases the GIL).

dtypes: f32 f64 f16 i8 i16 i32 i64 u8 bool map onto the numpy dtypes of the
same name; bf16 maps onto ``ml_dtypes.bfloat16`` when ml_dtypes is installed,
else onto uint16 arrays holding the raw bits (either is accepted as input).
"""
from __future__ import annotations

import ctypes
import os
import threading
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from kiln.vm import _native

__all__ = [
    "KilnRuntimeError", "Instance", "Module", "Context", "FunctionInfo", "ValueInfo",
    "GlobalInfo", "KILN_DTYPES",
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

CODE_NAMES = {
    OK: "OK", INVALID_ARGUMENT: "INVALID_ARGUMENT", NOT_FOUND: "NOT_FOUND",
    OUT_OF_MEMORY: "OUT_OF_MEMORY", DATA_LOSS: "DATA_LOSS", UNIMPLEMENTED: "UNIMPLEMENTED",
    FAILED_PRECONDITION: "FAILED_PRECONDITION", INTERNAL: "INTERNAL", IO: "IO",
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
        "kiln_buffer_view_create": (P, [ctypes.c_int, S, ctypes.POINTER(ctypes.c_int64), P, S, PP]),
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
        "kiln_context_invoke": (P, [P, _Function, PP, S, PP, S]),
        "kiln_context_get_global": (P, [P, ctypes.c_char_p, PP]),
        "kiln_context_set_global": (P, [P, ctypes.c_char_p, P]),
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


class Instance(_Handle):
    """The runtime instance: the worker threads that run kernels (0: one per core)."""

    _release_name = "kiln_instance_release"

    def __init__(self, worker_count: int = 0):
        super().__init__()
        if not isinstance(worker_count, int) or worker_count < 0:
            raise ValueError(f"worker_count must be a non-negative int, got {worker_count!r}")
        lib = _lib()
        options = _InstanceOptions()
        lib.kiln_instance_options_initialize(ctypes.byref(options))
        options.worker_count = worker_count
        out = ctypes.c_void_p()
        _check(lib.kiln_instance_create(ctypes.byref(options), ctypes.byref(out)))
        self._ptr = out.value

    @property
    def worker_count(self) -> int:
        return int(_lib().kiln_instance_worker_count(self._handle))


class Module(_Handle):
    """A verified, immutable module; shareable between contexts and threads."""

    _release_name = "kiln_module_release"

    def __init__(self, instance: Instance, ptr):
        super().__init__()
        self._instance = instance  # keeps the instance (and its threads) alive
        self._ptr = ptr
        self._functions = None
        self._globals = None
        self._by_name: dict[str, tuple[_Function, FunctionInfo]] = {}

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

    def _function_info(self, fn: _Function) -> FunctionInfo:
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

    @property
    def functions(self) -> list[FunctionInfo]:
        """Exported functions, in module order."""
        if self._functions is None:
            lib = _lib()
            found = []
            for i in range(lib.kiln_module_function_count(self._handle)):
                fn = _Function()
                _check(lib.kiln_module_function_at(self._handle, i, ctypes.byref(fn)))
                found.append(self._function_info(fn))
            self._functions = found
        return list(self._functions)

    def function(self, name: str) -> FunctionInfo:
        """The exported function `name` (KilnRuntimeError NOT_FOUND otherwise)."""
        return self._resolve(name)[1]

    def _resolve(self, name: str) -> tuple[_Function, FunctionInfo]:
        """The C function handle and its description (cached: modules are immutable)."""
        found = self._by_name.get(name)
        if found is None:
            fn = _Function()
            _check(_lib().kiln_module_lookup_function(self._handle, name.encode(),
                                                      ctypes.byref(fn)))
            found = (fn, self._function_info(fn))
            self._by_name[name] = found
        return found

    @property
    def globals(self) -> list[GlobalInfo]:
        if self._globals is None:
            lib = _lib()
            found = []
            for i in range(lib.kiln_module_global_count(self._handle)):
                info = _ValueInfo()
                _check(lib.kiln_module_global_info(self._handle, i, ctypes.byref(info)))
                name, kdtype, dtype, shape = _value_info(info)
                found.append(GlobalInfo(name, kdtype, dtype, shape, bool(info.is_mutable)))
            self._globals = found
        return list(self._globals)

    def __repr__(self):
        return f"<kiln Module {self.name!r}: {len(self.functions)} functions>" if self._ptr else "<closed Module>"


_SHAPE_TYPES = [ctypes.c_int64 * max(n, 1) for n in range(17)]


def _to_view(value, expected: ValueInfo | GlobalInfo | None, what: str):
    """A new C buffer view holding a copy of `value` (a numpy array or array-like)."""
    if not isinstance(value, np.ndarray):
        if isinstance(value, np.generic):
            value = np.asarray(value)
        else:
            value = np.asarray(value, dtype=expected.dtype if expected is not None else None)
    dtype = value.dtype
    kdtype = _KILN_OF_NUMPY.get(dtype)
    if kdtype is None:
        if not dtype.isnative:
            value = value.astype(dtype.newbyteorder("="))
        kdtype = kiln_dtype(value.dtype, expected=expected.kiln_dtype if expected else None)
        if kdtype is None:
            want = f"expects {expected.type_str}, " if expected is not None else ""
            raise KilnRuntimeError(
                INVALID_ARGUMENT, f"{what} {want}got numpy dtype {value.dtype} (kiln supports "
                f"float32 float64 float16 bfloat16 int8 int16 int32 int64 uint8 bool)")
    # (np.ascontiguousarray would turn a 0-d array into a 1-d one)
    array = value if value.flags.c_contiguous else np.ascontiguousarray(value)
    ndim = array.ndim
    if ndim > 16:
        raise KilnRuntimeError(INVALID_ARGUMENT, f"{what} has rank {ndim}: expected at most 16")
    shape = _SHAPE_TYPES[ndim](*array.shape)
    nbytes = array.nbytes
    out = ctypes.c_void_p()
    _check(_lib().kiln_buffer_view_create(_DTYPE_CODE[kdtype], ndim, shape,
                                          array.ctypes.data if nbytes else None,
                                          nbytes, ctypes.byref(out)))
    return out.value


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
        ctypes.memmove(array.ctypes.data, lib.kiln_buffer_view_data(view),
                       nbytes)
    return array


class Context(_Handle):
    """A module's globals (mutable state) and the calls that use them."""

    _release_name = "kiln_context_release"

    def __init__(self, module: Module):
        super().__init__()
        self._module = module
        self._lock = threading.Lock()
        out = ctypes.c_void_p()
        _check(_lib().kiln_context_create(module._handle, ctypes.byref(out)))
        self._ptr = out.value

    @property
    def module(self) -> Module:
        return self._module

    def invoke(self, name: str, args: Sequence = ()) -> list[np.ndarray]:
        """Calls exported function `name` with numpy arrays; returns its results (copies)."""
        lib = _lib()
        fn, info = self._module._resolve(name)
        args = list(args)
        views = (ctypes.c_void_p * max(len(args), 1))()
        results = (ctypes.c_void_p * max(len(info.results), 1))()
        made = 0
        try:
            for i, value in enumerate(args):
                expected = info.args[i] if i < len(info.args) else None
                label = f"{name}: argument {i}" + (f" '{expected.name}'" if expected else "")
                views[i] = _to_view(value, expected, label)
                made = i + 1
            with self._lock:
                _check(lib.kiln_context_invoke(self._handle, fn, views, len(args), results,
                                               len(info.results)))
            try:
                return [_from_view(results[i], info.results[i])
                        for i in range(len(info.results))]
            finally:
                for i in range(len(info.results)):
                    lib.kiln_buffer_view_release(results[i])
        finally:
            for i in range(made):
                lib.kiln_buffer_view_release(views[i])

    def _global_info(self, name: str) -> GlobalInfo | None:
        for g in self._module.globals:
            if g.name == name:
                return g
        return None

    def get_global(self, name: str) -> np.ndarray:
        """A copy of global `name`'s current value."""
        lib = _lib()
        out = ctypes.c_void_p()
        with self._lock:
            _check(lib.kiln_context_get_global(self._handle, name.encode(), ctypes.byref(out)))
        try:
            return _from_view(out.value)
        finally:
            lib.kiln_buffer_view_release(out.value)

    def set_global(self, name: str, value) -> None:
        """Replaces global `name`'s value with a copy of `value` (dtype and shape must match)."""
        lib = _lib()
        view = _to_view(value, self._global_info(name), f"set_global '{name}':")
        try:
            with self._lock:
                _check(lib.kiln_context_set_global(self._handle, name.encode(), view))
        finally:
            lib.kiln_buffer_view_release(view)

    def globals(self) -> dict[str, np.ndarray]:
        """Every global's current value, by name."""
        return {g.name: self.get_global(g.name) for g in self._module.globals}
