"""Program semantics: globals and aliasing, stores, state across calls, IR text, export round trips."""
from collections import namedtuple

import numpy as np
import pytest

import kiln.numpy as knp
from kiln import Program, TracingError
from kiln.vm.runtime import KilnRuntimeError

from kiln_tools import run_kiln_run

Params = namedtuple("Params", "w b")


def _params():
    return Params(w=np.arange(12, dtype=np.float32).reshape(3, 4) / 10, b=np.full((4,), 0.5, np.float32))


def _make_program():
    params = _params()

    class Model(Program, export_name="model"):
        _params = params
        _w = params.w
        _count = Program.export_global(np.int32(0), mutable=True)
        _frozen = Program.export_global(np.float32(3.0), mutable=False)
        _scratch = Program.export_global(np.ones((2,), np.float32), initialize=False)

        def predict(self, x=Program.like(np.zeros((2, 3), np.float32))):
            self._count = self._count + 1
            return self._affine(x, self._params.w, self._params.b)

        def update(self, new_params=Program.like(params)):
            self._params = new_params

        def scale_w_through_alias(self, s=Program.like(np.float32(0))):
            self._w = self._w * s

        def store_explicit(self, v=Program.like(np.zeros((4,), np.float32))):
            Program.store_global(self._params.b, v)

        def state(self):
            return {"count": self._count, "frozen": self._frozen, "scratch": self._scratch, "w": self._params.w}

        @Program.kernel
        def _affine(x, w, b):
            return knp.tanh(x @ w + b)

    return Model, params


def test_interactive_calls_keep_state():
    Model, params = _make_program()
    m = Model()
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    expected = np.tanh(x @ params.w + params.b)
    np.testing.assert_allclose(m.predict(x), expected, rtol=1e-5)
    m.predict(x)
    state = m.state()
    assert state["count"] == 2 and state["count"].dtype == np.int32
    assert state["frozen"] == np.float32(3.0)
    np.testing.assert_array_equal(state["scratch"], np.zeros(2, np.float32))  # initialize=False gives zeros


def test_store_through_alias_is_seen_through_the_tree():
    Model, params = _make_program()
    m = Model()
    m.scale_w_through_alias(np.float32(2))
    np.testing.assert_allclose(m.state()["w"], params.w * 2)
    x = np.ones((2, 3), np.float32)
    np.testing.assert_allclose(m.predict(x), np.tanh(x @ (params.w * 2) + params.b), rtol=1e-5)


def test_tree_store_and_store_global():
    Model, params = _make_program()
    m = Model()
    new = Params(w=np.ones((3, 4), np.float32), b=np.zeros((4,), np.float32))
    m.update(new)
    x = np.ones((2, 3), np.float32)
    np.testing.assert_allclose(m.predict(x), np.tanh(x @ new.w), rtol=1e-5)
    m.store_explicit(np.full((4,), 2.0, np.float32))
    np.testing.assert_allclose(m.predict(x), np.tanh(x @ new.w + 2.0), rtol=1e-5)


def test_contexts_are_independent():
    Model, _ = _make_program()
    a, b = Model(), Model()
    a.predict(np.zeros((2, 3), np.float32))
    assert a.state()["count"] == 1 and b.state()["count"] == 0


def test_global_attributes_read_and_write_from_python():
    Model, params = _make_program()
    m = Model()
    np.testing.assert_array_equal(m._params.w, params.w)
    m._params = Params(w=np.zeros((3, 4), np.float32), b=np.ones((4,), np.float32))
    np.testing.assert_allclose(m.predict(np.ones((2, 3), np.float32)), np.tanh(np.ones((2, 4))), rtol=1e-6)


def test_get_ir_shows_globals_functions_and_kernels():
    Model, _ = _make_program()
    text = Program.get_ir(Model())
    assert text.startswith("program model {")
    assert "global @_params.w: f32[3,4] mutable initialized" in text
    assert "global @_frozen: f32[] immutable initialized" in text
    assert "func predict(%0: f32[2,3]) -> f32[2,4] {" in text
    assert "kernel_call[name='affine']" in text and "global_store @_count" in text
    assert "func update(%0: f32[3,4], %1: f32[4]) -> () {" in text


def test_wrong_argument_shape_dtype_and_count_from_python():
    Model, _ = _make_program()
    m = Model()
    with pytest.raises(KilnRuntimeError, match=r"predict.*argument 0 'x'.*2x3xf32.*2x4xf32"):
        m.predict(np.zeros((2, 4), np.float32))
    with pytest.raises(KilnRuntimeError, match=r"predict.*'x'.*f32.*i32"):
        m.predict(np.zeros((2, 3), np.int32).view(np.int32))
    x = np.zeros((2, 3), np.float32)
    with pytest.raises(TypeError, match=r"^predict takes 1 argument \(x: 2x3xf32\), got 2$"):
        m.predict(x, x)
    with pytest.raises(TypeError, match=r"^predict takes 1 argument \(x: 2x3xf32\), got 0$"):
        m.predict()
    with pytest.raises(TypeError, match=r"^predict got an unexpected keyword argument 'y'; "
                                        r"it takes 1 argument \(x: 2x3xf32\)$"):
        m.predict(y=x)
    with pytest.raises(TypeError, match=r"^predict got multiple values for argument 'x'"):
        m.predict(x, x=x)
    with pytest.raises(TypeError, match=r"^state takes no arguments, got 1$"):
        m.state(x)
    with pytest.raises(TypeError, match=r"^update takes 1 argument \(new_params: Params\(w=3x4xf32, b=4xf32\)\), "
                                        r"got 2$"):
        m.update(x, x)
    np.testing.assert_array_equal(m.predict(x=x), m.predict(x))  # by keyword is fine


