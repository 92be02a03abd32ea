"""The VM's instruction set: ops (from schemas/bytecode_ops.toml), Instr and Label."""

from __future__ import annotations

from dataclasses import dataclass

from kiln.vm._generated import bytecode_ops as _gen
from kiln.vm.module_spec import TensorType

OPERAND_KINDS = _gen.OPERAND_KINDS
INDEX_KINDS = ("const", "global", "kernel", "func")
_U32 = 1 << 32


@dataclass(frozen=True)
class OpDef:
    """One op: opcode, name, operands as (kind, name) pairs, terminator flag, doc."""

    code: int
    name: str
    operands: tuple[tuple[str, str], ...]
    terminator: bool
    doc: str


OPS: tuple[OpDef, ...] = tuple(OpDef(*row) for row in _gen.OPS)
OPS_BY_NAME: dict[str, OpDef] = {op.name: op for op in OPS}
OPS_BY_CODE: dict[int, OpDef] = {op.code: op for op in OPS}


class Label:
    """A branch target; place it in a function's code list before its instruction."""

    __slots__ = ("name",)

    def __init__(self, name: str | None = None):
        self.name = name

    def __repr__(self) -> str:
        return f"Label({self.name!r})" if self.name else f"Label@{id(self):x}"


def _check_operand(op: str, kind: str, value):
    def fail(expected: str):
        raise TypeError(f"{op}: operand of kind {kind!r} expects {expected}, got {value!r}")

    if kind in ("list_r", "list_i"):
        if not isinstance(value, (list, tuple)):
            fail("a list of register numbers")
        items = tuple(value)
        for v in items:
            if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v < _U32:
                fail("a list of register numbers")
        return items
    if kind == "type" and isinstance(value, TensorType):
        return value
    if kind == "target" and isinstance(value, Label):
        return value
    if isinstance(value, bool) or not hasattr(value, "__index__"):
        fail("an int" + (", a TensorType" if kind == "type" else "")
             + (" or a Label" if kind == "target" else ""))
    value = int(value)
    if kind == "imm64":
        if not -(1 << 63) <= value < (1 << 63):
            fail("a signed 64-bit int")
    elif not 0 <= value < _U32:
        fail("an unsigned 32-bit int")
    return value


@dataclass(frozen=True, init=False)
class Instr:
    """An instruction: op name and operands in the op table's order.

    Registers and table indices are ints; `type` operands are TensorTypes (or
    type-table indices); `target` operands are Labels (or word offsets); lists
    are tuples of register numbers.
    """

    op: str
    operands: tuple

    def __init__(self, op: str, *operands):
        opdef = OPS_BY_NAME.get(op)
        if opdef is None:
            raise ValueError(f"unknown op {op!r}")
        if len(operands) != len(opdef.operands):
            raise TypeError(f"{op} takes {len(opdef.operands)} operands "
                            f"({', '.join(f'{k}:{n}' for k, n in opdef.operands)}), "
                            f"got {len(operands)}")
        checked = tuple(_check_operand(op, kind, v)
                        for (kind, _), v in zip(opdef.operands, operands))
        object.__setattr__(self, "op", op)
        object.__setattr__(self, "operands", checked)

    @property
    def opdef(self) -> OpDef:
        return OPS_BY_NAME[self.op]

    def __repr__(self) -> str:
        return f"Instr({', '.join(map(repr, (self.op,) + self.operands))})"


def operand_words(kind: str, value) -> int:
    """Number of code words an operand occupies."""
    if kind == "imm64":
        return 2
    if kind in ("list_r", "list_i"):
        return 1 + len(value)
    return 1


def instr_words(instr: Instr) -> int:
    return 1 + sum(operand_words(k, v) for (k, _), v in zip(instr.opdef.operands,
                                                             instr.operands))
