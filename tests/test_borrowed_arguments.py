"""Large numpy arguments are read in place (issue 9 §2): kernels compiled by kiln from module format 2.1
need each binding aligned only to its elements (kernel_abi.h), so a numpy array's own memory (16-byte
aligned, or anywhere for a slice) is bound without a copy; a module from before 2.1 gets one 64-byte
aligned copy from the runtime; memory not even aligned to its elements is copied by the binding."""
import ctypes
import gc
import os
import threading

import numpy as np
import pytest

import kiln
import kiln.numpy as knp
import kiln.vm.runtime as rt
from kiln.vm import _clib
from kiln.vm._clib import KilnRuntimeError, _check, _lib
from kiln.vm._convert import _to_view, kept_result_bytes
from kiln.vm.reader import ModuleFile
from kiln.vm.writer import serialize

N = 1 << 16  # 256 KB of f32: above the binding's copy threshold


def at_offset(shape, dtype, offset: int, seed: int = 0) -> np.ndarray:
    """A contiguous array whose data starts `offset` bytes past a 64-byte boundary, filled with random values."""
    dtype = np.dtype(dtype)
    nbytes = int(np.prod(shape)) * dtype.itemsize
    raw = np.empty(nbytes + 128, np.uint8)
    start = (offset - raw.ctypes.data) % 64
    out = raw[start:start + nbytes].view(dtype).reshape(shape)
    out[...] = np.random.default_rng(seed).standard_normal(shape).astype(dtype)
    assert out.ctypes.data % 64 == offset
    return out


@pytest.fixture
def result_addresses(monkeypatch):
    """The data address of every result view the runtime returns to kiln.vm.runtime.Context.invoke,
    whose calls take the view per argument path (kiln_context_invoke), where the runtime returns an
    argument's own view (kiln_context_invoke_host copies such a result before returning it)."""
    seen = []
    original = rt._shared_from_view
    monkeypatch.setattr(rt._HostCall, "_make_call",
                        lambda call: lambda args: call.context._invoke_views(call.name, args))

    def spy(view, expected, borrowed):
        seen.append(_lib().kiln_buffer_view_data(view))
        return original(view, expected, borrowed)

    monkeypatch.setattr(rt, "_shared_from_view", spy)
    return seen


def view_of(array, borrow=True):
    """(the view's data address, what _to_view returned) for `array`; the view is released."""
    out = ctypes.c_void_p()
    try:
        borrowed = _to_view(array, None, "x", ctypes.addressof(out), borrow=borrow)
        return _lib().kiln_buffer_view_data(out.value), borrowed
    finally:
        _lib().kiln_buffer_view_release(out.value)


@pytest.mark.parametrize("dtype, offset", [(np.float32, 4), (np.float32, 16), (np.float64, 8), (np.int16, 2),
                                           (np.bool_, 1), (np.float64, 40)])
def test_element_aligned_memory_is_wrapped_in_place(dtype, offset):
    x = at_offset((N,), dtype, offset)
    address, borrowed = view_of(x)
    assert address == x.ctypes.data
    assert borrowed[:2] == (x.ctypes.data, x.ctypes.data + x.nbytes)


@pytest.mark.parametrize("dtype, offset", [(np.float32, 2), (np.float64, 4), (np.int32, 1)])
def test_memory_not_aligned_to_its_elements_is_copied_once(dtype, offset):
    raw = at_offset((N * np.dtype(dtype).itemsize + 64,), np.uint8, 0)
    x = np.frombuffer(raw, dtype, count=N, offset=offset)
    assert not x.flags.aligned
    address, borrowed = view_of(x)
    assert borrowed is None and address != x.ctypes.data and address % 64 == 0


