"""kiln.config: JAX's `jax.config.update(name, value)` for the flags JAX programs set, with what each means here.

    kiln.config.update("jax_enable_x64", True)   # accepted: kiln always has float64/int64 (numpy's dtypes)

Flags that change kiln: jax_disable_jit (kiln.jit functions run eagerly, as inside kiln.disable_jit()),
jax_no_tracing (a kiln.jit function that must trace, a cache miss, raises RuntimeError), jax_no_execution (a kiln.jit
function about to run its compiled module raises RuntimeError; eager kiln.numpy is numpy in the process and still
runs), jax_explain_cache_misses (each kiln.jit cache miss logs, at WARNING on the "kiln.jit" logger, the signature
traced and how it differs from the ones already traced), jax_allow_f16_reductions (False: lax.reduce_sum of a
float16/bfloat16 operand over a dimension longer than 1 raises ValueError, as JAX's; kiln.numpy's sums accumulate
in float32 and are unaffected), jax_softmax_custom_jvp (True: kiln.nn.softmax differentiates with JAX's custom JVP
rule y * (t - sum(y * t)) instead of through its formula) and jax_enable_checks (True: the compiler also verifies
each traced graph before its passes, besides after them).
Flags accepted with one value: jax_threefry_partitionable (True only: kiln.random's keys and bits are JAX's
partitionable threefry layout, JAX 0.10's default).
Flags checked (bools) with nothing to do in kiln: jax_check_tracer_leaks (kiln raises UnexpectedTracerError
whenever a leaked tracer is used; it adds no check when a trace ends), jax_thread_guard (guards multi-process
collectives; a kiln program runs in one process).
Flags that are checked and have no effect: jax_enable_x64 (kiln follows numpy's dtypes either way; see
docs/numpy.md), jax_platform_name / jax_platforms ('cpu' only), jax_default_matmul_precision (any
kiln.lax.Precision value: kiln's products are full precision), jax_default_prng_impl ('threefry2x32' only),
jax_debug_nans / jax_debug_infs (False only), jax_numpy_rank_promotion ('allow' only), and the logging and
compilation-cache flags. An unknown name is an AttributeError, as in JAX.
"""
from __future__ import annotations

from typing import Any, Callable

__all__ = ["config", "Config"]


def _bool(name, value):
    if not isinstance(value, (bool, int)) or value not in (0, 1):
        raise ValueError(f"config: {name} must be a bool; got {value!r}")
    return bool(value)


def _one_of(*allowed, what: str = ""):
    def check(name, value):
        if value not in allowed:
            raise ValueError(f"config: {name}={value!r} is not supported by kiln{what}; it accepts "
                             f"{', '.join(repr(a) for a in allowed)}")
        return value

    return check


def _platforms(name, value):
    if value in (None, ""):
        return value
    if not isinstance(value, str) or any(p.strip() != "cpu" for p in value.split(",")):
        raise ValueError(f"config: {name}={value!r} is not supported by kiln: it runs on the host CPU ('cpu')")
    return value


def _precision(name, value):
    if value is not None:
        from .lax.api import canonicalize_precision

        canonicalize_precision(value, f"config {name}")
    return value


def _anything(name, value):
    return value


# name -> (default, check(name, value) -> stored value)
_FLAGS: dict[str, tuple[Any, Callable]] = {
    "jax_enable_x64": (False, _bool),
    "jax_disable_jit": (False, _bool),
    "jax_platform_name": ("", _platforms),
    "jax_platforms": (None, _platforms),
    "jax_default_matmul_precision": (None, _precision),
    "jax_default_prng_impl": ("threefry2x32", _one_of("threefry2x32")),
    "jax_debug_nans": (False, _one_of(False, 0, what=" (no NaN checks)")),
    "jax_debug_infs": (False, _one_of(False, 0, what=" (no inf checks)")),
    "jax_numpy_rank_promotion": ("allow", _one_of("allow")),
    "jax_numpy_dtype_promotion": ("standard", _one_of("standard")),
    "jax_log_compiles": (False, _bool),
    "jax_traceback_filtering": ("auto", _anything),
    "jax_compilation_cache_dir": (None, _anything),
    "jax_persistent_cache_min_compile_time_secs": (1.0, _anything),
    "jax_persistent_cache_min_entry_size_bytes": (0, _anything),
    "jax_no_tracing": (False, _bool),
    "jax_no_execution": (False, _bool),
    "jax_explain_cache_misses": (False, _bool),
    "jax_allow_f16_reductions": (True, _bool),
    "jax_softmax_custom_jvp": (False, _bool),
    "jax_enable_checks": (False, _bool),
    "jax_threefry_partitionable": (True, _one_of(True, 1, what=": kiln.random's keys and bits are JAX's partitionable "
                                                "threefry layout (JAX 0.10's default)")),
    "jax_check_tracer_leaks": (False, _bool),
    "jax_thread_guard": (False, _bool),
}


class Config:
    """The flag values; read them as attributes (kiln.config.jax_enable_x64) or with read()."""

    def __init__(self):
        for name, (default, _) in _FLAGS.items():  # plain attributes: kiln.jit reads jax_disable_jit per call
            object.__setattr__(self, name, default)

    def update(self, name: str, value) -> None:
        """Sets a flag (see the module's docstring for what each does in kiln)."""
        if name not in _FLAGS:
            raise AttributeError(f"Unrecognized config option: {name}")
        object.__setattr__(self, name, _FLAGS[name][1](name, value))

    def read(self, name: str):
        if name not in _FLAGS:
            raise AttributeError(f"Unrecognized config option: {name}")
        return getattr(self, name)

    def parse_flags_with_absl(self) -> None:
        """Accepted for JAX scripts; kiln reads no command-line flags."""

    def __getattr__(self, name):  # only reached for names that are not flags
        raise AttributeError(f"Unrecognized config option: {name}")

    def __setattr__(self, name, value):
        raise AttributeError(f"set kiln.config flags with kiln.config.update({name!r}, value)")


config = Config()
