"""How each kiln dtype is stored in memory and held in registers in LLVM IR."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from llvmlite import ir

from ...core import dtypes

F32 = ir.FloatType()
F64 = ir.DoubleType()
I1 = ir.IntType(1)
I8 = ir.IntType(8)
I16 = ir.IntType(16)
I32 = ir.IntType(32)
I64 = ir.IntType(64)
PTR = ir.PointerType()


@dataclass(frozen=True)
class DTypeInfo:
    """storage: the in-memory element type; compute: the register type arithmetic uses."""

    name: str
    storage: ir.Type
    compute: ir.Type
    kind: str  # 'f' float, 'i' signed int, 'u' unsigned int, 'b' bool
    itemsize: int

    @property
    def is_float(self) -> bool:
        return self.kind == "f"

    @property
    def is_signed(self) -> bool:
        return self.kind == "i"

    @property
    def bits(self) -> int:
        return self.compute.width if isinstance(self.compute, ir.IntType) else (32 if self.compute == F32 else 64)


_INFOS = {
    np.dtype(np.float32): DTypeInfo("f32", F32, F32, "f", 4),
    np.dtype(np.float64): DTypeInfo("f64", F64, F64, "f", 8),
    np.dtype(np.float16): DTypeInfo("f16", I16, F32, "f", 2),
    dtypes.BFLOAT16: DTypeInfo("bf16", I16, F32, "f", 2),
    np.dtype(np.int8): DTypeInfo("i8", I8, I8, "i", 1),
    np.dtype(np.int16): DTypeInfo("i16", I16, I16, "i", 2),
    np.dtype(np.int32): DTypeInfo("i32", I32, I32, "i", 4),
    np.dtype(np.int64): DTypeInfo("i64", I64, I64, "i", 8),
    np.dtype(np.uint8): DTypeInfo("u8", I8, I8, "u", 1),
    np.dtype(np.uint16): DTypeInfo("u16", I16, I16, "u", 2),
    np.dtype(np.uint32): DTypeInfo("u32", I32, I32, "u", 4),
    np.dtype(np.uint64): DTypeInfo("u64", I64, I64, "u", 8),
    np.dtype(np.bool_): DTypeInfo("bool", I8, I1, "b", 1),
}


def info(dtype) -> DTypeInfo:
    try:
        return _INFOS[np.dtype(dtype)]
    except KeyError:
        raise TypeError(f"the kiln compiler has no code generation for dtype {np.dtype(dtype)}") from None


def const(dtype, value) -> ir.Constant:
    """A compute-typed constant of a dtype."""
    d = info(dtype)
    if d.is_float:
        return ir.Constant(d.compute, float(value))
    if d.kind == "b":
        return ir.Constant(I1, int(bool(value)))
    return int_const(d.compute, int(value))


def int_const(ty: ir.IntType, value: int) -> ir.Constant:
    """An integer constant from any Python int, wrapped to the type's width (two's complement)."""
    width = ty.width
    v = int(value) & ((1 << width) - 1)
    if width > 1 and v >= 1 << (width - 1):
        v -= 1 << width
    return ir.Constant(ty, v)


def byte_size(aval) -> int:
    return int(aval.size) * info(aval.dtype).itemsize
