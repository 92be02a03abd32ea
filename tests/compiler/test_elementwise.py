"""Fused elementwise kernels against the prims' numpy implementations."""
import re

import numpy as np
import pytest

from conftest import Batch, Case, assert_matches, random_array
from kiln.lax import prims

RNG = np.random.default_rng(1)
ALL = ["f32", "f64", "i32", "i64", "i8", "u8", "i16", "bool", "f16", "u16", "u32", "u64"]
DT = {"f32": np.float32, "f64": np.float64, "i32": np.int32, "i64": np.int64, "i8": np.int8, "u8": np.uint8,
      "i16": np.int16, "bool": np.bool_, "f16": np.float16, "u16": np.uint16, "u32": np.uint32, "u64": np.uint64}
BINARY = ["add", "sub", "mul", "div", "pow", "max", "min", "eq", "ne", "lt", "le", "gt", "ge"]
UNARY = ["neg", "abs", "exp", "log", "tanh", "sqrt"]


def _accepts(op, dt):
    if DT[dt] == np.bool_ and op in ("sub", "div", "pow", "neg", "abs"):
        return False
    if op in ("exp", "log", "tanh", "sqrt") and np.dtype(DT[dt]).kind != "f":
        return False
    return True


def _operand(dt, shape, positive=False):
    a = random_array(RNG, shape, DT[dt])
    if positive and np.dtype(DT[dt]).kind == "f":
        a = np.abs(a)
    if np.dtype(DT[dt]).kind == "f" and a.size > 8:
        a.reshape(-1)[:4] = np.array([np.nan, np.inf, -np.inf, 0.0], DT[dt])
    return a


CASES = {}
for dt in ALL:
    for op in BINARY:
        if _accepts(op, dt):
            x, y = _operand(dt, (37, 5)), _operand(dt, (37, 5))
            if op == "pow" and np.dtype(DT[dt]).kind in "iu":
                y = np.clip(y, -1, 6).astype(DT[dt])
            if op == "div" and np.dtype(DT[dt]).kind in "iu":
                y.reshape(-1)[:3] = [0, 1, 2]
                if np.dtype(DT[dt]).kind == "i":
                    x.reshape(-1)[:2] = np.iinfo(DT[dt]).min
                    y.reshape(-1)[:2] = [-1, 0]
            CASES[f"{op}-{dt}"] = Case(lambda a, b, op=op: [getattr(prims, op).bind(a, b)], [x, y])
    for op in UNARY:
        if _accepts(op, dt):
            CASES[f"{op}-{dt}"] = Case(lambda a, op=op: [getattr(prims, op).bind(a)], [_operand(dt, (1001,), op in ("log", "sqrt"))])
for src in ALL:
    for dst in ALL:
        x = _operand(src, (67,))
        if np.dtype(DT[src]).kind == "f" and np.dtype(DT[dst]).kind in "iu":
            info = np.iinfo(DT[dst])
            wide = np.nan_to_num(x.astype(np.float64), posinf=1e4, neginf=-1e4)
            x = np.clip(wide, info.min, min(info.max, 2**24, float(np.finfo(DT[src]).max))).astype(DT[src])
        CASES[f"convert-{src}-{dst}"] = Case(lambda a, dst=dst: [prims.convert.bind(a, new_dtype=np.dtype(DT[dst]))], [x])