def test_wrap_refuses_memory_not_aligned_to_its_elements():
    raw = at_offset((64,), np.uint8, 0)
    shape = (ctypes.c_int64 * 1)(3)
    out = ctypes.c_void_p()
    status = _lib().kiln_buffer_view_wrap(1, 1, shape, raw.ctypes.data + 4, 24, None, None, ctypes.addressof(out))
    with pytest.raises(KilnRuntimeError, match=r"is not aligned to its f64 elements \(a multiple of 8 bytes\)"):
        _check(status)
    assert out.value is None


def test_jit_reads_an_unaligned_argument_in_place(result_addresses):
    x = at_offset((N,), np.float32, 4)
    f = kiln.jit(lambda x: (x, knp.sum(x), x * 2 + 1))
    same, total, affine = f(x)
    # the first result is the argument's view itself: the runtime's memory is the caller's
    assert result_addresses[0] == x.ctypes.data
    np.testing.assert_array_equal(same, x)
    np.testing.assert_array_equal(affine, x * np.float32(2) + np.float32(1))
    np.testing.assert_allclose(total, x.astype(np.float64).sum(), rtol=1e-5, atol=1e-3)
    assert not np.shares_memory(same, x)  # a result never aliases the caller's array


@pytest.fixture
def host_argument_addresses(monkeypatch):
    """The data address of every argument that Context.invoke passes to kiln_context_invoke_host."""
    seen = []
    _lib()
    original = _clib._invoke_host

    def spy(context, function, args, arg_count, results, views, result_count):
        buffers = (_clib._HostBuffer * arg_count.value).from_address(args.value)
        seen.extend(b.data for b in buffers)
        return original(context, function, args, arg_count, results, views, result_count)

    monkeypatch.setattr(_clib, "_invoke_host", spy)
    return seen


@pytest.mark.parametrize("offset", [0, 4])
def test_prepared_calls_pass_arguments_in_place(host_argument_addresses, offset):
    """kiln.jit's calls (one kiln_context_invoke_host each) hand the runtime the caller's memory, large
    or small; the identity result comes back as a copy, never over the caller's array."""
    x = at_offset((N,), np.float32, offset, seed=3)
    small = np.arange(3, dtype=np.float32)
    f = kiln.jit(lambda x, s: (x, knp.sum(x) + s, s))
    f(x, small)
    host_argument_addresses.clear()
    same, total, s_again = f(x, small)
    assert host_argument_addresses == [x.ctypes.data, small.ctypes.data]
    np.testing.assert_array_equal(same, x)
    np.testing.assert_array_equal(s_again, small)
    np.testing.assert_allclose(total, x.astype(np.float64).sum() + small, rtol=1e-5, atol=1e-3)
    assert not np.shares_memory(same, x) and not np.shares_memory(s_again, small)


def _softmax(np_, x):
    e = np_.exp(x - np_.max(x, axis=1, keepdims=True))
    return e / np_.sum(e, axis=1, keepdims=True)


# Every kernel family on arguments that start 4 (f32) or 8 (f64) bytes past a 64-byte boundary, read in
# place: elementwise, reductions along and across rows, matmul's packed fast path, softmax, a
# convolution. An aligned vector access to such memory would fault; the results match numpy.
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name, fn, shapes, rtol", [
    ("elementwise", lambda np_, x, y: np_.tanh(x * 0.5 + y) * 3.0, [(300, 257), (300, 257)], 1e-6),
    ("sum_axis0", lambda np_, x: np_.sum(x, axis=0), [(301, 129)], 1e-5),
    ("sum_axis1", lambda np_, x: np_.sum(x, axis=1), [(301, 129)], 1e-5),
    ("matmul", lambda np_, a, b: a @ b, [(130, 97), (97, 75)], 1e-5),
    ("softmax", _softmax, [(67, 301)], 1e-5),
    ("conv", lambda np_, x, w: np_.convolve(x, w, mode="valid"), [(9000,), (33,)], 1e-5),
])
def test_kernels_read_unaligned_arguments(dtype, name, fn, shapes, rtol):
    offset = 4 if dtype == np.float32 else 8
    args = [at_offset(shape, dtype, offset, seed=i) for i, shape in enumerate(shapes)]
    got = kiln.jit(lambda *a: fn(knp, *a))(*args)
    want = fn(np, *[a.astype(np.float64) for a in args])
    np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol * np.abs(want).max())
    assert got.dtype == dtype


