"""The process-wide runtime instance that interactive calls (kiln.jit, Program instances) run on."""
from __future__ import annotations

import threading

_lock = threading.Lock()
_instance = None
_worker_count = 0


def set_worker_count(n: int) -> None:
    """Worker threads for interactive calls (0, the default: one per core).

    Applies to Program instances created, and kiln.jit functions first compiled, after the call;
    ones already loaded keep the workers they started with. The instance starts here, so that a
    count the runtime refuses (above its maximum) raises ValueError here, with the runtime's message.
    """
    global _instance, _worker_count
    from kiln.vm.runtime import Instance, check_worker_count

    n = check_worker_count(n, "set_worker_count")
    with _lock:
        if n != _worker_count or _instance is None:
            try:
                _instance = Instance(worker_count=n)
            except ValueError as e:  # above the runtime's maximum
                raise ValueError(f"set_worker_count: {e}") from None
            _worker_count = n


def default_instance():
    """The runtime instance new modules load into, created on first use with the set worker count."""
    global _instance
    with _lock:
        if _instance is None:
            from kiln.vm.runtime import Instance

            _instance = Instance(worker_count=_worker_count)
        return _instance


class LoadedModule:
    """A module loaded into the default instance; contexts hold its globals."""

    def __init__(self, module_bytes: bytes):
        from kiln.vm.runtime import Module

        self.module = Module.from_bytes(default_instance(), module_bytes)

    def new_context(self):
        from kiln.vm.runtime import Context

        return Context(self.module)


def load_module(module_bytes: bytes) -> LoadedModule:
    return LoadedModule(module_bytes)