f32 = np.float32
CASES["select"] = Case(lambda p, a, b: [prims.select.bind(p, a, b)], [RNG.random(100) < 0.5, _operand("f32", (100,)), _operand("f32", (100,))])
CASES["chain-multi-workgroup"] = Case(
    lambda a, b: [prims.add.bind(prims.mul.bind(prims.exp.bind(a), b), a), prims.sub.bind(a, b)],
    [_operand("f32", (300_001,)), _operand("f32", (300_001,))],
)
CASES["broadcast-row-col"] = Case(
    lambda a, r, c: [prims.add.bind(prims.mul.bind(a, prims.broadcast_in_dim.bind(r, shape=(33, 17), broadcast_dimensions=(1,))),
                                    prims.broadcast_in_dim.bind(c, shape=(33, 17), broadcast_dimensions=(0,)))],
    [_operand("f32", (33, 17)), _operand("f32", (17,)), _operand("f32", (33,))],
)
CASES["exp-broadcast-rows"] = Case(  # 14 rows of 301 (4,214 elements, enough to interleave: elementwise.interleave_count):
    # the interleaved inner loop (8 vectors), its vector and scalar tails
    lambda a, r: [prims.tanh.bind(prims.add.bind(a, prims.broadcast_in_dim.bind(r, shape=(14, 301), broadcast_dimensions=(1,))))],
    [_operand("f32", (14, 301)), _operand("f32", (301,))],
)
CASES["broadcast-scalar-and-size1"] = Case(
    lambda a, s, t: [prims.mul.bind(prims.add.bind(a, prims.broadcast_in_dim.bind(s, shape=(5, 6, 7), broadcast_dimensions=())),
                                    prims.broadcast_in_dim.bind(t, shape=(5, 6, 7), broadcast_dimensions=(0, 1, 2)))],
    [_operand("f64", (5, 6, 7)), np.float64(2.5), _operand("f64", (1, 6, 1))],
)
CASES["transpose-add"] = Case(
    lambda a, b: [prims.add.bind(prims.transpose.bind(a, permutation=(2, 0, 1)), b)],
    [_operand("f32", (7, 9, 11)), _operand("f32", (11, 7, 9))],
)
CASES["transpose-copy"] = Case(lambda a: [prims.transpose.bind(a, permutation=(1, 0))], [_operand("i16", (129, 65))])
CASES["reshape-then-add"] = Case(
    lambda a, b: [prims.add.bind(prims.reshape.bind(a, new_shape=(6, 35)), b)], [_operand("i32", (2, 3, 5, 7)), _operand("i32", (6, 35))]
)
CASES["transpose-then-reshape"] = Case(
    lambda a, b: [prims.mul.bind(prims.reshape.bind(prims.transpose.bind(a, permutation=(1, 0)), new_shape=(24,)), b)],
    [_operand("f32", (4, 6)), _operand("f32", (24,))],
)
CASES["layout-of-computed"] = Case(
    lambda a: [prims.transpose.bind(prims.exp.bind(a), permutation=(1, 0))], [_operand("f32", (13, 3))]
)
CASES["iota-float-broadcast"] = Case(
    lambda a: [prims.add.bind(a, prims.iota.bind(shape=(4, 9), dimension=1, dtype=np.dtype(f32)))], [_operand("f32", (4, 9))]
)
CASES["iota-int-transposed"] = Case(
    lambda a: [prims.mul.bind(a, prims.transpose.bind(prims.iota.bind(shape=(9, 4), dimension=0, dtype=np.dtype(np.int64)), permutation=(1, 0)))],
    [_operand("i64", (4, 9))],
)
CASES["iota-reshaped"] = Case(
    lambda a: [prims.add.bind(a, prims.reshape.bind(prims.iota.bind(shape=(3, 4), dimension=1, dtype=np.dtype(np.int32)), new_shape=(12,)))],
    [_operand("i32", (12,))],
)
CASES["splat-literals"] = Case(
    lambda a: [prims.add.bind(a, prims.broadcast_in_dim.bind(2.5, shape=(3, 5), broadcast_dimensions=())),
               prims.broadcast_in_dim.bind(np.int8(-3), shape=(4, 2), broadcast_dimensions=())],
    [_operand("f32", (3, 5))],
)
CASES["literal-only"] = Case(lambda a: [a, prims.add.bind(prims.mul.bind(a, 0.0), 3.0)], [_operand("f32", ())])
CASES["size-zero"] = Case(lambda a, b: [prims.add.bind(a, b)], [np.zeros((0, 5), f32), np.zeros((0, 5), f32)])
CASES["size-one"] = Case(lambda a, b: [prims.mul.bind(a, b)], [np.ones((1, 1), f32), np.full((1, 1), 3, f32)])
for n in (1, 3, 7, 8, 9, 15, 17, 31, 33, 100):
    CASES[f"tail-{n}"] = Case(lambda a, b: [prims.add.bind(prims.mul.bind(a, b), b)], [_operand("f32", (n,)), _operand("f32", (n,))])


