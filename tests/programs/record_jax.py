"""Runs every program of this folder under JAX and records its results in recorded/<program>.npz, the
reference tests/test_programs.py compares kiln with. The programs import kiln; here the import is swapped
back (each kiln module name maps to its JAX module), so they run under JAX unchanged. Run with the peers'
venv, since JAX is not a test dependency:

    benchmarks/.venv-peers/bin/python tests/programs/record_jax.py [program ...]
"""
import importlib
import sys
from pathlib import Path

import jax
import jax.numpy  # noqa: F401
import jax.scipy.linalg  # noqa: F401
import jax.scipy.special  # noqa: F401
import jax.scipy.sparse.linalg  # noqa: F401
import numpy as np

HERE = Path(__file__).resolve().parent
PROGRAMS = ["mlp_classifier", "convnet_clipped", "kernel_least_squares", "gp_regression", "hmm", "lqr",
            "attention", "lstm", "nbody", "kmeans", "vae", "transformer_lm",
            "realnvp", "langevin_logistic", "kalman", "resnet_block", "heat_equation",
            "implicit_layer", "poisson_cg",
            "dp_sgd", "nerf", "pinn", "ddpm", "neural_ode", "burgers_spectral", "reinforce", "stax_classifier",
            "graph_network", "mixture_density", "sinkhorn", "lru", "spatial_transformer", "mixed_precision",
            "bayes_linreg", "beam_search", "dirichlet_vi"]
MAIN_SEED, EXPORT_SEED = 0, 1


def swap_imports_to_jax():
    for name in ("numpy", "random", "lax", "nn", "scipy", "scipy.linalg", "scipy.special", "scipy.sparse",
                 "scipy.sparse.linalg", "scipy.stats", "tree_util", "ops", "flatten_util", "example_libraries",
                 "example_libraries.stax", "example_libraries.optimizers", "experimental", "experimental.ode",
                 "scipy.ndimage", "scipy.signal", "image"):
        sys.modules[f"kiln.{name}"] = importlib.import_module(f"jax.{name}")
    sys.modules["kiln"] = jax


def record(name):
    program = importlib.import_module(name)
    results = {f"main/{k}": np.asarray(v) for k, v in program.main(jax.random.PRNGKey(MAIN_SEED)).items()}
    fn, args = program.export(jax.random.PRNGKey(EXPORT_SEED))
    for i, leaf in enumerate(jax.tree_util.tree_leaves(jax.jit(fn)(*args))):
        results[f"export/{i}"] = np.asarray(leaf)
    (HERE / "recorded").mkdir(exist_ok=True)
    np.savez(HERE / "recorded" / f"{name}.npz", jax_version=jax.__version__, **results)
    print(f"{name}: {', '.join(sorted(results))}")


def main(names):
    swap_imports_to_jax()
    sys.path.insert(0, str(HERE))
    for name in names or PROGRAMS:
        record(name)


if __name__ == "__main__":
    main(sys.argv[1:])
