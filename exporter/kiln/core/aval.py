"""Abstract values: what tracing knows about an array (shape and dtype)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import dtypes


@dataclass(frozen=True)
class ShapedArray:
    """An array's shape and dtype. `weak_type` marks values born of Python scalars."""

    shape: tuple[int, ...]
    dtype: np.dtype
    weak_type: bool = False

    def __post_init__(self):
        object.__setattr__(self, "shape", tuple(int(d) for d in self.shape))
        object.__setattr__(self, "dtype", dtypes.canonical(self.dtype))
        if any(d < 0 for d in self.shape):
            raise ValueError(f"negative dimension in shape {self.shape}")

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    def strip_weak(self) -> "ShapedArray":
        return ShapedArray(self.shape, self.dtype) if self.weak_type else self

    def update(self, shape=None, dtype=None, weak_type=None) -> "ShapedArray":
        return ShapedArray(
            self.shape if shape is None else shape,
            self.dtype if dtype is None else dtype,
            self.weak_type if weak_type is None else weak_type,
        )

    def str_short(self) -> str:
        dims = ",".join(str(d) for d in self.shape)
        return f"{dtypes.short_name(self.dtype)}[{dims}]"

    def __str__(self):
        return self.str_short()


class aval_property:
    """An array property (x.T) that kiln.numpy installs on ShapedArray; a tracer exposes it as its own."""

    __slots__ = ("fget",)

    def __init__(self, fget):
        self.fget = fget


class aval_method:
    """An array method (x.sum) that kiln.numpy installs on ShapedArray; a tracer exposes it bound to itself."""

    __slots__ = ("fun",)

    def __init__(self, fun):
        self.fun = fun


MASKED_ARRAY_MESSAGE = ("numpy masked arrays are not supported: kiln has no masks and would drop the mask; "
                        "pass np.ma.filled(x, fill_value) or x.data")


def reject_masked(value) -> None:
    """TypeError for a numpy masked array, which np.asarray would silently turn into its data."""
    if isinstance(value, np.ma.MaskedArray):
        raise TypeError(MASKED_ARRAY_MESSAGE)


def aval_of(value) -> ShapedArray:
    """The abstract value of a concrete value (numpy array, numpy or Python scalar)."""
    if dtypes.is_python_scalar(value):
        return ShapedArray((), dtypes.python_scalar_dtype(value), weak_type=True)
    reject_masked(value)
    arr = np.asarray(value)
    return ShapedArray(arr.shape, arr.dtype, weak_type=getattr(value, "_weak", False))
