"""Helpers for the runtime-services tests: the native artifacts under test and
small modules written with kiln.vm.writer.

Artifacts: the binding loads the library that kiln.vm._native finds (an
installed or in-tree build; built here with CMake when there is none).
kiln-run and the embedding example come from $KILN_SANITIZE_BUILD when the
Makefile sets it (so every error path runs under ASan+UBSan, leaks included),
else from the development build folder, built or refreshed here."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import numpy as np

from kiln.vm import _native
from kiln.vm.isa import Instr
from kiln.vm.module_spec import FunctionSpec, GlobalSpec, ModuleSpec, TensorType, ValueInfo

ALL_DTYPES = ("f32", "f64", "f16", "bf16", "i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64", "bool")


def native_build_dir() -> Path:
    """A CMake build of runtime-c holding kiln-run and kiln-embed-example."""
    sanitize = os.environ.get("KILN_SANITIZE_BUILD")
    if sanitize and (Path(sanitize) / "kiln-run").is_file() \
            and (Path(sanitize) / "kiln-embed-example").is_file():
        return Path(sanitize)
    return _native.build_runtime()


def ensure_runtime_library() -> str:
    try:
        return _native.runtime_library_path()
    except _native.NativeArtifactNotFound:
        _native.build_runtime()
        return _native.runtime_library_path()


def run(exe: Path, *args: str, check: bool = True, cwd=None) -> subprocess.CompletedProcess:
    proc = subprocess.run([str(exe), *args], capture_output=True, text=True, timeout=120, cwd=cwd)
    if check and proc.returncode != 0:
        raise AssertionError(f"{exe.name} {' '.join(args)} failed ({proc.returncode}):\n"
                             f"{proc.stdout}\n{proc.stderr}")
    return proc


def identity_spec() -> ModuleSpec:
    """`ident_<dtype>(x: 2x3x<dtype>) -> (2x3x<dtype>)` for every dtype, `pair`
    returning two results, and a module full of globals of every dtype with
    `load_all` / `store_all` functions touching them, and an immutable scalar
    `frozen`."""
    functions, globals_ = [], []
    for d in ALL_DTYPES:
        t = TensorType(d, (2, 3))
        functions.append(FunctionSpec(f"ident_{d}", True, [ValueInfo("x", t)], [ValueInfo("y", t)],
                                      '["x"]', '"y"', 2, 0, [Instr("ret", [0])]))
        initial = None if d in ("f16", "bf16") else np.arange(6).reshape(2, 3).astype(
            {"f32": np.float32, "f64": np.float64, "i8": np.int8, "i16": np.int16,
             "i32": np.int32, "i64": np.int64, "u8": np.uint8, "u16": np.uint16, "u32": np.uint32,
             "u64": np.uint64, "bool": np.bool_}[d])
        globals_.append(GlobalSpec(f"g_{d}", t, True, initial))
    globals_.append(GlobalSpec("frozen", TensorType("f32", ()), False, np.array(2.5, np.float32)))
    empty = TensorType("f32", (0, 3))
    functions.append(FunctionSpec("ident_empty", True, [ValueInfo("x", empty)],
                                  [ValueInfo("y", empty)], "[]", "[]", 1, 0, [Instr("ret", [0])]))
    f4, i32 = TensorType("f32", (4,)), TensorType("i32", ())
    functions.append(FunctionSpec("pair", True, [ValueInfo("a", f4), ValueInfo("b", i32)],
                                  [ValueInfo("b", i32), ValueInfo("a", f4)], "[]", "[]", 2, 0,
                                  [Instr("ret", [1, 0])]))
    # load_all() -> every global; store_all(values...) replaces every global.
    types = [TensorType(d, (2, 3)) for d in ALL_DTYPES]
    n = len(types)
    functions.append(FunctionSpec(
        "load_all", True, [], [ValueInfo(f"g_{d}", t) for d, t in zip(ALL_DTYPES, types)], "[]",
        "[]", n, 0, [*(Instr("global.load", i, i) for i in range(n)), Instr("ret", list(range(n)))]))
    functions.append(FunctionSpec(
        "store_all", True, [ValueInfo(f"v_{d}", t) for d, t in zip(ALL_DTYPES, types)], [], "[]",
        "[]", n, 0, [*(Instr("global.store", i, i) for i in range(n)), Instr("ret", [])]))
    return ModuleSpec("identity", functions=functions, globals=globals_)