def test_scan_over_rows_of_an_unaligned_argument():
    """Rows of 5 floats at 20-byte strides from an address 4 past a 64-byte boundary: every row the
    kernels see is unaligned (buffer.row shares them all in a 2.1 module)."""
    xs = at_offset((800, 5), np.float32, 4, seed=1)

    def step(carry, row):
        carry = carry * np.float32(0.5) + row
        return carry, carry * row

    final, ys = kiln.jit(lambda xs: kiln.lax.scan(step, knp.zeros(5, np.float32), xs))(xs)
    carry, expected = np.zeros(5, np.float32), []
    for row in xs:
        carry = carry * np.float32(0.5) + row
        expected.append(carry * row)
    np.testing.assert_allclose(final, carry, rtol=1e-6)
    np.testing.assert_allclose(ys, np.stack(expected), rtol=1e-6, atol=1e-6)


def compiled_module(fn, *avals):
    """The module kiln.jit builds for fn at these arguments (format 2.1, element-aligned bindings)."""
    from kiln.compiler.pipeline import ProcedureSource, build_module
    from kiln.core.pytree import treedef_to_json

    traced = kiln.jit(fn).trace(*avals)
    graph = traced.graph
    return build_module("m", [ProcedureSource("main", graph, [f"a{i}" for i in range(len(graph.invars))],
                                              [f"r{i}" for i in range(len(graph.outvars))],
                                              treedef_to_json(traced.signature.treedef),
                                              treedef_to_json(traced.out_treedef))], [])


def as_old_module(data: bytes) -> bytes:
    """The module as a compiler before format 2.1 wrote it: no element_aligned_bindings."""
    spec = ModuleFile(data).spec
    spec.element_aligned_bindings = False
    return serialize(spec, version=(2, 0))


def test_modules_record_the_binding_alignment_their_kernels_need():
    data = compiled_module(lambda x: x * 2, np.zeros(4, np.float32))
    assert ModuleFile(data).element_aligned_bindings and ModuleFile(data).version >= (2, 1)
    assert "bindings aligned to their elements" in ModuleFile(data).dump()
    old = ModuleFile(as_old_module(data))
    assert not old.element_aligned_bindings and old.version == (2, 0)
    assert "bindings aligned to 64 bytes" in old.dump()


@pytest.mark.parametrize("old", [False, True])
def test_old_modules_get_one_aligned_copy(result_addresses, old):
    x = at_offset((N,), np.float32, 4, seed=2)
    data = compiled_module(lambda x: (x, knp.sum(x), knp.sqrt(knp.abs(x))), x)
    if old:
        data = as_old_module(data)
    with rt.Instance(worker_count=2) as inst, rt.Module.from_bytes(inst, data) as m, rt.Context(m) as ctx:
        same, total, roots = ctx.invoke("main", [x])
        again = ctx.invoke("main", [at_offset((N,), np.float32, 0, seed=2)])
    if old:  # the kernels see a 64-byte aligned copy, as they were compiled to assume
        assert result_addresses[0] != x.ctypes.data and result_addresses[0] % 64 == 0
    else:
        assert result_addresses[0] == x.ctypes.data
    np.testing.assert_array_equal(same, x)
    np.testing.assert_array_equal(roots, np.sqrt(np.abs(x)))
    np.testing.assert_allclose(total, x.astype(np.float64).sum(), rtol=1e-5, atol=1e-3)
    np.testing.assert_array_equal(again[0], x)
    assert again[1] == total


