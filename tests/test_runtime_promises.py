"""The runtime's promises about loaded modules and calls, from Python (issue 8;
the C side is runtime-c/tests/test_call_safety.c): a module file changed after
loading does not change what runs, no call returns memory that nothing wrote,
and a global keeps its own copy of what the caller passed."""

import fcntl
import os

import numpy as np
import pytest

from kiln.vm.isa import Instr
from kiln.vm.module_spec import GlobalSpec, ModuleSpec, TensorType
from kiln.vm.reader import read_module
from kiln.vm.runtime import Context, Instance, KilnRuntimeError, Module
from kiln.vm.writer import serialize
from vm_specs import F4, I64, fn

TWO = TensorType("f32", (2, 4))


def promises_spec() -> ModuleSpec:
    return ModuleSpec("promises", functions=[
        fn("keep", [("x", F4)], [], [Instr("global.store", 0, 0), Instr("ret", [])]),
        fn("keep_row", [("xs", TWO), ("i", I64)], [], [
            Instr("i.load", 0, 1), Instr("buffer.row", 2, 0, 0), Instr("global.store", 0, 2),
            Instr("ret", [])]),
        fn("kept", [], [("x", F4)], [Instr("global.load", 0, 0), Instr("ret", [0])]),
        fn("fresh", [], [("x", F4)], [Instr("alloc", 0, F4), Instr("ret", [0])]),
        fn("half", [("v", F4)], [("m", TWO)], [
            Instr("alloc", 1, TWO), Instr("i.const", 0, 1), Instr("buffer.set_row", 1, 0, 0),
            Instr("ret", [1])]),
        fn("fill", [("v", TWO)], [("m", TWO)], [Instr("ret", [0])]),
    ], globals=[GlobalSpec("kept", F4, True, None)])


@pytest.fixture(scope="module")
def instance():
    return Instance(worker_count=1)


@pytest.fixture(scope="module")
def module_bytes():
    return serialize(promises_spec())


def kept(ctx) -> np.ndarray:
    (value,) = ctx.invoke("kept")
    return value


def test_file_rewritten_or_truncated_after_load(instance, module_bytes, tmp_path):
    path = tmp_path / "deployed.vmfb"
    path.write_bytes(module_bytes)
    module = Module.from_file(instance, path)
    ctx = Context(module)
    x = np.arange(4, dtype=np.float32)
    with open(path, "r+b") as f:  # rewritten in place: same inode, every byte changed
        f.write(b"\xa5" * len(module_bytes))
    ctx.invoke("keep", [x])
    np.testing.assert_array_equal(kept(ctx), x)
    os.truncate(path, 0)  # a mapping would fault with SIGBUS on the next access
    np.testing.assert_array_equal(Context(module).invoke("half", [x])[0][1], x)
    path.unlink()
    np.testing.assert_array_equal(kept(ctx), x)


def _mapped(name: str) -> bool:
    with open("/proc/self/maps") as f:
        return any(name in line for line in f)


@pytest.mark.skipif(not hasattr(os, "memfd_create") or not hasattr(fcntl, "F_ADD_SEALS"),
                    reason="memfd seals are Linux-only")
def test_sealed_memfd_is_mapped_without_a_copy(instance, module_bytes):
    fd = os.memfd_create("kiln-promises-sealed", os.MFD_ALLOW_SEALING)
    try:
        os.write(fd, module_bytes)
        unsealed = Module.from_file(instance, f"/proc/self/fd/{fd}")
        assert not _mapped("memfd:kiln-promises-sealed")  # could change: copied
        unsealed.close()
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS,
                    fcntl.F_SEAL_WRITE | fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW)
        module = Module.from_file(instance, f"/proc/self/fd/{fd}")
        assert _mapped("memfd:kiln-promises-sealed")  # cannot change: used in place
        x = np.float32([4, 3, 2, 1])
        (m,) = Context(module).invoke("half", [x])
        np.testing.assert_array_equal(m, [[0, 0, 0, 0], x])
        module.close()
        assert not _mapped("memfd:kiln-promises-sealed")
    finally:
        os.close(fd)


def test_allocations_read_as_zeros(instance, module_bytes):
    ctx = Context(Module.from_bytes(instance, module_bytes))
    ones = np.ones((2, 4), np.float32)
    for _ in range(20):  # earlier calls leave freed buffers of these sizes behind
        ctx.invoke("fill", [ones * 7])
        np.testing.assert_array_equal(ctx.invoke("fresh")[0], np.zeros(4, np.float32))
        np.testing.assert_array_equal(ctx.invoke("half", [ones[0]])[0],
                                      [[0, 0, 0, 0], [1, 1, 1, 1]])


def test_global_keeps_a_copy_of_the_argument(instance, module_bytes):
    module = Module.from_bytes(instance, module_bytes)
    a, b = Context(module), Context(module)
    x = np.float32([1, 2, 3, 4])
    a.invoke("keep", [x])
    b.invoke("keep", [x])
    x[:] = -1
    np.testing.assert_array_equal(kept(a), [1, 2, 3, 4])
    np.testing.assert_array_equal(kept(b), [1, 2, 3, 4])
    xs = np.arange(8, dtype=np.float32).reshape(2, 4)
    a.invoke("keep_row", [xs, np.int64(1)])
    xs[:] = 0
    np.testing.assert_array_equal(kept(a), [4, 5, 6, 7])
    np.testing.assert_array_equal(kept(b), [1, 2, 3, 4])


def test_result_type_grown_past_what_the_kernel_writes_is_refused(instance, linear_module):
    """The fuzzer's finding: one dimension of an exported module's type grown,
    checksum recomputed. The result buffer is then larger than the kernel's
    written binding; the call must fail cleanly, not return stale heap bytes."""
    spec = read_module(linear_module)
    predict = next(f for f in spec.functions if f.name == "predict")
    out = predict.results[0]
    grown = TensorType(out.type.dtype, (out.type.shape[0] * 2, *out.type.shape[1:]))
    predict.results[0] = type(out)(out.name, grown)
    for f in spec.functions:
        f.code = [Instr(i.op, *[grown if a == out.type else a for a in i.operands])
                  if isinstance(i, Instr) else i for i in f.code]
        f.transient_size *= 2  # planned intermediates of the grown type still fit their arena
    ctx = Context(Module.from_bytes(instance, serialize(spec)))
    x = np.ones(predict.args[0].type.shape, np.float32)
    with pytest.raises(KilnRuntimeError, match=r"is 128 bytes, the kernel writes exactly 64 "
                                               r"\(a written binding must be the size of"):
        ctx.invoke("predict", [x])


@pytest.fixture(scope="module")
def linear_module():
    import importlib.util
    from pathlib import Path

    from kiln import Program
    path = Path(__file__).resolve().parent.parent / "examples" / "linear.py"
    spec = importlib.util.spec_from_file_location("linear_example_promises", path)
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    return Program.get_compiled_artifact(example.Linear()).bytes
