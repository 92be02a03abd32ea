"""User-facing errors raised while tracing, with the user's source line."""
from __future__ import annotations

from .source_info import user_frame_info


class KilnError(Exception):
    """Base class of kiln's user-facing errors."""


class TracingError(KilnError):
    """Something in the user's function cannot be traced."""

    def __init__(self, message: str, source=None):
        self.source = source if source is not None else user_frame_info()
        where = f"\n  at {self.source}" if self.source else ""
        super().__init__(message + where)


class ConcretizationError(TracingError):
    """A traced value was used where Python needs a concrete one (if, while, int(), ...)."""


class UnexpectedTracerError(TracingError):
    """A traced value escaped the function that was being traced."""


class CompileError(KilnError):
    """A traced program that kiln cannot compile (an unsupported op in a place, a bad target)."""
