"""Python values to C buffer views and back.

_to_view makes the view of an argument, or of a global's new value, by the
rules kiln.vm.runtime's docstring states (never a silent cast or change of
kind): a copy, or, for a call's large arguments (borrow=True), the caller's
own memory when it is contiguous and aligned to its elements (the runtime
makes the one aligned copy that a module compiled before format 2.1 needs,
kernel_abi.h). _from_view copies a result or a global out as a numpy array;
_shared_from_view gives a large result as a read-only numpy array over the
runtime's memory, which it keeps alive, so that results cost no copy and go
back into calls without one.
"""
from __future__ import annotations

import ctypes
import os
import threading
from typing import TYPE_CHECKING

import numpy as np

from kiln.vm._clib import INTERNAL, INVALID_ARGUMENT, KilnRuntimeError, _check, _lib
from kiln.vm._dtypes import _BF16, _DTYPE_CODE, _KILN_OF_NUMPY, _NUMPY_OF, KILN_DTYPES, kiln_dtype
from kiln.vm._env import parse_size
from kiln.vm._generated.constants import MAX_RANK

if TYPE_CHECKING:
    from kiln.vm._reflection import GlobalInfo, ValueInfo

_SHAPE_TYPES = [ctypes.c_int64 * max(n, 1) for n in range(MAX_RANK + 1)]
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
        return _read_only_address(array)


def _read_only_address(array: np.ndarray) -> int:
    """_address of an array that ctypes cannot take as a buffer (read-only, or bfloat16)."""
    base = array.base
    # a read-only view of all of a writable array's memory (a kiln Array) starts where it does
    if type(base) is np.ndarray and base.nbytes == array.nbytes and base.flags.c_contiguous:
        try:
            return ctypes.addressof(ctypes.c_char.from_buffer(base))
        except (TypeError, ValueError):
            pass
    return array.ctypes.data


def _label(what) -> str:
    """What a conversion error names: a text, or (function, index, ValueInfo | None) of an argument."""
    if isinstance(what, str):
        return what
    name, i, expected = what
    return f"{name}: argument {i}" + (f" '{expected.name}'" if expected is not None else "")


# The kinds of values that Python data of each kind converts into without loss of kind.
_KIND_OF = {"f32": "f", "f64": "f", "f16": "f", "bf16": "f", "i8": "i", "i16": "i", "i32": "i",
            "i64": "i", "u8": "i", "u16": "i", "u32": "i", "u64": "i", "bool": "b", "c64": "c", "c128": "c"}
_CONVERTS_TO = {"b": "bifc", "i": "ifc", "u": "ifc", "f": "fc", "c": "c"}
_KIND_NAMES = {"b": "bool", "i": "int", "u": "int", "f": "float", "c": "complex"}


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


# Arrays smaller than this are copied in and out: a copy costs less than sharing's bookkeeping.
SHARE_MIN_BYTES = 16 * 1024


REUSE_MAX_SIZE_VARIABLE = "KILN_RESULT_REUSE_MAX_SIZE"
DEFAULT_REUSE_MAX_BYTES = 1 << 30
# the most bytes all _ResultSpares together keep (None: not read yet), and the bytes they keep now
_REUSE = {"limit": None, "kept": 0}
_REUSE_LOCK = threading.Lock()  # held only for arithmetic: nothing in it can run a finalizer


def reuse_max_bytes() -> int:
    """The most bytes of released results kept for reuse, all functions together:
    $KILN_RESULT_REUSE_MAX_SIZE (bytes, or with a K/M/G suffix; 0: results are never reused), default
    1 GiB. Read once; a bad value raises ValueError naming it."""
    limit = _REUSE["limit"]
    if limit is None:
        text = os.environ.get(REUSE_MAX_SIZE_VARIABLE, "").strip()
        limit = _REUSE["limit"] = parse_size(text, REUSE_MAX_SIZE_VARIABLE, allow_zero=True) if text \
            else DEFAULT_REUSE_MAX_BYTES
    return limit


def kept_result_bytes() -> int:
    """The bytes of released results that _ResultSpares keep now, all functions together."""
    return _REUSE["kept"]


