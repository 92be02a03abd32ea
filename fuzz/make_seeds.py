"""Writes the fuzzers' seed modules (.vmfb) into a directory (default build/fuzz/seeds).

    .venv/bin/python fuzz/make_seeds.py [OUT_DIR]

Seeds: the examples (examples/linear.py, examples/mlp_train.py), a small Program
with while_loop, scan, cond, switch, globals and a constant, and the kernel-less
modules of runtime-c/tests/gen_vm_test_modules.py (the good ones, the debug.print
and debug.callback ones, and the ones the verifier rejects, which are near
misses worth mutating). Each good module is
also written a second time with every flatbuffer scalar stored explicitly
(`*.forced.vmfb`): flatbuffers leave out fields equal to their default (dtype
f32, index 0, false), and a field that is not there cannot be mutated in place.

Kernel images are native code for this host, so the seeds are host-specific and
live under build/, not in the repository. The load+invoke fuzzer only calls
functions of modules whose kernels match one of these seeds (fuzz/kiln_fuzz.c).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from unittest import mock

import flatbuffers
import numpy as np

import kiln.numpy as knp
from kiln import Program, lax
from kiln.vm import writer
from kiln.vm.reader import read_module

ROOT = Path(__file__).resolve().parent.parent


def _load(path: Path, name: str):
    """Imports a file of the repository as a module (examples/ is not a package)."""
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


class Flow(Program, export_name="flow"):
    """Bytecode control flow: loops with back-edges, branches, row views, globals."""

    _total = Program.export_global(np.float32(0), mutable=True)
    _count = Program.export_global(np.int32(0), mutable=True)
    _table = np.arange(12, dtype=np.float32).reshape(3, 4)

    def collatz(self, n=Program.like(np.int32(7))):
        def body(c):
            m, k = c
            m = lax.cond(m % 2 == 0, lambda v: v // 2, lambda v: 3 * v + 1, m)
            return m, k + 1
        steps = lax.while_loop(lambda c: c[0] > 1, body, (n, np.int32(0)))[1]
        self._count = self._count + steps
        return steps

    def running(self, xs=Program.like(np.zeros((5, 4), np.float32))):
        def step(c, x):
            c = c + knp.sum(x * self._table[0])
            return c, c * x
        total, ys = lax.scan(step, self._total, xs)
        self._total = total
        return ys

    def pick(self, i=Program.like(np.int32(0)), x=Program.like(np.zeros((4,), np.float32))):
        return lax.switch(i, [lambda v: v, lambda v: v * 2.0, lambda v: -v], x)

    def count(self):
        return self._count


class _ForcedBuilder(flatbuffers.Builder):
    """A Builder that stores every scalar field, defaults included."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.ForceDefaults(True)


def forced_defaults(data: bytes) -> bytes:
    """The same module with every scalar field present in the flatbuffer."""
    spec = read_module(data)
    with mock.patch.object(writer.flatbuffers, "Builder", _ForcedBuilder):
        out = writer.serialize(spec)
    return out


def program_seeds() -> dict[str, bytes]:
    linear = _load(ROOT / "examples" / "linear.py", "kiln_fuzz_linear")
    mlp = _load(ROOT / "examples" / "mlp_train.py", "kiln_fuzz_mlp_train")
    return {
        "linear": Program.get_compiled_artifact(linear.Linear()).bytes,
        "mlp_train": Program.get_compiled_artifact(mlp.MLPTrain()).bytes,
        "flow": Program.get_compiled_artifact(Flow()).bytes,
    }


def vm_test_seeds() -> tuple[dict[str, bytes], dict[str, bytes]]:
    """(modules that load, modules the loader rejects) of the C VM tests."""
    gen = _load(ROOT / "runtime-c" / "tests" / "gen_vm_test_modules.py", "kiln_fuzz_gen_vm")
    good = {"vm_good": writer.serialize(gen.good()), "vm_rows": writer.serialize(gen.rows()),
            # debug.print / debug.callback (format 2.8): byte flips in templates and in the printed
            # constants reach the template parser and the numpy-style formatter.
            "vm_print": writer.serialize(gen.printing()),
            "vm_print_all": writer.serialize(gen.printing_all()[0])}
    bad = {f"vm_bad_{name}": data for name, data, _ in gen.bad_modules()}
    return good, bad


def print_seeds() -> dict[str, bytes]:
    """Inputs in fuzz_print's own layout ([count], per value [dtype][rank][dims], [template length],
    template, value bytes) whose templates hold format 2.9's fields: the {!options ...} block, !r/!s/!a
    conversions, complex values. The other targets read them too and refuse them at once."""
    from kiln.vm._generated.constants import DTYPES

    code = {name: i for i, name in enumerate(DTYPES)}
    values = [("f32", (2, 3)), ("c64", (4,)), ("i32", (201,)), ("f64", ())]
    header = bytes([len(values)])
    for dtype, shape in values:
        header += bytes([code[dtype], len(shape)]) + bytes(shape if max(shape, default=0) < 200 else (240,))
    templates = [b"{!options precision=3 floatmode=fixed sign=plus}{0} {1!r} {2} {3!s}",
                 b"{!options threshold=5 edgeitems=1 linewidth=20 suppress=1}{0!r}|{1}|{2!a}",
                 b"{!options floatmode=maxprec_equal sign=space}{1} {0!s} {3!r} {3:+.2e}",
                 b"{!options floatmode=unique}{0}{1}{2}{3}", b"{1!r} {1!s} {1} {3!a}"]
    fill = np.array([1.5, -0.0, np.nan, 3e-7, np.inf, 12345.678, -2.25, 0.1], np.float32).tobytes()
    return {f"print_{i}": header + bytes([len(t)]) + t + fill for i, t in enumerate(templates)}


def main(argv: list[str]) -> int:
    out = Path(argv[1]) if len(argv) > 1 else ROOT / "build" / "fuzz" / "seeds"
    out.mkdir(parents=True, exist_ok=True)
    for old in [*out.glob("*.vmfb"), *out.glob("print_*.bin")]:
        old.unlink()
    good = program_seeds()
    vm_good, vm_bad = vm_test_seeds()
    good.update(vm_good)
    files = dict(good)
    files.update({f"{name}.forced": forced_defaults(data) for name, data in good.items()})
    files.update(vm_bad)
    for name, data in sorted(files.items()):
        (out / f"{name}.vmfb").write_bytes(data)
    for name, data in print_seeds().items():  # fuzz_print's layout (format 2.9 fields)
        (out / f"{name}.bin").write_bytes(data)
        files[name] = data
    print(f"wrote {len(files)} seed modules to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
