"""Exporting a Program instance with its current globals, and checkpoints in kiln-run's .npz format:
Program.get_compiled_artifact(m, globals="current"), Program.save_globals and Program.load_globals,
checked against numpy and against kiln-run's --globals-in/--globals-out in both directions."""
import io
import zipfile

import ml_dtypes
import numpy as np
import pytest

import kiln.numpy as knp
from kiln import Program
from kiln.vm.runtime import Context, Instance, Module
from kiln_tools import example, run_kiln_run

BF16 = np.dtype(ml_dtypes.bfloat16)
X = np.array([0.5, -1.0, 2.0], np.float32)
SCALE = np.float64(1.5)


class Mixed(Program, export_name="mixed"):
    """A global of every kind a checkpoint carries: a tree, bf16, f16, complex, bool, uint8 (wrapping),
    a zero-initialized counter and an immutable float64."""

    _params = {"w": np.array([1.0, 2.0, 3.0], np.float32), "h": np.full((2, 2), 1.5, BF16)}
    _c = np.array([1 + 2j, -0.5j], np.complex64)
    _flags = np.array([True, False, True])
    _bytes = np.array([250, 1, 2, 3], np.uint8)
    _half = np.float16(0.25)
    _count = Program.export_global(np.int32(7), initialize=False)
    _scale = Program.export_global(SCALE, mutable=False)

    def step(self, x=Program.like(X)):
        w = self._params["w"] * 2 + x
        self._params = {"w": w, "h": self._params["h"] + 1}
        self._c = self._c * np.complex64(1 + 1j)
        self._flags = ~self._flags
        self._bytes = self._bytes + np.uint8(3)
        self._half = self._half + np.float16(0.5)
        self._count = self._count + 1
        return knp.astype(w, np.float64) * self._scale


INITIAL = {"_params.h": np.full((2, 2), 1.5, BF16), "_params.w": np.array([1.0, 2.0, 3.0], np.float32),
           "_c": np.array([1 + 2j, -0.5j], np.complex64), "_flags": np.array([True, False, True]),
           "_bytes": np.array([250, 1, 2, 3], np.uint8), "_half": np.array(0.25, np.float16),
           "_count": np.array(0, np.int32), "_scale": np.array(SCALE)}


def numpy_steps(state, n):
    """Mixed.step n times in numpy: the globals after, and the last result."""
    s = {k: np.array(v) for k, v in state.items()}
    for _ in range(n):
        s["_params.w"] = s["_params.w"] * np.float32(2) + X
        s["_params.h"] = (s["_params.h"].astype(np.float32) + 1).astype(BF16)
        s["_c"] = s["_c"] * np.complex64(1 + 1j)
        s["_flags"] = ~s["_flags"]
        s["_bytes"] = s["_bytes"] + np.uint8(3)
        s["_half"] = s["_half"] + np.float16(0.5)
        s["_count"] = s["_count"] + np.int32(1)
    return s, s["_params.w"].astype(np.float64) * SCALE


def assert_state(got: dict, want: dict):
    """Every global, bit for bit (a bf16 entry of a .npz holds its uint16 bits)."""
    assert sorted(got) == sorted(want)
    for name, w in want.items():
        g = np.asarray(got[name])
        if w.dtype == BF16 and g.dtype == np.uint16:
            g = g.view(BF16)
        assert g.dtype == w.dtype and g.shape == w.shape, (name, g.dtype, g.shape, w.dtype, w.shape)
        np.testing.assert_array_equal(g.reshape(-1).view(np.uint8), w.reshape(-1).view(np.uint8), err_msg=name)


def globals_of(m) -> dict:
    return Program.get_context(m).globals()


def entries(path) -> list[tuple[str, bytes]]:
    """The archive's entries in order: name and .npy bytes."""
    with zipfile.ZipFile(path) as z:
        return [(info.filename, z.read(info)) for info in z.infolist()]


