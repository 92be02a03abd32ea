"""The Workload description shared by every workload module.

A workload is written once against a small backend object (``ops``) so that
the same source runs on numpy, kiln and JAX:

* ``ops.np``: the array module (numpy, ``kiln.numpy`` or ``jax.numpy``);
* ``ops.scan(body, init, xs)``: ``lax.scan`` (a Python loop for numpy);
* ``ops.value_and_grad(f)``: reverse-mode AD (None for numpy, where a
  workload that needs it supplies a hand-written ``numpy_fn``);
* ``ops.gelu(x)``: GELU in its tanh form (kiln.nn.gelu, jax.nn.gelu; numpy's written out).

Inputs are a flat tuple of numpy arrays and results a flat tuple of arrays,
which every runner (kiln.jit, an exported kiln module under kiln-run, jax.jit,
an IREE module) can pass without tree handling of its own.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np


@dataclass(frozen=True)
class Size:
    """One problem size of a workload: a label for the table and its parameters."""

    label: str
    params: dict


@dataclass(frozen=True)
class Workload:
    """A benchmark: how to make its inputs and what to compute on them.

    ``fn(ops, *inputs)`` returns a tuple of arrays. ``numpy_fn(*inputs)``, when
    given, is the numpy implementation (and so the reference) instead of
    ``fn(numpy_ops, ...)``. ``tolerance`` bounds the error of each result
    relative to the reference's largest magnitude (see ``check_outputs``).
    """

    name: str
    description: str
    make_inputs: Callable[[dict, np.random.Generator], tuple]
    fn: Callable
    sizes: tuple[Size, ...]
    quick_sizes: tuple[Size, ...]
    tolerance: float = 1e-5
    numpy_fn: Callable | None = None
    needs: tuple[str, ...] = field(default_factory=tuple)  # backend features: "grad", "scan"
    # (inputs, results) -> the tuple that is compared with the reference's; default: results.
    compare_view: Callable | None = None
    # Memory-bound workloads: size params -> the bytes one call must move, each input read once and
    # each result written once (STREAM's counting); the report divides it by the time for GB/s and
    # compares that with the measured STREAM bandwidth. None: not memory-bound (no GB/s shown).
    bytes_moved: Callable[[dict], int] | None = None

    def size(self, label: str) -> Size:
        for s in self.quick_sizes + self.sizes:
            if s.label == label:
                return s
        raise KeyError(f"workload {self.name!r} has no size {label!r}")

    def inputs(self, size: Size, seed: int = 0) -> tuple:
        """The inputs at a size, the same bytes for every system (seeded)."""
        return tuple(np.ascontiguousarray(a) for a in self.make_inputs(size.params, np.random.default_rng(seed)))

    def view(self, inputs: tuple, results: tuple) -> tuple:
        """What is checked: the results, or the workload's compare_view of them."""
        return tuple(self.compare_view(inputs, results)) if self.compare_view else tuple(results)

    def reference(self, inputs: tuple) -> tuple:
        """numpy's results, the reference every system is checked against."""
        if self.numpy_fn is not None:
            return as_tuple(self.numpy_fn(*inputs))
        return as_tuple(self.fn(NUMPY_OPS, *inputs))


def as_tuple(result) -> tuple:
    return tuple(result) if isinstance(result, (tuple, list)) else (result,)


def _numpy_scan(body, init, xs):
    """lax.scan semantics with a Python loop: (final carry, stacked per-step outputs)."""
    carry, ys = init, []
    for i in range(xs.shape[0]):
        carry, y = body(carry, xs[i])
        ys.append(y)
    return carry, np.stack(ys)


class Ops:
    """A backend: array module plus the transformations a workload may use."""

    def __init__(self, name: str, array_module, scan=None, value_and_grad=None, lax=None, gelu=None):
        self.name = name
        self.gelu = gelu
        self.np = array_module
        self.scan = scan
        self.value_and_grad = value_and_grad
        self.lax = lax  # jax.lax-like module (conv_general_dilated), None for numpy


def _numpy_gelu(x):
    """GELU, tanh form (JAX's default approximate=True), as kiln.nn.gelu and jax.nn.gelu compute it, in x's
    dtype (the constants are Python floats, so a float32 x gives a float32 result)."""
    return 0.5 * x * (1.0 + np.tanh(float(np.sqrt(2.0 / np.pi)) * (x + 0.044715 * x ** 3)))


NUMPY_OPS = Ops("numpy", np, scan=_numpy_scan, gelu=_numpy_gelu)


def check_outputs(got: tuple, expected: tuple, tolerance: float) -> tuple[bool, float, str]:
    """Compares results with the reference: (ok, worst relative error, message).

    The error of each result is max|got - expected| / max|expected| (the
    denominator floored at 1e-30), so that a tolerance reads as "digits of the
    result's scale"; shapes must match exactly and NaN never passes.
    """
    if len(got) != len(expected):
        return False, float("inf"), f"{len(got)} results, expected {len(expected)}"
    worst = 0.0
    for i, (g, e) in enumerate(zip(got, expected)):
        g = np.asarray(g)
        e = np.asarray(e)
        if g.shape != e.shape:
            return False, float("inf"), f"result {i}: shape {g.shape}, expected {e.shape}"
        if e.size == 0:
            continue
        g64 = g.astype(np.float64)
        e64 = e.astype(np.float64)
        if not np.all(np.isfinite(g64) == np.isfinite(e64)):
            return False, float("inf"), f"result {i}: non-finite values where numpy has finite ones (or vice versa)"
        finite = np.isfinite(e64)
        scale = max(float(np.max(np.abs(e64[finite]), initial=0.0)), 1e-30)
        err = float(np.max(np.abs(g64[finite] - e64[finite]), initial=0.0)) / scale
        worst = max(worst, err)
        if not err <= tolerance:
            return False, err, f"result {i}: relative error {err:.3g} > tolerance {tolerance:.1g}"
    return True, worst, "ok"
