"""Writes vm_test_modules.h: modules for test_vm.c, as C byte arrays.

The modules carry no kernel images, so the header is the same on every host.
Run `python runtime-c/tests/gen_vm_test_modules.py` after changing the module
format; tests/test_vm_c_fixtures.py checks that the header is up to date.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from kiln.vm.isa import Instr, Label
from kiln.vm.module_spec import (ConstantSpec, FunctionSpec, GlobalSpec, ModuleSpec,
                                 TensorType, ValueInfo)
from kiln.vm.checksum import TRAILER_SIZE, reseal
from kiln.vm.writer import serialize

HEADER = Path(__file__).resolve().parent / "vm_test_modules.h"
I64 = TensorType("i64", ())
F4 = TensorType("f32", (4,))


def fn(name, args, results, code, exported=True, ref=4, i64=6):
    return FunctionSpec(name, exported, [ValueInfo(n, t) for n, t in args],
                        [ValueInfo(n, t) for n, t in results], '["x"]', '"y"', ref, i64, code)


def triangle():
    """triangle(n) = 0 + 1 + ... + n, a loop of 5n + 8 instructions."""
    loop, body, done = Label("loop"), Label("body"), Label("done")
    return fn("triangle", [("n", I64)], [("sum", I64)], [
        Instr("i.load", 0, 0), Instr("i.const", 1, 0), Instr("i.const", 2, 1),
        Instr("i.const", 4, 0), loop, Instr("i.lt", 3, 4, 0),
        Instr("br.if", 3, body, done), body, Instr("i.add", 1, 1, 0),
        Instr("i.sub", 0, 0, 2), Instr("br", loop), done,
        Instr("i.store", 1, 1, I64), Instr("ret", [1])])


def good() -> ModuleSpec:
    return ModuleSpec("vmtest", functions=[
        triangle(),
        fn("step", [], [("count", I64)], [
            Instr("global.load", 0, 1), Instr("call", 2, [0], [1]),
            Instr("global.store", 1, 1), Instr("ret", [1])]),
        fn("bump", [("c", I64)], [("next", I64)], [
            Instr("i.load", 0, 0), Instr("i.const", 1, 1), Instr("i.add", 0, 0, 1),
            Instr("i.store", 1, 0, I64), Instr("ret", [1])], exported=False),
        fn("weights", [], [("w", F4), ("k", I64)], [
            Instr("global.load", 0, 0), Instr("const", 1, 0), Instr("mov", 2, 1),
            Instr("ret", [0, 2])]),
        fn("unset", [], [("x", I64)], [Instr("mov", 1, 3), Instr("ret", [1])]),
        fn("recurse", [], [], [Instr("call", 5, [], []), Instr("ret", [])]),
    ], globals=[
        GlobalSpec("w", F4, False, np.array([1.5, 2, 3, 4], np.float32)),
        GlobalSpec("counter", I64, True, None),
    ], constants=[ConstantSpec(np.array(42, np.int64))])


def rows() -> ModuleSpec:
    """buffer.row and buffer.set_row: views, copies, a loop, and every error."""
    x16, x4 = TensorType("f32", (6, 16)), TensorType("f32", (5, 4))
    r16, r4, two = TensorType("f32", (16,)), F4, TensorType("f32", (2, 4))
    loop, body, done = Label("loop"), Label("body"), Label("done")
    return ModuleSpec("vmrows", functions=[
        # The row of a 64-byte row stride: a view into x.
        fn("row16", [("x", x16), ("i", I64)], [("r", r16)], [
            Instr("i.load", 0, 1), Instr("buffer.row", 2, 0, 0), Instr("ret", [2])]),
        # 16-byte rows: a view when i * 16 % 64 == 0, else an aligned copy.
        fn("row4", [("x", x4), ("i", I64)], [("r", r4)], [
            Instr("i.load", 0, 1), Instr("buffer.row", 2, 0, 0), Instr("ret", [2])]),
        # ys[n-1-i] = xs[i] for i = 0..n-1: a loop with br.if.
        fn("reverse", [("xs", x4)], [("ys", x4)], [
            Instr("alloc", 1, x4), Instr("i.const", 0, 0), Instr("i.const", 1, 5),
            Instr("i.const", 2, 1), Instr("i.const", 5, 4), loop,
            Instr("i.lt", 3, 0, 1), Instr("br.if", 3, body, done), body,
            Instr("buffer.row", 2, 0, 0), Instr("i.sub", 4, 5, 0),
            Instr("buffer.set_row", 1, 4, 2), Instr("i.add", 0, 0, 2), Instr("br", loop),
            done, Instr("ret", [1])]),
        # Both rows = v, then row i = v again (i checked).
        fn("put", [("i", I64), ("v", r4)], [("m", two)], [
            Instr("alloc", 2, two), Instr("i.const", 1, 0), Instr("buffer.set_row", 2, 1, 1),
            Instr("i.const", 1, 1), Instr("buffer.set_row", 2, 1, 1), Instr("i.load", 0, 0),
            Instr("buffer.set_row", 2, 0, 1), Instr("ret", [2])]),
        # Errors: src of the wrong shape or dtype, read-only or frozen dst, 0-d src.
        fn("put_wide", [("v", TensorType("f32", (3,)))], [], [
            Instr("alloc", 1, two), Instr("i.const", 0, 0),
            Instr("buffer.set_row", 1, 0, 0), Instr("ret", [])]),
        fn("put_f64", [("v", TensorType("f64", (4,)))], [], [
            Instr("alloc", 1, two), Instr("i.const", 0, 0),
            Instr("buffer.set_row", 1, 0, 0), Instr("ret", [])]),
        fn("put_arg", [("x", x4), ("v", r4)], [], [
            Instr("i.const", 0, 0), Instr("buffer.set_row", 0, 0, 1), Instr("ret", [])]),
        fn("put_frozen", [("v", r4)], [], [
            Instr("alloc", 1, two), Instr("i.const", 0, 0), Instr("buffer.row", 2, 1, 0),
            Instr("buffer.set_row", 1, 0, 0), Instr("ret", [])]),
        fn("row_scalar", [("x", I64)], [], [
            Instr("i.const", 0, 0), Instr("buffer.row", 1, 0, 0), Instr("ret", [])]),
        # buffer.view: float parts as complex numbers and back; a view of another byte size.
        fn("join", [("p", TensorType("f32", (2, 2)))], [("z", TensorType("c64", (2,))),
                                                        ("q", TensorType("f32", (4,)))], [
            Instr("buffer.view", 1, 0, TensorType("c64", (2,))),
            Instr("buffer.view", 2, 1, TensorType("f32", (4,))), Instr("ret", [1, 2])]),
        fn("join_bad", [("p", TensorType("f32", (3,)))], [], [
            Instr("buffer.view", 1, 0, TensorType("c64", (2,))), Instr("ret", [])]),
    ])


def rows_element_aligned() -> ModuleSpec:
    """rows() for kernels that need only element-aligned bindings (format 2.1): the runtime
    reads arguments at any element-aligned address in place and shares every row."""
    spec = rows()
    spec.name, spec.element_aligned_bindings = "vmrows_element_aligned", True
    return spec


def safety() -> ModuleSpec:
    """The runtime's promises (test_call_safety.c): a global keeps a copy of an
    argument, alloc'd memory reads as zeros, and calls can be bounded and
    cancelled."""
    two = TensorType("f32", (2, 4))
    spin = Label("spin")
    return ModuleSpec("vmsafety", functions=[
        fn("keep", [("x", F4)], [], [Instr("global.store", 0, 0), Instr("ret", [])]),
        fn("keep_row", [("xs", two), ("i", I64)], [], [
            Instr("i.load", 0, 1), Instr("buffer.row", 2, 0, 0), Instr("global.store", 0, 2),
            Instr("ret", [])]),
        fn("kept", [], [("x", F4)], [Instr("global.load", 0, 0), Instr("ret", [0])]),
        fn("fresh", [], [("x", F4)], [Instr("alloc", 0, F4), Instr("ret", [0])]),
        # Row 1 = v; row 0 is never written.
        fn("half", [("v", F4)], [("m", two)], [
            Instr("alloc", 1, two), Instr("i.const", 0, 1), Instr("buffer.set_row", 1, 0, 0),
            Instr("ret", [1])]),
        triangle(),
        fn("spin", [], [], [spin, Instr("br", spin)]),
    ], globals=[GlobalSpec("kept", F4, True, None)])


WIDE_ARENA = 32 << 20  # runtime-c/src/memory.h: an arena from 2 MiB up, a nested call's from 32 MiB up, is mapped
WIDE_ORDINAL = 7  # its place in vmarena


def wide() -> FunctionSpec:
    """Large transient arenas (test_transient_storage.c, test_alloc_fail.c): wide(x) puts x in row 1 of a
    4-float buffer in the last 64 bytes of its 32 MiB arena, calls wide(x - 1) while x > 0 (each nested call
    gets an arena of its own), then returns a copy of the buffer: [0, x, 0, 0] whatever the nested calls
    wrote into theirs."""
    f32 = TensorType("f32", ())
    nest, done = Label("nest"), Label("done")
    spec = fn("wide", [("x", I64)], [("y", F4)], [
        Instr("alloc.transient", 1, F4, WIDE_ARENA - 64), Instr("i.load", 0, 0), Instr("i.store", 2, 0, f32),
        Instr("i.const", 1, 1), Instr("buffer.set_row", 1, 1, 2), Instr("i.const", 2, 0),
        Instr("i.lt", 3, 2, 0), Instr("br.if", 3, nest, done), nest, Instr("i.sub", 5, 0, 1),
        Instr("i.store", 3, 5, I64), Instr("call", WIDE_ORDINAL, [3], [4]), Instr("br", done), done,
        Instr("alloc", 3, F4), Instr("buffer.copy", 3, 1), Instr("ret", [3])], ref=5)
    spec.transient_size = WIDE_ARENA
    return spec


def arena() -> ModuleSpec:
    """Caller-provided transient storage (test_transient_storage.c): `fill` writes its argument
    into element 2 of a 4-float buffer at offset 0 of its 64-byte arena; `plain` has no arena; `wide` (last)
    has a 32 MiB one."""
    f32 = TensorType("f32", ())
    fill = fn("fill", [("x", I64)], [("x", I64)], [
        Instr("alloc.transient", 1, F4, 0), Instr("i.load", 0, 0), Instr("i.store", 2, 0, f32),
        Instr("i.const", 1, 2), Instr("buffer.set_row", 1, 1, 2), Instr("ret", [0])])
    fill.transient_size = 64
    # global.take (format 2.6): element 0 of global `acc` = x, in place when nothing else holds acc
    bump = fn("bump", [("x", I64)], [], [
        Instr("global.take", 1, 0), Instr("i.load", 0, 0), Instr("i.store", 2, 0, f32),
        Instr("i.const", 1, 0), Instr("buffer.set_row", 1, 1, 2), Instr("global.store", 0, 1),
        Instr("ret", [])])
    # global.store of arena memory: a copy, into the global's own buffer when only the context
    # holds it (element 3 of `acc` = x, the rest zeros)
    stash = fn("stash", [("x", I64)], [], [
        Instr("alloc.transient", 1, F4, 0), Instr("i.load", 0, 0), Instr("i.store", 2, 0, f32),
        Instr("i.const", 1, 3), Instr("buffer.set_row", 1, 1, 2), Instr("global.store", 0, 1),
        Instr("ret", [])])
    stash.transient_size = 64
    # buffer.copy (format 2.7): row 1 of an arena buffer = x, copied into a fresh result (and the
    # result onto itself: the same memory, nothing copied); copying into the argument, or a value
    # of another type, fails
    copy = fn("copy", [("x", I64)], [("y", F4)], [
        Instr("alloc.transient", 1, F4, 0), Instr("i.load", 0, 0), Instr("i.store", 2, 0, f32),
        Instr("i.const", 1, 1), Instr("buffer.set_row", 1, 1, 2), Instr("alloc", 3, F4),
        Instr("buffer.copy", 3, 1), Instr("buffer.copy", 3, 3), Instr("ret", [3])])
    copy.transient_size = 64
    copy_ro = fn("copy_ro", [("x", I64)], [], [
        Instr("alloc", 1, I64), Instr("buffer.copy", 0, 1), Instr("ret", [])])
    copy_type = fn("copy_type", [("x", I64)], [], [
        Instr("alloc", 1, F4), Instr("buffer.copy", 1, 0), Instr("ret", [])])
    return ModuleSpec("vmarena", functions=[fill, fn("plain", [("x", I64)], [("x", I64)], [Instr("ret", [0])]), bump,
                                            copy, copy_ro, copy_type, stash, wide()],
                      globals=[GlobalSpec("acc", F4, True, np.array([5, 6, 7, 8], np.float32))])


def printing() -> ModuleSpec:
    """debug.print (format 2.8): 'show' prints a 2x3 f32 argument, an i64 with a spec and a bool,
    in two lines; 'spec_of_array' formats a 1-d value (its own template constant) with a spec: an error;
    'call_host' calls host callback 7 with its arguments (debug.callback), then prints; 'complex_array'
    prints a c128 array (format 2.9) and 'complex_spec' a c64 0-d value with a spec: an error; 'options_repr'
    prints both with an options block and conversions (format 2.9)."""
    tpl = lambda text: ConstantSpec(np.frombuffer(text.encode(), np.uint8).copy())  # noqa: E731
    x23 = TensorType("f32", (2, 3))
    return ModuleSpec("vmprint", functions=[
        fn("show", [("x", x23), ("n", I64)], [("n", I64)], [
            Instr("debug.print", 0, [0, 1]), Instr("i.const", 0, 1), Instr("i.store", 2, 0, TensorType("bool", ())),
            Instr("debug.print", 1, [1, 2, 0]), Instr("ret", [1])]),
        fn("spec_of_array", [], [], [Instr("const", 0, 2), Instr("debug.print", 2, [0]), Instr("ret", [])]),
        fn("call_host", [("x", x23), ("n", I64)], [("n", I64)], [
            Instr("debug.callback", 7, [0, 1]), Instr("debug.print", 0, [0, 1]), Instr("ret", [1])]),
        # complex values print (2.9); with a spec, an error at run time, not an overrun (fuzz_invoke found it)
        fn("complex_array", [], [], [Instr("const", 0, 3), Instr("debug.print", 5, [0]), Instr("ret", [])]),
        fn("complex_spec", [], [], [Instr("const", 0, 4), Instr("debug.print", 6, [0]), Instr("ret", [])]),
        # format 2.9: a print options block, conversions, complex values
        fn("options_repr", [], [], [Instr("const", 0, 3), Instr("const", 1, 4), Instr("debug.print", 7, [0, 1]),
                                    Instr("ret", [])]),
    ], constants=[tpl("x = {0}, n = {1:+05d} {{literal}}"), tpl("n={0:>6.2f} flag={1} {2:}|end"),
                  tpl("{0:.3f}"), ConstantSpec(np.array([1 + 2j], np.complex128)),
                  ConstantSpec(np.array(1 + 2j, np.complex64)), tpl("{0}"), tpl("{0:f}"),
                  tpl("{!options precision=3 sign=plus linewidth=20 floatmode=fixed}{0!r} {0} {1!s} {1!r}")])


def printing_all() -> tuple[ModuleSpec, list[bytes]]:
    """(module vmprintall, the lines each of its functions p0, p1, ... prints): debug.print of every
    dtype 0-d to 3-d, empty, summarized (1-d and 3-d), wrapped and exponent-format arrays, nan/inf/-0,
    every spec kind on every 0-d value, escaped braces, NUL and non-UTF-8 template bytes, empty
    templates. Each expected line is numpy's str() of the array or Python's format() of the value.
    Not in the header (too large): fuzz/make_seeds.py writes it as a seed and
    tests/test_debug_print.py checks the runtime's text against these lines."""
    import re

    import ml_dtypes
    bf16 = ml_dtypes.bfloat16
    rng = np.random.default_rng(82)
    values = [
        np.array([[1.5, -0.0, np.nan], [np.inf, -np.inf, 65504]], np.float16),
        np.array([1, 0.1, -3.140625, 1e-3, 256], bf16),
        np.arange(1001, dtype=np.float32) * np.float32(0.37),
        rng.standard_normal((2, 3, 170)),
        np.array([1e-5, 1.0, 1e5], np.float32),
        rng.standard_normal(30).astype(np.float32),
        np.array([[-128, 127], [0, 5]], np.int8), np.array([-32768, 7], np.int16),
        np.arange(-6, 6, dtype=np.int32).reshape(2, 2, 3),
        np.array([np.iinfo(np.int64).min, 1], np.int64), np.array([255, 0], np.uint8),
        np.array([65535], np.uint16), np.array([4294967295], np.uint32),
        np.array([np.iinfo(np.uint64).max, 0], np.uint64), np.array([True, False, True]),
        np.zeros((0,), np.float32), np.zeros((2, 0), np.int32), np.arange(-500, 501, dtype=np.int16),
        np.array(0.1, np.float32), np.array(-2.5e-7, np.float64), np.array(3.0, np.float16),
        np.array(0.1, bf16), np.array(-7, np.int64), np.array(np.iinfo(np.uint64).max, np.uint64),
        np.array(True), np.array(-5, np.int8), np.array(np.nan, np.float32),
        np.array(-np.inf, np.float64), np.array(1e300, np.float64), np.array(200, np.uint8),
        # format 2.9: complex values, printed as numpy prints them
        np.array([1 + 2j, 3.5 - 4j, complex(np.nan, 1), complex(1, np.inf), -0.0 - 0.25j], np.complex64),
        (rng.standard_normal((2, 3)) + 1j * rng.standard_normal((2, 3)) * 1e-6).astype(np.complex128),
        np.array(0.1 + 0.2j, np.complex64), np.array(complex(-0.0, 1), np.complex128),
        np.array(1e20 - 1e-7j, np.complex128), np.array(3j, np.complex128),
    ]
    # format 2.9: numpy's print options in a template's {!options ...} block, each applied to these values
    option_sets = [{"precision": 3}, {"precision": 2, "floatmode": "fixed"}, {"precision": 3, "floatmode": "unique"},
                   {"precision": 4, "floatmode": "maxprec_equal"}, {"suppress": True}, {"sign": "+"},
                   {"sign": " "}, {"threshold": 5, "edgeitems": 1}, {"linewidth": 30},
                   {"threshold": 20, "edgeitems": 2, "linewidth": 40, "precision": 1, "sign": "+"}]
    optioned = [0, 2, 3, 4, 5, 6, 8, 13, 14, 16, 17, 18, 31, 32, 33, 34]
    float_specs = ["f", ".3e", "E", "g", "G", "F", "x<10", "*^12.2f", "+", " ", "010.3f", "-", ">9",
                   "=+12.4g", "^7", "0", ".0f", ".100f"]
    int_specs = ["d", "+d", " 5d", "_>8d", "08d", "=-6", "<4", ".2f", "e", "+"]

    def scalar(v):
        return float(v) if v.dtype == bf16 else v.item()

    def options_block(opts: dict) -> bytes:
        words = {"sign": {"-": "minus", "+": "plus", " ": "space"}}
        return ("{!options" + "".join(f" {k}={words.get(k, {}).get(v, int(v) if isinstance(v, bool) else v)}"
                                      for k, v in opts.items()) + "}").encode()

    def expect(template: bytes, idx: list[int]) -> bytes:
        opts, body = {}, template
        if template.startswith(b"{!options"):
            skip = template.index(b"}") + 1
            for word in template[len(b"{!options"):skip - 1].decode().split():
                k, v = word.split("=")
                opts[k] = {"minus": "-", "plus": "+", "space": " "}[v] if k == "sign" else \
                    bool(int(v)) if k == "suppress" else v if k == "floatmode" else int(v)
            body = template[skip:]
        out, pos = bytearray(), 0
        with np.printoptions(**opts):
            for m in re.finditer(rb"\{\{|\}\}|\{(\d+)(?:!([rsa]))?(?::([^{}]*))?\}", body):
                out += body[pos:m.start()]
                pos = m.end()
                if m.group(1) is None:
                    out += m.group(0)[:1]
                    continue
                v = values[idx[int(m.group(1))]]
                if m.group(2) is not None:
                    out += {"r": repr, "s": str, "a": ascii}[m.group(2).decode()](v).encode()
                elif m.group(3) is None:
                    out += (str(v) if v.ndim else "{}".format(scalar(v))).encode()
                else:
                    out += format(scalar(v), m.group(3).decode()).encode()
        return bytes(out + body[pos:] + b"\n")

    zero_d = [i for i, v in enumerate(values) if v.ndim == 0]
    prints = []  # per function: [(template, value indices)]
    for i, v in enumerate(values):
        lines = [(b"{0}", [i]), (b"{0!r} {0!s}", [i]), (b"{0!a}", [i])]
        if i in optioned:
            lines += [(options_block(o) + b"{0}|{0!r}", [i]) for o in option_sets]
        if v.ndim == 0 and v.dtype != np.bool_ and v.dtype.kind != "c":
            specs = int_specs if v.dtype.kind in "iu" else float_specs
            lines += [(f"{{0:{spec}}}".encode(), [i]) for spec in specs]
        prints.append(lines)
    prints.append([(b"{{}} {1} {{{0}}} \xff\xfe\x00tail {0:.1f}|", [zero_d[0], 14]), (b"", []),
                   (b"no fields at all", []), (b"{0}{0}{1}{0:e}{1}", [zero_d[1], 16]),
                   # more than 8 values: the VM's views list is malloc'ed
                   (b"|".join(b"{%d}" % j for j in range(10)), zero_d[:10])])
    constants = [ConstantSpec(v) for v in values]
    functions, expected = [], []
    for k, lines in enumerate(prints):
        code, text = [], b""
        for template, idx in lines:
            constants.append(ConstantSpec(np.frombuffer(template, np.uint8).copy()))
            code += [Instr("const", j, ci) for j, ci in enumerate(idx)]
            code.append(Instr("debug.print", len(constants) - 1, list(range(len(idx)))))
            text += expect(template, idx)
        functions.append(fn(f"p{k}", [], [], code + [Instr("ret", [])],
                            ref=max([4] + [len(idx) for _, idx in lines])))
        expected.append(text)
    return ModuleSpec("vmprintall", functions=functions, constants=constants), expected


