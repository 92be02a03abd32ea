"""The process-wide runtime instance that interactive calls (kiln.jit, Program instances) run on."""
from __future__ import annotations

import threading

_lock = threading.Lock()
_instance = None
_worker_count = 0


def set_worker_count(n: int) -> None:
    """Worker threads for interactive calls (0, the default: one per core).

    Applies to Program instances created, and kiln.jit functions first compiled, after the call;
    ones already loaded keep the workers they started with.
    """
    global _instance, _worker_count
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise ValueError(f"set_worker_count: expected a non-negative int (0: one per core), got {n!r}")
    with _lock:
        if n != _worker_count:
            _worker_count = n
            _instance = None  # the next load starts an instance with n workers


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
