"""The dtypes kiln supports, their short names, and numpy/JAX type promotion."""
from __future__ import annotations

import ml_dtypes
import numpy as np

# bfloat16 is a storage type (computed in float32) whose numpy dtype comes from
# ml_dtypes; numpy reports its kind as 'V', so kiln asks is_float instead.
BFLOAT16 = np.dtype(ml_dtypes.bfloat16)

# Short names shared with the module format and the command line ("f32", ...).
_SHORT_NAMES = {
    np.dtype(np.float32): "f32",
    np.dtype(np.float64): "f64",
    np.dtype(np.int8): "i8",
    np.dtype(np.int16): "i16",
    np.dtype(np.int32): "i32",
    np.dtype(np.int64): "i64",
    np.dtype(np.uint8): "u8",
    np.dtype(np.uint16): "u16",
    np.dtype(np.uint32): "u32",
    np.dtype(np.uint64): "u64",
    np.dtype(np.bool_): "bool",
    np.dtype(np.float16): "f16",
    BFLOAT16: "bf16",
    np.dtype(np.complex64): "c64",
    np.dtype(np.complex128): "c128",
}
_FROM_SHORT = {v: k for k, v in _SHORT_NAMES.items()}

SUPPORTED = tuple(_SHORT_NAMES)


class DTypeError(TypeError):
    """A dtype kiln does not support."""


def canonical(dtype) -> np.dtype:
    """Returns the numpy dtype for `dtype`, rejecting those kiln cannot compile."""
    d = np.dtype(dtype)
    if d not in _SHORT_NAMES:
        supported = ", ".join(str(x) for x in SUPPORTED)
        raise DTypeError(f"dtype {d} is not supported by kiln (supported: {supported})")
    return d


def short_name(dtype) -> str:
    return _SHORT_NAMES[canonical(dtype)]


def from_short_name(name: str) -> np.dtype:
    try:
        return _FROM_SHORT[name]
    except KeyError:
        raise DTypeError(f"unknown dtype name {name!r}; expected one of {sorted(_FROM_SHORT)}") from None


def is_float(dtype) -> bool:
    d = np.dtype(dtype)
    return d.kind == "f" or d == BFLOAT16


def is_complex(dtype) -> bool:
    return np.dtype(dtype).kind == "c"


def is_inexact(dtype) -> bool:
    """Floating or complex: the dtypes of values with derivatives."""
    return is_float(dtype) or is_complex(dtype)


def real_dtype(dtype) -> np.dtype:
    """The dtype of a complex dtype's parts (complex64 -> float32); any other dtype itself."""
    d = np.dtype(dtype)
    return np.finfo(d).dtype if d.kind == "c" else d


def complex_dtype(dtype) -> np.dtype:
    """The complex dtype with parts of `dtype`: float64 -> complex128, anything else -> complex64 (JAX's)."""
    d = np.dtype(dtype)
    if d.kind == "c":
        return d
    return np.dtype(np.complex128) if d == np.float64 else np.dtype(np.complex64)


def is_int(dtype) -> bool:
    return np.dtype(dtype).kind in "iu"


def is_bool(dtype) -> bool:
    return np.dtype(dtype) == np.bool_


def _category(dtype) -> int:
    return 2 if is_float(dtype) else {"b": 0, "u": 1, "i": 1, "c": 3}[np.dtype(dtype).kind]


def _np_result_type(*ds) -> np.dtype:
    """np.result_type, with bfloat16 promoted as in JAX: ints and bools give bfloat16,
    float16 gives float32, wider floats win."""
    if BFLOAT16 not in ds:
        return np.result_type(*ds)
    floats = [d for d in ds if is_float(d) and d != BFLOAT16]
    if not floats:
        return BFLOAT16
    wide = np.result_type(*floats)
    return np.dtype(np.float32) if wide == np.float16 else wide


