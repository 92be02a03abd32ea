"""Python binding of the kiln C runtime (ctypes over libkiln_runtime).

    from kiln.vm.runtime import Instance, Module, Context

    instance = Instance(worker_count=0)            # 0: one worker per core
    module = Module.from_file(instance, "linear.vmfb")
    module.functions                               # [FunctionInfo(name, args, results, ...)]
    ctx = Context(module)                          # the module's globals
    (y,) = ctx.invoke("predict", [x])              # numpy in, numpy out
    ctx.get_global("_steps"); ctx.set_global("_steps", np.int32(3))
    ctx.set_limits(timeout=2.5, max_steps=None)    # bound every later call on ctx
    ctx.cancel()                                   # from another thread: stop the running call

Errors from the runtime raise :class:`KilnRuntimeError` carrying the C
status code and message. Calls on one Context are serialized by a lock;
different contexts run concurrently (ctypes releases the GIL). Ctrl-C
(SIGINT) during a call made on the main thread cancels the call and raises
KeyboardInterrupt; the context stays usable (see kiln.vm._ctrl_c).

dtypes: f32 f64 f16 i8 i16 i32 i64 u8 u16 u32 u64 bool c64 c128 map onto the numpy dtypes of the
same name; bf16 maps onto ``ml_dtypes.bfloat16`` when ml_dtypes is installed,
else onto uint16 arrays holding the raw bits (either is accepted as input).

Arguments and globals set from Python: numpy arrays of either byte order and
any layout are converted to native, C-ordered data (a C-contiguous native
array is used as it is: a call reads its arguments in place); numpy scalars
and objects with ``__array__`` keep their dtype (a mismatch is an error, never
a cast); Python numbers and (nested) lists of them take the declared dtype when
that keeps their kind (see kiln.vm._convert._python_data); masked arrays are
refused. A call is one C call, kiln_context_invoke_host (_HostCall, prepared
once per function from its signature; docs/vm.md).

This module holds the public objects. The layers under it, bottom up, each
importing only layers named before it: _dtypes (kiln and numpy dtypes), _clib
(the C library, status codes, KilnRuntimeError), _reflection (FunctionInfo,
ValueInfo, GlobalInfo), _convert (Python values to and from C buffer views),
_ctrl_c (Ctrl-C cancels a main-thread call). Their names stay importable from
here.
"""
from __future__ import annotations

import ctypes
import itertools
import math
from ctypes import addressof, c_char
import operator
import os
import threading
import weakref
import sys
from _thread import get_ident
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from kiln.vm import _clib
from kiln.vm._clib import (  # noqa: F401 - re-exported
    CANCELLED, CODE_NAMES, DATA_LOSS, DEADLINE_EXCEEDED, FAILED_PRECONDITION, INTERNAL,
    INVALID_ARGUMENT, IO, NOT_FOUND, OK, OUT_OF_MEMORY, UNIMPLEMENTED, KilnRuntimeError,
    _CallLimits, _check, _declare, _Function, _HostBuffer, _InstanceOptions, _lib, _lib_lock, _Status,
    _text, _ValueInfo)
from kiln.vm._convert import (  # noqa: F401 - re-exported
    _CONVERTS_TO, _KIND_NAMES, _KIND_OF, _PTR_SIZE, _SHAPE_TYPES, _VIEW_ARRAYS, SHARE_MIN_BYTES, _address,
    _from_view, _host_array, _label, _python_data, _read_only_address, _result_spares_supported, _ResultSpare,
    _RuntimeMemory, _runtime_memory_of, _shared_from_view, _to_view, _views)
from kiln.vm._ctrl_c import _CTRL_C, _MAIN_THREAD, _CtrlC  # noqa: F401 - re-exported
from kiln.vm._dtypes import (  # noqa: F401 - re-exported
    _BF16, _DTYPE_CODE, _KILN_OF_NUMPY, _NUMPY_OF, KILN_DTYPES, kiln_dtype, numpy_dtype)
from kiln.vm._reflection import (  # noqa: F401 - re-exported
    FunctionInfo, GlobalInfo, ValueInfo, _format_type, _Reflection, _value_info)

