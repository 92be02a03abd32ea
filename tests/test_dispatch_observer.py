"""The C runtime's dispatch observer (kiln_context_set_dispatch_observer), through
runtime-c/tests/kiln_vm_driver.c built with ASan+UBSan: what it is told about each
dispatch, that the bytes it reads are the kernel's, and that a nonzero answer stops
the call cleanly. `kiln check` (tests/test_check.py) is built on it."""

import numpy as np
import pytest

from kiln.vm.isa import Instr, Label, instr_words
from kiln.vm.writer import serialize
from vm_native import Driver, build_driver, build_kernel, host_triple
from vm_specs import F4, axpy_spec, fn

W = np.array([1, 2, 3, 4], np.float32)  # axpy_spec's global w


@pytest.fixture(scope="module")
def driver(tmp_path_factory):
    return Driver(build_driver(tmp_path_factory.mktemp("observer_native")), tmp_path_factory.mktemp("observer"))


@pytest.fixture(scope="module")
def kernel(tmp_path_factory):
    return build_kernel(tmp_path_factory.mktemp("observer_kernel"))


def offset_of_dispatch(code, nth=0) -> int:
    """Word offset of the nth dispatch instruction of a function's code."""
    offset, seen = 0, 0
    for instr in code:
        if isinstance(instr, Label):
            continue
        if instr.op == "dispatch":
            if seen == nth:
                return offset
            seen += 1
        offset += instr_words(instr)
    raise AssertionError("no such dispatch")


def twice_spec(kernel):
    """axpy's module plus twice(x) = (x + 2w) + 2w: two dispatches of the kernel, the second reading
    the first's output, in a loop of two iterations (the observer sees every dispatch, loops
    included)."""
    spec = axpy_spec(kernel, host_triple())
    loop, body, done = Label("loop"), Label("body"), Label("done")
    spec.functions.append(fn("twice", [("x", F4)], [("y", F4)], [
        Instr("global.load", 1, 0), Instr("i.const", 0, 4), Instr("const", 3, 0), Instr("i.load", 1, 3),
        Instr("mov", 4, 0), Instr("i.const", 2, 0), Instr("i.const", 3, 2), Instr("i.const", 5, 1),
        loop, Instr("i.lt", 4, 2, 3), Instr("br.if", 4, body, done), body,
        Instr("alloc", 2, F4), Instr("dispatch", 0, 2, [4, 1, 2], [0, 1]), Instr("mov", 4, 2),
        Instr("i.add", 2, 2, 5), Instr("br", loop), done, Instr("ret", [4])]))
    return spec


def dispatches(lines):
    """[(header, [(index, r|w, size, bytes)])] from the driver's --observe output."""
    out = []
    for line in lines:
        if line.startswith("dispatch "):
            out.append((line, []))
        elif line.startswith("  binding "):
            _, j, kind, size, data = line.split()
            out[-1][1].append((int(j), kind, int(size), bytes.fromhex(data)))
    return out


def test_observer_sees_each_dispatch_before_and_after_with_its_bytes(driver, kernel):
    spec = axpy_spec(kernel, host_triple())
    x = np.array([10, 20, 30, 40], np.float32)
    out = driver.run(serialize(spec), "--observe", "--call=predict", "--arg=4xf32=10,20,30,40")
    (before, bindings_before), (after, bindings) = dispatches(out)
    at = f"dispatch predict@{offset_of_dispatch(spec.functions[0].code)} 0 {spec.kernels[0].name} wg=3"
    assert (before, after) == (f"{at} before", f"{at} after")
    assert bindings_before == [(0, "r", 16, x.tobytes()), (1, "r", 16, W.tobytes())]  # the inputs only
    assert bindings == [(0, "r", 16, x.tobytes()), (1, "r", 16, W.tobytes()),
                        (2, "w", 16, (x + np.float32(2) * W).tobytes())]
    assert out[-1].startswith("result 0 4xf32=12,24,36,48")


def test_observer_in_a_loop_and_removed(driver, kernel):
    spec = twice_spec(kernel)
    twice = next(f for f in spec.functions if f.name == "twice")
    out = driver.run(serialize(spec), "--observe", "--call=twice", "--arg=4xf32=1,1,1,1",
                     "--observe-off", "--call=twice", "--arg=4xf32=1,1,1,1")
    seen = dispatches(out)
    at = f"dispatch twice@{offset_of_dispatch(twice.code)} 0 {spec.kernels[0].name} wg=2"
    assert [h for h, _ in seen] == [f"{at} before", f"{at} after"] * 2
    first = np.float32(1) + 2 * W
    assert seen[1][1][2][3] == first.tobytes()
    assert seen[2][1][0][3] == first.tobytes()  # the second dispatch reads what the first wrote
    assert seen[3][1][2][3] == (first + 2 * W).tobytes()
    results = [line for line in out if line.startswith("result")]
    assert results == ["result 0 4xf32=5,9,13,17"] * 2  # nothing observed once removed: 2 dispatches only


@pytest.mark.parametrize("option, when", [("--observe-stop=7", "before"), ("--observe-stop-after=7", "after")])
def test_nonzero_answer_stops_the_call(driver, kernel, option, when):
    spec = twice_spec(kernel)
    proc = driver.raw("run", serialize(spec), option, "--call=twice", "--arg=4xf32=1,1,1,1")
    assert proc.returncode == 1
    lines = proc.stdout.splitlines()
    assert lines[0] == f"dispatch {spec.kernels[0].name} stopped {when}"  # the first dispatch only
    assert lines[1] == (f"error CANCELLED: in function 'twice' at word {offset_of_dispatch(spec.functions[-1].code)} "
                        f"(dispatch): the dispatch observer stopped the call {when} kernel "
                        f"'{spec.kernels[0].name}' (it returned 7)")