def result_type(*operands) -> tuple[np.dtype, bool]:
    """numpy promotion between strong arrays, with weakly typed values (Python scalars) as in JAX.

    Each operand is (dtype, weak). Returns (dtype, weak), JAX's (jax._src.dtypes.lattice_result_type) but
    for strong arrays, which promote as numpy's (int32 and float32 give float64):

    - strong with weak operands: a weak operand only decides the result when it is of a higher category
      (bool < int < float < complex) than the strong result, and then, as in JAX's lattice, the result is
      the weak kind itself, WEAK: an integer or bool array with a weak float gives a weak float32 (so
      `(i32 * 0.5) + f16` is float16), a bool array with a weak int a weak int32, an integer or bool array
      with a weak complex a weak complex64; a float array with a weak complex gives the strong complex of
      its width (complex64, or complex128 with float64), JAX's too;
    - weak operands only: JAX's lattice bound of their dtypes (weak int8 and weak float16 give float16,
      weak float16 and weak bfloat16 float32, weak int64 and weak float32 float32), weak; where that bound
      is a kind (uint64 with a signed int: a float) it is float64, as JAX with x64 (a 64-bit operand).
    A bool result is never weak (JAX's).
    """
    strong = [canonical(d) for d, weak in operands if not weak]
    weak = [canonical(d) for d, w in operands if w]
    if strong:
        result = _np_result_type(*strong)
        top = max(weak, key=_category, default=None)
        if top is None or _category(top) <= _category(result):
            return canonical(result), False
        if is_complex(top) and is_float(result):
            return complex_dtype(result), False
        return _WEAK_DEFAULT[_category(top)], True
    bound = _lattice_bound(weak)
    if isinstance(bound, str):  # a weak kind: JAX's dtype for it with x64
        bound = {"i*": np.dtype(np.int64), "f*": np.dtype(np.float64), "c*": np.dtype(np.complex128)}[bound]
    return bound, bound != np.bool_


# The dtype of each weak kind (bool, int, float, complex) where JAX's lattice gives the kind itself with a
# strong array: JAX's without x64, as a Python number's (docs/numpy.md).
_WEAK_DEFAULT = {0: np.dtype(np.bool_), 1: np.dtype(np.int32), 2: np.dtype(np.float32), 3: np.dtype(np.complex64)}


def _d(t) -> np.dtype:
    return np.dtype(t)


# JAX's type promotion lattice (jax._src.dtypes._type_promotion_lattice, standard mode, kiln's dtypes): each
# type and the types just above it; "i*", "f*", "c*" are the weak kinds of Python int, float, complex.
_LATTICE = {
    _d(np.bool_): ["i*"],
    "i*": [_d(np.uint8), _d(np.int8)],
    _d(np.uint8): [_d(np.int16), _d(np.uint16)],
    _d(np.uint16): [_d(np.int32), _d(np.uint32)],
    _d(np.uint32): [_d(np.int64), _d(np.uint64)],
    _d(np.uint64): ["f*"],
    _d(np.int8): [_d(np.int16)],
    _d(np.int16): [_d(np.int32)],
    _d(np.int32): [_d(np.int64)],
    _d(np.int64): ["f*"],
    "f*": [BFLOAT16, _d(np.float16), "c*"],
    BFLOAT16: [_d(np.float32)],
    _d(np.float16): [_d(np.float32)],
    _d(np.float32): [_d(np.float64), _d(np.complex64)],
    _d(np.float64): [_d(np.complex128)],
    "c*": [_d(np.complex64)],
    _d(np.complex64): [_d(np.complex128)],
    _d(np.complex128): [],
}


def _above(t) -> frozenset:
    """t and every type above it in the lattice."""
    seen, todo = set(), [t]
    while todo:
        x = todo.pop()
        if x not in seen:
            seen.add(x)
            todo.extend(_LATTICE[x])
    return frozenset(seen)


_ABOVE = {t: _above(t) for t in _LATTICE}


def _lattice_bound(types):
    """The least upper bound of `types` in JAX's lattice (a dtype or a weak kind)."""
    common = frozenset.intersection(*[_ABOVE[t] for t in types])
    return next(t for t in common if common <= _ABOVE[t])


def numpy_scalar_dtype(weak_dtype) -> np.dtype:
    """numpy's dtype for Python scalars of the kind of `weak_dtype` (bool, int64, float64, complex128): what
    Python numbers computed with only each other give eagerly, where no array decides the dtype."""
    return np.dtype({0: np.bool_, 1: np.int64, 2: np.float64, 3: np.complex128}[_category(weak_dtype)])


def is_python_scalar(x) -> bool:
    """A Python bool, int, float or complex (numpy's scalar types, which subclass some of them, are
    not): the values that are weakly typed."""
    return isinstance(x, (bool, int, float, complex)) and not isinstance(x, np.generic)


def python_scalar_dtype(value) -> np.dtype:
    """The weak dtype of a Python scalar: bool, int32-like int, float32-like float, complex64-like complex."""
    if isinstance(value, (bool, np.bool_)):
        return np.dtype(np.bool_)
    if isinstance(value, int):
        return np.dtype(np.int32)
    if isinstance(value, float):
        return np.dtype(np.float32)
    if isinstance(value, complex):
        return np.dtype(np.complex64)
    raise DTypeError(f"unsupported Python scalar type {type(value).__name__}")