__all__ = [
    "KilnRuntimeError", "Instance", "Module", "Context", "FunctionInfo", "ValueInfo",
    "GlobalInfo", "CallLimits", "KILN_DTYPES", "DispatchRecord",
]


def __getattr__(name: str):
    """_lib_handle, read from _clib where _lib() sets it (a copy here would stay None)."""
    if name == "_lib_handle":
        return _clib._lib_handle
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# ---- objects ----------------------------------------------------------------

class _Handle:
    """Owns one C reference; released by close() or when collected."""

    _release_name = ""

    def __init__(self):
        self._ptr = None

    def close(self) -> None:
        ptr, self._ptr = self._ptr, None
        if ptr and _clib._lib_handle is not None:
            getattr(_clib._lib_handle, self._release_name)(ptr)

    def __reduce__(self):  # a copy or pickle is a plain int: only the object registered frees the number
        return int, (int(self),)

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

    A worker count the runtime cannot take raises ValueError. perf_map=True makes every module loaded
    into it append its kernels to /tmp/perf-<pid>.map, so that `perf report` names them; gdb_jit=True
    (or KILN_GDB_JIT=1 in the environment) registers them with GDB's JIT interface, so that gdb names
    them in backtraces and breaks on them."""

    _release_name = "kiln_instance_release"

    def __init__(self, worker_count: int = 0, perf_map: bool = False, gdb_jit: bool = False):
        super().__init__()
        worker_count = check_worker_count(worker_count, "Instance")
        lib = _lib()
        options = _InstanceOptions()
        lib.kiln_instance_options_initialize(ctypes.byref(options))
        options.worker_count = worker_count
        options.perf_map = int(bool(perf_map))
        options.gdb_jit = int(bool(gdb_jit))
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

    @property
    def kernel_variants(self) -> list[str]:
        """The variant name of the build loaded for each kernel image ("x86-64-v4"; "" for an image
        that names none): the best build the host supports, or the one $KILN_CPU_VARIANT forces
        (format 2.4, docs/targets.md)."""
        lib = _lib()
        handle = self._handle
        return [_text(lib.kiln_module_kernel_variant(handle, i))
                for i in range(lib.kiln_module_kernel_image_count(handle))]

    def __repr__(self):
        return f"<kiln Module {self.name!r}: {len(self.functions)} functions>" if self._ptr else "<closed Module>"



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


@dataclass(frozen=True)
class DispatchRecord:
    """One dispatch, as Context.set_dispatch_observer reports it before (`phase` "before") and after
    ("after") the kernel runs: `bindings` are copies of the bound buffers' bytes in the kernel's order
    (its inputs, then the outputs it writes: `written`), the written ones None before the kernel ran.
    Read the inputs before: a kernel may write its output over an input nothing reads later."""

    function: str
    offset: int  # word offset of the dispatch instruction in the function's code
    kernel: int
    kernel_name: str
    workgroups: int
    bindings: list
    written: list
    phase: str = "after"


@_clib._PrintCallback
def _print_to_stdout(_user, text, length) -> int:
    """kiln_print_callback_t of every Context: the debug.print line to sys.stdout (which pytest's capsys,
    redirect_stdout and notebooks replace), so that it interleaves with Python's own prints. An error
    writing it stops the call (CANCELLED)."""
    try:
        sys.stdout.write(ctypes.string_at(text, length).decode("utf-8", "replace"))
    except Exception:  # noqa: BLE001 - a C callback cannot raise; the call stops instead
        return 1
    return 0


class _Registered:
    """A registered host callback: the function, alive while its HostCallbackNumber is."""

    __slots__ = ("fn", "__weakref__")

    def __init__(self, fn):
        self.fn = fn


# number -> _Registered, held weakly: only the HostCallbackNumber holds it, so a callback whose function
# refers back to the graph holding its number (a closure over traced values) is one garbage cycle
_HOST_CALLBACKS: "weakref.WeakValueDictionary[int, _Registered]" = weakref.WeakValueDictionary()
_host_callback_lock = threading.Lock()
_host_callback_numbers = itertools.count(1)


class HostCallbackNumber(int):
    """The number register_host_callback gives a function: an int (what a debug.callback instruction holds)
    that keeps the function registered while it lives. The traced graph (kiln.jit's cache entry), a Program's
    compiled module spec and their instructions hold it, so the number is freed with them; a module still
    running a freed number fails the call with "no function of this process has that number"."""

    def __reduce__(self):  # a copy or pickle is a plain int: it does not keep the function registered
        return int, (int(self),)


def register_host_callback(fn) -> HostCallbackNumber:
    """A number for `fn` that a debug.callback instruction (format 2.8) names: a call on any Context of this
    process that runs it calls fn(*values) with numpy copies of the values, on the calling thread. When fn
    raises, the call stops and raises its exception. The number (an int) is fn's while the returned object
    lives (HostCallbackNumber); numbers are never reused in a process, so a module compiled with them is
    meaningless elsewhere (kiln refuses to export one)."""
    with _host_callback_lock:
        number = HostCallbackNumber(next(_host_callback_numbers))
        if number > 0xFFFFFFFF:
            raise OverflowError("register_host_callback: this process has used every host callback number "
                                "(2**32 - 1)")
        number._registered = _Registered(fn)
        _HOST_CALLBACKS[int(number)] = number._registered
    return number


def host_callback(number: int):
    """The function register_host_callback gave `number` (None if none, or freed)."""
    registered = _HOST_CALLBACKS.get(int(number))
    return None if registered is None else registered.fn


@_clib._HostCallback
def _call_host(_user, number, values, count) -> int:
    """kiln_host_callback_t of every Context: the registered function with numpy copies of the values."""
    try:
        fn = host_callback(number)
        if fn is None:
            raise KilnRuntimeError(FAILED_PRECONDITION, f"debug.callback {number}: no function of this process "
                                                        f"has that number (kiln.vm.register_host_callback)")
        fn(*[_from_view(values[i]) for i in range(count)])
    except BaseException as e:  # noqa: BLE001 - a C callback cannot raise: the call stops, _check raises it
        _clib._pending.error = e
        return 1
    return 0


class Context(_Handle):
    """A module's globals (mutable state) and the calls that use them.

    The context holds its own reference to the C module, so it keeps working
    after its Module object is closed.
    """

    _release_name = "kiln_context_release"

    def __init__(self, module: Module):
        super().__init__()
        self._module = module
        # serializes calls (the C API requires it); re-entrant: a host or print callback of a call may call
        # this context again on the calling thread (the nested call runs inside the callback, docs/vm.md)
        self._lock = threading.RLock()
        self._calling = 0  # calls in progress on this context (nested ones included), under _lock
        self._cancel_lock = threading.Lock()  # keeps the pointer alive during cancel()
        self._limits = CallLimits()
        self._calls: dict = {}  # function name -> its _HostCall's call
        self._spares: list = []  # every _ResultSpare of this context's calls: close() releases them
        lib = _lib()
        module_ptr = module._handle
        self._reflection = module._reflection
        out = ctypes.c_void_p()
        _check(lib.kiln_context_create(module_ptr, ctypes.byref(out)))
        lib.kiln_module_retain(module_ptr)
        self._module_ptr = module_ptr
        self._ptr = out.value
        if hasattr(lib, "kiln_context_set_print_callback"):  # kiln.debug.print's lines: Python's sys.stdout
            lib.kiln_context_set_print_callback(out.value, _print_to_stdout, None)
        if hasattr(lib, "kiln_context_set_host_callback"):  # kiln.debug.callback: register_host_callback's
            lib.kiln_context_set_host_callback(out.value, _call_host, None)

    def close(self) -> None:
        """Releases the context (waiting for a call in progress to return). From a host or print callback
        of a call running on this context it raises RuntimeError: the call still uses it."""
        with self._lock:
            if getattr(self, "_calling", 0):
                raise RuntimeError("Context.close: a call is running on this context (this is one of its host "
                                   "or print callbacks); close it after the call returns")
            with self._cancel_lock:
                self._close_locked()

    def _close_locked(self) -> None:
        super().close()
        for spare in getattr(self, "_spares", ()):
            spare.close()
        module_ptr, self._module_ptr = getattr(self, "_module_ptr", None), None
        if module_ptr and _clib._lib_handle is not None:
            _clib._lib_handle.kiln_module_release(module_ptr)

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

    def set_transient_storage(self, name: str, storage: np.ndarray | None) -> None:
        """Makes `storage` (a writable C-contiguous array of at least the function's
        `transient_size` bytes, aligned to 64 bytes) the transient arena of function `name` on
        this context for every later call, in place of the one the context allocates
        (kiln_context_set_transient_storage; docs/vm.md, "Planned memory"). The context keeps a
        reference to it; the caller must not use it while a call runs. None gives the function
        back an arena of the context's own."""
        fn, _ = self._reflection.resolve(name)
        if storage is None:
            address, size = None, 0
        else:
            if not isinstance(storage, np.ndarray) or not storage.flags.c_contiguous or not storage.flags.writeable:
                raise ValueError(f"set_transient_storage: '{name}': storage must be a writable C-contiguous "
                                 f"numpy array, got {type(storage).__name__}")
            address, size = storage.ctypes.data, storage.nbytes
        with self._lock:
            _check(_lib().kiln_context_set_transient_storage(self._handle, fn, address, size))
            if not hasattr(self, "_transient_storage"):
                self._transient_storage = {}
            self._transient_storage[name] = storage  # alive while the context may write it

    def cancel(self) -> None:
        """Stops the call running on this context, from any thread: it fails with
        KilnRuntimeError CANCELLED (globals keep what it stored before stopping).
        Does nothing when no call is running; later calls are not affected."""
        with self._cancel_lock:
            _lib().kiln_context_cancel(self._handle)

    def invoke(self, name: str, args: Sequence = ()) -> list[np.ndarray]:
        """Calls exported function `name` with numpy arrays; returns its results as arrays.

        Contiguous arguments aligned to their elements (any numpy array's own memory) are read in
        place for the call; results of 16 KiB or more are the runtime's memory itself, read-only (no
        copy either way), smaller ones are copied into new arrays. A large result whose arrays are
        all gone is written by the next call into its memory (_ResultSpare; close() releases what is
        kept). A module compiled before format 2.1 gets, from the runtime, a 64-byte aligned copy of
        an argument that is not (docs/vm.md)."""
        call = self._calls.get(name)
        if call is None:
            self._handle  # noqa: B018 - raises when closed
            call = self._calls[name] = _HostCall(self, name).call
        args = args if isinstance(args, (list, tuple)) else list(args)
        if getattr(self, "_observer", None) is None:
            return call(args)
        self._observer_error = None
        try:
            return call(args)
        except KilnRuntimeError:
            error, self._observer_error = self._observer_error, None
            if error is None:
                raise
            raise error from None

    def _caller(self, name: str, array_type=np.ndarray, weak: Sequence[bool] = (), ctrl_c: bool = True):
        """invoke(name, args) as a function of args that keeps this context alive (its attribute
        `context`; kiln.jit's), with results of array_type; ctrl_c=False where Ctrl-C could not stop
        a call early (_ctrl_c_stops_early). See _HostCall."""
        self._handle  # noqa: B018 - raises when closed
        return _HostCall(self, name, keep_alive=True, array_type=array_type, weak=weak, ctrl_c=ctrl_c).call

    def _invoke_views(self, name: str, args: Sequence) -> list[np.ndarray]:
        """invoke through a C buffer view per argument and result (kiln_context_invoke): for the
        calls _HostCall leaves to it, whose errors (a wrong count, dtype or shape) come from here."""
        lib = _lib()
        self._handle  # noqa: B018 - raises when closed
        fn, info = self._reflection.resolve(name)
        n_args, n_results = len(args), len(info.results)
        views = _views(n_args)
        results = _views(n_results)
        address = ctypes.addressof(views)
        borrowed = []  # (start, end, array) of caller memory the argument views wrap
        try:
            for i, value in enumerate(args):
                expected = info.args[i] if i < len(info.args) else None
                memory = _to_view(value, expected, (name, i, expected), address + i * _PTR_SIZE, borrow=True)
                if memory is not None:
                    borrowed.append(memory)
            with self._lock:
                ptr = self._handle
                self._calling += 1
                try:
                    if threading.get_ident() == _MAIN_THREAD:
                        status = _CTRL_C.invoke(ptr, fn, views, n_args, results, n_results)
                    else:
                        status = lib.kiln_context_invoke(ptr, fn, views, n_args, results, n_results)
                finally:
                    self._calling -= 1
            _check(status)
            out = []
            for i in range(n_results):
                view, results[i] = results[i], None
                out.append(_shared_from_view(view, info.results[i], borrowed))
            return out
        finally:
            for i in range(n_results):
                if results[i]:
                    lib.kiln_buffer_view_release(results[i])
            for i in range(n_args):
                if views[i]:
                    lib.kiln_buffer_view_release(views[i])

    def set_dispatch_observer(self, observer) -> None:
        """Calls `observer(record)` before and after every later dispatch of a call on this context,
        with a DispatchRecord (the function and word offset of the dispatch, the kernel, its workgroups,
        the phase and a copy of every binding's bytes); None removes it. When the observer raises, the call stops
        (KilnRuntimeError CANCELLED) and its exception is raised from the call instead. For
        debugging: copying every binding costs time (`kiln check` is built on it)."""
        lib = _lib()
        with self._lock:
            if observer is None:
                lib.kiln_context_set_dispatch_observer(self._handle, _clib._DispatchObserver(), None)
                self._observer = None
                return

            def trampoline(_user, info_ptr):
                info = info_ptr.contents
                try:
                    n = info.binding_count
                    written = [bool(info.binding_writable[j]) for j in range(n)]
                    before = info.phase == 0  # KILN_DISPATCH_BEFORE: the outputs are not written yet
                    observer(DispatchRecord(
                        _text(lib.kiln_function_name(info.function)), info.offset, info.kernel,
                        _text(info.kernel_name), info.workgroup_count,
                        [None if before and written[j] else
                         ctypes.string_at(info.binding_data[j], info.binding_sizes[j]) for j in range(n)],
                        written, "before" if before else "after"))
                except BaseException as e:  # noqa: B036 - carried to the caller, raised there
                    self._observer_error = e
                    return 1
                return 0

            callback = _clib._DispatchObserver(trampoline)
            lib.kiln_context_set_dispatch_observer(self._handle, callback, None)
            self._observer = callback  # the C side holds only its address

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


class _HostCall:
    """The calls of one function on one context through kiln_context_invoke_host: one C call each.

    A function's argument and result types are static (its reflection), so the C descriptions of
    its arguments and results are made once; a call whose arguments are arrays of exactly those
    types (or convert to them, _host_array) fills in where their data is. Any other call (another
    count, a dtype or shape that differs, a dtype numpy lacks) goes to Context._invoke_views,
    whose errors name what is wrong. Arguments are read in place (the runtime copies a result out
    of their memory) and runtime memory going back in is kept alive by its view; results smaller
    than SHARE_MIN_BYTES are copied by the runtime into arrays made here, larger ones are the
    runtime's memory, shared. A large result's memory that its arrays released is its destination in
    the next call (its _ResultSpare), when the result was the call's own buffer as it came back."""

    def __init__(self, context: Context, name: str, keep_alive: bool = False, array_type=np.ndarray,
                 weak: Sequence[bool] = (), ctrl_c: bool = True):
        fn, info = context._reflection.resolve(name)
        # weak: the context's own cache of these would otherwise keep it alive until a gc collection
        self._context = weakref.ref(context)
        self._owner = context if keep_alive else None
        self.name, self.fn, self.info = name, fn, info
        self.ctrl_c = ctrl_c  # False: Ctrl-C could not stop a call before its end (_ctrl_c_stops_early)
        n, m = len(info.args), len(info.results)
        self.n_args, self.n_results = n, m
        self.usable = all(v.dtype is not None for v in (*info.args, *info.results))
        self.types = [(a.dtype, a.shape, _byte_size(a)) for a in info.args]
        self.args = (_HostBuffer * max(n, 1))()
        self.arg_slots = [self.args[i] for i in range(n)]
        for slot, (_, _, size) in zip(self.arg_slots, self.types):
            slot.byte_size = size
        # arguments that may be runtime memory going back in (the smaller ones are never shared)
        self.large_args = [i for i, (_, _, size) in enumerate(self.types) if size >= SHARE_MIN_BYTES]
        self.results = (_HostBuffer * max(m, 1))()
        self.views = _views(m)
        # Results copied into arrays made here: of array_type (np.ndarray, or a subclass such as
        # kiln.Array, then read-only and marked _weak where `weak` says), their C descriptions, shapes,
        # dtypes and indices; the others (shared) are views of the runtime's memory.
        self.array_type, self.read_only = array_type, array_type is not np.ndarray
        self.copied, self.copied_at, self.shared, self.weak = [], [], [], []
        for i, r in enumerate(info.results):
            size = _byte_size(r)
            if 0 < size < SHARE_MIN_BYTES:
                self.results[i].byte_size = size
                self.copied.append((self.results[i], r.shape, r.dtype))
                self.copied_at.append(i)
                if i < len(weak) and weak[i]:
                    self.weak.append(len(self.copied) - 1)
            else:
                self.shared.append(i)
        # Shared results' released memory, reused as the next call's destination (_ResultSpare):
        # (result index, its spare, byte size)
        self.spares = []
        if _result_spares_supported():
            self.spares = [(i, _ResultSpare(_byte_size(info.results[i])), _byte_size(info.results[i]))
                           for i in self.shared if _byte_size(info.results[i])]
            context._spares.extend(spare for _, spare, _ in self.spares)
        P = ctypes.c_void_p
        self.c_call = (P(context._ptr), fn, P(ctypes.addressof(self.args)), ctypes.c_size_t(n),
                       P(ctypes.addressof(self.results)), P(ctypes.addressof(self.views)),
                       ctypes.c_size_t(m))
        self.call = self._make_call()

    @property
    def context(self) -> Context:
        context = self._context()
        if context is None:
            raise ValueError("Context is closed")
        return context

    def _make_call(self):
        """The call itself, call(args) -> results: a closure over what it uses (cell reads cost less
        than attribute reads)."""
        context_ref, owner, name, info = self._context, self._owner, self.name, self.info
        n_args, n_results, usable, types = self.n_args, self.n_results, self.usable, self.types
        arg_slots, large_args, views, c_call = self.arg_slots, self.large_args, self.views, self.c_call
        copied, copied_at, shared, weak = self.copied, self.copied_at, self.shared, self.weak
        spares, result_slots = self.spares, self.results
        spare_of = {i: (spare, size) for i, spare, size in spares}
        is_exclusive = _lib().kiln_buffer_view_is_exclusive if spares else None
        new, read_only = self.array_type, self.read_only
        ndarray, empty, asarray, from_buffer, ctrl_c = np.ndarray, np.empty, np.asarray, c_char.from_buffer, _CTRL_C
        main_thread = _MAIN_THREAD if self.ctrl_c else None
        busy = [False]  # this call's slots hold a call in progress (under the context's lock)

        def views_path(args):
            context = owner or context_ref()
            if context is None:
                raise ValueError("Context is closed")
            return context._invoke_views(name, args)

        def call(args):
            if len(args) != n_args or not usable:
                return views_path(args)
            arrays, addresses = args, []
            for i, (value, (dtype, shape, size)) in enumerate(zip(args, types)):
                # the common call: C-contiguous arrays (or kiln Arrays) of exactly the declared types
                kind = type(value)
                if (kind is ndarray or kind is new) and value.shape == shape and \
                        (value.dtype is dtype or value.dtype == dtype):
                    if kind is ndarray:
                        try:
                            addresses.append(addressof(from_buffer(value)))
                            continue
                        except (TypeError, ValueError):  # read-only, not C-contiguous, empty, bfloat16
                            pass
                    elif size and value.flags.c_contiguous:  # a kiln Array: read-only
                        addresses.append(_read_only_address(value))
                        continue
                value, _ = _host_array(value, info.args[i], (name, i, info.args[i]))
                if value.dtype != dtype or value.shape != shape:
                    return views_path(args)
                if arrays is args:
                    arrays = list(args)
                arrays[i] = value
                addresses.append(_address(value) if size else None)
            outs, destinations = [], []
            for _, shape, dtype in copied:
                out = empty(shape, dtype)
                outs.append(out)
                try:
                    destinations.append(addressof(from_buffer(out)))
                except (TypeError, ValueError):  # no buffer format for its dtype (bfloat16)
                    destinations.append(out.ctypes.data)
            context = owner or context_ref()
            if context is None:
                raise ValueError("Context is closed")
            with context._lock:
                if busy[0]:  # re-entered from a host or print callback of the call using the slots
                    return views_path(arrays)
                if not context._ptr:
                    context._handle  # noqa: B018 - raises: closed
                busy[0] = True
                context._calling += 1
                try:
                    return finish(context, arrays, addresses, outs, destinations)
                finally:
                    busy[0] = False
                    context._calling -= 1

        def finish(context, arrays, addresses, outs, destinations):
            for slot, address in zip(arg_slots, addresses):
                slot.data = address
            for i in large_args:
                memory = _runtime_memory_of(arrays[i])
                arg_slots[i].owner = memory.view if memory is not None else None
            for (slot, _, _), address in zip(copied, destinations):
                slot.data = address
            reused = None  # result index -> (view, data) of spare memory it is written into
            if spares:
                reused = {}
                for i, spare, size in spares:
                    slot, entry = result_slots[i], spare.take()
                    if entry is None:
                        slot.data = None  # the runtime makes a buffer: views[i]
                    else:
                        slot.data, slot.byte_size = entry[1], size
                        reused[i] = entry
            try:
                if get_ident() == main_thread:
                    status = ctrl_c.call(_clib._invoke_host, c_call)
                else:
                    status = _clib._invoke_host(*c_call)
                if status.value:
                    _check(status)
                if read_only:  # views of the writable arrays, whose memory _read_only_address finds
                    views_of = []
                    for out in outs:
                        out = out.view(new)
                        out.flags.writeable = False
                        views_of.append(out)
                    outs = views_of
                    for k in weak:
                        outs[k]._weak = True
                if not shared:
                    return outs
                taken = [views[i] for i in shared]
                for i in shared:
                    views[i] = None
                got, reused = reused or {}, None
            finally:
                for i in shared:
                    if views[i]:
                        _clib._lib_handle.kiln_buffer_view_release(views[i])
                        views[i] = None
                if reused:  # the call failed: the spares keep their memory
                    for i, (view, _) in reused.items():
                        if not spare_of[i][0].keep(view):
                            _clib._lib_handle.kiln_buffer_view_release(view)
            results = [None] * n_results
            for i, out in zip(copied_at, outs):
                results[i] = out
            for i, view in zip(shared, taken):
                entry = got.get(i)
                if entry is not None:  # written into the spare memory
                    (spare, size), result = spare_of[i], info.results[i]
                    memory = _RuntimeMemory(entry[0], size, spare, entry[1])
                    results[i] = asarray(memory).view(result.dtype).reshape(result.shape)
                else:
                    # only a buffer this call made (nothing else holds it as it comes back: not a
                    # global's value, a constant or an argument returned as it is) is reused
                    spare = spare_of.get(i, (None,))[0]
                    if spare is not None and not is_exclusive(view):
                        spare = None
                    results[i] = _shared_from_view(view, info.results[i], (), spare)
                if read_only:
                    results[i] = results[i].view(new)
            return results

        call.context = owner  # kiln.jit's: the context it keeps alive
        call.buffers = self.args, self.results, views  # c_call's addresses point into them
        return call


def _ctrl_c_stops_early(module_bytes: bytes, name: str) -> bool:
    """Whether Ctrl-C can stop a call of function `name` before its end, so that the main thread's
    calls of it need kiln.vm._ctrl_c (two wakeup fd swaps and a lock each). A call checks for
    cancellation only before each dispatch and call and at each backward branch (docs/vm.md): a
    function with no branch back, no call and at most one dispatch checks once, as it starts, and then
    runs to its end whatever happens; a SIGINT raises KeyboardInterrupt as it returns either way."""
    from kiln.vm.disassembler import branch_structure, decode
    from kiln.vm.reader import ModuleFile

    module = ModuleFile(module_bytes)
    index = next(i for i, f in enumerate(module.functions) if f.name == name)
    code = decode(module.code_words[index])
    ops = [instr.op for _, instr in code]
    return bool(branch_structure(code)[1]) or "call" in ops or ops.count("dispatch") > 1


def _byte_size(value: ValueInfo) -> int:
    return math.prod(value.shape) * value.dtype.itemsize if value.dtype is not None else 0
