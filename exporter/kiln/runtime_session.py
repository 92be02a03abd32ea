"""The process-wide runtime instance that interactive calls (kiln.jit, Program instances) run on."""
from __future__ import annotations

import threading

_lock = threading.Lock()
_instance = None


def default_instance():
    """One kiln runtime instance per process, created on first use."""
    global _instance
    with _lock:
        if _instance is None:
            from kiln.vm.runtime import Instance

            _instance = Instance()
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
