"""Loop and control-flow helpers over llvmlite's IRBuilder."""
from __future__ import annotations

from typing import Callable

from llvmlite import ir

from .types import I64


def const64(value: int) -> ir.Constant:
    return ir.Constant(I64, int(value))


def for_range(builder: ir.IRBuilder, start, stop, body: Callable[[ir.Value], None], name: str = "i", step: int = 1,
              vector_width: int | None = None, interleave: int | None = None) -> None:
    """Emits `for (i = start; i < stop; i += step) body(i)` with an i64 induction variable.

    vector_width: LLVM's loop vectorizer is asked for exactly that many lanes (loop metadata
    `llvm.loop.vectorize.width`), whatever its cost model would choose; only for loops whose lanes compute
    the same operations at any width (no reassociated reduction), so the width changes no bits.
    interleave: the vectorized loop computes that many independent vectors per iteration (loop metadata
    `llvm.loop.interleave.count`; LLVM's cost model takes 1 for a long body), so that the out-of-order core
    overlaps their dependency chains; the lanes' operations are the same, so it changes no bits either."""
    start = const64(start) if isinstance(start, int) else start
    stop = const64(stop) if isinstance(stop, int) else stop
    fn = builder.function
    pre = builder.block
    head = fn.append_basic_block(f"{name}.head")
    loop = fn.append_basic_block(f"{name}.body")
    done = fn.append_basic_block(f"{name}.done")
    builder.branch(head)
    builder.position_at_end(head)
    index = builder.phi(I64, name=name)
    index.add_incoming(start, pre)
    builder.cbranch(builder.icmp_signed("<", index, stop), loop, done)
    builder.position_at_end(loop)
    body(index)
    following = builder.add(index, const64(step), name=f"{name}.next")
    index.add_incoming(following, builder.block)
    latch = builder.branch(head)
    if vector_width or interleave:
        latch.set_metadata("llvm.loop", _loop_id(builder.module, vector_width, interleave))
    builder.position_at_end(done)


def _loop_id(module: ir.Module, width: int | None, interleave: int | None = None):
    """A distinct loop ID (self-referential, as LLVM requires) asking for `width` vector lanes (LLVM's choice when
    None) and `interleave` vectors per iteration."""
    count = getattr(module, "_kiln_loop_ids", 0)
    module._kiln_loop_ids = count + 1

    def prop(name, value):
        return module.add_metadata([ir.MetaDataString(module, name), value])

    i32 = ir.IntType(32)
    properties = [prop("llvm.loop.vectorize.width", ir.Constant(i32, width))] if width else []
    if interleave:
        properties.append(prop("llvm.loop.interleave.count", ir.Constant(i32, interleave)))
    properties += [prop("llvm.loop.vectorize.enable", ir.Constant(ir.IntType(1), 1)),
                   module.add_metadata([ir.MetaDataString(module, f"kiln.loop.{count}")])]
    loop_id = module.add_metadata([None] + properties)  # unique through its last property
    loop_id.operands = (loop_id,) + tuple(loop_id.operands[1:])
    return loop_id


def if_then(builder: ir.IRBuilder, cond: ir.Value, body: Callable[[], None]) -> None:
    with builder.if_then(cond):
        body()


def local_var(builder: ir.IRBuilder, ty, init, name: str):
    """A stack slot of type ty holding init (a mutable local for while loops); its alloca sits at the top
    of the function's entry block, so emitting it inside a loop does not grow the stack per iteration."""
    entry = builder.function.entry_basic_block
    here = builder.block
    with builder.goto_block(entry):
        if entry.instructions:
            builder.position_before(entry.instructions[0])
        slot = builder.alloca(ty, name=name)
    if builder.block is not here:
        builder.position_at_end(here)
    builder.store(init, slot)
    return slot


def while_loop(builder: ir.IRBuilder, cond: Callable[[], ir.Value], body: Callable[[ir.Block], None], name: str = "w") -> None:
    """Emits `while (cond()) body(done)`; cond and body emit code at the builder's position, and body may
    branch to `done` (the block after the loop) to break."""
    fn = builder.function
    head, loop, done = (fn.append_basic_block(f"{name}.head"), fn.append_basic_block(f"{name}.body"),
                        fn.append_basic_block(f"{name}.done"))
    builder.branch(head)
    builder.position_at_end(head)
    builder.cbranch(cond(), loop, done)
    builder.position_at_end(loop)
    body(done)
    if not builder.block.is_terminated:
        builder.branch(head)
    builder.position_at_end(done)


def delinearize(builder: ir.IRBuilder, linear: ir.Value, shape: tuple[int, ...]) -> list[ir.Value]:
    """Row-major multi-index of `linear` within `shape` (constant divisors)."""
    index = []
    rest = linear
    for dim in reversed(shape[1:]):
        index.append(builder.urem(rest, const64(dim)))
        rest = builder.udiv(rest, const64(dim))
    index.append(rest)
    return index[::-1]


def dot_offsets(builder: ir.IRBuilder, index: list[ir.Value], strides: tuple[int, ...], base=None) -> ir.Value:
    """base + sum(index[d] * strides[d]), skipping zero strides."""
    total = base if base is not None else const64(0)
    for i, s in zip(index, strides):
        if s == 0:
            continue
        term = i if s == 1 else builder.mul(i, const64(s))
        total = builder.add(total, term)
    return total


def workgroup_slice(builder: ir.IRBuilder, total: int, workgroup_id: ir.Value, workgroup_count: ir.Value):
    """The half-open slice [total*id/count, total*(id+1)/count) of this workgroup."""
    n = const64(total)
    lo = builder.udiv(builder.mul(n, workgroup_id), workgroup_count)
    hi = builder.udiv(builder.mul(n, builder.add(workgroup_id, const64(1))), workgroup_count)
    return lo, hi


def guarded(builder: ir.IRBuilder, valid, fn, *args):
    """fn(*args), under `if valid` unless valid is None (every index known to be in range)."""
    if valid is None:
        fn(*args)
    else:
        with builder.if_then(valid):
            fn(*args)
