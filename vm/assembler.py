"""Encode instructions into code words, resolving labels to word offsets."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from kiln.vm.isa import Instr, Label, instr_words
from kiln.vm.module_spec import TensorType


class AssemblyError(ValueError):
    """Code that cannot be encoded (a label missing or placed twice)."""


def label_offsets(code: Sequence[Instr | Label]) -> dict[Label, int]:
    """Word offset of every Label placed in `code`."""
    offsets: dict[Label, int] = {}
    pc = 0
    for item in code:
        if isinstance(item, Label):
            if item in offsets:
                raise AssemblyError(f"label {item!r} is placed twice")
            offsets[item] = pc
        elif isinstance(item, Instr):
            pc += instr_words(item)
        else:
            raise AssemblyError(f"code holds {item!r}, expected an Instr or a Label")
    return offsets


def assemble(code: Sequence[Instr | Label],
             type_index: Callable[[TensorType], int] | None = None) -> list[int]:
    """Code words of `code`; `type_index` maps TensorType operands to type-table indices."""
    labels = label_offsets(code)
    words: list[int] = []
    for item in code:
        if isinstance(item, Label):
            continue
        words.append(item.opdef.code)
        for (kind, name), value in zip(item.opdef.operands, item.operands):
            if kind == "imm64":
                words += [value & 0xFFFFFFFF, (value >> 32) & 0xFFFFFFFF]
            elif kind in ("list_r", "list_i"):
                words.append(len(value))
                words += value
            elif isinstance(value, Label):
                if value not in labels:
                    raise AssemblyError(f"{item.op}: label {value!r} is never placed")
                words.append(labels[value])
            elif isinstance(value, TensorType):
                if type_index is None:
                    raise AssemblyError(f"{item.op}: a TensorType operand needs type_index")
                words.append(type_index(value))
            else:
                words.append(value)
    return words
