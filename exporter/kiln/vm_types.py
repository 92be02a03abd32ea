"""Conversions between the frontend's abstract values and the module's tensor types."""
from __future__ import annotations

from .core import dtypes
from .core.aval import ShapedArray


def tensor_type(aval: ShapedArray):
    from kiln.vm.module_spec import TensorType

    return TensorType(dtypes.short_name(aval.dtype), aval.shape)