class _ResultSpare:
    """The memory of one result of one function on one context that its arrays released, kept for
    that result of the next call (kiln.vm.runtime._HostCall passes it as the result's destination),
    so that a steady-state call writes memory whose pages are already there instead of faulting in
    fresh pages (a 64 MiB result: 16,384 page faults, several times the kernel's own time) and
    unmapping them again.

    It keeps at most one buffer, and only one that nothing else holds (kiln_buffer_view_is_exclusive:
    not a global's value, a constant, caller memory or a row of another buffer), so the memory it
    hands out is written by no one else; and only while all spares together keep at most
    reuse_max_bytes(). close() (Context.close, or when the function's call goes) releases it, and a
    closed spare keeps nothing more. Threads: list appends and pops are atomic, and an array may go
    on any thread."""

    __slots__ = ("spare", "closed", "size")

    def __init__(self, size: int):
        self.spare = []  # [(view, data address)]: at most one, bar a race between two threads
        self.closed = False
        self.size = size  # the result's bytes

    def keep(self, view: int) -> bool:
        """Takes over the caller's reference to `view` when the spare is empty and open, nothing
        else holds the view and the bytes kept stay within the limit; False: the caller still has
        its reference."""
        if self.spare or self.closed:
            return False
        lib = _lib()
        if not lib.kiln_buffer_view_is_exclusive(view):
            return False
        try:
            size, limit = self.size, reuse_max_bytes()
        except ValueError:  # a bad $KILN_RESULT_REUSE_MAX_SIZE: reported where a call starts, not here
            return False
        with _REUSE_LOCK:
            if _REUSE["kept"] + size > limit:
                return False
            _REUSE["kept"] += size
        self.spare.append((view, lib.kiln_buffer_view_mutable_data(view)))
        if self.closed:  # close() on another thread may have emptied the list before the append
            self.close()
        return True

    def take(self):
        """(view, data address) of the spare buffer, now the caller's, or None."""
        try:
            entry = self.spare.pop()
        except IndexError:
            return None
        with _REUSE_LOCK:
            _REUSE["kept"] -= self.size
        return entry

    def close(self) -> None:
        """Releases the kept buffer; keeps nothing from now on (each entry is popped, so released, once)."""
        self.closed = True
        while self.spare:
            try:
                view, _ = self.spare.pop()
            except IndexError:
                break
            with _REUSE_LOCK:
                _REUSE["kept"] -= self.size
            _lib().kiln_buffer_view_release(view)

    def __del__(self):
        try:
            self.close()
        except Exception:  # interpreter shutdown
            pass


def _result_spares_supported() -> bool:
    """Whether released results are reused: the runtime library has kiln_buffer_view_is_exclusive (a
    library built before it has not) and reuse_max_bytes() is not 0."""
    return hasattr(_lib(), "kiln_buffer_view_is_exclusive") and reuse_max_bytes() > 0


class _RuntimeMemory:
    """One reference to a runtime buffer view, released when the last numpy array over it goes (or
    handed to `spare`, the _ResultSpare of the result it holds, for the next call's result)."""

    __slots__ = ("view", "spare", "__array_interface__")

    def __init__(self, view: int, nbytes: int, spare: _ResultSpare | None = None, data: int | None = None):
        self.view = view
        self.spare = spare
        if data is None:
            data = _lib().kiln_buffer_view_data(view)
        self.__array_interface__ = {"shape": (nbytes,), "typestr": "|u1", "version": 3,
                                    "data": (data, True)}

    def __del__(self):
        spare = self.spare
        if spare is None or not spare.keep(self.view):
            _lib().kiln_buffer_view_release(self.view)


def _runtime_memory_of(array: np.ndarray) -> _RuntimeMemory | None:
    base = array.base
    while base is not None and not isinstance(base, _RuntimeMemory):
        base = getattr(base, "base", None)
    return base


_ALIGNMENT: dict[int, int] = {}


def _alignment(code: int) -> int:
    """The alignment kiln_buffer_view_wrap needs of data of dtype `code` (kiln_dtype_alignment)."""
    alignment = _ALIGNMENT.get(code)
    if alignment is None:
        alignment = _ALIGNMENT[code] = _lib().kiln_dtype_alignment(code)
    return alignment


def _release_function() -> int:
    return ctypes.cast(_lib().kiln_buffer_view_release, ctypes.c_void_p).value


