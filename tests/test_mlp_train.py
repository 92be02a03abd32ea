"""Exporting a training step (examples/mlp_train.py): an MLP and its Adam state as
globals, trained through the C runtime, against an independent numpy
implementation (examples/mlp_train_reference.py: hand-written backprop and
Adam, float64).

200 full-batch steps run four ways, each compared with the same 200 numpy
steps: on the Program instance, on the exported module through the binding,
through kiln-run (stopping after 100 steps, saving every global to .npz,
loading it in a new process and running 100 more gives exactly the 200-step
state), and in runtime-c/examples/train.c (which also checkpoints and
restores into a fresh context in C)."""
import re

import numpy as np
import pytest

from kiln import Program
from kiln.vm.runtime import Context, Instance, Module
from kiln_tools import example
from runtime_tools import native_build_dir, run

STEPS = 200
PARAM_NAMES = ("w1", "b1", "w2", "b2", "w3", "b3")


@pytest.fixture(scope="module")
def ex():
    return example("mlp_train"), example("mlp_train_reference")


@pytest.fixture(scope="module")
def build():
    """The runtime-c build holding kiln-run and kiln-train-example."""
    return native_build_dir()


@pytest.fixture(scope="module")
def reference(ex):
    """The numpy run: final params, the loss before each step, Adam's state."""
    M, R = ex
    params, losses, adam = R.train(M.params, M.example_x, M.example_y, STEPS)
    assert losses[-1] < 0.15 * losses[0]  # the reference itself learns
    return params, losses, adam


@pytest.fixture(scope="module")
def exported(ex, tmp_path_factory):
    """The exported module and the data set as .npy files."""
    M, _ = ex
    d = tmp_path_factory.mktemp("mlp")
    Program.get_compiled_artifact(M.MLPTrain()).save(str(d / "mlp_train.vmfb"))
    np.save(d / "x.npy", M.example_x)
    np.save(d / "y.npy", M.example_y)
    return d


def assert_close(got, want, what, rtol=1e-4):
    """Agreement to `rtol` relative: in norm, and elementwise relative to the array's scale."""
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    assert got.shape == want.shape, what
    scale = np.abs(want).max()
    assert np.linalg.norm(got - want) <= rtol * np.linalg.norm(want), what
    np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol * scale, err_msg=what)


def assert_params_close(got, want, prefix=""):
    for k in PARAM_NAMES:
        assert_close(got[prefix + k], want[k], prefix + k)


def assert_state_close(state, reference):
    """Parameters and Adam state from a dict of global name -> value."""
    params, _, adam = reference
    assert_params_close(state, params, "_params.")
    for k in PARAM_NAMES:
        assert_close(state["_m." + k], adam.m[k], "_m." + k, rtol=1e-3)
        assert_close(state["_v." + k], adam.v[k], "_v." + k, rtol=1e-3)
    assert int(state["_step"]) == STEPS and np.asarray(state["_step"]).dtype == np.int32


def reference_accuracy(ex, params):
    M, R = ex
    probs = R.predict(params, M.example_x.astype(np.float64))
    return np.mean(probs.argmax(axis=1) == M.example_labels)


def test_reference_gradients_match_finite_differences(ex):
    M, R = ex
    rng = np.random.default_rng(5)
    p = {k: v.astype(np.float64) + 0.1 * rng.standard_normal(v.shape) for k, v in M.params.items()}
    x, y = M.example_x[:40].astype(np.float64), M.example_y[:40].astype(np.float64)
    _, g = R.loss_and_grads(p, x, y)
    h = 1e-6
    for k in PARAM_NAMES:
        for idx in [tuple(rng.integers(0, n) for n in p[k].shape) for _ in range(3)]:
            plus, minus = dict(p), dict(p)
            plus[k], minus[k] = p[k].copy(), p[k].copy()
            plus[k][idx] += h
            minus[k][idx] -= h
            fd = (R.loss_and_grads(plus, x, y)[0] - R.loss_and_grads(minus, x, y)[0]) / (2 * h)
            assert abs(fd - g[k][idx]) <= 1e-6 * max(1.0, abs(fd)), (k, idx)