@pytest.fixture(scope="module")
def initial_module(tmp_path_factory):
    path = tmp_path_factory.mktemp("mixed") / "initial.vmfb"
    Program.get_compiled_artifact(Mixed).save(path)
    return path


def test_numpy_reference_matches_the_instance():
    m = Mixed()
    assert_state(globals_of(m), INITIAL)
    for n in range(1, 4):
        y = m.step(X)
        want, want_y = numpy_steps(INITIAL, n)
        assert_state(globals_of(m), want)
        np.testing.assert_array_equal(y, want_y)


def test_export_current_globals_runs_in_kiln_run(tmp_path):
    m = Mixed()
    for _ in range(3):
        m.step(X)
    trained, _ = numpy_steps(INITIAL, 3)
    Program.get_compiled_artifact(m, globals="current").save(tmp_path / "trained.vmfb")
    Program.get_compiled_artifact(m).save(tmp_path / "default.vmfb")
    # the module starts from the instance's state: kiln-run saves it untouched, then steps on from it
    run_kiln_run(f"--module={tmp_path / 'trained.vmfb'}", f"--globals-out={tmp_path / 'start.npz'}")
    assert_state(dict(np.load(tmp_path / "start.npz")), trained)
    np.save(tmp_path / "x.npy", X)
    run_kiln_run(f"--module={tmp_path / 'trained.vmfb'}", "--function=step", f"--input=@{tmp_path / 'x.npy'}",
                 f"--output=@{tmp_path / 'y.npy'}", f"--globals-out={tmp_path / 'after.npz'}")
    want, want_y = numpy_steps(INITIAL, 4)
    assert_state(dict(np.load(tmp_path / "after.npz")), want)
    np.testing.assert_array_equal(np.load(tmp_path / "y.npy"), want_y)
    np.testing.assert_array_equal(m.step(X), want_y)
    # the default (and globals="initial") writes the class's declared values, however far m trained
    run_kiln_run(f"--module={tmp_path / 'default.vmfb'}", f"--globals-out={tmp_path / 'default.npz'}")
    assert_state(dict(np.load(tmp_path / "default.npz")), INITIAL)
    assert Program.get_compiled_artifact(m, globals="initial").bytes == (tmp_path / "default.vmfb").read_bytes()
    # through the binding as well: a fresh context of the exported module holds the trained state
    ctx = Context(Module.from_file(Instance(worker_count=1), tmp_path / "trained.vmfb"))
    assert_state(ctx.globals(), trained)
    # only the data changed: the same globals (names, types, mutability) and functions
    default = Module.from_file(Instance(worker_count=1), tmp_path / "default.vmfb")
    assert ctx.module.globals == default.globals and [g.mutable for g in default.globals].count(False) == 1
    assert ctx.module.functions == default.functions


def test_save_globals_is_kiln_runs_format(tmp_path, initial_module):
    m = Mixed()
    for _ in range(2):
        m.step(X)
    Program.save_globals(m, tmp_path / "py.npz")
    assert_state(dict(np.load(tmp_path / "py.npz")), numpy_steps(INITIAL, 2)[0])
    # kiln-run reads it, and writes back the same entries: names, order, .npy bytes (bf16 as '<u2' bits)
    run_kiln_run(f"--module={initial_module}", f"--globals-in={tmp_path / 'py.npz'}",
                 f"--globals-out={tmp_path / 'c.npz'}")
    assert entries(tmp_path / "py.npz") == entries(tmp_path / "c.npz")
    names = [n for n, _ in entries(tmp_path / "py.npz")]
    assert names == [g.name + ".npy" for g in Program.get_context(m).module.globals]
    assert np.load(tmp_path / "py.npz")["_params.h"].dtype == np.dtype("<u2")
    with zipfile.ZipFile(tmp_path / "py.npz") as z:
        assert all(i.compress_type == zipfile.ZIP_STORED for i in z.infolist())
    # the same state saves to the same bytes
    Program.save_globals(m, tmp_path / "again.npz")
    assert (tmp_path / "again.npz").read_bytes() == (tmp_path / "py.npz").read_bytes()


