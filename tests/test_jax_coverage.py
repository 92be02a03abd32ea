"""How much of JAX's API kiln has: every public name of jax.numpy (and its linalg and fft), jax.scipy (and its
fft, integrate, ndimage, optimize, sparse.linalg, interpolate, cluster.vq and spatial.transform),
jax.random, jax.nn, jax.lax, jax.tree(_util), the top-level jax namespace and the other modules published programs
import (flatten_util, example_libraries, typing, dtypes, errors, debug, image, experimental.ode,
custom_derivatives, ad_checkpoint, sharding, ops), recorded from JAX in tests/data/jax_names.json, is either
present in kiln's counterpart, deliberately absent (listed below with the reason), or still missing.

The test prints the table (run with -s, or read CI's log), fails if a deliberately absent name turns up
(so the list stays true), and fails if coverage drops below the floor recorded for each module (raise the
floor when names land, so none is lost again).
"""
import importlib
import json
import types
from pathlib import Path

import pytest

NAMES = json.loads((Path(__file__).parent / "data" / "jax_names.json").read_text())

# JAX module -> kiln module
COUNTERPARTS = {
    "jax.numpy": "kiln.numpy", "jax.numpy.linalg": "kiln.numpy.linalg", "jax.numpy.fft": "kiln.numpy.fft",
    "jax.scipy.special": "kiln.scipy.special", "jax.scipy.linalg": "kiln.scipy.linalg",
    "jax.scipy.stats": "kiln.scipy.stats", "jax.scipy.signal": "kiln.scipy.signal", "jax.random": "kiln.random",
    "jax.nn": "kiln.nn", "jax.nn.initializers": "kiln.nn.initializers", "jax.lax": "kiln.lax",
    "jax.tree": "kiln.tree", "jax.tree_util": "kiln.tree_util",
    "jax.scipy.fft": "kiln.scipy.fft", "jax.scipy.integrate": "kiln.scipy.integrate",
    "jax.scipy.ndimage": "kiln.scipy.ndimage", "jax.scipy.optimize": "kiln.scipy.optimize",
    "jax.scipy.sparse.linalg": "kiln.scipy.sparse.linalg", "jax.scipy.interpolate": "kiln.scipy.interpolate",
    "jax.scipy.cluster.vq": "kiln.scipy.cluster.vq", "jax.scipy.spatial.transform": "kiln.scipy.spatial.transform",
    "jax": "kiln", "jax.flatten_util": "kiln.flatten_util",
    "jax.example_libraries.optimizers": "kiln.example_libraries.optimizers",
    "jax.example_libraries.stax": "kiln.example_libraries.stax", "jax.typing": "kiln.typing", "jax.dtypes": "kiln.dtypes",
    "jax.errors": "kiln.errors", "jax.debug": "kiln.debug", "jax.image": "kiln.image",
    "jax.experimental.ode": "kiln.experimental.ode", "jax.custom_derivatives": "kiln.custom_derivatives",
    "jax.ad_checkpoint": "kiln.ad_checkpoint", "jax.sharding": "kiln.sharding", "jax.ops": "kiln.ops",
}

_EIG = "needs a nonsymmetric eigensolver with complex results, which kiln has not written (eigh covers symmetric)"
_NARROW = "sub-byte and 8-bit float storage types are not kiln dtypes"
_TEXT = "string and object arrays have no static-shape numeric meaning"

_MULTI = "multi-device or multi-host sharding, placement and transfer: a kiln module runs on one host's CPU"
_REF = "JAX's mutable array references: kiln's traced functions are pure and a Program's state lives in its globals"
_TYPED_KEY = "typed PRNG key arrays: a kiln key is a uint32 array (JAX's raw keys; kiln.random.key_dtype)"