def test_store_to_immutable_global_is_a_tracing_error():
    class Bad(Program):
        _c = Program.export_global(np.float32(1), mutable=False)

        def poke(self):
            self._c = self._c + 1

    with pytest.raises(TracingError, match="_c.*mutable=False"):
        Bad()


def test_missing_signature_is_a_tracing_error():
    class NoLike(Program):
        def f(self, x):
            return x

    with pytest.raises(TracingError, match=r"argument 'x' has no declared type"):
        NoLike()


def test_export_is_deterministic_and_runs_in_kiln_run(tmp_path):
    Model, params = _make_program()
    first = Program.get_compiled_artifact(Model).bytes
    Model2, _ = _make_program()
    assert Program.get_compiled_artifact(Model2).bytes == first
    path = tmp_path / "model.vmfb"
    Program.get_compiled_artifact(Model).save(path)
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.save(tmp_path / "x.npy", x)
    run_kiln_run(f"--module={path}", "--function=predict", f"--input=@{tmp_path / 'x.npy'}",
                 f"--output=@{tmp_path / 'y.npy'}")
    np.testing.assert_allclose(np.load(tmp_path / "y.npy"), np.tanh(x @ params.w + params.b), rtol=1e-5)


def test_kiln_run_reports_bad_input(tmp_path):
    Model, _ = _make_program()
    path = tmp_path / "model.vmfb"
    Program.get_compiled_artifact(Model).save(path)
    bad_shape = run_kiln_run(f"--module={path}", "--function=predict", "--input=2x4xf32=1", check=False)
    assert bad_shape.returncode != 0
    assert "predict" in bad_shape.stderr and "2x3xf32" in bad_shape.stderr and "2x4xf32" in bad_shape.stderr
    unknown = run_kiln_run(f"--module={path}", "--function=nope", check=False)
    assert unknown.returncode != 0 and "nope" in unknown.stderr
    too_few = run_kiln_run(f"--module={path}", "--function=predict", check=False)
    assert too_few.returncode != 0 and "predict" in too_few.stderr


def test_store_inside_a_loop_body_is_a_tracing_error():
    from kiln import lax

    class LoopStore(Program):
        _x = np.float32(0)

        def bump(self):
            def body(i, c):
                self._x = c
                return c + 1.0
            return lax.fori_loop(0, 3, body, np.float32(0))

    with pytest.raises(TracingError, match="only be stored at the top level"):
        LoopStore()


def test_globals_read_inside_loop_bodies_and_kernels():
    from kiln import lax

    class LoopRead(Program):
        _scale = np.float32(2)

        def run(self, x=Program.like(np.zeros((3,), np.float32))):
            return lax.fori_loop(0, 3, lambda i, c: c * self._scale, x)

    m = LoopRead()
    np.testing.assert_allclose(m.run(np.ones(3, np.float32)), np.full(3, 8.0))


def test_argument_conversion_from_python():
    """Big-endian and strided arrays run as native ones; masked arrays, numpy values of another dtype and
    Python values that would change kind are refused, naming the function and argument."""
    Model, params = _make_program()
    m = Model()
    x = np.arange(6, dtype=np.float32).reshape(2, 3) / 6
    expected = m.predict(x)
    for same in (x.astype(">f4"), np.asfortranarray(x), np.repeat(x, 2, axis=1)[:, ::2], x.tolist()):
        np.testing.assert_array_equal(m.predict(same), expected)
    m.update(Params(w=params.w.astype(">f4"), b=params.b.tolist()))  # a tree of leaves converts leaf by leaf
    np.testing.assert_array_equal(m.predict(x), expected)
    m.scale_w_through_alias(2)  # a Python int takes the declared float32
    np.testing.assert_allclose(m.state()["w"], params.w * 2)
    masked = np.ma.masked_array(x, mask=np.eye(2, 3, dtype=bool))
    bad = [
        (lambda: m.predict(masked), r"^predict: argument 0 'x' is a numpy masked array: kiln has no masks"),
        (lambda: m.update(Params(w=params.w, b=np.ma.masked_array(params.b))),
         r"^update: argument 1 'new_params.b' is a numpy masked array"),
        (lambda: m.scale_w_through_alias(np.float64(2)), r"scale_w_through_alias: argument 0 's' expects f32, got f64"),
        (lambda: m.predict(np.zeros((2, 3))), r"predict: argument 0 'x' expects 2x3xf32, got 2x3xf64"),
        (lambda: m.predict([[1, 2, 3]]), r"predict: argument 0 'x' expects 2x3xf32, got 1x3xf32"),
    ]
    for call, pattern in bad:
        with pytest.raises(KilnRuntimeError, match=pattern):
            call()
    # a global set from Python goes through the same conversion
    with pytest.raises(KilnRuntimeError, match=r"set_global '_count': expects i32, got Python float 1.5"):
        m._count = 1.5
    with pytest.raises(KilnRuntimeError, match=r"set_global '_scratch': is a numpy masked array"):
        m._scratch = np.ma.masked_array(np.ones(2, np.float32))
    m._count = np.array(5, ">i4")
    assert int(m._count) == 5 and m._count.dtype == np.int32
