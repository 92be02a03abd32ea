"""Records the public names of jax.numpy, jax.numpy.linalg, jax.numpy.fft, jax.scipy.* and jax.random into
jax_names.json, the list tests/test_jax_coverage.py measures kiln against. Run with the peers' venv
(JAX is not a test dependency):

    benchmarks/.venv-peers/bin/python tests/data/record_jax_names.py
"""
import importlib
import json
from pathlib import Path

import jax

MODULES = ["jax.numpy", "jax.numpy.linalg", "jax.numpy.fft", "jax.scipy.special", "jax.scipy.linalg",
           "jax.scipy.stats", "jax.scipy.signal", "jax.random", "jax.nn", "jax.nn.initializers", "jax.lax",
           "jax.tree", "jax.tree_util", "jax.scipy.fft", "jax.scipy.integrate", "jax.scipy.ndimage", "jax.scipy.optimize",
           "jax.scipy.sparse.linalg", "jax.scipy.interpolate", "jax.scipy.cluster.vq", "jax.scipy.spatial.transform"]


def public_names(module_name):
    module = importlib.import_module(module_name)
    names = getattr(module, "__all__", None) or [n for n in dir(module) if not n.startswith("_")]
    return sorted(n for n in names if not n.startswith("_") and not isinstance(getattr(module, n, None), type(jax)))


def main():
    names = {m: public_names(m) for m in MODULES}
    names["jax.scipy.stats"] = sorted(n for n in dir(importlib.import_module("jax.scipy.stats")) if not n.startswith("_"))
    out = Path(__file__).with_name("jax_names.json")
    out.write_text(json.dumps({"jax_version": jax.__version__, "modules": names}, indent=1) + "\n")
    print(f"wrote {out}: " + ", ".join(f"{m} {len(v)}" for m, v in names.items()))


if __name__ == "__main__":
    main()