def test_program_instance_trains_like_numpy(ex, reference):
    M, R = ex
    params, ref_losses, _ = reference
    m = M.MLPTrain()
    losses = np.array([float(m.train_step(M.example_x, M.example_y)) for _ in range(STEPS)])
    np.testing.assert_allclose(losses, ref_losses, rtol=1e-4)
    assert losses[-1] < 0.15 * losses[0]  # the loss falls substantially
    assert int(m.step_count()) == STEPS
    trained = m.get_params()
    assert_params_close(trained, params)
    assert float(m.loss(M.example_x, M.example_y)) == pytest.approx(
        R.loss_and_grads(params, M.example_x.astype(np.float64), M.example_y)[0], rel=1e-4)
    np.testing.assert_allclose(m.predict(M.example_x), R.predict(params, M.example_x.astype(np.float64)),
                               rtol=1e-4, atol=1e-5)
    acc = float(m.accuracy(M.example_x, M.example_y))
    assert acc > 0.9 and abs(acc - reference_accuracy(ex, params)) <= 1 / len(M.example_x)

    # set_params replaces the parameters and restarts Adam: the first step
    # from the initial parameters is the reference's first step again.
    m.set_params(M.params)
    assert int(m.step_count()) == 0
    for k in PARAM_NAMES:
        np.testing.assert_array_equal(m.get_params()[k], M.params[k])
    assert float(m.train_step(M.example_x, M.example_y)) == pytest.approx(ref_losses[0], rel=1e-6)
    one, _, _ = R.train(M.params, M.example_x, M.example_y, 1)
    assert_params_close(m.get_params(), one)


def test_exported_module_trains_like_numpy(ex, reference, exported):
    M, _ = ex
    _, ref_losses, _ = reference
    ctx = Context(Module.from_file(Instance(worker_count=2), exported / "mlp_train.vmfb"))
    # the module starts from the initial state, whatever the instance did before export
    np.testing.assert_array_equal(ctx.get_global("_params.w2"), M.params["w2"])
    assert int(ctx.get_global("_step")) == 0
    losses = [float(ctx.invoke("train_step", [M.example_x, M.example_y])[0]) for _ in range(STEPS)]
    np.testing.assert_allclose(losses, ref_losses, rtol=1e-4)
    assert_state_close({name: ctx.get_global(name) for name in ctx.globals()}, reference)


def kiln_run_train(kiln_run, d, *args, check=True):
    return run(kiln_run, f"--module={d / 'mlp_train.vmfb'}", "--function=train_step",
               f"--input=@{d / 'x.npy'}", f"--input=@{d / 'y.npy'}", "--workers=2", *args,
               check=check, cwd=d)


def test_kiln_run_stop_and_resume(ex, reference, exported, build):
    M, R = ex
    d = exported
    kiln_run = build / "kiln-run"
    # 200 steps straight, in one process (a warm-up call would be a training step too)
    kiln_run_train(kiln_run, d, "--benchmark=200", "--warmup=0", "--globals-out=straight.npz")
    # 100 steps, save every global; a new process loads them, 100 more, saves in place
    kiln_run_train(kiln_run, d, "--benchmark=99", "--globals-out=state.npz")  # 1 warm-up + 99 timed
    half = dict(np.load(d / "state.npz"))
    assert int(half["_step"]) == 100
    kiln_run_train(kiln_run, d, "--benchmark=100", "--warmup=0", "--globals-in=state.npz",
                   "--globals-out=state.npz")
    straight, resumed = dict(np.load(d / "straight.npz")), dict(np.load(d / "state.npz"))
    assert sorted(resumed) == sorted(straight) and len(straight) == 19
    for name in straight:
        np.testing.assert_array_equal(resumed[name], straight[name], err_msg=name)
    assert_state_close(resumed, reference)

    # One step per process, the state carried in one file: the printed losses
    # are the reference's first steps.
    run(kiln_run, f"--module={d / 'mlp_train.vmfb'}", "--globals-out=steps.npz", cwd=d)
    printed = []
    for _ in range(4):
        out = kiln_run_train(kiln_run, d, "--globals-in=steps.npz", "--globals-out=steps.npz").stdout
        assert out.startswith("result[0]: f32\n")
        printed.append(float(out.split("\n")[1]))
    np.testing.assert_allclose(printed, reference[1][:4], rtol=1e-4)

    # predict on the resumed state, read back through --output
    run(kiln_run, f"--module={d / 'mlp_train.vmfb'}", "--function=predict", f"--input=@{d / 'x.npy'}",
        "--globals-in=state.npz", f"--output=@{d / 'probs.npy'}", cwd=d)
    np.testing.assert_allclose(np.load(d / "probs.npy"),
                               R.predict(reference[0], M.example_x.astype(np.float64)),
                               rtol=1e-4, atol=1e-5)


