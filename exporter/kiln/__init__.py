"""kiln: compile numpy-style Python array programs into deployable modules.

    from kiln import Program, jit
    import kiln.numpy as knp

The names below load their part of kiln on first use (PEP 562), so that `import kiln.vm...` (the
module format and the runtime binding) does not load the tracing frontend.
"""
import importlib
import importlib.util
import sys
import types

# The distribution whose metadata holds kiln's version (pyproject.toml's [project] name and version, the one
# place the number is written); kiln.__version__ reads it on first use.
# "kiln-compiler": the name "kiln" on the package index belongs to an unrelated project.
_DISTRIBUTION = "kiln-compiler"
_VERSION_UNKNOWN = "0+unknown"


def _version() -> str:
    """The installed distribution's version; "0+unknown" when kiln runs from a source tree never installed
    (pip install -e . records it). The first `kiln_compiler-*.dist-info` on sys.path is read directly, as
    importlib.metadata would find it (every export records the version, and importing importlib.metadata
    costs 20-40 ms); anything else (an egg, a zip) asks importlib.metadata."""
    import os
    import sys

    prefix = _DISTRIBUTION.replace("-", "_") + "-"
    for entry in sys.path:
        try:
            names = sorted(n for n in os.listdir(entry or ".") if n.startswith(prefix) and n.endswith(".dist-info"))
        except OSError:
            continue
        if not names:
            continue
        try:
            with open(os.path.join(entry or ".", names[0], "METADATA"), encoding="utf-8") as f:
                for line in f:
                    if line.startswith("Version:"):
                        return line.split(":", 1)[1].strip()
                    if not line.strip():  # the end of the headers
                        break
        except OSError:
            pass
        break
    from importlib import metadata

    try:
        return metadata.version(_DISTRIBUTION)
    except metadata.PackageNotFoundError:
        return _VERSION_UNKNOWN


def runtime_include_dir() -> str:
    """The include folder of the C runtime installed with kiln (kiln/runtime.h, kiln_io.h), for C code
    built against it."""
    from kiln.vm._native import runtime_include_dir

    return runtime_include_dir()


def runtime_cmake_dir() -> str:
    """The CMake package folder of the C runtime installed with kiln: ``cmake -Dkiln_DIR=<this>`` and
    ``find_package(kiln)`` give ``kiln::runtime``, ``kiln::runtime_static`` and ``kiln::io``."""
    from kiln.vm._native import runtime_cmake_dir

    return runtime_cmake_dir()


def runtime_pkgconfig_dir() -> str:
    """The pkg-config folder of the C runtime installed with kiln (kiln.pc, kiln-static.pc,
    kiln-io.pc), for ``PKG_CONFIG_PATH``."""
    from kiln.vm._native import runtime_pkgconfig_dir

    return runtime_pkgconfig_dir()


