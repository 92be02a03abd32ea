"""Decode code words back into instructions and print them, one line each."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from kiln.vm.isa import OPS_BY_CODE, Instr, Label
from kiln.vm.module_spec import TensorType


class DecodeError(ValueError):
    """Code words that are not a valid instruction stream."""


@dataclass
class Names:
    """Module tables used to print operands by name instead of by index."""

    types: Sequence[TensorType] = ()
    globals: Sequence[str] = ()
    kernels: Sequence[str] = ()
    functions: Sequence[str] = ()
    constants: Sequence[str] = field(default_factory=tuple)
    # constant index -> its bytes, for the templates debug.print instructions name (shown as a comment)
    constant_data: dict = field(default_factory=dict)


TEMPLATE_SHOWN = 60
"""The most template bytes a disassembly line shows (then `...`), in C's kiln_module_disassemble too."""


def template_comment(data: bytes) -> str:
    """`   ; "text"` for a debug.print template: printable ASCII as it is, `"` and `\\` escaped, newline as
    `\\n`, other bytes as `\\xNN`; at most TEMPLATE_SHOWN bytes, then `...` (kiln_module_disassemble
    writes the same)."""
    out = []
    for b in data[:TEMPLATE_SHOWN]:
        if b in (0x22, 0x5C):
            out.append("\\" + chr(b))
        elif b == 0x0A:
            out.append("\\n")
        elif 0x20 <= b < 0x7F:
            out.append(chr(b))
        else:
            out.append(f"\\x{b:02x}")
    return '   ; "' + "".join(out) + '"' + ("..." if len(data) > TEMPLATE_SHOWN else "")


def decode(words: Sequence[int], types: Sequence[TensorType] | None = None
           ) -> list[tuple[int, Instr]]:
    """(word offset, Instr) pairs; targets stay ints, types resolve when `types` is given."""
    out = []
    pc = 0
    n = len(words)
    while pc < n:
        start = pc
        opdef = OPS_BY_CODE.get(words[pc])
        if opdef is None:
            raise DecodeError(f"word {pc}: unknown opcode {words[pc]}")
        pc += 1
        operands = []
        for kind, name in opdef.operands:
            if kind == "imm64":
                if pc + 2 > n:
                    raise DecodeError(f"word {start}: {opdef.name} is truncated")
                v = words[pc] | (words[pc + 1] << 32)
                operands.append(v - (1 << 64) if v >= 1 << 63 else v)
                pc += 2
            elif kind in ("list_r", "list_i"):
                if pc >= n or pc + 1 + words[pc] > n:
                    raise DecodeError(f"word {start}: {opdef.name} {name} list is truncated")
                count = words[pc]
                operands.append(tuple(words[pc + 1:pc + 1 + count]))
                pc += 1 + count
            else:
                if pc >= n:
                    raise DecodeError(f"word {start}: {opdef.name} is truncated")
                v = words[pc]
                if kind == "type" and types is not None:
                    if v >= len(types):
                        raise DecodeError(f"word {start}: {opdef.name}: type {v} out of range")
                    v = types[v]
                operands.append(v)
                pc += 1
        out.append((start, Instr(opdef.name, *operands)))
    return out


def with_labels(decoded: Sequence[tuple[int, Instr]]) -> list[Instr | Label]:
    """Code list with int branch targets replaced by Labels placed at their offsets."""
    starts = {pc for pc, _ in decoded}
    labels: dict[int, Label] = {}
    for _, instr in decoded:
        for (kind, _), v in zip(instr.opdef.operands, instr.operands):
            if kind == "target":
                if v not in starts:
                    raise DecodeError(f"{instr.op}: branch target {v} is not an instruction start")
                labels.setdefault(v, Label(f"L{v}"))
    code: list[Instr | Label] = []
    for pc, instr in decoded:
        if pc in labels:
            code.append(labels[pc])
        operands = [labels[v] if kind == "target" else v
                    for (kind, _), v in zip(instr.opdef.operands, instr.operands)]
        code.append(Instr(instr.op, *operands))
    return code


def _name(table: Sequence[str], kind: str, index: int) -> str:
    if 0 <= index < len(table) and table[index]:
        return f"{kind}({table[index]})"
    return f"{kind}#{index}"


def format_operand(kind: str, value, names: Names | None = None, labels: bool = False) -> str:
    names = names or Names()
    if kind == "r":
        return f"r{value}"
    if kind == "i":
        return f"i{value}"
    if kind in ("list_r", "list_i"):
        return "[" + ", ".join(f"{kind[-1]}{v}" for v in value) + "]"
    if kind == "type":
        if isinstance(value, TensorType):
            return str(value)
        return str(names.types[value]) if value < len(names.types) else f"type#{value}"
    if kind == "target":
        if isinstance(value, Label):
            return f"{value.name or 'label'}"
        return f"@L{value}" if labels else f"@{value}"
    if kind == "global":
        return _name(names.globals, "global", value)
    if kind == "kernel":
        return _name(names.kernels, "kernel", value)
    if kind == "func":
        return _name(names.functions, "func", value)
    if kind == "const":
        return _name(names.constants, "const", value)
    return str(value)


def format_instr(instr: Instr, names: Names | None = None, labels: bool = False) -> str:
    ops = ", ".join(format_operand(kind, v, names, labels)
                    for (kind, _), v in zip(instr.opdef.operands, instr.operands))
    return f"{instr.op} {ops}" if ops else instr.op


def branch_structure(decoded: Sequence[tuple[int, Instr]]
                     ) -> tuple[dict[int, list[int]], set[int]]:
    """({target: [offsets of the branches to it]}, {offsets of back-edges}).

    A back-edge is a branch to its own offset or an earlier one: the jump that
    closes a loop (the VM has no other way to repeat code)."""
    targets: dict[int, list[int]] = {}
    back: set[int] = set()
    for pc, instr in decoded:
        for (kind, _), v in zip(instr.opdef.operands, instr.operands):
            if kind == "target":
                targets.setdefault(v, []).append(pc)
                if v <= pc:
                    back.add(pc)
    return targets, back


def disassemble(words: Sequence[int], names: Names | None = None, indent: str = "") -> str:
    """Text of a code vector: one `offset  op operands` line per instruction, a
    `L<offset>:` line before every branch target (targets print as `@L<offset>`),
    loop headers and back-edges marked:

        L27:   ; loop header (back-edge from 68)
           27  i.lt i3, i0, i1
           ...
           68  br @L27   ; loop back-edge

    The C runtime's kiln_module_disassemble (kiln-run --disassemble) prints the
    same text."""
    decoded = decode(words)
    targets, back = branch_structure(decoded)
    lines = []
    for pc, instr in decoded:
        if pc in targets:
            loops = [b for b in targets[pc] if b >= pc]
            note = (f"   ; loop header (back-edge from {', '.join(map(str, loops))})"
                    if loops else "")
            lines.append(f"{indent}L{pc}:{note}")
        text = format_instr(instr, names, labels=True)
        if instr.op == "debug.print" and names is not None and instr.operands[0] in names.constant_data:
            text += template_comment(names.constant_data[instr.operands[0]])
        if pc in back:
            text += "   ; loop back-edge"
        lines.append(f"{indent}{pc:5d}  {text}")
    return "\n".join(lines)
