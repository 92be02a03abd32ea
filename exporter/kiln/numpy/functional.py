"""numpy's function-applying helpers: vectorize, fromfunction, apply_along_axis and apply_over_axes.

Eagerly, vectorize is numpy.vectorize (the function sees numpy scalars, or the core-dimension slices of a
signature, one call each). Traced, the function is vmapped over the broadcast loop dimensions, as in
jax.numpy, so it must be written with kiln.numpy (no Python control flow on its argument's values).
"""
from __future__ import annotations

import functools
import re

import numpy as np

from ..core.trace import Tracer
from ._base import asarray, aval, broadcast_shapes, broadcast_to, normalize_axes
from .shape import expand_dims, moveaxis, reshape


def fromfunction(function, shape, *, dtype=float, **kwargs):
    """numpy.fromfunction: function called once with the index arrays of `shape` (of `dtype`)."""
    from .construction import indices

    grids = indices(tuple(int(d) for d in shape), dtype=dtype)
    return function(*[grids[i] for i in range(len(shape))], **kwargs)


_CORE = re.compile(r"\(([^()]*)\)")


def _parse_signature(signature):
    if "->" not in signature:
        raise ValueError(f"vectorize: not a valid gufunc signature: {signature!r}")
    inputs, outputs = signature.replace(" ", "").split("->")
    parse = lambda part: [tuple(d for d in dims.split(",") if d) for dims in _CORE.findall(part)]  # noqa: E731
    return parse(inputs), parse(outputs)


class vectorize:  # noqa: N801  (numpy's name)
    """numpy.vectorize (see the module docstring); excluded names or positions are passed through unchanged."""

    def __init__(self, pyfunc, otypes=None, doc=None, excluded=None, cache=False, signature=None):
        self.pyfunc = pyfunc
        self.excluded = set(excluded or ())
        self.signature = signature
        self.otypes = otypes
        self.__doc__ = doc if doc is not None else pyfunc.__doc__
        functools.update_wrapper(self, pyfunc, updated=())

    def __call__(self, *args, **kwargs):
        if not _any_traced(args, kwargs):
            return np.vectorize(self.pyfunc, otypes=self.otypes, excluded=self.excluded,
                                signature=self.signature)(*args, **kwargs)
        mapped = [i for i in range(len(args)) if i not in self.excluded]
        fixed_kwargs = {k: v for k, v in kwargs.items() if k in self.excluded}
        mapped_kwargs = {k: v for k, v in kwargs.items() if k not in self.excluded}
        names = list(mapped_kwargs)
        operands = [asarray(args[i]) for i in mapped] + [asarray(mapped_kwargs[k]) for k in names]
        if self.signature is not None:
            cores, _ = _parse_signature(self.signature)
            if len(cores) != len(operands):
                raise TypeError(f"vectorize: the signature {self.signature!r} has {len(cores)} inputs, got "
                                f"{len(operands)} arguments")
            core_ndims = [len(c) for c in cores]
        else:
            core_ndims = [0] * len(operands)
        loops = [aval(x).shape[:aval(x).ndim - k] for x, k in zip(operands, core_ndims)]
        loop_shape = broadcast_shapes(*loops, where="vectorize")
        size = int(np.prod(loop_shape, dtype=np.int64))
        flat = [reshape(broadcast_to(x, loop_shape + aval(x).shape[aval(x).ndim - k:]),
                        (size,) + aval(x).shape[aval(x).ndim - k:]) for x, k in zip(operands, core_ndims)]

        def one(*values):
            call_args = list(args)
            for i, v in zip(mapped, values[:len(mapped)]):
                call_args[i] = v
            call_kwargs = dict(fixed_kwargs, **dict(zip(names, values[len(mapped):])))
            return self.pyfunc(*call_args, **call_kwargs)

        from ..transforms.api import vmap  # numpy sits above transforms; api imports kiln.numpy, so not at top

        out = vmap(one)(*flat)
        unflatten = lambda y: reshape(y, loop_shape + aval(y).shape[1:])  # noqa: E731
        return tuple(unflatten(y) for y in out) if isinstance(out, tuple) else unflatten(out)


def apply_along_axis(func1d, axis, arr, *args, **kwargs):
    """numpy.apply_along_axis: func1d applied to every 1-D slice along axis; its result's dimensions take
    axis's place. Eagerly each slice is passed as numpy does; traced, func1d is vmapped (as jax.numpy), so
    it must be written with kiln.numpy."""
    x = asarray(arr)
    nd = aval(x).ndim
    ax = normalize_axes(axis, nd, "apply_along_axis")[0]
    moved = moveaxis(x, ax, -1)
    if isinstance(x, Tracer):
        from ..transforms.api import vmap  # numpy sits above transforms; api imports kiln.numpy, so not at top

        fn = lambda row: func1d(row, *args, **kwargs)  # noqa: E731
        for _ in range(nd - 1):
            fn = vmap(fn)
        out = fn(moved)
    else:
        lead = moved.shape[:-1]
        rows = [asarray(func1d(moved[i], *args, **kwargs)) for i in np.ndindex(*lead)]
        out = np.stack(rows).reshape(lead + np.shape(rows[0])) if rows else np.zeros(lead)
    out_nd = aval(out).ndim - (nd - 1)
    return moveaxis(out, tuple(range(nd - 1, nd - 1 + out_nd)), tuple(range(ax, ax + out_nd))) if out_nd else out


def apply_over_axes(func, a, axes):
    """numpy.apply_over_axes: func(a, axis) for each axis in turn, a dropped axis put back with size 1."""
    x = asarray(a)
    for axis in (axes if isinstance(axes, (tuple, list)) else (axes,)):
        ax = axis + aval(x).ndim if axis < 0 else axis
        out = asarray(func(x, ax))
        if aval(out).ndim != aval(x).ndim:
            out = expand_dims(out, ax)
            if aval(out).ndim != aval(x).ndim:
                raise ValueError("apply_over_axes: function is not returning an array of the correct shape")
        x = out
    return x


def _any_traced(args, kwargs):
    return any(isinstance(v, Tracer) for v in (*args, *kwargs.values()))


__all__ = ["fromfunction", "vectorize", "apply_along_axis", "apply_over_axes"]
