"""The programs of tests/programs/: JAX programs written in JAX's idiom against kiln's names (swapping the
imports back runs them under JAX unchanged; tests/programs/record_jax.py does that and records JAX's
results in tests/programs/recorded/). Each runs here eagerly (kiln.disable_jit), under kiln.jit, and with
its core function exported and run by the standalone kiln-run, and must match JAX's recorded numbers (the
programs in EAGER_ONLY only eagerly, unless KILN_ALL_PROGRAMS=1: `make test-programs`).

kiln.random is bit-identical to JAX's, so the programs draw the same data and initial parameters as under
JAX; differences come only from float32 rounding (summation order), which a few training steps amplify,
hence the tolerances per program.
"""
import importlib
import os
import sys
from pathlib import Path

import numpy as np
import pytest

import kiln
from kiln import random
from kiln_tools import kiln_run_exported

HERE = Path(__file__).resolve().parent / "programs"
sys.path.insert(0, str(HERE))

MAIN_SEED, EXPORT_SEED = 0, 1  # as in record_jax.py
# program -> (rtol, atol) against JAX's float32 results
PROGRAMS = {
    "mlp_classifier": (2e-4, 2e-5),
    "convnet_clipped": (2e-4, 2e-5),
    "kernel_least_squares": (2e-4, 2e-5),
    "gp_regression": (2e-4, 2e-5),
    "hmm": (1e-4, 1e-5),
    "lqr": (2e-4, 2e-5),
    "attention": (1e-4, 1e-5),
    "lstm": (2e-4, 2e-5),
    "nbody": (1e-4, 1e-5),
    "kmeans": (1e-4, 1e-5),
    "vae": (2e-4, 2e-5),
    "transformer_lm": (2e-4, 2e-5),
    "realnvp": (2e-4, 2e-5),
    "langevin_logistic": (2e-4, 2e-5),
    "kalman": (2e-4, 2e-5),
    "resnet_block": (2e-4, 2e-5),
    "heat_equation": (1e-4, 1e-5),
    "implicit_layer": (2e-4, 2e-5),
    "poisson_cg": (2e-4, 2e-5),
    "dp_sgd": (2e-4, 2e-5),
    "nerf": (2e-4, 2e-5),
    "pinn": (2e-4, 2e-5),
    "ddpm": (2e-4, 2e-5),
    "neural_ode": (2e-4, 2e-5),
    "burgers_spectral": (2e-4, 2e-5),
    "reinforce": (2e-4, 2e-5),
    "stax_classifier": (2e-4, 2e-5),
    "graph_network": (2e-4, 2e-5),
    "mixture_density": (2e-4, 2e-5),
    "sinkhorn": (2e-4, 2e-5),
    "lru": (2e-4, 2e-5),
    "spatial_transformer": (2e-4, 2e-5),
    "mixed_precision": (2e-3, 1e-3),  # bfloat16 products: kiln rounds each once from float32, XLA may differ
    "bayes_linreg": (2e-4, 2e-5),
    "beam_search": (2e-4, 2e-5),
    "dirichlet_vi": (2e-4, 2e-5),
}

# Programs checked only eagerly by `make test`: their compiles under kiln.jit and for kiln-run take minutes on two
# cores, beyond the suite's budget. `make test-programs` (KILN_ALL_PROGRAMS=1) checks them in all three ways.
EAGER_ONLY = ("dp_sgd", "nerf", "pinn", "ddpm", "neural_ode", "burgers_spectral", "reinforce", "stax_classifier",
              "graph_network", "mixture_density", "sinkhorn", "lru", "spatial_transformer", "mixed_precision",
              "bayes_linreg", "beam_search", "dirichlet_vi")
COMPILED = [name for name in PROGRAMS if os.environ.get("KILN_ALL_PROGRAMS") == "1" or name not in EAGER_ONLY]


