"""User-facing errors raised while tracing, and the user's source line attached to every one."""
from __future__ import annotations

import re

from .source_info import SourceInfo, traceback_user_frame_info, user_frame_info


class KilnError(Exception):
    """Base class of kiln's user-facing errors."""


class TracingError(KilnError):
    """Something in the user's function cannot be traced."""

    def __init__(self, message: str, source=None):
        self.source = source if source is not None else user_frame_info()
        self.kiln_source = self.source
        self.message = message
        where = f"\n  at {self.source}" if self.source else ""
        super().__init__(message + where)


class ConcretizationError(TracingError, TypeError):
    """A traced value was used where Python needs a concrete one (if, while, int(), ...)."""


class TracerBoolConversionError(ConcretizationError):
    """bool() of a traced value (an `if` or `while` on it); jax.errors.TracerBoolConversionError."""


class TracerIntegerConversionError(ConcretizationError):
    """int() or an index of a traced value (range(), a list index, a shape); jax.errors' name."""


class NumpyOnTracerError(TracingError, TypeError):
    """A numpy function (not kiln.numpy) was applied to a traced value."""


class UnexpectedTracerError(TracingError):
    """A traced value escaped the function that was being traced."""


class CompileError(KilnError):
    """A traced program that kiln cannot compile (an unsupported op in a place, a bad target)."""


# Python's own messages name the tracer's class ("'GraphTracer' object has no attribute ...").
_TRACER_OBJECT = re.compile(r"'(?:\w*Tracer)' object")
_TRACER_NAME = re.compile(r"'(?:\w*Tracer)'")


def _clean(message: str) -> str:
    """Python's messages about a tracer, in the user's words ("a traced array")."""
    return _TRACER_NAME.sub("'traced array'", _TRACER_OBJECT.sub("a traced array", message))


def attach_source(exc: BaseException) -> None:
    """Appends the user's source line to an exception escaping a trace (once, innermost trace first).

    The line is the innermost user frame of the exception's traceback, else the user's frame
    that started the trace. The exception keeps its type; its message gains "at FILE:LINE in FN".
    """
    if getattr(exc, "kiln_source", None) is not None or isinstance(exc, (StopIteration, GeneratorExit)):
        return
    info: SourceInfo | None = traceback_user_frame_info(exc.__traceback__) or user_frame_info()
    if info is None:
        return
    try:
        exc.kiln_source = info
    except AttributeError:  # an exception type without a __dict__
        return
    if isinstance(exc, TracingError):
        exc.source = info
    where = f"\n  at {info}"
    args = exc.args
    if len(args) == 1 and isinstance(args[0], str) and str(exc) == args[0]:
        exc.args = (_clean(args[0]) + where,)
    else:
        exc.add_note(f"at {info}")