def test_large_results_go_back_in_as_the_runtimes_memory(host_argument_addresses):
    """A large result is the runtime's memory; passed back in, the runtime keeps it alive through its view
    (kiln_host_buffer_t.owner), so returning it as it is costs no copy, unlike caller memory."""
    x = at_offset((N,), np.float32, 0, seed=4)
    big = kiln.jit(lambda x: x * 2)(x)
    g = kiln.jit(lambda v: (v, v + 1))
    same, plus = g(big)
    assert host_argument_addresses[-1] == big.ctypes.data
    assert np.shares_memory(same, big) and not big.flags.writeable
    expected = x * np.float32(2)
    np.testing.assert_array_equal(same, expected)
    np.testing.assert_array_equal(plus, expected + np.float32(1))
    del big, x
    np.testing.assert_array_equal(same, expected)  # still alive through `same`


@pytest.mark.parametrize("size", [5, N])
def test_threads_share_one_prepared_call(size):
    """Threads calling one jitted function share its prepared C descriptions: each call fills them in
    under the context's lock, so every thread gets its own results (large ones written into memory that
    another thread's result released)."""
    f = kiln.jit(lambda x, y: (x * 2 + y, knp.sum(x)))
    errors = []

    def worker(seed):
        try:
            rng = np.random.default_rng(seed)
            for _ in range(300 if size == 5 else 30):
                x, y = rng.standard_normal((2, size)).astype(np.float32)
                twice, total = f(x, y)
                np.testing.assert_array_equal(twice, x * np.float32(2) + y)
                np.testing.assert_allclose(total, x.sum(), rtol=1e-5, atol=1e-3)
        except Exception as e:  # reported below
            errors.append(e)

    f(np.zeros(size, np.float32), np.zeros(size, np.float32))
    threads = [threading.Thread(target=worker, args=(s,)) for s in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


# ---- results written into the memory of released results (kiln.vm._convert._ResultSpare) ----------

BIG = 10 << 20  # 40 MiB of f32: above glibc's largest mmap threshold (32 MiB), so every fresh buffer of it
                # is a mapping of its own (the runtime's, in transparent huge pages where the kernel has them:
                # ~21 faults; else 10,240 faults of 4 KiB pages) and unmapped when freed


class _MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in
                ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks",
                 "keepcost")]


def malloc_in_use() -> int:
    """Bytes the C heap has handed out and not had back (glibc's mallinfo2: mapped chunks and the arenas'
    chunks in use): the runtime's buffers included."""
    mallinfo2 = ctypes.CDLL(None).mallinfo2
    mallinfo2.restype = _MallInfo2
    info = mallinfo2()
    return info.hblkhd + info.uordblks


def resident_anonymous() -> int:
    """Bytes of the process's resident anonymous memory (RssAnon): the C heap's and every mapping's,
    the runtime's mappings of large buffers (runtime-c/src/memory.h), which mallinfo2 does not see,
    included."""
    with open("/proc/self/status") as status:
        line = next(line for line in status if line.startswith("RssAnon:"))
    return int(line.split()[1]) * 1024


def mapping_of(address: int) -> tuple[int, int, list[str]]:
    """The start, end and VmFlags of the mapping holding `address` (/proc/self/smaps)."""
    with open("/proc/self/smaps") as smaps:
        found = None
        for line in smaps:
            head = line.split()[0]
            if "-" in head and not head.endswith(":"):
                start, end = (int(a, 16) for a in head.split("-"))
                found = (start, end) if start <= address < end else None
            elif found and head == "VmFlags:":
                return found[0], found[1], line.split()[1:]
    raise AssertionError(f"no mapping holds {address:#x}")


def page_faults() -> int:
    import resource

    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_minflt + usage.ru_majflt