def test_observer_of_a_call_without_dispatches_is_not_called(driver, kernel):
    spec = axpy_spec(kernel, host_triple())
    assert driver.run(serialize(spec), "--observe", "--call=triangle", "--arg=i64=4") == ["result 0 i64=10"]


def test_python_binding_copies_each_dispatch_and_carries_errors(kernel):
    from kiln.vm.runtime import Context, Instance, Module

    spec = twice_spec(kernel)
    ctx = Context(Module.from_bytes(Instance(worker_count=1), serialize(spec)))
    seen = []
    ctx.set_dispatch_observer(seen.append)
    (y,) = ctx.invoke("twice", [np.ones(4, np.float32)])
    np.testing.assert_array_equal(y, 1 + 4 * W)
    at = offset_of_dispatch(spec.functions[-1].code)
    assert [(r.function, r.offset, r.kernel, r.kernel_name, r.workgroups, r.written, r.phase) for r in seen] == \
        [("twice", at, 0, spec.kernels[0].name, 2, [False, False, True], phase) for phase in ("before", "after")] * 2
    assert seen[0].bindings == [np.ones(4, np.float32).tobytes(), W.tobytes(), None]  # not written yet
    assert seen[1].bindings == [np.ones(4, np.float32).tobytes(), W.tobytes(), (1 + 2 * W).tobytes()]
    assert seen[3].bindings[2] == y.tobytes()

    def fails(record):
        raise ValueError(f"observer saw {record.kernel_name}")

    ctx.set_dispatch_observer(fails)
    with pytest.raises(ValueError, match=f"observer saw {spec.kernels[0].name}"):
        ctx.invoke("twice", [np.ones(4, np.float32)])
    ctx.set_dispatch_observer(None)  # removed: the context calls on as before
    np.testing.assert_array_equal(ctx.invoke("twice", [np.ones(4, np.float32)])[0], 1 + 4 * W)
    assert len(seen) == 4


def test_kernel_with_many_bindings(driver, kernel):
    """More than 16 bindings (the observer's sizes then live on the heap): every one is reported, in
    order, with its size; read bindings larger than the kernel reads report their whole size."""
    from kiln.vm.module_spec import BindingSpec, KernelSpec, TensorType

    spec = axpy_spec(kernel, host_triple())
    F8 = TensorType("f32", (8,))
    extra = [BindingSpec(16, False)] * 17  # read (and ignored) by the kernel, which reads bindings 0-2
    spec.kernels.append(KernelSpec("wide", 0, 0, [BindingSpec(16, False), BindingSpec(16, False),
                                                  BindingSpec(16, True)] + extra, 2))
    spec.functions.append(fn("wide", [("x", F4), ("big", F8)], [("y", F4)], [
        Instr("global.load", 2, 0), Instr("alloc", 3, F4), Instr("i.const", 0, 4), Instr("const", 4, 0),
        Instr("i.load", 1, 4), Instr("dispatch", 1, 1, [0, 2, 3] + [1] * 17, [0, 1]), Instr("ret", [3])]))
    big = np.arange(8, dtype=np.float32)
    out = driver.run(serialize(spec), "--observe", "--call=wide", "--arg=4xf32=1,2,3,4", "--arg=8xf32=0,1,2,3,4,5,6,7")
    (before, bindings_before), (header, bindings) = dispatches(out)
    assert header == f"dispatch wide@{offset_of_dispatch(spec.functions[-1].code)} 1 wide wg=1 after"
    assert [(j, kind, size) for j, kind, size, _ in bindings] == \
        [(0, "r", 16), (1, "r", 16), (2, "w", 16)] + [(j, "r", 32) for j in range(3, 20)]
    assert bindings_before == [b for b in bindings if b[1] == "r"]
    assert all(data == big.tobytes() for *_, data in bindings[3:])
    assert bindings[2][3] == (np.array([1, 2, 3, 4], np.float32) + 2 * W).tobytes()


def test_inputs_are_seen_before_a_kernel_writes_over_them(driver, kernel):
    """A kernel that writes its output over its own input (y = y + 2w in place): before the kernel the
    observer sees the input, after it the same buffer holds the output."""
    spec = axpy_spec(kernel, host_triple())
    spec.functions.append(fn("inplace", [("x", F4)], [("y", F4)], [
        Instr("global.load", 1, 0), Instr("alloc", 2, F4), Instr("i.const", 0, 4), Instr("const", 3, 0),
        Instr("i.load", 1, 3), Instr("dispatch", 0, 1, [0, 1, 2], [0, 1]),
        Instr("dispatch", 0, 1, [2, 1, 2], [0, 1]), Instr("ret", [2])]))
    out = driver.run(serialize(spec), "--observe", "--call=inplace", "--arg=4xf32=1,1,1,1")
    seen = dispatches(out)
    once, twice = np.float32(1) + 2 * W, np.float32(1) + 4 * W
    assert [h.split()[-1] for h, _ in seen] == ["before", "after", "before", "after"]
    assert seen[2][1][0][3] == once.tobytes()  # the second kernel's input, read before it ran
    assert seen[3][1][0][3] == twice.tobytes() == seen[3][1][2][3]  # the same buffer, now its output
    assert out[-1] == "result 0 4xf32=5,9,13,17"
