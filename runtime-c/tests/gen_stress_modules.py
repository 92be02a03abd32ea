"""Writes the modules that the thread stress test (test_stress.c) and the
allocation-failure test (test_alloc_fail.c) run, as .vmfb files into OUT_DIR:

  axpy.vmfb      tests/vm_specs.py's axpy module: a dispatch of the VM test
                 kernel (runtime-c/tests/vm_test_kernel.c), a global, a call
                 that bumps a mutable counter, a loop
  kstress.vmfb   loops of dispatches over 16 workgroups (the thread pool
                 splits them), a mutable global accumulator stored each
                 iteration, an internal call; `spin` is the same loop with no
                 global (for cancellation)
  linear.vmfb    examples/linear.py, exported by kiln
  mlp_train.vmfb examples/mlp_train.py (Adam training step, state in globals)
  recurrent.vmfb a kiln Program with a scan, a fori_loop of traced length and
                 mutable globals

Kernel images are compiled for this host (the modules are not portable), so
the files are made at build time by `make ctest-tsan` / `make ctest-alloc-fail`:

    .venv/bin/python runtime-c/tests/gen_stress_modules.py build/test-modules
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "examples")]

from kiln import Program, lax  # noqa: E402
import kiln.numpy as knp  # noqa: E402
from kiln.vm.isa import Instr, Label  # noqa: E402
from kiln.vm.module_spec import (BindingSpec, GlobalSpec, KernelSpec, ModuleSpec,  # noqa: E402
                                 TensorType)
from kiln.vm.writer import serialize  # noqa: E402
from vm_native import build_kernel, host_triple  # noqa: E402
from vm_specs import I64, axpy_spec, fn, kernel_image  # noqa: E402

N = 1024  # elements of kstress's vectors
WORKGROUPS = 16


def kstress_spec(kernel_code: bytes) -> ModuleSpec:
    vec = TensorType("f32", (N,))
    size = 4 * N

    def loop(name: str, store: bool) -> list:
        """for i in 0..k: acc = acc + (i + 1) * x (the kernel, 16 workgroups)."""
        head, body, done = Label(f"{name}.head"), Label(f"{name}.body"), Label(f"{name}.done")
        code = [Instr("global.load", 2, 0) if store else Instr("mov", 2, 0),
                Instr("i.load", 0, 1), Instr("i.const", 1, 0), Instr("i.const", 2, 1),
                Instr("i.const", 4, N), head, Instr("i.lt", 3, 1, 0),
                Instr("br.if", 3, body, done), body,
                Instr("i.add", 1, 1, 2),
                Instr("alloc", 3, vec),
                Instr("dispatch", 0, WORKGROUPS, [2, 0, 3], [4, 1]),
                Instr("mov", 2, 3)]
        if store:
            code.append(Instr("global.store", 0, 2))
        code += [Instr("br", head), done]
        return code

    return ModuleSpec(
        "kstress",
        functions=[
            # (acc, count) after k more accumulations of x into the global acc.
            fn("accumulate", [("x", vec), ("k", I64)], [("acc", vec), ("count", I64)],
               loop("acc", True) + [Instr("global.load", 4, 1), Instr("call", 3, [4], [5]),
                                    Instr("global.store", 1, 5), Instr("ret", [2, 5])]),
            # x + 1*x + 2*x + ... + k*x, no state: safe to cancel and compare.
            fn("spin", [("x", vec), ("k", I64)], [("y", vec)],
               loop("spin", False) + [Instr("ret", [2])]),
            # y = x + 3 * x through a kernel declared with 17 bindings and 17
            # push constants (the VM allocates its argument arrays past 16).
            fn("wide", [("x", vec)], [("y", vec)], [
                Instr("alloc", 1, vec), Instr("i.const", 0, N), Instr("i.const", 1, 3),
                Instr("dispatch", 1, 4, [0, 0, 1] + [0] * 14, [0, 1] + [0] * 15),
                Instr("ret", [1])]),
            fn("bump", [("c", I64)], [("next", I64)], [
                Instr("i.load", 0, 0), Instr("i.const", 1, 1), Instr("i.add", 0, 0, 1),
                Instr("i.store", 1, 0, I64), Instr("ret", [1])], exported=False),
        ],
        globals=[GlobalSpec("acc", vec, True, np.linspace(-1, 1, N, dtype=np.float32)),
                 GlobalSpec("count", I64, True, None)],
        kernel_images=[kernel_image(kernel_code, host_triple())],
        kernels=[KernelSpec("axpy", 0, 0, [BindingSpec(size, False), BindingSpec(size, False),
                                           BindingSpec(size, True)], 2),
                 KernelSpec("wide", 0, 0, [BindingSpec(size, False), BindingSpec(size, False),
                                           BindingSpec(size, True)]
                            + [BindingSpec(size, False)] * 14, 17)],
    )


class Recurrent(Program, export_name="recurrent"):
    _w = (np.random.default_rng(3).standard_normal((8, 8)) / 4).astype(np.float32)
    _h = Program.export_global(np.zeros(8, np.float32), mutable=True)
    _runs = Program.export_global(np.int32(0), mutable=True)

    def run(self, xs=Program.like(np.zeros((6, 8), np.float32)),
            n=Program.like(np.int32(0))):
        """A scan over the rows of xs, then n more steps; the state stays in _h."""
        def cell(h, x):
            h = knp.tanh(h @ self._w + x)
            return h, knp.sum(h)
        h, sums = lax.scan(cell, self._h, xs)
        h = lax.fori_loop(0, n, lambda i, h: knp.tanh(h @ self._w + 0.5), h)
        self._h = h
        self._runs = self._runs + 1
        return h, sums

    def state(self):
        return self._h, self._runs


def main(out_dir: Path) -> None:
    import linear
    import mlp_train
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        kernel = build_kernel(Path(tmp))
    modules = {
        "axpy": serialize(axpy_spec(kernel, host_triple())),
        "kstress": serialize(kstress_spec(kernel)),
        "linear": Program.get_compiled_artifact(linear.Linear).bytes,
        "mlp_train": Program.get_compiled_artifact(mlp_train.MLPTrain).bytes,
        "recurrent": Program.get_compiled_artifact(Recurrent).bytes,
    }
    for name, data in modules.items():
        (out_dir / f"{name}.vmfb").write_bytes(data)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(f"usage: {sys.argv[0]} OUT_DIR")
    main(Path(sys.argv[1]))