def bad(code, expect, **kw) -> tuple[bytes, str]:
    spec = good()
    spec.functions.append(fn("bad", [], [], code, exported=False, **kw))
    return serialize(spec, check=False), expect


def bad_modules() -> list[tuple[str, bytes, str]]:
    cases = {
        "register": bad([Instr("mov", 4, 0), Instr("ret", [])],
                        "function 'bad': word 0: mov operand 'dst' names ref register r4, "
                        "but only 4 exist"),
        "int_register": bad([Instr("i.const", 6, 0), Instr("ret", [])],
                            "names int register i6, but only 6 exist"),
        "global": bad([Instr("global.load", 0, 2), Instr("ret", [])],
                      "names global 2, but only 2 exist"),
        "target": bad([Instr("br", 1)], "br target 1 is not the start of an instruction"),
        "terminator": bad([Instr("i.const", 0, 1)], "does not end in a terminator"),
        "call_arity": bad([Instr("call", 2, [], [0]), Instr("ret", [])],
                          "call of 'bump' passes 0 arguments and takes 1 results, "
                          "the callee has 1 and 1"),
        "ret_arity": bad([Instr("ret", [0])], "ret of 1 values, the function has 0 results"),
        "kernel": bad([Instr("dispatch", 0, 1, [], []), Instr("ret", [])],
                      "names kernel 0, but only 0 exist"),
        "row_register": bad([Instr("buffer.row", 0, 4, 0), Instr("ret", [])],
                            "word 0: buffer.row operand 'src' names ref register r4, "
                            "but only 4 exist"),
        "set_row_index": bad([Instr("buffer.set_row", 0, 6, 1), Instr("ret", [])],
                             "buffer.set_row operand 'index' names int register i6, "
                             "but only 6 exist"),
    }
    for name, text, expect in [
            ("print_index", "{1}", "word 0: debug.print template: field {1} names a value, but the instruction has 1"),
            ("print_spec", "{0:,}", "word 0: debug.print template: field {0} has an unsupported format spec"),
            ("print_brace", "a } b", "word 0: debug.print template: byte 2: single '}'"),
            ("print_field", "{x}", "word 0: debug.print template: byte 0: '{' is not followed by a value number"),
            # a NUL byte is no align (strchr finds the terminator), nor a fill before one
            ("print_nul_align", "{0:\0}", "word 0: debug.print template: field {0} has an unsupported format spec"),
            ("print_nul_fill", "{0:x\0}", "word 0: debug.print template: field {0} has an unsupported format spec"),
            ("print_number", "a {99999999999999999999999} b",
             "word 0: debug.print template: byte 2: value number 99999999999999999999... is too large"),
            ("print_width", "{0:99999999.99999999f}", "word 0: debug.print template: field {0} has an unsupported format spec"),
            ("print_unclosed", "x {0:>5", "word 0: debug.print template: byte 2: field is not {N}, {N!r}, {N!s}, {N!a} or {N:SPEC}"),
            ("print_nested", "{0:{1}}", "word 0: debug.print template: byte 0: field is not {N}, {N!r}, {N!s}, {N!a} or {N:SPEC}"),
            # format 2.9: conversions (no spec after one) and the print options block
            ("print_conversion", "{0!x}", "word 0: debug.print template: byte 0: field is not {N}, {N!r}, {N!s}, {N!a} or {N:SPEC}"),
            ("print_conversion_spec", "{0!r:>9}", "word 0: debug.print template: byte 0: field is not {N}, {N!r}, {N!s}, {N!a} or {N:SPEC}"),
            ("print_option", "{!options precision=101}{0}", "word 0: debug.print template: byte 10: print option 'precision=101' is not one of"),
            ("print_option_key", "{!options colour=red}{0}", "word 0: debug.print template: byte 10: print option 'colour=red' is not one of"),
            ("print_option_zero", "{!options linewidth=0}{0}", "word 0: debug.print template: byte 10: print option 'linewidth=0' is not one of"),
            ("print_options_unclosed", "{!options sign=plus", "word 0: debug.print template: byte 19: the {!options ...} block is not ' KEY=VALUE' words closed by '}'"),
            ("print_options_late", "{0}{!options sign=plus}", "word 0: debug.print template: byte 3: '{' is not followed by a value number")]:
        spec = good()
        spec.constants.append(ConstantSpec(np.frombuffer(text.encode(), np.uint8).copy()))
        spec.functions.append(fn("bad", [], [], [Instr("debug.print", 1, [0]), Instr("ret", [])], exported=False))
        cases[name] = (serialize(spec, check=False), expect)
    spec = good()  # the template is no u8 vector: the i64 constant 0
    spec.functions.append(fn("bad", [], [], [Instr("debug.print", 0, []), Instr("ret", [])], exported=False))
    cases["print_constant"] = (serialize(spec, check=False),
                               "word 0: debug.print template constant 0 is not a 1-d u8 constant")
    out = [(name, data, expect) for name, (data, expect) in cases.items()]
    version7 = serialize(good(), version=(7, 0))
    out.append(("version", version7,
                "module format version 7.0 is not supported (this runtime reads 2.x)"))
    # A 1.x file: the flatbuffer alone, no checksum trailer.
    version1 = serialize(good(), version=(1, 0))[:-TRAILER_SIZE]
    out.append(("version_1", version1,
                "module format version 1.0 is not supported (this runtime reads 2.x)"))
    sealed = serialize(good())
    damaged = bytearray(sealed)
    damaged[len(damaged) // 2] ^= 0x01
    stored = int.from_bytes(sealed[-4:], "little")
    computed = int.from_bytes(reseal(bytes(damaged))[-4:], "little")
    out.append(("checksum", bytes(damaged),
                f"module checksum mismatch: stored 0x{stored:08x}, computed 0x{computed:08x} "
                "(the file is damaged)"))
    out.append(("no_trailer", sealed[:-TRAILER_SIZE],
                "module checksum trailer is missing: the last 16 bytes do not start with "
                "'KILNCSUM' (the file is truncated or damaged)"))
    algorithm = bytearray(sealed)
    algorithm[-8] = 9
    out.append(("algorithm", reseal_raw(bytes(algorithm)),
                "module checksum trailer names unknown algorithm 9 (format 2.x uses 1, "
                "CRC-32: the file is damaged)"))
    return out


def reseal_raw(data: bytes) -> bytes:
    """`data` with its last 4 bytes replaced by the CRC-32 of the rest."""
    import zlib
    return data[:-4] + (zlib.crc32(data[:-4]) & 0xFFFFFFFF).to_bytes(4, "little")


def c_bytes(name: str, data: bytes) -> str:
    rows = [", ".join(f"0x{b:02x}" for b in data[i:i + 16]) for i in range(0, len(data), 16)]
    return (f"static const unsigned char {name}[{len(data)}] = {{\n  "
            + ",\n  ".join(rows) + "\n};\n")


def render() -> str:
    parts = ["/* Generated by runtime-c/tests/gen_vm_test_modules.py. Do not edit. */",
             "#ifndef KILN_VM_TEST_MODULES_H_", "#define KILN_VM_TEST_MODULES_H_", "",
             "#include <stddef.h>", "", c_bytes("kiln_vm_test_good", serialize(good())),
             c_bytes("kiln_vm_test_rows", serialize(rows())),
             c_bytes("kiln_vm_test_rows_element_aligned", serialize(rows_element_aligned())),
             c_bytes("kiln_vm_test_safety", serialize(safety())),
             c_bytes("kiln_vm_test_arena", serialize(arena())),
             c_bytes("kiln_vm_test_print", serialize(printing()))]
    entries = []
    for name, data, expect in bad_modules():
        parts.append(c_bytes(f"kiln_vm_test_bad_{name}", data))
        escaped = expect.replace("\\", "\\\\").replace('"', '\\"')
        entries.append(f'  {{"{name}", kiln_vm_test_bad_{name}, '
                       f'sizeof kiln_vm_test_bad_{name}, "{escaped}"}},')
    parts += ["typedef struct kiln_vm_bad_module {", "  const char* name;",
              "  const unsigned char* data;", "  size_t size;",
              "  const char* expect; /* a substring of the load error */",
              "} kiln_vm_bad_module_t;", "",
              "static const kiln_vm_bad_module_t kiln_vm_bad_modules[] = {", *entries, "};",
              "", "#endif", ""]
    return "\n".join(parts)


if __name__ == "__main__":
    HEADER.write_text(render())
    sys.exit(0)
