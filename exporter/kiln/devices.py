"""JAX's device names, for programs that call them: kiln runs on one host CPU, so there is one device,
placement is the identity and results are ready when a call returns (kiln's calls are synchronous)."""
from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Device", "devices", "local_devices", "device_count", "local_device_count", "default_backend",
           "device_put", "device_get", "block_until_ready"]


@dataclass(frozen=True)
class Device:
    """The host CPU that kiln's runtime runs on (jax.Device's id, platform and device_kind)."""

    id: int = 0
    platform: str = "cpu"
    device_kind: str = "cpu"
    process_index: int = 0

    def __str__(self):
        return f"CpuDevice(id={self.id})"


_HOST = Device()


def _check_backend(backend, where: str) -> None:
    if backend not in (None, "cpu"):
        raise RuntimeError(f"{where}: backend {backend!r} is not available; kiln runs on the host CPU ('cpu')")


def devices(backend=None) -> list[Device]:
    """[the host CPU]."""
    _check_backend(backend, "devices")
    return [_HOST]


def local_devices(process_index=None, backend=None) -> list[Device]:
    _check_backend(backend, "local_devices")
    return [_HOST]


def device_count(backend=None) -> int:
    _check_backend(backend, "device_count")
    return 1


def local_device_count(backend=None) -> int:
    _check_backend(backend, "local_device_count")
    return 1


def default_backend() -> str:
    return "cpu"


def device_put(x, device=None, *, src=None, donate=False, may_alias=None):
    """x itself: arrays already live where kiln computes. device must be None or the host CPU."""
    from kiln.sharding import Sharding

    if isinstance(device, Sharding):  # every kiln.sharding sharding is the one host device
        device = None
    if device is not None and device != _HOST and not (isinstance(device, str) and device == "cpu"):
        raise ValueError(f"device_put: kiln has one device, the host CPU; got {device!r}")
    return x


def device_get(x):
    """x (a tree of arrays) itself: kiln's arrays are host arrays."""
    return x


def block_until_ready(x):
    """x itself: kiln's calls return when their results are computed."""
    return x
