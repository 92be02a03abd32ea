"""Operators and array methods of traced values (x + y, x @ w, x.sum(), x.T, ...)."""
from __future__ import annotations

from ..core.trace import Tracer


def install() -> None:
    import sys

    from . import creation, elementwise as ew, linalg, reductions as red

    sh = sys.modules[__package__ + ".shape"]  # the submodule: kiln.numpy.shape is numpy's shape() function

    def flip(fn):
        return lambda self, other: fn(other, self)

    ops = {
        "__add__": ew.add, "__radd__": flip(ew.add),
        "__sub__": ew.subtract, "__rsub__": flip(ew.subtract),
        "__mul__": ew.multiply, "__rmul__": flip(ew.multiply),
        "__truediv__": ew.true_divide, "__rtruediv__": flip(ew.true_divide),
        "__floordiv__": ew.floor_divide, "__rfloordiv__": flip(ew.floor_divide),
        "__mod__": ew.remainder, "__rmod__": flip(ew.remainder),
        "__pow__": ew.power, "__rpow__": flip(ew.power),
        "__matmul__": linalg.matmul, "__rmatmul__": flip(linalg.matmul),
        "__lt__": ew.less, "__le__": ew.less_equal, "__gt__": ew.greater, "__ge__": ew.greater_equal,
        "__eq__": ew.equal, "__ne__": ew.not_equal,
        "__neg__": ew.negative, "__pos__": lambda self: self, "__abs__": ew.absolute,
    }
    from . import math as m

    ops.update({
        "__floordiv__": m.floor_divide, "__rfloordiv__": flip(m.floor_divide),
        "__mod__": m.remainder, "__rmod__": flip(m.remainder),
        "__pow__": m.power_operator, "__rpow__": flip(ew.power),
        "__and__": m.bitwise_and, "__rand__": flip(m.bitwise_and),
        "__or__": m.bitwise_or, "__ror__": flip(m.bitwise_or),
        "__xor__": m.bitwise_xor, "__rxor__": flip(m.bitwise_xor),
        "__lshift__": m.left_shift, "__rlshift__": flip(m.left_shift),
        "__rshift__": m.right_shift, "__rrshift__": flip(m.right_shift),
        "__invert__": m.invert,
    })
    for name, fn in ops.items():
        setattr(Tracer, name, fn)

    Tracer.T = property(lambda self: sh.transpose(self))
    Tracer.astype = lambda self, dtype: ew.astype(self, dtype)
    Tracer.reshape = lambda self, *shape, order="C": sh.reshape(
        self, shape[0] if len(shape) == 1 and not isinstance(shape[0], int) else shape, order)
    Tracer.transpose = lambda self, *axes: sh.transpose(self, axes[0] if len(axes) == 1 and not isinstance(axes[0], int) else (axes or None))
    Tracer.sum = lambda self, axis=None, dtype=None, keepdims=False, **kw: red.sum(self, axis, dtype, keepdims, **kw)
    Tracer.mean = lambda self, axis=None, dtype=None, keepdims=False, **kw: red.mean(self, axis, dtype, keepdims, **kw)
    Tracer.max = lambda self, axis=None, keepdims=False, **kw: red.max(self, axis, keepdims, **kw)
    Tracer.min = lambda self, axis=None, keepdims=False, **kw: red.min(self, axis, keepdims, **kw)
    Tracer.dot = lambda self, other: linalg.dot(self, other)
    Tracer.squeeze = lambda self, axis=None: sh.squeeze(self, axis)
    from . import indexing as ix

    Tracer.__getitem__ = lambda self, key: ix.getitem(self, key)
    Tracer.__setitem__ = ix.setitem_error
    Tracer.at = property(lambda self: ix._IndexUpdateHelper(self))
    Tracer.prod = lambda self, axis=None, dtype=None, keepdims=False, **kw: red.prod(self, axis, dtype, keepdims, **kw)
    Tracer.var = lambda self, axis=None, dtype=None, ddof=0, keepdims=False, **kw: red.var(self, axis, dtype, ddof, keepdims, **kw)
    Tracer.std = lambda self, axis=None, dtype=None, ddof=0, keepdims=False, **kw: red.std(self, axis, dtype, ddof, keepdims, **kw)
    Tracer.argmax = lambda self, axis=None, keepdims=False: red.argmax(self, axis, keepdims)
    Tracer.argmin = lambda self, axis=None, keepdims=False: red.argmin(self, axis, keepdims)
    Tracer.all = lambda self, axis=None, keepdims=False, **kw: red.all(self, axis, keepdims, **kw)
    Tracer.any = lambda self, axis=None, keepdims=False, **kw: red.any(self, axis, keepdims, **kw)
    Tracer.cumsum = lambda self, axis=None, dtype=None: red.cumsum(self, axis, dtype)
    Tracer.cumprod = lambda self, axis=None, dtype=None: red.cumprod(self, axis, dtype)
    Tracer.flatten = lambda self, order="C": sh.ravel(self, order)
    Tracer.ravel = lambda self, order="C": sh.ravel(self, order)
    Tracer.swapaxes = lambda self, axis1, axis2: sh.swapaxes(self, axis1, axis2)
    Tracer.repeat = lambda self, repeats, axis=None: sh.repeat(self, repeats, axis)
    Tracer.take = lambda self, indices, axis=None, mode=None: ix.take(self, indices, axis, mode)
    Tracer.sort = lambda self, axis=-1, kind=None, order=None, *, stable=None, descending=False: ix.sort(
        self, axis, kind, order, stable=stable, descending=descending)
    Tracer.argsort = lambda self, axis=-1, kind=None, order=None, *, stable=None, descending=False: ix.argsort(
        self, axis, kind, order, stable=stable, descending=descending)
    Tracer.trace = lambda self, offset=0, axis1=0, axis2=1, dtype=None: linalg.trace(self, offset, axis1, axis2, dtype)
    Tracer.diagonal = lambda self, offset=0, axis1=0, axis2=1: linalg.diagonal(self, offset, axis1, axis2)
    # clip comes from the math functions (kiln.numpy.clip), looked up when called
    Tracer.clip = lambda self, min=None, max=None: _knp().clip(self, min, max)
    from . import math as m

    Tracer.round = lambda self, decimals=0: m.round(self, decimals)
    Tracer.copy = lambda self, order="C": self  # kiln arrays are immutable: a copy is the array itself
    Tracer.mT = property(lambda self: sh.matrix_transpose(self))
    Tracer.conj = Tracer.conjugate = lambda self: self  # kiln has no complex dtypes
    Tracer.real = property(lambda self: self)
    Tracer.imag = property(lambda self: creation.zeros_like(self))
    Tracer.itemsize = property(lambda self: self.aval.dtype.itemsize)
    Tracer.nbytes = property(lambda self: self.aval.size * self.aval.dtype.itemsize)
    Tracer.__divmod__ = lambda self, other: m.divmod(self, other)
    Tracer.__rdivmod__ = lambda self, other: m.divmod(other, self)

    def nonzero(self, *, size=None, fill_value=None):
        from .selection import nonzero as nz

        return nz(self, size=size, fill_value=fill_value)

    Tracer.nonzero = nonzero


def _knp():
    import kiln.numpy

    return kiln.numpy
