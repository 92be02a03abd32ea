"""Records the public names of jax.numpy, jax.numpy.linalg, jax.numpy.fft, jax.scipy.*, jax.random, the other
modules in MODULES and MORE_MODULES, and the top-level jax namespace into
jax_names.json, the list tests/test_jax_coverage.py measures kiln against. Run with the peers' venv
(JAX is not a test dependency):

    benchmarks/.venv-peers/bin/python tests/data/record_jax_names.py
"""
import importlib
import json
import types
from pathlib import Path

import jax

MODULES = ["jax.numpy", "jax.numpy.linalg", "jax.numpy.fft", "jax.scipy.special", "jax.scipy.linalg",
           "jax.scipy.stats", "jax.scipy.signal", "jax.random", "jax.nn", "jax.nn.initializers", "jax.lax",
           "jax.tree", "jax.tree_util", "jax.scipy.fft", "jax.scipy.integrate", "jax.scipy.ndimage", "jax.scipy.optimize",
           "jax.scipy.sparse.linalg", "jax.scipy.interpolate", "jax.scipy.cluster.vq", "jax.scipy.spatial.transform",
           "jax.ops"]
# JAX's other modules that published programs import, and the top-level namespace. Their names are filtered
# further: a function or class counts only if JAX defines it (not `map`, `partial`, `namedtuple` or `Any` that the
# module imported for itself); ONLY lists a module's documented API where the module shows its helpers too.
MORE_MODULES = ["jax", "jax.flatten_util", "jax.example_libraries.optimizers", "jax.example_libraries.stax",
                "jax.typing", "jax.dtypes", "jax.errors", "jax.debug", "jax.image", "jax.experimental.ode",
                "jax.custom_derivatives", "jax.ad_checkpoint", "jax.sharding"]
ONLY = {"jax.experimental.ode": ["odeint"], "jax.typing": ["ArrayLike", "DTypeLike"]}  # typing Unions look imported
HELPER_IMPORTS = {"map", "zip", "safe_map", "safe_zip", "unzip2", "annotations"}


def public_names(module_name):
    module = importlib.import_module(module_name)
    names = getattr(module, "__all__", None) or [n for n in dir(module) if not n.startswith("_")]
    return sorted(n for n in names if not n.startswith("_") and not isinstance(getattr(module, n, None), type(jax)))


def _defined_by_jax(module, name):
    obj = getattr(module, name)
    if name in HELPER_IMPORTS:
        return False
    if isinstance(obj, (types.FunctionType, type)) or (callable(obj) and getattr(obj, "__module__", None)):
        return getattr(obj, "__module__", "").split(".")[0] in ("jax", "jaxlib", "ml_dtypes", "numpy")
    return True  # constants, dtypes, annotations (jax.typing's Unions)


def more_public_names(module_name):
    if module_name in ONLY:
        return ONLY[module_name]
    module = importlib.import_module(module_name)
    return [n for n in public_names(module_name) if _defined_by_jax(module, n)]


def main():
    names = {m: public_names(m) for m in MODULES}
    names.update({m: more_public_names(m) for m in MORE_MODULES})
    names["jax.scipy.stats"] = sorted(n for n in dir(importlib.import_module("jax.scipy.stats")) if not n.startswith("_"))
    out = Path(__file__).with_name("jax_names.json")
    out.write_text(json.dumps({"jax_version": jax.__version__, "modules": names}, indent=1) + "\n")
    print(f"wrote {out}: " + ", ".join(f"{m} {len(v)}" for m, v in names.items()))


if __name__ == "__main__":
    main()
