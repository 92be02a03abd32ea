"""Helpers shared by test modules: running the native kiln-run and the kiln CLI, random arrays of any
dtype, and checking kiln's results against numpy's (eagerly and under kiln.jit)."""
import os
import subprocess
import sys

import ml_dtypes
import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def example(name: str):
    """The module examples/<name>.py (examples/ is on sys.path only while it is imported)."""
    import importlib

    sys.path.insert(0, os.path.join(ROOT, "examples"))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.pop(0)


def kiln_run_binary() -> str:
    from kiln.vm._native import kiln_run_path

    return kiln_run_path()


def run_kiln_run(*args, check=True):
    """Runs the native kiln-run; returns the CompletedProcess."""
    proc = subprocess.run([kiln_run_binary(), *args], capture_output=True, text=True, timeout=120)
    if check and proc.returncode != 0:
        raise AssertionError(f"kiln-run {' '.join(args)} failed ({proc.returncode}):\n{proc.stderr}")
    return proc


def run_kiln_cli(*args, check=True):
    proc = subprocess.run([sys.executable, "-m", "kiln.cli.main", *args], capture_output=True, text=True, timeout=300,
                          cwd=ROOT)
    if check and proc.returncode != 0:
        raise AssertionError(f"kiln {' '.join(args)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return proc


def random_array(rng, shape, dtype=np.float64):
    """Small values of `dtype`: normals for floats, [-6, 6] (unsigned [0, 6]) for integers, coin flips for bool."""
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return rng.random(shape) > 0.5
    if dtype.kind in "iu":
        return rng.integers(0 if dtype.kind == "u" else -6, 7, size=shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def check_like_numpy(got, want, tol=None):
    """Same count, shapes and dtypes; floats within `tol` (default by item size), the rest exactly equal."""
    got = list(got) if isinstance(got, (list, tuple)) else [got]
    want = list(want) if isinstance(want, (list, tuple)) else [want]
    assert len(got) == len(want), (len(got), len(want))
    for g, w in zip(got, want):
        g, w = np.asarray(g), np.asarray(w)
        assert g.shape == w.shape and g.dtype == w.dtype, (g.shape, g.dtype, w.shape, w.dtype)
        if w.dtype.kind == "f" or w.dtype == ml_dtypes.bfloat16:
            t = tol or {2: 2e-3, 4: 2e-6, 8: 1e-12}[w.dtype.itemsize]
            np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64), rtol=t, atol=t)
        elif w.dtype.kind == "c":
            t = tol or {8: 2e-6, 16: 1e-12}[w.dtype.itemsize]
            np.testing.assert_allclose(g.astype(np.complex128), w.astype(np.complex128), rtol=t, atol=t)
        else:
            np.testing.assert_array_equal(g, w)


def eager_and_jit(kfn, nfn, *args, tol=None):
    """kfn eagerly and under kiln.jit, against the numpy reference nfn."""
    import kiln

    want = nfn(*args)
    check_like_numpy(kfn(*args), want, tol)
    check_like_numpy(kiln.jit(kfn)(*args), want, tol)


def kiln_run_exported(kfn, *args, tmp_path):
    """Exports kfn(*args) as the one function of a Program (parameters shaped like `args`), runs it in the
    standalone kiln-run with .npy inputs and outputs, and returns its results as a list of numpy arrays
    (the flattened output tree), so a test can compare them with numpy like eager and jit results."""
    import kiln
    from kiln import Program

    n_outputs = len(kiln.tree_leaves(kiln.jit(kfn)(*args)))
    names = [f"a{i}" for i in range(len(args))]
    namespace = {"Program": Program, "kfn": kfn, "args": args}
    params = ", ".join(f"{n}=Program.like(args[{i}])" for i, n in enumerate(names))
    exec(f"def run(self, {params}):\n    return kfn({', '.join(names)})", namespace)
    program = type("Exported", (Program,), {"run": namespace["run"]}, export_name="exported")
    path = tmp_path / "exported.vmfb"
    Program.get_compiled_artifact(program).save(path)
    inputs = []
    for n, a in zip(names, args):
        np.save(tmp_path / f"{n}.npy", np.asarray(a))
        inputs.append(f"--input=@{tmp_path / f'{n}.npy'}")
    outputs = [tmp_path / f"out{k}.npy" for k in range(n_outputs)]
    run_kiln_run(f"--module={path}", "--function=run", *inputs, *[f"--output=@{o}" for o in outputs])
    return [np.load(o) for o in outputs]


def eager_jit_and_kiln_run(kfn, nfn, *args, tmp_path, tol=None):
    """eager_and_jit, then the same function exported and run by the standalone kiln-run."""
    eager_and_jit(kfn, nfn, *args, tol=tol)
    check_like_numpy(kiln_run_exported(kfn, *args, tmp_path=tmp_path), nfn(*args), tol)