DELIBERATELY_ABSENT = {
    "jax": {
        **{n: _MULTI for n in ("NamedSharding", "P", "Shard", "make_array_from_callback",
                               "make_array_from_process_local_data", "make_array_from_single_device_arrays", "make_mesh",
                               "set_mesh", "reshard", "shard_map", "smap", "remove_size_one_mesh_axis_from_type",
                               "auto_pcast", "copy_to_host_async", "memory", "transfer_guard",
                               "transfer_guard_device_to_device", "transfer_guard_device_to_host",
                               "transfer_guard_host_to_device", "live_arrays", "array_garbage_collection_guard")},
        **{n: _REF for n in ("Ref", "new_ref", "empty_ref", "free_ref", "freeze")},
        "ds": "the dynamic-slice helper of mutable references and Pallas kernels: " + _REF,
        "ad": "JAX's internal autodiff namespace (jax.interpreters.ad's rule tables): kiln's rules are "
              "kiln.transforms.jvp/transpose registries",
        "jax2tf_associative_scan_reductions": "a jax2tf (TensorFlow export) flag",
        "enable_custom_prng": _TYPED_KEY, "legacy_prng_key": _TYPED_KEY, "debug_key_reuse": _TYPED_KEY + " (no key "
        "reuse checker)",
        "make_user_context": "keys JAX's jit cache on user context: kiln.jit's cache is keyed on the abstract "
                             "signature only",
    },
    "jax.sharding": {n: _MULTI + " (mesh contexts, abstract meshes and explicit-sharding axis types)"
                     for n in ("AbstractDevice", "AbstractMesh", "ManualAxisType", "auto_axes", "explicit_axes",
                               "get_abstract_mesh", "get_mesh", "reshard", "set_mesh", "use_abstract_mesh")},
    "jax.custom_derivatives": {
        **{n: "a primitive object: kiln's custom_jvp/custom_vjp bind kiln's own primitives"
           for n in ("custom_jvp_call_p", "custom_vjp_call_p", "remat_opt_p")},
    },
    "jax.dtypes": {"extended": _TYPED_KEY + "; kiln has no extended dtypes", "prng_key": _TYPED_KEY},
    "jax.errors": {
        "InconclusiveDimensionOperation": "symbolic (polymorphic) shapes: kiln's shapes are static",
        "JaxprTypeError": "raised by JAX's jaxpr type checker; kiln's IR verifier raises kiln's own errors",
        "KeyReuseError": _TYPED_KEY + " (no key reuse checker)",
    },
    "jax.numpy": {
        **{n: _NARROW for n in ("float4_e2m1fn", "float6_e2m3fn", "float6_e3m2fn", "float8_e3m4", "float8_e4m3",
                                "float8_e4m3b11fnuz", "float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2",
                                "float8_e5m2fnuz", "float8_e8m0fnu", "int1", "int2", "int4", "uint1", "uint2",
                                "uint4")},
        **{n: _TEXT for n in ("object_", "frompyfunc")},
        "roots": "the eigenvalues of the companion matrix: " + _EIG,
    },
    "jax.numpy.linalg": {"eig": _EIG, "eigvals": _EIG},
    "jax.lax": {
        **{n: "a primitive object: kiln's primitives are kiln.lax.prims.*, and programs call the functions"
           for n in NAMES["modules"]["jax.lax"] if n.endswith("_p")},
        **{n: "a multi-device collective or sharding annotation: a kiln module runs on one host (psum, pmean, "
              "pmax, pmin, axis_index, axis_size, all_gather, psum_scatter, ppermute, pshuffle, pbroadcast, "
              "all_to_all, pswapaxes work over vmap/pmap's named axis)"
           for n in ("pcast", "precv", "psend", "ragged_all_to_all", "with_sharding_constraint")},
        **{n: "an XLA token or effect-ordering construct, which kiln's modules do not have"
           for n in ("after_all", "create_token", "optimization_barrier", "platform_dependent", "composite",
                     "dce_sink", "stage")},
        "rng_uniform": "XLA's stateful generator (its state lives in the backend): kiln.random's key-based draws",
        "shape_as_value": "a dynamic shape as an array: kiln's shapes are static",
    },
    "jax.nn": {n: "quantizes operands into microscaling (mxfp8, nvfp4) block formats, whose " + _NARROW
               for n in ("get_scaled_dot_general_config", "scaled_dot_general")},
    "jax.random": {
        "random_gamma_p": "a primitive object (JAX's gamma sampler): kiln's gamma is a custom_jvp function whose "
                          "derivative is kiln.lax.random_gamma_grad",
    },
}

