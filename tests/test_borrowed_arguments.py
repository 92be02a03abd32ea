"""Large numpy arguments are read in place (issue 9 §2): kernels compiled by kiln from module format 2.1
need each binding aligned only to its elements (kernel_abi.h), so a numpy array's own memory (16-byte
aligned, or anywhere for a slice) is bound without a copy; a module from before 2.1 gets one 64-byte
aligned copy from the runtime; memory not even aligned to its elements is copied by the binding."""
import ctypes
import threading

import numpy as np
import pytest

import kiln
import kiln.numpy as knp
import kiln.vm.runtime as rt
from kiln.vm import _clib
from kiln.vm._clib import KilnRuntimeError, _check, _lib
from kiln.vm._convert import _to_view
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


def test_threads_share_one_prepared_call():
    """Threads calling one jitted function share its prepared C descriptions: each call fills them in
    under the context's lock, so every thread gets its own results."""
    f = kiln.jit(lambda x, y: (x * 2 + y, knp.sum(x)))
    errors = []

    def worker(seed):
        try:
            rng = np.random.default_rng(seed)
            for _ in range(300):
                x, y = rng.standard_normal((2, 5)).astype(np.float32)
                twice, total = f(x, y)
                np.testing.assert_array_equal(twice, x * np.float32(2) + y)
                np.testing.assert_allclose(total, x.sum(), rtol=1e-6, atol=1e-6)
        except Exception as e:  # reported below
            errors.append(e)

    f(np.zeros(5, np.float32), np.zeros(5, np.float32))
    threads = [threading.Thread(target=worker, args=(s,)) for s in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
