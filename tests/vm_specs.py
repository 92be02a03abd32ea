"""ModuleSpecs used by the VM tests."""

from __future__ import annotations

import numpy as np

from kiln.vm.isa import Instr, Label
from kiln.vm.module_spec import (BindingSpec, ConstantSpec, FunctionSpec, GlobalSpec,
                                 KernelImageSpec, KernelSpec, ModuleSpec, TensorType,
                                 ValueInfo)

F4 = TensorType("f32", (4,))
I64 = TensorType("i64", ())


def fn(name, args, results, code, ref=8, i64=8, exported=True):
    return FunctionSpec(name, exported, [ValueInfo(n, t) for n, t in args],
                        [ValueInfo(n, t) for n, t in results], "[]", "[]", ref, i64, code)


def kernel_image(code: bytes, triple: str) -> KernelImageSpec:
    """A text-only image: code padded to 64 bytes, text_size covering all of it."""
    padded = code + b"\0" * (-len(code) % 64)
    return KernelImageSpec(triple, "", padded, len(padded), 64, [])


def axpy_spec(kernel_code: bytes, triple: str) -> ModuleSpec:
    """predict(x) = x + scale * w with w a global, scale 2 an i64 constant; plus
    state: a mutable counter bumped by `step`, and a loop computing a sum."""
    done, loop, body = Label("done"), Label("loop"), Label("body")
    return ModuleSpec(
        "axpy",
        functions=[
            fn("predict", [("x", F4)], [("y", F4)], [
                Instr("global.load", 1, 0),
                Instr("alloc", 2, F4),
                Instr("i.const", 0, 4),
                Instr("const", 3, 0),
                Instr("i.load", 1, 3),
                Instr("dispatch", 0, 3, [0, 1, 2], [0, 1]),
                Instr("ret", [2]),
            ]),
            fn("step", [], [("count", I64)], [
                Instr("global.load", 0, 1),
                Instr("call", 2, [0], [1]),
                Instr("global.store", 1, 1),
                Instr("ret", [1]),
            ]),
            fn("bump", [("c", I64)], [("next", I64)], [
                Instr("i.load", 0, 0),
                Instr("i.const", 1, 1),
                Instr("i.add", 0, 0, 1),
                Instr("i.store", 1, 0, I64),
                Instr("ret", [1]),
            ], exported=False),
            fn("triangle", [("n", I64)], [("sum", I64)], [
                Instr("i.load", 0, 0),
                Instr("i.const", 1, 0),
                Instr("i.const", 2, 1),
                Instr("i.const", 4, 0),
                loop,
                Instr("i.lt", 3, 4, 0),
                Instr("br.if", 3, body, done),
                body,
                Instr("i.add", 1, 1, 0),
                Instr("i.sub", 0, 0, 2),
                Instr("br", loop),
                done,
                Instr("i.store", 1, 1, I64),
                Instr("ret", [1]),
            ]),
        ],
        globals=[GlobalSpec("w", F4, False, np.array([1, 2, 3, 4], np.float32)),
                 GlobalSpec("counter", I64, True, None)],
        constants=[ConstantSpec(np.array(2, np.int64))],
        kernel_images=[kernel_image(kernel_code, triple)],
        kernels=[KernelSpec("axpy", 0, 0, [BindingSpec(16, False), BindingSpec(16, False),
                                           BindingSpec(16, True)], 2)],
    )


def sample_spec(kernel_code: bytes = b"\xc3", triple: str = "x86_64-unknown-linux-gnu"):
    return axpy_spec(kernel_code, triple)
