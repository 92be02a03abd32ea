"""Declarations of LLVM intrinsics (only those that lower to instructions, never to libcalls)."""
from __future__ import annotations

from llvmlite import ir


def type_suffix(ty: ir.Type) -> str:
    if isinstance(ty, ir.VectorType):
        return f"v{ty.count}{type_suffix(ty.element)}"
    if isinstance(ty, ir.IntType):
        return f"i{ty.width}"
    if isinstance(ty, ir.FloatType):
        return "f32"
    if isinstance(ty, ir.DoubleType):
        return "f64"
    raise TypeError(f"no intrinsic suffix for {ty}")


def intrinsic(module: ir.Module, base: str, ret: ir.Type, args: list[ir.Type], overloads: list[ir.Type]) -> ir.Function:
    """Gets or declares `llvm.<base>.<suffixes>`."""
    name = ".".join([f"llvm.{base}"] + [type_suffix(t) for t in overloads])
    existing = module.globals.get(name)
    if existing is not None:
        return existing
    return ir.Function(module, ir.FunctionType(ret, args), name=name)


def call_unary(builder: ir.IRBuilder, base: str, x: ir.Value) -> ir.Value:
    return builder.call(intrinsic(builder.module, base, x.type, [x.type], [x.type]), [x])


def call_binary(builder: ir.IRBuilder, base: str, x: ir.Value, y: ir.Value) -> ir.Value:
    return builder.call(intrinsic(builder.module, base, x.type, [x.type, x.type], [x.type]), [x, y])


def fmuladd(builder: ir.IRBuilder, a: ir.Value, b: ir.Value, c: ir.Value) -> ir.Value:
    """a*b+c, fused where the target has FMA (llvm.fmuladd)."""
    fn = intrinsic(builder.module, "fmuladd", a.type, [a.type] * 3, [a.type])
    return builder.call(fn, [a, b, c])


def prefetch(builder: ir.IRBuilder, ptr: ir.Value, locality: int = 3) -> None:
    """A read prefetch of the cache line at ptr (llvm.prefetch: no fault for any address; dropped on
    targets without a prefetch instruction): into every cache level (locality 3, x86 prefetcht0), or
    into L2 and beyond (locality 2, prefetcht1) for data needed only after the L1 has turned over."""
    i32 = ir.IntType(32)
    fn = intrinsic(builder.module, "prefetch.p0", ir.VoidType(), [ptr.type, i32, i32, i32], [])
    builder.call(fn, [ptr, ir.Constant(i32, 0), ir.Constant(i32, locality), ir.Constant(i32, 1)])


def halving_reduce(builder: ir.IRBuilder, v: ir.Value, combine) -> ir.Value:
    """v's lanes combined by halving (log2(lanes) dependent steps): combine(builder, low half, high half)
    until one lane is left, which is returned."""
    i32 = ir.IntType(32)
    width = v.type.count
    while width > 1:
        half = width // 2
        lo = builder.shuffle_vector(v, v, ir.Constant(ir.VectorType(i32, half), list(range(half))))
        hi = builder.shuffle_vector(v, v, ir.Constant(ir.VectorType(i32, half), list(range(half, width))))
        v = combine(builder, lo, hi)
        width = half
    return builder.extract_element(v, ir.Constant(i32, 0))


def fp_to_int_saturating(builder: ir.IRBuilder, x: ir.Value, to: ir.IntType, signed: bool) -> ir.Value:
    """Truncation toward zero, NaN to 0, out of range saturated (llvm.fpto[su]i.sat)."""
    base = "fptosi.sat" if signed else "fptoui.sat"
    fn = intrinsic(builder.module, base, to, [x.type], [to, x.type])
    return builder.call(fn, [x])