def test_round_trip_python_kiln_run_python(tmp_path, initial_module):
    # Python -> kiln-run: two steps here, one there
    m = Mixed()
    m.step(X)
    m.step(X)
    Program.save_globals(m, tmp_path / "state.npz")
    np.save(tmp_path / "x.npy", X)
    run_kiln_run(f"--module={initial_module}", "--function=step", f"--input=@{tmp_path / 'x.npy'}",
                 f"--globals-in={tmp_path / 'state.npz'}", f"--globals-out={tmp_path / 'state.npz'}")
    # kiln-run -> Python: a fresh instance resumes from the file, one more step
    resumed = Mixed()
    Program.load_globals(resumed, tmp_path / "state.npz")
    want, _ = numpy_steps(INITIAL, 3)
    assert_state(globals_of(resumed), want)
    want, want_y = numpy_steps(INITIAL, 4)
    np.testing.assert_array_equal(resumed.step(X), want_y)
    assert_state(globals_of(resumed), want)
    # and the instance that never left Python agrees
    m.step(X)
    m.step(X)
    assert_state(globals_of(m), want)


def test_load_globals_bf16_as_numpy_saves_it(tmp_path):
    """A bf16 global reads from uint16 bits (kiln-run's writing) and from ml_dtypes' void V2 (numpy.savez of
    an ml_dtypes.bfloat16 array), as kiln-run reads them."""
    h = np.array([[0.5, -2.0], [3.0, 1e-3]], BF16)
    for name, stored in (("bits", h.view(np.uint16)), ("v2", h)):
        np.savez(tmp_path / f"{name}.npz", **{**INITIAL, "_params.h": stored})
        m = Mixed()
        Program.load_globals(m, tmp_path / f"{name}.npz")
        assert_state(globals_of(m), {**INITIAL, "_params.h": h})
        # kiln-run reads the same file to the same state
        run_kiln_run(f"--module={_module(tmp_path)}", f"--globals-in={tmp_path / f'{name}.npz'}",
                     f"--globals-out={tmp_path / f'{name}_out.npz'}")
        assert_state(dict(np.load(tmp_path / f"{name}_out.npz")), {**INITIAL, "_params.h": h})


def _module(tmp_path):
    path = tmp_path / "m.vmfb"
    if not path.exists():
        Program.get_compiled_artifact(Mixed).save(path)
    return path


def test_load_globals_byte_order_and_layout(tmp_path):
    """Big-endian and Fortran-ordered entries are values like any other (kiln-run swaps bytes too)."""
    w = np.array([4.0, 5.0, 6.0], ">f4")
    h = np.asfortranarray(np.array([[1, 2], [3, 4]], np.float32).astype(BF16))
    np.savez(tmp_path / "s.npz", **{**INITIAL, "_params.w": w, "_params.h": h})
    m = Mixed()
    Program.load_globals(m, tmp_path / "s.npz")
    assert_state(globals_of(m), {**INITIAL, "_params.w": w.astype(np.float32), "_params.h": np.ascontiguousarray(h)})


def test_load_globals_partial(tmp_path):
    m = Mixed()
    m.step(X)
    np.savez(tmp_path / "part.npz", _count=np.int32(41), _flags=np.array([False, False, True]))
    Program.load_globals(m, tmp_path / "part.npz", partial=True)
    want, _ = numpy_steps(INITIAL, 1)
    assert_state(globals_of(m), {**want, "_count": np.array(41, np.int32), "_flags": np.array([False, False, True])})


def _assert_untouched(m, before):
    assert_state(globals_of(m), before)