def _host_array(value, expected: ValueInfo | GlobalInfo | None, what) -> tuple[np.ndarray, str]:
    """(a C-contiguous array of native byte order holding `value`, its kiln dtype), by the rules of
    kiln.vm.runtime's docstring; `what` names it in errors (see _label). The array is `value` itself
    when that is one already."""
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
    if kdtype is None or kdtype == "u16":  # uint16 is bf16 bits where bf16 is expected
        if not dtype.isnative:
            value = value.astype(dtype.newbyteorder("="))
        kdtype = kiln_dtype(value.dtype, expected=expected.kiln_dtype if expected else None)
        if kdtype is None:
            want = f"expects {expected.type_str}, " if expected is not None else ""
            raise KilnRuntimeError(
                INVALID_ARGUMENT, f"{_label(what)} {want}got numpy dtype {value.dtype} (kiln supports "
                f"float32 float64 float16 bfloat16 int8 int16 int32 int64 uint8 uint16 uint32 uint64 bool complex64 complex128)")
    # (np.ascontiguousarray would turn a 0-d array into a 1-d one)
    array = value if value.flags.c_contiguous else np.ascontiguousarray(value)
    if array.ndim > MAX_RANK:
        raise KilnRuntimeError(INVALID_ARGUMENT,
                               f"{_label(what)} has rank {array.ndim}: expected at most {MAX_RANK}")
    return array, kdtype


def _to_view(value, expected: ValueInfo | GlobalInfo | None, what, out: int, borrow: bool = False):
    """Writes to `out` (the address of a view pointer) a new C buffer view of `value` (a numpy
    array or array-like, converted by _host_array); `what` names it in errors (see _label). The
    view holds a copy, unless `borrow` and the array is large, contiguous and aligned to its
    elements: then it wraps the array's memory, and the caller keeps the returned array alive until
    the view is released (runtime memory, a kiln result going back in, is kept alive by the view
    itself). A module compiled before format 2.1 gets an aligned copy from the runtime. Returns
    the (start, end) addresses of borrowed caller memory, which results must not alias, or None.

    Writing through `out` rather than returning keeps the view reachable for the
    caller's cleanup when a KeyboardInterrupt is raised as the C call returns."""
    array, kdtype = _host_array(value, expected, what)
    ndim = array.ndim
    shape = _SHAPE_TYPES[ndim](*array.shape)
    nbytes = array.nbytes
    lib = _lib()
    code = _DTYPE_CODE[kdtype]
    if borrow and nbytes >= SHARE_MIN_BYTES:
        address = _address(array)
        if address % _alignment(code) == 0:
            memory = _runtime_memory_of(array)
            if memory is not None:
                lib.kiln_buffer_view_retain(memory.view)
                _check(lib.kiln_buffer_view_wrap(code, ndim, shape, address, nbytes,
                                                 _release_function(), memory.view, out))
                return None
            _check(lib.kiln_buffer_view_wrap(code, ndim, shape, address, nbytes, None, None, out))
            return (address, address + nbytes, array)
    _check(lib.kiln_buffer_view_create(code, ndim, shape,
                                       _address(array) if nbytes else None, nbytes, out))
    return None


def _shared_from_view(view, expected: ValueInfo | None, borrowed,
                      spare: _ResultSpare | None = None) -> np.ndarray:
    """A result as a read-only array over the runtime's memory (it takes over the caller's reference
    to `view`, which goes to `spare` when the array goes), or a copy when the result is small or lies
    in borrowed caller memory."""
    lib = _lib()
    nbytes = lib.kiln_buffer_view_byte_size(view)
    data = lib.kiln_buffer_view_data(view)
    if nbytes < SHARE_MIN_BYTES or any(start <= data < end for start, end, _ in borrowed):
        try:
            return _from_view(view, expected)
        finally:
            lib.kiln_buffer_view_release(view)
    if expected is not None and expected.dtype is not None:
        dtype, shape = expected.dtype, expected.shape
    else:
        dtype = _NUMPY_OF[KILN_DTYPES[lib.kiln_buffer_view_dtype(view)]]
        shape_ptr = lib.kiln_buffer_view_shape(view)
        shape = tuple(int(shape_ptr[i]) for i in range(lib.kiln_buffer_view_rank(view)))
    return np.asarray(_RuntimeMemory(view, nbytes, spare)).view(dtype).reshape(shape)


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