# The coverage (present / names not deliberately absent) each module must keep; raised as names land.
# (2026-11-28: lax.bitcast_convert_type/reduce_precision/custom_linear_solve/custom_root/scaled_dot/
# rng_bit_generator/fft, nn.scaled_matmul; scipy.fft, integrate,
# ndimage, cluster.vq, sparse.linalg, optimize, interpolate, spatial.transform)
# recorded 2026-11-23 (jax.numpy.fft complete with complex64/complex128 dtypes, docs/numpy.md; lax's special
# functions, scipy.special's sici/fresnel/owens_t/bessel_jn/hyp1f1/hyp2f1, random.key_dtype; scipy.special's
# wofz/sph_harm_y and scipy.signal's stft/istft/welch/csd)
FLOORS = {
    "jax.numpy": 0.997,
    "jax.numpy.linalg": 1.0,
    "jax.numpy.fft": 1.0,
    "jax.scipy.special": 1.0,
    "jax.scipy.linalg": 1.0,
    "jax.scipy.stats": 1.0,
    "jax.scipy.signal": 1.0,
    "jax.random": 1.0,
    "jax.nn": 1.0,
    "jax.nn.initializers": 1.0,
    "jax.lax": 1.0,
    "jax.tree": 1.0,
    "jax.tree_util": 1.0,
    "jax.scipy.fft": 1.0,
    "jax.scipy.sparse.linalg": 1.0,
    "jax.scipy.optimize": 1.0,
    "jax.scipy.interpolate": 1.0,
    "jax.scipy.spatial.transform": 1.0,
    "jax.scipy.integrate": 1.0,
    "jax.scipy.ndimage": 1.0,
    "jax.scipy.cluster.vq": 1.0,
    "jax": 1.0,
    "jax.flatten_util": 1.0,
    "jax.example_libraries.optimizers": 1.0,
    "jax.example_libraries.stax": 1.0,
    "jax.typing": 1.0,
    "jax.dtypes": 1.0,
    "jax.errors": 1.0,
    "jax.custom_derivatives": 1.0,
    "jax.ad_checkpoint": 1.0,
    "jax.experimental.ode": 1.0,
    "jax.image": 1.0,
    "jax.debug": 1.0,
    "jax.sharding": 1.0,
    "jax.ops": 1.0,
}


def _module(name):
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


def _coverage(jax_module):
    kiln_module = _module(COUNTERPARTS[jax_module])
    absent = DELIBERATELY_ABSENT.get(jax_module, {})
    present, missing = [], []
    for name in NAMES["modules"][jax_module]:
        if name in absent:
            continue
        (present if kiln_module is not None and hasattr(kiln_module, name) else missing).append(name)
    return kiln_module, present, missing, absent


def test_print_coverage(capsys):
    lines = [f"kiln's coverage of JAX {NAMES['jax_version']}'s API (present / in scope; deliberately absent):"]
    for jax_module in COUNTERPARTS:
        _, present, missing, absent = _coverage(jax_module)
        scope = len(present) + len(missing)
        lines.append(f"  {jax_module:22s} {len(present):4d} / {scope:4d} ({100 * len(present) / max(scope, 1):5.1f}%)"
                     f"  absent on purpose: {len(absent)}")
        if missing:
            lines.append("      missing: " + ", ".join(missing))
    with capsys.disabled():
        print("\n" + "\n".join(lines))


@pytest.mark.parametrize("jax_module", sorted(DELIBERATELY_ABSENT))
def test_deliberately_absent_names_are_absent(jax_module):
    kiln_module, _, _, absent = _coverage(jax_module)
    for name, why in absent.items():
        assert why, name
        assert name in NAMES["modules"][jax_module], f"{name} is not a {jax_module} name"
        # A kiln submodule of that name is not JAX's function (kiln.lax.composite holds composite primitives).
        assert kiln_module is None or isinstance(getattr(kiln_module, name, None), (types.ModuleType, type(None))), (
            f"{COUNTERPARTS[jax_module]}.{name} exists: remove it from DELIBERATELY_ABSENT")


@pytest.mark.parametrize("jax_module", sorted(COUNTERPARTS))
def test_coverage_does_not_drop(jax_module):
    _, present, missing, _ = _coverage(jax_module)
    coverage = len(present) / max(len(present) + len(missing), 1)
    assert coverage >= FLOORS.get(jax_module, 0.0), (
        f"{jax_module}: coverage fell to {coverage:.3f} (floor {FLOORS[jax_module]}); missing: {missing}")


def test_kiln_ops_has_exactly_jax_ops_names():
    """kiln.ops is jax.ops: the same public names, no helper (math, np, ...) showing through."""
    ops = importlib.import_module("kiln.ops")
    assert sorted(n for n in dir(ops) if not n.startswith("_")) == NAMES["modules"]["jax.ops"] == sorted(ops.__all__)
