"""The C runtime library for the binding: status codes, KilnRuntimeError, ctypes declarations.

Loads libkiln_runtime once (_lib), declares the functions the binding calls and
the C structures they take, and turns a returned kiln_status_t into a
KilnRuntimeError (_check). Everything above this module calls C through here.
"""
from __future__ import annotations

import ctypes
import threading

from kiln.vm import _native
# The status codes (kiln_status_code_t) and their names, generated from
# schemas/runtime_constants.toml. Seen from Python, CANCELLED: Context.cancel()
# stopped the call; DEADLINE_EXCEEDED: the call ran past its timeout or max_steps
# (Context.set_limits).
from kiln.vm._generated.constants import (  # noqa: F401 - importable from here and runtime
    CANCELLED, DATA_LOSS, DEADLINE_EXCEEDED, FAILED_PRECONDITION, INTERNAL, INVALID_ARGUMENT, IO,
    NOT_FOUND, OK, OUT_OF_MEMORY, UNIMPLEMENTED)
from kiln.vm._generated.constants import STATUS_CODE_NAMES as CODE_NAMES

# ---- errors ----------------------------------------------------------------------

class KilnRuntimeError(RuntimeError):
    """An error reported by the kiln C runtime: ``code`` (int), ``code_name``, ``message``."""

    def __init__(self, code: int, message: str):
        self.code = int(code)
        self.code_name = CODE_NAMES.get(self.code, f"code {self.code}")
        self.message = message
        super().__init__(message)

    def __repr__(self):
        return f"KilnRuntimeError({self.code_name}, {self.message!r})"


# ---- the C library ------------------------------------------------------------

class _ValueInfo(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("dtype", ctypes.c_int), ("rank", ctypes.c_size_t),
                ("shape", ctypes.POINTER(ctypes.c_int64)), ("is_mutable", ctypes.c_int)]


class _Function(ctypes.Structure):
    _fields_ = [("module", ctypes.c_void_p), ("ordinal", ctypes.c_uint32)]


class _DispatchInfo(ctypes.Structure):
    """kiln_dispatch_info_t: what a dispatch observer is told (kiln_context_set_dispatch_observer)."""
    _fields_ = [("function", _Function), ("offset", ctypes.c_uint32), ("kernel", ctypes.c_uint32),
                ("kernel_name", ctypes.c_char_p), ("workgroup_count", ctypes.c_uint32),
                ("binding_count", ctypes.c_uint32), ("binding_data", ctypes.POINTER(ctypes.c_void_p)),
                ("binding_sizes", ctypes.POINTER(ctypes.c_size_t)),
                ("binding_writable", ctypes.POINTER(ctypes.c_uint8)), ("phase", ctypes.c_int)]


_DispatchObserver = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(_DispatchInfo))

# kiln_print_callback_t: a line of kiln.debug.print text (kiln_context_set_print_callback, format 2.8)
_PrintCallback = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(ctypes.c_char), ctypes.c_size_t)
# kiln_host_callback_t: a debug.callback instruction (kiln_context_set_host_callback, format 2.8)
_HostCallback = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_uint32, ctypes.POINTER(ctypes.c_void_p),
                                 ctypes.c_size_t)
# The exception a host callback raised in this thread, which stopped its call: _check raises it instead of
# the call's CANCELLED status.
_pending = threading.local()


class _HostBuffer(ctypes.Structure):
    """kiln_host_buffer_t: an argument or result of kiln_context_invoke_host in host memory."""
    _fields_ = [("data", ctypes.c_void_p), ("byte_size", ctypes.c_size_t), ("owner", ctypes.c_void_p)]


class _InstanceOptions(ctypes.Structure):
    _fields_ = [("worker_count", ctypes.c_uint32), ("perf_map", ctypes.c_int), ("gdb_jit", ctypes.c_int)]


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
        "kiln_dtype_alignment": (S, [ctypes.c_int]),
        "kiln_buffer_view_create": (P, [ctypes.c_int, S, ctypes.POINTER(ctypes.c_int64), P, S, P]),
        "kiln_buffer_view_wrap": (P, [ctypes.c_int, S, ctypes.POINTER(ctypes.c_int64), P, S, P, P, P]),
        "kiln_buffer_view_retain": (None, [P]),
        "kiln_buffer_view_release": (None, [P]),
        "kiln_buffer_view_dtype": (ctypes.c_int, [P]),
        "kiln_buffer_view_rank": (S, [P]),
        "kiln_buffer_view_shape": (ctypes.POINTER(ctypes.c_int64), [P]),
        "kiln_buffer_view_byte_size": (S, [P]),
        "kiln_buffer_view_data": (P, [P]),
        "kiln_buffer_view_mutable_data": (P, [P]),
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
        "kiln_function_transient_size": (ctypes.c_uint64, [_Function]),
        "kiln_module_kernel_image_count": (S, [P]),
        "kiln_module_kernel_variant": (ctypes.c_char_p, [P, S]),
        "kiln_host_cpu_feature": (ctypes.c_int, [ctypes.c_char_p]),
        "kiln_module_global_count": (S, [P]),
        "kiln_module_global_info": (P, [P, S, ctypes.POINTER(_ValueInfo)]),
        "kiln_context_create": (P, [P, PP]),
        "kiln_context_release": (None, [P]),
        "kiln_context_invoke": (_Status, [P, _Function, PP, S, PP, S]),
        "kiln_context_invoke_host": (_Status, [P, _Function, P, S, P, P, S]),
        "kiln_context_get_global": (P, [P, ctypes.c_char_p, PP]),
        "kiln_context_set_global": (P, [P, ctypes.c_char_p, P]),
        "kiln_context_set_call_limits": (P, [P, ctypes.POINTER(_CallLimits)]),
        "kiln_context_cancel": (None, [P]),
        "kiln_context_set_transient_storage": (P, [P, _Function, P, S]),
        "kiln_context_set_dispatch_observer": (None, [P, _DispatchObserver, P]),
    }
    # newer than some runtime libraries the binding may load (built before they existed): left
    # undeclared there, and what uses them does without (kiln.vm._convert._ResultSpare)
    optional = {
        "kiln_buffer_view_is_exclusive": (ctypes.c_int, [P]),
        "kiln_context_set_print_callback": (None, [P, _PrintCallback, P]),
        "kiln_context_set_host_callback": (None, [P, _HostCallback, P]),
    }
    for name, (restype, argtypes) in (*sigs.items(), *optional.items()):
        try:
            fn = getattr(lib, name)
        except AttributeError:
            if name not in optional:
                raise
            continue
        fn.restype = restype
        fn.argtypes = argtypes


# kiln_context_invoke_host without argument conversion, for calls whose arguments are ctypes
# objects made once (kiln.vm.runtime._HostCall): ctypes converts nothing per call.
_invoke_host = None


def _lib():
    global _lib_handle, _invoke_host
    if _lib_handle is None:
        with _lib_lock:
            if _lib_handle is None:
                lib = ctypes.CDLL(_native.runtime_library_path())
                _declare(lib)
                _invoke_host = lib["kiln_context_invoke_host"]  # a function object of its own
                _invoke_host.restype = _Status
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
        error = getattr(_pending, "error", None)
        if error is not None:
            _pending.error = None
            raise error from KilnRuntimeError(code, message)
        raise KilnRuntimeError(code, message)


def _text(value: bytes | None) -> str:
    return value.decode("utf-8", "replace") if value is not None else ""

