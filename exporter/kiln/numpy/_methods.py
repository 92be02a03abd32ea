"""Operators and array methods of traced values and of kiln arrays (x + y, x @ w, x.sum(), x.at, ...).

A tracer forwards Python's operator protocol and its array attributes to its abstract value
(kiln.core.trace); install() puts kiln.numpy's implementations there, and the same table on
kiln.core.array.Array, whose results it makes kiln arrays.
"""
from __future__ import annotations

import sys

from ..core.array import Array, as_arrays, install_methods as install_array_class_methods
from ..core.aval import aval_method, aval_property
from ..core.trace import install_array_methods


def install() -> None:
    from . import creation, elementwise as ew, indexing as ix, math as m, more_math as mm, products as linalg, reductions as red, selection

    namespace = sys.modules[__package__]
    sh = sys.modules[__package__ + ".shape"]  # the submodule: kiln.numpy.shape is numpy's shape() function

    def flip(fn):
        return lambda self, other: fn(other, self)

    operators = {
        "__add__": ew.add, "__radd__": flip(ew.add),
        "__sub__": ew.subtract, "__rsub__": flip(ew.subtract),
        "__mul__": ew.multiply, "__rmul__": flip(ew.multiply),
        "__truediv__": ew.true_divide, "__rtruediv__": flip(ew.true_divide),
        "__floordiv__": m.floor_divide, "__rfloordiv__": flip(m.floor_divide),
        "__mod__": m.remainder, "__rmod__": flip(m.remainder),
        "__pow__": m.power_operator, "__rpow__": flip(ew.power),
        "__matmul__": linalg.matmul, "__rmatmul__": flip(linalg.matmul),
        "__lt__": ew.less, "__le__": ew.less_equal, "__gt__": ew.greater, "__ge__": ew.greater_equal,
        "__eq__": ew.equal, "__ne__": ew.not_equal,
        "__neg__": ew.negative, "__pos__": lambda self: self, "__abs__": ew.absolute,
        "__and__": m.bitwise_and, "__rand__": flip(m.bitwise_and),
        "__or__": m.bitwise_or, "__ror__": flip(m.bitwise_or),
        "__xor__": m.bitwise_xor, "__rxor__": flip(m.bitwise_xor),
        "__lshift__": m.left_shift, "__rlshift__": flip(m.left_shift),
        "__rshift__": m.right_shift, "__rrshift__": flip(m.right_shift),
        "__invert__": m.invert,
        "__getitem__": lambda self, key: ix.getitem(self, key),
        "__setitem__": ix.setitem_error,
        "__divmod__": lambda self, other: m.divmod(self, other),
        "__rdivmod__": lambda self, other: m.divmod(other, self),
    }
    properties = {
        "T": lambda self: sh.transpose(self),
        "at": lambda self: ix._IndexUpdateHelper(self),
        "mT": lambda self: sh.matrix_transpose(self),
        "real": lambda self: mm.real(self),
        "imag": lambda self: mm.imag(self),
        "itemsize": lambda self: self.aval.dtype.itemsize,
        "nbytes": lambda self: self.aval.size * self.aval.dtype.itemsize,
    }
    methods = {
        "astype": lambda self, dtype: ew.astype(self, dtype),
        "reshape": lambda self, *shape, order="C": sh.reshape(
            self, shape[0] if len(shape) == 1 and not isinstance(shape[0], int) else shape, order),
        "transpose": lambda self, *axes: sh.transpose(
            self, axes[0] if len(axes) == 1 and not isinstance(axes[0], int) else (axes or None)),
        "sum": lambda self, axis=None, dtype=None, keepdims=False, **kw: red.sum(self, axis, dtype, keepdims, **kw),
        "mean": lambda self, axis=None, dtype=None, keepdims=False, **kw: red.mean(self, axis, dtype, keepdims, **kw),
        "max": lambda self, axis=None, keepdims=False, **kw: red.max(self, axis, keepdims, **kw),
        "min": lambda self, axis=None, keepdims=False, **kw: red.min(self, axis, keepdims, **kw),
        "dot": lambda self, other: linalg.dot(self, other),
        "squeeze": lambda self, axis=None: sh.squeeze(self, axis),
        "prod": lambda self, axis=None, dtype=None, keepdims=False, **kw: red.prod(self, axis, dtype, keepdims, **kw),
        "var": lambda self, axis=None, dtype=None, ddof=0, keepdims=False, **kw: red.var(
            self, axis, dtype, ddof, keepdims, **kw),
        "std": lambda self, axis=None, dtype=None, ddof=0, keepdims=False, **kw: red.std(
            self, axis, dtype, ddof, keepdims, **kw),
        "argmax": lambda self, axis=None, keepdims=False: red.argmax(self, axis, keepdims),
        "argmin": lambda self, axis=None, keepdims=False: red.argmin(self, axis, keepdims),
        "all": lambda self, axis=None, keepdims=False, **kw: red.all(self, axis, keepdims, **kw),
        "any": lambda self, axis=None, keepdims=False, **kw: red.any(self, axis, keepdims, **kw),
        "cumsum": lambda self, axis=None, dtype=None: red.cumsum(self, axis, dtype),
        "cumprod": lambda self, axis=None, dtype=None: red.cumprod(self, axis, dtype),
        "flatten": lambda self, order="C": sh.ravel(self, order),
        "ravel": lambda self, order="C": sh.ravel(self, order),
        "swapaxes": lambda self, axis1, axis2: sh.swapaxes(self, axis1, axis2),
        "repeat": lambda self, repeats, axis=None: sh.repeat(self, repeats, axis),
        "take": lambda self, indices, axis=None, mode=None: ix.take(self, indices, axis, mode),
        "sort": lambda self, axis=-1, kind=None, order=None, *, stable=None, descending=False: ix.sort(
            self, axis, kind, order, stable=stable, descending=descending),
        "argsort": lambda self, axis=-1, kind=None, order=None, *, stable=None, descending=False: ix.argsort(
            self, axis, kind, order, stable=stable, descending=descending),
        "trace": lambda self, offset=0, axis1=0, axis2=1, dtype=None: linalg.trace(self, offset, axis1, axis2, dtype),
        "diagonal": lambda self, offset=0, axis1=0, axis2=1: linalg.diagonal(self, offset, axis1, axis2),
        # clip comes from the math functions (kiln.numpy.clip), looked up when called
        "clip": lambda self, min=None, max=None: namespace.clip(self, min, max),
        "round": lambda self, decimals=0: m.round(self, decimals),
        "copy": lambda self, order="C": self,  # kiln arrays are immutable: a copy is the array itself
        "conj": lambda self: mm.conjugate(self),
        "conjugate": lambda self: mm.conjugate(self),
        "nonzero": lambda self, *, size=None, fill_value=None: selection.nonzero(self, size=size, fill_value=fill_value),
        # jax.Array's methods over kiln.numpy.statistics and searching, looked up when called
        "ptp": lambda self, axis=None, out=None, keepdims=False: namespace.ptp(self, axis, out, keepdims),
        "searchsorted": lambda self, v, side="left", sorter=None, *, method="scan": namespace.searchsorted(
            self, v, side, sorter, method=method),
        "argpartition": lambda self, kth, axis=-1: namespace.argpartition(self, kth, axis),
    }
    attributes = {name: aval_property(fn) for name, fn in properties.items()}
    attributes.update({name: aval_method(fn) for name, fn in methods.items()})
    # a kiln array's view is ndarray's (same semantics); a tracer's reads its bits as jax.Array.view does
    attributes["view"] = aval_method(lambda self, dtype=None, type=None: ew.view(self, dtype, type))
    install_array_methods(operators, attributes, namespace)
    # ndarray has the other properties (T, mT, real, ...) already, with numpy's (view) semantics
    install_array_class_methods({**operators, **methods, "__array_namespace__": lambda self, *, api_version=None: namespace,
                                 "copy": lambda self, order="C": as_arrays(
        self.view(type(self).__mro__[1]).copy(order))}, {"at": properties["at"]})