@pytest.mark.parametrize("make, fragments", [
    (lambda d: {**INITIAL, "_params.w4": np.zeros(3, np.float32)},
     ["module 'mixed' has no global '_params.w4'"]),
    (lambda d: {**INITIAL, "_params.w": np.zeros((3, 1), np.float32)},
     ["global '_params.w': expected 3xf32, got 3x1xf32"]),
    (lambda d: {**INITIAL, "_count": np.int64(3)}, ["global '_count': expected i32, got i64"]),
    (lambda d: {**INITIAL, "_params.h": np.zeros((2, 2), np.float32)},
     ["global '_params.h': expected 2x2xbf16, got 2x2xf32"]),
    (lambda d: {**INITIAL, "_half": np.uint16(3)}, ["global '_half': expected f16, got u16"]),
    (lambda d: {**INITIAL, "_scale": np.array("1.5")}, ["global '_scale': expected f64, got numpy <U3"]),
    (lambda d: {**INITIAL, "_c": np.array([1, None], object)}, ["global '_c': unreadable entry", "allow_pickle"]),
    (lambda d: {k: v for k, v in INITIAL.items() if k not in ("_c", "_half")},
     ["lacks 2 of the 8 globals of module 'mixed': '_c', '_half'", "partial=True"]),
])
def test_load_globals_errors(tmp_path, make, fragments):
    m = Mixed()
    m.step(X)
    before = globals_of(m)
    path = tmp_path / "bad.npz"
    # valid entries first, so a late error proves nothing was set before the checks finished
    np.savez(path, **{k: v for k, v in make(tmp_path).items()})
    with pytest.raises(ValueError) as e:
        Program.load_globals(m, path)
    message = str(e.value)
    assert message.startswith(f"Program.load_globals: '{path}'"), message
    for fragment in fragments:
        assert fragment in message, message
    _assert_untouched(m, before)


def test_load_globals_lists_at_most_eight_missing(tmp_path):
    class Many(Program, export_name="many"):
        _g = [np.float32(i) for i in range(11)]

        def total(self):
            return sum(self._g)

    m = Many()
    np.savez(tmp_path / "one.npz", **{"_g.0": np.float32(5)})
    with pytest.raises(ValueError, match=r"lacks 10 of the 11 globals of module 'many': '_g.1', '_g.2', '_g.3', "
                                         r"'_g.4', '_g.5', '_g.6', '_g.7', '_g.8', \.\.\. \(give every global"):
        Program.load_globals(m, tmp_path / "one.npz")
    Program.load_globals(m, tmp_path / "one.npz", partial=True)
    assert float(m.total()) == 5 + sum(range(1, 11))


def test_load_globals_file_errors(tmp_path):
    m = Mixed()
    with pytest.raises(FileNotFoundError, match=r"Program.load_globals: no such file '.*missing.npz'"):
        Program.load_globals(m, tmp_path / "missing.npz")
    np.save(tmp_path / "one.npy", X)
    with pytest.raises(ValueError, match=r"'.*one.npy' is a single .npy array, not a .npz archive of globals"):
        Program.load_globals(m, tmp_path / "one.npy")
    (tmp_path / "junk.npz").write_bytes(b"PK\x03\x04 not really a zip")
    with pytest.raises(ValueError, match=r"Program.load_globals: '.*junk.npz' is not a .npz archive \("):
        Program.load_globals(m, tmp_path / "junk.npz")
    np.savez(tmp_path / "raw.npz", **{k: v for k, v in INITIAL.items() if k != "_c"})
    with zipfile.ZipFile(tmp_path / "raw.npz", "a") as z:
        z.writestr("_c", b"not an array")  # a member without .npy: numpy gives its bytes
    with pytest.raises(ValueError, match=r"'.*raw.npz': global '_c': the entry is not a .npy array"):
        Program.load_globals(m, tmp_path / "raw.npz")
    assert_state(globals_of(m), INITIAL)


def test_save_globals_errors(tmp_path):
    m = Mixed()
    target = tmp_path / "no_such_dir" / "state.npz"
    with pytest.raises(OSError, match=r"Program.save_globals: cannot write '.*no_such_dir/state.npz'"):
        Program.save_globals(m, target)
    # a save that fails leaves no file behind
    (tmp_path / "dir.npz").mkdir()
    with pytest.raises(OSError, match=r"Program.save_globals: cannot write '.*dir.npz'"):
        Program.save_globals(m, tmp_path / "dir.npz")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dir.npz"]


