"""jax.sharding on one host: the names programs use to place arrays, with the single-device meaning.

kiln runs on one host CPU (kiln.devices() is one device), so every array has one shard. ``Mesh`` accepts a
device array of that one device (any shape whose size is 1) and its axis names; ``NamedSharding(mesh,
PartitionSpec(...))`` and ``SingleDeviceSharding(device)`` are accepted wherever a sharding goes
(``kiln.device_put``; ``jit``'s ``in_shardings``/``out_shardings`` are not parameters of kiln.jit) and
describe that one shard. A mesh of more than one device is an error.
"""
from __future__ import annotations

import enum
import math

import numpy as np

from kiln.devices import Device, devices as _devices

__all__ = ["Sharding", "SingleDeviceSharding", "NamedSharding", "PartitionSpec", "Mesh", "AxisType",
           "make_single_device_sharding"]


class AxisType(enum.Enum):
    Auto = enum.auto()
    Explicit = enum.auto()
    Manual = enum.auto()


class PartitionSpec(tuple):
    """How an array's axes map onto mesh axes: one entry per array axis (a mesh axis name, a tuple of
    names, or None for replicated). On one device every spec means one whole shard."""

    UNCONSTRAINED = "unconstrained"

    def __new__(cls, *partitions):
        return super().__new__(cls, partitions)

    def __repr__(self):
        return "PartitionSpec(" + ", ".join(repr(p) for p in self) + ")"


class Sharding:
    """The base class: where the shards of an array live."""

    @property
    def device_set(self) -> set:
        return set(_devices())

    @property
    def num_devices(self) -> int:
        return 1

    @property
    def is_fully_replicated(self) -> bool:
        return True

    @property
    def is_fully_addressable(self) -> bool:
        return True

    def shard_shape(self, global_shape):
        return tuple(global_shape)

    def addressable_devices_indices_map(self, global_shape):
        return {_devices()[0]: tuple(slice(None) for _ in global_shape)}

    def __eq__(self, other):
        return isinstance(other, Sharding)

    def __hash__(self):
        return hash(Sharding)


class SingleDeviceSharding(Sharding):
    def __init__(self, device: Device | None = None, *, memory_kind=None):
        if device is not None and device != _devices()[0]:
            raise ValueError(f"SingleDeviceSharding: kiln has one device, the host CPU; got {device!r}")
        self.device = _devices()[0]
        self.memory_kind = memory_kind

    def __repr__(self):
        return f"SingleDeviceSharding(device={self.device!r})"


class Mesh:
    """A named grid of devices; on kiln's one host, every axis has size 1."""

    def __init__(self, devices, axis_names, axis_types=None):
        devices = np.asarray(devices, dtype=object)
        axis_names = (axis_names,) if isinstance(axis_names, str) else tuple(axis_names)
        if devices.ndim != len(axis_names):
            raise ValueError(f"Mesh: {len(axis_names)} axis names for a device array of shape {devices.shape}")
        if devices.size != 1 or devices.reshape(-1)[0] != _devices()[0]:
            raise ValueError(f"Mesh: kiln runs on one device, the host CPU; got a mesh of {devices.size} devices")
        self.devices = devices
        self.axis_names = axis_names
        self.axis_types = axis_types

    @property
    def shape(self) -> dict:
        return dict(zip(self.axis_names, self.devices.shape))

    @property
    def size(self) -> int:
        return math.prod(self.devices.shape)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def __repr__(self):
        return f"Mesh({self.shape})"


class NamedSharding(Sharding):
    def __init__(self, mesh: Mesh, spec: PartitionSpec, *, memory_kind=None):
        for p in spec:
            names = p if isinstance(p, tuple) else (p,)
            for name in names:
                if name is not None and name != PartitionSpec.UNCONSTRAINED and name not in mesh.axis_names:
                    raise ValueError(f"NamedSharding: {name!r} is not an axis of {mesh!r}")
        self.mesh, self.spec, self.memory_kind = mesh, spec, memory_kind

    def __repr__(self):
        return f"NamedSharding(mesh={self.mesh!r}, spec={self.spec!r})"


def make_single_device_sharding(device, *, memory_kind=None) -> SingleDeviceSharding:
    return SingleDeviceSharding(device, memory_kind=memory_kind)
