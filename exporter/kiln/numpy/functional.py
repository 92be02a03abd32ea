"""numpy's function-building helpers: vectorize and fromfunction.

Eagerly, vectorize is numpy.vectorize (the function sees numpy scalars, or the core-dimension slices of a
signature, one call each). Traced, the function is vmapped over the broadcast loop dimensions, as in
jax.numpy, so it must be written with kiln.numpy (no Python control flow on its argument's values).
"""
from __future__ import annotations

import functools
import re

import numpy as np

from ..core.trace import Tracer
from ._base import asarray, aval, broadcast_shapes, broadcast_to
from .shape import reshape


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


def _any_traced(args, kwargs):
    return any(isinstance(v, Tracer) for v in (*args, *kwargs.values()))


__all__ = ["fromfunction", "vectorize"]
