"""kiln dtypes and their numpy dtypes, for the runtime binding (no C library needed).

f32 f64 f16 i8 i16 i32 i64 u8 u16 u32 u64 bool c64 c128 map onto the numpy dtypes of the same name;
bf16 maps onto ``ml_dtypes.bfloat16`` when ml_dtypes is installed, else onto
uint16 arrays holding the raw bits. A kiln dtype's code is its index in
KILN_DTYPES, generated from schemas/runtime_constants.toml as C's kiln_dtype_t
is (and equal to the DType enum of schemas/module.fbs).
"""
from __future__ import annotations

import numpy as np

from kiln.vm._generated.constants import DTYPES as KILN_DTYPES

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
    "u16": np.dtype(np.uint16), "u32": np.dtype(np.uint32), "u64": np.dtype(np.uint64),
    "c64": np.dtype(np.complex64), "c128": np.dtype(np.complex128),
}


def numpy_dtype(kiln_dtype: str) -> np.dtype:
    """The numpy dtype that holds values of a kiln dtype ('f32', ..., 'bf16')."""
    return _NUMPY_OF[kiln_dtype]


_KILN_OF_NUMPY = {dtype: name for name, dtype in _NUMPY_OF.items() if name != "bf16"}  # uint16: u16
if _BF16 is not None:
    _KILN_OF_NUMPY[_BF16] = "bf16"


def kiln_dtype(dtype, *, expected: str | None = None) -> str | None:
    """The kiln dtype name of a numpy dtype, or None when kiln has none.

    uint16 counts as bf16 (raw bits) only where bf16 is expected."""
    dtype = np.dtype(dtype)
    if expected == "bf16" and dtype == np.uint16:
        return "bf16"
    return _KILN_OF_NUMPY.get(dtype)

