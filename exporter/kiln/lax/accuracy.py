"""jax.lax's accuracy= for transcendental functions: Tolerance and AccuracyMode, accepted and checked by exp,
exp2, expm1, log, log1p, tanh, logistic, sin, cos, tan, sqrt, rsqrt and cbrt. They do not change the result:
each kiln function has one implementation, accurate to the bounds in docs/accuracy.md (XLA may pick a faster
or a more accurate one)."""
from __future__ import annotations

import dataclasses
import enum


@dataclasses.dataclass(frozen=True)
class Tolerance:
    """jax.lax.Tolerance: the error a result may have (absolute, relative, in ulps)."""

    atol: float = 0.0
    rtol: float = 0.0
    ulps: int = 0


class AccuracyMode(enum.Enum):
    """jax.lax.AccuracyMode: the implementation XLA should pick (the most accurate or its default)."""

    HIGHEST = 1
    DEFAULT = 2


def check_accuracy(where: str, accuracy) -> None:
    """A TypeError naming `where` unless accuracy is None, a Tolerance or an AccuracyMode."""
    if accuracy is not None and not isinstance(accuracy, (Tolerance, AccuracyMode)):
        raise TypeError(f"{where}: accuracy must be None, a kiln.lax.Tolerance or a kiln.lax.AccuracyMode; "
                        f"got {accuracy!r}")
