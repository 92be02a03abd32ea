"""VectorCode: the code of one float type (float32/float64) in explicit vectors of a fixed lane count (the
target's vector width, or fewer), shared by the native linear-algebra kernels (codegen/linalg.py,
linalg_eigh.py): scalar and vector loads and stores (masked for the tail of a row), splats, lane masks,
in-register transposes of lanes x lanes tiles, lane sums and the vector loop over a row with its masked
tail. A kernel's own operations live in a subclass or next to it; this class holds only what is not
specific to one algorithm.

Conventions: offsets are i64 element indices from a base pointer of the element type; stores take
(base, offset, value).
"""
from __future__ import annotations

import numpy as np
from llvmlite import ir

from .intrinsics import call_unary, halving_reduce
from .loops import const64, for_range, local_var
from .types import I1, I32, PTR, info


def lanes_for(vector_bytes: int, dtype) -> int:
    """The lanes of a vector of `vector_bytes` bytes of dtype (at least 1)."""
    return max(vector_bytes // np.dtype(dtype).itemsize, 1)


class VectorCode:
    """Scalar and vector memory access and arithmetic of one float type at `lanes` lanes.

    Attributes: b (the builder), dtype, ty (the element's IR type), size (its bytes), lanes, vec (the
    vector type), int_ty (the integer of the element's width), abs_bits (the bits of |x|), nan_key (the
    bit pattern just above +inf's: every NaN's |bits| compare above it)."""

    def __init__(self, b: ir.IRBuilder, dtype, lanes: int):
        self.b = b
        self.dtype = np.dtype(dtype)
        self.ty = info(self.dtype).storage
        self.size = self.dtype.itemsize
        self.lanes = max(int(lanes), 1)
        self.vec = ir.VectorType(self.ty, self.lanes)
        bits = 8 * self.size
        self.int_ty = ir.IntType(bits)
        self.abs_bits = (1 << (bits - 1)) - 1
        self.nan_key = 0x7F800001 if bits == 32 else 0x7FF0000000000001

    # ---- scalars --------------------------------------------------------------------------------------
    def const(self, value: float) -> ir.Constant:
        return ir.Constant(self.ty, float(value))

    def ptr(self, base, offset, inbounds: bool = True):
        return self.b.gep(base, [offset], inbounds=inbounds, source_etype=self.ty)

    def load(self, base, offset):
        return self.b.load(self.ptr(base, offset), typ=self.ty)

    def store(self, base, offset, value):
        self.b.store(value, self.ptr(base, offset))

    def var(self, init, name):
        """A stack slot holding `init` (a value of any type)."""
        return local_var(self.b, init.type, init, name)

    def sqrt(self, x):
        return call_unary(self.b, "sqrt", x)

    def fabs(self, x):
        return call_unary(self.b, "fabs", x)

    # ---- vectors --------------------------------------------------------------------------------------
    def vload(self, base, offset, mask=None):
        """A vector from base[offset:]; with a mask (the tail of a row) only its lanes are read, the others
        are zero."""
        if mask is None:
            return self.b.load(self.ptr(base, offset), typ=self.vec, align=self.size)
        return self.b.call(self._masked("load"), [self.ptr(base, offset, False), ir.Constant(I32, self.size), mask,
                                                  ir.Constant(self.vec, None)])

    def vstore(self, base, offset, value, mask=None):
        if mask is None:
            self.b.store(value, self.ptr(base, offset), align=self.size)
        else:
            self.b.call(self._masked("store"),
                        [value, self.ptr(base, offset, False), ir.Constant(I32, self.size), mask])

    def _masked(self, op: str):
        """llvm.masked.load / llvm.masked.store of this vector type (lanes off the mask are never touched)."""
        suffix = f"v{self.lanes}{'f32' if self.size == 4 else 'f64'}"
        name = f"llvm.masked.{op}.{suffix}.p0"
        fn = self.b.module.globals.get(name)
        if fn is None:
            mask = ir.VectorType(I1, self.lanes)
            if op == "load":
                sig = ir.FunctionType(self.vec, [PTR, I32, mask, self.vec])
            else:
                sig = ir.FunctionType(ir.VoidType(), [self.vec, PTR, I32, mask])
            fn = ir.Function(self.b.module, sig, name=name)
        return fn

    def splat(self, x):
        """x in every lane."""
        b = self.b
        undef = ir.Constant(self.vec, ir.Undefined)
        one = b.insert_element(undef, x, ir.Constant(I32, 0))
        return b.shuffle_vector(one, undef, ir.Constant(ir.VectorType(I32, self.lanes), [0] * self.lanes))

    def mask(self, count):
        """The lanes below `count` (an i64 value in [0, lanes])."""
        b = self.b
        lanes = ir.Constant(ir.VectorType(I32, self.lanes), list(range(self.lanes)))
        limit = b.trunc(count, I32)
        one = b.insert_element(ir.Constant(ir.VectorType(I32, self.lanes), None), limit, ir.Constant(I32, 0))
        limits = b.shuffle_vector(one, ir.Constant(ir.VectorType(I32, self.lanes), None),
                                  ir.Constant(ir.VectorType(I32, self.lanes), [0] * self.lanes))
        return b.icmp_unsigned("<", lanes, limits)

    def lanes_if(self, mask, cond):
        """mask's lanes where the i1 cond holds, else none."""
        b = self.b
        one = b.insert_element(ir.Constant(ir.VectorType(I1, self.lanes), None), cond, ir.Constant(I32, 0))
        spread = b.shuffle_vector(one, ir.Constant(ir.VectorType(I1, self.lanes), None),
                                  ir.Constant(ir.VectorType(I32, self.lanes), [0] * self.lanes))
        return b.and_(mask, spread)

    def tile_masks(self, limit: int, start):
        """(count of valid lanes clamped to [0, lanes], mask of the lanes start + l < limit) for a tile starting
        at row/column `start` (i64) of a dimension of `limit`."""
        b = self.b
        left = b.sub(const64(limit), start)
        count = b.select(b.icmp_signed("<", left, const64(self.lanes)), left, const64(self.lanes))
        return count, self.mask(count)

    def gather(self, base, offset, stride: int, mask=None, count=None):
        """A vector of the lanes elements at offset + l * stride (one vector load when stride is 1); with a
        mask, only the first `count` lanes are read (the others repeat lane 0's element)."""
        if stride == 1:
            return self.vload(base, offset, mask)
        b = self.b
        v = ir.Constant(self.vec, None)
        for lane in range(self.lanes):
            at = b.add(offset, const64(lane * stride))
            if count is not None and lane:
                at = b.select(b.icmp_unsigned("<", const64(lane), count), at, offset)
            v = b.insert_element(v, self.load(base, at), ir.Constant(I32, lane))
        return v

    def transpose(self, rows: list) -> list:
        """The lanes x lanes tile whose rows are `rows` (lanes vectors), transposed: log2(lanes) rounds of
        two-vector shuffles, round d exchanging bit d of the row and column indices."""
        b, v = self.b, self.lanes
        d = 1
        while d < v:
            new = list(rows)
            for i in range(v):
                if i & d:
                    continue
                low = ir.Constant(ir.VectorType(I32, v), [v + l - d if l & d else l for l in range(v)])
                high = ir.Constant(ir.VectorType(I32, v), [v + l if l & d else l + d for l in range(v)])
                new[i] = b.shuffle_vector(rows[i], rows[i + d], low)
                new[i + d] = b.shuffle_vector(rows[i], rows[i + d], high)
            rows = new
            d *= 2
        return rows

    def hsum(self, v):
        """The sum of v's lanes by halving (log2(lanes) dependent adds)."""
        return halving_reduce(self.b, v, lambda b, lo, hi: b.fadd(lo, hi))

    def hsum_in_order(self, v):
        """The lanes of v added in order (lane 0 + lane 1 + ...): the rounding of a sequential sum."""
        b = self.b
        total = b.extract_element(v, ir.Constant(I32, 0))
        for lane in range(1, self.lanes):
            total = b.fadd(total, b.extract_element(v, ir.Constant(I32, lane)))
        return total

    # ---- loops ----------------------------------------------------------------------------------------
    def row_loop(self, count, body, name="c"):
        """body(c, None, None) for c = 0, lanes, ... while c + lanes <= count, then body(c, mask, rest) once
        for the rest (fewer than lanes elements, rest > 0: the lanes of mask). count: an i64 value or int."""
        b = self.b
        count = const64(count) if isinstance(count, int) else count
        vectors = b.udiv(count, const64(self.lanes))
        for_range(b, 0, vectors, lambda v: body(b.mul(v, const64(self.lanes)), None, None), name=f"{name}.v")
        done = b.mul(vectors, const64(self.lanes))
        rest = b.sub(count, done)
        with b.if_then(b.icmp_unsigned("!=", rest, const64(0))):
            body(done, self.mask(rest), rest)


__all__ = ["VectorCode", "lanes_for"]