@pytest.fixture(scope="module")
def batch():
    return Batch(CASES)


def _tolerance(name):
    if name.startswith("chain"):
        return dict(rtol=2e-6, atol=1e-5)
    if name.startswith(("exp", "log", "tanh", "pow", "chain", "layout-of")):
        return dict(rtol=1e-3 if "f16" in name else 1e-14 if "f64" in name else 2e-6)
    if "f16" in name and name.startswith("convert-f") and name.split("-")[2] == "f16":
        return dict(rtol=1e-3)
    return {}


@pytest.mark.parametrize("name", sorted(CASES))
def test_against_numpy(batch, name):
    got, want = batch.run(name)
    for g, w in zip(got, want):
        assert_matches(g, w, **_tolerance(name))


def test_elementwise_chain_is_one_dispatch():
    assert len(CASES["chain-multi-workgroup"].plan.steps) == 1
    assert len(CASES["broadcast-row-col"].plan.steps) == 1
    assert len(CASES["transpose-add"].plan.steps) == 1


def test_large_work_splits_into_workgroups(batch):
    index, groups = batch.compiled.dispatch_info(CASES["chain-multi-workgroup"].plan.steps[0])
    assert 2 <= groups <= 64
    _, small = batch.compiled.dispatch_info(CASES["tail-7"].plan.steps[0])
    assert small == 1


def _function_assembly(asm: str, name: str) -> list[str]:
    """The lines of function `name` in an assembly listing."""
    lines = asm.splitlines()
    start = lines.index(f"{name}:")
    end = next(i for i in range(start + 1, len(lines)) if lines[i].startswith(".Lfunc_end"))
    return lines[start:end]


def _loop_bodies(lines: list[str]) -> list[list[str]]:
    """Every span from a label to a later jump back to it: the function's loops."""
    loops = []
    for i, line in enumerate(lines):
        if line.startswith(".L") and line.endswith(":"):
            label = line[:-1]
            back = [j for j in range(i + 1, len(lines)) if re.match(rf"\tj\w+\t{re.escape(label)}$", lines[j])]
            if back:
                loops.append(lines[i:back[-1] + 1])
    return loops


def test_f32_elementwise_loop_is_vectorized(batch):
    """The loop of the kernel computing a * b + b on 100 f32 uses packed multiply and add: zmm with AVX-512
    (elementwise kernels ask for the widest vectors: codegen/pipeline.widest_vectors), ymm with AVX."""
    from kiln.compiler.target import Target

    index, _ = batch.compiled.dispatch_info(CASES["tail-100"].plan.steps[0])
    name = batch.compiled.kernels[index].name
    loops = _loop_bodies(_function_assembly(batch.compiled.assembly([index]), name))  # that kernel's only
    assert loops, f"{name} has no loop"
    host = Target.host()
    register = "%zmm" if host.has_feature("avx512f") else "%ymm" if host.has_feature("avx") else "%xmm"
    mul = re.compile(rf"\tv?(mul|fmadd\d*)ps\t.*{register}")
    add = re.compile(rf"\tv?(add|fmadd\d*)ps\t.*{register}")
    vector_loops = [body for body in loops
                    if any(mul.match(line) for line in body) and any(add.match(line) for line in body)]
    assert vector_loops, f"no loop of {name} multiplies and adds packed {register} registers:\n" + \
        "\n\n".join("\n".join(body) for body in loops)


def _vector_registers(loops: list[list[str]]) -> set[str]:
    return {reg for body in loops for line in body for reg in re.findall(r"%([xyz])mm\d+", line)}