def test_kiln_run_globals_errors(exported, build):
    d = exported
    kiln_run = build / "kiln-run"
    run(kiln_run, f"--module={d / 'mlp_train.vmfb'}", "--globals-out=good.npz", cwd=d)
    good = dict(np.load(d / "good.npz"))
    lacking = {k: v for k, v in good.items() if k != "_v.w2"}
    np.savez(d / "lacking.npz", **lacking)
    np.savez(d / "wrong_shape.npz", **{**good, "_params.w1": np.zeros((3, 16), np.float32)})
    np.savez(d / "wrong_dtype.npz", **{**good, "_step": np.int64(3)})
    np.savez(d / "unknown.npz", **{**good, "_params.w4": np.zeros(3, np.float32)})
    cases = [
        ("missing.npz", ["missing.npz", "No such file"]),
        ("lacking.npz", ["lacking.npz' lacks 1 of the 19 globals of module 'mlp_train': '_v.w2'",
                         "--globals-partial"]),
        ("wrong_shape.npz", ["global '_params.w1'", "expected 2x16xf32, got 3x16xf32"]),
        ("wrong_dtype.npz", ["global '_step'", "expected i32, got i64"]),
        ("unknown.npz", ["module 'mlp_train' has no global '_params.w4'"]),
    ]
    for name, fragments in cases:
        before = (d / name).read_bytes() if (d / name).exists() else None
        proc = kiln_run_train(kiln_run, d, f"--globals-in={name}", f"--globals-out={name}",
                              check=False)
        assert proc.returncode == 1 and proc.stdout == "", name
        lines = proc.stderr.splitlines()
        assert len(lines) == 1 and lines[0].startswith("kiln-run: error: "), proc.stderr
        for fragment in fragments:
            assert fragment in lines[0], (name, lines[0])
        # a failed load runs nothing and overwrites nothing
        after = (d / name).read_bytes() if (d / name).exists() else None
        assert after == before, name
    # --globals-partial takes the subset; the missing global keeps its initial value
    kiln_run_train(kiln_run, d, "--globals-in=lacking.npz", "--globals-partial",
                   "--globals-out=partial_out.npz")
    assert int(np.load(d / "partial_out.npz")["_step"]) == 1


def test_train_c_example(ex, reference, exported, build):
    M, _ = ex
    params, ref_losses, _ = reference
    d = exported
    exe = build / "kiln-train-example"
    out = run(exe, str(d / "mlp_train.vmfb"), str(d / "x.npy"), str(d / "y.npy"), str(STEPS),
              str(d / "c_checkpoint.npz"), cwd=d).stdout
    losses = [float(v) for v in re.findall(r"^step \d+ loss (\S+)$", out, flags=re.M)]
    assert len(losses) == STEPS
    np.testing.assert_allclose(losses, ref_losses, rtol=1e-4)
    assert losses[-1] < 0.15 * losses[0]
    correct, n = map(int, re.search(r"^accuracy \S+ \((\d+)/(\d+)\)$", out, flags=re.M).groups())
    assert n == len(M.example_x) and correct / n > 0.9
    assert abs(correct / n - reference_accuracy(ex, params)) <= 1 / n
    assert "checkpoint: 19 globals written to" in out
    assert "restored: 19 globals into a fresh context" in out
    assert "restored predictions identical: yes (900 values)" in out
    assert re.search(r"^resumed step identical: yes", out, flags=re.M)
    # the checkpoint is a numpy .npz holding the trained state
    assert_state_close(dict(np.load(d / "c_checkpoint.npz")), reference)

    # errors: one line on stderr, exit status 1
    proc = run(exe, str(d / "mlp_train.vmfb"), str(d / "x.npy"), str(d / "nope.npy"), check=False)
    assert proc.returncode == 1 and "nope.npy" in proc.stderr
    proc = run(exe, str(d / "x.npy"), str(d / "x.npy"), str(d / "y.npy"), check=False)
    assert proc.returncode == 1 and "loading the module" in proc.stderr
