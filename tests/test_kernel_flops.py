"""Kernels declare their floating-point work (Kernel.flops, format 2.5; kiln.compiler.flops): the count
the module records, `kiln dump` shows and `kiln-run --print_statistics` turns into GFLOP/s."""
import dataclasses
import re

import numpy as np
import pytest

from kiln.vm.reader import dump_text, read_module
from kiln.vm.writer import serialize
from runtime_tools import native_build_dir, run


@pytest.fixture(scope="module")
def kiln_run():
    return native_build_dir() / "kiln-run"


def _export(program, path):
    from kiln import Program

    Program.get_compiled_artifact(program).save(path)
    return read_module(path.read_bytes())


def test_matmul_declares_2mnk(tmp_path):
    """A matrix product of (m, k) by (k, n) declares 2 m n k, a batched one that per batch element."""
    from kiln import Program

    m, k, n, b = 96, 80, 112, 3
    x, y = np.ones((m, k), np.float32), np.ones((k, n), np.float32)
    xb, yb = np.ones((b, m, k), np.float64), np.ones((b, k, n), np.float64)

    class Products(Program, export_name="products"):
        def mm(self, x=Program.like(x), y=Program.like(y)):
            return x @ y

        def bmm(self, x=Program.like(xb), y=Program.like(yb)):
            return x @ y

    module = _export(Products, tmp_path / "mm.vmfb")
    assert sorted(kernel.flops for kernel in module.kernels) == [2 * m * n * k, 2 * b * m * n * k]
    text = dump_text((tmp_path / "mm.vmfb").read_bytes())
    assert f", {2 * m * n * k} flops" in text and f", {2 * b * m * n * k} flops" in text


def test_elementwise_reduction_conv_and_integer_work(tmp_path):
    """Elementwise ops count their cost per element (mul 1, add 1, exp 20), a sum one add per element
    folded in, a convolution 2 per multiply-accumulate, integer work nothing."""
    import kiln.lax as lax
    from kiln import Program
    from kiln.core.primitive import lookup

    v = np.ones((1000,), np.float32)
    ints = np.ones((1000,), np.int32)
    rows = np.ones((50, 40), np.float32)
    image, weights = np.ones((2, 9, 9, 3), np.float32), np.ones((3, 3, 3, 8), np.float32)

    class Work(Program, export_name="work"):
        def affine(self, x=Program.like(v), y=Program.like(v)):
            return x * y + 1.0

        def expo(self, x=Program.like(v)):
            return lax.exp(x)

        def total(self, x=Program.like(rows)):
            return x.sum(axis=1)

        def integers(self, i=Program.like(ints), j=Program.like(ints)):
            return i * j + 1

        def conv(self, x=Program.like(image), w=Program.like(weights)):
            return lax.conv_general_dilated(x, w, (1, 1), "VALID", dimension_numbers=("NHWC", "HWIO", "NHWC"))

    module = _export(Work, tmp_path / "work.vmfb")
    flops = {}
    for f in module.functions:  # each function here is one dispatch of one kernel
        (kernel,) = {ins.operands[0] for ins in f.code if ins.op == "dispatch"}
        flops[f.name] = module.kernels[kernel].flops
    assert lookup("exp").traits.cost == 20
    assert flops == {"affine": 2 * 1000, "expo": 20 * 1000, "total": 50 * 40 - 50, "integers": 0,
                     "conv": 2 * (2 * 7 * 7 * 8) * (3 * 3 * 3)}


def test_statistics_print_gflops_and_old_modules_declare_none(kiln_run, tmp_path):
    """--print_statistics has a GFLOP/s column: the declared flops of the kernel's dispatches over its
    total time; a module written before format 2.5 (no flops) loads and shows '-' there."""
    from kiln import Program

    m, k, n = 128, 64, 96
    x, y = np.ones((m, k), np.float32), np.ones((k, n), np.float32)

    class MM(Program, export_name="mmstats"):
        def run(self, x=Program.like(x), y=Program.like(y)):
            return x @ y

    path = tmp_path / "mm.vmfb"
    spec = _export(MM, path)
    (kernel,) = spec.kernels
    args = ["--function=run", f"--input={m}x{k}xf32=1", f"--input={k}x{n}xf32=1", "--benchmark=4",
            "--print_statistics"]
    out = run(kiln_run, f"--module={path}", *args).stdout
    assert re.search(r"\n  kernel +dispatches +total +mean +share +GB/s +GFLOP/s\n", out), out
    row = re.search(rf"\n  {kernel.name} +(\d+) +([\d.]+) ms +[\d.]+ us +[\d.]+% +[\d.]+ +([\d.]+)\n", out)
    assert row, out
    dispatches, total_ms, gflops = int(row.group(1)), float(row.group(2)), float(row.group(3))
    assert dispatches == 4 and gflops > 0
    # the printed rate is the declared work over the printed time, up to their printed rounding
    # (time to 0.0005 ms, rate to 0.005)
    expected = 2 * m * n * k * dispatches / (total_ms * 1e-3) * 1e-9
    assert abs(gflops - expected) <= 0.005 + 1.01 * expected * 0.0005 / total_ms

    old = read_module(path.read_bytes())
    old.kernels = [dataclasses.replace(kk, flops=0) for kk in old.kernels]
    old_path = tmp_path / "old.vmfb"
    old_path.write_bytes(serialize(old, version=(2, 4)))
    assert "flops not declared" in dump_text(old_path.read_bytes())
    out = run(kiln_run, f"--module={old_path}", *args).stdout
    assert re.search(rf"\n  {kernel.name} +4 +[\d.]+ ms +[\d.]+ us +[\d.]+% +[\d.]+ +-\n", out), out


def test_equation_counts_of_each_rule():
    """kiln.compiler.flops.equation_flops per rule, on traced graphs: pooling one per window element per
    output, cumulative sums one per element, argmax one compare per element folded in, integer_pow one
    multiply per square-and-multiply step (a divide more when negative), select/convert/layout 0."""
    import kiln.lax as lax
    import kiln.numpy as knp
    from kiln.compiler.flops import equation_flops, region_flops
    from kiln.core.aval import ShapedArray
    from kiln.core.trace import trace_to_graph

    f32 = ShapedArray((6, 8), np.dtype(np.float32))

    def counts(fn, *avals):
        graph = trace_to_graph(lambda *xs: [fn(*xs)], list(avals) or [f32])
        return {e.primitive.name: equation_flops(e) for e in graph.eqns}, region_flops(graph)

    by_prim, total = counts(lambda x: lax.reduce_window(x, 0.0, lax.add, (2, 3), (1, 1), "VALID"))
    assert by_prim["reduce_window"] == (5 * 6) * (2 * 3) and total == 5 * 6 * 6
    assert counts(lambda x: lax.cumsum(x, axis=1))[0]["cumsum"] == 48
    assert counts(lambda x: lax.argmax(x, 1, np.int32))[0]["argmax"] == 48 - 6
    assert counts(lambda x: lax.integer_pow(x, 2))[0]["integer_pow"] == 48 * 1
    assert counts(lambda x: lax.integer_pow(x, 7))[0]["integer_pow"] == 48 * 4  # x^2, x^3, x^6, x^7
    assert counts(lambda x: lax.integer_pow(x, -2))[0]["integer_pow"] == 48 * (1 + 4)
    by_prim, total = counts(lambda x: knp.where(x > 0, x, 0.0).astype(np.float64).T.reshape(48))
    assert by_prim["gt"] == 48 and total == 48  # the compare; select, convert and layout are free