def test_avx512_builds_vectorize_elementwise_kernels_at_512_bits():
    """LLVM's tuning for AVX-512 CPUs (x86-64-v4, znver4, skylake-avx512) prefers 256-bit vectors; elementwise
    kernels, which carry no reassociation (so the width changes no bit), ask for the widest ones
    (codegen/pipeline.widest_vectors): the x86-64-v4 build of a tanh chain loops over zmm registers, the
    x86-64-v3 build over ymm, and a reduction kernel of the v4 build keeps LLVM's choice (no zmm). The chain's
    loop computes 8 vectors per iteration (codegen/elementwise.interleave_count), the same chain over 4,095
    elements (too short to gain from it) fewer, and over 15 elements (less than one zmm vector of float32) a
    scalar loop (codegen/elementwise.scalar_loop: no vector body LLVM would never run)."""
    from kiln.compiler.compile import compile_plan
    from kiln.compiler.target import Target

    def tanh_chain(n):
        return Case(lambda x, a: [prims.add.bind(prims.mul.bind(prims.tanh.bind(prims.mul.bind(x, a)), a), x)],
                    [_operand("f32", (n,)), _operand("f32", (n,))])

    chain, short, tiny = tanh_chain(4096), tanh_chain(4095), tanh_chain(15)
    total = Case(lambda x: [prims.reduce_sum.bind(x, axes=(0,))], [_operand("f32", (4096,))])
    registers, divisions = {}, {}
    for cpu in ("x86-64-v4", "x86-64-v3"):
        cases = ((chain, "chain"), (total, "sum")) + (((short, "short"), (tiny, "tiny")) if cpu == "x86-64-v4" else ())
        compiled = compile_plan([case.plan for case, _ in cases], Target.named("x86_64-unknown-linux-gnu", cpu),
                                cache=None)
        asm = compiled.assembly()
        for case, kind in cases:
            name = compiled.kernels[compiled.kernel_index(case.plan.steps[0])].name
            loops = _loop_bodies(_function_assembly(asm, name))
            assert loops, f"{cpu} {name} has no loop"
            registers[cpu, kind] = _vector_registers(loops)
            if kind not in ("sum", "tiny"):
                divisions[cpu, kind] = max(sum(line.startswith("\tvdivps") for line in body) for body in loops)
    assert "z" in registers["x86-64-v4", "chain"], registers
    # a body with a transcendental function computes 8 independent vectors per iteration (codegen/elementwise
    # interleave_count): 8 of tanh's divisions in the main loop; over fewer than 4,096 elements LLVM's own count (2)
    assert divisions.pop(("x86-64-v4", "short")) < 8, divisions
    assert divisions == {("x86-64-v4", "chain"): 8, ("x86-64-v3", "chain"): 8}, divisions
    assert "z" not in registers["x86-64-v3", "chain"] and "y" in registers["x86-64-v3", "chain"], registers
    assert "z" not in registers["x86-64-v4", "sum"], registers
    assert not registers["x86-64-v4", "tiny"] & {"y", "z"}, registers  # scalar: xmm only


@pytest.mark.parametrize("name", ["tail-100", "tail-17", "chain-multi-workgroup"])
def test_workgroup_slices_cover_every_element_once(batch, name):
    """1-d elementwise kernels split their elements among workgroups at multiples of 16 (codegen/elementwise
    aligned_slice): with any workgroup count, even more workgroups than 16-element granules (tail-17 has 2),
    every element is computed, and none twice (outputs start as garbage; results as numpy's)."""
    case = CASES[name]
    step = case.plan.steps[0]
    index = batch.compiled.kernel_index(step)
    want = batch.run(name)[1]
    for groups in (1, 2, 3, 7, 64, 100):
        got = batch.runner.run_kernel(index, groups, case.args, [v.aval for v in step.outputs])
        for g, w in zip(got, want):
            assert_matches(g, w, **_tolerance(name))