def test_a_released_results_memory_holds_the_next_calls_result():
    """A large result that its arrays released is where the next call's result is written: a live result is
    never written (a call while it is held gets fresh memory), and results stay read-only kiln Arrays."""
    f = kiln.jit(lambda x, s: (knp.tanh(x * s) + x, knp.sum(x)))
    x, y = at_offset((N,), np.float32, 0, seed=5), at_offset((N,), np.float32, 0, seed=6)
    first, _ = f(x, np.float32(2))
    address = first.ctypes.data
    del first
    other = np.ones(N, np.float32)  # a fresh allocation would take freed memory of this size
    second, _ = f(y, np.float32(2))
    assert second.ctypes.data == address and other.ctypes.data != address
    third, total = f(x, np.float32(2))
    assert third.ctypes.data != address
    for got, v in ((second, y), (third, x)):
        np.testing.assert_allclose(got, np.tanh(v * np.float32(2)) + v, rtol=1e-6, atol=1e-6)
        assert type(got) is kiln.Array and not got.flags.writeable and got.dtype == np.float32
    np.testing.assert_allclose(total, x.astype(np.float64).sum(), rtol=1e-5, atol=1e-3)
    with pytest.raises(TypeError, match="kiln arrays are immutable"):
        second[0] = 1


def test_reused_results_cost_no_page_faults_and_nothing_leaks():
    """Dropped 40 MiB results: a steady-state call faults in no pages (without reuse each call maps and
    faults a fresh 40 MiB) and memory in use does not grow; held results get memory of their own; the kept
    memory goes with the function."""
    x = np.full(BIG, 0.5, np.float32)
    f = kiln.jit(lambda x: x * 2 + 1)
    gc.collect()  # earlier tests' functions: their kept memory goes now, not during this test
    kept = kept_result_bytes()
    r = f(x)  # compiles
    faults = page_faults()
    held = [r] + [f(x) for _ in range(2)]  # while held, each call gets fresh memory
    fresh = (page_faults() - faults) / 2  # the faults of one fresh 40 MiB buffer: ~21 huge pages or 10,240
    assert fresh >= 16, fresh
    assert len({h.ctypes.data for h in held}) == 3
    assert all(h[BIG // 2] == 2 for h in held)
    # each a mapping of its own (runtime-c/src/memory.h) on a 2 MiB boundary, advised MADV_HUGEPAGE
    # ("hg") where the kernel has transparent huge pages; the argument's glibc mapping is not
    huge_pages = os.path.isdir("/sys/kernel/mm/transparent_hugepage")
    for h in held:
        start, end, flags = mapping_of(h.ctypes.data)
        assert start % (2 << 20) == 0 and h.ctypes.data - start < 4096 and end >= h.ctypes.data + h.nbytes
        assert ("hg" in flags) == huge_pages, flags
    assert "hg" not in mapping_of(x.ctypes.data)[2]
    del r, held
    in_use, faults = resident_anonymous(), page_faults()
    for _ in range(8):
        r = f(x)
        assert r[0] == 2 and r[-1] == 2
        del r
    # fresh memory would be 8 fresh buffers; reused memory faults in none (Python's own: a few pages)
    assert page_faults() - faults < fresh, (page_faults() - faults, fresh)
    assert resident_anonymous() - in_use < BIG
    r, want, faults = f(x), np.float32(2), page_faults()
    for _ in range(8):  # a chain: each result goes back in, then is dropped as the next one comes
        r, want = f(r), want * 2 + 1
    assert r[0] == want and r[-1] == want
    # one fresh buffer as the chain starts (two take turns: the argument's and the result's), then none
    assert page_faults() - faults < 2 * fresh, (page_faults() - faults, fresh)
    del r
    held = [f(x) for _ in range(3)]
    assert len({h.ctypes.data for h in held}) == 3
    del held
    assert resident_anonymous() - in_use < BIG
    assert kept_result_bytes() - kept == 4 * BIG
    del f
    gc.collect()
    assert kept_result_bytes() == kept
    assert in_use - resident_anonymous() > 3 * BIG  # the 4 * BIG bytes kept for its next call went with it


def test_results_outlive_their_context_and_failed_calls_keep_the_memory():
    """Context.invoke reuses a released result's memory too; a call that fails keeps it for the next one;
    results stay valid after their context closes, and closing releases the kept memory."""
    x = at_offset((N,), np.float32, 0, seed=7)
    data = compiled_module(lambda x: x * 3 - 1, x)
    with rt.Instance(worker_count=2) as inst, rt.Module.from_bytes(inst, data) as m:
        ctx = rt.Context(m)
        (r,) = ctx.invoke("main", [x])
        address = r.ctypes.data
        del r
        ctx.set_limits(max_steps=1)
        with pytest.raises(KilnRuntimeError, match="limit of 1 bytecode instructions"):
            ctx.invoke("main", [x])
        ctx.set_limits(max_steps=None)
        (kept,) = ctx.invoke("main", [x])
        assert kept.ctypes.data == address and type(kept) is np.ndarray and not kept.flags.writeable
        (other,) = ctx.invoke("main", [x + 1])
        del other  # now kept for the next call
        in_use = malloc_in_use()
        ctx.close()
        assert in_use - malloc_in_use() > N * 3  # released with the context (other allocations: noise)
        np.testing.assert_array_equal(kept, x * np.float32(3) - np.float32(1))
        in_use = malloc_in_use()
        del kept  # released: a closed context keeps nothing
        assert in_use - malloc_in_use() > N * 3


def test_results_that_are_globals_are_never_written():
    """A result that is also a global's value (a store returned, or a global read) is shared, never
    reused as a later result's memory, even after the global moved on: the globals keep their values."""
    from kiln import Program

    like = Program.like(np.zeros(N, np.float32))

    class State(Program):
        _state = Program.export_global(np.zeros(N, np.float32), mutable=True)

        def put(self, x=like):
            self._state = x * 2
            return self._state

        def get(self):
            return self._state

        def fresh(self, x=like):
            return x + 1

    m = State()
    x, y = at_offset((N,), np.float32, 0, seed=8), at_offset((N,), np.float32, 0, seed=9)
    stored = m.put(x)
    got = m.get()
    assert np.shares_memory(stored, got)  # the global's own buffer
    del stored, got
    m.fresh(y)
    np.testing.assert_array_equal(m.get(), x * 2)
    held = m.get()
    m.put(y)  # held is the old value, now nobody else's
    np.testing.assert_array_equal(held, x * 2)
    del held
    for _ in range(2):
        np.testing.assert_array_equal(m.fresh(x), x + 1)
        np.testing.assert_array_equal(m.get(), y * 2)
    np.testing.assert_array_equal(Program.get_context(m).get_global("_state"), y * 2)


def test_an_argument_returned_as_it_is_stays_shared():
    """A result that is an argument going back in (its own view) is shared as before, and its memory is
    not written by a later call of the function that returned it."""
    x = at_offset((N,), np.float32, 0, seed=10)
    big = kiln.jit(lambda x: x * 2)(x)
    g = kiln.jit(lambda v: (v, v + 1))
    same, _ = g(big)
    assert np.shares_memory(same, big)
    del big
    keep, _ = g(kiln.jit(lambda x: x * 2)(x + 1))
    np.testing.assert_array_equal(same, x * np.float32(2))
    np.testing.assert_array_equal(keep, (x + 1) * np.float32(2))


_LAYOUT_FN = kiln.jit(lambda x: knp.tanh(x) * 2 + x)


@pytest.mark.parametrize("layout", ["strided", "fortran", "read-only", "big-endian", "unaligned"])
def test_large_arguments_of_any_layout(layout):
    """Large arguments that cannot be read in place are converted (copied), calls after calls, with
    results reused: the values equal numpy's and the arguments are untouched."""
    rng = np.random.default_rng(11)
    base = rng.standard_normal((256, 512)).astype(np.float32)
    x = {"strided": lambda: base[:, ::2],
         "fortran": lambda: np.asfortranarray(base[:, :256]),
         "read-only": lambda: base[:, :256].copy(),
         "big-endian": lambda: base[:, :256].astype(">f4"),
         "unaligned": lambda: np.frombuffer(bytearray(2) + base[:, :256].tobytes(), np.float32,
                                            offset=2).reshape(256, 256)}[layout]()
    if layout == "read-only":
        x.flags.writeable = False
    assert x.flags.c_contiguous == (layout in ("read-only", "big-endian", "unaligned"))
    assert x.flags.aligned == (layout != "unaligned")
    before = x.copy()
    v = x.astype(np.float32)
    for _ in range(3):
        got = _LAYOUT_FN(x)
        np.testing.assert_allclose(got, np.tanh(v) * 2 + v, rtol=1e-6, atol=1e-6)
        del got
    np.testing.assert_array_equal(x, before)


def test_a_result_spare_keeps_one_buffer_nothing_else_holds(monkeypatch):
    from kiln.vm import _convert
    from kiln.vm._convert import _ResultSpare, kept_result_bytes

    lib = _lib()

    def new_view():
        out = ctypes.c_void_p()
        _check(lib.kiln_buffer_view_create(0, 1, (ctypes.c_int64 * 1)(N), None, 0, ctypes.addressof(out)))
        return out.value

    kept = kept_result_bytes()
    spare, a, b = _ResultSpare(N * 4), new_view(), new_view()
    lib.kiln_buffer_view_retain(a)
    assert not spare.keep(a)  # two references: another holder could still read or write it
    lib.kiln_buffer_view_release(a)
    assert spare.keep(a) and not spare.keep(b)  # at most one
    assert kept_result_bytes() == kept + N * 4
    assert spare.take() == (a, lib.kiln_buffer_view_mutable_data(a)) and spare.take() is None
    assert kept_result_bytes() == kept
    monkeypatch.setitem(_convert._REUSE, "limit", kept + N * 4 - 1)  # all spares together keep at most this
    assert not spare.keep(a)
    monkeypatch.setitem(_convert._REUSE, "limit", kept + N * 4)
    assert spare.keep(a) and kept_result_bytes() == kept + N * 4
    spare.close()  # released a
    assert kept_result_bytes() == kept
    assert spare.take() is None and not spare.keep(b)  # a closed spare keeps nothing
    lib.kiln_buffer_view_release(b)


@pytest.mark.parametrize("text, limit", [("", 1 << 30), ("0", 0), ("512M", 512 << 20), ("12345", 12345),
                                         ("junk", "is not a size"), ("-1K", "must be 0 or more")])
def test_the_reuse_limit_comes_from_the_environment(monkeypatch, text, limit):
    from kiln.vm import _convert

    monkeypatch.setenv("KILN_RESULT_REUSE_MAX_SIZE", text)
    monkeypatch.setitem(_convert._REUSE, "limit", None)
    if isinstance(limit, str):
        with pytest.raises(ValueError, match=f"KILN_RESULT_REUSE_MAX_SIZE='{text}' {limit}"):
            _convert.reuse_max_bytes()
        with pytest.raises(ValueError, match=f"KILN_RESULT_REUSE_MAX_SIZE='{text}' {limit}"):
            kiln.jit(lambda x: x * 3 - 1)(np.zeros(N, np.float32))  # where a call is prepared
        return
    assert _convert.reuse_max_bytes() == limit
    assert _convert._result_spares_supported() == (limit > 0)
    if limit == 0:  # nothing is kept
        kept = _convert.kept_result_bytes()
        f = kiln.jit(lambda x: x * 3 - 1)
        x = at_offset((N,), np.float32, 0, seed=12)
        r = f(x)
        del r
        assert _convert.kept_result_bytes() == kept
        np.testing.assert_array_equal(f(x), x * np.float32(3) - np.float32(1))
