"""kiln.vm.runtime (ctypes binding of libkiln_runtime) on modules written by
kiln.vm.writer: numbers against numpy, every dtype, globals, errors, threads."""
import json
import threading
from pathlib import Path

import numpy as np
import pytest

from kiln.vm.runtime import (CANCELLED, CODE_NAMES, DATA_LOSS, DEADLINE_EXCEEDED, INVALID_ARGUMENT,
                             NOT_FOUND, CallLimits, Context, Instance, KilnRuntimeError, Module,
                             numpy_dtype)
from kiln.vm.writer import serialize
from runtime_tools import ALL_DTYPES, ensure_runtime_library, identity_spec
from vm_native import build_kernel, host_triple
from vm_specs import axpy_spec


@pytest.fixture(scope="module")
def instance():
    ensure_runtime_library()
    return Instance(worker_count=2)


@pytest.fixture(scope="module")
def axpy_bytes(tmp_path_factory):
    kernel = build_kernel(tmp_path_factory.mktemp("kernel"))
    return serialize(axpy_spec(kernel, host_triple()))


@pytest.fixture(scope="module")
def ident(instance):
    return Module.from_bytes(instance, serialize(identity_spec()))


def sample(dtype: str, shape=(2, 3), seed=0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if dtype == "bool":
        return rng.random(shape) < 0.5
    if dtype == "bf16":
        # raw bfloat16 bits of some ordinary floats (or ml_dtypes' bfloat16)
        f = rng.standard_normal(shape).astype(np.float32)
        bits = (f.view(np.uint32) >> 16).astype(np.uint16)
        return bits.view(numpy_dtype("bf16"))
    np_dtype = numpy_dtype(dtype)
    if np.issubdtype(np_dtype, np.floating):
        return rng.standard_normal(shape).astype(np_dtype)
    info = np.iinfo(np_dtype)
    return rng.integers(info.min, info.max, size=shape, endpoint=True, dtype=np_dtype)


def test_instance_worker_count():
    ensure_runtime_library()
    assert Instance(worker_count=3).worker_count == 3
    assert Instance(worker_count=np.int64(2)).worker_count == 2
    assert Instance().worker_count >= 1
    with pytest.raises(ValueError, match=r"^Instance: worker_count must be 0 \(one worker per core\) "
                                         r"or more, got -1$"):
        Instance(worker_count=-1)
    # beyond uint32: refused, not wrapped to 3 workers
    with pytest.raises(ValueError, match=r"^Instance: worker_count 4294967299 is too large$"):
        Instance(worker_count=2**32 + 3)
    for bad in (True, 1.5, "2", None):
        with pytest.raises(ValueError, match=r"^Instance: worker_count must be an int \(0: one worker"):
            Instance(worker_count=bad)
    # above the runtime's own maximum: the runtime's message
    with pytest.raises(ValueError, match=r"worker_count 5000 is too large: expected at most \d+$"):
        Instance(worker_count=5000)


def test_status_codes_have_names():
    assert CODE_NAMES[CANCELLED] == "CANCELLED" and CODE_NAMES[DEADLINE_EXCEEDED] == "DEADLINE_EXCEEDED"
    assert KilnRuntimeError(DEADLINE_EXCEEDED, "x").code_name == "DEADLINE_EXCEEDED"
    assert KilnRuntimeError(99, "x").code_name == "code 99"


def test_the_library_agrees_with_the_generated_constants():
    """Status names, dtype names and sizes and the worker bound, as the C library has them, are
    the Python constants (both generated from schemas/runtime_constants.toml)."""
    import ctypes

    from kiln.vm import _native
    from kiln.vm._generated import constants

    ensure_runtime_library()
    lib = ctypes.CDLL(_native.runtime_library_path())  # its own handle: restypes set here stay here
    lib.kiln_status_code_name.restype = lib.kiln_dtype_name.restype = ctypes.c_char_p
    lib.kiln_dtype_size.restype = ctypes.c_size_t
    for code, name in constants.STATUS_CODE_NAMES.items():
        assert lib.kiln_status_code_name(code).decode() == name
    assert lib.kiln_status_code_name(len(constants.STATUS_CODE_NAMES)) == b"UNKNOWN"
    for code, name in enumerate(constants.DTYPES):
        assert lib.kiln_dtype_name(code).decode() == name
        assert lib.kiln_dtype_size(code) == constants.DTYPE_SIZES[name] == numpy_dtype(name).itemsize
    assert lib.kiln_dtype_size(len(constants.DTYPES)) == 0
    with pytest.raises(ValueError, match=rf"expected at most {constants.MAX_WORKERS}$"):
        Instance(worker_count=constants.MAX_WORKERS + 1)


def test_dispatch_against_numpy(instance, axpy_bytes, tmp_path):
    path = tmp_path / "axpy.vmfb"
    path.write_bytes(axpy_bytes)
    for module in (Module.from_bytes(instance, axpy_bytes), Module.from_file(instance, path),
                   Module.from_file(instance, str(path))):
        ctx = Context(module)
        x = np.array([10.5, -20, 30, 0.25], np.float32)
        (y,) = ctx.invoke("predict", [x])
        np.testing.assert_array_equal(y, x + 2 * np.array([1, 2, 3, 4], np.float32))
        assert y.dtype == np.float32 and y.shape == (4,)
        # a non-contiguous input is copied into a dense one
        (y2,) = ctx.invoke("predict", [np.arange(8, dtype=np.float32)[::2]])
        np.testing.assert_array_equal(y2, np.arange(8, dtype=np.float32)[::2] + [2, 4, 6, 8])


def test_reflection(instance, axpy_bytes, ident):
    module = Module.from_bytes(instance, axpy_bytes)
    assert module.name == "axpy"
    names = [f.name for f in module.functions]
    assert names == ["predict", "step", "triangle"]
    predict = module.function("predict")
    assert predict.signature == "predict(x: 4xf32) -> (4xf32)"
    assert [(a.name, a.kiln_dtype, a.dtype, a.shape) for a in predict.args] == \
        [("x", "f32", np.dtype(np.float32), (4,))]
    assert predict.results[0].name == "y"
    assert json.loads(predict.arg_tree) == [] and json.loads(predict.result_tree) == []
    assert [(g.name, g.type_str, g.mutable) for g in module.globals] == \
        [("w", "4xf32", False), ("counter", "i64", True)]
    pair = ident.function("pair")
    assert pair.signature == "pair(a: 4xf32, b: i32) -> (i32, 4xf32)"
    assert json.loads(ident.function("ident_f32").arg_tree) == ["x"]
    assert json.loads(ident.function("ident_f32").result_tree) == "y"


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_every_dtype_round_trips(ident, dtype):
    ctx = Context(ident)
    x = sample(dtype)
    (y,) = ctx.invoke(f"ident_{dtype}", [x])
    assert y.dtype == numpy_dtype(dtype) and y.shape == (2, 3)
    np.testing.assert_array_equal(y.view(np.uint8), x.view(np.uint8))


def test_empty_arrays(ident):
    (y,) = Context(ident).invoke("ident_empty", [np.zeros((0, 3), np.float32)])
    assert y.shape == (0, 3) and y.dtype == np.float32


def test_bf16_accepts_raw_uint16_bits(ident):
    bits = np.array([[0x3F80, 0x4000, 0xBF80], [0, 0x7F80, 0x3E80]], np.uint16)
    (y,) = Context(ident).invoke("ident_bf16", [bits])
    np.testing.assert_array_equal(y.view(np.uint16), bits)


def test_several_results_and_scalars(ident):
    a = np.array([1, 2, 3, 4], np.float32)
    b, a2 = Context(ident).invoke("pair", [a, np.int32(-7)])
    assert b.shape == () and b.dtype == np.int32 and int(b) == -7
    np.testing.assert_array_equal(a2, a)
    # Python scalars and lists take the declared dtype
    b, a2 = Context(ident).invoke("pair", [[5, 6, 7, 8], 3])
    assert int(b) == 3 and a2.dtype == np.float32 and a2.tolist() == [5, 6, 7, 8]


def test_globals_state_and_contexts(instance, axpy_bytes, ident):
    module = Module.from_bytes(instance, axpy_bytes)
    a, b = Context(module), Context(module)
    assert [int(a.invoke("step")[0]) for _ in range(3)] == [1, 2, 3]
    assert int(b.invoke("step")[0]) == 1  # contexts do not share state
    assert int(a.get_global("counter")) == 3
    a.set_global("counter", np.int64(41))
    assert int(a.invoke("step")[0]) == 42
    a.set_global("counter", 100)  # a Python int takes the global's dtype
    assert int(a.get_global("counter")) == 100
    np.testing.assert_array_equal(a.get_global("w"), [1, 2, 3, 4])
    a.set_global("w", np.array([0, 0, 0, 1], np.float32))  # immutable: restorable
    np.testing.assert_array_equal(a.invoke("predict", [np.zeros(4, np.float32)])[0], [0, 0, 0, 2])
    np.testing.assert_array_equal(b.get_global("w"), [1, 2, 3, 4])

    ctx = Context(ident)
    values = [sample(d, seed=i + 1) for i, d in enumerate(ALL_DTYPES)]
    assert ctx.invoke("store_all", values) == []
    for d, v, got in zip(ALL_DTYPES, values, ctx.invoke("load_all")):
        np.testing.assert_array_equal(got.view(np.uint8), v.view(np.uint8), err_msg=d)
        np.testing.assert_array_equal(ctx.get_global(f"g_{d}").view(np.uint8), v.view(np.uint8))
    assert set(ctx.globals()) == {*(f"g_{d}" for d in ALL_DTYPES), "frozen"}
    assert float(ctx.get_global("frozen")) == 2.5


@pytest.mark.parametrize("call, code, pattern", [
    (lambda c: c.invoke("nope", []), NOT_FOUND, r"'axpy'.*no exported function 'nope'.*predict"),
    (lambda c: c.invoke("predict", [np.zeros(3, np.float32)]), INVALID_ARGUMENT,
     r"predict.*argument 0 'x'.*4xf32.*got 3xf32"),
    (lambda c: c.invoke("predict", [np.zeros(4, np.float64)]), INVALID_ARGUMENT,
     r"predict.*argument 0 'x'.*4xf32.*got 4xf64"),
    (lambda c: c.invoke("predict", []), INVALID_ARGUMENT, r"predict.*expects 1 argument.*got 0"),
    (lambda c: c.invoke("predict", [np.zeros(4, np.float32)] * 2), INVALID_ARGUMENT,
     r"predict.*expects 1 argument.*got 2"),
    (lambda c: c.invoke("predict", [np.zeros(4, np.longdouble)]), INVALID_ARGUMENT,
     r"predict: argument 0 'x' expects 4xf32, got numpy dtype float128"),
    (lambda c: c.invoke("predict", [np.zeros(4, np.complex64)]), INVALID_ARGUMENT,
     r"predict.*argument 0 'x'.*4xf32.*got 4xc64"),
    (lambda c: c.invoke("predict", [np.zeros(4, np.uint16)]), INVALID_ARGUMENT,
     r"predict: argument 0 'x' expects 4xf32, got 4xu16"),
    (lambda c: c.invoke("predict", [np.zeros(4, np.uint64)]), INVALID_ARGUMENT,
     r"predict: argument 0 'x' expects 4xf32, got 4xu64"),
    (lambda c: c.set_global("w", np.zeros(3, np.float32)), INVALID_ARGUMENT,
     r"'w'.*4xf32.*got 3xf32"),
    (lambda c: c.set_global("nope", np.zeros(3, np.float32)), NOT_FOUND, r"no global 'nope'"),
    (lambda c: c.get_global("nope"), NOT_FOUND, r"no global 'nope'"),
])
def test_errors_name_the_problem(instance, axpy_bytes, call, code, pattern):
    ctx = Context(Module.from_bytes(instance, axpy_bytes))
    with pytest.raises(KilnRuntimeError, match=pattern) as e:
        call(ctx)
    assert e.value.code == code
    # the context is still usable afterwards
    assert ctx.invoke("predict", [np.ones(4, np.float32)])[0].tolist() == [3, 5, 7, 9]


def test_argument_conversion(instance, axpy_bytes, ident):
    """What enters a call or a global: byte order, layout, masks, Python values, objects with __array__."""
    ctx = Context(Module.from_bytes(instance, axpy_bytes))
    want = [3, 5, 7, 9]
    for x in (np.ones(4, ">f4"), np.ones(8, np.float32)[::2], np.broadcast_to(np.float32(1), (4,)),
              [1, 1, 1, 1], [1.0, True, 1, 1.0], (1, 1, 1, 1)):
        assert ctx.invoke("predict", [x])[0].tolist() == want, x
    ctx.set_global("w", np.array([4, 3, 2, 1], ">f4"))
    np.testing.assert_array_equal(ctx.get_global("w"), [4, 3, 2, 1])
    assert ctx.get_global("w").dtype == np.float32

    class Wrapped:  # an object with __array__ keeps its own dtype: no silent cast
        def __init__(self, a):
            self.a = a

        def __array__(self, dtype=None, copy=None):
            return self.a

    assert ctx.invoke("predict", [Wrapped(np.ones(4, np.float32))])[0].tolist() == [9, 7, 5, 3]
    masked = np.ma.masked_array(np.ones(4, np.float32), mask=[0, 1, 0, 0])
    bad = [
        (lambda: ctx.invoke("predict", [Wrapped(np.ones(4))]), r"predict.*'x' expects 4xf32, got 4xf64"),
        (lambda: ctx.invoke("predict", [masked]),
         r"^predict: argument 0 'x' is a numpy masked array: kiln has no masks and would drop the mask; "
         r"pass np.ma.filled\(x, fill_value\) or x.data$"),
        (lambda: ctx.set_global("w", masked), r"^set_global 'w': is a numpy masked array"),
        (lambda: ctx.set_global("counter", 2.5),
         r"^set_global 'counter': expects i64, got Python float 2.5, which i64 cannot hold"),
        (lambda: ctx.set_global("counter", [1.0]), r"expects i64, got Python floats"),
        (lambda: ctx.set_global("counter", 2**70), r"^set_global 'counter': expects i64, got Python int "
                                                   r"1180591620717411303424, out of i64's range$"),
        (lambda: ctx.set_global("counter", [1, -2**63 - 1]), r"got Python ints, out of i64's range$"),
        (lambda: ctx.invoke("predict", [[1, 2, 3]]), r"predict.*'x' expects 4xf32, got 3xf32"),
        (lambda: ctx.invoke("predict", [["a"] * 4]), r"predict.*'x' expects 4xf32, got numpy dtype <U1"),
        (lambda: ctx.invoke("predict", [1j]), r"predict: argument 0 'x' expects 4xf32, got c128$"),
    ]
    for call, pattern in bad:
        with pytest.raises(KilnRuntimeError, match=pattern) as e:
            call()
        assert e.value.code == INVALID_ARGUMENT
    assert int(ctx.get_global("counter")) == 0
    ctx.set_global("counter", True)  # a bool is an integer
    assert int(ctx.get_global("counter")) == 1

    ictx = Context(ident)
    with pytest.raises(KilnRuntimeError, match=r"ident_bool: argument 0 'x' expects 2x3xbool, got Python ints"):
        ictx.invoke("ident_bool", [[[1, 0, 1], [0, 1, 0]]])
    (y,) = ictx.invoke("ident_bool", [[[True, False, True], [False, True, False]]])
    assert y.dtype == np.bool_ and y.tolist() == [[True, False, True], [False, True, False]]
    (y,) = ictx.invoke("ident_bf16", [[[1.5, -2, 0], [0.25, 1, 3]]])  # Python floats into bfloat16
    np.testing.assert_array_equal(y.astype(np.float32), [[1.5, -2, 0], [0.25, 1, 3]])
    # an empty list has no kind to lose: only its shape is wrong here
    with pytest.raises(KilnRuntimeError, match=r"ident_empty: argument 0 'x' expects 0x3xf32, got 0xf32"):
        ictx.invoke("ident_empty", [[]])


def test_bad_modules(instance, axpy_bytes, tmp_path):
    with pytest.raises(KilnRuntimeError) as e:
        Module.from_bytes(instance, b"definitely not a module")
    assert e.value.code == DATA_LOSS
    with pytest.raises(KilnRuntimeError, match="truncated|too short|outside|past") as e:
        Module.from_bytes(instance, axpy_bytes[: len(axpy_bytes) // 2])
    with pytest.raises(KilnRuntimeError, match="missing.vmfb") as e:
        Module.from_file(instance, tmp_path / "missing.vmfb")
    assert e.value.code == NOT_FOUND


def test_closed_objects(instance, axpy_bytes):
    module = Module.from_bytes(instance, axpy_bytes)
    ctx = Context(module)
    ctx.close()
    ctx.close()
    for use in (lambda: ctx.invoke("step"), lambda: ctx.get_global("counter"), ctx.cancel,
                lambda: ctx.set_global("counter", 1), lambda: ctx.set_limits(timeout=1.0)):
        with pytest.raises(ValueError, match="Context is closed"):
            use()
    with Context(module) as c2:
        assert int(c2.invoke("step")[0]) == 1
    module.close()
    with pytest.raises(ValueError, match="Module is closed"):
        Context(module)
    for use in (lambda: module.functions, lambda: module.function("predict"), lambda: module.globals,
                lambda: module.name):
        with pytest.raises(ValueError, match="Module is closed"):
            use()


def test_a_context_outlives_its_closed_module(instance, axpy_bytes):
    """A Context holds its own reference to the C module: closing the Module object leaves it working."""
    module = Module.from_bytes(instance, axpy_bytes)
    warm, cold = Context(module), Context(module)
    assert int(warm.invoke("step")[0]) == 1  # functions looked up before the close
    module.close()
    del module
    import gc
    gc.collect()
    x = np.array([1, 2, 3, 4], np.float32)
    for ctx in (warm, cold):  # and ones looked up after it
        np.testing.assert_array_equal(ctx.invoke("predict", [x])[0], x + [2, 4, 6, 8])
        ctx.set_global("counter", np.int64(10))
        assert int(ctx.invoke("step")[0]) == 11 and int(ctx.get_global("counter")) == 11
        assert set(ctx.globals()) == {"counter", "w"}
        with pytest.raises(KilnRuntimeError, match="no exported function 'nope'"):
            ctx.invoke("nope")
    assert ctx.module.__repr__() == "<closed Module>"
    warm.close()
    cold.close()


def test_limits_and_cancel_on_a_context(instance, axpy_bytes):
    ctx = Context(Module.from_bytes(instance, axpy_bytes))
    x = np.ones(4, np.float32)
    assert ctx.limits == CallLimits()
    ctx.set_limits(max_steps=1)  # predict runs a dispatch and a return
    with pytest.raises(KilnRuntimeError, match="limit of 1 bytecode instructions") as e:
        ctx.invoke("predict", [x])
    assert e.value.code == DEADLINE_EXCEEDED
    ctx.set_limits(timeout=60.0, max_steps=10**6)
    assert ctx.limits == CallLimits(60.0, 10**6)
    assert ctx.invoke("predict", [x])[0].tolist() == [3, 5, 7, 9]
    ctx.set_limits()
    ctx.cancel()  # no call running: nothing happens, later calls are not affected
    assert ctx.invoke("predict", [x])[0].tolist() == [3, 5, 7, 9]
    with pytest.raises(TypeError):
        ctx.set_limits(1.0)  # keywords only


def test_concurrent_contexts(instance, axpy_bytes):
    module = Module.from_bytes(instance, axpy_bytes)
    errors = []

    def worker(seed):
        try:
            ctx = Context(module)
            rng = np.random.default_rng(seed)
            for i in range(200):
                x = rng.standard_normal(4).astype(np.float32)
                (y,) = ctx.invoke("predict", [x])
                np.testing.assert_array_equal(y, x + np.array([2, 4, 6, 8], np.float32))
                assert int(ctx.invoke("step")[0]) == i + 1
        except Exception as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(s,)) for s in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []

    # one context shared by threads: calls are serialized by the binding
    shared = Context(module)
    threads = [threading.Thread(target=lambda: [shared.invoke("step") for _ in range(100)])
               for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert int(shared.get_global("counter")) == 400


def test_library_lookup_prefers_the_environment(monkeypatch, tmp_path):
    from kiln.vm import _native

    monkeypatch.setenv("KILN_RUNTIME_LIB", str(tmp_path / "nope.so"))
    with pytest.raises(_native.NativeArtifactNotFound, match="KILN_RUNTIME_LIB=.*nope.so"):
        _native.runtime_library_path()
    fake = tmp_path / "libkiln_runtime.so"
    fake.write_bytes(b"")
    monkeypatch.setenv("KILN_RUNTIME_LIB", str(fake))
    assert _native.runtime_library_path() == str(fake)
    monkeypatch.setenv("KILN_RUN", str(fake))
    assert _native.kiln_run_path() == str(fake)
    monkeypatch.delenv("KILN_RUN")
    monkeypatch.delenv("KILN_RUNTIME_LIB")
    monkeypatch.setattr(_native, "_NATIVE_DIR", tmp_path / "no_native")
    monkeypatch.setattr(_native, "_prefix_candidates", lambda: [tmp_path / "no_prefix"])
    monkeypatch.setattr(_native, "DEV_BUILD_DIR", tmp_path / "no_build")
    with pytest.raises(_native.NativeArtifactNotFound, match="kiln-run was not found"):
        _native.kiln_run_path()


def test_native_lookup_order(monkeypatch, tmp_path):
    """vm/_native/ (development copies), then the package's installed prefix kiln/_runtime, then
    build/runtime-c; the prefix's include, CMake and pkg-config folders."""
    from kiln.vm import _native

    monkeypatch.delenv("KILN_RUN", raising=False)
    monkeypatch.delenv("KILN_RUNTIME_LIB", raising=False)
    native, prefix, build = tmp_path / "native", tmp_path / "pkg" / "_runtime", tmp_path / "build"
    monkeypatch.setattr(_native, "_NATIVE_DIR", native)
    monkeypatch.setattr(_native, "_prefix_candidates", lambda: [tmp_path / "other" / "_runtime", prefix])
    monkeypatch.setattr(_native, "DEV_BUILD_DIR", build)
    with pytest.raises(_native.NativeArtifactNotFound, match="installed runtime was not found.*other/_runtime"):
        _native.runtime_include_dir()
    places = {"native": (native, native), "prefix": (prefix / "lib", prefix / "bin"), "build": (build, build)}
    for lib_dir, bin_dir in places.values():
        for folder, name in ((lib_dir, _native.LIBRARY_NAME), (bin_dir, _native.KILN_RUN_NAME)):
            folder.mkdir(parents=True, exist_ok=True)
            (folder / name).write_bytes(b"")
    for place, (lib_dir, bin_dir) in places.items():
        assert _native.runtime_library_path() == str(lib_dir / _native.LIBRARY_NAME), place
        assert _native.kiln_run_path() == str(bin_dir / _native.KILN_RUN_NAME), place
        (lib_dir / _native.LIBRARY_NAME).unlink()
        (bin_dir / _native.KILN_RUN_NAME).unlink()
    assert _native.runtime_include_dir() == str(prefix / "include")
    assert _native.runtime_cmake_dir() == str(prefix / "lib" / "cmake" / "kiln")
    assert _native.runtime_pkgconfig_dir() == str(prefix / "lib" / "pkgconfig")


def _host_features() -> str:
    import llvmlite.binding as llvm

    return llvm.get_host_cpu_features().flatten()


def test_kernel_images_for_this_host_load(instance, tmp_path):
    """A kernel image that requires exactly what LLVM reports for this host
    loads and runs; a feature the host lacks (unless it does not gate loading),
    an unknown feature and another architecture are refused with a message
    naming them."""
    kernel = build_kernel(tmp_path)
    features = _host_features()
    spec = axpy_spec(kernel, host_triple())
    spec.kernel_images[0].cpu_features = features
    ctx = Context(Module.from_bytes(instance, serialize(spec)))
    assert ctx.invoke("predict", [np.ones(4, np.float32)])[0].tolist() == [3, 5, 7, 9]

    from kiln.vm._generated.cpu_features import NON_GATING

    missing = [f[1:] for f in features.split(",") if f.startswith("-")]
    non_gating = NON_GATING.get("x86_64" if host_triple().startswith("x86_64") else "aarch64", frozenset())
    for name in missing:
        spec.kernel_images[0].cpu_features = f"+sse2,+{name}"
        if name in non_gating:  # adds no instruction kiln's kernels use: recorded, not required (docs/targets.md)
            Module.from_bytes(instance, serialize(spec))
            continue
        try:
            Module.from_bytes(instance, serialize(spec))
        except KilnRuntimeError as e:
            assert f"'+{name}'" in e.message, e.message
            assert "lacks" in e.message or "unknown" in e.message
        else:
            raise AssertionError(f"+{name} (absent on this host per LLVM) was accepted")
    spec.kernel_images[0].cpu_features = "+sse2,+not-a-cpu-feature"
    with pytest.raises(KilnRuntimeError, match=r"unknown CPU feature '\+not-a-cpu-feature'"):
        Module.from_bytes(instance, serialize(spec))
    other = "aarch64" if host_triple().startswith("x86_64") else "x86_64"
    spec.kernel_images[0].cpu_features = ""
    spec.kernel_images[0].target_triple = f"{other}-unknown-linux-gnu"
    with pytest.raises(KilnRuntimeError, match=f"architecture '{other}'"):
        Module.from_bytes(instance, serialize(spec))


def test_interactive_worker_count_setting():
    import kiln
    import kiln.numpy as knp
    from kiln import runtime_session

    class Work(kiln.Program):
        def f(self, x=kiln.Program.like(np.zeros((256, 512), np.float32))):
            y = knp.tanh(x * 1.5 + 0.25)
            return y @ y.T, knp.sum(y, axis=1)

    x = np.random.default_rng(0).standard_normal((256, 512)).astype(np.float32)
    g = lambda x: knp.exp(x) * 2 - x  # noqa: E731
    results = {}
    try:
        for workers in (1, 3):
            kiln.set_worker_count(workers)
            m = Work()
            jitted = kiln.jit(g)
            results[workers] = (*m.f(x), jitted(x))
            assert runtime_session.default_instance().worker_count == workers
            assert m._kiln_context.module._instance.worker_count == workers
    finally:
        kiln.set_worker_count(0)
    for one, three in zip(results[1], results[3]):
        np.testing.assert_array_equal(one, three)
    np.testing.assert_allclose(results[1][1], np.tanh(x * 1.5 + 0.25).sum(axis=1), rtol=1e-4)
    assert runtime_session.default_instance().worker_count >= 1  # 0 means one per core
    kiln.set_worker_count(2)
    try:
        before = runtime_session.default_instance()
        for bad, pattern in ((-1, r"^set_worker_count: worker_count must be 0 \(one worker per core\) or more, "
                                  r"got -1$"),
                             (2**32 + 1, r"^set_worker_count: worker_count 4294967297 is too large$"),
                             (1.5, r"^set_worker_count: worker_count must be an int"),
                             (5000, r"^set_worker_count: .*worker_count 5000 is too large: expected at most \d+$")):
            with pytest.raises(ValueError, match=pattern):
                kiln.set_worker_count(bad)
            # the setting is unchanged
            assert runtime_session.default_instance() is before and before.worker_count == 2
    finally:
        kiln.set_worker_count(0)