def test_class_and_argument_errors():
    for fn in (Program.save_globals, Program.load_globals):
        where = fn.__name__
        with pytest.raises(TypeError, match=rf"Program.{where}: expected a Program instance, got type "
                                            r"\(the class Mixed\)"):
            fn(Mixed, "state.npz")
        with pytest.raises(TypeError, match=rf"Program.{where}: expected a Program instance, got str"):
            fn("m", "state.npz")
    with pytest.raises(TypeError, match=r"Program.get_compiled_artifact: globals='current' needs a Program "
                                        r"instance; got the class Mixed, which has only its initial values"):
        Program.get_compiled_artifact(Mixed, globals="current")
    with pytest.raises(ValueError, match=r"Program.get_compiled_artifact: globals must be 'initial' or "
                                         r"'current', got 'trained'"):
        Program.get_compiled_artifact(Mixed(), globals="trained")
    with pytest.raises(TypeError, match=r"Program.get_compiled_artifact: expected a Program subclass or "
                                        r"instance, got int"):
        Program.get_compiled_artifact(3)
    with pytest.raises(TypeError, match=r"expected a Program subclass or instance, got type"):
        Program.get_compiled_artifact(Program)


def test_trained_mlp_exports_and_resumes_in_kiln_run(tmp_path):
    """The README's workflow on examples/mlp_train.py: train in Python, export the trained module and save a
    checkpoint; kiln-run continues from either exactly as the Python instance does."""
    M = example("mlp_train")
    m = M.MLPTrain()
    losses = [float(m.train_step(M.example_x, M.example_y)) for _ in range(5)]
    assert losses[-1] < losses[0]
    Program.get_compiled_artifact(m, globals="current").save(tmp_path / "trained.vmfb")
    Program.save_globals(m, tmp_path / "state.npz")
    np.save(tmp_path / "x.npy", M.example_x)
    np.save(tmp_path / "y.npy", M.example_y)
    step = ["--function=train_step", f"--input=@{tmp_path / 'x.npy'}", f"--input=@{tmp_path / 'y.npy'}"]
    # the trained module, with no checkpoint
    out = run_kiln_run(f"--module={tmp_path / 'trained.vmfb'}", *step, f"--globals-out={tmp_path / 'a.npz'}")
    # a module of initial values, resumed from the checkpoint
    Program.get_compiled_artifact(M.MLPTrain).save(tmp_path / "initial.vmfb")
    run_kiln_run(f"--module={tmp_path / 'initial.vmfb'}", *step, f"--globals-in={tmp_path / 'state.npz'}",
                 f"--globals-out={tmp_path / 'b.npz'}")
    loss6 = float(m.train_step(M.example_x, M.example_y))
    assert float(out.stdout.split("\n")[1]) == pytest.approx(loss6, rel=1e-6)
    a, b = dict(np.load(tmp_path / "a.npz")), dict(np.load(tmp_path / "b.npz"))
    assert_state(a, b)  # the same state, whichever way kiln-run started from it
    want = globals_of(m)
    assert sorted(a) == sorted(want) and int(a["_step"]) == int(want["_step"]) == 6
    for name, w in want.items():
        np.testing.assert_allclose(a[name], w, rtol=1e-6, atol=1e-7, err_msg=name)


def test_save_load_preserve_bytes_of_a_written_npz(tmp_path):
    """What load reads back, save writes again unchanged: a checkpoint passes through Python losslessly."""
    m = Mixed()
    for _ in range(5):
        m.step(X)
    Program.save_globals(m, tmp_path / "a.npz")
    other = Mixed()
    Program.load_globals(other, tmp_path / "a.npz")
    Program.save_globals(other, tmp_path / "b.npz")
    assert (tmp_path / "a.npz").read_bytes() == (tmp_path / "b.npz").read_bytes()
    buf = io.BytesIO((tmp_path / "a.npz").read_bytes())
    assert zipfile.ZipFile(buf).testzip() is None