# public name -> (module that defines it, attribute; None: the module itself)
_LAZY_NAMES = {
    "lax": ("kiln.lax", None),
    "numpy": ("kiln.numpy", None),
    "nn": ("kiln.nn", None),
    "Array": ("kiln.core.array", "Array"),
    "Program": ("kiln.program", "Program"),
    "CompiledArtifact": ("kiln.program", "CompiledArtifact"),
    "jit": ("kiln.jit", "jit"),
    "set_worker_count": ("kiln.runtime_session", "set_worker_count"),
    **{name: ("kiln.core.errors", name)
       for name in ("KilnError", "TracingError", "ConcretizationError", "NumpyOnTracerError", "CompileError")},
    **{name: ("kiln.core.pytree", name)
       for name in ("register_pytree_node", "tree_flatten", "tree_leaves", "tree_map", "tree_unflatten")},
    **{name: ("kiln.transforms.api", name)
       for name in ("grad", "value_and_grad", "jvp", "vjp", "jacfwd", "jacrev", "hessian", "vmap", "stop_gradient")},
    "custom_jvp": ("kiln.transforms.custom", "custom_jvp"),
    "custom_vjp": ("kiln.transforms.custom", "custom_vjp"),
    "jacobian": ("kiln.transforms.api", "jacobian"),
    **{name: ("kiln.transforms.checkpoint", name)
       for name in ("checkpoint", "remat", "checkpoint_name", "checkpoint_policies", "named_call", "named_scope")},
    "linearize": ("kiln.transforms.api", "linearize"),
    **{name: ("kiln.staging", name) for name in ("make_jaxpr", "eval_shape", "ShapeDtypeStruct")},
    "disable_jit": ("kiln.jit", "disable_jit"),
    "config": ("kiln.config", "config"),
    **{name: ("kiln.devices", name)
       for name in ("Device", "devices", "local_devices", "device_count", "local_device_count", "default_backend",
                    "device_put", "device_get", "block_until_ready")},
    "tree": ("kiln.tree", None),
    "tree_util": ("kiln.tree_util", None),
    "Target": ("kiln.compiler.target", "Target"),
    **{name: ("kiln.jax_api", name)
       for name in ("enable_x64", "debug_nans", "debug_infs", "default_matmul_precision", "default_prng_impl",
                    "numpy_rank_promotion", "numpy_dtype_promotion", "log_compiles", "process_count", "process_index",
                    "process_indices", "host_count", "host_id", "host_ids", "typeof", "float0", "clear_caches",
                    "print_environment_info", "linear_transpose", "custom_gradient", "pmap", "closure_convert",
                    "pure_callback", "effects_barrier", "default_device", "fwd_and_bwd", "ensure_compile_time_eval",
                    "no_tracing", "no_execution", "explain_cache_misses", "allow_f16_reductions", "softmax_custom_jvp",
                    "enable_checks", "threefry_partitionable", "check_tracer_leaks", "thread_guard")},
    "TargetError": ("kiln.compiler.target", "TargetError"),
}

__all__ = [
    "Array", "Program", "CompiledArtifact", "jit", "lax", "numpy", "set_worker_count",
    "KilnError", "TracingError", "ConcretizationError", "NumpyOnTracerError", "CompileError",
    "register_pytree_node", "tree_flatten", "tree_leaves", "tree_map", "tree_unflatten",
    "grad", "value_and_grad", "jvp", "vjp", "jacfwd", "jacrev", "hessian", "vmap", "stop_gradient",
    "custom_jvp", "custom_vjp", "tree", "tree_util", "jacobian", "checkpoint", "remat", "checkpoint_name",
    "checkpoint_policies", "make_jaxpr", "eval_shape", "ShapeDtypeStruct", "disable_jit", "Device", "devices",
    "local_devices", "device_count", "local_device_count", "default_backend", "device_put", "device_get",
    "block_until_ready", "config", "named_call", "named_scope", "linearize", "Target", "TargetError",
    "runtime_include_dir", "runtime_cmake_dir", "runtime_pkgconfig_dir",
]


# What `import kiln` loaded before its names became lazy; the first use of a frontend name loads it all,
# so that code written against the eager package (kiln.core.pytree after `import kiln`) still works.
_FRONTEND = ("kiln.lax", "kiln.numpy", "kiln.jit", "kiln.program", "kiln.runtime_session", "kiln.transforms.api",
             "kiln.transforms.custom", "kiln.nn")
# Subpackages that work without the frontend.
_STANDALONE = ("vm", "cli")


def __getattr__(name):
    if name == "__version__":
        globals()[name] = value = _version()
        return value
    if name in _STANDALONE:
        return importlib.import_module(f"{__name__}.{name}")
    if name in _LAZY_NAMES:
        for module_name in _FRONTEND:
            importlib.import_module(module_name)
        module_name, attribute = _LAZY_NAMES[name]
        module = importlib.import_module(module_name)
        value = module if attribute is None else getattr(module, attribute)
        globals()[name] = value
        return value
    if not name.startswith("__") and importlib.util.find_spec(f"{__name__}.{name}") is not None:
        for module_name in _FRONTEND:
            importlib.import_module(module_name)
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_LAZY_NAMES) | {"__version__"})


class _KilnModule(types.ModuleType):
    """kiln's module type: loading the submodules kiln.jit, kiln.config and kiln.devices must not hide the function
    kiln.jit, the object kiln.config and the function kiln.devices that they define."""

    def __setattr__(self, name, value):
        if name in ("jit", "config", "devices") and isinstance(value, types.ModuleType):
            value = getattr(value, name)
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _KilnModule