# Results whose dtype follows numpy's rule where JAX (without x64) gives the 32-bit type: (program, result)
# -> why. Everything else must have JAX's dtype exactly.
NUMPY_DTYPES = {
    ("mlp_classifier", "accuracy"): "the mean of a bool array is float64, numpy's rule",
    ("mlp_classifier", "losses"): "the biases start as zeros(n), weak float64 (numpy's default dtype; JAX's "
                                  "is float32); Adam's asarray(b1, m.dtype) then makes them strong float64",
    ("kernel_least_squares", "slope"): "the gradient at log_scale = asarray(0.0), a weak float64 (numpy's dtype "
                                       "for a Python float; JAX's is float32), has its input's dtype",
    ("gp_regression", "log_len"): "a parameter started from asarray(-0.5) (weak float64) and moved by its own "
                                  "gradient keeps its dtype",
    ("lqr", "gains"): "computed from the Jacobians of the dynamics at zeros(2), zeros(1) and the constants Q and "
                      "R, all weak float64 (numpy's default dtype): no float32 value meets them",
    ("kmeans", "sizes"): "bincount counts in int64, numpy's intp",
    ("beam_search", "counts"): "unique's counts are int64, numpy's intp",
    ("dp_sgd", "accuracy"): "the mean of a bool array is float64, numpy's rule",
    ("stax_classifier", "accuracy"): "the mean of a bool array is float64, numpy's rule",
    ("ddpm", "abar"): "the cumprod of 1 - linspace(...) (weak float64, numpy's default dtype): no float32 value "
                      "meets it",
    **{("burgers_spectral", k): "solved from the Python float amplitude 1.0 and a linspace grid, both weak "
                                "float64: no float32 value meets them" for k in ("u", "history", "ux")},
    ("neural_ode", "target"): "odeint of the weak float64 y0 = array([1.0, 0.0]) under a vector field of weak "
                              "values only",
    ("transformer_lm", "next"): "argmax gives int64, numpy's intp",
    **{("mlp_classifier", f"export/{i}"): "a bias made by zeros(n) (weak float64) and its Adam moments keep "
                                           "their dtype" for i in (3, 4, 5, 9, 10, 11, 15, 16, 17)},
    ("kernel_least_squares", "export/1"): "the gradient at log_scale = asarray(0.0), weak float64",
    **{("gp_regression", f"export/{i}"): "the gradients at the parameters made by asarray(0.0) etc., weak "
                                          "float64" for i in (1, 2, 3)},
    ("lstm", "export/0"): "the bias made by zeros(4 * HIDDEN), weak float64, updated by its gradient",
    ("kmeans", "export/1"): "argmin gives int64, numpy's intp",
}


def recorded(name):
    return np.load(HERE / "recorded" / f"{name}.npz")


def check(got, want, tol, what, numpy_dtype=False):
    got = np.asarray(got)
    assert got.shape == want.shape, f"{what}: shape {got.shape}, JAX {want.shape}"
    if numpy_dtype:
        assert got.dtype.kind == want.dtype.kind and got.dtype.itemsize == 8, f"{what}: dtype {got.dtype}"
    else:
        assert got.dtype == want.dtype, f"{what}: dtype {got.dtype}, JAX {want.dtype}"
    if want.dtype.kind == "f":
        np.testing.assert_allclose(got, want, rtol=tol[0], atol=tol[1], err_msg=what)
    else:
        np.testing.assert_array_equal(got, want, err_msg=what)


def check_main(name, results):
    want = recorded(name)
    keys = sorted(k[len("main/"):] for k in want.files if k.startswith("main/"))
    assert sorted(results) == keys
    for key in keys:
        check(results[key], want[f"main/{key}"], PROGRAMS[name], f"{name}: {key}", (name, key) in NUMPY_DTYPES)


@pytest.mark.parametrize("name", COMPILED)
def test_under_jit(name):
    check_main(name, importlib.import_module(name).main(random.PRNGKey(MAIN_SEED)))


@pytest.mark.parametrize("name", PROGRAMS)
def test_eagerly(name):
    with kiln.disable_jit():
        results = importlib.import_module(name).main(random.PRNGKey(MAIN_SEED))
    check_main(name, results)


@pytest.mark.parametrize("name", COMPILED)
def test_exported_through_kiln_run(name, tmp_path):
    fn, args = importlib.import_module(name).export(random.PRNGKey(EXPORT_SEED))
    leaves, treedef = kiln.tree_util.tree_flatten(args)
    outputs = kiln_run_exported(lambda *flat: fn(*kiln.tree_util.tree_unflatten(treedef, flat)), *leaves,
                                tmp_path=tmp_path)
    want = recorded(name)
    count = len([k for k in want.files if k.startswith("export/")])
    assert len(outputs) == count
    for i, got in enumerate(outputs):
        check(got, want[f"export/{i}"], PROGRAMS[name], f"{name}: exported output {i}", (name, f"export/{i}") in NUMPY_DTYPES)
